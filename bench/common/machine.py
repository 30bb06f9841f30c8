"""What machine and software a result came from, and how busy the machine was."""

import os
import platform
import subprocess
import time


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def lscpu_summary():
    """Selected lscpu fields as a dict (model, cores, caches)."""
    keep = ("Architecture", "Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket",
            "Socket(s)", "L2 cache", "L3 cache", "Hypervisor vendor")
    out = {}
    for line in _run(["lscpu"]).splitlines():
        key, _, val = line.partition(":")
        if key.strip() in keep:
            out[key.strip()] = val.strip()
    return out


def mem_total_gib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    return None


def loadavg():
    """The 1-minute load average: above nproc means other work competed for the cores."""
    return os.getloadavg()[0]


def busy_fraction(seconds=1.0):
    """Share of all cores' time spent busy (not idle or waiting on I/O) over ``seconds``."""
    def sample():
        with open("/proc/stat") as f:
            # user nice system idle iowait irq softirq steal (guest time is inside user / nice)
            v = [int(x) for x in f.readline().split()[1:9]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def settle(quiet=0.15, limit=90.0):
    """Waits until the cores are quiet (under ``quiet`` busy for two seconds running), at most
    ``limit`` s; returns (seconds waited, last busy fraction). A workload that follows one which
    leaves processes behind (Ray's) is then not measured while they wind down: the load average
    cannot tell this, as it lags by a minute."""
    t0, calm, busy = time.perf_counter(), 0, 1.0
    while time.perf_counter() - t0 < limit:
        busy = busy_fraction(1.0)
        calm = calm + 1 if busy < quiet else 0
        if calm >= 2:
            break
    return time.perf_counter() - t0, busy


def describe(python):
    """Machine and package versions, using the bench interpreter ``python`` for the latter."""
    # Package metadata, not imports: importing tensorflow costs seconds.
    code = (
        "import json, sys\n"
        "from importlib import metadata\n"
        "v = {'python': sys.version.split()[0]}\n"
        "for m in ('numpy', 'tensorflow-cpu', 'tensorflow', 'torch', 'stokehold', 'matplotlib'):\n"
        "    try:\n"
        "        v[m] = metadata.version(m)\n"
        "    except metadata.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(v))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        import json
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300,
                             env=env).stdout.strip().splitlines()
        versions = json.loads(out[-1]) if out else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        versions = {}
    return {
        "nproc": os.cpu_count(),
        "lscpu": lscpu_summary(),
        "mem_total_gib": round(mem_total_gib() or 0, 1),
        "kernel": platform.release(),
        "versions": versions,
        "git_commit": _run(["git", "rev-parse", "--short", "HEAD"]),
    }
