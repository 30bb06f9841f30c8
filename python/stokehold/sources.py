"""Where datasets come from: arrays, lists, generators, files, several datasets.

    >>> import numpy as np, stokehold as sh
    >>> ds = sh.from_arrays({"x": np.arange(4), "v": [np.ones(n) for n in (1, 2, 3, 4)]})
    >>> len(ds), ds[2]["v"].shape
    (4, (3,))
    >>> [int(e["x"]) for e in sh.from_generator(lambda: ({"x": i} for i in range(3)))]
    [0, 1, 2]

Text files (``TextLineDataset``) and fixed-length records (``FixedLengthRecordDataset``) are
here too; shard folders, TFRecord files and feature tables have their own modules (``shards``,
``tfrecord``, ``table``).
"""

from __future__ import annotations

import bisect
import gzip
import os
import zlib
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from . import _args, _native
from ._native import DataCorruptionError, InvalidArgumentError
from .dataset import Dataset
from .spec import ElementSpec, RaggedSpec, TensorSpec, mismatch

__all__ = [
    "FixedLengthRecordDataset",
    "TextLineDataset",
    "choose_from_datasets",
    "from_arrays",
    "from_generator",
    "from_list",
    "from_tensor_slices",
    "from_tensors",
    "list_files",
    "sample_from_datasets",
    "zip",
]


def from_arrays(columns: Mapping[str, Any]) -> Dataset:
    """An in-memory, random-access dataset from columns.

    Args:
        columns: feature name -> one of

            * a numpy array ``[N, ...]``: element ``i`` is ``array[i]``. A C-contiguous,
              native-endian numeric array is **not copied**: the dataset keeps a reference to it,
              so writing to the array later changes what the dataset returns (elements come out
              as read-only views of it). Other arrays are copied once.
            * a list of ``N`` arrays (or values): stored in one contiguous arena. Rows of one
              shape make a dense column; rows that differ only along axis 0 make a **ragged**
              column (values back to back plus row splits, no padding).
            * a :class:`stokehold.Ragged` (used as is, zero-copy).

            Numeric dtypes: bool, (u)int8/16/32/64, float16/32/64 (bfloat16 with ``ml_dtypes``).
            Bytes features: numpy ``S``/``U`` arrays or object arrays of ``bytes``/``str``
            (str is UTF-8 encoded); they come out as object arrays of ``bytes``.

    Raises:
        InvalidArgumentError: columns of different lengths, an unknown dtype (e.g. complex128),
            an object array holding something other than bytes/str, an empty mapping, or a tuple
            / bare array instead of a dict (elements are dicts of named features).
    """
    return Dataset._wrap(_native.Dataset.from_columns(_args.columns("from_arrays", columns)))


#: tf.data's name for :func:`from_arrays` (a dict of columns; tuples are refused with a hint).
from_tensor_slices = from_arrays


def from_list(elements: Iterable[Mapping[str, Any]]) -> Dataset:
    """An in-memory dataset from a list of elements (dicts with the same features), stacked into
    one contiguous arena per feature (ragged where lengths differ along axis 0), as a list column
    in :func:`from_arrays` is.

    Raises:
        InvalidArgumentError: an empty list, an element that is not a dict, or elements whose
            features differ.
    """
    op = "from_list"
    if isinstance(elements, Mapping):
        raise InvalidArgumentError(f"{op}: takes a list of dicts (one per element); for a dict of "
                                   f"feature -> array or list of arrays, use from_arrays")
    items = list(elements)
    if not items:
        raise InvalidArgumentError(f"{op}: needs at least one element to know the features")
    first = items[0]
    if not isinstance(first, Mapping):
        raise InvalidArgumentError(f"{op}: element 0 is a {type(first).__name__}, not a dict")
    keys = list(first.keys())
    for i, e in enumerate(items):
        if not isinstance(e, Mapping):
            raise InvalidArgumentError(f"{op}: element {i} is a {type(e).__name__}, not a dict")
        if set(e.keys()) != set(keys):
            raise InvalidArgumentError(f"{op}: element {i} has features {sorted(e.keys())}, "
                                       f"element 0 has {sorted(keys)}")
    return from_arrays({k: [e[k] for e in items] for k in keys})


def from_generator(
    generator: Callable[..., Iterable[Mapping[str, Any]]],
    output_signature: Optional[ElementSpec] = None,
    args: Sequence[Any] = (),
    name: Optional[str] = None,
) -> Dataset:
    """A stream of the dicts ``generator(*args)`` yields (tf.data's ``from_generator``).

    ``generator`` is called once per epoch (and again on ``set_state``). A checkpoint is the
    number of elements yielded: restoring calls the generator again and skips that many, so the
    generator must yield the same sequence each time for an exact resume. With
    ``output_signature`` (feature -> :class:`TensorSpec` / :class:`RaggedSpec`, e.g. a dataset's
    ``element_spec``) each element is checked, as it is yielded, to have exactly those features,
    each of that dtype and shape (``None`` in a shape: any length on that axis; a shape of
    ``None``: any shape); a mismatch raises :class:`InvalidArgumentError` naming the element
    index, the feature, what the signature expects and what came. An exception the generator
    raises reaches the caller as itself, with the element index in a note.
    """
    op = "from_generator"
    gen = _args.function(op, "generator", generator)
    call_args = tuple(args)
    check = None if output_signature is None else _checker(op, output_signature)

    def factory() -> Iterator[Mapping[str, Any]]:
        it: Iterator[Mapping[str, Any]] = iter(gen(*call_args))
        if check is None:
            return it
        return (check(i, e) for i, e in enumerate(it))

    return Dataset._wrap(_native.Dataset.from_generator(factory, name or _args.label(gen)))


def _checker(op: str, signature: ElementSpec) -> Callable[[int, Mapping[str, Any]], Mapping[str, Any]]:
    if not isinstance(signature, Mapping):
        raise _args.fail(op, "output_signature", signature, "must be a dict of feature -> TensorSpec")
    want = {k: s for k, s in signature.items() if isinstance(s, (TensorSpec, RaggedSpec))}
    if len(want) != len(signature):
        raise _args.fail(op, "output_signature", signature, "values must be TensorSpec or RaggedSpec")

    def check(index: int, element: Mapping[str, Any]) -> Mapping[str, Any]:
        if not isinstance(element, Mapping):
            return element  # the native side names the problem (a tuple: how to name its parts)
        if set(element) != set(want):
            raise InvalidArgumentError(f"{op}: element {index} has features {sorted(element)}, "
                                       f"output_signature says {sorted(want)}")
        for k, spec in want.items():
            why = mismatch(spec, element[k])
            if why is not None:
                raise InvalidArgumentError(f"{op}: element {index}, feature {k!r}: output_signature {why}")
        return element

    return check


list_files = Dataset.list_files
zip = Dataset.zip
sample_from_datasets = Dataset.sample_from_datasets
choose_from_datasets = Dataset.choose_from_datasets
from_tensors = Dataset.from_tensors


def TextLineDataset(
    filenames: Any,
    compression_type: Optional[str] = None,
    buffer_size: Optional[int] = None,
    num_parallel_reads: Optional[int] = None,
    name: Optional[str] = None,
) -> Dataset:
    """tf.data's ``TextLineDataset``: the lines of ``filenames`` (a path or a list of paths),
    file after file, each ``{"line": bytes}`` without its ``\\n`` (or ``\\r\\n``); a last
    line with no newline counts, an empty line is an empty ``line``, no files give an empty
    dataset.

    ``compression_type``: ``None`` / ``""`` (default), ``"GZIP"`` or ``"ZLIB"``.
    ``num_parallel_reads``: ``None`` or 1 reads the files one after another; ``N`` > 1 (or
    ``AUTOTUNE``) reads ``N`` at once and interleaves their lines one by one in tf.data's order,
    as :func:`stokehold.TFRecordDataset` does. ``buffer_size`` and ``name`` are accepted and
    checked for tf.data's signature. A stream; each file is a :func:`from_generator` source (a
    checkpoint counts its lines, a restore reads it again and skips them). A missing file raises
    ``FileNotFoundError`` when the iterator reaches it, as in tf.data.
    """
    op = "TextLineDataset"
    files = _filenames(op, filenames, buffer_size, name)
    kind = _compression(op, compression_type)
    if not files:
        return from_arrays({"line": np.array([], dtype=object)})

    def one_file(path: str) -> Dataset:
        def lines() -> Iterator[Mapping[str, Any]]:
            for raw in _opened(path, kind):
                line = raw[:-1] if raw.endswith(b"\n") else raw
                yield {"line": line[:-1] if line.endswith(b"\r") else line}

        return Dataset._wrap(_native.Dataset.from_generator(lines, f"{op}[{path}]"))

    return _each_file(op, files, one_file, num_parallel_reads)


def FixedLengthRecordDataset(
    filenames: Any,
    record_bytes: int,
    header_bytes: Optional[int] = None,
    footer_bytes: Optional[int] = None,
    buffer_size: Optional[int] = None,
    compression_type: Optional[str] = None,
    num_parallel_reads: Optional[int] = None,
    name: Optional[str] = None,
) -> Dataset:
    """tf.data's ``FixedLengthRecordDataset``: each file is ``header_bytes`` (default 0), then
    records of ``record_bytes``, then ``footer_bytes`` (default 0); the records of
    ``filenames``, file after file, each ``{"record": bytes}``.

    Random access (``len``, ``ds[i]``, global shuffle): the files' sizes are read when the
    dataset is built, so a missing file (``FileNotFoundError``) or a body that is not a multiple
    of ``record_bytes`` (:class:`InvalidArgumentError`, naming the file) is refused then, where
    tf.data raises when its iterator reaches the file. ``num_parallel_reads`` > 1 interleaves
    the files' records one by one in tf.data's order (a stream then). Only uncompressed files:
    ``compression_type`` must be ``None`` or ``""``. ``buffer_size`` and ``name`` are accepted
    and checked for tf.data's signature.

    Raises:
        DataCorruptionError: a file shorter than when the dataset was built.
    """
    op = "FixedLengthRecordDataset"
    files = _filenames(op, filenames, buffer_size, name)
    if _compression(op, compression_type):
        raise _args.fail(op, "compression_type", compression_type,
                         "compressed files are not supported (records are read by offset); "
                         "decompress them first")
    size = _args.count(op, "record_bytes", record_bytes, 1)
    head = 0 if header_bytes is None else _args.count(op, "header_bytes", header_bytes)
    foot = 0 if footer_bytes is None else _args.count(op, "footer_bytes", footer_bytes)
    if not files:
        return from_arrays({"record": np.array([], dtype=object)})

    def records(paths: List[str]) -> Dataset:
        starts = [0]
        for p in paths:
            body = os.path.getsize(p) - head - foot
            if body < 0 or body % size:
                raise InvalidArgumentError(
                    f"{op}: {p}: excluding the header ({head} bytes) and footer ({foot} bytes) the "
                    f"body is {body} bytes, not a multiple of record_bytes ({size})")
            starts.append(starts[-1] + body // size)

        def at(e: Mapping[str, Any]) -> Mapping[str, Any]:
            i = int(e["x"])
            f = bisect.bisect_right(starts, i) - 1
            with open(paths[f], "rb") as fh:
                fh.seek(head + (i - starts[f]) * size)
                data = fh.read(size)
            if len(data) != size:
                raise DataCorruptionError(f"{op}: {paths[f]}: record {i - starts[f]} is cut short "
                                          f"(the file shrank after the dataset was built)")
            return {"record": data}

        return Dataset.range(starts[-1]).map(at, name=op)

    if num_parallel_reads in (None, 1) or len(files) == 1:
        return records(files)
    return _each_file(op, files, lambda p: records([p]), num_parallel_reads)


def _filenames(op: str, filenames: Any, buffer_size: Optional[int], name: Optional[str]) -> List[str]:
    """tf.data's file-source arguments, checked: the paths (a list may be empty)."""
    if buffer_size is not None:
        _args.count(op, "buffer_size", buffer_size, -1)
    if name is not None:
        _args.name(op, "name", name)
    if isinstance(filenames, (list, tuple)) and not filenames:
        return []
    return _args.paths(op, "filenames", filenames)


def _compression(op: str, value: Optional[str]) -> str:
    """tf.data's ``compression_type``: ``""`` (none), ``"GZIP"`` or ``"ZLIB"``."""
    kind = "" if value is None else str(value).upper()
    if kind not in ("", "NONE", "GZIP", "ZLIB"):
        raise _args.fail(op, "compression_type", value, 'must be None, "", "GZIP" or "ZLIB"')
    return "" if kind == "NONE" else kind


def _opened(path: str, kind: str) -> Iterable[bytes]:
    """The lines (``\\n`` kept) of ``path``, decompressed as ``kind`` says."""
    if kind == "GZIP":
        with gzip.open(path, "rb") as f:
            yield from f
    elif kind == "ZLIB":
        with open(path, "rb") as f:
            yield from zlib.decompress(f.read()).splitlines(keepends=True)
    else:
        with open(path, "rb") as f:
            yield from f


def _each_file(op: str, files: List[str], one_file: Callable[[str], Dataset],
               num_parallel_reads: Optional[int]) -> Dataset:
    """The datasets ``one_file`` opens, one after another, or with ``num_parallel_reads`` > 1
    interleaved one element at a time in tf.data's order."""
    if len(files) == 1:
        return one_file(files[0])
    paths = from_arrays({"path": np.array(files, dtype=object)})
    if num_parallel_reads in (None, 1):
        return paths.flat_map(lambda e: one_file(_args.path(op, "filenames", e["path"])), name=op)
    cycle = _args.parallelism(op, "num_parallel_reads", num_parallel_reads)
    return paths.interleave(lambda e: one_file(_args.path(op, "filenames", e["path"])),
                            cycle_length=cycle, block_length=1, num_parallel_calls=cycle,
                            deterministic=True, name=op)
