//! The streaming driver every marker-delimited family runs, and the marker scanner it
//! finds markers with.
//!
//! A family's turn is: an optional leading reasoning block, then free text in which a call
//! starts at one of the family's begin markers. The driver owns that loop: it reads the
//! reasoning ([`scan::leading_reasoning`]), keeps the text before each marker as content,
//! holds back a partial marker at the end of a chunk while the output is still arriving,
//! hands the text from each marker to the family's body codec, records what the codec read
//! (a call, a malformed call, a call still arriving) and settles the parse after every call
//! (see [`Settled`]), so a streaming parse restarts after the last finished call and stays
//! linear. A family is then a [`Family`]: its markers, its reasoning block, and a codec.
//!
//! [`Markers`] is the one multi-marker search (the `aho-corasick` crate, leftmost-first):
//! the earliest marker in a text, the first listed where two start at the same offset.

use aho_corasick::{AhoCorasick, MatchKind};

use super::scan::{self, Content};
use super::{PartialCall, PartialOutput, Settled, Tool, ToolParseError};

/// A set of markers searched for together (one pass over the text, however many markers).
#[derive(Debug, Clone)]
pub struct Markers {
    patterns: Vec<String>,
    search: AhoCorasick,
}

impl Markers {
    /// The scanner of `markers` (none empty). Never fails for markers of a family: the
    /// automaton of a few short strings is far below `aho-corasick`'s size limits.
    pub fn new<S: AsRef<str>>(markers: &[S]) -> Self {
        let patterns: Vec<String> = markers.iter().map(|m| m.as_ref().to_owned()).collect();
        let search = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("a few short markers always build");
        Self { patterns, search }
    }

    /// The earliest marker in `text`: its offset and its index in the list (the first
    /// listed where two start at the same offset).
    pub fn find(&self, text: &str) -> Option<(usize, usize)> {
        self.search
            .find(text)
            .map(|m| (m.start(), m.pattern().as_usize()))
    }

    /// The markers, in the order given.
    pub fn patterns(&self) -> Vec<&str> {
        self.patterns.iter().map(String::as_str).collect()
    }
}

/// One call of [`super::ToolCallFormat::parse_partial_from`]: the text, the settled point
/// the parse restarts at, the offered tools, and whether the output is complete.
#[derive(Clone, Copy, Debug)]
pub struct Parse<'a> {
    /// The whole text parsed.
    pub text: &'a str,
    /// Where the parse restarts.
    pub from: &'a Settled,
    /// The offered tools.
    pub tools: &'a [Tool],
    /// The output is complete.
    pub at_end: bool,
}

/// What a family's body codec made of the text from a call's begin marker on.
#[derive(Debug)]
pub enum Step {
    /// The call is still arriving (name and arguments as far as known).
    Pending(PartialCall),
    /// A whole call spanning `len` bytes from its marker (end marker included).
    Done {
        /// The call, `complete` set.
        call: PartialCall,
        /// Bytes consumed from the begin marker on.
        len: usize,
    },
    /// A malformed call spanning `len` bytes from its marker.
    Bad {
        /// What was wrong.
        error: ToolParseError,
        /// Bytes the malformed call spans.
        len: usize,
    },
    /// A malformed call whose end has not arrived yet: held back, like a partial marker.
    Held,
}

impl Step {
    /// A malformed call from its marker to the first `end` at or after `from` (markers
    /// inside the call are not markers), or to the end of the output; until that end has
    /// arrived, `waiting` (a streamed error is sent once, so its text must be final).
    pub fn bad_until(
        s: &str,
        from: usize,
        end: &str,
        at_end: bool,
        error: ToolParseError,
        waiting: Step,
    ) -> Step {
        match s[from..].find(end) {
            Some(k) => Step::Bad {
                error,
                len: from + k + end.len(),
            },
            None if at_end => Step::Bad {
                error,
                len: s.len(),
            },
            None => waiting,
        }
    }
}

/// The leading reasoning block of a family: begin and end markers; it is read when
/// [`super::FormatOptions::reasoning`] is on or the text starts with `begin`.
#[derive(Debug, Clone, Copy)]
pub struct Reasoning {
    /// The block's begin marker (`<think>`).
    pub begin: &'static str,
    /// Its end marker (`</think>`).
    pub end: &'static str,
}

impl Reasoning {
    /// The block as [`super::tags::Envelope::reasoning`] writes it: begin, end, and
    /// `after`, what the chat template writes after the block.
    pub fn written_with(&self, after: &str) -> Option<(String, String, String)> {
        Some((self.begin.into(), self.end.into(), after.into()))
    }

    /// The begin and end markers, as strings free text excludes.
    pub fn markers(&self) -> Vec<String> {
        self.markers_after(&[])
    }

    /// `others` (a family's own markers), then the begin and end markers: what free text
    /// excludes in a family with this reasoning block.
    pub fn markers_after(&self, others: &[&str]) -> Vec<String> {
        let block = [self.begin, self.end];
        others.iter().chain(&block).map(|m| m.to_string()).collect()
    }
}

/// The `<think>…</think>` block of the Qwen, Hermes and GLM families.
pub const THINK: Reasoning = Reasoning {
    begin: "<think>",
    end: "</think>",
};

/// A marker-delimited family as the driver runs it: where calls begin and the reasoning
/// block before them. The body codec is passed to [`Family::parse`].
#[derive(Debug)]
pub struct Family {
    /// The markers a call begins at (a partial one at the end of a chunk is held back).
    pub begins: Markers,
    /// The reasoning block before the free text.
    pub reasoning: Reasoning,
}

/// The driver's state in one parse, handed to a codec that writes into it directly.
pub struct Turn<'t> {
    /// The whole text parsed.
    pub text: &'t str,
    /// The output so far.
    pub out: PartialOutput,
    /// The content so far.
    pub content: Content,
    /// The output is complete.
    pub at_end: bool,
}

impl Turn<'_> {
    /// Records a codec's [`Step`] for the call whose marker is at `start`: returns where
    /// the free text goes on, or `None` where this parse stops (a call still arriving).
    pub fn record(&mut self, start: usize, step: Step) -> Option<usize> {
        match step {
            Step::Pending(call) => {
                self.out.calls.push(call);
                None
            }
            Step::Held => None,
            Step::Done { call, len } => {
                self.out.calls.push(call);
                Some(start + len)
            }
            Step::Bad { error, len } => {
                let end = start + len;
                let bad = &self.text[start..end];
                scan::push_malformed(&mut self.out, &mut self.content, bad, start, error);
                Some(end)
            }
        }
    }
}

impl Family {
    /// A family whose calls begin at `begins`, after a `reasoning` block.
    pub fn new<S: AsRef<str>>(begins: &[S], reasoning: Reasoning) -> Self {
        Self {
            begins: Markers::new(begins),
            reasoning,
        }
    }

    /// The partial parse of `text` from `from` (see
    /// [`super::ToolCallFormat::parse_partial_from`]): with `implicit_reasoning`, the text
    /// opens inside the reasoning block. `block` reads the call whose begin marker (of
    /// index `marker` in [`Family::begins`]) is at `start`, writing into the [`Turn`], and
    /// returns where free text goes on (the parse settles there) or `None` to stop.
    pub fn drive(
        &self,
        text: &str,
        from: &Settled,
        implicit_reasoning: bool,
        at_end: bool,
        block: impl FnMut(&mut Turn<'_>, usize, usize) -> Option<usize>,
    ) -> PartialOutput {
        self.drive_resumed(
            text,
            from,
            implicit_reasoning,
            at_end,
            |_, pos| Some(pos),
            block,
        )
    }

    /// [`Family::drive`] for a family that settles inside a call construct (a call array
    /// between its elements): when `from` is such a point (its [`Settled::state`] is not
    /// 0), `resume` first reads the rest of that construct from `from.offset`, writing into
    /// the [`Turn`], and returns where free text goes on (the parse settles there) or
    /// `None` to stop.
    pub fn drive_resumed(
        &self,
        text: &str,
        from: &Settled,
        implicit_reasoning: bool,
        at_end: bool,
        resume: impl FnOnce(&mut Turn<'_>, usize) -> Option<usize>,
        mut block: impl FnMut(&mut Turn<'_>, usize, usize) -> Option<usize>,
    ) -> PartialOutput {
        let mut out = PartialOutput::default();
        let r = self.reasoning;
        let Some(rest) = scan::leading_reasoning(
            text,
            from,
            r.begin,
            r.end,
            implicit_reasoning,
            at_end,
            &mut out,
        ) else {
            return out;
        };
        let mut turn = Turn {
            text,
            out,
            content: Content::resumed(from.content_open),
            at_end,
        };
        let mut pos = rest;
        if from.offset > 0 && from.state != 0 {
            match resume(&mut turn, pos) {
                Some(next) => {
                    pos = next;
                    scan::settle(&mut turn.out, &turn.content, pos);
                }
                None => {
                    turn.out.content = turn.content.into_string();
                    return turn.out;
                }
            }
        }
        loop {
            let Some((k, marker)) = self.begins.find(&text[pos..]) else {
                let holds = self.begins.patterns();
                if let Some(n) = turn.content.push_tail(&text[pos..], &holds, at_end) {
                    scan::settle_open(&mut turn.out, &turn.content, pos + n);
                }
                break;
            };
            turn.content.push(&text[pos..pos + k]);
            match block(&mut turn, pos + k, marker) {
                Some(next) => {
                    pos = next;
                    scan::settle(&mut turn.out, &turn.content, pos);
                }
                None => break,
            }
        }
        turn.out.content = turn.content.into_string();
        turn.out
    }

    /// [`Family::drive`] for a codec that reads one call at a time: `read` gets the text
    /// from the call's begin marker on, the marker's index, the tools and `at_end`.
    pub fn parse(
        &self,
        text: &str,
        from: &Settled,
        implicit_reasoning: bool,
        tools: &[Tool],
        at_end: bool,
        read: impl Fn(&str, usize, &[Tool], bool) -> Step,
    ) -> PartialOutput {
        self.drive(
            text,
            from,
            implicit_reasoning,
            at_end,
            |turn, start, marker| {
                let step = read(&turn.text[start..], marker, tools, turn.at_end);
                turn.record(start, step)
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_find_the_earliest_and_the_first_listed_on_a_tie() {
        let m = Markers::new(&["<tool_call>", "<tool", "<function="]);
        assert_eq!(m.find("ab <function=x> <tool_call>"), Some((3, 2)));
        assert_eq!(m.find("ab <tool_call>"), Some((3, 0)));
        assert_eq!(m.find("ab <toolx"), Some((3, 1)));
        assert_eq!(m.find("no marker"), None);
    }

    #[test]
    fn markers_agree_with_find_first() {
        let list = ["[TOOL_CALLS]", "[ARGS]", "<|tool_call_begin|>"];
        let m = Markers::new(&list);
        for text in ["x[ARGS]y[TOOL_CALLS]", "é<|tool_call_begin|>", "", "[TOOL"] {
            let want = scan::find_first(text, &list)
                .map(|(k, s)| (k, list.iter().position(|l| *l == s).unwrap()));
            assert_eq!(m.find(text), want, "{text:?}");
        }
    }
}
