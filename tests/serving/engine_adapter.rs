//! The engine adapter (`tokensieve::engine`, issue 26): every structured-output kind of a
//! vLLM request compiles, and the per-request calls behave as vLLM's xgrammar backend's
//! (tokens after termination ignored, drafts validated up to the terminating token,
//! rollback and reset, one row of a batch bitmask).

use std::sync::Arc;
use tokensieve::engine::{EngineError, StructuredOutputBackend, StructuredOutputKind as Kind};
use tokensieve::mask::is_token_allowed;
use tokensieve::{GrammarCompiler, MatcherOptions, Vocabulary};

const STOP: u32 = 256;
const EOT: u32 = 257;

fn backend() -> StructuredOutputBackend {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"</s>".to_vec());
    tokens.push(b"<eot>".to_vec());
    let vocab = Vocabulary::from_token_bytes(&tokens, &[STOP, EOT], &[STOP]).unwrap();
    StructuredOutputBackend::new(GrammarCompiler::new(vocab))
}

fn bytes(s: &str) -> Vec<u32> {
    s.bytes().map(u32::from).collect()
}

#[test]
fn every_kind_compiles_and_accepts_its_language() {
    let b = backend();
    let cases: [(Kind, &str, &str, &str); 6] = [
        (
            Kind::Json,
            r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
            r#"{"n": 12}"#,
            r#"{"m": 1}"#,
        ),
        (Kind::JsonObject, "ignored", r#"{"any": [1, "x"]}"#, "[1]"),
        (Kind::Regex, "[a-c]+d", "abcd", "abc"),
        (Kind::Grammar, r#"root ::= "yes" | "no""#, "no", "maybe"),
        (
            Kind::StructuralTag,
            r#"{"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}"#,
            "hi",
            "ho",
        ),
        (
            Kind::Choice,
            r#"["red", "green", "a \"quoted\" (choice)|*"]"#,
            "a \"quoted\" (choice)|*",
            "blue",
        ),
    ];
    for (kind, spec, good, bad) in cases {
        let mut g = b.compile_grammar(kind, spec).unwrap();
        let mut ids = bytes(good);
        ids.push(STOP);
        assert!(g.accept_tokens("r", &ids), "{kind:?}: {good}");
        assert!(g.is_terminated(), "{kind:?}");
        let mut g = b.compile_grammar(kind, spec).unwrap();
        let mut ids = bytes(bad);
        ids.push(STOP);
        assert!(!g.accept_tokens("r", &ids), "{kind:?}: {bad}");
    }
    assert!(matches!(
        b.compile_grammar(Kind::Choice, r#"{"a": 1}"#),
        Err(EngineError::Choice(_))
    ));
    assert!(matches!(
        b.compile_grammar(Kind::Choice, "[]"),
        Err(EngineError::Choice(_))
    ));
    assert!(matches!(
        b.compile_grammar(Kind::Json, "{not json"),
        Err(EngineError::JsonSchema(_))
    ));
    assert!(matches!(
        b.compile_grammar(Kind::Regex, "(a"),
        Err(EngineError::Regex(_))
    ));
    assert!(matches!(
        b.compile_grammar(Kind::Grammar, "root ::= ("),
        Err(EngineError::Compile(_))
    ));
    // Requests with the same specification share one compiled grammar.
    let x = b.compile(Kind::Regex, "[a-c]+d").unwrap();
    assert!(Arc::ptr_eq(&x, &b.compile(Kind::Regex, "[a-c]+d").unwrap()));
}

#[test]
fn per_request_calls_follow_vllms_semantics() {
    let b = backend();
    let mut g = b.compile_grammar(Kind::Regex, "ab*").unwrap();
    // validate_tokens: the accepted prefix, state unchanged; it stops after the stop token.
    assert_eq!(g.validate_tokens(&bytes("abba")), bytes("abb"));
    let draft = [u32::from(b'a'), u32::from(b'b'), STOP, u32::from(b'b')];
    assert_eq!(g.validate_tokens(&draft), draft[..3].to_vec());
    assert_eq!(g.num_processed_tokens(), 0);
    assert!(g.accept_tokens("r1", &bytes("ab")));
    assert_eq!(g.num_processed_tokens(), 2);
    // One row of a batch bitmask.
    let mut mask = b.allocate_token_bitmask(3);
    let words = mask.len() / 3;
    g.fill_bitmask(&mut mask, 1).unwrap();
    let row = &mask[words..2 * words];
    assert!(is_token_allowed(row, u32::from(b'b')) && is_token_allowed(row, STOP));
    assert!(!is_token_allowed(row, u32::from(b'a')));
    assert!(
        mask[..words].iter().all(|&w| w == u32::MAX),
        "row 0 untouched"
    );
    assert!(g.fill_bitmask(&mut mask, 3).is_err());
    // Terminated: further tokens are ignored (true) and validate to nothing.
    assert!(g.accept_tokens("r1", &[STOP, u32::from(b'z')]));
    assert!(g.is_terminated());
    assert_eq!(g.num_processed_tokens(), 3);
    assert!(g.accept_tokens("r1", &bytes("zzz")));
    assert!(g.validate_tokens(&[STOP]).is_empty());
    // Rollback (the stop token and a "b"), then reset.
    g.rollback(2).unwrap();
    assert!(!g.is_terminated());
    assert_eq!(g.num_processed_tokens(), 1);
    assert!(g.rollback(5).is_err());
    assert!(g.accept_tokens("r1", &bytes("bbb")));
    g.reset();
    assert_eq!(g.num_processed_tokens(), 0);
    assert!(g.accept_tokens("r1", &bytes("ab")));
    // A rejected token: false, the tokens before it accepted.
    let mut g = b.compile_grammar(Kind::Regex, "ab*").unwrap();
    assert!(!g.accept_tokens("r2", &bytes("abxb")));
    assert_eq!(g.num_processed_tokens(), 2);
}

#[test]
fn matcher_options_and_per_request_stop_tokens() {
    let b = backend().with_matcher_options(MatcherOptions {
        max_rollback_tokens: Some(2),
        ..Default::default()
    });
    let mut g = b.compile_grammar(Kind::Regex, "a+").unwrap();
    assert!(g.accept_tokens("r", &bytes("aaaa")));
    assert!(g.rollback(3).is_err());
    g.rollback(2).unwrap();
    // validate_tokens is not bound by max_rollback_tokens.
    assert_eq!(g.validate_tokens(&bytes("aaaaa")).len(), 5);

    let mut g = b
        .compile_grammar_with_stop_tokens(Kind::Regex, "a+", &[EOT])
        .unwrap();
    assert_eq!(g.validate_tokens(&[u32::from(b'a'), STOP]), bytes("a"));
    assert!(g.accept_tokens("r", &[u32::from(b'a'), EOT]));
    assert!(g.is_terminated());
    assert!(matches!(
        b.compile_grammar_with_stop_tokens(Kind::Regex, "a+", &[9999]),
        Err(EngineError::Matcher(_))
    ));
}

/// `json_object` is any object also when the backend's JSON options are strict (strict mode
/// would close `{"type": "object"}` to `{}`).
#[test]
fn json_object_is_any_object_under_strict_options() {
    let b = backend().with_json_options(tokensieve::JsonSchemaOptions {
        strict: true,
        ..Default::default()
    });
    for (text, ok) in [(r#"{"a": [1, "x"]}"#, true), ("{}", true), ("[1]", false)] {
        let mut g = b.compile_grammar(Kind::JsonObject, "").unwrap();
        let mut ids = bytes(text);
        ids.push(STOP);
        assert_eq!(g.accept_tokens("r", &ids), ok, "{text}");
    }
    // A schema under the same options stays closed.
    let mut g = b
        .compile_grammar(Kind::Json, r#"{"type": "object"}"#)
        .unwrap();
    let mut ids = bytes(r#"{"a": 1}"#);
    ids.push(STOP);
    assert!(!g.accept_tokens("r", &ids));
}
