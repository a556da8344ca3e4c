"""Paths from the Hub are data, never places: the one check every listed path passes.

A Hub (or a mirror set as ``hf_endpoint``) names the files of a repo; those names become
file names under the checkpoint directory on the node, where root writes, renames and
deletes them. So a name is accepted only when it is a plain relative path that stays
inside that directory whatever the filesystem does with it:

- a non-empty ``str`` of at most `MAX_PATH` UTF-8 bytes, each component at most
  `MAX_COMPONENT` bytes (Linux's NAME_MAX);
- relative (no leading ``/``), no empty component (``a//b``, a trailing ``/``), no ``.`` or
  ``..`` component, no backslash (a separator elsewhere);
- no control character: C0 (incl. newline and NUL), DEL, C1, the Unicode line and
  paragraph separators, bidirectional overrides and other invisible format characters,
  and no unpaired surrogate (not encodable as a file name);
- not one of noderig's own names: the state directory ``.noderig`` at the top, or a name
  ending in ``.aria2`` (aria2's control files decide what "partial" means);
- ``posixpath.normpath(dest/path)`` is inside ``dest`` (implied by the rules above; checked
  anyway, in case a rule is ever relaxed).

Stdlib only: this file is imported by the controller (``noderig.manifest``) and shipped to
the node beside ``verify_files.py``, which runs the same check again before any write.
Patterns (``checkpoint_patterns``) match per component; see `matches`.
"""

from __future__ import annotations

import fnmatch
import posixpath

MAX_PATH = 1024  # bytes (UTF-8) of one listed path
MAX_COMPONENT = 255  # bytes of one component (NAME_MAX)
MAX_FILES = 100_000  # files one listing may name: a larger one is refused, not processed
STATE_DIR = ".noderig"
CONTROL_SUFFIX = ".aria2"

# Characters no listed name may hold (code point ranges, inclusive).
_FORBIDDEN = (
    (0x00, 0x1F, "a control character"),  # C0, incl. NUL, tab, newline
    (0x7F, 0x9F, "a control character"),  # DEL and C1
    (0x200B, 0x200F, "an invisible format character"),  # zero-width space/joiners, LRM/RLM
    (0x2028, 0x2029, "a line separator"),
    (0x202A, 0x202E, "a bidirectional override"),
    (0x2060, 0x206F, "an invisible format character"),
    (0xD800, 0xDFFF, "an unpaired surrogate"),
    (0xFEFF, 0xFEFF, "an invisible format character"),
)


def _bad_char(text: str) -> str | None:
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code <= 0x9F or code >= 0x200B:
            for low, high, what in _FORBIDDEN:
                if low <= code <= high:
                    return f"{what} (U+{code:04X})"
    return None


def unsafe(ch: str) -> bool:
    """Whether the character ``ch`` is one no listed name may hold (a control character, an invisible or
    bidirectional format character): one a terminal may act on instead of showing.

    + ch: one character
    """
    return _bad_char(ch) is not None


def escaped(text: str) -> str:
    """``text`` with every character no listed name may hold (a control character, an invisible
    or bidirectional format character) written as its escape (``\\x1b``, ``\\u202e``): safe to
    print, whoever wrote it (a Hub's error message, a mirror's).

    + text: any string
    """
    return "".join(ch.encode("unicode_escape").decode("ascii") if unsafe(ch) else ch for ch in text)


def path_problem(path) -> str | None:
    """Why ``path`` may not name a file under a checkpoint directory, or None when it may.

    + path: the name as the Hub listed it (any JSON value)
    """
    if not isinstance(path, str):
        return f"it is not a string but {type(path).__name__}"
    if not path:
        return "it is empty"
    bad = _bad_char(path)
    if bad:
        return f"it holds {bad}"
    if "\\" in path:
        return "it holds a backslash"
    if path.startswith("/"):
        return "it is absolute"
    size = len(path.encode("utf-8"))
    if size > MAX_PATH:
        return f"it is {size} bytes long (at most {MAX_PATH})"
    parts = path.split("/")
    for part in parts:
        if part == "":
            return "it has an empty component"
        if part in (".", ".."):
            return f"it has a {part!r} component"
        if len(part.encode("utf-8")) > MAX_COMPONENT:
            return f"a component is longer than {MAX_COMPONENT} bytes"
    if parts[0] == STATE_DIR:
        return f"it is inside noderig's state directory {STATE_DIR}"
    if path.endswith(CONTROL_SUFFIX):
        return f"it ends in {CONTROL_SUFFIX} (aria2's control files)"
    if not inside("/d", path):
        return "it resolves outside the target directory"
    return None


def inside(dest: str, path: str) -> bool:
    """True when ``dest/path``, normalised, is strictly below ``dest`` (lexically)."""
    base = posixpath.normpath(dest)
    full = posixpath.normpath(posixpath.join(base, path))
    return full.startswith(base.rstrip("/") + "/")


def describe(path) -> str:
    """The path as an error message shows it: repr-escaped (a newline reads ``\\n``), and
    cut short past 200 characters."""
    text = repr(path)
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def matches(path: str, pattern: str) -> bool:
    """Whether a checked ``path`` matches one of ``checkpoint_patterns``, per component:
    ``*``, ``?`` and ``[...]`` never match a ``/``. A pattern without ``/`` matches the file
    name at any depth (``*.py`` matches ``x.py`` and ``sub/x.py``, as before); one with ``/``
    matches the whole path, component by component (``sub/*.py`` matches ``sub/x.py`` only).

    + path: the listed name; one `path_problem` refuses matches no pattern
    + pattern: an fnmatch pattern, case-sensitive
    """
    if path_problem(path) is not None:
        return False
    parts = path.split("/")
    want = pattern.strip("/").split("/")
    if len(want) == 1:
        return fnmatch.fnmatchcase(parts[-1], want[0])
    return len(want) == len(parts) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, want))
