"""open_shards through the local shard cache (docs/CACHE.md): the same records as a direct open,
shards copied once and reused by a second open, a cap smaller than the folder refused clearly,
and argument checks. The cache's crash, multi-process and eviction tests are Rust
(``crates/stokehold-io/tests/it/local_cache.rs``)."""

import os

import numpy as np
import pytest

import stokehold as sh


@pytest.fixture
def folder(tmp_path):
    ds = sh.from_arrays({"x": np.arange(600), "v": np.arange(600 * 8, dtype=np.float32).reshape(600, 8)})
    path = tmp_path / "ds"
    sh.write_shards(ds, path, shard_size=4096)
    return path


def entries(cache):
    return sorted(n for n in os.listdir(cache) if n.endswith(".shard"))


def test_cached_open_equals_direct_open_and_reuses_copies(folder, tmp_path):
    cache = tmp_path / "cache"
    direct = sh.open_shards(folder)
    cached = sh.open_shards(folder, cache_dir=cache, cache_bytes=1 << 30)
    assert len(cached) == len(direct) == 600
    order = [int(e["x"]) for e in cached.global_shuffle(seed=3)]
    assert order == [int(e["x"]) for e in direct.global_shuffle(seed=3)]
    np.testing.assert_array_equal(cached[599]["v"], direct[599]["v"])
    copies = entries(cache)
    n_shards = len([f for f in os.listdir(folder) if f.endswith(".stk")])
    assert len(copies) == n_shards > 1
    mtimes = {n: os.stat(cache / n).st_mtime_ns for n in copies}
    again = sh.open_shards(folder, cache_dir=cache, cache_bytes=1 << 30)
    assert int(again[10]["x"]) == 10
    # Not rewritten: the same files, only their LRU stamps moved forward.
    assert entries(cache) == copies
    assert all(os.stat(cache / n).st_mtime_ns >= mtimes[n] for n in copies)


def test_folder_larger_than_cap_is_refused(folder, tmp_path):
    with pytest.raises(sh.InvalidArgumentError, match="raise the cache cap"):
        sh.open_shards(folder, cache_dir=tmp_path / "c", cache_bytes=1000)


def test_cache_arguments_checked(folder, tmp_path):
    with pytest.raises(sh.InvalidArgumentError, match="cache_bytes"):
        sh.open_shards(folder, cache_dir=tmp_path / "c")
    with pytest.raises(sh.InvalidArgumentError, match="cache_bytes"):
        sh.open_shards(folder, cache_bytes=1 << 20)
    with pytest.raises(sh.InvalidArgumentError, match="cache_bytes"):
        sh.open_shards(folder, cache_dir=tmp_path / "c", cache_bytes=0)
