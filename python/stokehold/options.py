"""tf.data's ``Options`` for :meth:`stokehold.Dataset.with_options`: the same attribute paths
(``options.autotune.ram_budget = ...``), read as far as stokehold has a meaning for each.

What each field does here (GUIDE, "tf.data habits", says the same):

* ``autotune.ram_budget``: the memory budget in bytes (``with_options(memory_budget=)``).
* ``autotune.cpu_budget`` and ``threading.private_threadpool_size``: the cores AUTOTUNE may
  use (``with_options(cores=)``; both given: the smaller).
* ``autotune.enabled = False``: refused (stokehold has no switch that turns AUTOTUNE off; give
  ``num_parallel_calls`` a number instead).
* ``deterministic``: ``True`` / ``None`` is what stokehold does; ``False`` is accepted and
  changes nothing (tf.data then *may* reorder; per op, ``deterministic=False`` does reorder).
* Everything else (``threading.max_intra_op_parallelism``, the other ``autotune`` fields,
  ``experimental_optimization.*``, ``experimental_distribute.*``, ``experimental_slack``,
  ``experimental_warm_start``, ``experimental_external_state_policy``,
  ``experimental_symbolic_checkpoint``, ``dataset_name``, ``framework_type``) is accepted and
  has no effect: stokehold plans its own fusions, runs no TensorFlow kernels and has no
  distribution strategy.

A ``tf.data.Options`` object is read the same way (by attribute), so code written for tf.data
can pass its own.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import _args

__all__ = ["AutotuneOptions", "DistributeOptions", "OptimizationOptions", "Options", "ThreadingOptions"]


class _Fields:
    """Attributes fixed by ``__slots__`` (a misspelt one raises ``AttributeError``, as in
    tf.data), each ``None`` until set."""

    __slots__: tuple[str, ...] = ()

    def __init__(self) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, None)

    def __repr__(self) -> str:
        set_ = {n: getattr(self, n) for n in self.__slots__ if getattr(self, n) is not None}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in set_.items())})"


class ThreadingOptions(_Fields):
    """tf.data's ``options.threading``."""

    __slots__ = ("max_intra_op_parallelism", "private_threadpool_size")
    max_intra_op_parallelism: Optional[int]
    private_threadpool_size: Optional[int]


class AutotuneOptions(_Fields):
    """tf.data's ``options.autotune``."""

    __slots__ = ("autotune_algorithm", "cpu_budget", "enabled", "initial_parallelism", "min_parallelism",
                 "ram_budget")
    autotune_algorithm: Any
    cpu_budget: Optional[int]
    enabled: Optional[bool]
    initial_parallelism: Optional[int]
    min_parallelism: Optional[int]
    ram_budget: Optional[int]


class OptimizationOptions(_Fields):
    """tf.data's ``options.experimental_optimization`` (all accepted, none has an effect)."""

    __slots__ = ("apply_default_optimizations", "filter_fusion", "filter_parallelization", "inject_prefetch",
                 "map_and_batch_fusion", "map_and_filter_fusion", "map_fusion", "map_parallelization",
                 "noop_elimination", "parallel_batch", "seq_interleave_prefetch", "shuffle_and_repeat_fusion",
                 "warm_start")
    apply_default_optimizations: Optional[bool]
    filter_fusion: Optional[bool]
    filter_parallelization: Optional[bool]
    inject_prefetch: Optional[bool]
    map_and_batch_fusion: Optional[bool]
    map_and_filter_fusion: Optional[bool]
    map_fusion: Optional[bool]
    map_parallelization: Optional[bool]
    noop_elimination: Optional[bool]
    parallel_batch: Optional[bool]
    seq_interleave_prefetch: Optional[bool]
    shuffle_and_repeat_fusion: Optional[bool]
    warm_start: Optional[bool]


class DistributeOptions(_Fields):
    """tf.data's ``options.experimental_distribute`` (accepted, no effect)."""

    __slots__ = ("auto_shard_policy", "num_devices")
    auto_shard_policy: Any
    num_devices: Optional[int]


class Options(_Fields):
    """tf.data's ``tf.data.Options``, for :meth:`stokehold.Dataset.with_options`.

        >>> import stokehold as sh
        >>> options = sh.Options()
        >>> options.autotune.ram_budget = 1 << 28
        >>> options.threading.private_threadpool_size = 2
        >>> ds = sh.Dataset.range(4).with_options(options)
        >>> [int(e["x"]) for e in ds]
        [0, 1, 2, 3]
    """

    __slots__ = ("autotune", "dataset_name", "deterministic", "experimental_distribute",
                 "experimental_external_state_policy", "experimental_optimization", "experimental_slack",
                 "experimental_symbolic_checkpoint", "experimental_warm_start", "framework_type", "threading")
    autotune: AutotuneOptions
    dataset_name: Optional[str]
    deterministic: Optional[bool]
    experimental_distribute: DistributeOptions
    experimental_external_state_policy: Any
    experimental_optimization: OptimizationOptions
    experimental_slack: Optional[bool]
    experimental_symbolic_checkpoint: Optional[bool]
    experimental_warm_start: Optional[bool]
    framework_type: Any
    threading: ThreadingOptions

    def __init__(self) -> None:
        super().__init__()
        self.autotune = AutotuneOptions()
        self.threading = ThreadingOptions()
        self.experimental_optimization = OptimizationOptions()
        self.experimental_distribute = DistributeOptions()


def is_options(value: Any) -> bool:
    """Whether ``value`` is an options object (stokehold's or tf.data's), not a number."""
    return hasattr(value, "autotune") and hasattr(value, "threading")


def resolve(op: str, options: Any) -> Dict[str, Optional[int]]:
    """The executor settings ``options`` means: ``memory_budget`` and ``cores`` (``None``:
    the default), each checked as ``with_options``' own argument is."""
    if not is_options(options):
        raise _args.fail(op, "options", options, "must be a stokehold.Options (or a tf.data.Options); "
                                                 "give a memory budget as memory_budget=")
    tune, threads = options.autotune, options.threading
    if getattr(tune, "enabled", None) is not None and not _args.flag(op, "options.autotune.enabled", tune.enabled):
        raise _args.fail(op, "options.autotune.enabled", False,
                         "is not supported: stokehold has no switch that turns AUTOTUNE off; "
                         "give num_parallel_calls a number instead")
    det = getattr(options, "deterministic", None)
    if det is not None:
        _args.flag(op, "options.deterministic", det)
    budget = getattr(tune, "ram_budget", None)
    ram = None if budget in (None, 0) else _args.count(op, "options.autotune.ram_budget", budget, 1)
    cores = []
    pool = getattr(threads, "private_threadpool_size", None)
    for arg, value in (("options.autotune.cpu_budget", getattr(tune, "cpu_budget", None)),
                       ("options.threading.private_threadpool_size", pool)):
        if value not in (None, 0):  # 0: tf.data's "the default"
            cores.append(_args.threads(op, arg, value))
    return {"memory_budget": ram, "cores": min(cores) if cores else None}
