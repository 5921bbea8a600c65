//! Tool-call parsers, for every registered format (`tokensieve_tools::format_names()`):
//! any text parses without a panic, and streaming it in random chunks (empty ones included)
//! gives the same calls, content, reasoning and malformed calls as the whole-output parse.
//!
//! Input: a flags byte (bit 0: the format's reasoning block; bit 1: an empty tool list,
//! which accepts any valid name), a byte that seeds the chunking, then the text (lossy
//! UTF-8). `fuzz/dicts/tool_parsers.dict` holds the families' markers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use std::sync::OnceLock;
use tokensieve_tools::{
    format_by_name_with, format_names, FormatOptions, ParsedOutput, StreamEvent, StreamingParser,
    Tool,
};

fn tools() -> &'static Vec<Tool> {
    static T: OnceLock<Vec<Tool>> = OnceLock::new();
    T.get_or_init(|| {
        Tool::list_from_openai(&json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"},
                "days": {"type": "integer"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "search", "parameters": {
                "type": "object", "properties": {"queries": {"type": "array",
                "items": {"type": "string"}}}}}},
            {"type": "function", "function": {"name": "math.factorial", "parameters": {
                "type": "object", "properties": {"n": {"type": "number"},
                "exact": {"type": "boolean"}}}}}
        ]))
        .unwrap()
    })
}

/// The whole-output view of a stream of events; asserts that calls start with strictly
/// increasing indices (a malformed call keeps its index, so the next may skip one), that
/// arguments and the end of a call come after its start, and that a call ends at most once,
/// with the name it started with.
fn collect(events: &[StreamEvent]) -> ParsedOutput {
    let mut out = ParsedOutput::default();
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut started: Vec<(usize, &str)> = Vec::new();
    let mut ended: Vec<usize> = Vec::new();
    for e in events {
        match e {
            StreamEvent::Content(d) => content.push_str(d),
            StreamEvent::Reasoning(d) => reasoning.push_str(d),
            StreamEvent::ToolCallStart { index, name, .. } => {
                assert!(
                    started.last().map_or(true, |(last, _)| index > last),
                    "call {index} starts after call {:?}",
                    started.last()
                );
                started.push((*index, name));
            }
            StreamEvent::ToolCallArguments { index, .. } => {
                assert!(
                    started.iter().any(|(i, _)| i == index),
                    "arguments of call {index} before its start"
                );
                assert!(!ended.contains(index), "arguments of call {index} after its end");
            }
            StreamEvent::ToolCallEnd { index, call } => {
                let start = started.iter().find(|(i, _)| i == index);
                assert!(
                    start.is_some_and(|(_, n)| *n == call.name),
                    "end of call {index} ({}) without its start: {started:?}",
                    call.name
                );
                assert!(!ended.contains(index), "call {index} ends twice");
                ended.push(*index);
                out.tool_calls.push(call.clone());
            }
            StreamEvent::Malformed(m) => out.errors.push(m.clone()),
        }
    }
    out.content = (!content.is_empty()).then_some(content);
    out.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    out
}

fuzz_target!(|data: &[u8]| {
    let [flags, seed, rest @ ..] = data else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let tools: &[Tool] = if flags & 2 == 0 { tools() } else { &[] };
    let options = FormatOptions {
        reasoning: flags & 1 != 0,
        ..FormatOptions::default()
    };
    for name in format_names() {
        let format = format_by_name_with(&name, &options).expect("a registered name");
        let whole = format.parse(&text, tools);
        let mut parser = StreamingParser::new(&*format, tools);
        let mut events = Vec::new();
        let mut rng = (*seed as u64) << 8 | *flags as u64 | 1 << 40;
        let mut pos = 0;
        while pos < text.len() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut end = (pos + (rng % 9) as usize).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            events.extend(parser.push(&text[pos..end]));
            pos = end;
        }
        events.extend(parser.finish());
        assert!(
            parser.finish().is_empty(),
            "{name}: a second finish sends nothing"
        );
        assert_eq!(
            collect(&events),
            whole,
            "{name}: streamed vs whole on {text:?}"
        );
    }
});
