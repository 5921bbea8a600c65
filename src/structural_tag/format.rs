//! The structural-tag data model (XGrammar's `structural_tag` JSON) and its reader, which
//! names the JSON path of every mistake.

use super::StructuralTagError;
use serde::{Serialize, Serializer};
use serde_json::json;
use serde_json::{Map, Value};

/// A whole structural tag: `{"type": "structural_tag", "format": {...}}`.
///
/// Serialises to XGrammar's JSON and reads it back unchanged ([`StructuralTag::from_json`],
/// or `serde_json::from_value`).
#[derive(Clone, Debug, PartialEq)]
pub struct StructuralTag {
    /// The format the whole output must match.
    pub format: Format,
}

/// One format object: a chunk of output. The variants and their fields are XGrammar's
/// (`docs/structural_tag/structural_tag.md`), with the same JSON names and defaults.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// Exactly `value`.
    ConstString {
        /// The text.
        value: String,
    },
    /// A JSON value valid under `json_schema` (draft 2020-12, see [`crate::json_schema`]),
    /// written in `style`.
    JsonSchema {
        /// The schema (an object or a boolean).
        json_schema: Value,
        /// How the value is written.
        style: JsonStyle,
        /// Properties in any order (still each at most once, required ones present).
        any_order: bool,
        /// The most whitespace characters in one place (tokensieve's extension, JSON key
        /// `max_whitespace`; absent: unbounded, as in XGrammar). A cap stops a model from
        /// looping on whitespace; see [`crate::JsonSchemaOptions::max_whitespace`].
        max_whitespace: Option<u32>,
        /// The most line feeds in one place of whitespace (tokensieve's extension, JSON key
        /// `max_whitespace_newlines`; absent: as many as `max_whitespace` allows); see
        /// [`crate::JsonSchemaOptions::max_whitespace_newlines`].
        max_whitespace_newlines: Option<u32>,
        /// The most digits in one run of a number (tokensieve's extension, JSON key
        /// `max_number_digits`; absent: unbounded). A cap stops a model from looping on
        /// digits (`0.000…`); see [`crate::JsonSchemaOptions::max_number_digits`].
        max_number_digits: Option<u32>,
        /// Strings never written inside the value's free JSON strings (tokensieve's
        /// extension, JSON key `string_excludes`; absent: none): a tool-call family's
        /// markers, so an argument cannot hold `</tool_call>`; see
        /// [`crate::JsonSchemaOptions::string_excludes`]. Style `json` only.
        string_excludes: Vec<String>,
    },
    /// Text matching a regular expression (see [`crate::regex`]; anchored at both ends).
    Regex {
        /// The pattern.
        pattern: String,
    },
    /// Text matching an EBNF grammar (see [`crate::grammar::parse_ebnf`]; root rule `root`).
    Grammar {
        /// The grammar's text.
        grammar: String,
    },
    /// Any text (valid UTF-8, no special tokens) that contains none of `excludes`.
    AnyText {
        /// Strings that never occur in the text.
        excludes: Vec<String>,
    },
    /// The elements one after the other.
    Sequence {
        /// The parts, in order.
        elements: Vec<Format>,
    },
    /// Any one of the elements.
    Or {
        /// The alternatives.
        elements: Vec<Format>,
    },
    /// `content` or nothing.
    Optional {
        /// What may appear.
        content: Box<Format>,
    },
    /// `content` one or more times.
    Plus {
        /// What repeats.
        content: Box<Format>,
    },
    /// `content` zero or more times.
    Star {
        /// What repeats.
        content: Box<Format>,
    },
    /// `content` between `min` and `max` times (`max` −1 in JSON: unbounded).
    Repeat {
        /// The least number of times.
        min: u32,
        /// The most, `None` for unbounded (written −1).
        max: Option<u32>,
        /// What repeats.
        content: Box<Format>,
    },
    /// `begin`, then `content`, then one of the `end`s.
    Tag(Tag),
    /// Free text until one of `triggers` appears; from there one of `tags` (whose `begin`
    /// starts with that trigger), then free text again.
    TriggeredTags {
        /// The strings that start a tag.
        triggers: Vec<String>,
        /// The tags; each `begin` is text that starts with exactly one trigger.
        tags: Vec<Tag>,
        /// At least one tag, and no text before the first.
        at_least_one: bool,
        /// Nothing after the first tag.
        stop_after_first: bool,
        /// Strings that never occur in the free text.
        excludes: Vec<String>,
    },
    /// Tags separated by `separator`, nothing else.
    TagsWithSeparator {
        /// The tags.
        tags: Vec<Tag>,
        /// Written between two tags.
        separator: String,
        /// At least one tag.
        at_least_one: bool,
        /// At most one tag.
        stop_after_first: bool,
    },
    /// Free text in which each `(pattern, format)` rule fires when its pattern appears: the
    /// pattern, then the format; then free text again when `loop` is on.
    Dispatch {
        /// `[pattern, format]` pairs.
        rules: Vec<(String, Format)>,
        /// Free text and rules again after a rule's format (default true).
        repeat: bool,
        /// Strings that never occur in the free text.
        excludes: Vec<String>,
    },
    /// Exactly one token, by id or by text (a special token, or an ordinary token whose
    /// text is then matched as text).
    Token {
        /// The token.
        token: TokenSpec,
    },
    /// Free text (no special tokens), ending before any of `exclude_tokens`. tokensieve
    /// reads it as [`Format::AnyText`]: the excluded tokens, and every other special token,
    /// never occur in it.
    AnyTokens {
        /// Tokens that never occur.
        exclude_tokens: Vec<TokenSpec>,
    },
    /// Free text until one of the special `trigger_tokens`; then one of `tags`, whose
    /// `begin` is that token; then free text again.
    TokenTriggeredTags {
        /// The special tokens that start a tag.
        trigger_tokens: Vec<TokenSpec>,
        /// The tags; each `begin` is a token.
        tags: Vec<Tag>,
        /// Tokens that never occur in the free text.
        exclude_tokens: Vec<TokenSpec>,
        /// At least one tag, and no text before the first.
        at_least_one: bool,
        /// Nothing after the first tag.
        stop_after_first: bool,
    },
}

/// `begin` + `content` + `end` (XGrammar's `tag` format).
#[derive(Clone, Debug, PartialEq)]
pub struct Tag {
    /// What opens the tag.
    pub begin: Delimiter,
    /// What is inside.
    pub content: Box<Format>,
    /// What may close it (one or more alternatives; JSON: a string, a token object, or a
    /// list of strings).
    pub end: Vec<Delimiter>,
}

/// A tag's `begin` or `end`: text, or one token.
///
/// Text that is exactly, or contains, the text of a *special* token of the vocabulary the
/// tag is compiled against stands for that token there (the token, never ordinary tokens
/// spelling its text); elsewhere it is text. So one tag works on vocabularies where a marker
/// is a special token and on those where it is plain text.
#[derive(Clone, Debug, PartialEq)]
pub enum Delimiter {
    /// A string.
    Text(String),
    /// `{"type": "token", "token": ...}`.
    Token(TokenSpec),
}

/// A token named by id or by its text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenSpec {
    /// A token id (`< vocabulary size`).
    Id(u32),
    /// A token's exact text, such as `<|tool_call_end|>`.
    Text(String),
}

/// How a [`Format::JsonSchema`] value is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JsonStyle {
    /// JSON text.
    #[default]
    Json,
    /// Qwen3-Coder's parameters: `<parameter=NAME>\nVALUE\n</parameter>` per property of an
    /// object schema, joined by `\n`; string values raw, other values JSON.
    QwenXml,
    /// GLM-4.5/4.6's arguments: `<arg_key>NAME</arg_key>\n<arg_value>VALUE</arg_value>` per
    /// property of an object schema, joined by `\n`; string values raw, other values JSON.
    GlmXml,
    /// GLM-4.7/5's arguments: as [`JsonStyle::GlmXml`] with no newlines at all
    /// (`<arg_key>NAME</arg_key><arg_value>VALUE</arg_value>` back to back).
    Glm47Xml,
    /// MiniMax-M2's parameters (XGrammar's `minimax_xml`): `<parameter name="NAME">VALUE</parameter>`
    /// per property of an object schema, joined by `\n`; string values raw, other values JSON.
    MiniMaxXml,
    /// DeepSeek V3.2 / V4 DSML parameters (XGrammar's `deepseek_xml`):
    /// `<｜DSML｜parameter name="NAME" string="true">RAW</｜DSML｜parameter>` for a string
    /// value, `string="false">JSON` for any other, per property of an object schema,
    /// joined by `\n`.
    DeepSeekXml,
}

impl Serialize for StructuralTag {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl Serialize for Format {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl TokenSpec {
    fn to_json(&self) -> Value {
        match self {
            TokenSpec::Id(i) => json!(i),
            TokenSpec::Text(t) => json!(t),
        }
    }
}

impl Delimiter {
    fn to_json(&self) -> Value {
        match self {
            Delimiter::Text(t) => json!(t),
            Delimiter::Token(t) => json!({"type": "token", "token": t.to_json()}),
        }
    }
}

impl Tag {
    /// The tag as XGrammar's JSON.
    pub fn to_json(&self) -> Value {
        let end = match self.end.as_slice() {
            [one] => one.to_json(),
            many => Value::Array(many.iter().map(Delimiter::to_json).collect()),
        };
        json!({"type": "tag", "begin": self.begin.to_json(), "content": self.content.to_json(), "end": end})
    }
}

fn tokens_json(v: &[TokenSpec]) -> Value {
    Value::Array(v.iter().map(TokenSpec::to_json).collect())
}

fn tags_json(v: &[Tag]) -> Value {
    Value::Array(v.iter().map(Tag::to_json).collect())
}

impl StructuralTag {
    /// The structural tag as XGrammar's JSON (`{"type": "structural_tag", "format": ...}`).
    pub fn to_json(&self) -> Value {
        json!({"type": "structural_tag", "format": self.format.to_json()})
    }
}

impl Format {
    /// The format as XGrammar's JSON; [`StructuralTag::from_json`] reads it back equal.
    pub fn to_json(&self) -> Value {
        match self {
            Format::ConstString { value } => json!({"type": "const_string", "value": value}),
            Format::JsonSchema {
                json_schema,
                style,
                any_order,
                max_whitespace,
                max_whitespace_newlines,
                max_number_digits,
                string_excludes,
            } => {
                let style = match style {
                    JsonStyle::Json => "json",
                    JsonStyle::QwenXml => "qwen_xml",
                    JsonStyle::GlmXml => "glm_xml",
                    JsonStyle::Glm47Xml => "glm47_xml",
                    JsonStyle::MiniMaxXml => "minimax_xml",
                    JsonStyle::DeepSeekXml => "deepseek_xml",
                };
                let mut v = json!({"type": "json_schema", "json_schema": json_schema, "style": style, "any_order": any_order});
                if let Some(n) = max_whitespace {
                    v["max_whitespace"] = json!(n);
                }
                if let Some(n) = max_whitespace_newlines {
                    v["max_whitespace_newlines"] = json!(n);
                }
                if let Some(n) = max_number_digits {
                    v["max_number_digits"] = json!(n);
                }
                if !string_excludes.is_empty() {
                    v["string_excludes"] = json!(string_excludes);
                }
                v
            }
            Format::Regex { pattern } => json!({"type": "regex", "pattern": pattern}),
            Format::Grammar { grammar } => json!({"type": "grammar", "grammar": grammar}),
            Format::AnyText { excludes } => json!({"type": "any_text", "excludes": excludes}),
            Format::Sequence { elements } => {
                json!({"type": "sequence", "elements": elements.iter().map(Format::to_json).collect::<Vec<_>>()})
            }
            Format::Or { elements } => {
                json!({"type": "or", "elements": elements.iter().map(Format::to_json).collect::<Vec<_>>()})
            }
            Format::Optional { content } => {
                json!({"type": "optional", "content": content.to_json()})
            }
            Format::Plus { content } => json!({"type": "plus", "content": content.to_json()}),
            Format::Star { content } => json!({"type": "star", "content": content.to_json()}),
            Format::Repeat { min, max, content } => json!({
                "type": "repeat", "min": min, "max": max.map_or(-1, i64::from), "content": content.to_json()
            }),
            Format::Tag(t) => t.to_json(),
            Format::TriggeredTags {
                triggers,
                tags,
                at_least_one,
                stop_after_first,
                excludes,
            } => json!({
                "type": "triggered_tags", "triggers": triggers, "tags": tags_json(tags),
                "at_least_one": at_least_one, "stop_after_first": stop_after_first, "excludes": excludes
            }),
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => json!({
                "type": "tags_with_separator", "tags": tags_json(tags), "separator": separator,
                "at_least_one": at_least_one, "stop_after_first": stop_after_first
            }),
            Format::Dispatch {
                rules,
                repeat,
                excludes,
            } => json!({
                "type": "dispatch",
                "rules": rules.iter().map(|(p, f)| json!([p, f.to_json()])).collect::<Vec<_>>(),
                "loop": repeat, "excludes": excludes
            }),
            Format::Token { token } => json!({"type": "token", "token": token.to_json()}),
            Format::AnyTokens { exclude_tokens } => {
                json!({"type": "any_tokens", "exclude_tokens": tokens_json(exclude_tokens)})
            }
            Format::TokenTriggeredTags {
                trigger_tokens,
                tags,
                exclude_tokens,
                at_least_one,
                stop_after_first,
            } => json!({
                "type": "token_triggered_tags", "trigger_tokens": tokens_json(trigger_tokens),
                "tags": tags_json(tags), "exclude_tokens": tokens_json(exclude_tokens),
                "at_least_one": at_least_one, "stop_after_first": stop_after_first
            }),
        }
    }
}

impl<'de> serde::Deserialize<'de> for StructuralTag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        StructuralTag::from_json(&v).map_err(serde::de::Error::custom)
    }
}

impl<'de> serde::Deserialize<'de> for Format {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        read_format(&v, "format").map_err(serde::de::Error::custom)
    }
}

impl StructuralTag {
    /// Reads XGrammar's JSON: `{"type": "structural_tag", "format": {...}}`. A bare format
    /// object (`{"type": "tag", ...}`) is read as the `format` of a structural tag.
    ///
    /// `type` may be left out where XGrammar's models default it: at the top level (`{"format":
    /// {...}}` is a structural tag), in the items of a `tags` list (`triggered_tags`,
    /// `tags_with_separator`, `token_triggered_tags`: a `tag`), and in an object `begin` or
    /// `end` of a tag (a `token`). Everywhere else (`content`, `elements`, `rules`, a bare
    /// format) it is required, as XGrammar's union of all formats is discriminated by it.
    ///
    /// # Errors
    /// [`StructuralTagError::Field`] (missing field, wrong JSON type, unknown `type`, bad
    /// value) with the JSON path, such as `format.elements[1].tags[0].begin`.
    pub fn from_json(v: &Value) -> Result<Self, StructuralTagError> {
        let obj = object(v, "")?;
        match obj.get("type").and_then(Value::as_str) {
            Some("structural_tag") => {
                if let Some(f) = obj.get("format") {
                    if let Some(k) = obj.keys().find(|k| *k != "type" && *k != "format") {
                        return Err(field_err(
                            "",
                            format!("unknown field `{k}` (fields: type, format)"),
                        ));
                    }
                    return Ok(StructuralTag {
                        format: read_format(f, "format")?,
                    });
                }
                if obj.contains_key("structures") {
                    return read_legacy(obj);
                }
                Err(field_err("", "missing field `format`"))
            }
            // XGrammar's `StructuralTag.type` defaults to `structural_tag`: an object with a
            // `format` and no `type` is a whole tag (no format type has a `format` field).
            None if obj.contains_key("format") && !obj.contains_key("type") => {
                if let Some(k) = obj.keys().find(|k| *k != "format") {
                    return Err(field_err(
                        "",
                        format!("unknown field `{k}` (fields: type, format)"),
                    ));
                }
                Ok(StructuralTag {
                    format: read_format(&obj["format"], "format")?,
                })
            }
            _ => Ok(StructuralTag {
                format: read_format(v, "format")?,
            }),
        }
    }

    /// As [`StructuralTag::from_json`], from JSON text.
    ///
    /// # Errors
    /// [`StructuralTagError::Json`] when the text is not JSON (with line:column), else those
    /// of [`StructuralTag::from_json`].
    pub fn from_json_str(text: &str) -> Result<Self, StructuralTagError> {
        let v: Value = serde_json::from_str(text).map_err(StructuralTagError::Json)?;
        Self::from_json(&v)
    }
}

/// An optional count field (`max_whitespace`, `max_whitespace_newlines`, `max_number_digits`): absent or `null` is
/// `None`, else an integer in `0..=u32::MAX`.
fn count(v: Option<&Value>, path: &str, key: &str) -> Result<Option<u32>, StructuralTagError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                field_err(
                    &join(path, key),
                    format!("expected a count >= 0, found {v}"),
                )
            }),
    }
}

fn field_err(path: &str, reason: impl Into<String>) -> StructuralTagError {
    StructuralTagError::Field {
        path: if path.is_empty() {
            "(top level)".to_string()
        } else {
            path.to_string()
        },
        reason: reason.into(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'v>(v: &'v Value, path: &str) -> Result<&'v Map<String, Value>, StructuralTagError> {
    v.as_object()
        .ok_or_else(|| field_err(path, format!("expected an object, found {}", kind(v))))
}

/// The fields of one format object: typed getters that name the path of what is wrong, and
/// a check that no unknown field is left.
struct Fields<'v> {
    obj: &'v Map<String, Value>,
    path: String,
    used: Vec<&'static str>,
}

impl<'v> Fields<'v> {
    fn get(&mut self, key: &'static str) -> Option<&'v Value> {
        self.used.push(key);
        self.obj.get(key)
    }

    fn required(&mut self, key: &'static str) -> Result<&'v Value, StructuralTagError> {
        let path = self.path.clone();
        self.get(key)
            .ok_or_else(|| field_err(&path, format!("missing field `{key}`")))
    }

    fn string(&mut self, key: &'static str) -> Result<String, StructuralTagError> {
        let v = self.required(key)?;
        v.as_str().map(str::to_string).ok_or_else(|| {
            field_err(
                &join(&self.path, key),
                format!("expected a string, found {}", kind(v)),
            )
        })
    }

    fn bool_or(&mut self, key: &'static str, default: bool) -> Result<bool, StructuralTagError> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(field_err(
                &join(&self.path, key),
                format!("expected a boolean, found {}", kind(v)),
            )),
        }
    }

    /// A list field: each item read by `item` (given its path); an absent (or null)
    /// optional list is empty.
    fn list<T>(
        &mut self,
        key: &'static str,
        required: bool,
        what: &str,
        item: impl Fn(&Value, &str) -> Result<T, StructuralTagError>,
    ) -> Result<Vec<T>, StructuralTagError> {
        let v = match (self.get(key), required) {
            (None | Some(Value::Null), false) => return Ok(Vec::new()),
            (None, true) => return Err(field_err(&self.path, format!("missing field `{key}`"))),
            (Some(v), _) => v,
        };
        let path = join(&self.path, key);
        let arr = v.as_array().ok_or_else(|| {
            field_err(
                &path,
                format!("expected an array of {what}, found {}", kind(v)),
            )
        })?;
        arr.iter()
            .enumerate()
            .map(|(i, x)| item(x, &format!("{path}[{i}]")))
            .collect()
    }

    fn strings(
        &mut self,
        key: &'static str,
        required: bool,
    ) -> Result<Vec<String>, StructuralTagError> {
        self.list(key, required, "strings", |x, p| {
            x.as_str()
                .map(str::to_string)
                .ok_or_else(|| field_err(p, format!("expected a string, found {}", kind(x))))
        })
    }

    fn tokens(
        &mut self,
        key: &'static str,
        required: bool,
    ) -> Result<Vec<TokenSpec>, StructuralTagError> {
        self.list(key, required, "tokens", read_token)
    }

    fn content(&mut self, key: &'static str) -> Result<Box<Format>, StructuralTagError> {
        let v = self.required(key)?;
        Ok(Box::new(read_format(v, &join(&self.path, key))?))
    }

    fn formats(&mut self, key: &'static str) -> Result<Vec<Format>, StructuralTagError> {
        self.list(key, true, "formats", read_format)
    }

    /// A list of tags: XGrammar types these lists as `List[TagFormat]`, so an item without
    /// a `type` is a `tag`.
    fn tags(&mut self, key: &'static str) -> Result<Vec<Tag>, StructuralTagError> {
        self.list(key, true, "tags", |x, p| {
            match read_format_as(x, p, Some("tag"))? {
                Format::Tag(t) => Ok(t),
                _ => Err(field_err(p, "expected a format of type `tag`")),
            }
        })
    }

    fn finish(self) -> Result<(), StructuralTagError> {
        for k in self.obj.keys() {
            if k != "type" && !self.used.contains(&k.as_str()) {
                return Err(field_err(
                    &self.path,
                    format!(
                        "unknown field `{k}` (fields of this type: {})",
                        self.used.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn read_token(v: &Value, path: &str) -> Result<TokenSpec, StructuralTagError> {
    match v {
        Value::String(s) => Ok(TokenSpec::Text(s.clone())),
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(TokenSpec::Id)
            .ok_or_else(|| field_err(path, format!("token id {n} is not a u32"))),
        other => Err(field_err(
            path,
            format!(
                "expected a token id or a token's text, found {}",
                kind(other)
            ),
        )),
    }
}

fn read_delimiter(v: &Value, path: &str) -> Result<Delimiter, StructuralTagError> {
    match v {
        Value::String(s) => Ok(Delimiter::Text(s.clone())),
        // XGrammar types a delimiter object as `TokenFormat`: without a `type`, a `token`.
        Value::Object(_) => match read_format_as(v, path, Some("token"))? {
            Format::Token { token } => Ok(Delimiter::Token(token)),
            Format::ConstString { value } => Ok(Delimiter::Text(value)),
            _ => Err(field_err(path, "expected a string or a `token` format")),
        },
        other => Err(field_err(
            path,
            format!(
                "expected a string or a `token` format, found {}",
                kind(other)
            ),
        )),
    }
}

const TYPES: &str = "const_string, json_schema, regex, grammar, any_text, sequence, or, optional, \
plus, star, repeat, tag, triggered_tags, tags_with_separator, dispatch, token, any_tokens, \
token_triggered_tags";

/// How deeply formats may nest (reading and lowering recurse on it).
pub const MAX_FORMAT_DEPTH: usize = 100;

/// Reads one format object at `path`; `type` is required (XGrammar's union of all formats
/// is discriminated by it).
pub(crate) fn read_format(v: &Value, path: &str) -> Result<Format, StructuralTagError> {
    read_format_as(v, path, None)
}

/// As [`read_format`], where XGrammar's field names one format model, whose `type`
/// (`default_type`) a document may then omit.
fn read_format_as(
    v: &Value,
    path: &str,
    default_type: Option<&'static str>,
) -> Result<Format, StructuralTagError> {
    // The path has one segment per level.
    let depth = path.bytes().filter(|&b| b == b'.' || b == b'[').count();
    if depth > MAX_FORMAT_DEPTH {
        return Err(field_err(
            path,
            format!("formats nest more than {MAX_FORMAT_DEPTH} deep"),
        ));
    }
    let obj = object(v, path)?;
    let ty = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(field_err(
                &join(path, "type"),
                format!("expected a string, found {}", kind(other)),
            ))
        }
        None => match default_type {
            Some(t) => t,
            None => return Err(field_err(path, "missing field `type`")),
        },
    };
    let mut f = Fields {
        obj,
        path: path.to_string(),
        used: Vec::new(),
    };
    let format = match ty {
        "const_string" => Format::ConstString {
            value: f.string("value")?,
        },
        "json_schema" => {
            let json_schema = f.required("json_schema")?.clone();
            if !json_schema.is_object() && !json_schema.is_boolean() {
                return Err(field_err(
                    &join(path, "json_schema"),
                    format!(
                        "expected a schema (an object or a boolean), found {}",
                        kind(&json_schema)
                    ),
                ));
            }
            let style = match f.get("style") {
                None | Some(Value::Null) => JsonStyle::Json,
                Some(Value::String(s)) if s == "json" => JsonStyle::Json,
                Some(Value::String(s)) if s == "qwen_xml" => JsonStyle::QwenXml,
                Some(Value::String(s)) if s == "glm_xml" => JsonStyle::GlmXml,
                Some(Value::String(s)) if s == "glm47_xml" => JsonStyle::Glm47Xml,
                Some(Value::String(s)) if s == "minimax_xml" => JsonStyle::MiniMaxXml,
                Some(Value::String(s)) if s == "deepseek_xml" => JsonStyle::DeepSeekXml,
                Some(Value::String(s)) => {
                    return Err(StructuralTagError::Unsupported {
                        path: join(path, "style"),
                        what: format!(
                            "style `{s}` (supported: json, qwen_xml, glm_xml, glm47_xml, \
                             minimax_xml, deepseek_xml)"
                        ),
                    })
                }
                Some(other) => {
                    return Err(field_err(
                        &join(path, "style"),
                        format!("expected a string, found {}", kind(other)),
                    ))
                }
            };
            let max_whitespace = count(f.get("max_whitespace"), path, "max_whitespace")?;
            let max_whitespace_newlines = count(
                f.get("max_whitespace_newlines"),
                path,
                "max_whitespace_newlines",
            )?;
            let max_number_digits = count(f.get("max_number_digits"), path, "max_number_digits")?;
            Format::JsonSchema {
                json_schema,
                style,
                any_order: f.bool_or("any_order", false)?,
                max_whitespace,
                max_whitespace_newlines,
                max_number_digits,
                string_excludes: f.strings("string_excludes", false)?,
            }
        }
        "regex" => Format::Regex {
            pattern: f.string("pattern")?,
        },
        "grammar" => Format::Grammar {
            grammar: f.string("grammar")?,
        },
        "any_text" => Format::AnyText {
            excludes: f.strings("excludes", false)?,
        },
        "sequence" => Format::Sequence {
            elements: f.formats("elements")?,
        },
        "or" => Format::Or {
            elements: f.formats("elements")?,
        },
        "optional" => Format::Optional {
            content: f.content("content")?,
        },
        "plus" => Format::Plus {
            content: f.content("content")?,
        },
        "star" => Format::Star {
            content: f.content("content")?,
        },
        "repeat" => {
            let int = |f: &mut Fields<'_>, key: &'static str| -> Result<i64, StructuralTagError> {
                let v = f.required(key)?;
                v.as_i64().ok_or_else(|| {
                    field_err(
                        &join(path, key),
                        format!("expected an integer, found {}", kind(v)),
                    )
                })
            };
            let min = int(&mut f, "min")?;
            let max = int(&mut f, "max")?;
            let min = u32::try_from(min)
                .map_err(|_| field_err(&join(path, "min"), format!("{min} is not a count >= 0")))?;
            let max = match max {
                -1 => None,
                m => Some(u32::try_from(m).ok().filter(|&m| m >= min).ok_or_else(|| {
                    field_err(
                        &join(path, "max"),
                        format!("{m} is neither -1 (unbounded) nor a count >= min ({min})"),
                    )
                })?),
            };
            Format::Repeat {
                min,
                max,
                content: f.content("content")?,
            }
        }
        "tag" => {
            let begin = read_delimiter(f.required("begin")?, &join(path, "begin"))?;
            let content = f.content("content")?;
            let end_v = f.required("end")?;
            let end_path = join(path, "end");
            let end = match end_v {
                Value::Array(items) if items.is_empty() => {
                    return Err(field_err(&end_path, "an empty list of ends"))
                }
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| read_delimiter(x, &format!("{end_path}[{i}]")))
                    .collect::<Result<_, _>>()?,
                other => vec![read_delimiter(other, &end_path)?],
            };
            Format::Tag(Tag {
                begin,
                content,
                end,
            })
        }
        "triggered_tags" => Format::TriggeredTags {
            triggers: f.strings("triggers", true)?,
            tags: f.tags("tags")?,
            at_least_one: f.bool_or("at_least_one", false)?,
            stop_after_first: f.bool_or("stop_after_first", false)?,
            excludes: f.strings("excludes", false)?,
        },
        "tags_with_separator" => Format::TagsWithSeparator {
            tags: f.tags("tags")?,
            separator: f.string("separator")?,
            at_least_one: f.bool_or("at_least_one", false)?,
            stop_after_first: f.bool_or("stop_after_first", false)?,
        },
        "dispatch" => {
            let v = f.required("rules")?;
            let rp = join(path, "rules");
            let arr = v.as_array().ok_or_else(|| {
                field_err(
                    &rp,
                    format!(
                        "expected an array of [pattern, format] pairs, found {}",
                        kind(v)
                    ),
                )
            })?;
            let mut rules = Vec::with_capacity(arr.len());
            for (i, pair) in arr.iter().enumerate() {
                let p = format!("{rp}[{i}]");
                match pair.as_array().map(Vec::as_slice) {
                    Some([Value::String(pattern), format]) => {
                        rules.push((pattern.clone(), read_format(format, &format!("{p}[1]"))?))
                    }
                    _ => return Err(field_err(&p, "expected a [pattern, format] pair")),
                }
            }
            Format::Dispatch {
                rules,
                repeat: f.bool_or("loop", true)?,
                excludes: f.strings("excludes", false)?,
            }
        }
        "token" => Format::Token {
            token: read_token(f.required("token")?, &join(path, "token"))?,
        },
        "any_tokens" => Format::AnyTokens {
            exclude_tokens: f.tokens("exclude_tokens", false)?,
        },
        "token_triggered_tags" => Format::TokenTriggeredTags {
            trigger_tokens: f.tokens("trigger_tokens", true)?,
            tags: f.tags("tags")?,
            exclude_tokens: f.tokens("exclude_tokens", false)?,
            at_least_one: f.bool_or("at_least_one", false)?,
            stop_after_first: f.bool_or("stop_after_first", false)?,
        },
        "exclude_token" | "token_dispatch" => {
            return Err(StructuralTagError::Unsupported {
                path: path.to_string(),
                what: format!("format `{ty}` (a single arbitrary token has no text-level grammar)"),
            })
        }
        other => {
            return Err(field_err(
                &join(path, "type"),
                format!("unknown format type `{other}` (known: {TYPES})"),
            ))
        }
    };
    f.finish()?;
    Ok(format)
}

/// XGrammar's first structural-tag API: `{"type": "structural_tag", "structures": [{"begin",
/// "schema", "end"}], "triggers": [...]}`, read as `triggered_tags` of JSON-schema tags.
fn read_legacy(obj: &Map<String, Value>) -> Result<StructuralTag, StructuralTagError> {
    let mut f = Fields {
        obj,
        path: String::new(),
        used: Vec::new(),
    };
    let triggers = f.strings("triggers", true)?;
    let v = f.required("structures")?;
    let arr = v.as_array().ok_or_else(|| {
        field_err(
            "structures",
            format!("expected an array, found {}", kind(v)),
        )
    })?;
    let mut tags = Vec::with_capacity(arr.len());
    for (i, s) in arr.iter().enumerate() {
        let p = format!("structures[{i}]");
        let mut sf = Fields {
            obj: object(s, &p)?,
            path: p,
            used: Vec::new(),
        };
        let begin = sf.string("begin")?;
        let schema = sf.required("schema")?.clone();
        let end = sf.string("end")?;
        sf.finish()?;
        tags.push(Tag {
            begin: Delimiter::Text(begin),
            content: Box::new(Format::JsonSchema {
                json_schema: schema,
                style: JsonStyle::Json,
                any_order: false,
                max_whitespace: None,
                max_whitespace_newlines: None,
                max_number_digits: None,
                string_excludes: Vec::new(),
            }),
            end: vec![Delimiter::Text(end)],
        });
    }
    f.finish()?;
    Ok(StructuralTag {
        format: Format::TriggeredTags {
            triggers,
            tags,
            at_least_one: false,
            stop_after_first: false,
            excludes: Vec::new(),
        },
    })
}
