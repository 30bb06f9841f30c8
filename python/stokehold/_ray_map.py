"""``Dataset.remote_map``: a map stage whose function runs on a pool of Ray actors, with the
local parallel map's order, determinism and checkpoints (``docs/RAY.md``). Public as
:func:`stokehold.ray.remote_map` and :func:`stokehold.ray.actors`.

This module sits below ``dataset.py``: it takes the dataset it maps as an argument and never
imports ``dataset`` at run time, so ``Dataset.remote_map`` can import it (lazily: importing it
imports Ray, and ``import stokehold`` never does).
"""

from __future__ import annotations

import os
import queue
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

import ray

from . import _args

if TYPE_CHECKING:
    from .dataset import Dataset, Element

#: The actor pool behind each remote_map dataset (the native map holds the pool; this finds it).
_pools: weakref.WeakKeyDictionary[Dataset, _ActorPool] = weakref.WeakKeyDictionary()


class _MapActor:
    """The actor body: applies the user's function to a group of elements."""

    def __init__(self, fn: Callable[[Element], Mapping[str, Any]]) -> None:
        self._fn = fn

    def apply(self, elements: List[Element]) -> List[Any]:
        """(True, result) or (False, the exception ``fn`` raised) per element: one element's
        error fails that element only."""
        out: List[Any] = []
        for e in elements:
            try:
                out.append((True, dict(self._fn(e))))
            except Exception as exc:  # noqa: BLE001 - re-raised by the caller for its element
                out.append((False, exc))
        return out

    def pid(self) -> int:
        return os.getpid()


#: How long a sender thread waits for work before it ends (seconds): back-to-back epochs keep
#: them, a dropped iterator does not hold threads for long.
_SENDER_IDLE = 1.0


class _Request:
    """One element on its way to an actor, and what came back."""

    __slots__ = ("element", "done", "ok", "value")

    def __init__(self, element: Element) -> None:
        self.element = element
        self.done = threading.Event()
        self.ok = False
        self.value: Any = None

    def finish(self, ok: bool, value: Any) -> None:
        self.ok, self.value = ok, value
        self.done.set()


class _ActorPool:
    """Hands elements from the parallel map's worker threads to Ray actors, in groups.

    A worker thread queues its element and waits (the GIL released), so the engine's reorder
    buffer, memory budget and checkpoints apply unchanged. ``num_actors * depth`` sender threads
    each take up to ``per_call`` queued elements, send them to their actor as one Ray call and
    hand the results back: a Ray call costs the driver and the actor a fixed few hundred
    microseconds of CPU, which per element is what kept 2 actors from using 2 cores; ``depth`` 2
    keeps the next group queued at each actor while it computes the current one. An actor that
    dies is replaced and the group sent again: the function is pure per element, so nothing is
    lost or duplicated.
    """

    def __init__(self, fn: Callable[[Element], Mapping[str, Any]], num_actors: int, num_cpus: float,
                 depth: int, max_retries: int, per_call: int) -> None:
        self._fn = fn
        self._num_cpus = num_cpus
        self._retries = max_retries
        self._per_call = per_call
        self._actors: List[Any] = [None] * num_actors
        self._lock = threading.Lock()
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._senders = [False] * (num_actors * depth)  # sender s runs, feeding actor s % num_actors
        self.restarts = 0

    def _actor(self, k: int) -> Any:
        with self._lock:
            if self._actors[k] is None:
                cls = ray.remote(num_cpus=self._num_cpus, max_restarts=0)(_MapActor)
                self._actors[k] = cls.remote(self._fn)
            return self._actors[k]

    def _replace(self, k: int, dead: Any) -> None:
        with self._lock:
            if self._actors[k] is dead:
                self._actors[k] = None
                self.restarts += 1

    def actors(self) -> List[Any]:
        """The live actor handles (started ones)."""
        with self._lock:
            return [a for a in self._actors if a is not None]

    def __call__(self, element: Element) -> Dict[str, Any]:
        req = _Request(element)
        self._queue.put(req)
        with self._lock:  # after the put: a sender that ends under this lock saw it queued
            for s, running in enumerate(self._senders):
                if not running:
                    self._senders[s] = True
                    threading.Thread(target=self._send_loop, args=(s,), daemon=True,
                                     name=f"stokehold-remote-map-{s}").start()
        req.done.wait()
        if not req.ok:
            raise req.value
        out: Dict[str, Any] = req.value
        return out

    def _send_loop(self, s: int) -> None:
        k = s % len(self._actors)
        while True:
            try:
                group = [self._queue.get(timeout=_SENDER_IDLE)]
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._senders[s] = False
                        return
                continue
            while len(group) < self._per_call:
                try:
                    group.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._send(k, group)

    def _send(self, k: int, group: List[_Request]) -> None:
        for attempt in range(self._retries + 1):
            actor = self._actor(k)
            try:
                results = ray.get(actor.apply.remote([r.element for r in group]))
            except ray.exceptions.RayActorError as e:
                self._replace(k, actor)
                if attempt < self._retries:
                    continue
                err: BaseException = e
            except ray.exceptions.RayTaskError as e:
                # The group as a whole failed (e.g. a result Ray could not serialize).
                err = e.cause if isinstance(e.cause, BaseException) else e
            except BaseException as e:  # noqa: BLE001 - every waiting element must hear of it
                err = e
            else:
                for r, (ok, value) in zip(group, results):
                    r.finish(ok, value)
                return
            for r in group:
                r.finish(False, err)
            return


def remote_map(ds: Dataset, fn: Callable[[Element], Mapping[str, Any]], *, num_actors: int = 2,
               num_cpus_per_actor: float = 1.0, depth: int = 2, max_retries: int = 3,
               name: Optional[str] = None, elements_per_call: int = 8) -> Dataset:
    """``ds.map(fn)`` with ``fn`` run on ``num_actors`` Ray actors (see ``Dataset.remote_map``)."""
    op = "remote_map"
    fn = _args.function(op, "fn", fn)
    n = _args.count(op, "num_actors", num_actors, 1)
    d = _args.count(op, "depth", depth, 1)
    per = _args.count(op, "elements_per_call", elements_per_call, 1)
    cpus = float(num_cpus_per_actor)
    if not cpus >= 0:
        raise _args.fail(op, "num_cpus_per_actor", num_cpus_per_actor, "must be >= 0")
    pool = _ActorPool(fn, n, cpus, d, _args.count(op, "max_retries", max_retries), per)
    label = name or f"remote({_args.label(fn)})"
    # Enough engine threads to fill every actor's queued groups.
    out = ds.map(pool, num_parallel_calls=n * d * per, deterministic=True, name=label)
    _pools[out] = pool
    return out


def actors(ds: Dataset) -> List[Any]:
    """The Ray actor handles started so far by the :func:`remote_map` stage that made ``ds``
    (empty for any other dataset): for monitoring, or to kill one in a fault test."""
    pool = _pools.get(ds)
    return [] if pool is None else pool.actors()
