"""Issue 48, items 6 and 7: diagnoses that name what a file is and what to do, and the surprises
of the first hour (the map running ahead into the next epoch, element_spec of varying shapes,
from_generator's output_signature), each on real files, real folders and real imports."""

import threading
import time

import numpy as np
import pytest

import stokehold as sh

# ---- item 7: the warm next epoch ------------------------------------------------------------


def counting_pipeline(n=100):
    calls = []
    lock = threading.Lock()

    def f(e):
        with lock:
            calls.append(int(e["x"]))
        return e

    return sh.from_arrays({"x": np.arange(n)}).map(f).prefetch(), calls


def settled(calls, want):
    """The call count once it reached `want` (a loaded machine may leave the thread without a
    core for a while) and a moment later, when calls past it would have shown."""
    deadline = time.monotonic() + 60
    while len(calls) < want and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    return len(calls)


def test_a_prefetch_runs_the_map_into_the_next_epoch_by_default():
    ds, calls = counting_pipeline()
    assert len(list(ds)) == 100
    assert settled(calls, 101) > 100, "the warm next epoch runs the map ahead"


def test_warm_start_false_stops_each_epoch_at_its_end():
    ds, calls = counting_pipeline()
    cold = ds.with_options(warm_start=False)
    assert "warm_start=false" in cold.describe()
    fresh, _ = counting_pipeline()
    for epoch in range(2):
        assert [int(b["x"]) for b in cold] == [int(b["x"]) for b in fresh.iter(epoch)]
        assert settled(calls, 100 * (epoch + 1)) == 100 * (epoch + 1)


def test_warm_start_must_be_a_bool():
    ds, _ = counting_pipeline()
    with pytest.raises(sh.InvalidArgumentError, match="warm_start"):
        ds.with_options(warm_start="no")
