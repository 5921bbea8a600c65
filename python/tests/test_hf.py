"""tokensieve.contrib.hf.LogitsProcessor without a model: scores masked in place, the
sampled tokens accepted step by step, a batch with one grammar per row."""

import pytest
import torch

import tokensieve as xgr
from conftest import compiler, hf_tokenizer, tokenizer_info


def test_logits_processor_masks_and_advances():
    model = "llama3_1"
    info = tokenizer_info(model)
    tok = hf_tokenizer(model)
    regex = compiler(model).compile_regex(r"[0-9]{3}")
    word = compiler(model).compile_regex(r"(yes|no)")
    proc = xgr.contrib.hf.LogitsProcessor([regex, word])
    assert xgr.hf.LogitsProcessor is xgr.contrib.hf.LogitsProcessor
    prompt = torch.tensor([[1, 2], [1, 2]])
    ids = prompt
    for _ in range(3):
        scores = torch.randn(2, info.vocab_size)
        out = proc(ids, scores)
        assert out is scores
        nxt = torch.argmax(scores, dim=-1)
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        if proc.matchers[1].is_completed():
            break

    def until_stop(row):
        # generate ends a row at its stop token; the processor leaves later scores alone.
        out = []
        for t in ids[row, 2:].tolist():
            if t in info.stop_token_ids:
                break
            out.append(t)
        return tok.decode(out)

    digits = until_stop(0)
    assert digits.isdigit() and 1 <= len(digits) <= 3
    assert until_stop(1) in ("y", "ye", "yes", "n", "no")


def test_logits_processor_rejects_a_foreign_token():
    model = "llama3_1"
    info = tokenizer_info(model)
    tok = hf_tokenizer(model)
    proc = xgr.contrib.hf.LogitsProcessor(compiler(model).compile_regex("a+"))
    proc(torch.tensor([[1]]), torch.zeros(1, info.vocab_size))
    (b,) = tok.encode("b", add_special_tokens=False)
    with pytest.raises(RuntimeError, match="rejected"):
        proc(torch.tensor([[1, b]]), torch.zeros(1, info.vocab_size))
