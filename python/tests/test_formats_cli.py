"""Issue 45 item 5: ``stokehold inspect`` / ``verify`` / ``convert`` for JSON-lines files,
WebDataset tar shards and Megatron token files, told apart by the sniff rule; convert to a shard
folder and back (a shard folder to WebDataset shards). Real files, the wheel's ``stokehold``
command (as test_first_hour_cli.py runs it)."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import List

import numpy as np

import stokehold as sh

SCRIPT = Path(sys.executable).parent / "stokehold"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.is_file(), f"no {SCRIPT}: the package's entry point is not installed"
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def ok(*args: str) -> str:
    r = run(*args)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def fails(*args: str) -> str:
    r = run(*args)
    assert r.returncode == 1, f"{args}: exit {r.returncode}, not 1\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def tar(path: Path, members: List[tuple]) -> Path:
    with tarfile.open(path, "w") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def megatron(prefix: Path, docs: List[List[int]]) -> Path:
    """A Megatron indexed dataset (``.bin`` + ``.idx``, version 1, int32 tokens) as megatron-core
    writes it: magic, version, dtype code, counts, sizes, pointers, document indices."""
    tokens = [np.asarray(d, dtype=np.int32) for d in docs]
    (prefix.with_suffix(".bin")).write_bytes(b"".join(t.tobytes() for t in tokens))
    sizes = np.array([len(t) for t in tokens], dtype=np.int32)
    pointers = np.concatenate([[0], np.cumsum(sizes[:-1]) * 4]).astype(np.int64)
    doc_idx = np.arange(len(docs) + 1, dtype=np.int64)
    head = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4)
    head += struct.pack("<Q", len(docs)) + struct.pack("<Q", len(doc_idx))
    (prefix.with_suffix(".idx")).write_bytes(head + sizes.tobytes() + pointers.tobytes() + doc_idx.tobytes())
    return prefix.with_suffix(".idx")


def test_jsonl_through_every_verb(tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_text("".join(json.dumps({"x": i, "s": f"é{i}"}) + "\n" for i in range(5)))
    out = ok("inspect", str(f))
    assert "JSON lines" in out and "5 lines" in out and "x" in out and "int64" in out
    assert "ok, 5 lines" in ok("verify", "--no-progress", str(f))
    ok("convert", str(f), "--out", str(tmp_path / "shards"), "--no-progress")
    back = sh.open_shards(str(tmp_path / "shards"))
    assert [back[i]["x"].item() for i in range(5)] == list(range(5))
    assert back[1]["s"].item() == "é1".encode()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"x": 1}\n{"x": \n')
    msg = fails("verify", "--no-progress", str(bad))
    assert "bad.jsonl" in msg and "line 2" in msg


def test_webdataset_through_every_verb_and_back(tmp_path):
    arr = io.BytesIO()
    np.save(arr, np.arange(4, dtype=np.float32))
    members = []
    for i in range(4):
        members += [(f"k{i}.cls", str(i).encode()), (f"k{i}.npy", arr.getvalue()), (f"k{i}.txt", b"t%d" % i)]
    s = tar(tmp_path / "s.tar", members)
    out = ok("inspect", str(s))
    assert "WebDataset tar shard" in out and "4 samples of 12 members" in out and "npy" in out
    assert "ok, 4 samples" in ok("verify", "--no-progress", str(s))
    # Nothing written beside the shard by inspect / verify.
    assert not (tmp_path / "s.tar.idx").exists()
    ok("convert", str(s), "--out", str(tmp_path / "shards"), "--no-progress")
    folder = sh.open_shards(str(tmp_path / "shards"))
    assert folder[2]["__key__"].item() == b"k2" and folder[2]["cls"].item() == b"2"
    ok("convert", str(tmp_path / "shards"), "--to", "webdataset", "--out", str(tmp_path / "wds"), "--no-progress")
    shards = sorted(str(p) for p in (tmp_path / "wds").glob("*.tar"))
    assert [Path(p).name for p in shards] == ["shard-000000.tar"]
    back = sh.read_webdataset(shards, decode=True)
    assert [back[i]["__key__"].item() for i in range(4)] == [b"k0", b"k1", b"k2", b"k3"]
    assert back[3]["cls"].item() == 3
    np.testing.assert_array_equal(back[1]["npy"], np.arange(4, dtype=np.float32))


def test_a_broken_tar_fails_verify_naming_shard_member_and_offset(tmp_path):
    s = tar(tmp_path / "s.tar", [("a.cls", b"1"), ("a.npy", b"\x93NUMPY broken"), ("b.cls", b"x")])
    msg = fails("verify", "--no-progress", str(s))
    assert "s.tar" in msg and "member a.npy" in msg and "offset 1536" in msg
    cut = tmp_path / "cut.tar"
    cut.write_bytes(s.read_bytes()[: 1536 + 5])
    msg = fails("verify", "--no-progress", str(cut))
    assert "cut.tar" in msg and "truncated" in msg and "a.npy" in msg


def test_megatron_token_files(tmp_path):
    idx = megatron(tmp_path / "corpus", [[1, 2, 3], [4, 5], [6, 7, 8, 9]])
    for f in (idx, idx.with_suffix(".bin")):
        out = ok("inspect", str(f))
        assert "Megatron token file" in out and "9 tokens (int32) in 3 sequences" in out, out
    assert "ok, 9 tokens" in ok("verify", "--no-progress", str(idx))
    msg = fails("convert", str(idx), "--out", str(tmp_path / "x"), "--no-progress")
    assert "--seq-len" in msg
    ok("convert", str(idx), "--seq-len", "3", "--out", str(tmp_path / "tok"), "--no-progress")
    t = sh.open_shards(str(tmp_path / "tok"))
    assert len(t) == 2 and t[0]["tokens"].tolist() == [1, 2, 3, 4]
