"""bench/webdataset/open_shards.py: opening N WebDataset tar shards with and without their member
index sidecars (issue 45 item 3: "indexing 5k shards took over a day", Energon#165).

    python bench/webdataset/open_shards.py [--shards 1000] [--samples 100]   (repository root)

Writes N shards of S samples each (a 1 KiB ``bin`` member and a ``cls`` member per sample,
Python's tarfile, PAX headers as webdataset's TarWriter writes them) under $BENCH_TMPDIR, then
times ``read_webdataset(shards, index=...)``, each a fresh open in this process (the page cache
warm after the write):
* headers: ``index=False``, every tar header of every shard read at each open;
* first open: ``index=True`` with no sidecars yet: the headers read, each shard's sidecar written;
* with sidecars: ``index=True`` again: one small sidecar read per shard, no tar header.
Each row is the median of 3 opens (the first-open row: one, sidecars removed before it). Every
open must find N x S samples.
"""

import argparse
import io
import os
import statistics
import tarfile
import tempfile
import time
from pathlib import Path

import stokehold as sh


def write_shards(d: Path, n: int, samples: int) -> list:
    payload = bytes(range(256)) * 4
    paths = []
    for k in range(n):
        p = d / f"shard-{k:06d}.tar"
        with tarfile.open(p, "w", format=tarfile.PAX_FORMAT) as t:
            for i in range(samples):
                for ext, data in (("bin", payload), ("cls", str(i % 10).encode())):
                    info = tarfile.TarInfo(f"s{k:06d}{i:05d}.{ext}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        paths.append(str(p))
    return paths


def timed(paths: list, index: bool, want: int) -> float:
    t0 = time.perf_counter()
    ds = sh.read_webdataset(paths, index=index)
    dt = time.perf_counter() - t0
    assert len(ds) == want, (len(ds), want)
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=100)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMPDIR")) as tmp:
        d = Path(tmp)
        paths = write_shards(d, a.shards, a.samples)
        want = a.shards * a.samples
        size = sum(os.path.getsize(p) for p in paths)
        headers = statistics.median(timed(paths, False, want) for _ in range(3))
        first = timed(paths, True, want)
        assert all(os.path.exists(p + ".idx") for p in paths)
        sidecars = statistics.median(timed(paths, True, want) for _ in range(3))
        print(f"{a.shards} shards x {a.samples} samples ({size / 2**20:.0f} MiB)")
        print(f"  headers (index=False)      {headers * 1e3:9.1f} ms")
        print(f"  first open (writes .idx)   {first * 1e3:9.1f} ms")
        print(f"  with sidecars              {sidecars * 1e3:9.1f} ms  ({headers / sidecars:.1f}x faster)")


if __name__ == "__main__":
    main()
