//! Hermes 2 Pro / Hermes 3 / Qwen2.5 / Qwen3: a JSON object in `<tool_call>` blocks
//! (section 4.1 of the tool-call format notes; vLLM's `hermes` parser, XGrammar's `qwen_3`
//! builtin).
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```

use serde_json::Value;

use std::sync::LazyLock;

use super::driver::{self, Family, Step};
use super::scan::{self, JsonRead};
use super::tags::{self, Envelope};
use super::{FormatOptions, PartialCall, Tool, ToolCall, ToolCallFormat, ToolParseError};

/// The `<tool_call>` block's begin marker. Qwen3-Coder and GLM-4.5 are Hermes with
/// another body in the same block: they take its markers from here.
pub(crate) const BEGIN: &str = "<tool_call>";
/// The block's end marker.
pub(crate) const END: &str = "</tool_call>";

format_with_options! {
    /// The Hermes / Qwen format (`hermes`).
    ///
    /// * Grammar: each call is `<tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>`
    ///   (the Qwen template's exact spacing; `ARGS` follows the tool's input schema), calls
    ///   joined by `\n`; content may precede the first call (also under `required`); with
    ///   [`FormatOptions::reasoning`], a `<think>…</think>\n\n` block comes first. On Qwen
    ///   vocabularies `<tool_call>` is one added (not special) token, so the marker may be
    ///   that token or its spelling.
    /// * Parser: `name` and `arguments` in either order (Hermes 2 Pro history puts
    ///   `arguments` first); `"parameters"` accepted for `"arguments"`; a string holding a
    ///   JSON object accepted as arguments; a repeated `"name"` or arguments member, or an argument given twice, makes
    ///   the call malformed (as in `llama3_json` and `json`); a call is streamed once its name is
    ///   complete and offered (a name not offered is never started); a block whose end marker is missing (at the end,
    ///   or before text or the next block) accepted when its JSON is complete; text between
    ///   and after calls kept in content.
    pub struct Hermes;
}

/// The `<tool_call>` block's envelope: calls joined by `\n`, leading text allowed under
/// `required`, a `<think>` block first. Qwen3-Coder takes it and adds its body's markers.
pub(crate) fn block_envelope() -> Envelope {
    Envelope {
        trigger: BEGIN.into(),
        separator: "\n".into(),
        leading_text_in_required: true,
        reasoning: driver::THINK.written_with("\n\n"),
        excludes: driver::THINK.markers(),
        markers: vec![BEGIN.into(), END.into()],
        ..Envelope::default()
    }
}

impl Hermes {
    fn envelope(&self) -> Envelope {
        block_envelope()
    }
}

impl ToolCallFormat for Hermes {
    json_block_codec!("hermes", HERMES, FAMILY);

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from(
            "# Tools\n\nYou may call one or more functions to help with the request. \
             The functions are listed inside <tools></tools>:\n<tools>",
        );
        for t in tools {
            s.push('\n');
            s.push_str(&scan::python_json(&t.to_openai()));
        }
        s.push_str(
            "\n</tools>\n\nTo call a function, write a JSON object with its name and \
             arguments inside <tool_call></tool_call>:\n<tool_call>\n\
             {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
        );
        s
    }
}

/// The Hermes family: calls begin at `<tool_call>`, after a `<think>` block.
static FAMILY: LazyLock<Family> = LazyLock::new(|| Family::new(&[BEGIN], driver::THINK));

/// A family whose call is one JSON object `{"name", "arguments"}` between a begin and an
/// end marker, as data: Hermes' `<tool_call>`…`</tool_call>`, InternLM2.5's
/// `<|action_start|><|plugin|>`…`<|action_end|>`, granite-20b-fc's `<function_call>` (no
/// end marker: the call ends with its JSON). Its grammar ([`JsonBlock::call_tag`]), reader
/// ([`read_json_block`]) and renderer ([`JsonBlock::render`]) all come from this
/// description (`json_block_codec!` declares the three in a family's impl).
#[derive(Clone, Copy, Debug)]
pub(crate) struct JsonBlock {
    /// The begin marker.
    pub begin: &'static str,
    /// The end marker; empty when the call ends with its JSON.
    pub end: &'static str,
    /// What the grammar and the renderer write between the begin marker and the object.
    pub after_begin: &'static str,
    /// The arguments member the grammar and the renderer write (the reader takes
    /// `"arguments"` and `"parameters"` alike).
    pub key: &'static str,
    /// What they write between the object and the end marker.
    pub before_end: &'static str,
    /// What the renderer writes between two calls.
    pub separator: &'static str,
    /// What the tool turn writes before and after a tool's result
    /// ([`crate::ToolCallFormat::render_tool_result`]).
    pub result: (&'static str, &'static str),
}

impl JsonBlock {
    /// The written begin and end of a call (markers with their spacing).
    fn written(&self) -> (String, String) {
        let open = format!("{}{}", self.begin, self.after_begin);
        (open, format!("{}{}", self.before_end, self.end))
    }

    /// The structural tag of one call to `t` ([`tags::json_call_object`]).
    pub fn call_tag(&self, t: &Tool, options: &FormatOptions) -> Value {
        let (open, close) = self.written();
        tags::json_call_object(t, options, &open, self.key, &close)
    }

    /// `calls` as the family writes them ([`render_json_blocks`]).
    pub fn render(&self, calls: &[ToolCall]) -> String {
        let (open, close) = self.written();
        render_json_blocks(calls, &open, self.key, &close, self.separator)
    }

    /// A tool's result in the family's tool turn.
    pub fn render_result(&self, result: &Value) -> String {
        let (before, after) = self.result;
        format!("{before}{}{after}", scan::result_text(result))
    }
}

/// Hermes' block (the Qwen template's spacing).
const HERMES: JsonBlock = JsonBlock {
    begin: BEGIN,
    end: END,
    after_begin: "\n",
    key: "arguments",
    before_end: "\n",
    separator: "\n",
    result: ("<tool_response>\n", "\n</tool_response>"),
};

/// The calls as the JSON-block families write them: per call
/// `{before}{"name": NAME, "{key}": ARGS}{after}`, joined by `separator`.
pub(crate) fn render_json_blocks(
    calls: &[ToolCall],
    before: &str,
    key: &str,
    after: &str,
    separator: &str,
) -> String {
    calls
        .iter()
        .map(|c| {
            let name = serde_json::to_string(&c.name).unwrap_or_default();
            let args = scan::python_json(&c.arguments);
            format!("{before}{{\"name\": {name}, \"{key}\": {args}}}{after}")
        })
        .collect::<Vec<_>>()
        .join(separator)
}

/// Reads one call of `block`, its JSON body and its end marker, from `s` (which starts
/// with the begin marker).
pub(crate) fn read_json_block(s: &str, block: JsonBlock, tools: &[Tool], at_end: bool) -> Step {
    let JsonBlock {
        begin: open,
        end: close,
        ..
    } = block;
    let b = open.len();
    let body = &s[b..];
    let done = |call: ToolCall, len: usize| Step::Done {
        call: PartialCall {
            id: None,
            name: Some(call.name.clone()),
            arguments_text: scan::arguments_member_text(body, &call),
            complete: Some(call),
        },
        len: b + len,
    };
    // A malformed call runs to the first end marker at or after `from` (markers inside its
    // JSON are not markers), or to the end of the output. Until that end has arrived it is
    // held back: a streamed error is sent once, so its text must be final.
    // Without an end marker, a call whose JSON is complete ends there, and one whose JSON
    // is not runs to the next begin marker (or the end of the output).
    let bad_until_end = |error: ToolParseError, from: usize| match (close.is_empty(), from) {
        (false, _) => Step::bad_until(s, b + from, close, at_end, error, Step::Held),
        (true, 0) => match s[b..].find(open) {
            Some(k) => Step::Bad {
                error,
                len: s[..b + k].trim_end().len(),
            },
            None if at_end => Step::Bad {
                error,
                len: s.len(),
            },
            None => Step::Held,
        },
        (true, _) => Step::Bad {
            error,
            len: b + from,
        },
    };
    match scan::read_json_value(body) {
        JsonRead::Incomplete => {
            if at_end {
                return bad_until_end(ToolParseError::Unterminated, 0);
            }
            Step::Pending(scan::offered_call_parts(body, tools).0)
        }
        JsonRead::Invalid(e) => bad_until_end(ToolParseError::InvalidJson(e), 0),
        JsonRead::Complete { value, end } => {
            // Members as written: a JSON reader keeps the last of a repeated key, while a
            // stream has already shown the first.
            let piece = &body[..end];
            let read =
                scan::check_call_members(piece).and_then(|()| scan::call_from_json(&value, tools));
            let call = match read {
                Ok(c) => c,
                Err(e) => return bad_until_end(e, end),
            };
            let after = &body[end..];
            let ws = after.len() - after.trim_start().len();
            let tail = &after[ws..];
            if tail.starts_with(close) {
                return done(call, end + ws + close.len());
            }
            // A partial end marker, or a partial begin marker of a back-to-back block.
            if tail.is_empty() || close.starts_with(tail) || (!at_end && open.starts_with(tail)) {
                if at_end {
                    // An unclosed last block with complete JSON (vLLM's tolerance); an end
                    // marker cut off at the end of the output is this block's end.
                    return done(call, body.len());
                }
                let mut p = scan::offered_call_parts(body, tools).0;
                p.arguments_text = scan::arguments_member_text(body, &call);
                return Step::Pending(p);
            }
            // The end marker is missing (the next block, or text, follows the JSON): the
            // call is complete, and what follows is read as usual.
            done(call, end + ws)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_calls, calls};
    use crate::StreamEvent;
    use crate::ToolChoice;
    use serde_json::json;

    use crate::test_support::weather_and_time as tools;

    const WORKED: &str = "I'll look up both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>";

    #[test]
    fn parses_the_worked_example() {
        let out = Hermes::default().parse(WORKED, &tools());
        assert_eq!(out.content.as_deref(), Some("I'll look up both."));
        assert_eq!(out.reasoning, None);
        assert_calls(
            &out,
            &[
                ("get_weather", json!({"city": "Paris", "unit": "celsius"})),
                ("get_time", json!({"tz": "Europe/Paris"})),
            ],
        );
        assert!(out.errors.is_empty());
    }

    #[test]
    fn render_then_parse_gives_the_calls_back() {
        let h = Hermes::default();
        let calls = calls(&[
            ("get_time", json!({"tz": "UTC"})),
            ("get_weather", json!({"city": "</tool_call> <tool_call>"})),
        ]);
        crate::test_support::assert_parses_back(&h, &calls, &tools());
    }

    #[test]
    fn streaming_holds_back_partial_markers_and_agrees_with_whole_parse() {
        let h = Hermes::default();
        let ts = tools();
        let mut p = crate::StreamingParser::new(&h, &ts);
        let ev = p.push("I'll look up both.\n<tool_");
        assert_eq!(ev, vec![StreamEvent::Content("I'll look up both.".into())]);
        let mut all = ev;
        for chunk in WORKED.as_bytes()["I'll look up both.\n<tool_".len()..].chunks(7) {
            all.extend(p.push(std::str::from_utf8(chunk).unwrap()));
        }
        all.extend(p.finish());
        let ends = crate::test_support::ended_calls(&all);
        assert_eq!(ends, h.parse(WORKED, &ts).tool_calls);
        let args: String = all
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallArguments { index: 0, delta } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(args, r#"{"city": "Paris", "unit": "celsius"}"#);
    }

    #[test]
    fn malformed_calls_are_reported_and_kept_in_content() {
        let ts = tools();
        let h = Hermes::default();
        let bad = "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>";
        let out = h.parse(bad, &ts);
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.errors.len(), 1);
        assert_eq!(
            out.errors[0].error,
            crate::test_support::unknown_tool("nope")
        );
        assert_eq!(out.content.as_deref(), Some(bad));
        let out = h.parse("<tool_call>\n{\"name\": \"get_time\", \"argu", &ts);
        assert_eq!(out.errors[0].error, ToolParseError::Unterminated);
    }

    #[test]
    fn reasoning_is_split_off_and_calls_inside_it_are_not_calls() {
        let text = "<think>\nmaybe <tool_call>{\"name\": \"get_time\"}</tool_call>\n</think>\n\nok";
        let h = Hermes::new(crate::test_support::with_reasoning());
        let reasoning = crate::test_support::reasoning_without_calls(&h, text, &tools(), "ok");
        assert!(reasoning.starts_with("maybe"));
    }

    #[test]
    fn a_repeated_name_or_arguments_member_is_malformed() {
        let ts = tools();
        let h = Hermes::default();
        let name_twice = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\"}, \"name\": \"get_time\"}\n</tool_call>";
        // `arguments` twice, or `arguments` and `parameters` (its other spelling).
        let arguments_twice = [
            "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"a\"}, \"arguments\": {\"tz\": \"b\"}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"a\"}, \"parameters\": {\"tz\": \"b\"}}\n</tool_call>",
        ];
        let cases = [(name_twice, "the call gives \"name\" more than once")]
            .into_iter()
            .chain(arguments_twice.map(|t| (t, "the call gives its arguments more than once")));
        for (text, msg) in cases {
            let out = h.parse(text, &ts);
            assert!(out.tool_calls.is_empty(), "{text}");
            assert_eq!(out.errors.len(), 1, "{text}");
            assert_eq!(out.errors[0].error, ToolParseError::Syntax(msg.into()));
            assert_eq!(out.errors[0].text, text);
            assert_eq!(out.content.as_deref(), Some(text));
            crate::test_support::assert_streams_as_whole(&h, text, &ts);
        }
    }

    #[test]
    fn a_call_to_a_tool_not_offered_is_never_started() {
        let ts = tools();
        let h = Hermes::default();
        let text = "<tool_call>\n{\"name\": \"nosuch\", \"arguments\": {\"q\": 1}}\n</tool_call>";
        let mut p = crate::StreamingParser::new(&h, &ts);
        let mut events = Vec::new();
        for ch in text.chars() {
            events.extend(p.push(&ch.to_string()));
        }
        events.extend(p.finish());
        assert_eq!(
            events,
            vec![
                StreamEvent::Content(text.into()),
                StreamEvent::Malformed(crate::MalformedToolCall {
                    text: text.into(),
                    offset: 0,
                    error: crate::test_support::unknown_tool("nosuch"),
                }),
            ]
        );
        crate::test_support::assert_streams_as_whole(&h, text, &ts);
    }

    /// Defaults a user expects in a call (issue 23, item 5): no marker of the family inside
    /// an argument string unless asked for, and at most `max_whitespace` (12) whitespace
    /// characters in one place of the arguments.
    #[test]
    fn default_tags_refuse_markers_in_argument_strings_and_a_13th_whitespace() {
        use tokensieve::GrammarMatcher;
        let ts = tools();
        let call = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"";
        // Accepts `prefix`, then reports whether `rest` is accepted after it.
        let accepts = |h: &Hermes, prefix: &str, rest: &str| {
            let tag = h.structural_tag(&ts, &ToolChoice::Auto, true).unwrap();
            let mut m = GrammarMatcher::new(crate::test_support::compile_on_ascii(&tag));
            assert!(m.accept_string(prefix), "{prefix:?}");
            m.accept_string(rest)
        };
        let h = Hermes::default();
        for marker in [BEGIN, END] {
            assert!(!accepts(&h, call, marker), "{marker} inside a string");
            assert!(
                !accepts(&h, &format!("{call}a "), marker),
                "{marker} after text"
            );
            // Escaped, or cut short, it is ordinary text.
            assert!(accepts(&h, call, &format!("\\u003c{}\"}}", &marker[1..])));
            assert!(accepts(
                &h,
                call,
                &format!("{}\"}}", &marker[..marker.len() - 1])
            ));
        }
        let asked = Hermes::new(FormatOptions {
            markers_in_strings: true,
            ..FormatOptions::default()
        });
        assert!(accepts(&asked, call, &format!("{BEGIN}{END}\"}}")));

        // Whitespace: one line break then indentation, at most 12 characters in one place.
        let ws = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {";
        assert!(accepts(&h, ws, &format!("\n{}\"tz\"", " ".repeat(11))));
        assert!(accepts(&h, ws, &format!("{}\"tz\"", " ".repeat(12))));
        assert!(!accepts(&h, ws, &" ".repeat(13)));
        assert!(!accepts(&h, ws, "\n\n"));
        assert!(!accepts(&h, &format!("{ws}\"tz\":"), &"\t".repeat(13)));
        assert!(!accepts(&h, &format!("{ws}\"tz\": \"x\""), " \n\t\n"));
        // Line breaks unbounded but for the character cap: the 13th newline is refused.
        let lines = Hermes::new(FormatOptions {
            max_whitespace_newlines: None,
            ..FormatOptions::default()
        });
        assert!(accepts(&lines, ws, &"\n".repeat(12)));
        assert!(!accepts(&lines, ws, &"\n".repeat(13)));
    }
}
