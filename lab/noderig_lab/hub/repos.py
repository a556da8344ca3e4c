"""The Hub's repos: directories ``root/<org>/<name>/...`` read into file entries with their
sha256 and git blob ids (cached in `SIDECAR`), a commit per repo, and what model_info reports."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1 << 20
LFS_SUFFIXES = (".safetensors", ".bin", ".model", ".pt", ".pth", ".gguf", ".onnx", ".msgpack", ".h5")
LFS_MIN_SIZE = 10 * MiB
SIDECAR = ".lab-hub-index.json"


@dataclass
class FileEntry:
    path: str  # repo-relative, "/"-separated
    abspath: Path
    size: int
    sha256: str
    git_sha1: str  # git blob sha1 of the content
    lfs: bool

    @property
    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {self.size}\n".encode()

    @property
    def blob_id(self) -> str:
        """What git stores: the content for small files, the LFS pointer for LFS files."""
        return hashlib.sha1(b"blob %d\0" % len(self.pointer) + self.pointer).hexdigest() if self.lfs else self.git_sha1


@dataclass
class Repo:
    repo_id: str
    files: dict[str, FileEntry]
    commit: str
    last_modified: str
    by_sha256: dict[str, FileEntry] = field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        return self.commit if revision in ("main", "refs/heads/main", self.commit) else None


def is_lfs(path: str, size: int) -> bool:
    return path.endswith(LFS_SUFFIXES) or size > LFS_MIN_SIZE


def hash_file(path: Path, size: int) -> tuple[str, str]:
    """(sha256, git blob sha1) of the file at ``path`` of ``size`` bytes."""
    sha256, sha1 = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as f:
        while chunk := f.read(4 * MiB):
            sha256.update(chunk)
            sha1.update(chunk)
    return sha256.hexdigest(), sha1.hexdigest()


def scan_repos(root: Path) -> dict[str, Repo]:
    """Every ``root/<org>/<name>`` directory is a repo; its files are everything below it."""
    root = Path(root)
    sidecar = root / SIDECAR
    try:
        cached = json.loads(sidecar.read_text()).get("files", {})
    except (OSError, ValueError):
        cached = {}
    index, repos = {}, {}
    for org in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for repo_dir in sorted(p for p in org.iterdir() if p.is_dir() and not p.name.startswith(".")):
            repo_id = f"{org.name}/{repo_dir.name}"
            repos[repo_id] = _scan_repo(repo_id, repo_dir, cached, index)
    if index != cached:
        try:
            tmp = root / f"{SIDECAR}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"version": 1, "files": index}, indent=1, sort_keys=True))
            os.replace(tmp, sidecar)
        except OSError:
            pass  # a read-only root still serves; it just hashes again next time
    return repos


def _scan_repo(repo_id: str, repo_dir: Path, cached: dict, index: dict) -> Repo:
    """One repo's files, hashed unless ``cached`` has them at the same size and mtime; every
    file's digests go into ``index`` (the next sidecar)."""
    files = {}
    mtime = 0
    for abspath in sorted(repo_dir.rglob("*")):
        if not abspath.is_file() or abspath.name.startswith(".lab"):
            continue
        rel = abspath.relative_to(repo_dir).as_posix()
        st = abspath.stat()
        mtime = max(mtime, st.st_mtime)
        key = f"{repo_id}/{rel}"
        hit = cached.get(key)
        if hit and hit["size"] == st.st_size and hit["mtime_ns"] == st.st_mtime_ns:
            sha256, sha1 = hit["sha256"], hit["git_sha1"]
        else:
            sha256, sha1 = hash_file(abspath, st.st_size)
        index[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256, "git_sha1": sha1}
        files[rel] = FileEntry(rel, abspath, st.st_size, sha256, sha1, is_lfs(rel, st.st_size))
    listing = "".join(f"{f.path}\0{f.blob_id}\0{f.sha256}\n" for f in files.values())
    commit = hashlib.sha1(f"{repo_id}\n{listing}".encode()).hexdigest()
    return Repo(repo_id, files, commit, iso_time(mtime), {f.sha256: f for f in files.values()})


def iso_time(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


def safetensors_parameters(path: Path) -> Counter:
    """Parameter count per dtype from a safetensors header (what model_info reports)."""
    counts: Counter = Counter()
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
    except (OSError, ValueError, struct.error):
        return counts
    for name, info in header.items():
        if name != "__metadata__":
            prod = 1
            for dim in info["shape"]:
                prod *= dim
            counts[info["dtype"]] += prod
    return counts


def repo_parameters(repo: Repo) -> Counter:
    """Parameter count per dtype over the repo's safetensors files."""
    total: Counter = Counter()
    for f in repo.files.values():
        if f.path.endswith(".safetensors"):
            total.update(safetensors_parameters(f.abspath))
    return total
