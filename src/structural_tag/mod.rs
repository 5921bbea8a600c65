//! Structural tags: XGrammar's `structural_tag` JSON (free text, reasoning spans, tool calls in
//! a model's own syntax) turned into grammar IR.
//!
//! A structural tag is a tree of formats ([`Format`]): primitives (`const_string`,
//! `json_schema`, `regex`, `grammar`, `any_text`, `token`), compositions (`sequence`, `or`,
//! `optional`, `plus`, `star`, `repeat`) and tags (`tag`, `triggered_tags`,
//! `tags_with_separator`, `dispatch`, `token_triggered_tags`). The JSON is XGrammar's,
//! unchanged (`docs/structural_tag/structural_tag.md` in mlc-ai/xgrammar), so a tag moves
//! between engines as is; [`StructuralTag::from_json`] reads it with the JSON path of any
//! mistake, and [`StructuralTag::to_json`] writes it back.
//!
//! ```
//! use tokensieve::{GrammarCompiler, GrammarMatcher, Vocabulary};
//!
//! let tokens: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).chain([b"<eos>".to_vec()]).collect();
//! let vocab = Vocabulary::from_token_bytes(&tokens, &[128], &[128]).unwrap();
//! let tag = r#"{"type": "structural_tag", "format": {"type": "sequence", "elements": [
//!     {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
//!     {"type": "triggered_tags", "triggers": ["<function="], "tags": [
//!         {"type": "tag", "begin": "<function=get_weather>", "end": "</function>",
//!          "content": {"type": "json_schema", "json_schema": {"type": "object",
//!              "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}]}}"#;
//! let compiled = GrammarCompiler::new(vocab).compile_structural_tag(tag).unwrap();
//! let mut m = GrammarMatcher::new(compiled.clone());
//! assert!(m.accept_string(r#"<think>hmm</think>Sure. <function=get_weather>{"city": "Paris"}</function> done"#));
//! assert!(m.is_completed());
//! let mut m = GrammarMatcher::new(compiled);
//! assert!(!m.accept_string(r#"<think>hmm</think>Sure. <function=get_weather>{"town": "Paris"}</function>"#));
//! ```
//!
//! Semantics, where XGrammar's documentation leaves room:
//! * **A defaulted `type`.** Where XGrammar's pydantic models type a field as one format
//!   model, its `type` may be left out, as XGrammar reads it: a `tags` list item is a `tag`,
//!   an object `begin`/`end` of a tag is a `token`, and an object with a `format` and no
//!   `type` is a structural tag. Elsewhere `type` is required (XGrammar's Python union of
//!   all formats is discriminated by it; its C++ reader instead guesses the format from the
//!   fields, which tokensieve does not do: a guess would hide a typo).
//! * **Special tokens are atomic.** Text (a `const_string`, a tag's `begin`/`end`, a
//!   trigger) that contains the text of a special token of the vocabulary the tag is
//!   compiled against matches that token there, and only that token; elsewhere, and in
//!   vocabularies where the marker is ordinary text, it is text. Free text, JSON strings and
//!   regexes never contain special tokens.
//! * **Unbounded text stops at the enclosing end.** `any_text`, the free text of
//!   `triggered_tags`/`dispatch`/`token_triggered_tags` and `any_tokens`, wherever the
//!   content of a `tag` may end with it (the last element of a `sequence`, or one followed
//!   only by parts that may be empty; a branch of an `or`; a repetition), never contains that
//!   tag's `end`s (text ends, and `token` ends naming an ordinary token, by their text). A
//!   repetition of `any_text` is one `any_text`, so its `excludes` hold across the pieces.
//! * `token`: a special token by id or text matches that token only; text naming an
//!   ordinary token matches that text (by any tokenization, so that mask and accept agree);
//!   text that is no token of the vocabulary is an error.
//! * A stop token used inside the tag (a `const_string` or an `end` that is the stop token)
//!   is a grammar terminal: it ends decoding only where nothing else may follow it.
//! * Formats nest at most [`MAX_FORMAT_DEPTH`] deep (an error beyond).
//! * `triggered_tags`: free text that never contains a trigger; where a trigger begins, one
//!   of the tags (whose `begin` starts with it). `at_least_one` makes the output start with
//!   a tag; `stop_after_first` ends it after the first tag. Each trigger must start some
//!   tag's `begin` and each `begin` exactly one trigger.
//! * `tags_with_separator`: only tags and separators, no text.
//! * `json_schema` uses [`crate::JsonSchemaOptions::default`] (flexible whitespace; capped
//!   at `max_whitespace` characters in one place with at most `max_whitespace_newlines`
//!   line feeds, number digit runs at `max_number_digits` digits, and free JSON strings
//!   never holding any of `string_excludes` (style `json`), when those tokensieve extension
//!   keys are set) with the
//!   format's `any_order`; `style: "qwen_xml"` writes the properties of an object schema as
//!   `<parameter=NAME>\nVALUE\n</parameter>` joined by `\n`, in declared order, string values
//!   raw (never containing `</parameter>`), other values JSON. `style: "glm_xml"` (GLM-4.5/4.6)
//!   writes them as `<arg_key>NAME</arg_key>\n<arg_value>VALUE</arg_value>` joined by `\n`,
//!   and `style: "glm47_xml"` (GLM-4.7/5) the same with no newlines; string values raw (never
//!   containing `</arg_value>`), other values JSON. `style: "minimax_xml"` (MiniMax-M2)
//!   writes `<parameter name="NAME">VALUE</parameter>` joined by `\n`; `style:
//!   "deepseek_xml"` (DeepSeek V3.2 / V4 DSML) writes
//!   `<｜DSML｜parameter name="NAME" string="true">RAW</｜DSML｜parameter>` for a string
//!   value and `string="false">JSON` for any other, joined by `\n`. XGrammar has
//!   `qwen_xml`, `glm_xml`, `minimax_xml` and `deepseek_xml` with free whitespace around
//!   items and values (and a free `string` attribute); tokensieve's styles take the exact
//!   text the models' templates write. `any_order` is refused with every XML style.
//! * Not supported (typed errors): `exclude_token` and `token_dispatch` (one arbitrary token
//!   has no text grammar), styles other than `json`, `qwen_xml`, `glm_xml`, `glm47_xml`,
//!   `minimax_xml` and `deepseek_xml`. `any_tokens` is read as
//!   free text: no special token at all may occur in it, which is stricter than XGrammar.

mod format;
mod lower;
mod text;
pub mod xml;

pub use format::{Delimiter, Format, JsonStyle, StructuralTag, Tag, TokenSpec, MAX_FORMAT_DEPTH};

use crate::grammar::{EbnfError, Grammar};
use crate::json_schema::JsonSchemaError;
use crate::regex::RegexError;
use crate::vocab::Vocabulary;
use serde_json::Value;

/// Why a structural tag could not be read or turned into a grammar. Every variant names the
/// JSON path of the offending place, such as `format.elements[1].tags[0].begin`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StructuralTagError {
    /// The text is not JSON (serde_json's message gives line and column).
    #[error(
        "the structural tag is not valid JSON: {}",
        crate::json_schema::json_error_message(
            .0,
            "nest fewer formats (`sequence`, `or`, `tag`...), or pass a `serde_json::Value` \
             parsed without that limit"
        )
    )]
    Json(#[source] serde_json::Error),
    /// A field is missing, has the wrong JSON type or a bad value, or is unknown; or the
    /// `type` is unknown.
    #[error("structural tag at {path}: {reason}")]
    Field {
        /// Where (`format.elements[0]`).
        path: String,
        /// What is wrong, and what was expected.
        reason: String,
    },
    /// A format, style or combination tokensieve does not support.
    #[error("structural tag at {path}: unsupported {what}")]
    Unsupported {
        /// Where.
        path: String,
        /// What.
        what: String,
    },
    /// A trigger that starts no tag's `begin`, or a tag whose `begin` starts with no
    /// trigger (or with several).
    #[error("structural tag at {path}: {reason}")]
    Trigger {
        /// Where (`format.triggers[1]` or `format.tags[0].begin`).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A `token` that the vocabulary does not have.
    #[error("structural tag at {path}: {reason}")]
    Token {
        /// Where.
        path: String,
        /// What is wrong (the token as written, and the vocabulary's size).
        reason: String,
    },
    /// A `json_schema` format's schema was refused.
    #[error("structural tag at {path}.json_schema: {source}")]
    Schema {
        /// The path of the `json_schema` format.
        path: String,
        /// The schema compiler's error (its JSON pointer is inside the schema).
        #[source]
        source: Box<JsonSchemaError>,
    },
    /// A `regex` format's pattern was refused.
    #[error("structural tag at {path}.pattern: {source}")]
    Regex {
        /// The path of the `regex` format.
        path: String,
        /// The regex front end's error.
        #[source]
        source: RegexError,
    },
    /// A `grammar` format's EBNF was refused.
    #[error("structural tag at {path}.grammar: {source}")]
    Ebnf {
        /// The path of the `grammar` format.
        path: String,
        /// The EBNF error (line:column inside the grammar text).
        #[source]
        source: EbnfError,
    },
}

/// Something that can be read as a structural tag: JSON text, a `serde_json::Value`, or a
/// [`StructuralTag`].
pub trait StructuralTagSource {
    /// The structural tag.
    ///
    /// # Errors
    /// Those of [`StructuralTag::from_json_str`] / [`StructuralTag::from_json`].
    fn to_structural_tag(&self) -> Result<std::borrow::Cow<'_, StructuralTag>, StructuralTagError>;
}

impl StructuralTagSource for str {
    fn to_structural_tag(&self) -> Result<std::borrow::Cow<'_, StructuralTag>, StructuralTagError> {
        StructuralTag::from_json_str(self).map(std::borrow::Cow::Owned)
    }
}

impl StructuralTagSource for String {
    fn to_structural_tag(&self) -> Result<std::borrow::Cow<'_, StructuralTag>, StructuralTagError> {
        self.as_str().to_structural_tag()
    }
}

impl StructuralTagSource for Value {
    fn to_structural_tag(&self) -> Result<std::borrow::Cow<'_, StructuralTag>, StructuralTagError> {
        StructuralTag::from_json(self).map(std::borrow::Cow::Owned)
    }
}

impl StructuralTagSource for StructuralTag {
    fn to_structural_tag(&self) -> Result<std::borrow::Cow<'_, StructuralTag>, StructuralTagError> {
        Ok(std::borrow::Cow::Borrowed(self))
    }
}

impl<T: StructuralTagSource + ?Sized> StructuralTagSource for &T {
    fn to_structural_tag(&self) -> Result<std::borrow::Cow<'_, StructuralTag>, StructuralTagError> {
        (**self).to_structural_tag()
    }
}

/// Turns a structural tag into a grammar (root rule `root`).
///
/// With a vocabulary, text containing one of its special tokens' texts matches that token
/// (see the module docs) and `token` formats are checked against it; without one, text is
/// text and `token` formats stay token terminals resolved when the grammar is compiled.
///
/// # Errors
/// [`StructuralTagError`] with the JSON path of the first problem.
pub fn structural_tag_to_grammar(
    tag: &StructuralTag,
    vocab: Option<&Vocabulary>,
) -> Result<Grammar, StructuralTagError> {
    lower::lower(tag, vocab, &crate::Limits::default(), false).map(|(g, _, _)| g)
}

/// As [`structural_tag_to_grammar`] under `limits` (the caller's, which hold for the
/// schemas inside the tag too), for the compile: embedded JSON Schemas compact, with
/// `tools[r]` set for the root rule of each (the deferral roots of `compiler::deferred`)
/// and `always[r]` for the rules the compile must inline (`automaton::lower::inline_rules`).
#[allow(clippy::type_complexity)]
pub(crate) fn structural_tag_to_grammar_marking_tools(
    tag: &StructuralTag,
    vocab: Option<&Vocabulary>,
    limits: &crate::Limits,
) -> Result<(Grammar, Vec<bool>, Vec<bool>), StructuralTagError> {
    lower::lower(tag, vocab, limits, true)
}

/// A Hermes-style tool-call tag in XGrammar's JSON, for the engine's unit tests (the real
/// families live in the crate `tokensieve-tools`, which the engine's own tests cannot use):
/// free text, then calls `<tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>`,
/// one tag per (name, parameters schema); `at_least_one` as `tool_choice: required`.
#[cfg(test)]
pub(crate) fn hermes_like_tag(
    functions: &[(String, serde_json::Value)],
    at_least_one: bool,
) -> StructuralTag {
    let tags: Vec<serde_json::Value> = functions
        .iter()
        .map(|(name, schema)| {
            serde_json::json!({
                "type": "tag",
                "begin": format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": "),
                "content": {"type": "json_schema", "json_schema": schema},
                "end": "}\n</tool_call>",
            })
        })
        .collect();
    StructuralTag::from_json(&serde_json::json!({
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<tool_call>"],
            "tags": tags,
            "at_least_one": at_least_one,
            "stop_after_first": false,
        }
    }))
    .expect("a valid structural tag")
}
