"""Shared machinery for the tests that feed stokehold hostile arguments (issue 50): a child
interpreter under an address-space limit (so a huge allocation fails instead of swapping, and an
abort kills the child, not pytest), and the adversarial suite's discovery, fixtures and child
driver (``test_hostile_args.py``).

The child (``child_main``) reads cases (JSON, one a line) on stdin and prints, for each, a
``start`` line and then its outcome, flushed, so that the parent can name the case a child died
or hung in."""

from __future__ import annotations

import collections.abc
import functools
import importlib
import inspect
import io
import json
import math
import os
import struct
import subprocess
import sys
import tarfile
import typing
import wave
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

#: The child's address-space limit: a huge allocation fails instead of swapping.
LIMIT = 4 << 30

#: The prelude of every child script: the limit, before numpy or stokehold allocate.
PRELUDE = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))\n"


def run_limited(script: str, timeout: float, stdin: Optional[str] = None,
                args: Tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` in a child interpreter under ``LIMIT`` (one BLAS thread: its arenas
    would eat the address space)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", PRELUDE + script, *args], capture_output=True,
                          text=True, timeout=timeout, env=env, input=stdin)


# ---- hostile values -------------------------------------------------------------------------

INTS: List[Any] = [0, -1, -2**31, 2**31, 2**40, 2**63]
FLOATS: List[Any] = [float(v) for v in INTS] + [math.nan, math.inf, -math.inf]

#: The modules whose public functions (their ``__all__``) are the declared API, with Dataset's
#: public methods. A module that does not exist (yet) is left out.
MODULES = ["stokehold", "stokehold.tfrecord", "stokehold.audio", "stokehold.image"]


def _namespace() -> Dict[str, Any]:
    """Names an annotation may use that its module imports only under TYPE_CHECKING."""
    ns: Dict[str, Any] = {"os": os}
    for name in ["dataset", "image", "table", "audio", "tfrecord", "sources", "shards", "iterator"]:
        try:
            ns.update(vars(importlib.import_module(f"stokehold.{name}")))
        except ImportError:
            pass
    return ns


@functools.cache
def discover() -> Dict[str, Callable[..., Any]]:
    """Every declared op: ``Dataset.<method>`` and ``<module>.<function>``, each once."""
    import stokehold

    ops: Dict[str, Callable[..., Any]] = {}
    seen = set()
    for name, attr in vars(stokehold.Dataset).items():
        if name.startswith("_"):
            continue
        f = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
        if inspect.isfunction(f):
            ops[f"Dataset.{name}"] = f
            seen.add(f)
    for modname in MODULES:
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        for name in getattr(mod, "__all__", []):
            f = getattr(mod, name, None)
            if inspect.isfunction(f) and f not in seen and not name.startswith("_"):
                ops[f"{modname}.{name}"] = f
                seen.add(f)
    return ops


def _leaves(t: Any) -> set:
    """The scalar types an annotation is made of (through Optional, Union and containers)."""
    if typing.get_origin(t) is collections.abc.Callable:
        return set()  # a function's own parameters are not this parameter's numbers
    args = typing.get_args(t)
    if args:
        out: set = set()
        for a in args:
            out |= _leaves(a)
        return out
    return {t}


def _direct(t: Any) -> set:
    """The types an annotation accepts as a bare value (through Optional and Union only)."""
    if typing.get_origin(t) is typing.Union:
        return set(typing.get_args(t))
    return {t}


def hostile_values(t: Any) -> List[Any]:
    """The hostile values a parameter of type ``t`` gets: ints for int, floats for float, both
    for a Union of the two; none for a parameter that holds no number."""
    leaves = _leaves(t)
    return (INTS if int in leaves else []) + (FLOATS if float in leaves else [])


@functools.cache
def numeric_params(f: Callable[..., Any]) -> List[Tuple[str, bool, Any]]:
    """(name, takes a bare number, annotation) for each parameter that holds a number."""
    hints = typing.get_type_hints(f, localns=_namespace())
    out = []
    for p in inspect.signature(f).parameters.values():
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name == "self":
            continue
        t = hints.get(p.name, Any)
        if t is Any:
            continue
        if hostile_values(t):
            direct = bool({int, float} & _direct(t))
            out.append((p.name, direct, t))
    return out


def required_params(f: Callable[..., Any]) -> List[str]:
    return [p.name for p in inspect.signature(f).parameters.values()
            if p.name != "self" and p.default is p.empty
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


def substitute(sane: Any, value: Any) -> Any:
    """``sane`` with every number in it (not a bool) replaced by ``value``."""
    if isinstance(sane, bool):
        return sane
    if isinstance(sane, (int, float)):
        return value
    if isinstance(sane, dict):
        return {k: substitute(v, value) for k, v in sane.items()}
    if isinstance(sane, (list, tuple)):
        return type(sane)(substitute(v, value) for v in sane)
    return sane


# ---- fixtures -------------------------------------------------------------------------------

def _png(path: Path, w: int = 6, h: int = 5) -> None:
    """An 8-bit RGB PNG written by hand (zlib rows, CRC'd chunks)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + bytes((x * 40 + y * 7 + c) % 256 for x in range(w) for c in range(3))
                    for y in range(h))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


#: The Parquet / Arrow fixtures (testdata/parquet, made by its make_fixtures.py).
PARQUET = Path(__file__).resolve().parents[2] / "testdata" / "parquet"


#: The tokenizer fixture (testdata/tokenizer, made by its make_fixture.py).
TOKENIZER = Path(__file__).resolve().parents[2] / "testdata" / "tokenizer" / "tokenizer.json"


def make_fixtures(d: Path) -> None:
    """Small real files the sane calls read: a WAV, a PNG, a .npy, a TFRecord file, a shard
    folder and a table."""
    import numpy as np

    import stokehold as sh

    with wave.open(str(d / "a.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.arange(1600, dtype=np.int16).tobytes())
    _png(d / "a.png")
    (d / "fixed.bin").write_bytes(bytes(range(64)))
    (d / "tokens.bin").write_bytes(np.arange(64, dtype=np.uint16).tobytes())  # nanoGPT's layout
    np.save(d / "a.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    base = sh.from_arrays({"x": np.arange(8, dtype=np.float32).reshape(8, 1)})
    (d / "tfr").mkdir()
    sh.tfrecord.write_tfrecord(base, d / "tfr", num_shards=1, index=False)
    sh.write_shards(base, d / "shards")
    sh.write_table(d / "table.stt", [np.arange(12, dtype=np.float32).reshape(4, 3)])
    # A WebDataset shard whose members every decoder of read_webdataset(decode=True) reads.
    with tarfile.open(d / "wds.tar", "w") as t:
        for key in ("s0", "dir/s1"):
            for ext, src in (("png", "a.png"), ("wav", "a.wav"), ("npy", "a.npy"), ("cls", None)):
                data = b"7" if src is None else (d / src).read_bytes()
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))


# ---- the child ------------------------------------------------------------------------------

class Context:
    """What the sane calls are made of, built in the child from the fixture folder."""

    def __init__(self, d: Path) -> None:
        import numpy as np

        import stokehold as sh

        self.d, self.sh, self.np, self.n = d, sh, np, 0
        wav, png, npy = (str(d / n) for n in ("a.wav", "a.png", "a.npy"))
        tfr = sorted(str(p) for p in (d / "tfr").iterdir())
        x = np.arange(32, dtype=np.float32).reshape(8, 4)
        seqs = [np.arange(n, dtype=np.int32) for n in (3, 5, 2, 7, 4, 1, 6, 3)]
        #: Base datasets, by kind.
        self.bases: Dict[str, Callable[[], Any]] = {
            "plain": lambda: sh.from_arrays({"x": x, "label": np.arange(8)}),
            "image": lambda: sh.from_arrays({"image": np.zeros((4, 6, 5, 3), np.uint8)}),
            "audio": lambda: sh.from_arrays({"audio": np.sin(np.arange(4 * 800, dtype=np.float32)
                                                             ).reshape(4, 800)}),
            "seq": lambda: sh.from_arrays({"seq": seqs, "x": np.arange(8)}),
            "batched": lambda: sh.from_arrays({"x": x.reshape(4, 2, 4)}),
            "wav_path": lambda: sh.from_arrays({"path": [wav.encode()] * 2}),
            "png_path": lambda: sh.from_arrays({"path": [png.encode()] * 2}),
            "npy_path": lambda: sh.from_arrays({"path": [npy.encode()] * 2}),
            "wav_bytes": lambda: sh.from_arrays({"audio": [Path(wav).read_bytes()] * 2}),
            "png_bytes": lambda: sh.from_arrays({"image": [Path(png).read_bytes()] * 2}),
            "index": lambda: sh.from_arrays({"idx": np.arange(4)}),
            "text": lambda: sh.from_arrays({"text": [b"hello world", "caf\u00e9 \u6771\u4eac".encode()]}),
            "records": lambda: sh.TFRecordDataset(tfr),
        }
        self.tfr, self.wav, self.png = tfr, wav, png

    def fresh(self) -> str:
        """A new output path (for the writers)."""
        self.n += 1
        return str(self.d / f"out-{os.getpid()}-{self.n}")


class Make:
    """A sane value made in the child from its ``Context`` (a dataset, a path, a function)."""

    def __init__(self, make: Callable[[Context], Any]) -> None:
        self.make = make


def _identity(e: Any) -> Any:
    return e


#: Sane values of required parameters, by name (numbers here are also what a hostile value
#: replaces in a container: ``[3]`` -> ``[2**63]``).
SANE: Dict[str, Any] = {
    "feature": "x", "length": 6, "size": 2, "dtype": "float64", "batch_size": 2, "count": 3,
    "start": 1, "stop": 5, "num_shards": 2, "index": 0, "window": 2, "n": 8, "seed": 0,
    "indices": [0, 1], "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], "sample_rate": 16000,
    "out": "y", "index_feature": "idx", "num_packing_bins": 2, "length_struct": {"seq": 8},
    "bucket_boundaries": [3], "bucket_batch_sizes": [2, 2], "element_length_func": "seq",
    "padded_shapes": {"seq": [8]}, "weights": [0.5, 0.5],
    "map_func": _identity, "predicate": lambda e: True, "key_func": lambda e: 0,
    "datasets": Make(lambda c: [c.bases["plain"](), c.bases["plain"]()]),
    "dataset": Make(lambda c: c.bases["plain"]()),
    "ds": Make(lambda c: c.bases["plain"]()),
    "table": Make(lambda c: c.sh.open_table(c.d / "table.stt")),
    "patterns": Make(lambda c: c.wav),
    "filenames": Make(lambda c: c.tfr),
    "path": Make(lambda c: c.fresh()),
    "features": Make(lambda c: {"x": c.sh.tfrecord.FixedLen([1], "float32")}),
}

#: Per op: what differs from ``SANE``.
SANE_BY_OP: Dict[str, Dict[str, Any]] = {
    "stokehold.read_parquet": {"paths": str(PARQUET / "paged.parquet")},
    "stokehold.read_arrow": {"paths": str(PARQUET / "data.arrows")},
    "stokehold.from_hf": {"dataset": str(PARQUET / "hf_saved")},
    "Dataset.resize": {"size": 4}, "Dataset.center_crop": {"size": 4},
    "Dataset.random_resized_crop": {"size": 4},
    "Dataset.interleave": {"map_func": Make(lambda c: lambda e: c.bases["plain"]())},
    "Dataset.flat_map": {"map_func": Make(lambda c: lambda e: c.bases["plain"]())},
    "Dataset.random_map": {"map_func": lambda e, rng: e},
    "Dataset.map_with_index": {"map_func": lambda i, e: e},
    "stokehold.open_shards": {"path": Make(lambda c: str(c.d / "shards"))},
    "stokehold.FixedLengthRecordDataset": {"filenames": Make(lambda c: [str(c.d / "fixed.bin")]),
                                           "record_bytes": 8},
    "stokehold.CsvDataset": {"filenames": Make(lambda c: [_csv_file(c)]), "record_defaults": [0, 0.0],
                             "select_cols": [0, 1], "exclude_cols": [2]},
    "Dataset.rejection_resample": {"class_func": lambda e: 0, "target_dist": [0.5, 0.5],
                                   "initial_dist": [0.25, 0.75]},
    "Dataset.sparse_batch": {"row_shape": [800]},
    "stokehold.read_tokens": {"paths": Make(lambda c: [str(c.d / "tokens.bin")]), "seq_len": 4},
    "Dataset.tokenize": {"feature": "text", "tokenizer": str(TOKENIZER)},
    "stokehold.write_webdataset": {"pattern": Make(lambda c: c.fresh() + "-%06d.tar")},
}


def _csv_file(c: Context) -> str:
    path = c.d / f"a-{os.getpid()}.csv"
    path.write_bytes(b"1,2.5,x\n3,,y\n")
    return str(path)

#: The base dataset (a ``Context.bases`` kind) each Dataset op is called on; "plain" if not here.
BASE: Dict[str, str] = {
    **{f"Dataset.{op}": "image" for op in ["resize", "center_crop", "random_resized_crop",
                                           "random_flip_left_right", "color_jitter", "normalize"]},
    **{f"Dataset.{op}": "audio" for op in ["spectrogram", "mel_spectrogram"]},
    **{f"Dataset.{op}": "seq" for op in ["pack", "padded_batch", "bucket_by_sequence_length"]},
    **{f"Dataset.{op}": "batched" for op in ["unbatch", "rebatch"]},
    "Dataset.sparse_batch": "audio",
    "Dataset.decode_audio": "wav_bytes", "Dataset.load_audio": "wav_path",
    "Dataset.decode_image": "png_bytes", "Dataset.load_image": "png_path",
    "Dataset.load_npy": "npy_path", "Dataset.read_file": "npy_path", "Dataset.gather": "index",
    "Dataset.tokenize": "text",
}

#: Ops that are declared but not called here, each with why. The test fails when an op with a
#: numeric parameter is neither callable from the tables above nor listed here.
NOT_EXERCISED: Dict[str, str] = {
    "Dataset.remote_map": "needs a Ray cluster (test_ray.py); actors per hostile value would "
                          "take minutes",
}


def has_sane_call(op: str, f: Callable[..., Any]) -> bool:
    return all(p in SANE or p in SANE_BY_OP.get(op, {}) for p in required_params(f))


def has_template(op: str, f: Callable[..., Any], param: str) -> bool:
    """Whether a container parameter has a sane value to put a hostile number in."""
    default = inspect.signature(f).parameters[param].default
    return param in SANE_BY_OP.get(op, {}) or param in SANE or default not in (None, inspect.Parameter.empty)


def _sane(ctx: Context, op: str, param: str, f: Optional[Callable[..., Any]] = None) -> Any:
    """A sane value for a parameter: per op first, then per name, then (given ``f``) its default
    when that is not None; KeyError when none is known."""
    table = SANE_BY_OP.get(op, {})
    if param in table:
        v = table[param]
    elif param in SANE or f is None:
        v = SANE[param]
    else:
        v = inspect.signature(f).parameters[param].default
    return v.make(ctx) if isinstance(v, Make) else v


def build_call(ctx: Context, op: str, param: str, value: Any) -> Callable[[], Any]:
    """The call of ``op`` with ``param`` = ``value`` and sane values for its other required
    parameters (the rest at their defaults)."""
    f = discover()[op]
    kwargs = {p: _sane(ctx, op, p) for p in required_params(f) if p != param}
    direct = {n: d for n, d, _ in numeric_params(f)}
    kwargs[param] = value if direct[param] else substitute(_sane(ctx, op, param, f), value)
    if op.startswith("Dataset.") and "self" in inspect.signature(f).parameters:
        base = ctx.bases[BASE.get(op, "plain")]()
        return lambda: getattr(base, op.split(".", 1)[1])(**kwargs)
    return lambda: f(**kwargs)


# ---- hostile inputs: each decoder on broken versions of a valid file --------------------------

def _from_bytes(feature: str, method: str) -> Callable[[Context, bytes, str], Any]:
    return lambda c, data, path: getattr(c.sh.from_arrays({feature: [data]}), method)()


def _from_path(method: str) -> Callable[[Context, bytes, str], Any]:
    return lambda c, data, path: getattr(c.sh.from_arrays({"path": [path.encode()]}), method)()


#: decoder -> (the valid file it reads, how it is called on (data, path of the data)).
DECODERS: Dict[str, Tuple[str, Callable[[Context, bytes, str], Any]]] = {
    "Dataset.decode_audio": ("a.wav", _from_bytes("audio", "decode_audio")),
    # An absolute source: input_call's ctx.d / source is the committed fixture.
    "stokehold.read_parquet": (str(PARQUET / "paged.parquet"), lambda c, data, path: c.sh.read_parquet(path)),
    "stokehold.read_arrow": (str(PARQUET / "data.arrows"), lambda c, data, path: c.sh.read_arrow(path)),
    "Dataset.load_audio": ("a.wav", _from_path("load_audio")),
    "stokehold.probe_audio": ("a.wav", lambda c, data, path: c.sh.probe_audio(path)),
    "Dataset.decode_image": ("a.png", _from_bytes("image", "decode_image")),
    "Dataset.load_image": ("a.png", _from_path("load_image")),
    "stokehold.probe_image": ("a.png", lambda c, data, path: c.sh.probe_image(data)),
    "Dataset.load_npy": ("a.npy", _from_path("load_npy")),
    "stokehold.open_table": ("table.stt", lambda c, data, path: c.sh.open_table(path)[0]),
    "stokehold.TFRecordDataset": ("tfr", lambda c, data, path: c.sh.TFRecordDataset([path])),
    "stokehold.tfrecord.build_index": ("tfr", lambda c, data, path: c.sh.tfrecord.build_index([path])),
    "stokehold.tfrecord.decode_example": ("example", lambda c, data, path: c.sh.tfrecord.decode_example(data)),
    "stokehold.read_jsonl": ("jsonl", lambda c, data, path: c.sh.read_jsonl(path)),
    "stokehold.read_webdataset": ("wds.tar", lambda c, data, path: c.sh.read_webdataset(path, decode=True)),
    "stokehold.read_tokens": ("tokens.bin", lambda c, data, path: c.sh.read_tokens(path, 4)),
    "Dataset.tokenize": (str(TOKENIZER), lambda c, data, path: c.bases["text"]().tokenize("text", path)),
}


def _mutations(valid: bytes) -> Dict[str, bytes]:
    """Broken versions of a valid file: cut short, corrupted in place, random, doubled."""
    import random

    rng = random.Random(0)
    flipped = bytearray(valid)
    for i in range(8, len(flipped), 7):
        flipped[i] ^= 0xFF
    return {
        "empty": b"", "one byte": valid[:1], "header only": valid[:min(len(valid) // 4, 64)],
        "truncated": valid[:len(valid) // 2], "one byte short": valid[:-1],
        "bytes flipped": bytes(flipped), "random": bytes(rng.getrandbits(8) for _ in range(4096)),
        "doubled": valid + valid, "valid then garbage": valid + b"\xff" * 4096,
    }


MUTATIONS = list(_mutations(b"0123456789"))


def input_call(ctx: Context, decoder: str, mutation: str) -> Callable[[], Any]:
    """The call of ``decoder`` on the ``mutation`` of its valid file."""
    source, call = DECODERS[decoder]
    if source == "example":
        valid = ctx.sh.tfrecord.encode_example({"x": ctx.np.arange(3), "s": b"abc"})
    elif source == "tfr":
        valid = Path(ctx.tfr[0]).read_bytes()
    elif source == "jsonl":
        valid = b'{"x": 1, "s": "\\u00e9", "m": {"l": [1.5]}}\n{"x": 2, "s": "b", "m": {"l": []}}\n'
    else:
        valid = (ctx.d / source).read_bytes()
    data = _mutations(valid)[mutation]
    path = ctx.fresh() + Path(source).suffix
    Path(path).write_bytes(data)
    return lambda: call(ctx, data, path)


def consume(result: Any, n: int = 3) -> None:
    """Takes at most ``n`` elements of whatever an op returned (a hostile argument may only fail
    when the elements are made)."""
    import stokehold as sh

    if isinstance(result, sh.EpochLoader):
        for epoch in result:
            consume(epoch, n)
            return
    if isinstance(result, (sh.Dataset, sh.Iterator, sh.Epoch)):
        it = iter(result)
        for _ in range(n):
            try:
                next(it)
            except StopIteration:
                return


def child_main(fixtures: str, case_s: float) -> None:
    import faulthandler

    ctx = Context(Path(fixtures))
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps({"start": case["id"]}), flush=True)
        # A watchdog thread in C: dumps the stacks and _exits if the case runs past its bound,
        # even with the GIL held or a native thread stuck.
        faulthandler.dump_traceback_later(case_s, exit=True)
        try:
            if case.get("input"):
                consume(input_call(ctx, case["op"], case["param"])())
            else:
                consume(build_call(ctx, case["op"], case["param"], case["value"])())
            outcome, detail = "result", ""
        except BaseException as e:
            # A Rust panic: across into Python (pyo3's PanicException, not an Exception), or
            # caught on a worker thread (WorkerPanicError; the sane functions here never raise).
            panic = not isinstance(e, Exception) or isinstance(e, ctx.sh.WorkerPanicError)
            outcome, detail = "panic" if panic else "error", f"{type(e).__name__}: {str(e)[:200]}"
        faulthandler.cancel_dump_traceback_later()
        print(json.dumps({"id": case["id"], "outcome": outcome, "detail": detail}), flush=True)

