#!/usr/bin/env python3
"""How well the diagnosis names a failure whose own words no signature was written for: a leave-one-out measure
over the tuning fixtures only (never the held-out splits).

A catalog line (an evidence, symptom or supporting pattern) that matches one tuning log and no log of another thread
was written for that log. For each tuning log the catalog reads right and that has such lines, those lines are left
out of a copy of catalog.toml and the log is diagnosed again: whatever still names it (another signature, the key-token
tier of tokens.toml) is what a new log in new words would meet. Prints right / unknown / wrong, and with --detail each
miss. Usage: scripts/diagnose_loo.py [--detail]
"""

from __future__ import annotations

import collections
import re
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from noderig.diagnose import engine, load_catalog, normalize  # noqa: E402
from noderig.diagnose.catalog import CATALOG_PATH, any_quote  # noqa: E402

import test_diagnose as fixtures  # noqa: E402

# one TOML string literal alone on its line (a pattern in a list), with an optional comma and comment
_LITERAL = re.compile(r"""^\s*('''.*'''|'[^']*'|"(?:[^"\\]|\\.)*")\s*,?\s*(#.*)?$""")
_CLASS = re.compile(r'^id = "(\w+)"')
_THREAD = re.compile(r"github\.com/([^/\s]+/[^/\s]+)/(?:issues|pull)/(\d+)")


def catalog_lines(text: list[str]) -> list[tuple[int, str, re.Pattern]]:
    """(line number, class, compiled pattern) of every pattern written on a line of its own."""
    out, cls = [], None
    for i, line in enumerate(text):
        m = _CLASS.match(line)
        if m:
            cls = m.group(1)
            continue
        m = _LITERAL.match(line)
        if m and cls:
            value = tomllib.loads("x = " + m.group(1))["x"]
            out.append((i, cls, re.compile(any_quote(value), re.IGNORECASE)))
    return out


def left_out(text: list[str], drop: set[int]):
    """The catalog without the lines ``drop``."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("\n".join(line for i, line in enumerate(text) if i not in drop))
    try:
        return load_catalog(f.name)
    finally:
        Path(f.name).unlink()


def main(detail: bool) -> None:
    text = Path(CATALOG_PATH).read_text().splitlines()
    patterns = catalog_lines(text)
    logs = [(p, fixtures.fixture_text(p)) for p in fixtures.ALL_FIXTURES]
    thread = {p: (m.group(0) if (m := _THREAD.search(t)) else p.stem) for p, t in logs}
    seen = {p: [line.text for line in normalize(t)] for p, t in logs}
    hits = {i: {p for p, _ in logs if any(rx.search(x) for x in seen[p])} for i, _, rx in patterns}
    counts, misses = collections.Counter(), []
    for p, t in logs:
        cls = p.parent.name
        if cls in ("healthy", "unknown") or engine.diagnose(t).cls != cls:
            continue
        own = {i for i, c, _ in patterns if c == cls and p in hits[i] and all(thread[q] == thread[p] for q in hits[i])}
        if not own:
            continue
        got = engine.diagnose(t, left_out(text, own)).cls
        counts["right" if got == cls else "unknown" if got == "unknown" else "wrong"] += 1
        if got != cls:
            misses.append(f"{cls} -> {got}: {p.stem}")
    total = sum(counts.values())
    print(f"{total} tuning logs with lines of their own: right {counts['right']}, unknown {counts['unknown']}, "
          f"wrong {counts['wrong']} ({100.0 * counts['right'] / max(total, 1):.1f}% right without them)")
    if detail:
        print("\n".join(misses))


if __name__ == "__main__":
    main("--detail" in sys.argv[1:])
