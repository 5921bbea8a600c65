//! DeepSeek V3 / R1 and V3.1: calls inside a section marked with full-width markers
//! (section 4.6 of the tool-call format notes; vLLM's `deepseek_v3` and `deepseek_v31`
//! parsers, XGrammar's `deepseek_r1` and `deepseek_v3_1` builtins).
//!
//! V3 / R1 (the arguments in a Markdown json fence, calls joined by `\n`):
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
//! ```json
//! {"city": "Paris"}
//! ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//! ```
//!
//! V3.1 (bare JSON, calls chained with nothing between them):
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//! ```
//!
//! The markers use U+FF5C (`｜`) and U+2581 (`▁`); they are matched byte-exactly, never
//! after Unicode normalisation. In the DeepSeek V3 vocabulary they are single added tokens
//! that are not special, so the grammar matches their text (one token or several).

use serde_json::{json, Value};

use super::driver;
use super::scan::{self, CallRead, Sections};
use super::tags::{self, Envelope};
use super::{
    FormatOptions, PartialCall, Tool, ToolCall, ToolCallFormat, ToolError, ToolParseError,
};

/// `<｜tool▁calls▁begin｜>`: opens the section holding a turn's calls.
pub const CALLS_BEGIN: &str = "<\u{ff5c}tool\u{2581}calls\u{2581}begin\u{ff5c}>";
/// `<｜tool▁calls▁end｜>`: closes the section.
pub const CALLS_END: &str = "<\u{ff5c}tool\u{2581}calls\u{2581}end\u{ff5c}>";
/// `<｜tool▁call▁begin｜>`: opens one call.
pub const CALL_BEGIN: &str = "<\u{ff5c}tool\u{2581}call\u{2581}begin\u{ff5c}>";
/// `<｜tool▁call▁end｜>`: closes one call.
pub const CALL_END: &str = "<\u{ff5c}tool\u{2581}call\u{2581}end\u{ff5c}>";
/// `<｜tool▁sep｜>`: separates the type word (V3) or the name (V3.1) from what follows.
pub const SEP: &str = "<\u{ff5c}tool\u{2581}sep\u{ff5c}>";
const OUTPUT_BEGIN: &str = "<\u{ff5c}tool\u{2581}output\u{2581}begin\u{ff5c}>";
const OUTPUT_END: &str = "<\u{ff5c}tool\u{2581}output\u{2581}end\u{ff5c}>";

const SECTIONS: Sections<'static> = Sections {
    section_begins: &[CALLS_BEGIN],
    section_end: CALLS_END,
    call_begin: CALL_BEGIN,
};

/// Which of the two mutually unparsable DeepSeek call shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeepSeekVersion {
    /// V3, V3-0324, R1, R1-0528: `function<｜tool▁sep｜>NAME\n```json\n{…}\n```` ` per
    /// call, calls joined by `\n`.
    V3,
    /// V3.1 (and V3.2-Exp): `NAME<｜tool▁sep｜>{…}` per call, nothing between calls.
    V31,
}

/// The DeepSeek formats (`deepseek_v3`, `deepseek_v31`).
///
/// * Grammar: content, then one section `<｜tool▁calls▁begin｜>` … `<｜tool▁calls▁end｜>`
///   holding the calls in the version's exact shape (V3: `\n` between calls, the
///   template's `\n```json\n` before and `\n```` ` after the arguments; V3.1: nothing
///   between calls), then the end of the turn. `required` allows content before the
///   section (section 5.4 of the notes; XGrammar forbids it); a named choice is the
///   section with exactly that call and nothing else. With [`FormatOptions::reasoning`]
///   (R1), a `<think>…</think>\n\n` block comes first, in which no marker may appear.
///   V3 ends a name at the json fence that may follow it, so a tool whose name holds
///   `` ` `` is [`ToolError::Unsupported`] (the reason names the tool and the character).
/// * Parser: reads both a V3 fence and bare JSON for either version (a missing fence or
///   `json` tag is tolerated; a fence with another language, as in functionary's code
///   calls, gives `{"code": CODE}`); `\n` or nothing between calls (`function`, the separator
///   and `{` is V3.1's call to a tool named `function`); a call begun without
///   the section marker; a missing section end. A section with no readable call is
///   reported as malformed and its text stays in content. Text after the section is
///   content.
#[derive(Clone, Debug)]
pub struct DeepSeek {
    version: DeepSeekVersion,
    options: FormatOptions,
}

impl DeepSeek {
    /// The format of `version` with `options`.
    pub fn new(version: DeepSeekVersion, options: FormatOptions) -> Self {
        Self { version, options }
    }

    /// V3 / R1 (`deepseek_v3`) with default options.
    pub fn v3() -> Self {
        Self::new(DeepSeekVersion::V3, FormatOptions::default())
    }

    /// V3.1 (`deepseek_v31`) with default options.
    pub fn v31() -> Self {
        Self::new(DeepSeekVersion::V31, FormatOptions::default())
    }

    /// The version.
    pub fn version(&self) -> DeepSeekVersion {
        self.version
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    fn envelope(&self) -> Envelope {
        Envelope {
            trigger: CALL_BEGIN.into(),
            separator: match self.version {
                DeepSeekVersion::V3 => "\n".into(),
                DeepSeekVersion::V31 => String::new(),
            },
            section: Some((CALLS_BEGIN.into(), CALLS_END.into())),
            leading_text_in_required: true,
            reasoning: driver::THINK.written_with("\n\n"),
            excludes: driver::THINK.markers_after(&[CALLS_END, CALL_END, SEP]),
            markers: Vec::new(),
        }
    }

    fn render_call(&self, c: &ToolCall) -> String {
        let args = scan::python_json(&c.arguments);
        match self.version {
            DeepSeekVersion::V3 => format!(
                "{CALL_BEGIN}function{SEP}{}\n```json\n{args}\n```{CALL_END}",
                c.name
            ),
            DeepSeekVersion::V31 => format!("{CALL_BEGIN}{}{SEP}{args}{CALL_END}", c.name),
        }
    }
}

impl ToolCallFormat for DeepSeek {
    fn name(&self) -> &str {
        match self.version {
            DeepSeekVersion::V3 => "deepseek_v3",
            DeepSeekVersion::V31 => "deepseek_v31",
        }
    }

    structural_tag_from_envelope!(|f, options, t| {
        let version = f.version;
        if version == DeepSeekVersion::V3 && t.name.contains('`') {
            // The V3 parser ends the name at the fence that may follow it unspaced.
            return Err(ToolError::Unsupported {
                format: "deepseek_v3".into(),
                reason: format!(
                    "tool {:?}: its name holds the character '`', which ends a name \
                         in DeepSeek V3's call header (the json fence)",
                    t.name
                ),
            });
        }
        let (begin, end) = match version {
            DeepSeekVersion::V3 => (
                format!("{CALL_BEGIN}function{SEP}{}\n```json\n", t.name),
                format!("\n```{CALL_END}"),
            ),
            DeepSeekVersion::V31 => (format!("{CALL_BEGIN}{}{SEP}", t.name), CALL_END.into()),
        };
        Ok(json!({"type": "tag", "begin": begin,
                "content": tags::json_arguments(t, options), "end": end}))
    });

    parse_with_driver!(sections: SECTIONS, read_call);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        let sep = match self.version {
            DeepSeekVersion::V3 => "\n",
            DeepSeekVersion::V31 => "",
        };
        let body: Vec<String> = calls.iter().map(|c| self.render_call(c)).collect();
        format!("{CALLS_BEGIN}{}{CALLS_END}", body.join(sep))
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        let body = scan::result_text(result);
        format!("{OUTPUT_BEGIN}{body}{OUTPUT_END}")
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from(
            "## Tools\n\nThese functions are available. Each is described by a JSON \
             object with its name, purpose and parameter schema:\n",
        );
        for t in tools {
            s.push('\n');
            s.push_str(&scan::python_json(&t.to_openai()));
        }
        let example = ToolCall::new("NAME", json!({"ARGUMENT": "VALUE"}));
        s.push_str(
            "\n\nTo use functions, open one section, put each call in it, and close it; \
             several calls go in the same section:\n",
        );
        s.push_str(&self.render_calls(&[example]));
        s
    }
}

/// Reads one call from `body` (the text after `<｜tool▁call▁begin｜>`): V3's
/// `TYPE<｜tool▁sep｜>NAME` header or V3.1's `NAME<｜tool▁sep｜>`, whichever the text has,
/// then the arguments and `<｜tool▁call▁end｜>`.
fn read_call(body: &str, tools: &[Tool], at_end: bool) -> CallRead {
    let bad = |error| CallRead::bad(body, CALL_END, error);
    let limit = scan::header_limit(body, &[CALL_END, CALL_BEGIN, CALLS_END]);
    let Some(sep) = body[..limit].find(SEP) else {
        if limit < body.len() {
            // The malformed call ends at the marker that cut it (its own end marker
            // included), whatever text arrives later: the same for a stream and the whole.
            let len = if body[limit..].starts_with(CALL_END) {
                limit + CALL_END.len()
            } else {
                limit
            };
            return CallRead::Bad {
                error: ToolParseError::Syntax(
                    "a DeepSeek call needs <｜tool▁sep｜> after its name or type".into(),
                ),
                len,
            };
        }
        if at_end {
            return bad(ToolParseError::Unterminated);
        }
        return CallRead::Pending(PartialCall::default());
    };
    let before = body[..sep].trim();
    let after = sep + SEP.len();
    // V3 writes the type word before the separator and the name after it, up to `\n`;
    // `function` then the arguments' `{` is V3.1's call to a tool named `function`.
    let v3 =
        before.is_empty() || before == "function" && !body[after..].trim_start().starts_with('{');
    let (name, args_start) = if v3 {
        let rest = &body[after..];
        let Some(k) = rest.find(['\n', '`', '{', '<']) else {
            if at_end {
                return bad(ToolParseError::Unterminated);
            }
            return CallRead::Pending(PartialCall::default());
        };
        (rest[..k].trim(), after + k)
    } else {
        (before, after)
    };
    let name_ok = scan::check_call_name(name, tools);
    scan::read_call_arguments(body, args_start, CALL_END, at_end, name, None, name_ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_calls, calls};
    use crate::StreamEvent;
    use crate::ToolChoice;

    use crate::test_support::weather_and_time as tools;

    fn v31_worked() -> String {
        format!(
            "Let me check.{CALLS_BEGIN}{CALL_BEGIN}get_weather{SEP}{{\"city\": \"Paris\"}}{CALL_END}{CALL_BEGIN}get_time{SEP}{{\"tz\": \"Europe/Paris\"}}{CALL_END}{CALLS_END}"
        )
    }

    fn v3_example() -> String {
        format!(
            "{CALLS_BEGIN}{CALL_BEGIN}function{SEP}get_weather\n```json\n{{\"city\": \"Paris\"}}\n```{CALL_END}{CALLS_END}"
        )
    }

    #[test]
    fn markers_are_the_spec_bytes() {
        assert_eq!(
            SEP.as_bytes(),
            [
                0x3C, 0xEF, 0xBD, 0x9C, 0x74, 0x6F, 0x6F, 0x6C, 0xE2, 0x96, 0x81, 0x73, 0x65, 0x70,
                0xEF, 0xBD, 0x9C, 0x3E
            ]
        );
        assert_eq!(CALLS_BEGIN.len(), 28);
        assert_eq!(CALLS_END.len(), 26);
        assert_eq!(CALL_BEGIN.len(), 27);
        assert_eq!(CALL_END.len(), 25);
    }

    #[test]
    fn parses_the_worked_examples() {
        let out = DeepSeek::v31().parse(&v31_worked(), &tools());
        assert_eq!(out.content.as_deref(), Some("Let me check."));
        assert_calls(
            &out,
            &[
                ("get_weather", json!({"city": "Paris"})),
                ("get_time", json!({"tz": "Europe/Paris"})),
            ],
        );
        assert!(out.errors.is_empty());
        let out = DeepSeek::v3().parse(&v3_example(), &tools());
        assert_eq!(out.content, None);
        assert_calls(&out, &[("get_weather", json!({"city": "Paris"}))]);
    }

    #[test]
    fn render_then_parse_both_versions() {
        let calls = calls(&[
            ("get_time", json!({"tz": "UTC"})),
            (
                "get_weather",
                json!({"city": format!("{CALL_END}{CALLS_END} ```")}),
            ),
        ]);
        for f in [DeepSeek::v3(), DeepSeek::v31()] {
            let text = f.render_calls(&calls);
            let out = f.parse(&text, &tools());
            assert_eq!(out.tool_calls, calls, "{text}");
            assert!(out.errors.is_empty());
            assert_eq!(out.content, None);
        }
    }

    #[test]
    fn malformed_section_leaves_content_and_reports() {
        let f = DeepSeek::v31();
        let text = format!("Hi{CALLS_BEGIN}nothing here{CALLS_END}");
        let out = f.parse(&text, &tools());
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.errors.len(), 1);
        assert_eq!(
            out.content.as_deref(),
            Some(format!("Hi\n{CALLS_BEGIN}nothing here{CALLS_END}").as_str())
        );
        let text = format!("{CALLS_BEGIN}{CALL_BEGIN}nope{SEP}{{}}{CALL_END}{CALLS_END}");
        let out = f.parse(&text, &tools());
        assert_eq!(
            out.errors[0].error,
            ToolParseError::UnknownTool {
                name: "nope".into()
            }
        );
        let text =
            format!("{CALLS_BEGIN}{CALL_BEGIN}get_time{SEP}{{\"tz\": }}{CALL_END}{CALLS_END}");
        let out = f.parse(&text, &tools());
        assert!(matches!(
            out.errors[0].error,
            ToolParseError::InvalidJson(_)
        ));
        assert!(out.content.unwrap().contains("\"tz\": }"));
    }

    #[test]
    fn streaming_holds_partial_markers_and_reads_calls_in_one_chunk() {
        let f = DeepSeek::v31();
        let ts = tools();
        let text = v31_worked();
        let cut = "Let me check.".len() + 5;
        let (first, all) = crate::test_support::stream_cut_at(&f, &ts, &text, cut);
        assert_eq!(first, [StreamEvent::Content("Let me check.".into())]);
        let ends = crate::test_support::ended_calls(&all);
        assert_eq!(ends, f.parse(&text, &ts).tool_calls);
        assert_eq!(ends.len(), 2);
    }

    #[test]
    fn streamed_errors_quote_only_text_that_decided_them() {
        // Text after the JSON that is not the end marker: the error quoted the next 20
        // characters, as far as they had arrived when the call's end marker came.
        let ts = tools();
        for f in [DeepSeek::v3(), DeepSeek::v31()] {
            for text in [
                format!("{CALLS_BEGIN}{CALL_BEGIN}get_time{SEP}{{\"tz\": \"UTC\"}}x{CALL_END}{CALLS_END}"),
                format!("{CALL_BEGIN}function{SEP}get_time\n```json\n{{}}\n``` x{CALL_END}Done, more text."),
            ] {
                crate::test_support::assert_streams_as_whole(&f, &text, &ts);
                crate::test_support::assert_streams_as_whole(&f, &text, &[]);
            }
        }
    }

    #[test]
    fn functionary_code_fence_becomes_code_argument() {
        let text = format!(
            "{CALLS_BEGIN}{CALL_BEGIN}function{SEP}python\n```python\nl.remove(3)\nl\n```{CALL_END}{CALLS_END}"
        );
        let out = DeepSeek::v3().parse(&text, &[]);
        assert_calls(&out, &[("python", json!({"code": "l.remove(3)\nl"}))]);
    }

    #[test]
    fn markers_inside_reasoning_are_not_calls() {
        let f = DeepSeek::new(DeepSeekVersion::V31, crate::test_support::with_reasoning());
        let text = format!(
            "<think>maybe {CALLS_BEGIN}{CALL_BEGIN}get_time{SEP}{{\"tz\": \"UTC\"}}{CALL_END}{CALLS_END}</think>\n\nok"
        );
        let out = f.parse(&text, &tools());
        assert!(out.tool_calls.is_empty());
        assert!(out.errors.is_empty());
        assert_eq!(out.content.as_deref(), Some("ok"));
        assert!(out.reasoning.unwrap().contains(CALL_BEGIN));
    }

    #[test]
    fn names_round_trip_or_are_refused_naming_the_character() {
        use tokensieve::GrammarMatcher;
        let tool = |name| {
            crate::test_support::tool_with_properties(name, json!({"x": {"type": "integer"}}))
        };
        for f in [DeepSeek::v3(), DeepSeek::v31()] {
            for name in [
                "get-weather",
                "a.b",
                "über",
                "東京",
                "a|b",
                "function",
                "x:y",
            ] {
                let ts = vec![tool(name), tool("other")];
                let call = ToolCall::new(name, json!({"x": 1}));
                let text = f.render_calls(std::slice::from_ref(&call));
                for choice in [ToolChoice::Required, ToolChoice::Function(name.into())] {
                    let tag = f.structural_tag(&ts, &choice, true).unwrap();
                    let mut m = GrammarMatcher::new(crate::test_support::compile_on_ascii(&tag));
                    assert!(m.accept_string(&text) && m.is_completed(), "{text}");
                }
                let out = f.parse(&text, &ts);
                assert_eq!(out.tool_calls, vec![call], "{}: {text}", f.name());
                assert!(out.errors.is_empty());
                crate::test_support::assert_streams_as_whole(&f, &text, &ts);
            }
        }
        // V3 ends the name at the fence: a name with a backtick cannot be carried.
        let ts = vec![tool("a`b")];
        let tag = DeepSeek::v3().structural_tag(&ts, &ToolChoice::Required, true);
        crate::test_support::assert_unsupported(tag, "deepseek_v3", &["\"a`b\"", "'`'"]);
    }

    #[test]
    fn a_section_whose_calls_are_all_malformed_stays_content_whole() {
        let ts = tools();
        let f = DeepSeek::v31();
        let text = format!("{CALLS_BEGIN}{CALL_BEGIN}ping{SEP}{CALL_END}{CALLS_END}");
        let out = f.parse(&text, &ts);
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.content.as_deref(), Some(text.as_str()));
        assert_eq!(out.errors.len(), 1);
        assert_eq!(
            out.errors[0].text,
            format!("{CALL_BEGIN}ping{SEP}{CALL_END}")
        );
        assert_eq!(out.errors[0].offset, CALLS_BEGIN.len());
        crate::test_support::assert_streams_as_whole(&f, &text, &ts);
        // With text around it, and unclosed at the end of the output.
        let section = format!("{CALLS_BEGIN}{CALL_BEGIN}nosuch{SEP}{{}}{CALL_END}");
        let text = format!("Hi {section} bye");
        let out = f.parse(&text, &ts);
        // Content pieces are trimmed and joined by `\n`, as everywhere; the section never
        // closed, so it runs to the end of the output.
        assert_eq!(out.content, Some(format!("Hi\n{section} bye")));
        assert_eq!(
            out.errors[0].error,
            ToolParseError::UnknownTool {
                name: "nosuch".into()
            }
        );
        crate::test_support::assert_streams_as_whole(&f, &text, &ts);
    }

    #[test]
    fn a_section_with_one_good_call_keeps_only_the_bad_calls_text() {
        let ts = tools();
        let f = DeepSeek::v31();
        let bad = format!("{CALL_BEGIN}nosuch{SEP}{{}}{CALL_END}");
        let text = format!(
            "{CALLS_BEGIN}{bad}{CALL_BEGIN}get_time{SEP}{{\"tz\": \"UTC\"}}{CALL_END}{CALLS_END}"
        );
        let out = f.parse(&text, &ts);
        assert_calls(&out, &[("get_time", json!({"tz": "UTC"}))]);
        assert_eq!(out.content.as_deref(), Some(bad.as_str()));
        assert_eq!(out.errors.len(), 1);
        crate::test_support::assert_streams_as_whole(&f, &text, &ts);
    }
}
