//! Random walks over JSON Schema grammars on Llama 3.1: for MaskBench schemas
//! (`../shared/testdata/jsonschemabench`), sample allowed tokens (seeded) until the stop
//! token; every finished output must parse with `serde_json` and be valid for the schema by
//! the independent `jsonschema` crate (formats asserted too). Every sampled token must be
//! accepted (the mask never allows a token the matcher rejects).
//!
//! Walks are capped at `MAX_STEPS` tokens; after `BIAS_AFTER` steps they prefer the stop
//! token and short closing tokens so that most finish; unfinished walks are skipped and
//! counted, as are outputs with numbers `serde_json` cannot read (beyond f64). Run with `cargo test --release --test json_schema random_walks:: -- --nocapture`.

use crate::common;

use std::io::BufRead;
use std::sync::Arc;
use std::time::Instant;

use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
use serde_json::Value;
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::{GrammarMatcher, Precompute, Vocabulary};

/// Schemas whose walks must finish (and validate).
const WANT_FINISHED: usize = 200;
const MAX_STEPS: usize = 400;
const BIAS_AFTER: usize = 60;
/// Schemas longer than this (in JSON characters) are skipped, to keep compile time low.
const MAX_SCHEMA_CHARS: usize = 6_000;

/// Every MaskBench schema, in a seeded random order.
fn schemas(rng: &mut StdRng) -> Option<Vec<(String, Value)>> {
    let dir = common::testdata_path("jsonschemabench")?;
    let mut out = Vec::new();
    let mut folders: Vec<_> = std::fs::read_dir(&dir)
        .expect("read folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    for folder in folders {
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(f) = std::fs::File::open(folder.join(format!("{name}.jsonl.gz"))) else {
            continue;
        };
        for line in std::io::BufReader::new(flate2::read::GzDecoder::new(f)).lines() {
            let rec: Value = serde_json::from_str(&line.expect("line")).expect("record");
            let file = rec["file"].as_str().unwrap_or("?").to_string();
            out.push((file, rec["schema"].clone()));
        }
    }
    out.shuffle(rng);
    Some(out)
}

/// Allowed token ids of a filled bitmask.
fn allowed_ids(mask: &[u32], vocab_size: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, &bits) in mask.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            let i = b.trailing_zeros() as usize;
            let id = w * 32 + i;
            if id < vocab_size {
                out.push(id as u32);
            }
            b &= b - 1;
        }
    }
    out
}

/// Tokens preferred late in a walk: they close strings, arrays and objects, or are short.
fn is_closer(bytes: &[u8]) -> bool {
    matches!(
        bytes,
        b"\"" | b"}" | b"]" | b"\"}" | b"\"]" | b"}]" | b"]}" | b"}}" | b"\"," | b"0" | b"1"
    )
}

#[test]
fn random_walks_validate_with_jsonschema() {
    let Some(path) = common::tokenizer_path("llama3_1") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0x5eed_0003);
    let Some(list) = schemas(&mut rng) else {
        return;
    };
    let start = Instant::now();
    let vocab = Arc::new(Vocabulary::from_tokenizer_json(&path).expect("vocabulary"));
    let compiler =
        tokensieve::GrammarCompiler::new(vocab.clone())
            .with_precompute(Precompute::Lazy)
            .with_cache_enabled(false);
    let opts = JsonSchemaOptions {
        any_order: true,
        ignore_unknown_keywords: true,
        max_whitespace: Some(2),
        ..Default::default()
    };
    let size = vocab.vocab_size();
    let mut mask = vec![0u32; vocab.bitmask_words()];
    let (mut tried, mut finished, mut unfinished) = (0usize, 0usize, 0usize);
    let mut out_of_range = 0usize;
    let mut failures = Vec::new();
    for (file, schema) in list {
        if finished >= WANT_FINISHED {
            break;
        }
        if schema.to_string().len() > MAX_SCHEMA_CHARS {
            continue;
        }
        let Ok(g) = compiler.compile_json_schema(&schema, &opts) else {
            continue;
        };
        let Ok(validator) = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
        else {
            continue;
        };
        tried += 1;
        let mut m = GrammarMatcher::new(g.clone());
        let mut out: Vec<u8> = Vec::new();
        let mut done = false;
        for step in 0..MAX_STEPS {
            m.fill_next_token_bitmask(&mut mask).expect("fill mask");
            let allowed = allowed_ids(&mask, size);
            if allowed.is_empty() {
                failures.push(format!(
                    "{file}: dead end after {:?}",
                    String::from_utf8_lossy(&out)
                ));
                break;
            }
            let late = step >= BIAS_AFTER;
            let stops: Vec<u32> = allowed
                .iter()
                .copied()
                .filter(|&t| vocab.is_stop_token(t))
                .collect();
            let closers: Vec<u32> = allowed
                .iter()
                .copied()
                .filter(|&t| vocab.token_bytes(t).is_some_and(is_closer))
                .collect();
            let pick = if late && !stops.is_empty() {
                stops[0]
            } else if late && !closers.is_empty() && rng.gen_bool(0.7) {
                closers[rng.gen_range(0..closers.len())]
            } else if !stops.is_empty() && rng.gen_bool(0.3) {
                stops[0]
            } else {
                allowed[rng.gen_range(0..allowed.len())]
            };
            if let Err(e) = m.try_accept_token(pick) {
                failures.push(format!("{file}: allowed token {pick} rejected: {e}"));
                break;
            }
            if vocab.is_stop_token(pick) {
                done = true;
                break;
            }
            out.extend_from_slice(vocab.token_bytes(pick).unwrap_or(&[]));
        }
        if !done {
            unfinished += 1;
            continue;
        }
        finished += 1;
        let text = String::from_utf8_lossy(&out).into_owned();
        match serde_json::from_str::<Value>(&text) {
            // Valid JSON (RFC 8259 sets no limit) that serde_json cannot hold in an f64.
            Err(e) if e.to_string().contains("number out of range") => {
                out_of_range += 1;
            }
            Err(e) => failures.push(format!("{file}: output does not parse ({e}): {text}")),
            Ok(v) => {
                if !validator.is_valid(&v) {
                    let why: Vec<String> = validator
                        .iter_errors(&v)
                        .take(3)
                        .map(|e| e.to_string())
                        .collect();
                    failures.push(format!(
                        "{file}: invalid output {text}: {why:?}\nschema {schema}"
                    ));
                }
            }
        }
    }
    eprintln!(
        "json schema walks: {tried} schemas walked, {finished} finished, {unfinished} capped at \
         {MAX_STEPS} tokens, {out_of_range} with numbers beyond f64 (not checked), {} failures, \
         {:?}",
        failures.len(),
        start.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        finished - out_of_range >= WANT_FINISHED * 9 / 10,
        "only {finished} walks finished ({tried} tried)"
    );
}
