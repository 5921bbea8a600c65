//! The structural tag every family shares, given its envelope: free text, then calls
//! entered through a trigger, joined by a separator, optionally inside a section, after an
//! optional reasoning block — shaped by the resolved [`CallMode`] and `parallel`
//! (section 5.4 of the tool-call format notes).

use serde_json::{json, Value};

use super::{ArgumentSchemas, CallMode, FormatOptions, Tool, ToolChoice, ToolError};
use tokensieve::StructuralTag;

/// A family's call syntax, as the shared assembler needs it.
#[derive(Clone, Debug, Default)]
pub struct Envelope {
    /// Text that starts every call (and never occurs in free text).
    pub trigger: String,
    /// Written between two calls.
    pub separator: String,
    /// Begin and end of the section wrapping all calls of a turn (DeepSeek, Kimi).
    pub section: Option<(String, String)>,
    /// `required` allows content before the calls (Hermes, Qwen-XML, GLM, Mistral,
    /// DeepSeek, Kimi); off for bare-JSON and pythonic families.
    pub leading_text_in_required: bool,
    /// The reasoning block: begin, end, and what the template writes after it. An empty
    /// begin: the prompt opens the block (DeepSeek V3.2 / V4, MiniMax-M2), the output
    /// starts inside it.
    pub reasoning: Option<(String, String, String)>,
    /// More strings free text never contains (other markers of the family).
    pub excludes: Vec<String>,
    /// The family's markers that a call's JSON strings never hold as written (unless
    /// [`FormatOptions::markers_in_strings`]): those that are text in some vocabulary
    /// (`<tool_call>` is an added, not special, token on Qwen). Markers that are special
    /// tokens need no entry: grammar text never produces a special token.
    pub markers: Vec<String>,
}

/// The arguments format for `tool`: its input schema (or any object, see
/// [`ArgumentSchemas`]) as a `json_schema` structural-tag format.
pub fn json_arguments(tool: &Tool, options: &FormatOptions) -> Value {
    let mut f = json!({"type": "json_schema", "json_schema": argument_schema(tool, options),
           "any_order": options.any_order});
    set_json_limits(&mut f, options);
    f
}

/// The tag of one call written as a JSON object, `{"name": NAME, "MEMBER": ARGS}` with
/// `member` `arguments` or `parameters` and `ARGS` under [`json_arguments`], between
/// `open` and `close`.
pub fn json_call_object(
    tool: &Tool,
    options: &FormatOptions,
    open: &str,
    member: &str,
    close: &str,
) -> Value {
    let name = serde_json::to_string(&tool.name).unwrap_or_default();
    json!({"type": "tag",
        "begin": format!("{open}{{\"name\": {name}, \"{member}\": "),
        "content": json_arguments(tool, options),
        "end": format!("}}{close}")})
}

/// Sets the whitespace and digit caps of `options` on the `json_schema` format `f`.
pub fn set_json_limits(f: &mut Value, options: &FormatOptions) {
    if let Some(n) = options.max_whitespace {
        f["max_whitespace"] = json!(n);
    }
    if let Some(n) = options.max_whitespace_newlines {
        f["max_whitespace_newlines"] = json!(n);
    }
    if let Some(n) = options.max_number_digits {
        f["max_number_digits"] = json!(n);
    }
}

/// The schema a tool's arguments are constrained to: the input schema with objects closed
/// (see [`FormatOptions::closed_objects`]), or any object.
pub fn argument_schema(tool: &Tool, options: &FormatOptions) -> Value {
    let use_schema = tool.strict || options.arguments == ArgumentSchemas::Always;
    if use_schema && tool.input_schema != Value::Bool(true) {
        let mut s = tool.input_schema.clone();
        if options.closed_objects {
            close_objects(&mut s);
        }
        s
    } else {
        json!({"type": "object"})
    }
}

/// Adds `"additionalProperties": false` to every object schema that declares
/// `properties` and says nothing about other properties (no `additionalProperties`,
/// `patternProperties`, `unevaluatedProperties`), except under `allOf`, where closing one
/// branch would forbid the other branches' properties. A subset of the original
/// language, so the arguments still validate against the tool's own schema.
fn close_objects(schema: &mut Value) {
    let Value::Object(obj) = schema else { return };
    let open = obj.contains_key("properties")
        && !obj.contains_key("additionalProperties")
        && !obj.contains_key("patternProperties")
        && !obj.contains_key("unevaluatedProperties")
        && !obj.contains_key("allOf");
    if open {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(m)) = obj.get_mut(key) {
            for v in m.values_mut() {
                close_objects(v);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(v) = obj.get_mut(key) {
            close_objects(v);
        }
    }
    for key in ["prefixItems", "anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = obj.get_mut(key) {
            for v in list {
                close_objects(v);
            }
        }
    }
}

/// Builds the whole tag. `call_tag(tool)` gives one call's `tag` format (JSON), whose
/// `begin` starts with the envelope's trigger.
pub fn assemble(
    env: &Envelope,
    tools: &[Tool],
    choice: &ToolChoice,
    parallel: bool,
    options: &FormatOptions,
    mut call_tag: impl FnMut(&Tool) -> Result<Value, ToolError>,
) -> Result<StructuralTag, ToolError> {
    let (mode, allowed) = choice.resolve(tools)?;
    let mut excludes: Vec<String> = vec![env.trigger.clone()];
    if let Some((begin, _)) = &env.section {
        excludes.push(begin.clone());
    }
    excludes.extend(env.excludes.iter().cloned());
    let excludes = unique_markers(excludes);
    let free_text = json!({"type": "any_text", "excludes": excludes});

    let mut tags = Vec::with_capacity(allowed.len());
    for t in &allowed {
        let mut tag = call_tag(t)?;
        if !options.markers_in_strings {
            exclude_from_strings(&mut tag, &env.markers);
        }
        tags.push(tag);
    }
    let one_or_more = |tags: Vec<Value>| -> Value {
        if parallel && mode != CallMode::Forced {
            json!({"type": "tags_with_separator", "tags": tags, "separator": env.separator,
                   "at_least_one": true, "stop_after_first": false})
        } else if tags.len() == 1 {
            tags.into_iter().next().unwrap_or(Value::Null)
        } else {
            json!({"type": "or", "elements": tags})
        }
    };
    let in_section = |calls: Value| -> Value {
        match &env.section {
            Some((b, e)) => json!({"type": "sequence", "elements": [
                {"type": "const_string", "value": b}, calls, {"type": "const_string", "value": e}]}),
            None => calls,
        }
    };
    let body = match mode {
        CallMode::None => free_text,
        CallMode::Forced => in_section(one_or_more(tags)),
        CallMode::Auto | CallMode::Required if options.text_after_calls => {
            let triggers = vec![env.trigger.clone()];
            if env.section.is_some() {
                // Sections hold calls; text may follow a whole section.
                let block = in_section(one_or_more(tags));
                let seq = json!({"type": "sequence", "elements": [free_text.clone(), block]});
                if mode == CallMode::Auto {
                    json!({"type": "or", "elements": [free_text, json!({"type": "sequence",
                        "elements": [seq, {"type": "any_text"}]})]})
                } else {
                    json!({"type": "sequence", "elements": [seq, {"type": "any_text"}]})
                }
            } else {
                json!({"type": "triggered_tags", "triggers": triggers, "tags": tags,
                       "at_least_one": mode == CallMode::Required
                           && !(env.leading_text_in_required && options.leading_text),
                       "stop_after_first": !parallel, "excludes": env.excludes})
            }
        }
        CallMode::Auto => {
            let block = in_section(one_or_more(tags));
            json!({"type": "sequence", "elements": [free_text,
                {"type": "optional", "content": block}]})
        }
        CallMode::Required => {
            let block = in_section(one_or_more(tags));
            if env.leading_text_in_required && options.leading_text {
                json!({"type": "sequence", "elements": [free_text, block]})
            } else {
                block
            }
        }
    };
    let format = match (&env.reasoning, options.reasoning) {
        (Some((begin, end, after)), true) => {
            let mut reasoning_excludes = excludes_of_reasoning(env);
            reasoning_excludes.push(begin.clone());
            let reasoning_excludes = unique_markers(reasoning_excludes);
            let mut elements = vec![json!({"type": "tag", "begin": begin,
                "content": {"type": "any_text", "excludes": reasoning_excludes}, "end": end})];
            if !after.is_empty() {
                elements.push(json!({"type": "const_string", "value": after}));
            }
            elements.push(body);
            json!({"type": "sequence", "elements": elements})
        }
        _ => body,
    };
    structural_tag(format, "structural tag")
}

/// The structural tag whose format is `format` (a structural-tag format value), built for
/// `family`.
///
/// # Errors
/// [`ToolError::Unsupported`] naming `family`, with the builder's reason, when the tag
/// does not build.
pub fn structural_tag(format: Value, family: &str) -> Result<StructuralTag, ToolError> {
    StructuralTag::from_json(&json!({"type": "structural_tag", "format": format})).map_err(|e| {
        ToolError::Unsupported {
            format: family.into(),
            reason: e.to_string(),
        }
    })
}

/// Adds `markers` to the `string_excludes` of every JSON-style `json_schema` format inside
/// the structural-tag format `f` (XML styles write raw values, which avoid their own
/// closing tags).
fn exclude_from_strings(f: &mut Value, markers: &[String]) {
    if markers.is_empty() {
        return;
    }
    match f {
        Value::Object(obj) => {
            let json_style = obj.get("style").map_or(true, |s| s == "json");
            if obj.get("type").is_some_and(|t| t == "json_schema") && json_style {
                let mut all: Vec<Value> = match obj.get("string_excludes") {
                    Some(Value::Array(a)) => a.clone(),
                    _ => Vec::new(),
                };
                all.extend(markers.iter().map(|m| json!(m)));
                obj.insert("string_excludes".into(), Value::Array(all));
                return;
            }
            for (k, v) in obj.iter_mut() {
                // A schema's own JSON is not a format.
                if k != "json_schema" {
                    exclude_from_strings(v, markers);
                }
            }
        }
        Value::Array(list) => {
            for v in list {
                exclude_from_strings(v, markers);
            }
        }
        _ => {}
    }
}

/// Free text that the bare-JSON and pythonic parsers read as content only: empty, or
/// starting with a character that is neither whitespace nor one of `openers` (a regex
/// character-class body, such as `\[` or `\[{`: what a call list or call object opens
/// with). Those parsers take output that opens so (after whitespace) for a call, so under
/// `none` the tag keeps the model from opening so.
pub fn text_not_opening_with(openers: &str) -> Value {
    json!({"type": "optional", "content": {"type": "sequence", "elements": [
        {"type": "regex", "pattern": format!("[^{openers} \\t\\r\\n]")},
        {"type": "any_text"}]}})
}

fn excludes_of_reasoning(env: &Envelope) -> Vec<String> {
    let mut v = vec![env.trigger.clone()];
    if let Some((b, _)) = &env.section {
        v.push(b.clone());
    }
    v.extend(env.excludes.iter().cloned());
    v
}

/// `markers` without empty strings and without repeats, in first-seen order (a family's
/// reasoning markers may also be among its excludes).
fn unique_markers(mut markers: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    markers.retain(|m| !m.is_empty() && seen.insert(m.clone()));
    markers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `excludes` list of a tag names each marker once (XGrammar's review found
    /// `<think>` twice in Hermes, DeepSeek and Kimi tags with reasoning on).
    #[test]
    fn excludes_name_each_marker_once() {
        fn check(v: &Value, family: &str) {
            match v {
                Value::Object(o) => {
                    if let Some(Value::Array(list)) = o.get("excludes") {
                        let set: std::collections::HashSet<_> = list.iter().collect();
                        assert_eq!(set.len(), list.len(), "{family}: {list:?}");
                    }
                    o.values().for_each(|v| check(v, family));
                }
                Value::Array(a) => a.iter().for_each(|v| check(v, family)),
                _ => {}
            }
        }
        let tool = Tool::new("f", "", json!({"type": "object"})).unwrap();
        let options = FormatOptions {
            reasoning: true,
            ..FormatOptions::default()
        };
        for family in ["hermes", "deepseek_v31", "kimi_k2", "qwen3_coder"] {
            let format = crate::format_by_name_with(family, &options).unwrap();
            let tag = format
                .structural_tag(std::slice::from_ref(&tool), &ToolChoice::Auto, true)
                .unwrap();
            check(&tag.to_json(), family);
        }
    }

    #[test]
    fn json_arguments_carry_the_caps() {
        let tool = Tool::new("f", "", json!({"type": "object"})).unwrap();
        let f = json_arguments(&tool, &FormatOptions::default());
        assert_eq!(f["max_whitespace"], 12);
        assert_eq!(f["max_number_digits"], 24);
        let open = FormatOptions {
            max_number_digits: None,
            ..FormatOptions::default()
        };
        assert!(json_arguments(&tool, &open)
            .get("max_number_digits")
            .is_none());
    }
}
