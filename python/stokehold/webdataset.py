"""WebDataset tar shards, read natively with random access.

    >>> import io, os, tarfile, tempfile, stokehold
    >>> path = os.path.join(tempfile.mkdtemp(), "shard-0.tar")
    >>> with tarfile.open(path, "w") as t:
    ...     for name, data in [("a.txt", b"hi"), ("a.cls", b"3"), ("b.txt", b"yo"), ("b.cls", b"1")]:
    ...         info = tarfile.TarInfo(name)
    ...         info.size = len(data)
    ...         t.addfile(info, io.BytesIO(data))
    >>> ds = stokehold.read_webdataset(path)
    >>> len(ds), ds[1]["__key__"].item(), ds[1]["txt"].item()
    (2, b'b', b'yo')

Members are grouped into samples as the ``webdataset`` package groups them: a member's key is its
path up to the first dot of its basename (``val/s1.seg.json``: key ``val/s1``, extension
``seg.json``, lowercased); consecutive members with one key make a sample; only regular files count
and ``__...__`` names are skipped. Each element holds ``__key__``, ``__url__`` (the shard's path as
given) and one bytes feature per member, as webdataset yields them without a decoder (it also
yields ``__local_path__``; stokehold does not). Decode members with the native decoders
(``decode_image``, ``decode_audio``) or ``map``. A sample lacking a member has fewer features.

Each local shard's headers are read once when it is opened (its data is skipped; a shard given
as a URL is fetched whole for that, there is no index sidecar yet), so ``len``,
``ds[i]``, global ``shuffle``, ``shard`` and checkpoints work as on any random-access source. A
member cut short by a truncated shard, a header that does not parse, or an extension twice in one
sample raise :class:`DataCorruptionError` naming the shard and the member's header offset.
"""

from typing import Any

from . import _args, _native
from .dataset import Dataset

__all__ = ["read_webdataset"]


def read_webdataset(paths: Any) -> Dataset:
    """The samples of the tar shards ``paths`` (one path or a list, in order), with random access:
    ``__key__``, ``__url__`` and one bytes feature per member, named by its extension."""
    files = _args.paths("read_webdataset", "paths", paths)
    return Dataset._wrap(_native.Dataset.read_webdataset(files))
