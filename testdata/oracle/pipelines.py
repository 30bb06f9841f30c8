"""Random tf.data pipelines as data, and their builders in tf.data and in stokehold (issue 49).

A pipeline is a JSON dict: a source and 1-5 ops, drawn by ``generate(seed, count)`` from the op
families below, over eight numeric dtypes, bool and bytes, dense and ragged (a generator's
variable-length rows). ``build_tf`` builds it in tf.data (the oracle: ``record.py`` runs it in a
venv with TensorFlow and writes what it yields), ``build_sh`` in stokehold (the test,
``python/tests/test_oracle.py``, compares with the recording). ``run`` iterates either one into
the same normal form: every element's features as ``[dtype, shape, flat values]``, at most
``LIMIT`` elements, and the error class if one ends the iteration.

Both builders read the same spec in the same order, so one op's meaning lives here once; what
stokehold does on purpose otherwise is in ``DIFFERENCES`` (and GUIDE's "tf.data habits" table).
"""

import random
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

#: Elements read from a pipeline at most (a longer one is cut, on both sides).
LIMIT = 120

NUMERIC = ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64"]
DTYPES = NUMERIC + ["bool", "bytes"]

#: The op families the generator draws from (each pipeline's family is its first op's).
FAMILIES = ["map", "filter", "take", "skip", "repeat", "batch", "padded_batch", "unbatch",
            "rebatch", "shard", "enumerate", "concatenate", "prefetch", "cache",
            "take_while", "scan", "unique", "choose", "rejection_resample", "sparse_batch",
            "snapshot", "with_options"]

#: Families that sum ``x`` (so not over bytes: those draw ``take`` instead).
SUMMING = ("map", "filter", "take_while", "scan", "rejection_resample")

#: CsvDataset column types (record_defaults) and how a value is written.
CSV_DTYPES = ["int32", "int64", "float32", "float64", "bytes"]

Spec = Dict[str, Any]


# ---- generating ------------------------------------------------------------------------------

def _values(rng: random.Random, dtype: str, n: int) -> List[Any]:
    if dtype == "bool":
        return [rng.random() < 0.5 for _ in range(n)]
    if dtype == "bytes":
        return [f"s{rng.randrange(100)}" for _ in range(n)]
    if dtype.startswith("float"):
        return [rng.randrange(-40, 40) / 2 for _ in range(n)]  # exact in float16
    if dtype.startswith("uint"):
        return [rng.randrange(0, 100) for _ in range(n)]
    return [rng.randrange(-60, 60) for _ in range(n)]


def _source(rng: random.Random) -> Spec:
    kind = rng.choice(["range", "slices", "slices", "ragged", "range3", "csv"])
    if kind == "range":
        return {"kind": "range", "n": rng.randrange(0, 13), "dtype": "int64"}
    if kind == "range3":
        step = rng.choice([-3, -2, -1, 1, 2, 3])
        return {"kind": "range3", "dtype": "int64",
                "args": [rng.randrange(-6, 7), rng.randrange(-6, 13), step]}
    if kind == "csv":
        return _csv_source(rng)
    dtype = rng.choice(DTYPES)
    n = rng.randrange(0, 11)
    if kind == "ragged":
        lengths = [rng.randrange(0, 4) for _ in range(n)]
        rows = [_values(rng, dtype, k) for k in lengths]
        return {"kind": "ragged", "dtype": dtype, "rows": rows}
    width = rng.choice([0, 0, 2])  # scalars, or rows of 2
    columns = {"x": _values(rng, dtype, n * max(width, 1))}
    spec: Spec = {"kind": "slices", "dtype": dtype, "width": width, "n": n, "columns": columns}
    if rng.random() < 0.3:
        second = rng.choice(NUMERIC)
        spec["y_dtype"] = second
        columns["y"] = _values(rng, second, n)
    return spec


def _csv_source(rng: random.Random) -> Spec:
    """CsvDataset over a file written from the spec: column ``x`` (and maybe ``y``), some fields
    empty (their default) or quoted; ``required`` columns have no default."""
    columns = ["x"] + (["y"] if rng.random() < 0.4 else [])
    dtypes = [rng.choice(CSV_DTYPES) for _ in columns]
    required = [rng.random() < 0.3 for _ in columns]
    lines = []
    for _ in range(rng.randrange(0, 9)):
        fields = []
        for dtype in dtypes:
            if rng.random() < 0.1:
                fields.append("")
            elif dtype == "bytes":
                v = rng.choice(["a", "b,c", 'say "hi"', " sp ", "x\ny"])
                fields.append('"' + v.replace('"', '""') + '"' if rng.random() < 0.5 or '"' in v
                              or "," in v or "\n" in v else v)
            else:
                fields.append(str(_values(rng, "float32" if dtype.startswith("float") else "int32", 1)[0]))
        lines.append(",".join(fields))
    content = "\n".join(lines) + ("\n" if lines and rng.random() < 0.8 else "")
    header = rng.random() < 0.3
    if header:
        content = ",".join(columns) + "\n" + content
    return {"kind": "csv", "dtype": dtypes[0], "columns": columns, "dtypes": dtypes,
            "required": required, "header": header, "content": content}


_TMP: List[str] = []


def _scratch(prefix: str) -> str:
    """A fresh folder under one temporary root per process, removed when the process exits."""
    import atexit
    import shutil
    import tempfile

    if not _TMP:
        _TMP.append(tempfile.mkdtemp(prefix="stokehold-oracle-"))
        atexit.register(shutil.rmtree, _TMP[0], True)
    return tempfile.mkdtemp(prefix=prefix, dir=_TMP[0])


def _csv_file(source: Spec) -> str:
    """The CSV file of a ``csv`` source, written to a fresh temporary folder."""
    import os

    path = os.path.join(_scratch("csv-"), "data.csv")
    with open(path, "w", newline="") as f:
        f.write(source["content"])
    return path


def _csv_default(dtype: str, required: bool, types: Any, one: Callable[[Any, Any], Any]) -> Any:
    """A column's record_defaults entry: its type, or a one-element array of its default made by
    ``one(value, type)`` (tf.data reads a numpy scalar as its dtype, i.e. a required column, and
    ``[np.int64(-7)]`` as int32: a tensor of the type is what says int64 there)."""
    if required:
        return types[dtype]
    value = {"int32": 7, "int64": -7, "float32": 0.5, "float64": -0.5, "bytes": ""}[dtype]
    return one(value, types[dtype])


def _pad_value(rng: random.Random, dtype: str) -> Any:
    if dtype == "bool":
        return True
    if dtype == "bytes":
        return "<p>"
    if dtype.startswith("float"):
        return rng.randrange(-4, 4) / 2
    return rng.randrange(0, 9)


def _op(rng: random.Random, family: str, dtype: str, rank: int) -> List[Any]:
    if family == "map":
        return ["map"]
    if family == "filter":
        m = rng.randrange(2, 4)
        return ["filter", m, rng.randrange(m)]
    if family in ("take", "skip"):
        return [family, rng.randrange(-2, 7)]
    if family == "repeat":
        return ["repeat", rng.choice([-1, 0, 1, 2, 3])]
    if family in ("batch", "rebatch"):
        return [family, rng.randrange(1, 5), rng.random() < 0.3]
    if family == "padded_batch":
        pad = _pad_value(rng, dtype) if rng.random() < 0.6 else None
        return ["padded_batch", rng.randrange(1, 4), rng.random() < 0.3, pad]
    if family == "shard":
        n = rng.randrange(1, 4)
        return ["shard", n, rng.randrange(n)]
    if family == "prefetch":
        return ["prefetch", rng.randrange(1, 4)]
    if family == "take_while":
        m = rng.randrange(2, 5)
        return ["take_while", m, rng.randrange(m)]
    if family == "choose":
        return ["choose", rng.randrange(0, 9)]
    if family == "rejection_resample":
        return ["rejection_resample", rng.choice(["pass", "filter"])]
    if family == "sparse_batch":
        return ["sparse_batch", rng.randrange(1, 4), [rng.choice([None, 4]) for _ in range(rank)]]
    return [family]


def generate(seed: int, count: int) -> List[Spec]:
    """``count`` pipelines drawn from ``seed``: the same list for the same arguments."""
    rng = random.Random(seed)
    out = []
    for k in range(count):
        source = _source(rng)
        dtype = source["dtype"]
        rank = 1 if source["kind"] == "ragged" or source.get("width") else 0
        ops: List[List[Any]] = []
        features = set(source.get("columns", ["x"])) if source["kind"] != "slices" else set(source["columns"])
        for _ in range(rng.randrange(1, 6)):
            family = rng.choice(FAMILIES)
            if family in SUMMING and dtype == "bytes":
                family = "take"
            if family == "sparse_batch" and features != {"x"}:
                family = "take"  # tf.data's sparse_batch takes one component
            op = _op(rng, family, dtype, rank)
            ops.append(op)
            if op[0] == "sparse_batch":
                break  # its SparseTensor is what is compared; nothing is built on it
            if op[0] == "enumerate":
                features.add("index")
            if op[0] == "padded_batch":
                features |= {f"{k}_lengths" for k in features}
            if op[0] == "scan":
                features.add("s")
            if op[0] == "rejection_resample" and "class" in features:
                ops[-1] = ["take", 5]  # a second one would find its feature taken (tf.data nests)
            elif op[0] == "rejection_resample":
                features.add("class")
            if op[0] == "repeat" and op[1] < 0:
                ops.append(["take", rng.randrange(0, 9)])  # keep it finite
            if op[0] in ("batch", "padded_batch", "rebatch"):
                rank += 1
            if op[0] == "unbatch":
                rank = max(rank - 1, 0)
        out.append({"id": f"{seed}-{k}", "family": ops[0][0], "source": source, "ops": ops})
    return out


# ---- normal form -----------------------------------------------------------------------------

def _dtype_name(a: np.ndarray) -> str:
    return "bytes" if a.dtype.kind in "OSU" else str(a.dtype)


def _flat(a: np.ndarray) -> List[Any]:
    if a.dtype.kind in "OSU":
        return [v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in a.reshape(-1)]
    return [v.item() if hasattr(v, "item") else v for v in a.reshape(-1)]


def normal(element: Dict[str, Any]) -> Dict[str, Any]:
    """An element as ``{feature: [dtype, shape, flat values]}`` (JSON-ready)."""
    out = {}
    for k, v in element.items():
        if isinstance(v, list):  # ragged rows (a stokehold Ragged's to_list())
            rows = [np.asarray(r) for r in v]
            dtype = _dtype_name(rows[0]) if rows else "?"
            out[k] = ["ragged " + dtype, [len(r) for r in rows], [x for r in rows for x in _flat(r)]]
            continue
        a = np.asarray(v)
        out[k] = [_dtype_name(a), list(a.shape), _flat(a)]
    return out


def run(ds: Any, to_dicts: Callable[[Any], Dict[str, Any]]) -> Dict[str, Any]:
    """Iterates ``ds``: ``{"elements": [...], "error": None or the exception's class name}``."""
    elements: List[Dict[str, Any]] = []
    error = None
    try:
        for e in ds:
            elements.append(normal(to_dicts(e)))
            if len(elements) >= LIMIT:
                break
    except Exception as exc:  # the oracle records what ended the iteration
        error = type(exc).__name__
    return {"elements": elements, "error": error}


# ---- stokehold -------------------------------------------------------------------------------

def _np_values(dtype: str, values: List[Any]) -> np.ndarray:
    if dtype == "bytes":
        return np.array([v.encode() for v in values], dtype=object)
    return np.array(values, dtype=dtype)


def _sh_map(e: Dict[str, Any]) -> Dict[str, Any]:
    out = {}
    for k, v in e.items():
        a = np.asarray(v)
        if a.dtype == np.bool_:
            out[k] = np.logical_not(a)
        elif a.dtype.kind in "iuf":
            out[k] = (a + a).astype(a.dtype)
        else:
            out[k] = a
    return out


def _sh_keep(m: int, r: int) -> Callable[[Dict[str, Any]], bool]:
    def keep(e: Dict[str, Any]) -> bool:
        return int(np.sum(np.asarray(e["x"]).astype(np.int64))) % m == r
    return keep


def sh_source(sh: Any, source: Spec) -> Any:
    kind = source["kind"]
    if kind == "range":
        return sh.Dataset.range(source["n"])
    if kind == "range3":
        return sh.Dataset.range(*source["args"])
    if kind == "csv":
        types = {"int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64,
                 "bytes": bytes}
        defaults = [_csv_default(d, r, types, lambda v, t: np.array([v], dtype=object if t is bytes else t))
                    for d, r in zip(source["dtypes"], source["required"])]
        return sh.CsvDataset(_csv_file(source), defaults, header=source["header"],
                             column_names=source["columns"])
    dtype = source["dtype"]
    if kind == "ragged":
        rows = [_np_values(dtype, r) for r in source["rows"]]
        return sh.from_generator(lambda: iter([{"x": r} for r in rows]))
    cols = {"x": _np_values(dtype, source["columns"]["x"])}
    if source["width"]:
        cols["x"] = cols["x"].reshape(source["n"], source["width"])
    if "y" in source["columns"]:
        cols["y"] = _np_values(source["y_dtype"], source["columns"]["y"])
    return sh.from_tensor_slices(cols)


def build_sh(sh: Any, spec: Spec) -> Any:
    """The pipeline in stokehold."""
    ds = sh_source(sh, spec["source"])
    for op in spec["ops"]:
        name, args = op[0], op[1:]
        if name == "map":
            ds = ds.map(_sh_map)
        elif name == "filter":
            ds = ds.filter(_sh_keep(*args))
        elif name == "take":
            ds = ds.take(args[0])
        elif name == "skip":
            ds = ds.skip(args[0])
        elif name == "repeat":
            ds = ds.repeat(args[0])
        elif name == "batch":
            ds = ds.batch(args[0], drop_remainder=args[1])
        elif name == "rebatch":
            ds = ds.rebatch(args[0], drop_remainder=args[1])
        elif name == "padded_batch":
            ds = ds.padded_batch(args[0], drop_remainder=args[1], padding_values=args[2])
        elif name == "unbatch":
            ds = ds.unbatch()
        elif name == "shard":
            ds = ds.shard(args[0], args[1])
        elif name == "enumerate":
            ds = ds.enumerate("index")
        elif name == "concatenate":
            ds = ds.concatenate(sh_source(sh, spec["source"]))
        elif name == "prefetch":
            ds = ds.prefetch(args[0])
        elif name == "cache":
            ds = ds.cache()
        elif name == "take_while":
            keep = _sh_keep(*args)
            ds = ds.take_while(lambda e, keep=keep: not keep(e))
        elif name == "scan":
            ds = ds.scan(0, _sh_scan)
        elif name == "unique":
            ds = ds.unique()
        elif name == "choose":
            picks = sh.Dataset.range(args[0]).map(lambda e: {"c": e["x"] % 2})
            ds = sh.Dataset.choose_from_datasets([ds, ds], picks)
        elif name == "rejection_resample":
            ds = ds.rejection_resample(_sh_class, *_RESAMPLE[args[0]], seed=1)
        elif name == "sparse_batch":
            ds = ds.sparse_batch(args[0], args[1])
        elif name == "snapshot":
            ds = ds.snapshot(_scratch("snapshot-"))
        elif name == "with_options":
            options = sh.Options()
            options.deterministic = True
            options.autotune.ram_budget = 1 << 28
            options.threading.private_threadpool_size = 2
            ds = ds.with_options(options)
        else:
            raise ValueError(f"unknown op {name!r}")
    return ds


#: rejection_resample's (target_dist, initial_dist) per mode: both make its output certain
#: (every element with its class; only class 0's), so the two sides can be compared.
_RESAMPLE = {"pass": ([0.5, 0.5], [0.5, 0.5]), "filter": ([1.0, 0.0], [0.5, 0.5])}


def _sh_sum(e: Dict[str, Any]) -> int:
    return int(np.sum(np.asarray(e["x"]).astype(np.int64)))


def _sh_scan(state: int, e: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    return state + _sh_sum(e), {**e, "s": np.int64(state)}


def _sh_class(e: Dict[str, Any]) -> int:
    return _sh_sum(e) % 2


def run_sh(sh: Any, spec: Spec) -> Dict[str, Any]:
    try:
        ds = build_sh(sh, spec)
    except Exception as exc:
        return {"elements": [], "error": type(exc).__name__}
    return run(ds, lambda e: {k: v.to_list() if isinstance(v, sh.Ragged) else v
                              for k, v in e.items()})


# ---- tf.data ---------------------------------------------------------------------------------

def tf_source(tf: Any, source: Spec) -> Any:
    kind = source["kind"]
    if kind == "range":
        return tf.data.Dataset.range(source["n"]).map(lambda v: {"x": v})
    if kind == "range3":
        return tf.data.Dataset.range(*source["args"]).map(lambda v: {"x": v})
    if kind == "csv":
        types = {"int32": tf.int32, "int64": tf.int64, "float32": tf.float32, "float64": tf.float64,
                 "bytes": tf.string}
        defaults = [_csv_default(d, r, types, lambda v, t: tf.constant([v], t))
                    for d, r in zip(source["dtypes"], source["required"])]
        names = source["columns"]
        return tf.data.experimental.CsvDataset(_csv_file(source), defaults, header=source["header"]).map(
            lambda *cols: dict(zip(names, cols)))
    dtype = source["dtype"]
    tf_dtype = tf.string if dtype == "bytes" else tf.as_dtype(dtype)
    if kind == "ragged":
        rows = [_np_values(dtype, r) for r in source["rows"]]
        sig = {"x": tf.TensorSpec([None], tf_dtype)}
        return tf.data.Dataset.from_generator(lambda: iter([{"x": r} for r in rows]),
                                              output_signature=sig)
    cols = {"x": _np_values(dtype, source["columns"]["x"])}
    if source["width"]:
        cols["x"] = cols["x"].reshape(source["n"], source["width"])
    if dtype == "bytes":
        cols["x"] = tf.constant(cols["x"].tolist() if cols["x"].size else [], dtype=tf.string,
                                shape=cols["x"].shape)
    if "y" in source["columns"]:
        cols["y"] = _np_values(source["y_dtype"], source["columns"]["y"])
    return tf.data.Dataset.from_tensor_slices(cols)


def build_tf(tf: Any, spec: Spec) -> Any:
    """The pipeline in tf.data."""

    def tf_map(e: Dict[str, Any]) -> Dict[str, Any]:
        out = {}
        for k, v in e.items():
            if v.dtype == tf.bool:
                out[k] = tf.logical_not(v)
            elif v.dtype == tf.string:
                out[k] = v
            else:
                out[k] = v + v
        return out

    def tf_sum(e: Dict[str, Any]) -> Any:
        return tf.reduce_sum(tf.cast(e["x"], tf.int64))

    def tf_keep(m: int, r: int) -> Callable[[Dict[str, Any]], Any]:
        def keep(e: Dict[str, Any]) -> Any:
            return tf.math.floormod(tf_sum(e), m) == r  # numpy's % and floormod agree in sign
        return keep

    def pad_values(ds: Any, value: Any) -> Optional[Dict[str, Any]]:
        if value is None:
            return None
        out = {}
        for k, s in ds.element_spec.items():
            if s.dtype == tf.string:
                out[k] = tf.constant(value.encode() if isinstance(value, str) else b"")
            elif isinstance(value, str):
                out[k] = tf.constant(0, s.dtype)
            else:
                out[k] = tf.constant(value, s.dtype)
        return out

    ds = tf_source(tf, spec["source"])
    for op in spec["ops"]:
        name, args = op[0], op[1:]
        if name == "map":
            ds = ds.map(tf_map)
        elif name == "filter":
            ds = ds.filter(tf_keep(*args))
        elif name == "take":
            ds = ds.take(args[0])
        elif name == "skip":
            ds = ds.skip(args[0])
        elif name == "repeat":
            ds = ds.repeat(args[0])
        elif name == "batch":
            ds = ds.batch(args[0], drop_remainder=args[1])
        elif name == "rebatch":
            ds = ds.rebatch(args[0], drop_remainder=args[1])
        elif name == "padded_batch":
            ds = ds.padded_batch(args[0], drop_remainder=args[1],
                                 padding_values=pad_values(ds, args[2]))
        elif name == "unbatch":
            ds = ds.unbatch()
        elif name == "shard":
            ds = ds.shard(args[0], args[1])
        elif name == "enumerate":
            ds = ds.enumerate().map(lambda i, e: {**e, "index": i})
        elif name == "concatenate":
            ds = ds.concatenate(tf_source(tf, spec["source"]))
        elif name == "prefetch":
            ds = ds.prefetch(args[0])
        elif name == "cache":
            ds = ds.cache()
        elif name == "take_while":
            keep = tf_keep(*args)
            ds = ds.take_while(lambda e, keep=keep: tf.logical_not(keep(e)))
        elif name == "scan":
            ds = ds.scan(tf.constant(0, tf.int64), lambda s, e: (s + tf_sum(e), {**e, "s": s}))
        elif name == "unique":
            ds = ds.unique()
        elif name == "choose":
            picks = tf.data.Dataset.range(args[0]).map(lambda i: i % 2)
            ds = tf.data.Dataset.choose_from_datasets([ds, ds], picks)
        elif name == "rejection_resample":
            target, initial = _RESAMPLE[args[0]]
            ds = ds.rejection_resample(lambda e: tf.math.floormod(tf_sum(e), 2), target, initial, seed=1)
            ds = ds.map(lambda c, e: {**e, "class": c})
        elif name == "sparse_batch":
            ds = ds.map(lambda e: e["x"]).sparse_batch(args[0], args[1])
            ds = ds.map(lambda t: {"x.indices": t.indices, "x.values": t.values, "x.dense_shape": t.dense_shape})
        elif name == "snapshot":
            ds = ds.snapshot(_scratch("snapshot-"))
        elif name == "with_options":
            options = tf.data.Options()
            options.deterministic = True
            options.autotune.ram_budget = 1 << 28
            options.threading.private_threadpool_size = 2
            ds = ds.with_options(options)
        else:
            raise ValueError(f"unknown op {name!r}")
    return ds


def run_tf(tf: Any, spec: Spec) -> Dict[str, Any]:
    try:
        ds = build_tf(tf, spec)
    except Exception as exc:
        return {"elements": [], "error": type(exc).__name__}
    return run(ds, lambda e: {k: v.numpy() for k, v in e.items()})


# ---- comparing -------------------------------------------------------------------------------

def _strip_lengths(got: List[Dict[str, Any]], want: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """stokehold's padded_batch adds ``<name>_lengths`` features tf.data does not have."""
    out = []
    for g, w in zip(got, want):
        out.append({k: v for k, v in g.items() if k in w or not k.endswith("_lengths")})
    return out + got[len(want):]


def compare(spec: Spec, want: Dict[str, Any], got: Dict[str, Any]) -> Tuple[str, str]:
    """``(verdict, detail)``: ``"identical"``, ``"both-raise"``, a documented difference's name,
    or ``"unexplained"``."""
    if want["error"] and got["error"]:
        return "both-raise", f"{want['error']} / {got['error']}"
    elements = _strip_lengths(got["elements"], want["elements"])
    if not want["error"] and not got["error"] and elements == want["elements"]:
        return "identical", ""
    for name, (applies, _) in DIFFERENCES.items():
        if applies(spec, want, {**got, "elements": elements}):
            return name, ""
    return "unexplained", _first_difference(want, {**got, "elements": elements})


def _first_difference(want: Dict[str, Any], got: Dict[str, Any]) -> str:
    if want["error"] != got["error"]:
        return f"tf.data error {want['error']}, stokehold error {got['error']}"
    for i, (w, g) in enumerate(zip(want["elements"], got["elements"])):
        if w != g:
            return f"element {i}: tf.data {w}, stokehold {g}"
    return f"{len(want['elements'])} elements from tf.data, {len(got['elements'])} from stokehold"


def _ops(spec: Spec) -> List[str]:
    return [op[0] for op in spec["ops"]]


_BATCHING = ("batch", "rebatch", "padded_batch")


def _ragged_batch(spec: Spec, want: Dict[str, Any], got: Dict[str, Any]) -> bool:
    """tf.data cannot batch elements whose shapes differ (it raises: rows of a ragged source,
    or batches of batches whose last one is smaller); stokehold batches them into a Ragged
    feature, on purpose (variable-length data without padding is what it is for)."""
    ops = _ops(spec)
    nested = sum(o in _BATCHING for o in ops) >= 2
    return (want["error"] in ("InvalidArgumentError", "FailedPreconditionError")
            and not got["error"] and any(o in ("batch", "rebatch") for o in ops)
            and (nested or spec["source"]["kind"] == "ragged"))


def _padded_lengths(spec: Spec, want: Dict[str, Any], got: Dict[str, Any]) -> bool:
    """stokehold's padded_batch adds ``<name>_lengths`` features (tf.data has none): a second
    padded_batch would overwrite them, and refuses to, and after ``unbatch`` they are scalars,
    which a later batching op refuses to split."""
    return ("padded_batch" in _ops(spec) and not want["error"]
            and got["error"] in ("InvalidArgumentError", "SchemaError"))


def _no_static_spec(spec: Spec, want: Dict[str, Any], got: Dict[str, Any]) -> bool:
    """tf.data refuses from its static element spec, before any element, what stokehold (which
    has none) finds at the first element the op sees: unbatch or rebatch of scalars over an
    empty input (or an empty part of a concatenation) raises nothing; so does unique of
    elements of several features, which tf.data refuses when its iterator is made."""
    several = (want["error"] == "InvalidArgumentError" and "unique" in _ops(spec)
               and not got["elements"])
    return ((want["error"] in ("ValueError", "TypeError") or several) and not want["elements"]
            and not got["error"])


def _concatenate_unchecked(spec: Spec, want: Dict[str, Any], got: Dict[str, Any]) -> bool:
    """tf.data refuses to concatenate datasets of different features from their static specs;
    stokehold concatenates them, and the first op that needs the features to agree (batch)
    raises naming the feature."""
    return ("concatenate" in _ops(spec) and want["error"] == "TypeError"
            and not want["elements"] and got["error"] in (None, "SchemaError"))


def _unique_any_dtype(spec: Spec, want: Dict[str, Any], got: Dict[str, Any]) -> bool:
    """tf.data's unique refuses floats and bools (only int32, int64 and strings) when the
    pipeline is built; stokehold's takes one feature of any dtype."""
    return "unique" in _ops(spec) and want["error"] == "TypeError" and not want["elements"]


def _tf_choose_concatenate(spec: Spec, want: Dict[str, Any], got: Dict[str, Any]) -> bool:
    """tf.data 2.21 cannot make an iterator of ``choose_from_datasets([g, g], ...)
    .concatenate(g)`` over variable-length rows ("Incompatible shapes at component 0: expected
    [?] but got []"): a TensorFlow bug; stokehold yields the concatenation."""
    ops = _ops(spec)
    return ("choose" in ops and "concatenate" in ops[ops.index("choose"):]
            and spec["source"]["kind"] == "ragged" and want["error"] == "InvalidArgumentError"
            and not want["elements"] and not got["error"])


#: The differences stokehold keeps on purpose: name -> (applies to (spec, tf.data, stokehold),
#: the reason). GUIDE's "tf.data habits" table lists the same names.
DIFFERENCES: Dict[str, Tuple[Callable[[Spec, Dict[str, Any], Dict[str, Any]], bool], str]] = {
    "unique-any-dtype": (_unique_any_dtype, "unique takes one feature of any dtype; tf.data takes "
                         "int32, int64 and string only"),
    "tf-choose-concatenate": (_tf_choose_concatenate, "tf.data fails to concatenate the result of "
                              "choose_from_datasets over variable-length rows; stokehold concatenates"),
    "ragged-batch": (_ragged_batch, "batch of rows of different lengths gives a Ragged feature "
                     "where tf.data raises"),
    "concatenate-unchecked": (_concatenate_unchecked, "concatenate of different features is "
                              "refused by the first op that needs them to agree"),
    "no-static-spec": (_no_static_spec, "what tf.data refuses from its static element spec "
                       "stokehold raises at the first element; an empty input raises nothing"),
    "padded-lengths": (_padded_lengths, "padded_batch adds <name>_lengths features; a second "
                       "padded_batch refuses to overwrite them, rebatch to split them once "
                       "unbatched"),
}
