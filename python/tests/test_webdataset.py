"""read_webdataset against the webdataset package: the fixture shards (testdata/webdataset, written
by webdataset's TarWriter; expected.json is what webdataset.WebDataset yields from them), random
access, shuffle and resume, and a truncated shard named by file and offset."""

import json
from pathlib import Path

import pytest

import stokehold as sh

FIXTURE = Path(__file__).resolve().parents[2] / "testdata" / "webdataset"
SHARDS = [str(FIXTURE / "shard-0.tar"), str(FIXTURE / "shard-1.tar")]


def test_samples_equal_what_webdataset_yields():
    expected = json.loads((FIXTURE / "expected.json").read_text())["samples"]
    ds = sh.read_webdataset(SHARDS)
    assert len(ds) == len(expected)
    for i, want in enumerate(expected):
        got = ds[i]
        # webdataset also yields __local_path__; stokehold does not.
        assert sorted(got) == sorted(k for k in want if k != "__local_path__")
        assert got["__key__"].item().decode() == want["__key__"]
        assert got["__url__"].item().decode().endswith(want["__url__"])
        for name in got:
            if not name.startswith("__"):
                assert got[name].item() == bytes.fromhex(want[name]), (i, name)


def test_shuffle_and_resume_over_the_shards():
    ds = sh.read_webdataset(SHARDS[1:])  # every sample has the same members: batchable
    batches = ds.shuffle(seed=2).batch(2)
    full = [b["__key__"].tolist() for b in batches.iter(0)]
    assert sorted(sum(full, [])) == [b"s0006", b"val/s0004", b"val/s0005"]
    it = batches.iter(0)
    head = [next(it)["__key__"].tolist()]
    state = json.loads(json.dumps(it.get_state()))
    again = batches.iter(0)
    again.set_state(state)
    assert head + [b["__key__"].tolist() for b in again] == full


def test_a_truncated_shard_names_the_file_and_the_member(tmp_path):
    cut = tmp_path / "cut.tar"
    cut.write_bytes(Path(SHARDS[1]).read_bytes()[:7680 + 100])  # inside val/s0005.BIN's data
    with pytest.raises(sh.DataCorruptionError, match=r"cut\.tar.*val/s0005\.BIN.*truncated"):
        sh.read_webdataset(str(cut))
