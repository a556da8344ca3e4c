"""Root cause of a failed launch from its log: tracebacks, signatures, ranking.

`diagnose(text)` normalises the log (normalize.py), parses every Python traceback per rank,
matches each line against the catalog's signatures (catalog.toml) and picks the root cause:
the first decisive error in time order across ranks, not the last one printed. Errors that a
root cause provokes later (a CalledProcessError after a gcc error, NCCL timeouts on the ranks
that outlived a crashed peer, "Received sigquit from a child process") do not win.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .normalize import Line, normalize

__all__ = [
    "Catalog", "CatalogClass", "Diagnosis", "Evidence", "Frame", "Traceback", "TracebackSection",
    "diagnose", "diagnose_lines", "load_catalog", "parse_tracebacks", "format_chain",
]

CATALOG_PATH = Path(__file__).with_name("catalog.toml")
BENIGN_PATH = Path(__file__).with_name("benign.toml")
SUPPORTED_CATALOG_VERSIONS = {1}


# --------------------------------------------------------------------------------------------
# catalog


@dataclass(frozen=True)
class CatalogClass:
    id: str
    title: str
    meaning: str
    evidence: tuple[re.Pattern, ...]
    symptoms: tuple[re.Pattern, ...]
    supporting: tuple[re.Pattern, ...]
    decisive: bool
    priority: int
    components: tuple[tuple[re.Pattern, str], ...]
    fix: str
    remedy: str | None
    remedies: tuple[tuple[re.Pattern, str], ...]
    alternatives: tuple[str, ...]
    exceptions: tuple["ExceptionSignature", ...] = ()


@dataclass(frozen=True)
class ExceptionSignature:
    """A signature over a parsed traceback section rather than one line: the exception's type,
    the module path of its frames and the key tokens of its message (each optional but the type).
    `module` is searched in every frame's file path and in the message (an import error names
    the module it could not import)."""

    type: re.Pattern
    module: re.Pattern | None
    message: re.Pattern | None

    def matches(self, section) -> bool:
        if section.exc_type is None or not self.type.fullmatch(section.exc_type.rsplit(".", 1)[-1]):
            return False
        if self.message is not None and not self.message.search(section.message):
            return False
        if self.module is None:
            return True
        paths = [f.file.replace("\\", "/") for f in section.frames]
        return any(self.module.search(p) for p in paths) or bool(self.module.search(section.message))


@dataclass(frozen=True)
class Catalog:
    version: int
    classes: tuple[CatalogClass, ...]
    ignore: tuple[re.Pattern, ...]
    healthy_strong: tuple[re.Pattern, ...]
    healthy_weak: tuple[re.Pattern, ...]
    sglang_markers: tuple[re.Pattern, ...]
    sglang_ready: tuple[re.Pattern, ...]
    index: "_AnchorIndex"  # which patterns a line's words can possibly match: a cheap first pass
    benign: tuple[re.Pattern, ...] = ()  # known harmless lines (benign.toml): never evidence, never a failure
    stages: tuple[tuple[str, tuple[re.Pattern, ...]], ...] = ()  # startup milestones, in order

    def get(self, class_id: str) -> CatalogClass:
        for c in self.classes:
            if c.id == class_id:
                return c
        raise KeyError(class_id)

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.classes]


class CatalogError(ValueError):
    pass


def _compile(patterns, where: str) -> tuple[re.Pattern, ...]:
    out = []
    for p in patterns or ():
        try:
            out.append(re.compile(p, re.IGNORECASE))
        except re.error as e:
            raise CatalogError(f"{where}: bad regex {p!r}: {e}") from None
    return tuple(out)


def _read_versioned(path: Path, what: str) -> dict:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    version = data.get("version")
    if version not in SUPPORTED_CATALOG_VERSIONS:
        raise CatalogError(f"{path}: {what} version {version!r} is not supported (expected one of "
                           f"{sorted(SUPPORTED_CATALOG_VERSIONS)})")
    return data


def _exception_signatures(entries, cid: str) -> tuple[ExceptionSignature, ...]:
    out = []
    for e in entries or ():
        if not e.get("type"):
            raise CatalogError(f"{cid}: an exception signature needs a type")
        type_, module, message = (_compile([e[k]], cid)[0] if e.get(k) else None for k in ("type", "module", "message"))
        out.append(ExceptionSignature(type_, module, message))
    return tuple(out)


def _catalog_class(entry: dict, path: Path, seen: set) -> CatalogClass:
    cid = entry.get("id")
    if not cid or cid in seen or cid in ("healthy", "unknown"):
        raise CatalogError(f"{path}: class id {cid!r} is missing, reserved or duplicated")
    seen.add(cid)
    for key in ("title", "meaning", "evidence", "fix"):
        if not entry.get(key):
            raise CatalogError(f"{path}: class {cid} has no {key}")
    return CatalogClass(
        id=cid, title=entry["title"].strip(), meaning=" ".join(entry["meaning"].split()),
        evidence=_compile(entry["evidence"], cid), symptoms=_compile(entry.get("symptoms"), cid),
        supporting=_compile(entry.get("supporting"), cid), decisive=bool(entry.get("decisive", True)),
        priority=int(entry.get("priority", 50)),
        components=tuple((re.compile(c["match"], re.IGNORECASE), c["name"]) for c in entry.get("components", [])),
        fix=" ".join(entry["fix"].split()), remedy=entry.get("remedy") or None,
        remedies=tuple((re.compile(r["when"], re.IGNORECASE), r["remedy"]) for r in entry.get("remedies", [])),
        alternatives=tuple(entry.get("alternatives", [])),
        exceptions=_exception_signatures(entry.get("exceptions"), cid),
    )


def load_catalog(path: Path | str | None = None, benign: Path | str | None = None) -> Catalog:
    """The catalog (catalog.toml) and the known benign lines beside it (benign.toml)."""
    path = Path(path) if path is not None else CATALOG_PATH
    data = _read_versioned(path, "catalog")
    benign_path = Path(benign) if benign is not None else path.with_name(BENIGN_PATH.name)
    benign_data = _read_versioned(benign_path, "benign list") if benign_path.exists() else {}
    seen: set = set()
    classes = [_catalog_class(entry, path, seen) for entry in data.get("class", [])]
    healthy = data.get("healthy", {})
    return Catalog(
        version=data["version"], classes=tuple(classes),
        ignore=_compile(data.get("ignore", {}).get("patterns"), "ignore"),
        healthy_strong=_compile(healthy.get("strong"), "healthy"),
        healthy_weak=_compile(healthy.get("weak"), "healthy"),
        sglang_markers=_compile(healthy.get("sglang_markers"), "healthy"),
        sglang_ready=_compile(healthy.get("sglang_ready"), "healthy"),
        index=_AnchorIndex(classes),
        benign=_compile([b["pattern"] for b in benign_data.get("benign", [])], "benign"),
        stages=tuple((st["name"], _compile(st["patterns"], f"stage {st['name']}")) for st in data.get("stage", [])),
    )


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


class _AnchorIndex:
    """word -> the (class, kind, pattern) entries that need it; plus the patterns without one.
    Lets a 50k-line log be scanned with one tokenisation per line instead of every regex."""

    def __init__(self, classes):
        self.by_word: dict[str, list[tuple[int, str, re.Pattern]]] = {}
        self.by_literal: dict[str, list[tuple[int, str, re.Pattern]]] = {}
        self.always: list[tuple[int, str, re.Pattern]] = []
        for ci, c in enumerate(classes):
            for kind, patterns in (("e", c.evidence), ("s", c.symptoms)):
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


@lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    return load_catalog()


# --------------------------------------------------------------------------------------------
# tracebacks

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_CONNECTOR = re.compile(r"^\s*(?P<kind>The above exception was the direct cause of the following exception:|"
                        r"During handling of the above exception, another exception occurred:)")
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_TB_START = "Traceback (most recent call last):"


@dataclass
class Frame:
    file: str
    line: int
    function: str

    @property
    def module(self) -> str:
        name = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        return name[:-3] if name.endswith(".py") else name

    def label(self) -> str:
        return f"{self.module}.{self.function}"


@dataclass
class TracebackSection:
    frames: list[Frame] = field(default_factory=list)
    exc_type: str | None = None
    message: str = ""
    exc_index: int | None = None  # index (into the normalised lines) of the exception line
    start_index: int = 0
    link: str | None = None  # how the NEXT section relates: "cause" / "context"


@dataclass
class Traceback:
    rank: str | None
    sections: list[TracebackSection]
    start_index: int
    end_index: int
    code_lines: set[int] = field(default_factory=set)  # echoed source lines and carets, never evidence

    @property
    def final(self) -> TracebackSection:
        return self.sections[-1]

    def section_at(self, index: int) -> TracebackSection | None:
        for s in self.sections:
            end = s.exc_index if s.exc_index is not None else self.end_index
            if s.start_index <= index <= end + 3:
                return s
        return None


_NOISE_FUNCS = {"_call_impl", "_wrapped_call_impl", "decorate_context", "_run_code", "_run_module_as_main",
                "inner", "wrapper", "wrapped", "_fn", "__call__", "<lambda>", "<listcomp>", "<genexpr>",
                "<dictcomp>", "<module>"}


def _is_noise(frame: Frame) -> bool:
    f = frame.file.replace("\\", "/")
    if f.startswith("<"):
        return True
    if frame.function in _NOISE_FUNCS:
        return True
    # the standard library (not site-/dist-packages): subprocess, threading, runpy, importlib, ...
    if re.search(r"/lib/python3[\d.]*/(?!site-packages|dist-packages)[^/]+(/|\.py$)", f):
        return True
    return bool(re.search(r"/torch/(nn/modules/module|utils/_contextlib|_dynamo/eval_frame)\.py$", f))


def format_chain(frames: list[Frame]) -> list[str]:
    """`module.function` labels, outermost first, without wrapper/stdlib noise or repeats."""
    out: list[str] = []
    for fr in frames:
        if _is_noise(fr):
            continue
        label = fr.label()
        if not out or out[-1] != label:
            out.append(label)
    return out


def parse_tracebacks(lines: list[Line]) -> list[Traceback]:
    """Every Python traceback, parsed separately per rank (so two ranks' tracebacks printed
    interleaved line by line come out as two). Chained sections ("The above exception was the
    direct cause...", "During handling...") belong to one Traceback."""
    groups: dict[str | None, list[int]] = {}
    for i, ln in enumerate(lines):
        groups.setdefault(ln.rank, []).append(i)
    result: list[Traceback] = []
    for rank, idxs in groups.items():
        tb: Traceback | None = None
        sec: TracebackSection | None = None
        state = "idle"  # idle | frames | message | between
        pending_link: str | None = None
        msg_lines = 0
        prev_frame = False
        base = 0  # the traceback's own indentation: pip and quoting indent a whole traceback
        for i in idxs:
            text = lines[i].text
            stripped = text.strip()
            if _TB_START in text:
                if tb is not None and pending_link is not None:
                    tb.sections[-1].link = pending_link
                    sec = TracebackSection(start_index=i)
                    tb.sections.append(sec)
                else:
                    if tb is not None:
                        result.append(tb)
                    sec = TracebackSection(start_index=i)
                    tb = Traceback(rank, [sec], i, i)
                    base = len(text) - len(text.lstrip())
                pending_link, state, msg_lines, prev_frame = None, "frames", 0, False
                tb.end_index = i
                continue
            if tb is None:
                fm = _FRAME.match(text)
                if fm is None:
                    continue
                # a traceback whose header was cut off (an excerpt, a paste): start at its first frame
                sec = TracebackSection(start_index=i)
                tb = Traceback(rank, [sec], i, i)
                state, pending_link, msg_lines, prev_frame = "frames", None, 0, False
                base = max(0, len(text) - len(text.lstrip()) - 2)  # frames sit two columns in
            m = _CONNECTOR.match(text)
            if m:
                pending_link = "cause" if "direct cause" in m["kind"] else "context"
                state, tb.end_index = "between", i
                continue
            if state == "frames":
                fm = _FRAME.match(text)
                if fm:
                    sec.frames.append(Frame(fm["file"], int(fm["line"]), fm["func"]))
                    tb.end_index, prev_frame = i, True
                    continue
                em = _EXC.match(stripped)
                after_frame, prev_frame = prev_frame, False
                if (not stripped or len(text) - len(text.lstrip()) > base or stripped.startswith("[Previous line repeated")
                        or (after_frame and em is None)):  # the echoed source line, even when unindented
                    if stripped and sec.frames:
                        tb.code_lines.add(i)
                    elif not stripped:
                        prev_frame = after_frame  # blank lines inside a paste keep the frame's context
                    tb.end_index = i
                    continue
                if em and (sec.frames or "." in em["type"] or em["type"][:1].isupper()):
                    sec.exc_type, sec.message, sec.exc_index = em["type"], (em["msg"] or "").strip(), i
                    state, msg_lines, tb.end_index = "message", 0, i
                    continue
                state = "idle"
                result.append(tb)
                tb, sec = None, None
                continue
            if state == "message":
                if not stripped:
                    state, tb.end_index = "between", i
                    continue
                if msg_lines < 12 and not lines[i].prefixed:
                    sec.message = (sec.message + "\n" + stripped).strip()
                    msg_lines += 1
                    tb.end_index = i
                    continue
                result.append(tb)
                tb, sec, state = None, None, "idle"
                continue
            if state == "between":
                if not stripped:
                    continue
                result.append(tb)
                tb, sec, state = None, None, "idle"
        if tb is not None:
            result.append(tb)
    result.sort(key=lambda t: t.start_index)
    return result


def traceback_chain(tb: Traceback, section: TracebackSection | None = None) -> list[str]:
    """The call chain of a traceback, outermost first: the final section's frames (the full path
    from the entry point), followed by the matched earlier section's frames when those are a
    call path of their own (not a module-level import)."""
    chain = format_chain(tb.final.frames)
    if section is not None and section is not tb.final:
        extra = [label for label in format_chain(section.frames) if label not in chain]
        chain += extra
    return chain


# --------------------------------------------------------------------------------------------
# diagnosis


@dataclass
class Evidence:
    line: str
    rank: str | None = None
    lineno: int | None = None

    def to_json(self) -> dict:
        return {"line": self.line, "rank": self.rank, "lineno": self.lineno}


@dataclass
class Diagnosis:
    cls: str
    cause: str
    evidence: list[Evidence]
    chain: list[str]
    fix: str
    remedy: str | None
    confidence: float
    title: str = ""
    meaning: str = ""
    component: str | None = None
    alternatives: list[str] = field(default_factory=list)
    also_seen: list[str] = field(default_factory=list)  # other classes matched later (consequences)
    ranks: list[str] = field(default_factory=list)  # ranks that showed the root cause
    stage: str | None = None  # healthy: how far the startup got ("weights loaded, ..., not yet ready")
    ready: bool = False  # the server's ready line was seen (and nothing fatal after it)

    @property
    def healthy(self) -> bool:
        return self.cls == "healthy"

    def to_dict(self) -> dict:
        return {
            "class": self.cls, "title": self.title, "cause": self.cause,
            "evidence": [e.to_json() for e in self.evidence], "chain": self.chain, "component": self.component,
            "fix": self.fix, "remedy": self.remedy, "alternatives": self.alternatives,
            "confidence": round(self.confidence, 2), "meaning": self.meaning, "also_seen": self.also_seen,
            "ranks": self.ranks, "stage": self.stage, "ready": self.ready,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


@dataclass
class _Match:
    cls: CatalogClass
    index: int
    strong: bool  # evidence (True) or symptom (False)


# A failure the catalog may not know: an exception line, a traceback, a fatal compiler/runtime
# message, a process that died or exited non-zero. Benign lines and INFO/WARNING records never count.
_FAILURE = re.compile(
    r"^\s*[\w.]*(Error|Exception|Exit|Interrupt)\w*:|^\s*Traceback \(most recent call last\)|"
    r"\b(fatal error|FATAL|Segmentation fault|core dumped|Killed|Aborted|returned non-zero exit status|"
    r"Scheduler hit an exception|Received sigquit|is dead\b|code=(killed|dumped)|status=[1-9]\d*/|"
    r"Failed with result|exit(ed)? with (code|status) [1-9])|^\[?(ERROR|CRITICAL)\b|\berror:", re.IGNORECASE)
# After the ready line only a dead process is a failure (a request's traceback is not).
_DEATH = re.compile(r"\b(Segmentation fault|core dumped|Killed|Aborted|Received sigquit|is dead\b|"
                    r"code=(killed|dumped|exited)|status=[1-9]\d*/|Failed with result)", re.IGNORECASE)
# Words one of the patterns above needs (lowercased): a line without any is skipped cheaply.
_FAILURE_HINT = re.compile(r"error|exception|exit|interrupt|traceback|fatal|segmentation|dumped|killed|aborted|"
                           r"non-zero|sigquit|dead|code=|status=|failed with|critical")
_QUIET_LEVELS = {"DEBUG", "INFO", "WARNING"}
_BARE_EXC = re.compile(r"^\s*[\w.]*(Error|Exception)\w*:\s*$")
_CAUSE_MAX = 220


def _clip(text: str, n: int = _CAUSE_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _benign(text: str, cat: Catalog) -> bool:
    return any(p.search(text) for p in cat.benign)


def _first_failure(lines: list[Line], cat: Catalog, code: set[int], start: int = 0,
                   pattern: re.Pattern = _FAILURE) -> int | None:
    """Index of the first line (from `start`) that says something failed, or None."""
    for i in range(start, len(lines)):
        ln = lines[i]
        if i in code or ln.level in _QUIET_LEVELS or not ln.text.strip():
            continue
        loud = pattern is _FAILURE and ln.level in ("ERROR", "CRITICAL")  # the logger said so
        if (loud or (_FAILURE_HINT.search(ln.text.lower()) and pattern.search(ln.text))) and not _benign(ln.text, cat):
            return i
    return None


def _stage(lines: list[Line], cat: Catalog, ready: bool) -> tuple[str, int | None]:
    """How far the startup got, from the milestones in the catalog's [[stage]] list, and the
    index of the last milestone line."""
    reached, last = [], None
    for name, patterns in cat.stages:
        for i, ln in enumerate(lines):
            if any(p.search(ln.text) for p in patterns):
                reached.append(name)
                last = i if last is None else max(last, i)
                break
    if not reached:
        reached.append("no startup milestone logged")
    reached.append("ready" if ready else "not yet ready")
    return ", ".join(reached), last


def _is_sglang(lines: list[Line], cat: Catalog) -> bool:
    for ln in lines[:4000]:
        if ln.rank and ln.rank.startswith(("TP", "DP", "PP", "EP")) and ln.prefixed and ln.time and len(ln.time) >= 8:
            return True
        if any(p.search(ln.text) for p in cat.sglang_markers):
            return True
    return False


def _ready_index(lines: list[Line], cat: Catalog) -> int | None:
    """Index of the last line saying the server reached ready, if any."""
    sglang = _is_sglang(lines, cat)
    strong = cat.sglang_ready if sglang else cat.healthy_strong
    weak = () if sglang else cat.healthy_weak
    found = None
    for i, ln in enumerate(lines):
        t = ln.text
        if any(p.search(t) for p in strong) or any(p.search(t) for p in weak):
            found = i
    return found


def _find_matches(lines: list[Line], cat: Catalog, tbs: list[Traceback], skip: set[int] = frozenset()) -> list[_Match]:
    """Every line matching a class's evidence or symptoms (benign and echoed source lines never
    do), plus every traceback section matching a class's exception signature, in line order."""
    matches: list[_Match] = []
    hits_of = cat.index.hits
    for i, ln in enumerate(lines):
        t = ln.text
        if not t or i in skip:
            continue
        if _BARE_EXC.match(t):  # "RuntimeError:" with its message on the following lines
            t = " ".join([t.strip(), *(x.text.strip() for x in lines[i + 1:i + 4] if x.text.strip())])
        hits = hits_of(t)
        if not hits or any(p.search(t) for p in cat.ignore) or _benign(t, cat):
            continue
        for ci, c in enumerate(cat.classes):
            if (ci, "e") in hits:
                matches.append(_Match(c, i, True))
            elif (ci, "s") in hits:
                matches.append(_Match(c, i, False))
    for tb in tbs:
        for sec in tb.sections:
            if sec.exc_index is None or _benign(lines[sec.exc_index].text, cat):
                continue
            matches += [_Match(c, sec.exc_index, True) for c in cat.classes
                        if any(sig.matches(sec) for sig in c.exceptions)]
    matches.sort(key=lambda m: m.index)
    return matches


def _pick_root(matches: list[_Match]) -> _Match | None:
    """First decisive evidence in line order (ties on one line: highest priority); else the
    strongest symptom, earliest first."""
    decisive = [m for m in matches if m.strong and m.cls.decisive]
    if decisive:
        first = min(m.index for m in decisive)
        return max((m for m in decisive if m.index == first), key=lambda m: m.cls.priority)
    others = [m for m in matches if m.strong] or matches
    if not others:
        return None
    return min(others, key=lambda m: (-m.cls.priority, m.index))


def _related_traceback(tbs: list[Traceback], lines: list[Line], index: int) -> tuple[Traceback | None, TracebackSection | None]:
    """The traceback that contains the matched line, else the nearest one after it (same rank
    first), within a window: the error that a compiler or library printed before raising."""
    rank = lines[index].rank
    for tb in tbs:
        if tb.start_index <= index <= tb.end_index + 2 and (tb.rank == rank or rank is None):
            return tb, tb.section_at(index)
    after = [tb for tb in tbs if tb.start_index > index and tb.start_index - index <= 400]
    same = [tb for tb in after if tb.rank == rank and rank is not None]
    pick = (same or after or [None])[0]
    return pick, (pick.final if pick else None)


def _component(cls: CatalogClass | None, chain: list[str], lines: list[Line]) -> str | None:
    text = " -> ".join(chain)
    name = None
    if cls is not None and text:
        for pattern, label in cls.components:
            if pattern.search(text):
                name = label
                break
    if name is None and text:
        for pattern, label in _GENERIC_COMPONENTS:
            if pattern.search(text):
                name = label
                break
    if name and "warmup" not in name and _during_warmup(lines):
        name += ", during the server warmup"
    return name


_GENERIC_COMPONENTS = [
    (re.compile(r"_execute_server_warmup|_wait_and_warmup"), "server warmup"),
    (re.compile(r"get_image_feature|vision_tower|VisionAttention"), "vision tower"),
    (re.compile(r"cuda_graph_runner|capture_one_batch_size"), "CUDA graph capture"),
    (re.compile(r"load_weights|weights_iterator|load_model"), "model weight loading"),
    (re.compile(r"init_memory_pool|profile_max_num_token"), "KV cache allocation"),
    (re.compile(r"init_torch_distributed|initialize_model_parallel|init_distributed_environment"), "distributed init"),
    (re.compile(r"tokenizer", re.IGNORECASE), "tokenizer"),
]


def _during_warmup(lines: list[Line]) -> bool:
    """SGLang sends its warmup request after uvicorn starts; a crash between that and the
    'ready to roll' line, with warmup not skipped, happened in the warmup."""
    started = skipped = False
    for ln in lines:
        t = ln.text
        if "skip_server_warmup=True" in t:  # SGLang logs its ServerArgs at startup
            skipped = True
        if "Uvicorn running on" in t or "Application startup complete" in t:
            started = True
        if "warmup error" in t or "Initialization failed. warmup" in t:
            return True
    return started and not skipped


def _collapse(evidence: list[Evidence]) -> list[Evidence]:
    """One entry per distinct text; the ranks that printed it joined ('TP0,TP1')."""
    by_text: dict[str, Evidence] = {}
    order: list[str] = []
    for e in evidence:
        key = e.line
        if key in by_text:
            prev = by_text[key]
            if e.rank and (not prev.rank or e.rank not in prev.rank.split(",")):
                prev.rank = f"{prev.rank},{e.rank}" if prev.rank else e.rank
            continue
        by_text[key] = Evidence(e.line, e.rank, e.lineno)
        order.append(key)
    return [by_text[k] for k in order]


def _unknown(lines: list[Line], tbs: list[Traceback], first: int) -> Diagnosis:
    """A failure no signature knows: show the lines a human would read first."""
    ev: list[Evidence] = []
    tb = next((t for t in reversed(tbs) if t.start_index >= first or t.end_index >= first), None)
    if tb is not None and tb.final.exc_index is not None:
        ln = lines[tb.final.exc_index]
        ev.append(Evidence(_clip(ln.text, 400), ln.rank, ln.no))
    for ln in lines[max(0, first - 2): first + 4]:
        if ln.text.strip():
            ev.append(Evidence(_clip(ln.text, 400), ln.rank, ln.no))
    chain = traceback_chain(tb) if tb else []
    if tb is not None and tb.final.exc_type:
        s = tb.final
        cause = _clip(f"unrecognised failure: {s.exc_type}: {s.message.splitlines()[0] if s.message else ''}")
    else:
        cause = _clip(f"unrecognised failure: {lines[first].text.strip()}")
    return Diagnosis(
        cls="unknown", title="Unrecognised failure", cause=cause, evidence=_collapse(ev), chain=chain,
        fix="No known signature matched. Read the evidence lines and the traceback; if this is a recurring "
            "failure, add its signature to noderig/diagnose/catalog.toml.",
        remedy=None, confidence=0.3, meaning="The launch failed with no signature in the catalog.",
        component=_component(None, chain, lines),
    )


def _healthy(lines: list[Line], cat: Catalog, ready: int | None) -> Diagnosis:
    """No failure: the server is ready, or still starting (the stage says how far it got)."""
    stage, last = _stage(lines, cat, ready is not None)
    at = ready if ready is not None else last
    if at is None:
        at = max((i for i, ln in enumerate(lines) if ln.text.strip()), default=None)
    evidence = [Evidence(_clip(lines[at].text), lines[at].rank, lines[at].no)] if at is not None else []
    if ready is not None:
        cause, title = f"the server reached ready: {lines[ready].text.strip()}", "Server reached ready"
        meaning = "The server started and reported that it is ready to serve."
    else:
        cause, title = f"no failure in the log; the server is still starting ({stage})", "No failure found"
        meaning = ("Nothing in the log says the launch failed, and the ready line was not seen yet: the server "
                   "is still starting, or the log stops before it was ready.")
    return Diagnosis(cls="healthy", title=title, cause=_clip(cause), evidence=evidence, chain=[],
                     fix="Nothing to fix.", remedy=None, confidence=0.95 if ready is not None else 0.7,
                     meaning=meaning, stage=stage, ready=ready is not None)


def diagnose_lines(lines: list[Line], catalog: Catalog | None = None) -> Diagnosis:
    """Three outcomes: a known class (the first decisive signature in time order), `unknown`
    (something failed and no signature matches) or `healthy` (nothing failed; ready or not yet)."""
    cat = catalog or default_catalog()
    tbs = parse_tracebacks(lines)
    code = set().union(*(tb.code_lines for tb in tbs)) if tbs else set()
    matches = _find_matches(lines, cat, tbs, code)
    ready = _ready_index(lines, cat)
    if ready is not None:
        matches = [m for m in matches if m.index > ready]  # it was fine until then
        if not any(m.strong for m in matches):
            died = _first_failure(lines, cat, code, ready + 1, _DEATH)
            return _healthy(lines, cat, ready) if died is None else _unknown(lines, tbs, died)
    root = _pick_root(matches)
    if root is None:
        first = _first_failure(lines, cat, code)
        return _healthy(lines, cat, None) if first is None else _unknown(lines, tbs, first)
    return _known(lines, tbs, matches, root)


def _known(lines: list[Line], tbs: list[Traceback], matches: list[_Match], root: _Match) -> Diagnosis:
    cls = root.cls
    root_line = lines[root.index]
    tb, section = _related_traceback(tbs, lines, root.index)
    chain = traceback_chain(tb, section) if tb else []
    # evidence: the decisive line(s) of the root class on every rank, then supporting context
    same = [m for m in matches if m.cls is cls and m.strong == root.strong]
    ev = [Evidence(_clip(lines[m.index].text, 400), lines[m.index].rank, lines[m.index].no) for m in same[:40]]
    if tb is not None and tb.final.exc_index is not None and tb.final.exc_index != root.index:
        x = lines[tb.final.exc_index]
        ev.append(Evidence(_clip(x.text, 400), x.rank, x.no))
    ev += _supporting(lines, cls, root.index, len(ev))
    ranks = sorted({lines[m.index].rank for m in same if lines[m.index].rank}, key=_rank_key)
    later = list(dict.fromkeys(m.cls.id for m in matches if m.cls is not cls and m.index > root.index))
    remedy = cls.remedy
    for pattern, rid in cls.remedies:
        if pattern.search(root_line.text):
            remedy = rid or None
            break
    confidence = 0.9 if (root.strong and cls.decisive) else 0.6
    component = _component(cls, chain, lines)
    if component and cls.components and any(p.search(" -> ".join(chain)) for p, _ in cls.components):
        confidence = min(0.97, confidence + 0.05)
    where = f" [{root_line.rank}]" if root_line.rank else ""
    cause = _clip(f"{cls.title}{f' in the {component}' if component else ''}{where}: {root_line.text.strip()}")
    return Diagnosis(
        cls=cls.id, title=cls.title, cause=cause, evidence=_collapse(ev)[:12], chain=chain, fix=cls.fix,
        remedy=remedy, confidence=confidence, meaning=cls.meaning, component=component,
        alternatives=list(cls.alternatives), also_seen=later, ranks=ranks,
    )


def _supporting(lines: list[Line], cls: CatalogClass, index: int, have: int) -> list[Evidence]:
    out: list[Evidence] = []
    if not cls.supporting:
        return out
    for ln in lines[max(0, index - 300): min(len(lines), index + 300)]:
        if have + len(out) >= 24:
            break
        if ln.text and any(p.search(ln.text) for p in cls.supporting):
            out.append(Evidence(_clip(ln.text, 400), ln.rank, ln.no))
    return out


def _rank_key(rank: str):
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", rank)]


def diagnose(text: str, catalog: Catalog | None = None) -> Diagnosis:
    """Diagnose one launch's log (journal output, a `-o cat` dump, container logs or a paste)."""
    return diagnose_lines(normalize(text), catalog)
