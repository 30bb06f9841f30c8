"""stokehold.demo() and `python -m stokehold demo` run the CLI's demo in this process."""

import subprocess
import sys

import pytest

import stokehold as sh

SMALL = dict(clips=12, min_seconds=0.5, max_seconds=2.0, sample_rate=8000, epochs=2,
             batch_size=4, crop_seconds=0.25, step_ms=0.0, prefetch=2, progress=False)


def test_demo_prints_a_table_and_returns_the_report(capsys):
    report = sh.demo(**SMALL)
    out = capsys.readouterr().out
    assert "stall" in out.lower()
    assert report["options"]["clips"] == 12
    assert report["batches_per_epoch"] == 3
    assert len(report["epoch_seconds"]) == 2
    assert report["raw_bytes"] == report["total_samples"] * 2


def test_demo_rejects_unknown_and_bad_options():
    with pytest.raises(TypeError, match="unknown demo option"):
        sh.demo(clipz=3)
    with pytest.raises(sh.InvalidArgumentError):
        sh.demo(**{**SMALL, "batch_size": 0})


def test_python_m_stokehold_demo():
    args = [sys.executable, "-m", "stokehold", "demo", "--clips", "6", "--epochs", "1",
            "--min-seconds", "0.5", "--max-seconds", "1.0", "--crop-seconds", "0.25",
            "--step-ms", "0", "--no-progress", "--json"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '"batches_per_epoch"' in r.stdout
