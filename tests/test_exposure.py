"""Who can reach the server: the exposure rule, every combination of host, key and the
explicit allow setting (pure: no lab)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noderig.exposure import LOOPBACK, REFUSED, UNAUTHENTICATED, WITH_KEY, decide, is_loopback

LOOPBACK_HOSTS = ["127.0.0.1", "127.8.9.10", "::1", "localhost", "LOCALHOST", "localhost."]
NETWORK_HOSTS = ["0.0.0.0", "::", "10.0.0.5", "192.168.1.20", "fd00::5", "b300.example.net", "127.0.0.1.nip.io"]
ALLOW_VALUES = [False, True, None, "yes", 1]


@pytest.mark.parametrize("allow", ALLOW_VALUES)
@pytest.mark.parametrize("key", [None, "", "/home/me/.config/noderig/api_key"])
@pytest.mark.parametrize("host", LOOPBACK_HOSTS + NETWORK_HOSTS)
def test_every_combination(host, key, allow):
    got = decide(host, 30000, key, allow)
    if host in LOOPBACK_HOSTS:
        want = LOOPBACK
    elif key:
        want = WITH_KEY
    elif allow is True:  # only the explicit boolean: "yes" or 1 is not a decision
        want = UNAUTHENTICATED
    else:
        want = REFUSED
    assert got.kind == want
    assert got.refused == (want == REFUSED)


def test_the_refusal_names_the_host_the_port_and_every_way_out():
    sentence = decide("0.0.0.0", 30000, None, False).sentence
    assert "server_host='0.0.0.0'" in sentence and "port 30000" in sentence
    for way_out in ("api_key_file", "server_host='127.0.0.1'", "allow_unauthenticated_network_access=True"):
        assert way_out in sentence
    assert "\n" not in sentence


def test_the_dry_run_sentence_says_which():
    assert "loopback only" in decide("127.0.0.1", 30000, None, False).sentence
    assert "with an API key" in decide("0.0.0.0", 30000, "/k", False).sentence
    assert "WITHOUT an API key" in decide("0.0.0.0", 30000, None, True).sentence


def test_the_default_inventory_is_loopback():
    from pathlib import Path

    defaults = {}
    exec((Path(__file__).parents[1] / "inventory/group_data/all.py").read_text(), defaults)
    got = decide(defaults["server_host"], defaults["server_port"], defaults["api_key_file"],
                 defaults["allow_unauthenticated_network_access"])
    assert got.kind == LOOPBACK
    assert defaults["allow_unauthenticated_network_access"] is False


@given(st.ip_addresses())
def test_any_address_outside_loopback_without_a_key_is_refused(address):
    got = decide(str(address), 30000, None, False)
    assert got.refused == (not address.is_loopback)
    assert is_loopback(str(address)) == address.is_loopback


@pytest.mark.parametrize("value", [None, 127, ["127.0.0.1"], b"127.0.0.1"])
def test_a_host_that_is_not_text_is_not_loopback(value):
    assert decide(value, 30000, None, False).refused
