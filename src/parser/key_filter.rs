//! Keys of undeclared properties, checked when they end (issue 24: compile only what the
//! first mask needs).
//!
//! An object that allows undeclared properties needs a key rule "any JSON string whose
//! decoded name is none of the declared ones" (JSON Schema: a declared name is validated
//! by its own schema, never as an extra). Written as a grammar, that rule is the trie of
//! the names in every spelling, with a way out of it at each node: an automaton of its own
//! for every set of names, which was most of a typical schema's compile. Here the rule is
//! the plain JSON string (its automaton built once per compiler and shared by every
//! grammar), and the names are checked by the Earley chart when an instance of the rule
//! *completes*: the bytes read since its origin are decoded (RFC 8259 §7: every escape,
//! surrogate pairs included) and a completion whose name is in the rule's set is dropped,
//! so that parse dies and any other (a declared member's) goes on.
//!
//! A JSON string ends at its first unescaped `"`, so whether an instance dies is fixed by
//! the bytes alone: the matcher finds the few tokens that could end a key on a name from
//! the key's bytes so far ([`KeyFilters::rests`], [`KeyFilters::closers`]) or from their
//! own ([`KeyFilters::suspect_tokens`]), and has the chart decide them
//! (`matcher::filtered`).

use rustc_hash::FxHashSet;

/// Per automaton rule, the declared names its completions must not decode to.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyFilters {
    /// Per automaton rule: the index of its names in `sets`, or `u32::MAX`.
    by_rule: Vec<u32>,
    /// Per filtered rule: the names, as UTF-8.
    sets: Vec<FxHashSet<Box<[u8]>>>,
    /// (rule name, names) as given: what a serialized grammar stores.
    named: Vec<(String, Vec<String>)>,
    /// The longest name of any set, in bytes.
    longest: usize,
    /// The tokens (ids, ascending) in which a filtered key can begin and end
    /// ([`KeyFilters::suspects`] of the vocabulary's multi-quote tokens).
    pub(crate) suspect_tokens: Vec<u32>,
    /// The vocabulary's multi-quote tokens (two `"`, or a `"` and a `\`) by the name their
    /// bytes before their first unescaped `"` decode to, read from outside an escape: the
    /// tokens that end a key with that rest of a name. Only rests of some name are kept.
    pub(crate) closers: rustc_hash::FxHashMap<Box<[u8]>, Vec<u32>>,
}

impl KeyFilters {
    /// The filters of `named` (rule name, names) resolved against an automaton's rule
    /// names; `None` when no named rule is in the automaton (pruned, or none given).
    pub(crate) fn resolve(rule_names: &[String], named: &[(String, Vec<String>)]) -> Option<Self> {
        let mut out = KeyFilters {
            by_rule: vec![u32::MAX; rule_names.len()],
            ..Default::default()
        };
        for (rule, names) in named {
            let Some(r) = rule_names.iter().position(|n| n == rule) else {
                continue;
            };
            out.by_rule[r] = out.sets.len() as u32;
            out.sets
                .push(names.iter().map(|n| n.as_bytes().into()).collect());
            out.longest = names.iter().map(String::len).fold(out.longest, usize::max);
            out.named.push((rule.clone(), names.clone()));
        }
        (!out.sets.is_empty()).then_some(out)
    }

    /// These filters with their [`KeyFilters::suspect_tokens`] in `vocab` (`trie` its
    /// token trie).
    pub(crate) fn with_suspects(
        mut self,
        trie: &crate::mask::TokenTrie,
        vocab: &crate::vocab::Vocabulary,
    ) -> Self {
        self.suspect_tokens = self.suspects(&trie.multi_quote_tokens, |t| vocab.token_bytes(t));
        let rest_of_a_name = |d: &[u8]| self.sets.iter().flatten().any(|n| n.ends_with(d));
        let mut closers: rustc_hash::FxHashMap<Box<[u8]>, Vec<u32>> = Default::default();
        for &t in &trie.multi_quote_tokens {
            let b = vocab.token_bytes(t).unwrap_or(&[]);
            let Some(end) = first_unescaped_quote(b) else {
                continue;
            };
            if let Decoded::Done(d) = decode(&b[..end]) {
                if rest_of_a_name(&d) {
                    closers.entry(d.into()).or_default().push(t);
                }
            }
        }
        self.closers = closers;
        self
    }

    /// Heap bytes held, about.
    pub(crate) fn memory_bytes(&self) -> usize {
        let names = |v: &[String]| v.iter().map(|n| n.capacity() + 24).sum::<usize>();
        self.by_rule.capacity() * 4
            + self
                .sets
                .iter()
                .flatten()
                .map(|n| n.len() + 48)
                .sum::<usize>()
            + self
                .named
                .iter()
                .map(|(r, v)| r.capacity() + 24 + names(v))
                .sum::<usize>()
            + self.suspect_tokens.capacity() * 4
            + self
                .closers
                .iter()
                .map(|(k, v)| k.len() + 48 + v.capacity() * 4)
                .sum::<usize>()
    }

    /// (rule name, names) per filtered rule, as given to [`KeyFilters::resolve`].
    pub(crate) fn named(&self) -> &[(String, Vec<String>)] {
        &self.named
    }

    /// Whether completions of automaton rule `rule` are checked.
    #[inline]
    pub(crate) fn filters(&self, rule: u32) -> bool {
        self.by_rule
            .get(rule as usize)
            .is_some_and(|&s| s != u32::MAX)
    }

    /// Whether a completion of `rule` that read `raw` (the key's bytes, quotes included)
    /// is dropped: `raw` decodes to one of the rule's names.
    #[inline]
    pub(crate) fn drops(&self, rule: u32, raw: &[u8]) -> bool {
        let Some(&s) = self.by_rule.get(rule as usize) else {
            return false;
        };
        if s == u32::MAX {
            return false;
        }
        let inner = match raw {
            [b'"', inner @ .., b'"'] => inner,
            _ => return false,
        };
        if inner.len() > 6 * self.longest {
            return false; // every character takes at most six bytes written
        }
        match decode(inner) {
            Decoded::Done(name) => self.sets[s as usize].contains(name.as_slice()),
            _ => false,
        }
    }

    /// Whether an instance of `rule` that has read `key` so far (its opening `"` and
    /// what follows) dies if token bytes `token` are read next: the string ends within
    /// `token` and decodes to one of the rule's names. `false` when the string does not end
    /// within `token`, or the bytes are no JSON string.
    pub(crate) fn kills(&self, rule: u32, key: &[u8], token: &[u8]) -> bool {
        let Some(&s) = self.by_rule.get(rule as usize) else {
            return false;
        };
        if s == u32::MAX || key.first() != Some(&b'"') {
            return false;
        }
        // The closing quote: the first `"` of `token` not escaped (scanning from the key's
        // start, so that an escape begun in `key` is seen).
        let mut escaped = false;
        let mut end = None;
        for (i, &b) in key[1..].iter().chain(token).enumerate() {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                end = Some(i);
                break;
            }
        }
        let Some(end) = end else { return false };
        if end < key.len() - 1 {
            return false; // `key` holds a closed string: not a key being written
        }
        let mut inner = key[1..].to_vec();
        inner.extend_from_slice(&token[..end + 1 - key.len()]);
        if inner.len() > 6 * self.longest {
            return false;
        }
        match decode(&inner) {
            Decoded::Done(name) => self.sets[s as usize].contains(name.as_slice()),
            _ => false,
        }
    }

    /// The rests of the rule's names that `key` (an instance's bytes so far, opening `"`
    /// included) is on the way to: per name that starts with the name decoded so far, the
    /// bytes after it. `None` when `key` ends inside an escape.
    pub(crate) fn rests<'s>(&'s self, rule: u32, key: &[u8]) -> Option<Vec<&'s [u8]>> {
        let s = *self.by_rule.get(rule as usize)?;
        if s == u32::MAX {
            return Some(Vec::new());
        }
        let inner = key.strip_prefix(b"\"").unwrap_or(key);
        match decode(inner) {
            Decoded::Done(so_far) => Some(
                self.sets[s as usize]
                    .iter()
                    .filter(|n| n.starts_with(&so_far))
                    .map(|n| &n[so_far.len()..])
                    .collect(),
            ),
            Decoded::Partial(_) => None,
            Decoded::Invalid => Some(Vec::new()),
        }
    }

    /// Whether the name decoded from `key` (an instance's bytes so far, opening `"`
    /// included) can still grow into a name of `rule`'s set: `true` also when `key` ends
    /// inside an escape. When `false`, no token read next makes the instance die.
    pub(crate) fn may_drop(&self, rule: u32, key: &[u8]) -> bool {
        let Some(&s) = self.by_rule.get(rule as usize) else {
            return false;
        };
        if s == u32::MAX || key.len() > 6 * self.longest + 1 {
            return false;
        }
        let Some(inner) = key.strip_prefix(b"\"") else {
            return false;
        };
        match decode(inner) {
            Decoded::Done(so_far) | Decoded::Partial(so_far) => {
                self.sets[s as usize].iter().any(|n| n.starts_with(&so_far))
            }
            Decoded::Invalid => false,
        }
    }

    /// The tokens (ids, ascending) of `quoted` (tokens with two `"`, or a `"` and a `\`)
    /// in which a `"` opens a JSON string that ends within the token and decodes to a name
    /// of some set: the only tokens in which a filtered key can begin and end.
    pub(crate) fn suspects<'a>(
        &self,
        quoted: &[u32],
        bytes: impl Fn(u32) -> Option<&'a [u8]>,
    ) -> Vec<u32> {
        quoted
            .iter()
            .copied()
            .filter(|&t| {
                let b = bytes(t).unwrap_or(&[]);
                // The string a `"` opens ends at its first unescaped quote after it.
                (0..b.len()).filter(|&i| b[i] == b'"').any(|i| {
                    first_unescaped_quote(&b[i + 1..])
                        .is_some_and(|n| self.any_set_holds(&b[i + 1..i + 1 + n]))
                })
            })
            .collect()
    }

    /// Whether any set holds the name `inner` decodes to (`inner`: a JSON string's
    /// bytes between its quotes).
    pub(crate) fn any_set_holds(&self, inner: &[u8]) -> bool {
        if inner.len() > 6 * self.longest {
            return false;
        }
        match decode(inner) {
            Decoded::Done(name) => self.sets.iter().any(|s| s.contains(name.as_slice())),
            _ => false,
        }
    }
}

/// The index of the first `"` of `b` not escaped by a `\\` of `b` (read from outside an
/// escape).
fn first_unescaped_quote(b: &[u8]) -> Option<usize> {
    let mut escaped = false;
    for (i, &c) in b.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if c == b'\\' {
            escaped = true;
        } else if c == b'"' {
            return Some(i);
        }
    }
    None
}

/// What [`decode`] made of a JSON string's bytes between its quotes.
#[derive(Debug, PartialEq)]
enum Decoded {
    /// The name, as UTF-8.
    Done(Vec<u8>),
    /// The bytes end inside an escape: the name up to it.
    Partial(Vec<u8>),
    /// Not the inside of a JSON string (a bad escape, an unescaped `"` or control
    /// character, a lone surrogate).
    Invalid,
}

/// Decodes the bytes between a JSON string's quotes (RFC 8259 §7).
fn decode(inner: &[u8]) -> Decoded {
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    let hex = |s: &[u8]| -> Option<u32> {
        let s = std::str::from_utf8(s).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    while i < inner.len() {
        let b = inner[i];
        if b == b'"' || b < 0x20 {
            return Decoded::Invalid;
        }
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let Some(&e) = inner.get(i + 1) else {
            return Decoded::Partial(out);
        };
        let simple = match e {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0C),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            _ => return Decoded::Invalid,
        };
        if let Some(c) = simple {
            out.push(c);
            i += 2;
            continue;
        }
        let digits = &inner[i + 2..inner.len().min(i + 6)];
        if digits.len() < 4 {
            return if digits.iter().all(u8::is_ascii_hexdigit) {
                Decoded::Partial(out)
            } else {
                Decoded::Invalid
            };
        }
        let Some(hi) = hex(digits).filter(|_| digits.iter().all(u8::is_ascii_hexdigit)) else {
            return Decoded::Invalid;
        };
        i += 6;
        let cp = if (0xD800..0xDC00).contains(&hi) {
            // A high surrogate: a low one must follow.
            let rest = &inner[i..];
            let want = [b'\\', b'u'];
            let n = rest.len().min(6);
            if n < 6 {
                let ok = rest[..n.min(2)] == want[..n.min(2)]
                    && rest[2.min(n)..n].iter().all(u8::is_ascii_hexdigit);
                return if ok {
                    Decoded::Partial(out)
                } else {
                    Decoded::Invalid
                };
            }
            if rest[..2] != want || !rest[2..6].iter().all(u8::is_ascii_hexdigit) {
                return Decoded::Invalid;
            }
            let Some(lo) = hex(&rest[2..6]).filter(|lo| (0xDC00..0xE000).contains(lo)) else {
                return Decoded::Invalid;
            };
            i += 6;
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else if (0xDC00..0xE000).contains(&hi) {
            return Decoded::Invalid;
        } else {
            hi
        };
        let Some(c) = char::from_u32(cp) else {
            return Decoded::Invalid;
        };
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    Decoded::Done(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(names: &[&str]) -> KeyFilters {
        KeyFilters::resolve(
            &["root".into(), "key".into()],
            &[("key".into(), names.iter().map(|n| n.to_string()).collect())],
        )
        .expect("resolves")
    }

    #[test]
    fn names_are_compared_decoded() {
        let f = filters(&["base", "é", "😀"]);
        assert!(f.drops(1, br#""base""#));
        assert!(f.drops(1, br#""b\u0061se""#));
        assert!(f.drops(1, br#""\u00e9""#));
        assert!(f.drops(1, br#""\u00E9""#));
        assert!(f.drops(1, br#""\ud83d\ude00""#));
        assert!(!f.drops(1, br#""bas""#));
        assert!(!f.drops(1, br#""bases""#));
        assert!(!f.drops(0, br#""base""#), "rule 0 has no filter");
        assert!(!f.drops(1, br#""\ud83d""#), "a lone surrogate is no name");
    }

    #[test]
    fn a_key_dies_where_its_string_ends() {
        let f = filters(&["base", "a\"b"]);
        assert!(f.kills(1, b"\"ba", b"se\":"));
        assert!(f.kills(1, b"\"ba", b"se\""));
        assert!(!f.kills(1, b"\"ba", b"se"), "the string goes on");
        assert!(!f.kills(1, b"\"ba", b"sex\""));
        assert!(f.kills(1, b"\"a\\", b"\"b\""), "an escape begun in the key");
        assert!(f.kills(1, b"\"", b"base\""));
        assert!(f.kills(1, b"\"b\\u00", b"61se\": 1"));
    }

    #[test]
    fn only_keys_on_the_way_to_a_name_may_drop() {
        let f = filters(&["base"]);
        assert!(f.may_drop(1, b"\""));
        assert!(f.may_drop(1, b"\"ba"));
        assert!(f.may_drop(1, b"\"b\\u00"));
        assert!(f.may_drop(1, b"\"base"));
        assert!(!f.may_drop(1, b"\"bx"));
        assert!(!f.may_drop(1, b"\"b\\q"));
    }

    #[test]
    fn suspects_open_and_close_a_name() {
        let f = filters(&["base", "id"]);
        let toks: Vec<&[u8]> = vec![
            b"\"base\"",
            b"\"id\":",
            b"\"ids\"",
            b"1,\"id\"",
            b"\"\\u0069d\"",
            b"\"b",
        ];
        let got = f.suspects(&[0, 1, 2, 3, 4, 5], |t| toks.get(t as usize).copied());
        assert_eq!(got, [0, 1, 3, 4]);
    }

    #[test]
    fn decoding_follows_rfc_8259() {
        assert_eq!(decode(br"a\n\/\\"), Decoded::Done(b"a\n/\\".to_vec()));
        assert_eq!(decode(br"a\u00"), Decoded::Partial(b"a".to_vec()));
        assert_eq!(decode(br"\ud83d\ude"), Decoded::Partial(Vec::new()));
        assert_eq!(decode(br"\ud83dx"), Decoded::Invalid);
        assert_eq!(decode(br"\x"), Decoded::Invalid);
        assert_eq!(decode(b"a\"b"), Decoded::Invalid);
    }
}
