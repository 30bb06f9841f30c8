"""Grain 0.2.18 (Google) on the shared workloads, set up as its docs recommend.

Grain's dataset API: a random-access ``MapDataset`` (source, shuffle, map, batch) turned into an
``IterDataset`` by ``to_iter_dataset(ReadOptions(num_threads=..., prefetch_buffer_size=...))``,
whose threads read and transform elements ahead of the consumer ("thread mode"); ``mp_prefetch``
adds worker processes. Parallelism P maps to ``ReadOptions.num_threads``; "autotune" to Grain's
own defaults (16 threads, a 500-element buffer), Grain having no autotuner for threads.
"""

import os

import grain

from peers import ops


def read_options(par, buffer=None):
    """ReadOptions for parallelism ``par`` (an int, or "auto" for Grain's defaults)."""
    if par == "auto":
        return grain.ReadOptions() if buffer is None else grain.ReadOptions(
            prefetch_buffer_size=buffer)
    opts = {"num_threads": int(par)}
    if buffer is not None:
        opts["prefetch_buffer_size"] = buffer
    return grain.ReadOptions(**opts)


def files(paths, par, variant=""):
    """list of .npy paths -> map(np.load) -> padded batch of 64; a new iterator per epoch."""
    ds = (grain.MapDataset.source(paths).shuffle(seed=1).map(ops.load_npy)
          .to_iter_dataset(read_options(par))
          .batch(64, batch_fn=ops.pad_batch))
    if variant == "mp_prefetch":
        # Worker processes, each with its own threads, as the docs suggest for CPU-heavy maps.
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=os.cpu_count()))
    return lambda: iter(ds)


def cpu(n, par, work):
    """range(n) -> map(sum of sin) per element."""
    ds = grain.MapDataset.range(n).map(ops.sin_work(work)).to_iter_dataset(read_options(par))
    return lambda: iter(ds)


def gather(mm, order, batch):
    """Shuffled caption ids -> batch(256) -> map(fancy-index the memory-mapped table).

    A batch of 256 rows is 4 MiB: Grain's default 500-element buffer would hold 2 GB, so the
    buffer is 2 batches per core (the rows are in the page cache; this is no remote read).
    """
    ds = (grain.MapDataset.source(order).batch(batch).map(lambda ids: (ids, mm[ids]))
          .to_iter_dataset(read_options(os.cpu_count(), buffer=2 * os.cpu_count())))
    return iter(ds)


def epochs(arr, batch, seed):
    """An in-memory array -> shuffle -> batch(32); the buffer held to 2 batches of 84 MB."""
    ds = (grain.MapDataset.source(arr).shuffle(seed=seed).batch(batch)
          .to_iter_dataset(read_options(os.cpu_count(), buffer=2)))
    return lambda: iter(ds)
