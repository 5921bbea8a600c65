"""Issue 27, item 6: ``get_model_structural_tag(reasoning=...)`` takes XGrammar's values and
gives XGrammar's language (checked against xgrammar 0.2.9 for qwen_3): "enabled" (the
default, also True) starts INSIDE the reasoning block the prompt opened, "auto" makes a
complete block optional, "disabled"/False has none."""

import json

import pytest

import tokensieve as xgr
import tokensieve.tools as tools
from conftest import compiler

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
CALL = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'


def accepts(reasoning, text):
    kwargs = {} if reasoning is None else {"reasoning": reasoning}
    tag = tools.get_model_structural_tag("qwen_3", tools=TOOLS, **kwargs)
    m = xgr.GrammarMatcher(compiler("qwen3").compile_structural_tag(json.dumps(tag)))
    return m.accept_string(text) and m.is_completed()


@pytest.mark.parametrize(
    "reasoning, text, expected",
    [
        # xgrammar: enabled accepts "ok</think>\n\n<tool_call>…", rejects a leading <think>.
        (None, "ok</think>\n\n" + CALL, True),
        (None, "<think>ok</think>\n\n" + CALL, False),
        ("enabled", "ok</think>\n\n" + CALL, True),
        (True, "ok</think>\n\n" + CALL, True),
        (True, "<think>ok</think>\n\n" + CALL, False),
        ("auto", "<think>ok</think>\n\n" + CALL, True),
        ("auto", CALL, True),
        ("auto", "ok</think>\n\n" + CALL, False),
        ("disabled", CALL, True),
        (False, "<think>ok</think>\n\n" + CALL, False),
    ],
)
def test_reasoning_modes_match_xgrammar(reasoning, text, expected):
    assert accepts(reasoning, text) is expected


def test_bad_reasoning_value():
    with pytest.raises(ValueError, match="enabled"):
        tools.get_model_structural_tag("qwen_3", tools=TOOLS, reasoning="sometimes")
