//! Kimi K2 (Instruct, 0905, Thinking, K2.5): calls with ids `functions.NAME:IDX` inside a
//! section of special tokens (section 4.7 of the tool-call format notes; vLLM's `kimi_k2`
//! parser, XGrammar's `kimi` builtin).
//!
//! ```text
//! <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>
//! ```

use serde_json::{json, Value};

use super::driver;
use super::scan::{self, CallRead, Sections};
use super::tags::{self, Envelope};
use super::{FormatOptions, PartialCall, Tool, ToolCall, ToolCallFormat, ToolParseError};

/// Opens the section holding a turn's calls.
pub const SECTION_BEGIN: &str = "<|tool_calls_section_begin|>";
/// The singular spelling some outputs use (accepted when parsing).
const SECTION_BEGIN_SINGULAR: &str = "<|tool_call_section_begin|>";
/// Closes the section.
pub const SECTION_END: &str = "<|tool_calls_section_end|>";
/// Opens one call (then its id).
pub const CALL_BEGIN: &str = "<|tool_call_begin|>";
/// Ends the id, starts the arguments.
pub const ARGUMENT_BEGIN: &str = "<|tool_call_argument_begin|>";
/// Closes one call.
pub const CALL_END: &str = "<|tool_call_end|>";

const SECTIONS: Sections<'static> = Sections {
    section_begins: &[SECTION_BEGIN, SECTION_BEGIN_SINGULAR],
    section_end: SECTION_END,
    call_begin: CALL_BEGIN,
};

/// The Kimi K2 format (`kimi_k2`).
///
/// * Grammar: content, then one section holding calls back to back, each
///   `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGS<|tool_call_end|>`
///   with `IDX` constrained to 1–6 digits (the server may know the next index; the model's
///   choice is kept), then the end of the turn. `required` allows content before the
///   section (section 5.4 of the notes; XGrammar forbids it); a named choice is the
///   section with exactly that call. With [`FormatOptions::reasoning`] (K2-Thinking,
///   K2.5), a `<think>…</think>` block comes first, without markers inside.
/// * Parser: the id is kept as [`ToolCall::id`] (replacing it degrades multi-turn
///   behaviour); the name is the text between `functions.` and the last `:`; ids without
///   the `functions.` prefix are accepted, and bare counters (`3`) name no tool, so they
///   are errors when a tool list is given. The singular `<|tool_call_section_begin|>`
///   is accepted, whitespace around the id and the JSON is allowed, text between the
///   section begin and the first call goes to content, a missing section end is
///   tolerated, and a section with no readable call is reported as malformed with its
///   text kept in content.
#[derive(Clone, Debug, Default)]
pub struct KimiK2 {
    options: FormatOptions,
}

impl KimiK2 {
    /// Every marker of the format (special tokens in Kimi's vocabulary).
    pub const MARKERS: &'static [&'static str] = &[
        SECTION_BEGIN,
        SECTION_END,
        CALL_BEGIN,
        ARGUMENT_BEGIN,
        CALL_END,
    ];

    /// The format with `options`.
    pub fn new(options: FormatOptions) -> Self {
        Self { options }
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    fn envelope(&self) -> Envelope {
        Envelope {
            trigger: CALL_BEGIN.into(),
            section: Some((SECTION_BEGIN.into(), SECTION_END.into())),
            leading_text_in_required: true,
            reasoning: driver::THINK.written_with(""),
            excludes: driver::THINK.markers_after(&[
                SECTION_BEGIN_SINGULAR,
                SECTION_END,
                ARGUMENT_BEGIN,
                CALL_END,
            ]),
            markers: Vec::new(),
            ..Envelope::default()
        }
    }
}

/// The name in a Kimi call id: the text between `functions.` (optional) and the last `:`
/// when digits follow it, else the whole id without the prefix.
pub fn name_from_id(id: &str) -> &str {
    let s = id.strip_prefix("functions.").unwrap_or(id);
    match s.rfind(':') {
        Some(k) if k + 1 < s.len() && s[k + 1..].bytes().all(|b| b.is_ascii_digit()) => &s[..k],
        _ => s,
    }
}

/// `call.id` when it has Kimi's `functions.NAME:IDX` shape for this call, else the id
/// Kimi would use for the `index`-th call.
fn kimi_id(call: &ToolCall, index: usize) -> String {
    if let Some(id) = &call.id {
        if let Some(idx) = id
            .strip_prefix("functions.")
            .and_then(|s| s.strip_prefix(call.name.as_str()))
            .and_then(|s| s.strip_prefix(':'))
        {
            if !idx.is_empty() && idx.len() <= 6 && idx.bytes().all(|b| b.is_ascii_digit()) {
                return id.clone();
            }
        }
    }
    format!("functions.{}:{index}", call.name)
}

impl ToolCallFormat for KimiK2 {
    format_name!("kimi_k2");

    structural_tag_from_envelope!(|_, options, t| {
        Ok(json!({"type": "tag",
                "begin": format!("{CALL_BEGIN}functions.{}:", t.name),
                "content": {"type": "sequence", "elements": [
                    {"type": "regex", "pattern": "[0-9]{1,6}"},
                    {"type": "const_string", "value": ARGUMENT_BEGIN},
                    tags::json_arguments(t, options)]},
                "end": CALL_END}))
    });

    parse_with_driver!(sections: SECTIONS, read_call);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        let mut s = String::from(SECTION_BEGIN);
        for (i, c) in calls.iter().enumerate() {
            s.push_str(&format!(
                "{CALL_BEGIN}{}{ARGUMENT_BEGIN}{}{CALL_END}",
                kimi_id(c, i),
                scan::python_json(&c.arguments)
            ));
        }
        s.push_str(SECTION_END);
        s
    }

    fn render_tool_result(&self, call: &ToolCall, result: &Value) -> String {
        let body = match result {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let id = kimi_id(call, 0);
        format!("## Return of {id}\n{body}")
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let list: Vec<Value> = tools.iter().map(Tool::to_openai).collect();
        format!(
            "<|im_system|>tool_declare<|im_middle|>{}<|im_end|>",
            Value::Array(list)
        )
    }
}

/// Reads one call from `body` (the text after `<|tool_call_begin|>`): the id, the
/// argument marker, the JSON arguments and `<|tool_call_end|>`.
fn read_call(body: &str, tools: &[Tool], at_end: bool) -> CallRead {
    let bad = |error| CallRead::bad(body, CALL_END, error);
    let limit = scan::header_limit(body, &[CALL_END, CALL_BEGIN, SECTION_END]);
    let Some(arg) = body[..limit].find(ARGUMENT_BEGIN) else {
        if limit < body.len() {
            return bad(ToolParseError::Syntax(format!(
                "a Kimi call needs {ARGUMENT_BEGIN} after its id"
            )));
        }
        if at_end {
            return bad(ToolParseError::Unterminated);
        }
        return CallRead::Pending(PartialCall::default());
    };
    let id = body[..arg].trim();
    let name = name_from_id(id);
    let name_ok = scan::check_call_name(name, tools);
    let args_start = arg + ARGUMENT_BEGIN.len();
    scan::read_call_arguments(body, args_start, CALL_END, at_end, name, Some(id), name_ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamEvent;

    use crate::test_support::city_weather_and_time as tools;

    const WORKED: &str = "Checking both.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:2<|tool_call_argument_begin|>{\"tz\": \"Europe/Paris\"}<|tool_call_end|><|tool_calls_section_end|>";

    #[test]
    fn parses_the_worked_example_with_ids() {
        let out = KimiK2::default().parse(WORKED, &tools());
        assert_eq!(out.content.as_deref(), Some("Checking both."));
        assert_eq!(
            out.tool_calls,
            vec![
                crate::test_support::call_with_id(
                    "functions.get_weather:1",
                    "get_weather",
                    json!({"city": "Paris"})
                ),
                crate::test_support::call_with_id(
                    "functions.get_time:2",
                    "get_time",
                    json!({"tz": "Europe/Paris"})
                ),
            ]
        );
        assert!(out.errors.is_empty());
    }

    #[test]
    fn names_between_prefix_and_last_colon() {
        assert_eq!(name_from_id("functions.a.b:c:12"), "a.b:c");
        assert_eq!(name_from_id("get_weather:0"), "get_weather");
        assert_eq!(name_from_id("3"), "3");
    }

    #[test]
    fn render_keeps_ids_and_parses_back() {
        let f = KimiK2::default();
        // The first call keeps its id; the second, without one, is numbered.
        let mut calls = crate::test_support::calls(&[
            (
                "get_time",
                json!({"tz": "<|tool_call_end|><|tool_calls_section_end|>"}),
            ),
            ("get_weather", json!({"city": "Oslo"})),
        ]);
        calls[0].id = Some("functions.get_time:7".into());
        let text = f.render_calls(&calls);
        let out = f.parse(&text, &tools());
        assert_eq!(out.tool_calls[0], calls[0]);
        assert_eq!(
            out.tool_calls[1].id.as_deref(),
            Some("functions.get_weather:1")
        );
    }

    #[test]
    fn bare_counter_ids_are_errors_with_tools() {
        let text = "<|tool_calls_section_begin|><|tool_call_begin|>3<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
        let out = KimiK2::default().parse(text, &tools());
        assert!(out.tool_calls.is_empty());
        assert_eq!(
            out.errors[0].error,
            ToolParseError::UnknownTool { name: "3".into() }
        );
        // No call of the section was read: its whole text, markers included, is content.
        assert_eq!(out.content.as_deref(), Some(text));
        assert_eq!(out.errors[0].text, &text[28..text.len() - 26]);
    }

    #[test]
    fn streaming_agrees_with_whole_parse() {
        let (f, ts) = (KimiK2::default(), tools());
        let cut = "Checking both.<|tool_calls_sec".len();
        let (first, all) = crate::test_support::stream_cut_at(&f, &ts, WORKED, cut);
        assert_eq!(first, [StreamEvent::Content("Checking both.".into())]);
        let ends = crate::test_support::ended_calls(&all);
        assert_eq!(ends, f.parse(WORKED, &ts).tool_calls);
    }

    #[test]
    fn streamed_errors_quote_only_text_that_decided_them() {
        // Text after the JSON that is not the end marker: the error quoted the next 20
        // characters, as far as they had arrived when the call's end marker came.
        let f = KimiK2::default();
        let text = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{\"tz\": \"UTC\"}x<|tool_call_end|><|tool_calls_section_end|>";
        crate::test_support::assert_streams_as_whole(&f, text, &tools());
        crate::test_support::assert_streams_as_whole(&f, text, &[]);
    }

    #[test]
    fn adversarial_reasoning_and_invalid_json() {
        let f = KimiK2::new(crate::test_support::with_reasoning());
        let text = "<think>try <|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{\"tz\": \"UTC\"}<|tool_call_end|><|tool_calls_section_end|></think>fine";
        crate::test_support::reasoning_without_calls(&f, text, &tools(), "fine");
        let text = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{\"tz\": UTC}<|tool_call_end|><|tool_calls_section_end|>";
        let out = KimiK2::default().parse(text, &tools());
        crate::test_support::assert_invalid_json_and_no_calls(&out);
        assert!(out.content.unwrap().contains("{\"tz\": UTC}"));
    }
}
