//! Logits wider than the tokenizer: Qwen3 (151,669 tokens) with a 151,936-wide output layer,
//! and a width that is not a multiple of 32. Padding ids are never allowed and are rejected
//! with a typed reason; ids past the width are out of range; wrong buffer lengths are errors;
//! the bitmask helpers agree with the matcher.
//!
//! Run with `cargo test --release --test vocab wider_logits::`.
#![cfg(feature = "hf")]

use crate::common;

use common::{check_all_tokens, RealTokenizer};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::{Arc, OnceLock};
use tokensieve::mask::{
    allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_words,
    fill_next_token_bitmask_batch, is_token_allowed, BitmaskError,
};
use tokensieve::Vocabulary;
use tokensieve::{CompiledGrammar, GrammarMatcher, MatcherError, TokenRejection, VocabError};

const TOKENIZER_SIZE: usize = 151_669;
const WIDTH: usize = 151_936;
/// Not a multiple of 32: the last word has 20 unused bits.
const ODD_WIDTH: usize = 151_700;

fn qwen(width: usize) -> Option<&'static RealTokenizer> {
    static WIDE: OnceLock<Option<RealTokenizer>> = OnceLock::new();
    static ODD: OnceLock<Option<RealTokenizer>> = OnceLock::new();
    let cell = match width {
        WIDTH => &WIDE,
        ODD_WIDTH => &ODD,
        _ => unreachable!(),
    };
    cell.get_or_init(|| {
        let path = common::tokenizer_path("qwen3")?;
        let vocab = Vocabulary::from_tokenizer_json(&path)
            .unwrap()
            .with_vocab_size(width)
            .unwrap();
        assert_eq!(vocab.tokenizer_size(), TOKENIZER_SIZE);
        assert_eq!(vocab.vocab_size(), width);
        let tok = tokenizers::Tokenizer::from_file(&path).unwrap();
        Some(RealTokenizer::from_parts("qwen3", vocab, tok))
    })
    .as_ref()
}

const DOC: &str = r#"{"id": 7, "name": "Grace Hopper", "langs": ["COBOL", "FLOW-MATIC"], "ok": true, "r": -0.25e-3, "s": "中文 😀 \"q\""}"#;

/// Grammars and texts: JSON, an EBNF grammar with special tokens, and `.*` (whose masks
/// are almost everything: the rejected-list path).
fn inputs(rt: &RealTokenizer) -> Vec<(&'static str, Arc<CompiledGrammar>, Vec<u32>)> {
    let c = &rt.compiler;
    vec![
        (
            "json",
            c.compile_builtin_json().unwrap(),
            rt.encode_exact(DOC),
        ),
        (
            // A special token that is not a stop token, so the stop token still comes after.
            "special tokens",
            c.compile_grammar(r#"root ::= <|im_start|> [a-z]+ "\n" [^<]* <|vision_end|> "\n"?"#)
                .unwrap(),
            rt.encode_pieces(&[
                common::Piece::Special("<|im_start|>"),
                common::Piece::Text("assistant\nHello there, 世界!"),
                common::Piece::Special("<|vision_end|>"),
            ]),
        ),
        (
            "any text",
            c.compile_grammar("root ::= .*").unwrap(),
            rt.encode_exact("Anything goes: {\"x\": [1, 2]} 日本語 🦀\n\tend"),
        ),
    ]
}

/// Set bits among the padding ids and the unused bits of the last word.
fn padding_bits_set(mask: &[u32]) -> Vec<usize> {
    (TOKENIZER_SIZE..mask.len() * 32)
        .filter(|&t| is_token_allowed(mask, t as u32))
        .take(10)
        .collect()
}

#[test]
fn padding_bits_are_never_set() {
    for width in [WIDTH, ODD_WIDTH] {
        let Some(rt) = qwen(width) else { return };
        let words = bitmask_words(width);
        assert_eq!(rt.vocab.bitmask_words(), words);
        assert_eq!(words, width.div_ceil(32));
        for (name, compiled, ids) in inputs(rt) {
            let mut m = GrammarMatcher::new(compiled.clone());
            assert_eq!(m.bitmask_words(), words);
            let mut zeroed = vec![0u32; words];
            let mut dirty = vec![u32::MAX; words];
            for (i, &id) in ids.iter().chain([&rt.stop()]).enumerate() {
                m.fill_next_token_bitmask(&mut zeroed).unwrap();
                // The buffer is overwritten, not or-ed into.
                dirty.iter_mut().for_each(|w| *w = u32::MAX);
                m.fill_next_token_bitmask(&mut dirty).unwrap();
                assert_eq!(
                    zeroed, dirty,
                    "{name} ({width}) step {i}: fill depends on the buffer"
                );
                let set = padding_bits_set(&zeroed);
                assert!(
                    set.is_empty(),
                    "{name} ({width}) step {i}: padding bits set: {set:?}"
                );
                // The full invariant, padding and past-the-width bits included, at a few steps.
                if i % 8 == 0 || i + 1 == ids.len() {
                    let (_, bad) = check_all_tokens(&m, &rt.vocab);
                    assert!(
                        bad.is_empty(),
                        "{name} ({width}) step {i}: {}",
                        bad.iter()
                            .take(5)
                            .map(|b| b.to_string())
                            .collect::<Vec<_>>()
                            .join("; ")
                    );
                }
                assert!(
                    is_token_allowed(&zeroed, id),
                    "{name} step {i}: token {id} masked"
                );
                assert!(m.accept_token(id), "{name} step {i}: token {id} rejected");
            }
            assert!(m.is_terminated());
            m.fill_next_token_bitmask(&mut dirty).unwrap();
            assert!(
                dirty.iter().all(|&w| w == 0),
                "{name}: bits after termination"
            );
        }
    }
}

#[test]
fn padding_and_out_of_range_ids_are_rejected_with_a_reason() {
    let Some(rt) = qwen(WIDTH) else { return };
    for (name, compiled, ids) in inputs(rt) {
        for prefix in [0, ids.len() / 2, ids.len()] {
            let mut m = GrammarMatcher::new(compiled.clone());
            for &id in &ids[..prefix] {
                assert!(m.accept_token(id));
            }
            let steps = m.num_accepted_steps();
            for t in TOKENIZER_SIZE as u32..WIDTH as u32 {
                assert_eq!(
                    m.try_accept_token(t),
                    Err(TokenRejection::Padding {
                        token: t,
                        tokenizer_size: TOKENIZER_SIZE
                    }),
                    "{name} at {prefix}"
                );
                assert!(!m.accept_token(t));
            }
            for t in [WIDTH as u32, WIDTH as u32 + 1, 200_000, 1 << 31, u32::MAX] {
                let e = m.try_accept_token(t).unwrap_err();
                assert_eq!(
                    e,
                    TokenRejection::OutOfRange {
                        token: t,
                        vocab_size: WIDTH
                    },
                    "{name} at {prefix}"
                );
                assert!(e.to_string().contains(&t.to_string()), "{e}");
                assert!(!m.accept_token(t));
            }
            assert_eq!(
                m.num_accepted_steps(),
                steps,
                "{name}: rejected ids changed the state"
            );
            // The real tokens still go through.
            for &id in &ids[prefix..] {
                assert!(m.accept_token(id));
            }
            assert!(m.accept_token(rt.stop()));
        }
    }
    // Narrower than the tokenizer: the last token is dropped (see tests/vocab/narrow_logits.rs);
    // below the eos, a typed error.
    let full = Vocabulary::from_tokenizer_json(common::tokenizer_path("qwen3").unwrap()).unwrap();
    let narrow = full.clone().with_vocab_size(TOKENIZER_SIZE - 1).unwrap();
    assert_eq!(narrow.tokenizer_size(), TOKENIZER_SIZE - 1);
    assert_eq!(narrow.token_bytes(TOKENIZER_SIZE as u32 - 1), None);
    let e = full.with_vocab_size(100_000).unwrap_err();
    assert!(
        matches!(
            e,
            VocabError::VocabSizeTooSmall {
                vocab_size: 100_000,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn wrong_bitmask_length_is_an_error() {
    for width in [WIDTH, ODD_WIDTH] {
        let Some(rt) = qwen(width) else { return };
        let words = bitmask_words(width);
        let compiled = rt.compiler.compile_builtin_json().unwrap();
        let mut m = GrammarMatcher::new(compiled);
        for id in rt.encode_exact("{\"a\": [1, ") {
            assert!(m.accept_token(id));
        }
        let mut right = vec![0u32; words];
        m.fill_next_token_bitmask(&mut right).unwrap();
        // The tokenizer's size and XGrammar-style widths that are off by one word.
        for len in [
            0,
            1,
            words - 1,
            words + 1,
            2 * words,
            TOKENIZER_SIZE.div_ceil(32),
        ] {
            if len == words {
                continue;
            }
            let mut buf = vec![0xA5A5_A5A5u32; len];
            let e = m.fill_next_token_bitmask(&mut buf).unwrap_err();
            assert_eq!(
                e,
                MatcherError::BitmaskLength {
                    expected: words,
                    got: len
                }
            );
            assert!(e.to_string().contains(&words.to_string()), "{e}");
            assert!(
                buf.iter().all(|&w| w == 0xA5A5_A5A5),
                "buffer written on error (len {len})"
            );
        }
        // The matcher is unaffected.
        let mut again = vec![0u32; words];
        m.fill_next_token_bitmask(&mut again).unwrap();
        assert_eq!(again, right);
    }
}

#[test]
fn apply_token_bitmask_sets_minus_infinity_exactly_where_bits_are_clear() {
    let mut rng = StdRng::seed_from_u64(7);
    for width in [WIDTH, ODD_WIDTH] {
        let Some(rt) = qwen(width) else { return };
        let words = bitmask_words(width);
        for (name, compiled, ids) in inputs(rt) {
            let mut m = GrammarMatcher::new(compiled.clone());
            for (i, &id) in ids.iter().enumerate() {
                if i % 5 == 0 {
                    let mut mask = vec![0u32; words];
                    m.fill_next_token_bitmask(&mut mask).unwrap();
                    let logits: Vec<f32> = (0..width).map(|_| rng.gen_range(-30.0..30.0)).collect();
                    let mut out = logits.clone();
                    apply_token_bitmask_inplace(&mut out, &mask).unwrap();
                    for t in 0..width {
                        if is_token_allowed(&mask, t as u32) {
                            assert_eq!(out[t], logits[t], "{name}: allowed token {t} changed");
                        } else {
                            assert_eq!(out[t], f32::NEG_INFINITY, "{name}: masked token {t}");
                        }
                    }
                    // Padding ids always end at −∞.
                    assert!(out[TOKENIZER_SIZE..]
                        .iter()
                        .all(|&l| l == f32::NEG_INFINITY));
                    // Logits narrower than the mask (the tokenizer's size): only those change.
                    let mut narrow = logits[..TOKENIZER_SIZE].to_vec();
                    apply_token_bitmask_inplace(&mut narrow, &mask).unwrap();
                    assert_eq!(narrow[..], out[..TOKENIZER_SIZE]);
                }
                assert!(m.accept_token(id));
            }
        }
        // A bitmask too short for the logits: an error, and nothing changes.
        let mut logits = vec![1.0f32; width];
        let short = vec![0u32; words - 1];
        let e = apply_token_bitmask_inplace(&mut logits, &short).unwrap_err();
        assert!(
            matches!(e, BitmaskError::Length { expected, got, .. } if expected == words && got == words - 1),
            "{e:?}"
        );
        assert!(logits.iter().all(|&l| l == 1.0));
        // All ones allows everything: nothing changes.
        let all = allocate_token_bitmask(1, width);
        assert_eq!(all.len(), words);
        apply_token_bitmask_inplace(&mut logits, &all).unwrap();
        assert!(logits.iter().all(|&l| l == 1.0));
    }
}

#[test]
fn batch_fill_equals_one_by_one() {
    let Some(rt) = qwen(WIDTH) else { return };
    let words = bitmask_words(WIDTH);
    let inputs = inputs(rt);
    let mut rng = StdRng::seed_from_u64(64);
    // 64 matchers in varied states: every grammar, prefixes of every length, a few terminated.
    let mut matchers = Vec::new();
    for i in 0..64 {
        let (_, compiled, ids) = &inputs[i % inputs.len()];
        let mut m = GrammarMatcher::new(compiled.clone());
        let k = if i % 16 == 15 {
            ids.len()
        } else {
            rng.gen_range(0..=ids.len())
        };
        for &id in &ids[..k] {
            assert!(m.accept_token(id));
        }
        if i % 16 == 15 {
            assert!(m.accept_token(rt.stop()));
        }
        matchers.push(m);
    }
    let mut one_by_one = vec![0u32; 64 * words];
    for (m, row) in matchers.iter_mut().zip(one_by_one.chunks_mut(words)) {
        m.fill_next_token_bitmask(row).unwrap();
    }
    // Starts all ones (allocate_token_bitmask): every row must be overwritten.
    let mut batch = allocate_token_bitmask(64, WIDTH);
    assert_eq!(batch.len(), 64 * words);
    assert!(batch.iter().all(|&w| w == u32::MAX));
    fill_next_token_bitmask_batch(&mut matchers, &mut batch).unwrap();
    for (i, (a, b)) in batch
        .chunks(words)
        .zip(one_by_one.chunks(words))
        .enumerate()
    {
        assert!(a == b, "row {i} differs");
    }
    // Twice in a row gives the same (the matchers' scratch space is reused).
    fill_next_token_bitmask_batch(&mut matchers, &mut batch).unwrap();
    assert_eq!(batch, one_by_one);
    // Wrong lengths.
    for len in [0, 64 * words - 1, 63 * words, 65 * words] {
        let mut buf = vec![0u32; len];
        let e = fill_next_token_bitmask_batch(&mut matchers, &mut buf).unwrap_err();
        assert!(
            matches!(e, BitmaskError::Length { expected, got, .. } if expected == 64 * words && got == len),
            "{e:?}"
        );
    }
    // An empty batch is fine.
    fill_next_token_bitmask_batch::<GrammarMatcher>(&mut [], &mut []).unwrap();
    // Matchers of different widths in one batch: a typed error naming the odd one.
    if let Some(odd) = qwen(ODD_WIDTH) {
        let g = odd.compiler.compile_builtin_json().unwrap();
        let mut mixed = vec![matchers[0].clone(), GrammarMatcher::new(g)];
        let mut buf = vec![0u32; 2 * words];
        let e = fill_next_token_bitmask_batch(&mut mixed, &mut buf).unwrap_err();
        assert!(
            matches!(
                e,
                BitmaskError::Matcher {
                    index: 1,
                    source: MatcherError::BitmaskLength { .. }
                }
            ),
            "{e:?}"
        );
    }
}
