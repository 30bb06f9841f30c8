"""glibc's malloc thresholds: left alone by ``import stokehold``, tuned on request."""

from typing import Dict, Optional, Union

from ._native import _malloc_tuning, _tune_malloc


def tune_malloc() -> Dict[str, Union[str, Optional[int]]]:
    """Start glibc's own malloc thresholds at 4 MiB / 8 MiB for this process (opt-in).

    numpy arrays of 128 KiB or more made and dropped per element (a decoded clip, its spectrum)
    are, with glibc's defaults, mapped and unmapped, or given back to the kernel from the top of
    the heap, every time: each page is faulted in afresh. glibc raises its thresholds itself
    once it frees a block it had mapped; this maps and frees one 4 MiB block, so that glibc's
    rule starts at 4 MiB (``M_MMAP_THRESHOLD``) and 8 MiB (``M_TRIM_THRESHOLD``) for the whole
    process (Python's, numpy's and every other library's memory; stokehold's own uses mimalloc).

    The cost: memory freed below the thresholds stays in glibc's heap for reuse instead of going
    back to the system, so a process that builds something large from numpy arrays and drops
    them (a list of clips given to ``from_arrays``) stays larger. ``import stokehold`` does not
    call this; ``docs/GUIDE.md`` ("glibc's malloc thresholds") weighs the two.

    Left alone where the environment already sets malloc's behaviour (``GLIBC_TUNABLES`` with a
    ``glibc.malloc.`` setting, or a ``MALLOC_*_`` variable) and where libc is not glibc.
    Idempotent: later calls do nothing and return the first call's answer.

    Returns :func:`malloc_tuning`'s dict: ``by`` is ``"stokehold"``, ``"environment"`` or
    ``"unsupported"``.
    """
    return dict(_tune_malloc())


def malloc_tuning() -> Dict[str, Union[str, Optional[int]]]:
    """What :func:`tune_malloc` did to glibc's malloc thresholds, if anyone called it.

    Returns ``{"by": ..., "mmap_threshold": ..., "trim_threshold": ...}``: ``by`` is
    ``"not tuned"`` (nobody called ``tune_malloc``: glibc's defaults, or whatever the
    environment sets), ``"stokehold"`` (the thresholds, in bytes, are where glibc's rule
    started), ``"environment"`` (the environment sets malloc's behaviour, so ``tune_malloc``
    left it) or ``"unsupported"`` (not glibc); the thresholds are None unless stokehold set
    them.

        >>> import stokehold
        >>> stokehold.malloc_tuning()["by"] in ("not tuned", "stokehold", "environment", "unsupported")
        True
    """
    return dict(_malloc_tuning())
