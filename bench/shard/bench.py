"""Shard folders: shuffle quality and read throughput (bench/README.md contract).

    python bench/shard/bench.py [--quick] --json OUT

Shuffle quality: 100 shards x 2000 records written in index order; one epoch's order from
stokehold's global shuffle (keyed Feistel permutation), stokehold's windowed shuffle (window =
one shard), the tf.data recipe (file shuffle + interleave(cycle_length=8, block_length=16) +
shuffle(10000)) over 100 TFRecord files holding the same ids, and a uniform permutation (numpy).
Metrics: Spearman correlation of output position vs index (0 is ideal), mean displacement
|position - index| / N (1/3 for a uniform order), fraction of adjacent output pairs from the same
shard (1/100 uniform), distinct shards per window of 1000 outputs (~100 uniform).

Throughput: N records of 1 KiB, uncompressed, page-cached, read by the Rust reader
(`crates/stokehold-io/examples/shard_read_bench.rs`, built in release): sequential get(i),
random get(i) (one and two threads), get_batch on one and two threads over the records of a
sequential and of a global-shuffle epoch in its order (also handing the batches to the main thread,
and with each thread holding its last 48 batches, about what a pipeline's worker keeps in
flight), a sequential and a global-shuffle epoch
through the iterator API, element by element and in batches of 256 (the reader's batch path;
also made by two workers and by one),
each the second epoch of its pipeline (the first, untimed, starts the workers, which live across
epochs);
tf.data's sequential TFRecordDataset read of the same records (batched by 1024, counted in C++) as the peer;
and `memprobe.c`, which reads every line of every record through the index in both orders with
nothing decoded: its shuffled/sequential ratio is what this machine's memory allows.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import rows, stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PER_SHARD, SHARDS = 2000, 100
QUALITY = "shuffle quality"
QCONFIG = "100 shards x 2000 records, in index order"
READ = "shard reads, 1 KiB records"
HELD = 48  # shard_read_bench's HELD: batches a reference thread keeps alive


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def bench_binary():
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    exe = target / "release" / "examples" / "shard_read_bench"
    log("building", exe)
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "stokehold-io", "--example", "shard_read_bench"],
        cwd=ROOT, check=True,
    )
    return exe


def quality(order):
    return stats.shuffle_quality(order, PER_SHARD)


def tf_recipe_order(tmp, seed):
    import tensorflow as tf

    files = []
    for s in range(SHARDS):
        p = os.path.join(tmp, f"q-{s:03d}.tfrecord")
        with tf.io.TFRecordWriter(p) as w:
            for i in range(s * PER_SHARD, (s + 1) * PER_SHARD):
                w.write(int(i).to_bytes(8, "little"))
        files.append(p)
    ds = tf.data.Dataset.list_files(os.path.join(tmp, "q-*.tfrecord"), shuffle=True, seed=seed)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=8, block_length=16,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.shuffle(10000, seed=seed).batch(10000)
    parts = [np.frombuffer(b"".join(b.tolist()), dtype="<u8") for b in ds.as_numpy_iterator()]
    return np.concatenate(parts).astype(np.int64)


def quality_rows(exe, tmp, seed=1):
    prefix = os.path.join(tmp, "order-")
    windows = [PER_SHARD, 8 * PER_SHARD]  # one shard's records; eight shards' records
    subprocess.run([str(exe), "quality", tmp, str(seed), ",".join(map(str, windows)), prefix], check=True)

    def load(name):
        return np.fromfile(prefix + name + ".u64", dtype="<u8").astype(np.int64)

    orders = {"stokehold": load("global")}
    for w in windows:
        orders[f"stokehold/window_shuffle({w})"] = load(f"window-{w}")
    orders["numpy/uniform permutation"] = np.random.default_rng(seed).permutation(SHARDS * PER_SHARD)
    out = []
    try:
        orders["tf.data/files+interleave(8,16)+shuffle(10000)"] = tf_recipe_order(tmp, seed)
    except Exception as e:  # tensorflow missing: say so, never fake a number
        out.append(rows.unavailable(QUALITY, "tf.data/files+interleave(8,16)+shuffle(10000)", QCONFIG, repr(e)))
    for system, order in orders.items():
        assert sorted(order.tolist()) == list(range(SHARDS * PER_SHARD)), system
        for metric, value in quality(order).items():
            better = "higher" if metric.startswith("distinct") else "lower"
            out.append(rows.row(QUALITY, system, QCONFIG, metric, value, "", better=better,
                                note="one epoch; uniform-permutation values are the ideal"))
    return out


def throughput_rows(exe, tmp, n, runs):
    folder = os.path.join(tmp, "reads")
    res = subprocess.run([str(exe), folder, str(n), "1024", str(runs)], check=True,
                         capture_output=True, text=True)
    by, cpu = {}, {}
    for line in res.stdout.splitlines():
        r = json.loads(line)
        by.setdefault(r["case"], []).append(r["records"] / r["seconds"])
        if r["cpu_seconds"] > 0:
            cpu.setdefault(r["case"], []).append(r["records"] / r["cpu_seconds"])
    out = []
    for case, vals in by.items():
        threads = 2 if "2 threads" in case else 1
        out.append(rows.median_row(READ, "stokehold", case, "throughput", vals, "records/s",
                                   note="Rust reader, page-cached, wall clock",
                                   params={"parallelism": threads}))
        if case in cpu:
            out.append(rows.median_row(
                READ, "stokehold", case, "throughput per CPU-second", cpu[case], "records/s",
                note="records / (user+system CPU seconds of the process): what a dedicated core "
                     "would do on this shared, oversubscribed machine"))
    probe = memory_probe(folder, runs)
    if isinstance(probe, str):
        out.append(rows.unavailable(READ, "memory probe (C)", "sequential / shuffled", probe))
        probe = {}
    for case, vals in probe.items():
        out.append(rows.median_row(READ, "memory probe (C)", case, "throughput", vals, "records/s",
                                   note="bench/shard/memprobe.c: every line of each record "
                                        "through the index, nothing decoded: what the machine "
                                        "allows"))
    pairs = [("stokehold", "global shuffle epoch", "sequential epoch", ""),
             ("stokehold", "global shuffle epoch", "sequential epoch", ", batch 256"),
             ("stokehold", "global shuffle epoch", "sequential epoch", ", batch 256, 2 threads"),
             ("stokehold", "global shuffle epoch", "sequential epoch", ", map, batch 256"),
             ("memory probe (C)", "shuffled", "sequential", "")]
    # Item 5's goal: batches made by two workers of a pipeline vs two threads calling get_batch
    # over the same records in the same order (the epoch's: uniform random indices would repeat
    # a third of the records, and a repeat is often still in cache); and vs the same two threads
    # handing their batches to a consumer through a channel (what any pipeline with a consumer
    # thread pays), and vs the same two threads each holding its last 48 batches (the pipeline's
    # batches in flight, out of the cores' caches), in wall clock and in CPU.
    # On one thread the same pipeline (no workers) against one thread's get_batch: what the
    # pipeline's ops cost apart from its threads. One worker against the same: a hand-off with a
    # core for each thread (two workers and their consumer share two cores here), against the
    # thread alone and holding its last batches as the worker's consumer does.
    for epoch, order in (("sequential epoch", "sequential"), ("global shuffle epoch", "shuffled")):
        for case, ref, what in (
                ("batch 256", "1 thread", "1 thread's get_batch"),
                ("batch 256, 1 worker", "1 thread", "1 thread's get_batch"),
                ("batch 256, 1 worker", f"1 thread, holding {HELD}",
                 f"1 thread's get_batch, holding {HELD}")):
            pipe = by.get(f"{epoch}, {case}")
            direct = by.get(f"{order} get_batch(256), {ref}")
            if pipe and direct:
                out.append(rows.row(READ, "stokehold", f"{epoch}, {case} / {what}", "ratio",
                                    float(np.median(pipe) / np.median(direct)), "x",
                                    better="higher"))
        for ref, what in (("", "2 threads' get_batch"),
                          (", handed over", "2 threads' get_batch handed over"),
                          (f", each holding {HELD}", f"2 threads' get_batch, each holding {HELD}")):
            for src, metric in ((by, "ratio"), (cpu, "ratio per CPU-second")):
                pipe = src.get(f"{epoch}, batch 256, 2 threads")
                direct = src.get(f"{order} get_batch(256), 2 threads{ref}")
                if pipe and direct:
                    out.append(rows.row(READ, "stokehold",
                                        f"{epoch}, batch 256, 2 workers / {what}", metric,
                                        float(np.median(pipe) / np.median(direct)), "x",
                                        better="higher"))
    for system, shuf_case, seq_case, suffix in pairs:
        src = probe if system.startswith("memory") else by
        seq, shuf = src.get(seq_case + suffix), src.get(shuf_case + suffix)
        if seq and shuf:
            ratio = float(np.median(shuf) / np.median(seq))
            out.append(rows.row(READ, system, f"{shuf_case} / {seq_case}{suffix}",
                                "ratio", ratio, "x", better="higher"))
    out += tf_read_rows(tmp, n, runs)
    return out


def memory_probe(folder, runs):
    """{case: [records/s per run]} from bench/shard/memprobe.c, or why it could not run."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return "no C compiler (cc) on PATH"
    exe = os.path.join(folder, "memprobe")
    src = Path(__file__).resolve().parent / "memprobe.c"
    build = subprocess.run([cc, "-O2", "-o", exe, str(src)], capture_output=True, text=True)
    if build.returncode != 0:
        return f"cc failed: {build.stderr[-300:]}"
    shards = sorted(str(p) for p in Path(folder).glob("shard-*.stk"))
    res = subprocess.run([exe, str(runs)] + shards, check=True, capture_output=True, text=True)
    by = {}
    for line in res.stdout.splitlines():
        r = json.loads(line)
        by.setdefault(r["case"].split(", ")[-1], []).append(r["records"] / r["seconds"])
    return by


def tf_read_rows(tmp, n, runs):
    try:
        import tensorflow as tf
    except Exception as e:
        return [rows.unavailable(READ, "tf.data", "sequential epoch", repr(e))]
    path = os.path.join(tmp, "reads.tfrecord")
    payload = bytes(range(256)) * 4
    with tf.io.TFRecordWriter(path) as w:
        for _ in range(n):
            w.write(payload)
    ds = tf.data.TFRecordDataset(path, buffer_size=8 << 20).batch(1024)
    vals = []
    for _ in range(runs + 1):
        t = time.perf_counter()
        count = sum(int(b.shape[0]) for b in ds)
        vals.append(count / (time.perf_counter() - t))
    return [
        rows.median_row(READ, "tf.data", "sequential epoch", "throughput", vals[1:], "records/s",
                        note="TFRecordDataset (no index: no random access), batch(1024)",
                        params={"parallelism": 1}),
        rows.unavailable(READ, "tf.data", "random get", "TFRecord has no random access"),
    ]


def main():
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    # Our own folder under $BENCH_TMPDIR (or the system's), removed at the end: ~2 GB in full runs.
    tmp = tempfile.mkdtemp(prefix="shard-bench-", dir=rows.tmp_root())
    try:
        exe = bench_binary()
        out = quality_rows(exe, tmp)
        n = 100_000 if args.quick else 1_000_000
        out += throughput_rows(exe, tmp, n, 3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows.write_json(args.json, out)
    width = max(len(r["system"]) for r in out)
    for r in out:
        v = "n/a" if r["value"] is None else f"{r['value']:.4g}"
        print(f"{r['workload'][:24]:24} {r['config'][:40]:40} {r['metric'][:28]:28} "
              f"{r['system']:{width}} {v} {r['unit']}")


if __name__ == "__main__":
    main()
