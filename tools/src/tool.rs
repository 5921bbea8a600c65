//! Tools: self-describing functions defined once and used with any model family.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{ToolCall, ToolError};

/// Per-call data a tool's function reads but the model never sees: an auth token, a locale,
/// anything the serving code puts there. Values are JSON so that a context crosses
/// framework boundaries unchanged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolContext {
    /// Named values, e.g. `"locale" → "fr-FR"`.
    pub values: BTreeMap<String, Value>,
}

impl ToolContext {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// This context with `key` set to `value`.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.values.insert(key.into(), value.into());
        self
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }
}

/// The body of an executable tool: arguments (already validated against the input schema)
/// and the per-call context in, a JSON result (validated against the output schema, if
/// any) or an error message out.
pub type ToolFunction = dyn Fn(Value, &ToolContext) -> Result<Value, String> + Send + Sync;

/// A self-describing function the model may call (the `function` object of OpenAI's
/// `tools` array, plus what a runtime needs).
///
/// * `input_schema` is the JSON Schema (draft 2020-12) of the arguments object — OpenAI's
///   `parameters`; `output_schema` the schema of the result (MCP's `outputSchema`).
/// * `meta` holds static annotations the runtime reads and the function never sees
///   (`{"destructive": true}`, MCP-style hints); they are not rendered into prompts.
/// * `strict` is OpenAI's flag. Tool-call formats constrain arguments to `input_schema`
///   whatever its value unless [`super::FormatOptions::arguments`] says otherwise.
/// * `function`, when set, is what [`ToolSet::execute`] runs.
#[derive(Clone)]
pub struct Tool {
    /// The name the model writes (`get_weather`, `math.factorial`).
    pub name: String,
    /// What the tool does, for the prompt.
    pub description: String,
    /// A human-readable title (optional).
    pub title: Option<String>,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// JSON Schema of the result, if declared.
    pub output_schema: Option<Value>,
    /// Static annotations for the runtime.
    pub meta: Map<String, Value>,
    /// OpenAI's `strict` flag.
    pub strict: bool,
    /// The function itself, if this tool is executable.
    pub function: Option<Arc<ToolFunction>>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("title", &self.title)
            .field("input_schema", &self.input_schema)
            .field("output_schema", &self.output_schema)
            .field("meta", &self.meta)
            .field("strict", &self.strict)
            .field("function", &self.function.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

impl PartialEq for Tool {
    /// Tools are equal when their descriptions are (the function is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.description == other.description
            && self.title == other.title
            && self.input_schema == other.input_schema
            && self.output_schema == other.output_schema
            && self.meta == other.meta
            && self.strict == other.strict
    }
}

/// Why `schema` cannot be a tool's input schema (see [`Tool::new`]), or `Ok`.
fn check_input_schema(schema: &Value) -> Result<(), String> {
    match schema {
        Value::Bool(true) => Ok(()),
        Value::Bool(false) => Err("input schema: `false` accepts no arguments, so the tool \
                                   could never be called"
            .into()),
        Value::Object(o) => match o.get("type") {
            None => Ok(()),
            Some(Value::String(t)) if t == "object" => Ok(()),
            Some(other) => Err(format!(
                "input schema: top-level type must be \"object\" (call arguments are a JSON \
                 object), found {other}"
            )),
        },
        other => Err(format!(
            "input schema: must be a JSON Schema object or `true`, found {other}"
        )),
    }
}

impl Tool {
    /// A tool named `name` taking arguments under `input_schema` (an object schema, or
    /// `true` for any object).
    ///
    /// The arguments of every family's call are a JSON object, so the schema must be one
    /// whose top-level `type`, when present, is `"object"` (as [`Tool::from_openai`]
    /// requires): otherwise the grammar could produce arguments the parser rejects.
    ///
    /// # Errors
    /// [`ToolError::Definition`] when the name is empty or contains whitespace or one of
    /// `{ } < > " ' ( ) [ ] ,` (characters that would break every family's envelope);
    /// when the schema is neither an object nor `true`; when its top-level `type` is
    /// present and not `"object"`; when it is `false` (it accepts no arguments, so no
    /// call could be made: every family refuses it here, before any grammar is built).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Result<Self, ToolError> {
        let name = name.into();
        check_name(&name)?;
        check_input_schema(&input_schema).map_err(|reason| ToolError::Definition {
            tool: name.clone(),
            reason,
        })?;
        Ok(Self {
            name,
            description: description.into(),
            title: None,
            input_schema,
            output_schema: None,
            meta: Map::new(),
            strict: false,
            function: None,
        })
    }

    /// A tool whose input and output schemas are generated from Rust types through
    /// `schemars` (draft 2020-12). Arguments of a parsed call then deserialise into `I`
    /// ([`ToolCall::arguments_as`]).
    ///
    /// # Errors
    /// As [`Tool::new`]: an input type whose schema is not an object (`String`, a
    /// unit enum) is refused.
    pub fn from_types<I: schemars::JsonSchema, O: schemars::JsonSchema>(
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Result<Self, ToolError> {
        let input = serde_json::to_value(schemars::schema_for!(I)).unwrap_or(Value::Bool(true));
        let output = serde_json::to_value(schemars::schema_for!(O)).unwrap_or(Value::Bool(true));
        Ok(Self::new(name, description, input)?.with_output_schema(output))
    }

    /// This tool with a title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// This tool with an output schema.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// This tool with one more static annotation.
    pub fn with_meta(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.meta.insert(key.into(), value.into());
        self
    }

    /// This tool with OpenAI's `strict` flag set.
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// This tool carrying its function: `f(arguments, &context)`.
    pub fn with_function(
        mut self,
        f: impl Fn(Value, &ToolContext) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        self.function = Some(Arc::new(f));
        self
    }

    /// This tool carrying a typed function: arguments deserialise into `I`, the result
    /// serialises from `O`. Arguments that do not deserialise are reported by
    /// [`ToolSet::execute`] as [`ToolError::Deserialize`] (called directly, the function
    /// returns serde's message as its error).
    pub fn with_typed_function<I, O, F>(self, f: F) -> Self
    where
        I: DeserializeOwned,
        O: serde::Serialize,
        F: Fn(I, &ToolContext) -> Result<O, String> + Send + Sync + 'static,
    {
        self.with_function(move |args, ctx| {
            let input: I = serde_json::from_value(args).map_err(|e| {
                let message = e.to_string();
                DESERIALIZE_FAILURE.with(|d| *d.borrow_mut() = Some(message.clone()));
                message
            })?;
            let out = f(input, ctx)?;
            serde_json::to_value(out).map_err(|e| e.to_string())
        })
    }

    /// One tool from an OpenAI `tools` entry — `{"type": "function", "function": {"name",
    /// "description", "parameters", "strict"}}` — or from the bare `function` object.
    /// Extra keys of the function object (`title`, `output_schema`/`outputSchema`, `meta`/
    /// `annotations`) are read too. `parameters` absent or `null` means no parameters.
    ///
    /// # Errors
    /// [`ToolError::Definition`], its reason naming the field and what was wrong (e.g.
    /// `function.description: expected a string, found 5`), when: `type` is present and not
    /// the string `"function"`; the name is missing or invalid; `description` or `title` is
    /// present and not a string; `strict` is present and not a boolean; `parameters` is not
    /// an object, or has a top-level `type` other than `"object"`; `parameters` or the
    /// output schema is not a valid JSON Schema (draft 2020-12 unless `$schema` says
    /// otherwise), so an invalid schema is refused here rather than when the tool runs.
    pub fn from_openai(value: &Value) -> Result<Self, ToolError> {
        Self::from_openai_at(value, "")
    }

    /// [`Tool::from_openai`] with `root` (`""`, or `"tools[2]."`) before every field path.
    fn from_openai_at(value: &Value, root: &str) -> Result<Self, ToolError> {
        let err = |tool: &str, reason: String| ToolError::Definition {
            tool: tool.to_owned(),
            reason,
        };
        let (f, at) = match value.get("type") {
            None | Some(Value::Null) if value.get("function").is_some() => {
                (&value["function"], format!("{root}function."))
            }
            None | Some(Value::Null) => (value, root.to_owned()),
            Some(Value::String(t)) if t == "function" => match value.get("function") {
                Some(f) => (f, format!("{root}function.")),
                None => {
                    return Err(err(
                        "",
                        format!(
                        "{root}function: an entry of type \"function\" has no \"function\" object"
                    ),
                    ))
                }
            },
            Some(Value::String(t)) => {
                return Err(err(
                    "",
                    format!("{root}type: tool type {t:?} is not supported (only \"function\")"),
                ))
            }
            Some(other) => {
                return Err(err(
                    "",
                    format!("{root}type: expected the string \"function\", found {other}"),
                ))
            }
        };
        let obj = f.as_object().ok_or_else(|| {
            let path = at.trim_end_matches('.');
            let lead = if path.is_empty() {
                String::new()
            } else {
                format!("{path}: ")
            };
            err(
                "",
                format!("{lead}a tool definition must be a JSON object, found {f}"),
            )
        })?;
        let name = obj.get("name").and_then(Value::as_str).ok_or_else(|| {
            err(
                "",
                format!("{at}name: a tool definition needs a string \"name\""),
            )
        })?;
        let string_field = |key: &str| -> Result<Option<String>, ToolError> {
            match obj.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(err(
                    name,
                    format!("{at}{key}: expected a string, found {other}"),
                )),
            }
        };
        let description = string_field("description")?.unwrap_or_default();
        let title = string_field("title")?;
        let strict = match obj.get("strict") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(err(
                    name,
                    format!("{at}strict: expected a boolean, found {other}"),
                ))
            }
        };
        let params = match obj.get("parameters") {
            None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
            Some(Value::Object(p)) => {
                match p.get("type") {
                    None => {}
                    Some(Value::String(t)) if t == "object" => {}
                    Some(other) => {
                        return Err(err(
                            name,
                            format!("{at}parameters.type: expected \"object\", found {other}"),
                        ))
                    }
                }
                Value::Object(p.clone())
            }
            Some(other) => {
                return Err(err(
                    name,
                    format!("{at}parameters: expected a JSON Schema object, found {other}"),
                ))
            }
        };
        check_schema(&params).map_err(|e| {
            err(
                name,
                format!("{at}parameters: not a valid JSON Schema: {e}"),
            )
        })?;
        let (out_key, output_schema) = match obj.get("output_schema") {
            Some(v) => ("output_schema", Some(v.clone())),
            None => ("outputSchema", obj.get("outputSchema").cloned()),
        };
        if let Some(schema) = &output_schema {
            check_schema(schema)
                .map_err(|e| err(name, format!("{at}{out_key}: not a valid JSON Schema: {e}")))?;
        }
        let mut tool = Tool::new(name, description, params).map_err(|e| match e {
            ToolError::Definition { tool, reason } if reason.starts_with("input schema") => {
                err(&tool, format!("{at}parameters: {reason}"))
            }
            ToolError::Definition { tool, reason } => err(&tool, format!("{at}name: {reason}")),
            other => other,
        })?;
        tool.title = title;
        tool.output_schema = output_schema;
        for key in ["meta", "annotations"] {
            if let Some(Value::Object(m)) = obj.get(key) {
                tool.meta.extend(m.clone());
            }
        }
        tool.strict = strict;
        Ok(tool)
    }

    /// Every tool of an OpenAI `tools` array.
    ///
    /// # Errors
    /// [`ToolError::Definition`] for a value that is not an array, a bad entry (as
    /// [`Tool::from_openai`], its field path starting `tools[i].`), or two tools with the
    /// same name.
    pub fn list_from_openai(value: &Value) -> Result<Vec<Tool>, ToolError> {
        let arr = value.as_array().ok_or_else(|| ToolError::Definition {
            tool: String::new(),
            reason: "the tools list must be a JSON array".into(),
        })?;
        let mut out: Vec<Tool> = Vec::with_capacity(arr.len());
        for (i, entry) in arr.iter().enumerate() {
            let tool = Tool::from_openai_at(entry, &format!("tools[{i}]."))?;
            if out.iter().any(|t| t.name == tool.name) {
                return Err(ToolError::Definition {
                    tool: tool.name,
                    reason: format!("tools[{i}]: a tool with this name is already defined"),
                });
            }
            out.push(tool);
        }
        Ok(out)
    }

    /// One tool from a Berkeley Function-Calling Leaderboard `function` entry, whose
    /// schemas use Python/Java type names: `dict`/`HashMap` → `object`, `float`/`double` →
    /// `number`, `tuple`/`Array`/`ArrayList` → `array`, `long` → `integer`,
    /// `String`/`char` → `string`, `Boolean` → `boolean`, `any` or an empty type → no type
    /// constraint; BFCL's own `"optional": true` is dropped (`required` says it).
    ///
    /// # Errors
    /// As [`Tool::from_openai`].
    pub fn from_bfcl_function(value: &Value) -> Result<Self, ToolError> {
        let mut v = value.clone();
        if let Some(p) = v.get_mut("parameters") {
            normalise_bfcl_schema(p);
        }
        Tool::from_openai(&v)
    }

    /// The names the input schema's `required` lists (empty when it has none).
    pub(crate) fn required_arguments(&self) -> Vec<&str> {
        self.input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// The OpenAI `tools` entry for this tool (`{"type": "function", "function": {...}}`;
    /// `meta` and the function are not part of it).
    pub fn to_openai(&self) -> Value {
        let mut f = Map::new();
        f.insert("name".into(), Value::String(self.name.clone()));
        if !self.description.is_empty() {
            f.insert(
                "description".into(),
                Value::String(self.description.clone()),
            );
        }
        f.insert("parameters".into(), self.input_schema.clone());
        if self.strict {
            f.insert("strict".into(), Value::Bool(true));
        }
        serde_json::json!({"type": "function", "function": Value::Object(f)})
    }

    /// Checks `arguments` against the input schema (draft 2020-12, formats enforced).
    ///
    /// # Errors
    /// [`ToolError::InvalidArguments`] listing each violation with its JSON pointer;
    /// [`ToolError::Definition`] when the input schema itself does not compile.
    pub fn validate_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        validate(
            &self.name,
            "input",
            &self.input_schema,
            arguments,
            |tool, errors| ToolError::InvalidArguments { tool, errors },
        )
    }

    /// Checks a result against the output schema; always passes without one.
    ///
    /// # Errors
    /// [`ToolError::InvalidOutput`] listing each violation; [`ToolError::Definition`] when
    /// the output schema does not compile.
    pub fn validate_output(&self, output: &Value) -> Result<(), ToolError> {
        let Some(schema) = &self.output_schema else {
            return Ok(());
        };
        validate(&self.name, "output", schema, output, |tool, errors| {
            ToolError::InvalidOutput { tool, errors }
        })
    }
}

/// `Ok` when `schema` compiles as a JSON Schema under the options [`validate`] uses.
fn check_schema(schema: &Value) -> Result<(), String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Checks `instance` against `schema`, the tool `tool`'s `which` (input or output) schema.
///
/// # Errors
/// `invalid(tool, violations)` listing each violation with its JSON pointer;
/// [`ToolError::Definition`] when the schema itself does not compile.
fn validate(
    tool: &str,
    which: &str,
    schema: &Value,
    instance: &Value,
    invalid: fn(String, Vec<String>) -> ToolError,
) -> Result<(), ToolError> {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| ToolError::Definition {
            tool: tool.to_owned(),
            reason: format!("{which} schema: {e}"),
        })?;
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            format!("at {at}: {e}")
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid(tool.to_owned(), errors))
    }
}

/// Rejects names no family can carry (section 3, rule 8 of the tool-call format notes:
/// unrendered templates produce `{{ tc.name }}`).
pub(crate) fn check_name(name: &str) -> Result<(), ToolError> {
    let bad = name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "{}<>\"'()[],".contains(c));
    if bad {
        return Err(ToolError::Definition {
            tool: name.to_owned(),
            reason: "a tool name must be non-empty, without whitespace and without any of { } < > \" ' ( ) [ ] ,".into(),
        });
    }
    Ok(())
}

fn normalise_bfcl_schema(schema: &mut Value) {
    let Value::Object(obj) = schema else { return };
    // BFCL marks optional parameters `"optional": true`, which no JSON Schema draft
    // defines (`required` already says it).
    obj.remove("optional");
    if let Some(Value::String(t)) = obj.get("type") {
        let mapped = match t.as_str() {
            "dict" | "HashMap" | "object" => Some("object"),
            "float" | "double" | "number" => Some("number"),
            "tuple" | "Array" | "ArrayList" | "array" => Some("array"),
            "long" | "integer" => Some("integer"),
            "String" | "char" | "string" => Some("string"),
            "Boolean" | "boolean" => Some("boolean"),
            _ => None,
        };
        match mapped {
            Some(m) => {
                obj.insert("type".into(), Value::String(m.into()));
            }
            None => {
                obj.remove("type");
            }
        }
    }
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for p in props.values_mut() {
            normalise_bfcl_schema(p);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(v) = obj.get_mut(key) {
            normalise_bfcl_schema(v);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(list)) = obj.get_mut(key) {
            for v in list {
                normalise_bfcl_schema(v);
            }
        }
    }
}

/// Tools by name, with the generate → parse → validate → execute step of an inference
/// loop: [`ToolSet::execute`] finds the tool a parsed call names, validates the arguments
/// against its input schema, runs its function with the context, and validates the result
/// against its output schema.
#[derive(Clone, Debug, Default)]
pub struct ToolSet {
    tools: Vec<Tool>,
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set of `tools`.
    ///
    /// # Errors
    /// [`ToolError::Definition`] when two tools share a name.
    pub fn from_tools(tools: impl IntoIterator<Item = Tool>) -> Result<Self, ToolError> {
        let mut set = Self::new();
        for t in tools {
            set.add(t)?;
        }
        Ok(set)
    }

    /// Adds a tool.
    ///
    /// # Errors
    /// [`ToolError::Definition`] when a tool of that name is already in the set (the set is
    /// unchanged).
    pub fn add(&mut self, tool: Tool) -> Result<(), ToolError> {
        if self.get(&tool.name).is_some() {
            return Err(ToolError::Definition {
                tool: tool.name,
                reason: "a tool with this name is already in the set".into(),
            });
        }
        self.tools.push(tool);
        Ok(())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tools, in the order they were added (the order prompts list them in).
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Validates and runs `call`.
    ///
    /// # Errors
    /// [`ToolError::UnknownTool`] when no tool has the call's name;
    /// [`ToolError::InvalidArguments`] before running; [`ToolError::NotExecutable`] when
    /// the tool has no function; [`ToolError::Deserialize`] when the arguments do not
    /// deserialise into a [`Tool::with_typed_function`]'s input type; [`ToolError::Execution`] with the function's message, or,
    /// when the function panics, with `the tool panicked: ` and the panic message (the
    /// panic is caught and does not escape; the set stays usable);
    /// [`ToolError::InvalidOutput`] after running.
    pub fn execute(&self, call: &ToolCall, ctx: &ToolContext) -> Result<Value, ToolError> {
        let tool = self.get(&call.name).ok_or_else(|| ToolError::UnknownTool {
            name: call.name.clone(),
            known: self.tools.iter().map(|t| t.name.clone()).collect(),
        })?;
        tool.validate_arguments(&call.arguments)?;
        let f = tool
            .function
            .as_ref()
            .ok_or_else(|| ToolError::NotExecutable {
                tool: tool.name.clone(),
            })?;
        DESERIALIZE_FAILURE.with(|d| d.borrow_mut().take());
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| f(call.arguments.clone(), ctx)));
        // A typed function whose arguments did not deserialise said so on this thread.
        let failed = DESERIALIZE_FAILURE.with(|d| d.borrow_mut().take());
        if let (Ok(Err(message)), Some(failure)) = (&run, failed) {
            if *message == failure {
                return Err(ToolError::Deserialize {
                    tool: tool.name.clone(),
                    message: failure,
                });
            }
        }
        let out = match run {
            Ok(result) => result,
            Err(payload) => Err(format!("the tool panicked: {}", panic_message(&*payload))),
        }
        .map_err(|message| ToolError::Execution {
            tool: tool.name.clone(),
            message,
        })?;
        tool.validate_output(&out)?;
        Ok(out)
    }
}

thread_local! {
    /// Set by a [`Tool::with_typed_function`] wrapper whose arguments failed to
    /// deserialise (serde's message), so that [`ToolSet::execute`], on the same thread,
    /// reports [`ToolError::Deserialize`] rather than an execution failure.
    static DESERIALIZE_FAILURE: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };
}

/// The message of a caught panic: its `&str` or `String` payload, or a placeholder.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "<a panic payload that is not a string>"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bfcl_types_become_json_schema_types() {
        let f = json!({"name": "math.hypot", "description": "d", "parameters": {"type": "dict",
            "properties": {"x": {"type": "float"}, "v": {"type": "tuple", "items": {"type": "String"}},
            "a": {"type": "any"}}, "required": ["x"]}});
        let t = Tool::from_bfcl_function(&f).unwrap();
        assert_eq!(t.name, "math.hypot");
        assert_eq!(
            t.input_schema,
            json!({"type": "object", "properties": {"x": {"type": "number"},
                "v": {"type": "array", "items": {"type": "string"}}, "a": {}}, "required": ["x"]})
        );
        assert!(t.validate_arguments(&json!({"x": 1.5})).is_ok());
        let err = t.validate_arguments(&json!({"x": "no"})).unwrap_err();
        assert!(err.to_string().contains("/x"), "{err}");
    }

    #[test]
    fn bad_names_and_duplicates_are_definition_errors() {
        for name in ["", "a b", "{{ tc.name }}", "f(x)"] {
            assert!(Tool::new(name, "", json!({})).is_err(), "{name:?}");
        }
        let list = json!([{"type": "function", "function": {"name": "f"}},
                          {"type": "function", "function": {"name": "f"}}]);
        let err = Tool::list_from_openai(&list).unwrap_err();
        assert!(err.to_string().contains("tools[1]"), "{err}");
    }

    #[test]
    fn typed_arguments_that_do_not_deserialise_are_a_deserialize_error() {
        #[derive(serde::Deserialize)]
        struct Args {
            #[allow(dead_code)]
            n: u8,
        }
        let tool = Tool::new("f", "", serde_json::Value::Bool(true))
            .unwrap()
            .with_typed_function(|_: Args, _: &ToolContext| Ok::<_, String>(1));
        let set = ToolSet::from_tools([tool]).unwrap();
        let ctx = ToolContext::default();
        let err = set
            .execute(&ToolCall::new("f", json!({"n": 300})), &ctx)
            .unwrap_err();
        match err {
            ToolError::Deserialize { tool, message } => {
                assert_eq!(tool, "f");
                assert!(message.contains("300"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // A failure of the function itself stays an execution error.
        let tool = Tool::new("g", "", serde_json::Value::Bool(true))
            .unwrap()
            .with_typed_function(|_: Args, _: &ToolContext| Err::<u8, _>("boom".to_owned()));
        let set = ToolSet::from_tools([tool]).unwrap();
        assert_eq!(
            set.execute(&ToolCall::new("g", json!({"n": 3})), &ctx),
            Err(ToolError::Execution {
                tool: "g".into(),
                message: "boom".into()
            })
        );
    }

    #[test]
    fn every_family_refuses_a_tool_list_with_a_duplicate_name() {
        let t = |d: &str| Tool::new("get_time", d, json!({"type": "object"})).unwrap();
        let other = Tool::new("other", "", json!({"type": "object"})).unwrap();
        let list = [t("a"), other, t("b")];
        for name in super::super::format_names() {
            let f = super::super::format_by_name(&name).unwrap();
            for choice in [
                super::super::ToolChoice::Auto,
                super::super::ToolChoice::Required,
                super::super::ToolChoice::Function("other".into()),
            ] {
                match f.structural_tag(&list, &choice, true) {
                    Err(ToolError::Definition { tool, reason }) => {
                        assert_eq!(tool, "get_time", "{name}");
                        assert!(reason.contains("more than once"), "{name}: {reason}");
                    }
                    other => panic!("{name} {choice:?}: {other:?}"),
                }
            }
        }
    }
}
