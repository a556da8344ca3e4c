"""Fleet basics on the lab: one reference and three targets provisioned by one command, in
parallel (pyinfra runs each operation on every host at once). One failing host does not stop
the others, and the summary says which host failed, where and why. Then the fixed host is
repaired by a rerun, and a no-op rerun reports its time and its commands per host."""

from __future__ import annotations

import re
import time

import pytest

from operations.packages import EARLY_PREREQUISITE
from tests.conftest import changed_ops, run_pyinfra, venv_copies

pytestmark = pytest.mark.lab

TARGETS = ("b300", "b300-2", "b300-3")
SOURCES = "/etc/apt/sources.list.d/noderig-lab.list"


def fleet_deploy(lab):
    began = time.monotonic()
    res = run_pyinfra(lab.fleet_inventory, "-y", "deploy.py")
    return res, res.stdout + res.stderr, time.monotonic() - began


SSH_CLIENT = "/usr/bin/ssh"


def summary(out: str) -> dict[str, str]:
    """Host -> its line in noderig's end-of-run summary."""
    tail = out.split("--> noderig:")[-1]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\S+)\s{2,}(.*)$", tail, re.M)}


def test_one_failing_host_does_not_stop_the_others_and_the_summary_names_it(lab):
    for name in TARGETS:
        lab.reset(name)
    # b300-3 loses its package source: its prerequisites step fails mid-deploy.
    saved = lab.run("b300-3", f"cat {SOURCES}").stdout
    lab.run("b300-3", f"rm {SOURCES}")

    try:
        res, out, took = fleet_deploy(lab)
        assert res.returncode == 1, out[-4000:]
        lines = summary(out)
        print(f"fleet of 3 (one failing) provisioned in {took:.1f} s")
        # (its first apt run: aria2, installed first so that its checkpoint stripe starts downloading)
        assert lines["b300-3"].startswith(f'FAILED at "{EARLY_PREREQUISITE}"'), out[-4000:]
        assert "Unable to locate package" in lines["b300-3"], lines["b300-3"]
        assert "1 failed (b300-3)" in out
        for name in ("b300", "b300-2"):
            assert lines[name].startswith("ok, changed"), lines[name]
            assert lab.run(name, "systemctl is-active sglang").stdout.strip() == "active"
            assert lab.run(name, "curl -sf localhost:30000/health", check=False).returncode == 0
        # Nothing after the failure ran on b300-3.
        assert lab.run("b300-3", "test -e /opt/sglang/venv || test -e /etc/systemd/system/sglang.service",
                       check=False).returncode != 0
        # The reference sent the venv once: b300-2 took it from b300 (venv_from_peers).
        assert venv_copies(out) == {"b300": "ct200", "b300-2": "b300"}, out[-4000:]
    finally:  # b300-3's package source back, whatever failed: later tests deploy to it
        lab.run("b300-3", f"cat > {SOURCES} <<'EOF'\n{saved}EOF")

    # Fixed, rerun: b300-3 is provisioned; the other two change nothing. Its source, b300, has no
    # ssh client this time: the copy from it fails, and b300-3 takes the venv from the reference.
    lab.run("b300", f"mv {SSH_CLIENT} {SSH_CLIENT}.off")
    try:
        res, out, took = fleet_deploy(lab)
    finally:
        lab.run("b300", f"mv {SSH_CLIENT}.off {SSH_CLIENT}")
    assert res.returncode == 0, out[-4000:]
    assert venv_copies(out) == {"b300-3": "ct200"}, out[-4000:]
    assert re.search(r"\[b300-3\] venv not from b300 \(rsync of the venv from b300 to b300-3 failed", out), out[-4000:]
    lines = summary(out)
    assert lines["b300-3"].startswith("ok, changed"), lines["b300-3"]
    for name in ("b300", "b300-2"):
        # They served the checkpoint to b300-3 (the fan-out: a server and its firewall port,
        # opened and closed again); nothing of their own changed.
        changed = re.match(r"ok, (?:no changes|changed \d+ of \d+ operations: (.*?));", lines[name])
        assert changed, lines[name]
        assert all(op.startswith(("Fan-out: ", "Firewall")) for op in (changed.group(1) or "").split(", ") if op), \
            lines[name]
    assert lab.run("b300-3", "systemctl is-active sglang").stdout.strip() == "active"

    # A no-op rerun: zero changes everywhere, its time and its commands per host reported.
    res, out, took = fleet_deploy(lab)
    assert res.returncode == 0 and changed_ops(out) == {}, changed_ops(out)
    lines = summary(out)
    print(f"no-op rerun of the fleet: {took:.1f} s; " + "; ".join(f"{n}: {lines[n]}" for n in TARGETS))
    head = re.search(r"--> noderig: 4 host\(s\), 0 failed, ([\d.]+) s", out)
    assert head, out[-2000:]
    for name in TARGETS:
        commands = int(re.search(r"(\d+) commands", lines[name]).group(1))
        # Facts only: no hashing, no transfer (a regression that re-hashes shows up as more).
        # The facts the last run read come in one command, what runs (the server's unit,
        # /health) among them, fresh enough for the operation run that follows at once: 1
        # measured, a few more right after the run that provisioned the node (a fact a converged
        # node reads and a provisioning run did not is read on its own once). Before facts were
        # kept: 76; before what runs was taken from that command: 5.
        assert lines[name].startswith("ok, no changes") and 1 <= commands <= 8, lines[name]

    for name in ("b300-2", "b300-3"):
        lab.reset(name)  # the stand-in servers go; the hosts stay booted for nothing else
