//! The body codec of the families whose calls are one JSON array of call objects after a
//! begin marker: Mistral before tokenizer v11 (`[TOOL_CALLS][…]`), IBM Granite 3.x
//! (`<|tool_call|>[…]`, `<tool_call>[…]`) and Phi-4-mini (`functools[…]`). Each family
//! runs it under its own markers through the driver ([`super::driver::Family`]).
//!
//! ```text
//! <tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "UTC"}}]
//! ```

use serde_json::Value;

use super::driver::{self, Markers};
use super::hermes;
use super::scan::{self, Content, JsonRead};
use super::tags;
use super::{FormatOptions, PartialCall, PartialOutput, Tool, ToolCall, ToolParseError};

/// The partial parse (see [`crate::ToolCallFormat::parse_partial_from`]) of a family whose
/// calls are a JSON array after one of `family`'s begin markers: a parse settled between
/// the elements of an array that has a call resumes inside it; `marker_len(i)` is the
/// length of begin marker `i` (an array's `[` may be part of the marker).
pub(crate) fn parse_marked_arrays(
    family: &driver::Family,
    text: &str,
    from: &crate::Settled,
    implicit_reasoning: bool,
    tools: &[Tool],
    at_end: bool,
    marker_len: impl Fn(usize) -> usize,
) -> PartialOutput {
    let resume = |turn: &mut driver::Turn<'_>, pos: usize| {
        resume_array(turn, from, pos, tools, &family.begins)
    };
    family.drive_resumed(
        text,
        from,
        implicit_reasoning,
        at_end,
        resume,
        |turn, start, m| read_marked_array(turn, start, marker_len(m), tools, &family.begins),
    )
}

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
    let array = Array {
        start,
        resume: None,
    };
    read_array(turn, array, body, tools, begins)
}

/// [`Settled::state`](super::Settled::state) between two elements of a call array, after
/// a call: the next parse reads the rest of the array
/// ([`Settled::anchor`](super::Settled::anchor) is its begin marker).
pub(crate) const IN_ARRAY: u8 = 1;

/// Where a call array is read from.
#[derive(Clone, Copy)]
pub(crate) struct Array {
    /// The offset of its begin marker.
    pub start: usize,
    /// Resumed just after an element that an earlier parse settled at (after a call):
    /// that offset. `None`: from the array's `[`.
    pub resume: Option<usize>,
}

/// The `resume` of [`driver::Family::drive_resumed`] for the array families: reads the
/// rest of the array a streaming parse settled inside (between two elements, after a
/// call), from `pos`, its begin marker at `from.anchor`.
pub(crate) fn resume_array(
    turn: &mut driver::Turn<'_>,
    from: &super::Settled,
    pos: usize,
    tools: &[Tool],
    begins: &Markers,
) -> Option<usize> {
    let array = Array {
        start: from.anchor,
        resume: Some(pos),
    };
    read_array(turn, array, pos, tools, begins)
}

/// One call object of the array families, as their grammar writes it:
/// `{"name": "NAME", "arguments": ARGS}`.
pub(crate) fn call_tag(t: &Tool, options: &FormatOptions) -> Value {
    tags::json_call_object(t, options, "", "arguments", "")
}

/// The calls as the array families write them: `PREFIX[{"name": …, "arguments": …}, …]`.
pub(crate) fn render(prefix: &str, calls: &[ToolCall]) -> String {
    let items = hermes::render_json_blocks(calls, "", "arguments", "", ", ");
    format!("{prefix}[{items}]")
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

/// Reads the call array starting at `text[body] == '['` (or resumed, see [`Array`];
/// `begins` are the family's begin markers, where a malformed run ends). Returns where
/// free text resumes, or `None` when the text ends inside the array.
///
/// The text of its malformed elements is content once an element is read as a call, each
/// inside the list's brackets (`[{"name": "nope", …}]`, as in the json and pythonic
/// families: [`scan::push_malformed_element`]; the begin marker and the `,` between
/// elements are dropped, as for a well-formed array); when none is, the array's whole text
/// from the begin marker on is content (rule 6 of the tool-call format notes: a begin
/// marker with no parsable call leaves the content unchanged), each malformed element
/// still reported.
///
/// From its first call on, the parse settles after every element ([`IN_ARRAY`]), so a
/// stream of many calls in one array re-parses only the element in progress.
pub(crate) fn read_array(
    turn: &mut driver::Turn<'_>,
    array: Array,
    body: usize,
    tools: &[Tool],
    begins: &Markers,
) -> Option<usize> {
    let errors_before = turn.out.errors.len();
    // The malformed elements' pieces before the first call (`None` once there is one).
    let mut pieces = array.resume.is_none().then(Content::default);
    let next = read_array_elements(turn, array, body, tools, &mut pieces, begins);
    let (text, at_end) = (turn.text, turn.at_end);
    if pieces.is_some() && turn.out.errors.len() > errors_before && (next.is_some() || at_end) {
        turn.content
            .push(&text[array.start..next.unwrap_or(text.len())]);
    }
    next
}

/// [`read_array`]'s elements, the text of malformed ones pushed to `pieces` until the
/// first call (then to the turn's content).
fn read_array_elements(
    turn: &mut driver::Turn<'_>,
    array: Array,
    body: usize,
    tools: &[Tool],
    pieces: &mut Option<Content>,
    begins: &Markers,
) -> Option<usize> {
    let (text, at_end) = (turn.text, turn.at_end);
    let (out, content) = (&mut turn.out, &mut turn.content);
    let skip_ws = |i: usize| i + (text[i..].len() - text[i..].trim_start().len());
    let start = array.start;
    let mut i = skip_ws(array.resume.unwrap_or(body + 1));
    let mut first = array.resume.is_none();
    loop {
        let sink = match pieces {
            Some(p) => p,
            None => &mut *content,
        };
        if i == text.len() {
            if at_end {
                let error = ToolParseError::Unterminated;
                scan::push_malformed(out, sink, &text[start..], start, error);
            }
            return None;
        }
        if text[i..].starts_with(']') {
            return Some(i + 1);
        }
        if !first {
            if !text[i..].starts_with(',') {
                let error = ToolParseError::Syntax("expected , or ] in the call array".into());
                return push_bad_run(text, i, i, error, at_end, out, sink, begins);
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
                    Ok(call) => {
                        out.calls.push(PartialCall {
                            id: call.id.clone(),
                            name: Some(call.name.clone()),
                            arguments_text: scan::arguments_member_text(elem, &call),
                            complete: Some(call),
                        });
                        // The first call: the pieces so far are content.
                        if let Some(p) = pieces.take() {
                            content.push(&p.into_string());
                        }
                    }
                    Err(error) => {
                        let t = elem.trim();
                        let off = i + (elem.len() - elem.trim_start().len());
                        scan::push_malformed_element(out, sink, t, off, error);
                    }
                }
                if pieces.is_none() {
                    scan::settle(out, content, i + end);
                    if let Some(s) = &mut out.settled {
                        s.state = IN_ARRAY;
                        s.anchor = start;
                    }
                }
                i = skip_ws(i + end);
            }
            JsonRead::Incomplete => {
                if at_end {
                    let error = ToolParseError::Unterminated;
                    scan::push_malformed(out, sink, &text[from..], from, error);
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
                return push_bad_run(text, from, i, error, at_end, out, sink, begins);
            }
        }
    }
}
