"""The one way an adapter imports its optional framework: ``with needs("torch",
"stokehold.torch.as_torch"): import torch`` turns a framework that is not installed into an
ImportError naming the extra that installs it (the extras of pyproject.toml, read from the
installed package's metadata, so the hint and the extras cannot drift apart)."""

from __future__ import annotations

import contextlib
import importlib.metadata
from typing import Iterator, List


def _install_hint(extra: str) -> str:
    """How to install ``extra``: the extra itself, and its requirements as plain pip arguments
    (what works where stokehold was installed from a clone or a wheel file)."""
    try:
        reqs = importlib.metadata.requires("stokehold") or []
    except importlib.metadata.PackageNotFoundError:
        reqs = []
    wanted: List[str] = []
    for r in reqs:
        spec, _, marker = r.partition(";")
        if marker.replace('"', "'").replace(" ", "") == f"extra=='{extra}'":
            wanted.append(spec.strip().replace(" ", ""))
    plain = " ".join(f"'{w}'" for w in wanted) if wanted else extra
    return f"pip install 'stokehold[{extra}]' (from a clone: pip install '.[{extra}]'), or pip install {plain}"


@contextlib.contextmanager
def needs(extra: str, user: str) -> Iterator[None]:
    """Runs the imports in the ``with`` body; a module that is missing (not installed, or set
    to None in ``sys.modules``) raises an ImportError saying that ``user`` needs it and how to
    install ``extra``. A framework that is installed but fails to import keeps its own error."""
    try:
        yield
    except ModuleNotFoundError as e:
        missing = (e.name or extra).split(".")[0]
        raise ImportError(
            f"{user} needs the optional module {missing!r}, which is not installed: {_install_hint(extra)}",
            name=missing,
        ) from e
