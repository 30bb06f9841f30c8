"""Records tf.data's output for the oracle's random pipelines (issue 49).

    PY=bench/.venv/bin/python   # any venv with tensorflow-cpu (never a test dependency)
    $PY testdata/oracle/record.py --seed 0 --count 600 --out testdata/oracle/tf_oracle.json

Writes, for each pipeline of ``pipelines.generate(seed, count)``, the spec and what tf.data
yields in the normal form of ``pipelines.run``. ``python/tests/test_oracle.py`` runs the same
specs in stokehold and compares; ``make oracle`` re-records thousands and runs them.

TensorFlow itself crashes (SIGSEGV) on some pipelines (``unbatch`` of certain inputs): the cases
run in a child process that appends one JSON line per case; when a child dies, the case it was
running is recorded as ``{"crashed": "<signal>"}`` (the test leaves those out and counts them)
and a new child goes on with the next.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pipelines  # noqa: E402


def child(seed: int, count: int, lines: str, start: int) -> None:
    """Runs cases ``start..count``, appending one JSON line each (flushed: a crash loses none)."""
    import tensorflow as tf

    specs = pipelines.generate(seed, count)
    with open(lines, "a") as f:
        for spec in specs[start:]:
            f.write(json.dumps({"spec": spec, "tf": pipelines.run_tf(tf, spec)},
                               separators=(",", ":")) + "\n")
            f.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--out", required=True)
    ap.add_argument("--child-start", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    lines = args.out + ".lines"
    if args.child_start is not None:
        child(args.seed, args.count, lines, args.child_start)
        return
    t0 = time.time()
    specs = pipelines.generate(args.seed, args.count)
    open(lines, "w").close()
    crashed = 0
    while True:
        with open(lines) as f:
            done = sum(1 for _ in f)
        if done >= len(specs):
            break
        r = subprocess.run([sys.executable, __file__, "--seed", str(args.seed), "--count",
                            str(args.count), "--out", args.out, "--child-start", str(done)])
        if r.returncode == 0:
            continue
        with open(lines) as f:
            done = sum(1 for _ in f)
        how = (signal.Signals(-r.returncode).name if r.returncode < 0
               else f"exit {r.returncode}")
        with open(lines, "a") as f:
            f.write(json.dumps({"spec": specs[done], "tf": {"crashed": how}}) + "\n")
        crashed += 1
    import tensorflow as tf

    with open(lines) as f:
        cases = [json.loads(line) for line in f]
    with open(args.out, "w") as f:
        json.dump({"tensorflow": tf.__version__, "seed": args.seed, "limit": pipelines.LIMIT,
                   "cases": cases}, f, separators=(",", ":"))
    os.remove(lines)
    print(f"recorded {len(cases)} pipelines with tensorflow {tf.__version__} in "
          f"{time.time() - t0:.0f} s ({crashed} crashed tensorflow) -> {args.out}")


if __name__ == "__main__":
    main()
