"""The workers of a Python map take turns at running it when that is faster (issue 17 item 6).

Workers that all ask for the GIL trade it at every stretch a function lets go of it (each numpy
call does): taking turns avoids that. A function that waits off the GIL (a sleep, a read, a
decoder) must keep its workers running side by side. `STOKEHOLD_PYTHON_TURNS=on|off` fixes the
choice (read when the map is made); by default each map measures both ways and keeps the faster,
which `stokehold._native._python_turns()` reports.

Which way is faster depends on how busy the machine is, so the choice itself is tested on rates
the test gives (`_native._python_turns_scripted`: the stages' own rule on a clock that only the
described runs move); on real threads only what holds under any load is checked (every element
comes back, a verdict is reached, the flag agrees with the phase and the rates measured).
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


def _agrees(t):
    """Whether a stage's flag is what its phase and rates say, whatever the load: off while
    warming up and measuring everyone let in, on while measuring turns, and while holding a
    verdict on exactly when turns made at least as many calls."""
    want = {"warm": False, "free": False, "turns": True}.get(t["phase"], t["turns_rate"] >= t["free_rate"])
    return t["taking_turns"] == want


def _verdict(reports, n=1):
    """The report right after a scripted stage's `n`th verdict, and its index."""
    i = next(i for i, r in enumerate(reports) if r["verdicts"] == n)
    return i, reports[i]


# (free_rate, turns_rate) as two sleeping workers make them (about twice the calls let in
# together), and as numpy's `sin` over 2000 values at two workers did (module docs of turns.rs).
WAITS_OFF_THE_GIL = (2000.0, 1000.0)
SMALL_NUMPY_CALLS = (120_000.0, 190_000.0)


@pytest.mark.parametrize(
    "rates, taking",
    [(WAITS_OFF_THE_GIL, False), (SMALL_NUMPY_CALLS, True), ((1000.0, 1000.0), True)],
    ids=["waits-off-the-gil", "small-numpy-calls", "a-tie-takes-turns"],
)
def test_measuring_keeps_the_way_that_made_more_calls(rates, taking):
    reports = _native._python_turns_scripted([rates] * 3000, 16)
    i, t = _verdict(reports)
    assert t["phase"] == "hold" and t["policy"] == "measure", t
    # Rates as given, to the nanosecond the clock counts a run's time in.
    assert t["free_rate"] == pytest.approx(rates[0], rel=1e-5), t
    assert t["turns_rate"] == pytest.approx(rates[1], rel=1e-5), t
    assert t["taking_turns"] == taking, t
    # Both ways were measured first, in that order, after a warm-up measured neither.
    phases = [r["phase"] for r in reports[:i]]
    assert phases[0] == "warm" and sorted(set(phases)) == ["free", "turns", "warm"], phases
    assert phases.index("free") < phases.index("turns") and phases.count("warm") > 1
    assert all(_agrees(r) for r in reports), [r for r in reports if not _agrees(r)]


def _hold_s(reports, n, rates, calls):
    """Seconds of activity a scripted stage held its `n`th verdict: the runs in between, each
    `calls` calls at the rate of the way it kept."""
    i, t = _verdict(reports, n)
    j = next(j for j in range(i + 1, len(reports)) if reports[j]["phase"] != "hold")
    return (j - i) * calls / rates[1 if t["taking_turns"] else 0]


def test_a_clear_verdict_holds_long_and_a_close_one_is_measured_again_soon():
    clear = _native._python_turns_scripted([WAITS_OFF_THE_GIL] * 2000, 16)
    # 2x is clear (at least 1.25x): it holds for 2 s of activity.
    assert _hold_s(clear, 1, WAITS_OFF_THE_GIL, 16) == pytest.approx(2.0, abs=0.01)
    close = (1000.0, 1100.0)
    reports = _native._python_turns_scripted([close] * 1500, 1)
    # 1.1x may be noise: held 0.1 s, then twice as long after each next verdict.
    holds = [_hold_s(reports, n, close, 1) for n in (1, 2, 3)]
    assert holds == [pytest.approx(0.1, abs=0.002), pytest.approx(0.2, abs=0.002), pytest.approx(0.4, abs=0.002)]
    assert all(r["taking_turns"] for r in reports if r["phase"] == "hold")


def test_the_choice_follows_the_rates_when_they_change():
    # Let in together is faster, then (another load, another input) taking turns is.
    runs = [WAITS_OFF_THE_GIL] * 1000 + [(1000.0, 2000.0)] * 1000
    reports = _native._python_turns_scripted(runs, 8)
    made = [(i, r) for i, r in enumerate(reports) if i and r["verdicts"] > reports[i - 1]["verdicts"]]
    # A measurement of both ways takes about 20 runs here: every verdict is made on one set of
    # rates but one that may straddle the change.
    before = [r for i, r in made if i < 1000]
    after = [r for i, r in made if i >= 1030]
    assert before and after, made
    assert not any(r["taking_turns"] for r in before), before
    assert all(r["taking_turns"] for r in after), after
    assert after[-1]["free_rate"] == pytest.approx(1000.0, rel=1e-5), after[-1]
    assert after[-1]["turns_rate"] == pytest.approx(2000.0, rel=1e-5), after[-1]


@pytest.mark.parametrize("runs, calls", [([(0.0, 1.0)], 1), ([(1.0, float("nan"))], 1), ([(1.0, 1.0)], 0)])
def test_a_script_with_rates_that_describe_no_machine_is_refused(runs, calls):
    with pytest.raises(ValueError):
        _native._python_turns_scripted(runs, calls)


def test_a_function_that_waits_off_the_gil_keeps_its_workers_side_by_side(monkeypatch):
    monkeypatch.delenv("STOKEHOLD_PYTHON_TURNS", raising=False)

    def waits_off_the_gil(e):
        time.sleep(0.001)
        return {"x": e["x"]}

    ds = sh.from_arrays({"x": np.arange(600)}).map(waits_off_the_gil, num_parallel_calls=2)
    assert [int(e["x"]) for e in ds] == list(range(600))
    t = _turns("waits_off_the_gil")
    # A verdict takes three phases of at least 32 calls and 50 ms of activity: at most about 250
    # of the 600 calls on an idle machine, fewer on a busy one (each call is slower). Which way
    # won depends on the load: test_measuring_keeps_the_way_that_made_more_calls checks that.
    assert t["policy"] == "measure" and t["verdicts"] >= 1, t
    assert t["free_rate"] > 0 and t["turns_rate"] > 0, t
    assert _agrees(t), t


def test_a_function_of_small_numpy_calls_measures_both_ways(monkeypatch):
    monkeypatch.delenv("STOKEHOLD_PYTHON_TURNS", raising=False)
    base = np.arange(2000, dtype=np.float32)

    def small_numpy_calls(e):
        # Each sin over 2000 values lets go of the GIL for a moment.
        return {"s": float(np.sin(base + np.float32(e["x"])).sum())}

    ds = sh.from_arrays({"x": np.arange(40000)}).map(small_numpy_calls, num_parallel_calls=4)
    total = sum(1 for _ in ds)
    assert total == 40000
    t = _turns("small_numpy_calls")
    assert t["policy"] == "measure" and t["verdicts"] >= 1, t
    assert t["free_rate"] > 0 and t["turns_rate"] > 0, t
    assert _agrees(t), t


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
