"""Images: argument conversions for the native decode and augmentation ops of :class:`Dataset`
(declared in ``dataset.py``; option strings such as ``dtype``, ``layout`` and ``interpolation``
are parsed and checked in Rust) and :func:`probe_image`. What a decode's ``on_error="skip"``
leaves out is counted in ``ds.skipped()``, as for every other op. Decoding and augmenting run
in Rust on the pipeline's threads, holding no GIL; see ``docs/GUIDE.md``, "Images".
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _args, _native

__all__ = ["DEFAULT_MAX_PIXELS", "ImageInfo", "probe_image"]

#: The default ``max_pixels`` of ``decode_image`` / ``load_image``: Pillow's decompression-bomb
#: ceiling (``2 * PIL.Image.MAX_IMAGE_PIXELS``). Headers claiming more are refused before any
#: pixel buffer is allocated.
DEFAULT_MAX_PIXELS = 178_956_970

#: A size argument: an int, or (height, width).
Size = Union[int, Sequence[int]]


class ImageInfo(NamedTuple):
    """What an image's header says (:func:`probe_image`)."""

    format: str
    width: int
    height: int
    channels: int
    bit_depth: int


def probe_image(source: Union[bytes, str, os.PathLike[str]]) -> ImageInfo:
    """Reads the header of a JPEG, PNG or WebP image (bytes, or a path): format, width, height,
    channels (as decoded with ``channels=0``) and bits per sample. No pixels are decoded."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        with open(_args.path("probe_image", "source", source), "rb") as f:
            data = f.read()
    return ImageInfo(*_native.probe_image(data))


def decode_args(op: str, **options: Any) -> Dict[str, Any]:
    """decode_image / load_image's keyword options for the native op: ``channels`` and
    ``max_pixels`` as ints (numpy ints accepted, bool and float refused); their ranges and the
    option strings (``dtype``, ``layout``, ``on_error``) are checked in Rust
    (``stokehold_io::image::DecodeOptions::from_args``), the one place."""
    for arg in ("channels", "max_pixels"):
        options[arg] = _args.count(op, arg, options[arg])
    return _args.native_options(op, options)


def size_arg(op: str, value: Any) -> Tuple[int, int, bool]:
    """(height, width, from_int): an int is a square (or, for resize, the shorter side)."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise _args.fail(op, "size", value, "must be an int or (height, width)")
        return _args.count(op, "size", value[0], 1), _args.count(op, "size", value[1], 1), False
    n = _args.count(op, "size", value, 1)
    return n, n, True


def unit_range(op: str, arg: str, value: Any, upper: Optional[float]) -> Tuple[float, float]:
    """A (lo, hi) pair of finite floats, 0 < lo <= hi (<= upper)."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise _args.fail(op, arg, value, "must be a pair (lo, hi) of numbers") from None
    bad = not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0 or lo > hi
    if bad or (upper is not None and hi > upper):
        bound = f" <= {upper}" if upper is not None else ""
        raise _args.fail(op, arg, value, f"must satisfy 0 < lo <= hi{bound}")
    return lo, hi


def probability(op: str, value: Any) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise _args.fail(op, "p", value, "must be a number in [0, 1]") from None
    if not 0.0 <= p <= 1.0:
        raise _args.fail(op, "p", value, "must be a number in [0, 1]")
    return p


def per_channel(op: str, arg: str, value: Any, positive: bool) -> List[float]:
    """One float or one per channel."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    try:
        out = [float(v) for v in items]
    except (TypeError, ValueError):
        raise _args.fail(op, arg, value, "must be a number or one number per channel") from None
    if not out or not all(math.isfinite(v) for v in out) or (positive and min(out) <= 0):
        raise _args.fail(op, arg, value, "must be finite" + (" and > 0" if positive else ""))
    return out


def strength(op: str, arg: str, value: Any) -> float:
    """A colour-jitter strength: a finite number >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise _args.fail(op, arg, value, "must be a number >= 0") from None
    if not math.isfinite(v) or v < 0:
        raise _args.fail(op, arg, value, "must be a number >= 0")
    return v
