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


def _tar(path, members):
    """A tar shard at ``path`` holding ``members`` [(name, bytes)], written by Python's tarfile."""
    import io
    import tarfile

    with tarfile.open(path, "w") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return str(path)


def test_decode_by_extension_equals_the_native_decoders(tmp_path):
    import io

    import numpy as np

    data = Path(__file__).resolve().parents[2] / "testdata"
    png = (data / "image" / "gray8.png").read_bytes()
    flac = (data / "audio" / "tiny.flac").read_bytes()
    buf = io.BytesIO()
    np.save(buf, np.arange(6, dtype=np.int16).reshape(2, 3))
    shard = _tar(tmp_path / "s.tar", [("k.png", png), ("k.flac", flac), ("k.npy", buf.getvalue()),
                                      ("k.cls", b"12"), ("k.seg.json", b"{}")])
    got = sh.read_webdataset(shard, decode=True)[0]
    want_img = sh.from_arrays({"png": [png]}).decode_image("png")[0]["png"]
    np.testing.assert_array_equal(got["png"], want_img)
    want_audio = sh.from_arrays({"flac": [flac]}).decode_audio("flac")[0]
    np.testing.assert_array_equal(got["flac"], want_audio["flac"])
    assert got["flac.sample_rate"].item() == want_audio["sample_rate"].item()
    np.testing.assert_array_equal(got["npy"], np.arange(6, dtype=np.int16).reshape(2, 3))
    assert got["cls"].item() == 12 and got["seg.json"].item() == b"{}"
    # A dict decodes the extensions it names only.
    only = sh.read_webdataset(shard, decode={"cls": "int"})[0]
    assert only["cls"].item() == 12 and only["png"].item() == png
    with pytest.raises(sh.InvalidArgumentError, match="'bytes', 'int', 'image', 'audio' or 'npy'"):
        sh.read_webdataset(shard, decode={"cls": "integer"})


def test_a_bad_member_and_a_corrupt_sidecar_are_named(tmp_path):
    shard = _tar(tmp_path / "s.tar", [("a.npy", b"\x93NUMPY garbage"), ("a.txt", b"x")])
    ds = sh.read_webdataset(shard, decode=True)  # writes s.tar.idx
    with pytest.raises(sh.DataCorruptionError, match=r"s\.tar: corrupt data at offset 512: member a\.npy"):
        ds[0]
    idx = tmp_path / "s.tar.idx"
    raw = bytearray(idx.read_bytes())
    raw[30] ^= 1
    idx.write_bytes(bytes(raw))
    with pytest.raises(sh.DataCorruptionError, match=r"s\.tar\.idx.*CRC"):
        sh.read_webdataset(shard)
    assert len(sh.read_webdataset(shard, index=False)) == 1


def test_written_shards_read_back(tmp_path):
    import numpy as np

    src = sh.from_arrays({
        "__key__": [f"k{i}".encode() for i in range(5)],
        "cls": np.arange(5),
        "txt": [f"t{i}".encode() for i in range(5)],
        "npy": np.arange(20, dtype=np.float32).reshape(5, 4),
    })
    seen = []
    paths = sh.write_webdataset(src, tmp_path / "o" / "s-%03d.tar", maxcount=2,
                                progress=lambda n, total: seen.append((n, total)))
    assert [Path(p).name for p in paths] == ["s-000.tar", "s-001.tar", "s-002.tar"]
    assert seen[-1] == (5, 5)
    back = sh.read_webdataset(paths, decode=True)
    assert [back[i]["__key__"].item() for i in range(5)] == [f"k{i}".encode() for i in range(5)]
    assert [back[i]["cls"].item() for i in range(5)] == list(range(5))
    np.testing.assert_array_equal(back[3]["npy"], np.arange(12, 16, dtype=np.float32))
    assert back[2]["txt"].item() == b"t2"
    with pytest.raises(sh.InvalidArgumentError, match="%d"):
        sh.write_webdataset(src, tmp_path / "no-number.tar")


def test_what_we_write_is_what_webdataset_read_back(tmp_path):
    """written-00000{0,1}.tar were written by write_webdataset and read back by the webdataset
    package (make_fixture.py checks its default decoders' values and records them in
    written.json): today's writer writes the same bytes, and reads them back as webdataset did."""
    import importlib.util

    import numpy as np

    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE / "make_fixture.py")
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    paths = m.write_with_stokehold(sh, np, str(tmp_path / "written-%06d.tar"))
    for p in paths:
        assert Path(p).read_bytes() == (FIXTURE / Path(p).name).read_bytes(), p
    want = json.loads((FIXTURE / "written.json").read_text())["samples"]
    back = sh.read_webdataset(paths, decode=True)
    assert len(back) == len(want)
    for i, w in enumerate(want):
        assert back[i]["__key__"].item().decode() == w["__key__"]
        assert back[i]["cls"].item() == w["cls"]
        assert back[i]["npy"].tolist() == w["npy"]
        assert json.loads(back[i]["json"].item()) == w["json"]
        assert back[i]["txt"].item().decode() == w["txt"]
        assert back[i]["bin"].item().hex() == w["bin"]
