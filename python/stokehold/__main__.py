"""``python -m stokehold <command> ...``: the ``stokehold`` command (every verb; see
:mod:`stokehold._cli`), for when the venv's ``bin`` is not on the PATH."""

from ._cli import main

main()
