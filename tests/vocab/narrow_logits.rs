//! Logits narrower than the tokenizer (issue 23, item 10): a vision model's tokenizer can
//! hold tokens past its output layer (Llama 3.2 Vision: 128,257 tokens, width 128,256,
//! `<|image|>` at 128,256). `with_vocab_size` below the tokenizer's size drops the tokens at
//! or past the width: they are never in a mask (which has `ceil(width / 32)` words), never
//! in the trie, never stop tokens, not found by their text, and `accept_token` rejects them
//! with [`TokenRejection::OutOfRange`]. A stop token past the width is a typed error.
//!
//! Simulated on the Llama 3.1 tokenizer (128,256 tokens): a width one below its size (the
//! last special token falls off), and a width below its eos; and on a toy vocabulary whose
//! dropped tokens include an ordinary text token, with the mask ⇔ accept invariant on every
//! state reachable in a few steps.
//!
//! Run with `cargo test --release --test vocab narrow_logits::`.
#![cfg(feature = "hf")]

use crate::common;

use common::{check_all_tokens, Piece, RealTokenizer};
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use tokensieve::mask::is_token_allowed;
use tokensieve::{
    CompiledGrammar, GrammarCompiler, GrammarMatcher, TokenRejection, VocabError, Vocabulary,
};

const LLAMA_SIZE: usize = 128_256;
const EOT: u32 = 128_009;
const END_OF_TEXT: u32 = 128_001;

fn llama_full() -> Option<Vocabulary> {
    let path = common::tokenizer_path("llama3_1")?;
    Some(Vocabulary::from_tokenizer_json(path).unwrap())
}

fn llama(width: usize) -> Option<&'static RealTokenizer> {
    static ONE_BELOW: OnceLock<Option<RealTokenizer>> = OnceLock::new();
    static BELOW_EOT: OnceLock<Option<RealTokenizer>> = OnceLock::new();
    let cell = match width {
        w if w == LLAMA_SIZE - 1 => &ONE_BELOW,
        w if w == EOT as usize - 4 => &BELOW_EOT,
        _ => unreachable!(),
    };
    cell.get_or_init(|| {
        let mut vocab = llama_full()?;
        if width <= EOT as usize {
            vocab = vocab.with_stop_tokens(&[END_OF_TEXT]).unwrap();
        }
        let vocab = vocab.with_vocab_size(width).unwrap();
        let path = common::tokenizer_path("llama3_1")?;
        let tok = tokenizers::Tokenizer::from_file(path).unwrap();
        Some(RealTokenizer::from_parts("llama3_1", vocab, tok))
    })
    .as_ref()
}

const DOC: &str =
    r#"{"id": 7, "name": "Grace Hopper", "langs": ["COBOL"], "ok": true, "s": "中文 😀"}"#;

/// Walks `ids` then the stop token: at every step the mask has `ceil(width / 32)` words, no
/// bit at or past the width, the token taken is allowed; every id from the width to the
/// tokenizer's size is rejected as out of range; the whole-vocabulary invariant holds at a
/// few steps.
fn walk(rt: &RealTokenizer, name: &str, g: &Arc<CompiledGrammar>, ids: &[u32], full: usize) {
    let width = rt.vocab.vocab_size();
    let words = width.div_ceil(32);
    let mut m = GrammarMatcher::new(g.clone());
    assert_eq!(m.bitmask_words(), words);
    let mut mask = vec![0u32; words];
    let stop = rt.stop();
    for (i, &id) in ids.iter().chain([&stop]).enumerate() {
        m.fill_next_token_bitmask(&mut mask).unwrap();
        let past: Vec<usize> = (width..words * 32)
            .filter(|&t| is_token_allowed(&mask, t as u32))
            .collect();
        assert!(
            past.is_empty(),
            "{name} step {i}: bits past the width {past:?}"
        );
        for t in width as u32..full as u32 + 2 {
            assert_eq!(
                m.try_accept_token(t),
                Err(TokenRejection::OutOfRange {
                    token: t,
                    vocab_size: width
                }),
                "{name} step {i}"
            );
        }
        if i % 10 == 0 || i == ids.len() {
            let (_, bad) = check_all_tokens(&m, &rt.vocab);
            assert!(
                bad.is_empty(),
                "{name} step {i}: {}",
                bad.iter()
                    .take(5)
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        assert!(is_token_allowed(&mask, id), "{name} step {i}: {id} masked");
        assert!(m.accept_token(id), "{name} step {i}: {id} rejected");
    }
    assert!(m.is_terminated(), "{name}");
}

/// A width one below the tokenizer: its last special token falls off.
#[test]
fn llama_width_one_below_the_tokenizer() {
    let Some(full) = llama_full() else { return };
    assert_eq!(full.tokenizer_size(), LLAMA_SIZE);
    let last =
        String::from_utf8(full.token_bytes(LLAMA_SIZE as u32 - 1).unwrap().to_vec()).unwrap();
    assert!(full.is_special(LLAMA_SIZE as u32 - 1));
    assert_eq!(full.special_token_id(&last), Some(LLAMA_SIZE as u32 - 1));
    let Some(rt) = llama(LLAMA_SIZE - 1) else {
        return;
    };
    let v = &rt.vocab;
    assert_eq!(v.vocab_size(), LLAMA_SIZE - 1);
    assert_eq!(v.tokenizer_size(), LLAMA_SIZE - 1);
    assert_eq!(v.bitmask_words(), (LLAMA_SIZE - 1).div_ceil(32));
    assert_eq!(v.token_bytes(LLAMA_SIZE as u32 - 1), None);
    assert!(!v.is_special(LLAMA_SIZE as u32 - 1));
    assert_eq!(v.special_token_id(&last), None);
    assert!(v.special_tokens().all(|t| (t as usize) < LLAMA_SIZE - 1));
    assert_eq!(
        v.special_tokens().count(),
        full.special_tokens().count() - 1
    );
    assert_eq!(v.stop_tokens(), &[EOT]);
    assert_eq!(v.decode_bytes(&[LLAMA_SIZE as u32 - 1]), b"");
    // The token before it is still there.
    let before = full.token_bytes(LLAMA_SIZE as u32 - 2).unwrap();
    assert_eq!(v.token_bytes(LLAMA_SIZE as u32 - 2), Some(before));

    // A grammar naming the dropped token is a compile error naming it.
    let e = rt
        .compiler
        .compile_grammar(&format!("root ::= \"a\" {last}"))
        .unwrap_err();
    assert!(e.to_string().contains(&last), "{e}");

    let c = &rt.compiler;
    let special = format!(
        "root ::= <|start_header_id|> [a-z]+ <|end_header_id|> [^<]* {}",
        String::from_utf8_lossy(full.token_bytes(LLAMA_SIZE as u32 - 2).unwrap())
    );
    let cases = [
        (
            "json",
            c.compile_builtin_json().unwrap(),
            rt.encode_exact(DOC),
        ),
        (
            "any text",
            c.compile_grammar("root ::= .*").unwrap(),
            rt.encode_exact("Any text: 日本語 🦀\n"),
        ),
        (
            "special tokens",
            c.compile_grammar(&special).unwrap(),
            rt.encode_pieces(&[
                Piece::Special("<|start_header_id|>"),
                Piece::Text("assistant"),
                Piece::Special("<|end_header_id|>"),
                Piece::Text("\n\nHello"),
                Piece::Token(
                    std::str::from_utf8(full.token_bytes(LLAMA_SIZE as u32 - 2).unwrap()).unwrap(),
                ),
            ]),
        ),
    ];
    for (name, g, ids) in &cases {
        walk(rt, name, g, ids, LLAMA_SIZE);
    }
}

/// A width below the eos: a typed error, until the stop tokens are narrowed first.
#[test]
fn llama_width_below_a_stop_token() {
    let Some(full) = llama_full() else { return };
    assert_eq!(full.stop_tokens(), &[EOT]);
    let width = EOT as usize - 4;
    let e = full.clone().with_vocab_size(width).unwrap_err();
    assert!(
        matches!(e, VocabError::VocabSizeTooSmall { vocab_size, stop_token: EOT } if vocab_size == width),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&width.to_string())
            && msg.contains(&EOT.to_string())
            && msg.contains("with_stop_tokens"),
        "{msg}"
    );
    // Either stop token past the width is refused, whichever the other is.
    let e = full
        .clone()
        .with_stop_tokens(&[END_OF_TEXT, EOT])
        .unwrap()
        .with_vocab_size(width)
        .unwrap_err();
    assert!(
        matches!(
            e,
            VocabError::VocabSizeTooSmall {
                stop_token: EOT,
                ..
            }
        ),
        "{e:?}"
    );

    let Some(rt) = llama(width) else { return };
    let v = &rt.vocab;
    assert_eq!(v.vocab_size(), width);
    assert_eq!(v.bitmask_words(), width.div_ceil(32));
    assert_eq!(v.stop_tokens(), &[END_OF_TEXT]);
    assert_eq!(v.special_token_id("<|eot_id|>"), None);
    assert_eq!(v.special_token_id("<|end_of_text|>"), Some(END_OF_TEXT));
    // Stop tokens set after narrowing must be below the width.
    let e = (**v).clone().with_stop_tokens(&[EOT]).unwrap_err();
    assert!(
        matches!(e, VocabError::TokenOutOfRange { id: EOT, size } if size == width),
        "{e:?}"
    );
    assert!(rt
        .compiler
        .compile_grammar("root ::= \"a\" <|eot_id|>")
        .is_err());
    let g = rt.compiler.compile_builtin_json().unwrap();
    walk(rt, "json", &g, &rt.encode_exact(DOC), LLAMA_SIZE);
}

// ---------------------------------------------------------------------------------------
// A toy vocabulary: every state reachable in a few steps.

/// Tokens: 0 `a`, 1 `b`, 2 `ab`, 3 `</s>` (special, stop), 4 `<img>` (special), 5 `abba`
/// (ordinary), 6 `<pad>` (special).
fn toy(width: usize) -> Arc<Vocabulary> {
    let tokens: [&[u8]; 7] = [b"a", b"b", b"ab", b"</s>", b"<img>", b"abba", b"<pad>"];
    let v = Vocabulary::from_token_bytes(&tokens, &[3, 4, 6], &[3]).unwrap();
    Arc::new(v.with_vocab_size(width).unwrap())
}

/// Every state reachable in `depth` steps from `m`: the mask ⇔ accept invariant holds,
/// no bit at or past the width is set, and ids from the width on are out of range.
fn explore(
    m: &GrammarMatcher,
    v: &Vocabulary,
    depth: usize,
    seen: &mut HashSet<Vec<u8>>,
    path: &mut Vec<u32>,
) {
    let (allowed, bad) = check_all_tokens(m, v);
    assert!(bad.is_empty(), "after {path:?}: {}", bad[0]);
    for t in (v.vocab_size() as u32..8).filter(|_| !m.is_terminated()) {
        let mut f = m.clone();
        assert_eq!(
            f.try_accept_token(t),
            Err(TokenRejection::OutOfRange {
                token: t,
                vocab_size: v.vocab_size()
            }),
            "after {path:?}"
        );
    }
    if depth == 0 || !seen.insert(v.decode_bytes(path)) {
        return;
    }
    for t in allowed {
        let mut f = m.clone();
        assert!(f.accept_token(t));
        path.push(t);
        explore(&f, v, depth - 1, seen, path);
        path.pop();
    }
}

#[test]
fn toy_width_drops_the_tokens_past_it() {
    let narrow = toy(4);
    assert_eq!(narrow.tokenizer_size(), 4);
    assert_eq!(narrow.bitmask_words(), 1);
    assert_eq!(narrow.special_token_id("<img>"), None);
    assert_eq!(narrow.special_token_id("</s>"), Some(3));
    assert_eq!(narrow.token_bytes(5), None);
    assert_eq!(narrow.special_tokens().collect::<Vec<_>>(), vec![3]);
    let c = GrammarCompiler::new(narrow.clone());
    // Named by text or by id, a dropped token is unknown.
    assert!(c.compile_grammar(r#"root ::= "a" <img>"#).is_err());
    assert!(c.compile_grammar(r#"root ::= "a" <[4]>"#).is_err());
    assert!(c
        .compile_structural_tag(r#"{"type": "token", "token": 4}"#)
        .is_err());
    // Before narrowing, the same grammar takes `<img>` and `abba`.
    let wide = toy(7);
    let g = GrammarCompiler::new(wide)
        .compile_grammar(r#"root ::= ("a" | "b")* <img>?"#)
        .unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(m.accept_token(5) && m.accept_token(4) && m.accept_token(3));

    for grammar in [
        r#"root ::= ("a" | "b")* "abba"?"#,
        r#"root ::= "ab" "ba"+ | "a"* "#,
        r#"root ::= [ab]{2,5}"#,
    ] {
        let g = c.compile_grammar(grammar).unwrap();
        let m = GrammarMatcher::new(g.clone());
        explore(&m, &narrow, 5, &mut HashSet::new(), &mut Vec::new());
        // The text of a dropped token is still reachable through the tokens left.
        let mut m = GrammarMatcher::new(g);
        if m.accept_string("abba") {
            assert!(m.accept_token(3));
        }
    }
    // A width below the stop token is refused; without stop tokens any width goes.
    let v = Vocabulary::from_token_bytes(&[b"a".as_slice(), b"</s>"], &[1], &[1]).unwrap();
    let e = v.clone().with_vocab_size(1).unwrap_err();
    assert!(
        matches!(
            e,
            VocabError::VocabSizeTooSmall {
                vocab_size: 1,
                stop_token: 1
            }
        ),
        "{e:?}"
    );
    let v = v.with_stop_tokens(&[]).unwrap().with_vocab_size(1).unwrap();
    assert_eq!(v.tokenizer_size(), 1);
    assert_eq!(v.special_tokens().count(), 0);
    // Narrowing then widening pads: the dropped tokens do not come back.
    let v = v.with_vocab_size(40).unwrap();
    assert_eq!(
        (v.tokenizer_size(), v.vocab_size(), v.bitmask_words()),
        (1, 40, 2)
    );
    assert_eq!(v.token_bytes(1), None);
}
