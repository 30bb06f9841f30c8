"""Strings per second through `from_arrays(...).batch(64)` of short byte strings (file paths,
labels, text before tokenising), each batch handed to Python as an object array of `bytes`: the
in-memory batch path's copy of a bytes column plus the conversion, without a map. Not part of
`make bench`; an A/B between builds:
    python bench/micro/batch_strings.py            (with stokehold importable: make test's .venv)
Prints million strings/s, median of 7 epochs, for each of three rounds, for a dense column of
50000 strings and for a ragged column of 0-3 strings a row.
"""
import statistics
import time

import numpy as np

import stokehold as sh

N = 50_000


def rate(ds, key, epochs=7):
    figs = []
    for _ in range(epochs):
        t = time.perf_counter()
        n = sum(b[key].values.size if isinstance(b[key], sh.Ragged) else b[key].size for b in ds)
        figs.append(n / (time.perf_counter() - t))
    return statistics.median(figs)


def main():
    paths = np.array([f"/data/clip-{i:06d}.wav".encode() for i in range(N)], dtype=object)
    words = [np.array([f"w{i}-{k}".encode() for k in range(i % 4)], dtype=object) for i in range(N)]
    dense = sh.from_arrays({"path": paths}).batch(64)
    ragged = sh.from_arrays({"words": sh.Ragged.from_rows(words)}).batch(64)
    for _ in range(3):
        print(f"dense {rate(dense, 'path') / 1e6:.2f}M, ragged {rate(ragged, 'words') / 1e6:.2f}M",
              flush=True)


if __name__ == "__main__":
    main()
