"""Rich's boxed tracebacks, read as the Python tracebacks they show.

A program that lets rich print its uncaught exception (typer's pretty exceptions, on whenever rich is
installed: TGI's `text-generation-server` and any typer CLI; `rich.traceback.install()`) prints no "File"
line. It draws a panel titled "Traceback (most recent call last)", each frame in it as "<path>:<line> in
<function>" (or "in <function>:<line>" for a file it cannot read), the source around the line that ran with
a "❱" (">" on a legacy console) on it, and with show_locals (typer's default) a nested panel of the
frame's local variables; under the panel, "<ExceptionName>: <message>" (rich/traceback.py,
Traceback._render_stack; the box is ROUNDED, SQUARE on a legacy Windows console, ASCII where the encoding
has no box characters). Every line of a panel has the panel's width, so left as printed a terminal's wrap
was read over them and the whole panel became one line, whose source and locals (`trust_remote_code =
False`, a comment's words) were read as the program's messages.

Each panel becomes what Python would have printed: the header, a "File" line per frame with the line that
ran under it, and nothing of the context lines, the locals or the borders. A panel is known by its title,
or, in a paste cut above its title, by its bottom border with an exception line under it and a line of source
the arrow marks inside it. A prefix a transport wrote before each line (a journal's, a container's) stays on
the line; it is what comes before the panel's width, or before its left side's column in a line a wide
character shortened. A box without those marks (a log viewer's pane, a table, a panel of settings) is left
alone.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["unboxed"]

_TB_HEADER = "Traceback (most recent call last):"
_TOP = re.compile(r"[╭┌+][─-]+ Traceback \(most recent call last\) [─-]+[╮┐+]$")
_BOTTOM = re.compile(r"[╰└+][─-]{8,}[╯┘+]$")
_SIDES = ("│", "|")
# a nested panel (the frame's locals) opens and closes inside the content
_NESTED_TOP = re.compile(r"^\s*[╭┌+][─-]")
_NESTED_BOTTOM = re.compile(r"^\s*[╰└+][─-]")
# a source line: its number after the pointer on the line that ran ("?" where the encoding has no "❱"), then
# rich's gutter (a space in an ASCII panel) and the code
_SOURCE = re.compile(r"^\s*(?P<ran>❱|>|\?)?\s*\d+(?: [│|]| |$)(?P<code>.*)$")
_HIDDEN = re.compile(r"^\s*\.\.\. \d+ frames? hidden \.\.\.\s*$")
# a frame's title, its wrapped pieces joined: "<path>:<line> in <function>" or "in <function>:<line>"
_TITLE = re.compile(r"^(?P<path>\S.*?):(?P<line>\d+) ?in ?(?P<func>[\w.<>]+)$")
_TITLE_NO_FILE = re.compile(r"^in ?(?P<func>[\w.<>]+):(?P<line>\d+)$")

Numbered = list[tuple[int, str]]
# a panel by the lines of its borders: (its width, the column its left side is at)
Box = tuple[int, int]


def unboxed(numbered: Numbered, plain: Callable[[str], str], is_exception: Callable[[str], object]) -> Numbered:
    """The lines, each rich traceback panel among them as Python prints a traceback. ``plain`` is a line
    without its colour codes, ``is_exception`` whether a message is an exception line."""
    if not any("─" in x or "--" in x for _, x in numbered):
        return numbered
    texts = [plain(x).rstrip() for _, x in numbered]
    untitled = _untitled_panels(texts, is_exception)
    out: Numbered = []
    i = 0
    while i < len(texts):
        panel = _titled_panel(texts, i) or untitled.get(i)
        if panel is None:
            out.append(numbered[i])
            i += 1
            continue
        end, box, titled = panel
        out.extend(_as_printed(numbered, texts, i, end, box, titled))
        i = end
    return out


def _titled_panel(texts: list[str], i: int) -> tuple[int, Box, bool] | None:
    """(the index after the panel, its box, True) when a panel's title is on line ``i``."""
    top = _TOP.search(texts[i])
    if top is None:
        return None
    box = (top.end() - top.start(), top.start())
    j = i + 1
    while j < len(texts) and _content(texts[j], box) is not None:
        j += 1
    return (j + 1 if j < len(texts) and _bottom(texts[j], box) else j), box, True


def _untitled_panels(texts: list[str], is_exception) -> dict[int, tuple[int, Box, bool]]:
    """The panels a paste cut above their title, by the index they start at: a bottom border with an
    exception line under it, and the lines of its box above it, one of them a line of source marked as the
    one that ran (a panel of anything else printed before a crash is no traceback)."""
    found = {}
    for j, text in enumerate(texts):
        m = _BOTTOM.search(text)
        if m is None:
            continue
        box = (m.end() - m.start(), m.start())
        after = next((x for x in texts[j + 1:j + 3] if x.strip()), "")
        if not is_exception(after[box[1]:]):
            continue
        k = j
        while k > 0 and _content(texts[k - 1], box) is not None:
            k -= 1
        if k < j and (k == 0 or not _TOP.search(texts[k - 1])) and any(
                (m := _SOURCE.match(_content(texts[n], box)[1].rstrip())) and m["ran"] for n in range(k, j)):
            found[k] = (j + 1, box, False)
    return found


def _content(text: str, box: Box) -> tuple[str, str] | None:
    """(the prefix before the panel, what is inside it: "│ " and " │" gone) on this line, or None when it is no line
    of the panel. The panel's width finds it behind a prefix of another length (a time with fewer digits); its
    left side's column, in a line a wide character made shorter (a CJK path takes two cells of one character)."""
    width, left = box
    if not text.endswith(_SIDES):
        return None
    if len(text) >= width and text[-width] in _SIDES:
        return text[:-width], text[2 - width:-2]
    if len(text) > left + 3 and text[left] in _SIDES:
        return text[:left], text[left + 2:-2]
    return None


def _bottom(text: str, box: Box) -> bool:
    m = _BOTTOM.search(text)
    return m is not None and m.end() - m.start() == box[0]


def _as_printed(numbered: Numbered, texts: list[str], start: int, end: int, box: Box, titled: bool) -> Numbered:
    """The panel's lines [start, end) as Python prints the traceback: each line keeps its number and the prefix
    before the panel; the context lines, the locals and the borders go."""
    out: Numbered = [(numbered[start][0], (_content(texts[start], box) or (texts[start][:box[1]], ""))[0] + _TB_HEADER)]
    title: list[tuple[int, str, str]] = []  # a frame's title as rich wrapped it: (number, prefix, piece)
    nested = False
    for k in range(start + 1 if titled else start, end):
        line = _content(texts[k], box)
        if line is None:  # the bottom border
            break
        prefix, inner = line
        ended = inner.rstrip()
        starts_piece = bool(ended) and not inner[:1].isspace() and not nested
        if title and not (starts_piece and not _NESTED_TOP.match(inner)):
            out.append(_frame_line(title, box[0]))
            title = []
        if nested or _NESTED_TOP.match(inner):
            nested = not (nested and _NESTED_BOTTOM.match(inner))
            continue
        source = _SOURCE.match(ended)
        if source is not None:
            if source["ran"] and source["code"]:
                out.append((numbered[k][0], f"{prefix}    {source['code'].lstrip(' │|')}"))
        elif starts_piece and not _HIDDEN.match(ended):
            title.append((numbered[k][0], prefix, inner))
    if title:
        out.append(_frame_line(title, box[0]))
    return out


def _frame_line(title: list[tuple[int, str, str]], width: int) -> tuple[int, str]:
    """The "File" line of a frame whose title rich wrapped into these pieces: a piece that fills the panel was
    folded inside a word (a long path), any other ends at a space."""
    text = "".join(piece if _cells(piece.rstrip()) >= width - 4 else piece.rstrip() + " " for _, _, piece in title).strip()
    no, prefix = title[0][0], title[0][1]
    m = _TITLE.match(text) or _TITLE_NO_FILE.match(text)
    if m is None:
        return no, prefix + text
    path = m.groupdict().get("path") or "<unknown>"
    return no, f'{prefix}  File "{path}", line {m["line"]}, in {m["func"]}'


def _cells(text: str) -> int:
    """The terminal cells ``text`` takes, as rich counts them: two for a wide character (CJK), one for another."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
