//! The vocabulary (XGrammar's `TokenizerInfo`): every token id's exact output bytes.
//!
//! Grammars work on bytes; models sample token ids. A [`Vocabulary`] maps each id to the
//! bytes it appends to the output, and knows which ids are *special* (added/control tokens:
//! never produced by grammar text, only by a token terminal such as `<|im_end|>`), which are
//! *stop* tokens (allowed exactly where the grammar may end), and the model's logits width
//! ([`Vocabulary::vocab_size`]), which may exceed the tokenizer's size: ids past the
//! tokenizer are always masked.
//!
//! Loaders: [`Vocabulary::from_token_bytes`] (raw byte strings), and behind features
//! `Vocabulary::from_tokenizer_json` (Hugging Face `tokenizer.json`, feature `hf`) and
//! `Vocabulary::from_tiktoken_ranks` / `Vocabulary::o200k_base` (embedded, offline; feature
//! `tiktoken`) and `Vocabulary::from_gguf` (a GGUF model file's tokenizer metadata; feature
//! `gguf`).

use rustc_hash::FxHashMap;

#[cfg(feature = "gguf")]
mod gguf;
#[cfg(all(feature = "gguf", feature = "hf"))]
pub use gguf::tokenizer_from_gguf;
#[cfg(feature = "hf")]
mod encoded;
#[cfg(feature = "hf")]
pub use encoded::{VocabType, DETECTED_STOP_TOKENS};
#[cfg(feature = "hf")]
mod hf;
#[cfg(feature = "tiktoken")]
mod tiktoken;

/// The GPT-2 byte-level encoding (byte-level BPE: GPT-2, Llama 3, Qwen, SmolLM2), shared by
/// the `tokenizer.json` and GGUF loaders.
#[cfg(any(feature = "hf", feature = "gguf"))]
mod byte_level {
    /// The GPT-2 byte-to-unicode map, inverted: `table[c]` is the byte of char `c` (all such
    /// chars are below U+0144).
    pub(crate) fn gpt2_unicode_to_byte() -> Vec<Option<u8>> {
        let mut table = vec![None; 0x144];
        let mut n = 0u32;
        for b in 0..=255u8 {
            let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
            let c = if printable {
                b as u32
            } else {
                n += 1;
                255 + n
            };
            table[c as usize] = Some(b);
        }
        table
    }

    /// The bytes a byte-level token string stands for (`Ġb` → `b" b"`), or `None` when one
    /// of its characters is not in the map (such a token is its own UTF-8, as in the
    /// `tokenizers` crate's `ByteLevel` decoder). `table` is [`gpt2_unicode_to_byte`].
    pub(crate) fn gpt2_byte_level_decode(text: &str, table: &[Option<u8>]) -> Option<Vec<u8>> {
        text.chars()
            .map(|c| table.get(c as usize).copied().flatten())
            .collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn byte_map_inverts_gpt2() {
            let m = gpt2_unicode_to_byte();
            assert_eq!(m['Ġ' as usize], Some(b' '));
            assert_eq!(m['Ċ' as usize], Some(b'\n'));
            assert_eq!(m['!' as usize], Some(b'!'));
            assert_eq!(m.iter().flatten().count(), 256);
            assert_eq!(gpt2_byte_level_decode("ĠhiĊ", &m), Some(b" hi\n".to_vec()));
            assert_eq!(gpt2_byte_level_decode("<｜User｜>", &m), None);
        }
    }
}

/// Why a vocabulary could not be built.
#[derive(Debug, thiserror::Error)]
pub enum VocabError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The tokenizer file could not be parsed.
    #[error("cannot load tokenizer {what}: {message}")]
    Tokenizer {
        /// Which file or source.
        what: String,
        /// What the loader said.
        message: String,
    },
    /// A token id given as special or stop token is past the vocabulary.
    #[error("token id {id} is past the vocabulary of {size} tokens")]
    TokenOutOfRange {
        /// The bad id.
        id: u32,
        /// The number of tokens.
        size: usize,
    },
    /// `vocab_size` smaller than the number of tokens the tokenizer defines.
    #[error("vocab_size {vocab_size} is smaller than the tokenizer's {tokens} tokens")]
    VocabSizeTooSmall {
        /// The requested logits width.
        vocab_size: usize,
        /// The tokenizer's size.
        tokens: usize,
    },
    /// A GGUF file could not be parsed as GGUF (bad magic, truncated, corrupt header).
    #[error("cannot read GGUF file {what}: {message}")]
    GgufRead {
        /// Which file.
        what: String,
        /// What the GGUF reader said.
        message: String,
    },
    /// A GGUF file's tokenizer metadata is missing, of the wrong type, or inconsistent
    /// (such as `tokenizer.ggml.token_type` not as long as `tokenizer.ggml.tokens`).
    #[error("GGUF file {what}: metadata key `{key}` {problem}")]
    GgufMetadata {
        /// Which file.
        what: String,
        /// The metadata key, such as `tokenizer.ggml.eos_token_id`.
        key: String,
        /// What is wrong with it ("is missing", "has type String, expected an integer").
        problem: String,
    },
    /// More tokens than a `u32` id can address.
    #[error("{0} tokens is more than the limit of {limit}", limit = u32::MAX)]
    TooManyTokens(usize),
}

/// A model's vocabulary: the bytes of every token id, its special and stop tokens, and the
/// logits width.
///
/// Shapes: token ids are `0..tokenizer_size()`; masks cover `0..vocab_size()` (`>=
/// tokenizer_size()`), `ceil(vocab_size / 32)` `u32` words. Immutable once built; share it
/// with an `Arc`.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    /// Concatenated token bytes; token `i` is `bytes[offsets[i]..offsets[i + 1]]`.
    bytes: Vec<u8>,
    /// `tokenizer_size() + 1` offsets into `bytes`.
    offsets: Vec<u32>,
    /// `special[i]`: token `i` is an added/control token.
    special: Vec<bool>,
    /// Stop (end-of-sequence) token ids, sorted, deduplicated.
    stop_tokens: Vec<u32>,
    /// The model's logits width.
    vocab_size: usize,
    /// Text of each special token → id (first id wins when texts repeat).
    special_by_text: FxHashMap<String, u32>,
}

impl Vocabulary {
    /// Builds a vocabulary from each token's bytes, indexed by token id.
    ///
    /// `special` lists the added/control token ids (their text is never matched by grammar
    /// text; only a token terminal produces them); `stop` lists the stop tokens (they need
    /// not be special). `vocab_size()` starts equal to `tokens.len()`; widen it with
    /// [`Vocabulary::with_vocab_size`].
    ///
    /// # Errors
    /// [`VocabError::TokenOutOfRange`] when a special or stop id is `>= tokens.len()`;
    /// [`VocabError::TooManyTokens`] past `u32::MAX` tokens or 4 GiB of token bytes.
    pub fn from_token_bytes<B: AsRef<[u8]>>(
        tokens: &[B],
        special: &[u32],
        stop: &[u32],
    ) -> Result<Self, VocabError> {
        let n = tokens.len();
        if n >= u32::MAX as usize {
            return Err(VocabError::TooManyTokens(n));
        }
        let total: usize = tokens.iter().map(|t| t.as_ref().len()).sum();
        if total >= u32::MAX as usize {
            return Err(VocabError::TooManyTokens(n));
        }
        let mut bytes = Vec::with_capacity(total);
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0u32);
        for t in tokens {
            bytes.extend_from_slice(t.as_ref());
            offsets.push(bytes.len() as u32);
        }
        let mut is_special = vec![false; n];
        for &id in special {
            *is_special
                .get_mut(id as usize)
                .ok_or(VocabError::TokenOutOfRange { id, size: n })? = true;
        }
        let mut vocab = Vocabulary {
            bytes,
            offsets,
            special: is_special,
            stop_tokens: Vec::new(),
            vocab_size: n,
            special_by_text: FxHashMap::default(),
        };
        for &id in special {
            // Empty texts (holes in the id space) are not names of special tokens.
            match std::str::from_utf8(vocab.token_bytes_unchecked(id)) {
                Ok(text) if !text.is_empty() => {
                    vocab.special_by_text.entry(text.to_string()).or_insert(id);
                }
                _ => {}
            }
        }
        vocab = vocab.with_stop_tokens(stop)?;
        Ok(vocab)
    }

    /// Replaces the stop tokens (for example Qwen3's `<|im_end|>` and `<|endoftext|>`).
    ///
    /// # Errors
    /// [`VocabError::TokenOutOfRange`] when an id is `>= tokenizer_size()`.
    pub fn with_stop_tokens(mut self, stop: &[u32]) -> Result<Self, VocabError> {
        let size = self.tokenizer_size();
        if let Some(&id) = stop.iter().find(|&&id| id as usize >= size) {
            return Err(VocabError::TokenOutOfRange { id, size });
        }
        let mut s = stop.to_vec();
        s.sort_unstable();
        s.dedup();
        self.stop_tokens = s;
        Ok(self)
    }

    /// Sets the model's logits width (Qwen3: 151,936 for 151,669 tokens). Ids in
    /// `tokenizer_size()..vocab_size` are padding: never allowed by a mask, rejected by
    /// `accept_token`.
    ///
    /// # Errors
    /// [`VocabError::VocabSizeTooSmall`] when `vocab_size < tokenizer_size()`.
    pub fn with_vocab_size(mut self, vocab_size: usize) -> Result<Self, VocabError> {
        if vocab_size < self.tokenizer_size() {
            return Err(VocabError::VocabSizeTooSmall {
                vocab_size,
                tokens: self.tokenizer_size(),
            });
        }
        if vocab_size >= u32::MAX as usize {
            return Err(VocabError::TooManyTokens(vocab_size));
        }
        self.vocab_size = vocab_size;
        Ok(self)
    }

    /// The model's logits width: the length in bits of a token bitmask.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The number of tokens the tokenizer defines (`<= vocab_size()`).
    pub fn tokenizer_size(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The number of `u32` words of a token bitmask: `ceil(vocab_size / 32)`.
    pub fn bitmask_words(&self) -> usize {
        self.vocab_size.div_ceil(32)
    }

    /// The bytes token `id` appends to the output, or `None` past the tokenizer.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        if (id as usize) < self.tokenizer_size() {
            Some(self.token_bytes_unchecked(id))
        } else {
            None
        }
    }

    fn token_bytes_unchecked(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// True when `id` is a special (added/control) token.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// The stop tokens, sorted.
    pub fn stop_tokens(&self) -> &[u32] {
        &self.stop_tokens
    }

    /// True when `id` is a stop token.
    pub fn is_stop_token(&self, id: u32) -> bool {
        self.stop_tokens.binary_search(&id).is_ok()
    }

    /// The id of the special token whose text is `text` (such as `<|im_end|>`).
    pub fn special_token_id(&self, text: &str) -> Option<u32> {
        self.special_by_text.get(text).copied()
    }

    /// Ids of the special tokens, ascending.
    pub fn special_tokens(&self) -> impl Iterator<Item = u32> + '_ {
        self.special
            .iter()
            .enumerate()
            .filter(|(_, &s)| s)
            .map(|(i, _)| i as u32)
    }

    /// Concatenates the bytes of `ids` (what a detokenizer outputs, byte for byte).
    /// Ids past the tokenizer add nothing.
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            if let Some(b) = self.token_bytes(id) {
                out.extend_from_slice(b);
            }
        }
        out
    }

    /// Heap memory held, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.offsets.capacity() * 4
            + self.special.capacity()
            + self.stop_tokens.capacity() * 4
            + self
                .special_by_text
                .keys()
                .map(|k| k.capacity() + 16)
                .sum::<usize>()
    }
}
