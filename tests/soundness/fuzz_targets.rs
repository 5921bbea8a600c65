//! The fuzz targets' properties as proptest tests, so that CI runs them (fuzzing itself is
//! not part of CI; see `fuzz/README.md`): JSON Schema and structural tags. The matcher
//! target's API sequences are in `tests/soundness/api_sequences.rs`; the tool-call parsers' properties
//! are in the `tokensieve-tools` crate's `tools/tests/api/parser_props.rs`.
//!
//! Run with `cargo test --release --test soundness fuzz_targets::`.

use crate::common;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use tokensieve::{
    GrammarCompiler, GrammarMatcher, JsonSchemaOptions, Limits, Precompute, Vocabulary,
};

/// Every byte as a token, a few words (JSON and tool-call markers), and special tokens; the
/// last id is the stop token.
fn vocab() -> &'static Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for w in [
            "{\"",
            "\":",
            "\": ",
            "\",",
            "true",
            "false",
            "null",
            "12",
            "é",
            "<tool_call>",
            "</tool_call>",
            "<function=",
            "</function>",
            "<think>",
            "</think>",
        ] {
            tokens.push(w.as_bytes().to_vec());
        }
        let first = tokens.len() as u32;
        for s in ["<|im_end|>", "<|tool_call|>", "<eos>"] {
            tokens.push(s.as_bytes().to_vec());
        }
        let special: Vec<u32> = (first..tokens.len() as u32).collect();
        let eos = tokens.len() as u32 - 1;
        Arc::new(Vocabulary::from_token_bytes(&tokens, &special, &[eos]).unwrap())
    })
}

fn compiler() -> GrammarCompiler {
    GrammarCompiler::new(vocab().clone())
        .with_precompute(Precompute::Lazy)
        .with_limits(Limits {
            max_automaton_nodes: 200_000,
            ..Limits::default()
        })
}

fn allowed(mask: &[u32], n: u32) -> Vec<u32> {
    (0..n)
        .filter(|&t| mask[(t / 32) as usize] >> (t % 32) & 1 == 1)
        .collect()
}

/// Mask bit ⇔ `accept_token` (on a fork) for every token and one id past the vocabulary.
fn check_invariant(m: &GrammarMatcher, mask: &[u32]) -> Result<(), TestCaseError> {
    let n = vocab().vocab_size() as u32;
    for t in 0..=n {
        let bit = t < n && mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
        prop_assert_eq!(bit, m.clone().accept_token(t), "token {}", t);
    }
    Ok(())
}

/// A random walk under the masks (the stop token, when allowed, half the time; always
/// after `max / 2` steps). Returns the text when the walk reached the stop token.
fn walk(
    m: &mut GrammarMatcher,
    mut seed: u64,
    max: usize,
) -> Result<Option<Vec<u8>>, TestCaseError> {
    let n = vocab().vocab_size() as u32;
    let eos = n - 1;
    let mut mask = vec![0u32; m.bitmask_words()];
    let mut out = Vec::new();
    seed |= 1;
    for step in 0..max {
        m.fill_next_token_bitmask(&mut mask).unwrap();
        if step % 8 == 0 {
            check_invariant(m, &mask)?;
        }
        let ids = allowed(&mask, n);
        if ids.is_empty() {
            return Ok(None);
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let t = if ids.contains(&eos) && (step >= max / 2 || seed % 2 == 0) {
            eos
        } else {
            ids[((seed >> 1) % ids.len() as u64) as usize]
        };
        prop_assert!(m.accept_token(t), "masked token {} rejected", t);
        if t == eos {
            prop_assert!(m.is_terminated());
            return Ok(Some(vocab().decode_bytes(&out)));
        }
        out.push(t);
    }
    Ok(None)
}

// ---------------------------------------------------------------- JSON Schema

fn leaf_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "null"})),
        Just(json!({"type": "boolean"})),
        (-50i64..50, 0i64..200)
            .prop_map(|(a, b)| json!({"type": "integer", "minimum": a, "maximum": a + b})),
        (-50i64..50).prop_map(|a| json!({"type": "integer", "exclusiveMinimum": a})),
        (0u32..3, 0u32..5)
            .prop_map(|(a, b)| json!({"type": "string", "minLength": a, "maxLength": a + b})),
        prop::sample::select(vec!["^[a-z]+$", "^(a|bc)$", "^[0-9]{2,3}$", "x", "^é?$"])
            .prop_map(|p| json!({"type": "string", "pattern": p})),
        Just(json!({"type": "number", "minimum": -1.5, "maximum": 10})),
        Just(json!({"type": "number"})),
        prop::collection::vec(
            prop_oneof![
                Just(json!(1)),
                Just(json!("a")),
                Just(json!(null)),
                Just(json!([true])),
                Just(json!({"k": 2.5}))
            ],
            1..4
        )
        .prop_map(|v| json!({"enum": v})),
        Just(json!({"const": {"a": [1, "x"]}})),
        Just(json!({"type": ["string", "integer"], "maxLength": 2, "maximum": 3})),
        Just(json!(true)),
        Just(json!({})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf_schema().prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            (inner.clone(), 0u64..2, 0u64..3).prop_map(|(items, min, extra)| {
                json!({"type": "array", "items": items, "minItems": min, "maxItems": min + extra})
            }),
            prop::collection::vec(inner.clone(), 1..3)
                .prop_map(|p| json!({"type": "array", "prefixItems": p, "items": false})),
            (
                prop::collection::vec(inner.clone(), 0..3),
                prop::collection::vec(any::<bool>(), 3),
                prop_oneof![Just(json!(false)), Just(json!(true)), inner.clone()],
            )
                .prop_map(|(props, req, additional)| {
                    let names = ["a", "b", "c"];
                    let properties: serde_json::Map<String, Value> = props
                        .into_iter()
                        .enumerate()
                        .map(|(i, s)| (names[i].to_string(), s))
                        .collect();
                    let required: Vec<&str> = properties
                        .keys()
                        .enumerate()
                        .filter(|&(i, _)| req[i])
                        .map(|(_, k)| k.as_str())
                        .collect();
                    json!({"type": "object", "properties": properties, "required": required,
                           "additionalProperties": additional})
                }),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"anyOf": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"allOf": v})),
            inner
                .clone()
                .prop_map(|s| json!({"$defs": {"d": s}, "$ref": "#/$defs/d"})),
            inner.prop_map(
                |s| json!({"type": "object", "properties": {"n": {"$ref": "#"}, "v": s}})
            ),
        ]
    })
}

/// Runs `cases` cases of `strategy` through `test`, which says whether the input compiled
/// and whether its walk finished; returns those two counts.
fn run<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(bool, bool), TestCaseError>,
) -> (usize, usize) {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let (compiled, finished) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = proptest::test_runner::TestRunner::new(common::proptest_config(cases));
    let result = runner.run(&strategy, |input| {
        let (c, f) = test(input)?;
        compiled.fetch_add(c as usize, Relaxed);
        finished.fetch_add(f as usize, Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    (compiled.into_inner(), finished.into_inner())
}

/// A random small schema compiles or gives a typed error, never a panic; a random walk
/// under its masks keeps mask ⇔ accept and, when it ends, is JSON valid for the schema.
#[test]
fn json_schema_compiles_and_walks_validate() {
    let strategy = (schema(), any::<bool>(), any::<bool>(), any::<u64>());
    let (compiled, valid) = run(
        1000,
        strategy,
        |(schema, any_order, any_whitespace, seed)| {
            let options = JsonSchemaOptions {
                any_order,
                any_whitespace,
                ..JsonSchemaOptions::default()
            };
            let Ok(compiled) = compiler().compile_json_schema(&schema, &options) else {
                return Ok((false, false));
            };
            let mut m = GrammarMatcher::new(compiled);
            let Some(text) = walk(&mut m, seed, 200)? else {
                return Ok((true, false));
            };
            let text = String::from_utf8(text).expect("JSON text is UTF-8");
            let value: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                // JSON (RFC 8259 sets no range) that an f64 cannot hold: nothing to validate.
                Err(e) if e.to_string().starts_with("number out of range") => {
                    return Ok((true, false))
                }
                Err(e) => return Err(TestCaseError::fail(format!("not JSON ({e}): {text:?}"))),
            };
            let validator = jsonschema::validator_for(&schema).expect("a valid schema");
            prop_assert!(
                validator.is_valid(&value),
                "{} is not valid for {}",
                text,
                schema
            );
            Ok((true, true))
        },
    );
    println!("{compiled} of 1000 schemas compiled, {valid} walks finished and validated");
    assert!(compiled >= 500, "only {compiled} of 1000 schemas compiled");
    assert!(valid >= 300, "only {valid} walks finished");
}

// ---------------------------------------------------------------- structural tags

const TEXTS: &[&str] = &[
    "",
    "a",
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "<function=f>",
    "</function>",
    "<think>",
    "</think>",
    "<|im_end|>",
    "<|tool_call|>",
    "\n",
    "é",
    "<",
    ">",
];

fn text() -> impl Strategy<Value = &'static str> {
    prop::sample::select(TEXTS)
}

fn leaf_format() -> impl Strategy<Value = Value> {
    prop_oneof![
        text().prop_map(|t| json!({"type": "const_string", "value": t})),
        (prop::sample::select(vec![
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            json!({"type": "string", "maxLength": 3}),
            json!({"enum": ["x", 1]}),
        ]), prop::sample::select(vec!["json", "qwen_xml", "yaml"]))
            .prop_map(|(s, style)| json!({"type": "json_schema", "json_schema": s, "style": style})),
        prop::sample::select(vec!["[a-z]+", "a|ab", "(?s).*", "[^<]{0,4}>", "(", "\\b"])
            .prop_map(|p| json!({"type": "regex", "pattern": p})),
        prop::sample::select(vec![r#"root ::= "a" root | "b""#, "root ::= <|im_end|>", "root ::= "])
            .prop_map(|g| json!({"type": "grammar", "grammar": g})),
        prop::collection::vec(text(), 0..3).prop_map(|e| json!({"type": "any_text", "excludes": e})),
        prop::sample::select(vec![json!("<|im_end|>"), json!("a"), json!(3), json!(1_000_000), json!("<none>")])
            .prop_map(|t| json!({"type": "token", "token": t})),
        Just(json!({"type": "any_tokens"})),
        Just(json!({"type": "exclude_token", "tokens": ["<eos>"]})),
        Just(json!({"type": "no_such_format"})),
    ]
}

fn tag_of(inner: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    (text(), inner, text())
        .prop_map(|(b, c, e)| json!({"type": "tag", "begin": b, "content": c, "end": e}))
}

fn format() -> impl Strategy<Value = Value> {
    leaf_format().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| json!({"type": "sequence", "elements": v})),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| json!({"type": "or", "elements": v})),
            inner.clone().prop_map(|c| json!({"type": "optional", "content": c})),
            inner.clone().prop_map(|c| json!({"type": "plus", "content": c})),
            inner.clone().prop_map(|c| json!({"type": "star", "content": c})),
            (inner.clone(), 0u32..3, 0u32..4)
                .prop_map(|(c, min, max)| json!({"type": "repeat", "min": min, "max": max, "content": c})),
            tag_of(inner.clone()),
            (prop::collection::vec(text(), 0..3), prop::collection::vec(tag_of(inner.clone()), 1..3), any::<bool>(), any::<bool>())
                .prop_map(|(triggers, tags, a, s)| json!({"type": "triggered_tags", "triggers": triggers,
                    "tags": tags, "at_least_one": a, "stop_after_first": s})),
            (text(), prop::collection::vec(tag_of(inner.clone()), 1..3), any::<bool>())
                .prop_map(|(sep, tags, a)| json!({"type": "tags_with_separator", "separator": sep,
                    "tags": tags, "at_least_one": a})),
            (prop::collection::vec((text(), inner.clone()), 0..3), any::<bool>())
                .prop_map(|(rules, l)| json!({"type": "dispatch",
                    "rules": rules.into_iter().map(|(t, f)| json!([t, f])).collect::<Vec<_>>(), "loop": l})),
            prop::collection::vec(tag_of(inner), 0..3)
                .prop_map(|tags| json!({"type": "token_triggered_tags", "trigger_tokens": ["<|tool_call|>"], "tags": tags})),
        ]
    })
}

/// A random structural tag compiles or gives a typed error, never a panic; its masks
/// agree with `accept_token` along a random walk.
#[test]
fn structural_tag_compiles_or_errors() {
    let strategy = (format(), any::<bool>(), any::<u64>());
    let (compiled, finished) = run(1500, strategy, |(format, wrap, seed)| {
        let tag = if wrap {
            json!({"type": "structural_tag", "format": format})
        } else {
            format
        };
        let Ok(compiled) = compiler().compile_structural_tag(&tag) else {
            return Ok((false, false));
        };
        let mut m = GrammarMatcher::new(compiled);
        Ok((true, walk(&mut m, seed, 40)?.is_some()))
    });
    println!("{compiled} of 1500 structural tags compiled, {finished} walks finished");
    assert!(
        compiled >= 300,
        "only {compiled} of 1500 structural tags compiled"
    );
}
