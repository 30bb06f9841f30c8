"""The per-element work every peer runs: the same Python/numpy functions for all of them.

Kept in one place so that Grain, SPDL and dataloader-rs differ only in how they schedule the
work (their own threads, queues and batching), never in the work itself.
"""

import numpy as np

NPY_HEADER = 128  # the lazy-file workload writes 128-byte .npy headers (it asserts so)


def load_npy(path):
    """What the lazy-file workload's map does: read one .npy file into a float32 vector."""
    return np.load(path)


def pad_batch(arrays):
    """padded_batch: a (len, longest) float32 matrix, zeros after each vector's end."""
    longest = max(len(a) for a in arrays)
    out = np.zeros((len(arrays), longest), dtype=np.float32)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a
    return out


#: The CPU-bound map's batch where a system yields batches (dataloader-rs's DataLoader, and
#: stokehold's like-for-like row beside it); 64 matches the file workload's batch.
CPU_BATCH = 64


def sin_work(work):
    """The CPU-bound map: sum of `work` sin() values offset by the element (numpy, vectorised)."""
    base = np.arange(work, dtype=np.float32) * np.float32(1e-3)

    def f(x):
        return float(np.sin(base + np.float32(x)).sum())

    return f


def random_crop(clip, crop):
    """The audio cache workload's crop: ``crop`` samples from a uniform random start (numpy's
    global generator, as torch's Dataset there draws it), the clip itself when shorter."""
    start = np.random.randint(0, max(len(clip) - crop, 0) + 1)
    return clip[start:start + crop]


def caption_order(n_captions, n_images, seed):
    """The table workload's shuffled caption -> image ids (as bench/table/bench.py makes them)."""
    ids = (np.arange(n_captions) * n_images // n_captions).astype(np.int64)
    return np.random.default_rng(seed).permutation(ids)


def check_rows(ids, feats, width):
    """Row i of the generated table holds i + j / width: a peer must return the right rows."""
    want = ids.astype(np.float32)[:, None] + np.arange(width, dtype=np.float32) / width
    if feats.shape != (len(ids), width) or not np.array_equal(feats, want):
        raise AssertionError("wrong rows gathered")


# ---- images (bench/image) and audio clips (bench/audio_decode): torch's rows run these too -----

IMAGE_MEAN, IMAGE_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def one_torch_thread():
    """One torch intra-op thread per loader thread, as DataLoader gives each of its workers."""
    import torch
    torch.set_num_threads(1)


class ImageOp:
    """JPEG path -> (3, 224, 224) float32: decode, torchvision v2 RandomResizedCrop(224,
    antialias) + RandomHorizontalFlip + ToImage/ToDtype + Normalize (ImageFolder's recipe).

    ``decoder``: "pil" (PIL open + convert("RGB")), "tvio" (torchvision.io.decode_jpeg,
    libjpeg-turbo) or "spdl.io" (spdl.io.load_image, FFmpeg). ``as_numpy``: return the tensor's
    array (zero-copy) for loaders that collate with numpy; ``one_thread``: one torch thread in
    this process (the peers' threads share it; DataLoader's workers have one each). A class, not a closure, so Grain's
    worker processes can pickle it; the transform is built on first use in each process.
    """

    def __init__(self, decoder="pil", as_numpy=False, one_thread=False):
        self.decoder, self.as_numpy, self.one_thread, self._tf = decoder, as_numpy, one_thread, None

    def _transform(self):
        import torch
        from torchvision.transforms import v2
        return v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                           v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                           v2.Normalize(IMAGE_MEAN, IMAGE_STD)])

    def __getstate__(self):
        return dict(self.__dict__, _tf=None)

    def augment(self, img):
        """The transforms alone, on an image decoded elsewhere (a PIL image or a CHW uint8
        tensor): what a loader that decodes natively (datago) leaves to Python."""
        if self._tf is None:
            if self.one_thread:
                one_torch_thread()
            self._tf = self._transform()
        out = self._tf(img)
        return out.numpy() if self.as_numpy else out

    def __call__(self, path):
        if self.decoder == "pil":
            from PIL import Image
            with Image.open(path) as im:
                return self.augment(im.convert("RGB"))
        if self.decoder == "tvio":
            import torchvision.io as tio
            return self.augment(tio.decode_jpeg(tio.read_file(path)))
        import spdl.io
        import torch
        hwc = spdl.io.to_numpy(spdl.io.load_image(path))  # HWC uint8 (rgb24)
        return self.augment(torch.from_numpy(hwc).permute(2, 0, 1))


def spdl_io_decoder(probe):
    """"spdl.io" when spdl.io decodes ``probe`` here, else ("pil", why not): SPDL's native
    decoder needs the system's FFmpeg libraries (libavutil)."""
    try:
        ImageOp("spdl.io")(probe)
        return "spdl.io", None
    except Exception as e:  # noqa: BLE001 - the reason goes into the row's note
        msg = str(e)
        if "libavutil" in msg:
            return "pil", "FFmpeg's shared libraries (libavutil) are not installed"
        return "pil", f"{type(e).__name__}: {msg.splitlines()[0][:160]}"


AUDIO_RATE, AUDIO_CROP, AUDIO_N_FFT, AUDIO_HOP, AUDIO_N_MELS = 16000, 3.0, 400, 160, 64


class LogMelOp:
    """Audio path -> (1, 64, 301) float32 log-mel of a random 3 s window: soundfile seeks to the
    window (sf.SoundFile.seek + read), mono mean, zero-pad a short clip, torchaudio's
    MelSpectrogram (n_fft 400, hop 160, 64 mels) + AmplitudeToDB. The window's start comes from
    Python's ``random`` (torch seeds it in each worker). A class for Grain's pickling, like
    ImageOp."""

    def __init__(self, as_numpy=False, one_thread=False):
        self.as_numpy, self.one_thread, self._mods = as_numpy, one_thread, None

    def __getstate__(self):
        return dict(self.__dict__, _mods=None)

    def __call__(self, path):
        import random

        import soundfile as sf
        import torch
        import torchaudio
        if self._mods is None:
            if self.one_thread:
                one_torch_thread()
            self._mods = (torchaudio.transforms.MelSpectrogram(
                sample_rate=AUDIO_RATE, n_fft=AUDIO_N_FFT, hop_length=AUDIO_HOP,
                n_mels=AUDIO_N_MELS), torchaudio.transforms.AmplitudeToDB(stype="power"))
        mel, db = self._mods
        size = int(AUDIO_CROP * AUDIO_RATE)
        with sf.SoundFile(path) as f:
            start = random.randrange(max(1, f.frames - size + 1))
            f.seek(start)
            x = f.read(size, dtype="float32", always_2d=True)
        x = torch.from_numpy(x.mean(axis=1))
        if len(x) < size:
            x = torch.nn.functional.pad(x, (0, size - len(x)))
        out = db(mel(x)).unsqueeze(0)
        return out.numpy() if self.as_numpy else out
