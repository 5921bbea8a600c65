//! A [`Vocabulary`] from a tokenizer's *encoded* token strings (XGrammar's `TokenizerInfo`
//! constructor: `encoded_vocab` plus a `vocab_type`), for callers that hold the token table
//! but not a `tokenizer.json`, such as a Python binding given `tokenizer.get_vocab()`.

use super::byte_level::{gpt2_byte_level_decode, gpt2_unicode_to_byte};
use super::{VocabError, Vocabulary};

/// How the token strings of a vocabulary encode their bytes (XGrammar's `VocabType`, with
/// its numbering: `RAW` = 0, `BYTE_FALLBACK` = 1, `BYTE_LEVEL` = 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabType {
    /// Each token is its own bytes (tiktoken-style vocabularies).
    Raw,
    /// SentencePiece with byte fallback (Llama 2): `▁` is a space and a token spelled
    /// exactly `<0xHH>` is the byte `0xHH`.
    ByteFallback,
    /// GPT-2 byte-level BPE (Llama 3, Qwen): every character stands for one byte through
    /// the GPT-2 byte-to-unicode map (`Ġ` → 0x20); a token with a character outside the map
    /// (an added token such as `<|im_end|>` written in plain text) is its own UTF-8.
    ByteLevel,
}

impl VocabType {
    /// The type of XGrammar's number (`0`, `1`, `2`), or `None` for another number.
    pub fn from_index(index: i64) -> Option<Self> {
        match index {
            0 => Some(VocabType::Raw),
            1 => Some(VocabType::ByteFallback),
            2 => Some(VocabType::ByteLevel),
            _ => None,
        }
    }

    /// XGrammar's number of the type.
    pub fn index(self) -> i64 {
        match self {
            VocabType::Raw => 0,
            VocabType::ByteFallback => 1,
            VocabType::ByteLevel => 2,
        }
    }
}

/// Texts of end-of-sequence tokens recognised when no stop token is given (the spellings
/// of common model families, as XGrammar's detection list has them).
pub const DETECTED_STOP_TOKENS: &[&str] = &[
    "</s>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|end|>",
    "<|eom_id|>",
    "<eos>",
    "<end_of_turn>",
    "<|end▁of▁sentence|>",
    "<｜end▁of▁sentence｜>",
];

impl Vocabulary {
    /// Builds a vocabulary from each token's encoded string (indexed by id) and how they
    /// encode bytes (see [`VocabType`]).
    ///
    /// Tokens whose bytes are empty are special (no grammar text produces them), as in
    /// XGrammar; no other token is special, so markers such as `<|im_end|>` are ordinary
    /// text here (use [`Vocabulary::from_tokenizer_json_str`] to keep a tokenizer's special
    /// tokens atomic). `stop`: the stop token ids; `None` picks the tokens whose bytes are
    /// one of [`DETECTED_STOP_TOKENS`]. `vocab_size`: the logits width (`None`: the number
    /// of tokens; a width below it drops the tokens from it on, as
    /// [`Vocabulary::with_vocab_size`] does).
    ///
    /// # Errors
    /// [`VocabError::TokenOutOfRange`] for a stop id past the tokens,
    /// [`VocabError::VocabSizeTooSmall`] for a `vocab_size` at or below a stop token's id,
    /// [`VocabError::TooManyTokens`] as [`Vocabulary::from_token_bytes`].
    pub fn from_encoded_vocab<S: AsRef<[u8]>>(
        encoded: &[S],
        vocab_type: VocabType,
        vocab_size: Option<usize>,
        stop: Option<&[u32]>,
    ) -> Result<Self, VocabError> {
        let table = gpt2_unicode_to_byte();
        let tokens: Vec<Vec<u8>> = encoded
            .iter()
            .map(|t| decode_encoded_token(t.as_ref(), vocab_type, &table))
            .collect();
        let special: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&i| tokens[i as usize].is_empty())
            .collect();
        let detected: Vec<u32>;
        let stop = match stop {
            Some(s) => s,
            None => {
                detected = (0..tokens.len() as u32)
                    .filter(|&i| {
                        DETECTED_STOP_TOKENS
                            .iter()
                            .any(|s| s.as_bytes() == tokens[i as usize].as_slice())
                    })
                    .collect();
                &detected
            }
        };
        let vocab = Vocabulary::from_token_bytes(&tokens, &special, stop)?;
        match vocab_size {
            Some(n) => vocab.with_vocab_size(n),
            None => Ok(vocab),
        }
    }
}

/// The bytes of one encoded token under `vocab_type`; `table` is the inverted GPT-2 map.
fn decode_encoded_token(token: &[u8], vocab_type: VocabType, table: &[Option<u8>]) -> Vec<u8> {
    match vocab_type {
        VocabType::Raw => token.to_vec(),
        VocabType::ByteFallback => {
            if token.len() == 6 && token.starts_with(b"<0x") && token[5] == b'>' {
                if let Some(b) = std::str::from_utf8(&token[3..5])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    return vec![b];
                }
            }
            let text = String::from_utf8_lossy(token);
            text.replace('▁', " ").into_bytes()
        }
        VocabType::ByteLevel => match std::str::from_utf8(token) {
            Ok(text) => gpt2_byte_level_decode(text, table).unwrap_or_else(|| token.to_vec()),
            Err(_) => token.to_vec(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_each_vocab_type() {
        let enc = ["Ġhi", "ĊĊ", "<|im_end|>", ""];
        let v = Vocabulary::from_encoded_vocab(&enc, VocabType::ByteLevel, Some(64), None).unwrap();
        assert_eq!(v.token_bytes(0), Some(&b" hi"[..]));
        assert_eq!(v.token_bytes(1), Some(&b"\n\n"[..]));
        assert_eq!(v.token_bytes(2), Some(&b"<|im_end|>"[..]));
        assert_eq!(v.stop_tokens(), &[2]);
        assert_eq!(v.special_tokens().collect::<Vec<_>>(), vec![3]);
        assert_eq!(v.vocab_size(), 64);

        let enc = ["▁hello", "<0x0A>", "<0xZZ>", "</s>"];
        let v = Vocabulary::from_encoded_vocab(&enc, VocabType::ByteFallback, None, Some(&[1]))
            .unwrap();
        assert_eq!(v.token_bytes(0), Some(&b" hello"[..]));
        assert_eq!(v.token_bytes(1), Some(&b"\n"[..]));
        assert_eq!(v.token_bytes(2), Some(&b"<0xZZ>"[..]));
        assert_eq!(v.stop_tokens(), &[1]);

        let enc: [&[u8]; 2] = [b"\xe4\xbd", b"Gab"];
        let v = Vocabulary::from_encoded_vocab(&enc, VocabType::Raw, None, Some(&[])).unwrap();
        assert_eq!(v.token_bytes(0), Some(&b"\xe4\xbd"[..]));
        assert!(v.stop_tokens().is_empty());
        assert_eq!(VocabType::from_index(2), Some(VocabType::ByteLevel));
        assert_eq!(VocabType::from_index(7), None);
    }

    #[test]
    fn bad_sizes_are_errors() {
        let enc = ["a", "b"];
        // A width below the tokens drops the last ones (a model narrower than its
        // tokenizer), unless a stop token falls off.
        let narrow = Vocabulary::from_encoded_vocab(&enc, VocabType::Raw, Some(1), None).unwrap();
        assert_eq!(narrow.vocab_size(), 1);
        assert!(matches!(
            Vocabulary::from_encoded_vocab(&enc, VocabType::Raw, Some(1), Some(&[1])),
            Err(VocabError::VocabSizeTooSmall { .. })
        ));
        assert!(matches!(
            Vocabulary::from_encoded_vocab(&enc, VocabType::Raw, None, Some(&[5])),
            Err(VocabError::TokenOutOfRange { id: 5, .. })
        ));
    }
}
