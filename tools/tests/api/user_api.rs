//! The tool-calling API a user meets first: tools from OpenAI JSON and from Rust types,
//! `tool_choice` from OpenAI JSON, ToolSet's validate → execute → validate, the format
//! registry and its extension point, and the Hermes parser's documented results on
//! adversarial text.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokensieve::StructuralTag;
use tokensieve_tools::{
    format_by_name, format_names, register_format, stable_len, CallMode, FormatOptions, Hermes,
    PartialOutput, StreamEvent, StreamingParser, Tool, ToolCall, ToolCallFormat, ToolChoice,
    ToolContext, ToolError, ToolParseError, ToolSet,
};

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

/// A user's own format, as the tests below write one: its name, and plain functions for
/// the parse and the renderings the trait asks for. Its structural tag is any text.
struct UserFormat {
    name: &'static str,
    parse_partial: fn(&str, bool) -> PartialOutput,
    render_call: fn(&ToolCall) -> String,
    render_tool_result: fn(&ToolCall, &Value) -> String,
    render_tools_prompt: fn(&[Tool]) -> String,
}

impl ToolCallFormat for UserFormat {
    fn name(&self) -> &str {
        self.name
    }
    fn structural_tag(
        &self,
        _: &[Tool],
        _: &ToolChoice,
        _: bool,
    ) -> Result<StructuralTag, ToolError> {
        StructuralTag::from_json(&json!({"type": "any_text"})).map_err(|e| ToolError::Unsupported {
            format: self.name.into(),
            reason: e.to_string(),
        })
    }
    fn parse_partial(&self, text: &str, _tools: &[Tool], at_end: bool) -> PartialOutput {
        (self.parse_partial)(text, at_end)
    }
    fn render_calls(&self, calls: &[ToolCall]) -> String {
        calls.iter().map(self.render_call).collect()
    }
    fn render_tool_result(&self, call: &ToolCall, result: &Value) -> String {
        (self.render_tool_result)(call, result)
    }
    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        (self.render_tools_prompt)(tools)
    }
}

/// A complete call `name` with the arguments text `args` (`{}` where it is not JSON).
fn complete_call(name: &str, args: &str) -> tokensieve_tools::PartialCall {
    tokensieve_tools::PartialCall {
        id: None,
        name: Some(name.into()),
        arguments_text: args.into(),
        complete: Some(ToolCall::new(
            name,
            serde_json::from_str(args).unwrap_or(json!({})),
        )),
    }
}

/// A user's own format: `CALL name {json}` lines.
const LINE_FORMAT: UserFormat = UserFormat {
    name: "my_lines",
    parse_partial: |text, at_end| {
        let mut out = PartialOutput::default();
        let complete = if at_end {
            text
        } else {
            &text[..text.rfind('\n').map_or(0, |i| i + 1)]
        };
        for line in complete.lines() {
            if let Some(rest) = line.strip_prefix("CALL ") {
                let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
                out.calls.push(complete_call(name, args));
            }
        }
        out
    },
    render_call: |c| format!("CALL {} {}\n", c.name, c.arguments),
    render_tool_result: |call, result| format!("RESULT {} {result}\n", call.name),
    render_tools_prompt: |tools| {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        format!(
            "Call one of {} with a line `CALL name {{json}}`.",
            names.join(", ")
        )
    },
};

#[test]
fn registry_has_hermes_and_takes_user_formats() {
    assert!(format_names().contains(&"hermes".to_owned()));
    assert_eq!(format_by_name("hermes").unwrap().name(), "hermes");
    assert!(format_by_name("no_such_format").is_none());
    register_format("my_lines", |_o: &FormatOptions| {
        Arc::new(LINE_FORMAT) as Arc<dyn ToolCallFormat>
    })
    .unwrap();
    assert!(matches!(
        register_format("my_lines", |_o: &FormatOptions| Arc::new(LINE_FORMAT)
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
    let make = |_o: &FormatOptions| Arc::new(LINE_FORMAT) as Arc<dyn ToolCallFormat>;
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
    let codes: Vec<&Value> = out
        .tool_calls
        .iter()
        .map(|c| &c.arguments["code"])
        .collect();
    assert_eq!(codes, [&json!("print('</tool_call><tool_call>')")]);
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
    let first = &out.errors[0];
    assert!(matches!(first.error, ToolParseError::InvalidJson(_)));
    assert_eq!(first.offset, 0);
    assert_eq!(
        out.tool_calls,
        [ToolCall::new("run_code", json!({"code": "y"}))]
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
    let kinds = crate::events::call_kinds(&ev);
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

use crate::common;

/// A tool whose string parameters carry `pattern`, `format`, `minLength`/`maxLength` and an
/// `enum` under `maxLength`, beside another tool.
fn keyword_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "book",
            "Books a flight",
            json!({"type": "object", "properties": {
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "day": {"type": "string", "format": "date"},
                "note": {"type": "string", "minLength": 1, "maxLength": 5},
                "seat": {"type": "string", "enum": ["aisle", "window", "middle seat"],
                         "maxLength": 6}},
                "required": ["code", "day", "note", "seat"]}),
        )
        .unwrap(),
        Tool::new(
            "ping",
            "",
            json!({"type": "object", "properties": {"host": {"type": "string"}}}),
        )
        .unwrap(),
    ]
}

/// The XML families (raw string values) enforce `minLength`/`maxLength` (characters of
/// the raw text), `pattern` and `format` on a string parameter's raw text, instead of
/// failing to compile the whole tool list.
#[test]
fn xml_families_enforce_string_keywords_on_raw_values() {
    let tools = keyword_tools();
    let compiler = common::byte_compiler();
    let good = json!({"code": "CDG", "day": "2026-12-01", "note": "hi </", "seat": "aisle"});
    let bad = [
        json!({"code": "CDGX", "day": "2026-12-01", "note": "hi", "seat": "aisle"}),
        json!({"code": "CDG", "day": "2026-13-01", "note": "hi", "seat": "aisle"}),
        json!({"code": "CDG", "day": "2026-12-01", "note": "", "seat": "aisle"}),
        json!({"code": "CDG", "day": "2026-12-01", "note": "héllo!", "seat": "aisle"}),
        json!({"code": "CDG", "day": "2026-12-01", "note": "hi", "seat": "middle seat"}),
    ];
    for name in ["qwen3_coder", "glm45", "glm47"] {
        let f = format_by_name(name).expect(name);
        let tag = f
            .structural_tag(&tools, &ToolChoice::Required, false)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let g = compiler
            .compile_structural_tag(&tag)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = f.render_calls(&[ToolCall::new("book", good.clone())]);
        assert!(common::byte_accepts(&g, &text), "{name}: {text}");
        let parsed = f.parse(&text, &tools);
        assert_eq!(parsed.tool_calls.len(), 1, "{name}: {parsed:?}");
        assert_eq!(parsed.tool_calls[0].arguments, good, "{name}");
        let five = json!({"code": "ABC", "day": "2000-02-29", "note": "héllo", "seat": "window"});
        let text = f.render_calls(&[ToolCall::new("book", five)]);
        assert!(common::byte_accepts(&g, &text), "{name}: {text}");
        for b in &bad {
            let text = f.render_calls(&[ToolCall::new("book", b.clone())]);
            assert!(!common::byte_accepts(&g, &text), "{name} accepts {text}");
        }
        let ping = f.render_calls(&[ToolCall::new("ping", json!({"host": "a"}))]);
        assert!(common::byte_accepts(&g, &ping), "{name}: {ping}");
    }
}

/// A string keyword a family cannot express is refused by `structural_tag`, naming the
/// tool, the parameter and the keyword (not by a later compile of the whole tag).
#[test]
fn inexpressible_string_keywords_are_refused_early_with_names() {
    let mut tools = keyword_tools();
    tools.push(
        Tool::new(
            "odd",
            "",
            json!({"type": "object", "properties": {
                "word": {"type": "string", "not": {"const": "x"}}}}),
        )
        .unwrap(),
    );
    for name in ["qwen3_coder", "glm45", "glm47"] {
        let f = format_by_name(name).expect(name);
        match f.structural_tag(&tools, &ToolChoice::Auto, true) {
            Err(ToolError::Unsupported { format, reason }) => {
                assert_eq!(format, name);
                for part in ["\"odd\"", "\"word\"", "`not`"] {
                    assert!(reason.contains(part), "{name}: {reason}");
                }
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let pythonic_tools = vec![Tool::new(
        "odd",
        "",
        json!({"type": "object", "properties": {"word": {"type": "string", "pattern": "^a"}}}),
    )
    .unwrap()
    .with_strict(true)];
    let f = format_by_name("pythonic").expect("pythonic");
    match f.structural_tag(&pythonic_tools, &ToolChoice::Auto, true) {
        Err(ToolError::Unsupported { format, reason }) => {
            assert_eq!(format, "pythonic");
            for part in ["odd", "word", "\"pattern\""] {
                assert!(reason.contains(part), "pythonic: {reason}");
            }
        }
        other => panic!("pythonic: {other:?}"),
    }
}

/// `Tool::new` (and so `from_types`) refuses what `from_openai` refuses: an input schema
/// whose top-level type is not `object`, a non-schema value, and `false` (no call could be
/// made), so no family builds a grammar for arguments its parser would reject.
#[test]
fn tool_new_refuses_non_object_and_false_input_schemas() {
    for schema in [
        json!({"type": "string"}),
        json!({"type": ["object", "null"]}),
        json!(false),
        json!(42),
    ] {
        match Tool::new("f", "", schema.clone()) {
            Err(ToolError::Definition { tool, reason }) => {
                assert_eq!(tool, "f");
                assert!(reason.starts_with("input schema"), "{schema}: {reason}");
            }
            other => panic!("{schema}: {other:?}"),
        }
    }
    assert!(Tool::new("f", "", json!(true)).is_ok());
    assert!(Tool::new("f", "", json!({"properties": {}})).is_ok());
    assert!(Tool::from_types::<String, Out>("f", "").is_err());
    match Tool::from_openai(&json!({"name": "f", "parameters": false})) {
        Err(ToolError::Definition { reason, .. }) => assert!(reason.contains("parameters")),
        other => panic!("{other:?}"),
    }
}

/// A custom format: `<call>NAME ARGS</call>` anywhere in free text. It holds back a
/// partial `<call>` at the end with `stable_len` while the output is arriving, and leaves
/// `settled` `None`, as the trait's docs ask.
const TAG_FORMAT: UserFormat = UserFormat {
    name: "my_tags",
    parse_partial: |text, at_end| {
        let mut out = PartialOutput::default();
        let mut rest = text;
        loop {
            let Some(i) = rest.find("<call>") else {
                let keep = if at_end {
                    rest.len()
                } else {
                    stable_len(rest, &["<call>"], false)
                };
                out.content.push_str(&rest[..keep]);
                return out;
            };
            out.content.push_str(&rest[..i]);
            let body = &rest[i + "<call>".len()..];
            let Some(j) = body.find("</call>") else {
                if at_end {
                    out.content.push_str(&rest[i..]);
                }
                return out;
            };
            let (name, args) = body[..j].split_once(' ').unwrap_or((&body[..j], "{}"));
            out.calls.push(complete_call(name, args));
            rest = &body[j + "</call>".len()..];
        }
    },
    render_call: |c| format!("<call>{} {}</call>", c.name, c.arguments),
    render_tool_result: |_call, result| format!("<result>{result}</result>"),
    render_tools_prompt: |_tools| "Write <call>NAME ARGS</call> to call a tool.".to_owned(),
};

/// A custom format that holds back partial markers with `stable_len` streams, in any
/// chunk sizes, the same content and calls as it parses.
#[test]
fn custom_format_streams_as_it_parses() {
    let f = TAG_FORMAT;
    for text in [
        "Hi <b>x</b> <call>f {\"a\": 1}</call> and <call>g {}</call> bye <cal",
        "<ca<call>f {}</call><",
        "a < b <c <call>h {\"k\": [1]}</call>",
    ] {
        let whole = f.parse(text, &[]);
        for size in 1..=7 {
            let mut p = StreamingParser::new(&f, &[]);
            let mut events = Vec::new();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(size) {
                events.extend(p.push(&chunk.iter().collect::<String>()));
            }
            events.extend(p.finish());
            let mut content = String::new();
            let mut calls = Vec::new();
            for e in events {
                match e {
                    StreamEvent::Content(c) => content.push_str(&c),
                    StreamEvent::ToolCallEnd { call, .. } => calls.push(call),
                    _ => {}
                }
            }
            assert_eq!(Some(content), whole.content, "{text:?} in chunks of {size}");
            assert_eq!(calls, whole.tool_calls, "{text:?} in chunks of {size}");
        }
    }
}

/// As `ToolCallFormat::parse` documents: a `json` array or `pythonic` list cut off before
/// its `]` keeps its complete calls and reports the rest as `Unterminated`.
#[test]
fn lists_cut_before_their_bracket_keep_calls_and_report_unterminated() {
    let tools = vec![Tool::new(
        "f",
        "",
        json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
    )
    .unwrap()];
    for (name, text) in [
        ("json", "[{\"name\": \"f\", \"arguments\": {\"a\": 1}}"),
        ("pythonic", "[f(a=1)"),
    ] {
        let out = format_by_name(name).unwrap().parse(text, &tools);
        assert_eq!(out.tool_calls.len(), 1, "{name}: {out:?}");
        assert_eq!(out.tool_calls[0].arguments, json!({"a": 1}), "{name}");
        assert_eq!(out.errors.len(), 1, "{name}: {out:?}");
        assert_eq!(out.errors[0].error, ToolParseError::Unterminated, "{name}");
    }
}

/// `pythonic` refuses to render a name it cannot write (as its `structural_tag` refuses
/// the tool); `"any"` is read as `required`, as documented.
#[test]
fn pythonic_refuses_unwritable_names_and_any_is_required() {
    let f = tokensieve_tools::Pythonic::default();
    let bad = [ToolCall::new("get-weather", json!({"city": "Paris"}))];
    match f.try_render_calls(&bad) {
        Err(ToolError::Unsupported { format, reason }) => {
            assert_eq!(format, "pythonic");
            assert!(
                reason.contains("get-weather") && reason.contains("'-'"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    let bad_arg = [ToolCall::new("f", json!({"a-b": 1}))];
    assert!(f.try_render_calls(&bad_arg).is_err());
    let good = [ToolCall::new("get_weather", json!({"city": "Paris"}))];
    assert_eq!(
        f.try_render_calls(&good).unwrap(),
        "[get_weather(city='Paris')]"
    );
    assert_eq!(
        ToolChoice::from_openai(&json!("any")).unwrap(),
        ToolChoice::Required
    );
}

/// The README's tool-calling section, verbatim (keep the two in step): OpenAI tools, a
/// family's tag for a tool_choice compiled on o200k_base, parse, stream, execute.
mod readme {
    use serde_json::json;
    use std::error::Error;
    use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
    use tokensieve_tools::{
        Hermes, StreamEvent, StreamingParser, Tool, ToolCallFormat, ToolChoice, ToolContext,
        ToolSet,
    };

    use std::sync::Arc;

    fn tool_calling() -> Result<(), Box<dyn Error>> {
        // Tools from an OpenAI `tools` array (or `Tool::from_types::<In, Out>` through schemars).
        let tools = Tool::list_from_openai(&json!([{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}]))?;
        // The Hermes/Qwen3 family's structural tag for `tool_choice: "required"`, compiled.
        // (`tokensieve_tools::format_by_name("qwen3_coder")` etc. give the other families.)
        let hermes = Hermes::default();
        let choice = ToolChoice::from_openai(&json!("required"))?;
        let tag = hermes.structural_tag(&tools, &choice, true)?;
        let compiler = GrammarCompiler::new(Arc::new(Vocabulary::o200k_base()?));
        let grammar = compiler.compile_structural_tag(&tag)?;
        // Decode under `grammar` with the loop above; here, a finished output.
        let output = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        assert!(GrammarMatcher::new(grammar).accept_string(output));
        // Parse the whole output...
        let parsed = hermes.parse(output, &tools);
        let call = &parsed.tool_calls[0];
        assert_eq!(call.arguments, json!({"city": "Paris"}));
        // ...or stream it as it arrives (a partial `<tool_` is held back until decided).
        let mut stream = StreamingParser::new(&hermes, &tools);
        let mut events = Vec::new();
        for delta in [
            "<tool_",
            "call>\n{\"name\": \"get_weather\", \"arguments\": ",
            "{\"city\": \"Paris\"}}\n</tool_call>",
        ] {
            events.extend(stream.push(delta));
        }
        events.extend(stream.finish());
        assert!(events
            .iter()
            .any(|e| matches!(e, StreamEvent::ToolCallEnd { call: c, .. } if c == call)));
        // Run it: the arguments are validated against the input schema before the function
        // runs, the result against the output schema (if any) after.
        let set = ToolSet::from_tools(tools.into_iter().map(|t| {
            t.with_function(|args, _ctx| Ok(json!({"city": args["city"], "celsius": 21})))
        }))?;
        let result = set.execute(call, &ToolContext::new())?;
        println!("{}", hermes.render_tool_result(call, &result)); // <tool_response>…</tool_response>
        Ok(())
    }

    #[test]
    fn readme_tool_calling_section() {
        tool_calling().unwrap();
    }
}
