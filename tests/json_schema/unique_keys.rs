//! Unique object keys in grammars compiled from a JSON Schema, through the matcher on
//! Llama 3.1: a key may appear once per object (declared or extra, however it is escaped),
//! the token bitmask leaves out exactly the tokens that would repeat one, and `any_order`
//! objects of any size take every order.

use crate::common;
use crate::schema_check;

use common::check_all_tokens;
use schema_check::{accepts, check, check_with, llama};
use serde_json::json;
use tokensieve::json_schema::JsonSchemaOptions;
use tokensieve::{GrammarMatcher, TokenRejection};

fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_order: true,
        ..Default::default()
    }
}

/// Objects of integer-valued extra keys, in any order.
fn integer_extras(
    compiler: &tokensieve::GrammarCompiler,
) -> std::sync::Arc<tokensieve::CompiledGrammar> {
    compiler
        .compile_json_schema(
            r#"{"additionalProperties": {"type": "integer"}}"#,
            &any_order(),
        )
        .unwrap()
}

#[test]
fn repeated_extra_keys_are_rejected() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "object"}},
        "additionalProperties": {"type": ["integer", "object"]}});
    let good = [
        r#"{"z":1,"y":2}"#,
        r#"{"z":{"z":1},"y":{"z":2,"y":{"z":3}}}"#,
        r#"{"a":{"q":1,"r":2},"q":1}"#,
    ];
    let bad = [
        r#"{"z":1,"z":2}"#,
        r#"{"z":1,"\u007a":2}"#,
        r#"{"z":1,"\u007A":2}"#,
        r#"{"é":1,"\u00e9":2}"#,
        r#"{"a":{"q":1,"q":2}}"#,
        r#"{"z":{"y":1},"y":2,"z":3}"#,
        r#"{"a":{},"a":{}}"#,
    ];
    check(schema.clone(), &good, &bad);
    check_with(schema, &any_order(), &good, &bad);
}

#[test]
fn a_repeated_key_is_a_typed_rejection() {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let g = compiler
        .compile_json_schema(r#"{"additionalProperties": true}"#, &Default::default())
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string(r#"{"name":1,"#));
    let before = m.num_accepted_steps();
    let e = m.try_accept_bytes(br#""name""#).unwrap_err();
    assert_eq!(
        e,
        TokenRejection::DuplicateKey {
            token: u32::MAX,
            offset: 5,
            key: "name".into()
        }
    );
    assert!(
        e.to_string().contains("\"name\" is already in this object"),
        "{e}"
    );
    // Nothing changed: another key goes on, then the object ends.
    assert_eq!(m.num_accepted_steps(), before);
    assert!(m.accept_string(r#""names":2}"#));
    assert!(m.accept_token(rt.stop()) && m.is_terminated());
}

#[test]
fn the_mask_leaves_out_exactly_the_tokens_that_repeat_a_key() {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let g = integer_extras(compiler);
    // At every step of these texts, the mask bit of every token of the vocabulary equals
    // accept_token's answer.
    for text in [
        r#"{"id":1,"name":2,"na":3,"i":4}"#,
        r#"{"a":1,"\u0062":2,"b\u0063":3}"#,
    ] {
        let mut m = GrammarMatcher::new(g.clone());
        for &t in &rt.encode_exact(text) {
            let (_, bad) = check_all_tokens(&m, &rt.vocab);
            assert!(bad.is_empty(), "{text}: {:?}", &bad[..bad.len().min(5)]);
            assert!(m.accept_token(t), "{text}");
        }
    }
    // After `{"_":1,"`: a token spelling `_"` (or `_",`) would repeat the key "_";
    // `_` and `__":\n` (the key "__") would not.
    let mut m = GrammarMatcher::new(g.clone());
    assert!(m.accept_string(r#"{"_":1,""#));
    let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
    assert!(bad.is_empty());
    let token = |s: &str| {
        rt.token_id(s)
            .unwrap_or_else(|| panic!("Llama 3.1 has {s:?}"))
    };
    assert!(!allowed.contains(&token("_\"")));
    assert!(!allowed.contains(&token("_\",")));
    assert!(allowed.contains(&token("_")));
    assert!(allowed.contains(&token("__\":\n")));
    // Before a key's quote, a token that writes it whole is left out too: `""` after an
    // empty key.
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string(r#"{"":1,"#));
    let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
    assert!(bad.is_empty());
    assert!(!allowed.contains(&token("\"\"")));
    assert!(!allowed.contains(&token(" \"\"")));
    assert!(allowed.contains(&token("\"")));
    assert!(allowed.contains(&token("\"_")));
}

#[test]
fn rollback_forgets_the_keys_it_undoes() {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let g = integer_extras(compiler);
    let mut m = GrammarMatcher::new(g);
    let ids = rt.encode_exact(r#"{"a":1,"#);
    for &t in &ids {
        assert!(m.accept_token(t));
    }
    let more = rt.encode_exact(r#""b":2,"#);
    for &t in &more {
        assert!(m.accept_token(t));
    }
    assert!(!m.accept_string(r#""b":3}"#));
    // Undo everything after `{"a":1,`: "b" is free again, "a" is not.
    m.rollback(more.len()).unwrap();
    assert!(!m.accept_string(r#""a":3}"#));
    assert!(m.accept_string(r#""b":3}"#));
    assert!(m.accept_token(rt.stop()));
    m.reset();
    assert!(m.accept_string(r#"{"b":1,"a":2}"#));
}

#[test]
fn jump_forward_stops_before_a_repeated_key() {
    let Some((_, compiler)) = llama() else {
        return;
    };
    // The only extra key is "x": after one, the grammar forces `"x"` again, which the key
    // check refuses, so the forced bytes stop before its closing quote.
    let schema = json!({"type": "object", "patternProperties": {"^x$": {"type": "integer"}},
        "additionalProperties": false});
    let opts = JsonSchemaOptions {
        any_whitespace: false,
        ..Default::default()
    };
    let g = compiler.compile_json_schema(&schema, &opts).unwrap();
    let mut m = GrammarMatcher::new(g);
    assert_eq!(m.find_jump_forward_string(), "{");
    assert!(m.accept_string("{"));
    assert!(m.accept_string(r#""x":1,"#));
    assert_eq!(m.find_jump_forward_string(), "\"x");
}

#[test]
fn any_order_takes_every_order_of_many_properties() {
    let Some((rt, compiler)) = llama() else {
        return;
    };
    // 14 declared properties (far past the 2^8 sets an exact grammar could afford), 3 of
    // them required, and extra keys.
    let names: Vec<String> = (0..14).map(|i| format!("p{i:02}")).collect();
    let mut props = serde_json::Map::new();
    for n in &names {
        props.insert(n.clone(), json!({"type": "integer"}));
    }
    let schema = json!({"type": "object", "properties": props,
        "required": ["p00", "p07", "p13"], "additionalProperties": {"type": "string"}});
    let g = compiler.compile_json_schema(&schema, &any_order()).unwrap();
    let oracle = jsonschema::validator_for(&schema).unwrap();
    // A deterministic shuffle of every key, for 40 seeds; each order is accepted.
    let mut seed = 12345u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for round in 0..40 {
        let mut keys: Vec<String> = names.clone();
        keys.push("extra".into());
        for i in (1..keys.len()).rev() {
            keys.swap(i, next() % (i + 1));
        }
        // Drop some optional keys.
        let keep = 3 + next() % (keys.len() - 2);
        let mut chosen: Vec<&String> = keys
            .iter()
            .filter(|k| ["p00", "p07", "p13"].contains(&k.as_str()))
            .collect();
        chosen.extend(
            keys.iter()
                .filter(|k| !["p00", "p07", "p13"].contains(&k.as_str()))
                .take(keep - 3),
        );
        for i in (1..chosen.len()).rev() {
            chosen.swap(i, next() % (i + 1));
        }
        let body: Vec<String> = chosen
            .iter()
            .enumerate()
            .map(|(i, k)| {
                if k.as_str() == "extra" {
                    format!("\"{k}\":\"s{i}\"")
                } else {
                    format!("\"{k}\":{i}")
                }
            })
            .collect();
        let text = format!("{{{}}}", body.join(","));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(oracle.is_valid(&v), "{text}");
        assert!(accepts(rt, &g, &text), "round {round}: {text}");
        // Without one required key, or with one key twice, it is rejected.
        let missing = format!(
            "{{{}}}",
            body.iter()
                .filter(|m| !m.starts_with("\"p07\""))
                .cloned()
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(!accepts(rt, &g, &missing), "{missing}");
        let twice = format!("{{{},{}}}", body.join(","), body[0]);
        assert!(!accepts(rt, &g, &twice), "{twice}");
    }
}

#[test]
fn min_properties_counts_distinct_extra_keys() {
    // Refused before the matcher checked keys: a repeated key would have counted twice.
    for opts in [JsonSchemaOptions::default(), any_order()] {
        check_with(
            json!({"type": "object", "properties": {"a": {}}, "minProperties": 2}),
            &opts,
            &[
                r#"{"a":1,"b":2}"#,
                r#"{"b":1,"c":2}"#,
                r#"{"c":1,"b":2,"a":3}"#,
            ],
            &[
                r#"{"a":1}"#,
                r#"{"b":1,"b":2}"#,
                r#"{}"#,
                r#"{"b":1,"\u0062":2}"#,
            ],
        );
    }
}

#[test]
fn any_order_never_leads_into_a_dead_end() {
    // A key already written must not be offered again where no other key can start the
    // same way: the next mask would be empty (found by a review on the linear grammar).
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let closed = json!({"type": "object", "properties": {"name": {"type": "string"},
        "age": {"type": "integer"}}, "required": ["name", "age"], "additionalProperties": false});
    let g = compiler.compile_json_schema(&closed, &any_order()).unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string(r#"{"name":"x",""#));
    let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
    assert!(bad.is_empty());
    assert!(!allowed.contains(&rt.token_id("name").unwrap()));
    assert!(allowed.contains(&rt.token_id("age").unwrap()));
    // The room `maxProperties` leaves is the last required key's: only it is offered.
    let counted = json!({"type": "object", "properties": {"a": {}, "b": {}},
        "required": ["a", "b"], "maxProperties": 3});
    let g = compiler
        .compile_json_schema(&counted, &any_order())
        .unwrap();
    let mut m = GrammarMatcher::new(g.clone());
    assert!(m.accept_string(r#"{"x":"s","a":1,""#));
    assert!(!m.accept_string("a"));
    assert!(m.accept_string(r#"b":2}"#));
    // Beside open-ended extra keys, a written key's prefix goes on as a new extra key.
    let open = json!({"type": "object", "properties": {"name": {"type": "string"}},
        "required": ["name"]});
    let g = compiler.compile_json_schema(&open, &any_order()).unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string(r#"{"name":"x","name"#));
    let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
    assert!(bad.is_empty());
    assert!(!allowed.contains(&rt.token_id("\"").unwrap()));
    assert!(allowed.contains(&rt.token_id("s").unwrap()));
    assert!(m.accept_string(r#"s":1}"#));
    // An object no instance can satisfy is refused, in any order too.
    let e = compiler.compile_json_schema(
        &json!({"type": "object", "properties": {"a": {}, "b": {}},
            "additionalProperties": false, "minProperties": 3}),
        &any_order(),
    );
    assert!(
        matches!(
            e,
            Err(tokensieve::CompileError::JsonSchema(
                tokensieve::JsonSchemaError::Unsatisfiable { .. }
            ))
        ),
        "{e:?}"
    );
}

#[test]
fn undeclared_keys_may_hold_every_escape() {
    // Issue 23, item 6: extra keys were plain text only, so these valid instances were
    // refused at the backslash. An escape that spells a declared name is that name, never
    // an extra key (the integer under `"field_\u0031"` is `field_1`'s, which is a string).
    let schema = json!({"type": "object", "properties": {"field_1": {"type": "string"}}});
    let good = [
        r#"{"field_1\"x": "a"}"#,
        r#"{"zz\"x": "a"}"#,
        r#"{"\"\\\/\b\f\n\r\t": 1}"#,
        r#"{"\u00e9\u00E9\ud83d\ude00\uD83D\uDE00": 1}"#,
        r#"{"field_1": "v", "field_\u0031x": 2, "\u0066ield_": 3}"#,
        r#"{"field_\u0032": 1, "field_1\u0000": 2}"#,
    ];
    let bad = [
        r#"{"field_\u0031": 2}"#,
        r#"{"\u0066ield_1": 2}"#,
        r#"{"\u0066\u0069\u0065\u006c\u0064\u005f\u0031": 2}"#,
        r#"{"field_1": "a", "field_\u0031": "b"}"#,
        r#"{"zz\"x": 1, "zz\u0022x": 2}"#,
        // A lone surrogate is not Unicode text (as in string values).
        r#"{"\ud800": 1}"#,
    ];
    let oracle = jsonschema::validator_for(&schema).unwrap();
    for s in good {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        assert!(oracle.is_valid(&v), "{s}");
    }
    check(schema.clone(), &good, &bad);
    check_with(schema.clone(), &any_order(), &good, &bad);
    // The grammar alone (no key check behind it) keeps a declared name out of the extras.
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let grammar =
        tokensieve::json_schema::json_schema_to_grammar(&schema, &Default::default()).unwrap();
    let g = compiler.compile_ir(&grammar).unwrap();
    assert!(accepts(rt, &g, r#"{"zz\"x": "a"}"#));
    assert!(!accepts(rt, &g, r#"{"field_\u0031": 2}"#));
    // Mask and accept agree at every step of a key written with escapes.
    let g = compiler
        .compile_json_schema(&schema, &Default::default())
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    for &t in &rt.encode_exact(r#"{"field_1\"x": "a", "fi\u0065ld_\"": 1}"#) {
        let (_, bad) = check_all_tokens(&m, &rt.vocab);
        assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(5)]);
        assert!(m.accept_token(t));
    }
}

#[test]
fn declared_keys_are_matched_decoded_under_escaped_declared_keys() {
    // Issue 23, item 6: "keep declared keys matched after decoding too (`"\u0061"` is the
    // key `a`)". By default declared names take their canonical spelling only (as XGrammar
    // and llguidance write them); `escaped_declared_keys` accepts every spelling, and the
    // value is checked against the declared property's schema. (Names in sorted order, so
    // the declared order is the same whether or not serde_json keeps the schema's order.)
    let schema = json!({"type": "object",
        "properties": {"a": {"type": "string"}, "b/\"é": {"type": "integer"}, "id": {"type": "integer"}},
        "required": ["id"]});
    let escaped = JsonSchemaOptions {
        escaped_declared_keys: true,
        ..Default::default()
    };
    let spelled = [
        r#"{"\u0061": "x", "id": 1}"#,
        r#"{"a": "x", "\u0069\u0064": 1}"#,
        r#"{"i\u0064": 1}"#,
        r#"{"b\/\"\u00e9": 2, "id": 1}"#,
        r#"{"\u0062/\u0022\u00E9": 2, "\u0069d": 1}"#,
    ];
    let bad = [
        // The value is the declared property's: `a` is a string, `id` an integer.
        r#"{"\u0061": 1, "id": 1}"#,
        r#"{"\u0069d": "x"}"#,
        // Once, however it is spelled.
        r#"{"a": "x", "\u0061": "y", "id": 1}"#,
        r#"{"id": 1, "\u0069d": 2}"#,
        // Still required, and still not a surrogate.
        r#"{"\u0061": "x"}"#,
        r#"{"\ud800": 1, "id": 1}"#,
    ];
    let oracle = jsonschema::validator_for(&schema).unwrap();
    for s in spelled {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        assert!(oracle.is_valid(&v), "{s}");
    }
    // (The repeats parse as valid JSON to a last-one-wins parser: not asked of the oracle.)
    for s in [bad[0], bad[1], bad[4]] {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        assert!(!oracle.is_valid(&v), "{s}");
    }
    let plain = [
        r#"{"a": "x", "id": 1}"#,
        r#"{"id": 1, "extra\u0041": true}"#,
    ];
    let all: Vec<&str> = plain.iter().chain(&spelled).copied().collect();
    check_with(schema.clone(), &escaped, &all, &bad);
    let both = JsonSchemaOptions {
        any_order: true,
        ..escaped.clone()
    };
    check_with(schema.clone(), &both, &all, &bad);
    // The default keeps the canonical spelling only (documented).
    let mut refused = bad.to_vec();
    refused.extend(spelled);
    check_with(
        schema.clone(),
        &JsonSchemaOptions::default(),
        &plain,
        &refused,
    );
    // Mask and accept agree at every step of escaped declared names (in any order, so
    // the text does not depend on the order of the schema's map).
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let g = compiler.compile_json_schema(&schema, &both).unwrap();
    let mut m = GrammarMatcher::new(g);
    for &t in &rt.encode_exact(r#"{"\u0069d": 1, "\u0062/\u0022\u00E9": 2, "\u0061": "x"}"#) {
        let (_, bad) = check_all_tokens(&m, &rt.vocab);
        assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(5)]);
        assert!(m.accept_token(t));
    }
    assert!(m.is_completed());
}

#[test]
fn any_order_takes_every_order_of_a_large_closed_object() {
    // Issue 23, item 9: past 8 declared properties, a closed object only took the orders
    // of its 6-member chunks. Now the matcher restricts each key to the names not yet
    // written, so every order is accepted and no written name is offered again.
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let mut names: Vec<String> = (0..10).map(|i| format!("p{i:02}")).collect();
    names.extend(["id".to_string(), "ids".to_string()]);
    let mut props = serde_json::Map::new();
    for n in &names {
        props.insert(n.clone(), json!({"type": "integer"}));
    }
    let required = ["p00", "p07", "ids"];
    let schema = json!({"type": "object", "properties": props,
        "required": required, "additionalProperties": false});
    let g = compiler.compile_json_schema(&schema, &any_order()).unwrap();
    let oracle = jsonschema::validator_for(&schema).unwrap();
    let mut seed = 777u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for round in 0..30 {
        let mut keys = names.clone();
        for i in (1..keys.len()).rev() {
            keys.swap(i, next() % (i + 1));
        }
        // Every required key, and some optional ones.
        let optional = next() % (keys.len() - required.len() + 1);
        let mut taken = 0;
        keys.retain(|k| {
            let keep = required.contains(&k.as_str()) || taken < optional;
            if !required.contains(&k.as_str()) && keep {
                taken += 1;
            }
            keep
        });
        let body: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("\"{k}\":{i}"))
            .collect();
        let text = format!("{{{}}}", body.join(","));
        assert!(oracle.is_valid(&serde_json::from_str(&text).unwrap()));
        assert!(accepts(rt, &g, &text), "round {round}: {text}");
        let missing: Vec<&String> = body.iter().filter(|m| !m.starts_with("\"p07\"")).collect();
        let missing = format!(
            "{{{}}}",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(!accepts(rt, &g, &missing), "{missing}");
        let twice = format!("{{{},{}}}", body.join(","), body[0]);
        assert!(!accepts(rt, &g, &twice), "{twice}");
        assert!(
            !accepts(rt, &g, &text.replace("\"p00\"", "\"q\"")),
            "{text}"
        );
    }
    // No dead end: a written name's prefix is offered only while an unwritten name
    // extends it, and the mask equals accept_token's answers at every step.
    let token = |s: &str| {
        rt.token_id(s)
            .unwrap_or_else(|| panic!("Llama 3.1 has {s:?}"))
    };
    let text = r#"{"ids":1,"p00":2,"id":3,"p01":4,"p02":5,"p03":6,"p04":7,"p05":8,"p06":9,"p07":10,"p08":11,"p09":12}"#;
    let mut m = GrammarMatcher::new(g.clone());
    for &t in &rt.encode_exact(text) {
        let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
        assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(5)]);
        assert!(!allowed.is_empty(), "dead end");
        assert!(m.accept_token(t));
    }
    let mut m = GrammarMatcher::new(g.clone());
    assert!(m.accept_string(r#"{"ids":1,""#));
    let (allowed, _) = check_all_tokens(&m, &rt.vocab);
    assert!(allowed.contains(&token("id")), "`id` is still free");
    assert!(!allowed.contains(&token("ids")));
    assert!(m.accept_string(r#"id":2,""#));
    let (allowed, _) = check_all_tokens(&m, &rt.vocab);
    assert!(
        !allowed.contains(&token("id")),
        "both `id` and `ids` are written"
    );
    assert!(allowed.contains(&token("p")));
    let e = m.try_accept_bytes(b"id").unwrap_err();
    assert!(matches!(e, TokenRejection::KeyNotAllowed { .. }), "{e:?}");
    assert!(e.to_string().contains("no name left"), "{e}");
    // Once every name is written, `,` is left out and `}` is the only way on.
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string(&text[..text.len() - 1]));
    let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
    assert!(bad.is_empty());
    assert!(!allowed.contains(&token(",")));
    assert!(!allowed.contains(&token(",\"")));
    assert!(allowed.contains(&token("}")));
    assert!(m.try_accept_bytes(b",").is_err());
    assert!(m.accept_string("}"));
}

/// Ten integer-valued properties `p00`…`p09`, `p00` and `p07` required, beside the
/// pattern `pattern` with string values and the given `additionalProperties`.
fn ten_with_pattern(pattern: &str, extra: Option<bool>) -> serde_json::Value {
    let mut props = serde_json::Map::new();
    for i in 0..10 {
        props.insert(format!("p{i:02}"), json!({"type": "integer"}));
    }
    let mut schema = json!({"type": "object", "properties": props,
        "required": ["p00", "p07"], "patternProperties": {pattern: {"type": "string"}}});
    if let Some(e) = extra {
        schema["additionalProperties"] = json!(e);
    }
    schema
}

/// Feeds `text` token by token, checking at each step that the token bitmask equals
/// `accept_token`'s answers and is not empty (no dead end).
fn walk_without_dead_end(
    rt: &common::RealTokenizer,
    g: &std::sync::Arc<tokensieve::CompiledGrammar>,
    text: &str,
) {
    let mut m = GrammarMatcher::new(g.clone());
    for &t in &rt.encode_exact(text) {
        let (allowed, bad) = check_all_tokens(&m, &rt.vocab);
        assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(5)]);
        assert!(!allowed.is_empty(), "dead end in {text}");
        assert!(m.accept_token(t), "{text}");
    }
}

#[test]
fn any_order_takes_every_order_of_a_closed_object_with_a_prefix_pattern() {
    // Issue 23, item 9 (docker-compose services): `additionalProperties: false` beside a
    // pattern `^x-` took only the orders of 6-member chunks. Extra keys start with `x-`,
    // so the matcher narrows the other keys to the names left.
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let schema = ten_with_pattern("^x-", Some(false));
    let g = compiler.compile_json_schema(&schema, &any_order()).unwrap();
    let oracle = jsonschema::validator_for(&schema).unwrap();
    let good = [
        r#"{"p09":1,"x-a":"s","p07":2,"p00":3}"#,
        r#"{"p05":1,"p07":2,"p01":3,"x-b":"s","x-p":"t","p00":4,"p08":5}"#,
        r#"{"p07":1,"p06":1,"p05":1,"p04":1,"p03":1,"p02":1,"p01":1,"p00":1,"p09":1,"p08":1,"x-":"z"}"#,
    ];
    for text in good {
        assert!(
            oracle.is_valid(&serde_json::from_str(text).unwrap()),
            "{text}"
        );
        assert!(accepts(rt, &g, text), "{text}");
        walk_without_dead_end(rt, &g, text);
    }
    // Repeated keys (not for the oracle: serde_json keeps the last).
    for text in [
        r#"{"p09":1,"p07":2,"p00":3,"p09":4}"#,
        r#"{"p07":2,"p00":3,"x-a":"s","x-a":"t"}"#,
    ] {
        assert!(!accepts(rt, &g, text), "{text}");
    }
    let bad = [
        r#"{"p07":2,"p00":3,"q":"s"}"#,
        r#"{"p07":2,"p00":3,"x-a":1}"#,
        r#"{"p09":1,"p00":3}"#,
    ];
    for text in bad {
        assert!(
            !oracle.is_valid(&serde_json::from_str(text).unwrap()),
            "{text}"
        );
        assert!(!accepts(rt, &g, text), "{text}");
    }
    // The prefix of the undeclared keys survives serialization.
    let bytes = g.serialize().unwrap();
    let back = tokensieve::CompiledGrammar::deserialize(&bytes, compiler).unwrap();
    assert!(accepts(rt, &back, good[1]), "{}", good[1]);
    assert!(!accepts(rt, &back, r#"{"p07":2,"p00":3,"q":"s"}"#));
    // Every name written: `,` still leads on (to an `x-` key), but not to a written name.
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string(
        r#"{"p00":1,"p01":1,"p02":1,"p03":1,"p04":1,"p05":1,"p06":1,"p07":1,"p08":1,"p09":1,""#
    ));
    let e = m.try_accept_bytes(b"p").unwrap_err();
    assert!(matches!(e, TokenRejection::KeyNotAllowed { .. }), "{e:?}");
    assert!(m.accept_string(r#"x-y":"v"}"#));
}

#[test]
fn any_order_takes_every_order_beside_a_pattern_of_open_objects() {
    // Issue 23, item 9 (Github_medium o83151): a pattern `^from` beside undeclared keys
    // of any value; declared keys after a pattern key were refused.
    let Some((rt, compiler)) = llama() else {
        return;
    };
    let schema = ten_with_pattern("^from", None);
    let g = compiler.compile_json_schema(&schema, &any_order()).unwrap();
    let oracle = jsonschema::validator_for(&schema).unwrap();
    let good = [
        r#"{"from":"a","p09":1,"p07":2,"zz":[1],"p00":3}"#,
        r#"{"p08":1,"p00":2,"fromage":"b","p07":3,"p0":4,"p01":5}"#,
    ];
    for text in good {
        assert!(
            oracle.is_valid(&serde_json::from_str(text).unwrap()),
            "{text}"
        );
        assert!(accepts(rt, &g, text), "{text}");
        walk_without_dead_end(rt, &g, text);
    }
    for text in [
        r#"{"from":"a","p09":1,"p07":2,"p00":3,"p09":4}"#,
        r#"{"p07":2,"p00":3,"p00":3}"#,
    ] {
        assert!(!accepts(rt, &g, text), "{text}");
    }
    let text = r#"{"from":1,"p07":2,"p00":3}"#;
    assert!(
        !oracle.is_valid(&serde_json::from_str(text).unwrap()),
        "{text}"
    );
    assert!(!accepts(rt, &g, text), "{text}");
}
