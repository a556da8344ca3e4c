"""Changing a serving fleet in batches: each batch written, restarted and checked ready before
the next; a node that fails is rolled back to its last known good state; the rollout stops
when a batch's failures pass ``max_fail_percentage`` (see ``noderig/rollout.py``).

How it fits pyinfra (one run, pyinfra's own scheduler, no second one):

* pyinfra loads the deploy file for every host at once (one greenlet per host) and only then
  executes. ``join`` is a barrier in that load: each target says whether its server serves and
  must restart (from its own facts), waits for the others, and every target then knows the
  same batch plan, before any operation of the service step exists.
* pyinfra executes operations in a DAG built from each host's own order, one operation on
  all its hosts at a time. Every node that takes part adds a *gate* operation per batch (the
  same operation for all, one per batch: ``host.loop`` gives each batch its own), and its own
  write, restart and readiness operations right after its own batch's gate. The gates tie
  the batches together: batch k+1's writes come after batch k's readiness on every node.
* Operation bodies run again at execution, so a gate sees, at run time, which nodes of the
  earlier batches failed; when they pass the threshold it fails its node as "not reached"
  (pyinfra then runs nothing more on it). pyinfra's ``--no-wait`` (each host on its own)
  would undo the ordering; ``--serial`` keeps it (one host at a time is a rollout of one).
"""

from __future__ import annotations

import hashlib
import traceback
from dataclasses import dataclass, field

from pyinfra import host, logger
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand

from noderig.checkpoint_plan import RECORD_FILE
from noderig.rollout import MAX_FAIL_SETTING, ROLLOUT_SETTING, parse_rollout, plan_batches, should_stop
from noderig.service_plan import RUNNING, marker, plan_service

from .facts import FileStates, HttpStatus, LinkTarget, Mtimes, UnitStatus
from .util import fail, first_pass, internal_error_sentence, one_at_a_time, operation

# The node's last known good server: the files it ran and the venv it ran from, kept when
# it was serving, before a rollout changed it (root only: the environment file holds secrets).
LAST_GOOD_DIR = "/var/lib/noderig/last-good"

# Runs on the node: keep what the running server runs as its last known good state, when it
# answers /health; otherwise keep the one recorded before. Arguments: the directory, the
# health URL, then label=path pairs (label "@...": where that symlink points, the venv's or a
# checkpoint's generation; "venv" is how records written before checkpoints had them say it).
SNAPSHOT_SCRIPT = r"""
d="$1"; url="$2"; shift 2
code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$url" || true)
if [ "$code" != 200 ]; then echo "not serving (health $code): the last known good state stays as it was"; exit 0; fi
rm -rf "$d.new" && install -d -m 700 "$d.new" || exit 1
for pair; do
  label=${pair%%=*}; path=${pair#*=}
  case $label in venv|@*)
    # a venv or checkpoint that is still a directory becomes <path>.noderig/adopted at its first switch
    if [ -L "$path" ]; then readlink -f "$path"; else echo "$path.noderig/adopted"; fi > "$d.new/$label" ;;
  *) cp -p "$path" "$d.new/$label" || exit 1 ;; esac
  echo "$pair" >> "$d.new/paths"
done
sync "$d.new" 2>/dev/null
if [ -d "$d" ]; then rm -rf "$d.old" && mv -T "$d" "$d.old"; fi
mv -T "$d.new" "$d" && rm -rf "$d.old"
"""

# Runs on the node: put the last known good files back (each renamed into place), point the
# venv and the checkpoints back, and restart the unit. Exit 4: there is no last known good
# state to go back to.
RESTORE_SCRIPT = r"""
d="$1"; unit="$2"
[ -f "$d/paths" ] || { echo "no last known good state on this node ($d)"; exit 4; }
while IFS= read -r pair; do
  label=${pair%%=*}; path=${pair#*=}
  case $label in venv|@*)
    if [ -L "$path" ] && [ -d "$(cat "$d/$label")" ]; then ln -sfn "$(cat "$d/$label")" "$path.noderig-tmp" && mv -T "$path.noderig-tmp" "$path" || exit 1; fi ;;
  *) cp -p "$d/$label" "$path.noderig-tmp" && mv -f "$path.noderig-tmp" "$path" || exit 1 ;; esac
done < "$d/paths"
systemctl daemon-reload && systemctl reset-failed "$unit" 2>/dev/null; systemctl restart "$unit"
"""


# Runs on the node, in the node's batch: stop the server, make the prepared generation (of
# the venv or of a checkpoint) live (the live path is a symlink to it, replaced with
# rename(2); one that is still a directory moves to <live>.noderig/adopted first, a rename on
# the same file system, checked before the server stops), and keep only it and the one it
# replaces (the rollback target). The server starts again from the next operation.
SWITCH_SCRIPT = r"""
live="$1"; new="$2"; unit="$3"; complete="$4"; root=$(dirname "$new")
[ -e "$new/$complete" ] || { echo "$new is not complete (no $complete)"; exit 1; }
if [ ! -L "$live" ] && [ -d "$live" ]; then
  if mountpoint -q "$live"; then echo "$live is a mount point: it cannot be moved aside into $root; mount its volume one level up"; exit 1; fi
  [ "$(stat -c %d "$live")" = "$(stat -c %d "$root")" ] || { echo "$live and $root are on different file systems"; exit 1; }
fi
systemctl stop "$unit" || exit 1
prev=$(readlink -f "$live")
if [ ! -L "$live" ] && [ -d "$live" ]; then
  rm -rf "$root/adopted" && mv -T "$live" "$root/adopted" || exit 1; prev="$root/adopted"
fi
ln -sfn "$new" "$live.noderig-tmp" && mv -T "$live.noderig-tmp" "$live" || exit 1
for g in "$root"/* "$root"/.[!.]*; do
  [ -e "$g" ] || continue; [ "$g" = "$new" ] || [ "$g" = "$prev" ] || rm -rf "$g"
done
"""


@dataclass
class Entry:
    """What one target told the barrier."""
    serving: bool
    restart: str | None  # why its server must restart, or None
    current: bool = True  # the running server started after its files were last written
    ready: dict | None = None  # the arguments of its readiness check (``operations.diagnosis.wait_until_serving``'s)
    snapshot: dict | None = None  # the arguments of its ``snapshot``
    venv_next: str | None = None  # a venv generation prepared beside the live one, to switch to


@dataclass
class Registry:
    """The rollout of one run, shared by every host's greenlet (kept on pyinfra's state)."""
    expected: set[str]
    entries: dict[str, Entry] = field(default_factory=dict)
    batches: list[list[str]] = field(default_factory=list)
    spec: tuple = ()
    max_fail: int = 0
    started: set[str] = field(default_factory=set)
    stopped: str | None = None
    outcomes: dict[str, str] = field(default_factory=dict)  # what the rollout did to a node, as it ran
    not_reached: set[str] = field(default_factory=set)  # failed by a gate: the rollout stopped before them
    event: object = None

    def batch_of(self, name: str) -> int | None:
        return next((k for k, names in enumerate(self.batches) if name in names), None)

    def untouched(self) -> list[str]:
        """The serving nodes a rollout left alone (nothing to restart); none without a rollout
        (no batches: no node's line says anything about one)."""
        if not self.batches:
            return []
        return [n for n, e in self.entries.items() if e.serving and not e.restart]


@dataclass(frozen=True)
class Position:
    """A node's place in the rollout: its batch (0-based) of ``count``."""
    batch: int
    count: int
    registry: Registry


def _registry(state) -> Registry:
    registry = getattr(state, "_noderig_rollout", None)
    if registry is None:
        from gevent.event import Event

        expected = {h.name for h in state.inventory.get_active_hosts() if "targets" in h.groups}
        registry = state._noderig_rollout = Registry(expected=expected, event=Event())
    return registry


def join(entry: Entry | None) -> Position | None:
    """Tell the other targets whether this node's server serves and must restart, wait until
    every target has, and return this node's place in the rollout (None: it takes no part).
    Every target calls this exactly once, taking part or not, or the others wait for it."""
    state = host.state
    registry = _registry(state)
    registry.entries[host.name] = entry or Entry(serving=False, restart=None)
    if state.pool.size is not None and state.pool.size < len(registry.expected):
        raise ValueError(f"a rollout needs every target loaded at once: --parallel {state.pool.size} is below the "
                         f"{len(registry.expected)} targets; leave --parallel out or raise it")
    if registry.expected <= set(registry.entries):
        _plan(registry, host.data)
        registry.event.set()
    else:
        registry.event.wait()
    k = registry.batch_of(host.name)
    return None if k is None else Position(k, len(registry.batches), registry)


def _plan(registry: Registry, data) -> None:
    """Cut the nodes that must restart into batches (inventory order) and say so, once."""
    registry.spec = parse_rollout(data.get(ROLLOUT_SETTING, "1,25%,100%"))
    registry.max_fail = data.get(MAX_FAIL_SETTING, 0)
    names = [n for n in sorted(registry.entries, key=_inventory_order) if registry.entries[n].restart]
    registry.batches = plan_batches(registry.spec, [n for n in names if registry.entries[n].serving])
    if not registry.batches:
        return
    untouched = registry.untouched()
    spec = ",".join(str(s) for s in registry.spec)
    lines = [f"--> noderig rollout: {sum(map(len, registry.batches))} serving node(s) must restart, in "
             f"{len(registry.batches)} batch(es) ({ROLLOUT_SETTING}={spec}, {MAX_FAIL_SETTING}={registry.max_fail}); "
             "each is written, restarted and checked ready before the next"]
    for k, batch in enumerate(registry.batches):
        lines += [f"    batch {k + 1}: {name}: restart ({registry.entries[name].restart})" for name in batch]
    lines += [f"    untouched: {', '.join(untouched)} (serving, nothing to restart)"] if untouched else []
    at_once = [n for n, e in registry.entries.items() if not e.serving and e.restart]
    lines += [f"    all at once, not serving yet: {', '.join(at_once)}"] if at_once else []
    for line in lines:
        logger.info(line)


def _inventory_order(name: str) -> int:
    names = [h.name for h in host.state.inventory]
    return names.index(name) if name in names else len(names)


def serving(settings, node=None) -> bool:
    """Whether a node's server serves now: its unit running and ``/health`` answering (asked
    once per run: the deploy file asks at the venv, checkpoint and service steps).

    + settings: the server settings (its service name and port)
    + node: the pyinfra host (default: this one; the fan-out asks about every target)
    """
    node = host if node is None else node
    key = (node.name, settings.service_name, settings.port)
    # (under the lock: another host's greenlet asks about this node too, the fan-out's and the
    # revision's decisions, and a fact read yields to it; without the lock it would read the
    # placeholder below as "serves nothing" and restart a serving node outside the rollout)
    with one_at_a_time("serving", *key):
        if key not in _serving:
            # (a read that raises leaves False: the step that asked first fails the host, and a
            # second asker does not fail it again)
            _serving[key] = False
            status = node.get_fact(UnitStatus, unit=f"{settings.service_name}.service")
            _serving[key] = (status.get("active") in RUNNING
                             and node.get_fact(HttpStatus, url=f"http://127.0.0.1:{settings.port}/health") == 200)
        return _serving[key]


_serving: dict[tuple, bool] = {}


@operation(is_idempotent=True)
def venv_switch(service: str, live: str, generation: str):
    """
    Make the venv generation prepared beside the live venv the live one, with the server
    stopped: the venv path is a symbolic link replaced atomically (rename(2)), so the path
    scripts and the unit name stays the same; the generation it replaces is kept as the
    rollback target, older ones are removed. The next operation starts the server.

    + service: the systemd service name
    + live: the venv path (the inventory's ``venv_path``)
    + generation: the prepared directory (``noderig.rollout.venv_generation``)
    """
    yield from _switched(service, live, generation, "bin/python")


@operation(is_idempotent=True)
def checkpoint_switch(service: str, live: str, generation: str):
    """
    Make the checkpoint revision prepared and verified beside the live one the live one, with
    the server stopped, as ``venv_switch`` does for a venv: ``model_dir`` (or ``draft_dir``) is
    a symbolic link replaced atomically, the revision it replaces is kept as the rollback
    target, older ones are removed. The next operation starts the server.

    + service: the systemd service name
    + live: the checkpoint directory (the inventory's ``model_dir`` or ``draft_dir``)
    + generation: the prepared directory (``noderig.rollout.checkpoint_generation``)
    """
    yield from _switched(service, live, generation, RECORD_FILE)


@operation(is_idempotent=True)
def server_stopped(service: str):
    """
    Stop the server for what must change under it in its batch (a checkpoint revision fetched
    in place); the service step's next operations start it again.

    + service: the systemd service name
    """
    status = host.get_fact(UnitStatus, unit=f"{service}.service")
    if status.get("active") not in RUNNING:
        host.noop(f"{service}.service is {status.get('active') or 'not running'}")
        return
    yield StringCommand("systemctl", "stop", QuoteString(f"{service}.service"))


def _switched(service: str, live: str, generation: str, complete: str):
    if host.get_fact(LinkTarget, path=live) == generation:
        host.noop(f"{live} is {generation} already")
        return
    yield StringCommand("sh", "-c", QuoteString(SWITCH_SCRIPT), "noderig-switch", QuoteString(live),
                        QuoteString(generation), QuoteString(f"{service}.service"), QuoteString(complete))


def restart_reason(settings, texts: dict[str, tuple[str, str, str]], changing: dict) -> Entry:
    """Whether this node's server serves now, and why it must restart (None: it need not).

    + settings: the server settings (its service name and port)
    + texts: label -> (path, text, mode) of the files the service step writes
    + changing: label -> this deploy's operations that change the rest (venv, checkpoint)
    """
    status = host.get_fact(UnitStatus, unit=f"{settings.service_name}.service")
    inputs = {label: path for label, (path, _, _) in texts.items()}
    inputs.update({"venv": marker("venv"), "checkpoint": marker("checkpoint")})
    files = host.get_fact(FileStates, paths=tuple(path for path, _, _ in texts.values()))
    now = [label for label, (path, text, mode) in texts.items()
           if files.get(path) != (hashlib.sha256(text.encode()).hexdigest(), mode)]
    now += [label for label, ops in changing.items() if any(op is not None and _changes(op) for op in ops)]
    mtimes = host.get_fact(Mtimes, paths=tuple(inputs.values()))
    plan = plan_service(status, mtimes, inputs, now)
    # (the files the snapshot copies; the change markers are touched before any batch, by the
    # venv and checkpoint steps, and the venv the server runs is what its link points at)
    current = status.get("started") is not None and all(mtimes.get(path, 0.0) <= status["started"]
                                                        for path, _, _ in texts.values())
    return Entry(serving=serving(settings), restart=plan.reason if plan.action != "none" else None,
                 current=current)


def _changes(op) -> bool:
    return op.did_change() if op.is_complete() else op.will_change


def positions(position: Position | None):
    """Where the service step's writes and restart go: once, in place, for a node that takes
    no part; for one that does, inside its own batch, after the gates of every earlier batch
    and followed by the readiness check with rollback (iterate and add the operations in the
    loop body). Yields a label for operation names ("" outside a rollout)."""
    if position is None:
        yield ""
        return
    for k in host.loop(range(position.count)):
        gate(name=f"Rollout batch {k + 1} of {position.count}", batch=k, position=position)
        if k != position.batch:
            continue
        entry = position.registry.entries[host.name]
        snapshot(name=f"Last known good state kept (batch {k + 1})", **entry.snapshot,
                 running_current=entry.current)
        yield f" (batch {k + 1})"
        ready_or_roll_back(name=f"Ready, or rolled back (batch {k + 1})", batch=k, position=position,
                           ready=entry.ready)


@operation(is_idempotent=True)
def gate(batch: int, position: Position):
    """
    The start of a rollout batch: this node goes on when it is in the batch and the earlier
    batches' failures stayed within ``max_fail_percentage``; otherwise it is not reached
    (failed, nothing run on it). A node of another batch passes.

    + batch: the batch this gate opens (0-based)
    + position: this node's place in the rollout
    """
    registry = position.registry
    if batch != position.batch:
        host.noop(f"not in batch {batch + 1}")
        return
    if host.state.is_executing:
        _check_stop(registry, batch)
        if registry.stopped:
            registry.outcomes[host.name] = f"NOT REACHED in rollout batch {batch + 1} of {position.count}"
            registry.not_reached.add(host.name)
            yield from fail(host, f"the rollout stopped {registry.stopped}; this node's server was not touched")
            return
        registry.started.add(host.name)
    host.noop(f"batch {batch + 1} of {position.count}: {', '.join(registry.batches[batch])}")


def _check_stop(registry: Registry, batch: int) -> None:
    """Stop the rollout when a batch before ``batch`` failed past the threshold: of the nodes it
    started (one that failed at an earlier step is not in it, as Ansible drops a failed host
    from the play's next batches)."""
    if registry.stopped:
        return
    failed_names = {h.name for h in host.state.failed_hosts}
    for j in range(batch):
        started = [n for n in registry.batches[j] if n in registry.started]
        failed = [n for n in started if n in failed_names]
        why = should_stop(len(failed), len(started), registry.max_fail)
        if why:
            registry.stopped = f"after batch {j + 1} ({', '.join(failed)}): {why}"
            return


@operation(is_idempotent=True)
def snapshot(service: str, port: int, files: dict[str, str], links: dict[str, str] | None = None,
             running_current: bool = True):
    """
    Keep what the running server runs (unit, environment file, launcher, the venv and the
    checkpoint revisions it points at) on the node as its last known good state, before this
    batch changes any of it; only while it answers ``/health``. A server that does not run its
    files (a killed deploy wrote newer ones) keeps the state recorded before.

    + service: the systemd service name
    + port: the server's port (for ``/health``)
    + files: label -> path of the files the server runs
    + links: label -> path of the venv and checkpoint directories (each a symlink to its
      generation, or a directory that becomes ``<path>.noderig/adopted`` at its first switch)
    + running_current: the running process started after its files were last written
    """
    if not running_current:
        host.noop(f"{service}: its files changed since it started; the last known good state recorded before stays")
        return
    pairs = [f"{label}={path}" for label, path in files.items()]
    pairs += [f"@{label}={path}" for label, path in (links or {}).items() if path]
    yield StringCommand("sh", "-c", QuoteString(SNAPSHOT_SCRIPT), "noderig-snapshot", QuoteString(LAST_GOOD_DIR),
                        QuoteString(f"http://127.0.0.1:{port}/health"), *(QuoteString(p) for p in pairs))


@operation()
def ready_or_roll_back(batch: int, position: Position, ready: dict):
    """
    The end of this node's batch: wait until its server is ready and answers the smoke
    request; when it does not, print the diagnosis, roll it back to its last known good
    state, restart it and check it serves again. A rolled-back node fails (the run's exit
    status says so) and counts against ``max_fail_percentage``.

    + batch: this node's batch (0-based)
    + position: its place in the rollout
    + ready: the readiness check's arguments (``operations.diagnosis.wait_until_serving``'s)
    """
    yield FunctionCommand(_ready_or_roll_back, (batch, position, ready), {})


def _ready_or_roll_back(state, host, batch: int, position: Position, ready: dict) -> bool:
    registry, where = position.registry, f"batch {batch + 1} of {position.count}"
    args = (ready["service"], ready["port"], ready["served_model_name"], ready["timeout"], ready["api_key_file"],
            ready["settings"], ready["repair"], ready["max_repairs"], ready["firewall"])
    if _ready(state, host, *args):
        registry.outcomes[host.name] = f"changed in rollout {where}"
        return True
    unit = f"{ready['service']}.service"
    # (the rollback's own lines are warnings: the summary's reason for this node stays the
    # readiness failure above, and its outcome says what the rollback gave)
    host.log_styled(f"{unit} failed readiness in rollout {where}: rolling back to its last known good state",
                    fg="red", log_func=logger.warning)
    try:
        ok, out = host.run_shell_command(StringCommand("sh", "-c", QuoteString(RESTORE_SCRIPT), "noderig-restore",
                                                       QuoteString(LAST_GOOD_DIR), QuoteString(unit)))
        said = " ".join(out.stdout_lines + out.stderr_lines)
    except Exception as error:  # noqa: BLE001 - the node lost on the way back: it is not rolled back
        ok, said = False, f"{type(error).__name__}: {error}"
    if not ok:
        registry.outcomes[host.name] = f"NOT ROLLED BACK in rollout {where}"
        host.log_styled(f"rollback impossible: {said[-300:]}", fg="red", log_func=logger.error)
        return False
    # (checked on the port of this deploy's settings: a rollout that moves the port checks the new one)
    serving = _ready(state, host, ready["service"], ready["port"], ready["served_model_name"], ready["timeout"],
                     ready["api_key_file"], None, False, 0, None)
    registry.outcomes[host.name] = (f"ROLLED BACK in rollout {where}, serving its last known good state again"
                                    if serving else f"ROLLED BACK in rollout {where}, and NOT serving after it")
    host.log_styled(f"rolled back: {registry.outcomes[host.name]}", fg="red", log_func=logger.warning)
    return False


def _ready(state, host, *args) -> bool:
    """The readiness check (``operations.diagnosis._launch_until_ready``); one that raises (a bug,
    the connection lost while it waited) is a node that is not ready, said as the error it is:
    its batch still rolls it back and counts it failed."""
    from . import diagnosis

    try:
        return diagnosis._launch_until_ready(state, host, *args)
    except Exception as error:  # noqa: BLE001 - a node whose check broke is not ready
        logger.debug(f"[{host.name}] readiness check:\n{traceback.format_exc()}")
        host.log_styled(internal_error_sentence(error), fg="red", log_func=logger.error)
        return False
