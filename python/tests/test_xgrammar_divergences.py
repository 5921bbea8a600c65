"""Issue 27: behaviours where XGrammar 0.2.9 code must run unchanged after changing the
import. Each case was checked against the installed xgrammar on the same input first."""

import numpy as np
import pytest

import tokensieve as xgr


@pytest.fixture
def grammar(tiny_info):
    return xgr.GrammarCompiler(tiny_info).compile_builtin_json_grammar()


def test_accept_token_out_of_range_is_false(grammar, tiny_info):
    # XGrammar: "the token id is out of range" is one of accept_token's False cases.
    m = xgr.GrammarMatcher(grammar)
    assert m.accept_token(tiny_info.vocab_size) is False
    assert m.accept_token(tiny_info.vocab_size + 5) is False
    assert m.accept_token(2**31) is False
    assert m.accept_token(-1) is False
    assert m.accept_token(-(2**40)) is False
    assert m.accept_string("{}")  # the state is unchanged by the rejected ids
    others = [xgr.GrammarMatcher(grammar) for _ in range(3)]
    assert xgr.BatchGrammarMatcher.batch_accept_token(
        others, [tiny_info.vocab_size + 3, -1, 10**6]
    ) == [False, False, False]


def test_float_token_id_is_a_type_error(grammar):
    # XGrammar raises TypeError ("Mismatched type") for 90.0; it is not truncated.
    m = xgr.GrammarMatcher(grammar)
    with pytest.raises(TypeError, match="int"):
        m.accept_token(1.0)
    with pytest.raises(TypeError, match="int"):
        xgr.BatchGrammarMatcher.batch_accept_token([m], [1.0])
    assert m.accept_token(np.int64(10**6)) is False


def test_fill_after_termination_raises(grammar, tiny_info):
    m = xgr.GrammarMatcher(grammar)
    assert m.accept_string("{}")
    assert m.accept_token(m.stop_token_ids[0])
    assert m.is_terminated()
    bitmask = xgr.allocate_token_bitmask(1, tiny_info.vocab_size)
    with pytest.raises(RuntimeError, match="terminated"):
        m.fill_next_token_bitmask(bitmask)
    with pytest.raises(RuntimeError, match="terminated"):
        xgr.BatchGrammarMatcher().batch_fill_next_token_bitmask([m], bitmask)
    m.rollback(1)
    assert m.fill_next_token_bitmask(bitmask) is True


def test_empty_override_stop_tokens_is_refused(grammar):
    with pytest.raises(ValueError, match="should not be empty"):
        xgr.GrammarMatcher(grammar, override_stop_tokens=[])


def test_rollback_past_max_rollback_tokens_names_the_bound(grammar):
    m = xgr.GrammarMatcher(grammar, max_rollback_tokens=2)
    assert m.accept_string("{") and m.accept_string('"a"') and m.accept_string(":")
    with pytest.raises(
        ValueError,
        match=r"can roll back at most 2 tokens \(max_rollback_tokens=2\); 3 requested",
    ):
        m.rollback(3)
    m.rollback(2)
    assert m.accept_string('"a":')


def test_lenient_compiles_an_unsupported_format(tiny_info):
    # tokensieve refuses a format it cannot enforce; lenient=True ignores it (XGrammar
    # accepts any string there).
    compiler = xgr.GrammarCompiler(tiny_info)
    schema = {"type": "string", "format": "no-such-format"}
    with pytest.raises(xgr.exception.InvalidJSONSchemaError, match="format"):
        compiler.compile_json_schema(schema)
    m = xgr.GrammarMatcher(compiler.compile_json_schema(schema, lenient=True))
    assert m.accept_string('"ab"') and m.is_completed()


def test_separators_that_do_not_read_as_json_are_refused(tiny_info):
    # XGrammar 0.2.9 takes separators=(";", "=") (checked: it then accepts
    # '{"name"= "x"; "a"= [1; 2]}'); tokensieve needs one "," and one ":" in them, since
    # its matcher reads the output as JSON to keep keys unique.
    compiler = xgr.GrammarCompiler(tiny_info)
    schema = {"type": "object"}
    with pytest.raises(ValueError, match="item_separator.*exactly one `,`"):
        compiler.compile_json_schema(schema, any_whitespace=False, separators=(";", "="))
    with pytest.raises(ValueError, match="key_separator.*must not hold '\\{'"):
        xgr.Grammar.from_json_schema(schema, separators=(",", ": {"))
    schema = {"type": "object", "properties": {"a": {}, "b": {}}}
    g = compiler.compile_json_schema(schema, any_whitespace=False, separators=(" ,\n", ":\t"))
    assert xgr.GrammarMatcher(g).accept_string('{"a":\t1 ,\n"b":\t2}')


def test_indent_without_any_whitespace_is_not_supported_yet(tiny_info):
    # XGrammar writes newlines and indent levels there; with any_whitespace=True it ignores
    # indent (checked: same grammar text), as tokensieve does.
    compiler = xgr.GrammarCompiler(tiny_info)
    with pytest.raises(ValueError, match="indent"):
        compiler.compile_json_schema({"type": "object"}, any_whitespace=False, indent=2)
    g = compiler.compile_json_schema({"type": "object", "properties": {"a": {}}}, indent=2)
    assert xgr.GrammarMatcher(g).accept_string('{ "a" : [1] }')


@pytest.mark.parametrize(
    "pattern,text,accepted",
    [
        # XGrammar's regex converter (0.2.9, checked on its `str(Grammar.from_regex(p))`):
        # `\d` = [0-9], `\w` = [a-zA-Z0-9_], `\s` = ECMAScript white space, `.` = any code
        # point, newlines included.
        (r"\d+", "42", True),
        (r"\d+", "\u0663", False),  # ARABIC-INDIC DIGIT THREE: Unicode \d, not XGrammar's
        (r"\w+", "abc_9", True),
        (r"\w+", "\u00e9", False),
        (r"\W", "\u00e9", True),
        (r"[\d.]+", "3.14", True),
        (r"[^\d]", "\u0663", True),
        (r"\s", "\u00a0", True),
        (r"\s", "\ufeff", True),
        (r"\s", "\u0085", False),  # NEL: Unicode white space, not ECMAScript's
        (r"a.b", "a\nb", True),
        (r"a.b", "a\u00e9b", True),
    ],
)
def test_regex_classes_and_dot_follow_xgrammar(pattern, text, accepted):
    from tokensieve.testing import _is_grammar_accept_string

    assert _is_grammar_accept_string(xgr.Grammar.from_regex(pattern), text) is accepted


def test_compile_regex_follows_xgrammar_classes(tiny_info):
    compiled = xgr.GrammarCompiler(tiny_info).compile_regex(r"[\w\s]*")
    assert compiled.grammar is not None
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tiny_info).compile_regex(r"\d\d"))
    assert m.accept_string("12")
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tiny_info).compile_regex(r"\d"))
    assert not m.accept_string("\u0663")


def test_vocab_size_below_the_token_count_is_refused():
    # XGrammar: "vocab_size (2) must be at least the number of tokens in the vocab (3)".
    with pytest.raises(ValueError, match=r"vocab_size \(2\) must be at least .* \(3\)"):
        xgr.TokenizerInfo(["a", "b", "c"], vocab_size=2)
    assert xgr.TokenizerInfo(["a", "b", "c"], vocab_size=3).vocab_size == 3


@pytest.mark.parametrize("cnt", [0, -1, -(2**40), 2**40])
def test_max_whitespace_cnt_out_of_range_says_so(tiny_info, cnt):
    # XGrammar: "max_whitespace_cnt must be positive" for 0 and -1; no OverflowError.
    with pytest.raises(ValueError, match="max_whitespace_cnt must be a positive integer"):
        xgr.GrammarCompiler(tiny_info).compile_json_schema(
            '{"type": "object"}', max_whitespace_cnt=cnt
        )


@pytest.mark.parametrize("seps", [("x",), ",", (",", ":", "="), 5])
def test_separators_that_are_not_a_pair_say_so(tiny_info, seps):
    with pytest.raises(ValueError, match="separators must be a pair"):
        xgr.GrammarCompiler(tiny_info).compile_json_schema('{"type": "object"}', separators=seps)
