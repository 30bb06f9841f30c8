"""python/examples/lm_train.py trains, and resumes from a checkpoint step for step."""

import importlib.util
import json
import pathlib

import pytest

pytest.importorskip("jax")  # in .venv (make test); the example says why JAX, not torch

EXAMPLE = pathlib.Path(__file__).parents[1] / "examples" / "lm_train.py"


def example():
    spec = importlib.util.spec_from_file_location("lm_train", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_loss_falls_and_a_resumed_run_has_the_uninterrupted_losses(tmp_path):
    lm = example()
    quiet = lambda s: None  # noqa: E731
    full = lm.train(str(tmp_path / "a"), 40, log=quiet)
    assert sum(full[-5:]) / 5 < 0.75 * full[0], full
    first = lm.train(str(tmp_path / "b"), 20, checkpoint_every=20, log=quiet)
    rest = lm.train(str(tmp_path / "b"), 40, resume=True, log=quiet)
    assert first == full[:20]
    assert rest == full[20:]
    # The data's state is what makes it so: the same model state with the pipeline restarted
    # from its beginning gives other losses.
    ckpt = tmp_path / "b" / "ckpt.json"
    saved = json.loads(ckpt.read_text())
    saved["data"] = lm.pipeline(*lm.write_data(str(tmp_path / "b"))).iter(0).get_state()
    ckpt.write_text(json.dumps(saved))
    assert lm.train(str(tmp_path / "b"), 40, resume=True, log=quiet) != full[20:]
