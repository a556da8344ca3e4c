"""The fleet fan-out plan (noderig/fanout.py): stripes balanced by bytes, each file from the
Hub once, holders serve, the Hub only as aria2's backup, and today's behaviour when off."""

from __future__ import annotations

import pytest

from noderig.fanout import FleetPlan, checkpoint_key, copy_tree, copy_waits, describe, peer_url, plan, stripe, uris

MiB = 2**20
NODES = ["b300", "b300-2", "b300-3"]


def states(*have: set[str], files=()) -> dict[str, dict[str, str]]:
    """node -> path -> state: "ok" for the files in that node's set, "missing" otherwise."""
    return {n: {p: "ok" if p in h else "missing" for p in files} for n, h in zip(NODES, have)}


def test_stripe_balances_bytes_largest_first():
    sizes = {"a": 9, "b": 7, "c": 6, "d": 5, "e": 4, "f": 2}
    # by hand: a->n1 (9), b->n2 (7), c->n3 (6), d->n3 (11), e->n2 (11), f->n1 (11)
    assert stripe(sizes, NODES) == {"b300": ["a", "f"], "b300-2": ["b", "e"], "b300-3": ["c", "d"]}


def test_stripe_ties_go_to_the_earlier_node_and_equal_sizes_in_path_order():
    assert stripe({"y": 1, "x": 1, "z": 1, "w": 1}, ["n1", "n2"]) == {"n1": ["w", "y"], "n2": ["x", "z"]}


def test_stripe_of_nothing_and_of_no_node():
    assert stripe({}, ["n1", "n2"]) == {"n1": [], "n2": []}
    with pytest.raises(ValueError):
        stripe({"a": 1}, [])


def test_sixty_four_equal_shards_split_evenly_over_three_nodes():
    sizes = {f"model-{i:05d}.safetensors": 9 * 2**30 for i in range(64)}
    counts = sorted(len(files) for files in stripe(sizes, NODES).values())
    assert counts == [21, 21, 22]


def test_bare_fleet_every_file_from_the_hub_exactly_once():
    sizes = {"s1": 40 * MiB, "s2": 30 * MiB, "s3": 20 * MiB, "cfg": 1}
    p = plan(sizes, states(set(), set(), set(), files=sizes), NODES)
    assert p.hub == {"b300": ["s1"], "b300-2": ["s2"], "b300-3": ["cfg", "s3"]}
    assert p.peers == {"b300": ["cfg", "s2", "s3"], "b300-2": ["cfg", "s1", "s3"], "b300-3": ["s1", "s2"]}
    assert p.holders == {"cfg": ["b300-3"], "s1": ["b300"], "s2": ["b300-2"], "s3": ["b300-3"]}
    assert p.serve == {"b300": ["s1"], "b300-2": ["s2"], "b300-3": ["cfg", "s3"]}
    # uplink: the checkpoint once; cluster: each node takes the rest
    assert sum(p.bytes_from(n, sizes)[0] for n in NODES) == 90 * MiB + 1
    assert p.bytes_from("b300", sizes) == (40 * MiB, 50 * MiB + 1)


def test_a_node_added_to_a_converged_fleet_takes_nothing_from_the_hub():
    sizes = {"s1": 10, "s2": 20}
    p = plan(sizes, states({"s1", "s2"}, {"s1", "s2"}, set(), files=sizes), NODES)
    assert p.hub == {"b300": [], "b300-2": [], "b300-3": []}
    assert p.peers == {"b300": [], "b300-2": [], "b300-3": ["s1", "s2"]}
    assert p.holders == {"s1": ["b300", "b300-2"], "s2": ["b300", "b300-2"]}
    assert p.serve == {"b300": ["s1", "s2"], "b300-2": ["s1", "s2"], "b300-3": []}


def test_a_converged_fleet_plans_nothing():
    sizes = {"s1": 10}
    p = plan(sizes, states({"s1"}, {"s1"}, {"s1"}, files=sizes), NODES)
    assert p.hub == p.peers == p.serve == {"b300": [], "b300-2": [], "b300-3": []}


def test_a_file_held_by_one_node_is_not_striped_and_unverified_bytes_do_not_count_as_held():
    sizes = {"s1": 10, "s2": 10}
    st = states({"s1"}, set(), set(), files=sizes)
    st["b300-2"]["s2"] = "unverified"  # right size, never hashed: not a source
    p = plan(sizes, st, NODES)
    assert [f for files in p.hub.values() for f in files] == ["s2"]
    assert p.holders["s1"] == ["b300"]
    assert "s1" in p.peers["b300-2"] and "s1" in p.peers["b300-3"]


def test_off_or_one_target_is_todays_behaviour():
    sizes = {"s1": 10, "s2": 20}
    st = states({"s1"}, set(), set(), files=sizes)
    off = plan(sizes, st, NODES, fanout=False)
    assert off.hub == {"b300": ["s2"], "b300-2": ["s1", "s2"], "b300-3": ["s1", "s2"]}
    assert off.peers == off.serve == {"b300": [], "b300-2": [], "b300-3": []}
    one = plan(sizes, {"b300": st["b300"]}, ["b300"])
    assert one.hub == {"b300": ["s2"]} and one.peers == {"b300": []}


def test_uris_fill_every_connection_with_peers_and_keep_the_hub_last():
    assert uris(["A", "B"], "H", 5) == ["A", "B", "A", "B", "A", "H"]
    assert uris(["A", "B", "C"], "H", 2) == ["A", "B", "C", "H"]  # every peer stays a source
    assert uris([], "H", 16) == ["H"]
    assert uris(["A"], None, 2) == ["A", "A"]


def test_peer_urls():
    key = checkpoint_key("moonshotai/Kimi-K2.6", "c0ffee")
    assert len(key) == 16 and key == checkpoint_key("moonshotai/Kimi-K2.6", "c0ffee")
    assert key != checkpoint_key("moonshotai/Kimi-K2.6", "c0ffef")
    assert peer_url("10.0.0.2", 8378, "s3cr-t_", key, "ab12") == f"http://10.0.0.2:8378/s3cr-t_/{key}/ab12"
    assert peer_url("fd00::2", 8378, "s", "k", "d") == "http://[fd00::2]:8378/s/k/d"
    for bad in ("../x", "a/b", "", "a b"):
        with pytest.raises(ValueError):
            peer_url("10.0.0.2", 8378, "s", "k", bad)
    with pytest.raises(ValueError):
        peer_url("node-1", 8378, "s", "k", "d")  # an address, not a name


def test_describe_names_bytes_and_files_per_source():
    p = FleetPlan(hub={"n": ["a"]}, peers={"n": ["b", "c"]}, serve={"n": []})
    assert describe(p, "n", {"a": 3 * MiB, "b": MiB, "c": MiB}) == \
        "3.0 MiB from the Hub (1 files), 2.0 MiB from peers (2 files)"


def rounds(sources: dict) -> dict[str, int]:
    """The round each node gets the venv in, each copy taking one round: after its source
    holds it and after the source's previous receiver got it (a source sends one at a time);
    the reference sends in round 1."""
    got: dict[str, int] = {}
    previous: dict = {}
    for node, source in sources.items():  # (a source always comes before its receivers)
        got[node] = 1 + max(got.get(source, 0), got.get(previous.get(source), 0))
        previous[source] = node
    return got


def test_the_venv_copy_tree_for_eight_nodes_written_out():
    nodes = [f"t{i}" for i in range(8)]
    assert copy_tree(nodes) == {"t0": None, "t1": "t0", "t2": "t0", "t3": "t1", "t4": "t0", "t5": "t1",
                                "t6": "t2", "t7": "t3"}
    assert copy_waits(copy_tree(nodes)) == {"t0": [], "t1": ["t0"], "t2": ["t0", "t1"], "t3": ["t1"],
                                            "t4": ["t0", "t2"], "t5": ["t1", "t3"], "t6": ["t2"], "t7": ["t3"]}
    assert rounds(copy_tree(nodes)) == {"t0": 1, "t1": 2, "t2": 3, "t3": 3, "t4": 4, "t5": 4, "t6": 4, "t7": 4}


@pytest.mark.parametrize("n, want_rounds", [(1, 1), (2, 2), (3, 3), (4, 3), (5, 4), (8, 4), (9, 5), (64, 7)])
def test_the_reference_sends_the_venv_once_and_the_holders_double_each_round(n, want_rounds):
    nodes = [f"node-{i}" for i in range(n)]
    sources = copy_tree(nodes)
    assert list(sources) == nodes and list(sources.values()).count(None) == 1 and sources[nodes[0]] is None
    got = rounds(sources)
    assert max(got.values()) == want_rounds
    for node, source in sources.items():
        if source is not None:  # a source holds the venv before its receiver copies from it
            assert nodes.index(source) < nodes.index(node) and got[source] < got[node]
    # each holder sends to at most one node per round, and the waits are on earlier rounds only
    sends = [(source, got[node]) for node, source in sources.items() if source is not None]
    assert len(sends) == len(set(sends))
    for node, waits in copy_waits(sources).items():
        assert all(got[w] < got[node] for w in waits) and (waits[:1] == [sources[node]] if waits else
                                                           sources[node] is None)


def test_no_node_no_tree():
    assert copy_tree([]) == {}
