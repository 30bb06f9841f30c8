"""JAX adapter: batches as ``jax.Array``\\ s, put on the device ahead of the training step.

jax is imported only when this adapter is used. Batch in stokehold, then::

    for batch in stokehold.jax.iterate(ds.batch(256).prefetch(2), sharding=None, buffer=2):
        state = train_step(state, batch)

``jax.device_put`` is asynchronous, so keeping ``buffer`` batches in flight overlaps the transfer
of the next batches with the step on the current one (the same idea as flax's
``prefetch_to_device``). With a ``sharding`` (say a ``NamedSharding`` over a mesh's data axis)
each batch is laid out across devices as it is put; without one it goes to the default device.

A :class:`stokehold.Ragged` becomes a :class:`RaggedArray` (values and int64 row splits as
arrays: jax has no ragged type); bytes features stay lists of ``bytes`` (jax has no strings).
"""

from __future__ import annotations

import collections
from typing import Any, Dict, Iterator, NamedTuple, Optional

import numpy as np

from ._optional import needs
from .dataset import Dataset
from .ragged import Ragged

__all__ = ["RaggedArray", "iterate", "to_jax"]


class RaggedArray(NamedTuple):
    """A ragged batch as jax arrays: row ``i`` is ``values[row_splits[i]:row_splits[i+1]]``."""

    values: Any
    row_splits: Any


def to_jax(element: Dict[str, Any], sharding: Optional[Any] = None) -> Dict[str, Any]:
    """Puts one element or batch (a dict of numpy arrays / Ragged) on the device(s): returns at
    once, the copies finish in the background. Ragged features ignore ``sharding`` (their
    lengths differ from batch to batch) and go to the default device."""
    with needs("jax", "stokehold.jax.to_jax"):
        import jax

    out: Dict[str, Any] = {}
    for k, v in element.items():
        if isinstance(v, Ragged):
            out[k] = RaggedArray(jax.device_put(v.values), jax.device_put(v.row_splits))
            continue
        a = np.asarray(v)
        out[k] = a.tolist() if a.dtype == object else jax.device_put(a, sharding)
    return out


def iterate(ds: Dataset, sharding: Optional[Any] = None, buffer: int = 2) -> Iterator[Dict[str, Any]]:
    """Yields the elements of the next epoch of ``ds`` as dicts of device arrays, with ``buffer``
    (>= 1) of them already on their way to the device."""
    if int(buffer) < 1:
        raise ValueError(f"buffer must be >= 1, got {buffer}")
    queue: collections.deque[Dict[str, Any]] = collections.deque()
    for element in ds:
        queue.append(to_jax(element, sharding))
        if len(queue) > buffer:
            yield queue.popleft()
    while queue:
        yield queue.popleft()
