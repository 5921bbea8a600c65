#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run` calls this script and nothing else):
# every crate of the workspace in release mode (the engine with its GGUF reader's tests,
# tokensieve-tools, tokensieve-cli), then the Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --workspace --exclude tokensieve-python --features tokensieve/gguf
# The Python package: a virtualenv, its dependencies from the package registry, the
# extension built with maturin, then pytest (python/test.sh).
bash python/test.sh
