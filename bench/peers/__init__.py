"""The nearest competitors beside tf.data and torch: Grain, SPDL and dataloader-rs.

Each peer's code is in its own module (grain_impl, spdl_impl, dataloader_rs_impl) and runs in
its own process (child.py); the workload scripts call ``throughput_rows`` (or, for the epoch
restart, ``epoch_variant``) with a one-line hook. dataloader-rs needs CPython >= 3.13: it runs
under the interpreter named by $BENCH_PY313 (bench/run.py makes bench/.venv313 when it finds a
3.13), and where there is none its rows say so.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from common import children, rows

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SYSTEMS = ("grain", "spdl", "dataloader-rs")
# For Python-function maps: Grain's worker processes too (its docs' advice for CPU-heavy maps).
WITH_PROCESSES = ("grain", "grain/mp_prefetch", "spdl", "dataloader-rs")
MODULES = {"grain": "peers.grain_impl", "spdl": "peers.spdl_impl",
           "dataloader-rs": "peers.dataloader_rs_impl"}
VERSIONS = {"grain": "0.2.18", "spdl": "0.8.0", "dataloader-rs": "0.2.0"}
# dataloader-rs's README: "tune the allocator NumPy uses" for array samples on glibc.
DLRS_ENV = {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=67108864:"
                              "glibc.malloc.mmap_threshold=33554432"}
NOTES = {
    "grain": "MapDataset -> to_iter_dataset(ReadOptions(num_threads=P)), thread mode",
    "grain/mp_prefetch": "as grain, then .mp_prefetch(num_workers=cores): worker processes",
    "spdl": "PipelineBuilder .pipe(op, concurrency=P), build(num_threads=P), thread mode",
    "dataloader-rs": "PyDataloader(num_workers=P threads), CPython 3.13 (GIL), its README's "
                     "GLIBC_TUNABLES malloc thresholds",
}


def CPU_NOTES(n):  # noqa: N802 - a table of notes, like NOTES
    """The CPU-bound map's caveats: peers time a quarter of the elements, numpy's sin."""
    quarter = f"{n // 4} of the {n} elements per epoch (a per-element rate; whole epochs of " \
              "the slowest peer take minutes); the map is numpy's vectorised sin under the GIL"
    return {"grain": quarter, "spdl": quarter,
            "dataloader-rs": quarter + "; batch_size=64 lists (a DataLoader yields batches)"}


def python_for(system):
    """(interpreter, None) for the system, or (None, why it cannot run here)."""
    if not system.startswith("dataloader-rs"):
        return sys.executable, None
    py, why = children.python313()
    if py is not None:
        return py, None
    return None, f"dataloader-rs 0.2.0 requires Python >= 3.13: {why}"


def env_for(system):
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    if system.startswith("dataloader-rs"):
        env.update(DLRS_ENV)
    return env


def run_child(system, task, args, timeout):
    """The child's {"runs": [...]} or {"error": ...} for one peer on one task."""
    py, why = python_for(system)
    if py is None:
        return {"error": why}
    cmd = [py, str(HERE / "child.py"), system, task, json.dumps(args)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                           env=env_for(system))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1][:300]
        return {"error": f"{system} failed (exit {p.returncode}): {tail}"}
    return json.loads(lines[-1])


def throughput_rows(workload, config, metric, unit, task, args, params=None, systems=SYSTEMS,
                    extra_note=None, timeout=300):
    """One row per peer (a median of its runs, or null with the reason) for this config; and a
    "time to first element" row where the task times it."""
    out = []
    for system in systems:
        print(f"peers: {system} {task} {config}", file=sys.stderr, flush=True)
        r = run_child(system, task, args, timeout)
        if "error" in r:
            out.append(rows.unavailable(workload, system, config, r["error"]))
            continue
        note = "; ".join([NOTES[system]] + [n for n in (r.get("note"), (extra_note or {})
                                                        .get(system)) if n])
        out.append(rows.median_row(workload, system, config, metric, r["runs"], unit,
                                   params=params, note=note))
        if "first" in r:
            out.append(rows.median_row(workload, system, config, "time to first element",
                                       r["first"], "s", better="lower"))
    return out


def gather_runs(path, n_captions, n_images, per_run, runs, batch, seed, timeout=600):
    """{system: [rows/s per run] or "why not"} for the feature-table gather."""
    args = {"path": path, "n_captions": n_captions, "n_images": n_images, "per_run": per_run,
            "runs": runs, "batch": batch, "seed": seed}
    out = {}
    for system in SYSTEMS:
        print(f"peers: {system} gather", file=sys.stderr, flush=True)
        r = run_child(system, "gather", args, timeout)
        out[system] = r.get("runs") or r.get("error", "no figures")
    return out


def impl(system):
    """The module of ``system`` ("grain/mp_prefetch" -> grain_impl), imported here."""
    import importlib
    return importlib.import_module(MODULES[system.partition("/")[0]])


def epochs_of_stream(start, n, batch, collate):
    """make_epoch over one element stream, ``start()``-ed on first use and kept across epochs
    (a loader's persistent threads or workers): each epoch takes the next ``n`` elements and
    cuts them into batches of ``batch`` with ``collate`` in the consumer's thread, the last one
    short when ``n`` is not a multiple, so every epoch is exactly the data set once."""
    import itertools
    state = {}

    def epoch():
        if "it" not in state:
            state["it"] = start()
        it = state["it"]
        return (collate(list(itertools.islice(it, min(batch, n - s)))) for s in range(0, n, batch))
    return epoch


def epoch_loader(variant, arr, batch, seed):
    """make_epoch for the epoch-restart child: a new loader iterator per epoch, as users write."""
    return impl(variant).epochs(arr, batch, seed)


def mapped_loader(system, items, f, par, batch, collate):
    """make_epoch for a child that runs a peer in its own process (the audio cache): items ->
    f -> batches, the loader's threads kept across epochs where the peer can (Grain's
    repeat(), dataloader-rs's one loader), as torch's persistent workers there."""
    return impl(system).mapped(items, f, par, batch, collate, system.partition("/")[2],
                               persistent=True)
