"""bench/webdataset: a WebDataset image epoch (JPEG decode + random resized crop 224 + batch 64),
images/s; stokehold.read_webdataset vs the webdataset package + torch DataLoader workers at the
same core count (issue 45).

    python bench/webdataset/bench.py [--quick] --json OUT      (from the repository root)

Data: N synthetic JPEGs of ImageNet's typical size (bench/image's generator: 500x375, quality 90)
with a class label, written into S tar shards by webdataset's own TarWriter (members
``{key}.jpg``, ``{key}.cls``) under $BENCH_TMPDIR. Full: 2048 images in 16 shards; --quick:
128 in 4. Each system runs in its own process on P = 2 cores (the machine's count; os.cpu_count()
if it is smaller), reading the shards in order: one warm-up epoch (none in --quick), then 3 timed
epochs; the row is their median. Every epoch must deliver every image once.
* stokehold: read_webdataset(shards, decode={"jpg": "image", "cls": "int"}) (decoding by
  extension in the reader) -> random_resized_crop(224, feature="jpg") -> batch(64) ->
  parallelize(P) -> prefetch(2): native, no GIL; uint8 HWC. (A build whose read_webdataset has
  no decode= runs the decode_image op instead; the note says so.)
* stokehold/decode_image: read_webdataset(shards) -> decode_image("jpg") -> the same.
* webdataset+torch: DataLoader(WebDataset(shards, shardshuffle=False).decode("pil")
  .to_tuple("jpg", "cls").map_tuple(v2.RandomResizedCrop(224) + PILToTensor, int).batched(64),
  batch_size=None, num_workers=P, persistent_workers=True): webdataset's README recipe, one
  torch thread per worker (the DataLoader's default); uint8 CHW.
Goal (issue 45): stokehold >= 1.5x webdataset + DataLoader at the same core count.
"""

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import children, rows  # noqa: E402

W = "WebDataset image epoch: decode + random resized crop 224 + batch"
BATCH = 64
RUNS = 3
CORES = min(2, os.cpu_count() or 1)


def generate(folder, n, shards):
    """S tar shards of n JPEG + class samples, written by webdataset's TarWriter."""
    import webdataset as wds
    from image.bench import make_jpegs  # bench/image's JPEGs: one generator for both suites

    jpegs = sorted(make_jpegs(folder, n).glob("*.jpg"))
    paths, per = [], -(-n // shards)
    for s in range(shards):
        path = os.path.join(folder, f"shard-{s:05d}.tar")
        with wds.TarWriter(path) as sink:
            for i in range(s * per, min(n, (s + 1) * per)):
                sink.write({"__key__": f"sample{i:06d}", "jpg": jpegs[i].read_bytes(),
                            "cls": str(i % 1000)})
        paths.append(path)
    shutil.rmtree(jpegs[0].parent)
    return paths


def child_stokehold(system, a):
    import inspect

    import stokehold as sh

    note = f"parallelize({CORES})"
    if system == "stokehold" and "decode" in inspect.signature(sh.read_webdataset).parameters:
        ds = sh.read_webdataset(a["shards"], decode={"jpg": "image", "cls": "int"})
    else:
        ds = sh.read_webdataset(a["shards"]).decode_image("jpg")
        if system == "stokehold":
            note += "; decode_image('jpg') (read_webdataset has no decode= in this build)"
    ds = (ds.random_resized_crop(224, feature="jpg", seed=1).batch(BATCH)
          .parallelize(CORES).prefetch(2))

    def run(e):
        for b in ds.iter(epoch=e):
            assert b["jpg"].shape[1:] == (224, 224, 3), b["jpg"].shape
            yield len(b["jpg"])
    return run, note


def child_webdataset(_system, a):
    import torch
    import webdataset as wds
    from torchvision.transforms import v2

    crop = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.PILToTensor()])
    ds = (wds.WebDataset(a["shards"], shardshuffle=False, empty_check=False).decode("pil")
          .to_tuple("jpg", "cls").map_tuple(crop, int).batched(BATCH))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=CORES,
                                         persistent_workers=True)

    def run(_e):
        for images, _labels in loader:
            assert tuple(images.shape[1:]) == (3, 224, 224), images.shape
            yield len(images)
    return run, f"DataLoader(num_workers={CORES}, persistent_workers=True)"


def run_system(system, a):
    make, note = (child_stokehold if system.startswith("stokehold") else child_webdataset)(
        system, a)
    secs, _, items = children.timed(make, RUNS, a["warmup"])
    if any(k != a["n"] for k in items):
        raise SystemExit(f"{system}: epochs delivered {items} images, expected {a['n']}")
    return {"runs": [k / s for k, s in zip(items, secs)], "note": note,
            "params": {"parallelism": CORES}}


def main():
    if children.is_child():
        children.child_main(run_system)
        return
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    n, shards = (128, 4) if args.quick else (2048, 16)
    tmp = tempfile.mkdtemp(prefix="wds-bench-", dir=rows.tmp_root())
    out = []
    try:
        t = time.perf_counter()
        paths = generate(tmp, n, shards)
        print(f"generated {n} samples in {shards} shards in {time.perf_counter() - t:.0f} s",
              file=sys.stderr)
        config = f"{n} JPEGs 500x375 in {shards} tar shards, batch {BATCH}, {CORES} cores"
        a = {"shards": paths, "n": n, "warmup": 0 if args.quick else 1}
        for system in ("stokehold", "stokehold/decode_image", "webdataset+torch"):
            got = children.run(__file__, system, a, timeout=600)
            out += children.rows_of(W, system, config, got,
                                    [("throughput", "runs", "images/s", "higher")])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows.write_json(args.json, out)
    rows.print_ratios(out, "issue 45, WebDataset", 1.5)


if __name__ == "__main__":
    main()
