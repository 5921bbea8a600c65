//! The start of a SentencePiece output (issue 23, item 11): with
//! `Vocabulary::with_strip_output_start(true)`, the first token of the output is read as the
//! tokenizer's decoder writes it there. On Llama 2 (a `Prepend("▁")` normalizer, a decoder
//! that strips one leading space of the output) the regex `Pizza|Pasta` then takes the
//! tokens a model naturally writes first (`▁P` `izza`, decoded `Pizza`); off (the
//! default), only `P` `izza` passes. Gemma 3's decoder strips nothing, so the option changes
//! nothing there.
//!
//! - Start forms agree with the `tokenizers` crate's `decode` for every token of Llama 2 and
//!   Gemma 3, and `decode_output` with `decode` on whole outputs.
//! - The mask ⇔ accept invariant over the whole vocabulary at the first steps, option on and
//!   off, on several grammars, and after a rollback to the start.
//! - A toy vocabulary (start forms given by hand, errors), a `Metaspace` decoder, and the
//!   interplay with a narrower logits width.
//!
//! Run with `cargo test --release --test vocab output_start::`.
#![cfg(feature = "hf")]

use crate::common;

use common::check_all_tokens;
use std::sync::Arc;
use tokenizers::Tokenizer;
use tokensieve::{GrammarCompiler, GrammarMatcher, VocabError, Vocabulary};

struct Loaded {
    /// Option off.
    off: GrammarCompiler,
    /// Option on.
    on: GrammarCompiler,
    tok: Tokenizer,
}

fn load(name: &str) -> Option<Loaded> {
    let path = common::tokenizer_path(name)?;
    let v = Vocabulary::from_tokenizer_json(&path).unwrap();
    assert!(!v.strips_output_start(), "off by default");
    let on = Arc::new(v.clone().with_strip_output_start(true));
    Some(Loaded {
        off: GrammarCompiler::new(v),
        on: GrammarCompiler::new(on),
        tok: Tokenizer::from_file(&path).unwrap(),
    })
}

fn id(t: &Tokenizer, piece: &str) -> u32 {
    t.token_to_id(piece)
        .unwrap_or_else(|| panic!("no token {piece:?}"))
}

/// Accepts `ids` then the stop token; true when every one is accepted and it terminates.
fn runs(c: &GrammarCompiler, grammar: &str, ids: &[u32]) -> bool {
    let g = c.compile_regex(grammar).unwrap();
    let mut m = GrammarMatcher::new(g);
    let stop = c.vocabulary().stop_tokens()[0];
    ids.iter().all(|&t| m.accept_token(t)) && m.accept_token(stop) && m.is_terminated()
}

/// The whole-vocabulary invariant at each of the first `steps` steps of `ids`.
fn invariant(c: &GrammarCompiler, g: &Arc<tokensieve::CompiledGrammar>, ids: &[u32], what: &str) {
    let mut m = GrammarMatcher::new(g.clone());
    for (i, &t) in ids.iter().enumerate() {
        let (allowed, bad) = check_all_tokens(&m, c.vocabulary());
        assert!(
            bad.is_empty(),
            "{what} step {i}: {}",
            bad.iter()
                .take(5)
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
        assert!(
            allowed.contains(&t),
            "{what} step {i}: token {t} not allowed"
        );
        assert!(m.accept_token(t), "{what} step {i}");
    }
    let (_, bad) = check_all_tokens(&m, c.vocabulary());
    assert!(bad.is_empty(), "{what} at the end: {}", bad[0]);
}

#[test]
fn llama2_start_forms_are_what_the_decoder_writes() {
    let Some(l) = load("llama2") else { return };
    let v = l.on.vocabulary();
    let (p, izza, space, spaces, byte_space) = (
        id(&l.tok, "▁P"),
        id(&l.tok, "izza"),
        id(&l.tok, "▁"),
        id(&l.tok, "▁▁"),
        id(&l.tok, "<0x20>"),
    );
    assert_eq!(v.token_bytes(p), Some(&b" P"[..]));
    assert_eq!(v.start_bytes(p), Some(&b"P"[..]));
    assert_eq!(v.start_bytes(izza), None);
    assert_eq!(v.start_bytes(space), Some(&b""[..]));
    assert_eq!(v.start_bytes(spaces), Some(&b" "[..]));
    // The decoder's Strip acts on the joined text: a byte-fallback space is stripped too.
    assert_eq!(v.start_bytes(byte_space), Some(&b""[..]));
    // Every token alone, decoded by the tokenizer: its start form, or else its bytes.
    let mut with_form = 0;
    for t in 0..v.tokenizer_size() as u32 {
        if v.is_special(t) {
            assert_eq!(v.start_bytes(t), None);
            continue;
        }
        let bytes = v.token_bytes(t).unwrap();
        let first = v.start_bytes(t).unwrap_or(bytes);
        with_form += v.start_bytes(t).is_some() as usize;
        assert_eq!(
            v.start_bytes(t).is_some(),
            bytes.first() == Some(&b' '),
            "{t}"
        );
        if let Ok(text) = std::str::from_utf8(first) {
            assert_eq!(l.tok.decode(&[t], false).unwrap(), text, "token {t}");
        }
        // As the second token, the usual bytes: decode(P, t) = "P" + bytes.
        let both = l.tok.decode(&[id(&l.tok, "P"), t], false).unwrap();
        if let Ok(text) = std::str::from_utf8(bytes) {
            assert_eq!(both, format!("P{text}"), "token {t} second");
        }
    }
    assert_eq!(with_form, v.start_form_tokens().len());
    assert!(with_form > 15_000, "{with_form}");

    // decode_output is decode, on what the tokenizer writes for plain texts.
    for text in [
        "Pizza",
        "Hello world",
        "  two spaces",
        "{\"a\": 1}",
        " x",
        "\n",
    ] {
        let ids = l.tok.encode(text, false).unwrap().get_ids().to_vec();
        let want = l.tok.decode(&ids, false).unwrap();
        assert_eq!(v.decode_output(&ids), want.as_bytes(), "{text:?}");
        // Off, decode_output is decode_bytes: the dummy prefix's space stays.
        assert_eq!(
            l.off.vocabulary().decode_output(&ids),
            l.off.vocabulary().decode_bytes(&ids)
        );
    }
    assert_eq!(v.decode_output(&[p, izza]), b"Pizza");
    assert_eq!(v.decode_output(&[space, p, izza]), b" Pizza");
    assert_eq!(l.tok.decode(&[space, p, izza], false).unwrap(), " Pizza");
    assert_eq!(v.decode_output(&[]), b"");
}

/// `ids` (whose first token begins with the dummy prefix's space) without that space.
fn without_prefix(v: &Vocabulary, t: &Tokenizer, ids: &[u32]) -> Vec<u32> {
    let first = v.token_bytes(ids[0]).unwrap();
    assert_eq!(first[0], b' ');
    let rest = std::str::from_utf8(&first[1..]).unwrap();
    let mut out: Vec<u32> = if rest.is_empty() {
        Vec::new()
    } else {
        vec![id(t, &rest.replace(' ', "▁"))]
    };
    out.extend_from_slice(&ids[1..]);
    out
}

#[test]
fn llama2_pizza_first_tokens() {
    let Some(l) = load("llama2") else { return };
    let t = &l.tok;
    let natural = t.encode("Pizza", false).unwrap().get_ids().to_vec();
    let (p, cap_p, izza) = (id(t, "▁P"), id(t, "P"), id(t, "izza"));
    assert_eq!(natural, vec![p, izza], "the model's own tokens for Pizza");
    let re = "Pizza|Pasta";
    // Off: only the spelling without the dummy prefix passes.
    assert!(!runs(&l.off, re, &natural));
    assert!(runs(&l.off, re, &[cap_p, izza]));
    // On: both, and Pasta's natural tokens too.
    assert!(runs(&l.on, re, &natural));
    assert!(runs(&l.on, re, &[cap_p, izza]));
    let pasta = t.encode("Pasta", false).unwrap().get_ids().to_vec();
    assert!(runs(&l.on, re, &pasta));
    // Only the first token loses its space: a second `▁P` is " P".
    let space = id(t, "▁");
    assert!(!runs(&l.on, re, &[space, p, izza]));
    assert!(runs(&l.on, re, &[space, cap_p, izza]));
    assert!(runs(&l.on, " Pizza", &[space, p, izza]));
    // The decoder always strips: `▁P` first is never " P".
    assert!(!runs(&l.on, " Pizza", &natural));
    assert!(runs(&l.off, " Pizza", &natural));

    // The invariant over all 32,000 tokens at the first steps, on and off.
    let ebnf = r#"root ::= "Pizza" | " "? "Pasta" [!.]? | [a-z]+ "#;
    let json_ids = t
        .encode("{\"a\": [1, 2]}", false)
        .unwrap()
        .get_ids()
        .to_vec();
    for (name, c) in [("on", &l.on), ("off", &l.off)] {
        let cases = [
            (
                "regex",
                c.compile_regex(re).unwrap(),
                if name == "on" {
                    natural.clone()
                } else {
                    vec![cap_p, izza]
                },
            ),
            (
                "ebnf",
                c.compile_grammar(ebnf).unwrap(),
                t.encode("Pasta!", false).unwrap().get_ids().to_vec(),
            ),
            (
                "any text",
                c.compile_grammar("root ::= .*").unwrap(),
                t.encode("  Any text", false).unwrap().get_ids().to_vec(),
            ),
            (
                "json",
                c.compile_builtin_json().unwrap(),
                if name == "on" {
                    json_ids.clone()
                } else {
                    without_prefix(c.vocabulary(), t, &json_ids)
                },
            ),
        ];
        for (what, g, ids) in &cases {
            // (Off, the ebnf case reads " Pasta!", which it allows too.)
            invariant(c, g, &ids[..ids.len().min(3)], &format!("{name} {what}"));
        }
    }
    // A rollback to the start reads the first token by its start form again; reset too.
    let g = l.on.compile_regex(re).unwrap();
    let mut m = GrammarMatcher::new(g);
    let v = l.on.vocabulary();
    let mut at_start = vec![0u32; v.bitmask_words()];
    m.fill_next_token_bitmask(&mut at_start).unwrap();
    assert!(m.accept_token(p));
    let mut second = vec![0u32; v.bitmask_words()];
    m.fill_next_token_bitmask(&mut second).unwrap();
    assert!(tokensieve::mask::is_token_allowed(&second, izza));
    m.rollback(1).unwrap();
    let mut again = vec![0u32; v.bitmask_words()];
    m.fill_next_token_bitmask(&mut again).unwrap();
    assert_eq!(again, at_start);
    assert!(m.accept_token(p) && m.accept_token(izza));
    m.reset();
    m.fill_next_token_bitmask(&mut again).unwrap();
    assert_eq!(again, at_start);
    // The `▁` token is accepted first whatever the grammar: it writes nothing.
    assert!(tokensieve::mask::is_token_allowed(&at_start, space));
    assert!(!tokensieve::mask::is_token_allowed(&at_start, id(t, "▁▁")));
}

#[test]
fn gemma3_decoder_strips_nothing() {
    let Some(l) = load("gemma3") else { return };
    let t = &l.tok;
    let v = l.on.vocabulary();
    assert!(v.start_form_tokens().is_empty());
    let (p, cap_p, izza) = (id(t, "▁P"), id(t, "P"), id(t, "izza"));
    assert_eq!(t.decode(&[p, izza], false).unwrap(), " Pizza");
    assert_eq!(v.decode_output(&[p, izza]), b" Pizza");
    let re = "Pizza|Pasta";
    assert!(!runs(&l.on, re, &[p, izza]));
    assert!(runs(&l.on, re, &[cap_p, izza]));
    assert!(runs(&l.on, " Pizza", &[p, izza]));
    // Gemma 3 writes no dummy prefix: its own tokens for "Pizza" pass either way.
    let natural = t.encode("Pizza", false).unwrap().get_ids().to_vec();
    assert_eq!(t.decode(&natural, false).unwrap(), "Pizza");
    assert!(runs(&l.on, re, &natural) && runs(&l.off, re, &natural));
    let g = l.on.compile_regex(re).unwrap();
    invariant(&l.on, &g, &natural, "gemma3 on");
}

// ---------------------------------------------------------------------------------------

/// Tokens: 0 `a`, 1 ` a`, 2 ` `, 3 `b`, 4 ` ab`, 5 `</s>` (special, stop).
fn toy() -> Vocabulary {
    let tokens: [&[u8]; 6] = [b"a", b" a", b" ", b"b", b" ab", b"</s>"];
    Vocabulary::from_token_bytes(&tokens, &[5], &[5]).unwrap()
}

#[test]
fn toy_start_forms_and_errors() {
    let v = toy()
        .with_start_bytes([(1, b"a".as_slice()), (2, b""), (4, b"ab")])
        .unwrap();
    assert_eq!(v.start_form_tokens(), &[1, 2, 4]);
    assert_eq!(v.start_bytes(4), Some(&b"ab"[..]));
    // Off: the forms are there but unused.
    assert_eq!(v.decode_output(&[1, 3]), b" ab");
    let on = Arc::new(v.clone().with_strip_output_start(true));
    assert_eq!(on.decode_output(&[1, 3]), b"ab");
    assert_eq!(on.decode_output(&[3, 1]), b"b a");
    let c = GrammarCompiler::new(on.clone());
    for grammar in [
        r#"root ::= "a" "b"?"#,
        r#"root ::= " "? [ab]*"#,
        r#"root ::= [ab ]*"#,
        r#"root ::= " a""#,
    ] {
        let g = c.compile_grammar(grammar).unwrap();
        // Every state two steps deep.
        let m = GrammarMatcher::new(g);
        let (first, bad) = check_all_tokens(&m, &on);
        assert!(bad.is_empty(), "{grammar}: {}", bad[0]);
        for t in first {
            let mut f = m.clone();
            assert!(f.accept_token(t));
            let (_, bad) = check_all_tokens(&f, &on);
            assert!(bad.is_empty(), "{grammar} after {t}: {}", bad[0]);
        }
    }
    let g = c.compile_grammar(r#"root ::= "a" "b"?"#).unwrap();
    let mut m = GrammarMatcher::new(g.clone());
    assert!(
        m.accept_token(4) && m.accept_token(5),
        "` ab` first is `ab`"
    );
    let mut m = GrammarMatcher::new(g.clone());
    assert!(
        m.accept_token(2) && !m.accept_token(1),
        "` ` first writes nothing; then ` a` is ` a`"
    );
    let g = c.compile_grammar(r#"root ::= " a""#).unwrap();
    let mut m = GrammarMatcher::new(g);
    assert!(!m.accept_token(1) && m.accept_token(2) && m.accept_token(1));

    // Errors.
    let e = toy().with_start_bytes([(5, b"x".as_slice())]).unwrap_err();
    assert!(
        matches!(e, VocabError::StartFormOfSpecialToken { id: 5 }),
        "{e:?}"
    );
    let e = toy().with_start_bytes([(9, b"x".as_slice())]).unwrap_err();
    assert!(
        matches!(e, VocabError::TokenOutOfRange { id: 9, size: 6 }),
        "{e:?}"
    );
    // A narrower width drops the forms of the tokens it drops.
    let v = toy()
        .with_start_bytes([(1, b"a".as_slice()), (4, b"ab")])
        .unwrap()
        .with_stop_tokens(&[])
        .unwrap()
        .with_vocab_size(3)
        .unwrap();
    assert_eq!(v.start_form_tokens(), &[1]);
    assert_eq!(v.start_bytes(4), None);
}

/// A `Metaspace` decoder drops the metaspaces of the first token (its `prepend_scheme` is
/// not `never`), as the `tokenizers` crate does.
#[test]
fn metaspace_decoder() {
    let json = |scheme: &str| {
        format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null,
            "pre_tokenizer": {{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "{scheme}", "split": true}},
            "post_processor": null,
            "decoder": {{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "{scheme}", "split": true}},
            "model": {{"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null,
                "fuse_unk": false, "byte_fallback": false,
                "vocab": {{"a": 0, "▁a": 1, "▁": 2, "▁▁": 3, "b": 4}}, "merges": []}}}}"#
        )
    };
    for scheme in ["always", "first", "never"] {
        let text = json(scheme);
        let v = Vocabulary::from_tokenizer_json_str(&text, None).unwrap();
        let tok: Tokenizer = text.parse().unwrap();
        for t in 0..5u32 {
            let first = v.start_bytes(t).unwrap_or(v.token_bytes(t).unwrap());
            assert_eq!(
                std::str::from_utf8(first).unwrap(),
                tok.decode(&[t], false).unwrap(),
                "{scheme} token {t}"
            );
            let ids = [t, 1, 3];
            let on = v.clone().with_strip_output_start(true);
            assert_eq!(
                std::str::from_utf8(&on.decode_output(&ids)).unwrap(),
                tok.decode(&ids, false).unwrap(),
                "{scheme} {ids:?}"
            );
        }
        assert_eq!(
            v.start_form_tokens().is_empty(),
            scheme == "never",
            "{scheme}"
        );
    }
}
