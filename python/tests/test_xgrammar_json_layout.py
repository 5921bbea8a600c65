"""Issue 27: the layout of JSON output as XGrammar 0.2.9 writes it, on Llama 3.1.

Every expectation here was first observed with the installed xgrammar 0.2.9 (its
``compile_json_schema`` / ``compile_builtin_json_grammar`` and ``GrammarMatcher`` on the
same tokenizer and strings), then written down; tokensieve must give the same answers.
"""

import pytest

import tokensieve as xgr

from conftest import compiler

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "a": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["name", "a"],
}

CASES = [
    '{"name":"x","a":[1,2]}',
    '{"name": "x", "a": [1, 2]}',
    '{"name": "x","a": [1,2]}',
    '{"name" : "x", "a": [1, 2]}',
    ' {"name": "x", "a": [1, 2]}',
    '{"name": "x", "a": [1, 2]} ',
    '{"name": "x", "a": []}',
    '{"name": "x", "a": [ ]}',
]


def accepts(grammar, text):
    m = xgr.GrammarMatcher(grammar)
    return m.accept_string(text) and m.is_completed()


@pytest.mark.parametrize(
    "kwargs, expected, jump",
    [
        # XGrammar: the default separators with any_whitespace=False are (", ", ": ").
        (
            dict(any_whitespace=False),
            [False, True, False, False, False, False, True, False],
            '{"name": "',
        ),
        (
            dict(any_whitespace=False, separators=(",", ":")),
            [True, False, False, False, False, False, False, False],
            '{"name":"',
        ),
        # Separators are written as given, spaces before them included.
        (
            dict(any_whitespace=False, separators=(" ,", "  :")),
            [False] * 8,
            '{"name"  :"',
        ),
    ],
)
def test_separators_without_whitespace(kwargs, expected, jump):
    g = compiler("llama3_1").compile_json_schema(SCHEMA, **kwargs)
    assert [accepts(g, t) for t in CASES] == expected
    assert xgr.GrammarMatcher(g).find_jump_forward_string() == jump


def test_separators_with_any_whitespace_are_literal_between_whitespace():
    # XGrammar: with any_whitespace=True the separators are written as given, whitespace
    # allowed around them; the default there is (",", ":").
    c = compiler("llama3_1")
    g = c.compile_json_schema(SCHEMA, separators=(", ", ": "))
    assert accepts(g, '{ "name" : "x" ,  "a": [1, 2] }')
    assert not accepts(g, '{"name":"x","a":[1,2]}')
    assert not accepts(g, '{"name": "x","a": [1, 2]}')
    g = c.compile_json_schema(SCHEMA)
    assert [accepts(g, t) for t in CASES] == [True, True, True, True, False, False, True, True]


def test_separators_reach_extra_members_and_any_values_not_const():
    c = compiler("llama3_1")
    extra = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "integer"},
    }
    g = c.compile_json_schema(extra, any_whitespace=False)
    assert [accepts(g, t) for t in ['{"a": 1, "b": 2}', '{"a":1,"b":2}', '{"b": 2}']] == [
        True,
        False,
        True,
    ]
    # strict_mode=False: with strict_mode tokensieve's `{}` takes only empty objects
    # (a difference of its own, listed in the README).
    g = c.compile_json_schema(
        {"type": "object", "properties": {"v": {}}, "required": ["v"]},
        any_whitespace=False,
        strict_mode=False,
    )
    assert accepts(g, '{"v": {"a": [1, 2]}}')
    assert not accepts(g, '{"v": {"a":[1,2]}}')
    g = c.compile_json_schema({"const": {"a": [1, 2]}}, any_whitespace=False)
    assert [accepts(g, t) for t in ['{"a": [1, 2]}', '{"a":[1,2]}']] == [False, True]
    g = c.compile_json_schema(
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        any_whitespace=False,
    )
    assert [accepts(g, t) for t in ['[1, "a"]', '[1,"a"]']] == [True, False]


def test_schema_root_refuses_surrounding_whitespace():
    g = compiler("llama3_1").compile_json_schema({"type": "object"})
    assert [accepts(g, t) for t in [" {}", "{} ", "{}\n", "{ }"]] == [False, False, False, True]


BUILTIN = [
    (" {}", False),
    ("{} ", False),
    ("{}\n", False),
    ("{ }", True),
    ("\n[1]", False),
    ("[ 1 , 2 ]", True),
    ('"a" ', False),
    (" 1", False),
    ("1 ", False),
    ("1", False),
    ('"a"', False),
    ("true", False),
    ('{"a" :\n1}', True),
    ("\t{}", False),
    ('[1, "x", {"k": null}]', True),
]


def test_builtin_json_grammar_is_an_object_or_array_without_surrounding_whitespace():
    # XGrammar's builtin root is `object | array`, nothing before or after it.
    g = compiler("llama3_1").compile_builtin_json_grammar()
    assert [(t, accepts(g, t)) for t, _ in BUILTIN] == BUILTIN
    g2 = compiler("llama3_1").compile_grammar(xgr.Grammar.builtin_json_grammar())
    assert [(t, accepts(g2, t)) for t, _ in BUILTIN] == BUILTIN
