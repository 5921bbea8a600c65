//! Tool-call formats on real vocabularies (see tests/tool_check): rendered calls for random
//! BFCL tools are accepted token by token by each family's grammar and parse back (whole
//! and streamed in random chunks); constrained random walks always give calls that name
//! offered tools and validate; under `none` no call appears.

use crate::common;
use crate::tool_check;

use common::RealTokenizer;
use tokensieve_tools::{format_by_name, Hermes};

/// BFCL files whose `function` lists are the tools.
const FILES: &[&str] = &[
    "BFCL_v4_simple_python.json",
    "BFCL_v4_multiple.json",
    "BFCL_v4_parallel.json",
    "BFCL_v4_parallel_multiple.json",
];

/// Hermes on Qwen3: round trip for single and parallel calls under every tool_choice.
#[test]
fn hermes_round_trip_qwen3() {
    let Some(tok) = RealTokenizer::load("qwen3") else {
        return;
    };
    let f = Hermes::default();
    assert_eq!(tool_check::round_trip(&f, &tok, FILES, 25, false, 1), 25);
    assert_eq!(tool_check::round_trip(&f, &tok, FILES, 25, true, 2), 25);
}

/// Hermes on Qwen3: 200 constrained walks, every call validates.
#[test]
fn hermes_walks_qwen3() {
    let Some(tok) = RealTokenizer::load("qwen3") else {
        return;
    };
    let f = format_by_name("hermes").expect("registered");
    let done = tool_check::constrained_walks(f.as_ref(), &tok, FILES, 200, 3);
    assert!(done >= 200, "only {done} walks stopped");
    tool_check::none_never_calls(f.as_ref(), &tok, 30, 4);
}
