"""pack for language models: concat-then-split (Grain's ConcatThenSplitIterDataset; row for row
against Grain itself in crates/stokehold-core/tests/it/pack.rs), positions and cu_seqlens from
every packer, and exact resume at random cuts whatever the threads and prefetch."""

import json
import random

import numpy as np
import pytest

import stokehold as sh


def documents(n=300, seed=5):
    """Documents of lognormal lengths (some empty, some longer than a row); document ``i``'s
    tokens are ``i * 1000 + k``."""
    rng = np.random.default_rng(seed)
    lengths = np.ceil(rng.lognormal(3.0, 1.0, size=n)).astype(int)
    lengths[::37] = 0
    docs = [np.arange(k, dtype=np.int32) + 1000 * i for i, k in enumerate(lengths)]
    return sh.from_arrays({"ids": docs, "doc": np.arange(n)}), docs


def plain(e):
    return {k: v.tolist() for k, v in e.items()}


def test_concat_then_split_rows_are_full_and_hold_every_token_once_in_order():
    ds, docs = documents()
    rows = list(ds.pack({"ids": 64}, mode="concat_then_split"))
    assert sorted(rows[0]) == ["ids", "ids_positions", "ids_segment_ids"]
    ids = np.stack([r["ids"] for r in rows])
    seg = np.stack([r["ids_segment_ids"] for r in rows])
    pos = np.stack([r["ids_positions"] for r in rows])
    assert ids.shape == (len(rows), 64) and ids.dtype == np.int32
    assert (seg[:-1] > 0).all(), "every row but the last is full"
    stream = np.concatenate(docs)
    assert (ids[seg > 0] == stream).all()
    assert (seg[-1] > 0).sum() == len(stream) - 64 * (len(rows) - 1)
    for r in range(len(rows)):
        for s in set(seg[r][seg[r] > 0].tolist()):
            part = ids[r][seg[r] == s]
            # One piece of one document; Grain's positions: 0, 1, ... within the piece, so the
            # tail of a document cut at a row's end starts again at 0 in the next row.
            assert len(set((part // 1000).tolist())) == 1
            assert (pos[r][seg[r] == s] == np.arange(len(part))).all()


def flash_cu_seqlens(cu):
    """flash-attention's varlen cu_seqlens of a batch of rows flattened, as the docstring says."""
    b, l1 = cu.shape
    return np.unique(cu + (l1 - 1) * np.arange(b)[:, None])


@pytest.mark.parametrize("mode,bins", [("concat_then_split", None), ("first_fit", 4), ("best_fit", 4)])
def test_cu_seqlens_give_flash_attentions_boundaries_for_a_flattened_batch(mode, bins):
    ds, _ = documents(120)
    n = 48
    batch = next(
        iter(ds.filter(lambda e: len(e["ids"]) <= n).pack({"ids": n}, bins, mode=mode, cu_seqlens=True).batch(5))
    )
    cu, seg = batch["ids_cu_seqlens"], batch["ids_segment_ids"]
    assert cu.shape == (5, n + 1) and cu.dtype == np.int32
    flat = flash_cu_seqlens(cu)
    assert flat[0] == 0 and flat[-1] == 5 * n and (np.diff(flat) > 0).all()
    # The boundaries are where a segment starts: each row's start, each change of segment id
    # (padding, id 0, is one sequence).
    s = seg.reshape(-1)
    starts = [i for i in range(len(s)) if i % n == 0 or s[i] != s[i - 1]]
    assert flat.tolist() == starts + [5 * n]


def run(ds, cut=None):
    """The rows as lists; with ``cut``, checkpointed after ``cut`` rows (through JSON) and
    restored into a fresh iterator."""
    it = ds.iter(0)
    out = []
    if cut is not None:
        out = [plain(next(it)) for _ in range(cut)]
        state = json.loads(json.dumps(it.get_state()))
        it = ds.iter(0)
        it.set_state(state)
    return out + [plain(e) for e in it]


def test_concat_then_split_resumes_exactly_at_random_cuts_on_any_threads_and_prefetch():
    ds, _ = documents(400)

    def pipeline(cores, depth):
        return (
            ds.map(lambda e: {"ids": e["ids"], "doc": e["doc"]}, num_parallel_calls=cores)
            .pack({"ids": 32}, mode="concat_then_split", cu_seqlens=True)
            .batch(3)
            .prefetch(depth)
            .with_options(cores=cores)
        )

    want = run(pipeline(1, 1))
    assert len(want) > 40
    rng = random.Random(46)
    for cores, depth in [(1, 1), (4, 8), (2, 2)]:
        ds_ = pipeline(cores, depth)
        assert run(ds_) == want
        for cut in rng.sample(range(len(want) + 1), 7):
            assert run(ds_, cut) == want, (cores, depth, cut)


def test_the_state_carries_only_the_cut_documents_place():
    ds, docs = documents(50)
    packed = ds.pack({"ids": 16}, mode="concat_then_split")
    it = packed.iter(0)
    for _ in range(5):
        next(it)
    state = json.dumps(it.get_state())
    # No tokens in it: an input position and the remainder's [start, stop], whatever the rows.
    assert len(state) < 400, state


def test_pack_arguments_of_each_mode_are_checked_by_name():
    ds, _ = documents(10)
    with pytest.raises(sh.InvalidArgumentError, match=r"pack\(num_packing_bins=4\).*concat_then"):
        ds.pack({"ids": 8}, 4, mode="concat_then_split")
    with pytest.raises(sh.InvalidArgumentError, match=r"pack\(shuffle_bins=True\)"):
        ds.pack({"ids": 8}, mode="concat_then_split", shuffle_bins=True)
    with pytest.raises(sh.InvalidArgumentError, match=r"pack\(num_packing_bins=None\).*'best_fit'"):
        ds.pack({"ids": 8}, mode="best_fit")
    with pytest.raises(sh.InvalidArgumentError, match="concat_then_split"):
        ds.pack({"ids": 8}, 2, mode="concat_then_splt")
    # The error for a too-long element points at the mode that cuts it, which works.
    with pytest.raises(sh.InvalidArgumentError, match='mode="concat_then_split", which cuts it'):
        list(ds.pack({"ids": 8}, 2))
    assert len(list(ds.pack({"ids": 8}, mode="concat_then_split"))) > 0
