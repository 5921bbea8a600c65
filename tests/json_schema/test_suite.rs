//! The official JSON-Schema-Test-Suite (draft 2020-12, top-level files) through the JSON
//! Schema front end, byte for byte on a synthetic byte vocabulary.
//!
//! For every case whose schema compiles, each `valid: true` instance (serialised compactly by
//! serde_json) should be accepted and each `valid: false` instance must be rejected: an
//! accepted invalid instance (a false positive) fails the test. Writes the conformance
//! table to `docs/json-schema-conformance.md`.

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use serde_json::Value;
use tokensieve::json_schema::JsonSchemaOptions;

use common::{byte_accepts as accepts, byte_compiler};

#[derive(Default)]
struct Row {
    schemas: usize,
    compiled: usize,
    instances: usize,
    passed: usize,
    valid_rejected: usize,
    false_positives: usize,
    refused_instances: usize,
}

/// One run over the suite files: per-file rows, refusal reasons, false positives.
type SuiteRun = (BTreeMap<String, Row>, BTreeMap<String, usize>, Vec<String>);

fn run_suite(files: &[std::path::PathBuf], opts: &JsonSchemaOptions) -> SuiteRun {
    let compiler = byte_compiler();
    let verbose = std::env::var_os("JSON_SCHEMA_SUITE_VERBOSE").is_some();
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    let mut false_positives = Vec::new();
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).expect("read suite file");
        let cases: Value = serde_json::from_str(&text).expect("suite file is JSON");
        let row = rows.entry(name.clone()).or_default();
        for case in cases.as_array().expect("array of cases") {
            let schema = &case["schema"];
            let tests = case["tests"].as_array().expect("tests");
            row.schemas += 1;
            row.instances += tests.len();
            let compiled = match compiler.compile_json_schema(schema, opts) {
                Ok(g) => g,
                Err(e) => {
                    if verbose {
                        eprintln!("REFUSED {name}: {e}");
                    }
                    row.refused_instances += tests.len();
                    let key = match &e {
                        tokensieve::CompileError::JsonSchema(
                            tokensieve::JsonSchemaError::Unsupported { keyword, .. },
                        ) => {
                            format!("unsupported `{keyword}`")
                        }
                        tokensieve::CompileError::JsonSchema(
                            tokensieve::JsonSchemaError::UnresolvedRef { .. },
                        ) => "unresolved `$ref`".into(),
                        tokensieve::CompileError::JsonSchema(
                            tokensieve::JsonSchemaError::Unsatisfiable { .. },
                        ) => "unsatisfiable".into(),
                        other => format!("{}", other).chars().take(60).collect(),
                    };
                    *refusals.entry(key).or_default() += 1;
                    continue;
                }
            };
            row.compiled += 1;
            for t in tests {
                let data = serde_json::to_string(&t["data"]).expect("serialise");
                let valid = t["valid"].as_bool().expect("valid flag");
                let got = accepts(&compiled, &data);
                if got == valid {
                    row.passed += 1;
                } else if valid {
                    if verbose {
                        eprintln!("REJECTED {name}: {schema} {data}");
                    }
                    row.valid_rejected += 1;
                } else {
                    row.false_positives += 1;
                    false_positives.push(format!(
                        "{name}: {:?} / {:?}: schema {} accepted invalid {data}",
                        case["description"].as_str().unwrap_or(""),
                        t["description"].as_str().unwrap_or(""),
                        schema
                    ));
                }
            }
        }
    }
    (rows, refusals, false_positives)
}

fn totals(rows: &BTreeMap<String, Row>) -> Row {
    let mut total = Row::default();
    for r in rows.values() {
        total.schemas += r.schemas;
        total.compiled += r.compiled;
        total.instances += r.instances;
        total.passed += r.passed;
        total.valid_rejected += r.valid_rejected;
        total.false_positives += r.false_positives;
        total.refused_instances += r.refused_instances;
    }
    total
}

/// The options under which the specification's semantics hold best: properties in any
/// order, undeclared properties allowed, unknown keywords ignored.
fn spec_options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        strict: false,
        ignore_unknown_keywords: true,
        ..Default::default()
    }
}

/// The suite's remote documents: `http://localhost:1234/<path>` is the file
/// `remotes/<path>` (as the suite's README says); nothing is fetched.
fn remote_documents() -> Vec<(String, Value)> {
    fn walk(dir: &std::path::Path, rel: &str, out: &mut Vec<(String, Value)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                walk(&p, &format!("{rel}{name}/"), out);
            } else if name.ends_with(".json") {
                let text = std::fs::read_to_string(&p).expect("read remote");
                let doc: Value = serde_json::from_str(&text).expect("remote is JSON");
                out.push((format!("http://localhost:1234/{rel}{name}"), doc));
            }
        }
    }
    let mut out = Vec::new();
    if let Some(dir) = common::testdata_path("json-schema-test-suite/remotes") {
        walk(&dir, "", &mut out);
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn json_schema_test_suite_draft2020_12() {
    let Some(dir) = common::testdata_path("json-schema-test-suite/draft2020-12") else {
        return;
    };
    let start = Instant::now();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("read suite folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let documents = remote_documents();
    let suite_options = JsonSchemaOptions {
        documents: documents.clone(),
        ..spec_options()
    };
    let (rows, refusals, mut false_positives) = run_suite(&files, &suite_options);
    let default_options = JsonSchemaOptions {
        documents,
        ..Default::default()
    };
    let (default_rows, _, default_fps) = run_suite(&files, &default_options);
    false_positives.extend(default_fps);
    let default_total = totals(&default_rows);
    let total = totals(&rows);
    let mut md = String::new();
    md.push_str("# JSON Schema conformance\n\n");
    md.push_str(
        "Generated by `tests/json_schema/test_suite.rs` (`cargo test --release --test \
         json_schema test_suite::`); do not edit by hand.\n\n\
         The JSON-Schema-Test-Suite, draft 2020-12, top-level files \
         (`../shared/testdata/json-schema-test-suite/draft2020-12/*.json`), with the options \
         under which the specification's semantics hold: `any_order: true`, `strict: false`, \
         `ignore_unknown_keywords: true`, and the suite's remote documents given in \
         `documents` (`http://localhost:1234/<path>` is `remotes/<path>`; nothing is \
         fetched) (a second run with the default `JsonSchemaOptions` and the same documents \
         is summarised below the table). A schema is *compiled* or *refused* (a typed \
         error). For a compiled schema, every instance, serialised compactly by serde_json, is \
         fed byte for byte and then the stop token: *passed* means accepted when valid and \
         rejected when invalid. Instances of refused schemas count as not passed. *False \
         positives* (invalid instances accepted) must be 0: the test fails otherwise.\n\n",
    );
    let _ = writeln!(
        md,
        "**Totals:** {} of {} schemas compiled ({} refused); {} of {} instances passed; \
         {} valid instances rejected; {} instances of refused schemas; **{} false positives**.\n",
        total.compiled,
        total.schemas,
        total.schemas - total.compiled,
        total.passed,
        total.instances,
        total.valid_rejected,
        total.refused_instances,
        total.false_positives
    );
    let _ = writeln!(
        md,
        "**With the default options** (declared property order, unknown keywords refused): \
         {} of {} schemas compiled; {} of {} instances passed; {} valid instances rejected; \
         **{} false positives**.\n",
        default_total.compiled,
        default_total.schemas,
        default_total.passed,
        default_total.instances,
        default_total.valid_rejected,
        default_total.false_positives
    );
    md.push_str("| file | schemas | compiled | refused | instances | passed | valid rejected | of refused schemas | false positives |\n");
    md.push_str("|:--|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (name, r) in &rows {
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.schemas,
            r.compiled,
            r.schemas - r.compiled,
            r.instances,
            r.passed,
            r.valid_rejected,
            r.refused_instances,
            r.false_positives
        );
    }
    let _ = writeln!(
        md,
        "| **total** | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        total.schemas,
        total.compiled,
        total.schemas - total.compiled,
        total.instances,
        total.passed,
        total.valid_rejected,
        total.refused_instances,
        total.false_positives
    );
    md.push_str("## Why schemas were refused\n\n| reason (first error) | schemas |\n|:--|--:|\n");
    let mut reasons: Vec<_> = refusals.into_iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (k, n) in reasons {
        let _ = writeln!(md, "| {} | {n} |", k.replace('|', "\\|"));
    }
    md.push_str(
        "\nValid instances are rejected by design where the grammar is stricter than the spec \
         (see `src/json_schema/mod.rs`): `integer` without exponents, `format` asserted, `enum`/`const` in compact spelling.\n",
    );
    let doc =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json-schema-conformance.md");
    std::fs::write(&doc, md).expect("write conformance table");
    eprintln!(
        "suite (defaults): {}/{} schemas compiled, {}/{} instances passed, {} false positives",
        default_total.compiled,
        default_total.schemas,
        default_total.passed,
        default_total.instances,
        default_total.false_positives,
    );
    eprintln!(
        "suite (any_order, unknown ignored): {}/{} schemas compiled, {}/{} instances passed, {} false positives, {:?}",
        total.compiled,
        total.schemas,
        total.passed,
        total.instances,
        total.false_positives,
        start.elapsed()
    );
    assert!(
        false_positives.is_empty(),
        "{} invalid instances accepted:\n{}",
        false_positives.len(),
        false_positives.join("\n")
    );
    // Coverage only grows: a change that refuses what compiled before fails here (the
    // figures of docs/json-schema-conformance.md when this floor was set: 325 and 1054).
    assert!(
        total.compiled >= 325 && total.passed >= 1054,
        "coverage fell: {} schemas compiled (was 325), {} instances passed (was 1054)",
        total.compiled,
        total.passed
    );
}

/// JSONSchemaBench / MaskBench records (`../shared/testdata/jsonschemabench`): every schema
/// that compiles must reject its invalid instances. All 7,930 schemas (~15 s in release).
#[test]
fn maskbench_no_false_positives() {
    maskbench_run("any_order, unknown keywords ignored", &spec_options(), 7349);
}

/// The same with the default options (declared order, unknown keywords refused).
#[test]
fn maskbench_no_false_positives_defaults() {
    maskbench_run(
        "defaults",
        &JsonSchemaOptions {
            // With JSON_SCHEMA_IGNORE_UNKNOWN set: vendor keywords (`x-...`) are ignored.
            ignore_unknown_keywords: std::env::var_os("JSON_SCHEMA_IGNORE_UNKNOWN").is_some(),
            ..Default::default()
        },
        // The floor holds for the defaults proper; with vendor keywords ignored, more pass.
        4972,
    );
}

/// Runs every MaskBench record under `opts`; fails on a false positive, or when fewer than
/// `min_passing` schemas (the count when the floor was last raised) have every instance
/// right, so coverage never falls unnoticed.
fn maskbench_run(label: &str, opts: &JsonSchemaOptions, min_passing: usize) {
    use std::io::BufRead;
    let Some(dir) = common::testdata_path("jsonschemabench") else {
        return;
    };
    let start = Instant::now();
    let compiler = byte_compiler();
    let mut folders: Vec<_> = std::fs::read_dir(&dir)
        .expect("read folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    let (mut schemas, mut compiled, mut valid_ok, mut valid_all) = (0, 0, 0, 0);
    let mut passing = 0usize;
    let mut bad = Vec::new();
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    for folder in folders {
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        let file = folder.join(format!("{name}.jsonl.gz"));
        let Ok(f) = std::fs::File::open(&file) else {
            continue;
        };
        let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(f));
        for line in reader.lines() {
            let rec: Value = serde_json::from_str(&line.expect("line")).expect("record");
            schemas += 1;
            let t0 = Instant::now();
            let g = match compiler.compile_json_schema(&rec["schema"], opts) {
                Ok(g) => g,
                Err(e) => {
                    if std::env::var_os("JSON_SCHEMA_SUITE_VERBOSE").is_some() {
                        eprintln!("REFUSED ({label}) {}: {e}", rec["file"]);
                    }
                    let key = match &e {
                        tokensieve::CompileError::JsonSchema(
                            tokensieve::JsonSchemaError::Unsupported { keyword, .. },
                        ) => keyword.clone(),
                        other => format!("{other}").chars().take(40).collect(),
                    };
                    *refusals.entry(key).or_default() += 1;
                    continue;
                }
            };
            compiled += 1;
            let t1 = Instant::now();
            let mut all_right = true;
            for t in rec["tests"].as_array().into_iter().flatten() {
                let data = serde_json::to_string(&t["data"]).expect("serialise");
                let got = accepts(&g, &data);
                all_right &= got == (t["valid"].as_bool() == Some(true));
                if t["valid"].as_bool() == Some(true) {
                    valid_all += 1;
                    valid_ok += got as usize;
                    if !got && std::env::var_os("JSON_SCHEMA_SUITE_VERBOSE").is_some() {
                        let short: String = data.chars().take(300).collect();
                        eprintln!("REJECTED valid ({label}) {}: {short}", rec["file"]);
                    }
                } else if got {
                    bad.push(format!("{}: accepted invalid {data}", rec["file"]));
                }
            }
            passing += all_right as usize;
            if t0.elapsed().as_secs_f64() > 1.0 {
                eprintln!(
                    "slow: {} compile {:?} match {:?}",
                    rec["file"],
                    t1 - t0,
                    t1.elapsed()
                );
            }
        }
    }
    let mut reasons: Vec<_> = refusals.into_iter().collect();
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    eprintln!(
        "maskbench ({label}): {compiled}/{schemas} compiled, {passing} passing (every \
         instance right), {valid_ok}/{valid_all} valid instances of \
         compiled schemas accepted, {} false positives, {:?}\nrefusals: {:?}",
        bad.len(),
        start.elapsed(),
        &reasons[..reasons.len().min(25)]
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(
        passing >= min_passing,
        "coverage fell ({label}): {passing} schemas with every instance right, was {min_passing}"
    );
}
