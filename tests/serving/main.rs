//! What serving engines call: per-step bitmask rows and batches, draft validation, the
//! engine adapter, the whole-grammar cache, serialization, and one compiled grammar shared
//! by many threads.
//!
//! Run with `cargo test --release --test serving [filter]`.

#[path = "../common/mod.rs"]
mod common;
mod maskbench;

mod concurrency;
mod deferred;
mod engine_adapter;
mod grammar_cache;
mod per_step_calls;
mod serialize;
mod shared_masks;
