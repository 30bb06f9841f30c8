"""Issue 48, items 6 and 7: diagnoses that name what a file is and what to do, and the surprises
of the first hour (the map running ahead into the next epoch, element_spec of varying shapes,
from_generator's output_signature), each on real files, real folders and real imports."""

import importlib.metadata
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
    for ds in [tfr.read_tfrecord(tfrecords, spec, 2), tfr.parse_examples(tfr.TFRecordDataset(tfrecords).batch(2), spec)]:
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
