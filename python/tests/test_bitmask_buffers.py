"""The bitmask is taken by the extension itself: a CPU torch tensor through its data pointer,
shape and dtype, a numpy array or another int32 buffer through the buffer protocol. No numpy
view is built per call, and every check is made again on every call (a tensor resized in
place is seen at its new size)."""

import array

import numpy as np
import pytest
import torch

import tokensieve as xgr
from tokensieve import _core


@pytest.fixture
def matcher(tiny_info):
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tiny_info).compile_builtin_json_grammar())
    assert m.accept_string('{"a": ')
    return m


def reference_row(matcher):
    """The mask of the matcher's state, filled into a fresh numpy array."""
    a = np.zeros((1, 4), dtype=np.int32)
    matcher.fill_next_token_bitmask(a)
    return a[0].copy()


def test_the_core_call_takes_a_torch_tensor(matcher):
    want = reference_row(matcher)
    t = torch.zeros(2, 4, dtype=torch.int32)
    assert matcher._matcher.fill_next_token_bitmask(t, 1) is True
    assert t[1].numpy().tolist() == want.tolist() and not t[0].any()


class CountingTensor(torch.Tensor):
    """A tensor subclass that counts its conversions to numpy."""

    numpy_calls = 0

    def numpy(self, *args, **kwargs):
        CountingTensor.numpy_calls += 1
        return super().numpy(*args, **kwargs)


def test_a_fill_builds_no_numpy_view_of_a_tensor(matcher):
    want = reference_row(matcher)
    t = torch.zeros(1, 4, dtype=torch.int32).as_subclass(CountingTensor)
    CountingTensor.numpy_calls = 0
    for _ in range(3):
        matcher.fill_next_token_bitmask(t)
    assert CountingTensor.numpy_calls == 0
    assert torch.Tensor(t)[0].tolist() == want.tolist()


def test_a_parameter_without_grad_is_a_tensor(matcher):
    want = reference_row(matcher)
    p = torch.nn.Parameter(torch.zeros(1, 4, dtype=torch.int32), requires_grad=False)
    matcher.fill_next_token_bitmask(p)
    assert p.data[0].tolist() == want.tolist()


def test_a_view_with_a_storage_offset_writes_its_own_rows(matcher):
    want = reference_row(matcher)
    big = torch.full((4, 4), 7, dtype=torch.int32)
    view = big[1:3]
    assert view.storage_offset() == 4 and view.is_contiguous()
    matcher.fill_next_token_bitmask(view, 1)
    assert big[2].tolist() == want.tolist()
    assert all(big[r].tolist() == [7] * 4 for r in (0, 1, 3))
    one_row = big[3]
    matcher.fill_next_token_bitmask(one_row)
    assert big[3].tolist() == want.tolist() and big[1].tolist() == [7] * 4


def test_a_tensor_resized_in_place_is_checked_again(matcher):
    want = reference_row(matcher)
    t = torch.zeros(1, 4, dtype=torch.int32)
    matcher.fill_next_token_bitmask(t)
    t.resize_(1, 5)
    with pytest.raises(ValueError, match="words"):
        matcher.fill_next_token_bitmask(t)
    t.resize_(3, 4)
    t.zero_()
    matcher.fill_next_token_bitmask(t, 2)
    assert t[2].tolist() == want.tolist() and not t[:2].any()
    with pytest.raises(IndexError, match="out of range"):
        matcher.fill_next_token_bitmask(t, 3)
    # A tensor transposed in place keeps its size and pointer but is no longer contiguous.
    sq = torch.zeros(4, 4, dtype=torch.int32)
    matcher.fill_next_token_bitmask(sq)
    sq.t_()
    with pytest.raises(ValueError, match="contiguous"):
        matcher.fill_next_token_bitmask(sq)


def test_other_int32_buffers(matcher):
    want = reference_row(matcher)
    a = array.array("i", [0] * 4)
    matcher.fill_next_token_bitmask(a)
    assert list(a) == want.tolist()
    backing = np.zeros((2, 4), dtype=np.int32)
    matcher.fill_next_token_bitmask(memoryview(backing), 1)
    assert backing[1].tolist() == want.tolist() and not backing[0].any()


def test_tensor_errors_of_the_core_call(matcher):
    core = matcher._matcher
    with pytest.raises(TypeError, match="torch.int32, got torch.int64"):
        core.fill_next_token_bitmask(torch.zeros(1, 4, dtype=torch.int64), 0)
    with pytest.raises(ValueError, match="CPU, got a tensor on meta"):
        core.fill_next_token_bitmask(torch.zeros(1, 4, dtype=torch.int32, device="meta"), 0)
    with pytest.raises(ValueError, match="contiguous"):
        core.fill_next_token_bitmask(torch.zeros(4, 4, dtype=torch.int32)[:, ::2], 0)
    with pytest.raises(ValueError, match="dimensions"):
        core.fill_next_token_bitmask(torch.zeros(1, 1, 4, dtype=torch.int32), 0)
    with pytest.raises(TypeError, match="torch.Tensor or a numpy.ndarray"):
        core.fill_next_token_bitmask([0, 0, 0, 0], 0)


def test_batch_and_serving_fills_take_tensors(tiny_info):
    compiled = xgr.GrammarCompiler(tiny_info).compile_builtin_json_grammar()
    ms = [xgr.GrammarMatcher(compiled) for _ in range(3)]
    for m, p in zip(ms, ['{"a": ', "[1, ", "tr"]):
        assert m.accept_string(p)
    rows = [reference_row(m) for m in ms]
    t = torch.zeros(3, 4, dtype=torch.int32)
    _core.batch_fill_next_token_bitmask([m._matcher for m in ms], t, _core.ThreadPool(2), None)
    assert [t[i].tolist() for i in range(3)] == [r.tolist() for r in rows]
