//! A call as the model wrote it: its name checked against the tools, its arguments
//! object, keys given once, malformed calls recorded, and calls read from JSON objects.

#[allow(unused_imports)]
use super::*;

/// Checks a name written by the model against the offered tools (any valid name when the
/// list is empty).
pub fn check_call_name(name: &str, tools: &[Tool]) -> Result<(), ToolParseError> {
    if crate::tool::check_name(name).is_err() {
        return Err(ToolParseError::InvalidName {
            name: name.to_owned(),
        });
    }
    if !tools.is_empty() && !tools.iter().any(|t| t.name == name) {
        return Err(ToolParseError::UnknownTool {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Reads an arguments value: an object, or a JSON string holding an object (some models
/// double-encode).
pub fn arguments_object(value: &Value) -> Result<Value, ToolParseError> {
    match value {
        Value::Object(_) => Ok(value.clone()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(ToolParseError::Syntax(
                "the arguments must be a JSON object".into(),
            )),
        },
        _ => Err(ToolParseError::Syntax(
            "the arguments must be a JSON object".into(),
        )),
    }
}

/// Checks that the arguments whose raw JSON text starts `text` (an object, or a JSON
/// string holding one, as [`arguments_object`] reads them) give no key twice at their top
/// level. JSON readers keep the last of repeated keys and drop the others silently, so a
/// repeat makes the call malformed (`ToolParseError::Syntax`: `argument "KEY" given
/// twice`, as the pythonic family reports it); its text stays in content.
pub fn check_argument_keys(text: &str) -> Result<(), ToolParseError> {
    let t = text.trim_start();
    if t.starts_with('"') {
        return match serde_json::from_str::<Value>(t) {
            Ok(Value::String(inner)) => check_argument_keys(&inner),
            _ => Ok(()),
        };
    }
    check_keys_once(scan_object(t).members.iter().map(|m| m.key.as_str()))
}

/// `Err` naming the first key of `keys` that repeats an earlier one (see
/// [`check_argument_keys`]).
pub fn check_keys_once<'k>(keys: impl IntoIterator<Item = &'k str>) -> Result<(), ToolParseError> {
    let mut seen = std::collections::HashSet::new();
    for k in keys {
        if !seen.insert(k) {
            return Err(argument_given_twice(k));
        }
    }
    Ok(())
}

/// The error of an argument `key` given twice in one call (see [`check_argument_keys`]).
pub fn argument_given_twice(key: &str) -> ToolParseError {
    ToolParseError::Syntax(format!("argument {key:?} given twice"))
}

/// Adds a malformed call to `out`: reported in `errors`, its text kept in content, and
/// its place in `out.calls` taken by an empty entry, so that call indices stay stable
/// while streaming (a call that started, then turned out malformed, keeps its index; the
/// next call gets the next one).
pub fn push_malformed(
    out: &mut PartialOutput,
    content: &mut Content,
    text: &str,
    offset: usize,
    error: ToolParseError,
) {
    out.calls.push(crate::PartialCall::default());
    content.push(text);
    out.errors.push(crate::MalformedToolCall {
        text: text.to_owned(),
        offset,
        error,
    });
}

/// Adds a malformed element of a bracketed call list (`[{…}, …]`, `[f(a=1), …]`) to `out`,
/// as [`push_malformed`] does, except that its content piece keeps the list's brackets:
/// `[` + `text` + `]`, the one-call list the model wrote the element in. The separators
/// between elements stay with the list; the error's text is the element alone.
pub fn push_malformed_element(
    out: &mut PartialOutput,
    content: &mut Content,
    text: &str,
    offset: usize,
    error: ToolParseError,
) {
    push_malformed(out, &mut Content::default(), text, offset, error);
    content.push(&format!("[{text}]"));
}

/// Name and raw argument text of a `{"name": ..., "arguments"|"parameters": ...}` object
/// that may still be arriving (`body` starts at its `{`): the name once its string is
/// complete, the arguments' text as far as it goes (trailing whitespace dropped), and the
/// end of the object once it has closed. A repeated `name` or arguments member is not
/// read (the first one is: what has been streamed stays a prefix of what follows; the
/// whole call is then malformed, see [`check_call_members`]).
pub fn call_parts(body: &str) -> (crate::PartialCall, Option<usize>) {
    let obj = scan_object(body);
    let mut call = crate::PartialCall::default();
    let (mut named, mut argued) = (false, false);
    for m in &obj.members {
        match m.key.as_str() {
            "name" if !named => {
                named = true;
                if let Some((Value::String(n), _)) = &m.value {
                    call.name = Some(n.clone());
                }
            }
            "arguments" | "parameters" if !argued => {
                argued = true;
                let end = m.value.as_ref().map(|(_, e)| *e).unwrap_or(body.len());
                call.arguments_text = body[m.value_start..end].trim_end().to_owned();
            }
            _ => {}
        }
    }
    (call, obj.end)
}

/// [`call_parts`] for a call that may name a tool not offered: a complete name that
/// [`check_call_name`] refuses is dropped (with the arguments), so a stream never starts
/// a call that the whole-output parse reports as malformed.
pub fn offered_call_parts(body: &str, tools: &[Tool]) -> (crate::PartialCall, Option<usize>) {
    let (mut call, end) = call_parts(body);
    drop_unoffered_name(&mut call, tools);
    (call, end)
}

/// Clears the name (and arguments) of a call still arriving when its complete name is not
/// one [`check_call_name`] accepts: such a call ends malformed, and is never streamed.
pub fn drop_unoffered_name(call: &mut crate::PartialCall, tools: &[Tool]) {
    if call
        .name
        .as_deref()
        .is_some_and(|n| check_call_name(n, tools).is_err())
    {
        call.name = None;
        call.id = None;
        call.arguments_text.clear();
    }
}

/// Checks that the call object whose text starts `piece` gives `name` once and its
/// arguments (`arguments` or `parameters`) at most once, and that the arguments give no
/// key twice ([`check_argument_keys`]). JSON readers keep the last of repeated keys,
/// while a streamed call has already shown the first, so a repeat makes the call
/// malformed (`ToolParseError::Syntax` naming the member or the argument).
pub fn check_call_members(piece: &str) -> Result<(), ToolParseError> {
    let obj = scan_object(piece);
    let count = |keys: &[&str]| {
        obj.members
            .iter()
            .filter(|m| keys.contains(&m.key.as_str()))
            .count()
    };
    if count(&["name"]) > 1 {
        return Err(ToolParseError::Syntax(
            "the call gives \"name\" more than once".into(),
        ));
    }
    if count(&["arguments", "parameters"]) > 1 {
        return Err(ToolParseError::Syntax(
            "the call gives its arguments more than once".into(),
        ));
    }
    for m in &obj.members {
        if let ("arguments" | "parameters", Some((_, end))) = (m.key.as_str(), &m.value) {
            check_argument_keys(&piece[m.value_start..*end])?;
        }
    }
    Ok(())
}

/// A call object's name and arguments: `name` a string, arguments under `arguments` or
/// `parameters` (not both; an object, or a string holding one; absent = `{}`), `id` kept.
/// The name is checked against `tools`.
pub fn call_from_json(value: &Value, tools: &[Tool]) -> Result<crate::ToolCall, ToolParseError> {
    let obj = value.as_object().ok_or_else(|| {
        ToolParseError::Syntax("a call must be a JSON object with name and arguments".into())
    })?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolParseError::Syntax("the call has no string \"name\"".into()))?;
    check_call_name(name, tools)?;
    let args = match (obj.get("arguments"), obj.get("parameters")) {
        (Some(a), None) | (None, Some(a)) => arguments_object(a)?,
        (None, None) => Value::Object(serde_json::Map::new()),
        (Some(_), Some(_)) => {
            return Err(ToolParseError::Syntax(
                "the call has both \"arguments\" and \"parameters\"".into(),
            ))
        }
    };
    Ok(crate::ToolCall {
        id: obj.get("id").and_then(Value::as_str).map(str::to_owned),
        name: name.to_owned(),
        arguments: args,
    })
}

/// Pushes the call object `value`, written as `piece`, to `out` as a whole call: its
/// members checked ([`check_call_members`]) and its name offered ([`call_from_json`]).
///
/// # Errors
/// What makes the call malformed; nothing is pushed then.
pub fn push_json_call(
    out: &mut PartialOutput,
    piece: &str,
    value: &Value,
    tools: &[Tool],
) -> Result<(), ToolParseError> {
    check_call_members(piece)?;
    let call = call_from_json(value, tools)?;
    let (mut partial, _) = call_parts(piece);
    partial.name = Some(call.name.clone());
    partial.complete = Some(call);
    out.calls.push(partial);
    Ok(())
}

/// A JSON object.
pub type JsonObject = serde_json::Map<String, Value>;

/// The input schema of the offered tool `name`, when it is an object, and that schema's
/// `properties` (each `None` where absent or not an object).
pub fn tool_schema<'t>(
    tools: &'t [Tool],
    name: &str,
) -> (Option<&'t JsonObject>, Option<&'t JsonObject>) {
    let root = tools
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.input_schema.as_object());
    let props = root
        .and_then(|r| r.get("properties"))
        .and_then(Value::as_object);
    (root, props)
}
