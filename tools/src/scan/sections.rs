//! Families whose calls sit in sections (DeepSeek, Kimi K2): `SECTION_BEGIN (CALL_BEGIN …
//! CALL_END)+ SECTION_END`, and what a family's call reader returns ([`CallRead`]).

#[allow(unused_imports)]
use super::*;

/// What a family's call reader made of the text after a call's begin marker.
#[derive(Debug)]
pub enum CallRead {
    /// The call is still arriving (name and arguments as far as known).
    Pending(PartialCall),
    /// A whole call; `len` bytes consumed, its end marker included.
    Done {
        /// The call.
        call: ToolCall,
        /// The raw text of its arguments.
        arguments_text: String,
        /// Bytes consumed.
        len: usize,
    },
    /// A malformed call spanning `len` bytes.
    Bad {
        /// What was wrong.
        error: ToolParseError,
        /// Bytes the malformed call spans.
        len: usize,
    },
}

impl CallRead {
    /// The malformed call whose text is `body` (from after its begin marker) up to and
    /// including its `end` marker, or all of `body` without one ([`bad_len`]).
    pub fn bad(body: &str, end: &str, error: ToolParseError) -> Self {
        let len = bad_len(body, end);
        Self::Bad { error, len }
    }
}

/// Where the header of the call whose text is `body` ends at the latest: at the first of
/// the family's `markers` (a header missing its separator must not borrow a later call's),
/// or at the end of `body`.
pub fn header_limit(body: &str, markers: &[&str]) -> usize {
    find_first(body, markers).map_or(body.len(), |(k, _)| k)
}

/// The markers of a family whose calls sit inside a section (DeepSeek, Kimi):
/// `SECTION_BEGIN (CALL_BEGIN … CALL_END)+ SECTION_END`.
#[derive(Debug, Clone, Copy)]
pub struct Sections<'a> {
    /// Accepted spellings of the section's begin marker (the first is canonical).
    pub section_begins: &'a [&'a str],
    /// The section's end marker.
    pub section_end: &'a str,
    /// A call's begin marker (a call begun outside a section is read as well).
    pub call_begin: &'a str,
}

impl Sections<'_> {
    fn triggers(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.section_begins.to_vec();
        v.push(self.call_begin);
        v
    }

    /// The earliest section or call begin marker in `text`: (offset, length, is_section).
    fn find_begin(&self, text: &str) -> Option<(usize, usize, bool)> {
        let (k, m) = find_first(text, &self.triggers())?;
        Some((k, m.len(), m != self.call_begin))
    }
}

/// [`parse_sections`]' state just after a call read inside a section.
pub const IN_SECTION: u8 = 1;
/// [`parse_sections`]' state just after a call read outside a section.
pub const AFTER_BARE_CALL: u8 = 2;

/// The partial parse of a format whose calls sit in sections (DeepSeek, Kimi K2): with
/// `reasoning`, a leading `<think>…</think>` block (see [`split_reasoning`]), then the
/// free text and sections of the rest ([`parse_sections`]).
/// A `from` past the start restarts the parse at a point an earlier parse settled (see
/// [`crate::ToolCallFormat::parse_partial_from`]).
pub fn parse_sectioned(
    text: &str,
    from: &crate::Settled,
    reasoning: bool,
    syn: &Sections<'_>,
    at_end: bool,
    read_call: impl FnMut(&str) -> CallRead,
) -> PartialOutput {
    let mut out = PartialOutput::default();
    let Some(rest) = leading_reasoning(
        text,
        from,
        crate::driver::THINK.begin,
        crate::driver::THINK.end,
        reasoning,
        at_end,
        &mut out,
    ) else {
        return out;
    };
    let mut content = Content::resumed(from.content_open);
    let state = if from.offset > 0 { from.state } else { 0 };
    parse_sections(
        text,
        rest,
        state,
        syn,
        at_end,
        &mut out,
        &mut content,
        read_call,
    );
    out.content = content.into_string();
    out
}

/// Parses the free text and call sections of `text[start..]` into `out`/`content`.
/// `read_call` reads one call from the text after its begin marker (see [`CallRead`]).
///
/// Text inside a section that is not a call ("header noise") and the text of its
/// malformed calls go to content once a call of that section is read (the section's own
/// markers are then dropped, as for a well-formed section). When no call of a section is
/// read, the section's whole text, markers included, is content (rule 6 of the tool-call
/// format notes: a begin marker with no parsable call leaves the content unchanged); its
/// malformed calls are still reported each, and a section with no call at all is
/// reported as malformed itself. A missing section end is tolerated; text after the
/// section is content. While `!at_end`, partial markers and trailing whitespace are held
/// back so the result only grows.
///
/// `state` is where `start` lies: 0 in free text, [`IN_SECTION`] just after a call read
/// in a section, [`AFTER_BARE_CALL`] just after a call read outside one (the points this
/// parse settles, see [`crate::Settled`]).
#[allow(clippy::too_many_arguments)]
pub fn parse_sections(
    text: &str,
    start: usize,
    state: u8,
    syn: &Sections<'_>,
    at_end: bool,
    out: &mut PartialOutput,
    content: &mut Content,
    mut read_call: impl FnMut(&str) -> CallRead,
) {
    let triggers = syn.triggers();
    let inner = [syn.call_begin, syn.section_end];
    let mut pos = start;
    let mut resume = state;
    'free: loop {
        let (section_start, mut p, is_section, mut calls_here, mut read_here);
        if resume != 0 {
            // Restarted after a call this section (or bare call) read: only what follows
            // it is parsed, and that call makes the section's noise content.
            (section_start, p, is_section) = (pos, pos, resume == IN_SECTION);
            (calls_here, read_here) = (1usize, 1usize);
            resume = 0;
        } else {
            let Some((k, blen, section)) = syn.find_begin(&text[pos..]) else {
                if let Some(n) = content.push_tail(&text[pos..], &triggers, at_end) {
                    settle_open(out, content, pos + n);
                }
                return;
            };
            content.push(&text[pos..pos + k]);
            section_start = pos + k;
            is_section = section;
            p = if is_section {
                section_start + blen
            } else {
                section_start
            };
            (calls_here, read_here) = (0usize, 0usize);
        }
        // Noise and malformed calls of this section, in order: content once a call of the
        // section is read; superseded by the section's whole text if none is.
        let mut noise: Vec<(usize, usize)> = Vec::new();
        loop {
            let rest = &text[p..];
            let ws = rest.len() - rest.trim_start().len();
            let r = &rest[ws..];
            if r.starts_with(syn.call_begin) {
                let call_start = p + ws;
                let body = call_start + syn.call_begin.len();
                calls_here += 1;
                match read_call(&text[body..]) {
                    CallRead::Pending(c) => {
                        out.calls.push(c);
                        return;
                    }
                    CallRead::Done {
                        call,
                        arguments_text,
                        len,
                    } => {
                        read_here += 1;
                        for (a, b) in noise.drain(..) {
                            content.push(&text[a..b]);
                        }
                        out.calls.push(PartialCall {
                            id: call.id.clone(),
                            name: Some(call.name.clone()),
                            arguments_text,
                            complete: Some(call),
                        });
                        p = body + len;
                        settle(out, content, p);
                        if let Some(s) = &mut out.settled {
                            s.state = if is_section {
                                IN_SECTION
                            } else {
                                AFTER_BARE_CALL
                            };
                        }
                    }
                    CallRead::Bad { error, len } => {
                        let end = body + len;
                        let bad = &text[call_start..end];
                        if is_section {
                            // Reported now; its text waits in `noise` (see above).
                            push_malformed(out, &mut Content::default(), bad, call_start, error);
                            noise.push((call_start, end));
                        } else {
                            push_malformed(out, content, bad, call_start, error);
                        }
                        p = end;
                    }
                }
                continue;
            }
            // A section end cut off at the end of the output closes the section.
            let cut_off = at_end && !r.is_empty() && syn.section_end.starts_with(r);
            if r.starts_with(syn.section_end) || r.is_empty() || cut_off {
                let closed = !r.is_empty() && !cut_off;
                if !closed && !at_end {
                    return;
                }
                let end = if closed {
                    p + ws + syn.section_end.len()
                } else {
                    text.len()
                };
                if is_section && read_here == 0 && calls_here > 0 {
                    // Only malformed calls (each reported): the section stays content whole.
                    noise.clear();
                    content.push(&text[section_start..end]);
                } else if calls_here == 0 && is_section {
                    let error = if closed {
                        ToolParseError::Syntax("the tool-call section holds no call".into())
                    } else {
                        ToolParseError::Unterminated
                    };
                    push_malformed(
                        out,
                        content,
                        &text[section_start..end],
                        section_start,
                        error,
                    );
                } else {
                    for (a, b) in noise.drain(..) {
                        content.push(&text[a..b]);
                    }
                }
                pos = end;
                settle(out, content, pos);
                continue 'free;
            }
            if !at_end && inner.iter().any(|m| m.starts_with(r)) {
                return;
            }
            if !is_section {
                // A bare call (no section) followed by text: back to free text.
                pos = p;
                settle(out, content, pos);
                continue 'free;
            }
            // Noise inside the section, up to the next call or the section's end.
            let next = find_first(r, &inner);
            match next {
                Some((n, _)) => {
                    noise.push((p + ws, p + ws + n));
                    p += ws + n;
                }
                None if at_end => {
                    noise.push((p + ws, text.len()));
                    p = text.len();
                }
                None => return,
            }
        }
    }
}
