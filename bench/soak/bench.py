"""Soak: many epochs of a parallel pipeline with prefetch and faults injected (issue 18).

A TFRecord file of N records, C of them corrupted on disk (one data byte flipped, so their CRC
fails), read with ``on_error="skip"``; a Python map on 2 threads raising on 0.1 % of the
records, under ``ignore_errors()``; a prefetch of 4. Each epoch is a new iterator (its threads
started and stopped). Every ``--every`` epochs it prints RSS, threads and open fds; every epoch it
checks delivered + skipped (corrupt records + failed map calls) = records in.

Rows: the growth of RSS, threads and fds from the first report to the last (flat = 0), and the
number of epochs whose accounting did not add up (0). stokehold only: no peer has both skip
policies (tf.data's ignore_errors has no count).

    python bench/soak/bench.py --json /tmp/soak.json [--quick] [--epochs 1000]
"""

import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from common import proc, rows  # noqa: E402

W = "soak: faults over epochs"
PAYLOAD = 256  # bytes per record: the id in the first 8, the rest filler
RAISE_EVERY = 1000  # the map raises on ids = 7 mod 1000: 0.1 %


def make_file(folder, n, corrupt):
    """One uncompressed TFRecord file of ``n`` fixed-size records; ``corrupt`` ids get one data
    byte flipped on disk. Returns its path."""
    import stokehold as sh

    # Non-zero filler: numpy's bytes dtype drops trailing NULs.
    recs = [i.to_bytes(8, "little") + b"x" * (PAYLOAD - 8) for i in range(n)]
    ds = sh.from_list([{"record": r} for r in recs])
    path = sh.tfrecord.write_tfrecord(ds, folder, compression="", index=False)[0]
    frame = 12 + PAYLOAD + 4
    with open(path, "r+b") as f:
        for i in corrupt:
            f.seek(i * frame + 12 + 100)
            f.write(b"\xff")
    return path


def record_id(e):
    raw = e["record"]
    raw = raw.item() if isinstance(raw, np.ndarray) else raw
    return int.from_bytes(bytes(raw)[:8], "little")


def fails(e):
    if record_id(e) % RAISE_EVERY == 7:
        raise ValueError(f"injected fault on record {record_id(e)}")
    return e


def sample():
    return {"rss_mib": proc.rss() / 2**20,
            "threads": len(os.listdir("/proc/self/task")),
            "fds": len(os.listdir("/proc/self/fd"))}


def soak(path, n, epochs, every):
    import stokehold as sh

    src = sh.TFRecordDataset([path], on_error="skip")
    ds = src.map(fails, num_parallel_calls=2).ignore_errors().prefetch(4)
    reports, bad_epochs, t0 = [], 0, time.perf_counter()
    for epoch in range(epochs):
        before = ds.skipped().count  # the reader's corrupt records and the map's errors
        delivered = sum(1 for _ in ds.iter(epoch))
        skipped = ds.skipped().count - before
        if delivered + skipped != n:
            bad_epochs += 1
            print(f"epoch {epoch}: delivered {delivered} + skipped {skipped} != {n}", file=sys.stderr)
        if (epoch + 1) % every == 0:
            s = sample()
            s.update(epoch=epoch + 1, delivered=delivered, skipped=skipped,
                     seconds=round(time.perf_counter() - t0, 1))
            reports.append(s)
            print(f"epoch {s['epoch']:5d}: rss {s['rss_mib']:.1f} MiB, threads {s['threads']}, "
                  f"fds {s['fds']}, delivered {delivered} + skipped {skipped} = {n}, "
                  f"{s['seconds']} s", file=sys.stderr, flush=True)
    return reports, bad_epochs


def main():
    p = rows.workload_args(__doc__)
    p.add_argument("--epochs", type=int, default=None, help="default 1000 (quick: 40)")
    args = p.parse_args()
    n = 500 if args.quick else 2000
    epochs = args.epochs or (40 if args.quick else 1000)
    every = max(1, epochs // 10)
    corrupt = list(range(3, n, n // 4))  # 4 corrupt records
    with tempfile.TemporaryDirectory(dir=rows.tmp_root()) as tmp:
        path = make_file(tmp, n, corrupt)
        reports, bad = soak(path, n, epochs, every)
    first, last = reports[0], reports[-1]
    config = (f"{epochs} epochs x {n} records: {len(corrupt)} corrupt (skip), map raising on "
              f"0.1 % (ignore_errors), parallel map 2 + prefetch 4")
    out = [rows.row(W, "stokehold", config, "rss growth", round(last["rss_mib"] - first["rss_mib"], 2),
                    "MiB", note=f"epoch {first['epoch']}: {first['rss_mib']:.1f} MiB, "
                    f"epoch {last['epoch']}: {last['rss_mib']:.1f} MiB"),
           rows.row(W, "stokehold", config, "threads growth", last["threads"] - first["threads"],
                    "threads", note=f"{first['threads']} -> {last['threads']}"),
           rows.row(W, "stokehold", config, "fds growth", last["fds"] - first["fds"], "fds",
                    note=f"{first['fds']} -> {last['fds']}"),
           rows.row(W, "stokehold", config, "epochs where delivered + skipped != input", bad,
                    "epochs"),
           rows.row(W, "stokehold", config, "wall time", last["seconds"], "s")]
    rows.write_json(args.json, out)


if __name__ == "__main__":
    main()
