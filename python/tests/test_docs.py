"""Every fenced code block of README.md and docs/*.md runs here: one test per block, id ``file:line``.

The rules (the parser and its conventions are in ``doc_blocks.py``):

* ``python`` blocks are executed, in order within a file, in ONE namespace per file (a later block
  may use an earlier block's names); each block runs in a fresh temporary working directory, so
  relative paths a block writes are its own. Running one block alone
  (``pytest 'python/tests/test_docs.py::test_doc_block[docs/GUIDE.md:411]'``, or
  ``-k 'GUIDE.md and 411'``) first runs the earlier blocks of its file.
* ``python s3`` (and ``sh s3``) blocks run against moto's S3 server on loopback
  (``s3server.py``), started on first use, its bucket ``bucket`` filled by :func:`_s3_bucket`
  with what the docs read; a shell block gets the server in the AWS_* environment variables.
* ``python no-run <reason>`` is collected and skipped with the reason (tf.data equivalents,
  fragments); ``python requires=torch`` (or ``requires=keras,jax``) is skipped unless every named
  module is installed (the block imports them itself).
* ``sh`` / ``bash`` blocks of stokehold CLI calls run against the ``stokehold`` binary
  (``$STOKEHOLD_BIN``, ``target/release/stokehold`` or ``target/debug/stokehold``), skipped when
  none is built; setup blocks (make, pip, venv, maturin: what runs these tests) are skipped.
* Other fences (rust, json, text, none) are not collected; ``cargo test`` runs rustdoc examples.

A block that fails raises its own exception; its traceback's line numbers are the Markdown file's.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import doc_blocks  # noqa: E402

BLOCKS = doc_blocks.collected()

# Per Markdown file: the shared namespace and the blocks already attempted (id -> error or None).
_NAMESPACES: Dict[Path, Dict[str, Any]] = {}
_DONE: Dict[str, Any] = {}
# Working directories live until the session ends (a later block may read what an earlier one
# wrote through a dataset it defined); blocks' own tempfile.mkdtemp() dirs go under it too.
_TMP = tempfile.mkdtemp(prefix="stokehold-docs-")
atexit.register(shutil.rmtree, _TMP, True)


def _missing(block: doc_blocks.Block) -> List[str]:
    """The ``requires=`` modules that are not installed. Found by ``find_spec``, not imported:
    the block imports them itself, after whatever setup it needs (keras: ``KERAS_BACKEND``), and
    an installed module that fails to import fails the block."""
    out = []
    for mod in block.requires:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(mod)
    return out


def _runs(block: doc_blocks.Block) -> bool:
    return block.kind == "python" and block.no_run is None and not _missing(block)


_S3: List[Any] = []  # the moto server of the ``python s3`` blocks, once started


def _s3_bucket() -> None:
    """Starts moto (once; stopped at exit) and fills bucket ``bucket`` with what the ``python s3``
    blocks read, written by stokehold and uploaded by boto3."""
    if _S3:
        return
    import numpy as np
    from s3server import Moto

    import stokehold as sh

    server = Moto()
    atexit.register(server.stop)
    _S3.append(server)
    s3 = server.client()
    s3.create_bucket(Bucket="bucket")
    local = Path(tempfile.mkdtemp(dir=_TMP))
    rng = np.random.default_rng(0)
    ds = sh.from_arrays({"id": np.arange(1000), "x": rng.standard_normal((1000, 16), dtype=np.float32)})
    sh.write_shards(ds, local / "train", shard_size=16 << 10)
    sh.tfrecord.write_tfrecord(ds, local / "tf", prefix="train", num_shards=4)
    np.save(local / "features.npy", rng.standard_normal((1000, 32), dtype=np.float32))
    jpg = (doc_blocks.ROOT / "testdata" / "image" / "baseline.jpg").read_bytes()
    for key in ("images/a/1.jpg", "images/a/2.jpg", "images/b/3.jpg"):
        s3.put_object(Bucket="bucket", Key=key, Body=jpg)
    (local / "x").mkdir()
    for i in range(3):
        np.save(local / "x" / f"{i}.npy", np.arange(i + 1))
    for f in sorted(local.rglob("*")):
        if f.is_file():
            s3.upload_file(str(f), "bucket", f.relative_to(local).as_posix())


def _exec(block: doc_blocks.Block) -> None:
    """Runs one Python block in its file's namespace, in a fresh temporary working directory."""
    if block.s3:
        _s3_bucket()
    ns = _NAMESPACES.setdefault(block.path, {"__name__": f"doc_{block.path.stem}"})
    cwd, old_tempdir = os.getcwd(), tempfile.tempdir
    tmp = os.path.join(_TMP, block.id.replace("/", "_").replace(":", "_"))
    os.makedirs(tmp, exist_ok=True)
    try:
        os.chdir(tmp)
        tempfile.tempdir = tmp
        code = compile(doc_blocks.padded_source(block), block.rel, "exec")
        exec(code, ns)  # noqa: S102 - running the documentation is the point
    finally:
        tempfile.tempdir = old_tempdir
        os.chdir(cwd)


def _run_python(block: doc_blocks.Block) -> None:
    earlier = [b for b in BLOCKS if b.path == block.path and b.line < block.line and _runs(b)]
    failed = []
    for b in earlier:
        if b.id not in _DONE:
            try:
                _exec(b)
                _DONE[b.id] = None
            except BaseException as e:  # noqa: BLE001 - recorded, reported with this block
                _DONE[b.id] = e
        if _DONE[b.id] is not None:
            failed.append(b.id)
    try:
        _exec(block)
        _DONE[block.id] = None
    except BaseException as e:
        _DONE[block.id] = e
        if failed and hasattr(e, "add_note"):
            e.add_note(f"earlier blocks of this file failed (names they define may be missing): "
                       f"{', '.join(failed)}")
        raise


def _binary() -> str:
    """The ``stokehold`` command the shell blocks run: ``$STOKEHOLD_BIN``, else the one this
    interpreter's environment installed (the wheel's script, as ``pip install`` users have it),
    else a built ``target/*/stokehold``."""
    env = os.environ.get("STOKEHOLD_BIN")
    if env:
        return env
    script = Path(sys.executable).parent / "stokehold"
    if script.is_file() and os.access(script, os.X_OK):
        return str(script)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or doc_blocks.ROOT / "target")
    for profile in ("release", "debug"):
        exe = target / profile / "stokehold"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    return ""


def _run_shell(block: doc_blocks.Block, tmp_path: Path) -> None:
    why = block.shell_verdict()
    if why is not None:
        pytest.skip(why)
    exe = _binary()
    if not exe:
        pytest.skip("no stokehold command (the package's script, or target/release/stokehold)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "stokehold").symlink_to(exe)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    if block.s3:
        _s3_bucket()
        env.update(_S3[0].env())
    work = tmp_path / "work"
    work.mkdir()
    script = "\n".join(ln[2:] if ln.lstrip().startswith("$ ") else ln for ln in block.code.splitlines())
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, (f"{block.id}: exit {proc.returncode}\n--- stdout\n{proc.stdout}"
                                  f"\n--- stderr\n{proc.stderr}")


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_doc_block(block: doc_blocks.Block, tmp_path: Path) -> None:
    if block.no_run is not None:
        pytest.skip(f"no-run: {block.no_run}")
    missing = _missing(block)
    if missing:
        pytest.skip(f"requires {', '.join(missing)} (not installed here)")
    if block.kind == "python":
        _run_python(block)
    else:
        _run_shell(block, tmp_path)


def test_blocks_are_found() -> None:
    """The collector sees the documents (a renamed fence or file would silently drop tests)."""
    files = {b.rel for b in BLOCKS}
    assert "README.md" in files
    assert "docs/GUIDE.md" in files
    assert any(b.kind == "python" and b.no_run is None for b in BLOCKS)


def test_module_text_keeps_lines() -> None:
    """The mypy modules put each block at its Markdown line (so errors point into the docs)."""
    for f in doc_blocks.doc_files():
        text = doc_blocks.module_text(f).split("\n")
        for b in doc_blocks.runnable_python(f):
            first = b.code.split("\n")[0]
            assert text[b.line - 1] == first, (b.id, text[b.line - 1], first)
