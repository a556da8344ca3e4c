"""The three outcomes of a diagnosis, each as a Diagnosis: a known class (the root match, its
evidence on every rank, the call chain and the component it failed in), ``unknown`` (something
failed that no signature knows: the lines a human would read first) and ``healthy`` (nothing
failed: ready, or still starting and how far it got)."""

from __future__ import annotations

import re
from dataclasses import replace

from . import startup
from .catalog import Catalog, CatalogClass
from .matching import Match, related_traceback
from .normalize import Line
from .result import Diagnosis, Evidence
from .tracebacks import Traceback, traceback_chain

__all__ = ["by_tokens", "healthy", "known", "unknown"]

_CAUSE_MAX = 220


def _clip(text: str, n: int = _CAUSE_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


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


def unknown(lines: list[Line], tbs: list[Traceback], first: int, relay: tuple[re.Pattern, ...] = ()) -> Diagnosis:
    """A failure no signature knows: show the lines a human would read first, and say so when the
    paste itself lacks the cause (``_missing_cause``)."""
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
    kind, missing = _missing_cause(lines, tbs, tb, first, relay) or (None, None)
    fix = ("No known signature matched. Read the evidence lines and the traceback; if this is a recurring "
           "failure, add its signature to noderig/diagnose/catalog.toml.")
    return Diagnosis(
        cls="unknown", title="Unrecognised failure", cause=cause, evidence=_collapse(ev), chain=chain,
        fix=f"The log does not show the cause: {missing} Diagnose again with those lines." if missing else fix,
        remedy=None, confidence=0.3, meaning="The launch failed with no signature in the catalog.",
        component=_component(None, chain, lines), incomplete=kind,
    )


def _missing_cause(lines: list[Line], tbs: list[Traceback], tb: Traceback | None, first: int,
                   relay: tuple[re.Pattern, ...]) -> tuple[str, str] | None:
    """Why an unknown failure's cause is not in the log, when its shape says so (most pastes that
    reach `unknown` are cut), as (Diagnosis.incomplete's value, the words for the fix): the failure shown only
    relays another process's death and no traceback in the log ends in an error of its own; or the
    traceback stops before its exception."""
    def relays(text: str) -> bool:
        return any(p.search(text) for p in relay)

    reported = [ln for ln in lines[first:first + 400] if ln.text and relays(ln.text)]
    own = [s for t in tbs for s in t.sections if s.exc_index is not None and not relays(lines[s.exc_index].text)]
    # the first failure a line of its own (an ERROR record, a CUDA error) outside any traceback: the
    # other process's error may be that line, so the log is not said to lack it
    alone = not relays(lines[first].text) and not any(t.start_index <= first <= t.end_index for t in tbs)
    if reported and not own and not alone:
        return "other_process", (f"'{_clip(reported[0].text.strip(), 120)}' only reports that another process of "
                                 "the server (its engine core, a worker, a scheduler) died; that process printed its "
                                 "own error earlier, under its own prefix, and those lines are not in the log.")
    # a native backtrace (a segfault handler's "<unknown>" frames) has no exception line to lose
    native = tb is not None and all(f.file == "<unknown>" for f in tb.final.frames)
    if tb is not None and tb.final.exc_index is None and not own and not native:
        return "cut_traceback", ("the log stops inside a traceback, at a frame, before the exception line that "
                                 "names the error; the lines below the last frame are missing.")
    return None


def by_tokens(lines: list[Line], tbs: list[Traceback], first: int, cls: CatalogClass, index: int,
              hits: tuple[str, ...], setting: int | None = None) -> Diagnosis:
    """A failure no signature knows, named by the key tokens of its decisive lines (tokens.py), or by
    the launch setting that turned its feature on when a bug's exception names nothing (``setting``):
    the class's title, meaning and fix, a lower confidence than a signature's and no remedy (the
    deploy never repairs on a guess); the evidence starts with the line that holds the tokens."""
    base = unknown(lines, tbs, first)
    at = lines[index]
    shown = [at] if setting is None else [at, lines[setting]]
    evidence = _collapse([*(Evidence(_clip(ln.text, 400), ln.rank, ln.no) for ln in shown), *base.evidence])
    if setting is None:
        how = "named by its key tokens; no signature matched"
        check = f"Named by key tokens ({', '.join(hits)}), not by a signature: check the evidence first."
    else:
        how = f"a {hits[0]} names no cause; the launch turns this feature on (line {lines[setting].no})"
        check = ("Named by the launch's setting, not by the error: relaunch without the feature; if the launch "
                 "then starts, the feature's settings are the cause.")
    return replace(
        base, cls=cls.id, title=cls.title, meaning=cls.meaning, remedy=None,
        confidence=0.45 if setting is None else 0.35, cause=_clip(f"{cls.title} ({how}): {at.text.strip()}"),
        evidence=evidence, component=_component(cls, base.chain, lines) or base.component, fix=f"{cls.fix} ({check})",
    )


# A log that stops before the ready line with nothing failed in it: still starting, or cut before its error (a paste
# of the lines around where it seemed to hang, a journal read too early). What to do if the server did stop:
NOT_READY_NEXT = ("Nothing to fix in these lines. If the server stopped, its error comes after the last line shown: "
                  "diagnose the whole log (journalctl -u <unit> --no-pager > server.log, or docker logs <name> > "
                  "server.log 2>&1), not an excerpt.")


def healthy(lines: list[Line], cat: Catalog, ready: int | None) -> Diagnosis:
    """No failure: the server is ready, or still starting (the stage says how far it got)."""
    stage, last = startup.stage(lines, cat, ready is not None)
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
                     fix="Nothing to fix." if ready is not None else NOT_READY_NEXT, remedy=None,
                     confidence=0.95 if ready is not None else 0.7,
                     meaning=meaning, stage=stage, ready=ready is not None)


def known(lines: list[Line], tbs: list[Traceback], matches: list[Match], root: Match) -> Diagnosis:
    """The root match's class: its cause, evidence (on every rank), call chain, component and fix;
    the classes matched after it are consequences (``also_seen``)."""
    cls = root.cls
    root_line = lines[root.index]
    tb, section = related_traceback(tbs, lines, root.index)
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
