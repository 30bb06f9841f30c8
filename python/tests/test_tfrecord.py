"""stokehold.tfrecord: TensorFlow-written fixtures (testdata/tfrecord, made by make_fixtures.py),
writing shards, indexes, corrupt records, Example encoding."""

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import stokehold
from stokehold import tfrecord as tfr

FIXTURES = Path(__file__).resolve().parents[2] / "testdata" / "tfrecord"
FILES = ["plain.tfrecord", "gzip.tfrecord.gz", "zlib.tfrecord.zz"]
SPEC = {
    "label": tfr.FixedLen([], "int64"),
    "floats": tfr.FixedLen([4], np.float32),
    "data": tfr.FixedLen([], "bytes"),
    "ids": tfr.VarLen("int64"),
    "tags": tfr.VarLen("bytes"),
}


def expected():
    with open(FIXTURES / "expected.json") as f:
        j = json.load(f)
    exs = []
    for e in j["examples"]:
        exs.append({
            "label": e["label"][0],
            "floats": np.array([struct.unpack("<f", struct.pack("<I", b))[0] for b in e["floats_bits"]],
                               np.float32),
            "data": bytes.fromhex(e["data"][0]),
            "ids": e["ids"],
            "tags": [bytes.fromhex(t) for t in e["tags"]],
        })
    return exs, [bytes.fromhex(r) for r in j["raw"]]


def row(r, i):
    return r.values[r.row_splits[i]:r.row_splits[i + 1]]


def check_batches(batches, want):
    k = 0
    for b in batches:
        n = len(b["label"])
        assert b["floats"].shape == (n, 4) and b["floats"].dtype == np.float32
        for i in range(n):
            w = want[k + i]
            assert b["label"][i] == w["label"]
            assert b["floats"][i].tobytes() == w["floats"].tobytes()
            assert b["data"][i] == w["data"]
            assert list(row(b["ids"], i)) == w["ids"]
            assert list(row(b["tags"], i)) == w["tags"]
        k += n
    assert k == len(want)


@pytest.mark.parametrize("name", FILES)
def test_reads_tf_written_files(name):
    want, _ = expected()
    path = str(FIXTURES / name)
    check_batches(list(tfr.read_tfrecord(path, SPEC, batch_size=5)), want)
    slow = tfr.parse_examples(stokehold.TFRecordDataset(path).batch(7), SPEC)
    check_batches(list(slow), want)
    one = list(tfr.parse_examples(stokehold.TFRecordDataset(path), SPEC, batched=False))
    assert [int(e["label"]) for e in one] == [w["label"] for w in want]
    assert one[3]["floats"].shape == (4,)


def test_raw_records_and_decode():
    want, raw = expected()
    got = [e["record"].item() for e in stokehold.TFRecordDataset(str(FIXTURES / "raw.tfrecord"))]
    assert got == raw
    first = next(iter(stokehold.TFRecordDataset(str(FIXTURES / "plain.tfrecord"))))["record"].item()
    d = tfr.decode_example(first)
    assert list(d) == ["data", "floats", "ids", "label", "tags"]
    assert d["label"].tolist() == [want[0]["label"]] and d["data"][0] == want[0]["data"]


def test_write_shards_index_random_access(tmp_path):
    n = 50
    src = stokehold.from_arrays({"label": np.arange(n), "x": np.arange(n * 3, dtype=np.float32).reshape(n, 3)})
    calls = []
    paths = tfr.write_tfrecord(src, tmp_path, prefix="train", num_shards=4, progress=lambda r, t: calls.append((r, t)))
    assert [os.path.basename(p) for p in paths] == [f"train-{i:05d}-of-00004.tfrecord" for i in range(4)]
    names = [os.path.basename(p) for p in paths]
    assert sorted(os.listdir(tmp_path)) == sorted(names + [n + ".idx" for n in names])
    assert calls and calls[-1] == (n, n)
    ds = stokehold.TFRecordDataset(paths)
    assert len(ds) == n
    spec = {"label": tfr.FixedLen([], "int64"), "x": tfr.FixedLen([3], "float32")}
    e = tfr.parse_examples(ds, spec, batched=False)[37]
    assert int(e["label"]) == 37 and e["x"].tolist() == [111.0, 112.0, 113.0]
    order = [int(e["label"]) for e in tfr.parse_examples(ds.shuffle(seed=4), spec, batched=False)]
    assert sorted(order) == list(range(n)) and order != list(range(n))
    # Rebuilding the index gives the same record count.
    (ipath, records, skipped), = tfr.build_index(paths[0])
    assert (ipath, records, skipped) == (paths[0] + ".idx", 13, 0)


def test_gzip_shards_and_defaults(tmp_path):
    src = stokehold.from_arrays({"label": np.arange(6)})
    paths = tfr.write_tfrecord(src, tmp_path, records_per_shard=4, compression="GZIP", seed=1)
    assert [os.path.basename(p) for p in paths] == [f"data-0000{i}-of-00002.tfrecord.gz" for i in range(2)]
    spec = {"label": tfr.FixedLen([], "int64"), "missing": tfr.FixedLen([2], "float32", default=0.5)}
    (b,) = list(tfr.read_tfrecord(paths, spec, batch_size=8))
    assert sorted(b["label"].tolist()) == list(range(6)) and b["label"].tolist() != list(range(6))
    assert b["missing"].shape == (6, 2) and (b["missing"] == 0.5).all()
    with pytest.raises(stokehold.SchemaError, match="missing"):
        list(tfr.read_tfrecord(paths, {"missing": tfr.FixedLen([], "int64")}, batch_size=8))


def test_corrupt_records_raise_or_skip(tmp_path):
    data = bytearray((FIXTURES / "plain.tfrecord").read_bytes())
    data[100] ^= 0x40  # inside record 0's data
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    with pytest.raises(stokehold.DataCorruptionError, match=r"bad\.tfrecord.*offset 0"):
        list(stokehold.TFRecordDataset(str(bad)))
    ds = tfr.read_tfrecord(str(bad), SPEC, batch_size=10, on_error="skip")
    want, _ = expected()
    check_batches(list(ds), want[1:])
    log = ds.skipped()
    assert log.count == 1
    (s,) = log.first
    assert (os.path.basename(s.file), s.offset, s.index) == ("bad.tfrecord", 0, 0), s
    assert "bad.tfrecord" in s.error and "offset 0" in s.error and "CRC" in s.error
    # The deprecated alias warns, naming ds.skipped(), and gives the same numbers.
    with pytest.warns(DeprecationWarning, match=r"ds\.skipped\(\)"):
        old = ds.corrupt_records
    assert old.count == 1
    (path, offset, reason), = old.first
    assert (path, offset) == (s.file, s.offset) and "CRC" in reason and "offset" not in reason


@pytest.mark.parametrize("indexed", [False, True])
def test_skipped_records_are_counted_at_any_depth(tmp_path, indexed):
    """The one skip log: after map, batch and prefetch (and a global shuffle where the files are
    indexed) ``ds.skipped()`` still counts the record the reader skipped, naming file and offset."""
    data = bytearray((FIXTURES / "plain.tfrecord").read_bytes())
    data[100] ^= 0x40  # inside record 0's data
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    if indexed:
        assert tfr.build_index(str(bad), on_error="skip")[0][2] == 1
    src = tfr.TFRecordDataset(str(bad), on_error="skip")
    if indexed:
        assert len(src) == 23  # 24 records, one left out of the index
    base = src.shuffle(seed=3) if indexed else src
    ds = base.map(lambda e: {"n": len(e["record"].item())}).batch(2).prefetch(2)
    assert sum(len(b["n"]) for b in ds) == 23
    log = ds.skipped()
    assert log.count == 1, log
    (s,) = log.first
    assert (os.path.basename(s.file), s.offset) == ("bad.tfrecord", 0)
    assert "bad.tfrecord" in s.error and "offset 0" in s.error
    with pytest.warns(DeprecationWarning):
        assert src.corrupt_records.count == log.count


def test_encode_example_round_trip():
    rec = tfr.encode_example({"a": np.array([1, 2, 3]), "b": np.array([0.5], np.float32)})
    d = tfr.decode_example(rec)
    assert d["a"].tolist() == [1, 2, 3] and d["b"].tolist() == [0.5]


def test_bad_arguments():
    with pytest.raises(stokehold.InvalidArgumentError):
        tfr.read_tfrecord(str(FIXTURES / "plain.tfrecord"), {"x": tfr.FixedLen([], "float64")}, batch_size=2)
    with pytest.raises(stokehold.InvalidArgumentError, match="on_corrupt|on_error"):
        stokehold.TFRecordDataset(str(FIXTURES / "plain.tfrecord"), on_error="ignore")
    with pytest.raises(FileNotFoundError):
        list(stokehold.TFRecordDataset("/no/such/file.tfrecord"))


def test_indexes_in_a_side_folder(tmp_path):
    # tf.data's list_files("train-*") would match sidecars beside the files; in the side folder
    # they stay out of every glob over the data folder, and readers still find them.
    src = stokehold.from_arrays({"x": np.arange(12)})
    paths = tfr.write_tfrecord(src, tmp_path, prefix="train", num_shards=3, index="side")
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(p) for p in paths] + [".stokehold-idx"])
    listed = stokehold.list_files(str(tmp_path / "train-*"), shuffle=False)
    assert len(listed) == 3
    ds = stokehold.TFRecordDataset(paths)
    assert ds.is_random_access and len(ds) == 12
    os.remove(tmp_path / ".stokehold-idx" / (os.path.basename(paths[0]) + ".idx"))
    (path, records, skipped), = tfr.build_index(paths[0], side_folder=True)
    assert path.endswith(".stokehold-idx/" + os.path.basename(paths[0]) + ".idx") and records == 4
    with pytest.raises(stokehold.InvalidArgumentError, match=r"write_tfrecord\(index='beside'\)"):
        tfr.write_tfrecord(src, tmp_path / "b", index="beside")


def test_tf_data_keywords_of_tfrecord_dataset(tmp_path):
    """tf.data's spellings (issue 49, class 10): compression_type, buffer_size, name, and
    num_parallel_reads, which interleaves the files one record at a time as tf.data does."""
    n = 9
    src = stokehold.from_arrays({"label": np.arange(n)})
    paths = tfr.write_tfrecord(src, tmp_path, num_shards=3, compression="GZIP")
    spec = {"label": tfr.FixedLen([], "int64")}

    def labels(ds):
        return [int(e["label"]) for e in tfr.parse_examples(ds, spec, batched=False)]

    per_file = [labels(stokehold.TFRecordDataset([p], compression_type="GZIP")) for p in paths]
    assert sorted(sum(per_file, [])) == list(range(n))
    one_by_one = stokehold.TFRecordDataset(paths, compression_type="GZIP", buffer_size=1 << 20,
                                           num_parallel_reads=1, name="train")
    assert labels(one_by_one) == sum(per_file, [])
    # Two files at a time, a record from each in turn; the third file takes the first's place.
    a, b, c = per_file
    want = [x for pair in zip(a, b) for x in pair] + c
    assert len(a) == len(b) == len(c)
    two = stokehold.TFRecordDataset(paths, compression_type="GZIP", num_parallel_reads=2)
    assert labels(two) == want
    with pytest.raises(stokehold.InvalidArgumentError, match=r"compression_type='ZLIB'"):
        stokehold.TFRecordDataset(paths, compression="GZIP", compression_type="ZLIB")
    with pytest.raises(stokehold.InvalidArgumentError, match=r"num_parallel_reads=0"):
        stokehold.TFRecordDataset(paths, num_parallel_reads=0)


def test_tfrecord_edges_as_tf_data(tmp_path):
    """Issue 49, class 7: a bad record in the last batch that drop_remainder drops raises nothing
    (tf.data never parses it); an empty dataset writes one empty file; no files, no records."""
    src = stokehold.from_arrays({"label": np.arange(5)})
    (path,) = tfr.write_tfrecord(src, tmp_path / "good")
    records = [e["record"].item() for e in stokehold.TFRecordDataset([path])]
    bad = records + [b"\xff not an Example"]
    raw = stokehold.from_arrays({"record": np.array(bad, dtype=object)})
    (mixed,) = tfr.write_tfrecord(raw, tmp_path / "mixed")
    spec = {"label": tfr.FixedLen([], "int64")}
    dropped = tfr.read_tfrecord([mixed], spec, batch_size=4, drop_remainder=True)
    assert [b["label"].tolist() for b in dropped] == [[0, 1, 2, 3]]
    kept = iter(tfr.read_tfrecord([mixed], spec, batch_size=4))
    assert next(kept)["label"].tolist() == [0, 1, 2, 3]
    with pytest.raises(stokehold.SchemaError, match="record at offset"):
        next(kept)
    empty = tfr.write_tfrecord(stokehold.from_arrays({"label": np.arange(0)}), tmp_path / "empty")
    assert len(empty) == 1 and os.path.getsize(empty[0]) == 0
    assert list(stokehold.TFRecordDataset(empty)) == []
    assert list(stokehold.TFRecordDataset([])) == []


def test_records_skipped_in_interleaved_files_are_counted(tmp_path):
    """Files opened by interleave (tf.data's files.interleave(TFRecordDataset) habit, and
    num_parallel_reads): what their readers skip is in ``ds.skipped()`` too."""
    data = bytearray((FIXTURES / "plain.tfrecord").read_bytes())
    data[100] ^= 0x40  # inside record 0's data
    paths = []
    for i in range(3):
        p = tmp_path / f"bad{i}.tfrecord"
        p.write_bytes(bytes(data))
        paths.append(str(p))
    files = stokehold.from_arrays({"path": np.array(paths, dtype=object)})
    ds = files.interleave(lambda e: stokehold.TFRecordDataset([e["path"]], on_error="skip"),
                          cycle_length=2).batch(4).prefetch(2)
    assert sum(len(b["record"]) for b in ds) == 3 * 23
    log = ds.skipped()
    assert log.count == 3, log
    assert sorted(os.path.basename(s.file) for s in log.first) == ["bad0.tfrecord", "bad1.tfrecord",
                                                                   "bad2.tfrecord"]
    parallel = stokehold.TFRecordDataset(paths, num_parallel_reads=2, on_error="skip")
    assert sum(1 for _ in parallel) == 3 * 23 and parallel.skipped().count == 3
