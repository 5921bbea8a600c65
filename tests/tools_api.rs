//! The tool-calling API a user meets first: tools from OpenAI JSON and from Rust types,
//! `tool_choice` from OpenAI JSON, ToolSet's validate → execute → validate, the format
//! registry and its extension point, and the Hermes parser's documented results on
//! adversarial text.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokensieve::tools::{
    format_by_name, format_names, register_format, CallMode, FormatOptions, Hermes, PartialOutput,
    StreamEvent, StreamingParser, Tool, ToolCall, ToolCallFormat, ToolChoice, ToolContext,
    ToolError, ToolParseError, ToolSet,
};
use tokensieve::StructuralTag;

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Args {
    /// A city.
    city: String,
    #[schemars(range(min = 1, max = 7))]
    days: u8,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Out {
    summary: String,
}

fn weather_set() -> ToolSet {
    let t = Tool::from_types::<Args, Out>("get_weather", "Weather")
        .unwrap()
        .with_meta("destructive", false)
        .with_typed_function(|a: Args, ctx: &ToolContext| {
            let who = ctx.get("user").and_then(Value::as_str).unwrap_or("?");
            if a.city == "Atlantis" {
                return Err("no such city".into());
            }
            Ok(Out {
                summary: format!("{} for {who}: {} days", a.city, a.days),
            })
        });
    let bad_output = Tool::new(
        "broken",
        "returns the wrong shape",
        json!({"type": "object"}),
    )
    .unwrap()
    .with_output_schema(json!({"type": "object", "required": ["ok"]}))
    .with_function(|_, _| Ok(json!({"nope": 1})));
    let no_fn = Tool::new("describe_only", "", json!(true)).unwrap();
    ToolSet::from_tools([t, bad_output, no_fn]).unwrap()
}

#[test]
fn schemars_tool_validates_executes_and_deserialises() {
    let set = weather_set();
    let ctx = ToolContext::new().with("user", "ana");
    let call = ToolCall::new("get_weather", json!({"city": "Oslo", "days": 3}));
    assert_eq!(
        set.execute(&call, &ctx).unwrap(),
        json!({"summary": "Oslo for ana: 3 days"})
    );
    assert_eq!(
        call.arguments_as::<Args>().unwrap(),
        Args {
            city: "Oslo".into(),
            days: 3
        }
    );
    // The static meta is the runtime's; the function never sees it.
    assert_eq!(
        set.get("get_weather").unwrap().meta["destructive"],
        json!(false)
    );

    let bad = ToolCall::new("get_weather", json!({"city": "Oslo", "days": 9}));
    match set.execute(&bad, &ctx) {
        Err(ToolError::InvalidArguments { tool, errors }) => {
            assert_eq!(tool, "get_weather");
            assert!(errors[0].contains("/days"), "{errors:?}");
        }
        other => panic!("{other:?}"),
    }
    let failing = ToolCall::new("get_weather", json!({"city": "Atlantis", "days": 1}));
    assert!(
        matches!(set.execute(&failing, &ctx), Err(ToolError::Execution { message, .. }) if message == "no such city")
    );
    let unknown = ToolCall::new("nope", json!({}));
    assert!(matches!(
        set.execute(&unknown, &ctx),
        Err(ToolError::UnknownTool { .. })
    ));
    let out = ToolCall::new("broken", json!({}));
    assert!(matches!(
        set.execute(&out, &ctx),
        Err(ToolError::InvalidOutput { .. })
    ));
    let nf = ToolCall::new("describe_only", json!({}));
    assert!(matches!(
        set.execute(&nf, &ctx),
        Err(ToolError::NotExecutable { .. })
    ));
    assert!(ToolSet::from_tools([
        Tool::new("a", "", json!(true)).unwrap(),
        Tool::new("a", "", json!(true)).unwrap()
    ])
    .is_err());
}

#[test]
fn openai_tools_and_tool_choice_round_trip() {
    let tools_json = json!([{"type": "function", "function": {"name": "f", "description": "d",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}, "strict": true}}]);
    let tools = Tool::list_from_openai(&tools_json).unwrap();
    assert!(tools[0].strict);
    assert_eq!(
        Tool::list_from_openai(&json!([tools[0].to_openai()])).unwrap(),
        tools
    );
    assert!(Tool::from_openai(&json!({"type": "retrieval"})).is_err());
    assert!(Tool::list_from_openai(&json!({"not": "a list"})).is_err());

    let cases = [
        (json!("none"), ToolChoice::None),
        (json!("auto"), ToolChoice::Auto),
        (json!("required"), ToolChoice::Required),
        (
            json!({"type": "function", "function": {"name": "f"}}),
            ToolChoice::Function("f".into()),
        ),
    ];
    for (j, c) in cases {
        assert_eq!(ToolChoice::from_openai(&j).unwrap(), c);
    }
    let allowed = ToolChoice::from_openai(&json!({"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "f"}}]}}))
    .unwrap();
    let (mode, list) = allowed.resolve(&tools).unwrap();
    assert_eq!((mode, list.len()), (CallMode::Required, 1));
    assert!(ToolChoice::from_openai(&json!("sometimes")).is_err());
    assert!(matches!(
        ToolChoice::Function("g".into()).resolve(&tools),
        Err(ToolError::UnknownTool { .. })
    ));
    assert!(ToolChoice::Required.resolve(&[]).is_err());
    assert_eq!(ToolChoice::Auto.resolve(&[]).unwrap().0, CallMode::None);
}

/// A user's own format: `CALL name {json}` lines.
struct LineFormat;

impl ToolCallFormat for LineFormat {
    fn name(&self) -> &str {
        "my_lines"
    }
    fn structural_tag(
        &self,
        _tools: &[Tool],
        _choice: &ToolChoice,
        _parallel: bool,
    ) -> Result<StructuralTag, ToolError> {
        StructuralTag::from_json(&json!({"type": "any_text"})).map_err(|e| ToolError::Unsupported {
            format: "my_lines".into(),
            reason: e.to_string(),
        })
    }
    fn parse_partial(&self, text: &str, _tools: &[Tool], at_end: bool) -> PartialOutput {
        let mut out = PartialOutput::default();
        let complete = if at_end {
            text
        } else {
            &text[..text.rfind('\n').map_or(0, |i| i + 1)]
        };
        for line in complete.lines() {
            if let Some(rest) = line.strip_prefix("CALL ") {
                let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
                out.calls.push(tokensieve::tools::PartialCall {
                    id: None,
                    name: Some(name.into()),
                    arguments_text: args.into(),
                    complete: Some(ToolCall::new(
                        name,
                        serde_json::from_str(args).unwrap_or(json!({})),
                    )),
                });
            }
        }
        out
    }
    fn render_calls(&self, calls: &[ToolCall]) -> String {
        calls
            .iter()
            .map(|c| format!("CALL {} {}\n", c.name, c.arguments))
            .collect()
    }
    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        result.to_string()
    }
    fn render_tools_prompt(&self, _tools: &[Tool]) -> String {
        String::new()
    }
}

#[test]
fn registry_has_hermes_and_takes_user_formats() {
    assert!(format_names().contains(&"hermes".to_owned()));
    assert_eq!(format_by_name("hermes").unwrap().name(), "hermes");
    assert!(format_by_name("no_such_format").is_none());
    register_format("my_lines", |_o: &FormatOptions| {
        Arc::new(LineFormat) as Arc<dyn ToolCallFormat>
    })
    .unwrap();
    assert!(matches!(
        register_format("my_lines", |_o: &FormatOptions| Arc::new(LineFormat)
            as Arc<dyn ToolCallFormat>),
        Err(ToolError::DuplicateFormat(_))
    ));
    let f = format_by_name("my_lines").unwrap();
    let out = f.parse("CALL f {\"a\": 1}\n", &[]);
    assert_eq!(out.tool_calls, vec![ToolCall::new("f", json!({"a": 1}))]);
    let mut s = f.streaming_parser(&[]);
    let mut ev = s.push("CALL f {} \nCALL g {}");
    ev.extend(s.finish());
    let names: Vec<String> = ev
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallEnd { call, .. } => Some(call.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["f", "g"]);
}

/// The registry refuses the empty name and a name that differs from a registered one
/// only in case (lookup ignores case, so it would shadow or be shadowed); the error says
/// what was wrong and the registry is unchanged.
#[test]
fn registry_rejects_empty_and_case_variant_names() {
    let make = |_o: &FormatOptions| Arc::new(LineFormat) as Arc<dyn ToolCallFormat>;
    let err = register_format("", make).unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidFormatName {
            name: String::new(),
            reason: "a format name must not be empty or only whitespace".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "cannot register a tool-call format named \"\": a format name must not be empty or only whitespace"
    );
    assert!(matches!(
        register_format("  ", make),
        Err(ToolError::InvalidFormatName { .. })
    ));
    let err = register_format("Hermes", make).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot register a tool-call format named \"Hermes\": it differs only in case from \
         the registered \"hermes\" (format names are matched ignoring case)"
    );
    assert!(!format_names().iter().any(|n| n.is_empty() || n == "Hermes"));
    // Lookup ignores case; the registered spelling is kept.
    assert_eq!(format_by_name("HERMES").unwrap().name(), "hermes");
    register_format("My_Case_Lines", make).unwrap();
    assert!(format_names().contains(&"My_Case_Lines".to_owned()));
    assert!(format_by_name("my_case_lines").is_some());
    assert!(matches!(
        register_format("MY_CASE_LINES", make),
        Err(ToolError::InvalidFormatName { .. })
    ));
    assert_eq!(
        register_format("My_Case_Lines", make),
        Err(ToolError::DuplicateFormat("My_Case_Lines".into()))
    );
}

fn hermes_tools() -> Vec<Tool> {
    Tool::list_from_openai(
        &json!([{"type": "function", "function": {"name": "run_code",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
        "required": ["code"]}}}]),
    )
    .unwrap()
}

/// Documented results of the Hermes parser on adversarial text.
#[test]
fn hermes_adversarial_text() {
    let h = Hermes::default();
    let tools = hermes_tools();
    // A marker inside a JSON string argument is text.
    let text = "<tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"print('</tool_call><tool_call>')\"}}\n</tool_call>";
    let out = h.parse(text, &tools);
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!(
        out.tool_calls[0].arguments["code"],
        json!("print('</tool_call><tool_call>')")
    );
    assert_eq!(out.content, None);

    // Inside reasoning: not a call (reasoning on).
    let r = Hermes::new(FormatOptions {
        reasoning: true,
        ..FormatOptions::default()
    });
    let out = r.parse("<think><tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"x\"}}\n</tool_call></think>done", &tools);
    assert!(out.tool_calls.is_empty());
    assert_eq!(out.content.as_deref(), Some("done"));

    // A partial marker at the end of the stream: held back while streaming, content at the end.
    let mut s = StreamingParser::new(&h, &tools);
    assert_eq!(
        s.push("Let me see <tool_c"),
        vec![StreamEvent::Content("Let me see".into())]
    );
    assert_eq!(s.finish(), vec![StreamEvent::Content(" <tool_c".into())]);
    assert_eq!(
        h.parse("Let me see <tool_c", &tools).content.as_deref(),
        Some("Let me see <tool_c")
    );

    // Several whole calls in one delta: all of them.
    let two = h.render_calls(&[
        ToolCall::new("run_code", json!({"code": "a"})),
        ToolCall::new("run_code", json!({"code": "b"})),
    ]);
    let mut s = StreamingParser::new(&h, &tools);
    let mut ev = s.push(&two);
    ev.extend(s.finish());
    let ends = ev
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallEnd { .. }))
        .count();
    assert_eq!(ends, 2);

    // An unknown tool: an error with the text, kept in content.
    let out = h.parse(
        "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
        &tools,
    );
    assert_eq!(
        out.errors[0].error,
        ToolParseError::UnknownTool {
            name: "rm_rf".into()
        }
    );
    assert!(out.content.unwrap().contains("rm_rf"));

    // Invalid JSON arguments: an error; a following good call is still read.
    let out = h.parse(
        "<tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": x}}\n</tool_call>\n<tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"y\"}}\n</tool_call>",
        &tools,
    );
    assert!(matches!(
        out.errors[0].error,
        ToolParseError::InvalidJson(_)
    ));
    assert_eq!(out.errors[0].offset, 0);
    assert_eq!(
        out.tool_calls,
        vec![ToolCall::new("run_code", json!({"code": "y"}))]
    );

    // Hermes 2 Pro order (arguments first), missing end marker at the end, trailing text.
    let out = h.parse(
        "<tool_call>\n{\"arguments\": {\"code\": \"z\"}, \"name\": \"run_code\"}\nThanks!",
        &tools,
    );
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.tool_calls.len(), 1);
    assert_eq!(out.content.as_deref(), Some("Thanks!"));
}

/// A call that started streaming (its name was sent) and then turned out malformed is
/// ended by its `Malformed` event, and the next call takes its index: indices count the
/// calls `parse` returns (the reviewer's finding: the first good call after a malformed
/// one streamed as index 1 while `parse` has it at 0).
#[test]
fn started_then_malformed_call_gives_its_index_to_the_next_call() {
    let h = Hermes::default();
    let tools = hermes_tools();
    let text = "<tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": x}}\n</tool_call>\n<tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"y\"}}\n</tool_call>";
    let mut s = StreamingParser::new(&h, &tools);
    let mut ev = Vec::new();
    for ch in text.chars() {
        ev.extend(s.push(&ch.to_string()));
    }
    ev.extend(s.finish());
    let kinds: Vec<String> = ev
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallStart { index, .. } => Some(format!("start {index}")),
            StreamEvent::ToolCallEnd { index, .. } => Some(format!("end {index}")),
            StreamEvent::Malformed(_) => Some("malformed".to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["start 0", "malformed", "start 0", "end 0"]);
    let whole = h.parse(text, &tools);
    assert_eq!(whole.tool_calls.len(), 1);
    assert_eq!(whole.errors.len(), 1);
}

#[test]
fn a_panicking_tool_is_an_execution_error_and_the_set_stays_usable() {
    let boom = Tool::new("boom", "panics", json!({"type": "object"}))
        .unwrap()
        .with_function(|args, _| {
            if args.get("owned").is_some() {
                panic!("owned {}", "message");
            }
            panic!("static message");
        });
    let fine = Tool::new("fine", "", json!({"type": "object"}))
        .unwrap()
        .with_function(|_, _| Ok(json!("ok")));
    let set = ToolSet::from_tools([boom, fine]).unwrap();
    let ctx = ToolContext::new();
    match set.execute(&ToolCall::new("boom", json!({})), &ctx) {
        Err(ToolError::Execution { tool, message }) => {
            assert_eq!(tool, "boom");
            assert_eq!(message, "the tool panicked: static message");
        }
        other => panic!("{other:?}"),
    }
    match set.execute(&ToolCall::new("boom", json!({"owned": 1})), &ctx) {
        Err(ToolError::Execution { tool, message }) => {
            assert_eq!(tool, "boom");
            assert_eq!(message, "the tool panicked: owned message");
        }
        other => panic!("{other:?}"),
    }
    // The set works after the panics, for the panicking tool's neighbour and the tool itself.
    assert_eq!(
        set.execute(&ToolCall::new("fine", json!({})), &ctx)
            .unwrap(),
        json!("ok")
    );
    assert!(matches!(
        set.execute(&ToolCall::new("boom", json!({})), &ctx),
        Err(ToolError::Execution { .. })
    ));
}

/// The reason of a `ToolError::Definition`, or a panic naming what came instead.
fn definition_reason(r: Result<Vec<Tool>, ToolError>) -> String {
    match r {
        Err(ToolError::Definition { reason, .. }) => reason,
        other => panic!("expected a definition error, got {other:?}"),
    }
}

#[test]
fn from_openai_rejects_mistyped_fields_naming_them() {
    let entry = |f: Value| {
        json!([{"type": "function", "function": {"name": "ok"}},
                                  {"type": "function", "function": {"name": "ok2"}},
                                  {"type": "function", "function": f}])
    };
    let cases = [
        (
            json!({"name": "f", "description": 5}),
            "tools[2].function.description: expected a string, found 5",
        ),
        (
            json!({"name": "f", "strict": "true"}),
            "tools[2].function.strict: expected a boolean, found \"true\"",
        ),
        (
            json!({"name": "f", "parameters": false}),
            "tools[2].function.parameters: expected a JSON Schema object, found false",
        ),
        (
            json!({"name": "f", "parameters": {"type": "string"}}),
            "tools[2].function.parameters.type: expected \"object\", found \"string\"",
        ),
        (
            json!({"name": "f", "title": 1}),
            "tools[2].function.title: expected a string, found 1",
        ),
    ];
    for (f, want) in cases {
        assert_eq!(definition_reason(Tool::list_from_openai(&entry(f))), want);
    }
    assert_eq!(
        definition_reason(Tool::list_from_openai(
            &json!([{"type": 5, "function": {"name": "f"}}])
        )),
        "tools[0].type: expected the string \"function\", found 5"
    );
    // Bare function objects name the field without a prefix.
    match Tool::from_openai(&json!({"name": "f", "description": 5})) {
        Err(ToolError::Definition { tool, reason }) => {
            assert_eq!(tool, "f");
            assert_eq!(reason, "description: expected a string, found 5");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn from_openai_refuses_invalid_schemas_when_built() {
    let reason = definition_reason(Tool::list_from_openai(&json!([{"type": "function",
        "function": {"name": "f", "parameters": {"type": "object",
            "properties": {"x": {"type": "nonsense"}}}}}])));
    assert!(
        reason.starts_with("tools[0].function.parameters: not a valid JSON Schema: "),
        "{reason}"
    );
    let reason = definition_reason(Tool::list_from_openai(&json!([{"type": "function",
        "function": {"name": "f", "output_schema": {"type": "nonsense"}}}])));
    assert!(
        reason.starts_with("tools[0].function.output_schema: not a valid JSON Schema: "),
        "{reason}"
    );
}

#[test]
fn from_openai_null_parameters_mean_none() {
    let absent = Tool::from_openai(&json!({"type": "function", "function": {"name": "f"}}));
    let null = Tool::from_openai(
        &json!({"type": "function", "function": {"name": "f", "parameters": null}}),
    );
    assert_eq!(null.unwrap(), absent.unwrap());
    // A typeless object schema and a bare function object are still accepted.
    assert!(Tool::from_openai(&json!({"name": "g", "parameters": {"properties": {}}})).is_ok());
}
