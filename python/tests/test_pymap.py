"""A Python map's element conversion and its claims of several elements at once (issue 17 item 6).

The conversion of a map function's result reads numpy's array struct for a plain C-contiguous,
aligned, native-endian array and takes the general path for everything else; these tests send
every dtype and layout through a map and compare with numpy. Feature names are kept between
elements (a dict literal's keys are the same `str` objects at every call); names made afresh at
each call, and more names than are kept, must convert the same. The parallel map hands cheap
elements over in runs; order, values, errors and checkpoints must be those of the sequential
map whatever the run length.
"""

import threading

import numpy as np
import pytest

import stokehold as sh

DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
          "float16", "float32", "float64"]


def _arrays():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 6)) * 100
    out = [base.astype(d) for d in DTYPES]
    out.append(base.astype(np.float32)[:, ::2])  # strided
    out.append(base.astype(np.float32).T)  # Fortran order
    out.append(base.astype(">f4"))  # byte-swapped
    out.append(np.frombuffer(b"\0" + base.astype(np.float32).tobytes(), np.float32, 24, 1))  # unaligned
    out.append(np.zeros((0, 3), np.int32))  # empty
    out.append(np.float64(2.5) * np.ones(()))  # 0-d
    out.append(np.array([b"ab", b"c"]))  # bytes
    return out


@pytest.mark.parametrize("k", range(len(_arrays())))
def test_map_result_of_every_layout_round_trips(k):
    want = _arrays()[k]
    ds = sh.from_arrays({"i": np.arange(3)}).map(lambda e: {"y": want})
    for e in ds:
        got = e["y"]
        assert got.shape == want.shape
        if want.dtype.kind == "S":
            assert [bytes(x) for x in got.ravel()] == [bytes(x) for x in want.ravel()]
        else:
            assert got.dtype == want.dtype.newbyteorder("=")
            np.testing.assert_array_equal(got, want)


SCALARS = [True, False, 0, -5, 2**63 - 1, -(2**63), 2**63, 2.5, float("nan"), b"", b"a\x00",
           "", "h\u00e9\x00", np.int8(-3), np.uint16(7), np.float32(1.5), np.bool_(True),
           np.float64(-0.0), np.bytes_(b"xy"), np.float16(0.5), np.uint64(2**64 - 1),
           np.int32(-7), np.uint8(255), np.float64("inf"), np.str_("ab\u00e9")]


@pytest.mark.parametrize("k", range(len(SCALARS)))
def test_a_scalar_result_comes_out_as_numpy_makes_it(k):
    # Python bool/int/float/bytes/str and numpy scalars take their own quick paths; each must
    # give what numpy's own conversion gives (int beyond int64: numpy's uint64 rule).
    v = SCALARS[k]
    want = np.asarray(v.encode() if isinstance(v, str) else v)
    for par in (None, 2):
        for e in sh.Dataset.range(3).map(lambda e: {"v": v}, num_parallel_calls=par):
            got = e["v"]
            assert got.shape == ()
            if want.dtype.kind == "S":
                assert got.dtype == object and got.item() == (v.encode() if isinstance(v, str) else bytes(v))
            else:
                assert got.dtype == want.dtype, (got.dtype, want.dtype)
                np.testing.assert_array_equal(got, want)
                assert np.signbit(got) == np.signbit(want)


def test_an_int_numpy_cannot_hold_is_refused_with_the_feature_named():
    with pytest.raises(Exception, match="big"):
        list(sh.Dataset.range(2).map(lambda e: {"big": 2**70}))


def test_feature_names_made_afresh_or_beyond_those_kept_convert_the_same():
    # 200 names, each a new str object at every call (the name cache holds 64 and matches by
    # object), then the same names again in a second map that reads them back.
    def wide(e):
        i = int(e["i"])
        return {"".join(["f", str(k)]): np.full(2, i + k) for k in range(200)}

    ds = sh.from_arrays({"i": np.arange(5)}).map(wide)
    ds = ds.map(lambda e: {"sum": np.int64(sum(int(v[0]) for v in e.values())),
                           "names": np.array(sorted(e), dtype=object)})
    for i, e in enumerate(ds):
        assert int(e["sum"]) == sum(i + k for k in range(200))
        assert [bytes(x).decode() for x in e["names"]] == sorted(f"f{k}" for k in range(200))


def test_a_key_that_is_not_a_str_is_refused():
    ds = sh.from_arrays({"i": np.arange(2)}).map(lambda e: {1: e["i"]})
    with pytest.raises(TypeError, match="feature names must be str"):
        list(ds)


def test_map_result_shares_a_contiguous_array_above_a_kib():
    a = np.arange(129, dtype=np.int64)  # 1032 bytes: shared; up to 1024 bytes: copied
    out = list(sh.from_arrays({"i": np.arange(2)}).map(lambda e: {"y": a}))
    np.testing.assert_array_equal(out[1]["y"], a)
    a[0] = 99  # the result refers to the function's array (zero-copy), as documented
    assert out[1]["y"][0] == 99
    b = a[:128].copy()
    out = list(sh.from_arrays({"i": np.arange(2)}).map(lambda e: {"y": b}))
    b[0] = -1
    assert out[1]["y"][0] == 99


def _square(e):
    x = e["x"]
    return {"x": x, "y": x * x + 1, "v": np.full(int(x) % 5, x, dtype=np.float32)}


@pytest.mark.parametrize("par", [1, 2, 4, sh.AUTOTUNE])
def test_parallel_python_map_equals_sequential(par):
    ds = sh.from_arrays({"x": np.arange(3000)})
    want = [(int(e["x"]), int(e["y"]), e["v"].tolist()) for e in ds.map(_square)]
    got = [(int(e["x"]), int(e["y"]), e["v"].tolist())
           for e in ds.map(_square, num_parallel_calls=par)]
    assert got == want


def test_parallel_python_map_as_completed_delivers_each_once():
    ds = sh.from_arrays({"x": np.arange(2000)}).map(_square, num_parallel_calls=3,
                                                    deterministic=False)
    assert sorted(int(e["x"]) for e in ds) == list(range(2000))


def test_parallel_python_map_error_names_its_element():
    def f(e):
        if int(e["x"]) == 777:
            raise ValueError("bad seven")
        return {"x": e["x"]}

    it = iter(sh.from_arrays({"x": np.arange(1000)}).map(f, num_parallel_calls=2))
    got = []
    with pytest.raises(ValueError, match="bad seven") as info:
        for e in it:
            got.append(int(e["x"]))
    assert got == list(range(777))
    assert "777" in "".join(getattr(info.value, "__notes__", [])) + str(info.value)


@pytest.mark.parametrize("det", [True, False])
def test_parallel_python_map_checkpoint_mid_run(det):
    ds = sh.from_arrays({"x": np.arange(1500)}).map(_square, num_parallel_calls=2,
                                                    deterministic=det)
    it = iter(ds)
    head = [int(next(it)["x"]) for _ in range(413)]
    state = it.get_state()
    rest = [int(e["x"]) for e in it]
    it2 = iter(ds)
    it2.set_state(state)
    rest2 = [int(e["x"]) for e in it2]
    # In order: the same sequence; as completed: the same elements (arrival order may differ).
    assert (rest2 if det else sorted(rest2)) == (rest if det else sorted(rest))
    assert sorted(head + rest) == list(range(1500))


def test_thread_local_state_lasts_across_elements_of_a_parallel_map():
    # A pipeline thread keeps its Python thread state between calls, so `threading.local` data
    # (a per-thread decoder, file handle or generator) is made once per thread, not per element.
    local = threading.local()
    made = []

    def f(e):
        if not hasattr(local, "calls"):
            local.calls = 0
            made.append(threading.get_ident())
        local.calls += 1
        return {"x": e["x"]}

    ds = sh.from_arrays({"x": np.arange(2000)}).map(f, num_parallel_calls=2)
    assert [int(e["x"]) for e in ds] == list(range(2000))
    assert len(made) == len(set(made))  # once per thread
    assert len(made) <= 4, f"thread-local state made {len(made)} times"
