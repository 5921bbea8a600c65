//! Tests of the compiler: its cache of rule automata, and the order of its errors.

use super::*;
use crate::grammar::parse_ebnf;
use crate::mask::plan::tests::{assert_full_walk_mask, wide_vocabulary};

/// Grammars whose rules recur from one to the next: JSON Schemas with string, number
/// and key rules in common (open objects: the rest of an undeclared key), and EBNF with
/// a right-linear rule built inline, token terminals, and the same shapes under other
/// rule names and ids.
fn recurring_grammars() -> Vec<Grammar> {
    let schemas = [
        r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}"#,
        r#"{"type":"object","properties":{"email":{"type":"string"},"age":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}}}}"#,
        r#"{"type":"object","properties":{"name":{"type":"string","maxLength":5},"active":{"type":"boolean"}},"additionalProperties":false}"#,
        r#"{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}}}}"#,
    ];
    let mut out: Vec<Grammar> = schemas
        .iter()
        .map(|s| {
            let v: serde_json::Value = serde_json::from_str(s).unwrap();
            crate::json_schema_to_grammar(&v, &Default::default()).unwrap()
        })
        .collect();
    for ebnf in [
        "root ::= x \"=\" y | y\nx ::= [a-z] x | \"\"\ny ::= [0-9]+ (\",\" x)?",
        "root ::= q \"=\" p | p\nq ::= [a-z] q | \"\"\np ::= [0-9]+ (\",\" q)?",
        "root ::= a b a <[5]>\na ::= \"ab\" a | \"c\"\nb ::= a? [x-z]*",
    ] {
        out.push(parse_ebnf(ebnf, "root").unwrap());
    }
    out
}

/// Rule automata taken from a warm compiler's cache are the automata a compiler
/// without the cache builds, edge for edge, and their masks are the full walk's on
/// every node; a second compile of a grammar builds no rule automaton.
#[test]
fn cached_rule_automata_equal_built_ones() {
    let vocab = Arc::new(wide_vocabulary());
    let warm = GrammarCompiler::new(vocab.clone())
        .with_precompute(Precompute::Lazy)
        .with_cache_enabled(false);
    let grammars = recurring_grammars();
    // Twice, the second time in reverse order: every grammar meets a cache warmed by
    // all the others.
    for pass in 0..2 {
        let order: Vec<&Grammar> = if pass == 0 {
            grammars.iter().collect()
        } else {
            grammars.iter().rev().collect()
        };
        for g in order {
            let cold = GrammarCompiler::new(vocab.clone())
                .with_rule_automaton_cache_capacity(0)
                .with_precompute(Precompute::Lazy)
                .compile_ir(g)
                .unwrap();
            let before = warm.rule_automaton_cache_stats();
            let w = warm.compile_ir(g).unwrap();
            let after = warm.rule_automaton_cache_stats();
            assert_eq!(
                format!("{:?}", w.aut),
                format!("{:?}", cold.aut),
                "pass {pass}: automata differ for\n{g}"
            );
            if pass == 1 {
                assert_eq!(after.builds, before.builds, "rebuilt a rule of\n{g}");
                assert!(after.hits > before.hits, "no hit for\n{g}");
            }
            for n in 0..w.aut.nodes.len() as u32 {
                if let Some(m) = w.node_mask(n) {
                    assert_full_walk_mask(&w, n, &m, "warm compiler");
                }
            }
        }
    }
    let stats = warm.rule_automaton_cache_stats();
    assert!(stats.entries > 0 && stats.size_bytes > 0, "{stats:?}");
    assert_eq!(
        GrammarCompiler::new(vocab)
            .with_rule_automaton_cache_capacity(0)
            .rule_automaton_cache_stats()
            .entries,
        0
    );
}

/// Rules that recur within and across grammars are built once: the second of two
/// schemas with the same string and number properties under other names builds fewer
/// rules than the first, and the cache is emptied by `clear_cache`.
#[test]
fn recurring_rules_are_built_once_per_compiler() {
    let vocab = Arc::new(wide_vocabulary());
    let c = GrammarCompiler::new(vocab).with_precompute(Precompute::Lazy);
    let first: serde_json::Value = serde_json::from_str(
        r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}}"#,
    )
    .unwrap();
    let second: serde_json::Value = serde_json::from_str(
        r#"{"type":"object","properties":{"title":{"type":"string"},"count":{"type":"integer"}}}"#,
    )
    .unwrap();
    c.compile_json_schema(&first, &Default::default()).unwrap();
    let one = c.rule_automaton_cache_stats();
    c.compile_json_schema(&second, &Default::default()).unwrap();
    let two = c.rule_automaton_cache_stats();
    assert!(two.hits > one.hits, "{one:?} then {two:?}");
    assert!(
        two.builds - one.builds < one.builds,
        "{one:?} then {two:?}: the second schema built as many rules as the first"
    );
    assert!(c.cache_size_bytes() >= two.size_bytes);
    c.clear_cache();
    assert_eq!(c.rule_automaton_cache_stats().entries, 0);
}

/// The compile's one walk of the IR keeps the order of priority of its errors: an
/// invalid IR first (wherever the invalid part is), then a limit (the first in walk
/// order), then an unknown token terminal.
#[test]
fn one_walk_reports_errors_in_their_order_of_priority() {
    use crate::grammar::{Expr, Rule, RuleId, TokenRef};
    let compiler = GrammarCompiler::new(Arc::new(wide_vocabulary()));
    let rule = |name: &str, body: Expr| Rule {
        name: name.into(),
        body,
    };
    let too_many = Expr::Repeat {
        expr: Box::new(Expr::Bytes(b"a".to_vec())),
        min: 0,
        max: Some(2_000_000),
    };
    let unknown = Expr::Token(TokenRef::Text("<not a token>".into()));
    let dangling = Expr::Rule(RuleId(9));
    let compile = |rules: Vec<Rule>| {
        compiler.compile_ir(&Grammar {
            rules,
            root: RuleId(0),
        })
    };
    // Limit and unknown token before a dangling rule: the invalid IR wins.
    let e = compile(vec![
        rule("root", Expr::Seq(vec![too_many.clone(), unknown.clone()])),
        rule("late", dangling),
    ]);
    assert!(matches!(e, Err(CompileError::Invalid(_))), "{e:?}");
    // Unknown token before the limit: the limit wins.
    let e = compile(vec![
        rule("root", unknown.clone()),
        rule("late", too_many.clone()),
    ]);
    assert!(matches!(e, Err(CompileError::Limit(_))), "{e:?}");
    // The unknown token alone.
    let e = compile(vec![rule("root", unknown)]);
    assert!(matches!(e, Err(CompileError::UnknownToken { .. })), "{e:?}");
}

/// Inside an email address, the local part and each domain label are DFA states, not a
/// counted repetition (whose walks go through the Earley chart: the first cold mask inside
/// an address cost about 5 ms that way): only the one to three `label "."` remain a counted
/// repetition, of a body that is itself one DFA.
#[test]
fn an_email_address_counts_only_its_labels() {
    let c = GrammarCompiler::new(wide_vocabulary()).with_precompute(Precompute::Lazy);
    let schema = serde_json::json!({"type": "string", "format": "email"});
    let g = c.compile_json_schema(&schema, &Default::default()).unwrap();
    assert_eq!(g.aut.counted.len(), 1, "rules: {:?}", g.aut.rule_names);
    assert!(
        !g.aut
            .rule_names
            .iter()
            .any(|n| n.contains("rep_exact") || n.contains("rep_atmost")),
        "helper rules: {:?}",
        g.aut.rule_names
    );
}

/// A compiled grammar's longest token is the vocabulary's longest text token (special
/// tokens, however long their text, are not text), whether compiled or read back.
#[test]
fn a_grammar_knows_the_longest_text_token() {
    let tokens: Vec<String> = (1..=9)
        .map(|n| "a".repeat(n))
        .chain(["<|a_very_long_special_token|>".to_string()])
        .collect();
    let vocab = Arc::new(Vocabulary::from_token_bytes(&tokens, &[9], &[9]).unwrap());
    let c = GrammarCompiler::new(vocab);
    let g = c.compile_grammar(r#"root ::= "a"+"#).unwrap();
    assert_eq!(g.max_token_len, 9);
    let back = CompiledGrammar::deserialize(&g.serialize().unwrap(), &c).unwrap();
    assert_eq!(back.max_token_len, 9);
}
