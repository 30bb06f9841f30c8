"""``python -m stokehold demo``: see :mod:`stokehold.demo`."""

import sys

from .demo import main

sys.exit(main())
