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
from ._args import PathLike, renamed
from .dataset import Dataset

__all__ = ["open_shards", "write_shards", "verify_shards"]

#: Default target shard size: 256 MiB (shards of 100-300 MB stream and shuffle well).
DEFAULT_SHARD_SIZE = 256 << 20


def open_shards(
    path: PathLike,
    verify: bool = True,
    *,
    cache_dir: Optional[PathLike] = None,
    cache_bytes: Optional[int] = None,
) -> Dataset:
    """Opens a shard folder as a random-access dataset (``len``, ``ds[i]``, global shuffle...).

    Records are memory-mapped; uncompressed arrays come out without a copy.

    Args:
        path: the folder written by :func:`write_shards` (or ``stokehold write``).
        verify: check each record's CRC32C when it is read (default True).
        cache_dir: a local shard cache folder (``docs/CACHE.md``; default None: no cache). Every
            shard is copied there whole once (several at a time, checked against the manifest's
            CRC32C), then read from local disk; later opens, and other processes sharing the
            folder, reuse the copies. For object-store URLs (``s3://bucket/train``: random access
            and global shuffle at local-disk speed) and folders on slow or mounted file systems.
        cache_bytes: the cache folder's cap in bytes (required with ``cache_dir``); least recently
            used shards are evicted to stay under it. A folder larger than the cap is refused.

    Raises:
        DataCorruptionError: an incomplete folder (no manifest: a write was interrupted), an
            unknown format version, a manifest that disagrees with its shards or points outside
            the folder; the message names the file (and the record).
        StokeholdFileNotFoundError: a shard listed in the manifest is missing.
        InvalidArgumentError: ``cache_bytes`` missing or not a positive int with ``cache_dir``,
            or the folder is larger than ``cache_bytes``.
    """
    p = _args.path("open_shards", "path", path)
    v = _args.flag("open_shards", "verify", verify)
    if cache_dir is None:
        if cache_bytes is not None:
            raise _args.fail("open_shards", "cache_bytes", cache_bytes, "needs cache_dir")
        return Dataset._wrap(_native.Dataset.open_shards(p, v))
    if cache_bytes is None:
        raise _args.fail("open_shards", "cache_bytes", cache_bytes,
                         "a cache cap in bytes is required with cache_dir")
    cap = _args.count("open_shards", "cache_bytes", cache_bytes, minimum=1)
    cdir = _args.path("open_shards", "cache_dir", cache_dir)
    return Dataset._wrap(_native.Dataset.open_shards_cached(p, v, cdir, cap))


def verify_shards(path: PathLike) -> None:
    """Reads every byte of a shard folder: whole-file and per-record checksums, decoding.

    Raises:
        DataCorruptionError: naming the file and the record.
    """
    _native.verify_shards(_args.path("verify_shards", "path", path))


@renamed(shuffle_seed="seed")
def write_shards(
    ds: Dataset,
    path: PathLike,
    *,
    shard_size: int = DEFAULT_SHARD_SIZE,
    compression: Optional[str] = None,
    zstd_level: int = 3,
    seed: Optional[int] = None,
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
        compression: ``None`` (default, uncompressed: zero-copy reads; ``"none"`` too),
            ``"lz4"`` or ``"zstd"``, per record.
        zstd_level: zstd level (default 3).
        seed: write in a seeded random order (random-access ``ds`` only; default: as is;
            ``shuffle_seed=`` is a deprecated alias), as :func:`stokehold.tfrecord.write_tfrecord`.
        threads: encoding threads (default: all cores); the output does not depend on it.
        overwrite: replace a complete dataset in ``path`` (default: refuse).
        progress: called as ``progress(records_written, total_or_None)`` after each chunk.
    """
    op = "write_shards"
    if progress is not None:
        _args.function(op, "progress", progress)
    if not isinstance(ds, Dataset):
        raise TypeError(f"{op}: expected a stokehold.Dataset, got {type(ds).__name__}")
    text = ds._native.write_shards(
        _args.path(op, "path", path),
        _args.count(op, "shard_size", shard_size, 1),
        "none" if compression is None else str(compression),
        _args.count(op, "zstd_level", zstd_level, -131072),
        None if seed is None else _args.count(op, "seed", seed),
        None if threads is None else _args.threads(op, "threads", threads),
        _args.flag(op, "overwrite", overwrite),
        progress,
    )
    result: Dict[str, Any] = json.loads(text)
    return result
