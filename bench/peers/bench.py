"""Peers' coverage: for each workload Grain, SPDL and dataloader-rs do not run, the reason.

Run from the repository root (the contract in bench/README.md):
    python bench/peers/bench.py [--quick] --json OUT

The peers' figures come from the workload scripts themselves (a hook calls bench/peers/ beside
tf.data and torch, in the same run): the lazy .npy file map, the CPU-bound map, the table gather,
the epoch restart, the audio cache + epochs, the Python UDFs (pure Python, wav + fft, memory),
the audio decode -> log-mel and the JPEG decode + augment. This script writes one null row per
(other workload, peer) whose note says why that peer has no figure there, so that a missing
peer is a stated reason in the table, not a silence. It also records which peer versions this run imported.
"""

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import rows  # noqa: E402

import peers  # noqa: E402

FORMAT = "reads stokehold's own {what}; {peer} has no reader for it (Grain reads ArrayRecord/" \
         "Parquet, SPDL and dataloader-rs read what a Python function returns), and a Python " \
         "reader written for the bench would measure that reader, not the peer"
# (workload as the scripts name it, reason for every peer, or {peer: reason})
COVERAGE = [
    ("tfrecord scan+parse", FORMAT.format(what="TFRecord scan + Example parse", peer="{peer}")),
    ("shard reads, 1 KiB records", FORMAT.format(what="shard format", peer="{peer}")),
    ("soak: faults over epochs", "stokehold's fault injection (corrupt records, raising maps) "
     "with its skip counters; the peers have no equivalent switch to inject or count faults"),
    ("remote_map: CPU-bound Python fn on Ray actors", "stokehold.ray integration; the peers "
     "have none"),
    ("read into Ray Data (1 KiB rows)", "stokehold.ray integration; the peers have none"),
    ("from_ray per-batch overhead", "stokehold.ray integration; the peers have none"),
    ("shuffle quality", FORMAT.format(what="shard format (global shuffle across shards)",
                                      peer="{peer}")),
    ("bucket_by_sequence_length vs padded_batch", "no bucketing by length in the peers: Grain "
     "0.2.18, SPDL 0.8.0 and dataloader-rs 0.2.0 have no bucket_by_sequence_length equivalent"),
    ("packing: best-fit vs first-fit", {"grain": None, "spdl": "no packing op in SPDL 0.8.0",
                                        "dataloader-rs": "no packing op in dataloader-rs 0.2.0"}),
]


def installed(dist, py):
    """The version of ``dist`` importable by ``py`` (None when it is not installed)."""
    if py == sys.executable:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    p = subprocess.run([py, "-c", code], capture_output=True, text=True)
    return p.stdout.strip() or None


def main():
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    out = []
    for system in peers.SYSTEMS:
        py, why = peers.python_for(system)
        version = installed(system, py) if py else None
        want = peers.VERSIONS[system]
        note = why or (f"{system} {version} (the issue names {want})" if version
                       else f"{system} not installed in {py}")
        out.append(rows.row("peers: versions", system, "installed", "version", None, "", note=note))
        for workload, reason in COVERAGE:
            if isinstance(reason, dict):  # None: the workload script measures this peer itself
                reason = reason[system]
            if reason:
                out.append(rows.unavailable(workload, system, "all", reason.format(peer=system)))
    rows.write_json(args.json, out)
    print(json.dumps([r for r in out if r["workload"] == "peers: versions"], indent=1))


if __name__ == "__main__":
    main()
