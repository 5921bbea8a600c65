//! `oneOf` compiled as a union when its branches are provably disjoint, on the byte
//! vocabulary: each rule of the disjointness prover (`Shape` in `references.rs`) with a
//! schema that compiles now, instances valid for exactly one branch (accepted), for none
//! (rejected) and, where possible, for two (rejected: the proof or the type exclusion was
//! needed); and overlapping pairs that stay refused.

use crate::common;

use common::{byte_accepts, byte_check, byte_compiler};
use serde_json::{json, Value};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::JsonSchemaError;

fn opts() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    }
}

fn check(schema: Value, good: &[&str], bad: &[&str]) {
    byte_check(&schema, &opts(), good, bad)
}

fn refused(schema: Value) {
    match byte_compiler().compile_json_schema(&schema, &opts()) {
        Err(tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsupported {
            keyword,
            pointer,
            ..
        })) => assert_eq!((keyword.as_str(), pointer.as_str()), ("oneOf", "#/oneOf")),
        Err(e) => panic!("{schema}: expected Unsupported, got {e}"),
        Ok(_) => panic!("{schema}: expected Unsupported, it compiled"),
    }
}

/// Branches without `type` accept every non-object: a string matches both, so `oneOf`
/// rejects it; on objects the discriminator makes them disjoint.
#[test]
fn types_two_branches_accept_entirely_are_left_out() {
    check(
        json!({"oneOf": [
            {"properties": {"kind": {"enum": ["a"]}}, "required": ["kind"]},
            {"properties": {"kind": {"enum": ["b"]}, "n": {"type": "integer"}}, "required": ["kind"]}
        ]}),
        &[
            r#"{"kind":"a"}"#,
            r#"{"kind":"b","n":1}"#,
            r#"{"kind":"a","n":"x"}"#,
        ],
        &[
            // Valid for both branches.
            r#""x""#,
            "1",
            "null",
            "[]",
            "true",
            // Valid for none.
            r#"{"kind":"c"}"#,
            r#"{"kind":"b","n":"x"}"#,
            "{}",
        ],
    );
    // `{}` accepts everything and `type: string` every string: strings match twice.
    check(
        json!({"oneOf": [{}, {"type": "string"}]}),
        &["1", "null", "{}", "[1]", "true"],
        &[r#""x""#, r#""""#],
    );
    // Every type excluded: nothing is accepted.
    let g = byte_compiler().compile_json_schema(&json!({"oneOf": [{}, true]}), &opts());
    if let Ok(g) = g {
        for t in ["1", "null", "{}", "\"x\""] {
            assert!(!byte_accepts(&g, t));
        }
    }
    // An `anyOf` with a branch that accepts all strings accepts all strings.
    check(
        json!({"oneOf": [{"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "string"}]}),
        &["1", "-4"],
        &[r#""x""#, "1.5", "null"],
    );
    // Siblings still apply.
    check(
        json!({"type": ["object", "string"], "minLength": 2, "oneOf": [
            {"required": ["a"], "properties": {"a": {"const": 1}}},
            {"required": ["a"], "properties": {"a": {"const": 2}}}
        ]}),
        &[r#"{"a":1}"#, r#"{"a":2}"#],
        &[r#""xyz""#, r#""x""#, "1", r#"{"a":3}"#],
    );
}

/// A type two branches constrain (even trivially) is not left out: refused.
#[test]
fn overlap_on_a_constrained_type_stays_refused() {
    refused(json!({"oneOf": [
        {"properties": {"kind": {"pattern": "^a"}}, "required": ["kind"]},
        {"properties": {"name": {"type": "string"}}, "required": ["name"]}
    ]}));
    refused(json!({"oneOf": [
        {"type": "object", "required": ["a"], "properties": {"a": {"pattern": "^x"}}},
        {"type": "object", "required": ["b"]}
    ]}));
    refused(
        json!({"oneOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 0}]}),
    );
    refused(
        json!({"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "minLength": 2}]}),
    );
}

/// One branch requires a property the other forbids.
#[test]
fn required_against_forbidden() {
    // `additionalProperties: false` without it.
    check(
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
            {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"], "additionalProperties": false}
        ]}),
        &[r#"{"a":"x"}"#, r#"{"b":1}"#],
        &[r#"{"a":"x","b":1}"#, "{}", r#"{"a":1}"#, r#"{"c":1}"#],
    );
    // `properties: {b: false}`.
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["a"], "properties": {"b": false, "a": {"pattern": "^x"}}},
            {"type": "object", "required": ["b"]}
        ]}),
        &[r#"{"a":"xy"}"#, r#"{"b":1}"#, r#"{"a":"y","b":1}"#],
        &[r#"{"a":"y"}"#, "{}"],
    );
    // `not: {required: [b]}`.
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["a"], "not": {"required": ["b"]}, "properties": {"a": {"pattern": "^x"}}},
            {"type": "object", "required": ["b"], "properties": {"b": {"pattern": "^x"}}}
        ]}),
        &[r#"{"a":"xy"}"#, r#"{"b":"x"}"#, r#"{"a":"x","b":"x"}"#],
        &[r#"{"a":"y"}"#, r#"{"b":"y"}"#, r#"{"a":"x","b":"y"}"#, "{}"],
    );
    // Through `$ref`.
    check(
        json!({"$defs": {
                "A": {"type": "object", "properties": {"src": {"type": "string"}}, "required": ["src"], "additionalProperties": false},
                "B": {"type": "object", "properties": {"with": {"type": "string"}}, "required": ["with"], "additionalProperties": false}},
               "oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]}),
        &[r#"{"src":"x"}"#, r#"{"with":"y"}"#],
        &[r#"{"src":"x","with":"y"}"#, "{}", r#""x""#],
    );
}

/// A required property whose value schemas cannot agree: by type, by const/enum against a
/// type, recursively.
#[test]
fn required_property_shapes() {
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["v"], "properties": {"v": {"type": "string", "pattern": "^a"}}},
            {"type": "object", "required": ["v"], "properties": {"v": {"type": "integer"}}}
        ]}),
        &[r#"{"v":"ab"}"#, r#"{"v":1}"#],
        &[r#"{"v":"b"}"#, r#"{"v":null}"#, r#"{"v":1.5}"#, "{}"],
    );
    // Only one branch requires it; the other constrains it when present.
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["v"], "properties": {"v": {"const": "x"}}},
            {"type": "object", "properties": {"v": {"type": "integer"}, "w": {"pattern": "^w"}}}
        ]}),
        &[r#"{"v":"x"}"#, r#"{"v":1}"#, "{}", r#"{"w":"w"}"#],
        &[r#"{"v":"y"}"#, r#"{"w":"x"}"#],
    );
    // Nested: a required object whose own required discriminator differs.
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["cfg"], "properties": {"cfg": {"type": "object", "required": ["k"], "properties": {"k": {"const": 1}, "p": {"pattern": "^p"}}}}},
            {"type": "object", "required": ["cfg"], "properties": {"cfg": {"type": "object", "required": ["k"], "properties": {"k": {"const": 2}}}}}
        ]}),
        &[r#"{"cfg":{"k":1}}"#, r#"{"cfg":{"k":2,"p":"x"}}"#],
        &[
            r#"{"cfg":{"k":3}}"#,
            r#"{"cfg":{"k":1,"p":"x"}}"#,
            r#"{"cfg":{}}"#,
        ],
    );
    // A constant checked against the other branch's shape: a too long string.
    check(
        json!({"oneOf": [
            {"enum": ["long-value", 3]},
            {"type": "string", "maxLength": 4, "pattern": "^l"}
        ]}),
        &[r#""long-value""#, "3", r#""lo""#],
        &[r#""x""#, "4", r#""long-v""#],
    );
}

/// Number bounds that cannot overlap.
#[test]
fn number_ranges() {
    check(
        json!({"oneOf": [
            {"type": "integer", "maximum": 0},
            {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 3}
        ]}),
        &["0", "-7", "3", "9"],
        &["1", "4", "\"x\""],
    );
    check(
        json!({"oneOf": [
            {"type": "integer", "exclusiveMaximum": 10},
            {"type": "integer", "minimum": 10}
        ]}),
        &["9", "10", "11", "-3"],
        &["1.5", "null"],
    );
    // Touching inclusive bounds overlap (10 is in both).
    refused(json!({"oneOf": [
        {"type": "integer", "maximum": 10},
        {"type": "integer", "minimum": 10}
    ]}));
}

/// String lengths that cannot overlap.
#[test]
fn string_lengths() {
    check(
        json!({"oneOf": [
            {"type": "string", "maxLength": 0},
            {"type": "string", "minLength": 1, "pattern": "^[a-z]+$"}
        ]}),
        &[r#""""#, r#""abc""#],
        &[r#""ABC""#, "1"],
    );
    // No `type`: non-strings are valid for both and rejected.
    check(
        json!({"oneOf": [{"maxLength": 0}, {"minLength": 1, "pattern": "^[a-z]+$"}]}),
        &[r#""""#, r#""abc""#],
        &[r#""ABC""#, "1", "null", "{}"],
    );
}

/// Arrays: item counts, or item schemas when both require an item.
#[test]
fn array_counts_and_items() {
    check(
        json!({"oneOf": [
            {"type": "array", "maxItems": 1, "items": {"pattern": "^a"}},
            {"type": "array", "minItems": 2}
        ]}),
        &["[]", r#"["ab"]"#, r#"["x","y"]"#],
        &[r#"["x"]"#, "1"],
    );
    check(
        json!({"oneOf": [
            {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^a"}},
            {"type": "array", "minItems": 1, "items": {"type": "integer"}}
        ]}),
        &[r#"["ab"]"#, "[1,2]"],
        &["[]", r#"["ab",1]"#, "[null]", r#"["b"]"#],
    );
    // Without a required item, `[]` is in both: refused.
    refused(json!({"oneOf": [
        {"type": "array", "items": {"type": "string", "pattern": "^a"}},
        {"type": "array", "items": {"type": "integer"}}
    ]}));
}

/// Patterns: one that is a single literal (`^success$`) against the other side's patterns,
/// lengths or constants; literal prefixes that differ.
#[test]
fn literal_patterns_and_prefixes() {
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "pattern": "^success$"}}},
            {"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "pattern": "^fail$"}, "why": {"type": "string"}}}
        ]}),
        &[
            r#"{"status":"success"}"#,
            r#"{"status":"fail","why":"x"}"#,
            r#"{"status":"success","why":1}"#,
        ],
        &[
            r#"{"status":"other"}"#,
            r#"{"status":"fail","why":1}"#,
            "{}",
        ],
    );
    // A literal against a pattern with a group: tested by matching it.
    check(
        json!({"oneOf": [
            {"type": "string", "pattern": "^basic:(string|text):$"},
            {"type": "string", "pattern": "^basic:boolean:$"}
        ]}),
        &[r#""basic:string:""#, r#""basic:boolean:""#],
        &[r#""basic:int:""#],
    );
    // Different literal prefixes.
    check(
        json!({"oneOf": [
            {"type": "string", "pattern": "^https?://.+$"},
            {"type": "string", "pattern": "^\\./.+$"}
        ]}),
        &[r#""http://x""#, r#""./a""#],
        &[r#""ftp://x""#, r#""./""#],
    );
    // A constant the other branch's pattern rejects.
    check(
        json!({"oneOf": [{"const": "any"}, {"type": "string", "pattern": "^[0-9]+$"}]}),
        &[r#""any""#, r#""12""#],
        &[r#""x""#, "12"],
    );
    // A prefix of the other's prefix, unanchored patterns, a constant both match: refused.
    refused(
        json!({"oneOf": [{"type": "string", "pattern": "^ab"}, {"type": "string", "pattern": "^abc"}]}),
    );
    refused(
        json!({"oneOf": [{"type": "string", "pattern": "abc"}, {"type": "string", "pattern": "abd"}]}),
    );
    refused(json!({"oneOf": [{"const": "123"}, {"type": "string", "pattern": "^[0-9]+$"}]}));
    refused(
        json!({"oneOf": [{"type": "string", "pattern": "^a|b"}, {"type": "string", "pattern": "^c"}]}),
    );
}

/// `patternProperties` with `additionalProperties: false`: a required name that no
/// pattern matches is forbidden.
#[test]
fn pattern_properties_forbid_unmatched_names() {
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["$date"], "properties": {"$date": {"type": "integer"}}, "additionalProperties": false},
            {"type": "object", "patternProperties": {"^[^$]": {"type": "string"}}, "additionalProperties": false}
        ]}),
        &[r#"{"$date":1}"#, r#"{"a":"x"}"#, "{}"],
        &[r#"{"$date":1,"a":"x"}"#, r#"{"a":1}"#, r#"{"$x":"y"}"#],
    );
    // A name a pattern matches is not forbidden: `{"date": 1}` may be in both.
    refused(json!({"oneOf": [
        {"type": "object", "required": ["date"], "properties": {"date": {"type": "integer"}}, "additionalProperties": false},
        {"type": "object", "patternProperties": {"^[^$]": {"type": "integer", "minimum": 0}}, "additionalProperties": false}
    ]}));
}

/// A branch that is itself a union (`oneOf`/`anyOf`): the union of its branches' types
/// and values.
#[test]
fn nested_unions() {
    check(
        json!({"oneOf": [
            {"oneOf": [{"type": "string", "pattern": "^#"}, {"type": "array", "items": {"type": "integer"}}]},
            {"type": "object", "required": ["ios"], "properties": {"ios": {"type": "string"}}}
        ]}),
        &[r##""#fff""##, "[1,2]", r#"{"ios":"x"}"#],
        &[r#""fff""#, r#"["x"]"#, "{}", "null"],
    );
    check(
        json!({"oneOf": [
            {"anyOf": [{"enum": ["a", "b"]}, {"enum": ["c"]}]},
            {"type": "string", "enum": ["d", "e"]}
        ]}),
        &[r#""a""#, r#""c""#, r#""e""#],
        &[r#""f""#, "1"],
    );
    // The union's types overlap the other branch: refused.
    refused(json!({"oneOf": [
        {"oneOf": [{"type": "string", "pattern": "^#"}, {"type": "integer"}]},
        {"type": "string", "minLength": 2}
    ]}));
}

/// Unknown keywords, ignored by the compiler under `ignore_unknown_keywords`, constrain
/// nothing: two such branches without `type` accept every string, so strings are out.
#[test]
fn ignored_unknown_keywords_constrain_nothing() {
    let opts = JsonSchemaOptions {
        any_order: true,
        ignore_unknown_keywords: true,
        ..Default::default()
    };
    let schema = json!({"oneOf": [
        {"x-note": 1, "required": ["a"], "properties": {"a": {"const": 1}}},
        {"x-note": 2, "required": ["a"], "properties": {"a": {"const": 2}}}
    ]});
    let g = byte_compiler()
        .compile_json_schema(&schema, &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    for t in [r#"{"a":1}"#, r#"{"a":2}"#] {
        assert!(byte_accepts(&g, t), "{t}");
    }
    for t in [r#""x""#, "1", r#"{"a":3}"#] {
        assert!(!byte_accepts(&g, t), "{t}");
    }
}

/// `enum`/`const` beside `pattern`: the constants the pattern rejects are left out.
#[test]
fn constants_filtered_by_pattern() {
    check(
        json!({"enum": ["abc", "xbc", 1, null], "pattern": "^a"}),
        &[r#""abc""#, "1", "null"],
        &[r#""xbc""#, r#""a""#],
    );
}

/// The negation of string constants (a pattern: the complement of their trie) lets
/// overlapping branches that differ in an optional string discriminator compile as
/// `A ∧ ¬B ∨ B ∧ ¬A`.
#[test]
fn negated_string_constants() {
    check(
        json!({"not": {"enum": ["ab", "a", "a.c", "x-]^\\"]}}),
        &[
            r#""""#,
            r#""b""#,
            r#""abc""#,
            r#""aa""#,
            r#""a.""#,
            r#""axc""#,
            r#""a.cd""#,
            r#""x-]""#,
            r#""x-]^\\\\""#,
            r#""a\nb""#,
            "1",
            "null",
            "{}",
        ],
        &[
            r#""ab""#,
            r#""a""#,
            r#""a.c""#,
            r#""x-]^\\""#,
            r#""\u0061b""#,
        ],
    );
    check(
        json!({"not": {"const": ""}}),
        &[r#"" ""#, r#""\n""#, "0"],
        &[r#""""#],
    );
    check(
        json!({"oneOf": [
            {"properties": {"assert": {"enum": ["NotBlank"]}, "message": {"type": "string"}}},
            {"properties": {"assert": {"enum": ["Blank"]}, "message": {"type": "string"}}}
        ]}),
        &[
            r#"{"assert":"Blank"}"#,
            r#"{"assert":"NotBlank","message":"m"}"#,
        ],
        &[
            // Valid for both.
            "{}",
            r#"{"message":"m"}"#,
            "1",
            // For none.
            r#"{"assert":"Other"}"#,
            r#"{"assert":"Blank","message":1}"#,
        ],
    );
    // Too long or with control characters: still refused.
    refused(json!({"oneOf": [
        {"properties": {"k": {"const": "a\u{1}"}}},
        {"properties": {"k": {"const": "b"}}}
    ]}));
}

/// Exclusive branches negate only the branches each one may overlap: branch 0 (a pattern,
/// which has no negation) is disjoint from the others, so its negation is never needed.
#[test]
fn exclusive_branches_negate_only_overlapping_ones() {
    check(
        json!({"oneOf": [
            {"type": "string", "pattern": "^a"},
            {"type": "number", "minimum": 0},
            {"type": "number", "maximum": 10}
        ]}),
        &[r#""ab""#, "11", "-1"],
        &[r#""b""#, "5", "0", "10", "null"],
    );
    // When the pattern branch overlaps another, its negation is needed: refused.
    refused(json!({"oneOf": [
        {"type": "string", "pattern": "^a"},
        {"type": "string", "maxLength": 3},
        {"type": "number"}
    ]}));
}
