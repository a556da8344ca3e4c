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
- ``VOLATILE`` facts are always read again: whether the server and aria2 run and answer
  changes on its own, and readiness, the rollout and the checkpoint step act on it now.

A read that failed (its host failed) or raised is not kept: a second read fails again as
before. Each answer is a copy: a caller may change what it got.
"""

from __future__ import annotations

import copy

from gevent import getcurrent

from operations.facts import HttpStatus, UnitStatus

VOLATILE = frozenset({UnitStatus, HttpStatus})
# The connector's methods that act on a host (get_file too: a download may run commands).
ACTIONS = ("run_shell_command", "put_file", "get_file", "rsync")


class FactReads:
    """The facts read on every host of one run (held by pyinfra's state)."""

    def __init__(self, state):
        self.state = state
        self.values: dict = {}
        self.phase = self._phase()
        self.reading: set[int] = set()  # the greenlets inside a fact read now
        self.generation = 0  # forget() counts: a read another host's command overlapped is not kept
        self.reads = self.hits = 0

    def _phase(self) -> bool:
        """True for an operation run after a change-detection pass (time passed since load)."""
        return bool(self.state.is_executing and self.state.should_check_for_changes())

    def forget(self) -> None:
        self.values.clear()
        self.generation += 1

    def read(self, host, inner, cls, args, kwargs):
        phase = self._phase()
        if phase != self.phase:
            self.phase = phase
            self.forget()
        if cls in VOLATILE or not isinstance(cls, type):
            return self._run(inner, cls, args, kwargs)
        key = (host.name, cls, args, tuple(sorted(kwargs.items())))
        try:
            if key in self.values:
                self.hits += 1
                return copy.deepcopy(self.values[key])
        except TypeError:  # an argument that cannot be a key (a list): read, never kept
            return self._run(inner, cls, args, kwargs)
        generation = self.generation
        value = self._run(inner, cls, args, kwargs)
        if generation == self.generation and host not in self.state.failed_hosts:
            self.values[key] = copy.deepcopy(value)
        return value

    def _run(self, inner, cls, args, kwargs):
        self.reads += 1
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


def remember(host) -> FactReads:
    """Keep fact reads for the run on every host of ``host``'s inventory (once per run)."""
    state = host.state
    reads = getattr(state, "_noderig_fact_reads", None)
    if reads is None:
        reads = state._noderig_fact_reads = FactReads(state)
        for each in state.inventory:
            _install(each, reads)
    return reads


def _install(host, reads: FactReads) -> None:
    inner = host.get_fact
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
