"""Ragged values: rows of varying length along axis 0, stored without padding."""

from __future__ import annotations

from typing import Any, Iterator, List, Sequence

import numpy as np

__all__ = ["Ragged"]


def values_array(v: Any) -> np.ndarray:
    """``numpy.asarray(v)``, keeping bytes and str exactly: numpy makes fixed-width ``S``/``U``
    arrays of Python bytes and str, which drop trailing NUL bytes and characters
    (``np.asarray([b"a\\0"])[0] == b"a"``), so those become object arrays of the values
    themselves (as the engine's own conversion does, ``convert.rs``)."""
    if isinstance(v, np.ndarray):
        return v
    a = np.asarray(v)
    return np.asarray(v, dtype=object) if a.dtype.kind in "SU" else a


class Ragged:
    """Rows of varying length along axis 0: row ``i`` is ``values[row_splits[i]:row_splits[i+1]]``.

    A batch of variable-length elements comes out of ``batch()`` as a ``Ragged``: one contiguous
    ``values`` array (all rows back to back, no padding) and ``row_splits`` (int64, one more than
    the number of rows). Rows are numpy views into ``values``, not copies.

    Args:
        values: array ``[total_rows, ...]``.
        row_splits: non-decreasing integers from 0 to ``len(values)``.

    Example:
        >>> r = Ragged(np.arange(5), [0, 2, 5])
        >>> len(r), r[1].tolist()
        (2, [2, 3, 4])
    """

    __slots__ = ("values", "row_splits")

    def __init__(self, values: Any, row_splits: Any) -> None:
        self.values = values_array(values)
        splits = np.asarray(row_splits)
        if splits.dtype != np.int64:
            splits = splits.astype(np.int64)
        if self.values.ndim == 0:
            raise ValueError("Ragged values must have at least one dimension")
        if (
            splits.ndim != 1
            or len(splits) == 0
            or splits[0] != 0
            or splits[-1] != len(self.values)
            or (len(splits) > 1 and bool(np.any(splits[1:] < splits[:-1])))
        ):
            raise ValueError(
                f"row_splits must run from 0 to {len(self.values)} without decreasing, "
                f"got {splits.tolist()[:8]}"
            )
        self.row_splits = splits

    @classmethod
    def from_rows(cls, rows: Sequence[Any]) -> Ragged:
        """Builds a ragged value from a sequence of arrays that differ only along axis 0 (copies)."""
        arrays = [values_array(r) for r in rows]
        if not arrays:
            raise ValueError("Ragged.from_rows needs at least one row")
        splits = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([len(a) for a in arrays], out=splits[1:])
        return cls(np.concatenate(arrays, axis=0), splits)

    def __len__(self) -> int:
        return len(self.row_splits) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        n = len(self)
        i = int(index)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {index} out of range for Ragged of {n} rows")
        return self.values[self.row_splits[i] : self.row_splits[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self[i]

    def row_lengths(self) -> np.ndarray:
        """Length of each row (int64)."""
        return np.diff(self.row_splits)

    def to_list(self) -> List[np.ndarray]:
        """The rows as a list of numpy views."""
        return list(self)

    @property
    def dtype(self) -> np.dtype:
        """dtype of the values."""
        return self.values.dtype

    def __repr__(self) -> str:
        return (
            f"Ragged(rows={len(self)}, dtype={self.values.dtype}, "
            f"inner_shape={self.values.shape[1:]}, row_lengths={self.row_lengths().tolist()[:8]})"
        )
