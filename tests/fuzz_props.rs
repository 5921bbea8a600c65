//! The fuzz targets' properties as proptest tests, so that CI runs them (fuzzing itself is
//! not part of CI; see `fuzz/README.md`): JSON Schema, structural tags and tool-call
//! parsers. The matcher target's API sequences are in `tests/api_sequences.rs`.
//!
//! Run with `cargo test --release --test fuzz_props`.

mod common;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use tokensieve::tools::{
    format_by_name_with, format_names, FormatOptions, JsonArray, Llama3Json, Mistral,
    MistralSyntax, ParsedOutput, PartialCall, PartialOutput, Pythonic, StreamEvent,
    StreamingParser, Tool, ToolCallFormat,
};
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

// ---------------------------------------------------------------- tool-call parsers

fn tools() -> &'static Vec<Tool> {
    static T: OnceLock<Vec<Tool>> = OnceLock::new();
    T.get_or_init(|| {
        Tool::list_from_openai(&json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}}},
            {"type": "function", "function": {"name": "search", "parameters": {
                "type": "object", "properties": {"queries": {"type": "array",
                "items": {"type": "string"}}}}}}
        ]))
        .unwrap()
    })
}

/// Pieces of model output: every registered family's markers, call bodies, fragments.
const PIECES: &[&str] = &[
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<tool_call>{\"arguments\": {\"queries\": [\"x\"]}, \"name\": \"search\"}</tool_call>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "\n",
    " ",
    "Sure.",
    "é",
    "<",
    "<tool_",
    "</tool",
    "{",
    "}",
    "\"",
    "\\\"",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
    "{\"name\": \"search\", \"arguments\": {\"queries\": [\"a</tool_call>\"]}}",
    "{\"name\": \"nope\", \"arguments\": {}}",
    "{\"name\": \"get_weather\", \"arguments\": ",
    "{\"name\": \"\", \"arguments\": {}}",
    "{\"arguments\": {}, \"name\": \"search\"}",
    "[1, 2",
    "<function=get_weather>",
    "</function>",
    "<parameter=city>",
    "</parameter>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "functions.search:0",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<|channel|>",
    "commentary to=functions.search",
    "<|message|>",
    "<|call|>",
    // Mistral v11+, pythonic lists and Llama 3 JSON, which random soup rarely assembles.
    "[TOOL_CALLS]search[ARGS]{\"queries\": [\"x\"]}",
    "get_weather[ARGS]",
    "[ARGS]",
    "[get_weather(city='Paris'), search(queries=[\"a)\"])]",
    "[search(queries=['",
    "get_weather(city=",
    ")]",
    "{\"name\": \"search\", \"parameters\": {}}",
];

/// What a stream of events adds up to, in the whole-output parse's shape; checks that calls
/// start and end in order.
fn collect(events: &[StreamEvent]) -> Result<ParsedOutput, TestCaseError> {
    let mut out = ParsedOutput::default();
    let (mut content, mut reasoning) = (String::new(), String::new());
    // Indices are 0, 1, 2, … over the calls the whole parse returns: a call starts at the
    // number of calls ended before it, at most one call is open at a time, it ends with
    // the name it started with, and a `Malformed` ends (retracts) an open call, whose
    // index the next call takes.
    let mut open: Option<(usize, String)> = None;
    for e in events {
        match e {
            StreamEvent::Content(d) => content.push_str(d),
            StreamEvent::Reasoning(d) => reasoning.push_str(d),
            StreamEvent::ToolCallStart { index, name, .. } => {
                prop_assert!(open.is_none(), "start {index} while a call is open");
                prop_assert_eq!(*index, out.tool_calls.len());
                open = Some((*index, name.clone()));
            }
            StreamEvent::ToolCallArguments { index, .. } => {
                prop_assert!(open.as_ref().is_some_and(|(i, _)| i == index));
            }
            StreamEvent::ToolCallEnd { index, call } => {
                prop_assert!(
                    open.take()
                        .is_some_and(|(i, n)| i == *index && n == call.name),
                    "end {index} without its start"
                );
                out.tool_calls.push(call.clone());
            }
            StreamEvent::Malformed(m) => {
                open = None;
                out.errors.push(m.clone());
            }
        }
    }
    prop_assert!(open.is_none(), "a call left open");
    out.content = (!content.is_empty()).then_some(content);
    out.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    Ok(out)
}

/// The formats whose streaming is checked against the whole-output parse: every
/// registered one, unless `TOOL_FORMATS` (comma-separated) names some. Alone, a format
/// without begin markers rarely meets the floor of texts with calls: pair it with `hermes`.
fn stream_checked_formats() -> Vec<String> {
    if let Ok(list) = std::env::var("TOOL_FORMATS") {
        return list.split(',').map(str::to_owned).collect();
    }
    format_names()
}

/// For every registered tool-call format, any text parses without a panic, and streaming
/// it in random chunks (empty ones included) gives what the whole-output parse gives.
#[test]
fn tool_parsers_stream_as_whole() {
    let strategy = (
        prop::collection::vec(
            prop_oneof![4 => prop::sample::select(PIECES).prop_map(String::from), 1 => "[ -~]{0,6}"],
            0..14,
        ),
        prop::collection::vec(0usize..9, 1..40),
        any::<bool>(),
        any::<bool>(),
    );
    let (with_calls, _) = run(
        3000,
        strategy,
        |(pieces, mut chunks, reasoning, no_tools)| {
            let text = pieces.concat();
            // Empty deltas are pushed too, but some delta must be non-empty.
            chunks.push(1);
            let tools: &[Tool] = if no_tools { &[] } else { tools() };
            let options = FormatOptions {
                reasoning,
                ..FormatOptions::default()
            };
            let mut calls = false;
            for name in stream_checked_formats() {
                let format = format_by_name_with(&name, &options).expect("a registered name");
                let whole = format.parse(&text, tools);
                calls |= !whole.tool_calls.is_empty();
                let events = stream_in_chunks(&*format, tools, &text, &chunks)?;
                prop_assert_eq!(collect(&events)?, whole, "{}: {:?}", name, text);
            }
            Ok((calls, false))
        },
    );
    println!("{with_calls} of 3000 texts had calls");
    assert!(
        with_calls >= 300,
        "only {with_calls} of 3000 texts had calls"
    );
}

/// Whole calls in the shapes of DeepSeek V3.1, DeepSeek V3, Kimi K2 and Harmony (the
/// general [`PIECES`] almost never line up into one).
const SECTION_FAMILY_CALLS: &[&str] = &[
    "<｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"queries\": [\"x\"]}<｜tool▁call▁end｜>",
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>",
    "<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{\"queries\": [\"x\"]}<|tool_call_end|>",
    "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{\"queries\": [\"x\"]}<|call|>",
];

/// Pieces of DeepSeek, Kimi K2 and Harmony output besides whole calls: their markers,
/// headers and argument objects, and fragments.
const SECTION_FAMILY_PIECES: &[&str] = &[
    // DeepSeek V3.1 and V3 calls, sections, markers.
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁",
    "function",
    "get_weather",
    "\n```json\n",
    "\n```",
    "```python\nx\n```",
    // Kimi K2 calls, sections, markers.
    "<|tool_calls_section_begin|>",
    "<|tool_call_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "functions.get_weather:1",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_",
    // Harmony messages and markers.
    "<|channel|>analysis<|message|>hm<|end|>",
    "<|start|>assistant",
    "<|start|>assistant to=functions.get_weather",
    "<|channel|>",
    "commentary to=functions.get_weather",
    " <|constrain|>json",
    "<|message|>",
    "<|call|>",
    "<|end|>",
    "<|return|>",
    "final",
    "<|",
    // Arguments, reasoning and fragments.
    "{\"city\": \"Paris\"}",
    "{\"queries\": [\"<|call|>\"]}",
    "{\"city\": ",
    "{}",
    "[1]",
    "{",
    "}",
    "\"",
    "<think>",
    "</think>",
    "\n",
    " ",
    "Sure.",
    "é",
    "\t",
    "\u{a0}",
    "\r\n",
    "functions.",
    ":0",
    "\"{\\\"city\\\": \\\"Oslo\\\"}\"",
    "12",
    "```json\n{\"city\": \"Rome\"}\n```",
];

/// The formats [`tool_parsers_stream_section_families`] checks.
const SECTION_FAMILIES: &[&str] = &[
    "deepseek_v3",
    "deepseek_v31",
    "kimi_k2",
    "harmony",
    "openai",
];

/// For DeepSeek, Kimi K2 and Harmony, streaming text built from their own calls and
/// markers in random chunks (empty ones included) gives what the whole-output parse
/// gives (the property of [`tool_parsers_stream_as_whole`] on text where these families'
/// calls actually occur).
#[test]
fn tool_parsers_stream_section_families() {
    let strategy = (
        prop::collection::vec(
            prop_oneof![
                2 => prop::sample::select(SECTION_FAMILY_CALLS).prop_map(String::from),
                6 => prop::sample::select(SECTION_FAMILY_PIECES).prop_map(String::from),
                1 => "[ -~]{0,6}"
            ],
            0..14,
        ),
        prop::collection::vec(0usize..12, 1..40),
        any::<bool>(),
        any::<bool>(),
    );
    let formats: Vec<String> = match std::env::var("TOOL_FORMATS") {
        Ok(list) => list.split(',').map(str::to_owned).collect(),
        Err(_) => SECTION_FAMILIES.iter().map(|s| s.to_string()).collect(),
    };
    let (with_calls, _) = run(
        3000,
        strategy,
        |(pieces, mut chunks, reasoning, no_tools)| {
            let text = pieces.concat();
            chunks.push(1);
            let tools: &[Tool] = if no_tools { &[] } else { tools() };
            let options = FormatOptions {
                reasoning,
                ..FormatOptions::default()
            };
            let mut calls = false;
            for name in &formats {
                let format = format_by_name_with(name, &options).expect("a registered name");
                let whole = format.parse(&text, tools);
                calls |= !whole.tool_calls.is_empty();
                let events = stream_in_chunks(&*format, tools, &text, &chunks)?;
                prop_assert_eq!(collect(&events)?, whole, "{}: {:?}", name, text);
                let last = format.parse_partial(&text, tools, true);
                check_call_deltas(&events, &last.calls)
                    .map_err(|e| TestCaseError::fail(format!("{name}: {e} in {text:?}")))?;
            }
            Ok((calls, false))
        },
    );
    println!("{with_calls} of 3000 texts had calls");
    assert!(
        with_calls >= 300,
        "only {with_calls} of 3000 texts had calls"
    );
}

/// The events of `text` pushed through a [`StreamingParser`] in deltas of the sizes in
/// `chunks` (cycled; zero sizes push empty deltas, widened to char boundaries), then
/// `finish`; a second `finish` must send nothing.
fn stream_in_chunks(
    format: &dyn ToolCallFormat,
    tools: &[Tool],
    text: &str,
    chunks: &[usize],
) -> Result<Vec<StreamEvent>, TestCaseError> {
    let mut parser = StreamingParser::new(format, tools);
    let mut events = Vec::new();
    let (mut pos, mut i) = (0, 0);
    while pos < text.len() {
        let mut end = (pos + chunks[i % chunks.len()]).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        events.extend(parser.push(&text[pos..end]));
        pos = end;
        i += 1;
    }
    events.extend(parser.finish());
    prop_assert!(parser.finish().is_empty());
    Ok(events)
}

/// Each streamed call that ended has the id it started with, and its argument deltas add
/// up to the whole-output parse's `arguments_text` for that index (the index-th complete
/// call; a JSON string literal decoded) (a partial parse whose
/// arguments text was not a prefix of the later one loses deltas silently).
fn check_call_deltas(events: &[StreamEvent], last: &[PartialCall]) -> Result<(), String> {
    let mut args: Vec<(usize, Option<String>, String)> = Vec::new();
    for e in events {
        match e {
            StreamEvent::ToolCallStart { index, id, .. } => {
                // A call started again at an index: the one before turned out malformed.
                args.retain(|a| a.0 != *index);
                args.push((*index, id.clone(), String::new()))
            }
            StreamEvent::ToolCallArguments { index, delta } => {
                if let Some(a) = args.iter_mut().find(|a| a.0 == *index) {
                    a.2.push_str(delta);
                }
            }
            StreamEvent::ToolCallEnd { index, call } => {
                let Some((_, id, sent)) = args.iter().find(|a| a.0 == *index) else {
                    return Err(format!("call {index} ended without a start"));
                };
                if *id != call.id {
                    return Err(format!(
                        "call {index} started with id {id:?}, ended with {:?}",
                        call.id
                    ));
                }
                // The index counts the complete calls; arguments written as a JSON string
                // stream decoded.
                let want = last
                    .iter()
                    .filter(|c| c.complete.is_some())
                    .nth(*index)
                    .map(|c| c.arguments_text.as_str());
                let decoded = want
                    .filter(|w| w.starts_with('"'))
                    .and_then(|w| serde_json::from_str::<String>(w).ok());
                if decoded.as_deref().or(want) != Some(sent.as_str()) {
                    return Err(format!(
                        "call {index}: argument deltas {sent:?}, whole parse {want:?}"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// For DeepSeek, Kimi K2 and Harmony, a rendered output (content or reasoning, then calls
/// whose arguments hold marker text) with random cuts, deletions and inserted pieces streams in
/// random chunks as the whole-output parse reads it: text near the well-formed shape,
/// where a parser's decisions are closest.
#[test]
fn tool_parsers_stream_mutated_renders() {
    use tokensieve::tools::ToolCall;
    let edit = (
        any::<prop::sample::Index>(),
        0usize..12,
        prop::sample::select(SECTION_FAMILY_PIECES),
    );
    let strategy = (
        prop::sample::select(SECTION_FAMILIES),
        prop::collection::vec(0usize..4, 0..4),
        prop::collection::vec(edit, 0..6),
        prop::sample::select(
            &[
                "Sure. ",
                "",
                "<think>hm</think>\n\n",
                "<|channel|>analysis<|message|>hm<|end|><|start|>assistant",
            ][..],
        ),
        prop::collection::vec(0usize..12, 1..40),
        any::<bool>(),
        any::<bool>(),
    );
    let call_choices = [
        ToolCall::new("get_weather", json!({"city": "Paris"})),
        ToolCall::new(
            "search",
            json!({"queries": ["<|call|>", "<｜tool▁call▁end｜>"]}),
        ),
        ToolCall::new("search", json!({"queries": ["<|tool_call_end|>\n```"]})),
        ToolCall::new("get_weather", json!({"city": "</think> <|end|>"})),
    ];
    run(
        3000,
        strategy,
        |(name, picks, edits, lead, mut chunks, reasoning, no_tools)| {
            let options = FormatOptions {
                reasoning,
                ..FormatOptions::default()
            };
            let format = format_by_name_with(name, &options).expect("a registered name");
            let calls: Vec<ToolCall> = picks.iter().map(|&i| call_choices[i].clone()).collect();
            let mut text = String::from(lead);
            if !calls.is_empty() {
                text.push_str(&format.render_calls(&calls));
            }
            for (at, del, piece) in &edits {
                let mut a = at.index(text.len() + 1);
                while !text.is_char_boundary(a) {
                    a -= 1;
                }
                let mut b = (a + del).min(text.len());
                while !text.is_char_boundary(b) {
                    b += 1;
                }
                text.replace_range(a..b, piece);
            }
            chunks.push(1);
            let tools: &[Tool] = if no_tools { &[] } else { tools() };
            let whole = format.parse(&text, tools);
            let events = stream_in_chunks(&*format, tools, &text, &chunks)?;
            prop_assert_eq!(collect(&events)?, whole, "{}: {:?}", name, text);
            let last = format.parse_partial(&text, tools, true);
            check_call_deltas(&events, &last.calls)
                .map_err(|e| TestCaseError::fail(format!("{name}: {e} in {text:?}")))?;
            Ok((true, false))
        },
    );
}

/// Pieces for the formats without a begin marker in some modes (a bare JSON array or
/// object, a bare Python call list) and for Mistral and Llama 3 JSON: the output's first
/// characters decide between content and calls.
const BARE_PIECES: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    ",",
    " ",
    "\n",
    "\"",
    "'",
    "(",
    ")",
    "=",
    ";",
    ":",
    ".",
    "\\",
    "x",
    "12",
    "1e99999",
    "true",
    "None",
    "[]",
    "a.b",
    "'a\\'b'",
    "\"a)]\"",
    "\\ud83d\\ude00",
    "get_weather(",
    "get_weather(city='Paris')",
    "search(queries=['a', \"b]\"])",
    "), ",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
    "{\"name\": \"search\", \"parameters\": {}}",
    "{\"name\": \"nope\", \"arguments\": {}}",
    "{\"name\": \"search\", \"arguments\": {}, \"arguments\": {\"queries\": []}}",
    "{\"name\": ",
    "\"search\"",
    ", \"arguments\": ",
    "{\"tool_calls\": [",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "a1B2c3D4e",
    "search[ARGS]{}",
    "[THINK]",
    "[/THINK]",
    "<|python_tag|>",
    "<|python_start|>",
    "<|eot_id|>",
];

/// Leads that make a text start like a call.
const BARE_LEADS: &[&str] = &["", "[", "{", " [", "[search(", "search(", "[TOOL_CALLS]"];

/// Whether the partial parse of a prefix is one the whole parse only extends: content and
/// reasoning prefixes of the whole's; a named call keeps its index, name (unless it ends
/// up malformed) and a prefix of its arguments' text, and is final once complete; an
/// error not touching the end of the prefix is final.
fn partial_extends(part: &PartialOutput, whole: &PartialOutput, p: usize) -> bool {
    let calls = part.calls.iter().enumerate().all(|(i, c)| {
        c.name.is_none()
            || whole.calls.get(i).is_some_and(|w| {
                (w.name.is_none()
                    || (w.name == c.name && w.arguments_text.starts_with(&c.arguments_text)))
                    && (c.complete.is_none() || c.complete == w.complete)
            })
    });
    let errors = part
        .errors
        .iter()
        .enumerate()
        .take_while(|(_, e)| e.offset + e.text.len() < p)
        .all(|(j, e)| whole.errors.get(j) == Some(e));
    whole.content.starts_with(&part.content)
        && whole.reasoning.starts_with(&part.reasoning)
        && calls
        && errors
}

/// Every prefix of random call-like text parses (output still arriving) into something
/// the whole-output parse only extends, for the JSON, Llama 3 JSON, Mistral and pythonic
/// formats, the forced JSON arguments and bare pythonic calls included (which the
/// registry's defaults do not cover).
#[test]
fn bare_formats_partial_parses_only_grow() {
    let reasoning = FormatOptions {
        reasoning: true,
        ..FormatOptions::default()
    };
    let formats: Vec<Box<dyn ToolCallFormat>> = vec![
        Box::new(JsonArray::default()),
        Box::new(JsonArray::default().forced("search")),
        Box::new(Llama3Json::default()),
        Box::new(Mistral::default()),
        Box::new(Mistral::new(MistralSyntax::Array, reasoning)),
        Box::new(Pythonic::default()),
        Box::new(Pythonic::default().bare_calls(true)),
    ];
    let strategy = (
        prop::sample::select(BARE_LEADS),
        prop::collection::vec(
            prop_oneof![6 => prop::sample::select(BARE_PIECES).prop_map(String::from), 1 => "[ -~]{0,4}"],
            0..14,
        ),
        any::<bool>(),
    );
    run(2000, strategy, |(lead, pieces, no_tools)| {
        let text = format!("{lead}{}", pieces.concat());
        let tools: &[Tool] = if no_tools { &[] } else { tools() };
        for f in &formats {
            let whole = f.parse_partial(&text, tools, true);
            for p in (0..text.len()).filter(|&p| text.is_char_boundary(p)) {
                let part = f.parse_partial(&text[..p], tools, false);
                prop_assert!(
                    partial_extends(&part, &whole, p),
                    "{}: {:?}\nprefix {:?}\n{:#?}\nwhole {:#?}",
                    f.name(),
                    text,
                    &text[..p],
                    part,
                    whole
                );
            }
        }
        Ok((false, false))
    });
}
