//! `fill_next_token_bitmask_batch` over 64 matchers of the built-in JSON grammar (Llama 3.1
//! vocabulary), each teacher-forcing a different MaskBench instance, on a rayon pool of 1
//! and of 2 threads. Only the batch fill is timed; then every matcher accepts its next
//! token (untimed).
//!
//! ```text
//! cargo bench --bench batch              # add `-- --quick` for a shorter run
//! ```
//!
//! Before criterion runs, both pools fill the same sequence of batch states once
//! (`STEPS` batches) and the speedup of 2 threads over 1 is printed; then the speedup the
//! work itself allows (each row timed alone; two threads cannot do better than half the
//! sum or the slowest row), which a busy machine does not blur.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use tokensieve::mask::fill_next_token_bitmask_batch;
use tokensieve::{CompiledGrammar, GrammarMatcher};

const BATCH: usize = 64;
const STEPS: usize = 300;

/// 64 matchers, matcher `i` walking document `i`, `i + 64`, ... in turn.
struct Batch {
    grammar: Arc<CompiledGrammar>,
    docs: Arc<Vec<Vec<u32>>>,
    matchers: Vec<GrammarMatcher>,
    at: Vec<(usize, usize)>,
}

impl Batch {
    fn new(grammar: Arc<CompiledGrammar>, docs: Arc<Vec<Vec<u32>>>) -> Batch {
        Batch {
            matchers: (0..BATCH)
                .map(|_| GrammarMatcher::new(grammar.clone()))
                .collect(),
            at: (0..BATCH).map(|i| (i % docs.len(), 0)).collect(),
            grammar,
            docs,
        }
    }

    fn advance(&mut self) {
        for (m, at) in self.matchers.iter_mut().zip(&mut self.at) {
            let doc = &self.docs[at.0];
            let ok = m.accept_token(doc[at.1]);
            at.1 += 1;
            if !ok || at.1 == doc.len() {
                *at = ((at.0 + BATCH) % self.docs.len(), 0);
                *m = GrammarMatcher::new(self.grammar.clone());
            }
        }
    }
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

fn main() {
    let Some(tok) = common::Tokenizer::load("llama3_1") else {
        return;
    };
    let compiler = common::compiler(&tok.vocab);
    let grammar = compiler.compile_builtin_json().expect("JSON grammar");
    let mut texts = Vec::new();
    for collection in ["Github_easy", "Kubernetes", "Glaiveai2K", "Snowplow"] {
        texts.extend(common::maskbench_instances(collection, BATCH));
    }
    if texts.is_empty() {
        return;
    }
    let docs: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode_with_stop(t)).collect();
    let accepted = common::Cursor::warm(&grammar, &docs);
    println!(
        "{} documents ({accepted} accepted), {} tokens",
        docs.len(),
        docs.iter().map(Vec::len).sum::<usize>()
    );
    let docs = Arc::new(docs);
    let words = tok.vocab.bitmask_words();
    let pools = [(1, pool(1)), (2, pool(2))];

    // The same STEPS batch states on each pool.
    let mut totals = Vec::new();
    for (threads, pool) in &pools {
        let mut batch = Batch::new(grammar.clone(), docs.clone());
        let mut mask = vec![0u32; words * BATCH];
        let mut total = Duration::ZERO;
        for _ in 0..STEPS {
            let t = Instant::now();
            pool.install(|| fill_next_token_bitmask_batch(&mut batch.matchers, &mut mask))
                .expect("batch fill");
            total += t.elapsed();
            batch.advance();
        }
        println!(
            "batch of {BATCH}, {threads} thread(s): {:.1} µs per batch over {STEPS} batches",
            total.as_secs_f64() * 1e6 / STEPS as f64
        );
        totals.push(total.as_secs_f64());
    }
    println!("speedup 2 threads vs 1: {:.2}×", totals[0] / totals[1]);

    // What the work allows on two free cores, whatever else runs on the machine: per batch,
    // each matcher's fill timed alone; two threads cannot beat max(sum / 2, slowest row).
    let mut batch = Batch::new(grammar.clone(), docs.clone());
    let mut row = vec![0u32; words];
    let (mut sum, mut bound, mut dominated, mut slowest) = (0.0f64, 0.0f64, 0usize, 0.0f64);
    for _ in 0..STEPS {
        let mut rows = Vec::with_capacity(BATCH);
        for m in &mut batch.matchers {
            let t = Instant::now();
            m.fill_next_token_bitmask(&mut row).expect("mask");
            rows.push(t.elapsed().as_secs_f64());
        }
        let total: f64 = rows.iter().sum();
        let max = rows.iter().copied().fold(0.0, f64::max);
        sum += total;
        bound += (total / 2.0).max(max);
        dominated += (max > total / 2.0) as usize;
        slowest = slowest.max(max);
        batch.advance();
    }
    println!(
        "work bound on two free cores: {:.2}× (rows timed alone: {:.1} µs per batch; \
         {dominated} of {STEPS} batches have one row over half the batch; slowest row {:.0} µs)",
        sum / bound,
        sum * 1e6 / STEPS as f64,
        slowest * 1e6
    );

    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group(format!("batch{BATCH}"));
    group.throughput(Throughput::Elements(BATCH as u64));
    for (threads, pool) in &pools {
        let mut batch = Batch::new(grammar.clone(), docs.clone());
        let mut mask = vec![0u32; words * BATCH];
        group.bench_function(format!("{threads}_threads"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    pool.install(|| fill_next_token_bitmask_batch(&mut batch.matchers, &mut mask))
                        .expect("batch fill");
                    total += t.elapsed();
                    batch.advance();
                }
                total
            })
        });
    }
    group.finish();
    c.final_summary();
}
