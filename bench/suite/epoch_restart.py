"""Epoch restart: 400 examples of 10 x H x W float32, batch 32, 0.15 s simulated step.

The time lost at each epoch boundary (the wait for epoch k+1's first batch,
iterator creation included, minus the steady wait per batch), for stokehold,
tf.data and torch, each in its own process. The users' case is ~5 GB
(H = W ~ 560); this shared 24 GiB machine runs it scaled down (H, W in config).

The "first batch" row is timed once per system, so one untimed child runs before them: on
this virtual machine the first process to allocate memory after a pause pays for the host
backing it again (the first batch of whichever system ran first took 200-400 ms, the same
system's next run about 20 ms: stokehold 196-223 vs 19-24 ms, grain 410 vs 47 ms).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import peers  # noqa: E402  (Grain, SPDL, dataloader-rs: bench/peers/)
from common import rows, stats  # noqa: E402

W = "epoch restart"
N, BATCH, STEP, SEED = 400, 32, 0.15, 1234


def make_array(hw):
    """(400, 10, H, W) float32, each example filled with its index (real, touched memory)."""
    arr = np.empty((N, 10, hw, hw), dtype=np.float32)
    for i in range(N):
        arr[i].fill(i)
    return arr


def build(variant, arr):
    """(make_epoch, loop) for one variant; loop(e), where set, is one loader over e epochs
    whose next() gives the next epoch."""
    if variant in peers.SYSTEMS:
        return peers.epoch_loader(variant, arr, BATCH, SEED), None
    if variant.startswith("stokehold"):
        import stokehold as sh

        # A C-contiguous array is not copied: the dataset keeps a reference to it.
        ds = sh.from_arrays({"x": arr}).shuffle(seed=SEED).batch(BATCH)
        if variant == "stokehold/parallelize":
            ds = ds.parallelize(sh.AUTOTUNE)
        ds = ds.prefetch(2)
        if variant == "stokehold/per-epoch":
            return lambda: ds, None
        return None, ds.epochs
    if variant.startswith("tf.data"):
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        ds = tf.data.Dataset.from_tensor_slices(arr).shuffle(N, seed=SEED)
        if variant == "tf.data/repeat":
            ds = ds.repeat().batch(BATCH).prefetch(tf.data.AUTOTUNE)
            return None, lambda e: ds.take(e * (-(-N // BATCH)))

        ds = ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)
        return lambda: ds, None
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Examples(Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return torch.from_numpy(arr[i])

    loader = DataLoader(Examples(), batch_size=BATCH, shuffle=True, num_workers=os.cpu_count(),
                        persistent_workers=variant == "torch", pin_memory=False,
                        generator=torch.Generator().manual_seed(SEED))
    return lambda: loader, None


def child(variant, hw, epochs):
    arr = make_array(hw)
    try:
        make_epoch, loop = build(variant, arr)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    bpe = -(-N // BATCH)
    if variant == "tf.data/repeat":  # one stream, cut into epochs by count
        waits, _ = stats.timed_stream(loop(epochs), bpe, STEP)
    elif loop is not None:
        loader = loop(epochs)
        waits, _ = stats.timed_epochs([lambda: next(loader)] * epochs, STEP)
    else:
        waits, _ = stats.timed_epochs([make_epoch] * epochs, STEP)
    stalls, steady = stats.boundary_stalls(waits)
    return {"stalls": stalls, "steady": steady, "first": waits[0][0],
            "first_waits": stats.first_waits(waits),
            "epoch_s": [sum(e) + STEP * len(e) for e in waits]}


NOTES = {
    "stokehold": "ds.epochs(n): one prefetch thread across epochs",
    "stokehold/per-epoch": "a new iterator per epoch (for ... in ds), adopting the warm thread",
    "stokehold/parallelize": "ds.epochs(n) with parallelize(AUTOTUNE) before prefetch",
    "tf.data": "a new iterator per epoch, as Keras fit does; shuffle(400) refills each epoch",
    "tf.data/repeat": "shuffle -> repeat() -> batch: one iterator; batches are cut by count",
    "torch": f"num_workers={os.cpu_count()}, persistent_workers=True, pin_memory=False",
    "torch/non-persistent": "persistent_workers=False (the default): workers restart each epoch",
}


def run_child(py, variant, hw, epochs):
    """child() of one variant in its own process: its result, or {"error": why}."""
    cmd = [py, __file__, "--child", variant, str(hw), str(epochs)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                           env=peers.env_for(variant))
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 240 s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"error": f"exit {p.returncode}: {(p.stderr.strip().splitlines() or ['?'])[-1][:300]}"}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        variant, hw, epochs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(child(variant, hw, epochs)))
        return
    args = rows.workload_args(__doc__).parse_args()
    hw = 128 if args.quick else 256
    epochs = 4  # 3 boundaries
    # stokehold/per-epoch is the idiomatic loop (a new iterator per epoch, as Keras fit makes):
    # its boundary is adopted from the previous iterator's warm thread, so it is always shown.
    variants = ["stokehold", "stokehold/per-epoch", "tf.data", "torch"]
    variants += list(peers.SYSTEMS)
    if not args.quick:
        variants += ["stokehold/parallelize", "tf.data/repeat",
                     "torch/non-persistent"]
    gb = N * 10 * hw * hw * 4 / 1e9
    cfg = f"400 x 10x{hw}x{hw} f32 ({gb:.2f} GB; users' case ~5 GB), batch 32, step 0.15 s"
    out = []
    run_child(sys.executable, variants[0], hw, epochs)  # untimed: see the module doc
    for v in variants:
        py, why = peers.python_for(v)
        if why:
            out.append(rows.unavailable(W, v, cfg, why))
            continue
        r = run_child(py, v, hw, epochs)
        if "error" in r:
            missing = os.environ.get("BENCH_STOKEHOLD_MISSING") if v.startswith("stokehold") else None
            out.append(rows.unavailable(W, v, cfg, missing or r["error"]))
            continue
        note = NOTES.get(v) or peers.NOTES[v]
        out.append(rows.median_row(W, v, cfg, "time lost per epoch boundary",
                                   [s * 1e3 for s in r["stalls"]], "ms",
                                   note=note + "; first wait minus steady wait, floored at 0"))
        out.append(rows.median_row(W, v, cfg, "wait for an epoch's first batch",
                                   [s * 1e3 for s in r["first_waits"]], "ms"))
        out.append(rows.median_row(W, v, cfg, "epoch time (13 steps of 0.15 s = 1.95 s)",
                                   r["epoch_s"][1:], "s"))
        out.append(rows.row(W, v, cfg, "first batch", r["first"] * 1e3, "ms",
                            note="once, at start-up"))
        print(f"epoch restart: {v} done", file=sys.stderr)
    rows.write_json(args.json, out)


if __name__ == "__main__":
    main()
