"""bench/tokens: token pipelines for language models (issue 46), side by side: (a) token-file
windows with a global shuffle vs megatron-core's GPTDataset + DataLoader and a numpy memmap loop;
(b) JSONL -> tokenize -> pack (concat-then-split) -> batch vs HF datasets.map(tokenizer) + Grain's
ConcatThenSplit, and tokenization alone vs the Python tokenizers' encode_batch; (c) the index
build of many token files vs megatron-core's.

    python bench/tokens/bench.py [--quick] --json OUT      (from the repository root)

Data (seeded, made here with numpy under $BENCH_TMPDIR; the Megatron files are written in the
MMIDIDX layout that megatron-core's IndexedDatasetBuilder writes, uint16 tokens, which
megatron-core then reads): documents of 50-2000 random token ids.
(a) one Megatron file of 100 M tokens (--quick: 4 M); windows of seq_len 2048 (+1 label token),
    batches of 8; one warm-up epoch (none in --quick) then 3 timed epochs, each system in its own
    process. Figures: tokens/s (seq_len per window) and tokens per CPU-second (user + system of
    the process and its joined workers: the "per core" figure of issue 46).
    * stokehold: read_tokens(prefix, 2048) (order "shuffle": every window of the file, globally
      shuffled, a new order each epoch) -> batch(8) -> prefetch(2); stokehold/order=megatron:
      order="megatron" (megatron-core's GPTDataset order, indices built at open).
    * megatron-core (0.19, CPython 3.13 venv): GPTDataset(IndexedDataset(prefix), one epoch,
      random_seed 0, create_attention_mask=False (its flash-attention setting; the mask would be
      [1, 2048, 2048] per sample), no position / mask resets: its masks and position ids are
      built once and cached) -> torch DataLoader(batch_size=8, num_workers=2), new workers each
      epoch so that their CPU time is counted; its index build happens before the timed epochs.
    * numpy memmap: np.memmap of the .bin, a numpy permutation of the window starts per epoch,
      batches np.stack'ed and cast to int64, one thread (the nanoGPT-style loop).
(b) a JSONL file of 20,000 documents of 200-4000 characters of words, some non-ASCII (--quick:
    1,000); a BPE tokenizer (vocab 8192) trained here with the tokenizers package. Each run is
    one pass from the JSONL file (3 runs, each from scratch, no warm-up).
    * pack config: rows of 2048 tokens, batches of 8, tokens/s = rows x 2048.
      - stokehold: read_jsonl(path, ["text"]) -> tokenize("text", tokenizer.json) ->
        pack({"text": 2048}, concat-then-split) -> batch(8) -> prefetch(2).
      - datasets+grain: load_dataset("json") (a new cache folder each run) -> map(encode_batch,
        batched=True) -> grain MapDataset.source -> to_iter_dataset ->
        ConcatThenSplitIterDataset({"text": 2048}) -> batch(8).
    * tokenize config: documents/s of read + tokenize alone (no packing), batches of 256.
      - stokehold: read_jsonl -> tokenize -> batch(256) -> prefetch(2).
      - tokenizers: json.loads of each line and Tokenizer.encode_batch per 256 lines (its Rust
        threads on every core).
(c) 2,000 Megatron files (--quick: 200) of 100 documents each, seq_len 512, a blend weighted by
    file size and sized to one epoch of its windows; 3 runs, each from scratch.
    * stokehold: read_tokens(files, 512, order="megatron", weights, size, num_samples per file as
      megatron's builder sizes them: ceil(weight x size x 1.005)) and len(): the open builds
      every index.
    * megatron-core: BlendedMegatronDatasetBuilder(GPTDataset, [size, 0, 0], blend=(files,
      weights), split "1,0,0", num_dataset_builder_threads=2, a new path_to_cache).build().
Goals (issue 46): (a) >= 2x megatron-core's loader, (b) >= 1.5x datasets + Grain and tokenize
>= 1x tokenizers' encode_batch, (c) 2,000 files in <= 60 s on the 2-core machine.
"""

import json
import math
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import children, rows  # noqa: E402

RUNS = 3
SEQ_A, BATCH_A = 2048, 8
SEQ_B, BATCH_B, BATCH_TOK = 2048, 8, 256
SEQ_C = 512
CORES = min(2, os.cpu_count() or 1)
WA = "token-file windows, global shuffle"
WB = "JSONL -> tokenize -> pack -> batch"
WC = "token-file index build"
NO_TOKENIZE = ("stokehold's tokenize / pack(concat_then_split) is not in this build yet "
               "(issue 46, being built): this row fills in once it lands")
# megatron's index layout (megatron/core/datasets/indexed_dataset.py): header, version 1, dtype
# code (8 = uint16), then sequence lengths int32, sequence pointers int64, document indices int64.
MMIDIDX, UINT16 = b"MMIDIDX\x00\x00", 8


# ---------------------------------------------------------------- data
def write_megatron(prefix, lengths, rng):
    """A Megatron indexed dataset (prefix.bin / prefix.idx) of one document per length."""
    import numpy as np

    lengths = np.asarray(lengths, dtype=np.int32)
    rng.integers(1, 50_000, int(lengths.sum()), dtype=np.uint16).tofile(prefix + ".bin")
    pointers = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1].astype(np.int64) * 2, out=pointers[1:])
    with open(prefix + ".idx", "wb") as f:
        f.write(MMIDIDX + struct.pack("<Q", 1) + struct.pack("<B", UINT16))
        f.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(lengths) + 1))
        f.write(lengths.tobytes() + pointers.tobytes())
        f.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
    return int(lengths.sum())


def corpus_a(folder, tokens):
    import numpy as np

    rng = np.random.default_rng(46)
    lengths = rng.integers(50, 2001, tokens // 1000 + 1)
    lengths = lengths[: int(np.searchsorted(np.cumsum(lengths), tokens)) + 1]
    prefix = os.path.join(folder, "corpus_a")
    return prefix, write_megatron(prefix, lengths, rng)


def corpus_c(folder, files):
    import numpy as np

    rng = np.random.default_rng(4646)
    d = os.path.join(folder, "many")
    os.makedirs(d)
    prefixes, sizes = [], []
    for i in range(files):
        prefix = os.path.join(d, f"part-{i:05d}")
        sizes.append(write_megatron(prefix, rng.integers(20, 500, 100), rng))
        prefixes.append(prefix)
    return prefixes, sizes


def text_corpus(folder, docs):
    """A JSONL file of documents of words (some non-ASCII) and a BPE tokenizer trained on them."""
    import numpy as np
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    rng = np.random.default_rng(464646)
    letters = list("abcdefghijklmnopqrstuvwxyz") + list("éüßçñøåœ") + ["ж", "λ", "中", "😀"]
    weights = np.array([8.0] * 26 + [0.3] * 8 + [0.2] * 4)
    weights /= weights.sum()
    words = ["".join(rng.choice(letters, int(rng.integers(1, 10)), p=weights))
             for _ in range(5000)]
    path = os.path.join(folder, "docs.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i in range(docs):
            n = int(rng.integers(30, 600))
            text = " ".join(words[j] for j in rng.zipf(1.3, n) % len(words))
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=8192, special_tokens=["[UNK]", "<eos>"],
                                  show_progress=False)
    with open(path, encoding="utf-8") as f:
        tok.train_from_iterator((json.loads(line)["text"] for _, line in zip(range(2000), f)),
                                trainer)
    tok_path = os.path.join(folder, "tokenizer.json")
    tok.save(tok_path)
    return path, tok_path


# ---------------------------------------------------------------- children
def megatron_modules():
    import warnings

    warnings.filterwarnings("ignore")
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split
    return BlendedMegatronDatasetBuilder, GPTDataset, GPTDatasetConfig, IndexedDataset, Split


class _Tok:
    """The tokenizer fields GPTDataset reads (eod for its masks, pad for padding)."""
    eod = 0
    pad = 0
    vocab_size = 50_001
    unique_identifiers = {"class": "bench"}


def megatron_config(cfg_cls, seq_len, **kw):
    return cfg_cls(random_seed=0, sequence_length=seq_len, tokenizer=_Tok(),
                   reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
                   create_attention_mask=False, **kw)


def epochs(make, a, per_item):
    """{"runs": tokens/s, "cpu": tokens per CPU-second} of the timed epochs."""
    secs, cpus, items = children.timed(make, RUNS, a.get("warmup", 0))
    return {"runs": [k * per_item / s for k, s in zip(items, secs)],
            "cpu": [k * per_item / c for k, c in zip(items, cpus)], "items": items}


def child_a(system, a):
    if system.startswith("stokehold"):
        import stokehold as sh

        order = "megatron" if system.endswith("megatron") else "shuffle"
        ds = sh.read_tokens(a["prefix"], SEQ_A, order=order, seed=0).batch(BATCH_A).prefetch(2)
        return epochs(lambda e: (len(b["tokens"]) for b in ds.iter(epoch=e)), a, SEQ_A)
    if system == "numpy memmap":
        import numpy as np

        mm = np.memmap(a["prefix"] + ".bin", dtype=np.uint16, mode="r")
        starts = np.arange((len(mm) - 1) // SEQ_A, dtype=np.int64) * SEQ_A

        def run(e):
            perm = np.random.default_rng(e).permutation(starts)
            for i in range(0, len(perm), BATCH_A):
                b = np.stack([mm[s:s + SEQ_A + 1] for s in perm[i:i + BATCH_A]]).astype(np.int64)
                yield len(b)
        return epochs(run, a, SEQ_A)
    import numpy as np
    import torch

    _, GPTDataset, GPTDatasetConfig, IndexedDataset, Split = megatron_modules()
    cfg = megatron_config(GPTDatasetConfig, SEQ_A, split="1")
    cfg.mock = True  # its indices built in memory, no cache folder beside the data
    indexed = IndexedDataset(a["prefix"])
    ds = GPTDataset(indexed, a["prefix"], np.arange(len(indexed.document_indices) - 1,
                                                    dtype=np.int32), None, Split.train, cfg)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH_A, num_workers=CORES)
    got = epochs(lambda e: (len(b["tokens"]) for b in loader), a, SEQ_A)
    got["note"] = (f"megatron-core 0.19 GPTDataset, DataLoader(num_workers={CORES}), "
                   "create_attention_mask=False")
    return got


def child_b(system, a):
    import numpy as np

    if system.startswith("stokehold"):
        import stokehold as sh

        if not hasattr(sh.Dataset, "tokenize"):
            raise children.Unavailable(NO_TOKENIZE)
        try:
            ds = sh.read_jsonl(a["path"], fields={"text": "bytes"}).tokenize("text", a["tok"])
            if a["pack"]:
                ds = ds.pack({"text": SEQ_B}, mode="concat_then_split").batch(BATCH_B)
            else:
                ds = ds.batch(BATCH_TOK)
            ds = ds.prefetch(2)
        except (TypeError, ValueError) as e:
            raise children.Unavailable(f"{NO_TOKENIZE} ({type(e).__name__}: {e})") from None
        make = lambda e: (len(b["text"]) for b in ds.iter(epoch=e))  # noqa: E731
    elif system == "tokenizers":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(a["tok"])

        def make(_e):
            with open(a["path"], encoding="utf-8") as f:
                lines = []
                for line in f:
                    lines.append(json.loads(line)["text"])
                    if len(lines) == BATCH_TOK:
                        yield len(tok.encode_batch(lines))
                        lines = []
                if lines:
                    yield len(tok.encode_batch(lines))
    else:
        import datasets
        import grain
        import grain.experimental as ge
        from tokenizers import Tokenizer

        datasets.disable_progress_bars()
        tok = Tokenizer.from_file(a["tok"])

        def encode(batch):
            return {"text": [e.ids for e in tok.encode_batch(batch["text"])]}

        def make(_e):
            cache = tempfile.mkdtemp(prefix="hf-", dir=a["tmp"])
            ds = datasets.load_dataset("json", data_files=a["path"], split="train",
                                       cache_dir=cache)
            ds = ds.map(encode, batched=True, remove_columns=["id"])
            it = (grain.MapDataset.source(ds)
                  .map(lambda e: {"text": np.asarray(e["text"], np.int32)}).to_iter_dataset())
            it = ge.ConcatThenSplitIterDataset(it, length_struct={"text": SEQ_B})
            for b in it.batch(BATCH_B):
                yield len(b["text"])
            shutil.rmtree(cache, ignore_errors=True)
    got = epochs(make, a, SEQ_B if a["pack"] else 1)
    if system == "datasets+grain":
        got["note"] = ("load_dataset + map into a new cache each run (one pass from the JSONL "
                       "file); the tokenizers Tokenizer in map(batched=True), one process")
    return got


def child_c(system, a):
    if system == "stokehold":
        import stokehold as sh

        def build():
            return len(sh.read_tokens(a["files"], SEQ_C, order="megatron", seed=0,
                                      num_samples=a["per_file"], weights=a["weights"],
                                      size=a["size"]))
    else:
        Builder, GPTDataset, GPTDatasetConfig, _, _ = megatron_modules()

        def build():
            cache = tempfile.mkdtemp(prefix="mcache-", dir=a["tmp"])
            cfg = megatron_config(GPTDatasetConfig, SEQ_C, blend=(a["prefixes"], a["weights"]),
                                  split="1,0,0", path_to_cache=cache,
                                  num_dataset_builder_threads=CORES)
            train, _, _ = Builder(GPTDataset, [a["size"], 0, 0], lambda: True, cfg).build()
            shutil.rmtree(cache, ignore_errors=True)
            return len(train)
    secs, lens = [], []
    for _ in range(RUNS):
        t = time.perf_counter()
        lens.append(build())
        secs.append(time.perf_counter() - t)
    return {"time": secs, "note": f"the built dataset holds {lens[0]} samples"}


def run_system(system, a):
    return {"a": child_a, "b": child_b, "c": child_c}[a["part"]](system, a)


# ---------------------------------------------------------------- driver
def megatron_run(a):
    py, why = children.python313()
    if py is None:
        return {"error": f"megatron-core 0.19 requires Python >= 3.12: {why}"}
    return children.run(__file__, "megatron-core", a, timeout=900, python=py)


def part_a(tmp, quick):
    prefix, tokens = corpus_a(tmp, 4_000_000 if quick else 100_000_000)
    config = f"{tokens // 1_000_000} M tokens, 1 Megatron file, seq_len {SEQ_A}, batch {BATCH_A}"
    a = {"part": "a", "prefix": prefix, "warmup": 0 if quick else 1}
    metrics = [("throughput", "runs", "tokens/s", "higher"),
               ("throughput per core", "cpu", "tokens/CPU-s", "higher")]
    out = []
    for system in ("stokehold", "stokehold/order=megatron", "numpy memmap", "megatron-core"):
        got = megatron_run(a) if system == "megatron-core" else children.run(
            __file__, system, a, timeout=600)
        out += children.rows_of(WA, system, config, got, metrics)
    return out


def part_b(tmp, quick):
    docs = 1_000 if quick else 20_000
    path, tok = text_corpus(tmp, docs)
    out = []
    for pack in (True, False):
        if pack:
            config = f"{docs} JSONL documents, BPE 8192, rows of {SEQ_B}, batch {BATCH_B}"
            systems, unit = ("stokehold", "datasets+grain"), "tokens"
        else:
            config = f"tokenize only: {docs} JSONL documents, BPE 8192, batch {BATCH_TOK}"
            systems, unit = ("stokehold", "tokenizers"), "docs"
        a = {"part": "b", "path": path, "tok": tok, "pack": pack, "tmp": tmp}
        for system in systems:
            got = children.run(__file__, system, a, timeout=600)
            out += children.rows_of(WB, system, config, got, [
                ("throughput", "runs", f"{unit}/s", "higher"),
                ("throughput per core", "cpu", f"{unit}/CPU-s", "higher")])
    return out


def part_c(tmp, quick):
    prefixes, sizes = corpus_c(tmp, 200 if quick else 2000)
    total = sum(sizes)
    weights = [s / total for s in sizes]
    size = sum((s - 1) // SEQ_C for s in sizes)
    per_file = [math.ceil(w * size * 1.005) for w in weights]
    config = (f"{len(prefixes)} Megatron files ({total // 1_000_000} M tokens), seq_len {SEQ_C}, "
              f"blend of {size} samples")
    a = {"part": "c", "prefixes": prefixes, "files": [p + ".bin" for p in prefixes],
         "weights": weights, "size": size, "per_file": per_file, "tmp": tmp}
    out = []
    for system in ("stokehold", "megatron-core"):
        got = megatron_run(a) if system == "megatron-core" else children.run(
            __file__, system, a, timeout=600)
        out += children.rows_of(WC, system, config, got, [("time", "time", "s", "lower")])
    return out


def main():
    if children.is_child():
        children.child_main(run_system)
        return
    args = rows.workload_args(__doc__.splitlines()[0]).parse_args()
    tmp = tempfile.mkdtemp(prefix="tokens-bench-", dir=rows.tmp_root())
    out = []
    try:
        for part in (part_a, part_b, part_c):
            t = time.perf_counter()
            out += part(tmp, args.quick)
            print(f"{part.__name__}: {time.perf_counter() - t:.0f} s", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows.write_json(args.json, out)
    per_core = [r for r in out if r["metric"] == "throughput per core"]
    rows.print_ratios([r for r in per_core if r["workload"] == WA], "issue 46 a, per core", 2)
    rows.print_ratios([r for r in per_core if r["workload"] == WB and "only" not in r["config"]],
                      "issue 46 b, per core", 1.5)
    rows.print_ratios([r for r in per_core if r["workload"] == WB and "only" in r["config"]],
                      "issue 46 b, tokenize, per core", 1)
    for r in out:
        if r["workload"] == WC and r["system"] == "stokehold" and r["value"]:
            print(f"(issue 46 c) {r['config']}: {r['value']:.1f} s (goal <= 60 s for 2,000 files)",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
