//! The grammar compiler: grammar → byte automata → per-node token masks, against one
//! vocabulary.
//!
//! A [`GrammarCompiler`] holds the vocabulary and its trie (built once); each compile
//! returns an `Arc<CompiledGrammar>` that any number of [`crate::GrammarMatcher`]s, on any
//! threads, share.

use crate::automaton::{
    lower::{inline_rules, lower_repeats, simplify_repeats},
    rule_cache::RuleAutomatonCache,
    Automaton, AutomatonError, KeyBasis,
};
use crate::grammar::ebnf::{parse_ebnf, EbnfError};
use crate::grammar::{Expr, Grammar, InvalidGrammar, TokenRef};
use crate::limits::{check_ir, check_memory, Deadline, LimitExceeded, Limits};
use crate::mask::background::{self, BackgroundFill, BackgroundStatus};
use crate::mask::cache::{
    compute_first_bytes_mask, compute_node_mask, compute_pair_mask, delta_reference, or_token_set,
    token_set, NodeMask, SubtreeMemo, TokenSet,
};
use crate::mask::counted::{base_key, counted_base, derivable, derive_mask, CountedBase};
use crate::mask::shared::SharedMasks;
use crate::mask::TokenTrie;
use crate::vocab::Vocabulary;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::ops::Deref;
use std::sync::{Arc, OnceLock, RwLock};

mod cache;
mod serialize;
pub use crate::automaton::rule_cache::RuleAutomatonCacheStats;
use cache::GrammarCache;
pub use cache::GrammarCacheStats;
pub use serialize::{DeserializeError, SerializeError, FORMAT_VERSION};

/// Why a grammar could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The EBNF text has a syntax error (the message gives line:column).
    #[error(transparent)]
    Ebnf(#[from] EbnfError),
    /// A grammar built by hand or by a front end breaks an IR invariant.
    #[error("invalid grammar: {0}")]
    Invalid(#[from] InvalidGrammar),
    /// A token terminal names a token the vocabulary does not have.
    #[error("rule `{rule}`: token terminal `{text}` is not a token of the vocabulary (write a special token exactly as the tokenizer spells it; to match the characters, write a string: `\"{text}\"`)")]
    UnknownToken {
        /// The rule where it occurs.
        rule: String,
        /// Its text, as written (such as `<|im_end|>`).
        text: String,
    },
    /// A token terminal `<[id]>` past the vocabulary.
    #[error("rule `{rule}`: token terminal <[{id}]> is past the vocabulary of {size} tokens (ids run from 0 to size - 1)")]
    TokenOutOfRange {
        /// The rule where it occurs.
        rule: String,
        /// The id.
        id: u32,
        /// The tokenizer's size.
        size: usize,
    },
    /// The grammar matches no string at all (its root can never complete), so a matcher
    /// would allow no token, not even a stop token.
    #[error("the grammar matches nothing: rule `{root}` can never complete (an empty character class, or rules that only call each other?)")]
    EmptyLanguage {
        /// The root rule's name.
        root: String,
    },
    /// The automata exceed a hard size limit.
    #[error(transparent)]
    Automaton(AutomatonError),
    /// The input exceeds one of the compiler's [`Limits`] (the error names the limit, its
    /// value and the input's value).
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// A structural tag could not be read or lowered (the message gives its JSON path).
    #[error(transparent)]
    StructuralTag(#[from] crate::structural_tag::StructuralTagError),
}

impl From<AutomatonError> for CompileError {
    fn from(e: AutomatonError) -> Self {
        match e {
            AutomatonError::Limit(l) => CompileError::Limit(l),
            e => CompileError::Automaton(e),
        }
    }
}

/// Vocabularies with at least this many text tokens share masks between equivalent nodes.
const SHARE_MIN_TOKENS: usize = 8192;

/// When node masks are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precompute {
    /// At compile time, every node, in parallel (rayon). The first mask is then fast.
    #[default]
    Eager,
    /// On first use, node by node, by the matcher that needs it. Compiles in about the time
    /// of building the automata.
    Lazy,
    /// Compiles as [`Precompute::Lazy`] does, then computes the masks [`Precompute::Eager`]
    /// would have computed in the background, on the compiler's background pool (see
    /// [`GrammarCompiler::with_background_pool`]); a matcher that needs a mask the
    /// background has not reached yet computes it itself. The fill stops when the last
    /// `Arc<CompiledGrammar>` is dropped or at [`CompiledGrammar::cancel_background`].
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
    pub(crate) grammar: Grammar,
    pub(crate) aut: Automaton,
    /// Per mask class (see `mask_class`): its mask, once computed; nodes without byte or
    /// call edges keep none.
    masks: Vec<OnceLock<Arc<NodeMask>>>,
    /// What the structure keys of mask classes in `shared` are made from, made at the
    /// first key; `None` when masks are not shared (a small vocabulary) or once every mask
    /// is computed.
    key_basis: Option<OnceLock<KeyBasis>>,
    shared: Arc<SharedMasks>,
    /// Per real node: its mask class. Nodes with the same future (bisimilar) share a mask.
    mask_class: Vec<u32>,
    has_mask: Vec<bool>,
    /// `sites[r]`: the nodes with a call edge to rule `r`, ascending.
    pub(crate) sites: Vec<Vec<u32>>,
    /// Per node, per call site of its rule (same order as `sites`): the node's mask in
    /// that caller's context, once computed.
    pair_masks: Vec<OnceLock<Box<[OnceLock<NodeMask>]>>>,
    /// Masks of virtual nodes (counted repetitions), by their shared key.
    virtual_masks: RwLock<FxHashMap<VirtualKey, Arc<NodeMask>>>,
    virtual_pair_masks: RwLock<FxHashMap<(VirtualKey, u32), Arc<NodeMask>>>,
    /// Per counted rule: its virtual masks are derived from per-state base walks
    /// (`mask::counted`) rather than walked one by one with the chart.
    pub(crate) counted_derivable: Vec<bool>,
    /// Base walks of counted rules, by (counted rule index, body state).
    counted_bases: RwLock<FxHashMap<(u32, u32), Arc<CountedBase>>>,
    /// The longest text token, in bytes (bounds how many repetitions one token spans).
    max_token_len: u32,
    /// [`Limits::max_step_items`] of the compiler that built it: each matcher call's
    /// Earley work budget.
    pub(crate) max_step_items: u64,
    /// [`Limits::compile_time`] of that compiler: the budget of the masks one matcher call
    /// computes on first use.
    lazy_budget: Option<std::time::Duration>,
    /// The first mask walk that ran out of its budget (see [`CompiledGrammar::walked`]).
    walk_failed: OnceLock<LimitExceeded>,
    /// Trie subtrees already walked, reused by later node-mask walks (emptied after an
    /// eager precompute).
    subtrees: SubtreeMemo,
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
}

/// (counted rule index, body state, distance to min, distance to max), clipped.
type VirtualKey = (u32, u32, u32, u32);

/// A node mask, borrowed from the grammar or shared from its cache of virtual-node masks.
pub(crate) enum MaskRef<'a> {
    Borrowed(&'a NodeMask),
    Shared(Arc<NodeMask>),
}

impl Deref for MaskRef<'_> {
    type Target = NodeMask;
    fn deref(&self) -> &NodeMask {
        match self {
            MaskRef::Borrowed(m) => m,
            MaskRef::Shared(m) => m,
        }
    }
}

impl GrammarCompiler {
    /// A compiler for `vocab`. Builds the vocabulary's trie once (a sort: tens of ms for a
    /// 128k–262k vocabulary).
    pub fn new(vocab: impl Into<Arc<Vocabulary>>) -> Self {
        let vocab = vocab.into();
        let trie = TokenTrie::new(&vocab);
        let mut bits = vec![0u32; vocab.bitmask_words()];
        for &id in &trie.sorted {
            bits[(id / 32) as usize] |= 1 << (id % 32);
        }
        GrammarCompiler {
            vocab,
            trie: Arc::new(trie),
            text_bits: bits.into(),
            precompute: Precompute::Eager,
            shared: Arc::new(SharedMasks::new(Self::DEFAULT_MASK_CACHE_BYTES)),
            limits: Limits::default(),
            grammar_cache: Arc::new(GrammarCache::new(true, None)),
            rule_automata: Arc::new(RuleAutomatonCache::new(
                Self::DEFAULT_RULE_AUTOMATON_CACHE_BYTES,
            )),
            pool: None,
            background_pool: None,
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

    /// Chooses when node masks are computed (default [`Precompute::Eager`]).
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

    /// The resource limits this compiler enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The vocabulary grammars are compiled against.
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Compiles an EBNF grammar (XGrammar's dialect or llama.cpp GBNF) whose root rule is
    /// named `root`.
    ///
    /// Token terminals (`<|im_end|>`, `<[151645]>`) naming a *special* token match exactly
    /// that token id; naming an ordinary token (such as Qwen3's non-special `<think>`), they
    /// match its text, by any tokenization. Stop tokens are allowed exactly where the root
    /// rule can end and never match grammar text.
    ///
    /// # Errors
    /// [`CompileError::Ebnf`] for syntax errors and undefined rules (with line:column),
    /// [`CompileError::UnknownToken`] / [`CompileError::TokenOutOfRange`] for token
    /// terminals the vocabulary lacks, [`CompileError::Automaton`] past size limits.
    pub fn compile_grammar(&self, ebnf: &str) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.compile_grammar_with_root(ebnf, "root")
    }

    /// As [`GrammarCompiler::compile_grammar`], with the root rule named `root`.
    ///
    /// # Errors
    /// As [`GrammarCompiler::compile_grammar`].
    pub fn compile_grammar_with_root(
        &self,
        ebnf: &str,
        root: &str,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.cached("ebnf", ebnf, root, || {
            let g = parse_ebnf(ebnf, root)?;
            self.compile_ir(&g)
        })
    }

    /// Compiles the built-in grammar of any JSON value (RFC 8259).
    ///
    /// # Errors
    /// None in practice; the signature matches the other compile calls.
    pub fn compile_builtin_json(&self) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.cached("builtin_json", "", "", || {
            self.compile_ir(&crate::grammar::builtin::json_grammar())
        })
    }

    /// Compiles a grammar given as IR (what every front end produces).
    ///
    /// # Errors
    /// [`CompileError::Invalid`] when the IR breaks an invariant (dangling rule id, max <
    /// min), plus the errors of [`GrammarCompiler::compile_grammar`] after parsing.
    pub fn compile_ir(&self, grammar: &Grammar) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.compile_ir_keeping(grammar, &[], false, &[])
    }

    /// As [`GrammarCompiler::compile_ir`], but the rules with `keep[r]` set (indices past
    /// `keep`'s end count as unset) are never inlined into their callers: a front end's
    /// shared rules whose masks do not depend on where they are called (see
    /// `inline_rules`). The language is the same either way. With `unique_keys`, the
    /// output is one JSON value and matchers also forbid a key repeated in its object
    /// (`matcher::keys`); `closed` (rule name, declared names) lists the closed objects
    /// whose keys they narrow to the names not yet written, each opened by its rule.
    ///
    /// # Errors
    /// As [`GrammarCompiler::compile_ir`].
    pub(crate) fn compile_ir_keeping(
        &self,
        grammar: &Grammar,
        keep: &[bool],
        unique_keys: bool,
        closed: &[(String, Vec<String>)],
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        match &self.pool {
            Some(pool) => pool.install(|| self.compile_on_pool(grammar, keep, unique_keys, closed)),
            None => self.compile_on_pool(grammar, keep, unique_keys, closed),
        }
    }

    /// [`Self::compile_ir_keeping`] on the current rayon pool.
    fn compile_on_pool(
        &self,
        grammar: &Grammar,
        keep: &[bool],
        unique_keys: bool,
        closed: &[(String, Vec<String>)],
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        grammar.validate()?;
        check_ir(&self.limits, grammar)?;
        let deadline = Deadline::start(self.limits.compile_time);
        // Resolve token terminals first, so that automaton building cannot fail on them.
        let mut resolved: rustc_hash::FxHashMap<TokenRef, u32> = Default::default();
        for rule in &grammar.rules {
            let mut stack = vec![&rule.body];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    Expr::Token(t) => {
                        let id = self.resolve_token(t, &rule.name)?;
                        resolved.insert(t.clone(), id);
                    }
                    _ => {}
                }
            }
        }
        // A terminal naming an ordinary (non-special) token means that token's text: as
        // bytes, any tokenization of it matches, so mask and accept agree on one reading.
        // (No copy of the grammar when it names only special tokens, or none.)
        let ordinary = resolved.values().any(|&id| !self.vocab.is_special(id));
        let mut rewritten = std::borrow::Cow::Borrowed(grammar);
        let rules: &mut [crate::grammar::Rule] = if ordinary {
            &mut rewritten.to_mut().rules
        } else {
            &mut []
        };
        for rule in rules {
            let mut stack = vec![&mut rule.body];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Seq(v) | Expr::Choice(v) => stack.extend(v.iter_mut()),
                    Expr::Repeat { expr, .. } => stack.push(expr),
                    Expr::Token(t) => {
                        let id = resolved[&*t];
                        if !self.vocab.is_special(id) {
                            let bytes = self.vocab.token_bytes(id).unwrap_or(&[]);
                            *e = if bytes.is_empty() {
                                Expr::Empty
                            } else {
                                Expr::Bytes(bytes.to_vec())
                            };
                        }
                    }
                    _ => {}
                }
            }
        }
        let simplified = simplify_repeats(&inline_rules(&rewritten, keep))?;
        let (lowered, counted) = lower_repeats(simplified);
        let mut aut = Automaton::build(
            &lowered,
            &counted,
            &|t| resolved.get(t).copied().unwrap_or(0),
            &self.limits,
            &deadline,
            Some(&self.rule_automata),
        )?;
        if !aut.prune_unproductive() {
            return Err(CompileError::EmptyLanguage {
                root: grammar.rules[grammar.root.index()].name.clone(),
            });
        }
        let has_mask: Vec<bool> = (0..aut.nodes.len() as u32)
            .map(|n| aut.has_edges(n))
            .collect();
        // Sharing masks pays when a mask walk is costly (a real vocabulary); over a few
        // thousand tokens, finding the classes would cost more than the walks it saves.
        let (mask_class, classes, key_basis) = if self.trie.token_count() >= SHARE_MIN_TOKENS {
            let (class, classes) = aut.mask_classes(&deadline)?;
            (class, classes, Some(OnceLock::new()))
        } else {
            let n = aut.nodes.len();
            ((0..n as u32).collect(), n, None)
        };
        let masks = (0..classes).map(|_| OnceLock::new()).collect();
        let mut sites: Vec<Vec<u32>> = vec![Vec::new(); aut.rule_start.len()];
        for n in 0..aut.nodes.len() as u32 {
            for c in aut.calls_of(n) {
                sites[c.rule as usize].push(n);
            }
        }
        let pair_masks = (0..aut.nodes.len()).map(|_| OnceLock::new()).collect();
        let mut compiled = CompiledGrammar {
            sites,
            pair_masks,
            vocab: self.vocab.clone(),
            trie: self.trie.clone(),
            text_bits: self.text_bits.clone(),
            grammar: grammar.clone(),
            aut,
            masks,
            key_basis,
            shared: self.shared.clone(),
            mask_class,
            has_mask,
            virtual_masks: RwLock::new(FxHashMap::default()),
            virtual_pair_masks: RwLock::new(FxHashMap::default()),
            counted_derivable: Vec::new(),
            counted_bases: RwLock::new(FxHashMap::default()),
            max_token_len: self.trie.depth.iter().copied().max().unwrap_or(0) as u32,
            max_step_items: self.limits.max_step_items,
            lazy_budget: self.limits.compile_time,
            walk_failed: OnceLock::new(),
            subtrees: SubtreeMemo::default(),
            unique_keys,
            closed_objects: None,
            background_fill: BackgroundFill::default(),
            max_memory_bytes: self.limits.max_memory_bytes,
        };
        if unique_keys {
            compiled.closed_objects =
                crate::matcher::ClosedObjects::resolve(&compiled.aut.rule_names, closed)
                    .map(Arc::new);
        }
        compiled.counted_derivable = compiled.aut.counted.iter().map(derivable).collect();
        // Memory: the automata now, then a running total of the masks as they are computed.
        let used = std::sync::atomic::AtomicU64::new(compiled.memory_bytes() as u64);
        let add = |bytes: usize| {
            let total = used.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
            check_memory(&self.limits, (total + bytes as u64) as usize)
        };
        add(0)?;
        if self.precompute == Precompute::Eager {
            compiled
                .class_representatives()
                .into_par_iter()
                .try_for_each(|n| {
                    deadline.check()?;
                    add(compiled.precompute_node_mask(n, &deadline)?)
                })?;
            compiled
                .counted_base_states()
                .into_par_iter()
                .try_for_each(|(k, s)| {
                    deadline.check()?;
                    add(compiled.precompute_counted_base(k, s, &deadline)?)
                })?;
            compiled
                .context_pairs()
                .into_par_iter()
                .try_for_each(|(n, m)| {
                    deadline.check()?;
                    add(compiled.precompute_pair_mask(n, m, &deadline)?)
                })?;
            compiled.key_basis = None;
            compiled.subtrees.clear();
            check_memory(&self.limits, compiled.memory_bytes())?;
        }
        let compiled = Arc::new(compiled);
        if self.precompute == Precompute::Background {
            let pool = self
                .background_pool
                .clone()
                .or_else(background::default_pool);
            if let Some(pool) = pool {
                background::schedule(&compiled, &pool);
            }
        }
        Ok(compiled)
    }

    fn resolve_token(&self, t: &TokenRef, rule: &str) -> Result<u32, CompileError> {
        let size = self.vocab.tokenizer_size();
        match t {
            TokenRef::Id(id) if (*id as usize) < size => Ok(*id),
            TokenRef::Id(id) => Err(CompileError::TokenOutOfRange {
                rule: rule.to_string(),
                id: *id,
                size,
            }),
            TokenRef::Text(text) => {
                if let Some(id) = self.vocab.special_token_id(text) {
                    return Ok(id);
                }
                // A text token spelled exactly so (such as an added but non-special token).
                let trie = &self.trie;
                let bytes = |p: usize| self.vocab.token_bytes(trie.sorted[p]).unwrap_or(&[]);
                let p = trie.sorted.partition_point(|&id| {
                    self.vocab.token_bytes(id).unwrap_or(&[]) < text.as_bytes()
                });
                if p < trie.sorted.len() && bytes(p) == text.as_bytes() {
                    return Ok(trie.sorted[p]);
                }
                Err(CompileError::UnknownToken {
                    rule: rule.to_string(),
                    text: text.clone(),
                })
            }
        }
    }
}

impl CompiledGrammar {
    /// The mask of node `n`, computed on first use. `None` for nodes without byte or call
    /// edges (they accept no text token).
    pub(crate) fn node_mask(&self, n: u32) -> Option<MaskRef<'_>> {
        // Without a deadline the walk always finishes.
        self.node_mask_until(n, &Deadline::never()).unwrap_or(None)
    }

    /// As [`Self::node_mask`], but a mask not computed yet is walked only until `deadline`
    /// (the error then; nothing is stored).
    pub(crate) fn node_mask_until(
        &self,
        n: u32,
        deadline: &Deadline,
    ) -> Result<Option<MaskRef<'_>>, LimitExceeded> {
        if self.aut.is_virtual(n) {
            let key = self.virtual_key(n);
            if let Some(m) = self.read_cache(&self.virtual_masks, &key) {
                return Ok(Some(MaskRef::Shared(m)));
            }
            let m = Arc::new(self.virtual_mask_by(n, deadline)?);
            let mut w = self
                .virtual_masks
                .write()
                .unwrap_or_else(|e| e.into_inner());
            return Ok(Some(MaskRef::Shared(w.entry(key).or_insert(m).clone())));
        }
        if !self.has_mask[n as usize] {
            return Ok(None);
        }
        let c = self.mask_class[n as usize] as usize;
        if let Some(m) = self.masks[c].get() {
            return Ok(Some(MaskRef::Borrowed(m)));
        }
        let key = self.key_basis.as_ref().and_then(|basis| {
            let basis = basis.get_or_init(|| {
                let classes = self.masks.len();
                self.aut.key_basis(&self.mask_class, classes)
            });
            self.aut.class_key(basis, &self.mask_class, c as u32)
        });
        let m = match key.as_ref().and_then(|k| self.shared.get(k)) {
            Some(m) => m,
            None => {
                let m = Arc::new(self.node_mask_by(n, deadline)?);
                match &key {
                    Some(k) => self.shared.insert(k, m),
                    None => m,
                }
            }
        };
        // Another thread may have set it meanwhile: the same mask, either one will do.
        Ok(Some(MaskRef::Borrowed(self.masks[c].get_or_init(|| m))))
    }

    /// The deadline for masks computed during one matcher call: the compiler's
    /// [`Limits::compile_time`], from the first walk's first look at it.
    pub(crate) fn lazy_deadline(&self) -> Deadline {
        Deadline::on_first_look(self.lazy_budget)
    }

    /// Walks node `n`'s uncertain tokens (`own`: its mask) for its context mask when called
    /// from `caller`; the limit error if `deadline` passed first.
    fn pair_mask_by(
        &self,
        own: &NodeMask,
        n: u32,
        caller: u32,
        deadline: &Deadline,
    ) -> Result<NodeMask, LimitExceeded> {
        self.walked(deadline, || {
            compute_pair_mask(&self.aut, &self.trie, &self.vocab, own, n, caller, deadline)
        })
    }

    /// Walks the trie for node `n`'s mask (or composes it: [`Self::call_only_mask_by`]);
    /// the limit error if `deadline` passed first.
    fn node_mask_by(&self, n: u32, deadline: &Deadline) -> Result<NodeMask, LimitExceeded> {
        if let Some(m) = self.call_only_mask_by(n, deadline)? {
            return Ok(m);
        }
        let delta = delta_reference(&self.aut, &self.trie, &self.mask_class, n);
        // A reference has no reference of its own: this recursion is one level deep.
        let base = match &delta {
            Some(d) => self.node_mask_until(d.reference, deadline)?,
            None => None,
        };
        let from = base
            .as_deref()
            .zip(delta.as_ref())
            .map(|(b, d)| (b, d, &*self.text_bits));
        self.walked(deadline, || {
            compute_node_mask(
                &self.aut,
                &self.trie,
                n,
                self.vocab.bitmask_words(),
                (&self.subtrees, &self.mask_class),
                deadline,
                from,
            )
        })
    }

    /// The mask of a node whose only edges are calls (such as a member value's string after
    /// its opening quote), composed from its callees' start masks instead of walked with
    /// the chart: a token is accepted when some callee's start mask accepts it, or when it
    /// runs past that callee's end and the context mask of the pair (callee start, `n`)
    /// accepts it; it is uncertain when that context mask says so. This is the chart walk
    /// from `n` split by the callee its first byte enters, so the result is the same (the
    /// test `a_call_only_mask_equals_the_full_walk` compares the two), while the callee
    /// masks are often shared across grammars or derived (`mask::counted`), where a walk
    /// from `n` runs the chart over most of the vocabulary (~20 ms for 128k tokens).
    ///
    /// A nullable callee may also be skipped: the mask of the call's return node (same
    /// rule, same follow set) is then part of `n`'s.
    ///
    /// A node with byte edges beside its calls (a key state that avoids a schema's
    /// declared names: the next letter of a name, or the undeclared key's tail as a call)
    /// is composed the same way for the tokens whose first byte it has no edge on; the
    /// others, fewer than half of the vocabulary, are walked from `n` (the chart then
    /// sees both the edges and the calls). Its callees, and the return nodes of its
    /// nullable callees, must have no calls, so a composition never waits on another.
    ///
    /// `Ok(None)` when `n` is not such a node, or a callee starts at a call-only node
    /// itself, or a nullable callee returns to `n` or to another call-only node (so the
    /// composition never loops through left recursion); the limit error if `deadline`
    /// passed first.
    fn call_only_mask_by(
        &self,
        n: u32,
        deadline: &Deadline,
    ) -> Result<Option<NodeMask>, LimitExceeded> {
        let aut = &self.aut;
        let calls = aut.calls_of(n);
        if calls.is_empty() || aut.is_virtual(n) {
            return Ok(None);
        }
        let call_only = |m: u32| {
            !aut.is_virtual(m) && aut.bytes_of(m).is_empty() && !aut.calls_of(m).is_empty()
        };
        let own = aut.bytes_of(n);
        if own.is_empty() {
            // A nullable callee may also be skipped: the token then starts at the call's
            // return node, which must be walked (or composed) without `n`'s mask.
            if calls.iter().any(|c| {
                call_only(aut.rule_start[c.rule as usize])
                    || aut.nullable[c.rule as usize] && (c.target == n || call_only(c.target))
            }) {
                return Ok(None);
            }
        } else if calls.iter().any(|c| {
            // A node with byte edges too composes only from nodes without calls, so no
            // composition ever waits on another.
            !aut.calls_of(aut.rule_start[c.rule as usize]).is_empty()
                || aut.nullable[c.rule as usize] && !aut.calls_of(c.target).is_empty()
        }) {
            return Ok(None);
        }
        // First bytes on `n`'s own byte edges: their tokens are walked from `n` (only when
        // they are fewer than half of the vocabulary: otherwise the walk is most of the
        // vocabulary anyway).
        let mut own_first = vec![false; 256];
        for e in own {
            own_first[e.lo as usize..=e.hi as usize].fill(true);
        }
        let own_ranges: Vec<std::ops::Range<u32>> = (0..=255u8)
            .filter(|&b| own_first[b as usize])
            .map(|b| self.trie.first_byte_range(b))
            .filter(|r| !r.is_empty())
            .collect();
        let own_tokens: usize = own_ranges.iter().map(|r| r.len()).sum();
        if own_tokens * 2 > self.trie.token_count() {
            return Ok(None);
        }
        let words = self.vocab.bitmask_words();
        let mut bits = vec![0u32; words].into_boxed_slice();
        let mut blank = true;
        let mut scratch = Vec::new();
        let mut or = |set: &TokenSet| {
            or_token_set(&mut bits, &mut blank, set, &self.text_bits, &mut scratch);
        };
        let mut uncertain: Vec<u32> = Vec::new();
        for c in calls {
            if aut.nullable[c.rule as usize] {
                if let Some(skip) = self.node_mask_until(c.target, deadline)? {
                    or(&skip.accepted);
                    uncertain.extend_from_slice(&skip.uncertain);
                }
            }
            let start = aut.rule_start[c.rule as usize];
            let Some(own) = self.node_mask_until(start, deadline)? else {
                continue;
            };
            or(&own.accepted);
            if own.uncertain.is_empty() {
                continue;
            }
            if !own_ranges.is_empty() {
                // Beside byte edges: the context mask of only the callee's uncertain tokens
                // that the walk below does not take over, and not kept (a key state's
                // context masks would add about half of an eager grammar's memory).
                let rule = aut.rule_of(start) as usize;
                if self.sites[rule].binary_search(&n).is_err() {
                    return Ok(None);
                }
                let rest = NodeMask {
                    accepted: TokenSet::default(),
                    uncertain: own
                        .uncertain
                        .iter()
                        .copied()
                        .filter(|p| !own_ranges.iter().any(|r| r.contains(p)))
                        .collect(),
                };
                if rest.uncertain.is_empty() {
                    continue;
                }
                let pair = self.pair_mask_by(&rest, start, n, deadline)?;
                or(&pair.accepted);
                uncertain.extend_from_slice(&pair.uncertain);
                continue;
            }
            let Some(pair) = self.pair_mask_until(start, n, deadline)? else {
                // Not a call site of the callee after all: leave it to the walk.
                return Ok(None);
            };
            or(&pair.accepted);
            uncertain.extend_from_slice(&pair.uncertain);
        }
        if !own.is_empty() {
            // The tokens whose first byte `n` has an edge on: the walk's verdict alone
            // (through the callees too), in place of the callees' above.
            for r in &own_ranges {
                for p in r.clone() {
                    let id = self.trie.sorted[p as usize];
                    bits[(id / 32) as usize] &= !(1 << (id % 32));
                }
            }
            uncertain.retain(|p| !own_ranges.iter().any(|r| r.contains(p)));
            let walked = self.walked(deadline, || {
                compute_first_bytes_mask(
                    &self.aut,
                    &self.trie,
                    n,
                    words,
                    (&self.subtrees, &self.mask_class),
                    deadline,
                    &own_first,
                )
            })?;
            or_token_set(
                &mut bits,
                &mut blank,
                &walked.accepted,
                &self.text_bits,
                &mut scratch,
            );
            uncertain.extend_from_slice(&walked.uncertain);
        }
        uncertain.sort_unstable();
        uncertain.dedup();
        // A token accepted through one callee is not uncertain through another.
        uncertain.retain(|&p| {
            let id = self.trie.sorted[p as usize];
            bits[(id / 32) as usize] >> (id % 32) & 1 == 0
        });
        let count = bits.iter().map(|w| w.count_ones() as usize).sum();
        Ok(Some(NodeMask {
            accepted: token_set(&self.trie, bits, count, words),
            uncertain,
        }))
    }

    /// The mask of virtual node `n`: derived from the base walk of its body state when
    /// its repetition is deterministic (`mask::counted`: a base walk once per body state,
    /// then a fraction of a millisecond per count), else walked with the chart.
    fn virtual_mask_by(&self, n: u32, deadline: &Deadline) -> Result<NodeMask, LimitExceeded> {
        let k = self.aut.counted.partition_point(|c| c.first <= n) - 1;
        if !self.counted_derivable.get(k).copied().unwrap_or(false) {
            return self.node_mask_by(n, deadline);
        }
        let (s, to_min, to_max) = self.aut.counted[k].mask_key(n, self.max_token_len);
        let base = self.counted_base_of(k, s, deadline)?;
        Ok(derive_mask(
            &base,
            to_min,
            to_max,
            &self.trie,
            &self.vocab,
            self.vocab.bitmask_words(),
        ))
    }

    /// The base walk of counted rule `k` (derivable) from body state `s`: this grammar's,
    /// else the compiler's shared one, else walked now (until `deadline`) and kept in both.
    fn counted_base_of(
        &self,
        k: usize,
        s: u32,
        deadline: &Deadline,
    ) -> Result<Arc<CountedBase>, LimitExceeded> {
        let cnt = &self.aut.counted[k];
        let s = cnt.representative(s);
        let key = (k as u32, s);
        if let Some(b) = self.read_cache(&self.counted_bases, &key) {
            return Ok(b);
        }
        let follow = &self.aut.follow[cnt.rule as usize];
        let shared_key = base_key(cnt, s, follow);
        let b = match self.shared.get_base(&shared_key) {
            Some(b) => b,
            None => {
                let words = self.vocab.bitmask_words();
                let b = self.walked(deadline, || {
                    counted_base(cnt, s, follow, &self.trie, words, deadline)
                })?;
                self.shared.insert_base(&shared_key, Arc::new(b))
            }
        };
        let mut w = self
            .counted_bases
            .write()
            .unwrap_or_else(|e| e.into_inner());
        Ok(w.entry(key).or_insert(b).clone())
    }

    /// Runs a mask walk under `deadline`. Once one walk under a bounded deadline ran out
    /// of time, later bounded walks of this grammar fail at once with the same error
    /// (retrying would spend the whole budget again on every matcher call); masks already
    /// computed keep being served, and unbounded walks always run.
    fn walked<T>(
        &self,
        deadline: &Deadline,
        walk: impl FnOnce() -> Option<T>,
    ) -> Result<T, LimitExceeded> {
        if deadline.is_bounded() {
            if let Some(e) = self.walk_failed.get() {
                return Err(e.clone());
            }
        }
        walk().ok_or_else(|| {
            let e = deadline.exceeded();
            let _ = self.walk_failed.set(e.clone());
            e
        })
    }

    /// The eager precompute of real node `n`'s mask class (as [`Self::node_mask`], but the
    /// walk stops at `deadline`). Returns the bytes the mask added (0 if it was known).
    pub(crate) fn precompute_node_mask(
        &self,
        n: u32,
        deadline: &Deadline,
    ) -> Result<usize, LimitExceeded> {
        if !self.has_mask[n as usize]
            || self.masks[self.mask_class[n as usize] as usize]
                .get()
                .is_some()
        {
            return Ok(0);
        }
        Ok(self
            .node_mask_until(n, deadline)?
            .map_or(0, |m| m.memory_bytes()))
    }

    /// One real node per mask class (the first of each), ascending: the node masks an
    /// eager precompute computes.
    fn class_representatives(&self) -> Vec<u32> {
        let mut first = vec![u32::MAX; self.masks.len()];
        for (n, &c) in self.mask_class.iter().enumerate().rev() {
            first[c as usize] = n as u32;
        }
        first.retain(|&n| n != u32::MAX);
        first
    }

    /// [`Self::class_representatives`] in the order a background fill computes them: the
    /// nodes reachable from the root's start, breadth first (through byte, token and call
    /// edges, and call returns), so the masks of the first steps come first; then the
    /// rest, ascending.
    pub(crate) fn fill_order(&self) -> Vec<u32> {
        let aut = &self.aut;
        let real = aut.nodes.len();
        let mut seen = vec![false; real];
        let mut order = Vec::with_capacity(real);
        let mut queue = std::collections::VecDeque::new();
        let mut visit = |n: u32, queue: &mut std::collections::VecDeque<u32>| {
            if (n as usize) < real && !std::mem::replace(&mut seen[n as usize], true) {
                queue.push_back(n);
            }
        };
        if let Some(&start) = aut.rule_start.get(aut.root as usize) {
            visit(start, &mut queue);
        }
        while let Some(n) = queue.pop_front() {
            order.push(n);
            for e in aut.bytes_of(n) {
                visit(e.target, &mut queue);
            }
            for e in aut.tokens_of(n) {
                visit(e.target, &mut queue);
            }
            for c in aut.calls_of(n) {
                visit(aut.rule_start[c.rule as usize], &mut queue);
                visit(c.target, &mut queue);
            }
        }
        order.extend((0..real as u32).filter(|&n| !seen[n as usize]));
        let mut taken = vec![false; self.masks.len()];
        order.retain(|&n| {
            let c = self.mask_class[n as usize] as usize;
            self.has_mask[n as usize] && !std::mem::replace(&mut taken[c], true)
        });
        order
    }

    /// (counted rule, body state) of the base walks an eager precompute computes: at the
    /// body states where an iteration may end (where tokens mostly stop inside a
    /// repetition), so each one's masks are then derived at any count in a fraction of a
    /// millisecond (`mask::counted`). Other states are walked on first use.
    pub(crate) fn counted_base_states(&self) -> Vec<(usize, u32)> {
        self.aut
            .counted
            .iter()
            .enumerate()
            .filter(|&(k, _)| self.counted_derivable[k])
            .flat_map(|(k, c)| {
                let mut finals: Vec<u32> = (0..c.states)
                    .filter(|&s| c.body_final[s as usize])
                    .map(|s| c.representative(s))
                    .collect();
                finals.sort_unstable();
                finals.dedup();
                finals.into_iter().map(move |s| (k, s))
            })
            .collect()
    }

    /// (node, caller) of the context masks an eager precompute computes: every call site
    /// of the rule of each node whose mask has uncertain tokens (computes those node masks
    /// that are not computed yet).
    pub(crate) fn context_pairs(&self) -> Vec<(u32, u32)> {
        (0..self.aut.nodes.len() as u32)
            .filter(|&n| self.node_mask(n).is_some_and(|m| !m.uncertain.is_empty()))
            .flat_map(|n| {
                let rule = self.aut.rule_of(n) as usize;
                self.sites[rule].iter().map(move |&m| (n, m))
            })
            .collect()
    }

    /// The precompute of counted rule `k`'s base walk from body state `s` (the walk stops
    /// at `deadline`). Returns the bytes it holds.
    pub(crate) fn precompute_counted_base(
        &self,
        k: usize,
        s: u32,
        deadline: &Deadline,
    ) -> Result<usize, LimitExceeded> {
        Ok(self.counted_base_of(k, s, deadline)?.memory_bytes() + 16)
    }

    /// True when real node `n`'s mask (that of its mask class) is computed; false for
    /// nodes without a mask.
    #[cfg(test)]
    pub(crate) fn mask_known(&self, n: u32) -> bool {
        self.has_mask[n as usize]
            && self.masks[self.mask_class[n as usize] as usize]
                .get()
                .is_some()
    }

    /// Called once a background fill has computed every mask: drops the walk memo.
    pub(crate) fn fill_finished(&self) {
        self.subtrees.clear();
    }

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

    /// The eager precompute of the context mask of real node `n` called from `caller` (as
    /// [`Self::pair_mask`], but the walk stops at `deadline`). Returns the bytes it added.
    pub(crate) fn precompute_pair_mask(
        &self,
        n: u32,
        caller: u32,
        deadline: &Deadline,
    ) -> Result<usize, LimitExceeded> {
        let rule = self.aut.rule_of(n) as usize;
        let sites = &self.sites[rule];
        let (Ok(k), Some(own)) = (sites.binary_search(&caller), self.node_mask(n)) else {
            return Ok(0);
        };
        let row = self.pair_masks[n as usize]
            .get_or_init(|| (0..sites.len()).map(|_| OnceLock::new()).collect());
        if row[k].get().is_some() {
            return Ok(0);
        }
        let m = self.pair_mask_by(&own, n, caller, deadline)?;
        let bytes = m.memory_bytes();
        let _ = row[k].set(m);
        Ok(bytes)
    }

    fn virtual_key(&self, n: u32) -> VirtualKey {
        let k = self.aut.counted.partition_point(|c| c.first <= n) - 1;
        let (s, to_min, to_max) = self.aut.counted[k].mask_key(n, self.max_token_len);
        (k as u32, s, to_min, to_max)
    }

    fn read_cache<K: std::hash::Hash + Eq, V>(
        &self,
        cache: &RwLock<FxHashMap<K, Arc<V>>>,
        key: &K,
    ) -> Option<Arc<V>> {
        cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// The mask of node `n` when its rule instance was called from node `caller` (which must
    /// be one of `sites[rule of n]`), computed on first use.
    pub(crate) fn pair_mask(&self, n: u32, caller: u32) -> Option<MaskRef<'_>> {
        // Without a deadline the walk always finishes.
        self.pair_mask_until(n, caller, &Deadline::never())
            .unwrap_or(None)
    }

    /// As [`Self::pair_mask`], but masks not computed yet are walked only until `deadline`
    /// (the error then; nothing is stored).
    pub(crate) fn pair_mask_until(
        &self,
        n: u32,
        caller: u32,
        deadline: &Deadline,
    ) -> Result<Option<MaskRef<'_>>, LimitExceeded> {
        let rule = self.aut.rule_of(n) as usize;
        let sites = &self.sites[rule];
        let Ok(k) = sites.binary_search(&caller) else {
            return Ok(None);
        };
        let Some(own) = self.node_mask_until(n, deadline)? else {
            return Ok(None);
        };
        let walk = || self.pair_mask_by(&own, n, caller, deadline);
        if self.aut.is_virtual(n) {
            let key = (self.virtual_key(n), caller);
            if let Some(m) = self.read_cache(&self.virtual_pair_masks, &key) {
                return Ok(Some(MaskRef::Shared(m)));
            }
            let m = Arc::new(walk()?);
            let mut w = self
                .virtual_pair_masks
                .write()
                .unwrap_or_else(|e| e.into_inner());
            return Ok(Some(MaskRef::Shared(w.entry(key).or_insert(m).clone())));
        }
        let row = self.pair_masks[n as usize]
            .get_or_init(|| (0..sites.len()).map(|_| OnceLock::new()).collect());
        if let Some(m) = row[k].get() {
            return Ok(Some(MaskRef::Borrowed(m)));
        }
        let m = walk()?;
        Ok(Some(MaskRef::Borrowed(row[k].get_or_init(|| m))))
    }

    /// Heap bytes of the key basis (kept only while masks may still be computed).
    fn key_basis_bytes(&self) -> usize {
        let basis = self.key_basis.as_ref().and_then(OnceLock::get);
        basis.map_or(0, KeyBasis::memory_bytes)
    }

    /// The grammar this was compiled from (before lowering); `to_string()` prints it as EBNF.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// The vocabulary it was compiled against.
    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Number of automaton nodes over all rules (helper rules of large repetitions included).
    pub fn node_count(&self) -> usize {
        self.aut.node_count()
    }

    /// Heap memory of this grammar in bytes: automata plus the masks computed so far (the
    /// shared vocabulary and trie are not counted).
    pub fn memory_bytes(&self) -> usize {
        let a = &self.aut;
        let aut = a.nodes.capacity() * std::mem::size_of::<crate::automaton::Node>()
            + a.byte_edges.capacity() * 8
            + a.call_edges.capacity() * 8
            + a.token_edges.capacity() * 8
            + a.rule_start.capacity() * 4
            + a.nullable.capacity()
            + a.follow.capacity() * 32
            + a.rule_names
                .iter()
                .map(|n| n.capacity() + 24)
                .sum::<usize>();
        let masks: usize = self
            .masks
            .iter()
            .map(|m| {
                std::mem::size_of::<OnceLock<Arc<NodeMask>>>()
                    + m.get().map_or(0, |m| m.memory_bytes())
            })
            .sum::<usize>()
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
            .map(|m| m.values().map(|m| m.memory_bytes() + 48).sum())
            .unwrap_or(0)
            + self
                .virtual_pair_masks
                .read()
                .map(|m| m.values().map(|m| m.memory_bytes() + 52).sum())
                .unwrap_or(0)
            + self
                .counted_bases
                .read()
                .map(|m| m.values().map(|b| b.memory_bytes() + 16).sum())
                .unwrap_or(0);
        let counted: usize = a
            .counted
            .iter()
            .map(|c| {
                c.edges.capacity() * 8 + c.body_edges.capacity() * 8 + c.body_final.capacity() + 64
            })
            .sum();
        aut + masks
            + pairs
            + sites
            + virt
            + counted
            + self.has_mask.capacity()
            + self.mask_class.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask::cache::TokenSet;

    /// A vocabulary of every byte, every two-byte string over letters and JSON
    /// punctuation, and every three-letter lowercase string, alone and before a quote
    /// (about 39,000 tokens: enough for mask classes and delta masks to be used).
    fn wide_vocabulary() -> Vocabulary {
        let alphabet: Vec<u8> = (b'a'..=b'z')
            .chain(b'A'..=b'Z')
            .chain(*b"\":, {}\\")
            .collect();
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for &a in &alphabet {
            for &b in &alphabet {
                tokens.push(vec![a, b]);
            }
        }
        for a in b'a'..=b'z' {
            for b in b'a'..=b'z' {
                for c in b'a'..=b'z' {
                    tokens.push(vec![a, b, c]);
                    tokens.push(vec![a, b, c, b'"']);
                }
                tokens.push(vec![a, b, b'"', b':']);
            }
        }
        with_stop(tokens)
    }

    /// The vocabulary of `tokens` and a last token `</s>`, its stop token.
    fn with_stop(mut tokens: Vec<Vec<u8>>) -> Vocabulary {
        tokens.push(b"</s>".to_vec());
        let stop = tokens.len() as u32 - 1;
        Vocabulary::from_token_bytes(&tokens, &[stop], &[stop]).unwrap()
    }

    /// Ids of a token set, ascending.
    fn ids(set: &TokenSet, text_bits: &[u32]) -> Vec<u32> {
        let all = (0..text_bits.len() as u32 * 32)
            .filter(|&i| text_bits[(i / 32) as usize] >> (i % 32) & 1 == 1);
        match set {
            TokenSet::Accepted(v) => v.clone(),
            TokenSet::Rejected(v) => all.filter(|i| !v.contains(i)).collect(),
            TokenSet::Bitset(b) => all
                .filter(|&i| b[(i / 32) as usize] >> (i % 32) & 1 == 1)
                .collect(),
        }
    }

    /// Node `n`'s mask by a full walk of the trie (a fresh subtree memo, no deadline).
    fn full_walk(g: &CompiledGrammar, n: u32) -> NodeMask {
        let memo = SubtreeMemo::default();
        let words = g.vocab.bitmask_words();
        let never = Deadline::never();
        crate::mask::cache::compute_node_mask_in(
            &g.aut,
            &g.trie,
            n,
            words,
            (&memo, &g.mask_class),
            &never,
            None,
            None,
        )
        .unwrap()
    }

    /// Asserts that `got` is node `n`'s mask as the full walk of the trie computes it
    /// (`what` names the path that computed `got`, for the message).
    fn assert_full_walk_mask(g: &CompiledGrammar, n: u32, got: &NodeMask, what: &str) {
        let full = full_walk(g, n);
        assert_eq!(
            ids(&got.accepted, &g.text_bits),
            ids(&full.accepted, &g.text_bits),
            "node {n} ({what}): accepted tokens"
        );
        assert_eq!(
            got.uncertain, full.uncertain,
            "node {n} ({what}): uncertain tokens"
        );
    }

    /// Every node's mask walked with the vocabulary slices it consumes equals the walk of
    /// every token, over grammars whose wide nodes are JSON string contents, free text, and
    /// free text before a `<tool_call>` trigger, on a vocabulary with quotes, `<`, control
    /// characters, multi-byte characters and UTF-8 fragments.
    #[test]
    fn a_sliced_walk_equals_the_full_walk() {
        use crate::mask::slices;
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let pieces: Vec<&[u8]> = vec![
            b"a",
            b"b",
            b"<",
            b"\"",
            b"\\",
            b"\n",
            b" ",
            b"{",
            b"}",
            b":",
            b",",
            b"tool",
            b"_call",
            b">",
            "é".as_bytes(),
            "日".as_bytes(),
            "😀".as_bytes(),
            &"日".as_bytes()[..2],
            &"😀".as_bytes()[1..],
            b"\x7f",
            b"1",
        ];
        for a in &pieces {
            for b in &pieces {
                tokens.push([*a, *b].concat());
                for c in &pieces[..6] {
                    tokens.push([*a, *b, *c].concat());
                }
            }
        }
        tokens.push(b"<tool_call>".to_vec());
        let compiler = GrammarCompiler::new(with_stop(tokens)).with_precompute(Precompute::Lazy);
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "s": {"type": "string"},
                "short": {"type": "string", "maxLength": 3},
                "tags": {"type": "array", "items": {"type": "string"}},
                "n": {"type": "number"}
            }
        });
        let tag = serde_json::json!({
            "type": "structural_tag",
            "format": {
                "type": "triggered_tags",
                "triggers": ["<tool_call>"],
                "tags": [{
                    "begin": "<tool_call>",
                    "content": {"type": "json_schema", "json_schema": schema},
                    "end": "</tool_call>"
                }],
                "at_least_one": false,
                "stop_after_first": false
            }
        });
        let grammars = [
            compiler
                .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
                .unwrap(),
            compiler.compile_structural_tag(&tag).unwrap(),
            compiler.compile_regex(r"(?s).*x").unwrap(),
            compiler
                .compile_grammar(r#"root ::= [^<]* "<" [a-z]*"#)
                .unwrap(),
            compiler.compile_regex(r"[A-Za-z0-9_]+@[a-z]+").unwrap(),
            compiler.compile_builtin_json().unwrap(),
        ];
        let never = Deadline::never();
        let mut used = [0usize; slices::SLICES.len()];
        let mut via_calls = 0;
        for g in &grammars {
            let words = g.vocab.bitmask_words();
            for n in 0..g.aut.nodes.len() as u32 {
                let Some(slice) = crate::mask::cache::pick_slice(&g.aut, &g.trie, n) else {
                    continue;
                };
                let k = slices::SLICES
                    .iter()
                    .position(|&x| x == slice.lang)
                    .unwrap();
                used[k] += 1;
                via_calls += !g.aut.calls_of(n).is_empty() as usize;
                let memo = SubtreeMemo::default();
                let sliced = crate::mask::cache::compute_node_mask_in(
                    &g.aut,
                    &g.trie,
                    n,
                    words,
                    (&memo, &g.mask_class),
                    &never,
                    None,
                    Some(slice),
                )
                .unwrap();
                assert_full_walk_mask(g, n, &sliced, &format!("slice {k}"));
            }
        }
        // Each slice is taken somewhere: any text (the first regex), JSON string contents,
        // the free text before `<` (the tag and the EBNF grammar), ASCII letters and digits
        // (the second regex).
        assert!(
            used.iter().all(|&u| u > 0),
            "slices taken per kind: {used:?}"
        );
        // Key states whose undeclared tail is a call.
        assert!(via_calls > 0, "no slice was taken at a node with calls");
    }

    #[test]
    fn a_delta_mask_equals_the_full_walk() {
        let compiler = GrammarCompiler::new(wide_vocabulary()).with_precompute(Precompute::Lazy);
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "pay": {"type": "string"},
                "pal": {"type": "integer"},
                "name": {"type": "string", "maxLength": 5},
                "zoo": {"type": "boolean"}
            },
            "required": ["name"]
        });
        let g = compiler
            .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
            .unwrap();
        let never = Deadline::never();
        let words = g.vocab.bitmask_words();
        let memo = SubtreeMemo::default();
        let mut deltas = 0;
        for n in 0..g.aut.nodes.len() as u32 {
            let Some(delta) = delta_reference(&g.aut, &g.trie, &g.mask_class, n) else {
                continue;
            };
            deltas += 1;
            assert_ne!(delta.reference, n);
            let base = full_walk(&g, delta.reference);
            let derived = compute_node_mask(
                &g.aut,
                &g.trie,
                n,
                words,
                (&memo, &g.mask_class),
                &never,
                Some((&base, &delta, &g.text_bits)),
            )
            .unwrap();
            assert_full_walk_mask(&g, n, &derived, &format!("reference {}", delta.reference));
            // A reference has no reference of its own: one level deep.
            assert!(delta_reference(&g.aut, &g.trie, &g.mask_class, delta.reference).is_none());
        }
        // The states of the key automaton that avoids "pay", "pal", "name" and "zoo".
        assert!(deltas >= 5, "only {deltas} nodes took a delta");
    }

    /// Every mask composed from a call-only node's callees equals the full walk of that
    /// node, over grammars with counted and plain strings, nested objects and arrays, a
    /// node that calls several rules, left recursion and nullable callees.
    #[test]
    fn a_call_only_mask_equals_the_full_walk() {
        let compiler = GrammarCompiler::new(wide_vocabulary()).with_precompute(Precompute::Lazy);
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "email": {"type": "string", "maxLength": 1024},
                "name": {"type": "string", "minLength": 2, "maxLength": 5},
                "tags": {"type": "array", "items": {"type": "string"}},
                "inner": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}
                },
                "any": {}
            },
            "required": ["email"]
        });
        let grammars = [
            compiler
                .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
                .unwrap(),
            compiler
                .compile_grammar(
                    r#"root ::= item ("," item)*
item ::= word | num | list | opt
word ::= [a-z]+ "\""?
num ::= [0-9]+ | num "e"
list ::= "[" root "]" | list "x"
opt ::= [a-z]? "!"
"#,
                )
                .unwrap(),
            // "az" is accepted inside `wordy` and runs past the end of `shorty`.
            compiler
                .compile_grammar(
                    r#"root ::= pick "z"
pick ::= wordy | shorty
wordy ::= "a" | wordy [a-z]
shorty ::= "a" | "(" pick ")"
"#,
                )
                .unwrap(),
            compiler.compile_builtin_json().unwrap(),
            // A choice between bytes and a nullable call, whose return node has bytes.
            compiler
                .compile_grammar(
                    r#"root ::= "ab" x "b" | x "c" | "\"" x
x ::= [a-z]* | "\"" [0-9]
"#,
                )
                .unwrap(),
        ];
        let never = Deadline::never();
        let mut composed = 0;
        let mut mixed = 0;
        for g in &grammars {
            for n in 0..g.aut.nodes.len() as u32 {
                let Some(derived) = g.call_only_mask_by(n, &never).unwrap() else {
                    continue;
                };
                composed += 1;
                mixed += !g.aut.bytes_of(n).is_empty() as usize;
                assert_full_walk_mask(g, n, &derived, "composed");
            }
        }
        assert!(composed >= 9, "only {composed} masks were composed");
        // Nodes with byte edges beside their calls: the key states that avoid the declared
        // names (their undeclared tails are calls), and the EBNF choices below.
        assert!(
            mixed >= 4,
            "only {mixed} masks with byte edges were composed"
        );
    }

    /// Every walked mask equals running each token alone through the Earley chart from the
    /// node (accepted: every byte scanned; uncertain: it failed after the node's rule could
    /// have ended with a following byte that may follow the rule). The grammars call DFA
    /// rules that end inside tokens (a string's body then its closing quote, a counted
    /// string, a word rule that may end anywhere), which the walk steps by table inside
    /// the chart.
    #[test]
    fn a_walk_equals_token_by_token_chart_runs() {
        use crate::parser::Chart;
        let alphabet = b"ab\":,{} 1\\";
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for &a in alphabet {
            for &b in alphabet {
                tokens.push(vec![a, b]);
                for &c in b"a\",}" {
                    tokens.push(vec![a, b, c]);
                }
            }
        }
        // Longer tokens: runs of steps inside a callee, then a step that ends it.
        let short = b"ab\"1,:";
        for n in 0..short.len().pow(4) {
            tokens.push(
                (0..4)
                    .map(|k| short[n / short.len().pow(k) % short.len()])
                    .collect(),
            );
        }
        for n in 0..3usize.pow(5) {
            tokens.push((0..5).map(|k| b"ab\""[n / 3usize.pow(k) % 3]).collect());
        }
        let compiler = GrammarCompiler::new(with_stop(tokens)).with_precompute(Precompute::Lazy);
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "maxLength": 3},
                "ab": {"type": "array", "items": {"type": "integer"}}
            }
        });
        let grammars = [
            compiler
                .compile_json_schema(&schema, &crate::JsonSchemaOptions::default())
                .unwrap(),
            compiler
                .compile_grammar(
                    r#"root ::= (word ":" | "{" root "}" | word word) ","?
word ::= [ab]+ | "\"" [ab]* "\"" | word "1"
"#,
                )
                .unwrap(),
        ];
        let mut walked = 0;
        for g in &grammars {
            let (aut, trie) = (&g.aut, &g.trie);
            for n in 0..aut.nodes.len() as u32 {
                if !g.has_mask[n as usize] {
                    continue;
                }
                walked += 1;
                let m = full_walk(g, n);
                let follow = &aut.follow[aut.rule_of(n) as usize];
                let mut accepted = Vec::new();
                let mut uncertain = Vec::new();
                for (p, &id) in trie.sorted.iter().enumerate() {
                    let bytes = g.vocab.token_bytes(id).unwrap();
                    let mut chart = Chart::new(aut, n);
                    // ok: the rule could have ended after some k >= 1 bytes with byte k
                    // following it.
                    let (mut ok, mut exit) = (false, false);
                    let mut all = true;
                    for (k, &b) in bytes.iter().enumerate() {
                        ok |= k >= 1 && exit && crate::automaton::byte_in(follow, b);
                        if !chart.push_byte(aut, b) {
                            all = false;
                            break;
                        }
                        exit = chart.can_exit();
                    }
                    if all {
                        accepted.push(id);
                    } else if ok {
                        uncertain.push(p as u32);
                    }
                }
                accepted.sort_unstable();
                assert_eq!(
                    ids(&m.accepted, &g.text_bits),
                    accepted,
                    "node {n}: accepted"
                );
                assert_eq!(m.uncertain, uncertain, "node {n}: uncertain");
            }
        }
        assert!(walked >= 40, "only {walked} nodes walked");
    }

    /// Grammars whose rules recur from one to the next: JSON Schemas with string, number
    /// and key rules in common (open objects: the rest of an undeclared key), and EBNF with
    /// a right-linear rule built inline, token terminals, and the same shapes under other
    /// rule names and ids.
    fn recurring_grammars() -> Vec<Grammar> {
        let schemas = [
            r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}"#,
            r#"{"type":"object","properties":{"email":{"type":"string"},"age":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}}}}"#,
            r#"{"type":"object","properties":{"name":{"type":"string","maxLength":5},"active":{"type":"boolean"}},"additionalProperties":false}"#,
            r#"{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}}}}"#,
        ];
        let mut out: Vec<Grammar> = schemas
            .iter()
            .map(|s| {
                let v: serde_json::Value = serde_json::from_str(s).unwrap();
                crate::json_schema_to_grammar(&v, &Default::default()).unwrap()
            })
            .collect();
        for ebnf in [
            "root ::= x \"=\" y | y\nx ::= [a-z] x | \"\"\ny ::= [0-9]+ (\",\" x)?",
            "root ::= q \"=\" p | p\nq ::= [a-z] q | \"\"\np ::= [0-9]+ (\",\" q)?",
            "root ::= a b a <[5]>\na ::= \"ab\" a | \"c\"\nb ::= a? [x-z]*",
        ] {
            out.push(parse_ebnf(ebnf, "root").unwrap());
        }
        out
    }

    /// Rule automata taken from a warm compiler's cache are the automata a compiler
    /// without the cache builds, edge for edge, and their masks are the full walk's on
    /// every node; a second compile of a grammar builds no rule automaton.
    #[test]
    fn cached_rule_automata_equal_built_ones() {
        let vocab = Arc::new(wide_vocabulary());
        let warm = GrammarCompiler::new(vocab.clone())
            .with_precompute(Precompute::Lazy)
            .with_cache_enabled(false);
        let grammars = recurring_grammars();
        // Twice, the second time in reverse order: every grammar meets a cache warmed by
        // all the others.
        for pass in 0..2 {
            let order: Vec<&Grammar> = if pass == 0 {
                grammars.iter().collect()
            } else {
                grammars.iter().rev().collect()
            };
            for g in order {
                let cold = GrammarCompiler::new(vocab.clone())
                    .with_rule_automaton_cache_capacity(0)
                    .with_precompute(Precompute::Lazy)
                    .compile_ir(g)
                    .unwrap();
                let before = warm.rule_automaton_cache_stats();
                let w = warm.compile_ir(g).unwrap();
                let after = warm.rule_automaton_cache_stats();
                assert_eq!(
                    format!("{:?}", w.aut),
                    format!("{:?}", cold.aut),
                    "pass {pass}: automata differ for\n{g}"
                );
                if pass == 1 {
                    assert_eq!(after.builds, before.builds, "rebuilt a rule of\n{g}");
                    assert!(after.hits > before.hits, "no hit for\n{g}");
                }
                for n in 0..w.aut.nodes.len() as u32 {
                    if let Some(m) = w.node_mask(n) {
                        assert_full_walk_mask(&w, n, &m, "warm compiler");
                    }
                }
            }
        }
        let stats = warm.rule_automaton_cache_stats();
        assert!(stats.entries > 0 && stats.size_bytes > 0, "{stats:?}");
        assert_eq!(
            GrammarCompiler::new(vocab)
                .with_rule_automaton_cache_capacity(0)
                .rule_automaton_cache_stats()
                .entries,
            0
        );
    }

    /// Rules that recur within and across grammars are built once: the second of two
    /// schemas with the same string and number properties under other names builds fewer
    /// rules than the first, and the cache is emptied by `clear_cache`.
    #[test]
    fn recurring_rules_are_built_once_per_compiler() {
        let vocab = Arc::new(wide_vocabulary());
        let c = GrammarCompiler::new(vocab).with_precompute(Precompute::Lazy);
        let first: serde_json::Value = serde_json::from_str(
            r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}}"#,
        )
        .unwrap();
        let second: serde_json::Value = serde_json::from_str(
            r#"{"type":"object","properties":{"title":{"type":"string"},"count":{"type":"integer"}}}"#,
        )
        .unwrap();
        c.compile_json_schema(&first, &Default::default()).unwrap();
        let one = c.rule_automaton_cache_stats();
        c.compile_json_schema(&second, &Default::default()).unwrap();
        let two = c.rule_automaton_cache_stats();
        assert!(two.hits > one.hits, "{one:?} then {two:?}");
        assert!(
            two.builds - one.builds < one.builds,
            "{one:?} then {two:?}: the second schema built as many rules as the first"
        );
        assert!(c.cache_size_bytes() >= two.size_bytes);
        c.clear_cache();
        assert_eq!(c.rule_automaton_cache_stats().entries, 0);
    }
}
