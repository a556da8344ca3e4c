"""aria2 as the deploy drives it: the daemon's config, per-file options, exit codes
(aria2c(1), "EXIT STATUS"), progress, and ``Session``, the controller's hold on a running
daemon over JSON-RPC (aria2p). No host I/O here: what must run on the node (deleting a file,
resolving a URL again) comes in as functions from the operation."""

from __future__ import annotations

import time
from typing import Callable

from .errors import redact
from .manifest import resolve_url

EXIT_CODES = {
    0: "all downloads finished", 1: "unknown error", 2: "timeout", 3: "resource not found",
    4: "too many 'resource not found' answers", 5: "download too slow (lowest-speed-limit)",
    6: "network problem", 7: "unfinished downloads at exit", 8: "the server does not support resume",
    9: "not enough disk space", 10: "piece length differs from the control file",
    11: "the same file is already being downloaded", 13: "the file already exists",
    14: "renaming the file failed", 15: "could not open an existing file", 16: "could not create a file",
    17: "file I/O error", 18: "could not create a directory", 19: "name resolution failed",
    22: "bad HTTP response header", 23: "too many redirects", 24: "HTTP authorization failed (token or gated repo)",
    28: "bad option", 29: "the server is overloaded", 30: "bad JSON-RPC request", 32: "checksum validation failed",
}


def explain_exit(code: int) -> str:
    return f"aria2c exit {code}: {EXIT_CODES.get(code, 'unknown exit status')}"


# aria2 errors worth another attempt after re-resolving the URL (a signed CDN URL expired:
# the CDN answers 403, which aria2 reports as a bad response; resume uses the control file).
RETRY_AFTER_RESOLVE = {"22", "24"}
# What aria2 reports for a control file it cannot load (an "unknown error").
UNUSABLE_CONTROL_FILE = "1"
RPC_PORT = 6800
SERVICE = "noderig-aria2"
CONF = "/etc/noderig/aria2.conf"  # 0600: holds the RPC secret, so it never appears in argv


def daemon_conf(secret: str, port: int = RPC_PORT) -> str:
    """aria2c's config file: RPC on loopback only, with a secret."""
    return (
        "enable-rpc=true\n"
        "rpc-listen-all=false\n"
        f"rpc-listen-port={port}\n"
        f"rpc-secret={secret}\n"
        "rpc-allow-origin-all=false\n"
        # the controller may vanish: keep the results until it comes back to read them
        "max-download-result=10000\n"
        # Quiet: its console goes to the journal, and its error lines and download results
        # name the URI, whose query string is a signature (errors come back over RPC instead).
        "quiet=true\n"
        "console-log-level=error\n"
        "download-result=hide\n"
        "summary-interval=0\n"
        "show-console-readout=false\n"
    )


def download_options(dest: str, path: str, connections: int, allocation: str) -> dict[str, str]:
    """Per-file aria2 options (RPC values are strings)."""
    return {
        "dir": dest,
        "out": path,
        "split": str(connections),
        "max-connection-per-server": str(min(connections, 16)),
        "min-split-size": "1M",
        "continue": "true",
        # A server without Range support (some mirrors): start the file over instead of
        # failing with "the server does not support resume" (exit 8).
        "always-resume": "false",
        "auto-file-renaming": "false",
        # What the Hub or a mirror serves is bytes to hash, never instructions: followed (aria2's
        # default), a metalink or torrent answer would have aria2 write the files it names under
        # ``dest`` (noderig's own state among them), past every path check, or start BitTorrent.
        "follow-metalink": "false",
        "follow-torrent": "false",
        "allow-overwrite": "true",
        "file-allocation": allocation,
        "max-tries": "5",
        "retry-wait": "2",
        "connect-timeout": "30",
        "timeout": "60",
    }


def file_options(manifest: dict, dest: str, path: str, url: str, token: str | None, connections: int,
                 allocation: str) -> dict:
    """``download_options`` for one file of ``manifest``, with the token on that one request
    only when a gated file is served by the Hub (or mirror) itself: its /resolve/ URL did not
    redirect when resolved on the controller (HEAD and a ranged GET: ``manifest.get_leaves``). It
    reaches aria2 over the RPC tunnel (never argv, a file or a log); a redirect to another host
    was resolved on the controller instead, so the token never follows one.

    + url: where aria2 fetches the file (``manifest.download_url``)
    + token: the Hub token, or None
    """
    opts = download_options(dest, path, connections, allocation)
    if token and manifest.get("gated") and url == resolve_url(manifest, path):
        opts["header"] = [f"Authorization: Bearer {token}"]
    return opts


def summarize_progress(downloads: list[dict]) -> dict:
    """Totals over aria2 download snapshots ({status, total, done, speed})."""
    total = sum(d["total"] for d in downloads)
    done = sum(d["done"] for d in downloads)
    speed = sum(d["speed"] for d in downloads if d["status"] == "active")
    finished = sum(1 for d in downloads if d["status"] == "complete")
    eta = (total - done) / speed if speed else None
    return {"files_done": finished, "files": len(downloads), "bytes_done": done, "bytes_total": total,
            "speed": speed, "eta": eta}


def progress_line(label: str, p: dict) -> str:
    eta = "--:--" if p["eta"] is None else f"{int(p['eta']) // 60:02d}:{int(p['eta']) % 60:02d}"
    return (f"{label}: {p['files_done']}/{p['files']} files, {p['bytes_done'] / 2**20:.1f}/"
            f"{p['bytes_total'] / 2**20:.1f} MiB, {p['speed'] / 2**20:.1f} MiB/s, ETA {eta}")


# ``Session.follow``'s feed: the poll's snapshot in; the files to add now, and how many more may come.
Feed = Callable[[dict], "tuple[list[tuple[str | list[str], str]], int]"]


class DownloadError(Exception):
    """A download that cannot finish; the message names the file, never a signed URL's query."""


# The fields of aria2.tellStatus a poll reads.
STATUS_KEYS = ["gid", "status", "totalLength", "completedLength", "downloadSpeed", "errorCode", "errorMessage"]
# Re-resolutions of one file's URL in one session (an expired signature, then a fresh one).
RESOLVE_ATTEMPTS = 3
# A download aria2 still holds: re-attach to it rather than add the file again.
LIVE = ("active", "waiting", "paused", "complete")


def connect(port: int, secret: str, wait: float = 15.0, where: str = "the node"):
    """An ``aria2p.API`` on the daemon's RPC at 127.0.0.1:``port``, once it answers (a daemon
    just started needs a moment); DownloadError after ``wait`` seconds."""
    import aria2p

    api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=port, secret=secret, timeout=30))
    deadline = time.monotonic() + wait
    while True:
        try:
            api.client.get_version()
            return api
        except Exception as e:
            if time.monotonic() > deadline:
                raise DownloadError(f"aria2's RPC on {where} did not answer: {e}")
            time.sleep(0.05)


class Session:
    """The controller's hold on one aria2 daemon over JSON-RPC: re-attach to the downloads of
    ``dest`` an earlier (maybe killed) run left, add the rest in one round trip, poll them all
    in one round trip, start a file over or resolve its URL again when aria2 gives up on it,
    and report progress until every file is complete.

    + api: an ``aria2p.API`` on the daemon (``connect`` makes one)
    + dest: the checkpoint directory on the node (aria2's ``dir``)
    + resolve: a file's URL, resolved again (a signed URL expires); raises DownloadError
    + options: aria2's options for a file and its URL (``file_options``)
    + discard: delete a file and its ``.aria2`` control file on the node
    + say: where progress and retries are told (a logger's ``info``)
    + label: what the lines start with (``[b300] org/model``)
    """

    def __init__(self, api, dest: str, *, resolve: Callable[[str], str], options: Callable[[str, str], dict],
                 discard: Callable[[str], None], say: Callable[[str], None] = print, label: str = "aria2"):
        self.api, self.dest, self.label = api, dest, label
        self.resolve, self.options, self.discard, self.say = resolve, options, discard, say
        self.gids: dict[str, str] = {}  # path -> gid of its current download
        self.from_peers: set[str] = set()  # paths whose current download has fan-out peers as sources
        self.fell_back: list[str] = []  # paths the peers failed, continued from the Hub
        self.attempts: dict[str, int] = {}  # path -> failed downloads seen

    def _multicall(self, method: str, params: list[list]) -> list:
        """``method`` once per params, in one RPC round trip (each crosses the SSH tunnel);
        each result is ``[value]``, or a fault (a dict) for a call aria2 refused."""
        calls = [{"methodName": method, "params": [f"token:{self.api.client.secret}", *p]} for p in params]
        return self.api.client.call("system.multicall", [calls], insert_secret=False) if calls else []

    def attach(self, entries: list[tuple[str | list[str], str]], jobs: int, first: bool = False) -> int:
        """Track every ``(url, path)``: a download aria2 still holds for that file is taken
        over (resumed if paused), the others are added (``first``: ahead of the files aria2 has
        queued). ``url`` may be a list of sources (the fan-out's peers, the Hub last as a
        backup): if aria2 gives up on every one, the file goes on from the Hub alone
        (``recover``). Returns how many were taken over."""
        self.api.set_global_options({"max-concurrent-downloads": str(jobs)})
        held = {str(d.files[0].path): d for d in self.api.get_downloads() if d.files}
        to_add = []
        for url, path in entries:
            d = held.get(f"{self.dest}/{path}")
            if d is not None and d.status in LIVE:
                self.gids[path] = d.gid
                if not isinstance(url, str):
                    # (a killed run's peer download: its sources were that run's servers, gone
                    # now; when aria2 gives up on them, the Hub goes on with it, as for a peer's)
                    self.from_peers.add(path)
                if d.status == "paused":
                    self.api.resume([d])
            else:
                if d is not None:  # aria2 gave up on it since it was handed over: said, and forgotten
                    if d.status == "error":
                        self.say(f"{self.label}: {path}: aria2 gave up on it earlier "
                                 f"({redact(d.error_message or 'error')}); starting it again")
                    self.api.client.remove_download_result(d.gid)
                to_add.append(([url] if isinstance(url, str) else list(url), path))
                if not isinstance(url, str):
                    self.from_peers.add(path)
        position = [0] if first else []
        results = self._multicall("aria2.addUri", [[uris, self.options(path, uris[0]), *position]
                                                   for uris, path in to_add])
        for (uris, path), result in zip(to_add, results):
            if not isinstance(result, list):
                raise DownloadError(f"aria2 refused {self.dest}/{path}: {redact(str(result))}")
            self.gids[path] = result[0]
        taken_over = len(entries) - len(to_add)
        if taken_over:
            self.say(f"{self.label}: re-attached to {taken_over} download(s) already running on the node")
        return taken_over

    def snapshot(self) -> dict[str, dict]:
        """Every tracked file's download: ``{status, total, done, speed, error, message, gid}``;
        a download aria2 no longer knows is ``removed``."""
        snap = {}
        results = self._multicall("aria2.tellStatus", [[gid, STATUS_KEYS] for gid in self.gids.values()])
        for (path, gid), result in zip(self.gids.items(), results):
            d = result[0] if isinstance(result, list) else {"status": "removed", "errorMessage": str(result)}
            snap[path] = {"status": d.get("status"), "total": int(d.get("totalLength", 0)),
                          "done": int(d.get("completedLength", 0)), "speed": int(d.get("downloadSpeed", 0)),
                          "error": d.get("errorCode"), "message": d.get("errorMessage"), "gid": gid}
        return snap

    def recover(self, path: str, d: dict) -> None:
        """A download aria2 gave up on: start the file over once when its control file is
        unusable, resolve its URL again (up to RESOLVE_ATTEMPTS times) when the server
        refused it (a signed URL expired); otherwise DownloadError naming the file."""
        if path in self.from_peers:
            # Every peer (and the Hub as their backup) failed this file: on from the Hub alone,
            # resuming from the control file (the bytes so far are checked by the hash anyway).
            self.from_peers.discard(path)
            self.fell_back.append(path)
            self._restart(path, d["gid"])
            self.say(f"{self.label}: {path}: the peers failed ({redact(d['message'] or 'error')}); from the Hub")
            return
        self.attempts[path] = tries = self.attempts.get(path, 0) + 1
        if d["error"] == UNUSABLE_CONTROL_FILE and tries <= 1:
            # A stale or damaged leftover: the bytes it describes are unknown, so the file starts over.
            self.discard(path)
            self._restart(path, d["gid"])
            self.say(f"{self.label}: {path}: unusable aria2 control file; starting that file over")
        elif d["error"] in RETRY_AFTER_RESOLVE and tries <= RESOLVE_ATTEMPTS:
            self._restart(path, d["gid"])
            self.say(f"{self.label}: {path}: {redact(d['message'] or 'refused')}; URL re-resolved, resuming")
        else:
            raise DownloadError(f"downloading {self.dest}/{path} failed: {explain_exit(int(d['error'] or 1))}"
                                + (f" ({redact(d['message'])})" if d["message"] else ""))

    def _restart(self, path: str, gid: str) -> None:
        url = self.resolve(path)
        self.api.client.remove_download_result(gid)
        self.gids[path] = self.api.add_uris([url], options=self.options(path, url)).gid

    def follow(self, sizes: dict[str, int], on_file_done: Callable[[], None] = lambda: None,
               interval: float = 0.2, print_every: float = 2.0, feed: Feed | None = None, jobs: int = 4) -> None:
        """Poll until every tracked file is complete, recovering failed downloads, telling
        progress every ``print_every`` seconds and at the end, and calling ``on_file_done``
        whenever more files are complete than at the last poll.

        + sizes: each file's size from the manifest (aria2 knows one only once the server answered)
        + feed: called with each poll's snapshot, returns files to add now (ahead of the queue)
          and how many more may come: the follow ends only when none may (the fan-out's files
          that peers have not verified yet)
        + jobs: files downloaded at once (for the files ``feed`` adds)
        """
        last_told, finished, more = 0.0, 0, int(feed is not None)
        while True:
            snap = self.snapshot()
            if more:
                added, more = feed(snap)
                if added:
                    self.attach(added, jobs, first=True)
                    snap = self.snapshot()
            for path, d in snap.items():
                if d["status"] in ("error", "removed"):
                    self.recover(path, d)
                d["total"] = max(d["total"], sizes.get(path, 0))
            progress = summarize_progress(list(snap.values()))
            done = progress["files_done"] == progress["files"] and not more
            if done or time.monotonic() - last_told >= print_every:
                self.say(progress_line(self.label, progress) + (f"; {more} more awaited from peers" if more else ""))
                last_told = time.monotonic()
            if progress["files_done"] > finished:
                finished = progress["files_done"]
                on_file_done()
            if done:
                return
            time.sleep(interval)

    def busy_elsewhere(self) -> bool:
        """Whether the daemon still downloads (or queues) a file outside this session's ``dest``:
        another checkpoint's, handed to it earlier in the run and not yet followed."""
        prefix = self.dest.rstrip("/") + "/"
        return any(d.status in ("active", "waiting", "paused") and d.files
                   and not str(d.files[0].path).startswith(prefix) for d in self.api.get_downloads())

    def close(self) -> None:
        """Forget the finished downloads' results (the daemon keeps them for a later run otherwise)."""
        self.api.client.purge_download_result()
