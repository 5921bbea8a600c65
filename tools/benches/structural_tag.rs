//! A structural tag with 50 tools on the Qwen3 vocabulary: a `<think>` span, then free text
//! with Hermes-style `<tool_call>` tags (one per tool, each with its own 3-property schema).
//! Measures the tag → first mask time with an empty mask cache ("cold") and with the masks of
//! an earlier compile of the same tag in the compiler's cache ("warm"), and
//! `fill_next_token_bitmask` per step while teacher-forcing a reply that calls one tool.
//!
//! ```text
//! cargo bench --bench structural_tag     # add `-- --quick` for a shorter run
//! ```
//!
//! Needs `../shared/tokenizers/qwen3`; prints why and measures nothing when it is missing.

#[path = "../../benches/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use tokensieve::GrammarMatcher;

const TOOLS: usize = 50;

fn tag() -> String {
    let tags: Vec<String> = (0..TOOLS)
        .map(|i| {
            format!(
                r#"{{"type": "tag", "begin": "<tool_call>\n{{\"name\": \"tool_{i}\", \"arguments\": ",
                "content": {{"type": "json_schema", "json_schema": {{"type": "object", "properties": {{
                    "city": {{"type": "string"}}, "days": {{"type": "integer", "minimum": 1}},
                    "unit": {{"enum": ["c", "f"]}}}}, "required": ["city"]}}}},
                "end": "}}\n</tool_call>"}}"#
            )
        })
        .collect();
    format!(
        r#"{{"type": "structural_tag", "format": {{"type": "sequence", "elements": [
            {{"type": "tag", "begin": "<think>", "content": {{"type": "any_text"}}, "end": "</think>"}},
            {{"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [{}]}}]}}}}"#,
        tags.join(",")
    )
}

fn main() {
    let Some(tok) = common::Tokenizer::load("qwen3") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    let tag = tag();
    let compiler = common::compiler(&tok.vocab);
    let words = tok.vocab.bitmask_words();
    let first_mask = |compiler: &tokensieve::GrammarCompiler| {
        let g = compiler
            .compile_structural_tag(tag.as_str())
            .expect("compiles");
        let mut m = GrammarMatcher::new(g);
        let mut mask = vec![0u32; words];
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        mask
    };
    let mut group = c.benchmark_group("structural_tag/50_tools");
    group.sample_size(10);
    group.bench_function("compile_first_mask/cold", |b| {
        // A fresh mask cache each time (the vocabulary's trie is shared).
        b.iter(|| first_mask(&compiler.clone().with_mask_cache_capacity(256 << 20)))
    });
    first_mask(&compiler);
    group.bench_function("compile_first_mask/warm", |b| {
        b.iter(|| first_mask(&compiler))
    });
    group.finish();

    let grammar = compiler
        .compile_structural_tag(tag.as_str())
        .expect("compiles");
    let reply = "<think>The user wants the weather in Paris for three days.</think>I will check.\n\
                 <tool_call>\n{\"name\": \"tool_25\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n\
                 </tool_call>";
    let docs = vec![tok.encode_with_stop(reply)];
    let t = Instant::now();
    let accepted = common::Cursor::warm(&grammar, &docs);
    println!(
        "{TOOLS} tools: {} nodes, {} KiB; reply of {} tokens accepted: {}; warm pass {:.1} ms",
        grammar.node_count(),
        grammar.memory_bytes() / 1024,
        docs[0].len(),
        accepted == 1,
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut cursor = common::Cursor::new(grammar, Arc::new(docs), 0);
    let mut mask = vec![0u32; words];
    let mut group = c.benchmark_group("structural_tag/50_tools");
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
    c.final_summary();
}
