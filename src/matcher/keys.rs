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

use crate::mask::trie::TokenTrie;
use crate::vocab::Vocabulary;

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

/// An open container: an array, or an object with the decoded keys written so far.
#[derive(Clone, Debug)]
enum Frame {
    Array,
    Object(Vec<Box<[u8]>>),
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

/// The keys of every open object of the output, with undo marks per accepted step.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyTracker {
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
    /// The first key that `bytes`, written now, would repeat in its object; `None` when
    /// every key they close is new. Does not change the state.
    pub(crate) fn first_duplicate(&mut self, bytes: &[u8]) -> Option<Duplicate> {
        let mut lex = self.lex;
        self.s_key.clear();
        self.s_key.extend_from_slice(&self.key);
        self.s_open.clear();
        self.s_keys.clear();
        self.s_arena.clear();
        // Real frames still open.
        let mut real = self.frames.len();
        for (offset, &b) in bytes.iter().enumerate() {
            match step(&mut lex, &mut self.s_key, b) {
                Ev::Nothing => {}
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
                        None => real > 0 && matches!(self.frames[real - 1], Frame::Object(_)),
                    };
                }
                Ev::KeyEnd => {
                    let key = &self.s_key[..];
                    let (frame, seen) = match self.s_open.last() {
                        Some(_) => (self.frames.len() + self.s_open.len() - 1, false),
                        None if real > 0 => {
                            let seen = match &self.frames[real - 1] {
                                Frame::Object(keys) => keys.iter().any(|k| &k[..] == key),
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
                        return Some(Duplicate {
                            offset,
                            key: String::from_utf8_lossy(key).into_owned(),
                        });
                    }
                    let s = self.s_arena.len();
                    self.s_arena.extend_from_slice(key);
                    self.s_keys.push((frame, s, self.s_arena.len()));
                }
            }
        }
        None
    }

    /// Advances over `bytes` as one accepted step (call [`KeyTracker::first_duplicate`]
    /// first: a repeated key is recorded again otherwise).
    pub(crate) fn accept(&mut self, bytes: &[u8]) {
        self.marks.push(Mark {
            lex: self.lex,
            key: if self.lex.in_string && self.lex.is_key {
                self.key.clone()
            } else {
                Vec::new()
            },
            log: self.log.len(),
        });
        for &b in bytes {
            match step(&mut self.lex, &mut self.key, b) {
                Ev::Nothing => {}
                Ev::Open(object) => {
                    self.frames.push(if object {
                        Frame::Object(Vec::new())
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
                    self.lex.expect_key = matches!(self.frames.last(), Some(Frame::Object(_)));
                }
                Ev::KeyEnd => {
                    if let Some(Frame::Object(keys)) = self.frames.last_mut() {
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
                        if let Some(Frame::Object(keys)) = self.frames.last_mut() {
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

    /// The length of the longest prefix of `bytes` that repeats no key (all of `bytes`
    /// when none is repeated): where a jump-forward string must stop.
    pub(crate) fn prefix_without_duplicate(&mut self, bytes: &[u8]) -> usize {
        self.first_duplicate(bytes)
            .map_or(bytes.len(), |d| d.offset)
    }

    /// Clears, in `bitmask` (`ceil(vocab_size / 32)` words), the bit of every set token
    /// that would repeat a key: exactly the tokens [`KeyTracker::first_duplicate`] finds
    /// a duplicate in.
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
        for &id in candidates.iter() {
            let (w, bit) = ((id / 32) as usize, 1u32 << (id % 32));
            if bitmask[w] & bit == 0 {
                continue;
            }
            let bytes = vocab.token_bytes(id).unwrap_or(&[]);
            if self.first_duplicate(bytes).is_some() {
                bitmask[w] &= !bit;
            }
        }
        if !in_key || self.lex.esc != 0 || self.lex.high != 0 {
            return;
        }
        // Every other token has one quote and no backslash: it closes the key with its raw
        // bytes, so it repeats key `k` exactly when its bytes before the quote are the rest
        // of `k` (tokens listed by those bytes, once per vocabulary).
        let Some(Frame::Object(keys)) = self.frames.last() else {
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
        t.accept(br#"{"a":1,"#);
        assert_eq!(dup(&mut t, r#""a""#), Some("a".into()));
        assert_eq!(dup(&mut t, r#""\u0061""#), Some("a".into()));
        assert_eq!(dup(&mut t, r#""b""#), None);
        t.accept(br#""\u00e9":{"a":[1,{"a":2}],"#);
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
        t.accept("{\"😀\\n\\\"\":1,".as_bytes());
        assert_eq!(dup(&mut t, r#""\ud83d\ude00\n\"""#), Some("😀\n\"".into()));
        assert_eq!(
            dup(&mut t, r#""\uD83D\uDE00\u000a\u0022""#),
            Some("😀\n\"".into())
        );
        // A lone high surrogate is its own name.
        t.accept(br#""\ud83d":2,"#);
        assert_eq!(
            dup(&mut t, r#""\ud83d""#),
            Some("\u{fffd}\u{fffd}\u{fffd}".into())
        );
        assert_eq!(dup(&mut t, r#""\ud83dx""#), None);
    }

    #[test]
    fn rollback_restores_keys_and_containers() {
        let mut t = KeyTracker::default();
        t.accept(b"{\"a");
        t.accept(b"\":[{\"q\":1}],");
        t.accept(b"\"b\":{");
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
