"""Helpers for tests, as XGrammar's ``xgrammar.testing`` has them."""

from typing import Any, Dict, List, Optional, Tuple, Type, Union

import numpy as np

from . import _core
from .grammar import Grammar
from .matcher import _cpu_buffer, _is_torch

__all__ = [
    "_is_grammar_accept_string",
    "_get_masked_tokens_from_bitmask",
    "_json_schema_to_ebnf",
    "_regex_to_ebnf",
]

# A vocabulary of the 256 single bytes, against which a grammar is compiled to match text.
_BYTE_COMPILER = None


def _byte_compiler() -> "_core.GrammarCompiler":
    global _BYTE_COMPILER
    if _BYTE_COMPILER is None:
        vocab = _core.Vocabulary.from_token_bytes([bytes([b]) for b in range(256)], [], [])
        _BYTE_COMPILER = _core.GrammarCompiler(vocab, 1, 0)
    return _BYTE_COMPILER


def _is_grammar_accept_string(
    grammar: Union[Grammar, str],
    input_str: Union[str, bytes],
    *,
    debug_print: bool = False,
    print_time: bool = False,
    require_termination: bool = True,
) -> bool:
    """True when ``grammar`` (a :class:`Grammar` or EBNF text) accepts ``input_str``; with
    ``require_termination`` (default), the string must be a complete match."""
    if isinstance(grammar, str):
        grammar = Grammar.from_ebnf(grammar)
    compiled = _byte_compiler().compile_grammar(grammar._grammar)
    matcher = _core.GrammarMatcher(compiled)
    if not matcher.accept_string(input_str):
        if debug_print:
            print(f"tokensieve: the grammar rejects {input_str!r}")
        return False
    return matcher.is_completed() if require_termination else True


def _get_masked_tokens_from_bitmask(bitmask: Any, vocab_size: int, index: int = 0) -> List[int]:
    """The ids below ``vocab_size`` whose bit is clear in ``bitmask[index]`` (the rejected
    tokens), ascending. ``bitmask``: an int32 CPU tensor or numpy array."""
    arr = np.asarray(_cpu_buffer(bitmask, "bitmask", bitmask.dtype if _is_torch(bitmask) else None))
    if arr.dtype != np.int32:
        raise TypeError(f"bitmask must be int32, got {arr.dtype}")
    row = arr if arr.ndim == 1 else arr[index]
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits == 0).tolist()


def _json_schema_to_ebnf(
    schema: Union[str, Type[Any], Dict[str, Any]],
    *,
    any_whitespace: bool = True,
    indent: Optional[int] = None,
    separators: Optional[Tuple[str, str]] = None,
    max_whitespace_cnt: Optional[int] = None,
    strict_mode: bool = True,
    any_order: bool = False,
) -> str:
    """The EBNF text of a JSON Schema's grammar (tokensieve's EBNF: the text differs from
    XGrammar's, the language is the schema's)."""
    return str(
        Grammar.from_json_schema(
            schema,
            any_whitespace=any_whitespace,
            indent=indent,
            separators=separators,
            strict_mode=strict_mode,
            max_whitespace_cnt=max_whitespace_cnt,
            any_order=any_order,
        )
    )


def _regex_to_ebnf(regex: str, with_rule_name: bool = True) -> str:
    """The EBNF text of a regex's grammar; without ``with_rule_name``, only the body of the
    ``root`` rule."""
    text = str(Grammar.from_regex(regex))
    if with_rule_name:
        return text
    for line in text.splitlines():
        if line.startswith("root ::= "):
            return line[len("root ::= ") :]
    return text
