"""A JSON schema, a regex, an EBNF grammar and a structural tag driven token by token on
Llama 3.1 and Qwen3: at each step the mask is read back from the tensor and checked against
accept_token on the real next token and on sampled ones."""

import random

import numpy as np
import pytest
import torch

import tokensieve as xgr
from conftest import compiler, hf_tokenizer, tokenizer_info

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<function="],
        "tags": [
            {
                "type": "tag",
                "begin": "<function=get_weather>",
                "content": {
                    "type": "json_schema",
                    "json_schema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
                "end": "</function>",
            }
        ],
    },
}

EBNF = r"""
root ::= greeting " " name "!"
greeting ::= "Hello" | "Hi"
name ::= [A-Z] [a-z]+
"""

CASES = {
    "json_schema": (
        lambda c: c.compile_json_schema(SCHEMA),
        '{"name": "Ada Lovelace", "age": 36, "tags": ["math", "poet"]}',
    ),
    "regex": (lambda c: c.compile_regex(r"\d{3}-[a-z]+(\.[a-z]+)*"), "123-abc.defg.h"),
    "ebnf": (lambda c: c.compile_grammar(EBNF), "Hello Grace!"),
    "structural_tag": (
        lambda c: c.compile_structural_tag(TAG),
        'Let me check. <function=get_weather>{"city": "Paris"}</function> Done.',
    ),
}


def allowed(bitmask: torch.Tensor, token: int) -> bool:
    return bool((int(bitmask[0, token // 32]) >> (token % 32)) & 1)


@pytest.mark.parametrize("case", sorted(CASES))
def test_mask_agrees_with_accept_token(model, case):
    make, text = CASES[case]
    info = tokenizer_info(model)
    compiled = make(compiler(model))
    matcher = xgr.GrammarMatcher(compiled)
    ids = hf_tokenizer(model).encode(text, add_special_tokens=False)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    rng = random.Random(f"{model}-{case}")
    stop = info.stop_token_ids[0]
    checked = 0
    for step, token in enumerate(ids + [stop]):
        xgr.reset_token_bitmask(bitmask)
        matcher.fill_next_token_bitmask(bitmask)
        assert allowed(bitmask, token), f"step {step}: the real next token {token} is masked"
        rejected = set(xgr.testing._get_masked_tokens_from_bitmask(bitmask, info.vocab_size))
        assert token not in rejected
        sample = rng.sample(range(info.vocab_size), 150) + sorted(rejected)[:20]
        sample += [t for t in range(info.vocab_size) if t not in rejected][:20]
        for t in sample:
            ok = matcher.accept_token(t)
            assert ok == allowed(bitmask, t), f"step {step}: token {t} mask={allowed(bitmask, t)} accept={ok}"
            assert ok == (t not in rejected)
            if ok:
                matcher.rollback(1)
            checked += 1
        assert matcher.accept_token(token)
    assert matcher.is_terminated()
    assert checked > 150 * len(ids)
    # After termination a fill is an error, as XGrammar's.
    with pytest.raises(RuntimeError, match="terminated"):
        matcher.fill_next_token_bitmask(bitmask)


def test_numpy_bitmask_equals_torch_bitmask(model):
    compiled = compiler(model).compile_json_schema(SCHEMA)
    info = tokenizer_info(model)
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string('{"name": "x", ')
    t = xgr.allocate_token_bitmask(2, info.vocab_size)
    n = np.zeros(xgr.get_bitmask_shape(3, info.vocab_size), dtype=np.int32)
    assert m.fill_next_token_bitmask(t, 1) is True
    m.fill_next_token_bitmask(n, 2)
    assert np.array_equal(t[1].numpy(), n[2])
    assert (t[0] == -1).all() and not n[0].any() and not n[1].any()
    # Only whitespace or a key ("age", "tags") may come: a small part of the vocabulary.
    allowed_count = int(np.unpackbits(n[2].view(np.uint8)).sum())
    assert 0 < allowed_count < info.vocab_size // 50
    tok = hf_tokenizer(model)
    (quote,) = tok.encode('"', add_special_tokens=False)
    (brace,) = tok.encode("}", add_special_tokens=False)
    assert (int(n[2][quote // 32]) >> (quote % 32)) & 1
    assert not (int(n[2][brace // 32]) >> (brace % 32)) & 1  # "age" is required


def test_rollback_reset_fork_and_jump_forward(model):
    compiled = compiler(model).compile_json_schema(SCHEMA, any_whitespace=False, separators=(",", ":"))
    tok = hf_tokenizer(model)
    m = xgr.GrammarMatcher(compiled)
    ids = tok.encode('{"name":"Bo","age":7}', add_special_tokens=False)
    for t in ids[:3]:
        assert m.accept_token(t)
    f = m.fork()
    for t in ids[3:]:
        assert m.accept_token(t)
    assert m.is_completed() and not m.is_terminated()
    # The fork did not move.
    assert not f.is_completed()
    for t in ids[3:]:
        assert f.accept_token(t)
    m.rollback(len(ids) - 1)
    assert not m.is_completed()
    with pytest.raises(ValueError, match="cannot roll back"):
        m.rollback(5)
    m.reset()
    # Properties come in declared order and "name" is first: all of it is forced.
    assert m.find_jump_forward_string() == '{"name":"'
    assert m.accept_string('{"name":"Bo",')
    assert m.find_jump_forward_string() == '"age":'
    assert m.stop_token_ids == tokenizer_info(model).stop_token_ids
    assert not m.accept_string("garbage")


def test_apply_token_bitmask_inplace(model):
    info = tokenizer_info(model)
    compiled = compiler(model).compile_regex(r"[0-9]+")
    m = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(2, info.vocab_size)
    m.fill_next_token_bitmask(bitmask, 0)
    rejected = set(xgr.testing._get_masked_tokens_from_bitmask(bitmask, info.vocab_size, 0))
    logits = torch.randn(2, info.vocab_size)
    ref = logits.clone()
    xgr.apply_token_bitmask_inplace(logits, bitmask)
    masked = torch.isinf(logits[0]).nonzero().flatten().tolist()
    assert set(masked) == rejected
    assert torch.equal(logits[1], ref[1])  # row 1's bitmask is all ones
    # numpy logits, indices selecting row 0 only, bf16 through torch's ops: the same rows.
    ln = ref.numpy().copy()
    xgr.apply_token_bitmask_inplace(ln, bitmask.numpy(), indices=[0])
    assert np.array_equal(np.isinf(ln[0]), torch.isinf(logits[0]).numpy())
    lb = ref.to(torch.bfloat16)
    xgr.apply_token_bitmask_inplace(lb, bitmask, indices=[0])
    assert torch.equal(torch.isinf(lb[0]), torch.isinf(logits[0]))
    assert not torch.isinf(lb[1]).any()
    # Wider logits (Qwen3's 151,936 padding): the mask covers vocab_size tokens only.
    wide = torch.zeros(1, info.vocab_size + 40)
    xgr.apply_token_bitmask_inplace(wide, bitmask[:1], vocab_size=info.vocab_size)
    assert not torch.isinf(wide[0, info.vocab_size :]).any()
    assert torch.isinf(wide[0, : info.vocab_size]).sum() == len(rejected)
