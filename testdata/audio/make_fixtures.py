"""Makes the audio fixtures of stokehold's tests (testdata/audio). Run from the repository root:

    apt-get install sox espeak-ng flac lame vorbis-tools ffmpeg
    /work/venvs/bench/bin/python testdata/audio/make_fixtures.py

Needs numpy, librosa and torchaudio (the benchmark venv), and the Debian tools above. The tests
need none of them: the outputs are committed. What each file is for:

* source samples, written with Python's `wave` (PCM), so the expected values are known exactly:
  `<name>.wav` + `<name>.npy` (frames x channels, the file's own sample type: uint8, int16, int32
  for 24/32-bit); float32 and float64 WAVs converted by sox from stereo_s16.wav (expected:
  stereo_s16.npy / 32768, exact in both);
* FLAC encoded by `flac` from those WAVs (lossless: the same `.npy` is expected);
* MP3 (lame) and Ogg Vorbis (oggenc), with ffmpeg's decode as the reference (`*.ref.npy`,
  float32 frames x channels; the tests state the tolerance);
* files we must refuse: MS-ADPCM in WAV and Opus in Ogg (codecs not built in), a WAV of zero
  frames;
* 0.1 s FLAC, MP3 and Ogg clips (`tiny.*`), seeds of the fuzz targets;
* log-mel references of speech.wav from librosa and torchaudio (`logmel_*.npy`, with the
  parameters in `logmel.json`).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent
RATE = 16000
TEXT = "Stokehold decodes audio natively, on its own threads."


def run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def speech() -> np.ndarray:
    """espeak-ng speech resampled by sox to 16 kHz mono int16."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.wav"
        res = Path(tmp) / "16k.wav"
        run("espeak-ng", "-w", str(raw), TEXT)
        run("sox", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(res))
        with wave.open(str(res), "rb") as w:
            return np.frombuffer(w.readframes(w.getnframes()), "<i2").copy()


def chirp(n: int, scale: float) -> np.ndarray:
    t = np.arange(n) / RATE
    return np.sin(2 * np.pi * (200 + 1800 * t) * t) * scale


def write_pcm(name: str, samples: np.ndarray, width: int) -> None:
    """Writes frames x channels integer samples as PCM with Python's wave (8-bit is unsigned)."""
    frames, channels = samples.shape
    if width == 3:
        v = samples.astype("<i4").reshape(-1)
        data = np.stack([v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF], axis=1).astype(np.uint8)
        raw = data.tobytes()
    else:
        raw = samples.astype({1: "u1", 2: "<i2", 4: "<i4"}[width]).tobytes()
    with wave.open(str(OUT / f"{name}.wav"), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(RATE)
        w.writeframes(raw)
    np.save(OUT / f"{name}.npy", samples)


def main() -> None:
    # 1.5 s of speech (past espeak's leading silence) for the codecs and the log-mel reference;
    # the other layouts use its first second: small fixtures, every sample type still covered.
    s = speech()[4800 : 4800 + 24000]
    write_pcm("speech", s.reshape(-1, 1), 2)
    s = s[:RATE]
    n = len(s)
    stereo16 = np.stack([s, (chirp(n, 12000)).astype(np.int16)], axis=1)
    write_pcm("stereo_s16", stereo16, 2)
    write_pcm("u8", ((s.astype(np.int32) >> 8) + 128).astype(np.uint8).reshape(n, 1), 1)
    s24 = np.stack([s.astype(np.int32) * 256 + 77, (chirp(n, 8_000_000)).astype(np.int32)], 1)
    write_pcm("s24", s24, 3)
    s32 = (s.astype(np.int64) * 65536 + 12345).astype(np.int32).reshape(n, 1)
    write_pcm("s32", s32, 4)
    # Float WAVs by sox from 16-bit PCM: sox scales by 1/32768, exact in float32 and float64.
    # The tests expect stereo_s16.npy / 32768.
    for name, bits in [("f32", "32"), ("f64", "64")]:
        run("sox", str(OUT / "stereo_s16.wav"), "-e", "floating-point", "-b", bits,
            str(OUT / f"{name}.wav"))
    # Lossless FLAC of 16-bit mono and 24-bit stereo.
    run("flac", "-f", "-s", "-o", str(OUT / "speech.flac"), str(OUT / "speech.wav"))
    run("flac", "-f", "-s", "-o", str(OUT / "s24.flac"), str(OUT / "s24.wav"))
    # Lossy: MP3 (mono, 64 kbit/s) and Ogg Vorbis (stereo), ffmpeg's decode as the reference.
    run("lame", "--quiet", "-b", "64", str(OUT / "speech.wav"), str(OUT / "speech.mp3"))
    run("oggenc", "-Q", "-q", "2", "-o", str(OUT / "stereo.ogg"), str(OUT / "stereo_s16.wav"))
    for name, ch in [("speech.mp3", 1), ("stereo.ogg", 2)]:
        out = subprocess.run(
            ["ffmpeg", "-v", "error", "-i", str(OUT / name), "-f", "f32le", "-"],
            check=True, capture_output=True,
        ).stdout
        np.save(OUT / f"{name}.ref.npy", np.frombuffer(out, "<f4").reshape(-1, ch))
    # What we refuse: codecs not built in, and a clip of no frames.
    run("sox", str(OUT / "speech.wav"), "-e", "ms-adpcm", str(OUT / "adpcm.wav"), "trim", "0", "0.25")
    run("ffmpeg", "-v", "error", "-y", "-i", str(OUT / "speech.wav"), "-t", "0.25",
        "-c:a", "libopus", "-b:a", "16k", str(OUT / "opus.ogg"))
    write_pcm("empty", np.zeros((0, 1), np.int16), 2)
    (OUT / "empty.npy").unlink()
    logmel_refs(np.load(OUT / "speech.npy")[:, 0].astype(np.float32) / 32768)
    tiny()


def tiny() -> None:
    """0.1 s clips of each lossy/lossless codec: seeds for the fuzz targets (fuzz/corpus)."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "tiny.wav"
        run("sox", str(OUT / "stereo_s16.wav"), str(wav), "trim", "0", "0.1")
        run("flac", "-f", "-s", "--no-padding", "-o", str(OUT / "tiny.flac"), str(wav))
        run("lame", "--quiet", "-b", "32", str(wav), str(OUT / "tiny.mp3"))
        run("oggenc", "-Q", "-q", "0", "-o", str(OUT / "tiny.ogg"), str(wav))


def logmel_refs(y: np.ndarray) -> None:
    """10*log10(max(mel power, 1e-10)) of speech.wav as librosa and torchaudio compute it."""
    import librosa
    import torch
    import torchaudio

    params = {"n_fft": 512, "hop_length": 160, "win_length": 400, "n_mels": 64, "power": 2.0}
    lib = librosa.feature.melspectrogram(
        y=y, sr=RATE, n_fft=512, hop_length=160, win_length=400, n_mels=64, power=2.0,
        center=True, pad_mode="constant", htk=False, norm="slaney",
    )
    np.save(OUT / "logmel_librosa.npy", librosa.power_to_db(lib, ref=1.0, amin=1e-10,
                                                            top_db=None).astype(np.float32, order="C"))
    ta = torchaudio.transforms.MelSpectrogram(
        sample_rate=RATE, n_fft=512, hop_length=160, win_length=400, n_mels=64, power=2.0,
        center=True, pad_mode="reflect", mel_scale="htk", norm=None,
    )(torch.from_numpy(y))
    db = torchaudio.transforms.AmplitudeToDB(stype="power", top_db=None)(ta)
    np.save(OUT / "logmel_torchaudio.npy", np.ascontiguousarray(db.numpy(), np.float32))
    params["librosa"] = {"center": True, "pad_mode": "constant", "mel_scale": "slaney",
                         "norm": "slaney", "window": "hann (periodic)"}
    params["torchaudio"] = {"center": True, "pad_mode": "reflect", "mel_scale": "htk",
                            "norm": None, "window": "hann (periodic)"}
    (OUT / "logmel.json").write_text(json.dumps(params, indent=1) + "\n")


if __name__ == "__main__":
    main()
