//! Token sets: a node mask's accepted tokens in the smallest of four forms (a list of
//! accepted ids, a list of rejected ids, a bitset, or runs of trie positions), how a form
//! is chosen from a bitset, and how each is applied to a token bitmask.

use super::trie::TokenTrie;

/// A set of token ids in its smallest form.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum TokenSet {
    /// The listed ids (sorted).
    Accepted(#[serde(with = "super::wire::gaps")] Vec<u32>),
    /// Every text token except the listed ids (sorted; uncertain tokens are listed too).
    Rejected(#[serde(with = "super::wire::gaps")] Vec<u32>),
    /// One bit per token id, `ceil(vocab_size / 32)` words.
    Bitset(#[serde(with = "super::wire::words")] Box<[u32]>),
    /// The tokens at the trie positions (indices into [`TokenTrie::sorted`]) of ascending
    /// half-open ranges, written as their bounds `[a₀, z₀, a₁, z₁, …]` (strictly
    /// ascending, even length): a set of a few thousand tokens lying in few runs of the
    /// trie's byte order (numbers, the words of a letter class), held in a few hundred
    /// bytes where its bitset takes four bytes a word.
    Runs(#[serde(with = "super::wire::gaps")] Vec<u32>),
}

impl TokenSet {
    /// Whether the set is a list of accepted ids or of runs: [`or_token_set`] sets its ids
    /// one by one, zeroing a blank buffer first, so a buffer allocated zeroed is passed as
    /// not blank for it (a bitset or a rejected list is copied over a blank one instead).
    pub(crate) fn is_list(&self) -> bool {
        matches!(self, TokenSet::Accepted(_) | TokenSet::Runs(_))
    }

    /// The ids of the set, ascending, as [`or_token_set`] applies it (`text_bits`: every
    /// text token, `sorted`: [`TokenTrie::sorted`]).
    #[cfg(test)]
    pub(crate) fn ids(&self, text_bits: &[u32], sorted: &[u32]) -> Vec<u32> {
        let mut bits = vec![0u32; text_bits.len()];
        or_token_set(
            &mut bits,
            &mut true,
            self,
            text_bits,
            sorted,
            &mut Vec::new(),
        );
        set_bits(&bits)
    }
}

impl Default for TokenSet {
    /// No token.
    fn default() -> Self {
        TokenSet::Accepted(Vec::new())
    }
}

/// A node's token set is a list (of accepted or of rejected ids) only when it holds at most
/// `words / LIST_PER_WORDS` ids (`words`: the bitmask length); a bitset otherwise. Applying
/// a list costs about 1 ns an id (scattered bit updates), a bitset about 0.25 ns a word.
pub(super) const LIST_PER_WORDS: usize = 4;

/// A node's token set is [`TokenSet::Runs`] when that is smaller than its list, or when it
/// has at most `words * RUNS_IDS_PER_WORD` ids in at most `words / LIST_PER_WORDS / 2`
/// runs: applied one id at a time like a list (about 1 ns an id, a few microseconds at
/// most), in a few hundred bytes where a bitset takes `4 × words` (most of an eager
/// grammar's masks were such bitsets: 16 KiB each on Llama 3.1).
pub(super) const RUNS_IDS_PER_WORD: usize = 1;

/// ORs a precomputed token set into `bitmask`; when `blank` (the buffer holds garbage), a
/// bitset or rejected-list set is copied in instead, and the buffer is no longer blank.
/// `sorted`: the trie's tokens by position ([`TokenTrie::sorted`]), for
/// [`TokenSet::Runs`].
pub(crate) fn or_token_set(
    bitmask: &mut [u32],
    blank: &mut bool,
    set: &TokenSet,
    text_bits: &[u32],
    sorted: &[u32],
    scratch: &mut Vec<u32>,
) {
    match set {
        TokenSet::Accepted(ids) => {
            if *blank {
                bitmask.fill(0);
                *blank = false;
            }
            for &id in ids {
                bitmask[(id / 32) as usize] |= 1 << (id % 32);
            }
        }
        TokenSet::Runs(bounds) => {
            if *blank {
                bitmask.fill(0);
                *blank = false;
            }
            for r in bounds.chunks_exact(2) {
                for &id in &sorted[r[0] as usize..r[1] as usize] {
                    bitmask[(id / 32) as usize] |= 1 << (id % 32);
                }
            }
        }
        TokenSet::Bitset(bits) => {
            if *blank {
                bitmask.copy_from_slice(bits);
                *blank = false;
            } else {
                for (w, b) in bitmask.iter_mut().zip(bits.iter()) {
                    *w |= b;
                }
            }
        }
        TokenSet::Rejected(ids) => {
            if *blank {
                bitmask.copy_from_slice(text_bits);
                for &id in ids {
                    bitmask[(id / 32) as usize] &= !(1 << (id % 32));
                }
                *blank = false;
                return;
            }
            scratch.clear();
            scratch.extend_from_slice(text_bits);
            for &id in ids {
                scratch[(id / 32) as usize] &= !(1 << (id % 32));
            }
            for (w, b) in bitmask.iter_mut().zip(scratch.iter()) {
                *w |= b;
            }
        }
    }
}

/// The smallest form of the token set `bits` (`count` text tokens set, `words` words).
pub(crate) fn token_set(
    trie: &TokenTrie,
    bits: Box<[u32]>,
    count: usize,
    words: usize,
) -> TokenSet {
    let rejected_count = trie.token_count() - count;
    // The rejected form lists every text token that is not accepted (uncertain ones too).
    // A list is applied one scattered bit at a time (about 1 ns an id), a bitset a word
    // at a time with SIMD (about 0.25 ns a word): lists only up to a quarter of the words.
    let list_max = words / LIST_PER_WORDS;
    if count <= list_max && count <= rejected_count {
        TokenSet::Accepted(set_bits(&bits))
    } else if rejected_count <= list_max {
        // The text tokens not set, a word at a time (ascending).
        let mut rej: Vec<u32> = Vec::with_capacity(rejected_count);
        for (w, &text) in trie.text_ids.iter().enumerate() {
            let mut x = text & !bits.get(w).copied().unwrap_or(0);
            while x != 0 {
                rej.push(w as u32 * 32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        TokenSet::Rejected(rej)
    } else {
        TokenSet::Bitset(bits)
    }
}

/// The indices of the set bits, ascending.
pub(super) fn set_bits(bits: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    // A short list's bitmask is nearly all zero words: they are passed eight at a time
    // (one OR of a chunk, which the compiler vectorizes) rather than one by one.
    const CHUNK: usize = 8;
    for (c, chunk) in bits.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(0, |a, &w| a | w) == 0 {
            continue;
        }
        for (i, &word) in chunk.iter().enumerate() {
            let mut x = word;
            while x != 0 {
                out.push((c * CHUNK + i) as u32 * 32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Vocabulary;

    /// The set bits' indices come out ascending, every one and no other, wherever they
    /// fall: at both ends of a word, in the words between runs of zero words (whole chunks
    /// of eight, which are passed at once), in the last words past the final whole chunk.
    #[test]
    fn set_bits_lists_each_set_bit_once_in_order() {
        for words in [0usize, 1, 7, 8, 9, 17, 4741] {
            let mut bits = vec![0u32; words];
            let mut want = Vec::new();
            // Chunks 1, 4, 7... of eight words stay zero; the others have bits (bit 31 of
            // each of their words, and scattered ones).
            let zero_chunk = |id: u32| id / 32 / 8 % 3 == 1;
            for id in (0..words as u32 * 32)
                .filter(|&i| !zero_chunk(i) && (i % 97 == 0 || i % 1013 < 2 || i % 32 == 31))
            {
                bits[id as usize / 32] |= 1 << (id % 32);
                want.push(id);
            }
            assert_eq!(set_bits(&bits), want, "{words} words");
        }
    }

    /// A set of almost every text token is held as the list of the others, ascending,
    /// without special tokens, stop tokens or empty tokens (which are not text tokens).
    #[test]
    fn a_rejected_list_names_exactly_the_text_tokens_not_set() {
        let mut tokens: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| format!("t{}", i * 7919 % 3001).into_bytes())
            .collect();
        tokens[10] = b"<special>".to_vec();
        tokens[2999] = b"</s>".to_vec();
        tokens[500] = Vec::new();
        let vocab = Vocabulary::from_token_bytes(&tokens, &[10, 2999], &[2999]).unwrap();
        let trie = TokenTrie::new(&vocab);
        let words = vocab.bitmask_words();
        let mut bits = vec![u32::MAX; words].into_boxed_slice();
        let unset = [0u32, 31, 32, 33, 640, 1777, 2998];
        for &id in &unset {
            bits[(id / 32) as usize] &= !(1 << (id % 32));
        }
        // Bits of tokens that are not text (special, stop, empty) unset too: only text
        // tokens are listed.
        for id in [10u32, 500, 2999] {
            bits[(id / 32) as usize] &= !(1 << (id % 32));
        }
        let count = trie
            .sorted
            .iter()
            .filter(|&&id| bits[(id / 32) as usize] >> (id % 32) & 1 == 1)
            .count();
        match token_set(&trie, bits, count, words) {
            TokenSet::Rejected(ids) => assert_eq!(ids, unset),
            other => panic!("not a rejected list: {other:?}"),
        }
    }
}
