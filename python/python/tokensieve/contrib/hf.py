"""A ``transformers`` logits processor (XGrammar's ``xgrammar.contrib.hf.LogitsProcessor``)."""

from typing import List, Union

import torch
import transformers

from ..compiler import CompiledGrammar
from ..matcher import GrammarMatcher, allocate_token_bitmask, apply_token_bitmask_inplace

__all__ = ["LogitsProcessor"]


class LogitsProcessor(transformers.LogitsProcessor):
    """Constrains ``model.generate`` to compiled grammars.

    Pass one instance per ``generate`` call: ``generate(..., logits_processor=[proc])``.
    ``compiled_grammar`` is one grammar for every sequence of the batch, or a list with one
    per sequence. On each step it accepts the token sampled at the previous step, fills the
    bitmask and masks the scores in place; a sequence whose matcher has terminated is left
    alone (generate stops it with the stop token).

    Raises
    ------
    RuntimeError
        When the model produced a token the grammar rejects (the scores were not masked by
        this processor).
    """

    def __init__(self, compiled_grammar: Union[CompiledGrammar, List[CompiledGrammar]]):
        self.compiled_grammars = (
            compiled_grammar if isinstance(compiled_grammar, list) else [compiled_grammar]
        )
        self.full_vocab_size = self.compiled_grammars[0].tokenizer_info.vocab_size
        self.matchers: List[GrammarMatcher] = []
        self.token_bitmask = None
        self.prefilled = False
        self.batch_size = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if not self.matchers:
            self.batch_size = input_ids.shape[0]
            grammars = (
                self.compiled_grammars
                if len(self.compiled_grammars) > 1
                else self.compiled_grammars * self.batch_size
            )
            if len(grammars) != self.batch_size:
                raise RuntimeError(
                    f"{len(grammars)} compiled grammars for a batch of {self.batch_size}"
                )
            self.matchers = [GrammarMatcher(g) for g in grammars]
            self.token_bitmask = allocate_token_bitmask(self.batch_size, self.full_vocab_size)
        if input_ids.shape[0] != self.batch_size:
            raise RuntimeError(
                "the batch size changed during generation (beam search is not supported)"
            )
        if self.prefilled:
            for i, m in enumerate(self.matchers):
                if not m.is_terminated():
                    token = int(input_ids[i][-1])
                    if not m.accept_token(token):
                        raise RuntimeError(f"sequence {i}: token {token} rejected by the grammar")
        for i, m in enumerate(self.matchers):
            if not m.is_terminated():
                m.fill_next_token_bitmask(self.token_bitmask, i)
        self.prefilled = True
        active = [i for i, m in enumerate(self.matchers) if not m.is_terminated()]
        if active:
            apply_token_bitmask_inplace(
                scores,
                self.token_bitmask.to(scores.device),
                vocab_size=min(scores.shape[-1], self.full_vocab_size),
                indices=active,
            )
        return scores
