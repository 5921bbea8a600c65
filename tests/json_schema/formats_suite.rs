//! The formats against the JSON-Schema-Test-Suite's optional format tests (draft 2020-12,
//! `optional/format/*.json`, which assert `format`), and hand-written accept/reject cases
//! for the formats added last (iri, iri-reference, idn-email, idn-hostname, uri-template,
//! relative-json-pointer, regex).
//!
//! Soundness is absolute: no invalid instance may be accepted. Valid instances may be
//! rejected (the grammars are subsets); how many are accepted is printed.

use crate::common;

use std::sync::Arc;

use serde_json::{json, Value};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::GrammarCompiler;

use common::{byte_accepts as accepts, byte_compiler};

fn compiled(c: &GrammarCompiler, format: &str) -> Arc<tokensieve::CompiledGrammar> {
    c.compile_json_schema(
        &json!({"type": "string", "format": format}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_or_else(|e| panic!("format {format} refused: {e}"))
}

/// Checks every string instance of `optional/format/<format>.json`; returns (valid
/// accepted, valid, accepted invalid instances).
fn run_file(c: &GrammarCompiler, format: &str) -> (usize, usize, Vec<String>) {
    let path = format!(
        "{}/../shared/testdata/json-schema-test-suite/draft2020-12/optional/format/{format}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("{path} missing: skipped");
        return (0, 0, Vec::new());
    };
    let cases: Value = serde_json::from_str(&text).expect("JSON");
    let g = compiled(c, format);
    let (mut ok, mut valid) = (0, 0);
    let mut false_positives = Vec::new();
    for case in cases.as_array().expect("cases") {
        for t in case["tests"].as_array().expect("tests") {
            let data = &t["data"];
            if !data.is_string() {
                continue;
            }
            let text = data.to_string();
            let accepted = accepts(&g, &text);
            if t["valid"] == json!(true) {
                valid += 1;
                ok += usize::from(accepted);
            } else if accepted {
                false_positives.push(text);
            }
        }
    }
    (ok, valid, false_positives)
}

#[test]
fn optional_format_suite_has_no_false_positives() {
    let c = byte_compiler();
    let mut bad = Vec::new();
    for f in [
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
        "uri-template",
        "uuid",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    ] {
        let (ok, valid, fp) = run_file(&c, f);
        eprintln!(
            "{f}: {ok} of {valid} valid strings accepted; {} invalid ones",
            fp.len()
        );
        if !fp.is_empty() {
            bad.push(format!("{f}: {fp:?}"));
        }
    }
    assert!(bad.is_empty(), "invalid instances accepted: {bad:#?}");
}

fn check(c: &GrammarCompiler, format: &str, good: &[&str], bad: &[&str]) {
    let g = compiled(c, format);
    for s in good {
        let text = Value::String(s.to_string()).to_string();
        assert!(accepts(&g, &text), "{format} should accept {text}");
    }
    for s in bad {
        let text = Value::String(s.to_string()).to_string();
        assert!(!accepts(&g, &text), "{format} should reject {text}");
    }
}

#[test]
fn iri_and_iri_reference() {
    let c = byte_compiler();
    check(
        &c,
        "iri",
        &[
            "http://ƒøø.ßår/?∂éœ=πîx#πîüx",
            "http://[2001:db8::1]",
            "urn:example:resource",
            "file:/etc/hosts",
            "http://[V1.fe]",
            "http://ƒøø.ßår/?q=Test%20URL",
        ],
        &[
            "/abc",
            "âππ",
            "http://2001:0db8::1",
            "http://a/\n",
            "http://a/b c",
            "http://a/%zz",
            "http://a/\u{200E}",
            "1http://a",
        ],
    );
    check(
        &c,
        "iri-reference",
        &["/âππ", "âππ", "#ƒrägmênt", "//host/p?q", "", "a/b:c"],
        &["#ƒräg\\mênt", "a b", "\\\\WINDOWS", "%4"],
    );
}

#[test]
fn idn_formats() {
    let c = byte_compiler();
    check(
        &c,
        "idn-hostname",
        &[
            "hostname",
            "1host.com",
            "실례.테스트",
            "münchen.de",
            "a.b",
            "h0st-n4me",
        ],
        &[
            "",
            "xn--ihqwcrb4cv8a8dqg056pqjye",
            "ab--c",
            "-hello",
            "hello-",
            "a..b",
            "a.",
            "München",
            "a·l",
            "l·l",
            "0a.א",
            "üüüüüüüüü",
            &"a".repeat(64),
        ],
    );
    check(
        &c,
        "idn-email",
        &[
            "joe.bloggs@example.com",
            "δοκιμή@example.com",
            "café@example.com",
        ],
        &[
            "2962",
            "user＠example.com",
            "a b@example.com",
            "café@",
            "é@b",
        ],
    );
}

#[test]
fn uri_template_relative_pointer_and_regex() {
    let c = byte_compiler();
    check(
        &c,
        "uri-template",
        &[
            "",
            "http://example.com/dictionary/{term:1}/{term}",
            "{+var}",
            "{x,y}",
            "{a.b}",
            "{var*}",
            "a%41b",
            "{v:1000}",
        ],
        &[
            "{}",
            "{a,,b}",
            "{v:0}",
            "{v:10000}",
            "foo}bar",
            "{a..b}",
            "{v:01}",
            "a b",
            "{a,}",
            "{var=def}",
            "{,+var}",
            "{term",
            "%4g",
        ],
    );
    check(
        &c,
        "relative-json-pointer",
        &["1", "0/foo/bar", "0#", "120/foo/bar", "0//"],
        &[
            "/foo/bar",
            "-1/foo/bar",
            "+1/foo",
            "0##",
            "01/a",
            "",
            "0/~2",
            "1#/foo",
        ],
    );
    check(
        &c,
        "regex",
        &[
            "([abc])+\\s+$",
            "",
            "^a.b*c+?$",
            "(?:x|y){2,}",
            "[^a-z0-9_]",
            "a|",
            "\\d{3}-\\d{4}",
            "\\(\\)",
            "^[a-zA-Z0-9_]{3,16}$",
            "a{0,0}b{3,3}c{9,10}d{12,12}e{12,13}e{19,20}f{5,100}g{100,200}",
            "^\\s*(it|describe)\\(\\s*['\"]([^'\"]+)['\"]",
        ],
        &[
            "^(abc]",
            "(",
            ")",
            "a**",
            "*a",
            "[a",
            "a{2,1}",
            "\\",
            "\\1",
            "[z-a]",
            "\\b*",
            "a{",
            "a{16,3}",
            "a{10,9}",
            "a{13,12}",
            "a{200,100}",
            "a{3,}}",
            "a{,3}",
        ],
    );
}

#[test]
fn email_lengths_stay_within_rfc_5321() {
    // A local part of at most 64 characters, an address of at most 254.
    let c = byte_compiler();
    let local63 = format!(
        "{}.{}.{}.{}",
        "a".repeat(15),
        "b".repeat(15),
        "c".repeat(15),
        "d".repeat(15)
    );
    assert_eq!(local63.len(), 63);
    let local67 = format!(
        "{}.{}.{}.{}",
        "a".repeat(16),
        "b".repeat(16),
        "c".repeat(16),
        "d".repeat(16)
    );
    let long_domain = format!("{0}.{0}.{0}.com", "x".repeat(60));
    for format in ["email", "idn-email"] {
        check(
            &c,
            format,
            &[&format!("{local63}@example.com")],
            &[
                &format!("{local67}@example.com"),
                &format!("{local63}@{long_domain}"),
            ],
        );
    }
}

/// `uri` accepts RFC 3986 path, query and fragment characters (sub-delims, `:`, `@`,
/// percent escapes), hosts of more than three labels and IPv4 hosts (MaskBench valid
/// instances that the narrower subset rejected).
#[test]
fn uri_paths_hosts_and_escapes() {
    let c = byte_compiler();
    check(
        &c,
        "uri",
        &[
            "http://maps.wien.gv.at/wmts",
            "http://192.168.1.1",
            "https://example.com/*",
            "https://en.wikipedia.org/wiki/Mass%E2%80%93energy_equivalence",
            "https://example.com/child:5",
            "https://example.com/a?x=1&y=(2)#top/sub",
        ],
        &[
            "http://exa mple.com",
            "https://example.com/%zz",
            "//example.com/a",
            "http://example.com/a\"b",
        ],
    );
}
