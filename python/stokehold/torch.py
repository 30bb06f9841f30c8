"""PyTorch adapter: a stokehold pipeline as a ``torch.utils.data.IterableDataset``.

torch is imported only when this adapter is used. Batch in stokehold and hand the batches over
with ``DataLoader(as_torch(ds), batch_size=None)``. stokehold runs its own threads, so
``num_workers=0`` is the usual choice; with ``num_workers=k`` each worker takes its own share of
the elements (for Python map functions, ``ds.map(fn, num_parallel_calls=k, processes=True)``
uses k processes with one engine and less memory). :func:`as_torch_map` is the map-style form,
for torch samplers.

Arrays become tensors with ``torch.from_numpy`` (no copy) when numpy can write to them (fresh
batches); read-only arrays (elements that are views of an in-memory dataset) are copied, so that
writing to the tensor cannot change the cache. A :class:`stokehold.Ragged` becomes a
:class:`RaggedTensor` (values and int64 row splits as tensors); bytes features stay lists of
``bytes``.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, NamedTuple

import numpy as np

from ._optional import needs
from .dataset import Dataset
from .ragged import Ragged

__all__ = ["RaggedTensor", "as_torch", "as_torch_map", "to_torch"]


class RaggedTensor(NamedTuple):
    """A ragged batch as torch tensors: row ``i`` is ``values[row_splits[i]:row_splits[i+1]]``."""

    values: Any
    row_splits: Any


def _tensor(torch: Any, a: np.ndarray) -> Any:
    if a.dtype == object:
        return a.tolist()
    if not a.flags.writeable:
        a = a.copy()
    return torch.from_numpy(a)


def to_torch(element: Dict[str, Any]) -> Dict[str, Any]:
    """Converts one element or batch (a dict of numpy arrays / Ragged) to torch."""
    with needs("torch", "stokehold.torch.to_torch"):
        import torch

    out: Dict[str, Any] = {}
    for k, v in element.items():
        if isinstance(v, Ragged):
            out[k] = RaggedTensor(_tensor(torch, v.values), _tensor(torch, v.row_splits))
        else:
            out[k] = _tensor(torch, np.asarray(v))
    return out


def as_torch(ds: Dataset) -> Any:
    """Wraps ``ds`` as a ``torch.utils.data.IterableDataset`` yielding dicts of tensors.

    Each ``iter()`` runs the next epoch of ``ds`` (a new shuffle order), as a ``for`` loop over
    ``ds`` does; ``set_epoch(e)`` picks the epoch instead (do so each epoch when DataLoader
    workers are not persistent: each starts from a copy of this object). ``len()`` is
    ``len(ds)`` when known.

    Under ``DataLoader(num_workers=k)`` each worker takes its share (``get_worker_info()``):
    ``ds.worker_split(k, worker)`` when ``ds`` is random-access (each element computed once,
    by one worker), else every k-th element of the stream (each worker reads the whole stream).
    Either way the workers together yield each element once, and DataLoader's round-robin over
    the workers gives back the order of ``num_workers=0``.
    """
    with needs("torch", "stokehold.torch.as_torch"):
        import torch.utils.data

    class _StokeholdIterable(torch.utils.data.IterableDataset):  # type: ignore[misc]
        def __init__(self, dataset: Dataset) -> None:
            super().__init__()
            self.dataset = dataset

        def set_epoch(self, epoch: int) -> None:
            self.dataset.epoch = epoch

        def __iter__(self) -> Any:
            epoch = self.dataset.epoch
            self.dataset.epoch = epoch + 1
            info = torch.utils.data.get_worker_info()
            if info is None or info.num_workers == 1:
                elements: Any = self.dataset.iter(epoch)
            elif self.dataset.is_random_access:
                part = self.dataset.worker_split(info.num_workers, info.id)
                elements = part.iter(epoch)
            else:
                elements = itertools.islice(self.dataset.iter(epoch), info.id, None, info.num_workers)
            for element in elements:
                yield to_torch(element)

        def __len__(self) -> int:
            return len(self.dataset)

    return _StokeholdIterable(ds)


def as_torch_map(ds: Dataset) -> Any:
    """Wraps a random-access ``ds`` as a map-style ``torch.utils.data.Dataset``:
    ``__getitem__(i)`` is ``ds[i]`` as tensors (element, or batch when ``ds`` batches) and
    ``__len__`` is ``len(ds)``, so torch samplers (``RandomSampler``, ``DistributedSampler``)
    and ``DataLoader(num_workers=k)`` pick the indices. ``set_epoch(e)`` reads epoch ``e`` of
    ``ds`` (its shuffles and random crops drawn for that epoch); the default is epoch 0."""
    with needs("torch", "stokehold.torch.as_torch_map"):
        import torch.utils.data

    if not ds.is_random_access:
        raise TypeError(f"as_torch_map needs a random-access dataset; {ds.describe()} is a stream "
                        "(use as_torch for streams)")
    n = len(ds)
    forever = ds.repeat()  # index e * n + i is element i of epoch e: epochs by index arithmetic

    class _StokeholdMap(torch.utils.data.Dataset):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.dataset = ds
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = int(epoch)

        def __len__(self) -> int:
            return n

        def __getitem__(self, index: int) -> Dict[str, Any]:
            i = int(index)
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"index {index} out of range for a dataset of length {n}")
            return to_torch(forever[self.epoch * n + i])

    return _StokeholdMap()
