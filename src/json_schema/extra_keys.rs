//! The keys of undeclared properties: any JSON string (every escape included) whose
//! decoded name is none of the declared ones and has none of a set of banned characters.
//! For a matcher that checks keys, the plain JSON string, checked when it ends
//! ([`Builder::key_not_in`]); otherwise built from shared rules ([`KeyRules`]) so that
//! excluding many names costs one node per name character. The key of one set of names is
//! one rule, built as one automaton (the trie of the names, the ways out of it and the rest
//! of the key, minimized together) and shared by every object with those names.

use std::collections::{BTreeMap, HashMap};

use super::{choice, lit, repeat, seq, Builder};
use crate::grammar::{CharClass, Expr, RuleId};

/// Inclusive code point ranges, sorted: a set of characters.
pub(super) type Ranges = Vec<(u32, u32)>;

/// The shared rules of undeclared keys (see [`Builder::not_in`]): made once per grammar,
/// each kept a rule (never inlined), so a key that excludes many declared names costs one
/// node per name character and per branch point, not a copy of the escape grammar there.
#[derive(Default)]
pub(crate) struct KeyRules {
    /// Per set of banned characters: the rest of a key after its first undeclared
    /// character (any characters but the banned ones, then the closing quote).
    tails: HashMap<Ranges, RuleId>,
    /// Per set of characters taken at a branch point (the next characters of the names
    /// left, and the banned ones) and banned set: one character outside it, in every
    /// spelling, then the tail.
    others: HashMap<(Ranges, Ranges), RuleId>,
    /// Per set of declared names (sorted) and banned set: the whole key
    /// ([`Builder::key_not_in_except`]).
    keys: HashMap<(Vec<String>, Ranges), RuleId>,
    /// Per set of characters taken at a branch point, all printable ASCII, with nothing
    /// banned: one character outside it, spelled as [`Builder::key_other_plain`] allows,
    /// then the tail.
    plain_others: HashMap<Ranges, RuleId>,
    /// The characters other than printable ASCII, in every spelling, then the tail (with
    /// nothing banned): the part every plain branch point shares.
    rare: Option<RuleId>,
    /// Per set of declared names (sorted): the key checked when it ends
    /// ([`Builder::key_not_in`]).
    filtered: HashMap<Vec<String>, RuleId>,
    /// Those keys with their names (see `JsonSchemaGrammar::key_filters`).
    pub(crate) filters: Vec<(RuleId, Vec<String>)>,
    /// Every rule above, to keep (see `JsonSchemaGrammar::keep`).
    pub(crate) kept: Vec<RuleId>,
}

/// Printable ASCII, `' '` to `'~'`: the characters a plain branch point of the names' trie
/// may take ([`Builder::not_in`]).
const PRINTABLE_ASCII: (u32, u32) = (0x20, 0x7E);

/// The spellings of one character ([`char_spellings`] of `cp` alone); those of an ASCII
/// character are made once per process, since every trie of declared names asks for them.
fn one_char_spellings(cp: u32) -> Option<Expr> {
    static ASCII: [std::sync::OnceLock<Option<Expr>>; 0x80] =
        [const { std::sync::OnceLock::new() }; 0x80];
    if let Some(cell) = ASCII.get(cp as usize) {
        return cell.get_or_init(|| char_spellings(&[(cp, cp)])).clone();
    }
    char_spellings(&[(cp, cp)])
}

/// The four hex digits (either case) of the printable ASCII characters not in `taken`
/// (sorted ranges): `00`, then per high digit `2`–`7` its low digits. The language of
/// [`hex_in`] over those values, written directly (at most 95 values, one branch per high
/// digit). `None` when every printable character is taken.
fn printable_hex(taken: &[(u32, u32)]) -> Option<Expr> {
    let has = |c: u32| taken.iter().any(|&(lo, hi)| lo <= c && c <= hi);
    let mut full = Vec::new();
    let mut alts = Vec::new();
    for high in 2..=7u32 {
        let lows: Vec<u32> = (0..16)
            .filter(|&low| {
                let c = high * 16 + low;
                printable(c) && !has(c)
            })
            .collect();
        if lows.len() == 16 {
            full.push(high);
        } else if !lows.is_empty() {
            alts.push(Some(seq(vec![nibbles(&[high]), nibbles(&lows)])));
        }
    }
    if !full.is_empty() {
        let any: Vec<u32> = (0..16).collect();
        alts.push(Some(seq(vec![nibbles(&full), nibbles(&any)])));
    }
    let rest = choice(alts)?;
    Some(seq(vec![nibbles(&[0]), nibbles(&[0]), rest]))
}

/// Whether code point `c` is printable ASCII.
fn printable(c: u32) -> bool {
    (PRINTABLE_ASCII.0..=PRINTABLE_ASCII.1).contains(&c)
}

impl Builder<'_> {
    /// A string key, quotes included: any JSON string whose decoded text is not in
    /// `names`. For a matcher that checks keys ([`Builder::unique_keys`]), a rule whose
    /// body is the plain JSON string (its automaton is the compiler's one string
    /// automaton), listed in [`KeyRules::filters`] with `names`: the matcher's chart drops
    /// a completion of it that decodes to one of them (`parser::key_filter`). Otherwise
    /// (a grammar for any matcher, or strings narrowed by
    /// [`JsonSchemaOptions::string_excludes`](super::JsonSchemaOptions::string_excludes)),
    /// the names' trie ([`Builder::key_not_in_except`]).
    pub(super) fn key_not_in(&mut self, names: &[String]) -> Expr {
        if !self.unique_keys || !self.opts.string_excludes.is_empty() {
            return self.key_not_in_except(names, &[]);
        }
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if let Some(&id) = self.key_rules.filtered.get(&sorted) {
            return Expr::Rule(id);
        }
        let id = self.add_rule("obj_key", super::strings::string_inline());
        self.pointers[id.index()] = "#".into();
        self.key_rules.filtered.insert(sorted.clone(), id);
        self.key_rules.filters.push((id, sorted));
        self.key_rules.kept.push(id);
        Expr::Rule(id)
    }

    /// A string key, quotes included: any JSON string (every escape included) whose decoded
    /// text is not in `names`, with no character of `banned` (sorted). A call of the
    /// shared rule of that pair of sets: the names' trie and every way out of it
    /// ([`Builder::not_in`]) are built once, as one automaton (the rules it tail-calls are
    /// built inline into it), however many objects have those names.
    pub(super) fn key_not_in_except(&mut self, names: &[String], banned: &[(u32, u32)]) -> Expr {
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let key = (sorted, banned.to_vec());
        if let Some(&id) = self.key_rules.keys.get(&key) {
            return Expr::Rule(id);
        }
        let chars: Vec<Vec<char>> = key.0.iter().map(|n| n.chars().collect()).collect();
        let all: Vec<&[char]> = chars.iter().map(|c| c.as_slice()).collect();
        let body = seq(vec![lit("\""), self.not_in(&all, 0, banned)]);
        let id = self.add_rule("obj_key", body);
        self.pointers[id.index()] = "#".into();
        self.key_rules.keys.insert(key, id);
        self.key_rules.kept.push(id);
        Expr::Rule(id)
    }

    /// The rest of a key after its first undeclared character, with no character of
    /// `banned` (sorted), as the shared rule of that set.
    pub(super) fn key_tail(&mut self, banned: &[(u32, u32)]) -> Option<RuleId> {
        if let Some(&id) = self.key_rules.tails.get(banned) {
            return Some(id);
        }
        let tail_char = if banned.is_empty() {
            super::strings::string_char()
        } else {
            char_spellings(&complement(banned))?
        };
        let id = self.add_rule(
            "obj_key_tail",
            seq(vec![repeat(tail_char, 0, None), lit("\"")]),
        );
        self.pointers[id.index()] = "#".into();
        self.key_rules.tails.insert(banned.to_vec(), id);
        self.key_rules.kept.push(id);
        Some(id)
    }

    /// One character not in `taken` (nor in `banned`), in every spelling, then the rest of
    /// the key ([`Builder::key_tail`]), as the shared rule of that pair of sets.
    pub(super) fn key_other(
        &mut self,
        taken: &[(u32, u32)],
        banned: &[(u32, u32)],
    ) -> Option<RuleId> {
        let key = (taken.to_vec(), banned.to_vec());
        if let Some(&id) = self.key_rules.others.get(&key) {
            return Some(id);
        }
        let first = char_spellings(&complement(taken))?;
        let tail = self.key_tail(banned)?;
        let id = self.add_rule("obj_key_other", seq(vec![first, Expr::Rule(tail)]));
        self.pointers[id.index()] = "#".into();
        self.key_rules.others.insert(key, id);
        self.key_rules.kept.push(id);
        Some(id)
    }

    /// One character not in `taken` (printable ASCII only, sorted), then the rest of the key
    /// (nothing banned), as the shared rule of that set: printable ASCII raw, as its
    /// two-character escape or as `\u00HH`, or any other character in every spelling (the
    /// shared [`KeyRules::rare`] rule). The same language as [`Builder::key_other`] of that
    /// set, but only the `\u` escapes of printable ASCII depend on `taken`: the escapes of
    /// every other character are one shared rule, not a hex-digit tree per branch point.
    fn key_other_plain(&mut self, taken: &[(u32, u32)]) -> Option<RuleId> {
        if let Some(&id) = self.key_rules.plain_others.get(taken) {
            return Some(id);
        }
        let tail = self.key_tail(&[])?;
        let rare = match self.key_rules.rare {
            Some(id) => id,
            None => {
                let chars = char_spellings(&[(0, 0x1F), (0x7F, 0x10FFFF)])?;
                let id = self.add_rule("obj_key_rare", seq(vec![chars, Expr::Rule(tail)]));
                self.pointers[id.index()] = "#".into();
                self.key_rules.rare = Some(id);
                self.key_rules.kept.push(id);
                id
            }
        };
        let has = |c: u32| taken.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        let mut raw = taken.to_vec();
        raw.extend([(0x22, 0x22), (0x5C, 0x5C)]);
        raw.sort_unstable();
        let raw: Vec<(u32, u32)> = complement(&raw)
            .into_iter()
            .filter(|&(lo, hi)| hi >= PRINTABLE_ASCII.0 && lo <= PRINTABLE_ASCII.1)
            .map(|(lo, hi)| (lo.max(PRINTABLE_ASCII.0), hi.min(PRINTABLE_ASCII.1)))
            .collect();
        let escaped: Vec<(u32, u32)> = [0x22u32, 0x2F, 0x5C]
            .into_iter()
            .filter(|&c| !has(c))
            .map(|c| (c, c))
            .collect();
        // `\u00HH` of printable ASCII not taken.
        let hex = printable_hex(taken);
        let class = |ranges: Vec<(u32, u32)>| {
            let empty = ranges.is_empty();
            (!empty).then_some(Expr::Class(CharClass {
                negated: false,
                ranges,
            }))
        };
        let body = choice(vec![
            class(raw).map(|c| seq(vec![c, Expr::Rule(tail)])),
            class(escaped).map(|c| seq(vec![lit("\\"), c, Expr::Rule(tail)])),
            hex.map(|h| seq(vec![lit("\\u"), h, Expr::Rule(tail)])),
            Some(Expr::Rule(rare)),
        ])?;
        let id = self.add_rule("obj_key_other", body);
        self.pointers[id.index()] = "#".into();
        self.key_rules.plain_others.insert(taken.to_vec(), id);
        self.key_rules.kept.push(id);
        Some(id)
    }

    /// Strings whose continuation from depth `d` avoids every string of `set` (all of
    /// which share the prefix consumed so far), with no character of `banned` (sorted).
    /// Names are compared decoded: each character may be written raw or escaped
    /// ([`char_spellings`]), so `"f\u006fo"` follows the path of `foo` and is excluded with
    /// it. The trie of the names is written out; what leaves it (a character no name
    /// continues with) is a call of a shared rule ([`Builder::key_other`]).
    ///
    /// At a *plain* branch point (nothing banned, and every next character of the names
    /// printable ASCII), the way out is [`Builder::key_other_plain`], which shares every
    /// spelling of a character outside printable ASCII with the other branch points.
    pub(super) fn not_in(&mut self, set: &[&[char]], d: usize, banned: &[(u32, u32)]) -> Expr {
        let mut alts = Vec::new();
        // End here, unless a name ends here.
        if !set.iter().any(|s| s.len() == d) {
            alts.push(lit("\""));
        }
        // Children.
        let mut next: BTreeMap<char, Vec<&[char]>> = BTreeMap::new();
        for s in set {
            if let Some(&c) = s.get(d) {
                next.entry(c).or_default().push(s);
            }
        }
        let plain = banned.is_empty() && next.keys().all(|&c| printable(c as u32));
        // The characters that do not start the catch-all branch below.
        let mut taken: Vec<(u32, u32)> = banned.to_vec();
        for (c, sub) in &next {
            let cp = *c as u32;
            taken.push((cp, cp));
            if banned.iter().any(|&(lo, hi)| lo <= cp && cp <= hi) {
                continue;
            }
            if let Some(spelled) = one_char_spellings(cp) {
                let rest = self.not_in(sub, d + 1, banned);
                alts.push(seq(vec![spelled, rest]));
            }
        }
        taken.sort_unstable();
        taken.dedup();
        // Any other character, then anything.
        let other = if plain {
            self.key_other_plain(&taken)
        } else {
            self.key_other(&taken, banned)
        };
        if let Some(other) = other {
            alts.push(Expr::Rule(other));
        }
        choice(alts.into_iter().map(Some).collect()).unwrap_or(Expr::Empty)
    }
}

/// The Unicode scalar values not in `ranges` (inclusive code point ranges, any order).
pub(super) fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut r = ranges.to_vec();
    r.push((0xD800, 0xDFFF));
    r.sort_unstable();
    let mut out = Vec::new();
    let mut next = 0u32;
    for (lo, hi) in r {
        if lo > next {
            out.push((next, lo - 1));
        }
        next = next.max(hi.saturating_add(1));
    }
    if next <= 0x10FFFF {
        out.push((next, 0x10FFFF));
    }
    out
}

/// The hex digits of the nibble values `ns`, in both cases.
pub(super) fn nibbles(ns: &[u32]) -> Expr {
    let mut ranges = Vec::new();
    for &n in ns {
        let c = char::from_digit(n, 16).unwrap_or('0');
        ranges.push((c as u32, c as u32));
        let up = c.to_ascii_uppercase();
        if up != c {
            ranges.push((up as u32, up as u32));
        }
    }
    Expr::Class(CharClass {
        negated: false,
        ranges,
    })
}

/// `width` hex digits (either case) whose value is in `ranges` (inclusive, sorted,
/// disjoint, below `16^width`); `None` when no value is.
pub(super) fn hex_in(ranges: &[(u32, u32)], width: u32) -> Option<Expr> {
    if ranges.is_empty() {
        return None;
    }
    if width == 0 {
        return Some(Expr::Empty);
    }
    let step = 16u32.pow(width - 1);
    let mut full = Vec::new();
    let mut alts = Vec::new();
    for n in 0..16u32 {
        let (lo, hi) = (n * step, n * step + step - 1);
        let sub: Vec<(u32, u32)> = ranges
            .iter()
            .filter(|&&(a, b)| a <= hi && b >= lo)
            .map(|&(a, b)| (a.max(lo) - lo, b.min(hi) - lo))
            .collect();
        if sub.is_empty() {
            continue;
        }
        if sub == [(0, step - 1)] {
            full.push(n);
        } else if let Some(rest) = hex_in(&sub, width - 1) {
            alts.push(Some(seq(vec![nibbles(&[n]), rest])));
        }
    }
    if !full.is_empty() {
        let mut parts = vec![nibbles(&full)];
        parts.extend((1..width).map(|_| nibbles(&(0..16).collect::<Vec<_>>())));
        alts.push(Some(seq(parts)));
    }
    choice(alts)
}

/// One character of a JSON string whose decoded value is in `allowed` (inclusive code
/// point ranges; surrogates are ignored), in every spelling RFC 8259 §7 allows: raw
/// (unless it must be escaped), a two-character escape, `\uHHHH` in either case, or an
/// escaped surrogate pair for a character past U+FFFF. Each spelling has one parse.
/// `None` when `allowed` holds no character.
pub(crate) fn char_spellings(allowed: &[(u32, u32)]) -> Option<Expr> {
    // Normalise: sorted, merged, without surrogates.
    let mut set: Vec<(u32, u32)> = complement(&complement(allowed));
    set.retain(|&(lo, hi)| lo <= hi);
    let within = |lo: u32, hi: u32| -> Vec<(u32, u32)> {
        set.iter()
            .filter(|&&(a, b)| a <= hi && b >= lo)
            .map(|&(a, b)| (a.max(lo), b.min(hi)))
            .collect()
    };
    let has = |c: u32| set.iter().any(|&(a, b)| a <= c && c <= b);
    let mut alts: Vec<Option<Expr>> = Vec::new();
    let raw: Vec<(u32, u32)> = complement(&[(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
        .into_iter()
        .flat_map(|(lo, hi)| within(lo, hi))
        .collect();
    if !raw.is_empty() {
        alts.push(Some(Expr::Class(CharClass {
            negated: false,
            ranges: raw,
        })));
    }
    for (c, e) in [
        (0x22, "\\\""),
        (0x5C, "\\\\"),
        (0x2F, "\\/"),
        (0x08, "\\b"),
        (0x0C, "\\f"),
        (0x0A, "\\n"),
        (0x0D, "\\r"),
        (0x09, "\\t"),
    ] {
        if has(c) {
            alts.push(Some(lit(e)));
        }
    }
    if let Some(h) = hex_in(&within(0, 0xFFFF), 4) {
        alts.push(Some(seq(vec![lit("\\u"), h])));
    }
    // Past U+FFFF: the pair (high, low) of `cp - 0x10000` = high's 10 bits, low's 10 bits.
    let pair = |high: (u32, u32), low: (u32, u32)| -> Option<Expr> {
        Some(seq(vec![
            lit("\\u"),
            hex_in(&[(0xD800 + high.0, 0xD800 + high.1)], 4)?,
            lit("\\u"),
            hex_in(&[(0xDC00 + low.0, 0xDC00 + low.1)], 4)?,
        ]))
    };
    for (lo, hi) in within(0x10000, 0x10FFFF) {
        let (lo, hi) = (lo - 0x10000, hi - 0x10000);
        let (hl, hh) = (lo >> 10, hi >> 10);
        if hl == hh {
            alts.push(pair((hl, hl), (lo & 0x3FF, hi & 0x3FF)));
            continue;
        }
        // The first and last high halves may be partial; those between are full.
        let first_full = lo & 0x3FF == 0;
        let last_full = hi & 0x3FF == 0x3FF;
        if !first_full {
            alts.push(pair((hl, hl), (lo & 0x3FF, 0x3FF)));
        }
        let (a, b) = (
            if first_full { hl } else { hl + 1 },
            if last_full { hh } else { hh - 1 },
        );
        if a <= b {
            alts.push(pair((a, b), (0, 0x3FF)));
        }
        if !last_full {
            alts.push(pair((hh, hh), (0, hi & 0x3FF)));
        }
    }
    choice(alts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::builtin::reference::{accepts, language};

    /// Every 4-digit hex spelling (both cases) of the code points up to U+00FF.
    fn spellings() -> Vec<(u32, String)> {
        let mut out = Vec::new();
        for cp in 0..0x100u32 {
            let lower = format!("{cp:04x}");
            let upper = format!("{cp:04X}");
            out.push((cp, format!("00{}{}", &lower[2..3], &upper[3..])));
            out.push((cp, lower.clone()));
            if upper != lower {
                out.push((cp, upper));
            }
        }
        out
    }

    #[test]
    fn printable_hex_is_hex_in_over_printable_ascii() {
        for taken in [
            vec![],
            vec![(0x61, 0x61)],
            vec![(0x22, 0x22), (0x30, 0x39), (0x7E, 0x7E)],
        ] {
            let want: Vec<u32> = (0x20..=0x7E)
                .filter(|c| !taken.iter().any(|&(lo, hi)| lo <= *c && *c <= hi))
                .collect();
            let g = language(printable_hex(&taken).expect("some values"));
            for (cp, text) in spellings() {
                assert_eq!(accepts(&g, &text), want.contains(&cp), "{taken:?}: {text}");
            }
        }
        let all: Vec<(u32, u32)> = vec![(0x20, 0x7E)];
        assert!(printable_hex(&all).is_none());
    }

    #[test]
    fn one_char_spellings_are_char_spellings() {
        for cp in [
            0u32, 0x09, 0x22, 0x2F, 0x41, 0x5C, 0x7E, 0x7F, 0xE9, 0x1F600,
        ] {
            assert_eq!(
                one_char_spellings(cp),
                char_spellings(&[(cp, cp)]),
                "{cp:#x}"
            );
        }
    }
}
