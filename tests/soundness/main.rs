//! Mask ⇔ accept: random walks and teacher-forced texts over real and synthetic
//! vocabularies checked against an independent recogniser (`oracle`), rollback and
//! jump-forward, random API sequences, and the fuzz targets' properties under proptest.
//!
//! Run with `cargo test --release --test soundness [filter]`.

#[path = "../common/mod.rs"]
mod common;
mod oracle;

mod api_sequences;
mod fuzz_targets;
mod mask_accept_real;
mod oracle_ir;
mod random_walks;
mod rollback;
mod subtree_memo;
