//! Recorded real outputs (`../shared/testdata/toolcalls/bfcl-result`): the Hermes parser
//! recovers the calls that NousResearch Hermes models wrote on BFCL v1, for every id that
//! `possible_answer` covers. A call is recovered when the output parses without errors into
//! calls whose names are the ground truth's (BFCL renames `a.b` to `a_b` in prompts, and
//! numbers parallel answers `name_1`, `name_2`). Malformed model output (reported as errors
//! with its text) is counted apart: a correctly reported error, not a parser failure.

use crate::common;

use std::collections::BTreeMap;

use serde_json::Value;
use tokensieve_tools::{Hermes, Tool, ToolCallFormat};

const CATEGORIES: &[&str] = &[
    "simple",
    "multiple_function",
    "parallel_function",
    "parallel_multiple_function",
];

fn jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn by_id(rows: Vec<Value>) -> BTreeMap<String, Value> {
    rows.into_iter()
        .filter_map(|r| Some((r.get("id")?.as_str()?.to_owned(), r)))
        .collect()
}

/// The tools of a BFCL v1 question, named as the prompt named them (`.` → `_`).
fn question_tools(q: &Value) -> Vec<Tool> {
    let fs: Vec<Value> = match q.get("function") {
        Some(Value::Array(a)) => a.clone(),
        Some(f) => vec![f.clone()],
        None => Vec::new(),
    };
    fs.iter()
        .filter_map(|f| {
            let mut f = f.clone();
            let name = f.get("name")?.as_str()?.replace('.', "_");
            f["name"] = Value::String(name);
            Tool::from_bfcl_function(&f).ok()
        })
        .collect()
}

fn truth_names(answer: &Value, parallel: bool) -> Vec<String> {
    let gt = &answer["ground_truth"];
    let list: Vec<&Value> = match gt {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let mut names = Vec::new();
    for item in list {
        if let Value::Object(m) = item {
            for k in m.keys() {
                let mut n = k.replace('.', "_");
                if parallel {
                    if let Some((base, idx)) = n.rsplit_once('_') {
                        if idx.chars().all(|c| c.is_ascii_digit()) && !idx.is_empty() {
                            n = base.to_owned();
                        }
                    }
                }
                names.push(n);
            }
        }
    }
    names.sort();
    names
}

#[derive(Default, Debug)]
struct Tally {
    outputs: usize,
    recovered: usize,
    reported_malformed: usize,
    no_call: usize,
    wrong_calls: usize,
}

#[test]
fn hermes_models_outputs_are_recovered() {
    let Some(root) = common::testdata_path("toolcalls/bfcl-result") else {
        return;
    };
    let models = [
        "NousResearch_Hermes-2-Pro-Llama-3-8B",
        "NousResearch_Hermes-2-Pro-Llama-3-70B",
        "NousResearch_Hermes-2-Pro-Mistral-7B",
        "NousResearch_Hermes-2-Theta-Llama-3-8B",
        "NousResearch_Hermes-2-Theta-Llama-3-70B",
    ];
    let hermes = Hermes::default();
    let mut table = Vec::new();
    for model in models {
        let mut t = Tally::default();
        for cat in CATEGORIES {
            let file = format!("gorilla_openfunctions_v1_test_{cat}");
            let questions = by_id(jsonl(&root.join(format!("questions/{file}.json"))));
            let answers = by_id(jsonl(
                &root.join(format!("questions/possible_answer/{file}.json")),
            ));
            let results = jsonl(&root.join(format!("results/{model}/{file}_result.json")));
            for r in results {
                let id = r["id"].as_str().unwrap_or_default();
                let (Some(q), Some(a)) = (questions.get(id), answers.get(id)) else {
                    continue;
                };
                let Some(text) = r["result"].as_str() else {
                    continue;
                };
                t.outputs += 1;
                let tools = question_tools(q);
                let out = hermes.parse(text, &tools);
                let mut got: Vec<String> = out.tool_calls.iter().map(|c| c.name.clone()).collect();
                got.sort();
                let show = std::env::var("TOOL_RECORDED_SAMPLES").is_ok();
                if show && (out.errors.len() + usize::from(got.is_empty())) > 0 {
                    eprintln!(
                        "{model} {id}: {:?} {text:?}",
                        out.errors.first().map(|e| &e.error)
                    );
                }
                if !out.errors.is_empty() {
                    // Every malformed call's text stays in content.
                    let content = out.content.clone().unwrap_or_default();
                    for e in &out.errors {
                        assert!(content.contains(e.text.trim()), "{model} {id}: {e:?}");
                    }
                    t.reported_malformed += 1;
                } else if got.is_empty() {
                    t.no_call += 1;
                } else if got == truth_names(a, cat.starts_with("parallel")) {
                    t.recovered += 1;
                } else {
                    t.wrong_calls += 1;
                }
            }
        }
        table.push((model, t));
    }
    println!("| model | outputs | recovered | malformed (reported) | no call | other calls |");
    println!("|---|---|---|---|---|---|");
    for (m, t) in &table {
        println!(
            "| {m} | {} | {} ({:.1}%) | {} | {} | {} |",
            t.outputs,
            t.recovered,
            100.0 * t.recovered as f64 / t.outputs.max(1) as f64,
            t.reported_malformed,
            t.no_call,
            t.wrong_calls
        );
    }
    // Measured rates, as lower bounds. The failure classes, from the samples that
    // TOOL_RECORDED_SAMPLES=1 prints:
    // * Hermes-2-Pro-Mistral-7B writes Python dicts (`{'a': 1}`, `"name": 'f'`) inside the
    //   envelope in about half of its outputs: not JSON, reported as InvalidJson with the
    //   text (vLLM's Hermes parser rejects them too).
    // * The Llama-3 models sometimes add a second, truncated or Python-dict block after a
    //   good one: the good calls are read, the bad block is reported.
    // * Hermes-2-Theta-Llama-3-70B wraps its JSON in `<|im_start|>` instead of
    //   `<tool_call>` (a realistic negative: no call markers, so no calls; the text stays
    //   content).
    // * "other calls": well-formed calls to another function or another number of calls
    //   than the ground truth (the model's choice, not the parser's).
    let floors = [615, 601, 305, 617, 4];
    for ((m, t), floor) in table.iter().zip(floors) {
        assert!(
            t.recovered >= floor,
            "{m}: {} recovered, expected at least {floor}",
            t.recovered
        );
    }
    for (m, t) in &table {
        assert!(t.outputs > 0, "{m}: no outputs read");
        // Every output is accounted for: recovered, reported malformed, no call (the model
        // answered in prose), or calls other than the ground truth's (the model chose
        // another function or count: semantic, not syntactic).
        assert_eq!(
            t.recovered + t.reported_malformed + t.no_call + t.wrong_calls,
            t.outputs
        );
    }
}
