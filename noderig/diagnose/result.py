"""The result of a diagnosis: the class, the cause, the evidence lines and the fix."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..node.hubpath import unsafe

__all__ = ["Diagnosis", "Evidence"]


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
    # a failure whose cause the log itself lacks, and why: "cut_traceback" (it stops inside a traceback, before the
    # exception line) or "other_process" (it shows only that another process of the server died, not that process's
    # own error); None when the log holds what failed. Fetch the lines it names and diagnose again
    incomplete: str | None = None

    @property
    def healthy(self) -> bool:
        return self.cls == "healthy"

    def to_dict(self) -> dict:
        return {
            "class": self.cls, "title": self.title, "cause": self.cause,
            "evidence": [e.to_json() for e in self.evidence], "chain": self.chain, "component": self.component,
            "fix": self.fix, "remedy": self.remedy, "alternatives": self.alternatives,
            "confidence": round(self.confidence, 2), "meaning": self.meaning, "also_seen": self.also_seen,
            "ranks": self.ranks, "stage": self.stage, "ready": self.ready, "incomplete": self.incomplete,
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The JSON form, readable (non-ASCII kept) and safe to print: JSON escapes the C0 controls itself, and DEL,
        C1 and the invisible and bidirectional format characters a quoted log line may hold are written as \\u
        escapes too (a terminal would act on them; a JSON reader decodes them back to the same text)."""
        text = json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)
        return "".join(f"\\u{ord(ch):04x}" if ord(ch) >= 0x7F and unsafe(ch) else ch for ch in text)
