"""Object storage from Python against moto's S3 server on loopback (docs/STORAGE.md).

moto_server comes from the test venv (the Makefile installs ``moto[server]``); boto3, which moto
brings along, is the independent client: it uploads what stokehold reads and lists what stokehold
writes. Reads of a shard folder, indexed TFRecords, a table and whole files equal the local reads;
writes land complete (manifest last) and equal a local write byte for byte; globs list keys; a
missing bucket and a missing object are clear errors; a forked child reads after the parent did.
The fault tests (5xx, dropped connections, truncated bodies, changed objects, refused credentials)
are Rust: ``crates/stokehold-io/tests/it/remote.rs``.
"""

import functools
import http.server
import multiprocessing
import os
import subprocess
import sys
import threading
import uuid
import zlib
from pathlib import Path

import numpy as np
import pytest
from s3server import Moto

import stokehold as sh


@pytest.fixture(scope="module")
def moto():
    server = Moto()
    try:
        yield server.client()
    finally:
        server.stop()


@pytest.fixture
def bucket(moto):
    name = f"t-{uuid.uuid4().hex[:12]}"
    moto.create_bucket(Bucket=name)
    return name


def upload(client, bucket, local: Path, prefix: str):
    for f in sorted(local.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), bucket, f"{prefix}/{f.relative_to(local).as_posix()}")


def keys(client, bucket, prefix=""):
    out = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in out)


def body(client, bucket, key) -> bytes:
    data: bytes = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return data


def source(n=500):
    rng = np.random.default_rng(0)
    clips = [rng.standard_normal(int(k), dtype=np.float32) for k in rng.integers(1, 64, n)]
    return sh.from_list([{"id": np.int64(i), "clip": c, "label": f"item {i}".encode()}
                         for i, c in enumerate(clips)])


def same_value(x, y):
    if isinstance(x, np.ndarray) and x.ndim == 0:
        same_value(x.item(), y.item())
    elif isinstance(x, np.ndarray) and x.dtype != object:
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype
    elif isinstance(x, (bytes, str, int, float, np.generic)):
        assert x == y
    else:  # a ragged batch or an object array: element by element
        assert len(x) == len(y)
        for u, v in zip(x, y):
            same_value(u, v)


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        same_value(a[k], b[k])


def test_a_shard_folder_read_from_s3_equals_the_local_read(moto, bucket, tmp_path):
    local = tmp_path / "ds"
    sh.write_shards(source(), local, shard_size=4096, compression="zstd")
    upload(moto, bucket, local, "train")
    url = f"s3://{bucket}/train"
    before = sh.storage_stats()
    remote, direct = sh.open_shards(url), sh.open_shards(local)
    assert len(remote) == len(direct) == 500
    for a, b in zip(remote, direct):
        same(a, b)
    order = [int(e["id"]) for e in remote.global_shuffle(seed=7)]
    assert order == [int(e["id"]) for e in direct.global_shuffle(seed=7)]
    same(remote[499], direct[499])
    for a, b in zip(remote.batch(64, drop_remainder=False), direct.batch(64, drop_remainder=False)):
        same(a, b)
    after = sh.storage_stats()
    assert after["requests"] > before["requests"]
    shard_bytes = sum(f.stat().st_size for f in local.iterdir() if f.suffix == ".stk")
    assert after["bytes"] - before["bytes"] >= shard_bytes  # every record was read once at least
    assert after["hedge_wins"] <= after["hedges"]


def test_write_shards_to_s3_lands_the_same_bytes_as_a_local_write(moto, bucket, tmp_path):
    ds = source()
    sh.write_shards(ds, tmp_path / "ds", shard_size=4096)
    manifest = sh.write_shards(ds, f"s3://{bucket}/copy", shard_size=4096)
    names = sorted(p.name for p in (tmp_path / "ds").iterdir())
    assert keys(moto, bucket, "copy/") == [f"copy/{n}" for n in names]
    for n in names:
        assert body(moto, bucket, f"copy/{n}") == (tmp_path / "ds" / n).read_bytes(), n
    back = sh.open_shards(f"s3://{bucket}/copy")
    assert len(back) == len(ds) == sum(s["records"] for s in manifest["shards"])
    for a, b in zip(back, ds):
        same(a, b)


def test_an_interrupted_upload_never_opens_as_complete(moto, bucket, tmp_path):
    local = tmp_path / "ds"
    sh.write_shards(source(), local, shard_size=4096)
    # What a writer killed before its last upload leaves: every shard, no manifest.
    for f in sorted(local.iterdir()):
        if f.name != "manifest.json":
            moto.upload_file(str(f), bucket, f"half/{f.name}")
    with pytest.raises(sh.StokeholdError, match=f"s3://{bucket}/half"):
        sh.open_shards(f"s3://{bucket}/half")


def test_tfrecords_written_to_s3_read_back_with_their_index(moto, bucket, tmp_path):
    ds = source(300)
    local = sh.tfrecord.write_tfrecord(ds, tmp_path / "tf", num_shards=3)
    remote = sh.tfrecord.write_tfrecord(ds, f"s3://{bucket}/tf", num_shards=3)
    assert [os.path.basename(r) for r in remote] == [os.path.basename(p) for p in local]
    listed = keys(moto, bucket, "tf/")
    assert [k for k in listed if k.endswith(".idx")], listed  # the sidecars went up too
    for p, r in zip(local, remote):
        assert body(moto, bucket, r.removeprefix(f"s3://{bucket}/")) == Path(p).read_bytes()
    a, b = sh.TFRecordDataset(remote), sh.TFRecordDataset(local)
    assert len(a) == len(b) == 300  # random access: the .idx files were found on S3
    assert a[123]["record"] == b[123]["record"]
    assert [e["record"] for e in a] == [e["record"] for e in b]


def test_a_table_on_s3_gathers_the_same_rows_as_numpy(moto, bucket, tmp_path):
    rows = np.arange(4000 * 24, dtype=np.float32).reshape(4000, 24)
    np.save(tmp_path / "t.npy", rows)
    moto.upload_file(str(tmp_path / "t.npy"), bucket, "feat/t.npy")
    table = sh.open_table(f"s3://{bucket}/feat/t.npy")
    assert table.shape == rows.shape and table.dtype == rows.dtype
    idx = np.random.default_rng(1).integers(0, 4000, 512)
    np.testing.assert_array_equal(table.take(idx), rows[idx])
    with pytest.raises(IndexError, match="4000"):
        table.take(np.array([4000]))


def test_list_files_globs_keys_and_read_file_reads_them_whole(moto, bucket):
    for k in ["img/a/1.bin", "img/a/2.bin", "img/b/3.bin", "img/b/notes.txt", "other/4.bin"]:
        moto.put_object(Bucket=bucket, Key=k, Body=k.encode() * 3)
    files = sh.Dataset.list_files(f"s3://{bucket}/img/**/*.bin", shuffle=False)
    got = [np.asarray(e["path"]).item().decode() for e in files]
    assert got == [f"s3://{bucket}/img/a/1.bin", f"s3://{bucket}/img/a/2.bin", f"s3://{bucket}/img/b/3.bin"]
    data = [np.asarray(e["data"]).item() for e in files.read_file()]
    assert data == [k.encode() * 3 for k in ["img/a/1.bin", "img/a/2.bin", "img/b/3.bin"]]
    with pytest.raises(sh.StokeholdError, match="no file matches"):
        sh.Dataset.list_files(f"s3://{bucket}/img/**/*.png")


def test_a_missing_bucket_and_a_missing_object_are_clear_errors(moto, bucket):
    with pytest.raises(sh.StokeholdError, match="s3://no-such-bucket-x/ds"):
        sh.open_shards("s3://no-such-bucket-x/ds")
    with pytest.raises(sh.StokeholdError, match=f"s3://{bucket}/none.npy"):
        sh.open_table(f"s3://{bucket}/none.npy")


def test_a_key_with_dot_dot_segments_is_left_out_of_list_files_and_counted(moto, bucket):
    import urllib.request

    moto.put_object(Bucket=bucket, Key="img/a.bin", Body=b"a")
    # A legal S3 key leading out of the prefix, written unsigned straight to moto (boto3 may
    # normalize the path; stokehold refuses to write such a key).
    url = f"{moto.meta.endpoint_url}/{bucket}/img/x/%2E%2E/%2E%2E/evil.bin"
    urllib.request.urlopen(urllib.request.Request(url, data=b"evil", method="PUT")).close()
    assert "img/x/../../evil.bin" in keys(moto, bucket)
    before = sh.storage_stats()["keys_left_out"]
    files = sh.Dataset.list_files(f"s3://{bucket}/img/**", shuffle=False)
    got = [np.asarray(e["path"]).item().decode() for e in files]
    assert got == [f"s3://{bucket}/img/a.bin"]
    assert sh.storage_stats()["keys_left_out"] > before


def test_malformed_endpoints_and_retry_options_are_refused_by_name():
    cases = [
        ({"aws_endpoint": "http://127.0.0.1:99999"}, {}, "aws_endpoint", "99999"),
        ({"aws_endpoint": "http://999.1.1.1:9000"}, {}, "aws_endpoint", "999.1.1.1"),
        ({"aws_endpoint": "localhost:9000"}, {}, "aws_endpoint", "localhost:9000"),
        ({}, {"retry_timeout": -1}, "retry_timeout", "-1"),
        ({}, {"retry_timeout": float("nan")}, "retry_timeout", "nan"),
        ({}, {"max_retries": -2}, "max_retries", "-2"),
        ({"retry_timeout": "soon"}, {}, "retry_timeout", "soon"),
    ]
    for options, kwargs, name, value in cases:
        with pytest.raises(sh.InvalidArgumentError) as e:
            sh.set_storage_options(options, store="s3://never-opened", **kwargs)
        assert name in str(e.value) and value in str(e.value), str(e.value)
    # An http(s) URL is its own endpoint: refused by name when read, never a panic.
    with pytest.raises(sh.InvalidArgumentError, match="not a valid endpoint URL"):
        sh.open_table("http://127.0.0.1:99999/t.npy")


def test_a_request_gives_up_after_its_retry_budget_naming_url_attempts_and_time(moto):
    import socket

    with socket.socket() as s:  # a port nobody listens on: every connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sh.set_storage_options({"aws_endpoint": f"http://127.0.0.1:{port}"}, store="s3://nowhere-x",
                           retry_timeout=0.5, max_retries=100)
    with pytest.raises(sh.StokeholdError) as e:
        sh.open_table("s3://nowhere-x/t.npy")
    msg = str(e.value)
    assert f"HEAD http://127.0.0.1:{port}/nowhere-x/t.npy: gave up after " in msg, msg
    assert "attempts in " in msg and "retry_timeout 0.5 s, max_retries 100" in msg, msg


def _child_reads(url, n, out):
    try:
        ds = sh.open_shards(url)
        out.put([int(e["id"]) for e in ds][:n] == list(range(n)) and len(ds) == n)
    except BaseException as e:  # reported to the parent, which fails the test with it
        out.put(repr(e))


def test_a_forked_child_reads_after_the_parent_used_the_store(moto, bucket, tmp_path):
    local = tmp_path / "ds"
    sh.write_shards(source(200), local, shard_size=4096)
    upload(moto, bucket, local, "fork")
    url = f"s3://{bucket}/fork"
    assert len(sh.open_shards(url)) == 200  # the parent's runtime is running now
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_reads, args=(url, 200, out))
    child.start()
    got = out.get(timeout=60)
    child.join(timeout=60)
    assert got is True, got
    assert child.exitcode == 0


PROFILE_READ = """
import stokehold as sh
ds = sh.open_shards("s3://{bucket}/prof")
print(len(ds), int(ds[len(ds) - 1]["id"]))
"""


def test_an_aws_profile_supplies_the_keys_region_and_endpoint(moto, bucket, tmp_path):
    """A user's ~/.aws files under AWS_PROFILE reach the store with nothing set in code."""
    local = tmp_path / "ds"
    sh.write_shards(source(50), local, shard_size=4096)
    upload(moto, bucket, local, "prof")
    aws = tmp_path / "home" / ".aws"
    aws.mkdir(parents=True)
    (aws / "credentials").write_text("[lab]\naws_access_key_id = testing\n"
                                     "aws_secret_access_key = testing\n")
    (aws / "config").write_text(f"[profile lab]\nregion = us-east-1\n"
                                f"endpoint_url = {moto.meta.endpoint_url}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path / "home"), AWS_PROFILE="lab")
    run = subprocess.run([sys.executable, "-c", PROFILE_READ.format(bucket=bucket)], env=env,
                         capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["50", "49"]
    env["AWS_PROFILE"] = "nope"
    run = subprocess.run([sys.executable, "-c", PROFILE_READ.format(bucket=bucket)], env=env,
                         capture_output=True, text=True, timeout=100)
    assert run.returncode != 0 and "AWS profile \"nope\"" in run.stderr, run.stderr


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with what an object-store HTTP client needs: ranged GETs (206 and
    Content-Range), an ETag, and If-Match answered with 412 when it differs."""

    def log_message(self, *args):
        pass

    def _file(self):
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return None
        data = path.read_bytes()
        etag = f'"{zlib.crc32(data):08x}-{len(data)}"'
        want = self.headers.get("If-Match")
        if want is not None and want != etag:
            self.send_error(412)
            return None
        return data, etag

    def _answer(self, body_too):
        got = self._file()
        if got is None:
            return
        data, etag = got
        rng = self.headers.get("Range")
        status, part = 200, data
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start, end = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
            status, part = 206, data[start:end + 1]
        self.send_response(status)
        self.send_header("Content-Length", str(len(part)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", self.date_time_string(0))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.end_headers()
        if body_too:
            self.wfile.write(part)

    def do_HEAD(self):
        self._answer(False)

    def do_GET(self):
        self._answer(True)


@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_RangeHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_urls_read_tables_and_indexed_tfrecords_by_range(http_root):
    root, base = http_root
    rows = np.arange(3000 * 10, dtype=np.int32).reshape(3000, 10)
    np.save(root / "t.npy", rows)
    table = sh.open_table(f"{base}/t.npy")
    idx = np.random.default_rng(2).integers(0, 3000, 300)
    np.testing.assert_array_equal(table.take(idx), rows[idx])
    ds = source(120)
    files = sh.tfrecord.write_tfrecord(ds, root / "tf", num_shards=2)
    urls = [f"{base}/tf/{os.path.basename(f)}" for f in files]
    a, b = sh.TFRecordDataset(urls), sh.TFRecordDataset(files)
    assert len(a) == len(b) == 120  # random access: each .idx read over HTTP
    assert a[77]["record"] == b[77]["record"]
    assert [e["record"] for e in a] == [e["record"] for e in b]
    with pytest.raises(sh.StokeholdError, match=f"{base}/none.npy"):
        sh.open_table(f"{base}/none.npy")


def test_ranks_reading_one_bucket_partition_each_epoch_exactly(moto, bucket, tmp_path):
    """docs/STORAGE.md's recipe: every rank opens the same URL, shuffles with the same seed and
    takes its shard; the ranks' parts are disjoint and cover the epoch, in every epoch."""
    local = tmp_path / "ds"
    sh.write_shards(source(301), local, shard_size=4096)
    upload(moto, bucket, local, "ranks")
    world = 3
    parts = [sh.open_shards(f"s3://{bucket}/ranks").shuffle(seed=0).shard(world, rank)
             for rank in range(world)]
    per_rank = [[[int(e["id"]) for e in ep] for ep in p.epochs(2)] for p in parts]
    for epoch in range(2):
        ids = [epochs[epoch] for epochs in per_rank]
        assert sorted(i for part in ids for i in part) == list(range(301)), epoch
        assert sum(len(part) for part in ids) == 301
    assert per_rank[0][0] != per_rank[0][1]  # a new permutation each epoch
    assert [int(e["id"]) for e in parts[0]] != sorted(int(e["id"]) for e in parts[0])
