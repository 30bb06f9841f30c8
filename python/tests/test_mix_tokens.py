"""sample_from_datasets(by="tokens"): token shares, determinism across threads, exact resume."""

import json

import numpy as np
import pytest

import stokehold as sh

ROW = 2048
WEIGHTS = [0.5, 0.3, 0.2]


def docs(source, n, mean, seed):
    """``n`` documents of source ``source`` (every token is ``source + 1``), lognormal lengths."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.ceil(rng.lognormal(np.log(mean), 0.8, size=n)), 1, ROW).astype(int)
    return sh.from_arrays({"tokens": [np.full(k, source + 1, np.int32) for k in lengths]})


def packed(source, mean, parallel=None):
    ds = docs(source, 500, mean, seed=source)
    if parallel:
        ds = ds.map(lambda e: e, num_parallel_calls=parallel)
    return ds.repeat().pack({"tokens": ROW}, num_packing_bins=4)


def mix(parallel=None, seed=11):
    # Mean lengths 1000, 20 and 300 tokens: by elements the shares would be far off.
    sources = [packed(0, 1000, parallel), packed(1, 20, parallel), packed(2, 300, parallel)]
    return sh.sample_from_datasets(sources, WEIGHTS, seed=seed, by="tokens")


def source_and_tokens(row):
    seg = np.asarray(row["tokens_segment_ids"])
    return int(np.asarray(row["tokens"])[0]) - 1, int(np.count_nonzero(seg))


def test_token_shares_are_within_half_a_percent_of_the_weights_over_10m_tokens():
    counts = np.zeros(3, np.int64)
    it = mix().iter(0)
    while counts.sum() < 10_000_000:
        k, n = source_and_tokens(next(it))
        counts[k] += n
    shares = counts / counts.sum()
    assert np.all(np.abs(shares - WEIGHTS) < 0.005 * np.array(WEIGHTS)), shares
    # The state holds the exact count per source: the realised shares.
    assert it.get_state()["iter"]["tokens"] == counts.tolist()
    # Unpacked documents too; by elements the same weights give shares far off.
    for by, within in (("tokens", 0.005), ("elements", None)):
        raw = [docs(k, 500, mean, seed=k).repeat() for k, mean in enumerate((1000, 20, 300))]
        c = np.zeros(3, np.int64)
        for e in sh.sample_from_datasets(raw, WEIGHTS, seed=11, by=by).take(20_000):
            c[int(e["tokens"][0]) - 1] += len(e["tokens"])
        off = np.abs(c / c.sum() - WEIGHTS) / WEIGHTS
        assert (off.max() < within) if within else (off.max() > 0.5), (by, c / c.sum())


def rows(ds, k):
    return [source_and_tokens(r) + (np.asarray(r["tokens_segment_ids"]).tolist(),) for r in ds.take(k)]


def test_the_mix_is_the_same_on_any_number_of_threads_and_keyed_by_its_seed():
    one = rows(mix(), 300)
    assert rows(mix(parallel=4), 300) == one
    assert rows(mix().prefetch(8), 300) == one
    assert rows(mix(seed=12), 300) != one


def test_resume_at_random_cuts_continues_exactly():
    ds = mix()
    full = rows(ds, 400)
    rng = np.random.default_rng(5)
    for cut in sorted(rng.integers(0, 380, size=20).tolist()):
        it = ds.iter(0)
        for _ in range(cut):
            next(it)
        state = json.loads(json.dumps(it.get_state()))
        again = ds.iter(0)
        again.set_state(state)
        got = [source_and_tokens(r) + (np.asarray(r["tokens_segment_ids"]).tolist(),) for r, _ in zip(again, range(20))]
        assert got == full[cut : cut + 20], cut


def test_bad_by_or_token_feature_is_named():
    a = sh.from_arrays({"tokens": [np.ones(3, np.int64)]})
    with pytest.raises(
        sh.InvalidArgumentError,
        match=r"sample_from_datasets\(by='bytes'\): must be one of 'elements', "
        r"'tokens'",
    ):
        sh.sample_from_datasets([a], [1.0], seed=0, by="bytes")
    with pytest.raises(sh.InvalidArgumentError, match=r"token_feature=''\): must be a non-empty"):
        sh.sample_from_datasets([a], [1.0], seed=0, by="tokens", token_feature="")
    with pytest.raises(sh.SchemaError, match=r'no feature "ids" to count tokens in .*"tokens"'):
        list(sh.sample_from_datasets([a], [1.0], seed=0, by="tokens", token_feature="ids"))
    # The hint holds: the feature it names works.
    assert len(list(sh.sample_from_datasets([a], [1.0], seed=0, by="tokens", token_feature="tokens"))) == 1


def test_mix_stats_give_the_realised_shares():
    ds = mix().batch(4)
    assert sh.from_arrays({"x": np.arange(3)}).mix_stats() == []
    it = ds.iter(0)
    for _ in range(200):
        next(it)
    (report,) = ds.mix_stats()
    tokens = it.get_state()["iter"]["inner"]["tokens"]
    assert report["tokens"] == tokens and report["weights"] == WEIGHTS
    assert report["shares"] == pytest.approx([t / sum(tokens) for t in tokens])
    assert "by=tokens" in report["op"]


def test_stats_carry_the_realised_shares_of_a_mix_by_tokens():
    # stats() of a pipeline with a parallel stage over the mix: its shares under "mixes".
    ds = mix().batch(4).prefetch(2)
    for _, _ in zip(range(50), ds):
        pass
    st = ds.stats()
    assert st is not None and st["mixes"] == ds.mix_stats()
    assert st["mixes"][0]["weights"] == WEIGHTS
