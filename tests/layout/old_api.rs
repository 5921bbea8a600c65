//! Code written against tokensieve 0.x (before the workspace split) that must keep
//! compiling through the deprecated paths, and the migrations docs/migrating.md gives for
//! what could not keep its old form. If one of these paths is removed, this file stops
//! compiling.
#![allow(deprecated)]

use std::sync::Arc;

use tokensieve::mask::{fill_next_token_bitmask_batch, BitmaskError};
use tokensieve::regex::RegexCompileError;
use tokensieve::{
    CompileError, CompiledGrammar, GrammarCompiler, GrammarMatcher, JsonSchemaError,
    JsonSchemaOptions, Limit, Limits, MatcherError, RegexError, Vocabulary,
};

/// Single-byte tokens for `a`..`c`, `0`..`9` and the JSON punctuation, then `<eos>`.
fn compiler() -> GrammarCompiler {
    let mut tokens: Vec<Vec<u8>> = b"abc0123456789{}[]\":, ".iter().map(|&b| vec![b]).collect();
    tokens.push(b"<eos>".to_vec());
    let stop = tokens.len() as u32 - 1;
    let refs: Vec<&[u8]> = tokens.iter().map(Vec::as_slice).collect();
    GrammarCompiler::new(Vocabulary::from_token_bytes(&refs, &[stop], &[stop]).unwrap())
}

/// 0.x style: a function returning `RegexCompileError` that propagates `compile_regex`'s
/// error with `?`.
fn old_compile_regex(
    c: &GrammarCompiler,
    pattern: &str,
) -> Result<Arc<CompiledGrammar>, RegexCompileError> {
    Ok(c.compile_regex(pattern)?)
}

#[test]
fn regex_compile_error_keeps_its_two_variants_at_both_paths() {
    let c = compiler();
    // A syntax error is `Regex`, with the position the front end reports.
    match old_compile_regex(&c, "ab(") {
        Err(RegexCompileError::Regex(e)) => {
            assert!(matches!(e, RegexError::Syntax { .. }), "{e:?}");
            assert_eq!(e.position().offset, 2, "{e}");
        }
        Err(RegexCompileError::Compile(e)) => panic!("a syntax error became Compile: {e}"),
        Ok(_) => panic!("`ab(` compiled"),
    }
    // A valid pattern that matches nothing: the compiler refuses it (an empty language),
    // so it is `Compile` (the old variant), holding the `CompileError` of today.
    let e = old_compile_regex(&c, r"[^\s\S]").unwrap_err();
    let root_path: &tokensieve::RegexCompileError = &e;
    match root_path {
        tokensieve::RegexCompileError::Compile(inner) => {
            assert!(
                matches!(inner, CompileError::EmptyLanguage { .. }),
                "{inner:?}"
            )
        }
        tokensieve::RegexCompileError::Regex(r) => panic!("`x` is a valid regex: {r}"),
    }
    // And back: the old error converts to the one type every entry point returns.
    assert!(matches!(
        CompileError::from(e),
        CompileError::EmptyLanguage { .. }
    ));
    assert!(old_compile_regex(&c, "a[bc]+").is_ok());
}

/// `compile_json_schema` returned `JsonSchemaError`; it returns `CompileError`, whose
/// `JsonSchema` variant holds the front end's error and whose `Limit` variant holds what
/// was `JsonSchemaError::Compile(CompileError::Limit(l))`.
#[test]
fn json_schema_errors_are_matched_through_compile_error() {
    let c = compiler();
    let opts = JsonSchemaOptions::default();
    match c.compile_json_schema(r#"{"type": "strin"}"#, &opts) {
        Err(CompileError::JsonSchema(JsonSchemaError::InvalidKeyword { pointer, .. })) => {
            assert_eq!(pointer, "#/type")
        }
        other => panic!("expected an invalid `type`, got {:?}", other.err()),
    }
    let small = compiler().with_limits(Limits {
        max_repeat_bound: 10,
        ..Limits::default()
    });
    match small.compile_json_schema(r#"{"type": "string", "maxLength": 50}"#, &opts) {
        Err(CompileError::Limit(l)) => {
            assert_eq!(l.limit, Limit::RepeatBound);
            assert_eq!(l.pointer.as_deref(), Some("#/maxLength"));
        }
        other => panic!("expected a repeat-bound limit, got {:?}", other.err()),
    }
}

/// `fill_next_token_bitmask_batch` over matchers: its error is now generic over the
/// matcher's error, so 0.x code naming the type writes `BitmaskError<MatcherError>`.
#[test]
fn batch_fill_error_names_the_matcher_error() {
    let c = compiler();
    let g = c.compile_regex("ab").unwrap();
    let mut matchers = vec![GrammarMatcher::new(g.clone()), GrammarMatcher::new(g)];
    let words = matchers[0].bitmask_words();
    let mut short = vec![0u32; words];
    let r: Result<(), BitmaskError<MatcherError>> =
        fill_next_token_bitmask_batch(&mut matchers, &mut short);
    assert!(
        matches!(r, Err(BitmaskError::Length { expected, got, .. }) if expected == 2 * words && got == words),
        "{r:?}"
    );
}
