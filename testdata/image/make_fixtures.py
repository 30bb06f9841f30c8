"""Makes the image fixtures (run with /work/venvs/bench/bin/python, which has Pillow and numpy).

    python testdata/image/make_fixtures.py

Writes, next to this script:
* JPEG: baseline.jpg (4:2:0), progressive.jpg, q444.jpg (no chroma subsampling), gray.jpg;
  each with <name>.pil.npy, Pillow's decode (the PSNR reference).
* PNG: rgb8, rgba8, gray8, la8, palette, palette_trns (tRNS), gray16, rgb16 (our own tiny
  encoder: Pillow cannot write 16-bit RGB); each with <name>.npy, exactly the pixels written
  (palette files: the expanded RGB / RGBA).
* WebP: lossless.webp + .npy (exact), lossy.webp + .pil.npy, alpha.webp + .npy (lossless RGBA).
* Unsupported: tiny.gif, tiny.bmp.
* Hostile headers (valid signatures and CRCs, absurd sizes): zero.png (0x0), huge.png
  (100000x100000), huge.jpg (65535x65535, JPEG's maximum), zero.jpg (0 lines), huge.webp
  (VP8X canvas 100000x100000).
Truncated and corrupt variants are cut from these by the tests themselves.
"""

import io
import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
H, W = 48, 64  # not multiples of 16, so partial MCUs are exercised


def scene(seed: int = 0) -> np.ndarray:
    """A smooth-ish RGB image with edges and some noise, like a photo at low resolution."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    r = 128 + 100 * np.sin(x / 9.0)
    g = 128 + 100 * np.cos(y / 7.0)
    b = 255 * (x + y) / (H + W)
    img = np.stack([r, g, b], axis=-1)
    img[10:30, 20:40] = [240, 30, 30]  # a red block: sharp edges
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def save(name: str, img: Image.Image, **kw) -> None:
    img.save(HERE / name, **kw)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(width: int, height: int, depth: int, color: int, rows: bytes) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)
            + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


def rgb16_png(a: np.ndarray) -> bytes:
    h, w, _ = a.shape
    rows = b"".join(b"\x00" + a[i].astype(">u2").tobytes() for i in range(h))
    return png_bytes(w, h, 16, 2, rows)


def jpeg_sof(width: int, height: int) -> bytes:
    """baseline.jpg with its frame header (SOF0) patched to claim width x height."""
    data = bytearray((HERE / "baseline.jpg").read_bytes())
    at = data.index(b"\xff\xc0")
    data[at + 5:at + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def webp_vp8x(width: int, height: int) -> bytes:
    """A WebP whose extended header (VP8X) claims a width x height canvas."""
    vp8x = bytes([0, 0, 0, 0]) + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    body = b"WEBP" + b"VP8X" + struct.pack("<I", len(vp8x)) + vp8x
    return b"RIFF" + struct.pack("<I", len(body)) + body


def main() -> None:
    rgb = scene()
    im = Image.fromarray(rgb)
    # JPEG, compared with Pillow's decode of the same file.
    save("baseline.jpg", im, quality=90)
    save("progressive.jpg", im, quality=90, progressive=True)
    save("q444.jpg", im, quality=95, subsampling=0)
    save("gray.jpg", im.convert("L"), quality=90)
    for name in ["baseline", "progressive", "q444", "gray"]:
        dec = np.asarray(Image.open(HERE / f"{name}.jpg"))
        np.save(HERE / f"{name}.pil.npy", dec.reshape(dec.shape[0], dec.shape[1], -1))

    # PNG: exactly the pixels written.
    rng = np.random.default_rng(1)
    alpha = rng.integers(0, 256, (H, W, 1), dtype=np.uint8)
    rgba = np.concatenate([rgb, alpha], axis=-1)
    gray = np.asarray(im.convert("L"))
    save("rgb8.png", im)
    np.save(HERE / "rgb8.npy", rgb)
    save("rgba8.png", Image.fromarray(rgba, "RGBA"))
    np.save(HERE / "rgba8.npy", rgba)
    save("gray8.png", Image.fromarray(gray, "L"))
    np.save(HERE / "gray8.npy", gray[..., None])
    la = np.stack([gray, alpha[..., 0]], axis=-1)
    save("la8.png", Image.fromarray(la, "LA"))
    np.save(HERE / "la8.npy", la)
    pal = im.quantize(colors=16)
    save("palette.png", pal)
    np.save(HERE / "palette.npy", np.asarray(pal.convert("RGB")))
    pal_t = pal.copy()
    pal_t.info["transparency"] = 3
    save("palette_trns.png", pal_t, transparency=3)
    np.save(HERE / "palette_trns.npy", np.asarray(Image.open(HERE / "palette_trns.png").convert("RGBA")))
    g16 = (rng.integers(0, 65536, (H, W), dtype=np.uint16))
    save("gray16.png", Image.fromarray(g16.astype(np.int32), "I").convert("I;16"))
    back = np.asarray(Image.open(HERE / "gray16.png")).astype(np.uint16)
    assert (back == g16).all(), "Pillow did not round-trip the 16-bit gray PNG"
    np.save(HERE / "gray16.npy", g16[..., None])
    rgb16 = rng.integers(0, 65536, (H, W, 3), dtype=np.uint16)
    (HERE / "rgb16.png").write_bytes(rgb16_png(rgb16))
    np.save(HERE / "rgb16.npy", rgb16)

    # WebP.
    save("lossless.webp", im, lossless=True)
    np.save(HERE / "lossless.npy", rgb)
    save("lossy.webp", im, quality=90)
    np.save(HERE / "lossy.pil.npy", np.asarray(Image.open(HERE / "lossy.webp").convert("RGB")))
    save("alpha.webp", Image.fromarray(rgba, "RGBA"), lossless=True, exact=True)
    np.save(HERE / "alpha.npy", rgba)

    # Formats we do not decode.
    small = im.resize((8, 6))
    buf = io.BytesIO()
    small.save(buf, format="GIF")
    (HERE / "tiny.gif").write_bytes(buf.getvalue())
    save("tiny.bmp", small)

    # Hostile headers.
    (HERE / "zero.png").write_bytes(png_bytes(0, 0, 8, 2, b""))
    (HERE / "huge.png").write_bytes(png_bytes(100_000, 100_000, 8, 2, b"\x00" * 16))
    (HERE / "huge.jpg").write_bytes(jpeg_sof(65535, 65535))
    (HERE / "zero.jpg").write_bytes(jpeg_sof(64, 0))
    (HERE / "huge.webp").write_bytes(webp_vp8x(100_000, 100_000))


if __name__ == "__main__":
    main()
