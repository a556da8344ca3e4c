"""``python -m noderig_lab.hub``: the lab Hub on its own (see the package's docstring)."""

import sys

from .server import main

sys.exit(main())
