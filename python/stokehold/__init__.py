"""stokehold: input pipelines for ML training, on a Rust engine.

    >>> import numpy as np, stokehold
    >>> clips = [np.zeros(n, np.int16) for n in (5, 9, 7)]
    >>> ds = stokehold.from_arrays({"audio": clips, "label": np.arange(3)})
    >>> ds = ds.shuffle(seed=0).random_crop("audio", 4, seed=0).batch(2).prefetch(2)
    >>> [b["audio"].shape for b in ds]
    [(2, 4), (1, 4)]

Elements are dicts of numpy arrays. Every op is a :class:`Dataset` method; sources are module
functions (``from_arrays``, ``from_generator``, ``list_files``, ``open_shards``,
``TFRecordDataset``, ``TextLineDataset``, ...). Errors derive from :class:`StokeholdError` and,
where one fits, from a built-in (``ValueError``, ``IndexError``, ``OSError``,
``FileNotFoundError``). The adapters ``stokehold.torch``, ``stokehold.jax`` and
``stokehold.keras`` import their framework only when used. ``docs/GUIDE.md`` is the cookbook.
"""

from . import jax, keras, tfrecord, torch
from ._args import AUTOTUNE, INFINITE, UNKNOWN
from ._malloc import malloc_tuning, tune_malloc
from ._native import __version__
from .audio import probe_audio
from .csvfile import CsvDataset
from .dataset import Dataset, Element
from .demo import demo
from .errors import (
    CancelledError,
    DataCorruptionError,
    InvalidArgumentError,
    OutOfRangeError,
    SchemaError,
    SkipLog,
    StateError,
    StokeholdError,
    StokeholdFileNotFoundError,
    StokeholdIOError,
    WorkerPanicError,
)
from .image import ImageInfo, probe_image
from .iterator import Epoch, EpochLoader, Iterator
from .jsonl import read_jsonl
from .monitor import StatsServer, serve_stats
from .options import Options
from .parquet import from_hf, read_arrow, read_parquet
from .processes import ProcessOptions, WorkerProcessError
from .ragged import Ragged
from .shards import open_shards, verify_shards, write_shards
from .sources import (
    FixedLengthRecordDataset,
    TextLineDataset,
    choose_from_datasets,
    from_arrays,
    from_generator,
    from_list,
    from_tensor_slices,
    from_tensors,
    list_files,
    sample_from_datasets,
    zip,
)
from .spec import ElementSpec, RaggedSpec, TensorSpec
from .storage import set_storage_options, storage_stats
from .table import Table, open_table, write_table
from .tfrecord import TFRecordDataset
from .tokens import read_tokens
from .webdataset import read_webdataset, write_webdataset

__all__ = [
    "AUTOTUNE",
    "INFINITE",
    "UNKNOWN",
    "CancelledError",
    "CsvDataset",
    "DataCorruptionError",
    "Dataset",
    "Element",
    "ImageInfo",
    "ElementSpec",
    "Epoch",
    "EpochLoader",
    "FixedLengthRecordDataset",
    "InvalidArgumentError",
    "Iterator",
    "Options",
    "OutOfRangeError",
    "ProcessOptions",
    "Ragged",
    "RaggedSpec",
    "SchemaError",
    "SkipLog",
    "StateError",
    "StokeholdError",
    "StokeholdFileNotFoundError",
    "StokeholdIOError",
    "TFRecordDataset",
    "Table",
    "TensorSpec",
    "TextLineDataset",
    "WorkerPanicError",
    "WorkerProcessError",
    "__version__",
    "choose_from_datasets",
    "demo",
    "from_arrays",
    "from_generator",
    "from_list",
    "from_tensor_slices",
    "from_tensors",
    "jax",
    "keras",
    "list_files",
    "malloc_tuning",
    "open_shards",
    "probe_image",
    "open_table",
    "probe_audio",
    "read_jsonl",
    "serve_stats",
    "StatsServer",
    "read_parquet",
    "read_arrow",
    "from_hf",
    "read_webdataset",
    "read_tokens",
    "sample_from_datasets",
    "set_storage_options",
    "storage_stats",
    "tfrecord",
    "torch",
    "tune_malloc",
    "verify_shards",
    "write_shards",
    "write_table",
    "write_webdataset",
    "zip",
]
