#!/usr/bin/env python3
"""The one-command benchmark driver: stokehold vs tf.data vs PyTorch DataLoader.

    python3 bench/run.py [--quick] [--python PY] [--no-build] [--only NAME,...]

Without --python it creates bench/.venv (git-ignored) and installs
bench/suite/requirements.txt there (a one-time install, not counted in the suite's
time budget), builds stokehold in release mode into that venv, generates data in
one temporary folder, runs every workload script (the contract is in
bench/README.md), and writes bench/results/<date>[-quick].json and .md; a full run
also rewrites docs/BENCHMARKS.md and its plots. It runs on the standard library
alone, so any python3 can start it.
"""

import argparse
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

from common import machine, report, rows as rowlib  # noqa: E402
from common.docs import write_docs  # noqa: E402

# (name, script): ours first, then the other areas' scripts as they land.
WORKLOADS = [
    ("machine limits", "bench/suite/machine_limits.py"),
    ("audio cache + epochs", "bench/suite/audio.py"),
    ("native decode -> cache(): memory", "bench/suite/audio_native.py"),
    ("epoch restart", "bench/suite/epoch_restart.py"),
    ("lazy file map / parallel map", "bench/parallel/bench.py"),
    ("TFRecord scan + parse", "bench/tfrecord/bench.py"),
    ("shards: reads + shuffle quality", "bench/shard/bench.py"),
    ("feature-table gather", "bench/table/bench.py"),
    ("soak: faults over epochs", "bench/soak/bench.py"),
    ("bucketing + packing", "bench/sequence/bench.py"),
    ("python UDFs: processes vs threads vs torch", "bench/udf/bench.py"),
    ("audio decode -> log-mel", "bench/audio_decode/bench.py"),
    ("Ray: remote_map, read_stokehold, from_ray", "bench/ray/bench.py"),
    ("images: decode + augment", "bench/image/bench.py"),
    ("peers: what Grain, SPDL, dataloader-rs cannot run", "bench/peers/bench.py"),
    ("Python map vs a Python loop", "bench/pymap/bench.py"),
    ("remote: S3 (moto) vs local, shard cache", "bench/remote/bench.py"),
    ("hand-off of a ready batch, release of a large one", "bench/handoff/bench.py"),
    ("Parquet epoch: sequential + shuffled", "bench/parquet/bench.py"),
    ("WebDataset image epoch", "bench/webdataset/bench.py"),
    ("JSONL epoch", "bench/jsonl/bench.py"),
    ("token pipelines: windows, tokenize + pack, index build", "bench/tokens/bench.py"),
]
TIMEOUT = {"quick": 120, "full": 900}
REQUIREMENTS = BENCH / "suite" / "requirements.txt"


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def ensure_venv(venv):
    """Create ``venv`` and install the requirements unless already done for this file."""
    py = venv / "bin" / "python"
    stamp = venv / ".requirements.sha256"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    if not py.exists():
        log(f"creating {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log("installing tensorflow-cpu, torch, numpy, maturin, matplotlib (one-time, slow; "
        "not part of the suite's time budget)")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(want)
    return py


def ensure_venv313(given):
    """(python, None) of a CPython 3.13 venv with dataloader-rs, or (None, why not).

    dataloader-rs 0.2.0 requires Python >= 3.13 and megatron-core 0.19 >= 3.12 (bench/peers/,
    bench/tokens); the other peers run in the main bench venv. ``given`` (--python313) is used
    as is; else bench/.venv313 is made from the first python3.13 found (PATH, then pyenv).
    """
    if given:
        return given, None
    venv = BENCH / ".venv313"
    py = venv / "bin" / "python"
    reqs = BENCH / "peers" / "requirements313.txt"
    nodeps = BENCH / "peers" / "requirements313-nodeps.txt"  # megatron-core, without its deps
    stamp = venv / ".requirements.sha256"
    want = hashlib.sha256(reqs.read_bytes() + nodeps.read_bytes()).hexdigest()
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return str(py), None
    # pyenv's shim is on PATH even where 3.13 is not the selected version: try real ones first.
    cands = [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.13*/bin/python"))]
    cands += [c for c in [shutil.which("python3.13")] if c]
    base = next((c for c in cands if subprocess.run([c, "-c", "pass"], capture_output=True)
                 .returncode == 0), None)
    if base is None:
        return None, "no CPython 3.13 interpreter on PATH or in ~/.pyenv"
    try:
        if not py.exists():
            subprocess.run([base, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(reqs)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "-r", str(nodeps)],
                       check=True)
    except subprocess.CalledProcessError as e:
        return None, f"making bench/.venv313 failed: {e}"
    stamp.write_text(want)
    return str(py), None


def find_pyproject():
    for cand in ("pyproject.toml", "python/pyproject.toml", "crates/stokehold-python/pyproject.toml"):
        p = ROOT / cand
        if p.exists() and "maturin" in p.read_text():
            return p
    return None


def build_stokehold(py):
    """maturin develop --release into the venv of ``py``; returns None or why it failed."""
    pyproject = find_pyproject()
    if pyproject is None:
        return "the stokehold Python package (a maturin pyproject.toml) is not in this checkout yet"
    venv = Path(py).parent.parent
    env = dict(os.environ, VIRTUAL_ENV=str(venv), PATH=f"{venv}/bin:{os.environ['PATH']}")
    env.setdefault("CARGO_TARGET_DIR", str(ROOT / "target"))
    log(f"building stokehold (release) from {pyproject.relative_to(ROOT)}")
    proc = subprocess.run([str(py), "-m", "maturin", "develop", "--release", "-q"],
                          cwd=pyproject.parent, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        return "building stokehold failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
    return None


def run_workload(py, name, script, quick, tmp, env):
    """Run one workload script under the contract; return its rows (or a row saying why not)."""
    path = ROOT / script
    if not path.exists():
        return [rowlib.unavailable(name, "all", "—", f"not yet available ({script} missing)")]
    out = Path(tmp) / (Path(script).parent.name + ".json")
    cmd = [str(py), str(path), "--json", str(out)] + (["--quick"] if quick else [])
    limit = TIMEOUT["quick" if quick else "full"]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return [rowlib.unavailable(name, "all", "—", f"timed out after {limit} s ({script})")]
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        sys.stderr.write(proc.stderr[-3000:])
        return [rowlib.unavailable(name, "all", "—", f"{script} failed (exit {proc.returncode}): {tail}")]
    try:
        got = rowlib.read_json(out)
        for r in got:
            rowlib.validate(r)
        return got
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        return [rowlib.unavailable(name, "all", "—", f"{script} wrote bad rows: {e}")]


def command(args):
    """How this run was started, as a user would type it."""
    if not (args.python or args.only or args.no_build):
        return "make bench" + ("-quick" if args.quick else "")
    return "python3 bench/run.py " + " ".join(sys.argv[1:])


def write_results(result, stem):
    """bench/results/<stem>.json (everything) and .md (the tables), with ratios."""
    report.add_ratios(result["rows"])
    results = BENCH / "results"
    results.mkdir(exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (results / f"{stem}.md").write_text(
        f"Machine: {result['machine'].get('nproc')} cores; `{result['command']}` on "
        f"{result['date']}; see docs/BENCHMARKS.md for the notes.\n\n"
        + report.LEGEND + "\n" + report.summary(result["rows"]) + "\n"
        + report.table(result["rows"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes; the whole suite in <= 3 min")
    ap.add_argument("--python", help="use this interpreter instead of creating bench/.venv")
    ap.add_argument("--no-build", action="store_true", help="do not rebuild stokehold")
    ap.add_argument("--python313", help="a CPython >= 3.13 with dataloader-rs (bench/peers/)")
    ap.add_argument("--only", help="comma-separated substrings of workload names to run")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/BENCHMARKS.md after --quick too")
    ap.add_argument("--docs-from", metavar="JSON",
                    help="only rewrite docs/BENCHMARKS.md from a results file, and exit")
    args = ap.parse_args()
    if args.docs_from:
        result = json.loads(Path(args.docs_from).read_text())
        if Path(args.docs_from).resolve().parent == (BENCH / "results").resolve():
            write_results(result, Path(args.docs_from).stem)  # the .md beside it, too
        report.add_ratios(result["rows"])
        write_docs(ROOT, result)
        log("wrote docs/BENCHMARKS.md")
        return

    py = Path(args.python) if args.python else ensure_venv(BENCH / ".venv")
    t_build = time.perf_counter()
    build_note = None if args.no_build else build_stokehold(py)
    build_s = round(time.perf_counter() - t_build, 1)
    if build_note:
        log(f"stokehold not built: {build_note}")
    mode = "quick" if args.quick else "full"
    info = machine.describe(str(py))
    log(f"machine: {info['nproc']} cores, {info['mem_total_gib']} GiB; versions {info['versions']}")

    tmp = tempfile.mkdtemp(prefix="stokehold-bench-")
    env = dict(os.environ, BENCH_TMPDIR=tmp, PYTHONPATH=str(BENCH), TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONUNBUFFERED="1")
    if build_note:
        env["BENCH_STOKEHOLD_MISSING"] = build_note
    py313, why313 = ensure_venv313(args.python313)
    env.update({"BENCH_PY313": py313} if py313 else {"BENCH_PY313_MISSING": why313})
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    stem = date + ("-quick" if args.quick else "")
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "mode": mode, "command": command(args),
              "machine": info, "stokehold_build": build_note, "build_seconds": build_s,
              "suite_seconds": None, "timings": [], "rows": []}
    t_suite = time.perf_counter()
    try:
        for name, script in WORKLOADS:
            if args.only and not any(s.strip() in name for s in args.only.split(",")):
                continue
            waited, busy = machine.settle() if not args.quick else (0.0, 0.0)
            load0, t0 = machine.loadavg(), time.perf_counter()
            log(f"{name}: {script} (cores quiet after {waited:.0f} s: {busy:.0%} busy)")
            got = run_workload(py, name, script, args.quick, tmp, env)
            secs = time.perf_counter() - t0
            result["timings"].append({"workload": name, "seconds": round(secs, 1),
                                      "settle_seconds": round(waited, 1),
                                      "load_before": round(load0, 2),
                                      "load_after": round(machine.loadavg(), 2)})
            log(f"{name}: {len(got)} rows in {secs:.0f} s (load {load0:.1f} -> {machine.loadavg():.1f})")
            result["rows"] += got
            result["suite_seconds"] = round(time.perf_counter() - t_suite, 1)
            write_results(result, stem)  # after each workload: a stopped run keeps what it had
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    all_rows = result["rows"]
    log(f"wrote bench/results/{stem}.json and .md ({result['suite_seconds']:.0f} s)")
    if mode == "full" or args.docs:
        # The plots need matplotlib, which the bench venv has and this interpreter may not.
        subprocess.run([str(py), str(Path(__file__).resolve()), "--docs-from",
                        str(BENCH / "results" / f"{stem}.json")], check=True)
    print(report.table(all_rows))


if __name__ == "__main__":
    main()
