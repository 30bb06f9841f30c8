"""The fenced code blocks of README.md and docs/*.md: how they are found and which of them run.

Used by ``test_docs.py`` (which runs them) and, as a script, to hand the guide's Python to a type
checker::

    python python/tests/doc_blocks.py OUTDIR     # then: mypy --strict OUTDIR

The script writes one module per Markdown file that has runnable Python blocks
(``OUTDIR/README_md.py``, ``OUTDIR/GUIDE_md.py``, ...): that file's runnable ``python`` blocks
concatenated in order (names carry over, as when the tests run them), each placed at the line it
has in the Markdown file, so that ``GUIDE_md.py:42`` in mypy's output is ``docs/GUIDE.md:42``.
Only blocks the tests would execute unconditionally go in: ``no-run`` and ``requires=`` blocks
stay out (a framework that is not installed has no types to check against).

The conventions (the info string after the opening fence):

* ``python`` (or ``py``, ``python3``): executed, in order, one namespace per Markdown file, each
  block in a fresh temporary working directory.
* ``python no-run <reason>``: collected, skipped with the reason (tf.data equivalents, fragments).
* ``python requires=torch`` (several: ``requires=keras,jax``): executed only when every module is
  installed (``importlib.util.find_spec``; the block does its own imports), else skipped naming
  the missing one. It runs in the file's namespace like any other.
* ``python s3``: executed with stokehold pointed at moto's S3 server on loopback (the test venv's
  ``moto_server``, started once), whose bucket ``bucket`` holds what the docs read: a shard
  folder ``train``, TFRecords ``tf/train-0000k-of-00004.tfrecord`` with indexes,
  ``features.npy``, ``images/**/*.jpg`` and ``x/*.npy`` (``test_docs.py`` fills it). ``sh s3``:
  a CLI block run the same way, the server named in the ``AWS_*`` environment variables.
* ``sh`` / ``bash`` / ``shell`` / ``console``: a block whose every command is a stokehold CLI call
  (or one of a few harmless helpers: ls, cat, echo, head, wc, mkdir, test) is run with bash
  (``-euo pipefail``) in a fresh temporary directory, with the ``stokehold`` binary first on
  ``PATH`` (``$STOKEHOLD_BIN``, else ``target/release/stokehold``, else ``target/debug/stokehold``);
  it is skipped when there is no binary. Setup blocks (make, pip, python -m venv, maturin,
  cargo, ``.``/source: what runs these tests) and any other shell block are skipped, saying so.
  ``sh no-run <reason>`` works as for Python.
* Every other fence (``rust``, ``json``, ``text``, no language: layouts, outputs, CLI synopses) is
  not collected. Rust examples are checked by ``cargo test`` where they are rustdoc doc-tests.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[2]

PYTHON_LANGS = {"python", "py", "python3"}
SHELL_LANGS = {"sh", "bash", "shell", "console"}
#: First words of shell commands that make a block setup (never run by the tests).
SETUP_WORDS = {"make", "pip", "pip3", "python", "python3", "maturin", "cargo", ".", "source", "cd"}
#: First words a runnable shell block may use besides ``stokehold``.
SHELL_HELPERS = {"stokehold", "ls", "cat", "echo", "head", "wc", "mkdir", "test"}

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


@dataclass
class Block:
    """One fenced code block."""

    path: Path  # the Markdown file
    line: int  # 1-based line of the first line of code (the one after the opening fence)
    lang: str  # first word of the info string, lower case ("" when none)
    info: str  # the whole info string
    code: str
    no_run: Optional[str] = None  # the reason, when marked no-run
    requires: List[str] = field(default_factory=list)
    s3: bool = False  # runs against the tests' S3 server (``python s3``)

    @property
    def rel(self) -> str:
        try:
            return self.path.relative_to(ROOT).as_posix()
        except ValueError:
            return self.path.as_posix()

    @property
    def id(self) -> str:
        """``file:line`` of the opening fence, as an editor jumps to it."""
        return f"{self.rel}:{self.line - 1}"

    @property
    def kind(self) -> str:
        if self.lang in PYTHON_LANGS:
            return "python"
        if self.lang in SHELL_LANGS:
            return "shell"
        return "other"

    def shell_verdict(self) -> Optional[str]:
        """For a shell block: ``None`` when it is a runnable CLI block, else why it is not."""
        words = [_first_word(ln) for ln in self.code.splitlines()]
        words = [w for w in words if w]
        if not words:
            return "empty block"
        setup = sorted({w for w in words if w in SETUP_WORDS})
        if setup:
            return f"setup ({', '.join(setup)}): what builds and runs these tests, not run by them"
        if "stokehold" not in words or any(w not in SHELL_HELPERS for w in words):
            return "not a stokehold CLI block"
        return None


def _first_word(line: str) -> str:
    s = line.strip()
    if not s or s.startswith("#"):
        return ""
    if s.startswith("$ "):
        s = s[2:].lstrip()
    return s.split()[0]


def parse(path: Path) -> List[Block]:
    """Every fenced block of one Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: List[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        body: List[str] = []
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close.group(2)[0] == fence[0] and len(close.group(2)) >= len(fence) \
                    and not close.group(3).strip():
                break
            ln = lines[j]
            body.append(ln[indent:] if ln[:indent].strip() == "" else ln)
            j += 1
        words = info.split()
        lang = words[0].lower() if words else ""
        block = Block(path, i + 2, lang, info, "\n".join(body) + "\n")
        rest = words[1:]
        for k, w in enumerate(rest):
            if w in ("no-run", "no-run:"):
                block.no_run = " ".join(rest[k + 1:]).lstrip(":").strip() or "marked no-run"
                break
            if w == "s3":
                block.s3 = True
            if w.startswith("requires="):
                block.requires += [r for r in w[len("requires="):].split(",") if r]
        out.append(block)
        i = j + 1
    return out


def doc_files(root: Path = ROOT) -> List[Path]:
    """README.md, then docs/*.md in name order."""
    files = [root / "README.md"] if (root / "README.md").exists() else []
    return files + sorted((root / "docs").glob("*.md"))


def collected(root: Path = ROOT) -> List[Block]:
    """The blocks the tests collect: Python and shell blocks of every doc file."""
    return [b for f in doc_files(root) for b in parse(f) if b.kind != "other"]


def runnable_python(path: Path) -> List[Block]:
    """The Python blocks of ``path`` that run unconditionally (no ``no-run``, no ``requires=``)."""
    return [b for b in parse(path) if b.kind == "python" and b.no_run is None and not b.requires]


def padded_source(block: Block) -> str:
    """The block's code preceded by blank lines, so that its line numbers are the Markdown
    file's."""
    return "\n" * (block.line - 1) + block.code


def module_text(path: Path) -> str:
    """The runnable Python blocks of ``path`` as one module, each at its Markdown line."""
    lines: List[str] = [f"# Generated from {path.name} by python/tests/doc_blocks.py; "
                        f"line N here is line N there."]
    for b in runnable_python(path):
        while len(lines) < b.line - 1:
            lines.append("")
        lines.extend(b.code.rstrip("\n").split("\n"))
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python python/tests/doc_blocks.py OUTDIR   (then: mypy --strict OUTDIR)",
              file=sys.stderr)
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    for f in doc_files():
        if not runnable_python(f):
            continue
        target = out / f"{f.stem}_md.py"
        target.write_text(module_text(f), encoding="utf-8")
        print(f"{target}  <- {os.path.relpath(f, ROOT)} ({len(runnable_python(f))} blocks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
