//! `Limits`: every configurable bound of the compiler turns an oversized input into a
//! typed `CompileError::Limit` naming the limit, its value and the input's value; the
//! defaults admit every MaskBench schema, `[a-z]{2,20000}`, a 100,000-value enum and
//! `maxLength: 524288`.
//!
//! Run with `cargo test --release --test robustness limits::`.

use crate::common;

use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokensieve::grammar::{Expr, Grammar, Rule, RuleId};
use tokensieve::{
    AutomatonError, BackgroundStatus, CompileError, GrammarCompiler, GrammarMatcher,
    JsonSchemaError, JsonSchemaOptions, Limit, LimitExceeded, Limits, Precompute, Vocabulary,
};

/// Every byte as a token, some words, and a stop token (the last id).
fn vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in ["ab", "abc", "hello", " world", "{\"", "\":", "aaaa"] {
        tokens.push(w.as_bytes().to_vec());
    }
    let eos = tokens.len() as u32;
    tokens.push(b"<eos>".to_vec());
    Arc::new(Vocabulary::from_token_bytes(&tokens, &[eos], &[eos]).unwrap())
}

/// A compiler of [`vocab`] under `limits`, with eager precompute: the memory and time
/// limits then also bound the masks, which the default background fill computes after
/// compile (and stops, without an error, before the memory limit).
fn with(limits: Limits) -> GrammarCompiler {
    GrammarCompiler::new(vocab())
        .with_limits(limits)
        .with_precompute(Precompute::Eager)
}

/// Compiles `src` and expects the limit error `limit`; returns it after checking the
/// message names the field, the value and the input's value.
fn expect_limit(c: &GrammarCompiler, src: &str, limit: Limit) -> LimitExceeded {
    match c.compile_grammar(src) {
        Err(CompileError::Limit(l)) => {
            assert_eq!(l.limit, limit, "{src:?}: {l}");
            assert!(l.actual > l.value, "{l:?}");
            let msg = CompileError::Limit(l.clone()).to_string();
            for part in [
                limit.field().to_string(),
                l.value.to_string(),
                l.actual.to_string(),
            ] {
                assert!(msg.contains(&part), "{msg:?} lacks {part:?}");
            }
            l
        }
        Err(e) => panic!("{src:?}: not a limit error: {e:?}"),
        Ok(_) => panic!("{src:?} compiled under {limit:?}"),
    }
}

#[test]
fn ir_size() {
    let c = with(Limits {
        max_ir_nodes: 100,
        ..Limits::default()
    });
    let ok = format!("root ::= \"{}\"", "a".repeat(99));
    assert!(c.compile_grammar(&ok).is_ok());
    let l = expect_limit(
        &c,
        &format!("root ::= \"{}\"", "a".repeat(150)),
        Limit::IrNodes,
    );
    assert_eq!((l.value, l.actual), (100, 150));
    // Nodes, not only bytes: 60 alternatives of one byte are 61 nodes, twice that is 122.
    let alts = vec!["\"a\""; 60].join(" | ");
    let l = expect_limit(&c, &format!("root ::= ({alts}) ({alts})"), Limit::IrNodes);
    assert_eq!(l.actual, 123);
}

#[test]
fn nesting_depth() {
    let c = with(Limits {
        max_nesting_depth: 6,
        ..Limits::default()
    });
    assert!(c
        .compile_grammar("root ::= (\"a\" (\"b\" (\"c\" \"d\")*)*)")
        .is_ok());
    let l = expect_limit(
        &c,
        "root ::= x\nx ::= (\"a\" (\"b\" (\"c\" (\"d\" \"e\")*)*)*)",
        Limit::NestingDepth,
    );
    assert_eq!((l.value, l.actual, l.rule.as_deref()), (6, 7, Some("x")));
}

#[test]
fn repetition_bound() {
    let c = with(Limits {
        max_repeat_bound: 1_000,
        ..Limits::default()
    });
    assert!(c.compile_grammar("root ::= \"a\"{0,1000}").is_ok());
    let l = expect_limit(&c, "root ::= \"a\"{2,20000}", Limit::RepeatBound);
    assert_eq!((l.value, l.actual), (1_000, 20_000));
    let l = expect_limit(&c, "root ::= \"a\"{5000,}", Limit::RepeatBound);
    assert_eq!(l.actual, 5_000);
}

#[test]
fn rule_states_and_automaton_nodes() {
    let c = with(Limits {
        max_rule_states: 10,
        ..Limits::default()
    });
    assert!(c.compile_grammar("root ::= \"abcdefgh\"").is_ok());
    let l = expect_limit(&c, "root ::= \"abcdefghijklmnop\"", Limit::RuleStates);
    assert_eq!(
        (l.value, l.actual, l.rule.as_deref()),
        (10, 11, Some("root"))
    );
    // An exponential DFA falls back to the NFA, whose size is then what counts.
    let c = with(Limits {
        max_rule_states: 30,
        ..Limits::default()
    });
    expect_limit(
        &c,
        "root ::= [a-c]{0,20} \"y\" [a-c]{0,20}",
        Limit::RuleStates,
    );

    let c = with(Limits {
        max_automaton_nodes: 30,
        ..Limits::default()
    });
    // Recursive rules are not inlined: three rules of 11 states each (three different
    // words: rules of one word would be one language, kept once).
    let src = "root ::= \"abcdefghijk\" x | \"\"\n\
               x ::= \"bcdefghijkl\" y | \"\"\n\
               y ::= \"cdefghijklm\" root | \"\"";
    let l = expect_limit(&c, src, Limit::AutomatonNodes);
    assert_eq!(l.value, 30);
    assert!(l.actual > 30 && l.actual <= 40, "{l:?}");
    // Large repetitions are counted rules: a few nodes whatever the bound.
    let g = c.compile_grammar("root ::= [a-z]{2,20000}").unwrap();
    assert!(g.node_count() <= 30, "{}", g.node_count());
}

#[test]
fn memory() {
    let src = "root ::= \"{\\\"\" [a-z]+ \"\\\":\" (\"hello\" | \" world\")* \"}\"";
    let g = with(Limits::default()).compile_grammar(src).unwrap();
    let bytes = g.memory_bytes() as u64;
    let c = with(Limits {
        max_memory_bytes: bytes / 2,
        ..Limits::default()
    });
    let l = expect_limit(&c, src, Limit::MemoryBytes);
    assert_eq!(l.value, bytes / 2);
    // Just enough memory compiles.
    let c = with(Limits {
        max_memory_bytes: bytes,
        ..Limits::default()
    });
    assert_eq!(c.compile_grammar(src).unwrap().memory_bytes() as u64, bytes);
}

#[test]
#[cfg(feature = "tiktoken")]
fn compile_time_budget_is_cooperative() {
    // A zero budget stops at the first check.
    let c = with(Limits {
        compile_time: Some(Duration::ZERO),
        ..Limits::default()
    });
    let l = expect_limit(&c, "root ::= \"a\"", Limit::CompileTime);
    assert_eq!(l.value, 0);
    // A real vocabulary: the mask precompute is stopped near the deadline.
    let vocab = match Vocabulary::o200k_base() {
        Ok(v) => Arc::new(v),
        Err(e) => panic!("o200k_base: {e}"),
    };
    let free = GrammarCompiler::new(vocab.clone()).with_precompute(Precompute::Eager);
    let src = "root ::= (\"{\" [a-z ]{0,40} \":\" [0-9]{1,12} (\",\" [a-z]{3,30} \":\" [^\\n]{0,50})* \"}\")+";
    let t = Instant::now();
    free.compile_grammar(src).unwrap();
    let full = t.elapsed();
    let budget = full / 10;
    let c = GrammarCompiler::new(vocab)
        .with_precompute(Precompute::Eager)
        .with_limits(Limits {
            compile_time: Some(budget),
            ..Limits::default()
        });
    let t = Instant::now();
    let l = expect_limit(&c, src, Limit::CompileTime);
    let took = t.elapsed();
    eprintln!("full compile {full:?}; budget {budget:?}; stopped after {took:?}; {l}");
    assert!(
        took < budget + full / 2 + Duration::from_millis(200),
        "stopped after {took:?} for a budget of {budget:?} (full compile {full:?})"
    );
    // An ambiguous nested repetition (about 5 s of mask precomputation, some 50 ms per
    // node): the walks inside a node look at the clock too.
    let budget = Duration::from_millis(300);
    let c = c.with_limits(Limits {
        compile_time: Some(budget),
        ..Limits::default()
    });
    let t = Instant::now();
    let l = expect_limit(
        &c,
        "root ::= ([a-z]{0,1000} \"x\"?){0,1000}",
        Limit::CompileTime,
    );
    let took = t.elapsed();
    eprintln!("nested repetition: stopped after {took:?}; {l}");
    assert!(took < budget * 4, "stopped after {took:?}");
}

/// Under the default precompute the compile-time budget bounds the background fill's walks
/// too: a grammar whose masks take longer compiles (automata only), its fill stops with
/// `TimeLimit` soon after the budget, and matchers compute the rest on first use.
#[test]
#[cfg(feature = "tiktoken")]
fn the_background_fill_stops_at_the_compile_time_budget() {
    let vocab = match Vocabulary::o200k_base() {
        Ok(v) => Arc::new(v),
        Err(e) => panic!("o200k_base: {e}"),
    };
    let budget = Duration::from_millis(150);
    let c = GrammarCompiler::new(vocab).with_limits(Limits {
        compile_time: Some(budget),
        ..Limits::default()
    });
    // About 5 s of masks (see above); its automata take milliseconds.
    let src = "root ::= ([a-z]{0,1000} \"x\"?){0,1000}";
    let t = Instant::now();
    let g = c.compile_grammar(src).unwrap();
    assert_eq!(g.wait_background(), BackgroundStatus::TimeLimit);
    let took = t.elapsed();
    eprintln!("fill stopped after {took:?} for a budget of {budget:?}");
    assert!(took < Duration::from_secs(3), "fill stopped after {took:?}");
    let mut m = GrammarMatcher::new(g);
    let mut mask = vec![0u32; m.bitmask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    assert!(m.accept_string("abcx"));
}

#[test]
fn default_compile_time_budget() {
    assert_eq!(
        Limits::default().compile_time,
        Some(Duration::from_secs(20))
    );
    assert_eq!(Limits::unlimited().compile_time, None);
}

#[test]
fn limits_apply_to_ir_and_regex_front_ends() {
    let c = with(Limits {
        max_repeat_bound: 100,
        ..Limits::default()
    });
    let g = Grammar {
        rules: vec![Rule {
            name: "root".into(),
            body: Expr::Repeat {
                expr: Box::new(Expr::Bytes(b"a".to_vec())),
                min: 0,
                max: Some(101),
            },
        }],
        root: RuleId(0),
    };
    assert!(matches!(
        c.compile_ir(&g),
        Err(CompileError::Limit(LimitExceeded {
            limit: Limit::RepeatBound,
            value: 100,
            actual: 101,
            ..
        }))
    ));
    let e = c.compile_regex("a{3,200}").unwrap_err();
    assert!(e.to_string().contains("max_repeat_bound"), "{e}");
}

#[test]
fn defaults_admit_large_bounds_and_enums() {
    let c = GrammarCompiler::new(vocab());
    assert_eq!(c.limits(), &Limits::default());
    // `[a-z]{2,20000}` compiles compactly.
    let g = c.compile_grammar("root ::= [a-z]{2,20000}").unwrap();
    assert!(g.node_count() < 20, "{} nodes", g.node_count());
    assert!(g.memory_bytes() < 64 << 10, "{} bytes", g.memory_bytes());
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string(&"q".repeat(20_000)));
    assert!(!m.clone().accept_string("q"));

    // maxLength 524288 and a 100,000-value enum: compile within the limits or fail with a
    // limit error, in bounded time.
    let opts = JsonSchemaOptions::default();
    let bounded = GrammarCompiler::new(vocab()).with_limits(Limits {
        compile_time: Some(Duration::from_secs(60)),
        ..Limits::default()
    });
    let t = Instant::now();
    let schema = json!({"type": "string", "maxLength": 524288});
    match bounded.compile_json_schema(&schema, &opts) {
        Ok(g) => {
            let mut m = GrammarMatcher::new(g);
            assert!(m.accept_string(&format!("\"{}", "x".repeat(524_288))));
            assert!(!m.clone().accept_string("x"));
            assert!(m.accept_string("\""));
        }
        Err(e) => assert!(matches!(e, CompileError::Limit(_)), "{e}"),
    }
    eprintln!("maxLength 524288: {:?}", t.elapsed());
    let t = Instant::now();
    let values: Vec<Value> = (0..100_000).map(|i| json!(format!("v{i}"))).collect();
    let schema = json!({ "enum": values });
    match bounded.compile_json_schema(&schema, &opts) {
        Ok(g) => {
            let mut m = GrammarMatcher::new(g);
            assert!(m.clone().accept_string("\"v99999\""));
            assert!(!m.accept_string("\"v100000\""));
        }
        Err(e) => assert!(matches!(e, CompileError::Limit(_)), "{e}"),
    }
    eprintln!("enum of 100,000: {:?}", t.elapsed());
}

/// Every MaskBench (JSONSchemaBench) schema: none is refused by a default limit. Prints the
/// largest values seen, which the defaults are set well above.
#[test]
fn defaults_admit_every_maskbench_schema() {
    use std::io::BufRead;
    let Some(dir) = common::testdata_path("jsonschemabench") else {
        return;
    };
    let c = GrammarCompiler::new(vocab()).with_precompute(Precompute::Lazy);
    let opts = JsonSchemaOptions::default();
    let mut folders: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    let (mut schemas, mut compiled, mut max_nodes, mut max_mem) = (0, 0, 0, 0);
    let mut refused = Vec::new();
    for folder in folders {
        let name = folder.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(f) = std::fs::File::open(folder.join(format!("{name}.jsonl.gz"))) else {
            continue;
        };
        for line in std::io::BufReader::new(flate2::read::GzDecoder::new(f)).lines() {
            let rec: Value = serde_json::from_str(&line.unwrap()).unwrap();
            schemas += 1;
            match c.compile_json_schema(&rec["schema"], &opts) {
                Ok(g) => {
                    compiled += 1;
                    max_nodes = max_nodes.max(g.node_count());
                    max_mem = max_mem.max(g.memory_bytes());
                }
                Err(CompileError::Limit(l)) => refused.push(format!("{}: {l}", rec["file"])),
                Err(_) => {}
            }
        }
    }
    eprintln!(
        "maskbench: {compiled}/{schemas} compiled; largest {max_nodes} automaton nodes, \
         {max_mem} bytes of automata"
    );
    assert!(schemas > 1000, "only {schemas} schemas found");
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

/// `max_schema_depth`: a schema nested 10,000 levels (as a value, built without
/// recursion) is a limit error, never a stack overflow; a schema within the limit compiles.
#[test]
fn schema_depth() {
    // Built and dropped on a thread with a large stack: serde_json's own `Drop` recurses.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let c = GrammarCompiler::new(vocab());
            let opts = JsonSchemaOptions::default();
            // Built by moving values (`json!` would copy the inner value each time).
            let mut schema = json!({"type": "integer"});
            for _ in 0..10_000 {
                let mut m = serde_json::Map::new();
                m.insert("type".into(), json!("array"));
                m.insert("items".into(), schema);
                schema = Value::Object(m);
            }
            match c.compile_json_schema(&schema, &opts) {
                Err(CompileError::Limit(l)) => {
                    assert_eq!(l.limit, Limit::SchemaDepth, "{l}");
                    assert_eq!(l.value, 200);
                    assert!(l.actual > l.value, "{l:?}");
                    assert!(l.to_string().contains("max_schema_depth"), "{l}");
                }
                Err(e) => panic!("not a limit error: {e}"),
                Ok(_) => panic!("a schema nested 10,000 deep compiled"),
            }
            // Deep constants count too (their JSON nesting).
            let mut deep = json!(1);
            for _ in 0..10_000 {
                deep = Value::Array(vec![deep]);
            }
            let e = c
                .compile_json_schema(&json!({ "const": deep }), &opts)
                .expect_err("a 10,000-deep constant is refused");
            assert!(
                matches!(e, CompileError::Limit(ref l) if l.limit == Limit::SchemaDepth),
                "{e}"
            );
            // As text, serde_json refuses it first: a typed error as well.
            let text = format!(
                "{}{}",
                "{\"items\":".repeat(10_000),
                "{}".to_string() + &"}".repeat(10_000)
            );
            assert!(matches!(
                c.compile_json_schema(text.as_str(), &opts),
                Err(tokensieve::CompileError::JsonSchema(
                    JsonSchemaError::NotJson(_)
                ))
            ));
            std::mem::drop((schema, deep));
        })
        .unwrap()
        .join()
        .unwrap();
    // A configured limit: 3 levels of `items` pass under 4, fail under 3.
    let schema = json!({"items": {"items": {"items": {}}}});
    let opts = JsonSchemaOptions::default();
    let under = |d| {
        with(Limits {
            max_schema_depth: d,
            ..Limits::default()
        })
        .compile_json_schema(&schema, &opts)
    };
    assert!(under(4).is_ok());
    match under(3) {
        Err(CompileError::Limit(l)) => {
            assert_eq!((l.limit, l.value, l.actual), (Limit::SchemaDepth, 3, 4))
        }
        other => panic!("{other:?}"),
    }
}

/// `max_enum_values`: an enum above the limit is a limit error naming both sizes; at the
/// limit it compiles.
#[test]
fn enum_values() {
    let c = with(Limits {
        max_enum_values: 1_000,
        ..Limits::default()
    });
    let opts = JsonSchemaOptions::default();
    let values = |n: usize| -> Vec<Value> { (0..n).map(|i| json!(i)).collect() };
    let g = c
        .compile_json_schema(&json!({ "enum": values(1_000) }), &opts)
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_string("999"));
    match c.compile_json_schema(&json!({ "enum": values(1_001) }), &opts) {
        Err(CompileError::Limit(l)) => {
            assert_eq!(
                (l.limit, l.value, l.actual),
                (Limit::EnumValues, 1_000, 1_001)
            );
            assert!(l.to_string().contains("max_enum_values"), "{l}");
        }
        other => panic!("{other:?}"),
    }
}

/// Checks a compiled `src` against texts of `n` letters: `ok(n)` says which lengths match.
fn check_lengths(c: &GrammarCompiler, src: &str, lengths: &[usize], ok: impl Fn(usize) -> bool) {
    let g = c.compile_grammar(src).unwrap();
    for &n in lengths {
        let mut m = GrammarMatcher::new(g.clone());
        let matched = m.accept_string(&"q".repeat(n)) && m.is_completed();
        assert_eq!(matched, ok(n), "{src}: {n} letters");
    }
}

#[test]
fn nested_repetitions_compile_as_one() {
    let c = GrammarCompiler::new(vocab());
    // A nullable body repeated is its non-empty part repeated: `([a-z]?){0,1000}` is
    // `[a-z]{0,1000}`, one counted rule.
    let src = "root ::= ([a-z]?){0,1000}";
    assert!(c.compile_grammar(src).unwrap().node_count() < 10);
    check_lengths(&c, src, &[0, 1, 999, 1000, 1001], |n| n <= 1000);
    // Directly nested bounds whose ranges join multiply: `([a-z]{1,1000}){2,1000}` is
    // `[a-z]{2,1000000}`; `([a-z]{0,1000}){0,1000}` is `[a-z]{0,1000000}`.
    let src = "root ::= ([a-z]{1,1000}){2,1000}";
    assert!(c.compile_grammar(src).unwrap().node_count() < 10);
    check_lengths(&c, src, &[0, 1, 2, 999_999, 1_000_000, 1_000_001], |n| {
        (2..=1_000_000).contains(&n)
    });
    let src = "root ::= (([a-z]{0,1000}){0,1000})";
    assert!(c.compile_grammar(src).unwrap().node_count() < 10);
    check_lengths(&c, src, &[0, 1, 1_000_000, 1_000_001], |n| n <= 1_000_000);
    // Ranges with gaps are not merged: `([a-z]{3,4}){0,10}` matches 0, 3, 4, then 6 to 40.
    let src = "root ::= ([a-z]{3,4}){0,10}";
    check_lengths(&c, src, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40, 41], |n| {
        matches!(n, 0 | 3 | 4) || (6..=40).contains(&n)
    });
    // `([a-z]{3,4}){2,10}`: 6..=40 joins from two copies on (2·4 + 1 >= 3·3).
    check_lengths(
        &c,
        src.replace("{0,10}", "{2,10}").as_str(),
        &[5, 6, 40, 41],
        |n| (6..=40).contains(&n),
    );
    // An unbounded outer repetition: `([a-z]{2,5})*` is "" or 2 letters and more.
    check_lengths(&c, "root ::= ([a-z]{2,5})*", &[0, 1, 2, 3, 77], |n| n != 1);
}

#[test]
fn nested_repetition_bounds_multiply() {
    // Merged bounds are not held to max_repeat_bound (a counted repetition costs the same
    // whatever its bound): `([a-z]{0,1001}){0,1000}` is `[a-z]{0,1001000}`.
    let c = GrammarCompiler::new(vocab());
    let src = "root ::= ([a-z]{0,1001}){0,1000}";
    assert!(c.compile_grammar(src).unwrap().node_count() < 10);
    check_lengths(&c, src, &[1_001_000, 1_001_001], |n| n <= 1_001_000);
    // A 40-byte grammar that repeats a letter up to 10^12 times: more than a repetition's
    // counter holds, refused at once (this took minutes of mask precomputation before),
    // under any limits.
    for c in [c, with(Limits::unlimited())] {
        match c.compile_grammar("root ::= ([a-z]{0,1000000}){0,1000000}") {
            Err(CompileError::Automaton(AutomatonError::RepeatTooLarge { rule, count, limit })) => {
                assert_eq!(
                    (rule.as_str(), count, limit),
                    ("root", 1_000_000_000_000, (u32::MAX / 2) as u64)
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn rewritten_repetitions_keep_their_language() {
    // Nullable bodies and nested bounds are rewritten before lowering; every string over
    // {a, b} up to 8 letters gets the same verdict as the `regex` crate's.
    let c = GrammarCompiler::new(vocab());
    let cases = [
        (r#"("a"? "b"?){2,3}"#, "(a?b?){2,3}"),
        (r#"("a" | ""){3,5}"#, "(a|){3,5}"),
        (r#"(("a"?){0,2} "b"?){1,3}"#, "((a?){0,2}b?){1,3}"),
        (r#"("a"{0,2} "b"{0,1} "a"?)*"#, "(a{0,2}b{0,1}a?)*"),
        (r#"(("ab"){1,2}){2,3}"#, "((ab){1,2}){2,3}"),
        (r#"(("a"{2,3}){0,4})"#, "((a{2,3}){0,4})"),
        (r#"(("a"{2,3}){1,}) "b""#, "(a{2,3}){1,}b"),
        (r#"(("a"*){2,3}){0,2} "b"?"#, "((a*){2,3}){0,2}b?"),
        (r#"("a"?){0,0} "b""#, "(a?){0,0}b"),
    ];
    for (ebnf, re) in cases {
        let g = c.compile_grammar(&format!("root ::= {ebnf}")).unwrap();
        let re = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
        for len in 0..=8u32 {
            for bits in 0..1u32 << len {
                let s: String = (0..len)
                    .map(|i| if bits >> i & 1 == 0 { 'a' } else { 'b' })
                    .collect();
                let mut m = GrammarMatcher::new(g.clone());
                let ours = m.accept_string(&s) && m.is_completed();
                assert_eq!(ours, re.is_match(&s), "{ebnf} on {s:?}");
            }
        }
    }
}

#[test]
fn construction_memory_is_bounded() {
    // `[a-z]?` written 2,000 times: each automaton state's set holds every later position,
    // about 2,000² / 2 entries in all, though the finished automaton is small.
    let src = format!("root ::= {}", "[a-z]? ".repeat(2_000));
    let g = GrammarCompiler::new(vocab()).compile_grammar(&src).unwrap();
    assert!(g.memory_bytes() < 1 << 20, "{}", g.memory_bytes());
    let c = with(Limits {
        max_memory_bytes: 1 << 20,
        ..Limits::default()
    });
    let l = expect_limit(&c, &src, Limit::MemoryBytes);
    assert_eq!(l.rule.as_deref(), Some("root"));
    assert_eq!(l.value, 1 << 20);
}

/// `x ::= x x | [a-z] | ""` is ambiguous: every byte completes rule instances started at
/// every earlier position, so the Earley work of one step grows with the square of the
/// text. The per-call work budget turns that into `StepLimit` errors, with the matcher's
/// state unchanged, instead of seconds per token.
#[test]
fn ambiguous_grammar_steps_stop_at_the_work_budget() {
    const AMBIGUOUS: &str = "root ::= x*\nx ::= x x | [a-z] | \"\"";
    let budget = 200_000;
    let c = with(Limits {
        max_step_items: budget,
        ..Limits::default()
    });
    let g = c.compile_grammar(AMBIGUOUS).unwrap();
    let mut m = GrammarMatcher::new(g.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    let a = b'a' as u32;
    let mut accepted = 0;
    let err = loop {
        match m.try_accept_token(a) {
            Ok(()) => accepted += 1,
            Err(e) => break e,
        }
        assert!(
            accepted < 5_000,
            "the budget never stopped the ambiguous grammar"
        );
    };
    // The work per byte grows about quadratically: a 200,000 budget runs out after some
    // hundreds of bytes, not at once and not never.
    assert!(
        (50..2_000).contains(&accepted),
        "stopped after {accepted} bytes"
    );
    let tokensieve::TokenRejection::StepLimit { token, limit } = &err else {
        panic!("not a step limit: {err:?}");
    };
    assert_eq!(*token, a);
    assert_eq!(limit.limit, Limit::StepItems);
    assert_eq!(limit.value, budget);
    assert!(limit.actual > budget, "{limit:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("max_step_items") && msg.contains("200000"),
        "{msg}"
    );
    // Nothing was accepted by the failed call.
    assert_eq!(m.num_accepted_steps(), accepted);
    // The mask of that state comes from precomputed node masks here (no byte is pushed
    // through the chart), so it still says what the grammar allows; a mask that needs the
    // chart fails the same way.
    match m.fill_next_token_bitmask(&mut mask) {
        Ok(()) => assert_eq!(
            mask[(a / 32) as usize] >> (a % 32) & 1,
            1,
            "mask without 'a'"
        ),
        Err(tokensieve::MatcherError::Limit(l)) => {
            assert_eq!(l.limit, Limit::StepItems);
            assert_eq!(l.value, budget);
        }
        Err(e) => panic!("{e:?}"),
    }
    assert_eq!(m.num_accepted_steps(), accepted);
    // Rolling back to a shorter text makes the steps affordable again, with the masks a
    // fresh matcher computes there.
    m.rollback(accepted - 10).unwrap();
    let mut fresh = GrammarMatcher::new(g);
    for _ in 0..10 {
        assert!(fresh.accept_token(a));
    }
    let mut want = vec![0u32; fresh.bitmask_words()];
    fresh.fill_next_token_bitmask(&mut want).unwrap();
    m.fill_next_token_bitmask(&mut mask).unwrap();
    assert_eq!(mask, want);
    assert!(m.accept_token(b'b' as u32));
}

/// The default work budget stops the ambiguous grammar within bounded work, and leaves
/// ordinary grammars alone: a long JSON document through the built-in JSON grammar and a
/// long text under a plain repetition never come near it.
#[test]
fn default_work_budget_leaves_ordinary_grammars_alone() {
    let c = with(Limits::default());
    let json = c.compile_builtin_json().unwrap();
    let mut m = GrammarMatcher::new(json);
    let mut mask = vec![0u32; m.bitmask_words()];
    let doc = serde_json::to_string(&json!({
        "a": [1, 2.5e3, "x\u{e9}", {"b": [true, false, null]}],
        "deep": [[[[[[[[[[{"k": "v"}]]]]]]]]]],
    }))
    .unwrap();
    let text = format!("[{}]", vec![doc; 50].join(","));
    for b in text.bytes() {
        m.fill_next_token_bitmask(&mut mask).unwrap();
        assert!(m.accept_token(b as u32));
    }
    assert!(m.accept_token(m.compiled_grammar().vocabulary().stop_tokens()[0]));
    let g = c.compile_grammar("root ::= [a-z ]*").unwrap();
    let mut m = GrammarMatcher::new(g);
    for _ in 0..20_000 {
        m.fill_next_token_bitmask(&mut mask).unwrap();
        assert!(m.accept_token(b'q' as u32));
    }
    let g = c
        .compile_grammar("root ::= x*\nx ::= x x | [a-z] | \"\"")
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    // As one step, the work is the sum over the bytes: past the default at once.
    match m.try_accept_bytes(&[b'a'; 5_000]) {
        Err(tokensieve::TokenRejection::StepLimit { limit, .. }) => {
            assert_eq!(limit.value, Limits::default().max_step_items)
        }
        other => panic!("5,000 ambiguous bytes in one step: {other:?}"),
    }
    assert_eq!(m.num_accepted_steps(), 0);
    assert!(m.accept_string("abc"));
}

/// Masks computed on first use during a matcher call (`Precompute::Lazy`) get the
/// compiler's `compile_time` budget: an ambiguous nested repetition whose first mask walks
/// a 100,000-token vocabulary for seconds stops at the budget with
/// `MatcherError::Limit`, keeps nothing half-computed and leaves the matcher usable.
#[test]
fn lazy_masks_stop_at_the_compile_time_budget() {
    let mut tokens = common::random_letter_tokens(100_000);
    let eos = tokens.len() as u32;
    tokens.push(b"<eos>".to_vec());
    let vocab = Vocabulary::from_token_bytes(&tokens, &[eos], &[eos]).unwrap();
    let budget = Duration::from_millis(50);
    let c = GrammarCompiler::new(vocab)
        .with_precompute(Precompute::Lazy)
        .with_limits(Limits {
            compile_time: Some(budget),
            ..Limits::default()
        });
    let g = c
        .compile_grammar(r#"root ::= (([a-z]{0,1000} "x"?){0,1000} "y"?){0,1000}"#)
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    let mut mask = vec![0u32; m.bitmask_words()];
    let mut first = None;
    for _ in 0..2 {
        match m.fill_next_token_bitmask(&mut mask) {
            Err(tokensieve::MatcherError::Limit(l)) => {
                // A retry does not spend the budget again: the same error at once.
                assert_eq!(first.get_or_insert_with(|| l.clone()), &l);
                assert_eq!(l.limit, Limit::CompileTime);
                assert_eq!(l.value, 50);
                assert!(l.actual > 50, "{l:?}");
                let msg = tokensieve::MatcherError::Limit(l).to_string();
                assert!(msg.starts_with("token bitmask not computed"), "{msg}");
                assert!(msg.contains("Limits::compile_time"), "{msg}");
            }
            other => panic!("a multi-second mask within 50 ms: {other:?}"),
        }
    }
    assert_eq!(m.num_accepted_steps(), 0);
    assert!(m.accept_string("abcxy"));
}

/// Errors of a JSON Schema's compiled grammar name the schema's place (a JSON pointer),
/// not only the generated rule: a limit exceeded in the rule of property `b`, and a
/// `$ref` cycle with no way out.
#[test]
fn json_schema_grammar_errors_name_the_schema_place() {
    let c = with(Limits {
        max_rule_states: 300,
        ..Limits::default()
    });
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "array", "items": {"enum": (0..1000).map(|i| format!("value{i}")).collect::<Vec<_>>()}}
        }
    });
    match c.compile_json_schema(&schema, &JsonSchemaOptions::default()) {
        Err(CompileError::Limit(l)) => {
            assert_eq!(l.limit, Limit::RuleStates);
            assert!(l.rule.is_some(), "{l:?}");
            // The array is inlined in its property's rule: the place is the property.
            assert_eq!(l.pointer.as_deref(), Some("#/properties/b"), "{l:?}");
            assert!(l.to_string().contains("at schema #/properties/b"), "{l}");
        }
        other => panic!("{other:?}"),
    }
    // The enum limit is the front end's own: the keyword's pointer, no rule.
    let c = with(Limits {
        max_enum_values: 2,
        ..Limits::default()
    });
    match c.compile_json_schema(
        &json!({"items": {"enum": [1, 2, 3]}}),
        &JsonSchemaOptions::default(),
    ) {
        Err(CompileError::Limit(l)) => {
            assert_eq!((l.rule, l.pointer.as_deref()), (None, Some("#/items/enum")));
        }
        other => panic!("{other:?}"),
    }
    // Reference cycles that never produce a value: two definitions that only refer to
    // each other, and a node that requires a next node of its own kind.
    let c = with(Limits::default());
    let cases = [
        (
            json!({
                "type": "object",
                "properties": {"loop": {"$ref": "#/$defs/a"}},
                "required": ["loop"],
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}
            }),
            "#/$defs/",
        ),
        (
            json!({
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/node"}},
                "required": ["next"],
                "$defs": {"node": {
                    "type": "object",
                    "properties": {"next": {"$ref": "#/$defs/node"}},
                    "required": ["next"]
                }}
            }),
            "#/",
        ),
    ];
    for (schema, place) in cases {
        let Err(e) = c.compile_json_schema(&schema, &JsonSchemaOptions::default()) else {
            panic!("{schema} compiled");
        };
        match &e {
            tokensieve::CompileError::JsonSchema(JsonSchemaError::Unsatisfiable {
                pointer,
                reason,
            }) => {
                assert!(pointer.starts_with(place), "{e}");
                assert!(reason.contains("$ref"), "{e}");
            }
            other => panic!("{schema}: {other:?}"),
        }
    }
}

/// `max_schema_depth` also bounds the `$ref` chains the front end follows: a chain of 60
/// array levels through `$ref` under a limit of 50 is the limit error at a pointer.
#[test]
fn schema_depth_limit_bounds_ref_chains() {
    let mut defs = serde_json::Map::new();
    for i in 0..60 {
        defs.insert(
            format!("d{i}"),
            json!({"type": "array", "items": {"$ref": format!("#/$defs/d{}", i + 1)}}),
        );
    }
    defs.insert("d60".into(), json!({"type": "integer"}));
    let schema = json!({"$ref": "#/$defs/d0", "$defs": defs});
    let c = with(Limits {
        max_schema_depth: 50,
        ..Limits::default()
    });
    match c.compile_json_schema(&schema, &JsonSchemaOptions::default()) {
        Err(CompileError::Limit(l)) => {
            assert_eq!((l.limit, l.value), (Limit::SchemaDepth, 50), "{l}");
            assert!(
                l.pointer
                    .as_deref()
                    .is_some_and(|p| p.starts_with("#/$defs/d")),
                "{l}"
            );
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // Within the default the chain compiles.
    assert!(with(Limits::default())
        .compile_json_schema(&schema, &JsonSchemaOptions::default())
        .is_ok());
}
