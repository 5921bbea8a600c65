//! One copy per content of a grammar's large masks. Mask classes are bisimulation classes:
//! two nodes whose futures differ get two classes, yet they often accept exactly the same
//! tokens (the states inside an enum's values, of a pattern's repeated groups, of the
//! many objects of one shape). Measured on MaskBench's `Github_medium---o42892` (Llama
//! 3.1, eager): 1,373 bitset masks of 16 KiB, 211 distinct, 22 of its 23.7 MB. Each node
//! mask and virtual-node mask a grammar stores (not the context masks, which are small
//! lists) passes through [`MaskInterner::intern_hashed`], which hands back the copy it
//! already holds when one has the same content.

use super::cache::NodeMask;
use super::token_set::TokenSet;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};
use xxhash_rust::xxh3::Xxh3;

/// Heap bytes from which a mask is interned. A policy threshold: the large masks (bitsets,
/// long lists) are most of a grammar's bytes, while the many small ones (a literal's next
/// letters, a few runs) would cost a hash and an entry each for little.
pub(crate) const MIN_BYTES: usize = 1024;

/// Bytes counted per interned mask (map slot, `Arc`, vector).
const ENTRY_BYTES: usize = 48;

/// A grammar's large masks by content (see the module documentation). Thread safe; the
/// lock is held for one hash lookup and at most a few comparisons, after a mask walk that
/// took far longer.
#[derive(Debug, Default)]
pub(crate) struct MaskInterner {
    map: Mutex<FxHashMap<u64, Vec<Arc<NodeMask>>>>,
}

impl MaskInterner {
    /// `m`, or the copy of it already held (the same tokens in the same form, the same
    /// uncertain positions), and the bytes the grammar holds anew for it: 0 for a copy
    /// already held; for `m` kept, its heap bytes and its entry here. A mask under
    /// [`MIN_BYTES`] is returned as it is with its heap bytes (an upper bound: another
    /// class may hold the same `Arc`, from the shared cache).
    pub(crate) fn intern(&self, m: Arc<NodeMask>) -> (Arc<NodeMask>, usize) {
        let hash = content_hash(&m);
        self.intern_hashed(m, hash)
    }

    /// As [`Self::intern`], `hash` being `m`'s [`content_hash`] (a mask from the shared
    /// cache carries it).
    pub(crate) fn intern_hashed(&self, m: Arc<NodeMask>, hash: u64) -> (Arc<NodeMask>, usize) {
        let bytes = m.memory_bytes();
        if bytes < MIN_BYTES {
            return (m, bytes);
        }
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let same = map.entry(hash).or_default();
        if let Some(old) = same.iter().find(|o| ***o == *m) {
            return (old.clone(), 0);
        }
        same.push(m.clone());
        (m, bytes + ENTRY_BYTES)
    }

    /// Heap bytes of the table itself (the masks are counted where they are used).
    pub(crate) fn memory_bytes(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values().map(|v| v.len()).sum::<usize>() * ENTRY_BYTES
    }
}

/// A 64-bit hash (XXH3) of a mask's form and content: a 16 KiB bitset in about 1 µs; 0
/// for a mask under [`MIN_BYTES`] (never interned).
pub(crate) fn content_hash(m: &NodeMask) -> u64 {
    if m.memory_bytes() < MIN_BYTES {
        return 0;
    }
    let (tag, words): (u8, &[u32]) = match &m.accepted {
        TokenSet::Accepted(v) => (1, v),
        TokenSet::Rejected(v) => (2, v),
        TokenSet::Bitset(b) => (3, b),
        TokenSet::Runs(v) => (4, v),
    };
    let mut h = Xxh3::new();
    h.update(&[tag]);
    h.update(&(words.len() as u64).to_le_bytes());
    h.update(as_bytes(words));
    h.update(as_bytes(&m.uncertain));
    h.digest()
}

/// The bytes of `words` (in the machine's byte order: the hash lives in one process).
fn as_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: a `u32` has no padding and every byte pattern is a valid `u8`; the slice
    // covers exactly the words' memory and borrows them for its lifetime.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bitset(words: usize, set: &[usize]) -> Arc<NodeMask> {
        let mut b = vec![0u32; words];
        for &i in set {
            b[i / 32] |= 1 << (i % 32);
        }
        Arc::new(NodeMask {
            accepted: TokenSet::Bitset(b.into_boxed_slice()),
            uncertain: vec![],
        })
    }

    #[test]
    fn equal_large_masks_share_one_copy_and_others_stay_apart() {
        let interner = MaskInterner::default();
        let (a, new_a) = interner.intern(bitset(4096, &[1, 5, 900]));
        assert_eq!(new_a, 4096 * 4 + ENTRY_BYTES);
        let (b, new_b) = interner.intern(bitset(4096, &[1, 5, 900]));
        assert_eq!(new_b, 0, "the second copy is not kept");
        assert!(Arc::ptr_eq(&a, &b));
        let (c, new_c) = interner.intern(bitset(4096, &[1, 5, 901]));
        assert!(new_c > 0 && !Arc::ptr_eq(&a, &c));
        // The same tokens with other uncertain positions are another mask.
        let mut d = (*bitset(4096, &[1, 5, 900])).clone();
        d.uncertain = vec![7];
        let (d, new_d) = interner.intern(Arc::new(d));
        assert!(new_d > 0 && !Arc::ptr_eq(&a, &d));
        assert_eq!(interner.memory_bytes(), 3 * ENTRY_BYTES);
        // Small masks are not interned.
        let (e, new_e) = interner.intern(bitset(8, &[3]));
        let (f, new_f) = interner.intern(bitset(8, &[3]));
        assert!(new_e == 32 && new_f == 32 && !Arc::ptr_eq(&e, &f));
    }
}
