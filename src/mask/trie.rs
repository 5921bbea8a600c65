//! The vocabulary as a byte trie in array form (depth-first order).
//!
//! Only *text* tokens are in the trie: non-empty tokens that are neither special nor stop
//! tokens (a stop token only ever stops, even when its bytes are ordinary text). Tokens are
//! sorted by bytes; node `i`'s subtree is `i..subtree_end[i]`, so a walk that fails at a
//! node skips its whole subtree in one step. Tokens ending at a node, and tokens of a
//! subtree, are contiguous ranges of the sorted token list.

use crate::vocab::Vocabulary;

/// Tokens of at least this many bytes are *long*: the trie indexes, per node, its
/// children with a long token below ([`TokenTrie::for_each_child_deeper`]).
const LONG_TOKEN: u16 = 32;

/// Byte `b` as a set of [`TokenTrie::bytes_below`]: its own bit for ASCII bytes 1 to 127,
/// bit 0 for byte 0 and the bytes from 0x80 on.
fn byte_bit(b: u8) -> [u64; 2] {
    let b = if b >= 0x80 { 0 } else { b };
    let mut set = [0u64; 2];
    set[(b >> 6) as usize] = 1 << (b & 63);
    set
}

/// States of [`utf8_step`]: 0 at a character boundary; 1, 2, 3 continuation bytes
/// still to read (any of `80`–`BF`); 4 after `E0` (next `A0`–`BF`), 5 after `ED` (next
/// `80`–`9F`), 6 after `F0` (next `90`–`BF`), 7 after `F4` (next `80`–`8F`).
const UTF8_STATES: u8 = 8;

/// One byte of a well-formed UTF-8 reading (Unicode Table 3-7) from state `s` (see
/// [`UTF8_STATES`]), with ASCII bytes 1 to 127 allowed at a boundary: the next state, or
/// `None` when the byte cannot come there (byte 0 neither).
fn utf8_step(s: u8, b: u8) -> Option<u8> {
    let cont = (0x80..=0xBF).contains(&b);
    match (s, b) {
        (0, 0x01..=0x7F) => Some(0),
        (0, 0xC2..=0xDF) => Some(1),
        (0, 0xE0) => Some(4),
        (0, 0xE1..=0xEC | 0xEE..=0xEF) => Some(2),
        (0, 0xED) => Some(5),
        (0, 0xF0) => Some(6),
        (0, 0xF1..=0xF3) => Some(3),
        (0, 0xF4) => Some(7),
        (1..=3, _) if cont => Some(s - 1),
        (4, 0xA0..=0xBF) | (5, 0x80..=0x9F) => Some(1),
        (6, 0x90..=0xBF) | (7, 0x80..=0x8F) => Some(2),
        _ => None,
    }
}

/// A byte trie over the vocabulary's text tokens.
#[derive(Clone, Debug)]
pub struct TokenTrie {
    /// Text token ids sorted by their bytes (ties by id).
    pub(crate) sorted: Vec<u32>,
    /// Per node: the byte on the edge into it.
    pub(crate) byte: Vec<u8>,
    /// Per node: its depth (1 for children of the root).
    pub(crate) depth: Vec<u16>,
    /// Per node: one past the last node of its subtree.
    pub(crate) subtree_end: Vec<u32>,
    /// Per node (plus a sentinel): index in `sorted` of the first token of its subtree.
    pub(crate) tok_start: Vec<u32>,
    /// Per node: index in `sorted` one past the tokens that end exactly at this node.
    pub(crate) tok_here_end: Vec<u32>,
    /// `pos_of[id]`: position of token `id` in `sorted`, or `u32::MAX`.
    pub(crate) pos_of: Vec<u32>,
    /// The tokens' bytes in `sorted`'s order, end to end: position `p`'s are
    /// `sorted_bytes[sorted_start[p]..sorted_start[p + 1]]` ([`TokenTrie::bytes_at`]).
    /// Walks that visit tokens in trie order (context masks, uncertain tokens) then read
    /// memory in order instead of one vocabulary entry per token here and there.
    sorted_bytes: Vec<u8>,
    sorted_start: Vec<u32>,
    /// Text tokens (ids, ascending) with a `"` byte: those that can close a JSON string.
    pub(crate) quote_tokens: Vec<u32>,
    /// Text tokens (ids, ascending) with two `"` bytes, or a `"` and a `\`: those that can
    /// close a JSON object key other than by their raw bytes up to their only quote (see
    /// `matcher::keys`).
    pub(crate) multi_quote_tokens: Vec<u32>,
    /// Text tokens (ids, ascending) with three `"` bytes, or a `"` and a `\`: those that
    /// can close a JSON object key when they start inside a string that is not a key.
    pub(crate) three_quote_tokens: Vec<u32>,
    /// Text tokens (ids, ascending) with a `,`: those that may write a member separator
    /// (see `matcher::keys`, closed objects).
    pub(crate) comma_tokens: Vec<u32>,
    /// Text tokens (ids, ascending) with a `}` or `]` followed later by a `"` or `,`:
    /// those that may close a container and go on with a key or a `,` of an outer object.
    pub(crate) closer_tokens: Vec<u32>,
    /// The other quoted tokens (one `"`, no `\`), by their bytes before the quote: the
    /// key such a token closes when written inside a key.
    pub(crate) key_closers: rustc_hash::FxHashMap<Box<[u8]>, Vec<u32>>,
    /// Per byte value (256 entries): the root child for that first byte, or `u32::MAX`
    /// when no token starts with it.
    pub(crate) roots: Vec<u32>,
    /// `first_start[b]` (257 entries): the number of text tokens whose first byte is below
    /// `b`, so that [`Self::first_byte_range`] is `first_start[b]..first_start[b + 1]` (the
    /// tokens are sorted by their bytes) and a run of bytes' tokens one subtraction (each
    /// cold mask weighs a DFA row's runs: `mask::cache::dominant_target`).
    first_start: Vec<u32>,
    /// The largest of `depth` (0 for an empty trie): the longest token, in bytes.
    pub(crate) max_depth: usize,
    /// The vocabulary slices ([`super::slices::SLICES`], in that order) that mask walks take
    /// whole.
    pub(crate) slices: Vec<super::slices::Slice>,
    /// Per node: the depth of the deepest node of its subtree (its longest token); made
    /// with the trie, like the slices, so that no compile pays for it
    /// ([`TokenTrie::deepest`]).
    deepest: Vec<u16>,
    /// Per node: the bytes of its subtree, its own edge's included (bit `b % 64` of word
    /// `b / 64` for ASCII byte `b` from 1 to 127; bit 0 stands for byte 0 and every byte
    /// from 0x80 on). A mask walk at a DFA node whose byte run holds every byte of a
    /// child's set, for as many bytes as the child's longest token, accepts the child's
    /// whole subtree without a visit (`mask::cache::tables::byte_run`). 16 bytes per node (5.3 MB
    /// on Qwen3's 333,009 nodes).
    bytes_below: Vec<[u64; 2]>,
    /// One bit per node: every token of its subtree, read from the node's own byte on, is
    /// ASCII bytes 1 to 127 and well-formed UTF-8 characters (Unicode Table 3-7), the last
    /// of which may be cut short. A walk at a node that loops on its run's ASCII bytes and
    /// on every multibyte character takes such a subtree whole
    /// ([`TokenTrie::whole_chars_below`]).
    whole_chars: Vec<u64>,
    /// The children with a long token below ([`LONG_TOKEN`] bytes or more) of every node
    /// that has one below, end to end; `long_at` holds, ascending by node (the root:
    /// `u32::MAX`, last), each such node and the range of its children there
    /// ([`TokenTrie::for_each_child_deeper`]).
    long_children: Vec<u32>,
    long_at: Vec<(u32, u32, u32)>,
    /// Per position of `sorted`: the token's UTF-8 lead bytes (bytes that are not
    /// continuation bytes `80`–`BF`): its characters, for a token of a slice. A counted
    /// rule of one character per iteration restarts once per character
    /// (`counted::counted_base`).
    pub(crate) leads: Vec<u16>,
    /// One bit per text token id (XGrammar's bitmask layout, up to the largest id of the
    /// trie): the tokens a rejected list is taken from, a word at a time.
    pub(crate) text_ids: Box<[u32]>,
}

impl TokenTrie {
    /// Builds the trie of `vocab`'s text tokens. Cost: a sort of the vocabulary
    /// (~20–60 ms for 128k–262k tokens).
    pub fn new(vocab: &Vocabulary) -> Self {
        let n = vocab.tokenizer_size();
        let mut sorted: Vec<u32> = (0..n as u32)
            .filter(|&id| {
                !vocab.is_special(id)
                    && !vocab.is_stop_token(id)
                    && vocab.token_bytes(id).is_some_and(|b| !b.is_empty())
            })
            .collect();
        let bytes_of = |id: u32| vocab.token_bytes(id).unwrap_or(&[]);
        sorted.sort_by(|&a, &b| bytes_of(a).cmp(bytes_of(b)).then(a.cmp(&b)));
        let mut pos_of = vec![u32::MAX; n];
        for (p, &id) in sorted.iter().enumerate() {
            pos_of[id as usize] = p as u32;
        }
        let mut byte = Vec::new();
        let mut depth = Vec::new();
        let mut tok_start = Vec::new();
        let mut tok_here_end: Vec<u32> = Vec::new();
        // Stack of open nodes on the current path: (node index).
        let mut path: Vec<u32> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut subtree_end: Vec<u32> = Vec::new();
        for (p, &id) in sorted.iter().enumerate() {
            let b = bytes_of(id);
            let lcp = prev.iter().zip(b).take_while(|(x, y)| x == y).count();
            // Close nodes deeper than the common prefix.
            while path.len() > lcp {
                let node = path.pop().unwrap_or(0);
                subtree_end[node as usize] = byte.len() as u32;
            }
            for (d, &c) in b.iter().enumerate().skip(lcp) {
                let node = byte.len() as u32;
                byte.push(c);
                depth.push((d + 1).min(u16::MAX as usize) as u16);
                tok_start.push(p as u32);
                tok_here_end.push(p as u32);
                subtree_end.push(0);
                path.push(node);
            }
            // The token ends at the last node of its path.
            if let Some(&last) = path.last() {
                tok_here_end[last as usize] = p as u32 + 1;
            }
            prev = b;
        }
        while let Some(node) = path.pop() {
            subtree_end[node as usize] = byte.len() as u32;
        }
        tok_start.push(sorted.len() as u32);
        let mut roots = vec![u32::MAX; 256];
        let mut r = 0usize;
        while r < byte.len() {
            roots[byte[r] as usize] = r as u32;
            r = subtree_end[r] as usize;
        }
        let mut first_start = vec![0u32; 257];
        for (b, &r) in roots.iter().enumerate() {
            let count = match r {
                u32::MAX => 0,
                r => tok_start[subtree_end[r as usize] as usize] - tok_start[r as usize],
            };
            first_start[b + 1] = first_start[b] + count;
        }
        let mut quote_tokens = Vec::new();
        let mut multi_quote_tokens = Vec::new();
        let mut three_quote_tokens = Vec::new();
        let mut key_closers: rustc_hash::FxHashMap<Box<[u8]>, Vec<u32>> = Default::default();
        let mut comma_tokens = Vec::new();
        let mut closer_tokens = Vec::new();
        let mut by_id = sorted.clone();
        by_id.sort_unstable();
        for &id in &by_id {
            let b = bytes_of(id);
            if b.contains(&b',') {
                comma_tokens.push(id);
            }
            if let Some(c) = b.iter().position(|&c| c == b'}' || c == b']') {
                if b[c..].iter().any(|&c| c == b'"' || c == b',') {
                    closer_tokens.push(id);
                }
            }
            let quotes = b.iter().filter(|&&c| c == b'"').count();
            if quotes > 0 {
                quote_tokens.push(id);
                let backslash = b.contains(&b'\\');
                if quotes > 2 || backslash {
                    three_quote_tokens.push(id);
                }
                if quotes > 1 || backslash {
                    multi_quote_tokens.push(id);
                } else {
                    let q = b.iter().position(|&c| c == b'"').unwrap_or(0);
                    key_closers.entry(b[..q].into()).or_default().push(id);
                }
            }
        }
        let mut sorted_start = Vec::with_capacity(sorted.len() + 1);
        let mut sorted_bytes =
            Vec::with_capacity(sorted.iter().map(|&id| bytes_of(id).len()).sum());
        for &id in &sorted {
            sorted_start.push(sorted_bytes.len() as u32);
            sorted_bytes.extend_from_slice(bytes_of(id));
        }
        sorted_start.push(sorted_bytes.len() as u32);
        let mut trie = TokenTrie {
            sorted_bytes,
            sorted_start,
            slices: Vec::new(),
            deepest: Vec::new(),
            bytes_below: Vec::new(),
            whole_chars: Vec::new(),
            long_children: Vec::new(),
            long_at: Vec::new(),
            text_ids: {
                let words = sorted.iter().max().map_or(0, |&m| m as usize / 32 + 1);
                let mut bits = vec![0u32; words].into_boxed_slice();
                for &id in &sorted {
                    bits[(id / 32) as usize] |= 1 << (id % 32);
                }
                bits
            },
            leads: sorted
                .iter()
                .map(|&id| {
                    let lead = bytes_of(id).iter().filter(|&&b| b & 0xC0 != 0x80).count();
                    lead.min(u16::MAX as usize) as u16
                })
                .collect(),
            max_depth: depth.iter().copied().max().unwrap_or(0) as usize,
            quote_tokens,
            multi_quote_tokens,
            three_quote_tokens,
            comma_tokens,
            closer_tokens,
            key_closers,
            roots,
            first_start,
            sorted,
            byte,
            depth,
            subtree_end,
            tok_start,
            tok_here_end,
            pos_of,
        };
        trie.slices = super::slices::SLICES
            .iter()
            .map(|&x| super::slices::compute(&trie, x, &bytes_of))
            .collect();
        trie.deepest = trie.subtree_depths();
        trie.bytes_below = trie.subtree_bytes();
        trie.whole_chars = trie.subtree_whole_chars();
        trie.index_long_children();
        trie
    }

    /// Fills [`TokenTrie::long_children`] from `deepest`: one pass over the children of
    /// the nodes with a long token below (a few thousand nodes: Qwen3 has about 250 tokens
    /// of 32 bytes or more).
    fn index_long_children(&mut self) {
        let long = |c: u32| self.deepest[c as usize] >= LONG_TOKEN;
        let mut parents: Vec<u32> = (0..self.byte.len() as u32).filter(|&i| long(i)).collect();
        parents.push(u32::MAX);
        let mut children = Vec::new();
        let mut at = Vec::with_capacity(parents.len());
        for p in parents {
            let start = children.len() as u32;
            self.for_each_child((p != u32::MAX).then_some(p), |_, c| {
                if long(c) {
                    children.push(c);
                }
            });
            at.push((p, start, children.len() as u32));
        }
        self.long_children = children;
        self.long_at = at;
    }

    /// [`TokenTrie::for_each_child`] restricted to the children whose longest token below
    /// is longer than `more_than` bytes. When that means a long token
    /// ([`LONG_TOKEN`] bytes or more), only the node's long children are looked at, from
    /// an index: a walk that follows the few tokens long enough to reach something far
    /// away (`automaton::defer::NearStubs`) skips the hundreds of short children of the
    /// nodes on their paths (the children of four spaces, say).
    pub(crate) fn for_each_child_deeper(
        &self,
        t: Option<u32>,
        more_than: u16,
        mut f: impl FnMut(u8, u32),
    ) {
        let deeper = |c: u32| self.deepest[c as usize] > more_than;
        if more_than >= LONG_TOKEN - 1 {
            let node = t.unwrap_or(u32::MAX);
            let Ok(k) = self.long_at.binary_search_by_key(&node, |&(p, _, _)| p) else {
                return;
            };
            let (_, a, b) = self.long_at[k];
            for &c in &self.long_children[a as usize..b as usize] {
                if deeper(c) {
                    f(self.byte[c as usize], c);
                }
            }
            return;
        }
        self.for_each_child(t, |b, c| {
            if deeper(c) {
                f(b, c)
            }
        });
    }

    /// Per node: the length of the longest token of its subtree.
    pub(crate) fn deepest(&self) -> &[u16] {
        &self.deepest
    }

    /// [`TokenTrie::deepest`], made in one pass over the nodes, last to first, each taking
    /// its children's.
    fn subtree_depths(&self) -> Vec<u16> {
        let n = self.byte.len();
        let mut deepest = self.depth.clone();
        for i in (0..n).rev() {
            let mut c = i + 1;
            while c < self.subtree_end[i] as usize {
                deepest[i] = deepest[i].max(deepest[c]);
                c = self.subtree_end[c] as usize;
            }
        }
        deepest
    }

    /// Per node: the bytes of its subtree ([`TokenTrie::bytes_below`]'s field).
    pub(crate) fn bytes_below(&self) -> &[[u64; 2]] {
        &self.bytes_below
    }

    /// [`TokenTrie::bytes_below`], made like [`TokenTrie::subtree_depths`].
    fn subtree_bytes(&self) -> Vec<[u64; 2]> {
        let n = self.byte.len();
        let mut below: Vec<[u64; 2]> = self.byte.iter().map(|&b| byte_bit(b)).collect();
        for i in (0..n).rev() {
            let mut c = i + 1;
            while c < self.subtree_end[i] as usize {
                below[i] = [below[i][0] | below[c][0], below[i][1] | below[c][1]];
                c = self.subtree_end[c] as usize;
            }
        }
        below
    }

    /// Whether every token below node `i`, from its byte on, is ASCII bytes 1 to 127 and
    /// well-formed UTF-8 characters, the last maybe cut short (see the field).
    #[inline]
    pub(crate) fn whole_chars_below(&self, i: usize) -> bool {
        self.whole_chars
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    /// [`TokenTrie::whole_chars`], made like [`TokenTrie::subtree_depths`]: per node, the
    /// UTF-8 decoder states ([`utf8_step`]) from which every token of its subtree reads
    /// well, from its children's.
    fn subtree_whole_chars(&self) -> Vec<u64> {
        let n = self.byte.len();
        let mut from = vec![0u8; n];
        let mut bits = vec![0u64; n.div_ceil(64)];
        for i in (0..n).rev() {
            let mut ok = 0u8;
            for s in 0..UTF8_STATES {
                let Some(t) = utf8_step(s, self.byte[i]) else {
                    continue;
                };
                let mut c = i + 1;
                let mut all = true;
                while all && c < self.subtree_end[i] as usize {
                    all = from[c] >> t & 1 != 0;
                    c = self.subtree_end[c] as usize;
                }
                ok |= (all as u8) << s;
            }
            from[i] = ok;
            bits[i / 64] |= ((ok & 1) as u64) << (i % 64);
        }
        bits
    }

    /// The children of node `t` (`None`: the root), in byte order: (byte, child).
    pub(crate) fn for_each_child(&self, t: Option<u32>, mut f: impl FnMut(u8, u32)) {
        match t {
            None => {
                for (b, &c) in self.roots.iter().enumerate() {
                    if c != u32::MAX {
                        f(b as u8, c);
                    }
                }
            }
            Some(t) => {
                let mut c = t as usize + 1;
                while c < self.subtree_end[t as usize] as usize {
                    f(self.byte[c], c as u32);
                    c = self.subtree_end[c] as usize;
                }
            }
        }
    }

    /// The bytes of the token at position `p` of [`Self::sorted`] (`p` < the number of
    /// text tokens), read from a copy laid out in that order.
    #[inline]
    pub(crate) fn bytes_at(&self, p: u32) -> &[u8] {
        let (a, b) = (
            self.sorted_start[p as usize] as usize,
            self.sorted_start[p as usize + 1] as usize,
        );
        &self.sorted_bytes[a..b]
    }

    /// Number of trie nodes.
    pub fn node_count(&self) -> usize {
        self.byte.len()
    }

    /// Positions in [`Self::sorted`] of the tokens whose first byte is `b` (a contiguous
    /// range, empty when none).
    #[inline]
    pub(crate) fn first_byte_range(&self, b: u8) -> std::ops::Range<u32> {
        self.first_start[b as usize]..self.first_start[b as usize + 1]
    }

    /// The non-empty [`Self::first_byte_range`]s of the bytes marked in `first` (256
    /// entries), ascending.
    pub(crate) fn first_byte_ranges(&self, first: &[bool]) -> Vec<std::ops::Range<u32>> {
        (0..=255u8)
            .filter(|&b| first[b as usize])
            .map(|b| self.first_byte_range(b))
            .filter(|r| !r.is_empty())
            .collect()
    }

    /// The number of text tokens whose first byte is in `bytes` (within `0..256`, not
    /// reversed).
    #[inline]
    pub(crate) fn first_bytes_tokens(&self, bytes: std::ops::Range<usize>) -> u32 {
        debug_assert!(bytes.start <= bytes.end, "{bytes:?}");
        self.first_start[bytes.end] - self.first_start[bytes.start]
    }

    /// Number of text tokens (those in the trie).
    pub fn token_count(&self) -> usize {
        self.sorted.len()
    }

    /// Heap memory held, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.sorted.capacity() * 4
            + self.byte.capacity()
            + (self.depth.capacity() + self.deepest.capacity() + self.leads.capacity()) * 2
            + self.bytes_below.capacity() * 16
            + self.whole_chars.capacity() * 8
            + self.subtree_end.capacity() * 4
            + self.tok_start.capacity() * 4
            + self.tok_here_end.capacity() * 4
            + self.pos_of.capacity() * 4
            + self.sorted_bytes.capacity()
            + self.sorted_start.capacity() * 4
            + self.roots.capacity() * 4
            + self.first_start.capacity() * 4
            + self.slices.iter().map(|s| s.memory_bytes()).sum::<usize>()
            + self.text_ids.len() * 4
            + self.long_children.capacity() * 4
            + self.long_at.capacity() * 12
            + self.quote_tokens.capacity() * 4
            + self.multi_quote_tokens.capacity() * 4
            + self.three_quote_tokens.capacity() * 4
            + (self.comma_tokens.capacity() + self.closer_tokens.capacity()) * 4
            + self
                .key_closers
                .iter()
                .map(|(k, v)| k.len() + v.capacity() * 4 + 48)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trie_shape() {
        let v = Vocabulary::from_token_bytes(
            &[&b"ab"[..], b"a", b"b", b"abc", b"", b"<s>", b"ab"],
            &[5],
            &[],
        )
        .unwrap();
        let t = TokenTrie::new(&v);
        // Sorted: a(1) ab(0) ab(6) abc(3) b(2); empty and special excluded.
        assert_eq!(t.sorted, vec![1, 0, 6, 3, 2]);
        // Nodes: a, b(under a), c, b(root child).
        assert_eq!(t.byte, vec![b'a', b'b', b'c', b'b']);
        assert_eq!(t.depth, vec![1, 2, 3, 1]);
        assert_eq!(t.subtree_end, vec![3, 3, 3, 4]);
        assert_eq!(t.tok_start, vec![0, 1, 3, 4, 5]);
        assert_eq!(t.tok_here_end, vec![1, 3, 4, 5]);
        assert_eq!(t.pos_of[6], 2);
        assert_eq!(t.pos_of[5], u32::MAX);
        assert_eq!(t.first_byte_range(b'a'), 0..4);
        assert_eq!(t.first_byte_range(b'b'), 4..5);
        assert!(t.first_byte_range(b'c').is_empty());
    }

    /// Each byte's range holds exactly the positions of the tokens that start with it, on
    /// a vocabulary whose tokens start with bytes 0 to 250 (251 to 255 start none).
    #[test]
    fn first_byte_ranges_hold_the_tokens_starting_with_their_byte() {
        let tokens: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| vec![(i * 7 % 251) as u8, (i % 13) as u8, (i / 13) as u8])
            .collect();
        let v = Vocabulary::from_token_bytes(&tokens, &[], &[]).unwrap();
        let t = TokenTrie::new(&v);
        for b in 0..=255u8 {
            let want: Vec<u32> = (0..t.token_count() as u32)
                .filter(|&p| t.bytes_at(p)[0] == b)
                .collect();
            let got: Vec<u32> = t.first_byte_range(b).collect();
            assert_eq!(got, want, "byte {b}");
        }
        assert!(t.first_byte_range(252).is_empty() && !t.first_byte_range(0).is_empty());
        for (lo, hi) in [(0, 256), (0, 0), (5, 6), (40, 200), (251, 256)] {
            let want: u32 = (lo..hi)
                .map(|b| t.first_byte_range(b as u8).len() as u32)
                .sum();
            assert_eq!(t.first_bytes_tokens(lo..hi), want, "{lo}..{hi}");
        }
        assert_eq!(t.first_bytes_tokens(0..256) as usize, t.token_count());
    }

    /// The children deeper than a bound are those of the plain listing whose longest
    /// token below is longer, for every node and bound, below and above the long-token
    /// length (where the index of long children answers).
    #[test]
    fn children_deeper_than_a_bound_are_the_listed_ones_filtered() {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for n in 1..=80usize {
            tokens.push(vec![b' '; n]);
            tokens.push([vec![b' '; n], b"x".to_vec()].concat());
            if n % 7 == 0 {
                tokens.push([vec![b'-'; n], vec![b'a' + (n % 26) as u8; n]].concat());
            }
        }
        let v = Vocabulary::from_token_bytes(&tokens, &[], &[]).unwrap();
        let t = TokenTrie::new(&v);
        assert!(t.max_depth >= 2 * LONG_TOKEN as usize);
        let mut long_listed = 0;
        let nodes = std::iter::once(None).chain((0..t.byte.len() as u32).map(Some));
        for node in nodes {
            for more_than in [0u16, 5, LONG_TOKEN - 2, LONG_TOKEN - 1, LONG_TOKEN, 50, 200] {
                let mut want = Vec::new();
                t.for_each_child(node, |b, c| {
                    if t.deepest()[c as usize] > more_than {
                        want.push((b, c));
                    }
                });
                let mut got = Vec::new();
                t.for_each_child_deeper(node, more_than, |b, c| got.push((b, c)));
                assert_eq!(got, want, "node {node:?}, more than {more_than}");
                if more_than >= LONG_TOKEN - 1 {
                    long_listed += got.len();
                }
            }
        }
        assert!(long_listed > 100, "{long_listed}");
    }
}
