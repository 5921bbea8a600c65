"""Tool calling from Python: OpenAI tools, tool_choice, a family's structural tag (also as
XGrammar's get_model_structural_tag), parse and the streaming parser."""

import json

import pytest

import tokensieve as xgr
from tokensieve import tools as ts_tools
from conftest import compiler, hf_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]

OUTPUT = (
    'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>'
)


def test_parse_returns_openai_tool_calls():
    fmt = ts_tools.ToolCallFormat("hermes", TOOLS)
    assert fmt.name == "hermes" and fmt.tool_names == ["get_weather", "get_time"]
    out = fmt.parse(OUTPUT)
    assert out["content"] == "Checking."
    assert out["errors"] == []
    (call,) = out["tool_calls"]
    assert call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "days": 2}
    bad = fmt.parse('<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>')
    assert bad["tool_calls"] == [] and len(bad["errors"]) == 1 and "nope" in bad["errors"][0]["error"]


def test_streaming_parser_gives_the_same_calls():
    fmt = ts_tools.ToolCallFormat("hermes", TOOLS)
    p = fmt.streaming_parser()
    events = []
    for i in range(0, len(OUTPUT), 5):
        events += p.push(OUTPUT[i : i + 5])
    events += p.finish()
    assert p.text == OUTPUT
    kinds = [e["type"] for e in events]
    assert "tool_call_start" in kinds and kinds.count("tool_call_end") == 1
    args = "".join(e["delta"] for e in events if e["type"] == "tool_call_arguments")
    assert json.loads(args) == {"city": "Paris", "days": 2}
    end = next(e for e in events if e["type"] == "tool_call_end")
    # The same call; the generated ids differ between two parses.
    parsed = fmt.parse(OUTPUT)["tool_calls"][0]
    assert end["tool_call"]["id"].startswith("call_") and parsed["id"].startswith("call_")
    assert {**end["tool_call"], "id": None} == {**parsed, "id": None}
    content = "".join(e["text"] for e in events if e["type"] == "content")
    assert content.strip() == "Checking."


def test_structural_tag_constrains_and_round_trips():
    fmt = ts_tools.ToolCallFormat("hermes", TOOLS)
    compiled = compiler("qwen3").compile_structural_tag(fmt.structural_tag("required"))
    tok = hf_tokenizer("qwen3")
    m = xgr.GrammarMatcher(compiled)
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    for t in tok.encode(text, add_special_tokens=False):
        assert m.accept_token(t)
    assert m.is_completed()
    m2 = xgr.GrammarMatcher(compiled)
    assert not m2.accept_string('<tool_call>\n{"name": "get_weather", "arguments": {"town": "Oslo"}}')
    named = fmt.structural_tag({"type": "function", "function": {"name": "get_time"}})
    m3 = xgr.GrammarMatcher(compiler("qwen3").compile_structural_tag(named))
    assert not m3.accept_string('<tool_call>\n{"name": "get_weather"')
    with pytest.raises(ValueError, match="no tool named"):
        fmt.structural_tag({"type": "function", "function": {"name": "missing"}})
    with pytest.raises(ValueError, match="tool_choice"):
        fmt.structural_tag("sometimes")


def test_get_model_structural_tag_under_xgrammar_names():
    for model in sorted(ts_tools.MODEL_FORMATS):
        tag = xgr.get_model_structural_tag(model, TOOLS, tool_choice="auto", reasoning=False)
        assert tag["type"] == "structural_tag", model
    tag = xgr.get_model_structural_tag("qwen_3", TOOLS, tool_choice="required", reasoning=False)
    m = xgr.GrammarMatcher(compiler("qwen3").compile_structural_tag(tag))
    assert m.accept_string('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    with pytest.raises(ValueError, match="not covered"):
        xgr.get_model_structural_tag("no_such_model", TOOLS)


def test_get_model_structural_tag_takes_parallel_tool_calls_and_token_markers():
    # XGrammar 0.2.9's signature ends with parallel_tool_calls=True, token_markers=False.
    call = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    for parallel, accepted in [(True, True), (False, False)]:
        tag = xgr.get_model_structural_tag(
            "qwen_3", TOOLS, tool_choice="required", reasoning=False,
            parallel_tool_calls=parallel, token_markers=True,
        )
        m = xgr.GrammarMatcher(compiler("qwen3").compile_structural_tag(tag))
        assert m.accept_string(call)
        assert m.accept_string("\n" + call) is accepted, parallel


def test_bad_tools_and_names():
    with pytest.raises(ValueError, match="no tool-call format"):
        ts_tools.ToolCallFormat("nope", TOOLS)
    with pytest.raises(ValueError):
        ts_tools.ToolCallFormat("hermes", [{"type": "function", "function": {"parameters": {}}}])
    with pytest.raises(ValueError, match="invalid JSON"):
        ts_tools.ToolCallFormat("hermes", "[{")
    assert "hermes" in ts_tools.format_names() and "llama3_json" in ts_tools.format_names()
