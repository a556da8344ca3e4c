"""What the Hub counts for the tests (``GET /_lab/stats``): requests, statuses and bytes by kind,
per-file requests, ranges and concurrency, connections, faults applied, CDN refusals."""

from __future__ import annotations

import socket
import threading
from collections import Counter, defaultdict


class Counters:
    """Counters since start or the last `clear`, and gauges (open files and connections) that
    a clear keeps. Every method takes ``lock``, the Hub's own, except `clear`, whose caller
    holds it."""

    def __init__(self, lock: threading.Lock):
        self.lock = lock
        self.active = {"files": Counter(), "connections": Counter()}
        self.open_connections: set[socket.socket] = set()  # what stopping the Hub shuts down
        self.clear()

    def clear(self) -> None:
        self.sections = {
            "requests_by_kind": Counter(), "requests_by_path": Counter(), "status_by_kind": defaultdict(Counter),
            "bytes_by_kind": Counter(), "faults_applied": Counter(), "cdn": Counter(),
            "files": defaultdict(Counter), "connections": defaultdict(Counter),
        }

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
            c = self.sections
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
                "files": {name: {**cnt, "active": self.active["files"][name]} for name, cnt in c["files"].items()},
                "connections": {kind: {**cnt, "active": self.active["connections"][kind]}
                                for kind, cnt in c["connections"].items()},
                "faults_applied": dict(c["faults_applied"]),
                "cdn": dict(c["cdn"]),
            }

    def count(self, section: str, key, n: int = 1) -> None:
        with self.lock:
            self.sections[section][key] += n

    def count_status(self, kind: str, code: int) -> None:
        with self.lock:
            self.sections["status_by_kind"][kind][code] += 1

    def file_begin(self, key: str, ranged: bool) -> None:
        with self.lock:
            f = self.sections["files"][key]
            f["requests"] += 1
            f["range_requests"] += int(ranged)
            self.active["files"][key] += 1
            f["max_concurrent"] = max(f["max_concurrent"], self.active["files"][key])

    def file_end(self, key: str, sent: int, dropped: bool) -> None:
        with self.lock:
            f = self.sections["files"][key]
            self.active["files"][key] -= 1
            f["bytes"] += sent
            f["dropped"] += int(dropped)

    def connection(self, kind: str, conn: socket.socket, opened: bool) -> None:
        with self.lock:
            c = self.sections["connections"][kind]
            if opened:
                self.open_connections.add(conn)
                self.active["connections"][kind] += 1
                c["total"] += 1
                c["max_active"] = max(c["max_active"], self.active["connections"][kind])
            else:
                self.open_connections.discard(conn)
                self.active["connections"][kind] -= 1
