"""Adversarial cases reached from Python (issue 18): what a hostile or unlucky user passes.

Each test failed on the code before its fix (main 2c81873); docs/RELIABILITY.md has the table of
before / after. The Rust side of the suite is ``crates/stokehold-{core,io}/tests/it/adversarial.rs``.
"""

import os

import numpy as np
import pytest

import stokehold as sh


def xs(items):
    return [int(e["x"]) for e in items]


def bad_at(k):
    def f(e):
        if int(e["x"]) == k:
            raise ValueError(f"bad element {k}")
        return e

    return f


def catch_and_go_on(it, cap=100):
    """The user's usual loop: catch, log, go on. Returns (elements, errors)."""
    got, errors = [], 0
    for _ in range(cap):
        try:
            got.append(next(it))
        except StopIteration:
            break
        except ValueError:
            errors += 1
    return got, errors


def test_an_epoch_past_the_u64_index_range_is_an_error_not_empty():
    ds = sh.Dataset.range(10)
    with pytest.raises(sh.InvalidArgumentError, match="past the 64-bit index range"):
        list(ds.iter(epoch=2**62))
    with pytest.raises(sh.InvalidArgumentError, match="past the 64-bit index range"):
        list(ds.shuffle(1).iter(epoch=2**63))


@pytest.mark.parametrize(
    "how",
    ["random-access map", "map + prefetch", "parallel map", "map + batch"],
)
def test_after_an_elements_error_the_iterator_goes_on_as_tf_data(how):
    ds = sh.Dataset.range(10)
    ds = {
        "random-access map": ds.map(bad_at(3)),
        "map + prefetch": ds.map(bad_at(3)).prefetch(4),
        "parallel map": ds.map(bad_at(3), num_parallel_calls=4),
        "map + batch": ds.map(bad_at(3)).batch(2),
    }[how]
    it = iter(ds)
    got, errors = catch_and_go_on(it)
    assert errors == 1, f"{how}: the error is raised once"
    flat = [int(v) for e in got for v in np.atleast_1d(e["x"])]
    # tf.data's rule: the next call goes on after the failed element (a batch that held it is
    # the one left out), as ignore_errors() would leave it out.
    assert flat == ([0, 1, 4, 5, 6, 7, 8, 9] if how == "map + batch" else [0, 1, 2, 4, 5, 6, 7, 8, 9])
    with pytest.raises(StopIteration):
        next(it)


def test_a_caught_error_under_epochs_is_left_out_of_that_epoch_only():
    ds = sh.Dataset.range(10).map(bad_at(3))
    lens, errors = [], 0
    for ep in ds.epochs(3):
        got, e = catch_and_go_on(iter(ep))
        lens.append(len(got))
        errors += e
    assert (lens, errors) == ([9, 9, 9], 3)


def test_ignore_errors_skips_and_logs():
    ds = sh.Dataset.range(10).map(bad_at(3)).ignore_errors()
    assert xs(ds) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    log = ds.skipped()
    assert log.count == 1 and bool(log)
    assert log.first[0].index == 3 and "bad element 3" in log.first[0].error
    par = sh.Dataset.range(10).map(bad_at(3), num_parallel_calls=3).ignore_errors()
    assert xs(par) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert not sh.Dataset.range(3).skipped()


def _npy_folder(tmp_path, n, bad):
    for i in range(n):
        p = tmp_path / f"{i:02d}.npy"
        if i in bad:
            p.write_bytes(b"\x93NUMPY garbage")
        else:
            np.save(p, np.full(3, i, dtype=np.int64))
    return sh.Dataset.list_files(str(tmp_path / "*.npy"), shuffle=False)


def test_load_npy_and_read_file_skip_policy(tmp_path):
    files = _npy_folder(tmp_path, 6, bad={2, 4})
    with pytest.raises(sh.StokeholdError):
        list(files.load_npy())
    ds = files.load_npy(on_error="skip")
    got = [int(e["array"][0]) for e in ds]
    assert got == [0, 1, 3, 5]
    log = ds.skipped()
    assert log.count == 2 and "02.npy" in log.first[0].error
    os.remove(tmp_path / "05.npy")
    rf = files.read_file(on_error="skip")
    assert len(list(rf)) == 5 and rf.skipped().count == 1
    with pytest.raises(sh.InvalidArgumentError, match="on_error"):
        files.load_npy(on_error="ignore")


def test_write_shards_progress_exception_propagates_and_leaves_no_folder(tmp_path):
    class Stop(Exception):
        pass

    def progress(done, total):
        raise Stop("from progress")

    ds = sh.from_arrays({"x": np.arange(5000)})
    with pytest.raises(Stop):
        sh.write_shards(ds, tmp_path / "out", progress=progress)
    with pytest.raises(sh.StokeholdError):
        sh.open_shards(tmp_path / "out")


def test_a_plain_prefetch_is_budgeted_and_in_stats():
    ds = sh.from_arrays({"x": np.zeros((16, 1 << 16), dtype=np.uint8)}).prefetch(4)
    assert len(list(ds)) == 16
    st = ds.stats()
    assert st is not None and st["memory_peak"] >= 1 << 16
    assert any(op["op"].startswith("prefetch") for op in st["ops"])


def test_gzip_record_over_the_memory_budget_is_corruption(tmp_path):
    big = sh.from_list([{"record": b"a" * (4 << 20)}])  # 4 MiB, a few KiB compressed
    files = sh.tfrecord.write_tfrecord(big, tmp_path, compression="GZIP", index=False)
    assert os.path.getsize(files[0]) < 64 << 10
    ds = sh.TFRecordDataset(files, compression="GZIP").with_options(memory_budget=1 << 20)
    with pytest.raises(sh.DataCorruptionError, match="memory budget"):
        list(ds)
    assert len(list(sh.TFRecordDataset(files, compression="GZIP"))) == 1


def test_next_many_returns_the_elements_before_an_error_then_raises_it():
    it = iter(sh.Dataset.range(10).map(bad_at(3)))
    assert [int(e["x"]) for e in it.next_many(10)] == [0, 1, 2]
    with pytest.raises(ValueError, match="bad element 3"):
        it.next_many(10)
    assert [int(e["x"]) for e in it.next_many(10)] == [4, 5, 6, 7, 8, 9]  # goes on after it
    assert it.next_many(10) == []
