//! Tool-call formats on real vocabularies: rendered calls for random BFCL tools are
//! accepted token by token by each family's grammar and parse back; constrained walks;
//! recorded real outputs. Shared checks in `tool_check`.
//!
//! Run with `cargo test --release -p tokensieve-tools --test formats [filter]`.

#[path = "../../../tests/common/mod.rs"]
mod common;
#[path = "../events/mod.rs"]
mod events;
mod tool_check;

mod granite_internlm_phi4_llama31;
mod hermes;
mod invoke_families;
mod json_families;
mod recorded;
mod round_trip;
mod special_tokens;
mod xml_families;
