//! Token masks: the vocabulary trie, the per-node mask cache, mask planning (which kind of
//! mask each node gets: `plan`), and bitmask helpers.
//!
//! A token bitmask has the layout of XGrammar's int32 bitmask: bit `i % 32` of word `i / 32`
//! is set when token `i` may come next; a row is `ceil(vocab_size / 32)` `u32` words, and a
//! batch is `[batch, words]` row-major. GPU kernels written for XGrammar apply it unchanged.
//!
//! # Where a node's mask comes from
//!
//! 1. The grammar's own cache (`CompiledGrammar::masks`), one slot per *mask class*
//!    (bisimilar nodes of one automaton share a mask).
//! 2. The compiler's content-keyed cache (`mask::shared`): the key is the canonical
//!    serialisation of everything the mask depends on, the automaton reachable from the
//!    node's class (byte ranges, calls into other rules, token edges, finality, and the
//!    follow bytes of every rule on the way), numbered breadth first. The vocabulary is
//!    fixed per compiler, so equal keys mean equal masks: the lookup is exact, not a hash
//!    match. Every grammar of one `GrammarCompiler` and its clones (and every tool of one
//!    structural tag: they are nodes of one automaton) looks here before walking the trie.
//!    No key is made for a future of more than 256 classes, one through a counted
//!    repetition (those share per-state base walks instead, `mask::counted`), or once a
//!    grammar has spent its key budget. Bounded (`with_mask_cache_capacity`, least
//!    recently used entries dropped), thread safe, emptied by `clear_cache`, counted in
//!    `cache_size_bytes`.
//! 3. A trie walk (`mask::cache`), stored in both (`mask::plan` decides, node by node,
//!    whether the mask is walked, composed from callees, a delta, or derived). The walk
//!    takes whole every trie subtree whose tokens all lie in a vocabulary slice that the
//!    node consumes (`mask::slices`: JSON string contents, any text, text without `<`), so
//!    a string body's walk visits
//!    only the tokens with a quote, a backslash, a control character or a UTF-8 fragment;
//!    a node of calls (and byte edges) is composed from its callees' masks instead.
//!
//! The tests `tests/serving/shared_masks.rs` compare masks on a warm compiler with eager
//! masks of a fresh compiler that shares nothing, bit for bit, along teacher-forced
//! MaskBench instances and Hermes tool calls.

pub(crate) mod background;
pub(crate) mod cache;
pub(crate) mod counted;
pub(crate) mod intern;
pub(crate) mod plan;
pub(crate) mod shared;
pub(crate) mod slices;
pub(crate) mod token_set;
pub mod trie;
pub(crate) mod wire;

mod bitmask;
mod parallel;

pub use background::BackgroundStatus;
pub use bitmask::{
    allocate_token_bitmask, apply_token_bitmask_inplace, apply_token_bitmask_inplace_with,
    batch_fill_next_token_bitmask, batch_fill_next_token_bitmask_with, bitmask_words,
    fill_next_token_bitmask_batch, is_token_allowed, BitmaskError, FillNextTokenBitmask,
};
pub use trie::TokenTrie;
