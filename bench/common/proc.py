"""Process memory from /proc: RSS, PSS and private bytes of a process tree.

Read straight from /proc (Linux) so the suite needs no psutil. RSS counts every
resident page a process maps, shared ones included, so summing RSS over forked
workers counts shared pages once per worker (that is what ``top`` shows users);
PSS splits each shared page between the processes that map it, so the PSS sum
over a tree is its real footprint. We report both and say which is which.
"""

import os
import threading
import time


def _status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def rss(pid=None):
    """Resident set size of one process, in bytes."""
    return _status_kib(pid or os.getpid(), "VmRSS") * 1024


def rollup(pid=None):
    """{'rss','pss','private'} in bytes from /proc/PID/smaps_rollup (zeros if gone)."""
    out = {"rss": 0, "pss": 0, "private": 0}
    try:
        with open(f"/proc/{pid or os.getpid()}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 2 or not parts[1].isdigit():
                    continue
                kib = int(parts[1]) * 1024
                if parts[0] == "Rss:":
                    out["rss"] = kib
                elif parts[0] == "Pss:":
                    out["pss"] = kib
                elif parts[0] in ("Private_Clean:", "Private_Dirty:"):
                    out["private"] += kib
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return out


def children(pid=None):
    """Pids of all descendants of ``pid`` (default: this process)."""
    pid = pid or os.getpid()
    parent_of = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces: fields resume after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        parent_of[int(name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent_of.items() if pp == p]
        found += kids
        frontier += kids
    return found


def tree(pid=None):
    """Memory of a process and its descendants: main and workers apart, in bytes."""
    pid = pid or os.getpid()
    main = rollup(pid)
    kids = [rollup(c) for c in children(pid)]
    return {
        "main_rss": main["rss"],
        "workers": len(kids),
        "workers_rss": sum(k["rss"] for k in kids),
        "workers_private": sum(k["private"] for k in kids),
        "total_rss": main["rss"] + sum(k["rss"] for k in kids),
        "total_pss": main["pss"] + sum(k["pss"] for k in kids),
    }


class PeakSampler:
    """Samples the RSS of this process (and its workers) on a thread; keeps the peak.

    Use as a context manager; ``peak`` holds the highest total RSS seen, in bytes.
    """

    def __init__(self, interval=0.05, with_children=False):
        self.interval = interval
        self.with_children = with_children
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        if self.with_children:
            return rss() + sum(rss(c) for c in children())
        return rss()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.peak = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._sample())
        return False


MiB = 1024 * 1024


def settle(seconds=0.2):
    """Give freed memory and worker start-up a moment before a reading."""
    time.sleep(seconds)
