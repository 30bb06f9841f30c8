"""The warm next epoch through Python's `for batch in ds`: each epoch's elements and states are
those of a fresh iterator of that epoch, whether the iterator adopted a running thread or not."""

import numpy as np

import stokehold as sh


def pipeline(n=50):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return sh.from_arrays({"x": x}).shuffle(seed=3).batch(4).prefetch(2)


def xs(batches):
    return [b["x"].tolist() for b in batches]


def test_the_idiomatic_loop_yields_each_epoch_as_a_fresh_iterator_does():
    ds, fresh = pipeline(), pipeline()
    seen = []
    for epoch in range(3):
        got = xs(ds)  # `for batch in ds`: a new iterator per epoch (ds.epoch advances)
        assert got == xs(fresh.iter(epoch))
        seen.append(got)
    assert seen[0] != seen[1], "reshuffled per epoch"


def test_an_adopted_iterator_checkpoints_exactly():
    ds, fresh = pipeline(), pipeline()
    list(ds)  # epoch 0 ends: its thread runs on into epoch 1
    it = iter(ds)  # epoch 1, adopted
    assert it.epoch == 1
    assert it.get_state() == fresh.iter(1).get_state()
    head = [next(it) for _ in range(3)]
    state = it.get_state()
    rest = xs(it)
    restored = fresh.iter(1)
    restored.set_state(state)
    assert xs(restored) == rest
    assert xs(head) + rest == xs(fresh.iter(1))


def test_an_epoch_left_early_or_skipped_starts_fresh():
    ds, fresh = pipeline(), pipeline()
    it = iter(ds)
    next(it)  # epoch 0 left early: nothing parked
    assert xs(ds.iter(1)) == xs(fresh.iter(1))
    # epoch 2 is parked now; asking for epoch 5 instead gets epoch 5
    assert xs(ds.iter(5)) == xs(fresh.iter(5))
