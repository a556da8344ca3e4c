"""Every operation's decisions, without a host: given facts, the commands it yields or the
reason it changes nothing (pyinfra's own way of testing operations). The lab tier runs the
same operations end to end."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from pyinfra.context import ctx_host

from noderig.firewall import FirewallSettings, render_table
from noderig.rollout import checkpoint_generation
from noderig.manifest import RepoPin
from noderig.server_settings import ServerSettings
from operations import checkpoint, diagnosis, environment, firewall, packages, preflight, service, util
from operations.packages import APT
from tests.fakehost import Data, FakeHost, describe, fact, run_op
from tests.test_inventory_check import TARGET
from tests.test_standin import STANDIN

APT_LINE = " ".join(APT)

# --------------------------------------------------------------------------------------------
# packages.present


def test_packages_all_installed_is_a_no_op():
    host = FakeHost({"DebPackages": {"aria2": ["1.36"], "rsync": ["3.2"]}, "DpkgAudit": []})
    assert run_op(packages.present, host, ["aria2", "rsync", "aria2"]) == []
    assert host.noops == ["3 packages installed: aria2, rsync, aria2"]


def test_only_missing_packages_are_installed_after_refreshing_the_lists():
    host = FakeHost({"DebPackages": {"rsync": ["3.2"]}, "DpkgAudit": []})
    assert run_op(packages.present, host, ["python3-dev", "rsync", "aria2"]) == [
        f"{APT_LINE} update",
        f"{APT_LINE} install --no-install-recommends -o Dpkg::Options::=--force-confdef "
        "-o Dpkg::Options::=--force-confold python3-dev aria2",
    ]


def test_the_package_lists_are_refreshed_once_per_run_on_a_host():
    # The aria2 step before the download refreshed them: the other prerequisites, seconds
    # later, are installed without a second `apt-get update`; another host, or the next
    # phase of the run (pyinfra runs each step's body again when it executes), refreshes its own.
    host = FakeHost({"DebPackages": {}, "DpkgAudit": []})
    assert run_op(packages.present, host, ["aria2"])[0] == f"{APT_LINE} update"
    assert [c.split(" ")[-1] for c in run_op(packages.present, host, ["python3-dev"])] == ["python3-dev"]
    other = FakeHost({"DebPackages": {}, "DpkgAudit": []})
    other.state = host.state
    other.name = "b300-2"
    assert run_op(packages.present, other, ["python3-dev"])[0] == f"{APT_LINE} update"
    host.state.is_executing = not host.state.is_executing
    assert run_op(packages.present, host, ["aria2"])[0] == f"{APT_LINE} update"


def test_an_interrupted_dpkg_run_is_finished_first_even_with_nothing_missing():
    host = FakeHost({"DebPackages": {"aria2": ["1.36"]}, "DpkgAudit": ["The following packages are only half configured"]})
    (command,) = run_op(packages.present, host, ["aria2"])
    # After waiting for dpkg's lock: the "interrupted" run may be an apt still going.
    assert command.startswith("python3 -c ") and "fcntl.lockf" in command
    assert command.endswith("&& DEBIAN_FRONTEND=noninteractive dpkg --configure -a --force-confdef --force-confold")


def test_a_package_name_reaches_apt_as_one_quoted_argument():
    host = FakeHost({"DebPackages": {}, "DpkgAudit": []})
    commands = run_op(packages.present, host, ["aria2; touch /tmp/x"])
    assert commands[-1].endswith("'aria2; touch /tmp/x'")


# --------------------------------------------------------------------------------------------
# service.text_file


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def text_facts(path: str, content: str | None, mode: str | None) -> dict:
    return {fact("Sha256", path=path): None if content is None else sha(content), fact("FileMode", path=path): mode,
            fact("FileText", path=path): content}


def test_a_text_file_with_the_right_bytes_and_mode_is_a_no_op():
    host = FakeHost(text_facts("/etc/x", "a\n", "644"))
    assert run_op(service.text_file, host, "/etc/x", "a\n") == []
    assert host.noops == ["/etc/x is up to date"]


@pytest.mark.parametrize("content,mode", [(None, None), ("old\n", "644"), ("a\n", "600")],
                         ids=["absent", "other-bytes", "other-mode"])
def test_a_text_file_is_replaced_atomically_with_its_mode_set_before_the_bytes(content, mode):
    host = FakeHost(text_facts("/etc/x", content, mode))
    assert run_op(service.text_file, host, "/etc/x", "a\n", mode="644") == [
        "install -d -m 755 /etc && install -m 644 /dev/null /etc/x.noderig-tmp",
        "upload -> /etc/x.noderig-tmp",
        "chmod 644 /etc/x.noderig-tmp && mv -f /etc/x.noderig-tmp /etc/x",
    ]


# --------------------------------------------------------------------------------------------
# service.running

INPUTS = {"unit": "/etc/systemd/system/sglang.service", "environment": "/etc/noderig/sglang.env"}
STARTED = 1_800_000_000.0


def unit_facts(active="active", enabled="enabled", started=STARTED, need_reload=False, unit_mtime=STARTED - 60):
    return {fact("UnitStatus", unit="sglang.service"): {"active": active, "enabled": enabled, "started": started,
                                                          "need_reload": need_reload},
            fact("Mtimes", paths=tuple(INPUTS.values())): {INPUTS["unit"]: unit_mtime,
                                                          INPUTS["environment"]: STARTED - 60}}


def test_a_running_service_with_nothing_newer_is_a_no_op():
    host = FakeHost(unit_facts())
    assert run_op(service.running, host, "sglang", INPUTS) == []
    assert host.noops and host.noops[0].startswith("sglang: running since")


def test_a_stopped_service_is_started_and_a_disabled_one_enabled():
    host = FakeHost(unit_facts(active="inactive", enabled="disabled"))
    assert run_op(service.running, host, "sglang", INPUTS) == [
        "systemctl reset-failed sglang.service 2>/dev/null ; systemctl start sglang.service",
        "systemctl enable sglang.service",
    ]


def test_a_unit_written_after_the_start_restarts_it_once_after_a_reload():
    host = FakeHost(unit_facts(need_reload=True, unit_mtime=STARTED + 5))
    assert run_op(service.running, host, "sglang", INPUTS) == [
        "systemctl daemon-reload", "systemctl restart sglang.service"]


# --------------------------------------------------------------------------------------------
# diagnosis.wait_until_serving


def test_a_healthy_server_is_left_alone():
    host = FakeHost({fact("UnitStatus", unit="sglang.service"): {"active": "active"},
                     fact("HttpStatus", url="http://127.0.0.1:30000/health"): 200})
    assert run_op(diagnosis.wait_until_serving, host, "sglang", 30000, "kimi") == []
    assert host.noops == ["sglang is up and healthy on port 30000"]


@pytest.mark.parametrize("active,health", [("active", 503), ("active", 0), ("failed", None)])
def test_a_server_not_yet_healthy_is_waited_for(active, health):
    facts = {fact("UnitStatus", unit="sglang.service"): {"active": active}}
    if health is not None:
        facts[fact("HttpStatus", url="http://127.0.0.1:30000/health")] = health
    assert run_op(diagnosis.wait_until_serving, FakeHost(facts), "sglang", 30000, "kimi") == ["call _launch_until_ready"]


class Node(FakeHost):
    """A node whose shell answers a failed launch: the wait script times out (exit 3, the unit
    died), the journal of the failed invocation is ``journal``, nothing is recorded in repairs."""

    def __init__(self, journal: list[str]):
        super().__init__()
        self.journal, self.ran = journal, []

    def run_shell_command(self, command, **_kwargs):
        text = command.get_raw_value()
        self.ran.append(text)
        if "noderig-wait" in text:
            return False, SimpleNamespace(stdout_lines=[], stderr="")
        if "journalctl" in text:
            tail = ["Result=exit-code", "ExecMainCode=1", "ExecMainStatus=1", "ActiveState=failed"]
            return True, SimpleNamespace(stdout_lines=[*self.journal, diagnosis.RESULT_MARK, *tail], stderr="")
        return True, SimpleNamespace(stdout_lines=[], stderr="")  # cat repairs.json: none recorded


SGL_KERNEL_JOURNAL = [
    "2026-05-02T10:00:01+0000 b300 sglang[42]: ImportError: /opt/sglang/venv/lib/python3.12/site-packages/"
    "sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab",
]


@pytest.mark.parametrize("repair", [True, False])
def test_a_venv_mismatch_is_reported_as_a_manual_fix_and_nothing_is_changed(repair):
    # sgl_kernel_mismatch's remedy is resync_venv: the environment step already made the node's
    # venv identical to the reference's, so the deploy says why the fix is the operator's.
    node = Node(SGL_KERNEL_JOURNAL)
    assert diagnosis._launch_until_ready(None, node, "sglang", 30000, "kimi", 5, None, None, repair, 2) is False
    manual = [m for m in node.logged if m.startswith("the fix for sgl_kernel_mismatch is manual: ")]
    assert len(manual) == 1 and "verifies it identical" in manual[0] and "on the reference host" in manual[0]
    assert not any("rerun with --data repair=true" in m or m.startswith("repaired") for m in node.logged)
    assert not any("systemctl restart" in c or "rsync" in c for c in node.ran)


def test_a_fix_the_deploy_can_apply_is_not_called_manual():
    journal = ["2026-05-02T10:00:01+0000 b300 sglang[42]: /tmp/t/main.c:5:10: fatal error: Python.h: "
               "No such file or directory"]
    node = Node(journal)
    assert diagnosis._launch_until_ready(None, node, "sglang", 30000, "kimi", 5, None, None, False, 2) is False
    assert not any(" is manual: " in m for m in node.logged)
    assert any("rerun with --data repair=true (install python3-dev)" in m for m in node.logged)


def test_a_diagnosis_that_fails_on_the_journal_is_reported_as_a_bug_and_the_launch_as_failed(monkeypatch):
    # the diagnosis is noderig's own code on text it did not write: if it raises, the launch is still reported
    # failed (never passed over), the report says the diagnosis broke and how to read the journal, and no repair
    def broken(_text):
        raise ValueError("max() arg is an empty sequence")

    monkeypatch.setattr("noderig.diagnose.diagnose", broken)
    node = Node(SGL_KERNEL_JOURNAL)
    assert diagnosis._launch_until_ready(None, node, "sglang", 30000, "kimi", 5, None, None, True, 2) is False
    bug = [m for m in node.logged if "could not be diagnosed" in m]
    assert len(bug) == 1 and "ValueError: max() arg is an empty sequence" in bug[0]
    assert "journalctl -u sglang.service" in bug[0] and "a bug in noderig" in bug[0]
    assert not any("systemctl restart" in c or "rsync" in c for c in node.ran)


# --------------------------------------------------------------------------------------------
# environment.venv


class Reference(FakeHost):
    pass


LISTING = {"bin/python": ("l", 7, 1, "777", "python3.11"), "pyvenv.cfg": ("f", 90, 1, "644", "")}


def venv_hosts(node_listing, node_keys=(), reference_keys=()):
    prefix = environment.copy_key_prefix(FakeHost())
    node = FakeHost({fact("TreeListing", root="/opt/v"): node_listing,
                     fact("CopyKeys", prefix=environment.TRANSIENT_TAG): list(node_keys)})
    reference = Reference({fact("TreeListing", root="/opt/v"): LISTING,
                           fact("CopyKeys", prefix=prefix): list(reference_keys)}, name="ct200")
    return node, reference


def test_an_identical_venv_without_leftover_keys_is_a_no_op():
    node, reference = venv_hosts(dict(LISTING))
    assert run_op(environment.venv, node, "/opt/v", reference) == []
    assert node.noops == ["venv /opt/v is identical to ct200's (2 entries)"]


def test_an_identical_venv_with_a_key_a_killed_run_left_only_removes_the_key():
    node, reference = venv_hosts(dict(LISTING), node_keys=["noderig-transient-b300-1a2b"])
    assert run_op(environment.venv, node, "/opt/v", reference) == ["call _remove_copy_keys"]


def test_a_differing_venv_is_copied_verified_and_its_import_checked():
    node, reference = venv_hosts({"pyvenv.cfg": ("f", 90, 1, "644", "")})
    assert run_op(environment.venv, node, "/opt/v", reference, import_check="sglang") == [
        "install -d -m 755 /var/lib/noderig/changes && touch /var/lib/noderig/changes/venv",
        "call _copy", "call _verify_copy", "/opt/v/bin/python -c 'import sglang'"]


def test_a_reference_without_the_venv_fails_the_node_with_a_sentence():
    node, reference = venv_hosts({})
    reference.facts[fact("TreeListing", root="/opt/v")] = {}
    assert run_op(environment.venv, node, "/opt/v", reference) == ["fail: the reference host ct200 has no venv at /opt/v"]


def test_an_unknown_transfer_mode_fails_before_reading_any_fact():
    node = FakeHost({})
    assert run_op(environment.venv, node, "/opt/v", Reference({}), transfer="scp") == [
        "fail: venv_transfer='scp' must be one of auto, direct, relay"]


# --------------------------------------------------------------------------------------------
# checkpoint.fetch (a node whose manifest pins the same commit: no Hub call)

COMMIT = "c" * 40
PIN = RepoPin("org/m", COMMIT, "https://hub.example", ("*.safetensors", "*.json"))
DEST = "/models/m"
MANIFEST = {"version": 1, "repo": "org/m", "revision": COMMIT, "commit": COMMIT, "endpoint": "https://hub.example",
            "gated": False, "patterns": ["*.safetensors", "*.json"], "total_bytes": 1010,
            "files": [{"path": "config.json", "size": 10, "git_oid": "a" * 40},
                      {"path": "model.safetensors", "size": 1000, "sha256": "b" * 64}]}


def node_with(stats: dict, record: dict | None, held: list[str] | None = None, extra: dict | None = None) -> FakeHost:
    """``held``: the files the node's aria2 daemon holds (None: no daemon running)."""
    return FakeHost({checkpoint_state(): {"manifest": MANIFEST, "stats": stats, "record": record, "held": held},
                     **(extra or {})})


def checkpoint_state() -> tuple:
    return fact("CheckpointState", dest=DEST)


def verified(size: int, mtime: float, digest: str) -> dict:
    return {"size": size, "mtime_ns": int(mtime * 1e9), "digest": digest}


STATS = {"config.json": {"size": 10, "mtime": 5.0, "aria2": False},
         "model.safetensors": {"size": 1000, "mtime": 6.0, "aria2": False}}
RECORD = {"config.json": verified(10, 5.0, "a" * 40), "model.safetensors": verified(1000, 6.0, "b" * 64)}


# Before anything is written into the checkpoint, the node checks the listed paths (and
# symlinks) itself, against the manifest it holds (the same as the controller's: not written
# again). A manifest written first is checked twice: its state directory before, its paths after.
NODE_SCRIPTS = ["call _node_scripts_current"]
NODE_CHECKS = [*NODE_SCRIPTS, "call _check_paths"]
NODE_CHECKS_MANIFEST_WRITTEN = [*NODE_SCRIPTS, "call _check_paths", f"upload -> {DEST}/.noderig/manifest.json",
                                "call _check_paths"]


def test_a_verified_checkpoint_is_neither_hashed_nor_fetched():
    host = node_with(STATS, RECORD)
    assert run_op(checkpoint.fetch, host, PIN, DEST) == []
    assert host.noops == [f"org/m@{COMMIT[:12]}: 2 files verified in {DEST}"]


def test_a_file_touched_since_it_was_verified_is_hashed_not_fetched(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {**STATS, "model.safetensors": {"size": 1000, "mtime": 9.0, "aria2": False}}
    commands = run_op(checkpoint.fetch, node_with(stats, RECORD), PIN, DEST)
    assert commands == [*NODE_CHECKS, "call _verify", "call _verify"]


def test_a_manifest_the_node_lacks_is_written_between_two_checks(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    monkeypatch.setattr(checkpoint, "build_manifest", lambda pin, token: MANIFEST)
    monkeypatch.setattr(checkpoint, "_manifests", {})
    host = FakeHost({checkpoint_state(): {"manifest": None, "stats": STATS, "record": RECORD, "held": None}})
    commands = run_op(checkpoint.fetch, host, PIN, DEST)
    assert commands == [*NODE_CHECKS_MANIFEST_WRITTEN, "call _verify"]


def test_the_node_scripts_are_uploaded_once_per_run_on_a_host(monkeypatch):
    # Each checkpoint step (two downloads started, two fetched, the fan-out's server) needs
    # the verifier; the first step of the run uploads it where it differs, the later ones on
    # that host do not ask again. Another host, or the run's next phase, uploads its own.
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {**STATS, "model.safetensors": {"size": 1000, "mtime": 9.0, "aria2": False}}
    host = node_with(stats, RECORD)
    assert run_op(checkpoint.fetch, host, PIN, DEST)[:len(NODE_CHECKS)] == NODE_CHECKS
    assert run_op(checkpoint.fetch, host, PIN, DEST)[0] == "call _check_paths"
    other = node_with(stats, RECORD)
    other.state, other.name = host.state, "b300-2"
    assert run_op(checkpoint.fetch, other, PIN, DEST)[:len(NODE_CHECKS)] == NODE_CHECKS
    host.state.is_executing = not host.state.is_executing
    assert run_op(checkpoint.fetch, host, PIN, DEST)[:len(NODE_CHECKS)] == NODE_CHECKS


def test_a_missing_and_an_oversize_file_are_fetched_the_oversize_one_from_scratch(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {"model.safetensors": {"size": 1001, "mtime": 6.0, "aria2": False}}
    host = node_with(stats, RECORD, extra={fact("FsType", path=DEST): "ext4"})
    commands = run_op(checkpoint.fetch, host, PIN, DEST)
    assert commands[:len(NODE_CHECKS) + 1] == [
        *NODE_CHECKS, "install -d -m 755 /var/lib/noderig/changes && touch /var/lib/noderig/changes/checkpoint"]
    assert f"rm -f {DEST}/model.safetensors" in commands
    assert "rm -f /models/m/config.json" not in commands, "a missing file has nothing to remove"
    forget = next(c for c in commands if c.startswith("python3 -c"))
    assert forget.endswith(f"{DEST}/.noderig/verified.json config.json model.safetensors")
    assert commands[-2:] == ["call _download", "call _verify"]


# --------------------------------------------------------------------------------------------
# preflight.node

INFO = {"os": "debian 12", "python": "3.11.2", "free_bytes": 10 * 2**30, "device": "2049", "gpus": []}


NO_UNIT = {"files": {}, "error": None}


def preflight_hosts(info=INFO, base_python="3.11.2", unit=NO_UNIT, **data):
    node = FakeHost({fact("NodeInfo", path="/models/m"): info,
                     fact("PythonVersion", executable="/usr/bin/python3"): base_python,
                     fact("UnitFiles", service="sglang"): unit}, data=Data({**TARGET, **data}))
    reference = Reference({fact("PyvenvCfg", venv="/opt/v"): {"home": "/usr/bin", "version": "3.11.2"}}, name="ct200")
    return node, reference


def test_a_node_that_can_take_the_deploy_passes_preflight_without_a_command():
    node, reference = preflight_hosts()
    assert run_op(preflight.node, node, "/models/m", "/opt/v", reference) == []
    assert node.noops and "debian 12" in node.noops[0]


def test_a_node_without_the_gpus_or_the_base_python_fails_with_every_problem_in_one_sentence():
    node, reference = preflight_hosts(base_python=None)
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference, gpus_required=8)
    assert only.startswith("fail: preflight on b300: ")
    assert "0 GPU(s) visible to nvidia-smi, 8 required" in only and "/usr/bin/python3" in only


def test_a_hostile_inventory_value_fails_preflight_before_any_other_fact_or_hub_call():
    # only the unit's fact is given: reading NodeInfo or a manifest would fail the test
    node = FakeHost({fact("UnitFiles", service="sglang"): NO_UNIT}, data=Data({**TARGET, "ssh_hostname": "127.0.0.1$(touch /tmp/x)", "model_dir": "/etc"}))
    (only,) = run_op(preflight.node, node, "/etc", "/opt/sglang/venv", Reference({}, name="ct200"),
                     checkpoints=[(PIN, None, "/etc", None)])
    assert only.startswith("fail: preflight on b300: the inventory is refused, nothing was changed: ")
    assert "ssh_hostname='127.0.0.1$(touch /tmp/x)' is not an IP address or a host name" in only
    assert "model_dir='/etc' is / or a system directory" in only


KEY = "sk-noderig-test-key-0123456789"


@pytest.mark.parametrize("content,why", [(b"", "is empty"), (b"  \n", "is empty"),
                                         (b"\xff\xfe" + KEY.encode(), "is not UTF-8 text"),
                                         (b"two words-0123456789", "printable ASCII only")])
def test_an_api_key_file_the_server_cannot_use_fails_preflight_before_any_change(tmp_path, content, why):
    # an empty key file once passed as "exposed with key" and the server listened on 0.0.0.0
    # without a key (the environment file leaves an empty secret out)
    key_file = tmp_path / "api_key"
    key_file.write_bytes(content)
    key_file.chmod(0o600)
    node, reference = preflight_hosts(server_host="0.0.0.0", api_key_file=str(key_file))
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference)
    assert only.startswith("fail: preflight on b300: the inventory is refused, nothing was changed: ")
    assert f"inventory value api_key_file={str(key_file)!r}" in only and why in only
    assert KEY not in only and "0123456789" not in only


def test_an_api_key_file_that_is_a_directory_or_missing_fails_preflight(tmp_path):
    for path, why in ((tmp_path, "cannot be read"), (tmp_path / "missing", "does not exist")):
        node, reference = preflight_hosts(server_host="0.0.0.0", api_key_file=str(path))
        (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference)
        assert "the inventory is refused" in only and why in only, only


def test_a_state_directory_someone_else_owns_fails_preflight():
    node, reference = preflight_hosts(unit={"files": {}, "error": None, "state": "root directory"})
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference)
    assert "the inventory is refused" in only and "/var/lib/sglang" in only


def test_an_inventory_without_service_name_or_user_is_checked_with_their_defaults():
    # a user's own inventory may leave both out (no group_data): the unit and state directory checked are then
    # sglang's, and a state directory owned by the default user sglang is the server's own
    without = {k: v for k, v in TARGET.items() if k not in ("service_name", "service_user")}
    unit = {"files": {"/lib/systemd/system/sglang.service": "[Unit]"}, "error": None, "state": None}
    node = FakeHost({fact("NodeInfo", path="/models/m"): INFO, fact("PythonVersion", executable="/usr/bin/python3"):
                     "3.11.2", fact("UnitFiles", service="sglang"): unit}, data=Data(without))
    reference = Reference({fact("PyvenvCfg", venv="/opt/v"): {"home": "/usr/bin", "version": "3.11.2"}}, name="ct200")
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference)
    assert "names sglang.service, which noderig did not write" in only
    node.facts[fact("UnitFiles", service="sglang")] = {"files": {}, "error": None, "state": "sglang directory"}
    assert run_op(preflight.node, node, "/models/m", "/opt/v", reference) == []


def test_a_unit_noderig_did_not_write_fails_preflight():
    node, reference = preflight_hosts(unit={"files": {"/lib/systemd/system/sglang.service": "[Unit]"}, "error": None})
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference)
    assert "service_name='sglang' names sglang.service, which noderig did not write" in only


# --------------------------------------------------------------------------------------------
# packages.present: the other branches


def test_an_interrupted_dpkg_run_is_finished_before_the_missing_packages_are_installed():
    host = FakeHost({"DebPackages": {}, "DpkgAudit": [" aria2   high speed download utility"]})
    commands = run_op(packages.present, host, ["aria2", "aria2", "rsync"])
    assert [c.split(" && ")[-1] if c.startswith("python3") else c for c in commands] == [
        "DEBIAN_FRONTEND=noninteractive dpkg --configure -a --force-confdef --force-confold",
        f"{APT_LINE} update",
        f"{APT_LINE} install --no-install-recommends -o Dpkg::Options::=--force-confdef "
        "-o Dpkg::Options::=--force-confold aria2 rsync",  # a package named twice is installed once
    ]


def test_the_package_plan_is_logged_once_with_both_parts(caplog):
    caplog.set_level(logging.INFO, logger="pyinfra")
    host = FakeHost({"DebPackages": {}, "DpkgAudit": ["half configured"]})
    run_op(packages.present, host, ["aria2"])
    assert "[b300] packages: install aria2; finish the interrupted dpkg run" in caplog.text


# --------------------------------------------------------------------------------------------
# service.text_file: what --diff shows


def test_with_diff_a_text_file_change_is_shown_as_a_unified_diff(caplog):
    caplog.set_level(logging.INFO, logger="pyinfra")
    host = FakeHost(text_facts("/etc/x", "same\nold\n", "644"), diff=True)
    run_op(service.text_file, host, "/etc/x", "same\nnew\n")
    assert "--- /etc/x (node)\n+++ /etc/x (deploy)\n@@ -1,2 +1,2 @@\n same\n-old\n+new" in caplog.text


@pytest.mark.parametrize("content,verb", [(None, "created"), ("API_KEY=old\n", "replaced")])
def test_a_secret_file_is_announced_without_its_contents(caplog, content, verb):
    caplog.set_level(logging.INFO, logger="pyinfra")
    facts = text_facts("/etc/env", content, "600" if content else None)
    del facts[fact("FileText", path="/etc/env")]  # reading it would fail the test
    host = FakeHost(facts, diff=True)
    assert run_op(service.text_file, host, "/etc/env", "API_KEY=new\n", mode="600", secret=True) == [
        "install -d -m 755 /etc && install -m 600 /dev/null /etc/env.noderig-tmp",
        "upload -> /etc/env.noderig-tmp",
        "chmod 600 /etc/env.noderig-tmp && mv -f /etc/env.noderig-tmp /etc/env",
    ]
    assert f"/etc/env: will be {verb} (contents not shown)" in caplog.text
    assert "API_KEY" not in caplog.text


# --------------------------------------------------------------------------------------------
# service.running: the other branches


class PlannedOp:
    """An operation of this deploy as ``running`` sees it: not yet run (will_change) or done."""

    def __init__(self, will_change=False, did_change=None):
        self.will_change, self._did = will_change, did_change

    def is_complete(self):
        return self._did is not None

    def did_change(self):
        return self._did


@pytest.mark.parametrize("op", [PlannedOp(will_change=True), PlannedOp(did_change=True)], ids=["will", "did"])
def test_an_input_this_run_changes_restarts_a_running_service(op):
    host = FakeHost(unit_facts())
    assert run_op(service.running, host, "sglang", INPUTS, {"environment": [op], "unit": [None]}) == [
        "systemctl restart sglang.service"]


def test_an_input_op_that_changes_nothing_leaves_it_running():
    host = FakeHost(unit_facts())
    assert run_op(service.running, host, "sglang", INPUTS, {"environment": [PlannedOp(did_change=False)]}) == []
    assert host.noops == ["sglang: running since 2027-01-15 08:00:00 UTC with the current unit and environment"]


def test_a_running_service_not_enabled_at_boot_is_only_enabled():
    host = FakeHost(unit_facts(enabled="disabled"))
    assert run_op(service.running, host, "sglang", INPUTS) == ["systemctl enable sglang.service"]


def test_a_failed_service_is_started_after_clearing_its_failed_state():
    host = FakeHost(unit_facts(active="failed"))
    assert run_op(service.running, host, "sglang", INPUTS) == [
        "systemctl reset-failed sglang.service 2>/dev/null ; systemctl start sglang.service"]


def test_a_quoted_service_name_reaches_systemctl_as_one_argument():
    facts = {fact("UnitStatus", unit="a b.service"): {"active": "inactive", "enabled": "enabled"},
             fact("Mtimes", paths=()): {}}
    assert run_op(service.running, FakeHost(facts), "a b", {}) == [
        "systemctl reset-failed 'a b.service' 2>/dev/null ; systemctl start 'a b.service'"]


# --------------------------------------------------------------------------------------------
# service.system_user


def test_an_absent_system_user_is_created_without_a_login():
    host = FakeHost({fact("SystemUser", user="sglang"): None})
    assert run_op(service.system_user, host, "sglang", "/var/lib/sglang") == [
        "useradd --system --user-group --no-create-home --home-dir /var/lib/sglang --shell /usr/sbin/nologin "
        "--comment 'SGLang server (noderig)' sglang"]


def test_an_existing_system_user_is_left_as_it_is():
    host = FakeHost({fact("SystemUser", user="sglang"): {"name": "sglang", "uid": 998, "gid": 998,
                                                         "home": "/home/x", "shell": "/bin/bash"}})
    assert run_op(service.system_user, host, "sglang", "/var/lib/sglang") == []
    assert host.noops == ["system user sglang exists (uid 998)"]


def test_a_service_user_with_uid_0_fails_the_host():
    host = FakeHost({fact("SystemUser", user="toor"): {"name": "toor", "uid": 0, "gid": 0, "home": "/root",
                                                       "shell": "/bin/sh"}})
    assert run_op(service.system_user, host, "toor", "/var/lib/sglang") == [
        "fail: service_user='toor' on b300 has uid 0 (root): the server must not run as root; choose another "
        "name and the deploy creates it"]


# --------------------------------------------------------------------------------------------
# service.readable

READABLE_PATHS = ["/opt/sglang/venv", "/models/m"]


def readable_host(unreadable):
    return FakeHost({fact("Unreadable", paths=tuple(READABLE_PATHS)): unreadable})


def test_paths_readable_by_everyone_and_not_being_written_are_left_alone():
    host = readable_host([])
    assert run_op(service.readable, host, READABLE_PATHS, [PlannedOp(did_change=False), None]) == []
    assert host.noops == ["/opt/sglang/venv, /models/m readable by the server's user"]


@pytest.mark.parametrize("unreadable,changing", [(["/models"], []), ([], [PlannedOp(will_change=True)])],
                         ids=["closed-now", "written-this-run"])
def test_closed_paths_or_paths_this_run_writes_are_opened_to_others(unreadable, changing):
    (command,) = run_op(service.readable, readable_host(unreadable), READABLE_PATHS, changing)
    assert command.startswith("sh -c ") and command.endswith(" noderig-readable /opt/sglang/venv /models/m")
    assert "chmod o+rX" in command and "chown" not in command, "owners are never changed"


def test_the_readable_script_opens_files_and_directories_without_touching_owners(tmp_path):
    root = str(tmp_path / "m")
    (command,) = run_op(service.readable, FakeHost({fact("Unreadable", paths=(root,)): [root]}), [root], [])
    (tmp_path / "m" / "sub").mkdir(parents=True)
    (tmp_path / "m" / "sub" / "w.bin").write_text("x")
    (tmp_path / "m" / "sub" / "w.bin").chmod(0o600)
    (tmp_path / "m" / "sub").chmod(0o700)
    before = (tmp_path / "m" / "sub" / "w.bin").stat()
    subprocess.run(["sh", "-c", command], check=True)
    after = (tmp_path / "m" / "sub" / "w.bin").stat()
    assert oct(after.st_mode & 0o777) == oct(0o604) and oct((tmp_path / "m" / "sub").stat().st_mode & 0o777) == oct(0o705)
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert tmp_path.stat().st_mode & 0o001, "each directory above gets o+x"


# --------------------------------------------------------------------------------------------
# service.check_flags


def server_settings(**kw) -> ServerSettings:
    base = dict(venv="/opt/sglang/venv", model_dir="/models/Kimi-K2.6", served_model_name="kimi-k2.6",
                draft_dir="/models/Kimi-K2.6-DFlash", attention_backend="flashinfer")
    return ServerSettings(**{**base, **kw})


HELP_COMMAND = "/opt/sglang/venv/bin/python -m sglang.launch_server --help"


@pytest.fixture()
def standin_help(monkeypatch, tmp_path) -> list[str]:
    """The lab stand-in's real --help; the controller's help cache in a directory of this test."""
    monkeypatch.setenv("NODERIG_CACHE", str(tmp_path / "cache"))
    env = {**os.environ, "PYTHONPATH": str(STANDIN), "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--help"], capture_output=True, text=True,
                         env=env, timeout=60, check=True)
    return out.stdout.splitlines()


def flag_hosts(help_lines, node_digest="d" * 64, reference_digest="r" * 64, help_ok=True):
    def answer(command):
        assert command == HELP_COMMAND
        return help_ok, help_lines

    node = FakeHost({fact("DistributionsDigest", venv="/opt/sglang/venv"): node_digest,
                     fact("ServerVersion", venv="/opt/sglang/venv"): "0.5.9.post2+ddtree.standin"}, shell=answer)
    reference = Reference({fact("DistributionsDigest", venv="/opt/sglang/venv"): reference_digest,
                           fact("ServerVersion", venv="/opt/sglang/venv"): "0.5.9.post2+ddtree.standin"},
                          name="ct200", shell=answer)
    return node, reference


def test_flags_the_node_s_server_knows_pass_and_its_help_is_read_once_per_venv_content(standin_help):
    node, reference = flag_hosts(standin_help)
    assert run_op(service.check_flags, node, server_settings(), reference) == []
    assert node.noops == ["every server flag is valid and known to the installed SGLang"]
    assert node.ran == [HELP_COMMAND] and reference.ran == []
    again, _ = flag_hosts(standin_help)
    assert run_op(service.check_flags, again, server_settings(), reference) == []
    assert again.ran == [], "the same venv content: its --help comes from the controller's cache"


def test_a_node_without_the_venv_yet_is_checked_against_the_reference_s(standin_help):
    node, reference = flag_hosts(standin_help, node_digest=None)
    assert run_op(service.check_flags, node, server_settings(), reference) == []
    assert node.ran == [] and reference.ran == [HELP_COMMAND]


def test_a_flag_the_installed_server_lacks_fails_the_host_naming_it(standin_help):
    node, reference = flag_hosts(standin_help)
    (only,) = run_op(service.check_flags, node, server_settings(extra_flags=["--enable-hierarchical-cache"]),
                     reference)
    assert only.startswith("fail: server flags for b300: --enable-hierarchical-cache is not a flag of ")
    assert "it was renamed or removed" in only


def without_option(help_lines: list[str], option: str) -> list[str]:
    """``--help`` lines with one option (and its wrapped description) left out."""
    kept, skipping = [], False
    for line in help_lines:
        if line.lstrip().startswith("-"):
            skipping = line.lstrip().startswith(option + " ")
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    return kept


def test_the_api_key_flag_must_exist_when_a_key_is_given(standin_help):
    old_server = without_option(standin_help, "--api-key")
    assert len(old_server) < len(standin_help)
    node, reference = flag_hosts(old_server)
    assert run_op(service.check_flags, node, server_settings(), reference) == [], "no key: not needed"
    again, _ = flag_hosts(old_server)
    (only,) = run_op(service.check_flags, again, server_settings(), reference, api_key=True)
    assert only.startswith("fail: server flags for b300: --api-key is not a flag of ")


@pytest.mark.parametrize("node_digest,reference_digest,help_ok,where", [
    (None, None, True, "ct200"), ("d" * 64, None, False, "b300")], ids=["no-venv-anywhere", "help-fails"])
def test_flags_that_cannot_be_read_fail_the_host_naming_the_command(monkeypatch, tmp_path, node_digest,
                                                                    reference_digest, help_ok, where):
    monkeypatch.setenv("NODERIG_CACHE", str(tmp_path))
    node, reference = flag_hosts(["Traceback (most recent call last):"], node_digest, reference_digest, help_ok)
    assert run_op(service.check_flags, node, server_settings(), reference) == [
        f"fail: server flags for b300: cannot read the server's flags: `{HELP_COMMAND}` failed on {where}"]


def test_invalid_settings_fail_before_any_fact_is_read():
    (only,) = run_op(service.check_flags, FakeHost({}), server_settings(mem_fraction_static=1.5), None)
    assert only == ("fail: server flags for b300: inventory value mem_fraction_static=1.5 must be a number between "
                    "0 and 1 (exclusive), or unset")


# --------------------------------------------------------------------------------------------
# firewall.loaded and firewall.absent

FW = FirewallSettings(api_port=30000)
FW_UNIT = "noderig-firewall.service"


def firewall_host(table, enabled="enabled", diff=False):
    return FakeHost({fact("NftTable", table="inet noderig"): {"nft": True, "table": table},
                     fact("UnitStatus", unit=FW_UNIT): {"enabled": enabled}}, diff=diff)


def test_the_table_loaded_as_rendered_and_enabled_at_boot_is_a_no_op():
    # nft lists the table with its own indentation: compared as rules, not as text
    host = firewall_host(render_table(FW).replace("\t", "    "))
    assert run_op(firewall.loaded, host, FW) == []
    assert host.noops == ["table inet noderig is loaded as rendered and loaded at boot"]


def test_a_changed_table_is_replaced_from_the_ruleset_file_in_one_transaction():
    flushed = "table inet noderig {\n\tchain input {\n\t}\n}"
    assert run_op(firewall.loaded, firewall_host(flushed), FW) == ["/usr/sbin/nft -f /etc/noderig/firewall.nft"]


def test_an_absent_table_is_loaded_from_the_ruleset_file_as_a_changed_one_is():
    # (connections already open then keep flowing: the table admits a mid-stream packet of a
    # connection not tracked yet, noderig.firewall.MID_STREAM; tests/test_trust_server.py, lab)
    assert run_op(firewall.loaded, firewall_host(None), FW) == ["/usr/sbin/nft -f /etc/noderig/firewall.nft"]


def test_a_table_not_loaded_at_boot_gets_its_unit_enabled():
    assert run_op(firewall.loaded, firewall_host(render_table(FW), enabled="disabled"), FW) == [
        f"systemctl daemon-reload && systemctl enable {FW_UNIT}"]


def test_with_diff_the_table_difference_is_shown(caplog):
    caplog.set_level(logging.INFO, logger="pyinfra")
    live = render_table(FW).replace("tcp dport 30000 accept", "tcp dport 8080 accept")
    run_op(firewall.loaded, firewall_host(live, diff=True), FW)
    assert "-\t\ttcp dport 8080 accept\n+\t\ttcp dport 30000 accept" in caplog.text
    assert "load table inet noderig (differs from the rendering): API port 30000 open to any host" in caplog.text


@pytest.mark.parametrize("server_host, api_open", [
    (None, False), ("127.0.0.1", False), ("localhost", False), ("::1", False), ("0.0.0.0", True), ("10.0.0.12", True)])
def test_the_api_port_is_open_to_other_hosts_only_when_the_server_listens_beyond_loopback(server_host, api_open):
    # a server on loopback needs no opening: its port stays closed to other hosts, so a program that binds it
    # beyond loopback later is not reachable either (server_host None: the default, loopback)
    data = {k: v for k, v in TARGET.items() if k != "server_host"}
    node = FakeHost({fact("SshdPorts"): [22]}, data=Data({**data, "server_host": server_host}))
    with ctx_host.use(node):
        fw = firewall.settings_for(node.data, api_port=30000)
    assert fw.api_open is api_open
    assert ("tcp dport 30000 accept" in render_table(fw)) is api_open
    assert ("API port 30000 open to any host" in firewall.summary(fw)) is api_open
    assert ("API port 30000 closed to other hosts (the server listens on loopback only)" in firewall.summary(fw)) \
        is not api_open


def test_a_table_nft_cannot_list_fails_the_host_and_is_neither_loaded_nor_removed():
    # (no CAP_NET_ADMIN, a netlink failure): before, any failure of `nft list table` read as "absent", and the
    # firewall-off step reported "no table" on a node whose table it could not see
    error = "Error: Operation not permitted / list table inet noderig"
    unreadable = {"nft": True, "table": None, "error": error}
    for op, args in ((firewall.loaded, (FW,)), (firewall.absent, ())):
        host = FakeHost({fact("NftTable", table="inet noderig"): unreadable,
                         fact("UnitStatus", unit=FW_UNIT): {"enabled": "enabled"},
                         fact("Mtimes", paths=("/etc/noderig/firewall.nft", f"/etc/systemd/system/{FW_UNIT}")): {}})
        (only,) = run_op(op, host, *args)
        assert only == (f"fail: firewall on b300: `nft list table inet noderig` failed ({error}); the table's state "
                        "is unknown, so nothing was loaded or removed: run the deploy as root, on a node whose "
                        "nftables works (nft list ruleset)")
        assert not host.noops


def absent_host(table, files):
    return FakeHost({fact("NftTable", table="inet noderig"): {"nft": table is not None, "table": table},
                     fact("Mtimes", paths=("/etc/noderig/firewall.nft", f"/etc/systemd/system/{FW_UNIT}")): files})


def test_firewall_off_with_nothing_of_it_left_is_a_no_op():
    host = absent_host(None, {})
    assert run_op(firewall.absent, host) == []
    assert host.noops == ["no table inet noderig and nothing loads one at boot"]


def test_firewall_off_removes_the_boot_unit_the_ruleset_and_the_table_in_that_order():
    files = {"/etc/noderig/firewall.nft": 1.0, f"/etc/systemd/system/{FW_UNIT}": 2.0}
    assert run_op(firewall.absent, absent_host("table inet noderig {\n}", files)) == [
        f"systemctl disable {FW_UNIT} 2>/dev/null ; rm -f /etc/systemd/system/{FW_UNIT} && systemctl daemon-reload",
        "rm -f /etc/noderig/firewall.nft",
        "/usr/sbin/nft delete table inet noderig",
    ]


def test_firewall_off_with_only_the_live_table_deletes_only_it():
    assert run_op(firewall.absent, absent_host("table inet noderig {\n}", {})) == ["/usr/sbin/nft delete table inet noderig"]


# --------------------------------------------------------------------------------------------
# util.refused


def test_a_refusal_fails_the_host_with_its_sentence_and_runs_nothing_else():
    assert run_op(util.refused, FakeHost({}), "server settings for b300: the API key file /k does not exist") == [
        "fail: server settings for b300: the API key file /k does not exist"]


def test_a_dry_run_says_the_host_would_fail():
    host = FakeHost({})
    run_op(util.refused, host, "no")
    assert host.logged == ["would fail: no"]


def test_an_operation_that_raises_fails_only_its_host_with_a_sentence():
    # the wrapper every noderig operation has: here a fact the operation cannot use
    host = FakeHost({fact("SystemUser", user="sglang"): "sglang:x:998"})
    (only,) = run_op(service.system_user, host, "sglang", "/var/lib/sglang")
    assert only.startswith("fail: internal error: ")


# --------------------------------------------------------------------------------------------
# checkpoint.fetch: the other branches


def test_a_node_manifest_edited_to_name_a_climbing_path_fails_before_anything_is_read_or_written():
    edited = {**MANIFEST, "files": [*MANIFEST["files"], {"path": "../../etc/cron.d/x", "size": 1, "git_oid": "e" * 40}]}
    host = FakeHost({checkpoint_state(): {"manifest": edited, "stats": {}, "record": None, "held": None}})
    (only,) = run_op(checkpoint.fetch, host, PIN, DEST)
    assert only.startswith(f"fail: checkpoint org/m for b300: the manifest .noderig/manifest.json on b300 in {DEST} "
                           "was edited: it lists the unsafe path '../../etc/cron.d/x' (it has a '..' component); ")
    assert only.endswith("nothing was written: delete that file and rerun to fetch the Hub's listing again")


def test_while_aria2_runs_a_full_size_file_it_holds_goes_through_it_not_the_hasher(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    # a preallocated file aria2 is still writing: full size, no control file yet, never verified
    host = node_with(STATS, {}, held=["config.json", "model.safetensors"], extra={fact("FsType", path=DEST): "xfs"})
    commands = run_op(checkpoint.fetch, host, PIN, DEST)
    assert commands[:len(NODE_CHECKS)] == NODE_CHECKS
    assert commands[len(NODE_CHECKS):] == [
        "install -d -m 755 /var/lib/noderig/changes && touch /var/lib/noderig/changes/checkpoint",
        next(c for c in commands if c.startswith("python3 -c")),
        "call _download", "call _verify"]
    assert commands[-3].endswith(f"{DEST}/.noderig/verified.json config.json model.safetensors")
    assert not any(c.startswith("rm -f") for c in commands), "full-size files are re-attached, not deleted"


def test_while_aria2_runs_a_full_size_file_it_does_not_hold_is_hashed_first(monkeypatch):
    # aria2 downloads config.json (handed to it by download_started); model.safetensors was
    # damaged in place: the daemon running must not let it through unhashed (aria2 would call
    # the full-size file complete, and the final verification fail the deploy).
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {"model.safetensors": {"size": 1000, "mtime": 9.0, "aria2": False}}
    host = node_with(stats, RECORD, held=["config.json"], extra={fact("FsType", path=DEST): "xfs"})
    commands = []
    with ctx_host.use(host):
        for command in checkpoint.fetch._inner(PIN, DEST):
            commands.append(describe(command))
            if commands[-1] == "call _verify" and len(commands) == len(NODE_CHECKS) + 1:
                assert command.kwargs == {"within": ["model.safetensors"]}, "only what aria2 does not hold"
                fetch_list = command.args[3]
                assert fetch_list == ["config.json"]
                fetch_list.append("model.safetensors")  # what _verify does with a file that fails its hash
    assert commands[len(NODE_CHECKS)] == "call _verify"
    forget = next(c for c in commands if c.startswith("python3 -c"))
    assert forget.endswith(f"{DEST}/.noderig/verified.json config.json model.safetensors")
    assert commands[-2:] == ["call _download", "call _verify"]


# --------------------------------------------------------------------------------------------
# checkpoint.revision_seeded and checkpoint.beside (a new revision beside the live one)

NEW_COMMIT = "d" * 40
NEW_PIN = RepoPin("org/m", NEW_COMMIT, "https://hub.example", ("*.safetensors", "*.json"))
# the new revision changes config.json and keeps model.safetensors (same sha256)
NEW_MANIFEST = {**MANIFEST, "revision": NEW_COMMIT, "commit": NEW_COMMIT,
                "files": [{"path": "config.json", "size": 12, "git_oid": "e" * 40},
                          {"path": "model.safetensors", "size": 1000, "sha256": "b" * 64}]}
BESIDE = "/models/m.noderig/0123456789abcdef"


def beside_node(live_stats: dict, live_record: dict | None, new_stats: dict | None = None) -> FakeHost:
    return FakeHost({checkpoint_state(): {"manifest": MANIFEST, "stats": live_stats, "record": live_record,
                                          "held": None},
                     fact("CheckpointState", dest=BESIDE): {"manifest": NEW_MANIFEST, "stats": new_stats or {},
                                                            "record": {}, "held": None}})


def test_a_new_revision_beside_the_live_one_links_what_they_share_then_the_fetch_takes_the_rest(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="pyinfra")
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    host = beside_node(STATS, RECORD)
    commands = run_op(checkpoint.revision_seeded, host, NEW_PIN, DEST, BESIDE)
    checks = [c.replace(DEST, BESIDE) for c in NODE_CHECKS]
    assert commands == [*checks, f"python3 {checkpoint.VERIFY_SCRIPT} {BESIDE}/.noderig/manifest.json {BESIDE} "
                                 f"--seed-from {DEST}"]
    assert (f"[b300] org/m@{NEW_COMMIT[:12]} beside {DEST} in {BESIDE}: 1 of 2 files (1000 B) linked from the live "
            "revision, the rest fetched") in caplog.text


@pytest.mark.parametrize("live_stats, new_stats", [
    ({**STATS, "model.safetensors": {"size": 1000, "mtime": 9.0, "aria2": False}}, None),  # touched since hashed
    (STATS, {"model.safetensors": {"size": 1000, "mtime": 6.0, "aria2": False}}),  # there already
], ids=["live-file-not-verified", "already-linked"])
def test_nothing_is_linked_from_a_live_file_not_verified_or_into_a_file_already_there(live_stats, new_stats):
    host = beside_node(live_stats, RECORD, new_stats)
    assert run_op(checkpoint.revision_seeded, host, NEW_PIN, DEST, BESIDE) == []
    assert host.noops == [f"org/m@{NEW_COMMIT[:12]}: beside {DEST} in {BESIDE}, nothing more to link from it"]


SERVING = {fact("UnitStatus", unit="sglang.service"): {"active": "active", "started": 1.0},
           fact("HttpStatus", url="http://127.0.0.1:30000/health"): 200}
ROOMY = {fact("NodeInfo", path=DEST): {"free_bytes": 10 * 2**30}}


@pytest.fixture
def decided_afresh(monkeypatch):
    """No decision or manifest kept from another test; the Hub's listing is NEW_MANIFEST."""
    monkeypatch.setattr(checkpoint, "_revisions", {})
    monkeypatch.setattr(checkpoint.rollout, "_serving", {})
    monkeypatch.setattr(checkpoint, "build_manifest", lambda pin, token: NEW_MANIFEST)
    monkeypatch.setattr(checkpoint, "_manifests", {})


def revision_node(live_manifest, extra: dict) -> FakeHost:
    return FakeHost({checkpoint_state(): {"manifest": live_manifest, "stats": STATS, "record": RECORD, "held": None},
                     fact("UnitStatus", unit="sglang.service"): {"active": "inactive"}, **extra})


@pytest.mark.parametrize("extra, live_manifest, want", [
    ({**SERVING, **ROOMY}, MANIFEST, "beside"),  # serves, and the revision changes config.json
    (ROOMY, MANIFEST, None),  # serves nothing: in the live directory, as ever
    ({**SERVING, **ROOMY}, NEW_MANIFEST, None),  # already the new revision
    ({**SERVING, **ROOMY}, None, None),  # nothing there yet
], ids=["serving-changed", "not-serving", "same-content", "empty"])
def test_a_new_revision_goes_beside_the_live_one_only_on_a_node_that_serves(decided_afresh, extra, live_manifest,
                                                                              want):
    settings = SimpleNamespace(service_name="sglang", port=30000)
    got = checkpoint.new_revision(revision_node(live_manifest, extra), NEW_PIN, None, DEST, settings)
    assert got == (checkpoint.Revision(DEST, checkpoint_generation(DEST, NEW_MANIFEST), 12) if want else None)
    assert got is None or not got.in_batch


def test_a_live_manifest_edited_on_the_node_is_no_revision_to_go_beside_and_raises_nothing(decided_afresh):
    edited = {**{**MANIFEST, "revision": "main"}, "files": ["garbled", {"path": "../x"}]}
    node = revision_node(edited, {**SERVING, **ROOMY})
    settings = SimpleNamespace(service_name="sglang", port=30000)
    assert checkpoint.new_revision(node, NEW_PIN, None, DEST, settings) is None


# config.json (12 bytes) is what the new revision does not share: it fits with the 64 MiB
# margin in 65 MiB, not in 64 MiB
@pytest.mark.parametrize("free, allow_beside, in_batch", [
    (65 * 2**20, True, False), (64 * 2**20, True, True), (10 * 2**30, False, True)],
    ids=["fits", "no-room", "not-allowed"])
def test_a_new_revision_without_room_beside_the_live_one_is_fetched_in_its_batch(decided_afresh, free,
                                                                                 allow_beside, in_batch):
    node = revision_node(MANIFEST, {**SERVING, fact("NodeInfo", path=DEST): {"free_bytes": free}})
    settings = SimpleNamespace(service_name="sglang", port=30000)
    got = checkpoint.new_revision(node, NEW_PIN, None, DEST, settings, allow_beside)
    assert got.in_batch == in_batch and got.need == 12
    assert got.dest == (DEST if in_batch else checkpoint_generation(DEST, NEW_MANIFEST))


class SlowFactsHost(FakeHost):
    """A fact read yields to the other greenlets before it answers, as a read over ssh does."""

    def get_fact(self, cls, **kwargs):
        import gevent

        gevent.sleep(0.01)
        return super().get_fact(cls, **kwargs)


def test_a_serving_node_asked_about_by_every_greenlet_at_once_serves_for_each(decided_afresh, monkeypatch):
    """The fan-out's and the revision's decisions ask about every target from each target's
    greenlet: one that asks while another reads must get the answer, not a placeholder (a
    serving node read as serving nothing was restarted outside its rollout batch)."""
    import gevent

    monkeypatch.setattr(util, "_locks", {})
    node = SlowFactsHost({**revision_node(MANIFEST, {**SERVING, **ROOMY}).facts})
    settings = SimpleNamespace(service_name="sglang", port=30000)
    askers = [gevent.spawn(checkpoint.rollout.serving, settings, node) for _ in range(3)]
    askers += [gevent.spawn(checkpoint.new_revision, node, NEW_PIN, None, DEST, settings) for _ in range(3)]
    gevent.joinall(askers, raise_error=True)
    assert [a.value for a in askers[:3]] == [True] * 3
    assert [a.value for a in askers[3:]] == [checkpoint.Revision(DEST, checkpoint_generation(DEST, NEW_MANIFEST), 12)] * 3


def test_download_started_hands_the_missing_files_to_aria2_and_leaves_the_hashing_to_fetch(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {"config.json": {"size": 10, "mtime": 7.0, "aria2": False}}  # right size, never verified
    host = node_with(stats, {}, extra={fact("FsType", path=DEST): "ext4"})
    commands = run_op(checkpoint.download_started, host, PIN, DEST)
    assert commands[:len(NODE_CHECKS)] == NODE_CHECKS
    assert commands[len(NODE_CHECKS):] == [
        "install -d -m 755 /var/lib/noderig/changes && touch /var/lib/noderig/changes/checkpoint",
        next(c for c in commands if c.startswith("python3 -c")),
        "call _download_started"]
    assert commands[-2].endswith(f"{DEST}/.noderig/verified.json model.safetensors"), \
        "only the missing file is handed over (and forgotten); config.json waits to be hashed"


def test_download_started_with_a_fan_out_stripe_hands_over_that_stripe_alone(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    host = node_with({}, {}, extra={fact("FsType", path=DEST): "ext4"})  # nothing on the node yet
    commands = run_op(checkpoint.download_started, host, PIN, DEST, only=["config.json"])
    assert commands[-2].endswith(f"{DEST}/.noderig/verified.json config.json"), \
        "the stripe alone is handed to aria2: the other files come from peers"
    assert commands[-1] == "call _download_started"
    host = node_with({}, {})
    assert run_op(checkpoint.download_started, host, PIN, DEST, only=[]) == []  # an empty stripe starts nothing
    assert host.noops == [f"org/m@{COMMIT[:12]}: nothing to start in {DEST}"]


def test_download_started_does_nothing_for_files_aria2_holds_or_that_only_need_a_hash():
    stats = {"config.json": {"size": 10, "mtime": 7.0, "aria2": False},
             "model.safetensors": {"size": 1000, "mtime": 6.0, "aria2": True}}
    host = node_with(stats, {}, held=["model.safetensors"])
    assert run_op(checkpoint.download_started, host, PIN, DEST) == []
    assert host.noops == [f"org/m@{COMMIT[:12]}: nothing to start in {DEST} (1 already downloading)"]
    host = node_with(STATS, RECORD)
    assert run_op(checkpoint.download_started, host, PIN, DEST) == []
    assert host.noops == [f"org/m@{COMMIT[:12]}: nothing to start in {DEST}"]


def test_download_started_adds_only_what_aria2_does_not_hold_and_deletes_nothing_it_holds(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    # config.json is short (a small git file: it starts over) but aria2 is writing it
    stats = {"config.json": {"size": 4, "mtime": 5.0, "aria2": False}}
    host = node_with(stats, {}, held=["config.json"], extra={fact("FsType", path=DEST): "ext4"})
    commands = run_op(checkpoint.download_started, host, PIN, DEST)
    assert not any(c.startswith("rm -f") for c in commands), commands
    assert commands[-1] == "call _download_started"


def test_a_short_small_git_file_starts_over_while_a_short_lfs_file_resumes(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {"config.json": {"size": 4, "mtime": 5.0, "aria2": False},
             "model.safetensors": {"size": 400, "mtime": 6.0, "aria2": False}}
    host = node_with(stats, RECORD, extra={fact("FsType", path=DEST): "ext4"})
    commands = run_op(checkpoint.fetch, host, PIN, DEST)
    assert f"rm -f {DEST}/config.json" in commands
    assert f"rm -f {DEST}/model.safetensors" not in commands


def test_a_gated_repo_s_small_files_are_fetched_by_the_controller_never_with_the_token_on_the_node(
        monkeypatch, tmp_path):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    token = tmp_path / "token"
    token.write_text("hf_secret\n")
    token.chmod(0o600)
    gated = {**MANIFEST, "gated": True}
    host = node_with({"model.safetensors": STATS["model.safetensors"]}, RECORD)
    host.facts[checkpoint_state()]["manifest"] = gated
    commands = run_op(checkpoint.fetch, host, PIN, DEST, token_file=str(token))
    assert commands[len(NODE_CHECKS):] == [
        "install -d -m 755 /var/lib/noderig/changes && touch /var/lib/noderig/changes/checkpoint",
        "call _upload_small_file",
        next(c for c in commands if c.startswith("python3 -c")),
        "call _verify"]  # nothing left for aria2: no download, no FsType read
    assert not any("hf_secret" in c for c in commands)


# --------------------------------------------------------------------------------------------
# environment.venv: a key the killed run left on the reference


def test_a_copy_key_left_on_the_reference_alone_is_removed_too():
    prefix = environment.copy_key_prefix(FakeHost())
    node, reference = venv_hosts(dict(LISTING), reference_keys=[f"{prefix}77"])
    assert run_op(environment.venv, node, "/opt/v", reference) == ["call _remove_copy_keys"]


# --------------------------------------------------------------------------------------------
# preflight.node: the other refusals


def test_an_unreachable_reference_fails_the_node_before_reading_anything():
    node = FakeHost({}, data=Data(TARGET))
    reference = Reference({}, name="ct200", connected=False)
    assert run_op(preflight.node, node, "/models/m", "/opt/v", reference) == [
        "fail: the reference host ct200 is unreachable (pyinfra could not connect to it over SSH), so the venv "
        "cannot be copied; nothing was changed on b300. Check that ct200 is up and reachable, then rerun"]


def test_a_volume_too_small_for_what_is_still_to_fetch_fails_preflight_with_the_numbers():
    node, reference = preflight_hosts(info={**INFO, "free_bytes": 10 * 2**20})
    node.facts.update({checkpoint_state(): {"manifest": MANIFEST, "stats": {"config.json": STATS["config.json"]},
                                            "record": RECORD, "held": None},
                       fact("NodeInfo", path=DEST): {**INFO, "free_bytes": 10 * 2**20}})
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference, checkpoints=[(PIN, None, DEST, None)])
    # 1000 bytes still to fetch (model.safetensors), margin 64 MiB + 2% of 1000 bytes = 67108884 B
    assert only == (f"fail: preflight on b300: not enough disk for {DEST}: 10.0 MiB free, 1000 B still to download "
                    "+ 64.0 MiB margin; free space or point model_dir/draft_dir at a larger volume")


def test_a_volume_that_holds_it_passes():
    node, reference = preflight_hosts(info={**INFO, "free_bytes": 10 * 2**30})
    node.facts.update({checkpoint_state(): {"manifest": MANIFEST, "stats": {}, "record": None, "held": None},
                       fact("NodeInfo", path=DEST): INFO})
    assert run_op(preflight.node, node, "/models/m", "/opt/v", reference, checkpoints=[(PIN, None, DEST, None)]) == []


def test_an_exposure_without_a_key_and_bad_firewall_settings_fail_preflight_together():
    from noderig.exposure import decide

    node, reference = preflight_hosts()
    exposure = decide("0.0.0.0", 30000, None, False)
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference, exposure=exposure,
                     firewall=FirewallSettings(api_port=30000, peer_ports=[5000]))
    assert only == (
        "fail: preflight on b300: server_host='0.0.0.0' would expose the server on port 30000 to other hosts without "
        "an API key: set api_key_file (a 0600 file with the key), or server_host='127.0.0.1', or "
        "allow_unauthenticated_network_access=True if that is really meant; firewall_peer_ports is set but "
        "firewall_peers is empty: name the peers the ports are for")


def test_preflight_says_what_it_saw_and_the_exposure(caplog):
    from noderig.exposure import decide

    caplog.set_level(logging.INFO, logger="pyinfra")
    node, reference = preflight_hosts(info={**INFO, "gpus": [{"name": "NVIDIA B300", "compute_cap": "10.3",
                                                              "driver": "580.82"}] * 8})
    assert run_op(preflight.node, node, "/models/m", "/opt/v", reference, gpus_required=8,
                  exposure=decide("127.0.0.1", 30000, None, False)) == []
    seen = "debian 12, python 3.11.2, 8x NVIDIA B300 (compute 10.3, driver 580.82), 10.0 GiB free for /models/m"
    assert node.noops == [seen]
    assert f"[b300] {seen}" in caplog.text
    assert "[b300] exposure: loopback: the server listens on 127.0.0.1:30000 (loopback only" in caplog.text


# --------------------------------------------------------------------------------------------
# checkpoint.manifest_for: a branch that has not moved costs one light request, no listing

ON_MAIN = {**MANIFEST, "revision": "main"}
MAIN = RepoPin("org/m", "main", "https://hub.example", ("*.safetensors", "*.json"))


@pytest.fixture
def hub_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(checkpoint, "_manifests", {})
    monkeypatch.setattr(checkpoint, "resolve_commit", lambda pin, token: calls.append("resolve") or COMMIT)
    monkeypatch.setattr(checkpoint, "build_manifest", lambda pin, token: calls.append("listing") or NEW_MANIFEST)
    return calls


def test_a_branch_still_at_the_nodes_commit_reuses_the_nodes_manifest(hub_calls):
    assert checkpoint.manifest_for(MAIN, None, ON_MAIN) is ON_MAIN
    assert checkpoint.manifest_for(MAIN, None, ON_MAIN) is ON_MAIN
    assert hub_calls == ["resolve"], "asked once per run"


@pytest.mark.parametrize("on_node", [
    {**ON_MAIN, "commit": "e" * 40},  # the branch moved
    {**ON_MAIN, "endpoint": "https://other.example"},  # listed by another Hub
    {**ON_MAIN, "revision": "dev"},  # another branch
    {**ON_MAIN, "files": [{"path": "../x.json", "size": 1, "git_oid": "a" * 40}]},  # edited on the node
    None,
], ids=["moved", "other-hub", "other-branch", "edited", "none"])
def test_otherwise_the_hub_listing_is_read(hub_calls, on_node):
    assert checkpoint.manifest_for(MAIN, None, on_node) is NEW_MANIFEST
    assert hub_calls[-1] == "listing"


def test_a_hub_that_does_not_answer_the_light_request_gets_the_listing_read(hub_calls, monkeypatch):
    monkeypatch.setattr(checkpoint, "resolve_commit", lambda pin, token: hub_calls.append("resolve") or None)
    assert checkpoint.manifest_for(MAIN, None, ON_MAIN) is NEW_MANIFEST
    assert hub_calls == ["resolve", "listing"]
