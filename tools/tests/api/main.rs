//! The tool-calling API a user meets: tools and `tool_choice` from OpenAI JSON, the parser's
//! properties and fuzz regressions, and the error catalogue (`docs/errors.md`).
//!
//! Run with `cargo test --release -p tokensieve-tools --test api [filter]`.

#[path = "../../../tests/common/mod.rs"]
mod common;
#[path = "../events/mod.rs"]
mod events;

mod error_catalogue;
mod fuzz_regressions;
mod parser_props;
mod user_api;
