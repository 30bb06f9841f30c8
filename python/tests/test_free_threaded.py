"""Free-threaded CPython (3.13t / 3.14t): the native module declares it needs no GIL, so the thread
map runs Python functions in parallel without processes. Runs only on such an interpreter; on a
GIL build it is skipped, saying so."""

import sys
import sysconfig

import pytest

import stokehold as sh

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

pytestmark = pytest.mark.skipif(
    not FREE_THREADED,
    reason=f"needs a free-threaded CPython (3.13t/3.14t); this is {sys.version.split()[0]} with "
    "the GIL (Debian 12 packages no free-threaded build): run pytest from a python3.13t venv "
    "with `maturin develop` to exercise it",
)


def test_importing_stokehold_leaves_the_gil_off():
    assert sh.__version__
    assert not sys._is_gil_enabled()  # CPython re-enables it for modules that need it


def test_thread_map_of_python_functions_keeps_the_gil_off():
    def busy(e):
        s = 0
        for k in range(20_000):
            s += k % 7
        return {"x": e["x"], "s": s}

    want = [int(e["x"]) for e in sh.Dataset.range(64)]
    got = [int(e["x"]) for e in sh.Dataset.range(64).map(busy, num_parallel_calls=2)]
    assert got == want
    assert not sys._is_gil_enabled()
