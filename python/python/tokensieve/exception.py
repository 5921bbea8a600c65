"""Exceptions raised by tokensieve.

Engine errors are :class:`TokensieveError` (a ``RuntimeError``, as XGrammar's errors are)
carrying the Rust error's message; invalid arguments (a bitmask of the wrong dtype or shape,
an out-of-range index, a token id past the vocabulary) are ``TypeError``, ``ValueError`` or
``IndexError``. A serialized object that cannot be read is :class:`DeserializeFormatError`,
both a ``ValueError`` and XGrammar's ``InvalidJSONError``.
"""

from ._core import (
    InvalidJSONError,
    InvalidJSONSchemaError,
    InvalidStructuralTagError,
    TokensieveError,
)



class DeserializeFormatError(InvalidJSONError, ValueError):
    """Bytes or text that cannot be read back as a serialized :class:`~tokensieve.CompiledGrammar`
    or :class:`~tokensieve.TokenizerInfo` (too short, of another kind, truncated, damaged,
    malformed, not JSON, or a grammar compiled for another vocabulary). The message is the
    engine's. A ``ValueError``, and XGrammar's ``InvalidJSONError`` too."""


class DeserializeVersionError(DeserializeFormatError):
    """Written by another tokensieve, in a format version this one does not read: a newer
    one, or an older one whose bytes must be written again (XGrammar's name)."""


__all__ = [
    "DeserializeFormatError",
    "DeserializeVersionError",
    "TokensieveError",
    "InvalidJSONError",
    "InvalidJSONSchemaError",
    "InvalidStructuralTagError",
]
