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
yields ``__local_path__``; stokehold does not). A sample lacking a member has fewer features.

``decode=True`` decodes members by extension as webdataset's default decoders do, through the
native decoders: ``jpg``/``jpeg``/``png``/``webp`` as ``decode_image`` does (uint8
``[height, width, channels]``), ``wav``/``flac``/``mp3``/``ogg`` as ``decode_audio`` does
(float32 ``[channels, frames]``, the rate in ``<ext>.sample_rate``), ``npy`` as its array,
``cls``/``cls2``/``index``/``inx``/``id`` as an int64 scalar; others (``json``, ``txt``...) stay
bytes. The kind comes from the extension's last dot-part (``seg.json``: ``json``). A dict
``{ext: kind}`` decodes only the extensions it names (a full extension such as ``seg.json``, or a
last dot-part), each as its kind: ``"bytes"``, ``"int"``, ``"image"``, ``"audio"`` or ``"npy"``
(``decode={"jpg": "image", "cls": "int"}``); other members stay bytes.

    >>> ds = stokehold.read_webdataset(path, decode=True)
    >>> ds[0]["cls"].item(), ds[0]["txt"].item()
    (3, b'hi')

Each shard's member list is read once: the first open reads its headers (its data is skipped)
and writes an index sidecar ``<shard>.idx`` beside a local shard (``.stokehold-idx/`` is looked
in too, as for TFRecord); later opens read the sidecar alone, and a URL's shard with a sidecar is
then read by range, never whole. A stale sidecar (made for another size) is rebuilt; a corrupt
one raises naming it. ``index=False`` reads the headers every time and writes nothing. ``len``,
``ds[i]``, global ``shuffle``, ``shard`` and checkpoints work as on any random-access source. A
member cut short by a truncated shard, a header that does not parse, an extension twice in one
sample, or a member that does not decode raise :class:`DataCorruptionError` naming the shard, the
member and its offset.

:func:`write_webdataset` writes a dataset as shards webdataset reads (as its ``ShardWriter``).
"""

from typing import Any, Callable, Dict, List, Optional, Union

from . import _args, _native
from .dataset import Dataset

__all__ = ["read_webdataset", "write_webdataset"]


def read_webdataset(paths: Any, decode: Union[bool, Dict[str, str]] = False, index: bool = True) -> Dataset:
    """The samples of the tar shards ``paths`` (one path or a list, in order), with random access:
    ``__key__``, ``__url__`` and one feature per member, named by its extension: bytes, or decoded
    (``decode=True``: webdataset's default decoders; a dict ``{ext: kind}``: those extensions
    only). ``index``: read and write ``<shard>.idx`` member lists (default True)."""
    op = "read_webdataset"
    files = _args.paths(op, "paths", paths)
    if isinstance(decode, dict):
        defaults = False
        pairs = [(_args.name(op, "decode", k), _args.name(op, "decode", v)) for k, v in decode.items()]
    else:
        defaults, pairs = _args.flag(op, "decode", decode), []
    return Dataset._wrap(_native.Dataset.read_webdataset(files, defaults, pairs, _args.flag(op, "index", index)))


def write_webdataset(
    ds: Dataset,
    pattern: Any,
    maxcount: int = 100000,
    maxsize: int = 3000000000,
    progress: Optional[Callable[[int, Optional[int]], Any]] = None,
) -> List[str]:
    """Writes one epoch of ``ds`` as WebDataset tar shards named ``pattern % k`` (``pattern``
    holds one ``%d`` or ``%06d``; shards numbered from 0), each with at most ``maxcount`` samples
    and ``maxsize`` bytes of member data (webdataset's ``ShardWriter`` defaults), and returns their
    paths. Each element is a sample: its ``__key__`` (bytes; else its position, ``%09d``) and one
    member ``<key>.<feature>`` per other feature (``__...__`` features left out). A bytes scalar is
    written as is; other values as webdataset's default encoders write them by the extension's last
    dot-part: ``cls``/``cls2``/``class``/``count``/``index``/``inx``/``id`` an integer scalar as
    decimal text, ``txt``/``text``/``transcript`` a number as text, ``npy`` an array as ``np.save``
    does, ``json``/``jsn`` an array as ``json.dumps`` does. Each shard is written under a temporary
    name and renamed when complete. ``progress(samples, total)`` is called now and then.

        >>> import numpy as np, os, tempfile, stokehold
        >>> d = tempfile.mkdtemp()
        >>> src = stokehold.from_arrays({"cls": np.arange(5), "npy": np.ones((5, 2, 2), "f4")})
        >>> paths = stokehold.write_webdataset(src, os.path.join(d, "s-%04d.tar"), maxcount=2)
        >>> [os.path.basename(p) for p in paths]
        ['s-0000.tar', 's-0001.tar', 's-0002.tar']
        >>> back = stokehold.read_webdataset(paths, decode=True)
        >>> back[4]["__key__"].item(), back[4]["cls"].item(), back[4]["npy"].shape
        (b'000000004', 4, (2, 2))
    """
    op = "write_webdataset"
    if not isinstance(ds, Dataset):
        raise _args.fail(op, "ds", ds, f"must be a stokehold.Dataset, got {type(ds).__name__}")
    paths = ds._native.write_webdataset(
        _args.path(op, "pattern", pattern),
        _args.count(op, "maxcount", maxcount, 1),
        _args.count(op, "maxsize", maxsize, 1),
        progress,
    )
    return [str(p) for p in paths]
