//! Semantics that differ by draft: draft 4's boolean `exclusiveMinimum`/`exclusiveMaximum`,
//! and a `$ref` whose sibling keywords drafts 4 to 7 ignore and 2020-12 applies. Each
//! schema is compiled and checked against the `jsonschema` crate on good and bad instances.

use super::schema_check::{byte_agrees, byte_expect};
use serde_json::json;

#[test]
fn draft4_boolean_exclusive_bounds() {
    let d4 = "http://json-schema.org/draft-04/schema#";
    let nums = &["0", "1", "1.5", "2", "2.5", "3", "-1", "\"x\""];
    byte_expect(
        json!({"$schema": d4, "minimum": 1, "exclusiveMinimum": true}),
        &["1.5", "2", "\"x\""],
        &["1", "0"],
    );
    byte_expect(
        json!({"$schema": d4, "maximum": 2, "exclusiveMaximum": true}),
        &["1.5", "1"],
        &["2", "3"],
    );
    byte_expect(
        json!({"$schema": d4, "type": "integer", "minimum": 1, "exclusiveMinimum": false, "maximum": 3, "exclusiveMaximum": true}),
        &["1", "2"],
        &["0", "3"],
    );
    byte_agrees(
        json!({"$schema": d4, "allOf": [{"minimum": 1, "exclusiveMinimum": true}, {"maximum": 3, "exclusiveMaximum": true}]}),
        nums,
    );
    byte_agrees(
        json!({"$schema": d4, "not": {"minimum": 1, "exclusiveMinimum": true}}),
        nums,
    );
}

#[test]
fn draft7_ref_ignores_siblings() {
    byte_expect(
        json!({"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"type":"integer"}},"$ref":"#/definitions/a","minimum":100}),
        &["0", "100"],
        &["\"a\"", "1.5"],
    );
    byte_expect(
        json!({"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$id":"http://example.com/a.json","$ref":"#/definitions/b","definitions":{"b":{"type":"integer"}}},"b":{"type":"string"}},"$ref":"#/definitions/a"}),
        &["\"a\""],
        &["1"],
    );
    byte_expect(
        json!({"$schema":"http://json-schema.org/draft-04/schema#","definitions":{"a":{"type":"integer"}},"properties":{"x":{"$ref":"#/definitions/a","maximum":1}}}),
        &["{\"x\":5}"],
        &["{\"x\":\"s\"}"],
    );
    // 2020-12 applies the siblings.
    byte_expect(
        json!({"$defs":{"a":{"type":"integer"}},"$ref":"#/$defs/a","minimum":100}),
        &["100"],
        &["0"],
    );
}
