//! `format`: date, time, date-time, duration (RFC 3339), uuid, ipv4, ipv6, email, hostname,
//! uri, uri-reference and json-pointer, as grammars of the string's content (plain
//! characters, no escapes). Other formats of the drafts are refused; formats no draft
//! defines (`int32`, `url`, ...) are refused too, or ignored (and listed) with
//! [`super::JsonSchemaOptions::ignore_unknown_keywords`].
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
//! * `hostname`: one to three labels (letters, digits, inner hyphens; at most 63 each), the
//!   last starting with a letter.
//! * `ipv6`: eight groups of 1–4 hex digits, or `::` for zero groups (no IPv4 suffix).
//! * `uri`: `scheme://host[:port][/path][?query][#fragment]`: lowercase scheme, a hostname,
//!   unreserved characters only (no percent escapes); `uri-reference`: a uri or `/path...`.
//! * `json-pointer`: RFC 6901 exactly (plain characters).
//! * `duration`: the RFC 3339 appendix A grammar, numbers of up to nine digits.

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

/// A DNS label of letters, digits and inner hyphens (1 to 63 characters).
fn label() -> Expr {
    let alnum = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]);
    let inner = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9'), r('-', '-')]);
    seq(vec![
        alnum.clone(),
        opt(seq(vec![repeat(inner, 0, Some(61)), alnum])),
    ])
}

/// One to three labels, the last starting with a letter (at most 191 characters, below the
/// 253 that DNS allows).
fn hostname() -> Expr {
    let alpha = class(&[r('A', 'Z'), r('a', 'z')]);
    let last = seq(vec![
        alpha,
        opt(seq(vec![
            repeat(
                class(&[r('A', 'Z'), r('a', 'z'), r('0', '9'), r('-', '-')]),
                0,
                Some(61),
            ),
            class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]),
        ])),
    ]);
    seq(vec![repeat(seq(vec![label(), lit(".")]), 0, Some(2)), last])
}

/// RFC 4291 text forms: eight groups, or `::` standing for one or more zero groups (no
/// embedded IPv4).
fn ipv6() -> Expr {
    let h = repeat(class(&[r('0', '9'), r('a', 'f'), r('A', 'F')]), 1, Some(4));
    let groups = |n: u32| -> Expr {
        if n == 0 {
            return Expr::Empty;
        }
        seq(vec![
            h.clone(),
            repeat(seq(vec![lit(":"), h.clone()]), n - 1, Some(n - 1)),
        ])
    };
    let mut alts = vec![groups(8)];
    for a in 0..=7u32 {
        for b in 0..=(7 - a) {
            alts.push(seq(vec![groups(a), lit("::"), groups(b)]));
        }
    }
    alt(alts)
}

/// Characters of a path segment, query or fragment: RFC 3986 unreserved only.
fn unreserved() -> Expr {
    class(&[
        r('A', 'Z'),
        r('a', 'z'),
        r('0', '9'),
        r('-', '-'),
        r('.', '.'),
        r('_', '_'),
        r('~', '~'),
    ])
}

/// `/seg/seg...` (possibly empty), an optional `?query` and `#fragment`.
fn path_query_fragment() -> Expr {
    let seg = repeat(unreserved(), 0, Some(64));
    let query = class(&[
        r('A', 'Z'),
        r('a', 'z'),
        r('0', '9'),
        r('-', '.'),
        r('_', '_'),
        r('~', '~'),
        r('=', '='),
        r('&', '&'),
    ]);
    seq(vec![
        repeat(seq(vec![lit("/"), seg]), 0, Some(16)),
        opt(seq(vec![lit("?"), repeat(query, 0, Some(128))])),
        opt(seq(vec![lit("#"), repeat(unreserved(), 0, Some(64))])),
    ])
}

/// A conservative subset of RFC 3986 absolute URIs: `scheme://host[:port]path?query#frag`
/// with a lowercase scheme, a [`hostname`] host, a port of at most four digits, and
/// unreserved characters only (no percent escapes) in the rest.
fn uri() -> Expr {
    let scheme = seq(vec![
        class(&[r('a', 'z')]),
        repeat(
            class(&[r('a', 'z'), r('0', '9'), r('+', '+'), r('-', '.')]),
            0,
            Some(15),
        ),
    ]);
    seq(vec![
        scheme,
        lit("://"),
        hostname(),
        opt(seq(vec![lit(":"), repeat(dig(), 1, Some(4))])),
        path_query_fragment(),
    ])
}

/// A [`uri`], or a relative reference that starts with `/` (an absolute path).
fn uri_reference() -> Expr {
    let seg = repeat(unreserved(), 1, Some(64));
    alt(vec![uri(), seq(vec![lit("/"), seg, path_query_fragment()])])
}

/// RFC 6901 JSON pointers: `(/token)*`, `~` only as `~0` or `~1`; tokens of plain
/// characters (no JSON escapes).
fn json_pointer() -> Expr {
    let plain = Expr::Class(crate::grammar::CharClass {
        negated: true,
        ranges: vec![
            (0, 0x1F),
            r('"', '"'),
            r('/', '/'),
            r('\\', '\\'),
            r('~', '~'),
        ],
    });
    let ch = alt(vec![plain, lit("~0"), lit("~1")]);
    repeat(seq(vec![lit("/"), repeat(ch, 0, None)]), 0, None)
}

/// RFC 3339 appendix A durations (`P1Y2M3DT4H5M6S`, `P3W`), up to nine digits a number.
fn duration() -> Expr {
    let n = || repeat(dig(), 1, Some(9));
    let unit = |u: &str, rest: Option<Expr>| {
        let mut v = vec![n(), lit(u)];
        if let Some(r) = rest {
            v.push(opt(r));
        }
        seq(v)
    };
    let second = unit("S", None);
    let minute = unit("M", Some(second.clone()));
    let hour = unit("H", Some(minute.clone()));
    let time = seq(vec![lit("T"), alt(vec![hour, minute, second])]);
    let day = unit("D", None);
    let month = unit("M", Some(day.clone()));
    let year = unit("Y", Some(month.clone()));
    let date = seq(vec![alt(vec![day, month, year]), opt(time.clone())]);
    let week = unit("W", None);
    seq(vec![lit("P"), alt(vec![date, time, week])])
}

/// Formats defined by some JSON Schema draft (others are vendor extensions).
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    "color",
    "host-name",
    "ip-address",
    "utc-millisec",
    "style",
    "phone",
];

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
            "hostname" => hostname(),
            "ipv6" => ipv6(),
            "uri" => uri(),
            "uri-reference" => uri_reference(),
            "json-pointer" => json_pointer(),
            "duration" => duration(),
            other if self.opts.ignore_unknown_keywords && !STANDARD_FORMATS.contains(&other) => {
                self.ignored.push(super::IgnoredKeyword {
                    keyword: "format".into(),
                    pointer: ptr.into(),
                    reason: format!("{other:?} is not a format of any JSON Schema draft"),
                });
                return Ok(None);
            }
            other => {
                self.unsupported(
                    "format",
                    ptr,
                    &format!("format {other:?} is not supported (date, time, date-time, duration, uuid, ipv4, ipv6, email, hostname, uri, uri-reference, json-pointer are)"),
                )?;
                return Ok(None);
            }
        }))
    }
}
