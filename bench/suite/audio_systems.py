"""The audio pipeline (shuffle -> random 3 s crop -> batch 32 -> prefetch) per system.

Each builder takes the list of clips (int16 arrays) and returns a Pipeline: how to
iterate one epoch, or several through one loop across epochs, and whether the caller's list
is still needed (it is the cache for torch and tf.data's from_generator).
Builders import their framework lazily: each system runs in its own process.
"""

import functools
import os

import numpy as np
import peers
from peers import ops

CROP = 48000  # 3 s at 16 kHz
BATCH = 32
SEED = 1234


class Pipeline:
    """``epoch()`` returns an iterable over one epoch's batches; ``epochs(e)``, where the
    system has one loop across epochs (stokehold's ``ds.epochs(e)``), a list of e callables
    that each return the next epoch of that one loop; ``keeps_list``: the dataset holds the
    caller's list (so dropping it frees nothing)."""

    def __init__(self, epoch, keeps_list, epochs=None, note="", copies=None):
        self.epoch = epoch
        self.keeps_list = keeps_list
        self.note = note
        self._epochs = epochs
        # Whether building copies the clips (its MB/s is then a copy speed); default: a
        # system that keeps the caller's list copies nothing.
        self.copies = not keeps_list if copies is None else copies

    def epochs(self, count):
        if self._epochs is None:
            return [self.epoch] * count
        loader = self._epochs(count)
        return [lambda: next(loader)] * count


# ---------------------------------------------------------------- stokehold
def stokehold_pipeline(clips, parallelism=None):
    """from_arrays (one ragged arena) -> global shuffle -> native crop -> batch -> prefetch;
    epochs through ``ds.epochs(n)``: one prefetch thread across epoch boundaries."""
    import stokehold as sh

    ds = sh.from_arrays({"audio": clips})
    ds = ds.shuffle(seed=SEED).random_crop("audio", CROP, seed=SEED).batch(BATCH)
    # The main run leaves the knobs alone (no parallelize: crop + batch on the prefetch
    # thread); the parallelism sweep sets parallelize(p), p = -1 meaning AUTOTUNE.
    note = "from_arrays ragged arena; ds.epochs(n): one prefetch thread across epochs"
    if parallelism is not None:
        ds = ds.parallelize(parallelism if parallelism > 0 else sh.AUTOTUNE)
        note += f"; parallelize({parallelism if parallelism > 0 else 'AUTOTUNE'})"
    ds = ds.prefetch(2)
    return Pipeline(lambda: ds, keeps_list=False, epochs=ds.epochs, note=note)


def stokehold_cache(folder, n, parallelism=None):
    """``cache()`` over a decoding pipeline, no Python list held: a Python map reads clip i
    from the raw file and converts it (int16 samples, as the list systems hold them), the
    cache fills during one pass, then the same crop -> batch -> prefetch as ``stokehold``.
    The build is that first pass (decode + fill); its peak is what the cache costs."""
    import stokehold as sh

    lengths = np.load(os.path.join(folder, "lengths.npy"))[:n]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) * 2
    path = os.path.join(folder, "clips.i16")

    def decode(e):
        i = int(e["i"])
        with open(path, "rb") as f:
            f.seek(int(starts[i]))
            clip = np.frombuffer(f.read(int(lengths[i]) * 2), dtype="<i2").astype(np.int16)
        return {"audio": clip}

    cached = sh.from_arrays({"i": np.arange(n)}).map(decode).cache()
    for _ in cached:  # the first pass fills the cache
        pass
    ds = cached.shuffle(seed=SEED).random_crop("audio", CROP, seed=SEED).batch(BATCH)
    if parallelism is not None:
        ds = ds.parallelize(parallelism if parallelism > 0 else sh.AUTOTUNE)
    ds = ds.prefetch(2)
    return Pipeline(lambda: ds, keeps_list=False, epochs=ds.epochs, copies=True,
                    note="map(decode from the raw file).cache(), filled by one pass; no list held")


stokehold_cache.from_files = True


# ---------------------------------------------------------------- tf.data
def _tf():
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    return tf


def _tf_crop(tf, clip, length=None):
    n = tf.shape(clip)[0] if length is None else tf.cast(length, tf.int32)
    start = tf.random.uniform((), 0, tf.maximum(n - CROP, 0) + 1, dtype=tf.int32)
    return clip[start:start + CROP]


def tf_ragged(clips, parallelism=None):
    """from_tensor_slices(RaggedTensor): the ragged cache tf.data offers."""
    tf = _tf()
    lengths = np.array([len(c) for c in clips], dtype=np.int64)
    rt = tf.RaggedTensor.from_row_lengths(np.concatenate(clips), lengths)
    calls = parallelism or tf.data.AUTOTUNE
    ds = (tf.data.Dataset.from_tensor_slices(rt).shuffle(len(clips), seed=SEED)
          .map(lambda c: _tf_crop(tf, c), num_parallel_calls=calls)
          .batch(BATCH).prefetch(tf.data.AUTOTUNE))
    return Pipeline(lambda: ds, keeps_list=False,
                    note="shuffle(n) buffers every clip slice; new iterator per epoch")


def tf_padded(clips, parallelism=None):
    """One padded int16 matrix + lengths: the dense cache (about 2x raw for 5-180 s)."""
    tf = _tf()
    lengths = np.array([len(c) for c in clips], dtype=np.int32)
    padded = np.zeros((len(clips), lengths.max()), dtype=np.int16)
    for i, c in enumerate(clips):
        padded[i, :len(c)] = c
    calls = parallelism or tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices((padded, lengths))
    del padded  # tf.data holds its own copy now
    ds = (ds.shuffle(len(clips), seed=SEED)
          .map(lambda c, n: _tf_crop(tf, c, n), num_parallel_calls=calls)
          .batch(BATCH).prefetch(tf.data.AUTOTUNE))
    return Pipeline(lambda: ds, keeps_list=False, note="shuffle(n) buffers every padded row")


def tf_generator(clips, parallelism=None):
    """from_generator over the Python list: no copy of the cache, but one Python thread."""
    tf = _tf()
    order = np.random.default_rng(SEED)

    def gen():
        for i in order.permutation(len(clips)):
            yield clips[i]

    calls = parallelism or tf.data.AUTOTUNE
    ds = (tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec((None,), tf.int16))
          .map(lambda c: _tf_crop(tf, c), num_parallel_calls=calls)
          .batch(BATCH).prefetch(tf.data.AUTOTUNE))
    return Pipeline(lambda: ds, keeps_list=True, note="generator runs under the GIL")


# ---------------------------------------------------------------- torch
def torch_loader(clips, parallelism=None):
    """Dataset over the list; num_workers = cores, persistent workers, no pin_memory."""
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Clips(Dataset):
        def __init__(self, clips):
            self.clips = clips

        def __len__(self):
            return len(self.clips)

        def __getitem__(self, i):
            # Per-(worker, call) randomness as users write it; not reproducible across
            # worker counts, which stokehold's keyed crop is. The peers' maps run this crop.
            return torch.from_numpy(ops.random_crop(self.clips[i], CROP))

    workers = os.cpu_count() if parallelism is None else parallelism
    loader = DataLoader(Clips(clips), batch_size=BATCH, shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0, pin_memory=False,
                        generator=torch.Generator().manual_seed(SEED))
    return Pipeline(lambda: loader, keeps_list=True,
                    note=f"num_workers={workers}, persistent_workers, pin_memory=False")


# ---------------------------------------------------------------- Grain, SPDL, dataloader-rs
def peer_loader(system):
    """The list -> the peer's map of torch's crop (ops.random_crop) -> batch 32 (np.stack), its
    threads kept across epochs where it can (bench/peers/); parallelism None = its default."""
    def build(clips, parallelism=None):
        par = "auto" if parallelism is None else parallelism
        make = peers.mapped_loader(system, clips, functools.partial(ops.random_crop, crop=CROP),
                                   par, BATCH, np.stack)
        return Pipeline(make, keeps_list=True, note=peers.NOTES[system] + (
            f"; P={par}" if par != "auto" else "; P=Grain's defaults (16 threads)"
            if system == "grain" else "; P=one per core"))
    return build


SYSTEMS = {
    "stokehold": stokehold_pipeline,
    "stokehold/cache()": stokehold_cache,
    "tf.data/ragged": tf_ragged,
    "tf.data/padded": tf_padded,
    "tf.data/generator": tf_generator,
    "torch": torch_loader,
    **{system: peer_loader(system) for system in peers.SYSTEMS},
}
