//! Concurrency: one `Arc<CompiledGrammar>` drives 64 matchers across rayon threads and
//! gives exactly the masks and accepted tokens of running them one by one; concurrent
//! compiles of the same and of different grammars through one `GrammarCompiler` are safe
//! and give equal grammars (printed IR, node counts, masks along fixed walks).
//!
//! Vocabulary: the embedded o200k_base (feature `tiktoken`), else all single bytes.
//! Run with `cargo test --release --test serving concurrency::`.

use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;
use std::sync::Arc;
use tokensieve::{CompiledGrammar, GrammarCompiler, GrammarMatcher, Precompute, Vocabulary};

fn vocab() -> Arc<Vocabulary> {
    #[cfg(feature = "tiktoken")]
    {
        Arc::new(Vocabulary::o200k_base().unwrap())
    }
    #[cfg(not(feature = "tiktoken"))]
    {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"<eos>".to_vec());
        Arc::new(Vocabulary::from_token_bytes(&tokens, &[256], &[256]).unwrap())
    }
}

const GRAMMARS: &[&str] = &[
    r#"root ::= "{" ws "\"name\":" ws str "," ws "\"tags\":" ws "[" (str ("," ws str)*)? "]" ws "}"
str ::= "\"" [a-z0-9 ]{0,12} "\""
ws ::= [ \n]?"#,
    r#"root ::= expr
expr ::= expr ("+" | "-") term | term
term ::= term "*" factor | factor
factor ::= "(" expr ")" | [0-9]+"#,
    r#"root ::= ("yes" | "no" | "maybe") (", " [A-Za-z]{1,20}){0,5} "."{1,3}"#,
];

/// What one matcher saw: per step, a digest of the mask, and the token taken.
type Trace = Vec<(u64, u32)>;

fn digest(mask: &[u32]) -> u64 {
    // FNV-1a over the words: a mismatch anywhere changes it (with overwhelming odds).
    mask.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &w| {
        (h ^ w as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A seeded random walk: at each step fill the mask, pick an allowed token (rarely a
/// disallowed one, which must be refused), sometimes roll back.
fn walk(g: &Arc<CompiledGrammar>, seed: u64, steps: usize) -> Trace {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut m = GrammarMatcher::new(g.clone());
    let mut mask = vec![0u32; m.bitmask_words()];
    let n = g.vocabulary().vocab_size() as u32;
    let mut trace = Vec::new();
    for _ in 0..steps {
        if m.is_terminated() {
            break;
        }
        m.fill_next_token_bitmask(&mut mask).unwrap();
        let allowed: Vec<u32> = (0..n)
            .filter(|&t| mask[(t / 32) as usize] >> (t % 32) & 1 == 1)
            .collect();
        assert!(!allowed.is_empty(), "seed {seed}: empty mask");
        let token = if rng.gen_bool(0.1) {
            let t = rng.gen_range(0..n);
            assert_eq!(
                allowed.binary_search(&t).is_ok(),
                m.clone().accept_token(t),
                "seed {seed}: mask and accept disagree on {t}"
            );
            t
        } else {
            allowed[rng.gen_range(0..allowed.len())]
        };
        let ok = m.accept_token(token);
        trace.push((digest(&mask), if ok { token } else { u32::MAX }));
        if ok && m.num_accepted_steps() > 2 && rng.gen_bool(0.1) {
            m.rollback(2).unwrap();
            trace.push((0, u32::MAX - 1));
        }
    }
    trace
}

#[test]
fn sixty_four_matchers_on_one_grammar_across_threads() {
    let vocab = vocab();
    for precompute in [Precompute::Eager, Precompute::Lazy] {
        let c = GrammarCompiler::new(vocab.clone()).with_precompute(precompute);
        for src in GRAMMARS {
            // One by one, on a grammar of its own.
            let g1 = c.compile_grammar(src).unwrap();
            let serial: Vec<Trace> = (0..64u64).map(|s| walk(&g1, s, 40)).collect();
            // All at once on another (under `Lazy` its masks are then filled concurrently).
            let g2 = c.compile_grammar(src).unwrap();
            let parallel: Vec<Trace> = (0..64u64)
                .into_par_iter()
                .map(|s| walk(&g2, s, 40))
                .collect();
            // And again on the same `Arc` the serial run warmed.
            let again: Vec<Trace> = (0..64u64)
                .into_par_iter()
                .map(|s| walk(&g1, s, 40))
                .collect();
            let steps: usize = serial.iter().map(Vec::len).sum();
            assert!(steps > 64 * 5, "{src}: only {steps} steps");
            for (i, ((a, b), c)) in serial.iter().zip(&parallel).zip(&again).enumerate() {
                assert_eq!(
                    a, b,
                    "{precompute:?} {src}: matcher {i} differs in parallel"
                );
                assert_eq!(
                    a, c,
                    "{precompute:?} {src}: matcher {i} differs on warm Arc"
                );
            }
        }
    }
}

/// The masks along a fixed walk (the seeded walk of seed 7), for comparing grammars.
fn fingerprint(g: &Arc<CompiledGrammar>) -> (String, usize, Trace) {
    (g.grammar().to_string(), g.node_count(), walk(g, 7, 30))
}

#[test]
fn concurrent_compiles_through_one_compiler_are_equal() {
    let c = GrammarCompiler::new(vocab());
    let json = c.compile_builtin_json().unwrap();
    let reference: Vec<_> = GRAMMARS
        .iter()
        .map(|src| fingerprint(&c.compile_grammar(src).unwrap()))
        .collect();
    let json_ref = fingerprint(&json);
    // 24 jobs: each grammar 6 times plus the built-in JSON grammar 6 times, interleaved.
    let results: Vec<(usize, (String, usize, Trace))> = (0..24usize)
        .into_par_iter()
        .map(|i| {
            let k = i % 4;
            let g = if k == 3 {
                c.compile_builtin_json().unwrap()
            } else {
                c.compile_grammar(GRAMMARS[k]).unwrap()
            };
            (k, fingerprint(&g))
        })
        .collect();
    for (k, fp) in results {
        let want = if k == 3 { &json_ref } else { &reference[k] };
        assert_eq!(&fp.0, &want.0, "grammar {k}: printed IR differs");
        assert_eq!(fp.1, want.1, "grammar {k}: node count differs");
        assert_eq!(fp.2, want.2, "grammar {k}: masks differ");
    }
    // Compiling from several threads at once with clones of the compiler, too.
    let clones: Vec<GrammarCompiler> = (0..4).map(|_| c.clone()).collect();
    std::thread::scope(|s| {
        for (i, cc) in clones.iter().enumerate() {
            let want = &reference[i % 3];
            s.spawn(move || {
                let g = cc.compile_grammar(GRAMMARS[i % 3]).unwrap();
                assert_eq!(&fingerprint(&g), want);
            });
        }
    });
}
