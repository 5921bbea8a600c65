"""The engine adapter for serving engines (the Rust ``tokensieve::engine``), with the calls
that vLLM's structured-output backends implement and SGLang's grammar objects make.

:class:`StructuredOutputBackend` is the engine-level half (vLLM's
``StructuredOutputBackend``: one per model, over a :class:`~tokensieve.GrammarCompiler` and
its whole-grammar cache); :class:`StructuredOutputGrammar` is the request-level half (vLLM's
``StructuredOutputGrammar``), with the semantics of vLLM's xgrammar backend: tokens after
termination are ignored by ``accept_tokens`` and validate to nothing, and
``validate_tokens`` stops after a token that terminates. Both are the engine's types; this
module only converts arguments. ``docs/serving.md`` maps vLLM's and SGLang's methods onto
them::

    import tokensieve as xgr
    from tokensieve.serving import StructuredOutputBackend

    backend = StructuredOutputBackend(xgr.GrammarCompiler(info), max_rollback_tokens=k)
    grammar = backend.compile_grammar("json", schema_text)        # per request
    bitmask = backend.allocate_token_bitmask(max_num_seqs)         # per batch
    grammar.fill_bitmask(bitmask, row)                             # GIL released
    grammar.accept_tokens(request_id, [token])
"""

import operator
from typing import Any, List, Optional

from . import _core
from .compiler import CompiledGrammar, GrammarCompiler
from .matcher import GrammarMatcher, allocate_token_bitmask

__all__ = ["StructuredOutputBackend", "StructuredOutputGrammar", "REQUEST_TYPES"]

#: The request types :meth:`StructuredOutputBackend.compile_grammar` takes (vLLM's
#: ``StructuredOutputOptions`` member names, lower case; ``ebnf`` is SGLang's name of
#: ``grammar``).
REQUEST_TYPES = ("json", "json_object", "regex", "grammar", "ebnf", "structural_tag", "choice")


def _request_type(request_type: Any) -> str:
    """A request type as a lower-case name: a str, or an enum member (vLLM's
    ``StructuredOutputOptions.JSON``) by its name."""
    if isinstance(request_type, str):
        return request_type.lower()
    name = getattr(request_type, "name", None)
    if isinstance(name, str):
        return name.lower()
    raise TypeError(f"request_type must be a str or an enum member, not {type(request_type)}")


class StructuredOutputGrammar:
    """One request's structured output (the engine's ``StructuredOutputGrammar``): a matcher
    and vLLM's per-request calls. Made by :meth:`StructuredOutputBackend.compile_grammar`.

    A list of these can be given to :meth:`BatchGrammarMatcher.batch_fill_next_token_bitmask`
    in place of matchers, to fill the whole batch's rows in parallel.
    """

    def __init__(self, core: "_core.StructuredOutputGrammar", backend: "StructuredOutputBackend") -> None:
        self._matcher = core
        self._backend = backend

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        """Accepts ``tokens`` in order (the sampled token, or the accepted part of a draft).
        True when every token up to termination was accepted (tokens after termination are
        ignored); False at the first token the grammar rejects, with the tokens before it
        accepted. ``request_id`` names the request (for the caller's log).

        Raises
        ------
        ValueError
            For an id at or past the vocabulary size (nothing is accepted then);
            OverflowError for a negative id.
        """
        return self._matcher.accept_tokens(str(request_id), [operator.index(t) for t in tokens])

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        """The longest prefix of ``tokens`` that would be accepted, the state unchanged
        (speculative decoding): stops after a token that terminates; empty once terminated.

        Raises
        ------
        ValueError
            For an id at or past the vocabulary size.
        """
        return self._matcher.validate_tokens([operator.index(t) for t in tokens])

    def rollback(self, num_tokens: int) -> None:
        """Undoes the last ``num_tokens`` accepted tokens (ValueError past those accepted,
        or past the backend's ``max_rollback_tokens``; nothing changes then)."""
        self._matcher.rollback(operator.index(num_tokens))

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Writes this request's next-token mask into row ``idx`` of the batch bitmask (an
        int32 CPU tensor or numpy array of ``(batch, ceil(vocab_size / 32))``), with the GIL
        released; the other rows are not touched.

        Raises
        ------
        TypeError, ValueError, IndexError
            For a bitmask of the wrong dtype, device, shape or contiguity, or a row out of
            range.
        """
        self._matcher.fill_bitmask(bitmask, operator.index(idx))

    def is_terminated(self) -> bool:
        """True once the output is finished (a stop token accepted, or with
        ``terminate_without_stop_token`` the grammar complete)."""
        return self._matcher.is_terminated()

    def reset(self) -> None:
        """Back to the start, as a new request."""
        self._matcher.reset()

    @property
    def num_processed_tokens(self) -> int:
        """Tokens accepted so far (vLLM's ``num_processed_tokens``)."""
        return self._matcher.num_processed_tokens

    def find_jump_forward_string(self) -> str:
        """The text the grammar forces next (jump-forward decoding; SGLang's
        ``try_jump_forward``); the state is unchanged. Retokenizing it is the engine's."""
        return self._matcher.find_jump_forward_string()

    def fork_matcher(self) -> GrammarMatcher:
        """A :class:`GrammarMatcher` in this request's current state, with its options,
        that advances independently (SGLang's ``copy()`` of a grammar object in its state)."""
        compiled = CompiledGrammar(self._matcher.compiled_grammar, self._backend._compiler._tokenizer_info)
        return GrammarMatcher._from_core(compiled, self._matcher.fork_matcher())

    def fork(self) -> "StructuredOutputGrammar":
        """A copy of this request's grammar in the same state (counts included)."""
        return StructuredOutputGrammar(self._matcher.fork(), self._backend)


class StructuredOutputBackend:
    """The engine-level half (the engine's ``StructuredOutputBackend``; vLLM's
    ``StructuredOutputBackend``): compiles each request's structured output through the
    compiler's whole-grammar cache, on its thread pool, with the GIL released.

    Parameters
    ----------
    compiler : GrammarCompiler
        Shared, cache included: ``backend.compiler.clear_cache()`` empties the cache that
        the compiler's own compiles use too.
    any_whitespace, max_whitespace_cnt, strict_mode, any_order
        The JSON Schema options of ``json`` and ``json_object`` requests, as
        :meth:`GrammarCompiler.compile_json_schema` has them (vLLM's
        ``disable_any_whitespace`` is ``any_whitespace=False``).
    max_rollback_tokens : int, default -1
        Every request's rollback bound (vLLM passes the number of speculative tokens; -1:
        unlimited).
    terminate_without_stop_token : bool, default False
        Every request's matcher option (see :class:`GrammarMatcher`).

    Raises
    ------
    TypeError
        For a ``compiler`` that is not a GrammarCompiler.
    ValueError
        For ``max_whitespace_cnt=0`` or ``max_rollback_tokens < -1``.
    """

    def __init__(
        self,
        compiler: GrammarCompiler,
        *,
        any_whitespace: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        strict_mode: bool = True,
        any_order: bool = False,
        max_rollback_tokens: int = -1,
        terminate_without_stop_token: bool = False,
    ) -> None:
        if not isinstance(compiler, GrammarCompiler):
            raise TypeError(f"compiler must be a GrammarCompiler, not {type(compiler)}")
        max_rollback_tokens = operator.index(max_rollback_tokens)
        if max_rollback_tokens < -1:
            raise ValueError(
                f"max_rollback_tokens must be -1 (unlimited) or a count, got {max_rollback_tokens}"
            )
        self._compiler = compiler
        self._backend = _core.StructuredOutputBackend(
            compiler._compiler,
            any_whitespace=bool(any_whitespace),
            max_whitespace_cnt=max_whitespace_cnt,
            strict_mode=bool(strict_mode),
            any_order=bool(any_order),
            max_rollback_tokens=None if max_rollback_tokens == -1 else max_rollback_tokens,
            terminate_without_stop_token=bool(terminate_without_stop_token),
        )

    @property
    def compiler(self) -> GrammarCompiler:
        """The compiler (for its cache: ``clear_cache``, ``get_cache_size_bytes``)."""
        return self._compiler

    @property
    def vocab_size(self) -> int:
        """The logits width: bits of a bitmask row."""
        return self._compiler._tokenizer_info.vocab_size

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        """A ``(max_num_seqs, ceil(vocab_size / 32))`` int32 bitmask, every bit set (vLLM's
        ``allocate_token_bitmask``): a CPU torch tensor, or numpy without torch."""
        return allocate_token_bitmask(operator.index(max_num_seqs), self.vocab_size)

    def compile_grammar(
        self,
        request_type: Any,
        grammar_spec: str,
        *,
        stop_token_ids: Optional[List[int]] = None,
    ) -> StructuredOutputGrammar:
        """Compiles one request's structured output (vLLM's ``compile_grammar(request_type,
        grammar_spec)``).

        Parameters
        ----------
        request_type : str or enum member
            One of :data:`REQUEST_TYPES` (``json``: a JSON Schema's text; ``json_object``:
            any JSON object, the spec is ignored; ``regex``; ``grammar`` or ``ebnf``: EBNF
            with a ``root`` rule; ``structural_tag``: XGrammar's JSON; ``choice``: a JSON
            array of strings), or an enum member with one of these names (vLLM's
            ``StructuredOutputOptions``).
        grammar_spec : str
        stop_token_ids : list of int, optional
            This request's stop tokens instead of the vocabulary's (XGrammar's
            ``override_stop_tokens``).

        Raises
        ------
        ValueError
            For an unknown request type, a ``choice`` that is not a JSON array of strings,
            a stop token past the vocabulary.
        tokensieve.exception.InvalidJSONSchemaError
            For a schema that cannot be enforced.
        tokensieve.exception.TokensieveError
            For a regex, grammar or structural tag the engine refuses (its message).
        """
        kind = _request_type(request_type)
        if not isinstance(grammar_spec, str):
            raise TypeError(f"grammar_spec must be a str, not {type(grammar_spec)}")
        stop = None if stop_token_ids is None else [operator.index(t) for t in stop_token_ids]
        core = self._backend.compile_grammar(kind, grammar_spec, stop)
        return StructuredOutputGrammar(core, self)
