"""The Hub object: both listeners, the repos, tokens, gating, faults and counters; and how to
run it (`start_hub` in a test, ``python -m noderig_lab.hub`` in the lab's services)."""

from __future__ import annotations

import argparse
import hashlib
import hmac
import secrets
import signal
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

from .counters import Counters
from .faults import SWITCHES, FaultChanges, HostilePayloads, fault_applies, parse_faults
from .handler import Handler
from .repos import FileEntry, repo_parameters, scan_repos

DEFAULT_REDIRECT_TTL = 3600.0


class HubServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, hub: "LabHub", kind: str):
        self.hub = hub
        self.kind = kind  # "api" (the Hub port: API, /resolve/, /_lab) or "cdn"
        super().__init__(address, Handler)


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
        self.parameters = {rid: repo_parameters(r) for rid, r in self.repos.items()}
        self.payloads = HostilePayloads()  # files the hostile listings serve, made on first use
        self.counters = Counters(self.lock)
        self._reset_faults()
        self.api_server = HubServer((bind, port), self, "api")
        try:
            self.cdn_server = HubServer((bind, cdn_port), self, "cdn")
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
            conns = list(self.counters.open_connections)
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
        parameters = {rid: repo_parameters(r) for rid, r in repos.items()}
        with self.lock:
            self.repos, self.parameters = repos, parameters
        return {rid: r.commit for rid, r in repos.items()}

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
        changes = parse_faults(spec, self.default_ttl, self.payloads)
        with self.lock:
            self._apply(changes)
        return self.describe_faults()

    def _apply(self, changes: FaultChanges) -> None:
        for name, value in changes.faults.items():
            if value is None:
                self.faults.pop(name, None)
            else:
                self.faults[name] = value
        if changes.redirect_ttl is not None:
            self.redirect_ttl = changes.redirect_ttl
        self.gated_override.update(changes.gated)
        if changes.reject_cdn_authorization is not None:
            self.reject_cdn_auth = changes.reject_cdn_authorization
        if changes.hostile is not None:
            self.hostile = changes.hostile
        self.switches.update(changes.switches)

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
            if not fault_applies(fault, name, kind, target, body_length):
                return None
            if fault["count"] > 0:
                fault["count"] -= 1
                if fault["count"] == 0:
                    del self.faults[name]
            self.counters.sections["faults_applied"][name] += 1
            return dict(fault)

    def reset(self) -> None:
        """Clear faults, gating overrides and counters."""
        with self.lock:
            self._reset_faults()
            self.counters.clear()

    def _reset_faults(self) -> None:
        self.faults: dict[str, dict] = {}
        self.redirect_ttl = self.default_ttl
        self.gated_override: dict[str, bool] = {}
        self.reject_cdn_auth = False
        self.switches = {name: False for name in SWITCHES}
        # The uplink: one rate shared by every file body the Hub and its CDN send (a fleet
        # behind one link), or None. _uplink_next: when the link is free again (monotonic).
        self.switches["uplink_bps"], self._uplink_next = None, 0.0
        self.hostile: dict[str, dict[str, FileEntry]] = {}

    def uplink_wait(self, n: int) -> float:
        """Book ``n`` bytes on the shared uplink: the seconds to wait before sending more."""
        with self.lock:
            bps = self.switches.get("uplink_bps")
            if not bps:
                return 0.0
            now = time.monotonic()
            self._uplink_next = max(now, self._uplink_next) + n / bps
            return self._uplink_next - now

    def stats(self) -> dict:
        """What ``GET /_lab/stats`` answers: see `Counters.stats`."""
        return self.counters.stats()


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
    p = argparse.ArgumentParser(prog="python -m noderig_lab.hub", description="The noderig lab's Hugging Face Hub.")
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
