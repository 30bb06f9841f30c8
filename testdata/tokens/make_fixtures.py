"""Writes the Megatron token-file fixtures and records megatron-core's GPTDataset samples.

Run with megatron-core from PyPI in a venv outside the repository:

    python3 -m venv /tmp/mcvenv && /tmp/mcvenv/bin/pip install numpy
    /tmp/mcvenv/bin/pip install --no-deps megatron-core    # 0.16.1 when these were made
    /tmp/mcvenv/bin/python testdata/tokens/make_fixtures.py

megatron-core's package __init__ imports all of its model code, which needs torch; its dataset
modules use torch only to check torch.distributed and to turn a sample into a tensor. So this
script loads `megatron.core.datasets` with the package __init__ skipped and a stand-in `torch`
whose distributed is not initialized. Everything recorded is computed by megatron-core's own code:
IndexedDatasetBuilder writes the .bin/.idx, GPTDataset builds its document / sample / shuffle
indices (numpy RandomState and the compiled helpers_cpp.build_sample_idx), BlendedDataset its
blending indices (helpers_cpp.build_blending_indices), and the samples are
GPTDataset._query_document_sample_shuffle_indices (the token ids before they become a tensor).
"""

import importlib.util
import json
import os
import sys
import types

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))


def _stub_modules() -> None:
    torch = types.ModuleType("torch")
    dist = types.ModuleType("torch.distributed")
    dist.is_initialized = lambda: False  # type: ignore[attr-defined]
    dist.get_rank = lambda: 0  # type: ignore[attr-defined]
    torch.distributed = dist  # type: ignore[attr-defined]
    torch.Tensor = object  # type: ignore[attr-defined]
    data = types.ModuleType("torch.utils.data")
    data.Dataset = object  # type: ignore[attr-defined]
    torch.utils = types.SimpleNamespace(data=data)  # type: ignore[attr-defined]
    sys.modules["torch"] = torch
    sys.modules["torch.distributed"] = dist
    spec = importlib.util.find_spec("megatron")
    assert spec is not None and spec.submodule_search_locations
    root = list(spec.submodule_search_locations)[0]
    for name, path in [("megatron", root), ("megatron.core", os.path.join(root, "core"))]:
        m = types.ModuleType(name)
        m.__path__ = [path]  # type: ignore[attr-defined]
        sys.modules[name] = m
    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = lambda *a, **k: None  # type: ignore[attr-defined]
    sys.modules["megatron.core.utils"] = utils
    tok = types.ModuleType("megatron.core.tokenizers")
    tok.MegatronTokenizerBase = object  # type: ignore[attr-defined]
    sys.modules["megatron.core.tokenizers"] = tok


_stub_modules()

from megatron.core.datasets.blended_dataset import BlendedDataset  # noqa: E402
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder  # noqa: E402
from megatron.core.datasets.utils import Split  # noqa: E402


class _Tok:
    eod = 0
    pad = 0
    vocab_size = 50_001
    unique_identifiers = {"class": "fixture"}


def write_corpus(prefix: str, dtype: type, n_docs: int, seed: int) -> None:
    rng = numpy.random.default_rng(seed)
    b = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    hi = int(min(numpy.iinfo(dtype).max, 50_000))
    for _ in range(n_docs):
        n = int(rng.integers(1, 40))
        ids = numpy.asarray(rng.integers(1, hi, n), dtype=dtype)
        b.add_item(types.SimpleNamespace(numpy=lambda ids=ids: ids))  # it takes a torch tensor
        b.end_document()
    b.finalize(prefix + ".idx")


def config(seed: int, seq_len: int) -> GPTDatasetConfig:
    return GPTDatasetConfig(
        random_seed=seed,
        sequence_length=seq_len,
        blend=None,
        split="1",
        tokenizer=_Tok(),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        path_to_cache=None,
    )


def gpt(prefix: str, seed: int, seq_len: int, num_samples, docs, split=Split.train):
    ds = IndexedDataset(prefix)
    cfg = config(seed, seq_len)
    cfg.mock = True  # no cache folder beside the fixture; the indices are built in memory
    return GPTDataset(ds, prefix, numpy.asarray(docs, numpy.int32), num_samples, split, cfg)


def samples(ds) -> list:
    return [ds._query_document_sample_shuffle_indices(i)[0].tolist() for i in range(len(ds))]


def main() -> None:
    a = os.path.join(HERE, "corpus_a")
    b = os.path.join(HERE, "corpus_b")
    write_corpus(a, numpy.uint16, 60, 1)
    write_corpus(b, numpy.int32, 40, 2)
    n_a = len(IndexedDataset(a))
    cases = []
    settings = [
        # (file, seed, seq_len, num_samples, first doc, end doc, split)
        ("corpus_a", 1234, 16, None, 0, n_a, "train"),
        ("corpus_a", 7, 33, 200, 0, n_a, "train"),  # several epochs, a whole final epoch
        ("corpus_a", 99, 8, 150, 0, n_a, "train"),  # final epoch small: shuffled separately
        ("corpus_a", 5, 12, 40, 48, n_a, "valid"),  # a split: documents 48..60
        ("corpus_b", 3, 20, 75, 0, 40, "train"),
    ]
    for name, seed, seq_len, num, lo, hi, split in settings:
        ds = gpt(os.path.join(HERE, name), seed, seq_len, num, range(lo, hi), Split[split])
        cases.append({
            "file": name, "seed": seed, "seq_len": seq_len, "num_samples": num,
            "documents": [lo, hi], "split": split, "samples": samples(ds),
        })
    parts = [gpt(a, 11, 16, 60, range(n_a)), gpt(b, 11, 16, 50, range(40))]
    weights = [0.6, 0.4]
    blend = BlendedDataset(parts, weights, 100, parts[0].config)
    blended = []
    for i in range(len(blend)):
        d, s = int(blend.dataset_index[i]), int(blend.dataset_sample_index[i])
        blended.append([d, parts[d]._query_document_sample_shuffle_indices(s)[0].tolist()])
    # numpy's legacy RandomState(seed).shuffle, which orders megatron's indices, on its own.
    shuffles = []
    for seed, n in [(0, 1), (0, 2), (1, 10), (2**32 - 1, 1000), (12345, 3000)]:
        perm = numpy.arange(n, dtype=numpy.int64)
        numpy.random.RandomState(seed).shuffle(perm)
        shuffles.append({"seed": seed, "n": n, "perm": perm.tolist()})
    out = {
        "numpy_shuffles": shuffles,
        "made_by": "testdata/tokens/make_fixtures.py with megatron-core "
        + __import__("importlib.metadata").metadata.version("megatron-core")
        + ", numpy " + numpy.__version__,
        "cases": cases,
        "blend": {"files": ["corpus_a", "corpus_b"], "seed": 11, "seq_len": 16,
                  "num_samples": [60, 50], "weights": weights, "size": 100, "samples": blended},
    }
    with open(os.path.join(HERE, "megatron_samples.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
