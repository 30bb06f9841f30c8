"""The PyTorch adapter (skipped where torch is not installed; it is not a test dependency)."""

import numpy as np
import pytest

import stokehold as sh

torch = pytest.importorskip("torch")


def test_as_torch_yields_tensors_zero_copy_for_batches():
    from stokehold.torch import RaggedTensor, as_torch

    ds = sh.from_arrays({"x": np.arange(12, dtype=np.float32).reshape(6, 2),
                         "r": [np.ones(n, np.int16) for n in (1, 2, 3, 1, 2, 3)]}).batch(3)
    it = as_torch(ds)
    assert len(it) == 2
    batches = list(torch.utils.data.DataLoader(it, batch_size=None))
    assert batches[1]["x"].tolist() == [[6, 7], [8, 9], [10, 11]]
    assert isinstance(batches[0]["r"], RaggedTensor)
    assert batches[0]["r"].row_splits.tolist() == [0, 1, 3, 6]
