"""docs/BENCHMARKS.md: the latest table, the machine, how to reproduce, plots."""

import os

from . import plots, report

NOTES = """\
## What each workload does, and what favours whom

- **machine limits**: `numpy.copyto` of a large array (memcpy bandwidth) and reading back a file
  just written (page-cache read throughput, 8 MiB `readinto` chunks). No peers: the ceiling that the
  other workloads' GB/s figures can be read against.
- **audio cache + epochs** (issue 2's users): 5-180 s clips at 16 kHz int16, cached in memory;
  shuffle -> random 3 s crop -> batch 32 -> prefetch, several epochs. Each system runs in its own
  process (TensorFlow's import alone is hundreds of MiB). *Cache growth* = RSS after building the cache,
  dropping the source list and running one epoch, minus RSS before loading the clips. stokehold:
  `from_arrays({"audio": clips})` (one ragged arena, one copy) -> `shuffle(seed)` (a global
  permutation, no buffer) -> native `random_crop` (offset keyed by seed, epoch, index) -> `batch(32)`
  -> `prefetch(2)`, epochs through `ds.epochs(n)` (one prefetch thread across epochs). The main
  rows leave stokehold's knobs alone (crop and batch run on the prefetch thread); the parallelism
  sweep (a quarter of the clips) adds `parallelize(1 | 2 | AUTOTUNE)` before `prefetch`, against
  tf.data's `num_parallel_calls` and torch's `num_workers`. tf.data variants:
  `ragged` = `from_tensor_slices(RaggedTensor)` -> `shuffle(n)` -> `map(crop, AUTOTUNE)`; `padded` =
  one padded matrix plus lengths (the only dense option; about 2x the raw bytes);
  `generator` = `from_generator` over the Python list (no parallelism: the GIL). torch: a `Dataset`
  over the list of arrays, `num_workers = nproc`, `persistent_workers=True`, `pin_memory=False`.
  *workers RSS* is the sum of the workers' RSS, what `top` shows users; it counts pages shared with the
  parent once per worker. *total PSS* (main + workers, shared pages split) is the real footprint.
  The epoch-boundary stall is the wait for the first batch of epoch k+1 (iterator creation
  included) minus the steady wait per batch (floored at 0), with a 20 ms simulated step after each
  batch; the raw first-batch wait is shown too, so a ratio exists where stokehold's stall is 0.
  What we found about torch: with a list of *numpy arrays*, forked workers do not copy the clips
  (reference counts touch the small array headers, not the data buffers; the workers' private
  bytes show it), so torch's total PSS stays near the raw bytes; the big figure users see is the
  workers' RSS, which counts pages shared with the parent once per worker. Lists of Python objects
  are where copy-on-access bites; this workload does not measure them.
  Settings that favour a side: tf.data's `shuffle(n)` buffer holds every clip (a smaller buffer
  saves memory but shuffles worse than stokehold's global permutation); torch's crop offsets come
  from numpy's per-worker RNG (cheaper than keyed randomness, not reproducible across worker
  counts); the sleep-based step leaves both cores to every loader's background work.
- **epoch restart** (issue 7): 400 examples of 10 x H x W float32, batch 32, a 0.15 s simulated step
  (a sleep, which frees both cores for the loaders' threads and workers); the time lost at each
  epoch boundary. The users' case is ~5 GB (H = W ~ 560); this machine is shared and has 24 GiB, so
  H and W are scaled down (stated in the config column): the stall of a loader that restarts is set
  by how much work precedes the first batch, which the scale shrinks, so real stalls are larger.
  Variants: `stokehold` = `ds.epochs(n)`; `stokehold/parallelize` = the same with
  `parallelize(AUTOTUNE)`; `stokehold/per-epoch` = `for batch in ds` each epoch (a new prefetch
  thread each time); `tf.data` = a new iterator per epoch (as Keras `fit` does), with
  `shuffle(400)` refilled each epoch; `tf.data/repeat` = `shuffle -> repeat() -> batch`, one
  iterator, epochs cut by count (batches then straddle epochs); `torch` = persistent workers;
  `torch/non-persistent` = the default, workers restart each epoch. stokehold's array is not
  copied (`from_arrays` keeps a reference to a C-contiguous array); tf.data copies it into a tensor.
"""


def others(root):
    """Pointers to the other areas' workload scripts, whose docstrings describe them."""
    found = sorted(p for p in ("parallel", "tfrecord", "shard", "table")
                   if os.path.exists(os.path.join(root, "bench", p, "bench.py")))
    if not found:
        return ""
    return ("- **the other workloads** are described, with what favours whom, at the top of "
            + ", ".join(f"`bench/{p}/bench.py`" for p in found) + ".\n\n")


def _machine_md(info):
    cpu = info.get("lscpu", {})
    v = info.get("versions", {})
    lines = [
        f"- CPU: {cpu.get('Model name', '?')}; `nproc` = {info.get('nproc')}; "
        f"{cpu.get('Thread(s) per core', '?')} thread(s) per core; hypervisor: "
        f"{cpu.get('Hypervisor vendor', 'none')}; L2 {cpu.get('L2 cache', '?')}, "
        f"L3 {cpu.get('L3 cache', '?')}",
        f"- memory: {info.get('mem_total_gib')} GiB; kernel {info.get('kernel')}",
        "- software: " + ", ".join(f"{k} {val}" for k, val in sorted(v.items())),
        f"- stokehold commit: `{info.get('git_commit')}`",
    ]
    return "\n".join(lines) + "\n"


def _timings_md(result):
    out = ["Before each workload the suite waits (up to 90 s) until the cores are quiet (under 15 % "
           "busy for two seconds running), so that one workload's leftovers (Ray's processes "
           "winding down) are not measured in the next; `settle s` is that wait.\n",
           "| workload | settle s | seconds | load avg before | after |", "|---|---|---|---|---|"]
    for t in result.get("timings", []):
        out.append(f"| {t['workload']} | {t.get('settle_seconds', '—')} | {t['seconds']} | "
                   f"{t['load_before']} | {t['load_after']} |")
    return "\n".join(out) + "\n"


def write_docs(root, result):
    """Rewrite docs/BENCHMARKS.md and its plots from one suite result."""
    docs = os.path.join(root, "docs")
    img = os.path.join(docs, "benchmarks")
    rows = result["rows"]
    p1 = plots.throughput_vs_parallelism(rows, os.path.join(img, "throughput_vs_parallelism.png"))
    p2 = plots.memory_vs_size(rows, os.path.join(img, "memory_vs_dataset_size.png"))
    nproc = result["machine"].get("nproc") or 1
    busy = [t for t in result.get("timings", []) if max(t["load_before"], t["load_after"]) > nproc]
    noise = (
        f"Load average above {nproc} (the core count) during {len(busy)} of "
        f"{len(result.get('timings', []))} workloads. The load counts the suite's own processes "
        "(worker processes, the competing CPU load some workloads start, Ray, the S3 server) as "
        "well as anything else on this "
        "shared machine, so absolute figures are noisy; the systems of one workload ran back to "
        "back, so quote the medians and the ratios, not single figures.\n"
        if busy else "The load average stayed at or below the core count during the run.\n"
    )
    parts = [
        "# Benchmarks: stokehold vs tf.data vs PyTorch DataLoader\n",
        "Produced by `" + result["command"] + "` (`bench/run.py`) on " + result["date"]
        + f" in {result.get('suite_seconds')} s ({result['mode']} mode; building stokehold took "
        f"{result.get('build_seconds')} s more). Do not edit by hand: "
        "rerun the command. Raw rows: `bench/results/`.\n",
        "## How to reproduce\n",
        "```\nmake bench        # full suite; make bench-quick for a shorter smoke run\n```\n"
        "It creates `bench/.venv`, installs tensorflow-cpu, torch, numpy, maturin and matplotlib "
        "from PyPI (a one-time install of several GB, not counted in the run time above), builds "
        "stokehold with `maturin develop --release`, generates the data in a temporary folder and "
        "runs every workload for every system. The contract for workload scripts is in "
        "`bench/README.md`.\n",
        "## Machine\n", _machine_md(result["machine"]),
        "## Noise\n", noise, _timings_md(result),
    ]
    if result.get("stokehold_build"):
        parts += ["\n**stokehold was not built for this run**: " + result["stokehold_build"] + "\n"]
    parts += ["## Summary: stokehold against the best peer\n",
              "Each side at its best setting among its own rows: the best peer (a peer's variants "
              "included, e.g. `grain/mp_prefetch`) against stokehold's best (its variants "
              "included, named in brackets when not the plain `stokehold` row, e.g. the thread "
              "map `stokehold/threads` where the workload's subject is the process map). "
              "`advantage` > 1: stokehold is better by that factor (for ↓ metrics, peer / stokehold; "
              "for ↑ metrics, stokehold / peer); < 1: the best peer wins. Not counted as peers: "
              "machine limits (memcpy) and floors (a part of the work alone, such as numpy's own part "
              "of a hand-off); not compared: "
              "the bench's set-up (rows marked `bench set-up`, the same code for every system). "
              "The full tables below show them.\n",
              report.summary(rows),
              "## Results\n", report.LEGEND, report.table(rows), NOTES, others(root),
              "## Plots\n"]
    for p, what in ((p1, "Throughput against parallelism"), (p2, "Memory against dataset size")):
        if p:
            parts.append(f"![{what}](benchmarks/{os.path.basename(p)})\n\n")
        else:
            parts.append(f"- {what}: no plot (no rows with that parameter, or no matplotlib).\n")
    os.makedirs(docs, exist_ok=True)
    tmp = os.path.join(docs, ".BENCHMARKS.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(parts))
    os.replace(tmp, os.path.join(docs, "BENCHMARKS.md"))
