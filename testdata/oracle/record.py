"""Records tf.data's output for the oracle's random pipelines (issue 49).

    PY=bench/.venv/bin/python   # any venv with tensorflow-cpu (never a test dependency)
    $PY testdata/oracle/record.py --seed 0 --count 600 --out testdata/oracle/tf_oracle.json

Writes, for each pipeline of ``pipelines.generate(seed, count)``, the spec and what tf.data
yields in the normal form of ``pipelines.run``. ``python/tests/test_oracle.py`` runs the same
specs in stokehold and compares; ``make oracle`` re-records thousands and runs them.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pipelines  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import tensorflow as tf

    t0 = time.time()
    cases = []
    for spec in pipelines.generate(args.seed, args.count):
        cases.append({"spec": spec, "tf": pipelines.run_tf(tf, spec)})
    with open(args.out, "w") as f:
        json.dump({"tensorflow": tf.__version__, "seed": args.seed, "limit": pipelines.LIMIT,
                   "cases": cases}, f, separators=(",", ":"))
    print(f"recorded {len(cases)} pipelines with tensorflow {tf.__version__} in "
          f"{time.time() - t0:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
