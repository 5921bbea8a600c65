//! Masks shared across grammars: every grammar compiled by one [`crate::GrammarCompiler`]
//! (and its clones) looks node masks up here by the canonical structure of the node's future
//! (see `Automaton::class_keys`), so the string body, number, whitespace or free-text masks
//! that recur in every JSON schema and structural tag are computed once per vocabulary.

use super::cache::NodeMask;
use super::counted::CountedBase;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// A bounded map from structure keys to masks. Once `capacity` bytes are held, new masks
/// are still returned to the caller but no longer kept.
#[derive(Debug)]
pub(crate) struct SharedMasks {
    map: RwLock<FxHashMap<Box<[u64]>, Arc<NodeMask>>>,
    /// Base walks of counted repetitions (`mask::counted`), by `counted::base_key`.
    bases: RwLock<FxHashMap<Box<[u64]>, Arc<CountedBase>>>,
    bytes: AtomicUsize,
    capacity: usize,
}

impl SharedMasks {
    pub(crate) fn new(capacity: usize) -> Self {
        SharedMasks {
            map: RwLock::new(FxHashMap::default()),
            bases: RwLock::new(FxHashMap::default()),
            bytes: AtomicUsize::new(0),
            capacity,
        }
    }

    /// The mask stored under `key`, if any.
    pub(crate) fn get(&self, key: &[u64]) -> Option<Arc<NodeMask>> {
        get_in(&self.map, key)
    }

    /// Stores `mask` under `key` (unless full); returns the stored mask (another thread's,
    /// when it stored one first).
    pub(crate) fn insert(&self, key: &[u64], mask: Arc<NodeMask>) -> Arc<NodeMask> {
        let size = mask.memory_bytes();
        self.insert_in(&self.map, key, mask, size)
    }

    /// The counted base walk stored under `key`, if any.
    pub(crate) fn get_base(&self, key: &[u64]) -> Option<Arc<CountedBase>> {
        get_in(&self.bases, key)
    }

    /// Stores `base` under `key` (unless full); returns the stored one.
    pub(crate) fn insert_base(&self, key: &[u64], base: Arc<CountedBase>) -> Arc<CountedBase> {
        let size = base.memory_bytes();
        self.insert_in(&self.bases, key, base, size)
    }

    /// Stores `value` (`bytes` of heap) under `key` in `map` unless the capacity would be
    /// passed; returns the value stored under `key` (another thread's, when it stored one
    /// first).
    fn insert_in<T>(&self, map: &Keyed<T>, key: &[u64], value: Arc<T>, bytes: usize) -> Arc<T> {
        let size = bytes + key.len() * 8 + 64;
        if self.bytes.load(Ordering::Relaxed) + size > self.capacity {
            return value;
        }
        let mut map = map.write().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = map.get(key) {
            return v.clone();
        }
        self.bytes.fetch_add(size, Ordering::Relaxed);
        map.insert(key.into(), value.clone());
        value
    }

    /// Bytes held (masks and keys).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of masks held.
    pub(crate) fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// A map from structure keys to shared values.
type Keyed<T> = RwLock<FxHashMap<Box<[u64]>, Arc<T>>>;

/// The value stored under `key` in `map`, if any.
fn get_in<T>(map: &Keyed<T>, key: &[u64]) -> Option<Arc<T>> {
    map.read()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .cloned()
}
