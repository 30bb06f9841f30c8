"""Runs one peer on one workload in its own process and prints one JSON line.

    python bench/peers/child.py SYSTEM TASK 'JSON-ARGS'

SYSTEM is grain | grain/mp_prefetch | spdl | dataloader-rs; TASK is files | cpu | gather | map
(files -> an ops op -> batch: the image and audio workloads) | udf (a workload's own Python
function over its own elements, named "module:function") | udf_mem (the peak PSS of that). The
output is {"runs": [figure, ...]} (items per second, one per timed epoch or run), optionally
with "first" (seconds to the first element of each run) and a "note", or {"error": "why"}.
A separate process per peer keeps each one's threads, imports and allocator settings out of
the others' figures.
"""

import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import peers  # noqa: E402
from peers import ops  # noqa: E402


def count_items(item):
    """Items in one yielded thing: a batch's first dimension, a list's length, else 1."""
    if isinstance(item, np.ndarray) and item.ndim > 0:
        assert item.dtype != object, "a batch of arrays that did not stack"
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


def map_task(impl, base, variant, a):
    """Files matching a["pattern"] in a["dir"] -> op -> batch(a["batch"]) stacked; (figures,
    note). The op is torch's per-element work of that workload (peers.ops), on one torch
    thread per process as DataLoader's workers have."""
    paths = sorted(str(p) for p in Path(a["dir"]).glob(a["pattern"]))
    note = "one torch thread per process (as in each DataLoader worker)"
    if a["op"] == "image":
        decoder, why = ops.spdl_io_decoder(paths[0]) if base == "spdl" else ("pil", None)
        note += {"spdl.io": "; decode: spdl.io.load_image (FFmpeg), then the same v2 transforms",
                 "pil": "; decode: PIL"}[decoder]
        if why:
            note += f" (spdl.io.load_image cannot run here: {why})"
        f = ops.ImageOp(decoder, as_numpy=True, one_thread=True)
    elif a["op"] == "logmel":
        f = ops.LogMelOp(as_numpy=True, one_thread=True)
    else:
        raise SystemExit(f"unknown op {a['op']}")
    ops.one_torch_thread()
    # persistent: torch's rows keep their workers across epochs (persistent_workers)
    make = impl.mapped(paths, f, a["par"], a["batch"], np.stack, variant, persistent=True)
    return timed_epochs(make, a["epochs"]), note


def resolve(name):
    """"module:function" -> the function (a workload script's own, bench/ is on sys.path)."""
    mod, _, fn = name.partition(":")
    return getattr(importlib.import_module(mod), fn)


def udf_runs(impl, variant, a):
    """The udf workload's timing: per run (one epoch, a new iterator: start-up included) the
    seconds to the first element, then elements/s over the rest."""
    elements = resolve(a["elements"])(a["n"])
    make = impl.unbatched(elements, resolve(a["fn"]), a["par"], variant)
    rates, firsts = [], []
    for _ in range(a["runs"]):
        t0 = time.perf_counter()
        it = iter(make())
        next(it)
        first = time.perf_counter() - t0
        n = sum(count_items(x) for x in it)
        rates.append(n / (time.perf_counter() - t0 - first))
        firsts.append(first)
        del it
    return {"runs": rates, "first": firsts}


def udf_mem(impl, variant, a):
    """Peak total PSS (bytes) of this process tree over one epoch of the function."""
    from common import proc
    it = iter(impl.unbatched(resolve(a["elements"])(a["mib"]), resolve(a["fn"]), a["par"],
                             variant)())
    peak = 0
    for i, _ in enumerate(it):
        if i % 256 == 128:
            peak = max(peak, proc.tree()["total_pss"])
    return {"pss": max(peak, proc.tree()["total_pss"])}


def main():
    system, task, a = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    base, _, variant = system.partition("/")
    try:
        impl = peers.impl(base)
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
    elif task in ("udf", "udf_mem"):
        print(json.dumps((udf_runs if task == "udf" else udf_mem)(impl, variant, a)))
        return
    elif task == "map":
        figs, note = map_task(impl, base, variant, a)
        print(json.dumps({"runs": figs, "note": note}))
        return
    else:
        raise SystemExit(f"unknown task {task}")
    print(json.dumps({"runs": figs}))


if __name__ == "__main__":
    main()
