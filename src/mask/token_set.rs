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
            set_ids(bitmask, ids);
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

/// A token set built from parts: a composed mask's accepted tokens (the OR of its callees'
/// sets and its own walk's tokens). While the parts are lists of at most `words /
/// LIST_PER_WORDS` ids in all (the largest accepted list [`token_set`] keeps), their ids are
/// gathered in a list; past that, or at the first bitset or rejected list, in a bitmask of
/// the vocabulary. A short composition (a number's next digit, a key's next letter, with
/// the whitespace and the closers after it) then never allocates, zeroes, counts or scans a
/// whole-vocabulary bitmask: that was most of such a cold mask's cost (4,740 words on
/// Qwen3). The result is the same either way ([`Composer::finish`]).
pub(crate) struct Composer<'t> {
    trie: &'t TokenTrie,
    /// Every text token's bit (the vocabulary's `ceil(vocab_size / 32)` words).
    text_bits: &'t [u32],
    /// The ids so far, unsorted and maybe repeated, while the set is a list.
    ids: Vec<u32>,
    /// The bitmask, once the set is no list (`None` before).
    bits: Option<Box<[u32]>>,
    /// Whether `bits` was allocated zeroed and nothing has been set in it yet: a bitset
    /// or a rejected list is then copied over it (`or_token_set` with `blank`, which
    /// there means "whatever the buffer holds is overwritten"). Meaningless before
    /// `bits` exists.
    blank: bool,
    scratch: Vec<u32>,
}

impl<'t> Composer<'t> {
    /// An empty set over `trie`'s vocabulary (`text_bits`: every text token's bit).
    pub(crate) fn new(trie: &'t TokenTrie, text_bits: &'t [u32]) -> Self {
        Composer {
            trie,
            text_bits,
            ids: Vec::new(),
            bits: None,
            blank: true,
            scratch: Vec::new(),
        }
    }

    /// The most ids gathered as a list.
    fn list_max(&self) -> usize {
        self.text_bits.len() / LIST_PER_WORDS
    }

    /// Whether the set is still gathered as a list (no bitmask made).
    #[cfg(test)]
    pub(crate) fn is_list(&self) -> bool {
        self.bits.is_none()
    }

    /// The bitmask, made from the ids gathered so far at the first call (which empties
    /// `ids` and sets `blank` when there were none).
    fn dense(&mut self) -> &mut [u32] {
        if self.bits.is_none() {
            // A zeroed buffer takes a bitset or a rejected list as it is.
            self.blank = self.ids.is_empty();
        }
        let (ids, words) = (&mut self.ids, self.text_bits.len());
        self.bits.get_or_insert_with(|| {
            let mut bits = vec![0u32; words].into_boxed_slice();
            set_ids(&mut bits, ids);
            *ids = Vec::new();
            bits
        })
    }

    /// Adds the tokens of `set`.
    pub(crate) fn or(&mut self, set: &TokenSet) {
        let (trie, text_bits) = (self.trie, self.text_bits);
        if self.bits.is_none() {
            let room = self.list_max().saturating_sub(self.ids.len());
            match set {
                TokenSet::Accepted(ids) if ids.len() <= room => {
                    self.ids.extend_from_slice(ids);
                    return;
                }
                TokenSet::Runs(bounds)
                    if bounds
                        .chunks_exact(2)
                        .map(|r| r[1].saturating_sub(r[0]) as usize)
                        .sum::<usize>()
                        <= room =>
                {
                    for r in bounds.chunks_exact(2) {
                        self.ids
                            .extend_from_slice(&trie.sorted[r[0] as usize..r[1] as usize]);
                    }
                    return;
                }
                _ => {}
            }
        }
        self.dense();
        // A zeroed buffer is not blank for a list (it is set into as it is).
        let mut blank = self.blank && !set.is_list();
        let mut scratch = std::mem::take(&mut self.scratch);
        let bits = self.dense();
        or_token_set(bits, &mut blank, set, text_bits, &trie.sorted, &mut scratch);
        self.blank = false;
        self.scratch = scratch;
    }

    /// Adds the tokens at the trie positions of the half-open ranges `ranges`.
    pub(crate) fn add_positions(&mut self, ranges: &[(u32, u32)]) {
        let sorted = &self.trie.sorted;
        let n: usize = ranges
            .iter()
            .map(|&(a, z)| z.saturating_sub(a) as usize)
            .sum();
        if self.bits.is_none() && self.ids.len() + n <= self.list_max() {
            for &(a, z) in ranges {
                self.ids.extend_from_slice(&sorted[a as usize..z as usize]);
            }
            return;
        }
        let trie = self.trie;
        set_positions(trie, ranges, self.dense());
        self.blank = false;
    }

    /// Takes out the tokens whose first byte is marked in `first` (256 entries).
    pub(crate) fn remove_first_bytes(&mut self, first: &[bool]) {
        let trie = self.trie;
        match self.bits.as_deref_mut() {
            None => self.ids.retain(|&id| match trie.pos_of.get(id as usize) {
                Some(&p) if p != u32::MAX => {
                    !trie.bytes_at(p).first().is_some_and(|&b| first[b as usize])
                }
                _ => true,
            }),
            Some(bits) => clear_positions(trie, &trie.first_byte_ranges(first), bits),
        }
    }

    /// The set in its smallest form ([`token_set`]), and `uncertain` (trie positions,
    /// ascending) without the tokens the set holds.
    pub(crate) fn finish(mut self, uncertain: &mut Vec<u32>) -> TokenSet {
        let sorted = &self.trie.sorted;
        let words = self.text_bits.len();
        if self.bits.is_none() {
            self.ids.sort_unstable();
            self.ids.dedup();
            let ids = &self.ids;
            uncertain.retain(|&p| ids.binary_search(&sorted[p as usize]).is_err());
            let count = ids.len();
            if count <= self.trie.token_count() - count {
                return TokenSet::Accepted(std::mem::take(&mut self.ids));
            }
        }
        self.dense();
        let bits = self.bits.take().unwrap_or_default();
        uncertain.retain(|&p| {
            let id = sorted[p as usize];
            bits[(id / 32) as usize] >> (id % 32) & 1 == 0
        });
        let count = bits.iter().map(|w| w.count_ones() as usize).sum();
        token_set(self.trie, bits, count, words)
    }
}

/// Sets the bit of each id of `ids` in `bits` (cost: one scattered bit per id).
fn set_ids(bits: &mut [u32], ids: &[u32]) {
    for &id in ids {
        bits[(id / 32) as usize] |= 1 << (id % 32);
    }
}

/// Sets in `bits` the id of every token at the trie positions of `ranges` (cost: one
/// scattered bit per position).
pub(super) fn set_positions(trie: &TokenTrie, ranges: &[(u32, u32)], bits: &mut [u32]) {
    for p in ranges.iter().flat_map(|&(a, z)| a..z) {
        let id = trie.sorted[p as usize];
        bits[(id / 32) as usize] |= 1 << (id % 32);
    }
}

/// Clears in `bits` the id of every token at the trie positions of `ranges` (cost: one
/// scattered bit per position).
pub(super) fn clear_positions(trie: &TokenTrie, ranges: &[std::ops::Range<u32>], bits: &mut [u32]) {
    for p in ranges.iter().flat_map(|r| r.clone()) {
        let id = trie.sorted[p as usize];
        bits[(id / 32) as usize] &= !(1 << (id % 32));
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

    /// A composition gives the set a bitmask of its parts gives (the same ids in the same
    /// smallest form, and the same uncertain tokens left), whether it stays a list (short
    /// accepted lists and runs) or turns to a bitmask (a bitset part, a rejected list, or
    /// lists past the list size), with tokens taken out by first byte and walk tokens
    /// added after.
    #[test]
    fn a_composition_equals_the_bitmask_of_its_parts() {
        // 12,000 text tokens over 30 first bytes, a special token and an empty one.
        let mut tokens: Vec<Vec<u8>> = (0..12_000u32)
            .map(|i| format!("{}{}", (b'a' + (i * 7 % 30) as u8) as char, i).into_bytes())
            .collect();
        tokens.push(b"<special>".to_vec());
        tokens.push(Vec::new());
        let vocab = Vocabulary::from_token_bytes(&tokens, &[12_000], &[12_000]).unwrap();
        let trie = TokenTrie::new(&vocab);
        let words = vocab.bitmask_words();
        let mut text_bits = vec![0u32; words];
        for &id in &trie.sorted {
            text_bits[(id / 32) as usize] |= 1 << (id % 32);
        }
        let mut seed = 12345u32;
        let mut next = move |m: u32| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (seed >> 8) % m
        };
        let mut list = |n: usize| -> Vec<u32> {
            let mut v: Vec<u32> = (0..n).map(|_| trie.sorted[next(12_000) as usize]).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let bitset = |ids: &[u32]| {
            let mut b = vec![0u32; words].into_boxed_slice();
            for &id in ids {
                b[(id / 32) as usize] |= 1 << (id % 32);
            }
            b
        };
        let list_max = words / LIST_PER_WORDS;
        let (a, b, big) = (list(8), list(12), list(list_max - 5));
        let runs = vec![10u32, 14, 200, 203];
        let long_runs = vec![100u32, 100 + list_max as u32];
        // Tokens none of which is taken out below: with the walk's eight, past the size.
        let mut b_tokens: Vec<u32> =
            trie.sorted[trie.first_byte_range(b'b').start as usize..][..list_max - 4].to_vec();
        b_tokens.sort_unstable();
        let cases: Vec<(&str, Vec<TokenSet>, bool)> = vec![
            (
                "runs past the list size",
                vec![TokenSet::Accepted(a.clone()), TokenSet::Runs(long_runs)],
                false,
            ),
            (
                "a rejected list first",
                vec![TokenSet::Rejected(b.clone()), TokenSet::Accepted(a.clone())],
                false,
            ),
            (
                "walk tokens past the list size",
                vec![TokenSet::Accepted(b_tokens)],
                false,
            ),
            (
                "lists",
                vec![TokenSet::Accepted(a.clone()), TokenSet::Accepted(b.clone())],
                true,
            ),
            (
                "lists and runs",
                vec![TokenSet::Accepted(a.clone()), TokenSet::Runs(runs)],
                true,
            ),
            (
                "a bitset first",
                vec![TokenSet::Bitset(bitset(&b)), TokenSet::Accepted(a.clone())],
                false,
            ),
            (
                "a bitset after",
                vec![TokenSet::Accepted(a.clone()), TokenSet::Bitset(bitset(&b))],
                false,
            ),
            (
                "past the list size",
                vec![TokenSet::Accepted(big), TokenSet::Accepted(b.clone())],
                false,
            ),
            (
                "a rejected list",
                vec![TokenSet::Accepted(a.clone()), TokenSet::Rejected(b.clone())],
                false,
            ),
            ("nothing", vec![], true),
        ];
        // Tokens starting with 'a' or 'c' are taken out, then two walk ranges added.
        let mut first = vec![false; 256];
        first[b'a' as usize] = true;
        first[b'c' as usize] = true;
        let ranges: Vec<std::ops::Range<u32>> = [b'a', b'c']
            .iter()
            .map(|&c| trie.first_byte_range(c))
            .collect();
        let walk = [(ranges[0].start, ranges[0].start + 3), (11_990, 11_995)];
        for (name, parts, stays_list) in cases {
            let mut want = vec![0u32; words];
            let mut blank = false;
            let mut composer = Composer::new(&trie, &text_bits);
            for part in &parts {
                or_token_set(
                    &mut want,
                    &mut blank,
                    part,
                    &text_bits,
                    &trie.sorted,
                    &mut Vec::new(),
                );
                composer.or(part);
            }
            for p in ranges.iter().flat_map(|r| r.clone()) {
                let id = trie.sorted[p as usize];
                want[(id / 32) as usize] &= !(1 << (id % 32));
            }
            composer.remove_first_bytes(&first);
            for p in walk.iter().flat_map(|&(a, z)| a..z) {
                let id = trie.sorted[p as usize];
                want[(id / 32) as usize] |= 1 << (id % 32);
            }
            composer.add_positions(&walk);
            assert_eq!(composer.is_list(), stays_list, "{name}");
            // Uncertain positions: some of them accepted, and so left out.
            let uncertain: Vec<u32> = (0..12_000).step_by(37).collect();
            let want_uncertain: Vec<u32> = uncertain
                .iter()
                .copied()
                .filter(|&p| {
                    let id = trie.sorted[p as usize];
                    want[(id / 32) as usize] >> (id % 32) & 1 == 0
                })
                .collect();
            assert!(want_uncertain.len() < uncertain.len(), "{name}");
            let mut got_uncertain = uncertain.clone();
            let got = composer.finish(&mut got_uncertain);
            let count = want.iter().map(|w| w.count_ones() as usize).sum();
            assert_eq!(
                got,
                token_set(&trie, want.into_boxed_slice(), count, words),
                "{name}"
            );
            assert_eq!(got_uncertain, want_uncertain, "{name}");
        }

        // A vocabulary of few text tokens among many special ones: a list of most of its
        // text tokens is held as the list of the others.
        let tokens: Vec<Vec<u8>> = (0..12_000u32)
            .map(|i| format!("t{i}").into_bytes())
            .collect();
        let special: Vec<u32> = (150..12_000).collect();
        let vocab = Vocabulary::from_token_bytes(&tokens, &special, &[]).unwrap();
        let trie = TokenTrie::new(&vocab);
        let words = vocab.bitmask_words();
        let mut text_bits = vec![0u32; words];
        for &id in &trie.sorted {
            text_bits[(id / 32) as usize] |= 1 << (id % 32);
        }
        let mut composer = Composer::new(&trie, &text_bits);
        composer.or(&TokenSet::Accepted((0..90).collect()));
        assert!(composer.is_list());
        let mut uncertain = vec![trie.pos_of[5], trie.pos_of[120]];
        uncertain.sort_unstable();
        assert_eq!(
            composer.finish(&mut uncertain),
            TokenSet::Rejected((90..150).collect())
        );
        assert_eq!(uncertain, [trie.pos_of[120]]);
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
