//! Tool-call tags, the criterion form of `tokensieve bench --tools` (issue 24): Hermes' tag
//! (`tool_choice` auto, parallel calls) over the first 10 and 100 distinct BFCL tools of
//! MaskBench, on the Qwen3 vocabulary. Per N:
//!
//! * `compile_first_mask/{lazy,eager}`: tag → compiled grammar → matcher → first mask, a
//!   fresh compiler each time (nothing shared with an earlier compile but the vocabulary);
//! * `first_pass/lazy`: one rendered call (the last of the N tools with a BFCL instance)
//!   and the stop token teacher-forced on a fresh matcher of a just-compiled grammar, so
//!   every mask is met cold (the compile is not timed);
//! * with `--features llguidance`, `…/llguidance`: the same on llguidance 1.9.1, on the
//!   tag's Lark form (`bench::lark`).
//!
//! ```text
//! cargo bench -p tokensieve-cli --bench tool_tags [--features llguidance] [-- --quick]
//! ```
//!
//! Needs `../shared/tokenizers/qwen3` and `../shared/testdata/jsonschemabench`; prints why
//! and measures nothing when they are missing.

// The bench drivers of the command line (a binary crate has no library to link); only
// the tool-tag part is used here.
#[allow(unused)]
#[path = "../src/bench/mod.rs"]
mod bench;
#[path = "../../benches/common/mod.rs"]
mod common;

use std::ops::Deref;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput};
use tokensieve::Precompute;

use bench::engine::Engine;
use bench::tools::{self, ToolBench};

/// Criterion groups of one engine on `tag`: compile → first mask, and (when `first_pass`)
/// the cold first pass. `make` gives the engine for one compile (tokensieve: a fresh
/// compiler; llguidance: its one parser factory, as tokensieve's one vocabulary).
fn bench_engine<E: Engine, R: Deref<Target = E>>(
    c: &mut Criterion,
    group: &str,
    name: &str,
    make: &dyn Fn() -> R,
    tag: &ToolBench,
    first_pass: bool,
) {
    let mut g = c.benchmark_group(group);
    g.sample_size(10);
    g.bench_function(format!("compile_first_mask/{name}"), |b| {
        b.iter_batched(
            || {
                let engine = make();
                let source = engine.tag_source(&tag.tag).expect("tag source");
                (engine, source)
            },
            |(engine, source)| tools::compile_first_mask(&*engine, source).expect("compiles"),
            BatchSize::PerIteration,
        )
    });
    if first_pass {
        g.throughput(Throughput::Elements(tag.tokens.len() as u64));
        g.bench_function(format!("first_pass/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let engine = make();
                    let source = engine.tag_source(&tag.tag).expect("tag source");
                    let grammar = tools::compile_first_mask(&*engine, source).expect("compiles");
                    let t = Instant::now();
                    let (_, mismatches, accepted) = tools::pass(&*engine, &grammar, &tag.tokens);
                    total += t.elapsed();
                    assert!(
                        accepted && mismatches == 0,
                        "{name}: the call is not accepted"
                    );
                }
                total
            })
        });
    }
    g.finish();
}

fn main() {
    let Some(tok) = common::Tokenizer::load("qwen3") else {
        return;
    };
    let records = common::shared_dir().join("testdata/jsonschemabench");
    if !records.is_dir() {
        println!(
            "skipping: MaskBench records missing at {}",
            records.display()
        );
        return;
    }
    let (vocab, encoder) = (&tok.vocab, &tok.encoder);
    let stop = vocab.stop_tokens()[0];
    let cases = tools::load_tools(&records).expect("BFCL tools");
    let hermes = tokensieve_tools::format_by_name("hermes").expect("hermes");
    #[cfg(feature = "llguidance")]
    let llg = bench::engine::Llguidance::new(
        &common::shared_dir().join("tokenizers/qwen3/tokenizer.json"),
        stop,
    )
    .expect("llguidance");
    let mut c = Criterion::default().configure_from_args();
    for n in [10, 100] {
        let tag = tools::prepare(hermes.as_ref(), &cases, n, encoder, stop).expect("tag");
        let group = format!("tool_tags/hermes_qwen3/{n}");
        for (name, precompute) in [("lazy", Precompute::Lazy), ("eager", Precompute::Eager)] {
            let make = || Box::new(tools::tokensieve_engine(vocab, precompute));
            bench_engine(
                &mut c,
                &group,
                name,
                &make,
                &tag,
                precompute == Precompute::Lazy,
            );
        }
        #[cfg(feature = "llguidance")]
        {
            let make = || &llg;
            bench_engine(&mut c, &group, "llguidance", &make, &tag, true);
        }
    }
    c.final_summary();
}
