"""``noderig verify DIR``: check a local checkpoint directory, on any machine.

The checks are the node-side verifier's (``noderig/node/verify_files.py``, stdlib only, the
same code the deploy ships to the node): safetensors headers, the shard index, sizes, and,
when a manifest is at hand, every file's sha256 / git blob id. The manifest defaults to
``DIR/.noderig/manifest.json`` (the deploy writes it there).

Where no manifest is given or found there, the digests come from what ``hf download
--local-dir`` leaves beside the files (``DIR/.cache/huggingface/download/<file>.metadata``:
commit and ETag, which is the sha256 of an LFS file and the git blob id of the others), or,
with ``--repo ID [--revision R]``, from the Hub's listing (as ``hf cache verify`` does).

Without any of these only the structure is checked. Files whose structure is fine are then
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

HF_METADATA = os.path.join(".cache", "huggingface", "download")  # what `hf download --local-dir` keeps
_DIGEST = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

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
    path = Path(root) / core.MANIFEST_FILE
    return path if path.is_file() else None


def manifest_from_hf_metadata(root: str) -> dict | None:
    """A manifest from the metadata ``hf download --local-dir`` wrote beside the files (one
    ``<file>.metadata`` per file: commit, ETag, time), or None when there is none. A listed
    path that fails the Hub path check is refused: the metadata is as untrusted as the Hub."""
    from .node.hubpath import describe, path_problem

    base = os.path.join(root, HF_METADATA)
    files = []
    for folder, _dirs, names in os.walk(base):
        for name in sorted(n for n in names if n.endswith(".metadata")):
            rel = os.path.relpath(os.path.join(folder, name), base)[: -len(".metadata")].replace(os.sep, "/")
            problem = path_problem(rel)
            if problem:
                raise UsageError(f"{base} names the unsafe path {describe(rel)} ({problem})")
            lines = Path(folder, name).read_text(errors="replace").splitlines()
            etag = lines[1].strip().strip('"').lower() if len(lines) > 1 else ""
            local = os.path.join(root, rel)
            entry = {"path": rel, "size": os.lstat(local).st_size if os.path.lexists(local) else 0}
            if _DIGEST.fullmatch(etag):
                entry["sha256" if len(etag) == 64 else "git_oid"] = etag
            files.append(entry)
    return {"files": sorted(files, key=lambda f: f["path"]), "source": base} if files else None


def manifest_from_hub(repo: str, revision: str | None, endpoint: str | None, token: str | None) -> dict:
    """The Hub's listing of every file of ``repo`` at ``revision`` (as ``hf cache verify``)."""
    from .errors import NoderigError
    from .manifest import RepoPin, build_manifest

    pin = RepoPin(repo, revision or "main", endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co",
                  ("*",))
    try:
        return build_manifest(pin, token)
    except NoderigError as e:
        raise UsageError(str(e))


def verify_dir(root: str | os.PathLike, manifest: str | os.PathLike | None = None, *, jobs: int | None = None,
               structure_only: bool = False, use_record: bool = True, find_manifest: bool = True,
               hub: dict | None = None) -> dict:
    """Verify ``root`` against, in this order: ``manifest``; the Hub's listing (``hub``: the
    manifest_from_hub arguments); ``root/.noderig/manifest.json``; ``hf download``'s metadata;
    else its structure only (``find_manifest=False``: only what is given). The report gains
    ``"manifest"``: where the digests came from, or None. Raises UsageError for bad input."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise UsageError(f"{root} is not a directory" if os.path.exists(root) else f"{root} does not exist")
    data, source = None, None
    if manifest is not None:
        data, source = core.load_manifest(os.fspath(manifest)), os.fspath(manifest)
    elif hub is not None:
        data = manifest_from_hub(**hub)
        source = f"{data['endpoint']}/{data['repo']}@{data['commit']}"
    elif find_manifest and default_manifest(root) is not None:
        source = os.fspath(default_manifest(root))
        data = core.load_manifest(source)
    elif find_manifest:
        data = manifest_from_hf_metadata(root)
        source = data["source"] if data else None
    report = core.verify(root, data, jobs=jobs, structure_only=structure_only, use_record=use_record)
    report["manifest"] = source
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
        content = (f"{human_size(report['hashed_bytes'])} hashed, {skipped} files unchanged since verified; "
                   f"digests from {report.get('manifest')}")
        unverified = sum(1 for f in files if f["status"] == core.UNVERIFIED)
        if unverified:
            content += f"; {unverified} without a digest in the manifest"
    elif report.get("manifest"):
        content = "sha256 NOT checked (--structure-only); sizes checked against the manifest"
    else:
        content = (f"sha256 NOT checked: no manifest (looked for {os.path.join(root, core.MANIFEST_FILE)} and "
                   f"{os.path.join(root, HF_METADATA)}; give one with --manifest, or --repo ID to ask the Hub)")
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
        if args.repo and args.manifest:
            raise UsageError("give --manifest or --repo, not both")
        hub = None
        if args.repo:
            from .secret_files import read_token

            hub = {"repo": args.repo, "revision": args.revision, "endpoint": args.endpoint,
                   "token": read_token(args.token_file)}
        report = verify_dir(args.dir, args.manifest, jobs=args.jobs, structure_only=args.structure_only,
                            use_record=not args.no_record, hub=hub)
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

