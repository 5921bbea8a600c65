"""Bad input never crashes the interpreter: wrong dtypes and shapes of bitmask, out-of-range
indices, token ids past the vocabulary."""

import numpy as np
import pytest
import torch

import tokensieve as xgr
from conftest import compiler, tokenizer_info


@pytest.fixture
def matcher(tiny_info):
    return xgr.GrammarMatcher(xgr.GrammarCompiler(tiny_info).compile_builtin_json_grammar())


@pytest.mark.parametrize(
    "make, exc, words",
    [
        (lambda: torch.zeros(1, 4, dtype=torch.int64), TypeError, "int32"),
        (lambda: torch.zeros(1, 4, dtype=torch.float32), TypeError, "int32"),
        (lambda: np.zeros((1, 4), dtype=np.int64), TypeError, "int32"),
        (lambda: np.zeros((1, 4), dtype=np.uint8), TypeError, "int32"),
        (lambda: torch.zeros(1, 5, dtype=torch.int32), ValueError, "words"),
        (lambda: torch.zeros(1, 3, dtype=torch.int32), ValueError, "words"),
        (lambda: torch.zeros(2, 2, 4, dtype=torch.int32), ValueError, "dimensions"),
        (lambda: torch.zeros(4, 3, dtype=torch.int32).t(), ValueError, "contiguous"),
        (lambda: np.zeros((4, 3), dtype=np.int32).T, ValueError, "contiguous"),
        (lambda: [0, 0, 0, 0], TypeError, "torch.Tensor or a numpy.ndarray"),
        (lambda: b"\0" * 16, TypeError, "torch.Tensor or a numpy.ndarray"),
    ],
)
def test_bad_bitmasks(matcher, make, exc, words):
    with pytest.raises(exc, match=words):
        matcher.fill_next_token_bitmask(make())


def test_read_only_bitmask(matcher):
    a = np.zeros((1, 4), dtype=np.int32)
    a.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        matcher.fill_next_token_bitmask(a)


def test_meta_device_bitmask(matcher):
    with pytest.raises(ValueError, match="CPU"):
        matcher.fill_next_token_bitmask(torch.zeros(1, 4, dtype=torch.int32, device="meta"))


def test_out_of_range_indices(matcher):
    b = xgr.allocate_token_bitmask(2, 128)
    for index in (2, 100, -1):
        with pytest.raises(IndexError, match="out of range"):
            matcher.fill_next_token_bitmask(b, index)
    batch = xgr.BatchGrammarMatcher(2)
    with pytest.raises(IndexError):
        batch.batch_fill_next_token_bitmask([matcher], b, indices=[5])
    with pytest.raises(ValueError, match="twice"):
        batch.batch_fill_next_token_bitmask([matcher, matcher.fork()], b, indices=[1, 1])
    with pytest.raises(ValueError, match="in use"):
        batch.batch_fill_next_token_bitmask([matcher, matcher], b)
    with pytest.raises(ValueError, match="indices for"):
        batch.batch_fill_next_token_bitmask([matcher], b, indices=[0, 1])
    logits = torch.zeros(2, 128)
    with pytest.raises(IndexError):
        xgr.apply_token_bitmask_inplace(logits, b, indices=[3])
    with pytest.raises(ValueError, match="exceeds"):
        xgr.apply_token_bitmask_inplace(logits, b, vocab_size=500)
    with pytest.raises(TypeError, match="int32"):
        xgr.apply_token_bitmask_inplace(logits, b.to(torch.int64))
    with pytest.raises(TypeError, match="float32"):
        xgr.apply_token_bitmask_inplace(np.zeros((2, 128), dtype=np.float64), b.numpy())


def test_token_ids_past_the_vocabulary(matcher):
    # As XGrammar: an id outside the vocabulary is rejected (False), not an error.
    assert matcher.accept_token(128) is False
    assert matcher.accept_token(2**31) is False
    assert matcher.accept_token(-1) is False
    # Padding ids (past the tokenizer, below vocab_size) are rejected, not errors.
    assert matcher.accept_token(120) is False
    assert xgr.BatchGrammarMatcher.batch_accept_token([matcher], [10**6]) == [False]
    with pytest.raises(ValueError, match="tokens for"):
        xgr.BatchGrammarMatcher.batch_accept_token([matcher], [1, 2])
    with pytest.raises(TypeError):
        matcher.accept_string(42)
    with pytest.raises(ValueError, match="cannot roll back"):
        matcher.rollback(1)
    with pytest.raises(ValueError, match="cannot roll back"):
        xgr.BatchGrammarMatcher.batch_rollback([matcher], 3)
    with pytest.raises(TypeError):
        xgr.GrammarMatcher("not compiled")


def test_real_vocab_bad_ids(model):
    info = tokenizer_info(model)
    m = xgr.GrammarMatcher(compiler(model).compile_regex("[a-z]+"))
    assert m.accept_token(info.vocab_size) is False
    b = xgr.allocate_token_bitmask(1, info.vocab_size + 32)
    with pytest.raises(ValueError, match="words"):
        m.fill_next_token_bitmask(b)
