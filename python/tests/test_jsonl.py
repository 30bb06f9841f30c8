"""read_jsonl against Python's json on the same files (plain, gzip, zstd): unicode, escapes, big
ints, floats, nested objects, lists; random access, shuffle and resume; bad lines named or
skipped; fields, types and defaults."""

import gzip
import json
import math
import shutil
import subprocess

import numpy as np
import pytest

import stokehold as sh

ROWS = [
    {"text": "héllo wörld ✓ 𝄞 \U0001f600", "n": 0, "f": 0.1, "ok": True,
     "meta": {"tags": ["a", "b\"c"], "score": -0.0, "deep": {"k": 1}}, "v": [1, 2, 3]},
    {"text": "tab\tnew\nline \\ \"quoted\" \u0000 nul \u2028", "n": 2**63 - 1,
     "f": 1.7976931348623157e308, "ok": False,
     "meta": {"tags": [], "score": 5e-324, "deep": {"k": -2}}, "v": []},
    {"text": "", "n": -(2**63), "f": 2.2250738585072014e-308, "ok": True,
     "meta": {"tags": ["日本語"], "score": 1e-300, "deep": {"k": 3}}, "v": [-7]},
    {"text": "x" * 1000, "n": 123456789012345678, "f": 0.30000000000000004, "ok": False,
     "meta": {"tags": ["z"] * 5, "score": 123456.789e3, "deep": {"k": 4}}, "v": [2**62, -(2**62)]},
]


def expected(row, name):
    v = row
    for part in name.split("."):
        v = v[part]
    if isinstance(v, str):
        return np.array(v.encode("utf-8"), dtype=object)
    if isinstance(v, list) and all(isinstance(x, str) for x in v) and (v or name == "meta.tags"):
        return [x.encode("utf-8") for x in v]
    if isinstance(v, bool):
        return np.array(v)
    if isinstance(v, int) or (isinstance(v, list) and name == "v"):
        return np.array(v, dtype=np.int64)
    return np.array(v, dtype=np.float64)


def same(got, want):
    if isinstance(want, list):
        assert [bytes(x) for x in got.tolist()] == want
        return
    if want.dtype == object:
        assert got.item() == want.item()
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    # Bit for bit: -0.0 stays negative, the smallest subnormal survives.
    assert got.tobytes() == want.tobytes(), (got, want)


NAMES = ["text", "n", "f", "ok", "meta.tags", "meta.score", "meta.deep.k", "v"]


def write_plain(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


@pytest.mark.parametrize("kind", ["plain", "ascii", "gzip", "zstd"])
def test_values_equal_pythons_json(tmp_path, kind):
    plain = write_plain(tmp_path / "rows.jsonl", ROWS)
    if kind == "ascii":  # json's default: every non-ASCII character as a \u escape
        path = tmp_path / "ascii.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="ascii")
    elif kind == "gzip":
        path = tmp_path / "rows.jsonl.gz"
        path.write_bytes(gzip.compress(plain.read_bytes()))
    elif kind == "zstd":
        if shutil.which("zstd") is None:
            pytest.skip("no zstd command (the Rust tests read .zst written by the zstd crate)")
        path = tmp_path / "rows.jsonl.zst"
        subprocess.run(["zstd", "-q", "-o", str(path), str(plain)], check=True)
    else:
        path = plain
    ds = sh.read_jsonl(str(path))
    assert len(ds) == len(ROWS)
    # What Python's json reads back from the same file, line by line.
    opener = {"gzip": gzip.open}.get(kind, open)
    if kind == "zstd":
        opener = open
        path_for_json = plain
    else:
        path_for_json = path
    with opener(path_for_json, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert rows == ROWS
    for i, row in enumerate(rows):
        e = ds[i]
        assert sorted(e) == sorted(NAMES)
        for name in NAMES:
            same(e[name], expected(row, name))
    if kind == "plain":
        assert (tmp_path / "rows.jsonl.idx").exists()


def test_random_access_shuffle_and_resume(tmp_path):
    paths = []
    for k in range(3):
        rows = [{"id": k * 100 + i, "x": [float(i)] * (i % 4)} for i in range(20 + k)]
        paths.append(str(write_plain(tmp_path / f"p{k}.jsonl", rows)))
    ds = sh.read_jsonl(paths)
    ids = [k * 100 + i for k in range(3) for i in range(20 + k)]
    assert len(ds) == len(ids)
    assert [int(ds[i]["id"]) for i in range(len(ds))] == ids
    shuffled = ds.shuffle(seed=3).batch(5)
    full = [b["id"].tolist() for b in shuffled.iter(0)]
    assert sorted(sum(full, [])) == ids and sum(full, []) != ids
    it = shuffled.iter(0)
    head = [next(it)["id"].tolist() for _ in range(4)]
    state = json.loads(json.dumps(it.get_state()))
    again = shuffled.iter(0)
    again.set_state(state)
    assert head + [b["id"].tolist() for b in again] == full
    # Ragged lists batch as ragged rows.
    first = next(iter(ds.batch(4)))
    assert [len(r) for r in first["x"].to_list()] == [0, 1, 2, 3]


def test_a_line_that_is_not_json_names_file_line_and_byte(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"x": 1}\n\n{"x": 2,}\n{"x": 3}\n"just a string"\n')
    ds = sh.read_jsonl(str(p))
    assert int(ds[0]["x"]) == 1
    with pytest.raises(sh.DataCorruptionError) as e:
        ds[1]
    msg = str(e.value)
    assert "bad.jsonl" in msg and "line 3" in msg and "byte 10" in msg and "not JSON" in msg
    with pytest.raises(sh.DataCorruptionError, match="line 5.*a JSON string"):
        ds[3]
    skipping = sh.read_jsonl(str(p), on_error="skip")
    assert [int(e["x"]) for e in skipping] == [1, 3]
    log = skipping.skipped()
    assert log.count == 2
    assert (log.first[0].file, log.first[0].offset) == (str(p), 10)
    # The log follows the dataset through later ops.
    assert skipping.shuffle(seed=1).batch(2).skipped().count == 2


def test_fields_types_and_defaults(tmp_path):
    p = write_plain(tmp_path / "t.jsonl", [
        {"a": 1, "b": 2.5, "c": [1, 2], "m": {"s": "x"}},
        {"a": 2, "b": None, "c": [3]},
        {"a": 2**64, "b": 1, "c": []},
    ])
    # Inferred int64: a value past its range is named with the declaration that reads it.
    with pytest.raises(sh.SchemaError, match=r'line 3.*fields=\{"a": "float64"\}'):
        sh.read_jsonl(str(p), fields=["a"])[2]
    ds = sh.read_jsonl(str(p), fields={"a": "float64", "b": np.float32, "c": "int16[]", "m.s": None},
                       defaults={"b": -1, "m.s": "none"})
    assert ds[2]["a"].item() == float(2**64) and ds[2]["a"].dtype == np.float64
    assert ds[0]["b"].dtype == np.float32 and ds[1]["b"] == -1
    assert ds[0]["c"].dtype == np.int16 and ds[2]["c"].shape == (0,)
    assert ds[1]["m.s"].item() == b"none"
    with pytest.raises(sh.SchemaError, match=r'line 2.*"b" is null.*defaults='):
        sh.read_jsonl(str(p))[1]
    # The hint works: a default for it.
    assert sh.read_jsonl(str(p), fields=["b"], defaults={"b": 0.0})[1]["b"] == 0.0
    with pytest.raises(sh.InvalidArgumentError, match="not among the fields read"):
        sh.read_jsonl(str(p), fields=["a"], defaults={"b": 0})
    with pytest.raises(sh.InvalidArgumentError, match="unknown dtype"):
        sh.read_jsonl(str(p), fields={"a": "int65"})
    with pytest.raises(sh.InvalidArgumentError, match="on_error"):
        sh.read_jsonl(str(p), on_error="ignore")
    with pytest.raises(sh.InvalidArgumentError, match="finite number"):
        sh.read_jsonl(str(p), defaults={"b": math.nan})


def test_a_default_for_a_field_the_first_line_lacks_adds_it(tmp_path):
    p = write_plain(tmp_path / "d.jsonl", [{"a": 1}, {"a": 2, "extra": [7, 8]}])
    ds = sh.read_jsonl(str(p), defaults={"extra": [0]})
    assert ds[0]["extra"].tolist() == [0] and ds[1]["extra"].tolist() == [7, 8]
