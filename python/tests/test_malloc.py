"""glibc's malloc thresholds set on import (crates/stokehold-python/src/malloc.rs), read back by
what glibc then does with a 1 MiB allocation: mapped on its own under glibc's defaults (above
their 128 KiB threshold), taken from the heap and kept there after free under stokehold's. Each
case is a fresh interpreter with its own environment."""

import ctypes
import ctypes.util
import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="glibc's malloc only",
)

# In the child: import stokehold, then malloc and free 1 MiB through libc and report what
# glibc's mallinfo2 saw (hblks: blocks mapped on their own; fordblks: free bytes in the heap).
CHILD = r"""
import ctypes, ctypes.util, json
import stokehold

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
print(json.dumps({"tuning": stokehold.malloc_tuning(),
                  "mapped": during.hblks - before.hblks,
                  "free_kept": after.fordblks}))
"""


def has_mallinfo2():
    return hasattr(ctypes.CDLL(ctypes.util.find_library("c")), "mallinfo2")


def run_child(**env):
    clean = {k: v for k, v in os.environ.items()
             if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")
             and k != "STOKEHOLD_MALLOC_TUNING"}
    out = subprocess.run([sys.executable, "-c", CHILD], env=dict(clean, **env),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not has_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_import_raises_the_thresholds_so_a_1_mib_array_comes_from_the_heap_and_stays():
    got = run_child()
    assert got["tuning"] == {"by": "stokehold", "mmap_threshold": 4 << 20,
                             "trim_threshold": 8 << 20}
    assert got["mapped"] == 0, got
    # Freed, it stays in the heap for the next one instead of going back to the kernel.
    assert got["free_kept"] >= 1 << 20, got


@pytest.mark.skipif(not has_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_opting_out_keeps_glibcs_defaults():
    got = run_child(STOKEHOLD_MALLOC_TUNING="0")
    assert got["tuning"] == {"by": "opted out", "mmap_threshold": None, "trim_threshold": None}
    assert got["mapped"] == 1, got


@pytest.mark.skipif(not has_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_the_environments_own_malloc_settings_are_left_as_they_are():
    # The user's own threshold (256 KiB) holds, not stokehold's 4 MiB: the 1 MiB block is
    # mapped on its own.
    got = run_child(GLIBC_TUNABLES="glibc.malloc.mmap_threshold=262144")
    assert got["tuning"]["by"] == "environment"
    assert got["mapped"] == 1, got
    got = run_child(MALLOC_MMAP_THRESHOLD_="262144")
    assert got["tuning"]["by"] == "environment"
    assert got["mapped"] == 1, got
