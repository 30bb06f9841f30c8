"""Elements in and out of a shared-memory arena, for worker processes (``processes.py``).

``pack`` copies an element's arrays into a region of the arena and returns their description
(offsets, shapes, dtype strings: plain tuples that ``marshal`` sends over a pipe); ``unpack``
turns a description back into numpy arrays that are views of the arena, or copies of it. The
values an element can hold are those the engine hands to a map function and takes back: numeric
arrays, bytes/str arrays (object, ``S`` or ``U``), :class:`~stokehold.Ragged`, and anything
``numpy.asarray`` makes an array of (Python scalars, bytes, nested lists; bytes and str kept
exactly, ``ragged.values_array``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from .ragged import Ragged, values_array

#: Every array starts on this boundary (a cache line; also enough for any dtype's alignment).
_ALIGN = 64

Meta = Any  # a nested tuple of str / int / bytes, as marshal takes it


class ArenaFull(Exception):
    """The element does not fit; ``needed`` is the bytes it would take."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _strings(name: str, a: np.ndarray) -> List[bytes]:
    items = a.reshape(-1).tolist()
    out: List[bytes] = []
    for i, item in enumerate(items):
        if isinstance(item, bytes):
            out.append(item)
        elif isinstance(item, str):
            out.append(item.encode())
        else:
            # The thread map's words (convert.rs), so both executors fail alike.
            raise TypeError(
                f"feature {name!r}: an object array must hold bytes or str, item {i} is "
                f"{type(item).__name__}; convert numeric object arrays with .astype(...) first"
            )
    return out


def _plan(name: str, v: Any, parts: List[Tuple[int, Any]], used: int) -> Tuple[Meta, int]:
    """Describes value ``v`` placed from offset ``used``; records (offset, data) to copy."""
    if isinstance(v, Ragged):
        values, used = _plan(name, v.values, parts, used)
        splits, used = _plan(name, v.row_splits, parts, used)
        return ("r", values, splits), used
    a = values_array(v)
    if a.dtype.kind in "SUO":
        items = _strings(name, a)
        data = b"".join(items)
        parts.append((used, np.frombuffer(data, np.uint8)))
        meta = ("s", tuple(a.shape), used, tuple(len(b) for b in items))
        return meta, used + _aligned(len(data))
    if a.dtype.hasobject:
        raise TypeError(f"feature {name!r}: dtype {a.dtype} holds Python objects")
    parts.append((used, a))
    return ("a", a.dtype.str, tuple(a.shape), used), used + _aligned(a.nbytes)


def pack(arena: np.ndarray, start: int, end: int, element: Dict[str, Any]) -> Meta:
    """Copies ``element`` into ``arena[start:end]``; raises :class:`ArenaFull` if it does not
    fit (nothing is written then). The description's third part is the bytes used."""
    parts: List[Tuple[int, Any]] = []
    metas = []
    used = 0
    for name, v in element.items():
        if not isinstance(name, str):
            raise TypeError("feature names must be str")
        meta, used = _plan(name, v, parts, used)
        metas.append((name, meta))
    if used > end - start:
        raise ArenaFull(used)
    for off, data in parts:
        if data.nbytes == 0:
            continue
        dst = np.ndarray(data.shape, data.dtype, buffer=arena, offset=start + off)
        dst[...] = data  # numpy releases the GIL for large copies
    return (start, tuple(metas), used)


def _value(arena: np.ndarray, base: int, meta: Meta, copy: bool) -> Any:
    kind = meta[0]
    if kind == "r":
        return Ragged(_value(arena, base, meta[1], copy), _value(arena, base, meta[2], copy))
    if kind == "s":
        _, shape, off, lengths = meta
        data = arena[base + off: base + off + sum(lengths)].tobytes()
        items = np.empty(len(lengths), dtype=object)
        pos = 0
        for i, n in enumerate(lengths):
            items[i] = data[pos: pos + n]
            pos += n
        return items.reshape(shape)
    _, dtype, shape, off = meta
    dt = np.dtype(dtype)
    if dt.itemsize * int(np.prod(shape, dtype=np.int64)) == 0:
        return np.empty(shape, dt)
    a = np.ndarray(shape, dt, buffer=arena, offset=base + off)
    return a.copy() if copy else a


def unpack(arena: np.ndarray, meta: Meta, copy: bool) -> Dict[str, Any]:
    """The element ``pack`` described: views of the arena, or (``copy``) fresh arrays."""
    base, metas = meta[0], meta[1]
    return {name: _value(arena, base, m, copy) for name, m in metas}
