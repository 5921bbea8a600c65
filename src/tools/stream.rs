//! Streaming parse by re-parsing the accumulated text and sending what grew.
//!
//! Per-delta state machines drop calls when a begin marker, a whole call and its end
//! arrive in one delta (speculative decoding, `stream_interval > 1`); re-parsing the
//! accumulated text and diffing against what was sent cannot (rule 3 of the tool-call
//! format notes). The cost is one parse of the text so far per delta.

use super::{PartialOutput, StreamEvent, Tool, ToolCallFormat};

/// Turns output deltas into [`StreamEvent`]s for one format and tool list.
///
/// The events of a whole stream carry the same calls as
/// [`ToolCallFormat::parse`] of the concatenated text, and the `Content` deltas add up to
/// its `content` (the `Reasoning` deltas to its `reasoning`). Text that may still be the
/// start of a marker (`<tool_`) is held back until it is decided, never sent and
/// retracted.
pub struct StreamingParser<'a> {
    format: &'a dyn ToolCallFormat,
    tools: &'a [Tool],
    text: String,
    sent_reasoning: String,
    sent_content: String,
    calls: Vec<SentCall>,
    sent_errors: usize,
    finished: bool,
}

#[derive(Default)]
struct SentCall {
    started: bool,
    sent_args: String,
    ended: bool,
}

impl<'a> StreamingParser<'a> {
    /// A parser over `format` for `tools`.
    pub fn new(format: &'a dyn ToolCallFormat, tools: &'a [Tool]) -> Self {
        Self {
            format,
            tools,
            text: String::new(),
            sent_reasoning: String::new(),
            sent_content: String::new(),
            calls: Vec::new(),
            sent_errors: 0,
            finished: false,
        }
    }

    /// Adds `delta` (decoded with special tokens kept) and returns what it settled.
    /// After [`StreamingParser::finish`] deltas are ignored.
    pub fn push(&mut self, delta: &str) -> Vec<StreamEvent> {
        if self.finished {
            return Vec::new();
        }
        self.text.push_str(delta);
        let partial = self.format.parse_partial(&self.text, self.tools, false);
        self.diff(partial)
    }

    /// Ends the stream: releases held-back text and reports calls left unfinished.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let partial = self.format.parse_partial(&self.text, self.tools, true);
        self.diff(partial)
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn diff(&mut self, p: PartialOutput) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        grow(&p.reasoning, &mut self.sent_reasoning, |d| {
            events.push(StreamEvent::Reasoning(d))
        });
        grow(&p.content, &mut self.sent_content, |d| {
            events.push(StreamEvent::Content(d))
        });
        for (index, call) in p.calls.into_iter().enumerate() {
            if self.calls.len() <= index {
                self.calls.push(SentCall::default());
            }
            let sent = &mut self.calls[index];
            if sent.ended {
                continue;
            }
            let Some(name) = call.name.clone() else {
                continue;
            };
            if !sent.started {
                sent.started = true;
                events.push(StreamEvent::ToolCallStart {
                    index,
                    id: call.id.clone(),
                    name,
                });
            }
            grow(&call.arguments_text, &mut sent.sent_args, |delta| {
                events.push(StreamEvent::ToolCallArguments { index, delta })
            });
            if let Some(done) = call.complete {
                sent.ended = true;
                events.push(StreamEvent::ToolCallEnd { index, call: done });
            }
        }
        for e in p.errors.into_iter().skip(self.sent_errors) {
            // A malformed call whose text runs to the end of what has arrived may still
            // grow (its end marker has not come): report it once it ends, or at the end,
            // with the same text the whole-output parse reports.
            if !self.finished && e.offset + e.text.len() >= self.text.len() {
                break;
            }
            self.sent_errors += 1;
            events.push(StreamEvent::Malformed(e));
        }
        events
    }
}

/// Sends the part of `now` beyond what was `sent`, when `now` extends it (formats keep
/// their partial output monotone; a violation sends nothing rather than a retraction).
fn grow(now: &str, sent: &mut String, mut emit: impl FnMut(String)) {
    if now.len() > sent.len() && now.starts_with(sent.as_str()) {
        emit(now[sent.len()..].to_owned());
        sent.clear();
        sent.push_str(now);
    }
}
