//! `json_schema` with the XML-like styles: `qwen_xml` (Qwen3-Coder's parameter list),
//! `glm_xml` and `glm47_xml` (GLM's key/value pairs), `minimax_xml` (MiniMax-M2) and
//! `deepseek_xml` (DeepSeek V3.2 / V4 DSML).
//!
//! An object schema's properties become items in declared order, each at most once,
//! required ones present:
//! * `qwen_xml`: `<parameter=NAME>\nVALUE\n</parameter>` joined by `\n` (the Qwen3-Coder
//!   chat template and XGrammar's `qwen_xml` style; section 4.2 of
//!   ../shared/docs/tool-call-formats.md);
//! * `glm_xml`: `<arg_key>NAME</arg_key>\n<arg_value>VALUE</arg_value>` joined by `\n`
//!   (GLM-4.5/4.6 template, section 4.8);
//! * `glm47_xml`: `<arg_key>NAME</arg_key><arg_value>VALUE</arg_value>`, no separator
//!   (GLM-4.7/5);
//! * `minimax_xml`: `<parameter name="NAME">VALUE</parameter>` joined by `\n` (the
//!   MiniMax-M2 chat template; XGrammar's `minimax_xml` style);
//! * `deepseek_xml`: `<｜DSML｜parameter name="NAME" string="true">RAW</｜DSML｜parameter>`
//!   for a string value and `string="false">JSON` for any other, joined by `\n` (DeepSeek
//!   V3.2's `encoding_dsv32.py`, V4 the same; XGrammar's `deepseek_xml` style, which
//!   leaves the attribute free where this grammar ties it to the value's kind, as the
//!   encoder writes it). See docs/tool-call-formats-extra.md.
//!
//! A string value is raw text that never contains the style's closing tag (`</parameter>`,
//! `</arg_value>`), restricted by the string schema's `minLength`/`maxLength` (characters
//! of the raw text), `pattern` and `format` (matched against the raw text; see
//! `json_schema::raw_string_grammar`), or one of the schema's `enum`/`const` strings (also when the property
//! is a `$ref` to such a string schema in the root's `$defs`/`definitions`, see
//! [`resolve_local_ref`]); any other value is JSON under its schema. A property that
//! admits strings among other values (a type list holding `"string"`, such as schemars'
//! `Option<String>` `["string", "null"]`, or an `anyOf`/`oneOf` with a string branch,
//! through local `$ref`s; see [`string_branches`]) takes the raw text of its string
//! branches or the JSON of its other branches, as the families' templates write them.
//! Raw text cannot say which it is: the tool parsers read it as a non-string value when it
//! is JSON valid under a non-string branch (`null`, `42`), else as the string.

use super::format::JsonStyle;
use super::lower::Lowerer;
use super::text::text_avoiding;
use super::StructuralTagError;
use crate::grammar::Expr;
use crate::json_schema::{
    json_schema_to_grammar_limited, raw_string_admits, raw_string_grammar, JsonSchemaError,
    JsonSchemaOptions, RAW_STRING_KEYWORDS,
};
use serde_json::{Map, Value};

const CLOSE: &str = "</parameter>";
const GLM_CLOSE: &str = "</arg_value>";
/// DeepSeek's DSML parameter tags (U+FF5C FULLWIDTH VERTICAL LINE around `DSML`).
const DSML_PARAM: &str = "<\u{ff5c}DSML\u{ff5c}parameter name=\"";
const DSML_CLOSE: &str = "</\u{ff5c}DSML\u{ff5c}parameter>";

/// How one XML-like style writes an item.
pub(super) struct XmlStyle {
    /// The style's name, for messages.
    name: &'static str,
    /// What comes before a property's name.
    open: &'static str,
    /// What comes between the name and the value (for a raw string value, when
    /// `after_name_json` is set).
    after_name: &'static str,
    /// What comes between the name and a JSON (non-string) value, where the style marks
    /// the value's kind (DSML's `string="false"`); `None`: `after_name` for every value.
    after_name_json: Option<&'static str>,
    /// What comes after the value.
    after_value: &'static str,
    /// Between two items.
    separator: &'static str,
    /// The text a raw string value never contains.
    close: &'static str,
}

/// Keywords of the object schema itself that the parameter list honours or may ignore.
const OBJECT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "title",
    "description",
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "examples",
    "default",
];

/// Keywords of a string property that do not change its raw text.
const STRING_ANNOTATIONS: &[&str] = &[
    "type",
    "title",
    "description",
    "default",
    "examples",
    "$comment",
];

/// The schema a property's `schema` stands for: through a `$ref` to the root's `$defs` or
/// `definitions` (`#/$defs/NAME`, `#/definitions/NAME`, chains of them followed up to 16
/// times) when `schema` has no keyword beside `$ref` but annotations, else `schema`
/// itself. The XML-style grammars decide raw text against it, and the tool parsers type
/// values against it, so both read a `$ref`'d string (schemars' unit-variant enums) as
/// raw text, as the families' renderers write it.
pub fn resolve_local_ref<'a>(schema: &'a Value, root: Option<&'a Map<String, Value>>) -> &'a Value {
    let mut s = schema;
    for _ in 0..16 {
        let Some((Some(r), obj)) = s.as_object().map(|o| (o.get("$ref"), o)) else {
            return s;
        };
        let only_ref = obj
            .keys()
            .all(|k| k == "$ref" || STRING_ANNOTATIONS.contains(&k.as_str()));
        let target = r.as_str().and_then(|r| {
            let (defs, name) = r
                .strip_prefix("#/$defs/")
                .map(|n| ("$defs", n))
                .or_else(|| r.strip_prefix("#/definitions/").map(|n| ("definitions", n)))?;
            if name.contains(['/', '~', '%']) {
                return None;
            }
            root?.get(defs)?.get(name)
        });
        match target {
            Some(t) if only_ref => s = t,
            _ => return s,
        }
    }
    s
}

fn unsupported(path: &str, keyword: &str, reason: &str) -> StructuralTagError {
    StructuralTagError::Schema {
        path: path.to_string(),
        source: Box::new(JsonSchemaError::Unsupported {
            keyword: keyword.to_string(),
            pointer: "#".to_string(),
            reason: reason.to_string(),
        }),
    }
}

/// Qwen3-Coder's `<parameter=NAME>\nVALUE\n</parameter>` items joined by `\n` (`qwen_xml`).
pub(super) const QWEN: XmlStyle = XmlStyle {
    name: "qwen_xml",
    open: "<parameter=",
    after_name: ">\n",
    after_name_json: None,
    after_value: "\n</parameter>",
    separator: "\n",
    close: CLOSE,
};

/// MiniMax-M2's `<parameter name="NAME">VALUE</parameter>` items joined by `\n`
/// (`minimax_xml`).
pub(super) const MINIMAX: XmlStyle = XmlStyle {
    name: "minimax_xml",
    open: "<parameter name=\"",
    after_name: "\">",
    after_name_json: None,
    after_value: CLOSE,
    separator: "\n",
    close: CLOSE,
};

/// DeepSeek V3.2 / V4's DSML items joined by `\n` (`deepseek_xml`): `string="true"`
/// before a raw string value, `string="false"` before a JSON value.
pub(super) const DEEPSEEK: XmlStyle = XmlStyle {
    name: "deepseek_xml",
    open: DSML_PARAM,
    after_name: "\" string=\"true\">",
    after_name_json: Some("\" string=\"false\">"),
    after_value: DSML_CLOSE,
    separator: "\n",
    close: DSML_CLOSE,
};

/// GLM-4.5/4.6's `<arg_key>`/`<arg_value>` pairs with a `\n` between key and value and
/// between pairs (`glm_xml`).
pub(super) const GLM: XmlStyle = XmlStyle {
    name: "glm_xml",
    open: "<arg_key>",
    after_name: "</arg_key>\n<arg_value>",
    after_name_json: None,
    after_value: GLM_CLOSE,
    separator: "\n",
    close: GLM_CLOSE,
};

/// GLM-4.7/5's pairs with no newlines (`glm47_xml`).
pub(super) const GLM47: XmlStyle = XmlStyle {
    name: "glm47_xml",
    after_name: "</arg_key><arg_value>",
    separator: "",
    ..GLM
};

/// The XML-like style `style` names; `None` for plain JSON.
pub(super) fn style_of(style: &JsonStyle) -> Option<&'static XmlStyle> {
    match style {
        JsonStyle::Json => None,
        JsonStyle::QwenXml => Some(&QWEN),
        JsonStyle::GlmXml => Some(&GLM),
        JsonStyle::Glm47Xml => Some(&GLM47),
        JsonStyle::MiniMaxXml => Some(&MINIMAX),
        JsonStyle::DeepSeekXml => Some(&DEEPSEEK),
    }
}

/// The arguments object of `schema` written as `style`'s items.
pub(super) fn xml_params(
    l: &mut Lowerer<'_>,
    schema: &Value,
    opts: &JsonSchemaOptions,
    path: &str,
    style: &XmlStyle,
) -> Result<Expr, StructuralTagError> {
    let sname = style.name;
    if opts.any_order {
        return Err(StructuralTagError::Unsupported {
            path: format!("{path}.any_order"),
            what: format!("`any_order` with style `{sname}`"),
        });
    }
    let empty = Map::new();
    let obj = match schema {
        Value::Object(o) => o,
        Value::Bool(true) => &empty,
        _ => {
            return Err(unsupported(
                path,
                "type",
                &format!("{sname} needs an object schema"),
            ))
        }
    };
    if let Some(k) = obj.keys().find(|k| !OBJECT_KEYWORDS.contains(&k.as_str())) {
        return Err(unsupported(
            path,
            k,
            &format!("not supported with style {sname}"),
        ));
    }
    if obj.get("type").is_some_and(|t| t != "object") {
        return Err(unsupported(
            path,
            "type",
            &format!("{sname} needs `type: object`"),
        ));
    }
    let props = match obj.get("properties") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(unsupported(path, "properties", "not an object")),
    };
    let required: Vec<&str> = match obj.get("required") {
        None => Vec::new(),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        Some(_) => return Err(unsupported(path, "required", "not an array of names")),
    };
    if let Some(r) = required.iter().find(|r| !props.contains_key(**r)) {
        return Err(unsupported(
            path,
            "required",
            &format!("required property {r:?} has no schema in `properties`"),
        ));
    }
    let mut items: Vec<(Expr, bool)> = Vec::with_capacity(props.len());
    for (name, sub) in &props {
        let value = value_grammar(l, obj, name, sub, opts, path, style)?;
        let item = Expr::Seq(vec![
            l.text(&format!("{}{name}", style.open)),
            value,
            l.text(style.after_value),
        ]);
        items.push((item, required.contains(&name.as_str())));
    }
    Ok(separated(l, items, style.separator))
}

/// A property schema that admits strings, split for the XML-style families: the string
/// branches are written as raw text, the rest as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct StringBranches {
    /// The branches whose instances are strings, each `"type": "string"` (with its
    /// `enum`/`const` restricted to strings).
    pub strings: Vec<Map<String, Value>>,
    /// The schema of every other instance the property admits (JSON), `None` when it
    /// admits strings only. May hold `$ref`s to the root's `$defs`/`definitions`.
    pub others: Option<Value>,
}

/// How a property schema (already through [`resolve_local_ref`]) splits into string and
/// non-string branches: `"type": "string"` is all string; a type list holding `"string"`
/// splits into a string schema and the same schema with the other types (`enum`/`const`
/// divided by the kind of their values); an `anyOf`/`oneOf` (with annotations at most
/// beside it) splits each branch, through local `$ref`s, the non-string branches staying
/// an `anyOf`/`oneOf`. `None` when no branch is a string (the value is JSON).
pub fn string_branches(
    schema: &Value,
    root: Option<&Map<String, Value>>,
) -> Option<StringBranches> {
    split_branches(schema, root, 0)
}

fn split_branches(
    schema: &Value,
    root: Option<&Map<String, Value>>,
    depth: usize,
) -> Option<StringBranches> {
    let s = resolve_local_ref(schema, root).as_object()?;
    if depth > 8 {
        return None;
    }
    match s.get("type") {
        Some(Value::String(t)) if t == "string" => {
            return Some(StringBranches {
                strings: vec![s.clone()],
                others: None,
            })
        }
        Some(Value::Array(types)) if types.iter().any(|t| t == "string") => {
            let rest: Vec<Value> = types.iter().filter(|t| *t != "string").cloned().collect();
            let mut string = s.clone();
            string.insert("type".into(), Value::from("string"));
            // Keywords that constrain only non-string instances: the string branch of a
            // type list (`"type": ["integer", "string"], "minimum": 0`) drops them.
            string.retain(|k, _| {
                crate::json_schema::keyword_instance_type(k)
                    .map_or(true, |t| t == crate::json_schema::InstanceType::String)
            });
            let mut other = s.clone();
            other.insert(
                "type".into(),
                match rest.as_slice() {
                    [one] => one.clone(),
                    _ => Value::Array(rest.clone()),
                },
            );
            let (mut has_string, mut has_other) = (true, !rest.is_empty());
            if let Some(Value::Array(e)) = s.get("enum") {
                let (strs, non): (Vec<Value>, Vec<Value>) =
                    e.iter().cloned().partition(Value::is_string);
                has_string = !strs.is_empty();
                has_other &= !non.is_empty();
                string.insert("enum".into(), Value::Array(strs));
                other.insert("enum".into(), Value::Array(non));
            }
            if let Some(c) = s.get("const") {
                has_string &= c.is_string();
                has_other &= !c.is_string();
            }
            return has_string.then(|| StringBranches {
                strings: vec![string],
                others: has_other.then_some(Value::Object(other)),
            });
        }
        _ => {}
    }
    let key = ["anyOf", "oneOf"]
        .into_iter()
        .find(|k| s.contains_key(*k))?;
    let Some(Value::Array(branches)) = s.get(key) else {
        return None;
    };
    // Keywords beside the `anyOf` would constrain every branch: not split.
    let beside =
        |k: &String| k != key && (k == "type" || !STRING_ANNOTATIONS.contains(&k.as_str()));
    if s.keys().any(beside) {
        return None;
    }
    let mut strings = Vec::new();
    let mut others = Vec::new();
    for b in branches {
        match split_branches(b, root, depth + 1) {
            Some(split) => {
                strings.extend(split.strings);
                others.extend(split.others);
            }
            None => others.push(b.clone()),
        }
    }
    if strings.is_empty() {
        return None;
    }
    let others = match others.len() {
        0 => None,
        1 => others.pop(),
        _ => Some(serde_json::json!({ key: others })),
    };
    Some(StringBranches { strings, others })
}

/// The grammar of one property's value, with what the style writes between the name and
/// it (`after_name`, or `after_name_json` before a JSON value).
fn value_grammar(
    l: &mut Lowerer<'_>,
    root: &Map<String, Value>,
    name: &str,
    sub: &Value,
    opts: &JsonSchemaOptions,
    path: &str,
    style: &XmlStyle,
) -> Result<Expr, StructuralTagError> {
    let raw_prefix = l.text(style.after_name);
    let json_prefix = l.text(style.after_name_json.unwrap_or(style.after_name));
    let Some(split) = string_branches(sub, Some(root)) else {
        let json = json_grammar(l, root, sub, opts, path)?;
        return Ok(Expr::Seq(vec![json_prefix, json]));
    };
    let mut alts = Vec::new();
    for s in &split.strings {
        if let Some(raw) = raw_text_grammar(l, s, name, opts, path, style)? {
            alts.push(Expr::Seq(vec![raw_prefix.clone(), raw]));
        }
    }
    if let Some(others) = &split.others {
        let json = json_grammar(l, root, others, opts, path)?;
        alts.push(Expr::Seq(vec![json_prefix, json]));
    }
    match alts.len() {
        0 => Err(StructuralTagError::Schema {
            path: path.to_string(),
            source: Box::new(JsonSchemaError::Unsatisfiable {
                pointer: format!("#/properties/{name}"),
                reason: "no string in `enum`/`const`".to_string(),
            }),
        }),
        1 => Ok(alts.pop().expect("one alternative")),
        _ => Ok(Expr::Choice(alts)),
    }
}

/// The raw text of a `"type": "string"` schema `s`: any text without the style's closing
/// tag, or one of its `enum`/`const` strings (`None` when it has none the style can
/// write); `minLength`/`maxLength` (characters of the raw text), `pattern` and `format`
/// (matched against the raw text) restrict both ([`raw_string_grammar`]). Any other
/// keyword is refused (it names the property and the style).
fn raw_text_grammar(
    l: &mut Lowerer<'_>,
    s: &Map<String, Value>,
    name: &str,
    opts: &JsonSchemaOptions,
    path: &str,
    style: &XmlStyle,
) -> Result<Option<Expr>, StructuralTagError> {
    let close = style.close;
    if let Some(k) = s.keys().find(|k| {
        !STRING_ANNOTATIONS.contains(&k.as_str())
            && !RAW_STRING_KEYWORDS.contains(&k.as_str())
            && *k != "enum"
            && *k != "const"
    }) {
        return Err(unsupported(
            path,
            k,
            &format!(
                "property {name:?}: raw strings of style {} cannot enforce it",
                style.name
            ),
        ));
    }
    let fixed: Option<Vec<&Value>> = match (s.get("enum"), s.get("const")) {
        (Some(Value::Array(e)), None) => Some(e.iter().collect()),
        (None, Some(c)) => Some(vec![c]),
        (None, None) => None,
        _ => {
            return Err(unsupported(
                path,
                "enum",
                &format!("property {name:?}: `enum` and `const` together"),
            ))
        }
    };
    let keywords = s.keys().any(|k| RAW_STRING_KEYWORDS.contains(&k.as_str()));
    let pointer = format!(
        "#/properties/{}",
        name.replace('~', "~0").replace('/', "~1")
    );
    let schema_error = |e: JsonSchemaError| StructuralTagError::Schema {
        path: path.to_string(),
        source: Box::new(annotate(e, name, style.name)),
    };
    Ok(match fixed {
        None if keywords => raw_string_grammar(s, &pointer, close, opts)
            .map_err(schema_error)?
            .map(|g| Expr::Rule(l.b.embed(g, "raw"))),
        None => Some(text_avoiding(&mut l.b, &[close.to_string()], "raw")),
        Some(values) => {
            let mut alts: Vec<Expr> = Vec::new();
            for v in values.iter().filter_map(|v| v.as_str()) {
                // The fixed strings must satisfy the other keywords too.
                let admitted =
                    !keywords || raw_string_admits(s, &pointer, v, opts).map_err(schema_error)?;
                if admitted && !v.contains(close) {
                    alts.push(l.text(v));
                }
            }
            (!alts.is_empty()).then_some(Expr::Choice(alts))
        }
    })
}

/// `e` with the property and the style named in its reason.
fn annotate(e: JsonSchemaError, name: &str, style: &str) -> JsonSchemaError {
    match e {
        JsonSchemaError::Unsupported {
            keyword,
            pointer,
            reason,
        } => JsonSchemaError::Unsupported {
            reason: format!("property {name:?}: raw strings of style {style}: {reason}"),
            keyword,
            pointer,
        },
        e => e,
    }
}

/// JSON under `schema`, with the root's `$defs`/`definitions` reachable.
fn json_grammar(
    l: &mut Lowerer<'_>,
    root: &Map<String, Value>,
    schema: &Value,
    opts: &JsonSchemaOptions,
    path: &str,
) -> Result<Expr, StructuralTagError> {
    let schema = with_root_defs(schema, Some(root));
    let g =
        json_schema_to_grammar_limited(&schema, opts, &l.limits, l.json_form()).map_err(|e| {
            StructuralTagError::Schema {
                path: path.to_string(),
                source: Box::new(e),
            }
        })?;
    Ok(Expr::Rule(l.embed_json(g, opts, "param", path)?))
}

/// `schema` with the root's `$defs`/`definitions` copied in (when it has none of its
/// own), so that its local `$ref`s resolve on their own.
pub fn with_root_defs(schema: &Value, root: Option<&Map<String, Value>>) -> Value {
    let mut schema = schema.clone();
    if let (Value::Object(s), Some(root)) = (&mut schema, root) {
        for k in ["$defs", "definitions"] {
            if let (Some(d), false) = (root.get(k), s.contains_key(k)) {
                s.insert(k.to_string(), d.clone());
            }
        }
    }
    schema
}

/// Items in order, each optional unless marked required, with `sep` between two present
/// items. Linear size: `F_i` (no item printed yet) and `S_i` (some printed) for each i.
fn separated(l: &mut Lowerer<'_>, items: Vec<(Expr, bool)>, sep: &str) -> Expr {
    let sep = l.text(sep);
    // Built from the back: after[i] = S_i, first[i] = F_i.
    let mut after = Expr::Empty;
    let mut first = Expr::Empty;
    for (item, required) in items.into_iter().rev() {
        let item = Expr::Rule(l.b.add("param", item));
        let s_rule = Expr::Rule(l.b.add("params_after", after));
        let with_sep = Expr::Seq(vec![sep.clone(), item.clone(), s_rule.clone()]);
        let new_after = if required {
            with_sep
        } else {
            Expr::Choice(vec![with_sep, s_rule.clone()])
        };
        let f_rule = Expr::Rule(l.b.add("params_first", first));
        let start = Expr::Seq(vec![item, s_rule]);
        first = if required {
            start
        } else {
            Expr::Choice(vec![start, f_rule])
        };
        after = new_after;
    }
    first
}
