//! Malformed keyword values are refused wherever they are written (issue 23, item 8): a
//! typed `InvalidKeyword` naming the keyword and the JSON pointer of the value, also where
//! the instance type the keyword constrains does not apply (`minItems` beside
//! `"type": "string"`), in unused `$defs`, and under `not`.

use serde_json::{json, Value};
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::{json_schema_to_grammar, JsonSchemaError};

const DRAFT3: &str = "http://json-schema.org/draft-03/schema#";
const DRAFT4: &str = "http://json-schema.org/draft-04/schema#";
const DRAFT7: &str = "http://json-schema.org/draft-07/schema#";

/// The keyword, pointer and message of an `InvalidKeyword`, or a panic naming the schema.
fn invalid_with(schema: &Value, opts: &JsonSchemaOptions) -> (String, String, String) {
    match json_schema_to_grammar(schema, opts) {
        Err(JsonSchemaError::InvalidKeyword {
            keyword,
            pointer,
            message,
        }) => (keyword, pointer, message),
        other => panic!("{schema}: expected InvalidKeyword, got {:?}", other.err()),
    }
}

fn invalid(schema: &Value) -> (String, String, String) {
    invalid_with(schema, &JsonSchemaOptions::default())
}

fn compiles(schema: &Value) {
    json_schema_to_grammar(schema, &JsonSchemaOptions::default())
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
}

/// Every keyword the front end reads, with a malformed value and the pointer (relative to
/// the schema holding the keyword) the error must name.
fn table() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        // Validation §6.1 (any instance).
        ("type", json!("strin"), "type"),
        ("type", json!(5), "type"),
        ("type", json!(["string", 1]), "type"),
        ("enum", json!("a"), "enum"),
        ("enum", json!({"a": 1}), "enum"),
        // §6.2 (numbers), draft 3 `divisibleBy`.
        ("multipleOf", json!(0), "multipleOf"),
        ("multipleOf", json!(-2), "multipleOf"),
        ("multipleOf", json!("2"), "multipleOf"),
        ("divisibleBy", json!(0), "divisibleBy"),
        ("maximum", json!("10"), "maximum"),
        ("minimum", json!(null), "minimum"),
        ("exclusiveMaximum", json!("1"), "exclusiveMaximum"),
        ("exclusiveMinimum", json!([1]), "exclusiveMinimum"),
        // §6.3 (strings).
        ("maxLength", json!(-1), "maxLength"),
        ("maxLength", json!(2.5), "maxLength"),
        ("minLength", json!("3"), "minLength"),
        ("minLength", json!(true), "minLength"),
        ("pattern", json!(5), "pattern"),
        ("format", json!(["date"]), "format"),
        // §6.4 (arrays).
        ("maxItems", json!(-3), "maxItems"),
        ("minItems", json!("x"), "minItems"),
        ("uniqueItems", json!("yes"), "uniqueItems"),
        ("maxContains", json!(1.5), "maxContains"),
        ("minContains", json!(-1), "minContains"),
        // §6.5 (objects).
        ("maxProperties", json!(-1), "maxProperties"),
        ("minProperties", json!({}), "minProperties"),
        ("required", json!("a"), "required"),
        ("required", json!(["a", 1]), "required"),
        ("required", json!(true), "required"),
        ("dependentRequired", json!(["a"]), "dependentRequired"),
        (
            "dependentRequired",
            json!({"a": "b"}),
            "dependentRequired/a",
        ),
        (
            "dependentRequired",
            json!({"a": [1]}),
            "dependentRequired/a",
        ),
        // Core §10.2 (in place applicators).
        ("allOf", json!([]), "allOf"),
        ("allOf", json!({}), "allOf"),
        ("anyOf", json!([{}, 5]), "anyOf/1"),
        ("oneOf", json!("x"), "oneOf"),
        ("not", json!(5), "not"),
        ("if", json!("x"), "if"),
        ("then", json!([]), "then"),
        ("else", json!(null), "else"),
        ("dependentSchemas", json!({"a": 5}), "dependentSchemas/a"),
        ("dependentSchemas", json!([]), "dependentSchemas"),
        // Core §10.3 (children).
        ("prefixItems", json!({}), "prefixItems"),
        ("prefixItems", json!([true, 1]), "prefixItems/1"),
        ("items", json!(5), "items"),
        ("items", json!([{}, "x"]), "items/1"),
        ("contains", json!(1), "contains"),
        ("properties", json!([]), "properties"),
        ("properties", json!({"a": 1}), "properties/a"),
        (
            "patternProperties",
            json!({"^a": "x"}),
            "patternProperties/^a",
        ),
        ("additionalProperties", json!("no"), "additionalProperties"),
        ("propertyNames", json!(1), "propertyNames"),
        // Unevaluated vocabulary (Core §11).
        ("unevaluatedItems", json!(1), "unevaluatedItems"),
        ("unevaluatedProperties", json!("x"), "unevaluatedProperties"),
        // Older drafts: draft 4-2019 `additionalItems`, draft 4-7 `dependencies`.
        ("additionalItems", json!(2), "additionalItems"),
        ("dependencies", json!(1), "dependencies"),
        ("dependencies", json!({"a": 1}), "dependencies/a"),
        ("dependencies", json!({"a": ["b", 2]}), "dependencies/a"),
        // Core §8.2.3.
        ("$ref", json!(1), "$ref"),
    ]
}

/// Each malformed value is refused at its pointer where its type applies, where it does
/// not (`boolean` is constrained by none of them), in an unused `$defs` entry, and under
/// `not` of a property.
#[test]
fn malformed_values_are_refused_wherever_they_are_written() {
    for (keyword, bad, rel) in table() {
        let own = |x: &'static str| if keyword == "type" { None } else { Some(x) };
        let places: Vec<(Value, String)> = vec![
            (json!({ keyword: bad }), "#".into()),
            (
                match own("boolean") {
                    Some(t) => json!({"type": t, keyword: bad}),
                    None => json!({ keyword: bad }),
                },
                "#".into(),
            ),
            (
                json!({"$defs": {"unused": {"type": "null", keyword: bad}}, "type": "integer"}),
                "#/$defs/unused".into(),
            ),
            (
                json!({"type": "object", "properties": {"a": {"not": {keyword: bad}}}}),
                "#/properties/a/not".into(),
            ),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {keyword: bad}}]}),
                "#/anyOf/1/items".into(),
            ),
        ];
        for (schema, at) in places {
            let (k, p, m) = invalid(&schema);
            assert_eq!(
                (k.as_str(), p.as_str()),
                (keyword, format!("{at}/{rel}").as_str()),
                "{schema}: {m}"
            );
            assert!(!m.is_empty());
        }
    }
}

/// The three schemas of the issue, which compiled (and accepted `{}`) before.
#[test]
fn issue_examples() {
    let (k, p, m) =
        invalid(&json!({"type":"object","properties":{"when":{"type":"string","required":true}}}));
    assert_eq!(
        (k.as_str(), p.as_str()),
        ("required", "#/properties/when/required")
    );
    // The message names draft 3's form and how 2020-12 writes it.
    assert!(m.contains("draft 3"), "{m}");
    assert!(m.contains(r#""required": ["when"]"#), "{m}");
    assert!(m.contains("schema at #,"), "{m}");
    let (k, p, _) = invalid(&json!({"type":"string","minItems":"x"}));
    assert_eq!((k.as_str(), p.as_str()), ("minItems", "#/minItems"));
    let (k, p, _) = invalid(&json!({"type":"integer","maxLength":-1}));
    assert_eq!((k.as_str(), p.as_str()), ("maxLength", "#/maxLength"));
    // `required: false` in a property: draft 3's form too.
    let (k, p, m) =
        invalid(&json!({"properties": {"a": {"properties": {"b": {"required": false}}}}}));
    assert_eq!(
        (k.as_str(), p.as_str()),
        ("required", "#/properties/a/properties/b/required")
    );
    assert!(m.contains("asserts nothing"), "{m}");
    // Under a draft 3 `$schema` it is valid, but not read: refused as unsupported.
    match json_schema_to_grammar(
        &json!({"$schema": DRAFT3, "properties": {"a": {"required": true}}}),
        &JsonSchemaOptions::default(),
    ) {
        Err(JsonSchemaError::Unsupported {
            keyword, pointer, ..
        }) => {
            assert_eq!(
                (keyword.as_str(), pointer.as_str()),
                ("required", "#/properties/a/required")
            )
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

/// Well-formed values of every draft the front end reads still compile.
#[test]
fn well_formed_values_still_compile() {
    for schema in [
        json!({"type": "string", "minItems": 2, "maxProperties": 3, "minimum": 1.5}),
        json!({"type": "integer", "maxLength": 2.0, "uniqueItems": false, "required": []}),
        json!({"$schema": DRAFT4, "type": "number", "minimum": 1, "exclusiveMinimum": true}),
        json!({"type": "object", "items": [{"type": "string"}], "additionalItems": false}),
        json!({"type": "string", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}),
        json!({"type": "string", "properties": {"a": true}, "patternProperties": {"^x": false}}),
        json!({"type": "boolean", "prefixItems": [], "contains": true, "format": "date"}),
        json!({"enum": [1, 2], "type": "integer", "dependentRequired": {"a": []}}),
        // Not keywords: constants, vendor extensions' contents, property names.
        json!({"const": {"minItems": "x", "required": true}}),
        json!({"enum": [{"type": 5}]}),
        json!({"properties": {"minItems": {"type": "string"}, "required": {}}}),
        json!({"type": "string", "default": {"maxLength": -1}, "examples": [{"type": 1}]}),
        // Drafts 3-7 ignore the siblings of `$ref`.
        json!({"$schema": DRAFT7, "$ref": "#/definitions/a", "minItems": "x",
            "definitions": {"a": {"type": "integer"}}}),
    ] {
        compiles(&schema);
    }
    // ... but not the subschemas a `$ref` may point into.
    let (k, p, _) = invalid(&json!({"$schema": DRAFT7, "$ref": "#/definitions/a",
        "definitions": {"a": {"type": "integer", "minItems": "x"}}}));
    assert_eq!(
        (k.as_str(), p.as_str()),
        ("minItems", "#/definitions/a/minItems")
    );
}

/// `lenient` ignores keywords that are not enforced, not malformed ones;
/// `ignore_unknown_keywords` ignores unknown keywords, whose contents are no subschemas.
#[test]
fn lenient_and_unknown_keywords_keep_their_meaning() {
    let lenient = JsonSchemaOptions {
        lenient: true,
        ..Default::default()
    };
    let (k, p, _) = invalid_with(&json!({"type": "string", "minItems": "x"}), &lenient);
    assert_eq!((k.as_str(), p.as_str()), ("minItems", "#/minItems"));
    let unknown = JsonSchemaOptions {
        ignore_unknown_keywords: true,
        ..Default::default()
    };
    let g = tokensieve::json_schema::json_schema_to_grammar_with_report(
        &json!({"type": "string", "x-vendor": {"minItems": "x"}}),
        &unknown,
    )
    .expect("unknown keywords are ignored");
    assert_eq!(g.ignored.len(), 1);
    assert_eq!(g.ignored[0].pointer, "#/x-vendor");
    let (k, p, _) = invalid_with(
        &json!({"type": "string", "x-vendor": 1, "maxContains": -1}),
        &unknown,
    );
    assert_eq!((k.as_str(), p.as_str()), ("maxContains", "#/maxContains"));
}

/// Other documents given to `$ref` are checked with their URI as the pointer's base.
#[test]
fn other_documents_are_checked() {
    let opts = JsonSchemaOptions {
        documents: vec![(
            "https://example.com/a.json".into(),
            json!({"type": "string", "minItems": "x"}),
        )],
        ..Default::default()
    };
    let (k, p, _) = invalid_with(&json!({"$ref": "https://example.com/a.json"}), &opts);
    assert_eq!(
        (k.as_str(), p.as_str()),
        ("minItems", "https://example.com/a.json#/minItems")
    );
}
