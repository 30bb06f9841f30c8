"""Writes the WebDataset fixture: two tar shards made by the `webdataset` package's own TarWriter,
and `expected.json` (members as hex), what `webdataset.WebDataset` (no decoder, no shuffle) yields from them.

Run in a venv outside the repository (the package is not a test dependency):

    python3 -m venv /tmp/wdsvenv && /tmp/wdsvenv/bin/pip install webdataset numpy
    cd testdata/webdataset && /tmp/wdsvenv/bin/python make_fixture.py

The samples cover what the grouping rules decide: multi-dot extensions (`seg.json`, `b.c.txt`),
keys with folders (`val/s0005`), an upper-case extension (webdataset lowercases it), a sample that
lacks a member the others have, empty and binary members, non-ASCII bytes.
"""

import json
import os

import webdataset as wds

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


def main() -> None:
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
    main()
