//! Compact grammars (`json_schema::to_grammar` in `Form::Compact` and `Form::Embedded`):
//! one whitespace rule instead of a copy at every place, inlined back by the compile (and,
//! embedded, one number rule and one integer rule, inlined back too), and one JSON string
//! rule per tag. The grammar the compile lowers must be the written-out
//! one, rule for rule; the IR handed over must be much smaller.

use crate::automaton::lower::{inline_rules, size};
use crate::grammar::{Expr, Grammar};
use crate::json_schema::{to_grammar, Form, JsonSchemaOptions};
use crate::structural_tag::{structural_tag_to_grammar, structural_tag_to_grammar_marking_tools};
use crate::Limits;
use serde_json::Value;

/// Options that cap whitespace lines (what the tool-call families set).
fn capped() -> JsonSchemaOptions {
    JsonSchemaOptions {
        max_whitespace: Some(12),
        max_whitespace_newlines: Some(1),
        ..JsonSchemaOptions::default()
    }
}

const SCHEMAS: [&str; 6] = [
    r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}"#,
    r#"{"type":"object","properties":{"loc":{"type":"string"},"tags":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["loc"],"additionalProperties":false}"#,
    r#"{"type":"array","prefixItems":[{"type":"number"},{"type":"boolean"}],"items":{"type":"object"}}"#,
    r##"{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
    r#"{"anyOf":[{"type":"object","properties":{"a":{"enum":[1,2]}},"required":["a"]},{"type":"array"}]}"#,
    r#"{"type":"object","additionalProperties":{"type":"array","items":{"type":"integer"}}}"#,
];

/// The rules reachable from the root, the root first and then in the order of their ids,
/// their calls renamed to that order: equal for two grammars that are the same up to rule
/// names and ids numbered alike.
fn canonical(g: &Grammar) -> Vec<Expr> {
    let (c, _) = g.component(g.root.0);
    c.rules.into_iter().map(|r| r.body.clone()).collect()
}

fn ir_size(g: &Grammar) -> u64 {
    g.rules.iter().map(|r| size(&r.body)).sum()
}

#[test]
fn compact_schemas_inline_to_the_written_out_grammar() {
    for opts in [capped(), JsonSchemaOptions::default()] {
        for s in SCHEMAS {
            let v: Value = serde_json::from_str(s).unwrap();
            let limits = Limits::default();
            let full = to_grammar(&v, &opts, &limits, true, Form::Written).unwrap();
            let compact = to_grammar(&v, &opts, &limits, true, Form::Compact).unwrap();
            assert!(full.always.iter().all(|&a| !a));
            let capped = opts.max_whitespace_newlines.is_some();
            assert_eq!(
                compact.always.iter().filter(|&&a| a).count(),
                usize::from(capped),
                "{s}"
            );
            let a = inline_rules(&full.grammar, &full.keep, &full.always);
            let b = inline_rules(&compact.grammar, &compact.keep, &compact.always);
            assert_eq!(canonical(&a), canonical(&b), "{s}");
            // The lowered grammars name the same kept rules.
            let names = |g: &Grammar| g.rules.iter().filter(|r| r.name.contains("string")).count();
            assert_eq!(names(&a), names(&b), "{s}");
        }
    }
    // The IR handed to the compile: whitespace written out once instead of at every place.
    let v: Value = serde_json::from_str(SCHEMAS[1]).unwrap();
    let full = to_grammar(&v, &capped(), &Limits::default(), true, Form::Written).unwrap();
    let compact = to_grammar(&v, &capped(), &Limits::default(), true, Form::Compact).unwrap();
    let (f, c) = (ir_size(&full.grammar), ir_size(&compact.grammar));
    assert!(c * 3 < f, "compact IR {c} against written out {f}");
}

/// Embedded schemas (a tag's tools) call one rule for any number and one for any
/// integer, marked for inlining back: inlined, the grammar is the compact one rule for
/// rule (the JSON string placeholder given the compact string's body). Bounded numbers
/// are written out where they go, as is the generic value's number, and so are the
/// numbers of array items whose count is bounded when whitespace is written out (a
/// counted repetition needs a body without calls; capped whitespace is a call there
/// already, so they stay calls).
#[test]
fn embedded_numbers_are_one_rule_each_inlined_back_by_the_compile() {
    // The schema, then the number and integer rules made with uncapped and capped
    // whitespace.
    let cases: [(&str, [usize; 2], [usize; 2]); 12] = [
        (SCHEMAS[0], [0, 1], [0, 1]),
        (SCHEMAS[2], [1, 0], [1, 0]),
        (SCHEMAS[3], [0, 1], [0, 1]),
        (SCHEMAS[5], [0, 1], [0, 1]),
        (
            r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"x":{"type":"number"}}}"#,
            [1, 1],
            [1, 1],
        ),
        (
            r#"{"type":"object","properties":{"a":{"type":"integer","minimum":0},"x":{"type":"number","maximum":5}}}"#,
            [0, 0],
            [0, 0],
        ),
        (
            r#"{"$schema":"http://json-schema.org/draft-04/schema#","type":"integer"}"#,
            [0, 1],
            [0, 1],
        ),
        (r#"{"type":"integer","multipleOf":1}"#, [0, 1], [0, 1]),
        (
            r#"{"type":"array","items":{"type":"integer"},"maxItems":8}"#,
            [0, 0],
            [0, 1],
        ),
        (
            r#"{"type":"array","items":{"type":"array","items":{"type":"number"}},"minItems":2}"#,
            [0, 0],
            [1, 0],
        ),
        (
            r#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"},"maxItems":3},"b":{"type":"integer"}}}"#,
            [0, 1],
            [0, 1],
        ),
        (
            r#"{"type":"array","items":{"type":"integer"},"contains":{"type":"integer","minimum":5},"minContains":2}"#,
            [0, 0],
            [0, 1],
        ),
    ];
    for (opts, capped_ws) in [(JsonSchemaOptions::default(), false), (capped(), true)] {
        for (s, plain, with_cap) in cases {
            let want = if capped_ws { with_cap } else { plain };
            let v: Value = serde_json::from_str(s).unwrap();
            let limits = Limits::default();
            let compact = to_grammar(&v, &opts, &limits, true, Form::Compact).unwrap();
            let mut embedded = to_grammar(&v, &opts, &limits, true, Form::Embedded).unwrap();
            // The rules of that name that some rule calls (an array's items compiled before
            // its `contains` is seen may leave one uncalled).
            let rules = |g: &Grammar, name: &str| -> Vec<usize> {
                let mut calls = vec![0usize; g.rules.len()];
                for rule in &g.rules {
                    crate::automaton::lower::for_each_call(&rule.body, &mut |c| {
                        calls[c as usize] += 1
                    });
                }
                (0..g.rules.len())
                    .filter(|&r| g.rules[r].name.starts_with(name) && calls[r] > 0)
                    .collect()
            };
            let (numbers, integers) = (
                rules(&embedded.grammar, "json_number"),
                rules(&embedded.grammar, "json_integer"),
            );
            assert_eq!(
                [numbers.len(), integers.len()],
                want,
                "{s}, capped {capped_ws}"
            );
            for &r in numbers.iter().chain(&integers) {
                assert!(embedded.always[r], "{s}: rule {r} inlined back");
            }
            assert!(rules(&compact.grammar, "json_number").is_empty());
            assert!(rules(&compact.grammar, "json_integer").is_empty());
            if let (Some(p), Some(c)) = (embedded.string_rule, compact.string_rule) {
                embedded.grammar.rules[p.index()].body =
                    compact.grammar.rules[c.index()].body.clone();
            }
            let a = inline_rules(&compact.grammar, &compact.keep, &compact.always);
            let b = inline_rules(&embedded.grammar, &embedded.keep, &embedded.always);
            assert_eq!(canonical(&a), canonical(&b), "{s}, capped {capped_ws}");
        }
    }
}

/// The strings a tag's arguments refuse.
const MARKERS: &[&str] = &["<tool_call>", "</tool_call>"];

/// A Hermes-like tag over four tools with whitespace lines capped and markers kept out
/// of strings (one tool refusing only the end marker): the compile's IR (schemas embedded
/// compact, one JSON string rule per set of refused strings) is under a third of the
/// printed IR's size, holds two string rules instead of one per tool, and compiles to the
/// same masks along seeded random walks into each tool.
#[test]
fn embedded_tags_share_one_string_rule_and_keep_the_language() {
    use crate::{GrammarCompiler, GrammarMatcher, Precompute};
    let tool = |name: &str, schema: &str, excludes: &[&str]| {
        serde_json::json!({
            "type": "tag",
            "begin": format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": "),
            "content": {"type": "json_schema", "json_schema": serde_json::from_str::<Value>(schema).unwrap(),
                        "max_whitespace": 12, "max_whitespace_newlines": 1,
                        "string_excludes": excludes},
            "end": "}\n</tool_call>",
        })
    };
    let tag: crate::StructuralTag = serde_json::from_value(serde_json::json!({
        "type": "structural_tag",
        "format": {"type": "triggered_tags", "triggers": ["<tool_call>"],
                   "tags": [tool("a", SCHEMAS[0], MARKERS), tool("b", SCHEMAS[1], MARKERS),
                            tool("c", SCHEMAS[5], MARKERS), tool("d", SCHEMAS[0], &["</tool_call>"])]}
    }))
    .unwrap();
    let written = structural_tag_to_grammar(&tag, None).unwrap();
    let (compact, tools, always) =
        structural_tag_to_grammar_marking_tools(&tag, None, &Limits::default()).unwrap();
    assert_eq!(tools.iter().filter(|&&t| t).count(), 4);
    // Each tool's whitespace, that of the tag's generic JSON value for each of the two
    // option sets whose tools (a and d: undeclared properties) call it, and the integer
    // rule of each tool with an integer (a, c and d).
    assert_eq!(always.iter().filter(|&&a| a).count(), 9);
    let (f, c) = (ir_size(&written), ir_size(&compact));
    assert!(c * 3 < f, "compact IR {c} against written out {f}");
    // The rule of any JSON string: one per tool written out, one for the tag compact (the
    // placeholders the tools' grammars call have empty bodies and are called no more).
    let bodies = |g: &Grammar| {
        g.rules
            .iter()
            .filter(|r| r.name.contains("json_string") && !r.name.contains("body"))
            .filter(|r| r.body != Expr::Empty)
            .count()
    };
    // One per set of excluded strings: tool d excludes only the end marker.
    assert_eq!(bodies(&written), 4);
    assert_eq!(bodies(&compact), 2);

    let vocab = std::sync::Arc::new(crate::mask::plan::tests::wide_vocabulary());
    let compiler = GrammarCompiler::new(vocab.clone()).with_precompute(Precompute::Lazy);
    let a = compiler.compile_ir(&written).unwrap();
    let b = compiler
        .clone()
        .with_deferred_tool_rules(false)
        .compile_structural_tag(&tag)
        .unwrap();
    // The begin marker inside a string: refused by tool a, taken by tool d, in both.
    for (name, ok) in [("a", false), ("d", true)] {
        let text = format!(
            "<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {{\"name\": \"<tool_call>\"}}"
        );
        for g in [&a, &b] {
            assert_eq!(
                GrammarMatcher::new(g.clone()).accept_string(&text),
                ok,
                "{name}"
            );
        }
    }
    let mut rand = crate::automaton::minimize::tests::xorshift(0x2545_f491_4f6c_dd1d);
    for name in ["a", "b", "c", "d"] {
        for _ in 0..4 {
            let mut ma = GrammarMatcher::new(a.clone());
            let mut mb = GrammarMatcher::new(b.clone());
            let prefix = format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": ");
            assert!(ma.accept_string(&prefix) && mb.accept_string(&prefix));
            let what = format!("tool {name}");
            assert_random_walk_agrees(&mut ma, &mut mb, &vocab, &mut rand, 80, &what);
        }
    }
}

/// Feeds matchers `a` and `b` (over `vocab`, at the same point of grammars with one
/// language) the same tokens for up to `steps` steps, each drawn by `rand` among the text
/// tokens `a`'s mask allows, and asserts that their masks agree at every step (`what`
/// names the walk in messages). Stops early where no text token is allowed.
pub(super) fn assert_random_walk_agrees(
    a: &mut crate::GrammarMatcher,
    b: &mut crate::GrammarMatcher,
    vocab: &crate::Vocabulary,
    rand: &mut impl FnMut(u64) -> u64,
    steps: usize,
    what: &str,
) {
    let (mut ka, mut kb) = (
        vec![0u32; vocab.bitmask_words()],
        vec![0u32; vocab.bitmask_words()],
    );
    for step in 0..steps {
        a.fill_next_token_bitmask(&mut ka).unwrap();
        b.fill_next_token_bitmask(&mut kb).unwrap();
        assert_eq!(ka, kb, "{what}, step {step}");
        let allowed: Vec<u32> = (0..vocab.tokenizer_size() as u32)
            .filter(|&t| ka[(t / 32) as usize] >> (t % 32) & 1 == 1)
            .filter(|&t| vocab.token_bytes(t).is_some_and(|b| !b.is_empty()))
            .collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[rand(allowed.len() as u64) as usize];
        assert!(
            a.accept_token(t) && b.accept_token(t),
            "{what}, step {step}"
        );
    }
}
