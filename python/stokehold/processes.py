"""Python map functions in worker processes: ``ds.map(fn, num_parallel_calls=N, processes=True)``.

The engine stays in this process. Its parallel map runs ``N`` threads as usual, and each thread
calls a :class:`ProcessMap` proxy instead of ``fn``: the proxy takes an idle worker process,
copies the element's arrays into that worker's shared-memory arena, sends only their offsets,
shapes and dtypes over a pipe, and blocks on the pipe with the GIL released. The worker runs
``fn`` on numpy views of the arena and writes the result into the arena's other half. So order,
as-completed order, checkpoints, per-element error context and Ctrl-C are the thread map's own,
and a pipeline gives the same elements with threads or processes by construction.

Memory and lifetime:

* The arena is an anonymous ``memfd`` (a file in ``/dev/shm`` unlinked at once where memfd is
  missing) handed to the worker over the pipe: it has no name, so nothing can be left behind in
  ``/dev/shm``, whatever kills the processes. It is sized by ``ProcessOptions.memory_budget``,
  split evenly between the workers and, within a worker, half for inputs and half for outputs.
* Workers ignore SIGINT (Ctrl-C reaches the consumer, which raises ``KeyboardInterrupt``), exit
  when their pipe closes, and watch their parent: a worker whose parent is gone (SIGKILL) exits
  within :data:`_WATCH_INTERVAL`; under forkserver it also gets SIGKILL the moment the
  forkserver exits (``PR_SET_PDEATHSIG``).
* Workers start when an element needs one and end after ``idle_timeout`` seconds without work
  (so dropping the iterator ends them, and back-to-back epochs keep them), when the proxy is
  garbage collected or closed, or at interpreter exit.
* Ending a worker never blocks the caller and never waits forever: it is sent a stop message
  and its pipe is closed (it exits between elements), and :class:`_Reaper`'s thread sends it
  SIGTERM ``grace_period`` seconds later if it is still there (a busy worker of a closed map:
  once its element outlives the grace period), SIGKILL another ``grace_period`` later, and
  reaps it.

Copies: one each way. An input is copied once into the arena and read in place by ``fn``; a
result is copied into the arena by the worker, and the parent's arrays are views of it (the
extent is reused once nothing holds them; when the consumer holds so many results that no free
extent is large enough, that result comes down the pipe instead).
Elements never go through pickle; ``fn`` is pickled once per worker (plain pickle, or
cloudpickle when installed, for lambdas and closures).
"""

from __future__ import annotations

import atexit
import importlib
import marshal
import math
import mmap
import os
import pickle
import select
import signal
import sys
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from multiprocessing import get_all_start_methods, get_context
from multiprocessing import reduction as _reduction
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

import numpy as np

from . import _args, _native
from ._native import InvalidArgumentError, StokeholdError
from ._pack import ArenaFull, pack, unpack

__all__ = ["KeyedCall", "ProcessMap", "ProcessOptions", "WorkerProcessError", "process_map"]

#: Default shared-memory budget (the executor's default memory budget, ``with_options``).
DEFAULT_MEMORY_BUDGET = 1 << 30
#: How often a worker started with fork checks that its parent is alive (seconds): the longest
#: it outlives a SIGKILLed parent.
_WATCH_INTERVAL = 0.2
#: How long the parent waits for the exit status of a worker that is dead or was sent SIGKILL
#: (seconds): the kernel's part of an exit, so only a bound for a machine under heavy load.
_JOIN_TIMEOUT = 2.0
#: Default ``ProcessOptions.grace_period`` (seconds): see there.
DEFAULT_GRACE_PERIOD = 2.0
#: How often the reaper thread looks at the workers it is ending (seconds).
_REAP_INTERVAL = 0.05
#: How often a call waiting for its worker's reply asks whether its stage was stopped (seconds):
#: a reply that comes sooner is read at once.
_STOP_POLL_S = 0.1


class WorkerProcessError(StokeholdError):
    """A worker process of ``map(..., processes=True)`` died (killed by a signal, out of memory)
    or could not start. The message says its pid and exit status; the note added by the engine
    names the element it held. The element is not retried: the next element starts a new
    worker."""


@dataclass(frozen=True)
class ProcessOptions:
    """How ``map(fn, processes=...)`` runs its worker processes.

    Args:
        start_method: ``"forkserver"`` (default where available, else ``"spawn"``) or
            ``"spawn"``: safe with the engine's threads. ``"fork"`` starts faster and needs no
            pickling, but forks a multi-threaded process (use only where you know ``fn`` does not
            need locks another thread held).
        memory_budget: bytes of shared memory for elements in flight, split evenly between the
            workers, half each way (default 1 GiB, the executor's default budget). An element
            (or result) larger than its half is an error naming this budget.
        idle_timeout: seconds a worker waits for its next element before it ends (default 1):
            dropping the iterator ends the workers this long after their last element, while
            back-to-back epochs keep them.
        grace_period: seconds a worker being ended gets at each step (default 2): its pipe is
            closed (a worker between elements exits at once; a busy worker of a closed map may
            finish its element), then it gets SIGTERM (``fn`` may handle it to clean up), then
            SIGKILL one more grace period later, so it is gone within ``2 * grace_period``.
            Nobody waits meanwhile: a thread of this module does the waiting and reaps it.
            Two seconds: room for a SIGTERM handler to flush and close its files on a loaded
            machine, short enough that a closed map's processes are gone within seconds.
    """

    start_method: Optional[str] = None
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    idle_timeout: float = 1.0
    grace_period: float = DEFAULT_GRACE_PERIOD


class _RemoteTraceback(Exception):
    """The worker's traceback, chained as ``__cause__`` of the re-raised exception."""

    def __str__(self) -> str:
        return str(self.args[0])


def _pickle_fn(label: str, fn: Callable[..., Any]) -> bytes:
    """``fn`` as bytes for the workers, or a TypeError naming it (before any worker starts)."""
    try:
        return pickle.dumps(fn)
    except Exception as e:  # noqa: BLE001 - any pickling failure is reported below
        plain = f"pickle: {type(e).__name__}: {e}"
    try:
        cloudpickle = importlib.import_module("cloudpickle")  # optional, untyped
    except ImportError:
        cloud = "cloudpickle: not installed (pip install cloudpickle pickles lambdas and closures)"
    else:
        try:
            return bytes(cloudpickle.dumps(fn))
        except Exception as e:  # noqa: BLE001
            cloud = f"cloudpickle: {type(e).__name__}: {e}"
    raise TypeError(
        f"map(fn={label}, processes=...): cannot send the function to worker processes. "
        f"{plain}; {cloud}. Define it at module level, or use ProcessOptions(start_method='fork')"
    )


class _Worker:
    """One worker process, its pipe and its arena (parent side)."""

    def __init__(self, owner: ProcessMap) -> None:
        #: The grace period it was given when its map was closed while it was busy (set before
        #: the start, whose failure reads it).
        self.stopped: Optional[float] = None
        self.size = owner._arena_bytes
        fd = _anonymous_memory(self.size)
        try:
            self.mm = mmap.mmap(fd, self.size)
            self.arena = np.frombuffer(self.mm, np.uint8)
            self.results = _ResultSpace(self.size // 2, self.size)
            ctx: Any = get_context(owner._method)
            self.conn, child = ctx.Pipe(duplex=True)
            fn_arg: Any = owner._fn if owner._method == "fork" else None
            self.proc = ctx.Process(
                target=_worker_main,
                args=(child, owner._blob, fn_arg, self.size, owner._method),
                name=f"stokehold-map[{owner._label}]",
                daemon=True,
            )
            self.proc.start()
            child.close()
            _reduction.send_handle(self.conn, fd, self.proc.pid or 0)
        finally:
            os.close(fd)
        ok, payload = _read_reply(self, starting=True)
        if not ok:
            raise payload
        self.busy = False
        self.pending = False
        self.idle_since = 0.0

    def call(self, owner: ProcessMap, element: Dict[str, Any], extra: Tuple[Any, ...]) -> Dict[str, Any]:
        half = self.size // 2
        try:
            meta = pack(self.arena, 0, half, element)
        except ArenaFull as e:
            raise owner._too_big("an element", e.needed) from None
        extra_blob = pickle.dumps(extra) if extra else b""
        start, end = self.results.largest()
        self.pending = True  # until the reply is read: if that is interrupted, discard us
        self.conn.send_bytes(marshal.dumps((meta, extra_blob, start, end)))
        # While the reply does not come, ask whether the stage that called us was stopped (its
        # iterator dropped): then this worker is ended as close() ends a busy one, after the
        # grace period, and the read below reports it.
        while self.stopped is None and not self.conn.poll(_STOP_POLL_S):
            if _native.stage_stopping():
                owner._end_busy(self)
        ok, payload = _read_reply(self)
        if ok and isinstance(payload, tuple) and payload[0] == "pipe":
            # No free extent was large enough (the consumer holds many results): the result came
            # through the pipe instead, into memory of its own.
            buf = bytearray(payload[1][2])
            self.conn.recv_bytes_into(buf)
            self.pending = False
            return unpack(np.frombuffer(buf, np.uint8), payload[1], copy=False)
        self.pending = False
        if not ok:
            raise payload
        if isinstance(payload, int):
            raise owner._too_big("a result", payload)
        return self._views(payload)

    def _views(self, meta: Any) -> Dict[str, Any]:
        """The result the worker wrote at ``meta``: arrays that are views of the arena (no copy),
        over a region object whose collection gives the extent back for later results."""
        start, used = meta[0], meta[2]
        if used == 0:
            return unpack(self.arena, meta, copy=False)
        self.results.take(start, start + used)
        region = np.ndarray.__new__(_Region, (used,), np.uint8, buffer=self.mm, offset=start)
        weakref.finalize(region, self.results.give, start, start + used).atexit = False
        return unpack(region, (0, meta[1], used), copy=False)

    def stop(self, grace: float) -> None:
        """Ends an idle (or dead) worker without waiting for it: sends it the stop message (an
        empty one; a closed pipe alone is not seen under fork, where workers forked later hold
        copies of its far end), closes the pipe, and has :data:`_REAPER` signal it if it is still
        there after ``grace`` seconds."""
        try:
            self.conn.send_bytes(b"")
        except (OSError, ValueError):  # dead, or the pipe closed already
            pass
        try:
            self.conn.close()
        except OSError:
            pass
        _REAPER.end(self.proc, grace)


class _Region(np.ndarray):
    """An extent of an arena that results are views of. numpy keeps it as their ``base`` (it is
    not a plain ndarray, so views do not collapse past it): it lives exactly as long as any
    array of the result, and its finalizer hands the extent back to :class:`_ResultSpace`."""


class _ResultSpace:
    """The results half of a worker's arena: free extents, sorted and coalesced. Results stay
    in the arena while anything (the engine, a batch, the user) holds their arrays, so results
    cross from the worker with one copy (the worker's into the arena) and none in the parent."""

    def __init__(self, start: int, end: int) -> None:
        self._lock = threading.Lock()
        self._free: List[Tuple[int, int]] = [(start, end)]

    def largest(self) -> Tuple[int, int]:
        """The largest free extent, where the worker writes its next result."""
        with self._lock:
            return max(self._free, key=lambda e: e[1] - e[0], default=(0, 0))

    def take(self, start: int, end: int) -> None:
        with self._lock:
            for i, (a, b) in enumerate(self._free):
                if a <= start and end <= b:
                    self._free[i: i + 1] = [e for e in ((a, start), (end, b)) if e[0] < e[1]]
                    return
            raise AssertionError(f"result extent {start}..{end} is not free")

    def give(self, start: int, end: int) -> None:
        with self._lock:
            free = sorted(self._free + [(start, end)])
            merged = [free[0]]
            for a, b in free[1:]:
                if a == merged[-1][1]:
                    merged[-1] = (merged[-1][0], b)
                else:
                    merged.append((a, b))
            self._free = merged


def _map(fd: int, size: int) -> np.ndarray:
    """The shared memory behind ``fd`` as a uint8 array (the mapping outlives ``fd``)."""
    return np.frombuffer(mmap.mmap(fd, size), np.uint8)


def _anonymous_memory(size: int) -> int:
    """A file descriptor of ``size`` bytes of shared memory with no name anywhere."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("stokehold-arena", os.MFD_CLOEXEC)
    else:
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, path = tempfile.mkstemp(prefix="stokehold-arena-", dir=shm)
        os.unlink(path)  # nameless from now on: nothing is left behind, whatever happens
    os.ftruncate(fd, size)  # sparse: pages are only used when written
    return fd


def _read_reply(w: _Worker, starting: bool = False) -> Tuple[bool, Any]:
    """(True, result metadata | bytes needed) or (False, the exception to raise)."""
    try:
        msg = w.conn.recv_bytes()
    except (EOFError, OSError):
        w.proc.join(_JOIN_TIMEOUT)
        code = w.proc.exitcode
        if code is not None and code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = "exited"
        if w.stopped is not None:
            return False, WorkerProcessError(
                f"worker process {w.proc.pid} {how} (exit status {code}): its process map was "
                f"closed and this element was still running after the grace period "
                f"({w.stopped} s; then SIGTERM, and SIGKILL after another grace period)"
            )
        if starting:
            return False, WorkerProcessError(
                f"worker process {w.proc.pid} {how} (exit status {code}) while starting: see its "
                "stderr (a script that starts workers needs `if __name__ == '__main__':`)"
            )
        return False, WorkerProcessError(
            f"worker process {w.proc.pid} {how} (exit status {code}) while computing this element"
            f"{' (SIGKILL is what the OOM killer sends)' if code == -9 else ''}; "
            "the next element starts a new worker"
        )
    status, body = marshal.loads(msg)
    if status == "ok":
        return True, body
    if status == "full":
        return True, int(body)
    exc_blob, type_name, text, tb = body
    exc: Optional[BaseException] = None
    if exc_blob:
        try:
            exc = pickle.loads(exc_blob)
        except Exception:  # noqa: BLE001 - fall back to a generic error below
            exc = None
    if not isinstance(exc, BaseException):
        exc = WorkerProcessError(f"{type_name}: {text} (raised in a worker process; not picklable)")
    exc.__cause__ = _RemoteTraceback(f"\n\nTraceback in worker process {w.proc.pid}:\n{tb}")
    return False, exc


class ProcessMap:
    """The function the engine's map threads call: runs ``fn`` in a worker process.

    One worker per calling thread at a time (the engine's ``num_parallel_calls`` threads), at most
    ``max_workers``, started on demand. Extra positional arguments after the element (per-element
    context an op may pass) are pickled and passed on.
    """

    def __init__(
        self, fn: Callable[..., Any], label: str, max_workers: int, options: ProcessOptions
    ) -> None:
        method = options.start_method or _default_method()
        if method not in get_all_start_methods():
            raise InvalidArgumentError(
                f"map(processes=...): start_method={method!r} is not available here "
                f"(have {get_all_start_methods()})"
            )
        if options.memory_budget < 2 * max_workers * 4096:
            raise InvalidArgumentError(
                f"map(processes=...): memory_budget={options.memory_budget} is too small for "
                f"{max_workers} workers (at least {2 * max_workers * 4096} bytes)"
            )
        self._fn = fn
        self._label = label
        self._opts = options
        self._method = method
        self._max = max_workers
        # Page-aligned, so that each half of the arena starts on a page.
        self._arena_bytes = options.memory_budget // max_workers // 8192 * 8192
        self._blob = b"" if method == "fork" else _pickle_fn(label, fn)
        self._lock = threading.Condition()
        self._idle: List[_Worker] = []
        self._all: List[_Worker] = []
        self._starting = 0
        self._retiring: Set[int] = set()  # ids of busy workers to end when they come back
        _POOLS.add(self)
        if method == "forkserver":
            _preload_forkserver()

    def __reduce__(self) -> Any:
        raise TypeError(f"map[{self._label}] with processes=True cannot be pickled")

    def __call__(self, element: Dict[str, Any], *extra: Any) -> Dict[str, Any]:
        w = self._acquire()
        try:
            out = w.call(self, element, extra)
        except BaseException:
            # A worker that died, or whose reply was not read (an interrupt), cannot be reused.
            if w.pending or not w.proc.is_alive():
                self._discard(w)
            else:
                self._release(w)
            raise
        self._release(w)
        return out

    def pids(self) -> List[int]:
        """The worker processes alive now (for tests and monitoring)."""
        with self._lock:
            return [w.proc.pid for w in self._all if w.proc.pid is not None]

    def close(self) -> None:
        """Ends every worker without waiting for any: idle ones now (:meth:`_Worker.stop`), busy
        ones when they finish their element, or, if they are still in it after ``grace_period``
        seconds, with SIGTERM, then SIGKILL (the call waiting on one then raises
        :class:`WorkerProcessError` saying so). A later call starts new workers."""
        grace = self._opts.grace_period
        with self._lock:
            idle, self._idle = self._idle, []
            for w in idle:
                self._all.remove(w)
            busy = list(self._all)
            self._retiring.update(id(w) for w in busy)
            for w in busy:
                w.stopped = grace
        for w in idle:
            w.stop(grace)
        for w in busy:
            _REAPER.end(w.proc, grace)

    def _end_busy(self, w: _Worker) -> None:
        """Ends ``w``, busy in an element whose stage was stopped, as :meth:`close` ends a busy
        worker: after ``grace_period``, SIGTERM, then SIGKILL."""
        grace = self._opts.grace_period
        with self._lock:
            self._retiring.add(id(w))
            w.stopped = grace
        _REAPER.end(w.proc, grace)

    def _too_big(self, what: str, needed: int) -> InvalidArgumentError:
        half = self._arena_bytes // 2
        return InvalidArgumentError(
            f"map[{self._label}] (processes): {what} needs {needed} bytes of shared memory, more "
            f"than the {half} bytes a worker's arena holds each way (memory_budget="
            f"{self._opts.memory_budget} over {self._max} workers, half for inputs, half for "
            "results); raise ProcessOptions(memory_budget=...)"
        )

    def _acquire(self) -> _Worker:
        with self._lock:
            while not self._idle and len(self._all) + self._starting >= self._max:
                self._lock.wait()
            if self._idle:
                w = self._idle.pop()
                w.busy = True
                return w
            self._starting += 1
        try:
            w = _Worker(self)
        finally:
            with self._lock:
                self._starting -= 1
                self._lock.notify()
        w.busy = True
        with self._lock:
            self._all.append(w)
        return w

    def _release(self, w: _Worker) -> None:
        with self._lock:
            w.busy = False
            retire = id(w) in self._retiring
            self._retiring.discard(id(w))
            if not retire:
                w.idle_since = time.monotonic()
                self._idle.append(w)
                self._lock.notify()
        if retire:
            with self._lock:
                self._all.remove(w)
            w.stop(self._opts.grace_period)
        else:
            _ensure_janitor()

    def _reap(self, now: float) -> int:
        """Ends the workers idle since before ``now - idle_timeout``; returns how many are left."""
        with self._lock:
            old = [w for w in self._idle if now - w.idle_since >= self._opts.idle_timeout]
            for w in old:
                self._idle.remove(w)
                self._all.remove(w)
            left = len(self._all)
        for w in old:
            w.stop(self._opts.grace_period)
        return left

    def _discard(self, w: _Worker) -> None:
        with self._lock:
            if w in self._all:
                self._all.remove(w)
            self._retiring.discard(id(w))
            self._lock.notify()
        w.stop(0.0)  # dead, or its reply unread (an interrupt): SIGKILL now, reaped off this thread

    def __del__(self) -> None:
        # Only idle workers are left here: a call in flight holds a reference to this object.
        try:
            for w in list(self._all):
                w.stop(self._opts.grace_period)
        except Exception:  # noqa: BLE001 - nothing to report to at collection time
            pass


def process_map(
    op: str, fn: Callable[..., Any], label: str, num_parallel_calls: Optional[int],
    processes: Union[bool, ProcessOptions],
) -> ProcessMap:
    """The ``processes=`` argument of ``op``: ``fn`` wrapped to run in worker processes."""
    if processes is True:
        options = ProcessOptions()
    elif isinstance(processes, ProcessOptions):
        options = processes
    else:
        raise _args.fail(op, "processes", processes, "must be True, False or a ProcessOptions")
    if num_parallel_calls is None:
        raise _args.fail(op, "processes", processes,
                         "needs num_parallel_calls (the number of worker processes, or AUTOTUNE)")
    n = _args.parallelism(op, "num_parallel_calls", num_parallel_calls)
    # AUTOTUNE runs at most one thread per core, so one worker per core is enough.
    workers = max(1, os.cpu_count() or 1) if n == _args.AUTOTUNE else n
    budget = _args.count(op, "memory_budget", options.memory_budget, 1)
    if not options.idle_timeout >= 0:
        raise _args.fail(op, "idle_timeout", options.idle_timeout, "must be >= 0 seconds")
    grace = options.grace_period
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < math.inf:
        raise _args.fail(op, "grace_period", grace, "must be a finite number of seconds >= 0")
    return ProcessMap(fn, label, workers, ProcessOptions(
        options.start_method, budget, float(options.idle_timeout), float(grace)))


class KeyedCall:
    """``random_map``'s function for worker processes: ``fn(element, element_rng(seed, epoch,
    index))``, a module-level class so that it pickles (with ``fn``) like a plain function; the
    engine passes ``index`` and ``epoch`` per element, so the draws are the thread map's."""

    def __init__(self, fn: Callable[..., Any], seed: int) -> None:
        self.fn = fn
        self.seed = seed

    def __call__(self, element: Dict[str, Any], index: int, epoch: int) -> Any:
        from .keyed import element_rng

        return self.fn(element, element_rng(self.seed, epoch, index))


def _default_method() -> str:
    return "forkserver" if "forkserver" in get_all_start_methods() else "spawn"


_preloaded = False


def _preload_forkserver() -> None:
    """Starts the forkserver now, importing numpy and this module once there: each worker then
    starts by forking a ready interpreter, and the server's own start-up overlaps whatever the
    program does between building the pipeline and iterating it (cheap: it is not waited for)."""
    global _preloaded
    if not _preloaded:
        _preloaded = True
        from multiprocessing import forkserver

        forkserver.set_forkserver_preload(["numpy", "stokehold.processes"])
        forkserver.ensure_running()


# ---- lifetime: idle workers end after idle_timeout --------------------------------------------

_POOLS: weakref.WeakSet[ProcessMap] = weakref.WeakSet()
_janitor_lock = threading.Lock()
_janitor_running = False


def _ensure_janitor() -> None:
    global _janitor_running
    with _janitor_lock:
        if _janitor_running:
            return
        _janitor_running = True
    threading.Thread(target=_janitor, name="stokehold-process-janitor", daemon=True).start()


def _janitor() -> None:
    """Ends workers idle for longer than their pool's ``idle_timeout``; exits when no pool has
    a worker left (the next release starts it again)."""
    global _janitor_running
    while True:
        pools = list(_POOLS)
        tick = min([p._opts.idle_timeout for p in pools] + [1.0]) / 4
        time.sleep(max(tick, 0.01))
        with _janitor_lock:
            left = sum(p._reap(time.monotonic()) for p in list(_POOLS))
            if left == 0:
                _janitor_running = False
                return


class _Reaper:
    """Ends worker processes off the caller's thread: SIGTERM at a deadline, SIGKILL at least
    one grace period after the SIGTERM (so ``fn`` always sees the SIGTERM first, however late
    this thread runs), and reaps them (``exitcode`` polls ``waitpid``, or the forkserver's
    report). Its thread runs while it has processes to end and exits when none is left."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        # id(proc) -> [proc, SIGTERM deadline, grace, SIGKILL deadline once SIGTERM is sent]
        self._ending: Dict[int, List[Any]] = {}
        self._running = False

    def end(self, proc: Any, grace: float) -> None:
        """SIGTERM to ``proc`` in ``grace`` seconds and SIGKILL ``grace`` seconds after that,
        unless it has exited by then (an earlier deadline already set stands)."""
        now = time.monotonic()
        with self._cv:
            entry = self._ending.get(id(proc))
            if entry is None:
                self._ending[id(proc)] = [proc, now + grace, grace, None]
            elif now + grace < entry[1]:
                entry[1:3] = [now + grace, grace]
            self._cv.notify()
            if self._running:
                return
            self._running = True
        try:
            threading.Thread(target=self._run, name="stokehold-process-reaper", daemon=True).start()
        except RuntimeError:  # interpreter shutdown: the exit hook kills what is left
            with self._cv:
                self._running = False

    def _run(self) -> None:
        while True:
            with self._cv:
                if not self._ending:
                    self._running = False
                    return
                entries = list(self._ending.values())
            now = time.monotonic()
            for entry in entries:
                proc, term_at, grace, kill_at = entry
                if proc.exitcode is not None:  # exited and reaped
                    with self._cv:
                        self._ending.pop(id(proc), None)
                elif kill_at is None:
                    if now >= term_at:
                        entry[3] = now + grace
                        proc.terminate()
                elif now >= kill_at:
                    proc.kill()
            with self._cv:
                self._cv.wait(_REAP_INTERVAL)

    def kill_all(self) -> None:
        """At exit: SIGKILL to every process still being ended, and reap it."""
        with self._cv:
            procs = [entry[0] for entry in self._ending.values()]
            self._ending.clear()
        for proc in procs:
            _kill_and_reap(proc)


_REAPER = _Reaper()


def _kill_and_reap(proc: Any) -> None:
    if proc.exitcode is None:
        proc.kill()
    proc.join(_JOIN_TIMEOUT)


@atexit.register
def _close_all() -> None:
    # Registered after the native module's exit hook, so it runs first: killing the workers
    # wakes the map threads blocked on their pipes, which then leave Python promptly. No grace
    # period here: the interpreter is going, and workers would outlive it.
    for pool in list(_POOLS):
        for w in list(pool._all):
            _kill_and_reap(w.proc)
            try:
                w.conn.close()
            except OSError:
                pass
    _REAPER.kill_all()


# ---- the worker process -------------------------------------------------------------------------


def _worker_main(conn: Any, blob: bytes, fn: Any, size: int, method: str) -> None:
    """Entry point of a worker process: map elements until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the consumer's to handle
    _watch_parent(method, conn)
    fd = _reduction.recv_handle(conn)
    arena = _map(fd, size)
    os.close(fd)
    half = size // 2
    try:
        if fn is None:
            fn = pickle.loads(blob)
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send_bytes(marshal.dumps(("err", _describe(e))))
        return
    conn.send_bytes(marshal.dumps(("ok", None)))
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not msg:  # the stop message (_Worker.stop)
            return
        meta, extra_blob, out_start, out_end = marshal.loads(msg)
        element = out = None
        spill: Optional[np.ndarray] = None
        try:
            element = unpack(arena, meta, copy=False)
            extra = pickle.loads(extra_blob) if extra_blob else ()
            out = _result_dict(fn(element, *extra))
            try:
                reply: Tuple[str, Any] = ("ok", pack(arena, out_start, out_end, out))
            except ArenaFull as e:
                if e.needed > size - half:
                    reply = ("full", e.needed)
                else:  # fits the arena, not its free part now: send it down the pipe
                    spill = np.empty(e.needed, np.uint8)
                    reply = ("ok", ("pipe", pack(spill, 0, e.needed, out)))
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
            reply = ("err", _describe(e))
        element = out = None  # no views of the arena outlive the element
        try:
            conn.send_bytes(marshal.dumps(reply))
            if spill is not None:
                conn.send_bytes(spill)
        except OSError:  # the parent closed the pipe while we worked: we are done
            return


def _result_dict(out: Any) -> Dict[str, Any]:
    if not isinstance(out, dict):
        got = type(out).__name__
        hint = (": elements are dicts of named features, e.g. return {\"x\": x, \"y\": y}"
                if got in ("tuple", "list") else "")
        raise TypeError(f"expected a dict of feature name -> array, got {got}{hint}")
    return out


def _describe(e: BaseException) -> Tuple[bytes, str, str, str]:
    try:
        blob = pickle.dumps(e)
    except Exception:  # noqa: BLE001 - the parent falls back to the type name and text
        blob = b""
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return blob, type(e).__qualname__, str(e), tb


def _watch_parent(method: str, conn: Any) -> None:
    """Ends this worker when its parent is gone (SIGKILL leaves no chance to say goodbye), even
    in the middle of an element.

    The pipe's far end closes when the parent dies (or drops us): a thread polls for that hang-up
    without reading. Under fork, siblings forked later hold a copy of our pipe's far end, so there
    the thread watches ``getppid()`` instead. Under forkserver the kernel also sends SIGKILL when
    the forkserver exits (``PR_SET_PDEATHSIG``; it fires when the *thread* that forked us ends,
    and only the forkserver forks from a thread that lives as long as its process).
    """
    parent = os.getppid()
    if method == "forkserver" and sys.platform.startswith("linux"):
        try:
            import ctypes

            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        except (OSError, AttributeError, TypeError):
            pass
    hangup = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR

    def watch_pipe() -> None:
        poller = select.poll()
        poller.register(conn.fileno(), hangup)
        while True:
            if any(ev & hangup for _, ev in poller.poll()):
                os._exit(1)

    def watch_ppid() -> None:
        while True:
            threading.Event().wait(_WATCH_INTERVAL)
            if os.getppid() != parent:
                os._exit(1)

    watch = watch_ppid if method == "fork" else watch_pipe
    threading.Thread(target=watch, name="stokehold-watch-parent", daemon=True).start()
