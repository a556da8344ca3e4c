"""What copying a log through a viewer, a search or a web page did to its text, undone first.

- Line numbers before every line: `cat -n` and `nl` (the number right-aligned, then a tab), `grep -n`
  (':' after a matching line's number, '-' after a context line's, "--" between groups), `grep -Hn` (the
  file's name first), `less -N` and an editor's gutter (the number, then a space). One line alone cannot
  tell a line number from a message that starts with a number (du's "52428800\t/dev/shm", an HTTP
  status, a time of day), so the gutter is read over the whole paste: most lines carry the same form and
  their numbers go up, one by one where a space alone follows them (the form a message most resembles).
- A blank line after every line: a tracker or an editor that turned each line break into two (CRLF read as two
  breaks). Read over the whole paste: no two lines touch, and every run of blank lines is odd (one between two
  lines, three where the log had a blank line of its own); each run of n goes back to (n - 1) / 2.
- Characters a web page, a chat client or a word processor puts in for the ones the log had: no-break
  and other fixed-width spaces, zero-width spaces and joiners, and curly quotes ("smart quotes"; gcc
  writes them itself in a UTF-8 locale). The catalog is written in ASCII; a paste from such a page
  otherwise splits every word the signatures read ("CUDA\\xa0out\\xa0of\\xa0memory").
"""

from __future__ import annotations

import re

from .transports import PASTE_SHARE

__all__ = ["plain_characters", "single_spaced", "without_line_numbers"]

_MIN_DOUBLE_SPACED = 4  # lines, at least, for a paste read as double-spaced (two or three may be paragraphs)
_STEP_SHARE = 0.8  # of the numbers after the first, going up by exactly one, for a gutter a space ends

# each gutter form: the number, and where the line it numbers starts
_GUTTERS = (
    re.compile(r"^ *(?P<n>\d{1,7})\t"),  # cat -n, nl
    re.compile(r"^(?P<n>\d{1,7})[:-]"),  # grep -n, grep -n -C
    re.compile(r"^(?P<file>[^\s:]+?)[:-](?P<n>\d{1,7})[:-]"),  # grep -Hn: the file's name first
    re.compile(r"^ *(?P<n>\d{1,7})(?: |$)"),  # less -N, an editor's line numbers
)
# `cat -n`'s exact shape ("%6d\t"), peeled from a paste of one or two lines too. Only that shape there: a line of its
# own may start with numbers and tabs (du's "52428800\t/dev/shm", a script's "0\t1.23\t4.56")
_CAT_N = re.compile(r"^(?: {5}\d| {4}\d\d| {3}\d{3}| {2}\d{4}| \d{5}|\d{6})\t")
_GREP_BEFORE_FAILURE = re.compile(r"^(?:[^\s:]+:)?\d{1,7}[:-](?=[A-Za-z_][\w.]*(?:Error|Exception)\b|Traceback \()")
_GREP_SEPARATOR = "--"  # between grep's groups of context lines

# each character a page puts in, and what the log had; replaced one by one, each only when the text holds it
# (str.translate looks every character of the paste up: 50,000 lines took 0.3 s, the replacements 0.03 s)
_PLAIN = (
    *((chr(c), " ") for c in (0x00A0, 0x2007, 0x202F, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2008,
                              0x2009, 0x200A, 0x205F, 0x3000)),
    *((chr(c), "") for c in (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF)),
    *((c, "'") for c in "\u2018\u2019\u201a\u201b\u2032"),
    *((c, '"') for c in "\u201c\u201d\u201e\u201f\u2033"),
)


def plain_characters(text: str) -> str:
    """The text with fixed-width spaces as spaces, zero-width characters gone and curly quotes straight."""
    if text.isascii():
        return text
    for page, log in _PLAIN:
        if page in text:
            text = text.replace(page, log)
    return text


def without_line_numbers(lines: list[str]) -> list[str]:
    """The lines without the line numbers a viewer or a search put before every one (see the module's
    docstring); the lines as they are when no one form numbers the paste."""
    filled = [x for x in lines if x.strip() and x != _GREP_SEPARATOR]
    for k, gutter in enumerate(_GUTTERS):
        found = [gutter.match(x) for x in filled]
        if _numbers_the_paste([m for m in found if m], len(filled), spaced=k == len(_GUTTERS) - 1):
            return [_unnumbered(x, gutter) for x in lines]
    # too few lines to read a gutter by: only `cat -n`'s own shape, which a message hardly has, and a number grep put
    # before an exception line or a traceback's header (`grep -n Error server.log`: "812:RuntimeError: ...")
    return [_GREP_BEFORE_FAILURE.sub("", _CAT_N.sub("", x, count=1) if "\t" in x[:7] else x, count=1) for x in lines]


def _numbers_the_paste(found: list[re.Match], filled: int, spaced: bool) -> bool:
    """Most lines carry the form, under one file name, and their numbers only go up (by one, mostly, for a
    number a space alone ends)."""
    if len(found) < 3 or len(found) < PASTE_SHARE * filled:
        return False
    if len({m.groupdict().get("file") for m in found}) > 1:
        return False
    numbers = [int(m["n"]) for m in found]
    steps = [b - a for a, b in zip(numbers, numbers[1:])]
    if any(step <= 0 for step in steps):
        return False
    return not spaced or sum(step == 1 for step in steps) >= _STEP_SHARE * len(steps)


def _unnumbered(line: str, gutter: re.Pattern) -> str:
    if line == _GREP_SEPARATOR:
        return ""
    m = gutter.match(line)
    return line[m.end():] if m else line


def single_spaced(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The paste without the blank line a double-spacing copy put after every line (see the module's docstring),
    each line keeping its raw number; the paste as it is when it is not double-spaced."""
    runs, blank, filled = [], 0, 0
    for _, line in numbered:
        if line.strip():
            if filled and not blank:
                return numbered  # two lines touch
            if filled:
                runs.append(blank)
            filled, blank = filled + 1, 0
        else:
            blank += 1
    if filled < _MIN_DOUBLE_SPACED or any(run % 2 == 0 for run in runs):
        return numbered
    out, blank = [], []
    for pair in numbered:
        if pair[1].strip():
            out += blank[:(len(blank) - 1) // 2] + [pair]
            blank = []
        else:
            blank.append(pair)
    return out + blank
