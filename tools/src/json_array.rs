//! The model-agnostic format: a JSON array of `{"name", "arguments"}` objects constrained by
//! a JSON Schema built from the tools — what serving engines fall back to for `required`
//! when a model has no native syntax (section 5.2 of the tool-call format notes: vLLM's
//! classic `required` path; xLAM's output in section 4.10), and, for a named tool, the bare
//! arguments object (vLLM's classic named path).
//!
//! ```text
//! [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "UTC"}}]
//! ```

use serde_json::{json, Map, Value};

use super::driver;
use super::scan::{self, Content, JsonRead};
use super::tags;
use super::{
    CallMode, FormatOptions, PartialCall, PartialOutput, Tool, ToolCall, ToolCallFormat, ToolError,
    ToolParseError,
};

/// The JSON-array format (`json`, also registered as `json_array`).
///
/// * Grammar, by [`ToolChoice`]:
///   * `required`: a JSON array of at least one call object
///     `{"name": NAME, "arguments": ARGS}` (`items.anyOf` one branch per tool, `name` a
///     `const`, `ARGS` the tool's input schema, no other keys); at most one item when
///     `parallel` is off. Each tool's `$defs`/`definitions` move to the array schema's
///     root as `<tool index>_<name>` and its `$ref`s are rewritten to match (`#` and other
///     root pointers point at the embedded arguments schema), so schemars-made schemas
///     with nested types compile.
///   * `auto`: the same array with `minItems: 0` — `[]` means "no call". There is no free
///     text: a model without a native syntax has no trigger to enter a call from prose.
///   * named `X`: the array holding exactly one call, to `X` (the envelope of
///     `required`, so the output parses back with this format). [`JsonArray::forced`]
///     builds vLLM's classic named path instead: `X`'s bare arguments object, which only
///     that format's parser reads (as a call to `X`).
///   * `none`: free text that does not open with `[` or `{` (nor whitespace), so the
///     parser reads all of it as content: output opening so would be read as a call,
///     and be a malformed one.
/// * Parser: after leading whitespace, an array of call objects; also xLAM's
///   `{"tool_calls": [...]}` wrapper and a single call object. `"parameters"` is accepted
///   for `"arguments"`, and a string holding a JSON object as arguments. A call whose name
///   is not offered, that repeats `"name"`, its arguments member or an argument, or an element that is
///   not a call object, is an error (its text kept in content) while the other elements
///   stay calls; an array that stops being JSON, or that the output cuts off, is an
///   error from the offending element to the end (an array missing only its `]` is an
///   error from just after its last element: the separator, if any); a call object or
///   wrapper the output cuts off is an unterminated call (the wrapper's complete calls
///   stay calls). Text after the array is content. Output
///   that does not start with `[` or `{` is content. The array streams element by element;
///   the wrapper object and the forced arguments object are reported once complete.
#[derive(Clone, Debug, Default)]
pub struct JsonArray {
    options: FormatOptions,
    forced: Option<String>,
}

impl JsonArray {
    /// The format with `options`.
    pub fn new(options: FormatOptions) -> Self {
        Self {
            options,
            forced: None,
        }
    }

    /// vLLM's classic named path for `name`: [`ToolCallFormat::structural_tag`] builds
    /// `name`'s bare arguments object, the parser reads such output back as one call to
    /// `name`, and [`ToolCallFormat::render_calls`] writes the first call's bare
    /// arguments. The tag is built only for `ToolChoice::Function(name)` (any other choice
    /// is [`ToolError::Choice`]: its output would not parse back here). The registered
    /// `json` format needs none of this: its named tag is a one-call array it parses.
    pub fn forced(mut self, name: impl Into<String>) -> Self {
        self.forced = Some(name.into());
        self
    }

    /// The options.
    pub fn options(&self) -> &FormatOptions {
        &self.options
    }

    /// The JSON Schema of the call array for `tools` (`min_items` 0 or 1; `max_items` 1
    /// when calls are not parallel).
    pub fn array_schema(&self, tools: &[&Tool], min_items: usize, parallel: bool) -> Value {
        let mut defs = Map::new();
        let items: Vec<Value> = tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let arguments = hoist_defs(tags::argument_schema(t, &self.options), i, &mut defs);
                json!({"type": "object",
                    "properties": {"name": {"const": t.name}, "arguments": arguments},
                    "required": ["name", "arguments"], "additionalProperties": false})
            })
            .collect();
        let mut schema = json!({"type": "array", "items": {"anyOf": items},
                                "minItems": min_items});
        if !parallel {
            schema["maxItems"] = json!(1);
        }
        if !defs.is_empty() {
            schema["$defs"] = Value::Object(defs);
        }
        schema
    }
}

/// Moves the `$defs` and `definitions` of tool `index`'s arguments schema into `defs` (the
/// root of the call-array schema) as `<index>_<name>`, and rewrites the tool's `$ref`s so
/// they still resolve once the schema sits at `#/items/anyOf/<index>/properties/arguments`:
/// `#/$defs/X...` and `#/definitions/X...` become `#/$defs/<index>_X...`, `#` and any other
/// `#/...` pointer get that location as prefix. Anchors and other URIs are kept.
fn hoist_defs(mut schema: Value, index: usize, defs: &mut Map<String, Value>) -> Value {
    let here = format!("#/items/anyOf/{index}/properties/arguments");
    let rewrite = |r: &str| -> Option<String> {
        let rest = r.strip_prefix('#')?;
        if rest.is_empty() {
            return Some(here.clone());
        }
        let rest = rest.strip_prefix('/')?;
        for key in ["$defs/", "%24defs/", "definitions/"] {
            if let Some(name) = rest.strip_prefix(key) {
                return Some(format!("#/$defs/{index}_{name}"));
            }
        }
        Some(format!("{here}/{rest}"))
    };
    let mut moved = Vec::new();
    if let Value::Object(obj) = &mut schema {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(m)) = obj.remove(key) {
                moved.extend(m);
            }
        }
    }
    rewrite_refs(&mut schema, &rewrite);
    for (name, mut def) in moved {
        rewrite_refs(&mut def, &rewrite);
        defs.insert(format!("{index}_{name}"), def);
    }
    schema
}

/// Applies `rewrite` to every `$ref` string of `schema`, leaving literal values (`const`,
/// `enum`, `default`, `examples`) untouched.
fn rewrite_refs(schema: &mut Value, rewrite: &dyn Fn(&str) -> Option<String>) {
    match schema {
        Value::Object(obj) => {
            for (k, v) in obj.iter_mut() {
                match (k.as_str(), &*v) {
                    ("$ref", Value::String(r)) => {
                        if let Some(new) = rewrite(r) {
                            *v = Value::String(new);
                        }
                    }
                    ("const" | "enum" | "default" | "examples", _) => {}
                    // Maps of named subschemas: a property may be called `const`.
                    (
                        "properties" | "patternProperties" | "dependentSchemas" | "$defs"
                        | "definitions",
                        Value::Object(_),
                    ) => {
                        if let Value::Object(m) = v {
                            m.values_mut().for_each(|s| rewrite_refs(s, rewrite));
                        }
                    }
                    _ => rewrite_refs(v, rewrite),
                }
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| rewrite_refs(v, rewrite)),
        _ => {}
    }
}

impl ToolCallFormat for JsonArray {
    format_name!("json");

    structural_tag_from_choice!(|this, choice, mode, allowed, parallel| {
        let json_format = |schema: Value| {
            let mut f = json!({"type": "json_schema", "json_schema": schema,
                   "any_order": this.options.any_order});
            super::tags::set_json_limits(&mut f, &this.options);
            f
        };
        if let Some(name) = &this.forced {
            // The forced parser reads a bare arguments object: any other tag would not
            // parse back.
            if mode != CallMode::Forced || &allowed[0].name != name {
                return Err(ToolError::Choice(format!(
                    "the forced JSON format for {name:?} builds only the named tool_choice \
                     for {name:?} (got {choice:?}); use JsonArray::new for other choices"
                )));
            }
            let format = json_format(tags::argument_schema(allowed[0], &this.options));
            return Ok(format);
        }
        let format = match mode {
            // Text the parser reads as content only: not opening (after whitespace) with
            // `[` or `{`, which it would read as a call, malformed or not.
            CallMode::None => tags::text_not_opening_with("\\[{"),
            // The same envelope as `required`: exactly one call, to the named tool, which
            // this format's parser reads back.
            CallMode::Forced => json_format(this.array_schema(&allowed, 1, false)),
            CallMode::Required => json_format(this.array_schema(&allowed, 1, parallel)),
            CallMode::Auto => json_format(this.array_schema(&allowed, 0, parallel)),
        };
        Ok(format)
    });

    parse_with_driver!(own: parse_turn, text_to_end: &[]);

    fn render_calls(&self, calls: &[ToolCall]) -> String {
        if self.forced.is_some() {
            return calls
                .first()
                .map(|c| scan::python_json(&c.arguments))
                .unwrap_or_default();
        }
        let items: Vec<Value> = calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments}))
            .collect();
        scan::python_json(&Value::Array(items))
    }

    fn render_tool_result(&self, call: &ToolCall, result: &Value) -> String {
        scan::python_json(&json!({"name": call.name, "result": result}))
    }

    fn render_tools_prompt(&self, tools: &[Tool]) -> String {
        let mut s = String::from("These functions are available, one JSON definition per line:\n");
        for t in tools {
            s.push_str(&scan::python_json(&t.to_openai()));
            s.push('\n');
        }
        s.push_str(
            "\nTo use them, answer with nothing but a JSON array of calls, each an object \
             with the function's \"name\" and its \"arguments\" object, for example \
             [{\"name\": \"f\", \"arguments\": {\"x\": 1}}]. Answer [] to call none.",
        );
        s
    }
}

impl JsonArray {
    /// The parse behind [`ToolCallFormat::parse_partial_from`].
    fn parse_turn(&self, parse: driver::Parse<'_>) -> PartialOutput {
        let (text, from, tools, at_end) = (parse.text, parse.from, parse.tools, parse.at_end);
        let mut out = PartialOutput::default();
        let mut content = Content::default();
        let lead = text.len() - text.trim_start().len();
        let rest = &text[lead..];
        // Other settled points lie in the call array, just after an element. An output
        // that starts as JSON (`[`, `{`, or any output with a forced call) may be a call
        // until it ends, so its text is only ever content at the end: it has no settled
        // point in free text and, while it arrives, is re-parsed in coalesced steps.
        let resume = (from.offset > 0).then(|| from.offset - lead);
        let json = Json {
            rest,
            lead,
            tools,
            at_end,
        };
        if let Some(name) = &self.forced {
            parse_forced(json, name, &mut out, &mut content);
        } else if rest.starts_with('[') {
            parse_array(json, resume, &mut out, &mut content);
        } else if rest.starts_with('{') {
            parse_object(json, &mut out, &mut content);
        } else if let Some(n) = content.push_tail(rest, &[], at_end) {
            // Text, not a call: all of it is content.
            scan::settle_open(&mut out, &content, lead + n);
        }
        out.content = content.into_string();
        out
    }
}

/// The output after its leading whitespace, as the readers below take it.
#[derive(Clone, Copy)]
struct Json<'a> {
    /// The text after the leading whitespace.
    rest: &'a str,
    /// Where `rest` starts in the whole output, in bytes.
    lead: usize,
    /// The offered tools.
    tools: &'a [Tool],
    /// The output is complete.
    at_end: bool,
}

/// The forced tool's bare arguments object.
fn parse_forced(json: Json<'_>, name: &str, out: &mut PartialOutput, content: &mut Content) {
    let (rest, lead, tools, at_end) = (json.rest, json.lead, json.tools, json.at_end);
    if rest.is_empty() {
        return;
    }
    match scan::read_json_value(rest) {
        JsonRead::Incomplete if !at_end => {
            out.calls.push(PartialCall {
                id: None,
                name: Some(name.to_owned()),
                arguments_text: rest.trim_end().to_owned(),
                complete: None,
            });
        }
        JsonRead::Incomplete => {
            scan::push_malformed(out, content, rest, lead, ToolParseError::Unterminated)
        }
        JsonRead::Invalid(e) => {
            if at_end {
                scan::push_malformed(out, content, rest, lead, ToolParseError::InvalidJson(e));
            }
        }
        JsonRead::Complete { value, end } => {
            let checked = scan::check_call_name(name, tools).and_then(|()| {
                if value.is_object() {
                    Ok(value)
                } else {
                    Err(ToolParseError::Syntax(
                        "the arguments must be a JSON object".into(),
                    ))
                }
            });
            match checked {
                Ok(arguments) => out.calls.push(PartialCall {
                    id: None,
                    name: Some(name.to_owned()),
                    arguments_text: rest[..end].trim().to_owned(),
                    complete: Some(ToolCall::new(name, arguments)),
                }),
                Err(e) => scan::push_malformed(out, content, &rest[..end], lead, e),
            }
            content.push_tail(&rest[end..], &[], at_end);
        }
    }
}

/// A call array, element by element (from the start, or `resume`d just after an element
/// an earlier parse settled at).
fn parse_array(
    json: Json<'_>,
    resume: Option<usize>,
    out: &mut PartialOutput,
    content: &mut Content,
) {
    let (rest, lead, tools, at_end) = (json.rest, json.lead, json.tools, json.at_end);
    let b = rest.as_bytes();
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    // Reports rest[from..] (trailing whitespace dropped) as one malformed piece (only once
    // the output is whole, so the error's text never changes while streaming).
    let tail_error =
        |from: usize, error: ToolParseError, out: &mut PartialOutput, c: &mut Content| {
            if at_end {
                // Nothing read yet: the whole array is the offending text.
                let from = if resume.is_none() && out.calls.is_empty() && out.errors.is_empty() {
                    0
                } else {
                    from
                };
                scan::push_malformed(out, c, rest[from..].trim_end(), lead + from, error);
            }
        };
    let mut i = skip_ws(resume.unwrap_or(1));
    // Just after the last element read: a list cut off after it is an error from there
    // (its separator), never again the elements already read.
    let mut last_end = resume.unwrap_or(1);
    let mut first = resume.is_none();
    loop {
        if i == b.len() {
            tail_error(last_end, ToolParseError::Unterminated, out, content);
            return;
        }
        if b[i] == b']' {
            content.push_tail(&rest[i + 1..], &[], at_end);
            return;
        }
        if !first {
            if b[i] != b',' {
                let e = ToolParseError::Syntax(format!(
                    "expected ',' or ']' between calls, found {:?}",
                    rest[i..].chars().take(20).collect::<String>()
                ));
                tail_error(i, e, out, content);
                return;
            }
            i = skip_ws(i + 1);
            if i == b.len() {
                tail_error(last_end, ToolParseError::Unterminated, out, content);
                return;
            }
        }
        first = false;
        match scan::read_json_value(&rest[i..]) {
            JsonRead::Complete { value, end } => {
                let piece = &rest[i..i + end];
                if let Err(e) = scan::push_json_call(out, piece, &value, tools) {
                    scan::push_malformed_element(out, content, piece, lead + i, e);
                }
                last_end = i + end;
                i = skip_ws(i + end);
                scan::settle(out, content, lead + last_end);
            }
            JsonRead::Incomplete => {
                if at_end {
                    tail_error(i, ToolParseError::Unterminated, out, content);
                } else if rest[i..].starts_with('{') {
                    // A name not offered is never streamed (the call ends malformed).
                    let (partial, _) = scan::offered_call_parts(&rest[i..], tools);
                    if partial.name.is_some() {
                        out.calls.push(partial);
                    }
                }
                return;
            }
            JsonRead::Invalid(e) => {
                tail_error(i, ToolParseError::InvalidJson(e), out, content);
                return;
            }
        }
    }
}

/// xLAM's `{"tool_calls": [...]}` or one call object; anything else is content.
fn parse_object(json: Json<'_>, out: &mut PartialOutput, content: &mut Content) {
    let (rest, lead, tools, at_end) = (json.rest, json.lead, json.tools, json.at_end);
    let (value, end) = match scan::read_json_value(rest) {
        JsonRead::Complete { value, end } => (value, end),
        JsonRead::Incomplete if !at_end => return,
        JsonRead::Incomplete => {
            cut_off_object(json, out, content);
            return;
        }
        JsonRead::Invalid(_) => {
            content.push(rest);
            return;
        }
    };
    let piece = &rest[..end];
    if let Some(list) = value.get("tool_calls") {
        match list.as_array() {
            Some(items) => {
                for item in items {
                    match scan::call_from_json(item, tools) {
                        Ok(call) => out.calls.push(PartialCall {
                            id: call.id.clone(),
                            name: Some(call.name.clone()),
                            arguments_text: scan::python_json(&call.arguments),
                            complete: Some(call),
                        }),
                        Err(e) => {
                            let text = scan::python_json(item);
                            scan::push_malformed(out, content, &text, lead, e);
                        }
                    }
                }
            }
            None => scan::push_malformed(
                out,
                content,
                piece,
                lead,
                ToolParseError::Syntax("\"tool_calls\" must be an array".into()),
            ),
        }
    } else if value.get("name").is_some() {
        if let Err(e) = scan::push_json_call(out, piece, &value, tools) {
            scan::push_malformed(out, content, piece, lead, e);
        }
    } else {
        content.push(piece);
    }
    content.push_tail(&rest[end..], &[], at_end);
}

/// An object the output ended inside (`rest` is all of it): xLAM's wrapper keeps the calls
/// that completed, its array read as [`parse_array`] reads one (the cut-off call is the
/// error; with no complete call the whole object is); a call object (one with a `"name"`
/// member) is an unterminated call; anything else is content.
fn cut_off_object(json: Json<'_>, out: &mut PartialOutput, content: &mut Content) {
    let (rest, lead, tools) = (json.rest, json.lead, json.tools);
    let obj = scan::scan_object(rest);
    let list = obj
        .members
        .first()
        .filter(|m| m.key == "tool_calls" && rest[m.value_start..].starts_with('['));
    if let Some(m) = list {
        let array = &rest[m.value_start..];
        let (mut trial, mut trial_content) = (PartialOutput::default(), Content::default());
        let whole = |rest, lead| Json {
            rest,
            lead,
            tools,
            at_end: true,
        };
        parse_array(whole(array, lead), None, &mut trial, &mut trial_content);
        if trial.calls.iter().any(|c| c.complete.is_some()) {
            parse_array(whole(array, lead + m.value_start), None, out, content);
            return;
        }
    }
    if list.is_some() || obj.members.iter().any(|m| m.key == "name") {
        scan::push_malformed(out, content, rest, lead, ToolParseError::Unterminated);
    } else {
        content.push(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_calls, calls};
    use crate::ToolChoice;

    use crate::test_support::weather_and_time as tools;

    #[test]
    fn array_wrapper_and_single_object() {
        let (f, ts) = (JsonArray::default(), tools());
        let want = calls(&[
            ("get_weather", json!({"city": "Paris"})),
            ("get_time", json!({"tz": "UTC"})),
        ]);
        let a = r#" [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "parameters": {"tz": "UTC"}}]"#;
        assert_eq!(f.parse(a, &ts).tool_calls, want);
        let w = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"}]}"#;
        assert_eq!(f.parse(w, &ts).tool_calls, want);
        let one = r#"{"name": "get_time", "arguments": {"tz": "UTC"}} done"#;
        let out = f.parse(one, &ts);
        assert_eq!(out.tool_calls, want[1..]);
        assert_eq!(out.content.as_deref(), Some("done"));
        let empty = f.parse("[]", &ts);
        assert!(empty.tool_calls.is_empty() && empty.content.is_none());
    }

    #[test]
    fn forced_wraps_the_bare_object() {
        let f = JsonArray::default().forced("get_time");
        let out = f.parse(r#"{"tz": "UTC"}"#, &tools());
        assert_calls(&out, &[("get_time", json!({"tz": "UTC"}))]);
        assert_eq!(f.render_calls(&out.tool_calls), r#"{"tz": "UTC"}"#);
    }

    #[test]
    fn a_repeated_name_or_arguments_member_makes_the_call_malformed() {
        // JSON keeps the last of a repeated key, but the stream has shown the first
        // (its name started the call, its text went out as argument deltas).
        let f = JsonArray::default();
        let ts = tools();
        let text = r#"[{"name": "get_time", "arguments": {}, "arguments": {"tz": "X"}}, {"name": "get_time", "name": "get_weather", "arguments": {"city": "P"}}]"#;
        let out = f.parse(text, &ts);
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.errors.len(), 2);
        assert!(matches!(out.errors[0].error, ToolParseError::Syntax(_)));
        crate::test_support::assert_streams_as_whole(&f, text, &ts);
        let one = r#"{"name": "get_time", "parameters": {}, "arguments": {"tz": "X"}}"#;
        crate::test_support::assert_streams_as_whole(&f, one, &ts);
    }

    #[test]
    fn forced_huge_number_is_one_literal() {
        // `1e9999` is clamped to `1e308` padded with spaces: the value used to end there,
        // before the rest of the literal arrived.
        let f = JsonArray::default().forced("get_time");
        assert_eq!(f.parse("1e99999 x", &tools()).errors[0].text, "1e99999");
    }

    #[test]
    fn defs_of_each_tool_are_hoisted_to_the_array_root() {
        use tokensieve::GrammarMatcher;
        let tool = |name: &str, units: Value| {
            Tool::from_openai(&json!({"type": "function", "function": {"name": name,
                "strict": true, "parameters": {"type": "object",
                "properties": {"unit": {"$ref": "#/$defs/Unit"}}, "required": ["unit"],
                "$defs": {"Unit": {"type": "string", "enum": units}}}}}))
            .unwrap()
        };
        let ts = vec![tool("t1", json!(["C", "F"])), tool("t2", json!(["K"]))];
        let f = JsonArray::default();
        let g = crate::test_support::compile_required_on_ascii(&f, &ts);
        let accepts = |calls: &[ToolCall]| {
            let mut m = GrammarMatcher::new(g.clone());
            m.accept_string(&f.render_calls(calls)) && m.is_completed()
        };
        assert!(accepts(&[
            ToolCall::new("t1", json!({"unit": "C"})),
            ToolCall::new("t2", json!({"unit": "K"}))
        ]));
        assert!(!accepts(&[ToolCall::new("t1", json!({"unit": "K"}))]));
        assert!(!accepts(&[ToolCall::new("t2", json!({"unit": "C"}))]));
    }

    #[test]
    fn bad_elements_are_errors_and_the_rest_stay_calls() {
        let f = JsonArray::default();
        let text = r#"[{"name": "nope", "arguments": {}}, {"name": "get_time", "arguments": {"tz": "UTC"}}]"#;
        let out = f.parse(text, &tools());
        assert_eq!(out.tool_calls.len(), 1);
        assert_eq!(
            out.errors[0].error,
            ToolParseError::UnknownTool {
                name: "nope".into()
            }
        );
        assert_eq!(
            out.content.as_deref(),
            Some(r#"[{"name": "nope", "arguments": {}}]"#)
        );
        let bad = r#"[{"name": "get_time", "arguments": {"tz": UTC}}]"#;
        let out = f.parse(bad, &tools());
        assert!(out.tool_calls.is_empty());
        assert!(matches!(
            out.errors[0].error,
            ToolParseError::InvalidJson(_)
        ));
        assert_eq!(out.content.as_deref(), Some(bad));
    }

    /// Under `none` the tag never lets the model open with `[` or `{` (after whitespace),
    /// which the parser would read as a call (a malformed one): what the tag accepts is
    /// content, with no call and no error.
    #[test]
    fn none_accepts_only_text_the_parser_reads_as_content() {
        use tokensieve::GrammarMatcher;
        let f = JsonArray::default();
        let tag = f.structural_tag(&tools(), &ToolChoice::None, true).unwrap();
        let g = crate::test_support::compile_on_ascii(&tag);
        let accepts = |text: &str| {
            let mut m = GrammarMatcher::new(g.clone());
            m.accept_string(text) && m.is_completed()
        };
        // What a random walk under the old tag (any text without `"name"`) wrote.
        assert!(!f.parse("[left", &tools()).errors.is_empty());
        for text in ["[left", "{\"a\": 1}", "  [", "\n{", "[]"] {
            assert!(!accepts(text), "{text:?}");
        }
        for text in ["", "left [x] {y}", "Sunny, 20 \"name\" C."] {
            assert!(accepts(text), "{text:?}");
            let out = f.parse(text, &tools());
            assert!(
                out.tool_calls.is_empty() && out.errors.is_empty(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn named_choice_output_parses_back_with_the_same_format() {
        use tokensieve::GrammarMatcher;
        let f = JsonArray::default();
        let ts = tools();
        let choice = ToolChoice::Function("get_time".into());
        let tag = f.structural_tag(&ts, &choice, true).unwrap();
        let g = crate::test_support::compile_on_ascii(&tag);
        let call = ToolCall::new("get_time", json!({"tz": "UTC"}));
        let text = f.render_calls(std::slice::from_ref(&call));
        assert_eq!(
            text,
            r#"[{"name": "get_time", "arguments": {"tz": "UTC"}}]"#
        );
        let mut m = GrammarMatcher::new(g.clone());
        assert!(m.accept_string(&text) && m.is_completed(), "{text}");
        // Only that tool, and exactly one call.
        let mut m = GrammarMatcher::new(g.clone());
        assert!(!m.accept_string(r#"[{"name": "get_weather""#));
        let two = f.render_calls(&[call.clone(), call.clone()]);
        let mut m = GrammarMatcher::new(g);
        assert!(!(m.accept_string(&two) && m.is_completed()));
        let out = f.parse(&text, &ts);
        assert_eq!(out.tool_calls, vec![call]);
        assert!(out.errors.is_empty() && out.content.is_none());
        crate::test_support::assert_streams_as_whole(&f, &text, &ts);
    }

    #[test]
    fn forced_format_builds_only_its_named_choice() {
        use tokensieve::GrammarMatcher;
        let f = JsonArray::default().forced("get_time");
        let ts = tools();
        let tag = f
            .structural_tag(&ts, &ToolChoice::Function("get_time".into()), false)
            .unwrap();
        let mut m = GrammarMatcher::new(crate::test_support::compile_on_ascii(&tag));
        assert!(m.accept_string(r#"{"tz": "UTC"}"#) && m.is_completed());
        // Its parser reads a bare object: a tag for anything else would not parse back.
        for choice in [
            ToolChoice::Required,
            ToolChoice::Auto,
            ToolChoice::Function("get_weather".into()),
        ] {
            match f.structural_tag(&ts, &choice, true) {
                Err(ToolError::Choice(m)) => assert!(m.contains("get_time"), "{m}"),
                other => panic!("{choice:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_cut_off_call_after_a_complete_one_is_an_error() {
        let ts = crate::test_support::object_tools(&["a", "b"]);
        let f = JsonArray::default();
        let a = calls(&[("a", json!({}))]);
        // The bare array, then xLAM's wrapper cut off the same way: the complete call
        // stays a call.
        for (text, offset) in [
            (r#"[{"name":"a","arguments":{}}, {"name":"b","argu"#, 30),
            (
                r#"{"tool_calls": [{"name":"a","arguments":{}}, {"name":"b","argu"#,
                45,
            ),
        ] {
            let out = f.parse(text, &ts);
            assert_eq!(out.tool_calls, a);
            assert_eq!(out.errors.len(), 1);
            assert_eq!(out.errors[0].text, r#"{"name":"b","argu"#);
            assert_eq!(out.errors[0].offset, offset);
            assert_eq!(out.errors[0].error, ToolParseError::Unterminated);
            if offset == 30 {
                assert_eq!(out.content.as_deref(), Some(r#"{"name":"b","argu"#));
            }
        }
        // A single call object cut off.
        let text = r#"{"name":"b","arguments":{"x": 1"#;
        let out = f.parse(text, &ts);
        assert!(out.tool_calls.is_empty());
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].text, text);
        assert_eq!(out.errors[0].error, ToolParseError::Unterminated);
        assert_eq!(out.content.as_deref(), Some(text));
        // An array missing only its `]`: the call stays a call, its text is not content
        // as well; the error is the missing end.
        let text = r#"[{"name":"a","arguments":{}}, "#;
        let out = f.parse(text, &ts);
        assert_eq!(out.tool_calls, a);
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].text, ",");
        assert_eq!(out.errors[0].error, ToolParseError::Unterminated);
        assert_eq!(out.content.as_deref(), Some(","));
        // An object that is not a call stays content.
        let out = f.parse(r#"{"note": "x"#, &ts);
        assert!(out.errors.is_empty());
        assert_eq!(out.content.as_deref(), Some(r#"{"note": "x"#));
        for text in [
            r#"[{"name":"a","arguments":{}}, {"name":"b","argu"#,
            r#"{"tool_calls": [{"name":"a","arguments":{}}, {"name":"b","argu"#,
            r#"{"tool_calls": [{"name":"a","arguments":{}}]"#,
            r#"{"name":"b","arguments":{"x": 1"#,
            r#"[{"name":"a","arguments":{}}, "#,
            r#"[{"name":"a","arguments":{}}"#,
            r#"{"note": "x"#,
        ] {
            crate::test_support::assert_streams_as_whole(&f, text, &ts);
        }
    }
}
