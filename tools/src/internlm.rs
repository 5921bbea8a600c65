//! InternLM2.5: one JSON object `{"name", "parameters"}` between
//! `<|action_start|><|plugin|>` and `<|action_end|>` (Hermes' [`JsonBlock`] codec under
//! InternLM's markers; vLLM's `internlm` parser). The spec and its sources are in
//! `docs/tool-call-formats-extra.md`.
//!
//! ```text
//! <|action_start|><|plugin|>
//! {"name": "get_weather", "parameters": {"city": "Paris"}}<|action_end|>
//! ```

use std::sync::LazyLock;

use super::driver::{self, Family};
use super::hermes::JsonBlock;
use super::scan;
use super::tags::Envelope;
use super::{FormatOptions, Tool, ToolCallFormat};

/// Begins a call: `<|action_start|>` then the `<|plugin|>` channel (both special tokens).
pub const ACTION_START: &str = "<|action_start|><|plugin|>";
/// Ends a call.
pub const ACTION_END: &str = "<|action_end|>";

const BLOCK: JsonBlock = JsonBlock {
    begin: ACTION_START,
    end: ACTION_END,
    after_begin: "\n",
    key: "parameters",
    before_end: "",
    separator: "",
    result: ("<|im_start|>environment name=<|plugin|>\n", "<|im_end|>"),
};

static FAMILY: LazyLock<Family> = LazyLock::new(|| Family::new(&[ACTION_START], driver::THINK));

format_with_options! {
    /// InternLM2.5 (`internlm`).
    ///
    /// * Grammar: each call is `<|action_start|><|plugin|>\n{"name": "NAME", "parameters":
    ///   ARGS}<|action_end|>`; parallel calls follow each other with nothing between (as the
    ///   template renders a turn's calls; the model itself writes one call per turn, and
    ///   vLLM's streaming parser reads only the first); content may precede the first call,
    ///   also under `required` (the model writes text before its action); free text never
    ///   holds `<|action_start|>`.
    /// * Parser: Hermes' reader under InternLM's markers: `"parameters"` or `"arguments"`, a
    ///   string holding a JSON object accepted as arguments, a missing `<|action_end|>`
    ///   tolerated once the JSON is complete, text around calls kept in content.
    pub struct InternLm;
}

impl ToolCallFormat for InternLm {
    json_block_codec!("internlm", BLOCK, FAMILY);

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let list: Vec<String> = tools
            .iter()
            .map(|t| {
                let f = t.to_openai();
                scan::python_json(f.get("function").unwrap_or(&f))
            })
            .collect();
        format!(
            "<|im_start|>system name=<|plugin|>\n[{}]<|im_end|>",
            list.join(", ")
        )
    }
}

impl InternLm {
    /// The family's call syntax, for the shared assembler.
    fn envelope(&self) -> Envelope {
        Envelope {
            trigger: ACTION_START.into(),
            leading_text_in_required: true,
            excludes: vec!["<|action_start|>".into(), ACTION_END.into()],
            markers: vec![
                "<|action_start|>".into(),
                "<|plugin|>".into(),
                ACTION_END.into(),
            ],
            ..Envelope::default()
        }
    }
}
