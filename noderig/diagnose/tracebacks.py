"""Python tracebacks in a log, parsed per rank, and their call chains.

Several ranks print their tracebacks interleaved line by line; each rank's lines are parsed
on their own. A traceback holds its chained sections ("The above exception was the direct
cause...", "During handling...") and remembers the echoed source lines under its frames
(never evidence). ``format_chain`` turns frames into ``module.function`` labels without the
wrapper and standard-library noise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .normalize import IPY_CELL, IPY_FRAME, IPY_HEADER, Line

__all__ = ["Frame", "Traceback", "TracebackSection", "assert_expression", "exception_type", "format_chain",
           "parse_tracebacks", "traceback_chain"]

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
# a frame line the paste cut before its function (inside the path, or after it): where it ran is still known
_CUT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)(?:"(?:, line (?P<line>\d+))?)?\s*$')
_CONNECTOR = re.compile(r"^\s*(?P<kind>The above exception was the direct cause of the following exception:|"
                        r"During handling of the above exception, another exception occurred:)")
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_TB_START = "Traceback (most recent call last):"
# IPython's / Jupyter's traceback (ultratb; its header and frames: normalize's IPY_*): a frame may also be
# "<path> in <name>(<arguments>)" with the line only in the arrow below it (IPython 7, Colab); the source shown
# under a frame is numbered, the line that ran behind an arrow ("--> 177 ...", "----> 3 ..."), lines left out "(...)"
_IPY7_FRAME = re.compile(r"^\s*(?P<file>(?:[~/.]|[A-Za-z]:\\)\S*\.py|<ipython-input-[\w-]+>) in (?P<func>[\w.<>]+)\(?")
_IPY_SOURCE = re.compile(r"^\s*(?:-+>\s*\d+\b|\d+\s|\(\.\.\.\)\s*$)")


@dataclass
class Frame:
    file: str
    line: int
    function: str

    @property
    def module(self) -> str:
        name = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        return name[:-3] if name.endswith(".py") else name

    def label(self) -> str:
        return f"{self.module}.{self.function}"


@dataclass
class TracebackSection:
    frames: list[Frame] = field(default_factory=list)
    exc_type: str | None = None
    message: str = ""
    exc_index: int | None = None  # index (into the normalised lines) of the exception line
    start_index: int = 0
    link: str | None = None  # how the NEXT section relates: "cause" / "context"


@dataclass
class Traceback:
    rank: str | None
    sections: list[TracebackSection]
    start_index: int
    end_index: int
    code_lines: set[int] = field(default_factory=set)  # echoed source lines and carets, never evidence

    @property
    def final(self) -> TracebackSection:
        return self.sections[-1]

    def section_at(self, index: int) -> TracebackSection | None:
        for s in self.sections:
            end = s.exc_index if s.exc_index is not None else self.end_index
            if s.start_index <= index <= end + 3:
                return s
        return None


_NOISE_FUNCS = {"_call_impl", "_wrapped_call_impl", "decorate_context", "_run_code", "_run_module_as_main",
                "inner", "wrapper", "wrapped", "_fn", "__call__", "<lambda>", "<listcomp>", "<genexpr>",
                "<dictcomp>", "<module>"}


def exception_type(text: str) -> str | None:
    """The unqualified exception type a line starts with, as the parser reads an exception line
    ("TypeError: x" and "torch.OutOfMemoryError: x" -> "TypeError", "OutOfMemoryError"); else None."""
    m = _EXC.match(text.strip().split("\n", 1)[0])
    return m.group("type").rsplit(".", 1)[-1] if m else None


def _is_noise(frame: Frame) -> bool:
    f = frame.file.replace("\\", "/")
    if f.startswith("<"):
        return True
    if frame.function in _NOISE_FUNCS:
        return True
    # the standard library (not site-/dist-packages): subprocess, threading, runpy, importlib, ...
    if re.search(r"/lib/python3[\d.]*/(?!site-packages|dist-packages)[^/]+(/|\.py$)", f):
        return True
    return bool(re.search(r"/torch/(nn/modules/module|utils/_contextlib|_dynamo/eval_frame)\.py$", f))


def format_chain(frames: list[Frame]) -> list[str]:
    """`module.function` labels, outermost first, without wrapper/stdlib noise or repeats."""
    out: list[str] = []
    for fr in frames:
        if _is_noise(fr):
            continue
        label = fr.label()
        if not out or out[-1] != label:
            out.append(label)
    return out


def parse_tracebacks(lines: list[Line]) -> list[Traceback]:
    """Every Python traceback, parsed separately per rank (so two ranks' tracebacks printed
    interleaved line by line come out as two). Chained sections ("The above exception was the
    direct cause...", "During handling...") belong to one Traceback."""
    groups: dict[str | None, list[int]] = {}
    for i, ln in enumerate(lines):
        groups.setdefault(ln.rank, []).append(i)
    result: list[Traceback] = []
    for rank, idxs in groups.items():
        parser = _RankParser(rank, lines, result)
        for i in idxs:
            parser.feed(i)
        parser.finish()
    result.sort(key=lambda t: t.start_index)
    return result


class _RankParser:
    """The traceback state machine over one rank's lines. A traceback opens at its header (or,
    in a cut excerpt, at its first frame) and reads, by state: ``frames`` (frame lines, the
    echoed source under them, then the exception line), ``message`` (the exception message's
    continuation lines), ``between`` (after a blank line or a chain connector: another section
    may follow). Any other line closes it; with no traceback open the state is ``idle``.
    Closed tracebacks are appended to ``result``."""

    def __init__(self, rank: str | None, lines: list[Line], result: list[Traceback]):
        self.rank, self.lines, self.result = rank, lines, result
        self.tb: Traceback | None = None
        self.sec: TracebackSection | None = None
        self.state = "idle"  # idle | frames | message | between
        self.pending_link: str | None = None  # a connector was read: the next header chains to it
        self.msg_lines = 0
        self.prev_frame = False  # the line before was a frame (the next may be its echoed source)
        self.base = 0  # the traceback's own indentation: pip and quoting indent a whole traceback
        self.ipython = False  # IPython printed it: its numbered source lines are the frames' echo

    def feed(self, i: int) -> None:
        text = self.lines[i].text
        if _TB_START in text or IPY_HEADER.match(text):
            self._header(i)
            return
        if self.tb is None:
            if _FRAME.match(text) is None and IPY_FRAME.match(text) is None:
                return
            # a traceback whose header was cut off (an excerpt, a paste): start at its first frame
            self._open(i, base=max(0, _indent(text) - 2))  # frames sit two columns in
        m = _CONNECTOR.match(text)
        if m:
            self.pending_link = "cause" if "direct cause" in m["kind"] else "context"
            self.state, self.tb.end_index = "between", i
        elif self.state == "frames":
            self._in_frames(i, text)
        elif self.state == "message":
            self._in_message(i, text.strip())
        elif self.state == "between" and text.strip():
            self._close()

    def finish(self) -> None:
        if self.tb is not None:
            self.result.append(self.tb)
        for tb in self.result:
            if tb.rank == self.rank:
                _raise_stands_for_cut_exception(tb, self.lines)

    def _open(self, i: int, base: int) -> None:
        self.base = base
        text = self.lines[i].text
        self.ipython = bool(IPY_HEADER.match(text) or IPY_FRAME.match(text))
        self.sec = TracebackSection(start_index=i)
        self.tb = Traceback(self.rank, [self.sec], i, i)
        self.state, self.pending_link, self.msg_lines, self.prev_frame = "frames", None, 0, False

    def _close(self) -> None:
        self.result.append(self.tb)
        self.tb, self.sec, self.state = None, None, "idle"

    def _header(self, i: int) -> None:
        """A traceback header: a chained section of the open traceback after a connector, else
        a new traceback (closing the open one)."""
        if self.tb is not None and self.pending_link is not None:
            self.tb.sections[-1].link = self.pending_link
            self.sec = TracebackSection(start_index=i)
            self.tb.sections.append(self.sec)
        else:
            if self.tb is not None:
                self.result.append(self.tb)
            self._open(i, base=_indent(self.lines[i].text))
        self.pending_link, self.state, self.msg_lines, self.prev_frame = None, "frames", 0, False
        self.tb.end_index = i

    def _in_frames(self, i: int, text: str) -> None:
        stripped = text.strip()
        frame = _frame(text)
        if frame:
            self.sec.frames.append(frame)
            self.tb.end_index, self.prev_frame = i, True
            return
        em = _EXC.match(stripped)
        after_frame, self.prev_frame = self.prev_frame, False
        if (not stripped or _indent(text) > self.base or stripped.startswith("[Previous line repeated")
                # the echoed source: IPython numbers it; Python's, even unindented, is the line after a frame
                or (_IPY_SOURCE.match(text) if self.ipython else after_frame and em is None)):
            if stripped and self.sec.frames:
                self.tb.code_lines.add(i)
            elif not stripped:
                self.prev_frame = after_frame  # blank lines inside a paste keep the frame's context
            self.tb.end_index = i
            return
        if em and (self.sec.frames or "." in em["type"] or em["type"][:1].isupper()):
            message = (em["msg"] or "").strip() or assert_expression(self.lines, i, em["type"])
            self.sec.exc_type, self.sec.message, self.sec.exc_index = em["type"], message, i
            self.state, self.msg_lines, self.tb.end_index = "message", 0, i
            return
        self._close()

    def _in_message(self, i: int, stripped: str) -> None:
        if not stripped:
            self.state, self.tb.end_index = "between", i
        elif self.msg_lines < 12 and not self.lines[i].prefixed:
            self.sec.message = (self.sec.message + "\n" + stripped).strip()
            self.msg_lines += 1
            self.tb.end_index = i
        else:
            self._close()


def _frame(text: str) -> Frame | None:
    """The frame a line names: Python's ("File "x.py", line 3, in f", or cut inside it: the function is not known)
    or IPython's (its qualified name read as the function's own: "LLM.__init__" is "__init__")."""
    fm = _FRAME.match(text) or _CUT_FRAME.match(text) or IPY_FRAME.match(text) or _IPY7_FRAME.match(text)
    if fm:
        func = (fm.groupdict().get("func") or "").rsplit(".", 1)[-1]
        return Frame(fm["file"], int(fm.groupdict().get("line") or 0), func)
    cell = IPY_CELL.match(text)
    return Frame("<cell>", int(cell[1]), "<module>") if cell else None


# the statement that ran, as Python echoes it or behind IPython's arrow ("--> 118 assert cuda_home is not None")
_RAN = r"^\s*(?:-+>\s*\d+\s)?\s*"
_RAISE = re.compile(_RAN + r"raise (?P<type>[A-Za-z_][\w.]*)\((?P<rest>.*)$")
_STRING = re.compile(r"""f?(["'])(?P<s>(?:(?!\1).)*)\1""")


def _raise_stands_for_cut_exception(tb: Traceback, lines: list[Line]) -> None:
    """A traceback cut before its exception line (an excerpt, a paste that stopped early) whose
    last echoed source line is a ``raise Error("message" ...)``: that statement is the exception.
    Its line stops being an echoed source line, and its string literals (the statement may span
    the next echoed lines) become the section's message."""
    sec = tb.final
    if sec.exc_index is not None or not sec.frames or not tb.code_lines:
        return
    raises = [j for j in sorted(tb.code_lines) if j >= sec.start_index and _RAISE.match(lines[j].text)]
    if not raises:
        return
    last = raises[-1]
    m = _RAISE.match(lines[last].text)
    parts = [m["rest"]] + [lines[j].text for j in range(last + 1, tb.end_index + 1) if j in tb.code_lines]
    sec.exc_type, sec.exc_index = m["type"].rsplit(".", 1)[-1], last
    sec.message = "".join(x["s"] for part in parts for x in _STRING.finditer(part)).strip()
    tb.code_lines.discard(last)


_ASSERT = re.compile(_RAN + r"assert\s+(?P<expr>\S.*)$")


def assert_expression(lines: list[Line], index: int, exc_type: str) -> str:
    """A bare ``AssertionError`` (no message) stands for the ``assert`` statement Python echoed on
    the line before it: its expression is what failed, so it is the exception's message. The
    statement is the nearest line that is not blank nor carets among the four above: the
    statement, its carets (Python 3.11+) and the blank line a double-spaced paste adds after each."""
    if exc_type.rsplit(".", 1)[-1] != "AssertionError":
        return ""
    before = [ln.text for ln in lines[max(0, index - 4):index] if ln.text.strip() and ln.text.strip("^~ ")]
    m = _ASSERT.match(before[-1]) if before else None
    return m["expr"].strip() if m else ""


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def traceback_chain(tb: Traceback, section: TracebackSection | None = None) -> list[str]:
    """The call chain of a traceback, outermost first: the final section's frames (the full path
    from the entry point), followed by the matched earlier section's frames when those are a
    call path of their own (not a module-level import)."""
    chain = format_chain(tb.final.frames)
    if section is not None and section is not tb.final:
        extra = [label for label in format_chain(section.frames) if label not in chain]
        chain += extra
    return chain
