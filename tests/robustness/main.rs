//! Bad and oversized input: typed errors with a place, never a panic, never a stack
//! overflow, and every configurable limit of the compiler.
//!
//! Run with `cargo test --release --test robustness [filter]`.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod deep_nesting;
mod limits;
