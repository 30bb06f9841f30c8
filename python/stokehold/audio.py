"""Audio, natively: decoding (WAV, FLAC, MP3, Ogg Vorbis), resampling, and STFT / mel features.

The ops are :class:`~stokehold.Dataset` methods (``decode_audio``, ``load_audio``,
``spectrogram``, ``mel_spectrogram``); this module passes their options to Rust as keywords
(parsed and checked there, in ``stokehold_io``: one place) and holds :func:`probe_audio`.
What a decode's ``on_error="skip"`` leaves out is counted in ``ds.skipped()``, as for every
other op.
All of it runs in Rust on the pipeline's threads: no Python, and no GIL, per element.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _args, _native

if TYPE_CHECKING:
    # Only for annotations: the ops take the dataset they extend and return ``ds._then(...)``,
    # so this module sits below dataset.py (whose methods call it) and never imports it.
    from .dataset import Dataset

__all__ = ["probe_audio"]


def probe_audio(source: Any) -> Dict[str, Any]:
    """What an audio file (a path) or audio ``bytes`` hold, from the headers alone:
    ``{"format", "codec", "sample_rate", "channels", "frames", "duration",
    "bits_per_sample"}`` (``frames`` and ``duration`` are ``None`` where the headers do not say).
    A file that is not audio raises :class:`DataCorruptionError` naming it."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _native.probe_audio(bytes(source))
    return _native.probe_audio(_args.path("probe_audio", "source", source))


#: Sample rates are u32 in Rust: a larger int is refused here, by name, not at the boundary.
_MAX_RATE = 2**32 - 1


def _count(op: str, arg: str, value: Any, maximum: int = _args.MAX_COUNT) -> Optional[int]:
    """An optional int (numpy ints accepted; bool and float refused) that fits its native type;
    its range is checked in Rust (``stokehold_io::audio``), with the other option values."""
    return None if value is None else _args.count(op, arg, value, 0, maximum)


def decode(
    ds: Dataset,
    op: str,
    feature: str,
    out: str,
    *,
    resample_to: Optional[int],
    random_window: Optional[float],
    seed: Optional[int],
    **options: Any,
) -> Dataset:
    """``decode_audio`` and ``load_audio``: the native op with the dataset's seed for a random
    window. ``options`` (dtype, offset, on_error, deterministic...) go to Rust as keywords,
    where they are parsed and checked (the window rule is ``Window::from_args``)."""
    method = ds._native.decode_audio if op == "decode_audio" else ds._native.load_audio
    return ds._then(method(
        _args.name(op, "feature", feature), _args.name(op, "out", out),
        resample_to=_count(op, "resample_to", resample_to, _MAX_RATE), random_window=random_window,
        seed=ds._op_seed(op, seed) if random_window is not None else 0,
        **_args.native_options(op, options)))


def _stft(op: str, n_fft: int, win_length: Optional[int], hop_length: Optional[int],
          axis: int) -> Dict[str, Any]:
    """The STFT sizes as ints (their ranges and defaults are Rust's ``StftOptions::from_args``),
    and the time axis (checked against each element's rank in Rust)."""
    return {"n_fft": _args.count(op, "n_fft", n_fft), "win_length": _count(op, "win_length", win_length),
            "hop_length": _count(op, "hop_length", hop_length),
            "axis": _args.axis(op, "axis", axis)}


def spectrogram(
    ds: Dataset, feature: str, out: str, *, n_fft: int, win_length: Optional[int],
    hop_length: Optional[int], axis: int = -1, **options: Any,
) -> Dataset:
    """``Dataset.spectrogram``: the native op; ``options`` are parsed and checked in Rust."""
    op = "spectrogram"
    return ds._then(ds._native.spectrogram(
        _args.name(op, "feature", feature), _args.name(op, "out", out),
        **_stft(op, n_fft, win_length, hop_length, axis), **_args.native_options(op, options)))


def mel_spectrogram(
    ds: Dataset, feature: str, out: str, *, sample_rate: int, n_fft: int,
    win_length: Optional[int], hop_length: Optional[int], n_mels: int,
    top_db: Optional[float], axis: int = -1, **options: Any,
) -> Dataset:
    """``Dataset.mel_spectrogram``: the native op; ``options`` are parsed and checked in Rust."""
    op = "mel_spectrogram"
    if top_db is not None and not (isinstance(top_db, (int, float)) and math.isfinite(top_db)):
        raise _args.fail(op, "top_db", top_db, "must be a finite number or None")
    return ds._then(ds._native.mel_spectrogram(
        _args.name(op, "feature", feature), _args.name(op, "out", out),
        sample_rate=_args.count(op, "sample_rate", sample_rate, 0, _MAX_RATE),
        n_mels=_args.count(op, "n_mels", n_mels), top_db=top_db,
        **_stft(op, n_fft, win_length, hop_length, axis), **_args.native_options(op, options)))
