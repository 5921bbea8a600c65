"""The serving-engine API of the engine, bound in Python: matcher options (XGrammar's
``override_stop_tokens``, ``terminate_without_stop_token``, ``max_rollback_tokens``),
``validate_tokens``, serialization and pickling of compiled grammars and tokenizer infos,
the whole-grammar cache of ``GrammarCompiler``, and the engine adapter
(``tokensieve.serving``)."""

import base64
import json
import pickle

import numpy as np
import pytest
import torch

import tokensieve as xgr
from conftest import compiler, hf_tokenizer, tokenizer_info
from test_token_by_token import SCHEMA

END = 99  # "<|end|>", the stop token of the tiny vocabulary (conftest.tiny_info)


def tid(ch):
    """The id of a one-character token of the tiny vocabulary."""
    return ord(ch) - 32


def allowed(matcher, vocab_size):
    """The token ids the next mask allows, read back from the tensor."""
    b = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(b)
    rejected = set(xgr.testing._get_masked_tokens_from_bitmask(b, vocab_size))
    return sorted(set(range(vocab_size)) - rejected)


# ---------------------------------------------------------------------------------------
# 1. Matcher options, validate_tokens, stop_token_ids
# ---------------------------------------------------------------------------------------


def test_default_stop_tokens_and_options(tiny_info):
    g = xgr.GrammarCompiler(tiny_info).compile_grammar('root ::= "a"')
    m = xgr.GrammarMatcher(g)
    assert m.stop_token_ids == [END] == tiny_info.stop_token_ids
    assert m.max_rollback_tokens == -1
    assert m.terminate_without_stop_token is False
    assert m.accept_token(tid("a"))
    assert allowed(m, tiny_info.vocab_size) == [END]
    assert m.accept_token(END) and m.is_terminated()


@pytest.mark.parametrize("override", [tid("x"), [tid("x")], [tid("x"), tid("x")]])
def test_override_stop_tokens(tiny_info, override):
    g = xgr.GrammarCompiler(tiny_info).compile_grammar('root ::= "a" "x"*')
    m = xgr.GrammarMatcher(g, override_stop_tokens=override)
    assert m.stop_token_ids == [tid("x")]
    # "x" only ever stops: not allowed as text before the grammar may end.
    assert allowed(m, tiny_info.vocab_size) == [tid("a")]
    assert not m.accept_token(tid("x"))
    assert m.accept_token(tid("a"))
    # Where the grammar may end, "x" is allowed and stops; <|end|> no longer does.
    assert allowed(m, tiny_info.vocab_size) == [tid("x")]
    assert not m.accept_token(END)
    assert m.accept_token(tid("x")) and m.is_terminated()
    # A fork keeps the options.
    m.reset()
    f = m.fork()
    assert f.stop_token_ids == [tid("x")]
    assert f.accept_token(tid("a")) and not f.accept_token(END)


def test_override_stop_tokens_bad(tiny_info):
    g = xgr.GrammarCompiler(tiny_info).compile_grammar('root ::= "a"')
    with pytest.raises(ValueError, match="100|stop"):
        xgr.GrammarMatcher(g, override_stop_tokens=[100])
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(g, override_stop_tokens=[10**6])
    with pytest.raises((OverflowError, ValueError)):
        xgr.GrammarMatcher(g, override_stop_tokens=-1)
    with pytest.raises(TypeError):
        xgr.GrammarMatcher(g, override_stop_tokens="x")


def test_terminate_without_stop_token(tiny_info):
    c = xgr.GrammarCompiler(tiny_info)
    m = xgr.GrammarMatcher(c.compile_grammar('root ::= "ab"'), terminate_without_stop_token=True)
    assert m.terminate_without_stop_token is True
    assert m.accept_token(tid("a")) and not m.is_terminated()
    assert m.accept_token(tid("b")) and m.is_terminated()
    # Nothing continues "ab": the mask is empty, no stop token is allowed or accepted.
    assert allowed(m, tiny_info.vocab_size) == []
    assert not m.accept_token(END)
    # Where the grammar may go on, the continuation stays allowed.
    m = xgr.GrammarMatcher(c.compile_grammar('root ::= "a"+'), terminate_without_stop_token=True)
    assert m.accept_token(tid("a")) and m.is_terminated()
    assert allowed(m, tiny_info.vocab_size) == [tid("a")]


def test_max_rollback_tokens(tiny_info):
    g = xgr.GrammarCompiler(tiny_info).compile_grammar('root ::= "a"+')
    m = xgr.GrammarMatcher(g, max_rollback_tokens=2)
    assert m.max_rollback_tokens == 2
    for _ in range(4):
        assert m.accept_token(tid("a"))
    with pytest.raises(ValueError):
        m.rollback(3)
    m.rollback(2)
    m.rollback(0)
    assert m.fork().max_rollback_tokens == 2
    unlimited = xgr.GrammarMatcher(g, max_rollback_tokens=-1)
    for _ in range(5):
        assert unlimited.accept_token(tid("a"))
    unlimited.rollback(5)
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(g, max_rollback_tokens=-2)


def test_validate_tokens(tiny_info):
    g = xgr.GrammarCompiler(tiny_info).compile_grammar('root ::= "ab"')
    m = xgr.GrammarMatcher(g)
    a, b = tid("a"), tid("b")
    assert m.validate_tokens([a, b, END, a]) == 3  # the stop token counts, nothing after it
    assert m.validate_tokens([a, a]) == 1
    assert m.validate_tokens([b]) == 0
    assert m.validate_tokens([]) == 0
    # The state is unchanged.
    assert allowed(m, tiny_info.vocab_size) == [a]
    assert m.accept_token(a)
    assert m.validate_tokens([b, END]) == 2
    assert m.accept_token(b) and m.accept_token(END) and m.is_terminated()
    assert m.validate_tokens([a]) == 0
    with pytest.raises(ValueError, match="128|vocab"):
        xgr.GrammarMatcher(g).validate_tokens([a, 128])


def test_validate_tokens_real_vocab(model):
    """A draft of real tokens on Llama 3.1 and Qwen3: validated count = the accepted prefix."""
    tok = hf_tokenizer(model)
    compiled = compiler(model).compile_json_schema(SCHEMA)
    good = tok.encode('{"name": "Ann", "age": 7}', add_special_tokens=False)
    m = xgr.GrammarMatcher(compiled)
    assert m.validate_tokens(good) == len(good)
    bad = good[:3] + tok.encode("}}}", add_special_tokens=False)
    n = m.validate_tokens(bad)
    assert 3 <= n < len(bad)
    for t in bad[:n]:
        assert m.accept_token(t)
    assert not m.accept_token(bad[n])


# ---------------------------------------------------------------------------------------
# 2. Serialization and pickling
# ---------------------------------------------------------------------------------------


def replay_masks(compiled, ids, vocab_size):
    m = xgr.GrammarMatcher(compiled)
    out = []
    b = xgr.allocate_token_bitmask(1, vocab_size)
    for t in ids:
        m.fill_next_token_bitmask(b)
        out.append(b.clone())
        assert m.accept_token(t)
    return out


def test_compiled_grammar_serialize_json_round_trip(model):
    info = tokenizer_info(model)
    # Eager: under the default precompute the background fill may add masks between the
    # two serializations below, and their bytes would differ.
    compiled = xgr.GrammarCompiler(info, precompute="eager").compile_json_schema(SCHEMA)
    s = compiled.serialize_json()
    assert isinstance(s, str)
    d = json.loads(s)
    raw = base64.b64decode(d["compiled_grammar"])
    assert raw[:8] == b"TSGRAMMR"
    assert raw == compiled.serialize_bytes()
    back = xgr.CompiledGrammar.deserialize_json(s, info)
    assert back.tokenizer_info is info
    assert str(back.grammar) == str(compiled.grammar)
    ids = hf_tokenizer(model).encode('{"name": "Bo", "age": 31, "tags": ["a"]}', add_special_tokens=False)
    a = replay_masks(compiled, ids, info.vocab_size)
    b = replay_masks(back, ids, info.vocab_size)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    back2 = xgr.CompiledGrammar.deserialize_bytes(compiled.serialize_bytes(), info)
    assert all(torch.equal(x, y) for x, y in zip(a, replay_masks(back2, ids, info.vocab_size)))


def test_pickle_compiled_grammar(tiny_info):
    c = xgr.GrammarCompiler(tiny_info)
    compiled = c.compile_grammar('root ::= ("ab" | "b")+')
    back = pickle.loads(pickle.dumps(compiled))
    assert isinstance(back, xgr.CompiledGrammar)
    assert back.tokenizer_info.decoded_vocab == tiny_info.decoded_vocab
    assert back.tokenizer_info.vocab_type == tiny_info.vocab_type
    ids = [tid("a"), tid("b"), tid("b"), tid("a"), tid("b"), END]
    assert all(
        torch.equal(x, y)
        for x, y in zip(replay_masks(compiled, ids, 128), replay_masks(back, ids, 128))
    )
    # Two grammars of one vocabulary in one pickle share one TokenizerInfo.
    two = pickle.loads(pickle.dumps([compiled, c.compile_regex("b+")]))
    assert two[0].tokenizer_info is two[1].tokenizer_info


def test_tokenizer_info_serialize_json_and_pickle(model):
    info = tokenizer_info(model)
    s = info.serialize_json()
    d = json.loads(s)
    assert base64.b64decode(d["vocabulary"])[:8] == b"TSVOCAB\0"
    for back in (xgr.TokenizerInfo.deserialize_json(s), pickle.loads(pickle.dumps(info))):
        assert back.decoded_vocab == info.decoded_vocab
        assert back.special_token_ids == info.special_token_ids
        assert back.stop_token_ids == info.stop_token_ids
        assert back.vocab_size == info.vocab_size
        assert back.vocab_type == info.vocab_type
        assert back.add_prefix_space == info.add_prefix_space
    # A grammar compiled on the original loads against the copy (same fingerprint).
    compiled = xgr.GrammarCompiler(info, max_threads=2).compile_regex("[a-z]{2,4}")
    xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), xgr.TokenizerInfo.deserialize_json(s))


def corrupt_variants(raw):
    flipped = bytearray(raw)
    flipped[-1] ^= 0xFF
    newer = bytearray(raw)
    newer[8:12] = (99).to_bytes(4, "little")
    return {
        "empty": b"",
        "short": raw[:10],
        "magic": b"XXXXXXXX" + raw[8:],
        "truncated": raw[:-5],
        "checksum": bytes(flipped),
        "version": bytes(newer),
    }


def test_bad_grammar_buffers_raise_value_error(tiny_info):
    compiled = xgr.GrammarCompiler(tiny_info).compile_grammar('root ::= "ab"')
    raw = compiled.serialize_bytes()
    for name, buf in corrupt_variants(raw).items():
        with pytest.raises(ValueError):
            xgr.CompiledGrammar.deserialize_bytes(buf, tiny_info)
        s = json.dumps({"tokensieve": "CompiledGrammar", "format": 1,
                        "compiled_grammar": base64.b64encode(buf).decode()})
        with pytest.raises(ValueError):
            xgr.CompiledGrammar.deserialize_json(s, tiny_info)
    # A vocabulary's bytes are not a grammar, and the other way round.
    with pytest.raises(ValueError, match="grammar"):
        xgr.CompiledGrammar.deserialize_bytes(tiny_info.serialize_bytes(), tiny_info)
    with pytest.raises(ValueError, match="vocabulary"):
        xgr.TokenizerInfo.deserialize_bytes(raw)
    # Compiled for another vocabulary.
    other = xgr.TokenizerInfo(["a", "b", "</s>"], stop_token_ids=[2])
    with pytest.raises(ValueError, match="vocabular"):
        xgr.CompiledGrammar.deserialize_bytes(raw, other)
    for text in ("not json", "[1, 2]", '{"compiled_grammar": 3}', '{"compiled_grammar": "!!!"}', "{}"):
        with pytest.raises(ValueError):
            xgr.CompiledGrammar.deserialize_json(text, tiny_info)
    with pytest.raises(TypeError):
        xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), "not an info")
    with pytest.raises(TypeError):
        xgr.CompiledGrammar.deserialize_bytes("a str", tiny_info)


def test_bad_tokenizer_info_buffers_raise_value_error(tiny_info):
    raw = tiny_info.serialize_bytes()
    assert xgr.TokenizerInfo.deserialize_bytes(raw).decoded_vocab == tiny_info.decoded_vocab
    for name, buf in corrupt_variants(raw).items():
        with pytest.raises(ValueError):
            xgr.TokenizerInfo.deserialize_bytes(buf)
    for text in ("not json", "[1]", "{}", '{"vocabulary": "%%%"}', '{"vocabulary": ""}'):
        with pytest.raises(ValueError):
            xgr.TokenizerInfo.deserialize_json(text)
        # Also XGrammar's exception type for a bad serialized text.
        with pytest.raises(xgr.InvalidJSONError):
            xgr.TokenizerInfo.deserialize_json(text)


# ---------------------------------------------------------------------------------------
# 3. The whole-grammar cache
# ---------------------------------------------------------------------------------------


def test_whole_grammar_cache(tiny_info):
    # Eager: a grammar's memory is final when compiled (the default background fill would
    # add masks, here and in the compiler's shared mask cache, while the sizes are compared).
    c = xgr.GrammarCompiler(tiny_info, precompute="eager")
    assert c.cache_enabled is True and c.cache_limit_bytes == -1
    assert c.get_cache_size_bytes() == 0
    g1 = c.compile_regex("a+b")
    size = c.get_cache_size_bytes()
    assert size >= g1.memory_size_bytes > 0
    stats = c._compiler.grammar_cache_stats()
    # The size counts the grammar and the rule automata the compiler shares across grammars.
    assert stats == {"entries": 1, "size_bytes": g1.memory_size_bytes, "hits": 0, "compiles": 1}
    c.compile_regex("a+b")
    assert c.get_cache_size_bytes() == size
    assert c._compiler.grammar_cache_stats()["hits"] == 1
    c.compile_json_schema({"type": "integer"})
    c.compile_grammar('root ::= "x"')
    c.compile_builtin_json_grammar()
    assert c._compiler.grammar_cache_stats()["entries"] == 4
    assert c.get_cache_size_bytes() > size
    c.clear_cache()
    assert c.get_cache_size_bytes() == 0
    assert c._compiler.grammar_cache_stats()["entries"] == 0
    # Grammars handed out live on after a clear.
    assert xgr.GrammarMatcher(g1).accept_string("aab")


def test_cache_disabled_and_limited(tiny_info):
    off = xgr.GrammarCompiler(tiny_info, cache_enabled=False)
    assert off.cache_enabled is False
    off.compile_regex("a+b")
    off.compile_regex("a+b")
    assert off.get_cache_size_bytes() == 0
    assert off._compiler.grammar_cache_stats()["hits"] == 0
    one = xgr.GrammarCompiler(tiny_info, precompute="eager").compile_regex("a+b").memory_size_bytes
    lim = xgr.GrammarCompiler(tiny_info, cache_limit_bytes=one + one // 2, precompute="eager")
    assert lim.cache_limit_bytes == one + one // 2
    lim.compile_regex("a+b")
    lim.compile_regex("a+c")
    # The limit bounds the grammars kept; the total also counts the shared rule automata.
    kept = lim._compiler.grammar_cache_stats()["size_bytes"]
    assert 0 < kept <= one + one // 2 and lim.get_cache_size_bytes() >= kept
    assert lim._compiler.grammar_cache_stats()["entries"] == 1
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(tiny_info, cache_limit_bytes=-5)


# ---------------------------------------------------------------------------------------
# 4. The engine adapter
# ---------------------------------------------------------------------------------------


def test_engine_adapter_choice(tiny_info):
    backend = xgr.serving.StructuredOutputBackend(xgr.GrammarCompiler(tiny_info))
    g = backend.compile_grammar("choice", '["ab", "b"]')
    assert isinstance(g, xgr.serving.StructuredOutputGrammar)
    bitmask = backend.allocate_token_bitmask(4)
    assert tuple(bitmask.shape) == (4, 4) and bitmask.dtype == torch.int32
    g.fill_bitmask(bitmask, 2)
    assert (bitmask[[0, 1, 3]] == -1).all()  # other rows untouched
    rejected = set(xgr.testing._get_masked_tokens_from_bitmask(bitmask, 128, index=2))
    assert sorted(set(range(128)) - rejected) == [tid("a"), tid("b")]
    a, b = tid("a"), tid("b")
    assert g.validate_tokens([a, b, END, a]) == [a, b, END]
    assert g.validate_tokens([b, b]) == [b]
    assert g.num_processed_tokens == 0
    assert g.accept_tokens("req-1", [a])
    assert g.find_jump_forward_string() == "b"
    assert g.num_processed_tokens == 1
    g.rollback(1)
    assert g.num_processed_tokens == 0
    assert g.accept_tokens("req-1", [b, END])
    assert g.is_terminated()
    assert g.accept_tokens("req-1", [a])  # ignored after termination
    assert g.validate_tokens([a]) == []
    g.reset()
    assert not g.is_terminated() and g.num_processed_tokens == 0
    assert not g.accept_tokens("req-1", [tid("z")])
    with pytest.raises(IndexError):
        g.fill_bitmask(bitmask, 4)
    with pytest.raises(ValueError):
        g.fill_bitmask(torch.zeros(4, 3, dtype=torch.int32), 0)
    with pytest.raises(ValueError):
        g.rollback(5)


def test_engine_adapter_kinds(tiny_info):
    comp = xgr.GrammarCompiler(tiny_info)
    backend = xgr.serving.StructuredOutputBackend(comp, any_whitespace=False)
    cases = {
        # XGrammar's separators without whitespace: (", ", ": ").
        "json": ('{"type": "array", "items": {"type": "integer"}}', "[1, 22]"),
        # json_object is any object, under strict_mode too (vLLM's meaning).
        "json_object": ("", '{"a": [1, "x"]}'),
        "regex": ("a[0-9]+", "a12"),
        "grammar": ('root ::= "x" "y"*', "xyy"),
        "structural_tag": (
            json.dumps({"type": "structural_tag", "format": {"type": "const_string", "value": "hello"}}),
            "hello",
        ),
        "choice": ('["true", "false"]', "false"),
    }
    for kind, (spec, text) in cases.items():
        g = backend.compile_grammar(kind, spec)
        f = g.fork_matcher()
        assert f.accept_string(text) and f.is_completed(), kind
        assert not g.fork_matcher().is_completed(), kind  # the fork advanced alone, kind
    loose = xgr.serving.StructuredOutputBackend(comp, any_whitespace=False, strict_mode=False)
    assert loose.compile_grammar("json_object", "").fork_matcher().accept_string('{"a": true}')
    assert not backend.compile_grammar("json_object", "").fork_matcher().accept_string("[1]")
    # vLLM's enum members work through their names.
    class Opt:
        name = "REGEX"

    assert backend.compile_grammar(Opt(), "a+").fork_matcher().accept_string("aa")
    # The backend shares the compiler's whole-grammar cache.
    assert comp.get_cache_size_bytes() > 0
    backend.compiler.clear_cache()
    assert comp.get_cache_size_bytes() == 0
    with pytest.raises(ValueError, match="kind"):
        backend.compile_grammar("yaml", "a")
    with pytest.raises(ValueError, match="choice"):
        backend.compile_grammar("choice", "[1, 2]")
    with pytest.raises(xgr.InvalidJSONSchemaError):
        backend.compile_grammar("json", '{"type": "no such type"}')
    with pytest.raises(xgr.TokensieveError):
        backend.compile_grammar("grammar", "root ::= (")


def test_engine_adapter_options(tiny_info):
    backend = xgr.serving.StructuredOutputBackend(
        xgr.GrammarCompiler(tiny_info), max_rollback_tokens=1
    )
    g = backend.compile_grammar("regex", "a+")
    assert g.accept_tokens("r", [tid("a"), tid("a"), tid("a")])
    with pytest.raises(ValueError):
        g.rollback(2)
    g.rollback(1)
    s = backend.compile_grammar("regex", "a+", stop_token_ids=[tid("x")])
    assert s.fork_matcher().stop_token_ids == [tid("x")]
    assert s.accept_tokens("r", [tid("a"), tid("x")]) and s.is_terminated()
    with pytest.raises(ValueError):
        backend.compile_grammar("regex", "a+", stop_token_ids=[1000])
    # The whole batch filled from the engine's grammars in one call.
    gs = [backend.compile_grammar("regex", p) for p in ("a+", "b+", "[ab]c")]
    bm = backend.allocate_token_bitmask(3)
    xgr.BatchGrammarMatcher(2).batch_fill_next_token_bitmask(gs, bm)
    for i, x in enumerate(gs):
        row = backend.allocate_token_bitmask(1)
        x.fill_bitmask(row, 0)
        assert torch.equal(row[0], bm[i])


def test_engine_adapter_numpy_and_real_vocab(model):
    info = tokenizer_info(model)
    backend = xgr.serving.StructuredOutputBackend(compiler(model))
    g = backend.compile_grammar("json", json.dumps(SCHEMA))
    ids = hf_tokenizer(model).encode('{"name": "Q", "age": 5}', add_special_tokens=False)
    bm = np.full((2, (info.vocab_size + 31) // 32), -1, dtype=np.int32)
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info, max_threads=2).compile_json_schema(SCHEMA))
    ref = xgr.allocate_token_bitmask(1, info.vocab_size)
    for t in ids:
        g.fill_bitmask(bm, 1)
        m.fill_next_token_bitmask(ref)
        assert np.array_equal(bm[1], ref[0].numpy())
        assert g.accept_tokens("r", [t]) and m.accept_token(t)
    assert g.num_processed_tokens == len(ids)
