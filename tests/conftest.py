"""Shared fixtures. The lab tier (marker ``lab``) boots one lab, named "test", for the whole
session and shares its hosts across tests; a test that needs a pristine host resets it (drops
its overlay, ~2 s) instead of rebuilding the lab.

The lab tier needs root: a run that selects lab tests without root fails with a sentence
(never a green run that skipped them); leave the tier out with ``-m "not lab"``. Under
pytest-xdist every lab test runs on one worker (tests/lab_worker.py, registered below).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import lab_worker

ROOT = Path(__file__).resolve().parent.parent


def pytest_make_parametrize_id(config, val, argname):
    """A test id pytest can select again: pytest writes a backslash, a control character or a
    non-ASCII character of a parameter as an escape that a node id given back to it no longer
    matches (mutmut reruns tests by node id). Such text gets a plain ASCII id, % for \\."""
    if isinstance(val, str) and not (val.isascii() and val.isprintable() and "\\" not in val):
        return val.encode("unicode_escape").decode("ascii").replace("\\", "%")
    if isinstance(val, bytes) and "\\" in repr(val):
        return repr(val)[2:-1].replace("\\", "%")
    return None


def pytest_configure(config):
    """The lab tier's rules (root; one worker) come from tests/lab_worker.py.

    Under mutation testing (scripts/mutation), keep the active mutant in this process only.
    mutmut names it in MUTANT_UNDER_TEST, which every child inherits; a node script that a
    test copies out of the tree and runs (the launcher, the verifier) then loads mutmut's
    trampolines in a directory with no mutmut configuration and dies before it runs. Such a
    script runs as __main__, where no mutant applies anyway, so the child needs no name."""
    config.pluginmanager.register(lab_worker, "noderig-lab-worker")
    name = os.environ.pop("MUTANT_UNDER_TEST", None)
    if name is not None:
        from mutmut.mutation import trampoline
        trampoline._mutant_under_test = name


@pytest.fixture(scope="session")
def lab():
    from noderig_lab.lab import Lab, write_inventory
    from noderig_lab.layout import LabLayout

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


# A hang guard, not a speed check: the lab's stand-in answers /health seconds after its start,
# so a readiness wait of the default ready_timeout (1800 s, for a real checkpoint) would only
# hide a server that never comes up for half an hour. Tests give it first; a test's own
# ready_timeout comes later on the command line and wins.
LAB_READY_TIMEOUT = 300


def pyinfra_command(inventory: Path, *args: str) -> list[str]:
    """pyinfra's own CLI on ``inventory`` with ``args``, the lab's readiness bound first."""
    return [str(Path(sys.executable).with_name("pyinfra")), str(inventory),
            "--data", f"ready_timeout={LAB_READY_TIMEOUT}", *args]


def run_pyinfra(inventory: Path, *args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """The user's path: pyinfra's own CLI from the project root."""
    cmd = pyinfra_command(inventory, *args)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYINFRA_PROGRESS": "off", **(env or {})})


def diagnose_cli(data: bytes, *args: str) -> subprocess.CompletedProcess:
    """`noderig diagnose - <args>` fed ``data`` on standard input as it was saved (bytes: compressed, any encoding)."""
    return subprocess.run([sys.executable, "-m", "noderig.cli", "diagnose", "-", *args], input=data, cwd=ROOT,
                          capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def deploy(lab, *data: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess, str]:
    """``pyinfra -y <lab inventory> deploy.py --data k=v ...`` (a later --data wins); returns
    the result and its whole output."""
    args = ["-y", "deploy.py"]
    for d in data:
        args += ["--data", d]
    res = run_pyinfra(lab.inventory, *args, timeout=timeout)
    return res, res.stdout + res.stderr


def changed_ops(out: str) -> dict[str, int]:
    """Operation -> number of hosts it changed, from pyinfra's results table. The table must be
    there and end in its "Grand total" row, whose change count must agree with the rows: an
    output it cannot read fails the test instead of reading as "no changes"."""
    assert "--> Results:" in out, f"no pyinfra results table in the output:\n{out[-3000:]}"
    found, total = {}, None
    for line in out.split("--> Results:")[-1].splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != 5 or not cells[1].isdigit():
            continue
        changed = 0 if cells[2] == "-" else int(cells[2])
        if cells[0] == "Grand total":
            total = changed
        elif changed:
            found[cells[0]] = found.get(cells[0], 0) + changed
    assert total is not None, f"the results table has no Grand total row:\n{out[-3000:]}"
    assert total == sum(found.values()), f"the results table's rows ({found}) do not add up to {total}"
    return found


def parallel_ranges_rate(size: int) -> int:
    """A throttle (bytes/s per response) at which one connection alone would need four seconds for a file of `size`:
    aria2's extra connections start before the first one ends, even on a loaded CI machine (at a fixed 8 MiB/s a
    3 MiB shard took 0.4 s and once came whole through one connection)."""
    return max(64 << 10, size // 4)


def hub_call(lab, path: str, data: dict | None = None) -> dict:
    """The lab Hub's test controls: /_lab/faults, /_lab/reset, /_lab/stats."""
    import json
    import urllib.request

    req = urllib.request.Request(f"{lab.layout.hub_url}{path}", method="POST" if data is not None else "GET",
                                 data=json.dumps(data).encode() if data is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def venv_copies(out: str) -> dict[str, str]:
    """Node -> the host its venv copy came from in a deploy's output (the reference, ct200, or
    a target that had it: venv_from_peers)."""
    return {m.group(1): m.group(2) or "ct200"
            for m in re.finditer(r"\[(\S+)\] venv copied \(direct(?:, from (\S+), a target that had it)?\)", out)}
