"""Planning a checkpoint download from facts: which files are fine, which to hash, which to fetch.

Pure: inputs are the manifest, the node's file stats (size, mtime, live ``.aria2``) and the
node's verified-state record; nothing here touches a host. The record is written only by the
node-side verifier, after hashing, so "ok" here always rests on a hash that was checked.
"""

from __future__ import annotations

import json

STATE_DIR = ".noderig"
MANIFEST_FILE = f"{STATE_DIR}/manifest.json"
RECORD_FILE = f"{STATE_DIR}/verified.json"

# States of a manifest file on the node.
OK = "ok"  # hashed before, unchanged since (size and mtime as recorded)
UNVERIFIED = "unverified"  # right size, never hashed (or changed since): hash it
MISSING = "missing"
PARTIAL = "partial"  # aria2 control file present: resume
TRUNCATED = "truncated"  # shorter than the manifest: resume
OVERSIZE = "oversize"  # longer than the manifest: fetch again from scratch

FETCH = (MISSING, PARTIAL, TRUNCATED, OVERSIZE)


def expected_digest(entry: dict) -> str:
    return entry.get("sha256") or entry["git_oid"]


def classify(manifest: dict, stats: dict, record: dict | None) -> dict[str, str]:
    record = record or {}
    states = {}
    for entry in manifest["files"]:
        path, size = entry["path"], entry["size"]
        st = stats.get(path)
        seen = record.get(path)
        if st is None:
            states[path] = MISSING
        elif st["aria2"]:
            states[path] = PARTIAL
        elif st["size"] < size:
            states[path] = TRUNCATED
        elif st["size"] > size:
            states[path] = OVERSIZE
        elif (seen and seen.get("digest") == expected_digest(entry) and seen.get("size") == size
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
