"""The ``Dataset`` class: tf.data-like ops over a Rust engine, with random access and state.

Elements are dicts of feature name to numpy array (or :class:`stokehold.Ragged` for batches of
variable-length features). Arrays come out of the engine without a copy; see ``from_arrays`` for
what is shared with the input.
"""

from __future__ import annotations

import json
import operator
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union, overload

import numpy as np

from . import _native
from ._native import InvalidArgumentError, OutOfRangeError, StateError

__all__ = [
    "AUTOTUNE",
    "INFINITE",
    "UNKNOWN",
    "Dataset",
    "Iterator",
    "from_arrays",
    "from_list",
]

#: ``cardinality()`` of an endless dataset (as in tf.data).
INFINITE = -1
#: ``cardinality()`` of a dataset whose length is not known without iterating it.
UNKNOWN = -2
#: ``prefetch(AUTOTUNE)``: let stokehold choose the depth (currently 2).
AUTOTUNE = -1

Element = Dict[str, Any]


def _draw_seed() -> int:
    """A fresh 63-bit seed from the OS (used when ``seed=None``)."""
    return int.from_bytes(os.urandom(8), "little") >> 1


def _count(name: str, value: Any, minimum: int = 0) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{name} must be an int, got {type(value).__name__}") from None
    if v < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {v}")
    return v


def _parallelism(value: Any) -> int:
    """AUTOTUNE -> 0 (the native code for autotune), else a thread count >= 1."""
    if value == AUTOTUNE:
        return 0
    return _count("num_parallel_calls", value, 1)


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    return np.dtype(dtype).name


def from_arrays(columns: Mapping[str, Any]) -> "Dataset":
    """An in-memory, random-access dataset from columns.

    Args:
        columns: feature name -> one of

            * a numpy array ``[N, ...]``: element ``i`` is ``array[i]``. A C-contiguous,
              native-endian numeric array is **not copied**: the dataset keeps a reference to it,
              so writing to the array later changes what the dataset returns (elements come out
              as read-only views of it). Other arrays are copied once.
            * a list of ``N`` arrays (or values): stored in one contiguous arena. Rows of one shape
              make a dense column; rows that differ only along axis 0 make a **ragged** column
              (values back to back plus row splits, no padding).
            * a :class:`stokehold.Ragged` (used as is, zero-copy).

            Numeric dtypes: bool, (u)int8/16/32/64, float16/32/64 (bfloat16 with ``ml_dtypes``).
            Bytes features: numpy ``S``/``U`` arrays or object arrays of ``bytes``/``str``
            (str is UTF-8 encoded); they come out as object arrays of ``bytes``.

    Raises:
        InvalidArgumentError: columns of different lengths, an unknown dtype (e.g. complex128),
            an object array holding something other than bytes/str, an empty mapping.
    """
    if not isinstance(columns, Mapping):
        raise InvalidArgumentError(
            f"from_arrays takes a dict of feature -> array, got {type(columns).__name__}"
        )
    if not columns:
        raise InvalidArgumentError("from_arrays needs at least one feature")
    for k in columns:
        if not isinstance(k, str):
            raise InvalidArgumentError(f"feature names must be str, got {k!r}")
    return Dataset._wrap(_native.Dataset.from_columns(dict(columns)))


def from_list(elements: Iterable[Mapping[str, Any]]) -> "Dataset":
    """An in-memory dataset from a list of elements (dicts with the same features).

    Each feature is stacked into one contiguous arena (ragged where lengths differ along axis 0),
    as with a list column in :func:`from_arrays`.

    Raises:
        InvalidArgumentError: an empty list, an element that is not a dict, or elements whose
            features differ.
    """
    if isinstance(elements, Mapping):
        raise InvalidArgumentError(
            "from_list takes a list of dicts (one per element); for a dict of "
            "feature -> array or list of arrays, use from_arrays"
        )
    items = list(elements)
    if not items:
        raise InvalidArgumentError("from_list needs at least one element to know the features")
    first = items[0]
    if not isinstance(first, Mapping):
        raise InvalidArgumentError(f"element 0 is a {type(first).__name__}, not a dict")
    keys = list(first.keys())
    for i, e in enumerate(items):
        if not isinstance(e, Mapping):
            raise InvalidArgumentError(f"element {i} is a {type(e).__name__}, not a dict")
        if set(e.keys()) != set(keys):
            raise InvalidArgumentError(
                f"element {i} has features {sorted(e.keys())}, element 0 has {sorted(keys)}"
            )
    return from_arrays({k: [e[k] for e in items] for k in keys})


class Dataset:
    """A pipeline of elements (dicts of numpy arrays), random access where the ops allow it.

    Build one with :func:`from_arrays` / :func:`from_list`, chain ops (each returns a new
    ``Dataset``), and iterate. Every ``for`` loop over the same ``Dataset`` object starts the next
    epoch (``epoch`` counts them), so shuffles and random crops draw anew each time, like
    tf.data's ``reshuffle_each_iteration``; ``iter(epoch=k)`` runs a given epoch. Randomness is
    keyed by (seed, epoch, index): the same seed gives the same batches whatever the prefetch
    depth or thread timing.
    """

    def __init__(self, native: Any, *, _over: Optional[tuple] = None) -> None:
        self._native = native
        self._epoch = 0
        # (random-access base, [(native method, args), ...]) when this dataset is `base` followed
        # only by stages that change how it is computed, not what (parallelize, prefetch):
        # `epochs()` and `repeat()` look through them to keep random access.
        self._over = _over

    def _stage(self, method: str, *args: Any) -> "Dataset":
        native = getattr(self._native, method)(*args)
        if self._over is not None:
            base, stages = self._over
        elif self.is_random_access:
            base, stages = self, []
        else:
            return Dataset(native)
        return Dataset(native, _over=(base, stages + [(method, args)]))

    @classmethod
    def _wrap(cls, native: Any) -> "Dataset":
        """Wraps a native dataset (for bindings that expose their own Rust datasets)."""
        return cls(native)

    @staticmethod
    def range(n: int) -> "Dataset":
        """The integers ``0..n`` as int64 scalar feature ``"x"``."""
        return Dataset(_native.Dataset.range(_count("n", n)))

    # ---- ops -------------------------------------------------------------------------------

    def map(
        self,
        fn: Callable[[Element], Mapping[str, Any]],
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
        name: Optional[str] = None,
    ) -> "Dataset":
        """Applies ``fn`` to every element.

        ``fn`` receives a dict of numpy arrays and returns a dict (values: numpy arrays, Python
        scalars, bytes, :class:`Ragged`). An exception raised by ``fn`` reaches the caller as
        itself, with a note naming the op and the element index (Python 3.11+).

        Args:
            fn: the function.
            num_parallel_calls: ``None`` (default): in the consumer's thread (or the prefetch
                thread), keeping random access. An int or ``AUTOTUNE``: on that many worker
                threads (Python functions share the GIL, so this pays off when ``fn`` spends its
                time in numpy or other code that releases it). Over a random-access dataset this
                is ``map(fn).parallelize(...)``, so ``epochs()`` still works.
            deterministic: keep the input order (default True); False yields elements as they
                complete.
            name: label in ``describe()`` and errors (default: ``fn.__qualname__``).
        """
        if not callable(fn):
            raise TypeError(f"map takes a callable, got {type(fn).__name__}")
        label = name or _label(fn)
        if num_parallel_calls is None:
            return Dataset(self._native.map(fn, label))
        par = _parallelism(num_parallel_calls)
        det = True if deterministic is None else bool(deterministic)
        if self.is_random_access:
            return self.map(fn, name=label).parallelize(num_parallel_calls, det)
        return Dataset(self._native.map_parallel(fn, label, par, det))

    def parallelize(self, num_parallel_calls: int = AUTOTUNE, deterministic: bool = True) -> "Dataset":
        """Runs the pipeline so far on worker threads (default ``AUTOTUNE``: chosen within the
        machine's cores). Over a random-access dataset each worker computes whole elements by
        index (fetch, crop, batch...), the fastest path; over a stream, workers take elements in
        turn. With ``deterministic=True`` (default) the output is the same as without it."""
        par = _parallelism(num_parallel_calls)
        if deterministic:
            return self._stage("parallelize", par, True)
        return Dataset(self._native.parallelize(par, False))

    def filter(self, predicate: Callable[[Element], Any], name: Optional[str] = None) -> "Dataset":
        """Keeps the elements for which ``predicate(element)`` is true. The result is a stream
        (no ``len``, no indexing)."""
        if not callable(predicate):
            raise TypeError(f"filter takes a callable, got {type(predicate).__name__}")
        return Dataset(self._native.filter(predicate, name or _label(predicate)))

    def shuffle(self, seed: Optional[int] = None, buffer_size: Optional[int] = None) -> "Dataset":
        """Shuffles, with a new order each epoch.

        Args:
            seed: the seed; ``None`` draws one now from the OS, so this ``Dataset`` object is
                deterministic but another process gets another order (pass a seed to resume a
                saved iterator state elsewhere).
            buffer_size: ``None`` (default): a global permutation of a random-access dataset,
                with no buffer and O(1) memory; keeps random access. An int: a shuffle buffer of
                that many elements (any dataset; the result is a stream).
        """
        seed = _draw_seed() if seed is None else _count("seed", seed)
        if buffer_size is None:
            return Dataset(self._native.shuffle(seed))
        return Dataset(self._native.shuffle_buffer(_count("buffer_size", buffer_size, 1), seed))

    def repeat(self, count: Optional[int] = None) -> "Dataset":
        """Repeats ``count`` times (default: forever). Each repetition is a new epoch of the
        input (reshuffled); keeps random access.

        ``ds.prefetch(n).repeat(k)`` is run as ``ds.repeat(k).prefetch(n)`` (same elements; the
        same for ``parallelize``): one prefetch thread then flows through every epoch instead of
        restarting at each one.
        """
        if self._over is not None:
            base, stages = self._over
            out = base.repeat(count)
            for method, args in stages:
                out = out._stage(method, *args)
            return out
        return Dataset(self._native.repeat(None if count is None else _count("count", count)))

    def take(self, count: int) -> "Dataset":
        """The first ``count`` elements (of each epoch)."""
        return Dataset(self._native.take(_count("count", count)))

    def skip(self, count: int) -> "Dataset":
        """All but the first ``count`` elements (of each epoch)."""
        return Dataset(self._native.skip(_count("count", count)))

    def enumerate(self, name: str = "index") -> "Dataset":
        """Adds the position within the epoch as int64 feature ``name`` (default ``"index"``)."""
        return Dataset(self._native.enumerate(str(name)))

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """Stacks ``batch_size`` elements into one: a dense array ``[batch, ...]`` per feature when
        shapes agree, a :class:`Ragged` when they differ only along axis 0.

        Args:
            batch_size: elements per batch (> 0).
            drop_remainder: drop a last, smaller batch (default False).
        """
        return Dataset(self._native.batch(_count("batch_size", batch_size), bool(drop_remainder)))

    def padded_batch(
        self,
        batch_size: int,
        padded_shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None,
        padding_values: Union[None, float, Mapping[str, float]] = None,
        drop_remainder: bool = False,
    ) -> "Dataset":
        """Batches with padding: each feature of rank >= 1 is padded to the longest element of the
        batch, or to a fixed shape, and a feature ``<name>_lengths`` (int64 ``[batch]`` for rank 1,
        ``[batch, rank]`` otherwise) gives the original shapes.

        Args:
            batch_size: elements per batch (> 0).
            padded_shapes: feature -> shape; an axis given as ``None`` or ``-1`` pads to the
                longest in the batch (default for every feature and axis). An element larger than
                a fixed shape is a :class:`SchemaError`.
            padding_values: one number for every feature, or feature -> number (default 0).
                Bytes features pad with ``b""``.
            drop_remainder: drop a last, smaller batch (default False).
        """
        shapes: Dict[str, list] = {}
        if padded_shapes is not None:
            if not isinstance(padded_shapes, Mapping):
                raise InvalidArgumentError("padded_shapes must be a dict of feature -> shape")
            for k, shape in padded_shapes.items():
                shapes[str(k)] = [None if d is None or d == -1 else _count(f"padded_shapes[{k!r}]", d) for d in shape]
        values: Dict[str, float] = {}
        default = 0.0
        if isinstance(padding_values, Mapping):
            values = {str(k): float(v) for k, v in padding_values.items()}
        elif padding_values is not None:
            default = float(padding_values)
        native = self._native.padded_batch(
            _count("batch_size", batch_size), bool(drop_remainder), shapes, values, default
        )
        return Dataset(native)

    def prefetch(self, buffer_size: int = 2) -> "Dataset":
        """Runs the pipeline on a background thread, ``buffer_size`` elements ahead (default 2;
        ``AUTOTUNE`` means 2). The thread lives as long as the iterator; with ``repeat()``
        upstream it flows into the next epoch with nothing rebuilt. The result is a stream; see
        :meth:`epochs` for a loop over epochs with no stall at their boundaries."""
        depth = 2 if buffer_size == AUTOTUNE else _count("buffer_size", buffer_size)
        return self._stage("prefetch", depth)

    def random_crop(
        self, feature: str, size: int, axis: int = 0, seed: Optional[int] = None, pad: bool = False
    ) -> "Dataset":
        """A random window of ``size`` along ``axis`` of ``feature`` (native, no Python per
        element). The offset is drawn from (seed, epoch, index).

        Args:
            feature: the feature to crop.
            size: window length.
            axis: axis to crop along (default 0).
            seed: ``None`` draws one now (see :meth:`shuffle`).
            pad: an element shorter than ``size`` is a :class:`SchemaError` naming the element
                (default), or with ``pad=True`` is zero-padded at the end to ``size``.
        """
        seed = _draw_seed() if seed is None else _count("seed", seed)
        return Dataset(
            self._native.random_crop(str(feature), _count("size", size), _count("axis", axis), seed, bool(pad))
        )

    def pad_to(self, feature: str, length: int, axis: int = 0, value: float = 0) -> "Dataset":
        """Pads (with ``value``, default 0) or trims ``feature`` to exactly ``length`` along
        ``axis`` (default 0)."""
        return Dataset(
            self._native.pad_to(str(feature), _count("length", length), _count("axis", axis), float(value))
        )

    def cast(self, feature: str, dtype: Any) -> "Dataset":
        """Casts ``feature`` to ``dtype`` (a numpy dtype or its name; C-style conversion:
        truncation toward zero, saturating float-to-int)."""
        return Dataset(self._native.cast(str(feature), _dtype_name(dtype)))

    # ---- inspection ------------------------------------------------------------------------

    @property
    def is_random_access(self) -> bool:
        """True when ``len()`` and ``ds[i]`` are available (no filter, buffer shuffle or
        prefetch in the pipeline)."""
        return bool(self._native.is_random_access)

    def cardinality(self) -> int:
        """Elements per epoch; ``INFINITE`` (-1) for an endless dataset, ``UNKNOWN`` (-2) when
        it is not known without iterating (as in tf.data)."""
        n = self._native.cardinality()
        if n is None:
            return UNKNOWN
        if n == _native.INFINITE:
            return INFINITE
        return int(n)

    def __len__(self) -> int:
        n = self._native.cardinality()
        if n is None:
            raise TypeError(
                f"the length of this dataset is not known without iterating it "
                f"({self.describe()}); cardinality() returns UNKNOWN"
            )
        if n == _native.INFINITE:
            raise TypeError(f"this dataset is infinite ({self.describe()}); cardinality() returns INFINITE")
        return int(n)

    def __bool__(self) -> bool:
        # Defined so that `if ds:` does not call __len__ (which raises for streams).
        return True

    @overload
    def __getitem__(self, index: int) -> Element: ...

    @overload
    def __getitem__(self, index: slice) -> "Dataset": ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Element, "Dataset"]:
        """Element ``index`` (negative counts from the end) of a random-access dataset; with a
        slice, ``ds[start:stop]``, the dataset of those elements of each epoch (random access
        kept, nothing read; a step other than 1 is refused: use ``shard``).

        Raises:
            TypeError: the dataset is a stream, or the index is not an int or a slice.
            ValueError: a slice with a step, or counting from the end of an infinite dataset.
            OutOfRangeError: (an IndexError) the index is out of range.
        """
        if not self.is_random_access:
            raise TypeError(
                f"this dataset is a stream and has no random access ({self.describe()}); "
                f"index it before filter / shuffle(buffer_size=...) / prefetch"
            )
        if isinstance(index, slice):
            n = self._native.cardinality()
            if index.step not in (None, 1):
                raise ValueError(
                    f"ds[{index.start}:{index.stop}:{index.step}]: only a step of 1; for every "
                    f"k-th element use shard(k, index)"
                )
            if n == _native.INFINITE and (
                index.stop is None or min(index.start or 0, index.stop) < 0
            ):
                raise ValueError("a slice of an infinite dataset needs a non-negative start and stop")
            start, stop, _ = index.indices(n)
            return self.slice(start, max(start, stop))  # type: ignore[attr-defined]
        return self._native.get(self._from_end([operator.index(index)])[0])

    def _from_end(self, indices: List[int]) -> List[int]:
        """``indices`` with negative ones counted from the end (an error where that is not
        possible); non-negative ones are checked by the native side."""
        if all(i >= 0 for i in indices):
            return indices
        n = self._native.cardinality()
        if n == _native.INFINITE:
            raise OutOfRangeError(f"negative index {min(indices)} into an infinite dataset")
        out = [i + n if i < 0 else i for i in indices]
        if min(out) < 0:
            raise OutOfRangeError(f"index {min(indices)} out of range for a dataset of length {n}")
        return out

    def get_batch(self, indices: Iterable[int]) -> Element:
        """Elements ``indices`` (any order, repeats allowed, negative counts from the end) of a
        random-access dataset, stacked as ``batch`` stacks them: the fast way to read at random
        (a shard folder reads a batch's records with their cache misses overlapped).

        Raises:
            TypeError: the dataset is a stream.
            OutOfRangeError: (an IndexError) an index is out of range.
        """
        if not self.is_random_access:
            raise TypeError(f"this dataset is a stream and has no random access ({self.describe()})")
        idx = [operator.index(i) for i in np.asarray(indices).reshape(-1).tolist()]
        return self._native.get_batch(self._from_end(idx))

    def describe(self) -> str:
        """The pipeline as text, inputs first: ``in_memory(...) -> shuffle(seed=1) -> batch(4)``."""
        return str(self._native.describe())

    def __repr__(self) -> str:
        return f"<stokehold.Dataset {self.describe()}>"

    # ---- iteration -------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter()`` / ``for`` loop will run (starts at 0)."""
        return self._epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._epoch = _count("epoch", value)

    def __iter__(self) -> "Iterator":
        return self.iter()

    def iter(self, epoch: Optional[int] = None) -> "Iterator":
        """An iterator over one epoch.

        Args:
            epoch: ``None`` (default): the next epoch of this object (advances ``epoch``);
                an int: that epoch (``epoch`` is left as it is).
        """
        if epoch is None:
            epoch = self._epoch
            self._epoch += 1
        return Iterator(self._native.iter(_count("epoch", epoch)))

    def as_numpy_iterator(self) -> "Iterator":
        """Same as ``iter(ds)`` (elements are already numpy); for code written for tf.data."""
        return self.iter()

    def epochs(self, count: Optional[int] = None, buffer_size: Optional[int] = None) -> "EpochLoader":
        """Iterates ``count`` epochs (default: forever) through ONE prefetching iterator.

        ``for ep in ds.epochs(5): for batch in ep: ...``: a single background thread runs
        across epoch boundaries, so the first batch of epoch k+1 is ready when the last of epoch
        k is consumed (a plain ``for`` loop per epoch starts a new prefetch thread each time).
        Each ``ep`` yields exactly ``len(ds)`` elements; leaving one early skips the rest of it.
        Epochs are the same as ``iter(epoch=k)`` would give, starting at ``self.epoch`` (which
        advances by ``count``).

        Needs a finite random-access pipeline; trailing ``parallelize()`` / ``prefetch(n)`` stages
        are looked through and kept (a prefetch of depth 2 is added when there is none).

        Args:
            count: number of epochs (``None``: endless).
            buffer_size: prefetch depth (default: the trailing prefetch's, else 2).
        """
        base, stages = self._over or (self, [])
        stages = list(stages)
        if buffer_size is not None:
            depth = _count("buffer_size", buffer_size, 1)
            stages = [st for st in stages if st[0] != "prefetch"] + [("prefetch", (depth,))]
        elif not any(method == "prefetch" for method, _ in stages):
            stages.append(("prefetch", (2,)))
        if count is not None:
            count = _count("count", count)
        start = self._epoch
        native = base._native.epochs(start, count)
        for method, args in stages:
            native = getattr(native, method)(*args)
        per_epoch = len(base)
        self._epoch = start + count if count is not None else start
        return EpochLoader(native, per_epoch, start, count)


def _label(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


class Iterator:
    """An iterator over one epoch, yielding dicts of numpy arrays.

    ``get_state()`` returns a JSON-serialisable dict; ``set_state(state)`` on an iterator of the
    same pipeline continues exactly there (a state of another pipeline is refused with
    :class:`StateError`).
    """

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    def __iter__(self) -> "Iterator":
        return self

    def __next__(self) -> Element:
        return self._native.__next__()

    @property
    def epoch(self) -> int:
        """The epoch this iterator runs."""
        return int(self._native.epoch)

    def get_state(self) -> Dict[str, Any]:
        """The position, as a JSON-serialisable dict."""
        return json.loads(self._native.get_state())

    def set_state(self, state: Union[Mapping[str, Any], str]) -> None:
        """Moves to a position from :meth:`get_state` (a dict or its JSON text)."""
        self._native.set_state(_state_text(state))


def _state_text(state: Union[Mapping[str, Any], str]) -> str:
    if isinstance(state, Mapping):
        return json.dumps(dict(state))
    if isinstance(state, str):
        return state
    raise StateError(f"a state is a dict from get_state(), got {type(state).__name__}")


class Epoch:
    """One epoch of an :class:`EpochLoader`: yields ``len(ds)`` elements (the rest of them for
    the epoch a restored loader resumes in)."""

    def __init__(self, it: Any, n: int, epoch: int, taken: int = 0) -> None:
        self._it = it
        self._left = n - taken
        self._n = n
        self._len = n - taken
        #: The epoch number.
        self.epoch = epoch

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> "Epoch":
        return self

    def __next__(self) -> Element:
        if self._left <= 0:
            raise StopIteration
        item = self._it.__next__()
        self._left -= 1
        return item

    def _drain(self) -> None:
        while self._left > 0:
            got = self._it.next_many(min(self._left, 64))
            if not got:
                break
            self._left -= len(got)


class EpochLoader:
    """Epochs from one prefetching iterator (see :meth:`Dataset.epochs`). Single pass;
    ``len()`` is the number of epochs still to come.

    ``get_state()`` / ``set_state()`` checkpoint it: the state names the epoch in progress, the
    elements of it already yielded, and the underlying iterator's exact position. A new loader of
    the same pipeline and ``epochs()`` arguments, given that state before it is iterated, yields
    first the rest of that epoch (as an :class:`Epoch` with ``epoch`` set), then the following
    epochs: exactly what the interrupted run had still to yield, unless it abandoned an epoch
    part-way (which a restored loader does not know, and finishes)."""

    _FORMAT = "stokehold-epochs"

    def __init__(self, native: Any, per_epoch: int, start: int, count: Optional[int]) -> None:
        self._native = native
        self._it: Any = None
        self._per_epoch = per_epoch
        self._start = start
        self._count = count
        self._next = start
        self._end = None if count is None else start + count
        self._current: Optional[Epoch] = None
        self._resume_taken = 0

    def __len__(self) -> int:
        if self._end is None:
            raise TypeError("this loader runs forever (epochs() without a count)")
        return self._end - self._next

    def __iter__(self) -> "EpochLoader":
        return self

    def get_state(self) -> Dict[str, Any]:
        """The position, as a JSON-serialisable dict."""
        cur = self._current
        if cur is not None and cur._left > 0:
            epoch, taken = cur.epoch, cur._n - cur._left
        else:
            epoch, taken = self._next, self._resume_taken
        it = None if self._it is None else json.loads(self._it.get_state())
        return {"format": self._FORMAT, "version": 1, "start": self._start, "count": self._count,
                "per_epoch": self._per_epoch, "epoch": epoch, "taken": taken, "iter": it}

    def set_state(self, state: Union[Mapping[str, Any], str]) -> None:
        """Moves a loader not yet iterated to a position from :meth:`get_state`."""
        st = json.loads(_state_text(state))
        if not isinstance(st, dict) or st.get("format") != self._FORMAT or st.get("version") != 1:
            raise StateError("not an epochs() loader state (format stokehold-epochs, version 1)")
        if self._it is not None or self._current is not None:
            raise StateError("set_state() on a loader that has started; make a new one")
        mine = (self._start, self._count, self._per_epoch)
        theirs = (st.get("start"), st.get("count"), st.get("per_epoch"))
        if mine != theirs:
            raise StateError(
                f"this state is of epochs(start, count, len) = {theirs}, this loader {mine}"
            )
        epoch, taken = int(st["epoch"]), int(st["taken"])
        if not (self._start <= epoch and (self._end is None or epoch <= self._end)
                and 0 <= taken <= self._per_epoch):
            raise StateError(f"epoch {epoch} / taken {taken} lies outside this loader")
        if st.get("iter") is not None:
            self._it = self._native.iter(0)
            self._it.set_state(json.dumps(st["iter"]))
        self._next, self._resume_taken = epoch, taken

    def __next__(self) -> Epoch:
        if self._current is not None:
            self._current._drain()
            self._current = None
        if self._end is not None and self._next >= self._end:
            raise StopIteration
        if self._it is None:
            self._it = self._native.iter(0)
        self._current = Epoch(self._it, self._per_epoch, self._next, self._resume_taken)
        self._resume_taken = 0
        self._next += 1
        return self._current
