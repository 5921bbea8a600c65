//! XML-style tool-call formats (Qwen3-Coder, GLM) on real vocabularies (see
//! tests/tool_check): rendered calls for random BFCL tools are accepted token by token by
//! each family's grammar and parse back with their values typed by the schema (whole and
//! streamed in random chunks); constrained random walks always give calls that name
//! offered tools and validate; under `none` no call appears.
#![cfg(feature = "hf")]

mod common;
mod tool_check;

use common::RealTokenizer;
use tokensieve::tools::{format_by_name, Qwen3Coder};

/// BFCL files whose `function` lists are the tools.
const FILES: &[&str] = &[
    "BFCL_v4_simple_python.json",
    "BFCL_v4_multiple.json",
    "BFCL_v4_parallel.json",
    "BFCL_v4_parallel_multiple.json",
];

/// Qwen3-Coder on Qwen3: round trip for single and parallel calls under every tool_choice.
#[test]
fn qwen3_coder_round_trip_qwen3() {
    let Some(tok) = RealTokenizer::load("qwen3") else {
        return;
    };
    let f = Qwen3Coder::default();
    assert_eq!(tool_check::round_trip(&f, &tok, FILES, 25, false, 11), 25);
    assert_eq!(tool_check::round_trip(&f, &tok, FILES, 25, true, 12), 25);
}

/// Qwen3-Coder on Qwen3: 200 constrained walks (required and named), every call
/// validates; under `none` no call.
#[test]
fn qwen3_coder_walks_qwen3() {
    let Some(tok) = RealTokenizer::load("qwen3") else {
        return;
    };
    let f = format_by_name("qwen3_xml").expect("registered");
    let done = tool_check::constrained_walks(f.as_ref(), &tok, FILES, 200, 13);
    assert!(done >= 200, "only {done} walks stopped");
    tool_check::none_never_calls(f.as_ref(), &tok, 30, 14);
}
