"""One system's run of the audio workload, in its own process; prints a JSON dict.

    python bench/suite/audio_child.py SYSTEM DATA_DIR N [--parallelism P] [--phases ...]

Phases: ``memory`` (build the cache, drop the caller's list, run one epoch, read
RSS/PSS), ``throughput`` (3 timed passes of 2 epochs, no step), ``stall`` (epochs
with a simulated step; the wait at each boundary). A system that cannot run
prints {"error": ...} instead of figures.
"""

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import peers  # noqa: E402
from audio_systems import SYSTEMS  # noqa: E402
from common import proc, stats  # noqa: E402


def load_clips(folder, n):
    """The first n clips as separate arrays, like a user's list loaded from wav files."""
    lengths = np.load(os.path.join(folder, "lengths.npy"))[:n]
    flat = np.fromfile(os.path.join(folder, "clips.i16"), dtype=np.int16, count=int(lengths.sum()))
    ends = np.cumsum(lengths)
    clips = [flat[e - n_:e].copy() for e, n_ in zip(ends, lengths)]
    del flat
    return clips


def run_epochs(pipe, epochs, step_s):
    return stats.timed_epochs(pipe.epochs(epochs), step_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=sorted(SYSTEMS))
    ap.add_argument("data")
    ap.add_argument("n", type=int)
    ap.add_argument("--parallelism", type=int, default=None)
    ap.add_argument("--phases", default="memory,throughput,stall")
    ap.add_argument("--epochs", type=int, default=4, help="epochs of the stall phase")
    ap.add_argument("--step", type=float, default=0.02, help="simulated step, seconds")
    a = ap.parse_args()
    phases = a.phases.split(",")
    build = SYSTEMS[a.system]
    # Import the framework before the baseline reading: its runtime is not the cache.
    if a.system.startswith("tf."):
        import tensorflow  # noqa: F401
    elif a.system == "torch":
        import torch  # noqa: F401
    elif a.system.partition("/")[0] in peers.MODULES:
        peers.impl(a.system)
    else:
        import stokehold  # noqa: F401
    gc.collect()
    base = proc.rollup()
    out = {"system": a.system, "n": a.n}
    with proc.PeakSampler(with_children=True) as peak:
        # Loading the clips is the bench's own set-up, timed apart from the cache build (it
        # used to be inside "cache build time": ~80 % of stokehold's 5.4 s was this load).
        # A builder that decodes the files itself (`from_files`) gets the folder, no list.
        t0 = time.perf_counter()
        if getattr(build, "from_files", False):
            clips = a.data
            out["raw_bytes"] = int(np.load(os.path.join(a.data, "lengths.npy"))[:a.n].sum()) * 2
        else:
            clips = load_clips(a.data, a.n)
            out["raw_bytes"] = sum(c.nbytes for c in clips)
        out["load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            pipe = build(clips, a.parallelism) if clips is not a.data else build(clips, a.n, a.parallelism)
        except Exception as e:  # a peer that cannot take the data: record its own words
            print(json.dumps({"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}))
            return
        out["build_s"] = time.perf_counter() - t0
        if not pipe.keeps_list:
            del clips
        gc.collect()
        first, _ = run_epochs(pipe, 1, 0.0)
        out["first_batch_s"] = first[0][0]
    proc.settle(0.3)
    tree = proc.tree()
    after = proc.rollup()
    out.update(
        cache_growth=after["rss"] - base["rss"],
        peak_growth=peak.peak - base["rss"],
        pss_growth=tree["total_pss"] - base["pss"],
        workers=tree["workers"],
        workers_rss=tree["workers_rss"],
        workers_private=tree["workers_private"],
        note=pipe.note,
        copies=pipe.copies,
    )
    if "throughput" in phases:
        runs = []
        for _ in range(3):
            waits, secs = run_epochs(pipe, 2, 0.0)
            runs.append(a.n * 2 / secs)
        out["throughput_runs"] = runs
    if "stall" in phases:
        waits, _ = run_epochs(pipe, a.epochs, a.step)
        stalls, steady = stats.boundary_stalls(waits)
        out["stalls"] = stalls
        out["first_waits"] = stats.first_waits(waits)
        out["steady_wait"] = steady
    print(json.dumps(out))


if __name__ == "__main__":
    main()
