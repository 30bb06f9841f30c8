"""Time to the first element of a Python map on one and on two workers, epoch after epoch in one
process: a 1 ms pure-Python function (it holds the GIL throughout) over 20 elements, each epoch
read to its end. The first element is computed in about 1 ms; when another call of the stage
takes the GIL before the consumer takes it back, the element waits for that call too. Not part
of `make bench` (whose figure is the median of three epochs in a fresh process, start-up
included); an A/B between builds:
    python bench/micro/first_element.py [P ...]      (with stokehold importable: make test's .venv)
Prints, for each number of workers (1 and 2 by default), the median over 60 epochs and how many
first elements came later than 1.8 ms.
"""
import statistics
import sys
import time

import numpy as np

import stokehold as sh

EPOCHS = 60
LATE = 1.8e-3


def busy(e):
    t = time.perf_counter()
    while time.perf_counter() - t < 1e-3:
        pass
    return {"x": e["x"]}


def main():
    src = sh.from_arrays({"x": np.arange(20)})
    for p in [int(a) for a in sys.argv[1:]] or [1, 2]:
        ds = src.map(busy, num_parallel_calls=p)
        firsts = []
        for _ in range(EPOCHS):
            t0 = time.perf_counter()
            it = iter(ds)
            next(it)
            firsts.append(time.perf_counter() - t0)
            for _ in it:
                pass
        late = sum(f > LATE for f in firsts)
        print(f"{p} worker(s): median {statistics.median(firsts) * 1e3:.2f} ms, "
              f"later than {LATE * 1e3:.1f} ms: {late}/{EPOCHS}", flush=True)


if __name__ == "__main__":
    main()
