"""The per-element work every peer runs: the same Python/numpy functions for all of them.

Kept in one place so that Grain, SPDL and dataloader-rs differ only in how they schedule the
work (their own threads, queues and batching), never in the work itself.
"""

import numpy as np

NPY_HEADER = 128  # the lazy-file workload writes 128-byte .npy headers (it asserts so)


def load_npy(path):
    """What the lazy-file workload's map does: read one .npy file into a float32 vector."""
    return np.load(path)


def pad_batch(arrays):
    """padded_batch: a (len, longest) float32 matrix, zeros after each vector's end."""
    longest = max(len(a) for a in arrays)
    out = np.zeros((len(arrays), longest), dtype=np.float32)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a
    return out


def sin_work(work):
    """The CPU-bound map: sum of `work` sin() values offset by the element (numpy, vectorised)."""
    base = np.arange(work, dtype=np.float32) * np.float32(1e-3)

    def f(x):
        return float(np.sin(base + np.float32(x)).sum())

    return f


def caption_order(n_captions, n_images, seed):
    """The table workload's shuffled caption -> image ids (as bench/table/bench.py makes them)."""
    ids = (np.arange(n_captions) * n_images // n_captions).astype(np.int64)
    return np.random.default_rng(seed).permutation(ids)


def check_rows(ids, feats, width):
    """Row i of the generated table holds i + j / width: a peer must return the right rows."""
    want = ids.astype(np.float32)[:, None] + np.arange(width, dtype=np.float32) / width
    if feats.shape != (len(ids), width) or not np.array_equal(feats, want):
        raise AssertionError("wrong rows gathered")
