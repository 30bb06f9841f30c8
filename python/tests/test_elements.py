"""from_arrays / from_list, indexing, length, zero-copy in and out, ragged and bytes features."""

import numpy as np
import pytest

import stokehold as sh


def clips(n=7, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-1000, 1000, size=int(rng.integers(1, 20)), dtype=np.int16) for _ in range(n)]


def test_getitem_equals_iteration_and_len_equals_count():
    data = clips(11)
    ds = sh.from_arrays({"audio": data, "label": np.arange(11, dtype=np.int64)})
    for pipe in [ds, ds.shuffle(seed=3), ds.shuffle(seed=3).map(lambda e: e).batch(4)]:
        seen = list(pipe.iter(epoch=0))
        assert len(pipe) == len(seen)
        for i, e in enumerate(seen):
            got = pipe[i]
            assert got.keys() == e.keys()
            for k in e:
                a, b = got[k], e[k]
                if isinstance(a, sh.Ragged):
                    assert a.row_splits.tolist() == b.row_splits.tolist()
                    a, b = a.values, b.values
                np.testing.assert_array_equal(a, b)
    # The elements are the input rows.
    for i in range(11):
        np.testing.assert_array_equal(ds[i]["audio"], data[i])
        assert ds[i]["label"] == i


def test_negative_and_out_of_range_indices():
    ds = sh.from_arrays({"x": np.arange(5)})
    assert ds[-1]["x"] == 4
    assert ds[-5]["x"] == 0
    with pytest.raises(IndexError):
        ds[5]
    with pytest.raises(sh.OutOfRangeError):
        ds[-6]
    with pytest.raises(TypeError):
        ds["a"]


def test_slices_are_datasets_like_python_slices():
    ds = sh.from_arrays({"x": np.arange(10)})
    xs = lambda d: [int(e["x"]) for e in d]  # noqa: E731
    for s in [slice(2, 5), slice(-3, None), slice(None, -7), slice(5, 2), slice(None), slice(8, 99)]:
        part = ds[s]
        assert xs(part) == list(range(10))[s], s
        assert len(part) == len(range(10)[s]) and part.is_random_access
    assert int(ds[3:8][-1]["x"]) == 7
    shuffled = ds.shuffle(seed=1)
    assert xs(shuffled[:4]) == xs(shuffled)[:4]  # each epoch's first four of the same order
    with pytest.raises(ValueError, match="shard"):
        ds[::2]
    endless = ds.repeat()
    assert xs(endless[8:13]) == [8, 9, 0, 1, 2]
    with pytest.raises(ValueError, match="infinite"):
        endless[-3:]


def test_len_of_streams_and_infinite_is_a_clear_type_error():
    ds = sh.from_arrays({"x": np.arange(5)})
    with pytest.raises(TypeError, match="not known without iterating"):
        len(ds.filter(lambda e: True))
    with pytest.raises(TypeError, match="infinite"):
        len(ds.repeat())
    assert ds.repeat().cardinality() == sh.INFINITE
    assert ds.filter(lambda e: True).cardinality() == sh.UNKNOWN
    assert ds.repeat(3).cardinality() == 15
    assert ds.repeat()[12]["x"] == 2
    stream = ds.shuffle(seed=1, buffer_size=2)
    assert not stream.is_random_access
    with pytest.raises(TypeError, match="stream"):
        stream[0]


def test_zero_copy_input_is_shared_and_documented_mutation_is_visible():
    src = np.arange(12, dtype=np.float32).reshape(6, 2)
    ds = sh.from_arrays({"x": src})
    row = ds[2]["x"]
    assert np.shares_memory(row, src)
    assert not row.flags.writeable  # elements are read-only views of the cache
    src[2, 0] = 99.0
    assert ds[2]["x"][0] == 99.0


def test_non_contiguous_input_is_copied_once():
    src = np.arange(24, dtype=np.int32).reshape(6, 4)[:, ::2]
    ds = sh.from_arrays({"x": src})
    assert not np.shares_memory(ds[0]["x"], src)
    np.testing.assert_array_equal(ds[3]["x"], src[3])


def test_zero_copy_output_batch_is_writable_and_not_copied():
    ds = sh.from_arrays({"x": np.arange(64, dtype=np.float64).reshape(16, 4)}).batch(8)
    b = ds[1]["x"]
    assert b.shape == (8, 4)
    # The array's memory is the engine's buffer: the array's base is the native buffer that owns
    # it, and the data address is the one the engine exported.
    base = b.base
    assert type(base).__name__ == "TensorBuf"
    assert b.__array_interface__["data"][0] == base.address
    assert b.flags.writeable  # a fresh batch is owned by nobody else
    b[0, 0] = -1.0
    np.testing.assert_array_equal(ds[1]["x"][0], [32, 33, 34, 35])


def test_a_large_batch_numpy_still_holds_is_never_written_into():
    # 4 MiB batches (the reuse pool's threshold, stokehold_core::alloc): a batch numpy frees goes
    # back to the pool, and the next batch may be written into it; one still held never is.
    rows = np.arange(8 * 32 * 4096, dtype=np.float32).reshape(8 * 32, 4096)
    ds = sh.from_arrays({"x": rows}).batch(32)
    held = []
    for i, b in enumerate(ds.iter(0)):
        x = b["x"]
        np.testing.assert_array_equal(x, rows[32 * i:32 * (i + 1)])
        if i < 3:
            held.append(x)  # kept: their memory must not be handed out again
        del b, x
    for i, x in enumerate(held):
        np.testing.assert_array_equal(x, rows[32 * i:32 * (i + 1)])
    # What a held batch's memory holds is the caller's: writes are neither shared nor lost.
    held[0][:] = -1
    assert ds[0]["x"][0, 0] == 0 and held[0][0, 0] == -1


def test_ragged_storage_and_batches():
    data = clips(9, seed=1)
    ds = sh.from_arrays({"audio": data})
    batches = list(ds.batch(4).iter(0))
    assert [len(b["audio"]) for b in batches] == [4, 4, 1]
    r = batches[1]["audio"]
    assert isinstance(r, sh.Ragged)
    assert r.values.dtype == np.int16
    assert r.row_lengths().tolist() == [len(c) for c in data[4:8]]
    assert r.values.size == sum(len(c) for c in data[4:8])  # no padding
    for i, row in enumerate(r.to_list()):
        np.testing.assert_array_equal(row, data[4 + i])
        assert np.shares_memory(row, r.values)
    np.testing.assert_array_equal(r[-1], data[7])
    # The last batch has one element: dense.
    assert isinstance(batches[2]["audio"], np.ndarray)


def test_ragged_roundtrip_through_a_map_function():
    ds = sh.from_arrays({"audio": clips(6)}).batch(3)

    def double(e):
        r = e["audio"]
        return {"audio": sh.Ragged(r.values.astype(np.int32) * 2, r.row_splits)}

    for a, b in zip(ds.iter(0), ds.map(double).iter(0)):
        np.testing.assert_array_equal(b["audio"].values, a["audio"].values.astype(np.int32) * 2)
        np.testing.assert_array_equal(b["audio"].row_splits, a["audio"].row_splits)


def test_from_list_and_bytes_features():
    rows = [
        {"name": b"a", "text": "héllo", "v": np.ones(2, np.float32)},
        {"name": b"bcd", "text": "", "v": np.zeros(2, np.float32)},
    ]
    ds = sh.from_list(rows)
    e = ds[0]
    assert e["name"].dtype == object and e["name"].shape == () and e["name"].item() == b"a"
    assert e["text"].item() == "héllo".encode()
    b = next(iter(ds.batch(2)))
    assert b["name"].tolist() == [b"a", b"bcd"]
    grid = sh.from_arrays({"g": np.array([[b"a", b"b"], [b"", b"dd"]], dtype=object)}).batch(1)
    g = next(iter(grid))["g"]
    assert g.dtype == object and g.shape == (1, 2) and g.tolist() == [[b"a", b"b"]]
    assert b["v"].shape == (2, 2)
    s = sh.from_arrays({"s": np.array([b"x", b"yy"]), "o": np.array([b"p", "q"], dtype=object)})
    assert s[1]["s"].item() == b"yy" and s[1]["o"].item() == b"q"


def test_bytes_and_str_ending_in_nul_are_kept_exactly():
    # numpy turns a list of bytes into a fixed-width S array, which drops trailing NUL bytes: a
    # WAV or protobuf blob ending in zeros lost them (silently) on the way in.
    blobs = [b"RIFF\x00\x00", b"\x00", b"", b"ab\x00c\x00"]
    texts = ["a\x00", "\x00\x00"]
    ds = sh.from_arrays({"b": blobs})
    assert [ds[i]["b"].item() for i in range(4)] == blobs
    assert next(iter(ds.batch(4)))["b"].tolist() == blobs
    assert [e["w"].item() for e in sh.from_list([{"w": b} for b in blobs])] == blobs
    assert sh.from_arrays({"t": texts})[1]["t"].item() == b"\x00\x00"
    grid = sh.from_arrays({"g": [[b"x\x00", b"y"], [b"\x00", b""]]})
    assert grid[0]["g"].tolist() == [b"x\x00", b"y"] and grid[1]["g"].tolist() == [b"\x00", b""]
    rows = sh.from_arrays({"r": [[b"a\x00"], [b"b", b"\x00\x00"]]})  # ragged rows of bytes
    assert rows[1]["r"].tolist() == [b"b", b"\x00\x00"]
    mapped = sh.Dataset.range(3).map(
        lambda e: {"s": b"q\x00" * int(e["x"]), "l": [b"\x00", b"z\x00"], "u": "v\x00"})
    for i, e in enumerate(mapped):
        assert e["s"].item() == b"q\x00" * i and e["l"].tolist() == [b"\x00", b"z\x00"]
        assert e["u"].item() == b"v\x00"
    r = sh.Ragged.from_rows([[b"a\x00"], [b"\x00", b"b"]])
    assert r.values.tolist() == [b"a\x00", b"\x00", b"b"]


def test_a_bytes_feature_of_two_or_more_axes_keeps_its_order():
    # Object arrays are made by numpy in memory it allocates; they came out in Fortran order
    # (transposed values) when made with C-order flags over no data.
    g = np.array([[[b"a", b"b", b"c"], [b"d", b"e", b"f"]]] * 2, dtype=object)
    ds = sh.from_arrays({"g": g})
    for e in (ds[1], next(iter(ds)), next(iter(ds.map(lambda e: e)))):
        assert e["g"].shape == (2, 3) and e["g"].flags.c_contiguous
        assert e["g"].tolist() == [[b"a", b"b", b"c"], [b"d", b"e", b"f"]]
    assert next(iter(ds.batch(2)))["g"].tolist() == g.tolist()


def test_a_map_function_gets_small_arrays_as_copies_and_larger_ones_as_views():
    small = np.arange(8, dtype=np.float32).reshape(4, 2)
    large = np.arange(4 * 512, dtype=np.float32).reshape(4, 512)
    ds = sh.from_arrays({"s": small, "l": large})
    seen = {}

    def look(e):
        seen["s"] = (np.shares_memory(e["s"], small), e["s"].flags.writeable)
        seen["l"] = (np.shares_memory(e["l"], large), e["l"].flags.writeable)
        return {"s": e["s"] * 2, "l": e["l"]}

    out = ds.map(look)[3]
    # A small copy of shared memory is read-only, as the view it replaces.
    assert seen == {"s": (False, False), "l": (True, False)}
    np.testing.assert_array_equal(out["s"], small[3] * 2)
    np.testing.assert_array_equal(out["l"], large[3])


def test_a_small_result_array_is_copied_so_reusing_it_changes_no_element():
    buf = np.zeros(4, np.float32)

    def fill(e):
        buf[:] = e["i"]  # one array for every result, written again at each call
        return {"x": buf}

    got = list(sh.from_arrays({"i": np.arange(5)}).map(fill).batch(5))[0]["x"]
    np.testing.assert_array_equal(got[:, 0], np.arange(5))


def test_dtypes_round_trip():
    for dt in ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
               "float16", "float32", "float64"]:
        a = (np.arange(6) % 2).astype(dt).reshape(3, 2)
        ds = sh.from_arrays({"x": a})
        e, b = ds[1]["x"], next(iter(ds.batch(3)))["x"]
        np.testing.assert_array_equal(e, a[1])
        np.testing.assert_array_equal(b, a)
        # numpy's own type for the dtype (int64 is the platform's `long`, as numpy makes it)
        assert e.dtype == np.dtype(dt) and e.dtype.num == np.dtype(dt).num
        assert b.dtype == np.dtype(dt) and b.dtype.num == np.dtype(dt).num
        # a view of the dataset's memory is read-only, a fresh batch writable; both C-contiguous
        assert not e.flags.writeable and b.flags.writeable
        assert e.flags.c_contiguous and b.flags.c_contiguous and b.flags.aligned
    big = np.arange(4, dtype=">i4")
    assert sh.from_arrays({"x": big})[3]["x"] == 3


def test_bfloat16_comes_out_as_bfloat16_or_its_uint16_bits():
    ds = sh.from_arrays({"x": np.array([1.0, -2.0], np.float32)}).cast("x", "bfloat16")
    b = next(iter(ds.batch(2)))["x"]
    assert b.view(np.uint16).tolist() == [0x3F80, 0xC000]
    assert b.dtype.name in ("bfloat16", "uint16")


def test_a_dataset_is_truthy_even_when_its_length_is_unknown():
    assert sh.from_arrays({"x": np.arange(3)}).filter(lambda e: False)
