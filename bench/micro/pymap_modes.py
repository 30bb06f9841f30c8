"""Per-element throughput of a cheap Python map in each of stokehold's modes: sequential
(num_parallel_calls=None), AUTOTUNE (which starts a Python function inline, on the loop's own
thread) and one worker. The function returns a constant 100-float array over 50000 string
elements, padded into batches of 64 (bench/pymap's constant workload without its peers). Not part
of `make bench`; an A/B between builds or between modes:
    python bench/micro/pymap_modes.py            (with stokehold importable: make test's .venv)
Prints million elements/s per mode, median of 7 epochs, for each of three rounds; then the
sequential map's rate for each kind of result a map commonly returns (the conversion back is part
of every element's cost).
"""
import statistics
import time

import numpy as np

import stokehold as sh

N = 50_000
CONST = np.zeros(100, np.float32)
# One of each kind of result, made once: the figures are the conversion's, not the making's.
RESULTS = [("100 floats", CONST), ("Python int", 7), ("numpy int64", np.int64(7)),
           ("numpy float32", np.float32(0.5))]


def rate(ds, epochs=7):
    figs = []
    for _ in range(epochs):
        t = time.perf_counter()
        n = sum(len(b["x"]) for b in ds)
        figs.append(n / (time.perf_counter() - t))
    return statistics.median(figs)


def main():
    names = np.array([f"/none/{i}".encode() for i in range(N)], dtype=object)
    src = sh.from_arrays({"path": names})
    modes = [("sequential", None), ("AUTOTUNE", sh.AUTOTUNE), ("1 worker", 1)]
    for _ in range(3):
        figs = []
        for label, par in modes:
            ds = src.map(lambda e: {"x": CONST}, num_parallel_calls=par).padded_batch(64)
            figs.append(f"{label} {rate(ds) / 1e6:.2f}M")
        print(", ".join(figs), flush=True)
    for _ in range(3):
        figs = []
        for label, v in RESULTS:
            ds = src.map(lambda e, v=v: {"x": v}).padded_batch(64)
            figs.append(f"{label} {rate(ds) / 1e6:.2f}M")
        print("sequential, result:", ", ".join(figs), flush=True)


if __name__ == "__main__":
    main()
