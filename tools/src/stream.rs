//! Streaming parse by re-parsing the unsettled end of the accumulated text and sending what
//! grew, reading a call's arguments without the parser while they arrive.
//!
//! Per-delta state machines drop calls when a begin marker, a whole call and its end
//! arrive in one delta (speculative decoding, `stream_interval > 1`); re-parsing the
//! accumulated text and diffing against what was sent cannot (rule 3 of the tool-call
//! format notes). Re-parsing all of it on every delta is quadratic in the output's length
//! (issue 5: one call with an 80 KB argument in 4-byte deltas took seconds), so two things
//! bound the work:
//!
//! * **Settled prefix.** A format reports, with each partial parse, the last point no later
//!   text can change ([`super::Settled`]): just after a finished or malformed call, with
//!   the parser's state there where it is not plain free text (inside a DeepSeek/Kimi
//!   call section, a JSON/Mistral call array), and in plain content or reasoning just before the
//!   tail held back because it may start a marker (`<tool_`) or be whitespace next to
//!   one, the text from there continuing that piece. The next parse restarts there
//!   ([`ToolCallFormat::parse_partial_from`]); of what came before only the count of its
//!   calls and errors and whether it had content or reasoning are kept (a later piece is
//!   joined to it with `\n`; the rest of a piece settled inside is appended as is). With
//!   many calls, a delta costs a parse of the call in progress only; in plain content or
//!   reasoning, a parse of the held-back tail and the delta, so text with no call
//!   streams on every delta. Every built-in format reports settled points; one that does
//!   not (a user's format, unless it implements them) is re-parsed from the start, with
//!   the coalescing below. Text that is not settled before it ends: an output that
//!   starts as JSON in the JSON-array families (it may be a call until it closes), text
//!   after a JSON-array or pythonic call list, text before `</think>` when the prompt
//!   opened the reasoning block (reasoning or content is known only at `</think>`),
//!   Harmony text before its header's `<|message|>`, and the text of a malformed call
//!   whose end the format cannot tell before a later marker or the end of the output. In
//!   the formats without an end marker, a call whose JSON is invalid ends where its
//!   braces balance (string-aware) in `llama3_json` and `glm4`, so what follows streams at
//!   once; a Mistral v11+ malformed call runs to the next `[TOOL_CALLS]` (the syntax has
//!   no end: text after a call belongs to it until a marker), and a malformed `json` /
//!   `pythonic` call list keeps the rest of the output, which may still be part of the
//!   list (the list, not each call, is what closes) — there the text after it is held
//!   until that marker or the end.
//! * **The stream reads an argument itself.** When a parse ends inside a call whose
//!   argument text so far is a plain copy of the output's end (the JSON arguments object
//!   as written, pythonic keyword arguments) or a JSON string holding it escaped (a raw
//!   XML parameter value), the stream keeps the lexer state there ([`resume`]) and scans
//!   the following deltas itself, sending each as an argument delta, without parsing the
//!   call again, until a character that may end the arguments (the closing bracket, a
//!   character outside JSON syntax, a `<` that may start a tag). The format's parser then
//!   reads on. So one call with a 1 MB argument costs one scan of it and one parse when it
//!   ends, and still streams on every delta.
//! * **A work budget.** Each byte received earns `WORK_PER_BYTE` (2) bytes of parse work,
//!   banked up to `ALLOWANCE` (4 KiB, also what a stream starts with); unsettled text up to
//!   `EAGER_TAIL` (1 KiB) is re-parsed on a delta when the bank pays for it, else once it
//!   does (a few deltas later). Short outputs, plain content and reasoning thus parse on
//!   every delta, and back-to-back small calls in tiny deltas cost about twice the text
//!   (a call's events then come every few deltas rather than on each).
//! * **Coalescing inside a long unsettled piece.** While the text after the settled point
//!   is longer than `EAGER_TAIL` and not read by the stream (text of the kinds just named,
//!   a call after its arguments), it is re-parsed once the bytes arrived since the last
//!   parse reach 1/`TAIL_SHARE` (1/64) of its length (and always by
//!   [`StreamingParser::finish`] and [`StreamingParser::flush`]). Each such parse costs at
//!   most `TAIL_SHARE` times the bytes that paid for it, so a whole stream costs O(n) parse
//!   work however small its deltas; the price is that inside such a piece events come in
//!   pieces of up to 1/64 of its length (an 80 KB piece: about 1.25 KB) rather than per
//!   delta.
//!
//! Every event but the argument deltas the stream reads itself comes from a real parse of a
//! prefix of the output, and those deltas are the bytes that parse would add (a later parse
//! extends them, as the tests of every family at every cut check), so the events of a
//! whole stream add up to the whole-output parse however the text was cut into deltas.

use super::{PartialOutput, StreamEvent, Tool, ToolCallFormat};

mod resume;

use resume::Resume;

/// Unsettled text up to this length is re-parsed on every delta.
const EAGER_TAIL: usize = 1024;

/// Beyond `EAGER_TAIL` (1 KiB), the unsettled text is re-parsed once the unparsed bytes reach
/// this share of it.
const TAIL_SHARE: usize = 64;

/// Parse work (bytes handed to the format's parser or read by the stream's own scan of an
/// argument) the stream earns per byte received: unsettled text up to `EAGER_TAIL` is
/// re-parsed on a delta when the work earned and not yet spent pays for it.
const WORK_PER_BYTE: usize = 2;

/// The work the stream starts with and may bank at most: short outputs and text that
/// settles as it arrives (plain content) are parsed on every delta.
const ALLOWANCE: usize = 4096;

/// Turns output deltas into [`StreamEvent`]s for one format and tool list.
///
/// The events of a whole stream carry the same calls as
/// [`ToolCallFormat::parse`] of the concatenated text, and the `Content` deltas add up to
/// its `content` (the `Reasoning` deltas to its `reasoning`). Text that may still be the
/// start of a marker (`<tool_`) is held back until it is decided, never sent and
/// retracted. Call indices are positions in the whole-output parse's `tool_calls`: a
/// malformed call takes none, and one whose start was sent before it turned out malformed
/// is ended by its `Malformed` (see [`StreamEvent`]). The parse work of a whole stream is
/// linear in its length, about twice the text (see the module notes): a delta re-parses
/// only the text after the last finished call (in plain content and reasoning, only the
/// held-back tail and the delta), inside a call's arguments the stream reads the deltas
/// itself, and re-parses of short unsettled text are spaced to spend at most 2 bytes of
/// work per byte received (of a long one, as the module notes say).
pub struct StreamingParser<'a> {
    format: &'a dyn ToolCallFormat,
    tools: &'a [Tool],
    text: String,
    /// Where the next parse starts (the start, or a settled point a parse reported).
    from: super::Settled,
    /// `from.offset`.
    base: usize,
    /// How many calls (and malformed placeholders) lie before `base`.
    base_calls: usize,
    /// How many complete calls lie before `base` (the index of the next call).
    base_index: usize,
    /// Bytes pushed since the last parse.
    unparsed: usize,
    /// Bytes handed to the format's parser so far.
    scanned: usize,
    reasoning: Joined,
    content: Joined,
    /// The calls after `base`.
    calls: Vec<SentCall>,
    /// The errors after `base` that were sent.
    sent_errors: usize,
    /// Parse work earned and not spent (see `WORK_PER_BYTE`). A parse it did not pay for
    /// ([`StreamingParser::flush`], coalescing inside a long piece, the stream's own scan)
    /// empties it rather than running a debt, so text after a long piece streams at once.
    credit: usize,
    /// The last call's sent argument text is the whole of its parsed one, not written as
    /// a JSON string (so [`Resume::infer`] may read it).
    args_current: bool,
    /// The open last call's arguments, read by the stream itself (see [`resume`]), and the
    /// call's index.
    resume: Option<(Resume, usize)>,
    finished: bool,
}

#[derive(Default)]
struct SentCall {
    /// A `ToolCallStart` was sent.
    started: bool,
    sent_args: String,
    /// Its `ToolCallEnd` was sent.
    ended: bool,
    /// It turned out malformed and its `Malformed` was sent.
    closed: bool,
}

impl<'a> StreamingParser<'a> {
    /// A parser over `format` for `tools`.
    pub fn new(format: &'a dyn ToolCallFormat, tools: &'a [Tool]) -> Self {
        Self {
            format,
            tools,
            text: String::new(),
            from: super::Settled::default(),
            base: 0,
            base_calls: 0,
            base_index: 0,
            unparsed: 0,
            scanned: 0,
            reasoning: Joined::default(),
            content: Joined::default(),
            calls: Vec::new(),
            sent_errors: 0,
            credit: ALLOWANCE,
            args_current: false,
            resume: None,
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
        self.credit = (self.credit + WORK_PER_BYTE * delta.len()).min(ALLOWANCE);
        let mut events = Vec::new();
        match self.resume.as_mut() {
            Some((r, index)) => {
                let before = r.scanned();
                let (args, stop) = r.advance(&self.text);
                self.scanned += r.scanned() - before;
                self.credit = self.credit.saturating_sub(r.scanned() - before);
                if !args.is_empty() {
                    if let Some(call) = self.calls.last_mut() {
                        call.sent_args.push_str(&args);
                    }
                    events.push(StreamEvent::ToolCallArguments {
                        index: *index,
                        delta: args,
                    });
                }
                let Some(at) = stop else { return events };
                // Left the arguments: the format's parser reads on, paid by the bytes
                // from here (those scanned were paid once).
                self.resume = None;
                self.unparsed = self.text.len() - at;
            }
            None => self.unparsed += delta.len(),
        }
        let tail = self.text.len() - self.base;
        let due = if tail <= EAGER_TAIL {
            self.credit >= tail
        } else {
            self.unparsed * TAIL_SHARE >= tail
        };
        if due {
            events.extend(self.parse(false));
        }
        events
    }

    /// Re-parses now what [`StreamingParser::push`] coalesced (for a stream that pauses
    /// inside a call: a delta there waits for the work budget, or for 1/64 of a long
    /// piece, see the module notes) and returns what it settled.
    pub fn flush(&mut self) -> Vec<StreamEvent> {
        if self.finished || self.unparsed == 0 {
            return Vec::new();
        }
        self.parse(false)
    }

    /// Ends the stream: releases held-back text and reports calls left unfinished.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        self.parse(true)
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many bytes of text the format's parser has been handed so far, with those the
    /// stream read itself in a call's arguments (and the pass that checks, after a parse,
    /// whether it may): the stream's parse work; tests check it stays within 3 times the
    /// text.
    #[doc(hidden)]
    pub fn scanned_bytes(&self) -> usize {
        self.scanned
    }

    fn parse(&mut self, at_end: bool) -> Vec<StreamEvent> {
        self.unparsed = 0;
        self.resume = None;
        self.scanned += self.text.len() - self.base;
        self.credit = self.credit.saturating_sub(self.text.len() - self.base);
        let partial = self
            .format
            .parse_partial_from(&self.text, &self.from, self.tools, at_end);
        let settled = partial.settled.filter(|_| !at_end);
        let events = self.diff(partial);
        if let Some(s) = settled {
            self.settle(s);
        }
        let open = self
            .calls
            .last()
            .filter(|c| !c.ended && !c.closed && c.started);
        if let Some(call) = open.filter(|_| !at_end && self.args_current) {
            let index = self.base_index + self.calls.iter().filter(|c| c.ended).count();
            self.scanned += call.sent_args.len();
            self.credit = self.credit.saturating_sub(call.sent_args.len());
            self.resume = Resume::infer(&self.text, &call.sent_args).map(|r| (r, index));
        }
        events
    }

    /// Moves `base` to `s` when everything before it has been sent.
    fn settle(&mut self, s: super::Settled) {
        if s.offset <= self.base
            || self.sent_errors < s.errors
            || self.calls.len() < s.calls
            || self.content.sent.len() < s.content
            || self.reasoning.sent.len() < s.reasoning
            || self.calls[..s.calls]
                .iter()
                .any(|c| c.started && !c.ended && !c.closed)
        {
            return;
        }
        self.base = s.offset;
        self.base_calls += s.calls;
        self.base_index += self.calls[..s.calls].iter().filter(|c| c.ended).count();
        self.calls.drain(..s.calls);
        self.sent_errors -= s.errors;
        // `from` counts from the start of the text (what a whole parse drops). After a
        // point inside a piece, what was parsed from it follows it exactly.
        let joined = |before: usize, more: usize, open: bool| match (before, more) {
            (b, 0) => b,
            (0, m) => m,
            (b, m) if open => b + m,
            (b, m) => b + 1 + m,
        };
        self.from = super::Settled {
            content: joined(self.from.content, s.content, self.from.content_open),
            reasoning: joined(self.from.reasoning, s.reasoning, self.from.reasoning_open),
            calls: self.base_calls,
            errors: self.from.errors + s.errors,
            ..s
        };
        self.content.settle(s.content, s.content_open);
        self.reasoning.settle(s.reasoning, s.reasoning_open);
    }

    fn diff(&mut self, p: PartialOutput) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        self.reasoning
            .grow(&p.reasoning, |d| events.push(StreamEvent::Reasoning(d)));
        self.content
            .grow(&p.content, |d| events.push(StreamEvent::Content(d)));
        // Calls and malformed calls in output order: a malformed call holds a nameless
        // place in `p.calls` (the k-th such place is the k-th error); a call's index counts
        // only the complete calls before it, as `parse` returns them in `tool_calls`.
        let mut errors = p.errors.into_iter();
        let mut error_at = 0;
        let mut index = self.base_index;
        let mut held = false;
        let (finished, arrived) = (self.finished, self.text.len());
        let report = |sent_errors: &mut usize,
                      e: super::MalformedToolCall,
                      events: &mut Vec<StreamEvent>,
                      held: &mut bool|
         -> bool {
            // A malformed call whose text runs to the end of what has arrived may still
            // grow (its end marker has not come): report it once it ends, or at the end,
            // with the same text the whole-output parse reports.
            if *held || (!finished && e.offset + e.text.len() >= arrived) {
                *held = true;
                return false;
            }
            *sent_errors += 1;
            events.push(StreamEvent::Malformed(e));
            true
        };
        let mut sent_errors = self.sent_errors;
        let mut args_current = false;
        for (i, call) in p.calls.into_iter().enumerate() {
            if self.calls.len() <= i {
                self.calls.push(SentCall::default());
            }
            let sent = &mut self.calls[i];
            let name = call
                .name
                .clone()
                .or_else(|| call.complete.as_ref().map(|c| c.name.clone()));
            let Some(name) = name else {
                // The place of a malformed call (once its error is there), or a call
                // whose name has not arrived. A started call that lost its name is over:
                // its `Malformed` ends it and the next call takes its index.
                if let Some(e) = errors.next() {
                    error_at += 1;
                    if error_at > sent_errors
                        && !report(&mut sent_errors, e, &mut events, &mut held)
                    {
                        break;
                    }
                    sent.closed = true;
                }
                continue;
            };
            if held {
                break;
            }
            if !sent.ended {
                if !sent.started {
                    sent.started = true;
                    events.push(StreamEvent::ToolCallStart {
                        index,
                        id: call.id.clone(),
                        name,
                    });
                }
                let now = streamed_arguments(&call.arguments_text);
                grow(&now, &mut sent.sent_args, |delta| {
                    events.push(StreamEvent::ToolCallArguments { index, delta })
                });
                args_current = *now == *sent.sent_args && !call.arguments_text.starts_with('"');
            } else {
                args_current = false;
            }
            if let Some(done) = call.complete {
                if !sent.ended {
                    sent.ended = true;
                    sent.sent_args = String::new();
                    events.push(StreamEvent::ToolCallEnd { index, call: done });
                }
                index += 1;
            }
        }
        // Errors without a place among the calls (a user's format may report them so).
        for e in errors {
            error_at += 1;
            if error_at > sent_errors && !report(&mut sent_errors, e, &mut events, &mut held) {
                break;
            }
        }
        self.sent_errors = sent_errors;
        self.args_current = args_current;
        events
    }
}

/// The argument text a stream sends for a call's raw argument text: the text itself, or,
/// for arguments written as a JSON string (`"arguments": "{\"city\": \"P\"}"`), the
/// string's content decoded as far as it has arrived (never half an escape), once it
/// starts like a JSON object (`{` after whitespace) — before that, nothing. So the
/// deltas of a JSON family's call add up to a JSON text of its arguments object (the
/// OpenAI `function.arguments`), as the whole-output parse reads it: a string whose
/// content is not a JSON object makes the call malformed.
pub(crate) fn streamed_arguments(raw: &str) -> std::borrow::Cow<'_, str> {
    let Some(body) = raw.strip_prefix('"') else {
        return raw.into();
    };
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => break,
            '\\' => {
                let rest = &body[i + 1..];
                let Some(e) = rest.chars().next() else { break };
                let simple = match e {
                    '"' => Some('"'),
                    '\\' => Some('\\'),
                    '/' => Some('/'),
                    'b' => Some('\u{8}'),
                    'f' => Some('\u{c}'),
                    'n' => Some('\n'),
                    'r' => Some('\r'),
                    't' => Some('\t'),
                    _ => None,
                };
                if let Some(d) = simple {
                    out.push(d);
                    chars.next();
                    continue;
                }
                if e != 'u' {
                    break;
                }
                let hex = |s: &str| {
                    s.get(..4)
                        .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                };
                let Some(hi) = hex(&rest[1..]) else { break };
                let (code, len) = if (0xD800..0xDC00).contains(&hi) {
                    let lo = rest[5..]
                        .strip_prefix("\\u")
                        .and_then(hex)
                        .filter(|lo| (0xDC00..0xE000).contains(lo));
                    let Some(lo) = lo else { break };
                    (0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00), 11)
                } else {
                    (hi, 5)
                };
                let Some(d) = char::from_u32(code) else { break };
                out.push(d);
                for _ in 0..len {
                    chars.next();
                }
            }
            c => out.push(c),
        }
    }
    if out.trim_start().starts_with('{') {
        out.into()
    } else {
        String::new().into()
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

/// Text made of pieces joined by `\n` (content, reasoning), of which the part from the
/// text before the settled point is already sent.
#[derive(Default)]
struct Joined {
    /// Something was sent from the text before the settled point (a later piece is
    /// joined to it with `\n`).
    before: bool,
    /// The settled point lies inside a piece: what is parsed from it follows what was
    /// sent exactly (no joining `\n` to add).
    open: bool,
    /// What was sent from the text after it (without the joining `\n`).
    sent: String,
}

impl Joined {
    /// Sends what `now` (parsed from the settled point on) adds.
    fn grow(&mut self, now: &str, mut emit: impl FnMut(String)) {
        let join = self.sent.is_empty() && self.before && !self.open;
        grow(now, &mut self.sent, |d| {
            emit(if join { format!("\n{d}") } else { d })
        });
    }

    /// The settled point moved past the first `len` bytes of what was sent; `open`: it
    /// lies inside a piece.
    fn settle(&mut self, len: usize, open: bool) {
        let rest = &self.sent[len..];
        // After a point between pieces, what follows is a new piece with its joining
        // `\n` (a piece never starts with one: pieces are trimmed).
        let rest = if open {
            rest
        } else {
            rest.strip_prefix('\n').unwrap_or(rest)
        };
        self.sent = rest.to_owned();
        self.before |= len > 0;
        self.open = open;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::check_stream_chunks;
    use super::super::{
        format_by_name, format_names, PartialOutput, StreamEvent, Tool, ToolCall, ToolCallFormat,
    };
    use super::StreamingParser;

    fn tools() -> Vec<Tool> {
        Tool::list_from_openai(&json!([{"type": "function", "function": {
            "name": "write_file",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"]}}}]))
        .unwrap()
    }

    /// Prose of `len` bytes with spaces, punctuation and newlines.
    fn prose(len: usize) -> String {
        let words = ["lorem ", "ipsum, ", "dolor ", "sit\n", "amet. "];
        let mut s = String::new();
        for w in words.iter().cycle() {
            if s.len() >= len {
                break;
            }
            s.push_str(w);
        }
        s
    }

    /// Streaming one call with a 40 KB string argument in 4-byte deltas, and 1,000 small
    /// calls in 16-byte deltas, hands each format's parser a few dozen times the text's
    /// length, where re-parsing all of it on every delta hands it thousands of times
    /// (issue 5). No timing: the parser's own count of the bytes it was handed.
    #[test]
    fn streaming_work_is_linear_for_every_format() {
        let tools = tools();
        let one = [ToolCall::new("write_file", json!({"text": prose(40_000)}))];
        let many: Vec<ToolCall> = (0..1000)
            .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
            .collect();
        for name in format_names() {
            let f = format_by_name(&name).unwrap();
            for (calls, k) in [(&one[..], 4), (&many[..], 16)] {
                let text = f.render_calls(calls);
                let n = text.len();
                let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[k])
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(
                    scanned < 80 * n,
                    "{name}: {} calls, {n} bytes in {k}-byte deltas: parsed {scanned} bytes \
                     ({}× the text)",
                    calls.len(),
                    scanned / n
                );
            }
        }
    }

    /// Issue 23 item 2: in 8-byte deltas, one call with a 200 KB string argument and
    /// 200 KB of back-to-back small calls hand the format's parser (and the stream's own
    /// scan of an argument being resumed) at most 3 times the text, in every registered
    /// family and the Mistral call array. Work, not time: the count is deterministic.
    #[test]
    fn streaming_work_is_at_most_three_times_the_text_in_8_byte_deltas() {
        let tools = tools();
        let long = [ToolCall::new("write_file", json!({"text": prose(200_000)}))];
        let mut formats: Vec<(String, std::sync::Arc<dyn ToolCallFormat>)> = format_names()
            .into_iter()
            .map(|n| (n.clone(), format_by_name(&n).unwrap()))
            .collect();
        formats.push((
            "mistral_array".into(),
            std::sync::Arc::new(super::super::Mistral::array()),
        ));
        let mut over = Vec::new();
        for (name, f) in &formats {
            let one = f.render_calls(&[ToolCall::new(
                "write_file",
                json!({"text": "file 0: lorem"}),
            )]);
            let many: Vec<ToolCall> = (0..200_000 / one.len() + 1)
                .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}: lorem")})))
                .collect();
            for (kind, calls) in [("long", &long[..]), ("calls", &many[..])] {
                let text = f.render_calls(calls);
                let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[8])
                    .unwrap_or_else(|e| panic!("{name} {kind}: {e}"));
                let work = scanned as f64 / text.len() as f64;
                if work > 3.0 {
                    over.push(format!("{name} {kind}: {work:.2}x"));
                }
            }
        }
        assert!(over.is_empty(), "work over 3x the text: {over:?}");
    }

    /// Long arguments the stream reads itself (see [`resume`]) stream as the whole parse
    /// reads them, in every family, in 1-byte, 8-byte and uneven deltas: escapes (`\"`,
    /// `\\`, `\u00e9`, a surrogate pair), multi-byte UTF-8 split by the cuts, `<` and
    /// every family's markers inside the value, trailing (Unicode) whitespace before the
    /// end, a second argument of nested JSON, and text before and after the calls.
    #[test]
    fn long_arguments_read_by_the_stream_stream_as_parsed() {
        let tools = Tool::list_from_openai(&json!([{"type": "function", "function": {
            "name": "write_file",
            "parameters": {"type": "object", "properties": {
                "text": {"type": "string"}, "more": {"type": "object"}}}}}]))
        .unwrap();
        let piece = "é \"q\" \\ 😀\t<tool_call></tool_call>[TOOL_CALLS] a < b <= c <3 \
                     <|call|><|tool_call_end|><｜tool▁call▁end｜>)]}</parameter></arg_value>\
                     </function>\u{3000}\u{1}\n";
        let plain = "é \"q\" \\ 😀\t a < b <= c <3 )]}\u{3000}\u{1}\n";
        for piece in [piece, plain] {
            let value = format!("{}{}  \n", piece.repeat(12), prose(1500));
            let calls = [
                ToolCall::new("write_file", json!({"text": value})),
                ToolCall::new(
                    "write_file",
                    json!({"text": "x  ", "more": {"a": [1, -2.5e3, true, null, {"b": "}"}], "c": false}}),
                ),
            ];
            let mut formats: Vec<(String, std::sync::Arc<dyn ToolCallFormat>)> = format_names()
                .into_iter()
                .map(|n| (n.clone(), format_by_name(&n).unwrap()))
                .collect();
            formats.push((
                "mistral_array".into(),
                std::sync::Arc::new(super::super::Mistral::array()),
            ));
            for (name, f) in &formats {
                let rendered = f.render_calls(&calls);
                let escaped =
                    rendered
                        .replacen('é', r"\u00e9", 3)
                        .replacen('😀', r"\ud83d\ude00", 2);
                for text in [
                    rendered.clone(),
                    escaped,
                    format!("Sure.\n{rendered}\nDone."),
                ] {
                    let whole = f.parse(&text, &tools);
                    if piece == plain && !text.starts_with("Sure") {
                        assert_eq!(whole.tool_calls.len(), 2, "{name}: {:?}", whole.errors);
                    }
                    for sizes in [&[1][..], &[8], &[3, 8, 1, 13, 2]] {
                        check_stream_chunks(f.as_ref(), &tools, &text, sizes)
                            .unwrap_or_else(|e| panic!("{name}: {e}"));
                    }
                }
            }
        }
    }

    /// Inside a long argument every delta is sent as it arrives (the stream reads the
    /// argument itself rather than coalescing re-parses): one call with a 64 KB string
    /// argument in 8-byte deltas, in every family, sends argument text on each push once
    /// the argument has begun.
    #[test]
    fn every_delta_inside_a_long_argument_is_sent() {
        let tools = tools();
        let call = ToolCall::new("write_file", json!({"text": prose(64_000)}));
        for name in format_names() {
            let f = format_by_name(&name).unwrap();
            let text = f.render_calls(std::slice::from_ref(&call));
            let start = text.find("lorem").unwrap() + 1024;
            let end = text.rfind("lorem").unwrap();
            let mut s = StreamingParser::new(f.as_ref(), &tools);
            let (mut pushes, mut with_args) = (0, 0);
            let mut i = 0;
            while i < text.len() {
                let mut j = (i + 8).min(text.len());
                while !text.is_char_boundary(j) {
                    j += 1;
                }
                let events = s.push(&text[i..j]);
                let at = std::mem::replace(&mut i, j);
                if at >= start && j <= end {
                    pushes += 1;
                    with_args += usize::from(
                        events
                            .iter()
                            .any(|e| matches!(e, StreamEvent::ToolCallArguments { .. })),
                    );
                }
            }
            s.finish();
            assert!(
                with_args == pushes && pushes > 7000,
                "{name}: {with_args} of {pushes} pushes sent argument text"
            );
        }
    }

    /// Re-parses inside a long piece the stream cannot read itself (arguments written as a
    /// JSON string) are paid outside the work budget, so the content after that call
    /// streams on every delta once the call has ended, not after a debt is repaid.
    #[test]
    fn content_after_a_long_unread_call_streams_on_every_delta() {
        let tools = tools();
        let f = format_by_name("hermes").unwrap();
        let args = serde_json::to_string(&json!({"text": prose(40_000)}).to_string()).unwrap();
        let call = format!(
            "<tool_call>\n{{\"name\": \"write_file\", \"arguments\": {args}}}\n</tool_call>"
        );
        let text = format!("{call}\n{}", prose(8_000));
        let mut s = StreamingParser::new(f.as_ref(), &tools);
        let (mut pushes, mut with_content) = (0, 0);
        for (i, delta) in text.as_bytes().chunks(8).enumerate() {
            let events = s.push(std::str::from_utf8(delta).unwrap());
            if i * 8 > call.len() + 2048 {
                pushes += 1;
                with_content +=
                    usize::from(events.iter().any(|e| matches!(e, StreamEvent::Content(_))));
            }
        }
        s.finish();
        assert!(
            pushes > 500 && with_content + 2 >= pushes,
            "{with_content} of {pushes} pushes after the call sent content"
        );
        check_stream_chunks(f.as_ref(), &tools, &text, &[8]).unwrap();
    }

    /// A call whose start was streamed and which then turns out malformed (bad JSON)
    /// no longer holds back the settled point: the text after it streams on every delta.
    #[test]
    fn streams_settle_again_after_a_started_call_turns_out_malformed() {
        let tools = tools();
        let f = format_by_name("hermes").unwrap();
        let bad =
            "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"text\": P}}\n</tool_call>\n";
        let text = format!("{bad}{}", prose(40_000));
        let mut s = StreamingParser::new(f.as_ref(), &tools);
        let mut started = false;
        // The bad call one byte a delta, so its start is sent before it turns out bad.
        for (i, _) in bad.char_indices() {
            let next = bad[i..].chars().next().unwrap().len_utf8();
            for e in s.push(&bad[i..i + next]) {
                started |= matches!(e, StreamEvent::ToolCallStart { .. });
            }
        }
        assert!(started, "the bad call's start was not streamed");
        let rest = &text[bad.len()..];
        let (mut pushes, mut with_content) = (0, 0);
        for delta in rest.as_bytes().chunks(4) {
            pushes += 1;
            let events = s.push(std::str::from_utf8(delta).unwrap());
            with_content +=
                usize::from(events.iter().any(|e| matches!(e, StreamEvent::Content(_))));
        }
        // Every delta after the bad call streams its text (not in 1/64 batches).
        assert!(
            with_content + 8 >= pushes,
            "{with_content} of {pushes} pushes sent text"
        );
        s.finish();
        check_stream_chunks(f.as_ref(), &tools, &text, &[1, 4, 64]).unwrap();
    }

    /// Plain content (no call yet) and reasoning are settled as they arrive, up to the
    /// held-back tail: streaming 40 KB of either in 4-byte deltas hands the parser a small
    /// multiple of the text, and every delta after the opening marker sends the text
    /// before it, at most a few bytes short of what arrived (no coalescing outside calls).
    #[test]
    fn plain_content_and_reasoning_stream_on_every_delta() {
        let tools = tools();
        let body = prose(40_000);
        // The ways into plain text of each family (the first a format reads so is used;
        // Harmony text without a header is read as content only at the end, as it may
        // still be a header).
        let content_openers = ["<|channel|>final<|message|>", ""];
        let reasoning_openers = ["<think>", "[THINK]", "<|channel|>analysis<|message|>"];
        for name in format_names() {
            let f = format_by_name(&name).unwrap();
            let reads = |opener: &str, reasoning: bool| {
                let p = f.parse(&format!("{opener}lorem ipsum, dolor"), &tools);
                let got = if reasoning { p.reasoning } else { p.content };
                got.as_deref() == Some("lorem ipsum, dolor")
            };
            let mut cases = Vec::new();
            if let Some(o) = content_openers.iter().find(|o| reads(o, false)) {
                cases.push((*o, false));
            }
            if let Some(o) = reasoning_openers.iter().find(|o| reads(o, true)) {
                cases.push((*o, true));
            }
            assert!(
                cases.iter().any(|c| !c.1),
                "{name}: no way into plain content"
            );
            for (opener, reasoning) in cases {
                let text = format!("{opener}{body}");
                let n = text.len();
                let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[4])
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(
                    scanned < 8 * n,
                    "{name} (reasoning: {reasoning}): parsed {scanned} bytes for {n} \
                     ({}× the text)",
                    scanned / n
                );
                let mut s = StreamingParser::new(f.as_ref(), &tools);
                let mut sent = 0;
                for (i, delta) in text.as_bytes().chunks(4).enumerate() {
                    let events = s.push(std::str::from_utf8(delta).unwrap());
                    let mut grew = false;
                    for e in events {
                        match e {
                            StreamEvent::Content(d) if !reasoning => {
                                sent += d.len();
                                grew = true;
                            }
                            StreamEvent::Reasoning(d) if reasoning => {
                                sent += d.len();
                                grew = true;
                            }
                            other => panic!("{name}: unexpected {other:?}"),
                        }
                    }
                    let arrived = (i * 4 + delta.len()).saturating_sub(opener.len());
                    if i * 4 >= opener.len() + 16 {
                        assert!(
                            grew && arrived - sent <= 32,
                            "{name} (reasoning: {reasoning}): delta {i} sent nothing or \
                             lags: {sent} of {arrived} bytes sent"
                        );
                    }
                }
                assert!(s.scanned_bytes() < 8 * n, "{name}: {}", s.scanned_bytes());
            }
        }
    }

    /// Content and reasoning settled inside a piece, then continued, ended by a call or
    /// joined to a later piece, add up to the whole-output parse however the text is cut.
    #[test]
    fn text_settled_inside_pieces_streams_as_whole() {
        let tools = tools();
        let call = [ToolCall::new("write_file", json!({"text": "a b"}))];
        for name in format_names() {
            let f = format_by_name(&name).unwrap();
            let c = f.render_calls(&call);
            for text in [
                format!("Hello there,\n world.  \n{c}\n  and  then\n\n{c} end. "),
                format!("<think> mull it\n over  </think>\n Sure thing.{c}more\n"),
                format!("[THINK]mull  it[/THINK]Sure  {c}"),
                "<|channel|>analysis<|message|>mull  it over<|end|><|start|>assistant\
                 <|channel|>final<|message|>Sure  thing <|end|>"
                    .to_owned(),
                "Just text {\"not\": 1} here\n\n and more <|eot_id|>".to_owned(),
            ] {
                for sizes in [&[1][..], &[2], &[3, 1], &[7]] {
                    check_stream_chunks(f.as_ref(), &tools, &text, sizes)
                        .unwrap_or_else(|e| panic!("{name}: {text:?}: {e}"));
                }
            }
        }
    }

    /// With many calls, formats that settle after each call re-parse only the call in
    /// progress: every delta is parsed (no coalescing), and the work stays a small multiple
    /// of the text.
    #[test]
    fn settled_formats_parse_every_delta_of_many_calls() {
        let tools = tools();
        let many: Vec<ToolCall> = (0..1000)
            .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
            .collect();
        for name in [
            "hermes",
            "qwen3_coder",
            "glm4",
            "glm45",
            "glm47",
            "deepseek_v3",
            "deepseek_v31",
            "kimi_k2",
            "harmony",
            "json",
            "llama3_json",
            "mistral",
            "pythonic",
        ] {
            let f = format_by_name(name).unwrap();
            let text = f.render_calls(&many);
            let scanned = check_stream_chunks(f.as_ref(), &tools, &text, &[8])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                scanned < 16 * text.len(),
                "{name}: parsed {scanned} bytes for {}",
                text.len()
            );
        }
    }

    /// A format that forwards only `parse_partial` (a wrapper, as users write): the
    /// settled points it passes on come back through the default `parse_partial_from`,
    /// which drops what came before them, so it still streams as it parses.
    struct Forward(std::sync::Arc<dyn ToolCallFormat>);

    impl ToolCallFormat for Forward {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn structural_tag(
            &self,
            tools: &[Tool],
            choice: &super::super::ToolChoice,
            parallel: bool,
        ) -> Result<tokensieve::StructuralTag, super::super::ToolError> {
            self.0.structural_tag(tools, choice, parallel)
        }
        fn parse_partial(&self, text: &str, tools: &[Tool], at_end: bool) -> PartialOutput {
            self.0.parse_partial(text, tools, at_end)
        }
        fn render_calls(&self, calls: &[ToolCall]) -> String {
            self.0.render_calls(calls)
        }
        fn render_tool_result(&self, call: &ToolCall, result: &serde_json::Value) -> String {
            self.0.render_tool_result(call, result)
        }
        fn render_tools_prompt(&self, tools: &[Tool]) -> String {
            self.0.render_tools_prompt(tools)
        }
    }

    #[test]
    fn wrapper_forwarding_parse_partial_streams_as_whole() {
        let tools = tools();
        let calls: Vec<ToolCall> = (0..40)
            .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
            .collect();
        for name in format_names() {
            let f = Forward(format_by_name(&name).unwrap());
            let text = format!("Writing.\n{}", f.render_calls(&calls));
            for sizes in [&[1][..], &[7, 2], &[50]] {
                for t in [&text[..], &f.render_calls(&calls)] {
                    check_stream_chunks(&f, &tools, t, sizes)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
    }

    fn weather_tools() -> Vec<Tool> {
        Tool::list_from_openai(&json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {
                "type": "object", "properties": {"tz": {"type": "string"}}}}}
        ]))
        .unwrap()
    }

    /// Short adversarial outputs of format `f`: calls alone, two in a row, with text and
    /// reasoning around, markers inside string arguments, unknown names, invalid JSON,
    /// arguments written as a JSON string, a malformed call before a good one.
    fn adversarial_texts(f: &dyn ToolCallFormat) -> Vec<String> {
        let paris = ToolCall::new("get_weather", json!({"city": "Paris"}));
        let utc = ToolCall::new("get_time", json!({"tz": "UTC"}));
        let marks = ToolCall::new(
            "get_weather",
            json!({"city": "<tool_call></tool_call>[TOOL_CALLS]<|call|><|tool_call_end|>\
                   <｜tool▁call▁end｜>)]</parameter></function></arg_value>}"}),
        );
        let unknown = ToolCall::new("nope", json!({"city": "x"}));
        let one = f.render_calls(std::slice::from_ref(&paris));
        let two = f.render_calls(&[paris.clone(), utc.clone()]);
        let bad = one.replacen("\"Paris\"", "Paris", 1);
        let mut texts = vec![
            one.clone(),
            two.clone(),
            format!("Sure.\n{one}"),
            format!("<think>{one}</think>{two}"),
            format!("{one}\ntrailing"),
            f.render_calls(&[marks]),
            format!("{}{one}", f.render_calls(&[unknown])),
            bad.clone(),
            format!("{bad}\n{one}"),
            format!("{bad}{two}"),
        ];
        // Arguments as a JSON string (double-encoded), with escapes, and as a string that
        // is not a JSON object.
        for args in [r#"{"city": "Paris"}"#, r#"{"city":"Paris"}"#] {
            if one.contains(args) {
                for s in [
                    serde_json::to_string(args).unwrap(),
                    serde_json::to_string(r#"{"city": "P\u00e9 \"q\"\n😀"}"#).unwrap(),
                    r#""{\"city\": \"P\u00e9\ud83d\ude00\"}""#.to_owned(),
                    "\"Paris\"".to_owned(),
                    "\"{\\\"city\\\": P}\"".to_owned(),
                ] {
                    let t = one.replacen(args, &s, 1);
                    texts.push(t.clone());
                    texts.push(format!("{t}{one}"));
                }
            }
        }
        // Partial markers and partial calls at the end: every prefix of two calls.
        texts.extend(
            (1..two.len())
                .filter(|&k| two.is_char_boundary(k))
                .map(|k| two[..k].to_owned()),
        );
        texts
    }

    /// Streams `text` in `deltas` and checks the events against the whole-output parse:
    /// same content, reasoning, calls and errors; calls and errors in output order; call
    /// indices 0, 1, 2, … over the parsed calls; a call retracted only by its `Malformed`;
    /// (`json`) a call's argument deltas add up to a JSON text of its arguments.
    fn check_events(
        f: &dyn ToolCallFormat,
        tools: &[Tool],
        text: &str,
        deltas: &[&str],
        json: bool,
    ) -> Result<(), String> {
        let mut s = StreamingParser::new(f, tools);
        let mut events = Vec::new();
        for d in deltas {
            events.extend(s.push(d));
        }
        events.extend(s.finish());
        let partial = f.parse_partial(text, tools, true);
        // The output order of calls (Ok) and malformed calls (Err).
        let mut order_whole = Vec::new();
        let (mut k, mut j) = (0, 0);
        for c in &partial.calls {
            if c.complete.is_some() {
                order_whole.push(Ok(k));
                k += 1;
            } else if j < partial.errors.len() {
                order_whole.push(Err(j));
                j += 1;
            }
        }
        order_whole.extend((j..partial.errors.len()).map(Err));
        let whole = partial.into_parsed();
        let (mut content, mut reasoning) = (String::new(), String::new());
        let mut open: Option<(usize, String)> = None;
        let (mut calls, mut errors, mut order) = (Vec::new(), Vec::new(), Vec::new());
        for e in &events {
            match e {
                StreamEvent::Content(d) => content.push_str(d),
                StreamEvent::Reasoning(d) => reasoning.push_str(d),
                StreamEvent::ToolCallStart { index, .. } => {
                    if open.is_some() || *index != calls.len() {
                        return Err(format!("start of {index} with {} ended", calls.len()));
                    }
                    open = Some((*index, String::new()));
                }
                StreamEvent::ToolCallArguments { index, delta } => match &mut open {
                    Some((i, a)) if i == index => a.push_str(delta),
                    _ => return Err(format!("arguments of {index} not open")),
                },
                StreamEvent::ToolCallEnd { index, call } => {
                    let Some((i, args)) = open.take().filter(|(i, _)| i == index) else {
                        return Err(format!("end of {index} not open"));
                    };
                    if json {
                        let v: Result<serde_json::Value, _> = serde_json::from_str(&args);
                        if v.as_ref().ok() != Some(&call.arguments) {
                            return Err(format!("call {i}: arguments {args:?} for {call:?}"));
                        }
                    }
                    order.push(Ok(calls.len()));
                    calls.push(call.clone());
                }
                StreamEvent::Malformed(m) => {
                    // Ends (retracts) a started call.
                    open = None;
                    order.push(Err(errors.len()));
                    errors.push(m.clone());
                }
            }
        }
        if open.is_some() {
            return Err("a call left open".into());
        }
        let got = super::super::ParsedOutput {
            content: (!content.is_empty()).then_some(content),
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            tool_calls: calls,
            errors,
        };
        if got != whole {
            return Err(format!("streamed {got:?}\nwhole {whole:?}"));
        }
        if order != order_whole {
            return Err(format!("order {order:?}, whole {order_whole:?}"));
        }
        // Every call started is either ended as parsed or ended by its `Malformed`.
        let mut started = Vec::new();
        for e in &events {
            match e {
                StreamEvent::ToolCallStart { index, id, name } => {
                    started.push((*index, id.clone(), name.clone()))
                }
                StreamEvent::ToolCallEnd { call, .. } => {
                    let (_, id, name) = started.pop().unwrap();
                    if (id.as_ref(), &name) != (call.id.as_ref(), &call.name) && call.id.is_some() {
                        return Err(format!("started as {name} {id:?}, ended as {call:?}"));
                    }
                }
                StreamEvent::Malformed(_) => {
                    started.clear();
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every registered format, on short adversarial outputs cut at every split point into
    /// two deltas and into 1-byte deltas, streams what the whole-output parse gives (see
    /// [`check_events`]).
    #[test]
    fn adversarial_outputs_stream_as_parsed_at_every_split() {
        let tools = weather_tools();
        let mut runs = 0;
        for name in format_names() {
            let f = format_by_name(&name).unwrap();
            let json = !matches!(name.as_str(), "pythonic");
            let texts = adversarial_texts(f.as_ref());
            let prefixes = texts.len() - texts.iter().filter(|t| !t.is_empty()).count();
            let _ = prefixes;
            for text in &texts {
                runs += check_every_split(f.as_ref(), &tools, text, json)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
        assert!(runs > 1000);
    }

    /// [`check_events`] for `text` in 1-byte deltas and cut at every split point into two
    /// deltas; returns the runs made.
    fn check_every_split(
        f: &dyn ToolCallFormat,
        tools: &[Tool],
        text: &str,
        json: bool,
    ) -> Result<usize, String> {
        let cuts: Vec<usize> = (0..=text.len())
            .filter(|&k| text.is_char_boundary(k))
            .collect();
        let mut cases: Vec<Vec<&str>> = vec![chars(text)];
        for &k in &cuts {
            cases.push(vec![&text[..k], &text[k..]]);
        }
        for deltas in &cases {
            check_events(f, tools, text, deltas, json)
                .map_err(|e| format!("{text:?} in {deltas:?}: {e}"))?;
        }
        Ok(cases.len())
    }

    /// Issue 23: the Mistral pre-v11 call array (`[TOOL_CALLS][{…}, {…}, …]`) settles
    /// after each element from its first call on, so 1,000 calls in one array streamed in
    /// 8-byte deltas hand the parser a small multiple of the text, as the formats that
    /// settle after each call do (before, the array was re-parsed from its `[` in
    /// coalesced steps: about 65 times the text).
    #[test]
    fn mistral_call_array_settles_after_each_element() {
        let tools = tools();
        let f = super::super::Mistral::array();
        let many: Vec<ToolCall> = (0..1000)
            .map(|i| ToolCall::new("write_file", json!({"text": format!("file {i}")})))
            .collect();
        let calls = f.render_calls(&many);
        let unknown = r#"{"name": "nope", "arguments": {}}"#;
        let with_bad = calls.replacen("[{", &format!("[{unknown}, {{"), 1);
        for text in [calls.clone(), format!("Writing.\n{with_bad}\nDone.")] {
            let scanned = check_stream_chunks(&f, &tools, &text, &[8]).unwrap();
            assert!(
                scanned < 16 * text.len(),
                "parsed {scanned} bytes for {} ({}x the text)",
                text.len(),
                scanned / text.len()
            );
        }
    }

    /// The Mistral array settled between its elements streams as the whole parse reads
    /// it, at every split and in 1-byte deltas: the adversarial outputs, and arrays with
    /// malformed elements before and after a call, a missing `,`, a cut-off end, no call.
    #[test]
    fn mistral_call_array_streams_as_parsed_at_every_split() {
        let tools = weather_tools();
        let f = super::super::Mistral::array();
        let mut texts = adversarial_texts(&f);
        let good = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
        let utc = r#"{"name": "get_time", "arguments": {"tz": "UTC"}}"#;
        let unknown = r#"{"name": "nope", "arguments": {}}"#;
        let bad = r#"{"name": "get_weather", "arguments": {"city": P}}"#;
        for body in [
            format!("[{unknown}, {good}, {unknown}, {utc}]"),
            format!("[{good}, {utc}, "),
            format!("[{good}, {utc} {good}]"),
            format!("[{good}, {bad}, {utc}]"),
            format!("[{good}, {good}"),
            format!("[{unknown}, {unknown}]"),
        ] {
            texts.push(format!("Sure. [TOOL_CALLS]{body} after"));
            texts.push(format!("[TOOL_CALLS]{body}[TOOL_CALLS][{utc}]"));
            texts.push(format!("[TOOL_CALLS]{body}"));
        }
        for text in &texts {
            check_every_split(&f, &tools, text, true).unwrap();
            for k in (1..text.len()).filter(|&k| text.is_char_boundary(k)) {
                check_stream_chunks(&f, &tools, &text[..k], &[1, 3])
                    .unwrap_or_else(|e| panic!("{:?}: {e}", &text[..k]));
            }
        }
    }

    fn events_of(f: &dyn ToolCallFormat, tools: &[Tool], deltas: &[&str]) -> Vec<StreamEvent> {
        let mut s = StreamingParser::new(f, tools);
        let mut ev: Vec<StreamEvent> = deltas.iter().flat_map(|d| s.push(d)).collect();
        ev.extend(s.finish());
        ev
    }

    fn chars(text: &str) -> Vec<&str> {
        text.char_indices()
            .map(|(i, c)| &text[i..i + c.len_utf8()])
            .collect()
    }

    /// Finding 1: arguments written as a JSON string stream the decoded string (a JSON
    /// text of the arguments object), not the string literal, in every JSON family.
    #[test]
    fn string_encoded_arguments_stream_as_their_decoded_json_text() {
        let tools = weather_tools();
        let call = ToolCall::new("get_weather", json!({"city": "Pé \"q\"\n😀"}));
        for name in [
            "hermes",
            "llama3_json",
            "json",
            "mistral",
            "kimi_k2",
            "deepseek_v3",
            "deepseek_v31",
            "harmony",
        ] {
            let f = format_by_name(name).unwrap();
            let one = f.render_calls(std::slice::from_ref(&call));
            let object = [
                super::super::scan::python_json(&call.arguments),
                call.arguments.to_string(),
            ]
            .into_iter()
            .find(|o| one.contains(o.as_str()))
            .unwrap_or_else(|| panic!("{name}: {one}"));
            let text = one.replacen(&object, &serde_json::to_string(&object).unwrap(), 1);
            let out = f.parse(&text, &tools).tool_calls;
            assert_eq!(out.len(), 1, "{name}: {text}");
            assert_eq!(out[0].arguments, call.arguments, "{name}");
            for deltas in [chars(&text), vec![&text[..]]] {
                let args: String = events_of(f.as_ref(), &tools, &deltas)
                    .into_iter()
                    .filter_map(|e| match e {
                        StreamEvent::ToolCallArguments { index: 0, delta } => Some(delta),
                        _ => None,
                    })
                    .collect();
                assert_eq!(args, object, "{name}: {text}");
            }
        }
    }

    /// Findings 2 and 3: a malformed call (unknown tool, bad JSON) takes no index, and
    /// its `Malformed` comes before a later call's events in the same push.
    #[test]
    fn malformed_calls_take_no_index_and_come_in_output_order() {
        let tools = weather_tools();
        let h = format_by_name("hermes").unwrap();
        let good = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>";
        for bad in [
            "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>\n",
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": P}}\n</tool_call>\n",
        ] {
            let text = format!("{bad}{good}");
            assert_eq!(h.parse(&text, &tools).tool_calls.len(), 1);
            for deltas in [chars(&text), vec![&text[..]], vec![bad, good]] {
                let kinds: Vec<String> = events_of(h.as_ref(), &tools, &deltas)
                    .iter()
                    .filter_map(|e| match e {
                        StreamEvent::ToolCallStart { index, .. } => Some(format!("start {index}")),
                        StreamEvent::ToolCallEnd { index, .. } => Some(format!("end {index}")),
                        StreamEvent::Malformed(_) => Some("malformed".into()),
                        _ => None,
                    })
                    .collect();
                let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
                assert_eq!(
                    &kinds[kinds.len() - 3..],
                    ["malformed", "start 0", "end 0"],
                    "{text:?} in {} deltas",
                    deltas.len()
                );
                // Before it, at most the bad call's start (its name arrived first).
                assert!(kinds.len() == 3 || kinds[..kinds.len() - 3] == ["start 0"]);
            }
        }
    }

    /// Finding 4: an end marker cut off at the end of the output (a stop or the length
    /// limit) ends the call it follows, when that call is complete without it: the call
    /// is parsed and the cut-off marker is neither content nor an error, whole or
    /// streamed. Every format with an end marker after a call's complete body.
    #[test]
    fn a_cut_off_end_marker_ends_a_complete_call() {
        let tools = weather_tools();
        let call = ToolCall::new("get_weather", json!({"city": "P"}));
        for (name, end) in [
            ("hermes", "</tool_call>"),
            ("qwen3_coder", "</tool_call>"),
            ("deepseek_v3", "<｜tool▁call▁end｜>"),
            ("deepseek_v3", "<｜tool▁calls▁end｜>"),
            ("deepseek_v31", "<｜tool▁call▁end｜>"),
            ("deepseek_v31", "<｜tool▁calls▁end｜>"),
            ("kimi_k2", "<|tool_call_end|>"),
            ("kimi_k2", "<|tool_calls_section_end|>"),
            ("harmony", "<|call|>"),
        ] {
            let f = format_by_name(name).unwrap();
            let whole = f.render_calls(std::slice::from_ref(&call));
            let at = whole
                .rfind(end)
                .unwrap_or_else(|| panic!("{name}: {whole}"));
            for (k, _) in end.char_indices().skip(1) {
                let text = &whole[..at + k];
                let out = f.parse(text, &tools);
                assert_eq!(out.tool_calls.len(), 1, "{name}: {text:?}");
                assert_eq!(
                    out.tool_calls[0].arguments, call.arguments,
                    "{name}: {text:?}"
                );
                assert_eq!(
                    (out.content, out.errors.len()),
                    (None, 0),
                    "{name}: {text:?}"
                );
                check_stream_chunks(f.as_ref(), &tools, text, &[1])
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }

    /// Finding 5: in the formats without an end marker, a call that is malformed as soon
    /// as its text shows it (JSON that cannot be completed) is settled there: the text
    /// after it streams on every delta rather than at the end (`llama3_json`, `glm4`; the
    /// others hold it by design, see the module notes, and still stream as they parse).
    #[test]
    fn text_after_a_call_known_malformed_streams_in_formats_without_an_end_marker() {
        let tools = weather_tools();
        let call = ToolCall::new("get_weather", json!({"city": "Paris"}));
        let after = format!("\n{}", prose(2000));
        // mistral (v11+): a malformed call runs to the next `[TOOL_CALLS]` by design (the
        // syntax has no end, and text after a call is the call's until a marker);
        // json/json_array and pythonic: the output is read as one call list, which
        // text after a malformed list may still be part of (the module notes).
        for name in ["llama3_json", "glm4", "mistral", "json", "pythonic"] {
            let f = format_by_name(name).unwrap();
            let good = f.render_calls(std::slice::from_ref(&call));
            let bad = good
                .replacen("\"Paris\"", "P", 1)
                .replacen("'Paris'", "P,,", 1);
            assert_ne!(bad, good);
            let text = format!("{bad}{after}");
            let whole = f.parse(&text, &tools);
            assert!(!whole.errors.is_empty(), "{name}: {whole:?}");
            let mut s = StreamingParser::new(f.as_ref(), &tools);
            let mut first = None;
            let mut malformed_at = None;
            for (i, d) in text.as_bytes().chunks(4).enumerate() {
                let events = s.push(std::str::from_utf8(d).unwrap());
                for e in events {
                    match e {
                        StreamEvent::Malformed(_) => malformed_at = malformed_at.or(Some(i * 4)),
                        StreamEvent::Content(_) if i * 4 > bad.len() + 8 => {
                            first = first.or(Some(i * 4))
                        }
                        _ => {}
                    }
                }
            }
            s.finish();
            assert!(
                !matches!(name, "llama3_json" | "glm4")
                    || first.is_some_and(|k| k < bad.len() + 64),
                "{name}: {bad:?} then text: content after it first sent at {first:?} (malformed at {malformed_at:?})"
            );
            check_stream_chunks(f.as_ref(), &tools, &text, &[4, 1, 7]).unwrap();
        }
    }
}
