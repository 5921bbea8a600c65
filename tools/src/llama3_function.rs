//! Llama 3.1's two other tool-call forms: custom tools as `<function=NAME>{…}</function>`
//! (Meta's `function_tag` prompt format, the system prompt of vLLM's
//! `tool_chat_template_llama3.1_usr_def_tool_call.jinja`) and the built-in tools as
//! `<|python_tag|>NAME.call(query="…")` (Meta's Llama 3.1 prompt format). vLLM has no
//! parser for either (its `llama3_json` reads the JSON form, see [`super::Llama3Json`]);
//! the spec and its sources are in `docs/tool-call-formats-extra.md`.
//!
//! ```text
//! <function=get_weather>{"city": "Paris"}</function><|eom_id|>
//! <|python_tag|>brave_search.call(query="weather in Paris")<|eom_id|>
//! ```

use std::sync::LazyLock;

use serde_json::{json, Map, Value};

use super::driver::{self, Family, Step};
use super::llama3_json::PYTHON_TAG;
use super::pythonic::reader::{Py, Stop};
use super::scan::{self, JsonRead};
use super::tags::{self, Envelope};
use super::{
    FormatOptions, PartialCall, PartialOutput, Tool, ToolCall, ToolCallFormat, ToolError,
    ToolParseError,
};

/// Begins a custom-tool call; the name runs to the next `>`.
pub const FUNCTION: &str = "<function=";
/// Ends a custom-tool call.
pub const FUNCTION_END: &str = "</function>";
const EOM: &str = "<|eom_id|>";
const EOT: &str = "<|eot_id|>";

/// The built-in tools of Llama 3.1 written as `<|python_tag|>NAME.call(…)` (Meta's list;
/// `code_interpreter` writes raw Python instead and is not a call here).
pub const BUILTIN_TOOLS: [&str; 3] = ["brave_search", "wolfram_alpha", "photogen"];

/// The family: calls begin at `<function=` or `<|python_tag|>`; the end-of-message tokens
/// are markers too, read as nothing (they end the turn, they are not content).
static FAMILY: LazyLock<Family> = LazyLock::new(|| Family::new(&MARKERS, driver::THINK));

/// The family's markers, in [`FAMILY`]'s order.
const MARKERS: [&str; 4] = [FUNCTION, PYTHON_TAG, EOM, EOT];

fn is_builtin(name: &str) -> bool {
    BUILTIN_TOOLS.contains(&name)
}

format_with_options! {
    /// Llama 3.1 custom and built-in tool calls (`llama3_function_tag`; no vLLM parser).
    ///
    /// * Grammar: a call to a built-in tool ([`BUILTIN_TOOLS`]) is
    ///   `<|python_tag|>NAME.call(KEY="VALUE", …)`: its required properties in schema order,
    ///   each a string without `"`, `\` or a newline (how Meta's template writes them; a
    ///   built-in tool with another kind of required property is [`ToolError::Unsupported`]);
    ///   any other call is `<function=NAME>ARGS</function>` with `ARGS` the tool's input
    ///   schema. Parallel calls follow each other with nothing between (the template allows
    ///   one call per turn: parallel off is what it asks for). `required` and named start
    ///   with the call (the prompt asks for the call only); `auto` is free text, then
    ///   optionally the calls; free text never holds `<function=` or `<|python_tag|>`.
    /// * Parser: `<function=NAME>` then one JSON object, then `</function>` (a missing end
    ///   marker is tolerated once the JSON is complete); `<|python_tag|>` then `NAME.call(`
    ///   keyword arguments `)` with Python literal values; `<|eom_id|>` and `<|eot_id|>`
    ///   are dropped; text around calls is content. A name not offered, an argument given
    ///   twice, JSON that does not parse or a `<|python_tag|>` not followed by a call is an
    ///   error, its text kept in content (a bad custom call up to `</function>`, a bad
    ///   built-in call up to the next call or the end).
    pub struct Llama3FunctionTag;
}

/// The grammar of a built-in tool's keyword arguments: its required string properties, in
/// schema order, each `KEY="VALUE"`.
fn builtin_arguments(t: &Tool) -> Result<Value, ToolError> {
    let unsupported = |reason: String| ToolError::Unsupported {
        format: "llama3_function_tag".into(),
        reason: format!("built-in tool {:?}: {reason}", t.name),
    };
    let props = t
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required = t.required_arguments();
    let mut elements = Vec::new();
    for (key, schema) in &props {
        if !required.contains(&key.as_str()) {
            continue;
        }
        if schema.get("type").and_then(Value::as_str) != Some("string") {
            return Err(unsupported(format!(
                "property {key:?} is not a string (built-in calls write string values only)"
            )));
        }
        let sep = if elements.is_empty() { "" } else { ", " };
        elements.push(json!({"type": "const_string", "value": format!("{sep}{key}=\"")}));
        // Raw characters but `"`, `\\` and line breaks, or the escapes `render_calls` writes
        // (each decoded by the reader as one character).
        elements.push(json!({"type": "regex", "pattern": "([^\"\\\\\\n\\r]|\\\\[\"\\\\nrt])*"}));
        elements.push(json!({"type": "const_string", "value": "\""}));
    }
    if elements.is_empty() {
        return Err(unsupported("it has no required string property".into()));
    }
    Ok(json!({"type": "sequence", "elements": elements}))
}

impl ToolCallFormat for Llama3FunctionTag {
    format_name!("llama3_function_tag");

    structural_tag_from_envelope!(|_, options, t| {
        Ok(if is_builtin(&t.name) {
            json!({"type": "tag",
                    "begin": format!("{PYTHON_TAG}{}.call(", t.name),
                    "content": builtin_arguments(t)?,
                    "end": ")"})
        } else {
            json!({"type": "tag",
                    "begin": format!("{FUNCTION}{}>", t.name),
                    "content": tags::json_arguments(t, options),
                    "end": FUNCTION_END})
        })
    });

    parse_with_driver!(own: parse_turn);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        calls
            .iter()
            .map(|c| match (&c.arguments, is_builtin(&c.name)) {
                (Value::Object(args), true) => {
                    let kwargs: Vec<String> = args
                        .iter()
                        .map(|(k, v)| match v {
                            Value::String(s) => format!("{k}=\"{}\"", builtin_string(s)),
                            other => format!("{k}={}", crate::python_literal(other)),
                        })
                        .collect();
                    format!("{PYTHON_TAG}{}.call({})", c.name, kwargs.join(", "))
                }
                _ => format!(
                    "{FUNCTION}{}>{}{FUNCTION_END}",
                    c.name,
                    scan::python_json(&c.arguments)
                ),
            })
            .collect()
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        // The body of the `ipython` turn.
        scan::result_text(result)
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from("You have access to the following functions:\n\n");
        for t in tools.iter().filter(|t| !is_builtin(&t.name)) {
            s.push_str(&format!(
                "Use the function '{}' to: {}\n",
                t.name, t.description
            ));
            s.push_str(&scan::python_json(&t.to_openai()["function"]));
            s.push_str("\n\n");
        }
        s.push_str(
            "To call a function, reply with only the call, on one line, as \
             <function=NAME>{\"argument\": \"value\"}</function>: the function's name, then \
             a JSON object of its arguments. Give every required argument; call one \
             function at a time; when no function fits, answer the user directly.\n",
        );
        let builtin: Vec<&str> = tools
            .iter()
            .filter(|t| is_builtin(&t.name))
            .map(|t| t.name.as_str())
            .collect();
        if !builtin.is_empty() {
            s.push_str(&format!(
                "Built-in tools, called as <|python_tag|>NAME.call(query=\"...\"): {}\n",
                builtin.join(", ")
            ));
        }
        s
    }
}

impl Llama3FunctionTag {
    /// The family's call syntax, for the shared assembler.
    fn envelope(&self) -> Envelope {
        Envelope {
            trigger: FUNCTION.into(),
            excludes: vec![PYTHON_TAG.into(), FUNCTION_END.into()],
            markers: vec![FUNCTION.into(), FUNCTION_END.into()],
            ..Envelope::default()
        }
    }
}

impl Llama3FunctionTag {
    /// The parse behind [`ToolCallFormat::parse_partial_from`].
    fn parse_turn(&self, parse: driver::Parse<'_>) -> PartialOutput {
        let (text, from, tools, at_end) = (parse.text, parse.from, parse.tools, parse.at_end);
        FAMILY.drive(
            text,
            from,
            self.options.reasoning,
            at_end,
            |turn, start, marker| {
                let s = &turn.text[start..];
                let step = match marker {
                    0 => read_function(s, tools, turn.at_end),
                    1 => read_builtin(s, tools, turn.at_end),
                    // `<|eom_id|>` / `<|eot_id|>`: nothing.
                    m => return Some(start + MARKERS[m].len()),
                };
                turn.record(start, step)
            },
        )
    }
}

/// Reads `<function=NAME>{…}</function>` from `s` (which starts with `<function=`).
fn read_function(s: &str, tools: &[Tool], at_end: bool) -> Step {
    let after = FUNCTION.len();
    let Some(gt) = s[after..].find('>') else {
        return if at_end {
            Step::Bad {
                error: ToolParseError::Unterminated,
                len: s.len(),
            }
        } else {
            Step::Held
        };
    };
    let name = &s[after..after + gt];
    let b = after + gt + 1;
    let body = &s[b..];
    let named = scan::check_call_name(name, tools);
    let bad = |error: ToolParseError, from: usize| {
        Step::bad_until(s, b + from, FUNCTION_END, at_end, error, Step::Held)
    };
    match scan::read_json_value(body) {
        JsonRead::Incomplete if at_end => bad(ToolParseError::Unterminated, 0),
        JsonRead::Incomplete => match named {
            // A name not offered is never streamed: the call ends malformed.
            Ok(()) => Step::Pending(PartialCall {
                id: None,
                name: Some(name.to_owned()),
                arguments_text: body.trim_start().to_owned(),
                complete: None,
            }),
            Err(_) => Step::Held,
        },
        JsonRead::Invalid(e) => bad(ToolParseError::InvalidJson(e), 0),
        JsonRead::Complete { value, end } => {
            let checked = named
                .and_then(|()| scan::arguments_object(&value))
                .and_then(|v| scan::check_argument_keys(&body[..end]).map(|()| v));
            let arguments = match checked {
                Ok(v) => v,
                Err(e) => return bad(e, end),
            };
            let call = ToolCall::new(name, arguments);
            let partial = PartialCall {
                id: None,
                name: Some(call.name.clone()),
                arguments_text: body[..end].trim_start().to_owned(),
                complete: None,
            };
            let after_json = &body[end..];
            let ws = after_json.len() - after_json.trim_start().len();
            let tail = &after_json[ws..];
            let done = |len: usize| Step::Done {
                call: PartialCall {
                    complete: Some(call.clone()),
                    ..partial.clone()
                },
                len,
            };
            if tail.starts_with(FUNCTION_END) {
                done(b + end + ws + FUNCTION_END.len())
            } else if tail.is_empty() || FUNCTION_END.starts_with(tail) {
                // The end marker may still come (or was cut off at the end of the output).
                if at_end {
                    done(s.len())
                } else {
                    Step::Pending(partial)
                }
            } else {
                // The end marker is missing: the call ends with its JSON.
                done(b + end)
            }
        }
    }
}

/// A built-in call's string argument as written between its double quotes: Python's
/// escapes for `"`, `\\`, line feed, carriage return and tab (the only escapes its tag
/// admits), every other character raw.
fn builtin_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match BUILTIN_ESCAPES.iter().find(|&&(raw, _)| raw == c) {
            Some((_, escaped)) => out.push_str(escaped),
            None => out.push(c),
        }
    }
    out
}

/// The escapes of [`builtin_string`], by the character each stands for.
const BUILTIN_ESCAPES: [(char, &str); 5] = [
    ('"', "\\\""),
    ('\\', "\\\\"),
    ('\n', "\\n"),
    ('\r', "\\r"),
    ('\t', "\\t"),
];

/// Reads `<|python_tag|>NAME.call(KEY=VALUE, …)` from `s` (which starts with
/// `<|python_tag|>`).
fn read_builtin(s: &str, tools: &[Tool], at_end: bool) -> Step {
    let bad = |error: ToolParseError| {
        // A bad built-in call runs to the next call or the end of the output.
        let rest = &s[PYTHON_TAG.len()..];
        match FAMILY.begins.find(rest) {
            Some((k, _)) => Step::Bad {
                error,
                len: s[..PYTHON_TAG.len() + k].trim_end().len(),
            },
            None if at_end => Step::Bad {
                error,
                len: s.trim_end().len(),
            },
            None => Step::Held,
        }
    };
    let mut r = Py::new(s, PYTHON_TAG.len());
    r.ws();
    let read = (|| -> Result<(String, Map<String, Value>), Stop> {
        let dotted = r.dotted()?;
        r.ws();
        if r.peek()? != b'(' {
            return Err(Stop::Bad("expected ( after the tool's name".into()));
        }
        let Some(name) = dotted.strip_suffix(".call") else {
            return Err(Stop::Bad(format!(
                "expected NAME.call( after {PYTHON_TAG}, found {dotted:?}"
            )));
        };
        r.i += 1;
        Ok((name.to_owned(), r.kwargs()?))
    })();
    match read {
        Ok((name, args)) => {
            if let Err(e) = scan::check_call_name(&name, tools) {
                return bad(e);
            }
            Step::Done {
                call: PartialCall {
                    id: None,
                    name: Some(name.clone()),
                    arguments_text: scan::python_json(&Value::Object(args.clone())),
                    complete: Some(ToolCall::new(name, Value::Object(args))),
                },
                len: r.i,
            }
        }
        Err(Stop::Eof) if !at_end => Step::Held,
        Err(Stop::Eof) => bad(ToolParseError::Unterminated),
        Err(Stop::Bad(m)) => bad(ToolParseError::Syntax(m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolChoice;
    use tokensieve::GrammarMatcher;

    use crate::test_support::time_and_search as tools;

    #[test]
    fn builtin_code_that_is_not_a_call_is_an_error_kept_in_content() {
        let out = Llama3FunctionTag::default().parse("<|python_tag|>print(1)<|eom_id|>", &tools());
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.content.as_deref(), Some("<|python_tag|>print(1)"));
    }

    #[test]
    fn builtin_string_arguments_round_trip_with_quotes_and_line_breaks() {
        // Issue 23 item 1 (found by a review): `render_calls` wrote built-in string
        // arguments unescaped, so `say "hi"` came out as `query="say "hi""`, which the
        // format's own tag and parser refused. They are written with Python's escapes now,
        // and the tag admits exactly the escapes the reader decodes.
        let (f, ts) = (Llama3FunctionTag::default(), tools());
        let g = crate::test_support::compile_required_on_ascii(&f, &ts);
        let queries = ["say \"hi\"", "a\nb", "back\\slash\r\ttab", "it's", "plain"];
        for call in queries.map(|q| ToolCall::new("brave_search", json!({ "query": q }))) {
            crate::test_support::assert_round_trips(&f, &g, &call, &ts);
        }
        // A raw line break, or an escape the reader would not decode as one character,
        // is not in the tag's language.
        for bad in ["query=\"a\nb\")", "query=\"a\rb\")", "query=\"a\\qb\")"] {
            let mut m = GrammarMatcher::new(g.clone());
            let text = format!("<|python_tag|>brave_search.call({bad}");
            assert!(!m.accept_string(&text), "{text:?}");
        }
    }

    #[test]
    fn a_builtin_tool_with_a_non_string_property_is_unsupported() {
        let ts = Tool::list_from_openai(&json!([{"type": "function", "function": {
            "name": "wolfram_alpha", "parameters": {"type": "object",
            "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]))
        .unwrap();
        let err = Llama3FunctionTag::default()
            .structural_tag(&ts, &ToolChoice::Required, false)
            .unwrap_err();
        assert!(err.to_string().contains("\"n\" is not a string"), "{err}");
    }
}
