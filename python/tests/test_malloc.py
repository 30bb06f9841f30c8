"""``import stokehold`` leaves the process as it found it; ``stokehold.tune_malloc()`` is the
opt-in (crates/stokehold-python/src/malloc.rs). glibc's malloc thresholds are read back by what
glibc then does with a 1 MiB allocation: mapped on its own under glibc's defaults (above their
128 KiB threshold), taken from the heap and kept there after free once tuned. Each case is a
fresh interpreter with its own environment."""

import ctypes
import ctypes.util
import json
import os
import platform
import subprocess
import sys

import pytest

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="glibc's malloc only",
)

# In the child: import stokehold (and call tune_malloc() when TUNE is set), then malloc and
# free 1 MiB through libc and report what glibc's mallinfo2 saw (hblks: blocks mapped on their
# own; fordblks: free bytes in the heap).
CHILD = r"""
import ctypes, ctypes.util, json, sys
import stokehold

tuned = stokehold.tune_malloc() if sys.argv[1] == "tune" else None

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Mallinfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
before = libc.mallinfo2()
p = libc.malloc(1 << 20)
ctypes.memset(p, 1, 1 << 20)
during = libc.mallinfo2()
libc.free(p)
after = libc.mallinfo2()
print(json.dumps({"tuned": tuned,
                  "again": stokehold.tune_malloc() if tuned else None,
                  "tuning": stokehold.malloc_tuning(),
                  "mapped": during.hblks - before.hblks,
                  "free_kept": after.fordblks}))
"""


def has_mallinfo2():
    return hasattr(ctypes.CDLL(ctypes.util.find_library("c")), "mallinfo2")


def clean_env(**env):
    """This process's environment without glibc's malloc settings, plus ``env``."""
    clean = {k: v for k, v in os.environ.items()
             if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    return dict(clean, **env)


def run_child(code, *args, env):
    out = subprocess.run([sys.executable, "-c", code, *args], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_mallinfo2 = pytest.mark.skipif(not has_mallinfo2(),
                                     reason="needs glibc >= 2.33 (mallinfo2)")

NOT_TUNED = {"by": "not tuned", "mmap_threshold": None, "trim_threshold": None}
TUNED = {"by": "stokehold", "mmap_threshold": 4 << 20, "trim_threshold": 8 << 20}


@glibc_only
@needs_mallinfo2
def test_import_keeps_glibcs_defaults_so_a_1_mib_block_is_mapped():
    got = run_child(CHILD, "import", env=clean_env())
    assert got["tuning"] == NOT_TUNED
    assert got["mapped"] == 1, got


@glibc_only
@needs_mallinfo2
def test_tune_malloc_takes_a_1_mib_block_from_the_heap_and_keeps_it_there():
    got = run_child(CHILD, "tune", env=clean_env())
    assert got["tuned"] == TUNED
    assert got["again"] == TUNED and got["tuning"] == TUNED  # once per process
    assert got["mapped"] == 0, got
    # Freed, it stays in the heap for the next one instead of going back to the kernel.
    assert got["free_kept"] >= 1 << 20, got


@glibc_only
@needs_mallinfo2
def test_the_environments_own_malloc_settings_win_over_tune_malloc():
    # The user's own threshold (256 KiB) holds, not stokehold's 4 MiB: the 1 MiB block is
    # mapped on its own.
    for env in ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=262144"},
                {"MALLOC_MMAP_THRESHOLD_": "262144"}):
        got = run_child(CHILD, "tune", env=clean_env(**env))
        assert got["tuned"] == {"by": "environment", "mmap_threshold": None,
                                "trim_threshold": None}, env
        assert got["tuning"] == got["tuned"]
        assert got["mapped"] == 1, (env, got)


# In the child: the Python-level handlers of a few signals, the kernel's view of which signals
# the process catches or ignores (/proc/self/status SigCgt, SigIgn: a handler installed from
# Rust or C shows there, not in signal.getsignal), its thread count, and the environment, before
# and after `import stokehold`. numpy is imported first: it starts OpenBLAS's threads, and
# glibc installs its internal SIGSETXID handler (signal 33) with a process's first thread.
SNAPSHOT = r"""
import json, os, signal, sys
import numpy

def snapshot():
    names = ("SIGINT", "SIGTERM", "SIGCHLD", "SIGPIPE")
    handlers = {n: repr(signal.getsignal(getattr(signal, n))) for n in names}
    masks = {}
    if os.path.exists("/proc/self/status"):
        with open("/proc/self/status") as f:
            masks = {k: v.strip() for k, v in (l.split(":", 1) for l in f)
                     if k in ("SigCgt", "SigIgn", "Threads")}
    return {"handlers": handlers, "masks": masks, "environ": dict(os.environ)}

before = snapshot()
import stokehold
after = snapshot()
print(json.dumps({"before": before, "after": after}))
"""


def test_import_leaves_signal_handlers_threads_and_the_environment_as_they_were():
    got = run_child(SNAPSHOT, env=dict(os.environ))
    before, after = got["before"], got["after"]
    assert after["handlers"] == before["handlers"]
    assert after["masks"] == before["masks"]
    assert after["environ"] == before["environ"]
