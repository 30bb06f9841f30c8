"""dataloader-rs 0.2.0 (a Rust-core, thread-worker DataLoader) on the shared workloads.

Its API is torch's DataLoader with threads: a ``PyDataset`` subclass (``__len__``,
``__getitem__``, optionally ``__getitems__`` for one vectorised read per batch) and
``PyDataloader(dataset, batch_size, shuffle, seed, num_workers, prefetch_depth, collate_fn)``.
It needs CPython >= 3.13, so it runs in the 3.13 venv (bench/.venv313, see bench/run.py) with
numpy, as its README recommends: ``collate_fn=np.stack`` (or our padding collate),
``num_workers`` threads, and glibc's malloc thresholds raised for array samples
(GLIBC_TUNABLES, set by bench/peers/__init__.py for this child only; noted in the rows).
P maps to ``num_workers=P``; "autotune" (it has no autotuner) to one worker per core.
There is no element stream: a loader always yields batches, so the CPU-bound map (which counts
elements, unbatched elsewhere) runs with batch_size=64 and the rows say so.
"""

import os

import numpy as np
from dataloader_rs import PyDataloader, PyDataset

from peers import ops


def _workers(par):
    return os.cpu_count() if par == "auto" else int(par)


class _Mapped(PyDataset):
    """items[i] -> f: the per-element work in __getitem__, as a torch Dataset does it."""

    def __init__(self, items, f):
        super().__init__()
        self.items, self.f = items, f

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.f(self.items[i])


class _Fn(PyDataset):
    def __init__(self, n, f):
        super().__init__()
        self.n, self.f = n, f

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.f(i)


class _Rows(PyDataset):
    """The README's table example: one fancy-indexing read per batch via __getitems__."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def __len__(self):
        return len(self.table)

    def __getitem__(self, i):
        return self.table[i]

    def __getitems__(self, indices):
        return list(self.table[indices])


def mapped(items, f, par, batch, collate, variant="", persistent=False):
    """One loader (shuffle, seed 1) over items -> f, batches of ``batch`` collated; the same
    loader iterated each epoch (``persistent`` changes nothing: it is already one loader)."""
    loader = PyDataloader(_Mapped(items, f), batch_size=batch, shuffle=True, seed=1,
                          num_workers=_workers(par), collate_fn=collate)
    return lambda: loader


def unbatched(items, f, par, variant=""):
    """items in order -> f, batch_size=1 (its smallest batch: a loader always yields lists;
    torch's row has batch_size=None); a new loader per epoch, as torch's row builds one."""
    return lambda: PyDataloader(_Mapped(items, f), batch_size=1, num_workers=_workers(par))


def files(paths, par, variant=""):
    return mapped(paths, ops.load_npy, par, 64, ops.pad_batch)


def cpu(n, par, work):
    loader = PyDataloader(_Fn(n, ops.sin_work(work)), batch_size=ops.CPU_BATCH,
                          num_workers=_workers(par))
    return lambda: loader


def gather(mm, order, batch):
    """Yields (ids, rows): the sampler is the shuffled order, so batch k holds order[k*b:...]."""
    loader = PyDataloader(_Rows(mm), batch_size=batch, sampler=order.tolist(),
                          num_workers=os.cpu_count(), collate_fn=np.stack)
    for k, feats in enumerate(loader):
        yield order[k * batch:(k + 1) * batch], feats


def epochs(arr, batch, seed):
    loader = PyDataloader(_Fn(len(arr), arr.__getitem__), batch_size=batch, shuffle=True,
                          seed=seed, num_workers=os.cpu_count(), collate_fn=np.stack)
    return lambda: loader
