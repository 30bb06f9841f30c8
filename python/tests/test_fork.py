"""Fork safety: a dataset made before fork() works in the child; an iterator started before
fork() raises a clear error in the child instead of hanging. The child reports through a pipe."""

import os
import select
import warnings

import numpy as np
import pytest

import stokehold as sh

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def in_child(fn, timeout=30.0):
    """Runs fn() in a forked child; returns what it wrote, or fails if it hangs or dies."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() in a multi-threaded process: that is the point here.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            msg = fn()
        except BaseException as e:  # noqa: BLE001 - report everything to the parent
            msg = f"child raised {type(e).__name__}: {e}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], timeout)
        if not ready:
            os.kill(pid, 9)
            pytest.fail("the child hung")
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks).decode()
    finally:
        os.close(r)
        os.waitpid(pid, 0)


def make():
    audio = [np.full(n, n, np.int16) for n in range(3, 30)]
    return sh.from_arrays({"audio": audio}).shuffle(seed=1).random_crop("audio", 3, seed=2).batch(4)


def test_dataset_made_before_fork_works_in_child():
    ds = make().map(lambda e: {"audio": e["audio"] + 1}).prefetch(2)
    want = [b["audio"].tolist() for b in ds.iter(0)]
    it = ds.iter(1)
    next(it)  # a prefetch thread is running in the parent at fork time

    def child():
        return repr([b["audio"].tolist() for b in ds.iter(0)])

    assert in_child(child) == repr(want)
    assert len(list(it)) == len(want) - 1  # the parent's iterator is unaffected


def test_iterator_started_before_fork_fails_clearly_in_child():
    it = make().prefetch(2).iter(0)
    next(it)

    def child():
        try:
            next(it)
        except sh.CancelledError as e:
            return f"cancelled: {e}"
        return "no error"

    msg = in_child(child)
    assert msg.startswith("cancelled:") and "fork" in msg, msg


def test_child_exit_does_not_wait_for_callbacks_of_the_parent():
    import threading

    entered, release = threading.Event(), threading.Event()

    def f(e):
        if int(e["x"]) >= 1:
            entered.set()
            release.wait(30)  # the parent's prefetch thread sits inside Python at fork time
        return e

    it = sh.from_arrays({"x": np.arange(4)}).map(f).prefetch(1).iter(0)
    try:
        next(it)
        assert entered.wait(30)
        # In the child, the exit hook must not count the parent's thread (it did not survive).
        assert in_child(lambda: repr(sh._native._shutdown())) == "True"
    finally:
        release.set()
    assert len(list(it)) == 3


def test_reentrant_use_of_an_iterator_is_an_error_not_a_deadlock():
    ds = sh.from_arrays({"x": np.arange(3)})
    holder = {}

    def f(e):
        return next(holder["it"])

    holder["it"] = ds.map(f).iter(0)
    with pytest.raises(sh.InvalidArgumentError, match="already running"):
        next(holder["it"])
