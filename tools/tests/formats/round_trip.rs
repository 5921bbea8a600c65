//! One table for every registered tool-call format (`format_names()`), each on its real
//! vocabulary: the renderer and the grammar agree (1, 2 and 3 rendered calls are accepted
//! token by token under every tool_choice that allows them, then the stop token, and parse
//! back to the same calls), and whatever a format's tag lets the model write under any
//! tool_choice, its parser reads as calls that tool_choice allows (issue 23, items 1 and 4).

use crate::common::RealTokenizer;
use crate::{special_tokens, tool_check, xml_families};

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;
use tokensieve_tools::{format_by_name, format_names, Tool, ToolCall, ToolCallFormat, ToolChoice};

/// A family's test vocabulary: the folder under `../shared/tokenizers` (or a test
/// vocabulary built on one, named after its builder), and the closing strings a random
/// walk may take as one step in raw-text states (see `tool_check::random_walk_hinted`).
fn family_vocabulary(format: &str) -> (&'static str, &'static [&'static str]) {
    match format {
        "harmony" | "openai" => ("gptoss", &[]),
        "deepseek_v3" | "deepseek_v31" => ("deepseek_v3", &[]),
        // Plain-text markers (the section's begin, the closing tags of raw string values):
        // a walk would almost never spell them token by token.
        "deepseek_v32" => (
            "deepseek_v3",
            &[
                "\n\n<｜DSML｜function_calls>\n",
                "</｜DSML｜parameter>\n",
                "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
            ],
        ),
        "deepseek_v4" => (
            "deepseek_v3",
            &[
                "\n\n<｜DSML｜tool_calls>\n",
                "</｜DSML｜parameter>\n",
                "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
            ],
        ),
        "kimi_k2" => ("kimi", &[]),
        "hermes" => ("qwen3", &[]),
        "qwen3_coder" | "qwen3_xml" => (
            "qwen3",
            &[
                "\n</parameter>\n",
                "\n</parameter>\n</function>\n</tool_call>",
            ],
        ),
        "glm4" | "glm45" | "glm47" => (
            "glm",
            &[
                "</arg_value>\n",
                "</arg_value>\n</tool_call>",
                "</arg_value></tool_call>",
            ],
        ),
        "llama3_json" | "pythonic" | "json" | "json_array" => ("llama3_1", &[]),
        "mistral" => ("mistral_tekken", &[]),
        // No Granite, InternLM, Phi-4 or MiniMax tokenizer in ../shared: o200k (gpt-oss's).
        "granite" | "granite-20b-fc" | "phi4_mini_json" => ("gptoss", &[]),
        "minimax_m2" => (
            "gptoss",
            &[
                "\n<minimax:tool_call>\n",
                "</parameter>\n",
                "</parameter>\n</invoke>\n</minimax:tool_call>",
            ],
        ),
        // Its markers are plain text on o200k: a walk under `required` would almost never
        // spell `<|action_start|><|plugin|>` token by token.
        "internlm" => ("gptoss", &["<|action_start|><|plugin|>\n"]),
        "llama3_function_tag" => ("llama3_1", &[]),
        other => panic!("no test vocabulary for the format {other:?}: add it to this table"),
    }
}

/// Loads each test vocabulary once (`None`: missing outside CI, the family is skipped).
#[derive(Default)]
struct Vocabularies(HashMap<&'static str, Option<RealTokenizer>>);

impl Vocabularies {
    fn get(&mut self, key: &'static str) -> Option<&RealTokenizer> {
        self.0
            .entry(key)
            .or_insert_with(|| match key {
                "kimi" => special_tokens::kimi_tokenizer(),
                "glm" => xml_families::glm_tokenizer(),
                "mistral_tekken" => special_tokens::tekken_tokenizer(),
                folder => RealTokenizer::load(folder),
            })
            .as_ref()
    }
}

/// The format notes' two weather tools and a third with a number, a boolean and an array.
fn small_tools() -> Vec<Tool> {
    let mut tools = tool_check::weather_tools();
    tools.extend(
        Tool::list_from_openai(&json!([{"type": "function", "function": {
            "name": "search_docs", "description": "Search the documentation",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1},
                "exact": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["query"]}}}]))
        .expect("tool"),
    );
    tools
}

/// Three calls, one to each of [`small_tools`].
fn three_calls() -> Vec<ToolCall> {
    vec![
        ToolCall::new("get_weather", json!({"city": "Paris", "unit": "celsius"})),
        ToolCall::new("get_time", json!({"tz": "Europe/Paris"})),
        ToolCall::new(
            "search_docs",
            json!({"query": "say \"hi\" to <b>", "limit": 3, "exact": false, "tags": ["a", "b"]}),
        ),
    ]
}

/// Every registered format with its vocabulary (formats whose vocabulary is missing
/// outside CI are left out).
fn each_format(mut check: impl FnMut(&str, &dyn ToolCallFormat, &RealTokenizer)) {
    let mut vocabularies = Vocabularies::default();
    for name in format_names() {
        let (key, _) = family_vocabulary(&name);
        let Some(tok) = vocabularies.get(key) else {
            continue;
        };
        let format = format_by_name(&name).expect("registered");
        check(&name, format.as_ref(), tok);
    }
}

/// Renderer and grammar agree in every family: 1, 2 and 3 calls rendered with
/// `render_calls` (the parallel tag for more than one) are accepted token by token (each
/// token's mask bit set, then accepted, then the stop token) under `required`, `auto`,
/// `allowed_tools` (required, the calls' tools) and, for one call, the named choice; and
/// `parse` and a streaming parse give the same calls back.
#[test]
fn every_format_round_trips_one_two_and_three_calls() {
    let tools = small_tools();
    let all = three_calls();
    let mut failures = Vec::new();
    let mut rng = StdRng::seed_from_u64(2300);
    each_format(|name, format, tok| {
        for n in 1..=3 {
            let calls = &all[..n];
            let parallel = n > 1;
            let text = format.render_calls(calls);
            let mut choices = vec![
                ToolChoice::Required,
                ToolChoice::Auto,
                ToolChoice::AllowedTools {
                    mode: Box::new(ToolChoice::Required),
                    tools: calls.iter().map(|c| c.name.clone()).collect(),
                },
            ];
            if n == 1 {
                choices.push(ToolChoice::Function(calls[0].name.clone()));
            }
            let ids = tool_check::encode_with_specials(tok, &text);
            for choice in &choices {
                let grammar = format
                    .structural_tag(&tools, choice, parallel)
                    .map_err(|e| e.to_string())
                    .and_then(|tag| {
                        tok.compiler
                            .compile_structural_tag(&tag)
                            .map_err(|e| e.to_string())
                    });
                let verdict = grammar.and_then(|g| tool_check::accepts_ids(&g, tok, &ids));
                if let Err(e) = verdict {
                    failures.push(format!(
                        "{name} on {}: {n} call(s), {choice:?}, parallel {parallel}: {e}\n  \
                         text: {text:?}",
                        tok.name
                    ));
                }
            }
            let parsed = format.parse(&text, &tools);
            if !parsed.errors.is_empty()
                || tool_check::names_and_args(&parsed.tool_calls)
                    != tool_check::names_and_args(calls)
            {
                failures.push(format!(
                    "{name}: parse of {n} call(s) gives {:?}, errors {:?}\n  text: {text:?}",
                    tool_check::names_and_args(&parsed.tool_calls),
                    parsed.errors
                ));
            }
            let streamed = tool_check::stream_calls(format, &tools, &text, &mut rng, 7);
            if tool_check::names_and_args(&streamed) != tool_check::names_and_args(calls) {
                failures.push(format!(
                    "{name}: streaming {n} call(s) gives {:?}\n  text: {text:?}",
                    tool_check::names_and_args(&streamed)
                ));
            }
        }
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What a tool_choice allows: the tools a call may name, and how many calls there may be.
fn allowed_calls(
    choice: &ToolChoice,
    tools: &[Tool],
    parallel: bool,
) -> (Vec<String>, usize, usize) {
    let (mode, allowed) = choice.resolve(tools).expect("resolves");
    let names = allowed.iter().map(|t| t.name.clone()).collect();
    let max = if parallel { usize::MAX } else { 1 };
    match mode {
        tokensieve_tools::CallMode::None => (names, 0, 0),
        tokensieve_tools::CallMode::Auto => (names, 0, max),
        tokensieve_tools::CallMode::Required => (names, 1, max),
        tokensieve_tools::CallMode::Forced => (names, 1, 1),
    }
}

/// Whatever a format's tag lets the model write, under every tool_choice and with
/// parallel calls on and off, its parser reads as calls that choice allows: random
/// constrained walks on the family's vocabulary parse with no malformed call, every call
/// names an allowed tool with arguments valid under its schema, and the number of calls is
/// what the choice asks (none for `none`, at least one for `required`, exactly one for a
/// named tool, at most one without parallel calls). Each tag must give at least one walk
/// that stops.
#[test]
fn what_every_tag_accepts_parses_as_allowed_calls() {
    let tools = small_tools();
    let choices = [
        ToolChoice::None,
        ToolChoice::Auto,
        ToolChoice::Required,
        ToolChoice::Function("get_time".into()),
        ToolChoice::Function("search_docs".into()),
        ToolChoice::AllowedTools {
            mode: Box::new(ToolChoice::Auto),
            tools: vec!["get_time".into()],
        },
        ToolChoice::AllowedTools {
            mode: Box::new(ToolChoice::Required),
            tools: vec!["get_weather".into(), "search_docs".into()],
        },
    ];
    const WALKS: usize = 4;
    let mut failures = Vec::new();
    let mut rng = StdRng::seed_from_u64(2301);
    each_format(|name, format, tok| {
        let hints: Vec<Vec<u32>> = family_vocabulary(name)
            .1
            .iter()
            .map(|h| tool_check::encode_with_specials(tok, h))
            .collect();
        for choice in &choices {
            for parallel in [false, true] {
                let what = format!("{name} on {}: {choice:?}, parallel {parallel}", tok.name);
                let tag = format
                    .structural_tag(&tools, choice, parallel)
                    .unwrap_or_else(|e| panic!("{what}: tag: {e}"));
                let grammar = tok
                    .compiler
                    .compile_structural_tag(&tag)
                    .unwrap_or_else(|e| panic!("{what}: compile: {e}"));
                let (names, min, max) = allowed_calls(choice, &tools, parallel);
                let mut stopped = 0;
                for _ in 0..WALKS {
                    let (text, stop) =
                        tool_check::random_walk_hinted(&grammar, tok, &mut rng, 300, &hints);
                    if !stop {
                        continue;
                    }
                    stopped += 1;
                    let parsed = format.parse(&text, &tools);
                    let n = parsed.tool_calls.len();
                    let mut wrong = Vec::new();
                    if !parsed.errors.is_empty() {
                        wrong.push(format!("malformed {:?}", parsed.errors));
                    }
                    if n < min || n > max {
                        wrong.push(format!("{n} calls, not {min}..={max}"));
                    }
                    for c in &parsed.tool_calls {
                        if !names.contains(&c.name) {
                            wrong.push(format!("a call to {:?}, not one of {names:?}", c.name));
                        } else if let Some(t) = tools.iter().find(|t| t.name == c.name) {
                            if let Err(e) = t.validate_arguments(&c.arguments) {
                                wrong.push(e.to_string());
                            }
                        }
                    }
                    if !wrong.is_empty() {
                        failures.push(format!("{what}: {}\n  text: {text:?}", wrong.join("; ")));
                    }
                }
                if stopped == 0 {
                    failures.push(format!("{what}: none of {WALKS} walks stopped"));
                }
            }
        }
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
