"""torch DataLoader workers over stokehold pipelines (skipped where torch is not installed; it is
not a test dependency). Run here with /work/venvs/bench, which has torch."""

import pytest

import stokehold as sh

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from stokehold.torch import as_torch, as_torch_map  # noqa: E402


def plus_one(e):
    return {"x": e["x"] + 1}


def random_access():
    return sh.Dataset.range(103).shuffle(seed=5).map(plus_one).batch(4)


def stream():
    return sh.Dataset.range(103).filter(lambda e: int(e["x"]) % 5 != 2).map(plus_one).batch(4)


def flat(batches):
    return [v for b in batches for v in b["x"].tolist()]


@pytest.mark.parametrize("make", [random_access, stream])
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_dataloader_workers_yield_each_element_once(make, workers):
    want = flat(make().iter(0))
    loader = DataLoader(as_torch(make()), batch_size=None, num_workers=workers)
    got = flat(loader)
    assert sorted(got) == sorted(want)
    assert len(got) == len(want)
    # DataLoader's round-robin over strided worker shares gives back the single-process order.
    assert got == want


def test_epochs_advance_and_set_epoch_picks_one():
    it = as_torch(random_access())
    e0 = flat(DataLoader(it, batch_size=None, num_workers=0))
    e1 = flat(DataLoader(it, batch_size=None, num_workers=0))
    assert e0 != e1 and sorted(e0) == sorted(e1)
    it.set_epoch(1)
    assert flat(DataLoader(it, batch_size=None, num_workers=2)) == e1


def test_map_style_adapter_with_samplers():
    ds = random_access()
    m = as_torch_map(ds)
    assert len(m) == len(ds)
    assert m[3]["x"].tolist() == ds[3]["x"].tolist()
    assert m[-1]["x"].tolist() == ds[len(ds) - 1]["x"].tolist()
    with pytest.raises(IndexError):
        m[len(ds)]
    want = flat(ds.iter(0))
    got = flat(DataLoader(m, batch_size=None, num_workers=2))
    assert got == want
    # Two ranks of a DistributedSampler cover every batch once.
    parts = []
    for rank in range(2):
        sampler = DistributedSampler(m, num_replicas=2, rank=rank, shuffle=True, seed=1, drop_last=False)
        parts += flat(DataLoader(m, batch_size=None, sampler=sampler, num_workers=1))
    # 26 batches split evenly: nothing padded, each element once.
    assert sorted(parts) == sorted(want)
    m.set_epoch(1)
    assert flat(DataLoader(m, batch_size=None)) == flat(ds.iter(1))


def test_map_style_adapter_refuses_streams():
    with pytest.raises(TypeError, match="random-access"):
        as_torch_map(stream())
