"""Bad input, each a test; the exception tree; user exceptions re-raised as themselves."""

import subprocess
import sys

import numpy as np
import pytest

import stokehold as sh


def test_exception_tree_mixes_in_builtins():
    assert issubclass(sh.InvalidArgumentError, (sh.StokeholdError, ValueError))
    assert issubclass(sh.SchemaError, ValueError) and issubclass(sh.StateError, ValueError)
    assert issubclass(sh.OutOfRangeError, IndexError)
    assert issubclass(sh.StokeholdIOError, OSError)
    assert issubclass(sh.StokeholdFileNotFoundError, FileNotFoundError)
    for name in ["DataCorruptionError", "CancelledError", "WorkerPanicError"]:
        assert issubclass(getattr(sh, name), sh.StokeholdError)
    assert sh.SchemaError.__module__ == "stokehold"


@pytest.mark.parametrize(
    "kind, cls",
    [
        ("invalid", sh.InvalidArgumentError),
        ("schema", sh.SchemaError),
        ("out_of_range", sh.OutOfRangeError),
        ("corrupt", sh.DataCorruptionError),
        ("io", sh.StokeholdIOError),
        ("state", sh.StateError),
        ("cancelled", sh.CancelledError),
        ("worker_panic", sh.WorkerPanicError),
    ],
)
def test_each_core_error_maps_to_its_class(kind, cls):
    with pytest.raises(cls):
        sh._native._raise_for_test(kind)


def test_io_not_found_is_file_not_found_with_filename():
    with pytest.raises(FileNotFoundError) as info:
        sh._native._raise_for_test("not_found")
    assert info.value.filename == "/no/such/file.tfrecord"
    assert info.value.errno == 2
    assert isinstance(info.value, sh.StokeholdIOError)


def test_a_rust_panic_is_worker_panic_error_not_an_abort():
    with pytest.raises(sh.WorkerPanicError, match="deliberate panic"):
        sh._native._raise_for_test("panic")


def test_columns_of_different_lengths():
    with pytest.raises(sh.InvalidArgumentError, match="different lengths"):
        sh.from_arrays({"a": np.zeros(3), "b": np.zeros(4)})


def test_unknown_dtype():
    with pytest.raises(sh.InvalidArgumentError, match="complex128"):
        sh.from_arrays({"a": np.zeros(3, dtype=np.complex128)})


def test_object_array_of_non_bytes():
    with pytest.raises(sh.InvalidArgumentError, match="object array must hold bytes or str"):
        sh.from_arrays({"a": np.array([1, "x", None], dtype=object)})


def test_other_bad_from_arrays_inputs():
    with pytest.raises(sh.InvalidArgumentError):
        sh.from_arrays({})
    with pytest.raises(sh.InvalidArgumentError):
        sh.from_arrays([np.zeros(3)])
    with pytest.raises(sh.InvalidArgumentError, match="scalar"):
        sh.from_arrays({"a": np.float32(1.0)})
    with pytest.raises(sh.SchemaError, match="padded_batch"):
        sh.from_arrays({"a": [np.zeros((2, 3)), np.zeros((2, 4))]})
    with pytest.raises(sh.InvalidArgumentError, match="element 1 has features"):
        sh.from_list([{"a": 1}, {"b": 2}])


def test_batch_size_zero():
    ds = sh.from_arrays({"x": np.arange(4)})
    with pytest.raises(sh.InvalidArgumentError, match=r"batch\(batch_size=0\): must be >= 1"):
        ds.batch(0)
    with pytest.raises(sh.InvalidArgumentError):
        ds.padded_batch(0)
    with pytest.raises(sh.InvalidArgumentError):
        ds.batch(-1)


def test_fixed_pad_shape_smaller_than_an_element():
    ds = sh.from_arrays({"x": [np.ones(3), np.ones(5)]}).padded_batch(2, padded_shapes={"x": [4]})
    with pytest.raises(sh.SchemaError, match=r"element 1 of the batch has shape \[5\]"):
        list(ds)


def test_crop_longer_than_clip_is_an_error_or_pads():
    ds = sh.from_arrays({"x": [np.ones(3, np.int16), np.ones(8, np.int16)]})
    with pytest.raises(sh.SchemaError, match="element 0.*crop size 5"):
        list(ds.random_crop("x", 5, seed=1).iter(0))
    out = list(ds.random_crop("x", 5, seed=1, pad=True).iter(0))
    assert out[0]["x"].tolist() == [1, 1, 1, 0, 0]
    assert out[1]["x"].shape == (5,)


class MyError(Exception):
    pass


def test_map_function_exception_reaches_the_caller_as_itself():
    raised = []

    def f(e):
        if int(e["x"]) == 3:
            err = MyError("bad element")
            raised.append(err)
            raise err
        return e

    ds = sh.from_arrays({"x": np.arange(6)}).map(f).batch(2).prefetch(2)
    with pytest.raises(MyError) as info:
        list(ds)
    assert info.value is raised[0]
    if sys.version_info >= (3, 11):  # add_note exists from 3.11
        notes = " ".join(info.value.__notes__)
        assert "element 3" in notes
        assert "map[test_map_function_exception_reaches_the_caller_as_itself.<locals>.f]" in notes
    # Random access too.
    with pytest.raises(MyError):
        sh.from_arrays({"x": np.arange(6)}).map(f)[3]


def test_filter_exception_and_bad_map_result():
    ds = sh.from_arrays({"x": np.arange(3)})
    with pytest.raises(ZeroDivisionError):
        list(ds.filter(lambda e: 1 / 0))
    with pytest.raises(TypeError, match="expected a dict"):
        list(ds.map(lambda e: 5))
    with pytest.raises(sh.InvalidArgumentError, match="complex128"):
        list(ds.map(lambda e: {"y": np.zeros(2, complex)}))


def test_rust_side_errors_arrive_as_python_exceptions():
    ds = sh.from_arrays({"x": np.arange(3), "s": np.array([b"a", b"b", b"c"])})
    with pytest.raises(sh.SchemaError, match="no feature"):
        list(ds.random_crop("missing", 1, seed=0))
    with pytest.raises(sh.SchemaError, match="cannot cast bytes"):
        list(ds.cast("s", "float32"))
    with pytest.raises(sh.InvalidArgumentError, match="stream"):
        ds.filter(lambda e: True).shuffle(seed=1)
    with pytest.raises(sh.InvalidArgumentError, match="unknown dtype"):
        ds.cast("x", "complex64")
    with pytest.raises(sh.InvalidArgumentError, match=r"prefetch\(buffer_size=0\)"):
        ds.prefetch(0)


def test_a_thread_the_os_refuses_is_an_os_error_without_a_file_name():
    # In a child process whose address space is capped just above what it uses, the prefetch
    # thread's stack cannot be mapped: the error says which op needed a thread, carries the OS
    # errno, and names no file (it used to be an OSError on a file called "<thread>").
    code = """
import resource, numpy as np, stokehold as sh
ds = sh.from_arrays({"x": np.arange(10)}).prefetch(2)
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 20), resource.RLIM_INFINITY))
try:
    next(iter(ds))
except sh.StokeholdIOError as e:
    print(type(e).__name__, e.errno is not None, e.filename, "|", e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "StokeholdIOError True None | " in out.stdout, (out.stdout, out.stderr)
    assert "prefetch(2): could not start a thread" in out.stdout


def test_sizes_that_used_to_abort_the_interpreter_take_what_they_hold():
    # Each of these allocated its whole size up front and aborted the process (SIGABRT); they run
    # in a child so that a regression fails this test instead of killing the test run.
    code = """
import numpy as np, stokehold as sh
ds = sh.Dataset.range(10)
stream = ds.filter(lambda e: True)
assert sorted(int(e["x"]) for e in stream.shuffle(10**9, seed=1)) == list(range(10))
assert [int(e["x"]) for e in ds.prefetch(10**9)] == list(range(10))
assert [b["x"].tolist() for b in stream.batch(10**9)] == [list(range(10))]
assert len(list(stream.group_by_window(lambda e: 0, window_size=10**9))) == 1
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])


def test_thread_counts_past_the_limit_are_refused():
    ds = sh.Dataset.range(4)
    with pytest.raises(sh.InvalidArgumentError, match=r"map\(num_parallel_calls=1000000\): at most 1024"):
        ds.map(lambda e: e, num_parallel_calls=10**6)
    with pytest.raises(sh.InvalidArgumentError, match=r"with_options\(cores=1000000\): at most 1024"):
        ds.with_options(cores=10**6)
    with pytest.raises(sh.InvalidArgumentError, match=r"write_shards\(threads=1000000\)"):
        sh.write_shards(ds, "/nonexistent", threads=10**6)
