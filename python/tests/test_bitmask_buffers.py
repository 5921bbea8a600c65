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
    for m, p in zip(ms, ['{"a": ', "[1, ", "[tr"]):
        assert m.accept_string(p)
    rows = [reference_row(m) for m in ms]
    t = torch.zeros(3, 4, dtype=torch.int32)
    _core.batch_fill_next_token_bitmask([m._matcher for m in ms], t, _core.ThreadPool(2), None)
    assert [t[i].tolist() for i in range(3)] == [r.tolist() for r in rows]


def masked_reference(logits, bitmask, vocab_size):
    """``logits`` with -inf where the bit of ``bitmask`` is clear, computed in float32 by
    hand from the bits (no tokensieve call)."""
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little").reshape(
        bitmask.shape[0], -1
    )[:, :vocab_size]
    out = logits.float().clone()
    out[:, :vocab_size][torch.from_numpy(bits == 0)] = float("-inf")
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cpu_logits_are_masked_through_their_memory(matcher, dtype, monkeypatch):
    """CPU logits of float32, float16 and bfloat16 are masked by the extension itself: no
    numpy view of the tensor, no torch ops (both are made to fail here), with the rows,
    ``indices`` and a width past the vocabulary as torch's own masking gives them."""
    bitmask = torch.zeros(3, 4, dtype=torch.int32)
    matcher.fill_next_token_bitmask(bitmask, 0)
    bitmask[1] = -1
    bitmask[2, 1] = 0x0F0F0F0F
    logits = torch.randn(3, 130).to(dtype)
    want = masked_reference(logits, bitmask, 128)
    want_rows_0_2 = want.clone()
    want_rows_0_2[1] = logits[1].float()
    rows_0_2 = logits.clone()

    def fail(*args, **kwargs):
        raise AssertionError("the CPU path went through numpy or torch's ops")

    monkeypatch.setattr(torch.Tensor, "numpy", fail)
    monkeypatch.setattr(xgr.matcher, "_torch_apply", fail)
    xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=128)
    xgr.apply_token_bitmask_inplace(rows_0_2, bitmask, vocab_size=128, indices=[0, 2])
    monkeypatch.undo()
    assert logits.dtype == dtype
    assert torch.equal(logits.float(), want)
    assert torch.equal(rows_0_2.float(), want)  # row 1 is all ones: nothing masked
    assert not torch.isinf(logits[:, 128:]).any()
    # A 1-D row and a tensor requiring grad take the same path.
    row = logits[0].clone().requires_grad_(True)
    xgr.apply_token_bitmask_inplace(row, bitmask[0], vocab_size=128)
    assert torch.equal(row.detach().float(), want[0])


def test_logits_of_a_bad_shape_or_dtype(matcher):
    bitmask = torch.zeros(2, 4, dtype=torch.int32)
    for dtype in (torch.float32, torch.float16):
        with pytest.raises(ValueError, match="1 or 2 dimensions"):
            _core.apply_token_bitmask_inplace_cpu(torch.zeros(2, 1, 128, dtype=dtype), bitmask, 128)
        with pytest.raises(ValueError, match="logits have 3 rows but the bitmask has 2"):
            xgr.apply_token_bitmask_inplace(torch.zeros(3, 128, dtype=dtype), bitmask)
        with pytest.raises(IndexError, match="index 2 is out of range"):
            xgr.apply_token_bitmask_inplace(torch.zeros(3, 128, dtype=dtype), bitmask, indices=[2])
        with pytest.raises(ValueError, match="vocab_size 130 exceeds"):
            _core.apply_token_bitmask_inplace_cpu(torch.zeros(2, 128, dtype=dtype), bitmask, 130)
        with pytest.raises(ValueError, match="contiguous"):
            _core.apply_token_bitmask_inplace_cpu(torch.zeros(128, 2, dtype=dtype).t(), bitmask, 128)
    with pytest.raises(TypeError, match="float32, torch.float16 or torch.bfloat16, got torch.float64"):
        _core.apply_token_bitmask_inplace_cpu(torch.zeros(2, 128, dtype=torch.float64), bitmask, 128)
    # float64 and strided tensors still go through torch's own ops in the public function.
    wide = torch.zeros(2, 128, dtype=torch.float64)
    xgr.apply_token_bitmask_inplace(wide, bitmask)
    assert torch.isinf(wide).all()
    strided = torch.zeros(128, 2).t()
    xgr.apply_token_bitmask_inplace(strided, bitmask)
    assert torch.isinf(strided).all()
