"""Exceptions raised by tokensieve.

Engine errors are :class:`TokensieveError` (a ``RuntimeError``, as XGrammar's errors are)
carrying the Rust error's message; invalid arguments (a bitmask of the wrong dtype or shape,
an out-of-range index, a token id past the vocabulary) are ``TypeError``, ``ValueError`` or
``IndexError``.
"""

from ._core import (
    InvalidJSONError,
    InvalidJSONSchemaError,
    InvalidStructuralTagError,
    TokensieveError,
)

__all__ = [
    "TokensieveError",
    "InvalidJSONError",
    "InvalidJSONSchemaError",
    "InvalidStructuralTagError",
]
