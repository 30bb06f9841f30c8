"""stokehold on Ray (``pip install stokehold[ray]``): a Ray Data source and sink for shard folders,
a stokehold source over a Ray ``DataIterator``, and a map stage run by a pool of Ray actors.

* :func:`read_stokehold`: a shard folder (or indexed TFRecord files) as a ``ray.data.Dataset``.
  One read task per shard (split further when there are fewer shards than the parallelism Ray asks
  for); each task carries a small picklable spec (path, record range) and the worker opens the
  native memory-mapped reader itself. Blocks are Arrow tables built from numpy batches
  (``get_batch``), never from per-row Python objects, with a global-index column
  (:data:`INDEX_COLUMN`) so Ray can order or checkpoint by it.
* :func:`write_stokehold`: a ``ray.data.Dataset`` written as a shard folder. Each write task
  writes its blocks as part folders; the driver joins them once every task finished (records
  moved, not re-encoded) and writes the manifest last, atomically: a failed or killed task never
  leaves a folder that opens as complete, and the folder is the same byte for byte whatever the
  number of tasks.
* :func:`from_ray`: a stokehold source over a Ray ``DataIterator`` (e.g. one of
  ``streaming_split``), so a trainer keeps stokehold's ops, prefetch, stats and adapters.
* :func:`remote_map` (``Dataset.remote_map``): a map whose function runs on Ray actors, with the
  local parallel map's order, determinism and checkpoints.

Paths are local (or shared-filesystem) paths for now. Object-store URLs (``s3://``) are not
supported yet: the spec a read task carries is a path string that the storage seam will accept as
a URL when it lands, and nothing here touches the files except through the native reader/writer.

``import stokehold`` never imports Ray; importing this module does.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _args, _native
from ._optional import needs

with needs("ray", "stokehold.ray"):
    import pyarrow as pa
    import ray
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasink, Datasource, ReadTask, WriteResult

# The map stage on Ray actors (remote_map) lives below dataset.py, which calls it; exported here.
from ._ray_map import _pools as _pools
from ._ray_map import actors, remote_map
from .dataset import Dataset, Element
from .ragged import Ragged
from .shards import DEFAULT_SHARD_SIZE, open_shards, write_shards
from .sources import from_arrays, from_generator
from .tfrecord import TFRecordDataset

__all__ = ["INDEX_COLUMN", "read_stokehold", "write_stokehold", "from_ray", "remote_map", "actors"]

#: The column :func:`read_stokehold` adds: each row's record index in the dataset (0-based).
INDEX_COLUMN = "_index"
#: Rows per Arrow block a read task yields by default: a few MB of typical records, so that Ray's
#: object store moves blocks of a useful size without a task holding its whole range in memory.
DEFAULT_BLOCK_ROWS = 8192
#: A read task covers at least this many blocks when it splits a shard (see get_read_tasks).
_MIN_TASK_BLOCKS = 4
#: The target shard size of a part folder: one shard file per part (parts are joined anyway).
_PART_SHARD_BYTES = 1 << 62
#: Prefix of the staging folder a write keeps its parts in, inside the output folder.
_STAGING = ".stokehold-ray-parts-"


# ---- reading ---------------------------------------------------------------------------------


def _open(kind: str, paths: Sequence[str], verify: bool) -> Dataset:
    """The native random-access dataset a read spec names (run on the worker)."""
    if kind == "shards":
        return open_shards(paths[0], verify=verify)
    ds = TFRecordDataset(list(paths), verify=verify)
    if not ds.is_random_access:
        raise _args.fail("read_stokehold", "path", list(paths),
                         "TFRecord files need an index (stokehold.tfrecord.build_index) and no compression")
    return ds


def _arrow_column(name: str, value: Any) -> Any:
    """One feature of a numpy batch as an Arrow array, without a Python object per row (bytes
    features are object arrays already)."""
    if isinstance(value, Ragged):
        if value.values.ndim != 1:
            raise _args.fail("read_stokehold", "feature", name,
                             f"is ragged with values of shape {list(value.values.shape)}: Arrow list "
                             f"columns hold 1-D rows only; flatten it first (or read with open_shards)")
        values = pa.array(list(value.values), type=pa.binary()) if value.values.dtype == object \
            else pa.array(value.values)
        return pa.LargeListArray.from_arrays(pa.array(value.row_splits.astype(np.int64)), values)
    arr = np.asarray(value)
    if arr.dtype == object:
        return pa.array(list(arr), type=pa.binary())
    if arr.ndim == 1:
        return pa.array(arr)
    from ray.data.extensions import ArrowTensorArray

    return ArrowTensorArray.from_numpy(arr)


def _read_range(kind: str, paths: Sequence[str], verify: bool, start: int, stop: int, block_rows: int,
                index_column: Optional[str]) -> Iterator[Any]:
    """A read task's body: records ``start..stop`` as Arrow tables of ``block_rows`` rows."""
    ds = _open(kind, paths, verify)
    for a in range(start, stop, block_rows):
        b = min(stop, a + block_rows)
        batch = ds.get_batch(np.arange(a, b))
        cols = {k: _arrow_column(k, v) for k, v in batch.items()}
        if index_column is not None:
            cols[index_column] = pa.array(np.arange(a, b, dtype=np.int64))
        yield pa.table(cols)


def _read_task(kind: str, paths: Sequence[str], verify: bool, start: int, stop: int, block_rows: int,
               index_column: Optional[str], size_bytes: int, row_limit: Optional[int]) -> Any:
    def read() -> Iterator[Any]:
        return _read_range(kind, paths, verify, start, stop, block_rows, index_column)

    meta = BlockMetadata(num_rows=stop - start, size_bytes=size_bytes, exec_stats=None,
                         input_files=tuple(paths))
    return ReadTask(read, meta, per_task_row_limit=row_limit)


class StokeholdDatasource(Datasource):
    """A Ray Data source over a shard folder or indexed TFRecord files (see :func:`read_stokehold`)."""

    def __init__(self, path: Union[str, Sequence[str]], verify: bool = True,
                 block_rows: int = DEFAULT_BLOCK_ROWS, index_column: Optional[str] = INDEX_COLUMN) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        op = "read_stokehold"
        self._verify = _args.flag(op, "verify", verify)
        self._block_rows = _args.count(op, "block_rows", block_rows, 1)
        self._index_column = None if index_column is None else _args.name(op, "index_column", index_column)
        if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
            self._kind = "shards"
            self._paths = [_args.path(op, "path", path)]
            open_shards(self._paths[0], verify=False)  # checks the folder, with the reader's errors
            with open(os.path.join(self._paths[0], "manifest.json"), "rb") as f:
                manifest = json.load(f)
            # (records, bytes) per shard: the tasks' ranges and size estimates.
            self._parts = [(int(s["records"]), int(s["bytes"])) for s in manifest["shards"]]
        else:
            self._kind = "tfrecord"
            self._paths = [_args.path(op, "path", p) for p in ([path] if isinstance(path, str) else path)]
            self._parts = [(len(_open("tfrecord", [p], self._verify)), os.path.getsize(p)) for p in self._paths]

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return sum(b for _, b in self._parts)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[Any]:
        # One task per shard (file); when Ray asks for more tasks than there are shards, each is
        # cut into equal record ranges so that every CPU gets work, but never into ranges under
        # _MIN_TASK_BLOCKS blocks: Ray asks for 200 tasks by default, and tasks of a few
        # thousand rows spent more time scheduled than reading (2x slower, bench/ray).
        split = max(1, -(-parallelism // max(1, len(self._parts))))
        tasks, first = [], 0
        for n, nbytes in self._parts:
            pieces = max(1, min(split, n // (_MIN_TASK_BLOCKS * self._block_rows)))
            cuts = [first + n * k // pieces for k in range(pieces + 1)]
            for a, b in zip(cuts, cuts[1:]):
                if b > a:
                    tasks.append(_read_task(self._kind, self._paths, self._verify, a, b, self._block_rows,
                                            self._index_column, nbytes * (b - a) // max(1, n),
                                            per_task_row_limit))
            first += n
        return tasks


def read_stokehold(path: Union[str, os.PathLike[str], Sequence[str]], *, verify: bool = True,
                   block_rows: int = DEFAULT_BLOCK_ROWS, index_column: Optional[str] = INDEX_COLUMN,
                   override_num_blocks: Optional[int] = None, preserve_order: bool = True) -> Any:
    """A shard folder (or a list of indexed, uncompressed TFRecord files) as a ``ray.data.Dataset``.

    Rows come in the dataset's order: the returned dataset's context has Ray's ``preserve_order``
    execution option set (``preserve_order=False`` lets Ray yield blocks as they finish; the index
    column still tells each row's place). Dense features become numpy columns (Ray tensor columns
    beyond 1-D), bytes features binary columns, and variable-length 1-D features (a shape with a
    ``None``) Arrow ``large_list`` columns; variable-length features of higher rank are refused
    with a clear error (Arrow has no ragged tensor column).

    Args:
        path: the folder written by :func:`stokehold.write_shards` (a local or shared path; URLs
            are not supported yet), or TFRecord file paths with ``.idx`` sidecars.
        verify: check each record's CRC32C (default True).
        block_rows: rows per Arrow block (default 8192).
        index_column: name of the global-index column (default ``"_index"``); None leaves it out.
        override_num_blocks: the number of read tasks Ray should aim for (default: Ray's choice).
        preserve_order: keep the dataset's order through Ray's execution (default True).
    """
    where: Union[str, Sequence[str]] = os.fspath(path) if isinstance(path, os.PathLike) else path
    source = StokeholdDatasource(where, verify, block_rows, index_column)
    ds = ray.data.read_datasource(source, override_num_blocks=override_num_blocks)
    # The dataset's own context (a copy Ray made at creation, shared by the datasets derived from
    # it), so the caller's global DataContext is left as it is.
    ds.context.execution_options.preserve_order = _args.flag("read_stokehold", "preserve_order", preserve_order)
    return ds


# ---- writing ---------------------------------------------------------------------------------


def _stokehold_columns(batch: Mapping[str, Any], drop: Optional[str]) -> Dict[str, Any]:
    """A Ray numpy batch as :func:`stokehold.from_arrays` columns: object arrays of arrays (list
    and variable-shape tensor columns) become lists of arrays, stored as ragged arenas."""
    cols: Dict[str, Any] = {}
    for k, v in batch.items():
        if k == drop:
            continue
        a = np.asarray(v) if not isinstance(v, np.ndarray) else v
        if a.dtype == object and len(a) and isinstance(a[0], np.ndarray):
            cols[k] = [np.asarray(x) for x in a]
        else:
            cols[k] = a
    return cols


class StokeholdDatasink(Datasink[Dict[str, Any]]):
    """A Ray Data sink that writes a shard folder (see :func:`write_stokehold`)."""

    def __init__(self, path: str, shard_size: int, compression: str, zstd_level: int, overwrite: bool,
                 index_column: Optional[str]) -> None:
        self.path = path
        self.shard_size = shard_size
        self.compression = compression
        self.zstd_level = zstd_level
        self.overwrite = overwrite
        self.index_column = index_column
        self.staging = os.path.join(path, _STAGING + uuid.uuid4().hex)

    def on_write_start(self, schema: Any = None) -> None:
        if os.path.exists(os.path.join(self.path, "manifest.json")) and not self.overwrite:
            raise _args.fail("write_stokehold", "path", self.path,
                             "already holds a complete dataset; pass overwrite=True to replace it")
        os.makedirs(self.staging, exist_ok=True)

    def write(self, blocks: Iterable[Any], ctx: Any) -> Dict[str, Any]:
        # A retried task has the same task_idx and rewrites the same part folders.
        parts: List[str] = []
        rows = 0
        for j, block in enumerate(blocks):
            acc = BlockAccessor.for_block(block)
            if acc.num_rows() == 0:
                continue
            cols = _stokehold_columns(acc.to_batch_format("numpy"), self.index_column)
            name = f"part-{ctx.task_idx:06d}-{j:06d}"
            write_shards(from_arrays(cols), os.path.join(self.staging, name), shard_size=_PART_SHARD_BYTES,
                         compression=self.compression, zstd_level=self.zstd_level, overwrite=True)
            parts.append(name)
            rows += acc.num_rows()
        return {"task": int(ctx.task_idx), "parts": parts, "rows": rows}

    def on_write_complete(self, write_result: WriteResult[Dict[str, Any]]) -> None:
        returns = sorted(write_result.write_returns, key=lambda r: int(r["task"]))
        parts = [os.path.join(self.staging, p) for r in returns for p in r["parts"]]
        _native.assemble_shards(parts, self.path, self.shard_size, self.compression, self.overwrite, "ray")
        shutil.rmtree(self.staging, ignore_errors=True)

    def on_write_failed(self, error: Exception) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def write_stokehold(dataset: Any, path: Union[str, os.PathLike[str]], *, shard_size: int = DEFAULT_SHARD_SIZE,
                    compression: Optional[str] = None, zstd_level: int = 3, overwrite: bool = False,
                    num_tasks: Optional[int] = None, index_column: Optional[str] = INDEX_COLUMN,
                    ray_remote_args: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Writes a ``ray.data.Dataset`` as a shard folder; returns its manifest.

    Write tasks each write their blocks under a staging folder inside ``path``; when every task
    finished, the driver joins the parts in the dataset's order (records moved as stored, not
    re-encoded) and writes the manifest last, atomically. A task that fails is retried by Ray and
    rewrites its own parts; a write that fails leaves no manifest, so nothing opens as complete.
    The folder is the one :func:`stokehold.write_shards` writes from the same rows, whatever the
    number of tasks (shard boundaries follow the records' encoded sizes only).

    List columns and variable-shape tensor columns become variable-length features (read back as
    dense arrays per record); string columns become bytes features.

    Args:
        dataset: the Ray dataset (its row order is kept: the write sets ``preserve_order``).
        path: the output folder (local or shared path; URLs are not supported yet).
        shard_size, compression, zstd_level, overwrite: as in :func:`stokehold.write_shards`.
        num_tasks: repartition into this many blocks (one write task each) first (default: as is).
        index_column: a column to leave out (default ``"_index"``, the one :func:`read_stokehold`
            adds); None keeps every column.
        ray_remote_args: passed to ``write_datasink`` (e.g. ``{"max_retries": 0}``).
    """
    op = "write_stokehold"
    compression = "none" if compression is None else compression
    # Checked here, before Ray starts any task (the native parser would only see it at the end).
    if compression not in ("none", "lz4", "zstd"):
        raise _args.fail(op, "compression", compression, "must be 'none', 'lz4' or 'zstd'")
    target = _args.path(op, "path", path)
    sink = StokeholdDatasink(target, _args.count(op, "shard_size", shard_size, 1), compression,
                             _args.count(op, "zstd_level", zstd_level, -131072), _args.flag(op, "overwrite", overwrite),
                             index_column)
    if num_tasks is not None:
        dataset = dataset.repartition(_args.count(op, "num_tasks", num_tasks, 1))
    options = dataset.context.execution_options
    before = options.preserve_order
    options.preserve_order = True
    try:
        dataset.write_datasink(sink, ray_remote_args=ray_remote_args)
    finally:
        options.preserve_order = before
    with open(os.path.join(target, "manifest.json"), "rb") as f:
        manifest: Dict[str, Any] = json.loads(f.read())
    return manifest


# ---- a stokehold source over Ray -------------------------------------------------------------


def _element(batch: Mapping[str, Any]) -> Element:
    """A Ray numpy batch as a stokehold element: object arrays of arrays become Ragged."""
    out: Element = {}
    for k, v in batch.items():
        a = np.asarray(v)
        if a.dtype == object and len(a) and isinstance(a[0], np.ndarray):
            rows = [np.asarray(x) for x in a]
            splits = np.cumsum([0] + [len(r) for r in rows], dtype=np.int64)
            out[k] = Ragged(np.concatenate(rows), splits)
        else:
            out[k] = a
    return out


def from_ray(iterator: Any, *, batch_size: int = 256, drop_last: bool = False, prefetch_batches: int = 1,
             name: Optional[str] = None) -> Dataset:
    """A stokehold stream of the batches of a Ray ``DataIterator`` (``ds.iterator()``, or one of
    ``ds.streaming_split(n)``) or a ``ray.data.Dataset``: each element is one batch (a dict of
    numpy arrays; list columns become :class:`stokehold.Ragged`). Chain ``unbatch()`` for rows.

    Each epoch calls ``iter_batches`` again (with ``streaming_split``, every split must start its
    epoch). A checkpoint is the number of batches taken: restoring starts a new pass and skips
    that many, exact when the Ray pipeline yields the same batches each pass.
    """
    op = "from_ray"
    size = _args.count(op, "batch_size", batch_size, 1)
    drop = _args.flag(op, "drop_last", drop_last)
    ahead = _args.count(op, "prefetch_batches", prefetch_batches)

    def batches() -> Iterator[Element]:
        for b in iterator.iter_batches(batch_size=size, batch_format="numpy", drop_last=drop,
                                       prefetch_batches=ahead):
            yield _element(b)

    return from_generator(batches, name=name or "from_ray")
