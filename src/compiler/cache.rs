//! The whole-grammar cache of a [`GrammarCompiler`] (XGrammar's `cache_enabled` /
//! `cache_limit_bytes`): compiling the same source again returns the same
//! `Arc<CompiledGrammar>`.
//!
//! Keyed by (kind, source text, options): the kind of front end (`"ebnf"`, `"json_schema"`,
//! `"regex"`, `"structural_tag"`, `"builtin_json"`), the source as given (a JSON Schema or
//! structural tag as its compact JSON text, so key order counts), and the front end's
//! options together with the compiler's own (precompute mode and limits, which clones of a
//! compiler may change while sharing its cache). On by default with no byte limit, as in
//! XGrammar (`cache_enabled=True, cache_limit_bytes=-1`); with a limit, the least recently
//! used grammars are dropped until the cache fits (a grammar larger than the limit is
//! returned and not kept). A grammar's size is [`CompiledGrammar::memory_bytes`] when it
//! was compiled: masks computed later on first use (lazy precompute) are not counted.
//!
//! Concurrent compiles of one key compile once: the first caller compiles, the others
//! wait for its result. A failed compile is not kept (each caller then gets its own error).

use super::{CompiledGrammar, GrammarCompiler};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

/// What a cache entry is keyed by: (kind, source text, options).
type Key = (&'static str, String, String);

/// One key's slot: filled once compiled; its mutex is held while compiling, so that other
/// callers of the same key wait instead of compiling again.
type Slot = Arc<Mutex<Option<Arc<CompiledGrammar>>>>;

/// Figures of a compiler's grammar cache ([`GrammarCompiler::grammar_cache_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrammarCacheStats {
    /// Grammars held.
    pub entries: usize,
    /// Their bytes, as counted when each was compiled.
    pub size_bytes: usize,
    /// Compiles answered from the cache (waiting for another caller's compile included).
    pub hits: u64,
    /// Grammars actually compiled through the cache (failed compiles included).
    pub compiles: u64,
}

#[derive(Debug)]
struct Entry {
    slot: Slot,
    /// Bytes counted for it (0 until compiled).
    bytes: usize,
    /// The cache's clock at its last use.
    used: u64,
}

#[derive(Debug, Default)]
struct State {
    entries: FxHashMap<Key, Entry>,
    bytes: usize,
    clock: u64,
    hits: u64,
    compiles: u64,
}

/// The cache itself, shared by a compiler and its clones.
#[derive(Debug)]
pub(crate) struct GrammarCache {
    enabled: bool,
    limit: Option<usize>,
    state: Mutex<State>,
}

impl GrammarCache {
    pub(crate) fn new(enabled: bool, limit: Option<usize>) -> Self {
        GrammarCache {
            enabled,
            limit,
            state: Mutex::new(State::default()),
        }
    }

    /// A new, empty cache with the same settings.
    pub(crate) fn emptied(&self) -> Self {
        GrammarCache::new(self.enabled, self.limit)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops entries, least recently used first, until the total fits the limit.
    fn evict(&self, st: &mut State) {
        let Some(limit) = self.limit else { return };
        while st.bytes > limit {
            // O(entries) per eviction: caches hold hundreds of grammars, not millions.
            let Some(key) = st
                .entries
                .iter()
                .filter(|(_, e)| e.bytes > 0)
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = st.entries.remove(&key) {
                st.bytes -= e.bytes;
            }
        }
    }
}

impl GrammarCompiler {
    /// Turns the whole-grammar cache on or off (on by default, as XGrammar's
    /// `cache_enabled=True`). Starts a new, empty cache, shared with later clones; the
    /// byte limit is kept.
    pub fn with_cache_enabled(mut self, enabled: bool) -> Self {
        self.grammar_cache = Arc::new(GrammarCache::new(enabled, self.grammar_cache.limit));
        self
    }

    /// Bounds the whole-grammar cache to `limit` bytes (`None`, the default, is unlimited,
    /// XGrammar's `cache_limit_bytes=-1`); past it, the least recently used grammars are
    /// dropped. Starts a new, empty cache, shared with later clones.
    pub fn with_cache_limit_bytes(mut self, limit: Option<usize>) -> Self {
        self.grammar_cache = Arc::new(GrammarCache::new(self.grammar_cache.enabled, limit));
        self
    }

    /// The byte limit of the whole-grammar cache (`None`: unlimited).
    pub fn cache_limit_bytes(&self) -> Option<usize> {
        self.grammar_cache.limit
    }

    /// Bytes held by the compiler's caches (XGrammar's `get_cache_size_bytes`): the
    /// whole-grammar cache, counted as each grammar's [`CompiledGrammar::memory_bytes`] when
    /// it was compiled, plus the content-keyed mask cache shared across grammars
    /// ([`GrammarCompiler::mask_cache_stats`]; a mask a cached grammar also holds is counted
    /// in both), plus the rule automata shared across grammars
    /// ([`GrammarCompiler::rule_automaton_cache_stats`]).
    pub fn cache_size_bytes(&self) -> usize {
        self.grammar_cache.state().bytes
            + self.shared.memory_bytes()
            + self.rule_automata.memory_bytes()
    }

    /// Empties the whole-grammar cache, the content-keyed mask cache and the cache of rule
    /// automata (grammars already handed out live on in their `Arc`s, with the masks they
    /// hold).
    pub fn clear_cache(&self) {
        {
            let mut st = self.grammar_cache.state();
            st.entries.clear();
            st.bytes = 0;
        }
        self.shared.clear();
        self.rule_automata.clear();
    }

    /// Entries, bytes, hits and compiles of the whole-grammar cache.
    pub fn grammar_cache_stats(&self) -> GrammarCacheStats {
        let st = self.grammar_cache.state();
        GrammarCacheStats {
            entries: st.entries.values().filter(|e| e.bytes > 0).count(),
            size_bytes: st.bytes,
            hits: st.hits,
            compiles: st.compiles,
        }
    }

    /// Compiles through the cache: the grammar of (`kind`, the (source, options) that
    /// `key()` writes, and this compiler's precompute mode and limits) if held, else
    /// `compile()`'s, kept. `key()` is called only when the cache is enabled (writing a
    /// large schema or tag out is a few percent of its compile).
    pub(crate) fn cached<E>(
        &self,
        kind: &'static str,
        key: impl FnOnce() -> (String, String),
        compile: impl FnOnce() -> Result<Arc<CompiledGrammar>, E>,
    ) -> Result<Arc<CompiledGrammar>, E> {
        let _compile = crate::mask::background::ForegroundCall::enter();
        let cache = &self.grammar_cache;
        if !cache.enabled {
            return compile();
        }
        let (source, options) = key();
        let key: Key = (
            kind,
            source,
            format!("{options}|{:?}|{:?}", self.precompute, self.limits),
        );
        let slot = {
            let mut st = cache.state();
            st.clock += 1;
            let clock = st.clock;
            let e = st.entries.entry(key.clone()).or_insert_with(|| Entry {
                slot: Arc::default(),
                bytes: 0,
                used: clock,
            });
            e.used = clock;
            e.slot.clone()
        };
        // Held while compiling: callers of the same key wait here (others go on).
        let mut filled = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = filled.as_ref() {
            cache.state().hits += 1;
            return Ok(g.clone());
        }
        cache.state().compiles += 1;
        let result = compile();
        let mut guard = cache.state();
        let st = &mut *guard;
        match &result {
            Ok(g) => {
                *filled = Some(g.clone());
                let bytes = g.memory_bytes().max(1);
                // Still ours (not cleared or evicted meanwhile): count it.
                if let Some(e) = st.entries.get_mut(&key) {
                    if Arc::ptr_eq(&e.slot, &slot) && e.bytes == 0 {
                        e.bytes = bytes;
                        st.bytes += bytes;
                    }
                }
                cache.evict(st);
            }
            Err(_) => {
                if st
                    .entries
                    .get(&key)
                    .is_some_and(|e| Arc::ptr_eq(&e.slot, &slot))
                {
                    st.entries.remove(&key);
                }
            }
        }
        result
    }
}
