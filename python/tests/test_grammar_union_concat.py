"""Issue 27: ``Grammar.union(*grammars)`` / ``Grammar.concat(*grammars)`` as XGrammar 0.2.9
has them (signatures and the strings below checked with the installed xgrammar on Llama
3.1: the same accept / reject answers and rule names)."""

import pytest

import tokensieve as xgr

from conftest import compiler


def accepts(grammar, text):
    m = xgr.GrammarMatcher(compiler("llama3_1").compile_grammar(grammar))
    return m.accept_string(text) and m.is_completed()


A = 'root ::= "a" r\nr ::= "x" | "x" r'
B = 'root ::= "b" r\nr ::= "y"'


def test_union_and_concat_accept_as_xgrammar():
    a, b = xgr.Grammar.from_ebnf(A), xgr.Grammar.from_ebnf(B)
    u = xgr.Grammar.union(a, b)
    assert [accepts(u, t) for t in ["ax", "axx", "by", "axby", "a", ""]] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    c = xgr.Grammar.concat(a, b)
    assert [accepts(c, t) for t in ["axby", "axxby", "ax", "byax"]] == [True, True, False, False]
    j = xgr.Grammar.union(xgr.Grammar.from_json_schema({"type": "integer"}), xgr.Grammar.from_regex("no"))
    assert [accepts(j, t) for t in ["12", "no", "12no"]] == [True, True, False]


def test_union_renames_rules_apart_as_xgrammar():
    text = str(xgr.Grammar.union(xgr.Grammar.from_ebnf(A), xgr.Grammar.from_ebnf(B)))
    heads = [line.split(" ::=")[0] for line in text.splitlines()]
    assert heads == ["root", "root_1", "r", "root_2", "r_1"]
    assert str(xgr.Grammar.concat(xgr.Grammar.from_ebnf(A))).splitlines()[0].replace(
        "(", ""
    ).replace(")", "") == "root ::= root_1"


def test_union_of_non_grammars_is_a_type_error():
    # XGrammar raises AttributeError ('str' object has no attribute '_handle') here.
    with pytest.raises(TypeError):
        xgr.Grammar.union(xgr.Grammar.from_ebnf(A), "root ::= \"b\"")
