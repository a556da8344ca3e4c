"""Every operation's decisions, without a host: given facts, the commands it yields or the
reason it changes nothing (pyinfra's own way of testing operations). The lab tier runs the
same operations end to end."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest

from noderig.manifest import RepoPin
from operations import checkpoint, diagnosis, environment, packages, preflight, service
from operations.packages import APT
from tests.fakehost import Data, FakeHost, fact, run_op
from tests.test_inventory_check import TARGET

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


def test_a_secret_file_is_never_read_for_a_diff(caplog):
    facts = text_facts("/etc/env", "API_KEY=old\n", "600")
    del facts[fact("FileText", path="/etc/env")]  # reading it would fail the test
    host = FakeHost(facts, diff=True)
    run_op(service.text_file, host, "/etc/env", "API_KEY=new\n", mode="600", secret=True)
    assert "API_KEY" not in caplog.text


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


def node_with(stats: dict, record: dict | None, aria2="inactive", extra: dict | None = None) -> FakeHost:
    return FakeHost({fact("JsonFile", path=f"{DEST}/.noderig/manifest.json"): MANIFEST,
                     fact("FileStats", root=DEST): stats,
                     fact("JsonFile", path=f"{DEST}/.noderig/verified.json"): record,
                     fact("UnitStatus", unit="noderig-aria2.service"): {"active": aria2}, **(extra or {})})


def verified(size: int, mtime: float, digest: str) -> dict:
    return {"size": size, "mtime_ns": int(mtime * 1e9), "digest": digest}


STATS = {"config.json": {"size": 10, "mtime": 5.0, "aria2": False},
         "model.safetensors": {"size": 1000, "mtime": 6.0, "aria2": False}}
RECORD = {"config.json": verified(10, 5.0, "a" * 40), "model.safetensors": verified(1000, 6.0, "b" * 64)}


# Before anything is written into the checkpoint, the node checks the listed paths (and
# symlinks) itself: once against the manifest sent on stdin, once against the uploaded file.
NODE_CHECKS = [f"upload -> {checkpoint.HUBPATH_SCRIPT}", f"upload -> {checkpoint.VERIFY_SCRIPT}", "call _check_paths",
               f"upload -> {DEST}/.noderig/manifest.json", "call _check_paths"]


def test_a_verified_checkpoint_is_neither_hashed_nor_fetched():
    host = node_with(STATS, RECORD)
    assert run_op(checkpoint.fetch, host, PIN, DEST) == []
    assert host.noops == [f"org/m@{COMMIT[:12]}: 2 files verified in {DEST}"]


def test_a_file_touched_since_it_was_verified_is_hashed_not_fetched(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {**STATS, "model.safetensors": {"size": 1000, "mtime": 9.0, "aria2": False}}
    commands = run_op(checkpoint.fetch, node_with(stats, RECORD), PIN, DEST)
    assert commands == [*NODE_CHECKS, "call _verify", "call _verify"]


def test_a_missing_and_an_oversize_file_are_fetched_the_oversize_one_from_scratch(monkeypatch):
    monkeypatch.setattr(checkpoint.files.put, "_inner", lambda src, dest, **kw: iter([f"upload -> {dest}"]))
    stats = {"model.safetensors": {"size": 1001, "mtime": 6.0, "aria2": False}}
    host = node_with(stats, RECORD, extra={fact("FsType", path=DEST): "ext4"})
    commands = run_op(checkpoint.fetch, host, PIN, DEST)
    assert commands[:6] == [
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
                     checkpoints=[(PIN, None, "/etc")])
    assert only.startswith("fail: preflight on b300: the inventory is refused, nothing was changed: ")
    assert "ssh_hostname='127.0.0.1$(touch /tmp/x)' is not an IP address or a host name" in only
    assert "model_dir='/etc' is / or a system directory" in only


def test_a_unit_noderig_did_not_write_fails_preflight():
    node, reference = preflight_hosts(unit={"files": {"/lib/systemd/system/sglang.service": "[Unit]"}, "error": None})
    (only,) = run_op(preflight.node, node, "/models/m", "/opt/v", reference)
    assert "service_name='sglang' names sglang.service, which noderig did not write" in only
