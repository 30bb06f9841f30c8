"""bench/parallel: lazy file map over .npy files, and CPU-bound map scaling; stokehold vs tf.data.

Run from the repository root:
    /work/venv-bench/bin/python bench/parallel/bench.py [--quick] --json OUT

stokehold side: the Rust pipeline in bench/parallel/runner (built here in release mode on first
use), so the figures measure the engine, not the bindings:
    list_files(shuffle) -> map(load .npy) -> padded_batch(64) -> parallelize(P) -> prefetch(2)
tf.data side, in the same run, as its docs recommend:
    list_files(shuffle) -> map(read_file + decode_raw, num_parallel_calls=P) -> padded_batch(64)
    -> prefetch(AUTOTUNE)
P = 1, 2 and AUTOTUNE. CPU-bound: range(N) -> map(sum of W sin()), P = 1, 2, 4, AUTOTUNE; each
system uses its own native kernels for the same math (tf.sin is vectorised; ours is scalar libm).
The peers (bench/peers/) run a Python function (numpy's vectorised sin); `stokehold/python` runs
that same function as a stokehold thread map, the like-for-like row beside them.
Contended (issue 17: AUTOTUNE under load): the lazy file map again, P = 1, 2, 4 and AUTOTUNE
in turns, while the bench runs one CPU-spinning process per core beside it; the AUTOTUNE row's
note gives its fraction of the best fixed setting (goal >= 90%), tf.data's AUTOTUNE beside it.

Each figure is the median of 3 timed epochs after one warm-up epoch (page cache warm for both);
a contended one, of 24 (3 rounds of 8 epochs: beside the spinners one setting's epochs ranged
from 13k to 72k files/s, and P=2's median over 12-24 epochs from 37k to 49k across seven runs
of this part alone; a run of 8 epochs, about a second, is still far shorter than a training run,
so AUTOTUNE's first steps weigh more here than they would there).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import peers  # noqa: E402  (Grain, SPDL, dataloader-rs: bench/peers/)
from common import rows  # noqa: E402
from peers import ops  # noqa: E402

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "runner" / "target" / "release" / "par-bench-runner"
FILES_WL = "lazy .npy file map -> padded_batch(64)"
CONTENDED_WL = "lazy .npy file map, a competing CPU load"
CPU_WL = "CPU-bound native map"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def build_runner():
    env = dict(os.environ, CARGO_TARGET_DIR=str(HERE / "runner" / "target"))
    t = time.time()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=HERE / "runner", env=env, check=True)
    log(f"runner built in {time.time() - t:.0f} s")


def make_files(root, n):
    import numpy as np
    d = Path(tempfile.mkdtemp(prefix="par-npy-", dir=root))
    rng = np.random.default_rng(0)
    for i in range(n):
        a = rng.standard_normal(int(rng.integers(2000, 20001)), dtype=np.float32)
        np.save(d / f"f{i:05d}.npy", a)
    hdr = (d / "f00000.npy").read_bytes()[:10]
    assert int.from_bytes(hdr[8:10], "little") + 10 == 128, "tf.data side assumes 128-byte headers"
    return d


def run_stokehold(args, epochs):
    out = subprocess.run([str(RUNNER), *map(str, args), str(epochs)] if args[0] == "files"
                         else [str(RUNNER), *map(str, args[:3]), str(epochs), str(args[3])],
                         capture_output=True, text=True, check=True)
    figs = [json.loads(line)["per_s"] for line in out.stdout.splitlines() if line.startswith("{")]
    return figs, out.stderr.strip()


def tf_epochs(make, epochs, count):
    import tensorflow as tf  # noqa: F401
    ds = make()
    figs = []
    for e in range(epochs + 1):
        t = time.perf_counter()
        n = 0
        for b in ds:
            n += count(b)
        if e > 0:
            figs.append(n / (time.perf_counter() - t))
    return figs


def tf_files(d, par):
    import tensorflow as tf

    def load(p):
        raw = tf.io.read_file(p)
        return tf.io.decode_raw(tf.strings.substr(raw, 128, -1), tf.float32)

    def make():
        ds = tf.data.Dataset.list_files(str(d / "*.npy"), shuffle=True, seed=1)
        return ds.map(load, num_parallel_calls=par).padded_batch(64).prefetch(tf.data.AUTOTUNE)
    return make


def tf_cpu(n, par, work):
    import tensorflow as tf

    def f(x):
        return tf.reduce_sum(tf.sin(tf.range(work, dtype=tf.float32) * 1e-3 + tf.cast(x, tf.float32)))

    return lambda: tf.data.Dataset.range(n).map(f, num_parallel_calls=par)


def PY_NOTE(n):  # noqa: N802 - a note, like peers.CPU_NOTES
    return (f"the peers' Python function (numpy's vectorised sin) as a thread map, "
            f"{n // 4} of the {n} elements per epoch as theirs")


def stokehold_py_cpu(n, par, work, epochs, batch=None):
    """The peers' own Python function (numpy's vectorised sin) as a stokehold thread map: the
    like-for-like row beside the peers, whose maps are Python; the runner's map is native.
    Element by element as Grain and SPDL yield them, or in batches of ``batch`` as
    dataloader-rs's DataLoader yields them (``peers.ops.CPU_BATCH``)."""
    import stokehold as sh

    f = ops.sin_work(work)
    ds = sh.Dataset.range(n).map(lambda e: {"s": f(e["x"])},
                                 num_parallel_calls=sh.AUTOTUNE if par == "auto" else int(par))
    if batch:
        ds = ds.batch(batch)
    figs = []
    for e in range(epochs + 1):
        t = time.perf_counter()
        k = sum(len(b["s"]) if batch else 1 for b in ds)
        if e > 0:
            figs.append(k / (time.perf_counter() - t))
    return figs


def main():
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    nfiles = 800 if args.quick else 4000
    ncpu, work = (4000, 2000) if args.quick else (20000, 2000)
    epochs = 3
    # Always: cargo rebuilds the runner when stokehold's core changed and does nothing
    # otherwise. Built only when missing, a runner from an older commit measured old code.
    build_runner()
    import tensorflow as tf
    auto = tf.data.AUTOTUNE
    out = []
    root = rows.tmp_root()
    d = make_files(root, nfiles)
    log(f"{nfiles} files in {d}")
    cfg = f"{nfiles} files, 2k-20k float32"
    for label, par, tfpar in [("1", "1", 1), ("2", "2", 2), ("autotune", "auto", auto)]:
        ours, table = run_stokehold(["files", d, par], epochs)
        log(f"stokehold files P={label}: {ours}\n{table}")
        theirs = tf_epochs(tf_files(d, tfpar), epochs, lambda b: int(b.shape[0]))
        log(f"tf.data files P={label}: {theirs}")
        p = {"parallelism": int(label) if label.isdigit() else "autotune"}
        note = table.splitlines()[-1] if label == "autotune" else None
        out.append(rows.median_row(FILES_WL, "stokehold", cfg + f", P={label}", "throughput", ours,
                                   "files/s", params=p, note=note))
        out.append(rows.median_row(FILES_WL, "tf.data", cfg + f", P={label}", "throughput", theirs,
                                   "files/s", params=p))
        out += peers.throughput_rows(
            FILES_WL, cfg + f", P={label}", "throughput", "files/s", "files",
            {"dir": str(d), "par": par if par == "auto" else int(par), "epochs": epochs}, params=p,
            systems=peers.SYSTEMS + (("grain/mp_prefetch",) if label == "autotune" else ()))
    cfg = f"{ncpu} elements x {work} sin()"
    for label, par, tfpar in [("1", "1", 1), ("2", "2", 2), ("4", "4", 4), ("autotune", "auto", auto)]:
        ours, _ = run_stokehold(["cpu", ncpu, par, work], epochs)
        theirs = tf_epochs(tf_cpu(ncpu, tfpar, work), epochs, lambda b: 1)
        log(f"cpu P={label}: stokehold {ours} tf.data {theirs}")
        p = {"parallelism": int(label) if label.isdigit() else "autotune"}
        note = "same math, each system's own kernels (tf.sin vectorised, ours scalar)"
        out.append(rows.median_row(CPU_WL, "stokehold", cfg + f", P={label}", "throughput", ours,
                                   "elements/s", params=p, note=note))
        out.append(rows.median_row(CPU_WL, "tf.data", cfg + f", P={label}", "throughput", theirs,
                                   "elements/s", params=p))
        py = stokehold_py_cpu(ncpu // 4, par, work, epochs)
        log(f"cpu P={label}: stokehold/python {py}")
        out.append(rows.median_row(CPU_WL, "stokehold/python", cfg + f", P={label}", "throughput",
                                   py, "elements/s", params=p, note=PY_NOTE(ncpu)))
        py = stokehold_py_cpu(ncpu // 4, par, work, epochs, batch=ops.CPU_BATCH)
        log(f"cpu P={label}: stokehold/python+batch {py}")
        out.append(rows.median_row(CPU_WL, "stokehold/python+batch", cfg + f", P={label}",
                                   "throughput", py, "elements/s", params=p,
                                   note=f"{PY_NOTE(ncpu)}, batch({ops.CPU_BATCH}) as "
                                        "dataloader-rs's"))
        out += peers.throughput_rows(
            CPU_WL, cfg + f", P={label}", "throughput", "elements/s", "cpu",
            {"n": ncpu // 4, "par": par if par == "auto" else int(par), "work": work,
             "epochs": epochs}, params=p, extra_note=peers.CPU_NOTES(ncpu))
    out += contended(d, nfiles, tf_files)
    rows.write_json(args.json, out)
    print_table(out)


CONTENDED_ROUNDS = 3
CONTENDED_EPOCHS = 8


def contended(d, nfiles, tf_files):
    """The file map with one spinning process per core running beside it (started and stopped
    here): AUTOTUNE against each fixed parallelism under the same load. The settings take turns,
    ``CONTENDED_ROUNDS`` rounds in a rotating order, so that a slow stretch of the shared
    machine (one setting's epochs ran from 19k to 50k files/s in one run) falls on all of them
    and not on whichever ran then."""
    import tensorflow as tf
    cfg = f"{nfiles} files, 2k-20k float32, {os.cpu_count()} spinning processes beside it"
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 1)]
    out, fixed = [], {}
    labels = ("1", "2", "4", "autotune")
    try:
        figs, tables = {label: [] for label in labels}, {}
        for k in range(CONTENDED_ROUNDS):
            for label in labels[k % len(labels):] + labels[:k % len(labels)]:
                ours, tables[label] = run_stokehold(
                    ["files", d, "auto" if label == "autotune" else label], CONTENDED_EPOCHS)
                log(f"contended stokehold P={label} (round {k + 1}): {ours}")
                figs[label] += ours
        for label in labels:
            ours, table = figs[label], tables[label]
            row = rows.median_row(CONTENDED_WL, "stokehold", cfg + f", P={label}", "throughput",
                                  ours, "files/s", params={"parallelism": label})
            if label == "autotune":
                best = max(fixed, key=fixed.get)
                # What AUTOTUNE last decided or saw (the runner's stats table), then the verdict.
                said = [line.strip() for line in table.splitlines()
                        if line.strip().startswith(("autotune:", "verdict:"))]
                row["note"] = (f"{row['value'] / fixed[best]:.0%} of the best fixed setting "
                               f"(P={best}; goal >= 90%); " + "; ".join(said))
            else:
                fixed[label] = row["value"]
            out.append(row)
        theirs = tf_epochs(tf_files(d, tf.data.AUTOTUNE), CONTENDED_EPOCHS,
                           lambda b: int(b.shape[0]))
        out.append(rows.median_row(CONTENDED_WL, "tf.data", cfg + ", P=autotune", "throughput",
                                   theirs, "files/s", params={"parallelism": "autotune"}))
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    return out


def print_table(out):
    by = {}
    for r in out:
        by.setdefault((r["workload"], r["config"]), {})[r["system"]] = r["value"]
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} (shared, noisy)")
    print(f"{'workload':40} {'config':44} {'stokehold':>11} {'tf.data':>11} {'ratio':>6}")
    for (wl, cfg), v in by.items():
        s, t = v.get("stokehold"), v.get("tf.data")
        ratio = f"{s / t:.2f}x" if s and t else "-"
        print(f"{wl:40} {cfg:44} {s or 0:11.1f} {t or 0:11.1f} {ratio:>6}")


if __name__ == "__main__":
    main()
