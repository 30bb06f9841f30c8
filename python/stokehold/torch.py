"""PyTorch adapter: a stokehold pipeline as a ``torch.utils.data.IterableDataset``.

torch is imported only when this adapter is used. Batch in stokehold and hand the batches over
with ``DataLoader(as_torch(ds), batch_size=None, num_workers=0)``: stokehold runs its own
background thread (``prefetch``), so DataLoader workers are not needed (each worker would iterate
the whole pipeline).

Arrays become tensors with ``torch.from_numpy`` (no copy) when numpy can write to them (fresh
batches); read-only arrays (elements that are views of an in-memory dataset) are copied, so that
writing to the tensor cannot change the cache. A :class:`stokehold.Ragged` becomes a
:class:`RaggedTensor` (values and int64 row splits as tensors); bytes features stay lists of
``bytes``.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple

import numpy as np

from .dataset import Dataset
from .ragged import Ragged

__all__ = ["RaggedTensor", "as_torch", "to_torch"]


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
    ``ds`` does. ``len()`` is ``len(ds)`` when known.
    """
    import torch.utils.data

    class _StokeholdIterable(torch.utils.data.IterableDataset):  # type: ignore[misc]
        def __init__(self, dataset: Dataset) -> None:
            super().__init__()
            self.dataset = dataset

        def __iter__(self) -> Any:
            info = torch.utils.data.get_worker_info()
            if info is not None and info.num_workers > 1:
                raise RuntimeError(
                    "a stokehold pipeline runs its own background thread (prefetch); "
                    "use DataLoader(..., num_workers=0, batch_size=None): with several workers "
                    "each would yield every element"
                )
            for element in self.dataset:
                yield to_torch(element)

        def __len__(self) -> int:
            return len(self.dataset)

    return _StokeholdIterable(ds)


