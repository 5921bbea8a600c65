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
//!   reads on, but not what the stream read: the next parse hands it the text with the
//!   run the stream read cut out (an XML value's text, or the longest JSON string read
//!   whole) and a sentinel in its place, and puts the run back into the call's argument
//!   text and arguments (`StreamingParser::parse_elided`; a parse whose output holds the
//!   sentinel anywhere but once in one call's arguments is not used, and the whole text
//!   is parsed). So one call with a 1 MB argument costs one scan of it and a parse of the
//!   call without it, and still streams on every delta.
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
//! * **The cost of a delta.** Beyond parse work, a delta costs its bookkeeping, which
//!   in 8-byte deltas is of the order of a whole parse of the same text (issue 23: 1 MB
//!   parses whole in 1–7 ms, that is 8–50 ns per 8 bytes). Inside an argument the stream
//!   reads itself, a delta that stays inside the string or XML value being read (no
//!   unescaped closing quote, no `<`; escapes and whitespace at its end allowed) is taken
//!   in one pass over its bytes, a table lookup each, and sent (escaped where a byte needs
//!   it); the argument text sent is counted, not copied, until the next parse holds it. Three ways
//!   to take the events: [`StreamingParser::push_with`] shows them by reference and keeps
//!   the event vector and the last argument event's string for the next delta (nothing
//!   allocated per delta inside an argument: the cheapest);
//!   [`StreamingParser::push_into`] fills the caller's vector (one string per argument
//!   event); [`StreamingParser::push`] returns a new vector.
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

/// The shortest run of an XML value read by the stream that the format's parser is
/// handed cut out (see `StreamingParser::parse_elided`).
const MIN_ELIDED: usize = 1024;

/// What stands for a run cut out of the text handed to the format's parser: two Unicode
/// noncharacters, which no family's markup uses; a parse whose output holds it other than
/// once, inside one call's arguments, is not used.
const SENTINEL: &str = "\u{10FFFE}\u{10FFFF}";

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
    /// Deltas taken by the general path (the scan of `Resume::advance`, a parse), not by
    /// the one-pass scan of a delta inside an argument the stream reads
    /// (`resumed_plain`): the tests check their number does not grow with an
    /// argument's length.
    general: usize,
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
    /// How many bytes the last parse added to the end of that call's argument text.
    args_added: usize,
    /// The text's length at the last parse (what arrived after it is new to the next).
    parsed_len: usize,
    /// The open last call's arguments, read by the stream itself (see [`resume`]), and the
    /// call's index.
    resume: Option<(Resume, usize)>,
    /// A run of an XML value the stream read itself, in a call whose arguments it then
    /// stopped reading: the next parse hands the format's parser the text with this run
    /// cut out and puts it back into what the parser returns (see
    /// [`StreamingParser::parse_elided`]).
    elided: Option<(std::ops::Range<usize>, resume::Elided)>,
    finished: bool,
    /// The events of a [`StreamingParser::push_with`], kept for the next one: empty, or
    /// the last argument event it showed, its text cleared (of at most `ALLOWANCE` bytes).
    scratch: Vec<StreamEvent>,
}

#[derive(Default)]
struct SentCall {
    /// A `ToolCallStart` was sent.
    started: bool,
    /// The argument text sent, but for the last `resumed` bytes.
    sent_args: String,
    /// Bytes of argument text sent after `sent_args` by the stream's own scan (see
    /// [`resume`]), not copied: the next parse's argument text holds them.
    resumed: usize,
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
            general: 0,
            reasoning: Joined::default(),
            content: Joined::default(),
            calls: Vec::new(),
            sent_errors: 0,
            credit: ALLOWANCE,
            args_current: false,
            args_added: 0,
            parsed_len: 0,
            resume: None,
            elided: None,
            finished: false,
            scratch: Vec::new(),
        }
    }

    /// Adds `delta` (decoded with special tokens kept) and returns what it settled.
    /// After [`StreamingParser::finish`] deltas are ignored. A thin wrapper of
    /// [`StreamingParser::push_into`] with a new vector.
    pub fn push(&mut self, delta: &str) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        self.push_into(delta, &mut out);
        out
    }

    /// Adds `delta` (decoded with special tokens kept) and appends what it settled to
    /// `out`, the events [`StreamingParser::push`] returns, in the same order. An
    /// argument delta of the call whose `ToolCallArguments` is the last event in `out`
    /// is appended to that event's text rather than pushed as a new event (so a caller
    /// that drains `out` between deltas gets exactly `push`'s events, and one that lets
    /// events pile up gets each run of a call's argument deltas as one string).
    ///
    /// The cheap path for a serving engine: no vector is allocated per delta, and
    /// inside an argument the stream reads itself (see the module notes) a delta costs
    /// the scan of its own bytes and the one string of its event, with no copy of the
    /// argument text kept beside the text received. After [`StreamingParser::finish`]
    /// deltas are ignored.
    pub fn push_into(&mut self, delta: &str, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        self.text.push_str(delta);
        self.received(delta.len(), out);
    }

    /// What the last `len` bytes of the text, just received, settle: appended to `out` as
    /// [`StreamingParser::push_into`] appends them. Not inlined: the cheap path of
    /// [`StreamingParser::push_with`] stays short.
    #[inline(never)]
    fn received(&mut self, len: usize, out: &mut Vec<StreamEvent>) {
        if let Some(&(_, index)) = self.resume.as_ref() {
            let taken = match out.last_mut() {
                Some(StreamEvent::ToolCallArguments { index: i, delta }) if *i == index => {
                    self.resumed_plain(len, delta)
                }
                _ => {
                    let mut delta = String::new();
                    let taken = self.resumed_plain(len, &mut delta);
                    if !delta.is_empty() {
                        out.push(StreamEvent::ToolCallArguments { index, delta });
                    }
                    taken
                }
            };
            if taken {
                return;
            }
        }
        self.general += 1;
        self.credit = (self.credit + WORK_PER_BYTE * len).min(ALLOWANCE);
        match self.resume.as_mut() {
            Some((r, index)) => {
                let index = *index;
                let before = r.scanned();
                let (sent, stop) = r.advance(&self.text);
                let read = r.scanned() - before;
                self.scanned += read;
                self.credit = self.credit.saturating_sub(read);
                if !sent.is_empty() {
                    let raw = &self.text[sent];
                    let mut wrote = 0;
                    append_arguments(out, index, r.rendered_len(raw), |d| {
                        wrote = r.render(raw, d)
                    });
                    if let Some(call) = self.calls.last_mut() {
                        call.resumed += wrote;
                    }
                }
                let Some(at) = stop else { return };
                // Left the arguments: the format's parser reads on, paid by the bytes
                // from here (those scanned were paid once), and is not handed again the
                // run of a value just read.
                self.elided = r.elidable(MIN_ELIDED);
                self.resume = None;
                self.unparsed = self.text.len() - at;
            }
            None => self.unparsed += len,
        }
        let tail = self.text.len() - self.base;
        let due = if tail <= EAGER_TAIL {
            self.credit >= tail
        } else {
            self.unparsed * TAIL_SHARE >= tail
        };
        if due {
            self.parse(false, out);
        }
    }

    /// The common case inside an argument the stream reads itself: when the last `len`
    /// bytes received stay inside the string or value being read (see
    /// `Resume::advance_plain`), writes their argument text (and that of whitespace held
    /// before them) onto `args` and returns true; else changes nothing.
    #[inline]
    fn resumed_plain(&mut self, len: usize, args: &mut String) -> bool {
        let Some((r, _)) = self.resume.as_mut() else {
            return false;
        };
        let Some(plain) = r.advance_plain(&self.text, self.text.len() - len) else {
            return false;
        };
        self.scanned += len;
        // Earned and spent at once (see `WORK_PER_BYTE`).
        self.credit = (self.credit + WORK_PER_BYTE * len)
            .min(ALLOWANCE)
            .saturating_sub(len);
        let wrote = plain.render(&self.text, args);
        if let Some(call) = self.calls.last_mut() {
            call.resumed += wrote;
        }
        true
    }

    /// [`StreamingParser::push_with`]'s cheap path: when `scratch` holds the emptied
    /// argument event of the call whose arguments the stream reads and the last `len`
    /// bytes received stay inside the string or value being read, writes their argument
    /// text into that event ([`StreamingParser::resumed_plain`]) and returns true; else
    /// changes nothing. Kept apart from the general path so that a delta inside a long
    /// argument runs this short function only.
    #[inline]
    fn pushed_plain(&mut self, len: usize) -> bool {
        let Some(&(_, index)) = self.resume.as_ref() else {
            return false;
        };
        let [StreamEvent::ToolCallArguments {
            index: i,
            delta: args,
        }] = self.scratch.as_mut_slice()
        else {
            return false;
        };
        if *i != index {
            return false;
        }
        let mut args = std::mem::take(args);
        let taken = self.resumed_plain(len, &mut args);
        if let [StreamEvent::ToolCallArguments { delta, .. }] = self.scratch.as_mut_slice() {
            *delta = args;
        }
        taken
    }

    /// Adds `delta` (decoded with special tokens kept) and shows each event it settled to
    /// `each`, in the order [`StreamingParser::push`] returns them, without handing them
    /// over: the cheapest way to forward events (a serving engine writing each into its
    /// response). The vector of events and the string of an argument delta are kept and
    /// reused for the next delta, so inside an argument the stream reads itself a delta
    /// allocates nothing once the stream runs. After [`StreamingParser::finish`] deltas
    /// are ignored.
    pub fn push_with(&mut self, delta: &str, mut each: impl FnMut(&StreamEvent)) {
        if self.finished {
            return;
        }
        self.text.push_str(delta);
        // `scratch` may hold the last argument event shown, emptied: the next delta of
        // that call is appended onto it, so a delta inside an argument moves no event
        // and allocates nothing.
        if self.pushed_plain(delta.len()) {
            if let [event @ StreamEvent::ToolCallArguments { delta: args, .. }] =
                self.scratch.as_slice()
            {
                if !args.is_empty() {
                    each(event);
                }
            }
            if let [StreamEvent::ToolCallArguments { delta: args, .. }] =
                self.scratch.as_mut_slice()
            {
                args.clear();
                if args.capacity() > ALLOWANCE {
                    self.scratch.clear();
                }
            }
            return;
        }
        let mut events = std::mem::take(&mut self.scratch);
        self.received(delta.len(), &mut events);
        for event in &events {
            if !matches!(event, StreamEvent::ToolCallArguments { delta, .. } if delta.is_empty()) {
                each(event);
            }
        }
        match events.last_mut() {
            Some(StreamEvent::ToolCallArguments { delta, .. }) if delta.capacity() <= ALLOWANCE => {
                delta.clear();
                let n = events.len();
                if n > 1 {
                    events.drain(..n - 1);
                }
            }
            _ => events.clear(),
        }
        self.scratch = events;
    }

    /// Re-parses now what [`StreamingParser::push`] coalesced (for a stream that pauses
    /// inside a call: a delta there waits for the work budget, or for 1/64 of a long
    /// piece, see the module notes) and returns what it settled.
    pub fn flush(&mut self) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if !self.finished && self.unparsed > 0 {
            self.parse(false, &mut out);
        }
        out
    }

    /// Ends the stream: releases held-back text and reports calls left unfinished.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let mut out = Vec::new();
        self.parse(true, &mut out);
        out
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

    fn parse(&mut self, at_end: bool, out: &mut Vec<StreamEvent>) {
        self.unparsed = 0;
        let arrived_from = std::mem::replace(&mut self.parsed_len, self.text.len());
        self.resume = None;
        let elided = self.elided.take();
        let elided = elided.and_then(|(run, how)| self.parse_elided(run, how, at_end));
        let (partial, handed) = match elided {
            Some(done) => done,
            None => {
                let p = self
                    .format
                    .parse_partial_from(&self.text, &self.from, self.tools, at_end);
                (p, self.text.len() - self.base)
            }
        };
        self.scanned += handed;
        self.credit = self.credit.saturating_sub(handed);
        let settled = partial.settled.filter(|_| !at_end);
        self.diff(partial, out);
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
            let added = self.args_added;
            self.resume =
                Resume::infer(&self.text, &call.sent_args, arrived_from, added).map(|r| (r, index));
        }
    }

    /// The parse of the text with `run` (a run of an XML value the stream read itself,
    /// see `Resume::elidable`) replaced by [`SENTINEL`], and the run put back into what
    /// the format returns: into the one call's argument text where the sentinel stands
    /// (escaped as JSON string content, as the value's text is there) and into the one
    /// string of its finished call's arguments; settled offsets after it moved by the
    /// run's length. So the end of a call with a long value costs a parse of the call
    /// without the value (issue 23: no second reading of a 1 MB argument), with the
    /// output of the parse of the whole text: the format reads a raw value's text as it
    /// is (a string-typed value: the text itself; the stream resumed it because the
    /// parse showed it so), and the sentinel stands inside it, after text and before
    /// text of the value. Returns the output and the bytes handed to the parser, or
    /// `None` (the caller parses the whole text) when the sentinel is found anywhere
    /// else or other than once, in an error past the run, or where the arguments do not
    /// extend what was sent.
    fn parse_elided(
        &self,
        run: std::ops::Range<usize>,
        how: resume::Elided,
        at_end: bool,
    ) -> Option<(PartialOutput, usize)> {
        let text = &self.text;
        if run.start < self.base || run.end > text.len() {
            return None;
        }
        let (head, tail) = (&text[..run.start], &text[run.end..]);
        if head[self.base..].contains(SENTINEL) || tail.contains(SENTINEL) {
            return None;
        }
        let mut cut = String::with_capacity(head.len() + SENTINEL.len() + tail.len());
        cut.push_str(head);
        cut.push_str(SENTINEL);
        cut.push_str(tail);
        let mut p = self
            .format
            .parse_partial_from(&cut, &self.from, self.tools, at_end);
        let raw = &text[run.clone()];
        if p.content.contains(SENTINEL)
            || p.reasoning.contains(SENTINEL)
            || p.errors.iter().any(|e| e.offset + e.text.len() > run.start)
        {
            return None;
        }
        let mut holders = p
            .calls
            .iter_mut()
            .enumerate()
            .filter(|(_, c)| c.arguments_text.contains(SENTINEL));
        let (i, call) = holders.next()?;
        if holders.next().is_some() {
            return None;
        }
        let at = call.arguments_text.find(SENTINEL)?;
        let after = &call.arguments_text[at + SENTINEL.len()..];
        if after.contains(SENTINEL) || call.arguments_text.starts_with('"') {
            return None;
        }
        let mut args = String::with_capacity(call.arguments_text.len() + raw.len() + raw.len() / 8);
        args.push_str(&call.arguments_text[..at]);
        match how {
            resume::Elided::Escaped => resume::escape_into(raw, &mut args),
            resume::Elided::Json => args.push_str(raw),
        }
        args.push_str(after);
        if let Some(sent) = self.calls.get(i) {
            if !args.starts_with(sent.sent_args.as_str())
                || args.len() < sent.sent_args.len() + sent.resumed
            {
                return None;
            }
        }
        call.arguments_text = args;
        if let Some(done) = call.complete.as_mut() {
            let mut decoded = match how {
                resume::Elided::Escaped => None,
                resume::Elided::Json => Some(resume::unescape(raw)?),
            };
            if put_back(&mut done.arguments, raw, &mut decoded) != 1 {
                return None;
            }
        }
        let moved = |o: usize| {
            if o > run.start {
                o - SENTINEL.len() + raw.len()
            } else {
                o
            }
        };
        p.settled = p.settled.map(|s| super::Settled {
            offset: moved(s.offset),
            anchor: moved(s.anchor),
            ..s
        });
        Some((p, cut.len() - self.base))
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

    fn diff(&mut self, p: PartialOutput, events: &mut Vec<StreamEvent>) {
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
        let (mut args_current, mut args_added) = (false, 0);
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
                    if error_at > sent_errors && !report(&mut sent_errors, e, events, &mut held) {
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
                args_added = now.len().saturating_sub(sent.sent_args.len());
                let mut ending = false;
                if sent.resumed > 0 {
                    // What the stream's scan sent is the parse's text after `sent_args`
                    // (formats keep their partial output monotone): copied once here.
                    let total = sent.sent_args.len() + sent.resumed;
                    // A call that ends in this parse keeps nothing: only the text after
                    // what was sent is sent (no copy of a long argument just to drop it).
                    let scanned = now.get(..total).filter(|p| p.starts_with(&*sent.sent_args));
                    match scanned {
                        Some(_) if call.complete.is_some() => {
                            if let Some(more) = now.get(total..).filter(|m| !m.is_empty()) {
                                append_arguments(events, index, more.len(), |d| d.push_str(more));
                            }
                            sent.resumed = 0;
                            ending = true;
                        }
                        Some(p) => {
                            sent.sent_args.push_str(&p[sent.sent_args.len()..]);
                            sent.resumed = 0;
                        }
                        None => {}
                    }
                }
                if sent.resumed == 0 && !ending {
                    grow(&now, &mut sent.sent_args, |delta| {
                        append_arguments(events, index, delta.len(), |d| d.push_str(delta))
                    });
                }
                args_current = sent.resumed == 0
                    && !ending
                    && *now == *sent.sent_args
                    && !call.arguments_text.starts_with('"');
            } else {
                args_current = false;
            }
            if let Some(done) = call.complete {
                if !sent.ended {
                    sent.ended = true;
                    sent.sent_args = String::new();
                    sent.resumed = 0;
                    events.push(StreamEvent::ToolCallEnd { index, call: done });
                }
                index += 1;
            }
        }
        // Errors without a place among the calls (a user's format may report them so).
        for e in errors {
            error_at += 1;
            if error_at > sent_errors && !report(&mut sent_errors, e, events, &mut held) {
                break;
            }
        }
        self.sent_errors = sent_errors;
        self.args_current = args_current;
        self.args_added = args_added;
    }
}

/// Replaces [`SENTINEL`] with the content (`owned`, else `raw`) in the strings of `v` that
/// hold it; returns how many times it was found (the caller uses `v` only when that is
/// once). A string that is the sentinel alone takes `owned` itself, not a copy (the
/// common case: a long argument is the whole of one string).
fn put_back(v: &mut serde_json::Value, raw: &str, owned: &mut Option<String>) -> usize {
    match v {
        serde_json::Value::String(s) if s == SENTINEL && owned.is_some() => {
            *s = owned.take().unwrap_or_default();
            1
        }
        serde_json::Value::String(s) => s.find(SENTINEL).map_or(0, |at| {
            let content = owned.as_deref().unwrap_or(raw);
            let rest = &s[at + SENTINEL.len()..];
            let more = rest.matches(SENTINEL).count();
            // Built anew, not `replace_range` (which inserts byte by byte).
            let mut whole = String::with_capacity(s.len() + content.len());
            whole.push_str(&s[..at]);
            whole.push_str(content);
            whole.push_str(rest);
            *s = whole;
            1 + more
        }),
        serde_json::Value::Array(a) => a.iter_mut().map(|x| put_back(x, raw, owned)).sum(),
        serde_json::Value::Object(o) => o.values_mut().map(|x| put_back(x, raw, owned)).sum(),
        _ => 0,
    }
}

/// Writes more argument text of call `index` with `write`: onto the text of the
/// `ToolCallArguments` event of that call that ends `events`, else into a new such event
/// of `capacity` bytes (none if `write` wrote nothing).
fn append_arguments(
    events: &mut Vec<StreamEvent>,
    index: usize,
    capacity: usize,
    write: impl FnOnce(&mut String),
) {
    if let Some(StreamEvent::ToolCallArguments { index: i, delta }) = events.last_mut() {
        if *i == index {
            write(delta);
            return;
        }
    }
    let mut delta = String::with_capacity(capacity);
    write(&mut delta);
    if !delta.is_empty() {
        events.push(StreamEvent::ToolCallArguments { index, delta });
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
fn grow(now: &str, sent: &mut String, mut emit: impl FnMut(&str)) {
    if now.len() > sent.len() && now.starts_with(sent.as_str()) {
        let more = &now[sent.len()..];
        emit(more);
        sent.push_str(more);
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
            emit(if join { format!("\n{d}") } else { d.to_owned() })
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
mod tests;
