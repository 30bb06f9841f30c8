"""stokehold.open_table / write_table / Dataset.gather."""

import numpy as np
import pytest

import stokehold


def _table(tmp_path, n=40, width=3):
    a = (np.arange(n, dtype=np.float32)[:, None] * 1000 + np.arange(width, dtype=np.float32)).astype(np.float32)
    path = tmp_path / "feats.npy"
    np.save(path, a)
    return stokehold.open_table(path), a


def test_open_len_shape_dtype_row_take(tmp_path):
    t, a = _table(tmp_path)
    assert (len(t), t.shape, t.dtype) == (40, (40, 3), np.dtype("float32"))
    np.testing.assert_array_equal(t[7], a[7])
    np.testing.assert_array_equal(t[-1], a[-1])
    idx = np.array([[3, 0], [39, 3]], dtype=np.int32)
    np.testing.assert_array_equal(t.take(idx), a[idx])
    np.testing.assert_array_equal(t[2:5], a[2:5])
    assert not t[7].flags.writeable, "a row is a view of the read-only map"


def test_out_of_range_names_index_and_length(tmp_path):
    t, _ = _table(tmp_path)
    with pytest.raises(IndexError, match=r"index 40 .*length 40"):
        t.take([1, 40])
    with pytest.raises(IndexError, match=r"-41.*length 40"):
        t[-41]


def test_gather_after_shuffle_and_batch(tmp_path):
    t, a = _table(tmp_path)
    ids = np.arange(200) // 5
    ds = stokehold.from_arrays({"image_id": ids, "caption": np.arange(200)})
    ds = ds.shuffle(seed=3).batch(16).gather(t, index_feature="image_id", out="features")
    seen = []
    for b in ds:
        np.testing.assert_array_equal(b["features"], a[b["image_id"]])
        seen.extend(b["caption"].tolist())
    assert sorted(seen) == list(range(200)) and seen != list(range(200))
    b = ds[0]
    assert b["features"].shape == (16, 3) and b["features"].flags.writeable


def test_gather_per_element_and_by_key(tmp_path):
    t, a = _table(tmp_path, n=3)
    ds = stokehold.from_arrays({"name": np.array(["owl", "cat", "owl"])})
    ds = ds.gather(t, index_feature="name", out="f", keys=["cat", "dog", "owl"]).batch(3)
    np.testing.assert_array_equal(next(iter(ds))["f"], a[[2, 0, 2]])
    bad = stokehold.from_arrays({"name": np.array(["bee"])}).gather(t, "name", "f", keys=["cat", "dog", "owl"])
    with pytest.raises(stokehold.SchemaError, match="bee"):
        bad[0]


def test_wrong_index_dtype_is_a_schema_error(tmp_path):
    t, _ = _table(tmp_path)
    ds = stokehold.from_arrays({"image_id": np.array([1.0, 2.0], dtype=np.float32)}).gather(t, "image_id", "f")
    with pytest.raises(stokehold.SchemaError, match=r"image_id.*float32.*integer"):
        ds[0]


def test_bad_files_are_refused_clearly(tmp_path):
    f = tmp_path / "f.npy"
    np.save(f, np.asfortranarray(np.arange(6.0).reshape(2, 3)))
    with pytest.raises(stokehold.DataCorruptionError, match="Fortran-ordered"):
        stokehold.open_table(f)
    o = tmp_path / "o.npy"
    np.save(o, np.array([1, "a", None], dtype=object), allow_pickle=True)
    with pytest.raises(stokehold.DataCorruptionError, match="object dtype"):
        stokehold.open_table(o)
    tr = tmp_path / "t.npy"
    np.save(tr, np.zeros((4, 4), np.float32))
    data = tr.read_bytes()
    tr.write_bytes(data[:-10])
    want = rf"truncated.*needs {len(data)} bytes.*has {len(data) - 10}"
    with pytest.raises(stokehold.DataCorruptionError, match=want):
        stokehold.open_table(tr)


def test_write_table_concatenates(tmp_path):
    p = tmp_path / "w.npy"
    t = stokehold.write_table(p, [np.ones((2, 4), np.int16), np.zeros((3, 4), np.int16)])
    assert t.shape == (5, 4) and t.dtype == np.int16
    np.testing.assert_array_equal(np.load(p), np.concatenate([np.ones((2, 4)), np.zeros((3, 4))]))
    with pytest.raises(stokehold.InvalidArgumentError, match=r"int16\[1, 5\] do not fit .* shape \[4\]"):
        stokehold.write_table(tmp_path / "x.npy", [np.ones((2, 4), np.int16), np.ones((1, 5), np.int16)])
    assert sorted(x.name for x in tmp_path.iterdir()) == ["w.npy"], "no temp file left"
