"""Shard folders (``docs/FORMAT.md``), rank sharding, windowed shuffle and caches.

    >>> import numpy as np, stokehold, tempfile
    >>> path = tempfile.mkdtemp() + "/ds"
    >>> ds = stokehold.from_arrays({"x": np.arange(10), "v": [np.ones(n) for n in range(10)]})
    >>> manifest = stokehold.write_shards(ds, path)
    >>> shards = stokehold.open_shards(path)
    >>> len(shards), int(shards[3]["x"])
    (10, 3)
    >>> [int(e["x"]) for e in shards.shard(4, 1)]
    [1, 5, 9]

Importing this module adds ``shard``, ``elastic_shard``, ``worker_split``, ``window_shuffle``,
``slice`` and ``cache`` to :class:`stokehold.Dataset`.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Optional, Union

from . import _native
from ._native import InvalidArgumentError
from .dataset import Dataset, _count, _draw_seed

__all__ = ["open_shards", "write_shards", "verify_shards"]

PathLike = Union[str, "os.PathLike[str]"]

#: Default target shard size: 256 MiB (shards of 100-300 MB stream and shuffle well).
DEFAULT_SHARD_SIZE = 256 << 20

_POLICIES = ("drop", "pad", "even")


def open_shards(path: PathLike, verify: bool = True) -> Dataset:
    """Opens a shard folder as a random-access dataset (``len``, ``ds[i]``, global shuffle...).

    Records are memory-mapped; uncompressed arrays come out without a copy.

    Args:
        path: the folder written by :func:`write_shards` (or ``stokehold write``).
        verify: check each record's CRC32C when it is read (default True).

    Raises:
        DataCorruptionError: an incomplete folder (no manifest: a write was interrupted), an
            unknown format version, a manifest that disagrees with its shards or points outside
            the folder; the message names the file (and the record).
        StokeholdFileNotFoundError: a shard listed in the manifest is missing.
    """
    return Dataset._wrap(_native.open_shards(os.fspath(path), bool(verify)))


def verify_shards(path: PathLike) -> None:
    """Reads every byte of a shard folder: whole-file and per-record checksums, decoding.

    Raises:
        DataCorruptionError: naming the file and the record.
    """
    _native.verify_shards(os.fspath(path))


def write_shards(
    ds: Dataset,
    path: PathLike,
    *,
    shard_size: int = DEFAULT_SHARD_SIZE,
    compression: str = "none",
    zstd_level: int = 3,
    shuffle_seed: Optional[int] = None,
    threads: Optional[int] = None,
    overwrite: bool = False,
    progress: Optional[Callable[[int, Optional[int]], Any]] = None,
) -> Dict[str, Any]:
    """Writes one epoch of ``ds`` as a shard folder, atomically; returns the manifest.

    Shards are written under temporary names and the manifest last, so the folder is complete
    or reads as incomplete; writing again after an interruption starts cleanly.

    Args:
        ds: any finite dataset (elements with the same features; ragged batches are fine).
        path: the output folder (created if missing).
        shard_size: target bytes per shard (default 256 MiB).
        compression: ``"none"`` (default, zero-copy reads), ``"lz4"`` or ``"zstd"``, per record.
        zstd_level: zstd level (default 3).
        shuffle_seed: write in a seeded random order (random-access ``ds`` only; default: as is).
        threads: encoding threads (default: all cores); the output does not depend on it.
        overwrite: replace a complete dataset in ``path`` (default: refuse).
        progress: called as ``progress(records_written, total_or_None)`` after each chunk.
    """
    if compression not in ("none", "lz4", "zstd"):
        raise InvalidArgumentError(f"compression must be none, lz4 or zstd, got {compression!r}")
    if progress is not None and not callable(progress):
        raise TypeError("progress must be callable")
    text = _native.write_shards(
        ds._native,
        os.fspath(path),
        _count("shard_size", shard_size, 1),
        compression,
        int(zstd_level),
        None if shuffle_seed is None else _count("shuffle_seed", shuffle_seed),
        None if threads is None else _count("threads", threads, 1),
        bool(overwrite),
        progress,
    )
    return json.loads(text)


def _policy(policy: str) -> str:
    if policy not in _POLICIES:
        raise InvalidArgumentError(f"policy must be one of {_POLICIES}, got {policy!r}")
    return policy


def _shard(self: Dataset, num_shards: int, index: int, policy: str = "even") -> Dataset:
    """Part ``index`` of ``num_shards`` of each epoch (one rank's share), strided.

    Args:
        num_shards: number of parts (ranks), > 0.
        index: this part, ``0 <= index < num_shards``.
        policy: when ``num_shards`` does not divide the epoch: ``"even"`` (default; an exact
            partition, parts differ by one element), ``"drop"`` (equal parts, the remainder is
            skipped) or ``"pad"`` (equal parts, short ones wrap to the epoch's start).
    """
    n, i = _count("num_shards", num_shards, 1), _count("index", index)
    return Dataset(_native.shard(self._native, n, i, _policy(policy), False))


def _elastic_shard(self: Dataset, world_size: int, rank: int, policy: str = "even") -> Dataset:
    """Like :meth:`shard`, but a state saved here restores on another world size with nothing
    of the epoch lost or repeated (all ranks must save at the same step; see
    ``docs/CHECKPOINTING.md``). The result is a stream."""
    n, i = _count("world_size", world_size, 1), _count("rank", rank)
    return Dataset(_native.shard(self._native, n, i, _policy(policy), True))


def _worker_split(self: Dataset, num_workers: int, worker: int) -> Dataset:
    """Worker ``worker`` of ``num_workers`` inside one process (an exact, strided partition)."""
    n, i = _count("num_workers", num_workers, 1), _count("worker", worker)
    return Dataset(_native.worker_split(self._native, n, i))


def _window_shuffle(self: Dataset, window: int, seed: Optional[int] = None) -> Dataset:
    """A cheaper, local shuffle: windows of ``window`` consecutive elements in random order,
    each shuffled inside. Over a folder written in order, a window of about one shard's records
    keeps reads within one or two shards. Keeps random access; O(1) memory."""
    seed = _draw_seed() if seed is None else _count("seed", seed)
    return Dataset(_native.window_shuffle(self._native, _count("window", window, 1), seed))


def _slice(self: Dataset, start: int, stop: int) -> Dataset:
    """Elements ``start..stop`` of each epoch (clamped); keeps random access."""
    return Dataset(_native.slice(self._native, _count("start", start), _count("stop", stop)))


def _cache(self: Dataset, path: Optional[PathLike] = None) -> Dataset:
    """Caches the first pass; later epochs read the cache.

    Args:
        path: ``None`` (default): in memory (one arena per feature, ragged where lengths
            differ). A folder: written as a shard folder during the first full pass (complete or
            absent, never half) and read by later epochs and later runs.

    Every epoch yields the input's epoch 0, so random ops before ``cache`` are drawn once.
    """
    return Dataset(_native.cache(self._native, None if path is None else os.fspath(path)))


Dataset.shard = _shard  # type: ignore[attr-defined]
Dataset.elastic_shard = _elastic_shard  # type: ignore[attr-defined]
Dataset.worker_split = _worker_split  # type: ignore[attr-defined]
Dataset.window_shuffle = _window_shuffle  # type: ignore[attr-defined]
Dataset.slice = _slice  # type: ignore[attr-defined]
Dataset.cache = _cache  # type: ignore[attr-defined]
