"""``/_lab/...``: the test controls on the Hub port (faults, reset, stats, rescan); never counted."""

from __future__ import annotations

import json

from .http import RequestPlumbing


class LabControl(RequestPlumbing):
    def _lab(self, segments: list[str], body: bytes) -> None:
        action = segments[1] if len(segments) > 1 else ""
        if (self.command, action) == ("GET", "stats"):
            return self._json(200, self.hub.counters.stats())
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
