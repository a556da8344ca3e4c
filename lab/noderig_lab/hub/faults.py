"""The Hub's faults and switches, set with ``POST /_lab/faults``: what each one takes, how a
request of the JSON is checked and turned into changes (`parse_faults`), and the hostile
listings (names a hostile Hub or mirror could send, with files behind them)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .repos import FileEntry, hash_file

# Fault name -> (its main parameter, defaults). A fault applies to the requests of its scope
# ("cdn", "api" = the Hub port incl. /resolve/, "resolve", or "all") whose target contains
# `match` ("org/name/path" for file requests, the URL path otherwise), `count` times
# (-1 = until reset). The body faults (drop, stall, rate) apply to responses carrying file bytes.
FAULTS = {
    "status": ("code", {"count": -1, "scope": "all", "match": ""}),
    "drop_after_bytes": ("bytes", {"count": -1, "scope": "cdn", "match": ""}),
    "stall_seconds": ("seconds", {"count": -1, "scope": "cdn", "match": "", "after_bytes": 65536}),
    "rate_limit_bps": ("bps", {"count": -1, "scope": "cdn", "match": ""}),
}
SCOPES = {"cdn": {"cdn"}, "api": {"api", "resolve"}, "resolve": {"resolve"}, "all": {"api", "resolve", "cdn"}}
OTHER_FAULTS = ("redirect_ttl", "gated", "reject_cdn_authorization", "hostile_listing", "mirror", "no_range",
                "uplink_bps")
# Switches set with the faults: on (true) until reset or set false.
SWITCHES = ("mirror", "no_range")

# A hostile Hub's listings, by path class (the fault ``hostile_listing``): names that would land
# outside the model directory (from /models/<name>, ``../../..`` is ``/``), each served by
# /resolve/ with its true size and digests. Their content touches `HOSTILE_MARKER` when
# Python runs it: a node where that file exists ran code a listing named.
HOSTILE_MARKER = "/root/noderig-hostile-listing-ran"
SITE = "usr/lib/python3/dist-packages/sitecustomize.py"
HOSTILE_PATHS = {
    "climb": ["../../../usr/local/lib/noderig/verify_files.py", f"../../../{SITE}"],
    "absolute": [f"/{SITE}"],
    "newline": [f"config.py\n../../../{SITE}"],
    "backslash": ["..\\..\\..\\" + SITE.replace("/", "\\")],
    "symlink": [f"tokenizer.py -> ../../../{SITE}"],
}
HOSTILE_HUGE_FILES = 100_001  # the "huge" class: that many harmless names, one more than noderig takes


@dataclass
class FaultChanges:
    """What one ``POST /_lab/faults`` changes; None: left as it is."""

    faults: dict[str, dict | None] = field(default_factory=dict)  # None clears that fault
    redirect_ttl: float | None = None
    gated: dict[str, bool] = field(default_factory=dict)
    reject_cdn_authorization: bool | None = None
    hostile: dict[str, dict[str, FileEntry]] | None = None
    switches: dict[str, bool | float | None] = field(default_factory=dict)


def parse_faults(spec, default_ttl: float, payloads: "HostilePayloads") -> FaultChanges:
    """The changes ``spec`` (the request's JSON) asks for; ValueError on anything else.

    + spec: ``{fault: value | null, ...}``, see `FAULTS` and `OTHER_FAULTS`
    + default_ttl: what ``"redirect_ttl": null`` sets
    + payloads: the files a hostile listing's names serve
    """
    if not isinstance(spec, dict):
        raise ValueError("faults must be a JSON object")
    changes = FaultChanges()
    for name, value in spec.items():
        if name == "hostile_listing":
            changes.hostile = hostile_entries(value, payloads)
        elif name in FAULTS:
            changes.faults[name] = None if value is None else normalize_fault(name, value)
        elif name == "redirect_ttl":
            changes.redirect_ttl = default_ttl if value is None else float(value)
        elif name == "gated":
            if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
                raise ValueError('"gated" must map repo ids to true/false')
            changes.gated = value
        elif name == "reject_cdn_authorization":
            changes.reject_cdn_authorization = bool(value)
        elif name == "uplink_bps":  # one rate shared by every file body: a fleet behind one link
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
                raise ValueError('"uplink_bps" must be a positive number of bytes per second, or null (off)')
            changes.switches[name] = value
        elif name in SWITCHES:
            changes.switches[name] = bool(value)
        else:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join([*FAULTS, *OTHER_FAULTS])}")
    return changes


def normalize_fault(name: str, value) -> dict:
    """The fault ``name`` with its defaults filled in, from its main parameter or a dict."""
    main, defaults = FAULTS[name]
    fault = dict(defaults)
    if isinstance(value, dict):
        unknown = set(value) - {main, *defaults}
        if unknown or main not in value:
            raise ValueError(f"fault {name!r} takes {main!r} and optionally {', '.join(defaults)}")
        fault.update(value)
    else:
        fault[main] = value
    if not isinstance(fault[main], (int, float)) or isinstance(fault[main], bool) or fault[main] < 0:
        raise ValueError(f"fault {name!r}: {main!r} must be a non-negative number")
    if fault["scope"] not in SCOPES:
        raise ValueError(f"fault {name!r}: scope must be one of {', '.join(SCOPES)}")
    if not isinstance(fault["count"], int) or fault["count"] == 0 or fault["count"] < -1:
        raise ValueError(f"fault {name!r}: count must be a positive integer or -1 (always)")
    if name == "status" and not 400 <= fault["code"] <= 599:
        raise ValueError("fault 'status': code must be an HTTP error status (400-599)")
    fault["match"] = str(fault["match"])
    return fault


def fault_applies(fault: dict | None, name: str, kind: str, target: str, body_length: int | None) -> bool:
    """Whether ``fault`` (active as ``name``) applies to a response of ``kind`` for ``target``.
    A drop that would come after the end of the body does not apply."""
    if fault is None or kind not in SCOPES[fault["scope"]] or fault["match"] not in target:
        return False
    return not (name == "drop_after_bytes" and body_length is not None and fault["bytes"] >= body_length)


class HostilePayloads:
    """The files behind a hostile listing's names, made in a temporary directory on first use:
    code that touches `HOSTILE_MARKER` when run, and a harmless filler."""

    def __init__(self):
        self._dir: Path | None = None

    def files(self) -> tuple[tuple, tuple]:
        """(path, sha256, git sha1) of the payload, and of the filler."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="lab-hub-hostile-"))
            (self._dir / "payload.py").write_text(
                f"import pathlib\npathlib.Path({HOSTILE_MARKER!r}).touch()  # a hostile Hub's code ran\n")
            (self._dir / "filler.json").write_text("{}\n")
        out = []
        for name in ("payload.py", "filler.json"):
            path = self._dir / name
            out.append((path, *hash_file(path, path.stat().st_size)))
        return out[0], out[1]


def hostile_entries(value, payloads: HostilePayloads) -> dict[str, dict[str, FileEntry]]:
    """``{"repo": id, "kinds": [class, ...]}`` -> the extra entries per repo; null: none.
    Classes: those of `HOSTILE_PATHS`, and "huge" (`HOSTILE_HUGE_FILES` harmless names)."""
    if value is None:
        return {}
    kinds = value.get("kinds") if isinstance(value, dict) else None
    known = [*HOSTILE_PATHS, "huge"]
    if not isinstance(value.get("repo"), str) or not isinstance(kinds, list) or not set(kinds) <= set(known):
        raise ValueError(f'"hostile_listing" takes {{"repo": id, "kinds": [...]}} with kinds from {", ".join(known)}')
    payload, filler = payloads.files()
    entries = {}
    for kind in kinds:
        names = HOSTILE_PATHS.get(kind) or [f"extra/{i:06d}.json" for i in range(HOSTILE_HUGE_FILES)]
        for name in names:
            source = filler if kind == "huge" else payload
            entries[name] = FileEntry(name, source[0], source[0].stat().st_size, source[1], source[2], False)
    return {value["repo"]: entries}
