"""Keyed randomness for Python functions: one numpy generator per element.

Every random choice in stokehold is a function of (seed, epoch, index), never of the thread or
the order in which elements arrive, so a pipeline gives the same elements at 1 thread or 16,
after ``epochs()`` or a checkpoint resume. :meth:`stokehold.Dataset.random_map` hands its
function the generator below; code that runs elements elsewhere (another process, a custom
loop) gets the same draws by calling :func:`element_rng` with the same three numbers.

The derivation, fixed so that outputs are stable across releases: ``element_key(seed, epoch,
index)`` is ``hi << 64 | lo`` where ``hi`` and ``lo`` are the first two outputs of stokehold's
keyed SplitMix64 generator for ``random_map``'s stream
(``stokehold_core::rng::Rng::for_element(seed, Stream::RandomMap, epoch, index)``: a chained
hash in which seed, stream, epoch and index each play their own role), and the generator is
``numpy.random.Generator(numpy.random.Philox(key=element_key(...)))``. ``index`` is the
element's position within its epoch (for a stream, its position in the stream).
"""

from __future__ import annotations

import numpy as np

from . import _args, _native

__all__ = ["element_key", "element_rng"]


def element_key(seed: int, epoch: int, index: int) -> int:
    """The 128-bit key of element ``index`` of epoch ``epoch`` under ``seed`` (see the module
    docstring for the derivation)."""
    op = "element_key"
    return _native.element_key(_args.count(op, "seed", seed, 0, _args.MAX_U64),
                               _args.count(op, "epoch", epoch, 0, _args.MAX_U64),
                               _args.count(op, "index", index, 0, _args.MAX_U64))


def element_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """A numpy ``Generator`` (Philox) keyed by (seed, epoch, index): what ``random_map`` passes
    its function for that element."""
    return np.random.Generator(np.random.Philox(key=element_key(seed, epoch, index)))
