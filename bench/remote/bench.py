"""Remote reads: a shard folder on S3 (moto's server on loopback) vs the same folder on local disk.

    python bench/remote/bench.py [--quick] --json OUT

Data: a shard folder of 1 KiB records (quick: 8 shards x 4 MiB; full: 16 x 16 MiB) written by
stokehold into a temporary folder, uploaded to a bucket of a ``moto_server`` this script starts on
127.0.0.1 (and stops). Each figure is the median of 3 runs (the machine is shared and noisy).

Systems, all reading the same bytes:
  stokehold             open_shards(local folder), one epoch in batches of 256: sequential, and
                        global_shuffle (page-cached: the machine's local ceiling)
  stokehold/s3 direct   open_shards("s3://...") with no cache: records read by ranged GETs
                        (sequential: whole shards read ahead; global shuffle: the first
                        DIRECT_SHUFFLE_BATCHES batches only, each a scatter of 256 small reads)
  stokehold/s3 cold     open_shards("s3://...", cache_dir=fresh folder): every shard downloaded
                        once into the local shard cache (docs/STORAGE.md), then the same epoch
  stokehold/s3 warm     the same again with the cache folder already full: no downloads; the
                        open (manifest from S3) timed apart from the epoch
  stokehold/cache warm  open_shards(local folder, cache_dir=...) after a first open filled the
                        cache: the warm-cache epoch with no network (the same for any backend)
  boto3 ranged GET      a plain loop of 8 MiB ranged GETs over every shard object, one thread:
                        the server's ceiling on this machine (bytes only, nothing decoded)

Cold rows time the open (the downloads) and the epoch together.

Metrics: throughput (MB/s of shard bytes), each remote row's ratio to the local read of the same
order (``vs local``), stokehold cold's fraction of the ranged-GET ceiling, and requests per GB
(GET requests seen in moto's access log per GB of shard bytes). Goals (issue 15): sequential
>= 50% of local through moto; a warm-cache epoch within 10% of local.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from common import rows  # noqa: E402

WORKLOAD = "remote shard reads (S3 via moto)"
BUCKET = "bench"
RUNS = 3
CHUNK = 8 << 20  # ranged-GET size of the ceiling loop: object_store's coalescing size class


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    """moto_server on loopback; counts the GET requests it logs."""

    def __init__(self, workdir):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(workdir) / "moto.log"
        exe = Path(sys.executable).with_name("moto_server")
        self.proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log_path.open("wb"), stderr=subprocess.STDOUT)
        t0 = time.time()
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if time.time() - t0 > 30 or self.proc.poll() is not None:
                    raise RuntimeError("moto_server did not start: "
                                       + self.log_path.read_text()) from None
                time.sleep(0.1)

    def gets(self):
        # werkzeug's access log, its method possibly wrapped in colour codes
        return len(re.findall(rb'"(?:\x1b\[[0-9;]*m)*GET /', self.log_path.read_bytes()))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def env_for(moto):
    return {
        "AWS_ENDPOINT_URL": moto.url, "AWS_ENDPOINT": moto.url, "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
    }


def make_data(tmp, quick):
    import stokehold

    shards, shard_mib = (8, 4) if quick else (16, 16)
    n = shards * shard_mib * 1024
    rng = np.random.default_rng(0)
    ds = stokehold.from_arrays({"x": rng.integers(0, 255, (n, 1024), dtype=np.uint8)})
    path = os.path.join(tmp, "ds")
    stokehold.write_shards(ds, path, shard_size=shard_mib << 20)
    return path, n


def upload(moto, local):
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1",
                      aws_access_key_id="bench", aws_secret_access_key="bench")
    s3.create_bucket(Bucket=BUCKET)
    keys = []
    for name in sorted(os.listdir(local)):
        s3.upload_file(os.path.join(local, name), BUCKET, f"ds/{name}")
        keys.append(f"ds/{name}")
    return s3, keys


# A global shuffle read straight from S3 is one small ranged GET per record: an epoch of the full
# data set would take minutes through moto, so the direct shuffled read times this many batches.
DIRECT_SHUFFLE_BATCHES = 40


def epoch(ds, shuffle, batches=None):
    d = ds.global_shuffle(seed=1) if shuffle else ds
    n = 0
    for i, b in enumerate(d.batch(256)):
        if batches is not None and i == batches:
            break
        n += len(b["x"])
    return n


def ranged_get_loop(s3, keys):
    total = 0
    for k in keys:
        size = s3.head_object(Bucket=BUCKET, Key=k)["ContentLength"]
        for at in range(0, size, CHUNK):
            end = min(size, at + CHUNK) - 1
            body = s3.get_object(Bucket=BUCKET, Key=k, Range=f"bytes={at}-{end}")["Body"]
            total += len(body.read())
    return total


def main():
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    base = os.environ.get("BENCH_TMPDIR") or tempfile.mkdtemp()
    tmp = tempfile.mkdtemp(prefix="remote-", dir=base)
    out = []
    moto = None
    try:
        import stokehold

        local, n = make_data(tmp, args.quick)
        nbytes = sum(os.path.getsize(os.path.join(local, f)) for f in os.listdir(local))
        config = f"{n} records x 1 KiB, {nbytes / 1e6:.0f} MB, batch 256"
        moto = Moto(tmp)
        os.environ.update(env_for(moto))
        s3, keys = upload(moto, local)
        mb = nbytes / 1e6

        def rate(secs):
            return mb / secs

        # The server's ceiling: plain ranged GETs.
        runs, reqs = [], []
        for _ in range(RUNS):
            g0, t0 = moto.gets(), time.perf_counter()
            got = ranged_get_loop(s3, keys)
            runs.append(rate(time.perf_counter() - t0))
            reqs.append((moto.gets() - g0) / (got / 1e9))
        ceiling = rows.median_row(WORKLOAD, "boto3 ranged GET", config, "throughput", runs, "MB/s",
                                  note=f"{CHUNK >> 20} MiB ranges, one thread, bytes only")
        out += [ceiling, rows.median_row(WORKLOAD, "boto3 ranged GET", config, "requests per GB",
                                         reqs, "requests/GB", better="lower")]
        url = f"s3://{BUCKET}/ds"
        for order, shuffle in (("sequential", False), ("global shuffle", True)):
            cfg = f"{config}, {order}"
            lruns = []
            for _ in range(RUNS):
                ds = stokehold.open_shards(local)
                t0 = time.perf_counter()
                assert epoch(ds, shuffle) == n
                lruns.append(rate(time.perf_counter() - t0))
            lrow = rows.median_row(WORKLOAD, "stokehold", cfg, "throughput", lruns, "MB/s")
            out.append(lrow)
            # The cache alone (no network): the folder copied into a cache once, then epochs over
            # the cached copies. This is the warm-cache read whatever the backend.
            cache = tempfile.mkdtemp(dir=tmp)
            stokehold.open_shards(local, cache_dir=cache, cache_bytes=4 * nbytes)
            wruns = []
            for _ in range(RUNS):
                ds = stokehold.open_shards(local, cache_dir=cache, cache_bytes=4 * nbytes)
                t0 = time.perf_counter()
                assert epoch(ds, shuffle) == n
                wruns.append(rate(time.perf_counter() - t0))
            wrow = rows.median_row(WORKLOAD, "stokehold/cache warm", cfg, "throughput", wruns, "MB/s")
            wrow["note"] = (f"{wrow['value'] / lrow['value']:.0%} of local: epochs over the "
                            "shard cache's copies (medians, noisy shared machine)")
            out.append(wrow)
            shutil.rmtree(cache)
            direct, dreqs = [], []
            try:
                for _ in range(RUNS):
                    g0, t0 = moto.gets(), time.perf_counter()
                    ds = stokehold.open_shards(url)
                    got = epoch(ds, shuffle, DIRECT_SHUFFLE_BATCHES if shuffle else None)
                    assert got == (min(n, 256 * DIRECT_SHUFFLE_BATCHES) if shuffle else n)
                    secs = time.perf_counter() - t0
                    direct.append(got * 1024 / 1e6 / secs)
                    dreqs.append((moto.gets() - g0) / (got * 1024 / 1e9))
                row = rows.median_row(WORKLOAD, "stokehold/s3 direct", cfg, "throughput", direct,
                                      "MB/s")
                row["note"] = (f"{row['value'] / lrow['value']:.0%} of local; "
                               f"{row['value'] / ceiling['value']:.0%} of the ranged-GET ceiling; "
                               "record bytes (medians, noisy shared machine)")
                out += [row, rows.median_row(WORKLOAD, "stokehold/s3 direct", cfg,
                                             "requests per GB", dreqs, "requests/GB",
                                             better="lower")]
            except Exception as e:  # noqa: BLE001 - a system that cannot run gets a null row
                why = f"stokehold cannot read s3:// here: {type(e).__name__}: {e}"[:300]
                out.append(rows.unavailable(WORKLOAD, "stokehold/s3 direct", cfg, why))
            cold, warm, creqs, opens = [], [], [], []
            try:
                for _ in range(RUNS):
                    cache = tempfile.mkdtemp(dir=tmp)
                    g0, t0 = moto.gets(), time.perf_counter()
                    ds = stokehold.open_shards(url, cache_dir=cache, cache_bytes=4 * nbytes)
                    assert epoch(ds, shuffle) == n
                    cold.append(rate(time.perf_counter() - t0))
                    creqs.append((moto.gets() - g0) / (nbytes / 1e9))
                    # Warm: the open (the manifest read from S3, every shard found in the cache)
                    # timed apart from the epoch, as the local row times its epoch alone.
                    t0 = time.perf_counter()
                    ds = stokehold.open_shards(url, cache_dir=cache, cache_bytes=4 * nbytes)
                    opens.append((time.perf_counter() - t0) * 1e3)
                    t0 = time.perf_counter()
                    assert epoch(ds, shuffle) == n
                    warm.append(rate(time.perf_counter() - t0))
                    shutil.rmtree(cache)
            except Exception as e:  # noqa: BLE001 - a system that cannot run gets a null row
                why = f"stokehold cannot read s3:// here: {type(e).__name__}: {e}"[:300]
                out.append(rows.unavailable(WORKLOAD, "stokehold/s3 cold", cfg, why))
                continue
            for name, r in (("stokehold/s3 cold", cold), ("stokehold/s3 warm", warm)):
                row = rows.median_row(WORKLOAD, name, cfg, "throughput", r, "MB/s")
                row["note"] = (f"{row['value'] / lrow['value']:.0%} of local; "
                               f"{row['value'] / ceiling['value']:.0%} of the ranged-GET ceiling "
                               "(medians, noisy shared machine)")
                out.append(row)
            out.append(rows.median_row(WORKLOAD, "stokehold/s3 cold", cfg, "requests per GB",
                                       creqs, "requests/GB", better="lower",
                                       note="includes listing/manifest requests"))
            out.append(rows.median_row(WORKLOAD, "stokehold/s3 warm", cfg, "open", opens, "ms",
                                       better="lower", note="manifest from S3, shards from the cache"))
    finally:
        if moto:
            moto.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rows.write_json(args.json, out)
    for r in out:
        log(r["system"], r["config"], r["metric"], r["value"], r.get("note", ""))


if __name__ == "__main__":
    main()
