"""Root cause of a failed launch from its log: the public ``diagnose()``.

`diagnose(text)` normalises the log (normalize.py), parses every Python traceback per rank
(tracebacks.py), matches each line against the catalog's signatures (catalog.toml, loaded by
catalog.py; matching.py) and picks the root cause: the first decisive error in time order
across ranks, not the last one printed. Errors that a root cause provokes later (a
CalledProcessError after a gcc error, NCCL timeouts on the ranks that outlived a crashed peer,
"Received sigquit from a child process") do not win. Whether the log failed at all, or reached
ready, is read apart from the signatures (startup.py); outcomes.py builds the Diagnosis.
"""

from __future__ import annotations

from .catalog import Catalog, default_catalog
from .logfile import escaped
from .matching import Match, find_matches, pick_root
from .normalize import QUIET_LEVELS, Line, normalize
from .outcomes import by_tokens, healthy, known, unknown
from .result import Diagnosis
from .startup import death_after, first_failure, outlived, quieted, ready_index
from .tokens import name_by_tokens
from .tracebacks import Traceback, parse_tracebacks

__all__ = ["diagnose", "diagnose_lines", "not_diagnosed"]


def diagnose_lines(lines: list[Line], catalog: Catalog | None = None) -> Diagnosis:
    """Three outcomes: a known class (the first decisive signature in time order; else, when
    something failed, the class the decisive lines' key tokens clearly name), `unknown` (something
    failed and nothing names it) or `healthy` (nothing failed; ready or not yet)."""
    cat = catalog or default_catalog()
    tbs = parse_tracebacks(lines)
    lines = quieted(lines, cat, tbs)  # what the program said it goes on from: a warning, whatever it quotes
    code = set().union(*(tb.code_lines for tb in tbs)) if tbs else set()
    code |= outlived(lines, cat)  # a warning the server went on from is neither evidence nor a failure
    matches = _after_a_failure_dropped(find_matches(lines, cat, tbs, code), lines, cat, code, tbs)
    ready = ready_index(lines, cat)
    if ready is not None:
        matches = [m for m in matches if m.index > ready]  # it was fine until then
        if not any(m.strong for m in matches):
            died = death_after(lines, cat, code, tbs, ready + 1)
            return healthy(lines, cat, ready) if died is None else _unrecognised(lines, tbs, died, cat)
    root = pick_root(matches, lines)
    first = _first_failure(lines, cat, code, tbs) if root is None or not root.strong else None
    if root is None or (not root.strong and first is None):
        # nothing failed: a symptom alone (a timeout setting, a warning's words) is no failure
        return healthy(lines, cat, None) if first is None else _unrecognised(lines, tbs, first, cat)
    return known(lines, tbs, matches, root)


def _unrecognised(lines: list[Line], tbs: list[Traceback], first: int, cat: Catalog) -> Diagnosis:
    """Something failed and no signature matched: the second tier (tokens.py) names the class its
    decisive lines' key tokens point at when one clearly wins; else `unknown`."""
    verdict = name_by_tokens(lines, tbs, first, cat)
    if verdict is None:
        return unknown(lines, tbs, first, cat.relay)
    return by_tokens(lines, tbs, first, cat.get(verdict.cls), verdict.index, verdict.hits, verdict.setting)


def _after_a_failure_dropped(matches: list[Match], lines: list[Line], cat: Catalog, code: set[int],
                             tbs: list[Traceback]) -> list[Match]:
    """The matches, without a class's `alone` symptoms that come after the first failure: there they are that
    failure's consequence (a launcher that kills its own process tree after an error makes the shell say "Killed")."""
    if not any(m.alone for m in matches):
        return matches
    first = _first_failure(lines, cat, code, tbs)
    return [m for m in matches if not m.alone or first is None or m.index <= first]


def _first_failure(lines: list[Line], cat: Catalog, code: set[int], tbs) -> int | None:
    """The first line that says something failed; else the first traceback outside the records a
    logger marked quiet (a paste of frames alone is a failure too; a warning's own traceback is not)."""
    first = first_failure(lines, cat, code)
    if first is None:
        first = next((tb.start_index for tb in tbs if lines[tb.start_index].level not in QUIET_LEVELS), None)
    return first


def diagnose(text: str, catalog: Catalog | None = None) -> Diagnosis:
    """Diagnose one launch's log (journal output, a `-o cat` dump, container logs or a paste)."""
    return diagnose_lines(normalize(text), catalog)


def not_diagnosed(exc: BaseException, read_it: str) -> str:
    """Why a log has no diagnosis when diagnose() itself raised: a bug in noderig, not a verdict on the log
    (neither healthy nor a failure), what broke, and how to read the log without noderig."""
    # the message can quote the log's own text: escaped, so no escape sequence of it reaches a terminal
    return (f"{type(exc).__name__}: {escaped(str(exc))} (a bug in noderig, not a verdict on the log); read it with "
            f"{read_it}, and please report the bug with the log")
