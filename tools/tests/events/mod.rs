//! What a stream of [`StreamEvent`]s adds up to, for the tests that compare a streamed parse
//! with the whole one (shared by the `api` and `formats` test binaries).

// Each test binary uses a part of this module.
#![allow(dead_code)]

use tokensieve_tools::{MalformedToolCall, StreamEvent, ToolCall};

/// What a stream of events adds up to.
#[derive(Debug, Default)]
pub struct Sums {
    /// The `Content` deltas joined.
    pub content: String,
    /// The calls of the `ToolCallEnd` events, in order.
    pub calls: Vec<ToolCall>,
    /// The `Malformed` calls, in order.
    pub malformed: Vec<MalformedToolCall>,
}

/// The [`Sums`] of `events`.
pub fn sums(events: &[StreamEvent]) -> Sums {
    let mut out = Sums::default();
    for e in events {
        match e {
            StreamEvent::Content(c) => out.content.push_str(c),
            StreamEvent::ToolCallEnd { call, .. } => out.calls.push(call.clone()),
            StreamEvent::Malformed(m) => out.malformed.push(m.clone()),
            _ => {}
        }
    }
    out
}

/// The calls of the stream's `ToolCallEnd` events, in order.
pub fn ended_calls(events: &[StreamEvent]) -> Vec<ToolCall> {
    sums(events).calls
}

/// The stream's `Content` deltas joined.
pub fn streamed_content(events: &[StreamEvent]) -> String {
    sums(events).content
}

/// The stream's `Malformed` calls, in order.
pub fn malformed_calls(events: &[StreamEvent]) -> Vec<MalformedToolCall> {
    sums(events).malformed
}

/// The stream's call events in order, one word each: `start N`, `end N` (N the call's
/// index) or `malformed`.
pub fn call_kinds(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            Some(match e {
                StreamEvent::ToolCallStart { index, .. } => format!("start {index}"),
                StreamEvent::ToolCallEnd { index, .. } => format!("end {index}"),
                StreamEvent::Malformed(_) => "malformed".to_owned(),
                _ => return None,
            })
        })
        .collect()
}
