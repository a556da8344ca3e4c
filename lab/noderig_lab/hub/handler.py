"""One request on either port: which kind it is (api, resolve, cdn, or the /_lab controls),
the counters and the injected ``status`` fault every counted request passes, then the route."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from .api import ApiRoutes
from .control import LabControl
from .files import FileRoutes
from .http import Abort, split_repo


class Handler(ApiRoutes, FileRoutes, LabControl):
    def do_GET(self):
        self._dispatch()

    def do_HEAD(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self.query = parse_qs(split.query)
        segments = [unquote(s) for s in split.path.split("/")[1:]]
        self.kind = self._kind_of(segments)
        body = self._read_body()
        if self.kind != "lab":
            self.hub.counters.count("requests_by_kind", self.kind)
            self.hub.counters.count("requests_by_path", f"{self.command} {split.path}")
        try:
            if self.kind == "lab":
                return self._lab(segments, body)
            fault = self.hub.take_fault("status", self.kind, self._target(segments))
            if fault:
                code = int(fault["code"])
                self._error(code, f"lab fault: injected HTTP {code}", headers={"Retry-After": "0"})
            if self.kind == "cdn":
                return self._cdn(segments)
            if self.kind == "resolve":
                return self._resolve(segments)
            return self._api(segments, body)
        except Abort:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _kind_of(self, segments: list[str]) -> str:
        if self.server.kind == "cdn":
            return "cdn"
        if segments[:1] == ["_lab"]:
            return "lab"
        if split_repo(segments)[1][:1] == ["resolve"]:
            return "resolve"
        return "api"

    def _target(self, segments: list[str]) -> str:
        """What `match` in a fault is compared with: org/name/path for files, else the URL path."""
        if self.kind == "resolve":
            repo, rest = split_repo(segments)
            return f"{repo}/{'/'.join(rest[2:])}"
        if self.kind == "cdn" and len(segments) >= 4:
            repo = self.hub.repos.get(f"{segments[1]}/{segments[2]}")
            entry = repo.by_sha256.get(segments[3]) if repo else None
            if entry:
                return f"{repo.repo_id}/{entry.path}"
        return "/" + "/".join(segments)
