#!/usr/bin/env python3
"""Fills fuzz/corpus/<target>/ with seeds for the fuzz targets (the corpus is not committed).

    python3 fuzz/seed_corpora.py            # from the repository root or fuzz/

Sources: the committed seeds in fuzz/seeds/<target>/; for `json_schema`, every schema of
the JSON-Schema-Test-Suite (draft 2020-12, optional formats included) and a sample of
MaskBench schemas (../shared/testdata); for `structural_tag`, every structural-tag JSON
literal of tests/front_ends/structural_tag.rs; for `tool_parsers`, raw model outputs and rendered
prompts of ../shared/testdata/toolcalls. Seeds start with the target's flag/mode byte.
"""
import glob
import gzip
import hashlib
import json
import os
import re
import shutil

FUZZ = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(FUZZ)
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "testdata")
MAX_SEED = 8192  # bytes: larger seeds slow every run of the target
PER_COLLECTION = 25


def write(target, data):
    d = os.path.join(FUZZ, "corpus", target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def committed(target):
    n = 0
    for p in glob.glob(os.path.join(FUZZ, "seeds", target, "*")):
        d = os.path.join(FUZZ, "corpus", target)
        os.makedirs(d, exist_ok=True)
        shutil.copy(p, d)
        n += 1
    return n


def json_schema():
    n = 0
    suite = os.path.join(SHARED, "json-schema-test-suite", "draft2020-12")
    for p in sorted(glob.glob(os.path.join(suite, "*.json")) + glob.glob(os.path.join(suite, "optional", "format", "*.json"))):
        for case in json.load(open(p)):
            text = json.dumps(case["schema"]).encode()
            if len(text) < MAX_SEED:
                write("json_schema", b"\x00" + text)
                n += 1
    bench = os.path.join(SHARED, "jsonschemabench")
    for p in sorted(glob.glob(os.path.join(bench, "*", "*.jsonl.gz"))):
        taken = 0
        with gzip.open(p, "rt") as f:
            for i, line in enumerate(f):
                if taken >= PER_COLLECTION:
                    break
                text = json.dumps(json.loads(line)["schema"], separators=(",", ":")).encode()
                if len(text) < MAX_SEED:
                    # Alternate the defaults with any_order + ignore_unknown_keywords.
                    write("json_schema", (b"\x00" if i % 2 else b"\x14") + text)
                    taken += 1
                    n += 1
    return n


def structural_tag():
    src = open(os.path.join(ROOT, "tests", "structural_tag.rs")).read()
    n = 0
    for lit in re.findall(r'r#"(\{.*?)"#', src, re.S):
        try:
            json.loads(lit)
        except ValueError:
            continue  # a format!() template, or a deliberately broken tag
        write("structural_tag", b"\x00" + lit.encode())
        n += 1
    return n


def tool_parsers():
    """Raw model outputs (BFCL results of Hermes-style and other models) and rendered
    prompts in native tool-call syntaxes, each behind a flags byte and a chunking seed."""
    n = 0
    tc = os.path.join(SHARED, "toolcalls")
    texts = []
    for p in sorted(glob.glob(os.path.join(tc, "bfcl-result", "results", "*", "*.json"))):
        with open(p) as f:
            for i, line in enumerate(f):
                if i >= 3:
                    break
                result = json.loads(line).get("result")
                if isinstance(result, str):
                    texts.append(result)
    for pat in ["ollama-tool-fixtures/*.out", "functionary-prompt-fixtures/*.txt"]:
        for p in sorted(glob.glob(os.path.join(tc, pat))):
            texts.append(open(p).read()[-3000:])
    for i, t in enumerate(texts):
        write("tool_parsers", bytes([i % 4, i % 251]) + t.encode()[:MAX_SEED])
        n += 1
    return n


if __name__ == "__main__":
    for target in ["ebnf", "regex", "matcher", "json_schema", "structural_tag", "tool_parsers"]:
        print(target, "committed seeds:", committed(target))
    print("json_schema seeds from testdata:", json_schema())
    print("structural_tag seeds from tests/front_ends/structural_tag.rs:", structural_tag())
    print("tool_parsers seeds from toolcalls/:", tool_parsers())
