"""SPDL 0.8.0 (Meta) on the shared workloads, set up as its docs recommend.

SPDL's pipeline: ``PipelineBuilder().add_source(iterable).pipe(op, concurrency=C)
.aggregate(k).pipe(collate).add_sink(n).build(num_threads=T)``, every stage on one asyncio
loop whose synchronous ops run on a thread pool of T threads ("thread mode", the default). P maps
to ``concurrency=P`` and ``num_threads=P``; "autotune" (SPDL has no autotuner) to one per core.
Each epoch builds the pipeline again and runs it under ``auto_stop()``, as the docs show.
"""

import os

import numpy as np
from spdl.pipeline import PipelineBuilder

from peers import ops


def _par(par):
    return os.cpu_count() if par == "auto" else int(par)


def _run(builder, threads):
    """One epoch of the built pipeline; stops its loop thread at the end."""
    pipeline = builder.build(num_threads=threads)
    with pipeline.auto_stop():
        yield from pipeline.get_iterator()


def files(paths, par, variant=""):
    """.npy paths -> pipe(np.load, concurrency=P) -> aggregate(64) -> pipe(pad)."""
    p = _par(par)
    paths = [paths[i] for i in np.random.default_rng(1).permutation(len(paths))]

    def epoch():
        b = (PipelineBuilder().add_source(paths).pipe(ops.load_npy, concurrency=p)
             .aggregate(64).pipe(ops.pad_batch).add_sink(3))
        return _run(b, p)
    return epoch


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
