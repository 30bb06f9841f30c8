"""tf.data's ``CsvDataset``: typed columns of CSV files, as TensorFlow's reader parses them.

The rules (each checked against tensorflow-cpu 2.21 in ``python/tests/test_tf_ops.py``): a
record ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (an empty line is a record of one empty
field); with ``use_quote_delim`` a field that starts with ``"`` is quoted (``""`` inside is one
quote, delimiters and line ends inside are kept) and a quote anywhere else is an error; an empty
field (quoted or not) or one equal to ``na_value`` is missing and takes its column's default,
or raises when the column has none. Ints take surrounding blanks and a sign, nothing else
(``1.5``, ``1e3``, ``0x10`` are errors); floats take what C's ``strtod`` takes (``inf``,
``nan``, ``1e3``, ``.5``, hex); strings are the bytes as they are.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _args, _native
from ._native import InvalidArgumentError
from .dataset import Dataset
from .sources import _compression, _each_file, _filenames, _opened

__all__ = ["CsvDataset"]

#: The column types tf.data's CsvDataset takes (its ``output_types``).
_TYPES = {np.dtype(t): n for t, n in ((np.int32, "int32"), (np.int64, "int64"), (np.float32, "float"),
                                      (np.float64, "double"))}
_INT = re.compile(rb"\s*[+-]?[0-9]+\s*")
_FLOAT = re.compile(rb"\s*[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
                    rb"|inf|infinity|nan)\s*", re.IGNORECASE)
_HEX = re.compile(rb"\s*([+-]?)0x([0-9a-f]*\.?[0-9a-f]*(?:p[+-]?[0-9]+)?)\s*", re.IGNORECASE)


class _Column:
    """One output column: its dtype (``None``: bytes) and default (``None``: required)."""

    def __init__(self, op: str, i: int, spec: Any) -> None:
        self.dtype, self.default = _column(op, i, spec)

    def parse(self, raw: bytes) -> Any:
        """The value of a present field, or ``ValueError`` naming the type it is not."""
        if self.dtype is None:
            return raw
        kind = _TYPES[self.dtype]
        if self.dtype.kind == "i":
            if not _INT.fullmatch(raw):
                raise ValueError(kind)
            n = int(raw)
            info = np.iinfo(self.dtype)
            if not info.min <= n <= info.max:
                raise ValueError(kind)
            return self.dtype.type(n)
        if _FLOAT.fullmatch(raw):
            v = float(raw)
        else:
            hexed = _HEX.fullmatch(raw)
            if not hexed or not hexed.group(2).strip(b".p"):
                raise ValueError(kind)
            v = float.fromhex((hexed.group(1) + b"0x" + hexed.group(2)).decode())
        return _float32(v) if self.dtype == np.float32 else np.float64(v)


def _float32(v: float) -> Any:
    """``v`` rounded to float32; past its range it is infinite, as C's ``strtof`` gives."""
    with np.errstate(over="ignore"):
        return np.float32(v)


def _column(op: str, i: int, spec: Any) -> Tuple[Optional[np.dtype[Any]], Any]:
    """A ``record_defaults`` entry as (dtype, default): a type (``np.int64``, ``str``,
    ``bytes``, a TensorFlow dtype) is a required column; a value, or a one-element list of one
    (tf.data's ``[[0]]``), is the default and gives the type (a Python int: int32, a float:
    float32, as ``tf.constant`` reads them); an empty array of a type is a required column."""
    what = f"record_defaults[{i}]"
    numpy_dtype = getattr(spec, "as_numpy_dtype", None)  # a TensorFlow dtype
    if numpy_dtype is not None:
        spec = numpy_dtype
    if isinstance(spec, type) and spec in (str, bytes, np.str_, np.bytes_, np.object_):
        return None, None
    if isinstance(spec, (type, np.dtype)):
        dt = np.dtype(spec)
        if dt.kind in "SUO":
            return None, None
        if dt not in _TYPES:
            raise _args.fail(op, what, spec, "must be int32, int64, float32, float64 or a string type")
        return dt, None
    if hasattr(spec, "numpy"):  # a TensorFlow tensor
        spec = spec.numpy()
    if isinstance(spec, (list, tuple)) and len(spec) <= 1:
        if not spec:
            raise _args.fail(op, what, spec, "is empty: give a type (e.g. np.int32) for a required column")
        spec = spec[0]
    if isinstance(spec, bool) or isinstance(spec, np.bool_):
        raise _args.fail(op, what, spec, "must be int32, int64, float32, float64 or a string (not bool)")
    if isinstance(spec, (str, bytes)):
        return None, spec.encode() if isinstance(spec, str) else spec
    if type(spec) is int:  # noqa: E721 (a numpy scalar keeps its own type)
        return np.dtype(np.int32), np.int32(_args.count(op, what, spec, -(2**31), 2**31 - 1))
    if type(spec) is float:  # noqa: E721
        return np.dtype(np.float32), _float32(spec)
    a = np.asarray(spec)
    if a.dtype.kind in "SUO" and a.size <= 1:
        first = a.reshape(-1)[0] if a.size else None
        return None, (None if first is None else _column(op, i, getattr(first, "item", lambda: first)())[1])
    if a.dtype not in _TYPES or a.size > 1:
        raise _args.fail(op, what, spec, "must be a type, or one value of int32, int64, float32, float64 or string")
    return a.dtype, (None if a.size == 0 else a.dtype.type(a.reshape(-1)[0]))


def CsvDataset(
    filenames: Any,
    record_defaults: Sequence[Any],
    compression_type: Optional[str] = None,
    buffer_size: Optional[int] = None,
    header: bool = False,
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    select_cols: Optional[Sequence[int]] = None,
    exclude_cols: Optional[Sequence[int]] = None,
    name: Optional[str] = None,
    *,
    column_names: Optional[Sequence[str]] = None,
) -> Dataset:
    """tf.data's ``CsvDataset`` (``tf.data.experimental.CsvDataset``): one element per record
    of the CSV files ``filenames`` (a path or a list of paths), file after file.

    Each element is a dict of scalar features, one per entry of ``record_defaults``, named
    ``"col<j>"`` with ``j`` the column's index in the file (tf.data gives a tuple), or
    ``column_names``. ``record_defaults[i]`` is a type (``np.int32``, ``np.int64``,
    ``np.float32``, ``np.float64``, ``bytes`` / ``str``, or a TensorFlow dtype): a required
    column; or a value (``0``, ``0.0``, ``""``, ``np.int64(7)``, tf.data's ``[0]``): the
    default of a missing field, and the column's type (a Python int is int32, a float float32,
    as in tf.data). Strings come out as bytes.

    ``header=True`` skips each file's first record; ``field_delim`` is one character;
    ``use_quote_delim=False`` makes ``"`` an ordinary character; a field equal to ``na_value``
    is missing; ``select_cols`` (increasing column indices, one per default) or
    ``exclude_cols`` pick the columns. ``compression_type``: ``None`` / ``""``, ``"GZIP"``,
    ``"ZLIB"``. ``buffer_size`` and ``name`` are accepted and checked for tf.data's signature.
    A stream; each file is a :func:`stokehold.from_generator` source (a checkpoint counts its
    records, a restore reads the file again and skips them).

    Raises:
        InvalidArgumentError: when built, a bad argument; when reached, a malformed record (a
            quote inside an unquoted field, an unclosed quote, too many or too few fields, a
            value that is not of its column's type, a missing value with no default), naming
            the file, the record and its line.
    """
    op = "CsvDataset"
    files = _filenames(op, filenames, buffer_size, name)
    kind = _compression(op, compression_type)
    if isinstance(record_defaults, (str, bytes)) or not isinstance(record_defaults, Sequence) or not record_defaults:
        raise _args.fail(op, "record_defaults", record_defaults, "must be a non-empty list, one entry per column")
    cols = [_Column(op, i, s) for i, s in enumerate(record_defaults)]
    delim = _delim(op, field_delim)
    quote = _args.flag(op, "use_quote_delim", use_quote_delim)
    skip_header = _args.flag(op, "header", header)
    na = na_value.encode() if isinstance(na_value, str) else na_value
    if not isinstance(na, bytes):
        raise _args.fail(op, "na_value", na_value, "must be a string")
    picked = _picked(op, len(cols), select_cols, exclude_cols)
    names = _names(op, len(cols), picked, column_names)

    def one_file(path: str) -> Dataset:
        def elements() -> Iterator[Mapping[str, Any]]:
            empty = True
            for n, line, fields in _records(op, path, _opened(path, kind), delim, quote):
                empty = False
                if skip_header and n == 0:
                    continue
                yield _element(op, path, n, line, fields, cols, names, picked, na)
            if empty and skip_header:
                raise InvalidArgumentError(f"{op}: {path} is empty; header=True needs a header record")

        return Dataset._wrap(_native.Dataset.from_generator(elements, f"{op}[{path}]"))

    if not files:
        return Dataset._wrap(_native.Dataset.from_generator(lambda: iter(()), op))
    return _each_file(op, files, one_file, None)


def _delim(op: str, field_delim: Any) -> int:
    d = field_delim.encode() if isinstance(field_delim, str) else field_delim
    if not isinstance(d, bytes) or len(d) != 1 or d in b"\r\n":
        raise _args.fail(op, "field_delim", field_delim, "must be one character (not a line end)")
    return d[0]


def _picked(op: str, n: int, select: Optional[Sequence[int]], exclude: Optional[Sequence[int]]
            ) -> Tuple[str, List[int]]:
    """("all" | "select" | "exclude", column indices), checked as tf.data checks them."""
    if select is not None and len(select) and exclude is not None and len(exclude):
        raise _args.fail(op, "exclude_cols", exclude, "must be empty when select_cols is given")
    for arg, given in (("select_cols", select), ("exclude_cols", exclude)):
        if given is None or not len(given):
            continue
        idx = [_args.count(op, arg, c) for c in given]
        if any(b <= a for a, b in zip(idx, idx[1:])):
            raise _args.fail(op, arg, given, "must be strictly increasing column indices")
        if arg == "select_cols" and len(idx) != n:
            raise _args.fail(op, arg, given, f"has {len(idx)} columns; record_defaults has {n}")
        return ("select" if arg == "select_cols" else "exclude"), idx
    return "all", []


def _names(op: str, n: int, picked: Tuple[str, List[int]], column_names: Optional[Sequence[str]]) -> List[str]:
    if column_names is not None:
        names = [_args.name(op, "column_names", c) for c in column_names]
        if len(names) != n or len(set(names)) != n:
            raise _args.fail(op, "column_names", column_names, f"must be {n} distinct names, one per column")
        return names
    how, idx = picked
    if how == "select":
        return [f"col{j}" for j in idx]
    if how == "exclude":
        kept = [j for j in range(n + len(idx)) if j not in idx][:n]
        return [f"col{j}" for j in kept]
    return [f"col{j}" for j in range(n)]


def _element(op: str, path: str, n: int, line: int, fields: List[Tuple[bytes, bool]], cols: List[_Column],
             names: List[str], picked: Tuple[str, List[int]], na: bytes) -> Mapping[str, Any]:
    where = f"{op}: {path}, record {n} (line {line})"
    how, idx = picked
    if how == "select":
        if len(fields) <= idx[-1]:
            raise InvalidArgumentError(f"{where}: has {len(fields)} fields; select_cols needs column {idx[-1]}")
        chosen = [fields[j] for j in idx]
    elif how == "exclude":
        skip = set(idx)
        chosen = [f for j, f in enumerate(fields) if j not in skip]
    else:
        chosen = fields
    out = {}
    for i, col in enumerate(cols):
        if i >= len(chosen):
            raise InvalidArgumentError(f"{where}: expected {len(cols)} fields, found {len(chosen)}")
        raw = chosen[i][0]
        if raw == b"" or raw == na:
            if col.default is None:
                raise InvalidArgumentError(f"{where}: field {i} is required (no default) but missing")
            out[names[i]] = col.default
            continue
        try:
            out[names[i]] = col.parse(raw)
        except ValueError as err:
            raise InvalidArgumentError(f"{where}: field {i} is not a valid {err}: {raw!r}") from None
    if len(chosen) > len(cols):
        raise InvalidArgumentError(f"{where}: expected {len(cols)} fields, found {len(chosen)}")
    return out


def _records(op: str, path: str, lines: Iterable[bytes], delim: int, quote: bool
             ) -> Iterator[Tuple[int, int, List[Tuple[bytes, bool]]]]:
    """(record number, its first line, its fields as (bytes, quoted)) of a file's lines."""
    d = bytes([delim])
    n = 0
    line_no = 0
    it = iter(lines)
    for line in it:
        line_no += 1
        if not quote or b'"' not in line:  # the fast path: no quoted fields
            if line.endswith(b"\n"):
                body = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            else:  # the last line; a \r at its end ends its last record
                body = line[:-1] if line.endswith(b"\r") else line
            for rec in body.split(b"\r"):
                yield n, line_no, [(f, False) for f in rec.split(d)]
                n += 1
            continue
        base = line_no
        for fields, start, end in _quoted(op, path, n, line_no, line, it, delim):
            yield n, base + start, fields
            n += 1
            line_no = base + end


def _quoted(op: str, path: str, n: int, line_no: int, line: bytes, rest: Iterator[bytes], delim: int
            ) -> Iterator[Tuple[List[Tuple[bytes, bool]], int, int]]:
    """The records that start in ``line`` (which holds a quote), reading on into ``rest`` while
    a quoted field is open: (fields, the lines moved on when it started, when it ended) for each."""
    s, i, moved, start = line, 0, 0, 0
    fields: List[Tuple[bytes, bool]] = []
    field = bytearray()
    quoted = in_quotes = closed = False

    def fail(what: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{op}: {path}, record {n} (line {line_no + moved}): {what}")

    while True:
        if i >= len(s):
            if in_quotes:
                nxt = next(rest, None)
                if nxt is None:
                    raise fail("the file ends inside a quoted field (a quote is not closed)")
                s, i, moved = nxt, 0, moved + 1
                continue
            if fields or field or quoted:  # the file ends after the record's last field
                fields.append((bytes(field), quoted))
                yield fields, start, moved
            return
        c = s[i]
        if in_quotes:
            if c == 0x22:
                if i + 1 < len(s) and s[i + 1] == 0x22:
                    field.append(0x22)
                    i += 2
                    continue
                in_quotes, closed = False, True
            else:
                field.append(c)
            i += 1
            continue
        if c == delim or c in (0x0A, 0x0D):
            fields.append((bytes(field), quoted))
            field, quoted, closed = bytearray(), False, False
            if c != delim:
                if c == 0x0D and i + 1 < len(s) and s[i + 1] == 0x0A:
                    i += 1
                yield fields, start, moved
                fields, start = [], moved
                n += 1
                if i + 1 >= len(s):
                    return
            i += 1
            continue
        if closed:
            raise fail(f"a closing quote must be followed by the delimiter or a line end, not {bytes([c])!r}")
        if c == 0x22:
            if field:
                raise fail("a quote inside an unquoted field (quote the whole field and double the quote)")
            in_quotes = quoted = True
        else:
            field.append(c)
        i += 1
