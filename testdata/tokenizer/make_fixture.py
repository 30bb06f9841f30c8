"""Makes the tokenizer fixture: a small byte-level BPE tokenizer trained with the Python
``tokenizers`` package on text this script makes (no download), and the ids that package gives
for 10,000 documents (ASCII, accents, CJK, emoji, combining marks, right-to-left scripts,
unusual whitespace, the special tokens' text).

Run in a venv outside the repository (``python3 -m venv /tmp/tokvenv &&
/tmp/tokvenv/bin/pip install tokenizers==0.22.2``, the Python package built from the same
Rust crate version stokehold uses): ``/tmp/tokvenv/bin/python testdata/tokenizer/make_fixture.py``.

Writes, beside this script:
* ``tokenizer.json``: NFC normalizer, byte-level pre-tokenizer and decoder, BPE with a 2,000-id
  vocabulary, special tokens ``<s>`` ``</s>`` ``<pad>`` ``<|endoftext|>``, and a template
  post-processor ``<s> $A </s>`` (so ``add_special_tokens`` matters);
* ``expected.npz``: for ``documents()``, the ids of ``Tokenizer.encode(doc)`` (``ids`` uint16,
  ``splits`` the documents' boundaries); for the first 1,000 documents, of
  ``encode(doc, add_special_tokens=False)`` (``plain_ids`` / ``plain_splits``) and with
  ``enable_truncation(max_length=8, direction=...)`` (``right_ids`` / ``right_splits``, ``left_ids`` / ``left_splits``).

``documents()`` needs nothing but the standard library: the tests import it to make the same
documents again.
"""

import os
import random

N_DOCS = 10_000
SEED = 46

_WORDS = (
    "the of and to in is was for that with as on by at from his her which an be this "
    "are had not but were have they all one we there been can more if out so what when "
    "data token pipeline model train loss step shard epoch resume mixture weight"
).split()
_UNICODE = [
    "café",
    "naïve",
    "Ångström",
    "façade",
    "jalapeño",
    "Zürich",
    "São Paulo",
    "Ærøskøbing",
    "東京",
    "日本語の文章",
    "中文分词",
    "한국어",
    "Привет мир",
    "Ελληνικά",
    "مرحبا بالعالم",
    "שלום עולם",
    "हिन्दी",
    "ภาษาไทย",
    "😀",
    "🚀🔥",
    "👩‍👩‍👧",
    "🇫🇷",
    "e\u0301",
    "n\u0303",
    "Ａｂｃ",
    "ﬁ ligature",
    "x²",
    "½",
    "\u200bzero-width",
    "tab\there",
    "nbsp\u00a0here",
    "<s>",
    "</s>",
    "<|endoftext|>",
    "a\r\nb",
    "    indented",
    "UPPER lower MiXeD",
    "3.14159",
    "1,000,000",
    "e-mail@example.com",
    "https://example.org/path?q=1",
]


def documents(n=N_DOCS, seed=SEED):
    """``n`` documents, the same for a given seed on any Python 3."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.7:
                words.append(rng.choice(_WORDS))
            elif r < 0.9:
                words.append(rng.choice(_UNICODE))
            else:
                words.append(str(rng.randint(0, 10 ** rng.randint(1, 6))))
        sep = rng.choice([" ", " ", " ", "  ", "\n", ", "])
        docs.append(sep.join(words) + ("." if i % 3 == 0 else ""))
    return docs


def _ids(tok, docs, **kw):
    import numpy as np

    encs = [tok.encode(d, **kw) for d in docs]
    splits = np.cumsum([0] + [len(e.ids) for e in encs]).astype(np.int64)
    ids = np.array([i for e in encs for i in e.ids], dtype=np.uint16)
    return ids, splits


def main():
    import numpy as np
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer

    here = os.path.dirname(os.path.abspath(__file__))
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<s>", "</s>", "<pad>", "<|endoftext|>"]
    trainer = BpeTrainer(vocab_size=2000, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(documents(20_000, seed=SEED + 1), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))]
    )
    tok.save(os.path.join(here, "tokenizer.json"))

    docs = documents()
    out = {}
    out["ids"], out["splits"] = _ids(tok, docs)
    out["plain_ids"], out["plain_splits"] = _ids(tok, docs[:1000], add_special_tokens=False)
    for side in ("right", "left"):
        tok.enable_truncation(max_length=8, direction=side)
        out[f"{side}_ids"], out[f"{side}_splits"] = _ids(tok, docs[:1000])
    tok.no_truncation()
    np.savez_compressed(os.path.join(here, "expected.npz"), **out)
    import tokenizers

    print(
        f"tokenizers {tokenizers.__version__}: vocab {tok.get_vocab_size()}, "
        f"{len(docs)} documents, {len(out['ids'])} ids"
    )


if __name__ == "__main__":
    main()
