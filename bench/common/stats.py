"""Timing helpers: medians, timed iteration, epoch-boundary stalls."""

import statistics
import time


def median(values):
    """Median of the non-None values, or None if there are none."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def timed_epochs(epoch_iters, step_s=0.0):
    """Consume epochs of batches like a training loop; return per-batch waits.

    ``epoch_iters`` yields one iterable per epoch (creating it is part of the wait
    for that epoch's first batch, as it is for a user's ``for batch in loader``).
    ``step_s`` simulates a training step after each batch (sleep: it frees the
    GIL and the cores, like an accelerator step would).
    Returns the waits per epoch, ``[[seconds, ...], ...]``, and the total elapsed
    seconds.
    """
    waits = []
    t_start = time.perf_counter()
    for make_epoch in epoch_iters:
        t0 = time.perf_counter()
        it = iter(make_epoch())
        epoch = []
        while True:
            try:
                next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            epoch.append(t1 - t0)
            if step_s:
                time.sleep(step_s)
            t0 = time.perf_counter()
        waits.append(epoch)
    return waits, time.perf_counter() - t_start


def timed_stream(iterable, batches_per_epoch, step_s=0.0):
    """Like ``timed_epochs`` for one iterator that flows across epochs (repeat).

    The stream is cut into epochs by count, so the result has the same shape.
    """
    waits, epoch = [], []
    t_start = time.perf_counter()
    t0 = t_start
    for _ in iterable:
        t1 = time.perf_counter()
        epoch.append(t1 - t0)
        if len(epoch) == batches_per_epoch:
            waits.append(epoch)
            epoch = []
        if step_s:
            time.sleep(step_s)
        t0 = time.perf_counter()
    if epoch:
        waits.append(epoch)
    return waits, time.perf_counter() - t_start


def boundary_stalls(waits):
    """Time lost at each epoch boundary, in seconds.

    The wait for the first batch of epoch k+1 (iterator creation included) minus
    the steady wait: the median wait of the batches inside epochs (first batches
    excluded), floored at 0: a first batch that came faster than a steady one lost
    nothing. One figure per boundary, so E epochs give E-1 figures.
    """
    steady = median([w for epoch in waits for w in epoch[1:]]) or 0.0
    return [max(epoch[0] - steady, 0.0) for epoch in waits[1:] if epoch], steady


def first_waits(waits):
    """The raw wait for the first batch of each epoch after the first (no subtraction)."""
    return [epoch[0] for epoch in waits[1:] if epoch]


def throughput(count, seconds):
    """count / seconds, or None when nothing was timed."""
    return count / seconds if seconds > 0 else None


def shuffle_quality(order, per_shard):
    """How uniform one epoch's ``order`` of record ids 0..N-1 is, where ids were written in index
    order, ``per_shard`` to a shard (or row group): Spearman correlation of output position vs
    id (0 ideal), mean displacement |position - id| / N (1/3 for a uniform order), fraction of
    adjacent outputs from the same shard (1/shards uniform), distinct shards per window of 1000
    outputs (about the number of shards, up to 1000, for a uniform order)."""
    import numpy as np

    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    pos = np.arange(n)
    shard = order // per_shard
    w = 1000
    distinct = [len(np.unique(shard[i:i + w])) for i in range(0, n - w + 1, w)]
    return {
        "spearman": float(np.corrcoef(pos, order)[0, 1]),
        "mean displacement / N": float(np.mean(np.abs(pos - order)) / n),
        "adjacent same-shard fraction": float(np.mean(shard[1:] == shard[:-1])),
        "distinct shards per 1000": float(np.mean(distinct)),
    }
