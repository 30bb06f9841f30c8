"""Result rows: the contract between workload scripts and the driver.

A row is a dict with the required keys {workload, system, config, metric, value,
unit} and optional ones: ``runs`` (the raw figures the median came from),
``better`` ("higher" | "lower"), ``note`` (why a value is missing, or a caveat),
``params`` (numbers for plots: ``parallelism``, ``dataset_bytes``, ...).
``value`` is None when a system cannot run a workload; ``note`` then says why.
See bench/README.md.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

REQUIRED = ("workload", "system", "config", "metric", "value", "unit")
REFERENCE = "stokehold"


def row(workload, system, config, metric, value, unit, runs=None, better=None,
        note=None, params=None):
    """Build one row; ``value`` may be None (then give a ``note``)."""
    r = {"workload": workload, "system": system, "config": config,
         "metric": metric, "value": value, "unit": unit}
    if runs is not None:
        r["runs"] = list(runs)
    if better is not None:
        r["better"] = better
    if note is not None:
        r["note"] = note
    if params:
        r["params"] = dict(params)
    return r


def median_row(workload, system, config, metric, runs, unit, **kw):
    """A row whose value is the median of ``runs`` (None entries dropped)."""
    vals = [v for v in runs if v is not None]
    value = statistics.median(vals) if vals else None
    return row(workload, system, config, metric, value, unit, runs=vals, **kw)


def unavailable(workload, system, config, why):
    """A row saying that ``system`` cannot run this workload, and why."""
    return row(workload, system, config, "status", None, "", note=why)


def better_of(r):
    """'higher' or 'lower': the row's own word, else guessed from its unit."""
    if r.get("better") in ("higher", "lower"):
        return r["better"]
    return "higher" if "/s" in r.get("unit", "") else "lower"


def validate(r):
    """Raise ValueError if ``r`` breaks the contract."""
    missing = [k for k in REQUIRED if k not in r]
    if missing:
        raise ValueError(f"row {r!r} lacks {missing}")
    if r["value"] is not None and not isinstance(r["value"], (int, float)):
        raise ValueError(f"row value must be a number or null: {r!r}")


def write_json(path, rows):
    """Write rows atomically (temp name + rename) as {"rows": [...]}."""
    for r in rows:
        validate(r)
    path = os.path.abspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    os.replace(tmp, path)


def read_json(path):
    """Rows from a file written by ``write_json`` (or a bare list)."""
    with open(path) as f:
        data = json.load(f)
    return data["rows"] if isinstance(data, dict) else data


def workload_args(description):
    """The contract's command line: ``--quick`` and ``--json OUT``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes, <= ~25 s")
    p.add_argument("--json", required=True, help="write the rows here")
    return p


def tmp_root():
    """Parent folder for generated data: $BENCH_TMPDIR if the driver set it."""
    return os.environ.get("BENCH_TMPDIR") or None


def print_ratios(out, tag, goal):
    """An issue's comparison, one line per config on stderr: stokehold's median (its best among
    the ``stokehold`` and ``stokehold/...`` rows, as the summary takes it) over each peer's and
    over the best peer's, beside the goal (``goal`` x the best peer; None: the issue sets none).
    Higher is better; floors are no peers."""
    for cfg in dict.fromkeys(r["config"] for r in out):
        got = {r["system"]: r["value"] for r in out if r["config"] == cfg and r["value"]}
        ours = [s for s in got if s == REFERENCE or s.startswith(REFERENCE + "/")]
        peers = {s: v for s, v in got.items() if s not in ours and "floor" not in s}
        if not ours or not peers:
            continue
        mine = max(ours, key=got.get)
        each = ", ".join(f"{got[mine] / v:.2f}x {s}" for s, v in peers.items())
        best = max(peers, key=peers.get)
        aim = "" if goal is None else f" (goal >= {goal}x)"
        print(f"({tag}) {cfg}: {mine} / best peer ({best}) = {got[mine] / peers[best]:.2f}x"
              f"{aim}; {each}", file=sys.stderr, flush=True)
