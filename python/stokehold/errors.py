"""Errors and skip policies, as Python sees them: the exception classes (also importable from
``stokehold`` itself), the ``on_error`` argument of loaders, decoders and readers, and the
:class:`SkipLog` of what a pipeline left out.

Every op that can leave a failing element out (``ignore_errors()``, ``load_npy(on_error="skip")``,
``read_file(on_error="skip")``, decoders with ``on_error``, TFRecord readers skipping corrupt
records) counts it in a log; ``ds.skipped()`` gathers the logs of the whole pipeline, under any
later op, into one :class:`SkipLog`. Without such a policy an element's error is raised once
and the next ``next()`` goes on after it (tf.data's rule); an error that is not an element's (a
bad argument, a worker panic) ends the iterator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from ._args import fail
from ._native import (
    CancelledError,
    DataCorruptionError,
    InvalidArgumentError,
    OutOfRangeError,
    SchemaError,
    StateError,
    StokeholdError,
    StokeholdFileNotFoundError,
    StokeholdIOError,
    WorkerPanicError,
)

__all__ = [
    "ON_ERROR",
    "CancelledError",
    "DataCorruptionError",
    "InvalidArgumentError",
    "OutOfRangeError",
    "SchemaError",
    "SkipLog",
    "Skipped",
    "StateError",
    "StokeholdError",
    "StokeholdFileNotFoundError",
    "StokeholdIOError",
    "WorkerPanicError",
    "on_error",
]

#: The values ``on_error`` accepts.
ON_ERROR = ("raise", "skip")


def on_error(op: str, value: object) -> str:
    """An ``on_error`` argument of ``op`` as the native layer takes it: a str, whose spelling
    (``"raise"``, the default, or ``"skip"``) core checks, naming ``op`` (``Choice``)."""
    if not isinstance(value, str):
        raise fail(op, "on_error", value, "must be 'raise' or 'skip'")
    return value


#: One skipped element as the native ``Dataset.skipped()`` gives it: ``(index, message, at)``,
#: ``at`` being ``(file, offset, reason)`` for a corrupt record a reader skipped, else None.
NativeSkipped = Tuple[int, str, Optional[Tuple[str, int, str]]]


@dataclass(frozen=True)
class Skipped:
    """One element left out: its index in the op's input and the error, as its message (naming
    the op, and the file where there is one). For a corrupt record a reader skipped, ``file`` and
    ``offset`` (bytes) say where it is (the message names them too) and ``index`` is its ordinal
    in the file; both are None for other elements."""

    index: int
    error: str
    file: Optional[str] = None
    offset: Optional[int] = None


@dataclass(frozen=True)
class SkipLog:
    """What a pipeline's skipping ops left out so far: ``count`` in all, and the first few of
    each op (16) in detail. Falsy when nothing was skipped."""

    count: int = 0
    first: List[Skipped] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.count > 0

    @staticmethod
    def from_native(raw: Tuple[int, Sequence[NativeSkipped]]) -> SkipLog:
        """From the native ``Dataset.skipped()`` tuple ``(count, [(index, message, at), ...])``."""
        count, first = raw
        out = []
        for i, m, at in first:
            file, offset = (str(at[0]), int(at[1])) if at is not None else (None, None)
            out.append(Skipped(int(i), str(m), file, offset))
        return SkipLog(int(count), out)
