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

The dataset ops over them (``shard``, ``elastic_shard``, ``worker_split``, ``window_shuffle``,
``slice``, ``cache``) are :class:`stokehold.Dataset` methods.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional

from . import _args, _native
from ._args import PathLike
from .dataset import Dataset

__all__ = ["open_shards", "write_shards", "verify_shards"]

#: Default target shard size: 256 MiB (shards of 100-300 MB stream and shuffle well).
DEFAULT_SHARD_SIZE = 256 << 20


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
    return Dataset._wrap(_native.Dataset.open_shards(_args.path("open_shards", "path", path),
                                                    _args.flag("open_shards", "verify", verify)))


def verify_shards(path: PathLike) -> None:
    """Reads every byte of a shard folder: whole-file and per-record checksums, decoding.

    Raises:
        DataCorruptionError: naming the file and the record.
    """
    _native.verify_shards(_args.path("verify_shards", "path", path))


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
    op = "write_shards"
    if compression not in ("none", "lz4", "zstd"):
        raise _args.fail(op, "compression", compression, "must be 'none', 'lz4' or 'zstd'")
    if progress is not None:
        _args.function(op, "progress", progress)
    if not isinstance(ds, Dataset):
        raise TypeError(f"{op}: expected a stokehold.Dataset, got {type(ds).__name__}")
    text = ds._native.write_shards(
        _args.path(op, "path", path),
        _args.count(op, "shard_size", shard_size, 1),
        compression,
        _args.count(op, "zstd_level", zstd_level, -131072),
        None if shuffle_seed is None else _args.count(op, "shuffle_seed", shuffle_seed),
        None if threads is None else _args.threads(op, "threads", threads),
        _args.flag(op, "overwrite", overwrite),
        progress,
    )
    result: Dict[str, Any] = json.loads(text)
    return result
