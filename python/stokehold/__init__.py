"""stokehold: input pipelines for ML training, on a Rust engine.

    >>> import numpy as np, stokehold
    >>> clips = [np.zeros(n, np.int16) for n in (5, 9, 7)]
    >>> ds = stokehold.from_arrays({"audio": clips, "label": np.arange(3)})
    >>> ds = ds.shuffle(seed=0).random_crop("audio", 4, seed=0).batch(2).prefetch(2)
    >>> [b["audio"].shape for b in ds]
    [(2, 4), (1, 4)]

Elements are dicts of numpy arrays. Errors derive from :class:`StokeholdError` and, where one
fits, from a built-in (``ValueError``, ``IndexError``, ``OSError``, ``FileNotFoundError``).
"""

from ._native import (
    CancelledError,
    DataCorruptionError,
    InvalidArgumentError,
    OutOfRangeError,
    SchemaError,
    StateError,
    StokeholdError,
    StokeholdFileNotFoundError,
    StokeholdIOError,
    WorkerPanicError,
    __version__,
)
from .dataset import (
    AUTOTUNE,
    INFINITE,
    UNKNOWN,
    Dataset,
    Epoch,
    EpochLoader,
    Iterator,
    from_arrays,
    from_list,
)
from .demo import demo
from .ragged import Ragged
from .table import Table, open_table, write_table
from . import tfrecord
from .tfrecord import TFRecordDataset
from . import parallel as _parallel  # adds interleave, flat_map, zip, list_files, stats... to Dataset
from .shards import open_shards, verify_shards, write_shards  # also adds Dataset.shard, .cache, ...

__all__ = [
    "AUTOTUNE",
    "INFINITE",
    "UNKNOWN",
    "CancelledError",
    "DataCorruptionError",
    "Dataset",
    "Epoch",
    "EpochLoader",
    "InvalidArgumentError",
    "Iterator",
    "OutOfRangeError",
    "Ragged",
    "SchemaError",
    "StateError",
    "StokeholdError",
    "StokeholdFileNotFoundError",
    "StokeholdIOError",
    "WorkerPanicError",
    "__version__",
    "demo",
    "from_arrays",
    "from_list",
]
__all__ += ["Table", "open_table", "write_table"]
__all__ += ["TFRecordDataset", "tfrecord"]
