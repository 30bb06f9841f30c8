"""tf.data habits that must work as tf.data users expect (issue 11), and the layout that lets type
checkers and IDEs see every op. Each test here failed on the main before the Python-face rework."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import stokehold as sh
from stokehold import tfrecord as tfr


def xs(ds):
    return [int(e["x"]) for e in ds]


OPS = [
    "map", "filter", "shuffle", "global_shuffle", "window_shuffle", "repeat", "take", "skip",
    "enumerate", "slice", "shard", "elastic_shard", "worker_split", "batch", "padded_batch",
    "unbatch", "rebatch", "window", "group_by_window", "interleave", "flat_map", "concatenate",
    "parallelize", "prefetch", "cache", "with_options", "stats", "trace", "gather", "read_file",
    "load_npy", "random_crop", "pad_to", "cast", "epochs", "iter", "get_batch", "describe",
    "list_files", "zip", "sample_from_datasets", "range", "element_spec", "cardinality",
    "take_while", "scan", "unique", "choose_from_datasets", "rejection_resample", "sparse_batch",
    "snapshot", "save", "load", "counter", "random", "from_tensors", "apply", "reduce",
    "get_single_element",
]


@pytest.mark.parametrize("name", OPS)
def test_every_op_is_declared_in_the_class_body(name):
    member = vars(sh.Dataset).get(name)
    assert member is not None, f"Dataset.{name} is not declared in the class body"
    fn = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
    assert fn.__qualname__ == f"Dataset.{name}"
    assert fn.__doc__, f"Dataset.{name} has no docstring"


def test_no_method_is_assigned_onto_dataset_at_import():
    root = pathlib.Path(sh.__file__).parent
    for path in root.glob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            assert not stripped.startswith("Dataset.") or "=" not in stripped.split("(")[0], (path, line)
            assert "setattr(Dataset" not in stripped, (path, line)


def test_shuffle_takes_the_buffer_size_first_as_in_tf_data():
    stream = sh.Dataset.range(100).filter(lambda e: True)
    out = xs(stream.shuffle(10, seed=1))
    assert sorted(out) == list(range(100)) and out != list(range(100))
    # A buffer smaller than the dataset is a buffer shuffle (a stream); each output is at most
    # `buffer_size - 1` places ahead of where it came in.
    small = sh.Dataset.range(1000).shuffle(10, seed=3)
    assert not small.is_random_access
    assert all(x <= i + 9 for i, x in enumerate(xs(small)))
    # A buffer of at least len(ds) is run as the global permutation: random access kept.
    full = sh.Dataset.range(50).shuffle(1000, seed=3)
    assert full.is_random_access and sorted(xs(full)) == list(range(50))
    assert sh.Dataset.range(50).shuffle(seed=3).is_random_access
    with pytest.raises(sh.InvalidArgumentError, match=r"shuffle\(buffer_size=0\)"):
        sh.Dataset.range(5).shuffle(0)


def test_reshuffle_each_iteration_false_keeps_one_order():
    ds = sh.Dataset.range(30).shuffle(seed=4, reshuffle_each_iteration=False)
    assert xs(ds) == xs(ds) != list(range(30))
    again = sh.Dataset.range(30).shuffle(seed=4)
    assert xs(again) != xs(again)
    buf = sh.Dataset.range(30).filter(lambda e: True).shuffle(8, seed=4, reshuffle_each_iteration=False)
    assert xs(buf) == xs(buf)


def test_minus_one_means_all_and_forever():
    ds = sh.Dataset.range(5)
    assert xs(ds.take(-1)) == [0, 1, 2, 3, 4]
    assert xs(ds.skip(-1)) == []
    assert ds.repeat(-1).cardinality() == sh.INFINITE
    assert xs(ds.repeat(-1).take(7)) == [0, 1, 2, 3, 4, 0, 1]


def test_autotune_where_tf_data_takes_it(tmp_path):
    paths = []
    for k in range(3):
        src = sh.from_arrays({"x": np.arange(k * 10, k * 10 + 4)})
        paths += tfr.write_tfrecord(src, tmp_path, prefix=f"p{k}", num_shards=1)
    files = sh.list_files(str(tmp_path / "*.tfrecord"), shuffle=False)
    ds = files.interleave(lambda e: sh.TFRecordDataset(e["path"]), cycle_length=sh.AUTOTUNE,
                          num_parallel_calls=sh.AUTOTUNE)
    assert len(list(ds)) == 12
    assert xs(sh.Dataset.range(4).prefetch(sh.AUTOTUNE)) == [0, 1, 2, 3]
    batches = list(sh.Dataset.range(10).batch(4, num_parallel_calls=sh.AUTOTUNE))
    assert [b["x"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_paths_arrive_usable_and_every_path_argument_takes_them(tmp_path):
    src = sh.from_arrays({"x": np.arange(6)})
    written = tfr.write_tfrecord(src, tmp_path, prefix="d", num_shards=2)
    e = next(iter(sh.list_files(str(tmp_path / "d-*"), shuffle=False)))
    assert len(sh.TFRecordDataset(e["path"])) == 3
    for form in (written[0], written[0].encode(), pathlib.Path(written[0]), np.array(written[0].encode())):
        assert len(sh.TFRecordDataset(form)) == 3
    sh.write_shards(src, pathlib.Path(tmp_path / "s"))
    assert len(sh.open_shards(os.fsencode(tmp_path / "s"))) == 6
    sh.verify_shards(np.array(str(tmp_path / "s")))
    with pytest.raises(sh.InvalidArgumentError, match=r"open_shards\(path="):
        sh.open_shards(3.5)


def test_from_generator_is_a_checkpointable_stream():
    def gen():
        for i in range(6):
            yield {"x": np.int64(i), "v": np.ones(i, np.float32)}

    ds = sh.from_generator(gen)
    assert xs(ds) == list(range(6)) and xs(ds) == list(range(6))  # called again per epoch
    it = iter(ds)
    next(it), next(it)
    state = it.get_state()
    rest = xs(it)
    it2 = iter(ds)
    it2.set_state(state)
    assert xs(it2) == rest == [2, 3, 4, 5]
    batches = list(ds.batch(4))
    assert isinstance(batches[0]["v"], sh.Ragged)
    spec = ds.element_spec
    assert spec["x"] == sh.TensorSpec((), np.dtype(np.int64))
    assert xs(sh.from_generator(gen, output_signature=spec)) == list(range(6))
    with pytest.raises(sh.InvalidArgumentError, match="output_signature"):
        list(sh.from_generator(lambda: iter([{"y": 1}]), output_signature=spec))


def test_a_generator_exception_surfaces_as_itself():
    def gen():
        yield {"x": 1}
        raise KeyError("bad file")

    with pytest.raises(KeyError, match="bad file"):
        list(sh.from_generator(gen))


def test_tuples_get_an_error_that_says_how():
    with pytest.raises(sh.InvalidArgumentError, match=r"\{'x': x, 'y': y\}"):
        sh.from_tensor_slices((np.arange(3), np.arange(3)))
    with pytest.raises(TypeError, match='"x": x, "y": y'):
        list(sh.Dataset.range(3).map(lambda e: (e["x"], e["x"])))
    with pytest.raises(TypeError, match='"x": x, "y": y'):
        list(sh.from_generator(lambda: iter([(1, 2)])))
    assert xs(sh.from_tensor_slices({"x": np.arange(3)})) == [0, 1, 2]


def test_unbatch_rebatch_window_group_by_window():
    ds = sh.Dataset.range(10)
    assert xs(ds.batch(3).unbatch()) == list(range(10))
    ragged = sh.from_arrays({"v": [np.full(n, n) for n in (1, 3, 2)]}).batch(3).unbatch()
    assert [e["v"].tolist() for e in ragged] == [[1], [3, 3, 3], [2, 2]]
    assert [b["x"].tolist() for b in ds.batch(4).rebatch(3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    w = [b["x"].tolist() for b in sh.Dataset.range(7).window(3, shift=2)]
    assert w == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
    assert [b["x"].tolist() for b in sh.Dataset.range(7).window(3, 2, drop_remainder=True)] == w[:3]
    groups = [b["x"].tolist() for b in ds.group_by_window(lambda e: int(e["x"]) % 2, window_size=3)]
    assert groups == [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
    reduced = ds.group_by_window(lambda e: int(e["x"]) % 2, lambda key, w: w.batch(2), window_size=3)
    assert [b["x"].tolist() for b in reduced] == [[0, 2], [4], [1, 3], [5], [6, 8], [7, 9]]


def test_element_spec_reports_shapes_and_dtypes():
    ds = sh.from_arrays({"x": np.zeros((4, 3), np.float32), "v": [np.ones(n, np.int16) for n in (1, 2, 3, 4)]})
    assert ds.element_spec == {"x": sh.TensorSpec((3,), np.dtype(np.float32)),
                               "v": sh.TensorSpec((None,), np.dtype(np.int16))}  # lengths 1..4 vary
    spec = ds.batch(2).element_spec
    assert spec["v"] == sh.RaggedSpec(2, (None,), np.dtype(np.int16))
    with pytest.raises(sh.OutOfRangeError):
        _ = ds.take(0).element_spec


def test_padded_batch_refuses_a_lengths_name_collision():
    ds = sh.from_arrays({"x": [np.ones(n) for n in (1, 2)], "x_lengths": np.array([7, 7])})
    with pytest.raises(sh.InvalidArgumentError, match="x_lengths"):
        list(ds.padded_batch(2))


def test_cache_after_a_parallel_map_points_to_the_better_fix():
    ds = sh.Dataset.range(8).filter(lambda e: True).map(lambda e: e, num_parallel_calls=2)
    with pytest.raises(sh.StokeholdError, match=r"sequentially before cache\(\)"):
        list(ds.cache().shuffle(seed=0))


def test_errors_name_the_op_and_the_argument():
    ds = sh.Dataset.range(4)
    cases = [
        (lambda: ds.batch(0), r"batch\(batch_size=0\)"),
        (lambda: ds.batch("4"), r"batch\(batch_size='4'\)"),
        (lambda: ds.map(lambda e: e, num_parallel_calls=0), r"map\(num_parallel_calls=0\)"),
        (lambda: ds.prefetch(-5), r"prefetch\(buffer_size=-5\)"),
        (lambda: ds.take(1.5), r"take\(count=1.5\)"),
        (lambda: ds.shard(0, 0), r"shard\(num_shards=0\)"),
        (lambda: ds.shard(2, 0, policy="x"), r"shard\(policy='x'\)"),
        (lambda: ds.window(0), r"window\(size=0\)"),
        (lambda: ds.padded_batch(2, padded_shapes=[3]), r"padded_batch\(padded_shapes="),
    ]
    for call, pattern in cases:
        with pytest.raises(sh.InvalidArgumentError, match=pattern):
            call()


def test_adapters_are_attributes_without_importing_their_frameworks():
    code = ("import sys, stokehold\n"
            "assert callable(stokehold.torch.as_torch) and callable(stokehold.jax.iterate)\n"
            "assert callable(stokehold.keras.as_keras)\n"
            "print(sorted(m for m in ('torch', 'jax', 'keras', 'tensorflow') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_documented_differences_from_tf_data_hold():
    """docs/GUIDE.md's table of what stokehold does differently from tf.data, on purpose: each
    row that the oracle (test_oracle.py) does not cover is checked here."""
    # Python scalars from map / from_generator keep numpy's dtypes (tf.data: int32 / float32).
    e = next(iter(sh.Dataset.range(3).map(lambda e: {"y": int(e["x"]) + 1, "f": 0.5})))
    assert (e["y"].dtype, e["f"].dtype) == (np.int64, np.float64)
    g = next(iter(sh.from_generator(lambda: iter([{"y": 1, "f": 0.5}]))))
    assert (g["y"].dtype, g["f"].dtype) == (np.int64, np.float64)

    # Elements that skip or shard leave out are never computed (tf.data computes them).
    def fails_on_0(e):
        if int(e["x"]) == 0:
            raise ValueError("element 0")
        return e

    assert [int(e["x"]) for e in sh.Dataset.range(3).map(fails_on_0).skip(1)] == [1, 2]
    assert [int(e["x"]) for e in sh.Dataset.range(4).map(fails_on_0).shard(2, 1)] == [1, 3]

    # pad_to_bucket_boundary pads the length feature's axis to the boundary, other features to
    # the longest in the batch (tf.data: every statically unknown axis to the boundary).
    rows = [{"seq": np.arange(n), "other": np.arange(n + 1)} for n in (1, 2)]
    b = next(iter(sh.from_list(rows).bucket_by_sequence_length(
        "seq", bucket_boundaries=[5], bucket_batch_sizes=[2, 2], pad_to_bucket_boundary=True)))
    assert b["seq"].shape == (2, 4) and b["other"].shape == (2, 3)


def test_group_by_window_takes_a_window_size_func():
    """tf.data's window_size_func (issue 49, class 8): each key's own window size."""
    ds = sh.Dataset.range(10).group_by_window(lambda e: int(e["x"]) % 2,
                                               window_size_func=lambda key: 2 + key)
    # Evens in windows of 2, odds in windows of 3; the partial windows at the end by key.
    assert [b["x"].tolist() for b in ds] == [[0, 2], [1, 3, 5], [4, 6], [8], [7, 9]]
    with pytest.raises(sh.InvalidArgumentError, match=r"window_size_func\(1\) = 0"):
        list(sh.Dataset.range(4).group_by_window(lambda e: 1, window_size_func=lambda k: 0))
    with pytest.raises(sh.InvalidArgumentError, match="exactly one of window_size"):
        sh.Dataset.range(4).group_by_window(lambda e: 1)
