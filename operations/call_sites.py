"""Where pyinfra records each operation's call site, without reading source files.

pyinfra orders a deploy file's operations by the line numbers of the stack that called each
(``pyinfra.api.util.get_operation_order_from_stack``), with ``inspect.stack()`` and
``inspect.getframeinfo()`` at their default context of one source line: for every frame of
every operation on every host that reads the frame's source (``inspect.findsource``, which
looks the module up by scanning ``sys.modules``). Only file names and line numbers are used.
With a context of zero lines the same frames, file names and line numbers come back without
reading any source: measured with ``bench/noop.py`` (a converged fleet's rerun spent about a
fifth of its deploy-file load there). ``install`` swaps the two names pyinfra's module uses.
"""

from __future__ import annotations

import inspect
from functools import partial

import pyinfra.api.util as pyinfra_util


def install() -> None:
    """Idempotent: the deploy file runs once per host."""
    pyinfra_util.stack = partial(inspect.stack, 0)
    pyinfra_util.getframeinfo = partial(inspect.getframeinfo, context=0)
