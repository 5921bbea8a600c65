"""tokensieve: constrained decoding for LLMs, with XGrammar's Python API.

Code written for XGrammar runs with ``import tokensieve as xgr``::

    import tokensieve as xgr
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=config.vocab_size)
    compiler = xgr.GrammarCompiler(info)
    compiled = compiler.compile_json_schema(schema)
    matcher = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    xgr.apply_token_bitmask_inplace(logits, bitmask.to(logits.device))
    matcher.accept_token(next_token)

The engine is the Rust crate ``tokensieve``; this package is a thin binding over it.
"""

from . import exception, serving, testing, tools
from .compiler import CompiledGrammar, GrammarCompiler
from .exception import (
    DeserializeFormatError,
    DeserializeVersionError,
    InvalidJSONError,
    InvalidJSONSchemaError,
    InvalidStructuralTagError,
    TokensieveError,
)
from .grammar import Grammar, StructuralTagItem
from .matcher import (
    BatchGrammarMatcher,
    GrammarMatcher,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    bitmask_dtype,
    get_bitmask_shape,
    reset_token_bitmask,
)
from .tokenizer_info import TokenizerInfo, VocabType
from .tools import get_model_structural_tag

__all__ = [
    "exception",
    "serving",
    "testing",
    "tools",
    "CompiledGrammar",
    "GrammarCompiler",
    "Grammar",
    "StructuralTagItem",
    "BatchGrammarMatcher",
    "GrammarMatcher",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_dtype",
    "get_bitmask_shape",
    "reset_token_bitmask",
    "TokenizerInfo",
    "VocabType",
    "get_model_structural_tag",
    "TokensieveError",
    "DeserializeFormatError",
    "DeserializeVersionError",
    "InvalidJSONError",
    "InvalidJSONSchemaError",
    "InvalidStructuralTagError",
]


def __getattr__(name: str):
    """``tokensieve.contrib`` and ``tokensieve.hf`` load on first use (they import
    transformers, which is slow to import and optional)."""
    import importlib

    if name == "contrib":
        return importlib.import_module(".contrib", __name__)
    if name == "hf":
        return importlib.import_module(".contrib.hf", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
