"""What machine and software a result came from, and how busy the machine was."""

import os
import platform
import subprocess


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
