"""Parallel execution and file sources: ``interleave``, ``flat_map``, ``zip``, ``concatenate``,
``sample_from_datasets``, ``list_files``, ``read_file`` / ``load_npy``, ``with_options`` (memory budget, cores, trace), ``stats()`` and
``trace()``.

    >>> import stokehold as sh
    >>> ds = sh.Dataset.range(8).map(lambda e: {"y": e["x"] * 2}, num_parallel_calls=sh.AUTOTUNE)
    >>> [int(e["y"]) for e in ds]
    [0, 2, 4, 6, 8, 10, 12, 14]

The methods are added to :class:`stokehold.Dataset` when this module is imported (by
``stokehold/__init__.py``); ``map(num_parallel_calls=...)`` and ``parallelize`` live in
``dataset.py``. Python functions run on worker threads and hold the GIL only while Python runs;
their exceptions reach the caller unchanged, with the op and element index in a note.
"""

import json
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from . import _native
from .dataset import AUTOTUNE, Dataset, _draw_seed, _label

__all__ = ["list_files", "sample_from_datasets", "zip", "concatenate"]


def _calls(n: Optional[int]) -> Optional[int]:
    if n is None:
        return None
    if n == AUTOTUNE:
        return -1
    if not isinstance(n, int) or n <= 0:
        raise ValueError(f"num_parallel_calls must be a positive int or AUTOTUNE, got {n!r}")
    return n


def _opener(fn: Callable[[Mapping[str, Any]], Dataset]) -> Callable[[Mapping[str, Any]], Any]:
    def open_(element):
        ds = fn(element)
        if not isinstance(ds, Dataset):
            raise TypeError(f"the interleave/flat_map function must return a stokehold.Dataset, "
                            f"got {type(ds).__name__}")
        return ds._native
    open_.__qualname__ = getattr(fn, "__qualname__", "fn")
    return open_


def interleave(self: Dataset, fn: Callable[[Mapping[str, Any]], Dataset], cycle_length: int = 4,
               block_length: int = 1, num_parallel_calls: Optional[int] = None,
               deterministic: bool = True, name: Optional[str] = None) -> Dataset:
    """tf.data's ``interleave``: ``fn(element)`` opens a dataset (say, of one file's records);
    ``cycle_length`` of them are read at once, ``block_length`` consecutive elements from each.
    The order is tf.data's. With ``num_parallel_calls`` the open inputs are read ahead on worker
    threads (same order when ``deterministic``)."""
    return Dataset(_native.interleave(self._native, _opener(fn), name or _label(fn), int(cycle_length),
                                      int(block_length), _calls(num_parallel_calls), bool(deterministic)))


def flat_map(self: Dataset, fn: Callable[[Mapping[str, Any]], Dataset], name: Optional[str] = None) -> Dataset:
    """The datasets ``fn`` opens for each element, one after the other."""
    return Dataset(_native.flat_map(self._native, _opener(fn), name or _label(fn)))


def concatenate(self: Dataset, other: Dataset) -> Dataset:
    """This dataset's elements, then ``other``'s (random access when both have it)."""
    return Dataset(_native.concatenate(self._native, other._native))


def zip(datasets: Union[Sequence[Dataset], Mapping[str, Dataset]]) -> Dataset:
    """Elements side by side, merged into one dict; ends with the shortest input. A mapping
    ``{"a": ds1, "b": ds2}`` prefixes the feature names (``"a/x"``); a list requires distinct
    names."""
    if isinstance(datasets, Mapping):
        prefixes = [f"{k}/" for k in datasets]
        items = list(datasets.values())
    else:
        items = list(datasets)
        prefixes = [""] * len(items)
    return Dataset(_native.zip([d._native for d in items], prefixes))


def sample_from_datasets(datasets: Sequence[Dataset], weights: Optional[Sequence[float]] = None,
                         seed: Optional[int] = None, stop_on_empty_dataset: bool = False) -> Dataset:
    """A weighted random mix, keyed by (seed, epoch, step). An exhausted input ends the mix when
    ``stop_on_empty_dataset``, otherwise it is dropped and the rest renormalised; the mix ends
    when no input with a positive weight remains (it never hangs)."""
    items = list(datasets)
    w = [1.0] * len(items) if weights is None else [float(x) for x in weights]
    s = _draw_seed() if seed is None else seed
    return Dataset(_native.sample_from_datasets([d._native for d in items], w, s, bool(stop_on_empty_dataset)))


def list_files(patterns: Union[str, Sequence[str]], shuffle: bool = True, seed: Optional[int] = None) -> Dataset:
    """Files matching the glob pattern(s), as feature ``"path"``: sorted, then (``shuffle``) a
    seeded permutation per epoch. A pattern matching nothing raises ``FileNotFoundError``.
    TFRecord ``.idx`` sidecars are left out where their file is listed too."""
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    s = (_draw_seed() if seed is None else seed) if shuffle else None
    return Dataset(_native.list_files(pats, s))


def read_file(self: Dataset, path: str = "path", out: str = "data") -> Dataset:
    """Reads the file named by feature ``path`` into bytes feature ``out`` (native, lazy)."""
    return Dataset(_native.read_file(self._native, path, out))


def load_npy(self: Dataset, path: str = "path", out: str = "array") -> Dataset:
    """Loads the ``.npy`` file named by feature ``path`` into feature ``out`` (native, lazy)."""
    return Dataset(_native.load_npy(self._native, path, out))


def with_options(self: Dataset, memory_budget: Optional[int] = None, cores: Optional[int] = None,
                 trace_events: int = 0) -> Dataset:
    """Runs the pipeline on its own executor: one thread pool for every epoch, a memory budget in
    bytes that every buffer respects (default 1 GiB), the cores AUTOTUNE may use (default: all),
    and ``trace_events`` recent events kept for :meth:`trace`."""
    return Dataset(_native.with_options(self._native, memory_budget, cores, int(trace_events)))


def stats(self: Dataset, as_table: bool = False) -> Any:
    """Per-stage statistics of this pipeline (the nearest ``with_options``, else the pipeline
    iterated most recently): elements/s, bytes/s, busy and waiting time, queue fill, parallelism,
    what AUTOTUNE chose and why, and a verdict. ``None`` before any parallel stage ran."""
    if as_table:
        return _native.stats_table(self._native)
    s = _native.stats_json(self._native)
    return None if s is None else json.loads(s)


def trace(self: Dataset, path: Optional[str] = None) -> Optional[str]:
    """The recorded window of activity as Chrome trace JSON (open in Perfetto or
    chrome://tracing); written to ``path`` if given. Needs ``with_options(trace_events=N)``."""
    t = _native.trace_json(self._native)
    if path is not None and t is not None:
        with open(path, "w") as f:
            f.write(t)
    return t


for _f in (interleave, flat_map, concatenate, read_file, load_npy, with_options, stats, trace):
    setattr(Dataset, _f.__name__, _f)
Dataset.zip = staticmethod(zip)
Dataset.sample_from_datasets = staticmethod(sample_from_datasets)
Dataset.list_files = staticmethod(list_files)
