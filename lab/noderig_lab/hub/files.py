"""File bytes: ``/resolve/`` on the Hub port (a 302 to a signed CDN URL for LFS files, as the
real Hub; the bytes themselves for small files and in mirror mode) and the CDN port behind
signed, expiring URLs. Both serve HTTP Range (one range; ``no_range`` turns it off) and apply
the body faults: a dropped connection, a stall, a rate limit."""

from __future__ import annotations

import os
import re
import select
import socket
import time
from urllib.parse import quote, urlsplit

from .auth import HubAuth
from .http import split_repo
from .repos import MiB, FileEntry


class FileRoutes(HubAuth):
    def _resolve(self, segments: list[str]) -> None:
        repo_id, rest = split_repo(segments)
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
            host = request_host(self.headers.get("Host")) or urlsplit(self.hub.url).hostname
            location = self.hub.sign_url(self.hub.public_host or host, repo.repo_id, entry)
            headers.update({"Location": location, "X-Linked-Size": str(entry.size),
                            "X-Linked-Etag": f'"{entry.sha256}"', "ETag": f'"{entry.sha256}"'})
            return self._send(302, f"Found. Redirecting to {location}".encode(), headers,
                              "text/plain; charset=utf-8")
        headers["ETag"] = f'"{entry.git_sha1}"'
        self._serve_file(repo.repo_id, entry, headers)

    def _cdn(self, segments: list[str]) -> None:
        if self.headers.get("Authorization"):
            self.hub.counters.count("cdn", "authorization_headers")
            if self.hub.reject_cdn_auth:
                self._error(400, "InvalidArgument: Only one auth mechanism allowed; only the X-Amz-Algorithm "
                                 "query parameter, Signature query string parameter or the Authorization header "
                                 "should be specified")
        if self.command not in ("GET", "HEAD") or len(segments) != 4 or segments[0] != "repos":
            self._error(404, "NoSuchKey")
        repo_id, sha256 = f"{segments[1]}/{segments[2]}", segments[3]
        problem = self.hub.check_signature(repo_id, sha256, self.query)
        if problem:
            self.hub.counters.count("cdn", "expired" if "expired" in problem else "bad_signature")
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

    def _serve_file(self, repo_id: str, entry: FileEntry, headers: dict,
                    content_type: str = "text/plain; charset=utf-8") -> None:
        size = entry.size
        range_header = None if self.hub.switches["no_range"] else self.headers.get("Range")
        if self.hub.switches["no_range"]:
            headers = {k: v for k, v in headers.items() if k != "Accept-Ranges"}
        start, end = 0, size - 1
        status = 200
        if range_header:
            parsed = parse_range(range_header, size)
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
        self._send_body(f"{repo_id}/{entry.path}", entry, start, length, ranged=range_header is not None)

    def _send_body(self, target: str, entry: FileEntry, start: int, length: int, ranged: bool) -> None:
        """``length`` bytes of the file from ``start``, with the body faults that apply to ``target``."""
        drop = self.hub.take_fault("drop_after_bytes", self.kind, target, length)
        stall = self.hub.take_fault("stall_seconds", self.kind, target)
        rate = self.hub.take_fault("rate_limit_bps", self.kind, target)
        self.hub.counters.file_begin(target, ranged)
        progress = [0]  # bytes sent so far, also when the client hangs up mid-body
        dropped = False
        try:
            with open(entry.abspath, "rb") as f:
                if drop or stall or rate or self.hub.switches.get("uplink_bps"):
                    dropped = self._copy_with_faults(f, start, length, drop, stall, rate, progress)
                else:
                    self._sendfile_counted(f, start, length, progress)
        finally:
            self.hub.counters.file_end(target, progress[0], dropped)
            self.hub.counters.count("bytes_by_kind", self.kind, progress[0])
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
        slowest = min(bps or uplink, uplink or bps)
        chunk = max(1024, min(256 * 1024, int(slowest / 20))) if slowest else 256 * 1024
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


def parse_range(header: str, size: int):
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


def request_host(host_header: str | None) -> str | None:
    """The host of a Host header, without its port."""
    if not host_header:
        return None
    if host_header.startswith("["):  # [ipv6]:port
        return host_header.split("]")[0] + "]"
    return host_header.rsplit(":", 1)[0] if ":" in host_header else host_header
