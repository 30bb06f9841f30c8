"""Issue 48, items 6 and 7: diagnoses that name what a file is and what to do, and the surprises
of the first hour (the map running ahead into the next epoch, element_spec of varying shapes,
from_generator's output_signature), each on real files, real folders and real imports."""

import importlib.metadata
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import stokehold as sh

# ---- item 7: the warm next epoch ------------------------------------------------------------


def counting_pipeline(n=100):
    calls = []
    lock = threading.Lock()

    def f(e):
        with lock:
            calls.append(int(e["x"]))
        return e

    return sh.from_arrays({"x": np.arange(n)}).map(f).prefetch(), calls


def settled(calls, want):
    """The call count once it reached `want` (a loaded machine may leave the thread without a
    core for a while) and a moment later, when calls past it would have shown."""
    deadline = time.monotonic() + 60
    while len(calls) < want and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    return len(calls)


def test_a_prefetch_runs_the_map_into_the_next_epoch_by_default():
    ds, calls = counting_pipeline()
    assert len(list(ds)) == 100
    assert settled(calls, 101) > 100, "the warm next epoch runs the map ahead"


def test_warm_start_false_stops_each_epoch_at_its_end():
    ds, calls = counting_pipeline()
    cold = ds.with_options(warm_start=False)
    assert "warm_start=false" in cold.describe()
    fresh, _ = counting_pipeline()
    for epoch in range(2):
        assert [int(b["x"]) for b in cold] == [int(b["x"]) for b in fresh.iter(epoch)]
        assert settled(calls, 100 * (epoch + 1)) == 100 * (epoch + 1)


def test_warm_start_must_be_a_bool():
    ds, _ = counting_pipeline()
    with pytest.raises(sh.InvalidArgumentError, match="warm_start"):
        ds.with_options(warm_start="no")


# ---- item 6: an adapter without its framework -------------------------------------------------

BLOCKED = """
import sys
for m in {blocked!r}:
    sys.modules[m] = None  # the import machinery's own 'not importable' marker
import numpy as np
import stokehold as sh
ds = sh.from_arrays({{"x": np.arange(4)}}).batch(2)
try:
    {call}
except ImportError as e:
    print(type(e).__name__, "|", e)
else:
    print("no error")
"""


@pytest.mark.parametrize(
    "blocked, call, user, extra",
    [
        (["torch"], "sh.torch.as_torch(ds)", "stokehold.torch.as_torch", "torch"),
        (["torch"], "sh.torch.as_torch_map(ds)", "stokehold.torch.as_torch_map", "torch"),
        (["torch"], "sh.torch.to_torch(ds[0])", "stokehold.torch.to_torch", "torch"),
        (["jax"], "sh.jax.to_jax(ds[0])", "stokehold.jax.to_jax", "jax"),
        (["keras"], "sh.keras.as_keras(ds, x='x')", "stokehold.keras.as_keras", "keras"),
        (["ray", "ray.data"], "import stokehold.ray", "stokehold.ray", "ray"),
        (["pyarrow"], "import stokehold.ray", "stokehold.ray", "ray"),
        (["ray"], "ds.remote_map(lambda e: e)", "Dataset.remote_map", "ray"),
    ],
)
def test_an_adapter_without_its_framework_names_the_extra(blocked, call, user, extra):
    out = subprocess.run([sys.executable, "-c", BLOCKED.format(blocked=blocked, call=call)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    kind, _, message = out.stdout.strip().partition(" | ")
    assert kind == "ImportError", out.stdout  # not a bare ModuleNotFoundError
    assert message.startswith(f"{user} needs the optional module {blocked[0]!r}, which is not installed"), message
    assert f"pip install 'stokehold[{extra}]'" in message and f"pip install '.[{extra}]'" in message, message


def test_the_install_hint_names_the_extras_requirements():
    # The hint reads the extras from the installed package's metadata (pyproject.toml's extras):
    # each one it names exists, and the plain requirement it offers is the extra's own.
    from stokehold._optional import _install_hint

    extras = importlib.metadata.metadata("stokehold").get_all("Provides-Extra")
    for extra in ["torch", "jax", "keras", "ray"]:
        assert extra in extras
        req = next(r for r in importlib.metadata.requires("stokehold") if f"extra == '{extra}'" in r)
        plain = req.split(";")[0].replace(" ", "")
        assert _install_hint(extra).endswith(f"or pip install '{plain}'"), (extra, req)


# ---- item 6: a spec naming a feature the data does not have -----------------------------------


@pytest.fixture
def tfrecords(tmp_path):
    from stokehold import tfrecord as tfr

    ds = sh.from_arrays({"label": np.arange(4), "image": np.zeros((4, 3), np.float32)})
    return tfr.write_tfrecord(ds, tmp_path / "tfr")


def test_a_parse_spec_with_a_typo_lists_the_features_and_the_closest(tfrecords):
    from stokehold import tfrecord as tfr

    spec = {"lable": tfr.FixedLen([], "int64")}
    batches = tfr.TFRecordDataset(tfrecords).batch(2)
    for ds in [tfr.read_tfrecord(tfrecords, spec, 2), tfr.parse_examples(batches, spec)]:
        with pytest.raises(sh.SchemaError) as e:
            list(ds)
        msg = str(e.value)
        assert 'feature "lable": is missing' in msg, msg
        assert '"image"' in msg and '"label"' in msg and 'did you mean "label"?' in msg, msg


def test_an_op_naming_a_missing_feature_suggests_the_closest():
    ds = sh.from_arrays({"label": np.arange(3), "image": np.zeros((3, 8, 8, 3), np.uint8)})
    with pytest.raises(sh.SchemaError, match=r'no feature "imgae"; the features present are \["image", "label"\]; '
                                             r'did you mean "image"\?'):
        ds.random_crop("imgae", 4, seed=1)[0]
    with pytest.raises(sh.SchemaError) as e:
        ds.random_crop("weights", 4, seed=1)[0]
    assert "did you mean" not in str(e.value), "nothing close: no guess"


# ---- item 7: element_spec of varying shapes; from_generator's output_signature ----------------


def images(sizes):
    """Decoded images of the given sizes, as a random-access dataset (a map over a range)."""

    def make(e):
        i = int(e[next(iter(e))])
        return {"image": np.zeros((*sizes[i], 3), np.uint8), "label": np.int64(i)}

    return sh.Dataset.range(len(sizes)).map(make)


def test_element_spec_reports_none_for_axes_that_vary():
    ds = images([(145, 89), (120, 89), (145, 60)])
    assert ds.element_spec["image"] == sh.TensorSpec((None, None, 3), np.dtype(np.uint8))
    assert ds.element_spec["label"] == sh.TensorSpec((), np.dtype(np.int64))
    # A stream is sampled from a fresh iterator of epoch 0.
    stream = ds.filter(lambda e: True)
    assert not stream.is_random_access
    assert stream.element_spec["image"].shape == (None, None, 3)
    # The last element is read too (where there is random access): a short last batch shows.
    assert sh.from_arrays({"x": np.arange(10)}).batch(4).element_spec["x"].shape == (None,)
    assert sh.from_arrays({"x": np.arange(10)}).batch(4, drop_remainder=True).element_spec["x"].shape == (4,)


def test_element_spec_reads_the_documented_sample():
    from stokehold.spec import SPEC_SAMPLE

    assert SPEC_SAMPLE == 8 and "up to 8" in sh.Dataset.element_spec.__doc__
    # Element 8 (the 9th, neither among the first 7 nor the last) is not read.
    sizes = [(4, 4)] * 20
    sizes[8] = (5, 4)
    assert images(sizes).element_spec["image"].shape == (4, 4, 3)
    sizes[19] = (6, 4)
    assert images(sizes).element_spec["image"].shape == (None, 4, 3)


def test_output_signature_checks_shapes_and_dtypes_naming_element_and_feature():
    sig = {"image": sh.TensorSpec((None, None, 3), np.dtype(np.uint8)), "label": sh.TensorSpec((), np.dtype(np.int64))}

    def gen(bad):
        yield {"image": np.zeros((2, 3, 3), np.uint8), "label": np.int64(0)}
        yield {"image": np.zeros((5, 1, 3), np.uint8), "label": np.int64(1)}
        yield bad

    ok = {"image": np.zeros((1, 1, 3), np.uint8), "label": np.int64(2)}
    assert len(list(sh.from_generator(lambda: gen(ok), output_signature=sig))) == 3
    cases = [
        ({"image": np.zeros((2, 2, 4), np.uint8), "label": np.int64(2)},
         "element 2, feature 'image': output_signature expected shape (None, None, 3), got (2, 2, 4)"),
        ({"image": np.zeros((2, 2), np.uint8), "label": np.int64(2)},
         "element 2, feature 'image': output_signature expected shape (None, None, 3), got (2, 2)"),
        ({"image": np.zeros((2, 2, 3), np.float32), "label": np.int64(2)},
         "element 2, feature 'image': output_signature expected dtype uint8, got float32"),
        ({"image": np.zeros((1, 1, 3), np.uint8), "label": np.zeros(2, np.int64)},
         "element 2, feature 'label': output_signature expected shape (), got (2,)"),
    ]
    for bad, message in cases:
        with pytest.raises(sh.InvalidArgumentError) as e:
            list(sh.from_generator(lambda b=bad: gen(b), output_signature=sig))
        assert message in str(e.value), str(e.value)
    # A dataset's own element_spec is a signature its elements pass, varying sizes included.
    ds = images([(3, 2), (2, 2)])
    assert len(list(sh.from_generator(lambda: iter(ds), output_signature=ds.element_spec))) == 2


# ---- item 6: a folder or file that is not what the call reads -------------------------------------


def write_wav(path, frames=800, rate=8000):
    import wave

    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.arange(frames, dtype=np.int16).tobytes())
    return str(path)


def test_open_shards_on_a_tfrecord_folder_says_what_it_holds_and_the_hint_works(tfrecords):
    folder = os.path.dirname(tfrecords[0])
    with pytest.raises(sh.StokeholdIOError) as e:
        sh.open_shards(folder)
    msg = str(e.value)
    assert "not a stokehold shard folder (no manifest.json)" in msg and "incomplete" not in msg, msg
    assert "(a TFRecord file): read with stokehold.TFRecordDataset(files)" in msg, msg
    assert len(list(sh.TFRecordDataset(tfrecords))) == 4  # the hint, followed


def test_open_shards_on_a_folder_of_npy_files_names_open_table(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(6).reshape(3, 2))
    (tmp_path / "notes.bin").write_bytes(b"\x00\x01 nothing known")
    with pytest.raises(sh.StokeholdIOError) as e:
        sh.open_shards(tmp_path)
    msg = str(e.value)
    assert "1 like a.npy (a NumPy .npy array): read with stokehold.open_table(path)" in msg, msg
    assert "1 other file(s) (notes.bin) of no kind stokehold knows" in msg, msg
    assert len(sh.open_table(tmp_path / "a.npy")) == 3
    assert sh.list_files(str(tmp_path / "*.npy")).load_npy()[0]["array"].shape == (3, 2)


def test_open_shards_one_folder_too_high_names_the_folder_to_open(tmp_path):
    sh.write_shards(sh.from_arrays({"x": np.arange(5)}), tmp_path / "train")
    with pytest.raises(sh.StokeholdIOError, match=r"1 folder\(s\) \(train\): open_shards wants the folder that "
                                                  r"holds manifest.json itself"):
        sh.open_shards(tmp_path)
    assert len(sh.open_shards(tmp_path / "train")) == 5


def test_an_interrupted_write_is_still_called_one(tmp_path):
    sh.write_shards(sh.from_arrays({"x": np.arange(5)}), tmp_path / "ds")
    os.remove(tmp_path / "ds" / "manifest.json")  # what a write killed before its end leaves
    with pytest.raises(sh.DataCorruptionError, match="incomplete dataset: no manifest.json"):
        sh.open_shards(tmp_path / "ds")
    (tmp_path / "empty").mkdir()  # a write that had not started
    with pytest.raises(sh.DataCorruptionError, match="incomplete dataset"):
        sh.open_shards(tmp_path / "empty")


def test_load_audio_or_load_image_on_a_folder_says_so_and_the_hint_works(tmp_path):
    write_wav(tmp_path / "a.wav")
    write_wav(tmp_path / "b.wav")
    folder = sh.from_list([{"path": str(tmp_path).encode()}])
    for load in [lambda d: d.load_audio(), lambda d: d.load_image()]:
        with pytest.raises(sh.StokeholdIOError) as e:
            load(folder)[0]
        msg = str(e.value)
        assert "not a regular file (a directory)" in msg and "no suitable format reader" not in msg, msg
        assert f'stokehold.list_files("{tmp_path}/*")' in msg, msg
    clips = sh.list_files(f"{tmp_path}/*").load_audio()  # the hint, followed
    assert [c["audio"].shape for c in clips] == [(1, 800), (1, 800)]


def test_a_file_of_another_kind_says_what_it_looks_like(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(3))
    wav = write_wav(tmp_path / "clip.wav")
    with pytest.raises(sh.DataCorruptionError) as e:
        sh.from_list([{"path": str(tmp_path / "x.npy").encode()}]).load_audio()[0]
    assert "not a readable audio file" in str(e.value)
    assert "it looks like a NumPy .npy array (read with stokehold.open_table(path)" in str(e.value), str(e.value)
    with pytest.raises(sh.DataCorruptionError) as e:
        sh.from_list([{"path": wav.encode()}]).load_image()[0]
    assert "it looks like a WAV audio file (read with stokehold.list_files(pattern).load_audio())" in str(e.value)
    # Bytes held in memory are told apart the same way.
    with pytest.raises(sh.DataCorruptionError, match="it looks like a NumPy .npy array"):
        sh.from_list([{"data": (tmp_path / "x.npy").read_bytes()}]).decode_audio("data")[0]
