"""Variable-length batching: bucketing by length, and packing of token sequences.

(c) bucket_by_sequence_length vs padded_batch on clips of 5-180 s, the demo's length
    distribution (uniform, as bench/suite/audio.py and the demo's clips.rs draw it), batch 32,
    twelve buckets (boundaries every 15 s from 20 s to 170 s). Metric: bytes of the padded audio
    batches per byte of real audio, for stokehold and for tf.data (its own
    ``bucket_by_sequence_length`` and ``padded_batch``), plus bucketing throughput (clips/s).
    The clips are int16 at 160 samples/s (1/100 of the demo's 16 kHz) so that the data fits in
    memory next to the other jobs on this machine; lengths and boundaries scale together, so
    the byte ratios are those of 16 kHz audio.
(d) packing token sequences with long-tailed (log-normal, capped at 2048) length distributions
    into rows of 2048, 16 bins open: the padding fraction of best-fit and of first-fit, for
    stokehold (``pack``) and, on the first distribution, for Grain (``BestFitPackIterDataset``,
    ``FirstFitPackIterDataset``: the same algorithms, so the fractions must agree), plus packing
    throughput (sequences/s). Log-normal(6, 1.0) (mean ~600 tokens) is where best-fit's choice of
    row pays; on the lighter log-normal(5, 1.1) (mean ~260) both fill rows equally well.

Systems: "stokehold" is the reference row of each comparison (bucketing in (c), best-fit in
(d)); the variants after a slash are the other op. Byte and padding figures are exact counts of
one epoch (deterministic: one run); throughputs are medians of 3 runs.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from common import rows  # noqa: E402

RATE = 160  # samples per second (see the docstring)
BATCH = 32
BOUNDS_S = list(range(20, 171, 15))  # 11 boundaries -> 12 buckets
ROW = 2048
BINS = 16
SEED = 11
WC = "bucket_by_sequence_length vs padded_batch"
WD = "packing: best-fit vs first-fit"


def log(msg):
    print(f"[sequence] {msg}", file=sys.stderr, flush=True)


def clip_lengths(n):
    rng = np.random.default_rng(SEED)
    return rng.integers(5 * RATE, 180 * RATE + 1, size=n)


def token_lengths(n, mu, sigma):
    rng = np.random.default_rng(SEED + 1)
    return np.clip(np.ceil(rng.lognormal(mu, sigma, size=n)), 1, ROW).astype(np.int64)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


# ---- (c) bucketing -------------------------------------------------------------------------

def sh_bucket(values, lengths, bucket):
    import stokehold as sh

    splits = np.concatenate([[0], np.cumsum(lengths)])
    ds = sh.from_arrays({"audio": [values[splits[i]:splits[i + 1]] for i in range(len(lengths))]})
    if bucket:
        ds = ds.bucket_by_sequence_length("audio", [s * RATE for s in BOUNDS_S],
                                          [BATCH] * (len(BOUNDS_S) + 1))
    else:
        ds = ds.padded_batch(BATCH)
    return sum(b["audio"].nbytes for b in ds)


def tf_bucket(values, lengths, bucket):
    import tensorflow as tf

    starts = tf.constant(np.concatenate([[0], np.cumsum(lengths)[:-1]]))
    lens = tf.constant(lengths)
    vals = tf.constant(values)
    ds = tf.data.Dataset.range(len(lengths)).map(
        lambda i: vals[starts[i]:starts[i] + lens[i]], num_parallel_calls=tf.data.AUTOTUNE)
    if bucket:
        ds = ds.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [s * RATE for s in BOUNDS_S],
                                          [BATCH] * (len(BOUNDS_S) + 1))
    else:
        ds = ds.padded_batch(BATCH)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return sum(int(b.nbytes) for b in ds.as_numpy_iterator())


def bucketing(quick):
    n = 400 if quick else 2000
    lengths = clip_lengths(n)
    values = np.random.default_rng(SEED).integers(-2**15, 2**15, size=int(lengths.sum()), dtype=np.int16)
    real = int(lengths.sum()) * 2
    cfg = f"{n} clips 5-180 s, batch {BATCH}, 12 buckets"
    out = []
    for system, fn in (("stokehold", sh_bucket), ("tf.data", tf_bucket)):
        try:
            for bucket, name in ((True, system), (False, f"{system}/padded_batch")):
                padded = fn(values, lengths, bucket)
                log(f"{name}: {padded / real:.3f} padded bytes per real byte")
                out.append(rows.row(WC, name, cfg, "padded bytes per real byte", padded / real, "x",
                                    runs=[padded / real], better="lower",
                                    note="exact count over one epoch"))
            runs = []
            for _ in range(3):
                _, secs = timed(lambda fn=fn: fn(values, lengths, True))
                runs.append(n / secs)
            out.append(rows.median_row(WC, system, cfg, "bucketing throughput", runs, "clips/s",
                                       note="noisy shared machine"))
        except ImportError as e:
            out.append(rows.unavailable(WC, system, cfg, f"not importable: {e}"))
    return out


# ---- (d) packing ---------------------------------------------------------------------------

def sh_pack(seqs, mode):
    import stokehold as sh

    ds = sh.from_arrays({"tok": seqs}).pack({"tok": ROW}, num_packing_bins=BINS, mode=mode)
    real = padded = count = 0
    for r in ds:
        seg = r["tok_segment_ids"]
        real += int(np.count_nonzero(seg))
        padded += seg.size
        count += 1
    return 1 - real / padded, count


def grain_pack(seqs, mode):
    from grain import python as gp
    from grain.experimental import BestFitPackIterDataset, FirstFitPackIterDataset

    cls = BestFitPackIterDataset if mode == "best_fit" else FirstFitPackIterDataset
    src = gp.MapDataset.source([{"tok": s} for s in seqs]).to_iter_dataset()
    ds = cls(src, length_struct={"tok": ROW}, num_packing_bins=BINS, shuffle_bins=False)
    real = padded = count = 0
    for r in ds:
        seg = r["tok_segment_ids"]
        real += int(np.count_nonzero(seg))
        padded += seg.size
        count += 1
    return 1 - real / padded, count


def packing(quick):
    n = 2000 if quick else 8000
    out = []
    # (mu, sigma, with Grain): the long tail where the choice of row matters, then a lighter one.
    for mu, sigma, peer in ((6.0, 1.0, True), (5.0, 1.1, False)):
        lengths = token_lengths(n, mu, sigma)
        seqs = [np.arange(k, dtype=np.int32) + 1 for k in lengths]
        cfg = (f"{n} seqs, log-normal({mu:g}, {sigma:g}) <= {ROW} tokens (mean "
               f"{lengths.mean():.0f}), rows {ROW}, {BINS} bins")
        systems = (("stokehold", sh_pack), ("grain", grain_pack)) if peer else (("stokehold", sh_pack),)
        for system, fn in systems:
            try:
                for mode, name in (("best_fit", system), ("first_fit", f"{system}/first_fit")):
                    (frac, count), secs = timed(lambda fn=fn, mode=mode, seqs=seqs: fn(seqs, mode))
                    log(f"{cfg}: {name}: padding fraction {frac:.4f} in {count} rows ({secs:.1f} s)")
                    out.append(rows.row(WD, name, cfg, "padding fraction", frac, "fraction",
                                        runs=[frac], better="lower", note="exact count over one epoch"))
                if peer:
                    runs = [n / timed(lambda fn=fn, seqs=seqs: fn(seqs, "best_fit"))[1] for _ in range(3)]
                    out.append(rows.median_row(WD, system, cfg, "best-fit packing throughput", runs,
                                               "seqs/s", note="noisy shared machine"))
            except ImportError as e:
                out.append(rows.unavailable(WD, system, cfg, f"not importable: {e}"))
    return out


def ratios(out):
    """The comparisons the issue asks for, as one line each on stderr."""
    val = {(r["workload"], r["system"], r["metric"]): r["value"] for r in out}
    for sysname in ("stokehold", "tf.data"):
        b = val.get((WC, sysname, "padded bytes per real byte"))
        p = val.get((WC, f"{sysname}/padded_batch", "padded bytes per real byte"))
        if b and p:
            log(f"(c) {sysname}: padded_batch / bucket_by_sequence_length = {p / b:.2f}x bytes")
    for r in out:
        if r["workload"] == WD and r["metric"] == "padding fraction" and "/" not in r["system"]:
            f = val_cfg(out, r["config"], f"{r['system']}/first_fit")
            if f is not None:
                log(f"(d) {r['system']}, {r['config']}: padding best-fit {r['value']:.4f} vs "
                    f"first-fit {f:.4f} (first-fit / best-fit = {f / r['value']:.2f}x)")


def val_cfg(out, config, system):
    for r in out:
        if r["config"] == config and r["system"] == system and r["metric"] == "padding fraction":
            return r["value"]
    return None


def main():
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    out = bucketing(args.quick) + packing(args.quick)
    ratios(out)
    rows.write_json(args.json, out)


if __name__ == "__main__":
    main()
