"""TFRecord files and ``tf.train.Example``, without TensorFlow.

    >>> import numpy as np, os, tempfile, stokehold
    >>> from stokehold import tfrecord as tfr
    >>> d = tempfile.mkdtemp()
    >>> src = stokehold.from_arrays({"label": np.arange(10), "x": np.ones((10, 3), np.float32)})
    >>> paths = tfr.write_tfrecord(src, d, prefix="train", num_shards=2)
    >>> [os.path.basename(p) for p in paths]
    ['train-00000-of-00002.tfrecord', 'train-00001-of-00002.tfrecord']
    >>> spec = {"label": tfr.FixedLen([], "int64"), "x": tfr.FixedLen([3], "float32")}
    >>> [b["x"].shape for b in tfr.read_tfrecord(paths, spec, batch_size=4)]
    [(4, 3), (4, 3), (2, 3)]
    >>> ds = tfr.TFRecordDataset(paths)      # indexes were written too: random access
    >>> len(ds), tfr.decode_example(ds[3]["record"].item())["label"]
    (10, array(3))

* :func:`TFRecordDataset` yields ``{"record": bytes}`` per record, as tf.data does; with an index
  next to every file (``write_tfrecord`` writes them, :func:`build_index` or ``stokehold index``
  makes them) it is random-access: ``len``, ``ds[i]``, global ``shuffle(seed=...)``.
* :func:`read_tfrecord` reads and parses in one pass into batches: the fast path.
* :func:`parse_examples` parses the ``record`` feature of any dataset, per batch or per element.
* Corrupt records (bad CRC, bad length, truncated file) raise :class:`DataCorruptionError` naming
  the file and offset, or with ``on_error="skip"`` (as every op spells it; ``on_corrupt=`` is a
  deprecated alias) are skipped and counted in the pipeline's one skip log: ``ds.skipped()``, on
  the dataset these functions return or on any pipeline built over it (``.count``; ``.first``:
  each with its ``file`` and ``offset``). ``ds.corrupt_records`` is its deprecated alias.
"""

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _args, _native, errors
from ._args import renamed
from .dataset import Dataset
from .sources import from_arrays

__all__ = [
    "FixedLen",
    "VarLen",
    "TFRecordDataset",
    "read_tfrecord",
    "parse_examples",
    "parse_example",
    "parse_single_example",
    "build_index",
    "write_tfrecord",
    "encode_example",
    "decode_example",
]

_DTYPES = {"int64": "int64", "float32": "float32", "bytes": "bytes", "string": "bytes", "str": "bytes"}


def _dtype(d: Any) -> str:
    name = getattr(d, "name", None) or getattr(d, "__name__", None) or str(d)
    if name in ("bytes_", "object", "object_"):
        name = "bytes"
    if name not in _DTYPES:
        raise _native.InvalidArgumentError(
            f"tf.train.Example holds int64, float32 or bytes, not {d!r}: parse an integer or "
            f"bool feature as int64 and a float one as float32, then ds.cast(feature, {name!r}); "
            "float64 is written as raw bytes (docs/FORMAT.md, \"Dtypes and shapes in "
            "tf.train.Example\"), and decode_example restores every recorded dtype"
        )
    return _DTYPES[name]


@dataclass(frozen=True)
class FixedLen:
    """Exactly ``prod(shape)`` values per example, reshaped to ``shape`` (``[]`` for a scalar);
    batches are ``[batch, *shape]``. ``default`` (one value, or ``prod(shape)`` values) fills in
    for an example without the feature; without it a missing feature raises SchemaError."""

    shape: Sequence[int]
    dtype: Any
    default: Any = None


@dataclass(frozen=True)
class VarLen:
    """Any number of values: a 1-D array per example, a :class:`stokehold.Ragged` (values + row
    splits, no padding) per batch."""

    dtype: Any


#: Feature name -> how to parse it (any mapping: a dict held in a variable type-checks too).
Spec = Mapping[str, Union[FixedLen, VarLen]]


def _spec(features: Spec) -> List[Tuple[str, str, List[int], str, Any]]:
    if not isinstance(features, Mapping) or not features:
        raise _native.InvalidArgumentError("features must be a non-empty dict of name -> FixedLen/VarLen")
    out = []
    for name, f in features.items():
        if isinstance(f, FixedLen):
            default = f.default
            if default is not None:
                flat = default if isinstance(default, (list, tuple)) else [default]
                default = [getattr(v, "item", lambda v=v: v)() for v in flat]
            shape = [_args.count("FixedLen", "shape", s) for s in f.shape]
            out.append((str(name), "fixed", shape, _dtype(f.dtype), default))
        elif isinstance(f, VarLen):
            out.append((str(name), "var", [], _dtype(f.dtype), None))
        else:
            raise _native.InvalidArgumentError(f"feature {name!r}: expected FixedLen or VarLen, got {f!r}")
    return out


def _files(op: str, filenames: Any, allow_empty: bool = False) -> List[str]:
    return _args.paths(op, "filenames", filenames, allow_empty)


@dataclass(frozen=True)
class CorruptRecords:
    """What the deprecated ``corrupt_records`` gives: ``count`` and ``first``, (file, offset,
    reason) of the first few skipped records."""

    count: int
    first: List[Tuple[str, int, str]]


class TFRecordSource(Dataset):
    """A dataset read from TFRecord files; ``ds.skipped()`` (here or on any pipeline built over
    it) counts the records ``on_error="skip"`` skipped."""

    @property
    def corrupt_records(self) -> CorruptRecords:
        """Deprecated: ``ds.skipped()`` counts the same records, and keeps counting them after
        later ops."""
        warnings.warn("ds.corrupt_records is deprecated: use ds.skipped() (the same count, and "
                      "each record's .file and .offset)", DeprecationWarning, stacklevel=2)
        count, first = self._native.skipped()
        return CorruptRecords(int(count), [(str(at[0]), int(at[1]), str(at[2]))
                                           for _, _, at in first if at is not None])


@renamed(on_corrupt="on_error")
def TFRecordDataset(
    filenames: Any,
    compression: Optional[str] = "auto",
    buffer_size: Optional[int] = None,
    num_parallel_reads: Optional[int] = None,
    name: Optional[str] = None,
    *,
    compression_type: Optional[str] = None,
    verify: bool = True,
    on_error: str = "raise",
) -> Dataset:
    """The records of ``filenames`` in order, each ``{"record": bytes}``.

    ``compression``: ``"auto"`` (default: ``.gz`` is GZIP, ``.zz``/``.zlib`` ZLIB, else none),
    ``""``/``"NONE"``/``None``, ``"GZIP"`` or ``"ZLIB"``; ``compression_type`` is tf.data's name
    for it. ``buffer_size`` (tf.data's read buffer, bytes) is accepted and checked; stokehold's
    reader sizes its own reads. ``num_parallel_reads``: ``None`` or 1 reads the files one after
    another; ``N`` > 1 (or ``AUTOTUNE``) reads ``N`` files at once and interleaves their records
    one by one, in the order tf.data gives (``interleave(cycle_length=N, block_length=1)``).
    ``name`` is accepted for tf.data's signature. ``verify`` (default True) checks each record's
    CRC. ``on_error``: ``"raise"`` (default) or ``"skip"`` (``on_corrupt=`` is a deprecated
    alias). Random-access when every file is uncompressed and has an index. Its iterator state
    is the file index and byte offset."""
    op = "TFRecordDataset"
    if compression_type is not None:
        if compression not in ("auto", compression_type):
            raise _args.fail(op, "compression_type", compression_type,
                             f"conflicts with compression={compression!r}: give one of them")
        compression = compression_type
    if compression is None:
        compression = ""
    if buffer_size is not None and _args.count(op, "buffer_size", buffer_size, -1) < 0:
        buffer_size = None
    if name is not None:
        _args.name(op, "name", name)
    files = _files(op, filenames, allow_empty=True)
    verify = _args.flag(op, "verify", verify)
    if not files:  # tf.data: no files, no records
        return from_arrays({"record": np.array([], dtype=object)})
    if num_parallel_reads not in (None, 1) and len(files) > 1:
        cycle = _args.parallelism(op, "num_parallel_reads", num_parallel_reads)
        paths = from_arrays({"path": np.array(files, dtype=object)})
        return paths.interleave(
            lambda e: TFRecordDataset([e["path"]], compression, verify=verify,
                                      on_error=on_error),
            cycle_length=cycle, block_length=1, num_parallel_calls=cycle, deterministic=True)
    native = _native.Dataset.tfrecord_dataset(files, compression, verify, on_error)
    return TFRecordSource(native)


@renamed(on_corrupt="on_error")
def read_tfrecord(
    filenames: Any,
    features: Spec,
    batch_size: int,
    *,
    drop_remainder: bool = False,
    compression: str = "auto",
    verify: bool = True,
    on_error: str = "raise",
) -> Dataset:
    """Batches of ``batch_size`` parsed Examples read from ``filenames`` in order: each record is
    parsed straight into the batch's arrays as it is read (the same batches as
    ``parse_examples(TFRecordDataset(f).batch(n), features)``, faster). Other arguments as in
    :func:`TFRecordDataset`."""
    op = "read_tfrecord"
    native = _native.Dataset.tfrecord_parse_batches(
        _files(op, filenames), compression, _args.flag(op, "verify", verify), on_error, _spec(features),
        _args.count(op, "batch_size", batch_size, 1), _args.flag(op, "drop_remainder", drop_remainder),
    )
    return TFRecordSource(native)


def parse_examples(
    ds: Dataset, features: Spec, batched: Optional[bool] = None, record: str = "record"
) -> Dataset:
    """Parses the serialized Examples in feature ``record`` of ``ds`` (other features are kept).
    ``batched=None`` (default) parses what each element holds: one record (a scalar, as
    :func:`TFRecordDataset` yields) gives each feature its spec's shape, as
    ``tf.io.parse_single_example``; a batch of records (rank 1, after ``batch``) gives
    ``[n, *shape]``, as ``tf.io.parse_example``. ``True`` / ``False`` insist on a batch / one
    record: an element holding the other raises :class:`SchemaError` naming both, never a
    silent change of shape.

        >>> import numpy as np, tempfile, stokehold
        >>> from stokehold import tfrecord as tfr
        >>> d = tempfile.mkdtemp()
        >>> paths = tfr.write_tfrecord(stokehold.from_arrays({"label": np.arange(4)}), d)
        >>> spec = {"label": tfr.FixedLen([], "int64")}
        >>> tfr.parse_examples(tfr.TFRecordDataset(paths), spec)[0]["label"].shape
        ()
        >>> tfr.parse_examples(tfr.TFRecordDataset(paths).batch(2), spec)[0]["label"].shape
        (2,)
    """
    op = "parse_examples"
    if batched is not None:
        batched = _args.flag(op, "batched", batched)
    return Dataset._wrap(ds._native.parse_examples(_spec(features), batched, _args.name(op, "record", record)))


def parse_example(ds: Dataset, features: Spec, record: str = "record") -> Dataset:
    """tf.io.parse_example's spelling: :func:`parse_examples` of batches of records."""
    return parse_examples(ds, features, batched=True, record=record)


def parse_single_example(ds: Dataset, features: Spec, record: str = "record") -> Dataset:
    """tf.io.parse_single_example's spelling: :func:`parse_examples` of one record per element."""
    return parse_examples(ds, features, batched=False, record=record)


@renamed(skip_corrupt=("on_error", lambda skip: "skip" if skip else "raise"))
def build_index(
    filenames: Any, *, on_error: str = "raise", side_folder: bool = False
) -> List[Tuple[str, int, int]]:
    """Writes ``<file>.idx`` for each uncompressed file (atomically); returns (index path,
    records, corrupt records left out) per file. Corrupt records raise unless
    ``on_error="skip"`` (``skip_corrupt=True`` is a deprecated alias; then the index lists the
    offsets it left out, so readers still see them). With
    ``side_folder`` the index goes to ``<dir>/.stokehold-idx/<file>.idx``, where readers find it
    too and tf.data's ``list_files("train-*")`` does not."""
    out = []
    side = _args.flag("build_index", "side_folder", side_folder)
    skip = errors.on_error("build_index", on_error) == "skip"
    for f in _files("build_index", filenames):
        records, skipped, path = _native.tfrecord_build_index(f, skip, side)
        out.append((str(path), records, skipped))
    return out


@renamed(directory="path", bytes_per_shard="shard_size")
def write_tfrecord(
    ds: Dataset,
    path: Any,
    *,
    prefix: str = "data",
    num_shards: Optional[int] = None,
    records_per_shard: Optional[int] = None,
    shard_size: Optional[int] = None,
    compression: Optional[str] = None,
    seed: Optional[int] = None,
    index: Union[bool, str] = True,
    suffix: Optional[str] = None,
    progress: Optional[Callable[[int, Optional[int]], None]] = None,
) -> List[str]:
    """Writes one epoch of ``ds`` to ``<path>/<prefix>-00000-of-000NN<suffix>`` shards (a folder)
    and returns their paths: :func:`stokehold.write_shards`' argument names (``directory=`` and
    ``bytes_per_shard=`` are deprecated aliases of ``path`` and ``shard_size``). Shards are cut
    by ``num_shards`` (equal record counts; needs a known length), ``records_per_shard``, or
    ``shard_size`` bytes (default 256 MiB). ``compression``: ``None`` (default, uncompressed;
    ``""`` and ``"NONE"`` too), ``"GZIP"`` or ``"ZLIB"``. Elements that are
    exactly ``{"record": bytes}`` are written as is; others are encoded as tf.train.Examples
    that keep every feature's dtype and shape (:func:`encode_example`).
    ``seed``: write in a seeded global shuffle order (random-access datasets). ``index``
    (default True, uncompressed only): write ``.idx`` sidecars beside the shards; ``"side"``: in
    ``<path>/.stokehold-idx/`` instead, where readers find them and a glob over the folder
    (tf.data's ``list_files``) does not; False: none. ``suffix`` defaults to
    ``.tfrecord`` (``.tfrecord.gz`` for GZIP). Every file appears under its final name only when
    all are complete. ``progress(records, total)`` is called now and then."""
    if compression is None:
        compression = ""
    if suffix is None:
        suffix = {"gzip": ".tfrecord.gz", "zlib": ".tfrecord.zz"}.get(compression.lower(), ".tfrecord")
    op = "write_tfrecord"

    def opt(arg: str, v: Optional[int]) -> Optional[int]:
        return None if v is None else _args.count(op, arg, v, 1)

    paths = ds._native.write_tfrecord(
        _args.path(op, "path", path), _args.name(op, "prefix", prefix), str(suffix),
        opt("num_shards", num_shards), opt("records_per_shard", records_per_shard),
        opt("shard_size", shard_size), compression,
        None if seed is None else _args.count(op, "seed", seed, 0, _args.MAX_U64), index is not False, progress,
        _index_side(op, index),
    )
    return [str(p) for p in paths]


def _index_side(op: str, index: Union[bool, str]) -> bool:
    if index in (True, False):
        return False
    if index == "side":
        return True
    raise _args.fail(op, "index", index, "must be True, False or 'side'")


def encode_example(example: Dict[str, Any]) -> bytes:
    """A dict of arrays as a serialized tf.train.Example, flattened: integers and bool become an
    Int64List, float32/float16/bfloat16 a FloatList, float64 its raw bytes, bytes a BytesList;
    a dtype other than int64, float32 and bytes, and a rank other than 1, are recorded in side
    features ``<name>:dtype`` / ``<name>:shape`` so that :func:`decode_example` gives the same
    arrays back (docs/FORMAT.md, "Dtypes and shapes in tf.train.Example")."""
    return _native.encode_example(example)


def decode_example(record: bytes) -> Dict[str, Any]:
    """A serialized tf.train.Example as a dict of arrays, sorted by name: each in the dtype and
    shape its side features record (what :func:`encode_example` and :func:`write_tfrecord`
    write; the side features are dropped), else 1-D (int64, float32 or object arrays of
    bytes)."""
    return _native.decode_example(bytes(record))
