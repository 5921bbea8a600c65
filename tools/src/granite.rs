//! IBM Granite: 3.0's `<|tool_call|>[…]`, 3.1+'s `<tool_call>[…]` (a JSON array of
//! `{"name", "arguments"}` after a marker, no end marker: the [`call_array`] codec under
//! Granite's markers), and granite-20b-functioncalling's repeated `<function_call> {…}`
//! (one JSON object per marker, no end marker: Hermes' [`JsonBlock`] codec under that
//! marker). vLLM's `granite` and `granite-20b-fc` parsers; the spec and its sources are in
//! `docs/tool-call-formats-extra.md`.
//!
//! ```text
//! <tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]
//! <function_call> {"name": "get_weather", "arguments": {"city": "Paris"}}
//! ```

use std::sync::LazyLock;

use serde_json::{json, Value};

use super::call_array;
use super::driver::{self, Family};
use super::hermes::JsonBlock;
use super::scan;
use super::tags::Envelope;
use super::{FormatOptions, Tool, ToolCall, ToolCallFormat};

/// Granite 3.0's begin marker (a special token).
pub const TOOL_CALL_TOKEN: &str = "<|tool_call|>";
/// Granite 3.1+'s begin marker (plain text).
pub const TOOL_CALL: &str = "<tool_call>";
/// granite-20b-functioncalling's begin marker.
pub const FUNCTION_CALL: &str = "<function_call>";

/// The Granite 3.x family: calls begin at either marker (3.1's listed second, so that
/// `<|tool_call|>` wins where both could start).
static GRANITE: LazyLock<Family> =
    LazyLock::new(|| Family::new(&[TOOL_CALL_TOKEN, TOOL_CALL], driver::THINK));

/// The granite-20b-fc family.
static GRANITE_20B: LazyLock<Family> =
    LazyLock::new(|| Family::new(&[FUNCTION_CALL], driver::THINK));

/// granite-20b-fc's call: a JSON object after the marker, ending with its JSON.
const GRANITE_20B_BLOCK: JsonBlock = JsonBlock {
    begin: FUNCTION_CALL,
    end: "",
    after_begin: " ",
    key: "arguments",
    before_end: "",
    separator: "\n",
    result: ("<function_response> ", ""),
};

/// Which Granite marker the grammar and the renderer write (the parser reads both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GraniteMarker {
    /// Granite 3.1 and later 3.x: the plain-text `<tool_call>`.
    #[default]
    Text,
    /// Granite 3.0: the special token `<|tool_call|>`.
    Token,
}

/// IBM Granite 3.x (`granite`).
///
/// * Grammar: the marker ([`GraniteMarker`]: `<tool_call>` by default), then a JSON array
///   of `{"name": "NAME", "arguments": ARGS}` objects joined by `, ` (one object when
///   `parallel` is off), then the end of the turn. `required` and named start with the
///   marker (vLLM's parser reads a call only at the start of the output); `auto` is free
///   text, then optionally the array; free text never holds either marker.
/// * Parser: Mistral's array reader under Granite's two markers (`<|tool_call|>` and
///   `<tool_call>`, whichever the model wrote): `"parameters"` accepted for
///   `"arguments"`, a string holding a JSON object accepted as arguments, a bad element
///   reported with its text while the others stay calls, text before and after the array
///   kept in content (vLLM's parser keeps only output that starts with the array). A
///   marker not followed by `[` is a malformed run up to the next marker or the end.
#[derive(Clone, Debug, Default)]
pub struct Granite {
    marker: GraniteMarker,
    options: FormatOptions,
}

impl Granite {
    /// Granite 3.1+ (`<tool_call>`), with `options`.
    pub fn new(options: FormatOptions) -> Self {
        Self {
            marker: GraniteMarker::Text,
            options,
        }
    }

    /// The format writing `marker` (Granite 3.0: [`GraniteMarker::Token`]).
    pub fn with_marker(mut self, marker: GraniteMarker) -> Self {
        self.marker = marker;
        self
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    fn written_marker(&self) -> &'static str {
        match self.marker {
            GraniteMarker::Text => TOOL_CALL,
            GraniteMarker::Token => TOOL_CALL_TOKEN,
        }
    }
}

impl ToolCallFormat for Granite {
    format_name!("granite");

    structural_tag_from_envelope!(|_, options, t| { Ok(call_array::call_tag(t, options)) });

    parse_with_driver!(arrays: GRANITE, |m| [TOOL_CALL_TOKEN, TOOL_CALL][m].len());

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        call_array::render(self.written_marker(), calls)
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        format!(
            "<|start_of_role|>tool_response<|end_of_role|>{}<|end_of_text|>",
            scan::result_text(result)
        )
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from("<|start_of_role|>available_tools<|end_of_role|>\n");
        for t in tools {
            s.push_str(&scan::python_json(&t.to_openai()));
            s.push_str("\n\n");
        }
        s.push_str("<|end_of_text|>\n");
        s
    }
}

impl Granite {
    /// The family's call syntax, for the shared assembler.
    fn envelope(&self) -> Envelope {
        let marker = self.written_marker();
        Envelope {
            trigger: marker.into(),
            separator: ", ".into(),
            section: Some((format!("{marker}["), "]".into())),
            excludes: vec![TOOL_CALL_TOKEN.into(), TOOL_CALL.into()],
            markers: vec![TOOL_CALL_TOKEN.into(), TOOL_CALL.into()],
            ..Envelope::default()
        }
    }
}

format_with_options! {
    /// IBM granite-20b-functioncalling (`granite-20b-fc`).
    ///
    /// * Grammar: each call is `<function_call> {"name": "NAME", "arguments": ARGS}`, calls
    ///   joined by `\n`; `required` and named start with the first call; `auto` is free text
    ///   (never holding `<function_call>`), then optionally the calls.
    /// * Parser: Hermes' JSON-object reader under the marker `<function_call>`, with no end
    ///   marker: a call ends with its JSON object; whitespace and text between calls, and text
    ///   before the first (vLLM keeps it as content), are content. A call whose JSON does not
    ///   parse runs to the next `<function_call>` or the end of the output.
    pub struct Granite20bFc;
}

impl ToolCallFormat for Granite20bFc {
    json_block_codec!("granite-20b-fc", GRANITE_20B_BLOCK, GRANITE_20B);

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from("<|function_call_library|>\n");
        for t in tools {
            let line = json!({"name": t.name, "description": t.description,
                              "parameters": t.input_schema});
            s.push_str(&scan::python_json(&line));
            s.push('\n');
        }
        s.push_str(
            "To call a function, write <function_call> followed by a JSON object with its \
             \"name\" and its \"arguments\"; when no function fits, answer in plain text.",
        );
        s
    }
}

impl Granite20bFc {
    /// The family's call syntax, for the shared assembler.
    fn envelope(&self) -> Envelope {
        Envelope {
            trigger: FUNCTION_CALL.into(),
            separator: "\n".into(),
            markers: vec![FUNCTION_CALL.into()],
            ..Envelope::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `get_time` alone (`tz`, required).
    fn tools() -> Vec<Tool> {
        crate::test_support::weather_and_time()[1..].to_vec()
    }

    #[test]
    fn granite_text_that_is_not_an_array_is_an_error() {
        let ts = tools();
        let out = Granite::default().parse("Hi <tool_call> not an array", &ts);
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.content.as_deref(), Some("Hi\n<tool_call> not an array"));
    }

    #[test]
    fn granite_20b_reads_the_good_call_after_a_bad_one() {
        let ts = tools();
        let bad = "<function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": }} <function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": \"X\"}}";
        let out = Granite20bFc::default().parse(bad, &ts);
        assert_eq!(out.tool_calls.len(), 1);
        assert_eq!(
            out.errors[0].text,
            "<function_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": }}"
        );
    }
}
