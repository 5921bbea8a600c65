"""Shared fixtures: the real tokenizers of ../shared, loaded through transformers.

Outside CI a missing file skips the test with the reason printed; under CI=true it fails,
so CI never passes by skipping.
"""

import os
from pathlib import Path

import pytest

# python/tests -> python -> the repository -> its parent, where shared/ lives.
SHARED = Path(__file__).resolve().parents[3] / "shared"


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def shared_path(*parts: str) -> Path:
    """``../shared/<parts>``, or a skip (outside CI) / failure (CI=true) when missing."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        msg = f"{'/'.join(parts)} missing at {path}"
        if in_ci():
            pytest.fail(f"CI=true but {msg}: the shared test data must be present in CI")
        print(f"skipping: {msg}")
        pytest.skip(msg)
    return path


_TOKENIZERS = {}


def hf_tokenizer(name: str):
    """``transformers.AutoTokenizer`` of ``../shared/tokenizers/<name>`` (cached)."""
    if name not in _TOKENIZERS:
        folder = shared_path("tokenizers", name)
        import transformers

        _TOKENIZERS[name] = transformers.AutoTokenizer.from_pretrained(str(folder))
    return _TOKENIZERS[name]


_INFOS = {}


def tokenizer_info(name: str):
    import tokensieve as xgr

    if name not in _INFOS:
        _INFOS[name] = xgr.TokenizerInfo.from_huggingface(hf_tokenizer(name))
    return _INFOS[name]


_COMPILERS = {}


def compiler(name: str):
    import tokensieve as xgr

    if name not in _COMPILERS:
        _COMPILERS[name] = xgr.GrammarCompiler(tokenizer_info(name), max_threads=2)
    return _COMPILERS[name]


@pytest.fixture(params=["llama3_1", "qwen3"])
def model(request):
    """The name of a shared tokenizer; each test using it runs on Llama 3.1 and Qwen3."""
    return request.param


@pytest.fixture(scope="session")
def tiny_info():
    """A small byte-level vocabulary: every printable ASCII char, a few words, and
    ``<|end|>`` as its stop token."""
    import tokensieve as xgr

    tokens = [chr(c) for c in range(32, 127)] + ["Ġhello", "Ġworld", "true", "false", "<|end|>"]
    tokens = [t.replace(" ", "Ġ") for t in tokens]
    return xgr.TokenizerInfo(tokens, xgr.VocabType.BYTE_LEVEL, vocab_size=128)
