//! The regex, structural-tag and EBNF front ends: accept/reject tables through the matcher,
//! and the EBNF printer's round trip.
//!
//! Run with `cargo test --release --test front_ends [filter]`.

#[path = "../common/mod.rs"]
mod common;

mod ebnf;
mod regex;
mod structural_tag;
