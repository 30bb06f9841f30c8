"""bench/image: JPEG decode + random_resized_crop(224) + flip + normalise + batch(64), images/s;
stokehold vs torch DataLoader vs tf.data vs datago vs Grain, SPDL, dataloader-rs, in one run.

Run from the repository root with the bench venv's python:
    python bench/image/bench.py [--quick] --json OUT

Data: N synthetic JPEGs of ImageNet's typical size (500x375, quality 90, 4:2:0; ~60 KB each)
written with Pillow under $BENCH_TMPDIR. Each system runs in its own process (TensorFlow's and
torch's imports do not share one), one warm-up epoch then 2 timed epochs, in two rounds (the
second in reverse order: stokehold first, then last); the figure is the median of the 4 timed
epochs. Grain, SPDL and dataloader-rs run after them (bench/peers), one warm-up and 3 timed
epochs. Pipelines:
* stokehold: list_files -> load_image -> random_resized_crop(224) -> random_flip_left_right ->
  normalize(CHW) -> batch(64) -> parallelize(AUTOTUNE) -> prefetch(2); all native, no GIL.
* torch/PIL: DataLoader(num_workers=os.cpu_count(), persistent_workers) over a Dataset doing
  PIL open + convert("RGB") + torchvision.transforms.v2 RandomResizedCrop(224, antialias) +
  RandomHorizontalFlip + ToImage/ToDtype + Normalize, batch 64 (ImageFolder's recipe).
* torch/tv.io: the same with torchvision.io.decode_jpeg (libjpeg-turbo) instead of PIL.
* tf.data: list_files -> map(read_file, sample_distorted_bounding_box(area 0.08-1, ratio 3/4-4/3),
  decode_and_crop_jpeg, resize 224 bilinear, random_flip_left_right, normalise,
  num_parallel_calls=AUTOTUNE) -> batch(64) -> prefetch(AUTOTUNE): TF's own ResNet recipe, which
  decodes only the crop (an advantage noted in the row).
* datago (2026.10.1, Photoroom's Rust-core image loader): one DatagoClient over the folder
  ("source_type": "file", random_sampling, limit = N, its README's filesystem-benchmark
  buffers of 256), client.start() per epoch (reads end at None and do not restart). Native,
  outside the GIL: file listing, read and JPEG decode (Rust `image` crate) on a tokio runtime of
  one thread per core, DATAGO_MAX_TASKS (default: cores) decodes in flight. datago has no
  random resized crop, flip or normalise (its only transform, image_config's crop_and_resize,
  is a deterministic aspect-ratio-bucket centre crop + Lanczos resize), so the consumer thread
  runs peers.ops.ImageOp's v2 transforms on each decoded image (get_sample() ->
  ImagePayload.to_numpy_array() HWC uint8 -> CHW tensor, one torch thread) and np.stack's the
  batches of 64: datago's documented model is one Python process calling get_sample().
* the nearest thread-based peers (bench/peers/, each in its own process after the others), each
  mapping torch/PIL's per-file op (peers.ops.ImageOp: PIL decode + the same v2 transforms, the
  tensor's array) and stacking batches of 64 with np.stack, one torch thread per process (as
  each DataLoader worker has), threads kept across epochs as torch's persistent workers:
  - grain: MapDataset.source(files).shuffle().repeat().map(op)
    .to_iter_dataset(ReadOptions()) (Grain's defaults: 16 threads), one iterator for all
    epochs, each epoch's elements cut into batches of 64 (peers.epochs_of_stream);
  - grain/mp_prefetch: the same with .mp_prefetch(num_workers=cores) (worker processes);
  - spdl: one pipeline for all epochs, PipelineBuilder().add_source(repeat_source(files))
    .pipe(op, concurrency=cores).add_sink(3).build(num_threads=cores), batches cut the same
    way; it decodes with spdl.io.load_image (FFmpeg) where that runs, else PIL (the note says
    which and why);
  - dataloader-rs: PyDataloader(Dataset(op), batch_size=64, shuffle, num_workers=cores,
    collate_fn=np.stack) under CPython 3.13 (bench/.venv313, with torch/torchvision).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import peers  # noqa: E402  (Grain, SPDL, dataloader-rs: bench/peers/)
from common import rows  # noqa: E402
from peers import ops  # noqa: E402

WL = "JPEG decode + random_resized_crop 224 + flip + normalise"
MEAN, STD = ops.IMAGE_MEAN, ops.IMAGE_STD
BATCH = 64


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_jpegs(root, n):
    import numpy as np
    from PIL import Image
    d = Path(tempfile.mkdtemp(prefix="img-jpeg-", dir=root))
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:375, 0:500].astype(np.float32)
    for i in range(n):
        f = rng.uniform(5, 40, 3)
        base = np.stack([128 + 90 * np.sin(x / f[0] + i), 128 + 90 * np.cos(y / f[1]),
                         128 + 90 * np.sin((x + y) / f[2])], axis=-1)
        img = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(d / f"{i:05d}.jpg", quality=90)
    return d


def epochs_of(make_iter, n_epochs):
    """Images/s of each epoch after the warm-up."""
    figs = []
    for e in range(n_epochs + 1):
        t = time.perf_counter()
        n = sum(int(b) for b in make_iter(e))
        if e > 0:
            figs.append(n / (time.perf_counter() - t))
    return figs


def child_stokehold(d, n_epochs):
    import stokehold as sh
    ds = (sh.list_files(str(d / "*.jpg"), seed=0).load_image()
          .random_resized_crop(224, seed=1).random_flip_left_right(seed=2)
          .normalize(MEAN, STD, layout="CHW").batch(BATCH)
          .parallelize(sh.AUTOTUNE).prefetch(2))

    def run(e):
        for b in ds.iter(epoch=e):
            assert b["image"].shape[1:] == (3, 224, 224)
            yield len(b["image"])
    return epochs_of(run, n_epochs)


def child_torch(d, n_epochs, decoder):
    import torch
    op = ops.ImageOp(decoder)  # decode + v2 transforms: the peers' map runs the same op
    files = sorted(str(p) for p in d.glob("*.jpg"))

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return op(files[i])

    loader = torch.utils.data.DataLoader(Files(), batch_size=BATCH, shuffle=True,
                                         num_workers=os.cpu_count(), persistent_workers=True)

    def run(_e):
        for b in loader:
            assert b.shape[1:] == (3, 224, 224)
            yield len(b)
    return epochs_of(run, n_epochs)


def child_tf(d, n_epochs):
    import tensorflow as tf
    mean, std = tf.constant(MEAN) * 255.0, tf.constant(STD) * 255.0

    def load(path):
        data = tf.io.read_file(path)
        shape = tf.io.extract_jpeg_shape(data)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape, bounding_boxes=tf.zeros([1, 0, 4]), area_range=(0.08, 1.0),
            aspect_ratio_range=(3 / 4, 4 / 3), max_attempts=10, use_image_if_no_bounding_boxes=True)
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        img = tf.image.decode_and_crop_jpeg(data, window, channels=3)
        img = tf.image.resize(img, [224, 224], method="bilinear", antialias=True)
        img = tf.image.random_flip_left_right(img)
        return tf.transpose((img - mean) / std, [2, 0, 1])

    ds = (tf.data.Dataset.list_files(str(d / "*.jpg"), seed=0)
          .map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
          .prefetch(tf.data.AUTOTUNE))

    def run(_e):
        for b in ds:
            yield int(b.shape[0])
    return epochs_of(run, n_epochs)


def child_datago(d, n_epochs):
    import warnings

    import datago
    import numpy as np
    import torch
    # to_numpy_array() is read-only (datago owns the buffer); the v2 transforms never write
    # into their input, so torch's "not writable" warning does not apply
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    n = len(list(d.glob("*.jpg")))
    client = datago.DatagoClient(json.dumps({
        "source_type": "file",
        "source_config": {"root_path": str(d), "random_sampling": True, "rank": 0,
                          "world_size": 1},
        "prefetch_buffer_size": 256, "samples_buffer_size": 256, "limit": n}))
    op = ops.ImageOp(as_numpy=True, one_thread=True)

    def run(_e):
        client.start()  # a new pass: datago's reads end at None and never restart by themselves
        batch = []
        while (s := client.get_sample()) is not None:
            hwc = s.image.to_numpy_array()  # decoded natively, HWC uint8
            batch.append(op.augment(torch.from_numpy(hwc).permute(2, 0, 1)))
            if len(batch) == BATCH:
                yield len(np.stack(batch))
                batch = []
        if batch:
            yield len(np.stack(batch))
    try:
        figs = epochs_of(run, n_epochs)
    finally:
        client.stop()
    assert len(figs) == n_epochs
    return figs


def child(system, d, n_epochs):
    if system == "stokehold":
        return child_stokehold(d, n_epochs)
    if system == "torch/PIL":
        return child_torch(d, n_epochs, "pil")
    if system == "torch/tv.io":
        return child_torch(d, n_epochs, "tvio")
    if system == "datago":
        return child_datago(d, n_epochs)
    return child_tf(d, n_epochs)


NOTES = {
    "torch/PIL": "DataLoader(num_workers=os.cpu_count(), persistent_workers=True), torchvision v2 transforms",
    "torch/tv.io": "as torch/PIL with torchvision.io.decode_jpeg (libjpeg-turbo)",
    "tf.data": "decode_and_crop_jpeg: decodes only the crop window (TF's ResNet recipe), AUTOTUNE",
    "datago": "datago 2026.10.1 file source, random_sampling, start() per epoch; native (Rust, "
              "no GIL, tokio runtime of one thread per core, DATAGO_MAX_TASKS default = cores "
              "in flight): file listing, read, JPEG decode (image crate). Not native (datago "
              "has no random crop, flip or normalise; its crop_and_resize is a deterministic "
              "aspect-ratio-bucket centre crop): RandomResizedCrop(224) + flip + ToDtype + "
              "Normalize (torchvision v2, as torch's rows) on the consumer's thread (one torch "
              "thread) over to_numpy_array() HWC uint8, np.stack batches of 64",
}



def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))
        return
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    # quick: 128 images (two batches), so that the systems fit the quick run's 120 s per script
    n = 128 if args.quick else 1024
    epochs = 1 if args.quick else 2  # timed epochs per round: 2 (quick) or 4 per system in all
    root = os.environ.get("BENCH_TMPDIR") or tempfile.mkdtemp()
    d = make_jpegs(root, n)
    config = f"{n} JPEGs 500x375, batch {BATCH}, {os.cpu_count()} cores"
    out = []
    # Two rounds, the second in reverse order, each system's figure the median of its epochs
    # from both: a drift of the machine's speed during the run (another workload's leftovers,
    # a neighbour's load) then falls on every system alike, not on whichever ran first.
    # The systems this script runs itself, each in a child process (the peers come after).
    children = ["stokehold", "torch/PIL", "torch/tv.io", "tf.data", "datago"]
    figs, failed = {s: [] for s in children}, {}
    for order in (children, children[::-1]):
        for system in order:
            if system in failed:
                continue
            log(f"{system} ...")
            p = subprocess.run([sys.executable, __file__, "--child", system, str(d), str(epochs)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                log(p.stderr[-2000:])
                failed[system] = f"failed: {p.stderr.strip().splitlines()[-1:]}"
                continue
            got = json.loads(p.stdout.strip().splitlines()[-1])
            log(f"{system}: {[round(f) for f in got]} images/s")
            figs[system] += got
    for system in children:
        if system in failed:
            out.append(rows.unavailable(WL, system, config, failed[system]))
            continue
        out.append(rows.median_row(WL, system, config, "throughput", figs[system], "images/s",
                                   note=NOTES.get(system), params={"parallelism": "autotune"}))
    # quick only: grain/mp_prefetch is left out (a status row says so). Its worker processes'
    # start-up took ~75 s of the quick run (the whole script ~150 s with datago, over the
    # driver's 120 s) on the loaded 2-core machine; the full run times it.
    systems = peers.WITH_PROCESSES
    if args.quick:
        systems = tuple(s for s in systems if s != "grain/mp_prefetch")
        out.append(rows.unavailable(WL, "grain/mp_prefetch", config, "skipped in --quick (its "
                                    "worker processes' start-up takes most of the quick run's "
                                    "120 s on 2 cores); the full run times it"))
    out += peers.throughput_rows(WL, config, "throughput", "images/s", "map", {
        "dir": str(d), "pattern": "*.jpg", "op": "image", "batch": BATCH, "par": "auto",
        "epochs": epochs + 1}, params={"parallelism": "autotune"}, systems=systems)
    rows.print_ratios(out, "a", 1.5)
    rows.write_json(args.json, out)


if __name__ == "__main__":
    main()
