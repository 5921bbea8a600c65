//! Unit tests of the qwen3_coder family.

use super::*;
use crate::test_support::{assert_calls, assert_first_args, calls};
use crate::{StreamEvent, StreamingParser, ToolChoice};

fn tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}, "detail": {"type": "boolean"},
            "hours": {"type": "array", "items": {"type": "integer"}}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}
    ]))
    .unwrap()
}

const WORKED: &str = "I'll check the forecast.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

#[test]
fn parses_the_worked_example() {
    let out = Qwen3Coder::default().parse(WORKED, &tools());
    assert_eq!(out.content.as_deref(), Some("I'll check the forecast."));
    assert_calls(
        &out,
        &[("get_weather", json!({"city": "Paris", "days": 3}))],
    );
    assert!(out.errors.is_empty());
    // Without a schema `days` stays text.
    let out = Qwen3Coder::default().parse(WORKED, &[]);
    assert_first_args(&out, json!({"city": "Paris", "days": "3"}));
}

#[test]
fn python_spellings_and_bad_values() {
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNone\n</parameter>\n<parameter=detail>\nTrue\n</parameter>\n<parameter=days>\n2026-01-15\n</parameter>\n<parameter=hours>\n[1, 2]\n</parameter>\n</function>\n</tool_call>";
    let out = Qwen3Coder::default().parse(text, &tools());
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_first_args(
        &out,
        json!({"city": "None", "detail": true, "days": "2026-01-15", "hours": [1, 2]}),
    );
    // vLLM's rule: a `</parameter>` followed by an undeclared `<parameter=` is text, so
    // an undeclared parameter after a declared one stays inside its value.
    let text = "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n<parameter=extra>\n5\n</parameter>\n</function>\n</tool_call>";
    let out = Qwen3Coder::default().parse(text, &tools());
    assert_first_args(
        &out,
        json!({"tz": "UTC\n</parameter>\n<parameter=extra>\n5"}),
    );
    // First, or for a tool without a schema, it is a parameter (kept as text).
    let out = Qwen3Coder::default().parse(text, &[]);
    assert_first_args(&out, json!({"tz": "UTC", "extra": "5"}));
}

#[test]
fn closing_tags_inside_values() {
    let f = Qwen3Coder::default();
    let ts = tools();
    let city = "a </parameter> b\n</parameter>\nc </function></tool_call> <tool_call>";
    let calls = calls(&[
        ("get_weather", json!({"city": city, "days": 2})),
        ("get_time", json!({"tz": "<parameter=x>\n"})),
    ]);
    crate::test_support::assert_parses_back(&f, &calls, &ts);
}

#[test]
fn missing_close_and_missing_wrapper_are_tolerated() {
    let text = "<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n3\n</function>";
    let out = Qwen3Coder::default().parse(text, &tools());
    assert_calls(
        &out,
        &[("get_weather", json!({"city": "Paris", "days": 3}))],
    );
    assert_eq!(out.content, None);
}

#[test]
fn unknown_tool_and_unterminated_calls_are_errors_kept_in_content() {
    let ts = tools();
    let f = Qwen3Coder::default();
    let bad = "<tool_call>\n<function=nope>\n</function>\n</tool_call>";
    let out = f.parse(&format!("Hi.\n{bad}\nBye."), &ts);
    assert!(out.tool_calls.is_empty());
    assert_eq!(
        out.errors[0].error,
        ToolParseError::UnknownTool {
            name: "nope".into()
        }
    );
    assert_eq!(out.errors[0].text, bad);
    assert_eq!(out.content.unwrap(), format!("Hi.\n{bad}\nBye."));
    let cut = "<tool_call>\n<function=get_time>\n<parameter=tz>\nUT";
    let out = f.parse(cut, &ts);
    assert_eq!(out.errors[0].error, ToolParseError::Unterminated);
    assert_eq!(out.content.as_deref(), Some(cut));
    let phantom = "<tool_call>\n<function={{ tc.name }}>\n</function>\n</tool_call>";
    assert!(matches!(
        f.parse(phantom, &ts).errors[0].error,
        ToolParseError::InvalidName { .. }
    ));
}

#[test]
fn reasoning_hides_calls() {
    let f = Qwen3Coder::new(crate::test_support::with_reasoning());
    let text = "<think>\nmaybe <tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>\n</think>\n\nok";
    let reasoning = crate::test_support::reasoning_without_calls(&f, text, &tools(), "ok");
    assert!(reasoning.contains("<function=get_time>"));
}

#[test]
fn streams_string_values_and_holds_back_partial_markers() {
    let f = Qwen3Coder::default();
    let ts = tools();
    let mut p = StreamingParser::new(&f, &ts);
    let first = p.push("I'll check the forecast.\n\n<tool_");
    assert_eq!(
        first,
        [StreamEvent::Content("I'll check the forecast.".into())]
    );
    let mut all = Vec::new();
    all.extend(p.push("call>\n<function=get_weather>\n<parameter=city>\nPa"));
    all.extend(p.push("ris\n</param"));
    let args = crate::test_support::streamed_arguments_text(&all);
    assert_eq!(args, "{\"city\": \"Paris");
    all.extend(p.push("eter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
    all.extend(p.finish());
    let ends = crate::test_support::ended_calls(&all);
    assert_eq!(ends, vec![f.parse(WORKED, &ts).tool_calls[0].clone()]);
    let args = crate::test_support::streamed_arguments_text(&all);
    assert_eq!(args, "{\"city\": \"Paris\", \"days\": 3}");
}

#[test]
fn several_calls_in_one_chunk() {
    let f = Qwen3Coder::default();
    let ts = tools();
    let calls = calls(&[
        ("get_time", json!({"tz": "UTC"})),
        ("get_weather", json!({"city": "Oslo", "days": 1})),
    ]);
    let mut p = StreamingParser::new(&f, &ts);
    let mut ev = p.push(&format!("Both.\n\n{}", f.render_calls(&calls)));
    ev.extend(p.finish());
    assert_eq!(crate::test_support::ended_calls(&ev), calls);
}

#[test]
fn bad_input_never_panics() {
    let f = Qwen3Coder::default();
    let ts = tools();
    let text = "x<tool_call>\n<function=get_weather>\n<parameter=city>\né</parameter>\n</function>\n</tool_call>";
    crate::test_support::parse_every_cut(&f, text, &ts);
}

/// Qwen3-Coder markers, names, values and fragments, for random texts (with the
/// fragments `soup_text` adds).
const SOUP: &[&str] = &[
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>",
    "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n<parameter=tz>\nCET\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>",
    "</tool_call>",
    "<tool_call>\n<function=get_weather>\n",
    "<function=get_weather>",
    "<function=get_time>",
    "<function=nope>",
    "<function=",
    "</function>",
    "<parameter=city>",
    "<parameter=days>",
    "<parameter=tz>",
    "<parameter=x>",
    "<parameter=",
    "</parameter>",
    "\n</parameter>\n",
    "<parameter=city>\nParis\n</parameter>\n",
    "<parameter=days>\n3\n</parameter>\n",
    "Paris",
    "3",
    "[1, 2]",
    "True",
    "city>",
    "<think>",
    "</think>",
    "<",
    "</",
    "<param",
    "</func",
];

#[test]
fn streams_random_text_as_whole() {
    use proptest::prelude::*;
    let ts = tools();
    let strategy = (
        crate::test_support::soup_text(SOUP),
        any::<bool>(),
        any::<bool>(),
    );
    let calls = std::cell::Cell::new(0);
    let mut runner =
        proptest::test_runner::TestRunner::new(crate::test_support::stream_check_config(1000));
    runner
        .run(&strategy, |(text, reasoning, no_tools)| {
            let f = Qwen3Coder::new(FormatOptions {
                reasoning,
                ..FormatOptions::default()
            });
            let tools: &[Tool] = if no_tools { &[] } else { &ts };
            if !f.parse(&text, tools).tool_calls.is_empty() {
                calls.set(calls.get() + 1);
            }
            crate::test_support::check_streams_as_whole(&f, tools, &text)
                .map_err(proptest::test_runner::TestCaseError::fail)
        })
        .unwrap();
    assert!(
        calls.get() >= 100,
        "only {} of 1000 texts had calls",
        calls.get()
    );
}

#[test]
fn error_quotes_no_text_after_the_malformed_call() {
    let f = Qwen3Coder::default();
    let text = "<tool_call>\n<function=get_weather>\nxy</tool_call> and text after it";
    let out = f.parse(text, &tools());
    assert_eq!(
        out.errors[0].error,
        ToolParseError::Syntax(
            "expected <parameter=NAME> or </function>, found \"xy</tool_call>\"".into()
        )
    );
    crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
}

#[test]
fn value_missing_its_close_streams_only_what_it_keeps() {
    let f = Qwen3Coder::default();
    let text = "<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n3\n</function>";
    let out = f.parse_partial(&text[..text.len() - 3], &tools(), false);
    assert_eq!(out.calls[0].arguments_text, r#"{"city": "Paris"#);
    assert_eq!(
        f.parse(text, &tools()).tool_calls,
        calls(&[("get_weather", json!({"city": "Paris", "days": 3}))])
    );
    crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
}

#[test]
fn bare_call_then_closing_wrapper_is_not_content() {
    let f = Qwen3Coder::default();
    let text = "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function></tool_call>";
    assert_eq!(f.parse(text, &tools()).content, None);
    crate::test_support::check_streams_as_whole(&f, &tools(), text).unwrap();
}

#[test]
fn a_parameter_given_twice_is_a_malformed_call() {
    // It was last-wins, dropping the first value silently (rule 6).
    let f = Qwen3Coder::default();
    let text = "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n<parameter=tz>\nCET\n</parameter>\n</function>\n</tool_call>";
    let out = f.parse(text, &[]);
    assert!(out.tool_calls.is_empty());
    assert_eq!(
        out.errors[0].error,
        ToolParseError::Syntax("argument \"tz\" given twice".into())
    );
    assert_eq!(out.content.as_deref(), Some(text));
    crate::test_support::check_streams_as_whole(&f, &[], text).unwrap();
}

/// Tools whose string enums are reached through `$ref` (as schemars writes a
/// unit-variant enum field), one of them with strings that read as JSON.
pub(crate) fn ref_enum_tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([{"type": "function", "function": {"name": "set",
        "strict": true, "parameters": {"type": "object", "properties": {
            "unit": {"$ref": "#/$defs/Unit"},
            "level": {"$ref": "#/definitions/Level"},
            "note": {"$ref": "#/$defs/Note"}},
        "required": ["unit", "level"],
        "$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                  "Note": {"$ref": "#/$defs/Text"},
                  "Text": {"type": "string", "description": "free text"}},
        "definitions": {"Level": {"type": "string", "enum": ["1", "true", "null"]}}}}}]))
    .unwrap()
}

#[test]
fn ref_string_enums_render_as_the_grammar_writes_them() {
    use tokensieve::GrammarMatcher;
    let f = Qwen3Coder::default();
    let ts = ref_enum_tools();
    let g = crate::test_support::compile_required_on_ascii(&f, &ts);
    for args in [
        json!({"unit": "celsius", "level": "1"}),
        json!({"unit": "fahrenheit", "level": "true", "note": "3"}),
        json!({"unit": "celsius", "level": "null", "note": "a \"b\""}),
    ] {
        crate::test_support::assert_round_trips(&f, &g, &ToolCall::new("set", args), &ts);
    }
    let mut m = GrammarMatcher::new(g);
    assert!(!m.accept_string("<tool_call>\n<function=set>\n<parameter=unit>\nkelvin"));
}

/// A tool whose parameters admit strings among other values: schemars'
/// `Option<String>`, `Option` of a string enum through `$ref`, `["integer", "string"]`
/// and `anyOf` string-or-null.
pub(crate) fn mixed_string_tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([{"type": "function", "function": {"name": "paint",
        "parameters": {"type": "object", "properties": {
            "label": {"type": ["string", "null"]},
            "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
            "id": {"type": ["integer", "string"]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}],
                     "description": "optional note"}},
        "required": ["label", "id"],
        "$defs": {"Color": {"type": "string", "enum": ["red", "dark green"]}}}}}]))
    .unwrap()
}

/// Calls on [`mixed_string_tools`] that round-trip, each value unambiguous.
pub(crate) fn mixed_string_calls() -> Vec<Value> {
    vec![
        json!({"label": "hello", "color": "red", "id": 42, "note": "two\nlines"}),
        json!({"label": null, "color": null, "id": "abc", "note": null}),
        json!({"label": "None", "color": "dark green", "id": "4.5", "note": "true"}),
        json!({"label": "\"quoted\" [1]", "id": -7, "note": "{\"a\": 1}"}),
        json!({"label": "", "id": "x-1"}),
    ]
}

#[test]
fn strings_of_mixed_schemas_render_as_the_grammar_writes_them() {
    use tokensieve::GrammarMatcher;
    let f = Qwen3Coder::default();
    let ts = mixed_string_tools();
    let tag = f.structural_tag(&ts, &ToolChoice::Required, true).unwrap();
    let g = crate::test_support::compile_on_ascii(&tag);
    for args in mixed_string_calls() {
        let call = ToolCall::new("paint", args);
        f.try_render_calls(std::slice::from_ref(&call)).unwrap();
        crate::test_support::assert_round_trips(&f, &g, &call, &ts);
    }
    // The JSON spelling of a non-string branch and the raw strings are both allowed;
    // a string outside the enum is not.
    let head = "<tool_call>\n<function=paint>\n<parameter=label>\n";
    for (value, ok) in [("null", true), ("\"hello\"", true), ("a\nb", true)] {
        let mut m = GrammarMatcher::new(g.clone());
        let text = format!("{head}{value}\n</parameter>\n<parameter=id>\n1\n</parameter>");
        assert_eq!(m.accept_string(&text), ok, "{text}");
    }
    let mut m = GrammarMatcher::new(g.clone());
    assert!(!m.accept_string(&format!("{head}x\n</parameter>\n<parameter=color>\nblue")));
    // The inherent ambiguity: a string that is JSON valid under another branch reads
    // back as that value.
    let call = ToolCall::new("paint", json!({"label": "null", "id": "42"}));
    let text = f.render_calls(&[call]);
    assert_eq!(
        f.parse(&text, &ts).tool_calls[0].arguments,
        json!({"label": null, "id": 42})
    );
    // A string branch's `maxLength` counts the raw text's characters, as for a
    // `"type": "string"` property; the other branch stays JSON.
    let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "t", "parameters": {"type": "object", "properties": {
            "s": {"type": ["string", "null"], "maxLength": 3}}}}}]))
    .unwrap();
    let g = crate::test_support::compile_required_on_ascii(&f, &ts);
    let head = "<tool_call>\n<function=t>\n<parameter=s>\n";
    for (value, ok) in [("abc", true), ("null", true), ("abcd", false), ("", true)] {
        let mut m = GrammarMatcher::new(g.clone());
        let text = format!("{head}{value}\n</parameter>\n</function>\n</tool_call>");
        assert_eq!(m.accept_string(&text) && m.is_completed(), ok, "{text}");
    }
}

#[test]
fn values_holding_the_closing_tags_are_escaped_or_refused() {
    let f = Qwen3Coder::default();
    let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "write", "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "body": {"type": "string"},
            "meta": {"type": "object"}}}}}]))
    .unwrap();
    // JSON values: `</` is written `<\/`, the same JSON, never a closing tag.
    let call = ToolCall::new(
        "write",
        json!({"path": "a.xml", "meta": {"k": "x</parameter>\n</function>"}}),
    );
    let text = f.try_render_calls(std::slice::from_ref(&call)).unwrap();
    assert!(!text.contains("x</parameter>"), "{text}");
    assert_eq!(f.render_calls(std::slice::from_ref(&call)), text);
    assert_eq!(f.parse(&text, &ts).tool_calls, vec![call]);
    // Raw strings cannot be escaped: a typed error naming the parameter and the tag.
    for (body, tag) in [
        ("x</parameter>\n</function>", "</parameter>"),
        ("end</function>\n</tool_call>", "</function>"),
        ("a</tool_call>", "</tool_call>"),
    ] {
        let call = ToolCall::new("write", json!({"path": "a", "body": body}));
        match f.try_render_calls(&[call]) {
            Err(ToolError::Unsupported { format, reason }) => {
                assert_eq!(format, "qwen3_coder");
                assert!(
                    reason.contains("\"body\"") && reason.contains(tag),
                    "{reason}"
                );
            }
            other => panic!("{body:?}: {other:?}"),
        }
    }
    // A value that merely mentions a tag without closing one round-trips.
    let call = ToolCall::new("write", json!({"path": "<parameter=x>", "body": "a < b"}));
    let text = f.try_render_calls(std::slice::from_ref(&call)).unwrap();
    assert_eq!(f.parse(&text, &ts).tool_calls, vec![call]);
}

#[test]
fn a_tool_call_marker_inside_an_open_parameter_streams_as_whole() {
    // Found by a random seed of `streams_random_text_as_whole`.
    let ts = tools();
    let text = "</function></function></function><tool_call>\n<function=get_weather>\n<parameter=city><<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
    for reasoning in [false, true] {
        let f = Qwen3Coder::new(FormatOptions {
            reasoning,
            ..FormatOptions::default()
        });
        crate::test_support::assert_streams_as_whole(&f, text, &ts);
    }
}

#[test]
fn a_parameter_name_that_reads_as_json_arguments_streams_as_whole() {
    // GLM's `<arg_key>{` seed: the arguments so far (`{`) were the output's last byte
    // while `<parameter={` arrived, and the stream read the name on as JSON arguments.
    // Seed 87: a non-string value `{` read on after a delta of whitespace only.
    let texts = [
        "<tool_call>\n<function=get_weather>\n<parameter={\"a\": 1}>\nx\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=days>{\n3<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    ];
    crate::test_support::assert_each_streams_as_whole(&Qwen3Coder::default(), &texts, &tools());
}

#[test]
fn a_value_whose_text_recurs_after_a_close_streams_as_whole() {
    // Seed 141: after `</function>` (which may still be the value's text) the parse kept
    // the arguments `{"city": "<think>` unchanged while `<think>` arrived again, so the
    // value matched the output's end by chance and the stream read `a` on as its text.
    // With whitespace after it, a parse that added nothing matched the same way.
    let texts = [
        "<function=get_time><parameter=city><think></function><think>a",
        "<function=get_time><parameter=city><think></function><think> a",
    ];
    let ts = tools();
    for reasoning in [false, true] {
        let f = Qwen3Coder::new(FormatOptions {
            reasoning,
            ..FormatOptions::default()
        });
        for text in texts {
            // Byte by byte (the split the property test found), then every split the
            // streaming check tries.
            if let Err(e) = crate::test_support::check_stream_chunks(&f, &ts, text, &[1]) {
                panic!("reasoning {reasoning}: {e}");
            }
            crate::test_support::assert_streams_as_whole(&f, text, &ts);
        }
    }
}
