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

import re

from .catalog import Catalog, default_catalog
from .logfile import escaped
from .matching import Match, find_matches, pick_root
from .normalize import QUIET_LEVELS, Line, normalize
from .outcomes import by_tokens, healthy, known, unknown
from .result import Diagnosis
from .startup import death_after, first_failure, outlived, quieted, ready_index, stopped_before_dying
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
        if first is None:
            return _message_alone(lines, tbs, cat) or healthy(lines, cat, None)
        if root is None and stopped_before_dying(lines, first):
            return healthy(lines, cat, None)
        return _unrecognised(lines, tbs, first, cat)
    return known(lines, tbs, matches, root)


def _unrecognised(lines: list[Line], tbs: list[Traceback], first: int, cat: Catalog) -> Diagnosis:
    """Something failed and no signature matched: the second tier (tokens.py) names the class its
    decisive lines' key tokens point at when one clearly wins; else `unknown`."""
    verdict = name_by_tokens(lines, tbs, first, cat)
    if verdict is None:
        return unknown(lines, tbs, first, cat.relay)
    return by_tokens(lines, tbs, first, cat.get(verdict.cls), verdict.index, verdict.hits, verdict.setting)


# a paste of this many lines or fewer, none of them a logger's record, is a message copied alone
_MESSAGE_ALONE_LINES = 3
# what a message copied alone must say to be a failure: a refusal, a lack, a limit (a progress bar, a setting's value or
# a version line names a class's component and refuses nothing)
_REFUSAL = re.compile(r"\b(must|only|not|no|cannot|can't|unable|unsupported|invalid|illegal|missing|requires?|mismatch"
                      r"|incompatible|exceeds?|too (large|small|many|few|long|short)|insufficient)\b", re.IGNORECASE)
# ... and not that the program goes on (the words the catalog's arch refusals exclude, and a feature turned off)
_GOES_ON = re.compile(r"\b(using|falls? ?back|falling back|fallback|continuing|disabl(ing|ed)|skipping|instead|ignor(ing|ed)"
                      r"|defaulting|rounded)\b", re.IGNORECASE)
# what is not a message that failed: a record that names its level in words normalize does not read as a level (TGI's
# " WARN text_generation_launcher:"), a Python warning, an option's help ("  --tokenizer-backend {a,b}  ... requires"),
# pip's note on a dependency it did not install ("x 0.6.1 requires y, which is not installed.")
_NOT_A_FAILURE = re.compile(r"^\s*(\S+\s+){0,5}(WARN(ING)?|INFO|DEBUG|NOTICE)\b|\b\w*Warning:|^\s*--?\w"
                            r"|\brequires [\w.-]+.{0,60}, (which is not installed|but you have)\b")


# a program's own words for a check it holds can never fail, failing: the words of an assertion, not of a warning
_BROKEN_INVARIANT = re.compile(r"\b(should|must|can|ca) ?(not|never|n't) (happen|be reached)\b|\bthis is a bug\b",
                               re.IGNORECASE)


def _message_alone(lines: list[Line], tbs: list[Traceback], cat: Catalog) -> Diagnosis | None:
    """A paste that is one message and nothing else, no logger's prefix, no failure word ("draft model vocab type must
    match target model"; "SGlang only supports sm 75 and above"): the message is what failed, as a bare exception
    line is, when its key tokens clearly name a class; `unknown` when it says a check that can never fail did; else
    None (it may be any line of a healthy log)."""
    said = [i for i, ln in enumerate(lines) if ln.text.strip()]
    if not said or len(said) > _MESSAGE_ALONE_LINES or tbs or any(lines[i].prefixed or lines[i].level in QUIET_LEVELS
                                                                   for i in said):
        return None
    texts = [lines[i].text for i in said]
    if not any(_REFUSAL.search(t) or _BROKEN_INVARIANT.search(t) for t in texts) or any(
            _GOES_ON.search(t) or _NOT_A_FAILURE.search(t) or cat.is_benign(t) for t in texts):
        return None
    verdict = name_by_tokens(lines, tbs, said[0], cat)
    if verdict is None or verdict.setting is not None:
        # a check the program says can never fail did ("... this should not happen"): a failure no class's words name
        return next((unknown(lines, tbs, i, cat.relay) for i in said if _BROKEN_INVARIANT.search(lines[i].text)), None)
    return by_tokens(lines, tbs, said[0], cat.get(verdict.cls), verdict.index, verdict.hits, None)


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
