//! XML parameter values: raw-string schemas, and a value typed by its property schema.

#[allow(unused_imports)]
use super::*;

/// Whether a property schema declares exactly `type: "string"`: XML-style families write
/// such values raw (and the `qwen_xml`/`glm_xml` grammars do) and stream them as they
/// arrive. A schema that admits strings among other values is raw too, or JSON, but is
/// typed only once whole ([`typed_xml_value`]).
pub fn is_raw_string_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("string")
}

/// The JSON value of an XML-style family's raw value text, typed by the property's schema
/// (vLLM's `qwen3_coder`/`glm45` conversion, made total): a property declared
/// `type: "string"` keeps the raw text; one that admits strings among other values (a
/// type list holding `"string"`, an `anyOf`/`oneOf` with a string branch, through local
/// `$ref`s into `root`; [`tokensieve::structural_tag::xml::string_branches`]) is the JSON value
/// of the text when that is valid under a non-string branch (`null` for an
/// `Option<String>`, `42` for `["integer", "string"]`), else the raw text; any other
/// declared property is read as JSON (a number beyond `f64` as `±1e308`, see
/// [`whole_json_value`]), else as a Python literal (`True`, `None`, single
/// quotes; a string holding JSON for object and array types is decoded once more), else
/// kept as text, so a bad value never drops the call. An undeclared property (`schema`
/// `None`) is text when `undeclared_is_text`, else typed like a declared non-string one.
pub fn typed_xml_value(
    raw: &str,
    schema: Option<&Value>,
    root: Option<&serde_json::Map<String, Value>>,
    undeclared_is_text: bool,
) -> Value {
    match schema {
        Some(s) if is_raw_string_schema(s) => return Value::String(raw.to_owned()),
        None if undeclared_is_text => return Value::String(raw.to_owned()),
        _ => {}
    }
    if let Some(split) =
        schema.and_then(|s| tokensieve::structural_tag::xml::string_branches(s, root))
    {
        let json = split.others.as_ref().and_then(|others| {
            let v = whole_json_value(raw)?;
            let others = tokensieve::structural_tag::xml::with_root_defs(others, root);
            let valid = jsonschema::options()
                .build(&others)
                .is_ok_and(|validator| validator.is_valid(&v));
            (!v.is_string() && valid).then_some(v)
        });
        return json.unwrap_or_else(|| Value::String(raw.to_owned()));
    }
    let t = raw.trim();
    let v = whole_json_value(t).or_else(|| python_literal(t));
    match v {
        Some(Value::String(inner)) => {
            let structured = schema
                .and_then(|s| s.get("type"))
                .and_then(Value::as_str)
                .is_some_and(|ty| ty == "object" || ty == "array");
            if structured {
                if let Some(v) = serde_json::from_str::<Value>(inner.trim())
                    .ok()
                    .or_else(|| python_literal(inner.trim()))
                    .filter(|v| v.is_object() || v.is_array())
                {
                    return v;
                }
            }
            Value::String(inner)
        }
        Some(v) => v,
        None => Value::String(raw.to_owned()),
    }
}

/// Calls as the XML-parameter families write them: per call `open(name)`, then
/// `param(key, value)` for each argument in order, then `close`; calls joined by
/// `separator`.
pub fn render_xml_calls(
    calls: &[ToolCall],
    open: impl Fn(&str) -> String,
    param: impl Fn(&str, &Value) -> String,
    close: &str,
    separator: &str,
) -> String {
    calls
        .iter()
        .map(|c| {
            let mut s = open(&c.name);
            if let Value::Object(args) = &c.arguments {
                for (k, v) in args {
                    s.push_str(&param(k, v));
                }
            }
            s.push_str(close);
            s
        })
        .collect::<Vec<_>>()
        .join(separator)
}
