"""The lab's Hugging Face Hub: the endpoints the real `huggingface_hub` client and `aria2c` use.

One `LabHub` object runs two listeners. The *Hub* port answers the API
(``/api/models/...``: model_info, tree, paths-info, refs, whoami-v2) and ``/resolve/``;
the *CDN* port serves LFS file bytes behind HMAC-signed, expiring URLs, with HTTP Range.
``/resolve/`` of an LFS file answers 302 to an absolute CDN URL (another port counts as
another host, so the client drops its token on the way, as with the real Hub's CDN),
carrying ``X-Linked-Size``, ``X-Linked-Etag`` and ``X-Repo-Commit``; small text files are
served directly with their git blob sha1 as ETag.

Repos are directories ``root/<org>/<name>/...``; ``main`` is their only branch, its commit sha
a hash of the file list, and that sha is accepted as a revision too. Per-file sha256 and
git-sha1 are computed at start-up and cached in ``root/.lab-hub-index.json`` keyed by
(size, mtime_ns).

A hostile mode (the fault ``hostile_listing``) adds names that climb out of the model
directory, absolute ones, names with a newline or backslashes, a symlink-looking name, or a
listing of more files than noderig accepts (see `HOSTILE_PATHS`), to a repo's model_info
siblings, its tree and /resolve/.

A mirror mode (``"mirror": true``) answers as popular self-hosted Hub mirrors do:
``model_info`` lists siblings by name only (no size, no LFS, whatever ``blobs`` asks),
``/resolve/`` serves every file itself with ``200`` and an ETag (no redirect, no
``X-Linked-*``), and a tree route without its trailing slash answers ``307`` to the slashed
form. ``"no_range": true`` ignores Range headers (every body whole, ``200``), as a server
without resume support does. Every GET route answers HEAD too, as the real Hub does.

Test controls (Hub port): ``POST /_lab/faults`` (JSON, merged into the active faults),
``GET /_lab/faults``, ``POST /_lab/reset`` (clear faults and counters), ``GET /_lab/stats``,
``POST /_lab/rescan``. See `FAULTS` for the fault keys.

Run it: ``python -m noderig.lab.hub --root DIR --bind ADDR --port N --cdn-port M
--tokens-file F [--gated REPO ...]``, or `start_hub(...)` in a test.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import secrets
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

MiB = 1 << 20
LFS_SUFFIXES = (".safetensors", ".bin", ".model", ".pt", ".pth", ".gguf", ".onnx", ".msgpack", ".h5")
LFS_MIN_SIZE = 10 * MiB
SIDECAR = ".lab-hub-index.json"
DEFAULT_REDIRECT_TTL = 3600.0
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"

# Fault name -> (its main parameter, defaults). A fault applies to the requests of its scope
# ("cdn", "api" = the Hub port incl. /resolve/, "resolve", or "all") whose target contains
# `match` ("org/name/path" for file requests, the URL path otherwise), `count` times
# (-1 = until reset). The body faults (drop, stall, rate) apply to responses carrying file bytes.
FAULTS = {
    "status": ("code", {"count": -1, "scope": "all", "match": ""}),
    "drop_after_bytes": ("bytes", {"count": -1, "scope": "cdn", "match": ""}),
    "stall_seconds": ("seconds", {"count": -1, "scope": "cdn", "match": "", "after_bytes": 65536}),
    "rate_limit_bps": ("bps", {"count": -1, "scope": "cdn", "match": ""}),
}
SCOPES = {"cdn": {"cdn"}, "api": {"api", "resolve"}, "resolve": {"resolve"}, "all": {"api", "resolve", "cdn"}}

# A hostile Hub's listings, by path class (the fault ``hostile_listing``): names that would land
# outside the model directory (from /models/<name>, ``../../..`` is ``/``), each served by
# /resolve/ with its true size and digests. Their content touches `HOSTILE_MARKER` when
# Python runs it: a node where that file exists ran code a listing named.
HOSTILE_MARKER = "/root/noderig-hostile-listing-ran"
SITE = "usr/lib/python3/dist-packages/sitecustomize.py"
HOSTILE_PATHS = {
    "climb": ["../../../usr/local/lib/noderig/verify_files.py", f"../../../{SITE}"],
    "absolute": [f"/{SITE}"],
    "newline": [f"config.py\n../../../{SITE}"],
    "backslash": ["..\\..\\..\\" + SITE.replace("/", "\\")],
    "symlink": [f"tokenizer.py -> ../../../{SITE}"],
}
HOSTILE_HUGE_FILES = 100_001  # the "huge" class: that many harmless names, one more than noderig takes


# ---------------------------------------------------------------------------------------
# repos


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


def _hash_file(path: Path, size: int) -> tuple[str, str]:
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
                    sha256, sha1 = _hash_file(abspath, st.st_size)
                index[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256, "git_sha1": sha1}
                files[rel] = FileEntry(rel, abspath, st.st_size, sha256, sha1, is_lfs(rel, st.st_size))
            listing = "".join(f"{f.path}\0{f.blob_id}\0{f.sha256}\n" for f in files.values())
            commit = hashlib.sha1(f"{repo_id}\n{listing}".encode()).hexdigest()
            repos[repo_id] = Repo(repo_id, files, commit, _iso(mtime), {f.sha256: f for f in files.values()})
    if index != cached:
        try:
            tmp = root / f"{SIDECAR}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"version": 1, "files": index}, indent=1, sort_keys=True))
            os.replace(tmp, sidecar)
        except OSError:
            pass  # a read-only root still serves; it just hashes again next time
    return repos


def _iso(ts: float) -> str:
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


# ---------------------------------------------------------------------------------------
# the server object


class LabHub:
    """Both listeners, the repos, tokens, gating, faults and counters. Also the test handle:
    ``.url``, ``.cdn_url``, ``.stop()``, ``.set_faults()``, ``.reset()``, ``.stats()``."""

    def __init__(
        self,
        root: Path,
        *,
        bind: str = "127.0.0.1",
        port: int = 0,
        cdn_port: int = 0,
        tokens: set[str] | frozenset[str] | list[str] = (),
        gated: set[str] | frozenset[str] | list[str] = (),
        secret: bytes | None = None,
        public_host: str | None = None,
        redirect_ttl: float = DEFAULT_REDIRECT_TTL,
    ):
        self.root = Path(root)
        self.tokens = frozenset(tokens)
        self.gated_default = frozenset(gated)
        self.secret = secret or secrets.token_bytes(32)
        self.public_host = public_host
        self.default_ttl = redirect_ttl
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.repos = scan_repos(self.root)
        self._params = {rid: self._repo_parameters(r) for rid, r in self.repos.items()}
        self._active = {"files": Counter(), "connections": Counter()}  # gauges: a reset keeps them
        self._payloads: Path | None = None  # files the hostile listings serve, made on first use
        self._reset_state()
        self._connections: set[socket.socket] = set()
        self.api_server = _Server((bind, port), self, "api")
        try:
            self.cdn_server = _Server((bind, cdn_port), self, "cdn")
        except OSError:
            self.api_server.server_close()
            raise
        host = public_host or (bind if bind not in ("", "0.0.0.0", "::") else "127.0.0.1")
        self.url = f"http://{host}:{self.api_server.server_address[1]}"
        self.cdn_url = f"http://{host}:{self.cdn_server.server_address[1]}"
        self._threads: list[threading.Thread] = []

    # life cycle ---------------------------------------------------------------------------
    def start(self) -> "LabHub":
        for server in (self.api_server, self.cdn_server):
            t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                 name=f"labhub-{server.kind}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self.stopping.set()
        for server in (self.api_server, self.cdn_server):
            if self._threads:
                server.shutdown()
            server.server_close()
        with self.lock:
            conns = list(self._connections)
        for conn in conns:  # idle keep-alive and stalled connections end now
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []

    def __enter__(self) -> "LabHub":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def rescan(self) -> dict[str, str]:
        repos = scan_repos(self.root)
        params = {rid: self._repo_parameters(r) for rid, r in repos.items()}
        with self.lock:
            self.repos, self._params = repos, params
        return {rid: r.commit for rid, r in repos.items()}

    def _repo_parameters(self, repo: Repo) -> Counter:
        total: Counter = Counter()
        for f in repo.files.values():
            if f.path.endswith(".safetensors"):
                total.update(safetensors_parameters(f.abspath))
        return total

    # auth and gating ----------------------------------------------------------------------
    def is_gated(self, repo_id: str) -> bool:
        with self.lock:
            return self.gated_override.get(repo_id, repo_id in self.gated_default)

    # signed CDN URLs ----------------------------------------------------------------------
    def _signature(self, repo_id: str, sha256: str, filename: str, expires: int) -> str:
        msg = f"{repo_id}\n{sha256}\n{filename}\n{expires}".encode()
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest()

    def sign_url(self, host: str, repo_id: str, entry: FileEntry) -> str:
        with self.lock:
            ttl = self.redirect_ttl
        expires = int(time.time() + ttl) if ttl > 0 else int(time.time()) - 1
        filename = entry.path.rsplit("/", 1)[-1]
        sig = self._signature(repo_id, entry.sha256, filename, expires)
        port = self.cdn_server.server_address[1]
        return (f"http://{host}:{port}/repos/{repo_id}/{entry.sha256}"
                f"?filename={quote(filename, safe='')}&Expires={expires}&Signature={sig}")

    def check_signature(self, repo_id: str, sha256: str, query: dict) -> str | None:
        """None when the signed URL is valid, else the reason."""
        try:
            filename = query["filename"][0]
            expires = int(query["Expires"][0])
            sig = query["Signature"][0]
        except (KeyError, IndexError, ValueError):
            return "SignatureDoesNotMatch: missing signature parameters"
        if not hmac.compare_digest(sig, self._signature(repo_id, sha256, filename, expires)):
            return "SignatureDoesNotMatch: the request signature does not match"
        if expires < time.time():
            return "AccessDenied: Request has expired"
        return None

    # faults -------------------------------------------------------------------------------
    def set_faults(self, spec: dict) -> dict:
        """Merge ``spec`` into the active faults (see `FAULTS`); ``{"name": null}`` clears one.
        Also ``redirect_ttl`` (seconds, null = default), ``gated`` ({repo: bool}) and
        ``reject_cdn_authorization`` (bool: the CDN answers 400 to a request carrying an
        Authorization header, like S3 behind a signed URL). Raises ValueError on bad input."""
        if not isinstance(spec, dict):
            raise ValueError("faults must be a JSON object")
        updates, ttl, gated, reject, hostile, switches = {}, None, {}, None, None, {}
        for name, value in spec.items():
            if name == "hostile_listing":
                hostile = self._hostile_entries(value)
            elif name in FAULTS:
                updates[name] = None if value is None else _normalize_fault(name, value)
            elif name == "redirect_ttl":
                ttl = self.default_ttl if value is None else float(value)
            elif name == "gated":
                if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
                    raise ValueError('"gated" must map repo ids to true/false')
                gated = value
            elif name == "reject_cdn_authorization":
                reject = bool(value)
            elif name == "uplink_bps":
                if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
                    raise ValueError('"uplink_bps" must be a positive number of bytes per second, or null (off)')
                switches[name] = value
            elif name in _SWITCHES:
                switches[name] = bool(value)
            else:
                raise ValueError(f"unknown fault {name!r}; known: {', '.join([*FAULTS, *_OTHER_FAULTS])}")
        with self.lock:
            for name, value in updates.items():
                if value is None:
                    self.faults.pop(name, None)
                else:
                    self.faults[name] = value
            if ttl is not None:
                self.redirect_ttl = ttl
            self.gated_override.update(gated)
            if reject is not None:
                self.reject_cdn_auth = reject
            if hostile is not None:
                self.hostile = hostile
            self.switches.update(switches)
        return self.describe_faults()

    def _hostile_entries(self, value) -> dict[str, dict[str, FileEntry]]:
        """``{"repo": id, "kinds": [class, ...]}`` -> the extra entries per repo; null: none.
        Classes: those of `HOSTILE_PATHS`, and "huge" (`HOSTILE_HUGE_FILES` harmless names)."""
        if value is None:
            return {}
        kinds = value.get("kinds") if isinstance(value, dict) else None
        known = [*HOSTILE_PATHS, "huge"]
        if not isinstance(value.get("repo"), str) or not isinstance(kinds, list) or not set(kinds) <= set(known):
            raise ValueError(f'"hostile_listing" takes {{"repo": id, "kinds": [...]}} with kinds from {", ".join(known)}')
        payload, filler = self._payload_files()
        entries = {}
        for kind in kinds:
            names = HOSTILE_PATHS.get(kind) or [f"extra/{i:06d}.json" for i in range(HOSTILE_HUGE_FILES)]
            for name in names:
                source = filler if kind == "huge" else payload
                entries[name] = FileEntry(name, source[0], source[0].stat().st_size, source[1], source[2], False)
        return {value["repo"]: entries}

    def _payload_files(self) -> tuple[tuple, tuple]:
        """(path, sha256, git sha1) of the code a hostile listing serves, and of a filler file."""
        import tempfile

        if self._payloads is None:
            self._payloads = Path(tempfile.mkdtemp(prefix="lab-hub-hostile-"))
            (self._payloads / "payload.py").write_text(
                f"import pathlib\npathlib.Path({HOSTILE_MARKER!r}).touch()  # a hostile Hub's code ran\n")
            (self._payloads / "filler.json").write_text("{}\n")
        out = []
        for name in ("payload.py", "filler.json"):
            path = self._payloads / name
            out.append((path, *_hash_file(path, path.stat().st_size)))
        return out[0], out[1]

    def hostile_files(self, repo_id: str) -> dict[str, FileEntry]:
        with self.lock:
            return self.hostile.get(repo_id, {})

    def describe_faults(self) -> dict:
        with self.lock:
            return {**{k: dict(v) for k, v in self.faults.items()}, "redirect_ttl": self.redirect_ttl,
                    "hostile_listing": {repo: len(entries) for repo, entries in self.hostile.items()},
                    "gated": sorted(r for r in self.repos if self.gated_override.get(r, r in self.gated_default)),
                    "reject_cdn_authorization": self.reject_cdn_auth, **self.switches}

    def take_fault(self, name: str, kind: str, target: str, body_length: int | None = None) -> dict | None:
        """The fault to apply to this response, if any; consumes one of its count. A drop
        that would come after the end of the body does not apply (and is not consumed)."""
        with self.lock:
            fault = self.faults.get(name)
            if fault is None or kind not in SCOPES[fault["scope"]] or fault["match"] not in target:
                return None
            if name == "drop_after_bytes" and body_length is not None and fault["bytes"] >= body_length:
                return None
            if fault["count"] > 0:
                fault["count"] -= 1
                if fault["count"] == 0:
                    del self.faults[name]
            self.counters["faults_applied"][name] += 1
            return dict(fault)

    def reset(self) -> None:
        """Clear faults, gating overrides and counters."""
        with self.lock:
            self._reset_state()

    def _reset_state(self) -> None:
        self.faults: dict[str, dict] = {}
        self.redirect_ttl = self.default_ttl
        self.gated_override: dict[str, bool] = {}
        self.reject_cdn_auth = False
        self.switches = {name: False for name in _SWITCHES}
        # The uplink: one rate shared by every file body the Hub and its CDN send (a fleet
        # behind one link), or None. _uplink_next: when the link is free again (monotonic).
        self.switches["uplink_bps"], self._uplink_next = None, 0.0
        self.hostile: dict[str, dict[str, FileEntry]] = {}
        self.counters = {
            "requests_by_kind": Counter(), "requests_by_path": Counter(), "status_by_kind": defaultdict(Counter),
            "bytes_by_kind": Counter(), "faults_applied": Counter(), "cdn": Counter(),
            "files": defaultdict(Counter), "connections": defaultdict(Counter),
        }

    # counters -----------------------------------------------------------------------------
    def stats(self) -> dict:
        """Counters since start or the last reset (the /_lab endpoints are not counted).
        Kinds: "api" (/api/...), "resolve" (/{repo}/resolve/...), "cdn" (the CDN port). Shape::

            {"requests": {"total": n, "by_kind": {kind: n}, "by_path": {"GET /path": n}},
             "status": {"total": {"200": n}, "by_kind": {kind: {"302": n}}},
             "bytes_served": {"total": n, kind: n},
             "files": {"org/name/path": {"requests", "range_requests", "bytes", "max_concurrent",
                                         "dropped", "active"}},
             "connections": {"api"|"cdn": {"total", "max_active", "active"}},
             "faults_applied": {fault: n},
             "cdn": {"authorization_headers", "expired", "bad_signature"}}   (keys only once seen)
        """
        with self.lock:
            c = self.counters
            status_total: Counter = Counter()
            for per_kind in c["status_by_kind"].values():
                status_total.update(per_kind)
            return {
                "requests": {"total": sum(c["requests_by_kind"].values()), "by_kind": dict(c["requests_by_kind"]),
                             "by_path": dict(c["requests_by_path"])},
                "status": {"total": {str(k): v for k, v in status_total.items()},
                           "by_kind": {kind: {str(k): v for k, v in cnt.items()}
                                       for kind, cnt in c["status_by_kind"].items()}},
                "bytes_served": {"total": sum(c["bytes_by_kind"].values()), **c["bytes_by_kind"]},
                "files": {name: {**cnt, "active": self._active["files"][name]} for name, cnt in c["files"].items()},
                "connections": {kind: {**cnt, "active": self._active["connections"][kind]}
                                for kind, cnt in c["connections"].items()},
                "faults_applied": dict(c["faults_applied"]),
                "cdn": dict(c["cdn"]),
            }

    def uplink_wait(self, n: int) -> float:
        """Book ``n`` bytes on the shared uplink: the seconds to wait before sending more."""
        with self.lock:
            bps = self.switches.get("uplink_bps")
            if not bps:
                return 0.0
            now = time.monotonic()
            self._uplink_next = max(now, self._uplink_next) + n / bps
            return self._uplink_next - now

    def count(self, section: str, key, n: int = 1) -> None:
        with self.lock:
            self.counters[section][key] += n

    def file_begin(self, key: str, ranged: bool) -> None:
        with self.lock:
            f = self.counters["files"][key]
            f["requests"] += 1
            f["range_requests"] += int(ranged)
            self._active["files"][key] += 1
            f["max_concurrent"] = max(f["max_concurrent"], self._active["files"][key])

    def file_end(self, key: str, sent: int, dropped: bool) -> None:
        with self.lock:
            f = self.counters["files"][key]
            self._active["files"][key] -= 1
            f["bytes"] += sent
            f["dropped"] += int(dropped)

    def connection(self, kind: str, conn: socket.socket, opened: bool) -> None:
        with self.lock:
            c = self.counters["connections"][kind]
            if opened:
                self._connections.add(conn)
                self._active["connections"][kind] += 1
                c["total"] += 1
                c["max_active"] = max(c["max_active"], self._active["connections"][kind])
            else:
                self._connections.discard(conn)
                self._active["connections"][kind] -= 1


_OTHER_FAULTS = ("redirect_ttl", "gated", "reject_cdn_authorization", "hostile_listing", "mirror", "no_range",
                 "uplink_bps")
# Switches set with the faults: on (true) until reset or set false.
_SWITCHES = ("mirror", "no_range")


def _normalize_fault(name: str, value) -> dict:
    main, defaults = FAULTS[name]
    fault = dict(defaults)
    if isinstance(value, dict):
        unknown = set(value) - {main, *defaults}
        if unknown or main not in value:
            raise ValueError(f"fault {name!r} takes {main!r} and optionally {', '.join(defaults)}")
        fault.update(value)
    else:
        fault[main] = value
    if not isinstance(fault[main], (int, float)) or isinstance(fault[main], bool) or fault[main] < 0:
        raise ValueError(f"fault {name!r}: {main!r} must be a non-negative number")
    if fault["scope"] not in SCOPES:
        raise ValueError(f"fault {name!r}: scope must be one of {', '.join(SCOPES)}")
    if not isinstance(fault["count"], int) or fault["count"] == 0 or fault["count"] < -1:
        raise ValueError(f"fault {name!r}: count must be a positive integer or -1 (always)")
    if name == "status" and not 400 <= fault["code"] <= 599:
        raise ValueError("fault 'status': code must be an HTTP error status (400-599)")
    fault["match"] = str(fault["match"])
    return fault


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, hub: LabHub, kind: str):
        self.hub = hub
        self.kind = kind
        super().__init__(address, _Handler)


# ---------------------------------------------------------------------------------------
# requests


class _Abort(Exception):
    """The response is complete (or deliberately broken); stop handling this request."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "noderig-lab-hub/1"
    timeout = 60  # idle keep-alive connections close after this
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def setup(self):
        super().setup()
        self.server.hub.connection(self.server.kind, self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.hub.connection(self.server.kind, self.connection, False)

    @property
    def hub(self) -> LabHub:
        return self.server.hub

    def do_GET(self):
        self._dispatch()

    def do_HEAD(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    # plumbing ------------------------------------------------------------------------------
    def send_response(self, code, message=None):
        super().send_response(code, message)
        kind = getattr(self, "kind", self.server.kind)  # unset when the request line itself was bad
        if kind != "lab":
            with self.hub.lock:
                self.hub.counters["status_by_kind"][kind][code] += 1

    def _send(self, code: int, body: bytes = b"", headers: dict | None = None,
              content_type: str = "application/json; charset=utf-8") -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            if self.kind != "lab":
                self.hub.count("bytes_by_kind", self.kind, len(body))

    def _json(self, code: int, obj, headers: dict | None = None) -> None:
        self._send(code, json.dumps(obj).encode(), headers)

    def _error(self, code: int, message: str, error_code: str | None = None, headers: dict | None = None):
        h = dict(headers or {})
        if error_code:
            h["X-Error-Code"] = error_code
        h["X-Error-Message"] = message
        self._json(code, {"error": message}, h)
        raise _Abort

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self.query = parse_qs(split.query)
        segments = [unquote(s) for s in split.path.split("/")[1:]]
        if self.server.kind == "cdn":
            self.kind = "cdn"
        elif segments[:1] == ["_lab"]:
            self.kind = "lab"
        elif _split_repo(segments)[1][:1] == ["resolve"]:
            self.kind = "resolve"
        else:
            self.kind = "api"
        body = self._read_body()
        if self.kind != "lab":
            self.hub.count("requests_by_kind", self.kind)
            self.hub.count("requests_by_path", f"{self.command} {split.path}")
        try:
            if self.kind == "lab":
                return self._lab(segments, body)
            target = self._target(segments)
            fault = self.hub.take_fault("status", self.kind, target)
            if fault:
                code = int(fault["code"])
                self._error(code, f"lab fault: injected HTTP {code}", headers={"Retry-After": "0"})
            if self.kind == "cdn":
                return self._cdn(segments)
            if self.kind == "resolve":
                return self._resolve(segments)
            return self._api(segments, body)
        except _Abort:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _target(self, segments: list[str]) -> str:
        """What `match` in a fault is compared with: org/name/path for files, else the URL path."""
        if self.kind == "resolve":
            repo, rest = _split_repo(segments)
            return f"{repo}/{'/'.join(rest[2:])}"
        if self.kind == "cdn" and len(segments) >= 4:
            repo = self.hub.repos.get(f"{segments[1]}/{segments[2]}")
            entry = repo.by_sha256.get(segments[3]) if repo else None
            if entry:
                return f"{repo.repo_id}/{entry.path}"
        return "/" + "/".join(segments)

    def _token(self) -> tuple[bool, bool]:
        """(a token was sent, it is valid)."""
        auth = self.headers.get("Authorization", "")
        if not auth:
            return False, False
        scheme, _, token = auth.partition(" ")
        return True, scheme.lower() == "bearer" and token.strip() in self.hub.tokens

    def _repo(self, repo_id: str, revision: str | None = None) -> tuple[Repo, str]:
        """The repo and resolved commit, or an error response like the real Hub's."""
        sent, valid = self._token()
        if sent and not valid:
            self._error(401, INVALID_CREDENTIALS)
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            # Without a valid token the real Hub answers 401 (it won't tell private from missing).
            self._error(404 if valid else 401, "Repository not found", "RepoNotFound")
        if self.hub.is_gated(repo_id) and not valid:
            self._error(401, f"Access to model {repo_id} is restricted. You must have access to it and be "
                             "authenticated to access it. Please log in.", "GatedRepo")
        commit = repo.resolve(revision or "main")
        if commit is None:
            self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return repo, commit

    # /_lab ---------------------------------------------------------------------------------
    def _lab(self, segments: list[str], body: bytes) -> None:
        action = segments[1] if len(segments) > 1 else ""
        if (self.command, action) == ("GET", "stats"):
            return self._json(200, self.hub.stats())
        if (self.command, action) == ("GET", "faults"):
            return self._json(200, self.hub.describe_faults())
        if (self.command, action) == ("POST", "faults"):
            try:
                return self._json(200, self.hub.set_faults(json.loads(body or b"{}")))
            except (ValueError, TypeError) as e:
                return self._error(400, f"bad faults: {e}")
        if (self.command, action) == ("POST", "reset"):
            self.hub.reset()
            return self._json(200, {"ok": True})
        if (self.command, action) == ("POST", "rescan"):
            return self._json(200, self.hub.rescan())
        self._error(404, f"no lab endpoint {self.command} /_lab/{action}")

    # /api ----------------------------------------------------------------------------------
    def _api(self, segments: list[str], body: bytes) -> None:
        method = "GET" if self.command == "HEAD" else self.command  # HEAD answers as GET, without a body
        if segments == ["api", "whoami-v2"] and method == "GET":
            sent, valid = self._token()
            if not valid:
                self._error(401, INVALID_CREDENTIALS if sent else "Invalid username or password.")
            return self._json(200, _WHOAMI)
        if len(segments) < 4 or segments[0] != "api" or segments[1] not in ("models", "datasets", "spaces"):
            self._error(404, f"Sorry, we can't find the page you are looking for: /{'/'.join(segments)}")
        repo_id = f"{segments[2]}/{segments[3]}" if segments[1] == "models" else f"{segments[1]}:{segments[2]}"
        rest = segments[4:]
        if method == "GET" and not rest:
            return self._model_info(*self._repo(repo_id))
        if method == "GET" and len(rest) >= 2 and rest[0] == "revision":
            return self._model_info(*self._repo(repo_id, "/".join(rest[1:])))
        if method == "GET" and len(rest) >= 2 and rest[0] == "tree":
            repo, commit = self._repo(repo_id, rest[1])
            if self.hub.switches["mirror"] and not urlsplit(self.path).path.endswith("/"):
                split = urlsplit(self.path)
                location = split.path + "/" + (f"?{split.query}" if split.query else "")
                return self._send(307, b"", {"Location": location})
            return self._tree(repo, commit, "/".join(rest[2:]).strip("/"))
        if method == "POST" and len(rest) == 2 and rest[0] == "paths-info":
            repo, commit = self._repo(repo_id, rest[1])
            return self._paths_info(repo, commit, body)
        if method == "GET" and rest == ["refs"]:
            repo, commit = self._repo(repo_id)
            return self._json(200, {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": commit}],
                                    "converts": [], "tags": []})
        self._error(404, f"Sorry, we can't find the page you are looking for: /{'/'.join(segments)}")

    def _flag(self, name: str) -> bool:
        return (self.query.get(name) or ["false"])[-1].lower() in ("1", "true")

    def _model_info(self, repo: Repo, commit: str) -> None:
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
            "siblings": siblings,
            "spaces": [],
            "usedStorage": sum(f.size for f in repo.files.values()),
        }
        params = self.hub._params.get(repo.repo_id)
        if params:
            info["safetensors"] = {"parameters": dict(params), "total": sum(params.values())}
        expand = self.query.get("expand") or self.query.get("expand[]")
        if expand:
            info = {k: v for k, v in info.items() if k in ("_id", "id") or k in expand}
        self._json(200, info)

    def _entry_json(self, f: FileEntry, commit: str, expand: bool) -> dict:
        d = {"type": "file", "oid": f.blob_id, "size": f.size, "path": f.path}
        if f.lfs:
            d["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": len(f.pointer)}
        if expand:
            d["lastCommit"] = {"id": commit, "title": "lab: generated checkpoint", "date": _iso(0)}
            d["securityFileStatus"] = {"status": "safe", "avScan": {"virusFound": False, "virusNames": None},
                                       "pickleImportScan": None}
        return d

    def _dir_json(self, repo: Repo, path: str, commit: str, expand: bool) -> dict:
        below = "".join(f"{f.path}\0{f.blob_id}\n" for f in repo.files.values() if f.path.startswith(path + "/"))
        d = {"type": "directory", "oid": hashlib.sha1(below.encode()).hexdigest(), "size": 0, "path": path}
        if expand:
            d["lastCommit"] = {"id": commit, "title": "lab: generated checkpoint", "date": _iso(0)}
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

    # /resolve ------------------------------------------------------------------------------
    def _resolve(self, segments: list[str]) -> None:
        repo_id, rest = _split_repo(segments)
        if self.command not in ("GET", "HEAD") or len(rest) < 3 or rest[0] != "resolve":
            self._error(404, "Not found")
        repo, commit = self._repo(repo_id, rest[1])
        name = "/".join(rest[2:])
        entry = repo.files.get(name) or self.hub.hostile_files(repo.repo_id).get(name)
        if entry is None:
            self._error(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit})
        headers = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if entry.lfs and self.hub.switches["mirror"]:  # a mirror serves the bytes itself
            headers["ETag"] = f'"{entry.sha256}"'
            return self._serve_file(repo.repo_id, entry, headers, "application/octet-stream")
        if entry.lfs:
            host = _request_host(self.headers.get("Host")) or urlsplit(self.hub.url).hostname
            location = self.hub.sign_url(self.hub.public_host or host, repo.repo_id, entry)
            headers.update({"Location": location, "X-Linked-Size": str(entry.size),
                            "X-Linked-Etag": f'"{entry.sha256}"', "ETag": f'"{entry.sha256}"'})
            return self._send(302, f"Found. Redirecting to {location}".encode(), headers,
                              "text/plain; charset=utf-8")
        headers["ETag"] = f'"{entry.git_sha1}"'
        self._serve_file(repo.repo_id, entry, headers)

    # CDN -----------------------------------------------------------------------------------
    def _cdn(self, segments: list[str]) -> None:
        if self.headers.get("Authorization"):
            self.hub.count("cdn", "authorization_headers")
            if self.hub.reject_cdn_auth:
                self._error(400, "InvalidArgument: Only one auth mechanism allowed; only the X-Amz-Algorithm "
                                 "query parameter, Signature query string parameter or the Authorization header "
                                 "should be specified")
        if self.command not in ("GET", "HEAD") or len(segments) != 4 or segments[0] != "repos":
            self._error(404, "NoSuchKey")
        repo_id, sha256 = f"{segments[1]}/{segments[2]}", segments[3]
        problem = self.hub.check_signature(repo_id, sha256, self.query)
        if problem:
            self.hub.count("cdn", "expired" if "expired" in problem else "bad_signature")
            self._error(403, problem)
        repo = self.hub.repos.get(repo_id)
        entry = repo.by_sha256.get(sha256) if repo else None
        if entry is None:
            self._error(404, "NoSuchKey")
        name = entry.path.rsplit("/", 1)[-1]
        self._serve_file(repo_id, entry, {
            "Accept-Ranges": "bytes", "ETag": f'"{entry.sha256}"',
            "Content-Disposition": f"inline; filename*=UTF-8''{quote(name)}; filename=\"{name}\";",
            "Last-Modified": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(entry.abspath.stat().st_mtime)),
        }, "application/octet-stream")

    # file bodies ---------------------------------------------------------------------------
    def _serve_file(self, repo_id: str, entry: FileEntry, headers: dict,
                    content_type: str = "text/plain; charset=utf-8") -> None:
        size = entry.size
        range_header = None if self.hub.switches["no_range"] else self.headers.get("Range")
        if self.hub.switches["no_range"]:
            headers = {k: v for k, v in headers.items() if k != "Accept-Ranges"}
        start, end = 0, size - 1
        status = 200
        if range_header:
            parsed = _parse_range(range_header, size)
            if parsed == "unsatisfiable":
                self._error(416, "Requested Range Not Satisfiable", headers={"Content-Range": f"bytes */{size}"})
            if parsed is not None:
                (start, end), status = parsed, 206
                headers = {**headers, "Content-Range": f"bytes {start}-{end}/{size}"}
        length = end - start + 1 if size else 0
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "HEAD" or length == 0:
            return
        target = f"{repo_id}/{entry.path}"
        drop = self.hub.take_fault("drop_after_bytes", self.kind, target, length)
        stall = self.hub.take_fault("stall_seconds", self.kind, target)
        rate = self.hub.take_fault("rate_limit_bps", self.kind, target)
        self.hub.file_begin(target, range_header is not None)
        progress = [0]  # bytes sent so far, also when the client hangs up mid-body
        dropped = False
        try:
            with open(entry.abspath, "rb") as f:
                if drop or stall or rate or self.hub.switches.get("uplink_bps"):
                    dropped = self._copy_with_faults(f, start, length, drop, stall, rate, progress)
                else:
                    self._sendfile_counted(f, start, length, progress)
        finally:
            self.hub.file_end(target, progress[0], dropped)
            self.hub.count("bytes_by_kind", self.kind, progress[0])
        if dropped or progress[0] < length:
            self.close_connection = True

    def _sendfile_counted(self, f, start: int, length: int, progress: list[int]) -> None:
        """sendfile(2) one call at a time, so that ``progress`` holds every byte the kernel took
        even when the client hangs up mid-body (socket.sendfile loses the count of the call
        that fails: the uplink counters would miss what a client cut short)."""
        out, fd = self.connection.fileno(), f.fileno()
        while progress[0] < length:
            try:
                n = os.sendfile(out, fd, start + progress[0], min(length - progress[0], 8 * MiB))
            except BlockingIOError:  # the socket has a timeout, so it is non-blocking underneath
                if not select.select([], [out], [], self.timeout)[1]:
                    raise TimeoutError("the client stopped reading")
                continue
            if n == 0:
                break
            progress[0] += n

    def _copy_with_faults(self, f, start: int, length: int, drop, stall, rate, progress: list[int]) -> bool:
        """Copy the body in chunks, throttled, paused and/or cut short. True when cut."""
        f.seek(start)
        limit = min(length, int(drop["bytes"])) if drop else length
        stall_at = int(stall["after_bytes"]) if stall else None
        bps = float(rate["bps"]) if rate else 0.0
        uplink = self.hub.switches.get("uplink_bps") or 0
        chunk = max(1024, min(256 * 1024, int(min(bps or uplink, uplink or bps) / 20))) if bps or uplink else 256 * 1024
        t0 = time.monotonic()
        while progress[0] < limit:
            if stall_at is not None and progress[0] >= stall_at:
                if self.hub.stopping.wait(float(stall["seconds"])):
                    break
                stall_at, t0 = None, time.monotonic() - (progress[0] / bps if bps else 0)
            n = min(chunk, limit - progress[0])
            if stall_at is not None:
                n = min(n, stall_at - progress[0])
            data = f.read(n)
            if not data:
                break
            self.wfile.write(data)
            progress[0] += len(data)
            shared = self.hub.uplink_wait(len(data))
            if shared > 0 and self.hub.stopping.wait(shared):
                break
            if bps:
                delay = t0 + progress[0] / bps - time.monotonic()
                if delay > 0 and self.hub.stopping.wait(delay):
                    break
        if drop and progress[0] < length:  # cut the connection mid-body, as a flaky network would
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return True
        return False


def _split_repo(segments: list[str]) -> tuple[str, list[str]]:
    if segments and segments[0] in ("datasets", "spaces"):
        return f"{segments[0]}:{'/'.join(segments[1:3])}", segments[3:]
    return "/".join(segments[:2]), segments[2:]


def _parse_range(header: str, size: int):
    """(start, end) for one satisfiable byte range, "unsatisfiable", or None to ignore it
    (multi-range or malformed: answering 200 with the whole body is allowed)."""
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):  # suffix range: the last N bytes
        n = int(m.group(2))
        if n == 0:
            return "unsatisfiable"
        return max(0, size - n), size - 1
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else size - 1
    if start >= size or end < start:
        return "unsatisfiable"
    return start, min(end, size - 1)


def _request_host(host_header: str | None) -> str | None:
    if not host_header:
        return None
    if host_header.startswith("["):  # [ipv6]:port
        return host_header.split("]")[0] + "]"
    return host_header.rsplit(":", 1)[0] if ":" in host_header else host_header


def _read_json(entry: FileEntry | None) -> dict:
    if entry is None:
        return {}
    try:
        data = json.loads(entry.abspath.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_WHOAMI = {
    "type": "user",
    "id": "6650b5a8c0ffee0000000001",
    "name": "lab-user",
    "fullname": "noderig lab user",
    "email": "lab@noderig.invalid",
    "emailVerified": True,
    "canPay": False,
    "isPro": False,
    "periodEnd": None,
    "avatarUrl": "",
    "orgs": [],
    "auth": {"type": "access_token", "accessToken": {"displayName": "lab", "role": "read",
                                                    "createdAt": "2026-01-01T00:00:00.000Z"}},
}


# ---------------------------------------------------------------------------------------
# entry points


def read_tokens(path: Path) -> set[str]:
    """One token per line; blank lines and ``#`` comments ignored."""
    lines = Path(path).read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")}


def start_hub(
    root: Path,
    *,
    bind: str = "127.0.0.1",
    port: int = 0,
    cdn_port: int = 0,
    tokens_file: Path | None = None,
    tokens: set[str] | list[str] = (),
    gated: set[str] | list[str] = (),
    secret: bytes | None = None,
    public_host: str | None = None,
    redirect_ttl: float = DEFAULT_REDIRECT_TTL,
) -> LabHub:
    """Start the Hub on background threads and return it (``.url``, ``.cdn_url``, ``.stop()``).
    Port 0 picks a free port."""
    all_tokens = set(tokens) | (read_tokens(tokens_file) if tokens_file else set())
    hub = LabHub(root, bind=bind, port=port, cdn_port=cdn_port, tokens=all_tokens, gated=gated,
                 secret=secret, public_host=public_host, redirect_ttl=redirect_ttl)
    return hub.start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m noderig.lab.hub", description="The noderig lab's Hugging Face Hub.")
    p.add_argument("--root", type=Path, required=True, help="directory of repos: ROOT/<org>/<name>/...")
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="Hub API and /resolve/ port (0: any free port)")
    p.add_argument("--cdn-port", type=int, default=0, help="signed-URL file port (0: any free port)")
    p.add_argument("--tokens-file", type=Path, help="valid tokens, one per line")
    p.add_argument("--gated", action="append", default=[], metavar="REPO", help="a gated repo id (repeatable)")
    p.add_argument("--secret-file", type=Path, help="HMAC key for CDN URLs (default: random per start)")
    p.add_argument("--public-host", help="host name for CDN URLs (default: the Host the client used)")
    p.add_argument("--redirect-ttl", type=float, default=DEFAULT_REDIRECT_TTL, help="signed URL lifetime, seconds")
    args = p.parse_args(argv)
    if not args.root.is_dir():
        p.error(f"--root {args.root} is not a directory")
    secret = args.secret_file.read_bytes().strip() if args.secret_file else None
    hub = start_hub(args.root, bind=args.bind, port=args.port, cdn_port=args.cdn_port, tokens_file=args.tokens_file,
                    gated=args.gated, secret=secret, public_host=args.public_host, redirect_ttl=args.redirect_ttl)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"lab hub listening url={hub.url} cdn_url={hub.cdn_url} repos={','.join(sorted(hub.repos))}", flush=True)
    stop.wait()
    hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
