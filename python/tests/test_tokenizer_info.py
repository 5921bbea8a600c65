"""TokenizerInfo: from_huggingface, the encoded-vocabulary constructor, metadata, JSON."""

import json

import pytest

import tokensieve as xgr
from conftest import hf_tokenizer, shared_path, tokenizer_info


def test_from_huggingface_matches_the_tokenizer(model):
    tok = hf_tokenizer(model)
    info = tokenizer_info(model)
    assert info.vocab_type == xgr.VocabType.BYTE_LEVEL
    assert info.add_prefix_space is False
    assert info.vocab_size == len(tok.get_vocab())
    assert info.stop_token_ids == [tok.eos_token_id]
    vocab = info.decoded_vocab
    assert len(vocab) == info.vocab_size
    # The bytes of encoded ids concatenate to the text, byte for byte.
    text = 'Hello, wörld! {"a": [1, 2.5e3]}\n\t中文'
    ids = tok.encode(text, add_special_tokens=False)
    assert b"".join(vocab[i] for i in ids) == text.encode()
    # Added special tokens are special and spelled as their text.
    for t in tok.all_special_ids:
        assert t in info.special_token_ids
        assert vocab[t] == tok.convert_ids_to_tokens(t).encode()


def test_from_huggingface_vocab_size_and_stop_tokens():
    tok = hf_tokenizer("qwen3")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=151936, stop_token_ids=im_end)
    assert info.vocab_size == 151936
    assert info.stop_token_ids == [im_end]
    # The padding ids past the tokenizer are listed as special, as in XGrammar.
    assert info.special_token_ids[-1] == 151935
    # A width below the tokenizer drops the tokens past it (as XGrammar), but not a stop
    # token: decoding could never stop.
    with pytest.raises(ValueError, match="leaves out stop token"):
        xgr.TokenizerInfo.from_huggingface(tok, vocab_size=1000)
    narrow = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=1000, stop_token_ids=[5])
    assert narrow.vocab_size == 1000
    with pytest.raises(ValueError, match="past the vocabulary"):
        xgr.TokenizerInfo.from_huggingface(tok, stop_token_ids=[10**7])
    with pytest.raises(ValueError, match="cannot be empty"):
        xgr.TokenizerInfo.from_huggingface(tok, stop_token_ids=[])


def test_encoded_vocab_constructor():
    info = xgr.TokenizerInfo(
        ["Ġhi", "ĊĊ", "<|im_end|>", "", "a"], xgr.VocabType.BYTE_LEVEL, vocab_size=40
    )
    assert info.decoded_vocab == [b" hi", b"\n\n", b"<|im_end|>", b"", b"a"]
    assert info.stop_token_ids == [2]  # detected by its spelling
    assert info.special_token_ids == [3] + list(range(5, 40))
    assert info.vocab_size == 40
    bf = xgr.TokenizerInfo(
        ["<unk>", "▁the", "<0x0A>", "</s>"], xgr.VocabType.BYTE_FALLBACK, add_prefix_space=True
    )
    assert bf.decoded_vocab == [b"<unk>", b" the", b"\n", b"</s>"]
    assert bf.stop_token_ids == [3]
    assert bf.add_prefix_space
    raw = xgr.TokenizerInfo([b"\xe4\xb8", b"x"], stop_token_ids=1)
    assert raw.decoded_vocab == [b"\xe4\xb8", b"x"]
    assert raw.vocab_type == xgr.VocabType.RAW
    with pytest.raises(ValueError, match="past the vocabulary"):
        xgr.TokenizerInfo(["a"], stop_token_ids=[3])
    with pytest.raises(TypeError, match="token 1"):
        xgr.TokenizerInfo(["a", 5])


def test_metadata_round_trip():
    enc = ["a", "Ġb", "<|endoftext|>"]
    info = xgr.TokenizerInfo(enc, xgr.VocabType.BYTE_LEVEL, vocab_size=64, stop_token_ids=[2])
    meta = json.loads(info.dump_metadata())
    assert meta == {"vocab_type": 2, "vocab_size": 64, "add_prefix_space": False, "stop_token_ids": [2]}
    back = xgr.TokenizerInfo.from_vocab_and_metadata(enc, info.dump_metadata())
    assert back.decoded_vocab == info.decoded_vocab
    assert back.vocab_size == 64 and back.stop_token_ids == [2]
    with pytest.raises(ValueError, match="metadata"):
        xgr.TokenizerInfo.from_vocab_and_metadata(enc, "{not json")


def test_serialize_json_round_trip(model):
    info = tokenizer_info(model)
    back = xgr.TokenizerInfo.deserialize_json(info.serialize_json())
    assert back.decoded_vocab == info.decoded_vocab
    assert back.special_token_ids == info.special_token_ids
    assert back.stop_token_ids == info.stop_token_ids
    assert back.vocab_size == info.vocab_size
    assert back.vocab_type == info.vocab_type
    with pytest.raises(xgr.InvalidJSONError):
        xgr.TokenizerInfo.deserialize_json('{"decoded_vocab": []}')
    with pytest.raises(xgr.InvalidJSONError):
        xgr.TokenizerInfo.deserialize_json("[1, 2")
