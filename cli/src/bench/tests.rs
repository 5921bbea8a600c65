//! The bench logic on a handful of schemas with a byte-level toy vocabulary, where every
//! count it reports can be worked out by hand: a text of `n` bytes is `n` tokens, so an
//! accepted instance costs `n + 1` masks (the last one where the stop token is fed).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use tokensieve::{GrammarCompiler, Precompute, Vocabulary};

use super::engine::{Outcome, Tokensieve};
use super::records::{load_records, record_files, sample};
use super::stats::{Dist, Figures};
use super::*;

const STOP: u32 = 256;

/// One token per byte, and `<eos>` (256) as the special stop token.
fn byte_compiler(precompute: Precompute) -> GrammarCompiler {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"<eos>".to_vec());
    let vocab = Vocabulary::from_token_bytes(&tokens, &[STOP], &[STOP]).expect("vocabulary");
    GrammarCompiler::new(Arc::new(vocab)).with_precompute(precompute)
}

struct ByteEncoder;

impl Encode for ByteEncoder {
    fn encode_text(&self, text: &str) -> Result<Vec<u32>, String> {
        Ok(text.bytes().map(u32::from).collect())
    }
}

/// Four schemas: an object (2 valid instances and an invalid one, which the bench skips),
/// a one-string enum, a schema tokensieve refuses (`uniqueItems`), and a draft-04 integer
/// schema whose instance `6000.0` (listed as valid; draft 4 says it is not an integer)
/// tokensieve rejects at the `.` (step 4).
const RECORDS: &str = r#"{"file":"a.json","schema":{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"}},"required":["n"]},"tests":[{"description":"x","valid":true,"data":{"n":12,"s":"hi"}},{"valid":false,"data":{"s":1}},{"valid":true,"data":{"n":-3}}]}
{"file":"b.json","schema":{"enum":["yes"]},"tests":[{"valid":true,"data":"yes"}]}
{"file":"c.json","schema":{"type":"array","uniqueItems":true},"tests":[{"valid":true,"data":[1,2]}]}
{"file":"d.json","schema":{"$schema":"http://json-schema.org/draft-04/schema#","type":"integer"},"tests":[{"valid":true,"data":6000.0}]}
"#;

/// A fresh folder under the system temp dir holding `name` with `content` gzipped.
fn temp_records(test: &str, name: &str, content: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "tokensieve-bench-{}-{test}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("Coll")).expect("temp dir");
    let path = dir.join("Coll").join(name);
    let file = std::fs::File::create(&path).expect("create");
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(content.as_bytes()).expect("write");
    gz.finish().expect("finish");
    dir
}

fn cases() -> Vec<Case> {
    let dir = temp_records("cases", "Coll.jsonl.gz", RECORDS);
    let files = record_files(&dir).expect("files");
    assert_eq!(files.len(), 1);
    let records = load_records(&files).expect("records");
    let _ = std::fs::remove_dir_all(&dir);
    tokenize(records, &ByteEncoder).expect("tokenize")
}

#[test]
fn loader_reads_names_schemas_and_valid_instances_only() {
    let cases = cases();
    let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["Coll/a.json", "Coll/b.json", "Coll/c.json", "Coll/d.json"]
    );
    let texts: Vec<Vec<String>> = cases
        .iter()
        .map(|c| {
            c.instances
                .iter()
                .map(|ids| ids.iter().map(|&b| b as u8 as char).collect())
                .collect()
        })
        .collect();
    assert_eq!(
        texts,
        [
            vec![
                r#"{"n":12,"s":"hi"}"#.to_string(),
                r#"{"n":-3}"#.to_string()
            ],
            vec![r#""yes""#.to_string()],
            vec!["[1,2]".to_string()],
            vec!["6000.0".to_string()],
        ]
    );
}

#[test]
fn counts_are_exact() {
    let cases = cases();
    let ts = Tokensieve::new(byte_compiler(Precompute::Eager), schema_options());
    let report = bench_engine(&ts, &cases, STOP, 1, true).expect("bench");
    let f = &report.figures;
    assert_eq!((f.schemas, f.compiled, f.failed), (4, 3, 1));
    // Valid instances of the compiled schemas: 2 + 1 + 1.
    assert_eq!((f.instances, f.accepted, f.rejected), (4, 3, 1));
    // Accepted: bytes + 1 masks each (17 + 1, 8 + 1, 5 + 1); `6000.0` stops at step 4,
    // after 5 masks and 5 accepts (the fifth rejected).
    let masks = (17 + 1) + (8 + 1) + (5 + 1) + 5;
    assert_eq!(f.total_masks, masks);
    assert_eq!(f.mask_us.n, masks);
    assert_eq!(f.tokens_fed, masks);
    assert_eq!(f.accept_us.n, masks);
    assert_eq!(f.forced_mask_us.n + f.other_mask_us.n, masks);
    assert_eq!(f.mask_mismatches, 0);
    assert_eq!(f.compile_ms.n, 3);
    assert_eq!(f.memory_bytes.as_ref().map(|d| d.n), Some(3));
    assert!(f.memory_bytes.as_ref().is_some_and(|d| d.p50 > 0.0));
    // The largest grammars: the three compiled, largest first, in KiB.
    assert_eq!(f.worst_memory.len(), 3);
    assert!(f.worst_memory.windows(2).all(|w| w[0].value >= w[1].value));
    let largest = report.runs.iter().filter_map(|r| r.memory_bytes).max();
    assert_eq!(
        Some(f.worst_memory[0].value),
        largest.map(|b| b as f64 / 1024.0)
    );
    let lists = stats::worst_lists("t", f, &|_, _, _| String::new());
    assert!(lists.contains("t, largest grammars"), "{lists}");
    assert_eq!(f.failures.len(), 1);
    assert!(f.failures[0].0.contains("uniqueItems"), "{:?}", f.failures);
    assert_eq!(
        report.runs[3].instances[0].outcome,
        Outcome::Rejected { step: 4 }
    );
    assert_eq!(report.runs[2].compile_ms, None);
    // The enum `"yes"`: after `"`, `y`, `e` and `s` one byte is forced (steps 1..=4); the
    // first step allows whitespace or `"`, the last whitespace or the stop token.
    let only_b = Figures::of(&report.runs, |s| s == 1, |_, _| true);
    assert_eq!(only_b.total_masks, 6);
    assert_eq!(only_b.forced_mask_us.n, 4);
    assert_eq!(only_b.other_mask_us.n, 2);
    assert_eq!(
        report.runs[1].instances[0].forced,
        [false, true, true, true, true, false]
    );
    // Per schema, in the order of the cases: names, mask counts, the slowest mask.
    let names: Vec<&str> = report
        .per_schema
        .iter()
        .map(|p| p.schema.as_str())
        .collect();
    let case_names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, case_names);
    let counts: Vec<usize> = report.per_schema.iter().map(|p| p.masks).collect();
    assert_eq!(counts, [18 + 9, 6, 0, 5]);
    assert_eq!(report.per_schema[2].compile_ms, None);
    assert_eq!(report.per_schema[2].mask_max_us, 0.0);
    let slowest = report.runs[3].instances.iter().flat_map(|i| &i.mask_us);
    let slowest = slowest.fold(0.0f64, |m, &us| m.max(us as f64));
    assert_eq!(report.per_schema[3].mask_max_us, slowest);
    assert!(report.per_schema[3].mask_mean_us <= slowest);
}

#[test]
fn two_threads_give_the_same_counts() {
    let cases = cases();
    let ts = Tokensieve::new(byte_compiler(Precompute::Eager), schema_options());
    let one = bench_engine(&ts, &cases, STOP, 1, true).expect("bench");
    let two = bench_engine(&ts, &cases, STOP, 2, true).expect("bench");
    assert_eq!(one.figures.total_masks, two.figures.total_masks);
    assert_eq!(one.figures.forced_mask_us.n, two.figures.forced_mask_us.n);
    assert_eq!(one.figures.accepted, two.figures.accepted);
}

#[test]
fn comparison_keeps_schemas_both_compile_and_instances_both_accept() {
    let cases = cases();
    let eager = Tokensieve::new(byte_compiler(Precompute::Eager), schema_options());
    let lazy = Tokensieve::new(byte_compiler(Precompute::Lazy), schema_options());
    let a = bench_engine(&eager, &cases, STOP, 1, true).expect("bench");
    let b = bench_engine(&lazy, &cases, STOP, 1, true).expect("bench");
    let c = compare(&a.runs, &b.runs);
    // a, b and d compile under both; d's only instance is rejected by both.
    assert_eq!(c.schemas, 3);
    assert_eq!(c.instances, 3);
    assert_eq!(c.tokensieve.total_masks, 18 + 9 + 6);
    assert_eq!(c.llguidance.total_masks, 18 + 9 + 6);
    let total = c
        .rows
        .iter()
        .find(|r| r.figure == "total masks")
        .expect("total masks row");
    assert_eq!(total.ratio, Some(1.0));
    let text = stats::ratio_table(&c.rows);
    assert!(text.contains("| total masks | 33 | 33 | 1.00 |"), "{text}");
}

#[test]
fn limit_spreads_the_sample_evenly() {
    let cases = cases();
    let records: Vec<Record> = cases
        .iter()
        .map(|c| Record {
            name: c.name.clone(),
            schema: c.schema.clone(),
            instances: vec![],
        })
        .collect();
    let names = |v: Vec<Record>| v.into_iter().map(|r| r.name).collect::<Vec<_>>();
    assert_eq!(
        names(sample(records.clone(), Some(2))),
        ["Coll/a.json", "Coll/c.json"]
    );
    assert_eq!(names(sample(records.clone(), Some(10))).len(), 4);
    assert_eq!(names(sample(records, None)).len(), 4);
}

#[test]
fn percentiles_are_nearest_rank() {
    let d = Dist::of((1..=1000).map(f64::from).rev().collect());
    assert_eq!(
        (d.n, d.mean, d.p50, d.p90, d.p99, d.p999, d.max),
        (1000, 500.5, 500.0, 900.0, 990.0, 999.0, 1000.0)
    );
    assert_eq!(Dist::of(vec![]), Dist::default());
}

#[test]
fn bad_records_name_file_and_line() {
    let dir = temp_records(
        "bad",
        "Bad.jsonl.gz",
        "{\"file\":\"x\",\"schema\":true}\nnot json\n",
    );
    let files = record_files(&dir).expect("files");
    let err = load_records(&files).expect_err("line 2 is not JSON");
    let msg = err.to_string();
    assert!(msg.contains("Bad.jsonl.gz, line 2: not JSON"), "{msg}");
    let dir2 = temp_records("noschema", "N.jsonl.gz", "{\"file\":\"x\"}\n");
    let err = load_records(&record_files(&dir2).expect("files")).expect_err("no schema");
    assert!(err.to_string().contains("line 1: no `schema` key"), "{err}");
    let empty = std::env::temp_dir().join(format!("tokensieve-bench-{}-empty", std::process::id()));
    std::fs::create_dir_all(&empty).expect("dir");
    let err = record_files(&empty).expect_err("no records");
    assert!(err.to_string().starts_with("no MaskBench records"), "{err}");
    let err = record_files(&empty.join("missing")).expect_err("missing");
    assert!(err.to_string().starts_with("cannot read"), "{err}");
    for d in [dir, dir2, empty] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[cfg(not(feature = "llguidance"))]
#[test]
fn llguidance_without_the_feature_is_a_clear_error() {
    let args = BenchArgs {
        tokenizer: PathBuf::from("unused/tokenizer.json"),
        schemas: PathBuf::from("unused"),
        engine: EngineChoice::Both,
        threads: 1,
        report: None,
        json: None,
        limit: None,
        precompute: PrecomputeChoice::Eager,
        quiet: true,
        tools: None,
        format: "hermes".into(),
    };
    let err = run(&args, &mut Vec::new()).expect_err("no llguidance");
    assert!(
        err.to_string()
            .contains("--engine both needs llguidance, which this build lacks"),
        "{err}"
    );
}

#[cfg(feature = "llguidance")]
#[path = "../../../tests/common/mod.rs"]
mod common;

/// `bench --tools --engine both`: each family's tag as llguidance Lark accepts the same
/// rendered call on both engines, every mask agreeing with accept, with markers that are
/// special tokens in llguidance (Hermes on Qwen3: `<tool_call>` is an added `<…>` token;
/// DeepSeek V3 on its own tokenizer) and markers that are text (Kimi K2 on DeepSeek V3's
/// tokenizer, which lacks them: the lazy head). Then `run` prints both engines' rows and
/// the ratio table.
#[cfg(feature = "llguidance")]
#[test]
fn tool_mode_runs_llguidance_on_the_same_tokens() {
    let Some(bfcl) = common::testdata_path("jsonschemabench") else {
        return;
    };
    let cases = tools::load_tools(&bfcl).expect("tools");
    for (family, tok) in [
        ("hermes", "qwen3"),
        ("kimi_k2", "deepseek_v3"),
        ("deepseek_v3", "deepseek_v3"),
    ] {
        let Some(path) = common::tokenizer_path(tok) else {
            return;
        };
        let (vocab, tokenizer) = load_tokenizer(&path).expect("tokenizer");
        let vocab = Arc::new(vocab);
        let stop = vocab.stop_tokens()[0];
        let format = tokensieve_tools::format_by_name(family).expect("family");
        let bench = tools::prepare(format.as_ref(), &cases, 12, &tokenizer, stop).expect("tag");
        let llg = engine::Llguidance::new(&path, stop).expect("llguidance");
        let lark = engine::Engine::tag_source(&llg, &bench.tag).expect("lark");
        assert_eq!(lark.matches("%json").count(), 12, "{family}: {lark}");
        assert_eq!(
            lark.contains("[lazy]"),
            family == "kimi_k2",
            "{family}: {lark}"
        );
        let ts = tools::tokensieve_engine(&vocab, Precompute::Lazy);
        let a = tools::run_engine(&ts, &bench).expect("tokensieve");
        let b = tools::run_engine(&llg, &bench).expect("llguidance");
        for r in [&a, &b] {
            assert!(r.accepted, "{family} {}: {lark}", r.engine);
            assert_eq!(r.mask_mismatches, 0, "{family} {}", r.engine);
            assert_eq!((r.tools, r.tokens), (12, bench.tokens.len()));
        }
        assert_eq!((a.engine, b.engine), ("tokensieve", "llguidance"));
        assert!(a.memory_bytes.is_some() && b.memory_bytes.is_none());
    }
    let Some(path) = common::tokenizer_path("qwen3") else {
        return;
    };
    let args = BenchArgs {
        tokenizer: path,
        schemas: bfcl,
        engine: EngineChoice::Both,
        threads: 1,
        report: None,
        json: None,
        limit: None,
        precompute: PrecomputeChoice::Lazy,
        quiet: true,
        tools: Some(vec![3, 5]),
        format: "hermes".into(),
    };
    let mut out = Vec::new();
    run(&args, &mut out).expect("bench --tools --engine both");
    let text = String::from_utf8(out).expect("utf-8");
    for row in [
        "| tokensieve | 3 |",
        "| llguidance | 3 |",
        "| tokensieve | 5 |",
        "| llguidance | 5 |",
    ] {
        assert!(text.contains(row), "{row}: {text}");
    }
    assert!(text.contains("tokensieve / llguidance"), "{text}");
    assert_eq!(text.matches("×").count(), 2 * 5 + 2, "{text}");
}

/// With the `llguidance` feature and the shared Llama 3.1 tokenizer: both engines run the
/// same token sequences, so on the shared selection their mask counts are equal.
#[cfg(feature = "llguidance")]
#[test]
fn llguidance_runs_the_same_sequences() {
    // The one helper: skips with a printed reason outside CI, fails under CI=true.
    let Some(path) = common::tokenizer_path("llama3_1") else {
        return;
    };
    let (vocab, tok) = load_tokenizer(&path).expect("tokenizer");
    let stop = vocab.stop_tokens()[0];
    let dir = temp_records("llg", "Coll.jsonl.gz", RECORDS);
    let records = load_records(&record_files(&dir).expect("files")).expect("records");
    let _ = std::fs::remove_dir_all(&dir);
    let cases = tokenize(records, &tok).expect("tokenize");
    let ts = Tokensieve::new(GrammarCompiler::new(vocab), schema_options());
    let llg = engine::Llguidance::new(&path, stop).expect("llguidance");
    let a = bench_engine(&ts, &cases, stop, 1, true).expect("tokensieve");
    let b = bench_engine(&llg, &cases, stop, 1, true).expect("llguidance");
    assert_eq!(a.figures.compiled, 3, "{:?}", a.figures.failures);
    assert_eq!(b.figures.compiled, 3, "{:?}", b.figures.failures);
    assert_eq!(b.figures.mask_mismatches, 0);
    let c = compare(&a.runs, &b.runs);
    assert_eq!(c.schemas, 3);
    let outcomes = |r: &EngineReport| -> Vec<Vec<Outcome>> {
        r.runs
            .iter()
            .map(|s| s.instances.iter().map(|i| i.outcome).collect())
            .collect()
    };
    assert_eq!(c.instances, 3, "{:?} {:?}", outcomes(&a), outcomes(&b));
    let tokens: usize = [0usize, 1]
        .iter()
        .flat_map(|&s| cases[s].instances.iter().map(|ids| ids.len() + 1))
        .sum();
    assert_eq!(c.tokensieve.total_masks, tokens);
    assert_eq!(c.llguidance.total_masks, tokens);
}

/// `--json` to a path that cannot be created fails before anything is loaded or run (the
/// tokenizer path here does not exist: that error would come later).
#[cfg(feature = "hf")]
#[test]
fn an_unwritable_json_path_fails_before_the_run() {
    let dir = std::env::temp_dir().join("tokensieve_bench_json_dir");
    std::fs::create_dir_all(&dir).unwrap();
    let args = BenchArgs {
        tokenizer: PathBuf::from("no/such/tokenizer.json"),
        schemas: PathBuf::from("no/such/records"),
        engine: EngineChoice::Tokensieve,
        threads: 1,
        report: Some(dir.clone()),
        json: None,
        limit: None,
        precompute: PrecomputeChoice::Lazy,
        quiet: true,
        tools: None,
        format: "hermes".into(),
    };
    let err = run(&args, &mut Vec::new()).expect_err("a folder is not writable as a file");
    assert!(
        matches!(&err, BenchError::Output { path, .. } if *path == dir),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn limit_must_be_at_least_one() {
    assert_eq!(parse_limit("3"), Ok(3));
    assert!(parse_limit("0").unwrap_err().contains("at least 1"));
    assert!(parse_limit("x").is_err());
}

/// BFCL-shaped records: one function per schema, or an `anyOf` of them (`m1`, `m2`, the
/// instance calling `m2`); `f` twice (kept once), a record without a valid instance (its
/// tool kept, without a call), and a function named with a space (not a valid tool name).
const BFCL: &str = r#"{"file":"a.json","schema":{"type":"object","properties":{"f":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},"required":["f"]},"tests":[{"valid":true,"data":{"f":{"x":4}}}]}
{"file":"b.json","schema":{"type":"object","properties":{"g.h":{"type":"object","properties":{"s":{"type":"string"}}}}},"tests":[{"valid":true,"data":{"g.h":{"s":"hi"}}}]}
{"file":"c.json","schema":{"type":"object","properties":{"f":{"type":"object"}}},"tests":[{"valid":true,"data":{"f":{}}}]}
{"file":"d.json","schema":{"type":"object","properties":{"k":{"type":"object"}}},"tests":[{"valid":false,"data":{"k":1}}]}
{"file":"e.json","schema":{"type":"object","properties":{"bad name":{"type":"object"}}},"tests":[{"valid":true,"data":{"bad name":{}}}]}
{"file":"g.json","schema":{"anyOf":[{"type":"object","properties":{"m1":{"type":"object"}}},{"type":"object","properties":{"m2":{"type":"object","properties":{"q":{"type":"string"}}}}}]},"tests":[{"valid":true,"data":{"m2":{"q":"z"}}}]}
{"file":"f.json","schema":{"type":"object","properties":{"last":{"type":"object","properties":{"b":{"type":"boolean"}},"required":["b"]}}},"tests":[{"valid":true,"data":{"last":{"b":true}}}]}
"#;

/// `bench --tools`: distinct BFCL tools with a valid call each; the tag over the first n
/// accepts the last one's rendered call, one mask per byte plus the stop token, on both
/// passes, with every mask agreeing with accept.
#[test]
fn tool_mode_teacher_forces_a_rendered_call() {
    let dir = temp_records("tools", "BFCL_x.jsonl.gz", BFCL);
    let cases = tools::load_tools(&dir).expect("tools");
    let _ = std::fs::remove_dir_all(&dir);
    let names: Vec<&str> = cases.iter().map(|c| c.tool.name.as_str()).collect();
    assert_eq!(names, ["f", "g.h", "k", "m1", "m2", "last"]);
    let calls: Vec<bool> = cases.iter().map(|c| c.call.is_some()).collect();
    assert_eq!(calls, [true, true, false, false, true, true]);
    assert_eq!(
        cases[0].call.as_ref().unwrap().arguments,
        serde_json::json!({"x": 4})
    );
    let vocab = byte_compiler(Precompute::Eager).vocabulary().clone();
    let hermes = tokensieve_tools::format_by_name("hermes").expect("hermes");
    for precompute in [Precompute::Eager, Precompute::Lazy] {
        // n = 4: the last tool with a call among the first four is `g.h`.
        for (n, caller) in [(1, 0), (4, 1), (6, 5)] {
            let bench =
                tools::prepare(hermes.as_ref(), &cases, n, &ByteEncoder, STOP).expect("tag");
            let run = tools::run_engine(&tools::tokensieve_engine(&vocab, precompute), &bench)
                .expect("runs");
            let text =
                hermes.render_calls(std::slice::from_ref(cases[caller].call.as_ref().unwrap()));
            assert_eq!(run.tools, n);
            assert_eq!(run.tokens, text.len() + 1, "{text}");
            assert!(run.accepted, "{text}");
            assert_eq!(run.mask_mismatches, 0);
            assert!(run.memory_bytes.unwrap() > 0);
            assert!(run.compile_ms > 0.0 && run.second_mean_us > 0.0);
        }
    }
    let table = tools::render("hermes", "bytes", "eager", "load ?", &[]);
    assert!(
        table.contains("| engine | tools | tokens | compile → first mask ms"),
        "{table}"
    );
}

/// Records without any BFCL collection give no tools: a typed error naming the folder.
#[test]
fn tool_mode_needs_bfcl_records() {
    let dir = temp_records("notools", "Other.jsonl.gz", RECORDS);
    let err = tools::load_tools(&dir).expect_err("no BFCL records");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(matches!(err, BenchError::NoRecords { .. }), "{err}");
}
