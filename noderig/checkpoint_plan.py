"""Planning a checkpoint download from facts: which files are fine, which to hash, which to fetch.

Pure: inputs are the manifest, the node's file stats (size, mtime, live ``.aria2``) and the
node's verified-state record; nothing here touches a host. The record is written only by the
node-side verifier, after hashing, so "ok" here always rests on a hash that was checked.
"""

from __future__ import annotations

import json

# The node's state layout, the file states and the digest rule are the node-side verifier's
# (shipped alone to the node, stdlib only): the planner reads them from there, never the
# other way round, so the two cannot drift apart.
from .node.verify_files import (MANIFEST_FILE, MISSING, OK, PARTIAL, RECORD_FILE, STATE_DIR, TRUNCATED, UNVERIFIED,
                                expected_digest)

__all__ = ["STATE_DIR", "MANIFEST_FILE", "RECORD_FILE", "OK", "UNVERIFIED", "MISSING", "PARTIAL", "TRUNCATED",
           "OVERSIZE", "FETCH", "expected_digest", "classify", "split_todo", "starts_over", "bytes_to_fetch",
           "manifest_text", "describe", "content", "revision_differs", "linkable", "after_seeding"]

# States of a manifest file on the node, as the planner sees them from its stats:
#   OK          hashed before, unchanged since (size and mtime as recorded)
#   UNVERIFIED  right size, never hashed (or changed since): hash it
#   MISSING     not there
#   PARTIAL     aria2 control file present: resume
#   TRUNCATED   shorter than the manifest: resume
#   OVERSIZE    longer than the manifest: fetch again from scratch (the planner's own word:
#               the verifier, which reads the bytes, reports such a file as size_mismatch)
OVERSIZE = "oversize"

FETCH = (MISSING, PARTIAL, TRUNCATED, OVERSIZE)


def classify(manifest: dict, stats: dict, record: dict | None) -> dict[str, str]:
    record = record or {}
    states = {}
    for entry in manifest["files"]:
        path, size = entry["path"], entry["size"]
        st = stats.get(path)
        seen, want = record.get(path), expected_digest(entry)
        if st is None:
            states[path] = MISSING
        elif st["aria2"]:
            states[path] = PARTIAL
        elif st["size"] < size:
            states[path] = TRUNCATED
        elif st["size"] > size:
            states[path] = OVERSIZE
        # never OK without a digest to have checked the bytes against
        elif (seen and want and seen.get("digest") == want and seen.get("size") == size
              and seen.get("mtime_ns") is not None and abs(seen["mtime_ns"] - st["mtime"] * 1e9) < 2e3):
            states[path] = OK
        else:
            states[path] = UNVERIFIED
    return states


def split_todo(todo: dict[str, str], held: list[str] | None) -> tuple[list[str], list[str]]:
    """(to hash first, to fetch) for the files not yet verified. ``held``: the files the
    node's aria2 daemon still holds (``None``: no daemon). A held file goes through aria2,
    whatever its size says: aria2 preallocates, so a file it is writing can have its full
    size and no control file yet; hashing it would find it bad and delete it under aria2.
    Every other right-size file is hashed first (those that fail join the fetch)."""
    held_set = set(held or ())
    to_fetch = sorted(p for p, s in todo.items() if s in FETCH or p in held_set)
    to_hash = sorted(p for p, s in todo.items() if s == UNVERIFIED and p not in held_set)
    return to_hash, to_fetch


def starts_over(todo: dict[str, str], lfs: set[str], held: list[str] | None) -> list[str]:
    """Files deleted before the fetch: longer than they should be, or a small git file that
    is short (an edited config shrinks too): their bytes are not a prefix worth resuming.
    Never a file aria2 holds: it is writing it."""
    held_set = set(held or ())
    return sorted(p for p, s in todo.items() if p not in held_set
                  and (s == OVERSIZE or (s == TRUNCATED and p not in lfs)))


def bytes_to_fetch(manifest: dict, states: dict[str, str], stats: dict) -> int:
    total = 0
    for entry in manifest["files"]:
        state = states[entry["path"]]
        if state in (PARTIAL, TRUNCATED):
            # aria2 preallocation makes size meaningless for a partial file: count it all
            total += entry["size"] if state == PARTIAL else entry["size"] - stats[entry["path"]]["size"]
        elif state in (MISSING, OVERSIZE):
            total += entry["size"]
    return total


def content(manifest: dict) -> dict[str, str | None]:
    """What a checkpoint's server reads: each file's path and the digest its bytes must have."""
    return {entry["path"]: expected_digest(entry) for entry in manifest["files"]}


def revision_differs(live: dict | None, manifest: dict) -> bool:
    """Whether ``manifest`` changes a byte of the checkpoint the live directory holds
    (``live``: its manifest; None: it holds none): a new commit that only moves files the
    patterns leave out, or renames nothing, is the same checkpoint."""
    return isinstance(live, dict) and isinstance(live.get("files"), list) and content(live) != content(manifest)


def linkable(manifest: dict, live: dict, live_states: dict[str, str]) -> dict[str, str]:
    """new path -> live path: the files of ``manifest`` that the live revision holds verified
    with the same digest (``live_states``: ``classify`` of the live directory). A revision
    prepared beside the live one hard-links them instead of fetching and hashing them."""
    verified = {}
    for path, digest in content(live).items():
        if digest and live_states.get(path) == OK:
            verified.setdefault(digest, path)
    return {path: verified[digest] for path, digest in content(manifest).items() if digest in verified}


def after_seeding(states: dict[str, str], links: dict[str, str]) -> dict[str, str]:
    """The states of a directory prepared beside the live revision once the files it shares
    with it are linked in (a missing one becomes ok: it is linked with its verified record)."""
    return {p: OK if s == MISSING and p in links else s for p, s in states.items()}


def manifest_text(manifest: dict) -> str:
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


def manifest_changes(on_node: dict | None, manifest: dict) -> str:
    """What the node's manifest file says otherwise than the manifest the deploy holds, by field
    ("its endpoint", "no manifest yet"): why the file is written again when every file is verified.

    + on_node: the manifest file read from the node (None: there is none)
    + manifest: the manifest built from the Hub (or read back from the node)
    """
    if not on_node:
        return "no manifest on the node yet"
    fields = sorted(k for k in set(on_node) | set(manifest) if on_node.get(k) != manifest.get(k))
    return f"the manifest on the node differs in its {', '.join(fields)}" if fields else ""


def describe(todo: dict[str, str], limit: int = 3) -> str:
    """"1 missing (a.safetensors), 2 unverified (b, c)": what is wrong, by file name."""
    parts = []
    for state in sorted(set(todo.values())):
        names = sorted(p for p, s in todo.items() if s == state)
        shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
        parts.append(f"{len(names)} {state} ({shown})")
    return ", ".join(parts)
