"""Pastes mangled the way real pastes are (a line cut short, a block dropped, lines moved or repeated, a stray byte, a
transport's or a traceback's marker where it does not belong) never make the diagnosis itself raise: every one ends in
one of the three outcomes, with a class the catalog knows. A fixed seed, so a failure names a case that reproduces.
(On this machine 23,839 such pastes in four minutes raised nothing; docs/diagnose.md, "Wrapper formats".)"""

from __future__ import annotations

import random

import pytest

from noderig.diagnose import diagnose
from noderig.diagnose.catalog import default_catalog
from tests.test_diagnose import ALL_FIXTURES, fixture_id, fixture_text

# what a paste may carry where it does not belong: a transport's or a logger's head, a traceback's pieces, a chat
# client's or a terminal's characters, a lone surrogate a lossy decoder left, an escape cut before its end
STRAYS = ("\x00", "\ufeff", "\r", "\x1b[", "\x1b]8;;http://x\x07", "│", "\u200b", "\t", '  File "',
          "Traceback (most recent call last):", "During handling of the above exception, another exception occurred:",
          "[rank0]: ", "(Worker pid=1) ", "ERROR 01-01 00:00:00 [x.py:1] ", '{"log": "', "\\n", '"}', "> ", "| ",
          "  +-+---------------- 1 ----------------", "E   ", "...", "\xa0", "^^^^", "~~~", "\udcff",
          "[INFO ] PyProcess - W-1-model-stdout: ", "INFO 2024-11-18 01:46:34,210 a b replica.py:1 - ")
CASES = 240


def mangled(text: str, rng: random.Random) -> str:
    """The paste with one to seven mangles, each at a random line."""
    lines = text.split("\n")
    for _ in range(rng.randrange(1, 8)):
        lines = lines or [""]
        op, i = rng.randrange(6), rng.randrange(len(lines))
        if op == 0:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif op == 1:
            lines.insert(i, rng.choice(STRAYS) + lines[i])
        elif op == 2:
            lines[i] += rng.choice(STRAYS)
        elif op == 3:
            del lines[i:i + rng.randrange(1, 20)]
        elif op == 4:
            lines[i] *= rng.randrange(1, 50)
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def test_the_mangles_change_the_pastes():
    rng = random.Random(7)
    text = fixture_text(ALL_FIXTURES[0])
    assert sum(mangled(text, rng) != text for _ in range(20)) >= 15


@pytest.mark.parametrize("seed", range(4))
def test_a_mangled_paste_never_makes_the_diagnosis_raise(seed):
    rng = random.Random(seed)
    known = {c.id for c in default_catalog().classes} | {"healthy", "unknown"}
    for _ in range(CASES // 4):
        path = rng.choice(ALL_FIXTURES)
        paste = mangled(fixture_text(path), rng)
        try:
            got = diagnose(paste)
        except Exception as exc:  # the case, to reproduce it, then the error
            pytest.fail(f"{fixture_id(path)} mangled with seed {seed}: {type(exc).__name__}: {exc}")
        assert got.cls in known, (fixture_id(path), got.cls)
