"""GrammarCompiler and CompiledGrammar (XGrammar's names and signatures)."""

import base64
import json
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union

from . import _core
from .exception import DeserializeFormatError
from .grammar import Grammar, _schema_text, _separators, _structural_tag_text
from .tokenizer_info import TokenizerInfo, _b64_field, _json_object

__all__ = ["GrammarCompiler", "CompiledGrammar"]


class CompiledGrammar:
    """A grammar compiled against a vocabulary: its automata and token mask cache. Shared,
    read-only, by every :class:`GrammarMatcher` that decodes with it (also across threads)."""

    def __init__(self, core: "_core.CompiledGrammar", tokenizer_info: TokenizerInfo) -> None:
        self._compiled = core
        self._tokenizer_info = tokenizer_info

    @property
    def grammar(self) -> Grammar:
        """The grammar it was compiled from."""
        return Grammar(self._compiled.grammar)

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        """The vocabulary it was compiled against."""
        return self._tokenizer_info

    @property
    def memory_size_bytes(self) -> int:
        """Heap memory of its automata and masks, in bytes."""
        return self._compiled.memory_size_bytes

    def serialize_bytes(self) -> bytes:
        """This grammar as bytes (``CompiledGrammar::serialize``): a 40-byte header (magic
        ``TSGRAMMR``, format version, the vocabulary's fingerprint, payload length, XXH3
        checksum), then a postcard payload with the grammar, its automata and every token
        mask computed so far. The vocabulary is not in it; :meth:`deserialize_bytes` takes
        it. The GIL is released while encoding."""
        return self._compiled.serialize()

    @staticmethod
    def deserialize_bytes(data: bytes, tokenizer_info: TokenizerInfo) -> "CompiledGrammar":
        """Reads the bytes of :meth:`serialize_bytes` for ``tokenizer_info`` (the vocabulary
        it was compiled with, or a copy of it: checked by the fingerprint). Masks that were
        not written are computed on first use. The GIL is released while decoding.

        Raises
        ------
        tokensieve.exception.DeserializeFormatError
            (a ValueError) for bytes that are too short, of another kind, truncated,
            damaged, malformed, or compiled for another vocabulary;
            ``DeserializeVersionError`` for a format version this one does not read (newer or older).
        TypeError
            For ``data`` that is not bytes-like, or ``tokenizer_info`` that is not a
            TokenizerInfo.
        """
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(f"tokenizer_info must be a TokenizerInfo, not {type(tokenizer_info)}")
        if isinstance(data, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data)}")
        core = _core.CompiledGrammar.deserialize(bytes(data), tokenizer_info._grammar_loader())
        return CompiledGrammar(core, tokenizer_info)

    def serialize_json(self) -> str:
        """This grammar as a JSON object (XGrammar's name; the content is tokensieve's):
        ``{"tokensieve": "CompiledGrammar", "format": 1, "compiled_grammar": <base64 of
        serialize_bytes()>}``. Read it back with :meth:`deserialize_json` and the
        TokenizerInfo (XGrammar's signature). Prefer :meth:`serialize_bytes` or pickle
        where bytes travel: base64 makes the text 4/3 of the bytes."""
        return json.dumps(
            {
                "tokensieve": "CompiledGrammar",
                "format": 1,
                "compiled_grammar": base64.b64encode(self.serialize_bytes()).decode("ascii"),
            }
        )

    @staticmethod
    def deserialize_json(json_string: str, tokenizer_info: TokenizerInfo) -> "CompiledGrammar":
        """Reads the JSON of :meth:`serialize_json` for ``tokenizer_info``.

        Raises
        ------
        tokensieve.exception.DeserializeFormatError
            (a ValueError and an ``InvalidJSONError``) for text that is not JSON or not a
            serialized CompiledGrammar, and as :meth:`deserialize_bytes`.
        TypeError
            For a ``tokenizer_info`` that is not a TokenizerInfo.
        """
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(f"tokenizer_info must be a TokenizerInfo, not {type(tokenizer_info)}")
        d = _json_object(json_string, "CompiledGrammar")
        try:
            data = _b64_field(d, "compiled_grammar")
        except (KeyError, TypeError, ValueError) as e:
            raise DeserializeFormatError(f"not a serialized CompiledGrammar: {e!r}") from e
        return CompiledGrammar.deserialize_bytes(data, tokenizer_info)

    def __reduce__(self):
        """Pickles through :meth:`serialize_bytes`, with its TokenizerInfo (itself pickled
        once per pickle, however many grammars share it)."""
        return (_compiled_grammar_from_bytes, (self.serialize_bytes(), self._tokenizer_info))


def _compiled_grammar_from_bytes(data: bytes, tokenizer_info: TokenizerInfo) -> CompiledGrammar:
    """Unpickles a CompiledGrammar (:meth:`CompiledGrammar.__reduce__`)."""
    return CompiledGrammar.deserialize_bytes(data, tokenizer_info)


class GrammarCompiler:
    """Compiles grammars against one vocabulary.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
    max_threads : int, default 8
        Threads that compute a grammar's token masks at compile time (its own pool).
    cache_enabled : bool, default True
        Whether compiled grammars are kept (the engine's whole-grammar cache, keyed by the
        kind of source, the source text and the options): compiling the same source again
        returns the same grammar at once; concurrent compiles of one source compile once.
        False also turns off the rule automata the engine shares across grammars, so
        nothing of one compile is kept for the next.
    cache_limit_bytes : int, default -1
        Bound of that cache in bytes (-1: unlimited, as XGrammar's); past it the least
        recently used grammars are dropped. A grammar's size is its
        :attr:`CompiledGrammar.memory_size_bytes` when compiled.
    precompute : "background", "eager" or "lazy", default "background"
        A tokensieve extension (XGrammar has no such keyword): when the grammar's node
        masks are computed. "background" (the default): compiles as "lazy" does, then
        computes the eager masks on a background thread of the engine while matchers
        already run (a fill that needs a mask not reached yet computes it itself), so
        compiling is fast and the steady state is eager's. "eager": at compile time, on
        the compiler's threads; compiling is several times slower. "lazy": on first use,
        by the fill that needs a mask; compiling takes about the time of building the
        automata. Masks are the same in every mode; only when they are computed differs.

    Compiling releases the GIL. Node masks that recur across grammars (JSON strings,
    numbers) are shared through a separate per-vocabulary mask cache of the engine (its
    default size), which :meth:`clear_cache` does not touch.

    Raises
    ------
    TypeError
        For a ``tokenizer_info`` that is not a TokenizerInfo.
    ValueError
        For ``max_threads < 1``, ``cache_limit_bytes < -1`` or another ``precompute``.
    """

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        *,
        max_threads: int = 8,
        cache_enabled: bool = True,
        cache_limit_bytes: int = -1,
        precompute: Literal["eager", "lazy", "background"] = "background",
    ) -> None:
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(f"tokenizer_info must be a TokenizerInfo, not {type(tokenizer_info)}")
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        if cache_limit_bytes < -1:
            raise ValueError(
                f"cache_limit_bytes must be -1 (unlimited) or a byte count, got {cache_limit_bytes}"
            )
        self._tokenizer_info = tokenizer_info
        self._compiler = _core.GrammarCompiler(
            tokenizer_info._vocab,
            max_threads,
            cache_enabled=bool(cache_enabled),
            cache_limit_bytes=None if cache_limit_bytes == -1 else int(cache_limit_bytes),
            precompute=precompute,
        )

    @property
    def cache_enabled(self) -> bool:
        """Whether compiled grammars are kept (the whole-grammar cache)."""
        return self._compiler.cache_enabled

    @property
    def cache_limit_bytes(self) -> int:
        """The byte bound of the whole-grammar cache (-1: unlimited)."""
        limit = self._compiler.cache_limit_bytes
        return -1 if limit is None else limit

    def get_cache_size_bytes(self) -> int:
        """Bytes held by the whole-grammar cache (each grammar counted as its
        ``memory_size_bytes`` when it was compiled); 0 when empty or disabled."""
        return self._compiler.cache_size_bytes()

    def clear_cache(self) -> None:
        """Empties the whole-grammar cache. Grammars already handed out live on."""
        self._compiler.clear_cache()

    def _wrap(self, core: "_core.CompiledGrammar") -> CompiledGrammar:
        return CompiledGrammar(core, self._tokenizer_info)

    def compile_json_schema(
        self,
        schema: Union[str, Type[Any], Dict[str, Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        any_order: bool = False,
        lenient: bool = False,
    ) -> CompiledGrammar:
        """Compiles a JSON Schema (a JSON string, a dict, or a pydantic model class).

        Parameters
        ----------
        any_whitespace : bool, default True
            Any JSON whitespace between tokens (never before or after the value, as
            XGrammar); False: one line, the separators only.
        indent : int, optional
            Ignored with ``any_whitespace=True`` (as XGrammar); with False not supported
            yet (ValueError).
        separators : (str, str), optional
            The item and key separators, written as given (whitespace allowed around them
            with ``any_whitespace``). Default as XGrammar: ``(",", ":")`` with
            ``any_whitespace``, ``(", ", ": ")`` without. tokensieve needs exactly one
            ``,`` in the first and one ``:`` in the second, and no quote, backslash or
            bracket (ValueError otherwise; XGrammar also takes ``(";", "=")``).
        strict_mode : bool, default True
            Undeclared properties are forbidden where ``additionalProperties`` is absent.
        max_whitespace_cnt : int, optional
            The most whitespace characters in one place.
        any_order : bool, default False
            Properties in any order.
        lenient : bool, default False
            (tokensieve's, not XGrammar's) Ignore keywords that are not enforced, such as a
            ``format`` outside the supported list, instead of raising; the grammar then
            accepts more than the schema.

        Raises
        ------
        tokensieve.exception.InvalidJSONError
            For schema text that is not JSON.
        tokensieve.exception.InvalidJSONSchemaError
            For a schema that cannot be enforced (the message names its JSON pointer).
        """
        return self._wrap(
            self._compiler.compile_json_schema(
                _schema_text(schema),
                any_whitespace,
                max_whitespace_cnt,
                strict_mode,
                any_order,
                lenient,
                indent,
                _separators(separators),
            )
        )

    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compiles XGrammar's built-in JSON grammar: an object or an array, no whitespace
        before or after it."""
        return self._wrap(self._compiler.compile_builtin_json_grammar())

    def compile_regex(self, regex: str) -> CompiledGrammar:
        """Compiles a regular expression (the whole output matches it), in XGrammar's
        dialect: ``\\d``, ``\\w``, ``\\s`` are ECMAScript's ASCII classes (``\\s`` with
        ECMAScript's Unicode spaces) and ``.`` matches any character, newlines included
        (``(?-s)`` turns that off inside the pattern)."""
        return self._wrap(self._compiler.compile_regex(regex))

    def compile_structural_tag(self, *args: Any, **kwargs: Any) -> CompiledGrammar:
        """Compiles a structural tag: XGrammar's JSON as a str or dict
        (``compile_structural_tag(tag)``), or the legacy ``compile_structural_tag(tags,
        triggers)`` with :class:`StructuralTagItem` s.

        Raises
        ------
        tokensieve.exception.InvalidJSONError
            For text that is not JSON.
        tokensieve.exception.InvalidStructuralTagError
            For a tag that cannot be read or lowered (the message names the JSON path).
        """
        return self._wrap(self._compiler.compile_structural_tag(_structural_tag_text(args, kwargs)))

    def compile_grammar(
        self, grammar: Union[str, Grammar], *, root_rule_name: str = "root"
    ) -> CompiledGrammar:
        """Compiles EBNF text (with its root rule) or a :class:`Grammar`."""
        if isinstance(grammar, str):
            return self._wrap(self._compiler.compile_ebnf(grammar, root_rule_name))
        if isinstance(grammar, Grammar):
            return self._wrap(self._compiler.compile_grammar(grammar._grammar))
        raise TypeError(f"grammar must be an EBNF string or a Grammar, not {type(grammar)}")
