"""Render a Diagnosis: a readable report (rich) and the JSON form for machines."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..errors import QUOTED_LINE_LIMIT, one_line
from .result import Diagnosis

__all__ = ["render", "print_report", "to_json"]

_STYLE = {"healthy": "green", "unknown": "yellow"}


def to_json(diagnosis: Diagnosis, indent: int | None = 2) -> str:
    """At least: class, cause, evidence [{line, rank, lineno}], chain (outermost first), fix; for
    `healthy`, the stage the startup reached and whether the ready line was seen."""
    return diagnosis.to_json(indent)


def render(d: Diagnosis) -> Panel:
    style = _STYLE.get(d.cls, "red")
    head = Text()
    head.append(d.cls, style=f"bold {style}")
    if d.title:
        head.append(f"  {d.title}", style="bold")
    head.append(f"  (confidence {d.confidence:.2f})", style="dim")
    # the cause and the evidence quote the log: one line each, its control characters escaped (rich passes ESC and
    # bidirectional overrides through to the terminal)
    parts: list = [head, Text(one_line(d.cause, QUOTED_LINE_LIMIT))]
    if d.stage:
        parts.append(Text.assemble(("stage: ", "bold"), d.stage, ("  (ready line seen)" if d.ready else "", "dim")))
    if d.component:
        parts.append(Text.assemble(("component: ", "bold"), d.component))
    if d.ranks:
        parts.append(Text.assemble(("ranks: ", "bold"), ", ".join(d.ranks)))
    if d.evidence:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
        table.add_column("line", justify="right", style="dim", no_wrap=True)
        table.add_column("rank", style="cyan", no_wrap=True)
        table.add_column("evidence", overflow="fold")
        for e in d.evidence:
            table.add_row(str(e.lineno) if e.lineno else "", e.rank or "", Text(one_line(e.line, QUOTED_LINE_LIMIT)))
        parts += [Text("evidence", style="bold"), table]
    if d.chain:
        chain = Text()
        for i, label in enumerate(d.chain):
            if i:
                chain.append(" -> ", style="dim")
            chain.append(label)
        parts += [Text("call chain (outermost first)", style="bold"), chain]
    if d.cls == "healthy" and not d.ready:
        parts += [Text("if the server stopped", style="bold"), Text(d.fix)]
    if d.cls != "healthy":
        parts += [Text("fix", style="bold"), Text(d.fix)]
        if d.remedy:
            parts.append(Text.assemble(("remedy: ", "bold"), (d.remedy, "green"),
                                       (f"  (also: {', '.join(d.alternatives)})" if d.alternatives else "", "dim")))
        if d.also_seen:
            parts.append(Text.assemble(("seen later (consequences): ", "dim"), (", ".join(d.also_seen), "dim")))
    return Panel(Group(*parts), title="noderig diagnose", border_style=style, expand=False)


def print_report(d: Diagnosis, console: Console | None = None) -> None:
    (console or Console()).print(render(d))
