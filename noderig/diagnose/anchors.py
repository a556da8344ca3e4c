"""A cheap first pass over a log: which catalog patterns a line can possibly match.

Every evidence and symptom pattern is reduced to a word (or, failing that, a literal) that
each of its matches must contain; a line is then tokenised once and only the patterns whose
word it holds are run. A 50k-line log is so scanned without running every regex on every line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["AnchorIndex", "may_match", "words_in"]

try:  # the regex parser, to find the words a pattern cannot match without
    import re._parser as _sre_parse  # Python 3.11+
    import re._constants as _sre_c
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c
    import sre_parse as _sre_parse

_WORD = re.compile(r"[a-z0-9_]+")
# where a match's text is at a word's edge: \b, and the line's (or the text's) start and end
_EDGES = frozenset({_sre_c.AT_BOUNDARY, _sre_c.AT_BEGINNING, _sre_c.AT_BEGINNING_STRING, _sre_c.AT_END,
                    _sre_c.AT_END_STRING})


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
    """(word, literal): the longest whole word and the longest literal run (>= 3 characters) that every match of this
    alternative must contain, as its Needs count them (of two as long, the first in alphabetical order), each or None."""
    needs = _needs(alternative)
    word = max(sorted(needs.words), key=len, default=None)
    literal = max(sorted(needs.literals), key=len, default=None)
    return word, literal


def _plain_items(seq):
    """A parsed pattern's items in order, its groups opened in place (a group is a sequence like the pattern's own)."""
    for op, av in seq:
        if op is _sre_c.SUBPATTERN:
            yield from _plain_items(av[-1])
        else:
            yield op, av


@dataclass(frozen=True)
class Needs:
    """What every match of one alternative of a pattern contains, outside any optional or repeated part, character
    class, alternation or lookaround: whole words (runs of [a-z0-9_], lowercased, with a word's edge on both sides:
    \\b, ^, $ or a literal that is no word character; unlike the anchor's, the pattern's own ends are no edge: 'for'
    ends 'therefor') and literal runs of 3 characters or more, lowercased."""

    words: frozenset[str]
    literals: frozenset[str]

    def met(self, low: str, words: set[str]) -> bool:
        return self.words <= words and all(lit in low for lit in self.literals)


def _needs(alternative: str) -> Needs:
    try:
        seq = _sre_parse.parse(alternative, re.IGNORECASE)
    except re.error:  # pragma: no cover - validated by compile before
        return Needs(frozenset(), frozenset())
    words, literals, run, left = set(), set(), [], False
    for op, av in [*_plain_items(seq), (None, None)]:
        if op is _sre_c.LITERAL:
            run.append(chr(av).lower())
            continue
        edge = op is _sre_c.AT and av in _EDGES
        text = "".join(run)
        words.update(m.group() for m in _WORD.finditer(text)
                     if (m.start() > 0 or left) and (m.end() < len(text) or edge))
        literals.update([text] if len(text) >= 3 else [])
        run, left = [], edge
    return Needs(frozenset(words), frozenset(literals))


@lru_cache(maxsize=4096)
def needs_of(pattern: re.Pattern) -> tuple[Needs, ...] | None:
    """Each top-level alternative's Needs; None when one needs nothing (every text may match)."""
    needs = tuple(_needs(alt) for alt in _split_alternatives(pattern.pattern))
    return needs if all(n.words or n.literals for n in needs) else None


def words_in(low: str) -> set[str]:
    """The whole words of a lowercased text, as Needs counts them."""
    return set(_WORD.findall(low))


def may_match(pattern: re.Pattern, low: str, words: set[str]) -> bool:
    """False only when the pattern cannot match the text (`low` lowercased, `words` its words_in): the regex is
    then spared, which is most of a long log's lines for most patterns."""
    needs = needs_of(pattern)
    return needs is None or any(n.met(low, words) for n in needs)


class AnchorIndex:
    """word -> the (class, kind, pattern) entries that need it; plus the patterns without one.
    Lets a 50k-line log be scanned with one tokenisation per line instead of every regex; a pattern whose
    alternatives each need more than their anchor runs only on a line that holds all one of them needs."""

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
        words = words_in(low)
        candidates = [e for w in self.words.intersection(words) for e in self.by_word[w]]
        candidates += [e for lit, entries in self.by_literal.items() if lit in low for e in entries]
        out: set[tuple[int, str]] = set()
        for ci, kind, p in candidates + self.always:
            if (ci, kind) not in out and may_match(p, low, words) and p.search(text):
                out.add((ci, kind))
        return out
