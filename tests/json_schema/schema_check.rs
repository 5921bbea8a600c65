#![allow(dead_code)] // each test binary uses some of the helpers
//! Helpers shared by the JSON Schema tests: a Llama 3.1 compiler, and accept/reject checks
//! that run each text both as one string and token by token, and oracle checks against
//! the `jsonschema` crate on the byte-level vocabulary.

use super::common::{byte_accepts, byte_compiler, RealTokenizer};
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, JsonSchemaError, Precompute};

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

/// The specification's semantics: declared properties in any order.
pub fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    }
}

/// Compiles `schema` (it must compile; by [`byte_compiler`], in any order) and checks that
/// the grammar accepts exactly the instances (JSON texts) the `jsonschema` validator accepts.
pub fn byte_agrees(schema: Value, instances: &[&str]) {
    let g = byte_compiler()
        .compile_json_schema(&schema, &any_order())
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let v = jsonschema::validator_for(&schema).expect("a valid schema");
    for text in instances {
        let inst: Value = serde_json::from_str(text).expect("JSON instance");
        assert_eq!(
            byte_accepts(&g, text),
            v.is_valid(&inst),
            "{schema} on {text}\n{}",
            g.grammar()
        );
    }
}

/// `schema` compiles, accepts `good` and rejects `bad` (the oracle agrees on both).
pub fn byte_expect(schema: Value, good: &[&str], bad: &[&str]) {
    let g = byte_compiler()
        .compile_json_schema(&schema, &any_order())
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let v = jsonschema::validator_for(&schema).expect("a valid schema");
    for (texts, want) in [(good, true), (bad, false)] {
        for text in texts {
            let inst: Value = serde_json::from_str(text).expect("JSON instance");
            assert_eq!(v.is_valid(&inst), want, "oracle: {schema} on {text}");
            assert_eq!(
                byte_accepts(&g, text),
                want,
                "{schema} on {text}\n{}",
                g.grammar()
            );
        }
    }
}

/// Either refused as unsupported, or exact on `instances`.
pub fn byte_refused_or_agrees(schema: Value, instances: &[&str]) {
    match tokensieve::json_schema_to_grammar(&schema, &any_order()) {
        Err(JsonSchemaError::Unsupported { .. }) => {}
        Err(e) => panic!("{schema}: unexpected error {e}"),
        Ok(_) => byte_agrees(schema, instances),
    }
}
