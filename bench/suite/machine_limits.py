"""Machine limits: memcpy bandwidth and page-cache read throughput.

The ceilings the other workloads' GB/s figures are read against. No peers.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from common import rows  # noqa: E402

W = "machine limits"
GB = 1e9


def memcpy(nbytes, repeats):
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in before timing
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        runs.append(src.nbytes / (time.perf_counter() - t) / GB)
    return runs


def page_cache_read(nbytes, repeats, folder):
    path = os.path.join(folder, "pagecache.bin")
    chunk = 8 << 20
    block = np.random.default_rng(0).integers(0, 255, chunk, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        for _ in range(nbytes // chunk):
            f.write(block)
    buf = bytearray(chunk)
    runs = []
    try:
        for i in range(repeats + 1):
            t = time.perf_counter()
            total = 0
            with open(path, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    total += n
            if i:  # the first pass only makes sure every page is cached
                runs.append(total / (time.perf_counter() - t) / GB)
    finally:
        os.remove(path)
    return runs


def main():
    args = rows.workload_args(__doc__).parse_args()
    size = (256 << 20) if args.quick else (1 << 30)
    folder = tempfile.mkdtemp(dir=rows.tmp_root(), prefix="limits-")
    cfg = f"{size >> 20} MiB"
    out = [
        rows.median_row(W, "machine", cfg + ", numpy.copyto", "memcpy bandwidth",
                        memcpy(size, 5), "GB/s"),
        rows.median_row(W, "machine", cfg + ", 8 MiB readinto", "page-cache read",
                        page_cache_read(size, 3, folder), "GB/s"),
    ]
    os.rmdir(folder)
    rows.write_json(args.json, out)


if __name__ == "__main__":
    main()
