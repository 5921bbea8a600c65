//! Free text between calls: the earliest of several markers, holding back a partial
//! marker at the end of a chunk, joining content pieces, the leading reasoning block, and
//! settling a partial parse (see [`crate::Settled`]).

#[allow(unused_imports)]
use super::*;

/// The earliest occurrence in `text` of any of `markers`: its offset and the marker (the
/// first in `markers` order where two start at the same offset). One pass that stops
/// there, where taking the least of one `find` per marker reads the whole text for each
/// marker that is absent, which made parsing many calls quadratic.
pub fn find_first<'m>(text: &str, markers: &[&'m str]) -> Option<(usize, &'m str)> {
    let b = text.as_bytes();
    (0..b.len()).find_map(|i| {
        markers
            .iter()
            .find(|m| m.as_bytes().first() == Some(&b[i]) && b[i..].starts_with(m.as_bytes()))
            .map(|m| (i, *m))
    })
}

/// How many leading bytes of `text` are safe to emit while the output is still arriving:
/// all but the longest suffix that is a proper prefix of one of `markers` (a marker that
/// may be completing), and, with `trim`, all but trailing whitespace (which a marker may
/// follow, and whitespace next to a marker is trimmed). Always a char boundary of `text`,
/// at most `text.len()`; never panics.
///
/// For a custom [`crate::ToolCallFormat::parse_partial`]: while `at_end` is false, emit
/// only `text[..stable_len(text, markers, trim)]` of the text after the last marker.
///
/// ```
/// use tokensieve_tools::stable_len;
/// assert_eq!(stable_len("Hi <too", &["<tool>"], false), 3); // `<too` may start `<tool>`
/// assert_eq!(stable_len("Hi <too", &["<tool>"], true), 2); // and the space may be trimmed
/// assert_eq!(stable_len("Hi <b", &["<tool>"], false), 5);
/// ```
pub fn stable_len(text: &str, markers: &[&str], trim: bool) -> usize {
    let mut cut = text.len();
    for m in markers {
        for k in (1..m.len().min(text.len() + 1)).rev() {
            if m.is_char_boundary(k) && text.ends_with(&m[..k]) {
                cut = cut.min(text.len() - k);
                break;
            }
        }
    }
    let mut s = &text[..cut];
    if trim {
        s = s.trim_end();
    }
    s.len()
}

/// Content assembled from the pieces between markers: each trimmed, empty ones dropped,
/// the rest joined by `\n`.
///
/// Resumed at a point settled inside a piece ([`Content::resumed`], see
/// [`crate::Settled::content_open`]), it holds exactly what follows the settled text: the
/// rest of that piece untrimmed at its start, and the joining `\n` of each later piece.
#[derive(Debug, Default)]
pub struct Content {
    text: String,
    /// The next piece continues the settled one (appended as is, trimmed at its end only).
    open: bool,
    /// Content came before the settled point (later pieces are joined to it).
    before: bool,
}

impl Content {
    /// Content resumed at a settled point; `open`: the point lies inside a piece.
    pub fn resumed(open: bool) -> Self {
        Self {
            text: String::new(),
            open,
            before: open,
        }
    }

    /// Adds a piece.
    pub fn push(&mut self, piece: &str) {
        if std::mem::take(&mut self.open) {
            self.text.push_str(piece.trim_end());
            return;
        }
        let p = piece.trim();
        if p.is_empty() {
            return;
        }
        if !self.text.is_empty() || self.before {
            self.text.push('\n');
        }
        self.text.push_str(p);
    }

    /// Adds the piece that is still arriving: its stable part only, unless `at_end`.
    /// Returns, while the output is arriving and the piece has content, how many of its
    /// bytes are settled (all but the held-back tail: see [`settle_open`]).
    pub fn push_tail(&mut self, piece: &str, markers: &[&str], at_end: bool) -> Option<usize> {
        if at_end {
            self.push(piece);
            return None;
        }
        let n = stable_len(piece, markers, true);
        if self.open {
            self.text.push_str(&piece[..n]);
            return Some(n);
        }
        let len = self.text.len();
        self.push(&piece[..n]);
        (self.text.len() > len).then_some(n)
    }

    /// The content's length so far, in bytes.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// The content.
    pub fn into_string(self) -> String {
        self.text
    }
}

/// Splits off a reasoning block: when `text` (after leading whitespace) starts with
/// `begin`, or when `implicit` (the prompt opened the block) and `end` occurs, the
/// reasoning is the text up to `end`. Returns the reasoning as far as it is stable and the
/// offset where the rest starts (`None` while the block is still open).
pub fn split_reasoning(
    text: &str,
    begin: &str,
    end: &str,
    implicit: bool,
    at_end: bool,
) -> (String, Option<usize>) {
    let lead = text.len() - text.trim_start().len();
    let body_start = if text[lead..].starts_with(begin) {
        lead + begin.len()
    } else if !at_end && begin.starts_with(&text[lead..]) && lead < text.len() {
        // `<thi` may still become `<think>`.
        return (String::new(), None);
    } else if implicit {
        0
    } else {
        return (String::new(), Some(0));
    };
    match text[body_start..].find(end) {
        Some(k) => (
            text[body_start..body_start + k].trim().to_owned(),
            Some(body_start + k + end.len()),
        ),
        None if at_end => {
            if body_start == 0 {
                // Implicit reasoning that never closed: the model never reasoned.
                (String::new(), Some(0))
            } else {
                (text[body_start..].trim().to_owned(), Some(text.len()))
            }
        }
        None => {
            if body_start == 0 {
                // Not known yet whether this is reasoning or content.
                return (String::new(), None);
            }
            let body = &text[body_start..];
            let n = stable_len(body, &[end], true);
            (body[..n].trim_start().to_owned(), None)
        }
    }
}

/// Records `offset` as the point up to which `out` is final (see [`crate::Settled`]): call
/// it only where the parse of the rest would start afresh (free text after a finished or
/// malformed call, reasoning over).
pub fn settle(out: &mut PartialOutput, content: &Content, offset: usize) {
    out.settled = Some(crate::Settled {
        offset,
        content: content.len(),
        reasoning: out.reasoning.len(),
        calls: out.calls.len(),
        errors: out.errors.len(),
        state: 0,
        anchor: 0,
        content_open: false,
        reasoning_open: false,
    });
}

/// Records `offset`, inside the piece of content still arriving, as the point up to which
/// `out` is final (see [`crate::Settled::content_open`]): `offset` is where the piece's
/// held-back tail starts (what [`Content::push_tail`] settled), so no marker can begin
/// before it. Call it only where the parse restarted there with the content open reads
/// the rest of the piece as the same text (a parse that, at `offset`, is in free text).
pub fn settle_open(out: &mut PartialOutput, content: &Content, offset: usize) {
    settle(out, content, offset);
    if let Some(s) = &mut out.settled {
        s.content_open = true;
    }
}

/// The parse from a point settled inside text that runs to the end of the output
/// ([`crate::Settled::content_open`]): the rest of `text` from `from.offset` is content,
/// its tail that may start one of `holds` held back while the output is still arriving
/// (the parse settles again before that tail).
pub fn rest_as_content(
    text: &str,
    from: &crate::Settled,
    holds: &[&str],
    at_end: bool,
) -> PartialOutput {
    let mut out = PartialOutput::default();
    let mut content = Content::resumed(true);
    if let Some(n) = content.push_tail(&text[from.offset..], holds, at_end) {
        settle_open(&mut out, &content, from.offset + n);
    }
    out.content = content.into_string();
    out
}

/// The leading reasoning block (`begin`…`end`, see [`split_reasoning`]) of `text` parsed
/// from `from`: sets `out.reasoning` and returns where the rest starts, or `None` while
/// the block is open (or not yet known to be one). In an open block it settles the parse
/// inside the reasoning, just before its held-back tail ([`crate::Settled::reasoning_open`]),
/// and a parse from such a point reads only the rest of the block. A `from` past the block
/// returns `from.offset`.
pub fn leading_reasoning(
    text: &str,
    from: &crate::Settled,
    begin: &str,
    end: &str,
    implicit: bool,
    at_end: bool,
    out: &mut PartialOutput,
) -> Option<usize> {
    let (body_start, resumed) = if from.reasoning_open {
        (from.offset, true)
    } else if from.offset > 0 {
        return Some(from.offset);
    } else {
        let (thought, rest) = split_reasoning(text, begin, end, implicit, at_end);
        out.reasoning = thought;
        if rest.is_some() || out.reasoning.is_empty() {
            return rest;
        }
        // An explicit block still open, with some reasoning: settle before its tail.
        let lead = text.len() - text.trim_start().len();
        (lead + begin.len(), false)
    };
    let body = &text[body_start..];
    match body.find(end) {
        Some(k) => {
            out.reasoning.push_str(body[..k].trim_end());
            Some(body_start + k + end.len())
        }
        None if at_end => {
            out.reasoning.push_str(body.trim_end());
            Some(text.len())
        }
        None => {
            let n = stable_len(body, &[end], true);
            if resumed {
                out.reasoning.push_str(&body[..n]);
            }
            settle(out, &Content::default(), body_start + n);
            if let Some(s) = &mut out.settled {
                s.reasoning_open = true;
            }
            None
        }
    }
}
