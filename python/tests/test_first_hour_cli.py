"""Issue 48, a new user's first hour with the command line (items 2, 3, 6 and 9): the wheel's
``stokehold`` command and ``python -m stokehold`` run the Rust CLI with its verbs and exit codes;
GZIP / ZLIB TFRecords (written by stokehold and by Python's gzip / zlib modules) go through every
verb and through ``epochs()``; files that are not TFRecord are named for what they look like; an
uncompressed file named ``.gz`` gets a hint that works when followed; the docs agree on what they
list. Real files and real processes throughout."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import zlib
from pathlib import Path
from typing import List, Optional

import numpy as np
import pytest

import stokehold as sh

ROOT = Path(__file__).resolve().parents[2]
#: The script ``pip install`` / ``maturin develop`` put beside this interpreter.
SCRIPT = Path(sys.executable).parent / "stokehold"


def stokehold(*args: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess[str]:
    """The venv's ``stokehold`` command, as a user on the PATH runs it."""
    assert SCRIPT.is_file(), f"no {SCRIPT}: the package's [project.scripts] entry point is not installed"
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def ok(*args: str) -> str:
    r = stokehold(*args)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def fails(code: int, *args: str) -> str:
    r = stokehold(*args)
    assert r.returncode == code, f"{args}: exit {r.returncode}, not {code}\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def _rust_binary() -> Optional[Path]:
    """A ``stokehold`` binary built from this tree's sources (newer than every Rust file), if
    there is one: an older build would compare today's script with yesterday's CLI."""
    newest = max(f.stat().st_mtime for f in (ROOT / "crates").glob("*/src/**/*.rs"))
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    for profile in ("release", "debug"):
        exe = target / profile / "stokehold"
        if exe.is_file() and os.access(exe, os.X_OK) and exe.stat().st_mtime > newest:
            return exe
    return None


@pytest.fixture()
def shards(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    ok("write", str(src), "--synthetic", "30", "--record-bytes", "16", "--no-progress")
    return src


def _plain_tfrecord(shards: Path, tmp_path: Path) -> Path:
    out = tmp_path / "plain"
    ok("convert", str(shards), "-o", str(out), "--no-progress")
    return out / "data-00000-of-00001.tfrecord"


# --- item 2: the CLI in the wheel -----------------------------------------------------------


VERBS = ["demo", "table", "inspect", "verify", "index", "write", "convert", "bench"]


def test_stokehold_help_from_the_venv_lists_every_verb() -> None:
    out = ok("--help")
    for verb in VERBS:
        assert re.search(rf"^\s+{verb}\s", out, re.M), (verb, out)
    assert ok("--version").strip() == f"stokehold {sh.__version__}"


def test_python_m_stokehold_offers_every_verb() -> None:
    r = subprocess.run([sys.executable, "-m", "stokehold", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for verb in VERBS:
        assert re.search(rf"^\s+{verb}\s", r.stdout, re.M), (verb, r.stdout)


def test_demo_json_means_the_same_from_python_m_and_the_command(tmp_path: Path) -> None:
    small = ["demo", "--clips", "6", "--epochs", "1", "--min-seconds", "0.5", "--max-seconds", "1.0",
             "--crop-seconds", "0.25", "--step-ms", "0", "--no-progress"]
    # --json alone: the figures on stdout after the table.
    r = subprocess.run([sys.executable, "-m", "stokehold", *small, "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout[r.stdout.index("\n{") + 1:])
    assert report["options"]["clips"] == 6
    # --json PATH: the figures in that file, from either front end.
    for front in ([sys.executable, "-m", "stokehold"], [str(SCRIPT)]):
        path = tmp_path / f"r{len(front)}.json"
        r = subprocess.run([*front, *small, "--json", str(path)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert json.loads(path.read_text())["options"]["clips"] == 6


def _catches_sigint(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGINT (``SigCgt`` in ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    raise AssertionError("no SigCgt line")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")
@pytest.mark.parametrize("front", ["script", "python -m"])
def test_ctrl_c_ends_the_command_as_it_ends_the_binary(front: str) -> None:
    """SIGINT while the Rust command runs ends the process by the signal (exit -2), not a
    KeyboardInterrupt waiting for Rust to return. The signal goes once the extension is loaded
    and Python's handler gone (the entry point restores the default action just before calling
    into Rust), so no sleep decides."""
    cmd = [str(SCRIPT)] if front == "script" else [sys.executable, "-m", "stokehold"]
    p = subprocess.Popen([*cmd, "demo", "--clips", "2000", "--epochs", "1000", "--no-progress"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Python's handler is installed from its start until _cli.main restores the default,
        # and the extension is imported in between: loaded and no handler means Rust runs.
        while _catches_sigint(p.pid) or "_native" not in Path(f"/proc/{p.pid}/maps").read_text():
            assert p.poll() is None
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=60) == -signal.SIGINT
    finally:
        p.kill()
        p.wait()
        assert p.stderr is not None
        p.stderr.close()


BAD_INPUTS: List[List[str]] = [
    ["frobnicate"],                                  # unknown verb: usage error
    ["verify"],                                      # missing argument: usage error
    ["inspect", "--compression", "bz2", "x"],        # bad value: usage error
    ["inspect", "/nonexistent/x.tfrecord"],          # the verb fails
    ["write", "/nonexistent/dir/out", "--synthetic", "1", "--compression", "gzip"],
]


@pytest.mark.parametrize("args", BAD_INPUTS, ids=[a[0] + str(i) for i, a in enumerate(BAD_INPUTS)])
def test_exit_codes_on_bad_input_are_the_rust_binarys(args: List[str]) -> None:
    expected = 2 if args[0] in ("frobnicate", "verify") or "bz2" in args else 1
    r = stokehold(*args)
    assert r.returncode == expected, (r.returncode, r.stderr)
    assert r.stderr.strip(), "a failure says why"
    exe = _rust_binary()
    if exe is not None:
        b = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
        assert b.returncode == r.returncode, (b.returncode, b.stderr, r.stderr)


# --- item 3: compression everywhere ----------------------------------------------------------


def _compressed_by_python(plain: Path, kind: str) -> Path:
    data = plain.read_bytes()
    if kind == "gzip":
        out = plain.with_name("py.tfrecord.gz")
        with gzip.open(out, "wb") as f:
            f.write(data)
    else:
        out = plain.with_name("py.tfrecord.zz")
        out.write_bytes(zlib.compress(data))
    return out


@pytest.mark.parametrize("kind", ["gzip", "zlib"])
def test_compressed_tfrecords_go_through_every_verb(kind: str, shards: Path, tmp_path: Path) -> None:
    plain = _plain_tfrecord(shards, tmp_path)
    by_cli = tmp_path / f"cli-{kind}"
    ok("convert", str(shards), "-o", str(by_cli), "--compression", kind.upper(), "--no-progress")
    (written,) = [p for p in by_cli.iterdir() if p.is_file()]
    assert written.name.endswith(".gz" if kind == "gzip" else ".zz")
    for f in (written, _compressed_by_python(plain, kind)):
        assert "30 records" in ok("inspect", str(f), "--no-progress")
        assert "ok, 30 records" in ok("verify", str(f), "--no-progress")
        assert "read 30 records" in ok("bench", str(f), "--batch-size", "4")
        assert "wrote 30 records" in ok("convert", str(f), "-o", str(tmp_path / f"c-{f.name}"), "--no-progress")
        assert "wrote 30 records" in ok("write", str(tmp_path / f"w-{f.name}"), "--tfrecord", str(f), "--no-progress")
        # Python reads the same file by the same rule (the name).
        assert sum(1 for _ in sh.TFRecordDataset(str(f))) == 30


def test_epochs_over_a_gzip_stream_are_fresh_passes_with_checkpoints(shards: Path, tmp_path: Path) -> None:
    f = _compressed_by_python(_plain_tfrecord(shards, tmp_path), "gzip")
    ds = sh.TFRecordDataset(str(f))
    assert not ds.is_random_access
    every = [[e["record"].item() for e in ep] for ep in ds.epochs(2)]
    assert len(every) == 2 and every[0] == every[1] and len(every[0]) == 30
    loader = sh.TFRecordDataset(str(f)).epochs(3)
    assert len(loader) == 3
    ep = next(loader)
    with pytest.raises(TypeError, match="no length"):
        len(ep)
    head = [next(ep)["record"].item() for _ in range(7)]
    state = json.loads(json.dumps(loader.get_state()))
    rest = [e["record"].item() for e in ep]
    again = sh.TFRecordDataset(str(f)).epochs(3)
    again.set_state(state)
    resumed = next(again)
    assert resumed.epoch == 0
    assert [e["record"].item() for e in resumed] == rest
    assert head + rest == every[0]
    assert [ep.epoch for ep in again] == [1, 2]
    # A stream known to be endless has no epochs to cut (an unknown length is a stream's own).
    endless = sh.from_arrays({"x": np.arange(5)}).repeat().shuffle(10, seed=1)
    assert not endless.is_random_access
    with pytest.raises(sh.InvalidArgumentError, match="endless"):
        endless.epochs(1)


# --- item 6: diagnoses -----------------------------------------------------------------------


def test_inspect_and_verify_say_what_a_file_that_is_not_tfrecord_is(tmp_path: Path) -> None:
    npy = tmp_path / "x.npy"
    np.save(npy, np.arange(100))
    noise = tmp_path / "noise.bin"
    noise.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    for verb in ("inspect", "verify"):
        out = fails(1, verb, str(npy), str(noise), "--no-progress")
        assert f"{npy}: not a TFRecord file" in out and "a NumPy .npy array" in out, out
        assert f"{noise}: not a TFRecord file" in out, out
        assert "bad length CRC" not in out, out


def test_an_uncompressed_file_named_gz_gets_a_hint_that_works(shards: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake.tfrecord.gz"
    fake.write_bytes(_plain_tfrecord(shards, tmp_path).read_bytes())
    out = fails(1, "inspect", str(fake), "--no-progress")
    assert "invalid gzip header" in out and "the file is not gzip-compressed" in out, out
    assert "--compression none" in out, out
    assert "30 records" in ok("inspect", str(fake), "--compression", "none", "--no-progress")
    # Python's readers get the same diagnosis, and its hint works too.
    with pytest.raises(sh.DataCorruptionError) as e:
        list(sh.TFRecordDataset(str(fake)))
    assert "not gzip-compressed: it looks like an uncompressed TFRecord file" in str(e.value)
    assert "compression=''" in str(e.value)
    assert sum(1 for _ in sh.TFRecordDataset(str(fake), compression="")) == 30


def test_the_cli_names_the_overwrite_flag(shards: Path) -> None:
    out = fails(1, "write", str(shards), "--synthetic", "3", "--no-progress")
    assert "pass --overwrite" in out, out
    assert "wrote 3 records" in ok("write", str(shards), "--synthetic", "3", "--overwrite", "--no-progress")


# --- item 9: small things --------------------------------------------------------------------


def test_bench_explains_its_table_and_prints_whole_rates(shards: Path) -> None:
    out = ok("bench", str(shards), "--batch-size", "4")
    for word in ("fill:", "busy:", "par:", "parallelism N (max M)", "threads are busy"):
        assert word in out, (word, out)
    rate = re.search(r": ([\d,]+) records/s", out)
    assert rate is not None, out


def test_inspect_help_names_images_in_its_description_and_its_arguments() -> None:
    listing = ok("--help")
    assert "images" in listing[listing.index("  inspect"):listing.index("  verify")], listing
    about, args = ok("inspect", "--help").split("Arguments:", 1)
    assert "images" in about and "images" in args


def test_readme_and_guide_agree_on_how_many_problems_the_guide_solves() -> None:
    guide = (ROOT / "docs" / "GUIDE.md").read_text()
    readme = (ROOT / "README.md").read_text()
    numbered = re.findall(r"^## (\d+)\. ", guide, re.M)
    words = {6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    n = len(numbered)
    assert [int(x) for x in numbered] == list(range(1, n + 1))
    assert guide.splitlines()[2].startswith(f"{words[n].capitalize()} problems"), guide.splitlines()[2]
    assert f"{words[n]} common input-pipeline problems" in readme
