"""GrammarCompiler and CompiledGrammar (XGrammar's names and signatures)."""

from typing import Any, Dict, List, Optional, Tuple, Type, Union

from . import _core
from .grammar import Grammar, _check_layout, _schema_text, _structural_tag_text
from .tokenizer_info import TokenizerInfo

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


class GrammarCompiler:
    """Compiles grammars against one vocabulary.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
    max_threads : int, default 8
        Threads that compute a grammar's token masks at compile time (its own pool).
    cache_enabled : bool, default True
        Whether node masks are shared between the grammars of this compiler (structures
        that recur, such as JSON strings and numbers, are computed once).
    cache_limit_bytes : int, default -1
        Bound of that cache in bytes (-1: the engine's default, 256 MiB).

    Compiling releases the GIL.
    """

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        *,
        max_threads: int = 8,
        cache_enabled: bool = True,
        cache_limit_bytes: int = -1,
    ) -> None:
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(f"tokenizer_info must be a TokenizerInfo, not {type(tokenizer_info)}")
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        if not cache_enabled:
            cache = 0
        elif cache_limit_bytes < 0:
            cache = None
        else:
            cache = cache_limit_bytes
        self._tokenizer_info = tokenizer_info
        self._compiler = _core.GrammarCompiler(tokenizer_info._vocab, max_threads, cache)

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
    ) -> CompiledGrammar:
        """Compiles a JSON Schema (a JSON string, a dict, or a pydantic model class).

        Parameters
        ----------
        any_whitespace : bool, default True
            Any JSON whitespace between tokens; False: compact output (``,`` and ``:``).
        indent, separators
            Only None / ``(",", ":")`` are supported with ``any_whitespace=False``
            (ValueError otherwise); ignored with ``any_whitespace=True``.
        strict_mode : bool, default True
            Undeclared properties are forbidden where ``additionalProperties`` is absent.
        max_whitespace_cnt : int, optional
            The most whitespace characters in one place.
        any_order : bool, default False
            Properties in any order.

        Raises
        ------
        tokensieve.exception.InvalidJSONError
            For schema text that is not JSON.
        tokensieve.exception.InvalidJSONSchemaError
            For a schema that cannot be enforced (the message names its JSON pointer).
        """
        _check_layout(any_whitespace, indent, separators)
        return self._wrap(
            self._compiler.compile_json_schema(
                _schema_text(schema), any_whitespace, max_whitespace_cnt, strict_mode, any_order
            )
        )

    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compiles the grammar of any JSON value."""
        return self._wrap(self._compiler.compile_builtin_json_grammar())

    def compile_regex(self, regex: str) -> CompiledGrammar:
        """Compiles a regular expression (the whole output matches it)."""
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
