"""The catalog: signatures (catalog.toml) and known benign lines (benign.toml), loaded and checked.

The catalog is data, versioned with the project: each ``[[class]]`` names a root cause with its
evidence and symptom patterns, exception signatures, components, fix and remedy. Loading
compiles every pattern (a bad regex is a CatalogError naming where it is) and builds the
anchor index (anchors.py) that lets a long log be matched without running every regex.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .anchors import AnchorIndex

__all__ = ["CATALOG_PATH", "BENIGN_PATH", "Catalog", "CatalogClass", "CatalogError", "ExceptionSignature",
           "any_quote", "compile_patterns", "default_catalog", "load_catalog"]

CATALOG_PATH = Path(__file__).with_name("catalog.toml")
BENIGN_PATH = Path(__file__).with_name("benign.toml")
SUPPORTED_CATALOG_VERSIONS = {1}


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
    # words of its evidence that fail the launch even in a record its logger marked WARNING (a CUDA runtime
    # the driver cannot serve fails every later GPU call, whatever level the program that noticed it chose)
    fatal_when_warned: tuple[re.Pattern, ...] = ()
    # classes whose decisive evidence, printed within `detail_lines` lines after this class's evidence on
    # the same rank, is the detail this error reports about itself (NCCL's "Last error:" naming a full
    # /dev/shm): that detail is the root cause, this error only how it surfaced
    explained_by: tuple[str, ...] = ()
    detail_lines: int = 0
    # symptoms that name the class only when nothing failed before them: the shell's bare "Killed" is the
    # kernel's OOM killer when it is all that failed, and a launcher killing its own process tree after an error
    alone: tuple[re.Pattern, ...] = ()


@dataclass(frozen=True)
class ExceptionSignature:
    """A signature over a parsed traceback section rather than one line: the exception's type,
    the module path of its frames and the key tokens of its message (each optional but the type).
    `module` is searched in every frame's file path and in the message (an import error names
    the module it could not import); `raised_in` only in the innermost frame's path (where it was
    raised: a module that every call passes through, as a caller, says nothing of the cause).
    `cut` false: a traceback cut before its exception line inside that module names nothing (the
    module raises for this cause only with the type the signature asks, and for others too).
    `within`: a call (`module.function` of any frame) that only this cause's code makes, for a
    traceback cut before its exception line only: it failed inside that call, whatever frame it was
    cut at. With its exception line the message decides (an out-of-memory raised while capturing
    CUDA graphs is cuda_oom), so such a signature never matches a whole traceback. `not_within`: calls
    inside which a cut traceback names nothing, though its innermost frame is in the module: code every
    request passes through (SGLang's scheduler runs every batch through the speculative worker, so a cut
    there while serving says nothing of the speculative settings; one while building the worker does)."""

    type: re.Pattern
    module: re.Pattern | None
    message: re.Pattern | None
    raised_in: re.Pattern | None = None
    cut: bool = True
    within: re.Pattern | None = None
    not_within: re.Pattern | None = None

    def matches(self, section) -> bool:
        if self.within is not None:
            return False
        if section.exc_type is None or not self.type.fullmatch(section.exc_type.rsplit(".", 1)[-1]):
            return False
        if self.message is not None and not self._message_matches(section.message):
            return False
        if self.raised_in is not None and not (section.frames and self.raised_in.search(_path(section.frames[-1]))):
            return False
        if self.module is None:
            return True
        paths = [_path(f) for f in section.frames]
        return any(self.module.search(p) for p in paths) or bool(self.module.search(section.message))

    def _message_matches(self, message: str) -> bool:
        """The message as printed, or with its lines joined by spaces: a paste wrapped at a word
        ("... is not" / "compatible with radix cache") keeps the words a signature spans apart."""
        return bool(self.message.search(message)) or ("\n" in message and bool(self.message.search(message.replace("\n", " "))))

    def located_in(self, section) -> bool:
        """A traceback cut before its exception line: its innermost frame is in this signature's
        module path, or any frame in its `within` call (where it failed is known, what it raised is
        not)."""
        if not (self.cut and section.exc_type is None and section.frames):
            return False
        if self.not_within is not None and any(self.not_within.search(f.label()) for f in section.frames):
            return False
        if self.within is not None:
            return any(self.within.search(f"{f.module}.{f.function}") for f in section.frames)
        where = self.raised_in or self.module
        return where is not None and bool(where.search(_path(section.frames[-1])))


def _path(frame) -> str:
    return frame.file.replace("\\", "/")


@dataclass(frozen=True)
class Catalog:
    version: int
    classes: tuple[CatalogClass, ...]
    ignore: tuple[re.Pattern, ...]
    healthy_strong: tuple[re.Pattern, ...]
    healthy_weak: tuple[re.Pattern, ...]
    sglang_markers: tuple[re.Pattern, ...]
    sglang_ready: tuple[re.Pattern, ...]
    index: AnchorIndex  # which patterns a line's words can possibly match: a cheap first pass
    benign: tuple[re.Pattern, ...] = ()  # known harmless lines (benign.toml): never evidence, never a failure
    stages: tuple[tuple[str, tuple[re.Pattern, ...]], ...] = ()  # startup milestones, in order
    relay: tuple[re.Pattern, ...] = ()  # one process reporting another's death: never a cause itself
    outlived: tuple[re.Pattern, ...] = ()  # warnings that are a failure only when no later milestone follows
    warning_records: tuple[re.Pattern, ...] = ()  # level-less records that are warnings by their words
    handled: tuple[re.Pattern, ...] = ()  # a line that says the traceback just before it was caught
    healthy_own: tuple[re.Pattern, ...] = ()  # ready lines only one server prints: final in any log
    progress_stages: frozenset[str] = frozenset()  # milestones that are steps under way (named only when last)
    # exception type -> the classes whose exception signatures can match it: looked up once per type, not per line
    _by_type: dict = field(default_factory=dict, compare=False, repr=False)

    def get(self, class_id: str) -> CatalogClass:
        for c in self.classes:
            if c.id == class_id:
                return c
        raise KeyError(class_id)

    def raising(self, exc_type: str) -> tuple[tuple[CatalogClass, tuple[ExceptionSignature, ...]], ...]:
        """The classes with a whole-traceback exception signature for this type (its last dotted part), each with
        those signatures, in catalog order: a log of thousands of exception lines of a few types reads each type once."""
        name = exc_type.rsplit(".", 1)[-1]
        if name not in self._by_type:
            self._by_type[name] = tuple(
                (c, sigs) for c in self.classes
                if (sigs := tuple(s for s in c.exceptions if s.within is None and s.type.fullmatch(name))))
        return self._by_type[name]

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.classes]

    def is_benign(self, text: str, wrapped: tuple[str, str | None] | None = None) -> bool:
        """A known harmless line (benign.toml): never evidence, never a failure. With ``wrapped``
        (the line joined with its continuation, and that continuation alone), a benign text the
        paste wrapped onto the next line counts too, one that is all on the next line does not."""
        if any(p.search(text) for p in self.benign):
            return True
        if wrapped is None or wrapped[1] is None:
            return False
        joined, nxt = wrapped
        return any(p.search(joined) for p in self.benign) and not any(p.search(nxt) for p in self.benign)


class CatalogError(ValueError):
    pass


def compile_patterns(patterns, where: str) -> tuple[re.Pattern, ...]:
    """Each pattern compiled case-insensitively and with any quote for a quote (any_quote); a bad one names
    ``where`` it came from."""
    out = []
    for p in patterns or ():
        try:
            out.append(re.compile(any_quote(p), re.IGNORECASE))
        except re.error as e:
            raise CatalogError(f"{where}: bad regex {p!r}: {e}") from None
    return tuple(out)


_QUOTES = "'\"`"
_ANY_QUOTE = "['\"`]"


def any_quote(pattern: str) -> str:
    """The pattern with each quote character (', " or `, escaped or not) standing for any of the three, in a
    character class too: a message names a thing in whatever quotes its version chose ("No module named 'x'",
    `--speculative-config` in backticks, "x" in double quotes), so a signature written with one matches all."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append((_QUOTES if in_class else _ANY_QUOTE) if nxt in _QUOTES else ch + nxt)
            i += 2
            continue
        if ch in _QUOTES:
            out.append(_QUOTES if in_class else _ANY_QUOTE)
        else:
            out.append(ch)
            if ch == "[" and not in_class:
                in_class = True
                if pattern[i + 1:i + 2] == "^":
                    out.append("^")
                    i += 1
                if pattern[i + 1:i + 2] == "]":  # a ']' first in a class is a literal
                    out.append("]")
                    i += 1
            elif ch == "]" and in_class:
                in_class = False
        i += 1
    return "".join(out)


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
        type_, module, message, raised_in, within, not_within = (
            compile_patterns([e[k]], cid)[0] if e.get(k) else None
            for k in ("type", "module", "message", "raised_in", "within", "not_within"))
        cut = e.get("cut", True)
        if not isinstance(cut, bool):
            raise CatalogError(f"{cid}: an exception signature's cut must be true or false, got {cut!r}")
        out.append(ExceptionSignature(type_, module, message, raised_in, cut, within, not_within))
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
        evidence=compile_patterns(entry["evidence"], cid), symptoms=compile_patterns(entry.get("symptoms"), cid),
        supporting=compile_patterns(entry.get("supporting"), cid), decisive=bool(entry.get("decisive", True)),
        priority=int(entry.get("priority", 50)),
        components=tuple((re.compile(c["match"], re.IGNORECASE), c["name"]) for c in entry.get("components", [])),
        fix=" ".join(entry["fix"].split()), remedy=entry.get("remedy") or None,
        remedies=tuple((re.compile(r["when"], re.IGNORECASE), r["remedy"]) for r in entry.get("remedies", [])),
        alternatives=tuple(entry.get("alternatives", [])),
        exceptions=_exception_signatures(entry.get("exceptions"), cid),
        fatal_when_warned=compile_patterns(entry.get("fatal_when_warned"), cid),
        explained_by=tuple(entry.get("explained_by", [])), detail_lines=int(entry.get("detail_lines", 0)),
        alone=compile_patterns(entry.get("alone"), cid),
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
        ignore=compile_patterns(data.get("ignore", {}).get("patterns"), "ignore"),
        healthy_strong=compile_patterns(healthy.get("strong"), "healthy"),
        healthy_weak=compile_patterns(healthy.get("weak"), "healthy"),
        sglang_markers=compile_patterns(healthy.get("sglang_markers"), "healthy"),
        sglang_ready=compile_patterns(healthy.get("sglang_ready"), "healthy"),
        healthy_own=compile_patterns(healthy.get("own"), "healthy"),
        index=AnchorIndex(classes),
        benign=compile_patterns([b["pattern"] for b in benign_data.get("benign", [])], "benign"),
        stages=tuple((st["name"], compile_patterns(st["patterns"], f"stage {st['name']}"))
                     for st in data.get("stage", [])),
        relay=compile_patterns(data.get("relay", {}).get("patterns"), "relay"),
        outlived=compile_patterns(data.get("outlived", {}).get("patterns"), "outlived"),
        warning_records=compile_patterns(data.get("warning_records", {}).get("patterns"), "warning_records"),
        handled=compile_patterns(data.get("handled", {}).get("patterns"), "handled"),
        progress_stages=frozenset(st["name"] for st in data.get("stage", []) if st.get("progress")),
    )


@lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    """The shipped catalog, loaded once per process."""
    return load_catalog()
