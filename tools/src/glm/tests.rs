//! Unit tests of the glm family.

use super::*;
use crate::test_support::{assert_calls, assert_first_args, calls};
use crate::{StreamEvent, StreamingParser};

fn tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"},
            "days": {"type": "integer"}, "hours": {"type": "array"}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}},
        {"type": "function", "function": {"name": "get_current_time",
            "parameters": {"type": "object", "properties": {}}}}
    ]))
    .unwrap()
}

const WORKED: &str = "<think>Both need tools.</think>\nLet me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>Europe/Paris</arg_value>\n</tool_call>";

#[test]
fn parses_the_worked_example() {
    let f = Glm::glm45(crate::test_support::with_reasoning());
    let out = f.parse(WORKED, &tools());
    assert_eq!(out.reasoning.as_deref(), Some("Both need tools."));
    assert_eq!(out.content.as_deref(), Some("Let me check."));
    assert_calls(
        &out,
        &[
            ("get_weather", json!({"city": "Paris"})),
            ("get_time", json!({"tz": "Europe/Paris"})),
        ],
    );
    // The 4.7 reader is the same: it reads 4.5 output too.
    assert_eq!(
        Glm::glm47(f.options().clone())
            .parse(WORKED, &tools())
            .tool_calls,
        out.tool_calls
    );
}

#[test]
fn glm47_zero_argument_and_typed_values() {
    let f = Glm::glm47(FormatOptions::default());
    let text = "<tool_call>get_current_time</tool_call><tool_call>get_weather<arg_key>city</arg_key><arg_value>10</arg_value><arg_key>days</arg_key><arg_value>3</arg_value><arg_key>hours</arg_key><arg_value>[1, 2]</arg_value><arg_key>x</arg_key><arg_value>true</arg_value></tool_call>";
    let out = f.parse(text, &tools());
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_calls(
        &out,
        &[
            ("get_current_time", json!({})),
            (
                "get_weather",
                json!({"city": "10", "days": 3, "hours": [1, 2], "x": true}),
            ),
        ],
    );
    let calls = out.tool_calls;
    assert_eq!(f.parse(&f.render_calls(&calls), &tools()).tool_calls, calls);
}

#[test]
fn markers_inside_values_and_reasoning() {
    let f = Glm::glm45(crate::test_support::with_reasoning());
    let calls = calls(&[(
        "get_weather",
        json!({"city": "a </arg_value> b <tool_call>x</tool_call>"}),
    )]);
    let text = format!(
        "<think>try <tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call></think>\n{}",
        f.render_calls(&calls)
    );
    let out = f.parse(&text, &tools());
    assert_eq!(out.tool_calls, calls);
    assert!(out.reasoning.unwrap().contains("get_time"));
    assert_eq!(out.content, None);
}

#[test]
fn unknown_tool_and_unterminated_are_errors() {
    let f = Glm::default();
    let bad = "<tool_call>nope\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>";
    let out = f.parse(&format!("Hi.\n{bad}"), &tools());
    assert_eq!(
        out.errors[0].error,
        crate::test_support::unknown_tool("nope")
    );
    assert_eq!(out.content.unwrap(), format!("Hi.\n{bad}"));
    let cut = "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UT";
    let out = f.parse(cut, &tools());
    assert_eq!(out.errors[0].error, ToolParseError::Unterminated);
    assert_eq!(out.content.as_deref(), Some(cut));
    // Invalid JSON in a non-string value stays text (the call is kept).
    let out = f.parse(
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>x</arg_value>\n<arg_key>hours</arg_key>\n<arg_value>[1, </arg_value>\n</tool_call>",
        &tools(),
    );
    assert_first_args(&out, json!({"city": "x", "hours": "[1, "}));
}

#[test]
fn streaming_holds_back_and_reads_several_calls_in_one_chunk() {
    let (f, ts) = (Glm::default(), tools());
    // The worked example without its reasoning, cut inside `<tool_call>`.
    let head = "Let me check.\n<tool_";
    let skip = "<think>Both need tools.</think>\n".len() + head.len();
    let text = format!("{head}{}", &WORKED[skip..]);
    let (first, all) = crate::test_support::stream_cut_at(&f, &ts, &text, head.len());
    assert_eq!(first, [StreamEvent::Content("Let me check.".into())]);
    assert_eq!(crate::test_support::ended_calls(&all).len(), 2);
    // A value cut inside its closing tag streams whole.
    let mut p = StreamingParser::new(&f, &ts);
    let chunks = [
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Pa",
        "ris</arg_val",
        "ue>\n</tool_call>",
    ];
    let events: Vec<StreamEvent> = chunks.iter().flat_map(|c| p.push(c)).collect();
    let args = crate::test_support::streamed_arguments_text(&events);
    assert_eq!(args, "{\"city\": \"Paris\"}");
}

#[test]
fn glm4_name_and_json() {
    let (f, ts) = (Glm4::default(), tools());
    let out = f.parse("get_time\n{\"tz\": \"UTC\"}", &ts);
    assert_calls(&out, &[("get_time", json!({"tz": "UTC"}))]);
    let out = f.parse("\nIt is sunny.", &ts);
    assert_eq!(out.content.as_deref(), Some("It is sunny."));
    assert!(out.tool_calls.is_empty());
    let calls = calls(&[
        ("get_time", json!({"tz": "UTC"})),
        ("get_weather", json!({"city": "Oslo"})),
    ]);
    assert_eq!(f.parse(&f.render_calls(&calls), &ts).tool_calls, calls);
    let out = f.parse("nope\n{}", &ts);
    assert!(matches!(
        out.errors[0].error,
        ToolParseError::UnknownTool { .. }
    ));
    let out = f.parse("get_time\n{\"tz\": }", &ts);
    assert!(matches!(
        out.errors[0].error,
        ToolParseError::InvalidJson(_)
    ));
}

#[test]
fn bad_input_never_panics() {
    let ts = tools();
    for f in [
        &Glm::default() as &dyn ToolCallFormat,
        &Glm::glm47(FormatOptions::default()),
        &Glm4::default(),
    ] {
        for text in [WORKED, "get_time\n{\"tz\": \"é\"}<|assistant|>get_time\n{"] {
            crate::test_support::parse_every_cut(f, text, &ts);
        }
    }
}

/// GLM markers, names, values and fragments, for random texts (with the fragments
/// `soup_text` adds).
const SOUP: &[&str] = &[
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
    "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UTC</arg_value></tool_call>",
    "<tool_call>get_current_time</tool_call>",
    "<tool_call>get_weather<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    "<tool_call>",
    "</tool_call>",
    "<tool_call>get_weather\n",
    "<tool_call>get_time",
    "get_weather",
    "get_time",
    "get_current_time",
    "nope",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<arg_key>city</arg_key>",
    "<arg_key>days</arg_key>",
    "<arg_key>tz</arg_key>",
    "<arg_key>x</arg_key>",
    "<arg_value>Paris</arg_value>",
    "<arg_value>3</arg_value>",
    "city",
    "3",
    "[1, 2",
    "]",
    "Paris",
    "<think>",
    "</think>",
    "<|assistant|>",
    "<|observation|>",
    "{\"tz\": \"UTC\"}",
    "{\"city\": ",
    "{",
    "}",
    "\"",
    "<",
    "</",
    "<arg",
    "</arg_",
];

/// How GLM-4 outputs start: a call, part of one, or text.
const GLM4_STARTS: &[&str] = &[
    "",
    "",
    "\n",
    "get_time\n{\"tz\": \"UTC\"}",
    "get_weather\n{\"city\": \"Oslo\"}<|observation|><|assistant|>get_time\n{\"tz\": \"UTC\"}",
    "get_time\n",
    "nope\n{}",
];

fn soup() -> impl proptest::strategy::Strategy<Value = (String, bool, bool)> {
    use proptest::prelude::*;
    (
        (
            prop::sample::select(GLM4_STARTS),
            crate::test_support::soup_text(SOUP),
        )
            .prop_map(|(start, v)| format!("{start}{v}")),
        any::<bool>(),
        any::<bool>(),
    )
}

#[test]
fn glm_streams_random_text_as_whole() {
    let ts = tools();
    let calls = std::cell::Cell::new([0; 3]);
    let mut runner =
        proptest::test_runner::TestRunner::new(crate::test_support::stream_check_config(600));
    runner
        .run(&soup(), |(text, reasoning, no_tools)| {
            let options = FormatOptions {
                reasoning,
                ..FormatOptions::default()
            };
            let tools: &[Tool] = if no_tools { &[] } else { &ts };
            for (i, f) in [
                &Glm::glm45(options.clone()) as &dyn ToolCallFormat,
                &Glm::glm47(options.clone()),
                &Glm4::new(options.clone()),
            ]
            .into_iter()
            .enumerate()
            {
                if !f.parse(&text, tools).tool_calls.is_empty() {
                    let mut c = calls.get();
                    c[i] += 1;
                    calls.set(c);
                }
                crate::test_support::check_streams_as_whole(f, tools, &text).map_err(|e| {
                    proptest::test_runner::TestCaseError::fail(format!("{}: {e}", f.name()))
                })?;
            }
            Ok(())
        })
        .unwrap();
    // Enough of the texts hold calls for the check to mean something.
    assert!(calls.get().iter().all(|&n| n >= 50), "{:?}", calls.get());
}

#[test]
fn error_quotes_no_text_after_the_malformed_call() {
    let text = "<tool_call>get_weather\nxy</tool_call> and text after it";
    let out = Glm::default().parse(text, &tools());
    assert_eq!(
        out.errors[0].error,
        ToolParseError::Syntax(
            "expected <arg_key> or </tool_call>, found \"xy</tool_call>\"".into()
        )
    );
    crate::test_support::check_streams_as_whole(&Glm::default(), &tools(), text).unwrap();
}

#[test]
fn a_key_given_twice_is_a_malformed_call() {
    // It was last-wins, dropping the first value silently (rule 6).
    let f = Glm::glm47(FormatOptions::default());
    let text = "<tool_call>get_time<arg_key>tz</arg_key><arg_value>UTC</arg_value><arg_key>tz</arg_key><arg_value>CET</arg_value></tool_call>";
    let out = f.parse(text, &tools());
    assert!(out.tool_calls.is_empty());
    assert_eq!(
        out.errors[0].error,
        ToolParseError::Syntax("argument \"tz\" given twice".into())
    );
    assert_eq!(out.content.as_deref(), Some(text));
    crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
}

#[test]
fn glm4_text_message_after_a_call_drops_its_assistant_marker() {
    let f = Glm4::default();
    for text in [
        "get_time\n{\"tz\": \"UTC\"}<|assistant|>It is sunny.\nReally.",
        "get_time\n{\"tz\": \"UTC\"}<|assistant|>It is sunny.",
    ] {
        let out = f.parse(text, &tools());
        assert_eq!(out.tool_calls.len(), 1);
        assert!(out.content.unwrap().starts_with("It is sunny."));
        crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
    }
}

#[test]
fn glm4_name_line_ending_in_carriage_return() {
    let f = Glm4::default();
    let text = "get_time\r\n{\"tz\": \"UTC\"}";
    assert_eq!(
        f.parse(text, &tools()).tool_calls,
        calls(&[("get_time", json!({"tz": "UTC"}))])
    );
    crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
}

#[test]
fn ref_string_enums_render_as_the_grammar_writes_them() {
    let ts = crate::qwen3_coder::tests::ref_enum_tools();
    for f in [
        Glm::glm45(FormatOptions::default()),
        Glm::glm47(FormatOptions::default()),
    ] {
        let g = crate::test_support::compile_required_on_ascii(&f, &ts);
        for args in [
            json!({"unit": "celsius", "level": "1"}),
            json!({"unit": "fahrenheit", "level": "true", "note": "3"}),
        ] {
            crate::test_support::assert_round_trips(&f, &g, &ToolCall::new("set", args), &ts);
        }
    }
}

#[test]
fn strings_of_mixed_schemas_render_as_the_grammar_writes_them() {
    use crate::qwen3_coder::tests::{mixed_string_calls, mixed_string_tools};
    let ts = mixed_string_tools();
    for f in [
        Glm::glm45(FormatOptions::default()),
        Glm::glm47(FormatOptions::default()),
    ] {
        let g = crate::test_support::compile_required_on_ascii(&f, &ts);
        for args in mixed_string_calls() {
            let call = ToolCall::new("paint", args);
            f.try_render_calls(std::slice::from_ref(&call)).unwrap();
            crate::test_support::assert_round_trips(&f, &g, &call, &ts);
        }
        let call = ToolCall::new("paint", json!({"label": "null", "id": "42"}));
        assert_eq!(
            f.parse(&f.render_calls(&[call]), &ts).tool_calls[0].arguments,
            json!({"label": null, "id": 42})
        );
    }
}

#[test]
fn values_holding_the_closing_tag_are_escaped_or_refused() {
    let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "write", "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "body": {"type": "string"},
            "meta": {"type": "object"}}}}}]))
    .unwrap();
    for f in [
        Glm::glm45(FormatOptions::default()),
        Glm::glm47(FormatOptions::default()),
    ] {
        // JSON values: `</` is written `<\/`, the same JSON, never a closing tag.
        let call = ToolCall::new(
            "write",
            json!({"path": "a", "meta": {"k": "x</arg_value><arg_key>y</arg_key>"}}),
        );
        let text = f.try_render_calls(std::slice::from_ref(&call)).unwrap();
        assert!(!text.contains("x</arg_value>"), "{text}");
        assert_eq!(f.parse(&text, &ts).tool_calls, vec![call]);
        // A raw string holding `</arg_value>`: a typed error naming the parameter.
        let call = ToolCall::new("write", json!({"path": "a", "body": "x</arg_value>"}));
        match f.try_render_calls(&[call]) {
            Err(ToolError::Unsupported { format, reason }) => {
                assert_eq!(format, f.name());
                assert!(
                    reason.contains("\"body\"") && reason.contains("</arg_value>"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Other markers in a raw string round-trip.
        let call = ToolCall::new(
            "write",
            json!({"path": "<arg_key>", "body": "</tool_call>"}),
        );
        let text = f.try_render_calls(std::slice::from_ref(&call)).unwrap();
        assert_eq!(f.parse(&text, &ts).tool_calls, vec![call]);
    }
}

#[test]
fn a_key_that_reads_as_json_arguments_streams_as_whole() {
    // Proptest's minimal failing input (seed 340): while `<arg_key>{` arrived, the
    // arguments so far (`{`) were the output's last byte, and the stream read the key on
    // as the call's JSON arguments (`{"tz": "UTC"` sent, then the real key). The
    // others: shorter, without newlines, and a value.
    let texts = [
        "<tool_call>get_weather\n<arg_key>{\"tz\": \"UTC\"}<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
        "<tool_call>get_weather\n<arg_key>{\"a\": 1}</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
        "<tool_call>get_weather<arg_key>{\"a\": [1, 2]}</arg_key><arg_value>x</arg_value></tool_call>",
        // A non-string value `{` read on after a delta of whitespace only.
        "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>{\n3</arg_value>\n</tool_call>",
    ];
    for f in [
        Glm::glm45(FormatOptions::default()),
        Glm::glm47(FormatOptions::default()),
    ] {
        crate::test_support::assert_each_streams_as_whole(&f, &texts, &tools());
    }
}
