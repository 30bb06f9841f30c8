"""A running pipeline's stats on a local endpoint, for ``stokehold top`` and Prometheus.

Nothing is exposed unless asked: :func:`serve_stats` starts a read-only HTTP server on a
loopback address (never another), in a daemon thread, serving

* ``/metrics``: OpenMetrics text (Prometheus scrapes it; every sample carries the server's
  ``labels``, e.g. ``rank``),
* ``/stats.json``: the dict :meth:`Dataset.stats` returns, with the server's labels,
* ``/``: the printable table.

Each request computes the figures afresh from the pipeline's counters (a snapshot costs
microseconds; the pipeline's threads are not stopped). The server also writes its address to a
per-user folder, so that ``stokehold top PID`` finds the servers of a process; the entry goes
when the server is closed or the process exits.
"""

from __future__ import annotations

import atexit
import importlib
import ipaddress
import json
import os
import re
import socket
import struct
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

from . import _args, _native

if TYPE_CHECKING:
    from .dataset import Dataset

__all__ = ["Stats", "StatsServer", "TensorBoardWriter", "headspace", "serve_stats", "registry_dir"]

#: OpenMetrics' content type (Prometheus negotiates it).
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


class Stats(Dict[str, Any]):
    """What :meth:`Dataset.stats` returns: the figures as a dict (``ops``, ``steps``,
    ``verdict``, ``bottleneck``, memory), and their picture. The table and the picture are drawn
    from the pipeline's figures at the time of the call."""

    def __init__(self, figures: Mapping[str, Any], native: Any) -> None:
        super().__init__(figures)
        self._native = native

    def table(self) -> str:
        """The printable table (one row per stage, the loop's steps, the verdict)."""
        t: Optional[str] = self._native.stats_table()
        return t or ""

    def to_html(self) -> str:
        """The picture: a self-contained HTML page (SVG; no script, nothing fetched) with the
        stages as boxes, the bottleneck outlined in red and marked, the training loop, and,
        with ``with_options(trace_events=N)``, throughput and waits over the recorded window."""
        h: Optional[str] = self._native.stats_html()
        return h or ""

    def show(self, path: Optional[_args.PathLike] = None) -> Optional[str]:
        """Shows the stats: written as the HTML picture to ``path`` (returned) if given; else
        inline in a Jupyter notebook; else printed as the table."""
        if path is not None:
            p = _args.path("show", "path", path)
            with open(p, "w", encoding="utf-8") as f:
                f.write(self.to_html())
            return p
        if _in_notebook():
            shown: Any = importlib.import_module("IPython.display")
            shown.display(shown.HTML(self.to_html()))
            return None
        print(self.table())
        return None

    def _repr_html_(self) -> str:
        return self.to_html()


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython is imported only if it is loaded)."""
    ipython: Any = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def registry_dir() -> str:
    """The folder where serving processes leave their addresses (one file per server, named
    ``<pid>-<port>``), private to this user; ``stokehold top PID`` reads it."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.environ.get("STOKEHOLD_STATS_DIR") or os.path.join(tempfile.gettempdir(), f"stokehold-stats-{uid}")


def _loopback(op: str, host: Any) -> str:
    h = _args.name(op, "host", host)
    try:
        addrs = {str(info[4][0]) for info in socket.getaddrinfo(h, None)}
    except OSError as e:
        raise _args.fail(op, "host", host, f"cannot be resolved ({e})") from None
    if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs):
        raise _args.fail(
            op,
            "host",
            host,
            "must be a loopback address (127.0.0.1, ::1 or localhost): stats are served to this machine only",
        )
    return h


class StatsServer:
    """A running stats endpoint (see :func:`serve_stats`); a context manager."""

    def __init__(self, ds: Dataset, host: str, port: int, labels: Dict[str, str]) -> None:
        self._ds = ds
        self.labels = labels
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body, kind = server.openmetrics(), OPENMETRICS
                elif path == "/stats.json":
                    body, kind = json.dumps(server.stats()), "application/json"
                elif path == "/":
                    body, kind = server.table(), "text/plain; charset=utf-8"
                else:
                    self.send_error(404, "not found: /metrics, /stats.json or /")
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                self.send_error(405, "read-only: GET /metrics, /stats.json or /")

            do_PUT = do_DELETE = do_POST  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # a scrape every few seconds is not news

        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        class Server(ThreadingHTTPServer):
            address_family = family
            # close() waits for the requests in flight (each a snapshot: microseconds), so no
            # connection outlives the server.
            daemon_threads = False
            block_on_close = True

        self._httpd = Server((host, port), Handler)
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="stokehold-stats", daemon=True)
        self._thread.start()
        self._entry: Optional[str] = None
        try:
            folder = registry_dir()
            os.makedirs(folder, mode=0o700, exist_ok=True)
            entry = os.path.join(folder, f"{os.getpid()}-{self.port}")
            with open(entry + ".tmp", "w") as f:
                f.write(self.url)
            os.replace(entry + ".tmp", entry)
            self._entry = entry
        except OSError:
            pass  # `stokehold top URL` still works; only the lookup by pid needs the entry
        atexit.register(self.close)

    @property
    def url(self) -> str:
        """The endpoint's base URL (``http://127.0.0.1:PORT``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stats(self) -> Dict[str, Any]:
        """What ``/stats.json`` serves now: the pipeline's stats and this server's labels."""
        s = self._ds.stats() or {"ops": [], "verdict": "no parallel stage has run yet"}
        return {**s, "labels": self.labels, "pid": os.getpid()}

    def openmetrics(self) -> str:
        """What ``/metrics`` serves now."""
        text: Optional[str] = self._ds._native.stats_openmetrics(sorted(self.labels.items()))
        return text if text is not None else "# EOF\n"

    def table(self) -> str:
        """What ``/`` serves now."""
        t: Optional[str] = self._ds.stats(as_table=True)
        return t if t is not None else "no parallel stage has run yet\n"

    def close(self) -> None:
        """Stops serving and removes the address entry (idempotent)."""
        if self._entry is not None:
            try:
                os.remove(self._entry)
            except OSError:
                pass
            self._entry = None
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join()

    def __enter__(self) -> StatsServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StatsServer({self.url}, labels={self.labels})"


def serve_stats(
    ds: Dataset, port: int = 0, host: str = "127.0.0.1", labels: Optional[Mapping[str, Any]] = None
) -> StatsServer:
    """Serves ``ds``'s stats on ``http://host:port`` (port 0: a free one; read ``.url``) until
    ``close()`` (or the process ends). ``host`` must be a loopback address. ``labels`` (e.g.
    ``{"rank": 3}``) go on every Prometheus sample and into ``/stats.json``, so that ``stokehold
    top`` tells the ranks of a job apart. The figures are the pipeline's executor's, as
    :meth:`Dataset.stats` finds them: serve the dataset you iterate (or one above it)."""
    op = "serve_stats"
    h = _loopback(op, host)
    p = _args.count(op, "port", port, 0, 65535)
    given: Dict[str, str] = {}
    for k, v in dict(labels or {}).items():
        if not isinstance(k, str) or not _LABEL.match(k) or k == "stage" or k.startswith("__"):
            raise _args.fail(
                op,
                "labels",
                labels,
                f"label name {k!r} must match [a-zA-Z_][a-zA-Z0-9_]*, not start with __, "
                "and not be 'stage' (each row's own)",
            )
        given[k] = str(v)
    try:
        return StatsServer(ds, h, p, given)
    except OSError as e:
        raise _args.fail(op, "port", port, f"cannot listen on {h}:{p} ({e.strerror or e})") from None


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int, *, version: Optional[str] = None, scalars: Mapping[str, float] = {}) -> bytes:
    """A ``tensorflow.Event`` (event.proto: wall_time = 1, step = 2, file_version = 3,
    summary = 5; Summary.value = 1; Value.tag = 1, simple_value = 2) as protobuf bytes."""
    out = b"\x09" + struct.pack("<d", wall_time) + _varint(2 << 3) + _varint(step & (2**64 - 1))
    if version is not None:
        out += _field(3, version.encode())
    if scalars:
        values = b"".join(
            _field(1, _field(1, tag.encode()) + b"\x15" + struct.pack("<f", v)) for tag, v in scalars.items()
        )
        out += _field(5, values)
    return out


class TensorBoardWriter:
    """Writes a pipeline's stats as TensorBoard scalars, without TensorFlow: an event file
    (``events.out.tfevents.*``: TFRecord framing of ``tensorflow.Event`` protos) in
    ``logdir``, appended to at each :meth:`log` and flushed, so a running TensorBoard shows the
    curves as they grow. Tags: ``stokehold/steps/input_share``, ``stokehold/steps/next_p50_s``
    (and p99), and per stage ``stokehold/<stage>/elements_per_s``, ``busy``,
    ``element_p50_s``, ``element_p99_s``, ``consumer_wait_p99_s``, ``queue_fill``,
    ``parallelism``."""

    def __init__(self, ds: Dataset, logdir: _args.PathLike) -> None:
        self._ds = ds
        folder = _args.path("TensorBoardWriter", "logdir", logdir)
        os.makedirs(folder, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.stokehold"
        self.path = os.path.join(folder, name)
        self._f = open(self.path, "ab")
        self._write(_event(now, 0, version="brain.Event:2"))

    def _write(self, event: bytes) -> None:
        self._f.write(_native.tfrecord_frame(event))
        self._f.flush()

    def scalars(self) -> Dict[str, float]:
        """The scalars :meth:`log` writes now (tag: value)."""
        st = self._ds.stats()
        if st is None:
            return {}
        out: Dict[str, float] = {}
        steps = st.get("steps")
        if steps:
            out["stokehold/steps/input_share"] = steps["input_share"]
            out["stokehold/steps/next_p50_s"] = steps["next"]["p50_s"]
            out["stokehold/steps/next_p99_s"] = steps["next"]["p99_s"]
        for o in st["ops"]:
            stage = re.sub(r"[^\w.\-/\[\]()>]+", "_", o["op"])[:120]
            for tag, v in (
                ("elements_per_s", o["elements_per_s"]),
                ("busy", o["busy_per_thread"]),
                ("element_p50_s", o["element_time"]["p50_s"]),
                ("element_p99_s", o["element_time"]["p99_s"]),
                ("consumer_wait_p99_s", o["consumer_wait"]["p99_s"]),
                ("queue_fill", o["queue_fill"]),
                ("parallelism", o["parallelism"]),
            ):
                out[f"stokehold/{stage}/{tag}"] = float(v)
        return out

    def log(self, step: int) -> Dict[str, float]:
        """Appends the stats now as scalars at training step ``step``; returns them."""
        values = self.scalars()
        if values:
            self._write(_event(time.time(), _args.count("log", "step", step), scalars=values))
        return values

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> TensorBoardWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def headspace(ds: Dataset, count: int = 10_000) -> Dict[str, float]:
    """How much faster the training loop could take elements than ``ds`` gives them (SPDL's
    headspace): reads the first ``count`` elements of ``ds`` (its epoch 0) at the live rate,
    keeping them in memory (``take(count).cache()``), then replays them from the cache through
    the same iterator, which is the most any consumer could take. Returns ``elements``,
    ``live_per_s``, ``replay_per_s`` and ``headspace`` (replay / live): near 1, the pipeline
    keeps up with anything the loop could do; far above 1, the pipeline is what the loop waits
    for."""
    n = _args.count("headspace", "count", count, 1)
    cached = ds.take(n).cache()

    def rate() -> Tuple[int, float]:
        start = time.perf_counter()
        k = sum(1 for _ in cached)
        return k, k / max(time.perf_counter() - start, 1e-9)

    k, live = rate()
    _, replay = rate()
    return {"elements": float(k), "live_per_s": live, "replay_per_s": replay, "headspace": replay / live}
