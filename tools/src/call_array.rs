//! The body codec of the families whose calls are one JSON array of call objects after a
//! begin marker: Mistral before tokenizer v11 (`[TOOL_CALLS][…]`), IBM Granite 3.x
//! (`<|tool_call|>[…]`, `<tool_call>[…]`) and Phi-4-mini (`functools[…]`). Each family
//! runs it under its own markers through the driver ([`super::driver::Family`]).
//!
//! ```text
//! <tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "UTC"}}]
//! ```

use serde_json::{json, Value};

use super::driver::{self, Markers};
use super::scan::{self, Content, JsonRead};
use super::tags;
use super::{FormatOptions, PartialCall, PartialOutput, Tool, ToolCall, ToolParseError};

/// Reads, in a family whose calls are a JSON array after a marker, the array that follows
/// the marker at `start` (of `marker_len` bytes) after optional whitespace; text there
/// that is not `[` makes a malformed run up to the next marker (or the end of the output).
/// Returns where free text resumes, or `None` where this parse stops.
pub(crate) fn read_marked_array(
    turn: &mut driver::Turn<'_>,
    start: usize,
    marker_len: usize,
    tools: &[Tool],
    begins: &Markers,
) -> Option<usize> {
    let (text, at_end) = (turn.text, turn.at_end);
    let (out, content): (&mut PartialOutput, &mut Content) = (&mut turn.out, &mut turn.content);
    let after = start + marker_len;
    let body = after + (text[after..].len() - text[after..].trim_start().len());
    if body == text.len() {
        if at_end {
            let error = ToolParseError::Unterminated;
            scan::push_malformed(out, content, &text[start..], start, error);
        }
        return None;
    }
    if !text[body..].starts_with('[') {
        let error = ToolParseError::Syntax(format!(
            "expected a JSON array of calls after {:?}",
            &text[start..after]
        ));
        return push_bad_run(text, start, after, error, at_end, out, content, begins);
    }
    read_array(text, start, body, tools, at_end, out, content, begins)
}

/// One call object of the array families, as their grammar writes it:
/// `{"name": "NAME", "arguments": ARGS}`.
pub(crate) fn call_tag(t: &Tool, options: &FormatOptions) -> Value {
    let name = serde_json::to_string(&t.name).unwrap_or_default();
    json!({"type": "tag",
        "begin": format!("{{\"name\": {name}, \"arguments\": "),
        "content": tags::json_arguments(t, options),
        "end": "}"})
}

/// The calls as the array families write them: `PREFIX[{"name": …, "arguments": …}, …]`.
pub(crate) fn render(prefix: &str, calls: &[ToolCall]) -> String {
    let items: Vec<String> = calls
        .iter()
        .map(|c| {
            let name = serde_json::to_string(&c.name).unwrap_or_default();
            format!(
                "{{\"name\": {name}, \"arguments\": {}}}",
                scan::python_json(&c.arguments)
            )
        })
        .collect();
    format!("{prefix}[{}]", items.join(", "))
}

/// Where a malformed run of calls ends: at the next begin marker or the end.
fn bad_end(text: &str, from: usize, begins: &Markers) -> usize {
    begins
        .find(&text[from..])
        .map(|(k, _)| from + k)
        .unwrap_or(text.len())
}

/// Reports the malformed run from `from` to the next begin marker at or after `after` (trailing whitespace
/// dropped) and returns where free text resumes; while the output is still arriving and
/// no begin marker has ended the run, where it ends is not known yet: nothing is
/// reported (the text is held back) and `None` is returned.
#[allow(clippy::too_many_arguments)]
pub(crate) fn push_bad_run(
    text: &str,
    from: usize,
    after: usize,
    error: ToolParseError,
    at_end: bool,
    out: &mut PartialOutput,
    content: &mut Content,
    begins: &Markers,
) -> Option<usize> {
    let end = bad_end(text, after, begins);
    if end == text.len() && !at_end {
        return None;
    }
    scan::push_malformed(out, content, text[from..end].trim_end(), from, error);
    (end < text.len()).then_some(end)
}

/// Reads the call array starting at `text[body] == '['` (its begin marker at `start`;
/// `begins` are the family's begin markers, where a malformed run ends). Returns where free text
/// resumes, or `None` when the text ends inside the array.
///
/// The text of its malformed elements is content once an element is read as a call, each
/// inside the list's brackets (`[{"name": "nope", …}]`, as in the json and pythonic
/// families: [`scan::push_malformed_element`]; the begin marker and the `,` between
/// elements are dropped, as for a well-formed array); when none is, the array's whole text from the begin marker on is content (rule 6
/// of the tool-call format notes: a begin marker with no parsable call leaves the content
/// unchanged), each malformed element still reported.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_array(
    text: &str,
    start: usize,
    body: usize,
    tools: &[Tool],
    at_end: bool,
    out: &mut PartialOutput,
    content: &mut Content,
    begins: &Markers,
) -> Option<usize> {
    let (calls_before, errors_before) = (out.calls.len(), out.errors.len());
    let mut pieces = Content::default();
    let next = read_array_elements(text, start, body, tools, at_end, out, &mut pieces, begins);
    if out.calls[calls_before..]
        .iter()
        .any(|c| c.complete.is_some())
    {
        content.push(&pieces.into_string());
    } else if out.errors.len() > errors_before && (next.is_some() || at_end) {
        content.push(&text[start..next.unwrap_or(text.len())]);
    }
    next
}

/// [`read_array`]'s elements, the text of malformed ones pushed to `pieces`.
#[allow(clippy::too_many_arguments)]
fn read_array_elements(
    text: &str,
    start: usize,
    body: usize,
    tools: &[Tool],
    at_end: bool,
    out: &mut PartialOutput,
    content: &mut Content,
    begins: &Markers,
) -> Option<usize> {
    let skip_ws = |i: usize| i + (text[i..].len() - text[i..].trim_start().len());
    let mut i = skip_ws(body + 1);
    let mut first = true;
    loop {
        if i == text.len() {
            if at_end {
                let error = ToolParseError::Unterminated;
                scan::push_malformed(out, content, &text[start..], start, error);
            }
            return None;
        }
        if text[i..].starts_with(']') {
            return Some(i + 1);
        }
        if !first {
            if !text[i..].starts_with(',') {
                let error = ToolParseError::Syntax("expected , or ] in the call array".into());
                return push_bad_run(text, i, i, error, at_end, out, content, begins);
            }
            i = skip_ws(i + 1);
            if i == text.len() {
                continue;
            }
        }
        // A bad first element is reported from the begin marker on: nothing was read yet.
        let from = if first { start } else { i };
        first = false;
        match scan::read_json_value(&text[i..]) {
            JsonRead::Complete { value, end } => {
                let elem = &text[i..i + end];
                let read = scan::check_call_members(elem)
                    .and_then(|()| scan::call_from_json(&value, tools));
                match read {
                    Ok(call) => out.calls.push(PartialCall {
                        id: call.id.clone(),
                        name: Some(call.name.clone()),
                        arguments_text: arguments_text(elem, &call),
                        complete: Some(call),
                    }),
                    Err(error) => {
                        let t = elem.trim();
                        let off = i + (elem.len() - elem.trim_start().len());
                        scan::push_malformed_element(out, content, t, off, error);
                    }
                }
                i = skip_ws(i + end);
            }
            JsonRead::Incomplete => {
                if at_end {
                    let error = ToolParseError::Unterminated;
                    scan::push_malformed(out, content, &text[from..], from, error);
                } else {
                    // The first `name` and arguments members (a repeat makes the element
                    // malformed); a name not offered is never streamed.
                    out.calls
                        .push(scan::offered_call_parts(&text[i..], tools).0);
                }
                return None;
            }
            JsonRead::Invalid(e) => {
                let error = ToolParseError::InvalidJson(e);
                return push_bad_run(text, from, i, error, at_end, out, content, begins);
            }
        }
    }
}

/// The raw text of the `arguments` member of one array element.
fn arguments_text(elem: &str, call: &ToolCall) -> String {
    let obj = scan::scan_object(elem);
    for m in &obj.members {
        if matches!(m.key.as_str(), "arguments" | "parameters") {
            if let Some((_, e)) = &m.value {
                return elem[m.value_start..*e].to_owned();
            }
        }
    }
    scan::python_json(&call.arguments)
}
