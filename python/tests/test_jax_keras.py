"""The JAX and Keras adapters, against real jax and keras (Keras on its jax backend): both are in
the test venv (Makefile), and each test is skipped only where its framework is not installed."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported; tensorflow is not here

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import stokehold as sh  # noqa: E402


def test_jax_iterate_puts_batches_on_the_device_ahead():
    jax = pytest.importorskip("jax")
    from stokehold.jax import RaggedArray, iterate, to_jax

    ds = sh.from_arrays({"x": np.arange(12, dtype=np.float32).reshape(6, 2),
                         "r": [np.ones(n, np.int16) for n in (1, 2, 3, 1, 2, 3)],
                         "s": [b"a", b"b", b"c", b"d", b"e", b"f"]}).batch(3)
    for buffer in (1, 2, 5):
        batches = list(iterate(ds, buffer=buffer))
        assert len(batches) == 2
        assert isinstance(batches[1]["x"], jax.Array)
        np.testing.assert_array_equal(np.asarray(batches[1]["x"]), [[6, 7], [8, 9], [10, 11]])
        assert isinstance(batches[0]["r"], RaggedArray)
        assert np.asarray(batches[0]["r"].row_splits).tolist() == [0, 1, 3, 6]
        assert batches[0]["s"] == [b"a", b"b", b"c"]
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    out = to_jax({"x": np.zeros((2, 2), np.float32)}, sharding)
    assert out["x"].sharding == sharding
    with pytest.raises(ValueError):
        next(iterate(ds, buffer=0))


def test_keras_py_dataset_reads_batches_by_index_and_moves_epochs():
    keras = pytest.importorskip("keras")
    from stokehold.keras import as_keras

    n = 48
    x = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    y = (x.sum(axis=1) > 0).astype(np.float32)
    ds = sh.from_arrays({"x": x, "y": y, "i": np.arange(n)}).shuffle(seed=5).batch(16)
    data = as_keras(ds, x="x", y="y")
    assert len(data) == 3
    xb, yb = data[2]
    assert xb.shape == (16, 4) and yb.shape == (16,)
    # Batch i of epoch e is what iterating epoch e yields at i.
    order = {e: np.concatenate([b["i"] for b in ds.iter(epoch=e)]) for e in (0, 1)}
    epoch0 = np.concatenate([as_keras(ds, x="i")[k] for k in range(3)])
    np.testing.assert_array_equal(epoch0, order[0])
    data.on_epoch_end()  # after a peek at one batch: not an epoch (Keras does this before fit)
    np.testing.assert_array_equal(np.concatenate([data[k][0] for k in range(3)]), x[order[0]])
    data.on_epoch_end()  # after a whole epoch
    np.testing.assert_array_equal(np.concatenate([data[k][0] for k in range(3)]),
                                  x[order[1]])
    with pytest.raises(IndexError):
        data[3]
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    history = model.fit(as_keras(ds, x="x", y="y"), epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    # fit() trains on epochs 0 and 1 of the pipeline, whatever Keras peeks first.
    for kwargs in ({}, {"workers": 2}):
        seen = as_keras(ds, x="x", y="y", **kwargs)
        epochs = []
        original = type(seen).__getitem__

        def spy(self, index, original=original, epochs=epochs):
            epochs.append(self.epoch)
            return original(self, index)

        type(seen).__getitem__ = spy
        model.fit(seen, epochs=2, verbose=0, shuffle=False)
        assert epochs[-6:] == [0, 0, 0, 1, 1, 1], (kwargs, epochs)
    with pytest.raises(TypeError, match="stream"):
        as_keras(ds.filter(lambda e: True))
