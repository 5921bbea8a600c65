//! Strings: `minLength`, `maxLength` (counted in code points of the decoded value), and the
//! dispatch to `format` and `pattern`.
//!
//! One *character* of a JSON string is: a raw code point other than `"`, `\` and U+0000..U+001F;
//! a short escape (`\" \\ \/ \b \f \n \r \t`); `\uHHHH` outside the surrogates; or an
//! escaped surrogate pair `\uD8xx\uDCxx` (one code point). Escaped lone surrogates are
//! rejected (they are not Unicode text). The character expression is bytes-only, so
//! `maxLength: 524288` lowers to one counted rule.

use serde_json::{Map, Value};

use super::{child, class, lit, repeat, seq, Builder, JsonSchemaError};
use crate::grammar::avoid::Avoid;
use crate::grammar::{CharClass, Expr, RuleId};

/// The optional `any*` before and after an unanchored pattern alternative.
type Ends = (Option<Expr>, Option<Expr>);

/// The code points a JSON string never holds unescaped.
const RAW_BANNED: &[(u32, u32)] = &[
    (0, 0x1F),
    ('"' as u32, '"' as u32),
    ('\\' as u32, '\\' as u32),
];

/// A raw (unescaped) string character.
pub(crate) fn raw_char() -> Expr {
    Expr::Class(CharClass {
        negated: true,
        ranges: RAW_BANNED.to_vec(),
    })
}

fn hex() -> Expr {
    class(&[
        ('0' as u32, '9' as u32),
        ('a' as u32, 'f' as u32),
        ('A' as u32, 'F' as u32),
    ])
}

fn ch(c: char) -> (u32, u32) {
    (c as u32, c as u32)
}

/// Any JSON string, as an expression (the body of [`Builder::string_any`]'s rule). Where
/// the string ends its rule (nothing follows it there), a call of the shared rule would
/// leave every token that crosses the closing quote undecided by the call site's masks
/// (they run past the caller's end too), so such places write the string out.
pub(crate) fn string_inline() -> Expr {
    seq(vec![lit("\""), repeat(string_char(), 0, None), lit("\"")])
}

/// One character of a JSON string (one code point of the decoded value).
pub(crate) fn string_char() -> Expr {
    Expr::Choice(vec![raw_char(), string_escape()])
}

/// One escape sequence of a JSON string (one code point of the decoded value): a short
/// escape, `\uHHHH` outside the surrogates, or an escaped surrogate pair.
pub(crate) fn string_escape() -> Expr {
    let d = class(&[ch('d'), ch('D')]);
    // \uHHHH outside D800..DFFF.
    let non_surrogate = Expr::Choice(vec![
        seq(vec![
            class(&[
                ('0' as u32, '9' as u32),
                ('a' as u32, 'c' as u32),
                ('A' as u32, 'C' as u32),
                ch('e'),
                ch('E'),
                ch('f'),
                ch('F'),
            ]),
            hex(),
            hex(),
            hex(),
        ]),
        seq(vec![
            d.clone(),
            class(&[('0' as u32, '7' as u32)]),
            hex(),
            hex(),
        ]),
    ]);
    let high = seq(vec![
        d.clone(),
        class(&[
            ch('8'),
            ch('9'),
            ('a' as u32, 'b' as u32),
            ('A' as u32, 'B' as u32),
        ]),
        hex(),
        hex(),
    ]);
    let low = seq(vec![
        d,
        class(&[('c' as u32, 'f' as u32), ('C' as u32, 'F' as u32)]),
        hex(),
        hex(),
    ]);
    seq(vec![
        lit("\\"),
        Expr::Choice(vec![
            class(&[
                ch('"'),
                ch('\\'),
                ch('/'),
                ch('b'),
                ch('f'),
                ch('n'),
                ch('r'),
                ch('t'),
            ]),
            seq(vec![lit("u"), non_surrogate]),
            seq(vec![lit("u"), high, lit("\\u"), low]),
        ]),
    ])
}

/// A non-negative integer keyword value (`minLength`, `maxItems`, ...), capped at
/// `u32::MAX` for an upper bound (which only rejects more). A lower bound (`min...`)
/// above `u32::MAX` is a [`Limit::RepeatBound`](crate::Limit::RepeatBound) error naming
/// the keyword: cutting it down would accept values the schema rejects.
pub(crate) fn count_keyword(
    obj: &Map<String, Value>,
    key: &str,
    ptr: &str,
) -> Result<Option<u32>, JsonSchemaError> {
    let Some(v) = obj.get(key) else {
        return Ok(None);
    };
    let n = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    });
    match n {
        Some(n) if n > u64::from(u32::MAX) && key.starts_with("min") => Err(
            super::repeat_limit_error(u64::from(u32::MAX), n, &child(ptr, key)),
        ),
        Some(n) => Ok(Some(n.min(u32::MAX as u64) as u32)),
        None => Err(JsonSchemaError::InvalidKeyword {
            keyword: key.into(),
            pointer: child(ptr, key),
            message: format!("must be a non-negative integer, not {v}"),
        }),
    }
}

impl Builder<'_> {
    /// A [`Limit::RepeatBound`](crate::Limit::RepeatBound) error at `ptr/keyword` when a
    /// repetition `n` times (from the count keyword `keyword` of the schema at `ptr`, whose
    /// value is `value`) exceeds [`Builder::max_repeat`]: refused here, where the keyword
    /// is known, rather than when the grammar is compiled. (A larger upper bound is not
    /// read as "no bound": that would accept longer values than the schema allows.)
    pub(crate) fn check_count(
        &self,
        keyword: &str,
        n: u32,
        value: u32,
        ptr: &str,
    ) -> Result<(), JsonSchemaError> {
        if n > self.max_repeat {
            return Err(super::repeat_limit_error(
                u64::from(self.max_repeat),
                u64::from(value.max(n)),
                &child(ptr, keyword),
            ));
        }
        Ok(())
    }

    /// The content (between the quotes) of the strings whose decoded value matches the
    /// ECMA-262 regex `p` anywhere (JSON Schema `pattern`), or why not.
    /// Also returns the range of lengths (in characters) of the decoded matches, when known.
    fn pattern(&mut self, p: &str) -> Result<(Expr, Option<LenRange>), String> {
        let rust = ecma_to_rust(p)?;
        let opts = crate::regex::RegexOptions::new().unanchored(true);
        let e = crate::regex::regex_to_expr(&rust, &opts).map_err(|e| e.to_string())?;
        let range = char_len_range(&e);
        let e =
            json_escaped(&e).ok_or_else(|| "the regex grammar is not plain text".to_string())?;
        Ok((self.split_unanchored(e), range))
    }

    /// The grammar of the decoded strings (plain text, not JSON-escaped) in which the
    /// ECMA-262 regex `p` finds a match, for testing names with [`text_matches`].
    pub(crate) fn pattern_raw(&mut self, p: &str) -> Result<Expr, String> {
        let rust = ecma_to_rust(p)?;
        let opts = crate::regex::RegexOptions::new().unanchored(true);
        crate::regex::regex_to_expr(&rust, &opts).map_err(|e| e.to_string())
    }

    /// The content (between the quotes) of the strings whose decoded value matches the
    /// ECMA-262 regex `p` and has `min..=max` characters: the product of the pattern's
    /// character automaton with a length counter ([`super::key_dfa::KeyDfa::bounded`]).
    /// `Ok(None)`: no string satisfies both. `Err`: why not (the automaton or the product
    /// is too large, or the regex is not supported).
    /// Made once per `(p, min, max)` of a grammar ([`Builder::bounded_patterns`]).
    fn pattern_bounded(
        &mut self,
        p: &str,
        min: u32,
        max: Option<u32>,
    ) -> Result<Option<Expr>, String> {
        let key = (p.to_string(), min, max);
        if let Some(made) = self.bounded_patterns.get(&key) {
            return Ok(made.clone());
        }
        let made = self.pattern_product(p, min, max)?;
        self.bounded_patterns.insert(key, made.clone());
        Ok(made)
    }

    /// [`Builder::pattern_bounded`] made anew.
    fn pattern_product(
        &mut self,
        p: &str,
        min: u32,
        max: Option<u32>,
    ) -> Result<Option<Expr>, String> {
        let raw = self.pattern_raw(p)?;
        let dfa = super::key_dfa::KeyDfa::scalars(&[raw])?;
        let mut bodies: Vec<(crate::grammar::RuleId, Expr)> = Vec::new();
        let start = dfa.bounded(
            (1, 0),
            min,
            max,
            &|ranges| {
                json_escaped(&Expr::Class(CharClass {
                    negated: false,
                    ranges: ranges.to_vec(),
                }))
            },
            &mut |body| self.add_rule("pattern_len", body),
            &mut |id, b| bodies.push((id, b)),
        )?;
        for (id, b) in bodies {
            self.rules[id.index()].body = b;
        }
        Ok(start)
    }

    /// When the ECMA-262 regex `p` is a choice of branches (or one branch), each a sequence
    /// of pieces of a fixed number of characters around at most one run of one character
    /// of varying count (`^[A-Za-z0-9:_-]+$`, `^[a-z]{2,9}$`, `^([\w-]|[\w-][\w/-]*[\w-])$`,
    /// `^v[0-9]+$`), the content of its matches with `min..=max` characters: each branch's
    /// run gets the bounds its fixed pieces leave (`min - F ..= max - F`, within the run's
    /// own), a counted repetition whose masks are shared across counts, instead of
    /// [`Self::pattern_bounded`]'s product automaton (a rule per (state, count) pair: about
    /// 1,000 rules for that last-but-one pattern with `maxLength` 255). An escape is one
    /// character where the class holds it. Exact: a match's length is its fixed pieces'
    /// plus its run's. `Some(None)`: no branch has a length in bounds; `None`: `p` is not
    /// of that shape. The limit error of `minLength`/`maxLength` (at `ptr`) as for a plain
    /// string.
    fn one_run_bounded(
        &mut self,
        p: &str,
        min: u32,
        max: Option<u32>,
        ptr: &str,
    ) -> Result<Option<Option<Expr>>, JsonSchemaError> {
        let Ok(raw) = self.pattern_raw(p) else {
            return Ok(None);
        };
        let mut top = &raw;
        while let Expr::Seq(v) = top {
            match v.as_slice() {
                [one] => top = one,
                _ => break,
            }
        }
        let branches: Vec<&Expr> = match top {
            Expr::Choice(v) => v.iter().collect(),
            e => vec![e],
        };
        let mut alts = Vec::new();
        for branch in branches {
            let mut pieces: Vec<&Expr> = Vec::new();
            let mut open = vec![branch];
            // Nested sequences flattened, in order.
            while let Some(e) = open.pop() {
                match e {
                    Expr::Seq(v) => open.extend(v.iter().rev()),
                    e => pieces.push(e),
                }
            }
            let mut fixed = 0u64;
            let mut run: Option<(usize, &Expr, u32, Option<u32>)> = None;
            for (i, piece) in pieces.iter().enumerate() {
                match piece {
                    Expr::Repeat {
                        expr,
                        min: run_min,
                        max: run_max,
                    } if *run_max != Some(*run_min)
                        && char_len_range(expr) == Some((1, Some(1))) =>
                    {
                        if run.is_some() {
                            return Ok(None);
                        }
                        run = Some((i, expr.as_ref(), *run_min, *run_max));
                    }
                    piece => match char_len_range(piece) {
                        Some((lo, Some(hi))) if lo == hi => fixed = fixed.saturating_add(lo),
                        _ => return Ok(None),
                    },
                }
            }
            // The run's bounds, or `None` when no length of this branch is in bounds.
            let bounds = match run {
                None => (u64::from(min) <= fixed && max.map_or(true, |m| fixed <= u64::from(m)))
                    .then_some((0, None)),
                Some((_, _, run_min, run_max)) => {
                    let lo = u64::from(min).saturating_sub(fixed).max(u64::from(run_min));
                    let left = max.map(|m| u64::from(m).checked_sub(fixed));
                    let hi = match (left, run_max) {
                        (Some(None), _) => None,
                        (Some(Some(l)), r) => Some(Some(r.map_or(l, |r| l.min(u64::from(r))))),
                        (None, r) => Some(r.map(u64::from)),
                    };
                    // `None`: the fixed pieces alone pass `max`, or the run cannot reach `lo`.
                    match hi {
                        Some(hi) if hi.map_or(true, |h| h >= lo) => Some((lo, hi)),
                        _ => None,
                    }
                }
            };
            let Some((lo, hi)) = bounds else { continue };
            let (Ok(lo), Ok(hi)) = (u32::try_from(lo), hi.map(u32::try_from).transpose()) else {
                return Ok(None);
            };
            let mut escaped = Vec::with_capacity(pieces.len());
            for (i, piece) in pieces.iter().enumerate() {
                match run {
                    Some((at, one, ..)) if at == i => {
                        let Some(one) = json_escaped(one) else {
                            return Ok(None);
                        };
                        self.check_count("minLength", lo, min, ptr)?;
                        if let (Some(hi), Some(max)) = (hi, max) {
                            self.check_count("maxLength", hi, max, ptr)?;
                        }
                        escaped.push(super::repeat(one, lo, hi));
                    }
                    _ => match json_escaped(piece) {
                        Some(e) => escaped.push(e),
                        None => return Ok(None),
                    },
                }
            }
            alts.push(seq(escaped));
        }
        Ok(Some(match alts.len() {
            0 => None,
            1 => alts.pop(),
            _ => Some(Expr::Choice(alts)),
        }))
    }

    /// `pattern` as the content of a JSON string (between the quotes), or why not.
    pub(crate) fn pattern_content(&mut self, p: &str) -> Result<Expr, String> {
        self.pattern(p).map(|(e, _)| e)
    }

    /// Rewrites `any* X any*` alternatives (the unanchored search) as `any* R any*` with
    /// `R ::= X1 | X2 | ...` a rule: the same language, but the automaton of each rule stays
    /// small (determinising `any* (X1|...|Xn) any*` inside one rule can blow up).
    fn split_unanchored(&mut self, e: Expr) -> Expr {
        let is_star = |x: &Expr| {
            matches!(
                x,
                Expr::Repeat {
                    min: 0,
                    max: None,
                    ..
                }
            )
        };
        let alts = match e {
            Expr::Choice(v) => v,
            other => vec![other],
        };
        let mut others = Vec::new();
        let mut groups: Vec<(Ends, Vec<Expr>)> = Vec::new();
        for alt in alts {
            let Expr::Seq(mut v) = alt else {
                others.push(alt);
                continue;
            };
            if v.len() < 2 || !(is_star(&v[0]) || is_star(&v[v.len() - 1])) {
                others.push(Expr::Seq(v));
                continue;
            }
            let suf = if is_star(&v[v.len() - 1]) {
                v.pop()
            } else {
                None
            };
            let pre = if is_star(&v[0]) {
                Some(v.remove(0))
            } else {
                None
            };
            let middle = seq(v);
            let key = (pre, suf);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, ms)) => ms.push(middle),
                None => groups.push((key, vec![middle])),
            }
        }
        for ((pre, suf), middles) in groups {
            let body = if middles.len() == 1 {
                middles.into_iter().next().unwrap_or(Expr::Empty)
            } else {
                Expr::Choice(middles)
            };
            let r = Expr::Rule(self.add_rule("pattern", body));
            others.push(seq(vec![
                pre.unwrap_or(Expr::Empty),
                r,
                suf.unwrap_or(Expr::Empty),
            ]));
        }
        if others.len() == 1 {
            others.pop().unwrap_or(Expr::Empty)
        } else {
            Expr::Choice(others)
        }
    }

    /// Any JSON string: a call of one rule per grammar (`json_string`, made on first use).
    /// Every plain string value and free key calls it, and the grammar is compiled with it
    /// kept a rule (`JsonSchemaGrammar::keep`): its loop's masks do not depend on where it
    /// is called, so they are walked once per grammar and shared across grammars; only
    /// tokens that cross the closing quote are decided per call site.
    pub(crate) fn string_any(&mut self) -> Expr {
        let id = match self.string_rule {
            Some(id) => id,
            None if self.external_strings => {
                let id = self.add_rule("json_string", Expr::Empty);
                self.pointers[id.index()] = "#".into();
                self.string_rule = Some(id);
                id
            }
            None => {
                let body = match Avoid::new(&self.opts.string_excludes, RAW_BANNED) {
                    None => string_inline(),
                    Some(avoid) => self.string_avoiding(&avoid),
                };
                let id = self.add_rule("json_string", body);
                // Shared by every schema that uses it: its place is the document's.
                self.pointers[id.index()] = "#".into();
                self.string_rule = Some(id);
                id
            }
        };
        Expr::Rule(id)
    }

    /// `"` then the string body that holds none of `avoid`'s strings as written (an escape
    /// sequence restarts the match), then `"`: one rule per live state, all tail calls.
    fn string_avoiding(&mut self, avoid: &Avoid) -> Expr {
        let ids: Vec<RuleId> = (0..avoid.len())
            .map(|_| {
                let id = self.add_rule("json_string_body", Expr::Empty);
                self.pointers[id.index()] = "#".into();
                id
            })
            .collect();
        let bodies = avoid.bodies(&ids, &lit("\""), &[string_escape()]);
        for (id, body) in ids.iter().zip(bodies) {
            self.rules[id.index()].body = body;
        }
        seq(vec![lit("\""), Expr::Rule(ids[0])])
    }

    /// The strings `obj` accepts, or `None`.
    pub(crate) fn string(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Expr>, JsonSchemaError> {
        let min = count_keyword(obj, "minLength", ptr)?.unwrap_or(0);
        let max = count_keyword(obj, "maxLength", ptr)?;
        if let Some(max) = max {
            if min > max {
                return Err(JsonSchemaError::Unsatisfiable {
                    pointer: child(ptr, "minLength"),
                    reason: format!("minLength {min} > maxLength {max}"),
                });
            }
        }
        let bounded = min > 0 || max.is_some();
        if let Some(p) = obj.get("pattern") {
            let pptr = child(ptr, "pattern");
            if obj.contains_key("format") {
                self.unsupported(
                    "pattern",
                    &pptr,
                    "`pattern` together with `format` is not supported",
                )?;
            } else {
                let Value::String(p) = p else {
                    return Err(JsonSchemaError::InvalidKeyword {
                        keyword: "pattern".into(),
                        pointer: pptr,
                        message: "must be a string".into(),
                    });
                };
                match self.pattern(p) {
                    Ok((e, range)) => match lengths_vs(range, min, max) {
                        Lengths::Implied => return Ok(Some(seq(vec![lit("\""), e, lit("\"")]))),
                        Lengths::Disjoint => return Ok(None),
                        Lengths::Unknown => {
                            let bounded = match self.one_run_bounded(p, min, max, ptr)? {
                                Some(runs) => Ok(runs),
                                None => self.pattern_bounded(p, min, max),
                            };
                            match bounded {
                                Ok(Some(e)) => return Ok(Some(seq(vec![lit("\""), e, lit("\"")]))),
                                Ok(None) => return Ok(None),
                                Err(why) => self.unsupported(
                                    "pattern",
                                    &pptr,
                                    &format!(
                                        "`pattern` together with `minLength`/`maxLength` that its \
                                         matches do not always satisfy: {why}"
                                    ),
                                )?,
                            }
                        }
                    },
                    Err(reason) => self.unsupported("pattern", &pptr, &reason)?,
                }
            }
        }
        if let Some(f) = obj.get("format") {
            if let Some(e) = self.format(f, &child(ptr, "format"))? {
                match lengths_vs(if bounded { char_len_range(&e) } else { None }, min, max) {
                    _ if !bounded => {}
                    Lengths::Implied => {}
                    Lengths::Disjoint => return Ok(None),
                    Lengths::Unknown => {
                        return Err(JsonSchemaError::Unsupported {
                            keyword: "format".into(),
                            pointer: child(ptr, "format"),
                            reason: "`format` together with `minLength`/`maxLength` that its \
                                     strings do not always satisfy is not supported"
                                .into(),
                        })
                    }
                }
                // Formats are grammars of decoded text (`regex` has backslashes).
                let e = self
                    .escaped_format(f, &e)
                    .ok_or_else(|| JsonSchemaError::Unsupported {
                        keyword: "format".into(),
                        pointer: child(ptr, "format"),
                        reason: "the format's grammar is not plain text".into(),
                    })?;
                return Ok(Some(seq(vec![lit("\""), e, lit("\"")])));
            }
        }
        if !bounded {
            return Ok(Some(self.string_any()));
        }
        self.check_count("minLength", min, min, ptr)?;
        if let Some(max) = max {
            self.check_count("maxLength", max, max, ptr)?;
        }
        Ok(Some(seq(vec![
            lit("\""),
            repeat(string_char(), min, max),
            lit("\""),
        ])))
    }
}

/// Keywords of a string schema that [`raw_string_grammar`] enforces on raw text.
pub(crate) const RAW_STRING_KEYWORDS: &[&str] = &["minLength", "maxLength", "pattern", "format"];

/// The raw text (the decoded value itself, written without escapes) of the strings that
/// the string schema `obj` accepts under its `minLength`/`maxLength` (counted in
/// characters of the raw text), `pattern` (an ECMA-262 regex searched in the raw text) and
/// `format`, none of which contains `avoid` (the closing tag of an XML-like tool-call
/// value; may be empty). Other keywords of `obj` are not read. `ptr` is `obj`'s JSON
/// pointer, for errors.
///
/// The grammar is the product of the keywords' automata (each a language over decoded
/// text, the same expressions as [`Builder::string`] escapes for JSON: `pattern` and
/// `format` may be combined here) with the automaton of "contains `avoid`" and a length
/// counter: one rule per live (state, count) pair, so every prefix it allows can still be
/// completed.
///
/// `Ok(None)`: no text satisfies them all (the value is unsatisfiable).
///
/// # Errors
/// [`JsonSchemaError::InvalidKeyword`] for a malformed keyword value;
/// [`JsonSchemaError::Unsatisfiable`] for `minLength` above `maxLength`;
/// [`JsonSchemaError::Unsupported`] naming the keyword (`pattern`, `format`, else
/// `maxLength`/`minLength`) for a regex or format that is not supported, or when the
/// automaton exceeds its size limits (about 6000 (state, count) pairs: long length bounds
/// on text that must avoid `avoid`). In lenient `opts`, an unknown `format` is ignored.
pub(crate) fn raw_string_grammar(
    obj: &Map<String, Value>,
    ptr: &str,
    avoid: &str,
    opts: &super::JsonSchemaOptions,
) -> Result<Option<crate::grammar::Grammar>, JsonSchemaError> {
    let min = count_keyword(obj, "minLength", ptr)?.unwrap_or(0);
    let max = count_keyword(obj, "maxLength", ptr)?;
    if max.is_some_and(|max| min > max) {
        return Err(JsonSchemaError::Unsatisfiable {
            pointer: child(ptr, "minLength"),
            reason: format!("minLength {min} > maxLength {}", max.unwrap_or(0)),
        });
    }
    let root = Value::Null;
    let mut b = Builder::new(&root, opts.clone());
    let mut langs = Vec::new();
    let mut blame = if max.is_some() {
        "maxLength"
    } else {
        "minLength"
    };
    let unsupported = |keyword: &str, reason: String| JsonSchemaError::Unsupported {
        keyword: keyword.into(),
        pointer: child(ptr, keyword),
        reason,
    };
    if let Some(p) = obj.get("pattern") {
        let Value::String(p) = p else {
            return Err(JsonSchemaError::InvalidKeyword {
                keyword: "pattern".into(),
                pointer: child(ptr, "pattern"),
                message: "must be a string".into(),
            });
        };
        langs.push(
            b.pattern_raw(p)
                .map_err(|why| unsupported("pattern", why))?,
        );
        blame = "pattern";
    }
    if let Some(f) = obj.get("format") {
        if let Some(e) = b.format(f, &child(ptr, "format"))? {
            langs.push(e);
            blame = "format";
        }
    }
    let any = || repeat(super::class(&[(0, 0x10FFFF)]), 0, None);
    if langs.is_empty() {
        langs.push(any());
    }
    let want = (1u64 << langs.len()) - 1;
    let mut forbid = 0;
    if !avoid.is_empty() {
        forbid = 1u64 << langs.len();
        langs.push(seq(vec![any(), lit(avoid), any()]));
    }
    let too_large = |why: String| {
        unsupported(
            blame,
            format!(
                "the raw text's automaton (the keywords and never `{avoid}`) is too large: {why}"
            ),
        )
    };
    let dfa = super::key_dfa::KeyDfa::scalars(&langs).map_err(too_large)?;
    let start = b.add_rule("raw", Expr::Empty);
    let mut bodies: Vec<(crate::grammar::RuleId, Expr)> = Vec::new();
    let first = dfa
        .bounded(
            (want, forbid),
            min,
            max,
            &|ranges| {
                Some(Expr::Class(CharClass {
                    negated: false,
                    ranges: ranges.to_vec(),
                }))
            },
            &mut |body| b.add_rule("raw", body),
            &mut |id, body| bodies.push((id, body)),
        )
        .map_err(too_large)?;
    let Some(first) = first else {
        return Ok(None);
    };
    for (id, body) in bodies {
        b.rules[id.index()].body = body;
    }
    b.rules[start.index()].body = first;
    Ok(Some(crate::grammar::Grammar {
        rules: b.rules,
        root: start,
    }))
}

/// Whether the raw text `text` satisfies the `minLength`/`maxLength`/`pattern`/`format`
/// of the string schema `obj` (as [`raw_string_grammar`] reads them): for the
/// `enum`/`const` strings of a raw string value. `ptr` is `obj`'s JSON pointer.
///
/// # Errors
/// As [`raw_string_grammar`], and [`JsonSchemaError::Unsupported`] for a `pattern` or
/// `format` whose grammar cannot be tested against a text.
pub(crate) fn raw_string_admits(
    obj: &Map<String, Value>,
    ptr: &str,
    text: &str,
    opts: &super::JsonSchemaOptions,
) -> Result<bool, JsonSchemaError> {
    let len = text.chars().count() as u64;
    let min = count_keyword(obj, "minLength", ptr)?.unwrap_or(0);
    let max = count_keyword(obj, "maxLength", ptr)?;
    if len < u64::from(min) || max.is_some_and(|m| len > u64::from(m)) {
        return Ok(false);
    }
    let root = Value::Null;
    let mut b = Builder::new(&root, opts.clone());
    let untestable = |keyword: &str| JsonSchemaError::Unsupported {
        keyword: keyword.into(),
        pointer: child(ptr, keyword),
        reason: "its grammar cannot be tested against the enum's strings".into(),
    };
    if let Some(p) = obj.get("pattern") {
        let e = match p {
            Value::String(p) => b
                .pattern_raw(p)
                .map_err(|why| JsonSchemaError::Unsupported {
                    keyword: "pattern".into(),
                    pointer: child(ptr, "pattern"),
                    reason: why,
                })?,
            _ => {
                return Err(JsonSchemaError::InvalidKeyword {
                    keyword: "pattern".into(),
                    pointer: child(ptr, "pattern"),
                    message: "must be a string".into(),
                })
            }
        };
        if !text_matches(&e, text).ok_or_else(|| untestable("pattern"))? {
            return Ok(false);
        }
    }
    if let Some(f) = obj.get("format") {
        if let Some(e) = b.format(f, &child(ptr, "format"))? {
            if !text_matches(&e, text).ok_or_else(|| untestable("format"))? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The shortest and longest (`None`: unbounded) match of a grammar over decoded text, in
/// characters.
pub(crate) type LenRange = (u64, Option<u64>);

/// The [`LenRange`] of `e` (a grammar of plain text: literals, classes, sequences, choices,
/// repeats); `None` when `e` refers to rules or tokens.
pub(crate) fn char_len_range(e: &Expr) -> Option<LenRange> {
    let add = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
    Some(match e {
        Expr::Empty => (0, Some(0)),
        Expr::Bytes(b) => {
            let n = std::str::from_utf8(b).ok()?.chars().count() as u64;
            (n, Some(n))
        }
        Expr::Class(_) => (1, Some(1)),
        Expr::Seq(v) => {
            let mut acc = (0u64, Some(0u64));
            for x in v {
                let (lo, hi) = char_len_range(x)?;
                acc = (acc.0.saturating_add(lo), add(acc.1, hi));
            }
            acc
        }
        Expr::Choice(v) => {
            let mut acc: Option<LenRange> = None;
            for x in v {
                let (lo, hi) = char_len_range(x)?;
                acc = Some(match acc {
                    None => (lo, hi),
                    Some((a, b)) => (a.min(lo), b.zip(hi).map(|(p, q)| p.max(q))),
                });
            }
            acc.unwrap_or((0, Some(0)))
        }
        Expr::Repeat { expr, min, max } => {
            let (lo, hi) = char_len_range(expr)?;
            let top = match (hi, max) {
                (Some(0), _) => Some(0),
                (Some(h), Some(m)) => Some(h.saturating_mul(*m as u64)),
                _ => None,
            };
            (lo.saturating_mul(*min as u64), top)
        }
        Expr::Rule(_) | Expr::Token(_) => return None,
    })
}

/// How a grammar's match lengths relate to `minLength`/`maxLength`.
enum Lengths {
    /// Every match satisfies the bounds (they can be dropped).
    Implied,
    /// No match does (nothing is accepted).
    Disjoint,
    /// Some do and some may not: no exact grammar here.
    Unknown,
}

fn lengths_vs(range: Option<LenRange>, min: u32, max: Option<u32>) -> Lengths {
    let (min, max) = (min as u64, max.map(|m| m as u64));
    let Some((lo, hi)) = range else {
        return if min == 0 && max.is_none() {
            Lengths::Implied
        } else {
            Lengths::Unknown
        };
    };
    let hi_ok = match (hi, max) {
        (_, None) => true,
        (Some(h), Some(m)) => h <= m,
        (None, Some(_)) => false,
    };
    if lo >= min && hi_ok {
        return Lengths::Implied;
    }
    if max.is_some_and(|m| lo > m) || hi.is_some_and(|h| h < min) {
        return Lengths::Disjoint;
    }
    Lengths::Unknown
}

/// Rewrites an ECMA-262 `pattern` into the Rust regex syntax with the same meaning over
/// code points: `\d`, `\w`, `\s` and `.` get their ECMAScript (ASCII / ECMA white space)
/// classes. Constructs whose meaning differs between the two dialects are refused.
pub(crate) fn ecma_to_rust(pattern: &str) -> Result<String, String> {
    const S: &str = crate::regex::ECMASCRIPT_SPACE;
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let Some(&e) = chars.get(i + 1) else {
                    return Err("a trailing backslash".into());
                };
                let sub: Option<&str> = match (e, in_class) {
                    ('d', false) => Some("[0-9]"),
                    ('d', true) => Some("0-9"),
                    ('D', _) => Some("[^0-9]"),
                    ('w', false) => Some("[0-9A-Za-z_]"),
                    ('w', true) => Some("0-9A-Za-z_"),
                    ('W', _) => Some("[^0-9A-Za-z_]"),
                    ('s', _) | ('S', _) => None,
                    _ => None,
                };
                if let Some(s) = sub {
                    out.push_str(s);
                } else if e == 's' || e == 'S' {
                    let neg = if e == 'S' { "^" } else { "" };
                    if in_class && e == 's' {
                        out.push_str(S);
                    } else {
                        out.push('[');
                        out.push_str(neg);
                        out.push_str(S);
                        out.push(']');
                    }
                } else if e.is_ascii_alphabetic()
                    && !matches!(e, 't' | 'n' | 'r' | 'f' | 'v' | 'x' | 'u')
                {
                    return Err(format!(
                        "the escape \\{e} differs between ECMAScript and Rust regexes"
                    ));
                } else if e == 'u' || e == 'x' {
                    // ECMAScript (without the `u` flag): `\uHHHH` and `\xXX` exactly;
                    // Rust's braced forms mean something else there.
                    let n = if e == 'u' { 4 } else { 2 };
                    let hex: String = chars.iter().skip(i + 2).take(n).collect();
                    if hex.len() != n || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                        return Err(format!(
                            "the escape \\{e} must be followed by {n} hex digits"
                        ));
                    }
                    out.push('\\');
                    out.push(e);
                    out.push_str(&hex);
                    i += 2 + n;
                    continue;
                } else if e.is_ascii_digit() {
                    return Err(format!(
                        "the escape \\{e} (a backreference or octal escape)"
                    ));
                } else {
                    out.push('\\');
                    out.push(e);
                }
                i += 2;
                continue;
            }
            '[' if in_class => {
                return Err("`[` inside a character class (a nested class in Rust)".into());
            }
            '[' => {
                in_class = true;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    return Err("an empty class `[]` or `[^]`".into());
                }
                continue;
            }
            ']' if in_class => in_class = false,
            '&' | '-' | '~' if in_class && chars.get(i + 1) == Some(&c) => {
                return Err(format!("`{c}{c}` inside a class (a set operation in Rust)"));
            }
            ':' if in_class && i > 0 && chars[i - 1] == '[' => {
                return Err("a POSIX class `[:...:]`".into());
            }
            '.' if !in_class => {
                out.push_str(r"[^\n\r\x{2028}\x{2029}]");
                i += 1;
                continue;
            }
            '(' if !in_class && chars.get(i + 1) == Some(&'?') => {
                let ok = matches!(chars.get(i + 2), Some(':' | '=' | '!'))
                    || (chars.get(i + 2) == Some(&'<')
                        && chars
                            .get(i + 3)
                            .is_some_and(|c| c.is_alphabetic() || *c == '=' || *c == '!'));
                if !ok {
                    return Err("inline flags or other `(?` groups ECMAScript lacks".into());
                }
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    if in_class {
        return Err("an unclosed character class".into());
    }
    Ok(out)
}

/// The JSON spelling of a grammar over decoded text: every character that must be escaped
/// inside a JSON string (`"`, `\`, U+0000..U+001F) is written as its escape; every other one
/// raw. The decoded value of any match is a match of `e`.
pub(crate) fn json_escaped(e: &Expr) -> Option<Expr> {
    Some(match e {
        Expr::Empty => Expr::Empty,
        Expr::Bytes(b) => {
            let s = std::str::from_utf8(b).ok()?;
            let quoted = Value::String(s.to_string()).to_string();
            lit(&quoted[1..quoted.len() - 1])
        }
        Expr::Class(c) => {
            let ranges = c.normalized();
            let mut alts = Vec::new();
            let plain: Vec<(u32, u32)> = ranges.clone();
            alts.push(Expr::Class(CharClass {
                negated: false,
                ranges: plain,
            }));
            // Remove the characters that need escapes from the plain class...
            let Expr::Class(pc) = &mut alts[0] else {
                return None;
            };
            let mut kept = Vec::new();
            for &(lo, hi) in &pc.ranges {
                let mut lo = lo;
                // Split out 0x00..0x1F, '"' (0x22) and '\' (0x5C).
                for (flo, fhi) in [(0u32, 0x1Fu32), (0x22, 0x22), (0x5C, 0x5C)] {
                    if hi < flo || lo > fhi {
                        continue;
                    }
                    if lo < flo {
                        kept.push((lo, flo - 1));
                    }
                    lo = lo.max(fhi + 1);
                }
                if lo <= hi {
                    kept.push((lo, hi));
                }
            }
            let no_plain = kept.is_empty();
            pc.ranges = kept;
            if no_plain {
                alts.clear();
            }
            // ...and add them back as escapes.
            for &(lo, hi) in &ranges {
                for cp in lo..=hi.min(0x5C) {
                    if cp < 0x20 || cp == 0x22 || cp == 0x5C {
                        let s = char::from_u32(cp)?.to_string();
                        let quoted = Value::String(s).to_string();
                        alts.push(lit(&quoted[1..quoted.len() - 1]));
                    }
                }
            }
            match alts.len() {
                0 => super::never(),
                1 => alts.pop()?,
                _ => Expr::Choice(alts),
            }
        }
        Expr::Seq(v) => Expr::Seq(v.iter().map(json_escaped).collect::<Option<_>>()?),
        Expr::Choice(v) => Expr::Choice(v.iter().map(json_escaped).collect::<Option<_>>()?),
        Expr::Repeat { expr, min, max } => Expr::Repeat {
            expr: Box::new(json_escaped(expr)?),
            min: *min,
            max: *max,
        },
        Expr::Rule(_) | Expr::Token(_) => return None,
    })
}

/// Whether the plain-text grammar `e` (no rules or tokens) matches all of `text`; `None`
/// when `e` is not plain text. Runs the set of positions reached, so it is exact for any
/// regex grammar (cost: length of `text` times the size of `e`, per repetition step).
pub(crate) fn text_matches(e: &Expr, text: &str) -> Option<bool> {
    let chars: Vec<char> = text.chars().collect();
    let start = std::collections::BTreeSet::from([0usize]);
    Some(ends(e, &chars, &start)?.contains(&chars.len()))
}

/// The positions where `e` can end when it starts at one of `starts`.
fn ends(
    e: &Expr,
    s: &[char],
    starts: &std::collections::BTreeSet<usize>,
) -> Option<std::collections::BTreeSet<usize>> {
    use std::collections::BTreeSet;
    Some(match e {
        Expr::Empty => starts.clone(),
        Expr::Bytes(b) => {
            let lit: Vec<char> = std::str::from_utf8(b).ok()?.chars().collect();
            starts
                .iter()
                .filter(|&&p| s.get(p..p + lit.len()) == Some(&lit[..]))
                .map(|p| p + lit.len())
                .collect()
        }
        Expr::Class(c) => starts
            .iter()
            .filter(|&&p| {
                s.get(p).is_some_and(|&ch| {
                    let inside = c
                        .ranges
                        .iter()
                        .any(|&(lo, hi)| lo <= ch as u32 && ch as u32 <= hi);
                    inside != c.negated
                })
            })
            .map(|p| p + 1)
            .collect(),
        Expr::Seq(v) => {
            let mut cur = starts.clone();
            for x in v {
                cur = ends(x, s, &cur)?;
                if cur.is_empty() {
                    break;
                }
            }
            cur
        }
        Expr::Choice(v) => {
            let mut out = BTreeSet::new();
            for x in v {
                out.extend(ends(x, s, starts)?);
            }
            out
        }
        Expr::Repeat { expr, min, max } => {
            let mut cur = starts.clone();
            for _ in 0..*min {
                cur = ends(expr, s, &cur)?;
                if cur.is_empty() {
                    return Some(cur);
                }
            }
            let mut all = cur.clone();
            let mut n = *min;
            while max.map_or(true, |m| n < m) {
                let next: BTreeSet<usize> =
                    ends(expr, s, &cur)?.difference(&all).copied().collect();
                if next.is_empty() {
                    break;
                }
                all.extend(next.iter().copied());
                cur = next;
                n += 1;
            }
            all
        }
        Expr::Rule(_) | Expr::Token(_) => return None,
    })
}
