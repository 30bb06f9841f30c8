"""Option strings of the audio and image ops are parsed in Rust, each in one place
(stokehold_io::options through the bindings' Wrap<T>; on_error by core's OnError::parse): a bad
spelling of any of them raises InvalidArgumentError naming the op, the argument, the value and
every valid spelling, when the op is built, and every listed spelling is accepted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import numpy as np
import pytest

import stokehold as sh

TESTDATA = Path(__file__).resolve().parents[2] / "testdata"


def clips() -> sh.Dataset:
    return sh.from_arrays({"path": np.array([str(TESTDATA / "audio" / "speech.wav")])})


def pictures() -> sh.Dataset:
    blob = (TESTDATA / "image" / "gray8.png").read_bytes()
    return sh.from_arrays({"image": np.array([blob], dtype=object)})


Op = Callable[[Dict[str, Any]], sh.Dataset]

#: (op, argument, the valid spellings, how to build the op with extra keywords)
OPTIONS: Tuple[Tuple[str, str, Tuple[str, ...], Op], ...] = (
    ("load_audio", "dtype", ("float32", "int16"), lambda kw: clips().load_audio(**kw)),
    ("load_audio", "on_error", ("raise", "skip"), lambda kw: clips().load_audio(**kw)),
    ("decode_audio", "dtype", ("float32", "int16"),
     lambda kw: clips().read_file("path", "audio").decode_audio(**kw)),
    ("decode_audio", "on_error", ("raise", "skip"),
     lambda kw: clips().read_file("path", "audio").decode_audio(**kw)),
    ("spectrogram", "pad_mode", ("reflect", "constant"),
     lambda kw: clips().load_audio().spectrogram(**kw)),
    ("mel_spectrogram", "pad_mode", ("reflect", "constant"),
     lambda kw: clips().load_audio().mel_spectrogram(sample_rate=16000, **kw)),
    ("mel_spectrogram", "mel_scale", ("htk", "slaney"),
     lambda kw: clips().load_audio().mel_spectrogram(sample_rate=16000, **kw)),
    ("mel_spectrogram", "norm", ("slaney",),
     lambda kw: clips().load_audio().mel_spectrogram(sample_rate=16000, **kw)),
    ("decode_image", "dtype", ("uint8", "uint16"), lambda kw: pictures().decode_image(**kw)),
    ("decode_image", "layout", ("HWC", "CHW"), lambda kw: pictures().decode_image(**kw)),
    ("decode_image", "on_error", ("raise", "skip"), lambda kw: pictures().decode_image(**kw)),
    ("load_image", "dtype", ("uint8", "uint16"), lambda kw: clips().load_image(**kw)),
    ("load_image", "layout", ("HWC", "CHW"), lambda kw: clips().load_image(**kw)),
    ("resize", "interpolation", ("nearest", "bilinear", "bicubic", "area", "lanczos3"),
     lambda kw: pictures().decode_image().resize(8, **kw)),
    ("random_resized_crop", "interpolation",
     ("nearest", "bilinear", "bicubic", "area", "lanczos3"),
     lambda kw: pictures().decode_image().random_resized_crop(8, seed=0, **kw)),
    ("normalize", "layout", ("HWC", "CHW"),
     lambda kw: pictures().decode_image().normalize(0.5, 0.25, **kw)),
)


@pytest.mark.parametrize("op, arg, valid, build", OPTIONS, ids=[f"{o}-{a}" for o, a, _, _ in OPTIONS])
def test_a_bad_spelling_names_the_op_the_argument_and_the_valid_values(
    op: str, arg: str, valid: Tuple[str, ...], build: Op
) -> None:
    with pytest.raises(sh.InvalidArgumentError) as info:
        build({arg: "Bogus"})
    # The value as the call spelled it, quoted as Python's repr (io's options) or as Rust's Debug
    # (core's on_error, shared by every op with a skip policy).
    message = str(info.value)
    assert re.search(rf"{re.escape(op)}\({arg}=(['\"])Bogus\1\): must be ", message), message
    for v in valid:
        assert f"'{v}'" in message or f'"{v}"' in message, message
    for v in valid:  # every spelling the error lists is accepted
        build({arg: v})
