"""A small GPT trained on stokehold's token pipeline, checkpointing the model and the pipeline.

Run it with the package built into ``.venv`` (``maturin develop --release``, as ``make test``
does)::

    .venv/bin/python python/examples/lm_train.py /tmp/lm 200

The data is the two kinds a language-model job reads: a token file (nanoGPT's flat uint16
``.bin``; a Megatron ``.bin``/``.idx`` prefix reads the same way, ``order="megatron"`` for
megatron-core's sample order) in windows of ``SEQ`` tokens, and JSONL text, tokenized natively
(``tokenize`` with a ``tokenizer.json``: here the repository's small BPE fixture, trained locally
by ``testdata/tokenizer/make_fixture.py``, which puts ``<s>`` and ``</s>`` around each document),
packed concat-then-split into rows of ``SEQ`` with segment ids and positions (document
boundaries; a cut document's tail starts the next row), then the two mixed 60/40 by tokens and
batched. ``elastic_shard(world, rank)`` splits the global stream over
data-parallel ranks; a checkpoint restores on another number of ranks (see the guide's
"Language-model data").

Every ``checkpoint_every`` steps the model, the optimizer and the pipeline's state (a small JSON
object) are written together; ``resume=True`` loads them and continues, so the losses are the
uninterrupted run's step for step (``python/tests/test_examples_lm.py`` checks it).

JAX rather than torch: jax is in the project's test environment (``.venv``) and torch is not, so
the test that shows this example trains and resumes runs wherever the project's tests run. The
pipeline yields numpy batches, whatever the framework; ``stokehold.torch.as_torch`` hands them to
a torch ``DataLoader``.
"""

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import jax
import jax.numpy as jnp
import numpy as np

import stokehold as sh

SEQ = 64  # tokens per row
BATCH = 8  # rows per step and rank
TOKENIZER = str(Path(__file__).resolve().parents[2] / "testdata" / "tokenizer" / "tokenizer.json")
VOCAB = 2200  # the tokenizer's 2,000 ids, then the token file's 2000..2199
DIM, HEADS = 64, 4
LR = 3e-3

Params = Dict[str, jax.Array]


# ---- data -------------------------------------------------------------------------------------


def write_data(workdir: str) -> Tuple[str, str]:
    """A token file and a JSONL file of text in ``workdir`` (made once)."""
    os.makedirs(workdir, exist_ok=True)
    tokens, text = os.path.join(workdir, "train.bin"), os.path.join(workdir, "text.jsonl")
    if not os.path.exists(tokens):
        # Learnable structure: runs counting up by a step of 1 to 5, as a corpus has patterns.
        rng = np.random.default_rng(0)
        runs = [2000 + (rng.integers(0, 100) + rng.integers(1, 6) * np.arange(40)) % 200 for _ in range(500)]
        np.concatenate(runs).astype(np.uint16).tofile(tokens)
    if not os.path.exists(text):
        rng = np.random.default_rng(1)
        words = ["the", "token", "pipeline", "packs", "mixes", "and", "resumes", "exactly"]
        with open(text, "w", encoding="utf-8") as f:
            for i in range(2000):
                line = " ".join(rng.choice(words, size=int(rng.integers(2, 12))))
                print(json.dumps({"id": i, "text": line}), file=f)
    return tokens, text


def as_packed_row(e: Dict[str, Any]) -> Dict[str, np.ndarray]:
    """A token-file window as a packed row: one document filling it."""
    n = len(e["tokens"])
    return {
        "tokens": e["tokens"],
        "tokens_segment_ids": np.ones(n, np.int32),
        "tokens_positions": np.arange(n, dtype=np.int32),
    }


def pipeline(tokens: str, text: str, world: int = 1, rank: int = 0) -> sh.Dataset:
    """Token file + JSONL -> tokenize -> pack -> mix by tokens -> batch -> this rank's part."""
    windows = sh.read_tokens(tokens, seq_len=SEQ - 1, seed=1).repeat().map(as_packed_row)
    docs = sh.read_jsonl(text, fields={"text": "bytes"}).shuffle(seed=2).repeat()
    ids = docs.tokenize("text", TOKENIZER, out="tokens", dtype="int64")
    rows = ids.pack({"tokens": SEQ}, mode="concat_then_split")
    mix = sh.sample_from_datasets([windows, rows], [0.6, 0.4], seed=3, by="tokens")
    return mix.batch(BATCH).elastic_shard(world, rank, policy="drop")


# ---- model ------------------------------------------------------------------------------------


def init(key: jax.Array) -> Params:
    ks = jax.random.split(key, 6)
    n = lambda k, *shape: jax.random.normal(k, shape) * 0.02  # noqa: E731
    return {
        "embed": n(ks[0], VOCAB, DIM),
        "pos": n(ks[1], SEQ, DIM),
        "qkv": n(ks[2], DIM, 3 * DIM),
        "proj": n(ks[3], DIM, DIM),
        "up": n(ks[4], DIM, 4 * DIM),
        "down": n(ks[5], 4 * DIM, DIM),
    }


def norm(x: jax.Array) -> jax.Array:
    return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)


def logits(p: Params, tokens: jax.Array, seg: jax.Array, pos: jax.Array) -> jax.Array:
    """One transformer block; attention stays inside a document (segment ids) and is causal."""
    x = p["embed"][tokens] + p["pos"][pos]
    b, t, _ = x.shape
    q, k, v = jnp.split(norm(x) @ p["qkv"], 3, axis=-1)
    heads = lambda a: a.reshape(b, t, HEADS, DIM // HEADS).transpose(0, 2, 1, 3)  # noqa: E731
    att = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.sqrt(DIM // HEADS)
    same_doc = (seg[:, :, None] == seg[:, None, :]) & jnp.tril(jnp.ones((t, t), bool))
    att = jnp.where(same_doc[:, None], att, -1e9)
    y = (jax.nn.softmax(att, -1) @ heads(v)).transpose(0, 2, 1, 3).reshape(b, t, DIM)
    x = x + y @ p["proj"]
    x = x + jax.nn.gelu(norm(x) @ p["up"]) @ p["down"]
    return norm(x) @ p["embed"].T


def loss_fn(p: Params, tokens: jax.Array, seg: jax.Array, pos: jax.Array) -> jax.Array:
    """Next-token cross-entropy inside each document (not across a boundary, not on padding)."""
    lg = logits(p, tokens[:, :-1], seg[:, :-1], pos[:, :-1])
    lp = jax.nn.log_softmax(lg, -1)
    nll = -jnp.take_along_axis(lp, tokens[:, 1:, None], -1)[..., 0]
    keep = (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] != 0)
    return (nll * keep).sum() / jnp.maximum(keep.sum(), 1)


@jax.jit
def step(p: Params, m: Params, v: Params, t: jax.Array, batch: Tuple[jax.Array, ...]) -> Any:
    """One Adam step."""
    loss, g = jax.value_and_grad(loss_fn)(p, *batch)
    m = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
    v = jax.tree.map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
    c1, c2 = 1 - 0.9 ** (t + 1), 1 - 0.999 ** (t + 1)
    p = jax.tree.map(lambda w, a, b: w - LR * (a / c1) / (jnp.sqrt(b / c2) + 1e-8), p, m, v)
    return p, m, v, loss


# ---- training loop ----------------------------------------------------------------------------


def save(path: str, tree: Dict[str, Params], t: int, data_state: Dict[str, Any]) -> None:
    """Model, optimizer and pipeline state, written together (the JSON last, atomically)."""
    flat = {f"{k}/{n}": np.asarray(a) for k, ps in tree.items() for n, a in ps.items()}
    np.savez(path + ".npz", **flat)
    with open(path + ".json.tmp", "w") as f:
        json.dump({"step": t, "data": data_state}, f)
    os.replace(path + ".json.tmp", path + ".json")


def load(path: str) -> Tuple[Dict[str, Params], int, Dict[str, Any]]:
    with open(path + ".json") as f:
        meta = json.load(f)
    tree: Dict[str, Params] = {"p": {}, "m": {}, "v": {}}
    with np.load(path + ".npz") as z:
        for name in z.files:
            k, n = name.split("/")
            tree[k][n] = jnp.asarray(z[name])
    return tree, meta["step"], meta["data"]


def train(
    workdir: str, steps: int, checkpoint_every: int = 0, resume: bool = False, log: Callable[[str], None] = print
) -> List[float]:
    """Trains to ``steps``; returns the losses of the steps it ran."""
    tokens, text = write_data(workdir)
    it = pipeline(tokens, text).iter(0)
    ckpt = os.path.join(workdir, "ckpt")
    if resume:
        tree, start, data_state = load(ckpt)
        it.set_state(data_state)
        p, m, v = tree["p"], tree["m"], tree["v"]
    else:
        p, start = init(jax.random.PRNGKey(0)), 0
        m = v = jax.tree.map(jnp.zeros_like, p)
    losses = []
    for t in range(start, steps):
        b = next(it)
        batch = tuple(jnp.asarray(b[k]) for k in ("tokens", "tokens_segment_ids", "tokens_positions"))
        p, m, v, loss = step(p, m, v, jnp.asarray(t), batch)
        losses.append(float(loss))
        if t % 20 == 0:
            log(f"step {t}: loss {losses[-1]:.3f}")
        if checkpoint_every and (t + 1) % checkpoint_every == 0:
            save(ckpt, {"p": p, "m": m, "v": v}, t + 1, it.get_state())
    return losses


if __name__ == "__main__":
    train(
        sys.argv[1] if len(sys.argv) > 1 else "/tmp/stokehold-lm",
        int(sys.argv[2]) if len(sys.argv) > 2 else 200,
        checkpoint_every=50,
    )
