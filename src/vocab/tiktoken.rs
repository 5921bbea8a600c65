//! Loading a [`Vocabulary`] from tiktoken ranks (feature `tiktoken`), and the embedded
//! `o200k_base` encoding of `tiktoken-rs` (GPT-4o, GPT-4.1, o-series models).
//!
//! In tiktoken a token's id is its *rank*, and a rank's bytes are exactly what the token
//! adds to the output (no byte-to-unicode mapping, no leading-space convention).

use rayon::prelude::*;

use super::{VocabError, Vocabulary};

impl Vocabulary {
    /// Builds a vocabulary from tiktoken `(token bytes, rank)` pairs plus special tokens.
    ///
    /// `ranks` are the ordinary tokens (the lines of a `.tiktoken` file, base64-decoded);
    /// `special` the `(text, id)` special tokens, whose bytes are their text; `stop` the
    /// stop token ids. The token ids are `0..=max id`; ids no token uses (holes, such as
    /// o200k_base's 199998) get empty bytes and are marked special, so grammar text never
    /// produces them. [`Vocabulary::vocab_size`] starts at the largest id + 1.
    ///
    /// # Errors
    /// [`VocabError::Tokenizer`] when two tokens (ordinary or special) share an id;
    /// [`VocabError::TokenOutOfRange`] when a stop id is past the largest id;
    /// [`VocabError::TooManyTokens`] for ids at or past `u32::MAX - 1`.
    pub fn from_tiktoken_ranks(
        ranks: impl IntoIterator<Item = (Vec<u8>, u32)>,
        special: &[(String, u32)],
        stop: &[u32],
    ) -> Result<Self, VocabError> {
        let mut tokens: Vec<Vec<u8>> = Vec::new();
        let mut used: Vec<bool> = Vec::new();
        let mut put = |bytes: Vec<u8>, id: u32| -> Result<(), VocabError> {
            let i = id as usize;
            if id >= u32::MAX - 1 {
                return Err(VocabError::TooManyTokens(i + 1));
            }
            if i >= tokens.len() {
                tokens.resize_with(i + 1, Vec::new);
                used.resize(i + 1, false);
            }
            if used[i] {
                return Err(VocabError::Tokenizer {
                    what: "tiktoken ranks".to_string(),
                    message: format!("id {id} is given to two tokens"),
                });
            }
            used[i] = true;
            tokens[i] = bytes;
            Ok(())
        };
        for (bytes, rank) in ranks {
            put(bytes, rank)?;
        }
        for (text, id) in special {
            put(text.as_bytes().to_vec(), *id)?;
        }
        let mut special_ids: Vec<u32> = special.iter().map(|&(_, id)| id).collect();
        special_ids.extend(
            used.iter()
                .enumerate()
                .filter(|&(_, &u)| !u)
                .map(|(i, _)| i as u32),
        );
        Vocabulary::from_token_bytes(&tokens, &special_ids, stop)
    }

    /// The `o200k_base` encoding embedded in `tiktoken-rs` (no file, no network).
    ///
    /// 200,019 ids: ordinary ranks `0..=199997`; special tokens `<|endoftext|>` = 199999
    /// (the stop token) and `<|endofprompt|>` = 200018; holes 199998 and
    /// `200000..=200017` (empty, special). Each rank's bytes come from `tiktoken-rs`'
    /// `CoreBPE::decode_bytes(&[rank])` (tiktoken-rs 0.12 exposes no rank map), decoded in
    /// parallel on the rayon pool. Each call builds (and drops) a fresh `tiktoken-rs`
    /// encoder, which dominates the cost: about 0.3 s in a release build on a busy 2-core
    /// machine. Build it once and share the result (`Arc`).
    ///
    /// # Errors
    /// [`VocabError::Tokenizer`] if `tiktoken-rs` fails to build its encoder (it should not).
    pub fn o200k_base() -> Result<Self, VocabError> {
        let bpe = tiktoken_rs::o200k_base().map_err(|e| VocabError::Tokenizer {
            what: "o200k_base".to_string(),
            message: format!("{e:#}"),
        })?;
        let mut special: Vec<(String, u32)> = Vec::new();
        for text in bpe.special_tokens() {
            let ids = bpe.encode_with_special_tokens(text);
            match ids.as_slice() {
                [id] => special.push((text.to_string(), *id)),
                _ => {
                    return Err(VocabError::Tokenizer {
                        what: "o200k_base".to_string(),
                        message: format!("special token {text:?} encodes to {ids:?}"),
                    })
                }
            }
        }
        special.sort_by_key(|&(_, id)| id);
        let max_special = special.last().map_or(0, |&(_, id)| id);
        let stop: Vec<u32> = special
            .iter()
            .filter(|(text, _)| text == "<|endoftext|>")
            .map(|&(_, id)| id)
            .collect();
        // tiktoken-rs has no public rank map: decode rank by rank (in parallel). Holes fail
        // to decode; scan every id up to the last special token, then on while ranks still
        // decode.
        let is_special = |rank: u32| special.iter().any(|&(_, id)| id == rank);
        let mut ranks: Vec<(Vec<u8>, u32)> = (0..=max_special)
            .into_par_iter()
            .filter(|&rank| !is_special(rank))
            .filter_map(|rank| bpe.decode_bytes(&[rank]).ok().map(|b| (b, rank)))
            .collect();
        let mut rank = max_special;
        while let Some(next) = rank.checked_add(1) {
            rank = next;
            match bpe.decode_bytes(&[rank]) {
                Ok(bytes) => ranks.push((bytes, rank)),
                Err(_) => break,
            }
        }
        Vocabulary::from_tiktoken_ranks(ranks, &special, &stop)
    }
}
