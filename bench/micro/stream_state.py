"""Per-element cost of stream ops that carry a state: a shuffle buffer, and prefetch, whose thread
keeps the input's state after every element it hands over (so a checkpoint is exact however far
ahead it runs). Not part of `make bench` (no peer runs these rows); an A/B between two builds:

    python bench/micro/stream_state.py            (with stokehold importable: make test's .venv)

Prints microseconds per element (per record for the batched row; median of 3 passes after one),
the size of a shuffle buffer's state, and the time to restore it late in an epoch.
"""

import itertools
import json
import statistics
import time

import stokehold as sh

N = 200_000


def per_element(make, count=lambda e: 1):
    ds = make()
    figs = []
    for k in range(4):
        t = time.perf_counter()
        n = sum(count(e) for e in ds)
        if k:
            figs.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(figs)


def next_many_cost(make, n):
    figs = []
    for k in range(4):
        it, m = iter(make()), 0
        t = time.perf_counter()
        while got := it.next_many(n):
            m += len(got)
        if k:
            figs.append((time.perf_counter() - t) / m * 1e6)
    return statistics.median(figs)


def main():
    rng = lambda: sh.Dataset.range(N)  # noqa: E731
    rows = [
        ("range", lambda: per_element(rng)),
        ("range.prefetch(AUTOTUNE)", lambda: per_element(lambda: rng().prefetch(sh.AUTOTUNE))),
        ("range.prefetch(2)", lambda: per_element(lambda: rng().prefetch(2))),
        ("range.map(f).prefetch(AUTOTUNE)",
         lambda: per_element(lambda: rng().map(lambda e: e).prefetch(sh.AUTOTUNE))),
        ("range.shuffle(10000)", lambda: per_element(lambda: rng().shuffle(10000, seed=1))),
        ("range.shuffle(10000).prefetch(64)",
         lambda: per_element(lambda: rng().shuffle(10000, seed=1).prefetch(64))),
        ("range.shuffle(10000).batch(32).prefetch(8), per record",
         lambda: per_element(lambda: rng().shuffle(10000, seed=1).batch(32).prefetch(8),
                             lambda b: len(b["x"]))),
        ("range.shuffle(10000) next_many(1)",
         lambda: next_many_cost(lambda: rng().shuffle(10000, seed=1), 1)),
    ]
    for label, run in rows:
        print(f"{label:58} {run():8.2f} us")
    ds = sh.Dataset.range(4_000_000).shuffle(10000, seed=1)
    it = iter(ds)
    for _ in itertools.islice(it, 3_000_000):
        pass
    state = it.get_state()
    t = time.perf_counter()
    iter(ds).set_state(state)
    print(f"{'shuffle(10000): state after 3M elements':58} {len(json.dumps(state)):8d} bytes, "
          f"restored in {(time.perf_counter() - t) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
