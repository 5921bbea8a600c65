//! Tests of the streaming parser: the stream against the whole parse under every cut, the
//! work bound, and the arguments the stream reads itself.

use serde_json::json;

use super::super::test_support::check_stream_chunks;
use super::super::{
    format_by_name, format_names, PartialOutput, StreamEvent, Tool, ToolCall, ToolCallFormat,
};
use super::StreamingParser;

fn tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "write_file",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"]}}}]))
    .unwrap()
}

/// Prose of `len` bytes with spaces, punctuation and newlines.
fn prose(len: usize) -> String {
    let words = ["lorem ", "ipsum, ", "dolor ", "sit\n", "amet. "];
    let mut s = String::new();
    for w in words.iter().cycle() {
        if s.len() >= len {
            break;
        }
        s.push_str(w);
    }
    s
}

/// Streaming one call with a 40 KB string argument in 4-byte deltas, and 1,000 small
/// calls in 16-byte deltas, hands each format's parser a few dozen times the text's
/// length, where re-parsing all of it on every delta hands it thousands of times
/// (issue 5). No timing: the parser's own count of the bytes it was handed.
#[test]
fn streaming_work_is_linear_for_every_format() {
    let tools = tools();
    let one = [ToolCall::new("write_file", json!({"text": prose(40_000)}))];
    let many: Vec<ToolCall> = (0..1000)
        .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
        .collect();
    for name in format_names() {
        let f = format_by_name(&name).unwrap();
        for (calls, k) in [(&one[..], 4), (&many[..], 16)] {
            let text = f.render_calls(calls);
            let n = text.len();
            let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[k])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                scanned < 80 * n,
                "{name}: {} calls, {n} bytes in {k}-byte deltas: parsed {scanned} bytes \
                 ({}× the text)",
                calls.len(),
                scanned / n
            );
        }
    }
}

/// Every registered format by its name, and the Mistral call array (`mistral_array`), which
/// the registry's `mistral` picks only on a vocabulary without `[ARGS]`.
fn registered_and_mistral_array() -> Vec<(String, std::sync::Arc<dyn ToolCallFormat>)> {
    let mut formats: Vec<(String, std::sync::Arc<dyn ToolCallFormat>)> = format_names()
        .into_iter()
        .map(|n| (n.clone(), format_by_name(&n).unwrap()))
        .collect();
    let array = std::sync::Arc::new(super::super::Mistral::array());
    formats.push(("mistral_array".into(), array));
    formats
}

/// Issue 23 item 2: in 8-byte deltas, one call with a 200 KB string argument and
/// 200 KB of back-to-back small calls hand the format's parser (and the stream's own
/// scan of an argument being resumed) at most 3 times the text, in every registered
/// family and the Mistral call array. Work, not time: the count is deterministic.
#[test]
fn streaming_work_is_at_most_three_times_the_text_in_8_byte_deltas() {
    let tools = tools();
    let long = [ToolCall::new("write_file", json!({"text": prose(200_000)}))];
    let formats = registered_and_mistral_array();
    let mut over = Vec::new();
    for (name, f) in &formats {
        let one = f.render_calls(&[ToolCall::new(
            "write_file",
            json!({"text": "file 0: lorem"}),
        )]);
        let many: Vec<ToolCall> = (0..200_000 / one.len() + 1)
            .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}: lorem")})))
            .collect();
        for (kind, calls) in [("long", &long[..]), ("calls", &many[..])] {
            let text = f.render_calls(calls);
            let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[8])
                .unwrap_or_else(|e| panic!("{name} {kind}: {e}"));
            let work = scanned as f64 / text.len() as f64;
            if work > 3.0 {
                over.push(format!("{name} {kind}: {work:.2}x"));
            }
        }
    }
    assert!(over.is_empty(), "work over 3x the text: {over:?}");
}

/// Issue 23 item 2: one call with a 200 KB string argument, written as an XML value or as
/// a JSON string, in 8-byte deltas: the stream reads the value itself while it arrives,
/// and when the call ends the format's parser is not handed the value a second time (the
/// stream hands it the call with the part it read cut out, and puts that part back into
/// the call), so the parse work is the text once and a little (bound 1.25×; 2× before),
/// and the events still add up to the whole parse. Also with escapes inside the value
/// and text after the call. The ten families whose whole parse is cheapest, where the
/// second reading weighed most.
#[test]
fn a_long_argument_is_not_parsed_again_when_its_call_ends() {
    let tools = tools();
    let families = [
        "deepseek_v32",
        "deepseek_v4",
        "glm4",
        "glm45",
        "glm47",
        "harmony",
        "llama3_function_tag",
        "minimax_m2",
        "mistral",
        "qwen3_coder",
    ];
    let mut over = Vec::new();
    for name in families {
        let f = format_by_name(name).unwrap();
        for value in [
            prose(200_000),
            format!("{}\"q\" \\ é\t{}", prose(100_000), prose(100_000)),
        ] {
            let call = ToolCall::new("write_file", json!({ "text": value }));
            let text = format!("{}\nDone.", f.render_calls(&[call]));
            let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[8])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let work = scanned as f64 / text.len() as f64;
            if work > 1.25 {
                over.push(format!("{name}: {work:.2}x"));
            }
        }
    }
    assert!(over.is_empty(), "work over 1.25x the text: {over:?}");
}

/// The work of a delta inside a long argument does not grow with the text (issue 23 item
/// 2: 1 MB streamed in 8-byte deltas within 3x its whole parse needs a delta that costs
/// the scan of its own bytes). Counted, not timed: in every family, one call whose string
/// argument is 50 KB, then 200 KB, of prose (newlines, quotes and backslashes in it),
/// streamed in 8-byte deltas with `push_with` and `push_into`; the deltas that leave the
/// one-pass scan of `Resume::advance_plain` for the general path (a scan from the last
/// stop, a parse) are as many for the long text as for the short one (at most 8 more),
/// and the work of the whole stream stays within 1.25x the text but in `pythonic`,
/// whose Python argument the format parses again at the call's end (2x).
#[test]
fn the_general_path_takes_as_many_deltas_of_a_long_argument_as_of_a_short_one() {
    let tools = tools();
    let value = |len: usize| {
        let mut v = prose(len);
        for at in (1000..len).step_by(4099) {
            let at = (at..).find(|&i| v.is_char_boundary(i)).unwrap_or(at);
            v.insert_str(at, "say \"hi\" \\ ");
        }
        v
    };
    let mut formats = registered_and_mistral_array();
    formats.retain(|(n, _)| !matches!(n.as_str(), "openai" | "qwen3_xml" | "json"));
    let mut over = Vec::new();
    for (name, f) in &formats {
        let mut counts = Vec::new();
        for len in [50_000, 200_000] {
            let call = ToolCall::new("write_file", json!({ "text": value(len) }));
            let text = f.render_calls(&[call]);
            for with in [true, false] {
                let mut s = StreamingParser::new(f.as_ref(), &tools);
                let mut out = Vec::new();
                let mut i = 0;
                while i < text.len() {
                    let mut j = (i + 8).min(text.len());
                    while !text.is_char_boundary(j) {
                        j += 1;
                    }
                    if with {
                        s.push_with(&text[i..j], |_| {});
                    } else {
                        s.push_into(&text[i..j], &mut out);
                        out.clear();
                    }
                    i = j;
                }
                s.finish();
                let work = s.scanned_bytes() as f64 / text.len() as f64;
                let bound = if name == "pythonic" { 2.05 } else { 1.25 };
                if work > bound {
                    over.push(format!("{name} {len}: work {work:.2}x"));
                }
                counts.push(s.general);
            }
        }
        if counts[2] > counts[0] + 8 || counts[3] > counts[1] + 8 {
            over.push(format!(
                "{name}: general deltas (with, into) 50 KB then 200 KB {counts:?}"
            ));
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}

/// Long arguments the stream reads itself (see [`resume`]) stream as the whole parse
/// reads them, in every family, in 1-byte, 8-byte and uneven deltas: escapes (`\"`,
/// `\\`, `\u00e9`, a surrogate pair), multi-byte UTF-8 split by the cuts, `<` and
/// every family's markers inside the value, trailing (Unicode) whitespace before the
/// end, a second argument of nested JSON, and text before and after the calls.
#[test]
fn long_arguments_read_by_the_stream_stream_as_parsed() {
    let tools = Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "write_file",
        "parameters": {"type": "object", "properties": {
            "text": {"type": "string"}, "more": {"type": "object"}}}}}]))
    .unwrap();
    let piece = "é \"q\" \\ 😀\t<tool_call></tool_call>[TOOL_CALLS] a < b <= c <3 \
                 <|call|><|tool_call_end|><｜tool▁call▁end｜>)]}</parameter></arg_value>\
                 </function>\u{3000}\u{1}\n";
    let plain = "é \"q\" \\ 😀\t a < b <= c <3 )]}\u{3000}\u{1}\n";
    for piece in [piece, plain] {
        let value = format!("{}{}  \n", piece.repeat(12), prose(1500));
        let calls = [
            ToolCall::new("write_file", json!({"text": value})),
            ToolCall::new(
                "write_file",
                json!({"text": "x  ", "more": {"a": [1, -2.5e3, true, null, {"b": "}"}], "c": false}}),
            ),
        ];
        let mut formats: Vec<(String, std::sync::Arc<dyn ToolCallFormat>)> = format_names()
            .into_iter()
            .map(|n| (n.clone(), format_by_name(&n).unwrap()))
            .collect();
        formats.push((
            "mistral_array".into(),
            std::sync::Arc::new(super::super::Mistral::array()),
        ));
        for (name, f) in &formats {
            let rendered = f.render_calls(&calls);
            let escaped = rendered
                .replacen('é', r"\u00e9", 3)
                .replacen('😀', r"\ud83d\ude00", 2);
            for text in [
                rendered.clone(),
                escaped,
                format!("Sure.\n{rendered}\nDone."),
            ] {
                let whole = f.parse(&text, &tools);
                if piece == plain && !text.starts_with("Sure") {
                    assert_eq!(whole.tool_calls.len(), 2, "{name}: {:?}", whole.errors);
                }
                for sizes in [&[1][..], &[3], &[8], &[3, 8, 1, 13, 2]] {
                    check_stream_chunks(f.as_ref(), &tools, &text, sizes)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
    }
}

/// Inside a long argument every delta is sent as it arrives (the stream reads the
/// argument itself rather than coalescing re-parses): one call with a 64 KB string
/// argument in 8-byte deltas, in every family, sends argument text on each push once
/// the argument has begun.
#[test]
fn every_delta_inside_a_long_argument_is_sent() {
    let tools = tools();
    let call = ToolCall::new("write_file", json!({"text": prose(64_000)}));
    for name in format_names() {
        let f = format_by_name(&name).unwrap();
        let text = f.render_calls(std::slice::from_ref(&call));
        let start = text.find("lorem").unwrap() + 1024;
        let end = text.rfind("lorem").unwrap();
        let mut s = StreamingParser::new(f.as_ref(), &tools);
        let (mut pushes, mut with_args) = (0, 0);
        let mut i = 0;
        while i < text.len() {
            let mut j = (i + 8).min(text.len());
            while !text.is_char_boundary(j) {
                j += 1;
            }
            let events = s.push(&text[i..j]);
            let at = std::mem::replace(&mut i, j);
            if at >= start && j <= end {
                pushes += 1;
                with_args += usize::from(
                    events
                        .iter()
                        .any(|e| matches!(e, StreamEvent::ToolCallArguments { .. })),
                );
            }
        }
        s.finish();
        assert!(
            with_args == pushes && pushes > 7000,
            "{name}: {with_args} of {pushes} pushes sent argument text"
        );
    }
}

/// Re-parses inside a long piece the stream cannot read itself (arguments written as a
/// JSON string) are paid outside the work budget, so the content after that call
/// streams on every delta once the call has ended, not after a debt is repaid.
#[test]
fn content_after_a_long_unread_call_streams_on_every_delta() {
    let tools = tools();
    let f = format_by_name("hermes").unwrap();
    let args = serde_json::to_string(&json!({"text": prose(40_000)}).to_string()).unwrap();
    let call =
        format!("<tool_call>\n{{\"name\": \"write_file\", \"arguments\": {args}}}\n</tool_call>");
    let text = format!("{call}\n{}", prose(8_000));
    let mut s = StreamingParser::new(f.as_ref(), &tools);
    let (mut pushes, mut with_content) = (0, 0);
    for (i, delta) in text.as_bytes().chunks(8).enumerate() {
        let events = s.push(std::str::from_utf8(delta).unwrap());
        if i * 8 > call.len() + 2048 {
            pushes += 1;
            with_content +=
                usize::from(events.iter().any(|e| matches!(e, StreamEvent::Content(_))));
        }
    }
    s.finish();
    assert!(
        pushes > 500 && with_content + 2 >= pushes,
        "{with_content} of {pushes} pushes after the call sent content"
    );
    check_stream_chunks(f.as_ref(), &tools, &text, &[8]).unwrap();
}

/// A call whose start was streamed and which then turns out malformed (bad JSON)
/// no longer holds back the settled point: the text after it streams on every delta.
#[test]
fn streams_settle_again_after_a_started_call_turns_out_malformed() {
    let tools = tools();
    let f = format_by_name("hermes").unwrap();
    let bad =
        "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"text\": P}}\n</tool_call>\n";
    let text = format!("{bad}{}", prose(40_000));
    let mut s = StreamingParser::new(f.as_ref(), &tools);
    let mut started = false;
    // The bad call one byte a delta, so its start is sent before it turns out bad.
    for (i, _) in bad.char_indices() {
        let next = bad[i..].chars().next().unwrap().len_utf8();
        for e in s.push(&bad[i..i + next]) {
            started |= matches!(e, StreamEvent::ToolCallStart { .. });
        }
    }
    assert!(started, "the bad call's start was not streamed");
    let rest = &text[bad.len()..];
    let (mut pushes, mut with_content) = (0, 0);
    for delta in rest.as_bytes().chunks(4) {
        pushes += 1;
        let events = s.push(std::str::from_utf8(delta).unwrap());
        with_content += usize::from(events.iter().any(|e| matches!(e, StreamEvent::Content(_))));
    }
    // Every delta after the bad call streams its text (not in 1/64 batches).
    assert!(
        with_content + 8 >= pushes,
        "{with_content} of {pushes} pushes sent text"
    );
    s.finish();
    check_stream_chunks(f.as_ref(), &tools, &text, &[1, 4, 64]).unwrap();
}

/// Plain content (no call yet) and reasoning are settled as they arrive, up to the
/// held-back tail: streaming 40 KB of either in 4-byte deltas hands the parser a small
/// multiple of the text, and every delta after the opening marker sends the text
/// before it, at most a few bytes short of what arrived (no coalescing outside calls).
#[test]
fn plain_content_and_reasoning_stream_on_every_delta() {
    let tools = tools();
    let body = prose(40_000);
    // The ways into plain text of each family (the first a format reads so is used;
    // Harmony text without a header is read as content only at the end, as it may
    // still be a header).
    let content_openers = ["<|channel|>final<|message|>", ""];
    let reasoning_openers = ["<think>", "[THINK]", "<|channel|>analysis<|message|>"];
    for name in format_names() {
        let f = format_by_name(&name).unwrap();
        let reads = |opener: &str, reasoning: bool| {
            let p = f.parse(&format!("{opener}lorem ipsum, dolor"), &tools);
            let got = if reasoning { p.reasoning } else { p.content };
            got.as_deref() == Some("lorem ipsum, dolor")
        };
        let mut cases = Vec::new();
        if let Some(o) = content_openers.iter().find(|o| reads(o, false)) {
            cases.push((*o, false));
        }
        if let Some(o) = reasoning_openers.iter().find(|o| reads(o, true)) {
            cases.push((*o, true));
        }
        assert!(
            cases.iter().any(|c| !c.1),
            "{name}: no way into plain content"
        );
        for (opener, reasoning) in cases {
            let text = format!("{opener}{body}");
            let n = text.len();
            let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[4])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                scanned < 8 * n,
                "{name} (reasoning: {reasoning}): parsed {scanned} bytes for {n} \
                 ({}× the text)",
                scanned / n
            );
            let mut s = StreamingParser::new(f.as_ref(), &tools);
            let mut sent = 0;
            for (i, delta) in text.as_bytes().chunks(4).enumerate() {
                let events = s.push(std::str::from_utf8(delta).unwrap());
                let mut grew = false;
                for e in events {
                    match e {
                        StreamEvent::Content(d) if !reasoning => {
                            sent += d.len();
                            grew = true;
                        }
                        StreamEvent::Reasoning(d) if reasoning => {
                            sent += d.len();
                            grew = true;
                        }
                        other => panic!("{name}: unexpected {other:?}"),
                    }
                }
                let arrived = (i * 4 + delta.len()).saturating_sub(opener.len());
                if i * 4 >= opener.len() + 16 {
                    assert!(
                        grew && arrived - sent <= 32,
                        "{name} (reasoning: {reasoning}): delta {i} sent nothing or \
                         lags: {sent} of {arrived} bytes sent"
                    );
                }
            }
            assert!(s.scanned_bytes() < 8 * n, "{name}: {}", s.scanned_bytes());
        }
    }
}

/// Content and reasoning settled inside a piece, then continued, ended by a call or
/// joined to a later piece, add up to the whole-output parse however the text is cut.
#[test]
fn text_settled_inside_pieces_streams_as_whole() {
    let tools = tools();
    let call = [ToolCall::new("write_file", json!({"text": "a b"}))];
    for name in format_names() {
        let f = format_by_name(&name).unwrap();
        let c = f.render_calls(&call);
        for text in [
            format!("Hello there,\n world.  \n{c}\n  and  then\n\n{c} end. "),
            format!("<think> mull it\n over  </think>\n Sure thing.{c}more\n"),
            format!("[THINK]mull  it[/THINK]Sure  {c}"),
            "<|channel|>analysis<|message|>mull  it over<|end|><|start|>assistant\
             <|channel|>final<|message|>Sure  thing <|end|>"
                .to_owned(),
            "Just text {\"not\": 1} here\n\n and more <|eot_id|>".to_owned(),
        ] {
            for sizes in [&[1][..], &[2], &[3, 1], &[7]] {
                check_stream_chunks(f.as_ref(), &tools, &text, sizes)
                    .unwrap_or_else(|e| panic!("{name}: {text:?}: {e}"));
            }
        }
    }
}

/// With many calls, formats that settle after each call re-parse only the call in
/// progress: every delta is parsed (no coalescing), and the work stays a small multiple
/// of the text.
#[test]
fn settled_formats_parse_every_delta_of_many_calls() {
    let tools = tools();
    let many: Vec<ToolCall> = (0..1000)
        .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
        .collect();
    for name in [
        "hermes",
        "qwen3_coder",
        "glm4",
        "glm45",
        "glm47",
        "deepseek_v3",
        "deepseek_v31",
        "kimi_k2",
        "harmony",
        "json",
        "llama3_json",
        "mistral",
        "pythonic",
    ] {
        let f = format_by_name(name).unwrap();
        let text = f.render_calls(&many);
        let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[8])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            scanned < 16 * text.len(),
            "{name}: parsed {scanned} bytes for {}",
            text.len()
        );
    }
}

/// A format that forwards only `parse_partial` (a wrapper, as users write): the
/// settled points it passes on come back through the default `parse_partial_from`,
/// which drops what came before them, so it still streams as it parses.
struct Forward(std::sync::Arc<dyn ToolCallFormat>);

impl ToolCallFormat for Forward {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn structural_tag(
        &self,
        tools: &[Tool],
        choice: &super::super::ToolChoice,
        parallel: bool,
    ) -> Result<tokensieve::StructuralTag, super::super::ToolError> {
        self.0.structural_tag(tools, choice, parallel)
    }
    fn parse_partial(&self, text: &str, tools: &[Tool], at_end: bool) -> PartialOutput {
        self.0.parse_partial(text, tools, at_end)
    }
    fn render_calls(&self, calls: &[ToolCall]) -> String {
        self.0.render_calls(calls)
    }
    fn render_tool_result(&self, call: &ToolCall, result: &serde_json::Value) -> String {
        self.0.render_tool_result(call, result)
    }
    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        self.0.render_tools_prompt(tools)
    }
}

#[test]
fn wrapper_forwarding_parse_partial_streams_as_whole() {
    let tools = tools();
    let calls: Vec<ToolCall> = (0..40)
        .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
        .collect();
    for name in format_names() {
        let f = Forward(format_by_name(&name).unwrap());
        let text = format!("Writing.\n{}", f.render_calls(&calls));
        for sizes in [&[1][..], &[7, 2], &[50]] {
            for t in [&text[..], &f.render_calls(&calls)] {
                check_stream_chunks(&f, &tools, t, sizes).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}

fn weather_tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"tz": {"type": "string"}}}}}
    ]))
    .unwrap()
}

/// Short adversarial outputs of format `f`: calls alone, two in a row, with text and
/// reasoning around, markers inside string arguments, unknown names, invalid JSON,
/// arguments written as a JSON string, a malformed call before a good one.
fn adversarial_texts(f: &dyn ToolCallFormat) -> Vec<String> {
    let paris = ToolCall::new("get_weather", json!({"city": "Paris"}));
    let utc = ToolCall::new("get_time", json!({"tz": "UTC"}));
    let marks = ToolCall::new(
        "get_weather",
        json!({"city": "<tool_call></tool_call>[TOOL_CALLS]<|call|><|tool_call_end|>\
               <｜tool▁call▁end｜>)]</parameter></function></arg_value>}"}),
    );
    let unknown = ToolCall::new("nope", json!({"city": "x"}));
    let one = f.render_calls(std::slice::from_ref(&paris));
    let two = f.render_calls(&[paris.clone(), utc.clone()]);
    let bad = one.replacen("\"Paris\"", "Paris", 1);
    let mut texts = vec![
        one.clone(),
        two.clone(),
        format!("Sure.\n{one}"),
        format!("<think>{one}</think>{two}"),
        format!("{one}\ntrailing"),
        f.render_calls(&[marks]),
        format!("{}{one}", f.render_calls(&[unknown])),
        bad.clone(),
        format!("{bad}\n{one}"),
        format!("{bad}{two}"),
    ];
    // Arguments as a JSON string (double-encoded), with escapes, and as a string that
    // is not a JSON object.
    for args in [r#"{"city": "Paris"}"#, r#"{"city":"Paris"}"#] {
        if one.contains(args) {
            for s in [
                serde_json::to_string(args).unwrap(),
                serde_json::to_string(r#"{"city": "P\u00e9 \"q\"\n😀"}"#).unwrap(),
                r#""{\"city\": \"P\u00e9\ud83d\ude00\"}""#.to_owned(),
                "\"Paris\"".to_owned(),
                "\"{\\\"city\\\": P}\"".to_owned(),
            ] {
                let t = one.replacen(args, &s, 1);
                texts.push(t.clone());
                texts.push(format!("{t}{one}"));
            }
        }
    }
    // Partial markers and partial calls at the end: every prefix of two calls.
    texts.extend(
        (1..two.len())
            .filter(|&k| two.is_char_boundary(k))
            .map(|k| two[..k].to_owned()),
    );
    texts
}

/// Streams `text` in `deltas` and checks the events against the whole-output parse:
/// same content, reasoning, calls and errors; calls and errors in output order; call
/// indices 0, 1, 2, … over the parsed calls; a call retracted only by its `Malformed`;
/// (`json`) a call's argument deltas add up to a JSON text of its arguments.
fn check_events(
    f: &dyn ToolCallFormat,
    tools: &[Tool],
    text: &str,
    deltas: &[&str],
    json: bool,
) -> Result<(), String> {
    let mut s = StreamingParser::new(f, tools);
    let mut events = Vec::new();
    for d in deltas {
        events.extend(s.push(d));
    }
    events.extend(s.finish());
    let partial = f.parse_partial(text, tools, true);
    // The output order of calls (Ok) and malformed calls (Err).
    let mut order_whole = Vec::new();
    let (mut k, mut j) = (0, 0);
    for c in &partial.calls {
        if c.complete.is_some() {
            order_whole.push(Ok(k));
            k += 1;
        } else if j < partial.errors.len() {
            order_whole.push(Err(j));
            j += 1;
        }
    }
    order_whole.extend((j..partial.errors.len()).map(Err));
    let whole = partial.into_parsed();
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut open: Option<(usize, String)> = None;
    let (mut calls, mut errors, mut order) = (Vec::new(), Vec::new(), Vec::new());
    for e in &events {
        match e {
            StreamEvent::Content(d) => content.push_str(d),
            StreamEvent::Reasoning(d) => reasoning.push_str(d),
            StreamEvent::ToolCallStart { index, .. } => {
                if open.is_some() || *index != calls.len() {
                    return Err(format!("start of {index} with {} ended", calls.len()));
                }
                open = Some((*index, String::new()));
            }
            StreamEvent::ToolCallArguments { index, delta } => match &mut open {
                Some((i, a)) if i == index => a.push_str(delta),
                _ => return Err(format!("arguments of {index} not open")),
            },
            StreamEvent::ToolCallEnd { index, call } => {
                let Some((i, args)) = open.take().filter(|(i, _)| i == index) else {
                    return Err(format!("end of {index} not open"));
                };
                if json {
                    let v: Result<serde_json::Value, _> = serde_json::from_str(&args);
                    if v.as_ref().ok() != Some(&call.arguments) {
                        return Err(format!("call {i}: arguments {args:?} for {call:?}"));
                    }
                }
                order.push(Ok(calls.len()));
                calls.push(call.clone());
            }
            StreamEvent::Malformed(m) => {
                // Ends (retracts) a started call.
                open = None;
                order.push(Err(errors.len()));
                errors.push(m.clone());
            }
        }
    }
    if open.is_some() {
        return Err("a call left open".into());
    }
    let got = super::super::ParsedOutput {
        content: (!content.is_empty()).then_some(content),
        reasoning: (!reasoning.is_empty()).then_some(reasoning),
        tool_calls: calls,
        errors,
    };
    if got != whole {
        return Err(format!("streamed {got:?}\nwhole {whole:?}"));
    }
    if order != order_whole {
        return Err(format!("order {order:?}, whole {order_whole:?}"));
    }
    // Every call started is either ended as parsed or ended by its `Malformed`.
    let mut started = Vec::new();
    for e in &events {
        match e {
            StreamEvent::ToolCallStart { index, id, name } => {
                started.push((*index, id.clone(), name.clone()))
            }
            StreamEvent::ToolCallEnd { call, .. } => {
                let (_, id, name) = started.pop().unwrap();
                if (id.as_ref(), &name) != (call.id.as_ref(), &call.name) && call.id.is_some() {
                    return Err(format!("started as {name} {id:?}, ended as {call:?}"));
                }
            }
            StreamEvent::Malformed(_) => {
                started.clear();
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every registered format, on short adversarial outputs cut at every split point into
/// two deltas and into 1-byte deltas, streams what the whole-output parse gives (see
/// [`check_events`]).
#[test]
fn adversarial_outputs_stream_as_parsed_at_every_split() {
    let tools = weather_tools();
    let mut runs = 0;
    for name in format_names() {
        let f = format_by_name(&name).unwrap();
        let json = !matches!(name.as_str(), "pythonic");
        let texts = adversarial_texts(f.as_ref());
        let prefixes = texts.len() - texts.iter().filter(|t| !t.is_empty()).count();
        let _ = prefixes;
        for text in &texts {
            runs += check_every_split(f.as_ref(), &tools, text, json)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    assert!(runs > 1000);
}

/// [`check_events`] for `text` in 1-byte deltas and cut at every split point into two
/// deltas; returns the runs made.
fn check_every_split(
    f: &dyn ToolCallFormat,
    tools: &[Tool],
    text: &str,
    json: bool,
) -> Result<usize, String> {
    let cuts: Vec<usize> = (0..=text.len())
        .filter(|&k| text.is_char_boundary(k))
        .collect();
    let mut cases: Vec<Vec<&str>> = vec![chars(text)];
    for &k in &cuts {
        cases.push(vec![&text[..k], &text[k..]]);
    }
    for deltas in &cases {
        check_events(f, tools, text, deltas, json)
            .map_err(|e| format!("{text:?} in {deltas:?}: {e}"))?;
    }
    Ok(cases.len())
}

/// Issue 23: the Mistral pre-v11 call array (`[TOOL_CALLS][{…}, {…}, …]`) settles
/// after each element from its first call on, so 1,000 calls in one array streamed in
/// 8-byte deltas hand the parser a small multiple of the text, as the formats that
/// settle after each call do (before, the array was re-parsed from its `[` in
/// coalesced steps: about 65 times the text).
#[test]
fn mistral_call_array_settles_after_each_element() {
    let tools = tools();
    let f = super::super::Mistral::array();
    let many: Vec<ToolCall> = (0..1000)
        .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
        .collect();
    let calls = f.render_calls(&many);
    let unknown = r#"{"name": "nope", "arguments": {}}"#;
    let with_bad = calls.replacen("[{", &format!("[{unknown}, {{"), 1);
    for text in [calls.clone(), format!("Writing.\n{with_bad}\nDone.")] {
        let scanned = check_stream_chunks(&f, &tools, &text, &[8]).unwrap();
        assert!(
            scanned < 16 * text.len(),
            "parsed {scanned} bytes for {} ({}x the text)",
            text.len(),
            scanned / text.len()
        );
    }
}

/// The Mistral array settled between its elements streams as the whole parse reads
/// it, at every split and in 1-byte deltas: the adversarial outputs, and arrays with
/// malformed elements before and after a call, a missing `,`, a cut-off end, no call.
#[test]
fn mistral_call_array_streams_as_parsed_at_every_split() {
    let tools = weather_tools();
    let f = super::super::Mistral::array();
    let mut texts = adversarial_texts(&f);
    let good = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
    let utc = r#"{"name": "get_time", "arguments": {"tz": "UTC"}}"#;
    let unknown = r#"{"name": "nope", "arguments": {}}"#;
    let bad = r#"{"name": "get_weather", "arguments": {"city": P}}"#;
    for body in [
        format!("[{unknown}, {good}, {unknown}, {utc}]"),
        format!("[{good}, {utc}, "),
        format!("[{good}, {utc} {good}]"),
        format!("[{good}, {bad}, {utc}]"),
        format!("[{good}, {good}"),
        format!("[{unknown}, {unknown}]"),
    ] {
        texts.push(format!("Sure. [TOOL_CALLS]{body} after"));
        texts.push(format!("[TOOL_CALLS]{body}[TOOL_CALLS][{utc}]"));
        texts.push(format!("[TOOL_CALLS]{body}"));
    }
    for text in &texts {
        check_every_split(&f, &tools, text, true).unwrap();
        for k in (1..text.len()).filter(|&k| text.is_char_boundary(k)) {
            check_stream_chunks(&f, &tools, &text[..k], &[1, 3])
                .unwrap_or_else(|e| panic!("{:?}: {e}", &text[..k]));
        }
    }
}

fn events_of(f: &dyn ToolCallFormat, tools: &[Tool], deltas: &[&str]) -> Vec<StreamEvent> {
    let mut s = StreamingParser::new(f, tools);
    let mut ev: Vec<StreamEvent> = deltas.iter().flat_map(|d| s.push(d)).collect();
    ev.extend(s.finish());
    ev
}

fn chars(text: &str) -> Vec<&str> {
    text.char_indices()
        .map(|(i, c)| &text[i..i + c.len_utf8()])
        .collect()
}

/// Finding 1: arguments written as a JSON string stream the decoded string (a JSON
/// text of the arguments object), not the string literal, in every JSON family.
#[test]
fn string_encoded_arguments_stream_as_their_decoded_json_text() {
    let tools = weather_tools();
    let call = ToolCall::new("get_weather", json!({"city": "Pé \"q\"\n😀"}));
    for name in [
        "hermes",
        "llama3_json",
        "json",
        "mistral",
        "kimi_k2",
        "deepseek_v3",
        "deepseek_v31",
        "harmony",
    ] {
        let f = format_by_name(name).unwrap();
        let one = f.render_calls(std::slice::from_ref(&call));
        let object = [
            super::super::scan::python_json(&call.arguments),
            call.arguments.to_string(),
        ]
        .into_iter()
        .find(|o| one.contains(o.as_str()))
        .unwrap_or_else(|| panic!("{name}: {one}"));
        let text = one.replacen(&object, &serde_json::to_string(&object).unwrap(), 1);
        let out = f.parse(&text, &tools).tool_calls;
        assert_eq!(out.len(), 1, "{name}: {text}");
        assert_eq!(out[0].arguments, call.arguments, "{name}");
        for deltas in [chars(&text), vec![&text[..]]] {
            let args: String = events_of(f.as_ref(), &tools, &deltas)
                .into_iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolCallArguments { index: 0, delta } => Some(delta),
                    _ => None,
                })
                .collect();
            assert_eq!(args, object, "{name}: {text}");
        }
    }
}

/// Findings 2 and 3: a malformed call (unknown tool, bad JSON) takes no index, and
/// its `Malformed` comes before a later call's events in the same push.
#[test]
fn malformed_calls_take_no_index_and_come_in_output_order() {
    let tools = weather_tools();
    let h = format_by_name("hermes").unwrap();
    let good =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>";
    for bad in [
        "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>\n",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": P}}\n</tool_call>\n",
    ] {
        let text = format!("{bad}{good}");
        assert_eq!(h.parse(&text, &tools).tool_calls.len(), 1);
        for deltas in [chars(&text), vec![&text[..]], vec![bad, good]] {
            let kinds: Vec<String> = events_of(h.as_ref(), &tools, &deltas)
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolCallStart { index, .. } => Some(format!("start {index}")),
                    StreamEvent::ToolCallEnd { index, .. } => Some(format!("end {index}")),
                    StreamEvent::Malformed(_) => Some("malformed".into()),
                    _ => None,
                })
                .collect();
            let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
            assert_eq!(
                &kinds[kinds.len() - 3..],
                ["malformed", "start 0", "end 0"],
                "{text:?} in {} deltas",
                deltas.len()
            );
            // Before it, at most the bad call's start (its name arrived first).
            assert!(kinds.len() == 3 || kinds[..kinds.len() - 3] == ["start 0"]);
        }
    }
}

/// Finding 4: an end marker cut off at the end of the output (a stop or the length
/// limit) ends the call it follows, when that call is complete without it: the call
/// is parsed and the cut-off marker is neither content nor an error, whole or
/// streamed. Every format with an end marker after a call's complete body.
#[test]
fn a_cut_off_end_marker_ends_a_complete_call() {
    let tools = weather_tools();
    let call = ToolCall::new("get_weather", json!({"city": "P"}));
    for (name, end) in [
        ("hermes", "</tool_call>"),
        ("qwen3_coder", "</tool_call>"),
        ("deepseek_v3", "<｜tool▁call▁end｜>"),
        ("deepseek_v3", "<｜tool▁calls▁end｜>"),
        ("deepseek_v31", "<｜tool▁call▁end｜>"),
        ("deepseek_v31", "<｜tool▁calls▁end｜>"),
        ("kimi_k2", "<|tool_call_end|>"),
        ("kimi_k2", "<|tool_calls_section_end|>"),
        ("harmony", "<|call|>"),
    ] {
        let f = format_by_name(name).unwrap();
        let whole = f.render_calls(std::slice::from_ref(&call));
        let at = whole
            .rfind(end)
            .unwrap_or_else(|| panic!("{name}: {whole}"));
        for (k, _) in end.char_indices().skip(1) {
            let text = &whole[..at + k];
            let out = f.parse(text, &tools);
            assert_eq!(out.tool_calls.len(), 1, "{name}: {text:?}");
            assert_eq!(
                out.tool_calls[0].arguments, call.arguments,
                "{name}: {text:?}"
            );
            assert_eq!(
                (out.content, out.errors.len()),
                (None, 0),
                "{name}: {text:?}"
            );
            check_stream_chunks(f.as_ref(), &tools, text, &[1])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

/// Finding 5: in the formats without an end marker, a call that is malformed as soon
/// as its text shows it (JSON that cannot be completed) is settled there: the text
/// after it streams on every delta rather than at the end (`llama3_json`, `glm4`; the
/// others hold it by design, see the module notes, and still stream as they parse).
#[test]
fn text_after_a_call_known_malformed_streams_in_formats_without_an_end_marker() {
    let tools = weather_tools();
    let call = ToolCall::new("get_weather", json!({"city": "Paris"}));
    let after = format!("\n{}", prose(2000));
    // mistral (v11+): a malformed call runs to the next `[TOOL_CALLS]` by design (the
    // syntax has no end, and text after a call is the call's until a marker);
    // json/json_array and pythonic: the output is read as one call list, which
    // text after a malformed list may still be part of (the module notes).
    for name in ["llama3_json", "glm4", "mistral", "json", "pythonic"] {
        let f = format_by_name(name).unwrap();
        let good = f.render_calls(std::slice::from_ref(&call));
        let bad = good
            .replacen("\"Paris\"", "P", 1)
            .replacen("'Paris'", "P,,", 1);
        assert_ne!(bad, good);
        let text = format!("{bad}{after}");
        let whole = f.parse(&text, &tools);
        assert!(!whole.errors.is_empty(), "{name}: {whole:?}");
        let mut s = StreamingParser::new(f.as_ref(), &tools);
        let mut first = None;
        let mut malformed_at = None;
        for (i, d) in text.as_bytes().chunks(4).enumerate() {
            let events = s.push(std::str::from_utf8(d).unwrap());
            for e in events {
                match e {
                    StreamEvent::Malformed(_) => malformed_at = malformed_at.or(Some(i * 4)),
                    StreamEvent::Content(_) if i * 4 > bad.len() + 8 => {
                        first = first.or(Some(i * 4))
                    }
                    _ => {}
                }
            }
        }
        s.finish();
        assert!(
            !matches!(name, "llama3_json" | "glm4")
                || first.is_some_and(|k| k < bad.len() + 64),
            "{name}: {bad:?} then text: content after it first sent at {first:?} (malformed at {malformed_at:?})"
        );
        check_stream_chunks(f.as_ref(), &tools, &text, &[4, 1, 7]).unwrap();
    }
}

/// `push_into` and `push_with` give the events of `push`, in every family and the
/// Mistral call array, over random cuts (1 to 24 bytes) of the adversarial outputs and of
/// calls with a long argument the stream reads itself: delta by delta when the caller
/// drains its vector, and `push_with` (the same events, in the same order), and, when the
/// caller of `push_into` never drains, those events with each run of one call's argument
/// deltas joined into one.
#[test]
fn push_into_and_push_with_give_the_events_of_push_over_random_cuts() {
    use rand::{Rng, SeedableRng};
    let tools = weather_tools();
    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    let formats = registered_and_mistral_array();
    let long = ToolCall::new(
        "get_weather",
        json!({"city": format!("é \"q\" \\ 😀 a < b\u{1}\n{}", prose(6000))}),
    );
    let short = ToolCall::new("get_time", json!({"tz": "UTC"}));
    let mut joined_runs = 0;
    for (name, f) in &formats {
        let mut texts = adversarial_texts(f.as_ref());
        let calls = f.render_calls(&[long.clone(), short.clone()]);
        texts.push(format!("Sure.\n{calls}\nDone."));
        for text in &texts {
            for _ in 0..3 {
                let mut deltas = Vec::new();
                let mut i = 0;
                while i < text.len() {
                    let mut j = (i + rng.gen_range(1..=24)).min(text.len());
                    while !text.is_char_boundary(j) {
                        j += 1;
                    }
                    deltas.push(&text[i..j]);
                    i = j;
                }
                let mut by_push = StreamingParser::new(f.as_ref(), &tools);
                let mut drained = StreamingParser::new(f.as_ref(), &tools);
                let mut piled = StreamingParser::new(f.as_ref(), &tools);
                let mut shown = StreamingParser::new(f.as_ref(), &tools);
                let (mut all, mut out, mut pile) = (Vec::new(), Vec::new(), Vec::new());
                for d in &deltas {
                    let events = by_push.push(d);
                    out.clear();
                    drained.push_into(d, &mut out);
                    assert_eq!(out, events, "{name}: {text:?} in {deltas:?}, at {d:?}");
                    out.clear();
                    shown.push_with(d, |e| out.push(e.clone()));
                    assert_eq!(out, events, "{name}: {text:?} in {deltas:?}, at {d:?}");
                    all.extend(events);
                    piled.push_into(d, &mut pile);
                }
                all.extend(by_push.finish());
                let joined = join_arguments(&pile);
                assert_eq!(joined.len(), pile.len(), "{name}: unjoined {pile:?}");
                pile.extend(piled.finish());
                let whole = join_arguments(&all);
                joined_runs += all.len() - whole.len();
                assert_eq!(
                    join_arguments(&pile),
                    whole,
                    "{name}: {text:?} in {deltas:?}"
                );
            }
        }
    }
    assert!(joined_runs > 1000, "{joined_runs} argument deltas joined");
}

/// `events` with each run of one call's argument deltas joined into one event.
fn join_arguments(events: &[StreamEvent]) -> Vec<StreamEvent> {
    let mut joined: Vec<StreamEvent> = Vec::new();
    for e in events {
        match (joined.last_mut(), e) {
            (
                Some(StreamEvent::ToolCallArguments { index: i, delta }),
                StreamEvent::ToolCallArguments { index, delta: more },
            ) if *i == *index => delta.push_str(more),
            (_, e) => joined.push(e.clone()),
        }
    }
    joined
}
