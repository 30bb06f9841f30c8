"""glibc's malloc thresholds, as stokehold set them when it was imported."""

from typing import Dict, Optional, Union

from ._native import _malloc_tuning


def malloc_tuning() -> Dict[str, Union[str, Optional[int]]]:
    """What stokehold did to glibc's malloc thresholds when it was imported.

    numpy arrays of 128 KiB or more made and dropped per element (a decoded clip, its spectrum)
    are, with glibc's defaults, mapped and unmapped, or given back to the kernel from the top of
    the heap, every time: each page is faulted in afresh. glibc raises its thresholds itself
    once it frees a block it had mapped; on import stokehold maps and frees one 4 MiB block, so
    that glibc's rule starts at 4 MiB (``M_MMAP_THRESHOLD``) and 8 MiB (``M_TRIM_THRESHOLD``)
    for the process (Python's and numpy's memory; stokehold's own uses mimalloc), unless the
    environment already sets malloc's behaviour (``GLIBC_TUNABLES`` with a ``glibc.malloc.``
    setting, or a ``MALLOC_*_`` variable) or ``STOKEHOLD_MALLOC_TUNING=0``. The cost is about
    8 MiB of free memory kept at the top of each malloc arena. ``docs/GUIDE.md`` ("glibc's
    malloc thresholds") says more.

    Returns ``{"by": ..., "mmap_threshold": ..., "trim_threshold": ...}``: ``by`` is
    ``"stokehold"`` (the thresholds, in bytes, are where glibc's rule started), ``"environment"``,
    ``"opted out"`` or ``"unsupported"`` (not glibc); the thresholds are None unless stokehold
    set them.

        >>> import stokehold
        >>> stokehold.malloc_tuning()["by"] in ("stokehold", "environment", "opted out", "unsupported")
        True
    """
    return dict(_malloc_tuning())
