"""Epochs of a stream (:meth:`Dataset.epochs` over a pipeline with no random access: TFRecord
files read in order, a filter, a buffer shuffle...): each epoch is a fresh pass of the stream,
``ds.iter(epoch=k)``, as tf.data's ``repeat()`` makes one, with the loader's API and
checkpoints. A random-access pipeline's loader (core's ``Epochs``) runs one prefetching
iterator across the epoch boundaries instead; a stream's pass ends where the stream does, which
nothing knows before, so each epoch's prefetch starts with its first element."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union

from ._native import StateError
from .iterator import Element, Epoch, EpochLoader, Iterator, _state_text

if TYPE_CHECKING:
    from .dataset import Dataset

#: ``format`` of a stream loader's state.
STATE_FORMAT = "stokehold-stream-epochs"


class StreamEpoch(Epoch):
    """One pass of the stream. Its length is not known before it ends (``len()`` raises
    ``TypeError``, as for the stream itself); leaving it early skips the rest."""

    def __init__(self, loader: StreamEpochLoader, it: Iterator, epoch: int) -> None:
        self._loader = loader
        self._it: Optional[Iterator] = it
        #: The epoch number.
        self.epoch = epoch

    def __len__(self) -> int:
        raise TypeError("an epoch of a stream has no length known before it ends")

    def __next__(self) -> Element:
        if self._it is None or self._loader._current is not self:
            raise StopIteration  # ended, or the loader has moved on
        try:
            item: Element = next(self._it)
        except StopIteration:
            self._it = None
            raise
        return item


class StreamEpochLoader(EpochLoader):
    """Epochs ``start .. start + count`` (endless for ``None``) of a stream, each a fresh pass
    (see the module doc). ``get_state()`` names the epoch in progress and its iterator's
    position; a new loader of the same pipeline given that state before it is iterated yields the
    rest of that epoch, then the following ones."""

    def __init__(self, ds: Dataset, start: int, count: Optional[int]) -> None:
        self._ds = ds
        self._next = start
        self._end = None if count is None else start + count
        self._current: Optional[StreamEpoch] = None
        self._resume: Optional[Dict[str, Any]] = None

    def __len__(self) -> int:
        if self._end is None:
            raise TypeError("this loader runs forever (epochs() without a count)")
        return max(0, self._end - self._next)

    def __iter__(self) -> StreamEpochLoader:
        return self

    def __next__(self) -> Epoch:
        if self._end is not None and self._next >= self._end:
            self._current = None
            raise StopIteration
        k = self._next
        self._next += 1
        it = self._ds.iter(epoch=k)
        if self._resume is not None:
            it.set_state(self._resume)
            self._resume = None
        self._current = StreamEpoch(self, it, k)
        return self._current

    def get_state(self) -> Dict[str, Any]:
        """The position, as a JSON-serialisable dict: the epoch in progress and its iterator's
        state, or the next epoch to start."""
        cur = self._current
        if cur is not None and cur._it is not None:
            return {"format": STATE_FORMAT, "version": 1, "epoch": cur.epoch, "iterator": cur._it.get_state()}
        return {"format": STATE_FORMAT, "version": 1, "epoch": self._next, "iterator": None}

    def set_state(self, state: Union[Mapping[str, Any], str]) -> None:
        """Moves a loader not yet iterated to a position from :meth:`get_state`."""
        s = json.loads(_state_text(state))
        if not isinstance(s, dict) or s.get("format") != STATE_FORMAT or s.get("version") != 1:
            raise StateError(f"not a state of a stream's epochs() loader (format {STATE_FORMAT!r}, version 1): "
                             f"{str(s)[:200]}")
        if self._current is not None:
            raise StateError("set_state() needs a loader that has not started")
        epoch, it = s.get("epoch"), s.get("iterator")
        if not isinstance(epoch, int) or epoch < 0 or (it is not None and not isinstance(it, dict)):
            raise StateError(f"a stream loader's state needs an epoch >= 0 and an iterator state: {str(s)[:200]}")
        if self._end is not None and epoch > self._end:
            raise StateError(f"the state's epoch {epoch} is past this loader's last ({self._end - 1})")
        self._next = epoch
        self._resume = it


__all__ = ["STATE_FORMAT", "StreamEpoch", "StreamEpochLoader"]
