"""Issue 51: a running pipeline's stats on an opt-in loopback endpoint (OpenMetrics for
Prometheus, JSON, a table), ``stokehold top`` attached to it by pid or URL (and under tmux, as
a person sees it), the training loop's step view in ``stats()``. Real servers, real sockets,
the real ``stokehold`` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import stokehold as sh
from stokehold import monitor

SCRIPT = Path(sys.executable).parent / "stokehold"


@pytest.fixture(autouse=True)
def _private_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The folder where servers leave their addresses: one per test, so `top PID` sees only its.
    monkeypatch.setenv("STOKEHOLD_STATS_DIR", str(tmp_path / "registry"))
    yield


def _pipeline(n: int = 64) -> Any:
    def slow(e: Any) -> Any:
        time.sleep(0.002)
        return e

    return sh.from_arrays({"x": np.arange(n)}).map(slow, num_parallel_calls=2).with_options(cores=2)


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, "", e.read().decode()


def _top(*args: str, env_dir: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STOKEHOLD_STATS_DIR=env_dir)
    return subprocess.run([str(SCRIPT), "top", *args], capture_output=True, text=True, timeout=60, env=env)


def test_stats_have_the_loops_steps_and_each_stages_percentiles() -> None:
    ds = _pipeline()
    assert sum(1 for _ in ds) == 64
    s = ds.stats()
    steps = s["steps"]
    # 65 calls (the last one ends the loop); the first has no step before it.
    assert steps["steps"] == 64 and steps["next"]["count"] == 65, steps
    assert 0.0 <= steps["input_share"] <= 1.0
    assert steps["input_bound"] == (steps["next"]["p50_s"] > 50e-6)
    stage = next(o for o in s["ops"] if "slow" in o["op"])
    # Every element slept 2 ms on a worker.
    assert stage["element_time"]["count"] == 64
    assert stage["element_time"]["p50_s"] >= 0.002 * 0.93, stage
    assert stage["consumer_wait"]["count"] == 64
    table = ds.stats(as_table=True)
    assert "el.p50" in table and "steps: 64; next() p50" in table, table


def test_the_endpoint_is_off_unless_asked_and_binds_loopback_only() -> None:
    ds = _pipeline(8)
    list(ds)
    for host in ("0.0.0.0", "8.8.8.8", "::"):
        with pytest.raises(sh.InvalidArgumentError, match="must be a loopback address"):
            sh.serve_stats(ds, host=host)
    for bad in ({"stage": "x"}, {"1rank": 0}, {"__x": 1}):
        with pytest.raises(sh.InvalidArgumentError, match="label name"):
            sh.serve_stats(ds, labels=bad)
    # Iterating starts no server: the registry folder holds nothing.
    folder = Path(monitor.registry_dir())
    assert not folder.exists() or not any(folder.iterdir())


def test_prometheus_scrape_json_table_and_read_only() -> None:
    ds = _pipeline()
    list(ds)
    with sh.serve_stats(ds, labels={"rank": 3, "job": "lm"}) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        status, kind, text = _get(srv.url + "/metrics")
        assert status == 200 and kind.startswith("application/openmetrics-text"), kind
        families = {f.name: f for f in text_string_to_metric_families(text)}
        elements = families["stokehold_stage_elements"]
        assert elements.type == "counter"
        rows = {s.labels["stage"]: s for s in elements.samples if s.name == "stokehold_stage_elements_total"}
        stage = next(k for k in rows if "slow" in k)
        assert rows[stage].value == 64 and rows[stage].labels["rank"] == "3" and rows[stage].labels["job"] == "lm"
        summary = families["stokehold_stage_element_seconds"]
        assert summary.type == "summary" and summary.unit == "seconds"
        p50 = next(s for s in summary.samples if s.labels.get("stage") == stage and s.labels.get("quantile") == "0.5")
        assert p50.value >= 0.002 * 0.93
        assert families["stokehold_step_input_ratio"].samples[0].labels == {"rank": "3", "job": "lm"}
        assert families["stokehold_memory_budget_bytes"].samples[0].value > 0

        status, kind, body = _get(srv.url + "/stats.json")
        got = json.loads(body)
        assert status == 200 and got["labels"] == {"rank": "3", "job": "lm"} and got["pid"] == os.getpid()
        assert any("slow" in o["op"] for o in got["ops"]) and got["verdict"]
        status, _, table = _get(srv.url + "/")
        assert status == 200 and "verdict:" in table
        assert _get(srv.url + "/nothing")[0] == 404
        req = urllib.request.Request(srv.url + "/metrics", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 405
        e.value.close()
        entry = Path(monitor.registry_dir()) / f"{os.getpid()}-{srv.port}"
        assert entry.read_text() == srv.url
    # Closed: the entry is gone and nothing listens.
    assert not entry.exists()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(srv.url + "/metrics", timeout=5)


def test_stokehold_top_attaches_by_pid_and_url_shows_the_ranks_and_exits_cleanly() -> None:
    assert SCRIPT.is_file(), f"no {SCRIPT}"
    a, b = _pipeline(), _pipeline(32)
    list(a)
    list(b)
    with sh.serve_stats(a, labels={"rank": 0}) as r0, sh.serve_stats(b, labels={"rank": 1}) as r1:
        folder = monitor.registry_dir()
        # By pid: both servers of this process.
        r = _top(str(os.getpid()), "--count", "1", env_dir=folder)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert out.count("map[") >= 2 and "rank=0" in out and "rank=1" in out, out
        assert "steps: 64" in out and "steps: 32" in out and "verdict:" in out, out
        assert "ranks: waiting in next()" in out and "the rank that waits most for input" in out, out
        # The pictures, one per endpoint.
        r = _top(r0.url, r1.url, "--html", str(Path(folder) / "job.html"), env_dir=folder)
        assert r.returncode == 0, r.stderr
        for k in (0, 1):
            page = (Path(folder) / f"job-{k}.html").read_text()
            assert page.startswith("<!DOCTYPE html>") and "training loop" in page and "map[" in page
        # By URL, two frames.
        r = _top(r1.url, "--count", "2", "--interval", "0.1", env_dir=folder)
        assert r.returncode == 0 and r.stdout.count("== rank=1") == 2, r.stdout + r.stderr
        url = r0.url
    # Nothing serves any more: a clear error, exit 1; an unknown pid is named.
    r = _top(url, "--count", "1", env_dir=folder)
    assert r.returncode == 1 and "no endpoint answers" in r.stderr, r.stderr
    r = _top("999999999", env_dir=folder)
    assert r.returncode == 1 and "process 999999999 serves no stats" in r.stderr, r.stderr


def test_stokehold_top_in_a_terminal_under_tmux(tmp_path: Path) -> None:
    if _tool("tmux") is None:
        pytest.skip("tmux (Debian's package) is not installed")
    ds = _pipeline()
    list(ds)
    session = f"stokehold-top-{os.getpid()}"
    with sh.serve_stats(ds, labels={"rank": 0}) as srv:
        cmd = f"{SCRIPT} top {srv.url} --interval 0.2 --count 50"
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", cmd], check=True)
        try:
            deadline = time.monotonic() + 30
            screen = ""
            while time.monotonic() < deadline and "verdict:" not in screen:
                time.sleep(0.2)
                screen = subprocess.run(
                    ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
                ).stdout
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    (tmp_path / "screen.txt").write_text(screen)
    assert "map[" in screen and "rank=0" in screen and "verdict:" in screen, screen
    # A refreshing view: the screen was cleared, so the table is at the top, once.
    assert screen.lstrip().startswith("== rank=0"), screen
    assert screen.count("verdict:") == 1, screen


def test_serving_while_the_loop_runs_sees_the_figures_grow() -> None:
    ds = _pipeline(400)
    it = iter(ds)
    next(it)
    with sh.serve_stats(ds) as srv:
        counts = []
        for _ in range(3):
            for _ in range(50):
                next(it)
            got = json.loads(_get(srv.url + "/stats.json")[2])
            counts.append(got["steps"]["steps"])
        # Scrapes from another thread while the loop goes on: each sees the steps so far.
        assert counts == sorted(counts) and counts[-1] >= 150, counts
        done = threading.Event()

        def scrape() -> None:
            while not done.is_set():
                _get(srv.url + "/metrics")

        t = threading.Thread(target=scrape)
        t.start()
        rest = sum(1 for _ in it)
        done.set()
        t.join()
    assert rest == 400 - 151


def _tool(name: str) -> Optional[str]:
    """A Debian tool the picture tests use: `.ci/run` installs them, so there a missing one
    fails (STOKEHOLD_REQUIRE_TOOLS=1); elsewhere its test is skipped."""
    found = shutil.which(name)
    if found is None and os.environ.get("STOKEHOLD_REQUIRE_TOOLS") == "1":
        pytest.fail(f"{name} is not installed (.ci/run installs it with apt-get)")
    return found


def decode_fast(e: Any) -> Any:
    return e


def decode_slowly(e: Any) -> Any:
    time.sleep(0.004)
    return e


def _bottlenecked() -> Any:
    """A pipeline whose bottleneck is known: a slow map on one thread behind a fast one."""
    ds = (
        sh.from_arrays({"x": np.arange(80)})
        .map(decode_fast, num_parallel_calls=1)
        .prefetch(4)
        .map(decode_slowly, num_parallel_calls=1)
        .with_options(cores=2, trace_events=20_000)
    )
    assert sum(1 for _ in ds) == 80
    return ds


def test_the_picture_is_a_self_contained_page_marking_the_bottleneck(tmp_path: Path) -> None:
    ds = _bottlenecked()
    st = ds.stats()
    assert isinstance(st, dict) and "decode_slowly" in st["bottleneck"], st["verdict"]
    assert "decode_slowly" in st["verdict"]
    out = st.show(tmp_path / "stats.html")
    html = Path(out).read_text()
    assert (
        html.startswith("<!DOCTYPE html>")
        and "<script" not in html
        and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    )
    assert html.count("BOTTLENECK") == 1 and html.count('class="stage bottleneck"') == 1
    assert "decode_fast" in html and "decode_slowly" in html and "training loop" in html
    assert "Throughput over the recorded window" in html
    # Jupyter's hook draws the same picture (of the figures at its call).
    assert st._repr_html_().startswith("<!DOCTYPE html>") and "BOTTLENECK" in st._repr_html_()
    # In a terminal: the table.
    assert "verdict:" in st.table()


def test_the_picture_in_a_headless_browser_shows_the_stages_and_the_mark(tmp_path: Path) -> None:
    chromium = _tool("chromium")
    tesseract = _tool("tesseract")
    if chromium is None or tesseract is None:
        pytest.skip("chromium and tesseract (Debian's packages) are not installed")
    ds = _bottlenecked()
    page = ds.stats().show(tmp_path / "stats.html")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=2",
            "--window-size=1300,900",
            f"--screenshot={shot}",
            f"file://{page}",
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    # The screenshot decoded by stokehold's own PNG decoder.
    pixels = sh.from_list([{"path": np.array(str(shot).encode())}]).load_image()[0]["image"]
    rgb = np.asarray(pixels)[..., :3].astype(int)
    # The bottleneck's outline: #d62728 drawn 4 px wide (8 at scale 2) around one box.
    red = (abs(rgb[..., 0] - 0xD6) < 24) & (abs(rgb[..., 1] - 0x27) < 24) & (abs(rgb[..., 2] - 0x28) < 24)
    assert red.sum() > 2000, red.sum()
    text = subprocess.run([tesseract, str(shot), "-"], capture_output=True, text=True, timeout=120).stdout
    words = " ".join(text.split())
    for seen in ("BOTTLENECK", "decode_slowly", "training loop", "verdict", "elem/s"):
        assert seen in words, f"{seen!r} not read off the screenshot: {words}"


def _event_class() -> Any:
    """``tensorflow.Event`` (the fields TensorBoard's scalars use), built from a descriptor with
    protobuf itself (in the test venv through ray): an independent reader of our bytes."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="event_subset.proto", package="tensorflow")
    T = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="SummaryValue")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT, label=T.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(
        name="value", number=1, type=T.TYPE_MESSAGE, label=T.LABEL_REPEATED, type_name=".tensorflow.SummaryValue"
    )
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    event.field.add(
        name="summary", number=5, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL, type_name=".tensorflow.Summary"
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Event"))


def test_tensorboard_scalars_are_an_event_file_tensorboard_reads(tmp_path: Path) -> None:
    ds = _pipeline()
    logged = []
    with monitor.TensorBoardWriter(ds, tmp_path / "logs") as tb:
        for step, _ in enumerate(ds):
            if step in (10, 40):
                logged.append(tb.log(step))
    files = list((tmp_path / "logs").glob("events.out.tfevents.*"))
    assert files == [Path(tb.path)]
    # TFRecord framing (CRCs checked by stokehold's reader), then the protos.
    records = [e["record"].item() for e in sh.TFRecordDataset(str(files[0]))]
    Event = _event_class()
    events = [Event.FromString(r) for r in records]
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in events[1:]] == [10, 40]
    for e, want in zip(events[1:], logged):
        got = {v.tag: v.simple_value for v in e.summary.value}
        assert got.keys() == want.keys() and "stokehold/steps/input_share" in got
        assert all(abs(got[k] - np.float32(want[k])) <= abs(want[k]) * 1e-6 for k in got)
    stage = next(k for k in logged[1] if k.endswith("/elements_per_s"))
    assert logged[1][stage] > 0


def test_headspace_replays_a_cached_epoch_beside_the_live_rate() -> None:
    def slow(e: Any) -> Any:
        time.sleep(0.003)
        return e

    ds = sh.from_arrays({"x": np.arange(1000)}).map(slow)
    h = ds.headspace(100)
    assert h["elements"] == 100
    # Live: at most one element per 3 ms; replayed from memory: no sleep at all.
    assert h["live_per_s"] <= 1 / 0.003
    assert h["replay_per_s"] > h["live_per_s"] and h["headspace"] == h["replay_per_s"] / h["live_per_s"]
    with pytest.raises(sh.InvalidArgumentError, match="count"):
        ds.headspace(0)
