//! The content-keyed mask cache of a `GrammarCompiler` (issue 24, items 2 and 4): masks
//! computed for one grammar (or one tool of a tag) are looked up by every later grammar of
//! the compiler whose nodes have the same future. It must be exact: the masks of a grammar
//! compiled on a warm compiler equal, bit for bit, the eager masks of a fresh compiler that
//! shares nothing, at every step of teacher-forced texts and one step off them.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Precompute, Vocabulary};

/// Teacher-forces `tokens` through matchers of `warm` and `fresh`, comparing their masks
/// before every token; at each step, also one random allowed token off the path (accepted,
/// compared, rolled back). Returns the number of masks compared.
fn compare_along(
    warm: &Arc<CompiledGrammar>,
    fresh: &Arc<CompiledGrammar>,
    vocab: &Vocabulary,
    tokens: &[u32],
    rng: &mut StdRng,
    what: &str,
) -> usize {
    let words = vocab.bitmask_words();
    let (mut a, mut b) = (vec![0u32; words], vec![0u32; words]);
    let mut mw = GrammarMatcher::new(warm.clone());
    let mut mf = GrammarMatcher::new(fresh.clone());
    let mut compared = 0;
    for (i, &t) in tokens.iter().enumerate() {
        mw.fill_next_token_bitmask(&mut a).unwrap();
        mf.fill_next_token_bitmask(&mut b).unwrap();
        assert!(a == b, "{what}: masks differ before token {i}");
        compared += 1;
        let allowed: Vec<u32> = (0..vocab.tokenizer_size() as u32)
            .filter(|&x| b[(x / 32) as usize] >> (x % 32) & 1 == 1 && !vocab.is_stop_token(x))
            .collect();
        if !allowed.is_empty() {
            let off = allowed[rng.gen_range(0..allowed.len())];
            assert!(
                mw.accept_token(off) && mf.accept_token(off),
                "{what}: off-path"
            );
            if !mf.is_terminated() {
                mw.fill_next_token_bitmask(&mut a).unwrap();
                mf.fill_next_token_bitmask(&mut b).unwrap();
                assert!(
                    a == b,
                    "{what}: masks differ after off-path token {off} at {i}"
                );
                compared += 1;
            }
            mw.rollback(1).unwrap();
            mf.rollback(1).unwrap();
        }
        let (ok_w, ok_f) = (mw.accept_token(t), mf.accept_token(t));
        assert_eq!(ok_w, ok_f, "{what}: token {i} accepted by one only");
        if !ok_f {
            break;
        }
    }
    compared
}

/// A fresh compiler that shares nothing: eager, no mask cache, no grammar cache, no cache
/// of rule automata.
fn fresh_eager(vocab: &Arc<Vocabulary>) -> GrammarCompiler {
    GrammarCompiler::new(vocab.clone())
        .with_precompute(Precompute::Eager)
        .with_mask_cache_capacity(0)
        .with_cache_enabled(false)
        .with_rule_automaton_cache_capacity(0)
}

#[cfg(feature = "hf")]
#[test]
fn maskbench_masks_on_a_warm_compiler_equal_fresh_eager_masks() {
    let Some(rt) = crate::common::RealTokenizer::load("llama3_1") else {
        return;
    };
    let Some(sample) = crate::maskbench::bench_sample(40) else {
        return;
    };
    let opts = crate::maskbench::bench_options();
    // Lazy, so that every mask of the warm compiler is looked up (or walked) on use; no
    // whole-grammar cache, so that the second pass compiles every schema again.
    let warm = GrammarCompiler::new(rt.vocab.clone())
        .with_precompute(Precompute::Lazy)
        .with_cache_enabled(false);
    let fresh = fresh_eager(&rt.vocab);
    let mut rng = StdRng::seed_from_u64(24);
    let mut grammars = Vec::new();
    for rec in sample.iter().filter(|r| !r.valid.is_empty()) {
        let Ok(f) = fresh.compile_json_schema(&rec.schema, &opts) else {
            continue;
        };
        grammars.push((rec, f));
        if grammars.len() == 10 {
            break;
        }
    }
    assert!(grammars.len() >= 8, "too few MaskBench schemas compiled");
    let mut compared = 0;
    // Twice, the second time in reverse order on the same compiler: every schema then
    // meets a cache warmed by all the others.
    for pass in 0..2 {
        let order: Vec<_> = if pass == 0 {
            grammars.iter().collect()
        } else {
            grammars.iter().rev().collect()
        };
        for (rec, f) in order {
            let w = warm.compile_json_schema(&rec.schema, &opts).unwrap();
            for text in rec.valid.iter().take(2) {
                let mut tokens = rt.encode_exact(text);
                tokens.push(rt.stop());
                compared += compare_along(&w, f, &rt.vocab, &tokens, &mut rng, &rec.name);
            }
        }
    }
    let (bytes, count) = warm.mask_cache_stats();
    assert!(count > 0 && bytes > 0, "the warm compiler shared no mask");
    assert!(compared > 200, "only {compared} masks compared");
}

/// `n` distinct tools from BFCL's `multiple` file, from the `skip`-th on.
fn bfcl_tools(skip: usize, n: usize) -> Vec<tokensieve_tools::Tool> {
    let Some(path) = crate::common::testdata_path("toolcalls/bfcl/BFCL_v4_multiple.json") else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(path).expect("BFCL file");
    let mut tools: Vec<tokensieve_tools::Tool> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        for f in v["function"].as_array().into_iter().flatten() {
            if let Ok(t) = tokensieve_tools::Tool::from_bfcl_function(f) {
                if !tools.iter().any(|u| u.name == t.name) {
                    tools.push(t);
                }
            }
        }
        if tools.len() >= skip + n {
            break;
        }
    }
    tools.into_iter().skip(skip).take(n).collect()
}

/// A call of `tool` with its required arguments set to simple values of their types.
fn a_call(tool: &tokensieve_tools::Tool) -> tokensieve_tools::ToolCall {
    let p = &tool.input_schema;
    let mut args = serde_json::Map::new();
    for name in p["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let prop = &p["properties"][name];
        let v = match prop["type"].as_str().unwrap_or("string") {
            "integer" => Value::from(3),
            "number" => Value::from(2.5),
            "boolean" => Value::from(true),
            "array" => Value::Array(vec![]),
            "object" => Value::Object(Default::default()),
            _ => match prop["enum"].as_array() {
                Some(e) => e[0].clone(),
                None => Value::from("abc"),
            },
        };
        args.insert(name.to_string(), v);
    }
    tokensieve_tools::ToolCall::new(tool.name.clone(), Value::Object(args))
}

#[cfg(feature = "hf")]
#[test]
fn hermes_tag_masks_on_a_warm_compiler_equal_fresh_eager_masks() {
    use tokensieve_tools::{Hermes, ToolCallFormat, ToolChoice};
    let Some(rt) = crate::common::RealTokenizer::load("qwen3") else {
        return;
    };
    let tools = bfcl_tools(0, 15);
    if tools.len() < 15 {
        return;
    }
    let hermes = Hermes::default();
    let tag = |ts: &[tokensieve_tools::Tool]| {
        hermes
            .structural_tag(ts, &ToolChoice::Auto, true)
            .expect("tag")
    };
    let warm = GrammarCompiler::new(rt.vocab.clone()).with_precompute(Precompute::Lazy);
    // Warm the cache with an overlapping tool set (tools 5..15), walking its calls.
    let before = warm.compile_structural_tag(&tag(&tools[5..15])).unwrap();
    for t in &tools[5..15] {
        let text = format!("Sure.\n{}", hermes.render_calls(&[a_call(t)]));
        let mut m = GrammarMatcher::new(before.clone());
        let mut mask = vec![0u32; rt.vocab.bitmask_words()];
        // Only a warm-up: a call the tag refuses part way still warms the masks before.
        for tok in rt.encode_exact(&text) {
            m.fill_next_token_bitmask(&mut mask).unwrap();
            if !m.accept_token(tok) {
                break;
            }
        }
    }
    assert!(warm.mask_cache_stats().1 > 0);
    let w = warm.compile_structural_tag(&tag(&tools[..10])).unwrap();
    let f = fresh_eager(&rt.vocab)
        .compile_structural_tag(&tag(&tools[..10]))
        .unwrap();
    let mut rng = StdRng::seed_from_u64(10);
    let mut compared = 0;
    for t in &tools[..10] {
        let text = format!("I will call it.\n{}", hermes.render_calls(&[a_call(t)]));
        let mut tokens = rt.encode_exact(&text);
        tokens.push(rt.stop());
        compared += compare_along(&w, &f, &rt.vocab, &tokens, &mut rng, &t.name);
    }
    assert!(compared > 200, "only {compared} masks compared");
}

/// The mask cache is bounded, emptied by `clear_cache` and counted in `cache_size_bytes`.
#[cfg(feature = "hf")]
#[test]
fn the_mask_cache_is_bounded_counted_and_cleared() {
    let Some(rt) = crate::common::RealTokenizer::load("llama3_1") else {
        return;
    };
    let schemas = [
        r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}"#,
        r#"{"type":"array","items":{"type":"number"}}"#,
        r#"{"type":"object","properties":{"x":{"type":"string","maxLength":5}}}"#,
    ];
    let compile_all = |c: &GrammarCompiler| {
        for s in schemas {
            let v: Value = serde_json::from_str(s).unwrap();
            c.compile_json_schema(&v, &Default::default()).unwrap();
        }
    };
    // Eager: the masks are in the cache when the compiles return.
    let c = GrammarCompiler::new(rt.vocab.clone()).with_precompute(Precompute::Eager);
    compile_all(&c);
    let (mask_bytes, count) = c.mask_cache_stats();
    assert!(count > 0 && mask_bytes > 0);
    let grammars = c.grammar_cache_stats().size_bytes;
    let automata = c.rule_automaton_cache_stats().size_bytes;
    assert!(automata > 0);
    assert_eq!(c.cache_size_bytes(), grammars + mask_bytes + automata);
    c.clear_cache();
    assert_eq!(c.mask_cache_stats(), (0, 0));
    assert_eq!(c.cache_size_bytes(), 0);
    // A bound below what the three need: the cache stays within it and keeps the newest.
    let limit = mask_bytes / 2;
    let small = GrammarCompiler::new(rt.vocab.clone())
        .with_precompute(Precompute::Eager)
        .with_mask_cache_capacity(limit);
    compile_all(&small);
    let (b, n) = small.mask_cache_stats();
    assert!(
        b <= limit && n > 0,
        "{b} bytes, {n} masks under a {limit}-byte bound"
    );
}

/// Rule automata taken from a compiler's cache (issue 24: sub-grammars built once per
/// compiler) make the same compiled grammar, automaton, mask classes and every node's eager
/// mask, as a compiler that builds every rule: over a sample of MaskBench schemas (each
/// compiled after all the others warmed the cache) and two Hermes tags over overlapping
/// BFCL tools, the serialized eager grammars are equal byte for byte. A warm compiler
/// builds no rule twice: the second compile of the whole sample only hits.
#[cfg(feature = "hf")]
#[test]
fn cached_rule_automata_give_the_eager_masks_of_every_node() {
    use tokensieve_tools::{Hermes, ToolCallFormat, ToolChoice};
    let Some(rt) = crate::common::RealTokenizer::load("qwen3") else {
        return;
    };
    let Some(sample) = crate::maskbench::bench_sample(40) else {
        return;
    };
    let opts = crate::maskbench::bench_options();
    let tools = bfcl_tools(0, 15);
    if tools.len() < 15 {
        return;
    }
    let hermes = Hermes::default();
    let tags: Vec<_> = [&tools[5..15], &tools[..10]]
        .iter()
        .map(|ts| hermes.structural_tag(ts, &ToolChoice::Auto, true).unwrap())
        .collect();
    // Eager, masks walked (none shared), no whole-grammar cache: only the rule automata
    // come from a cache. Tags whole: serializing a deferring compile builds its tools.
    let warm = GrammarCompiler::new(rt.vocab.clone())
        .with_precompute(Precompute::Eager)
        .with_mask_cache_capacity(0)
        .with_cache_enabled(false)
        .with_deferred_tool_rules(false);
    let fresh = fresh_eager(&rt.vocab).with_deferred_tool_rules(false);
    let schemas: Vec<&Value> = sample
        .iter()
        .map(|r| &r.schema)
        .filter(|s| fresh.compile_json_schema(s, &opts).is_ok())
        .take(8)
        .collect();
    assert!(schemas.len() >= 6, "too few MaskBench schemas compiled");
    let compile = |c: &GrammarCompiler, i: usize| -> Arc<CompiledGrammar> {
        if i < schemas.len() {
            c.compile_json_schema(schemas[i], &opts).unwrap()
        } else {
            c.compile_structural_tag(&tags[i - schemas.len()]).unwrap()
        }
    };
    let all = schemas.len() + tags.len();
    for i in 0..all {
        compile(&warm, i);
    }
    let first = warm.rule_automaton_cache_stats();
    assert!(first.builds > 0 && first.entries > 0, "{first:?}");
    for i in (0..all).rev() {
        let w = compile(&warm, i).serialize().unwrap();
        let f = compile(&fresh, i).serialize().unwrap();
        assert!(w == f, "grammar {i}: warm and fresh eager grammars differ");
    }
    let second = warm.rule_automaton_cache_stats();
    assert_eq!(second.builds, first.builds, "a warm compile rebuilt a rule");
    assert!(
        second.hits > first.hits + all as u64,
        "{first:?} then {second:?}"
    );
    assert_eq!(fresh.rule_automaton_cache_stats().hits, 0);
}
