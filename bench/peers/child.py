"""Runs one peer on one workload in its own process and prints one JSON line.

    python bench/peers/child.py SYSTEM TASK 'JSON-ARGS'

SYSTEM is grain | grain/mp_prefetch | spdl | dataloader-rs; TASK is files | cpu | gather. The
output is {"runs": [figure, ...]} (items per second, one per timed epoch or run) or
{"error": "why"}. A separate process per peer keeps each one's threads, imports and allocator
settings out of the others' figures.
"""

import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from peers import ops  # noqa: E402

MODULES = {"grain": "peers.grain_impl", "spdl": "peers.spdl_impl",
           "dataloader-rs": "peers.dataloader_rs_impl"}


def count_items(item):
    """Items in one yielded thing: a batch's first dimension, a list's length, else 1."""
    if isinstance(item, np.ndarray) and item.ndim > 0:
        return item.shape[0]
    if isinstance(item, list):
        return len(item)
    return 1


def timed_epochs(make_epoch, epochs):
    """items/s of each epoch after one untimed warm-up epoch (page cache and threads warm)."""
    figs = []
    for e in range(epochs + 1):
        t, n = time.perf_counter(), 0
        for item in make_epoch():
            n += count_items(item)
        if e > 0:
            figs.append(n / (time.perf_counter() - t))
    return figs


def gather_runs(impl, a):
    """Consecutive runs of `per_run` batches of one epoch, rows checked, as the table bench."""
    mm = np.load(a["path"], mmap_mode="r")
    for s in range(0, mm.shape[0], 1024):  # page cache + this process's mapping, as the others
        mm[s:s + 1024].sum()
    order = ops.caption_order(a["n_captions"], a["n_images"], a["seed"])
    it = impl.gather(mm, order, a["batch"])
    figs = []
    for _ in range(a["runs"]):
        t, n = time.perf_counter(), 0
        for _ in range(a["per_run"]):
            ids, feats = next(it)
            n += len(ids)
        figs.append(n / (time.perf_counter() - t))
        ops.check_rows(np.asarray(ids), np.asarray(feats), mm.shape[1])
    return figs


def main():
    system, task, a = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    base, _, variant = system.partition("/")
    try:
        impl = importlib.import_module(MODULES[base])
    except ImportError as e:
        print(json.dumps({"error": f"{base} not importable: {e}"}))
        return
    if task == "files":
        paths = sorted(str(p) for p in Path(a["dir"]).glob("*.npy"))
        figs = timed_epochs(impl.files(paths, a["par"], variant), a["epochs"])
    elif task == "cpu":
        figs = timed_epochs(impl.cpu(a["n"], a["par"], a["work"]), a["epochs"])
    elif task == "gather":
        figs = gather_runs(impl, a)
    else:
        raise SystemExit(f"unknown task {task}")
    print(json.dumps({"runs": figs}))


if __name__ == "__main__":
    main()
