"""``/api/...``: the Hub API routes `huggingface_hub` calls: model_info (also at a revision),
the tree listing, paths-info, refs and whoami-v2. HEAD answers as GET, without a body."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import parse_qs, urlsplit

from .auth import HubAuth
from .repos import FileEntry, Repo, iso_time

NOT_FOUND = "Sorry, we can't find the page you are looking for: /"


class ApiRoutes(HubAuth):
    def _api(self, segments: list[str], body: bytes) -> None:
        method = "GET" if self.command == "HEAD" else self.command  # HEAD answers as GET, without a body
        if segments == ["api", "whoami-v2"] and method == "GET":
            return self._whoami()
        if len(segments) < 4 or segments[0] != "api" or segments[1] not in ("models", "datasets", "spaces"):
            self._error(404, NOT_FOUND + "/".join(segments))
        repo_id = f"{segments[2]}/{segments[3]}" if segments[1] == "models" else f"{segments[1]}:{segments[2]}"
        rest = segments[4:]
        if method == "GET" and not rest:
            return self._model_info(*self._repo(repo_id))
        if method == "GET" and len(rest) >= 2 and rest[0] == "revision":
            return self._model_info(*self._repo(repo_id, "/".join(rest[1:])))
        if method == "GET" and len(rest) >= 2 and rest[0] == "tree":
            repo, commit = self._repo(repo_id, rest[1])
            if self.hub.switches["mirror"] and not urlsplit(self.path).path.endswith("/"):
                return self._redirect_to_slashed()
            return self._tree(repo, commit, "/".join(rest[2:]).strip("/"))
        if method == "POST" and len(rest) == 2 and rest[0] == "paths-info":
            repo, commit = self._repo(repo_id, rest[1])
            return self._paths_info(repo, commit, body)
        if method == "GET" and rest == ["refs"]:
            repo, commit = self._repo(repo_id)
            return self._json(200, {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": commit}],
                                    "converts": [], "tags": []})
        self._error(404, NOT_FOUND + "/".join(segments))

    def _redirect_to_slashed(self) -> None:
        """What mirrors answer to a tree route without its trailing slash."""
        split = urlsplit(self.path)
        location = split.path + "/" + (f"?{split.query}" if split.query else "")
        self._send(307, b"", {"Location": location})

    def _model_info(self, repo: Repo, commit: str) -> None:
        config = _read_json(repo.files.get("config.json"))
        org = repo.repo_id.split("/")[0]
        info = {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": org,
            "sha": commit,
            "lastModified": repo.last_modified,
            "createdAt": repo.last_modified,
            "private": False,
            "gated": "manual" if self.hub.is_gated(repo.repo_id) else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "library_name": "transformers",
            "tags": ["transformers", "safetensors", *([config["model_type"]] if "model_type" in config else [])],
            "config": {k: config[k] for k in ("architectures", "model_type", "auto_map") if k in config},
            "siblings": self._siblings(repo),
            "spaces": [],
            "usedStorage": sum(f.size for f in repo.files.values()),
        }
        params = self.hub.parameters.get(repo.repo_id)
        if params:
            info["safetensors"] = {"parameters": dict(params), "total": sum(params.values())}
        expand = self.query.get("expand") or self.query.get("expand[]")
        if expand:
            info = {k: v for k, v in info.items() if k in ("_id", "id") or k in expand}
        self._json(200, info)

    def _siblings(self, repo: Repo) -> list[dict]:
        """model_info's file list: names, with sizes and LFS fields when ``blobs`` asks (never
        in mirror mode), a hostile listing's names last."""
        blobs = self._flag("blobs") and not self.hub.switches["mirror"]
        siblings = []
        hostile = list(self.hub.hostile_files(repo.repo_id).values())
        for f in sorted(repo.files.values(), key=lambda f: f.path) + hostile:
            s = {"rfilename": f.path}
            if blobs:
                s.update(size=f.size, blobId=f.blob_id)
                if f.lfs:
                    s["lfs"] = {"size": f.size, "sha256": f.sha256, "pointerSize": len(f.pointer)}
            siblings.append(s)
        return siblings

    def _entry_json(self, f: FileEntry, commit: str, expand: bool) -> dict:
        d = {"type": "file", "oid": f.blob_id, "size": f.size, "path": f.path}
        if f.lfs:
            d["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": len(f.pointer)}
        if expand:
            d["lastCommit"] = {"id": commit, "title": "lab: generated checkpoint", "date": iso_time(0)}
            d["securityFileStatus"] = {"status": "safe", "avScan": {"virusFound": False, "virusNames": None},
                                       "pickleImportScan": None}
        return d

    def _dir_json(self, repo: Repo, path: str, commit: str, expand: bool) -> dict:
        below = "".join(f"{f.path}\0{f.blob_id}\n" for f in repo.files.values() if f.path.startswith(path + "/"))
        d = {"type": "directory", "oid": hashlib.sha1(below.encode()).hexdigest(), "size": 0, "path": path}
        if expand:
            d["lastCommit"] = {"id": commit, "title": "lab: generated checkpoint", "date": iso_time(0)}
        return d

    def _tree(self, repo: Repo, commit: str, path: str) -> None:
        recursive, expand = self._flag("recursive"), self._flag("expand")
        prefix = path + "/" if path else ""
        files, dirs = [], set()
        for f in repo.files.values():
            if not f.path.startswith(prefix):
                continue
            parts = f.path[len(prefix):].split("/")
            for depth in range(1, len(parts) if recursive else min(2, len(parts))):
                dirs.add(prefix + "/".join(parts[:depth]))
            if recursive or len(parts) == 1:
                files.append(f)
        if path and not files and not dirs:
            self._error(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit})
        out = [self._dir_json(repo, d, commit, expand) for d in sorted(dirs)]
        out += [self._entry_json(f, commit, expand) for f in sorted(files, key=lambda f: f.path)]
        if not path:  # a hostile listing's names, as they are, whatever they claim to be below
            out += [self._entry_json(f, commit, expand) for f in self.hub.hostile_files(repo.repo_id).values()]
        self._json(200, out)

    def _paths_info(self, repo: Repo, commit: str, body: bytes) -> None:
        ctype = self.headers.get("Content-Type", "")
        if "json" in ctype:
            data = json.loads(body or b"{}")
            paths, expand = data.get("paths", []), bool(data.get("expand"))
        else:
            form = parse_qs(body.decode())
            paths, expand = form.get("paths", []), (form.get("expand") or ["false"])[-1].lower() == "true"
        if isinstance(paths, str):
            paths = [paths]
        out = []
        for p in paths:
            p = p.strip("/")
            if p in repo.files:
                out.append(self._entry_json(repo.files[p], commit, expand))
            elif any(f.startswith(p + "/") for f in repo.files):
                out.append(self._dir_json(repo, p, commit, expand))
        self._json(200, out)


def _read_json(entry: FileEntry | None) -> dict:
    if entry is None:
        return {}
    try:
        data = json.loads(entry.abspath.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
