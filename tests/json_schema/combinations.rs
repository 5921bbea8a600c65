//! The JSON Schema front end, second part, through the matcher on Llama 3.1: `any_order`,
//! integers with a zero fraction, and the keywords added after the first part.

use crate::schema_check;

use schema_check::{check, check_with};

use serde_json::json;
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::json_schema_to_grammar;
use tokensieve::JsonSchemaError;

fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    }
}

fn refused(schema: serde_json::Value, opts: &JsonSchemaOptions) -> (String, String) {
    match json_schema_to_grammar(&schema, opts) {
        Err(JsonSchemaError::Unsupported {
            keyword, pointer, ..
        }) => (keyword, pointer),
        other => panic!("{schema}: expected Unsupported, got {other:?}"),
    }
}

#[test]
fn any_order_enforces_required_and_forbids_duplicates() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["a", "b"]
    });
    check_with(
        schema.clone(),
        &any_order(),
        &[
            r#"{"a":1,"b":"x"}"#,
            r#"{"b":"x","a":1}"#,
            r#"{"c":true,"a":1,"b":"y"}"#,
            r#"{"b":"y","c":false,"a":-3}"#,
            r#"{"z":0,"b":"x","a":1}"#,
            r#"{"a":1,"z":[1],"b":"x","w":{}}"#,
        ],
        &[
            r#"{"b":"x"}"#,
            r#"{"c":true,"a":1}"#,
            r#"{"a":1,"b":"x","a":2}"#,
            r#"{"b":"x","a":1,"c":true,"c":false}"#,
            r#"{"b":1,"a":1}"#,
            r#"{"a":1,"b":"x","c":1}"#,
            r#"{}"#,
        ],
    );
    // The default keeps the declared (map) order.
    check(schema, &[r#"{"a":1,"b":"x"}"#], &[r#"{"b":"x","a":1}"#]);
}

#[test]
fn any_order_with_counts_and_closed_objects() {
    let schema = json!({
        "properties": {"a": {}, "b": {}, "c": {}},
        "additionalProperties": false,
        "minProperties": 1,
        "maxProperties": 2
    });
    check_with(
        schema,
        &any_order(),
        &["{\"c\":1,\"a\":2}", "{\"b\":null}", "1"],
        &[
            "{\"c\":1,\"a\":2,\"b\":3}",
            "{}",
            "{\"d\":1}",
            "{\"a\":1,\"a\":1}",
        ],
    );
    // A required property whose schema is false: nothing is accepted.
    let opts = any_order();
    let e = json_schema_to_grammar(
        &json!({"type": "object", "properties": {"a": false}, "required": ["a"]}),
        &opts,
    );
    assert!(
        matches!(e, Err(JsonSchemaError::Unsatisfiable { .. })),
        "{e:?}"
    );
}

#[test]
fn any_order_eight_properties_take_every_order() {
    // 8 declared properties (2^8 sets of written keys): past the 6-member chunks of larger
    // objects, keys that return to the first members after the last ones are accepted.
    let mut props = serde_json::Map::new();
    for i in 0..8 {
        props.insert(format!("k{i}"), json!({"type": "integer"}));
    }
    let schema = json!({"type": "object", "properties": props, "required": ["k0", "k7"]});
    check_with(
        schema,
        &any_order(),
        &[
            r#"{"k7":7,"k6":6,"k5":5,"k4":4,"k3":3,"k2":2,"k1":1,"k0":0}"#,
            r#"{"k7":1,"k0":2}"#,
            r#"{"k6":1,"k0":2,"x":"y","k7":3,"k1":4}"#,
            r#"{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7}"#,
        ],
        &[
            r#"{"k7":7,"k6":6,"k5":5,"k4":4,"k3":3,"k2":2,"k1":1}"#,
            r#"{"k7":1,"k0":2,"k7":3}"#,
            r#"{"k6":1,"k0":2,"k6":1,"k7":3}"#,
            r#"{"k7":1,"k0":"2"}"#,
        ],
    );
}

#[test]
fn any_order_many_properties_stays_sound() {
    // 14 properties: beyond the exact limit the order is relaxed in chunks (a documented
    // subset of any order), but required keys and duplicates are still enforced.
    let mut props = serde_json::Map::new();
    for i in 0..14 {
        props.insert(format!("p{i:02}"), json!({"type": "integer"}));
    }
    let schema = json!({"type": "object", "properties": props, "required": ["p00", "p13"],
        "additionalProperties": false});
    check_with(
        schema,
        &any_order(),
        &[
            r#"{"p00":1,"p13":2}"#,
            r#"{"p04":1,"p00":1,"p13":2}"#,
            r#"{"p00":1,"p13":2,"p12":1}"#,
        ],
        &[
            r#"{"p00":1}"#,
            r#"{"p13":1}"#,
            r#"{"p00":1,"p13":2,"p00":3}"#,
            r#"{"p00":1,"p01":1,"p01":1,"p13":2}"#,
            r#"{"p00":1,"p13":2,"x":1}"#,
        ],
    );
}

#[test]
fn integers_with_a_zero_fraction() {
    check(
        json!({"type": "integer", "minimum": -5, "maximum": 6000}),
        &["6000.0", "6000.000", "-0.0", "0.0", "-5.0", "12", "-0"],
        &["6000.5", "6001.0", "-6.0", "1.", "1.00001", "-5.1", ".0"],
    );
    check(
        json!({"type": "integer"}),
        &["1.0", "-7.00", "123456789012345678901234567890.0"],
        &["1.5", "1.", "01.0"],
    );
}

#[test]
fn draft4_integers_have_no_fraction() {
    check(
        json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}),
        &["12345", "0"],
        &["12345.0", "0.0", "-0"],
    );
}

#[test]
fn more_formats() {
    let f = |name: &str| json!({"type": "string", "format": name});
    let q = |v: &[&str]| v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>();
    let run = |name: &str, good: &[&str], bad: &[&str]| {
        let (g, b) = (q(good), q(bad));
        let g: Vec<&str> = g.iter().map(|s| s.as_str()).collect();
        let b: Vec<&str> = b.iter().map(|s| s.as_str()).collect();
        check(f(name), &g, &b);
    };
    run(
        "hostname",
        &["example.com", "localhost", "a-b.example.org"],
        &["-a.com", "a_b.com", "exa mple.com", "", "a-.com"],
    );
    run(
        "ipv6",
        &[
            "::1",
            "2001:db8::ff00:42:8329",
            "1:2:3:4:5:6:7:8",
            "::",
            "fe80::",
        ],
        &[
            "1:2:3:4:5:6:7:8:9",
            "12345::",
            ":::",
            "1::2::3",
            "g::1",
            "1:2:3:4:5:6:7",
        ],
    );
    run(
        "uri",
        &[
            "https://example.com/a/b?x=1#top",
            "ftp://host:21",
            "http://x.org/",
            // RFC 3986 §3.2.2: the generic syntax allows an empty host (`file:///`).
            "http://",
        ],
        &["example.com", "http://exa mple.com", "/a/b"],
    );
    // An empty string is a relative reference (RFC 3986 §4.2: path-empty).
    run(
        "uri-reference",
        &["/a/b", "https://x.org", "", "./a", "Core"],
        &["a b", "a\\b"],
    );
    run(
        "json-pointer",
        &["", "/a~0b/c~1d", "/", "//"],
        &["a", "/a~2", "/~"],
    );
    run(
        "duration",
        &["P1Y2M3DT4H5M6S", "P3W", "PT1H", "P1D", "PT5M6S"],
        &["P", "PT", "P1H", "1Y", "P1Y1W", "P1S"],
    );
}

#[test]
fn unknown_formats_are_ignored_on_request() {
    let schema = json!({"type": "string", "format": "int32"});
    let (kw, ptr) = refused(schema.clone(), &JsonSchemaOptions::default());
    assert_eq!((kw.as_str(), ptr.as_str()), ("format", "#/format"));
    let opts = JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..Default::default()
    };
    check_with(schema, &opts, &["\"12\"", "\"x\""], &["12"]);
    // A format some draft defines but the compiler does not enforce is still refused.
    refused(json!({"type": "string", "format": "color"}), &opts);
}

#[test]
fn not_of_an_empty_schema_and_identifiers() {
    // `not: {}` accepts nothing.
    let e = json_schema_to_grammar(&json!({"not": {}}), &JsonSchemaOptions::default());
    assert!(
        matches!(e, Err(JsonSchemaError::Unsatisfiable { .. })),
        "{e:?}"
    );
    check(
        json!({"anyOf": [{"type": "integer"}, {"type": "string", "not": {"description": "x"}}]}),
        &["1"],
        &["\"a\""],
    );
    // Draft 4 `id`, at the root and nested without references below: base URIs only.
    check(
        json!({"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://x/root",
               "type": "object",
               "properties": {"a": {"id": "http://x/a", "type": "integer"}}}),
        &["{\"a\":1}"],
        &["{\"a\":\"s\"}"],
    );
    // A nested `$id` above a `$ref` changes how it resolves: `#/$defs/b` is then a place
    // in the document `http://x/a` (that subschema), which has no `$defs`.
    let e = json_schema_to_grammar(
        &json!({"properties": {"a": {"$id": "http://x/a", "$ref": "#/$defs/b"}},
               "$defs": {"b": {"type": "integer"}}}),
        &JsonSchemaOptions::default(),
    );
    assert!(
        matches!(&e, Err(JsonSchemaError::UnresolvedRef { pointer, .. }) if pointer == "#/properties/a/$ref"),
        "{e:?}"
    );
}

/// A dangling reference makes the schema invalid even where no instance reaches it (found
/// by `fuzz_props` in CI: `#/$defs/d` written in a subschema that carries `$defs` itself,
/// but resolving against the root, which has none).
#[test]
fn dangling_references_are_errors_wherever_they_are() {
    for (schema, at) in [
        (
            json!({"type": "array", "maxItems": 0, "items": {"$ref": "#/$defs/nope"}}),
            "#/items/$ref",
        ),
        (
            json!({"$defs": {"unused": {"$ref": "#/$defs/gone"}}, "type": "integer"}),
            "#/$defs/unused/$ref",
        ),
        (
            json!({"type": "array", "maxItems": 0,
                   "items": {"$defs": {"d": {"type": "null"}}, "$ref": "#/$defs/d"}}),
            "#/items/$ref",
        ),
        (
            json!({"type": "string", "properties": {"a": {"$ref": "#missing_anchor"}}}),
            "#/properties/a/$ref",
        ),
    ] {
        let e = json_schema_to_grammar(&schema, &JsonSchemaOptions::default());
        assert!(
            matches!(&e, Err(JsonSchemaError::UnresolvedRef { pointer, .. }) if pointer == at),
            "{schema}: {e:?}"
        );
    }
    // Not a reference: a property named `$ref`, and `$ref` text inside `const`.
    check(
        json!({"properties": {"$ref": {"type": "integer"}},
               "$defs": {"c": {"const": {"$ref": "#/nowhere"}}}}),
        &["{\"$ref\":1}"],
        &["{\"$ref\":\"x\"}"],
    );
}

#[test]
fn enum_values_filtered_by_simple_keywords() {
    check(
        json!({"type": "string", "enum": ["a", "abcdef", "xyz"], "maxLength": 3}),
        &["\"a\"", "\"xyz\""],
        &["\"abcdef\""],
    );
    check(
        json!({"enum": [1, 5, 10, "long string"], "minimum": 5, "maxLength": 4}),
        &["5", "10"],
        &["1", "\"long string\""],
    );
}

/// The automaton nodes of `schema` compiled by `c` (default options); it must compile.
fn node_count(c: &tokensieve::GrammarCompiler, schema: &serde_json::Value) -> usize {
    c.compile_json_schema(schema, &JsonSchemaOptions::default())
        .expect("compiles")
        .node_count()
}

#[test]
fn a_pattern_of_one_character_class_run_with_lengths_is_a_counted_repetition() {
    // `^[class]+$` with `maxLength` is `[class]{1,max}`: one counted repetition (whose masks
    // are shared across counts), not the pattern's automaton times a 256-state counter.
    let c = byte_compiler(tokensieve::Limits::default());
    let opts = JsonSchemaOptions::default();
    let nodes = |schema: serde_json::Value| node_count(&c, &schema);
    let plain = nodes(json!({"type": "string", "minLength": 1, "maxLength": 255}));
    let run = nodes(json!({"type": "string", "pattern": "^[A-Za-z0-9:_\\-]+$", "maxLength": 255}));
    assert!(
        run <= plain + 8,
        "{run} nodes for the run, {plain} for a plain string"
    );
    let long = format!("\"{}\"", "a:_-Z9".repeat(42) + "abc");
    let too_long = format!("\"{}\"", "a:_-Z9".repeat(42) + "abcd");
    check(
        json!({"type": "string", "pattern": "^[A-Za-z0-9:_\\-]+$", "maxLength": 255}),
        &["\"a\"", &long],
        &["\"\"", &too_long, "\"a b\"", "\"a\\n\""],
    );
    // `*` with minLength; an escape is one character when the class has it.
    check(
        json!({"type": "string", "pattern": "^[a-z\"]*$", "minLength": 2, "maxLength": 3}),
        &["\"ab\"", "\"a\\\"\"", "\"\\\"\\\"\\\"\""],
        &["\"a\"", "\"abcd\"", "\"a1\""],
    );
    // A one-member class (read as a literal) too, with a bound far past what a product of
    // automata could hold.
    let one = nodes(json!({"type": "string", "pattern": "^[\\^]+$", "maxLength": 100000}));
    assert!(one <= plain + 8, "{one} nodes for a one-character run");
    check(
        json!({"type": "string", "pattern": "^[\\^]+$", "minLength": 2, "maxLength": 3}),
        &["\"^^\"", "\"^^^\""],
        &["\"^\"", "\"^^^^\"", "\"^a\""],
    );
    // Bounds that the run cannot meet: no string.
    assert!(c
        .compile_json_schema(
            &json!({"type": "string", "pattern": "^[a-z]{5,}$", "maxLength": 3}),
            &opts
        )
        .is_err());
}

/// A `pattern` whose branches each hold at most one unbounded run of one character class
/// among pieces of fixed length, with `minLength`/`maxLength`: each run gets the bounds
/// its branch's fixed pieces leave (a counted repetition), not the product of the
/// pattern's automaton with a counter (`Github_medium---o42892`'s `tag` with `maxLength`
/// 255: about 1,000 rules).
#[test]
fn a_pattern_with_one_run_per_branch_and_lengths_bounds_the_run() {
    let c = byte_compiler(tokensieve::Limits::default());
    let opts = JsonSchemaOptions::default();
    let nodes = |schema: serde_json::Value| node_count(&c, &schema);
    let tag = "^([\\w\\/-]|[\\w-][\\w\\/-]*[\\w-])$";
    let plain = nodes(json!({"type": "string", "minLength": 1, "maxLength": 255}));
    let bounded = nodes(json!({"type": "string", "pattern": tag, "maxLength": 255}));
    assert!(
        bounded <= plain + 16,
        "{bounded} nodes for the tag, {plain} for a plain string"
    );
    let long = format!("\"a{}b\"", "/".repeat(253));
    let too_long = format!("\"a{}b\"", "/".repeat(254));
    check_against_oracle(
        json!({"type": "string", "pattern": tag, "maxLength": 255}),
        &["\"a\"", "\"/\"", "\"a/b\"", &long],
        &["\"\"", "\"a/\"", "\"/a\"", &too_long],
    );
    check_against_oracle(
        json!({"type": "string", "pattern": tag, "minLength": 3, "maxLength": 4}),
        &["\"a-b\"", "\"a//b\""],
        &["\"a\"", "\"ab\"", "\"a///b\""],
    );
    check_against_oracle(
        json!({"type": "string", "pattern": "^v[0-9]+$", "maxLength": 4}),
        &["\"v1\"", "\"v123\""],
        &["\"v\"", "\"v1234\"", "\"x1\""],
    );
    // Anchored at the start only: the rest is a run of any character.
    check_against_oracle(
        json!({"type": "string", "pattern": "^ab", "maxLength": 3}),
        &["\"ab\"", "\"abc\"", "\"ab\\n\""],
        &["\"a\"", "\"abcd\"", "\"xab\""],
    );
    // A branch no length in bounds reaches is left out; with none left, no string.
    check_against_oracle(
        json!({"type": "string", "pattern": "^(a|bbbb[0-9]*)$", "maxLength": 3}),
        &["\"a\""],
        &["\"bbbb\"", "\"bbbb1\"", "\"b\""],
    );
    let none = json!({"type": "string", "pattern": "^(a|bbbb[0-9]*)$",
                      "minLength": 2, "maxLength": 3});
    assert!(c.compile_json_schema(&none, &opts).is_err());
    // Two runs in one branch: the product, as before (exact either way).
    check_against_oracle(
        json!({"type": "string", "pattern": "^[a-z]+-[0-9]+$", "maxLength": 4}),
        &["\"a-1\"", "\"ab-1\"", "\"a-12\""],
        &["\"abc-1\"", "\"a-\"", "\"-1\""],
    );
}

#[test]
fn lengths_implied_by_pattern_or_format() {
    check(
        json!({"type": "string", "pattern": "^[a-z]{2,4}$", "maxLength": 8, "minLength": 1}),
        &["\"ab\"", "\"abcd\""],
        &["\"a\"", "\"abcde\""],
    );
    check(
        json!({"type": "string", "format": "date", "maxLength": 10}),
        &["\"2024-02-29\""],
        &["\"2023-02-29\""],
    );
    let opts = JsonSchemaOptions::default();
    // Not implied: both hold (the pattern's automaton times a character counter).
    check(
        json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}),
        &["\"a\"", "\"abc\""],
        &["\"abcd\"", "\"\"", "\"ab1\""],
    );
    check(
        json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 3}),
        &["\"abc\"", "\"abcdefgh\""],
        &["\"ab\"", "\"abc1\""],
    );
    check(
        json!({"type": "string", "pattern": "^[a-z]+$", "minLength": 3, "maxLength": 3}),
        &["\"abc\""],
        &["\"ab\"", "\"abcd\""],
    );
    // Unanchored: a digit somewhere, exactly 4 characters; an escape is one character.
    check(
        json!({"type": "string", "pattern": "[0-9]", "minLength": 4, "maxLength": 4}),
        &["\"ab1d\"", "\"\\n\\n\\n7\"", "\"é\\\"\\\\5\""],
        &["\"abcd\"", "\"ab1\"", "\"ab1de\""],
    );
    check(
        json!({"type": "string", "pattern": "^([a-z0-9-]+):([a-z0-9.-]+):([a-z0-9-]+)?:([a-z0-9-]+)$", "maxLength": 146}),
        &[
            "\"a:b::c\"",
            "\"arn:aws:s3:x\"",
            &format!("\"a:b::{}\"", "c".repeat(141)),
        ],
        &["\"a:b:c\"", &format!("\"a:b::{}\"", "c".repeat(142))],
    );
    // A product too large to be useful stays refused, never one of the two dropped.
    let (kw, _) = refused(
        json!({"type": "string", "pattern": "^(?:\\S+\\s+){0,29}\\S+$", "maxLength": 30000}),
        &opts,
    );
    assert_eq!(kw, "pattern");
    let (kw, _) = refused(
        json!({"type": "string", "format": "email", "maxLength": 10}),
        &opts,
    );
    assert_eq!(kw, "format");
    // None of the matches fits: nothing is accepted.
    let e = json_schema_to_grammar(
        &json!({"type": "string", "format": "uuid", "maxLength": 10}),
        &opts,
    );
    assert!(
        matches!(e, Err(JsonSchemaError::Unsatisfiable { .. })),
        "{e:?}"
    );
}

/// A `pattern` with `minLength`/`maxLength` that its matches do not imply is the product of
/// the pattern's automaton with a length counter: hundreds of rules. Written again with
/// the same bounds (three `*_ref` objects of MaskBench's `Github_hard---o82821` hold the
/// same `curie` and `tag`), it calls the rules made the first time; other bounds get rules
/// of their own.
#[test]
fn a_bounded_pattern_met_again_calls_the_rules_made_the_first_time() {
    let curie = "^([a-z0-9-]+):([a-z0-9.-]+):([a-z0-9-]+)?:([a-z0-9-]+)$";
    let product_rules = |schema: &serde_json::Value| {
        let g = json_schema_to_grammar(schema, &JsonSchemaOptions::default()).expect("compiles");
        g.rules
            .iter()
            .filter(|r| r.name.starts_with("pattern_len"))
            .count()
    };
    let string = |max: u32| json!({"type": "string", "pattern": curie, "maxLength": max});
    let once = product_rules(&json!({"type": "object", "properties": {"a": string(146)}}));
    assert!(once > 100, "{once} rules for one product");
    let thrice = json!({"type": "object",
        "properties": {"a": string(146), "b": {"type": "array", "items": string(146)},
                       "c": {"type": "object", "properties": {"d": string(146)}}}});
    assert_eq!(product_rules(&thrice), once);
    let other = json!({"type": "object", "properties": {"a": string(146), "b": string(20)}});
    let other_rules = product_rules(&other);
    assert!(
        other_rules > once,
        "{other_rules} rules, {once} for one product"
    );
    check(
        thrice,
        &[
            "{\"a\":\"a:b::c\",\"b\":[\"arn:aws:s3:x\"],\"c\":{\"d\":\"x:y:z:w\"}}",
            &format!("{{\"c\":{{\"d\":\"a:b::{}\"}}}}", "c".repeat(141)),
        ],
        &[
            "{\"b\":[\"a:b:c\"]}",
            &format!("{{\"c\":{{\"d\":\"a:b::{}\"}}}}", "c".repeat(142)),
            &format!("{{\"b\":[\"a:b::{}\"]}}", "c".repeat(142)),
        ],
    );
    check(
        other,
        &[
            "{\"b\":\"a:b::c\"}",
            &format!("{{\"b\":\"a:b::{}\"}}", "c".repeat(15)),
        ],
        &[&format!("{{\"b\":\"a:b::{}\"}}", "c".repeat(16))],
    );
}

fn digits_capped(n: u32) -> JsonSchemaOptions {
    JsonSchemaOptions {
        max_number_digits: Some(n),
        ..Default::default()
    }
}

#[test]
fn max_number_digits_caps_free_digit_runs() {
    let opts = digits_capped(3);
    check_with(
        json!({"type": "number"}),
        &opts,
        &["1.25", "-100", "1e10", "0.001", "999.999e-999", "-0"],
        &["0.0001", "1000", "1e1000", "1.2345"],
    );
    check_with(
        json!({"type": "integer"}),
        &opts,
        &["123", "12.000", "-999", "0"],
        &["1234", "1.0000", "-1000"],
    );
    // Only runs left unbounded by the schema are capped: explicit bounds keep their digits.
    check_with(
        json!({"type": "integer", "minimum": 0, "maximum": 100000}),
        &opts,
        &["100", "1000", "100000"],
        &["100001", "100000.0000"],
    );
    // An open upper end: longer numbers up to the cap (or the lower bound's length + 1).
    check_with(
        json!({"type": "integer", "minimum": 5}),
        &opts,
        &["5", "999"],
        &["1000", "4"],
    );
    check_with(
        json!({"type": "integer", "minimum": 123456}),
        &opts,
        &["123456", "1234567"],
        &["12345678"],
    );
    // Bounded numbers: the free fraction digits are capped too.
    check_with(
        json!({"type": "number", "minimum": 0, "maximum": 10}),
        &opts,
        &["1.25", "0.001", "10", "10.000"],
        &["0.0000001", "1.2345678", "10.5"],
    );
    check_with(
        json!({"type": "number", "multipleOf": 0.01}),
        &opts,
        &["1.25", "999.5"],
        &["1000", "1.255"],
    );
    // Strings are untouched.
    check_with(
        json!({"type": "string", "pattern": "^[0-9]+$"}),
        &opts,
        &["\"12345\"", "\"1234567890123\""],
        &["\"a\""],
    );
    // Without a cap, as RFC 8259.
    check(
        json!({"type": "number"}),
        &["0.0001", "1000", "1e1000", "1.2345"],
        &[],
    );
    check(json!({"type": "integer"}), &["1234", "1.0000"], &[]);
}

/// `check_with`, after the `jsonschema` crate (an independent validator) agrees with every
/// expectation, so the expectations themselves follow the specification.
fn check_against_oracle(schema: serde_json::Value, good: &[&str], bad: &[&str]) {
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    for (texts, want) in [(good, true), (bad, false)] {
        for t in texts {
            let v: serde_json::Value = serde_json::from_str(t).expect("JSON");
            assert_eq!(validator.is_valid(&v), want, "oracle on {t} for {schema}");
        }
    }
    check_with(schema, &JsonSchemaOptions::default(), good, bad);
}

#[test]
fn all_of_intersects_enums_and_consts() {
    check_against_oracle(
        json!({"allOf": [{"enum": ["a", "b", "c", 1]}, {"enum": ["b", "c", "d", 1.0]}]}),
        &[r#""b""#, r#""c""#, "1"],
        &[r#""a""#, r#""d""#, "2"],
    );
    // No common value: the property can never be written.
    check_against_oracle(
        json!({"type": "object", "properties": {
            "x": {"allOf": [{"enum": ["a"]}, {"enum": ["b"]}]},
            "y": {"allOf": [{"const": 1}, {"const": 2}]},
            "z": {"allOf": [{"const": 3}, {"const": 3.0}]}
        }}),
        &["{}", r#"{"z":3}"#],
        &[
            r#"{"x":"a"}"#,
            r#"{"x":"b"}"#,
            r#"{"y":1}"#,
            r#"{"y":2}"#,
            r#"{"z":4}"#,
        ],
    );
}

#[test]
fn all_of_merges_additional_properties_and_items_of_both_sides() {
    // Each name takes, from each side, its declared schema or that side's
    // additionalProperties: "a" integer (maxLength does not apply), "b" boolean and
    // string (nothing), others strings of at most 3 characters.
    check_against_oracle(
        json!({"allOf": [
            {"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
            {"properties": {"b": {"type": "boolean"}}, "additionalProperties": {"maxLength": 3}}
        ]}),
        &["{}", r#"{"a":1}"#, r#"{"c":"abc"}"#, r#"{"a":2,"c":"x"}"#],
        &[
            r#"{"a":"x"}"#,
            r#"{"b":true}"#,
            r#"{"b":"x"}"#,
            r#"{"c":"abcd"}"#,
            r#"{"c":1}"#,
        ],
    );
    // Items past each side's prefix take that side's items.
    check_against_oracle(
        json!({"allOf": [
            {"prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
            {"items": {"maxLength": 2}}
        ]}),
        &["[]", "[1]", r#"[1,"ab"]"#, r#"[7,"a",""]"#],
        &[r#"["a"]"#, r#"[1,"abc"]"#, "[1,2]"],
    );
}

#[test]
fn ids_that_change_no_base_uri_are_ignored_beside_references() {
    // Draft 4: a fragment `id` names a place in the same document.
    check_against_oracle(
        json!({"$schema": "http://json-schema.org/draft-04/schema#",
            "definitions": {
                "port": {"type": "integer", "minimum": 1},
                "service": {"id": "#/definitions/service", "type": "object",
                    "properties": {"port": {"$ref": "#/definitions/port"}}}
            },
            "$ref": "#/definitions/service"}),
        &[r#"{"port":80}"#, "{}"],
        &[r#"{"port":0}"#, r#"{"port":"80"}"#],
    );
    // Later drafts: `id` is no keyword (`$id` is), so references resolve from the root.
    check_against_oracle(
        json!({"definitions": {
                "port": {"type": "integer", "minimum": 1},
                "service": {"id": "schemata/service", "type": "object",
                    "properties": {"port": {"$ref": "#/definitions/port"}}}
            },
            "properties": {"web": {"$ref": "#/definitions/service"}}}),
        &[r#"{"web":{"port":80}}"#, "{}"],
        &[r#"{"web":{"port":0}}"#],
    );
}

#[test]
fn pattern_properties_that_assert_nothing_still_admit_their_keys() {
    // Beside `additionalProperties: false`, a pattern whose schema is `{}` admits its keys
    // (Snowplow's `^unstruct_event_.*`); beside a schema, it frees their values.
    check_against_oracle(
        json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {}, "user": {}},
            "patternProperties": {"^contexts_.*": {"type": "array"}, "^unstruct_event_.*": {}}}),
        &[
            r#"{"contexts_1":[],"unstruct_event_1":{}}"#,
            r#"{"unstruct_event_x":1,"a":2}"#,
        ],
        &[r#"{"contexts_1":{}}"#, r#"{"other":1}"#],
    );
    check_against_oracle(
        json!({"type": "object", "additionalProperties": false, "patternProperties": {"^x": {}}}),
        &[r#"{"xa":[],"xb":{}}"#, "{}"],
        &[r#"{"y":1}"#],
    );
    check_against_oracle(
        json!({"type": "object", "additionalProperties": {"type": "string"},
            "patternProperties": {"^x": true}}),
        &[r#"{"xa":[],"b":"s"}"#],
        &[r#"{"b":1}"#],
    );
}

/// The keyword and JSON pointer an error names (`None` for errors that name no place).
fn error_place(e: &JsonSchemaError) -> Option<(Option<String>, String)> {
    match e {
        JsonSchemaError::Unsupported {
            keyword, pointer, ..
        }
        | JsonSchemaError::InvalidKeyword {
            keyword, pointer, ..
        } => Some((Some(keyword.clone()), pointer.clone())),
        JsonSchemaError::UnresolvedRef { pointer, .. }
        | JsonSchemaError::Unsatisfiable { pointer, .. } => Some((None, pointer.clone())),
        JsonSchemaError::Limit(l) => Some((None, l.pointer.clone()?)),
        _ => None,
    }
}

/// Whether `pointer` (`#/...`) names a place of `schema`.
fn resolves(schema: &serde_json::Value, pointer: &str) -> bool {
    pointer
        .strip_prefix('#')
        .is_some_and(|p| schema.pointer(p).is_some())
}

#[test]
fn errors_inside_all_of_branches_name_the_branch() {
    for (schema, at) in [
        // Refused after the merge, in a branch's keyword (and deeper).
        (
            json!({"allOf": [
                {"type": "object", "additionalProperties": {"not": {"type": "string", "pattern": "a"}}},
                {"required": ["x"]}
            ]}),
            "#/allOf/0/additionalProperties/not",
        ),
        (
            json!({"allOf": [{"type": "string"}, {"type": "string", "format": "color"}]}),
            "#/allOf/1/format",
        ),
        (
            json!({"properties": {"p": {"allOf": [{"type": "integer"}, {"multipleOf": 2.5}]}}}),
            "#/properties/p/allOf/1/multipleOf",
        ),
        // A name declared on both sides takes both schemas: the error names the side.
        (
            json!({"allOf": [
                {"properties": {"a": {"type": "string"}}},
                {"properties": {"a": {"format": "color"}}}
            ]}),
            "#/allOf/1/properties/a/format",
        ),
        // Refused while merging: which keys are "additional" would change.
        (
            json!({"allOf": [{"patternProperties": {"^a": true}}, {"additionalProperties": false}]}),
            "#/allOf/1/additionalProperties",
        ),
        (
            json!({"allOf": [{"additionalProperties": false}, {"patternProperties": {"^a": true}}]}),
            "#/allOf/0/additionalProperties",
        ),
        // Nested allOf, and the sibling keywords of an allOf.
        (
            json!({"allOf": [{"allOf": [{"type": "string"}, {"format": "color"}]}]}),
            "#/allOf/0/allOf/1/format",
        ),
        (
            json!({"type": "string", "format": "color", "allOf": [{"minLength": 1}]}),
            "#/format",
        ),
        // The keywords of a `$ref` target merged beside its siblings.
        (
            json!({"$defs": {"c": {"format": "color"}}, "type": "string", "$ref": "#/$defs/c"}),
            "#/$defs/c/format",
        ),
        // anyOf branches merged with their siblings.
        (
            json!({"type": "string", "anyOf": [{"minLength": 1}, {"format": "color"}]}),
            "#/anyOf/1/format",
        ),
        // `then`, `else` and `if` become parts of an `allOf` of the compiler's.
        (
            json!({"if": {"type": "string"}, "then": {"allOf": [{"format": "color"}]}}),
            "#/then/allOf/0/format",
        ),
        (
            json!({"allOf": [{"type": "string"}], "if": {"minLength": 2}, "else": {"format": "color"}}),
            "#/else/format",
        ),
        (
            json!({"if": {"type": "string"}, "then": {"minLength": 1}, "else": {"type": "object", "additionalProperties": {"not": {"pattern": "a"}}}}),
            "#/else/additionalProperties/not",
        ),
        // Unsatisfiable bounds from two branches.
        (
            json!({"properties": {"s": {"allOf": [{"type": "string", "pattern": "^a+$", "minLength": 2}, {"maxLength": 1, "pattern": "^a+$"}]}}}),
            "",
        ),
    ] {
        let e = json_schema_to_grammar(&schema, &JsonSchemaOptions::default())
            .expect_err(&schema.to_string());
        let (_, pointer) = error_place(&e).unwrap_or_else(|| panic!("{schema}: {e}"));
        assert!(
            resolves(&schema, &pointer),
            "{schema}: {pointer} is no place of the schema ({e})"
        );
        if !at.is_empty() {
            assert_eq!(pointer, at, "{schema}: {e}");
        }
    }
}

/// A compiler over every byte as a token, under `limits`.
fn byte_compiler(limits: tokensieve::Limits) -> tokensieve::GrammarCompiler {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let eos = tokens.len() as u32;
    tokens.push(b"<eos>".to_vec());
    let vocab = tokensieve::Vocabulary::from_token_bytes(&tokens, &[eos], &[eos]).unwrap();
    tokensieve::GrammarCompiler::new(std::sync::Arc::new(vocab)).with_limits(limits)
}

#[test]
fn counts_above_the_repeat_bound_name_their_keyword() {
    let defaults = byte_compiler(tokensieve::Limits::default());
    let unlimited = byte_compiler(tokensieve::Limits::unlimited());
    for (schema, at, unlimited_too) in [
        (
            json!({"properties": {"a": {"type": "string", "maxLength": 2_000_000}}}),
            "#/properties/a/maxLength",
            false,
        ),
        (
            json!({"type": "string", "minLength": 1_000_001}),
            "#/minLength",
            false,
        ),
        (
            json!({"type": "string", "maxLength": 9_007_199_254_740_992u64}),
            "#/maxLength",
            false,
        ),
        (
            json!({"properties": {"xs": {"type": "array", "maxItems": 2_000_000}}}),
            "#/properties/xs/maxItems",
            false,
        ),
        (
            json!({"type": "array", "minItems": 5_000_000, "items": {"type": "integer"}}),
            "#/minItems",
            false,
        ),
        (
            json!({"allOf": [{"type": "string"}, {"maxLength": 5_000_000}]}),
            "#/allOf/1/maxLength",
            false,
        ),
        // Above u32::MAX, a lower bound is never cut down to one (which would accept
        // shorter strings or arrays than the schema allows), whatever the limits.
        (
            json!({"type": "string", "minLength": 1_000_000_000_000u64}),
            "#/minLength",
            true,
        ),
        (
            json!({"type": "array", "minItems": 1_000_000_000_000u64}),
            "#/minItems",
            true,
        ),
    ] {
        let mut compilers = vec![&defaults];
        if unlimited_too {
            compilers.push(&unlimited);
        }
        for c in compilers {
            let e = c
                .compile_json_schema(&schema, &JsonSchemaOptions::default())
                .expect_err(&schema.to_string());
            let tokensieve::CompileError::Limit(l) = &e else {
                panic!("{schema}: expected a limit error, got {e}");
            };
            assert_eq!(l.limit, tokensieve::Limit::RepeatBound, "{schema}: {e}");
            assert_eq!(l.pointer.as_deref(), Some(at), "{schema}: {e}");
            let keyword = at.rsplit('/').next().unwrap();
            assert!(e.to_string().contains(keyword), "{schema}: {e}");
        }
        // The front end alone (under the default limits) says the same.
        let e = json_schema_to_grammar(&schema, &JsonSchemaOptions::default())
            .expect_err(&schema.to_string());
        assert_eq!(
            error_place(&e).map(|p| p.1).as_deref(),
            Some(at),
            "{schema}: {e}"
        );
    }
    // A count within the bound, or on a keyword that does not apply, compiles.
    for schema in [
        json!({"type": "string", "maxLength": 1_000_000}),
        json!({"type": "integer", "maxLength": 5_000_000}),
        json!({"type": "string", "maxLength": 5_000_000, "enum": ["a", "b"]}),
        json!({"type": "string", "pattern": "^[a-z]{2,4}$", "maxLength": 5_000_000}),
    ] {
        json_schema_to_grammar(&schema, &JsonSchemaOptions::default())
            .unwrap_or_else(|e| panic!("{schema}: {e}"));
    }
    defaults
        .compile_json_schema(
            &json!({"type": "string", "pattern": "^[a-z]{2,4}$", "maxLength": 5_000_000}),
            &JsonSchemaOptions::default(),
        )
        .unwrap();
}

#[test]
fn malformed_definitions_anchors_and_ids_are_invalid() {
    const DRAFT7: &str = "http://json-schema.org/draft-07/schema#";
    const DRAFT2019: &str = "https://json-schema.org/draft/2019-09/schema";
    for (schema, keyword, at) in [
        (json!({"$defs": 5}), "$defs", "#/$defs"),
        (json!({"definitions": []}), "definitions", "#/definitions"),
        (
            json!({"properties": {"a": {"$defs": "x"}}}),
            "$defs",
            "#/properties/a/$defs",
        ),
        (json!({"$defs": {"a": 5}}), "$defs", "#/$defs/a"),
        (
            json!({"definitions": {"a": {"type": "integer"}, "b": "string"}}),
            "definitions",
            "#/definitions/b",
        ),
        (json!({"$anchor": "a b"}), "$anchor", "#/$anchor"),
        (json!({"$anchor": "1a"}), "$anchor", "#/$anchor"),
        (json!({"$anchor": "a:b"}), "$anchor", "#/$anchor"),
        (json!({"$anchor": ""}), "$anchor", "#/$anchor"),
        (json!({"$anchor": 5}), "$anchor", "#/$anchor"),
        (
            json!({"$defs": {"x": {"$anchor": "caf\u{e9}"}}}),
            "$anchor",
            "#/$defs/x/$anchor",
        ),
        (
            json!({"$dynamicAnchor": "a b"}),
            "$dynamicAnchor",
            "#/$dynamicAnchor",
        ),
        (
            json!({"$schema": DRAFT2019, "$anchor": "_a"}),
            "$anchor",
            "#/$anchor",
        ),
        (json!({"$id": "#frag"}), "$id", "#/$id"),
        (
            json!({"$id": "http://example.com/s.json#frag"}),
            "$id",
            "#/$id",
        ),
        (
            json!({"$defs": {"x": {"$id": "#x", "type": "integer"}}, "$ref": "#x"}),
            "$id",
            "#/$defs/x/$id",
        ),
        (
            json!({"$schema": DRAFT2019, "$id": "#frag"}),
            "$id",
            "#/$id",
        ),
        (json!({"$id": 5}), "$id", "#/$id"),
        (
            json!({"items": {"anyOf": [{"type": "string"}, {"$id": "#a"}]}}),
            "$id",
            "#/items/anyOf/1/$id",
        ),
    ] {
        match json_schema_to_grammar(&schema, &JsonSchemaOptions::default()) {
            Err(JsonSchemaError::InvalidKeyword {
                keyword: k,
                pointer,
                ..
            }) => assert_eq!((k.as_str(), pointer.as_str()), (keyword, at), "{schema}"),
            other => panic!("{schema}: expected InvalidKeyword, got {:?}", other.err()),
        }
    }
    for schema in [
        json!({"$defs": {"t": true, "f": false}, "definitions": {"a": {"type": "integer"}}}),
        json!({"$schema": DRAFT7, "$defs": {"a": 5}}),
        json!({"$anchor": "_a-b.c1", "type": "integer"}),
        json!({"$defs": {"x": {"$anchor": "A", "type": "integer"}}, "$ref": "#A"}),
        json!({"$schema": DRAFT2019, "$anchor": "a:b"}),
        json!({"$id": "http://example.com/s.json#"}),
        json!({"$id": "http://example.com/s.json"}),
        json!({"$id": "#"}),
        // Drafts 6 and 7: a fragment `$id` is a plain-name anchor.
        json!({"$schema": DRAFT7, "$id": "#frag"}),
        json!({"$schema": DRAFT7,
            "definitions": {"a": {"$id": "#foo", "type": "integer"}},
            "properties": {"p": {"$ref": "#foo"}}}),
        // Not keywords: inside constants, and `$anchor` before 2019-09.
        json!({"const": {"$defs": 5, "$anchor": "a b", "$id": "#x"}}),
        json!({"enum": [{"$id": "#x"}]}),
        json!({"properties": {"$id": {"type": "string"}, "$defs": {"type": "integer"}}}),
        json!({"$schema": DRAFT7, "$anchor": "a b"}),
    ] {
        json_schema_to_grammar(&schema, &JsonSchemaOptions::default())
            .unwrap_or_else(|e| panic!("{schema}: {e}"));
    }
    // The draft 7 anchor is followed.
    check_against_oracle(
        json!({"$schema": DRAFT7,
            "definitions": {"a": {"$id": "#foo", "type": "integer"}},
            "properties": {"p": {"$ref": "#foo"}}}),
        &[r#"{"p":1}"#, "{}"],
        &[r#"{"p":"x"}"#],
    );
}
