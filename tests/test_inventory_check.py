"""Preflight's inventory check (noderig.inventory_check) and the copy key's text
(noderig.copykey): hostile values for every setting that reaches a shell or a unit are
refused with one sentence naming the setting and the value; good values pass."""

from __future__ import annotations

import runpy
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from noderig import copykey
from noderig.errors import NoderigError
from noderig.inventory_check import (UNIT_MARKER, address_problems, location_problem, problems, state_dir_problem,
                                     unit_owner_problem)
from noderig.server_settings import ServerSettings
from noderig.unit import render_unit
from operations.environment import reach_command
from operations.preflight import unit_files

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = {k: v for k, v in runpy.run_path(str(ROOT / "inventory/group_data/all.py")).items()
            if not k.startswith("_")}
TARGET = {**DEFAULTS, "ssh_hostname": "10.0.0.12", "ssh_user": "root"}


def check(**changes) -> list[str]:
    return problems({**TARGET, **changes}, "b300")


def test_the_shipped_defaults_and_the_lab_inventory_pass():
    assert check() == []
    assert check(hf_endpoint="http://10.231.116.254:8080", allow_insecure_hub_http=True, gpus_required=0,
                 lab=True) == []


# (setting, hostile value): every setting whose value reaches a shell, a unit, a URL or a
# command line of the deploy.
INJECTIONS = [
    ("ssh_hostname", "127.0.0.1$(touch /tmp/x)"),
    ("ssh_hostname", "10.0.0.12; touch /tmp/x"),
    ("ssh_hostname", '10.0.0.12" ssh-ed25519 AAAA'),
    ("ssh_hostname", "-oProxyCommand=touch /tmp/x"),
    ("ssh_hostname", "host\nname"),
    ("ssh_port", "22; touch /tmp/x"),
    ("ssh_port", 0),
    ("ssh_port", 70000),
    ("ssh_port", True),
    ("venv_path", "/opt/venv$(touch /tmp/x)"),
    ("venv_path", "/opt/sglang/venv\nExecStartPre=/bin/sh"),
    ("venv_path", "/opt/my venv"),
    ("venv_path", "opt/venv"),
    ("venv_path", "/opt/../etc"),
    ("model_dir", "/models/`id`"),
    ("model_dir", '/models/"x"'),
    ("model_dir", "/models/x/../../etc"),
    ("draft_dir", "/models/d;id"),
    ("service_name", "sglang; touch /tmp/x"),
    ("service_name", "../../etc/passwd"),
    ("service_name", "sglang\n[Service]"),
    ("service_name", "-sglang"),
    ("served_model_name", "kimi $(id)"),
    ("server_host", "0.0.0.0 --api-key x"),
    ("server_port", "30000; id"),
    ("hf_endpoint", "https://hub.example/$(touch /tmp/x)"),
    ("hf_endpoint", "https://hub.example/$(id)"),
    ("hf_endpoint", "https://user:secret@hub.example"),
    ("hf_endpoint", "file:///etc/passwd"),
    ("hf_endpoint", "https://hub.example\nX: y"),
    ("model_repo", "org/name;id"),
    ("model_repo", "../../etc"),
    ("draft_repo", "org/$(id)"),
    ("model_revision", "main;id"),
    ("model_revision", "../../x"),
    ("draft_revision", "-oX"),
    ("checkpoint_patterns", ["../../*.py"]),
    ("checkpoint_patterns", ["/etc/*"]),
    ("checkpoint_patterns", ["*.py\n"]),
    ("checkpoint_patterns", "*.safetensors"),
    ("venv_import_check", "sglang; import os; os.system('touch /tmp/x')"),
    ("venv_import_check", "sglang\nimport os"),
    ("packages", ["-oAPT::Update::Pre-Invoke::=touch /tmp/x"]),
    ("packages", ["aria2 curl"]),
    ("cuda_packages", ["cuda;id"]),
    ("packages", "aria2"),
    ("extra_flags", ["--x\n--y"]),
    ("extra_flags", "--enable-metrics"),
    ("server_environment", {"X": "a\nExecStart=/bin/sh"}),
    ("server_environment", {"X;id": "1"}),
    ("reasoning_parser", "kimi_k2 --x"),
    ("attention_backend", "flashinfer$(id)"),
    ("sglang_version", "0.5;id"),
    ("hf_token_file", "tok\nen"),
    ("api_key_file", ["x"]),
    ("reference_host", ""),
    ("venv_transfer", "scp"),
]


@pytest.mark.parametrize("key,value", INJECTIONS, ids=[f"{k}={v!r}".replace("\\", "%")[:50] for k, v in INJECTIONS])
def test_a_hostile_value_is_refused_with_a_sentence_naming_it(key, value):
    found = check(**{key: value})
    assert found, f"{key}={value!r} was accepted"
    parts = [*value.keys(), *value.values()] if isinstance(value, dict) else value if isinstance(value, list) else []
    shown = [repr(v) for v in [value, *parts]]
    named = [p for p in found if key in p and any(r in p for r in shown)]
    assert named, found
    assert all("\n" not in p for p in named)  # one sentence, the value shown escaped


# One bad value for every setting in inventory/group_data/all.py: a new setting without a
# check fails test_every_setting_of_all_py_is_checked until it gets one here.
BAD = {
    "reference_host": None, "venv_path": "/opt/v env", "venv_import_check": "a b", "venv_transfer": "ftp",
    "hf_endpoint": "http://hub.example", "allow_insecure_hub_http": "yes", "hf_token_file": "",
    "model_repo": "a/b/c", "model_revision": "", "model_dir": "/", "draft_repo": "", "draft_revision": None,
    "draft_dir": "/etc", "checkpoint_patterns": [], "aria2_connections": 0, "aria2_jobs": 0, "packages": ["A"],
    "cuda_packages": [" "], "gpus_required": -1, "service_name": "a b", "served_model_name": "",
    "server_host": "a b", "server_port": 0, "tp_size": 0, "ep_size": 3, "trust_remote_code": "yes",
    "reasoning_parser": "a b", "tool_call_parser": "a b", "mem_fraction_static": 2,
    "attention_backend": "a b", "skip_server_warmup": 1, "speculative": "x", "ddtree_budget": 0,
    "page_size": 0, "extra_flags": [1], "server_environment": [], "api_key_file": "",
    "sglang_version": 1, "repair": 1, "max_repairs": -1, "start_timeout": 0, "ready_timeout": 0,
    "service_user": "root", "allow_unauthenticated_network_access": "yes", "firewall": "on",
    "firewall_api_allow": ["0.0.0.0/0"], "firewall_peers": ["b300-2"], "firewall_peer_ports": [70000],
    "rollout": "0", "max_fail_percentage": 101,
    "fanout": "yes", "fanout_port": 0, "fanout_address": "b300-2", "fanout_keep_serving": 1,
    "download_first": "no", "checkpoint_beside": "yes", "venv_from_peers": "on",
}


def test_every_setting_of_all_py_is_checked():
    # `steps` is checked by deploy.py itself, before any operation is even built.
    assert set(BAD) == set(DEFAULTS) - {"steps"}
    unnamed = {key: value for key, value in BAD.items() if not any(key in p for p in check(**{key: value}))}
    assert unnamed == {}


@pytest.mark.parametrize("key,value", [
    ("aria2_connections", 0), ("aria2_connections", 17), ("aria2_jobs", "4"), ("gpus_required", -1),
    ("max_repairs", 1.5), ("ready_timeout", 0), ("repair", "yes"), ("allow_insecure_hub_http", "true"),
    ("tp_size", 3), ("mem_fraction_static", 1.5), ("speculative", "medusa"), ("start_timeout", 0),
    ("fanout", 1), ("fanout_port", 65536), ("fanout_address", 167772161), ("fanout_address", "10.0.0.1 "),
])
def test_types_ranges_and_choices_of_the_other_settings(key, value):
    found = check(**{key: value})
    assert any(f"{key}={value!r}" in p for p in found), found


@pytest.mark.parametrize("path", ["/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/dev", "/proc",
                                  "/sys", "/run", "/var", "/root", "/home", "/tmp", "/opt", "/srv", "/usr/local",
                                  "/var/lib", "/etc/ssh", "/usr/lib/python3", "/usr/local/lib/noderig",
                                  "/boot/efi", "/root/.ssh", "/home/me/.ssh/x"])
@pytest.mark.parametrize("key", ["venv_path", "model_dir", "draft_dir"])
def test_system_directories_are_refused_as_venv_model_or_draft(key, path):
    found = check(**{key: path})
    assert any(f"{key}={path!r}" in p and ("system directory" in p or ".ssh" in p) for p in found), found


@pytest.mark.parametrize("path", ["/opt/x", "/models/x", "/srv/x", "/var/lib/x", "/data/models/Kimi", "/home/me/venv",
                                  "/usr/local/sglang"])
def test_a_directory_of_its_own_below_a_system_directory_is_fine(path):
    assert location_problem("model_dir", path) is None


@pytest.mark.parametrize("changes", [
    {"draft_dir": "/models/Kimi-K2.6"},                                   # same as model_dir
    {"model_dir": "/opt/sglang/venv/models"},                             # inside the venv
    {"draft_dir": "/opt/sglang/venv/draft"},
    {"venv_path": "/models/Kimi-K2.6/venv"},                              # venv inside the checkpoint
    {"draft_dir": "/models/Kimi-K2.6/draft"},                             # draft inside the checkpoint
])
def test_the_venv_the_model_and_the_draft_do_not_overlap(changes):
    found = check(**changes)
    assert any("one is inside the other" in p for p in found), found


def test_a_draft_dir_is_not_needed_without_speculative_decoding():
    assert check(speculative="none", draft_dir=None, attention_backend="flashinfer", page_size=None) == []


def test_plain_http_to_the_hub_needs_the_setting_that_says_so():
    found = check(hf_endpoint="http://mirror.internal:8080")
    assert len(found) == 1 and "allow_insecure_hub_http = True" in found[0] and "in clear" in found[0]
    assert check(hf_endpoint="http://mirror.internal:8080", allow_insecure_hub_http=True) == []
    # the setting allows http, nothing else
    assert check(hf_endpoint="ftp://mirror.internal", allow_insecure_hub_http=True)


def test_the_reference_address_is_checked_as_well():
    assert address_problems({"ssh_hostname": "10.0.0.11"}, "ct200") == []
    assert address_problems({}, "ct200") == []  # the inventory name is the address
    found = address_problems({"ssh_hostname": "a b"}, "ct200")
    assert found and "host ct200" in found[0]
    assert address_problems({"ssh_hostname": "::1", "ssh_port": 2222}, "ct200") == []


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_an_accepted_address_has_no_character_a_shell_or_ssh_option_would_read(text):
    found = address_problems({"ssh_hostname": text}, "b300")
    if not found:
        assert not set(text) & set(" \t\n\r$`;&|<>()'\"\\,*?!{}[]=#~"), text
        assert not text.startswith("-")
    else:
        assert len(found) == 1 and repr(text) in found[0]


@pytest.mark.parametrize("key, value", [
    ("fanout_address", "fd00::1%x;\n    }\n    server { listen 80; autoindex on; }"),  # the peers' nginx allow line
    ("fanout_address", "fe80::1%eth0"),  # nginx and nft take no zone
    ("ssh_hostname", 'fe80::1%a",command="sh -c id'),  # the copy key's from="..." option
    ("server_host", "::%x y"),
])
def test_an_ipv6_zone_index_is_no_way_to_smuggle_text(key, value):
    # Python's ipaddress takes any text after an IPv6 zone's "%" (spaces, quotes, newlines)
    found = [p for p in check(**{key: value}) if key in p]
    assert len(found) == 1 and repr(value) in found[0], found


def test_an_ipv6_zone_that_names_an_interface_is_a_host():
    assert check(ssh_hostname="fe80::1%eth0") == []


# -- the unit noderig would overwrite ----------------------------------------------------------


def test_the_rendered_unit_carries_the_marker_preflight_looks_for():
    s = ServerSettings.from_inventory(TARGET)
    assert render_unit(s, "0.5.9").startswith(UNIT_MARKER)


def test_a_unit_noderig_did_not_write_is_refused():
    ssh = unit_files(["file=/lib/systemd/system/ssh.service\t[Unit]", "done="])
    found = unit_owner_problem("ssh", ssh)
    assert "service_name='ssh'" in found and "noderig did not write" in found and "/lib/systemd/system" in found
    masked = unit_files(["file=/etc/systemd/system/sglang.service\t", "done="])  # a link to /dev/null
    assert "noderig did not write" in unit_owner_problem("sglang", masked)
    ours = unit_files([f"file=/etc/systemd/system/sglang.service\t{UNIT_MARKER} (noderig.unit.render_unit)", "done="])
    assert unit_owner_problem("sglang", ours) is None
    assert unit_owner_problem("sglang", unit_files(["done="])) is None  # no unit yet


@pytest.mark.parametrize("state", ["root directory", "root symbolic link", "dpkg directory", "UNKNOWN directory"])
def test_a_state_directory_that_is_not_the_servers_is_refused(state):
    # StateDirectory=<service_name> makes systemd chown /var/lib/<service_name> and everything in it
    # to the server's user: service_name='dpkg' would hand it dpkg's database (and root on the next apt)
    files = unit_files([f"state={state}", "done="])
    found = state_dir_problem("dpkg", "sglang", files)
    assert found and "service_name='dpkg'" in found and "/var/lib/dpkg" in found and "service_user 'sglang'" in found


def test_the_servers_own_state_directory_passes():
    assert state_dir_problem("sglang", "sglang", unit_files(["done="])) is None  # first deploy: not there yet
    assert state_dir_problem("sglang", "sglang", unit_files(["state=sglang directory", "done="])) is None
    # a rerun that changed service_user: the directory is noderig's unit's, systemd hands it over
    ours = unit_files([f"file=/etc/systemd/system/sglang.service\t{UNIT_MARKER}", "state=sglang directory", "done="])
    assert state_dir_problem("sglang", "llm", ours) is None
    assert state_dir_problem("sglang", "llm", unit_files(["state=sglang directory", "done="]))


@pytest.mark.parametrize("name", ["noderig", "noderig-aria2", "noderig-peers", "noderig-firewall"])
def test_a_service_name_of_noderigs_own_is_refused(name):
    # /var/lib/noderig holds the last known good state (root's), noderig-aria2/-peers are its transient units
    found = [p for p in check(service_name=name) if "service_name" in p]
    assert len(found) == 1 and f"service_name={name!r}" in found[0] and "noderig's own" in found[0]


def test_a_unit_file_that_cannot_be_read_or_a_failed_systemctl_is_an_error_not_absent():
    found = unit_owner_problem("sglang", unit_files(["unreadable=/etc/systemd/system/sglang.service", "done="]))
    assert found and "could not read /etc/systemd/system/sglang.service" in found
    found = unit_owner_problem("sglang", unit_files(["error=systemctl show sglang.service: Failed to connect to bus"]))
    assert found and "Failed to connect to bus" in found
    found = unit_owner_problem("sglang", unit_files([]))  # the script did not run to its end
    assert found and "did not complete" in found


# -- the copy key ------------------------------------------------------------------------------

PUB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv6yq1o3r5rkY0d0wJ3i3mQ2GJ8n4z3l6g7h8j9k0lm"


def test_the_copy_key_receives_into_the_venv_only_from_the_reference_until_it_expires():
    line = copykey.authorized_line(PUB, "noderig-transient-b300-abc", ["10.0.0.11"], "/opt/sglang/venv",
                                   "202612022030Z")
    assert line == ('restrict,command="/usr/bin/rrsync -wo /opt/sglang/venv",from="10.0.0.11",'
                    f'expiry-time="202612022030Z" {PUB} noderig-transient-b300-abc')


@pytest.mark.parametrize("address", ['10.0.0.11",command="sh', "10.0.0.11 ssh-ed25519 X", "a\nb", "*", "1.2.3.4,*"])
def test_the_copy_key_refuses_an_address_that_would_change_its_options(address):
    with pytest.raises(NoderigError, match="not an IP address or a host name"):
        copykey.authorized_line(PUB, "t", [address], "/opt/sglang/venv", "202612022030Z")


@pytest.mark.parametrize("venv", ['/opt/v" x', "/opt/v\n", "/", "/opt/../etc", "/opt/v venv"])
def test_the_copy_key_refuses_a_venv_that_would_change_its_command(venv):
    with pytest.raises(NoderigError):
        copykey.authorized_line(PUB, "t", ["10.0.0.11"], venv, "202612022030Z")


def test_the_expiry_is_minutes_ahead_and_grows_with_the_copy():
    now = 1796243400  # 2026-12-02 20:30:00 UTC
    assert copykey.expiry(now, 0) == "202612022035Z"
    assert copykey.expiry(now, 20 * 2**20 * 600) == "202612022045Z"  # + 10 min at the assumed rate
    assert copykey.expiry(now + 1, 0) == "202612022036Z"  # rounded up, never early


def test_known_hosts_uses_the_bracket_form_for_another_port():
    key = PUB + " root@b300"
    assert copykey.known_hosts_line("10.0.0.12", 22, key) == f"10.0.0.12 {PUB}\n"
    assert copykey.known_hosts_line("10.0.0.12", 2222, key) == f"[10.0.0.12]:2222 {PUB}\n"
    with pytest.raises(NoderigError):
        copykey.known_hosts_line("10.0.0.12", 22, "ssh-ed25519 AAAA\n* ssh-rsa BBBB")
    with pytest.raises(NoderigError):
        copykey.known_hosts_line("10.0.0.12 *", 22, key)


def test_the_rsync_destination_is_the_rrsync_root():
    assert copykey.rsync_destination("10.0.0.12") == "root@10.0.0.12:/"
    assert copykey.rsync_destination("fd00::12") == "root@[fd00::12]:/"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_the_copy_key_line_is_one_line_with_exactly_its_four_options(address, venv):
    try:
        line = copykey.authorized_line(PUB, "t", [address], "/" + venv, "202612022030Z")
    except NoderigError:
        return
    assert "\n" not in line and "\r" not in line
    assert line.count('"') == 6, line  # command, from and expiry-time values only
    assert line.startswith('restrict,command="')


def test_the_reachability_probe_passes_a_hostile_address_as_an_argument(tmp_path):
    """Run for real: the probe, built for an address that is a command substitution, runs
    no command (it only fails to connect)."""
    marker = tmp_path / "x"
    cmd = reach_command(f"127.0.0.1$(touch {marker})", 22).get_raw_value()
    subprocess.run(["sh", "-c", cmd], capture_output=True, timeout=30)
    cmd = reach_command("127.0.0.1", f"22$(touch {marker})").get_raw_value()
    subprocess.run(["sh", "-c", cmd], capture_output=True, timeout=30)
    assert not marker.exists()
