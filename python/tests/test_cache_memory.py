"""The ragged cache's memory goal on the native path (issue 47): WAV files -> ``load_audio`` ->
``cache()``, one epoch read, leaves the process's RSS at most 1.05x the raw decoded bytes plus
16 MiB larger (docs/CACHE.md), with no ``malloc_trim``.

Each case runs in a fresh interpreter, so nothing an earlier test allocated counts either way,
and reads RSS once the pipeline's pool threads have ended (they end 40 ms after their last job;
the child waits for the thread count, not for a time). The bound does not depend on how busy the
machine is: what the fill freed (the decoded clips, copied into the arena) is handed back to the
system by the thread that completes the cache's claims and by each pool thread as it ends
(``alloc::release_freed``), not by a timed purge that only a later allocation would run. Before
that, such clips grew RSS 1.2-2.2x their raw bytes."""

import json
import subprocess
import sys
import wave

import numpy as np
import pytest

MiB = 2**20
RATIO, FIXED = 1.05, 16 * MiB  # the stated goal: docs/CACHE.md and README

CHILD = r"""
import gc, json, os, sys, time
import stokehold as sh

def rss():
    with open("/proc/self/smaps_rollup") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("Rss:"))

def threads():
    return len(os.listdir("/proc/self/task"))

folder, parallel = sys.argv[1], sys.argv[2] == "1"
gc.collect()
base, base_threads = rss(), threads()
ds = sh.list_files(os.path.join(folder, "*.wav"), seed=0).load_audio(dtype="int16")
if parallel:
    ds = ds.parallelize(2)
ds = ds.cache()
n = sum(1 for _ in ds)
gc.collect()
while threads() > base_threads:  # the pool's threads end 40 ms after their last job
    time.sleep(0.01)
print(json.dumps({"n": n, "growth": rss() - base}))
"""


def write_clips(folder):
    """36 speech-length clips (1.5-35 s) and 6 long ones (60-180 s) of 16 kHz int16: 51 MiB of
    samples in all. Returns the raw bytes."""
    rng = np.random.default_rng(47)
    seconds = list(rng.uniform(1.5, 35, 36)) + list(rng.uniform(60, 180, 6))
    raw = 0
    for i, s in enumerate(seconds):
        n = int(s * 16000)
        x = (np.sin(np.arange(n) * 0.03) * 6000 + rng.normal(0, 1500, n)).astype("<i2")
        with wave.open(str(folder / f"clip-{i:03d}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(x.tobytes())
        raw += x.nbytes
    return len(seconds), raw


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps_rollup")
@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallelize(2)"])
def test_load_audio_cache_grows_rss_by_its_raw_bytes_plus_a_fixed_overhead(tmp_path, parallel):
    n, raw = write_clips(tmp_path)
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), "1" if parallel else "0"],
                         capture_output=True, text=True, timeout=100)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["n"] == n
    bound = RATIO * raw + FIXED
    assert got["growth"] <= bound, (
        f"RSS grew {got['growth'] / MiB:.1f} MiB for {raw / MiB:.1f} MiB of samples "
        f"({got['growth'] / raw:.2f}x), past {RATIO}x + {FIXED // MiB} MiB = {bound / MiB:.1f} MiB")
