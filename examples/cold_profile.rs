//! A driver for profiling the cold path (issue 24): compile → first mask, then one
//! teacher-forced first pass, of one MaskBench schema or of a Hermes tool tag over N BFCL
//! tools, with a fresh compiler. Everything of interest runs inside `measured`, so that
//! callgrind can count only it:
//!
//! ```text
//! cargo build --release --example cold_profile
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='cold_profile::run' \
//!     target/release/examples/cold_profile schema Github_easy 0 lazy
//! valgrind ... target/release/examples/cold_profile tools 10 lazy
//! valgrind ... target/release/examples/cold_profile pair Github_easy 0 Github_easy 1 lazy
//! ```
//!
//! `many <N>` compiles the first `N / 22` schemas of each MaskBench collection (every one
//! with a `tests` list, in name order) on one compiler, each to its first mask only, so
//! that later schemas meet the caches earlier ones filled: callgrind it whole, with and
//! without `nocache` (the compiler's cache of rule automata turned off), for the gain of
//! that cache over a spread of schemas.
//!
//! `pair <collection> <index> <collection> <index>` runs the second schema on a compiler
//! that already compiled the first and ran its first pass: the masks the two share come from
//! the compiler's content-keyed mask cache. Count it as the whole run (callgrind without the
//! toggle) minus the whole run of `schema` with the first alone (the linker may fold the
//! small wrappers, so a toggle does not reliably separate the two).
//!
//! Arguments: `schema <collection> <index>`, `tools <N>`, `many <N>` or `pair ...`, then
//! `eager`, `lazy` or `background` (default `lazy`), then optionally a tokenizer folder name
//! (`llama3_1` for schemas, `qwen3` for tools), then optionally `nocache` and `deferred`
//! (`GrammarCompiler::with_deferred_tool_rules`: a tag's tool argument rules are stubs
//! until a matcher comes near one; on by default) or `whole` (off). Prints wall-clock
//! times of one run (for ratios only); with `COLD_PROFILE_STEPS` set, each first-pass step's
//! time (each schema's compile → first mask with `many`) on stderr; with
//! `COLD_PROFILE_REPEAT=N`, N more runs on fresh compilers (for a sampling profiler); with
//! `COLD_PROFILE_ONLY_STEP=K`, step K's fill runs inside `fill_one_step` (toggle on
//! `cold_profile::fill_one_step` for that step alone); with `COLD_PROFILE_TOOL=I`, `tools`
//! calls tool I (when there is one) instead of the middle one.

#[path = "../benches/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Precompute};
use tokensieve_tools::{Hermes, Tool, ToolCallFormat, ToolChoice};

enum Job {
    Schema(Value, Vec<String>),
    Tools(Vec<Tool>),
    Many(Vec<Value>),
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let mut warm: Option<Job> = None;
    let (job, mode_at) = match arg(0) {
        Some("pair") => {
            let index = |i: usize| arg(i).and_then(|s| s.parse::<usize>().ok()).expect("index");
            warm = Some(schema_job(arg(1).expect("collection"), index(2)));
            (schema_job(arg(3).expect("collection"), index(4)), 5)
        }
        Some("schema") => {
            let collection = arg(1).expect("collection");
            let index: usize = arg(2).and_then(|s| s.parse().ok()).expect("index");
            (schema_job(collection, index), 3)
        }
        Some("tools") => {
            let n: usize = arg(1).and_then(|s| s.parse().ok()).expect("N");
            (Job::Tools(bfcl_tools(n)), 2)
        }
        Some("many") => {
            let n: usize = arg(1).and_then(|s| s.parse().ok()).expect("N");
            (Job::Many(spread_schemas(n)), 2)
        }
        _ => panic!("usage: cold_profile schema <collection> <index> | tools <N> [mode] [tok]"),
    };
    let precompute = match arg(mode_at).unwrap_or("lazy") {
        "eager" => Precompute::Eager,
        "lazy" => Precompute::Lazy,
        "background" => Precompute::Background,
        m => panic!("unknown mode {m}"),
    };
    let default_tok = if matches!(job, Job::Tools(_)) {
        "qwen3"
    } else {
        "llama3_1"
    };
    // After the mode: an optional tokenizer folder name, and the flags `nocache` and
    // `deferred` or `whole` in any order.
    let rest: Vec<&str> = args.iter().skip(mode_at + 1).map(String::as_str).collect();
    let flag = |f: &str| rest.contains(&f);
    let tok_name = rest
        .iter()
        .copied()
        .find(|a| !matches!(*a, "nocache" | "deferred" | "whole"))
        .unwrap_or(default_tok);
    let tok = common::Tokenizer::load(tok_name).expect("tok");
    // No compile-time budget: under callgrind a 100-tool tag or a large schema runs past
    // the default 20 s, and a failed compile would leave it out of the count.
    let limits = tokensieve::Limits {
        compile_time: None,
        ..Default::default()
    };
    let make_compiler = || {
        let mut compiler = GrammarCompiler::new(tok.vocab.clone())
            .with_precompute(precompute)
            .with_limits(limits.clone());
        if flag("nocache") {
            compiler = compiler.with_rule_automaton_cache_capacity(0);
        }
        if flag("deferred") || flag("whole") {
            compiler = compiler.with_deferred_tool_rules(!flag("whole"));
        }
        compiler
    };
    let compiler = make_compiler();
    let docs_of = |job: &Job| -> Vec<Vec<u32>> {
        match job {
            Job::Schema(_, inst) => inst.iter().map(|s| tok.encode_with_stop(s)).collect(),
            Job::Tools(tools) => {
                // `COLD_PROFILE_TOOL=I`: call tool I instead of the middle one.
                let called = std::env::var("COLD_PROFILE_TOOL")
                    .ok()
                    .and_then(|i| i.parse().ok())
                    .filter(|&i: &usize| i < tools.len())
                    .unwrap_or(tools.len() / 2);
                let args = first_call_arguments(&tools[called]);
                let text = format!(
                    "I will call it.\n<tool_call>\n{{\"name\": \"{}\", \"arguments\": {}}}\n</tool_call>",
                    tools[called].name,
                    args
                );
                vec![tok.encode_with_stop(&text)]
            }
            Job::Many(_) => Vec::new(),
        }
    };
    if let Some(w) = &warm {
        warming(&compiler, w, &docs_of(w));
    }
    measured(&compiler, &job, &docs_of(&job));
    // `COLD_PROFILE_REPEAT=N`: N more runs, each on a fresh compiler (for a sampling
    // profiler: keep the samples under `cold_profile::run`).
    let repeat: usize = std::env::var("COLD_PROFILE_REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    for _ in 0..repeat {
        let compiler = make_compiler();
        if let Some(w) = &warm {
            warming(&compiler, w, &docs_of(w));
        }
        measured(&compiler, &job, &docs_of(&job));
    }
}

/// The first schema of `pair`: compile and first pass, not counted.
#[inline(never)]
fn warming(compiler: &GrammarCompiler, job: &Job, docs: &[Vec<u32>]) {
    run(compiler, job, docs);
}

/// Counted through `run` (`--toggle-collect='cold_profile::run'`): the linker folds this wrapper into `warming`.
#[inline(never)]
fn measured(compiler: &GrammarCompiler, job: &Job, docs: &[Vec<u32>]) {
    run(compiler, job, docs);
}

/// One step's fill, alone under its own symbol (see `COLD_PROFILE_ONLY_STEP`).
#[inline(never)]
fn fill_one_step(m: &mut GrammarMatcher, mask: &mut [u32]) {
    m.fill_next_token_bitmask(mask).expect("mask");
}

/// Compile → first mask → one teacher-forced first pass over `docs`; prints the figures.
#[inline(never)]
fn run(compiler: &GrammarCompiler, job: &Job, docs: &[Vec<u32>]) {
    if let Job::Many(schemas) = job {
        let t = Instant::now();
        let mut mask = vec![0u32; compiler.vocabulary().bitmask_words()];
        let mut compiled = 0;
        let opts = bench_options();
        let each = std::env::var_os("COLD_PROFILE_STEPS").is_some();
        for (i, schema) in schemas.iter().enumerate() {
            let s = Instant::now();
            let Ok(g) = compiler.compile_json_schema(schema, &opts) else {
                continue;
            };
            compiled += 1;
            GrammarMatcher::new(g)
                .fill_next_token_bitmask(&mut mask)
                .expect("mask");
            if each {
                eprintln!("schema {i}: {:.3} ms", s.elapsed().as_secs_f64() * 1e3);
            }
        }
        println!(
            "{compiled} of {} schemas to their first mask in {:.1} ms; {:?}",
            schemas.len(),
            t.elapsed().as_secs_f64() * 1e3,
            compiler.rule_automaton_cache_stats()
        );
        return;
    }
    let t = Instant::now();
    let g: Arc<CompiledGrammar> = match job {
        Job::Schema(schema, _) => compiler
            .compile_json_schema(schema, &bench_options())
            .expect("compiles"),
        Job::Many(_) => unreachable!("handled above"),
        Job::Tools(tools) => {
            let tag = Hermes::default()
                .structural_tag(tools, &ToolChoice::Auto, true)
                .expect("tag");
            compiler.compile_structural_tag(&tag).expect("compiles")
        }
    };
    let compiled = t.elapsed();
    let words = g.vocabulary().bitmask_words();
    let mut mask = vec![0u32; words];
    let mut m = GrammarMatcher::new(g.clone());
    m.fill_next_token_bitmask(&mut mask).expect("mask");
    let first = t.elapsed();
    let mut steps = 0;
    // `COLD_PROFILE_ONLY_STEP=K`: step K's fill runs inside `fill_one_step`, for
    // `--toggle-collect='cold_profile::fill_one_step'`.
    let only_step: Option<usize> = std::env::var("COLD_PROFILE_ONLY_STEP")
        .ok()
        .and_then(|k| k.parse().ok());
    let mut slowest = std::time::Duration::ZERO;
    let mut accepted = 0;
    let pass = Instant::now();
    for doc in docs {
        let mut m = GrammarMatcher::new(g.clone());
        let mut ok = true;
        for &tk in doc {
            let s = Instant::now();
            if only_step == Some(steps) {
                fill_one_step(&mut m, &mut mask);
            } else {
                m.fill_next_token_bitmask(&mut mask).expect("mask");
            }
            slowest = slowest.max(s.elapsed());
            if std::env::var_os("COLD_PROFILE_STEPS").is_some() {
                let built = m.compiled_grammar().deferred_rules();
                let text = g.vocabulary().token_bytes(tk).unwrap_or(&[]);
                let text = String::from_utf8_lossy(text);
                eprintln!(
                    "step {steps}: {:?} then {text:?} (stubs left, built: {built:?}; rule automata {:?})",
                    s.elapsed(),
                    compiler.rule_automaton_cache_stats()
                );
            }
            steps += 1;
            if !m.accept_token(tk) {
                ok = false;
                break;
            }
        }
        accepted += ok as usize;
    }
    let pass = pass.elapsed();
    println!(
        "nodes {} compile {:.2} ms, first mask at {:.2} ms; first pass {} steps ({} of {} docs accepted) mean {:.1} µs max {:.2} ms; memory {} KiB",
        g.node_count(),
        compiled.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3,
        steps,
        accepted,
        docs.len(),
        pass.as_secs_f64() * 1e6 / steps.max(1) as f64,
        slowest.as_secs_f64() * 1e3,
        g.memory_bytes() / 1024
    );
}

/// `tokensieve bench`'s schema options: the defaults, and keywords no draft defines ignored.
fn bench_options() -> tokensieve::JsonSchemaOptions {
    tokensieve::JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..Default::default()
    }
}

fn schema_job(collection: &str, index: usize) -> Job {
    let path = common::shared_dir()
        .join("testdata/jsonschemabench")
        .join(collection)
        .join(format!("{collection}.jsonl.gz"));
    let file = std::fs::File::open(&path).expect("collection");
    use std::io::BufRead;
    let rec: Value = std::io::BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .nth(index)
        .expect("record");
    eprintln!("schema {}", rec["file"]);
    let inst = rec["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["valid"] == Value::Bool(true))
        .map(|t| t["data"].to_string())
        .collect();
    Job::Schema(rec["schema"].clone(), inst)
}

/// The first `n / 22` schemas (at least one) of each MaskBench collection, in name order.
fn spread_schemas(n: usize) -> Vec<Value> {
    use std::io::BufRead;
    let dir = common::shared_dir().join("testdata/jsonschemabench");
    let mut collections: Vec<_> = std::fs::read_dir(&dir)
        .expect("MaskBench folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    collections.sort();
    let per = (n / collections.len().max(1)).max(1);
    let mut out = Vec::new();
    for c in collections {
        let name = c.file_name().unwrap().to_string_lossy().to_string();
        let Ok(file) = std::fs::File::open(c.join(format!("{name}.jsonl.gz"))) else {
            continue;
        };
        out.extend(
            std::io::BufReader::new(flate2::read::GzDecoder::new(file))
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
                .filter(|r| r["tests"].is_array())
                .take(per)
                .map(|r| r["schema"].clone()),
        );
    }
    out
}

/// `n` distinct tools from BFCL's `multiple` and `live_multiple` files.
fn bfcl_tools(n: usize) -> Vec<Tool> {
    let mut tools: Vec<Tool> = Vec::new();
    for file in ["BFCL_v4_multiple.json", "BFCL_v4_live_multiple.json"] {
        let path = common::shared_dir()
            .join("testdata/toolcalls/bfcl")
            .join(file);
        let text = std::fs::read_to_string(path).expect("BFCL file");
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            for f in v["function"].as_array().into_iter().flatten() {
                if let Ok(t) = Tool::from_bfcl_function(f) {
                    if !tools.iter().any(|u| u.name == t.name) {
                        tools.push(t);
                    }
                }
                if tools.len() == n {
                    return tools;
                }
            }
        }
    }
    tools
}

/// `{}` or the tool's required properties with simple placeholder values.
fn first_call_arguments(tool: &Tool) -> String {
    let p = &tool.input_schema;
    let mut out = serde_json::Map::new();
    for name in p["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let ty = p["properties"][name]["type"].as_str().unwrap_or("string");
        let v = match ty {
            "integer" => Value::from(3),
            "number" => Value::from(2.5),
            "boolean" => Value::from(true),
            "array" => Value::Array(vec![]),
            "object" => Value::Object(Default::default()),
            _ => {
                if let Some(e) = p["properties"][name]["enum"].as_array() {
                    e[0].clone()
                } else {
                    Value::from("abc")
                }
            }
        };
        out.insert(name.to_string(), v);
    }
    Value::Object(out).to_string()
}
