"""Shared fixtures. The lab tier (marker ``lab``) boots one lab, named "test", for the whole
session and shares its hosts across tests; a test that needs a pristine host resets it (drops
its overlay, ~2 s) instead of rebuilding the lab.

The lab tier needs root. It is required, not optional, where NODERIG_REQUIRE_LAB=1 (CI):
a lab that cannot boot then fails the run instead of skipping it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0 or os.environ.get("NODERIG_REQUIRE_LAB") == "1":
        return
    skip = pytest.mark.skip(reason="the lab tier boots containers and needs root")
    for item in items:
        if "lab" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def lab():
    from noderig.lab.lab import Lab
    from noderig.lab.layout import LabLayout

    from noderig.lab.lab import write_inventory

    # NODERIG_TEST_LAB names another lab, so that two checkouts can run the lab tier side by side.
    instance = Lab(LabLayout.from_env(os.environ.get("NODERIG_TEST_LAB", "test")), log=lambda m: print(f"[lab] {m}", file=sys.stderr))
    # Three targets for the fleet test; every other test deploys to the first one alone.
    instance.fleet_inventory = instance.up(targets=3)
    hosts = instance.hosts
    instance.inventory = instance.fleet_inventory.with_name(instance.fleet_inventory.stem + "_single.py")
    write_inventory(instance.inventory, instance.layout, [h for h in hosts if h.role == "reference"] +
                    [h for h in hosts if h.role == "target"][:1])
    yield instance
    if os.environ.get("NODERIG_KEEP_LAB") != "1":
        instance.down()


def run_pyinfra(inventory: Path, *args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """The user's path: pyinfra's own CLI from the project root."""
    cmd = [str(Path(sys.executable).with_name("pyinfra")), str(inventory), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYINFRA_PROGRESS": "off", **(env or {})})


def deploy(lab, *data: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess, str]:
    """``pyinfra -y <lab inventory> deploy.py --data k=v ...`` (a later --data wins); returns
    the result and its whole output."""
    args = ["-y", "deploy.py"]
    for d in data:
        args += ["--data", d]
    res = run_pyinfra(lab.inventory, *args, timeout=timeout)
    return res, res.stdout + res.stderr


def changed_ops(out: str) -> dict[str, int]:
    """Operation -> number of hosts it changed, from pyinfra's results table."""
    found = {}
    for line in out.split("--> Results:")[-1].splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 5 and cells[1].isdigit() and cells[2] != "-" and cells[0] != "Grand total":
            found[cells[0]] = int(cells[2])
    return found


def hub_call(lab, path: str, data: dict | None = None) -> dict:
    """The lab Hub's test controls: /_lab/faults, /_lab/reset, /_lab/stats."""
    import json
    import urllib.request

    req = urllib.request.Request(f"{lab.layout.hub_url}{path}", method="POST" if data is not None else "GET",
                                 data=json.dumps(data).encode() if data is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")
