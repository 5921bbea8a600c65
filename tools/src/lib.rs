//! Tool calling: tools defined once, `tool_choice`, and per-family tool-call formats that
//! both constrain a model's output (a structural tag) and read it back (a parser, whole
//! or streaming).
//!
//! Serving engines that let models write tool calls freely see a few percent of them
//! malformed; constraining the calls to the tools' schemas takes schema accuracy to 100%.
//! One [`ToolCallFormat`] per model family does both halves from the same definition, so
//! what the grammar lets the model write is exactly what the parser reads.
//!
//! * [`Tool`]: name, description, input/output JSON Schemas, static `meta`, `strict`, and
//!   optionally the function itself; [`ToolSet`] validates and runs a parsed call.
//! * [`ToolChoice`]: OpenAI's `none` / `auto` / `required` / named function /
//!   `allowed_tools`, with `parallel_tool_calls` passed beside it.
//! * [`ToolCallFormat`]: `structural_tag(&tools, &choice, parallel)` for
//!   [`tokensieve::GrammarCompiler::compile_structural_tag`], `parse(text, &tools)`, a
//!   [`StreamingParser`], and renderers of calls, results and the tools' prompt section.
//! * A registry by the names serving engines use for their parsers ([`format_by_name`],
//!   [`format_names`]; names are matched ignoring case); [`register_format`] adds a
//!   user's own format.
//!
//! The formats follow the project's notes on model tool-call syntaxes
//! (`docs/tool-call-formats.md` in the shared documentation): its cross-family rules hold
//! for every parser here — special tokens are decoded as their text, a partial marker at
//! the end of a stream is held back, several calls in one delta are found by re-parsing the
//! accumulated text (from the last finished call on, see [`StreamingParser`]), markers
//! inside JSON strings are not markers, calls inside reasoning are not calls, a malformed
//! call is reported with its text (which also stays in `content`, so nothing is lost), and
//! text after the last call is kept in `content`.
//!
//! Defaults of the structural tags ([`FormatOptions`]), chosen for what a user expects of
//! a call rather than for everything JSON allows: objects are closed to their declared
//! properties; in one place between JSON tokens of the arguments at most 12 whitespace
//! characters with at most one line break (pretty-printed JSON still fits; the runs of
//! blank lines and tabs a drifting model writes do not — vLLM and XGrammar users set
//! `max_whitespace_cnt` to a handful for the same reason); at most 24 digits in a number
//! run; and the family's own text markers (`<tool_call>`, `</tool_call>` for Hermes) never
//! inside an argument's JSON strings ([`FormatOptions::markers_in_strings`] allows them).
//!
//! ```
//! use serde_json::json;
//! use tokensieve_tools::{Hermes, Tool, ToolCallFormat, ToolChoice};
//!
//! let tools = Tool::list_from_openai(&json!([{"type": "function", "function": {
//!     "name": "get_weather", "description": "Weather for a city",
//!     "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
//!                    "required": ["city"]}}}])).unwrap();
//! let hermes = Hermes::default();
//! let _tag = hermes.structural_tag(&tools, &ToolChoice::Required, true).unwrap();
//! let out = hermes.parse(
//!     "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
//!     &tools,
//! );
//! assert_eq!(out.content.as_deref(), Some("Checking."));
//! assert_eq!(out.tool_calls[0].name, "get_weather");
//! assert_eq!(out.tool_calls[0].arguments, json!({"city": "Paris"}));
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use tokensieve::StructuralTag;

#[macro_use]
mod macros;

mod call_array;
mod deepseek;
pub(crate) mod driver;
mod glm;
mod granite;
mod harmony;
mod hermes;
mod internlm;
mod invoke;
mod json_array;
mod kimi;
mod llama3_function;
mod llama3_json;
mod mistral;
mod phi4_mini;
mod pythonic;
mod qwen3_coder;
pub(crate) mod scan;
mod stream;
pub(crate) mod tags;
#[cfg(test)]
#[path = "../tests/common/family_checks.rs"]
pub(crate) mod test_support;
mod tool;

pub use deepseek::{DeepSeek, DeepSeekVersion};
pub use glm::{Glm, Glm4};
pub use granite::{Granite, Granite20bFc, GraniteMarker};
pub use harmony::Harmony;
pub use hermes::Hermes;
pub use internlm::InternLm;
pub use invoke::{Dsml, DsmlVersion, MiniMaxM2};
pub use json_array::JsonArray;
pub use kimi::KimiK2;
pub use llama3_function::Llama3FunctionTag;
pub use llama3_json::Llama3Json;
pub use mistral::{Mistral, MistralSyntax};
pub use phi4_mini::Phi4Mini;
pub use pythonic::{python_literal, Pythonic};
pub use qwen3_coder::Qwen3Coder;
pub use scan::stable_len;
pub use stream::StreamingParser;
pub use tool::{Tool, ToolContext, ToolFunction, ToolSet};

/// OpenAI's `tool_choice` (Chat Completions), as the tool-call format notes' section 5
/// interprets it for constrained decoding.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// No calls: the family's call markers are forbidden.
    None,
    /// Free text in which calls may appear (entered only through the family's trigger).
    #[default]
    Auto,
    /// At least one call.
    Required,
    /// Exactly one call, to this function, and nothing else.
    Function(String),
    /// Calls limited to `tools`, in `mode` (`Auto` or `Required`).
    AllowedTools {
        /// `Auto` or `Required` (others are read as `Auto`).
        mode: Box<ToolChoice>,
        /// The names that may be called.
        tools: Vec<String>,
    },
}

/// What a format builds, once a [`ToolChoice`] is resolved against the tool list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallMode {
    /// No calls.
    None,
    /// Optional calls after free text.
    Auto,
    /// At least one call.
    Required,
    /// Exactly one call to the single allowed tool.
    Forced,
}

impl ToolChoice {
    /// Reads OpenAI's JSON: `"none"`, `"auto"`, `"required"` (also `"any"`, Anthropic's
    /// and Mistral's spelling of it, read as [`ToolChoice::Required`]),
    /// `{"type": "function", "function": {"name": "X"}}` and
    /// `{"type": "allowed_tools", "allowed_tools": {"mode": "auto"|"required", "tools":
    /// [{"type": "function", "function": {"name": "X"}}, ...]}}`.
    ///
    /// # Errors
    /// [`ToolError::Choice`] naming what was not understood.
    pub fn from_openai(value: &Value) -> Result<Self, ToolError> {
        let bad = |why: &str| ToolError::Choice(format!("{why} (got {value})"));
        match value {
            Value::String(s) => match s.as_str() {
                "none" => Ok(Self::None),
                "auto" => Ok(Self::Auto),
                "required" | "any" => Ok(Self::Required),
                _ => Err(bad(
                    "tool_choice must be \"none\", \"auto\" or \"required\"",
                )),
            },
            Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                Some("function") => {
                    let name = o
                        .get("function")
                        .and_then(|f| f.get("name"))
                        .or_else(|| o.get("name"))
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad("a function tool_choice needs function.name"))?;
                    Ok(Self::Function(name.to_owned()))
                }
                Some("allowed_tools") => {
                    let a = o.get("allowed_tools").unwrap_or(value);
                    let mode = match a.get("mode").and_then(Value::as_str) {
                        Some("required") => Self::Required,
                        Some("auto") | None => Self::Auto,
                        Some(_) => return Err(bad("allowed_tools.mode must be auto or required")),
                    };
                    let list = a
                        .get("tools")
                        .and_then(Value::as_array)
                        .ok_or_else(|| bad("allowed_tools needs a tools array"))?;
                    let mut tools = Vec::new();
                    for t in list {
                        let name = t
                            .get("function")
                            .and_then(|f| f.get("name"))
                            .or_else(|| t.get("name"))
                            .and_then(Value::as_str)
                            .ok_or_else(|| bad("each allowed tool needs function.name"))?;
                        tools.push(name.to_owned());
                    }
                    Ok(Self::AllowedTools {
                        mode: Box::new(mode),
                        tools,
                    })
                }
                _ => Err(bad(
                    "tool_choice object must have type function or allowed_tools",
                )),
            },
            _ => Err(bad("tool_choice must be a string or an object")),
        }
    }

    /// The mode and the tools that may be called, in `tools`' order.
    ///
    /// # Errors
    /// [`ToolError::Definition`] naming a tool that `tools` holds more than once (every
    /// family's [`ToolCallFormat::structural_tag`] resolves its choice here, so none
    /// accepts such a list); [`ToolError::UnknownTool`] for a named or allowed tool that
    /// `tools` lacks; [`ToolError::Choice`] for `required` with no tools.
    pub fn resolve<'t>(&self, tools: &'t [Tool]) -> Result<(CallMode, Vec<&'t Tool>), ToolError> {
        let mut seen = std::collections::HashSet::new();
        if let Some(t) = tools.iter().find(|t| !seen.insert(t.name.as_str())) {
            return Err(ToolError::Definition {
                tool: t.name.clone(),
                reason: "the tool list holds this name more than once; a call to it \
                         could not say which tool it means"
                    .into(),
            });
        }
        let unknown = |name: &str| ToolError::UnknownTool {
            name: name.to_owned(),
            known: tools.iter().map(|t| t.name.clone()).collect(),
        };
        let (mode, allowed): (CallMode, Vec<&Tool>) = match self {
            Self::None => (CallMode::None, Vec::new()),
            Self::Auto => (CallMode::Auto, tools.iter().collect()),
            Self::Required => (CallMode::Required, tools.iter().collect()),
            Self::Function(name) => {
                let t = tools
                    .iter()
                    .find(|t| &t.name == name)
                    .ok_or_else(|| unknown(name))?;
                (CallMode::Forced, vec![t])
            }
            Self::AllowedTools { mode, tools: names } => {
                for n in names {
                    if !tools.iter().any(|t| &t.name == n) {
                        return Err(unknown(n));
                    }
                }
                let allowed = tools.iter().filter(|t| names.contains(&t.name)).collect();
                let m = if **mode == Self::Required {
                    CallMode::Required
                } else {
                    CallMode::Auto
                };
                (m, allowed)
            }
        };
        if mode == CallMode::Required && allowed.is_empty() {
            return Err(ToolError::Choice(
                "tool_choice \"required\" needs at least one tool".into(),
            ));
        }
        if mode == CallMode::Auto && allowed.is_empty() {
            return Ok((CallMode::None, allowed));
        }
        Ok((mode, allowed))
    }
}

/// One call read from model output (OpenAI's `tool_calls[i]`, with `arguments` parsed).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The id the model wrote, where the format carries one (Kimi's `functions.NAME:IDX`,
    /// Mistral's 9-character ids); keep it as the OpenAI id.
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// The arguments object, keys in the model's order.
    pub arguments: Value,
}

impl ToolCall {
    /// A call without an id.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: None,
            name: name.into(),
            arguments,
        }
    }

    /// The arguments deserialised into `I` (the type a tool was built from with
    /// [`Tool::from_types`]).
    ///
    /// # Errors
    /// [`ToolError::Deserialize`] with serde's message.
    pub fn arguments_as<I: DeserializeOwned>(&self) -> Result<I, ToolError> {
        serde_json::from_value(self.arguments.clone()).map_err(|e| ToolError::Deserialize {
            tool: self.name.clone(),
            message: e.to_string(),
        })
    }

    /// The OpenAI wire form: `{"id", "type": "function", "function": {"name",
    /// "arguments": "<JSON text>"}}`, non-ASCII unescaped and key order kept.
    pub fn to_openai(&self) -> Value {
        let mut v = serde_json::json!({"type": "function", "function": {
            "name": self.name, "arguments": self.arguments.to_string()}});
        if let Some(id) = &self.id {
            v["id"] = Value::String(id.clone());
        }
        v
    }
}

/// Why a call in model output could not be read.
#[derive(Clone, Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum ToolParseError {
    /// The call names a tool that is not in the list.
    #[error("the call names {name:?}, which is not one of the offered tools")]
    UnknownTool {
        /// The name written.
        name: String,
    },
    /// The name cannot be a tool name (empty, whitespace, template braces).
    #[error("{name:?} is not a valid tool name")]
    InvalidName {
        /// The name written.
        name: String,
    },
    /// A JSON body or argument did not parse.
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// The call's envelope is wrong (what was expected is in the message).
    #[error("{0}")]
    Syntax(String),
    /// The output ended inside the call.
    #[error("the output ended inside the call")]
    Unterminated,
}

/// A call the parser found but could not read. Its text also stays in
/// [`ParsedOutput::content`].
#[derive(Clone, Debug, PartialEq)]
pub struct MalformedToolCall {
    /// The offending text, from the call's begin marker to its end marker (or the end).
    pub text: String,
    /// Where `text` starts in the parsed output, in bytes.
    pub offset: usize,
    /// What was wrong.
    pub error: ToolParseError,
}

/// Model output split into what the user sees, the reasoning, and the calls (the parsed
/// result shape of the tool-call format notes, section 1).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParsedOutput {
    /// Text outside calls and reasoning (whitespace next to markers trimmed; pieces before
    /// and after calls joined by `\n`); `None` when there is none.
    pub content: Option<String>,
    /// The reasoning block's text, for families that have one.
    pub reasoning: Option<String>,
    /// The calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Calls that could not be read, in order.
    pub errors: Vec<MalformedToolCall>,
}

/// What a format's incremental parse knows about a prefix of the output. Every field only
/// grows as more text arrives (the [`StreamingParser`] relies on it): text that may still
/// turn out to be the start of a marker, and whitespace that may end up next to one, is
/// not in `content` or `reasoning` until the end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartialOutput {
    /// Reasoning text so far.
    pub reasoning: String,
    /// Content so far.
    pub content: String,
    /// Calls begun so far.
    pub calls: Vec<PartialCall>,
    /// Malformed calls so far.
    pub errors: Vec<MalformedToolCall>,
    /// Streaming support: the last point of this parse that no later text can change (see
    /// [`Settled`]), for formats that implement [`ToolCallFormat::parse_partial_from`].
    /// A custom format leaves it `None` (always correct: streaming then re-parses the
    /// whole text). When set, its offset is a byte offset in the `text` the parser was
    /// given (the caller's coordinates, never those of a slice it took) at which a parse
    /// of the rest can restart.
    #[doc(hidden)]
    pub settled: Option<Settled>,
}

/// A point in the output up to which a partial parse is final whatever text follows:
/// just after a finished (or malformed) call, or inside plain content or reasoning just
/// before the tail held back because it may start a marker ([`Settled::content_open`],
/// [`Settled::reasoning_open`]), so that the parse of the rest can restart there
/// ([`ToolCallFormat::parse_partial_from`]). The [`StreamingParser`] re-parses only from
/// the last such point.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// The byte offset in the text.
    pub offset: usize,
    /// How many bytes of [`PartialOutput::content`] come from the text before `offset`.
    pub content: usize,
    /// How many bytes of [`PartialOutput::reasoning`] come from the text before `offset`
    /// (reasoning after it, in families that have several reasoning messages, is joined
    /// with `\n` as content is).
    pub reasoning: usize,
    /// How many of [`PartialOutput::calls`] come from the text before `offset`.
    pub calls: usize,
    /// How many of [`PartialOutput::errors`] come from the text before `offset`.
    pub errors: usize,
    /// The parser's state at `offset`, as the format defines it (0: free text).
    pub state: u8,
    /// Where the construct that `offset` lies inside began, as the format defines it (the
    /// `[TOOL_CALLS]` of a Mistral call array settled between its elements; 0 otherwise):
    /// a malformed run reported later may span from there.
    pub anchor: usize,
    /// `offset` lies inside a piece of content (plain text outside markers, just before
    /// the held-back tail that may start a marker or be whitespace next to one): the text
    /// from `offset` continues that piece, and the content parsed from there is exactly
    /// what follows the `content` bytes (not trimmed at its start; a later piece carries
    /// its joining `\n`).
    pub content_open: bool,
    /// `offset` lies inside reasoning text, which the text from `offset` continues (the
    /// reasoning parsed from there is exactly what follows the `reasoning` bytes).
    pub reasoning_open: bool,
}

/// One call as far as it has arrived.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartialCall {
    /// The id, once known.
    pub id: Option<String>,
    /// The name, once complete.
    pub name: Option<String>,
    /// The raw text of the arguments so far (JSON text for JSON families; a JSON string
    /// literal where the model double-encoded them, which the [`StreamingParser`] sends
    /// decoded, see [`StreamEvent::ToolCallArguments`]).
    pub arguments_text: String,
    /// The finished call, once its end has arrived.
    pub complete: Option<ToolCall>,
}

impl PartialOutput {
    /// Drops what comes from the text before `from` (a whole parse made a parse from
    /// `from` on, see [`ToolCallFormat::parse_partial_from`]).
    fn drop_settled(&mut self, from: &Settled) {
        if from.offset == 0 {
            return;
        }
        // Pieces are joined by `\n`: the one after the settled text loses it, unless the
        // settled point lies inside a piece (what follows is then kept exactly).
        let cut = |s: &str, len: usize, open: bool| {
            let len = len.min(s.len());
            len + usize::from(!open && len > 0 && s[len..].starts_with('\n'))
        };
        let content_cut = cut(&self.content, from.content, from.content_open);
        let reasoning_cut = cut(&self.reasoning, from.reasoning, from.reasoning_open);
        self.content.drain(..content_cut);
        self.reasoning.drain(..reasoning_cut);
        self.calls.drain(..from.calls.min(self.calls.len()));
        self.errors.drain(..from.errors.min(self.errors.len()));
        self.settled = self
            .settled
            .filter(|s| s.offset > from.offset)
            .map(|s| Settled {
                content: s.content.saturating_sub(content_cut),
                reasoning: s.reasoning.saturating_sub(reasoning_cut),
                calls: s.calls.saturating_sub(from.calls),
                errors: s.errors.saturating_sub(from.errors),
                ..s
            });
    }

    /// The parsed result of a whole output (`content`/`reasoning` become `None` when
    /// empty; only complete calls are kept).
    pub fn into_parsed(self) -> ParsedOutput {
        let opt = |s: String| if s.is_empty() { None } else { Some(s) };
        ParsedOutput {
            content: opt(self.content),
            reasoning: opt(self.reasoning),
            tool_calls: self.calls.into_iter().filter_map(|c| c.complete).collect(),
            errors: self.errors,
        }
    }
}

/// One step of a streamed parse ([`StreamingParser::push`]).
///
/// Order: the events of one `push` (or `finish`) come as `Reasoning`, then `Content`, then
/// the calls and malformed calls in output order: per call its `ToolCallStart`,
/// `ToolCallArguments` and `ToolCallEnd`, and each `Malformed` where the malformed call
/// stands among them (a malformed call before a good one in the same delta is reported
/// before the good one's events). So each kind is in output order (content deltas
/// concatenate to the content, calls arrive by index, a call's own events in sequence),
/// but text is not interleaved with calls by position: when one delta holds
/// `Hi <tool_call>…</tool_call> bye`, `Content("Hi\nbye")` comes before the call's
/// events. A consumer that needs the position of a call relative to the text should
/// parse the whole output ([`ToolCallFormat::parse`]) or push smaller deltas.
///
/// Indices: the `index` of `ToolCallStart`, `ToolCallArguments` and `ToolCallEnd` is
/// the call's position in [`ParsedOutput::tool_calls`] of the whole output, so the ends
/// come as 0, 1, 2, … with no gap; a malformed call takes no index. At most one call is
/// open (started, not ended) at a time.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// More reasoning text.
    Reasoning(String),
    /// More content text.
    Content(String),
    /// A call began; its name is known.
    ToolCallStart {
        /// 0-based position among the calls the whole-output parse returns
        /// ([`ParsedOutput::tool_calls`]): the number of calls ended before it. A call
        /// that started and then turned out malformed is ended by its `Malformed`, and
        /// the next call starts at the same index.
        index: usize,
        /// The id, if the format carries one and it is known.
        id: Option<String>,
        /// The function's name.
        name: String,
    },
    /// More argument text of call `index`, as an OpenAI-compatible server forwards it in
    /// `function.arguments`.
    ///
    /// * JSON families (`hermes`, `llama3_json`, `json`/`json_array`, `mistral`,
    ///   `deepseek_v3`, `deepseek_v31`, `kimi_k2`, `harmony`/`openai`, `glm4`): the
    ///   deltas of a call concatenate to a JSON text that parses to the same value as
    ///   `ToolCallEnd`'s `call.arguments` (the model's own text of the object, key order
    ///   and spacing kept). Arguments the model wrote as a JSON *string* holding the
    ///   object (`"arguments": "{\"city\": \"P\"}"`) stream the string's decoded
    ///   content, as it arrives, never half an escape; nothing is sent until it starts
    ///   with `{` (after whitespace). A string whose content is not a JSON object makes
    ///   the call malformed, as [`ToolCallFormat::parse`] reports it: its `Malformed`
    ///   ends the call and the deltas sent for it are void.
    /// * XML-style families (`qwen3_coder`/`qwen3_xml`, `glm45`, `glm47`, `deepseek_v32`,
    ///   `deepseek_v4`, `minimax_m2`): a JSON text
    ///   built from the parameters as they arrive (`{"city": "Par` …), with the same
    ///   guarantee: the deltas concatenate to a JSON text of `call.arguments`.
    /// * `pythonic`: the raw keyword-argument text between the parentheses
    ///   (`city='Paris', days=3`), Python syntax, not JSON; use `call.arguments` of
    ///   `ToolCallEnd` for the value.
    ToolCallArguments {
        /// The call.
        index: usize,
        /// The text (see above).
        delta: String,
    },
    /// Call `index` is complete.
    ToolCallEnd {
        /// The call.
        index: usize,
        /// The finished call (same as the whole-output parse gives).
        call: ToolCall,
    },
    /// A call could not be read (one entry of [`ParsedOutput::errors`]). If it had
    /// started (a `ToolCallStart` was sent; at most one call is open), this ends it: no
    /// `ToolCallEnd` follows, the argument deltas sent for it are void, and the next call
    /// starts at the same index (indices count only the calls the whole-output parse
    /// returns). A malformed call that never started takes no index.
    Malformed(MalformedToolCall),
}

/// How arguments are constrained in the structural tags formats build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ArgumentSchemas {
    /// Every tool's arguments follow its input schema (the default: schema accuracy 100%).
    #[default]
    Always,
    /// Only tools with `strict: true`; others get any JSON object (vLLM's behaviour).
    StrictOnly,
}

/// Options every format reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatOptions {
    /// The output begins with the family's reasoning block (`<think>…</think>`), in which
    /// call markers are forbidden. Off: the prompt already closed reasoning.
    pub reasoning: bool,
    /// Which tools' arguments follow their schemas.
    pub arguments: ArgumentSchemas,
    /// Object properties in any order (required ones still present, none twice).
    pub any_order: bool,
    /// `auto`/`required`: free text may follow each call (XGrammar's looser behaviour).
    /// Off (default): after the first call only further calls, then end of turn.
    pub text_after_calls: bool,
    /// Under `required`, content may precede the calls where the family's template
    /// allows it (section 5.4; default on). Off: the output starts with the first call —
    /// what small models need, which given room for prose may never call.
    pub leading_text: bool,
    /// The most whitespace characters in one place inside JSON arguments (default 12:
    /// enough for pretty-printed JSON a few levels deep; `None`: unbounded). The cap
    /// stops whitespace loops (section 5.4, rule 4 of the format notes; XGrammar's
    /// `max_whitespace_cnt`).
    pub max_whitespace: Option<u32>,
    /// The most line feeds in one place of whitespace inside JSON arguments (default 1:
    /// pretty-printed JSON puts one line break then indentation between tokens; `None`:
    /// as many as `max_whitespace` allows). Chat templates write arguments on one line
    /// (`json.dumps`), so runs of blank lines are a model drifting, not a layout; see
    /// [`tokensieve::JsonSchemaOptions::max_whitespace_newlines`].
    pub max_whitespace_newlines: Option<u32>,
    /// The most digits in one run of a number inside JSON arguments: the integer part,
    /// the fraction, the exponent (default 24: an `f64` or `i64` written out plainly needs
    /// at most about 20 digits in a run; `None`: unbounded). The cap stops digit loops
    /// such as `0.0000000…` that run a small model out of tokens; see
    /// [`tokensieve::JsonSchemaOptions::max_number_digits`].
    pub max_number_digits: Option<u32>,
    /// Arguments may hold only declared properties: object schemas with `properties` and
    /// no word on other properties are closed (`additionalProperties: false`), as
    /// XGrammar's strict mode and OpenAI's strict tools do (default on; off: the JSON
    /// Schema default, where a model may add any key).
    pub closed_objects: bool,
    /// JSON strings in arguments may hold the family's own marker strings as written
    /// (`<tool_call>`, `</tool_call>` for Hermes; see each format's docs). Off (default):
    /// they are refused there, since a marker inside an argument string ends or opens a
    /// call for marker-scanning parsers (vLLM's) and is almost always a model looping on
    /// its own syntax. Escaped spellings (`\u003ctool_call>`) stay allowed either way;
    /// markers that are special tokens are never grammar text.
    pub markers_in_strings: bool,
}

impl Default for FormatOptions {
    fn default() -> Self {
        Self {
            reasoning: false,
            arguments: ArgumentSchemas::Always,
            any_order: false,
            text_after_calls: false,
            leading_text: true,
            max_whitespace: Some(12),
            max_whitespace_newlines: Some(1),
            max_number_digits: Some(24),
            closed_objects: true,
            markers_in_strings: false,
        }
    }
}

/// A model family's tool-call syntax: the structural tag that constrains the output, the
/// parser that reads it back, and renderers for prompts.
///
/// Implement it for a fine-tuned model's own syntax and [`register_format`] it; the
/// parser side needs only [`ToolCallFormat::parse_partial`] (whole-output parsing and
/// streaming are built on it).
///
/// # Writing `parse_partial` for a custom format
/// The [`StreamingParser`] calls `parse_partial(prefix, tools, false)` on each longer
/// prefix of the output and sends what grew, then `parse_partial(text, tools, true)` at
/// the end; it streams the same as [`ToolCallFormat::parse`] only if every field of the
/// result only grows from one prefix to the next (see [`PartialOutput`]). So while
/// `at_end` is false:
/// * hold back the end of the text that may still become a marker: emit as content only
///   the first [`stable_len`]`(piece, &[markers], trim)` bytes of the text after the last
///   marker (`Hi <tool_` keeps `<tool_` back until the next delta decides it), and the
///   whole piece once `at_end` is true;
/// * trim whitespace the same way in both cases (`trim` in [`stable_len`]), since
///   whitespace at the end may end up next to a marker;
/// * push a [`PartialCall`] once its start is certain, its `arguments_text` only ever
///   extended, `complete` set once its end has arrived.
///
/// Leave [`PartialOutput::settled`] `None` (the default) unless the format also
/// implements the hidden `parse_partial_from`: a settled point is a byte offset in the
/// caller's `text` (the coordinates of the `text` argument, not of a slice the parser
/// made) up to which nothing can change, and the streaming parser restarts there.
/// `None` is always correct: the stream then re-parses the whole text on each delta.
pub trait ToolCallFormat: Send + Sync {
    /// The registry name (`hermes`, `llama3_json`, ...).
    fn name(&self) -> &str;

    /// The structural tag for `tools` under `choice`; `parallel` = OpenAI's
    /// `parallel_tool_calls` (off: at most one call, enforced by the grammar).
    ///
    /// # Errors
    /// [`ToolError::UnknownTool`] / [`ToolError::Choice`] from [`ToolChoice::resolve`];
    /// [`ToolError::Unsupported`] when the family cannot express a tool's schema.
    fn structural_tag(
        &self,
        tools: &[Tool],
        choice: &ToolChoice,
        parallel: bool,
    ) -> Result<StructuralTag, ToolError>;

    /// Parses a prefix of the output (`at_end`: it is the whole output). Must be monotone:
    /// see [`PartialOutput`], and the trait's notes on writing it (hold back a partial
    /// marker at the end with [`stable_len`] while `at_end` is false; leave `settled`
    /// `None` or give an offset in `text`). `tools` names the offered tools (a call to another name is
    /// malformed; an empty list accepts any valid name) and gives the schemas that
    /// text-valued families need to type their values.
    fn parse_partial(&self, text: &str, tools: &[Tool], at_end: bool) -> PartialOutput;

    /// Streaming support: [`ToolCallFormat::parse_partial`] of `text` restarted at `from`,
    /// a [`Settled`] point an earlier parse of a prefix of `text` reported, its counts
    /// taken from the start of `text` (the default `Settled`, offset 0: from the start).
    /// The result holds only what comes from
    /// `text[from.offset..]`: no reasoning before it, the content pieces and calls after it
    /// (error offsets stay offsets in `text`), and its own settled point counted the same
    /// way.
    ///
    /// A format that reports settled points implements this to parse only from `from`
    /// (that is what makes streaming linear). The default parses all of `text` and drops
    /// what came before `from`: correct for any format, so a wrapper that forwards
    /// `parse_partial` to a built-in format streams right, though it re-parses the whole
    /// text per delta unless it forwards this method too.
    #[doc(hidden)]
    fn parse_partial_from(
        &self,
        text: &str,
        from: &Settled,
        tools: &[Tool],
        at_end: bool,
    ) -> PartialOutput {
        let mut out = self.parse_partial(text, tools, at_end);
        out.drop_settled(from);
        out
    }

    /// Parses a whole output. Never fails: unreadable calls are in
    /// [`ParsedOutput::errors`] and their text in `content`. A call that gives an
    /// argument twice (a repeated key at the top level of its JSON arguments, a repeated
    /// `<parameter=KEY>` or `<arg_key>`, a repeated keyword) is such a call, in every
    /// family ([`ToolParseError::Syntax`]: `argument "KEY" given twice`): no value is
    /// dropped silently.
    ///
    /// An output cut off inside a call (a stop token, the length limit): the call is
    /// complete when its body is — for the JSON families when its JSON is complete
    /// (Qwen3-Coder: at `</function>`; GLM's `<arg_key>` forms: only at `</tool_call>`),
    /// otherwise it is malformed ([`ToolParseError::Unterminated`]). An end marker cut
    /// off at the very end of the output (`…}}</tool_ca`, `…}<|tool_call_e`,
    /// `…<｜tool▁calls▁e`), after a call that is complete without it, is that call's
    /// (or section's) end: neither content nor an error. A partial *begin* marker at the
    /// end (`Let me see <tool_c`) is content. The families whose calls sit in a
    /// bracketed list differ: a `json` array or a `pythonic` list missing its closing `]`
    /// (`[{"name": …, "arguments": {…}}`, `[f(a=1)`) keeps its complete calls and reports
    /// the rest of the list (from just after the last complete call, possibly empty) as
    /// [`ToolParseError::Unterminated`]. An output that ends inside a call's header
    /// (Mistral's `[TOOL_CALLS]sea`, cut in the name) is `Unterminated` too.
    /// In those list families a malformed element (`{"name": "nope", …}`, `nope(a=1)`)
    /// is reported with the element's own text in the error, and kept in `content` inside
    /// the list's brackets (`[nope(a=1)]`, one piece per element), so that no model output
    /// is dropped while the list's valid calls stay calls; the separators between elements
    /// are the list's. Bare pythonic calls (no brackets) keep the element's text as is.
    /// A [`StreamingParser`] gives the same.
    fn parse(&self, text: &str, tools: &[Tool]) -> ParsedOutput {
        self.parse_partial(text, tools, true).into_parsed()
    }

    /// `calls` in the family's syntax, as the model writes them. For calls to offered
    /// tools with arguments valid under their schemas, the family's grammar accepts the
    /// text and [`ToolCallFormat::parse`] gives `calls` back, except for what the family
    /// cannot write, which is rendered as is and does not round trip: Qwen3-Coder string
    /// values holding `</parameter>`, `</function>` or `</tool_call>` (raw text has no
    /// escape; [`Qwen3Coder::try_render_calls`] refuses them), GLM values holding
    /// `</arg_value>` ([`Glm::try_render_calls`]), pythonic names that are not Python
    /// identifiers ([`Pythonic::try_render_calls`]). Never fails and never
    /// panics.
    fn render_calls(&self, calls: &[ToolCall]) -> String;

    /// A tool's `result` for `call`, in the family's tool-response form (the text that
    /// goes into the next prompt's tool turn).
    fn render_tool_result(&self, call: &ToolCall, result: &Value) -> String;

    /// The tools' declaration for the prompt, as the family's chat template writes it (or
    /// a plain description for families whose template places tools elsewhere).
    fn render_tools_prompt(&self, tools: &[Tool]) -> String;
}

impl<'f> dyn ToolCallFormat + 'f {
    /// A streaming parser over this format (see [`StreamingParser`]; for a concrete
    /// format, [`StreamingParser::new`]).
    pub fn streaming_parser<'a>(&'a self, tools: &'a [Tool]) -> StreamingParser<'a> {
        StreamingParser::new(self, tools)
    }
}

/// Errors of tool definitions, tool choices, tag building and tool execution.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolError {
    /// A tool definition is wrong.
    #[error("tool {tool:?}: {reason}")]
    Definition {
        /// The tool's name (empty when it has none).
        tool: String,
        /// What is wrong and where.
        reason: String,
    },
    /// A name that is not among the tools.
    #[error("no tool named {name:?} (tools: {known:?})")]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The tools' names.
        known: Vec<String>,
    },
    /// A tool_choice that cannot be read or met.
    #[error("tool_choice: {0}")]
    Choice(String),
    /// The family cannot express something.
    #[error("format {format}: {reason}")]
    Unsupported {
        /// The format's name.
        format: String,
        /// What it cannot express.
        reason: String,
    },
    /// Arguments that do not validate against the input schema.
    #[error("arguments of {tool:?} do not match its input schema: {}", errors.join("; "))]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// One message per violation, each with its JSON pointer.
        errors: Vec<String>,
    },
    /// A result that does not validate against the output schema.
    #[error("result of {tool:?} does not match its output schema: {}", errors.join("; "))]
    InvalidOutput {
        /// The tool.
        tool: String,
        /// One message per violation, each with its JSON pointer.
        errors: Vec<String>,
    },
    /// Arguments that do not deserialise into the requested type.
    #[error("arguments of {tool:?} do not deserialise: {message}")]
    Deserialize {
        /// The tool.
        tool: String,
        /// serde's message.
        message: String,
    },
    /// The tool has no function to run.
    #[error("tool {tool:?} has no function to execute")]
    NotExecutable {
        /// The tool.
        tool: String,
    },
    /// The tool's function returned an error.
    #[error("tool {tool:?} failed: {message}")]
    Execution {
        /// The tool.
        tool: String,
        /// The function's message.
        message: String,
    },
    /// A format name that is already registered.
    #[error("a tool-call format named {0:?} is already registered")]
    DuplicateFormat(String),
    /// A format name that cannot be registered: empty (or only whitespace), or differing
    /// only in case from a registered name (lookup ignores case).
    #[error("cannot register a tool-call format named {name:?}: {reason}")]
    InvalidFormatName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Builds a format with the given options (what [`register_format`] stores).
pub type FormatFactory = dyn Fn(&FormatOptions) -> Arc<dyn ToolCallFormat> + Send + Sync;

type Registry = RwLock<BTreeMap<String, Arc<FormatFactory>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut map: BTreeMap<String, Arc<FormatFactory>> = BTreeMap::new();
        for (name, factory) in builtin_formats() {
            map.insert(name.to_owned(), factory);
        }
        RwLock::new(map)
    })
}

/// The formats tokensieve ships, under the names vLLM uses for their parsers.
fn builtin_formats() -> Vec<(&'static str, Arc<FormatFactory>)> {
    vec![
        (
            "hermes",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Hermes::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "deepseek_v3",
            Arc::new(|o: &FormatOptions| {
                Arc::new(DeepSeek::new(DeepSeekVersion::V3, o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "harmony",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Harmony::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "openai",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Harmony::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "mistral",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Mistral::new(MistralSyntax::NameArgs, o.clone()))
                    as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "kimi_k2",
            Arc::new(|o: &FormatOptions| {
                Arc::new(KimiK2::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "deepseek_v31",
            Arc::new(|o: &FormatOptions| {
                Arc::new(DeepSeek::new(DeepSeekVersion::V31, o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "deepseek_v32",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Dsml::new(DsmlVersion::V32, o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "deepseek_v4",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Dsml::new(DsmlVersion::V4, o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "minimax_m2",
            Arc::new(|o: &FormatOptions| {
                Arc::new(MiniMaxM2::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "glm4",
            Arc::new(|o: &FormatOptions| Arc::new(Glm4::new(o.clone())) as Arc<dyn ToolCallFormat>),
        ),
        (
            "glm45",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Glm::glm45(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "glm47",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Glm::glm47(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "qwen3_coder",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Qwen3Coder::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "qwen3_xml",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Qwen3Coder::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "json",
            Arc::new(|o: &FormatOptions| {
                Arc::new(JsonArray::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "llama3_json",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Llama3Json::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "pythonic",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Pythonic::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "json_array",
            Arc::new(|o: &FormatOptions| {
                Arc::new(JsonArray::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "granite",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Granite::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "granite-20b-fc",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Granite20bFc::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "internlm",
            Arc::new(|o: &FormatOptions| {
                Arc::new(InternLm::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "llama3_function_tag",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Llama3FunctionTag::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
        (
            "phi4_mini_json",
            Arc::new(|o: &FormatOptions| {
                Arc::new(Phi4Mini::new(o.clone())) as Arc<dyn ToolCallFormat>
            }),
        ),
    ]
}

/// The format registered under `name` (ignoring case), with default [`FormatOptions`].
pub fn format_by_name(name: &str) -> Option<Arc<dyn ToolCallFormat>> {
    format_by_name_with(name, &FormatOptions::default())
}

/// The format registered under `name`, built with `options`. Names are matched ignoring
/// case (`Hermes` finds `hermes`); [`register_format`] keeps names that differ only in
/// case out, so at most one matches.
pub fn format_by_name_with(name: &str, options: &FormatOptions) -> Option<Arc<dyn ToolCallFormat>> {
    let r = registry().read().ok()?;
    let factory = match r.get(name) {
        Some(f) => f.clone(),
        None => r
            .iter()
            .find(|(k, _)| same_format_name(k, name))
            .map(|(_, f)| f.clone())?,
    };
    drop(r);
    Some(factory(options))
}

/// Whether two format names are the same ignoring case.
fn same_format_name(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

/// Every registered name, sorted.
pub fn format_names() -> Vec<String> {
    registry()
        .read()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default()
}

/// Registers a format under a new name (the extension point vLLM offers with parser
/// plugins).
///
/// Names are case-insensitive: lookup ([`format_by_name`]) ignores case, and a name that
/// differs from a registered one only in case (`Hermes` next to `hermes`) is refused, as
/// it would be ambiguous. The name is kept as given ([`format_names`] lists it so).
///
/// # Errors
/// The registry is unchanged on every error.
/// [`ToolError::DuplicateFormat`] when the name is taken exactly;
/// [`ToolError::InvalidFormatName`] when it is empty or only whitespace, or differs only
/// in case from a registered name (the message names that one).
pub fn register_format(
    name: impl Into<String>,
    factory: impl Fn(&FormatOptions) -> Arc<dyn ToolCallFormat> + Send + Sync + 'static,
) -> Result<(), ToolError> {
    let name = name.into();
    if name.trim().is_empty() {
        return Err(ToolError::InvalidFormatName {
            name,
            reason: "a format name must not be empty or only whitespace".into(),
        });
    }
    let mut r = registry()
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if r.contains_key(&name) {
        return Err(ToolError::DuplicateFormat(name));
    }
    if let Some(existing) = r.keys().find(|k| same_format_name(k, &name)) {
        let reason = format!(
            "it differs only in case from the registered {existing:?} (format names are \
             matched ignoring case)"
        );
        return Err(ToolError::InvalidFormatName { name, reason });
    }
    r.insert(name, Arc::new(factory));
    Ok(())
}
