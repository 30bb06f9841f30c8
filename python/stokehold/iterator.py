"""Iterators: one epoch (:class:`Iterator`) and a loop over epochs (:class:`EpochLoader`), each
with ``get_state()`` / ``set_state()``."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Union

from ._native import StateError

__all__ = ["Epoch", "EpochLoader", "Iterator"]

Element = Dict[str, Any]


class Iterator:
    """An iterator over one epoch, yielding dicts of numpy arrays.

    ``get_state()`` returns a JSON-serialisable dict; ``set_state(state)`` on an iterator of the
    same pipeline continues exactly there (a state of another pipeline is refused with
    :class:`StateError`).
    """

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Element:
        item: Element = self._native.__next__()
        return item

    @property
    def epoch(self) -> int:
        """The epoch this iterator runs."""
        return int(self._native.epoch)

    def get_state(self) -> Dict[str, Any]:
        """The position, as a JSON-serialisable dict."""
        state: Dict[str, Any] = json.loads(self._native.get_state())
        return state

    def set_state(self, state: Union[Mapping[str, Any], str]) -> None:
        """Moves to a position from :meth:`get_state` (a dict or its JSON text)."""
        self._native.set_state(_state_text(state))


def _state_text(state: Union[Mapping[str, Any], str]) -> str:
    if isinstance(state, Mapping):
        return json.dumps(dict(state))
    if isinstance(state, str):
        return state
    raise StateError(f"a state is a dict from get_state(), got {type(state).__name__}")


class Epoch:
    """One epoch of an :class:`EpochLoader`: yields ``len(ds)`` elements (the rest of them for
    the epoch a restored loader resumes in)."""

    def __init__(self, it: Any, n: int, epoch: int, taken: int = 0) -> None:
        self._it = it
        self._left = n - taken
        self._n = n
        self._len = n - taken
        #: The epoch number.
        self.epoch = epoch

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Epoch:
        return self

    def __next__(self) -> Element:
        if self._left <= 0:
            raise StopIteration
        item: Element = self._it.__next__()
        self._left -= 1
        return item

    def _drain(self) -> None:
        while self._left > 0:
            got = self._it.next_many(min(self._left, 64))
            if not got:
                break
            self._left -= len(got)


class EpochLoader:
    """Epochs from one prefetching iterator (see :meth:`Dataset.epochs`). Single pass;
    ``len()`` is the number of epochs still to come.

    ``get_state()`` / ``set_state()`` checkpoint it: the state names the epoch in progress, the
    elements of it already yielded, and the underlying iterator's exact position. A new loader of
    the same pipeline and ``epochs()`` arguments, given that state before it is iterated, yields
    first the rest of that epoch (as an :class:`Epoch` with ``epoch`` set), then the following
    epochs: exactly what the interrupted run had still to yield, unless it abandoned an epoch
    part-way (which a restored loader does not know, and finishes)."""

    _FORMAT = "stokehold-epochs"

    def __init__(self, native: Any, per_epoch: int, start: int, count: Optional[int]) -> None:
        self._native = native
        self._it: Any = None
        self._per_epoch = per_epoch
        self._start = start
        self._count = count
        self._next = start
        self._end = None if count is None else start + count
        self._current: Optional[Epoch] = None
        self._resume_taken = 0

    def __len__(self) -> int:
        if self._end is None:
            raise TypeError("this loader runs forever (epochs() without a count)")
        return self._end - self._next

    def __iter__(self) -> EpochLoader:
        return self

    def get_state(self) -> Dict[str, Any]:
        """The position, as a JSON-serialisable dict."""
        cur = self._current
        if cur is not None and cur._left > 0:
            epoch, taken = cur.epoch, cur._n - cur._left
        else:
            epoch, taken = self._next, self._resume_taken
        it = None if self._it is None else json.loads(self._it.get_state())
        return {"format": self._FORMAT, "version": 1, "start": self._start, "count": self._count,
                "per_epoch": self._per_epoch, "epoch": epoch, "taken": taken, "iter": it}

    def set_state(self, state: Union[Mapping[str, Any], str]) -> None:
        """Moves a loader not yet iterated to a position from :meth:`get_state`."""
        st = json.loads(_state_text(state))
        if not isinstance(st, dict) or st.get("format") != self._FORMAT or st.get("version") != 1:
            raise StateError("not an epochs() loader state (format stokehold-epochs, version 1)")
        if self._it is not None or self._current is not None:
            raise StateError("set_state() on a loader that has started; make a new one")
        mine = (self._start, self._count, self._per_epoch)
        theirs = (st.get("start"), st.get("count"), st.get("per_epoch"))
        if mine != theirs:
            raise StateError(
                f"this state is of epochs(start, count, len) = {theirs}, this loader {mine}"
            )
        epoch, taken = int(st["epoch"]), int(st["taken"])
        if not (self._start <= epoch and (self._end is None or epoch <= self._end)
                and 0 <= taken <= self._per_epoch):
            raise StateError(f"epoch {epoch} / taken {taken} lies outside this loader")
        if st.get("iter") is not None:
            self._it = self._native.iter(0)
            self._it.set_state(json.dumps(st["iter"]))
        self._next, self._resume_taken = epoch, taken

    def __next__(self) -> Epoch:
        if self._current is not None:
            self._current._drain()
            self._current = None
        if self._end is not None and self._next >= self._end:
            raise StopIteration
        if self._it is None:
            self._it = self._native.iter(0)
        self._current = Epoch(self._it, self._per_epoch, self._next, self._resume_taken)
        self._resume_taken = 0
        self._next += 1
        return self._current
