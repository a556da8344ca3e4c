#!/usr/bin/env python3
"""The files this node may serve to its fan-out peers: hard links, named by digest, to the
checkpoint files whose bytes were hashed against the Hub's digest. Runs ON the node.

    peer_links.py DEST     (re)make DEST/.noderig/peer/<digest> for every file of DEST's
                           manifest that the verified record vouches for right now; print
                           {"served": {digest: size}, "skipped": {path: why}} as one JSON line

A file is linked only when the record's digest is the manifest's, its size and mtime are the
ones recorded at hashing, it has no live aria2 control file, and no component of its path is a
symlink (the verifier's own walk check). Links no longer vouched for are removed. A hard link
shares the inode, so later edits of the file would show through: the deploy removes the links
when the fan-out ends, and the receiver hashes every file it takes anyway.

Stdlib only, with the verifier (shipped beside it) for the state paths and the checks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys

LINK_DIR_NAME = "peer"


def _verifier():
    try:
        from . import verify_files  # imported by the controller's tests
        return verify_files
    except ImportError:  # run as a script: the verifier is shipped beside this file
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verify_files.py")
        spec = importlib.util.spec_from_file_location("verify_files", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["verify_files"] = module
        spec.loader.exec_module(module)
        return module


def _why_not(vf, dest: str, entry: dict, seen) -> str | None:
    """Why this manifest entry may not be served, or None when its bytes are vouched for."""
    rel, want = entry.get("path"), vf.expected_digest(entry)
    if not want or not isinstance(seen, dict) or seen.get("digest") != want:
        return "not verified"
    if vf.walk_problem(dest, rel):
        return "a symlink on its path"
    if os.path.lexists(os.path.join(dest, rel) + ".aria2"):
        return "being downloaded"
    try:
        st = os.lstat(os.path.join(dest, rel))
    except OSError:
        return "missing"
    if not stat.S_ISREG(st.st_mode) or st.st_size != entry.get("size") or st.st_size != seen.get("size") \
            or st.st_mtime_ns != seen.get("mtime_ns"):
        return "changed since it was verified"
    return None


def link(dest: str) -> dict:
    vf = _verifier()
    manifest = vf.load_manifest(os.path.join(dest, vf.MANIFEST_FILE))
    record = vf._load_record(dest)
    links = os.path.join(dest, vf.STATE_DIR, LINK_DIR_NAME)
    if vf.walk_problem(dest, f"{vf.STATE_DIR}/{LINK_DIR_NAME}/x"):
        raise SystemExit(f"refusing to link under {links}: a symlink on the way")
    os.makedirs(links, mode=0o711, exist_ok=True)
    os.chmod(links, 0o711)  # www-data traverses it; nobody but root lists it
    served, skipped = {}, {}
    for entry in manifest["files"]:
        why = _why_not(vf, dest, entry, record.get(entry.get("path")))
        if why:
            skipped[entry.get("path")] = why
            continue
        digest, target = vf.expected_digest(entry), os.path.join(links, vf.expected_digest(entry))
        src = os.path.join(dest, entry["path"])
        if not (os.path.exists(target) and os.path.samestat(os.stat(target), os.lstat(src))):
            tmp = f"{target}.tmp"
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.link(src, tmp, follow_symlinks=False)
            os.replace(tmp, target)
        served[digest] = entry["size"]
    for name in os.listdir(links):
        if name not in served:
            os.unlink(os.path.join(links, name))
    return {"served": served, "skipped": skipped}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: peer_links.py DEST", file=sys.stderr)
        return 2
    print(json.dumps(link(argv[0]), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
