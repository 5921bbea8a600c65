#![allow(dead_code)] // each test binary uses some of the helpers
//! Helpers shared by the JSON Schema tests: a Llama 3.1 compiler, and accept/reject checks
//! that run each text both as one string and token by token.

use super::common::RealTokenizer;
use std::sync::{Arc, OnceLock};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Precompute};

pub fn llama() -> Option<&'static (RealTokenizer, GrammarCompiler)> {
    static CELL: OnceLock<Option<(RealTokenizer, GrammarCompiler)>> = OnceLock::new();
    CELL.get_or_init(|| {
        let rt = RealTokenizer::load("llama3_1")?;
        let compiler = rt.compiler.clone().with_precompute(Precompute::Lazy);
        Some((rt, compiler))
    })
    .as_ref()
}

/// Whether `g` accepts `text` then the stop token: as one string, and token by token with
/// the tokenizer's own encoding (the two must agree).
pub fn accepts(rt: &RealTokenizer, g: &Arc<CompiledGrammar>, text: &str) -> bool {
    let mut m = GrammarMatcher::new(g.clone());
    let by_string = m.accept_string(text) && m.accept_token(rt.stop()) && m.is_terminated();
    let mut m = GrammarMatcher::new(g.clone());
    let ids = rt.encode_exact(text);
    let by_tokens =
        ids.iter().all(|&t| m.accept_token(t)) && m.accept_token(rt.stop()) && m.is_terminated();
    assert_eq!(
        by_string, by_tokens,
        "string vs tokens disagree on {text:?}"
    );
    by_string
}

pub fn check_with(
    schema: serde_json::Value,
    opts: &JsonSchemaOptions,
    good: &[&str],
    bad: &[&str],
) {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let g = compiler
        .compile_json_schema(&schema, opts)
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    for s in good {
        assert!(
            accepts(rt, &g, s),
            "{schema} should accept {s:?}\n{}",
            g.grammar()
        );
    }
    for s in bad {
        assert!(
            !accepts(rt, &g, s),
            "{schema} should reject {s:?}\n{}",
            g.grammar()
        );
    }
}

pub fn check(schema: serde_json::Value, good: &[&str], bad: &[&str]) {
    check_with(schema, &JsonSchemaOptions::default(), good, bad)
}
