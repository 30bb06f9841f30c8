"""What an element holds: :class:`TensorSpec` and :class:`RaggedSpec`, as ``Dataset.element_spec``
reports them (tf.data's ``element_spec``, read from a sample of elements: ``None`` for an axis
whose length varies)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, NamedTuple, Optional, Tuple, Union

import numpy as np

from .ragged import Ragged

__all__ = ["ElementSpec", "RaggedSpec", "TensorSpec", "spec_of", "spec_of_sample", "mismatch", "SPEC_SAMPLE"]

#: Elements ``Dataset.element_spec`` reads: the first ``SPEC_SAMPLE - 1`` and the last (where the
#: dataset has random access and a finite length: the last batch of ``batch(n)`` may be short).
SPEC_SAMPLE = 8

#: A shape: ``None`` for an axis whose length varies; the whole shape ``None`` where even the
#: number of axes varies.
Shape = Optional[Tuple[Optional[int], ...]]


class TensorSpec(NamedTuple):
    """A dense feature: its shape (``None`` for an axis whose length varies between the elements
    read) and numpy dtype (``object`` for bytes)."""

    shape: Shape
    dtype: np.dtype


class RaggedSpec(NamedTuple):
    """A ragged feature (a :class:`Ragged` batch): rows (``None`` when it varies), the shape of
    each row past axis 0 (``None`` there: it varies), and the dtype."""

    rows: Optional[int]
    row_shape: Tuple[Any, ...]
    dtype: np.dtype


#: Feature name -> spec.
ElementSpec = Dict[str, Union[TensorSpec, RaggedSpec]]


def spec_of(element: Dict[str, Any]) -> ElementSpec:
    """The spec of one element."""
    out: ElementSpec = {}
    for k, v in element.items():
        if isinstance(v, Ragged):
            out[k] = RaggedSpec(len(v), (None,) + tuple(v.values.shape[1:]), v.values.dtype)
        else:
            a = np.asarray(v)
            out[k] = TensorSpec(tuple(a.shape), a.dtype)
    return out


def _join(a: Shape, b: Shape) -> Shape:
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def spec_of_sample(elements: Iterable[Dict[str, Any]]) -> Optional[ElementSpec]:
    """The spec of the first element, with ``None`` for every axis whose length differs in a
    later one (``None``: no element)."""
    out: Optional[ElementSpec] = None
    for element in elements:
        got = spec_of(element)
        if out is None:
            out = got
            continue
        for k, s in out.items():
            g = got.get(k)
            if isinstance(s, TensorSpec) and isinstance(g, TensorSpec) and g.dtype == s.dtype:
                out[k] = TensorSpec(_join(s.shape, g.shape), s.dtype)
            elif isinstance(s, RaggedSpec) and isinstance(g, RaggedSpec) and g.dtype == s.dtype:
                rows = s.rows if s.rows == g.rows else None
                out[k] = RaggedSpec(rows, _join(s.row_shape, g.row_shape) or (None,), s.dtype)
    return out


def _fits(want: Shape, got: Shape) -> bool:
    if want is None:
        return True
    return got is not None and len(want) == len(got) and all(w is None or w == g for w, g in zip(want, got))


def mismatch(want: Union[TensorSpec, RaggedSpec], value: Any) -> Optional[str]:
    """Why ``value`` does not fit ``want`` (a shape's ``None`` fits any length), or ``None``."""
    got = spec_of({"v": value})["v"]
    if type(got) is not type(want):
        return f"expected {want}, got {got}"
    if got.dtype != want.dtype:
        return f"expected dtype {want.dtype}, got {got.dtype} (shape {_shape_of(got)})"
    if isinstance(want, TensorSpec) and isinstance(got, TensorSpec) and not _fits(want.shape, got.shape):
        return f"expected shape {want.shape}, got {got.shape}"
    if isinstance(want, RaggedSpec) and isinstance(got, RaggedSpec):
        if not _fits((want.rows,) + tuple(want.row_shape), (got.rows,) + tuple(got.row_shape)):
            return f"expected {want}, got {got}"
    return None


def _shape_of(s: Union[TensorSpec, RaggedSpec]) -> Any:
    return s.shape if isinstance(s, TensorSpec) else (s.rows,) + tuple(s.row_shape)
