//! Checks shared by the families' unit tests (the library's `#[cfg(test)]` modules, which
//! include this file as `crate::test_support`): the whole-vs-streamed checks, round trips
//! through a family's grammar, an ASCII vocabulary to compile tags on, the proptest
//! settings of the streaming checks, and the tools and calls they run on.
//!
//! It lives under tests/ (not src/) because it is test code only; it is compiled into the
//! library's test build, not into an integration test crate, because it reads one
//! crate-private function (`stream::streamed_arguments`, the arguments text a stream
//! sends).

use serde_json::json;

use crate::Tool;

/// Test helper: panics with the first difference [`check_streams_as_whole`] finds.
pub(crate) fn assert_streams_as_whole(
    format: &dyn crate::ToolCallFormat,
    text: &str,
    tools: &[Tool],
) {
    if let Err(e) = check_streams_as_whole(format, tools, text) {
        panic!("{}: {e}", format.name());
    }
}

/// Test helper: `call` rendered by `format` is accepted whole by `grammar` (the format's
/// compiled tag), parses back to exactly `call`, and streams as it parses.
pub(crate) fn assert_round_trips(
    format: &dyn crate::ToolCallFormat,
    grammar: &std::sync::Arc<tokensieve::CompiledGrammar>,
    call: &crate::ToolCall,
    tools: &[Tool],
) {
    let text = format.render_calls(std::slice::from_ref(call));
    let mut m = tokensieve::GrammarMatcher::new(grammar.clone());
    assert!(m.accept_string(&text) && m.is_completed(), "{text}");
    let out = format.parse(&text, tools);
    assert_eq!(out.tool_calls, vec![call.clone()], "{text}");
    assert_streams_as_whole(format, &text, tools);
}

/// Test support: checks that `format` streams `text` as the whole-output parse reads it.
/// For every prefix `P` (at char boundaries), `parse_partial(P, false)` must be
/// consistent with `parse_partial(text, true)`: its reasoning and content are prefixes of
/// the final ones; a call with a name keeps its index and name (or is, in the end, the
/// placeholder of a malformed call), its arguments text is a prefix of the final one, it is
/// not named before an earlier call that the whole names, and once complete it is final; the errors that end before `P` does are final. Then the
/// text streamed one character a delta through [`crate::StreamingParser`] must add up to
/// the whole parse. `Err` describes the first difference.
pub(crate) fn check_streams_as_whole(
    format: &dyn crate::ToolCallFormat,
    tools: &[Tool],
    text: &str,
) -> Result<(), String> {
    let whole = format.parse_partial(text, tools, true);
    for i in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
        let p = format.parse_partial(&text[..i], tools, false);
        let at = || format!("prefix {:?} of {text:?}", &text[..i]);
        if !whole.reasoning.starts_with(&p.reasoning) {
            return Err(format!("reasoning {:?} at {}", p.reasoning, at()));
        }
        if !whole.content.starts_with(&p.content) {
            return Err(format!(
                "content {:?} (final {:?}) at {}",
                p.content,
                whole.content,
                at()
            ));
        }
        // Walked from the last call back: a call without a name yet may not come before
        // one that has a name, unless the whole parse leaves it unnamed too.
        let mut named_after = false;
        for (k, c) in p.calls.iter().enumerate().rev() {
            if c.name.is_none() {
                if named_after && whole.calls.get(k).is_some_and(|w| w.name.is_some()) {
                    return Err(format!("call {k} named after a later call, at {}", at()));
                }
                continue;
            }
            named_after = true;
            let Some(w) = whole.calls.get(k) else {
                return Err(format!("call {k} {c:?} is gone at the end, at {}", at()));
            };
            if w.name.is_none() && w.complete.is_none() && c.complete.is_none() {
                continue; // became a malformed call
            }
            if w.name != c.name || !w.arguments_text.starts_with(&c.arguments_text) {
                return Err(format!("call {k} {c:?} (final {w:?}) at {}", at()));
            }
            if c.complete.is_some() && c != w {
                return Err(format!("complete call {k} {c:?} (final {w:?}) at {}", at()));
            }
        }
        for (k, e) in p.errors.iter().enumerate() {
            if e.offset + e.text.len() >= i {
                break;
            }
            if whole.errors.get(k) != Some(e) {
                return Err(format!(
                    "error {k} {e:?} (final {:?}) at {}",
                    whole.errors.get(k),
                    at()
                ));
            }
        }
    }
    // One character a delta, then pieces of several sizes (many calls in one delta).
    for sizes in [&[1][..], &[3, 1, 17], &[64, 5], &[4096]] {
        check_stream_chunks(format, tools, text, sizes)?;
    }
    Ok(())
}

/// Test support: streams `text` through a [`crate::StreamingParser`] in deltas of
/// `sizes` bytes (cycling; widened to char boundaries) and checks that the events add up
/// to the whole-output parse. Returns the parser's work
/// ([`crate::StreamingParser::scanned_bytes`]); `Err` describes the difference.
pub(crate) fn check_stream_chunks(
    format: &dyn crate::ToolCallFormat,
    tools: &[Tool],
    text: &str,
    sizes: &[usize],
) -> Result<usize, String> {
    let mut parser = crate::StreamingParser::new(format, tools);
    let mut events = Vec::new();
    let mut i = 0;
    for &k in sizes.iter().cycle() {
        if i == text.len() {
            break;
        }
        let mut j = (i + k.max(1)).min(text.len());
        while !text.is_char_boundary(j) {
            j += 1;
        }
        events.extend(parser.push(&text[i..j]));
        i = j;
    }
    events.extend(parser.finish());
    let whole_partial = format.parse_partial(text, tools, true);
    let mut got = crate::ParsedOutput::default();
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut args: std::collections::BTreeMap<usize, String> = Default::default();
    let short = |s: String| s.chars().take(600).collect::<String>();
    for e in events {
        match e {
            crate::StreamEvent::Content(d) => content.push_str(&d),
            crate::StreamEvent::Reasoning(d) => reasoning.push_str(&d),
            // A call started again at an index: the earlier one there turned out
            // malformed, and its arguments are void.
            crate::StreamEvent::ToolCallStart { index, .. } => {
                args.insert(index, String::new());
            }
            crate::StreamEvent::ToolCallArguments { index, delta } => {
                args.entry(index).or_default().push_str(&delta)
            }
            crate::StreamEvent::ToolCallEnd { index, call } => {
                // Same index, arguments text and call as the whole parse.
                let w = whole_partial
                    .calls
                    .iter()
                    .filter(|c| c.complete.is_some())
                    .nth(index);
                let sent = args.remove(&index).unwrap_or_default();
                if w.and_then(|w| w.complete.as_ref()) != Some(&call)
                    || w.is_some_and(|w| {
                        crate::stream::streamed_arguments(&w.arguments_text) != sent
                    })
                {
                    return Err(short(format!(
                        "in deltas of {sizes:?}: call {index} ended as {call:?} after \
                         arguments {sent:?}; whole {w:?}"
                    )));
                }
                got.tool_calls.push(call)
            }
            crate::StreamEvent::Malformed(m) => got.errors.push(m),
        }
    }
    got.content = (!content.is_empty()).then_some(content);
    got.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    let whole = whole_partial.into_parsed();
    if got != whole {
        return Err(format!(
            "in deltas of {sizes:?}: streamed {}, whole {}, text {}",
            short(format!("{got:?}")),
            short(format!("{whole:?}")),
            short(format!("{text:?}"))
        ));
    }
    Ok(parser.scanned_bytes())
}

/// Test support: `tag` compiled for a vocabulary of the 128 ASCII bytes, one token each,
/// and `<eos>` (id 128) as the stop token.
pub(crate) fn compile_on_ascii(
    tag: &tokensieve::StructuralTag,
) -> std::sync::Arc<tokensieve::CompiledGrammar> {
    let bytes: Vec<Vec<u8>> = (0u8..128)
        .map(|b| vec![b])
        .chain([b"<eos>".to_vec()])
        .collect();
    let vocab = tokensieve::Vocabulary::from_token_bytes(&bytes, &[128], &[128]).unwrap();
    tokensieve::GrammarCompiler::new(vocab)
        .compile_structural_tag(tag)
        .unwrap()
}

/// Test support: the proptest settings of the streaming checks (`cases` cases; a fixed
/// seed under `CI=true`, as the integration tests' property tests, unless
/// `PROPTEST_RNG_SEED` is set).
pub(crate) fn stream_check_config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let mut config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if ci && std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(20_261_130);
    }
    config
}

/// Test fixture: `get_weather` (`city`, required; `unit`, `celsius` or `fahrenheit`) and
/// `get_time` (`tz`, required).
pub(crate) fn weather_and_time() -> Vec<Tool> {
    Tool::list_from_openai(&json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"},
            "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}
    ]))
    .unwrap()
}

/// Test fixture: the tool `name` whose one parameter, `param`, is a required string.
pub(crate) fn string_tool(name: &str, param: &str) -> Tool {
    let parameters = json!({"type": "object", "properties": {param: {"type": "string"}},
        "required": [param]});
    openai_tool(name, parameters)
}

/// Test fixture: the tool `name` with the JSON Schema `parameters`, read as OpenAI's
/// `tools` entries are.
pub(crate) fn openai_tool(name: &str, parameters: serde_json::Value) -> Tool {
    Tool::from_openai(&json!({"type": "function", "function": {"name": name,
        "parameters": parameters}}))
    .unwrap()
}

/// Test fixture: `get_weather` (`city`, required) and `get_time` (`tz`, required).
pub(crate) fn city_weather_and_time() -> Vec<Tool> {
    vec![
        string_tool("get_weather", "city"),
        string_tool("get_time", "tz"),
    ]
}

/// Test helper: the calls of the `ToolCallEnd` events among `events`, in order.
pub(crate) fn ended_calls(events: &[crate::StreamEvent]) -> Vec<crate::ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            crate::StreamEvent::ToolCallEnd { call, .. } => Some(call.clone()),
            _ => None,
        })
        .collect()
}

/// Test helper: `format` parses every cut of `text` — each prefix, partial and whole, and
/// each suffix — without panicking (bad input never panics).
pub(crate) fn parse_every_cut(format: &dyn crate::ToolCallFormat, text: &str, tools: &[Tool]) {
    for i in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
        let _ = format.parse_partial(&text[..i], tools, false);
        let _ = format.parse(&text[..i], tools);
        let _ = format.parse(&text[i..], tools);
    }
}

/// The pieces [`soup_text`] adds after a family's: a marker prefix, whitespace and text.
const SOUP_FRAGMENTS: &[&str] = &["<tool_", "\n", "\n", " ", "\r", "é", "Sure."];

/// Test strategy: texts of up to 11 pieces, each one of `soup` then [`SOUP_FRAGMENTS`] (6
/// times in 7) or up to 4 printable ASCII characters — a family's markers and fragments
/// mixed at random.
pub(crate) fn soup_text(
    soup: &'static [&'static str],
) -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let pieces = [soup, SOUP_FRAGMENTS].concat();
    prop::collection::vec(
        prop_oneof![6 => prop::sample::select(pieces).prop_map(String::from),
                    1 => "[ -~]{0,4}"],
        0..12,
    )
    .prop_map(|v| v.concat())
}

/// Test helper: the calls `(name, arguments)`, in order, as [`crate::ToolCall`]s.
pub(crate) fn calls(list: &[(&str, serde_json::Value)]) -> Vec<crate::ToolCall> {
    list.iter()
        .map(|(name, args)| crate::ToolCall::new(*name, args.clone()))
        .collect()
}

/// Test helper: [`assert_streams_as_whole`] for each of `texts`.
pub(crate) fn assert_each_streams_as_whole(
    format: &dyn crate::ToolCallFormat,
    texts: &[&str],
    tools: &[Tool],
) {
    for text in texts {
        assert_streams_as_whole(format, text, tools);
    }
}

/// Test fixture: the default [`crate::FormatOptions`] with `reasoning` on.
pub(crate) fn with_reasoning() -> crate::FormatOptions {
    crate::FormatOptions {
        reasoning: true,
        ..crate::FormatOptions::default()
    }
}

/// Test helper: `out`'s first error is invalid JSON and it has no calls.
pub(crate) fn assert_invalid_json_and_no_calls(out: &crate::ParsedOutput) {
    let first = out.errors.first().map(|e| &e.error);
    assert!(
        matches!(first, Some(crate::ToolParseError::InvalidJson(_))),
        "{first:?}"
    );
    assert!(out.tool_calls.is_empty(), "{:?}", out.tool_calls);
}

/// Test fixture: one tool per name, each taking any object (`{"type": "object"}`).
pub(crate) fn object_tools(names: &[&str]) -> Vec<Tool> {
    names
        .iter()
        .map(|name| tool_with_properties(name, json!({})))
        .collect()
}

/// Test fixture: the tool `name` whose parameters are an object with `properties` (none
/// required).
pub(crate) fn tool_with_properties(name: &str, properties: serde_json::Value) -> Tool {
    let parameters = if properties == json!({}) {
        json!({"type": "object"})
    } else {
        json!({"type": "object", "properties": properties})
    };
    openai_tool(name, parameters)
}

/// Test helper: `text` streamed through `format` in two pushes cut at byte `cut`, then
/// finished. Returns the events of the first push and all the events.
pub(crate) fn stream_cut_at(
    format: &dyn crate::ToolCallFormat,
    tools: &[Tool],
    text: &str,
    cut: usize,
) -> (Vec<crate::StreamEvent>, Vec<crate::StreamEvent>) {
    let mut p = crate::StreamingParser::new(format, tools);
    let first = p.push(&text[..cut]);
    let mut all = first.clone();
    all.extend(p.push(&text[cut..]));
    all.extend(p.finish());
    (first, all)
}

/// Test helper: `result` is [`crate::ToolError::Unsupported`] for `format`, with a reason
/// that quotes each of `needles`.
pub(crate) fn assert_unsupported<T: std::fmt::Debug>(
    result: Result<T, crate::ToolError>,
    format: &str,
    needles: &[&str],
) {
    match result {
        Err(crate::ToolError::Unsupported { format: f, reason }) => {
            assert_eq!(f, format);
            assert!(needles.iter().all(|n| reason.contains(n)), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// Test helper: `out`'s calls are exactly `want` (`(name, arguments)`, in order).
pub(crate) fn assert_calls(out: &crate::ParsedOutput, want: &[(&str, serde_json::Value)]) {
    assert_eq!(out.tool_calls, calls(want));
}

/// Test helper: `out` is the worked example's one call, `get_weather` for Paris in
/// celsius, with no error.
pub(crate) fn assert_paris_weather_call(out: &crate::ParsedOutput) {
    assert_calls(
        out,
        &[("get_weather", json!({"city": "Paris", "unit": "celsius"}))],
    );
    assert!(out.errors.is_empty(), "{:?}", out.errors);
}

/// Test helper: the arguments of `out`'s first call are `want`.
pub(crate) fn assert_first_args(out: &crate::ParsedOutput, want: serde_json::Value) {
    assert_eq!(out.tool_calls[0].arguments, want);
}

/// Test helper: the `ToolCallArguments` deltas among `events` joined, in order.
pub(crate) fn streamed_arguments_text(events: &[crate::StreamEvent]) -> String {
    let mut text = String::new();
    for e in events {
        if let crate::StreamEvent::ToolCallArguments { delta, .. } = e {
            text.push_str(delta);
        }
    }
    text
}

/// Test helper: `format` reads `text` with no calls and the content `content` (the calls
/// in it are inside reasoning). Returns its reasoning (empty where it has none).
pub(crate) fn reasoning_without_calls(
    format: &dyn crate::ToolCallFormat,
    text: &str,
    tools: &[Tool],
    content: &str,
) -> String {
    let out = format.parse(text, tools);
    assert!(out.tool_calls.is_empty(), "{text}: {:?}", out.tool_calls);
    assert_eq!(out.content.as_deref(), Some(content), "{text}");
    out.reasoning.unwrap_or_default()
}

/// Test fixture: `get_time` (`tz`, required) and `brave_search` (`query`, required), the
/// tools of the Llama 3 function-tag tests.
pub(crate) fn time_and_search() -> Vec<Tool> {
    vec![
        string_tool("get_time", "tz"),
        string_tool("brave_search", "query"),
    ]
}

/// Test support: the structural tag `format` writes for `tools` under
/// `tool_choice: required` (parallel calls allowed), compiled by [`compile_on_ascii`].
pub(crate) fn compile_required_on_ascii(
    format: &dyn crate::ToolCallFormat,
    tools: &[Tool],
) -> std::sync::Arc<tokensieve::CompiledGrammar> {
    let tag = format
        .structural_tag(tools, &crate::ToolChoice::Required, true)
        .unwrap();
    compile_on_ascii(&tag)
}

/// Test helper: the call `name` with `arguments` and the id `id`.
pub(crate) fn call_with_id(id: &str, name: &str, arguments: serde_json::Value) -> crate::ToolCall {
    crate::ToolCall {
        id: Some(id.into()),
        ..crate::ToolCall::new(name, arguments)
    }
}

/// Test helper: the error of a call to the tool `name`, which is not offered.
pub(crate) fn unknown_tool(name: &str) -> crate::ToolParseError {
    crate::ToolParseError::UnknownTool { name: name.into() }
}

/// Test helper: `calls` rendered by `format` parse back to exactly `calls`.
pub(crate) fn assert_parses_back(
    format: &dyn crate::ToolCallFormat,
    calls: &[crate::ToolCall],
    tools: &[Tool],
) {
    let text = format.render_calls(calls);
    assert_eq!(format.parse(&text, tools).tool_calls, calls, "{text}");
}
