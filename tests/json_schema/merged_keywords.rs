//! Keywords that the lowering merges into one unit (the `contains` trio, `if`/`then`/`else`,
//! `dependentSchemas`, several bounds on one number, bounds around negative zero): each
//! schema is either refused with `JsonSchemaError::Unsupported` or compiled to a grammar
//! that agrees with the `jsonschema` crate on every instance listed (and, where a verdict
//! is known, it is asserted outright).

use super::common::{byte_accepts, byte_compiler};
use super::schema_check::{any_order, byte_agrees, byte_expect, byte_refused_or_agrees};
use serde_json::json;

const ARRAYS: &[&str] = &[
    "[]", "[1]", "[1,1]", "[1,1,1]", "[2]", "[1,2]", "[2,2,1]", "[\"a\"]", "{}", "1", "\"x\"",
];

#[test]
fn contains_trio_merges_as_one_unit() {
    byte_expect(
        json!({"allOf":[{"contains":{"const":1},"minContains":0},{"contains":{"const":1}}]}),
        &["[1]", "[1,2]"],
        &["[]", "[2]"],
    );
    byte_expect(
        json!({"allOf":[{"contains":{"const":1},"maxContains":1},{"contains":{"const":1},"minContains":0}]}),
        &["[1]", "[1,2]"],
        &["[]", "[2]", "[1,1]"],
    );
    byte_expect(
        json!({"$ref":"#/$defs/a","contains":{"const":1},"$defs":{"a":{"contains":{"const":1},"minContains":0}}}),
        &["[1]"],
        &["[]"],
    );
    byte_expect(
        json!({"contains":{"const":1},"anyOf":[{"contains":{"const":1},"minContains":0},{"type":"string"}]}),
        &["[1]", "\"s\""],
        &["[]", "[2]"],
    );
    // `minContains`/`maxContains` without a `contains` on their side mean nothing.
    byte_agrees(
        json!({"allOf":[{"minContains":0},{"contains":{"const":1}}]}),
        ARRAYS,
    );
    byte_agrees(
        json!({"allOf":[{"contains":{"const":1}},{"maxContains":1}]}),
        ARRAYS,
    );
    byte_agrees(
        json!({"allOf":[{"contains":{"const":1},"minContains":2},{"contains":{"const":1},"maxContains":2}]}),
        ARRAYS,
    );
    byte_agrees(
        json!({"allOf":[{"contains":{"const":1},"minContains":0,"maxContains":2},{"contains":{"const":1},"minContains":0}]}),
        ARRAYS,
    );
    // Two different `contains`: both hold, or refused.
    byte_refused_or_agrees(
        json!({"allOf":[{"contains":{"const":1},"minContains":0},{"contains":{"const":2}}]}),
        ARRAYS,
    );
}

#[test]
fn if_then_else_merges_as_one_unit() {
    byte_expect(
        json!({"allOf":[{"if":{"required":["foo"]},"then":{"required":["bar"]}},{"else":{"required":["baz"]}}]}),
        &["{}", "{\"foo\":1,\"bar\":2}", "[]"],
        &["{\"foo\":1}"],
    );
    let objs = &[
        "{}",
        "{\"foo\":1}",
        "{\"foo\":1,\"bar\":2}",
        "{\"baz\":1}",
        "{\"foo\":1,\"baz\":2}",
        "{\"foo\":1,\"bar\":1,\"baz\":1}",
        "1",
    ];
    byte_agrees(
        json!({"allOf":[{"then":{"required":["bar"]}},{"if":{"required":["foo"]},"else":{"required":["baz"]}}]}),
        objs,
    );
    byte_agrees(
        json!({"allOf":[{"if":{"required":["foo"]},"then":{"required":["bar"]}},{"if":{"required":["foo"]},"then":{"required":["baz"]}}]}),
        objs,
    );
    byte_refused_or_agrees(
        json!({"allOf":[{"if":{"required":["foo"]},"then":{"required":["bar"]}},{"if":{"required":["bar"]},"else":{"required":["baz"]}}]}),
        objs,
    );
    byte_agrees(
        json!({"$ref":"#/$defs/a","else":{"required":["baz"]},"$defs":{"a":{"if":{"required":["foo"]},"then":{"required":["bar"]}}}}),
        objs,
    );
}

#[test]
fn dependent_schemas_mark_no_array_items() {
    byte_expect(
        json!({"dependentSchemas":{"bar":{"items":true}},"unevaluatedItems":false}),
        &["[]", "{}", "{\"bar\":1}", "1"],
        &["[1]"],
    );
    byte_agrees(
        json!({"dependentSchemas":{"bar":{"prefixItems":[true]}},"unevaluatedItems":false}),
        &["[]", "[1]", "{}", "{\"bar\":1}"],
    );
    byte_agrees(
        json!({"dependentSchemas":{"bar":{"properties":{"x":true}}},"unevaluatedProperties":false}),
        &[
            "{}",
            "{\"bar\":1}",
            "{\"bar\":1,\"x\":2}",
            "{\"x\":2}",
            "[1]",
        ],
    );
}

#[test]
fn merged_bounds_compare_exactly() {
    let big = &[
        "9007199254740991",
        "9007199254740992",
        "9007199254740993",
        "9007199254740994",
        "18446744073709551613",
        "18446744073709551614",
        "18446744073709551615",
        "0",
    ];
    for s in [
        json!({"allOf":[{"minimum":9007199254740992u64},{"minimum":9007199254740993u64}]}),
        json!({"allOf":[{"minimum":9007199254740993u64},{"minimum":9007199254740992u64}]}),
        json!({"allOf":[{"exclusiveMinimum":9007199254740992u64},{"exclusiveMinimum":9007199254740993u64}]}),
        json!({"allOf":[{"maximum":18446744073709551615u64},{"maximum":18446744073709551614u64}]}),
        json!({"allOf":[{"maximum":18446744073709551614u64},{"maximum":18446744073709551615u64}]}),
        json!({"allOf":[{"exclusiveMaximum":18446744073709551615u64},{"exclusiveMaximum":18446744073709551614u64}]}),
        json!({"allOf":[{"type":"integer","minimum":9007199254740992u64},{"minimum":9007199254740993u64}]}),
    ] {
        byte_refused_or_agrees(s, big);
    }
    // The examples of the review, outright.
    let s = json!({"allOf":[{"minimum":9007199254740992u64},{"minimum":9007199254740993u64}]});
    if let Ok(g) = byte_compiler().compile_json_schema(&s, &any_order()) {
        assert!(!byte_accepts(&g, "9007199254740992"));
        assert!(byte_accepts(&g, "9007199254740993"));
    }
    let s =
        json!({"allOf":[{"maximum":18446744073709551615u64},{"maximum":18446744073709551614u64}]});
    if let Ok(g) = byte_compiler().compile_json_schema(&s, &any_order()) {
        assert!(!byte_accepts(&g, "18446744073709551615"));
        assert!(byte_accepts(&g, "18446744073709551614"));
    }
    // One schema with both bounds: the stricter, exactly.
    let s = json!({"minimum":9007199254740993u64,"exclusiveMinimum":9007199254740992u64});
    let g = byte_compiler()
        .compile_json_schema(&s, &any_order())
        .expect("compiles");
    assert!(!byte_accepts(&g, "9007199254740992"));
    assert!(!byte_accepts(&g, "9007199254740992.5"));
    assert!(byte_accepts(&g, "9007199254740993"));
    let s = json!({"maximum":9007199254740992u64,"exclusiveMaximum":9007199254740993u64});
    let g = byte_compiler()
        .compile_json_schema(&s, &any_order())
        .expect("compiles");
    assert!(!byte_accepts(&g, "9007199254740992.5"));
    assert!(byte_accepts(&g, "9007199254740992"));
    // Small bounds and lengths still merge.
    byte_expect(
        json!({"allOf":[{"minimum":1.5},{"minimum":2}, {"maxLength": 3}, {"maxLength": 2}]}),
        &["2", "3.5", "\"ab\""],
        &["1.75", "\"abc\""],
    );
}

#[test]
fn negative_zero_in_bounded_numbers() {
    let zeros = &[
        "-0", "-0.0", "-0.00", "0", "0.0", "-1", "-0.5", "1", "2", "-5", "-6",
    ];
    for s in [
        json!({"type":"number","minimum":0}),
        json!({"type":"number","maximum":1}),
        json!({"minimum":-5}),
        json!({"type":"number","maximum":0}),
        json!({"type":"number","exclusiveMinimum":0}),
        json!({"type":"number","exclusiveMaximum":0}),
        json!({"type":"number","minimum":-0.5,"maximum":0.5}),
        json!({"type":"number","minimum":0,"maximum":0}),
    ] {
        byte_agrees(s, zeros);
    }
    byte_expect(
        json!({"type":"number","minimum":0}),
        &["-0", "-0.0"],
        &["-1"],
    );
}
