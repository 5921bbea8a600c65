//! Unique object keys: the check the matcher runs beside the grammar for grammars compiled
//! from a JSON Schema ([`GrammarCompiler::compile_json_schema`](crate::GrammarCompiler::compile_json_schema)).
//!
//! RFC 8259 §4 only says that the names of an object SHOULD be unique, and a parser that
//! keeps the last of two values hides the first from a validator: `{"a":"x","a":1}` passes
//! `{"properties":{"a":{"type":"integer"}}}` once parsed. A grammar cannot forbid a repeated
//! key whose name it does not fix (names of extra properties are unbounded), so the matcher
//! reads its own output as JSON: a stack of open containers, and per open object the keys
//! written so far, *decoded* (`"é"`, `"\u00e9"` and `"\u00E9"` are one name). A token whose
//! bytes would close a key already in its object is rejected by `accept_token` and left out
//! of the token bitmask, so the mask/accept invariant holds with the check included.
//!
//! Cost per mask: the tokens of the vocabulary that could close a key in one token with
//! more than their first quote (two `"`, or a `"` and a `\`: 281 of Llama 3.1's tokens;
//! three `"` inside a value string: 102), listed once per vocabulary in [`TokenTrie`], are
//! run through the check when the grammar allows them;
//! inside a key, one hash lookup per used key that starts with the key's text so far.
//!
//! **Closed objects.** For a closed `any_order` object of more than 8 declared names
//! (`additionalProperties: false`; see the `json_schema` module docs), the grammar offers
//! every declared name at every key, and the check narrows that to the names not yet
//! written: a key whose text so far starts no name left, or a `,` once every name is
//! written, is rejected ([`TokenRejection::KeyNotAllowed`](crate::TokenRejection::KeyNotAllowed))
//! and left out of the mask, so no state leads into a dead end. Beside a pattern `^text`
//! of undeclared keys (`patternProperties`), a key that can still start with `text` is
//! admitted as well and a `,` is never refused. The node masks stay
//! context-free: the restriction is applied here, at run time. The matcher learns which
//! object a `{` opens from the chart (the item of the object's kept rule that scanned it,
//! [`ClosedObjects::opened_at`]) when the step is accepted; an object opened by the very
//! token being checked is not narrowed within that token (a token such as `{"a":1,"a`
//! is checked for duplicates only). Cost: the tokens that could open a key (those with a
//! `"`), while the innermost object is closed and has a key written; those with a `,`
//! while some open closed object has every name written; those that close a container
//! and go on, while a closed object below the innermost one has a key written; and
//! inside a key, the tokens that spell a prefix of a written name's rest.

use std::sync::Arc;

use crate::automaton::Automaton;
use crate::grammar::OPEN_PREFIX_MARK;
use crate::mask::trie::TokenTrie;
use crate::parser::{Chart, EXT};
use crate::vocab::Vocabulary;

/// The closed objects whose keys the matcher narrows to the names not yet written, found
/// by the rule that opens each (a kept rule `"{" … "}"` of the JSON Schema compiler).
#[derive(Clone, Debug, Default)]
pub(crate) struct ClosedObjects {
    /// Per automaton rule that opens a closed object: the index of its names in `sets`.
    by_rule: rustc_hash::FxHashMap<u32, u32>,
    /// The declared names of each closed object, as UTF-8 (plain: no character of one
    /// needs an escape, so a key's bytes are its decoded name).
    sets: Vec<Vec<Box<[u8]>>>,
    /// Per closed object, the prefixes of its undeclared keys: every key that starts with
    /// one is admitted (a `patternProperties` pattern `^prefix` beside
    /// `additionalProperties: false`), none of them a declared name. Empty for most.
    open: Vec<Vec<Box<[u8]>>>,
}

impl ClosedObjects {
    /// The closed objects of `closed` (rule name, declared names, and the prefixes of
    /// undeclared keys marked with [`OPEN_PREFIX_MARK`]), resolved against the rule names
    /// of an automaton; `None` when there are none.
    pub(crate) fn resolve(rule_names: &[String], closed: &[(String, Vec<String>)]) -> Option<Self> {
        let mut out = ClosedObjects::default();
        for (rule, names) in closed {
            let Some(r) = rule_names.iter().position(|n| n == rule) else {
                continue; // unreachable from the root: pruned
            };
            out.by_rule.insert(r as u32, out.sets.len() as u32);
            let (open, declared): (Vec<&String>, Vec<&String>) =
                names.iter().partition(|n| n.starts_with(OPEN_PREFIX_MARK));
            out.sets
                .push(declared.iter().map(|n| n.as_bytes().into()).collect());
            out.open.push(
                open.iter()
                    .map(|n| n.as_bytes()[OPEN_PREFIX_MARK.len_utf8()..].into())
                    .collect(),
            );
        }
        (!out.sets.is_empty()).then_some(out)
    }

    /// The inverse of [`ClosedObjects::resolve`]: (rule name, declared names) per closed
    /// object, by rule (what a serialized grammar stores).
    pub(crate) fn to_names(&self, rule_names: &[String]) -> Vec<(String, Vec<String>)> {
        let mut rules: Vec<(&u32, &u32)> = self.by_rule.iter().collect();
        rules.sort();
        rules
            .into_iter()
            .filter_map(|(&r, &s)| {
                let rule = rule_names.get(r as usize)?.clone();
                let open = self.open[s as usize]
                    .iter()
                    .map(|p| format!("{OPEN_PREFIX_MARK}{}", String::from_utf8_lossy(p)));
                let names = self.sets[s as usize]
                    .iter()
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .chain(open)
                    .collect();
                Some((rule, names))
            })
            .collect()
    }

    /// The closed object that the `{` read between chart positions `q` and `q + 1` opens:
    /// `Some` only when every item that read it belongs to the rule of one closed object
    /// (any other parse of the `{` leaves the object unrestricted).
    pub(crate) fn opened_at(&self, aut: &Automaton, chart: &Chart, q: u32) -> Option<u32> {
        let mut found = None;
        for it in chart.set(q + 1) {
            // Items that started at q + 1 were predicted there; the others read the `{`.
            if it.origin != EXT && it.origin > q {
                continue;
            }
            match self.by_rule.get(&aut.rule_of(it.node)) {
                Some(&s) if found.map_or(true, |f| f == s) => found = Some(s),
                _ => return None,
            }
        }
        found
    }
}

/// Lexer state between two bytes of output. Only the bytes that change the container
/// structure or a key matter: the grammar guarantees the output is JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Lex {
    /// Inside a string.
    in_string: bool,
    /// The string being read is an object key.
    is_key: bool,
    /// Outside strings: the next string is an object key (after `{` or `,` in an object).
    expect_key: bool,
    /// 0: no escape; 1: after a backslash; 2..=5: inside a `\u` escape, `esc - 2` of its four hex digits read.
    esc: u8,
    /// The hex digits of a `\u` escape read so far.
    unit: u16,
    /// A high surrogate of a key (`\ud800`–`\udbff`) waiting for its low half; 0 if none.
    high: u16,
}

/// What one byte did to the structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Nothing,
    /// `{` (true) or `[` (false).
    Open(bool),
    /// `}` or `]`.
    Close,
    /// `,` outside strings: the next string is a key when the container is an object.
    Comma,
    /// The closing quote of a key; its decoded name is in the key buffer.
    KeyEnd,
}

/// Appends `unit` (a code point, or a lone surrogate) to `key` as UTF-8 (WTF-8 for lone
/// surrogates, so that they compare equal however they were written).
fn push_code_point(key: &mut Vec<u8>, cp: u32) {
    match char::from_u32(cp) {
        Some(c) => {
            let mut buf = [0u8; 4];
            key.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        None => key.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}

/// Writes out a pending high surrogate of a key (one not followed by its low half).
fn flush_high(lex: &mut Lex, key: &mut Vec<u8>) {
    if lex.high != 0 {
        push_code_point(key, lex.high as u32);
        lex.high = 0;
    }
}

/// Advances `lex` over byte `b`, appending the decoded bytes of a key to `key`.
fn step(lex: &mut Lex, key: &mut Vec<u8>, b: u8) -> Ev {
    if !lex.in_string {
        return match b {
            b'{' => {
                lex.expect_key = true;
                Ev::Open(true)
            }
            b'[' => {
                lex.expect_key = false;
                Ev::Open(false)
            }
            b'}' | b']' => {
                lex.expect_key = false;
                Ev::Close
            }
            b',' => Ev::Comma,
            b':' => {
                lex.expect_key = false;
                Ev::Nothing
            }
            b'"' => {
                lex.in_string = true;
                lex.is_key = lex.expect_key;
                lex.expect_key = false;
                if lex.is_key {
                    key.clear();
                }
                Ev::Nothing
            }
            _ => Ev::Nothing,
        };
    }
    match lex.esc {
        0 => match b {
            b'\\' => {
                lex.esc = 1;
                Ev::Nothing
            }
            b'"' => {
                lex.in_string = false;
                if lex.is_key {
                    flush_high(lex, key);
                    lex.is_key = false;
                    Ev::KeyEnd
                } else {
                    Ev::Nothing
                }
            }
            _ => {
                if lex.is_key {
                    flush_high(lex, key);
                    key.push(b);
                }
                Ev::Nothing
            }
        },
        1 => {
            if b == b'u' {
                lex.esc = 2;
                lex.unit = 0;
                return Ev::Nothing;
            }
            lex.esc = 0;
            if lex.is_key {
                flush_high(lex, key);
                key.push(match b {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'b' => 0x08,
                    b'f' => 0x0C,
                    other => other, // `"`, `\`, `/`
                });
            }
            Ev::Nothing
        }
        _ => {
            let digit = (b as char).to_digit(16).unwrap_or(0) as u16;
            lex.unit = lex.unit << 4 | digit;
            lex.esc += 1;
            if lex.esc == 6 {
                lex.esc = 0;
                if lex.is_key {
                    let u = lex.unit;
                    if lex.high != 0 && (0xDC00..0xE000).contains(&u) {
                        let cp = 0x10000 + ((lex.high as u32 - 0xD800) << 10) + (u as u32 - 0xDC00);
                        lex.high = 0;
                        push_code_point(key, cp);
                    } else {
                        flush_high(lex, key);
                        if (0xD800..0xDC00).contains(&u) {
                            lex.high = u;
                        } else {
                            push_code_point(key, u as u32);
                        }
                    }
                }
            }
            Ev::Nothing
        }
    }
}

/// An open container: an array, or an object with the decoded keys written so far and,
/// for a closed object whose names are narrowed, the index of its names.
#[derive(Clone, Debug)]
enum Frame {
    Array,
    Object(Vec<Box<[u8]>>, Option<u32>),
}

/// One change to the frames, undone by [`KeyTracker::rollback`].
#[derive(Clone, Debug)]
enum Undo {
    Pushed,
    Popped(Frame),
    Key,
}

/// The state at the start of one accepted step.
#[derive(Clone, Debug)]
struct Mark {
    lex: Lex,
    key: Vec<u8>,
    log: usize,
}

/// A key that a step would write twice in one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Duplicate {
    /// Offset, in the step's bytes, of the quote that closes the repeated key.
    pub offset: usize,
    /// The key, decoded (lossy UTF-8).
    pub key: String,
}

/// Why a step's bytes cannot be accepted by the key check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyViolation {
    /// A key written twice in one object.
    Duplicate(Duplicate),
    /// In a closed object, a key that starts no name left, or a `,` with no name left.
    NotLeft {
        /// Offset, in the step's bytes, of the byte after which nothing could follow.
        offset: usize,
        /// What was written there (see [`crate::TokenRejection::KeyNotAllowed`]).
        what: String,
    },
}

impl KeyViolation {
    /// Offset, in the step's bytes, of the byte that cannot be written.
    pub(crate) fn offset(&self) -> usize {
        match self {
            KeyViolation::Duplicate(d) => d.offset,
            KeyViolation::NotLeft { offset, .. } => *offset,
        }
    }
}

/// The keys of every open object of the output, with undo marks per accepted step.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyTracker {
    /// The closed objects whose names are narrowed (see the module docs).
    closed: Option<Arc<ClosedObjects>>,
    frames: Vec<Frame>,
    lex: Lex,
    /// The decoded key being read (inside a key string).
    key: Vec<u8>,
    log: Vec<Undo>,
    marks: Vec<Mark>,
    // Scratch space of `first_duplicate` (no allocation per call once warm).
    s_key: Vec<u8>,
    /// Containers opened by the checked bytes: `Some(first index in s_keys)` for objects.
    s_open: Vec<Option<usize>>,
    /// Keys written by the checked bytes: (frame, range in `s_arena`); a frame below
    /// `frames.len()` is a real frame, others are `s_open` entries (removed when closed).
    s_keys: Vec<(usize, usize, usize)>,
    s_arena: Vec<u8>,
}

impl KeyTracker {
    /// A tracker for a grammar whose closed objects `closed` are narrowed.
    pub(crate) fn new(closed: Option<Arc<ClosedObjects>>) -> Self {
        KeyTracker {
            closed,
            ..Default::default()
        }
    }

    /// The first key that `bytes`, written now, would repeat in its object; `None` when
    /// every key they close is new. Does not change the state.
    #[cfg(test)]
    pub(crate) fn first_duplicate(&mut self, bytes: &[u8]) -> Option<Duplicate> {
        match self.first_violation(bytes) {
            Some(KeyViolation::Duplicate(d)) => Some(d),
            _ => None,
        }
    }

    /// Whether a name of closed object `set` is left in real frame `frame` once the
    /// checked bytes' keys are counted (`prefix`: a name left must start with it).
    fn name_left(&self, set: u32, frame: usize, keys: &[Box<[u8]>], prefix: &[u8]) -> bool {
        let Some(closed) = &self.closed else {
            return true;
        };
        // An undeclared key can still start with the text so far, or go on after it.
        if closed.open[set as usize]
            .iter()
            .any(|p| p.starts_with(prefix) || prefix.starts_with(p))
        {
            return true;
        }
        let arena = &self.s_arena;
        closed.sets[set as usize].iter().any(|n| {
            n.starts_with(prefix)
                && !keys.iter().any(|k| k == n)
                && !self
                    .s_keys
                    .iter()
                    .any(|&(f, s, e)| f == frame && arena[s..e] == n[..])
        })
    }

    /// The first thing that `bytes`, written now, cannot write: a key repeated in its
    /// object, or in a narrowed closed object a key or `,` after which no name is left.
    /// `None` when there is none. Does not change the state.
    pub(crate) fn first_violation(&mut self, bytes: &[u8]) -> Option<KeyViolation> {
        let mut lex = self.lex;
        self.s_key.clear();
        self.s_key.extend_from_slice(&self.key);
        self.s_open.clear();
        self.s_keys.clear();
        self.s_arena.clear();
        // Real frames still open.
        let mut real = self.frames.len();
        for (offset, &b) in bytes.iter().enumerate() {
            let ev = step(&mut lex, &mut self.s_key, b);
            // The real frame the byte is in, when it is a narrowed closed object.
            let narrowed = match (self.s_open.is_empty(), real.checked_sub(1)) {
                (true, Some(f)) => match &self.frames[f] {
                    Frame::Object(keys, Some(set)) => Some((f, keys, *set)),
                    _ => None,
                },
                _ => None,
            };
            match ev {
                Ev::Nothing => {
                    if let Some((f, keys, set)) = narrowed {
                        let in_key = lex.in_string && lex.is_key && lex.esc == 0 && lex.high == 0;
                        if in_key && !self.name_left(set, f, keys, &self.s_key) {
                            return Some(KeyViolation::NotLeft {
                                offset,
                                what: format!("the key {:?}", String::from_utf8_lossy(&self.s_key)),
                            });
                        }
                    }
                }
                Ev::Open(object) => self.s_open.push(object.then_some(self.s_keys.len())),
                Ev::Close => {
                    if let Some(top) = self.s_open.pop() {
                        if let Some(start) = top {
                            self.s_keys.truncate(start);
                        }
                    } else {
                        real = real.saturating_sub(1);
                    }
                }
                Ev::Comma => {
                    lex.expect_key = match self.s_open.last() {
                        Some(top) => top.is_some(),
                        None => real > 0 && matches!(self.frames[real - 1], Frame::Object(..)),
                    };
                    if let Some((f, keys, set)) = narrowed {
                        if !self.name_left(set, f, keys, b"") {
                            return Some(KeyViolation::NotLeft {
                                offset,
                                what: "another key after \",\"".into(),
                            });
                        }
                    }
                }
                Ev::KeyEnd => {
                    let key = &self.s_key[..];
                    let (frame, seen) = match self.s_open.last() {
                        Some(_) => (self.frames.len() + self.s_open.len() - 1, false),
                        None if real > 0 => {
                            let seen = match &self.frames[real - 1] {
                                Frame::Object(keys, _) => keys.iter().any(|k| &k[..] == key),
                                Frame::Array => false,
                            };
                            (real - 1, seen)
                        }
                        None => continue,
                    };
                    let arena = &self.s_arena;
                    let repeated = seen
                        || self
                            .s_keys
                            .iter()
                            .any(|&(f, s, e)| f == frame && &arena[s..e] == key);
                    if repeated {
                        return Some(KeyViolation::Duplicate(Duplicate {
                            offset,
                            key: String::from_utf8_lossy(key).into_owned(),
                        }));
                    }
                    if let Some((f, keys, set)) = narrowed {
                        let declared = self.closed.as_ref().is_some_and(|c| {
                            c.sets[set as usize].iter().any(|n| &n[..] == key)
                                || c.open[set as usize].iter().any(|p| key.starts_with(p))
                        });
                        if !declared || !self.name_left(set, f, keys, key) {
                            return Some(KeyViolation::NotLeft {
                                offset,
                                what: format!("the key {:?}", String::from_utf8_lossy(key)),
                            });
                        }
                    }
                    let s = self.s_arena.len();
                    self.s_arena.extend_from_slice(&self.s_key);
                    self.s_keys.push((frame, s, self.s_arena.len()));
                }
            }
        }
        None
    }

    /// Advances over `bytes` as one accepted step (call [`KeyTracker::first_violation`]
    /// first: a repeated key is recorded again otherwise). `opened(offset)`: the closed
    /// object that the `{` at `offset` of `bytes` opens, if any
    /// ([`ClosedObjects::opened_at`]).
    pub(crate) fn accept(&mut self, bytes: &[u8], mut opened: impl FnMut(usize) -> Option<u32>) {
        self.marks.push(Mark {
            lex: self.lex,
            key: if self.lex.in_string && self.lex.is_key {
                self.key.clone()
            } else {
                Vec::new()
            },
            log: self.log.len(),
        });
        for (offset, &b) in bytes.iter().enumerate() {
            match step(&mut self.lex, &mut self.key, b) {
                Ev::Nothing => {}
                Ev::Open(object) => {
                    self.frames.push(if object {
                        let set = if self.closed.is_some() {
                            opened(offset)
                        } else {
                            None
                        };
                        Frame::Object(Vec::new(), set)
                    } else {
                        Frame::Array
                    });
                    self.log.push(Undo::Pushed);
                }
                Ev::Close => {
                    if let Some(f) = self.frames.pop() {
                        self.log.push(Undo::Popped(f));
                    }
                }
                Ev::Comma => {
                    self.lex.expect_key = matches!(self.frames.last(), Some(Frame::Object(..)));
                }
                Ev::KeyEnd => {
                    if let Some(Frame::Object(keys, _)) = self.frames.last_mut() {
                        keys.push(self.key.clone().into_boxed_slice());
                        self.log.push(Undo::Key);
                    }
                }
            }
        }
    }

    /// Undoes the last `n` steps of [`KeyTracker::accept`] (at most the steps accepted).
    pub(crate) fn rollback(&mut self, n: usize) {
        for _ in 0..n {
            let Some(mark) = self.marks.pop() else {
                return;
            };
            while self.log.len() > mark.log {
                match self.log.pop() {
                    Some(Undo::Pushed) => {
                        self.frames.pop();
                    }
                    Some(Undo::Popped(f)) => self.frames.push(f),
                    Some(Undo::Key) => {
                        if let Some(Frame::Object(keys, _)) = self.frames.last_mut() {
                            keys.pop();
                        }
                    }
                    None => {}
                }
            }
            self.lex = mark.lex;
            self.key = mark.key;
        }
    }

    /// Back to the start of the output.
    pub(crate) fn reset(&mut self) {
        self.frames.clear();
        self.lex = Lex::default();
        self.key.clear();
        self.log.clear();
        self.marks.clear();
    }

    /// The length of the longest prefix of `bytes` that the key check accepts (all of
    /// `bytes` when it accepts them): where a jump-forward string must stop.
    pub(crate) fn prefix_without_violation(&mut self, bytes: &[u8]) -> usize {
        self.first_violation(bytes)
            .map_or(bytes.len(), |v| v.offset())
    }

    /// Clears in `bitmask` the bit of every token of `list` that is set and that
    /// [`KeyTracker::first_violation`] refuses.
    fn refuse(&mut self, list: &[u32], vocab: &Vocabulary, bitmask: &mut [u32]) {
        for &id in list {
            let (w, bit) = ((id / 32) as usize, 1u32 << (id % 32));
            if bitmask[w] & bit == 0 {
                continue;
            }
            let bytes = vocab.token_bytes(id).unwrap_or(&[]);
            if self.first_violation(bytes).is_some() {
                bitmask[w] &= !bit;
            }
        }
    }

    /// The narrowing of closed objects in [`KeyTracker::filter_mask`]: runs through the
    /// check every token that could write a key or a `,` of a narrowed object.
    fn filter_closed(&mut self, trie: &TokenTrie, vocab: &Vocabulary, bitmask: &mut [u32]) {
        let Some(closed) = self.closed.clone() else {
            return;
        };
        let top = self.frames.len().wrapping_sub(1);
        let (mut full, mut top_written, mut below_written) = (false, false, false);
        for (i, f) in self.frames.iter().enumerate() {
            if let Frame::Object(keys, Some(set)) = f {
                full |= closed.open[*set as usize].is_empty()
                    && closed.sets[*set as usize]
                        .iter()
                        .all(|n| keys.iter().any(|k| k == n));
                if i == top {
                    top_written = !keys.is_empty();
                } else {
                    below_written |= !keys.is_empty();
                }
            }
        }
        if full {
            self.refuse(&trie.comma_tokens, vocab, bitmask);
        }
        if below_written {
            self.refuse(&trie.closer_tokens, vocab, bitmask);
        }
        if !top_written {
            return;
        }
        if !self.lex.in_string {
            self.refuse(&trie.quote_tokens, vocab, bitmask);
        } else if !self.lex.is_key {
            // Close the value string, then `,` and a key's opening quote.
            self.refuse(&trie.multi_quote_tokens, vocab, bitmask);
        } else {
            // Tokens with a quote are the duplicate check's (run with every key); the
            // others go on with the key: those that spell a prefix of a written name's rest
            // may leave no name to complete.
            let Some(Frame::Object(keys, _)) = self.frames.last() else {
                return;
            };
            let mut spelled: Vec<u32> = Vec::new();
            for k in keys {
                let Some(rest) = k.strip_prefix(&self.key[..]) else {
                    continue;
                };
                for l in 1..=rest.len() {
                    let want = &rest[..l];
                    let lo = trie
                        .sorted
                        .partition_point(|&id| vocab.token_bytes(id).unwrap_or(&[]) < want);
                    spelled.extend(
                        trie.sorted[lo..]
                            .iter()
                            .take_while(|&&id| vocab.token_bytes(id) == Some(want)),
                    );
                }
            }
            self.refuse(&spelled, vocab, bitmask);
        }
    }

    /// Clears, in `bitmask` (`ceil(vocab_size / 32)` words), the bit of every set token
    /// that would repeat a key or, in a narrowed closed object, leave no name to write:
    /// exactly the tokens [`KeyTracker::first_violation`] refuses.
    pub(crate) fn filter_mask(
        &mut self,
        trie: &TokenTrie,
        vocab: &Vocabulary,
        bitmask: &mut [u32],
    ) {
        let in_key = self.lex.in_string && self.lex.is_key;
        let candidates = if in_key && (self.lex.esc != 0 || self.lex.high != 0) {
            // Mid-escape, a token's first quote may close the key with any text before it.
            &trie.quote_tokens
        } else if self.lex.in_string && !in_key {
            // In a value string: a quote to close it, then a key's two.
            &trie.three_quote_tokens
        } else {
            &trie.multi_quote_tokens
        };
        self.refuse(candidates, vocab, bitmask);
        self.filter_closed(trie, vocab, bitmask);
        if !in_key || self.lex.esc != 0 || self.lex.high != 0 {
            return;
        }
        // Every other token has one quote and no backslash: it closes the key with its raw
        // bytes, so it repeats key `k` exactly when its bytes before the quote are the rest
        // of `k` (tokens listed by those bytes, once per vocabulary).
        let Some(Frame::Object(keys, _)) = self.frames.last() else {
            return;
        };
        for k in keys {
            let Some(rest) = k.strip_prefix(&self.key[..]) else {
                continue;
            };
            for &id in trie.key_closers.get(rest).map_or(&[][..], |v| &v[..]) {
                bitmask[(id / 32) as usize] &= !(1 << (id % 32));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dup(t: &mut KeyTracker, s: &str) -> Option<String> {
        t.first_duplicate(s.as_bytes()).map(|d| d.key)
    }

    #[test]
    fn repeated_keys_are_found_however_they_are_written() {
        let mut t = KeyTracker::default();
        t.accept(br#"{"a":1,"#, |_| None);
        assert_eq!(dup(&mut t, r#""a""#), Some("a".into()));
        assert_eq!(dup(&mut t, r#""\u0061""#), Some("a".into()));
        assert_eq!(dup(&mut t, r#""b""#), None);
        t.accept(br#""\u00e9":{"a":[1,{"a":2}],"#, |_| None);
        // Inside the inner object, "a" is used; "é" is a key of the outer one.
        assert_eq!(dup(&mut t, r#""a""#), Some("a".into()));
        assert_eq!(dup(&mut t, r#""é""#), None);
        assert_eq!(dup(&mut t, r#""b"},"é""#), Some("é".into()));
        assert_eq!(dup(&mut t, r#""b"},"\u00E9""#), Some("é".into()));
        assert_eq!(dup(&mut t, r#""b"},"e""#), None);
        // A value string equal to a key is no key.
        assert_eq!(dup(&mut t, r#""b":"a","c""#), None);
        // Two equal keys within one step, in an object the step opens.
        assert_eq!(dup(&mut t, r#""b":{"x":1,"x""#), Some("x".into()));
        assert_eq!(dup(&mut t, r#""b":{"x":1},"x""#), None);
    }

    #[test]
    fn surrogate_pairs_and_escapes_decode_to_one_name() {
        let mut t = KeyTracker::default();
        t.accept("{\"😀\\n\\\"\":1,".as_bytes(), |_| None);
        assert_eq!(dup(&mut t, r#""\ud83d\ude00\n\"""#), Some("😀\n\"".into()));
        assert_eq!(
            dup(&mut t, r#""\uD83D\uDE00\u000a\u0022""#),
            Some("😀\n\"".into())
        );
        // A lone high surrogate is its own name.
        t.accept(br#""\ud83d":2,"#, |_| None);
        assert_eq!(
            dup(&mut t, r#""\ud83d""#),
            Some("\u{fffd}\u{fffd}\u{fffd}".into())
        );
        assert_eq!(dup(&mut t, r#""\ud83dx""#), None);
    }

    #[test]
    fn rollback_restores_keys_and_containers() {
        let mut t = KeyTracker::default();
        t.accept(b"{\"a", |_| None);
        t.accept(b"\":[{\"q\":1}],", |_| None);
        t.accept(b"\"b\":{", |_| None);
        assert_eq!(dup(&mut t, "\"x\":1,\"x\""), Some("x".into()));
        t.rollback(2);
        // Back inside the key "a": closing it now is fine, as is writing "ab".
        assert_eq!(dup(&mut t, "\":1,\"q\""), None);
        assert_eq!(dup(&mut t, "b\":1,\"ab\""), Some("ab".into()));
        t.rollback(1);
        assert!(t.frames.is_empty());
        assert_eq!(t.lex, Lex::default());
    }
}
