//! Unit tests of the pythonic family.

use super::*;
use crate::test_support::{assert_calls, assert_first_args, calls};
use crate::ToolChoice;

fn tools() -> Vec<Tool> {
    Tool::list_from_openai(&json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"},
            "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}
    ]))
    .unwrap()
}

#[test]
fn format_on_a_number_is_ignored() {
    use tokensieve::GrammarMatcher;
    let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {"name": "f",
        "strict": true, "parameters": {"type": "object", "properties": {
            "x": {"type": "integer", "format": "uint8"},
            "y": {"type": "number", "format": "double"}}, "required": ["x"]}}}]))
    .unwrap();
    let f = Pythonic::default();
    let tag = f.structural_tag(&ts, &ToolChoice::Required, false).unwrap();
    let g = crate::test_support::compile_on_ascii(&tag);
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string("[f(x=3)]") && m.is_completed());
    // On a string, `format` still cannot be expressed.
    let s = Tool::list_from_openai(&json!([{"type": "function", "function": {"name": "f",
        "strict": true, "parameters": {"type": "object", "properties": {
            "d": {"type": "string", "format": "date"}}}}}]))
    .unwrap();
    assert!(f.structural_tag(&s, &ToolChoice::Required, false).is_err());
}

#[test]
fn parses_the_worked_example() {
    let text = "[get_weather(city='Paris', unit=\"celsius\"), get_time(tz=\"Europe/Paris\")]";
    let out = Pythonic::default().parse(text, &tools());
    assert_eq!(out.content, None);
    assert!(out.errors.is_empty());
    assert_calls(
        &out,
        &[
            ("get_weather", json!({"city": "Paris", "unit": "celsius"})),
            ("get_time", json!({"tz": "Europe/Paris"})),
        ],
    );
}

#[test]
fn literals_convert_to_json() {
    let text = r#"[get_weather(city='a\'b\n\x41\u00e9', days=-3, unit=None), get_time(tz={'k': [True, false, null, 1.5e3, "x"]})]"#;
    let out = Pythonic::new(FormatOptions::default()).parse(text, &[]);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_first_args(&out, json!({"city": "a'b\nAé", "days": -3, "unit": null}));
    assert_eq!(
        out.tool_calls[1].arguments,
        json!({"tz": {"k": [true, false, null, 1500.0, "x"]}})
    );
}

#[test]
fn render_round_trips() {
    let f = Pythonic::default();
    let calls = calls(&[
        (
            "get_weather",
            json!({"city": "it's \"q\" \\ ] )", "days": 3}),
        ),
        ("get_time", json!({"tz": "東\n"})),
    ]);
    crate::test_support::assert_parses_back(&f, &calls, &tools());
}

#[test]
fn positional_and_unknown_are_errors() {
    let f = Pythonic::default();
    let out = f.parse("[get_weather('Paris')]", &tools());
    assert!(out.tool_calls.is_empty());
    assert!(matches!(out.errors[0].error, ToolParseError::Syntax(_)));
    assert_eq!(out.content.as_deref(), Some("[get_weather('Paris')]"));
    let out = f.parse("[nope(a=1), get_time(tz='UTC')]", &tools());
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!(
        out.errors[0].error,
        crate::test_support::unknown_tool("nope")
    );
    let out = f.parse("[1] is a citation", &tools());
    assert!(out.tool_calls.is_empty() && out.errors.is_empty());
}

#[test]
fn bare_calls_when_asked() {
    let f = Pythonic::default().bare_calls(true);
    let out = f.parse("get_time(tz='UTC'); get_weather(city='Rome');", &tools());
    assert_eq!(out.tool_calls.len(), 2);
    assert_eq!(out.content, None);
    let out = f.parse("Hello there (friend)", &tools());
    assert!(out.tool_calls.is_empty());
    assert_eq!(out.content.as_deref(), Some("Hello there (friend)"));
}

#[test]
fn a_cut_off_call_after_a_complete_one_is_an_error() {
    let ts = crate::test_support::object_tools(&["f", "g"]);
    let f_call = calls(&[("f", json!({"a": 1}))]);
    let cases: [(Pythonic, &str, &str, usize); 5] = [
        (Pythonic::default(), "[f(a=1), g(b=", "g(b=", 9),
        (Pythonic::default(), "[f(a=1), g", "g", 9),
        (Pythonic::default(), "[f(a=1), ", ",", 7),
        (
            Pythonic::default().bare_calls(true),
            "f(a=1), g(b=",
            "g(b=",
            8,
        ),
        (Pythonic::default().bare_calls(true), "f(a=1), g", "g", 8),
    ];
    for (f, text, bad, offset) in cases {
        let out = f.parse(text, &ts);
        assert_eq!(out.tool_calls, f_call, "{text}");
        assert_eq!(out.errors.len(), 1, "{text}: {:?}", out.errors);
        assert_eq!(out.errors[0].text, bad, "{text}");
        assert_eq!(out.errors[0].offset, offset, "{text}");
        assert_eq!(out.errors[0].error, ToolParseError::Unterminated, "{text}");
        assert_eq!(out.content.as_deref(), Some(bad), "{text}");
        crate::test_support::assert_streams_as_whole(&f, text, &ts);
    }
    // Bare calls: a name that is not an offered tool is text, not a cut-off call.
    let f = Pythonic::default().bare_calls(true);
    let out = f.parse("f(a=1), h", &ts);
    assert_eq!(out.tool_calls, f_call);
    assert!(out.errors.is_empty());
    crate::test_support::assert_streams_as_whole(&f, "f(a=1), h", &ts);
}

#[test]
fn integer_bounds_are_grammar_bounds() {
    use tokensieve::GrammarMatcher;
    let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {"name": "f",
        "strict": true, "parameters": {"type": "object", "properties": {
            "n": {"type": "integer", "format": "uint32", "minimum": 0},
            "d": {"type": ["integer", "null"], "minimum": -3, "exclusiveMaximum": 7}},
        "required": ["n"]}}}]))
    .unwrap();
    let f = Pythonic::default();
    let tag = f.structural_tag(&ts, &ToolChoice::Required, false).unwrap();
    let g = crate::test_support::compile_on_ascii(&tag);
    let accepts = |s: &str| {
        let mut m = GrammarMatcher::new(g.clone());
        m.accept_string(s) && m.is_completed()
    };
    for ok in [
        "[f(n=0)]",
        "[f(n=4294967296)]",
        "[f(n=7, d=-3)]",
        "[f(n=7, d=6)]",
        "[f(n=7, d=None)]",
    ] {
        assert!(accepts(ok), "{ok}");
    }
    for bad in ["[f(n=-1)]", "[f(n=7, d=-4)]", "[f(n=7, d=7)]", "[f(n=1.5)]"] {
        assert!(!accepts(bad), "{bad}");
    }
    // Bounds on a number cannot be expressed exactly here: refused, never dropped.
    let num = Tool::list_from_openai(&json!([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {
            "x": {"type": "number", "maximum": 2.5}}}}}]))
    .unwrap();
    match f.structural_tag(&num, &ToolChoice::Required, false) {
        Err(ToolError::Unsupported { reason, .. }) => {
            assert!(reason.contains("maximum"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn from_types_with_an_unsigned_field_builds_a_tag() {
    use tokensieve::GrammarMatcher;
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        count: u32,
    }
    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Out {
        ok: bool,
    }
    let tool = Tool::from_types::<Args, Out>("count_it", "Counts.").unwrap();
    let f = Pythonic::default();
    let tag = f
        .structural_tag(&[tool], &ToolChoice::Required, false)
        .unwrap();
    let g = crate::test_support::compile_on_ascii(&tag);
    let mut m = GrammarMatcher::new(g.clone());
    assert!(m.accept_string("[count_it(count=3)]") && m.is_completed());
    let mut m = GrammarMatcher::new(g);
    assert!(!m.accept_string("[count_it(count=-3)]"));
}

#[test]
fn names_the_syntax_cannot_carry_are_refused_naming_the_character() {
    let tool =
        |name| crate::test_support::tool_with_properties(name, json!({"x": {"type": "integer"}}));
    let f = Pythonic::default();
    for (name, ch) in [
        ("get-weather", '-'),
        ("über", 'ü'),
        ("a..b", '.'),
        ("1st", '1'),
    ] {
        let tag = f.structural_tag(&[tool(name)], &ToolChoice::Required, true);
        let quoted = [format!("{name:?}"), format!("{ch:?}")];
        crate::test_support::assert_unsupported(tag, "pythonic", &[&quoted[0], &quoted[1]]);
    }
    // A dotted name round-trips.
    let ts = vec![tool("a.b")];
    let tag = f.structural_tag(&ts, &ToolChoice::Required, true).unwrap();
    let call = ToolCall::new("a.b", json!({"x": 1}));
    let text = f.render_calls(std::slice::from_ref(&call));
    let mut m = tokensieve::GrammarMatcher::new(crate::test_support::compile_on_ascii(&tag));
    assert!(m.accept_string(&text) && m.is_completed(), "{text}");
    assert_eq!(f.parse(&text, &ts).tool_calls, vec![call]);
}

#[test]
fn extreme_numbers_round_trip_and_fit_the_grammar() {
    use tokensieve::GrammarMatcher;
    let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {"name": "f",
        "strict": true, "parameters": {"type": "object", "properties": {
            "i": {"type": "integer"}, "x": {"type": "number"}}}}}]))
    .unwrap();
    let f = Pythonic::default();
    let tag = f.structural_tag(&ts, &ToolChoice::Required, false).unwrap();
    let g = crate::test_support::compile_on_ascii(&tag);
    let values = [
        (json!(i64::MAX), json!(1.7976931348623157e308)),
        (json!(i64::MIN), json!(5e-324)),
        (json!(u64::MAX), json!(1.2e-100)),
        (json!(0), json!(-1.7976931348623157e308)),
    ];
    for (i, x) in values {
        let calls = calls(&[("f", json!({"i": i, "x": x}))]);
        let text = f.render_calls(&calls);
        assert_eq!(f.parse(&text, &ts).tool_calls, calls, "{text}");
        let mut m = GrammarMatcher::new(g.clone());
        assert!(m.accept_string(&text) && m.is_completed(), "{text}");
    }
    assert_eq!(
        f.render_calls(&[ToolCall::new("f", json!({"i": u64::MAX, "x": 5e-324}))]),
        "[f(i=18446744073709551615, x=5e-324)]"
    );
    // Beyond `f64`: clamped, not an error (the grammar allows 3-digit exponents).
    let out = f.parse("[f(x=89389218700677833022e450, i=-9e999)]", &ts);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_calls(&out, &[("f", json!({"x": 1e308, "i": -1e308}))]);
}
