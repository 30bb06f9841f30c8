"""Keras 3 adapter: a batched random-access pipeline as a ``keras.utils.PyDataset``.

keras is imported only when this adapter is used::

    train = stokehold.keras.as_keras(ds.shuffle(seed=0).batch(64), x="image", y="label")
    model.fit(train, epochs=10)          # no shuffle= argument: stokehold shuffles

``len()`` is the number of batches; ``train[i]`` is batch ``i`` of the current epoch, read by
index (any order, any of Keras's worker threads); at each epoch's end the adapter moves to the
next epoch, so a ``shuffle(seed)`` upstream gives a new order each epoch, the same orders as
``for batch in ds`` epoch after epoch, starting at epoch 0 (Keras's peek at the first batches
before training, and the ``on_epoch_end`` call after it, do not count as an epoch). Keras's own
``fit(shuffle=True)`` (its default) reorders the batches within an epoch: pass
``shuffle=False`` for stokehold's exact order. Batches are numpy arrays, which every Keras backend takes.

``x`` and ``y`` (and ``sample_weight``) name features: a name gives that array, a list of names a
tuple of arrays, ``None`` for ``x`` the whole dict (for models with named inputs). Ragged and
bytes features have no Keras form: pad them first (``padded_batch``) or leave them out.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Sequence, Union

from ._optional import needs
from .dataset import Dataset
from .ragged import Ragged

__all__ = ["as_keras"]

Names = Union[None, str, Sequence[str]]


def _pick(batch: Dict[str, Any], names: Names) -> Any:
    if names is None:
        return batch
    if isinstance(names, str):
        return _array(batch, names)
    return tuple(_array(batch, n) for n in names)


def _array(batch: Dict[str, Any], name: str) -> Any:
    if name not in batch:
        raise KeyError(f"feature {name!r} is not in the batch (features: {sorted(batch)})")
    v = batch[name]
    if isinstance(v, Ragged):
        raise TypeError(f"feature {name!r} is ragged; use padded_batch for Keras")
    return v


def as_keras(
    ds: Dataset,
    x: Names = None,
    y: Names = None,
    sample_weight: Names = None,
    epoch: Optional[int] = None,
    **py_dataset_kwargs: Any,
) -> Any:
    """Wraps the batched, random-access ``ds`` as a ``keras.utils.PyDataset``.

    Args:
        x, y, sample_weight: feature name(s) for each part of a batch (see the module doc).
        epoch: the first epoch (default ``ds``'s next one).
        **py_dataset_kwargs: ``workers`` and ``max_queue_size`` for ``PyDataset`` (worker
            threads read batches by index from the one pipeline; ``use_multiprocessing`` is
            untested).
    """
    with needs("keras", "stokehold.keras.as_keras"):
        import keras

    if not ds.is_random_access:
        raise TypeError(
            f"as_keras needs a random-access pipeline (len and ds[i]); {ds.describe()} is a "
            f"stream: pass a generator of batches to fit() instead"
        )
    n = len(ds)
    first = ds.epoch if epoch is None else int(epoch)

    class _StokeholdPyDataset(keras.utils.PyDataset):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(**py_dataset_kwargs)
            self.dataset = ds
            self.epoch = first
            self._served = 0
            self._ended = False
            self._lock = threading.Lock()

        def __len__(self) -> int:
            return n

        def __getitem__(self, index: int) -> Any:
            if not 0 <= index < n:
                raise IndexError(f"batch {index} of {n}")
            with self._lock:
                self._served += 1
                epoch = self.epoch
            batch = ds._native.get_in_epoch(epoch, index)
            xs = _pick(batch, x)
            if y is None:
                return xs
            if sample_weight is None:
                return xs, _pick(batch, y)
            return xs, _pick(batch, y), _pick(batch, sample_weight)

        def on_epoch_end(self) -> None:
            # Keras peeks at a batch or two to learn the output signature and then calls
            # on_epoch_end before the first real epoch: that call must not advance the epoch,
            # or training would run epochs 1, 2, ... of the pipeline instead of 0, 1, ...
            with self._lock:
                peek = not self._ended and self._served < n
                self._ended = True
                self._served = 0
                if not peek:
                    self.epoch += 1

    return _StokeholdPyDataset()
