"""The venv from peers: the reference sends it once, and every further target copies it from a
target that already holds it verified (``noderig.fanout.copy_tree``: the holders double each
round, so n targets take 1 + ceil(log2 n) copy times instead of n copies sharing the
reference's uplink).

pyinfra runs the venv operation on every target at once. A node whose source is a peer waits,
inside its copy, until the peer's own venv operation has ended in this run (a state callback:
it succeeded or failed) and so has the peer's previous receiver's (a source sends one copy at
a time: ``noderig.fanout.copy_waits``); then ``operations.environment`` takes the copy from the
peer when the peer's venv (live, or prepared beside the live one) is identical to the
reference's, and from the reference otherwise, or when the copy from the peer fails. A node
waits only for nodes of earlier rounds, so no two nodes wait for each other.

Off (every target from the reference, as before) with ``venv_from_peers = False``, with
``venv_transfer = "relay"`` (the controller's cache already takes the venv from the reference
once), with one target, and when pyinfra does not load every target at once (``--parallel``
below the number of targets: a node could wait for a peer whose turn comes after its own).
"""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api.state import BaseStateCallback

from noderig.fanout import copy_tree, copy_waits

SETTING = "venv_from_peers"
# How often a waiting node checks whether its source failed before its venv operation began.
POLL_SECONDS = 1.0


class Registry:
    """One run's venv sources: who copies from whom, and whose venv operation has ended."""

    def __init__(self, sources: dict[str, str | None]):
        from gevent.event import Event

        self.sources = sources  # node name -> the peer it copies from (None: the reference)
        self.waits = copy_waits(sources)  # node name -> the nodes whose venv operation it waits for
        self.ops: dict[str, str] = {}  # node name -> its venv operation's hash
        self.ended = {name: Event() for name in sources}


class _Ended(BaseStateCallback):
    """Marks a node's venv operation ended (success or error) for the nodes waiting on it."""

    def __init__(self, registry: Registry):
        self.registry = registry

    def _ended(self, node, op_hash):
        if self.registry.ops.get(node.name) == op_hash:
            self.registry.ended[node.name].set()

    def operation_host_success(self, state, host, op_hash, retry_count=0):
        self._ended(host, op_hash)

    def operation_host_error(self, state, host, op_hash, retry_attempt=0, max_retries=0):
        self._ended(host, op_hash)


def _registry(state, targets: list) -> Registry:
    registry = getattr(state, "_noderig_venv_peers", None)
    if registry is None:
        loaded_at_once = state.pool is None or state.pool.size is None or state.pool.size >= len(targets)
        sources = copy_tree([t.name for t in targets]) if loaded_at_once else {}
        registry = state._noderig_venv_peers = Registry(sources)
        state.add_callback_handler(_Ended(registry))
    return registry


def source_of(targets: list, data) -> object | None:
    """The peer (a pyinfra host of ``targets``) this node copies the venv from, or None: from
    the reference.

    + targets: the run's targets in inventory order (``operations.peers.fleet_targets``)
    + data: this node's inventory data (``venv_from_peers``, ``venv_transfer``)
    """
    if len(targets) < 2 or not data.get(SETTING, True) or data.get("venv_transfer", "auto") == "relay":
        return None
    name = _registry(host.state, targets).sources.get(host.name)
    return next((t for t in targets if t.name == name), None)


def expect(venv_op) -> None:
    """Record this node's venv operation (its end releases the nodes that copy from it)."""
    registry = getattr(host.state, "_noderig_venv_peers", None)
    if registry is not None and venv_op is not None:
        registry.ops[host.name] = venv_op._hash


def wait_for(peer) -> str | None:
    """Wait until ``peer``'s venv operation, and its previous receiver's, have ended in this
    run (a node that failed before is not waited for); why ``peer`` cannot be this node's
    source (it failed, or runs no venv operation), or None."""
    state = host.state
    registry = getattr(state, "_noderig_venv_peers", None)
    if registry is None or peer.name not in registry.ops:
        return f"{peer.name} copies no venv in this run"
    nodes = {t.name: t for t in state.inventory}
    for name in registry.waits.get(host.name, [peer.name]):
        node = nodes.get(name)
        while name in registry.ops and not registry.ended[name].wait(POLL_SECONDS):
            if node is None or node in state.failed_hosts:
                break
    if peer in state.failed_hosts:
        return f"{peer.name} failed before it had the venv"
    logger.debug(f"[{host.name}] {peer.name}'s venv operation ended")
    return None
