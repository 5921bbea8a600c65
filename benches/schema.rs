//! Two real MaskBench schemas on the Llama 3.1 vocabulary: a small one (a Glaive function
//! call, 0.7 KB of schema) and a large one (a Kubernetes object, 7.8 KB). For each: the time
//! from the schema to its first mask (lazy precompute, the mode with millisecond compiles;
//! eager too for the small one), and `fill_next_token_bitmask` per step, teacher-forcing
//! the schema's valid instances after a warm pass (so lazily built masks are in place).
//!
//! ```text
//! cargo bench --bench schema             # add `-- --quick` for a shorter run
//! ```
//!
//! Needs `../shared/tokenizers/llama3_1` and `../shared/testdata/jsonschemabench`; prints
//! why and measures nothing when they are missing. `tokensieve bench` measures the same
//! figures over every MaskBench schema, side by side with llguidance.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use tokensieve::{GrammarMatcher, JsonSchemaOptions, Precompute};

const SCHEMAS: &[(&str, &str, &str)] = &[
    (
        "small",
        "Glaiveai2K",
        "Glaiveai2K---analyze_health_data_ecfa5553.json",
    ),
    (
        "large",
        "Kubernetes",
        "Kubernetes---kb_1021_Normalized.json",
    ),
];

fn main() {
    let Some(tok) = common::Tokenizer::load("llama3_1") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    // As `tokensieve bench` compiles them: defaults, vendor keywords ignored.
    let options = JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..JsonSchemaOptions::default()
    };
    let lazy = common::compiler(&tok.vocab).with_precompute(Precompute::Lazy);
    let eager = common::compiler(&tok.vocab);
    let words = tok.vocab.bitmask_words();
    for &(label, collection, file) in SCHEMAS {
        let Some(rec) = common::maskbench_record(collection, file) else {
            continue;
        };
        let first_mask = |compiler: &tokensieve::GrammarCompiler| {
            let g = compiler
                .compile_json_schema(&rec.schema, &options)
                .expect("the bench schemas compile");
            let mut m = GrammarMatcher::new(g);
            let mut mask = vec![0u32; words];
            m.fill_next_token_bitmask(&mut mask).expect("mask");
            mask
        };
        let mut group = c.benchmark_group(format!("schema/{label}"));
        group.sample_size(10);
        group.bench_function("compile_first_mask/lazy", |b| b.iter(|| first_mask(&lazy)));
        if label == "small" {
            group.bench_function("compile_first_mask/eager", |b| {
                b.iter(|| first_mask(&eager))
            });
        }
        group.finish();

        let grammar = lazy
            .compile_json_schema(&rec.schema, &options)
            .expect("the bench schemas compile");
        let docs: Vec<Vec<u32>> = rec
            .instances
            .iter()
            .map(|t| tok.encode_with_stop(t))
            .collect();
        let t = Instant::now();
        let accepted = common::Cursor::warm(&grammar, &docs);
        println!(
            "{label} ({file}): {} instances, {} tokens, {accepted} accepted; warm pass {:.1} ms, \
             {} KiB after it",
            docs.len(),
            docs.iter().map(Vec::len).sum::<usize>(),
            t.elapsed().as_secs_f64() * 1e3,
            grammar.memory_bytes() / 1024
        );
        let mut cursor = common::Cursor::new(grammar, Arc::new(docs), 0);
        let mut mask = vec![0u32; words];
        let mut group = c.benchmark_group(format!("schema/{label}"));
        group.throughput(Throughput::Elements(1));
        group.bench_function("fill_next_token_bitmask", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    cursor
                        .matcher
                        .fill_next_token_bitmask(&mut mask)
                        .expect("mask");
                    total += t.elapsed();
                    cursor.advance();
                }
                total
            })
        });
        group.finish();
    }
    c.final_summary();
}
