"""Check a downloaded checkpoint against its manifest, on the node; stdlib only.

    python3 verify_files.py MANIFEST DIR [--jobs N]

Prints one JSON object: ``{"ok": bool, "files": [{"file", "status", "detail"}],
"hashed_bytes": N}`` and exits 0 only when every file is ``ok``. A record of verified files
(size, mtime_ns, digest) in ``DIR/.noderig/verified.json`` lets the next run skip hashing a
file that has not changed; a file with a live ``.aria2`` control file is never verified.
"""

import hashlib
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

RECORD = os.path.join(".noderig", "verified.json")
BLOCK = 8 << 20


def digest(path, entry):
    """The Hub's identity for the file: LFS sha256, or the git blob id of a small file."""
    h = hashlib.sha256() if "sha256" in entry else hashlib.sha1(b"blob %d\0" % entry["size"])
    with open(path, "rb", buffering=0) as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def expected(entry):
    return entry.get("sha256") or entry.get("git_oid")


def check(root, entry, record):
    path = os.path.join(root, entry["path"])
    name = entry["path"]
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {"file": name, "status": "missing", "detail": "not on disk"}, 0, None
    if os.path.exists(path + ".aria2"):
        return {"file": name, "status": "partial", "detail": "aria2 control file present: download unfinished"}, 0, None
    if st.st_size != entry["size"]:
        status = "truncated" if st.st_size < entry["size"] else "size_mismatch"
        return {"file": name, "status": status, "detail": f"{st.st_size} bytes, expected {entry['size']}"}, 0, None
    want = expected(entry)
    seen = record.get(name)
    if seen and seen["size"] == st.st_size and seen["mtime_ns"] == st.st_mtime_ns and seen["digest"] == want:
        return {"file": name, "status": "ok", "detail": "unchanged since verified"}, 0, seen
    got = digest(path, entry)
    if got != want:
        kind = "sha256" if "sha256" in entry else "git blob id"
        return {"file": name, "status": "sha256_mismatch", "detail": f"{kind} {got}, expected {want}"}, st.st_size, None
    return {"file": name, "status": "ok", "detail": "hashed"}, st.st_size, {
        "size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": got}


def main(argv):
    jobs = 4
    if "--jobs" in argv:
        i = argv.index("--jobs")
        jobs = int(argv[i + 1])
        del argv[i:i + 2]
    manifest_path, root = argv[1], argv[2]
    with open(manifest_path) as f:
        manifest = json.load(f)
    record_path = os.path.join(root, RECORD)
    try:
        with open(record_path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {}
    with ThreadPoolExecutor(max(1, jobs)) as pool:  # hashlib releases the GIL on big blocks
        results = list(pool.map(lambda e: check(root, e, record), manifest["files"]))
    new_record = {r["file"]: rec for r, _, rec in results if rec is not None}
    os.makedirs(os.path.dirname(record_path), exist_ok=True)
    tmp = record_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(new_record, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, record_path)
    report = {
        "ok": all(r["status"] == "ok" for r, _, _ in results),
        "files": [r for r, _, _ in results],
        "hashed_bytes": sum(n for _, n, _ in results),
    }
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
