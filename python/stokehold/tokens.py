"""Token files for language-model training, read at random, natively.

    >>> import os, tempfile, numpy as np, stokehold
    >>> path = os.path.join(tempfile.mkdtemp(), "train.bin")
    >>> np.arange(100, dtype=np.uint16).tofile(path)  # nanoGPT's format: raw uint16 tokens
    >>> ds = stokehold.read_tokens(path, seq_len=9, order="sequential")
    >>> len(ds), ds[1]["tokens"].tolist()
    (11, [9, 10, 11, 12, 13, 14, 15, 16, 17, 18])

* Files: a Megatron indexed dataset (its prefix, or its ``.bin`` or ``.idx``; every token type
  megatron-core writes), a ``.npy`` of token ids, or a headerless flat file: nanoGPT's ``.bin``
  (uint16 unless ``dtype`` says otherwise) or OLMo-core's raw memmaps (give ``dtype="uint32"``).
  Files are memory-mapped: nothing is read until a window is.
* Elements are ``{"tokens": int64 [seq_len + 1]}``: the inputs are ``tokens[:-1]``, the labels
  ``tokens[1:]``; consecutive windows share one token, as Megatron-LM cuts them. int64 whatever
  the file holds, because that is what an embedding lookup takes (``torch.long``) and what every
  token type fits.
* ``order="shuffle"`` (default): every window of every file, globally shuffled with ``seed``, a
  new order each epoch. ``"sequential"``: file after file, in order. ``"megatron"``:
  megatron-core's ``GPTDataset`` order, sample for sample (its document, sample and shuffle
  indices rebuilt in Rust with numpy's RandomState(seed)), with its ``num_samples`` and split
  (``documents=(first, end)``, sequence ids); several files with ``weights`` and ``size`` are a
  ``BlendedDataset``. Windows past ``len(ds)`` are later epochs, so ``len``, ``ds[i]``, ``shard``,
  ``batch`` and checkpoints work as for every random-access source.
* A file whose index does not fit its data (a truncated ``.bin``, a lying ``.idx`` header)
  raises :class:`DataCorruptionError` naming the file and the field.
"""

from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _args, _native
from .dataset import Dataset

__all__ = ["read_tokens"]

_ORDERS = ("shuffle", "sequential", "megatron")


def _per_file(op: str, arg: str, value: Any, n: int) -> List[Any]:
    if value is None or not isinstance(value, (list, tuple)) or (
        arg == "documents" and len(value) == 2 and all(isinstance(v, int) for v in value)
    ):
        return [value] * n
    if len(value) != n:
        raise _args.fail(op, arg, value, f"must be one value or one per file ({n})")
    return list(value)


def read_tokens(
    paths: Union[str, Sequence[str]],
    seq_len: int,
    *,
    order: str = "shuffle",
    seed: int = 0,
    num_samples: Union[None, int, Sequence[Optional[int]]] = None,
    documents: Union[None, Tuple[int, int], Sequence[Optional[Tuple[int, int]]]] = None,
    weights: Optional[Sequence[float]] = None,
    size: Optional[int] = None,
    dtype: Any = None,
) -> Dataset:
    """Windows of ``seq_len + 1`` tokens of the token files ``paths`` (one or a list).

    ``order``: ``"shuffle"`` (default; ``seed`` keys it), ``"sequential"`` or ``"megatron"``
    (megatron-core's GPTDataset with ``random_seed=seed``; ``num_samples`` and ``documents``
    per file or one for all, default one epoch of every sequence; several files need
    ``weights`` and ``size``, megatron-core's BlendedDataset). ``dtype``: the token type of a
    headerless flat file (default uint16 for a ``.bin``).
    """
    op = "read_tokens"
    files = _args.paths(op, "paths", paths)
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 2:
        raise _args.fail(op, "seq_len", seq_len, "must be an int >= 2")
    if order not in _ORDERS:
        raise _args.fail(op, "order", order, "must be 'shuffle', 'sequential' or 'megatron'")
    if not isinstance(seed, int) or seed < 0:
        raise _args.fail(op, "seed", seed, "must be an int >= 0")
    counts = _per_file(op, "num_samples", num_samples, len(files))
    docs = _per_file(op, "documents", documents, len(files))
    docs = [None if d is None else (int(d[0]), int(d[1])) for d in docs]
    if (weights is None) != (size is None):
        raise _args.fail(op, "weights", weights, "and size go together (a blend of the files)")
    blend = None if weights is None else ([float(w) for w in weights], int(size or 0))
    name = None if dtype is None else _args.dtype_name(op, dtype)
    native = _native.Dataset.read_tokens(files, seq_len, order, seed, counts, docs, blend, name)
    return Dataset._wrap(native)
