"""bucket_by_sequence_length, pack, random_map and map_with_index from Python."""

import json

import numpy as np
import pytest

import stokehold as sh
from stokehold.keyed import element_key, element_rng


def clips(lengths):
    return sh.from_arrays({
        "id": np.arange(len(lengths), dtype=np.int64),
        "seq": [np.arange(n, dtype=np.int64) + 100 * i for i, n in enumerate(lengths)],
    })


LENGTHS = [4, 1, 7, 2, 9, 3, 3, 5, 12, 0, 6, 2, 8, 1, 4, 10, 5, 2, 7, 3, 11]


def resume_everywhere(ds):
    """Save after every element, restore into a fresh iterator, and compare the rest."""
    full = [{k: v.tolist() for k, v in e.items()} for e in ds.iter(0)]
    for k in range(len(full) + 1):
        it = ds.iter(0)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(it.get_state()))
        again = ds.iter(0)
        again.set_state(state)
        assert [{n: v.tolist() for n, v in e.items()} for e in again] == full[k:], k
    return full


def test_bucket_by_sequence_length_by_feature_or_function():
    ds = clips(LENGTHS).bucket_by_sequence_length("seq", [3, 6], [2, 3, 2])
    batches = resume_everywhere(ds)
    # The same batches as tf.data (testdata/bucket/tf_bucket.json, first case).
    assert [b["id"] for b in batches] == [[1, 3], [2, 4], [0, 5, 6], [8, 10], [9, 11], [12, 15],
                                          [7, 14, 16], [13, 17], [18, 20], [19]]
    assert batches[0]["seq"] == [[100, 0], [300, 301]]
    assert batches[0]["seq_lengths"] == [1, 2]
    by_fn = clips(LENGTHS).bucket_by_sequence_length(lambda e: len(e["seq"]), [3, 6], [2, 3, 2])
    assert [b["id"].tolist() for b in by_fn] == [b["id"] for b in batches]


def test_bucket_pad_to_boundary_drop_remainder_and_errors():
    ds = clips(LENGTHS).bucket_by_sequence_length("seq", [2, 5, 13], [3, 2, 4, 1],
                                                  pad_to_bucket_boundary=True, drop_remainder=True)
    widths = {len(b["id"]): b["seq"].shape[1] for b in ds}
    assert set(widths.values()) <= {1, 4, 12}
    with pytest.raises(sh.InvalidArgumentError, match="len\\(bucket_boundaries\\) \\+ 1"):
        clips(LENGTHS).bucket_by_sequence_length("seq", [3, 6], [2, 3])
    bad = clips([1, 20]).bucket_by_sequence_length("seq", [3], [1, 1], pad_to_bucket_boundary=True)
    with pytest.raises(sh.InvalidArgumentError, match="element 1.*length 20"):
        list(bad)

    def boom(e):
        raise KeyError("no length here")

    with pytest.raises(KeyError, match="no length here"):
        list(clips([1, 2]).bucket_by_sequence_length(boom, [3], [1, 1]))


def tokens(n=300, seed=3):
    rng = np.random.default_rng(seed)
    lengths = np.minimum(np.ceil(rng.lognormal(3.0, 0.9, size=n)), 128).astype(int)
    return sh.from_arrays({"tok": [np.arange(k, dtype=np.int32) + 1 for k in lengths]}), lengths


@pytest.mark.parametrize("mode", ["first_fit", "best_fit"])
def test_pack_rows_segments_positions_and_resume(mode):
    ds, lengths = tokens(60)
    packed = ds.pack({"tok": 128}, num_packing_bins=4, mode=mode)
    rows = resume_everywhere(packed)
    seen = []
    for r in rows:
        tok, seg, pos = (np.array(r[k]) for k in ("tok", "tok_segment_ids", "tok_positions"))
        assert tok.shape == seg.shape == pos.shape == (128,)
        assert (tok[seg == 0] == 0).all() and (pos[seg == 0] == 0).all()
        for s in range(1, seg.max() + 1):
            part = tok[seg == s]
            assert (pos[seg == s] == np.arange(len(part))).all()
            assert (part == np.arange(len(part)) + 1).all()
            seen.append(len(part))
    assert sorted(seen) == sorted(lengths.tolist())


def test_best_fit_pads_no_more_than_first_fit_here():
    ds, lengths = tokens(400)

    def padding(mode):
        rows = list(ds.pack({"tok": 128}, num_packing_bins=8, mode=mode))
        return 1 - lengths.sum() / (128 * len(rows))

    assert padding("best_fit") <= padding("first_fit")


def test_pack_errors_name_the_argument_and_element():
    ds, _ = tokens(10)
    with pytest.raises(sh.InvalidArgumentError, match="mode"):
        ds.pack({"tok": 128}, 2, mode="next_fit")
    with pytest.raises(sh.InvalidArgumentError, match="num_packing_bins"):
        ds.pack({"tok": 128}, 0)
    with pytest.raises(sh.InvalidArgumentError, match="element 0.*row length 4"):
        list(sh.from_arrays({"tok": [np.arange(9)]}).pack({"tok": 4}, 2))


def augment(e, rng):
    return {"x": e["x"], "noise": rng.normal(size=3), "pick": rng.integers(0, 1 << 30)}


def outputs(ds, epoch=0):
    return [(int(e["x"]), e["noise"].tolist(), int(e["pick"])) for e in ds.iter(epoch)]


_M = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def _mix(z):
    """SplitMix64: one step from state z (stokehold_core::rng::mix)."""
    z = (z + _GAMMA) & _M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M
    return z ^ (z >> 31)


#: stokehold_core::rng::Stream::RandomMap.
_RANDOM_MAP = 0x5348000C


def _rotl(z, k):
    return ((z << k) | (z >> (64 - k))) & _M


def documented_key(seed, epoch, index):
    """stokehold.keyed's derivation, written out from its docstring: the chained key of (seed,
    [RandomMap, epoch, index]) starts from h = mix(seed ^ 0x5851F42D4C957F2D), absorbs the n-th
    part p as h = mix(rotl(h, 23) ^ mix(p + n * gamma)), ends with mix(h ^ parts); its two first
    outputs are mix(state) and mix(state + gamma); the key is hi << 64 | lo."""
    parts = [_RANDOM_MAP, epoch, index]
    h = _mix(seed ^ 0x5851F42D4C957F2D)
    for n, p in enumerate(parts, 1):
        h = _mix(_rotl(h, 23) ^ _mix((p + n * _GAMMA) & _M))
    state = _mix(h ^ len(parts))
    return _mix(state) << 64 | _mix((state + _GAMMA) & _M)


def test_element_key_is_the_documented_derivation_and_pinned():
    for args in [(0, 0, 0), (7, 2, 5), (2**63, 9, 123456789)]:
        assert element_key(*args) == documented_key(*args)
    # Golden values: changing the derivation changes every random_map output.
    assert element_key(0, 0, 0) == 187117728761756926242459653320314073753
    assert element_key(7, 2, 5) == 8371759115158753742621466467104602416
    a, b = element_rng(7, 2, 5), np.random.Generator(np.random.Philox(key=element_key(7, 2, 5)))
    assert a.integers(0, 1 << 62, size=4).tolist() == b.integers(0, 1 << 62, size=4).tolist()


def test_random_map_is_keyed_by_seed_epoch_index_whatever_the_threads():
    base = sh.Dataset.range(50)
    one = base.random_map(augment, seed=4)
    want = outputs(one)
    assert want[3][1] == element_rng(4, 0, 3).normal(size=3).tolist()
    for par in (1, 4):
        assert outputs(base.random_map(augment, seed=4, num_parallel_calls=par)) == want
    # A stream input: the index is the stream position, on 1 or 4 threads.
    stream = base.filter(lambda e: True)
    assert outputs(stream.random_map(augment, seed=4)) == want
    assert outputs(stream.random_map(augment, seed=4, num_parallel_calls=4)) == want
    # Another epoch draws anew, and epochs() gives the same as per-epoch iteration.
    assert outputs(one, 1) != want
    loader = one.epochs(2)
    got = [[(int(e["x"]), e["noise"].tolist(), int(e["pick"])) for e in ep] for ep in loader]
    assert got == [want, outputs(one, 1)]
    assert outputs(base.random_map(augment, seed=5)) != want


def test_random_map_resumes_exactly_under_shuffle_and_threads():
    ds = sh.Dataset.range(30).shuffle(seed=2).random_map(augment, seed=9, num_parallel_calls=4).batch(4)
    resume_everywhere(ds)


def test_map_with_index_gets_the_position_in_the_epoch():
    ds = sh.Dataset.range(5).map(lambda e: {"x": e["x"] * 10}).map_with_index(lambda i, e: {"i": i, "x": e["x"]})
    assert [int(e["i"]) for e in ds.iter(1)] == list(range(5))
    par = ds.filter(lambda e: True).map_with_index(lambda i, e: {"j": i, "i": e["i"]}, num_parallel_calls=3)
    assert [(int(e["j"]), int(e["i"])) for e in par] == [(k, k) for k in range(5)]

    def fails(i, e):
        if i == 3:
            raise ValueError("bad three")
        return e

    with pytest.raises(ValueError, match="bad three"):
        list(sh.Dataset.range(5).map_with_index(fails, num_parallel_calls=2))
