"""The checkpoint manifest: a repo pinned to a commit, and the files to fetch with size and hash.

Built on the controller with ``huggingface_hub`` (file listing with LFS sha256) and written
beside the checkpoint on the node, so the deploy is reproducible and a rerun with the same
pin needs no Hub call. LFS files carry the Hub's sha256; small git files carry their git
blob id (sha1 of ``blob <size>\\0<bytes>``), which is all the Hub publishes for them.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import NoderigError

MANIFEST_VERSION = 1
DEFAULT_PATTERNS = ["*.safetensors", "*.json", "*.py", "*.model", "*.jinja", "*.tiktoken", "*.txt"]


@dataclass(frozen=True)
class RepoPin:
    repo: str
    revision: str = "main"
    endpoint: str = "https://huggingface.co"
    patterns: tuple[str, ...] = tuple(DEFAULT_PATTERNS)


def read_private(path_text: str, what: str) -> str | None:
    """A secret from a file on the controller that only its owner can read (0600)."""
    path = Path(path_text).expanduser()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise NoderigError(f"the {what} file {path} does not exist; create it (mode 0600) or unset the setting")
    if mode & 0o077:
        raise NoderigError(f"the {what} file {path} is readable by others (mode {oct(mode & 0o777)}); chmod 600 it")
    return path.read_text().strip() or None


def read_token(token_file: str | None) -> str | None:
    """The Hub token: from ``token_file`` (must be private: 0600) or ``HF_TOKEN``."""
    if token_file:
        return read_private(token_file, "Hub token")
    return os.environ.get("HF_TOKEN") or None


def build_manifest(pin: RepoPin, token: str | None) -> dict:
    """Resolve ``pin.revision`` to a commit and list the matching files with size and hash."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi(endpoint=pin.endpoint, token=token or False)
    try:
        info = api.model_info(pin.repo, revision=pin.revision, files_metadata=True)
    except GatedRepoError:
        hint = "the token was refused" if token else "no token was given (set HF_TOKEN or hf_token_file)"
        raise NoderigError(f"{pin.repo} is a gated repo on {pin.endpoint} and {hint}; request access on the Hub and use a token that has it")
    except RevisionNotFoundError:
        raise NoderigError(f"{pin.repo} has no revision {pin.revision!r} on {pin.endpoint}")
    except RepositoryNotFoundError:
        raise NoderigError(f"{pin.repo} does not exist on {pin.endpoint} (or is private and the token cannot see it)")
    except OSError as e:  # connection errors surface as OSError subclasses
        raise NoderigError(f"cannot reach the Hub at {pin.endpoint} to list {pin.repo}: {e}")
    files = []
    for sib in info.siblings or []:
        if not any(fnmatch.fnmatch(sib.rfilename, p) for p in pin.patterns):
            continue
        entry = {"path": sib.rfilename, "size": sib.size}
        if sib.lfs:
            entry["sha256"] = sib.lfs.sha256
        else:
            entry["git_oid"] = sib.blob_id
        files.append(entry)
    if not files:
        raise NoderigError(f"{pin.repo}@{pin.revision} has no files matching {list(pin.patterns)}")
    files.sort(key=lambda f: f["path"])
    return {
        "version": MANIFEST_VERSION,
        "repo": pin.repo,
        "revision": pin.revision,
        "commit": info.sha,
        "endpoint": pin.endpoint,
        "gated": bool(info.gated),
        "patterns": list(pin.patterns),
        "files": files,
        "total_bytes": sum(f["size"] for f in files),
    }



def resolve_url(manifest: dict, path: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(manifest["repo"], path, revision=manifest["commit"], endpoint=manifest["endpoint"])


def signed_location(manifest: dict, path: str, token: str | None) -> str:
    """Where the Hub redirects ``path`` to (a signed CDN URL), resolved with the token here so
    that aria2 never sees the token: aria2 would forward an Authorization header to the CDN."""
    from huggingface_hub import get_hf_file_metadata

    meta = get_hf_file_metadata(resolve_url(manifest, path), token=token or False, endpoint=manifest["endpoint"])
    return meta.location
