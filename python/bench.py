"""Mask time per step through Python: tokensieve's binding, and XGrammar's package side by
side when it is installed.

    python bench.py [--model llama3_1|qwen3] [--steps N]

For each schema, a JSON text valid for it is tokenised and replayed: each step fills the
bitmask (timed) and accepts the next token. Prints the mean and median fill time per step,
and, for tokensieve, the per-call overhead of the binding (a fill after termination, which
only clears the row: the cost of crossing into Rust and checking the buffer). Compare with
the Rust figures of `cargo bench --bench json_schema` for the engine's own time. Timings on a
shared machine are noisy: read the ratios, not the absolute numbers.
"""

import argparse
import statistics
import time
from pathlib import Path

import transformers

import tokensieve

SCHEMAS = {
    "person": (
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
        },
        '{"name": "Ada Lovelace", "age": 36}',
    ),
    "order": (
        {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                        "required": ["sku", "qty"],
                    },
                },
                "paid": {"type": "boolean"},
            },
            "required": ["id", "items", "paid"],
        },
        '{"id": "ABC-1234", "items": [{"sku": "x-1", "qty": 2}, {"sku": "y-22", "qty": 10}], "paid": true}',
    ),
}


def run(mod, tok, schema, text, repeat):
    info = mod.TokenizerInfo.from_huggingface(tok)
    compiled = mod.GrammarCompiler(info).compile_json_schema(schema)
    ids = tok.encode(text, add_special_tokens=False)
    bitmask = mod.allocate_token_bitmask(1, info.vocab_size)
    times = []
    for _ in range(repeat):
        m = mod.GrammarMatcher(compiled)
        for t in ids:
            start = time.perf_counter_ns()
            m.fill_next_token_bitmask(bitmask)
            times.append(time.perf_counter_ns() - start)
            assert m.accept_token(t)
    return times, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama3_1")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    folder = Path(__file__).resolve().parents[2] / "shared" / "tokenizers" / args.model
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    engines = [("tokensieve", tokensieve)]
    try:
        import xgrammar

        engines.append(("xgrammar", xgrammar))
    except ImportError:
        print("(xgrammar is not installed: tokensieve only)")
    print(f"{'schema':<8} {'engine':<11} {'mean us':>9} {'p50 us':>8} {'steps':>6}")
    for name, (schema, text) in SCHEMAS.items():
        for ename, mod in engines:
            times, _ = run(mod, tok, schema, text, args.repeat)
            print(
                f"{name:<8} {ename:<11} {statistics.mean(times) / 1e3:>9.1f} "
                f"{statistics.median(times) / 1e3:>8.1f} {len(times):>6}"
            )
    # Binding overhead: fills of a terminated matcher only clear the row in Rust.
    info = tokensieve.TokenizerInfo.from_huggingface(tok)
    m = tokensieve.GrammarMatcher(tokensieve.GrammarCompiler(info).compile_regex("a"))
    assert m.accept_string("a") and m.accept_token(info.stop_token_ids[0])
    small = tokensieve.allocate_token_bitmask(1, info.vocab_size)
    n = 20000
    start = time.perf_counter_ns()
    for _ in range(n):
        m.fill_next_token_bitmask(small)
    per = (time.perf_counter_ns() - start) / n / 1e3
    print(f"binding call + clearing a {info.vocab_size}-bit row: {per:.2f} us per call")


if __name__ == "__main__":
    main()
