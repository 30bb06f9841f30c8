"""One system per process: a workload script runs itself as a child for each system.

    # in bench/<area>/bench.py
    if children.is_child():
        children.child_main(run_system)       # run_system(system, args) -> {"runs": [...]}
    ...
    got = children.run(__file__, "pyarrow", {"folder": d}, timeout=300)
    # {"runs": [...], "note": ...} or {"error": "why not"}

A child prints one JSON line: ``{"runs": [...], ...}``; ``{"error": why}`` (or raising
``Unavailable(why)``) says that the system cannot run the workload here, and why; any other
exception fails the child, and its last stderr line is the reason. Each system in its own process
keeps its imports, thread pools and allocator out of the others' figures.
"""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from . import rows

ROOT = Path(__file__).resolve().parents[2]


class Unavailable(Exception):
    """Raised in a child: this system cannot run the workload here (the message says why)."""


def is_child():
    return len(sys.argv) > 1 and sys.argv[1] == "--child"


def child_main(run_system):
    """``python bench.py --child SYSTEM`` with the JSON arguments on stdin (2,000 paths do not
    fit a command line): print run_system's result as one line."""
    system, args = sys.argv[2], json.loads(sys.stdin.read())
    try:
        out = run_system(system, args)
    except Unavailable as e:
        out = {"error": str(e)}
    print(json.dumps(out), flush=True)


def python313():
    """(interpreter, None) of the CPython 3.13 bench venv, or (None, why not): dataloader-rs and
    megatron-core 0.19 need Python >= 3.12; bench/run.py makes bench/.venv313 (see README)."""
    py = os.environ.get("BENCH_PY313") or str(ROOT / "bench" / ".venv313" / "bin" / "python")
    if Path(py).exists():
        return py, None
    return None, os.environ.get("BENCH_PY313_MISSING") or "no CPython 3.13 venv (bench/.venv313)"


def run(script, system, args, timeout, python=None, env=None):
    """The child's {"runs": [...], ...} or {"error": why} for ``system`` on ``args``."""
    cmd = [python or sys.executable, str(script), "--child", system]
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "bench"), **(env or {}))
    print(f"{Path(script).parent.name}: {system} ...", file=sys.stderr, flush=True)
    try:
        p = subprocess.run(cmd, input=json.dumps(args), capture_output=True, text=True,
                           timeout=timeout, cwd=ROOT, env=full_env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        sys.stderr.write(p.stderr[-2000:])
        tail = (p.stderr.strip().splitlines() or ["?"])[-1][:300]
        return {"error": f"{system} failed (exit {p.returncode}): {tail}"}
    out = json.loads(lines[-1])
    print(f"  {system}: {out}", file=sys.stderr, flush=True)
    return out


def rows_of(workload, system, config, got, metrics):
    """Rows of a child's result: for each (metric, key, unit, better) of ``metrics`` a median row
    of ``got[key]`` (a list of figures), or one null row with the reason."""
    if "error" in got:
        return [rows.unavailable(workload, system, config, got["error"])]
    out = []
    for metric, key, unit, better in metrics:
        if key in got:
            out.append(rows.median_row(workload, system, config, metric, got[key], unit,
                                       better=better, note=got.get("note"),
                                       params=got.get("params")))
    return out


def cpu_seconds():
    """CPU seconds (user + system) of this process and of its waited-for children so far: the
    difference over a run is the CPU it cost, whatever the number of threads or workers (a
    DataLoader's workers count once the iterator has joined them)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(make_epoch, runs, warmup=1):
    """(seconds, cpu_seconds, items) of each of ``runs`` epochs after ``warmup`` untimed ones;
    ``make_epoch(e)`` returns an iterable of item counts (a batch's length)."""
    secs, cpus, items = [], [], []
    for e in range(warmup + runs):
        c, t = cpu_seconds(), time.perf_counter()
        n = sum(make_epoch(e))
        dt, dc = time.perf_counter() - t, cpu_seconds() - c
        if e >= warmup:
            secs.append(dt)
            cpus.append(dc)
            items.append(n)
    return secs, cpus, items
