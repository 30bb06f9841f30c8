"""stokehold audio: decode_audio / load_audio against the fixtures' source samples
(testdata/audio, made by make_fixtures.py), log-mel against librosa's and torchaudio's output
(committed .npy), bad input with raise and skip, argument checks, probe_audio."""

from pathlib import Path

import numpy as np
import pytest

import stokehold
from stokehold import AUTOTUNE

FIXTURES = Path(__file__).resolve().parents[2] / "testdata" / "audio"


def paths(*names):
    return stokehold.from_arrays({"path": np.array([str(FIXTURES / n) for n in names])})


def blobs(*items):
    return stokehold.from_arrays({"audio": np.array(items, dtype=object)})


def test_wav_and_flac_decode_to_the_source_samples():
    ds = paths("stereo_s16.wav", "speech.flac").load_audio(dtype="int16", channels_first=False)
    for e, npy in zip(ds, ["stereo_s16.npy", "speech.npy"]):
        np.testing.assert_array_equal(e["audio"], np.load(FIXTURES / npy))
        assert e["audio"].dtype == np.int16
        assert e["sample_rate"] == 16000
    # float32, channels first (torchaudio's layout): 24-bit samples / 2**23 exactly.
    e = paths("s24.flac").load_audio()[0]
    want = np.load(FIXTURES / "s24.npy").T.astype(np.float64) / 2**23
    np.testing.assert_array_equal(e["audio"], want.astype(np.float32))


def test_decode_audio_from_bytes_matches_ffmpeg_for_lossy_codecs():
    items = [(FIXTURES / f).read_bytes() for f in ("speech.mp3", "stereo.ogg")]
    ds = blobs(*items).decode_audio(channels_first=False)
    for e, ref in zip(ds, ["speech.mp3.ref.npy", "stereo.ogg.ref.npy"]):
        want = np.load(FIXTURES / ref)
        assert e["audio"].shape == want.shape
        # Two float decoders: within 1e-5 of ffmpeg (measured: 8e-7 for MP3, 1.2e-7 for Vorbis).
        assert np.abs(e["audio"] - want).max() < 1e-5


@pytest.mark.parametrize(
    "reference, kwargs",
    [
        ("logmel_librosa.npy", dict(mel_scale="slaney", norm="slaney", pad_mode="constant")),
        ("logmel_torchaudio.npy", dict(mel_scale="htk", norm=None, pad_mode="reflect")),
    ],
)
def test_log_mel_matches_librosa_and_torchaudio(reference, kwargs):
    ds = paths("speech.wav").load_audio(mono=True).mel_spectrogram(
        sample_rate=16000, n_fft=512, win_length=400, hop_length=160, n_mels=64, log=True,
        **kwargs)
    got = ds[0]["mel"]
    want = np.load(FIXTURES / reference)
    assert got.shape == (1,) + want.shape
    near = want > want.max() - 80  # below that both sides are float32 noise
    assert np.abs(got[0] - want)[near].max() < 0.01  # dB


def test_spectrogram_shape_and_power():
    ds = paths("speech.wav").load_audio().spectrogram(n_fft=256, power=1.0)
    s = ds[0]["spectrogram"]
    assert s.shape == (1, 129, 1 + 24000 // 128)
    p = paths("speech.wav").load_audio().spectrogram(n_fft=256)[0]["spectrogram"]
    np.testing.assert_allclose(p, s.astype(np.float64) ** 2, rtol=1e-4, atol=1e-9)


def test_random_windows_are_deterministic_across_threads_and_epochs():
    names = ["speech.wav", "speech.flac", "stereo.ogg", "speech.mp3"] * 3

    def run(par, epoch):
        ds = paths(*names).load_audio(mono=True, resample_to=8000, random_window=0.5, seed=11,
                                      num_parallel_calls=par)
        return [e["audio"] for e in ds.iter(epoch=epoch)]

    a = run(None, 0)
    assert all(x.shape == (1, 4000) for x in a)
    for par in (1, 4, AUTOTUNE):
        b = run(par, 0)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    c = run(None, 1)
    assert sum(not np.array_equal(x, y) for x, y in zip(a, c)) >= 9


def test_offset_and_duration_read_a_window():
    full = paths("speech.flac").load_audio()[0]["audio"]
    w = paths("speech.flac").load_audio(offset=0.5, duration=0.25)[0]["audio"]
    np.testing.assert_array_equal(w, full[:, 8000:12000])


def test_bad_input_raises_naming_the_element_and_skip_counts():
    good = (FIXTURES / "speech.flac").read_bytes()
    items = [good, good[: len(good) // 2], (FIXTURES / "opus.ogg").read_bytes(),
             (FIXTURES / "empty.wav").read_bytes(), b"not audio" * 100, good]
    ds = blobs(*items).decode_audio()
    with pytest.raises(stokehold.DataCorruptionError, match=r"element 1.*decode_audio"):
        ds[1]
    with pytest.raises(stokehold.DataCorruptionError, match="unsupported codec opus"):
        ds[2]
    with pytest.raises(stokehold.DataCorruptionError, match="no audio frames"):
        ds[3]
    skipping = blobs(*items).decode_audio(on_error="skip", num_parallel_calls=2)
    assert len(list(skipping)) == 2
    assert skipping.skipped().count == 4
    assert [s.index for s in skipping.skipped().first] == [1, 2, 3, 4]
    # A plain Dataset, its skips found through the ops after it (the pipeline's one skip log).
    later = blobs(*items).decode_audio(on_error="skip").spectrogram().batch(1)
    assert type(later) is stokehold.Dataset and len(list(later)) == 2
    assert later.skipped().count == 4


def test_load_audio_errors_name_the_file():
    with pytest.raises(stokehold.DataCorruptionError, match=r"empty\.wav.*element 0"):
        paths("empty.wav").load_audio()[0]
    with pytest.raises(FileNotFoundError):
        stokehold.from_arrays({"path": np.array(["/no/such.wav"])}).load_audio()[0]


def test_argument_checks_name_the_op_and_argument():
    ds = paths("speech.wav")
    with pytest.raises(stokehold.InvalidArgumentError, match=r"load_audio\(dtype='int8'\)"):
        ds.load_audio(dtype="int8")
    with pytest.raises(stokehold.InvalidArgumentError, match=r"load_audio\(random_window="):
        ds.load_audio(random_window=1.0, offset=2.0)
    with pytest.raises(stokehold.InvalidArgumentError, match=r"load_audio\(on_error=.ignore.\)"):
        ds.load_audio(on_error="ignore")
    with pytest.raises(stokehold.InvalidArgumentError, match=r"spectrogram\(win_length=600\)"):
        ds.spectrogram(n_fft=512, win_length=600)
    with pytest.raises(stokehold.InvalidArgumentError, match=r"mel_spectrogram\(mel_scale="):
        ds.mel_spectrogram(sample_rate=16000, mel_scale="mel")


def test_probe_audio_reads_headers_of_files_and_bytes():
    i = stokehold.probe_audio(FIXTURES / "s24.flac")
    assert i == {"format": "flac", "codec": "flac", "sample_rate": 16000, "channels": 2,
                 "frames": 16000, "duration": 1.0, "bits_per_sample": 24}
    j = stokehold.probe_audio((FIXTURES / "stereo.ogg").read_bytes())
    assert (j["format"], j["codec"], j["channels"]) == ("ogg", "vorbis", 2)
    with pytest.raises(stokehold.DataCorruptionError):
        stokehold.probe_audio(b"\0" * 64)


@pytest.mark.parametrize("step", ["decode", "load", "spectrogram", "mel"])
def test_deterministic_false_gives_the_same_elements_as_they_complete(step):
    names = ["speech.wav", "stereo_s16.wav", "s24.flac", "speech.mp3", "tiny.ogg", "u8.wav"] * 4

    def run(deterministic):
        ds = paths(*names)
        par = dict(num_parallel_calls=3, deterministic=deterministic)
        if step == "decode":
            ds = ds.read_file("path", "bytes").decode_audio("bytes", "audio", **par)
        elif step == "load":
            ds = ds.load_audio(**par)
        else:
            ds = ds.load_audio(mono=True, resample_to=16000)
            if step == "spectrogram":
                ds = ds.spectrogram("audio", "audio", n_fft=128, **par)
            else:
                ds = ds.mel_spectrogram("audio", "audio", sample_rate=16000, n_mels=16, **par)
        return [(e["path"].item(), e["audio"].shape, e["audio"].tobytes()) for e in ds]

    ordered = run(None)
    assert run(True) == ordered
    assert sorted(run(False)) == sorted(ordered)
    assert len(set(ordered)) == len(set(names))
