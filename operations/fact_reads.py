"""A fact read once per run while nothing changes it: what makes a converged node's rerun cheap.

pyinfra 3 keeps no fact: every ``host.get_fact`` runs its command again, one round trip each.
A rerun reads the same facts several times: the deploy file's decisions at load (the rollout,
the fan-out's plan, which reads every target's), then preflight, then the operation that owns
them. ``remember(host)`` (once per run, from the deploy file) makes ``get_fact`` on every host
of the inventory answer a second read with the same arguments from the first, until something
may have changed it:

- any command that is not a fact read, on any host (an operation's command, an upload, an
  rsync), forgets every fact of every host: a command on one host changes another (the
  reference pushes the venv to a target; peers serve files);
- the operation run that follows a change-detection pass (pyinfra's prompt, or ``--dry``:
  time passes) reads everything afresh; with ``-y`` the run follows the load at once;
- ``VOLATILE`` facts (whether the server runs and answers: that changes on its own) are kept
  while the deploy file plans (pyinfra's load, and its change detection), so that every plan
  sees one state; in the operation run a kept answer stands only while it is younger than
  ``FRESH_SECONDS`` (and nothing ran since), else it is read afresh, as readiness and the
  service's restart act on what runs now. An answer a second old is as good as one read now
  (the server could as well stop the moment after either); a converged rerun so reads the
  server's state once per host, not once per operation that asks.

A read that failed (its host failed) or raised is not kept: a second read fails again as
before. Each answer is a copy: a caller may change what it got. A wait loop (a function an
operation yields) polls with a command of its own, never with a fact: with nothing run in
between, a kept fact would answer the same forever, and a ``VOLATILE`` one for ``FRESH_SECONDS``.

The first reads are one round trip: the facts a host's last run read (kept on the controller,
``fact-reads/`` in noderig's cache) are read at once when the run starts (``operations.facts.
Facts``), each cut out and processed by its own fact; a read is then answered from that, as
a second read would be. What the deploy no longer reads costs only its share of that one
command; what it reads anew is read as before, and kept for the next run. A fact whose
command failed there is read again on its own, and fails as it would have.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import secrets
import time

import gevent
from gevent import getcurrent
from pyinfra import logger
from pyinfra.api.state import BaseStateCallback

from operations.facts import FACT_MODULES, Facts, HttpStatus, UnitStatus, fact_class
from operations.util import controller_cache

VOLATILE = frozenset({UnitStatus, HttpStatus})
# How long a VOLATILE answer stands in the operation run: long enough for a converged rerun's
# load and run (about a second on the lab), short beside any wait (a rollout batch, readiness).
FRESH_SECONDS = 5.0
# The connector's methods that act on a host (get_file too: a download may run commands).
ACTIONS = ("run_shell_command", "put_file", "get_file", "rsync")
# At most this many facts are kept per host for the next run's first round trip.
MOST_KEPT = 200


class FactReads:
    """The facts read on every host of one run (held by pyinfra's state)."""

    def __init__(self, state):
        self.state = state
        self.values: dict = {}
        self.read_at: dict = {}  # key -> when its kept value was read (monotonic seconds)
        self.clock = time.monotonic
        self.phase = self._phase()
        self.reading: set[int] = set()  # the greenlets inside a fact read now
        self.generation = 0  # forget() counts: a read another host's command overlapped is not kept
        self.asked: dict[str, dict] = {}  # host -> the facts it read this run, to read at once next run
        self.inner: dict = {}  # host -> pyinfra's own get_fact
        self.pending: dict = {}  # host -> the greenlet reading its last run's facts

    def _phase(self) -> bool:
        """True for an operation run after a change-detection pass (time passed since load)."""
        return bool(self.state.is_executing and self.state.should_check_for_changes())

    def forget(self) -> None:
        self.values.clear()
        self.read_at.clear()
        self.generation += 1

    def read(self, host, inner, cls, args, kwargs):
        phase = self._phase()
        if phase != self.phase:
            self.phase = phase
            self.forget()
        if not isinstance(cls, type):
            return self._run(inner, cls, args, kwargs)
        pending = self.pending.get(host.name)
        if pending is not None and pending is not getcurrent():
            pending.join()
        key = (host.name, cls, args, tuple(sorted(kwargs.items())))
        try:
            if key in self.values and not _changes_on_its_own(cls, self.values[key]) and self._fresh(cls, key):
                self._asked(host, key, cls, args, kwargs)
                return _copy(self.values[key])
        except TypeError:  # an argument that cannot be a key (a list): read, never kept
            return self._run(inner, cls, args, kwargs)
        generation = self.generation
        value = self._run(inner, cls, args, kwargs)
        if generation == self.generation and host not in self.state.failed_hosts and not _changes_on_its_own(cls, value):
            self._keep(key, _copy(value))
        self._asked(host, key, cls, args, kwargs)
        return value

    def _keep(self, key, value) -> None:
        self.values[key] = value
        self.read_at[key] = self.clock()

    def _fresh(self, cls, key) -> bool:
        """Whether a kept answer still stands: always while the deploy file plans; for a
        ``VOLATILE`` fact in the operation run, while it is younger than ``FRESH_SECONDS``."""
        if cls not in VOLATILE or not self.state.is_executing:
            return True
        return self.clock() - self.read_at.get(key, float("-inf")) < FRESH_SECONDS

    def _asked(self, host, key, cls, args, kwargs) -> None:
        """Note a fact this run read (answered from what was kept or not), for the next run."""
        if host not in self.state.failed_hosts and not args and _storable(kwargs):
            self.asked.setdefault(host.name, {})[key] = [f"{cls.__module__}.{cls.__qualname__}", kwargs]

    def read_at_once(self, host, reads: list) -> None:
        """Read ``reads`` (``[[fact name, kwargs], ...]``) on ``host`` in one round trip and keep
        each answer as its own read would have been kept."""
        generation, end = self.generation, f"noderig:end:{secrets.token_hex(8)}"
        try:
            # (its command never fails; should the connection, the host is not failed for it)
            answers = self._run(self.inner[host.name], Facts, (), {"reads": tuple(reads), "end": end,
                                                                     "_ignore_errors": True})
        except Exception as error:  # noqa: BLE001 - the facts are then read one by one, as before
            logger.debug(f"[{host.name}] reading the last run's facts at once: {error!r}")
            return
        if generation != self.generation or host in self.state.failed_hosts:
            return
        for (name, kwargs), (status, lines) in zip(reads, answers):
            if status != 0:
                continue  # read on its own later, failing as it would
            try:
                fact = fact_class(name)()
                kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
                fact.command(**kwargs)  # as pyinfra does: command() before process()
                value = fact.process(lines) if lines else fact.default()
            except Exception:  # noqa: BLE001 - likewise (an unreadable JSON file names itself then)
                continue
            key = (host.name, type(fact), (), tuple(sorted(kwargs.items())))
            if key not in self.values and not _changes_on_its_own(type(fact), value):
                self._keep(key, value)

    def _run(self, inner, cls, args, kwargs):
        me = id(getcurrent())
        nested = me in self.reading
        self.reading.add(me)
        try:
            return inner(cls, *args, **kwargs)
        finally:
            if not nested:
                self.reading.discard(me)

    def acted(self) -> None:
        """A connector ran something: unless it is a fact read's own command, forget."""
        if id(getcurrent()) not in self.reading:
            self.forget()


def _copy(value):
    """A copy no caller's change can reach the kept value through: facts are plain data
    (dicts, lists, tuples, strings, numbers), for which a pickle round trip is a deep copy at
    a fraction of ``copy.deepcopy``'s cost (a converged fleet's rerun copies tens of
    thousands of objects: a checkpoint's file stats and manifest per target)."""
    return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))


def remember(host) -> FactReads:
    """Keep fact reads for the run on every host of ``host``'s inventory, and read what each
    connected host's last run read, at once (once per run)."""
    state = host.state
    reads = getattr(state, "_noderig_fact_reads", None)
    if reads is None:
        reads = state._noderig_fact_reads = FactReads(state)
        for each in state.inventory:
            _install(each, reads)
        state.add_callback_handler(_Keeper(reads))
        for each in state.inventory:
            last = _last_reads(each)
            if last and each.connected:
                reads.pending[each.name] = gevent.spawn(reads.read_at_once, each, last)
        # (let those reads go out now: this greenlet would otherwise plan its own host first,
        # and the first host's deploy file pays for every module's import)
        gevent.sleep(0)
    return reads


def _changes_on_its_own(cls, value) -> bool:
    """A value that something running on the node changes between two reads (a fact class says
    so with ``changes_on_its_own(value)``: the checkpoint while aria2 writes it): never kept."""
    check = getattr(cls, "changes_on_its_own", None)
    return bool(check is not None and check(value))


def _storable(kwargs: dict) -> bool:
    """Arguments a stored list can give back as they were (strings, numbers, tuples of them)."""
    plain = (str, int, float, bool, type(None))
    return all(isinstance(v, plain) or (isinstance(v, tuple) and all(isinstance(i, plain) for i in v))
               for v in kwargs.values())


def _kept_file(host):
    """Where the facts ``host`` read are kept: by its name and the address it is reached at."""
    who = f"{host.name}\0{host.data.get('ssh_hostname') or ''}"
    return controller_cache("fact-reads") / f"{hashlib.sha256(who.encode()).hexdigest()[:24]}.json"


def _last_reads(host) -> list:
    """The facts ``host`` read in its last run (``[]`` when none is kept or it is unusable)."""
    try:
        reads = json.loads(_kept_file(host).read_text())
        return [[name, kwargs] for name, kwargs in reads[:MOST_KEPT]
                if isinstance(name, str) and name.startswith(FACT_MODULES) and isinstance(kwargs, dict)]
    except (OSError, ValueError, TypeError):
        return []


class _Keeper(BaseStateCallback):
    """Keeps what each host read for its next run, when pyinfra disconnects from it."""

    def __init__(self, reads: FactReads):
        self.reads = reads

    def host_disconnect(self, state, host):
        asked = json.dumps(list(self.reads.asked.get(host.name, {}).values())[:MOST_KEPT])
        if asked == "[]":
            return
        path = _kept_file(host)
        try:
            if path.exists() and path.read_text() == asked:
                return  # (the same list: the file is left alone)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(asked)
        except (OSError, ValueError, TypeError) as error:
            logger.debug(f"[{host.name}] keeping its fact reads for the next run: {error!r}")


def _install(host, reads: FactReads) -> None:
    inner = reads.inner[host.name] = host.get_fact
    host.get_fact = lambda cls, *args, **kwargs: reads.read(host, inner, cls, args, kwargs)
    connector = host.connector
    for method in ACTIONS:
        act = getattr(connector, method, None)
        if act is not None:
            setattr(connector, method, _forgetting(act, reads))


def _forgetting(act, reads: FactReads):
    def wrapper(*args, **kwargs):
        reads.acted()
        try:
            return act(*args, **kwargs)
        finally:
            reads.acted()  # what it changed is seen by the next read, whatever it was
    return wrapper
