"""The walking skeleton end to end on the lab: pyinfra's own CLI, the real deploy.py."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import changed_ops, run_pyinfra

pytestmark = pytest.mark.lab


def test_deploy_provisions_b300_from_ct200_then_changes_nothing(lab):
    lab.reset("b300")  # a bare node, whatever earlier tests did to it
    dry = run_pyinfra(lab.inventory, "deploy.py", "--dry")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "Venv /opt/sglang/venv from ct200" in dry.stdout + dry.stderr
    # the dry run changed nothing on the node
    assert lab.run("b300", "test -e /opt/sglang/venv || test -e /etc/systemd/system/sglang.service",
                   check=False).returncode == 1

    first = run_pyinfra(lab.inventory, "-y", "deploy.py")
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-5000:]
    assert "ready in" in out
    models = json.loads(lab.run("b300", "curl -sf http://127.0.0.1:30000/v1/models").stdout)
    assert [m["id"] for m in models["data"]] == ["kimi-k2.6"]
    unit = lab.run("b300", "cat /etc/systemd/system/sglang.service").stdout
    assert "--skip-server-warmup" in unit and "DDTREE" in unit
    pid_before = lab.run("b300", "systemctl show -p MainPID --value sglang").stdout.strip()

    second = run_pyinfra(lab.inventory, "-y", "deploy.py")
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-5000:]
    assert changed_ops(out) == {}, second.stdout[-3000:]
    # The rerun's cost, reported by the deploy itself: no re-hash, no transfer, no restart.
    line = re.search(r"^\s*b300\s+ok, no changes \((\d+) operations\); (\d+) commands", out, re.M)
    assert line, out[-2000:]
    print(f"no-op rerun: {line.group(2)} commands on b300")
    # Facts only (its wall time is measured in bench/, not asserted on a loaded machine).
    assert int(line.group(2)) <= 60
    assert lab.run("b300", "systemctl show -p MainPID --value sglang").stdout.strip() == pid_before
