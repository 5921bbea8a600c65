//! `format`: date, time, date-time, duration (RFC 3339), uuid, ipv4, ipv6, email,
//! idn-email, hostname, idn-hostname, uri, uri-reference, iri, iri-reference,
//! uri-template, json-pointer, relative-json-pointer and regex, as grammars of the
//! string's decoded content (JSON-escaped by the caller). Other formats of the drafts are
//! refused; formats no draft defines (`int32`, `url`, ...) are refused too, or ignored (and
//! listed) with [`super::JsonSchemaOptions::ignore_unknown_keywords`].
//!
//! Each grammar accepts a subset of what the format allows, never more:
//! * `date`: `YYYY-MM-DD` with the days of each month, and 29 February in leap years only.
//! * `time`: `HH:MM:SS(.fraction)?` then `Z` (or `z`) or `±HH:MM`; a leap second
//!   `23:59:60` with a zero offset (`Z`, `+00:00`, `-00:00`: RFC 3339 §5.7 allows one
//!   only at 23:59 UTC, so also `15:59:60-08:00`, which the subset leaves out).
//! * `date-time`: a date, `T` (or `t`), a time.
//! * `uuid`: `8-4-4-4-12` hexadecimal digits.
//! * `ipv4`: four decimal octets 0–255 without leading zeros.
//! * `email`: a conservative subset: `atom(.atom){0,3}@(label.){1,3}tld`, atoms of 1–15
//!   RFC 5322 `atext` characters (letters, digits, ``!#$%&'*+-/=?^_`{|}~``) or one atom of
//!   up to 64, labels of letters, digits and inner hyphens (at most 50), a letters-only
//!   top-level domain of 2–24 letters (no quoted local parts, no address literals).
//! * `idn-email` (RFC 6531): an `email`, or a local part of 1–16 characters of `atext`
//!   and non-ASCII `ucschar`s (at least one) with an `email` domain.
//! * `hostname`: one to three labels (letters, digits, inner hyphens; at most 63 each; no
//!   `--` in the third and fourth positions), or four to eight of at most 30 each (so at
//!   most 253 characters), the last starting with a letter.
//! * `idn-hostname` (RFC 5890–5893): one to three labels, each an NR-LDH label (not `xn--`
//!   nor any `??--`) or a U-label of 1–8 lowercase letters/digits and IDNA2008-PVALID
//!   left-to-right letters (Latin-1, Greek, Cyrillic, kana, CJK, Hangul), the last starting
//!   with a letter.
//! * `ipv6`: RFC 4291 §2.2: eight groups of 1–4 hex digits, `::` for zero groups, and the
//!   last 32 bits as an IPv4 address (`::ffff:192.0.2.1`); no zone id.
//! * `uri`, `uri-reference`: the RFC 3986 grammar (`URI`, `URI-reference`): an empty
//!   authority (`file:///etc/hosts`), userinfo, IP literals, ports, with bounded lengths
//!   (see [`cap`]: a 32-character scheme, a 255-character host, 16 path segments of 64...).
//! * `iri`, `iri-reference`: the RFC 3987 grammar, except the bidirectional formatting
//!   characters (forbidden by its §4.1).
//! * `uri-template`: the RFC 6570 grammar, without the `'` literal and the reserved
//!   operators.
//! * `json-pointer`: RFC 6901 exactly; `relative-json-pointer`: a non-negative integer, an
//!   optional index manipulation (`+1`, `-2`), then `#` or a JSON pointer
//!   (draft-bhutton-relative-json-pointer-00, the one draft 2020-12 names).
//! * `regex`: ECMA-262 patterns valid with and without the `u` flag, from a simple subset
//!   (see [`regex`]).
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
    // Years divisible by 4 but not by 100, and by 400 (RFC 3339 appendix C), year 0 too.
    let leap_year = alt(vec![
        seq(vec![exactly(dig(), 2), leap_tail.clone()]),
        seq(vec![leap_tail, lit("00")]),
        lit("0000"),
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
    // RFC 3339 §5.6 NOTE: "Z" may be written lowercase (ABNF strings are case-insensitive).
    let zulu = || class(&[r('Z', 'Z'), r('z', 'z')]);
    let offset = alt(vec![
        zulu(),
        seq(vec![
            class(&[r('+', '+'), r('-', '-')]),
            hour.clone(),
            lit(":"),
            min.clone(),
        ]),
    ]);
    // §5.7: a leap second (`:60`) ends a UTC day, so only at 23:59 UTC; of the local times
    // that are 23:59 UTC, those with a zero offset.
    let leap = seq(vec![
        lit("23:59:60"),
        frac.clone(),
        alt(vec![zulu(), lit("+00:00"), lit("-00:00")]),
    ]);
    alt(vec![
        seq(vec![
            hour,
            lit(":"),
            min.clone(),
            lit(":"),
            min,
            frac,
            offset,
        ]),
        leap,
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

/// RFC 5322 §3.2.3 `atext`: letters, digits and ``!#$%&'*+-/=?^_`{|}~``.
const ATEXT: &[(u32, u32)] = &[
    (0x41, 0x5A),
    (0x61, 0x7A),
    (0x30, 0x39),
    (0x21, 0x21),
    (0x23, 0x27),
    (0x2A, 0x2B),
    (0x2D, 0x2D),
    (0x2F, 0x2F),
    (0x3D, 0x3D),
    (0x3F, 0x3F),
    (0x5E, 0x60),
    (0x7B, 0x7E),
];

fn email() -> Expr {
    let atom_char = class(ATEXT);
    // At most 15 + 3 × 16 = 63 characters, or one atom of at most 64: RFC 5321 §4.5.3.1.1
    // allows 64 in a local part.
    let atom = repeat(atom_char.clone(), 1, Some(15));
    let local = alt(vec![
        seq(vec![
            atom.clone(),
            repeat(seq(vec![lit("."), atom]), 0, Some(3)),
        ]),
        split_repeat(atom_char, 16, 64),
    ]);
    seq(vec![local, lit("@"), email_domain()])
}

/// `e{min,max}` written as `e{min,half} e{0,max-half}` (`half` = `max / 2`, at least
/// `min`): the same language, in repetitions small enough to be built into the rule's DFA
/// (lowering turns one of more than 32 copies into helper rules or a counted rule, but for
/// one repetition of one ASCII class per rule, written out up to 64 copies; a counted
/// rule's calls take a cold mask walk off the DFA's fast path: the first mask inside an
/// email address cost about 5 ms that way). The split is ambiguous, which a DFA does not
/// see.
fn split_repeat(e: Expr, min: u32, max: u32) -> Expr {
    let half = (max / 2).max(min);
    seq(vec![
        repeat(e.clone(), min, Some(half)),
        repeat(e, 0, Some(max - half)),
    ])
}

/// The domain of [`email`]: one to three labels of at most 50 characters and a top-level
/// domain of letters (at most 177 characters, so an address stays within RFC 5321's 254).
fn email_domain() -> Expr {
    let alnum = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]);
    let inner = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9'), r('-', '-')]);
    let label = seq(vec![
        alnum.clone(),
        opt(seq(vec![split_repeat(inner, 0, 48), alnum])),
    ]);
    let tld = repeat(class(&[r('A', 'Z'), r('a', 'z')]), 2, Some(24));
    seq(vec![repeat(seq(vec![label, lit(".")]), 1, Some(3)), tld])
}

/// One to three NR-LDH labels (no `xn--` nor other `??--` label: those are A-labels or
/// reserved, RFC 5890), or four to eight of at most 30 characters, the last starting with a
/// letter (at most 191 or 247 characters, below the 253 that DNS allows, RFC 1123 §2.1).
fn hostname() -> Expr {
    alt(vec![host_labels(3), short_host_labels(4, 8, 30)])
}

/// `min..=max` NR-LDH labels of at most `len` characters separated by dots, the last
/// starting with a letter.
fn short_host_labels(min: u32, max: u32, len: u32) -> Expr {
    let alnum = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]);
    let alpha = class(&[r('A', 'Z'), r('a', 'z')]);
    seq(vec![
        repeat(
            seq(vec![nr_ldh_label_max(alnum, len), lit(".")]),
            min - 1,
            Some(max - 1),
        ),
        nr_ldh_label_max(alpha, len),
    ])
}

/// One to `labels` NR-LDH labels separated by dots, the last starting with a letter: the
/// shape shared by [`hostname`] and [`uri_host`].
fn host_labels(labels: u32) -> Expr {
    let alnum = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]);
    let alpha = class(&[r('A', 'Z'), r('a', 'z')]);
    seq(vec![
        repeat(
            seq(vec![nr_ldh_label(alnum), lit(".")]),
            0,
            Some(labels - 1),
        ),
        nr_ldh_label(alpha),
    ])
}

/// RFC 4291 §2.2 text forms (RFC 3986 `IPv6address`): eight groups, or `::` standing for
/// one or more zero groups, and both with the last two groups written as an IPv4 address
/// (`::ffff:192.0.2.1`, form 3).
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
    // Form 3: six groups and an IPv4 address, or at most five groups around `::`.
    alts.push(seq(vec![groups(6), lit(":"), ipv4()]));
    for a in 0..=5u32 {
        for b in 0..=(5 - a) {
            let tail = if b == 0 {
                ipv4()
            } else {
                seq(vec![groups(b), lit(":"), ipv4()])
            };
            alts.push(seq(vec![groups(a), lit("::"), tail]));
        }
    }
    alt(alts)
}

/// RFC 3986 §3 `URI`: the [`iri`] grammar over ASCII (RFC 3987 §2.2 is RFC 3986's with
/// `ucschar` and `iprivate` added), so every form: an empty authority (`file:///etc/hosts`),
/// userinfo, IP literals, ports, `scheme:/path` and `scheme:`, within the lengths of [`cap`].
fn uri() -> Expr {
    iri_with(false)
}

/// RFC 3986 §4.1 `URI-reference`: a [`uri`] or a `relative-ref` (the [`iri_reference`]
/// grammar over ASCII).
fn uri_reference() -> Expr {
    iri_reference_with(false)
}

/// RFC 6901 JSON pointers: `(/token)*`, `~` only as `~0` or `~1`; tokens of any other
/// characters (§3 `unescaped`: quotes, backslashes and control characters included, which
/// the JSON string escapes).
fn json_pointer() -> Expr {
    let plain = Expr::Class(crate::grammar::CharClass {
        negated: true,
        ranges: vec![r('/', '/'), r('~', '~')],
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

/// RFC 3987 `ucschar`, less the bidirectional formatting characters (LRM, RLM, LRE..RLO,
/// PDF) that RFC 3987 §4.1 forbids in IRIs.
const UCSCHAR: &[(u32, u32)] = &[
    (0xA0, 0x200D),
    (0x2010, 0x2029),
    (0x202F, 0xD7FF),
    (0xF900, 0xFDCF),
    (0xFDF0, 0xFFEF),
    (0x10000, 0x1FFFD),
    (0x20000, 0x2FFFD),
    (0x30000, 0x3FFFD),
    (0x40000, 0x4FFFD),
    (0x50000, 0x5FFFD),
    (0x60000, 0x6FFFD),
    (0x70000, 0x7FFFD),
    (0x80000, 0x8FFFD),
    (0x90000, 0x9FFFD),
    (0xA0000, 0xAFFFD),
    (0xB0000, 0xBFFFD),
    (0xC0000, 0xCFFFD),
    (0xD0000, 0xDFFFD),
    (0xE1000, 0xEFFFD),
];

/// RFC 3987 `iprivate`.
const IPRIVATE: &[(u32, u32)] = &[(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)];

/// RFC 3986 `sub-delims`.
const SUB_DELIMS: &[(u32, u32)] = &[
    (0x21, 0x21),
    (0x24, 0x24),
    (0x26, 0x2C),
    (0x3B, 0x3B),
    (0x3D, 0x3D),
];

fn hexdig() -> Expr {
    class(&[r('0', '9'), r('a', 'f'), r('A', 'F')])
}

/// `pct-encoded`: `%` and two hexadecimal digits.
fn pct() -> Expr {
    seq(vec![lit("%"), hexdig(), hexdig()])
}

/// RFC 3987 `iunreserved` (RFC 3986 `unreserved` unless `unicode`), plus the single
/// characters of `extra` (sub-delims, `:`, ...).
fn iunreserved_and(extra: &[(u32, u32)], unicode: bool) -> Expr {
    let mut ranges = vec![
        r('A', 'Z'),
        r('a', 'z'),
        r('0', '9'),
        r('-', '.'),
        r('_', '_'),
        r('~', '~'),
    ];
    if unicode {
        ranges.extend_from_slice(UCSCHAR);
    }
    ranges.extend_from_slice(extra);
    class(&ranges)
}

/// `ipchar` = iunreserved / pct-encoded / sub-delims / ":" / "@" (RFC 3986 `pchar` unless
/// `unicode`).
fn ipchar(unicode: bool) -> Expr {
    let extra = [SUB_DELIMS, &[r(':', ':'), r('@', '@')]].concat();
    alt(vec![iunreserved_and(&extra, unicode), pct()])
}

/// The bound `n` of a repetition in RFC 3986 URIs (not `unicode`), none in IRIs. The
/// `uri` and `uri-reference` grammars keep the lengths of the former subset (a scheme of
/// 32, userinfo of 64 and a host of 255 characters or escapes, a port of 5 digits, 16 path
/// segments of 64, a query of 128, a fragment of 64) so that their longest string stays
/// finite and they still combine with a large `maxLength` (`"maxLength": 65536`).
fn cap(unicode: bool, n: u32) -> Option<u32> {
    (!unicode).then_some(n)
}

/// `ipath-abempty`: `*( "/" isegment )`.
fn ipath_abempty(unicode: bool) -> Expr {
    repeat(
        seq(vec![lit("/"), repeat(ipchar(unicode), 0, cap(unicode, 64))]),
        0,
        cap(unicode, 16),
    )
}

/// `"//" iauthority ipath-abempty`: `[iuserinfo "@"] ihost [":" port]`, the host an
/// IP-literal (IPv6 without an IPv4 tail, or IPvFuture) or an `ireg-name` (which covers
/// IPv4 addresses); RFC 3986 `"//" authority path-abempty` unless `unicode`.
fn iauthority_path(unicode: bool) -> Expr {
    let userinfo = repeat(
        alt(vec![
            iunreserved_and(&[SUB_DELIMS, &[r(':', ':')]].concat(), unicode),
            pct(),
        ]),
        0,
        cap(unicode, 64),
    );
    let ipvfuture = seq(vec![
        class(&[r('v', 'v'), r('V', 'V')]),
        repeat(hexdig(), 1, cap(unicode, 4)),
        lit("."),
        repeat(
            class(
                &[
                    &[
                        r('A', 'Z'),
                        r('a', 'z'),
                        r('0', '9'),
                        r('-', '.'),
                        r('_', '_'),
                        r('~', '~'),
                        r(':', ':'),
                    ][..],
                    SUB_DELIMS,
                ]
                .concat(),
            ),
            1,
            cap(unicode, 64),
        ),
    ]);
    let ip_literal = seq(vec![lit("["), alt(vec![ipv6(), ipvfuture]), lit("]")]);
    let reg_name = repeat(
        alt(vec![iunreserved_and(SUB_DELIMS, unicode), pct()]),
        0,
        cap(unicode, 255),
    );
    seq(vec![
        lit("//"),
        opt(seq(vec![userinfo, lit("@")])),
        alt(vec![ip_literal, reg_name]),
        opt(seq(vec![lit(":"), repeat(dig(), 0, cap(unicode, 5))])),
        ipath_abempty(unicode),
    ])
}

/// `[ "?" iquery ] [ "#" ifragment ]` (RFC 3986 `query` and `fragment` unless `unicode`).
fn iquery_ifragment(unicode: bool) -> Expr {
    let fchar = alt(vec![ipchar(unicode), class(&[r('/', '/'), r('?', '?')])]);
    let qchar = if unicode {
        alt(vec![fchar.clone(), class(IPRIVATE)])
    } else {
        fchar.clone()
    };
    seq(vec![
        opt(seq(vec![lit("?"), repeat(qchar, 0, cap(unicode, 128))])),
        opt(seq(vec![lit("#"), repeat(fchar, 0, cap(unicode, 64))])),
    ])
}

/// `isegment-nz *( "/" isegment )` (`ipath-rootless`).
fn ipath_rootless(unicode: bool) -> Expr {
    seq(vec![
        repeat(ipchar(unicode), 1, cap(unicode, 64)),
        ipath_abempty(unicode),
    ])
}

/// RFC 3987 `IRI` (the whole grammar, except the bidirectional formatting characters,
/// which its §4.1 forbids).
fn iri() -> Expr {
    iri_with(true)
}

/// [`iri`], or (not `unicode`) RFC 3986 `URI`.
fn iri_with(unicode: bool) -> Expr {
    let scheme = seq(vec![
        class(&[r('A', 'Z'), r('a', 'z')]),
        repeat(
            class(&[
                r('A', 'Z'),
                r('a', 'z'),
                r('0', '9'),
                r('+', '+'),
                r('-', '.'),
            ]),
            0,
            cap(unicode, 31),
        ),
    ]);
    let hier = alt(vec![
        iauthority_path(unicode),
        seq(vec![lit("/"), opt(ipath_rootless(unicode))]),
        ipath_rootless(unicode),
        Expr::Empty,
    ]);
    seq(vec![scheme, lit(":"), hier, iquery_ifragment(unicode)])
}

/// RFC 3987 `IRI-reference`: an [`iri`] or an `irelative-ref`.
fn iri_reference() -> Expr {
    iri_reference_with(true)
}

/// [`iri_reference`], or (not `unicode`) RFC 3986 `URI-reference`.
fn iri_reference_with(unicode: bool) -> Expr {
    let nc = alt(vec![
        iunreserved_and(&[SUB_DELIMS, &[r('@', '@')]].concat(), unicode),
        pct(),
    ]);
    let relative_part = alt(vec![
        iauthority_path(unicode),
        seq(vec![lit("/"), opt(ipath_rootless(unicode))]),
        seq(vec![
            repeat(nc, 1, cap(unicode, 64)),
            ipath_abempty(unicode),
        ]),
        Expr::Empty,
    ]);
    alt(vec![
        iri_with(unicode),
        seq(vec![relative_part, iquery_ifragment(unicode)]),
    ])
}

/// RFC 6570 URI templates (level 4), less the `'` literal (allowed only by an erratum) and
/// the reserved operators `= , ! @ |`.
fn uri_template() -> Expr {
    let mut lit_ranges = vec![
        (0x21, 0x21),
        (0x23, 0x24),
        (0x26, 0x26),
        (0x28, 0x3B),
        (0x3D, 0x3D),
        (0x3F, 0x5B),
        (0x5D, 0x5D),
        (0x5F, 0x5F),
        (0x61, 0x7A),
        (0x7E, 0x7E),
    ];
    lit_ranges.extend_from_slice(UCSCHAR);
    lit_ranges.extend_from_slice(IPRIVATE);
    let literal = alt(vec![class(&lit_ranges), pct()]);
    let varchar = alt(vec![
        class(&[r('A', 'Z'), r('a', 'z'), r('0', '9'), r('_', '_')]),
        pct(),
    ]);
    let varname = seq(vec![
        varchar.clone(),
        repeat(seq(vec![opt(lit(".")), varchar]), 0, None),
    ]);
    let modifier = alt(vec![
        seq(vec![lit(":"), d('1', '9'), repeat(dig(), 0, Some(3))]),
        lit("*"),
    ]);
    let varspec = seq(vec![varname, opt(modifier)]);
    let operator = class(&[
        r('+', '+'),
        r('#', '#'),
        r('.', '.'),
        r('/', '/'),
        r(';', ';'),
        r('?', '?'),
        r('&', '&'),
    ]);
    let expression = seq(vec![
        lit("{"),
        opt(operator),
        varspec.clone(),
        repeat(seq(vec![lit(","), varspec]), 0, None),
        lit("}"),
    ]);
    repeat(alt(vec![literal, expression]), 0, None)
}

/// draft-bhutton-relative-json-pointer-00 §3 (the draft 2020-12 names): a non-negative
/// integer, an optional index manipulation (`+` or `-` and a non-negative integer), then
/// `#` or a JSON pointer.
fn relative_json_pointer() -> Expr {
    let n = || {
        alt(vec![
            lit("0"),
            seq(vec![d('1', '9'), repeat(dig(), 0, None)]),
        ])
    };
    let index = opt(seq(vec![class(&[r('+', '+'), r('-', '-')]), n()]));
    seq(vec![n(), index, alt(vec![lit("#"), json_pointer()])])
}

/// ECMA-262 patterns that are valid with and without the `u` (and `v`) flag: literal
/// characters other than the syntax characters, `.`, escapes of the syntax characters and
/// `/`, `\d \D \w \W \s \S \f \n \r \t \v`, classes of letters, digits, `_`, spaces, those
/// class escapes, the quotes `'` and `"` (never reserved, even doubled, under `v`) and the
/// ranges `a-z A-Z 0-9`, groups `(...)` and `(?:...)` nested up to three deep, alternation,
/// the assertions `^ $ \b \B` (not quantified) and the quantifiers `* + ? {n} {n,}` and
/// `{n,m}` with `n <= m` provably (see [`bounded_quantifier`]), greedy or lazy.
fn regex() -> Expr {
    let literal = class(&[
        (0x20, 0x21),
        (0x23, 0x23),
        (0x25, 0x27),
        (0x2C, 0x2D),
        (0x2F, 0x3E),
        (0x40, 0x5A),
        (0x5F, 0x7A),
        (0x7E, 0x7E),
        (0xA0, 0xD7FF),
    ]);
    let escape = seq(vec![
        lit("\\"),
        class(&[
            r('^', '^'),
            r('$', '$'),
            r('\\', '\\'),
            r('.', '.'),
            r('*', '+'),
            r('?', '?'),
            r('(', ')'),
            r('[', '['),
            r(']', ']'),
            r('{', '}'),
            r('/', '/'),
            r('d', 'd'),
            r('D', 'D'),
            r('w', 'w'),
            r('W', 'W'),
            r('s', 's'),
            r('S', 'S'),
            r('f', 'f'),
            r('n', 'n'),
            r('r', 'r'),
            r('t', 't'),
            r('v', 'v'),
        ]),
    ]);
    let class_atom = alt(vec![
        class(&[
            r('A', 'Z'),
            r('a', 'z'),
            r('0', '9'),
            r('_', '_'),
            r(' ', ' '),
            r('\'', '\''),
            r('"', '"'),
        ]),
        seq(vec![
            lit("\\"),
            class(&[
                r('d', 'd'),
                r('D', 'D'),
                r('w', 'w'),
                r('W', 'W'),
                r('s', 's'),
                r('S', 'S'),
            ]),
        ]),
        lit("a-z"),
        lit("A-Z"),
        lit("0-9"),
    ]);
    let char_class = seq(vec![
        lit("["),
        opt(lit("^")),
        repeat(class_atom, 1, None),
        lit("]"),
    ]);
    let digits = repeat(dig(), 1, Some(3));
    let quantifier = seq(vec![
        alt(vec![
            class(&[r('*', '+'), r('?', '?')]),
            seq(vec![lit("{"), digits.clone(), lit("}")]),
            seq(vec![lit("{"), digits, lit(",}")]),
            bounded_quantifier(),
        ]),
        opt(lit("?")),
    ]);
    let assertion = alt(vec![lit("^"), lit("$"), lit("\\b"), lit("\\B")]);
    let mut disjunction = Expr::Empty;
    for depth in 0..4 {
        let mut atoms = vec![
            literal.clone(),
            escape.clone(),
            lit("."),
            char_class.clone(),
        ];
        if depth > 0 {
            atoms.push(seq(vec![
                lit("("),
                opt(lit("?:")),
                disjunction.clone(),
                lit(")"),
            ]));
        }
        let term = alt(vec![
            seq(vec![alt(atoms), opt(quantifier.clone())]),
            assertion.clone(),
        ]);
        // `term* ("|" term*)*` is `(term | "|")*`: written so, each depth holds the one
        // below once, not twice (four depths written out twice over made 46,000 IR
        // nodes, most of a schema's compile).
        disjunction = repeat(alt(vec![term, lit("|")]), 0, None);
    }
    disjunction
}

/// `{n,m}` of a regex where `n <= m` is plain from the digits (ECMA-262 rejects `{2,1}`):
/// `n` of one or two digits and `m` of as many digits, digit by digit no smaller, or of
/// more digits (without a leading zero); `n` of three digits and `m` of three with a
/// larger first digit.
fn bounded_quantifier() -> Expr {
    let at_least = |c: char| class(&[r(c, '9')]);
    let digit_of = |c: char| lit(&c.to_string());
    let nz = || d('1', '9');
    let mut pairs = Vec::new();
    for a in '0'..='9' {
        // One digit, then one digit no smaller, or two or three digits.
        pairs.push(seq(vec![digit_of(a), lit(","), at_least(a)]));
        pairs.push(seq(vec![
            digit_of(a),
            lit(","),
            nz(),
            repeat(dig(), 1, Some(2)),
        ]));
    }
    for a in '1'..='9' {
        for x in '0'..='9' {
            // `ax`: then `by` with b > a, or b == a and y >= x; or three digits.
            let mut m = vec![seq(vec![digit_of(a), at_least(x)])];
            if a < '9' {
                let next = char::from_u32(a as u32 + 1).unwrap_or('9');
                m.push(seq(vec![at_least(next), dig()]));
            }
            m.push(seq(vec![nz(), dig(), dig()]));
            pairs.push(seq(vec![digit_of(a), digit_of(x), lit(","), alt(m)]));
        }
        if a < '9' {
            let next = char::from_u32(a as u32 + 1).unwrap_or('9');
            pairs.push(seq(vec![
                digit_of(a),
                dig(),
                dig(),
                lit(","),
                at_least(next),
                dig(),
                dig(),
            ]));
        }
    }
    seq(vec![lit("{"), alt(pairs), lit("}")])
}

/// Lowercase letters that are PVALID in IDNA2008 (RFC 5892), of Bidi class L, NFC
/// quick-check Yes and not combining, none below U+00DF or above U+D7A3: Latin-1
/// (`ß à..ö ø..ÿ`), Greek (`ά..ώ` without `ΐ ΰ`), Cyrillic (`а..џ`), Hiragana, Katakana,
/// the CJK ideographs of Unicode 1.1 and the Hangul syllables.
const IDN_LETTERS: &[(u32, u32)] = &[
    (0xDF, 0xF6),
    (0xF8, 0xFF),
    (0x3AC, 0x3AF),
    (0x3B1, 0x3CE),
    (0x430, 0x45F),
    (0x3041, 0x3096),
    (0x30A1, 0x30FA),
    (0x4E00, 0x9FA5),
    (0xAC00, 0xD7A3),
];

/// An NR-LDH label (RFC 5890): letters, digits, inner hyphens, at most 63, no `--` in the
/// third and fourth positions (which would make it an `xn--` or reserved label).
fn nr_ldh_label(first: Expr) -> Expr {
    nr_ldh_label_max(first, 63)
}

/// An NR-LDH label (see [`nr_ldh_label`]) of at most `len` characters (5 or more).
fn nr_ldh_label_max(first: Expr, len: u32) -> Expr {
    let a = || class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]);
    let h = || class(&[r('A', 'Z'), r('a', 'z'), r('0', '9'), r('-', '-')]);
    alt(vec![
        first.clone(),
        seq(vec![first.clone(), a()]),
        seq(vec![first.clone(), h(), a()]),
        seq(vec![
            first.clone(),
            h(),
            alt(vec![seq(vec![a(), a()]), seq(vec![lit("-"), a()])]),
        ]),
        seq(vec![
            first,
            h(),
            alt(vec![seq(vec![a(), h()]), seq(vec![lit("-"), a()])]),
            split_repeat(h(), 0, len - 5),
            a(),
        ]),
    ])
}

/// A U-label of one to eight characters among lowercase ASCII letters, digits and
/// [`IDN_LETTERS`], with at least one of the latter (and a letter first when
/// `first_letter`). Eight code points below U+D7A4 take at most 8 × 7 + 1 Punycode
/// characters, so the A-label stays within 63.
fn u_label(first_letter: bool) -> Expr {
    let ldig = [r('a', 'z'), r('0', '9')];
    let any = class(&[&ldig[..], IDN_LETTERS].concat());
    let ascii_first = if first_letter {
        class(&[r('a', 'z')])
    } else {
        class(&ldig)
    };
    // The first non-ASCII character at position i.
    let mut alts = vec![seq(vec![
        class(IDN_LETTERS),
        repeat(any.clone(), 0, Some(7)),
    ])];
    for i in 1..8u32 {
        alts.push(seq(vec![
            ascii_first.clone(),
            exactly(class(&ldig), i - 1),
            class(IDN_LETTERS),
            repeat(any.clone(), 0, Some(7 - i)),
        ]));
    }
    alt(alts)
}

/// One to three labels, each an NR-LDH label or a short [`u_label`], the last starting
/// with a letter. No right-to-left characters, so the Bidi rule (RFC 5893) does not apply;
/// no CONTEXTJ/CONTEXTO characters.
fn idn_hostname() -> Expr {
    let digit_or_letter = class(&[r('A', 'Z'), r('a', 'z'), r('0', '9')]);
    let letter = class(&[r('A', 'Z'), r('a', 'z')]);
    let label = alt(vec![nr_ldh_label(digit_or_letter), u_label(false)]);
    let last = alt(vec![nr_ldh_label(letter), u_label(true)]);
    seq(vec![repeat(seq(vec![label, lit(".")]), 0, Some(2)), last])
}

/// RFC 6531 addresses: the [`email`] subset, or a local part of one to sixteen characters
/// (at most 64 octets) among [`ATEXT`] and non-ASCII `ucschar`s with at least one of
/// the latter, `@` and an [`email`] domain.
fn idn_email() -> Expr {
    let ascii = ATEXT;
    let any = class(&[ascii, UCSCHAR].concat());
    // The first non-ASCII character at position i.
    let local = alt((0..16u32)
        .map(|i| {
            seq(vec![
                exactly(class(ascii), i),
                class(UCSCHAR),
                repeat(any.clone(), 0, Some(15 - i)),
            ])
        })
        .collect());
    alt(vec![email(), seq(vec![local, lit("@"), email_domain()])])
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
        if let Some((e, _)) = self.formats.get(name) {
            return Ok(Some(e.clone()));
        }
        let e = match name.as_str() {
            "date" => date(),
            "time" => time(),
            // RFC 3339 §5.6 NOTE: "T" may be written lowercase.
            "date-time" => seq(vec![date(), class(&[r('T', 'T'), r('t', 't')]), time()]),
            "uuid" => uuid(),
            "ipv4" => ipv4(),
            "email" => email(),
            "hostname" => hostname(),
            "ipv6" => ipv6(),
            "uri" => uri(),
            "uri-reference" => uri_reference(),
            "json-pointer" => json_pointer(),
            "duration" => duration(),
            "iri" => iri(),
            "iri-reference" => iri_reference(),
            "idn-email" => idn_email(),
            "idn-hostname" => idn_hostname(),
            "uri-template" => uri_template(),
            "relative-json-pointer" => relative_json_pointer(),
            "regex" => regex(),
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
                    &format!("format {other:?} is not supported (date, time, date-time, duration, uuid, ipv4, ipv6, email, idn-email, hostname, idn-hostname, uri, uri-reference, iri, iri-reference, uri-template, json-pointer, relative-json-pointer, regex are)"),
                )?;
                return Ok(None);
            }
        };
        self.formats.insert(name.clone(), (e.clone(), None));
        Ok(Some(e))
    }

    /// The JSON-escaped form ([`json_escaped`](super::strings::json_escaped)) of `e`, the
    /// grammar [`Builder::format`] gave for `f`, as a call of a rule made once per format
    /// (`to_grammar` has it inlined where it is called from one place only).
    pub(crate) fn escaped_format(&mut self, f: &Value, e: &Expr) -> Option<Expr> {
        let Some(name) = f.as_str().filter(|n| self.formats.contains_key(*n)) else {
            return super::strings::json_escaped(e);
        };
        if let Some((_, Some(rule))) = self.formats.get(name) {
            return rule.map(Expr::Rule);
        }
        let rule = super::strings::json_escaped(e).map(|body| {
            let id = self.add_rule(&format!("format_{}", name.replace('-', "_")), body);
            // Shared by every string of this format: its place is the document's.
            self.pointers[id.index()] = "#".into();
            id
        });
        if let Some((_, slot)) = self.formats.get_mut(name) {
            *slot = Some(rule);
        }
        rule.map(Expr::Rule)
    }
}

/// Writes the body of each format rule of `formats` (`Builder::formats`) that `grammar`
/// calls from one place only (every one when `all`: the grammars users print) out where
/// it is called, as before formats were rules: the first mask inside the string is then
/// walked with what follows it in one automaton (a call costs it: hostname in MaskBench
/// `o65951`, 2.3 → 4.7 ms), and a tool's build (which keeps `always` rules) inlines it too.
pub(crate) fn write_out_single_use(
    grammar: &mut crate::grammar::Grammar,
    formats: &std::collections::HashMap<String, (Expr, Option<Option<crate::grammar::RuleId>>)>,
    all: bool,
) {
    let rules: Vec<usize> = formats
        .values()
        .filter_map(|(_, r)| r.flatten())
        .map(|r| r.index())
        .collect();
    if rules.is_empty() {
        return;
    }
    let mut calls = vec![0u32; grammar.rules.len()];
    for rule in &grammar.rules {
        crate::automaton::lower::for_each_call(&rule.body, &mut |c| calls[c as usize] += 1);
    }
    let bodies: std::collections::HashMap<usize, Expr> = rules
        .iter()
        .filter(|&&r| all || calls[r] == 1)
        .map(|&r| (r, grammar.rules[r].body.clone()))
        .collect();
    if bodies.is_empty() {
        return;
    }
    for rule in &mut grammar.rules {
        // Replaces each call of a rule in `bodies` by its body (which calls none of them).
        let mut stack = vec![&mut rule.body];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Rule(r) => {
                    if let Some(body) = bodies.get(&r.index()) {
                        *e = body.clone();
                    }
                }
                Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
                Expr::Repeat { expr, .. } => stack.push(expr),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::builtin::reference::{accepts, language};

    /// A format met again is the grammar made the first time, and its JSON-escaped form
    /// a call of one rule holding the escape of that grammar: made once per format and
    /// builder.
    #[test]
    fn formats_are_made_once_per_builder() {
        let root = serde_json::json!({});
        let mut b = super::super::Builder::new(&root, Default::default());
        for name in STANDARD_FORMATS {
            let f = Value::String(name.to_string());
            let Ok(Some(first)) = b.format(&f, "#/format") else {
                continue;
            };
            let escaped = b.escaped_format(&f, &first);
            let body = super::super::strings::json_escaped(&first);
            match &escaped {
                Some(Expr::Rule(r)) => assert_eq!(Some(&b.rules[r.index()].body), body.as_ref()),
                other => assert!(other.is_none() && body.is_none(), "{name}: {other:?}"),
            }
            assert_eq!(
                b.format(&f, "#/format").unwrap(),
                Some(first.clone()),
                "{name}"
            );
            let rules = b.rules.len();
            assert_eq!(b.escaped_format(&f, &first), escaped, "{name}");
            assert_eq!(b.rules.len(), rules, "{name}: no second rule");
        }
        assert!(b.formats.len() >= 15, "{} formats", b.formats.len());
    }

    #[test]
    fn a_split_repetition_keeps_its_bounds() {
        for (min, max) in [(16, 64), (0, 48), (0, 1), (3, 3), (5, 7)] {
            let g = language(split_repeat(lit("a"), min, max));
            for n in 0..=max + 2 {
                let text = "a".repeat(n as usize);
                assert_eq!(
                    accepts(&g, &text),
                    (min..=max).contains(&n),
                    "{{{min},{max}}}: {n}"
                );
            }
        }
    }

    #[test]
    fn email_bounds_hold() {
        let g = language(email());
        let local = |n: usize| "a".repeat(n);
        for n in [1, 15, 16, 63, 64] {
            assert!(accepts(&g, &format!("{}@b.cd", local(n))), "{n}");
        }
        assert!(!accepts(&g, &format!("{}@b.cd", local(65))));
        let label = |n: usize| "b".repeat(n);
        for n in [1, 2, 50] {
            assert!(accepts(&g, &format!("a@{}.cd", label(n))), "{n}");
        }
        assert!(!accepts(&g, &format!("a@{}.cd", label(51))));
        assert!(!accepts(&g, "a@-b.cd"));
        assert!(!accepts(&g, "a@b-.cd"));
        assert!(accepts(&g, "a@b-c.cd"));
    }

    /// Strings of one format share one rule of its grammar when there are several of them;
    /// one string of a format has the rule's body written out where it is called (as
    /// before formats were rules: its first mask is walked with what follows the string),
    /// and so do grammars written for users to read.
    #[test]
    fn a_format_used_twice_is_one_rule_and_once_is_inlined() {
        let uri = serde_json::json!({"type": "string", "format": "uri"});
        for (uses, form) in [1, 2, 3]
            .into_iter()
            .map(|u| (u, super::super::Form::Compact))
            .chain([(2, super::super::Form::Written)])
        {
            let properties: serde_json::Map<String, Value> =
                (0..uses).map(|i| (format!("p{i}"), uri.clone())).collect();
            let schema = serde_json::json!({"type": "object", "properties": properties});
            let limits = crate::Limits::default();
            let options = Default::default();
            let g = super::super::to_grammar(&schema, &options, &limits, true, form).unwrap();
            let rules: Vec<usize> = (0..g.grammar.rules.len())
                .filter(|&r| g.grammar.rules[r].name.starts_with("format_uri"))
                .collect();
            assert_eq!(rules.len(), 1, "{uses} uses");
            let mut calls = 0;
            for rule in &g.grammar.rules {
                crate::automaton::lower::for_each_call(&rule.body, &mut |c| {
                    calls += usize::from(c as usize == rules[0]);
                });
            }
            let shared = uses > 1 && form == super::super::Form::Compact;
            assert_eq!(
                calls,
                if shared { uses } else { 0 },
                "{uses} uses, {form:?}"
            );
        }
    }
}
