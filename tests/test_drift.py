"""Whole-deploy drift on the lab: a dry run changes nothing on the node; the unit edited by
hand, the service stopped or disabled, a prerequisite removed: the plan names it and a rerun
repairs exactly that."""

from __future__ import annotations


import pytest

from operations.packages import EARLY_PREREQUISITE
from tests.conftest import changed_ops, deploy, run_pyinfra

pytestmark = pytest.mark.lab

UNIT = "/etc/systemd/system/sglang.service"
# What a dry run must leave exactly as it was: files under the deploy's paths (with mtimes),
# installed packages, and the service's state.
SNAPSHOT = ("find /etc/noderig /etc/systemd/system /opt /models /usr/local/lib/noderig -xdev "
            "-printf '%y %s %T@ %m %p\\n' 2>/dev/null | LC_ALL=C sort; dpkg-query -W -f '${Package} ${Version}\\n'; "
            "systemctl show -p ActiveState -p UnitFileState -p MainPID sglang")


def dry(lab, *data: str):
    args = ["deploy.py", "--dry", "--diff"]
    for d in data:
        args += ["--data", d]
    res = run_pyinfra(lab.inventory, *args)
    return res, res.stdout + res.stderr



@pytest.fixture(scope="module")
def converged(lab):
    lab.reset("b300")
    res, out = deploy(lab)
    assert res.returncode == 0, out[-4000:]
    return lab


def test_a_dry_run_changes_nothing_on_a_bare_or_a_drifted_node(lab):
    lab.reset("b300")
    before = lab.run("b300", SNAPSHOT).stdout
    res, out = dry(lab)
    assert res.returncode == 0, out[-3000:]
    assert "Venv /opt/sglang/venv from ct200" in out
    assert lab.run("b300", SNAPSHOT).stdout == before


def test_a_hand_edited_unit_is_shown_as_a_diff_and_restored(converged):
    lab = converged
    lab.run("b300", f"sed -i 's/--skip-server-warmup/--skip-server-warmup --log-level debug/' {UNIT} "
                    "&& systemctl daemon-reload")
    before = lab.run("b300", SNAPSHOT).stdout
    res, out = dry(lab)
    assert res.returncode == 0, out[-3000:]
    assert f"--- {UNIT} (node)" in out and "--log-level debug" in out, out[-3000:]
    assert lab.run("b300", SNAPSHOT).stdout == before, "the dry run changed the node"
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    assert "--log-level" not in lab.run("b300", f"cat {UNIT}").stdout
    assert changed_ops(out).get("sglang.service") == 1


def test_a_stopped_and_disabled_service_is_started_and_enabled_again(converged):
    lab = converged
    lab.run("b300", "systemctl disable --now sglang")
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    assert lab.run("b300", "systemctl is-active sglang; systemctl is-enabled sglang").stdout.split() == \
        ["active", "enabled"]
    assert "ready in" in out
    ops = changed_ops(out)
    assert set(ops) <= {"sglang running and enabled", "sglang ready"}, ops


def test_a_removed_prerequisite_is_installed_again_and_nothing_else_changes(converged):
    lab = converged
    deploy(lab)
    lab.run("b300", "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q aria2 >/dev/null")
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    assert lab.run("b300", "dpkg -s aria2", check=False).returncode == 0
    assert changed_ops(out) == {EARLY_PREREQUISITE: 1}, changed_ops(out)


def test_drift_everywhere_at_once_is_planned_exactly_and_repaired_exactly(converged):
    """A damaged shard, a deleted shard, a changed venv file, a hand-edited unit, a stopped
    service and a removed package, all at once: the dry run names each and changes nothing;
    the rerun changes exactly those operations; the next run changes nothing."""
    lab = converged
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    shards = lab.run("b300", "cd /models/Kimi-K2.6 && ls *.safetensors").stdout.split()
    damaged, deleted = shards[1], shards[-1]
    venv_file = lab.run("b300", "cd /opt/sglang/venv && ls lib/python3*/site-packages/sglang/__init__.py").stdout.strip()
    lab.run("b300", f"cd /models/Kimi-K2.6 && printf 'X' | dd of={damaged} bs=1 seek=4096 conv=notrunc status=none "
                    f"&& rm {deleted} && echo '# drift' >> /opt/sglang/venv/{venv_file} "
                    f"&& sed -i 's/--skip-server-warmup/--skip-server-warmup --log-level debug/' {UNIT} "
                    "&& systemctl stop sglang && DEBIAN_FRONTEND=noninteractive apt-get purge -y -q aria2 >/dev/null")

    before = lab.run("b300", SNAPSHOT).stdout
    res, out = dry(lab)
    assert res.returncode == 0, out[-3000:]
    assert lab.run("b300", SNAPSHOT).stdout == before, "the dry run changed the node"
    assert "[b300] packages: install aria2" in out
    assert f"1 missing ({deleted}), 1 unverified ({damaged})" in out, out[-3000:]
    assert f"venv /opt/sglang/venv: 1 changed ({venv_file})" in out
    assert "-ExecStart=" in out and "--log-level debug" in out
    assert "[b300] sglang: start (it is inactive); reload systemd (the unit changed)" in out
    # (The venv and checkpoint rewritten: their readability for the server's user is checked again.)
    # (aria2 first, then the deleted shard's download started before the venv is repaired)
    drifted = [EARLY_PREREQUISITE, "Download started: moonshotai/Kimi-K2.6", "Venv /opt/sglang/venv from ct200",
               "Checkpoint moonshotai/Kimi-K2.6", "Venv and checkpoints readable by the server's user",
               "sglang.service", "sglang running and enabled", "sglang ready"]
    assert f"would change 8: {', '.join(drifted)};" in out, out[-1500:]

    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    assert changed_ops(out) == {op: 1 for op in drifted}, changed_ops(out)
    assert f"{damaged}: sha256_mismatch" in out  # hashed, found bad, fetched again
    assert lab.run("b300", "systemctl is-active sglang; dpkg-query -W -f '${Status}' aria2").stdout.split()[:1] == \
        ["active"]
    res, out = deploy(lab)
    assert res.returncode == 0 and changed_ops(out) == {}, changed_ops(out)


def test_a_dpkg_run_left_half_way_is_finished_and_the_package_installed(converged):
    """What a node whose apt was killed mid-install looks like: a package unpacked but not
    configured. The plan says so; the rerun finishes dpkg and installs what is missing."""
    lab = converged
    lab.run("b300", "cd /tmp && apt-get download -q aria2 >/dev/null 2>&1 && "
                    "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q aria2 >/dev/null && "
                    "dpkg --unpack /tmp/aria2_*.deb >/dev/null && rm /tmp/aria2_*.deb")
    assert "not yet configured" in lab.run("b300", "dpkg --audit", check=False).stdout
    res, out = dry(lab)
    assert "[b300] packages: install aria2; finish the interrupted dpkg run" in out, out[-3000:]
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    assert lab.run("b300", "dpkg --audit", check=False).stdout.strip() == ""
    assert lab.run("b300", "dpkg-query -W -f '${Status}' aria2").stdout == "install ok installed"
    assert changed_ops(out) == {EARLY_PREREQUISITE: 1}, changed_ops(out)
