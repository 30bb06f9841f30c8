"""Writes the WebDataset fixture: two tar shards made by the `webdataset` package's own TarWriter,
and `expected.json` (members as hex), what `webdataset.WebDataset` (no decoder, no shuffle) yields from them.

Run in a venv outside the repository (the package is not a test dependency):

    python3 -m venv /tmp/wdsvenv && /tmp/wdsvenv/bin/pip install webdataset numpy
    cd testdata/webdataset && /tmp/wdsvenv/bin/python make_fixture.py

The other direction, `make_fixture.py ../../.venv/bin/python`: the interpreter given as argument
(one with stokehold installed) writes `written-000000.tar` and `written-000001.tar` with
`stokehold.write_webdataset` (`write_with_stokehold`, which python/tests/test_webdataset.py
calls too and compares byte for byte), and this script checks that webdataset reads them back
with its default decoders (`cls` an int, `npy` an array, `json` an object, `txt` a str) equal to
what was written; `written.json` records what webdataset decoded.

The samples cover what the grouping rules decide: multi-dot extensions (`seg.json`, `b.c.txt`),
keys with folders (`val/s0005`), an upper-case extension (webdataset lowercases it), a sample that
lacks a member the others have, empty and binary members, non-ASCII bytes.
"""

import json
import os
import subprocess
import sys
from typing import Any

SHARDS = [
    [
        {"__key__": "s0000", "txt": "héllo", "cls": "3", "seg.json": json.dumps({"a": [1, 2]})},
        {"__key__": "s0001", "txt": "world", "cls": "1", "seg.json": "{}"},
        {"__key__": "s0002", "txt": "no class here", "seg.json": "[]"},  # missing cls
        {"__key__": "s0003", "txt": "", "cls": "0", "seg.json": "null", "b.c.txt": b"\x00\xff multi"},
    ],
    [
        {"__key__": "val/s0004", "txt": "in a folder", "cls": "7", "seg.json": "1"},
        {"__key__": "val/s0005", "txt": "upper", "cls": "2", "seg.json": "2", "BIN": bytes(range(256))},
        {"__key__": "s0006", "txt": "日本語", "cls": "9", "seg.json": "3"},
    ],
]


def write_with_stokehold(sh: Any, np: Any, pattern: str) -> list:
    """The shards stokehold writes for the interchange check: keys with folders, class labels,
    float arrays (npy), JSON, text and raw bytes, two samples per shard."""
    src = sh.from_arrays({
        "__key__": [b"a/s0", b"a/s1", b"s2"],
        "cls": np.array([3, 1, 4]),
        "npy": np.arange(12, dtype=np.float32).reshape(3, 2, 2),
        "json": np.array([[1, 2], [3, 4], [5, 6]]),
        "txt": ["héllo".encode(), b"", b"x y"],
        "bin": [bytes(range(7)), b"\x00", b"\xff\xfe"],
    })
    return sh.write_webdataset(src, pattern, maxcount=2)


def check_written(stokehold_python: str) -> None:
    import numpy as np
    import webdataset as wds

    code = (
        "import sys, numpy as np, stokehold as sh; sys.path.insert(0, '.');"
        "import make_fixture as m; m.write_with_stokehold(sh, np, 'written-%06d.tar')"
    )
    subprocess.run([stokehold_python, "-c", code], check=True)
    names = ["written-000000.tar", "written-000001.tar"]
    got = list(wds.WebDataset(names, shardshuffle=False).decode())
    assert [s["__key__"] for s in got] == ["a/s0", "a/s1", "s2"], got
    assert [s["cls"] for s in got] == [3, 1, 4]
    for i, s in enumerate(got):
        assert np.array_equal(s["npy"], np.arange(12, dtype=np.float32).reshape(3, 2, 2)[i])
        assert s["npy"].dtype == np.float32
    assert [s["json"] for s in got] == [[1, 2], [3, 4], [5, 6]]
    assert [s["txt"] for s in got] == ["héllo", "", "x y"]
    assert [s["bin"] for s in got] == [bytes(range(7)), b"\x00", b"\xff\xfe"]
    out = [{k: (v.tolist() if hasattr(v, "tolist") else v.hex() if isinstance(v, bytes) else v)
            for k, v in s.items() if k != "__local_path__"} for s in got]
    with open("written.json", "w") as f:
        json.dump({"webdataset": wds.__version__, "samples": out}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"webdataset read {len(got)} samples back from {names}")


def main() -> None:
    import webdataset as wds

    names = []
    for k, samples in enumerate(SHARDS):
        name = f"shard-{k}.tar"
        with wds.TarWriter(name) as w:
            for s in samples:
                w.write(s)
        names.append(name)
    expected = []
    for sample in wds.WebDataset(names, shardshuffle=False):
        out = {}
        for key, value in sample.items():
            out[key] = value if isinstance(value, str) else value.hex()
        expected.append(out)
    with open("expected.json", "w") as f:
        json.dump({"webdataset": wds.__version__, "samples": expected}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(expected)} samples in {names}")


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    if len(sys.argv) > 1:
        check_written(sys.argv[1])
    else:
        main()
