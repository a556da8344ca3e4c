"""The second tier: a failure no signature matches, named by the key tokens of its decisive lines.

When the signatures name nothing and something failed (the outcome would be ``unknown``), the
lines that decide a failure are read once more: the final exception line of the traceback that
``unknown`` would show (its type and message), the first line that says something failed, and
the module paths of that exception's frames. Each class in ``tokens.toml`` (data beside the
catalog) lists the key tokens of its cause and the module paths of the code it fails in; a class
scores one point per token pattern seen in those lines and one per module pattern seen in those
frames. A class is named only when it clearly wins (``min_score`` points and ``margin`` more than
any other class); its confidence is marked lower than a signature's and it carries no remedy, so
the deploy never repairs on it. The evidence is the line that holds the tokens.

Words are of three kinds: a cause's (``tokens``, ``strong``, ``modules``); a component's names
(``component``, ``component_modules``: where it failed, which never outvote a class whose cause
words reach ``min_score``; ``strong_component``, a component only the class's feature has, scores two
when it is the class's only word); and a state (``qualifiers``: "missing", "mismatch"), which counts
only beside another word of its class. When no class reaches ``min_score`` and the failure is a bug's
exception (``programming_errors``), a launch setting that turns one class's feature on
(``enabled_by``) names it (name_by_setting).

It never runs on a log where nothing failed (healthy stays healthy) and never overrides a
signature (it only replaces ``unknown``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .anchors import may_match, words_in
from .catalog import SUPPORTED_CATALOG_VERSIONS, Catalog, CatalogError, compile_patterns
from .normalize import CXX_RAISED, QUIET_LEVELS, Line, with_continuation
from .tracebacks import Traceback, exception_type

__all__ = ["TOKENS_PATH", "TokenClass", "TokenTier", "TokenVerdict", "decisive_lines", "default_tokens",
           "load_tokens", "name_by_tokens"]

TOKENS_PATH = Path(__file__).with_name("tokens.toml")
# a frame of a traceback pasted without its header: its path is read as a module path, not as text
_FRAME_LINE = re.compile(r'^\s*File "')
# pydantic's ValidationError names the config that failed ("1 validation error for VllmConfig"); the lines after it
# say why ("  Value error, kv_cache_dtype=... is incompatible with ..."): read with it (round 75)
_PYDANTIC_HEADER = re.compile(r"\b\d+ validation errors? for \w+")
_PYDANTIC_DETAIL = re.compile(r"^\s*(Value error|Assertion failed), ")
# a failure line that ends by announcing why on the lines after it; Rust's anyhow puts "Caused by:" alone on a line
_ANNOUNCES = re.compile(r"\b(reasons?|causes?|caused by)\s*:\s*$", re.IGNORECASE)
_CAUSED_BY = re.compile(r"^\s*Caused by:\s*$")
_TB_HEADER = re.compile(r"^\s*Traceback \(most recent call last\)")
_MAX_REASONS = 8


@dataclass(frozen=True)
class TokenClass:
    id: str
    tokens: tuple[re.Pattern, ...]  # searched in the decisive lines (exception type and message, failure line)
    modules: tuple[re.Pattern, ...]  # searched in the module paths of the exception's frames
    strong: tuple[re.Pattern, ...] = ()  # tokens only this cause uses: two points each
    enabled_by: tuple[re.Pattern, ...] = ()  # a launch setting that turns the cause's feature on (any line)
    component: tuple[re.Pattern, ...] = ()  # the names of the component it fails in: a point each, no cause
    component_modules: tuple[re.Pattern, ...] = ()  # the component's module paths: a point each, no cause
    qualifiers: tuple[re.Pattern, ...] = ()  # a state ("missing", "mismatch"): a point only beside the class's words
    # a component only this class's feature has (a draft: only speculative decoding runs one): no cause, but alone
    # two points, so it names the class when no other class has a word
    strong_component: tuple[re.Pattern, ...] = ()
    needs_qualifier: bool = False  # named only with one of its states seen (its words alone say what, not that)


@dataclass(frozen=True)
class TokenTier:
    classes: tuple[TokenClass, ...]
    min_score: int
    margin: int
    programming_errors: frozenset[str] = frozenset()  # exception types that say a bug, not a cause


@dataclass(frozen=True)
class TokenVerdict:
    cls: str
    index: int  # the decisive line that holds the most tokens (the evidence)
    score: int
    runner_up: int
    hits: tuple[str, ...]  # the token and module patterns seen, for the report
    setting: int | None = None  # named by a launch setting: the line that turns the feature on


def load_tokens(path: Path | str | None = None) -> TokenTier:
    """The token lists (tokens.toml): per class, key tokens and module paths."""
    path = Path(path) if path is not None else TOKENS_PATH
    with open(path, "rb") as f:
        data = tomllib.load(f)
    if data.get("version") not in SUPPORTED_CATALOG_VERSIONS:
        raise CatalogError(f"{path}: token list version {data.get('version')!r} is not supported")
    classes = []
    for entry in data.get("class", []):
        cid = entry.get("id")
        if not cid or not (entry.get("tokens") or entry.get("component") or entry.get("strong")
                           or entry.get("strong_component")):
            raise CatalogError(f"{path}: a token class needs an id and tokens (or component words)")
        lists = [compile_patterns(entry.get(k), cid) for k in ("tokens", "modules", "strong", "enabled_by", "component",
                                                                "component_modules", "qualifiers", "strong_component")]
        classes.append(TokenClass(cid, *lists, needs_qualifier=bool(entry.get("needs_qualifier", False))))
    return TokenTier(tuple(classes), int(data.get("min_score", 2)), int(data.get("margin", 2)),
                     frozenset(data.get("programming_errors", ())))


@lru_cache(maxsize=1)
def default_tokens() -> TokenTier:
    """The shipped token lists, loaded once per process."""
    return load_tokens()


# a progress bar a carriage-return redraw left glued before the record on the same line ("Multi-thread loading
# shards:   0% Completed | 0/1 [00:00<?, ?it/s][2026-05-25 17:26:25 TP1] Scheduler hit an exception: ..."): what the
# bar was counting is not what failed (its "shards" gave checkpoint_incomplete its points). The bar's bracket is
# bounded, and the pattern is tried only on a line that holds a rate, so a long line costs one pass
_PROGRESS_BEFORE = re.compile(r"^.*\|\s*\d+/\d+ \[[^\]\n]{0,80}(it/s|s/it)\](?=\S)")


def _without_progress_bar(text: str) -> str:
    return _PROGRESS_BEFORE.sub("", text) if "it/s]" in text or "s/it]" in text else text


def _failing_traceback(tbs: list[Traceback], first: int) -> Traceback | None:
    """The traceback ``unknown`` shows: the last one that reaches the first failure or later."""
    return next((t for t in reversed(tbs) if t.start_index >= first or t.end_index >= first), None)


def decisive_lines(lines: list[Line], tbs: list[Traceback], first: int) -> tuple[list[tuple[int, str]], list[str]]:
    """The lines a failure is decided by, (index, text): the final exception line of the failing
    traceback with its message, and the first failure line joined with its continuation, without a
    progress bar glued before it (unless it is a frame: a path counts once, as a module path; or the
    header of a C++ stack, which says where an error was raised, not what); and the module paths of
    that exception's frames."""
    out: list[tuple[int, str]] = []
    paths: list[str] = []
    tb = _failing_traceback(tbs, first)
    if tb is not None:
        sec = tb.final
        if sec.exc_index is not None:
            out.append((sec.exc_index, f"{sec.exc_type}: {sec.message}"))
        paths = [f.file.replace("\\", "/") for f in sec.frames]
    if (not any(i == first for i, _ in out) and not _FRAME_LINE.match(lines[first].text)
            and not CXX_RAISED.match(lines[first].text)):
        out.append((first, _without_progress_bar(with_continuation(lines, first)[0])))
    return out + _pydantic_details(lines, out) + _announced_reasons(lines, out), paths


def _pydantic_details(lines: list[Line], out: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The reasons pydantic lists under a decisive line that names a config's validation errors."""
    at = next((i for i, text in out if _PYDANTIC_HEADER.search(text)), None)
    if at is None:
        return []
    return [(j, lines[j].text.strip()) for j in range(at + 1, min(at + 7, len(lines)))
            if _PYDANTIC_DETAIL.match(lines[j].text)]


def _announced_reasons(lines: list[Line], out: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines a decisive line announces as its reasons: vLLM's "Failed to find a kernel that can implement the WNA16
    linear layer. Reasons:" then one line per kernel; a Rust launcher's (TGI's, TEI's) "Error: Could not create
    backend", a blank line, "Caused by:" and the causes, indented. Each is the same process's (its rank and source)."""
    found: list[tuple[int, str]] = []
    for i, text in out:
        start = i + 1 if _ANNOUNCES.search(text) else _caused_by_after(lines, i)
        if start is None:
            continue
        for j in range(start, min(start + _MAX_REASONS, len(lines))):
            ln = lines[j]
            if (not ln.text.strip() or (ln.rank, ln.source) != (lines[i].rank, lines[i].source)
                    or ln.level in QUIET_LEVELS or _FRAME_LINE.match(ln.text) or _TB_HEADER.match(ln.text)):
                break
            found.append((j, ln.text.strip()))
    return found


def _caused_by_after(lines: list[Line], i: int) -> int | None:
    """The line after a "Caused by:" that follows line ``i`` (a blank line between), else None."""
    for j in range(i + 1, min(i + 3, len(lines))):
        if _CAUSED_BY.match(lines[j].text):
            return j + 1
        if lines[j].text.strip():
            return None
    return None


def name_by_tokens(lines: list[Line], tbs: list[Traceback], first: int, cat: Catalog,
                   tier: TokenTier | None = None) -> TokenVerdict | None:
    """The class the decisive lines' key tokens name, when one clearly wins; else None."""
    tier = tier or default_tokens()
    texts, paths = decisive_lines(lines, tbs, first)
    known = set(cat.ids)
    scored = _scores([tc for tc in tier.classes if tc.id in known], texts, paths)
    if any(cause and score >= tier.min_score for score, cause, _, _ in scored):
        # a component's name says where it failed, not why: it does not outvote a cause ("CuTe DSL HCA compilation
        # requires SM100/SM103, got SM90" is the GPU's, whatever its cutlass and cute words)
        scored = [s for s in scored if s[1]]
    score, _, tc, hits = scored[0] if scored else (0, False, None, [])
    runner_up = scored[1][0] if len(scored) > 1 else 0
    if score < tier.min_score or score - runner_up < tier.margin:
        return name_by_setting(lines, texts, tier, known) if score < tier.min_score else None
    # the evidence is the decisive line with most of the class's words (a component's too: the DSL's class has no
    # other); frames alone, named by their paths, hold no text line: then the first failure (the first frame)
    words = (*tc.tokens, *tc.strong, *tc.component, *tc.qualifiers, *tc.strong_component)
    index = max(texts, key=lambda it: sum(1 for p in words if p.search(it[1])))[0] if texts else first
    return TokenVerdict(tc.id, index, score, runner_up, tuple(hits))


def _scores(classes: list[TokenClass], texts: list[tuple[int, str]],
            paths: list[str]) -> list[tuple[int, bool, TokenClass, list[str]]]:
    """Each class the decisive lines hold a word of: (points, whether a cause word is among them, class, the
    patterns seen), most points first."""
    def seen(patterns, where):
        return [p.pattern for p in patterns if any(may_match(p, low, ws) and p.search(x) for x, low, ws in where)]

    def screened(xs):
        return [(x, low, words_in(low)) for x in xs for low in [x.lower()]]

    words, frames = screened(t for _, t in texts), screened(paths)
    out = []
    for tc in classes:
        cause = seen(tc.tokens, words) + seen(tc.modules, frames)
        strong = seen(tc.strong, words)
        component = seen(tc.component, words) + seen(tc.component_modules, frames)
        own_component = seen(tc.strong_component, words)
        state = seen(tc.qualifiers, words)
        if (cause or strong or component or own_component) and (state or not tc.needs_qualifier):
            cause += state
            # alone it names the feature that ran (two points); beside the class's cause words it is one more place, as
            # a component's name, and widens no margin over another cause ("DFLASH draft out of memory")
            own = (1 if cause or strong else 2) * len(own_component)
            out.append((len(cause) + 2 * len(strong) + len(component) + own, bool(cause or strong), tc,
                        cause + strong + component + own_component))
    return sorted(out, key=lambda s: -s[0])


def name_by_setting(lines: list[Line], texts: list[tuple[int, str]], tier: TokenTier,
                    known: set[str]) -> TokenVerdict | None:
    """A bug's exception (a TypeError, a KeyError: ``programming_errors``) that no class's words explain, in a
    launch whose settings turn on one class's feature (``enabled_by``): that feature's class. The newest code path
    a launch turns on is where such a bug most often is (speculative decoding with a draft the flags do not fit:
    "'NoneType' and 'int'" for a top-k left unset); the fix says to relaunch without it to confirm."""
    bug = next(((i, kind) for i, t in texts if (kind := exception_type(t)) in tier.programming_errors), None)
    if bug is None:
        return None
    found = {}
    for tc in tier.classes:
        if tc.id in known and tc.enabled_by:
            at = next((j for j, ln in enumerate(lines) if any(p.search(ln.text) for p in tc.enabled_by)), None)
            if at is not None:
                found[tc.id] = at
    if len(found) != 1:  # two features on: the settings do not say which
        return None
    ((cls, at),) = found.items()
    return TokenVerdict(cls, bug[0], 0, 0, (bug[1], lines[at].text.strip()[:120]), setting=at)
