"""Signature matching: which catalog classes a log's lines and tracebacks show, and which one is
the root cause (the first decisive evidence in time order, not the last error printed)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import accumulate

from .catalog import Catalog, CatalogClass
from .normalize import QUIET_LEVELS, Line, with_continuation
from .startup import SGLANG_EXCEPTION_RECORD
from .tracebacks import Traceback, TracebackSection, assert_expression

__all__ = ["Match", "find_matches", "pick_root", "related_traceback"]


@dataclass
class Match:
    """A class's signature seen at a line (the exception line, for an exception signature)."""

    cls: CatalogClass
    index: int
    strong: bool  # evidence (True) or symptom (False)
    alone: bool = False  # a symptom that names the class only when nothing failed before it (CatalogClass.alone)


# "RuntimeError:" alone on its line, its message on the next ones
_BARE_EXC = re.compile(r"^\s*[\w.]*(Error|Exception)\w*:\s*$")


def find_matches(lines: list[Line], cat: Catalog, tbs: list[Traceback], skip: set[int] = frozenset()) -> list[Match]:
    """Every line matching a class's evidence or symptoms (benign and echoed source lines never
    do), plus every traceback section matching a class's exception signature, in line order."""
    matches: list[Match] = []
    hits_of = _remembering(_line_hits(cat), _line_key)
    for i, ln in enumerate(lines):
        t = ln.text
        if not t or i in skip:
            continue
        wrapped = with_continuation(lines, i) if i + 1 not in skip else (t, None)
        if _BARE_EXC.match(t):  # "RuntimeError:" with its message on the following lines
            t = " ".join([t.strip(), *(x.text.strip() for x in lines[i + 1:i + 4] if x.text.strip())])
        hits = hits_of(t, ln.text, wrapped)
        if not hits:
            continue
        # a record its logger marked DEBUG/INFO/WARNING is not an error: its evidence is a symptom
        loud = lines[i].level not in QUIET_LEVELS
        for ci, c in enumerate(cat.classes):
            if (ci, "e") in hits:
                matches.append(Match(c, i, loud or (lines[i].level == "WARNING"
                                                    and any(p.search(t) for p in c.fatal_when_warned))))
            elif (ci, "s") in hits:
                matches.append(Match(c, i, False))
            elif (ci, "a") in hits and loud:
                matches.append(Match(c, i, False, alone=True))
    for tb in tbs:  # cut before its exception: where it failed is a symptom of that module's class
        last = _last_frame_line(tb)
        if tb.final.exc_index is None and lines[last].level not in QUIET_LEVELS:
            matches += [Match(c, last, False) for c in cat.classes
                        if any(sig.located_in(tb.final) for sig in c.exceptions)]
    raised_by = _remembering(_raised_by(cat), _section_key)
    for sec in [s for tb in tbs for s in tb.sections] + _lone_exceptions(lines, tbs, skip):
        if sec.exc_index is not None:
            loud = lines[sec.exc_index].level not in QUIET_LEVELS
            matches += [Match(c, sec.exc_index, loud) for c in raised_by(lines[sec.exc_index].text, sec)]
    matches.sort(key=lambda m: m.index)
    return matches


def _raised_by(cat: Catalog):
    """(an exception line's raw text, its section) -> the classes whose exception signature the section matches; none
    for a benign line."""
    def raised_by(raw: str, sec: TracebackSection) -> tuple[CatalogClass, ...]:
        if cat.is_benign(raw):
            return ()
        return tuple(c for c, signatures in cat.raising(sec.exc_type or "") if any(sig.matches(sec) for sig in signatures))
    return raised_by


def _line_hits(cat: Catalog):
    """(the line as matched, its raw text, the line joined with its continuation and that continuation) -> the
    (class, kind) entries it shows: none for an ignored or benign line; a signature the paste wrapped onto the next
    line counts, one all on the next line does not."""
    hits_of = cat.index.hits

    def line_hits(t: str, raw: str, wrapped: tuple[str, str | None]) -> frozenset:
        hits = hits_of(t)
        if wrapped[1] is not None:
            hits = hits | (hits_of(wrapped[0]) - hits_of(wrapped[1]))
        if not hits or any(p.search(t) for p in cat.ignore) or cat.is_benign(raw, wrapped):
            return frozenset()
        return frozenset(hits)
    return line_hits


# what one read of a log remembers: at most this many lines, each of at most this many characters (with its
# continuation; 32 MiB at worst, whatever the paste holds: a flood's line is short)
_SEEN_MAX, _SEEN_TEXT_MAX = 16384, 2048


def _remembering(read, key):
    """``read`` answering what it has read before from memory (``key``: what its answer depends on, or None for an
    input too long to keep). A log that fails often says one error again and again (every rank, every request, a
    restart loop): such a flood then costs a lookup a line, not every anchored pattern's, benign line's and
    signature's search (50,000 lines of one CUDA error on eight ranks: 4.3 s before, 1.3 s now, best of 3 in
    bench/diagnose.py). The memory lives for one read of one log: a diagnosis costs the same however many came
    before it."""
    seen: dict = {}

    def remembered(*args):
        k = key(*args)
        if k is None:
            return read(*args)
        known = seen.get(k)
        if known is None:
            known = read(*args)
            if len(seen) < _SEEN_MAX:
                seen[k] = known
        return known
    return remembered


def _line_key(t: str, raw: str, wrapped: tuple[str, str | None]) -> tuple | None:
    line = (t, raw, *wrapped)
    return line if sum(len(part or "") for part in line) <= _SEEN_TEXT_MAX else None


def _section_key(raw: str, sec: TracebackSection) -> tuple | None:
    """A section without frames (an exception line alone) is its text, type and message; one with frames is read
    each time (its signatures look at the frames' paths)."""
    if sec.frames or len(raw) + len(sec.message) > _SEEN_TEXT_MAX:
        return None
    return raw, sec.exc_type, sec.message


def _last_frame_line(tb: Traceback) -> int:
    """The last line of a traceback cut before its exception that is not echoed source or a caret
    line: the innermost frame, shown as the evidence of where it stopped."""
    return next((i for i in range(tb.end_index, tb.start_index - 1, -1) if i not in tb.code_lines), tb.end_index)


# (or in the record an SGLang manager logs it in, "Scheduler hit an exception: ValueError: ...", when the paste kept
# the record's first line and the exception line joined; round 75)
_LONE_EXC = re.compile(rf"^\s*(?:{SGLANG_EXCEPTION_RECORD}: )?"
                       r"(?P<type>[A-Za-z_][\w.]*(?:Error|Exception))\b:? ?(?P<msg>.*)$")


def _lone_exceptions(lines: list[Line], tbs: list[Traceback], skip: set[int]) -> list[TracebackSection]:
    """Exception lines pasted without their traceback ("ImportError: cannot import name 'x' from
    'sgl_kernel' (...)"): sections of their own, without frames, so exception signatures (type,
    message tokens, the module the message names) read them as they read a traceback's."""
    depth = [0] * (len(lines) + 1)  # how many tracebacks span each line (read once: per line, quadratic)
    for tb in tbs:
        depth[tb.start_index] += 1
        depth[tb.end_index + 1] -= 1
    inside = list(accumulate(depth))
    out = []
    for i, ln in enumerate(lines):
        t = ln.text
        if "Error" not in t and "Exception" not in t or i in skip:
            continue
        m = _LONE_EXC.match(t)
        if m and not inside[i]:
            # a bare AssertionError's message is the assert statement above it, not the line below
            message = ("" if m["msg"].strip() else assert_expression(lines, i, m["type"])) or \
                with_continuation(lines, i)[0][m.start("msg"):].strip()
            out.append(TracebackSection(exc_type=m["type"], message=message, exc_index=i, start_index=i))
    return out


def pick_root(matches: list[Match], lines: list[Line] | None = None) -> Match | None:
    """First decisive evidence in line order (ties on one line: highest priority), or the cause its
    own detail lines name (`explained_by`); else the strongest symptom, earliest first."""
    decisive = [m for m in matches if m.strong and m.cls.decisive]
    if decisive:
        first = min(m.index for m in decisive)
        root = max((m for m in decisive if m.index == first), key=lambda m: m.cls.priority)
        return _explained(root, decisive, lines) or root
    others = [m for m in matches if m.strong] or matches
    if not others:
        return None
    return min(others, key=lambda m: (-m.cls.priority, m.index))


def _explained(root: Match, decisive: list[Match], lines: list[Line] | None) -> Match | None:
    """The decisive match of a class the root's class is `explained_by`, printed within its
    `detail_lines` after it on the same rank (the detail an error reports about itself), if any."""
    cls = root.cls
    if not cls.explained_by or lines is None:
        return None
    rank = lines[root.index].rank
    return next((m for m in decisive if m.cls.id in cls.explained_by
                 and root.index < m.index <= root.index + cls.detail_lines and lines[m.index].rank == rank), None)


def related_traceback(tbs: list[Traceback], lines: list[Line],
                      index: int) -> tuple[Traceback | None, TracebackSection | None]:
    """The traceback that contains the matched line, else the nearest one after it (same rank
    first), within a window: the error that a compiler or library printed before raising."""
    rank = lines[index].rank
    for tb in tbs:
        if tb.start_index <= index <= tb.end_index + 2 and (tb.rank == rank or rank is None):
            return tb, tb.section_at(index)
    after = [tb for tb in tbs if tb.start_index > index and tb.start_index - index <= 400]
    same = [tb for tb in after if tb.rank == rank and rank is not None]
    pick = (same or after or [None])[0]
    return pick, (pick.final if pick else None)
