"""GrammarMatcher, BatchGrammarMatcher and the bitmask helpers (XGrammar's names).

A bitmask is an int32 array of shape ``(batch, ceil(vocab_size / 32))``: bit ``j % 32`` of
word ``j // 32`` of a row is set when token ``j`` is allowed. It may be a CPU torch tensor
or a numpy array; matchers write into it in place, with the GIL released.
"""

import math
import operator
import os
from typing import Any, List, Literal, Optional, Tuple, Union

import numpy as np

from . import _core
from .compiler import CompiledGrammar

try:  # torch is optional: numpy arrays work without it.
    import torch
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None
else:
    # The extension then takes a CPU tensor's memory itself (data pointer, shape, dtype)
    # instead of a numpy view built on every fill.
    _core._register_torch(torch.Tensor, torch.int32, torch.float32, torch.float16, torch.bfloat16)

__all__ = [
    "GrammarMatcher",
    "BatchGrammarMatcher",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_dtype",
    "get_bitmask_shape",
    "reset_token_bitmask",
]

#: The dtype of a token bitmask: int32 (torch's, or numpy's without torch).
bitmask_dtype = torch.int32 if torch is not None else np.int32


def _is_torch(x: Any) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


def _cpu_buffer(x: Any, what: str, dtype: Any) -> Any:
    """A numpy array, or the numpy view of a CPU torch tensor (same memory), for reading a
    bitmask in Python. Checks the device and dtype of tensors. (The fills do not use it: the
    extension takes tensors and arrays itself.)"""
    if _is_torch(x):
        if not x.is_cpu:
            raise ValueError(f"{what} must be on CPU, got a tensor on {x.device}")
        if x.dtype != dtype:
            raise TypeError(f"{what} must have dtype {dtype}, got {x.dtype}")
        if not x.is_contiguous():
            raise ValueError(f"{what} must be contiguous; call .contiguous()")
        return x.detach().numpy() if x.requires_grad else x.numpy()
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"{what} must be a torch.Tensor or a numpy.ndarray, not {type(x)}")


def get_bitmask_shape(batch_size: int, vocab_size: int) -> Tuple[int, int]:
    """``(batch_size, ceil(vocab_size / 32))``."""
    return (batch_size, math.ceil(vocab_size / 32))


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Any:
    """A CPU int32 bitmask of :func:`get_bitmask_shape` with every bit set (all tokens
    allowed): a torch tensor, or a numpy array when torch is not installed."""
    shape = get_bitmask_shape(batch_size, vocab_size)
    if torch is not None:
        return torch.full(shape, -1, dtype=torch.int32)
    return np.full(shape, -1, dtype=np.int32)


def reset_token_bitmask(bitmask: Any) -> None:
    """Sets every bit (all tokens allowed)."""
    if _is_torch(bitmask):
        bitmask.fill_(-1)
    else:
        bitmask.fill(-1)


# The dtypes of CPU tensors the extension masks in place.
_CPU_LOGITS = () if torch is None else (torch.float32, torch.float16, torch.bfloat16)


def _torch_apply(logits: Any, bitmask: Any, vocab_size: int, indices: Optional[List[int]]) -> None:
    """The mask applied with torch's own ops (CUDA tensors, dtypes other than float32)."""
    bitmask = bitmask.to(logits.device)
    if bitmask.dim() == 1:
        bitmask = bitmask.unsqueeze(0)
    rows = logits if logits.dim() == 2 else logits.unsqueeze(0)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((bitmask.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)[:, :vocab_size]
    sel = list(range(rows.shape[0])) if indices is None else list(indices)
    for i in sel:
        if not 0 <= i < rows.shape[0] or not 0 <= i < allowed.shape[0]:
            raise IndexError(f"index {i} is out of range for the logits or the bitmask")
    idx = torch.tensor(sel, dtype=torch.long, device=logits.device)
    part = rows[idx, :vocab_size]
    part.masked_fill_(~allowed[idx], float("-inf"))
    rows[idx, :vocab_size] = part


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[List[int]] = None,
) -> None:
    """Sets ``logits[i, j]`` to -inf wherever bit ``j`` of ``bitmask[i]`` is clear.

    ``logits``: ``(batch, width)`` or ``(width,)``; ``bitmask``: the same rows, ``ceil(n /
    32)`` words. The mask covers ``vocab_size`` tokens (default ``min(width, 32 * words)``);
    logits past it are left as they are. ``indices``: the rows to mask (default all; the two
    batch sizes may then differ).

    Contiguous CPU tensors of float32, float16 or bfloat16 and float32 numpy arrays are
    masked by the engine in place (through their memory) with the GIL released; other
    dtypes, strided tensors and other devices (CUDA) by torch's own ops.

    Raises
    ------
    TypeError, ValueError, IndexError
        For wrong dtypes, shapes, devices or indices.
    """
    width = logits.shape[-1]
    words = bitmask.shape[-1]
    n = min(width, words * 32) if vocab_size is None else int(vocab_size)
    if n > width or n > words * 32 or n < 0:
        raise ValueError(
            f"vocab_size {n} exceeds the logits width {width} or the bitmask's {words * 32} bits"
        )
    if _is_torch(logits):
        if not _is_torch(bitmask):
            bitmask = torch.from_numpy(np.asarray(bitmask))
        if bitmask.dtype != torch.int32:
            raise TypeError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
        if logits.is_cpu and logits.dtype in _CPU_LOGITS and logits.is_contiguous():
            # The extension takes the tensor's memory itself (its data pointer).
            _core.apply_token_bitmask_inplace_cpu(
                logits.detach() if logits.requires_grad else logits,
                bitmask.cpu().contiguous(),
                n,
                None if indices is None else [int(i) for i in indices],
            )
        else:
            _torch_apply(logits, bitmask, n, indices)
        return
    if not isinstance(logits, np.ndarray):
        raise TypeError(f"logits must be a torch.Tensor or a numpy.ndarray, not {type(logits)}")
    if logits.dtype != np.float32:
        raise TypeError(f"numpy logits must be float32, got {logits.dtype}")
    _core.apply_token_bitmask_inplace_cpu(
        logits, bitmask, n, None if indices is None else [int(i) for i in indices]
    )


def _stop_token_list(override_stop_tokens: Any) -> Optional[List[int]]:
    """XGrammar's ``override_stop_tokens``: None, one id, or a sequence of ids."""
    if override_stop_tokens is None:
        return None
    if isinstance(override_stop_tokens, (str, bytes)):
        raise TypeError(
            f"override_stop_tokens must be an int or a list of ints, not {type(override_stop_tokens)}"
        )
    if not hasattr(override_stop_tokens, "__iter__"):
        return [operator.index(override_stop_tokens)]
    return [operator.index(t) for t in override_stop_tokens]


def _token_ids(tokens: Any, vocab_size: int) -> List[Optional[int]]:
    """The ids of ``tokens`` as ints, None for one outside ``[0, vocab_size)`` (XGrammar
    rejects those); TypeError for a float or other non-integer (not truncated)."""
    ids = [operator.index(t) for t in tokens]
    return [t if 0 <= t < vocab_size else None for t in ids]


def _check_not_terminated(matcher: "GrammarMatcher") -> None:
    """RuntimeError, as XGrammar's, for a fill after a stop token was accepted (the mask of
    a finished sequence is meaningless; XGrammar checks ``!IsStopTokenAccepted()``)."""
    if matcher._matcher.is_terminated() and not matcher._terminate_without_stop_token:
        raise RuntimeError(
            "GrammarMatcher has terminated after accepting the stop token, but is trying to"
            " find the next token mask (roll back or reset it first)"
        )


def _check_rollback_bound(matcher: "GrammarMatcher", num_tokens: int) -> None:
    """ValueError naming ``max_rollback_tokens`` when ``num_tokens`` is past it."""
    bound = matcher._matcher.max_rollback_tokens
    if bound is not None and num_tokens > bound:
        raise ValueError(
            f"can roll back at most {bound} tokens (max_rollback_tokens={bound});"
            f" {num_tokens} requested"
        )


class GrammarMatcher:
    """Matches one sequence against a compiled grammar, token by token.

    Parameters
    ----------
    compiled_grammar : CompiledGrammar
    override_stop_tokens : int or list of int, optional
        This matcher's stop tokens instead of the vocabulary's (a request's own
        ``stop_token_ids``). A stop token only ever stops: it is allowed (and terminates)
        where the grammar may end and nowhere else, even when its bytes are ordinary text;
        the vocabulary's stop tokens left out are then not stop tokens for this matcher.
    terminate_without_stop_token : bool, default False
        The matcher is done when the grammar is: :meth:`is_terminated` is true whenever the
        output so far is a complete match, and no stop token is ever allowed or accepted.
        Tokens that continue the grammar stay allowed there, so stop when
        :meth:`is_terminated` says so. (XGrammar's mask still allows the stop tokens in
        that state while its ``accept_token`` rejects them; here the mask and
        ``accept_token`` agree.)
    max_rollback_tokens : int, default -1
        At most this many steps can be rolled back (-1: unlimited); :meth:`validate_tokens`
        is not bound by it.

    The options are the engine's ``MatcherOptions`` (``GrammarMatcher::with_options``).

    Raises
    ------
    TypeError
        For a ``compiled_grammar`` that is not a CompiledGrammar, or stop tokens that are
        not ints.
    ValueError
        For a stop token at or past the tokenizer's size, ``max_rollback_tokens < -1``;
        OverflowError for a negative stop token.
    """

    def __init__(
        self,
        compiled_grammar: CompiledGrammar,
        *,
        override_stop_tokens: Optional[Union[int, List[int]]] = None,
        terminate_without_stop_token: bool = False,
        max_rollback_tokens: int = -1,
    ) -> None:
        if not isinstance(compiled_grammar, CompiledGrammar):
            raise TypeError(
                f"compiled_grammar must be a CompiledGrammar, not {type(compiled_grammar)}"
            )
        max_rollback_tokens = operator.index(max_rollback_tokens)
        if max_rollback_tokens < -1:
            raise ValueError(
                f"max_rollback_tokens must be -1 (unlimited) or a count, got {max_rollback_tokens}"
            )
        stop_tokens = _stop_token_list(override_stop_tokens)
        if stop_tokens is not None and not stop_tokens:
            # XGrammar refuses it too: a matcher with no stop token could never terminate.
            raise ValueError("override_stop_tokens should not be empty (None: the tokenizer's)")
        self._compiled = compiled_grammar
        self._vocab_size = compiled_grammar.tokenizer_info.vocab_size
        self._terminate_without_stop_token = bool(terminate_without_stop_token)
        self._matcher = _core.GrammarMatcher(
            compiled_grammar._compiled,
            override_stop_tokens=stop_tokens,
            terminate_without_stop_token=bool(terminate_without_stop_token),
            max_rollback_tokens=None if max_rollback_tokens == -1 else max_rollback_tokens,
        )

    @classmethod
    def _from_core(cls, compiled: CompiledGrammar, core: "_core.GrammarMatcher"):
        self = cls.__new__(cls)
        self._compiled, self._matcher = compiled, core
        self._vocab_size = compiled.tokenizer_info.vocab_size
        self._terminate_without_stop_token = core.terminate_without_stop_token
        return self

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        """Accepts a token if the grammar allows it; False (state unchanged) otherwise,
        as XGrammar, also for an id outside ``[0, vocab_size)``.

        Raises
        ------
        TypeError
            For a token id that is not an int (a float is not truncated).
        """
        (tid,) = _token_ids((token_id,), self._vocab_size)
        if tid is None:
            if debug_print:
                print(f"tokensieve: token id {token_id} is outside [0, {self._vocab_size})")
            return False
        if debug_print:
            reason = self._matcher.rejection_reason(tid)
            if reason is not None:
                print(f"tokensieve: {reason}")
        return self._matcher.accept_token(tid)

    def accept_string(self, input_str: Union[str, bytes], *, debug_print: bool = False) -> bool:
        """Accepts the bytes of a string as one step (for rollback), all or nothing."""
        return self._matcher.accept_string(input_str)

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0, *, debug_print: bool = False) -> bool:
        """Writes the next token's mask into ``bitmask[index]`` (an int32 CPU tensor or numpy
        array of shape ``(batch, ceil(vocab_size / 32))`` or ``(words,)``), with the GIL
        released. The state is unchanged.

        Returns
        -------
        need_apply : bool
            False when every token is allowed (the mask need not be applied).

        Raises
        ------
        TypeError, ValueError, IndexError
            For a bitmask of the wrong dtype, device, shape or contiguity, or an index out
            of range.
        RuntimeError
            After a stop token was accepted (as XGrammar; not with
            ``terminate_without_stop_token``).
        """
        _check_not_terminated(self)
        # The extension checks the bitmask and the index (this call is the whole cost the
        # binding adds per step: keep Python work out of it).
        return self._matcher.fill_next_token_bitmask(bitmask, index)

    def find_jump_forward_string(self) -> str:
        """The text the grammar forces next, whatever is sampled; the state is unchanged."""
        return self._matcher.find_jump_forward_string()

    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last ``num_tokens`` accepted steps (ValueError past what was accepted
        or past ``max_rollback_tokens``)."""
        num_tokens = operator.index(num_tokens)
        _check_rollback_bound(self, num_tokens)
        self._matcher.rollback(num_tokens)

    def is_terminated(self) -> bool:
        """True once a stop token has been accepted; with ``terminate_without_stop_token``,
        whenever the output so far is a complete match."""
        return self._matcher.is_terminated()

    def is_completed(self) -> bool:
        """True when the output so far is a complete match (a stop token may come now)."""
        return self._matcher.is_completed()

    def reset(self) -> None:
        """Returns to the start of the grammar."""
        self._matcher.reset()

    def fork(self) -> "GrammarMatcher":
        """An independent copy in the same state."""
        return GrammarMatcher._from_core(self._compiled, self._matcher.fork())

    def validate_tokens(self, tokens: List[int]) -> int:
        """How many of ``tokens``, from the first, the grammar accepts in a row (speculative
        decoding: the longest valid prefix of a draft is ``tokens[:n]``). The state is
        unchanged (the engine accepts and rolls back, with the GIL held: about a
        microsecond per token byte). A stop token that would be accepted counts, and
        nothing after it does; once terminated the count is 0.

        Raises
        ------
        ValueError
            For an id at or past the vocabulary size (nothing is validated then);
            OverflowError for a negative id.
        """
        return self._matcher.validate_tokens([operator.index(t) for t in tokens])

    @property
    def max_rollback_tokens(self) -> int:
        """At most this many steps can be rolled back (-1: unlimited)."""
        n = self._matcher.max_rollback_tokens
        return -1 if n is None else n

    @property
    def terminate_without_stop_token(self) -> bool:
        """Whether the matcher terminates when the grammar completes, without a stop token."""
        return self._matcher.terminate_without_stop_token

    @property
    def stop_token_ids(self) -> List[int]:
        """This matcher's stop tokens, ascending: ``override_stop_tokens`` when given, else
        the vocabulary's."""
        return self._matcher.stop_token_ids


class BatchGrammarMatcher:
    """Fills the bitmask rows of many matchers in parallel, with the GIL released.

    Parameters
    ----------
    max_threads : int or "auto", default "auto"
        Threads of the fill; "auto" is half the CPUs (at least one), as XGrammar's.
    """

    def __init__(self, max_threads: Union[int, Literal["auto"]] = "auto") -> None:
        if max_threads == "auto":
            max_threads = max(1, (os.cpu_count() or 2) // 2)
        if not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be 'auto' or a positive int, got {max_threads!r}")
        self._threads = max_threads
        self._pool = _core.ThreadPool(max_threads)

    def batch_fill_next_token_bitmask(
        self,
        matchers: List[GrammarMatcher],
        bitmask: Any,
        indices: Optional[List[int]] = None,
        debug_print: bool = False,
    ) -> None:
        """Fills ``bitmask[indices[i]]`` (default row ``i``) from ``matchers[i]``.

        Raises
        ------
        TypeError, ValueError, IndexError
            For a bad bitmask, indices out of range or repeated, one matcher twice.
        """
        for m in matchers:
            _check_not_terminated(m)
        _core.batch_fill_next_token_bitmask(
            [m._matcher for m in matchers],
            bitmask,
            self._pool,
            None if indices is None else [int(i) for i in indices],
        )

    @staticmethod
    def batch_accept_token(
        matchers: List[GrammarMatcher], tokens: List[int], debug_print: bool = False
    ) -> List[bool]:
        """``matchers[i].accept_token(tokens[i])`` for each i (False for an id outside the
        vocabulary, TypeError for one that is not an int)."""
        tokens = list(tokens)
        if len(tokens) != len(matchers):
            raise ValueError(f"{len(tokens)} tokens for {len(matchers)} matchers")
        ids = [_token_ids((t,), m._vocab_size)[0] for m, t in zip(matchers, tokens)]
        inside = [i for i, t in enumerate(ids) if t is not None]
        accepted = _core.batch_accept_token(
            [matchers[i]._matcher for i in inside], [ids[i] for i in inside]
        )
        result = [False] * len(matchers)
        for i, ok in zip(inside, accepted):
            result[i] = ok
        return result

    @staticmethod
    def batch_accept_string(
        matchers: List[GrammarMatcher], strings: List[Union[str, bytes]], debug_print: bool = False
    ) -> List[bool]:
        """``matchers[i].accept_string(strings[i])`` for each i."""
        return _core.batch_accept_string([m._matcher for m in matchers], list(strings))

    @staticmethod
    def batch_rollback(matchers: List[GrammarMatcher], num_tokens: Union[List[int], int] = 1) -> None:
        """Rolls ``matchers[i]`` back by ``num_tokens[i]`` (or the one int for all); checked for
        every matcher before any changes."""
        if isinstance(num_tokens, int):
            num_tokens = [num_tokens] * len(matchers)
        num_tokens = [operator.index(n) for n in num_tokens]
        for m, n in zip(matchers, num_tokens):
            _check_rollback_bound(m, n)
        _core.batch_rollback([m._matcher for m in matchers], num_tokens)
