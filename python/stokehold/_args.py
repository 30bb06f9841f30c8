"""Argument checks and conversions shared by every public function (private).

Each helper takes the op and the argument's name, so that a bad value is reported as
``shuffle(buffer_size=0): must be >= 1``. AUTOTUNE has one encoding, -1, from the public constant
down to the native layer (where ``Parallelism::from_arg`` reads it).
"""

from __future__ import annotations

import functools
import operator
import os
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, Union

import numpy as np

from ._native import InvalidArgumentError

#: ``num_parallel_calls=AUTOTUNE`` (and wherever tf.data accepts AUTOTUNE): let stokehold choose.
AUTOTUNE = -1
#: ``cardinality()`` of an endless dataset (as in tf.data).
INFINITE = -1
#: ``cardinality()`` of a dataset whose length is not known without iterating it.
UNKNOWN = -2

#: What a path argument accepts: str, bytes, os.PathLike, or a 0-d numpy array of bytes / str
#: (such as ``element["path"]`` from ``list_files``).
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]", np.ndarray, np.generic]


F = TypeVar("F", bound=Callable[..., Any])


def renamed(**names: Union[str, Tuple[str, Callable[[Any], Any]]]) -> Callable[[F], F]:
    """Keeps old keyword spellings of a function's arguments as deprecated aliases for one
    release: ``@renamed(fn="map_func")`` makes ``map(fn=f)`` warn (a ``DeprecationWarning``
    naming the old and the new spelling) and then call ``map(map_func=f)``. An old argument
    whose values changed too maps through a function: ``@renamed(skip_corrupt=("on_error",
    lambda v: "skip" if v else "raise"))``. The one place the rule lives; the decorated function
    keeps its new signature for mypy and IDEs. Giving both spellings is a ``TypeError``, as
    Python's own for an argument given twice."""

    def wrap(func: F) -> F:
        op = func.__name__

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, spec in names.items():
                if old in kwargs:
                    new, convert = (spec, None) if isinstance(spec, str) else spec
                    if new in kwargs:
                        raise TypeError(f"{op}() got {old!r} and {new!r}: {old!r} is the old "
                                        f"spelling of {new!r}; give {new!r} only")
                    warnings.warn(f"{op}({old}=...) is deprecated: use {op}({new}=...)",
                                  DeprecationWarning, stacklevel=2)
                    value = kwargs.pop(old)
                    kwargs[new] = value if convert is None else convert(value)
            return func(*args, **kwargs)

        call.__deprecated_names__ = dict(names)  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


def columns(op: str, value: Any) -> Dict[str, Any]:
    """``from_arrays``' columns: a non-empty mapping of feature name -> column, as a dict."""
    if not isinstance(value, Mapping):
        kind = type(value).__name__
        raise InvalidArgumentError(
            f"{op}(columns=<{kind}>): takes a dict of feature name -> array; name the "
            f"parts, e.g. from_arrays({{'x': x, 'y': y}}) for tf.data's from_tensor_slices((x, y))"
        )
    if not value:
        raise InvalidArgumentError(f"{op}(columns={{}}): needs at least one feature")
    for k in value:
        name(op, "columns", k)
    return dict(value)


def fail(op: str, arg: str, value: Any, why: str) -> InvalidArgumentError:
    """The error for a bad argument: ``op(arg=value): why``."""
    return InvalidArgumentError(f"{op}({arg}={value!r}): {why}")


#: The largest count the native layer takes (its counts are 64-bit; int64 where a count may
#: also be -1).
MAX_COUNT = 2**63 - 1
#: Seeds and epochs are unsigned 64-bit.
MAX_U64 = 2**64 - 1


def count(op: str, arg: str, value: Any, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """An int in ``minimum ..= maximum`` (numpy integers accepted; bool and float refused)."""
    if isinstance(value, bool):
        raise fail(op, arg, value, "must be an int, got bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise fail(op, arg, value, f"must be an int, got {type(value).__name__}") from None
    if v < minimum:
        raise fail(op, arg, v, f"must be >= {minimum}")
    if v > maximum:
        raise fail(op, arg, v, f"must be <= {maximum}")
    return v


#: The most axes an array has (numpy's limit): an axis past it is refused by name here.
MAX_AXIS = 64


def axis(op: str, arg: str, value: Any) -> int:
    """An axis: an int in ``-MAX_AXIS ..= MAX_AXIS``, a negative one counting from the end (as in
    numpy); each element's rank is checked natively."""
    return count(op, arg, value, -MAX_AXIS, MAX_AXIS)


def count_or_all(op: str, arg: str, value: Any) -> Optional[int]:
    """A count >= 0, or ``None`` for any negative count (or ``None``): tf.data's "all" /
    "forever" (tf.data reads every negative count so, not only -1)."""
    if value is None:
        return None
    if not isinstance(value, bool) and _is_int(value) and operator.index(value) < 0:
        return None
    return count(op, arg, value, 0)


def parallelism(op: str, arg: str, value: Any) -> int:
    """A thread count 1..=MAX_THREADS, or AUTOTUNE (-1): the encoding the native layer takes."""
    n = depth(op, arg, value)
    if n > MAX_THREADS:
        raise fail(op, arg, n, f"at most {MAX_THREADS} (AUTOTUNE picks within the machine's cores)")
    return n


def native_options(op: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """Keyword options passed through to a native op, with ``num_parallel_calls`` (when given) in
    the native layer's encoding (:func:`parallelism`): a value past it is a named error here,
    not an ``OverflowError`` at the boundary."""
    if options.get("num_parallel_calls") is not None:
        options["num_parallel_calls"] = parallelism(op, "num_parallel_calls", options["num_parallel_calls"])
    return options


def depth(op: str, arg: str, value: Any) -> int:
    """A buffer depth > 0 of any size (buffers grow with use), or AUTOTUNE (-1)."""
    if not isinstance(value, bool) and _is_int(value) and operator.index(value) == AUTOTUNE:
        return AUTOTUNE
    try:
        return count(op, arg, value, 1)
    except InvalidArgumentError:
        raise fail(op, arg, value, "must be an int > 0 or AUTOTUNE") from None


#: The most threads an argument may ask for (the native layer's `MAX_THREADS`).
MAX_THREADS = 1024


def threads(op: str, arg: str, value: Any) -> int:
    """A thread count, 1..=MAX_THREADS (more would only exhaust the process's threads)."""
    n = count(op, arg, value, 1)
    if n > MAX_THREADS:
        raise fail(op, arg, n, f"at most {MAX_THREADS}")
    return n


def seed(op: str, value: Optional[Any]) -> int:
    """A seed >= 0; ``None`` draws a fresh 63-bit one from the OS."""
    if value is None:
        return int.from_bytes(os.urandom(8), "little") >> 1
    return count(op, "seed", value, 0, MAX_U64)


def flag(op: str, arg: str, value: Any) -> bool:
    """A bool (numpy bools accepted)."""
    if not isinstance(value, (bool, np.bool_)):
        raise fail(op, arg, value, f"must be a bool, got {type(value).__name__}")
    return bool(value)


def name(op: str, arg: str, value: Any) -> str:
    """A non-empty str (a feature name, a label)."""
    if not isinstance(value, str) or not value:
        raise fail(op, arg, value, "must be a non-empty str")
    return value


def function(op: str, arg: str, value: Any) -> Callable[..., Any]:
    """A callable."""
    if not callable(value):
        raise TypeError(f"{op}({arg}=...): must be callable, got {type(value).__name__}")
    return value  # type: ignore[no-any-return]


def label(fn: Any) -> str:
    """A function's name for describe() and errors: its ``__qualname__``."""
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


def path(op: str, arg: str, value: Any) -> str:
    """A filesystem path as str, from str, bytes, os.PathLike or a 0-d numpy bytes/str array."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise fail(op, arg, value, f"a path array must be 0-d, got shape {value.shape}")
        value = value.item()
    elif isinstance(value, np.generic):
        value = value.item()
    try:
        p = os.fspath(value)
    except TypeError:
        raise fail(op, arg, value, f"must be a path (str, bytes or os.PathLike), got "
                                   f"{type(value).__name__}") from None
    return os.fsdecode(p)


def paths(op: str, arg: str, value: Any, allow_empty: bool = False) -> List[str]:
    """One path or a sequence of paths (see :func:`path`), as a list of str (non-empty unless
    ``allow_empty``)."""
    if isinstance(value, (str, bytes, os.PathLike, np.generic)) or (
        isinstance(value, np.ndarray) and value.ndim == 0
    ):
        return [path(op, arg, value)]
    if isinstance(value, np.ndarray):
        value = value.reshape(-1).tolist()
    try:
        items = list(value)
    except TypeError:
        raise fail(op, arg, value, "must be a path or a list of paths") from None
    if not items and not allow_empty:
        raise fail(op, arg, items, "no paths given")
    return [path(op, arg, v) for v in items]


def dtype_name(op: str, value: Any) -> str:
    """A numpy dtype (or its name) as the name the native layer parses."""
    if isinstance(value, str):
        return value
    try:
        return str(np.dtype(value).name)
    except TypeError:
        raise fail(op, "dtype", value, "not a numpy dtype") from None


def _is_int(value: Any) -> bool:
    try:
        operator.index(value)
    except TypeError:
        return False
    return True
