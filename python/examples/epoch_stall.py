"""Epoch-boundary wait from Python: a new iterator per epoch (a for loop) against ds.epochs(n)
(one prefetch thread across epochs). Prints medians; run with the package built in release:
`.venv/bin/python python/examples/epoch_stall.py`."""

import statistics
import time

import numpy as np

import stokehold as sh

STEP = 0.02


def consume(batches):
    """The wait before each batch, with a STEP-long stand-in for a training step after it."""
    waits = []
    t = time.perf_counter()
    for _ in batches:
        waits.append(time.perf_counter() - t)
        time.sleep(STEP)
        t = time.perf_counter()
    return waits


def med_ms(x):
    return statistics.median(x) * 1e3


def main():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5 * 16000, 60 * 16000, size=200)
    clips = [rng.integers(-3000, 3000, size=int(n), dtype=np.int16) for n in lengths]
    ds = sh.from_arrays({"audio": clips}).shuffle(seed=0).random_crop("audio", 48000, seed=1).batch(32).prefetch(4)
    loop_first, ep_first, steady = [], [], []
    for _ in range(5):
        w = consume(ds)
        loop_first.append(w[0])
        steady += w[2:]
    for ep in ds.epochs(5):
        ep_first.append(consume(ep)[0])
    print(f"steady wait per batch: {med_ms(steady):.3f} ms")
    print(f"first-batch wait, new iterator per epoch (for loop): {med_ms(loop_first):.3f} ms")
    print(f"first-batch wait, ds.epochs(5) (one prefetch thread): {med_ms(ep_first[1:]):.3f} ms (epochs 2-5)")


if __name__ == "__main__":
    main()
