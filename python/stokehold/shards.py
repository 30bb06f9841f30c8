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

from typing import Any, Callable, Dict, Optional

from . import _args, _native, _shard_io
from ._args import PathLike, renamed
from .dataset import Dataset

__all__ = ["open_shards", "write_shards", "verify_shards"]

DEFAULT_SHARD_SIZE = _shard_io.DEFAULT_SHARD_SIZE


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
        StokeholdIOError: a folder that is not a shard folder at all (TFRecord files, ``.npy``
            arrays, images, a parent of the shard folder...): the message says what it holds and
            which call reads that (``TFRecordDataset``, ``open_table``, ...).
        StokeholdFileNotFoundError: a shard listed in the manifest is missing.
        InvalidArgumentError: ``cache_bytes`` missing or not a positive int with ``cache_dir``,
            or the folder is larger than ``cache_bytes``.
    """
    return Dataset._wrap(_shard_io.open_native(path, verify, cache_dir, cache_bytes))


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
    if not isinstance(ds, Dataset):
        raise TypeError(f"write_shards: expected a stokehold.Dataset, got {type(ds).__name__}")
    return _shard_io.write_native(ds._native, path, shard_size=shard_size, compression=compression,
                                  zstd_level=zstd_level, seed=seed, threads=threads,
                                  overwrite=overwrite, progress=progress)
