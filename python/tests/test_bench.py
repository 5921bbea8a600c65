"""python/bench.py's binding-cost part still runs against the current API (it broke once
when fills of a terminated matcher started to raise, as XGrammar's do)."""

import importlib.util
from pathlib import Path

from conftest import hf_tokenizer, shared_path


def test_bench_crossing_runs(capsys):
    shared_path("tokenizers", "llama3_1", "tokenizer.json")
    spec = importlib.util.spec_from_file_location(
        "tokensieve_bench", Path(__file__).resolve().parents[1] / "bench.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.crossing(hf_tokenizer("llama3_1"), n=50)
    out = capsys.readouterr().out
    assert "copying a cached 128256-bit row" in out
    assert out.count("GrammarMatcher.fill_next_token_bitmask") == 3
