//! Tool-call formats on real vocabularies (see tests/tool_check): rendered calls for random
//! BFCL tools are accepted token by token by each family's grammar and parse back (whole
//! and streamed in random chunks); constrained random walks always give calls that name
//! offered tools and validate; under `none` no call appears.

use crate::common;
use crate::tool_check;

use common::RealTokenizer;
use tokensieve_tools::Hermes;

/// Hermes on Qwen3: round trips of single and parallel calls under every tool_choice, 200
/// constrained walks whose calls validate, and no call under `none`.
#[test]
fn hermes_on_qwen3() {
    let tok = RealTokenizer::load("qwen3");
    tool_check::check_family(tok.as_ref(), &Hermes::default(), [1, 2], [3, 4], &[]);
}
