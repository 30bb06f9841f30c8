"""Epoch-boundary wait from Python: a new iterator per epoch (a for loop) against ds.epochs(n)
(one prefetch thread across epochs). Prints medians; run with the package built in release:
`.venv/bin/python python/examples/epoch_stall.py`."""

import time, statistics, numpy as np, stokehold as sh
rng = np.random.default_rng(0)
clips = [rng.integers(-3000, 3000, size=int(rng.integers(5*16000, 60*16000)), dtype=np.int16) for _ in range(200)]
ds = sh.from_arrays({"audio": clips}).shuffle(seed=0).random_crop("audio", 48000, seed=1).batch(32).prefetch(4)
STEP = 0.02
def consume(batches):
    waits = []
    t = time.perf_counter()
    for b in batches:
        waits.append(time.perf_counter() - t)
        time.sleep(STEP)
        t = time.perf_counter()
    return waits
loop_first, ep_first, steady = [], [], []
for _ in range(5):
    w = consume(ds); loop_first.append(w[0]); steady += w[2:]
for ep in ds.epochs(5):
    w = consume(ep); ep_first.append(w[0])
med = lambda x: statistics.median(x) * 1e3
print(f"steady wait per batch: {med(steady):.3f} ms")
print(f"first-batch wait, new iterator per epoch (for loop): {med(loop_first):.3f} ms")
print(f"first-batch wait, ds.epochs(5) (one prefetch thread): {med(ep_first[1:]):.3f} ms (epochs 2-5)")
