"""The fan-out's pipelined download without a host (issue 15): which of a receiver's files are
added now and from where, given what its peers serve, whether their downloads still run, and
whether they are done with their stripes; the node's own files hashed and published once
complete; a background hashing kicked while it runs runs once more. The lab tier
(``test_fanout_lab.py``) runs the whole fan-out on a fleet."""

from __future__ import annotations

from dataclasses import dataclass

import gevent
import pytest

from noderig import fanout
from operations import checkpoint, peers
from tests.fakehost import FakeHost

KEY = "k" * 16
DIGESTS = {"a.safetensors": "a" * 64, "b.safetensors": "b" * 64}
ENTRIES = {p: {"path": p, "size": 10, "sha256": d} for p, d in DIGESTS.items()}


@pytest.fixture
def registry(monkeypatch):
    """An empty fan-out registry: b300-2 owns a.safetensors, b300-3 b.safetensors, both serve."""
    for name, value in (("SERVING", {}), ("EXCLUDED", {}), ("SETTLED", set()), ("WORKING", {}),
                        ("STRIPE_OF", {(KEY, "a.safetensors"): "b300-2", (KEY, "b.safetensors"): "b300-3"})):
        monkeypatch.setattr(peers, name, value)
    for name, address in (("b300-2", "10.0.0.3"), ("b300-3", "10.0.0.4")):
        peers.SERVING[name] = peers.Served(address, 8378, "sec", {KEY: set()})
    return peers


def alive():
    """A greenlet still running (an owner's download under way)."""
    return gevent.spawn(gevent.sleep, 60)


def dead():
    g = gevent.spawn(lambda: None)
    g.join()
    return g


@pytest.mark.parametrize("change, starting, expected", [
    (lambda r: None, True, True),  # its download not begun yet, and may still begin
    (lambda r: None, False, False),  # not begun within the wait (a --serial run): the Hub
    (lambda r: r.WORKING.update({("b300-2", KEY): alive()}), False, True),  # under way
    (lambda r: r.WORKING.update({("b300-2", KEY): dead()}), True, False),  # its step failed
    (lambda r: r.SETTLED.add(("b300-2", KEY)), True, False),  # done with its stripe without it
    (lambda r: r.EXCLUDED.update({"b300-2": "damaged bytes"}), True, False),
    (lambda r: r.SERVING.pop("b300-2"), True, False),  # its server never started
], ids=["not-begun", "never-begun", "under-way", "failed", "settled", "excluded", "not-serving"])
def test_a_receiver_waits_for_an_owner_only_while_it_may_still_serve(registry, change, starting, expected):
    change(registry)
    assert peers.may_still_serve(FakeHost(), KEY, "a.safetensors", starting) is expected


@dataclass(frozen=True)
class Failed:
    name: str


def test_an_owner_that_failed_in_an_earlier_step_is_not_waited_for(registry):
    receiver = FakeHost()
    receiver.state.failed_hosts = {Failed("b300-2")}
    assert peers.may_still_serve(receiver, KEY, "a.safetensors", True) is False
    assert peers.may_still_serve(FakeHost(name="b300-2"), KEY, "a.safetensors", True) is False  # its own


class Background:
    def __init__(self):
        self.runs = 0

    def now(self):
        self.runs += 1


def feed_for(host=None, wanted=("a.safetensors", "b.safetensors")):
    return checkpoint._PeerFeed(host or FakeHost(), KEY, "/m", list(wanted), ENTRIES, 2, lambda p: f"hub://{p}")


def test_files_are_added_from_the_peers_that_serve_them_as_they_verify_them(registry):
    registry.WORKING.update({("b300-2", KEY): alive(), ("b300-3", KEY): alive()})
    feed, background = feed_for(), Background()
    own = {"c.json": {"status": "active"}}
    assert feed(own, background) == ([], 2)
    registry.SERVING["b300-3"].digests[KEY].add(DIGESTS["b.safetensors"])
    added, more = feed(own, background)
    assert more == 1 and added == [(fanout.uris([registry.SERVING["b300-3"].url(KEY, DIGESTS["b.safetensors"])],
                                                None, 2), "b.safetensors")]
    assert feed(own, background) == ([], 1)  # added once
    assert background.runs == 0 and ("b300", KEY) not in registry.SETTLED  # its own file still downloads


def test_a_file_no_peer_may_still_serve_comes_from_the_hub(registry):
    registry.SETTLED.add(("b300-2", KEY))  # done with its stripe, a.safetensors not among what it serves
    registry.WORKING[("b300-3", KEY)] = alive()
    feed = feed_for()
    assert feed({}, Background()) == ([("hub://a.safetensors", "a.safetensors")], 1)
    assert feed.sourced == {"a.safetensors": []}


def test_once_its_own_files_are_complete_they_are_hashed_and_published_and_no_peer_waits_on_it(registry):
    registry.WORKING.update({("b300-2", KEY): alive(), ("b300-3", KEY): alive()})
    feed, background = feed_for(), Background()
    feed({"c.json": {"status": "complete"}, "d.json": {"status": "active"}}, background)
    assert background.runs == 0
    feed({"c.json": {"status": "complete"}, "d.json": {"status": "complete"}}, background)
    feed({"c.json": {"status": "complete"}, "d.json": {"status": "complete"}}, background)
    assert background.runs == 1 and ("b300", KEY) in registry.SETTLED


def test_a_kick_during_a_background_run_gets_one_more_run_after_it():
    runs, published = [], []
    host = FakeHost(executing=True, shell=lambda text: (runs.append(text) or gevent.sleep(0.05) or True, []))
    background = checkpoint._BackgroundVerify(host, "/m/.noderig/manifest.json", "/m", 2,
                                              after=lambda: published.append(len(runs)))
    background.kick()
    gevent.sleep(0.01)  # the first run is under way
    background.kick()
    background.kick()  # (two kicks during one run: one more run covers both)
    background.wait()
    assert len(runs) == 2 and published == [1, 2]
    background.now()
    assert len(runs) == 3 and published == [1, 2, 3]


# --------------------------------------------------------------------------------------------
# checkpoint.fetch with the fan-out's stripe: the commands, the Hub URLs it resolves, the no-op

from tests.test_operations import (DEST, MANIFEST, NODE_CHECKS, PIN, RECORD, STATS,  # noqa: E402
                                   checkpoint_state, fact, node_with)
from tests.fakehost import run_op  # noqa: E402

FANOUT_KEY = fanout.checkpoint_key(MANIFEST["repo"], MANIFEST["commit"])


def test_a_fan_out_fetch_registers_its_download_resolves_only_its_stripe_and_publishes_at_the_end(monkeypatch,
                                                                                                   registry):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    resolved = []
    monkeypatch.setattr(checkpoint, "download_url", lambda manifest, path, token: resolved.append(path) or path)
    host = node_with({}, {}, extra={fact("FsType", path=DEST): "ext4"})
    commands = run_op(checkpoint.fetch, host, PIN, DEST, stripe=["config.json"])
    assert commands[:1 + len(NODE_CHECKS)] == ["call _fanout_working", *NODE_CHECKS]
    assert commands[-3:] == ["call _download_from_peers", "call _verify", "call _fanout_done"]
    assert resolved == ["config.json"], "a peer's file gets its Hub URL only if no peer can serve it"


def test_a_fan_out_fetch_with_nothing_to_do_is_a_no_op_and_no_peer_waits_on_it(registry):
    host = node_with(STATS, RECORD)
    assert run_op(checkpoint.fetch, host, PIN, DEST, stripe=[]) == []
    assert ("b300", FANOUT_KEY) in registry.SETTLED
    assert run_op(checkpoint.fetch, node_with(STATS, RECORD), PIN, DEST) == []  # (no fan-out: nothing told)
    assert registry.SETTLED == {("b300", FANOUT_KEY)}


# --------------------------------------------------------------------------------------------
# peers.publish: what a node offers as it verifies files


def publishing_host(answer: list[str]) -> FakeHost:
    return FakeHost(executing=True, shell=lambda text: (True, answer))


def test_a_node_publishes_what_it_verified_of_a_checkpoint_its_server_offers(registry):
    host = publishing_host(['{"served": {"' + "a" * 64 + '": 10}}'])
    host.name = "b300-2"
    registry.publish(host, KEY, "/m")
    assert host.ran == ["python3 /usr/local/lib/noderig/peer_links.py /m"]
    assert registry.SERVING["b300-2"].digests[KEY] == {"a" * 64}


def test_a_checkpoint_the_server_was_started_without_is_not_offered(registry):
    # (its path was never made on the server: peers sent there would meet a 404)
    host = publishing_host(['{"served": {"' + "a" * 64 + '": 10}}'])
    host.name = "b300-2"
    registry.publish(host, "other-key", "/other")
    assert host.ran == [] and "other-key" not in registry.SERVING["b300-2"].digests


def test_links_that_give_no_report_leave_what_was_offered_and_say_why(registry):
    registry.SERVING["b300-2"].digests[KEY] = {"b" * 64}
    host = publishing_host(["Traceback (most recent call last):"])
    host.name = "b300-2"
    registry.publish(host, KEY, "/m")  # no exception: a warning, the old set kept
    assert registry.SERVING["b300-2"].digests[KEY] == {"b" * 64}
