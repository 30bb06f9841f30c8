"""bench/audio_decode: audio clips of 5-180 s (FLAC and WAV) -> random 3 s crop -> log-mel -> batch.

Run from the repository root (stokehold, torch, soundfile, torchaudio, tensorflow, grain, spdl
importable; dataloader-rs in bench/.venv313):
    /work/venvs/bench/bin/python bench/audio_decode/bench.py [--quick] --json OUT

Every system does the same work per clip: decode a random 3 s window of a 16 kHz mono file, a
log-mel spectrogram (n_fft 400, hop 160, 64 mels, HTK scale, 10*log10), then batches of 16.
* stokehold: list_files -> load_audio(random_window=3.0) -> mel_spectrogram(log=True) -> batch
  -> parallelize(P) -> prefetch(2) (the guide's form; its thread runs on into the next epoch):
  all native, decode seeks to the window.
* torch: a map-style Dataset whose __getitem__ reads the window with soundfile (sf.read(start,
  frames): libsndfile seeks too, the strongest Python reader) and runs torchaudio's
  MelSpectrogram + AmplitudeToDB; one DataLoader(batch_size=16, num_workers=P,
  persistent_workers=True) for all epochs, one torch thread per worker.
* tf.data (WAV only: TensorFlow has no FLAC decoder, and tensorflow-io is not installed for TF
  2.21): read_file -> tf.audio.decode_wav (the whole file) -> crop -> tf.signal.stft -> mel
  matrix -> log, num_parallel_calls=P, batch(16), prefetch.
* the nearest thread-based peers (bench/peers/, each in its own process): torch's per-clip op
  (peers.ops.LogMelOp: soundfile window read + torchaudio MelSpectrogram + AmplitudeToDB, the
  op torch's Dataset calls), batches of 16 by np.stack, one torch thread per process:
  - grain: MapDataset.source(files).shuffle().repeat().map(op)
    .to_iter_dataset(ReadOptions(num_threads=P)), one iterator for all epochs (as torch's
    persistent workers), each epoch's elements cut into batches of 16
    (peers.epochs_of_stream); grain/mp_prefetch: then .mp_prefetch(num_workers=cores);
  - spdl: one pipeline for all epochs, PipelineBuilder().add_source(repeat_source(files))
    .pipe(op, concurrency=P).add_sink(3).build(num_threads=P), batches cut the same way;
  - dataloader-rs: PyDataloader(Dataset(op), batch_size=16, shuffle, num_workers=P,
    collate_fn=np.stack) under CPython 3.13 (bench/.venv313).
P = 2 (the machine's cores). Clips per second, the median of 3 epochs after one warm-up epoch
(page cache warm for all).
"""

import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import peers  # noqa: E402  (Grain, SPDL, dataloader-rs: bench/peers/)
from common import rows  # noqa: E402
from peers import ops  # noqa: E402

WL = "audio clips -> random 3 s crop -> log-mel -> batch(16)"
RATE, CROP, N_FFT, HOP, N_MELS = (ops.AUDIO_RATE, ops.AUDIO_CROP, ops.AUDIO_N_FFT, ops.AUDIO_HOP,
                                  ops.AUDIO_N_MELS)
BATCH = 16


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_clips(root, n, lo, hi):
    """``n`` clips of ``lo``-``hi`` seconds (chirps over noise), as FLAC and as 16-bit WAV."""
    import numpy as np
    import soundfile as sf

    d = Path(tempfile.mkdtemp(prefix="audio-bench-", dir=root))
    (d / "flac").mkdir()
    (d / "wav").mkdir()
    rng = np.random.default_rng(0)
    total = 0.0
    for i in range(n):
        secs = float(rng.uniform(lo, hi))
        t = np.arange(int(secs * RATE)) / RATE
        x = 0.3 * np.sin(2 * np.pi * (200 + 50 * np.sin(t)) * t) + 0.05 * rng.standard_normal(len(t))
        x = (x * 20000).astype(np.int16)
        sf.write(d / "flac" / f"c{i:04d}.flac", x, RATE, subtype="PCM_16")
        sf.write(d / "wav" / f"c{i:04d}.wav", x, RATE, subtype="PCM_16")
        total += secs
    return d, total


def epochs(make_iter, n_epochs):
    """Clips/s of ``n_epochs`` timed epochs after one warm-up."""
    figs = []
    for e in range(n_epochs + 1):
        t = time.perf_counter()
        n = 0
        for b in make_iter(e):
            n += b
        if e > 0:
            figs.append(n / (time.perf_counter() - t))
    return figs


def stokehold_run(d, ext, par):
    import stokehold

    # One pipeline for all epochs (as torch's DataLoader is one loader): a new iterator per
    # epoch, its op counters kept.
    ds = (stokehold.list_files(str(d / ext / f"*.{ext}"), seed=1)
          .load_audio(mono=True, random_window=CROP, seed=2)
          .mel_spectrogram(sample_rate=RATE, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS,
                           log=True)
          .batch(BATCH)
          .parallelize(par)
          .prefetch(2))

    def make(e):
        return (len(b["mel"]) for b in ds.iter(epoch=e))
    return make


class _TorchClips:
    """A map-style Dataset: clip i -> the log-mel of a random window (peers.ops.LogMelOp, the
    op the peers' maps run too)."""

    def __init__(self, files):
        self.files, self.op = files, ops.LogMelOp()

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return self.op(self.files[i])


def _worker_init(_):
    import torch
    torch.set_num_threads(1)


def torch_run(d, ext, par):
    import torch

    files = sorted(str(p) for p in (d / ext).glob(f"*.{ext}"))
    # One loader for all epochs, its workers kept alive (persistent_workers): no worker start-up
    # inside the timed epochs, the peer's best setting.
    dl = torch.utils.data.DataLoader(_TorchClips(files), batch_size=BATCH, shuffle=True,
                                     num_workers=par, worker_init_fn=_worker_init,
                                     persistent_workers=True)

    def make(e):
        return (len(b) for b in dl)
    return make


def tf_run(d, par):
    import tensorflow as tf

    size = int(CROP * RATE)
    mel_w = tf.signal.linear_to_mel_weight_matrix(N_MELS, N_FFT // 2 + 1, RATE, 0.0, RATE / 2)

    def load(path):
        audio, _ = tf.audio.decode_wav(tf.io.read_file(path), desired_channels=1)
        x = audio[:, 0]
        x = tf.pad(x, [[0, tf.maximum(0, size - tf.shape(x)[0])]])
        x = tf.image.random_crop(x, [size])
        spec = tf.abs(tf.signal.stft(x, N_FFT, HOP, N_FFT, pad_end=True)) ** 2
        return tf.math.log(tf.matmul(spec, mel_w) + 1e-10) * (10 / math.log(10))

    def make(e):
        ds = (tf.data.Dataset.list_files(str(d / "wav" / "*.wav"), shuffle=True, seed=e)
              .map(load, num_parallel_calls=par).batch(BATCH).prefetch(tf.data.AUTOTUNE))
        return (int(b.shape[0]) for b in ds)
    return make



def main():
    parser = rows.workload_args(__doc__.splitlines()[0])
    parser.add_argument("--stokehold-only", action="store_true",
                        help="time stokehold alone (an A/B of two builds), no peers")
    args = parser.parse_args()
    n, lo, hi = (16, 5, 30) if args.quick else (48, 5, 180)
    par = 2
    d, secs = make_clips(rows.tmp_root(), n, lo, hi)
    log(f"{n} clips, {secs / 60:.0f} min of audio in {d}")
    out = []
    p = {"parallelism": par}
    for ext in ("flac", "wav"):
        cfg = f"{n} {ext.upper()} clips of {lo}-{hi} s, 16 kHz mono, P={par}"
        ours = epochs(stokehold_run(d, ext, par), 3)
        log(f"stokehold {ext}: {ours}")
        out.append(rows.median_row(WL, "stokehold", cfg, "throughput", ours, "clips/s", params=p))
        if args.stokehold_only:
            continue
        theirs = epochs(torch_run(d, ext, par), 3)
        log(f"torch {ext}: {theirs}")
        out.append(rows.median_row(WL, "torch/soundfile+torchaudio", cfg, "throughput", theirs,
                                   "clips/s", params=p,
                                   note="DataLoader workers; soundfile seeks to the window"))
        out += peers.throughput_rows(WL, cfg, "throughput", "clips/s", "map", {
            "dir": str(d / ext), "pattern": f"*.{ext}", "op": "logmel", "batch": BATCH,
            "par": par, "epochs": 3}, params=p, systems=peers.WITH_PROCESSES)
        if ext == "wav":
            tfr = epochs(tf_run(d, par), 3)
            log(f"tf.data wav: {tfr}")
            out.append(rows.median_row(WL, "tf.data", cfg, "throughput", tfr, "clips/s", params=p,
                                       note="decode_wav reads the whole clip (no window read)"))
        else:
            out.append(rows.unavailable(WL, "tf.data", cfg,
                                        "TensorFlow has no FLAC decoder (tensorflow-io not "
                                        "installed for TF 2.21)"))
    rows.print_ratios(out, "b", 2)
    rows.write_json(args.json, out)
    for r in out:
        log(f"{r['system']:>28} {r['config']}: {r['value']}")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
