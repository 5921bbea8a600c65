//! Vocabulary loading: exact token bytes for six real tokenizers and o200k_base, special and
//! stop tokens, sizes, and errors.
//!
//! Run with `cargo test --release --test vocab loading::` (the big tokenizers load slowly in debug).

use crate::common;

use tokensieve::{VocabError, Vocabulary};

/// Texts for the exactness checks; all already in NFC (Qwen3 normalises to NFC).
#[cfg(any(feature = "hf", feature = "tiktoken"))]
const TEXTS: &[&str] = &[
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "日本語のテキストと中文文本，한국어 텍스트。",
    "Emoji: 🦀🚀 👩‍💻 family 👨‍👩‍👧‍👦 flag 🇫🇷 ✨ done",
    "  leading spaces,\n\n\nnewlines\t\ttabs   and    runs     of spaces\r\nend   ",
    "   \n  \n\n    ",
    "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
    "{\"name\": \"Ünïcödé\", \"values\": [1, 2.5e-3, -7], \"nested\": {\"ok\": true, \"s\": \"a\\\"b\"}}",
    "Mixed: café naïve résumé — Ελληνικά, русский, العربية, हिन्दी 12345678901234 $x^2$ ½ €",
    "Rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ 𓀀 \u{1F9EC} control\u{7}bell\u{0}nul",
    "def f(a,b):\n\treturn a**b  # comment\n\n\nclass C: pass\n",
];

#[cfg(feature = "hf")]
mod hf {
    use super::*;
    use std::time::Instant;
    use tokenizers::Tokenizer;

    fn first_difference(a: &[u8], b: &[u8]) -> usize {
        a.iter().zip(b).take_while(|(x, y)| x == y).count()
    }

    /// Loads `name` both as a [`Vocabulary`] and with `tokenizers`, prints the load times, and
    /// checks that every text's ids concatenate to the text's bytes (`" " + text` when
    /// `leading_space`). Returns `None` when the file is missing (outside CI).
    pub(super) fn load_and_check(
        name: &str,
        leading_space: bool,
    ) -> Option<(Vocabulary, Tokenizer)> {
        let path = common::tokenizer_path(name)?;
        let t0 = Instant::now();
        let vocab = Vocabulary::from_tokenizer_json(&path).expect("vocabulary loads");
        let vocab_time = t0.elapsed();
        let t1 = Instant::now();
        let tokenizer = Tokenizer::from_file(&path).expect("tokenizers loads");
        let tok_time = t1.elapsed();
        eprintln!(
            "{name}: Vocabulary::from_tokenizer_json {:.0} ms, tokenizers::Tokenizer::from_file \
             {:.0} ms, {} tokens, {} special",
            vocab_time.as_secs_f64() * 1e3,
            tok_time.as_secs_f64() * 1e3,
            vocab.tokenizer_size(),
            vocab.special_tokens().count(),
        );
        for text in TEXTS {
            let enc = tokenizer.encode(*text, false).expect("encodes");
            let ids = enc.get_ids();
            let got = vocab.decode_bytes(ids);
            let mut want = Vec::new();
            if leading_space {
                want.push(b' ');
            }
            want.extend_from_slice(text.as_bytes());
            if got != want {
                let at = first_difference(&got, &want);
                let mut pos = 0;
                let mut culprit = None;
                for &id in ids {
                    let b = vocab.token_bytes(id).unwrap();
                    if pos + b.len() > at {
                        culprit = Some((id, tokenizer.id_to_token(id), b.to_vec()));
                        break;
                    }
                    pos += b.len();
                }
                panic!(
                    "{name}: {text:?} decodes to {:?}; first difference at byte {at}, in token \
                     {culprit:?}",
                    String::from_utf8_lossy(&got)
                );
            }
            assert!(
                ids.iter().all(|&id| !vocab.is_special(id)),
                "{name}: {text:?} encodes to a special token"
            );
        }
        // Every single token decodes as `tokenizers` decodes it (lossily where the bytes are
        // not UTF-8 alone; Llama 2's decoder strips one leading space of its output).
        let t2 = Instant::now();
        let mut mismatches = Vec::new();
        for id in 0..vocab.tokenizer_size() as u32 {
            let ours = String::from_utf8_lossy(vocab.token_bytes(id).unwrap()).into_owned();
            let ours = match (leading_space, ours.strip_prefix(' ')) {
                (true, Some(rest)) => rest.to_string(),
                _ => ours,
            };
            let theirs = tokenizer.decode(&[id], false).expect("decodes");
            if ours != theirs {
                mismatches.push((id, ours, theirs));
            }
        }
        eprintln!(
            "{name}: per-token decode check of {} ids in {:.0} ms",
            vocab.tokenizer_size(),
            t2.elapsed().as_secs_f64() * 1e3
        );
        assert!(
            mismatches.is_empty(),
            "{name}: {} tokens decode differently, such as {:?}",
            mismatches.len(),
            &mismatches[..mismatches.len().min(5)]
        );
        Some((vocab, tokenizer))
    }

    /// The id of `token` (model or added token text) and its bytes in `vocab`.
    pub(super) fn bytes_of<'a>(
        vocab: &'a Vocabulary,
        tokenizer: &Tokenizer,
        token: &str,
    ) -> &'a [u8] {
        let id = tokenizer
            .token_to_id(token)
            .unwrap_or_else(|| panic!("{token:?} is a token"));
        vocab.token_bytes(id).unwrap()
    }

    /// Number of tokens whose bytes are not valid UTF-8 alone.
    pub(super) fn non_utf8(vocab: &Vocabulary) -> usize {
        (0..vocab.tokenizer_size() as u32)
            .filter(|&id| std::str::from_utf8(vocab.token_bytes(id).unwrap()).is_err())
            .count()
    }

    #[test]
    fn llama3_1() {
        let Some((v, t)) = load_and_check("llama3_1", false) else {
            return;
        };
        assert_eq!(v.tokenizer_size(), 128_256);
        assert_eq!(v.vocab_size(), 128_256);
        assert_eq!(v.special_token_id("<|eot_id|>"), Some(128_009));
        assert_eq!(v.stop_tokens(), &[128_009]);
        assert!(v.is_stop_token(128_009) && !v.is_stop_token(128_001));
        assert_eq!(v.special_token_id("<|begin_of_text|>"), Some(128_000));
        assert_eq!(v.token_bytes(128_000), Some(&b"<|begin_of_text|>"[..]));
        assert_eq!(v.special_tokens().count(), 256);
        assert!(v.special_tokens().all(|id| id >= 128_000));
        assert_eq!(bytes_of(&v, &t, "Ġhello"), b" hello");
        assert_eq!(bytes_of(&v, &t, "Ċ"), b"\n");
        assert!(non_utf8(&v) > 1000, "partial UTF-8 tokens exist");
    }

    #[test]
    fn qwen3() {
        let Some((v, t)) = load_and_check("qwen3", false) else {
            return;
        };
        assert_eq!(v.tokenizer_size(), 151_669);
        assert_eq!(v.special_token_id("<|im_end|>"), Some(151_645));
        assert!(v.is_special(151_645));
        assert_eq!(v.stop_tokens(), &[151_645]);
        assert_eq!(v.special_token_id("<|endoftext|>"), Some(151_643));
        assert_eq!(v.special_tokens().count(), 14);
        // `<think>` is an added token but not special: ordinary text bytes.
        assert_eq!(t.token_to_id("<think>"), Some(151_667));
        assert!(!v.is_special(151_667));
        assert_eq!(v.token_bytes(151_667), Some(&b"<think>"[..]));
        assert_eq!(v.special_token_id("<think>"), None);
        // Added tokens in text round-trip too.
        let text = "<think>\nok\n</think>\n\nanswer<|im_end|>";
        let ids = t.encode(text, false).unwrap().get_ids().to_vec();
        assert!(ids.contains(&151_667) && ids.contains(&151_645));
        assert_eq!(v.decode_bytes(&ids), text.as_bytes());
        assert!(non_utf8(&v) > 1000);

        // The model's logits are wider than the tokenizer.
        let v = v.with_vocab_size(151_936).unwrap();
        assert_eq!(v.vocab_size(), 151_936);
        assert_eq!(v.tokenizer_size(), 151_669);
        assert_eq!(v.bitmask_words(), 4_748);
        assert_eq!(v.token_bytes(151_669), None);
        assert_eq!(v.token_bytes(151_935), None);
        assert!(!v.is_special(151_700));
        assert_eq!(v.decode_bytes(&[151_700]), b"");
        // Narrower than the tokenizer, below its eos: a typed error naming both.
        let eos = v.stop_tokens()[0];
        let err = v.with_vocab_size(151_000).unwrap_err();
        assert!(
            matches!(err, VocabError::VocabSizeTooSmall { vocab_size: 151_000, stop_token } if stop_token == eos)
        );
        assert!(
            err.to_string()
                .starts_with(&format!("vocab_size 151000 leaves out stop token {eos} ")),
            "{err}"
        );
    }

    #[test]
    fn deepseek_v3() {
        let Some((v, t)) = load_and_check("deepseek_v3", false) else {
            return;
        };
        assert_eq!(v.tokenizer_size(), 128_815);
        let eos = "<｜end▁of▁sentence｜>";
        assert_eq!(v.special_token_id(eos), Some(1));
        assert_eq!(v.token_bytes(1), Some(eos.as_bytes()));
        assert_eq!(v.stop_tokens(), &[1]);
        assert_eq!(v.special_token_id("<｜begin▁of▁sentence｜>"), Some(0));
        assert_eq!(v.special_tokens().count(), 804);
        // Non-special added token: characters outside the byte map, so its own UTF-8.
        let user = "<｜User｜>";
        let id = t.token_to_id(user).unwrap();
        assert!(!v.is_special(id));
        assert_eq!(v.token_bytes(id), Some(user.as_bytes()));
        assert!(non_utf8(&v) > 1000);
    }

    #[test]
    fn gptoss() {
        let Some((v, t)) = load_and_check("gptoss", false) else {
            return;
        };
        assert_eq!(v.tokenizer_size(), 200_019);
        assert_eq!(v.special_token_id("<|return|>"), Some(200_002));
        assert_eq!(v.stop_tokens(), &[200_002]);
        assert_eq!(v.special_token_id("<|start|>"), Some(200_006));
        assert_eq!(v.special_token_id("<|endoftext|>"), Some(199_999));
        assert_eq!(v.special_tokens().count(), 21);
        assert!(v.special_tokens().all(|id| id >= 199_998));
        assert_eq!(bytes_of(&v, &t, "Ġworld"), b" world");
        assert!(non_utf8(&v) > 1000);
    }

    #[test]
    fn llama2() {
        // Llama 2's normalizer prepends `▁`: ids decode to " " + text.
        let Some((v, t)) = load_and_check("llama2", true) else {
            return;
        };
        assert_eq!(v.tokenizer_size(), 32_000);
        assert_eq!(v.special_token_id("</s>"), Some(2));
        assert_eq!(v.stop_tokens(), &[2]);
        assert_eq!(
            v.special_tokens().collect::<Vec<_>>(),
            vec![0, 1, 2],
            "<unk>, <s>, </s>"
        );
        assert_eq!(v.token_bytes(1), Some(&b"<s>"[..]));
        assert_eq!(bytes_of(&v, &t, "<0x0A>"), b"\n");
        assert_eq!(bytes_of(&v, &t, "<0xE4>"), &[0xE4]);
        assert_eq!(bytes_of(&v, &t, "▁the"), b" the");
        assert_eq!(bytes_of(&v, &t, "▁"), b" ");
        // 256 byte-fallback tokens; the 128 with the high bit set are not UTF-8 alone.
        assert_eq!(non_utf8(&v), 128);
    }

    #[test]
    fn gemma3() {
        // Gemma 3 prepends nothing: ids decode to exactly the text.
        let Some((v, t)) = load_and_check("gemma3", false) else {
            return;
        };
        assert_eq!(v.tokenizer_size(), 262_145);
        assert_eq!(v.special_token_id("<end_of_turn>"), Some(106));
        assert_eq!(v.stop_tokens(), &[106]);
        assert_eq!(v.special_token_id("<start_of_turn>"), Some(105));
        assert_eq!(v.special_token_id("<image_soft_token>"), Some(262_144));
        assert_eq!(v.special_tokens().count(), 9);
        // Added but not special: ordinary text.
        let id = t.token_to_id("<unused0>").unwrap();
        assert!(!v.is_special(id));
        assert_eq!(v.token_bytes(id), Some(&b"<unused0>"[..]));
        // Added tokens made of `▁` runs are spaces.
        assert_eq!(bytes_of(&v, &t, "▁▁"), b"  ");
        assert_eq!(bytes_of(&v, &t, "<0x0A>"), b"\n");
        assert_eq!(bytes_of(&v, &t, "▁the"), b" the");
    }

    /// A tiny byte-level tokenizer with holes at ids 4 and 5 and a special token at 6.
    const TINY: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [{"id": 6, "content": "<eos>", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true}],
      "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                        "use_regex": true},
      "post_processor": null,
      "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                  "use_regex": true},
      "model": {"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null,
                "fuse_unk": false, "byte_fallback": false,
                "vocab": {"a": 0, "b": 1, "Ġ": 2, "Ġa": 3}, "merges": ["Ġ a"]}
    }"#;

    #[test]
    fn holes_are_empty_and_special() {
        let v =
            Vocabulary::from_tokenizer_json_str(TINY, Some(r#"{"eos_token": "<eos>"}"#)).unwrap();
        assert_eq!(v.tokenizer_size(), 7);
        assert_eq!(v.vocab_size(), 7);
        assert_eq!(v.token_bytes(3), Some(&b" a"[..]));
        assert_eq!(v.token_bytes(4), Some(&b""[..]));
        assert_eq!(v.token_bytes(5), Some(&b""[..]));
        assert_eq!(v.special_tokens().collect::<Vec<_>>(), vec![4, 5, 6]);
        assert_eq!(v.stop_tokens(), &[6]);
        assert_eq!(v.special_token_id("<eos>"), Some(6));
        assert_eq!(v.special_token_id(""), None, "holes have no name");

        // eos_token as an object; an eos that names no token gives no stop token.
        let obj = r#"{"eos_token": {"__type": "AddedToken", "content": "<eos>"}}"#;
        let v = Vocabulary::from_tokenizer_json_str(TINY, Some(obj)).unwrap();
        assert_eq!(v.stop_tokens(), &[6]);
        let v = Vocabulary::from_tokenizer_json_str(TINY, Some(r#"{"eos_token": "<x>"}"#)).unwrap();
        assert!(v.stop_tokens().is_empty());
        let v = Vocabulary::from_tokenizer_json_str(TINY, None).unwrap();
        assert!(v.stop_tokens().is_empty());
    }

    #[test]
    fn config_added_tokens_decoder_marks_special() {
        let config = r#"{"added_tokens_decoder": {
            "1": {"content": "b", "special": true},
            "8": {"content": "<pad>", "special": true}}}"#;
        let v = Vocabulary::from_tokenizer_json_str(TINY, Some(config)).unwrap();
        assert_eq!(v.tokenizer_size(), 9);
        assert!(v.is_special(1) && v.is_special(8) && v.is_special(7));
        assert_eq!(v.token_bytes(8), Some(&b"<pad>"[..]));
        assert_eq!(v.special_token_id("<pad>"), Some(8));
    }

    #[test]
    fn path_reads_the_config_beside_it() {
        let dir = std::env::temp_dir().join(format!("tokensieve-vocab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokenizer.json");
        std::fs::write(&path, TINY).unwrap();
        let _ = std::fs::remove_file(dir.join("tokenizer_config.json"));
        let v = Vocabulary::from_tokenizer_json(&path).unwrap();
        assert!(v.stop_tokens().is_empty(), "no config, no stop token");
        std::fs::write(
            dir.join("tokenizer_config.json"),
            r#"{"eos_token": "<eos>"}"#,
        )
        .unwrap();
        let v = Vocabulary::from_tokenizer_json(&path).unwrap();
        assert_eq!(v.stop_tokens(), &[6]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unigram_list_vocab_with_metaspace_decoder() {
        let json = r#"{
          "added_tokens": [{"id": 0, "content": "<unk>", "special": true}],
          "normalizer": null,
          "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                            "split": true},
          "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                      "split": true},
          "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
                    "vocab": [["<unk>", 0.0], ["▁hi", -1.0], ["there", -2.0], ["▁", -3.0]]}
        }"#;
        let v = Vocabulary::from_tokenizer_json_str(json, None).unwrap();
        assert_eq!(v.tokenizer_size(), 4);
        assert_eq!(v.decode_bytes(&[1, 3, 2]), b" hi there");
        assert_eq!(v.special_tokens().collect::<Vec<_>>(), vec![0]);
        assert_eq!(v.token_bytes(0), Some(&b"<unk>"[..]));
    }

    #[test]
    fn load_errors() {
        let err = Vocabulary::from_tokenizer_json_str("{ not json", None).unwrap_err();
        assert!(matches!(err, VocabError::Tokenizer { .. }), "{err}");
        assert!(err
            .to_string()
            .starts_with("cannot load tokenizer tokenizer.json: "));

        let err = Vocabulary::from_tokenizer_json_str(TINY, Some("[")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot load tokenizer tokenizer_config.json"),
            "{err}"
        );

        let err = Vocabulary::from_tokenizer_json("/nonexistent/tokenizer.json").unwrap_err();
        assert!(matches!(err, VocabError::Io { .. }));
        assert!(
            err.to_string()
                .starts_with("cannot read /nonexistent/tokenizer.json: "),
            "{err}"
        );
    }

    #[test]
    fn unsupported_decoder_is_an_error() {
        let mut json: serde_json::Value = serde_json::from_str(TINY).unwrap();
        json["decoder"] = serde_json::json!({"type": "WordPiece", "prefix": "##", "cleanup": true});
        let wordpiece = json.to_string();
        let err = Vocabulary::from_tokenizer_json_str(&wordpiece, None).unwrap_err();
        assert!(
            err.to_string().contains("\"WordPiece\" is not supported"),
            "{err}"
        );
    }
}

#[cfg(feature = "tiktoken")]
mod tiktoken {
    use super::*;
    use std::time::Instant;

    #[test]
    fn o200k_base() {
        let t0 = Instant::now();
        let v = Vocabulary::o200k_base().unwrap();
        let elapsed = t0.elapsed();
        eprintln!(
            "o200k_base: Vocabulary::o200k_base {:.0} ms",
            elapsed.as_secs_f64() * 1e3
        );
        assert_eq!(v.tokenizer_size(), 200_019);
        assert_eq!(v.vocab_size(), 200_019);
        assert_eq!(v.special_token_id("<|endoftext|>"), Some(199_999));
        assert_eq!(v.special_token_id("<|endofprompt|>"), Some(200_018));
        assert_eq!(v.stop_tokens(), &[199_999]);
        let holes: Vec<u32> = std::iter::once(199_998).chain(200_000..=200_017).collect();
        for &id in &holes {
            assert!(v.is_special(id), "{id}");
            assert_eq!(v.token_bytes(id), Some(&b""[..]), "{id}");
        }
        assert_eq!(v.special_tokens().count(), holes.len() + 2);
        assert!((0..=199_997).all(|id| !v.is_special(id) && !v.token_bytes(id).unwrap().is_empty()));

        let bpe = tiktoken_rs::o200k_base_singleton();
        for text in TEXTS {
            let ids = bpe.encode_ordinary(text);
            assert_eq!(v.decode_bytes(&ids), text.as_bytes(), "{text:?}");
        }
        let text = "Hello<|endoftext|>";
        let ids = bpe.encode_with_special_tokens(text);
        assert_eq!(ids.last(), Some(&199_999));
        assert_eq!(v.decode_bytes(&ids), text.as_bytes());
    }

    #[test]
    fn ranks_with_holes() {
        let ranks = vec![(b"a".to_vec(), 0), (b"bc".to_vec(), 1), (b" d".to_vec(), 3)];
        let special = [("<|end|>".to_string(), 5)];
        let v = Vocabulary::from_tiktoken_ranks(ranks, &special, &[5]).unwrap();
        assert_eq!(v.tokenizer_size(), 6);
        assert_eq!(v.decode_bytes(&[0, 1, 3]), b"abc d");
        assert_eq!(v.special_tokens().collect::<Vec<_>>(), vec![2, 4, 5]);
        assert_eq!(v.token_bytes(2), Some(&b""[..]));
        assert_eq!(v.special_token_id("<|end|>"), Some(5));
        assert_eq!(v.stop_tokens(), &[5]);

        let err =
            Vocabulary::from_tiktoken_ranks(vec![(b"a".to_vec(), 0), (b"b".to_vec(), 0)], &[], &[])
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot load tokenizer tiktoken ranks: id 0 is given to two tokens"
        );
        let err = Vocabulary::from_tiktoken_ranks(vec![(b"a".to_vec(), 0)], &[], &[1]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "token id 1 is past the vocabulary of 1 tokens"
        );
    }
}

#[test]
fn from_token_bytes_errors() {
    let tokens: &[&[u8]] = &[b"a", b"b", &[0xE4]];
    let err = Vocabulary::from_token_bytes(tokens, &[5], &[]).unwrap_err();
    assert!(matches!(
        err,
        VocabError::TokenOutOfRange { id: 5, size: 3 }
    ));
    assert_eq!(
        err.to_string(),
        "token id 5 is past the vocabulary of 3 tokens"
    );

    let err = Vocabulary::from_token_bytes(tokens, &[], &[3]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "token id 3 is past the vocabulary of 3 tokens"
    );

    let v = Vocabulary::from_token_bytes(tokens, &[], &[1]).unwrap();
    assert_eq!(v.decode_bytes(&[0, 2, 1]), b"a\xE4b");
    let err = v.clone().with_stop_tokens(&[7]).unwrap_err();
    assert!(matches!(
        err,
        VocabError::TokenOutOfRange { id: 7, size: 3 }
    ));
    // Narrower than the tokens: those past the width are dropped, unless a stop token is.
    let err = v.clone().with_vocab_size(1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "vocab_size 1 leaves out stop token 1 (the tokens at or past the logits width are \
         dropped); give stop tokens below the width with with_stop_tokens first"
    );
    let v = v.with_vocab_size(2).unwrap();
    assert_eq!(v.tokenizer_size(), 2);
    assert_eq!(v.decode_bytes(&[0, 2, 1]), b"ab");
}

/// A tokenizer loaded with the `tokenizers` crate gives the same vocabulary as the file.
#[test]
fn from_hf_tokenizer_matches_the_file_loader() {
    for name in ["qwen3", "llama2"] {
        let Some(path) = common::tokenizer_path(name) else {
            continue;
        };
        let config = std::fs::read_to_string(path.with_file_name("tokenizer_config.json")).ok();
        let tok = tokenizers::Tokenizer::from_file(&path).unwrap();
        let a = Vocabulary::from_hf_tokenizer(&tok, config.as_deref()).unwrap();
        let b = Vocabulary::from_tokenizer_json(&path).unwrap();
        assert_eq!(a.tokenizer_size(), b.tokenizer_size(), "{name}");
        assert_eq!(a.stop_tokens(), b.stop_tokens(), "{name}");
        for id in 0..a.tokenizer_size() as u32 {
            assert_eq!(a.token_bytes(id), b.token_bytes(id), "{name} token {id}");
            assert_eq!(a.is_special(id), b.is_special(id), "{name} token {id}");
        }
    }
}
