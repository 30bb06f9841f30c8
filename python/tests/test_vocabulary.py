"""One argument vocabulary (issue 47, item 4): each old spelling still works for one release,
warns with a DeprecationWarning naming the new spelling, and gives the new spelling's result."""

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

import stokehold as sh
from stokehold import errors
from stokehold import tfrecord as tfr


def rows(ds):
    return [{k: np.asarray(v).tolist() for k, v in e.items()} for e in ds]


def old_and_new(call_old, call_new, old, new):
    """Calls both spellings; the old one must warn naming both. Returns (old result, new)."""
    with pytest.warns(DeprecationWarning) as seen:  # every warning, so none is re-raised
        a = call_old()
    said = [str(w.message) for w in seen]
    assert any(re.search(rf"\b{old}=.*deprecated.*\b{new}=", m) for m in said), said
    b = call_new()
    return a, b


def base():
    return sh.from_arrays({"x": np.arange(10)})


def double(e):
    return {"x": e["x"] * 2}


@pytest.mark.parametrize("op", ["map", "map_with_index", "random_map"])
def test_callable_is_map_func(op):
    fns = {
        "map": double,
        "map_with_index": lambda i, e: {"x": e["x"] + i},
        "random_map": lambda e, rng: {"x": e["x"] + int(rng.integers(100))},
    }
    extra = {"seed": 3} if op == "random_map" else {}
    a, b = old_and_new(lambda: getattr(base(), op)(fn=fns[op], **extra),
                       lambda: getattr(base(), op)(map_func=fns[op], **extra), "fn", "map_func")
    assert rows(a) == rows(b)


def test_giving_both_spellings_is_a_type_error():
    with pytest.raises(TypeError, match="'fn' and 'map_func'"):
        base().map(fn=double, map_func=double)


def test_options_are_keyword_only_after_the_documented_positionals():
    with pytest.raises(TypeError):
        base().map(double, None, None, "label")  # type: ignore[misc]
    with pytest.raises(TypeError):
        base().filter(lambda e: True, "label")  # type: ignore[misc]


def test_enumerate_feature():
    a, b = old_and_new(lambda: base().enumerate(name="i"), lambda: base().enumerate(feature="i"),
                       "name", "feature")
    assert rows(a) == rows(b) and "i" in rows(b)[0]


def test_shard_arguments():
    ds = base()
    a, b = old_and_new(lambda: ds.elastic_shard(world_size=3, rank=1),
                       lambda: ds.elastic_shard(num_shards=3, index=1), "world_size", "num_shards")
    assert rows(a) == rows(b) == rows(ds.shard(num_shards=3, index=1))
    a, b = old_and_new(lambda: ds.worker_split(num_workers=3, worker=2),
                       lambda: ds.worker_split(num_shards=3, index=2), "num_workers", "num_shards")
    assert rows(a) == rows(b)
    with pytest.warns(DeprecationWarning, match="rank=.*index="):
        ds.elastic_shard(num_shards=3, rank=1)


def files_ds(tmp_path):
    for i in range(3):
        np.save(tmp_path / f"{i}.npy", np.full(2, i))
    return sh.list_files(str(tmp_path / "*.npy"), shuffle=False)


def test_path_feature_is_feature(tmp_path):
    ds = files_ds(tmp_path)
    a, b = old_and_new(lambda: ds.load_npy(path="path", out="a"), lambda: ds.load_npy(feature="path", out="a"),
                       "path", "feature")
    assert rows(a) == rows(b)
    a, b = old_and_new(lambda: ds.read_file(path="path"), lambda: ds.read_file(feature="path"),
                       "path", "feature")
    assert [e["data"] for e in a] == [e["data"] for e in b]


def test_cache_and_trace_take_filename(tmp_path):
    a, b = old_and_new(lambda: base().map(double).cache(path=tmp_path / "a"),
                       lambda: base().map(double).cache(filename=tmp_path / "b"), "path", "filename")
    assert rows(a) == rows(b)
    ds = base().map(double, num_parallel_calls=2).with_options(trace_events=64)
    list(ds)
    with pytest.warns(DeprecationWarning, match="path=.*filename="):
        ds.trace(path=tmp_path / "t.json")
    ds.trace(filename=tmp_path / "u.json")
    assert json.loads((tmp_path / "t.json").read_text()) is not None
    assert (tmp_path / "u.json").exists()


def test_gather_out(tmp_path):
    t = sh.write_table(str(tmp_path / "t"), [np.arange(6, dtype=np.float32).reshape(3, 2)] * 3)
    ds = sh.from_arrays({"i": np.array([2, 0, 1])})
    a, b = old_and_new(lambda: ds.gather(t, "i", output="f"), lambda: ds.gather(t, "i", out="f"),
                       "output", "out")
    assert rows(a) == rows(b)


def wav(rate=16000, n=1600):
    data = (np.sin(np.arange(n) / 5) * 10000).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_decode_and_load_audio_resample_to(tmp_path):
    clips = sh.from_list([{"audio": np.array(wav(), dtype=object)}])
    a, b = old_and_new(lambda: clips.decode_audio(sample_rate=8000), lambda: clips.decode_audio(resample_to=8000),
                       "sample_rate", "resample_to")
    (ea,), (eb,) = list(a), list(b)
    assert ea["audio"].shape == eb["audio"].shape == (1, 800) and int(eb["sample_rate"]) == 8000
    np.testing.assert_array_equal(ea["audio"], eb["audio"])
    (tmp_path / "a.wav").write_bytes(wav())
    files = sh.list_files(str(tmp_path / "*.wav"), shuffle=False)
    with pytest.warns(DeprecationWarning) as seen:
        a = files.load_audio(path="path", sample_rate=8000)
    said = " ".join(str(w.message) for w in seen)
    assert "feature=" in said and "resample_to=" in said
    b = files.load_audio(feature="path", resample_to=8000)
    np.testing.assert_array_equal(next(iter(a))["audio"], next(iter(b))["audio"])


def test_parallelize_deterministic_defaults_to_none():
    ds = base().map(double)
    assert rows(ds.parallelize(2)) == rows(ds.parallelize(2, deterministic=None)) == rows(ds)


def tfrecord_with_a_bad_record(tmp_path):
    src = sh.from_arrays({"x": np.arange(6)})
    (good,) = tfr.write_tfrecord(src, tmp_path / "w", num_shards=1, index=False)
    data = bytearray(Path(good).read_bytes())
    data[-3] ^= 0xFF  # the last record's data CRC
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    return str(bad)


def test_tfrecord_skip_is_on_error(tmp_path):
    bad = tfrecord_with_a_bad_record(tmp_path)
    a, b = old_and_new(lambda: tfr.TFRecordDataset(bad, on_corrupt="skip"),
                       lambda: tfr.TFRecordDataset(bad, on_error="skip"), "on_corrupt", "on_error")
    assert [e["record"] for e in a] == [e["record"] for e in b] and len(list(b)) == 5
    spec = {"x": tfr.FixedLen([], "int64")}
    a, b = old_and_new(lambda: tfr.read_tfrecord(bad, spec, 4, on_corrupt="skip"),
                       lambda: tfr.read_tfrecord(bad, spec, 4, on_error="skip"), "on_corrupt", "on_error")
    assert rows(a) == rows(b)
    a, b = old_and_new(lambda: tfr.build_index(bad, skip_corrupt=True),
                       lambda: tfr.build_index(bad, on_error="skip"), "skip_corrupt", "on_error")
    assert a == b and a[0][1:] == (5, 1)


def test_writers_share_their_names(tmp_path):
    ds = sh.from_arrays({"x": np.arange(20)})
    a, b = old_and_new(lambda: sh.write_shards(ds, tmp_path / "a", shuffle_seed=4),
                       lambda: sh.write_shards(ds, tmp_path / "b", seed=4), "shuffle_seed", "seed")
    assert rows(sh.open_shards(tmp_path / "a")) == rows(sh.open_shards(tmp_path / "b"))
    assert rows(sh.open_shards(tmp_path / "b")) != rows(ds)
    sh.write_shards(ds, tmp_path / "c", compression="none")  # the old string still works
    assert rows(sh.open_shards(tmp_path / "c")) == rows(ds)
    with pytest.warns(DeprecationWarning) as seen:
        a = tfr.write_tfrecord(ds, directory=tmp_path / "ta", bytes_per_shard=1 << 20, compression="")
    said = " ".join(str(w.message) for w in seen)
    assert "directory=" in said and "path=" in said and "bytes_per_shard=" in said and "shard_size=" in said
    b = tfr.write_tfrecord(ds, path=tmp_path / "tb", shard_size=1 << 20, compression=None)
    assert [Path(p).read_bytes() for p in a] == [Path(p).read_bytes() for p in b]


def test_errors_module_exports_the_error_classes_and_only_its_names():
    for name in ("StokeholdError", "InvalidArgumentError", "DataCorruptionError", "SchemaError"):
        assert getattr(errors, name) is getattr(sh, name)
    assert "List" not in errors.__all__ and "SkipLog" in errors.__all__
    assert "Any" not in tfr.__all__

