"""What the service needs (start, restart or nothing, and why), decided from facts.

A restart cannot hang on "did an earlier operation change something in this run": a deploy
killed between writing the unit and restarting the server would leave the old server running
and the rerun would see nothing left to change. So the decision also compares the time the
server's main process started with the modification times of everything it runs: the unit,
its environment file, the launcher, and the markers the venv and checkpoint steps touch
before they change a byte. Anything newer than the running process means a restart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

# Touched by a step before it changes what the server runs (see ``marker``).
CHANGES_DIR = "/var/lib/noderig/changes"
RUNNING = ("active", "activating", "reloading")


def marker(what: str) -> str:
    """The path a step touches before it changes ``what`` (``venv``, ``checkpoint``)."""
    return f"{CHANGES_DIR}/{what}"


@dataclass(frozen=True)
class ServicePlan:
    action: str  # "start", "restart" or "none"
    reason: str
    reload: bool  # systemd must re-read the unit first
    enable: bool  # not enabled at boot yet

    @property
    def changes(self) -> bool:
        return self.action != "none" or self.reload or self.enable


def plan_service(status: dict, mtimes: dict[str, float], inputs: dict[str, str], changing: list[str]) -> ServicePlan:
    """
    + status: the UnitStatus fact (``active``, ``enabled``, ``need_reload``, ``started``)
    + mtimes: the Mtimes fact for the paths in ``inputs``
    + inputs: what the server runs, label -> path on the node (``{"unit": "/etc/...", ...}``)
    + changing: labels of inputs this run changes (or, in a dry run, would change)
    """
    reload = bool(status.get("need_reload")) or "unit" in changing
    enable = status.get("enabled") not in ("enabled", "enabled-runtime", "static")
    started = status.get("started")
    if status.get("active") not in RUNNING:
        state = status.get("active") or "unknown"
        return ServicePlan("start", f"it is {state}", reload, enable)
    if started is None:
        return ServicePlan("restart", "its start time is unknown", reload, enable)
    newer = [label for label, path in inputs.items() if mtimes.get(path, 0.0) > started]
    stale = list(dict.fromkeys([*changing, *newer]))
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started))
    if stale:
        return ServicePlan("restart", f"the {_join(stale)} changed since it started at {since} UTC", reload, enable)
    return ServicePlan("none", f"running since {since} UTC with the current {_join(list(inputs))}", reload, enable)


def _join(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
