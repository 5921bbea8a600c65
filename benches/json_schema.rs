//! JSON Schema compile time and mask time over MaskBench schemas, on Llama 3.1.
//!
//! ```text
//! cargo bench --bench json_schema             # custom pass + criterion
//! cargo bench --bench json_schema -- --quick  # shorter criterion run
//! ```
//!
//! The custom pass compiles the first `PER_COLLECTION` schemas of every JSONSchemaBench
//! collection (`../shared/testdata/jsonschemabench/<C>/<C>.jsonl.gz`) with
//! `any_order: true, ignore_unknown_keywords: true` and prints the compile-time
//! distribution (p50, p99, max; refused schemas apart). Then, for every compiled schema
//! with a valid instance, it teacher-forces that instance (compact `serde_json`, tokenised
//! by the Llama 3.1 tokenizer) and prints the distribution of `fill_next_token_bitmask`
//! times. Criterion then times the compile of one mid-sized schema and the mask steps.
//! Vocabulary: `../shared/tokenizers/llama3_1/tokenizer.json`, or the embedded o200k_base
//! when it is missing.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use flate2::read::GzDecoder;
use serde_json::Value;
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Vocabulary};

const PER_COLLECTION: usize = 20;

/// A tokenizer for the instances, matching the vocabulary's ids.
enum Encoder {
    Hf(Box<tokenizers::Tokenizer>),
    Tiktoken(tiktoken_rs::CoreBPE),
}

impl Encoder {
    fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            Encoder::Hf(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default(),
            Encoder::Tiktoken(bpe) => bpe.encode_ordinary(text),
        }
    }
}

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
}

fn load_vocab() -> (String, Vocabulary, Encoder) {
    let path = shared().join("tokenizers/llama3_1/tokenizer.json");
    if path.is_file() {
        let vocab = Vocabulary::from_tokenizer_json(&path).expect("load the Llama 3.1 vocabulary");
        let tok = tokenizers::Tokenizer::from_file(&path).expect("load the Llama 3.1 tokenizer");
        return ("llama3_1".to_string(), vocab, Encoder::Hf(Box::new(tok)));
    }
    println!("note: {} is missing; using o200k_base", path.display());
    let vocab = Vocabulary::o200k_base().expect("build o200k_base");
    let bpe = tiktoken_rs::o200k_base().expect("build o200k_base");
    ("o200k_base".to_string(), vocab, Encoder::Tiktoken(bpe))
}

/// (schema, first valid instance) of the first `PER_COLLECTION` records of each collection.
fn load_records() -> Vec<(Value, Option<Value>)> {
    let dir = shared().join("testdata/jsonschemabench");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("note: {} is missing: nothing to measure", dir.display());
        return out;
    };
    let mut folders: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    for folder in folders {
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(file) = File::open(folder.join(format!("{name}.jsonl.gz"))) else {
            continue;
        };
        for line in BufReader::new(GzDecoder::new(file))
            .lines()
            .take(PER_COLLECTION)
        {
            let Ok(line) = line else { break };
            let Ok(rec) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let valid = rec["tests"]
                .as_array()
                .and_then(|t| t.iter().find(|t| t["valid"] == Value::Bool(true)))
                .map(|t| t["data"].clone());
            out.push((rec["schema"].clone(), valid));
        }
    }
    out
}

/// "n, mean, p50, p99, max" of times in `unit` (sorts `xs`).
fn distribution(xs: &mut [f64], unit: &str) -> String {
    if xs.is_empty() {
        return "none".to_string();
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let pct = |p: f64| xs[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    format!(
        "{n}, mean {:.2} {unit}, p50 {:.2} {unit}, p99 {:.2} {unit}, max {:.2} {unit}",
        xs.iter().sum::<f64>() / n as f64,
        pct(0.50),
        pct(0.99),
        xs[n - 1]
    )
}

fn options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        ignore_unknown_keywords: true,
        ..Default::default()
    }
}

fn main() {
    let (vocab_name, vocab, encoder) = load_vocab();
    let stop = vocab.stop_tokens().first().copied();
    // Compiles are timed: no whole-grammar cache.
    let compiler = GrammarCompiler::new(Arc::new(vocab)).with_cache_enabled(false);
    let records = load_records();
    let opts = options();
    let mut compile_ms = Vec::new();
    let mut refused = 0usize;
    // (grammar, instance tokens) to step through.
    let mut docs: Vec<(Arc<CompiledGrammar>, Vec<u32>)> = Vec::new();
    let mut mid: Option<(f64, Value)> = None;
    for (schema, valid) in &records {
        let t = Instant::now();
        let Ok(g) = compiler.compile_json_schema(schema, &opts) else {
            refused += 1;
            continue;
        };
        let ms = t.elapsed().as_secs_f64() * 1e3;
        compile_ms.push(ms);
        if mid.is_none() && (5.0..50.0).contains(&ms) {
            mid = Some((ms, schema.clone()));
        }
        if let Some(v) = valid {
            let text = serde_json::to_string(v).expect("serialise");
            let mut ids = encoder.encode(&text);
            ids.extend(stop);
            docs.push((g, ids));
        }
    }
    println!(
        "JSON Schema on {vocab_name}: {} schemas, {refused} refused; compile times: {}",
        records.len(),
        distribution(&mut compile_ms, "ms")
    );
    let mut bitmask = vec![0u32; compiler.vocabulary().bitmask_words()];
    let mut mask_us = Vec::new();
    let mut rejected = 0usize;
    for (g, ids) in &docs {
        let mut m = GrammarMatcher::new(g.clone());
        for &id in ids {
            let t = Instant::now();
            m.fill_next_token_bitmask(&mut bitmask).expect("mask");
            mask_us.push(t.elapsed().as_secs_f64() * 1e6);
            if !m.accept_token(id) {
                rejected += 1;
                break;
            }
        }
    }
    println!(
        "  masks over {} instances ({rejected} stopped early: rejected in this tokenisation): {}",
        docs.len(),
        distribution(&mut mask_us, "µs")
    );

    let mut c = Criterion::default().configure_from_args();
    if let Some((ms, schema)) = mid {
        let mut group = c.benchmark_group("json_schema");
        group.sample_size(10);
        println!("criterion compile: a schema that compiled in {ms:.1} ms above");
        group.bench_function(format!("compile/{vocab_name}"), |b| {
            b.iter(|| {
                compiler
                    .compile_json_schema(&schema, &opts)
                    .expect("compile")
            })
        });
        group.finish();
    }
    if !docs.is_empty() {
        let mut group = c.benchmark_group("json_schema");
        let (mut d, mut step) = (0usize, 0usize);
        let mut m = GrammarMatcher::new(docs[0].0.clone());
        group.bench_function(format!("fill_next_token_bitmask/{vocab_name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    m.fill_next_token_bitmask(&mut bitmask).expect("mask");
                    total += t.elapsed();
                    let ok = m.accept_token(docs[d].1[step]);
                    step += 1;
                    if !ok || step == docs[d].1.len() {
                        d = (d + 1) % docs.len();
                        step = 0;
                        m = GrammarMatcher::new(docs[d].0.clone());
                    }
                }
                total
            })
        });
        group.finish();
    }
    c.final_summary();
}
