//! The grammar expressions the JSON Schema front end builds with: literals, sequences,
//! choices, character classes, repetitions, and JSON whitespace with a bounded count of
//! characters and line feeds.

use crate::grammar::{CharClass, Expr};

/// The most alternatives [`whitespace_lines`] may take (`(n + k choose k)` for `n`
/// characters with at most `k` line breaks); past it only the character count applies.
pub(super) const MAX_WHITESPACE_SHAPES: u64 = 4096;

/// Whitespace other than a line feed: space, tab, carriage return.
pub(super) fn blank() -> Expr {
    Expr::Class(CharClass {
        negated: false,
        ranges: vec![(0x20, 0x20), (0x09, 0x09), (0x0D, 0x0D)],
    })
}

/// `n + k choose k`, saturating.
pub(super) fn binomial(n: u32, k: u32) -> u64 {
    let mut r: u64 = 1;
    for i in 0..u64::from(k) {
        r = r.saturating_mul(u64::from(n) - i) / (i + 1);
    }
    r
}

/// At most `n` whitespace characters of which at most `k` are line feeds: the blanks
/// before the first line feed, then the rest (`(n + k choose k)` alternatives).
pub(super) fn whitespace_lines(n: u32, k: u32) -> Expr {
    if k == 0 || n == 0 {
        return repeat(blank(), 0, Some(n));
    }
    let mut alts = vec![repeat(blank(), 0, Some(n))];
    for i in 0..n {
        alts.push(seq(vec![
            repeat(blank(), i, Some(i)),
            lit("\n"),
            whitespace_lines(n - 1 - i, k - 1),
        ]));
    }
    Expr::Choice(alts)
}

/// A literal byte string.
pub(crate) fn lit(s: &str) -> Expr {
    if s.is_empty() {
        Expr::Empty
    } else {
        Expr::Bytes(s.as_bytes().to_vec())
    }
}

/// A sequence, flattened a little.
pub(crate) fn seq(parts: Vec<Expr>) -> Expr {
    let mut v: Vec<Expr> = parts
        .into_iter()
        .filter(|e| !matches!(e, Expr::Empty))
        .collect();
    match v.len() {
        0 => Expr::Empty,
        1 => v.pop().unwrap_or(Expr::Empty),
        _ => Expr::Seq(v),
    }
}

/// A choice of the satisfiable alternatives (`None` when there are none).
pub(crate) fn choice(alts: Vec<Option<Expr>>) -> Option<Expr> {
    let mut v: Vec<Expr> = alts.into_iter().flatten().collect();
    match v.len() {
        0 => None,
        1 => v.pop(),
        _ => Some(Expr::Choice(v)),
    }
}

/// One character from `ranges` (inclusive code points).
pub(crate) fn class(ranges: &[(u32, u32)]) -> Expr {
    Expr::Class(CharClass {
        negated: false,
        ranges: ranges.to_vec(),
    })
}

/// The expression that matches nothing.
pub(crate) fn never() -> Expr {
    class(&[])
}

/// `e` repeated `min..=max` times.
pub(crate) fn repeat(e: Expr, min: u32, max: Option<u32>) -> Expr {
    if max == Some(0) {
        return Expr::Empty;
    }
    if min == 1 && max == Some(1) {
        return e;
    }
    Expr::Repeat {
        expr: Box::new(e),
        min,
        max,
    }
}

/// `e?`.
pub(crate) fn opt(e: Expr) -> Expr {
    repeat(e, 0, Some(1))
}
