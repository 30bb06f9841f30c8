"""read_parquet / read_arrow / from_hf against what pyarrow and datasets read from the same files
(testdata/parquet/, made by its make_fixtures.py; expected.json holds their values): nested,
dictionary, nullable columns, several row groups with and without a page index, Arrow IPC file
and stream, a save_to_disk folder and one saved after map + shuffle; random access, batches,
shuffle and resume; errors named by file and position; a file on S3 (moto on loopback)."""

import json
import uuid
from pathlib import Path

import numpy as np
import pytest

import stokehold as sh

HERE = Path(__file__).resolve().parents[2] / "testdata" / "parquet"
EXPECTED = json.loads((HERE / "expected.json").read_text())


def same(got, want, where):
    if isinstance(want, str):
        b = got.item() if isinstance(got, np.ndarray) else got
        assert b == want.encode() or b.hex() == want, where
        return
    if isinstance(want, list) and want and isinstance(want[0], str):
        assert [bytes(x) for x in got.tolist()] == [w.encode() for w in want], where
        return
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want, dtype=got.dtype), err_msg=where)


def check(ds, picks, name):
    for i, row in picks.items():
        e = ds[int(i)]
        assert sorted(e) == sorted(row), (name, i)
        for col, want in row.items():
            same(e[col], want, f"{name} row {i} column {col}")


@pytest.mark.parametrize("name", ["paged", "nopage"])
def test_parquet_rows_equal_pyarrows(name):
    ds = sh.read_parquet(str(HERE / f"{name}.parquet"))
    assert len(ds) == EXPECTED[name]["rows"] == 1000
    check(ds, EXPECTED[name]["picks"], name)
    e = ds[5]
    assert e["vec"].dtype == np.float32 and e["vec"].shape == (3,)
    assert e["tokens"].dtype == np.int32 and e["tokens"].shape == (0,)
    assert e["cat"].item() == b"blue" and e["flag"].dtype == np.bool_


def test_columns_batches_and_get_batch():
    ds = sh.read_parquet(
        [str(HERE / "paged.parquet"), str(HERE / "nopage.parquet")], columns=["id", "meta.score", "vec"]
    )
    assert len(ds) == 2000
    b = ds.get_batch([3, 1500, 999])
    np.testing.assert_array_equal(b["id"], [3, 500, 999])
    np.testing.assert_array_equal(b["meta.score"], [0.75, 125.0, 249.75])
    assert b["vec"].shape == (3, 3)
    first = next(iter(ds.batch(4)))
    assert sorted(first) == ["id", "meta.score", "vec"]
    np.testing.assert_array_equal(first["id"], [0, 1, 2, 3])


def test_shuffle_is_a_permutation_and_resumes_exactly():
    ds = sh.read_parquet(str(HERE / "paged.parquet"), columns="id", cache_bytes=50_000)
    batches = ds.shuffle(seed=4).batch(50)
    full = [b["id"].tolist() for b in batches.iter(0)]
    flat = sum(full, [])
    assert sorted(flat) == list(range(1000)) and flat != list(range(1000))
    it = batches.iter(0)
    head = [next(it)["id"].tolist() for _ in range(7)]
    state = json.loads(json.dumps(it.get_state()))
    again = batches.iter(0)
    again.set_state(state)
    assert head + [b["id"].tolist() for b in again] == full


def test_nulls_raise_naming_column_file_and_row_unless_defaulted():
    path = str(HERE / "nullable.parquet")
    ds = sh.read_parquet(path, columns=["id", "maybe"])
    with pytest.raises(sh.SchemaError, match=r'column "maybe" is null at row 2 of .*nullable\.parquet'):
        ds[2]
    ds = sh.read_parquet(path, defaults={"maybe": -1, "s.a": 0, "l": []}, columns=["maybe", "s", "l"])
    assert ds[4]["maybe"] == -1 and ds[3]["s.a"] == 0 and ds[3]["l"].shape == (0,)
    with pytest.raises(sh.SchemaError, match=r'column "l" holds a null inside its list at row 1'):
        ds[1]


def test_an_unsupported_type_names_its_column_and_columns_leaves_it_out():
    path = str(HERE / "unsupported.parquet")
    with pytest.raises(sh.SchemaError, match=r'column "day" has Arrow type Date32.*columns=\[\.\.\.\]'):
        sh.read_parquet(path)
    assert len(sh.read_parquet(path, columns=["id"])) == 2
    with pytest.raises(sh.InvalidArgumentError, match=r'no column "nope"; the files hold id, day'):
        sh.read_parquet(path, columns=["nope"])


def test_a_truncated_footer_and_a_corrupt_page_are_named(tmp_path):
    whole = (HERE / "paged.parquet").read_bytes()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(whole[:-5])
    with pytest.raises(sh.DataCorruptionError, match=r"cut\.parquet.*not a readable Parquet file"):
        sh.read_parquet(str(cut))
    bad = tmp_path / "bad.parquet"
    mid = len(whole) * 3 // 8
    bad.write_bytes(whole[:mid] + b"\xa5" * 400 + whole[mid + 400 :])
    ds = sh.read_parquet(str(bad))
    errors = []
    for i in range(len(ds)):
        try:
            ds[i]
        except sh.DataCorruptionError as e:
            errors.append(str(e))
    assert errors, "corrupt data read without an error"
    assert all("bad.parquet" in e and "row group" in e for e in errors), errors[:3]


@pytest.mark.parametrize("name", ["data.arrow", "data.arrows"])
def test_arrow_ipc_file_and_stream(name):
    ds = sh.read_arrow(str(HERE / name))
    assert len(ds) == 100
    check(ds, EXPECTED["ipc"]["picks"], name)


@pytest.mark.parametrize("name", ["hf_saved", "hf_shuffled"])
def test_from_hf_reads_a_save_to_disk_folder_in_hfs_order(name):
    ds = sh.from_hf(str(HERE / name))
    assert len(ds) == EXPECTED[name]["rows"]
    check(ds, EXPECTED[name]["picks"], name)


def test_from_hf_refuses_what_is_not_a_dataset(tmp_path):
    with pytest.raises(sh.InvalidArgumentError, match="without state.json"):
        sh.from_hf(str(tmp_path))
    with pytest.raises(sh.InvalidArgumentError, match="must be a datasets.Dataset"):
        sh.from_hf(3)


@pytest.fixture(scope="module")
def moto():
    from s3server import Moto

    server = Moto()
    try:
        yield server.client()
    finally:
        server.stop()


def test_a_parquet_file_on_s3_reads_as_the_local_one(moto):
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    moto.create_bucket(Bucket=bucket)
    moto.upload_file(str(HERE / "paged.parquet"), bucket, "pq/paged.parquet")
    ds = sh.read_parquet(f"s3://{bucket}/pq/paged.parquet", columns=["id", "text", "tokens"])
    local = sh.read_parquet(str(HERE / "paged.parquet"), columns=["id", "text", "tokens"])
    assert len(ds) == len(local) == 1000
    for i in [0, 99, 100, 650, 999]:
        a, b = ds[i], local[i]
        assert a["id"] == b["id"] and a["text"].item() == b["text"].item()
        np.testing.assert_array_equal(a["tokens"], b["tokens"])


def _shuffle_quality():
    """bench/common/stats.py's shuffle_quality: the shard shuffle's uniformity metrics."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "common" / "stats.py"
    spec = importlib.util.spec_from_file_location("bench_stats", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.shuffle_quality


def test_the_global_shuffle_is_uniform_by_the_shard_shuffles_metrics():
    quality = _shuffle_quality()
    ds = sh.read_parquet(str(HERE / "paged.parquet"), columns="id")  # 4 row groups of 250
    ids = np.concatenate([b["id"] for b in ds.shuffle(seed=11).batch(100)])
    q = quality(ids, per_shard=250)
    assert abs(q["spearman"]) < 0.1 and abs(q["mean displacement / N"] - 1 / 3) < 0.04, q
    assert abs(q["adjacent same-shard fraction"] - 1 / 4) < 0.06, q
    # The metric tells a blocked order apart: a window of one row group keeps neighbours together.
    ids = np.concatenate([b["id"] for b in ds.window_shuffle(250, seed=11).batch(100)])
    assert quality(ids, per_shard=250)["adjacent same-shard fraction"] > 0.95
