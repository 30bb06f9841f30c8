"""Sizes from an argument or a header never abort the interpreter (issue 50): each case runs in a
child interpreter under a 4 GiB address-space limit and must end in a named Python error, not
SIGABRT ("memory allocation of ... bytes failed") or the OOM killer. Before the one checked
allocation path (``stokehold_core::alloc::checked_bytes``), every case here aborted."""

import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest
from hostile import run_limited

#: (name, code run after ``import numpy as np, stokehold as sh``, the error's expected words)
CASES = [
    ("pad_to", "list(sh.from_arrays({'x': np.zeros((2, 3), np.float32)}).pad_to('x', 10**12))",
     "pad_to"),
    # A new user's path (issue 48): a (1, N) clip cropped on axis 0 with the hint's pad=True.
    ("random_crop pad", "list(sh.from_arrays({'a': np.zeros((2, 1, 9000), np.float32)})"
     ".random_crop('a', 48000 * 10**5, pad=True))", "random_crop"),
    ("resize", "list(sh.from_arrays({'image': np.zeros((1, 4, 4, 3), np.uint8)}).resize(10**6))",
     "resize"),
    ("center_crop",
     "list(sh.from_arrays({'image': np.zeros((1, 4, 4, 3), np.uint8)}).center_crop(10**6))",
     "center_crop"),
    ("random_resized_crop",
     "list(sh.from_arrays({'image': np.zeros((1, 4, 4, 3), np.uint8)}).random_resized_crop(10**6))",
     "random_resized_crop"),
    ("padded_batch", "list(sh.from_arrays({'x': np.zeros((2, 3), np.float32)})"
     ".padded_batch(2, padded_shapes={'x': [10**12]}))", "padded_batch"),
    ("spectrogram", "list(sh.from_arrays({'audio': np.zeros((1, 800), np.float32)})"
     ".spectrogram(n_fft=2**40, win_length=400))", "spectrogram"),
    ("mel_spectrogram", "list(sh.from_arrays({'audio': np.zeros((1, 800), np.float32)})"
     ".mel_spectrogram(sample_rate=16000, n_mels=10**9))", "mel_spectrogram"),
    ("decode_audio random_window",
     "list(sh.list_files(WAV).load_audio(random_window=1e12, seed=0))", "load_audio"),
    ("a WAV header declaring 2**31 frames of 8 channels",
     "list(sh.list_files(LIAR).load_audio())", "frames"),
    ("the same, skipped", "print(len(list(sh.list_files(LIAR).load_audio(on_error='skip'))))",
     None),
    ("a FLAC whose STREAMINFO declares 2**35 frames (a decompression bomb's header)",
     "list(sh.list_files(BOMB).load_audio())", "frames"),
    ("the same bomb under a 64 MiB budget, skipped",
     "print(len(list(sh.list_files(BOMB).load_audio(on_error='skip')"
     ".with_options(memory_budget=64 << 20))))", None),
]

FLAC = Path(__file__).resolve().parents[2] / "testdata" / "audio" / "s24.flac"


def _flac_bomb(path: Path, frames: int) -> None:
    """A real FLAC file whose STREAMINFO says it holds `frames` frames (the 36-bit total-samples
    field, bytes 18..26 with the rate, channels and bit depth): what a file of constant frames
    declares, without the gigabytes its frames would decode to."""
    data = bytearray(FLAC.read_bytes())
    assert data[:4] == b"fLaC"
    packed = int.from_bytes(data[18:26], "big")
    packed = (packed & ~((1 << 36) - 1)) | frames
    data[18:26] = packed.to_bytes(8, "big")
    path.write_bytes(bytes(data))


def _wav(path: Path, frames: int, channels: int, declared_frames: int) -> None:
    """A 16-bit PCM WAV of `frames` zero frames whose header declares `declared_frames`."""
    data = bytes(frames * channels * 2)
    declared = declared_frames * channels * 2
    header = b"RIFF" + struct.pack("<I", min(36 + declared, 2**32 - 1)) + b"WAVE"
    fmt = struct.pack("<HHIIHH", 1, channels, 16000, 16000 * channels * 2, channels * 2, 16)
    header += b"fmt " + struct.pack("<I", 16) + fmt
    header += b"data" + struct.pack("<I", min(declared, 2**32 - 1))
    path.write_bytes(header + data)


@pytest.mark.parametrize("name,code,words", CASES, ids=[c[0] for c in CASES])
def test_an_oversized_size_is_a_named_error_not_an_abort(tmp_path: Path, name: str, code: str,
                                                          words: str) -> None:
    wav, liar, bomb = tmp_path / "ok.wav", tmp_path / "liar.wav", tmp_path / "bomb.flac"
    _wav(wav, 1600, 1, 1600)
    _wav(liar, 1600, 8, 2**31 // 8 - 64)
    _flac_bomb(bomb, 2**35)
    script = textwrap.dedent(f"""
        import numpy as np, stokehold as sh
        WAV, LIAR, BOMB = {str(wav)!r}, {str(liar)!r}, {str(bomb)!r}
        try:
            {code}
        except sh.StokeholdError as e:
            print("refused:", type(e).__name__, e)
        """)
    r = run_limited(script, timeout=120)
    assert r.returncode == 0, f"{name}: exit {r.returncode}\n{r.stderr[-2000:]}"
    if words is None:
        assert r.stdout.strip() == "0", r.stdout
        return
    assert r.stdout.startswith("refused:"), f"{name}: {r.stdout}{r.stderr[-2000:]}"
    assert words in r.stdout and "bytes" in r.stdout, r.stdout


#: Every reader that opens a local file, as code run with ``P`` a path.
READERS = [
    ("TFRecordDataset", "list(sh.TFRecordDataset([P]))"),
    ("read_file", "list(sh.from_arrays({'path': [P.encode()]}).read_file())"),
    ("load_image", "list(sh.from_arrays({'path': [P.encode()]}).load_image())"),
    ("load_audio", "list(sh.from_arrays({'path': [P.encode()]}).load_audio())"),
    ("probe_audio", "sh.probe_audio(P)"),
    ("open_table", "sh.open_table(P)"),
    ("load_npy", "list(sh.from_arrays({'path': [P.encode()]}).load_npy())"),
    ("build_index", "sh.tfrecord.build_index([P])"),
]


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("name,code", READERS, ids=[r[0] for r in READERS])
def test_a_reader_refuses_a_fifo_or_a_device_at_once(tmp_path: Path, special: str, name: str,
                                                      code: str) -> None:
    # A FIFO blocked open(2) forever (Ctrl-C could not end it); /dev/zero read until killed or
    # out of memory. Both are refused by name before anything is read.
    path = str(tmp_path / "pipe") if special == "fifo" else special
    if special == "fifo":
        os.mkfifo(path)
    script = textwrap.dedent(f"""
        import numpy as np, stokehold as sh
        P = {path!r}
        try:
            {code}
        except sh.StokeholdError as e:
            print("refused:", e)
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{name}: exit {r.returncode}\n{r.stderr[-2000:]}"
    assert "not a regular file" in r.stdout and path in r.stdout, f"{name}: {r.stdout}{r.stderr}"


def _png_with_iccp_bomb(path: Path, inflated: int) -> None:
    """A valid 1x1 RGB PNG with an iCCP chunk whose zlib stream inflates to `inflated` bytes:
    a decompression bomb in an ancillary chunk (about 1 KiB per MiB)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    z = zlib.compressobj(9)
    block = bytes(1 << 20)
    profile = b"".join(z.compress(block) for _ in range(inflated >> 20)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\x10\x20\x30")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"iCCP", b"bomb\x00\x00" + profile)
                     + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def test_a_png_with_an_iccp_bomb_decodes_its_pixels_without_inflating_it(tmp_path: Path) -> None:
    """Issue 50: an iCCP chunk inflating to 3 GiB in a 1x1 PNG. Before, the png decoder's cap
    was sized by max_pixels (about 1.4 GiB), so the profile was inflated up to it; now ancillary
    chunks are skipped and the cap is the image's own size."""
    bomb = tmp_path / "iccp.png"
    _png_with_iccp_bomb(bomb, 3 << 30)
    script = textwrap.dedent(f"""
        import resource, stokehold as sh
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        (e,) = list(sh.from_arrays({{"path": [{str(bomb)!r}.encode()]}}).load_image())
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(e["image"].shape, e["image"].reshape(-1).tolist(), grew < 256 << 10)
        """)
    r = run_limited(script, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "(1, 1, 3) [16, 32, 48] True", r.stdout
