//! The vocabulary (XGrammar's `TokenizerInfo`): every token id's exact output bytes.
//!
//! Grammars work on bytes; models sample token ids. A [`Vocabulary`] maps each id to the
//! bytes it appends to the output, and knows which ids are *special* (added/control tokens:
//! never produced by grammar text, only by a token terminal such as `<|im_end|>`), which are
//! *stop* tokens (allowed exactly where the grammar may end), and the model's logits width
//! ([`Vocabulary::vocab_size`]), which may differ from the tokenizer's size:
//!
//! * *Wider* (Qwen3: 151,936 logits for 151,669 tokens, padding to a multiple of 32 or 64):
//!   ids past the tokenizer are padding, always masked.
//! * *Narrower* (Llama 3.2 Vision: 128,257 tokens for 128,256 logits, `<|image|>` at
//!   128,256; Molmo): the tokens at or past the width are dropped, as XGrammar's
//!   `TokenizerInfo` drops them. The model cannot sample them, so no mask ever has their
//!   bit, `accept_token` rejects them as out of range, a grammar that names one is a
//!   compile error, and a stop token among them is an error
//!   ([`VocabError::VocabSizeTooSmall`]).
//!
//! *Start forms* ([`Vocabulary::start_bytes`]): some decoders write the first token of the
//! output differently (Llama 2's strips its leading space: a model's first `▁Pizza` reads
//! `Pizza`). [`Vocabulary::with_strip_output_start`] (off by default) makes grammars
//! constrain the output as decoded so, and [`Vocabulary::decode_output`] reads it back.
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
#[non_exhaustive]
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
    /// A `vocab_size` (logits width) at or below the id of a stop token: the model could
    /// never sample it, so decoding could never stop on it.
    #[error(
        "vocab_size {vocab_size} leaves out stop token {stop_token} (the tokens at or past the \
         logits width are dropped); give stop tokens below the width with with_stop_tokens \
         first"
    )]
    VocabSizeTooSmall {
        /// The requested logits width.
        vocab_size: usize,
        /// The lowest stop token id at or past it.
        stop_token: u32,
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
    /// A start form given for a special or stop token
    /// ([`Vocabulary::with_start_bytes`]).
    #[error("token {id} is a special or stop token: it has no start form (only text tokens do)")]
    StartFormOfSpecialToken {
        /// The token id.
        id: u32,
    },
    /// More tokens than a `u32` id can address.
    #[error("{0} tokens is more than the limit of {limit}", limit = u32::MAX)]
    TooManyTokens(usize),
}

/// A model's vocabulary: the bytes of every token id, its special and stop tokens, and the
/// logits width.
///
/// Shapes: token ids are `0..tokenizer_size()`; masks cover `0..vocab_size()` (`>=
/// tokenizer_size()`: a narrower width drops the tokens past it), `ceil(vocab_size / 32)`
/// `u32` words. Immutable once built; share it with an `Arc`.
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
    /// How tokens read at the start of the output, where the tokenizer's decoder writes
    /// them differently (see [`Vocabulary::start_bytes`]).
    start: StartForms,
    /// The option of [`Vocabulary::with_strip_output_start`].
    strip_output_start: bool,
}

/// The start forms of tokens: the bytes a token stands for when it is the first token of
/// the output, for the tokens whose decoder output differs there (Llama 2: `▁Hello` is
/// `Hello` there, not ` Hello`).
#[derive(Clone, Debug, Default)]
struct StartForms {
    /// Token ids, ascending.
    ids: Vec<u32>,
    /// Form `i` is `bytes[offsets[i]..offsets[i + 1]]`.
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    /// Indices of the forms, sorted by their bytes (then id): the order of a mask walk
    /// that shares prefixes.
    by_bytes: Vec<u32>,
}

impl StartForms {
    fn new(mut forms: Vec<(u32, Vec<u8>)>) -> Self {
        forms.sort_by_key(|f| f.0);
        forms.dedup_by_key(|f| f.0);
        let mut s = StartForms {
            offsets: vec![0],
            ..StartForms::default()
        };
        for (id, b) in &forms {
            s.ids.push(*id);
            s.bytes.extend_from_slice(b);
            s.offsets.push(s.bytes.len() as u32);
        }
        let mut order: Vec<u32> = (0..forms.len() as u32).collect();
        order.sort_by(|&a, &b| s.form(a).cmp(s.form(b)).then(a.cmp(&b)));
        s.by_bytes = order;
        s
    }

    fn form(&self, i: u32) -> &[u8] {
        let i = i as usize;
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    fn get(&self, id: u32) -> Option<&[u8]> {
        self.ids
            .binary_search(&id)
            .ok()
            .map(|i| self.form(i as u32))
    }

    fn memory_bytes(&self) -> usize {
        self.ids.capacity() * 4
            + self.bytes.capacity()
            + self.offsets.capacity() * 4
            + self.by_bytes.capacity() * 4
    }
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
            start: StartForms::default(),
            strip_output_start: false,
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

    /// Sets the model's logits width: the `vocab_size` of its config, the size of its
    /// output layer.
    ///
    /// * Wider than the tokenizer (Qwen3: 151,936 for 151,669 tokens): ids in
    ///   `tokenizer_size()..vocab_size` are padding, never allowed by a mask, rejected by
    ///   `accept_token` ([`crate::TokenRejection::Padding`]).
    /// * Narrower (Llama 3.2 Vision: 128,256 for 128,257 tokens): the tokens at or past
    ///   `vocab_size` are dropped for good (`tokenizer_size()` becomes `vocab_size`; widening
    ///   again adds padding, not them), as XGrammar's `TokenizerInfo` drops them. They are in
    ///   no mask and no token trie, `token_bytes` and `special_token_id` no longer know them,
    ///   and `accept_token` rejects them ([`crate::TokenRejection::OutOfRange`]).
    ///
    /// # Errors
    /// [`VocabError::VocabSizeTooSmall`] when a stop token is at or past `vocab_size` (set
    /// stop tokens below it with [`Vocabulary::with_stop_tokens`] first);
    /// [`VocabError::TooManyTokens`] when `vocab_size >= u32::MAX`.
    pub fn with_vocab_size(mut self, vocab_size: usize) -> Result<Self, VocabError> {
        if vocab_size >= u32::MAX as usize {
            return Err(VocabError::TooManyTokens(vocab_size));
        }
        if vocab_size < self.tokenizer_size() {
            // Sorted: the first one past the width is the lowest.
            if let Some(&stop_token) = self
                .stop_tokens
                .iter()
                .find(|&&id| id as usize >= vocab_size)
            {
                return Err(VocabError::VocabSizeTooSmall {
                    vocab_size,
                    stop_token,
                });
            }
            self.drop_tokens_from(vocab_size);
        }
        self.vocab_size = vocab_size;
        Ok(self)
    }

    /// Drops the tokens `n..` (none of them a stop token).
    fn drop_tokens_from(&mut self, n: usize) {
        self.bytes.truncate(self.offsets[n] as usize);
        self.offsets.truncate(n + 1);
        self.special.truncate(n);
        if self.start.ids.last().is_some_and(|&id| id as usize >= n) {
            let kept = (0..self.start.ids.len() as u32)
                .filter(|&i| (self.start.ids[i as usize] as usize) < n)
                .map(|i| (self.start.ids[i as usize], self.start.form(i).to_vec()))
                .collect();
            self.start = StartForms::new(kept);
        }
        // A text whose id is dropped may still name a kept special token of the same text.
        let mut lost = Vec::new();
        self.special_by_text.retain(|text, id| {
            let keep = (*id as usize) < n;
            if !keep {
                lost.push(text.clone());
            }
            keep
        });
        if !lost.is_empty() {
            for id in 0..n as u32 {
                if !self.special[id as usize] {
                    continue;
                }
                if let Ok(text) = std::str::from_utf8(self.token_bytes_unchecked(id)) {
                    if lost.iter().any(|l| l == text) {
                        self.special_by_text.entry(text.to_string()).or_insert(id);
                    }
                }
            }
        }
    }

    /// The model's logits width: the length in bits of a token bitmask.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The number of tokens the vocabulary holds (`<= vocab_size()`): the tokenizer's,
    /// or those below the logits width when that is narrower.
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

    /// Sets the start forms of tokens: for each `(id, bytes)`, the bytes token `id` stands
    /// for when it is the first token of the output, where the tokenizer's decoder writes it
    /// differently from [`Vocabulary::token_bytes`] (Llama 2's decoder strips the leading
    /// space of the output: `▁Hello` then reads `Hello`). Replaces any forms set before.
    /// [`Vocabulary::from_tokenizer_json`] derives them from the decoder; they take effect
    /// only with [`Vocabulary::with_strip_output_start`].
    ///
    /// # Errors
    /// [`VocabError::TokenOutOfRange`] for an id `>= tokenizer_size()`;
    /// [`VocabError::StartFormOfSpecialToken`] for a special or stop token (those never
    /// match grammar text, so they have no text form).
    pub fn with_start_bytes<B: AsRef<[u8]>>(
        mut self,
        forms: impl IntoIterator<Item = (u32, B)>,
    ) -> Result<Self, VocabError> {
        let size = self.tokenizer_size();
        let mut list = Vec::new();
        for (id, b) in forms {
            if id as usize >= size {
                return Err(VocabError::TokenOutOfRange { id, size });
            }
            if self.is_special(id) || self.is_stop_token(id) {
                return Err(VocabError::StartFormOfSpecialToken { id });
            }
            list.push((id, b.as_ref().to_vec()));
        }
        if list.iter().map(|f| f.1.len()).sum::<usize>() >= u32::MAX as usize {
            return Err(VocabError::TooManyTokens(list.len()));
        }
        self.start = StartForms::new(list);
        Ok(self)
    }

    /// The bytes token `id` stands for when it is the first token of the output, where
    /// the tokenizer's decoder writes it differently there (see
    /// [`Vocabulary::with_start_bytes`]); `None` for the tokens it writes as everywhere
    /// else.
    pub fn start_bytes(&self, id: u32) -> Option<&[u8]> {
        self.start.get(id)
    }

    /// The tokens that have a start form, ascending (see [`Vocabulary::start_bytes`]).
    pub fn start_form_tokens(&self) -> &[u32] {
        &self.start.ids
    }

    /// `(id, start form)` of every token with one, sorted by the form's bytes (the order of
    /// a walk that shares prefixes).
    pub(crate) fn start_forms_by_bytes(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.start
            .by_bytes
            .iter()
            .map(|&i| (self.start.ids[i as usize], self.start.form(i)))
    }

    /// Reads the first token of the output in its start form, as the tokenizer's decoder
    /// writes it (off by default).
    ///
    /// SentencePiece tokenizers with a dummy prefix (Llama 2: a `Prepend("▁")` normalizer
    /// and a `Strip` of one leading space in the decoder) have the model write a word at the
    /// start of its output as `▁Pizza`, which the decoder turns into `Pizza`. Off, the
    /// grammar sees the token's bytes (` Pizza`), so the regex `Pizza|Pasta` refuses the
    /// tokens a model naturally writes first. On, the first token of the output is matched
    /// by its start form ([`Vocabulary::start_bytes`]) instead of its bytes: the grammar
    /// then constrains the text `tokenizer.decode(output_ids)` returns, exactly (a start
    /// form is what the decoder writes, not an alternative: `▁Pizza` first is `Pizza`
    /// whatever the grammar, so ` Pizza` needs `▁` then `▁Pizza`). A token whose start form
    /// is empty (`▁`, `<0x20>`) is then accepted first whatever the grammar, and changes
    /// nothing but that the next token is no longer first. "First" is the first step of a
    /// matcher (after `new`, `reset`, or a rollback to it): the output is decoded on its
    /// own, not after the prompt (an engine that decodes the output together with the
    /// prompt's tokens sees no strip, and should leave this off).
    ///
    /// For vocabularies without start forms (byte-level BPE, Gemma 3, whose decoder strips
    /// nothing) this changes nothing. The per-node mask cache is unaffected: the first
    /// step's mask checks the start forms against the parser (one prefix-sharing walk over
    /// them, about 16k tokens for Llama 2) on top of the usual mask.
    /// [`Vocabulary::decode_output`] reads the output the same way.
    pub fn with_strip_output_start(mut self, on: bool) -> Self {
        self.strip_output_start = on;
        self
    }

    /// True when [`Vocabulary::with_strip_output_start`] is on.
    pub fn strips_output_start(&self) -> bool {
        self.strip_output_start
    }

    /// The output text of `ids` as the grammar matched it: as
    /// [`Vocabulary::decode_bytes`], except that with
    /// [`Vocabulary::with_strip_output_start`] on, the first id is read in its start form
    /// (Llama 2: `[▁P, izza]` is `Pizza`, as `tokenizer.decode` writes it).
    pub fn decode_output(&self, ids: &[u32]) -> Vec<u8> {
        let Some((&first, rest)) = ids.split_first() else {
            return Vec::new();
        };
        match self.start_bytes(first).filter(|_| self.strip_output_start) {
            Some(form) => {
                let mut out = form.to_vec();
                out.extend(self.decode_bytes(rest));
                out
            }
            None => self.decode_bytes(ids),
        }
    }

    /// Heap memory held, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.start.memory_bytes()
            + self.bytes.capacity()
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
