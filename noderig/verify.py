"""``noderig verify DIR``: check a local checkpoint directory, on any machine.

The checks are the node-side verifier's (``noderig/node/verify_files.py``, stdlib only, the
same code the deploy ships to the node): safetensors headers, the shard index, sizes, and,
when a manifest is at hand, every file's sha256 / git blob id. The manifest defaults to
``DIR/.noderig/manifest.json`` (the deploy writes it there).

Without a manifest only the structure is checked. Files whose structure is fine are then
``unverified``: they count as passing (exit 0), because nothing found is wrong and there is
nothing to compare the bytes with; both the summary line and the JSON
(``"sha256_checked": false``) say plainly that the content was not checked.

Exit status: 0 every file passes and the index is consistent; 1 otherwise; 2 bad usage.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from .node import verify_files as core
from .sizes import human_size

MANIFEST = os.path.join(".noderig", "manifest.json")

STYLE = {
    core.OK: "green",
    core.UNVERIFIED: "yellow",
    core.MISSING: "red",
    core.PARTIAL: "magenta",
    core.TRUNCATED: "red",
    core.SIZE_MISMATCH: "red",
    core.HEADER_INVALID: "red",
    core.INDEX_MISMATCH: "red",
    core.SHA256_MISMATCH: "red",
    core.SYMLINK: "red",
}

UsageError = core.UsageError


def default_manifest(root: str | os.PathLike) -> Path | None:
    path = Path(root) / MANIFEST
    return path if path.is_file() else None


def verify_dir(root: str | os.PathLike, manifest: str | os.PathLike | None = None, *, jobs: int | None = None,
               structure_only: bool = False, use_record: bool = True, find_manifest: bool = True) -> dict:
    """Verify ``root``; ``manifest`` defaults to ``root/.noderig/manifest.json`` when present
    (``find_manifest=False``: structure only unless one is given). The report gains
    ``"manifest"``: the path used, or None. Raises UsageError for bad input."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise UsageError(f"{root} is not a directory" if os.path.exists(root) else f"{root} does not exist")
    if manifest is None and find_manifest:
        manifest = default_manifest(root)
    data = core.load_manifest(os.fspath(manifest)) if manifest is not None else None
    report = core.verify(root, data, jobs=jobs, structure_only=structure_only, use_record=use_record)
    report["manifest"] = os.fspath(manifest) if manifest is not None else None
    return report


def _short(detail: str) -> str:
    """Digests cut to 12 hex digits for the table (the JSON keeps them whole)."""
    return re.sub(r"\b([0-9a-f]{12})[0-9a-f]{28,52}\b", r"\1…", detail)


def summary(report: dict, root: str) -> str:
    files = report["files"]
    bad = [f for f in files if f["status"] not in core.PASSING]
    problems = report["index"]
    if report["sha256_checked"]:
        skipped = sum(1 for f in files if f["status"] == core.OK and f["detail"] != "hashed")
        content = f"{human_size(report['hashed_bytes'])} hashed, {skipped} files unchanged since verified"
        unverified = sum(1 for f in files if f["status"] == core.UNVERIFIED)
        if unverified:
            content += f"; {unverified} without a digest in the manifest"
    elif report.get("manifest"):
        content = "sha256 NOT checked (--structure-only); sizes checked against the manifest"
    else:
        content = (f"sha256 NOT checked: no manifest (looked for {os.path.join(root, MANIFEST)}; "
                   f"give one with --manifest)")
    if not bad and not problems:
        what = "verified" if report["sha256_checked"] else "structure ok"
        return f"OK: {len(files)} files in {root} {what}; {content}"
    parts = [f"{len(bad)} of {len(files)} files failed"] if bad else [f"all {len(files)} files pass"]
    if problems:
        parts.append(f"{len(problems)} index problem{'s' if len(problems) != 1 else ''}")
    return f"FAILED: {', '.join(parts)} in {root}; {content}"


def render(report: dict, root: str, *, show_all: bool = False, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(highlight=False)
    rows = [f for f in report["files"] if show_all or f["status"] not in core.PASSING]
    if rows:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("file", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("detail", overflow="fold")
        for f in rows:
            table.add_row(f["file"], Text(f["status"], style=STYLE.get(f["status"], "")), _short(f["detail"]))
        console.print(table)
    if report["index"]:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("index problem", no_wrap=True)
        table.add_column("detail", overflow="fold")
        for p in report["index"]:
            table.add_row(Text(p["problem"], style="red"), p["detail"])
        console.print(table)
    style = "green" if report["ok"] and report["sha256_checked"] else "yellow" if report["ok"] else "red"
    console.print(Text(summary(report, root), style=style))
    if report["ok"] and not show_all and not report["sha256_checked"]:
        console.print(f"{len(report['files'])} files pass on structure alone (status unverified); --all lists them")


def cmd_verify(args) -> int:
    """The CLI's ``verify`` subcommand (see ``noderig.cli``)."""
    try:
        if args.jobs is not None and args.jobs < 1:
            raise UsageError("--jobs must be at least 1")
        report = verify_dir(args.dir, args.manifest, jobs=args.jobs, structure_only=args.structure_only,
                            use_record=not args.no_record)
    except UsageError as e:
        if args.json:
            print(json.dumps({"ok": False, "error": str(e)}))
        print(f"noderig verify: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        render(report, args.dir, show_all=args.all)
    return 0 if report["ok"] else 1

