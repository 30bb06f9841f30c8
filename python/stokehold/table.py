"""Feature tables: an ``N x (row shape)`` array in a ``.npy`` file, memory-mapped read-only and
looked up by row inside pipelines.

    >>> import numpy as np, tempfile, os, stokehold
    >>> path = os.path.join(tempfile.mkdtemp(), "feats.npy")
    >>> np.save(path, np.arange(12, dtype=np.float32).reshape(6, 2))
    >>> table = stokehold.open_table(path)
    >>> len(table), table.shape, table.dtype
    (6, (6, 2), dtype('float32'))
    >>> table[5], table.take([0, 5]).shape
    (array([10., 11.], dtype=float32), (2, 2))
    >>> captions = stokehold.from_arrays({"image_id": np.array([5, 0, 0, 3])})
    >>> ds = captions.shuffle(seed=1).batch(2).gather(table, index_feature="image_id", out="features")
    >>> [b["features"].shape for b in ds]
    [(2, 2), (2, 2)]

Pages of the file live in the OS page cache and are shared by every process that opens the same
table. See ``docs/TABLES.md``.
"""

from typing import Any, Sequence, Tuple

import numpy as np

from . import _args, _native
from ._args import PathLike

__all__ = ["Table", "open_table", "write_table"]


class Table:
    """A read-only, memory-mapped table; open one with :func:`open_table`."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def __len__(self) -> int:
        return len(self._native)

    @property
    def shape(self) -> Tuple[int, ...]:
        """The full shape ``(N, ...)``."""
        return tuple(self._native.shape)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the rows."""
        return np.dtype(str(self._native.dtype))

    @property
    def path(self) -> str:
        """The table's file."""
        return str(self._native.path)

    def __getitem__(self, index: Any) -> np.ndarray:
        """``table[i]`` (negative counts from the end) is a read-only view of row ``i``;
        ``table[indices]`` and ``table[a:b]`` are :meth:`take`."""
        if isinstance(index, slice):
            return self.take(np.arange(*index.indices(len(self))))
        if isinstance(index, (int, np.integer)):
            i = int(index)
            if i < 0:
                i += len(self)
            if i < 0:
                raise _native.OutOfRangeError(
                    f"index {int(index)} out of range for table {self.path} of length {len(self)}"
                )
            row: np.ndarray = self._native.row(i)
            return row
        return self.take(index)

    def take(self, indices: Any) -> np.ndarray:
        """Rows ``indices`` (any integer array-like) copied once into a new array of shape
        ``indices.shape + row_shape``. An index out of range raises :class:`OutOfRangeError`
        (an ``IndexError``) naming the index and the table's length."""
        rows: np.ndarray = self._native.take(np.asarray(indices))
        return rows

    def __repr__(self) -> str:
        return f"Table({self.path!r}, shape={self.shape}, dtype={self.dtype})"


def open_table(path: PathLike) -> Table:
    """Maps the ``.npy`` file at ``path`` read-only after validating its header (magic, version,
    dtype and byte order, C order, shape) and size. Object-dtype, Fortran-ordered, big-endian and
    truncated files are refused with a :class:`DataCorruptionError` that says why."""
    return Table(_native.Table.open(_args.path("open_table", "path", path)))


def write_table(path: PathLike, arrays: Sequence[Any]) -> Table:
    """Writes ``arrays`` (each ``[k, ...]``, one dtype and row shape) one after another as the rows
    of a new table at ``path``, atomically (a temporary name renamed when complete), and opens
    it. ``np.save`` files work as tables too; this concatenates without holding all rows."""
    if isinstance(arrays, np.ndarray):
        arrays = [arrays]
    return Table(_native.write_table(_args.path("write_table", "path", path), [np.asarray(a) for a in arrays]))
