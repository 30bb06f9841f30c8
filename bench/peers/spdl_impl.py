"""SPDL 0.8.0 (Meta) on the shared workloads, set up as its docs recommend.

SPDL's pipeline: ``PipelineBuilder().add_source(iterable).pipe(op, concurrency=C)
.aggregate(k).pipe(collate).add_sink(n).build(num_threads=T)``, every stage on one asyncio
loop whose synchronous ops run on a thread pool of T threads ("thread mode", the default). P maps
to ``concurrency=P`` and ``num_threads=P``; "autotune" (SPDL has no autotuner) to one per core.
Each epoch builds the pipeline again and runs it under ``auto_stop()``, as the docs show.
"""

import atexit
import os

import numpy as np
from spdl.pipeline import PipelineBuilder
from spdl.source.utils import repeat_source

import peers
from peers import ops


def _par(par):
    return os.cpu_count() if par == "auto" else int(par)


def _run(builder, threads):
    """One epoch of the built pipeline; stops its loop thread at the end."""
    pipeline = builder.build(num_threads=threads)
    with pipeline.auto_stop():
        yield from pipeline.get_iterator()


def mapped(items, f, par, batch, collate, variant="", persistent=False):
    """items (shuffled once) -> pipe(f, concurrency=P) -> aggregate(batch) -> pipe(collate), a
    pipeline per epoch. ``persistent``: one pipeline for all epochs instead, as torch's
    persistent workers, over ``repeat_source`` (spdl.source.utils: reshuffled each epoch); its
    elements are cut into each epoch's batches in the consumer (peers.epochs_of_stream: an
    aggregate over the repeated source would let a batch span two epochs)."""
    p = _par(par)
    if persistent:
        def stream():
            pipeline = (PipelineBuilder().add_source(repeat_source(_Shuffled(items)))
                        .pipe(f, concurrency=p).add_sink(3).build(num_threads=p))
            pipeline.start()
            atexit.register(pipeline.stop)
            return pipeline.get_iterator()
        return peers.epochs_of_stream(stream, len(items), batch, collate)
    items = [items[i] for i in np.random.default_rng(1).permutation(len(items))]

    def epoch():
        b = (PipelineBuilder().add_source(items).pipe(f, concurrency=p)
             .aggregate(batch).pipe(collate).add_sink(3))
        return _run(b, p)
    return epoch


class _Shuffled:
    """A source with SPDL's ``shuffle(seed)`` protocol, for repeat_source."""

    def __init__(self, items):
        self.items, self.order = items, np.arange(len(items))

    def shuffle(self, seed):
        self.order = np.random.default_rng(seed).permutation(len(self.items))

    def __iter__(self):
        return (self.items[i] for i in self.order)


def unbatched(items, f, par, variant=""):
    """items -> pipe(f, concurrency=P), element by element (in completion order, the default)."""
    p = _par(par)

    def epoch():
        b = (PipelineBuilder().add_source(items).pipe(f, concurrency=p).add_sink(3))
        return _run(b, p)
    return epoch


def files(paths, par, variant=""):
    """.npy paths -> pipe(np.load, concurrency=P) -> aggregate(64) -> pipe(pad)."""
    return mapped(paths, ops.load_npy, par, 64, ops.pad_batch)


def cpu(n, par, work):
    """range(n) -> pipe(sum of sin, concurrency=P)."""
    p, f = _par(par), ops.sin_work(work)

    def epoch():
        return _run(PipelineBuilder().add_source(range(n)).pipe(f, concurrency=p).add_sink(3), p)
    return epoch


def gather(mm, order, batch):
    """Batches of shuffled ids -> pipe(fancy-index the memory-mapped table, concurrency=cores)."""
    p = os.cpu_count()
    id_batches = [order[s:s + batch] for s in range(0, len(order), batch)]
    b = (PipelineBuilder().add_source(id_batches)
         .pipe(lambda ids: (ids, mm[ids]), concurrency=p).add_sink(2))
    return _run(b, p)


def epochs(arr, batch, seed):
    """A shuffled index order per epoch -> aggregate(32) -> pipe(arr[idx]), sink of 2 batches."""
    p, n = os.cpu_count(), len(arr)
    count = [0]

    def epoch():
        order = np.random.default_rng([seed, count[0]]).permutation(n)
        count[0] += 1
        b = (PipelineBuilder().add_source(order.tolist()).aggregate(batch)
             .pipe(lambda idx: arr[np.asarray(idx)], concurrency=p).add_sink(2))
        return _run(b, p)
    return epoch
