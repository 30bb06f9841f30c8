"""What an element holds: :class:`TensorSpec` and :class:`RaggedSpec`, as ``Dataset.element_spec``
reports them (tf.data's ``element_spec``, read from the first element)."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Tuple, Union

import numpy as np

from .ragged import Ragged

__all__ = ["ElementSpec", "RaggedSpec", "TensorSpec", "spec_of"]


class TensorSpec(NamedTuple):
    """A dense feature: its shape and numpy dtype (``object`` for bytes)."""

    shape: Tuple[int, ...]
    dtype: np.dtype


class RaggedSpec(NamedTuple):
    """A ragged feature (a :class:`Ragged` batch): rows, the shape of each row past axis 0
    (``None`` there: it varies), and the dtype."""

    rows: int
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
