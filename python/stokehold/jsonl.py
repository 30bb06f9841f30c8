"""JSON Lines files (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``) read at random, natively.

    >>> import json, os, tempfile, stokehold
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> with open(path, "w") as f:
    ...     for i in range(4):
    ...         print(json.dumps({"text": f"row {i}", "label": i, "meta": {"score": i / 2}}), file=f)
    >>> ds = stokehold.read_jsonl(path)
    >>> len(ds), ds[3]["label"], ds[3]["meta.score"], ds[3]["text"].item()
    (4, array(3), array(1.5), b'row 3')

* Each line is one element. ``fields`` picks the features: ``None`` (every field of the first
  line), a list of names, or a dict of name to type (``"int64"``, ``"float32"``, ``"bytes"``, any
  numpy dtype name; ``"int64[]"`` for a list; ``None`` to infer it from the first line). A nested
  object's fields are named ``"a.b"``. Integers infer ``int64``, floats ``float64``, strings
  ``bytes``, booleans ``bool``, lists rank-1 arrays (ragged across rows when batched).
* A number that the field's type cannot hold exactly (``1.5`` in an ``int64`` field, ``300`` in
  ``int8``) raises :class:`SchemaError` naming the file, line and the declaration that reads it;
  so does a missing or ``null`` field without a default (``defaults={"label": -1}``).
* A plain file gets a line index the first time it is read (``train.jsonl.idx`` beside it, or in
  memory when the folder is read-only): ``len``, ``ds[i]``, global ``shuffle``, ``shard`` and
  checkpoints as every random-access source. A ``.gz`` / ``.zst`` file is decompressed into
  memory when opened (its lines cannot be found otherwise): it costs its decompressed size.
* A line that is not a JSON object raises :class:`DataCorruptionError` naming the file, line and
  byte offset; with ``on_error="skip"`` bad lines are left out and counted in ``ds.skipped()``
  (every line is read once when the files are opened, so that indices stay stable).
* JSON is read strictly (RFC 8259): ``NaN``, ``Infinity`` and numbers past float64's range, which
  Python's ``json`` accepts, are refused as not JSON.
"""

import json
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _args, _native
from .dataset import Dataset

__all__ = ["read_jsonl"]

Fields = Union[None, Sequence[str], Mapping[str, Any]]


def _kind(op: str, name: str, kind: Any) -> Optional[str]:
    if kind is None:
        return None
    if isinstance(kind, str):
        return kind
    if isinstance(kind, (list, tuple)) and len(kind) == 1:
        inner = _kind(op, name, kind[0])
        return None if inner is None else inner + "[]"
    if kind in (bytes, str):
        return "bytes"
    return _args.dtype_name(op, kind)


def _fields(op: str, fields: Fields) -> Optional[List[Tuple[str, Optional[str], Optional[str]]]]:
    if fields is None:
        return None
    if isinstance(fields, str):
        fields = [fields]
    if isinstance(fields, Mapping):
        items = list(fields.items())
    else:
        try:
            items = [(f, None) for f in fields]
        except TypeError:
            raise _args.fail(op, "fields", fields, "must be None, a list of names or a dict of "
                             "name to type") from None
    return [(_args.name(op, "fields", n), _kind(op, n, k), None) for n, k in items]


def _json(op: str, name: str, value: Any) -> str:
    if isinstance(value, (np.generic, np.ndarray)):
        value = value.tolist()
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise _args.fail(op, "defaults", {name: value}, "each default must be a JSON value "
                         "(a finite number, string, bool or list of them)") from None


def read_jsonl(
    paths: Any,
    fields: Fields = None,
    on_error: str = "raise",
    *,
    defaults: Optional[Mapping[str, Any]] = None,
) -> Dataset:
    """The lines of ``paths`` (one path or a list, in order) as elements of typed features.

    ``fields``: ``None`` (default: every field of the first line, nested objects flattened to
    ``"a.b"`` names), a list of names, or a dict of name to type (``"float32"``, ``"int64[]"``
    for a list, a numpy dtype, ``None`` to infer). ``on_error``: ``"raise"`` (default) or
    ``"skip"`` (a bad line is left out and counted in ``ds.skipped()``). ``defaults``: a dict of
    name to the value a line without that field (or with ``null``) holds; without one such a line
    raises :class:`SchemaError` naming the file and line.
    """
    op = "read_jsonl"
    files = _args.paths(op, "paths", paths)
    if defaults is None:
        defaults = {}
    if not isinstance(defaults, Mapping):
        raise _args.fail(op, "defaults", defaults, "must be a dict of field name to value")
    pairs = [(_args.name(op, "defaults", k), _json(op, k, v)) for k, v in defaults.items()]
    on = _args.name(op, "on_error", on_error)
    native = _native.Dataset.read_jsonl(files, _fields(op, fields), on, pairs)
    return Dataset._wrap(native)

