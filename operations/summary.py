"""The end of a run, per host: whether it failed (at which operation, and why), what changed
(or, in a dry run, would change), how many commands ran on it, and how long the run took.

pyinfra prints a table of operations; with several nodes the question is "which host failed,
why, and did the others finish", and for a rerun "how much did it cost". ``track(host)``
(called from the deploy file, once per host) counts every command, upload and download that
goes through the host's connector and collects the errors logged for it; the summary prints
when pyinfra disconnects, after its own results.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field

from pyinfra import logger
from pyinfra.api.state import BaseStateCallback, StateStage

from noderig.errors import one_line

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PREFIX = re.compile(r"^\s*\[([^\]]+)\]\s*(?:nested\s+)?")
# pyinfra's own line after a failed operation says only how many commands ran.
GENERIC = re.compile(r"^Error(: executed \d+ commands.*)?$|^Error \(ignored")


@dataclass
class HostTally:
    commands: int = 0
    command_seconds: float = 0.0
    changed: list[str] = field(default_factory=list)
    unchanged: int = 0
    failed_op: str | None = None
    errors: list[str] = field(default_factory=list)

    def reason(self) -> str:
        """The last error that says more than pyinfra's count, as one line (an error may quote a
        server's or a command's words: their line breaks and control characters never break the
        summary or reach the terminal raw)."""
        specific = [e for e in self.errors if not GENERIC.match(e)]
        return one_line(specific[-1], 2000) if specific else "see the errors above"


# Run-wide lines an operation adds for the summary (the fan-out's sources, a peer it stopped
# using), printed under the host lines in the order they came.
NOTES: list[str] = []


def note(text: str) -> None:
    """A line for the end-of-run summary (once per text)."""
    if text not in NOTES:
        NOTES.append(text)


def summary_lines(tallies: dict[str, HostTally], failed: set[str], executed: bool, wall: float,
                  planned: dict[str, list[str]] | None = None, outcomes: dict[str, str] | None = None,
                  notes: list[str] = (), not_reached: set[str] = frozenset()) -> list[str]:
    """The summary, one line per host, then the run's notes (pure: what ``RunSummary`` prints).

    A failed host's line always starts with ``FAILED at "<operation>"`` (``FAILED`` alone for
    an internal stop); ``outcomes`` (a node's part in a rollout: "changed in rollout batch 1 of
    3", "ROLLED BACK ...", "untouched ...") follows that prefix on a failed node's line and what
    changed on another's. A node in ``not_reached`` (a subset of ``failed``: a rollout stopped
    before its batch, so it did not fail on its own) starts with its outcome, "NOT REACHED ...",
    and the head counts it apart from the failed ones; no such line ever reads ok."""
    outcomes = outcomes or {}
    bad = sorted(set(failed) - set(not_reached))
    skipped = sorted(set(failed) & set(not_reached))
    head = (f"--> noderig: {len(tallies)} host(s), {len(bad)} failed{' (' + ', '.join(bad) + ')' if bad else ''}"
            + (f", {len(skipped)} not reached ({', '.join(skipped)})" if skipped else "") + f", {wall:.1f} s"
            + ("" if executed else "; dry run, nothing was changed"))
    width = max((len(n) for n in tallies), default=0)
    lines = [head]
    for name, t in sorted(tallies.items()):
        cost = f"{t.commands} commands ({t.command_seconds:.1f} s on the host)"
        part = f"{outcomes[name]}: " if name in outcomes else ""
        if name in skipped:
            lines.append(f"{name:<{width}}  {part or 'NOT REACHED: '}{t.reason()}; {cost}")
        elif name in failed:
            where = f' at "{t.failed_op}"' if t.failed_op else ""
            lines.append(f"{name:<{width}}  FAILED{where}: {part}{t.reason()}; {cost}")
        elif executed:
            if t.changed:
                what = f"changed {len(t.changed)} of {len(t.changed) + t.unchanged} operations: {', '.join(t.changed)}"
            else:
                what = f"no changes ({t.unchanged} operations)" if t.unchanged else "no operations of its own"
            part = f"; {outcomes[name]}" if name in outcomes else ""
            lines.append(f"{name:<{width}}  ok, {what}{part}; {cost}")
        elif t.errors:
            lines.append(f"{name:<{width}}  would FAIL: {t.reason()}; {cost}")
        else:
            would = (planned or {}).get(name, [])
            what = f"would change {len(would)}: {', '.join(would)}" if would else "no changes"
            lines.append(f"{name:<{width}}  {what}; {cost}")
    return lines + [f"    {n}" for n in notes]


# pyinfra's CLI logs one of these once every operation body has run on every host (the
# prepare stage finished); a run that reaches its disconnect without one stopped on an error.
PREPARED = ("--> Detected changes", "--> Skipping change detection")
NEVER_CONNECTED = ("could not connect (pyinfra's line above says why); nothing ran on it: check that it is up and "
                   "that its SSH address, port and user in the inventory are right, then rerun")
INTERRUPTED = ("the run stopped on an internal error before this host finished (see the error above); "
               "rerun with --debug for the traceback")


class _ErrorLog(logging.Handler):
    def __init__(self, summary: RunSummary):
        super().__init__(logging.INFO)
        self.summary = summary

    def emit(self, record):
        text = ANSI.sub("", record.getMessage()).strip()
        if text.startswith(PREPARED):
            self.summary.prepared = True
            return
        if record.levelno < logging.WARNING:
            return
        match = PREFIX.match(text)
        if not match or match.group(1) not in self.summary.tallies:
            return
        message = text[match.end():].strip()
        if record.levelno >= logging.ERROR or message.startswith("would fail:"):
            self.summary.tallies[match.group(1)].errors.append(message.removeprefix("would fail: "))


class RunSummary(BaseStateCallback):
    def __init__(self):
        self.tallies: dict[str, HostTally] = {}
        self.started = _process_start()
        self.printed = False
        self.prepared = False
        self.succeeded: list = []
        logger.addHandler(_ErrorLog(self))

    def track(self, host) -> None:
        if host.name in self.tallies:
            return
        tally = self.tallies[host.name] = HostTally()
        connector = host.connector
        for method in ("run_shell_command", "put_file", "get_file", "rsync"):
            inner = getattr(connector, method, None)
            if inner is not None:
                setattr(connector, method, _counted(inner, tally))

    # pyinfra's callbacks (called as handler.method(state, ...))
    def operation_host_success(self, state, host, op_hash, retry_count=0):
        # Called before pyinfra records the outcome: whether it changed anything is read at
        # the end, in ``host_disconnect``.
        if host.name in self.tallies:
            self.succeeded.append((host, op_hash))

    def operation_host_error(self, state, host, op_hash, retry_attempt=0, max_retries=0):
        tally = self.tallies.get(host.name)
        if tally is not None and tally.failed_op is None:
            tally.failed_op = _op_name(state, op_hash)

    def host_disconnect(self, state, host):
        if self.printed or state.current_stage < StateStage.Prepare:
            return
        self.printed = True
        for h, op_hash in self.succeeded:
            tally = self.tallies[h.name]
            if state.get_op_data_for_host(h, op_hash).operation_meta.did_change():
                tally.changed.append(_op_name(state, op_hash))
            else:
                tally.unchanged += 1
        executed = state.current_stage >= StateStage.Execute
        # (a host that failed to connect never loaded the deploy file: it has no tally yet)
        for h in state.failed_hosts:
            if h.name not in self.tallies:
                self.tallies[h.name] = HostTally(errors=[NEVER_CONNECTED])
        failed = {h.name for h in state.failed_hosts if h.name in self.tallies}
        # Normal ends: after the results (Disconnect), or a dry run after its prepare stage.
        # Anything else is an exception that ended the run: no host it left is ok.
        if state.current_stage == StateStage.Execute or not (executed or self.prepared):
            for name, tally in self.tallies.items():
                if name not in failed:
                    failed.add(name)
                    tally.errors.append(INTERRUPTED)
        planned = {}
        if not executed:
            for h in state.inventory:
                if h.name in self.tallies:
                    planned[h.name] = [_op_name(state, op_hash) for op_hash in state.get_op_order()
                                       if op_hash in state.ops[h]
                                       and state.get_op_data_for_host(h, op_hash).operation_meta._maybe_is_change]
        outcomes, not_reached = _rollout_parts(getattr(state, "_noderig_rollout", None), failed, executed)
        for line in summary_lines(self.tallies, failed, executed, time.monotonic() - self.started, planned,
                                  outcomes, NOTES, not_reached):
            logger.info(line)


def _rollout_parts(rollout, failed: set[str], executed: bool) -> tuple[dict[str, str], set[str]]:
    """Each node's part in this run's rollout (``operations.rollout.Registry``) and the nodes it
    did not reach; nothing without a rollout or in a dry run. "untouched" is the plan's word for
    a serving node with nothing to restart, said only of a node that then did not fail."""
    if rollout is None or not executed:
        return {}, set()
    untouched = {name: "untouched in the rollout (serving, nothing to restart)"
                 for name in rollout.untouched() if name not in failed}
    return {**untouched, **rollout.outcomes}, set(rollout.not_reached)


def _op_name(state, op_hash) -> str:
    return ", ".join(sorted(state.get_op_meta(op_hash).names)) or op_hash


def _counted(inner, tally: HostTally):
    def wrapper(*args, **kwargs):
        tally.commands += 1
        began = time.monotonic()
        try:
            return inner(*args, **kwargs)
        finally:
            tally.command_seconds += time.monotonic() - began
    return wrapper


def _process_start() -> float:
    """When this controller process started, on the monotonic clock (the whole run's wall
    time, connecting included); where /proc is missing, now."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return ticks / os.sysconf("SC_CLK_TCK")  # since boot, as CLOCK_MONOTONIC (bar suspend)
    except (OSError, ValueError, IndexError):
        return time.monotonic()


def track(host) -> None:
    """Count this host's commands and report it in the run's summary."""
    state = host.state
    summary = getattr(state, "_noderig_summary", None)
    if summary is None:
        summary = state._noderig_summary = RunSummary()
        state.add_callback_handler(summary)
    summary.track(host)
