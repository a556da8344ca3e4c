"""Lines a terminal wrapped, told line by line (issue 13, "Hard-wrapped pastes" in docs/diagnose.md).

A terminal that hard-wraps (tmux's copy mode, screen, a narrow web console, ``fold -w``) cuts every long line
at its width W into pieces of W characters; one that wraps at a word (``fold -s``) cuts after the last space
that fits, so its pieces end with that space and are shorter. normalize's ``_wrap_width`` reads a wrap from
many lines of one width; a short paste has one or two cut lines and no such count. So here each line is asked
on its own whether it was cut: it is (nearly) the paste's longest line, and what follows goes on rather than
starting a record (``starts``: normalize's test for a record's start; never indented), and the place of the cut
shows it:

- the cut splits a word or a name (``from_engine_ar`` + ``gs``, ``...Err`` + ``or: ...``): a piece that is a word
  the catalog knows, or one the paste holds twice, beside a name (``with`` + ``NCCL_DEBUG``) is a wrap at a word;
  or a path or a dotted name goes on (``site-packages/`` + ``vllm``);
- the line ends with the space a word wrap leaves, and the next line's first word would not have fitted on it.

A paste whose lines are of varied length below one width has no line cut there (the others are shorter), and
one with lines longer than the cut line (more than one in a hundred) was not wrapped there.

A fold the whole paste shows is read apart (``fold_signs``, ``folded_lines``; docs/diagnose.md "Word-folded pastes"):
where two lines or more end in a fold's space before a word that would not have fitted, and their next lines open no
record, every such line is a cut, however short and whatever its next line begins with.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Callable

from .catalog import BENIGN_PATH, CATALOG_PATH

MIN_WIDTH = 60  # no terminal wraps narrower; short log lines of one length are common
_WORD = re.compile(r"[A-Za-z0-9_]")  # ASCII: a CJK line after a cut line is a line of its own
_NAME_GOES_ON = re.compile(r"[/_.-]\w*[/_-]$|\w\.\w+\.$")  # a path or a dotted name cut after its separator
_NAME_AT_START = re.compile(r"^[/.]\w")  # ... or before it, when the piece before holds a path already
# what begins a line of its own, whatever the line before: a bracketed tag, a markup tag, a date or a time, a
# level word, an arrow or an ellipsis
_LINE_HEAD = re.compile(r"^(?:[\[<]|\*\*\*|→|\.\.\.|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|"
                        r"(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\b)")
_TITLE_WORD = re.compile(r"^[A-Z][A-Za-z]*[ :]")  # "For debugging ...", "GCC version", "Log start"
_NAME_COLON = re.compile(r"^\w+: ")  # "ggml_gallocr_reserve_n: failed ...": a program's record
_EXC_TAIL = re.compile(r"(?:Error|Exception|Warning)$")
_SENTENCE_END = re.compile(r"[.!?:]\s?$")
_LETTERS = re.compile(r"[A-Za-z]+")
_PLAIN = re.compile(r"(?:[A-Za-z][a-z]*|[A-Z]+|\d+)$")  # a word or a number, not a CamelCase name's piece
# what starts a record, not a fold's rest: a full date, a level word and its colon (uvicorn's "ERROR:    ...", Python
# logging's "INFO:name:"). A time or a level word alone is not: a fold can break a long prefix before either ("ERROR
# 01-22 " + "12:05:33.129 [core.py:1302] ...", NCCL's "...cudawrap.cc:130 NCCL " + "WARN Retrieve ..."); a prefix
# normalize reads is fold_signs's ``opens_record``
_DATED = re.compile(r"^\[?(?:\d{4}-\d\d-\d\d|(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL):)")
_WORD_END = re.compile(r"\S{20}$")  # a line of the width ending inside a run of 20 characters: a word longer than it
# a paste with more than one line in ten ending in a long run of blanks was padded by its console, not folded (a fold
# that cut a run of blanks, a record's indentation, leaves a few)
_PADDING = " " * 24
_PADDED_SHARE = 10
_FOLDS_SHOWN = 2  # one line ending in a space before a long word shows no fold: a prose line may
_WHOLE_FRAME = re.compile(r'", line \d+, in \S+$')  # a frame line ends there: what follows is its code


def _longest_but_one_in_a_hundred(clean: list[str]) -> int:
    """The width both rules read: at most one line in a hundred is longer (0 for no line)."""
    lengths = sorted((len(x) for x in clean), reverse=True)
    return lengths[min(len(lengths) // 100, len(lengths) - 1)] if lengths else 0


def cut_lines(clean: list[str], starts: Callable[[str], bool], says: Callable[[str], bool],
              shown_folds: set[int] = frozenset()) -> set[int]:
    """The indices of the lines a terminal cut, each to be joined with the line after it. ``says``: whether a line
    says a failure on its own (a cut that would bury one in a line that says none must be shown, not guessed);
    ``shown_folds``: the lines that show a fold (``fold_signs``'s first set)."""
    if max(map(len, clean), default=0) < MIN_WIDTH:
        return set()
    cap = _longest_but_one_in_a_hundred(clean)
    floor = max(MIN_WIDTH, cap // 2)
    cut: set[int] = set()
    paste_words: list[set[str]] = []

    def known() -> set[str]:
        if not paste_words:
            seen = Counter(w.lower() for x in clean for w in _LETTERS.findall(x))
            paste_words.append(_vocabulary() | {w for w, n in seen.items() if n >= 2})  # a piece alone is not a word
        return paste_words[0]

    for i in range(len(clean) - 1):
        a, b = clean[i], clean[i + 1]
        spaced = a.endswith(" ") and not a.endswith("  ")
        # only a line at the width or one a word wrap ended with its space can be cut: asked first, as it is cheap
        # (``starts`` peels the next line's prefixes; a 50,000-line log has most lines between floor and cap)
        if (not (len(a) == cap or spaced) or not floor <= len(a) <= cap or not b or b[0].isspace() or not a.strip()
                or _LINE_HEAD.match(b) or _WHOLE_FRAME.search(a)):
            continue
        # a word wrap's space at the end shows a cut only where the width is that of other lines too: for the paste's
        # one line that long, any next word "would not have fitted", and the space is all there is. Other lines of that
        # length show it only as folds themselves: SGLang ends every "Decode batch, ..., #queue-req: 0, " in a space,
        # its busy log's longest lines, each before a record of its own, and the shell's "Killed" after the last one
        # was joined into it
        folded = spaced and (len(a) < cap or bool(shown_folds - {i}))
        if _TITLE_WORD.match(b) and (not folded or _SENTENCE_END.search(a)):
            continue
        # a join would bury the failure the next line says in a line that says none: only a cut that shows itself
        hides = not folded and says(b) and not says(a)
        if ((len(a) == cap and _splits_a_name(a, b, known, shown_only=hides)
                or spaced and not hides and len(a) + len(b.split(" ", 1)[0]) > cap) and not starts(b)):
            cut.add(i)  # ``starts`` last: it peels the next line's prefixes, the dearest question here
    return cut


def fold_signs(clean: list[str], opens_record: Callable[[str], bool]) -> tuple[set[int], set[int]]:
    """The lines that show a fold (``fold -s``), and the lines of the width cut inside a word longer than it. A line
    shows a fold when it ends in the space a fold breaks after while the next line's first word would not have fitted
    within the width (``cap``: the longest length but one in a hundred), however short it is (a long name moves whole
    to the next line) and whatever the next line begins with (a capitalised word, a bracket, a traceback's header the
    fold moved), unless that line opens a record (``opens_record``: a logger's or a transport's prefix; a full date;
    a level word and its colon): no fold starts a line with a prefix, and a logger that ends its records in a space
    (SGLang's "Decode batch, ..., #queue-req: 0, ") shows no fold however long its lines."""
    cap = _longest_but_one_in_a_hundred(clean)
    folds: set[int] = set()
    long_words: set[int] = set()
    if cap < MIN_WIDTH:
        return folds, long_words
    padded = sum(1 for x in clean if x.endswith(_PADDING)) * _PADDED_SHARE > len(clean)
    for i in range(len(clean) - 1):
        a, b = clean[i], clean[i + 1]
        # asked first, as it is cheap: most lines of a long log neither end in a space nor reach the width
        if not (a.endswith(" ") or len(a) == cap) or not b.strip() or len(a) > cap or not a.strip() or _DATED.match(b):
            continue
        # not before blanks, and one space where a console padded the paste: a fold that cut a run of blanks leaves
        # more, but so does a console that pads its lines to its width, after every line (before an exception line
        # too, which a join would bury in the code line above it)
        if (a.endswith(" ") and not (padded and a.endswith("  ")) and not b[0].isspace()
                and len(a) + len(b.split(" ", 1)[0]) >= cap):
            if not opens_record(b):  # last: it peels the next line's prefixes, the dearest question here
                folds.add(i)
        elif len(a) == cap and _WORD_END.search(a) and not b.startswith("  ") and not opens_record(b):
            long_words.add(i)  # a word longer than the width, cut at it (the blank after it may begin the next line)
    return folds, long_words


def folded_lines(signs: tuple[set[int], set[int]]) -> set[int]:
    """The lines ``fold -s`` cut (``fold_signs``), when the paste shows it folded: at least ``_FOLDS_SHOWN`` lines
    show a fold. Each is then a cut, and so is each line of the width cut inside a word. One line alone shows
    nothing: a prose line or a progress bar may end in a space."""
    folds, long_words = signs
    return folds | long_words if len(folds) >= _FOLDS_SHOWN else set()


def _splits_a_name(a: str, b: str, known: Callable[[], set[str]], shown_only: bool = False) -> bool:
    """The join makes one word or name of two pieces, or a path or a dotted name goes on. ``shown_only``: only a
    join that makes an exception type or a word the catalog or the paste knows ("com" + "pilation") counts, not
    an identifier's or a path's shape, which a record of its own may have too."""
    if _NAME_COLON.match(b):
        return bool(_EXC_TAIL.search(re.split(r"\W", a)[-1] + b.split(":", 1)[0]))
    if _WORD.match(a[-1]) and _WORD.match(b[0]):
        left, right = re.split(r"\W", a)[-1], re.split(r"\W", b, maxsplit=1)[0]
        # two plain words may be a line a logger or a person wrapped at a word: only a word the catalog or the
        # paste's other lines know makes them one ("tok" + "ens"; not "sizes" + "provided")
        if "_" in (a[-1], b[0]):
            return not shown_only  # "GLIBCXX" + "_3.4.32", "modelopt_checkpoint_" + "restore_path": a name goes on
        plain_left, plain_right = bool(_PLAIN.match(left)), bool(_PLAIN.match(right))
        if plain_left and plain_right:
            return (left + right).lower() in known()
        # a word the paste or the catalog knows beside a name ("with" + "NCCL_DEBUG=INFO") is a wrap at a word
        beside = plain_left and left.lower() in known() or plain_right and right.lower() in known()
        return not shown_only and not beside
    if shown_only:
        return False
    token = a.rsplit(" ", 1)[-1]
    return (bool(_NAME_GOES_ON.search(token)) and bool(_WORD.match(b[0]))
            or "/" in token and _WORD.match(a[-1]) is not None and _NAME_AT_START.match(b) is not None)


@lru_cache(maxsize=1)
def _vocabulary() -> frozenset[str]:
    """The words of the catalog, its key tokens and its benign lines: the words a cause is matched by."""
    from .tokens import TOKENS_PATH  # tokens reads normalize's Lines, which reads this module: imported when used
    return frozenset(w.lower() for path in (CATALOG_PATH, TOKENS_PATH, BENIGN_PATH)
                     for w in _LETTERS.findall(path.read_text(encoding="utf-8")) if len(w) >= 3)
