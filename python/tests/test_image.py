"""Images from Python: native decode (values against the committed fixtures of testdata/image),
bad input with its errors and the skip policy, keyed augmentation, probe_image."""

from __future__ import annotations

from pathlib import Path
from typing import List

import numpy as np
import pytest

import stokehold as sh

FIXTURES = Path(__file__).resolve().parents[2] / "testdata" / "image"


def data(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def images(names: List[str]) -> sh.Dataset:
    return sh.from_arrays({"image": np.array([data(n) for n in names], dtype=object)})


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("name", ["rgb8.png", "rgba8.png", "gray8.png", "la8.png", "palette.png",
                                  "palette_trns.png", "lossless.webp", "alpha.webp"])
def test_lossless_pixels_exact(name: str) -> None:
    want = np.load(FIXTURES / (name.rsplit(".", 1)[0] + ".npy"))
    (got,) = [e["image"] for e in images([name]).decode_image(channels=0)]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)


def test_png_16_bit() -> None:
    ds = images(["gray16.png", "rgb16.png"]).decode_image(channels=0, dtype="uint16")
    got = [e["image"] for e in ds]
    np.testing.assert_array_equal(got[0], np.load(FIXTURES / "gray16.npy"))
    np.testing.assert_array_equal(got[1], np.load(FIXTURES / "rgb16.npy"))
    assert got[1].dtype == np.uint16


@pytest.mark.parametrize("name", ["baseline", "progressive", "q444", "gray"])
def test_jpeg_within_35_db_of_pillow(name: str) -> None:
    want = np.load(FIXTURES / f"{name}.pil.npy")
    (got,) = [e["image"] for e in images([f"{name}.jpg"]).decode_image(channels=0)]
    assert got.shape == want.shape
    assert psnr(got, want) >= 35.0


def test_channels_and_layout() -> None:
    rgb = np.load(FIXTURES / "rgb8.npy")
    (chw,) = [e["image"] for e in images(["rgb8.png"]).decode_image(layout="CHW")]
    np.testing.assert_array_equal(chw, rgb.transpose(2, 0, 1))
    (gray,) = [e["pixels"] for e in images(["gray8.png"]).decode_image(out="pixels")]
    assert gray.shape == (48, 64, 3)


def test_hostile_headers_refused() -> None:
    for name in ["huge.png", "huge.jpg", "huge.webp", "zero.png", "zero.jpg"]:
        with pytest.raises(sh.SchemaError, match="element 0") as info:
            list(images([name]).decode_image())
        assert "image" in str(info.value)
    with pytest.raises(sh.SchemaError, match="64x48: refused before decoding"):
        list(images(["rgb8.png"]).decode_image(max_pixels=100))


def test_truncated_corrupt_unsupported(tmp_path: Path) -> None:
    for i, name in enumerate(["baseline.jpg", "progressive.jpg", "rgb8.png", "lossless.webp"]):
        full = data(name)
        path = tmp_path / f"cut-{i}-{name}"
        path.write_bytes(full[: len(full) // 2])
        ds = sh.from_arrays({"path": np.array([str(path).encode()], dtype=object)}).load_image()
        with pytest.raises(sh.DataCorruptionError, match=f"cut-{i}-{name}.*element 0.*load_image"):
            list(ds)
    (tmp_path / "a.gif").write_bytes(data("tiny.gif"))
    ds = sh.list_files(str(tmp_path / "*.gif"), shuffle=False).load_image()
    with pytest.raises(sh.DataCorruptionError, match=r"a\.gif.*unsupported image format \(GIF\)"):
        list(ds)
    with pytest.raises(sh.SchemaError, match="feature 'image'|feature \"image\""):
        list(sh.from_arrays({"image": np.zeros((1, 3), np.uint8)}).decode_image())


def test_skip_and_count(tmp_path: Path) -> None:
    good = ["baseline.jpg", "rgb8.png", "lossy.webp", "progressive.jpg"]
    for i, name in enumerate(good):
        (tmp_path / f"{i}-{name}").write_bytes(data(name))
    cut = data("baseline.jpg")
    (tmp_path / "4-cut.jpg").write_bytes(cut[: len(cut) // 2])
    (tmp_path / "5-tiny.bmp").write_bytes(data("tiny.bmp"))
    ds = sh.list_files(str(tmp_path / "*"), shuffle=False).load_image(on_error="skip", num_parallel_calls=3)
    got = [e["image"].shape for e in ds]
    assert got == [(48, 64, 3)] * 4
    assert ds.skipped().count == 2
    (i0, m0), (i1, m1) = [(s.index, s.error) for s in ds.skipped().first]
    assert (i0, i1) == (4, 5)
    assert "4-cut.jpg" in m0 and "BMP" in m1
    # A plain Dataset, its skips found through the ops after it (the pipeline's one skip log).
    later = sh.list_files(str(tmp_path / "*"), shuffle=False).load_image(on_error="skip").center_crop(8).batch(2)
    assert type(later) is sh.Dataset and [len(b["image"]) for b in later] == [2, 2]
    assert later.skipped().count == 2


def test_augment_keyed_and_batched() -> None:
    names = ["baseline.jpg", "rgb8.png", "lossy.webp", "progressive.jpg"] * 4
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

    def normalized() -> sh.Dataset:
        return (images(names).decode_image()
                .random_resized_crop(24, seed=3).random_flip_left_right(seed=4)
                .normalize(mean, std, layout="CHW"))

    def pipeline(threads: int) -> sh.Dataset:
        return normalized().batch(8).parallelize(threads)

    a = [b["image"] for b in pipeline(1).iter(epoch=0)]
    # The batch is normalised in one pass into its buffer; it equals the elements stacked.
    one_by_one = [e["image"] for e in normalized().iter(epoch=0)]
    np.testing.assert_array_equal(a[0], np.stack(one_by_one[:8]))
    b = [b["image"] for b in pipeline(4).iter(epoch=0)]
    c = [b["image"] for b in pipeline(4).iter(epoch=1)]
    assert a[0].shape == (8, 3, 24, 24) and a[0].dtype == np.float32
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])


def test_resize_center_crop_flip_values() -> None:
    rgb = np.load(FIXTURES / "rgb8.npy")
    ds = images(["rgb8.png"]).decode_image()
    (r,) = [e["image"] for e in ds.resize(24, interpolation="area")]
    assert r.shape == (24, 32, 3)
    # Area halving is a 2x2 block mean (rounded).
    want = rgb.reshape(24, 2, 32, 2, 3).astype(np.float64).mean(axis=(1, 3))
    assert np.abs(r.astype(np.float64) - want).max() <= 1
    (c,) = [e["image"] for e in ds.center_crop((40, 60))]
    np.testing.assert_array_equal(c, rgb[4:44, 2:62])
    (f,) = [e["image"] for e in ds.random_flip_left_right(p=1.0, seed=0)]
    np.testing.assert_array_equal(f, rgb[:, ::-1])
    (n,) = [e["image"] for e in ds.normalize(0.5, 0.25)]
    np.testing.assert_allclose(n, (rgb / 255.0 - 0.5) / 0.25, rtol=1e-5, atol=1e-5)


def test_color_jitter() -> None:
    rgb = np.load(FIXTURES / "rgb8.npy")
    ds = images(["rgb8.png"] * 4).decode_image()
    # Saturation only, strength 1: factors in [0, 2]; each output is the torchvision blend of the
    # pixel with its gray level, so gray pixels stay and the result is keyed.
    a = [e["image"] for e in ds.color_jitter(saturation=1.0, seed=5)]
    b = [e["image"] for e in ds.color_jitter(saturation=1.0, seed=5)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, rgb) for x in a)
    (same,) = [e["image"] for e in images(["rgb8.png"]).decode_image().color_jitter()]
    np.testing.assert_array_equal(same, rgb)
    with pytest.raises(sh.InvalidArgumentError, match="brightness"):
        ds.color_jitter(brightness=-1)


def test_bad_arguments() -> None:
    ds = images(["rgb8.png"])
    with pytest.raises(sh.InvalidArgumentError, match=r"decode_image\(channels=2\)"):
        ds.decode_image(channels=2)
    with pytest.raises(sh.InvalidArgumentError, match=r"decode_image\(on_error=.ignore.\)"):
        ds.decode_image(on_error="ignore")
    with pytest.raises(sh.InvalidArgumentError, match="random_resized_crop"):
        ds.random_resized_crop(24, scale=(0.5, 2.0))
    with pytest.raises(sh.InvalidArgumentError, match="interpolation"):
        ds.resize(10, interpolation="cubic")
    with pytest.raises(sh.InvalidArgumentError, match="std"):
        ds.normalize(0.5, 0.0)


def test_probe_image(tmp_path: Path) -> None:
    assert sh.probe_image(data("gray16.png")) == sh.ImageInfo("PNG", 64, 48, 1, 16)
    assert sh.probe_image(FIXTURES / "alpha.webp") == ("WebP", 64, 48, 4, 8)
    assert sh.probe_image(data("huge.png")).width == 100_000
    with pytest.raises(sh.SchemaError, match="GIF"):
        sh.probe_image(data("tiny.gif"))
