"""What every Hub response shares: HTTP/1.1 keep-alive, counting (status codes, bytes,
connections) and the JSON error answer of the real Hub. The routes are mixins beside this
module; `handler.Handler` puts them together."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .server import HubServer, LabHub


class Abort(Exception):
    """The response is complete (or deliberately broken); stop handling this request."""


def split_repo(segments: list[str]) -> tuple[str, list[str]]:
    """(repo id, the rest) of a URL path's segments: ``org/name/...``, or ``datasets|spaces/...``."""
    if segments and segments[0] in ("datasets", "spaces"):
        return f"{segments[0]}:{'/'.join(segments[1:3])}", segments[3:]
    return "/".join(segments[:2]), segments[2:]


class RequestPlumbing(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "noderig-lab-hub/1"
    timeout = 60  # idle keep-alive connections close after this
    server: HubServer
    kind: str  # "api", "resolve", "cdn" or "lab" (the /_lab controls, not counted), set per request
    query: dict[str, list[str]]

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def setup(self):
        super().setup()
        self.server.hub.counters.connection(self.server.kind, self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.hub.counters.connection(self.server.kind, self.connection, False)

    @property
    def hub(self) -> LabHub:
        return self.server.hub

    def send_response(self, code, message=None):
        super().send_response(code, message)
        kind = getattr(self, "kind", self.server.kind)  # unset when the request line itself was bad
        if kind != "lab":
            self.hub.counters.count_status(kind, code)

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
                self.hub.counters.count("bytes_by_kind", self.kind, len(body))

    def _json(self, code: int, obj, headers: dict | None = None) -> None:
        self._send(code, json.dumps(obj).encode(), headers)

    def _error(self, code: int, message: str, error_code: str | None = None, headers: dict | None = None):
        h = dict(headers or {})
        if error_code:
            h["X-Error-Code"] = error_code
        h["X-Error-Message"] = message
        self._json(code, {"error": message}, h)
        raise Abort

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _flag(self, name: str) -> bool:
        return (self.query.get(name) or ["false"])[-1].lower() in ("1", "true")
