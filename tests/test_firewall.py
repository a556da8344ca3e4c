"""The node firewall's ruleset, rendered from inventory settings (pure: no lab). The lab test
(tests/test_trust_server.py) loads it into a real nftables and knocks from another host."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noderig.firewall import (TABLE, FirewallSettings, load_script, persist_unit, problems, render_table, rules,
                              same_table)

DEFAULT = """\
table inet noderig {
\tcomment "noderig node firewall: every port but SSH, the API and fleet peers closed"
\tchain input {
\t\ttype filter hook input priority filter; policy accept;
\t\tiifname "lo" accept
\t\tct state established,related accept
\t\ttcp flags ! syn ct state new accept
\t\ttcp dport 22 accept
\t\tudp sport 67 udp dport 68 accept
\t\tip6 saddr fe80::/10 udp dport 546 accept
\t\ttcp dport 30000 accept
\t\tmeta l4proto tcp reject with tcp reset
\t\tmeta l4proto udp reject
\t}
}
"""


def test_the_default_opens_ssh_and_the_api_to_any_host_and_closes_every_other_port():
    assert render_table(FirewallSettings(api_port=30000)) == DEFAULT


def test_the_api_allowlist_gets_one_rule_per_network_normalised_and_sorted_v4_first():
    fw = FirewallSettings(api_port=30000, api_allow=["fd00::1/8", "10.0.1.5/24", "10.0.0.7", "2001:db8::1/128",
                                                     "10.0.0.7/32"])
    assert [r for r in rules(fw) if "dport 30000" in r] == [
        "ip saddr 10.0.0.7 tcp dport 30000 accept",
        "ip saddr 10.0.1.0/24 tcp dport 30000 accept",
        "ip6 saddr 2001:db8::1 tcp dport 30000 accept",
        "ip6 saddr fd00::/8 tcp dport 30000 accept",
    ]
    assert "tcp dport 30000 accept" not in rules(fw), "with an allowlist the API is not open to any host"


def test_peers_get_every_port_or_only_the_listed_ones():
    every = rules(FirewallSettings(api_port=30000, peers=["10.9.0.3", "10.9.0.2"]))
    assert [r for r in every if "l4proto { tcp, udp }" in r] == [
        "ip saddr 10.9.0.2 meta l4proto { tcp, udp } accept", "ip saddr 10.9.0.3 meta l4proto { tcp, udp } accept"]
    some = rules(FirewallSettings(api_port=30000, peers=["10.9.0.2"], peer_ports=["25000-25100", 5000, "5000-5000"]))
    assert [r for r in some if "th dport" in r] == [
        "ip saddr 10.9.0.2 meta l4proto { tcp, udp } th dport 5000 accept",
        "ip saddr 10.9.0.2 meta l4proto { tcp, udp } th dport 25000-25100 accept"]


def test_a_fan_out_opens_its_port_to_the_fleet_peers_only_and_only_while_it_is_set():
    fw = FirewallSettings(api_port=30000, fanout_port=8378, fanout_peers=["10.9.0.3", "10.9.0.2"])
    assert rules(fw)[-4:] == ["ip saddr 10.9.0.2 tcp dport 8378 accept", "ip saddr 10.9.0.3 tcp dport 8378 accept",
                              "meta l4proto tcp reject with tcp reset", "meta l4proto udp reject"]
    assert not [r for r in rules(FirewallSettings(api_port=30000)) if "8378" in r]


def test_rules_end_in_the_reject_and_open_nothing_after_it():
    got = rules(FirewallSettings(api_port=8000, peers=["10.0.0.2"], api_allow=["10.0.0.0/8"]))
    assert got[-2:] == ["meta l4proto tcp reject with tcp reset", "meta l4proto udp reject"]
    assert got[:3] == ['iifname "lo" accept', "ct state established,related accept",
                       "tcp flags ! syn ct state new accept"]


def test_ssh_stays_open_on_every_port_sshd_uses():
    got = rules(FirewallSettings(api_port=30000, ssh_ports=[2222, 22, 22]))
    assert [r for r in got if r.startswith("tcp dport 2")] == ["tcp dport 22 accept", "tcp dport 2222 accept"]


def test_the_load_script_replaces_only_noderigs_table_in_one_transaction():
    script = load_script(DEFAULT)
    body = [line for line in script.splitlines() if not line.startswith("#")]
    assert body[:3] == [f"table {TABLE}", f"delete table {TABLE}", f"table {TABLE} {{"]
    assert "flush ruleset" not in script and "ruleset" not in " ".join(body)
    assert {line.split("{")[0].strip() for line in body if line.startswith("table")} == {f"table {TABLE}"}


def test_the_live_listing_compares_whatever_its_indentation():
    live = "\n".join("    " + line.strip() for line in DEFAULT.splitlines())
    assert same_table(live, DEFAULT)
    assert not same_table(None, DEFAULT)
    flushed = DEFAULT.replace("\t\ttcp dport 30000 accept\n", "")
    assert not same_table(flushed, DEFAULT)


def test_a_node_without_etc_protocols_lists_protocols_by_number_and_still_compares_equal():
    fw = FirewallSettings(api_port=30000, peers=["10.0.0.2"])
    want = render_table(fw)
    numeric = want.replace("l4proto tcp", "l4proto 6").replace("l4proto udp", "l4proto 17").replace(
        "l4proto { tcp, udp }", "l4proto { 6, 17 }")
    assert numeric != want and same_table(numeric, want)
    assert not same_table(numeric.replace("l4proto 17 reject", "l4proto 1 reject"), want)


def test_the_boot_unit_loads_the_file_after_debians_nftables_service():
    unit = persist_unit()
    assert "ExecStart=/usr/sbin/nft -f /etc/noderig/firewall.nft" in unit
    assert "After=nftables.service" in unit and "Before=network-pre.target" in unit


@pytest.mark.parametrize("key, value, words", [
    ("api_allow", ["10.0.0.0/8; flush ruleset"], "firewall_api_allow[0]"),
    # Python's ipaddress takes any text after an IPv6 zone's "%": it reached the nft file as written
    ("api_allow", ["fe80::1%x tcp dport 22 accept\n\t\tmeta l4proto tcp accept"], "firewall_api_allow[0]"),
    ("api_allow", ["fe80::1%eth0"], "zone index"),
    ("peers", ["fe80::%x; flush ruleset"], "firewall_peers[0]"),
    ("api_allow", ["0.0.0.0/0"], "/0 network is every host"),
    ("api_allow", "10.0.0.1", "must be a list"),
    ("peers", ["::/0"], "firewall_peers[0]"),
    ("peers", [7], "firewall_peers[0]=7"),
    ("peers", ["b300-2"], "firewall_peers[0]='b300-2'"),
    ("peer_ports", ["1-2-3"], "firewall_peer_ports[0]"),
    ("peer_ports", [70000], "firewall_peer_ports[0]=70000"),
    ("peer_ports", ["200-100"], "firewall_peer_ports[0]"),
    ("peer_ports", [True], "firewall_peer_ports[0]=True"),
])
def test_bad_settings_are_named_one_sentence_each(key, value, words):
    fw = FirewallSettings(api_port=30000, peers=["10.0.0.2"])
    setattr(fw, key, value)
    found = problems(fw)
    assert len(found) == 1 and words in found[0] and "\n" not in found[0], found


def test_peer_ports_without_peers_are_refused():
    assert problems(FirewallSettings(api_port=30000, peer_ports=[5000])) == [
        "firewall_peer_ports is set but firewall_peers is empty: name the peers the ports are for"]


def test_multi_node_serving_needs_the_peers_named():
    found = problems(FirewallSettings(api_port=30000, nnodes=2))
    assert len(found) == 1 and found[0].startswith("nnodes=2 serves across nodes") and "firewall_peers" in found[0]
    assert problems(FirewallSettings(api_port=30000, nnodes=2, peers=["10.0.0.3"])) == []


def test_good_settings_have_no_problem():
    assert problems(FirewallSettings(api_port=30000, api_allow=["10.0.0.0/8", "fd00::/8"], peers=["10.0.0.2"],
                                     peer_ports=[5000, "25000-25100"], ssh_ports=[22, 2222])) == []


ports = st.one_of(st.integers(1, 65535), st.tuples(st.integers(1, 65535), st.integers(0, 500)).map(
    lambda t: f"{t[0]}-{min(65535, t[0] + t[1])}"))


def _covered(values) -> set[int]:
    found = set()
    for v in values:
        low, high = (int(v), int(v)) if "-" not in str(v) else map(int, v.split("-"))
        found.update(range(low, high + 1))
    return found


@given(st.lists(ports, min_size=1, max_size=8))
def test_peer_rules_cover_exactly_the_listed_ports_in_order(values):
    fw = FirewallSettings(api_port=30000, peers=["10.0.0.2"], peer_ports=values)
    assert problems(fw) == []
    listed = [r.split("th dport ")[1].removesuffix(" accept") for r in rules(fw) if "th dport" in r]
    assert _covered(listed) == _covered(values)
    assert len(listed) == len(set(listed))
    assert listed == sorted(listed, key=lambda p: tuple(int(x) for x in p.split("-")))


@given(st.lists(st.ip_addresses(v=4).map(str), min_size=1, max_size=6))
def test_rendering_is_deterministic_whatever_the_order(addresses):
    a = render_table(FirewallSettings(api_port=30000, api_allow=addresses))
    b = render_table(FirewallSettings(api_port=30000, api_allow=list(reversed(addresses))))
    assert a == b


# --- the facts the firewall and the server user are decided from -----------------------------------


def test_the_sshd_ports_come_from_ss_and_nothing_else_listening():
    from operations.facts import SshdPorts

    lines = ['LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=36,fd=3))',
             'LISTEN 0 128 [::]:2222 [::]:* users:(("sshd",pid=36,fd=4))',
             'LISTEN 0 16 0.0.0.0:30100 0.0.0.0:* users:(("python",pid=694,fd=8))']
    assert SshdPorts().process(lines) == [22, 2222]


def test_the_live_table_fact_tells_no_nft_from_no_table():
    from operations.facts import NftTable

    assert NftTable().process(["#no-nft"]) == {"nft": False, "table": None, "error": None}
    assert NftTable().process(["#absent"]) == {"nft": True, "table": None, "error": None}
    assert NftTable().process(DEFAULT.splitlines())["table"].splitlines() == DEFAULT.splitlines()


def test_the_system_user_fact_reads_the_passwd_entry():
    from operations.facts import SystemUser

    assert SystemUser().process([]) is None
    assert SystemUser().process(["sglang:x:998:998:SGLang server (noderig):/var/lib/sglang:/usr/sbin/nologin"]) == {
        "name": "sglang", "uid": 998, "gid": 998, "home": "/var/lib/sglang", "shell": "/usr/sbin/nologin"}
