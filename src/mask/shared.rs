//! Masks shared across grammars: every grammar compiled by one [`crate::GrammarCompiler`]
//! (and its clones) looks node masks up here by the *content* of what the mask depends on,
//! the canonical structure of the node's future (see `Automaton::class_key`: the automaton
//! reachable from the node's mask class, with finality and follow bytes), so that the
//! string body, number, whitespace, key or free-text masks that recur in every JSON schema,
//! in every tool of a structural tag and in every tag of a compiler are computed once per
//! vocabulary. The key is the whole serialised structure, not a hash of it: equal keys mean
//! equal masks (two nodes of any two grammars over one vocabulary with the same key have the
//! same mask), so a lookup is exact.
//!
//! Bounded: entries (node masks, and base walks of counted repetitions) are counted with
//! their keys; an insert that would pass the capacity first drops the least recently used
//! entries until the cache holds at most three quarters of it. Thread safe (one `RwLock`;
//! lookups take the read lock and stamp the entry's last use atomically).

use super::cache::NodeMask;
use super::counted::CountedBase;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// A shared value: a node mask or the base walk of a counted repetition (their keys never
/// coincide: `counted::base_key` starts with a tag no structure key starts with).
#[derive(Debug, Clone)]
enum Value {
    /// A node mask and its content hash (`mask::intern::content_hash`), so that a grammar
    /// taking it interns it without hashing it again.
    Mask(Arc<NodeMask>, u64),
    Base(Arc<CountedBase>),
}

#[derive(Debug)]
struct Entry {
    value: Value,
    /// Bytes counted for it (value, key and bookkeeping).
    size: usize,
    /// The cache's clock at its last use.
    used: AtomicU64,
}

/// A bounded, least-recently-used map from structure keys to masks.
#[derive(Debug)]
pub(crate) struct SharedMasks {
    map: RwLock<FxHashMap<Box<[u64]>, Entry>>,
    bytes: AtomicUsize,
    masks: AtomicUsize,
    clock: AtomicU64,
    capacity: usize,
}

/// Bytes counted per entry besides its value and key (map slot, `Arc`, stamps).
const ENTRY_OVERHEAD: usize = 64;

impl SharedMasks {
    /// An empty cache that holds at most `capacity` bytes (0: nothing is kept).
    pub(crate) fn new(capacity: usize) -> Self {
        SharedMasks {
            map: RwLock::new(FxHashMap::default()),
            bytes: AtomicUsize::new(0),
            masks: AtomicUsize::new(0),
            clock: AtomicU64::new(0),
            capacity,
        }
    }

    /// The value under `key`, stamped as just used.
    fn get_value(&self, key: &[u64]) -> Option<Value> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let e = map.get(key)?;
        e.used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        Some(e.value.clone())
    }

    /// The mask stored under `key`, if any.
    pub(crate) fn get(&self, key: &[u64]) -> Option<(Arc<NodeMask>, u64)> {
        match self.get_value(key)? {
            Value::Mask(m, hash) => Some((m, hash)),
            Value::Base(_) => None,
        }
    }

    /// Stores `mask` (`hash`: its content hash) under `key` (unless larger than the whole
    /// capacity); returns the stored mask and its hash (another thread's, when it stored
    /// one first).
    pub(crate) fn insert(
        &self,
        key: &[u64],
        mask: Arc<NodeMask>,
        hash: u64,
    ) -> (Arc<NodeMask>, u64) {
        let size = mask.memory_bytes();
        match self.insert_value(key, Value::Mask(mask.clone(), hash), size) {
            Value::Mask(m, hash) => (m, hash),
            Value::Base(_) => (mask, hash),
        }
    }

    /// The counted base walk stored under `key`, if any.
    pub(crate) fn get_base(&self, key: &[u64]) -> Option<Arc<CountedBase>> {
        match self.get_value(key)? {
            Value::Base(b) => Some(b),
            Value::Mask(..) => None,
        }
    }

    /// Stores `base` under `key` (unless larger than the whole capacity); returns the
    /// stored one.
    pub(crate) fn insert_base(&self, key: &[u64], base: Arc<CountedBase>) -> Arc<CountedBase> {
        // Its body DFA counted in full: the cache may hold it for no other base.
        let size = base.memory_bytes() + base.dfa().memory_bytes();
        match self.insert_value(key, Value::Base(base.clone()), size) {
            Value::Base(b) => b,
            Value::Mask(..) => base,
        }
    }

    /// Stores `value` (`bytes` of heap) under `key`, first dropping the least recently
    /// used entries when the capacity would be passed; returns the value stored under `key`
    /// (another thread's, when it stored one first). A value larger than the whole capacity
    /// is returned and not kept.
    fn insert_value(&self, key: &[u64], value: Value, bytes: usize) -> Value {
        let size = bytes + key.len() * 8 + ENTRY_OVERHEAD;
        if size > self.capacity {
            return value;
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = map.get(key) {
            return e.value.clone();
        }
        if self.bytes.load(Ordering::Relaxed) + size > self.capacity {
            self.evict(
                &mut map,
                self.capacity / 4 * 3 - size.min(self.capacity / 4 * 3),
            );
        }
        self.bytes.fetch_add(size, Ordering::Relaxed);
        if matches!(value, Value::Mask(..)) {
            self.masks.fetch_add(1, Ordering::Relaxed);
        }
        let used = AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed));
        map.insert(
            key.into(),
            Entry {
                value: value.clone(),
                size,
                used,
            },
        );
        value
    }

    /// Drops entries, least recently used first, until at most `target` bytes are held.
    /// Cost: a sort of the entries, once per quarter of the capacity inserted.
    fn evict(&self, map: &mut FxHashMap<Box<[u64]>, Entry>, target: usize) {
        let mut by_use: Vec<(u64, &[u64])> = map
            .iter()
            .map(|(k, e)| (e.used.load(Ordering::Relaxed), &**k))
            .collect();
        by_use.sort_unstable_by_key(|&(u, _)| u);
        let mut held = self.bytes.load(Ordering::Relaxed);
        let mut drop: Vec<Box<[u64]>> = Vec::new();
        for (_, k) in by_use {
            if held <= target {
                break;
            }
            if let Some(e) = map.get(k) {
                held -= e.size;
                drop.push(k.into());
            }
        }
        for k in drop {
            if let Some(e) = map.remove(&k) {
                self.bytes.fetch_sub(e.size, Ordering::Relaxed);
                if matches!(e.value, Value::Mask(..)) {
                    self.masks.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Drops every entry (grammars holding a mask keep their copy).
    pub(crate) fn clear(&self) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.clear();
        self.bytes.store(0, Ordering::Relaxed);
        self.masks.store(0, Ordering::Relaxed);
    }

    /// Bytes held (masks, base walks and keys).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of masks held (base walks not counted).
    pub(crate) fn len(&self) -> usize {
        self.masks.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(ids: usize) -> Arc<NodeMask> {
        Arc::new(NodeMask {
            accepted: super::super::cache::TokenSet::Accepted((0..ids as u32).collect()),
            uncertain: Vec::new(),
        })
    }

    #[test]
    fn past_the_capacity_the_least_recently_used_masks_go() {
        let one = mask(100).memory_bytes() + 8 + ENTRY_OVERHEAD;
        let c = SharedMasks::new(one * 4);
        for k in 0..4u64 {
            c.insert(&[k], mask(100), 0);
        }
        assert_eq!((c.len(), c.memory_bytes()), (4, one * 4));
        // Key 0 used again: 1, 2 and 3 are older.
        assert!(c.get(&[0]).is_some());
        c.insert(&[4], mask(100), 0);
        assert!(c.memory_bytes() <= one * 4 / 4 * 3);
        assert!(c.get(&[0]).is_some() && c.get(&[4]).is_some());
        assert!(c.get(&[1]).is_none() && c.get(&[2]).is_none());
        assert_eq!(c.len() * one, c.memory_bytes());
        // Too large for the whole cache: returned, not kept.
        let big = mask(10_000);
        assert!(Arc::ptr_eq(&c.insert(&[9], big.clone(), 7).0, &big));
        assert!(c.get(&[9]).is_none());
        c.clear();
        assert_eq!((c.len(), c.memory_bytes()), (0, 0));
    }
}
