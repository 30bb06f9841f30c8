"""read_tokens (issue 46 item 1): megatron-core's order through Python, flat files, the
stokehold order's epochs and checkpoints, and the named errors."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import stokehold

TOKENS = Path(__file__).resolve().parents[2] / "testdata" / "tokens"


def test_megatron_order_equals_megatron_core_samples() -> None:
    fixture = json.loads((TOKENS / "megatron_samples.json").read_text())
    for case in fixture["cases"]:
        ds = stokehold.read_tokens(
            str(TOKENS / case["file"]), case["seq_len"], order="megatron", seed=case["seed"],
            num_samples=case["num_samples"], documents=tuple(case["documents"]),
        )
        got = [ds[i]["tokens"].tolist() for i in range(len(ds))]
        assert got == case["samples"]
    blend = fixture["blend"]
    ds = stokehold.read_tokens(
        [str(TOKENS / f) for f in blend["files"]], blend["seq_len"], order="megatron",
        seed=blend["seed"], num_samples=blend["num_samples"], weights=blend["weights"],
        size=blend["size"],
    )
    batch = next(iter(ds.batch(len(ds))))
    assert batch["tokens"].dtype == np.int64
    assert batch["tokens"].tolist() == [s for _, s in blend["samples"]]


def test_flat_files_and_the_shuffled_order_resume(tmp_path: Path) -> None:
    path = tmp_path / "train.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    seq = stokehold.read_tokens(str(path), 9, order="sequential")
    assert len(seq) == 111 and seq[3]["tokens"].tolist() == list(range(27, 37))
    ds = stokehold.read_tokens(str(path), 9, seed=4).repeat(2)
    whole = [e["tokens"].tolist() for e in ds.iter(0)]
    assert sorted(whole[:111]) == sorted(e["tokens"].tolist() for e in seq)
    assert whole[:111] != whole[111:]  # a new order in the second epoch
    it = ds.iter(0)
    for _ in range(150):
        next(it)
    state = it.get_state()
    rest = ds.iter(0)
    rest.set_state(state)
    assert [e["tokens"].tolist() for e in rest] == whole[150:]
    olmo = tmp_path / "part-0.npy"
    np.arange(1000, dtype=np.uint32).tofile(olmo)  # OLMo-core: raw, named .npy
    with pytest.raises(stokehold.InvalidArgumentError, match="dtype='uint32'"):
        stokehold.read_tokens(str(olmo), 9)
    raw = stokehold.read_tokens(str(olmo), 9, order="sequential", dtype="uint32")
    assert raw[3]["tokens"].tolist() == list(range(27, 37))


def test_bad_token_files_name_the_file_and_field(tmp_path: Path) -> None:
    idx = (TOKENS / "corpus_a.idx").read_bytes()
    binary = (TOKENS / "corpus_a.bin").read_bytes()
    (tmp_path / "short.idx").write_bytes(idx)
    (tmp_path / "short.bin").write_bytes(binary[:-2])
    with pytest.raises(stokehold.DataCorruptionError, match="short.idx.*sequence 59"):
        stokehold.read_tokens(str(tmp_path / "short"), 8)
    lie = bytearray(idx)
    lie[18:26] = (1 << 60).to_bytes(8, "little")
    (tmp_path / "lie.idx").write_bytes(bytes(lie))
    (tmp_path / "lie.bin").write_bytes(binary)
    with pytest.raises(stokehold.DataCorruptionError, match="lie.idx.*sequence count"):
        stokehold.read_tokens(str(tmp_path / "lie.bin"), 8)
    with pytest.raises(stokehold.InvalidArgumentError, match="order"):
        stokehold.read_tokens(str(TOKENS / "corpus_a"), 8, order="random")
    with pytest.raises(stokehold.InvalidArgumentError, match="2\\*\\*32"):
        stokehold.read_tokens(str(TOKENS / "corpus_a"), 8, order="megatron", seed=2**40)
    assert os.path.exists(TOKENS / "corpus_a.bin")
