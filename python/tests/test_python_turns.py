"""The workers of a Python map take turns at running it when that is faster (issue 17 item 6).

Workers that all ask for the GIL trade it at every stretch a function lets go of it (each numpy
call does): taking turns avoids that. A function that waits off the GIL (a sleep, a read, a
decoder) must keep its workers running side by side. `STOKEHOLD_PYTHON_TURNS=on|off` fixes the
choice (read when the map is made); by default each map measures both ways and keeps the faster,
which `stokehold._native._python_turns()` reports.
"""

import threading
import time

import numpy as np
import pytest

import stokehold as sh
from stokehold import _native


class Overlap:
    """A map function that waits 2 ms off the GIL and records how many of its calls overlap."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __call__(self, e):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.002)
        with self.lock:
            self.now -= 1
        return {"x": e["x"], "y": e["x"] * 3}


def _turns(name):
    """The turn report of the live map whose label (the function's qualified name) ends so."""
    (found,) = [t for t in _native._python_turns() if t["label"].endswith("." + name)]
    return found


@pytest.mark.parametrize("par", [2, 4])
def test_workers_taking_turns_run_one_call_at_a_time(monkeypatch, par):
    monkeypatch.setenv("STOKEHOLD_PYTHON_TURNS", "on")
    f = Overlap()
    ds = sh.from_arrays({"x": np.arange(120)}).map(f, num_parallel_calls=par)
    got = [(int(e["x"]), int(e["y"])) for e in ds]
    assert got == [(i, 3 * i) for i in range(120)]
    assert f.most == 1


def test_workers_let_in_together_overlap_calls_that_wait(monkeypatch):
    monkeypatch.setenv("STOKEHOLD_PYTHON_TURNS", "off")
    f = Overlap()
    ds = sh.from_arrays({"x": np.arange(120)}).map(f, num_parallel_calls=2)
    assert [int(e["x"]) for e in ds] == list(range(120))
    assert f.most == 2


def test_a_function_that_waits_off_the_gil_keeps_its_workers_side_by_side(monkeypatch):
    monkeypatch.delenv("STOKEHOLD_PYTHON_TURNS", raising=False)

    def waits_off_the_gil(e):
        time.sleep(0.001)
        return {"x": e["x"]}

    ds = sh.from_arrays({"x": np.arange(600)}).map(waits_off_the_gil, num_parallel_calls=2)
    assert [int(e["x"]) for e in ds] == list(range(600))
    t = _turns("waits_off_the_gil")
    assert t["policy"] == "measure" and t["verdicts"] >= 1
    # Two sleeping workers make about twice the calls of one at a time.
    assert t["free_rate"] > 1.3 * t["turns_rate"], t
    assert not t["taking_turns"], t


def test_a_function_of_small_numpy_calls_takes_turns(monkeypatch):
    monkeypatch.delenv("STOKEHOLD_PYTHON_TURNS", raising=False)
    base = np.arange(2000, dtype=np.float32)

    def small_numpy_calls(e):
        # Each sin over 2000 values lets go of the GIL for a moment.
        return {"s": float(np.sin(base + np.float32(e["x"])).sum())}

    ds = sh.from_arrays({"x": np.arange(40000)}).map(small_numpy_calls, num_parallel_calls=4)
    total = sum(1 for _ in ds)
    assert total == 40000
    t = _turns("small_numpy_calls")
    assert t["verdicts"] >= 1, t
    assert t["turns_rate"] > t["free_rate"], t


def test_a_map_that_reads_its_own_stage_inside_its_turn_does_not_wait_for_itself(monkeypatch):
    # The function reads two elements of its own map on its own thread while it holds the turn.
    monkeypatch.setenv("STOKEHOLD_PYTHON_TURNS", "on")
    local = threading.local()

    def peeks(e):
        if getattr(local, "inside", False):
            return {"x": e["x"], "peek": np.int64(0)}
        local.inside = True
        try:
            peek = sum(int(r["x"]) for r in mapped.take(2))
        finally:
            local.inside = False
        return {"x": e["x"], "peek": np.int64(peek)}

    mapped = sh.from_arrays({"x": np.arange(40)}).map(peeks)
    start = time.monotonic()
    assert [int(e["peek"]) for e in mapped.parallelize(2)] == [1] * 40
    # Waiting for itself would cost the longest wait for a turn (100 ms) per read: 8 s here.
    assert time.monotonic() - start < 4.0


def test_a_map_that_reads_another_busy_map_inside_its_turn_does_not_queue_for_that_map(
    monkeypatch,
):
    # `inner`'s own two workers (iterated on a thread) hold its turn 150 ms per call, off the
    # GIL. `outer`'s function reads `inner` by index while holding outer's turn: queueing for
    # inner's turn there costs the longest wait for a turn (100 ms) per read, 3 s for 30 reads
    # (1.5 s if outer's other worker, tired of waiting for outer's turn, read beside it);
    # holding a turn, the read runs at once.
    monkeypatch.setenv("STOKEHOLD_PYTHON_TURNS", "on")
    local = threading.local()

    def slow_unless_nested(e):
        if not getattr(local, "outer", False):
            time.sleep(0.15)
        return {"x": e["x"]}

    inner = sh.from_arrays({"x": np.arange(10_000)}).map(slow_unless_nested)
    stop = threading.Event()

    def keep_inner_busy():
        for _ in inner.parallelize(2):
            if stop.is_set():
                return

    busy = threading.Thread(target=keep_inner_busy)
    busy.start()

    def reads_inner(e):
        local.outer = True
        try:
            return {"x": e["x"], "y": inner[int(e["x"])]["x"]}
        finally:
            local.outer = False

    outer = sh.from_arrays({"x": np.arange(30)}).map(reads_inner, num_parallel_calls=2)
    try:
        time.sleep(0.2)  # inner's workers are running and taking turns
        assert _turns("slow_unless_nested")["taking_turns"]
        start = time.monotonic()
        got = [(int(e["x"]), int(e["y"])) for e in outer]
        elapsed = time.monotonic() - start
    finally:
        stop.set()
        busy.join()
    assert got == [(i, i) for i in range(30)]
    assert elapsed < 1.0, elapsed
