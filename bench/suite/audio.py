"""Ragged audio cache + epochs (issue 2's users), stokehold vs tf.data vs torch vs the peers.

Clips of 5-180 s at 16 kHz int16 cached in memory; shuffle -> random 3 s crop ->
batch 32 -> prefetch. Memory (RSS growth of the cache against raw bytes, worker
RSS, PSS), throughput, epoch-boundary stall; each system in its own process.
The nearest thread-based peers (bench/peers/, audio_systems.peer_loader) hold the caller's
list and map torch's crop (peers.ops.random_crop), each epoch's crops stacked into batches of
32 (peers.epochs_of_stream), their threads kept across epochs as torch's persistent workers:
grain (shuffle().repeat().map(crop).to_iter_dataset(ReadOptions()): Grain's defaults, 16
threads), spdl (one pipeline over repeat_source(list), pipe(crop, concurrency=cores)),
dataloader-rs (PyDataloader(shuffle, num_workers=cores), CPython 3.13). They run once in
full runs too (throughput from that run's 3 passes), and the sweeps leave them out.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import peers  # noqa: E402  (Grain, SPDL, dataloader-rs: bench/peers/)
from common import rows, stats  # noqa: E402

W = "audio cache + epochs"
MiB = 2**20
RATE = 16000
SYSTEMS = ["stokehold", "stokehold/cache()", "tf.data/ragged", "tf.data/padded", "tf.data/generator", "torch",
           *peers.SYSTEMS]
QUICK_SYSTEMS = ["stokehold", "stokehold/cache()", "tf.data/ragged", "torch", *peers.SYSTEMS]


def make_clips(folder, n, seed=7):
    """n clips, 5-180 s uniform, int16 noise: clips.i16 (concatenated) + lengths.npy."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5 * RATE, 180 * RATE + 1, size=n)
    np.save(os.path.join(folder, "lengths.npy"), lengths)
    with open(os.path.join(folder, "clips.i16"), "wb") as f:
        for length in lengths:
            rng.integers(-2**15, 2**15, size=length, dtype=np.int16).tofile(f)
    return lengths


def child(system, folder, n, timeout, **kw):
    """Run audio_child.py (a peer under its own interpreter); its JSON dict, or {"error": ...}."""
    py, why = peers.python_for(system)
    if py is None:
        return {"error": why}
    cmd = [py, str(HERE / "audio_child.py"), system, folder, str(n)]
    for k, v in kw.items():
        if v is not None:
            cmd += [f"--{k}", str(v)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=peers.env_for(system) if system in peers.SYSTEMS else None)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        err = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {p.returncode}: {err[:300]}"}
    return json.loads(lines[-1])


def system_rows(system, results, cfg, raw):
    """Rows of one system from its child runs (medians over runs)."""
    ok = [r for r in results if "error" not in r]
    if not ok:
        missing = os.environ.get("BENCH_STOKEHOLD_MISSING") if system == "stokehold" else None
        return [rows.unavailable(W, system, cfg, missing or results[0]["error"])]
    note = ok[0].get("note") or None
    med = lambda key, scale=1.0: [r[key] * scale for r in ok if key in r]  # noqa: E731
    copies = all(r.get("copies") for r in ok)
    out = [
        rows.median_row(W, system, cfg, "cache RSS growth", med("cache_growth", 1 / MiB), "MiB",
                        note=note, params={"dataset_bytes": raw}),
        rows.median_row(W, system, cfg, "cache growth / raw bytes",
                        [r["cache_growth"] / raw for r in ok], "x"),
        rows.median_row(W, system, cfg, "peak RSS growth (main + workers)", med("peak_growth", 1 / MiB), "MiB"),
        rows.median_row(W, system, cfg, "total PSS growth (main + workers)",
                        med("pss_growth", 1 / MiB), "MiB"),
        rows.median_row(W, system, cfg, "cache build time", med("build_s"), "s",
                        note="the build alone; loading the clips is timed apart" + (
                            "" if copies else "; holds the caller's list: nothing copied, "
                            "no memory of its own (a list of arrays, one allocation each)")),
        rows.median_row(W, system, cfg, "peak growth / raw bytes",
                        [r["peak_growth"] / raw for r in ok], "x",
                        note="peak RSS (main + workers) during build + first epoch"),
    ]
    if copies:
        out.append(rows.median_row(W, system, cfg, "cache build bandwidth",
                                   [raw / 1e6 / r["build_s"] for r in ok], "MB/s",
                                   note="raw bytes / build time"))
    else:
        out.append(rows.row(W, system, cfg, "cache build bandwidth", None, "MB/s",
                            note="holds the caller's list: nothing copied"))
    out.append(rows.median_row(W, system, cfg, "clip loading (bench set-up)", med("load_s"), "s",
                               note="np.fromfile + one array per clip; not part of the build"))
    if any(r["workers"] for r in ok):
        out.append(rows.median_row(W, system, cfg, "workers RSS (sum, as top shows)",
                                   med("workers_rss", 1 / MiB), "MiB",
                                   params={"dataset_bytes": raw},
                                   note=f"{ok[0]['workers']} workers; private "
                                        f"{stats.median(med('workers_private', 1 / MiB)):.0f} MiB"))
    thr = [v for r in ok for v in r.get("throughput_runs", [])]  # 3 timed passes per run
    # No parallelism param here: the plot takes its points from the sweep (one dataset size).
    out.append(rows.median_row(W, system, cfg, "throughput (2 epochs, no step)", thr, "crops/s"))
    stall = [s * 1e3 for r in ok for s in r.get("stalls", [])]
    out.append(rows.median_row(W, system, cfg, "epoch-boundary stall", stall, "ms",
                               better="lower", note="first wait minus steady wait, floored at 0"))
    first = [s * 1e3 for r in ok for s in r.get("first_waits", [])]
    out.append(rows.median_row(W, system, cfg, "wait for an epoch's first batch", first, "ms",
                               better="lower"))
    return out


def main():
    args = rows.workload_args(__doc__).parse_args()
    n = 64 if args.quick else 400
    repeats = 1 if args.quick else 3
    timeout = 120 if args.quick else 240
    folder = tempfile.mkdtemp(dir=rows.tmp_root(), prefix="audio-")
    try:
        lengths = make_clips(folder, n)
        raw = int(lengths.sum()) * 2
        padded = n * int(lengths.max()) * 2
        cfg = f"{n} clips 5-180 s, crop 3 s, batch 32"
        out = [
            rows.row(W, "raw bytes", cfg, "raw sample bytes", raw / MiB, "MiB",
                     note=f"a padded matrix would be {padded / MiB:.0f} MiB "
                          f"({padded / raw:.2f}x; computed, not allocated)"),
        ]
        # --quick keeps one variant per system and skips the sweeps (3 min for the whole suite).
        # The memory-heavy tf.data variants run once (their throughput and stall figures still
        # come from >= 3 passes and boundaries inside that run).
        for system in (QUICK_SYSTEMS if args.quick else SYSTEMS):
            times = repeats if system in QUICK_SYSTEMS and system not in peers.SYSTEMS else 1
            results = [child(system, folder, n, timeout, epochs=4)
                       for _ in range(times)]
            out += system_rows(system, results, cfg, raw)
            print(f"audio: {system} done", file=sys.stderr)
        if not args.quick:
            out += sweeps(folder, n // 4, lengths, timeout)
            out += sizes(folder, n // 2, lengths, timeout)
        rows.write_json(args.json, out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sweeps(folder, n, lengths, timeout):
    """Throughput against parallelism on n clips (its memory is also a point of the size plot)."""
    out = []
    # stokehold: None = knobs left alone (its default point); 1, 2, -1 = parallelize(1, 2,
    # AUTOTUNE). tf.data: None = AUTOTUNE. torch: worker processes.
    runs = [("stokehold", None), ("stokehold", 1), ("stokehold", 2), ("stokehold", -1),
            ("tf.data/ragged", 1), ("tf.data/ragged", 2), ("tf.data/ragged", None),
            ("torch", 1), ("torch", 2)]
    raw = int(lengths[:n].sum()) * 2
    for system, p in runs:
        r = child(system, folder, n, timeout, parallelism=p, phases="memory,throughput")
        label = {None: "default" if system == "stokehold" else "AUTOTUNE",
                 -1: "AUTOTUNE"}.get(p, str(p))
        cfg = f"{n} clips, parallelism {label}"
        if "error" in r:
            out.append(rows.unavailable(W, system, cfg, r["error"]))
            continue
        out.append(rows.median_row(W, system, cfg, "throughput (2 epochs, no step)",
                                   r["throughput_runs"], "crops/s",
                                   params=plot_point(system, p)))
        if p is None or (system == "torch" and p == 2):
            out += size_rows(system, r, n, raw)
    return out


def plot_point(system, p):
    """params for the parallelism plot; stokehold's knobs-alone point is left off it."""
    if system == "stokehold" and p is None:
        return None
    return {"parallelism": "autotune" if p in (None, -1) else p}


def size_rows(system, r, n, raw):
    """Memory rows of one run for the memory-vs-size plot."""
    cfg = f"{n} clips (memory vs size)"
    out = [rows.row(W, system, cfg, "cache RSS growth", r["cache_growth"] / MiB, "MiB",
                    params={"dataset_bytes": raw}, note="one run per size")]
    if r["workers"]:
        out.append(rows.row(W, system, cfg, "workers RSS (sum, as top shows)",
                            r["workers_rss"] / MiB, "MiB", params={"dataset_bytes": raw},
                            note="one run per size"))
    return out


def sizes(folder, n, lengths, timeout):
    """One more point of the memory-vs-size plot."""
    out = []
    raw = int(lengths[:n].sum()) * 2
    for system in QUICK_SYSTEMS:
        r = child(system, folder, n, timeout, phases="memory")
        if "error" not in r:
            out += size_rows(system, r, n, raw)
    return out


if __name__ == "__main__":
    main()
