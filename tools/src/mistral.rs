//! Mistral: `[TOOL_CALLS]` followed by a JSON array (tokenizers before v11) or by
//! `NAME[ARGS]{…}` per call (v11 and later) (section 4.3 of the tool-call format notes;
//! vLLM's `mistral` parser, mistral-common's guidance grammar).
//!
//! ```text
//! [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}]
//! [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "UTC"}
//! ```

use std::sync::LazyLock;

use super::call_array;
use super::driver::{self, Family, Reasoning};
use serde_json::{json, Value};

use super::scan::{self, Content, JsonRead};
use super::tags::{self, Envelope};
use super::{
    FormatOptions, PartialCall, PartialOutput, Tool, ToolCall, ToolCallFormat, ToolParseError,
};
use tokensieve::Vocabulary;

/// Starts the calls (a control token in every Mistral vocabulary).
pub const TOOL_CALLS: &str = "[TOOL_CALLS]";
/// Ends a v11+ call's name, starts its arguments.
pub const ARGS: &str = "[ARGS]";
/// v11 only: a call id between the name and `[ARGS]`.
pub const CALL_ID: &str = "[CALL_ID]";
const THINK: &str = "[THINK]";
const THINK_END: &str = "[/THINK]";
/// The pattern of a Mistral tool-call id: exactly 9 ASCII letters or digits.
const ID_PATTERN: &str = "[A-Za-z0-9]{9}";

/// Which of the two Mistral call shapes the grammar and the renderer write (the parser
/// reads both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MistralSyntax {
    /// Tokenizers v2–v7 (Mistral 7B v0.3, Mixtral 8x22B, Nemo, Small 2409): one
    /// `[TOOL_CALLS]` and a JSON array of `{"name", "arguments", "id"?}` objects.
    Array,
    /// Tokenizers v11+ (Mistral Small 3.x, Magistral, Devstral): `[TOOL_CALLS]NAME[ARGS]{…}`
    /// per call, back to back.
    NameArgs,
}

/// The Mistral format (`mistral`).
///
/// * Grammar: content, then the calls, then the end of the turn (mistral-common's
///   `auto`/`required` modes: content may precede calls; a named choice is the one call
///   only). [`MistralSyntax::Array`]: `[TOOL_CALLS][{"name": "NAME", "arguments": ARGS}]`,
///   elements joined by `, `, each with an optional 9-character `"id"`;
///   [`MistralSyntax::NameArgs`]: `[TOOL_CALLS]NAME[ARGS]ARGS` per call with nothing
///   between calls. `[TOOL_CALLS]` and `[ARGS]` are matched as tokens where the vocabulary
///   has them ([`Mistral::for_vocabulary`] picks the syntax the way vLLM does: `[ARGS]` in
///   the vocabulary means v11+). With [`FormatOptions::reasoning`] (Magistral), a
///   `[THINK]…[/THINK]` block comes first.
/// * Parser: both shapes, whatever the option: after `[TOOL_CALLS]` (and optional
///   spaces), `[` starts an array, anything else a name (`[ARGS]` or `[CALL_ID]` right
///   there is a call without a name: malformed, reported with its text). Array elements are read one by
///   one (`arguments` or `parameters`, either key order, the `id` kept); a bad element
///   (one repeating `name`, its arguments member or an argument included) is reported and the others
///   kept. v11+: the name runs to `[ARGS]` (or `[CALL_ID]`, whose
///   id is kept, or a `{` when `[ARGS]` was lost); exactly one JSON value is read after
///   it, so several calls or trailing prose never corrupt the arguments. Text after the
///   calls stays in content. A malformed run (bad JSON, a missing `[ARGS]`) spans to the
///   next `[TOOL_CALLS]` or the end; while streaming it is reported once that is known.
#[derive(Clone, Debug)]
pub struct Mistral {
    syntax: MistralSyntax,
    options: FormatOptions,
}

impl Default for Mistral {
    /// The v11+ syntax (current Mistral models), default options.
    fn default() -> Self {
        Self::new(MistralSyntax::NameArgs, FormatOptions::default())
    }
}

impl Mistral {
    /// The format writing `syntax`, with `options`.
    pub fn new(syntax: MistralSyntax, options: FormatOptions) -> Self {
        Self { syntax, options }
    }

    /// The pre-v11 array syntax, default options.
    pub fn array() -> Self {
        Self::new(MistralSyntax::Array, FormatOptions::default())
    }

    /// The v11+ syntax, default options.
    pub fn name_args() -> Self {
        Self::new(MistralSyntax::NameArgs, FormatOptions::default())
    }

    /// The syntax a model with `vocab` writes: v11+ when `[ARGS]` is one of its special
    /// tokens (vLLM's test), else the array.
    pub fn for_vocabulary(vocab: &Vocabulary, options: FormatOptions) -> Self {
        let syntax = if vocab.special_token_id(ARGS).is_some() {
            MistralSyntax::NameArgs
        } else {
            MistralSyntax::Array
        };
        Self::new(syntax, options)
    }

    /// The syntax written.
    pub fn syntax(&self) -> MistralSyntax {
        self.syntax
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    fn envelope(&self) -> Envelope {
        let (separator, section) = match self.syntax {
            MistralSyntax::Array => (", ".into(), Some((format!("{TOOL_CALLS}["), "]".into()))),
            MistralSyntax::NameArgs => (String::new(), None),
        };
        Envelope {
            trigger: TOOL_CALLS.into(),
            separator,
            section,
            leading_text_in_required: true,
            reasoning: Some((THINK.into(), THINK_END.into(), String::new())),
            excludes: vec![ARGS.into(), CALL_ID.into(), THINK.into(), THINK_END.into()],
            markers: Vec::new(),
        }
    }
}

/// `id` when it is a valid Mistral id (9 ASCII letters or digits).
/// The Mistral family: calls begin at `[TOOL_CALLS]`, after a `[THINK]` block.
static FAMILY: LazyLock<Family> = LazyLock::new(|| {
    Family::new(
        &[TOOL_CALLS],
        Reasoning {
            begin: THINK,
            end: THINK_END,
        },
    )
});

fn mistral_id(id: Option<&str>) -> Option<&str> {
    id.filter(|s| s.len() == 9 && s.bytes().all(|b| b.is_ascii_alphanumeric()))
}

impl ToolCallFormat for Mistral {
    format_name!("mistral");

    structural_tag_from_envelope!(|f, options, t| {
        let syntax = f.syntax;
        let name = serde_json::to_string(&t.name).unwrap_or_default();
        Ok(match syntax {
            MistralSyntax::Array => json!({"type": "tag",
                    "begin": format!("{{\"name\": {name}, \"arguments\": "),
                    "content": {"type": "sequence", "elements": [
                        tags::json_arguments(t, options),
                        {"type": "optional", "content": {"type": "regex",
                            "pattern": format!(", \"id\": \"{ID_PATTERN}\"")}}]},
                    "end": "}"}),
            MistralSyntax::NameArgs => json!({"type": "tag",
                    "begin": format!("{TOOL_CALLS}{}{ARGS}", t.name),
                    "content": tags::json_arguments(t, options), "end": ""}),
        })
    });

    parse_with_driver!(own: parse_turn);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        match self.syntax {
            MistralSyntax::Array => {
                let items: Vec<String> = calls
                    .iter()
                    .map(|c| {
                        let name = serde_json::to_string(&c.name).unwrap_or_default();
                        let id = mistral_id(c.id.as_deref())
                            .map(|id| format!(", \"id\": \"{id}\""))
                            .unwrap_or_default();
                        format!(
                            "{{\"name\": {name}, \"arguments\": {}{id}}}",
                            scan::python_json(&c.arguments)
                        )
                    })
                    .collect();
                format!("{TOOL_CALLS}[{}]", items.join(", "))
            }
            MistralSyntax::NameArgs => calls
                .iter()
                .map(|c| {
                    format!(
                        "{TOOL_CALLS}{}{ARGS}{}",
                        c.name,
                        scan::python_json(&c.arguments)
                    )
                })
                .collect(),
        }
    }

    fn render_tool_result(&self, call: &ToolCall, result: &Value) -> String {
        match self.syntax {
            MistralSyntax::Array => {
                let mut body = json!({"content": result});
                if let Some(id) = mistral_id(call.id.as_deref()) {
                    body["call_id"] = Value::String(id.to_owned());
                }
                format!("[TOOL_RESULTS]{}[/TOOL_RESULTS]", scan::python_json(&body))
            }
            MistralSyntax::NameArgs => {
                let body = scan::result_text(result);
                format!("[TOOL_RESULTS]{body}[/TOOL_RESULTS]")
            }
        }
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let list: Vec<Value> = tools
            .iter()
            .map(|t| {
                let mut v = t.to_openai();
                if let Some(f) = v.get_mut("function").and_then(Value::as_object_mut) {
                    f.remove("strict");
                }
                v
            })
            .collect();
        format!(
            "[AVAILABLE_TOOLS]{}[/AVAILABLE_TOOLS]",
            scan::python_json(&Value::Array(list))
        )
    }
}

impl Mistral {
    /// The parse behind [`ToolCallFormat::parse_partial_from`].
    fn parse_turn(&self, parse: driver::Parse<'_>) -> PartialOutput {
        let (text, from, tools, at_end) = (parse.text, parse.from, parse.tools, parse.at_end);
        let reasoning = self.options.reasoning;
        // Settled between the elements of a call array that has a call: the rest of it.
        let resume = |turn: &mut driver::Turn<'_>, pos: usize| {
            call_array::resume_array(turn, from, pos, tools, &FAMILY.begins)
        };
        FAMILY.drive_resumed(text, from, reasoning, at_end, resume, |turn, start, _| {
            let (out, content) = (&mut turn.out, &mut turn.content);
            let after = start + TOOL_CALLS.len();
            let ws = text[after..].len() - text[after..].trim_start().len();
            let body = after + ws;
            if body == text.len() {
                if at_end {
                    let error = ToolParseError::Unterminated;
                    scan::push_malformed(out, content, &text[start..], start, error);
                }
                return None;
            }
            // `[` starts an array, unless it is a v11+ marker (`[TOOL_CALLS][ARGS]`: a
            // call without a name).
            let b = &text[body..];
            if b.starts_with('[') && !b.starts_with(ARGS) && !b.starts_with(CALL_ID) {
                let array = call_array::Array {
                    start,
                    resume: None,
                };
                call_array::read_array(turn, array, body, tools, &FAMILY.begins)
            } else {
                read_name_args(text, start, body, tools, at_end, out, content)
            }
        })
    }
}

/// Reads one v11+ call `NAME[ARGS]{…}` (or `NAME[CALL_ID]ID[ARGS]{…}`) at `text[body..]`.
/// Returns where free text resumes, or `None` when the text ends inside the call.
fn read_name_args(
    text: &str,
    start: usize,
    body: usize,
    tools: &[Tool],
    at_end: bool,
    out: &mut PartialOutput,
    content: &mut Content,
) -> Option<usize> {
    let rest = &text[body..];
    let limit = rest.find(TOOL_CALLS).unwrap_or(rest.len());
    let header_end = [ARGS, CALL_ID, "{"]
        .iter()
        .filter_map(|m| rest[..limit].find(m).map(|k| (k, *m)))
        .min();
    let Some((k, what)) = header_end else {
        if limit < rest.len() || at_end {
            let end = body + limit;
            // The output ending in what may still be the name (`[TOOL_CALLS]sea`) is a
            // call cut off; text with spaces, or followed by another call, is not a name.
            let cut = limit == rest.len() && !rest.trim().contains(char::is_whitespace);
            let error = if cut {
                ToolParseError::Unterminated
            } else {
                ToolParseError::Syntax(format!("expected {ARGS} after the call's name"))
            };
            scan::push_malformed(out, content, text[start..end].trim_end(), start, error);
            return if limit < rest.len() { Some(end) } else { None };
        }
        return None;
    };
    let name = rest[..k].trim();
    let mut id = None;
    let mut args_start = match what {
        "{" => k,
        _ => k + what.len(),
    };
    if what == CALL_ID {
        let Some(a) = rest[args_start..limit].find(ARGS) else {
            if at_end || limit < rest.len() {
                let end = body + limit;
                let error = if limit == rest.len() {
                    ToolParseError::Unterminated
                } else {
                    ToolParseError::Syntax(format!("expected {ARGS} after the call id"))
                };
                scan::push_malformed(out, content, text[start..end].trim_end(), start, error);
                return if limit < rest.len() { Some(end) } else { None };
            }
            return None;
        };
        id = Some(rest[args_start..args_start + a].trim().to_owned());
        args_start += a + ARGS.len();
    }
    let name_ok = scan::check_call_name(name, tools);
    let a = &rest[args_start..];
    match scan::read_json_value(a) {
        JsonRead::Complete { value, end } => {
            let call_end = body + args_start + end;
            let checked = name_ok
                .and_then(|()| scan::arguments_object(&value))
                .and_then(|v| scan::check_argument_keys(&a[..end]).map(|()| v));
            match checked {
                Ok(arguments) => {
                    let call = ToolCall {
                        id,
                        name: name.to_owned(),
                        arguments,
                    };
                    out.calls.push(PartialCall {
                        id: call.id.clone(),
                        name: Some(call.name.clone()),
                        arguments_text: a[..end].trim().to_owned(),
                        complete: Some(call),
                    });
                }
                Err(error) => {
                    scan::push_malformed(out, content, &text[start..call_end], start, error)
                }
            }
            Some(call_end)
        }
        JsonRead::Incomplete => {
            if at_end {
                let error = ToolParseError::Unterminated;
                scan::push_malformed(out, content, &text[start..], start, error);
            } else {
                out.calls.push(PartialCall {
                    id: name_ok.is_ok().then(|| id.clone()).flatten(),
                    name: name_ok.is_ok().then(|| name.to_owned()),
                    arguments_text: a.trim().to_owned(),
                    complete: None,
                });
            }
            None
        }
        JsonRead::Invalid(e) => {
            let error = name_ok.err().unwrap_or(ToolParseError::InvalidJson(e));
            call_array::push_bad_run(
                text,
                start,
                body,
                error,
                at_end,
                out,
                content,
                &FAMILY.begins,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_calls, calls};
    use crate::StreamEvent;

    use crate::test_support::city_weather_and_time as tools;

    const WORKED: &str = "Checking both.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": \"Europe/Paris\"}";

    fn worked_calls() -> Vec<ToolCall> {
        calls(&[
            ("get_weather", json!({"city": "Paris"})),
            ("get_time", json!({"tz": "Europe/Paris"})),
        ])
    }

    #[test]
    fn parses_the_worked_example_in_both_shapes() {
        for f in [Mistral::name_args(), Mistral::array()] {
            let out = f.parse(WORKED, &tools());
            assert_eq!(out.content.as_deref(), Some("Checking both."));
            assert_eq!(out.tool_calls, worked_calls());
            assert!(out.errors.is_empty());
        }
        let array = "Checking both.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1B2c3D4e\"}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}]";
        let out = Mistral::name_args().parse(array, &tools());
        assert_eq!(out.content.as_deref(), Some("Checking both."));
        assert_eq!(out.tool_calls[0].id.as_deref(), Some("a1B2c3D4e"));
        assert_eq!(
            tools_names_args(&out.tool_calls),
            tools_names_args(&worked_calls())
        );
    }

    fn tools_names_args(c: &[ToolCall]) -> Vec<(String, Value)> {
        c.iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect()
    }

    #[test]
    fn render_then_parse_both_shapes() {
        let calls = vec![
            crate::test_support::call_with_id(
                "abcDEF123",
                "get_time",
                json!({"tz": "[TOOL_CALLS]x[ARGS]{}"}),
            ),
            ToolCall::new("get_weather", json!({"city": "] }"})),
        ];
        let f = Mistral::array();
        let out = f.parse(&f.render_calls(&calls), &tools());
        assert_eq!(out.tool_calls, calls);
        let f = Mistral::name_args();
        let out = f.parse(&f.render_calls(&calls), &tools());
        assert_eq!(tools_names_args(&out.tool_calls), tools_names_args(&calls));
    }

    #[test]
    fn call_id_and_trailing_text() {
        let out = Mistral::default().parse(
            "[TOOL_CALLS]get_time[CALL_ID]a1B2c3D4e[ARGS]{\"tz\": \"UTC\"} and more",
            &tools(),
        );
        assert_eq!(out.tool_calls[0].id.as_deref(), Some("a1B2c3D4e"));
        assert_eq!(out.content.as_deref(), Some("and more"));
    }

    #[test]
    fn errors_keep_text() {
        let f = Mistral::default();
        let out = f.parse("[TOOL_CALLS]nope[ARGS]{}", &tools());
        assert_eq!(
            out.errors[0].error,
            crate::test_support::unknown_tool("nope")
        );
        assert_eq!(out.content.as_deref(), Some("[TOOL_CALLS]nope[ARGS]{}"));
        let out = f.parse("[TOOL_CALLS]get_time[ARGS]{\"tz\": ]", &tools());
        crate::test_support::assert_invalid_json_and_no_calls(&out);
    }

    #[test]
    fn a_call_without_a_name_is_malformed_with_its_text() {
        // `[TOOL_CALLS][ARGS]` was read as the start of a JSON array and lost its marker
        // text: it is a v11+ call with an empty name, reported with all of its text.
        let (f, ts) = (Mistral::default(), tools());
        let out = f.parse("[TOOL_CALLS][ARGS]x", &ts);
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].text, "[TOOL_CALLS][ARGS]x");
        assert_eq!(out.errors[0].offset, 0);
        assert_eq!(
            out.errors[0].error,
            ToolParseError::InvalidName { name: "".into() }
        );
        assert_eq!(out.content.as_deref(), Some("[TOOL_CALLS][ARGS]x"));
        let out = f.parse("Hi [TOOL_CALLS][ARGS]{\"tz\": \"UTC\"}", &ts);
        assert_eq!(out.errors[0].text, "[TOOL_CALLS][ARGS]{\"tz\": \"UTC\"}");
        assert_eq!(out.errors[0].offset, 3);
        assert_eq!(
            out.content.as_deref(),
            Some("Hi\n[TOOL_CALLS][ARGS]{\"tz\": \"UTC\"}")
        );
        // An array whose first element is not JSON keeps `[TOOL_CALLS][` in its error.
        let out = f.parse("[TOOL_CALLS][x", &ts);
        assert_eq!(out.errors[0].text, "[TOOL_CALLS][x");
        assert_eq!(out.content.as_deref(), Some("[TOOL_CALLS][x"));
        let out = f.parse("[TOOL_CALLS][{\"name\": ", &ts);
        assert_eq!(out.errors[0].text, "[TOOL_CALLS][{\"name\": ");
    }

    #[test]
    fn streaming_agrees_and_holds_partial_marker() {
        let f = Mistral::default();
        let ts = tools();
        let cut = "Checking both.[TOOL_CA".len();
        let (first, all) = crate::test_support::stream_cut_at(&f, &ts, WORKED, cut);
        assert_eq!(first, [StreamEvent::Content("Checking both.".into())]);
        assert_eq!(crate::test_support::ended_calls(&all), worked_calls());
    }

    #[test]
    fn a_malformed_run_is_reported_once_its_end_is_known() {
        // The bad text runs to the next `[TOOL_CALLS]` or the end of the output: while
        // streaming, it is held back until then, not reported cut short.
        let f = Mistral::default();
        let ts = tools();
        let out = f.parse("[TOOL_CALLS]get_time[ARGS]{\"tz\": ] x \n", &ts);
        assert_eq!(out.errors[0].text, "[TOOL_CALLS]get_time[ARGS]{\"tz\": ] x");
    }

    #[test]
    fn output_ending_in_a_call_header_is_unterminated() {
        let f = Mistral::default();
        let ts = tools();
        for text in ["[TOOL_CALLS]sea", "[TOOL_CALLS]get_time[CALL_ID]ab12"] {
            let out = f.parse(text, &ts);
            assert_eq!(out.errors.len(), 1, "{text}: {out:?}");
            assert_eq!(out.errors[0].error, ToolParseError::Unterminated, "{text}");
            assert_eq!(out.content.as_deref(), Some(text));
            crate::test_support::assert_streams_as_whole(&f, text, &ts);
        }
        let out = f.parse("[TOOL_CALLS]no call here", &ts);
        assert!(matches!(out.errors[0].error, ToolParseError::Syntax(_)));
    }

    #[test]
    fn a_repeated_arguments_member_makes_an_element_malformed() {
        // The streamed element showed its first arguments (and the final one its
        // first); JSON would keep the last.
        let (f, ts) = (Mistral::default(), tools());
        let text = "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}, \"arguments\": {\"tz\": \"X\"}}]";
        let out = f.parse(text, &ts);
        assert!(out.tool_calls.is_empty());
        assert!(matches!(out.errors[0].error, ToolParseError::Syntax(_)));
        crate::test_support::assert_streams_as_whole(&f, text, &ts);
    }

    #[test]
    fn calls_inside_reasoning_are_not_calls() {
        let f = Mistral::new(
            MistralSyntax::NameArgs,
            crate::test_support::with_reasoning(),
        );
        let out = f.parse(
            "[THINK]maybe [TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}[/THINK]no call",
            &tools(),
        );
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.content.as_deref(), Some("no call"));
    }

    #[test]
    fn an_array_whose_elements_are_all_malformed_stays_content_whole() {
        let ts = tools();
        let f = Mistral::array();
        for (text, content) in [
            (
                "[TOOL_CALLS][{\"name\":\"nosuch\",\"arguments\":{}}]",
                "[TOOL_CALLS][{\"name\":\"nosuch\",\"arguments\":{}}]",
            ),
            (
                "Hi [TOOL_CALLS][{\"name\":\"nosuch\",\"arguments\":{}}, {\"name\": \"x\"}] bye",
                "Hi\n[TOOL_CALLS][{\"name\":\"nosuch\",\"arguments\":{}}, {\"name\": \"x\"}]\nbye",
            ),
        ] {
            let out = f.parse(text, &ts);
            assert!(out.tool_calls.is_empty(), "{text}");
            // Content pieces are trimmed and joined by `\n`, as everywhere.
            assert_eq!(out.content.as_deref(), Some(content), "{text}");
            assert_eq!(
                out.errors[0].error,
                crate::test_support::unknown_tool("nosuch")
            );
            assert_eq!(out.errors[0].text, "{\"name\":\"nosuch\",\"arguments\":{}}");
            crate::test_support::assert_streams_as_whole(&f, text, &ts);
        }
        // One good element: the bad one's text is content inside the list's brackets (as
        // in the json and pythonic families), `[TOOL_CALLS]` and the separators are not.
        for (text, content) in [
            (
                "[TOOL_CALLS][{\"name\":\"nosuch\",\"arguments\":{}}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}]",
                "[{\"name\":\"nosuch\",\"arguments\":{}}]",
            ),
            (
                "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}, {\"name\":\"nosuch\",\"arguments\":{}}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"X\", \"tz\": \"Y\"}}]",
                "[{\"name\":\"nosuch\",\"arguments\":{}}]\n[{\"name\": \"get_time\", \"arguments\": {\"tz\": \"X\", \"tz\": \"Y\"}}]",
            ),
        ] {
            let out = f.parse(text, &ts);
            assert_calls(&out, &[("get_time", json!({"tz": "UTC"}))]);
            assert_eq!(out.content.as_deref(), Some(content), "{text}");
            crate::test_support::assert_streams_as_whole(&f, text, &ts);
        }
    }
}
