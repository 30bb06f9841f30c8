"""Issue 48, items 1, 4 and 5, walked as a new user walks them, on real files: a crop hint that
is right and safe (run under an address-space limit, in a child), ``parse_examples`` that never
changes a shape silently, and TFRecord round trips that keep every dtype and shape, through
Python and through the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
from hostile import run_limited

import stokehold as sh
from stokehold import tfrecord as tfr

ROOT = Path(__file__).resolve().parents[2]
SPEECH = str(ROOT / "testdata" / "audio" / "speech.wav")  # mono, 24000 frames


# ---- item 1: the crop hint ---------------------------------------------------------------------


def _mono() -> sh.Dataset:
    return sh.from_arrays({"path": [SPEECH]}).load_audio(mono=True)


def test_a_mono_clip_cropped_on_axis_0_names_axis_1_and_following_it_crops() -> None:
    assert next(iter(_mono()))["audio"].shape == (1, 24000)
    with pytest.raises(sh.SchemaError) as e:
        list(_mono().random_crop("audio", 16000, seed=1))
    msg = str(e.value)
    assert "has 1 positions on axis 0 (shape [1, 24000])" in msg, msg
    assert "pass axis=1 (decoded audio is [channels, frames]" in msg, msg
    assert "pad=True" not in msg, msg  # padding axis 0 to 16000 rows is never the fix
    crop = next(iter(_mono().random_crop("audio", 16000, axis=1, seed=1)))["audio"]
    assert crop.shape == (1, 16000)
    # axis=-1, the last, as the spectrograms take time: the same crop.
    last = next(iter(_mono().random_crop("audio", 16000, axis=-1, seed=1)))["audio"]
    np.testing.assert_array_equal(crop, last)
    assert next(iter(_mono().pad_to("audio", 30000, axis=-1)))["audio"].shape == (1, 30000)
    with pytest.raises(sh.SchemaError, match=r'"audio" has shape \[1, 24000\], no axis -3'):
        list(_mono().random_crop("audio", 16000, axis=-3, seed=1))
    # Longer than the clip: the hint adds pad=True, and following it gives [1, size].
    with pytest.raises(sh.SchemaError, match=r"pass axis=1, pad=True \(decoded audio"):
        list(_mono().random_crop("audio", 48000, seed=1))
    padded = next(iter(_mono().random_crop("audio", 48000, axis=1, pad=True, seed=1)))["audio"]
    assert padded.shape == (1, 48000) and not padded[0, 24000:].any()
    # channels_first=False puts time on axis 0, where random_crop's default axis is.
    tf_layout = sh.from_arrays({"path": [SPEECH]}).load_audio(mono=True, channels_first=False)
    assert next(iter(tf_layout.random_crop("audio", 16000, seed=1)))["audio"].shape == (16000, 1)


def test_the_old_hint_under_a_memory_limit_is_a_named_error_not_an_abort() -> None:
    # The hint used to say pad=True: on axis 0 that makes [48000, 24000] float32 (4.6 GB), past
    # the child's 4 GiB address space. Before the checked allocation the interpreter aborted.
    script = (
        "import stokehold as sh\n"
        f"ds = sh.from_arrays({{'path': [{SPEECH!r}]}}).load_audio(mono=True)\n"
        "try:\n"
        "    list(ds.random_crop('audio', 48000, pad=True, seed=1))\n"
        "except sh.InvalidArgumentError as e:\n"
        "    print('ERROR', e)\n"
    )
    r = run_limited(script, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert out.startswith("ERROR invalid argument: map[random_crop"), out
    assert 'feature "audio" of shape [1, 24000] padded to 48000 on axis 0' in out, out
    assert "4608000000 bytes" in out, out


def test_a_cache_of_an_absurd_length_is_a_named_error_not_an_abort() -> None:
    # The cache's slot index is sized by the input's length: 8 bytes an element.
    script = (
        "import stokehold as sh\n"
        "try:\n"
        "    next(iter(sh.Dataset.range(10**13).cache()))\n"
        "except sh.InvalidArgumentError as e:\n"
        "    print('ERROR', e)\n"
    )
    r = run_limited(script, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ERROR invalid argument: cache: the slot index of its "
                               "10000000000000 elements would take 80000000000000 bytes"), r.stdout


def test_spectrograms_take_the_time_axis() -> None:
    first = next(iter(_mono().spectrogram(n_fft=400)))["spectrogram"]
    last_ds = sh.from_arrays({"path": [SPEECH]}).load_audio(mono=True, channels_first=False)
    last = next(iter(last_ds.spectrogram(n_fft=400, axis=0)))["spectrogram"]
    assert first.shape == last.shape == (1, 201, 121)
    np.testing.assert_array_equal(first, last)
    mel = next(iter(last_ds.mel_spectrogram(sample_rate=16000, n_mels=40, axis=0)))["mel"]
    assert mel.shape == (1, 40, 121)
    with pytest.raises(sh.SchemaError, match=r"no axis 2 to take as time .*\[frames, channels\]"):
        list(last_ds.spectrogram(axis=2))


# ---- item 4: parse_examples shapes -------------------------------------------------------------


@pytest.fixture()
def records(tmp_path: Path) -> List[str]:
    src = sh.from_arrays({"label": np.arange(6), "x": np.ones((6, 3), np.float32)})
    return tfr.write_tfrecord(src, tmp_path, num_shards=1)


SPEC = {"label": tfr.FixedLen([], "int64"), "x": tfr.FixedLen([3], "float32")}


def test_parse_examples_parses_what_the_input_holds(records: List[str]) -> None:
    one = tfr.parse_examples(tfr.TFRecordDataset(records), SPEC)
    e = one[2]
    assert e["label"].shape == () and int(e["label"]) == 2 and e["x"].shape == (3,)
    batches = list(tfr.parse_examples(tfr.TFRecordDataset(records).batch(4), SPEC))
    assert [b["label"].shape for b in batches] == [(4,), (2,)]
    assert batches[0]["x"].shape == (4, 3)
    # tf.io's spellings.
    assert tfr.parse_single_example(tfr.TFRecordDataset(records), SPEC)[0]["label"].shape == ()
    assert tfr.parse_example(tfr.TFRecordDataset(records).batch(4), SPEC)[0]["x"].shape == (4, 3)
    # The docstring's example.
    spec = {"label": tfr.FixedLen([], "int64")}
    assert tfr.parse_examples(tfr.TFRecordDataset(records), spec)[0]["label"].shape == ()
    assert tfr.parse_examples(tfr.TFRecordDataset(records).batch(2), spec)[0]["label"].shape == (2,)


def test_a_batched_mismatch_names_both(records: List[str]) -> None:
    # Before: batched=True (the default) on single records gave label shape (1,), silently.
    with pytest.raises(sh.SchemaError) as e:
        list(tfr.parse_examples(tfr.TFRecordDataset(records), SPEC, batched=True))
    msg = str(e.value)
    assert 'feature "record" holds one record (a scalar), but batched=True wants a batch' in msg
    assert "leave batched out" in msg
    with pytest.raises(sh.SchemaError, match=r"a batch of 4 records \(shape \[4\]\), but "
                       r"batched=False wants one record"):
        list(tfr.parse_examples(tfr.TFRecordDataset(records).batch(4), SPEC, batched=False))
    # Following the hint works.
    assert len(list(tfr.parse_examples(tfr.TFRecordDataset(records), SPEC))) == 6


# ---- item 5: dtypes and shapes through TFRecord ------------------------------------------------


def _every_dtype(n: int = 5) -> Dict[str, Any]:
    """One feature per dtype stokehold holds (core/src/dtype.rs), as scalars, vectors and 2-D
    arrays, with the extremes of each."""
    rng = np.random.default_rng(0)
    names = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
             "float16", "float32", "float64"]
    cols: Dict[str, Any] = {}
    for name in names:
        dt = np.dtype(name)
        if dt.kind == "b":
            v = rng.integers(0, 2, (n, 2, 3)).astype(dt)
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            v = rng.integers(info.min, info.max, (n, 2, 3), dtype=dt, endpoint=True)
            v[0, 0, :2] = [info.min, info.max]
        else:
            v = (rng.standard_normal((n, 2, 3)) * 1e3).astype(dt)
            v[0, 0, :3] = [np.finfo(dt).max, -0.0, np.finfo(dt).tiny]
        cols[f"{name}_scalar"] = v[:, 0, 0].copy()
        cols[f"{name}_vec"] = v[:, 0, :].copy()
        cols[f"{name}_2d"] = v
    try:
        import ml_dtypes
    except ImportError:
        pass
    else:
        cols["bfloat16_2d"] = (rng.standard_normal((n, 2, 3))).astype(ml_dtypes.bfloat16)
    cols["bytes_scalar"] = np.array([b"a%d" % i for i in range(n)], dtype=object)
    cols["bytes_2d"] = np.array([[[b"", b"x"], [b"\xff", b"yz"]]] * n, dtype=object)
    return cols


def _assert_same(got: Dict[str, Any], want: Dict[str, Any], what: str) -> None:
    assert sorted(got) == sorted(want), what
    for k, w in want.items():
        g = got[k]
        if isinstance(w, bytes) or np.asarray(w).dtype.kind in "OS":
            g, w = np.asarray(g, dtype=object), np.asarray(w, dtype=object)
            assert (g.shape, g.tolist()) == (w.shape, w.tolist()), f"{what}: {k}: {g!r}"
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), f"{what}: {k}: {g.dtype}{g.shape}"
        assert g.tobytes() == w.tobytes(), f"{what}: {k}"


def test_every_dtype_and_shape_survives_write_tfrecord(tmp_path: Path) -> None:
    cols = _every_dtype()
    shards = sh.write_shards(sh.from_arrays(cols), tmp_path / "shards")
    assert shards["num_records"] == 5
    paths = tfr.write_tfrecord(sh.open_shards(tmp_path / "shards"), tmp_path / "tf")
    records = [e["record"].item() for e in tfr.TFRecordDataset(paths)]
    for i, rec in enumerate(records):
        _assert_same(tfr.decode_example(rec), {k: v[i] for k, v in cols.items()}, f"record {i}")
    # A reader with a spec (tf.data's way) reads the values as the table in docs/FORMAT.md says.
    spec = {"uint8_2d": tfr.FixedLen([2, 3], "int64"), "int64_scalar": tfr.FixedLen([], "int64"),
            "float16_vec": tfr.FixedLen([3], "float32"), "float64_2d": tfr.FixedLen([], "bytes")}
    e = tfr.parse_examples(tfr.TFRecordDataset(paths), spec)[1]
    np.testing.assert_array_equal(e["uint8_2d"], cols["uint8_2d"][1].astype(np.int64))
    assert int(e["int64_scalar"]) == cols["int64_scalar"][1]
    np.testing.assert_array_equal(e["float16_vec"], cols["float16_vec"][1].astype(np.float32))
    raw = np.frombuffer(e["float64_2d"].item(), "<f8").reshape(2, 3)
    np.testing.assert_array_equal(raw, cols["float64_2d"][1])
    # A spec of a dtype Example lacks names the way that works; following it gives the dtype.
    with pytest.raises(sh.InvalidArgumentError, match=r"as int64 .* ds.cast\(feature, 'uint8'\)"):
        tfr.parse_examples(tfr.TFRecordDataset(paths), {"uint8_2d": tfr.FixedLen([2, 3], "uint8")})
    read = tfr.parse_examples(tfr.TFRecordDataset(paths), {"uint8_2d": tfr.FixedLen([2, 3], "int64")})
    got = read.cast("uint8_2d", "uint8")[1]["uint8_2d"]
    assert got.dtype == np.uint8 and got.tobytes() == cols["uint8_2d"][1].tobytes()


def _cli() -> str:
    """The stokehold binary: $STOKEHOLD_BIN, the venv's, or the newest cargo build."""
    env = os.environ.get("STOKEHOLD_BIN") or shutil.which("stokehold") or ""
    if env:
        return env
    built = [ROOT / "target" / p / "stokehold" for p in ("release", "debug")]
    built = [p for p in built if p.is_file()]
    return str(max(built, key=lambda p: p.stat().st_mtime)) if built else ""


@pytest.mark.skipif(not _cli(), reason="no stokehold binary built (cargo build -p stokehold-cli)")
def test_shards_to_tfrecord_to_shards_through_the_cli(tmp_path: Path) -> None:
    cols = _every_dtype()
    sh.write_shards(sh.from_arrays(cols), tmp_path / "a")
    run = lambda *args: subprocess.run([_cli(), *args], capture_output=True, text=True,  # noqa: E731
                                       timeout=300, cwd=tmp_path)
    r = run("convert", "a", "-o", "tf")
    assert r.returncode == 0, r.stderr
    files = sorted(str(p) for p in (tmp_path / "tf").glob("*.tfrecord"))
    r = run("convert", *files, "-o", "b")
    assert r.returncode == 0, r.stderr
    back = sh.open_shards(tmp_path / "b")
    assert len(back) == 5
    for i in range(5):
        _assert_same(back[i], {k: v[i] for k, v in cols.items()}, f"element {i}")
    # GUIDE's block (issue 48: uint8[256] came back int64, 2.0 MiB from 328 KiB).
    assert run("write", "src", "--synthetic", "1000", "--record-bytes", "256").returncode == 0
    assert run("convert", "src", "-o", "tf2").returncode == 0
    tf2 = sorted(str(p) for p in (tmp_path / "tf2").glob("*.tfrecord"))
    r = run("write", "dst", "--tfrecord", *tf2)
    assert r.returncode == 0, r.stderr
    src, dst = sh.open_shards(tmp_path / "src"), sh.open_shards(tmp_path / "dst")
    a, b = src[7], dst[7]
    assert (b["payload"].dtype, b["payload"].shape, b["id"].shape) == (np.uint8, (256,), ())
    _assert_same(b, a, "synthetic record 7")
    size = lambda d: sum(f.stat().st_size for f in (tmp_path / d).glob("*.stk"))  # noqa: E731
    assert size("dst") <= size("src") * 1.05, (size("src"), size("dst"))
