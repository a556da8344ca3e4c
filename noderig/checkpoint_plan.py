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
           "OVERSIZE", "FETCH", "expected_digest", "classify", "bytes_to_fetch", "manifest_text", "describe"]

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


def manifest_text(manifest: dict) -> str:
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"



def describe(todo: dict[str, str], limit: int = 3) -> str:
    """"1 missing (a.safetensors), 2 unverified (b, c)": what is wrong, by file name."""
    parts = []
    for state in sorted(set(todo.values())):
        names = sorted(p for p, s in todo.items() if s == state)
        shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
        parts.append(f"{len(names)} {state} ({shown})")
    return ", ".join(parts)
