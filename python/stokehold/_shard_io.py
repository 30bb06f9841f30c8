"""The shard folder's reads and writes as the native layer takes them: the argument checks of
``open_shards`` / ``write_shards`` in one place, over native datasets, so that
:mod:`stokehold.shards` (the public functions) and ``Dataset.save`` / ``Dataset.load`` share them
without importing each other."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional

from . import _args, _native
from ._args import PathLike

#: Default target shard size: 256 MiB (shards of 100-300 MB stream and shuffle well).
DEFAULT_SHARD_SIZE = 256 << 20


def open_native(path: PathLike, verify: bool = True, cache_dir: Optional[PathLike] = None,
                cache_bytes: Optional[int] = None) -> _native.Dataset:
    """The native dataset of the shard folder ``path`` (see :func:`stokehold.open_shards`)."""
    p = _args.path("open_shards", "path", path)
    v = _args.flag("open_shards", "verify", verify)
    if cache_dir is None:
        if cache_bytes is not None:
            raise _args.fail("open_shards", "cache_bytes", cache_bytes, "needs cache_dir")
        return _native.Dataset.open_shards(p, v)
    if cache_bytes is None:
        raise _args.fail("open_shards", "cache_bytes", cache_bytes,
                         "a cache cap in bytes is required with cache_dir")
    cap = _args.count("open_shards", "cache_bytes", cache_bytes, minimum=1)
    cdir = _args.path("open_shards", "cache_dir", cache_dir)
    return _native.Dataset.open_shards_cached(p, v, cdir, cap)


def write_native(native: _native.Dataset, path: PathLike, *, op: str = "write_shards",
                 shard_size: int = DEFAULT_SHARD_SIZE, compression: Optional[str] = None,
                 zstd_level: int = 3, seed: Optional[int] = None, threads: Optional[int] = None,
                 overwrite: bool = False,
                 progress: Optional[Callable[[int, Optional[int]], Any]] = None) -> Dict[str, Any]:
    """Writes one epoch of ``native`` as a shard folder (see :func:`stokehold.write_shards`)."""
    if progress is not None:
        _args.function(op, "progress", progress)
    text = native.write_shards(
        _args.path(op, "path", path),
        _args.count(op, "shard_size", shard_size, 1),
        "none" if compression is None else str(compression),
        _args.count(op, "zstd_level", zstd_level, -131072, 22),  # zstd's own range
        None if seed is None else _args.count(op, "seed", seed, 0, _args.MAX_U64),
        None if threads is None else _args.threads(op, "threads", threads),
        _args.flag(op, "overwrite", overwrite),
        progress,
    )
    result: Dict[str, Any] = json.loads(text)
    return result
