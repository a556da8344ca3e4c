"""The venv from peers, without hosts: who copies from whom (``operations.venv_peers``), what
the venv operation yields with a peer, and where its copy comes from at execution (the peer
when its venv is identical to the reference's, the reference otherwise). The lab's fleet test
(tests/test_fleet.py) copies between real targets."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import gevent
import pytest
from pyinfra.context import ctx_host

from operations import environment, venv_peers
from tests.fakehost import FakeHost, fact, run_op
from tests.test_operations import LISTING, venv_hosts

GENERATION = environment.venv_generation("/opt/v", LISTING)


def fleet(*names: str, pool_size=None):
    """Targets sharing one run's state (pyinfra's, as far as the registry reads it)."""
    nodes = [FakeHost({}, name=name) for name in names]
    # (a list: FakeHost, a dataclass, is not hashable as pyinfra's hosts are)
    state = SimpleNamespace(pool=SimpleNamespace(size=pool_size), failed_hosts=[], inventory=nodes, handlers=[])
    state.add_callback_handler = state.handlers.append
    for node in nodes:
        node.state = state
    return nodes, state


def source(node, targets, **data) -> str | None:
    with ctx_host.use(node):
        peer = venv_peers.source_of(targets, {"venv_transfer": "auto", **data})
    return peer.name if peer else None


def test_each_target_gets_its_source_from_the_tree_and_the_first_the_reference():
    targets, _ = fleet("b300", "b300-2", "b300-3", "b300-4")
    assert [source(t, targets) for t in targets] == [None, "b300", "b300", "b300-2"]


@pytest.mark.parametrize("data, pool_size, n", [
    ({"venv_from_peers": False}, None, 3),  # turned off
    ({"venv_transfer": "relay"}, None, 3),  # the controller's cache already takes it once
    ({}, 2, 3),  # --parallel 2 with 3 targets: a node could wait for a peer not yet started
    ({}, None, 1),  # one target
], ids=["off", "relay", "parallel-below-targets", "one-target"])
def test_every_target_copies_from_the_reference_when_peers_cannot_or_must_not_be_used(data, pool_size, n):
    targets, _ = fleet(*[f"t{i}" for i in range(n)], pool_size=pool_size)
    assert [source(t, targets, **data) for t in targets] == [None] * n


def venv_op(node, state):
    return SimpleNamespace(_hash=f"venv-op-{node.name}")


def planned(*names):
    """A run whose targets all planned their venv operation (``expect``)."""
    targets, state = fleet(*names)
    for t in targets:
        source(t, targets)
        with ctx_host.use(t):
            venv_peers.expect(venv_op(t, state))
    return targets, state


def ended(state, node, ok=True):
    """pyinfra's callback for the end of ``node``'s venv operation."""
    (handler,) = state.handlers
    if ok:
        handler.operation_host_success(state, node, f"venv-op-{node.name}")
    else:
        handler.operation_host_error(state, node, f"venv-op-{node.name}")


def waiting(node, peer):
    def wait():
        with ctx_host.use(node):
            return venv_peers.wait_for(peer)
    return gevent.spawn(wait)


def test_a_node_waits_for_its_source_and_for_the_source_s_previous_receiver():
    (a, b, c), state = planned("a", "b", "c")  # b and c both from a, b first
    waiter = waiting(c, a)
    gevent.sleep(0.05)
    ended(state, a)
    gevent.sleep(0.05)
    assert not waiter.ready()  # a has it, but a is still sending it to b
    ended(state, b, ok=False)  # (an error ends it too)
    assert waiter.get(timeout=5) is None


def test_another_operation_ending_releases_no_one():
    (a, b), state = planned("a", "b")
    waiter = waiting(b, a)
    (handler,) = state.handlers
    handler.operation_host_success(state, a, "some-other-op")
    gevent.sleep(0.05)
    assert not waiter.ready()
    ended(state, a)
    assert waiter.get(timeout=5) is None


def test_a_source_that_failed_before_its_venv_operation_is_not_waited_for(monkeypatch):
    monkeypatch.setattr(venv_peers, "POLL_SECONDS", 0.01)
    (a, b), state = planned("a", "b")
    state.failed_hosts.append(a)
    assert waiting(b, a).get(timeout=5) == "a failed before it had the venv"


def test_a_source_that_plans_no_venv_operation_is_no_source():
    targets, state = fleet("a", "b")
    source(targets[1], targets)
    assert waiting(targets[1], targets[0]).get(timeout=5) == "a copies no venv in this run"


# environment.venv with a peer


def peer_host(live, beside=None, keys=()):
    return FakeHost({fact("TreeListing", root="/opt/v"): live, fact("TreeListing", root=GENERATION): beside or {},
                     fact("CopyKeys", prefix=environment.copy_key_prefix(FakeHost())): list(keys)}, name="b300-0")


def test_a_node_whose_source_is_a_peer_names_it_and_hands_it_to_its_copy(caplog):
    node, reference = venv_hosts({"pyvenv.cfg": ("f", 90, 1, "644", "")})
    peer = peer_host({})
    with ctx_host.use(node), caplog.at_level(logging.INFO):
        commands = list(environment.venv._inner("/opt/v", reference, peer=peer))
    # (run as operations.util.guarded_call wraps it)
    copy = next(c for c in commands if getattr(getattr(c, "function", None), "__wrapped__", None) is environment._copy)
    assert copy.kwargs == {"peer": peer, "want": LISTING}
    assert "(from b300-0, a target that takes it first (else ct200))" in caplog.text


def test_a_copy_key_a_killed_run_left_on_the_peer_is_removed_from_it_too():
    node, reference = venv_hosts(dict(LISTING))
    peer = peer_host(dict(LISTING), keys=["noderig-transient-b300-1a2b-x"])
    with ctx_host.use(node):
        commands = list(environment.venv._inner("/opt/v", reference, peer=peer))
    assert [(c.function.__name__, c.args[0].name) for c in commands] == [
        ("_remove_copy_keys", "ct200"), ("_remove_copy_keys", "b300-0")]


def test_an_identical_venv_with_a_peer_and_no_leftover_key_is_a_no_op():
    node, reference = venv_hosts(dict(LISTING))
    assert run_op(environment.venv, node, "/opt/v", reference, peer=peer_host(dict(LISTING))) == []


class Pushes(list):
    """(source, node, source path, node path) of each push; ``addresses``: (the source's, the
    node's) as each push reached them."""

    def __init__(self):
        super().__init__()
        self.addresses = []


@pytest.fixture
def pushes(monkeypatch):
    """Every push ``_direct`` is asked for: (source, node, source path, node path); the peer's
    operation already ended and every host reaches every other."""
    calls = Pushes()
    monkeypatch.setattr(venv_peers, "wait_for", lambda peer: None)
    monkeypatch.setattr(environment, "_why_not_direct", lambda source, node, address=None: None)

    def direct(source, node, path, bytes_to_copy=0, dest=None, address=environment._address):
        calls.append((source.name, node.name, path, dest))
        calls.addresses.append((address(source), address(node)))
        return "3 files, 1.0 MiB transferred"
    monkeypatch.setattr(environment, "_direct", direct)
    return calls


@pytest.mark.parametrize("live, beside, src", [
    (LISTING, None, "/opt/v"),  # the peer's live venv is the reference's
    ({}, LISTING, GENERATION),  # the peer serves: its new venv is ready beside the live one
], ids=["live", "beside"])
def test_the_copy_comes_from_the_peer_s_identical_venv(pushes, live, beside, src):
    node, reference = venv_hosts({})
    assert environment._copy(None, node, reference, "/opt/v", "auto", 10, "/opt/v", peer=peer_host(live, beside),
                             want=LISTING)
    assert pushes == [("b300-0", "b300", src, "/opt/v")]


def test_a_peer_without_the_reference_s_venv_leaves_the_copy_to_the_reference(pushes, caplog):
    node, reference = venv_hosts({})
    stale = {**LISTING, "pyvenv.cfg": ("f", 91, 1, "644", "")}
    with caplog.at_level(logging.WARNING):
        assert environment._copy(None, node, reference, "/opt/v", "direct", 10, None, peer=peer_host(stale),
                                 want=LISTING)
    assert pushes == [("ct200", "b300", "/opt/v", "/opt/v")]
    assert "venv not from b300-0 (its venv is not identical to ct200's); copying it from ct200" in caplog.text


def test_a_copy_from_the_peer_that_fails_is_done_again_from_the_reference(pushes, monkeypatch, caplog):
    node, reference = venv_hosts({})

    def direct(source, node_, path, bytes_to_copy=0, dest=None, address=None):
        pushes.append((source.name, node_.name, path, dest))
        if source.name == "b300-0":
            raise environment.CopyError("rsync of the venv from b300-0 to b300 failed on b300-0: ssh: not found")
        return "3 files"
    monkeypatch.setattr(environment, "_direct", direct)
    with caplog.at_level(logging.WARNING):
        assert environment._copy(None, node, reference, "/opt/v", "direct", 10, None, peer=peer_host(LISTING),
                                 want=LISTING)
    assert pushes == [("b300-0", "b300", "/opt/v", "/opt/v"), ("ct200", "b300", "/opt/v", "/opt/v")]
    assert "venv not from b300-0 (rsync of the venv from b300-0 to b300 failed" in caplog.text


def test_a_peer_that_failed_is_not_asked_for_its_venv(pushes, monkeypatch):
    monkeypatch.setattr(venv_peers, "wait_for", lambda peer: "b300-0 failed before it had the venv")
    node, reference = venv_hosts({})
    peer = FakeHost({}, name="b300-0")  # (any fact read on it would fail the test)
    assert environment._copy(None, node, reference, "/opt/v", "direct", 10, None, peer=peer, want=LISTING)
    assert pushes == [("ct200", "b300", "/opt/v", "/opt/v")]


def test_a_peer_pushes_over_the_cluster_network_when_the_targets_have_one(pushes):
    node, reference = venv_hosts({})
    node.data["fanout_address"] = "10.9.0.2"
    peer = peer_host(LISTING)
    peer.data["fanout_address"] = "10.9.0.1"
    assert environment._copy(None, node, reference, "/opt/v", "auto", 10, None, peer=peer, want=LISTING)
    assert pushes.addresses == [("10.9.0.1", "10.9.0.2")]
