"""The ``Dataset`` class: every op, declared here, over the Rust engine.

Elements are dicts of feature name to numpy array (or :class:`stokehold.Ragged` in batches of
variable-length features). Each op is one method: it checks and converts its arguments
(``_args``) and calls the native layer, where the semantics live. Sources (``from_arrays``,
``from_generator``, ``list_files``, ...) are in ``sources.py``, iterators in ``iterator.py``.
"""

from __future__ import annotations

import builtins
import itertools
import json
import operator
import os
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)
from typing import Iterator as PyIterator

import numpy as np

from . import _args, _native, _shard_io, audio, errors, image
from . import options as _options
from ._args import AUTOTUNE, INFINITE, UNKNOWN, PathLike, renamed
from ._native import OutOfRangeError
from ._optional import needs
from .iterator import EpochLoader, Iterator
from .monitor import Stats
from .monitor import headspace as _headspace
from .options import Options
from .processes import ProcessOptions, process_map
from .spec import SPEC_SAMPLE, ElementSpec, spec_of_sample

if TYPE_CHECKING:
    from .image import Size
    from .table import Table

__all__ = ["AUTOTUNE", "INFINITE", "UNKNOWN", "Dataset", "Element"]

#: One element: feature name -> numpy array (or :class:`stokehold.Ragged`).
Element = Dict[str, Any]
#: A map function: element -> new element (a dict).
MapFn = Callable[[Element], Mapping[str, Any]]
#: A padding value: converted to each feature's dtype exactly, as tf.data converts it (an int64
#: of 2**53 + 1 stays itself; 2.7 into an int feature, or a number into a bytes feature given by
#: name, is an :class:`InvalidArgumentError`).
PadValue = Union[int, float, bool, bytes, str]


class Dataset:
    """A pipeline of elements (dicts of numpy arrays), random access where the ops allow it.

    Build one with :func:`stokehold.from_arrays`, :func:`stokehold.from_generator`,
    :func:`stokehold.list_files`, :func:`stokehold.open_shards`, ... chain ops (each returns a new
    ``Dataset``) and iterate. Every ``for`` loop over the same ``Dataset`` object runs the next
    epoch (``epoch`` counts them), so shuffles and random crops draw anew each time, like
    tf.data's ``reshuffle_each_iteration``; ``iter(epoch=k)`` runs a given epoch. Randomness is
    keyed by (seed, epoch, index): the same seed gives the same elements whatever the thread
    count or prefetch depth.
    """

    def __init__(self, native: _native.Dataset, seed: Optional[int] = None) -> None:
        self._native = native
        self._epoch = 0
        self._spec: Optional[ElementSpec] = None
        self._seed = seed

    def _then(self, native: _native.Dataset) -> Dataset:
        """The next op's ``Dataset``, carrying this one's dataset seed (:meth:`seed`)."""
        return Dataset(native, self._seed)

    def _op_seed(self, op: str, seed: Optional[Any]) -> int:
        """The seed of random op ``op`` built on this dataset: its own ``seed`` when given, else
        one derived from the dataset seed (:meth:`seed`) by the op's kind and its place in the
        plan, else a fresh one from the OS."""
        if seed is not None or self._seed is None:
            return _args.seed(op, seed)
        return self._native.derived_seed(self._seed, op)

    def seed(self, seed: int) -> Dataset:
        """Sets the dataset seed (tf.data's global seed, Grain's ``seed()``): every random op
        built after it (``shuffle``, ``random_crop``, ``random_flip_left_right``,
        ``random_map``, ...) that is given no ``seed`` of its own derives one from it, by its kind
        and its place in the plan. So one seed makes the whole pipeline reproducible, two random
        ops draw independent numbers, and rebuilding the same pipeline gives the same draws. An
        op's explicit ``seed`` still wins; the same kind of op given the same explicit seed on
        two features draws the same numbers (an image and its mask flipped together).

            >>> import stokehold as sh
            >>> a = sh.Dataset.range(8).seed(7).shuffle().random_map(lambda e, rng: e)
            >>> b = sh.Dataset.range(8).seed(7).shuffle().random_map(lambda e, rng: e)
            >>> [int(e["x"]) for e in a] == [int(e["x"]) for e in b]
            True
        """
        return Dataset(self._native, _args.count("seed", "seed", seed, 0, _args.MAX_U64))

    @classmethod
    def _wrap(cls, native: _native.Dataset) -> Dataset:
        """Wraps a native dataset (for bindings that expose their own Rust datasets)."""
        return cls(native)

    # ---- sources (also module functions in stokehold.sources) ------------------------------

    @staticmethod
    def range(start: int, stop: Optional[int] = None, step: int = 1) -> Dataset:
        """The integers of Python's ``range(start, stop, step)`` as int64 scalar feature ``"x"``
        (tf.data's signature: ``range(5)``, ``range(2, 5)``, ``range(2, 10, 3)``,
        ``range(5, 0, -2)``; an empty range is an empty dataset). Random access: element ``i``
        is ``start + i * step``.

            >>> import stokehold as sh
            >>> [int(e["x"]) for e in sh.Dataset.range(2, 10, 3)]
            [2, 5, 8]
        """
        op = "range"
        if stop is None:  # range(n): tf.data's and Python's one-argument form
            first, last = 0, _int64(op, "start", start)
        else:
            first, last = _int64(op, "start", start), _int64(op, "stop", stop)
        by = _int64(op, "step", step)
        if by == 0:
            raise _args.fail(op, "step", by, "must not be 0")
        if first == 0 and by == 1:
            return Dataset(_native.Dataset.range(max(last, 0)))
        r = builtins.range(first, last, by)

        def at(e: Element) -> Mapping[str, Any]:
            return {"x": np.int64(r[int(e["x"])])}

        return Dataset(_native.Dataset.range(len(r))).map(at, name=f"range({first}, {last}, {by})")

    @staticmethod
    def counter(start: int = 0, step: int = 1) -> Dataset:
        """tf.data's ``counter``: the endless int64 feature ``"x"`` = ``start, start + step,
        ...`` (cardinality ``INFINITE``). Random access: element ``i`` is ``start + i * step``."""
        op = "counter"
        first = _int64(op, "start", start)
        by = _int64(op, "step", step)

        def at(i: int, e: Element) -> Mapping[str, Any]:
            return {"x": np.int64(first + i * by)}

        return Dataset.range(1).repeat().map_with_index(at, name=f"counter({first}, {by})")

    @staticmethod
    def random(seed: Optional[int] = None, rerandomize_each_iteration: Optional[bool] = None) -> Dataset:
        """tf.data's ``random``: an endless int64 feature ``"x"`` of pseudorandom values in
        ``[0, 2**32)``, as tf.data draws them (not the same numbers: element ``i`` comes from
        :func:`stokehold.keyed.element_rng` keyed by (seed, 0, ``i``)). Random access; every
        pass gives the same values, as tf.data's default does. ``seed=None`` draws a seed from
        the OS now.

        Raises:
            InvalidArgumentError: ``rerandomize_each_iteration=True``: an endless dataset has
                a single epoch here, so there is no next iteration to draw anew for; give each
                pass its own ``seed`` instead.
        """
        op = "random"
        s = _args.seed(op, seed)
        if rerandomize_each_iteration is not None and _args.flag(
                op, "rerandomize_each_iteration", rerandomize_each_iteration):
            raise _args.fail(op, "rerandomize_each_iteration", True,
                             "is not supported: an endless dataset has one epoch; give each pass its own seed")
        from .keyed import element_rng

        def draw(index: int, e: Element) -> Mapping[str, Any]:
            return {"x": np.int64(element_rng(s, 0, index).integers(0, 2**32))}

        return Dataset.range(1).repeat().map_with_index(draw, name=f"random(seed={s})")

    @staticmethod
    def from_tensors(element: Mapping[str, Any]) -> Dataset:
        """tf.data's ``from_tensors``: a dataset of the one element ``element`` (a dict of
        feature -> array or value), random access. ``from_tensor_slices`` slices instead."""
        if not isinstance(element, Mapping):
            raise _args.fail("from_tensors", "element", element,
                             "must be a dict of feature -> array (elements are dicts of named features)")
        cols = {k: [v] for k, v in element.items()}
        return Dataset(_native.Dataset.from_columns(_args.columns("from_tensors", cols)))

    @staticmethod
    def load(path: PathLike, element_spec: Optional[ElementSpec] = None) -> Dataset:
        """tf.data's ``Dataset.load``: the dataset :meth:`save` wrote to ``path``, read back
        as :func:`stokehold.open_shards` reads a shard folder (random access, checksums
        verified). With ``element_spec`` (e.g. the saved dataset's) the folder must hold
        exactly those features and dtypes.

        Raises:
            SchemaError: the features or dtypes differ from ``element_spec``.
        """
        ds = Dataset._wrap(_shard_io.open_native(path))
        if element_spec is not None:
            if not isinstance(element_spec, Mapping):
                raise _args.fail("load", "element_spec", element_spec, "must be a dict of feature -> TensorSpec")
            got = {k: s.dtype for k, s in ds.element_spec.items()}
            want = {k: getattr(s, "dtype", None) for k, s in element_spec.items()}
            if got != want:
                raise errors.SchemaError(f"load: {path!s} holds features {got}, element_spec says {want}")
        return ds

    @staticmethod
    def list_files(
        patterns: Union[PathLike, Sequence[PathLike]], shuffle: bool = True, seed: Optional[int] = None
    ) -> Dataset:
        """Files matching the glob pattern(s), as bytes feature ``"path"``: sorted, then (with
        ``shuffle``, the default, as in tf.data) a seeded permutation per epoch. Random access.
        A pattern matching nothing raises ``FileNotFoundError``; TFRecord ``.idx`` sidecars are
        left out where their file is listed too. Pass ``e["path"]`` to any path argument."""
        pats = _args.paths("list_files", "patterns", patterns)
        s = _args.seed("list_files", seed) if _args.flag("list_files", "shuffle", shuffle) else None
        return Dataset(_native.Dataset.list_files(pats, s))

    @staticmethod
    def zip(datasets: Union[Sequence[Dataset], Mapping[str, Dataset]]) -> Dataset:
        """Elements side by side, merged into one dict; ends with the shortest input. A mapping
        ``{"a": ds1, "b": ds2}`` prefixes the feature names (``"a/x"``); with a list the
        feature names must differ. Random access when every input has it."""
        if isinstance(datasets, Mapping):
            prefixes = [f"{_args.name('zip', 'datasets', k)}/" for k in datasets]
            items = list(datasets.values())
        else:
            items = list(datasets)
            prefixes = [""] * len(items)
        return Dataset(_native.Dataset.zip([_dataset("zip", d)._native for d in items], prefixes))

    @staticmethod
    def sample_from_datasets(
        datasets: Sequence[Dataset],
        weights: Optional[Sequence[float]] = None,
        seed: Optional[int] = None,
        stop_on_empty_dataset: bool = False,
        *,
        by: str = "elements",
        token_feature: str = "tokens",
    ) -> Dataset:
        """A weighted random mix, keyed by (seed, epoch, step). An exhausted input ends the mix
        when ``stop_on_empty_dataset``, otherwise it is dropped and the rest renormalised; the
        mix ends when no input with a positive weight remains (it never hangs).

        ``by="elements"`` (default): the weights are shares of the elements.
        ``by="tokens"``: shares of the tokens emitted, an element counting as the length of its
        ``token_feature`` along axis 0, or for a packed row (it has
        ``<token_feature>_segment_ids``) its non-padding positions. Each step draws, with the
        weights, among the inputs at or below their share, so every input's realised share
        stays within ``(inputs - 1) x longest element / tokens emitted`` of its weight; the
        iterator's state holds the token count of each input (``state["tokens"]`` of the mix).
        """
        op = "sample_from_datasets"
        items = [_dataset(op, d)._native for d in datasets]
        w = [1.0] * len(items) if weights is None else [float(x) for x in weights]
        s = _args.seed(op, seed)
        stop = _args.flag(op, "stop_on_empty_dataset", stop_on_empty_dataset)
        feature = _args.name(op, "token_feature", token_feature)
        return Dataset(_native.Dataset.sample_from_datasets(items, w, s, stop, by, feature))

    @staticmethod
    def choose_from_datasets(
        datasets: Sequence[Dataset], choice_dataset: Dataset, stop_on_empty_dataset: bool = True
    ) -> Dataset:
        """tf.data's ``choose_from_datasets``: for each element of ``choice_dataset`` (one
        scalar integer feature, any name) the next element of ``datasets[choice]``. A choice of
        an exhausted input ends the result when ``stop_on_empty_dataset`` (the default, as in
        tf.data), otherwise that choice is passed over; the result ends with ``choice_dataset``
        or when every input is exhausted. A stream (see :meth:`take_while` for its checkpoint).

        Raises:
            InvalidArgumentError: no datasets, a choice element that is not one scalar integer
                feature, or a choice out of ``0..len(datasets)``.
        """
        op = "choose_from_datasets"
        items = [_dataset(op, d) for d in datasets]
        if not items:
            raise _args.fail(op, "datasets", datasets, "needs at least one dataset")
        choices = _dataset(op, choice_dataset)
        stop = _args.flag(op, "stop_on_empty_dataset", stop_on_empty_dataset)

        def run(picks: Iterable[Element], epoch: int) -> Iterable[Mapping[str, Any]]:
            inputs = [d.iter(epoch=epoch) for d in items]
            done = [False] * len(items)
            for i, pick in enumerate(picks):
                k = _choice(op, i, pick, len(items))
                if not done[k]:
                    e = next(inputs[k], None)
                    if e is not None:
                        yield e
                        continue
                    done[k] = True
                if stop or all(done):
                    return

        return choices._stream(op, op, run)

    # ---- element-wise ops ------------------------------------------------------------------

    @renamed(fn="map_func")
    def map(
        self,
        map_func: MapFn,
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
        *,
        name: Optional[str] = None,
        processes: Union[bool, ProcessOptions] = False,
    ) -> Dataset:
        """Applies ``map_func`` to every element (tf.data's spelling; ``fn=`` is a deprecated
        alias).

        ``map_func`` receives a dict of numpy arrays and returns a dict (values: numpy arrays, Python
        scalars, bytes, :class:`Ragged`; a tuple is refused with a hint to name its parts). An
        exception raised by ``fn`` reaches the caller as itself, with a note naming the op and
        the element index. Numeric arrays of up to 1 KiB are copied on the way in and out (not
        a :class:`Ragged`'s parts); a larger C-contiguous result array is used without a copy, so
        ``fn`` must not write into it after returning it. Input arrays over the dataset's memory
        are read-only.

        ``fn`` may be called for elements nobody has taken yet: a :meth:`prefetch` after it runs
        ahead, into the next epoch too, once an epoch's last element is taken (see
        :meth:`prefetch`; ``with_options(warm_start=False)`` stops it at each epoch's end): a
        function with side effects (counting, logging) sees more calls than elements taken.

        Args:
            map_func: the function.
            num_parallel_calls: ``None`` (default): in the consumer's thread (or the prefetch
                thread), keeping random access. An int or ``AUTOTUNE``: on that many worker
                threads (Python functions share the GIL: this pays off when ``fn`` spends its
                time in numpy or other code that releases it; workers that would only trade the
                GIL take turns at ``fn`` instead, see ``docs/GUIDE.md`` section 2). Over a
                random-access dataset this is ``map(fn).parallelize(...)``, so ``epochs()``
                still works.
            deterministic: ``None`` (default) or True: keep the input order; False yields
                elements as they complete.
            name: label in ``describe()``, stats and errors (default: ``fn.__qualname__``).
            processes: ``True`` or a :class:`ProcessOptions`: run ``fn`` in
                ``num_parallel_calls`` worker processes (Python code then uses every core;
                elements travel through shared memory, ``fn`` is pickled once per worker). Same
                output, order and checkpoints as the thread map; see ``docs/PROCESSES.md``.
        """
        fn = _args.function("map", "map_func", map_func)
        label = name or _args.label(fn)
        # A Python function holds the GIL (AUTOTUNE starts it inline); one that hands elements
        # to worker processes waits with the GIL released.
        holds_gil = processes is False
        if not holds_gil:
            fn = process_map("map", fn, label, num_parallel_calls, processes)
        if num_parallel_calls is None:
            return self._then(self._native.map(fn, label, holds_gil))
        par = _args.parallelism("map", "num_parallel_calls", num_parallel_calls)
        det = True if deterministic is None else _args.flag("map", "deterministic", deterministic)
        return self._then(self._native.map_parallel(fn, label, par, det, holds_gil))

    @renamed(fn="map_func")
    def remote_map(
        self,
        map_func: MapFn,
        num_actors: int = 2,
        *,
        num_cpus_per_actor: float = 1.0,
        depth: int = 2,
        max_retries: int = 3,
        name: Optional[str] = None,
        elements_per_call: int = 8,
    ) -> Dataset:
        """``map(fn)`` with ``fn`` run on a pool of ``num_actors`` Ray actors (needs ``ray``:
        ``pip install stokehold[ray]``; uses the running Ray cluster, or starts a local one).

        The parallel map's worker threads queue their elements, which go to the actors through
        Ray's object store in groups of up to ``elements_per_call`` per Ray call, so order,
        determinism, checkpoints and the memory budget are the local parallel map's; an actor
        that dies is replaced and its group sent again (up to ``max_retries`` times), nothing
        lost or duplicated. ``fn`` must be picklable and pure per element. See ``docs/RAY.md``.

        Args:
            map_func: the function (element dict -> dict; ``fn=`` is a deprecated alias).
            num_actors: actors in the pool (default 2).
            num_cpus_per_actor: CPUs Ray reserves for each actor (default 1).
            depth: groups queued per actor (default 2: the next one waits while one computes).
            max_retries: times a group is re-sent after its actor died (default 3).
            name: label in ``describe()``, stats and errors (default ``remote(<fn>)``).
            elements_per_call: elements per Ray call at most (default 8: a Ray call's fixed
                cost is then small next to a millisecond function's; 1 for very slow ``fn``).
        """
        # Imported here: _ray_map imports Ray, which ``import stokehold`` never does.
        with needs("ray", "Dataset.remote_map"):
            from . import _ray_map

        return _ray_map.remote_map(self, map_func, num_actors=num_actors, num_cpus_per_actor=num_cpus_per_actor,
                                   depth=depth, max_retries=max_retries, name=name,
                                   elements_per_call=elements_per_call)

    def filter(self, predicate: Callable[[Element], Any], *, name: Optional[str] = None) -> Dataset:
        """Keeps the elements for which ``predicate(element)`` is true. The result is a stream
        (no ``len``, no indexing)."""
        predicate = _args.function("filter", "predicate", predicate)
        return self._then(self._native.filter(predicate, name or _args.label(predicate)))

    def take_while(self, predicate: Callable[[Element], Any], *, name: Optional[str] = None) -> Dataset:
        """tf.data's ``take_while``: the elements up to (not including) the first for which
        ``predicate(element)`` is false. A stream, run in Python over an iterator of the
        input: epoch ``e`` reads the input's epoch ``e`` (a shuffle under it reshuffles, as in
        tf.data). Its checkpoint counts the elements yielded, and a restore runs that epoch of
        the input again and skips them (as :func:`stokehold.from_generator` does), so resuming
        is exact when the input's epochs are (every stokehold op's are)."""
        op = "take_while"
        predicate = _args.function(op, "predicate", predicate)

        def run(elements: Iterable[Element], epoch: int) -> Iterable[Mapping[str, Any]]:
            for e in elements:
                if not predicate(e):
                    return
                yield e

        return self._stream(op, name or _args.label(predicate), run)

    def unique(self) -> Dataset:
        """tf.data's ``unique``: the elements whose value has not appeared before, in order of
        first appearance. The elements must have one feature (tf.data's rule: one component);
        values are equal when their shapes and contents are (a scalar, a vector, a ragged
        batch: any shape, as in tf.data; any dtype, where tf.data takes int32, int64 and strings
        only). A stream, checkpointed as :meth:`take_while` is.

        Raises:
            InvalidArgumentError: an element with several features (naming them), at the first
                such element.
        """
        op = "unique"

        def run(elements: Iterable[Element], epoch: int) -> Iterable[Mapping[str, Any]]:
            seen: set[Any] = set()
            for i, e in enumerate(elements):
                if len(e) != 1:
                    raise _native.InvalidArgumentError(
                        f"{op}: element {i} has features {sorted(e)}; unique needs one scalar feature")
                ((_, v),) = e.items()
                key = _value_key(v)
                if key not in seen:
                    seen.add(key)
                    yield e

        return self._stream(op, op, run)

    def scan(
        self,
        initial_state: Any,
        scan_func: Callable[[Any, Element], Tuple[Any, Mapping[str, Any]]],
        *,
        name: Optional[str] = None,
    ) -> Dataset:
        """tf.data's ``scan``: ``scan_func(state, element)`` returns ``(new_state,
        output_element)``; the outputs are the elements, the state starts as ``initial_state``
        (any Python value: a number, a dict of arrays...) at each epoch. A stream, checkpointed as
        :meth:`take_while` is: a restore runs the fold again from ``initial_state`` over the
        elements already yielded, so the state is exact when ``scan_func`` is deterministic.

        Raises:
            InvalidArgumentError: ``scan_func`` returned something other than a pair.
        """
        op = "scan"
        fn = _args.function(op, "scan_func", scan_func)

        def run(elements: Iterable[Element], epoch: int) -> Iterable[Mapping[str, Any]]:
            state = initial_state
            for i, e in enumerate(elements):
                got = fn(state, e)
                if not isinstance(got, tuple) or len(got) != 2:
                    raise _native.InvalidArgumentError(
                        f"{op}: scan_func returned {type(got).__name__} for element {i}; "
                        f"it must return (new_state, output_element)")
                state, out = got
                yield out

        return self._stream(op, name or _args.label(fn), run)

    def rejection_resample(
        self,
        class_func: Callable[[Element], Any],
        target_dist: Sequence[float],
        initial_dist: Optional[Sequence[float]] = None,
        seed: Optional[int] = None,
        name: Optional[str] = None,
        *,
        class_feature: str = "class",
    ) -> Dataset:
        """tf.data's ``rejection_resample``: resamples the elements so that their classes
        (``class_func(element)``, an int in ``0..len(target_dist)``) follow ``target_dist``.
        Each element comes out with its class added as int64 feature ``class_feature``
        (default ``"class"``; tf.data yields the pair ``(class, element)``).

        tf.data's algorithm, step for step: with ``initial_dist`` (the classes' distribution
        in the input) an element of class ``c`` is accepted with probability ``(r[c] - m) /
        (max(r) - m)``, ``r = target / initial`` and ``m = min(r)``, and each output is, with
        probability ``m``, the next element of a second pass over the input instead (so that
        few are rejected); ``m == 1`` passes every element, ``m == 0`` only filters. Without
        ``initial_dist`` it is estimated as it goes: class counts starting at 10 each, updated a
        batch of 32 elements at a time. Randomness is keyed by (seed, epoch, index), so a seed
        gives the same elements every time; ``seed=None`` draws one (or derives it from
        :meth:`seed`). A stream, run in Python (see :meth:`take_while` for its epochs and
        checkpoint).

        Raises:
            InvalidArgumentError: a distribution that is not a list of non-negative numbers,
                two of different lengths; when reached, a class that is not an int in
                ``0..len(target_dist)``, or an element that has ``class_feature`` already.
        """
        op = "rejection_resample"
        fn = _args.function(op, "class_func", class_func)
        target = _distribution(op, "target_dist", target_dist)
        initial = None if initial_dist is None else _distribution(op, "initial_dist", initial_dist)
        if initial is not None and len(initial) != len(target):
            raise _args.fail(op, "initial_dist", initial_dist,
                             f"has {len(initial)} classes; target_dist has {len(target)}")
        key = _args.name(op, "class_feature", class_feature)
        s = self._op_seed(op, seed)
        # two streams of their own, so that random_map(seed=s) and this op's draws differ
        accept_seed, mix_seed = (self._native.derived_seed(s, f"{op}/{use}") for use in ("accept", "mix"))
        from .keyed import element_rng

        def classed(i: int, e: Element) -> Tuple[int, Element]:
            c = fn(e)
            try:
                k = operator.index(c.item() if isinstance(c, np.ndarray) and c.ndim == 0 else c)
            except TypeError:
                raise _native.InvalidArgumentError(
                    f"{op}: class_func returned {c!r} for element {i}; it must return an int") from None
            if not 0 <= k < len(target):
                raise _native.InvalidArgumentError(
                    f"{op}: class_func returned {k} for element {i}; classes are 0..{len(target) - 1}")
            if key in e:
                raise _native.InvalidArgumentError(
                    f"{op}: element {i} has a feature {key!r} already; pass class_feature= another name")
            out = dict(e)
            out[key] = np.int64(k)
            return k, out

        def estimates(elements: Iterable[Element]) -> PyIterator[Tuple[np.ndarray, int, Element]]:
            """(estimated initial distribution, class, element) per element: tf.data's
            estimate, counts from 10 each, a batch of 32 classes at a time."""
            counts = np.full(len(target), 10, np.int64)
            it, i = builtins.iter(elements), 0
            while True:
                chunk = [classed(i + j, e) for j, e in zip(builtins.range(32), it)]
                if not chunk:
                    return
                for k, _ in chunk:
                    counts[k] += 1
                dist = (counts / counts.sum()).astype(np.float32)
                for k, e in chunk:
                    yield dist, k, e
                i += len(chunk)

        def filtered(elements: Iterable[Element], epoch: int) -> PyIterator[Element]:
            if initial is None:
                pairs: Iterable[Tuple[np.ndarray, int, Element]] = estimates(elements)
            else:
                pairs = ((initial, *classed(i, e)) for i, e in enumerate(elements))
            for i, (dist, k, e) in enumerate(pairs):
                accept, _ = _acceptance(dist, target)
                if element_rng(accept_seed, epoch, i).random() < accept[k]:
                    yield e

        def run(elements: Iterable[Element], epoch: int) -> Iterable[Mapping[str, Any]]:
            if initial is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    static = float(np.min(target / initial))
                if static == 1:
                    for i, e in enumerate(elements):
                        yield classed(i, e)[1]
                    return
                if static == 0:
                    yield from filtered(elements, epoch)
                    return
                weights: Iterable[float] = itertools.repeat(float(_acceptance(initial, target)[1]))
            else:
                weights = (float(_acceptance(d, target)[1]) for d, _, _ in estimates(self.iter(epoch=epoch)))
            original = (classed(i, e)[1] for i, e in enumerate(self.iter(epoch=epoch)))
            kept = filtered(elements, epoch)
            for j, m in enumerate(weights):  # sample_from_datasets([original, kept], (m, 1 - m))
                got: Optional[Element] = next(original if element_rng(mix_seed, epoch, j).random() < m else kept, None)
                if got is None:
                    return  # tf.data's stop_on_empty_dataset=True
                yield got

        return self._stream(op, name or _args.label(fn), run)

    def sparse_batch(self, batch_size: int, row_shape: Sequence[Optional[int]], name: Optional[str] = None) -> Dataset:
        """tf.data's ``sparse_batch``: batches of ``batch_size`` elements (the last may be
        smaller), each feature as the three parts of tf.data's ``SparseTensor``:
        ``<name>.indices`` (int64 ``[nnz, 1 + rank]``: batch row, then the position in the
        element), ``<name>.values`` (every value of every element, zeros included, in C order,
        element after element) and ``<name>.dense_shape`` (int64 ``[1 + rank]``: the batch's
        size, then ``row_shape`` with each ``None`` or ``-1`` axis the longest in the batch).
        Each element's feature must have rank ``len(row_shape)`` and fit in it. Keeps random
        access (built on :meth:`padded_batch`).

        Raises:
            InvalidArgumentError: a bad ``row_shape``; when reached, a feature of another rank or
                one larger than ``row_shape`` (naming feature, batch row and shape).
        """
        op = "sparse_batch"
        size = _args.count(op, "batch_size", batch_size, 1)
        if isinstance(row_shape, (str, bytes)) or not isinstance(row_shape, Sequence):
            raise _args.fail(op, "row_shape", row_shape, "must be a list of axis sizes (None or -1: the longest)")
        shape = [None if d is None or (not isinstance(d, bool) and _args._is_int(d) and d == -1)
                 else _args.count(op, "row_shape", d) for d in row_shape]

        def to_sparse(b: Element) -> Mapping[str, Any]:
            out: Dict[str, Any] = {}
            names = [k for k in b if not (k.endswith("_lengths") and k[:-8] in b and np.ndim(b[k[:-8]]) >= 2)]
            for k in names:
                a = np.asarray(b[k])
                rows = a.shape[0]
                if a.ndim - 1 != len(shape):
                    raise _native.InvalidArgumentError(
                        f"{op}: feature {k!r} has rank {a.ndim - 1}; row_shape {shape} has rank {len(shape)}")
                lens = np.asarray(b[f"{k}_lengths"]).reshape(rows, -1) if a.ndim >= 2 else np.zeros((rows, 0), np.int64)
                longest = [0] * len(shape)
                idx, vals = [], []
                for r in builtins.range(rows):
                    ln = tuple(int(x) for x in lens[r])
                    if any(w is not None and x > w for x, w in zip(ln, shape)):
                        raise _native.InvalidArgumentError(
                            f"{op}: feature {k!r} of batch row {r} has shape {ln}, larger than row_shape {shape}")
                    longest = [max(x, y) for x, y in zip(longest, ln)]
                    grid = np.indices(ln).reshape(len(ln), -1).T if ln else np.zeros((1, 0), np.int64)
                    idx.append(np.concatenate([np.full((len(grid), 1), r), grid], axis=1))
                    vals.append(a[r:r + 1][(builtins.slice(None), *(builtins.slice(0, x) for x in ln))].reshape(-1))
                out[f"{k}.indices"] = np.concatenate(idx).astype(np.int64)
                out[f"{k}.values"] = np.concatenate(vals)
                dense = [rows] + [w if w is not None else x for w, x in zip(shape, longest)]
                out[f"{k}.dense_shape"] = np.array(dense, np.int64)
            return out

        return self.padded_batch(size).map(to_sparse, name=name or f"{op}({size}, {shape})")

    def snapshot(
        self,
        path: PathLike,
        compression: Optional[str] = "AUTO",
        reader_func: Optional[Callable[..., Any]] = None,
        shard_func: Optional[Callable[..., Any]] = None,
        name: Optional[str] = None,
    ) -> Dataset:
        """tf.data's ``snapshot``: the first full pass writes this pipeline's elements under
        the folder ``path``, later passes (and later runs of the same pipeline) read them
        back. Each pipeline gets its own subfolder named by its fingerprint, so several can
        share ``path``, and a changed pipeline writes anew. Built on :meth:`cache` with a
        folder: a shard folder written atomically (the manifest last), so a pass that is
        interrupted (an iterator dropped early, a process killed) leaves nothing that reads as
        complete and the next pass writes it again. Every pass yields the input's first epoch
        (random ops before it are drawn once), as :meth:`cache` does.

        ``compression``: ``"AUTO"`` (default), ``None`` or ``""``: stored uncompressed (use
        :meth:`save` with ``compression="zstd"`` for a compressed copy). ``reader_func`` and
        ``shard_func`` must be ``None``: the snapshot is read in its written order (shuffle
        after it).

        Raises:
            InvalidArgumentError: another ``compression``, a ``reader_func`` or ``shard_func``.
        """
        op = "snapshot"
        folder = _args.path(op, "path", path)
        if compression is not None and str(compression).upper() not in ("AUTO", "", "NONE"):
            raise _args.fail(op, "compression", compression,
                             'is not supported: a snapshot is stored uncompressed ("AUTO", None or ""); '
                             'save(path, compression="zstd") writes a compressed copy')
        for arg, fn in (("reader_func", reader_func), ("shard_func", shard_func)):
            if fn is not None:
                raise _args.fail(op, arg, fn, "is not supported: a snapshot is read in its written order "
                                              "(shuffle after it); pass None")
        if name is not None:
            _args.name(op, "name", name)
        return self.cache(os.path.join(folder, f"snapshot-{self._native.fingerprint()}"))

    def _stream(
        self, op: str, label: str, run: Callable[[Iterable[Element], int], Iterable[Mapping[str, Any]]]
    ) -> Dataset:
        """A stream of what ``run`` yields over an iterator of this dataset's same epoch: the
        Python ops of tf.data that fold or stop (``take_while``, ``scan``, ``unique``,
        ``choose_from_datasets``, ``rejection_resample``). Epoch ``e`` of the result reads epoch
        ``e`` of the input (a shuffle under it reshuffles, as in tf.data). It is a
        ``from_generator`` source given the epoch, so its checkpoint is the count of elements
        yielded and a restore replays ``run`` over the same input epoch and skips them."""

        def factory(epoch: int) -> PyIterator[Mapping[str, Any]]:
            return builtins.iter(run(self.iter(epoch=epoch), epoch))

        return self._then(_native.Dataset.from_generator(factory, f"{op}[{label}]", with_epoch=True))

    @renamed(name="feature")
    def enumerate(self, feature: Union[str, int] = "index", start: int = 0) -> Dataset:
        """Adds the position within the epoch, counted from ``start`` (default 0, as tf.data's
        ``enumerate(start=)``), as int64 feature ``feature`` (default ``"index"``; ``name=`` is a
        deprecated alias: ``name`` labels an op everywhere else). tf.data's positional spelling
        ``enumerate(5)`` means ``start=5``. Keeps random access."""
        op = "enumerate"
        positional_start = not isinstance(feature, str) and not isinstance(start, bool) and start == 0
        # enumerate(5): tf.data's positional start
        key = _args.name(op, "feature", "index" if positional_start else feature)
        first = _int64(op, "start", feature if positional_start else start)
        counted = self._then(self._native.enumerate(key))
        if first == 0:
            return counted

        def shift(e: Element) -> Mapping[str, Any]:
            e[key] = np.int64(int(e[key]) + first)
            return e

        return counted.map(shift, name=f"enumerate(start={first})")

    def random_crop(
        self, feature: str, size: int, axis: int = 0, seed: Optional[int] = None, pad: bool = False
    ) -> Dataset:
        """A random window of ``size`` along ``axis`` (default 0; negative counts from the end)
        of ``feature`` (native, no Python per element); the offset is drawn from (seed, epoch,
        index). Decoded audio is ``[channels, frames]``: crop its time with ``axis=1`` or
        ``axis=-1`` (``axis=0`` after ``decode_audio(channels_first=False)``). An element shorter than ``size`` is a
        :class:`SchemaError` naming the element and the likely fix (a longer axis, or
        ``pad=True`` where padding fits in memory), or with ``pad=True`` is zero-padded at the
        end to ``size``; a padded element larger than the memory budget is an
        :class:`InvalidArgumentError` naming the op, the feature and the bytes.
        ``seed=None`` draws one now (see :meth:`shuffle`)."""
        op = "random_crop"
        return self._then(self._native.random_crop(
            _args.name(op, "feature", feature), _args.count(op, "size", size),
            _args.axis(op, "axis", axis), self._op_seed(op, seed), _args.flag(op, "pad", pad)))

    def pad_to(self, feature: str, length: int, axis: int = 0, value: PadValue = 0) -> Dataset:
        """Pads (with ``value``, default 0) or trims ``feature`` to exactly ``length`` along
        ``axis`` (default 0; negative counts from the end)."""
        op = "pad_to"
        return self._then(self._native.pad_to(
            _args.name(op, "feature", feature), _args.count(op, "length", length),
            _args.axis(op, "axis", axis), value))

    def cast(self, feature: str, dtype: Any) -> Dataset:
        """Casts ``feature`` to ``dtype`` (a numpy dtype or its name; C-style conversion:
        truncation toward zero, saturating float-to-int)."""
        return self._then(self._native.cast(_args.name("cast", "feature", feature), _args.dtype_name("cast", dtype)))

    @renamed(path="feature")
    def read_file(self, feature: str = "path", out: str = "data", *, on_error: str = "raise") -> Dataset:
        """Reads the file named by feature ``feature`` (default ``"path"``; ``path=`` is a
        deprecated alias) into bytes feature ``out`` (native, lazy:
        each file is read when its element is). ``on_error="skip"`` leaves out a file that
        cannot be read, counted in :meth:`skipped`."""
        op = "read_file"
        return self._then(self._native.read_file(
            _args.name(op, "feature", feature), _args.name(op, "out", out), errors.on_error(op, on_error)))

    @renamed(path="feature")
    def load_npy(self, feature: str = "path", out: str = "array", *, on_error: str = "raise") -> Dataset:
        """Loads the ``.npy`` file named by feature ``feature`` (default ``"path"``; ``path=`` is
        a deprecated alias) into feature ``out`` (native,
        lazy). ``on_error="skip"`` leaves out a missing or malformed file, counted in
        :meth:`skipped`."""
        op = "load_npy"
        return self._then(self._native.load_npy(
            _args.name(op, "feature", feature), _args.name(op, "out", out), errors.on_error(op, on_error)))

    def ignore_errors(self, log_warning: bool = False) -> Dataset:
        """tf.data's ``ignore_errors``: leaves out the elements whose computation failed (your
        function raised, a file is missing or corrupt), counted in :meth:`skipped`; with
        ``log_warning`` each is also written to stderr. Without it (or ``on_error="skip"``) an
        element's error is raised once and the next ``next()`` goes on after it (tf.data's
        rule); ``ignore_errors()`` leaves the same elements out without raising."""
        op = "ignore_errors"
        return self._then(self._native.ignore_errors(_args.flag(op, "log_warning", log_warning)))

    def skipped(self) -> errors.SkipLog:
        """What this pipeline's ``ignore_errors()`` and ``on_error="skip"`` ops left out so far:
        a :class:`~stokehold.errors.SkipLog` (``count``, and the first few in detail)."""
        return errors.SkipLog.from_native(self._native.skipped())

    def mix_stats(self) -> List[Dict[str, Any]]:
        """What each ``sample_from_datasets(by="tokens")`` in this pipeline realised, outermost
        first: its ``op`` (description), ``weights``, the ``tokens`` taken from each input and
        their ``shares``, as the iterator that last took an element (or was restored) saw them.
        Empty when nothing mixes by tokens."""
        mixes: List[Dict[str, Any]] = json.loads(self._native.mix_stats_json())
        return mixes

    # ---- audio (decoding and features in Rust, on the pipeline's threads; stokehold/audio.py) ----

    @renamed(sample_rate="resample_to")
    def decode_audio(
        self, feature: str = "audio", out: Optional[str] = None, *, dtype: str = "float32",
        channels_first: bool = True, mono: bool = False, resample_to: Optional[int] = None,
        offset: float = 0.0, duration: Optional[float] = None,
        random_window: Optional[float] = None, seed: Optional[int] = None,
        sample_rate_key: Optional[str] = "sample_rate", on_error: str = "raise",
        num_parallel_calls: Optional[int] = None, deterministic: Optional[bool] = None,
    ) -> Dataset:
        """Decodes the audio bytes in ``feature`` (WAV: PCM 8/16/24/32-bit, float 32/64; FLAC;
        MP3; Ogg Vorbis; the format is recognised from the bytes) into ``out`` (default: replace
        ``feature``), as tf.audio.decode_wav / torchaudio.load do. ``dtype``: ``"float32"``
        (in [-1, 1]) or ``"int16"``. Shape ``[channels, frames]``, or ``[frames, channels]`` with
        ``channels_first=False``. ``mono`` averages the channels; ``resample_to`` (a rate in
        Hz; ``sample_rate=`` is a deprecated alias) resamples (band-limited FFT resampler); the
        output rate goes into int64 feature ``sample_rate_key``. ``offset`` / ``duration``
        (seconds) decode only that window, seeking where the format allows; ``random_window``
        (seconds) decodes a window at an offset drawn
        from (``seed``, epoch, index), zero-padded at the end for shorter clips. A clip that does
        not decode raises :class:`DataCorruptionError` naming the element, the op and the byte
        offset, or with ``on_error="skip"`` is left out and counted in ``ds.skipped()``
        (``.count``, ``.first``). ``num_parallel_calls`` (threads, or AUTOTUNE) decodes on
        worker threads; ``deterministic`` as in :meth:`map` (``None`` or True: in input order,
        False: as they complete)."""
        return audio.decode(self, "decode_audio", feature, feature if out is None else out,
                            dtype=dtype, channels_first=channels_first, mono=mono,
                            resample_to=resample_to, offset=offset, duration=duration,
                            random_window=random_window, seed=seed,
                            sample_rate_key=sample_rate_key, on_error=on_error,
                            num_parallel_calls=num_parallel_calls, deterministic=deterministic)

    @renamed(path="feature", sample_rate="resample_to")
    def load_audio(
        self, feature: str = "path", out: str = "audio", *, dtype: str = "float32",
        channels_first: bool = True, mono: bool = False, resample_to: Optional[int] = None,
        offset: float = 0.0, duration: Optional[float] = None,
        random_window: Optional[float] = None, seed: Optional[int] = None,
        sample_rate_key: Optional[str] = "sample_rate", on_error: str = "raise",
        num_parallel_calls: Optional[int] = None, deterministic: Optional[bool] = None,
    ) -> Dataset:
        """Decodes the audio file named by feature ``feature`` (default ``"path"``; ``path=`` is
        a deprecated alias) into ``out``: :meth:`decode_audio`'s options, reading the file as the
        decoder asks (a window touches only its part of the file). Errors name the file, the
        element and the op."""
        return audio.decode(self, "load_audio", feature, out, dtype=dtype,
                            channels_first=channels_first, mono=mono, resample_to=resample_to,
                            offset=offset, duration=duration, random_window=random_window,
                            seed=seed, sample_rate_key=sample_rate_key, on_error=on_error,
                            num_parallel_calls=num_parallel_calls, deterministic=deterministic)

    def spectrogram(
        self, feature: str = "audio", out: str = "spectrogram", *, n_fft: int = 400,
        win_length: Optional[int] = None, hop_length: Optional[int] = None, power: float = 2.0,
        center: bool = True, pad_mode: str = "reflect", num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None, axis: int = -1,
    ) -> Dataset:
        """``|STFT|**power`` of ``feature`` (samples on its time axis ``axis``, default -1, the
        last: decoded audio's ``[channels, frames]``; ``axis=0`` for ``channels_first=False``'s
        ``[frames, channels]``; float32, float64 or int16 scaled by 1/32768) as float32
        ``[...other axes, n_fft // 2 + 1, frames]``, with
        torchaudio.transforms.Spectrogram's defaults: periodic Hann window of ``win_length``
        (default ``n_fft``), ``hop_length`` default ``win_length // 2``, ``center`` padding of
        ``n_fft // 2`` (``pad_mode`` ``"reflect"``, or ``"constant"`` zeros as librosa).
        ``num_parallel_calls`` and ``deterministic`` as in :meth:`decode_audio`."""
        return audio.spectrogram(self, feature, out, n_fft=n_fft, win_length=win_length,
                                 hop_length=hop_length, power=power, center=center,
                                 pad_mode=pad_mode, num_parallel_calls=num_parallel_calls,
                                 deterministic=deterministic, axis=axis)

    def mel_spectrogram(
        self, feature: str = "audio", out: str = "mel", *, sample_rate: int, n_fft: int = 400,
        win_length: Optional[int] = None, hop_length: Optional[int] = None, f_min: float = 0.0,
        f_max: Optional[float] = None, n_mels: int = 128, power: float = 2.0, center: bool = True,
        pad_mode: str = "reflect", mel_scale: str = "htk", norm: Optional[str] = None,
        log: bool = False, top_db: Optional[float] = None,
        num_parallel_calls: Optional[int] = None, deterministic: Optional[bool] = None,
        axis: int = -1,
    ) -> Dataset:
        """The mel spectrogram of ``feature`` (time on axis ``axis``, as in :meth:`spectrogram`)
        as float32 ``[...other axes, n_mels, frames]``:
        :meth:`spectrogram`'s STFT through triangular mel filters, with
        torchaudio.transforms.MelSpectrogram's defaults (``mel_scale="htk"``, ``norm=None``);
        ``mel_scale="slaney", norm="slaney", pad_mode="constant"`` gives librosa's. ``log=True``
        gives decibels, ``10 * log10(max(x, 1e-10))``, floored at ``max - top_db`` per channel
        when ``top_db`` is given (librosa.power_to_db, torchaudio's AmplitudeToDB).
        ``sample_rate`` is the audio's rate (the filters depend on it). ``num_parallel_calls``
        and ``deterministic`` as in :meth:`decode_audio`."""
        return audio.mel_spectrogram(self, feature, out, sample_rate=sample_rate, n_fft=n_fft,
                                     win_length=win_length, hop_length=hop_length, f_min=f_min,
                                     f_max=f_max, n_mels=n_mels, power=power, center=center,
                                     pad_mode=pad_mode, mel_scale=mel_scale, norm=norm, log=log,
                                     top_db=top_db, num_parallel_calls=num_parallel_calls,
                                     deterministic=deterministic, axis=axis)

    @renamed(output="out")
    def gather(
        self, table: Table, index_feature: str, out: str, *, keys: Optional[Any] = None
    ) -> Dataset:
        """Adds feature ``out`` (``output=`` is a deprecated alias): the rows of ``table`` at the indices in feature
        ``index_feature`` (a scalar or a batch of them), copied on the pipeline's threads. With
        ``keys`` (an array of the table's row keys) the feature holds keys, not row numbers. An
        index out of range (or an unknown key) is an :class:`OutOfRangeError` naming the
        element. See ``docs/TABLES.md``."""
        op = "gather"
        native = getattr(table, "_native", None)
        if native is None:
            raise TypeError(f"gather(table=...): expected a stokehold.Table, got {type(table).__name__}")
        return self._then(self._native.gather(native, _args.name(op, "index_feature", index_feature),
                                           _args.name(op, "out", out), keys))

    # ---- images: native decode and augmentation (docs/GUIDE.md, "Images") --------------------

    def decode_image(
        self,
        feature: str = "image",
        out: Optional[str] = None,
        *,
        channels: int = 3,
        dtype: str = "uint8",
        layout: str = "HWC",
        max_pixels: int = 178_956_970,
        on_error: str = "raise",
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
    ) -> Dataset:
        """Decodes the JPEG, PNG or WebP bytes in ``feature`` into an image array in ``out``
        (default: replaces ``feature``), natively on the pipeline's threads (tf's
        ``decode_image``, with no GIL held).

        Args:
            channels: 3 (default, RGB), 1 (gray), 4 (RGBA) or 0 (as in the file). Gray is
                replicated, alpha dropped (no compositing) or set opaque.
            dtype: ``"uint8"`` (default; 16-bit PNGs keep the high byte) or ``"uint16"``.
            layout: ``"HWC"`` (default) or ``"CHW"``; the other image ops take HWC.
            max_pixels: a header claiming more than this many pixels (or a zero side) is refused
                before anything is allocated (default: Pillow's limit, 178956970).
            on_error: ``"raise"`` (default): a bad image raises, naming the element, the feature
                and (when the element has a ``"path"``) the file. ``"skip"``: it is left out and
                counted in ``ds.skipped()`` (``.count``, ``.first``).
            num_parallel_calls: ``None`` (in the consumer's or prefetch thread) or a thread count
                / ``AUTOTUNE``, as in :meth:`map`.
            deterministic: ``None`` (default) or True: keep the input order; False: as they
                complete.
        """
        op = "decode_image"
        feature = _args.name(op, "feature", feature)
        out = feature if out is None else _args.name(op, "out", out)
        return self._then(self._native.decode_image(feature, out, **image.decode_args(
            op, channels=channels, dtype=dtype, layout=layout, max_pixels=max_pixels,
            on_error=on_error, num_parallel_calls=num_parallel_calls, deterministic=deterministic)))

    @renamed(path="feature")
    def load_image(
        self,
        feature: str = "path",
        out: str = "image",
        *,
        channels: int = 3,
        dtype: str = "uint8",
        layout: str = "HWC",
        max_pixels: int = 178_956_970,
        on_error: str = "raise",
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
    ) -> Dataset:
        """Reads the image file named by feature ``feature`` (default ``"path"``, as
        :func:`stokehold.list_files` makes; ``path=`` is a deprecated alias)
        and decodes it into ``out``; the arguments are :meth:`decode_image`'s, and errors name
        the file."""
        op = "load_image"
        return self._then(self._native.load_image(
            _args.name(op, "feature", feature), _args.name(op, "out", out), **image.decode_args(
                op, channels=channels, dtype=dtype, layout=layout, max_pixels=max_pixels,
                on_error=on_error, num_parallel_calls=num_parallel_calls,
                deterministic=deterministic)))

    def resize(self, size: Size, feature: str = "image", interpolation: str = "bilinear") -> Dataset:
        """Resizes the uint8 HWC image ``feature``: ``size`` (height, width) exactly, or an int
        for the shorter side (the other keeps the aspect ratio, as torchvision's ``Resize``).
        ``interpolation``: ``"bilinear"`` (default), ``"bicubic"``, ``"area"``, ``"nearest"``
        or ``"lanczos3"``; downscaling antialiases (as Pillow)."""
        op = "resize"
        h, w, shorter = image.size_arg(op, size)
        return self._then(self._native.image_resize(_args.name(op, "feature", feature), h, w, shorter,
                                                 interpolation))

    def center_crop(self, size: Size, feature: str = "image") -> Dataset:
        """The centre ``size`` (an int: square) of the HWC image ``feature``, zero-padded where the
        image is smaller (torchvision's ``CenterCrop``)."""
        op = "center_crop"
        h, w, _ = image.size_arg(op, size)
        return self._then(self._native.image_center_crop(_args.name(op, "feature", feature), h, w))

    def random_resized_crop(
        self,
        size: Size,
        feature: str = "image",
        scale: Tuple[float, float] = (0.08, 1.0),
        ratio: Tuple[float, float] = (3 / 4, 4 / 3),
        interpolation: str = "bilinear",
        seed: Optional[int] = None,
    ) -> Dataset:
        """torchvision's ``RandomResizedCrop``: a crop of area fraction uniform in ``scale`` and
        aspect ratio log-uniform in ``ratio`` (10 attempts, then the centred whole image clamped
        to ``ratio``), resized to ``size`` in one pass. Drawn from (seed, epoch, index);
        ``seed=None`` draws one now."""
        op = "random_resized_crop"
        h, w, _ = image.size_arg(op, size)
        return self._then(self._native.image_random_resized_crop(
            _args.name(op, "feature", feature), h, w, image.unit_range(op, "scale", scale, 1.0),
            image.unit_range(op, "ratio", ratio, None), interpolation,
            self._op_seed(op, seed)))

    def random_flip_left_right(self, feature: str = "image", p: float = 0.5, seed: Optional[int] = None) -> Dataset:
        """Mirrors the HWC image ``feature`` left-right with probability ``p`` (default 0.5),
        drawn from (seed, epoch, index) (tf.image's ``random_flip_left_right``)."""
        op = "random_flip_left_right"
        return self._then(self._native.image_random_flip(
            _args.name(op, "feature", feature), image.probability(op, p), self._op_seed(op, seed)))

    def color_jitter(
        self,
        brightness: float = 0.0,
        contrast: float = 0.0,
        saturation: float = 0.0,
        feature: str = "image",
        seed: Optional[int] = None,
    ) -> Dataset:
        """torchvision's ``ColorJitter`` without hue, on the uint8 RGB HWC image ``feature``: each
        non-zero strength ``v`` draws a factor uniform in ``[max(0, 1 - v), 1 + v]``; brightness
        scales, contrast blends with the image's mean gray, saturation with each pixel's gray,
        in a random order. Drawn from (seed, epoch, index)."""
        op = "color_jitter"
        b, c, s = (image.strength(op, n, v) for n, v in
                   (("brightness", brightness), ("contrast", contrast), ("saturation", saturation)))
        return self._then(self._native.image_color_jitter(_args.name(op, "feature", feature), b, c, s,
                                                       self._op_seed(op, seed)))

    def normalize(
        self, mean: Any, std: Any, feature: str = "image", layout: str = "HWC"
    ) -> Dataset:
        """The uint8 HWC image ``feature`` as float32 ``(x / 255 - mean) / std`` (torchvision's
        ``ToTensor`` + ``Normalize``); ``mean`` and ``std`` are one number or one per channel.
        ``layout="CHW"`` writes channels first, for torch."""
        op = "normalize"
        return self._then(self._native.image_normalize(
            _args.name(op, "feature", feature), image.per_channel(op, "mean", mean, False),
            image.per_channel(op, "std", std, True), layout))

    # ---- order: shuffles, repetition, slices -----------------------------------------------

    def shuffle(
        self,
        buffer_size: Optional[int] = None,
        seed: Optional[int] = None,
        reshuffle_each_iteration: bool = True,
    ) -> Dataset:
        """Shuffles, with tf.data's arguments: ``ds.shuffle(1000)`` is a buffer of 1000.

        Args:
            buffer_size: an int: a shuffle buffer of that many elements (any dataset; the result
                is a stream), except that over a random-access dataset a buffer of at least
                ``len(ds)`` is run as the global permutation below (a uniform shuffle either
                way, and random access is kept). ``None`` (default): the buffer-free global
                permutation of :meth:`global_shuffle`.
            seed: ``None`` draws one now from the OS, so this ``Dataset`` object is
                deterministic but another process gets another order (pass a seed to resume a
                saved iterator state elsewhere).
            reshuffle_each_iteration: a new order each epoch (default); False keeps epoch 0's
                order for every epoch.
        """
        op = "shuffle"
        if buffer_size is None:
            return self.global_shuffle(seed, reshuffle_each_iteration)
        size = _args.count(op, "buffer_size", buffer_size, 1)
        reshuffle = _args.flag(op, "reshuffle_each_iteration", reshuffle_each_iteration)
        n = self._native.cardinality() if self.is_random_access else None
        if n is not None and n != _native.INFINITE and size >= n:
            return self.global_shuffle(seed, reshuffle)
        return self._then(self._native.shuffle_buffer(size, self._op_seed(op, seed), reshuffle))

    def global_shuffle(self, seed: Optional[int] = None, reshuffle_each_iteration: bool = True) -> Dataset:
        """A seeded permutation of each epoch of a finite random-access dataset: no buffer, O(1)
        memory, random access kept, a checkpoint of a few integers. ``seed`` and
        ``reshuffle_each_iteration`` as in :meth:`shuffle`. A stream is refused: use
        ``shuffle(buffer_size)``."""
        op = "global_shuffle"
        reshuffle = _args.flag(op, "reshuffle_each_iteration", reshuffle_each_iteration)
        return self._then(self._native.shuffle(self._op_seed(op, seed), reshuffle))

    def window_shuffle(self, window: int, seed: Optional[int] = None) -> Dataset:
        """A cheaper, local shuffle: windows of ``window`` consecutive elements in random order,
        each shuffled inside. Over a folder written in order, a window of about one shard's
        records keeps reads within one or two shards. Keeps random access; O(1) memory."""
        op = "window_shuffle"
        return self._then(self._native.window_shuffle(_args.count(op, "window", window, 1), self._op_seed(op, seed)))

    def repeat(self, count: Optional[int] = None) -> Dataset:
        """Repeats ``count`` times (``None`` or any negative count, the default: forever). Each repetition is a
        new epoch of the input (reshuffled); keeps random access.

        ``ds.prefetch(n).repeat(k)`` is run as ``ds.repeat(k).prefetch(n)`` (same elements; the
        same for ``parallelize``): one prefetch thread then flows through every epoch instead of
        restarting at each one.
        """
        return self._then(self._native.repeat(_args.count_or_all("repeat", "count", count)))

    def take(self, count: int) -> Dataset:
        """The first ``count`` elements of each epoch (a negative count: all of them, as in
        tf.data). Over an endless input (``repeat()``) each epoch, and each pass of an outer
        ``repeat``, starts the input over, as tf.data restarts it."""
        c = _args.count_or_all("take", "count", count)
        return self._then(self._native) if c is None else self._then(self._native.take(c))

    def skip(self, count: int) -> Dataset:
        """All but the first ``count`` elements of each epoch (-1: skip all, as in tf.data)."""
        c = _args.count_or_all("skip", "count", count)
        return self._then(self._native.take(0) if c is None else self._native.skip(c))

    def slice(self, start: int, stop: int) -> Dataset:
        """Elements ``start..stop`` of each epoch (clamped); keeps random access (also
        ``ds[start:stop]``)."""
        return self._then(self._native.slice(_args.count("slice", "start", start), _args.count("slice", "stop", stop)))

    def shard(self, num_shards: int, index: int, policy: str = "even") -> Dataset:
        """Part ``index`` of ``num_shards`` of each epoch (one rank's share), strided: index
        arithmetic, random access kept.

        Args:
            num_shards: number of parts (ranks), > 0.
            index: this part, ``0 <= index < num_shards``.
            policy: when ``num_shards`` does not divide the epoch: ``"even"`` (default; an exact
                partition, parts differ by one element), ``"drop"`` (equal parts, the remainder
                is skipped) or ``"pad"`` (equal parts, short ones wrap to the epoch's start).
        """
        op = "shard"
        return self._then(self._native.shard(_args.count(op, "num_shards", num_shards, 1),
                                          _args.count(op, "index", index), policy, False))

    @renamed(world_size="num_shards", rank="index")
    def elastic_shard(self, num_shards: int, index: int, policy: str = "even") -> Dataset:
        """Like :meth:`shard` (tf.data's ``num_shards, index``; ``world_size=``/``rank=`` are
        deprecated aliases), but a state saved here restores on another world size with
        nothing of the epoch lost or repeated (all ranks must save at the same step; see
        ``docs/CHECKPOINTING.md``). The result is a stream. Over a stream (``pack``,
        ``sample_from_datasets``, ``filter`` ...) every rank runs the whole input and keeps
        every ``num_shards``-th element (the state holds the input's state at the prefix all
        ranks consumed); ``policy="pad"`` needs random access there."""
        op = "elastic_shard"
        return self._then(self._native.shard(_args.count(op, "num_shards", num_shards, 1),
                                          _args.count(op, "index", index), policy, True))

    @renamed(num_workers="num_shards", worker="index")
    def worker_split(self, num_shards: int, index: int) -> Dataset:
        """Worker ``index`` of ``num_shards`` inside one process (an exact, strided partition;
        :meth:`shard`'s spelling, ``num_workers=``/``worker=`` are deprecated aliases)."""
        op = "worker_split"
        return self._then(self._native.worker_split(_args.count(op, "num_shards", num_shards, 1),
                                                 _args.count(op, "index", index)))

    # ---- batching ----------------------------------------------------------------------------

    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
    ) -> Dataset:
        """Stacks ``batch_size`` elements into one: a dense array ``[batch, ...]`` per feature
        when shapes agree, a :class:`Ragged` when they differ only along axis 0. Keeps random
        access. ``num_parallel_calls`` (as in tf.data) builds batches on worker threads:
        ``batch(n).parallelize(num_parallel_calls)``."""
        op = "batch"
        out = self._then(self._native.batch(_args.count(op, "batch_size", batch_size, 1),
                                         _args.flag(op, "drop_remainder", drop_remainder)))
        if num_parallel_calls is None:
            return out
        det = True if deterministic is None else _args.flag(op, "deterministic", deterministic)
        return out.parallelize(_args.parallelism(op, "num_parallel_calls", num_parallel_calls), det)

    def padded_batch(
        self,
        batch_size: int,
        padded_shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None,
        padding_values: Union[None, PadValue, Mapping[str, PadValue]] = None,
        drop_remainder: bool = False,
    ) -> Dataset:
        """Batches with padding: each feature of rank >= 1 is padded to the longest element of
        the batch, or to a fixed shape, and a feature ``<name>_lengths`` (int64 ``[batch]`` for
        rank 1, ``[batch, rank]`` otherwise) gives the original shapes. A feature already named
        ``<name>_lengths`` is an error (rename it first).

        Args:
            batch_size: elements per batch (> 0).
            padded_shapes: feature -> shape; an axis given as ``None`` or ``-1`` pads to the
                longest in the batch (default for every feature and axis). An element larger
                than a fixed shape is a :class:`SchemaError`.
            padding_values: one value for every feature, or feature -> value (default: zero,
                ``b""`` for bytes). A value is converted to its feature's dtype exactly (see
                :data:`PadValue`); one value for every feature pads the features of its kind (a
                number the numeric ones, a byte string the bytes ones) and the others with zero.
            drop_remainder: drop a last, smaller batch (default False).
        """
        op = "padded_batch"
        shapes, values, default = _padding(op, padded_shapes, padding_values)
        return self._then(self._native.padded_batch(
            _args.count(op, "batch_size", batch_size, 1), _args.flag(op, "drop_remainder", drop_remainder),
            shapes, values, default))

    def unbatch(self) -> Dataset:
        """Splits each element along axis 0 into its rows (tf.data's ``unbatch``): the inverse
        of ``batch``; a :class:`Ragged` feature gives its rows."""
        return self._then(self._native.unbatch())

    def rebatch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """Batches of ``batch_size`` rows from batched elements: ``unbatch().batch(batch_size,
        drop_remainder)``."""
        op = "rebatch"
        return self._then(self._native.rebatch(_args.count(op, "batch_size", batch_size, 1),
                                            _args.flag(op, "drop_remainder", drop_remainder)))

    def window(
        self, size: int, shift: Optional[int] = None, stride: int = 1, drop_remainder: bool = False
    ) -> Dataset:
        """Sliding windows, each ONE element stacked as :meth:`batch` stacks (what tf.data's
        ``window(...).flat_map(lambda w: w.batch(size))`` gives). Window ``k`` holds input
        elements ``k * shift + j * stride`` for ``j < size``; ``shift`` defaults to ``size``; a
        last, partial window is kept unless ``drop_remainder``."""
        op = "window"
        sz = _args.count(op, "size", size, 1)
        sh = sz if shift is None else _args.count(op, "shift", shift, 1)
        return self._then(self._native.window(sz, sh, _args.count(op, "stride", stride, 1),
                                           _args.flag(op, "drop_remainder", drop_remainder)))

    def group_by_window(
        self,
        key_func: Callable[[Element], Any],
        reduce_func: Optional[Callable[[int, Dataset], Dataset]] = None,
        window_size: Optional[int] = None,
        window_size_func: Optional[Callable[[int], int]] = None,
        *,
        name: Optional[str] = None,
    ) -> Dataset:
        """tf.data's ``group_by_window``: elements go to groups by ``key_func(element)`` (an
        int); each time a group holds ``window_size`` elements they are emitted as one window,
        stacked as :meth:`batch` stacks them. At the end of the input the partial windows follow
        in ascending key order, as tf.data does. With ``reduce_func(key, window_dataset)``
        (returning a ``Dataset``) the windows are replaced by its elements, as in tf.data;
        without it each window is one element. ``window_size_func(key)`` (instead of
        ``window_size``, as in tf.data) gives each key's window size (> 0). A stream."""
        op = "group_by_window"
        key_func = _args.function(op, "key_func", key_func)
        if (window_size is None) == (window_size_func is None):
            raise _args.fail(op, "window_size", window_size, "give exactly one of window_size and window_size_func")
        size = 1 if window_size is None else _args.count(op, "window_size", window_size, 1)
        sizes = None if window_size_func is None else _args.function(op, "window_size_func", window_size_func)
        label = name or _args.label(key_func)
        if reduce_func is None:
            return self._then(self._native.group_by_window(key_func, size, label, None, sizes))
        reduce_func = _args.function(op, "reduce_func", reduce_func)
        key = "__stokehold_group_key__"
        windows = self._then(self._native.group_by_window(key_func, size, label, key, sizes))

        def reduce(window: Element) -> Dataset:
            k = int(np.asarray(window.pop(key)).reshape(-1)[0])
            columns = _args.columns("from_arrays", window)
            out: Dataset = reduce_func(k, Dataset._wrap(_native.Dataset.from_columns(columns)))
            return out

        reduce.__qualname__ = _args.label(reduce_func)
        return windows.flat_map(reduce)

    # ---- variable-length sequences and keyed Python maps (docs/GUIDE.md, "Variable lengths") --

    def bucket_by_sequence_length(
        self,
        element_length_func: Union[str, Callable[[Element], Any]],
        bucket_boundaries: Sequence[int],
        bucket_batch_sizes: Sequence[int],
        padded_shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None,
        padding_values: Union[None, PadValue, Mapping[str, PadValue]] = None,
        pad_to_bucket_boundary: bool = False,
        no_padding: bool = False,
        drop_remainder: bool = False,
        axis: int = 0,
    ) -> Dataset:
        """tf.data's ``bucket_by_sequence_length``: batches of similar lengths, each padded only
        to its own bucket, so short clips are not padded to the longest one in the dataset.

        An element of length ``L`` goes to bucket ``i`` where ``bucket_boundaries[i-1] <= L <
        bucket_boundaries[i]``; bucket ``i`` emits a batch (padded as :meth:`padded_batch` pads,
        ``<name>_lengths`` included) each time it holds ``bucket_batch_sizes[i]`` elements. At
        the end of the input the partial buckets follow in ascending bucket order, as tf.data
        does (unless ``drop_remainder``). A stream.

        Args:
            element_length_func: a feature name (its size along ``axis`` is the length) or a
                function ``element -> int``.
            bucket_boundaries: strictly increasing ints.
            bucket_batch_sizes: ``len(bucket_boundaries) + 1`` batch sizes.
            padded_shapes, padding_values: as in :meth:`padded_batch`.
            pad_to_bucket_boundary: pad bucket ``i`` to ``bucket_boundaries[i] - 1`` (the
                ``None`` axes of ``padded_shapes``, and the length axis of the length feature);
                an element of length ``>= bucket_boundaries[-1]`` is then an error.
            no_padding: batch as :meth:`batch` does (ragged when lengths differ).
            drop_remainder: drop the partial batches at the end of the input.
            axis: the length axis when ``element_length_func`` is a feature name.
        """
        op = "bucket_by_sequence_length"
        if isinstance(element_length_func, str):
            feature: Optional[str] = _args.name(op, "element_length_func", element_length_func)
            length_fn = None
            label = feature or ""
        else:
            feature = None
            length_fn = _args.function(op, "element_length_func", element_length_func)
            label = _args.label(length_fn)
        bounds = [_args.count(op, f"bucket_boundaries[{i}]", b, -(2**31)) for i, b in enumerate(bucket_boundaries)]
        sizes = [_args.count(op, f"bucket_batch_sizes[{i}]", b, 1) for i, b in enumerate(bucket_batch_sizes)]
        shapes, values, default = _padding(op, padded_shapes, padding_values)
        return self._then(self._native.bucket_by_sequence_length(
            feature, _args.count(op, "axis", axis), length_fn, label, bounds, sizes, shapes, values,
            default, _args.flag(op, "pad_to_bucket_boundary", pad_to_bucket_boundary),
            _args.flag(op, "no_padding", no_padding), _args.flag(op, "drop_remainder", drop_remainder)))

    def pack(
        self,
        length_struct: Mapping[str, int],
        num_packing_bins: Optional[int] = None,
        mode: str = "first_fit",
        meta_features: Sequence[str] = (),
        shuffle_bins: bool = False,
        seed: Optional[int] = None,
        cu_seqlens: bool = False,
    ) -> Dataset:
        """Packs variable-length sequences into rows of fixed length: Grain's
        ``FirstFitPackIterDataset`` (``mode="first_fit"``), ``BestFitPackIterDataset``
        (``mode="best_fit"``) and ``ConcatThenSplitIterDataset`` (``mode="concat_then_split"``,
        the language-model pretraining packing of torchtitan and MaxText).

        First-fit and best-fit: ``num_packing_bins`` rows are open at once; each element goes
        into the first row where all its features fit (first-fit) or the fullest such row
        (best-fit). When none fits, the open rows are emitted and new ones start with that
        element; the end of the input emits the rest. An element longer than its row is an
        error (truncate it first, e.g. ``tokenize(max_length=...)``).

        Concat-then-split (no ``num_packing_bins``): elements are joined in input order and
        cut into full rows; the part of a cut element that does not fit starts the next row, as
        a new segment whose positions start again at 0 (Grain's rule: no attention crosses a
        row). With one feature every row but the last is full. A meta feature is never cut (an
        element whose meta feature does not fit goes to the next row; each part of a cut element
        carries all of it). Append an EOS to each document with ``tokenize(eos_id=...)``.

        Each packed feature ``f`` comes out as ``[length_struct[f], ...]`` (zero padded) with
        ``f_segment_ids`` (int32, the elements of the row numbered from 1, 0 for padding),
        ``f_positions`` (int32, 0, 1, ... within each element) and, with ``cu_seqlens``,
        ``f_cu_seqlens`` (int32 ``[length_struct[f] + 1]``: the start of each non-empty segment,
        then of the padding if any, then the row length repeated, so that rows stack). For a
        batch ``[B, L]`` of rows flattened to ``B * L`` tokens,
        ``np.unique(cu + L * np.arange(B)[:, None])`` is flash-attention's varlen
        ``cu_seqlens`` (each row's padding is one sequence). Features not in ``length_struct``
        are dropped. A stream; its checkpoint re-reads at most one set of rows (concat-then-split:
        the cut element, whose input position and cut points are the whole carry-over).

        Args:
            length_struct: feature -> row length (the length of an element's feature is its size
                along axis 0; a scalar counts 1).
            num_packing_bins: first-fit / best-fit: rows open at once (more: less padding, more
                memory); required there, left out for concat-then-split.
            mode: ``"first_fit"``, ``"best_fit"`` or ``"concat_then_split"``.
            meta_features: features of ``length_struct`` packed without segment ids / positions.
            shuffle_bins: first-fit / best-fit: emit each set of rows in a random order keyed by
                (seed, epoch, rows emitted); Grain's default is True, with its own numpy draw.
            seed: the key of that order (``None``: drawn from the OS).
            cu_seqlens: also emit ``f_cu_seqlens`` for every feature with segment ids.
        """
        op = "pack"
        if not isinstance(length_struct, Mapping) or not length_struct:
            raise _args.fail(op, "length_struct", length_struct, "must be a non-empty dict of feature -> length")
        lengths = [(_args.name(op, "length_struct", k), _args.count(op, f"length_struct[{k!r}]", v, 1))
                   for k, v in length_struct.items()]
        meta = [_args.name(op, "meta_features", m) for m in meta_features]
        shuffle = _args.flag(op, "shuffle_bins", shuffle_bins)
        if mode == "concat_then_split":
            if num_packing_bins is not None or shuffle:
                arg, value = ("num_packing_bins", num_packing_bins) if num_packing_bins is not None \
                    else ("shuffle_bins", shuffle_bins)
                raise _args.fail(op, arg, value, "concat_then_split fills one row at a time; leave it out")
            bins = 1
        elif num_packing_bins is None:
            raise _args.fail(op, "num_packing_bins", None, f"{mode!r} packing needs the number of rows open at once")
        else:
            bins = _args.count(op, "num_packing_bins", num_packing_bins, 1)
        return self._then(self._native.pack(lengths, bins, mode, meta, shuffle,
                                            self._op_seed(op, seed) if shuffle else 0,
                                            _args.flag(op, "cu_seqlens", cu_seqlens)))

    def tokenize(
        self,
        feature: str,
        tokenizer: Any,
        out: Optional[str] = None,
        *,
        add_special_tokens: bool = True,
        bos_id: Optional[int] = None,
        eos_id: Optional[int] = None,
        max_length: Optional[int] = None,
        truncation_side: str = "right",
        dtype: str = "int32",
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
    ) -> Dataset:
        """Token ids of the UTF-8 text in ``feature`` (a bytes/str scalar: one document, or a
        1-D array of them: a batch) into ``out`` (default: replace ``feature``), with a
        Hugging Face tokenizer run natively (the Rust ``tokenizers`` crate) on the pipeline's
        threads, the GIL released. The ids are those of the Python ``tokenizers`` package's
        ``Tokenizer.encode(text, add_special_tokens=...)`` (the tokenizer's own normalizer,
        pre-tokenizer, post-processor, and its truncation and padding if the file sets them);
        ``bos_id`` / ``eos_id`` (default none) then go before / after each document's ids. A
        document gives ids ``[n]``; a batch a :class:`~stokehold.Ragged` ``[B, None]``.

        Args:
            feature: the text feature.
            tokenizer: a ``tokenizer.json``: its path, its JSON text (a str starting with
                ``{``), or a ``tokenizers.Tokenizer`` (anything with ``to_str()``).
            out: the ids' feature (default ``feature``).
            add_special_tokens: let the tokenizer's post-processor add its special tokens.
            bos_id, eos_id: ids put before / after each document (e.g. the EOS that
                ``pack(mode="concat_then_split")`` documents are joined with).
            max_length: the most ids per document, ``bos_id``, ``eos_id`` and the tokenizer's
                special tokens included (it must leave room for all of them); cut by the
                tokenizer's own truncation (Python's ``enable_truncation(max_length - bos - eos,
                direction=truncation_side)``), so an EOS is never cut off.
            truncation_side: ``"right"`` (keep the start) or ``"left"`` (keep the end).
            dtype: ``"int32"`` or ``"int64"``.
            num_parallel_calls: threads (or AUTOTUNE) to tokenize on; a batch's documents are
                encoded one after another on its thread (no second thread pool).
            deterministic: as in :meth:`map`.

        A file that is not a tokenizer.json raises :class:`InvalidArgumentError` naming it and
        what is wrong; text that is not UTF-8 names the element and the byte offset.
        """
        op = "tokenize"
        to_str = getattr(tokenizer, "to_str", None)
        if callable(to_str):
            source = to_str()
        elif isinstance(tokenizer, str) and tokenizer.lstrip().startswith("{"):
            source = tokenizer
        else:
            source = _args.path(op, "tokenizer", tokenizer)
        feature = _args.name(op, "feature", feature)
        ids = [None if v is None else _args.count(op, name, v, 0, 2**32 - 1)
               for name, v in (("bos_id", bos_id), ("eos_id", eos_id))]
        return self._then(self._native.tokenize(
            feature, source, feature if out is None else _args.name(op, "out", out),
            add_special_tokens=_args.flag(op, "add_special_tokens", add_special_tokens),
            bos_id=ids[0], eos_id=ids[1],
            max_length=None if max_length is None else _args.count(op, "max_length", max_length, 1),
            truncation_side=truncation_side, dtype=dtype,
            num_parallel_calls=None if num_parallel_calls is None
            else _args.parallelism(op, "num_parallel_calls", num_parallel_calls),
            deterministic=deterministic))

    @renamed(fn="map_func")
    def random_map(
        self,
        map_func: Callable[[Element, np.random.Generator], Mapping[str, Any]],
        seed: Optional[int] = None,
        *,
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
        name: Optional[str] = None,
        processes: Union[bool, ProcessOptions] = False,
    ) -> Dataset:
        """Grain's ``random_map``: ``map_func(element, rng)`` (``fn=`` is a deprecated alias)
        with ``rng`` a ``numpy.random.Generator``
        keyed by (seed, epoch, index), so augmentations draw the same numbers whatever the thread
        count, under :meth:`epochs` and after a checkpoint resume. ``index`` is the element's
        position within its epoch (for a stream input, its position in the stream); the key is
        :func:`stokehold.keyed.element_rng`'s. Other arguments as in :meth:`map` (with
        ``processes``, the same draws in worker processes as in threads); ``seed=None`` draws one
        from the OS now.
        """
        op = "random_map"
        fn = _args.function(op, "map_func", map_func)
        s = self._op_seed(op, seed)
        label = name or _args.label(fn)
        if processes is not False:
            from .processes import KeyedCall

            proc = process_map(op, KeyedCall(fn, s), label, num_parallel_calls, processes)
            return self._map_with_context(op, proc, label, num_parallel_calls, deterministic,
                                          holds_gil=False)
        from .keyed import element_rng

        def call(element: Element, index: int, epoch: int) -> Mapping[str, Any]:
            out: Mapping[str, Any] = fn(element, element_rng(s, epoch, index))
            return out

        return self._map_with_context(op, call, label, num_parallel_calls, deterministic)

    @renamed(fn="map_func")
    def map_with_index(
        self,
        map_func: Callable[[int, Element], Mapping[str, Any]],
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
        *,
        name: Optional[str] = None,
    ) -> Dataset:
        """Grain's ``map_with_index``: ``map_func(index, element)`` (``fn=`` is a deprecated
        alias), ``index`` the element's position
        within its epoch (for a stream input, its position in the stream). Other arguments as in
        :meth:`map`."""
        op = "map_with_index"
        fn = _args.function(op, "map_func", map_func)

        def call(element: Element, index: int, epoch: int) -> Mapping[str, Any]:
            out: Mapping[str, Any] = fn(index, element)
            return out

        return self._map_with_context(op, call, name or _args.label(fn), num_parallel_calls, deterministic)

    def _map_with_context(
        self,
        op: str,
        call: Callable[[Element, int, int], Mapping[str, Any]],
        label: str,
        num_parallel_calls: Optional[int],
        deterministic: Optional[bool],
        holds_gil: bool = True,
    ) -> Dataset:
        """:meth:`map`'s threading for a function of (element, index, epoch); ``holds_gil`` as
        in :meth:`map`."""
        if num_parallel_calls is None:
            return self._then(self._native.map_with_context(call, label, holds_gil))
        par = _args.parallelism(op, "num_parallel_calls", num_parallel_calls)
        det = True if deterministic is None else _args.flag(op, "deterministic", deterministic)
        return self._then(self._native.map_parallel_with_context(call, label, par, det, holds_gil))

    # ---- several inputs ----------------------------------------------------------------------

    def interleave(
        self,
        map_func: Callable[[Element], Dataset],
        cycle_length: int = AUTOTUNE,
        block_length: int = 1,
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
        *,
        name: Optional[str] = None,
    ) -> Dataset:
        """tf.data's ``interleave``: ``map_func(element)`` opens a dataset (say, of one file's
        records); ``cycle_length`` of them are read at once (``AUTOTUNE``, the default as in
        tf.data: the machine's cores), ``block_length`` consecutive elements from each, in
        tf.data's order. With ``num_parallel_calls`` (an int or ``AUTOTUNE``) the open inputs are
        read ahead on worker threads (same order when ``deterministic``, the default)."""
        op = "interleave"
        map_func = _args.function(op, "map_func", map_func)
        par = None if num_parallel_calls is None else _args.parallelism(op, "num_parallel_calls", num_parallel_calls)
        det = True if deterministic is None else _args.flag(op, "deterministic", deterministic)
        return self._then(self._native.interleave(
            _opener(op, map_func), name or _args.label(map_func),
            _args.parallelism(op, "cycle_length", cycle_length),
            _args.count(op, "block_length", block_length, 1), par, det))

    def flat_map(self, map_func: Callable[[Element], Dataset], *, name: Optional[str] = None) -> Dataset:
        """The datasets ``map_func`` opens for each element, one after the other (interleave
        with ``cycle_length=1``)."""
        map_func = _args.function("flat_map", "map_func", map_func)
        return self._then(self._native.flat_map(_opener("flat_map", map_func), name or _args.label(map_func)))

    def concatenate(self, dataset: Dataset) -> Dataset:
        """This dataset's elements, then ``dataset``'s (random access when both have it)."""
        return self._then(self._native.concatenate(_dataset("concatenate", dataset)._native))

    # ---- whole-dataset calls (tf.data's apply, reduce, get_single_element, save) ------------

    def apply(self, transformation_func: Callable[[Dataset], Dataset]) -> Dataset:
        """tf.data's ``apply``: ``transformation_func(self)``, which must return a ``Dataset``
        (for chaining a function of a whole dataset)."""
        op = "apply"
        fn = _args.function(op, "transformation_func", transformation_func)
        out = fn(self)
        if not isinstance(out, Dataset):
            raise _args.fail(op, "transformation_func", fn, f"returned {type(out).__name__}, not a Dataset")
        return out

    def reduce(self, initial_state: Any, reduce_func: Callable[[Any, Element], Any]) -> Any:
        """tf.data's ``reduce``: ``state = reduce_func(state, element)`` over one epoch (the
        next one, as a ``for`` loop), starting from ``initial_state``; returns the last state
        (``initial_state`` for an empty dataset). States are any Python value, e.g. a dict."""
        fn = _args.function("reduce", "reduce_func", reduce_func)
        state = initial_state
        for e in self:
            state = fn(state, e)
        return state

    def get_single_element(self) -> Element:
        """tf.data's ``get_single_element``: the one element of a dataset that has exactly one.

        Raises:
            InvalidArgumentError: the dataset is empty or has more than one element (the
                message gives the count, or "at least 2" for a stream).
        """
        it = iter(self)
        first = next(it, None)
        if first is None:
            raise _native.InvalidArgumentError("get_single_element: the dataset has 0 elements, needs exactly 1")
        if next(it, None) is not None:
            n = self.cardinality()
            count = str(n) if n >= 0 else "at least 2"
            raise _native.InvalidArgumentError(f"get_single_element: the dataset has {count} elements, needs exactly 1")
        return first

    def save(self, path: PathLike, compression: Optional[str] = None) -> None:
        """tf.data's ``save``: writes one epoch to the folder ``path`` as a shard folder
        (:func:`stokehold.write_shards`; ``compression``: ``None``, ``"lz4"`` or ``"zstd"``),
        read back by :meth:`Dataset.load` with the same features and dtypes. The write is
        atomic (the manifest last): an interrupted save leaves a folder that reads as
        incomplete, and saving again starts over (tf.data's ``checkpoint_args`` resume a save
        instead). A folder holding a saved dataset is refused (remove it first)."""
        _shard_io.write_native(self._native, path, op="save", compression=compression)

    # ---- execution -------------------------------------------------------------------------

    def parallelize(
        self, num_parallel_calls: int = AUTOTUNE, deterministic: Optional[bool] = None
    ) -> Dataset:
        """Runs the pipeline so far on worker threads (default ``AUTOTUNE``: chosen within the
        machine's cores). Over a random-access dataset each worker computes whole elements by
        index (fetch, crop, batch...), the fastest path; over a stream, workers take elements in
        turn. With ``deterministic`` ``None`` (default) or True the output is the same as without
        it; False yields elements as they complete."""
        par = _args.parallelism("parallelize", "num_parallel_calls", num_parallel_calls)
        det = True if deterministic is None else _args.flag("parallelize", "deterministic", deterministic)
        return self._then(self._native.parallelize(par, det))

    def prefetch(self, buffer_size: int = AUTOTUNE) -> Dataset:
        """Runs the pipeline on a background thread, ``buffer_size`` elements ahead (default
        ``AUTOTUNE``: the machine's cores, at least 2, deeper for small elements, as many as fit
        in 4 MiB, at most 64; results never depend on the depth). The
        thread lives as long as the iterator; with ``repeat()`` upstream it flows into the next
        epoch with nothing rebuilt (``ds.prefetch(n).repeat()`` is run as
        ``ds.repeat().prefetch(n)``). The result is a stream; see :meth:`epochs` for a loop over
        epochs with no stall at their boundaries.

        Over a finite random-access input, once the last element of an epoch is taken the
        thread goes on into the next epoch (the warm next epoch: the next ``for batch in ds``
        finds its first elements ready), so functions mapped before it run for about
        ``buffer_size`` more elements (AUTOTUNE: up to 64, plus any in flight in a parallel
        stage) than the epoch holds, results and states unchanged. ``with_options(warm_start=False)`` turns that off."""
        return self._then(self._native.prefetch(_args.depth("prefetch", "buffer_size", buffer_size)))

    @renamed(path="filename")
    def cache(self, filename: Optional[PathLike] = None) -> Dataset:
        """Caches the first pass; later epochs read the cache.

        Args:
            filename: (tf.data's spelling; ``path=`` is a deprecated alias) ``None``
                (default): in memory (one arena per feature, ragged where lengths
                differ). A folder: written as a shard folder during the first full pass
                (complete or absent, never half) and read by later epochs and later runs.

        Every epoch yields the input's epoch 0, so random ops before ``cache`` are drawn once.
        Put ``shuffle`` and ``parallelize`` after it: ``ds.map(f).cache().shuffle().batch(32)
        .parallelize()``.
        """
        return self._then(self._native.cache(
            None if filename is None else _args.path("cache", "filename", filename)))

    def with_options(
        self,
        options: Optional[Options] = None,
        memory_budget: Optional[int] = None,
        cores: Optional[int] = None,
        trace_events: int = 0,
        warm_start: bool = True,
    ) -> Dataset:
        """Runs the pipeline on its own executor: one thread pool for every epoch, a memory
        budget in bytes that every buffer respects (default 1 GiB), the cores AUTOTUNE may use
        (default: all), and ``trace_events`` recent events kept for :meth:`trace`.

        ``options``: tf.data's spelling, a :class:`stokehold.Options` (or a ``tf.data.Options``):
        ``options.autotune.ram_budget`` is ``memory_budget``, ``options.autotune.cpu_budget``
        and ``options.threading.private_threadpool_size`` are ``cores``; what each other field
        does is in :mod:`stokehold.options`. A keyword given here wins over the same setting in
        ``options``.

        ``warm_start`` (default True): a :meth:`prefetch` whose last element of an epoch was
        taken runs on into the next epoch (so that epoch's first batch is ready when a new
        ``for`` loop starts), calling your ``map`` functions for up to its buffer's depth of
        elements nobody has asked for yet; False stops every prefetch of this pipeline at the
        end of each epoch (each ``for`` loop then starts cold)."""
        op = "with_options"
        given = {"memory_budget": None, "cores": None} if options is None else _options.resolve(op, options)
        budget = given["memory_budget"] if memory_budget is None else _args.count(
            op, "memory_budget", memory_budget, 1)
        c = given["cores"] if cores is None else _args.threads(op, "cores", cores)
        events = _args.count(op, "trace_events", trace_events)
        warm = _args.flag(op, "warm_start", warm_start)
        return self._then(self._native.with_options(budget, c, events, warm))

    def stats(self, as_table: bool = False) -> Any:
        """Per-stage statistics of this pipeline, found through it (the nearest
        ``with_options``, else the executor its parallel stages last ran on): elements/s,
        bytes/s, busy and waiting time, per-element time and wait percentiles (p50/p90/p99),
        queue fill, parallelism, what AUTOTUNE chose and why; the training loop's ``steps`` (its
        time in ``next()`` and between calls, the share of its time it waited on input, tf.data's
        50 us rule); and a ``verdict`` naming the ``bottleneck`` stage and what to change. A
        :class:`stokehold.monitor.Stats` (a dict with ``.show()``, ``.to_html()``,
        ``.table()``), or printable text with ``as_table``. ``None`` before any parallel stage
        ran. A pipeline that mixes by tokens adds ``mixes`` (:meth:`mix_stats`: each mix's
        realised token shares). To watch a running job: :func:`stokehold.serve_stats` and
        ``stokehold top``."""
        if as_table:
            return self._native.stats_table()
        s = self._native.stats_json()
        if s is None:
            return None
        figures = json.loads(s)
        mixes = self.mix_stats()
        if mixes:  # sample_from_datasets(by="tokens"): the realised token shares
            figures["mixes"] = mixes
        return Stats(figures, self._native)

    def headspace(self, count: int = 10_000) -> Dict[str, float]:
        """The live rate of the first ``count`` elements and the rate of replaying them from
        memory (the most a consumer could take), and their ratio: see
        :func:`stokehold.monitor.headspace`."""
        return _headspace(self, count)

    @renamed(path="filename")
    def trace(self, filename: Optional[PathLike] = None) -> Optional[str]:
        """The recorded window of activity as Chrome trace JSON (open it in Perfetto or
        chrome://tracing); also written to ``filename`` if given (``path=`` is a deprecated
        alias). Needs ``with_options(trace_events=N)``."""
        t: Optional[str] = self._native.trace_json()
        if filename is not None and t is not None:
            with open(_args.path("trace", "filename", filename), "w") as f:
                f.write(t)
        return t

    # ---- inspection ------------------------------------------------------------------------

    @property
    def is_random_access(self) -> bool:
        """True when ``len()`` and ``ds[i]`` are available (no filter, buffer shuffle or
        prefetch in the pipeline)."""
        return bool(self._native.is_random_access)

    @property
    def element_spec(self) -> ElementSpec:
        """Feature name -> :class:`TensorSpec` / :class:`RaggedSpec` (shape and dtype), read
        from a sample of epoch 0's elements, computed once for this (tf.data infers it without
        running): up to 8 (:data:`stokehold.spec.SPEC_SAMPLE`), the first 7 and, where the
        dataset has random access and a finite length, the last. An axis whose length differs
        between them is ``None``, as in tf.data: images of varying size give ``(None, None,
        3)``, and ``batch(4)`` of 10 elements ``(None, ...)`` (its last batch holds 2); an axis
        that varies only in elements not read keeps the length read. An empty dataset raises
        :class:`OutOfRangeError`."""
        if self._spec is None:
            k = SPEC_SAMPLE
            if self.is_random_access:
                n = self._length()
                idx = list(range(k)) if n == _native.INFINITE else sorted({*range(min(n, k - 1)), n - 1})
                sample: List[Element] = [self._native.get(i) for i in idx if i >= 0]
            else:
                sample = list(itertools.islice(self._native.iter(0), k))
            spec = spec_of_sample(sample)
            if spec is None:
                raise OutOfRangeError(f"element_spec: the dataset is empty ({self.describe()})")
            self._spec = spec
        return self._spec

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
            raise TypeError(f"the length of this dataset is not known without iterating it "
                            f"({self.describe()}); cardinality() returns UNKNOWN")
        if n == _native.INFINITE:
            raise TypeError(f"this dataset is infinite ({self.describe()}); cardinality() returns INFINITE")
        return int(n)

    def __bool__(self) -> bool:
        # Defined so that `if ds:` does not call __len__ (which raises for streams).
        return True

    @overload
    def __getitem__(self, index: int) -> Element: ...

    @overload
    def __getitem__(self, index: builtins.slice) -> Dataset: ...

    def __getitem__(self, index: Union[int, builtins.slice]) -> Union[Element, Dataset]:
        """Element ``index`` (negative counts from the end) of a random-access dataset; with a
        slice, ``ds[start:stop]``, the dataset of those elements of each epoch (random access
        kept, nothing read; a step other than 1 is refused: use ``shard``).

        Raises:
            TypeError: the dataset is a stream, or the index is not an int or a slice.
            ValueError: a slice with a step, or counting from the end of an infinite dataset.
            OutOfRangeError: (an IndexError) the index is out of range.
        """
        self._random_access("ds[...]")
        if isinstance(index, builtins.slice):
            n = self._length()
            if index.step not in (None, 1):
                raise ValueError(f"ds[{index.start}:{index.stop}:{index.step}]: only a step of 1; "
                                 f"for every k-th element use shard(k, index)")
            if n == _native.INFINITE and (index.stop is None or min(index.start or 0, index.stop) < 0):
                raise ValueError("a slice of an infinite dataset needs a non-negative start and stop")
            start, stop, _ = index.indices(n)
            return self.slice(start, max(start, stop))
        got: Element = self._native.get(self._from_end([operator.index(index)])[0])
        return got

    def get_batch(self, indices: Iterable[int]) -> Element:
        """Elements ``indices`` (any order, repeats allowed, negative counts from the end) of a
        random-access dataset, stacked as ``batch`` stacks them: the fast way to read at random
        (a shard folder reads a batch's records with their cache misses overlapped).

        Raises:
            TypeError: the dataset is a stream.
            OutOfRangeError: (an IndexError) an index is out of range.
        """
        self._random_access("get_batch")
        idx = [operator.index(i) for i in np.asarray(indices).reshape(-1).tolist()]
        got: Element = self._native.get_batch(self._from_end(idx))
        return got

    def _random_access(self, op: str) -> None:
        if not self.is_random_access:
            raise TypeError(f"{op}: this dataset is a stream and has no random access "
                            f"({self.describe()}); index it before filter / shuffle(buffer_size) / prefetch")

    def _length(self) -> int:
        """The native length of a random-access dataset (``_native.INFINITE`` if endless)."""
        n = self._native.cardinality()
        assert n is not None, "a random-access dataset always has a length"
        return n

    def _from_end(self, indices: List[int]) -> List[int]:
        """``indices`` with negative ones counted from the end (an error where that is not
        possible); non-negative ones are checked by the native side."""
        if all(i >= 0 for i in indices):
            return indices
        n = self._length()
        if n == _native.INFINITE:
            raise OutOfRangeError(f"negative index {min(indices)} into an infinite dataset")
        out = [i + n if i < 0 else i for i in indices]
        if min(out) < 0:
            raise OutOfRangeError(f"index {min(indices)} out of range for a dataset of length {n}")
        return out

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
        self._epoch = _args.count("epoch", "epoch", value)

    def __iter__(self) -> Iterator:
        return self.iter()

    def iter(self, epoch: Optional[int] = None) -> Iterator:
        """An iterator over one epoch: ``None`` (default), the next epoch of this object
        (advances :attr:`epoch`); an int, that epoch (:attr:`epoch` is left as it is)."""
        if epoch is None:
            epoch = self._epoch
            self._epoch += 1
        return Iterator(self._native, _args.count("iter", "epoch", epoch, 0, _args.MAX_U64))

    def as_numpy_iterator(self) -> Iterator:
        """Same as ``iter(ds)`` (elements are already numpy); for code written for tf.data."""
        return self.iter()

    def epochs(self, count: Optional[int] = None, buffer_size: Optional[int] = None) -> EpochLoader:
        """Iterates ``count`` epochs (default: forever) through ONE prefetching iterator.

        ``for ep in ds.epochs(5): for batch in ep: ...``: a single background thread runs
        across epoch boundaries, so the first batch of epoch k+1 is ready when the last of epoch
        k is consumed (a plain ``for`` loop per epoch starts a new prefetch thread each time).
        Each ``ep`` yields exactly ``len(ds)`` elements; leaving one early skips the rest of it.
        Epochs are the same as ``iter(epoch=k)`` would give, starting at :attr:`epoch` (which
        advances by ``count``). Needs a finite random-access pipeline; trailing
        ``parallelize()`` / ``prefetch(n)`` stages are looked through and kept (a prefetch of
        depth 2 is added when there is none); ``buffer_size`` replaces the prefetch depth.
        Running ahead is the point: functions mapped in the pipeline run for the first
        elements of epoch k+1 while epoch k is consumed (not past the last of ``count``).

        A stream (TFRecord files read in order, a filter, a buffer shuffle...) has epochs too,
        as tf.data's ``repeat()`` gives them: each is a fresh pass, ``iter(epoch=k)``, whose
        length is known only at its end (``len(ep)`` raises ``TypeError``), with the same
        ``get_state()`` / ``set_state()``; its prefetch starts with the pass (no running ahead
        across the boundary: where the pass ends is not known before), ``buffer_size`` adds a
        prefetch of that depth. An endless pipeline (``repeat()``) is refused.
        """
        c = None if count is None else _args.count("epochs", "count", count)
        depth = None if buffer_size is None else _args.count("epochs", "buffer_size", buffer_size, 1)
        start = self._epoch
        if self._native.epochs_by_index():
            loader = EpochLoader(self._native.epochs(start, c, depth))
        else:
            if self._native.cardinality() == _native.INFINITE:
                raise _native.InvalidArgumentError(f"epochs() needs a finite dataset (no repeat()), and "
                                                   f"{self._native.describe()} is endless")
            from ._stream_epochs import StreamEpochLoader

            loader = StreamEpochLoader(self if depth is None else self.prefetch(depth), start, c)
        self._epoch = start + c if c is not None else start
        return loader


def _padding(
    op: str,
    padded_shapes: Optional[Mapping[str, Sequence[Optional[int]]]],
    padding_values: Union[None, PadValue, Mapping[str, PadValue]],
) -> Tuple[Dict[str, List[Optional[int]]], Dict[str, PadValue], Optional[PadValue]]:
    """``padded_batch``'s padding arguments as the native layer takes them: shapes (``None`` or
    -1: pad to the longest), values per feature, and the value for the rest (the values are
    converted, exactly, by the native layer)."""
    shapes: Dict[str, List[Optional[int]]] = {}
    if padded_shapes is not None:
        if not isinstance(padded_shapes, Mapping):
            raise _args.fail(op, "padded_shapes", padded_shapes, "must be a dict of feature -> shape")
        for k, shape in padded_shapes.items():
            arg = f"padded_shapes[{k!r}]"
            shapes[str(k)] = [None if d is None or d == -1 else _args.count(op, arg, d) for d in shape]
    if isinstance(padding_values, Mapping):
        return shapes, {str(k): v for k, v in padding_values.items()}, None
    return shapes, {}, padding_values


def _value_key(v: Any) -> Any:
    """A hashable key equal for equal values: dtype, shape and contents (a Ragged's rows)."""
    if hasattr(v, "to_list") and not isinstance(v, np.ndarray):
        return ("ragged", tuple(_value_key(r) for r in v.to_list()))
    a = np.asarray(v)
    if a.dtype.kind == "O":
        return (a.shape, tuple(a.reshape(-1).tolist()))
    return (a.dtype.str, a.shape, a.tobytes())


def _distribution(op: str, arg: str, value: Any) -> np.ndarray:
    """A class distribution: a non-empty list of numbers >= 0, as float32 (tf.data's)."""
    try:
        d = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise _args.fail(op, arg, value, "must be a list of numbers, one per class") from None
    if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)) or np.any(d < 0):
        raise _args.fail(op, arg, value, "must be a non-empty list of finite numbers >= 0, one per class")
    return d.astype(np.float32)


def _acceptance(initial: np.ndarray, target: np.ndarray) -> Tuple[np.ndarray, np.float32]:
    """tf.data's ``_calculate_acceptance_probs_with_mixing``: each class's acceptance
    probability and the probability of taking an element unfiltered (float32, as there)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = target / (initial + np.finfo(np.float32).tiny)
        m = ratio.min()
        return ((ratio - m) / (ratio.max() - m)).astype(np.float32), m


def _dataset(op: str, value: Any) -> Dataset:
    if not isinstance(value, Dataset):
        raise TypeError(f"{op}: expected a stokehold.Dataset, got {type(value).__name__}")
    return value


def _int64(op: str, arg: str, value: Any) -> int:
    """An int that fits int64, the dtype of the counts tf.data's sources yield (a count's upper
    bound, :data:`_args.MAX_COUNT`, is int64's)."""
    return _args.count(op, arg, value, -(2**63))


def _choice(op: str, i: int, pick: Element, n: int) -> int:
    """Element ``i`` of a choice dataset as an index into ``n`` datasets (tf.data's rule)."""
    if len(pick) != 1:
        raise _native.InvalidArgumentError(f"{op}: choice element {i} has features {sorted(pick)}; "
                                           f"choice_dataset needs one scalar integer feature")
    ((k, v),) = pick.items()
    a = np.asarray(v)
    if a.ndim != 0 or a.dtype.kind not in "iu":
        raise _native.InvalidArgumentError(f"{op}: choice feature {k!r} of element {i} is {a.dtype} "
                                           f"of shape {a.shape}; it must be a scalar integer")
    c = int(a)
    if not 0 <= c < n:
        raise _native.InvalidArgumentError(f"{op}: choice element {i} is {c}, outside 0..{n - 1} "
                                           f"(there are {n} datasets)")
    return c


def _opener(op: str, fn: Callable[[Element], Dataset]) -> Callable[[Element], Any]:
    """``fn`` returning the native dataset of the ``Dataset`` it opens (checked)."""

    def open_(element: Element) -> Any:
        ds = fn(element)
        if not isinstance(ds, Dataset):
            raise TypeError(f"{op}: the function must return a stokehold.Dataset, got {type(ds).__name__}")
        return ds._native

    open_.__qualname__ = _args.label(fn)
    return open_
