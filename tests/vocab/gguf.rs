//! `Vocabulary::from_gguf` (feature `gguf`): tiny GGUF v3 files written byte by byte inside
//! the tests (no download, no candle writer), and the real SmolLM2-135M-Instruct file when
//! `scripts/fetch-model.sh` has fetched it into `models/` (skipped with a printed reason
//! otherwise, in CI too: the model is not part of the repository).
//!
//! Run: `cargo test --release --features gguf --test vocab gguf::`.
#![cfg(feature = "gguf")]

use std::io::Cursor;
use std::path::Path;

use tokensieve::{GrammarCompiler, GrammarMatcher, VocabError, Vocabulary};

/// One GGUF metadata value, as written on disk (GGUF v3, little-endian).
#[derive(Clone)]
enum V {
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    Str(&'static str),
    /// Element type id, then the elements (all of that type).
    Arr(Vec<V>),
}

impl V {
    fn type_id(&self) -> u32 {
        match self {
            V::U32(_) => 4,
            V::I32(_) => 5,
            V::F32(_) => 6,
            V::Str(_) => 8,
            V::Arr(_) => 9,
            V::U64(_) => 10,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            V::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            V::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            V::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            V::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            V::Str(s) => write_str(out, s),
            V::Arr(items) => {
                let elem = items.first().map_or(4, V::type_id);
                out.extend_from_slice(&elem.to_le_bytes());
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for item in items {
                    item.write(out);
                }
            }
        }
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A GGUF v3 file with no tensors and the given metadata.
fn gguf(metadata: &[(&str, V)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // tensors
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        write_str(&mut out, key);
        out.extend_from_slice(&value.type_id().to_le_bytes());
        value.write(&mut out);
    }
    out
}

fn strs(items: &[&'static str]) -> V {
    V::Arr(items.iter().map(|s| V::Str(s)).collect())
}

fn ints(items: &[i32]) -> V {
    V::Arr(items.iter().map(|&v| V::I32(v)).collect())
}

/// A SmolLM2-like byte-level vocabulary: three control tokens, then ordinary ones.
const TOKENS: [&str; 9] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "yes",
    "Ġno",
    "Ċ",
    "Ã©", // é as two byte-level characters
    "Ã",  // the first byte of é alone: not valid UTF-8
    "<tool_call>",
];
const TYPES: [i32; 9] = [3, 3, 3, 1, 1, 1, 1, 1, 4];

fn smol_like() -> Vec<(&'static str, V)> {
    vec![
        ("general.architecture", V::Str("llama")),
        ("tokenizer.ggml.model", V::Str("gpt2")),
        ("tokenizer.ggml.tokens", strs(&TOKENS)),
        ("tokenizer.ggml.token_type", ints(&TYPES)),
        ("tokenizer.ggml.merges", strs(&["Ġ n", "Ġn o"])),
        ("tokenizer.ggml.eos_token_id", V::U32(2)),
        ("tokenizer.ggml.bos_token_id", V::U32(1)),
    ]
}

fn read(metadata: &[(&str, V)]) -> Result<Vocabulary, VocabError> {
    Vocabulary::from_gguf_reader(&mut Cursor::new(gguf(metadata)), "test.gguf")
}

/// The metadata with `key` replaced by `value` (or removed when `None`).
fn with(key: &str, value: Option<V>) -> Vec<(&'static str, V)> {
    let mut meta = smol_like();
    let pos = meta.iter().position(|(k, _)| *k == key).expect("known key");
    match value {
        Some(v) => meta[pos].1 = v,
        None => {
            meta.remove(pos);
        }
    }
    meta
}

fn metadata_error(result: Result<Vocabulary, VocabError>) -> (String, String) {
    match result {
        Err(VocabError::GgufMetadata { what, key, problem }) => {
            assert_eq!(what, "test.gguf");
            (key, problem)
        }
        other => panic!("expected a GgufMetadata error, got {other:?}"),
    }
}

#[test]
fn byte_level_tokens_control_tokens_and_eos() {
    let vocab = read(&smol_like()).unwrap();
    assert_eq!(vocab.tokenizer_size(), 9);
    assert_eq!(vocab.vocab_size(), 9);
    let bytes = |id| vocab.token_bytes(id).unwrap().to_vec();
    assert_eq!(bytes(2), b"<|im_end|>");
    assert_eq!(bytes(3), b"yes");
    assert_eq!(bytes(4), b" no");
    assert_eq!(bytes(5), b"\n");
    assert_eq!(bytes(6), "é".as_bytes());
    assert_eq!(bytes(7), vec![0xC3]);
    // User-defined (type 4): its text verbatim, and not special.
    assert_eq!(bytes(8), b"<tool_call>");
    assert!(!vocab.is_special(8));
    assert_eq!(vocab.special_tokens().collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(vocab.stop_tokens(), &[2]);
    assert_eq!(vocab.special_token_id("<|im_end|>"), Some(2));
    assert_eq!(vocab.special_token_id("<|im_start|>"), Some(1));
}

#[test]
fn grammar_on_a_gguf_vocabulary() {
    // The control token is produced only by its token terminal, never by its text.
    let vocab = read(&smol_like()).unwrap();
    let compiler = GrammarCompiler::new(vocab);
    let grammar = compiler
        .compile_grammar(r#"root ::= ("yes" | " no") "\n" <|im_end|>"#)
        .unwrap();
    let mut matcher = GrammarMatcher::new(grammar);
    assert!(!matcher.accept_token(2));
    assert!(matcher.accept_token(4));
    assert!(matcher.accept_token(5));
    assert!(matcher.accept_token(2));
    assert!(matcher.is_terminated());
}

#[test]
fn sentencepiece_byte_tokens() {
    let vocab = read(&[
        ("tokenizer.ggml.model", V::Str("llama")),
        (
            "tokenizer.ggml.tokens",
            strs(&["<unk>", "<s>", "</s>", "<0x0A>", "▁Hello", "<0xE4>"]),
        ),
        ("tokenizer.ggml.token_type", ints(&[2, 3, 3, 6, 1, 6])),
        ("tokenizer.ggml.eos_token_id", V::I32(2)),
    ])
    .unwrap();
    assert_eq!(vocab.token_bytes(3).unwrap(), b"\n");
    assert_eq!(vocab.token_bytes(4).unwrap(), b" Hello");
    assert_eq!(vocab.token_bytes(5).unwrap(), &[0xE4]);
    assert_eq!(vocab.special_tokens().collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(vocab.stop_tokens(), &[2]);
}

#[test]
fn optional_keys_may_be_absent() {
    // No token types: nothing is special. No eos: no stop token.
    let mut meta = with("tokenizer.ggml.token_type", None);
    meta.retain(|(k, _)| *k != "tokenizer.ggml.eos_token_id");
    let vocab = read(&meta).unwrap();
    assert_eq!(vocab.special_tokens().count(), 0);
    assert!(vocab.stop_tokens().is_empty());
    assert_eq!(vocab.token_bytes(4).unwrap(), b" no");
    // eos as a u64, as some converters write it.
    let vocab = read(&with("tokenizer.ggml.eos_token_id", Some(V::U64(0)))).unwrap();
    assert_eq!(vocab.stop_tokens(), &[0]);
}

#[test]
fn missing_and_ill_typed_metadata_are_typed_errors() {
    let (key, problem) = metadata_error(read(&with("tokenizer.ggml.tokens", None)));
    assert_eq!(
        (key.as_str(), problem.as_str()),
        ("tokenizer.ggml.tokens", "is missing")
    );

    let (key, problem) = metadata_error(read(&with("tokenizer.ggml.model", None)));
    assert_eq!(
        (key.as_str(), problem.as_str()),
        ("tokenizer.ggml.model", "is missing")
    );

    let (key, problem) = metadata_error(read(&with("tokenizer.ggml.model", Some(V::Str("bert")))));
    assert_eq!(key, "tokenizer.ggml.model");
    assert!(problem.contains("\"bert\""), "{problem}");

    let (key, problem) = metadata_error(read(&with("tokenizer.ggml.model", Some(V::U32(2)))));
    assert_eq!(key, "tokenizer.ggml.model");
    assert!(problem.contains("expected a string"), "{problem}");

    let (key, problem) = metadata_error(read(&with("tokenizer.ggml.tokens", Some(ints(&[1, 2])))));
    assert_eq!(key, "tokenizer.ggml.tokens");
    assert!(problem.contains("index 0, expected strings"), "{problem}");

    let (key, problem) = metadata_error(read(&with("tokenizer.ggml.tokens", Some(V::Str("a")))));
    assert_eq!(key, "tokenizer.ggml.tokens");
    assert!(problem.contains("expected an array"), "{problem}");

    let (key, problem) = metadata_error(read(&with("tokenizer.ggml.tokens", Some(strs(&[])))));
    assert_eq!(
        (key.as_str(), problem.as_str()),
        ("tokenizer.ggml.tokens", "is empty")
    );

    let (key, problem) = metadata_error(read(&with(
        "tokenizer.ggml.token_type",
        Some(ints(&[1, 1])),
    )));
    assert_eq!(key, "tokenizer.ggml.token_type");
    assert!(problem.contains("2 entries for 9 tokens"), "{problem}");

    let (key, problem) = metadata_error(read(&with(
        "tokenizer.ggml.token_type",
        Some(V::Arr(vec![V::F32(1.0); 9])),
    )));
    assert_eq!(key, "tokenizer.ggml.token_type");
    assert!(problem.contains("expected integers"), "{problem}");

    let (key, problem) = metadata_error(read(&with(
        "tokenizer.ggml.eos_token_id",
        Some(V::Str("2")),
    )));
    assert_eq!(key, "tokenizer.ggml.eos_token_id");
    assert!(problem.contains("expected a token id"), "{problem}");

    let (key, problem) =
        metadata_error(read(&with("tokenizer.ggml.eos_token_id", Some(V::I32(-1)))));
    assert_eq!(key, "tokenizer.ggml.eos_token_id");
    assert!(problem.contains("-1"), "{problem}");

    let (key, problem) =
        metadata_error(read(&with("tokenizer.ggml.eos_token_id", Some(V::U32(9)))));
    assert_eq!(key, "tokenizer.ggml.eos_token_id");
    assert!(
        problem.contains("past the vocabulary of 9 tokens"),
        "{problem}"
    );
}

#[test]
fn not_a_gguf_file_is_a_read_error() {
    for bytes in [
        b"not a gguf file at all".to_vec(),
        Vec::new(),
        gguf(&smol_like())[..40].to_vec(), // truncated inside the metadata
    ] {
        match Vocabulary::from_gguf_reader(&mut Cursor::new(bytes), "bad.gguf") {
            Err(VocabError::GgufRead { what, message }) => {
                assert_eq!(what, "bad.gguf");
                assert!(!message.is_empty());
            }
            other => panic!("expected GgufRead, got {other:?}"),
        }
    }
    let err = Vocabulary::from_gguf("/nonexistent/model.gguf").unwrap_err();
    assert!(matches!(err, VocabError::Io { .. }), "{err:?}");
}

#[test]
fn from_a_file_on_disk() {
    let path = std::env::temp_dir().join(format!("tokensieve-gguf-{}.gguf", std::process::id()));
    std::fs::write(&path, gguf(&smol_like())).unwrap();
    let vocab = Vocabulary::from_gguf(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(vocab.unwrap().token_bytes(4).unwrap(), b" no");
}

#[test]
fn real_smollm2_file() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.is_file() {
        // Not part of the repository, so not required in CI either.
        eprintln!(
            "skipping: {} missing (run scripts/fetch-model.sh)",
            path.display()
        );
        return;
    }
    let vocab = Vocabulary::from_gguf(&path).unwrap();
    assert_eq!(vocab.tokenizer_size(), 49152);
    assert_eq!(vocab.vocab_size(), 49152);
    assert_eq!(vocab.stop_tokens(), &[2]);
    assert_eq!(vocab.token_bytes(2).unwrap(), b"<|im_end|>");
    assert_eq!(vocab.special_token_id("<|im_start|>"), Some(1));
    assert_eq!(vocab.special_tokens().count(), 17);
    // Byte-level tokens decode to their bytes: every printable ASCII byte, tab and newline
    // is a token of its own.
    for b in (b' '..=b'~').chain([b'\t', b'\n']) {
        assert!(
            (0..49152u32).any(|id| vocab.token_bytes(id) == Some(&[b][..])),
            "no token for byte {b:#04x}"
        );
    }
    let space_the = (0..49152u32).find(|&id| vocab.token_bytes(id) == Some(b" the"));
    assert!(space_the.is_some(), "\" the\" should be one token");
}

#[cfg(feature = "hf")]
mod tokenizer {
    use super::*;
    use tokensieve::vocab::tokenizer_from_gguf;

    use candle_core::quantized::gguf_file::Content;

    /// GGUF bytes read with candle (a prefix of a real file is enough: only its header).
    fn parse(bytes: &[u8]) -> Content {
        Content::read(&mut Cursor::new(bytes)).unwrap()
    }

    fn content(metadata: &[(&str, V)]) -> Content {
        parse(&gguf(metadata))
    }

    /// `smol_like()` plus the characters and merges that BPE needs to build `yes` and ` no`.
    fn with_merges() -> Vec<(&'static str, V)> {
        let mut tokens = TOKENS.to_vec();
        tokens.extend(["y", "e", "s", "Ġ", "n", "o", "ye", "Ġn", "1", "2"]);
        let mut types = TYPES.to_vec();
        types.extend([1; 10]);
        let mut meta = with("tokenizer.ggml.tokens", Some(strs(&tokens)));
        meta.retain(|(k, _)| *k != "tokenizer.ggml.token_type" && *k != "tokenizer.ggml.merges");
        meta.push(("tokenizer.ggml.token_type", ints(&types)));
        meta.push((
            "tokenizer.ggml.merges",
            strs(&["y e", "ye s", "Ġ n", "Ġn o"]),
        ));
        meta.push(("tokenizer.ggml.pre", V::Str("smollm")));
        meta
    }

    #[test]
    fn tiny_bpe_encodes_chatml_markers_as_one_token() {
        let c = content(&with_merges());
        let vocab = Vocabulary::from_gguf_content(&c, "test.gguf").unwrap();
        let tok = tokenizer_from_gguf(&c, "test.gguf").unwrap();
        let text = "<|im_start|>yes no\n12<|im_end|>";
        let ids = tok.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(ids, vec![1, 3, 4, 5, 17, 18, 2]);
        assert_eq!(vocab.decode_bytes(&ids), text.as_bytes());
    }

    #[test]
    fn unsupported_pre_tokenizer_and_bad_merges_are_typed_errors() {
        let mut meta = smol_like();
        meta.push(("tokenizer.ggml.pre", V::Str("qwen2")));
        let err = tokenizer_from_gguf(&content(&meta), "test.gguf").unwrap_err();
        assert!(
            matches!(&err, VocabError::GgufMetadata { key, .. } if key == "tokenizer.ggml.pre"),
            "{err:?}"
        );
        let meta = with("tokenizer.ggml.merges", Some(strs(&["Ġn"])));
        let err = tokenizer_from_gguf(&content(&meta), "test.gguf").unwrap_err();
        assert!(
            matches!(&err, VocabError::GgufMetadata { key, problem, .. }
                if key == "tokenizer.ggml.merges" && problem.contains("index 0")),
            "{err:?}"
        );
        let meta = with("tokenizer.ggml.merges", None);
        let err = tokenizer_from_gguf(&content(&meta), "test.gguf").unwrap_err();
        assert!(matches!(err, VocabError::GgufMetadata { .. }), "{err:?}");
    }

    #[test]
    fn real_smollm2_prompt_round_trips() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
        if !path.is_file() {
            eprintln!(
                "skipping: {} missing (run scripts/fetch-model.sh)",
                path.display()
            );
            return;
        }
        let c = parse(&std::fs::read(&path).unwrap());
        let vocab = Vocabulary::from_gguf_content(&c, "smollm2").unwrap();
        let tok = tokenizer_from_gguf(&c, "smollm2").unwrap();
        let text = "<|im_start|>system\nYou call tools.<|im_end|>\n<|im_start|>user\n\
                    Weather in Paris on 2024-05-01? Héllo 😀 {\"a\": [1, 22]}<|im_end|>\n\
                    <|im_start|>assistant\n<tool_call>\n";
        let ids = tok.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(vocab.decode_bytes(&ids), text.as_bytes());
        assert_eq!(ids[0], 1, "<|im_start|> is one token");
        assert_eq!(
            ids.iter().filter(|&&id| id == 2).count(),
            2,
            "two <|im_end|>"
        );
        // Digits are split one by one (the "smollm" pre-tokenizer).
        let year = tok.encode("2024", false).unwrap();
        assert_eq!(year.get_ids().len(), 4);
        // No prefix space: "Hello" is not " Hello".
        let hello = tok.encode("Hello", false).unwrap();
        assert_eq!(vocab.decode_bytes(hello.get_ids()), b"Hello");
    }
}
