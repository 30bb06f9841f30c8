"""Shard folders from Python: write / open round trips (ragged, strings, compression), zero-copy
reads, rank sharding, windowed shuffle, caches, checkpoints (incl. elastic resume), bad input."""

import json
import os

import numpy as np
import pytest

import stokehold as sh


def make(n=50):
    rng = np.random.default_rng(1)
    return sh.from_arrays(
        {
            "id": np.arange(n, dtype=np.int64),
            "v": [rng.standard_normal(int(k % 6)).astype(np.float32) for k in range(n)],
            "s": np.array([f"rec-{k}".encode() for k in range(n)], dtype=object),
        }
    )


def ids(ds, epoch=0):
    return [int(e["id"]) for e in ds.iter(epoch)]


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_round_trip_every_compression(tmp_path, compression):
    src = make()
    m = sh.write_shards(src, tmp_path / "ds", shard_size=512, compression=compression)
    assert m["num_records"] == 50 and len(m["shards"]) > 2
    assert {f["name"]: f["dtype"] for f in m["schema"]} == {"id": "int64", "v": "float32", "s": "bytes"}
    ds = sh.open_shards(tmp_path / "ds")
    assert len(ds) == 50
    for i in (0, 7, 49, -1):
        a, b = ds[i], src[i]
        assert int(a["id"]) == int(b["id"])
        np.testing.assert_array_equal(a["v"], b["v"])
        assert a["s"] == b["s"]
    sh.verify_shards(tmp_path / "ds")


def test_get_batch_reads_any_indices_as_one_batch(tmp_path):
    src = sh.from_arrays({"id": np.arange(30), "x": np.arange(60, dtype=np.float32).reshape(30, 2)})
    sh.write_shards(src, tmp_path / "ds", shard_size=256)
    for ds in (sh.open_shards(tmp_path / "ds"), make()):
        b = ds.get_batch([4, 0, 4, -1])
        assert b["id"].tolist() == [4, 0, 4, len(ds) - 1]
    b = sh.open_shards(tmp_path / "ds").get_batch(np.array([[2, 3], [29, 1]]))
    np.testing.assert_array_equal(b["x"], src.get_batch([2, 3, 29, 1])["x"])
    with pytest.raises(IndexError):
        sh.open_shards(tmp_path / "ds").get_batch([1, 30])


def test_uncompressed_arrays_are_read_only_views(tmp_path):
    sh.write_shards(make(), tmp_path / "ds")
    e = sh.open_shards(tmp_path / "ds")[5]
    assert not e["v"].flags.writeable


def test_ragged_batches_round_trip(tmp_path):
    batches = make().batch(4)
    sh.write_shards(batches, tmp_path / "b", compression="lz4")
    back = list(sh.open_shards(tmp_path / "b"))
    want = list(batches)
    assert len(back) == len(want) == 13
    for x, y in zip(back, want):
        assert x["v"].row_lengths().tolist() == y["v"].row_lengths().tolist()
        np.testing.assert_array_equal(x["v"].values, y["v"].values)


def test_progress_and_pre_shuffle(tmp_path):
    seen = []
    sh.write_shards(make(), tmp_path / "p", seed=3, progress=lambda n, total: seen.append((n, total)))
    assert seen[-1] == (50, 50)
    order = ids(sh.open_shards(tmp_path / "p"))
    assert order != list(range(50)) and sorted(order) == list(range(50))


def test_shard_worker_split_partition_and_policies(tmp_path):
    sh.write_shards(make(50), tmp_path / "ds")
    ds = sh.open_shards(tmp_path / "ds").shuffle(seed=2)
    parts = [
        [int(x) for b in ds.shard(4, r).worker_split(3, w).batch(3) for x in b["id"]]
        for r in range(4)
        for w in range(3)
    ]
    flat = sorted(x for p in parts for x in p)
    assert flat == list(range(50))
    assert all(len(ds.shard(4, r, policy="drop")) == 12 for r in range(4))
    assert all(len(ds.shard(4, r, policy="pad")) == 13 for r in range(4))
    with pytest.raises(sh.InvalidArgumentError):
        ds.shard(4, 0, policy="round_robin")
    assert ids(ds.slice(10, 20)) == ids(ds)[10:20]


def test_window_shuffle_is_a_permutation_with_local_runs(tmp_path):
    sh.write_shards(make(50), tmp_path / "ds")
    ds = sh.open_shards(tmp_path / "ds").window_shuffle(10, seed=4)
    order = ids(ds)
    assert sorted(order) == list(range(50)) and order != list(range(50))
    assert len({x // 10 for x in order[:10]}) == 1
    assert ids(ds, 1) != order


def test_state_resumes_exactly_and_elastic_resume_covers_the_epoch(tmp_path):
    sh.write_shards(make(50), tmp_path / "ds")
    ds = sh.open_shards(tmp_path / "ds").shuffle(seed=9).batch(4)
    full = [b["id"].tolist() for b in ds.iter(0)]
    it = ds.iter(0)
    head = [next(it)["id"].tolist() for _ in range(5)]
    state = json.loads(json.dumps(it.get_state()))
    it2 = ds.iter(0)
    it2.set_state(state)
    assert head + [b["id"].tolist() for b in it2] == full

    base = sh.open_shards(tmp_path / "ds").shuffle(seed=1)
    seen, states = [], []
    for r in range(4):
        it = base.elastic_shard(4, r).iter(0)
        seen += [int(next(it)["id"]) for _ in range(3)]
        states.append(it.get_state())
    for r in range(3):
        it = base.elastic_shard(3, r).iter(0)
        it.set_state(states[0])
        seen += [int(e["id"]) for e in it]
    assert sorted(seen) == list(range(50))


def test_caches_memory_and_disk(tmp_path):
    ds = make(20).shuffle(seed=1).cache()
    assert ids(ds, 0) == ids(ds, 3)
    disk = make(20).cache(tmp_path / "c")
    first = ids(disk, 0)
    assert (tmp_path / "c" / "manifest.json").exists()
    assert ids(disk, 1) == first == list(range(20))


def test_bad_input_is_clear(tmp_path):
    sh.write_shards(make(10), tmp_path / "ds")
    with pytest.raises(sh.InvalidArgumentError, match="overwrite"):
        sh.write_shards(make(10), tmp_path / "ds")
    os.remove(tmp_path / "ds" / "manifest.json")
    with pytest.raises(sh.DataCorruptionError, match="incomplete dataset"):
        sh.open_shards(tmp_path / "ds")
    sh.write_shards(make(10), tmp_path / "v")
    mpath = tmp_path / "v" / "manifest.json"
    m = json.loads(mpath.read_text())
    m["version"] = 7
    mpath.write_text(json.dumps(m))
    with pytest.raises(sh.DataCorruptionError, match="unknown format version 7"):
        sh.open_shards(tmp_path / "v")
    m["version"] = 1
    m["shards"][0]["file"] = "../../etc/passwd"
    mpath.write_text(json.dumps(m))
    with pytest.raises(sh.DataCorruptionError, match="not a plain name"):
        sh.open_shards(tmp_path / "v")
    sh.write_shards(make(10), tmp_path / "w")
    it = sh.open_shards(tmp_path / "w").shuffle(seed=1).iter(0)
    next(it)
    other = sh.open_shards(tmp_path / "w").shuffle(seed=2).iter(0)
    with pytest.raises(sh.StateError, match="another pipeline"):
        other.set_state(it.get_state())
