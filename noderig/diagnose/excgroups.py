"""Python's exception groups (3.11+), read as the tracebacks they hold.

anyio's and asyncio's task groups raise an ExceptionGroup (starlette's middleware, uvicorn's lifespan, any
`asyncio.TaskGroup`), and Python prints it with borders: every line of the group behind "| " at its depth,
"+ Exception Group Traceback (most recent call last):" over the group's own frames, and a rule such as
"+-+---------------- 1 ----------------" before each sub-exception's traceback (Lib/traceback.py,
TracebackException.format for exceptions with `exceptions`). Left as printed, no frame line starts a line
and no sub-exception's line is an exception line, so the cause inside the group was never read.

Peeled here line by line, behind a transport's prefix (a journal's, a container's), from a group's header
on (or from a frame, a header or an exception behind a border, in a paste cut inside a group): "| " goes, the header reads as a traceback's header, and a rule ends one traceback (a blank line) before
the next. A line with neither ends the group: "| " elsewhere (a table, a gutter) is left alone.
"""

from __future__ import annotations

import re

__all__ = ["GroupBorders"]

_HEADER = re.compile(r"^\s*(?:\+ |\| )?Exception Group Traceback \(most recent call last\):")
_BORDER = re.compile(r"^\s*\| ?")
# a frame, a header or an exception behind a border: a paste that starts inside a group, its header cut off
_BORDERED = re.compile(r'^\s*\| +(?:File "|Traceback \(most recent call last\)|[A-Za-z_][\w.]*(?:Error|Exception|Group)\b)')
# the rule before a sub-exception ("+-+---- 1 ----", "+---- 2 ----", "+---- ... ----" over those left out) and
# the one closing the group ("+------------------------------------")
_RULE = re.compile(r"^\s*\+[-+]*-+(?: (?:\d+|\.\.\.) -+)?$")
_TB_HEADER = "Traceback (most recent call last):"


class GroupBorders:
    """State across one log's lines: whether the line read is inside an exception group's borders."""

    def __init__(self) -> None:
        self.inside = False

    def peel(self, msg: str) -> str:
        """The message without the group's borders (a rule as a blank line); any other line as it is."""
        if _HEADER.match(msg):
            self.inside = True
            return _TB_HEADER
        if not self.inside and _BORDERED.match(msg) is None:
            return msg
        self.inside = True
        if _RULE.match(msg):
            return ""
        m = _BORDER.match(msg)
        if m is None:
            self.inside = False
            return msg
        inner = msg[m.end():]
        return _TB_HEADER if _HEADER.match(inner) else inner
