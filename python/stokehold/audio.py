"""Audio, natively: decoding (WAV, FLAC, MP3, Ogg Vorbis), resampling, and STFT / mel features.

The ops are :class:`~stokehold.Dataset` methods (``decode_audio``, ``load_audio``,
``spectrogram``, ``mel_spectrogram``); this module holds their argument checks and
:func:`probe_audio`. What a decode's ``on_error="skip"`` leaves out is counted in
``ds.skipped()``, as for every other op.
All of it runs in Rust on the pipeline's threads: no Python, and no GIL, per element.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from . import _args, _native, errors

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


def _seconds(op: str, arg: str, value: Any, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _args.fail(op, arg, value, "must be a finite number of seconds")
    v = float(value)
    if v < 0 or (positive and v == 0):
        raise _args.fail(op, arg, value, "must be > 0" if positive else "must be >= 0")
    return v


def _rate(op: str, arg: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    v = _args.count(op, arg, value, 1)
    if v > 1_000_000:
        raise _args.fail(op, arg, v, "must be at most 1000000 Hz")
    return v


def _choice(op: str, arg: str, value: Any, choices: Tuple[str, ...]) -> str:
    if value not in choices:
        raise _args.fail(op, arg, value, "must be one of " + ", ".join(repr(c) for c in choices))
    return str(value)


def _threads(op: str, value: Any) -> Optional[int]:
    return None if value is None else _args.parallelism(op, "num_parallel_calls", value)


def decode(
    ds: Dataset,
    op: str,
    feature: str,
    out: str,
    dtype: str,
    channels_first: bool,
    mono: bool,
    resample_to: Optional[int],
    offset: float,
    duration: Optional[float],
    random_window: Optional[float],
    seed: Optional[int],
    sample_rate_key: Optional[str],
    on_error: str,
    num_parallel_calls: Optional[int],
) -> Dataset:
    """``decode_audio`` and ``load_audio``: checks, then the native op."""
    if random_window is not None and (offset != 0 or duration is not None):
        raise _args.fail(op, "random_window", random_window,
                         "draws its own offset: leave offset and duration out")
    source = _args.name(op, "feature", feature)
    target = _args.name(op, "out", out)
    args = (
        _choice(op, "dtype", dtype, ("float32", "int16")),
        _args.flag(op, "channels_first", channels_first),
        _args.flag(op, "mono", mono),
        _rate(op, "resample_to", resample_to),
        _seconds(op, "offset", offset, False),
        None if duration is None else _seconds(op, "duration", duration, True),
        None if random_window is None else _seconds(op, "random_window", random_window, True),
        ds._op_seed(op, seed) if random_window is not None else 0,
        None if sample_rate_key is None else _args.name(op, "sample_rate_key", sample_rate_key),
        errors.on_error(op, on_error),
        _threads(op, num_parallel_calls),
    )
    method = ds._native.decode_audio if op == "decode_audio" else ds._native.load_audio
    return ds._then(method(source, target, args))


def _number(op: str, arg: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _args.fail(op, arg, value, "must be a finite number")
    return float(value)


def _stft_args(
    op: str,
    n_fft: int,
    win_length: Optional[int],
    hop_length: Optional[int],
    power: float,
    center: bool,
    pad_mode: str,
) -> Tuple[int, Optional[int], Optional[int], float, bool, str]:
    """The STFT arguments, checked."""
    n = _args.count(op, "n_fft", n_fft, 2)
    win = None if win_length is None else _args.count(op, "win_length", win_length, 1)
    if win is not None and win > n:
        raise _args.fail(op, "win_length", win, f"must be <= n_fft ({n})")
    hop = None if hop_length is None else _args.count(op, "hop_length", hop_length, 1)
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not power > 0:
        raise _args.fail(op, "power", power, "must be a number > 0 (1: magnitude, 2: power)")
    return (n, win, hop, float(power), _args.flag(op, "center", center),
            _choice(op, "pad_mode", pad_mode, ("reflect", "constant")))


def spectrogram(
    ds: Dataset,
    feature: str,
    out: str,
    n_fft: int,
    win_length: Optional[int],
    hop_length: Optional[int],
    power: float,
    center: bool,
    pad_mode: str,
    num_parallel_calls: Optional[int],
) -> Dataset:
    """``Dataset.spectrogram``: checks, then the native op."""
    op = "spectrogram"
    return ds._then(ds._native.spectrogram(
        _args.name(op, "feature", feature), _args.name(op, "out", out),
        *_stft_args(op, n_fft, win_length, hop_length, power, center, pad_mode),
        _threads(op, num_parallel_calls)))


def mel_spectrogram(
    ds: Dataset,
    feature: str,
    out: str,
    sample_rate: int,
    n_fft: int,
    win_length: Optional[int],
    hop_length: Optional[int],
    f_min: float,
    f_max: Optional[float],
    n_mels: int,
    power: float,
    center: bool,
    pad_mode: str,
    mel_scale: str,
    norm: Optional[str],
    log: bool,
    top_db: Optional[float],
    num_parallel_calls: Optional[int],
) -> Dataset:
    """``Dataset.mel_spectrogram``: checks, then the native op."""
    op = "mel_spectrogram"
    n, win, hop, pw, ctr, pad = _stft_args(op, n_fft, win_length, hop_length, power, center,
                                           pad_mode)
    rate = _args.count(op, "sample_rate", sample_rate, 1)
    fmin = _number(op, "f_min", f_min)
    fmax = None if f_max is None else _number(op, "f_max", f_max)
    if not 0 <= fmin < (rate / 2 if fmax is None else fmax):
        raise _args.fail(op, "f_min", f_min, "must be >= 0 and below f_max (default: rate / 2)")
    if norm is not None and norm != "slaney":
        raise _args.fail(op, "norm", norm, "must be None or 'slaney'")
    return ds._then(ds._native.mel_spectrogram(
        _args.name(op, "feature", feature), _args.name(op, "out", out), rate, n, win, hop,
        fmin, fmax, _args.count(op, "n_mels", n_mels, 1), pw, ctr, pad,
        _choice(op, "mel_scale", mel_scale, ("htk", "slaney")), norm, _args.flag(op, "log", log),
        None if top_db is None else _number(op, "top_db", top_db),
        _threads(op, num_parallel_calls)))
