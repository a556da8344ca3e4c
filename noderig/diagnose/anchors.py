"""A cheap first pass over a log: which catalog patterns a line can possibly match.

Every evidence and symptom pattern is reduced to a word (or, failing that, a literal) that
each of its matches must contain; a line is then tokenised once and only the patterns whose
word it holds are run. A 50k-line log is so scanned without running every regex on every line.
"""

from __future__ import annotations

import re

__all__ = ["AnchorIndex"]

try:  # the regex parser, to find the words a pattern cannot match without
    import re._parser as _sre_parse  # Python 3.11+
    import re._constants as _sre_c
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c
    import sre_parse as _sre_parse

_WORD = re.compile(r"[a-z0-9_]+")


def _split_alternatives(pattern: str) -> list[str]:
    """Split a pattern at its top-level '|' (not inside groups or classes)."""
    out, depth, in_class, cur, i = [], 0, False, [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            cur.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def _anchor(alternative: str) -> tuple[str | None, str | None]:
    """(word, literal): the longest whole word (a run of [a-z0-9_], lowercased) that every match
    of this alternative must contain, and the longest literal substring it must contain (>= 3
    characters), each or None. Pattern ends count as word boundaries."""
    try:
        seq = list(_sre_parse.parse(alternative, re.IGNORECASE))
    except re.error:  # pragma: no cover - validated by compile before
        return None, None
    runs, cur, left_ok = [], [], True
    for op, av in seq:
        if op is _sre_c.LITERAL:
            cur.append(chr(av).lower())
            continue
        boundary = op is _sre_c.AT
        if cur:
            runs.append(("".join(cur), left_ok, boundary))
        cur, left_ok = [], boundary
    if cur:
        runs.append(("".join(cur), left_ok, True))
    best = None
    for run, lok, rok in runs:
        for m in _WORD.finditer(run):
            if (m.start() > 0 or lok) and (m.end() < len(run) or rok):
                if best is None or len(m.group()) > len(best):
                    best = m.group()
    literal = max((run for run, _, _ in runs), key=len, default="")
    return best, (literal if len(literal) >= 3 else None)


class AnchorIndex:
    """word -> the (class, kind, pattern) entries that need it; plus the patterns without one.
    Lets a 50k-line log be scanned with one tokenisation per line instead of every regex."""

    def __init__(self, classes):
        self.by_word: dict[str, list[tuple[int, str, re.Pattern]]] = {}
        self.by_literal: dict[str, list[tuple[int, str, re.Pattern]]] = {}
        self.always: list[tuple[int, str, re.Pattern]] = []
        for ci, c in enumerate(classes):
            for kind, patterns in (("e", c.evidence), ("s", c.symptoms), ("a", c.alone)):
                for p in patterns:
                    anchors = [_anchor(alt) for alt in _split_alternatives(p.pattern)]
                    entry = (ci, kind, p)
                    if all(word for word, _ in anchors):
                        for word in {word for word, _ in anchors}:
                            self.by_word.setdefault(word, []).append(entry)
                    elif all(lit for _, lit in anchors):
                        for lit in {lit for _, lit in anchors}:
                            self.by_literal.setdefault(lit, []).append(entry)
                    else:
                        self.always.append(entry)
        self.words = frozenset(self.by_word)

    def hits(self, text: str) -> set[tuple[int, str]]:
        low = text.lower()
        found = self.words.intersection(_WORD.findall(low))
        out: set[tuple[int, str]] = set()
        for w in found:
            for ci, kind, p in self.by_word[w]:
                if (ci, kind) not in out and p.search(text):
                    out.add((ci, kind))
        for lit, entries in self.by_literal.items():
            if lit in low:
                for ci, kind, p in entries:
                    if (ci, kind) not in out and p.search(text):
                        out.add((ci, kind))
        for ci, kind, p in self.always:
            if (ci, kind) not in out and p.search(text):
                out.add((ci, kind))
        return out
