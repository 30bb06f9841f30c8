"""Determinism, epochs, ops, padded_batch, state save / restore."""

import json

import numpy as np
import pytest

import stokehold as sh


def make(n=40, seed=0):
    rng = np.random.default_rng(seed)
    audio = [rng.integers(-30000, 30000, size=int(rng.integers(10, 60)), dtype=np.int16) for _ in range(n)]
    return sh.from_arrays({"audio": audio, "label": np.arange(n, dtype=np.int64)})


def pipeline(depth=None, seed=5):
    ds = make().shuffle(seed=seed).random_crop("audio", 8, seed=seed + 1).batch(6)
    return ds.prefetch(depth) if depth else ds


def run(ds, epoch=0):
    return [(b["audio"].tobytes(), b["label"].tobytes()) for b in ds.iter(epoch)]


def test_same_seed_bitwise_identical_across_runs_and_prefetch_depths():
    ref = run(pipeline())
    assert len(ref) == 7
    assert run(pipeline()) == ref
    for depth in [1, 2, 7]:
        assert run(pipeline(depth)) == ref
    assert run(pipeline(seed=6)) != ref


def test_each_for_loop_is_a_new_epoch_with_a_new_order():
    ds = pipeline(2)
    orders = [[b["label"].tolist() for b in ds] for _ in range(3)]
    assert ds.epoch == 3
    assert orders[0] != orders[1] != orders[2]
    assert sorted(sum(orders[0], [])) == list(range(40))
    assert orders[1] == [b["label"].tolist() for b in ds.iter(epoch=1)]
    assert [b["label"].tolist() for b in ds.as_numpy_iterator()] == [b["label"].tolist() for b in ds.iter(epoch=3)]


def test_epochs_loader_matches_per_epoch_iteration():
    ds = pipeline(3)
    want = [run(ds, e) for e in range(4)]
    loader = ds.epochs(4)
    assert len(loader) == 4
    got = []
    for ep in loader:
        assert len(ep) == 7
        got.append([(b["audio"].tobytes(), b["label"].tobytes()) for b in ep])
    assert got == want
    assert ds.epoch == 4
    # Leaving an epoch early skips its rest.
    loader = pipeline(2).epochs(2)
    first = next(loader)
    next(first)
    second = next(loader)
    assert second.epoch == 1
    assert [b["label"].tobytes() for b in second] == [x[1] for x in want[1]]
    # A stream's epochs are fresh passes, the same as per-epoch iteration (issue 48).
    stream = make().filter(lambda e: True)
    assert [[e["label"].tolist() for e in ep] for ep in stream.epochs(2)] == \
        [[e["label"].tolist() for e in stream.iter(epoch=k)] for k in (0, 1)]


def test_padded_batch_shapes_values_and_lengths():
    rows = [np.arange(1, n + 1, dtype=np.float32) for n in (3, 1, 4, 2)]
    grids = [np.ones((r, 2), np.int32) for r in (2, 3, 1, 3)]
    ds = sh.from_arrays({"x": rows, "g": grids, "y": np.arange(4)})
    b = list(ds.padded_batch(3, padding_values={"x": -1.0, "g": 7}).iter(0))
    assert b[0]["x"].shape == (3, 4)
    assert b[0]["x"].tolist() == [[1, 2, 3, -1], [1, -1, -1, -1], [1, 2, 3, 4]]
    assert b[0]["x_lengths"].tolist() == [3, 1, 4]
    assert b[0]["g"].shape == (3, 3, 2)
    assert b[0]["g_lengths"].tolist() == [[2, 2], [3, 2], [1, 2]]
    assert b[0]["g"][2].tolist() == [[1, 1], [7, 7], [7, 7]]
    assert b[0]["y"].tolist() == [0, 1, 2]
    assert b[1]["x"].tolist() == [[1, 2]]
    fixed = list(ds.padded_batch(2, padded_shapes={"x": [6], "g": [None, 2]}, drop_remainder=True).iter(0))
    assert [f["x"].shape for f in fixed] == [(2, 6), (2, 6)]
    assert fixed[1]["x"].tolist() == [[1, 2, 3, 4, 0, 0], [1, 2, 0, 0, 0, 0]]
    assert fixed[0]["g"].shape == (2, 3, 2)


def test_ops_take_skip_repeat_enumerate_filter_cast_pad_to():
    ds = sh.from_arrays({"x": np.arange(10, dtype=np.int32)})
    assert [int(e["x"]) for e in ds.skip(2).take(3)] == [2, 3, 4]
    assert [int(e["x"]) for e in ds.take(3).repeat(2)] == [0, 1, 2, 0, 1, 2]
    e = list(ds.shuffle(seed=1).enumerate())
    assert [int(x["index"]) for x in e] == list(range(10))
    assert [int(x["x"]) for x in ds.filter(lambda e: e["x"] % 3 == 0)] == [0, 3, 6, 9]
    c = ds.cast("x", np.float16)[3]["x"]
    assert c.dtype == np.float16 and c == 3
    p = sh.from_arrays({"a": [np.ones(2), np.ones(5)]}).pad_to("a", 4, value=-2)
    assert [x["a"].tolist() for x in p] == [[1, 1, -2, -2], [1, 1, 1, 1]]
    buf = [int(e["x"]) for e in ds.shuffle(seed=3, buffer_size=4).iter(0)]
    assert sorted(buf) == list(range(10)) and buf != list(range(10))
    assert "shuffle(seed=" in ds.shuffle().describe()


def test_map_sees_numpy_and_returns_scalars_and_bytes():
    ds = sh.from_arrays({"x": np.arange(4, dtype=np.float32)})

    def f(e):
        assert isinstance(e["x"], np.ndarray)
        return {"y": e["x"] * 2, "n": 7, "tag": b"t"}

    out = ds.map(f)[2]
    assert out["y"] == 4.0 and out["n"] == 7 and out["tag"].item() == b"t"


@pytest.mark.parametrize("depth", [None, 2])
def test_state_save_restore_mid_epoch_equals_uninterrupted(depth):
    ds = pipeline(depth)
    full = run(ds, 2)
    it = ds.iter(epoch=2)
    head = [next(it) for _ in range(3)]
    state = json.loads(json.dumps(it.get_state()))
    it2 = ds.iter(epoch=0)
    it2.set_state(state)
    assert it2.epoch == 2
    tail = [(b["audio"].tobytes(), b["label"].tobytes()) for b in it2]
    assert [(b["audio"].tobytes(), b["label"].tobytes()) for b in head] + tail == full


def test_a_shuffle_buffer_checkpoint_is_a_few_counts_even_behind_prefetch():
    # tf.data's habit: shuffle(buffer).batch().prefetch(AUTOTUNE). The state holds counts, not
    # the buffer's 10000 positions, and restores to the same batches.
    ds = sh.Dataset.range(30_000).shuffle(10_000, seed=2).batch(32).prefetch(sh.AUTOTUNE)
    it = iter(ds)
    for _ in range(100):
        next(it)
    state = it.get_state()
    assert len(json.dumps(state)) < 1000, state
    again = iter(ds)
    again.set_state(state)
    for _ in range(50):
        assert next(again)["x"].tolist() == next(it)["x"].tolist()


def test_a_shuffle_buffer_checkpoint_after_a_skipped_error_restores_the_same_elements():
    def f(e):
        if int(e["x"]) == 5:
            raise ValueError("bad 5")
        return e

    ds = sh.Dataset.range(40).map(f).shuffle(8, seed=1).ignore_errors()
    it = iter(ds)
    for _ in range(10):
        next(it)
    state = it.get_state()
    rest = [int(e["x"]) for e in it]
    again = iter(ds)
    again.set_state(state)
    assert [int(e["x"]) for e in again] == rest
    assert 5 not in rest and len(rest) == 29


def test_state_of_another_pipeline_is_refused():
    it = pipeline().iter(0)
    next(it)
    state = it.get_state()
    other = pipeline(seed=9).iter(0)
    with pytest.raises(sh.StateError, match="another pipeline"):
        other.set_state(state)
    with pytest.raises(sh.StateError):
        other.set_state({"format": "nope"})
    with pytest.raises(ValueError):
        other.set_state(42)


def test_seed_none_draws_once_per_object():
    ds = make().shuffle()
    assert run(ds, 0) == run(ds, 0)


def test_prefetch_then_repeat_runs_as_one_stream_with_the_same_elements():
    base = pipeline()
    want = run(base, 0) + run(base, 1) + run(base, 2)
    ds = pipeline(2).repeat(3)
    assert ds.describe().endswith("repeat(3) -> prefetch(2)")
    assert [(b["audio"].tobytes(), b["label"].tobytes()) for b in ds.iter(0)] == want
    assert len(ds) == 21


def test_from_list_with_a_dict_points_to_from_arrays():
    with pytest.raises(sh.InvalidArgumentError, match="use from_arrays"):
        sh.from_list({"audio": [np.zeros(3)]})


@pytest.mark.parametrize("par", [1, 3, sh.AUTOTUNE])
def test_parallelize_and_parallel_map_give_the_same_batches(par):
    ref = run(pipeline())
    par_ds = make().shuffle(seed=5).random_crop("audio", 8, seed=6).batch(6).parallelize(par).prefetch(2)
    assert run(par_ds) == ref
    # epochs() looks through parallelize + prefetch and stays identical to per-epoch iteration.
    got = [[(b["audio"].tobytes(), b["label"].tobytes()) for b in ep] for ep in par_ds.epochs(2)]
    assert got == [ref, run(pipeline(), 1)]

    def twice(e):
        return {"audio": e["audio"].astype(np.int32) * 2, "label": e["label"]}

    base = make().shuffle(seed=5)
    want = [(int(e["label"]), e["audio"].astype(np.int32).tobytes()) for e in base.map(twice).iter(0)]
    for ds in [base.map(twice, num_parallel_calls=par),  # random access: map + parallelize
               base.filter(lambda e: True).map(twice, num_parallel_calls=par)]:  # a stream
        assert [(int(e["label"]), e["audio"].tobytes()) for e in ds.iter(0)] == want
    unordered = base.map(twice, num_parallel_calls=par, deterministic=False)
    assert sorted((int(e["label"]), e["audio"].tobytes()) for e in unordered.iter(0)) == sorted(want)


def test_parallel_map_exception_reaches_the_caller_as_itself():
    class Boom(Exception):
        pass

    def f(e):
        if int(e["x"]) == 7:
            raise Boom("seven")
        return e

    with pytest.raises(Boom, match="seven"):
        list(sh.from_arrays({"x": np.arange(20)}).map(f, num_parallel_calls=4))
    with pytest.raises(sh.InvalidArgumentError):
        sh.from_arrays({"x": np.arange(3)}).map(f, num_parallel_calls=0)


def test_epochs_loader_state_resumes_exactly_at_every_cut():
    def make():
        return sh.from_arrays({"x": np.arange(10)}).shuffle(seed=3).batch(3).prefetch(2)

    flat = [(ep.epoch, b["x"].tolist()) for ep in make().epochs(3) for b in ep]
    assert len(flat) == 12

    def state_after(cut):
        loader, seen = make().epochs(3), 0
        for ep in loader:
            while True:
                if seen == cut:
                    return json.dumps(loader.get_state())
                try:
                    next(ep)
                except StopIteration:
                    break
                seen += 1
        return json.dumps(loader.get_state())

    for cut in range(len(flat) + 1):
        state = state_after(cut)
        loader = make().epochs(3)
        loader.set_state(json.loads(state))
        got, lengths = [], 0
        for ep in loader:
            lengths += len(ep)
            got += [(ep.epoch, b["x"].tolist()) for b in ep]
        assert got == flat[cut:] and lengths == len(flat) - cut, cut
        # Chained: resume, take one more, save, resume again.
        loader = make().epochs(3)
        loader.set_state(state)
        it = ((ep.epoch, b["x"].tolist()) for ep in loader for b in ep)
        first = next(it, None)
        again = make().epochs(3)
        again.set_state(loader.get_state())
        rest = [(ep.epoch, b["x"].tolist()) for ep in again for b in ep]
        assert ([first] if first else []) + rest == flat[cut:], cut
    with pytest.raises(sh.StateError, match="epochs"):
        make().epochs(2).set_state(state_after(4))
    with pytest.raises(sh.StateError):
        make().epochs(3).set_state(make().iter().get_state())
