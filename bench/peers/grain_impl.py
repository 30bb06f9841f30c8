"""Grain 0.2.18 (Google) on the shared workloads, set up as its docs recommend.

Grain's dataset API: a random-access ``MapDataset`` (source, shuffle, map, batch) turned into an
``IterDataset`` by ``to_iter_dataset(ReadOptions(num_threads=..., prefetch_buffer_size=...))``,
whose threads read and transform elements ahead of the consumer ("thread mode"); ``mp_prefetch``
adds worker processes. Parallelism P maps to ``ReadOptions.num_threads``; "autotune" to Grain's
own defaults (16 threads, a 500-element buffer), Grain having no autotuner for threads.
"""

import os

import grain

import peers
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


def mapped(items, f, par, batch, batch_fn, variant="", persistent=False):
    """items -> shuffle -> map(f) -> batch; a new iterator per epoch. ``variant`` "mp_prefetch"
    adds worker processes (one per core, each with its own threads), as the docs suggest for
    CPU-heavy Python maps. ``persistent``: the docs' multi-epoch form instead, ``repeat()``
    (reshuffled each epoch) and one iterator whose threads and workers live across epochs, as
    a DataLoader's persistent_workers; its elements are cut into each epoch's batches in the
    consumer's thread (peers.epochs_of_stream, what IterDataset.batch does, but ending at the
    epoch's end; batching in the workers would make a worker's batch span two epochs)."""
    ds = grain.MapDataset.source(items).shuffle(seed=1)
    if persistent:
        ds = ds.repeat()
    ds = ds.map(f).to_iter_dataset(read_options(par))
    if not persistent:
        ds = ds.batch(batch, batch_fn=batch_fn)
    if variant == "mp_prefetch":
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=os.cpu_count()))
    if persistent:
        return peers.epochs_of_stream(lambda: iter(ds), len(items), batch, batch_fn)
    return lambda: iter(ds)


def unbatched(items, f, par, variant=""):
    """items in order -> map(f), element by element; a new iterator (threads, and with
    "mp_prefetch" P worker processes) per epoch, as torch's non-persistent workers."""
    ds = grain.MapDataset.source(items).map(f).to_iter_dataset(read_options(par))
    if variant == "mp_prefetch":
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(
            num_workers=os.cpu_count() if par == "auto" else int(par)))
    return lambda: iter(ds)


def files(paths, par, variant=""):
    """list of .npy paths -> map(np.load) -> padded batch of 64."""
    return mapped(paths, ops.load_npy, par, 64, ops.pad_batch, variant)


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
