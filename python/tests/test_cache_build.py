"""In-memory caches built from lists of arrays (from_arrays / from_list) and by cache() over a
pipeline: every element comes back equal to its input, whatever the shapes, dtypes, order of
reading or size (large lists take the copy path that is split across threads), and bad input
is refused with an error naming the feature."""

import numpy as np
import pytest

import stokehold as sh
from stokehold import InvalidArgumentError, StokeholdError

DTYPES = [np.int16, np.float32, np.float64, np.uint8, np.bool_, np.int64]


def clips(n, seed=0, channels=None, dtype=np.float32, scale=1):
    """n arrays whose axis 0 differs (0 included): ragged."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(0, 4000 * scale))
        shape = (length,) if channels is None else (length, channels)
        out.append((rng.standard_normal(shape) * 1000).astype(dtype))
    return out


def assert_same(ds, columns):
    n = len(next(iter(columns.values())))
    assert len(ds) == n
    for i in range(n):
        e = ds[i]
        for k, col in columns.items():
            want = np.asarray(col[i])
            assert e[k].dtype == want.dtype and e[k].shape == want.shape, (k, i)
            assert np.array_equal(e[k], want), (k, i)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_arrays_ragged_lists_equal_their_input(dtype):
    a = clips(50, seed=1, dtype=dtype)
    b = clips(50, seed=2, channels=3, dtype=dtype)
    labels = [np.int64(i * 7) for i in range(50)]
    assert_same(sh.from_arrays({"a": a, "b": b, "label": labels}), {"a": a, "b": b, "label": labels})


def test_large_lists_take_the_split_copy_and_stay_exact():
    # ~40 MB: above the size where the copy is split across threads.
    a = clips(120, seed=3, channels=2, scale=20)
    dense = [np.full((64, 64), i, np.float64) for i in range(300)]
    ds = sh.from_arrays({"a": a[:100], "d": dense[:100]})
    assert_same(ds, {"a": a[:100], "d": dense[:100]})
    # the input is copied: writing to it later does not change the dataset
    before = ds[5]["a"].copy()
    a[5][:] = 0
    assert np.array_equal(ds[5]["a"], before)


def test_from_list_equals_its_input():
    a = clips(40, seed=4, channels=2, scale=10)
    elements = [{"audio": x, "id": np.int32(i), "name": f"clip-{i}"} for i, x in enumerate(a)]
    ds = sh.from_list(elements)
    for i, e in enumerate(elements):
        got = ds[i]
        assert np.array_equal(got["audio"], e["audio"]) and got["audio"].dtype == np.float32
        assert int(got["id"]) == i and got["name"] == f"clip-{i}".encode()


def test_bad_lists_are_refused_with_the_feature_named():
    with pytest.raises(StokeholdError, match=r"from_arrays: feature \"x\" mixes dtypes float32 and float64"):
        sh.from_arrays({"x": [np.zeros(3, np.float32), np.zeros(3, np.float64)]})
    with pytest.raises(StokeholdError, match=r"from_arrays: feature \"x\" has shapes .*padded_batch"):
        sh.from_arrays({"x": [np.zeros((3, 2)), np.zeros((3, 4))]})
    with pytest.raises(InvalidArgumentError, match=r"feature \"x\" is an empty list; pass an array of shape"):
        sh.from_arrays({"x": []})
    with pytest.raises(InvalidArgumentError, match=r"element 1 has features"):
        sh.from_list([{"x": np.zeros(2)}, {"y": np.zeros(2)}])


def decoded(n, seed=5):
    """A pipeline that makes its arrays in a Python map (a decoder): nothing held in a list."""
    def decode(e):
        i = int(e["i"])
        rng = np.random.default_rng(seed * 1000 + i)
        return {"i": e["i"], "audio": rng.standard_normal((int(rng.integers(1, 30000)), 2)).astype(np.float32),
                "tag": f"t{i}", "img": np.full((i % 4, 3), i, np.uint8)}
    return sh.from_arrays({"i": np.arange(n)}).map(decode), decode


def test_cache_over_a_decoding_map_equals_the_decoder_in_any_read_order():
    n = 60
    src, decode = decoded(n)
    want = [decode({"i": np.int64(i)}) for i in range(n)]
    ds = src.cache()
    # First pass in a shuffled order fills the cache; later reads come from it.
    order = np.random.default_rng(1).permutation(n)
    for i in order:
        assert int(ds[int(i)]["i"]) == i
    for _ in range(2):
        for i in range(n):
            e = ds[i]
            for k in ("audio", "img"):
                assert np.array_equal(e[k], want[i][k]) and e[k].dtype == want[i][k].dtype, (k, i)
            assert e["tag"] == want[i]["tag"].encode()
    # shuffled epochs over the cache hold every element once
    seen = sorted(int(e["i"]) for e in ds.shuffle(seed=3))
    assert seen == list(range(n))


def test_cache_over_a_stream_equals_the_stream():
    n = 40
    src, decode = decoded(n, seed=6)
    stream = sh.from_generator(lambda: (decode({"i": np.int64(i)}) for i in range(n)))
    ds = stream.cache()
    first = [e for e in ds]
    again = [e for e in ds]
    for i in range(n):
        want = decode({"i": np.int64(i)})
        for got in (first[i], again[i]):
            assert np.array_equal(got["audio"], want["audio"])
            assert np.array_equal(got["img"], want["img"]) and got["img"].shape == want["img"].shape


def test_cached_elements_are_read_only_views():
    src, _ = decoded(5)
    ds = src.cache()
    list(ds)
    e = ds[2]
    assert not e["audio"].flags.writeable
    with pytest.raises(ValueError):
        e["audio"][0, 0] = 1.0
