//! Inputs the fuzz targets (`fuzz/`) found, kept as regression tests: each one once
//! crashed or broke an invariant.
//!
//! Run with `cargo test --release -p tokensieve-tools --test api fuzz_regressions::`.

use serde_json::json;
use tokensieve_tools::{
    format_by_name, ParsedOutput, StreamEvent, StreamingParser, Tool, ToolParseError,
};

fn weather_tool() -> Vec<Tool> {
    Tool::list_from_openai(
        &json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]),
    )
    .unwrap()
}

/// The whole-output Hermes parse of `text` with [`weather_tool`].
fn hermes_parse(text: &str) -> ParsedOutput {
    format_by_name("hermes")
        .unwrap()
        .parse(text, &weather_tool())
}

/// Streams `chunks` through `format` and returns the malformed calls reported and the
/// content sent.
fn stream(format: &str, tools: &[Tool], chunks: &[&str]) -> (Vec<StreamEvent>, ParsedOutput) {
    let format = format_by_name(format).unwrap();
    let mut parser = StreamingParser::new(&*format, tools);
    let mut events = Vec::new();
    for c in chunks {
        events.extend(parser.push(c));
    }
    events.extend(parser.finish());
    let whole = format.parse(&chunks.concat(), tools);
    (events, whole)
}

/// `tool_parsers` target: a malformed Hermes call (unknown tool) streamed with a delta
/// ending inside its end marker (`...}\n</`) was reported at once, with its text cut at
/// `</`; the whole-output parse reports it with `</tool_call>`. A malformed call is now
/// reported only once its end marker (or the end of the output) has arrived.
#[test]
fn hermes_malformed_call_reported_with_its_whole_text() {
    let text = "<tool_call>\n{\"arguments\": {\"country\": \"Brazil\"}, \"name\": \"country_info_capital\"}\n</tool_call>\n";
    let cut = text.find("</").unwrap() + 2;
    let (events, whole) = stream("hermes", &weather_tool(), &[&text[..cut], &text[cut..]]);
    assert_eq!(whole.errors.len(), 1);
    assert_eq!(whole.errors[0].text, text.trim_end());
    assert_eq!(
        whole.errors[0].error,
        ToolParseError::UnknownTool {
            name: "country_info_capital".into()
        }
    );
    let sums = crate::events::sums(&events);
    assert_eq!(sums.malformed, whole.errors);
    assert_eq!(Some(sums.content), whole.content);
}

/// `tool_parsers` target: text after a call's JSON (here another JSON object, then the
/// end marker) was quoted in an error message that a stream cut differently; and a
/// `</tool_call>` inside a JSON string ended the call's span. Now a call whose end marker
/// is missing is complete at its JSON, and what follows is content, the same however the
/// stream is cut; the `</tool_call>` in the string is text.
#[test]
fn hermes_text_after_call_json_is_content_streamed_or_whole() {
    let text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a</tool_call>\"}}{\"name\": \"x\"}</tool_call>tail";
    let whole = hermes_parse(text);
    assert!(whole.errors.is_empty(), "{whole:?}");
    assert_eq!(whole.tool_calls.len(), 1);
    assert_eq!(whole.tool_calls[0].arguments["city"], "a</tool_call>");
    assert_eq!(
        whole.content.as_deref(),
        Some("{\"name\": \"x\"}</tool_call>tail")
    );
    for cut in 1..text.len() {
        if !text.is_char_boundary(cut) {
            continue;
        }
        let (events, whole2) = stream("hermes", &weather_tool(), &[&text[..cut], &text[cut..]]);
        assert_eq!(whole2, whole);
        assert_eq!(
            crate::events::ended_calls(&events),
            whole.tool_calls,
            "cut at {cut}"
        );
        let content = crate::events::streamed_content(&events);
        assert_eq!(Some(content), whole.content, "cut at {cut}");
    }
}

/// `fuzz_props`: back-to-back Hermes blocks (`...}<tool_call>{...}`, the end marker
/// missing) are two calls, but a delta ending at `...}<t` made the first one malformed.
/// A partial begin marker after a call's JSON is now held back like a partial end marker.
#[test]
fn hermes_back_to_back_blocks_streamed_in_any_cut() {
    let text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
    let whole = hermes_parse(text);
    assert_eq!(whole.tool_calls.len(), 2, "{whole:?}");
    assert!(whole.errors.is_empty());
    for cut in 1..text.len() {
        let (events, _) = stream("hermes", &weather_tool(), &[&text[..cut], &text[cut..]]);
        assert_eq!(
            crate::events::ended_calls(&events),
            whole.tool_calls,
            "cut at {cut}"
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, StreamEvent::Malformed(_))),
            "cut at {cut}"
        );
    }
}
