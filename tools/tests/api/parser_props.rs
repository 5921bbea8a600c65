//! The tool-call parser fuzz target's properties as proptest tests, so that CI runs them
//! (fuzzing itself is not part of CI; see `fuzz/README.md`): whole and streamed parses agree,
//! partial parses only grow. The engine's properties are in the engine crate's
//! `tests/soundness/fuzz_targets.rs`.
//!
//! Run with `cargo test --release -p tokensieve-tools --test api parser_props::`.

use crate::common;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::json;
use std::sync::OnceLock;
use tokensieve_tools::{
    format_by_name_with, format_names, FormatOptions, JsonArray, Llama3Json, Mistral,
    MistralSyntax, ParsedOutput, PartialCall, PartialOutput, Pythonic, StreamEvent,
    StreamingParser, Tool, ToolCallFormat,
};

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

/// Fragments every family's output holds: reasoning markers, whitespace, text.
const FRAGMENTS: &[&str] = &["<think>", "</think>", "\n", " ", "Sure.", "é"];

/// Pieces of model output: every registered family's markers and call bodies, then
/// [`FRAGMENTS`], then more markers, argument objects and marker prefixes (the order is
/// the strategy's order, which fixed seeds depend on).
const PIECES: [&[&str]; 3] = [
    &[
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "<tool_call>{\"arguments\": {\"queries\": [\"x\"]}, \"name\": \"search\"}</tool_call>",
        "<tool_call>",
        "</tool_call>",
    ],
    FRAGMENTS,
    &[
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
    ],
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

/// The property of the two stream tests below: 3000 texts of up to 14 pieces drawn from
/// `piece`, streamed to each of `formats` (with and without reasoning and tools) in random
/// chunks of fewer than `max_chunk` bytes (empty ones included), give what the whole-output
/// parse gives; with `deltas`, a call's argument deltas also add up to the last partial
/// parse's. At least 300 of the texts must hold calls.
fn check_streams_as_whole(
    piece: BoxedStrategy<String>,
    max_chunk: usize,
    formats: &[String],
    deltas: bool,
) {
    let strategy = (
        prop::collection::vec(piece, 0..14),
        prop::collection::vec(0usize..max_chunk, 1..40),
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
            for name in formats {
                let format = format_by_name_with(name, &options).expect("a registered name");
                let whole = format.parse(&text, tools);
                calls |= !whole.tool_calls.is_empty();
                let events = stream_in_chunks(&*format, tools, &text, &chunks)?;
                prop_assert_eq!(collect(&events)?, whole, "{}: {:?}", name, text);
                if deltas {
                    let last = format.parse_partial(&text, tools, true);
                    check_call_deltas(&events, &last.calls)
                        .map_err(|e| TestCaseError::fail(format!("{name}: {e} in {text:?}")))?;
                }
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

/// For every registered tool-call format, any text parses without a panic, and streaming
/// it in random chunks (empty ones included) gives what the whole-output parse gives.
#[test]
fn tool_parsers_stream_as_whole() {
    let piece = prop_oneof![4 => prop::sample::select(PIECES.concat()).prop_map(String::from), 1 => "[ -~]{0,6}"];
    check_streams_as_whole(piece.boxed(), 9, &stream_checked_formats(), false);
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
/// headers and argument objects, then [`FRAGMENTS`], then more whitespace and fragments.
const SECTION_PIECES: [&[&str]; 3] = [
    &[
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
    ],
    FRAGMENTS,
    &[
        "\t",
        "\u{a0}",
        "\r\n",
        "functions.",
        ":0",
        "\"{\\\"city\\\": \\\"Oslo\\\"}\"",
        "12",
        "```json\n{\"city\": \"Rome\"}\n```",
    ],
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
    let piece = prop_oneof![
        2 => prop::sample::select(SECTION_FAMILY_CALLS).prop_map(String::from),
        6 => prop::sample::select(SECTION_PIECES.concat()).prop_map(String::from),
        1 => "[ -~]{0,6}"
    ];
    let formats: Vec<String> = match std::env::var("TOOL_FORMATS") {
        Ok(list) => list.split(',').map(str::to_owned).collect(),
        Err(_) => SECTION_FAMILIES.iter().map(|s| s.to_string()).collect(),
    };
    check_streams_as_whole(piece.boxed(), 12, &formats, true);
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
    use tokensieve_tools::ToolCall;
    let edit = (
        any::<prop::sample::Index>(),
        0usize..12,
        prop::sample::select(SECTION_PIECES.concat()),
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
