"""Native decode -> cache(): the ragged cache's memory on the native path (issue 47).

Real speech (espeak-ng, resampled to 16 kHz int16 WAV, about 1-35 s per clip) and synthetic
clips of 5-180 s go through ``list_files -> load_audio(dtype="int16") -> cache()``, one epoch
read, each run in a fresh process: the growth of its RSS against the raw decoded bytes (samples
x 2), with no ``malloc_trim``, sequential and under ``parallelize(AUTOTUNE)``. The target
(docs/CACHE.md, README): growth <= 1.05x the raw bytes + 16 MiB. The from_arrays half
(a list of 5-180 s clips, the list dropped) is ``audio cache + epochs``' "cache growth / raw
bytes" row (bench/suite/audio.py).

    python bench/suite/audio_native.py [--quick] --json OUT
    python bench/suite/audio_native.py --child DIR PARALLEL   (one run; prints a JSON dict)
"""

import gc
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
from common import proc, rows  # noqa: E402

W = "native decode -> cache(): memory"
MiB = 2**20
RATE = 16000
TARGET_RATIO, TARGET_FIXED = 1.05, 16 * MiB  # docs/CACHE.md
WORDS = ("the quick brown fox jumps over a lazy dog while seven bright engineers measure the "
         "memory of cached audio clips at sixteen kilohertz and nobody pads anything").split()


def write_wav(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.astype("<i2").tobytes())


def make_speech(folder, n, seed=0):
    """n espeak-ng utterances of 3-80 words (about 1-35 s), resampled to 16 kHz mono int16."""
    rng = random.Random(seed)
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 80)))
        tmp = os.path.join(folder, f"tmp-{i}.wav")
        subprocess.run(["espeak-ng", "-w", tmp, "-s", str(rng.randint(120, 200)), text],
                       check=True, capture_output=True)
        with wave.open(tmp) as w:
            rate, x = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), "<i2")
        os.remove(tmp)
        t = np.arange(int(len(x) * RATE / rate)) * (rate / RATE)
        write_wav(os.path.join(folder, f"speech-{i:04d}.wav"),
                  np.interp(t, np.arange(len(x)), x).round())


def make_long(folder, n, seed=3):
    """n clips of 5-180 s: a tone plus noise."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        length = int(rng.integers(5 * RATE, 180 * RATE + 1))
        x = np.sin(np.arange(length) * 0.05) * 8000 + rng.normal(0, 2000, length)
        write_wav(os.path.join(folder, f"long-{i:03d}.wav"), x.round())


def raw_bytes(folder):
    total = 0
    for p in glob.glob(os.path.join(folder, "*.wav")):
        with wave.open(p) as w:
            total += w.getnframes() * w.getnchannels() * 2
    return total


def threads():
    return len(os.listdir("/proc/self/task"))


def child(folder, parallel):
    """One run in this (fresh) process: RSS before, the cache built by one epoch, RSS after (at
    the epoch's end, and once the pipeline's pool threads have ended: 40 ms after their last
    job; waited for by the thread count, not a time)."""
    import stokehold as sh

    raw = raw_bytes(folder)
    gc.collect()
    base, base_threads = proc.rollup()["rss"], threads()
    t0 = time.perf_counter()
    ds = sh.list_files(os.path.join(folder, "*.wav"), seed=0).load_audio(dtype="int16")
    if parallel:
        ds = ds.parallelize(sh.AUTOTUNE)
    ds = ds.cache()
    n = sum(1 for _ in ds)
    build_s = time.perf_counter() - t0
    gc.collect()
    at_end = proc.rollup()["rss"]
    while threads() > base_threads:
        time.sleep(0.01)
    after = proc.rollup()["rss"]
    again = sum(1 for _ in ds)  # an epoch read from the cache adds nothing
    print(json.dumps({"n": n, "again": again, "raw": raw, "growth": after - base,
                      "growth_at_epoch_end": at_end - base,
                      "growth_after_second_epoch": proc.rollup()["rss"] - base,
                      "build_s": build_s}))


def run_child(folder, parallel, timeout=240):
    cmd = [sys.executable, __file__, "--child", folder, "1" if parallel else "0"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        return {"error": f"exit {p.returncode}: {(p.stderr.strip().splitlines() or ['?'])[-1][:300]}"}
    return json.loads(lines[-1])


def set_rows(name, folder, repeats):
    raw = raw_bytes(folder)
    n = len(glob.glob(os.path.join(folder, "*.wav")))
    cfg = f"{name}: {n} clips, load_audio(int16) -> cache()"
    out = [rows.row(W, "raw bytes", cfg, "raw sample bytes", raw / MiB, "MiB")]
    for system, parallel in (("stokehold", False), ("stokehold/parallelize(AUTOTUNE)", True)):
        runs = [run_child(folder, parallel) for _ in range(repeats)]
        ok = [r for r in runs if "error" not in r]
        if not ok:
            out.append(rows.unavailable(W, system, cfg, runs[0]["error"]))
            continue
        growth = [r["growth"] for r in ok]
        met = sum(g <= TARGET_RATIO * raw + TARGET_FIXED for g in growth)
        out += [
            rows.median_row(W, system, cfg, "cache RSS growth", [g / MiB for g in growth], "MiB"),
            rows.median_row(W, system, cfg, "cache growth / raw bytes", [g / raw for g in growth],
                            "x", note=f"target <= {TARGET_RATIO}x raw + {TARGET_FIXED // MiB} MiB, "
                                      f"no malloc_trim: met in {met} of {len(growth)} runs"),
            rows.median_row(W, system, cfg, "growth past the raw bytes",
                            [(g - raw) / MiB for g in growth], "MiB",
                            note="the fixed overhead; RSS read once the pool's threads ended"),
            rows.median_row(W, system, cfg, "growth / raw bytes at the epoch's end",
                            [r["growth_at_epoch_end"] / raw for r in ok], "x",
                            note="before the pool's threads end (they hand back what they "
                                 "kept as they do, 40 ms after their last job)"),
            rows.median_row(W, system, cfg, "decode + fill bandwidth",
                            [raw / 1e6 / r["build_s"] for r in ok], "MB/s",
                            note="raw bytes / (list_files -> load_audio -> cache(), one epoch)"),
        ]
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] == "1")
        return
    args = rows.workload_args(__doc__).parse_args()
    repeats = 1 if args.quick else 3
    root = tempfile.mkdtemp(dir=rows.tmp_root(), prefix="audio-native-")
    out = []
    try:
        long_dir = os.path.join(root, "long")
        os.mkdir(long_dir)
        make_long(long_dir, 10 if args.quick else 30)
        out += set_rows("clips of 5-180 s", long_dir, repeats)
        speech_dir = os.path.join(root, "speech")
        os.mkdir(speech_dir)
        if shutil.which("espeak-ng") is None:
            out.append(rows.unavailable(W, "stokehold", "speech (espeak-ng)",
                                        "espeak-ng is not installed (apt-get install espeak-ng)"))
        else:
            make_speech(speech_dir, 50 if args.quick else 200)
            out += set_rows("speech (espeak-ng)", speech_dir, repeats)
        rows.write_json(args.json, out)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
