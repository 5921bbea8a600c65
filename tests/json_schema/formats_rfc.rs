//! Every `format` against its RFC (issue 23, item 7): per format, ten instances the RFC
//! allows and ten it does not, each with the clause beside it, fed to the compiled
//! grammar token by token (a byte vocabulary: one token a byte, each checked against the
//! token bitmask too) and to the `jsonschema` crate with format validation on, as an
//! oracle where it agrees with the RFC (the rows where it does not say so).
//!
//! Verdicts: `A` the RFC allows it and the grammar accepts it; `S` the RFC allows it, but
//! it lies outside the subset the module documents (`src/json_schema/formats.rs`), so the
//! grammar refuses it; `R` the RFC does not allow it, and the grammar refuses it.
//! Soundness is absolute (no `R` is ever accepted); `S` rows show where the subsets stop.

use crate::common;

use std::sync::Arc;

use serde_json::{json, Value};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::{CompiledGrammar, GrammarMatcher};

use common::{byte_compiler, BYTE_STOP};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V {
    /// Valid by the RFC, accepted.
    A,
    /// Valid by the RFC, outside the documented subset: refused.
    S,
    /// Invalid by the RFC: refused.
    R,
}
use V::{A, R, S};

/// Whether `g` accepts the JSON string of `s` byte by byte, each byte (token) also
/// allowed by the bitmask before it is accepted, then the stop token.
fn accepts(g: &Arc<CompiledGrammar>, s: &str) -> bool {
    let text = Value::String(s.to_string()).to_string();
    let mut m = GrammarMatcher::new(g.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    for t in text.bytes().map(u32::from).chain([BYTE_STOP]) {
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        let allowed = tokensieve::mask::is_token_allowed(&mask, t);
        let accepted = m.accept_token(t);
        assert_eq!(
            allowed, accepted,
            "mask and accept disagree on {t} in {text}"
        );
        if !accepted {
            return false;
        }
    }
    m.is_terminated()
}

/// Checks the rows of `format`; `oracle_differs` lists the instances on which the
/// `jsonschema` crate's verdict is not the RFC's (asserted, so the list stays true).
fn check(format: &str, rows: &[(&str, V)], oracle_differs: &[&str]) {
    check_rows(format, rows, Some(oracle_differs))
}

/// As [`check`] for a format the `jsonschema` crate does not check (it accepts every
/// string as `idn-email` and `idn-hostname` in the build tokensieve uses, without its
/// default features): no oracle.
fn check_without_oracle(format: &str, rows: &[(&str, V)]) {
    check_rows(format, rows, None)
}

fn check_rows(format: &str, rows: &[(&str, V)], oracle_differs: Option<&[&str]>) {
    let schema = json!({"type": "string", "format": format});
    let g = byte_compiler()
        .compile_json_schema(&schema, &JsonSchemaOptions::default())
        .unwrap_or_else(|e| panic!("{format}: {e}"));
    let oracle = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("oracle");
    let mut wrong = Vec::new();
    for &(s, v) in rows {
        let got = accepts(&g, s);
        if got != (v == A) {
            wrong.push(format!("{s:?}: expected {v:?}, grammar accepts: {got}"));
        }
        let Some(oracle_differs) = oracle_differs else {
            continue;
        };
        let rfc_valid = v != R;
        let oracle_valid = oracle.is_valid(&Value::String(s.to_string()));
        if (oracle_valid == rfc_valid) == oracle_differs.contains(&s) {
            wrong.push(format!(
                "{s:?}: RFC {rfc_valid}, jsonschema {oracle_valid}, listed as differing: {}",
                oracle_differs.contains(&s)
            ));
        }
    }
    for s in oracle_differs.unwrap_or_default() {
        assert!(rows.iter().any(|(r, _)| r == s), "{s:?} is no row");
    }
    let valid = rows.iter().filter(|(_, v)| *v != R).count();
    assert!(
        valid >= 10 && rows.len() - valid >= 10,
        "{format}: 10 + 10 rows"
    );
    assert!(wrong.is_empty(), "{format}:\n{}", wrong.join("\n"));
}

#[test]
fn date() {
    check(
        "date",
        &[
            ("2024-02-29", A),           // RFC 3339 §5.7 and appendix C: 2024 is a leap year
            ("2000-02-29", A),           // appendix C: divisible by 400
            ("1600-02-29", A),           // appendix C: divisible by 400
            ("0000-02-29", A),           // appendix C: year 0 is divisible by 400
            ("1999-12-31", A),           // §5.6 full-date
            ("0001-01-01", A),           // §5.6 date-fullyear = 4DIGIT
            ("9999-12-31", A),           // §5.6 date-fullyear = 4DIGIT
            ("2023-04-30", A),           // §5.7: April has 30 days
            ("2023-01-31", A),           // §5.7: January has 31 days
            ("1970-01-01", A),           // §5.6 full-date
            ("2023-02-29", R),           // §5.7: not a leap year
            ("1900-02-29", R),           // appendix C: divisible by 100, not by 400
            ("2023-04-31", R),           // §5.7: April has 30 days
            ("2023-13-01", R),           // §5.6 date-month = 01-12
            ("2023-00-10", R),           // §5.6 date-month = 01-12
            ("2023-01-00", R),           // §5.6 date-mday = 01-28/29/30/31
            ("2023-1-01", R),            // §5.6 date-month = 2DIGIT
            ("23-01-01", R),             // §5.6 date-fullyear = 4DIGIT
            ("2023/01/01", R),           // §5.6 full-date separators are "-"
            ("2023-01-01T00:00:00Z", R), // §5.6: a date-time is not a full-date
            ("2023-01-32", R),           // §5.7: at most 31 days
        ],
        &[],
    );
}

#[test]
fn time() {
    check(
        "time",
        &[
            ("08:30:06Z", A),                // RFC 3339 §5.6 partial-time time-offset
            ("23:59:59.999999999+14:00", A), // §5.6 time-secfrac, time-numoffset
            ("00:00:00z", A),                // §5.6 NOTE: "Z" may be lowercase
            ("12:34:56-00:00", A),           // §4.3 unknown local offset
            ("23:20:50.52Z", A),             // §5.6 time-secfrac
            ("08:30:06+00:20", A),           // §5.6 time-numoffset
            ("23:59:60Z", A), // §5.6 time-second 60, §5.7: a leap second at 23:59 UTC
            ("23:59:60.5+00:00", A), // §5.7: a leap second, zero offset
            ("00:00:00+23:59", A), // §5.6 time-numoffset hours 00-23
            ("19:05:00-08:00", A), // §5.6 time-numoffset
            ("01:29:60+01:30", S), // §5.7: a leap second at 23:59 UTC, non-zero offset
            ("24:00:00Z", R), // §5.6 time-hour = 00-23
            ("00:60:00Z", R), // §5.6 time-minute = 00-59
            ("00:00:61Z", R), // §5.6 time-second = 00-60
            ("22:59:60Z", R), // §5.7: a leap second only ends the UTC day
            ("12:00:00", R),  // §5.6 full-time needs a time-offset
            ("08:30:06 PST", R), // §5.6 time-offset = "Z" / time-numoffset
            ("8:30:06Z", R),  // §5.6 time-hour = 2DIGIT
            ("01:02:03+24:00", R), // §5.6 time-numoffset hour = time-hour
            ("01:02:03Z+00:30", R), // §5.6: one time-offset
            ("12:00:00.Z", R), // §5.6 time-secfrac = "." 1*DIGIT
            ("01:01:01,1111", R), // §5.6: "," is ISO 8601, not RFC 3339
        ],
        &[],
    );
}

#[test]
fn date_time() {
    check(
        "date-time",
        &[
            ("1963-06-19T08:30:06.283185Z", A),   // RFC 3339 §5.6 date-time
            ("1963-06-19t08:30:06z", A),          // §5.6 NOTE: "T" and "Z" may be lowercase
            ("2024-02-29T00:00:00+00:00", A),     // §5.7 leap year
            ("1998-12-31T23:59:60Z", A),          // §5.7 leap second at 23:59 UTC
            ("1990-12-31T15:59:59-08:00", A),     // §5.6 time-numoffset
            ("2000-01-01T00:00:00.0Z", A),        // §5.6 time-secfrac
            ("1937-01-01T12:00:27.87+00:20", A),  // §5.8 example
            ("1985-04-12T23:20:50.52Z", A),       // §5.8 example
            ("1996-12-19T16:39:57-08:00", A),     // §5.8 example
            ("1990-12-31T23:59:60Z", A),          // §5.8 example (leap second)
            ("1990-12-31T15:59:60-08:00", S),     // §5.8 example: leap second, non-zero offset
            ("2023-02-29T00:00:00Z", R),          // §5.7: not a leap year
            ("1963-06-19T08:30:06", R),           // §5.6 full-time needs a time-offset
            ("1963-06-19 08:30:06Z", R),          // §5.6 date-time = full-date "T" full-time
            ("1963-06-19T08:30:06.Z", R),         // §5.6 time-secfrac = "." 1*DIGIT
            ("1998-12-31T22:59:60Z", R),          // §5.7: leap second not at 23:59 UTC
            ("1990-02-31T15:59:59.123-08:00", R), // §5.7: February has no 31st
            ("1963-06-19T24:00:00Z", R),          // §5.6 time-hour = 00-23
            ("2013-350T01:01:01Z", R),            // §5.6: ordinal dates are ISO 8601 only
            ("1963-06-19T08:30:06+0800", R),      // §5.6 time-numoffset has ":"
            ("1963-06-19T08:30Z", R),             // §5.6 partial-time has seconds
        ],
        &[],
    );
}

#[test]
fn duration() {
    check(
        "duration",
        &[
            ("P4DT12H30M5S", A), // RFC 3339 appendix A: dur-date dur-time
            ("P1Y2M3D", A),      // dur-year = 1*DIGIT "Y" [dur-month]
            ("PT1S", A),         // dur-time = "T" dur-second
            ("P3W", A),          // dur-week
            ("PT36H", A),        // dur-hour
            ("P1M", A),          // dur-month
            ("P1Y", A),          // dur-year
            ("PT0S", A),         // dur-second = 1*DIGIT "S"
            ("P1DT1M", A),       // dur-time = "T" dur-minute
            ("P2MT30M", A),      // dur-month then dur-time
            ("P1234567890D", S), // 1*DIGIT: more than the nine digits of the subset
            ("P", R),            // duration = "P" (dur-date / dur-time / dur-week)
            ("PT", R),           // dur-time needs a unit
            ("P1D2H", R),        // hours only after "T"
            ("P1Y2D", R),        // dur-year = "Y" [dur-month]: days need a month
            ("P2S", R),          // seconds only after "T"
            ("P1W2D", R),        // dur-week stands alone
            ("PT1H1S", R),       // dur-hour = "H" [dur-minute]: seconds need minutes
            ("1D", R),           // starts with "P"
            ("P1.5D", R),        // 1*DIGIT: no fractions
            ("P-1D", R),         // 1*DIGIT: no sign
        ],
        &[],
    );
}

#[test]
fn uuid() {
    check(
        "uuid",
        &[
            ("2eb8aa08-aa98-11ea-b4aa-73b441d16380", A), // RFC 9562 §4 (RFC 4122 §3) string form
            ("2EB8AA08-AA98-11EA-B4AA-73B441D16380", A), // §4: hex is case-insensitive on input
            ("2eb8aa08-AA98-11ea-B4Aa-73B441D16380", A), // §4: mixed case
            ("00000000-0000-0000-0000-000000000000", A), // §5.9 Nil UUID
            ("ffffffff-ffff-ffff-ffff-ffffffffffff", A), // §5.10 Max UUID
            ("98d80576-482e-427f-8434-7f86890ab222", A), // §5.4 version 4
            ("017f22e2-79b0-7cc3-98c4-dc0c0c07398f", A), // §5.7 version 7
            ("1ec9414c-232a-6b00-b3c8-9f6bdeced846", A), // §5.6 version 6
            ("a8098c1a-f86e-11da-bd1a-00112444be1e", A), // §5.1 version 1 (RFC 4122 appendix B)
            ("99999999-9999-9999-9999-999999999999", A), // §4 ABNF: any hexOctets
            ("2eb8aa08-aa98-11ea-b4aa-73b441d1638", R),  // §4: 12 digits in the last group
            ("2eb8aa08-aa98-11ea-b4aa-73b441d163800", R), // §4: 12 digits in the last group
            ("2eb8aa08aa9811eab4aa73b441d16380", R),     // §4: the hyphens are part of the form
            ("2eb8aa08-aa9811ea-b4aa-73b441d16380", R),  // §4: five groups
            ("2eb8aa0-8aa98-11ea-b4aa-73b441d16380", R), // §4: 8-4-4-4-12
            ("{2eb8aa08-aa98-11ea-b4aa-73b441d16380}", R), // §4: no braces
            ("urn:uuid:2eb8aa08-aa98-11ea-b4aa-73b441d16380", R), // §4: the URN is not the string
            ("2eb8aa08-aa98-11ea-b4aa-73b441d1638g", R), // §4 HEXDIG
            ("", R),                                     // §4: 36 characters
            ("2eb8aa08_aa98_11ea_b4aa_73b441d16380", R), // §4: "-" separators
        ],
        &[],
    );
}

#[test]
fn ipv4() {
    check(
        "ipv4",
        &[
            ("192.168.0.1", A),     // RFC 2673 §3.2 dotted-quad
            ("0.0.0.0", A),         // dec-octet 0
            ("255.255.255.255", A), // dec-octet 255
            ("127.0.0.1", A),       // dotted-quad
            ("10.0.0.254", A),      // dotted-quad
            ("1.2.3.4", A),         // dotted-quad
            ("8.8.8.8", A),         // dotted-quad
            ("100.64.0.1", A),      // dotted-quad
            ("249.250.251.252", A), // dec-octet 250-255
            ("9.99.199.200", A),    // one, two and three digits
            ("256.0.0.1", R),       // dec-octet at most 255
            ("1.2.3", R),           // four octets
            ("1.2.3.4.5", R),       // four octets
            ("01.2.3.4", R),        // dec-octet: no leading zero
            ("1.2.3.04", R),        // dec-octet: no leading zero
            ("0x7f.0.0.1", R),      // decimal only
            ("1.2.3.4 ", R),        // nothing after
            ("1..2.3", R),          // an octet between dots
            ("a.b.c.d", R),         // digits
            ("1.2.3.4/24", R),      // no prefix length
        ],
        &[],
    );
}

#[test]
fn ipv6() {
    check(
        "ipv6",
        &[
            ("::1", A),                          // RFC 4291 §2.2 form 2, §2.5.3 loopback
            ("::", A),                           // §2.2 form 2, §2.5.2 unspecified
            ("1:2:3:4:5:6:7:8", A),              // §2.2 form 1
            ("2001:DB8:0:0:8:800:200C:417A", A), // §2.2 form 1 example
            ("FF01::101", A),                    // §2.2 form 2 example
            ("1:2:3:4:5:6:7::", A),              // §2.2 form 2: "::" for one group
            ("0:0:0:0:0:0:13.1.68.3", A),        // §2.2 form 3 example
            ("::13.1.68.3", A),                  // §2.2 form 3 example, compressed
            ("::FFFF:129.144.52.38", A),         // §2.2 form 3 example, §2.5.5.2 mapped
            ("1000:1000:1000:1000:1000:1000:255.255.255.255", A), // §2.2 form 3
            ("64:ff9b::192.0.2.33", A),          // §2.2 form 3 (RFC 6052 prefix)
            ("1:2:3:4:5::1.2.3.4", A),           // §2.2 form 3: five groups, "::", IPv4
            ("12345::", R),                      // §2.2: one to four hex digits a group
            ("1:2:3:4:5:6:7", R),                // §2.2 form 1: eight groups
            ("1::2::3", R),                      // §2.2: "::" at most once
            (":2:3:4:5:6:7:8", R),               // §2.2: no lone leading ":"
            ("1:2:3:4:5:6:7:8:9", R),            // §2.2: eight groups
            ("::ffff:192.168.0.256", R),         // §2.2 form 3: decimal octets at most 255
            ("1:2:3:4:5:6:7:1.2.3.4", R),        // §2.2 form 3: six groups before IPv4
            ("1:2:3:4:5:6::1.2.3.4", R),         // §2.2 form 3: too many groups with "::"
            ("fe80::1%eth0", R),                 // §2.2: zone ids are RFC 6874, not ipv6
            ("::1/128", R),                      // §2.3: a prefix is no address
            ("1:2:3:4:5:6:1.2.3", R),            // §2.2 form 3: four decimal octets
            ("127.0.0.1", R),                    // §2.2: an IPv4 address is no IPv6 one
        ],
        &[],
    );
}

#[test]
fn email() {
    check(
        "email",
        &[
            ("joe.bloggs@example.com", A),    // RFC 5321 §4.1.2 Mailbox, Dot-string
            ("a@b.co", A),                    // §4.1.2 Domain
            ("first+tag@sub.example.org", A), // RFC 5322 §3.2.3 atext "+"
            ("o'reilly@example.com", A),      // RFC 5322 §3.2.3 atext "'"
            ("user%route@example.com", A),    // RFC 5322 §3.2.3 atext "%"
            ("x_y-z@my-domain.io", A),        // atext "_" "-", §4.1.2 Ldh-str
            ("john.doe.jr@mail.example.co.uk", A), // §4.1.2 Dot-string, sub-domains
            ("{test}@example.com", A),        // RFC 5322 §3.2.3 atext "{" "}"
            ("#!$%&'*+-/=?^_`{}|~@example.org", A), // RFC 5322 §3.2.3 every atext symbol
            ("TEST@EXAMPLE.COM", A),          // §4.1.2 ALPHA either case
            ("\"joe bloggs\"@example.com", S), // §4.1.2 Quoted-string
            ("joe@[192.168.2.1]", S),         // §4.1.3 address-literal
            ("joe@localhost", S),             // §4.1.2 Domain of one sub-domain
            ("joe.@example.com", R),          // §4.1.2 Dot-string: no trailing dot
            (".joe@example.com", R),          // §4.1.2 Dot-string: no leading dot
            ("jo..e@example.com", R),         // §4.1.2 Dot-string: no empty atom
            ("joe@", R),                      // §4.1.2 Mailbox needs a Domain
            ("@example.com", R),              // §4.1.2 Mailbox needs a Local-part
            ("joe", R),                       // §4.1.2 Mailbox has "@"
            ("joe@exa mple.com", R),          // §4.1.2 Ldh-str: no space
            ("joe@-example.com", R),          // §4.1.2 sub-domain = Let-dig [Ldh-str]
            ("joe@example-.com", R),          // §4.1.2 Ldh-str ends with Let-dig
            ("jo e@example.com", R),          // §4.1.2 Atom: no space
            ("joe@@example.com", R),          // §4.1.2 one "@"
        ],
        &[],
    );
}

#[test]
fn idn_email() {
    check_without_oracle(
        "idn-email",
        &[
            ("joe.bloggs@example.com", A),     // RFC 6531 §3.3: an RFC 5321 Mailbox
            ("用户@example.com", A),           // RFC 6531 §3.3 atext =/ UTF8-non-ascii
            ("χρήστης@example.com", A),        // RFC 6531 §3.3 UTF8-non-ascii
            ("o'reilly@example.com", A),       // RFC 5322 §3.2.3 atext "'"
            ("pelé@example.com", A),           // RFC 6531 §3.3 mixed ASCII and non-ASCII
            ("a@b.co", A),                     // RFC 5321 §4.1.2
            ("first+tag@sub.example.org", A),  // atext "+"
            ("üñîçøðé@example.com", A),        // RFC 6531 §3.3
            ("x_y-z@my-domain.io", A),         // atext, Ldh-str
            ("TEST@EXAMPLE.COM", A),           // §4.1.2 ALPHA either case
            ("用户@例子.广告", S),             // RFC 6531 §3.3 sub-domain =/ U-label
            ("\"joe bloggs\"@example.com", S), // RFC 5321 §4.1.2 Quoted-string
            ("joe.@example.com", R),           // Dot-string: no trailing dot
            (".用户@example.com", R),          // Dot-string: no leading dot
            ("jo..e@example.com", R),          // Dot-string: no empty atom
            ("用户@", R),                      // Mailbox needs a Domain
            ("@example.com", R),               // Mailbox needs a Local-part
            ("用户", R),                       // Mailbox has "@"
            ("用 户@example.com", R),          // Atom: no space
            ("joe@@example.com", R),           // one "@"
            ("joe@exa mple.com", R),           // Ldh-str: no space
            ("joe@example..com", R),           // sub-domains are not empty
        ],
    );
}

#[test]
fn hostname() {
    let label63 = format!("{}.com", "a".repeat(63));
    let label64 = format!("{}.com", "a".repeat(64));
    // 255 characters: four labels of 63 and three dots.
    let a63 = "a".repeat(63);
    let too_long = [a63.as_str(); 4].join(".");
    check(
        "hostname",
        &[
            ("example.com", A),                       // RFC 1123 §2.1, RFC 952 <hname>
            ("localhost", A),                         // RFC 952: one label
            ("a.b.c.example.com", A),                 // RFC 952 <hname> = <name>*["."<name>]
            ("www.dept.university.example.ac.uk", A), // RFC 952 <hname>, six labels
            ("1host.example.org", A),                 // RFC 1123 §2.1: a digit may start a label
            ("my-host", A),                           // RFC 952: inner hyphens
            ("a", A),                                 // RFC 952 <name>, one character
            ("A.B", A),                               // RFC 952: letters either case
            (&label63, A),                            // RFC 1123 §2.1: labels up to 63
            ("ab-cd.x-y.example", A),                 // RFC 952 <name>
            ("example.3com", S),                      // RFC 1123 §2.1 (the subset ends in a letter)
            ("xn--bcher-kva.example", S),             // RFC 5890 §2.3.2.1 A-label (not checked)
            ("-example.com", R),                      // RFC 952: no leading hyphen
            ("example-.com", R),                      // RFC 952: no trailing hyphen
            ("exa_mple.com", R),                      // RFC 952: letters, digits, hyphens
            ("example..com", R),                      // RFC 952: no empty label
            ("exa mple.com", R),                      // RFC 952: no space
            (&label64, R),                            // RFC 1123 §2.1: labels up to 63
            (".example.com", R),                      // RFC 952: no empty label
            ("example.com/", R),                      // RFC 952: no "/"
            (&too_long, R),                           // RFC 1123 §2.1: at most 255 (DNS: 253)
            ("ex!ample.com", R),                      // RFC 952: no "!"
        ],
        &[],
    );
}

#[test]
fn idn_hostname() {
    check_without_oracle(
        "idn-hostname",
        &[
            ("example.com", A),           // RFC 5890 §2.3.1 NR-LDH labels
            ("bücher.example", A),        // RFC 5890 §2.3.2.1 U-label
            ("münchen.de", A),            // U-label
            ("例え.jp", A),               // U-label of CJK (RFC 5892 PVALID)
            ("россия.рф", A),             // U-labels of Cyrillic
            ("ελλάδα.gr", A),             // U-label of Greek
            ("한국.kr", A),               // U-label of Hangul
            ("ひらがな.jp", A),           // U-label of hiragana
            ("my-host", A),               // NR-LDH label
            ("sub.bücher.de", A),         // three labels
            ("a.b.c.bücher.de", S),       // RFC 5890: more labels than the subset's three
            ("xn--bcher-kva.example", S), // RFC 5890 §2.3.2.1 A-label (not checked)
            ("ex--ample.com", R),         // RFC 5891 §4.2.3.1: no "--" in positions 3-4
            ("-bücher.de", R),            // RFC 5891 §4.2.3.1: no leading hyphen
            ("bücher-.de", R),            // RFC 5891 §4.2.3.1: no trailing hyphen
            ("bü cher.de", R),            // RFC 5892: space is DISALLOWED
            ("bücher..de", R),            // RFC 5890 §2.3.2.1: no empty label
            ("exa_mple.com", R),          // RFC 5892: "_" is DISALLOWED
            ("a\u{200d}b.com", R),        // RFC 5892 appendix A.2: ZWJ only after a virama
            ("ÄBC.com", R),               // RFC 5892: uppercase letters are DISALLOWED
            ("\u{0640}.com", R),          // RFC 5892 §2.6: tatweel is DISALLOWED
            ("ex!ample.com", R),          // RFC 5892: "!" is DISALLOWED
        ],
    );
}

#[test]
fn uri() {
    check(
        "uri",
        &[
            ("file:///etc/hosts", A), // RFC 3986 §3.2, §3.3: an empty authority
            ("http://example.com/path?q=1#frag", A), // §3 URI
            ("https://user:pass@example.com:8443/", A), // §3.2.1 userinfo, §3.2.3 port
            ("http://[::1]:80/", A),  // §3.2.2 IP-literal
            ("ldap://[2001:db8::7]/c=GB?objectClass?one", A), // §1.1.2 example
            ("mailto:John.Doe@example.com", A), // §1.1.2 example, path-rootless
            ("urn:oasis:names:specification:docbook:dtd:xml:4.1.2", A), // §1.1.2 example
            ("tel:+1-816-555-1212", A), // §1.1.2 example
            ("HTTP://EXAMPLE.COM/", A), // §3.1: schemes are case-insensitive
            ("http://example.com:65535/", A), // §3.2.3 port = *DIGIT
            ("foo://example.com:8042/over/there?name=ferret#nose", A), // §3 example
            ("http://my_host.example/", A), // §3.2.2 reg-name: unreserved "_"
            ("s:/a/b", A),            // §3.3 path-absolute
            ("about:", A),            // §3 hier-part = path-empty
            ("http://[::ffff:1.2.3.4]/", A), // §3.2.2 IPv6address with ls32
            ("http://example.com:123456/", S), // §3.2.3 port = *DIGIT (the subset: 5 digits)
            ("//example.com", R),     // §4.2: a relative reference
            ("http://exa mple.com", R), // §2: no space
            ("http://example.com/%zz", R), // §2.1 pct-encoded = "%" HEXDIG HEXDIG
            ("1http://x", R),         // §3.1 scheme starts with ALPHA
            ("http://[::1/", R),      // §3.2.2 IP-literal ends with "]"
            ("http://example.com/a b", R), // §3.3: no space
            (":no-scheme", R),        // §3.1: a scheme of 1+ characters
            ("", R),                  // §3: a scheme and ":"
            ("http://[1::2::3]/", R), // §3.2.2 IPv6address: one "::"
            ("http://example.com/ä", R), // §2: non-ASCII (an IRI, RFC 3987)
            ("http://example.com#a#b", R), // §3.5 fragment: no second "#"
            ("http://user@@host/", R), // §3.2.1 userinfo: no "@"
        ],
        &[],
    );
}

#[test]
fn uri_reference() {
    check(
        "uri-reference",
        &[
            ("file:///etc/hosts", A),      // RFC 3986 §4.1: a URI
            ("//example.com/path", A),     // §4.2 network-path reference
            ("/absolute/path", A),         // §4.2 absolute-path reference
            ("relative/path", A),          // §4.2 relative-path reference
            ("../up", A),                  // §5.2.4 dot segments
            ("?query", A),                 // §4.2 path-empty with a query
            ("#fragment", A),              // §4.4 same-document reference
            ("", A),                       // §4.2 path-empty
            ("./this:that", A),            // §4.2: a colon after the first segment
            ("//[::1]:8080", A),           // §4.2 network-path, IP-literal, port
            ("//", A),                     // §4.2: "//" with an empty authority
            ("\\\\WINDOWS\\fileshare", R), // §2: no "\"
            ("http://exa mple.com", R),    // §2: no space
            ("%zz", R),                    // §2.1 pct-encoded
            ("a b", R),                    // §2: no space
            ("#a#b", R),                   // §3.5 fragment: no second "#"
            ("http://[::1", R),            // §3.2.2 IP-literal ends with "]"
            ("ä", R),                      // §2: non-ASCII
            ("//user@@host", R),           // §3.2.1 userinfo: no "@"
            ("//example.com:80x", R),      // §3.2.3 port = *DIGIT
            ("[::1]", R),                  // §4.2 segment-nz-nc: no "["
        ],
        &[],
    );
}

#[test]
fn iri() {
    check(
        "iri",
        &[
            ("http://ƒøø.ßår/?∂éœ=πîx#πîüx", A), // RFC 3987 §2.2 IRI
            ("file:///etc/hosts", A),            // §2.2 iauthority may be empty
            ("http://例え.テスト/パス", A),      // §2.2 ireg-name, ipath of ucschar
            ("http://[::1]/", A),                // §2.2 IP-literal
            ("https://user@例え.jp:8080/a", A),  // §2.2 iuserinfo, port
            ("urn:isbn:0451450523", A),          // §2.2 ipath-rootless
            ("mailto:用户@例子.广告", A),        // §2.2 ipath-rootless of ucschar
            ("http://example.com/ü?q=ü#ü", A),   // §2.2 iquery, ifragment
            ("http://[::ffff:1.2.3.4]/", A),     // RFC 3986 §3.2.2 IPv6address with ls32
            ("foo:", A),                         // §2.2 ipath-empty
            ("//ƒøø.ßår/?∂éœ=πîx#πîüx", R),      // §2.2: an IRI has a scheme
            ("http://exa mple.com", R),          // §2.2: no space
            ("http://example.com/\u{200e}", R),  // §4.1: no bidirectional formatting characters
            ("http://[1::2::3]/", R),            // RFC 3986 §3.2.2: one "::"
            ("http://example.com/%zz", R),       // §2.2 pct-encoded
            ("1a:b", R),                         // §2.2 scheme starts with ALPHA
            ("http://example.com/\u{fffe}", R),  // §2.2 ucschar excludes U+FFFE
            ("http://example.com/<>", R),        // §2.2: no "<" ">"
            ("", R),                             // §2.2: a scheme and ":"
            ("http://a b/", R),                  // §2.2 ireg-name: no space
        ],
        &["http://example.com/\u{200e}"],
    );
}

#[test]
fn iri_reference() {
    check(
        "iri-reference",
        &[
            ("//ƒøø.ßår/?∂éœ=πîx#πîüx", A), // RFC 3987 §2.2 irelative-ref, network path
            ("/abc/ü", A),                  // §2.2 ipath-absolute
            ("ü", A),                       // §2.2 ipath-noscheme
            ("?ü", A),                      // §2.2 ipath-empty, iquery
            ("#ƒrägmênt", A),               // §2.2 ifragment
            ("", A),                        // §2.2 ipath-empty
            ("../ü", A),                    // §2.2 ipath-noscheme
            ("http://ƒøø.ßår/", A),         // §2.2 IRI
            ("file:///etc/hosts", A),       // §2.2 IRI, empty iauthority
            ("//[::1]", A),                 // §2.2 IP-literal
            ("\\\\WINDOWS\\filëshare", R),  // §2.2: no "\"
            ("#ƒräg\\mênt", R),             // §2.2 ifragment: no "\"
            ("a b", R),                     // §2.2: no space
            ("%zz", R),                     // §2.2 pct-encoded
            ("http://[::1", R),             // RFC 3986 §3.2.2 IP-literal ends with "]"
            ("#a#b", R),                    // §2.2 ifragment: no second "#"
            ("1ü:x", R),                    // §2.2 ipath-noscheme: no ":" in the first segment
            ("[x]", R),                     // §2.2 isegment-nz-nc: no "["
            ("<a>", R),                     // §2.2: no "<" ">"
            ("http://a/\u{200f}", R),       // §4.1: no bidirectional formatting characters
        ],
        &["http://a/\u{200f}"],
    );
}

#[test]
fn uri_template() {
    check(
        "uri-template",
        &[
            ("http://example.com/dictionary/{term:1}/{term}", A), // RFC 6570 §2
            ("http://example.com/dictionary", A),                 // §2.1 literals only
            ("{var}", A),                                         // §2.2 expression
            ("{+path}/here", A),                                  // §2.2 operator "+"
            ("{#x,hello,y}", A),                                  // §2.2 "#", §2.3 variable-list
            ("X{.list*}", A),                                     // §2.4.2 explode
            ("{/var,x}/here", A),                                 // §2.2 operator "/"
            ("{;x,y,empty}", A),                                  // §2.2 operator ";"
            ("{?x,y}", A),                                        // §2.2 operator "?"
            ("{&x}", A),                                          // §2.2 operator "&"
            ("{var:30}", A),                                      // §2.4.1 prefix
            ("{x.y}", A),                                         // §2.3 varname with "."
            ("%25{a}", A),                                        // §2.1 pct-encoded literal
            ("{=var}", S),                                        // §2.2 op-reserve (reserved)
            ("{term", R),                                         // §2.2: "}" closes
            ("{}", R),                                            // §2.2 variable-list of 1+
            ("var}", R),                                          // §2.1: no "}" literal
            ("{var:0}", R),     // §2.4.1 max-length = %x31-39 0*3DIGIT
            ("{var:10000}", R), // §2.4.1 max-length < 10000
            ("{a b}", R),       // §2.3 varchar: no space
            ("{ab}}", R),       // §2.1: no "}" literal
            ("a<b", R),         // §2.1: no "<" literal
            ("{$x}", R),        // §2.2: "$" is no operator
            ("{x,}", R),        // §2.3 varspec after ","
            ("a\"b", R),        // §2.1: no '"' literal
        ],
        &[],
    );
}

#[test]
fn json_pointer() {
    check(
        "json-pointer",
        &[
            ("", A),                    // RFC 6901 §5: the whole document
            ("/foo", A),                // §5 example
            ("/foo/0", A),              // §5 example
            ("/", A),                   // §5 example: the empty key
            ("/a~1b", A),               // §5 example: "~1" is "/"
            ("/c%d", A),                // §5 example
            ("/e^f", A),                // §5 example
            ("/g|h", A),                // §5 example
            ("/i\\j", A),               // §5 example: a backslash
            ("/k\"l", A),               // §5 example: a quote
            ("/ ", A),                  // §5 example: a space
            ("/m~0n", A),               // §5 example: "~0" is "~"
            ("/foo\u{0}bar\n\tbaz", A), // §3 unescaped: any code point but "/" and "~"
            ("/foo/bar/😎", A),         // §3 unescaped
            ("/foo/bar~", R),           // §3 escaped = "~" ( "0" / "1" )
            ("#", R),                   // §6: the URI fragment form is no pointer
            ("#/", R),                  // §6: the URI fragment form
            ("a", R),                   // §3 json-pointer = *( "/" reference-token )
            ("0", R),                   // §3: starts with "/"
            ("/~2", R),                 // §3 escaped
            ("/~", R),                  // §3 escaped
            ("a/a", R),                 // §3: starts with "/"
            ("/~~", R),                 // §3 escaped
            ("/~0~", R),                // §3 escaped
        ],
        &[],
    );
}

#[test]
fn relative_json_pointer() {
    check(
        "relative-json-pointer",
        &[
            ("1", A),             // draft-bhutton-relative-json-pointer-00 §3
            ("0/foo/bar", A),     // §3: then a JSON pointer
            ("2/0/baz/1/zip", A), // §3
            ("0#", A),            // §3: "#" names the key or index
            ("120/foo/bar", A),   // §3 non-negative-integer
            ("100", A),           // §3 non-negative-integer
            ("0//", A),           // §3, RFC 6901: empty reference tokens
            ("0+1/foo", A),       // §3 index-manipulation "+"
            ("1-1#", A),          // §3 index-manipulation "-"
            ("3+10", A),          // §3 index-manipulation, empty pointer
            ("/foo/bar", R),      // §3: starts with a non-negative-integer
            ("-1/foo/bar", R),    // §3 non-negative-integer: no sign
            ("+1/foo/bar", R),    // §3 non-negative-integer: no sign
            ("0##", R),           // §3: "#" alone
            ("01/a", R),          // §3 non-negative-integer: no leading zero
            ("01#", R),           // §3 non-negative-integer: no leading zero
            ("", R),              // §3: not empty
            ("0/~2", R),          // RFC 6901 §3 escaped
            ("1#/foo/bar", R),    // §3: "#" ends it
            ("1\n", R),           // §3: nothing after
            ("0+/a", R),          // §3 index-manipulation needs an integer
            ("0+01", R),          // §3 index-manipulation: no leading zero
        ],
        &["0+1/foo", "1-1#", "3+10"],
    );
}

#[test]
fn regex() {
    check(
        "regex",
        &[
            ("^[a-z]+$", A),          // ECMA-262 §22.2.1 Pattern
            ("\\d{3}-\\d{4}", A),     // §22.2.1 CharacterClassEscape, Quantifier
            ("(ab|cd)*", A),          // §22.2.1 Disjunction, Atom group
            ("a.b?c+", A),            // §22.2.1 Quantifier
            ("[A-Za-z0-9_]{1,8}", A), // §22.2.1 ClassRanges
            ("x(?:yz)+", A),          // §22.2.1 non-capturing group
            ("\\bword\\b", A),        // §22.2.1 Assertion
            ("a{2,}", A),             // §22.2.1 QuantifierPrefix
            ("\\s*\\S+", A),          // §22.2.1 CharacterClassEscape
            ("", A),                  // §22.2.1 Pattern: an empty Alternative
            ("a||b|", A),             // §22.2.1 Disjunction of empty Alternatives
            ("(a|(b|c)d)|e*", A),     // §22.2.1 Disjunctions in groups
            ("(((a|b)|c))+", A),      // groups three deep
            ("((((a))))", S),         // four deep: past the grammar's nesting
            ("(?<name>x)", S),        // §22.2.1 named group
            ("(?=a)b", S),            // §22.2.1 lookahead Assertion
            ("(", R),                 // §22.2.1: a group closes
            (")", R),                 // §22.2.1: no lone ")"
            ("[a-", R),               // §22.2.1: a class closes
            ("a{2,1}", R),            // §22.2.1.1: {n,m} with n <= m
            ("*a", R),                // §22.2.1: a quantifier follows an atom
            ("a**", R),               // §22.2.1: one quantifier
            ("\\", R),                // §22.2.1: an escape has a character
            ("(?<n", R),              // §22.2.1: a group name closes
            ("[z-a]", R),             // §22.2.2.9: ranges in order
            ("+", R),                 // §22.2.1: a quantifier follows an atom
        ],
        &[],
    );
}
