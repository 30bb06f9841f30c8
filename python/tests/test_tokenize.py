"""tokenize: ids equal to the Python ``tokenizers`` package's over 10,000 documents (a BPE
tokenizer trained by testdata/tokenizer/make_fixture.py, which also wrote the expected ids; the
package itself is not a test dependency), options, batches, threads and errors."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import stokehold as sh

FIXTURE = Path(__file__).resolve().parents[2] / "testdata" / "tokenizer"
TOKENIZER = str(FIXTURE / "tokenizer.json")


def _documents():
    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE / "make_fixture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.documents()


DOCS = _documents()
EXPECTED = np.load(FIXTURE / "expected.npz")


def expected(name, n=None):
    ids, splits = EXPECTED[f"{name}_ids" if name else "ids"], EXPECTED[f"{name}_splits" if name else "splits"]
    n = len(splits) - 1 if n is None else n
    return [ids[splits[i] : splits[i + 1]].astype(np.int64).tolist() for i in range(n)]


def texts(n=None):
    docs = DOCS if n is None else DOCS[:n]
    return sh.from_arrays({"text": np.array([d.encode() for d in docs], dtype=object)})


def test_ids_equal_the_tokenizers_package_over_10000_documents_with_unicode():
    want = expected(None)
    assert len(want) == 10_000 and any(not d.isascii() for d in DOCS)
    got = [e["text"].tolist() for e in texts().tokenize("text", TOKENIZER, num_parallel_calls=4)]
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{len(bad)} documents differ, first {bad[0]}: {DOCS[bad[0]]!r}"
    assert len(got) == len(want)


def test_batches_are_encoded_as_ragged_rows_equal_to_one_by_one():
    want = expected(None, 1000)
    batches = list(texts(1000).batch(64).tokenize("text", TOKENIZER, out="ids"))
    assert isinstance(batches[0]["ids"], sh.Ragged)
    got = [row.tolist() for b in batches for row in b["ids"]]
    assert got == want
    assert batches[0]["text"].shape == (64,), "out= keeps the text"


def test_special_tokens_bos_eos_truncation_and_dtype():
    plain = expected("plain", 1000)
    got = [e["text"].tolist() for e in texts(1000).tokenize("text", TOKENIZER, add_special_tokens=False)]
    assert got == plain
    for side in ("right", "left"):
        got = [e["text"].tolist() for e in texts(1000).tokenize("text", TOKENIZER, max_length=8, truncation_side=side)]
        assert got == expected(side, 1000), side
    # bos / eos go around the tokenizer's ids; max_length counts them, and keeps the EOS.
    got = [
        e["text"]
        for e in texts(300).tokenize(
            "text", TOKENIZER, add_special_tokens=False, bos_id=7, eos_id=3, max_length=10, dtype="int64"
        )
    ]
    assert got[0].dtype == np.int64
    for g, p in zip(got, plain):
        assert g.tolist() == [7] + p[:8] + [3]


def test_a_tokenizers_object_or_json_text_works_as_the_file_does():
    text = Path(TOKENIZER).read_text()

    class Like:
        def to_str(self):
            return text

    want = expected(None, 50)
    for source in (text, Like(), Path(TOKENIZER)):
        got = [e["text"].tolist() for e in texts(50).tokenize("text", source)]
        assert got == want


def test_tokenize_then_pack_concat_then_split_keeps_random_access_and_resumes():
    ds = texts(500).tokenize("text", TOKENIZER, eos_id=3)
    assert len(ds) == 500 and ds[7]["text"].tolist() == expected(None, 8)[7] + [3]
    packed = ds.pack({"text": 64}, mode="concat_then_split").batch(4)
    rows = [{k: v.tolist() for k, v in b.items()} for b in packed]
    it = packed.iter(0)
    for _ in range(5):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    again = packed.iter(0)
    again.set_state(state)
    assert [{k: v.tolist() for k, v in b.items()} for b in again] == rows[5:]


def test_bad_tokenizers_and_bad_text_are_named_errors(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"version": "1.0", "model": {"type": "NoSuchModel"}}')
    with pytest.raises(sh.InvalidArgumentError, match=r"tokenize\(tokenizer=.*tokenizer.json.*not a Hugging Face"):
        texts(2).tokenize("text", str(bad))
    with pytest.raises(sh.InvalidArgumentError, match="not a Hugging Face tokenizer.json"):
        texts(2).tokenize("text", "{not json")
    with pytest.raises(FileNotFoundError, match="missing.json"):
        texts(2).tokenize("text", str(tmp_path / "missing.json"))
    with pytest.raises(sh.InvalidArgumentError, match=r"max_length=2.*bos_id/eos_id take 1.*special tokens 2"):
        texts(2).tokenize("text", TOKENIZER, max_length=2, eos_id=3)
    with pytest.raises(sh.InvalidArgumentError, match="truncation_side"):
        texts(2).tokenize("text", TOKENIZER, truncation_side="middle")
    with pytest.raises(sh.InvalidArgumentError, match=r"bos_id=-1"):
        texts(2).tokenize("text", TOKENIZER, bos_id=-1)
    latin1 = sh.from_arrays({"text": np.array([b"ok", b"caf\xe9"], dtype=object)})
    with pytest.raises(sh.InvalidArgumentError, match="element 1.*not UTF-8.*offset 3"):
        list(latin1.tokenize("text", TOKENIZER))
    numbers = sh.from_arrays({"text": np.arange(3)})
    with pytest.raises(sh.SchemaError, match="tokenize takes text"):
        list(numbers.tokenize("text", TOKENIZER))
