//! Token masks: the vocabulary trie, the per-node mask cache, and bitmask helpers.
//!
//! A token bitmask has the layout of XGrammar's int32 bitmask: bit `i % 32` of word `i / 32`
//! is set when token `i` may come next; a row is `ceil(vocab_size / 32)` `u32` words, and a
//! batch is `[batch, words]` row-major. GPU kernels written for XGrammar apply it unchanged.

pub(crate) mod background;
pub(crate) mod cache;
pub(crate) mod counted;
pub(crate) mod shared;
pub mod trie;

mod bitmask;

pub use background::BackgroundStatus;
pub use bitmask::{
    allocate_token_bitmask, apply_token_bitmask_inplace, batch_fill_next_token_bitmask,
    bitmask_words, fill_next_token_bitmask_batch, is_token_allowed, BitmaskError,
};
pub use trie::TokenTrie;
