"""Iterators: one epoch (:class:`Iterator`) and a loop over epochs (:class:`EpochLoader`), each
with ``get_state()`` / ``set_state()``."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Union

from . import _native
from ._native import StateError

__all__ = ["Epoch", "EpochLoader", "Iterator"]

Element = Dict[str, Any]


class Iterator(_native.Iterator):
    """An iterator over one epoch, yielding dicts of numpy arrays.

    ``get_state()`` returns a JSON-serialisable dict; ``set_state(state)`` on an iterator of the
    same pipeline continues exactly there (a state of another pipeline is refused with
    :class:`StateError`). ``next()`` and ``epoch`` are the native iterator's own (this class
    only adds the dict states), so a loop calls into Rust with no Python frame between.
    """

    __slots__ = ()

    def get_state(self) -> Dict[str, Any]:
        """The position, as a JSON-serialisable dict."""
        state: Dict[str, Any] = json.loads(self.state_json())
        return state

    def set_state(self, state: Union[Mapping[str, Any], str]) -> None:
        """Moves to a position from :meth:`get_state` (a dict or its JSON text)."""
        self.set_state_json(_state_text(state))


def _state_text(state: Union[Mapping[str, Any], str]) -> str:
    if isinstance(state, Mapping):
        return json.dumps(dict(state))
    if isinstance(state, str):
        return state
    raise StateError(f"a state is a dict from get_state(), got {type(state).__name__}")


class Epoch:
    """One epoch of an :class:`EpochLoader`: yields ``len(ds)`` elements (the rest of them for
    the epoch a restored loader resumes in). Leaving it early skips the rest when the loader
    moves on."""

    def __init__(self, native: _native.Epochs, epoch: int) -> None:
        self._native = native
        self._len = native.epoch_len()
        #: The epoch number.
        self.epoch = epoch

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Epoch:
        return self

    def __next__(self) -> Element:
        if self._native.current_epoch() != self.epoch:
            raise StopIteration  # the loader has moved on to a later epoch
        item: Element = self._native.__next__()
        return item


class EpochLoader:
    """Epochs from one prefetching iterator (see :meth:`Dataset.epochs`; the loader itself is
    core's ``Epochs``). Single pass; ``len()`` is the number of epochs still to come.

    ``get_state()`` / ``set_state()`` checkpoint it: the state names the epoch in progress, the
    elements of it already yielded, and the underlying iterator's exact position. A new loader of
    the same pipeline and ``epochs()`` arguments, given that state before it is iterated, yields
    first the rest of that epoch (as an :class:`Epoch` with ``epoch`` set), then the following
    epochs: exactly what the interrupted run had still to yield, unless it abandoned an epoch
    part-way (which a restored loader does not know, and finishes)."""

    def __init__(self, native: _native.Epochs) -> None:
        self._native = native

    def __len__(self) -> int:
        left = self._native.epochs_left()
        if left is None:
            raise TypeError("this loader runs forever (epochs() without a count)")
        return left

    def __iter__(self) -> EpochLoader:
        return self

    def __next__(self) -> Epoch:
        epoch = self._native.next_epoch()
        if epoch is None:
            raise StopIteration
        return Epoch(self._native, epoch)

    def get_state(self) -> Dict[str, Any]:
        """The position, as a JSON-serialisable dict."""
        state: Dict[str, Any] = json.loads(self._native.get_state())
        return state

    def set_state(self, state: Union[Mapping[str, Any], str]) -> None:
        """Moves a loader not yet iterated to a position from :meth:`get_state`."""
        self._native.set_state(_state_text(state))
