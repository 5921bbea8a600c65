//! Phi-4-mini: `functools[…]`, a JSON array of `{"name", "arguments"}` after the plain-text
//! prefix `functools` with no end marker (the [`call_array`] codec under that prefix;
//! vLLM's `phi4_mini_json` parser and its Phi-4-mini template). The spec and its sources
//! are in `docs/tool-call-formats-extra.md`; the model's native marker is unverified.
//!
//! ```text
//! functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]
//! ```

use std::sync::LazyLock;

use serde_json::Value;

use super::call_array;
use super::driver::{self, Family};
use super::scan;
use super::tags::Envelope;
use super::{FormatOptions, Tool, ToolCall, ToolCallFormat};

/// The prefix of the call array. The marker the parser looks for includes the `[`, so
/// that prose naming Python's `functools` module is not a call.
pub const FUNCTOOLS: &str = "functools";
const BEGIN: &str = "functools[";

static FAMILY: LazyLock<Family> = LazyLock::new(|| Family::new(&[BEGIN], driver::THINK));

format_with_options! {
    /// Phi-4-mini (`phi4_mini_json`).
    ///
    /// * Grammar: `functools[{"name": "NAME", "arguments": ARGS}, …]` (elements joined by
    ///   `, `; one when `parallel` is off), then the end of the turn; `required` and named
    ///   start with `functools[` (vLLM's parser drops the content of an output with calls);
    ///   `auto` is free text (never holding `functools`), then optionally the array.
    /// * Parser: Mistral's array reader after `functools[` (string-aware, so arrays inside
    ///   the arguments are read whole, where vLLM's `functools\[(.*?)\]` stops at the first
    ///   `]`): `"parameters"` accepted for `"arguments"`, a bad element reported with its
    ///   text while the others stay calls, text around the array kept in content.
    pub struct Phi4Mini;
}

impl ToolCallFormat for Phi4Mini {
    format_name!("phi4_mini_json");

    structural_tag_from_envelope!(|_, options, t| { Ok(call_array::call_tag(t, options)) });

    // The marker's `[` opens the array.
    parse_with_driver!(arrays: FAMILY, |_| FUNCTOOLS.len());

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        call_array::render(FUNCTOOLS, calls)
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        format!("{{\"result\": {}}}", scan::result_text(result))
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from(
            "You may answer in plain text or call the functions below. To call functions, \
             write functools followed by one JSON list of the calls, each an object with the \
             function's \"name\" and its \"arguments\" object: functools[{\"name\": ..., \
             \"arguments\": {...}}, ...]. Nothing closes the list.\n\n",
        );
        for t in tools {
            s.push_str(&scan::python_json(&t.to_openai()));
            s.push_str("\n\n");
        }
        s
    }
}

impl Phi4Mini {
    /// The family's call syntax, for the shared assembler.
    fn envelope(&self) -> Envelope {
        Envelope {
            trigger: FUNCTOOLS.into(),
            separator: ", ".into(),
            section: Some((BEGIN.into(), "]".into())),
            // `functools[` is ordinary text in code: strings may hold it.
            markers: Vec::new(),
            ..Envelope::default()
        }
    }
}
