"""Where datasets come from: arrays, lists, generators, files, several datasets.

    >>> import numpy as np, stokehold as sh
    >>> ds = sh.from_arrays({"x": np.arange(4), "v": [np.ones(n) for n in (1, 2, 3, 4)]})
    >>> len(ds), ds[2]["v"].shape
    (4, (3,))
    >>> [int(e["x"]) for e in sh.from_generator(lambda: ({"x": i} for i in range(3)))]
    [0, 1, 2]

Shard folders, TFRecord files and feature tables have their own modules (``shards``,
``tfrecord``, ``table``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

from . import _args, _native
from ._native import InvalidArgumentError
from .dataset import Dataset
from .spec import ElementSpec, RaggedSpec, TensorSpec, spec_of

__all__ = [
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
    ``output_signature`` (feature -> :class:`TensorSpec`, e.g. a dataset's ``element_spec``)
    each element is checked to have exactly those features and dtypes. An exception the
    generator raises reaches the caller as itself, with the element index in a note.
    """
    op = "from_generator"
    gen = _args.function(op, "generator", generator)
    call_args = tuple(args)
    check = None if output_signature is None else _checker(op, output_signature)

    def factory() -> Iterator[Mapping[str, Any]]:
        it: Iterator[Mapping[str, Any]] = iter(gen(*call_args))
        if check is None:
            return it
        return (check(e) for e in it)

    return Dataset._wrap(_native.Dataset.from_generator(factory, name or _args.label(gen)))


def _checker(op: str, signature: ElementSpec) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    if not isinstance(signature, Mapping):
        raise _args.fail(op, "output_signature", signature, "must be a dict of feature -> TensorSpec")
    want = {k: s.dtype for k, s in signature.items() if isinstance(s, (TensorSpec, RaggedSpec))}
    if len(want) != len(signature):
        raise _args.fail(op, "output_signature", signature, "values must be TensorSpec or RaggedSpec")

    def check(element: Mapping[str, Any]) -> Mapping[str, Any]:
        if not isinstance(element, Mapping):
            return element  # the native side names the problem (a tuple: how to name its parts)
        if set(element) != set(want):
            raise InvalidArgumentError(f"{op}: an element has features {sorted(element)}, "
                                       f"output_signature says {sorted(want)}")
        got = spec_of(dict(element))
        for k, dtype in want.items():
            if got[k].dtype != dtype:
                raise InvalidArgumentError(f"{op}: feature {k!r} is {got[k].dtype}, "
                                           f"output_signature says {dtype}")
        return element

    return check


list_files = Dataset.list_files
zip = Dataset.zip
sample_from_datasets = Dataset.sample_from_datasets
choose_from_datasets = Dataset.choose_from_datasets
from_tensors = Dataset.from_tensors
