//! Unit tests of the scanning pieces and of every family's handling of them.

use super::*;
use serde_json::json;

use super::json::read_json_value_strict;
use crate::test_support::assert_streams_as_whole;

/// An argument given twice was silently last-wins in every family but pythonic
/// (`{"city": "P", "city": "Q"}` read as `{"city": "Q"}`): it is a malformed call,
/// its text kept in content, whole and streamed alike.
#[test]
fn an_argument_given_twice_is_a_malformed_call() {
    let tools = Tool::list_from_openai(&json!([{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]))
    .unwrap();
    let dup = r#"{"city": "P", "days": 1, "city": "Q"}"#;
    let cases = [
        ("hermes", format!("<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {dup}}}\n</tool_call>")),
        ("hermes", format!("<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {}}}\n</tool_call>", json!(dup))),
        ("json", format!("[{{\"name\": \"get_weather\", \"arguments\": {dup}}}]")),
        ("llama3_json", format!("{{\"name\": \"get_weather\", \"parameters\": {dup}}}")),
        ("mistral", format!("[TOOL_CALLS][{{\"name\": \"get_weather\", \"arguments\": {dup}}}]")),
        ("mistral", format!("[TOOL_CALLS]get_weather[ARGS]{dup}")),
        ("deepseek_v3", format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{dup}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")),
        ("deepseek_v31", format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{dup}<｜tool▁call▁end｜><｜tool▁calls▁end｜>")),
        ("kimi_k2", format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{dup}<|tool_call_end|><|tool_calls_section_end|>")),
        ("openai", format!("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{dup}<|call|>")),
        ("glm4", format!("get_weather\n{dup}")),
        ("qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nP\n</parameter>\n<parameter=days>\n1\n</parameter>\n<parameter=city>\nQ\n</parameter>\n</function>\n</tool_call>".to_owned()),
        ("glm45", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>P</arg_value>\n<arg_key>days</arg_key>\n<arg_value>1</arg_value>\n<arg_key>city</arg_key>\n<arg_value>Q</arg_value>\n</tool_call>".to_owned()),
        ("glm47", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>P</arg_value><arg_key>days</arg_key><arg_value>1</arg_value><arg_key>city</arg_key><arg_value>Q</arg_value></tool_call>".to_owned()),
        ("pythonic", "[get_weather(city='P', days=1, city='Q')]".to_owned()),
    ];
    for (fam, text) in &cases {
        let f = super::super::format_by_name(fam).unwrap();
        let out = f.parse(text, &tools);
        assert!(
            out.tool_calls.is_empty(),
            "{fam} {text}: {:?}",
            out.tool_calls
        );
        assert_eq!(out.errors.len(), 1, "{fam} {text}");
        assert_eq!(
            out.errors[0].error,
            ToolParseError::Syntax("argument \"city\" given twice".into()),
            "{fam} {text}"
        );
        let content = out.content.as_deref().unwrap_or("");
        assert!(
            content.contains(out.errors[0].text.trim()),
            "{fam}: {content:?}"
        );
        assert!(content.contains('Q'), "{fam}: {content:?}");
        assert_streams_as_whole(f.as_ref(), text, &tools);
    }
}

/// 10k calls back to back (about 1 MB) parse whole in every registered format. Harmony,
/// Kimi K2 and DeepSeek once took about 2 s here (each message searched the rest of the
/// output for markers that were not there); the test does not time itself (a timed
/// assertion failed now and then on a loaded machine), so such a slip shows as a slow test.
#[test]
fn whole_parse_of_many_calls() {
    let tools = vec![crate::test_support::tool_with_properties(
        "get_weather",
        json!({"city": {"type": "string"}}),
    )];
    let calls: Vec<ToolCall> = (0..10_000)
        .map(|i| ToolCall::new("get_weather", json!({"city": format!("Paris{i}")})))
        .collect();
    for name in super::super::format_names() {
        let f = super::super::format_by_name(&name).unwrap();
        let text = f.render_calls(&calls);
        let out = f.parse(&text, &tools);
        assert_eq!(out.tool_calls.len(), calls.len(), "{name}");
        assert!(out.errors.is_empty(), "{name}");
    }
}

#[test]
fn python_json_matches_json_dumps_spacing() {
    let v = json!({"city": "Paris", "days": [1, 2], "x": {"é": null}});
    assert_eq!(
        python_json(&v),
        r#"{"city": "Paris", "days": [1, 2], "x": {"é": null}}"#
    );
}

#[test]
fn reads_one_value_and_reports_incomplete_ones() {
    assert_eq!(
        read_json_value(r#" {"a": "}"} tail"#),
        JsonRead::Complete {
            value: json!({"a": "}"}),
            end: 11
        }
    );
    assert_eq!(read_json_value(r#"{"a": "#), JsonRead::Incomplete);
    assert_eq!(read_json_value("12"), JsonRead::Incomplete);
    // `true` then `x` is invalid: a keyword at the very end is not complete yet.
    assert_eq!(read_json_value("true"), JsonRead::Incomplete);
    assert!(matches!(read_json_value("truex"), JsonRead::Invalid(_)));
    assert!(matches!(
        read_json_value("null "),
        JsonRead::Complete { end: 4, .. }
    ));
    assert!(matches!(read_json_value("}"), JsonRead::Invalid(_)));
    // Deeper than the reader follows: said so, not called invalid JSON.
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    match read_json_value(&deep) {
        JsonRead::Invalid(e) => assert!(e.starts_with("nested deeper than 128 levels"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_numbers_are_clamped_not_fatal() {
    let text = r#"{"a": 87483663E98670, "b": "9e999", "c": -1e400} x"#;
    assert!(matches!(read_json_value_strict(text), JsonRead::Invalid(_)));
    assert_eq!(
        read_json_value(text),
        JsonRead::Complete {
            value: json!({"a": 1e308, "b": "9e999", "c": -1e308}),
            end: text.find('}').unwrap() + 1
        }
    );
}

#[test]
fn a_clamped_number_at_the_end_may_still_continue() {
    // `1e9999` then `9`: still one literal, so not complete (the clamp pads `1e308`
    // with spaces, which used to end the value early).
    assert_eq!(read_json_value("1e9999"), JsonRead::Incomplete);
    assert_eq!(read_json_value("-1e9999"), JsonRead::Incomplete);
    assert!(matches!(
        read_json_value("1e9999 "),
        JsonRead::Complete { end: 6, .. }
    ));
}

#[test]
fn scans_members_before_the_object_closes() {
    let s = scan_object(r#"{"name": "f", "arguments": {"q": "a}"#);
    assert_eq!(s.members.len(), 2);
    assert_eq!(s.members[0].value.as_ref().unwrap().0, json!("f"));
    assert_eq!(s.members[1].value, None);
    assert_eq!(s.members[1].value_start, 27);
    assert_eq!(s.end, None);
    let s = scan_object(r#"{"a": 1, "b": [2]} x"#);
    assert_eq!(s.end, Some(18));
    assert!(scan_object("[1]").error.is_some());
}

#[test]
fn holds_back_partial_markers_and_whitespace() {
    assert_eq!(stable_len("Hi <tool_", &["<tool_call>"], false), 3);
    assert_eq!(stable_len("Hi <tool_", &["<tool_call>"], true), 2);
    assert_eq!(stable_len("Hi <toolx", &["<tool_call>"], true), 9);
}

#[test]
fn python_literals_and_typed_values() {
    assert_eq!(
        python_literal("{'a': [1, 2.5, None], 'b': (True, False)}"),
        Some(json!({"a": [1, 2.5, null], "b": [true, false]}))
    );
    assert_eq!(python_literal("'it\\'s'"), Some(json!("it's")));
    assert_eq!(python_literal("Nonesuch"), None);
    assert_eq!(python_literal("[1, "), None);
    let int = json!({"type": "integer"});
    assert_eq!(typed_xml_value("3", Some(&int), None, true), json!(3));
    assert_eq!(
        typed_xml_value("2026-01-15", Some(&int), None, true),
        json!("2026-01-15")
    );
    assert_eq!(
        typed_xml_value("True", Some(&json!({"type": "boolean"})), None, true),
        json!(true)
    );
    assert_eq!(typed_xml_value("None", Some(&int), None, true), Value::Null);
    assert_eq!(
        typed_xml_value(" 3 ", Some(&json!({"type": "string"})), None, true),
        json!(" 3 ")
    );
    assert_eq!(typed_xml_value("3", None, None, true), json!("3"));
    assert_eq!(typed_xml_value("3", None, None, false), json!(3));
    let arr = json!({"type": "array"});
    assert_eq!(
        typed_xml_value("\"[1, 2]\"", Some(&arr), None, true),
        json!([1, 2])
    );
    assert_eq!(
        typed_xml_value("5.0", Some(&json!({"type": "number"})), None, true),
        json!(5.0)
    );
}

#[test]
fn values_of_schemas_admitting_strings_and_more() {
    let root = json!({"$defs": {"Color": {"type": "string", "enum": ["red", "null"]},
                                "N": {"type": "integer"}}});
    let root = root.as_object();
    let opt = json!({"type": ["string", "null"]});
    let int_or_str = json!({"type": ["integer", "string"], "minimum": 0});
    let any_of = json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
    let color = json!({"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]});
    let num_ref = json!({"oneOf": [{"$ref": "#/$defs/N"}, {"type": "string"}]});
    let t = |raw: &str, schema: &Value| typed_xml_value(raw, Some(schema), root, true);
    // JSON valid under a non-string branch is that value…
    assert_eq!(t("null", &opt), Value::Null);
    assert_eq!(t(" null ", &any_of), Value::Null);
    assert_eq!(t("null", &color), Value::Null);
    assert_eq!(t("42", &int_or_str), json!(42));
    assert_eq!(t("7", &num_ref), json!(7));
    // …anything else is the raw string (Python spellings and quoted JSON included).
    for raw in ["hello", "None", "true", "42", "\"quoted\"", " a b ", "[1]"] {
        assert_eq!(t(raw, &opt), json!(raw), "{raw}");
        assert_eq!(t(raw, &any_of), json!(raw), "{raw}");
    }
    assert_eq!(t("red", &color), json!("red"));
    assert_eq!(t("-1", &int_or_str), json!("-1"));
    assert_eq!(t("4.5", &int_or_str), json!("4.5"));
    assert_eq!(t("true", &int_or_str), json!("true"));
    assert_eq!(t("x", &num_ref), json!("x"));
}

#[test]
fn reasoning_split() {
    assert_eq!(
        split_reasoning(
            "<think>\nhm\n</think>\n\nok",
            "<think>",
            "</think>",
            false,
            true
        ),
        ("hm".to_owned(), Some(19))
    );
    assert_eq!(
        split_reasoning("<think>hm </thi", "<think>", "</think>", false, false),
        ("hm".to_owned(), None)
    );
    assert_eq!(
        split_reasoning("plain", "<think>", "</think>", false, false),
        (String::new(), Some(0))
    );
}

/// A call to a tool that is not offered is never started while streaming (its name is
/// known to be wrong as soon as it is complete) and ends as one malformed call.
#[test]
fn json_object_families_never_start_a_call_to_a_tool_not_offered() {
    let tools = vec![crate::test_support::tool_with_properties(
        "get_time",
        json!({"tz": {"type": "string"}}),
    )];
    let calls = [ToolCall::new("nosuch", json!({"q": 1}))];
    for name in ["hermes", "llama3_json", "json", "pythonic", "mistral"] {
        let f = super::super::format_by_name(name).unwrap();
        let text = f.render_calls(&calls);
        let mut p = super::super::StreamingParser::new(f.as_ref(), &tools);
        let mut events = Vec::new();
        for (i, ch) in text.char_indices() {
            events.extend(p.push(&text[i..i + ch.len_utf8()]));
        }
        events.extend(p.finish());
        let starts = events
            .iter()
            .filter(|e| matches!(e, super::super::StreamEvent::ToolCallStart { .. }))
            .count();
        assert_eq!(starts, 0, "{name}: {events:?}");
        let out = f.parse(&text, &tools);
        assert!(out.tool_calls.is_empty(), "{name}");
        assert_eq!(
            out.errors.iter().map(|e| &e.error).collect::<Vec<_>>(),
            [&ToolParseError::UnknownTool {
                name: "nosuch".into()
            }],
            "{name}"
        );
        assert_streams_as_whole(f.as_ref(), &text, &tools);
    }
}

/// Texts that each family once streamed otherwise than it parses them (markers cut,
/// malformed calls, stray text), each with the tools of its family's tests: streamed at
/// every cut and in every delta size, the events add up to the whole parse.
#[test]
fn hard_texts_of_each_family_stream_as_they_parse() {
    use crate::test_support::{city_weather_and_time, weather_and_time};
    let weather = || weather_and_time()[..1].to_vec();
    let time = || weather_and_time()[1..].to_vec();
    /// A format, the tools it is given, and its texts.
    type Case = (
        Box<dyn crate::ToolCallFormat>,
        Vec<Tool>,
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        // Mistral: a call without a name, malformed with all of its text.
        (
            Box::new(crate::Mistral::default()),
            city_weather_and_time(),
            &[
                "[TOOL_CALLS][ARGS]x",
                "[TOOL_CALLS][ARGS]{\"tz\": \"UTC\"}[TOOL_CALLS]get_time[ARGS]{}",
                "[TOOL_CALLS][CALL_ID]a1B2c3D4e[ARGS]{} more",
                "[TOOL_CALLS][x [TOOL_CALLS]get_time[ARGS]{}",
                "[TOOL_CALLS][{\"name\": ",
            ],
        ),
        // Mistral: the bad text runs to the next `[TOOL_CALLS]` or the end of the output:
        // while streaming, it is held back until then, not reported cut short.
        (
            Box::new(crate::Mistral::default()),
            city_weather_and_time(),
            &[
                "[TOOL_CALLS]{\"name\": \"get_weather\", \"arguments\": ]{\"name\": \"x\"} \n more",
                "[TOOL_CALLS]get_time[ARGS]{\"tz\": ]  x y[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}",
                "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}} x  y z",
                "[TOOL_CALLS][{\"name\": ] \n x[TOOL_CALLS]get_time[ARGS]{}",
            ],
        ),
        // Harmony: stray text in a header is content.
        (
            Box::new(crate::Harmony::default()),
            weather(),
            &[
                "Let me check.<|channel|>final<|message|>It is sunny.<|return|>",
                "<think>x</think><|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
                "Hi <|channel|>commentary to=functions.get_weather json<|message|>{\"city\": Paris}<|call|>",
                "<|start|>assistant x<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>final y<|message|>z",
            ],
        ),
        // json, forced: `1e9999` is clamped to `1e308` padded with spaces; the value used to
        // end there, before the rest of the literal arrived.
        (
            Box::new(crate::JsonArray::default().forced("get_time")),
            weather_and_time(),
            &[
                "1e999991",
                "1e99999 x",
                "{\"tz\": 1e99999}",
            ],
        ),
        // json: a keyword element at the end is not complete yet: `[true` then `x` was
        // reported as a non-call while `truex` is not JSON at all (the whole array is then
        // the error).
        (
            Box::new(crate::JsonArray::default()),
            weather_and_time(),
            &[
                "[truex]",
                "[null, 1]",
                "[false",
            ],
        ),
        // Llama 3 JSON: a complete `<|python_tag|>` at the end of what has arrived may
        // belong to a call that follows: held back, as the whole-output parse drops it.
        (
            Box::new(crate::Llama3Json::default()),
            weather_and_time(),
            &[
                "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}",
                "Hi <|python_tag|> {\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}",
                "Hi <|python_tag|> there<|eot_id|>",
            ],
        ),
        // Granite: arrays, cut and malformed.
        (
            Box::new(crate::Granite::default()),
            time(),
            &[
                "<tool_call>[{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}]",
                " <|tool_call|>[{\"name\": \"get_time\", \"arguments\": {\"tz\": \"]\"}}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"X\"}}] done",
                "Hi <tool_call> not an array <tool_call>[{\"name\": \"nope\", \"arguments\": {}}]",
                "<tool_call>[{\"name\": \"get_time\", \"arguments\": {\"tz\": ",
            ],
        ),
        // Granite 20B FC: a bad call before a good one.
        (
            Box::new(crate::Granite20bFc::default()),
            time(),
            &[
                "<function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n<function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": \"X\"}}",
                "Sure. <function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": }} <function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": \"X\"}} bye",
                "<function_call> {\"name\": \"nope\", \"arguments\": {}}",
            ],
        ),
        // Llama 3: both forms, `<function=…>` and built-in `<|python_tag|>` calls.
        (
            Box::new(crate::Llama3FunctionTag::default()),
            crate::test_support::time_and_search(),
            &[
                "<function=get_time>{\"tz\": \"UTC\"}</function><|eom_id|>",
                "Let me see. <function=get_time>{\"tz\": \"</function>\"}</function> ok<|eot_id|>",
                "<|python_tag|>brave_search.call(query=\"a, b\")<|eom_id|>",
                "<|python_tag|>print(1)<|eom_id|>",
                "<function=nope>{}</function><function=get_time>{\"tz\": \"X\"}",
                "<function=get_time>{\"tz\": 1,}</function>",
            ],
        ),
    ];
    for (format, tools, texts) in cases {
        crate::test_support::assert_each_streams_as_whole(format.as_ref(), texts, &tools);
    }
}
