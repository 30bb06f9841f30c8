"""Exact elastic resume through read -> tokenize -> pack -> mix -> batch (issue 46 item 5).

Two sources, as a language-model job has them: a token file (nanoGPT's flat uint16 ``.bin``,
windows in a global shuffle) and JSONL text, tokenized natively with the repository's BPE
fixture (testdata/tokenizer/tokenizer.json: ``<s>`` ... ``</s>`` around each document) and
packed concat-then-split, a cut document's tail carried into the next row. They are mixed by
tokens, batched, and split over ranks with ``elastic_shard``. The
global stream of batches is the mix's: batch ``start + r + jW`` is rank ``r``'s ``j``-th. A run on
4 ranks checkpointed at a random step resumes on 3 and on 6 ranks, and the global stream it gives
equals the uninterrupted run's, batch for batch, at 20 random cut points: the packer's open rows,
the mix's token counts and each source's position are all in the state.
"""

import json
from pathlib import Path

import numpy as np
import pytest

import stokehold as sh

SEQ = 64  # tokens per row
BATCH = 4  # rows per rank per step
TOKENIZER = str(Path(__file__).resolve().parents[2] / "testdata" / "tokenizer" / "tokenizer.json")
VOCAB = 2000  # the tokenizer's; the token file's ids are 3000 and up, so a row tells its source


def token_file(tmp_path):
    path = tmp_path / "train.bin"
    rng = np.random.default_rng(0)
    rng.integers(3000, 4000, size=9000, dtype=np.uint16).tofile(path)
    return str(path)


def jsonl_file(tmp_path):
    path = tmp_path / "text.jsonl"
    rng = np.random.default_rng(1)
    words = ["stoke", "hold", "token", "pack", "mix", "rank", "résumé", "naïve", "日本"]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(400):
            text = " ".join(rng.choice(words, size=int(rng.integers(1, 25))))
            print(json.dumps({"id": i, "text": text}, ensure_ascii=False), file=f)
    return str(path)


def with_segments(e):
    """A token-file window as a packed row: one document filling it."""
    n = len(e["tokens"])
    return {
        "tokens": e["tokens"],
        "tokens_segment_ids": np.ones(n, np.int32),
        "tokens_positions": np.arange(n, dtype=np.int32),
    }


def pipeline(tmp_path):
    windows = sh.read_tokens(token_file(tmp_path), seq_len=SEQ - 1, seed=1).map(with_segments)
    text = sh.read_jsonl(jsonl_file(tmp_path), fields={"text": "bytes"}).shuffle(seed=2)
    ids = text.tokenize("text", TOKENIZER, out="tokens", dtype="int64")
    rows = ids.pack({"tokens": SEQ}, mode="concat_then_split")
    return sh.sample_from_datasets([windows, rows], [0.6, 0.4], seed=3, by="tokens").batch(BATCH)


def key(batch):
    return tuple(np.asarray(batch["tokens"]).ravel().tolist()) + tuple(
        np.asarray(batch["tokens_segment_ids"]).ravel().tolist()
    )


def run_ranks(ds, world, steps=None, state=None):
    """Every rank of ``world`` takes ``steps`` batches (all if None); returns the global stream
    (step by step, rank by rank) and rank 0's state after its last step."""
    its = []
    for r in range(world):
        it = ds.elastic_shard(world, r).iter(0)
        if state is not None:
            it.set_state(json.loads(json.dumps(state)))
        its.append(it)
    # range first: zip stops on it before asking the iterator for one batch too many.
    taken = [[key(b) for _, b in zip(range(steps if steps is not None else 10**9), it)] for it in its]
    stream = [b for j in range(max(map(len, taken))) for t in taken if j < len(t) for b in [t[j]]]
    return stream, its[0].get_state()


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    ds = pipeline(tmp_path_factory.mktemp("lm"))
    return ds, [key(b) for b in ds.iter(0)]


def test_four_ranks_give_the_global_stream_of_one(lm):
    ds, full = lm
    assert len(full) > 40
    assert run_ranks(ds, 4)[0] == full
    # Both sources are in it: token-file ids are >= 3000, text ids < 2000 (the vocabulary).
    ids = np.array([t for b in full for t in b[: BATCH * SEQ]])
    assert (ids >= 3000).any() and (ids < VOCAB).any()
    # Concat-then-split cuts documents: some text row starts with the tail of one (not <s>).
    text_rows = [r for b in full for r in np.reshape(b[: BATCH * SEQ], (BATCH, SEQ)) if r[0] < VOCAB]
    assert any(r[0] != 0 for r in text_rows)


@pytest.mark.parametrize("resume_on", [3, 6])
def test_a_checkpoint_on_4_ranks_resumes_on_another_world_size_exactly(lm, resume_on):
    ds, full = lm
    steps_on_4 = -(-len(full) // 4)
    rng = np.random.default_rng(resume_on)
    for cut in rng.integers(0, steps_on_4, size=20).tolist():
        first, state = run_ranks(ds, 4, steps=cut)
        rest, _ = run_ranks(ds, resume_on, state=state)
        assert first + rest == full, (cut, resume_on)
        # Small: positions, the packer's counters, the mix's token counts; no tokens.
        assert len(json.dumps(state)) < 2048, state


def test_the_state_names_what_it_holds(lm):
    ds, full = lm
    _, state = run_ranks(ds, 4, steps=5)
    split = state["iter"]
    assert split["position"] == 20 and split["world"] == 4 and split["rank"] == 0
    mix = split["inner"]
    while "tokens" not in mix:  # batch nests its input's state
        mix = mix["inner"]
    assert len(mix["tokens"]) == 2 and sum(mix["tokens"]) > 0
