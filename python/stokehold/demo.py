"""``stokehold.demo()`` and ``python -m stokehold demo``: the audio-cache demo of the CLI.

It makes synthetic int16 clips (5-180 s at 16 kHz by default), caches them ragged in memory, runs
``shuffle -> random_crop -> batch -> repeat -> prefetch`` for a few epochs with a simulated
training step, and prints a table: cache memory against the raw samples and a padded matrix,
per-epoch time, steady batch time and the epoch-boundary stall. The same engine as the
``stokehold demo`` command runs it (in this process).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from . import _native

__all__ = ["demo", "main"]


def _defaults() -> Dict[str, Any]:
    defaults: Dict[str, Any] = json.loads(_native._demo_defaults())
    return defaults


def demo(**options: Any) -> Dict[str, Any]:
    """Runs the demo, prints its table to ``sys.stdout`` and returns the report as a dict.

    Options and their defaults: ``clips=400``, ``min_seconds=5.0``, ``max_seconds=180.0``,
    ``sample_rate=16000``, ``epochs=5``, ``batch_size=32``, ``crop_seconds=3.0``,
    ``step_ms=50.0`` (simulated training step; 0 runs flat out), ``prefetch=4``, ``seed=0``,
    ``progress=True`` (progress bars on a terminal).

    The report has, among others, ``raw_bytes``, ``cache_rss_growth_bytes``, ``cache_ratio``,
    ``padded_bytes``, ``epoch_seconds``, ``steady_interval_ms`` and ``stall_median_ms``.

    Raises:
        TypeError: an unknown option.
        InvalidArgumentError: an option out of its domain.
    """
    defaults = _defaults()
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise TypeError(f"unknown demo option(s) {unknown}; options are {sorted(defaults)}")
    report: Dict[str, Any] = json.loads(_native._demo(json.dumps({**defaults, **options})))
    return report


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m stokehold demo [--epochs N] [--clips N] ... [--json [PATH]]``: the
    ``stokehold`` command (:mod:`stokehold._cli`), so its options, ``--help`` and exit codes are
    the CLI's; returns the exit code."""
    import sys

    from ._cli import run

    return run(sys.argv[1:] if argv is None else list(argv))
