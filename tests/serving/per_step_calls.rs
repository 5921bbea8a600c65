//! The per-step calls of serving engines on the matcher (issue 26): filling one row of a
//! `[batch, words]` bitmask, a batch fill by (matcher, row) pairs, `validate_tokens`
//! against accept-and-rollback on random drafts over MaskBench schemas (Llama 3.1), and the
//! matcher options (`override_stop_tokens`, `terminate_without_stop_token`,
//! `max_rollback_tokens`) with the mask/accept invariant checked over the whole
//! vocabulary at every step under each of them.

use crate::common;
use crate::maskbench;

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use tokensieve::mask::{
    batch_fill_next_token_bitmask, batch_fill_next_token_bitmask_with, BitmaskError,
};
use tokensieve::{
    CompiledGrammar, GrammarCompiler, GrammarMatcher, MatcherError, MatcherOptions, Precompute,
    TokenRejection, Vocabulary,
};

/// Tokens: a, b, ab, x, <eos> (special, stop), <eot> (special), z (a non-special stop
/// token), xa; logits 70 wide (3 words a row, so that lengths can be wrong).
fn small_vocab() -> Vocabulary {
    let tokens: Vec<&[u8]> = vec![b"a", b"b", b"ab", b"x", b"<eos>", b"<eot>", b"z", b"xa"];
    Vocabulary::from_token_bytes(&tokens, &[4, 5], &[4, 6])
        .unwrap()
        .with_vocab_size(70)
        .unwrap()
}

const A: u32 = 0;
const B: u32 = 1;
const AB: u32 = 2;
const X: u32 = 3;
const EOS: u32 = 4;
const EOT: u32 = 5;
const Z: u32 = 6;
const XA: u32 = 7;

fn compile(ebnf: &str) -> Arc<CompiledGrammar> {
    GrammarCompiler::new(small_vocab())
        .compile_grammar(ebnf)
        .unwrap()
}

fn mask_of(m: &GrammarMatcher) -> Vec<u32> {
    let mut mask = vec![0u32; m.bitmask_words()];
    m.clone().fill_next_token_bitmask(&mut mask).unwrap();
    mask
}

fn allowed(m: &GrammarMatcher) -> Vec<u32> {
    let mask = mask_of(m);
    (0..m.compiled_grammar().vocabulary().vocab_size() as u32)
        .filter(|&t| tokensieve::mask::is_token_allowed(&mask, t))
        .collect()
}

/// The invariant over the whole vocabulary, on random walks of `m`'s grammar.
fn walk_checking(m: &GrammarMatcher, seed: u64, steps: usize) {
    let vocab = m.compiled_grammar().vocabulary().clone();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut m = m.clone();
    for _ in 0..steps {
        let (ok, bad) = common::check_all_tokens(&m, &vocab);
        assert!(bad.is_empty(), "options {:?}: {}", m.options(), bad[0]);
        if ok.is_empty() {
            break;
        }
        let t = ok[rng.gen_range(0..ok.len())];
        assert!(m.accept_token(t));
    }
}

#[test]
fn fill_at_writes_one_row_and_checks_the_buffer() {
    let g = compile(r#"root ::= "a" "b"+"#);
    let mut m = GrammarMatcher::new(g);
    let words = m.bitmask_words();
    let single = mask_of(&m);
    let mut batch = vec![0xdead_beef_u32; 3 * words];
    m.fill_next_token_bitmask_at(&mut batch, 1).unwrap();
    assert_eq!(&batch[words..2 * words], &single[..]);
    assert!(batch[..words].iter().all(|&w| w == 0xdead_beef));
    assert!(batch[2 * words..].iter().all(|&w| w == 0xdead_beef));
    assert_eq!(
        m.fill_next_token_bitmask_at(&mut batch, 3),
        Err(MatcherError::RowOutOfRange { row: 3, rows: 3 })
    );
    let mut short = vec![0u32; 2 * words + 1];
    let err = m.fill_next_token_bitmask_at(&mut short, 0).unwrap_err();
    assert_eq!(
        err,
        MatcherError::BatchBitmaskLength {
            words,
            got: 2 * words + 1
        }
    );
    assert!(err.to_string().contains("multiple"), "{err}");
    assert!(matches!(
        m.fill_next_token_bitmask_at(&mut [], 0),
        Err(MatcherError::BatchBitmaskLength { .. })
    ));
}

#[test]
fn batch_fill_by_rows_fills_only_the_named_rows() {
    let g = compile(r#"root ::= ("a" | "x") "b"* "ab"?"#);
    let mut ms: Vec<GrammarMatcher> = (0..3).map(|_| GrammarMatcher::new(g.clone())).collect();
    assert!(ms[1].accept_token(A));
    assert!(ms[2].accept_token(X) && ms[2].accept_token(B));
    let expected: Vec<Vec<u32>> = ms.iter().map(mask_of).collect();
    assert_ne!(expected[0], expected[1]);
    let words = ms[0].bitmask_words();
    let mut batch = vec![7u32; 4 * words];
    let rows = [3usize, 0, 2];
    batch_fill_next_token_bitmask(ms.iter_mut().zip(rows), &mut batch).unwrap();
    for (i, &r) in rows.iter().enumerate() {
        assert_eq!(
            &batch[r * words..(r + 1) * words],
            &expected[i][..],
            "row {r}"
        );
    }
    assert!(
        batch[words..2 * words].iter().all(|&w| w == 7),
        "row 1 untouched"
    );
    // Typed errors, nothing written.
    let mut fresh = vec![7u32; 4 * words];
    let err = batch_fill_next_token_bitmask(ms.iter_mut().zip([0, 4, 1]), &mut fresh);
    assert_eq!(
        err,
        Err(BitmaskError::RowOutOfRange {
            index: 1,
            row: 4,
            rows: 4
        })
    );
    let err = batch_fill_next_token_bitmask(ms.iter_mut().zip([2, 1, 2]), &mut fresh);
    assert_eq!(err, Err(BitmaskError::DuplicateRow { index: 2, row: 2 }));
    assert!(fresh.iter().all(|&w| w == 7));
    let mut odd = vec![0u32; 4 * words + 1];
    assert!(matches!(
        batch_fill_next_token_bitmask(ms.iter_mut().zip([0, 1, 2]), &mut odd),
        Err(BitmaskError::Length { .. })
    ));
}

/// A batch of matchers of three grammars at different states, filled into rows in reverse
/// order by the calling thread alone, with a pool of one helper and with three: every row
/// equals the matcher's own mask, whichever thread filled it.
#[test]
fn batch_fill_with_helpers_equals_one_matcher_at_a_time() {
    let grammars = [
        compile(r#"root ::= ("a" | "x") "b"* "ab"?"#),
        compile(r#"root ::= "x" "a"* "b""#),
        compile(r#"root ::= ("ab" | "b")+"#),
    ];
    let steps: [&[u32]; 4] = [&[], &[A], &[X, B], &[B, B]];
    let mut ms: Vec<GrammarMatcher> = Vec::new();
    for i in 0..67 {
        let mut m = GrammarMatcher::new(grammars[i % 3].clone());
        for &t in steps[i % 4] {
            // Tokens the grammar refuses leave the matcher where it was.
            m.accept_token(t);
        }
        ms.push(m);
    }
    let expected: Vec<Vec<u32>> = ms.iter().map(mask_of).collect();
    let words = ms[0].bitmask_words();
    let n = ms.len();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let three = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for helpers in [None, Some(&one), Some(&three)] {
        let threads = 1 + helpers.map_or(0, |p| p.current_num_threads());
        let mut batch = vec![7u32; (n + 1) * words];
        let rows = (0..n).map(|i| n - i);
        batch_fill_next_token_bitmask_with(helpers, ms.iter_mut().zip(rows), &mut batch).unwrap();
        for (i, want) in expected.iter().enumerate() {
            let r = n - i;
            assert_eq!(
                &batch[r * words..(r + 1) * words],
                &want[..],
                "row {r}, {threads} threads"
            );
        }
        assert!(batch[..words].iter().all(|&w| w == 7), "row 0 untouched");
        let err =
            batch_fill_next_token_bitmask_with(helpers, ms.iter_mut().zip([0, 0]), &mut batch);
        assert_eq!(err, Err(BitmaskError::DuplicateRow { index: 1, row: 0 }));
    }
}

#[test]
fn override_stop_tokens_replace_the_vocabularys() {
    let g = compile(r#"root ::= "a" "x"?"#);
    let options = MatcherOptions {
        override_stop_tokens: Some(vec![EOT]),
        ..Default::default()
    };
    let mut m = GrammarMatcher::with_options(g.clone(), &options).unwrap();
    assert_eq!(m.stop_tokens(), &[EOT]);
    assert!(m.accept_token(A));
    assert_eq!(allowed(&m), vec![X, EOT]);
    // The vocabulary's stop tokens no longer stop: a special one is a special token, the
    // plain one ("z") is not text either.
    assert_eq!(
        m.try_accept_token(EOS),
        Err(TokenRejection::SpecialNotAllowed { token: EOS })
    );
    assert_eq!(
        m.try_accept_token(Z),
        Err(TokenRejection::StopOverridden { token: Z })
    );
    assert!(m.accept_token(EOT));
    assert!(m.is_terminated());

    // A text token made a stop token only ever stops: "x" ends the output after "a", and
    // is never the grammar's "x".
    let options = MatcherOptions {
        override_stop_tokens: Some(vec![X]),
        ..Default::default()
    };
    let g2 = compile(r#"root ::= "x" "a" | "a" "x"?"#);
    let mut m = GrammarMatcher::with_options(g2, &options).unwrap();
    assert_eq!(
        allowed(&m),
        vec![A, XA],
        "\"xa\" is text, \"x\" alone only stops"
    );
    assert_eq!(
        m.try_accept_token(X),
        Err(TokenRejection::StopNotAllowed { token: X })
    );
    assert!(m.accept_token(A));
    assert_eq!(allowed(&m), vec![X]);
    assert!(m.accept_token(X));
    assert!(m.is_terminated());

    let err = GrammarMatcher::with_options(
        g,
        &MatcherOptions {
            override_stop_tokens: Some(vec![99]),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        err,
        MatcherError::StopTokenOutOfRange {
            token: 99,
            tokenizer_size: 8
        }
    );
}

#[test]
fn terminate_without_stop_token_ends_with_the_grammar() {
    let options = MatcherOptions {
        terminate_without_stop_token: true,
        ..Default::default()
    };
    let g = compile(r#"root ::= "a" "b"*"#);
    let mut m = GrammarMatcher::with_options(g, &options).unwrap();
    assert!(!m.is_terminated() && !m.is_completed());
    assert!(m.accept_token(A));
    // Done with the grammar: terminated, yet "b" may still continue it; no stop token.
    assert!(m.is_terminated() && m.is_completed());
    assert_eq!(allowed(&m), vec![B]);
    assert_eq!(
        m.try_accept_token(EOS),
        Err(TokenRejection::StopDisabled { token: EOS })
    );
    assert!(m.accept_token(B));
    assert!(m.is_terminated());
    m.rollback(2).unwrap();
    assert!(!m.is_terminated());

    // Where nothing can continue, the mask is empty.
    let g = compile(r#"root ::= "ab""#);
    let mut m = GrammarMatcher::with_options(g, &options).unwrap();
    assert!(m.accept_token(AB));
    assert!(m.is_terminated());
    assert!(allowed(&m).is_empty());
    assert!(mask_of(&m).iter().all(|&w| w == 0));
}

#[test]
fn max_rollback_tokens_bounds_rollback_but_not_validate() {
    let g = compile(r#"root ::= ("a" | "b")*"#);
    let options = MatcherOptions {
        max_rollback_tokens: Some(2),
        ..Default::default()
    };
    let mut m = GrammarMatcher::with_options(g, &options).unwrap();
    for t in [A, B, A] {
        assert!(m.accept_token(t));
    }
    assert_eq!(m.num_accepted_steps(), 2);
    assert_eq!(
        m.rollback(3),
        Err(MatcherError::Rollback {
            requested: 3,
            available: 2
        })
    );
    assert_eq!(m.validate_tokens(&[A, B, A, B, X]), 4);
    assert_eq!(m.num_accepted_steps(), 2);
    m.rollback(2).unwrap();
    assert_eq!(m.num_accepted_steps(), 1);
}

#[test]
fn the_invariant_holds_under_every_option() {
    let grammars = [
        r#"root ::= "a" "x"?"#,
        r#"root ::= ("a" | "x" "b")* <eot>?"#,
        r#"root ::= "x" "a" | "a" ("b" | "z")*"#,
        r#"root ::= "ab" | "a" <eos>"#,
    ];
    let mut options = Vec::new();
    for stop in [None, Some(vec![EOT]), Some(vec![X, Z]), Some(vec![])] {
        for twst in [false, true] {
            options.push(MatcherOptions {
                override_stop_tokens: stop.clone(),
                terminate_without_stop_token: twst,
                max_rollback_tokens: Some(1),
            });
        }
    }
    for (gi, src) in grammars.iter().enumerate() {
        let g = compile(src);
        for (oi, o) in options.iter().enumerate() {
            let m = GrammarMatcher::with_options(g.clone(), o).unwrap();
            for seed in 0..6 {
                walk_checking(&m, (gi * 100 + oi * 10) as u64 + seed, 12);
            }
        }
    }
}

/// `validate_tokens` equals accepting one by one on a fork, and leaves the state as it was
/// (mask, steps, termination), on drafts made from valid MaskBench instances with random
/// tokens swapped in, a stop token and tokens after it.
#[cfg(feature = "hf")]
#[test]
fn validate_tokens_equals_accept_and_rollback_on_random_drafts() {
    let Some(rt) = common::RealTokenizer::load("llama3_1") else {
        return;
    };
    let Some(records) = maskbench::bench_sample(60) else {
        return;
    };
    let compiler = rt.compiler.clone().with_precompute(Precompute::Lazy);
    let vocab_size = rt.vocab.vocab_size() as u32;
    let mut rng = StdRng::seed_from_u64(26);
    let (mut drafts, mut partial, mut full) = (0, 0, 0);
    for rec in records
        .iter()
        .filter(|r| !r.valid.is_empty() && r.schema.to_string().len() < 4000)
    {
        let Ok(g) = compiler.compile_json_schema(&rec.schema, &maskbench::bench_options()) else {
            continue;
        };
        let text = &rec.valid[0];
        let mut ids = rt.encode_exact(text);
        if !GrammarMatcher::new(g.clone()).accept_string(text) {
            continue;
        }
        ids.push(rt.stop());
        for _ in 0..8 {
            let p = rng.gen_range(0..ids.len());
            let mut m = GrammarMatcher::new(g.clone());
            for &t in &ids[..p] {
                assert!(m.accept_token(t), "{}", rec.name);
            }
            let k = rng.gen_range(1..=8).min(ids.len() - p + 3);
            let mut draft: Vec<u32> = ids[p..].iter().copied().take(k).collect();
            while draft.len() < k {
                draft.push(rng.gen_range(0..vocab_size));
            }
            if rng.gen_bool(0.5) {
                let j = rng.gen_range(0..draft.len());
                draft[j] = rng.gen_range(0..vocab_size);
            }
            let before_mask = mask_of(&m);
            let before_steps = m.num_accepted_steps();
            let before_term = m.is_terminated();
            let mut fork = m.clone();
            let expected = draft.iter().take_while(|&&t| fork.accept_token(t)).count();
            let got = m.validate_tokens(&draft);
            assert_eq!(got, expected, "{}: draft {draft:?} at {p}", rec.name);
            assert_eq!(mask_of(&m), before_mask, "{}: mask changed", rec.name);
            assert_eq!(m.num_accepted_steps(), before_steps);
            assert_eq!(m.is_terminated(), before_term);
            drafts += 1;
            if got == draft.len() {
                full += 1;
            } else if got > 0 {
                partial += 1;
            }
        }
    }
    eprintln!("{drafts} drafts: {full} accepted whole, {partial} in part");
    assert!(drafts >= 200, "only {drafts} drafts");
    assert!(
        full >= 20 && partial >= 20,
        "{full} whole, {partial} in part"
    );
}
