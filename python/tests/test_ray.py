"""stokehold.ray on a real local Ray cluster (one per module: ``ray.init(num_cpus=2)``): the Ray
Data source and sink, from_ray over streaming_split, and the actor map with actor deaths and
checkpoints. Marked ``ray``; skipped with a reason where Ray is not installed (``make test``
installs it)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import stokehold

ray = pytest.importorskip("ray", reason="ray[data] is not installed (make test installs it)")
shray = pytest.importorskip("stokehold.ray")

pytestmark = [
    pytest.mark.ray,
    # Ray's own modules warn (deprecations, resource hints); they are not stokehold's to fix.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.timeout(120, method="thread"),
]

N = 300


@pytest.fixture(scope="module", autouse=True)
def cluster():
    # Ray workers cannot import this test module: its functions and classes travel by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"RAY_DEDUP_LOGS": "0"}})
    # No global preserve_order: read_stokehold and write_stokehold keep the order themselves.
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def _elements():
    rng = np.random.default_rng(0)
    return {
        "x": np.arange(N, dtype=np.int64),
        "img": rng.integers(0, 255, size=(N, 2, 3), dtype=np.uint8),
        "v": [rng.standard_normal(i % 7 + 1).astype(np.float32) for i in range(N)],
        "s": np.array([b"r%d" % i for i in range(N)], dtype=object),
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ray") / "src")
    stokehold.write_shards(stokehold.from_arrays(_elements()), path, shard_size=4096)
    return path


def _rows(ray_ds):
    """Every row of a Ray dataset, in order, as dicts of numpy values."""
    out = []
    for b in ray_ds.iter_batches(batch_size=64, batch_format="numpy"):
        n = len(next(iter(b.values())))
        out.extend({k: b[k][i] for k in b} for i in range(n))
    return out


def _same(a, b):
    assert a.keys() == b.keys(), (a.keys(), b.keys())
    for k in a:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def _folder_bytes(path):
    return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))
            if os.path.isfile(os.path.join(path, n)) and not n.startswith(".")}


def test_read_stokehold_equals_open_shards_row_for_row(folder):
    shards = stokehold.open_shards(folder)
    ds = shray.read_stokehold(folder, block_rows=50)
    assert ds.count() == N
    rows = _rows(ds)
    assert len(rows) == N
    for i, row in enumerate(rows):
        assert int(row["_index"]) == i
        row.pop("_index")
        _same(row, shards[i])


def test_read_tasks_follow_the_shards_with_size_estimates(folder):
    src = shray.StokeholdDatasource(folder)
    tasks = src.get_read_tasks(1)
    manifest = stokehold.open_shards(folder)  # opens (and checks) the same folder
    assert len(manifest) == sum(t.metadata.num_rows for t in tasks) == N
    assert len(tasks) > 1  # one per shard: shard_size=4096 made several
    assert all(t.metadata.size_bytes > 0 for t in tasks)
    # Ray asks for more tasks than shards: shards are split, into ranges of at least 4 blocks.
    assert len(src.get_read_tasks(200)) == len(tasks)
    small = shray.StokeholdDatasource(folder, block_rows=2)
    more = small.get_read_tasks(4 * len(tasks))
    assert len(more) > len(tasks) and sum(t.metadata.num_rows for t in more) == N
    assert min(t.metadata.num_rows for t in more) >= 8


def test_read_stokehold_reads_indexed_tfrecords_in_order(tmp_path):
    records = stokehold.from_arrays({"record": np.array([b"rec-%d" % i for i in range(50)], dtype=object)})
    files = stokehold.tfrecord.write_tfrecord(records, tmp_path, num_shards=3)
    rows = _rows(shray.read_stokehold(files, block_rows=7))
    assert [bytes(r["record"]) for r in rows] == [b"rec-%d" % i for i in range(50)]
    assert [int(r["_index"]) for r in rows] == list(range(50))


def test_streaming_split_by_two_actors_covers_every_row_once(folder):
    @ray.remote(num_cpus=0)
    class Consumer:
        def run(self, it):
            import stokehold.ray as sr

            return [int(i) for b in sr.from_ray(it, batch_size=32) for i in b["_index"]]

    splits = shray.read_stokehold(folder, block_rows=40).streaming_split(2, equal=False)
    consumers = [Consumer.remote() for _ in splits]
    got = ray.get([c.run.remote(it) for c, it in zip(consumers, splits)])
    assert all(len(g) > 0 for g in got)
    assert sorted(got[0] + got[1]) == list(range(N))


def test_from_ray_batches_unbatch_and_resume(folder):
    ds = shray.from_ray(shray.read_stokehold(folder, block_rows=64).iterator(), batch_size=16).unbatch()
    rows = [int(e["_index"]) for e in ds]
    assert rows == list(range(N))
    it = ds.iter(epoch=0)
    head = [int(next(it)["x"]) for _ in range(37)]
    state = it.get_state()
    rest = [int(e["x"]) for e in it]
    it2 = ds.iter(epoch=0)
    it2.set_state(state)
    assert head + [int(e["x"]) for e in it2] == list(range(N))
    assert rest == list(range(37, N))


def test_write_stokehold_1_and_4_tasks_give_byte_identical_folders(folder, tmp_path):
    src = shray.read_stokehold(folder, block_rows=30)
    m1 = shray.write_stokehold(src, tmp_path / "one", shard_size=4096, num_tasks=1)
    m4 = shray.write_stokehold(src, tmp_path / "four", shard_size=4096, num_tasks=4)
    assert m1 == m4 and m1["num_records"] == N and len(m1["shards"]) > 1
    assert _folder_bytes(tmp_path / "one") == _folder_bytes(tmp_path / "four")
    assert not [n for n in os.listdir(tmp_path / "four") if n.startswith(".stokehold-ray")]
    # The shard files are those write_shards makes from the same records.
    whole = tmp_path / "whole"
    stokehold.write_shards(stokehold.open_shards(folder), whole, shard_size=4096)
    a, b = _folder_bytes(whole), _folder_bytes(tmp_path / "four")
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] for k in a if k != "manifest.json")
    back = stokehold.open_shards(tmp_path / "four")
    for i in (0, 1, 150, N - 1):
        _same(back[i], stokehold.open_shards(folder)[i])


class _DyingSink(shray.StokeholdDatasink):
    """The real sink, whose task process dies (SIGKILL-like ``os._exit``) after writing its first
    part folder of the block holding record 120: a task killed mid-write. ``once``: only on the
    first attempt (a marker file remembers it), so Ray's retry then succeeds."""

    def __init__(self, path, marker, once):
        super().__init__(str(path), 4096, "none", 3, False, "_index")
        self.marker, self.once = marker, once

    def write(self, blocks, ctx):
        def watch():
            for b in blocks:
                idx = b.column("_index").to_numpy()
                if idx[0] <= 120 < idx[-1] + 1 and not (self.once and os.path.exists(self.marker)):
                    open(self.marker, "w").close()
                    os._exit(1)
                yield b

        return super().write(watch(), ctx)


def test_a_task_killed_mid_write_leaves_nothing_complete(folder, tmp_path):
    out = tmp_path / "out"
    src = shray.read_stokehold(folder, block_rows=30).materialize()
    with pytest.raises(ray.exceptions.RayError):
        src.write_datasink(_DyingSink(out, str(tmp_path / "m"), False), ray_remote_args={"max_retries": 0})
    assert os.path.exists(tmp_path / "m")
    with pytest.raises(stokehold.DataCorruptionError, match="incomplete"):
        stokehold.open_shards(out)


def test_a_task_killed_once_is_retried_into_the_same_folder(folder, tmp_path):
    src = shray.read_stokehold(folder, block_rows=30).materialize()
    shray.write_stokehold(src, tmp_path / "clean", shard_size=4096)
    src.write_datasink(_DyingSink(tmp_path / "retried", str(tmp_path / "m"), True), ray_remote_args={"max_retries": 2})
    assert os.path.exists(tmp_path / "m")
    assert _folder_bytes(tmp_path / "retried") == _folder_bytes(tmp_path / "clean")


def test_write_refuses_a_complete_folder_without_overwrite(folder, tmp_path):
    src = shray.read_stokehold(folder)
    shray.write_stokehold(src, tmp_path / "o")
    with pytest.raises(stokehold.InvalidArgumentError, match="overwrite"):
        shray.write_stokehold(src, tmp_path / "o")
    assert shray.write_stokehold(src, tmp_path / "o", overwrite=True)["num_records"] == N


def _work(e):
    # CPU-bound and deterministic: a few hundred numpy ops on a small array.
    v = np.float64(e["x"]) + np.arange(64, dtype=np.float64)
    for _ in range(20):
        v = np.sin(v) * 1.5 + 0.1
    return {"x": e["x"], "y": v}


def test_remote_map_equals_local_map():
    ds = stokehold.from_arrays({"x": np.arange(200, dtype=np.int64)})
    want = list(ds.map(_work))
    got = list(ds.remote_map(_work, num_actors=2, num_cpus_per_actor=0.5))
    assert len(got) == len(want) == 200
    for a, b in zip(got, want):
        _same(a, b)


def test_remote_map_raises_the_functions_own_error():
    def bad(e):
        if int(e["x"]) == 7:
            raise KeyError("seven")
        return e

    ds = stokehold.from_arrays({"x": np.arange(20)}).remote_map(bad, num_actors=1, num_cpus_per_actor=0.5)
    with pytest.raises(KeyError, match="seven"):
        list(ds)


def test_an_actor_killed_mid_epoch_loses_and_duplicates_nothing():
    ds = stokehold.from_arrays({"x": np.arange(300, dtype=np.int64)})
    want = [int(e["x"]) for e in ds.map(_work)]
    remote = ds.remote_map(_work, num_actors=2, num_cpus_per_actor=0.5)
    it = iter(remote)
    got = [int(next(it)["x"]) for _ in range(60)]
    victims = shray.actors(remote)
    assert len(victims) == 2
    ray.kill(victims[0])
    got += [int(e["x"]) for e in it]
    assert got == want
    assert shray._pools[remote].restarts >= 1
    assert victims[0] not in shray.actors(remote)


def test_resume_from_a_checkpoint_taken_while_the_remote_stage_runs_is_exact():
    ds = (stokehold.from_arrays({"x": np.arange(240, dtype=np.int64)})
          .shuffle(seed=3).remote_map(_work, num_actors=2, num_cpus_per_actor=0.5).batch(8))
    full = [b["x"].tolist() for b in ds.iter(epoch=1)]
    it = ds.iter(epoch=1)
    head = [next(it)["x"].tolist() for _ in range(11)]
    state = it.get_state()
    it2 = ds.iter(epoch=1)
    it2.set_state(state)
    assert head + [b["x"].tolist() for b in it2] == full


def test_importing_stokehold_does_not_import_ray():
    code = "import sys, stokehold\nprint('ray' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
