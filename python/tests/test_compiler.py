"""GrammarCompiler, Grammar and CompiledGrammar: every compile entry, its input forms, and
errors as Python exceptions."""

import json

import pytest

import tokensieve as xgr
from tokensieve import testing
from conftest import compiler, tokenizer_info


def accepts(compiled, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


def test_json_schema_inputs_str_dict_pydantic(tiny_info):
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    c = xgr.GrammarCompiler(tiny_info, max_threads=1)
    schema = Person.model_json_schema()
    for form in (Person, schema, json.dumps(schema)):
        g = c.compile_json_schema(form)
        assert accepts(g, '{"name": "a", "age": 3}')
        assert not accepts(g, '{"name": "a"}')
        assert not accepts(g, '{"name": "a", "age": 3, "x": 1}')  # strict_mode
    loose = c.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, strict_mode=False)
    assert accepts(loose, '{"a": 1, "b": true}')
    # XGrammar's layout without whitespace: separators (", ", ": ") by default.
    one_line = c.compile_json_schema(schema, any_whitespace=False)
    assert accepts(one_line, '{"name": "a", "age": 3}')
    assert not accepts(one_line, '{"name":"a","age":3}')
    compact = c.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
    assert accepts(compact, '{"name":"a","age":3}')
    assert not accepts(compact, '{"name": "a", "age": 3}')
    capped = c.compile_json_schema(schema, max_whitespace_cnt=2)
    assert accepts(capped, '{  "name": "a", "age": 3}')
    assert not accepts(capped, '{   "name": "a", "age": 3}')
    anyo = c.compile_json_schema(schema, any_order=True)
    assert accepts(anyo, '{"age": 3, "name": "a"}')
    assert not accepts(c.compile_json_schema(schema), '{"age": 3, "name": "a"}')
    with pytest.raises(ValueError, match="indent"):
        c.compile_json_schema(schema, any_whitespace=False, indent=2)


def test_other_compile_entries(tiny_info):
    c = xgr.GrammarCompiler(tiny_info)
    j = c.compile_builtin_json_grammar()
    assert accepts(j, '[1, {"a": null}]') and not accepts(j, "[1,")
    r = c.compile_regex(r"(ab)+c")
    assert accepts(r, "ababc") and not accepts(r, "abc ")
    e = c.compile_grammar('start ::= "x" start | "y"', root_rule_name="start")
    assert accepts(e, "xxy") and not accepts(e, "yx")
    g = c.compile_grammar(xgr.Grammar.from_regex("[0-9]{2}"))
    assert accepts(g, "42") and not accepts(g, "4")
    assert g.tokenizer_info is tiny_info
    assert g.memory_size_bytes > 0
    assert "root" in str(g.grammar)


def test_structural_tag_forms(tiny_info):
    c = xgr.GrammarCompiler(tiny_info)
    tag = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<f="],
            "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</f>"}],
        },
    }
    legacy = ([xgr.StructuralTagItem(begin="<f=a>", schema={"type": "integer"}, end="</f>")], ["<f="])
    for g in (c.compile_structural_tag(tag), c.compile_structural_tag(json.dumps(tag)), c.compile_structural_tag(*legacy)):
        assert accepts(g, "hi <f=a>12</f> bye")
        assert not accepts(g, "hi <f=a>x</f>")
    assert "root" in str(xgr.Grammar.from_structural_tag(tag))
    assert "root" in str(xgr.Grammar.from_structural_tag(*legacy))


def test_grammar_constructors_print_ebnf():
    g = xgr.Grammar.from_ebnf('root ::= "a" | "b"')
    assert '"a"' in str(g) and str(g).startswith("root ::=")
    assert str(xgr.Grammar.builtin_json_grammar()).startswith("root ::=")
    s = xgr.Grammar.from_json_schema({"type": "boolean"})
    assert testing._is_grammar_accept_string(s, "true")
    assert not testing._is_grammar_accept_string(s, "tru")
    assert testing._is_grammar_accept_string(s, "tru", require_termination=False)
    assert testing._is_grammar_accept_string('root ::= [a-c]+', "abca")
    ebnf = testing._json_schema_to_ebnf({"type": "integer"})
    assert testing._is_grammar_accept_string(ebnf, "-12")
    assert not testing._is_grammar_accept_string(ebnf, "1.5")
    assert testing._is_grammar_accept_string(testing._regex_to_ebnf(r"a\d"), "a7")
    body = testing._regex_to_ebnf(r"a\d", with_rule_name=False)
    assert "::=" not in body.splitlines()[0]


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda c: c.compile_json_schema('{"type": "object",'), xgr.InvalidJSONError, "JSON"),
        (lambda c: c.compile_json_schema({"type": "strnig"}), xgr.InvalidJSONSchemaError, "strnig"),
        (lambda c: c.compile_json_schema({"minLength": "x", "type": "string"}), xgr.InvalidJSONSchemaError, "minLength"),
        (lambda c: c.compile_json_schema(42), TypeError, "schema"),
        (lambda c: c.compile_regex("(ab"), xgr.TokensieveError, None),
        (lambda c: c.compile_grammar("root ::= undefined_rule"), xgr.TokensieveError, "undefined_rule"),
        (lambda c: c.compile_grammar('root ::= "a'), xgr.TokensieveError, None),
        (lambda c: c.compile_structural_tag('{"type": "structural_tag", "format": {"type": "nope"}}'), xgr.InvalidStructuralTagError, "format"),
        (lambda c: c.compile_structural_tag("{"), xgr.InvalidJSONError, "JSON"),
        (lambda c: c.compile_structural_tag(3), TypeError, "structural tag"),
        (lambda c: c.compile_grammar(3), TypeError, "grammar"),
    ],
)
def test_bad_grammars_raise(tiny_info, call, exc, words):
    c = xgr.GrammarCompiler(tiny_info)
    with pytest.raises(exc, match=words):
        call(c)
    assert issubclass(xgr.TokensieveError, RuntimeError)


def test_compiler_arguments(tiny_info):
    with pytest.raises(TypeError):
        xgr.GrammarCompiler("not an info")
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(tiny_info, max_threads=0)
    for kw in ({"cache_enabled": False}, {"cache_limit_bytes": 1 << 20}):
        c = xgr.GrammarCompiler(tiny_info, **kw)
        assert accepts(c.compile_regex("a+"), "aaa")


def test_precompute_modes(tiny_info):
    """``precompute`` (a tokensieve extension) changes when masks are computed, never what
    they are: "lazy" compiles without them (a smaller grammar right after compile), and the
    matchers of the three modes give the same masks along one text."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    text = '{"a": 12, "b": "hello world"}'
    masks, sizes = {}, {}
    for mode in ("eager", "lazy", "background"):
        compiled = xgr.GrammarCompiler(tiny_info, precompute=mode, cache_enabled=False).compile_json_schema(schema)
        sizes[mode] = compiled.memory_size_bytes
        m = xgr.GrammarMatcher(compiled)
        b = xgr.allocate_token_bitmask(1, tiny_info.vocab_size)
        rows = []
        for ch in text:
            m.fill_next_token_bitmask(b)
            rows.append(b[0].tolist())
            assert m.accept_string(ch), (mode, ch)
        masks[mode] = rows
    assert masks["lazy"] == masks["eager"] and masks["background"] == masks["eager"]
    assert sizes["lazy"] < sizes["eager"], sizes
    assert masks["eager"][0] != masks["eager"][3]  # the masks change along the text
    with pytest.raises(ValueError, match='precompute must be "eager", "lazy" or "background", got "soon"'):
        xgr.GrammarCompiler(tiny_info, precompute="soon")
