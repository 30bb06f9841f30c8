"""Python map functions (UDFs): stokehold's process map vs its thread map vs torch DataLoader.

Two per-element Python functions, the same function object for every system:
  (a) "pure Python": an integer loop of ~1-2 ms per element that holds the GIL throughout (the
      tokenizer / custom-augmentation case);
  (b) "wav + fft": decode a 1 s, 16 kHz mono WAV file held as bytes with the ``wave`` module,
      then a numpy real FFT of it (magnitudes as float32).

Systems, at 1 and 2 workers:
  stokehold          ds.map(fn, num_parallel_calls=N, processes=True) (forkserver workers, shared
                     memory arena)
  stokehold/threads  ds.map(fn, num_parallel_calls=N) (the thread map: one GIL)
  torch              DataLoader(map-style dataset over a list of the same elements, batch_size=None,
                     num_workers=N), fork workers (torch's default on Linux), not persistent, so
                     each epoch starts its workers as stokehold's does
  grain              MapDataset.source(elements).map(fn).to_iter_dataset(ReadOptions(
                     num_threads=N)), a new iterator per epoch (threads, one GIL)
  grain/mp_prefetch  the same, then .mp_prefetch(MultiprocessingOptions(num_workers=N)):
                     N worker processes started per epoch, each with its threads
  spdl               PipelineBuilder().add_source(elements).pipe(fn, concurrency=N)
                     .add_sink(3).build(num_threads=N), one per epoch (threads)
  dataloader-rs      PyDataloader(Dataset(elements -> fn), batch_size=1 (a loader yields lists),
                     num_workers=N threads), a new one per epoch; CPython 3.13 (GIL), with the
                     glibc malloc thresholds its README sets (GLIBC_TUNABLES)
  stokehold/threads, tune_malloc()
                     the thread map again, in a fresh process that calls stokehold.tune_malloc()
                     first: glibc's defaults (what the other rows run with; importing stokehold
                     leaves them) give back the heap's top whenever a block of 128 KiB or more at
                     it is freed, so each element's arrays are faulted in afresh (in a plain
                     Python loop too); tune_malloc() starts glibc's own dynamic thresholds at
                     4 / 8 MiB instead, keeping freed memory in the heap (GUIDE, "glibc's malloc
                     thresholds"). This row shows what that buys, apart from the loader
The peers (bench/peers/) run each in its own process after the others, the same function on
the same seeded elements (made in their process by this module's py_elements/wav_elements).
Each timed run is one epoch: "throughput" counts the elements after the first (steady state),
"time to first element" is the wait for the first (worker start-up included). Runs are
interleaved across systems; figures are medians of 3.

Memory: a 1 GiB in-memory dataset (4096 float32 rows of 256 KiB; 256 MiB with --quick) mapped by
a light Python function (the row's mean), one epoch with N = 1, 2 workers, each system in a fresh
process; the peak total PSS of the process tree (main + workers) while iterating, and its growth
per added worker; the peers the same (their process tree: Grain's mp_prefetch workers
receive the dataset pickled) (PSS splits shared pages between the processes that map them, so the tree's sum
is the real footprint).
"""

import io
import json
import os
import subprocess
import sys
import time
import wave
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import peers  # noqa: E402  (Grain, SPDL, dataloader-rs: bench/peers/)
from common import proc, rows  # noqa: E402

W_PY = "python UDF: pure Python"
W_WAV = "python UDF: wav + fft"
W_MEM = "python UDF: memory over a cached dataset"
RUNS = 3


# ---- the functions (module level: the worker processes import them) ------------------------------


def pure_python(e):
    x = e["x"]
    seed = int(x) if np.ndim(x) == 0 else int(x[0])
    s = 0
    for k in range(20_000):
        s = (s * 31 + (k ^ seed)) % 1_000_003
    return {"x": np.int64(seed), "h": np.int64(s)}


def wav_fft(e):
    blob = e["wav"]
    if isinstance(blob, np.ndarray):
        blob = blob.item()
    with wave.open(io.BytesIO(blob)) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    spec = np.abs(np.fft.rfft(pcm.astype(np.float32)))
    return {"spec": spec.astype(np.float32), "peak": np.int64(int(np.argmax(spec)))}


def row_mean(e):
    return {"m": np.float32(e["x"].mean())}


# ---- data ---------------------------------------------------------------------------------------


def wav_bytes(n, seconds=1.0, rate=16_000):
    rng = np.random.default_rng(1)
    out = []
    t = np.arange(int(seconds * rate)) / rate
    for i in range(n):
        tone = np.sin(2 * np.pi * (200 + 10 * (i % 50)) * t) * 8000
        pcm = (tone + rng.normal(0, 500, t.shape)).astype(np.int16)
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(pcm.tobytes())
        out.append(buf.getvalue())
    return out


def py_elements(n):
    return [{"x": np.int64(i)} for i in range(n)]


def wav_elements(n):
    return [{"wav": b} for b in wav_bytes(n)]


def mem_data(mib):
    """(rows, 65536) float32, seeded: 256 KiB rows."""
    return np.random.default_rng(0).random((mib * 4, 65536), dtype=np.float32)


def mem_elements(mib):
    data = mem_data(mib)
    return [{"x": data[i]} for i in range(len(data))]


def source_data(fn, n):
    """(stokehold's columns, the peers' list of elements) for ``fn``'s workload."""
    elements = globals()[PEER_ELEMENTS[fn]](n)
    if fn is wav_fft:
        col = np.empty(n, dtype=object)
        col[:] = [e["wav"] for e in elements]
        return {"wav": col}, elements
    return {"x": np.arange(n, dtype=np.int64)}, elements


# The peers (bench/peers/, each in its own process) call these by name: "udf.bench:NAME".
PEER_ELEMENTS = {pure_python: "py_elements", wav_fft: "wav_elements", row_mean: "mem_elements"}


def peer_args(fn, **kw):
    return dict(kw, fn=f"udf.bench:{fn.__name__}", elements=f"udf.bench:{PEER_ELEMENTS[fn]}")


# ---- systems ------------------------------------------------------------------------------------


def stokehold_epoch(source, fn, workers, processes):
    # `source` is built once, outside the timing, as torch's list of elements is: the first
    # element's wait is then start-up (workers, the map), not copying the data into an arena.
    return iter(source.map(fn, num_parallel_calls=workers, processes=processes))


def torch_epoch(elements, fn, workers):
    import torch.utils.data

    class Elements(torch.utils.data.Dataset):
        def __len__(self):
            return len(elements)

        def __getitem__(self, i):
            return fn(elements[i])

    loader = torch.utils.data.DataLoader(Elements(), batch_size=None, num_workers=workers)
    return iter(loader)


def timed(make):
    """(elements/s after the first element, seconds to the first element: start-up included)."""
    t0 = time.perf_counter()
    it = make()
    next(it)
    first = time.perf_counter() - t0
    n = sum(1 for _ in it)
    steady = time.perf_counter() - t0 - first
    del it
    return n / steady, first


def throughput_rows(workload, columns, elements, fn, n, unit, quick):
    have_torch = True
    try:
        import torch  # noqa: F401
    except ImportError:
        have_torch = False
    import stokehold as sh

    source = sh.from_arrays(columns)
    systems = {
        "stokehold": lambda w: (lambda: stokehold_epoch(source, fn, w, True)),
        "stokehold/threads": lambda w: (lambda: stokehold_epoch(source, fn, w, False)),
    }
    if have_torch:
        systems["torch"] = lambda w: (lambda: torch_epoch(elements, fn, w))
    out = []
    speed = {}
    for workers in (1, 2):
        config = f"{n} elements, {workers} worker{'s' if workers > 1 else ''}"
        got = {s: ([], []) for s in systems}
        for _ in range(RUNS):
            for name, make in systems.items():
                rate, first = timed(make(workers))
                got[name][0].append(rate)
                got[name][1].append(first)
                print(f"{workload} {config} {name}: {rate:.0f} {unit}, first {first:.3f} s",
                      file=sys.stderr)
        for name, (rates, firsts) in got.items():
            params = {"parallelism": workers}
            out.append(rows.median_row(workload, name, config, "throughput", rates, unit,
                                       params=params))
            out.append(rows.median_row(workload, name, config, "time to first element", firsts,
                                       "s", better="lower"))
            speed[(name, workers)] = sorted(rates)[len(rates) // 2]
        if not have_torch:
            out.append(rows.unavailable(workload, "torch", config, "torch is not installed"))
        out += malloc_rows(workload, config, fn, n, workers, unit)
        out += peers.throughput_rows(workload, config, "throughput", unit, "udf", peer_args(
            fn, n=n, par=workers, runs=RUNS), params={"parallelism": workers},
            systems=peers.WITH_PROCESSES)
    for r in out:
        if r["metric"] == "throughput" and r["value"] and r["system"] not in systems:
            speed[(r["system"], r["params"]["parallelism"])] = r["value"]
    for name in dict.fromkeys(s for s, _ in speed):
        if (name, 1) in speed and (name, 2) in speed:
            out.append(rows.row(workload, name, f"{n} elements", "speed-up 2 workers / 1",
                                speed[(name, 2)] / speed[(name, 1)], "x", better="higher"))
    return out


# ---- the thread map with stokehold.tune_malloc() (a fresh process) -----------------------------

TUNED = "stokehold/threads, tune_malloc()"


def malloc_child(fn_name, n, workers):
    """The thread map's timed runs after ``stokehold.tune_malloc()``, printed as JSON."""
    import stokehold as sh

    assert sh.malloc_tuning()["by"] == "not tuned", sh.malloc_tuning()  # import left it
    tuned = sh.tune_malloc()
    assert tuned["by"] == "stokehold", tuned
    fn = {f.__name__: f for f in PEER_ELEMENTS}[fn_name]
    columns, _ = source_data(fn, n)
    source = sh.from_arrays(columns)
    got = [timed(lambda: stokehold_epoch(source, fn, workers, False)) for _ in range(RUNS)]
    print(json.dumps({"rates": [g[0] for g in got], "firsts": [g[1] for g in got]}))


def malloc_rows(workload, config, fn, n, workers, unit):
    """The thread map again, in a process that calls ``stokehold.tune_malloc()`` first: what
    starting glibc's rule at 4 / 8 MiB buys a function that makes arrays of 128 KiB and more per
    element, apart from the loader (a plain Python loop gains as much). The ``stokehold/threads``
    row beside it is the same map with glibc's defaults."""
    cmd = [sys.executable, __file__, "--json", "-", "--malloc-child", fn.__name__, str(n),
           str(workers)]
    env = {k: v for k, v in os.environ.items()
           if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        return [rows.unavailable(workload, TUNED, config, f"failed: {res.stderr[-200:]}")]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    note = "the thread map after stokehold.tune_malloc(): glibc's rule started at 4 / 8 MiB"
    print(f"{workload} {config} {TUNED}: {got}", file=sys.stderr)
    return [rows.median_row(workload, TUNED, config, "throughput", got["rates"], unit,
                            params={"parallelism": workers}, note=note),
            rows.median_row(workload, TUNED, config, "time to first element",
                            got["firsts"], "s", better="lower")]


# ---- memory (each system in a fresh process) ----------------------------------------------------


def mem_child(system, workers, mib):
    rows_n = mib * 4  # 256 KiB rows
    if system == "torch":
        import torch.utils.data

        elements = mem_elements(mib)

        class Elements(torch.utils.data.Dataset):
            def __len__(self):
                return rows_n

            def __getitem__(self, i):
                return row_mean(elements[i])

        it = iter(torch.utils.data.DataLoader(Elements(), batch_size=None, num_workers=workers))
    else:
        import stokehold as sh

        ds = sh.from_arrays({"x": mem_data(mib)}).map(row_mean, num_parallel_calls=workers,
                                              processes=system == "stokehold")
        it = iter(ds)
    peak = 0
    for i, _ in enumerate(it):
        if i % 256 == 128:
            peak = max(peak, proc.tree()["total_pss"])
    peak = max(peak, proc.tree()["total_pss"])
    print(json.dumps({"pss": peak}))


def memory_rows(quick):
    mib = 256 if quick else 1024
    systems = ["stokehold", "stokehold/threads"]
    try:
        import torch  # noqa: F401

        systems.append("torch")
    except ImportError:
        pass
    out = []
    for name in systems + list(peers.WITH_PROCESSES):
        pss = {}
        for workers in (1, 2):
            if name in systems:
                cmd = [sys.executable, __file__, "--json", "-", "--mem-child", name, str(workers),
                       str(mib)]
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if res.returncode != 0:
                    print(res.stderr, file=sys.stderr)
                    out.append(rows.unavailable(W_MEM, name, f"{mib} MiB",
                                                f"failed: {res.stderr[-200:]}"))
                    break
                got = json.loads(res.stdout.strip().splitlines()[-1])
            else:  # a peer, in its own process through bench/peers/child.py
                got = peers.run_child(name, "udf_mem", peer_args(row_mean, mib=mib, par=workers),
                                      timeout=600)
                if "error" in got:
                    out.append(rows.unavailable(W_MEM, name, f"{mib} MiB", got["error"]))
                    break
            pss[workers] = got["pss"] / proc.MiB
            print(f"{W_MEM} {name} {workers} workers: total PSS {pss[workers]:.0f} MiB", file=sys.stderr)
            out.append(rows.row(W_MEM, name, f"{mib} MiB dataset, {workers} workers", "total PSS",
                                pss[workers], "MiB", params={"dataset_bytes": mib * proc.MiB},
                                note=peers.NOTES.get(name)))
        if len(pss) == 2:
            out.append(rows.row(W_MEM, name, f"{mib} MiB dataset", "PSS per added worker",
                                pss[2] - pss[1], "MiB", better="lower"))
    return out


def main():
    p = rows.workload_args(__doc__.splitlines()[0])
    p.add_argument("--mem-child", nargs=3, help=argparse_hidden())
    p.add_argument("--malloc-child", nargs=3, help=argparse_hidden())
    args = p.parse_args()
    if args.malloc_child:
        fn_name, n, workers = args.malloc_child
        malloc_child(fn_name, int(n), int(workers))
        return
    if args.mem_child:
        name, workers, mib = args.mem_child
        mem_child(name, int(workers), int(mib))
        return
    # Full runs are long enough (several seconds an epoch) that a worker started after the first
    # element is a small part of the steady-state window.
    n_py, n_wav = (150, 200) if args.quick else (2400, 3000)
    out = []
    for workload, fn, n in ((W_PY, pure_python, n_py), (W_WAV, wav_fft, n_wav)):
        columns, elements = source_data(fn, n)
        out += throughput_rows(workload, columns, elements, fn, n, "elements/s", args.quick)
    out += memory_rows(args.quick)
    rows.write_json(args.json, out)


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
