//! The grammar compiler: owns [`GrammarCompiler`] (a vocabulary, its trie and the caches
//! shared across grammars) and [`CompiledGrammar`] (a grammar's automata and mask tables).
//!
//! Every `compile_*` entry point is in `entry.rs`: each calls a front end's pure lowering
//! (EBNF, JSON Schema, regex, structural tag: input, options and [`Limits`] in, grammar IR
//! or the front end's error out), then the one pipeline of `pipeline.rs` (validate →
//! resolve token terminals → lower → automata → masks). Which kind of mask a node gets is
//! planned in `crate::mask::plan`, not here. Errors of every entry point are one
//! [`CompileError`] (`src/error.rs`, the crate's error, which no front end needs the compiler to name). A compile returns an `Arc<CompiledGrammar>` that any
//! number of [`crate::GrammarMatcher`]s, on any threads, share.

use crate::automaton::{rule_cache::RuleAutomatonCache, Automaton, KeyBasis};
use crate::grammar::Grammar;
use crate::limits::{LimitExceeded, Limits};
use crate::mask::background::{BackgroundFill, BackgroundStatus};
use crate::mask::cache::{NodeMask, SubtreeMemo};
use crate::mask::counted::CountedBase;
use crate::mask::intern::MaskInterner;
use crate::mask::plan::VirtualKey;
use crate::mask::shared::SharedMasks;
use crate::mask::TokenTrie;
use crate::vocab::Vocabulary;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::{Arc, OnceLock, RwLock};

mod cache;
#[cfg(test)]
mod compact_tests;
mod deferred;
mod entry;
mod machinery;
mod pipeline;
mod serialize;
#[cfg(test)]
mod tests;
pub use crate::automaton::rule_cache::RuleAutomatonCacheStats;
#[allow(deprecated)]
pub use crate::error::{CompileError, RegexCompileError};
use cache::GrammarCache;
pub use cache::GrammarCacheStats;
pub use serialize::{DeserializeError, SerializeError, FORMAT_VERSION};

/// When node masks are computed.
///
/// The default is [`Precompute::Background`]: a serving engine compiles a grammar per
/// request, so compile → first mask is part of time-to-first-token, and the background
/// fill gives a lazy compile's first mask with an eager compile's steady state
/// (`docs/benchmarks.md`, issue 24: side by side with llguidance on MaskBench, compile →
/// first mask p50 0.7–0.8× its own and cold masks included in the mask mean).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precompute {
    /// At compile time, every node, in parallel (rayon). The first mask is then fast, the
    /// compile slow (several times a lazy one; seconds for the largest schemas), and a
    /// grammar over [`Limits::max_memory_bytes`](crate::Limits) fails to compile.
    Eager,
    /// On first use, node by node, by the matcher that needs it. Compiles in about the time
    /// of building the automata.
    Lazy,
    /// The default. Compiles as [`Precompute::Lazy`] does, then computes the masks
    /// [`Precompute::Eager`] would have computed in the background, on the compiler's
    /// background pool (see [`GrammarCompiler::with_background_pool`]); a matcher that
    /// needs a mask the background has not reached yet computes it itself. The fill stops
    /// when the last `Arc<CompiledGrammar>` is dropped, at
    /// [`CompiledGrammar::cancel_background`], before the grammar would hold more than
    /// [`Limits::max_memory_bytes`](crate::Limits), or once its walks have taken
    /// [`Limits::compile_time`](crate::Limits) (the budget of an eager compile; the rest
    /// are then computed on first use, as are masks past the memory limit). Its status:
    /// [`CompiledGrammar::background_status`]. On the default pool, when the process
    /// may use at most two cores, the fill starts no mask while as many matcher steps or
    /// compiles are in progress (so that it never takes a time slice from a decoding loop
    /// on a shared core).
    #[default]
    Background,
}

/// Compiles grammars against one vocabulary.
///
/// Cheap to clone (the vocabulary and its trie are shared).
#[derive(Clone, Debug)]
pub struct GrammarCompiler {
    vocab: Arc<Vocabulary>,
    trie: Arc<TokenTrie>,
    text_bits: Arc<[u32]>,
    precompute: Precompute,
    /// Node masks shared by every grammar this compiler (and its clones) compiles.
    shared: Arc<SharedMasks>,
    limits: Limits,
    /// Whole grammars by (kind, source, options), shared by clones (`compiler::cache`).
    grammar_cache: Arc<GrammarCache>,
    /// Rule automata by content, shared by clones (`automaton::rule_cache`).
    rule_automata: Arc<RuleAutomatonCache>,
    /// The rayon pool compiles run on (`None`: the current one).
    pool: Option<Arc<rayon::ThreadPool>>,
    /// Where [`Precompute::Background`] fills masks after compile; `None`: the default
    /// pool (`mask::background::default_pool`, one thread shared by all compilers).
    background_pool: Option<Arc<rayon::ThreadPool>>,
    /// [`GrammarCompiler::with_deferred_tool_rules`].
    defer_tool_rules: bool,
}

/// A grammar compiled against a vocabulary: its automata and token mask cache.
///
/// Immutable apart from lazily filled masks (thread-safe); `Send + Sync`, shared through an
/// `Arc` by every matcher that decodes with it.
#[derive(Debug)]
pub struct CompiledGrammar {
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) trie: Arc<TokenTrie>,
    /// Bitset (`ceil(vocab_size / 32)` words) of the text tokens: those in the trie.
    pub(crate) text_bits: Arc<[u32]>,
    pub(crate) grammar: Arc<Grammar>,
    pub(crate) aut: Automaton,
    /// Per mask class (see `mask_class`): its mask, once computed; nodes without byte or
    /// call edges keep none.
    pub(crate) masks: Vec<OnceLock<Arc<NodeMask>>>,
    /// The large masks of `masks` and `virtual_masks` by content: classes with equal
    /// masks hold one copy (`mask::intern`).
    pub(crate) interned: MaskInterner,
    /// What the structure keys of mask classes in `shared` are made from, made at the
    /// first key; `None` when masks are not shared (a small vocabulary) or once every mask
    /// is computed.
    pub(crate) key_basis: Option<OnceLock<KeyBasis>>,
    pub(crate) shared: Arc<SharedMasks>,
    /// Per real node: its mask class. Nodes with the same future (bisimilar) share a mask.
    pub(crate) mask_class: Vec<u32>,
    pub(crate) has_mask: Vec<bool>,
    /// `sites[r]`: the nodes with a call edge to rule `r`, ascending.
    pub(crate) sites: Vec<Vec<u32>>,
    /// Per node, per call site of its rule (same order as `sites`): the node's mask in
    /// that caller's context, once computed.
    pub(crate) pair_masks: Vec<OnceLock<Box<[OnceLock<NodeMask>]>>>,
    /// Masks of virtual nodes (counted repetitions), by their shared key.
    pub(crate) virtual_masks: RwLock<FxHashMap<VirtualKey, Arc<NodeMask>>>,
    pub(crate) virtual_pair_masks: RwLock<FxHashMap<(VirtualKey, u32), Arc<NodeMask>>>,
    /// Per counted rule: its virtual masks are derived from per-state base walks
    /// (`mask::counted`) rather than walked one by one with the chart.
    pub(crate) counted_derivable: Vec<bool>,
    /// Base walks of counted rules, by (counted rule index, body state).
    pub(crate) counted_bases: RwLock<FxHashMap<(u32, u32), Arc<CountedBase>>>,
    /// The longest text token, in bytes (bounds how many repetitions one token spans).
    pub(crate) max_token_len: u32,
    /// [`Limits::max_step_items`] of the compiler that built it: each matcher call's
    /// Earley work budget.
    pub(crate) max_step_items: u64,
    /// [`Limits::compile_time`] of that compiler: the budget of the masks one matcher call
    /// computes on first use.
    pub(crate) lazy_budget: Option<std::time::Duration>,
    /// The first mask walk that ran out of its budget (see [`CompiledGrammar::walked`]).
    pub(crate) walk_failed: OnceLock<LimitExceeded>,
    /// Trie subtrees already walked, reused by later node-mask walks (emptied after an
    /// eager precompute).
    pub(crate) subtrees: SubtreeMemo,
    /// Matchers check that no object key repeats in its object (the output is one JSON
    /// value: grammars of [`GrammarCompiler::compile_json_schema`]; see `matcher::keys`).
    pub(crate) unique_keys: bool,
    /// The closed objects whose keys matchers narrow to the names not yet written (with
    /// `unique_keys`; see `matcher::keys`).
    pub(crate) closed_objects: Option<Arc<crate::matcher::ClosedObjects>>,
    /// The fill of [`Precompute::Background`] (`mask::background`): status and cancel flag.
    pub(crate) background_fill: BackgroundFill,
    /// [`Limits::max_memory_bytes`] of the compiler that built it: the background fill
    /// stops before passing it.
    pub(crate) max_memory_bytes: u64,
    /// Under a deferring compile (`compiler::deferred`): this is the stub grammar, and
    /// this holds what builds the full one.
    pub(crate) deferred: Option<Box<deferred::Deferred>>,
}

impl GrammarCompiler {
    /// A compiler for `vocab`. Builds the vocabulary's trie once (a sort: tens of ms for a
    /// 128k–262k vocabulary).
    pub fn new(vocab: impl Into<Arc<Vocabulary>>) -> Self {
        let vocab = vocab.into();
        let trie = TokenTrie::new(&vocab);
        // The trie's text-token bits, to the vocabulary's width.
        let mut bits = vec![0u32; vocab.bitmask_words()];
        let n = trie.text_ids.len().min(bits.len());
        bits[..n].copy_from_slice(&trie.text_ids[..n]);
        GrammarCompiler {
            vocab,
            trie: Arc::new(trie),
            text_bits: bits.into(),
            precompute: Precompute::default(),
            shared: Arc::new(SharedMasks::new(Self::DEFAULT_MASK_CACHE_BYTES)),
            limits: Limits::default(),
            grammar_cache: Arc::new(GrammarCache::new(true, None)),
            rule_automata: Arc::new(RuleAutomatonCache::new(
                Self::DEFAULT_RULE_AUTOMATON_CACHE_BYTES,
            )),
            pool: None,
            background_pool: None,
            defer_tool_rules: true,
        }
    }

    /// Runs every compile of this compiler (and of its later clones) on `pool`, whose
    /// threads compute the node masks in parallel (XGrammar's `max_threads`); by default
    /// compiles run on the caller's current rayon pool (the global one, unless called
    /// inside `ThreadPool::install`).
    pub fn with_thread_pool(mut self, pool: Arc<rayon::ThreadPool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// The default [`GrammarCompiler::with_mask_cache_capacity`]: 256 MiB.
    pub const DEFAULT_MASK_CACHE_BYTES: usize = 256 << 20;

    /// Bounds the masks this compiler shares across grammars (bytes; 0 turns sharing off).
    /// Node masks are keyed by the content they depend on, the structure of what may follow
    /// the node (`mask::shared`), so the masks of structures that recur from grammar to
    /// grammar and from tool to tool (a JSON string body, a number, whitespace, a key, free
    /// text up to a trigger) are computed once and then cost a lookup. Past `bytes`, the
    /// least recently used masks are dropped. Starts a new, empty cache (and a new, empty
    /// whole-grammar cache); [`GrammarCompiler::clear_cache`] empties both, and
    /// [`GrammarCompiler::cache_size_bytes`] counts both.
    pub fn with_mask_cache_capacity(mut self, bytes: usize) -> Self {
        self.shared = Arc::new(SharedMasks::new(bytes));
        // Grammars already compiled hold the old mask cache: a new, empty grammar cache.
        self.grammar_cache = Arc::new(self.grammar_cache.emptied());
        self
    }

    /// The default [`GrammarCompiler::with_rule_automaton_cache_capacity`]: 32 MiB.
    pub const DEFAULT_RULE_AUTOMATON_CACHE_BYTES: usize = 32 << 20;

    /// Bounds the rule automata this compiler shares across grammars (bytes; 0 turns
    /// sharing off). A rule's automaton (its DFA, built by subset construction: most of a
    /// compile's time) is keyed by the rule's content, so the rules that recur from grammar
    /// to grammar (a JSON string body, a number, the rest of an undeclared key, a tool's
    /// arguments) are built once per compiler and then copied; the automata are the same
    /// either way, edge for edge. Past `bytes`, the cache is emptied and refilled. Starts
    /// a new, empty cache, shared with later clones; [`GrammarCompiler::clear_cache`]
    /// empties it and [`GrammarCompiler::cache_size_bytes`] counts it.
    pub fn with_rule_automaton_cache_capacity(mut self, bytes: usize) -> Self {
        self.rule_automata = Arc::new(RuleAutomatonCache::new(bytes));
        self
    }

    /// Entries, bytes, hits and builds of the cache of rule automata
    /// ([`GrammarCompiler::with_rule_automaton_cache_capacity`]).
    pub fn rule_automaton_cache_stats(&self) -> RuleAutomatonCacheStats {
        self.rule_automata.stats()
    }

    /// Bytes and number of masks held by the cache shared across grammars (the bytes
    /// include the base walks of counted repetitions, which are not counted as masks).
    pub fn mask_cache_stats(&self) -> (usize, usize) {
        (self.shared.memory_bytes(), self.shared.len())
    }

    /// Chooses when node masks are computed (default [`Precompute::Background`]).
    pub fn with_precompute(mut self, precompute: Precompute) -> Self {
        self.precompute = precompute;
        self
    }

    /// The thread pool on which [`Precompute::Background`] fills the masks of the grammars
    /// this compiler compiles (default: one thread shared by every compiler given no
    /// pool). Its number of threads bounds the fill's CPU use; fills of several grammars
    /// queue on it. Masks are computed one at a time per task, so a pool of one thread
    /// never holds more than one walk's working memory.
    pub fn with_background_pool(mut self, pool: Arc<rayon::ThreadPool>) -> Self {
        self.background_pool = Some(pool);
        self
    }

    /// Sets the resource limits every compile of this compiler enforces (default
    /// [`Limits::default`]); exceeding one is [`CompileError::Limit`].
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// On by default: [`GrammarCompiler::compile_structural_tag`] builds only the rules the
    /// tag reaches without entering a tool's JSON-Schema arguments (each tool's schema is
    /// still read, so its errors are the compile's). The first time a matcher comes
    /// within one token of a tool's arguments, the grammar with that tool built as well is
    /// compiled (once per set of tools built, shared by every matcher of the grammar) and
    /// the matcher replays its input on it; a call of another tool builds that one. Masks
    /// are exactly those of the whole grammar. Costs: compile → first mask and memory grow
    /// with the tools' names, not their schemas; the step that reaches a tool first pays
    /// that tool's build (about one tool's share of the whole compile, plus the tag's own
    /// rules). Off: the whole grammar at compile, as in 0.x. An error of a later build (a
    /// limit) is reported by the matcher call that needed it
    /// ([`crate::MatcherError::Deferred`], [`crate::TokenRejection::Deferred`]). See
    /// `docs/architecture.md`, "Deferred tool rules".
    pub fn with_deferred_tool_rules(mut self, on: bool) -> Self {
        self.defer_tool_rules = on;
        self
    }

    /// The resource limits this compiler enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The vocabulary grammars are compiled against.
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }
}

impl CompiledGrammar {
    /// Stops this grammar's background fill ([`Precompute::Background`]) at its next mask;
    /// masks not computed by then are computed on first use, as under
    /// [`Precompute::Lazy`]. No effect when no fill is running.
    pub fn cancel_background(&self) {
        self.background_fill.cancel();
    }

    /// Where this grammar's background fill stands.
    pub fn background_status(&self) -> BackgroundStatus {
        self.background_fill.status()
    }

    /// Blocks until this grammar's background fill has ended, and returns how
    /// ([`BackgroundStatus::NotScheduled`] at once when none was scheduled). For benches
    /// and tests; a decoding loop never needs to wait.
    pub fn wait_background(&self) -> BackgroundStatus {
        self.background_fill.wait()
    }

    /// The grammar this was compiled from (before lowering); `to_string()` prints it as EBNF.
    /// With [`CompiledGrammar::checked_keys`], the matcher also checks those key rules
    /// beside it: compiled again on its own, this grammar would let a declared name through
    /// as an undeclared key.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// The key rules that matchers check when a key ends, beside the grammar: per rule (by
    /// name), the declared names its keys must not decode to (RFC 8259 §7 decoding). A
    /// grammar compiled with [`GrammarCompiler::compile_json_schema`] writes the keys of an
    /// object's undeclared properties so: the plain JSON string, whose automaton every
    /// grammar of the compiler shares, instead of a trie of the names in every spelling.
    /// Empty for other grammars.
    pub fn checked_keys(&self) -> &[(String, Vec<String>)] {
        self.aut.key_filters.as_deref().map_or(&[], |f| f.named())
    }

    /// Under [`GrammarCompiler::with_deferred_tool_rules`]: the number of tool argument
    /// rules still deferred in this grammar (built as stubs), and whether a grammar with
    /// some of them built has been compiled from it since (by a matcher that came near a
    /// call); `None` when nothing is deferred (nothing was, or this grammar has every tool
    /// built).
    pub fn deferred_rules(&self) -> Option<(usize, bool)> {
        self.deferred.as_ref().map(|d| (d.stubs(), d.is_built()))
    }

    /// The vocabulary it was compiled against.
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Number of automaton nodes over all rules (helper rules of large repetitions included).
    pub fn node_count(&self) -> usize {
        self.aut.node_count()
    }

    /// Heap bytes of the node masks: one slot per mask class, and each mask once however
    /// many classes hold it (`mask::intern`).
    #[cfg(test)]
    pub(crate) fn node_mask_bytes(&self) -> usize {
        self.node_mask_bytes_seen(&mut FxHashSet::default())
    }

    /// [`Self::node_mask_bytes`], counting only the masks not in `seen`, and adding them
    /// to it.
    fn node_mask_bytes_seen(&self, seen: &mut FxHashSet<*const NodeMask>) -> usize {
        let held: usize = self
            .masks
            .iter()
            .filter_map(|m| m.get())
            .filter(|m| seen.insert(Arc::as_ptr(m)))
            .map(|m| m.memory_bytes())
            .sum();
        self.masks.len() * std::mem::size_of::<OnceLock<Arc<NodeMask>>>() + held
    }

    /// Heap memory of this grammar in bytes: automata plus the masks computed so far (the
    /// shared vocabulary and trie are not counted).
    pub fn memory_bytes(&self) -> usize {
        let aut = self.aut.memory_bytes();
        // Each mask once, whether node masks or virtual masks hold it (`mask::intern`).
        let mut seen = FxHashSet::default();
        let masks: usize = self.node_mask_bytes_seen(&mut seen)
            + self.interned.memory_bytes()
            + self.key_basis_bytes()
            + self.subtrees.memory_bytes();
        let pairs: usize = self
            .pair_masks
            .iter()
            .filter_map(|row| row.get())
            .flat_map(|row| row.iter())
            .map(|m| {
                std::mem::size_of::<OnceLock<NodeMask>>() + m.get().map_or(0, |m| m.memory_bytes())
            })
            .sum();
        let sites: usize = self.sites.iter().map(|s| s.capacity() * 4 + 24).sum();
        let virt: usize = self
            .virtual_masks
            .read()
            .map(|m| {
                m.values()
                    .map(|m| {
                        let own = seen.insert(Arc::as_ptr(m));
                        48 + if own { m.memory_bytes() } else { 0 }
                    })
                    .sum()
            })
            .unwrap_or(0)
            + self
                .virtual_pair_masks
                .read()
                .map(|m| m.values().map(|m| m.memory_bytes() + 52).sum())
                .unwrap_or(0)
            + self
                .counted_bases
                .read()
                .map(|m| {
                    // Each rule's body DFA once, however many of its bases hold it.
                    let mut dfas = FxHashSet::default();
                    m.values()
                        .map(|b| {
                            let dfa = b.dfa();
                            let own = if dfas.insert(Arc::as_ptr(dfa)) {
                                dfa.memory_bytes()
                            } else {
                                0
                            };
                            b.memory_bytes() + own + 16
                        })
                        .sum()
                })
                .unwrap_or(0);
        let deferred = self.deferred.as_ref().map_or(0, |d| d.memory_bytes());
        aut + masks
            + pairs
            + sites
            + virt
            + deferred
            + self.has_mask.capacity()
            + self.mask_class.capacity() * 4
    }
}
