//! The whole-grammar cache of `GrammarCompiler` (issue 26): keyed by (kind, source,
//! options), LRU eviction under a byte limit, `clear_cache`, `cache_size_bytes`, off
//! when disabled, concurrent compiles of one key compile once, and a caller's thread pool.

use std::sync::{Arc, Barrier};
use tokensieve::{GrammarCompiler, JsonSchemaOptions, Precompute, RegexOptions, Vocabulary};

fn vocab() -> Vocabulary {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in ["ab", "abc", "\"a\"", "{\"", "\": ", "true", "12"] {
        tokens.push(w.as_bytes().to_vec());
    }
    tokens.push(b"</s>".to_vec());
    let stop = tokens.len() as u32 - 1;
    Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap()
}

/// A compiler of [`vocab`] with eager precompute: a grammar's memory is then final when
/// compiled (the default background fill would add masks after the cache counted it), so
/// the sizes compared below do not depend on how far a fill got.
fn eager() -> GrammarCompiler {
    GrammarCompiler::new(vocab()).with_precompute(Precompute::Eager)
}

#[test]
fn the_same_source_compiles_once_and_other_options_do_not_share() {
    let c = eager();
    assert_eq!(
        c.cache_limit_bytes(),
        None,
        "unlimited by default, as XGrammar"
    );
    let schema = r#"{"type": "object", "properties": {"a": {"type": "integer"}}}"#;
    let a = c
        .compile_json_schema(schema, &JsonSchemaOptions::default())
        .unwrap();
    let b = c
        .compile_json_schema(schema, &JsonSchemaOptions::default())
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let stats = c.grammar_cache_stats();
    assert_eq!((stats.entries, stats.compiles, stats.hits), (1, 1, 1));
    // The grammar, plus the rule automata the compiler shares across grammars.
    assert_eq!(
        c.cache_size_bytes(),
        a.memory_bytes() + c.rule_automaton_cache_stats().size_bytes
    );
    // Other options, another kind, another compiler setting: other entries.
    let strict = JsonSchemaOptions {
        any_whitespace: false,
        ..Default::default()
    };
    let s = c.compile_json_schema(schema, &strict).unwrap();
    assert!(!Arc::ptr_eq(&a, &s));
    let lazy = c.clone().with_precompute(Precompute::Lazy);
    let l = lazy
        .compile_json_schema(schema, &JsonSchemaOptions::default())
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &l));
    let r1 = c.compile_regex("ab+").unwrap();
    let r2 = c
        .compile_regex_with("ab+", &RegexOptions::default())
        .unwrap();
    assert!(Arc::ptr_eq(&r1, &r2));
    let e1 = c.compile_grammar(r#"root ::= "ab"+"#).unwrap();
    assert!(Arc::ptr_eq(
        &e1,
        &c.compile_grammar(r#"root ::= "ab"+"#).unwrap()
    ));
    assert!(Arc::ptr_eq(
        &c.compile_builtin_json().unwrap(),
        &c.compile_builtin_json().unwrap()
    ));
    let tag = r#"{"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}"#;
    assert!(Arc::ptr_eq(
        &c.compile_structural_tag(tag).unwrap(),
        &c.compile_structural_tag(tag).unwrap()
    ));
    assert_eq!(c.grammar_cache_stats().entries, 7);
    // Errors are not kept.
    assert!(c.compile_grammar("root ::= (").is_err());
    assert!(c.compile_grammar("root ::= (").is_err());
    assert_eq!(c.grammar_cache_stats().entries, 7);

    c.clear_cache();
    assert_eq!(c.cache_size_bytes(), 0);
    assert_eq!(c.grammar_cache_stats().entries, 0);
    let again = c
        .compile_json_schema(schema, &JsonSchemaOptions::default())
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &again));

    let off = GrammarCompiler::new(vocab()).with_cache_enabled(false);
    let x = off.compile_regex("ab+").unwrap();
    assert!(!Arc::ptr_eq(&x, &off.compile_regex("ab+").unwrap()));
    // No grammar kept: what is counted is the rule automata shared across grammars.
    assert_eq!(off.grammar_cache_stats().size_bytes, 0);
    assert_eq!(
        off.cache_size_bytes(),
        off.rule_automaton_cache_stats().size_bytes
    );
}

#[test]
fn past_the_byte_limit_the_least_recently_used_grammar_goes() {
    let patterns = ["a{1,40}b", "(ab|c){2,30}", "[a-z]{3,50}q"];
    let sizes: Vec<usize> = {
        let c = eager().with_cache_enabled(false);
        patterns
            .iter()
            .map(|p| c.compile_regex(p).unwrap().memory_bytes())
            .collect()
    };
    let limit = sizes.iter().sum::<usize>() - 1;
    let c = eager().with_cache_limit_bytes(Some(limit));
    assert_eq!(c.cache_limit_bytes(), Some(limit));
    let g0 = c.compile_regex(patterns[0]).unwrap();
    let g1 = c.compile_regex(patterns[1]).unwrap();
    // `cache_size_bytes` also counts the compiler's mask cache (the base walks of counted
    // repetitions it shares): the grammar cache's own bytes are in its stats.
    let grammar_bytes = |c: &GrammarCompiler| c.grammar_cache_stats().size_bytes;
    assert_eq!(grammar_bytes(&c), sizes[0] + sizes[1]);
    // Use g0 again: g1 is now the least recently used.
    assert!(Arc::ptr_eq(&g0, &c.compile_regex(patterns[0]).unwrap()));
    let _g2 = c.compile_regex(patterns[2]).unwrap();
    assert_eq!(grammar_bytes(&c), sizes[0] + sizes[2]);
    assert!(grammar_bytes(&c) <= limit);
    assert!(Arc::ptr_eq(&g0, &c.compile_regex(patterns[0]).unwrap()));
    let compiles = c.grammar_cache_stats().compiles;
    let g1b = c.compile_regex(patterns[1]).unwrap();
    assert!(!Arc::ptr_eq(&g1, &g1b), "g1 was evicted");
    assert_eq!(c.grammar_cache_stats().compiles, compiles + 1);
    // A grammar larger than the whole limit is returned, not kept.
    let tiny = eager().with_cache_limit_bytes(Some(10));
    let g = tiny.compile_regex(patterns[0]).unwrap();
    assert!(g.memory_bytes() > 10);
    assert_eq!(grammar_bytes(&tiny), 0);
}

#[test]
fn concurrent_compiles_of_one_key_compile_once() {
    let c = GrammarCompiler::new(vocab());
    let schema = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 300}, "tags": {"type": "array", "items": {"type": "string"}},
        "n": {"type": "integer", "minimum": 3, "maximum": 99999}}});
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (c, barrier, schema) = (c.clone(), barrier.clone(), schema.clone());
            std::thread::spawn(move || {
                barrier.wait();
                c.compile_json_schema(&schema, &JsonSchemaOptions::default())
                    .unwrap()
            })
        })
        .collect();
    let grammars: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let stats = c.grammar_cache_stats();
    assert_eq!(stats.compiles, 1, "{stats:?}");
    assert_eq!(stats.hits, threads as u64 - 1);
    assert!(grammars.iter().all(|g| Arc::ptr_eq(g, &grammars[0])));
}

#[test]
fn compiles_run_on_the_callers_thread_pool() {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|i| format!("tokensieve-test-pool-{i}"))
            .build()
            .unwrap(),
    );
    let c = eager()
        .with_cache_enabled(false)
        .with_thread_pool(pool.clone());
    let plain = eager().with_cache_enabled(false);
    let a = c.compile_regex("(ab|c){2,30}x").unwrap();
    let b = plain.compile_regex("(ab|c){2,30}x").unwrap();
    assert_eq!(a.grammar().to_string(), b.grammar().to_string());
    assert_eq!(a.memory_bytes(), b.memory_bytes());
    // Inside the pool's install, compiles work too (no deadlock on a one-thread pool).
    let inner = pool.install(|| c.compile_regex("[a-c]+").unwrap());
    assert!(inner.node_count() > 0);
}
