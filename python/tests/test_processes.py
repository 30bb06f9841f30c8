"""map(fn, processes=True): Python functions in worker processes, elements through shared memory.

Real processes throughout: results equal the thread map's, faults (exceptions, a SIGKILLed worker,
a SIGKILLed parent, Ctrl-C, a dropped iterator) are checked on the process table and /dev/shm.
Worker functions live at module level so the forkserver workers can import them."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import stokehold as sh
from stokehold.processes import ProcessMap, ProcessOptions

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="checks /proc and /dev/shm")


def affine(e):
    return {"x": e["x"] * 3 + 1, "sq": (e["x"] ** 2).astype(np.float32)}


def features(e):
    x = int(e["x"])
    return {
        "x": e["x"],
        "text": f"n{x}",  # str: encoded as UTF-8 bytes by both executors
        "raw": bytes(range(x % 7)),
        "words": np.array([b"a" * x, b"b"], dtype=object),
        "nul": [b"z\x00" * (x % 3), b"\x00"],  # a list of bytes: trailing NULs kept
        "scalar": 2.5 * x,
        "empty": np.zeros((0, 3), np.int16),
    }


def fail_on_7(e):
    if int(e["x"]) == 7:
        raise KeyError(f"no such thing as {int(e['x'])}")
    return e


def returns_tuple(e):
    return (e["x"], e["x"])


def returns_object_array(e):
    return {"x": np.array([1, "two"], dtype=object)}


def identity(e):
    return e


def pid_of(e):
    return {"x": e["x"], "pid": np.int64(os.getpid())}


def slow(e):
    time.sleep(0.05)
    return e


def pipeline(calls, processes, n=60):
    ds = sh.Dataset.range(n).shuffle(seed=3)
    return ds.map(affine, num_parallel_calls=calls, processes=processes).batch(4)


def rows(ds):
    return [{k: v.tolist() for k, v in b.items()} for b in ds.iter(0)]


@pytest.mark.parametrize("calls", [1, 2, sh.AUTOTUNE])
def test_same_order_and_values_as_thread_map(calls):
    want = rows(pipeline(None, False))
    assert rows(pipeline(calls, False)) == want
    assert rows(pipeline(calls, True)) == want


def test_autotune_starts_a_process_map_on_workers():
    # Unlike a Python function on threads (started inline), a process map waits for its workers
    # with the GIL released: AUTOTUNE starts it as any native op, a worker thread per free core.
    ds = pipeline(sh.AUTOTUNE, True)
    rows(ds)
    (stage,) = [op for op in ds.stats()["ops"] if op["op"].startswith("parallelize")]
    assert 1 <= stage["parallelism"] <= 4 * (os.cpu_count() or 1), stage


def keyed_noise(e):
    # Randomness keyed by the element (its index), never by the worker: as random_map does.
    rng = np.random.default_rng([7, int(e["index"])])
    return {"x": e["x"], "noise": rng.normal(size=3).astype(np.float32)}


def test_keyed_randomness_is_the_same_in_processes_and_threads():
    base = sh.Dataset.range(40).shuffle(seed=2).enumerate()
    threads = [e["noise"].tolist() for e in base.map(keyed_noise, num_parallel_calls=2)]
    procs = [e["noise"].tolist() for e in base.map(keyed_noise, num_parallel_calls=2, processes=True)]
    assert procs == threads


def augment(e, rng):
    return {"x": e["x"], "noise": rng.normal(size=3).astype(np.float32), "k": rng.integers(1 << 30)}


@pytest.mark.parametrize("calls", [1, 2])
def test_random_map_draws_the_same_in_processes_as_in_threads(calls):
    base = sh.Dataset.range(30).shuffle(seed=4)
    want = rows(base.random_map(augment, seed=11, num_parallel_calls=2).batch(5))
    procs = base.random_map(augment, seed=11, num_parallel_calls=calls, processes=True)
    assert rows(procs.batch(5)) == want
    # A lambda (under fork: no pickling) and a second epoch (part of the key) agree too.
    fn = lambda e, rng: augment(e, rng)  # noqa: E731
    threads = base.random_map(fn, seed=11, num_parallel_calls=2)
    fork = ProcessOptions(start_method="fork")
    in_procs = base.random_map(fn, seed=11, num_parallel_calls=2, processes=fork)
    for epoch in (0, 1):
        want = [{k: v.tolist() for k, v in e.items()} for e in threads.iter(epoch)]
        assert [{k: v.tolist() for k, v in e.items()} for e in in_procs.iter(epoch)] == want


def test_results_are_views_of_the_arena_and_their_extent_is_reused():
    pm = ProcessMap(affine, "affine", 1, ProcessOptions(memory_budget=1 << 20))
    out = pm({"x": np.arange(1000)})
    w = pm._all[0]
    lo = w.arena.__array_interface__["data"][0]
    addr = out["sq"].__array_interface__["data"][0]
    assert lo + w.size // 2 <= addr < lo + w.size, "the result is not a view of the arena"
    assert out["x"].tolist() == [3 * i + 1 for i in range(1000)]
    free_while_held = w.results.largest()
    del out
    gc.collect()
    assert w.results.largest() == (w.size // 2, w.size) != free_while_held


def test_results_held_beyond_the_arena_still_arrive_intact():
    # 40 results of 40 KB held at once through a 2 x 128 KB arena: the extents run out, and the
    # results that no longer fit come down the pipe, every value intact.
    pm = ProcessMap(affine, "affine", 1, ProcessOptions(memory_budget=256 << 10))
    held = [pm({"x": np.full(5000, i)}) for i in range(40)]
    for i, out in enumerate(held):
        assert out["x"].tolist() == [3 * i + 1] * 5000
        assert out["sq"].tolist() == [float(i * i)] * 5000
    del held
    gc.collect()
    assert pm._all[0].results.largest() == (pm._all[0].size // 2, pm._all[0].size)


def test_stream_input_and_as_completed_order():
    base = sh.Dataset.range(80).filter(lambda e: int(e["x"]) % 3 != 0)
    want = [int(e["x"]) for e in base.map(affine)]
    got = [int(e["x"]) for e in base.map(affine, num_parallel_calls=2, processes=True)]
    assert got == want
    loose = base.map(affine, num_parallel_calls=2, deterministic=False, processes=True)
    assert sorted(int(e["x"]) for e in loose) == sorted(want)


def test_bytes_strings_scalars_and_empty_arrays_travel_like_the_thread_map():
    ds = sh.Dataset.range(12)
    threads = list(ds.map(features, num_parallel_calls=2))
    procs = list(ds.map(features, num_parallel_calls=2, processes=True))
    assert len(procs) == 12
    for a, b in zip(threads, procs):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
            assert a[k].tolist() == b[k].tolist(), k
    for i, e in enumerate(procs):
        assert e["nul"].tolist() == [b"z\x00" * (i % 3), b"\x00"]
        assert e["raw"].item() == bytes(range(i % 7))


def test_ragged_batches_travel_through_the_arena():
    clips = [np.arange(n, dtype=np.float32) for n in (3, 5, 1, 4, 2, 6)]
    ds = sh.from_arrays({"audio": clips}).batch(3)
    want = [b["audio"].values.tolist() for b in ds.map(identity)]
    got = list(ds.map(identity, num_parallel_calls=2, processes=True))
    assert [b["audio"].values.tolist() for b in got] == want
    assert isinstance(got[0]["audio"], sh.Ragged)


def test_work_runs_in_other_processes():
    out = list(sh.Dataset.range(40).map(pid_of, num_parallel_calls=2, processes=True))
    pids = {int(e["pid"]) for e in out}
    assert os.getpid() not in pids and len(pids) >= 1


def test_exception_keeps_its_type_with_worker_traceback_and_index():
    ds = sh.Dataset.range(20).map(fail_on_7, num_parallel_calls=2, processes=True)
    with pytest.raises(KeyError) as info:
        list(ds)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "element 7" in notes, notes
    cause = str(info.value.__cause__)
    assert "Traceback in worker process" in cause and "fail_on_7" in cause, cause


def test_sigkilled_worker_is_reported_and_the_run_resumes_from_a_checkpoint(tmp_path):
    marker = str(tmp_path / "killed-once")
    ds = sh.from_arrays({"x": np.arange(12), "marker": [marker] * 12})
    ds = ds.map(kill_once_on_5, num_parallel_calls=2, processes=True)
    it = ds.iter(0)
    seen = [int(next(it)["x"]) for _ in range(5)]
    state = it.get_state()
    with pytest.raises(sh.WorkerProcessError) as info:
        next(it)
    msg = str(info.value) + " ".join(getattr(info.value, "__notes__", []))
    assert "SIGKILL" in msg and "exit status -9" in msg and "element 5" in msg, msg
    del it
    # Nothing lost or repeated: the checkpoint taken before the fault resumes exactly there.
    it2 = ds.iter(0)
    it2.set_state(state)
    assert seen + [int(e["x"]) for e in it2] == list(range(12))


def kill_once_on_5(e):
    marker = e["marker"].item().decode()
    if int(e["x"]) == 5 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"x": e["x"]}


def test_sigkilled_worker_is_reported_then_a_restored_iterator_goes_on(tmp_path):
    marker = str(tmp_path / "killed-once")
    ds = sh.from_arrays({"x": np.arange(12), "marker": [marker] * 12})
    ds = ds.map(kill_once_on_5, num_parallel_calls=1, processes=True)
    it = ds.iter(0)
    assert [int(next(it)["x"]) for _ in range(5)] == [0, 1, 2, 3, 4]
    state = it.get_state()
    with pytest.raises(sh.WorkerProcessError):
        next(it)
    # The element is reported, not retried, and the iterator goes on after it on a new worker
    # (the error-then-next rule, tf.data's).
    assert [int(e["x"]) for e in it] == list(range(6, 12))
    # A new iterator restored at the last checkpoint runs on a new worker: nothing lost.
    again = ds.iter(0)
    again.set_state(state)
    assert [int(e["x"]) for e in again] == list(range(5, 12))


@pytest.mark.parametrize("cut", [0, 7, 13])
@pytest.mark.parametrize("save_with,restore_with", [(True, False), (False, True)])
def test_checkpoint_restores_across_thread_and_process_executors(cut, save_with, restore_with):
    def make(processes):
        base = sh.Dataset.range(50).shuffle(seed=9)
        return base.map(affine, num_parallel_calls=2, processes=processes).batch(3)

    want = rows(make(False))
    it = make(save_with).iter(0)
    head = [{k: v.tolist() for k, v in next(it).items()} for _ in range(cut)]
    state = it.get_state()
    del it
    it2 = make(restore_with).iter(0)
    it2.set_state(state)
    tail = [{k: v.tolist() for k, v in b.items()} for b in it2]
    assert head + tail == want


def test_stream_checkpoint_restores_across_executors():
    def make(processes):
        base = sh.Dataset.range(40).filter(lambda e: int(e["x"]) % 4 != 1)
        return base.map(affine, num_parallel_calls=2, processes=processes)

    want = [int(e["x"]) for e in make(False)]
    it = make(True).iter(0)
    head = [int(next(it)["x"]) for _ in range(11)]
    state = it.get_state()
    it2 = make(False).iter(0)
    it2.set_state(state)
    assert head + [int(e["x"]) for e in it2] == want


def test_extra_arguments_after_the_element_are_passed_on():
    pm = ProcessMap(extra_args_fn, "extra_args_fn", 1, ProcessOptions())
    out = pm({"x": np.arange(3)}, 10, {"epoch": 2})
    assert out["x"].tolist() == [12, 13, 14]


def extra_args_fn(e, offset, ctx):
    return {"x": e["x"] + offset + ctx["epoch"]}


@pytest.mark.parametrize("start", ["forkserver", "fork"])
@pytest.mark.parametrize("idle_timeout", [0.2, 1.0])
def test_dropping_the_iterator_ends_the_workers(idle_timeout, start):
    # A grace period far past the wait below: the workers leave on the stop message, unsignalled
    # (under fork a closed pipe alone is not seen: workers forked later hold copies of its end).
    opts = ProcessOptions(start_method=start, idle_timeout=idle_timeout, grace_period=60.0)
    ds = sh.Dataset.range(100).map(slow, num_parallel_calls=2, processes=opts)
    it = iter(ds)
    next(it)
    kids = _children()
    assert kids, "no worker process is running"
    del it
    gc.collect()
    _wait_gone(kids, timeout=idle_timeout + 5)
    assert [int(e["x"]) for e in ds.take(3)] == [0, 1, 2]


# ---- ending workers: a closed pipe, then SIGTERM, then SIGKILL, each after the grace period ------

GRACE = 0.3  # small, so that the tests are fast; every wait below is a poll with a generous bound


def sleeps_an_hour(e):
    _started(e)
    time.sleep(3600)
    return e


def spins(e):
    _started(e)
    while True:  # pure Python, holding the worker's GIL
        pass


def ignores_sigterm(e):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _started(e)
    time.sleep(3600)
    return e


def _started(e):
    open(e["marker"].item().decode(), "w").close()


@pytest.mark.parametrize("start", ["forkserver", "fork"])
@pytest.mark.parametrize("fn,status", [(sleeps_an_hour, -15), (spins, -15), (ignores_sigterm, -9)])
def test_closing_a_map_ends_a_worker_stuck_in_fn(tmp_path, start, fn, status):
    maps_before = _arena_mappings()
    marker = tmp_path / "started"
    pm = ProcessMap(fn, fn.__name__, 1, ProcessOptions(start_method=start, grace_period=GRACE))
    errors = []

    def call():
        try:
            pm({"marker": np.array(str(marker).encode())})
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            errors.append(e)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    _poll(marker.exists, "the worker to start fn")
    (pid,) = pm.pids()
    born = _start_time(pid)
    pm.close()  # returns at once: the waiting is the reaper thread's
    _poll(lambda: _start_time(pid) != born, f"worker {pid} to be gone and reaped")
    caller.join(60)
    assert not caller.is_alive()
    (err,) = errors
    msg = str(err)
    assert isinstance(err, sh.WorkerProcessError), repr(err)
    assert f"exit status {status}" in msg and "process map was closed" in msg, msg
    assert "grace period" in msg, msg
    assert pm.pids() == []
    pm = err = None
    errors.clear()
    gc.collect()
    assert _arena_mappings() <= maps_before  # the parent's mapping of the arena went with it


def naps(e):
    time.sleep(0.3)
    return {"x": e["x"] + 1}


def test_a_busy_worker_of_a_closed_map_finishes_its_element_then_exits_without_a_signal():
    pm = ProcessMap(naps, "naps", 1, ProcessOptions(start_method="fork", grace_period=30.0))
    pids = []
    out = []
    caller = threading.Thread(target=lambda: out.append(pm({"x": np.arange(3)})), daemon=True)
    caller.start()
    _poll(lambda: pids.extend(pm.pids()) or pids, "the worker to start")
    born = _start_time(pids[0])
    pm.close()
    caller.join(60)
    assert out[0]["x"].tolist() == [1, 2, 3]  # the element finished: its result is delivered
    # Gone well before the 30 s grace period ends: it exited when its pipe closed, unsignalled.
    _poll(lambda: _start_time(pids[0]) != born, f"worker {pids[0]} to exit", timeout=20.0)


def leaves_a_thread(e):
    # A non-daemon thread: the worker's interpreter waits for it at exit, so the closed pipe
    # alone does not end the worker (under fork, where nothing else watches that pipe).
    threading.Thread(target=time.sleep, args=(3600,)).start()
    return {"x": e["x"], "pid": np.int64(os.getpid())}


def leaves_a_thread_and_notes_sigterm(e):
    marker = e["marker"].item().decode()

    def note(signum, frame):
        open(marker, "w").close()  # and carry on: only SIGKILL ends this worker

    signal.signal(signal.SIGTERM, note)
    return leaves_a_thread(e)


@pytest.mark.parametrize("start", ["forkserver", "fork"])
def test_a_dropped_iterator_ends_a_worker_that_does_not_exit_on_its_own(start):
    opts = ProcessOptions(start_method=start, idle_timeout=0.1, grace_period=GRACE)
    ds = sh.Dataset.range(5).map(leaves_a_thread, num_parallel_calls=1, processes=opts)
    it = iter(ds)
    pid = int(next(it)["pid"])
    born = _start_time(pid)
    del it
    gc.collect()
    _poll(lambda: _start_time(pid) != born, f"worker {pid} to be gone and reaped")


def stuck_after_the_first(e):
    if int(e["x"]) >= 1:
        time.sleep(3600)  # stuck in fn: only a signal ends this worker
    return {"x": e["x"], "pid": np.int64(os.getpid())}


@pytest.mark.parametrize("start", ["forkserver", "fork"])
def test_a_dropped_iterator_ends_a_worker_stuck_in_fn(start):
    """Issue 50, item 5: the stage's worker waiting on a process stuck in ``fn`` sees its stage
    stopped when the iterator is dropped, and the process is ended after the grace period."""
    opts = ProcessOptions(start_method=start, grace_period=GRACE)
    ds = sh.Dataset.range(5).map(stuck_after_the_first, num_parallel_calls=1, processes=opts)
    it = iter(ds)
    pid = int(next(it)["pid"])  # then the stage's worker asks the process for element 1
    born = _start_time(pid)
    del it
    gc.collect()
    _poll(lambda: _start_time(pid) != born, f"worker {pid} (stuck in fn) to be gone and reaped")


def test_a_worker_that_handles_sigterm_sees_it_and_then_gets_sigkill(tmp_path):
    marker = tmp_path / "got-sigterm"
    opts = ProcessOptions(start_method="fork", idle_timeout=0.1, grace_period=GRACE)
    ds = sh.from_arrays({"x": np.arange(3), "marker": [str(marker)] * 3})
    ds = ds.map(leaves_a_thread_and_notes_sigterm, num_parallel_calls=1, processes=opts)
    it = iter(ds)
    pid = int(next(it)["pid"])
    born = _start_time(pid)
    del it
    gc.collect()
    _poll(lambda: _start_time(pid) != born, f"worker {pid} to be gone and reaped")
    assert marker.exists()  # fn's SIGTERM handler ran before the SIGKILL that ended it


def _poll(cond, what, timeout=60.0):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            pytest.fail(f"waited {timeout} s for {what}")
        time.sleep(0.02)


def _start_time(pid):
    """The process's start time, or None once it is gone and reaped (a zombie still counts as
    there): a pid reused meanwhile has another start time."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[19]
    except OSError:
        return None


def _arena_mappings():
    with open("/proc/self/maps") as f:
        return sum("stokehold-arena" in line for line in f)


def test_back_to_back_epochs_keep_the_workers():
    ds = sh.Dataset.range(10).map(pid_of, num_parallel_calls=1, processes=True)
    first = {int(e["pid"]) for e in ds}
    second = {int(e["pid"]) for e in ds}
    assert first == second and len(first) == 1


def test_unpicklable_function_fails_before_any_worker_starts():
    lock = threading.Lock()

    def holds_a_lock(e):
        with lock:
            return e

    before = _children()
    with pytest.raises(TypeError) as info:
        sh.Dataset.range(3).map(holds_a_lock, num_parallel_calls=2, processes=True)
    msg = str(info.value)
    assert "holds_a_lock" in msg and "pickle" in msg and "cloudpickle" in msg, msg
    # No worker started; an idle worker of an earlier test's pool may have exited meanwhile.
    assert set(_children()) <= set(before)


def test_fork_start_method_needs_no_pickling():
    lock = threading.Lock()

    def holds_a_lock(e):
        with lock:
            return {"x": e["x"] + 1}

    opts = ProcessOptions(start_method="fork")
    ds = sh.Dataset.range(10).map(holds_a_lock, num_parallel_calls=2, processes=opts)
    assert [int(e["x"]) for e in ds] == list(range(1, 11))


def test_non_dict_result_is_a_type_error_naming_the_element():
    ds = sh.Dataset.range(4).map(returns_tuple, num_parallel_calls=1, processes=True)
    with pytest.raises(TypeError, match="expected a dict") as info:
        list(ds)
    assert "element 0" in " ".join(info.value.__notes__)


def test_object_array_result_is_a_type_error_naming_the_feature():
    ds = sh.Dataset.range(4).map(returns_object_array, num_parallel_calls=1, processes=True)
    with pytest.raises(TypeError, match="feature 'x': an object array must hold bytes or str"):
        list(ds)


def test_element_larger_than_the_arena_names_the_budget():
    big = sh.from_arrays({"a": np.zeros((2, 300_000), np.float32)})  # 1.2 MB per element
    opts = ProcessOptions(memory_budget=1 << 20)
    ds = big.map(identity, num_parallel_calls=1, processes=opts)
    with pytest.raises(sh.InvalidArgumentError, match=r"memory_budget=1048576 over 1 workers"):
        list(ds)


def test_bad_arguments():
    with pytest.raises(sh.InvalidArgumentError, match="needs num_parallel_calls"):
        sh.Dataset.range(3).map(identity, processes=True)
    with pytest.raises(sh.InvalidArgumentError, match="processes"):
        sh.Dataset.range(3).map(identity, num_parallel_calls=2, processes="yes")
    with pytest.raises(sh.InvalidArgumentError, match="start_method"):
        sh.Dataset.range(3).map(identity, num_parallel_calls=2,
                                processes=ProcessOptions(start_method="teleport"))
    for grace in (-1.0, float("inf"), float("nan"), "2"):
        with pytest.raises(sh.InvalidArgumentError, match="grace_period"):
            sh.Dataset.range(3).map(identity, num_parallel_calls=2,
                                    processes=ProcessOptions(grace_period=grace))


# ---- the parent's death and Ctrl-C, in a child Python of its own session -------------------------

SCRIPT = """
import os, sys, time
import numpy as np
import stokehold as sh

def work(e):
    if os.environ.get("BUSY"):
        t = time.time()
        while time.time() - t < 60:  # pure Python, holding the worker's GIL
            pass
    time.sleep(0.02)
    return {"x": e["x"] + np.ones(1000, np.float32)}

if __name__ == "__main__":
    opts = sh.ProcessOptions(start_method=os.environ["START"])
    ds = sh.Dataset.range(100000).map(work, num_parallel_calls=2, processes=opts)
    it = iter(ds)
    if not os.environ.get("BUSY"):
        next(it)
    print("running", flush=True)
    for e in it:
        pass
"""


def _session(tmp_path, busy=False, start="forkserver"):
    path = tmp_path / "victim.py"
    path.write_text(textwrap.dedent(SCRIPT))
    env = dict(os.environ, BUSY="1" if busy else "", START=start)
    return subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env, text=True)


def _members(sid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(d))
    return out


def _children():
    """Pids of the worker processes of every live process map in this process."""
    return sorted(p for pool in list(sh.processes._POOLS) for p in pool.pids())


def _wait_gone(pids, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return
        time.sleep(0.05)
    pytest.fail(f"processes still alive after {timeout} s: {alive}")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_members(sid, at_least, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = _members(sid)
        if len(m) >= at_least:
            return m
        time.sleep(0.05)
    return _members(sid)


@pytest.mark.parametrize("start,busy,procs", [
    # main + resource tracker + forkserver + workers (one while the first element is busy: the
    # engine starts its second thread once the first element is out)
    ("forkserver", False, 5), ("forkserver", True, 4), ("spawn", True, 2), ("fork", True, 2),
])
def test_sigkilled_parent_leaves_no_processes_and_no_shared_memory(tmp_path, start, busy, procs):
    shm_before = set(os.listdir("/dev/shm"))
    p = _session(tmp_path, busy, start)
    try:
        assert p.stdout.readline().strip() == "running", p.stderr.read()
        members = _wait_members(p.pid, procs)
        assert len(members) >= procs, members
        time.sleep(0.3)  # mid-element
    finally:
        p.kill()
        p.communicate()  # reaps it and closes the pipes
    _wait_gone(members)
    assert _members(p.pid) == []
    assert set(os.listdir("/dev/shm")) - shm_before == set()


def test_ctrl_c_stops_everything_promptly(tmp_path):
    p = _session(tmp_path)
    try:
        assert p.stdout.readline().strip() == "running", p.stderr.read()
        members = _wait_members(p.pid, 4)
        t = time.time()
        os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        _, err = p.communicate(timeout=20)
        took = time.time() - t
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert "KeyboardInterrupt" in err, err
    assert took < 10, took
    _wait_gone(members)
