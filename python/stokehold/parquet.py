"""Parquet files, Arrow IPC files and Hugging Face datasets read at random, natively.

* :func:`read_parquet`: the rows of Parquet files (paths or ``s3://`` / ``gs://`` / ``https://``
  URLs, read by range through the storage layer) as elements.
* :func:`read_arrow`: the rows of Arrow IPC files, in the file format or the stream format
  (memory-mapped, or a URL fetched whole; batches read without a copy where their buffers are
  aligned).
* :func:`from_hf`: a Hugging Face ``datasets.Dataset`` (its Arrow cache files and its indices
  mapping after ``shuffle`` / ``select``) or a ``save_to_disk`` folder, with HF's column names and
  row order; no Python runs per row.

How columns become features (one rule for all three):

* integers, floats (``float16`` too) and booleans: scalars of that dtype; strings and binary:
  ``bytes`` scalars (a string as its UTF-8 bytes); ``fixed_size_list<T, n>``: an axis of ``n``;
  ``list<T>``: a rank-1 array per row, ragged across rows when batched; a struct's children:
  features named ``"parent.child"``; dictionary-encoded columns: decoded to their values.
* Other types (dates, timestamps, decimals, maps, lists of variable lists) raise
  :class:`SchemaError` naming the column when the files are opened; leave such a column out with
  ``columns=[...]``.
* A null row raises :class:`SchemaError` naming the column, file and row unless ``defaults``
  gives the column a value (``defaults={"label": -1}``, ``{"tokens": []}``); a null inside a list
  always raises.

Random access: ``len(ds)``, ``ds[i]``, ``ds.get_batch([...])``, global ``shuffle``, ``shard`` and
checkpoints as every random-access source. ``ds[i]`` decodes the block that holds row ``i`` and
keeps it in a cache of decoded blocks (``cache_bytes``, default 1 GiB: the default memory budget)
so that the block's other rows cost a slice each. A Parquet file written with a page index
(``write_page_index=True`` in pyarrow) is cut into blocks at its pages (about 1 MiB or
``max_rows_per_page`` rows); a file without one is read a whole row group at a time, so a random
row there costs decoding its row group's columns. A global ``shuffle()`` is uniform (it is the
global permutation); it decodes each block once as long as the decoded columns fit the cache,
and up to once per row beyond that: then ``window_shuffle(window)`` with a window of a few row
groups keeps the reads local.

Errors name the file and where in it: a file whose footer is cut or unreadable raises
:class:`DataCorruptionError` at its footer's offset; a page that does not decode raises it naming
the row group and rows.
"""

import json
import os
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _args, _native
from .dataset import Dataset

__all__ = ["from_hf", "read_arrow", "read_parquet"]

Columns = Union[None, str, Sequence[str]]


def _columns(op: str, columns: Columns) -> Optional[List[str]]:
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = [columns]
    try:
        items = list(columns)
    except TypeError:
        raise _args.fail(op, "columns", columns, "must be None, a name or a list of names") from None
    if not items:
        raise _args.fail(op, "columns", items, "must name at least one column (None: all)")
    return [_args.name(op, "columns", c) for c in items]


def _defaults(op: str, defaults: Optional[Mapping[str, Any]]) -> List[Tuple[str, str]]:
    if defaults is None:
        return []
    if not isinstance(defaults, Mapping):
        raise _args.fail(op, "defaults", defaults, "must be a dict of column name to value")
    out = []
    for k, v in defaults.items():
        name = _args.name(op, "defaults", k)
        if isinstance(v, (np.generic, np.ndarray)):
            v = v.tolist()
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        try:
            out.append((name, json.dumps(v, allow_nan=False)))
        except (TypeError, ValueError):
            raise _args.fail(
                op,
                "defaults",
                {name: v},
                "each default must be a JSON value (a finite number, string, bool or list of them)",
            ) from None
    return out


def _cache(op: str, cache_bytes: Optional[int]) -> Optional[int]:
    if cache_bytes is None:
        return None
    return _args.count(op, "cache_bytes", cache_bytes, minimum=0, maximum=2**62)


def read_parquet(
    paths: Any,
    columns: Columns = None,
    *,
    defaults: Optional[Mapping[str, Any]] = None,
    cache_bytes: Optional[int] = None,
) -> Dataset:
    """The rows of the Parquet files ``paths`` (one path or URL, or a list, read in order) as
    elements of their ``columns`` (``None``: every column; a name, or ``"a.b"`` for a struct's
    child). ``defaults``: a dict of column to the value a null row holds (without one a null
    raises :class:`SchemaError` naming column, file and row). ``cache_bytes``: bytes of decoded
    blocks kept (default: the default memory budget, 1 GiB). Batches: ``.batch(n)``."""
    op = "read_parquet"
    files = _args.paths(op, "paths", paths)
    native = _native.Dataset.read_parquet(
        files, _columns(op, columns), _defaults(op, defaults), _cache(op, cache_bytes)
    )
    return Dataset._wrap(native)


def read_arrow(
    paths: Any,
    columns: Columns = None,
    *,
    defaults: Optional[Mapping[str, Any]] = None,
    cache_bytes: Optional[int] = None,
) -> Dataset:
    """The rows of Arrow IPC files ``paths`` (the file format or the stream format, as
    ``datasets`` writes them) as elements; arguments as :func:`read_parquet`."""
    op = "read_arrow"
    files = _args.paths(op, "paths", paths)
    native = _native.Dataset.read_arrow(
        files, _columns(op, columns), _defaults(op, defaults), _cache(op, cache_bytes), None
    )
    return Dataset._wrap(native)


def _saved_folder(op: str, folder: str) -> List[str]:
    state = os.path.join(folder, "state.json")
    try:
        with open(state, encoding="utf-8") as f:
            data = json.load(f)
        names = [d["filename"] for d in data["_data_files"]]
    except FileNotFoundError:
        raise _args.fail(
            op,
            "dataset",
            folder,
            "is a folder without state.json: not a folder "
            "written by datasets' save_to_disk (a DatasetDict's folder holds one "
            "per split: pass the split's folder)",
        ) from None
    except (ValueError, KeyError, TypeError) as e:
        raise _args.fail(op, "dataset", folder, f"its state.json does not list data files (_data_files): {e}") from None
    if not names:
        raise _args.fail(op, "dataset", folder, "its state.json lists no data files")
    return [os.path.join(folder, _args.name(op, "dataset", n)) for n in names]


def from_hf(
    dataset: Any,
    columns: Columns = None,
    *,
    defaults: Optional[Mapping[str, Any]] = None,
    cache_bytes: Optional[int] = None,
) -> Dataset:
    """A Hugging Face dataset as a stokehold dataset: ``dataset`` is a ``datasets.Dataset``
    backed by Arrow files (loaded, or made by ``map`` and friends; its indices mapping after
    ``shuffle`` / ``select`` / ``sort`` is followed) or the path of a ``save_to_disk`` folder
    (``state.json`` + ``data-*.arrow``). Column names and row order are HF's; the Arrow files are
    read natively, memory-mapped. A dataset held only in memory (``Dataset.from_dict`` before it
    is saved) has no files, and one whose columns were renamed without writing new files names
    columns its files lack: save either with ``save_to_disk`` first."""
    op = "from_hf"
    indices = None
    if isinstance(dataset, (str, bytes, os.PathLike)):
        folder = _args.path(op, "dataset", dataset)
        if not os.path.isdir(folder):
            raise _args.fail(
                op, "dataset", folder, "must be a datasets.Dataset or the folder datasets' save_to_disk wrote"
            )
        files = _saved_folder(op, folder)
    elif hasattr(dataset, "cache_files") and hasattr(dataset, "_indices"):
        ix = dataset._indices
        ix_path = getattr(ix, "path", None)
        files = [c["filename"] for c in dataset.cache_files if c["filename"] != ix_path]
        if not files:
            raise _args.fail(
                op,
                "dataset",
                type(dataset).__name__,
                "has no Arrow files (it is held in memory): save it with save_to_disk and pass the folder",
            )
        if ix is not None:
            indices = np.ascontiguousarray(np.asarray(ix.column(0)), dtype=np.uint64)
        if columns is None:  # after remove_columns / select_columns: the columns HF shows
            columns = list(dataset.column_names)
    else:
        raise _args.fail(
            op,
            "dataset",
            type(dataset).__name__,
            "must be a datasets.Dataset or the folder datasets' save_to_disk wrote",
        )
    native = _native.Dataset.read_arrow(
        files, _columns(op, columns), _defaults(op, defaults), _cache(op, cache_bytes), indices
    )
    return Dataset._wrap(native)
