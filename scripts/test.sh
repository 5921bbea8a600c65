#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run` calls this script and nothing else):
# every crate of the workspace in release mode (the engine with its GGUF reader's tests,
# tokensieve-tools, tokensieve-cli).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --workspace --features tokensieve/gguf
