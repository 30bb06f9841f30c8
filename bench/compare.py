#!/usr/bin/env python3
"""Compares two `make bench` results, also across machines.

    python3 bench/compare.py OLD.json NEW.json
    python3 bench/compare.py <(git show 32ea9dc:bench/results/2026-12-07.json) bench/results/2026-12-07.json

Two runs on different CPUs move every system's figures; what shows speed lost (or won) by a change
is stokehold's ratio to each peer on the same row, before against after. For every (workload,
config, metric) that both runs measured, and every stokehold system and peer on it, this prints
the median over the workload's pairs of (stokehold / peer now) / (stokehold / peer before),
oriented so that > 1 is better for stokehold (throughputs higher, times lower), then each
system's median of new / old throughput (the machine's own change). Standard library only.
"""

import collections
import json
import statistics
import sys


def _rows(path):
    by = collections.defaultdict(dict)
    with open(path) as f:
        for r in json.load(f)["rows"]:
            if isinstance(r["value"], (int, float)) and r["value"] > 0:
                by[(r["workload"], r["config"], r["metric"])][r["system"]] = (r["value"], r.get("unit", ""))
    return by


def _higher_is_better(metric, unit):
    text = f"{metric} {unit}".lower()
    return "throughput" in text or "bandwidth" in text or "/s" in text


def main():
    old, new = _rows(sys.argv[1]), _rows(sys.argv[2])
    pairs = collections.defaultdict(list)
    moved = collections.defaultdict(list)
    for key, systems in new.items():
        before = old.get(key)
        if not before:
            continue
        for s, (v, unit) in systems.items():
            if s in before and _higher_is_better(key[2], unit):
                moved[s.split("/")[0]].append(v / before[s][0])
        ours = [s for s in systems if s.startswith("stokehold") and s in before]
        peers = [s for s in systems if not s.startswith("stokehold") and s in before and s != "machine"]
        for s in ours:
            for p in peers:
                now = systems[s][0] / systems[p][0]
                then = before[s][0] / before[p][0]
                q = now / then
                pairs[key[0]].append(q if _higher_is_better(key[2], systems[s][1]) else 1 / q)
    every = []
    print("stokehold's ratio to each peer, now / before (> 1: better for stokehold):")
    for workload, qs in sorted(pairs.items()):
        every += qs
        print(f"  {workload[:60]:60} pairs {len(qs):4}  median {statistics.median(qs):.2f}")
    if every:
        print(f"  {'all':60} pairs {len(every):4}  median {statistics.median(every):.2f}")
    print("each system's throughput, new / old (the machine's change):")
    for s, qs in sorted(moved.items()):
        print(f"  {s[:30]:30} rows {len(qs):4}  median {statistics.median(qs):.2f}")


if __name__ == "__main__":
    main()
