"""Issue 27, item 7: every parsed tool call carries an OpenAI-shaped ``id`` — the model's own
when the format writes one (Kimi K2's ``functions.NAME:IDX``), else a generated ``call_…``,
the same in the streaming events of one call."""

import json
import re

import tokensieve.tools as tools

TOOLS = json.dumps([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
HERMES = (
    '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
    '<tool_call>\n{"name": "f", "arguments": {"a": 2}}\n</tool_call>'
)


def test_parse_generates_call_ids():
    calls = tools.ToolCallFormat("hermes", TOOLS).parse(HERMES)["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"a":1}', '{"a":2}']
    ids = [c["id"] for c in calls]
    assert all(re.fullmatch(r"call_[0-9a-zA-Z]{24}", i) for i in ids), ids
    assert ids[0] != ids[1]
    assert list(calls[0]) == ["id", "type", "function"]


def test_parse_keeps_the_models_id():
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        '<|tool_call_argument_begin|>{"a":1}<|tool_call_end|><|tool_calls_section_end|>'
    )
    calls = tools.ToolCallFormat("kimi_k2", TOOLS).parse(text)["tool_calls"]
    assert [c["id"] for c in calls] == ["functions.f:0"]


def test_streaming_ids_are_stable_within_one_call():
    parser = tools.ToolCallFormat("hermes", TOOLS).streaming_parser()
    events = []
    for i in range(0, len(HERMES), 7):
        events += parser.push(HERMES[i : i + 7])
    events += parser.finish()
    starts = {e["index"]: e["id"] for e in events if e["type"] == "tool_call_start"}
    ends = {e["index"]: e["tool_call"]["id"] for e in events if e["type"] == "tool_call_end"}
    assert sorted(starts) == [0, 1]
    assert starts == ends
    assert all(re.fullmatch(r"call_[0-9a-zA-Z]{24}", i) for i in starts.values())
    assert starts[0] != starts[1]
