//! `format`: date, time, date-time (RFC 3339), uuid, ipv4 and email, as exact grammars of
//! the string's content (plain characters, no escapes). Every other format is refused.
//!
//! Each grammar accepts a subset of what the format allows, never more:
//! * `date`: `YYYY-MM-DD` with the days of each month, and 29 February in leap years only.
//! * `time`: `HH:MM:SS(.fraction)?` then `Z` or `±HH:MM` (uppercase `Z`; no leap second).
//! * `date-time`: a date, `T`, a time.
//! * `uuid`: `8-4-4-4-12` hexadecimal digits.
//! * `ipv4`: four decimal octets 0–255 without leading zeros.
//! * `email`: a conservative subset: `atom(.atom){0,3}@(label.){1,3}tld`, atoms of
//!   `[A-Za-z0-9_+-]{1,16}`, labels of letters, digits and inner hyphens (at most 63), a
//!   letters-only top-level domain of 2–24 letters.

use serde_json::Value;

use super::{class, lit, opt, repeat, seq, Builder, JsonSchemaError};
use crate::grammar::Expr;

fn r(lo: char, hi: char) -> (u32, u32) {
    (lo as u32, hi as u32)
}

fn d(lo: char, hi: char) -> Expr {
    class(&[r(lo, hi)])
}

fn dig() -> Expr {
    d('0', '9')
}

fn alt(v: Vec<Expr>) -> Expr {
    Expr::Choice(v)
}

fn exactly(e: Expr, n: u32) -> Expr {
    repeat(e, n, Some(n))
}

fn date() -> Expr {
    let year = exactly(dig(), 4);
    let m31 = alt(vec![
        seq(vec![
            lit("0"),
            class(&[r('1', '1'), r('3', '3'), r('5', '5'), r('7', '8')]),
        ]),
        seq(vec![lit("1"), class(&[r('0', '0'), r('2', '2')])]),
    ]);
    let m30 = alt(vec![
        seq(vec![
            lit("0"),
            class(&[r('4', '4'), r('6', '6'), r('9', '9')]),
        ]),
        lit("11"),
    ]);
    let d01_28 = alt(vec![
        seq(vec![lit("0"), d('1', '9')]),
        seq(vec![lit("1"), dig()]),
        seq(vec![lit("2"), d('0', '8')]),
    ]);
    let d29 = alt(vec![d01_28.clone(), lit("29")]);
    let d30 = alt(vec![d29.clone(), lit("30")]);
    let d31 = alt(vec![d30.clone(), lit("31")]);
    let leap_tail = alt(vec![
        seq(vec![lit("0"), class(&[r('4', '4'), r('8', '8')])]),
        seq(vec![
            class(&[r('2', '2'), r('4', '4'), r('6', '6'), r('8', '8')]),
            class(&[r('0', '0'), r('4', '4'), r('8', '8')]),
        ]),
        seq(vec![
            class(&[
                r('1', '1'),
                r('3', '3'),
                r('5', '5'),
                r('7', '7'),
                r('9', '9'),
            ]),
            class(&[r('2', '2'), r('6', '6')]),
        ]),
    ]);
    let leap_year = alt(vec![
        seq(vec![exactly(dig(), 2), leap_tail.clone()]),
        seq(vec![leap_tail, lit("00")]),
    ]);
    alt(vec![
        seq(vec![year.clone(), lit("-"), m31, lit("-"), d31]),
        seq(vec![year.clone(), lit("-"), m30, lit("-"), d30]),
        seq(vec![year, lit("-02-"), d01_28]),
        seq(vec![leap_year, lit("-02-29")]),
    ])
}

fn time() -> Expr {
    let hour = alt(vec![
        seq(vec![d('0', '1'), dig()]),
        seq(vec![lit("2"), d('0', '3')]),
    ]);
    let min = seq(vec![d('0', '5'), dig()]);
    let frac = opt(seq(vec![lit("."), repeat(dig(), 1, None)]));
    let offset = alt(vec![
        lit("Z"),
        seq(vec![
            class(&[r('+', '+'), r('-', '-')]),
            hour.clone(),
            lit(":"),
            min.clone(),
        ]),
    ]);
    seq(vec![
        hour,
        lit(":"),
        min.clone(),
        lit(":"),
        min,
        frac,
        offset,
    ])
}

fn uuid() -> Expr {
    let hex = class(&[r('0', '9'), r('a', 'f'), r('A', 'F')]);
    seq(vec![
        exactly(hex.clone(), 8),
        lit("-"),
        exactly(hex.clone(), 4),
        lit("-"),
        exactly(hex.clone(), 4),
        lit("-"),
        exactly(hex.clone(), 4),
        lit("-"),
        exactly(hex, 12),
    ])
}

fn ipv4() -> Expr {
    let octet = alt(vec![
        seq(vec![lit("25"), d('0', '5')]),
        seq(vec![lit("2"), d('0', '4'), dig()]),
        seq(vec![lit("1"), dig(), dig()]),
        seq(vec![d('1', '9'), dig()]),
        dig(),
    ]);
    seq(vec![octet.clone(), exactly(seq(vec![lit("."), octet]), 3)])
}

fn email() -> Expr {
    let atom_char = class(&[
        r('A', 'Z'),
        r('a', 'z'),
        r('0', '9'),
        r('_', '_'),
        r('+', '+'),
        r('-', '-'),
    ]);
    let atom = repeat(atom_char, 1, Some(16));
    let local = seq(vec![
        atom.clone(),
        repeat(seq(vec![lit("."), atom]), 0, Some(3)),
    ]);
    let alnum = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]);
    let inner = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9'), r('-', '-')]);
    let label = seq(vec![
        alnum.clone(),
        opt(seq(vec![repeat(inner, 0, Some(61)), alnum])),
    ]);
    let tld = repeat(class(&[r('A', 'Z'), r('a', 'z')]), 2, Some(24));
    seq(vec![
        local,
        lit("@"),
        repeat(seq(vec![label, lit(".")]), 1, Some(3)),
        tld,
    ])
}

impl Builder<'_> {
    /// The content (between the quotes) of strings of format `f`; `None` when the format is
    /// ignored (lenient mode).
    pub(crate) fn format(&mut self, f: &Value, ptr: &str) -> Result<Option<Expr>, JsonSchemaError> {
        let Value::String(name) = f else {
            return Err(JsonSchemaError::InvalidKeyword {
                keyword: "format".into(),
                pointer: ptr.into(),
                message: "must be a string".into(),
            });
        };
        Ok(Some(match name.as_str() {
            "date" => date(),
            "time" => time(),
            "date-time" => seq(vec![date(), lit("T"), time()]),
            "uuid" => uuid(),
            "ipv4" => ipv4(),
            "email" => email(),
            other => {
                self.unsupported(
                    "format",
                    ptr,
                    &format!("format {other:?} is not supported (date, time, date-time, uuid, ipv4, email are)"),
                )?;
                return Ok(None);
            }
        }))
    }
}
