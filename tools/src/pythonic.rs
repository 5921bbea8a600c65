//! Pythonic call lists — Llama 3.2 (1B/3B), Llama 4, ToolACE: the whole output is a
//! Python list of calls with keyword arguments and literal values (section 4.5 of the
//! tool-call format notes; vLLM's `pythonic` parser).
//!
//! ```text
//! [get_weather(city='Paris', unit="celsius"), get_time(tz="Europe/Paris")]
//! ```

use serde_json::{json, Map, Number, Value};

use super::driver;
use super::scan::{self, Content};
use super::tags;
use super::{
    ArgumentSchemas, CallMode, FormatOptions, PartialCall, PartialOutput, Tool, ToolCall,
    ToolCallFormat, ToolError, ToolParseError,
};

const PY_START: &str = "<|python_start|>";
const PY_END: &str = "<|python_end|>";
const END_MARKS: &[&str] = &["<|eot_id|>", "<|eom_id|>", "<|eot|>", PY_END];
/// Nesting limit of the literal reader (deeper values are an error, never a stack overflow).
const MAX_DEPTH: usize = 64;

/// The pythonic format (`pythonic`).
///
/// * Grammar: `[NAME(k=V, ...), NAME(...)]` — the list brackets, calls joined by `, `,
///   keyword arguments in the schema's declared order (required ones present, optional
///   ones optional) joined by `, `, each value a Python literal built from the
///   property's JSON Schema (strings in single or double quotes with Python escapes,
///   `True`/`False`/`None`, numbers, lists, dicts with quoted keys; `enum`/`const`,
///   `anyOf`/`oneOf`, type lists, `items`, `minItems`/`maxItems`, nested `properties`
///   and `additionalProperties` schemas are expressed). Schema features a Python-literal
///   grammar cannot express here (`pattern`, `format` on strings, numeric bounds other than
///   on a plain `integer` (there they are exact, from the JSON Schema compiler's integer
///   ranges), string lengths,
///   `$ref`, `allOf`, `not`, property names that are not identifiers, tool names that are
///   not dotted ASCII identifiers (the error names the character), ...) make
///   [`ToolCallFormat::structural_tag`] fail with [`ToolError::Unsupported`] rather than
///   under-constrain; `format` on a schema whose `type` excludes strings (schemars'
///   `"uint8"`, `"double"`) has no effect in JSON Schema 2020-12 and is ignored. By choice: `required` = the list with at least one call, named =
///   `[X(...)]`, `auto` = the list or free text that does not start with `[`, `none` =
///   such free text only; nothing follows the list (end of turn); at most one call when
///   `parallel` is off. No reasoning block (Llama has none).
///   Numbers are capped at 20 integer digits (every `i64` and `u64`), 17 fraction
///   digits and a 3-digit exponent (every `f64` as the renderer writes it: `5e-324`,
///   `1.7976931348623157e308`): fixed caps, below the JSON families' default
///   [`FormatOptions::max_number_digits`] of 24, and not changed by it. Integers of up to
///   20 digits beyond `u64` (and numbers with more than 17 significant digits) read back
///   as the nearest `f64`, and a number beyond `f64` (`9e999`) as `±1e308`, as the JSON
///   families read one.
/// * Parser: after leading whitespace (and Llama 4's `<|python_start|>`), a `[` followed
///   by a (dotted) name and `(` starts the call list; any other output is content (vLLM
///   reads only output that is the list). Values: strings in either quote with Python
///   escapes, ints, floats, `True/False/None` and JSON's `true/false/null`, lists and
///   dicts (tuples, names, expressions and positional arguments are errors). A call to an
///   unknown tool is an error (its text in content), the others stay calls; a syntax error
///   or a call the output cuts off makes the rest of the list, from the offending call,
///   one error once the output is complete (a list missing only its `]` is an error from
///   just after its last call: the separator, if any; bare calls ending at an offered
///   tool's name are a cut-off call). Text after the list is content (`<|python_end|>` and end-of-turn tokens
///   dropped). [`Pythonic::bare_calls`] also reads calls written without the brackets,
///   separated by `,` or `;` (gorilla-openfunctions-v2, NexusRaven-v2), when the name is
///   an offered tool.
/// * Streaming: a call is reported once its `(` has arrived (never one to a tool not
///   offered, which ends malformed); its argument deltas are the
///   raw Python text of the arguments (not JSON); the finished call carries JSON.
/// * Rendering: Python literals; a call whose name or argument names are not
///   identifiers cannot be written — [`Pythonic::try_render_calls`] refuses it,
///   [`ToolCallFormat::render_calls`] writes it as is and it does not parse back.
#[derive(Clone, Debug, Default)]
pub struct Pythonic {
    options: FormatOptions,
    bare: bool,
}

impl Pythonic {
    /// The format with `options`.
    pub fn new(options: FormatOptions) -> Self {
        Self {
            options,
            bare: false,
        }
    }

    /// Also read calls without the list brackets (`f(a=1), g(b=2)` or `f(a=1); g(b=2);`),
    /// as some fine-tunes write them; only names of offered tools start such output.
    pub fn bare_calls(mut self, on: bool) -> Self {
        self.bare = on;
        self
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    /// `calls` as [`ToolCallFormat::render_calls`] writes them, refusing what would not
    /// parse back: a call name that is not a dotted ASCII identifier (`get-weather`) or an
    /// argument name that is not an identifier cannot be written as Python, the same
    /// names [`ToolCallFormat::structural_tag`] refuses for a tool. Every value renders
    /// ([`python_literal`]).
    ///
    /// # Errors
    /// [`ToolError::Unsupported`] (format `pythonic`) naming the call and the offending
    /// character or argument.
    pub fn try_render_calls(&self, calls: &[ToolCall]) -> Result<String, ToolError> {
        for c in calls {
            if let Some(ch) = bad_name_char(&c.name) {
                return Err(ToolError::Unsupported {
                    format: "pythonic".into(),
                    reason: format!(
                        "call to {:?}: the name is not a Python (dotted) identifier of ASCII \
                         letters, digits and `_`, so the call cannot be written or read \
                         back: character {ch:?}",
                        c.name
                    ),
                });
            }
            if let Value::Object(args) = &c.arguments {
                if let Some(k) = args.keys().find(|k| !is_identifier(k)) {
                    return Err(ToolError::Unsupported {
                        format: "pythonic".into(),
                        reason: format!(
                            "call to {:?}: the argument name {k:?} is not a Python identifier",
                            c.name
                        ),
                    });
                }
            }
        }
        Ok(self.render_calls(calls))
    }
}

// ---------------------------------------------------------------------------------------
// Grammar

const BASE_RULES: &str = r#"py_str ::= "'" py_sq* "'" | "\"" py_dq* "\""
py_sq ::= [^'\\\n\r] | py_esc
py_dq ::= [^"\\\n\r] | py_esc
py_esc ::= "\\" (["'\\nrtbfva] | "x" py_hex py_hex | "u" py_u4)
py_u4 ::= [0-9a-cA-Ce-fE-F] py_hex py_hex py_hex | [dD] [0-7] py_hex py_hex
py_hex ::= [0-9a-fA-F]
py_int ::= "-"? ("0" | [1-9] [0-9]{0,19})
py_num ::= py_int ("." [0-9]{1,17})? ([eE] [+\-]? [0-9]{1,3})?
py_bool ::= "True" | "False"
py_none ::= "None"
py_any ::= py_str | py_num | py_bool | py_none | py_list | py_dict
py_list ::= "[" (py_any (", " py_any)*)? "]"
py_dict ::= "{" (py_str ": " py_any (", " py_str ": " py_any)*)? "}"
"#;

/// Keywords that only annotate a schema (ignored by the grammar).
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "required",
    "additionalProperties",
    "properties",
    "items",
    "type",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "minItems",
    "maxItems",
    "$defs",
    "definitions",
    "strict",
    "optional",
];

/// Numeric bound keywords: expressed exactly for `integer` (a range grammar built by the
/// JSON Schema compiler's number code), refused elsewhere.
const BOUNDS: &[&str] = &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

/// The largest integer magnitude a bounded `integer` takes in the grammar (20 digits,
/// as `py_int`).
const MAX_INT: i128 = 99_999_999_999_999_999_999;

/// The EBNF text of a string in the grammar's literal syntax.
fn ebnf_lit(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `format` on a schema whose `type` excludes strings: JSON Schema 2020-12 applies
/// `format` to strings only (validation, section 7.1), so schemars' `"uint8"`, `"int32"`,
/// `"double"` on numbers have no effect and are ignored rather than refused.
fn format_without_effect(k: &str, obj: &serde_json::Map<String, Value>) -> bool {
    k == "format"
        && match obj.get("type") {
            Some(Value::String(t)) => t != "string",
            Some(Value::Array(ts)) => !ts.is_empty() && !ts.iter().any(|t| t == "string"),
            _ => false,
        }
}

/// The first character that keeps `name` from being a dotted name the parser reads
/// (ASCII identifiers joined by `.`): `.` for an empty part, else the offending character.
fn bad_name_char(name: &str) -> Option<char> {
    for part in name.split('.') {
        let mut chars = part.chars();
        match chars.next() {
            None => return Some('.'),
            Some(c) if !(c.is_ascii_alphabetic() || c == '_') => return Some(c),
            Some(_) => {}
        }
        if let Some(c) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
            return Some(c);
        }
    }
    None
}

fn is_dotted_name(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(is_identifier)
}

struct Gen<'o> {
    rules: Vec<String>,
    options: &'o FormatOptions,
}

impl Gen<'_> {
    fn unsupported(&self, reason: String) -> ToolError {
        ToolError::Unsupported {
            format: "pythonic".into(),
            reason,
        }
    }

    fn rule(&mut self, body: String) -> String {
        let name = format!("r{}", self.rules.len());
        self.rules.push(format!("{name} ::= {body}"));
        name
    }

    /// An expression for a Python literal valid under `schema`.
    fn value(&mut self, schema: &Value, path: &str, depth: usize) -> Result<String, ToolError> {
        if depth > 32 {
            return Err(self.unsupported(format!("{path}: schema nested too deeply")));
        }
        let obj = match schema {
            Value::Bool(true) => return Ok("py_any".into()),
            Value::Object(o) => o,
            _ => return Err(self.unsupported(format!("{path}: schema {schema} is not supported"))),
        };
        for k in obj.keys() {
            if !ANNOTATIONS.contains(&k.as_str())
                && !BOUNDS.contains(&k.as_str())
                && !format_without_effect(k, obj)
            {
                return Err(self.unsupported(format!(
                    "{path}: the keyword {k:?} cannot be expressed in a Python-literal grammar"
                )));
            }
        }
        if let Some(k) = BOUNDS.iter().find(|k| obj.contains_key(**k)) {
            // Bounds are expressed for `integer` only; anywhere else they would be dropped.
            let typed = |t: &str| match obj.get("type") {
                Some(Value::String(s)) => s == t,
                Some(Value::Array(ts)) => ts.iter().any(|x| x == t),
                _ => false,
            };
            let other = ["const", "enum", "anyOf", "oneOf"]
                .into_iter()
                .find(|o| obj.contains_key(*o));
            if typed("number") || !typed("integer") || other.is_some() {
                return Err(self.unsupported(format!(
                    "{path}: the keyword {k:?} is expressed on a plain `integer` only, not {}",
                    match other {
                        Some(o) => format!("beside {o:?}"),
                        None if typed("number") => "on a number".to_owned(),
                        None => "without `type: integer`".to_owned(),
                    }
                )));
            }
        }
        if let Some(c) = obj.get("const") {
            return Ok(literal_alternatives(c));
        }
        if let Some(e) = obj.get("enum") {
            let items = e.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                self.unsupported(format!("{path}: enum must be a non-empty array"))
            })?;
            let alts: Vec<String> = items.iter().map(literal_alternatives).collect();
            return Ok(format!("({})", alts.join(" | ")));
        }
        for k in ["anyOf", "oneOf"] {
            if let Some(list) = obj.get(k) {
                if obj.contains_key("type") {
                    return Err(self.unsupported(format!("{path}: {k} beside type")));
                }
                let items = list.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                    self.unsupported(format!("{path}: {k} must be a non-empty array"))
                })?;
                let mut alts = Vec::new();
                for (i, s) in items.iter().enumerate() {
                    alts.push(self.value(s, &format!("{path}/{k}/{i}"), depth + 1)?);
                }
                return Ok(format!("({})", alts.join(" | ")));
            }
        }
        let types: Vec<String> = match obj.get("type") {
            None => {
                if obj.contains_key("properties") {
                    vec!["object".into()]
                } else {
                    return Ok("py_any".into());
                }
            }
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(ts)) => ts
                .iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| self.unsupported(format!("{path}: bad type list")))?,
            Some(other) => return Err(self.unsupported(format!("{path}: bad type {other}"))),
        };
        let mut alts = Vec::new();
        for t in &types {
            alts.push(match t.as_str() {
                "string" => "py_str".to_owned(),
                "integer" if BOUNDS.iter().any(|k| obj.contains_key(*k)) => {
                    self.int_range(obj, path)?
                }
                "integer" => "py_int".to_owned(),
                "number" => "py_num".to_owned(),
                "boolean" => "py_bool".to_owned(),
                "null" => "py_none".to_owned(),
                "array" => self.array(obj, path, depth)?,
                "object" => self.dict(obj, path, depth)?,
                other => return Err(self.unsupported(format!("{path}: unknown type {other:?}"))),
            });
        }
        Ok(if alts.len() == 1 {
            alts.remove(0)
        } else {
            format!("({})", alts.join(" | "))
        })
    }

    /// A rule for the integers within `obj`'s bounds (at most 20 digits), from the JSON
    /// Schema compiler's exact range construction.
    fn int_range(&mut self, obj: &Map<String, Value>, path: &str) -> Result<String, ToolError> {
        let (lo, hi) = tokensieve::json_schema::int_bounds(obj, "#")
            .map_err(|e| self.unsupported(format!("{path}: {e}")))?;
        let lo = lo.map_or(-MAX_INT, |l| l.max(-MAX_INT));
        let hi = hi.map_or(MAX_INT, |h| h.min(MAX_INT));
        let expr = tokensieve::json_schema::integer_range(Some(lo), Some(hi), Some(20))
            .ok_or_else(|| self.unsupported(format!("{path}: no integer within the bounds")))?;
        let printer = tokensieve::grammar::Grammar {
            rules: Vec::new(),
            root: tokensieve::grammar::RuleId(0),
        };
        Ok(self.rule(printer.expr_to_ebnf(&expr)))
    }

    fn array(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<String, ToolError> {
        let item = match obj.get("items") {
            Some(s) => self.value(s, &format!("{path}/items"), depth + 1)?,
            None => "py_any".into(),
        };
        let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let max = obj.get("maxItems").and_then(Value::as_u64);
        if min > 64 || max.is_some_and(|m| m > 64 || m < min) {
            return Err(self.unsupported(format!("{path}: minItems/maxItems beyond 64")));
        }
        let body = match (min, max) {
            (_, Some(0)) => String::new(),
            (0, None) => format!("({item} (\", \" {item})*)?"),
            (m, None) => format!("{item} (\", \" {item}){{{},}}", m - 1),
            (0, Some(n)) => format!("({item} (\", \" {item}){{0,{}}})?", n - 1),
            (m, Some(n)) => format!("{item} (\", \" {item}){{{},{}}}", m - 1, n - 1),
        };
        Ok(self.rule(format!("\"[\" {body} \"]\"")))
    }

    fn dict(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<String, ToolError> {
        let Some(props) = obj.get("properties").and_then(Value::as_object) else {
            let value = match obj.get("additionalProperties") {
                Some(Value::Object(s)) => self.value(&Value::Object(s.clone()), path, depth + 1)?,
                _ => "py_any".into(),
            };
            let pair = format!("py_str \": \" {value}");
            return Ok(self.rule(format!("\"{{\" ({pair} (\", \" {pair})*)? \"}}\"")));
        };
        let required = required_of(obj);
        let mut items = Vec::new();
        for (k, s) in props {
            let v = self.value(s, &format!("{path}/properties/{k}"), depth + 1)?;
            let key = literal_alternatives(&Value::String(k.clone()));
            items.push((format!("{key} \": \" {v}"), required.contains(&k.as_str())));
        }
        let body = self.members(&items);
        Ok(self.rule(format!("\"{{\" {body} \"}}\"")))
    }

    /// The members `items` (expression, required) in order, joined by `, `, optional ones
    /// optional: `rest_i` = the members from `i`, each after a separator; the body starts
    /// with the first member written.
    fn members(&mut self, items: &[(String, bool)]) -> String {
        let n = items.len();
        let mut rest = vec![String::new(); n + 1];
        rest[n] = "\"\"".into();
        for i in (0..n).rev() {
            let (e, req) = &items[i];
            let one = format!("\", \" {e}");
            let body = if *req {
                format!("{one} {}", rest[i + 1])
            } else {
                format!("({one})? {}", rest[i + 1])
            };
            rest[i] = self.rule(body);
        }
        let mut alts = Vec::new();
        for k in 0..n {
            alts.push(format!("{} {}", items[k].0, rest[k + 1]));
            if items[k].1 {
                break;
            }
        }
        if items.iter().all(|(_, r)| !r) {
            alts.push("\"\"".into());
        }
        if alts.is_empty() {
            "\"\"".into()
        } else {
            format!("({})", alts.join(" | "))
        }
    }

    /// `NAME(k=V, ...)` for one tool.
    fn call(&mut self, tool: &Tool) -> Result<String, ToolError> {
        if let Some(c) = bad_name_char(&tool.name) {
            return Err(self.unsupported(format!(
                "tool {:?}: the name is not a Python (dotted) identifier of ASCII letters, \
                 digits and `_`, so a call to it cannot be written or read back: \
                 character {c:?}",
                tool.name
            )));
        }
        let use_schema = tool.strict || self.options.arguments == ArgumentSchemas::Always;
        let schema = &tool.input_schema;
        let args = if !use_schema
            || schema == &Value::Bool(true)
            || schema.get("properties").is_none()
                && schema.get("additionalProperties") != Some(&Value::Bool(false))
        {
            if use_schema
                && schema.get("properties").is_none()
                && schema != &Value::Bool(true)
                && schema.get("required").is_some()
            {
                return Err(self.unsupported(format!(
                    "tool {:?}: required arguments without properties",
                    tool.name
                )));
            }
            let kw = "[A-Za-z_] [A-Za-z0-9_]* \"=\" py_any".to_owned();
            format!("({kw} (\", \" {kw})*)?")
        } else {
            let obj = schema
                .as_object()
                .ok_or_else(|| self.unsupported(format!("tool {:?}: schema", tool.name)))?;
            for k in obj.keys() {
                if !ANNOTATIONS.contains(&k.as_str()) && !format_without_effect(k, obj) {
                    return Err(self.unsupported(format!(
                        "tool {:?}: the keyword {k:?} cannot be expressed in a Python-literal grammar",
                        tool.name
                    )));
                }
            }
            if obj.get("type").is_some_and(|t| t != "object") {
                return Err(
                    self.unsupported(format!("tool {:?}: arguments must be an object", tool.name))
                );
            }
            let required = required_of(obj);
            let mut items = Vec::new();
            if let Some(props) = obj.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if !is_identifier(k) {
                        return Err(self.unsupported(format!(
                            "tool {:?}: argument {k:?} is not a Python identifier",
                            tool.name
                        )));
                    }
                    let v = self.value(s, &format!("{}/{k}", tool.name), 0)?;
                    items.push((
                        format!("{} {v}", ebnf_lit(&format!("{k}="))),
                        required.contains(&k.as_str()),
                    ));
                }
            }
            self.members(&items)
        };
        Ok(self.rule(format!(
            "{} {args} \")\"",
            ebnf_lit(&format!("{}(", tool.name))
        )))
    }
}

fn required_of(obj: &Map<String, Value>) -> Vec<&str> {
    obj.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The grammar alternatives spelling `v` as a Python literal (both quote styles for a
/// plain string).
fn literal_alternatives(v: &Value) -> String {
    match v {
        Value::String(s) if !s.contains(['\'', '"', '\\']) && !s.chars().any(char::is_control) => {
            format!(
                "({} | {})",
                ebnf_lit(&format!("'{s}'")),
                ebnf_lit(&format!("\"{s}\""))
            )
        }
        other => ebnf_lit(&python_literal(other)),
    }
}

/// `value` as a Python literal (`repr` style: strings in single quotes unless they hold
/// one and no double quote; `True`/`False`/`None`; `, ` and `: ` separators).
pub fn python_literal(value: &Value) -> String {
    let mut out = String::new();
    scan::write_spaced(value, &mut out, write_scalar);
    out
}

/// A scalar as a Python literal (arrays and objects go through [`scan::write_spaced`]).
fn write_scalar(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::String(s) => write_py_str(s, out),
        other => out.push_str(&other.to_string()),
    }
}

fn write_py_str(s: &str, out: &mut String) {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

pub(crate) mod reader;
use reader::{starts_call, strip_end_marks, Py, Stop};

impl Pythonic {
    /// Reads calls from `i` (just after `[`, or at the first call when bare; with
    /// `resumed`, just after a call an earlier parse settled at) into `out`. Returns where
    /// the calls end (after `]` when bracketed), or `None` when the output is not complete
    /// enough to say.
    #[allow(clippy::too_many_arguments)]
    fn read_calls(
        &self,
        text: &str,
        list_start: usize,
        i: usize,
        bracketed: bool,
        resumed: bool,
        tools: &[Tool],
        at_end: bool,
        out: &mut PartialOutput,
        content: &mut Content,
    ) -> Option<usize> {
        let mut r = Py::new(text, i);
        let mut first = !resumed;
        let mut after_call = resumed;
        // Just after the last call read: a list cut off after it is an error from there
        // (its separator, if any), never again the calls already read.
        let mut last_end = i;
        let fail =
            |from: usize, e: ToolParseError, out: &mut PartialOutput, content: &mut Content| {
                if at_end {
                    let from = if !resumed && out.calls.is_empty() && out.errors.is_empty() {
                        list_start
                    } else {
                        from
                    };
                    scan::push_malformed(out, content, text[from..].trim_end(), from, e);
                }
                None
            };
        loop {
            if after_call {
                // The separator after a call: the call settled the parse.
                last_end = r.i;
                scan::settle(out, content, last_end);
                if let Some(s) = &mut out.settled {
                    s.state = if bracketed { BRACKETED } else { BARE };
                }
                r.ws();
                match r.peek() {
                    Err(_) if bracketed => {
                        return fail(last_end, ToolParseError::Unterminated, out, content)
                    }
                    Err(_) => return at_end.then_some(r.i),
                    Ok(b',') => r.i += 1,
                    Ok(b';') if !bracketed => r.i += 1,
                    Ok(b']') if bracketed => return Some(r.i + 1),
                    Ok(_) if !bracketed => return Some(r.i),
                    Ok(c) => {
                        let e = ToolParseError::Syntax(format!(
                            "expected ',' or ']' after a call, found {:?}",
                            c as char
                        ));
                        return fail(r.i, e, out, content);
                    }
                }
            }
            after_call = true;
            r.ws();
            let call_start = r.i;
            if bracketed {
                match r.peek() {
                    Err(_) => return fail(last_end, ToolParseError::Unterminated, out, content),
                    Ok(b']') => return Some(r.i + 1),
                    _ => {}
                }
            } else if r.i == text.len() {
                return at_end.then_some(r.i);
            }
            if !first && !bracketed {
                // Bare calls: only an offered tool's name continues the calls.
                let offered = |n: &str| tools.is_empty() || tools.iter().any(|t| t.name == n);
                match starts_call(text, r.i) {
                    None if !at_end => return None,
                    Some(Some(n)) if offered(&n) => {}
                    None if is_dotted_name(text[r.i..].trim_end())
                        && offered(text[r.i..].trim_end()) =>
                    {
                        // The output ended at an offered tool's name: a cut-off call.
                        return fail(call_start, ToolParseError::Unterminated, out, content);
                    }
                    _ => return Some(r.i),
                }
            }
            first = false;
            let name = match r.dotted() {
                Ok(n) => n,
                Err(Stop::Eof) => {
                    return fail(call_start, ToolParseError::Unterminated, out, content)
                }
                Err(Stop::Bad(m)) => {
                    return fail(call_start, ToolParseError::Syntax(m), out, content)
                }
            };
            r.ws();
            match r.peek() {
                Err(_) => return fail(call_start, ToolParseError::Unterminated, out, content),
                Ok(b'(') => r.i += 1,
                Ok(_) => {
                    let e = ToolParseError::Syntax(format!("expected '(' after {name:?}"));
                    return fail(call_start, e, out, content);
                }
            }
            let args_start = r.i;
            match r.kwargs() {
                Ok(args) => {
                    let args_text = text[args_start..r.i - 1].trim().to_owned();
                    match scan::check_call_name(&name, tools) {
                        Ok(()) => out.calls.push(PartialCall {
                            id: None,
                            name: Some(name.clone()),
                            arguments_text: args_text,
                            complete: Some(ToolCall::new(name, Value::Object(args))),
                        }),
                        Err(e) if bracketed => scan::push_malformed_element(
                            out,
                            content,
                            &text[call_start..r.i],
                            call_start,
                            e,
                        ),
                        Err(e) => scan::push_malformed(
                            out,
                            content,
                            &text[call_start..r.i],
                            call_start,
                            e,
                        ),
                    }
                }
                Err(Stop::Eof) => {
                    if at_end {
                        return fail(call_start, ToolParseError::Unterminated, out, content);
                    }
                    let mut call = PartialCall {
                        id: None,
                        name: Some(name),
                        arguments_text: text[args_start..].trim().to_owned(),
                        complete: None,
                    };
                    // A tool not offered is never streamed (the call ends malformed).
                    scan::drop_unoffered_name(&mut call, tools);
                    out.calls.push(call);
                    return None;
                }
                Err(Stop::Bad(m)) => {
                    return fail(call_start, ToolParseError::Syntax(m), out, content)
                }
            }
        }
    }
}

impl Pythonic {
    /// The text after the calls (from `end`, where [`Pythonic::read_calls`] says they end)
    /// is content.
    fn push_after_calls(&self, text: &str, end: Option<usize>, at_end: bool, c: &mut Content) {
        if let Some(end) = end {
            let tail = &text[end..];
            if at_end {
                c.push(strip_end_marks(tail));
            } else {
                let n = scan::stable_len(tail, END_MARKS, true);
                c.push(strip_end_marks(&tail[..n]));
            }
        }
    }
}

/// [`Settled::state`] just after a call in a bracketed list.
const BRACKETED: u8 = 1;
/// [`Settled::state`] just after a bare call.
const BARE: u8 = 2;

impl ToolCallFormat for Pythonic {
    format_name!("pythonic");

    structural_tag_from_choice!(|f, _, mode, allowed, parallel| {
        // Free text that the parser never reads as calls: empty, or not starting with `[`.
        let text = tags::text_not_opening_with("\\[");
        let format = if mode == CallMode::None {
            text
        } else {
            let mut g = Gen {
                rules: Vec::new(),
                options: &f.options,
            };
            let mut calls = Vec::new();
            for t in &allowed {
                calls.push(g.call(t)?);
            }
            let call = calls.join(" | ");
            let list = if parallel && mode != CallMode::Forced {
                format!("\"[\" ({call}) (\", \" ({call}))* \"]\"")
            } else {
                format!("\"[\" ({call}) \"]\"")
            };
            let mut ebnf = format!("root ::= {list}\n");
            for r in &g.rules {
                ebnf.push_str(r);
                ebnf.push('\n');
            }
            ebnf.push_str(BASE_RULES);
            let grammar = json!({"type": "grammar", "grammar": ebnf});
            if mode == CallMode::Auto {
                json!({"type": "or", "elements": [grammar, text]})
            } else {
                grammar
            }
        };
        Ok(format)
    });

    parse_with_driver!(own: parse_turn, text_to_end: &[]);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        let items: Vec<String> = calls
            .iter()
            .map(|c| {
                let args: Vec<String> = match &c.arguments {
                    Value::Object(m) => m
                        .iter()
                        .map(|(k, v)| format!("{k}={}", python_literal(v)))
                        .collect(),
                    _ => Vec::new(),
                };
                format!("{}({})", c.name, args.join(", "))
            })
            .collect();
        format!("[{}]", items.join(", "))
    }

    fn render_tool_result(&self, _call: &ToolCall, result: &Value) -> String {
        scan::result_text(result)
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from(
            "The functions below are available, as JSON. To call any of them, reply with \
             nothing but a Python list of calls with keyword arguments and literal \
             values, such as [name1(a=1, b='x'), name2(c=True)].\n",
        );
        for t in tools {
            s.push('\n');
            s.push_str(&scan::python_json(&t.to_openai()));
        }
        s
    }
}

impl Pythonic {
    /// The parse behind [`ToolCallFormat::parse_partial_from`].
    fn parse_turn(&self, parse: driver::Parse<'_>) -> PartialOutput {
        let (text, from, tools, at_end) = (parse.text, parse.from, parse.tools, parse.at_end);
        let mut out = PartialOutput::default();
        let mut content = Content::default();
        // Where the calls start: the list's start, the first call, bracketed, resumed.
        let calls = if from.offset > 0 {
            let bracketed = from.state == BRACKETED;
            Some((from.offset, from.offset, bracketed, true))
        } else {
            self.opening(text, tools, at_end, &mut out, &mut content)
        };
        if let Some((list_start, start, bracketed, resumed)) = calls {
            let end = self.read_calls(
                text,
                list_start,
                start,
                bracketed,
                resumed,
                tools,
                at_end,
                &mut out,
                &mut content,
            );
            self.push_after_calls(text, end, at_end, &mut content);
        }
        out.content = content.into_string();
        out
    }

    /// The output's opening read from its start: where its calls begin, as
    /// `(list start, first call, bracketed, false)`; `None` when it holds no call (its
    /// text then pushed to `content` as far as it is stable) or is too short to say.
    fn opening(
        &self,
        text: &str,
        tools: &[Tool],
        at_end: bool,
        out: &mut PartialOutput,
        content: &mut Content,
    ) -> Option<(usize, usize, bool, bool)> {
        // Text, not a call: all of it (from `p`) is content.
        let text_from = |p: usize, out: &mut PartialOutput, content: &mut Content| {
            if let Some(n) = content.push_tail(&text[p..], &[], at_end) {
                scan::settle_open(out, content, p + n);
            }
            None
        };
        let mut p = text.len() - text.trim_start().len();
        let rest = &text[p..];
        if rest.starts_with(PY_START) {
            p += PY_START.len();
            p += text[p..].len() - text[p..].trim_start().len();
        } else if !at_end && !rest.is_empty() && PY_START.starts_with(rest) {
            return None;
        }
        if text[p..].starts_with('[') {
            match starts_call(text, p + 1) {
                None if !at_end => None,
                Some(Some(_)) => Some((p, p + 1, true, false)),
                _ => text_from(p, out, content),
            }
        } else if self.bare {
            match starts_call(text, p) {
                None if !at_end && !text[p..].contains(char::is_whitespace) => None,
                Some(Some(n)) if tools.is_empty() || tools.iter().any(|t| t.name == n) => {
                    Some((p, p, false, false))
                }
                // A name, whitespace, and nothing decisive yet.
                None if !at_end => None,
                _ => text_from(p, out, content),
            }
        } else {
            text_from(p, out, content)
        }
    }
}

#[cfg(test)]
mod tests;
