//! The JSON Schema front end through the matcher on a real vocabulary (Llama 3.1): the
//! public bug-report cases, the main keywords, options, and typed errors for bad input.

use crate::common;
use crate::schema_check;

use schema_check::{accepts, check, check_with, llama};

use serde_json::json;
use tokensieve::json_schema::{json_schema_to_grammar_with_report, JsonSchemaOptions};
use tokensieve::{
    json_schema_to_grammar, GrammarCompiler, GrammarMatcher, JsonSchemaError, Precompute,
};

#[test]
fn integer_minimum_negative() {
    check(
        json!({"type": "integer", "minimum": -5}),
        &["-5", "-1", "0", "-0", "42", "1000000"],
        &["-", "-6", "-05", "1.5", "-50", "05", "\"1\"", "1.", ""],
    );
}

#[test]
fn integer_ranges_are_exact() {
    let Some((_, compiler)) = llama() else {
        return;
    };
    for (lo, hi) in [
        (-123, 457),
        (0, 0),
        (7, 7),
        (-1000, -10),
        (99, 1001),
        (-9, 9),
    ] {
        let schema = json!({"type": "integer", "minimum": lo, "maximum": hi});
        let g = compiler
            .compile_json_schema(&schema, &JsonSchemaOptions::default())
            .unwrap();
        for n in lo - 30..=hi + 30 {
            let mut m = GrammarMatcher::new(g.clone());
            let ok = m.accept_string(&n.to_string()) && m.accept_token(llama().unwrap().0.stop());
            assert_eq!(ok, (lo..=hi).contains(&n), "{schema}: {n}");
        }
    }
    check(
        json!({"type": "integer", "exclusiveMinimum": 1.5, "exclusiveMaximum": 10}),
        &["2", "9"],
        &["1", "10", "-0", "0"],
    );
}

#[test]
fn number_syntax_and_integer_bounds() {
    check(
        json!({"type": "number"}),
        &["0", "-0", "1.5", "-2e10", "1E+3", "0.25"],
        &["-", "1.", ".5", "-05", "+1", "01", "1e", "NaN"],
    );
    check(
        json!({"type": "number", "minimum": 0, "exclusiveMaximum": 10}),
        &["0", "0.0", "9.999", "5", "0.5"],
        &["-0.5", "10", "10.0", "10.5", "-1", "1e1"],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": -2, "maximum": 3}),
        &["-1.99", "-1", "0", "3", "3.000", "2.5"],
        &["-2", "-2.0", "-2.5", "3.01", "4"],
    );
}

#[test]
fn number_bounds_agree_with_arithmetic() {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let mut candidates = Vec::new();
    for i in -4..=4i32 {
        for frac in [
            "", ".0", ".5", ".05", ".00", ".999", ".25", ".2", ".3", ".75", ".250",
        ] {
            candidates.push(format!("{i}{frac}"));
        }
    }
    candidates.extend(["-0", "-0.0", "-0.5", "1e1", "-1e1"].map(String::from));
    let mut refused = 0;
    let bounds = [-3.0f64, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 2.0, 2.5];
    for lo in bounds.iter().map(Some).chain([None]) {
        for hi in bounds.iter().map(Some).chain([None]) {
            for (lx, hx) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut schema = json!({"type": "number"});
                if let Some(l) = lo {
                    schema[if lx { "exclusiveMinimum" } else { "minimum" }] = json!(l);
                }
                if let Some(h) = hi {
                    schema[if hx { "exclusiveMaximum" } else { "maximum" }] = json!(h);
                }
                let g = match compiler.compile_json_schema(&schema, &JsonSchemaOptions::default()) {
                    Ok(g) => g,
                    Err(tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsatisfiable {
                        ..
                    })) => continue,
                    // Two bounds inside the same integer: refused unless simple.
                    Err(tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsupported {
                        ..
                    })) => {
                        refused += 1;
                        continue;
                    }
                    Err(e) => panic!("{schema}: {e}"),
                };
                for c in &candidates {
                    let x: f64 = c.parse().unwrap();
                    let valid = lo.map_or(true, |&l| if lx { x > l } else { x >= l })
                        && hi.map_or(true, |&h| if hx { x < h } else { x <= h });
                    let mut m = GrammarMatcher::new(g.clone());
                    let got = m.accept_string(c) && m.accept_token(rt.stop());
                    assert!(!got || valid, "{schema} accepted {c}");
                    // Exponents and negative zeros are the only valid numbers rejected.
                    if valid && !c.contains('e') && !c.starts_with("-0") {
                        assert!(got, "{schema} rejected {c}");
                    }
                }
            }
        }
    }
    assert!(refused < 40, "{refused} bound pairs refused");
}

#[test]
fn required_property() {
    check(
        json!({"type": "object", "required": ["a"]}),
        &[
            "{\"a\":1}",
            "{\"a\": {\"b\": [1, null]}}",
            "{\"a\":1,\"z\":2}",
        ],
        &["{}", "{\"b\":1}", "[]"],
    );
}

#[test]
fn additional_properties_default_allows_extras() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    check(
        schema.clone(),
        &[
            "{}",
            "{\"a\":1}",
            "{\"a\":1,\"b\":\"x\"}",
            "{\"b\":[],\"a\":2}",
        ],
        // A disguised declared key may not slip through as an extra one.
        &["{\"a\":\"x\"}", "{\"\\u0061\":\"x\"}", "{\"a\":1,\"a\":2}"],
    );
    let strict = JsonSchemaOptions {
        strict: true,
        ..Default::default()
    };
    check_with(schema, &strict, &["{\"a\":1}", "{}"], &["{\"b\":1}"]);
    check(
        json!({"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}),
        &["{\"a\":\"x\",\"b\":1}", "{\"c\":2}", "1", "\"s\""],
        &["{\"b\":\"x\"}", "{\"a\":1}"],
    );
    check(
        json!({"properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}),
        &["{\"a\":\"x\"}"],
        &["{\"a\":\"x\",\"b\":1}", "{}"],
    );
}

/// Undeclared keys beside declared names of printable ASCII: every spelling of an
/// undeclared name (raw, short escapes, `\u` in either case, surrogate pairs) is
/// accepted, and no spelling of a declared name is.
#[test]
fn undeclared_keys_beside_ascii_names_keep_every_spelling() {
    let schema = json!({"type": "object", "properties": {"ab": {"type": "integer"}, "c/d": {"type": "integer"}}});
    check(
        schema,
        &[
            "{\"ab\":1,\"b\":2}",
            "{\"a\":1}",
            "{\"abc\":1}",
            "{\"x\\u0061\":1}",
            "{\"a\\u0062c\":1}",
            "{\"\\u0062\":1}",
            "{\"a\\u0078\":1}",
            "{\"a\\u007E\":1}",
            "{\"a\\u007f\":1}",
            "{\"é\":1}",
            "{\"\\u00e9\":1}",
            "{\"\\u00E9\":1}",
            "{\"\\n\":1}",
            "{\"\\u0001\":1}",
            "{\"\\ud83d\\ude00\":1}",
            "{\"\\\"\":1}",
            "{\"c\\/\":1}",
            "{\"c\\u002f\":1}",
            "{\"c\\/e\":1}",
        ],
        &[
            "{\"ab\":\"x\"}",
            "{\"\\u0061b\":\"x\"}",
            "{\"a\\u0062\":\"x\"}",
            "{\"\\u0061\\u0042\":1,\"\\u0061\\u0062\":\"x\"}",
            "{\"c\\/d\":\"x\"}",
            "{\"c\\u002Fd\":\"x\"}",
            "{\"c/d\":\"x\"}",
            "{\"\\ud800\":1}",
        ],
    );
}

/// The keys of undeclared properties are the plain JSON string, checked by the matcher
/// when they end (`CompiledGrammar::checked_keys`): no automaton per set of declared
/// names. An object with other names builds no new key automaton.
#[test]
fn undeclared_keys_beside_declared_names_cost_no_automaton_of_their_own() {
    let Some((rt, _)) = llama() else {
        return;
    };
    // A compiler of its own: its rule-automaton counts are this test's.
    let compiler = GrammarCompiler::new(rt.vocab.clone()).with_precompute(Precompute::Lazy);
    let schema = |names: [&str; 3]| {
        json!({"type": "object", "properties": {
            names[0]: {"type": "string"}, names[1]: {"type": "string"}, names[2]: {"type": "number"}
        }})
    };
    let strict = JsonSchemaOptions {
        strict: true,
        ..Default::default()
    };
    let open = compiler
        .compile_json_schema(
            &schema(["measurement", "timestamp", "value"]),
            &Default::default(),
        )
        .unwrap();
    let closed = compiler
        .compile_json_schema(&schema(["measurement", "timestamp", "value"]), &strict)
        .unwrap();
    assert_eq!(
        open.checked_keys(),
        [(
            open.checked_keys()[0].0.clone(),
            vec![
                "measurement".to_string(),
                "timestamp".into(),
                "value".into()
            ]
        )]
    );
    assert!(closed.checked_keys().is_empty());
    // What undeclared keys add: any JSON value and one JSON string (about 100 nodes). It
    // was 162 more for the names' trie in every spelling, and 639 before that.
    let extra = open.node_count() - closed.node_count();
    assert!(
        extra < 130,
        "undeclared keys take {extra} nodes ({} open, {} strict)",
        open.node_count(),
        closed.node_count()
    );
    // Other names: their members are new automata (a key and a value each), and
    // nothing else is.
    let before = compiler.rule_automaton_cache_stats().builds;
    compiler
        .compile_json_schema(&schema(["pressure", "time", "unit"]), &Default::default())
        .unwrap();
    let built = compiler.rule_automaton_cache_stats().builds - before;
    assert!(built <= 3, "{built} automata built for three new members");
}

/// On a vocabulary of single bytes a key's closing quote is a token of its own, allowed by
/// the key node's own mask: the matcher leaves it out where the key would end on a
/// declared name that can no longer come, and every token's bit agrees with
/// `accept_token` at every step (escapes split across steps included).
#[test]
fn a_declared_name_cannot_end_an_extra_key_byte_by_byte() {
    let g = common::byte_compiler()
        .compile_json_schema(
            &json!({"properties": {"ab": {"type": "number"}, "b": {"type": "number"}}}),
            &Default::default(),
        )
        .unwrap();
    let vocab = g.vocabulary().clone();
    for text in [
        r#"{"b":1,"ab":2}"#,
        r#"{"b":1,"\u0061b":2}"#,
        r#"{"b":1,"a\u0062":2}"#,
    ] {
        let mut m = GrammarMatcher::new(g.clone());
        // The quote that closes the last key: the key decodes to `ab`, declared before `b`.
        let close = text.rfind("\":").unwrap();
        for (i, &byte) in text.as_bytes().iter().enumerate() {
            let (allowed, bad) = common::check_all_tokens(&m, &vocab);
            assert!(bad.is_empty(), "{text} at byte {i}: {}", bad[0]);
            if i == close {
                assert!(
                    !allowed.contains(&(byte as u32)),
                    "{text}: the quote ending `ab` was allowed"
                );
                assert!(!m.accept_token(byte as u32));
                break;
            }
            assert!(m.accept_token(byte as u32), "{text} at byte {i}");
        }
    }
}

#[test]
fn string_lengths_count_decoded_characters() {
    check(
        json!({"type": "string", "maxLength": 8}),
        &[
            r#""a\"b""#,
            r#""l1\nl2""#,
            r#""\\""#,
            r#""\u00e9t\u00e9""#,
            "\"12345678\"",
        ],
        &["\"123456789\"", r#""\x""#, r#""\ud800""#],
    );
    check(
        json!({"type": "string", "maxLength": 1}),
        &["\"😀\"", r#""\ud83d\ude00""#, "\"\"", "\"é\""],
        &["\"\t\"", "\"abcdefghi\"", "\"ab\""],
    );
    check(
        json!({"minLength": 2}),
        &["\"ab\"", r#""\n\t""#, "1", "null"],
        &["\"a\"", r#""\ud83d\ude00""#],
    );
    // A huge bound stays cheap (bytes-only body: one counted rule).
    check(
        json!({"type": "string", "maxLength": 524288}),
        &["\"hello\""],
        &["\"a"],
    );
}

#[test]
fn refs_defs_and_recursion() {
    check(
        json!({"$ref": "#/$defs/ab", "$defs": {"ab": {"enum": ["a", "b"]}}}),
        &["\"a\"", "\"b\""],
        &["5", "\"c\""],
    );
    check(
        json!({
            "definitions": {"node": {"type": "object", "properties": {
                "v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}
            }, "required": ["v"], "additionalProperties": false}},
            "$ref": "#/definitions/node"
        }),
        &[
            // Declared order (`v` first) is the default.
            "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}",
            "{\"v\":1}",
        ],
        &[
            "{\"v\":1,\"kids\":[{}]}",
            "{\"v\":1,\"kids\":[{\"v\":\"x\"}]}",
        ],
    );
}

#[test]
fn all_of_and_any_of() {
    check(
        json!({"allOf": [{"type": "integer"}, {"minimum": 5}]}),
        &["5", "6"],
        &["\"hello\"", "4", "5.5"],
    );
    check(
        json!({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "maximum": 0}]}),
        &["\"a\"", "0", "-3"],
        &["\"ab\"", "1", "null"],
    );
    check(
        json!({"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": -10}]}),
        &["10", "-10"],
        &["0", "\"x\""],
    );
}

#[test]
fn one_of_with_disjoint_branches() {
    check(
        json!({"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}),
        &["\"x\"", "3"],
        &["-1", "null"],
    );
    check(
        json!({"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
            {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}
        ]}),
        &["{\"kind\":\"a\",\"x\":1}", "{\"kind\":\"b\",\"y\":\"s\"}"],
        &["{\"kind\":\"c\"}", "{\"kind\":\"a\",\"x\":\"s\"}", "{}"],
    );
    match json_schema_to_grammar(
        &json!({"oneOf": [{"type": "integer"}, {"minimum": 2}]}),
        &JsonSchemaOptions::default(),
    ) {
        Err(JsonSchemaError::Unsupported {
            keyword, pointer, ..
        }) => {
            assert_eq!((keyword.as_str(), pointer.as_str()), ("oneOf", "#/oneOf"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn not_of_a_type_and_unevaluated_without_applicators() {
    check(
        json!({"not": {"type": ["string", "object"]}}),
        &["1", "null", "[]"],
        &["\"x\"", "{}"],
    );
    check(
        json!({"properties": {"a": {}}, "unevaluatedProperties": false}),
        &["{\"a\":1}"],
        &["{\"b\":1}"],
    );
    check(
        json!({"prefixItems": [{"type": "integer"}], "unevaluatedItems": false}),
        &["[1]", "[]"],
        &["[1,2]"],
    );
}

#[test]
fn property_counts() {
    check(
        json!({"properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false, "minProperties": 2, "maxProperties": 2}),
        &["{\"a\":1,\"b\":2}", "{\"b\":1,\"c\":2}"],
        &["{\"a\":1}", "{\"a\":1,\"b\":2,\"c\":3}", "{}"],
    );
    check(
        json!({"type": "object", "minProperties": 1, "maxProperties": 2}),
        &["{\"x\":1}", "{\"x\":1,\"y\":2}"],
        &["{}", "{\"x\":1,\"y\":2,\"z\":3}"],
    );
    // Extra keys may repeat, so counting them cannot prove two distinct properties.
    assert!(json_schema_to_grammar(
        &json!({"type": "object", "minProperties": 2}),
        &JsonSchemaOptions::default()
    )
    .is_err());
}

#[test]
fn arrays_enum_const_booleans() {
    check(
        json!({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false, "minItems": 1}),
        &["[1]", "[1,\"a\"]", "[ 1 , \"a\" ]"],
        &["[]", "[1,2]", "[1,\"a\",3]"],
    );
    check(
        json!({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3}),
        &["[true,false]", "[true,true,true]"],
        &["[true]", "[true,true,true,true]", "[1,2]"],
    );
    check(
        json!({"enum": [1, "x", null, [1, {"a": 2}]]}),
        &["1", "\"x\"", "null", "[1,{\"a\":2}]"],
        &["2", "\"y\"", "[1]"],
    );
    check(
        json!({"const": {"a": 1}}),
        &["{\"a\":1}"],
        &["{\"a\":2}", "{}"],
    );
    check(json!(true), &["1", "{\"a\":[]}", "\"s\""], &["", "tru"]);
    check(
        json!({"type": ["null", "boolean"]}),
        &["null", "true"],
        &["0"],
    );
}

#[test]
fn formats() {
    check(
        json!({"type": "string", "format": "date"}),
        &["\"2024-02-29\"", "\"1999-12-31\"", "\"2000-02-29\""],
        &[
            "\"2023-02-29\"",
            "\"1900-02-29\"",
            "\"2024-04-31\"",
            "\"2024-13-01\"",
            "\"x\"",
        ],
    );
    check(
        json!({"type": "string", "format": "date-time"}),
        &[
            "\"2024-01-02T03:04:05Z\"",
            "\"2024-01-02T23:59:59.123+05:30\"",
        ],
        &[
            "\"2024-01-02T24:00:00Z\"",
            "\"2024-01-02 03:04:05Z\"",
            "\"2024-01-02T03:04:05\"",
        ],
    );
    check(
        json!({"type": "string", "format": "uuid"}),
        &["\"123e4567-e89b-12d3-a456-426614174000\""],
        &["\"123e4567e89b12d3a456426614174000\""],
    );
    check(
        json!({"type": "string", "format": "ipv4"}),
        &["\"192.168.0.1\"", "\"0.0.0.0\""],
        &["\"256.1.1.1\"", "\"01.1.1.1\"", "\"1.1.1\""],
    );
    check(
        json!({"type": "string", "format": "email"}),
        &["\"joe.bloggs@example.com\""],
        &["\"joe..b@example.com\"", "\"joe@\"", "\"@x.com\""],
    );
    check(
        json!({"type": "string", "format": "time"}),
        &["\"08:30:00Z\""],
        &["\"8:30\""],
    );
}

#[test]
fn patterns_follow_ecmascript_over_decoded_text() {
    check(
        json!({"type": "string", "pattern": "^[a-z]+\\d$"}),
        &["\"abc1\""],
        &["\"abc\"", "\"ab\u{663}\"", "\"1\"", "\"abc12\""],
    );
    // Unanchored: a match anywhere; characters that need escapes are written escaped.
    check(
        json!({"pattern": "a\"b"}),
        &["\"xa\\\"by\"", "5", "\"a\\\"b\""],
        &["\"ab\"", "\"a\"b\""],
    );
    check(
        json!({"type": "string", "pattern": "^\\s.$"}),
        &["\" x\"", "\"\\tx\""],
        &["\"\u{85}x\"", "\" \\nx\"", "\"xx\"", "\"\\n\\n\""],
    );
}

#[test]
fn whitespace_options() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array"}}});
    check(schema.clone(), &[" { \"a\" : [ 1 , 2 ] } \n"], &[]);
    let compact = JsonSchemaOptions {
        any_whitespace: false,
        ..Default::default()
    };
    check_with(
        schema.clone(),
        &compact,
        &["{\"a\":[1,2]}"],
        &["{ \"a\":[1,2]}"],
    );
    let capped = JsonSchemaOptions {
        max_whitespace: Some(2),
        ..Default::default()
    };
    check_with(schema, &capped, &["{  \"a\":[]}"], &["{   \"a\":[]}"]);
}

/// `item_separator` / `key_separator` are written between members and items and between a
/// key and its value, with `any_whitespace` or without (XGrammar 0.2.9's `separators`,
/// checked with its `compile_json_schema` on Llama 3.1: `(", ", ": ")` accepts only
/// `{"name": "x", "a": [1, 2]}`; with `any_whitespace` whitespace stays allowed around
/// `;` / `=`). Extra members and any-value members too; `const` is written compact, as
/// XGrammar writes it.
#[test]
fn separators_are_written_between_members_and_items() {
    let schema = json!({"type": "object",
        "properties": {"name": {"type": "string"}, "a": {"type": "array", "items": {"type": "integer"}},
                       "v": {}},
        "required": ["name", "a"]});
    let spaced = JsonSchemaOptions {
        any_whitespace: false,
        item_separator: ", ".into(),
        key_separator: ": ".into(),
        ..Default::default()
    };
    check_with(
        schema.clone(),
        &spaced,
        &[
            r#"{"name": "x", "a": [1, 2]}"#,
            r#"{"name": "x", "a": [], "v": {"k": [true, null]}}"#,
        ],
        &[
            r#"{"name":"x","a":[1,2]}"#,
            r#"{"name": "x","a": [1,2]}"#,
            r#"{"name" : "x", "a": [1, 2]}"#,
            r#"{"name": "x", "a": [ ]}"#,
            r#"{"name": "x", "a": [], "v": {"k":[true,null]}}"#,
            r#" {"name": "x", "a": [1, 2]}"#,
        ],
    );
    let extra = json!({"type": "object", "properties": {"a": {"type": "integer"}},
                       "additionalProperties": {"type": "integer"}});
    check_with(
        extra,
        &spaced,
        &[r#"{"a": 1, "b": 2}"#, r#"{"b": 2}"#],
        &[r#"{"a":1,"b":2}"#, r#"{"a": 1, "b":2}"#],
    );
    check_with(
        json!({"const": {"a": [1, 2]}}),
        &spaced,
        &[r#"{"a":[1,2]}"#],
        &[r#"{"a": [1, 2]}"#],
    );
    let spaced_ws = JsonSchemaOptions {
        item_separator: ", ".into(),
        key_separator: ": ".into(),
        ..Default::default()
    };
    check_with(
        schema,
        &spaced_ws,
        &[r#"{ "name" : "x" ,  "a": [1, 2] }"#],
        &[r#"{"name":"x","a":[1,2]}"#, r#"{"name": "x","a": [1, 2]}"#],
    );
}

/// Separators the matcher's unique-key check could misread are refused with a typed error
/// naming the option and the value (XGrammar takes `(";", "=")`; tokensieve does not).
#[test]
fn separators_that_do_not_read_as_json_are_refused() {
    let schema = json!({"type": "object"});
    for (item, key, option, needle) in [
        (";", ":", "item_separator", "exactly one `,`"),
        (",", "=", "key_separator", "exactly one `:`"),
        (",,", ":", "item_separator", "(it holds 2)"),
        (", \"", ":", "item_separator", "must not hold '\"'"),
        (",", ": {", "key_separator", "must not hold '{'"),
        (",", ",:", "key_separator", "must not hold ','"),
    ] {
        let opts = JsonSchemaOptions {
            item_separator: item.into(),
            key_separator: key.into(),
            ..Default::default()
        };
        match json_schema_to_grammar(&schema, &opts) {
            Err(e @ JsonSchemaError::InvalidOption { option: o, .. }) => {
                assert_eq!(o, option, "{item:?} {key:?}");
                assert!(e.to_string().contains(needle), "{e}");
            }
            other => panic!("{item:?} {key:?}: expected InvalidOption, got {other:?}"),
        }
    }
}

/// `root_whitespace: false` refuses whitespace before and after the root value, as
/// XGrammar 0.2.9's `compile_json_schema(any_whitespace=True)` does (checked: `" {}"`,
/// `"{} "`, `"{}\n"` refused, `"{ }"` accepted); the default keeps it.
#[test]
fn root_whitespace_can_be_refused() {
    let schema = json!({"type": "object"});
    let tight = JsonSchemaOptions {
        root_whitespace: false,
        ..Default::default()
    };
    check_with(
        schema.clone(),
        &tight,
        &["{ }", "{\"a\" :\n1}"],
        &[" {}", "{} ", "{}\n", "\t{}"],
    );
    check(schema, &[" {}", "{}\n"], &[]);
}

/// `max_whitespace_newlines` caps the line feeds of one place of whitespace, within
/// `max_whitespace` or without it.
#[test]
fn whitespace_line_feeds_are_capped() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array"}}});
    let one = JsonSchemaOptions {
        max_whitespace: Some(4),
        max_whitespace_newlines: Some(1),
        ..Default::default()
    };
    check_with(
        schema.clone(),
        &one,
        &["{\n  \"a\": [\n 1]}", "{ \t\r\n\"a\":[]}", "{    \"a\":[]}"],
        &[
            "{\n\n\"a\":[]}",
            "{\n \n\"a\":[]}",
            "{     \"a\":[]}",
            "{\n    \"a\":[]}",
        ],
    );
    let lines_only = JsonSchemaOptions {
        max_whitespace_newlines: Some(2),
        ..Default::default()
    };
    let deep = format!("{{\n{}\n\"a\":[]}}", " ".repeat(40));
    check_with(schema, &lines_only, &[&deep], &["{\n\n\n\"a\":[]}"]);
}

/// `string_excludes`: no free string (a value, a string or key inside a value of any shape)
/// holds one of the strings as written; escaped or cut short, they are ordinary text.
#[test]
fn string_excludes_keep_markers_out_of_free_strings() {
    let schema = json!({"type": "object", "properties": {
        "s": {"type": "string"}, "o": {}}, "additionalProperties": {"type": "integer"}});
    let opts = JsonSchemaOptions {
        string_excludes: vec!["<tool_call>".into(), "</tool_call>".into()],
        ..Default::default()
    };
    check_with(
        schema,
        &opts,
        &[
            "{\"s\":\"<tool_call\"}",
            "{\"s\":\"\\u003ctool_call>\"}",
            "{\"s\":\"<\\/tool_call>\"}",
            "{\"s\":\"<</tool_call\\n>\"}",
            "{\"o\":{\"<tool_call\":[\"tool_call>\"]}}",
            "{\"x<tool\":1}",
        ],
        &[
            "{\"s\":\"<tool_call>\"}",
            "{\"s\":\"a</tool_call>b\"}",
            "{\"s\":\"<<tool_call>\"}",
            "{\"s\":\"\\n</tool_call>\"}",
            "{\"o\":[\"x</tool_call>\"]}",
            "{\"o\":{\"<tool_call>\":1}}",
        ],
    );
}

#[test]
fn mask_matches_accept_on_real_vocabulary() {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": -5, "maximum": 300},
        "s": {"type": "string", "maxLength": 3}
    }, "required": ["n"]});
    let g = compiler
        .compile_json_schema(&schema, &JsonSchemaOptions::default())
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    let text = "{\"n\":-5,\"s\":\"\\u00e9ab\"}";
    for prefix_end in [0usize, 5, 6, 13, 19] {
        let mut fork = m.clone();
        assert!(
            fork.accept_string(&text[..prefix_end]),
            "prefix {prefix_end}"
        );
        let (_, bad) = common::check_all_tokens(&fork, &rt.vocab);
        assert!(bad.is_empty(), "at {prefix_end}: {}", bad[0]);
    }
    assert!(m.accept_string(text));
    assert!(m.accept_token(rt.stop()));
}

fn err(schema: &str) -> JsonSchemaError {
    let v: serde_json::Value = match serde_json::from_str(schema) {
        Ok(v) => v,
        Err(_) => {
            return tokensieve::json_schema::JsonSchemaSource::to_schema_value(schema)
                .expect_err("not JSON")
        }
    };
    json_schema_to_grammar(&v, &JsonSchemaOptions::default()).expect_err(schema)
}

#[test]
fn bad_input_gives_typed_errors_with_pointers() {
    assert!(matches!(err("{\"type\": "), JsonSchemaError::NotJson(_)));
    match err(r##"{"properties": {"a": {"$ref": "#/$defs/missing"}}}"##) {
        JsonSchemaError::UnresolvedRef { reference, pointer } => {
            assert_eq!(reference, "#/$defs/missing");
            assert_eq!(pointer, "#/properties/a/$ref");
        }
        e => panic!("{e}"),
    }
    match err(r#"{"type": "string", "minLength": 5, "maxLength": 2}"#) {
        JsonSchemaError::Unsatisfiable { pointer, .. } => assert_eq!(pointer, "#/minLength"),
        e => panic!("{e}"),
    }
    match err(r#"{"items": {"type": "strin"}}"#) {
        JsonSchemaError::InvalidKeyword {
            keyword, pointer, ..
        } => {
            assert_eq!(keyword, "type");
            assert_eq!(pointer, "#/items/type");
        }
        e => panic!("{e}"),
    }
    for (schema, kw, ptr) in [
        (r#"{"not": {"pattern": "a"}}"#, "not", "#/not"),
        (
            r#"{"type": "string", "pattern": "(?=a)"}"#,
            "pattern",
            "#/pattern",
        ),
        (
            r#"{"type": "string", "pattern": "\\p{L}"}"#,
            "pattern",
            "#/pattern",
        ),
        (
            r#"{"type": "string", "pattern": "[[:alpha:]]"}"#,
            "pattern",
            "#/pattern",
        ),
        (
            r#"{"type": "string", "pattern": "^(?:\\S+\\s+){0,29}\\S+$", "maxLength": 30000}"#,
            "pattern",
            "#/pattern",
        ),
        (
            r#"{"properties": {"x": {"multipleOf": 2.5}}}"#,
            "multipleOf",
            "#/properties/x/multipleOf",
        ),
        (
            r#"{"type": "string", "format": "color"}"#,
            "format",
            "#/format",
        ),
        (
            r#"{"type": "number", "minimum": 1.25, "maximum": 1.75}"#,
            "minimum",
            "#/minimum",
        ),
        (
            r#"{"type": "array", "uniqueItems": true, "minItems": 8}"#,
            "uniqueItems",
            "#/uniqueItems",
        ),
        (r#"{"frobnicate": 1}"#, "frobnicate", "#/frobnicate"),
        (r#"{"$ref": "http://example.com/s.json"}"#, "$ref", "#/$ref"),
        (
            // Which keys are "additional" would change: refused (a name declared on one
            // side only is merged exactly, see json_schema_unevaluated.rs).
            r#"{"allOf": [{"patternProperties": {"^a": true}}, {"additionalProperties": false}]}"#,
            "additionalProperties",
            "#/allOf/1/additionalProperties",
        ),
    ] {
        match err(schema) {
            JsonSchemaError::Unsupported {
                keyword, pointer, ..
            } => {
                assert_eq!((keyword.as_str(), pointer.as_str()), (kw, ptr), "{schema}")
            }
            e => panic!("{schema}: {e}"),
        }
    }
    assert!(matches!(
        err("false"),
        JsonSchemaError::Unsatisfiable { .. }
    ));
}

#[test]
fn lenient_mode_lists_ignored_keywords() {
    let opts = JsonSchemaOptions {
        lenient: true,
        ..Default::default()
    };
    let schema = json!({"type": "string", "pattern": "(?=a)", "not": {"pattern": "b"}});
    let out = json_schema_to_grammar_with_report(&schema, &opts).unwrap();
    let mut kws: Vec<_> = out.ignored.iter().map(|i| i.keyword.as_str()).collect();
    kws.sort();
    assert_eq!(kws, ["not", "pattern"]);
    let strict = json_schema_to_grammar_with_report(&json!({"type": "string"}), &opts).unwrap();
    assert!(strict.ignored.is_empty());
}

#[test]
fn unknown_keywords_can_be_ignored_on_request() {
    let schema = json!({"type": "integer", "x-vendor": {"a": 1}, "example": 3});
    assert!(matches!(
        json_schema_to_grammar(&schema, &JsonSchemaOptions::default()),
        Err(JsonSchemaError::Unsupported { .. })
    ));
    let opts = JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..Default::default()
    };
    let out = json_schema_to_grammar_with_report(&schema, &opts).unwrap();
    let kws: Vec<_> = out.ignored.iter().map(|i| i.keyword.as_str()).collect();
    // In the schema's order (serde_json keeps it).
    assert_eq!(kws, ["x-vendor", "example"]);
    // Keywords of JSON Schema stay errors.
    let dep = json!({"type": "array", "uniqueItems": true, "contains": {}});
    assert!(json_schema_to_grammar(&dep, &opts).is_err());
}

#[test]
fn compile_from_text() {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let g = compiler
        .compile_json_schema(r#"{"type": "boolean"}"#, &JsonSchemaOptions::default())
        .unwrap();
    assert!(accepts(rt, &g, "true"));
    assert!(!accepts(rt, &g, "1"));
}
/// `format: uri` accepts a scheme longer than 16 characters and a URI without an
/// authority (`scheme:path`); `uri-reference` accepts relative references without an
/// authority (MaskBench: `ecdsa-koblitz-pubkey:…`, `./src`, `Core`).
#[test]
fn uri_formats_accept_rootless_and_relative_paths() {
    let opts = JsonSchemaOptions::default();
    common::byte_check(
        &json!({"type": "string", "format": "uri"}),
        &opts,
        &[
            r#""ecdsa-koblitz-pubkey:14RZvYazz9H2DC2skBfpPVxax54g4yabxe""#,
            r#""urn:isbn:0451450523""#,
            r#""https://example.com/a?b#c""#,
            // RFC 3986 §3: `hier-part` may be `path-empty`.
            r#""http:""#,
        ],
        &[r#""Core""#, r#""./src""#, r#""1abc:x""#, r#""a b:c""#],
    );
    common::byte_check(
        &json!({"type": "string", "format": "uri-reference"}),
        &opts,
        &[
            r#""Core""#,
            r#""./src""#,
            r#""../a/b?x#y""#,
            r#""/""#,
            r#""""#,
            r##""#frag""##,
            r#""/a/b""#,
        ],
        &[r#""a b""#, r#""//a:b""#, r#""a\\b""#],
    );
}

/// An untyped schema (`{}`, or one of annotations alone) is the generic value rule, as
/// `true` is: a member of any value calls that rule instead of writing every JSON type
/// out in its object (with a digit cap, two such members of a BFCL tool were 140 of its
/// 241 automaton states). Under `strict`, `{}` still closes the objects it allows.
#[test]
fn an_untyped_schema_is_the_generic_value_as_true_is() {
    let grammar = |member: serde_json::Value, opts: &JsonSchemaOptions| {
        let schema =
            json!({"type": "object", "properties": {"a": member, "b": {"type": "integer"}}});
        json_schema_to_grammar(&schema, opts).unwrap().to_string()
    };
    let capped = JsonSchemaOptions {
        max_number_digits: Some(24),
        ..Default::default()
    };
    for opts in [JsonSchemaOptions::default(), capped] {
        let as_true = grammar(json!(true), &opts);
        assert_eq!(grammar(json!({}), &opts), as_true);
        let annotated = json!({"description": "anything", "title": "A", "examples": [1], "default": null, "$comment": "c", "$defs": {"x": {"type": "integer"}}});
        assert_eq!(grammar(annotated, &opts), as_true);
        assert_ne!(grammar(json!({"minimum": 1}), &opts), as_true);
    }
    let schema = json!({"type": "object", "properties": {"a": {}}});
    check(
        schema.clone(),
        &[
            r#"{"a":{"x":[1,"y",null]}}"#,
            r#"{"a":-1.5e3}"#,
            r#"{"a":"s"}"#,
        ],
        &[r#"{"a":}"#, r#"{"a":tru}"#],
    );
    let strict = JsonSchemaOptions {
        strict: true,
        ..Default::default()
    };
    assert_ne!(grammar(json!({}), &strict), grammar(json!(true), &strict));
    check_with(
        schema,
        &strict,
        &[r#"{"a":{}}"#, r#"{"a":[{}]}"#],
        &[r#"{"a":{"x":1}}"#],
    );
}
