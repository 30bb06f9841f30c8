"""The ``stokehold`` command of the wheel (``[project.scripts]`` in pyproject.toml) and
``python -m stokehold``: the same Rust CLI as the ``stokehold`` binary (``crates/stokehold-cli``),
run inside the extension (``_native.cli_main``), with the same verbs, messages and exit codes."""

from __future__ import annotations

import signal
import sys
from typing import List, Optional

from . import _native

__all__ = ["main", "run"]


def run(argv: List[str], prog: str = "stokehold") -> int:
    """Runs the command line ``argv`` (without the program's name) and returns its exit code: 0,
    1 when the command failed, 2 when the arguments were refused. The command writes to the
    process's stdout and stderr; Python's buffers are flushed first so the output keeps its
    order."""
    sys.stdout.flush()
    sys.stderr.flush()
    return int(_native.cli_main([prog, *argv]))


def main(argv: Optional[List[str]] = None) -> int:
    """The script's entry point: Ctrl-C ends the command as it ends the binary (SIGINT's default
    action: the Rust code does not poll Python's signal flag), then ``sys.exit`` with its code."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(run(sys.argv[1:] if argv is None else argv))
