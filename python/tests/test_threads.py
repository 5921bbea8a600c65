"""One compiled grammar filled from several Python threads at once, the GIL released."""

import threading
import time

import numpy as np
import torch

import tokensieve as xgr
from conftest import compiler, hf_tokenizer, tokenizer_info
from test_token_by_token import SCHEMA


def run_sequence(compiled, ids, vocab_size, out, slot):
    m = xgr.GrammarMatcher(compiled)
    b = xgr.allocate_token_bitmask(1, vocab_size)
    masks = []
    for t in ids:
        m.fill_next_token_bitmask(b)
        masks.append(b.clone())
        assert m.accept_token(t)
    out[slot] = masks


def test_threads_share_one_compiled_grammar():
    model = "llama3_1"
    info = tokenizer_info(model)
    compiled = compiler(model).compile_json_schema(SCHEMA)
    texts = [
        '{"name": "A", "age": 1}',
        '{"name": "Bob", "age": 22, "tags": []}',
        '{"name": "Cy", "age": 3, "tags": ["x"]}',
        '{"name": "Dee Dee", "age": 44}',
    ]
    tok = hf_tokenizer(model)
    seqs = [tok.encode(t, add_special_tokens=False) for t in texts]
    serial = {}
    for i, ids in enumerate(seqs):
        run_sequence(compiled, ids, info.vocab_size, serial, i)
    threaded = {}
    threads = [
        threading.Thread(target=run_sequence, args=(compiled, ids, info.vocab_size, threaded, i))
        for i, ids in enumerate(seqs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(threaded) == list(range(len(seqs)))
    for i in range(len(seqs)):
        assert all(torch.equal(a, b) for a, b in zip(serial[i], threaded[i]))


def test_the_gil_is_released_during_fill():
    """Another Python thread runs *during* each (batch) fill call. With a long switch interval a
    thread holding the GIL is never preempted inside a short loop, so a counter that the
    other thread increments moves across a call only if the call released the GIL."""
    import sys

    model = "qwen3"
    info = tokenizer_info(model)
    compiled = compiler(model).compile_builtin_json_grammar()
    # A batch fill of 1,024 rows: milliseconds, long enough for the other thread to wake
    # even on a loaded machine (64 rows, a fraction of a millisecond once the masks are
    # warm, let it run during only 7 of 10 fills under load). Holding the GIL, it would
    # run during none, or one at a switch between calls.
    ms = []
    for p in ['{"key": [1, 2, {"a": "', '{"', "[1, 2", '{"a": tr'] * 256:
        m = xgr.GrammarMatcher(compiled)
        assert m.accept_string(p)
        ms.append(m)
    b = xgr.allocate_token_bitmask(len(ms), info.vocab_size)
    batch = xgr.BatchGrammarMatcher(1)
    batch.batch_fill_next_token_bitmask(ms, b)  # warm
    stop = threading.Event()
    ticks = [0]

    def python_loop():
        while not stop.is_set():
            ticks[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.02)
    t = threading.Thread(target=python_loop)
    t.start()
    try:
        moved = 0
        for _ in range(10):
            before = ticks[0]
            batch.batch_fill_next_token_bitmask(ms, b)
            moved += ticks[0] != before
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert moved >= 8, f"the other thread ran during only {moved} of 10 fills"


def fill_steps(matchers, bitmask, batch, steps):
    for _ in range(steps):
        batch.batch_fill_next_token_bitmask(matchers, bitmask)


def test_batch_fill_two_threads_vs_one(capsys):
    """The batch fill gives the same rows on 1 and 2 threads; the time ratio is printed
    (not asserted: the test machine is shared)."""
    model = "qwen3"
    info = tokenizer_info(model)
    compiled = compiler(model).compile_json_schema(SCHEMA)
    prefixes = ['{"name": "', '{"name": "x", "age": ', '{"name": "y", "age": 5, "tags": ["', "{"] * 2
    matchers = []
    for p in prefixes * 4:
        m = xgr.GrammarMatcher(compiled)
        assert m.accept_string(p)
        matchers.append(m)
    b1 = xgr.allocate_token_bitmask(len(matchers), info.vocab_size)
    b2 = xgr.allocate_token_bitmask(len(matchers), info.vocab_size)
    one, two = xgr.BatchGrammarMatcher(1), xgr.BatchGrammarMatcher(2)
    one.batch_fill_next_token_bitmask(matchers, b1)
    two.batch_fill_next_token_bitmask(matchers, b2)
    assert torch.equal(b1, b2)
    for i, m in enumerate(matchers):
        row = xgr.allocate_token_bitmask(1, info.vocab_size)
        m.fill_next_token_bitmask(row)
        assert torch.equal(row[0], b1[i])
    # Rows given by indices land in those rows only.
    b3 = torch.zeros(len(matchers) + 2, b1.shape[1], dtype=torch.int32)
    two.batch_fill_next_token_bitmask(matchers[:2], b3, indices=[3, 0])
    assert torch.equal(b3[3], b1[0]) and torch.equal(b3[0], b1[1]) and not b3[1].any()
    timings = {}
    for name, batch in (("1 thread", one), ("2 threads", two), ("1 thread again", one)):
        start = time.perf_counter()
        fill_steps(matchers, b1, batch, 20)
        timings[name] = time.perf_counter() - start
    t1 = min(timings["1 thread"], timings["1 thread again"])
    # Two Python threads, each filling its half of the batch with its own matchers.
    halves = [matchers[: len(matchers) // 2], matchers[len(matchers) // 2 :]]
    rows = [xgr.allocate_token_bitmask(len(h), info.vocab_size) for h in halves]

    def half(i):
        for _ in range(20):
            for j, mm in enumerate(halves[i]):
                mm.fill_next_token_bitmask(rows[i], j)

    start = time.perf_counter()
    half(0)
    half(1)
    py1 = time.perf_counter() - start
    ths = [threading.Thread(target=half, args=(i,)) for i in range(2)]
    start = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    py2 = time.perf_counter() - start
    with capsys.disabled():
        print(
            f"per-matcher fills from Python: 1 thread {py1 * 1e3:.1f} ms, 2 Python threads "
            f"{py2 * 1e3:.1f} ms, ratio {py1 / py2:.2f}"
        )
        print(
            f"\nbatch fill of {len(matchers)} Qwen3 matchers x 20 steps: 1 thread {t1 * 1e3:.1f} ms, "
            f"2 threads {timings['2 threads'] * 1e3:.1f} ms, ratio {t1 / timings['2 threads']:.2f} "
            "(measured on a shared machine)"
        )


def test_two_threads_at_once_fill_the_masks_of_one_thread():
    """Two Python threads fill the matchers of one compiled grammar at the same time (a
    barrier starts them together, each step waits for the other thread); every mask equals
    the one a single thread fills."""
    model = "qwen3"
    info = tokenizer_info(model)
    compiled = compiler(model).compile_json_schema(SCHEMA)
    tok = hf_tokenizer(model)
    texts = ['{"name": "Eve", "age": 5, "tags": ["p", "q"]}', '{"name": "Zed", "age": 61}']
    seqs = [tok.encode(t, add_special_tokens=False) for t in texts]
    serial = {}
    for i, ids in enumerate(seqs):
        run_sequence(compiled, ids, info.vocab_size, serial, i)
    barrier = threading.Barrier(2)
    steps = max(len(s) for s in seqs)
    threaded, errors = {}, []

    def worker(slot):
        try:
            m = xgr.GrammarMatcher(compiled)
            b = xgr.allocate_token_bitmask(1, info.vocab_size)
            masks = []
            for k in range(steps):
                barrier.wait()
                if k < len(seqs[slot]):
                    m.fill_next_token_bitmask(b)
                    masks.append(b.clone())
                    assert m.accept_token(seqs[slot][k])
            threaded[slot] = masks
        except Exception as e:  # reported by the main thread
            errors.append(e)
            barrier.abort()

    ths = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert not errors, errors
    for i in range(2):
        assert len(threaded[i]) == len(seqs[i])
        assert all(torch.equal(a, b) for a, b in zip(serial[i], threaded[i]))


def test_threads_fill_their_own_rows_of_one_shared_bitmask():
    """Four Python threads, each with its own matcher of one compiled grammar, fill their own
    row of one shared torch bitmask at the same time (the serving pattern: one batch
    bitmask, a row per request); every row equals the mask a single thread fills."""
    model = "llama3_1"
    info = tokenizer_info(model)
    compiled = compiler(model).compile_json_schema(SCHEMA)
    tok = hf_tokenizer(model)
    texts = [
        '{"name": "A", "age": 1}',
        '{"name": "Bob", "age": 22, "tags": []}',
        '{"name": "Cy", "age": 3, "tags": ["x"]}',
        '{"name": "Dee Dee", "age": 44}',
    ]
    seqs = [tok.encode(t, add_special_tokens=False) for t in texts]
    serial = {}
    for i, ids in enumerate(seqs):
        run_sequence(compiled, ids, info.vocab_size, serial, i)
    shared = xgr.allocate_token_bitmask(len(seqs), info.vocab_size)
    barrier = threading.Barrier(len(seqs))
    steps = max(len(s) for s in seqs)
    threaded, errors = {i: [] for i in range(len(seqs))}, []

    def worker(slot):
        try:
            m = xgr.GrammarMatcher(compiled)
            for k in range(steps):
                barrier.wait()
                if k < len(seqs[slot]):
                    m.fill_next_token_bitmask(shared, slot)
                    threaded[slot].append(shared[slot].clone())
                    assert m.accept_token(seqs[slot][k])
        except Exception as e:  # reported by the main thread
            errors.append(e)
            barrier.abort()

    ths = [threading.Thread(target=worker, args=(i,)) for i in range(len(seqs))]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert not errors, errors
    for i in range(len(seqs)):
        assert len(threaded[i]) == len(seqs[i])
        assert all(torch.equal(a[0], b) for a, b in zip(serial[i], threaded[i]))


def test_batch_fill_of_several_schemas_on_1_2_3_threads():
    """A batch as a serving engine has it: matchers of several schemas at different states
    (some completed; a terminated matcher's fill raises, as XGrammar's does, so none is
    terminated here), rows given out of order. Filled by 1, 2 and 3 threads (the caller and
    its helpers), and as a batch of one, every row is the matcher's own mask; rows named by
    no matcher are untouched."""
    model = "qwen3"
    info = tokenizer_info(model)
    c = compiler(model)
    schemas = [
        SCHEMA,
        {"type": "array", "items": {"type": "integer"}},
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    ]
    prefixes = [
        ["", '{"name": "', '{"name": "x", "age": 4', '{"name": "y", "age": 5, "tags": ["a"]}'],
        ["", "[1, ", "[1, 22", "[]"],
        ["", '{"ok": ', '{"ok": tr', '{"ok": false}'],
    ]
    matchers = []
    for k in range(60):
        s = k % 3
        m = xgr.GrammarMatcher(c.compile_json_schema(schemas[s]))
        p = prefixes[s][(k // 3) % 4]
        assert p == "" or m.accept_string(p)
        if p.endswith(("}", "]")):
            assert m.is_completed() and not m.is_terminated()
        matchers.append(m)
    want = []
    for m in matchers:
        row = xgr.allocate_token_bitmask(1, info.vocab_size)
        m.fill_next_token_bitmask(row)
        want.append(row[0].clone())
    rows = [len(matchers) - k for k in range(len(matchers))]
    for threads in (1, 2, 3):
        batch = xgr.BatchGrammarMatcher(threads)
        assert batch._pool.threads == threads
        b = torch.full((len(matchers) + 1, want[0].shape[0]), 7, dtype=torch.int32)
        for _ in range(2):  # cold, then warm
            batch.batch_fill_next_token_bitmask(matchers, b, indices=rows)
            for k, r in enumerate(rows):
                assert torch.equal(b[r], want[k]), (threads, k)
            assert (b[0] == 7).all()
        one = torch.zeros(1, want[0].shape[0], dtype=torch.int32)
        batch.batch_fill_next_token_bitmask(matchers[4:5], one)
        assert torch.equal(one[0], want[4])


def test_two_threads_fill_at_once_while_one_fill_is_cold():
    """Two Python threads filling at the same time overlap: while one thread is inside the
    cold first fill of a fresh grammar (``precompute="lazy"``, its own compiler: the fill
    computes its masks, milliseconds), the other thread completes warm fills of its own
    matcher. With a long switch interval the first thread, holding the GIL, would never
    be preempted inside the call, so the other thread's count moves across a cold fill
    only because the fill released the GIL (holding it, at most once in the 50 ms switch
    interval: once over the ten fills of about 2.5 ms). Under a load of 11 on 2 cores the
    other thread woke in time for 6 of 10; 4 are asked for."""
    import sys

    model = "qwen3"
    info = tokenizer_info(model)
    warm = xgr.GrammarMatcher(compiler(model).compile_json_schema(SCHEMA))
    warm_row = xgr.allocate_token_bitmask(1, info.vocab_size)
    warm.fill_next_token_bitmask(warm_row)
    cold_row = xgr.allocate_token_bitmask(1, info.vocab_size)
    # Ten grammars, each compiled by its own compiler (no mask of one is cached for
    # another); letters and digits of every script: the first fill walks most of the
    # vocabulary, milliseconds.
    regexes = [rf"[\p{{L}}\p{{N}} ,.]{{{k + 2},80}}" for k in range(10)]
    colds = [
        xgr.GrammarMatcher(
            xgr.GrammarCompiler(info, precompute="lazy", cache_enabled=False).compile_regex(r)
        )
        for r in regexes
    ]
    stop = threading.Event()
    fills = [0]

    def warm_fills():
        while not stop.is_set():
            warm.fill_next_token_bitmask(warm_row)
            fills[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    t = threading.Thread(target=warm_fills)
    t.start()
    try:
        while fills[0] == 0:  # the other thread is running
            time.sleep(0.001)
        moved, cold_rows = 0, []
        for m in colds:
            before = fills[0]
            m.fill_next_token_bitmask(cold_row)
            moved += fills[0] != before
            cold_rows.append(cold_row.clone())
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert moved >= 4, f"the other thread filled during only {moved} of 10 cold fills"
    # Each cold mask is the one an eagerly compiled grammar of the same regex gives.
    for r, row in zip(regexes, cold_rows):
        xgr.GrammarMatcher(compiler(model).compile_regex(r)).fill_next_token_bitmask(warm_row)
        assert torch.equal(warm_row, row), r
