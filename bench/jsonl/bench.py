"""bench/jsonl: a JSONL epoch, sequential and shuffled, rows/s, and the first open of the file;
stokehold.read_jsonl vs HF datasets, side by side (issue 45).

    python bench/jsonl/bench.py [--quick] --json OUT      (from the repository root)

Data (seeded, under $BENCH_TMPDIR): one JSONL file of rows {"id": int, "label": int, "score":
float, "text": 40-400 ASCII characters}. Full: 500,000 lines (~130 MB); --quick: 20,000. Each
system runs in its own process: the first open 3 times (each from scratch), then one warm-up
epoch (none in --quick) and 3 timed epochs, batches of 256 of all four fields; the rows are the
medians. Every epoch must deliver every line once.
* stokehold: read_jsonl(path, fields={id: int64, label: int64, score: float32, text: bytes})
  -> batch(256) -> prefetch(2); shuffled: shuffle(seed) (the global permutation) before batch.
  stokehold/parallelize: parallelize(AUTOTUNE) before prefetch. First open: read_jsonl + len
  with no line index yet (it writes path.idx: deleted before each).
* datasets: load_dataset("json", data_files=path, split="train") into a new cache folder (the
  first open: its Arrow conversion), with_format("numpy").iter(256); shuffled: .shuffle(seed).
* datasets/streaming: load_dataset(..., streaming=True).iter(256); shuffled: .shuffle(seed,
  buffer_size=1000) (a buffer, not a global shuffle: the note says so).
"""

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import children, rows  # noqa: E402

W = "JSONL epoch"
BATCH = 256
RUNS = 3
FIELDS = {"id": "int64", "label": "int64", "score": "float32", "text": "bytes"}


def generate(path, n):
    import numpy as np

    rng = np.random.default_rng(20261207)
    pool = rng.integers(97, 123, 1 << 16, dtype=np.uint8).tobytes().decode("ascii")
    lens, starts = rng.integers(40, 401, n), rng.integers(0, len(pool) - 400, n)
    labels, scores = rng.integers(0, 1000, n), rng.random(n)
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "label": int(labels[i]), "score": float(scores[i]),
                                "text": pool[starts[i]:starts[i] + lens[i]]}) + "\n")


def opened(open_once):
    """Seconds of each of RUNS first opens (``open_once`` starts from scratch each time)."""
    secs = []
    for _ in range(RUNS):
        t = time.perf_counter()
        open_once()
        secs.append(time.perf_counter() - t)
    return secs


def child_stokehold(system, a):
    import stokehold as sh

    path = a["path"]

    def open_once():
        idx = path + ".idx"
        if os.path.exists(idx):
            os.remove(idx)
        return len(sh.read_jsonl(path, fields=FIELDS))
    first = opened(open_once) if system == "stokehold" else None
    ds = sh.read_jsonl(path, fields=FIELDS)
    if a["shuffled"]:
        ds = ds.shuffle(seed=0)
    ds = ds.batch(BATCH)
    if system == "stokehold/parallelize":
        ds = ds.parallelize(sh.AUTOTUNE)
    ds = ds.prefetch(2)
    return first, lambda e: (len(b["id"]) for b in ds.iter(epoch=e)), None


def child_datasets(system, a):
    import datasets

    datasets.disable_progress_bars()
    path, note = a["path"], None

    def load(streaming=False):
        cache = tempfile.mkdtemp(prefix="hf-", dir=a["tmp"])
        return datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache,
                                     streaming=streaming)
    if system == "datasets":
        first = opened(lambda: len(load()))
        ds = load()

        def run(e):
            d = ds.shuffle(seed=e) if a["shuffled"] else ds
            return (len(b["id"]) for b in d.with_format("numpy").iter(batch_size=BATCH))
    else:
        first = None
        ds = load(streaming=True)
        if a["shuffled"]:
            note = "shuffled = a 1000-row buffer, not a global shuffle"

        def run(e):
            d = ds.shuffle(seed=e, buffer_size=1000) if a["shuffled"] else ds
            return (len(b["id"]) for b in d.iter(batch_size=BATCH))
    return first, run, note


def run_system(system, a):
    first, make, note = (child_datasets if system.startswith("datasets") else child_stokehold)(
        system, a)
    secs, _, items = children.timed(make, RUNS, a["warmup"])
    if any(k != a["n"] for k in items):
        raise SystemExit(f"{system}: epochs delivered {items} rows, expected {a['n']}")
    out = {"runs": [k / s for k, s in zip(items, secs)]}
    if first is not None and not a["shuffled"]:
        out["first"] = first
    if note:
        out["note"] = note
    return out


def main():
    if children.is_child():
        children.child_main(run_system)
        return
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    n = 20_000 if args.quick else 500_000
    tmp = tempfile.mkdtemp(prefix="jsonl-bench-", dir=rows.tmp_root())
    out = []
    try:
        path = os.path.join(tmp, "train.jsonl")
        t = time.perf_counter()
        generate(path, n)
        print(f"generated {n} lines, {os.path.getsize(path) / 1e6:.0f} MB in "
              f"{time.perf_counter() - t:.0f} s", file=sys.stderr)
        for shuffled in (False, True):
            kind = "shuffled" if shuffled else "sequential"
            config = f"{kind}, {n} lines, 4 fields, batch {BATCH}"
            a = {"path": path, "n": n, "shuffled": shuffled, "tmp": tmp,
                 "warmup": 0 if args.quick else 1}
            for system in ("stokehold", "stokehold/parallelize", "datasets", "datasets/streaming"):
                got = children.run(__file__, system, a, timeout=600)
                out += children.rows_of(W, system, config, got,
                                        [("throughput", "runs", "rows/s", "higher")])
                if "first" in got:
                    out += children.rows_of(
                        W, system, f"first open (index / Arrow conversion), {n} lines", got,
                        [("time", "first", "s", "lower")])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows.write_json(args.json, out)
    rows.print_ratios([r for r in out if r["metric"] == "throughput"], "issue 45, JSONL", None)


if __name__ == "__main__":
    main()
