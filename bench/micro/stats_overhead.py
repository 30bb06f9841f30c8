"""The cost of the stats' latency histograms and the training loop's step view (issue 51): the
same pipelines on two builds of stokehold that differ only in them (8e1c983 added them to
889629f), each built the same way into its own venv, alternated round by round, medians and
ratios.

    git worktree add /tmp/oldtree 889629f
    (cd /tmp/oldtree && python3 -m venv /tmp/oldvenv && /tmp/oldvenv/bin/pip install numpy maturin \
        && CARGO_TARGET_DIR=/tmp/old-target /tmp/oldvenv/bin/maturin build --release --out /tmp/olddist \
        && /tmp/oldvenv/bin/pip install /tmp/olddist/*.whl)
    (cd /tmp/oldtree && git checkout 8e1c983 && python3 -m venv /tmp/newvenv \
        && /tmp/newvenv/bin/pip install numpy \
        && CARGO_TARGET_DIR=/tmp/old-target /tmp/oldvenv/bin/maturin build --release --out /tmp/newdist \
        && /tmp/newvenv/bin/pip install /tmp/newdist/*.whl)
    python3 bench/micro/stats_overhead.py --with /tmp/newvenv/bin/python --without /tmp/oldvenv/bin/python

The pipelines are those of make bench where the new counters sit on the hot path: a native
stage handing single elements to a loop that takes each (every element is one next(): the step
view's two clock reads and the wait histogram), a prefetched shuffle + batch (a burst reader
recording each element), and a Python map on two threads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
import stokehold as sh
name, n = sys.argv[1], int(sys.argv[2])
x = np.arange(n, dtype=np.int64)
if name == "elements":
    ds = sh.from_arrays({"x": x}).shuffle(seed=1).prefetch(8)
elif name == "batches":
    ds = sh.from_arrays({"x": np.random.default_rng(0).random((n, 64), dtype=np.float32)}).shuffle(seed=1).batch(128).prefetch(4)
else:
    ds = sh.from_arrays({"x": x}).map(lambda e: e, num_parallel_calls=2)
sum(1 for _ in ds)  # warm: threads, pages
t = time.perf_counter()
k = sum(1 for _ in ds)
print(json.dumps({"per_s": k / (time.perf_counter() - t)}))
"""

SIZES = {"elements": 400_000, "batches": 200_000, "python_map": 100_000}


def run(python: str, name: str, n: int) -> float:
    out = subprocess.run([python, "-c", CHILD, name, str(n)], capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout)["per_s"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--with", dest="new", required=True, help="python of the build with the stats counters")
    ap.add_argument("--without", dest="old", required=True, help="python of the build before them")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    report = {}
    for name, n in SIZES.items():
        new, old = [], []
        for _ in range(a.rounds):
            old.append(run(a.old, name, n))
            new.append(run(a.new, name, n))
        m_new, m_old = statistics.median(new), statistics.median(old)
        report[name] = {"with_per_s": m_new, "without_per_s": m_old, "ratio": m_new / m_old}
        print(f"{name:<11} with {m_new:>12,.0f}/s  without {m_old:>12,.0f}/s  ratio {m_new / m_old:.3f}", flush=True)
    json.dump(report, sys.stdout)
    print()


if __name__ == "__main__":
    main()
