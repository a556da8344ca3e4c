"""The lab's own life cycle: a crashed `up` is cleaned up by the next run, which ends only
processes the lab recorded itself. Uses a second lab ("crashtest") beside the shared one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noderig_lab import net
from noderig_lab.hosts import is_mounted, leader_pid, pid_alive
from noderig_lab.layout import LabLayout

NODERIG = str(Path(sys.executable).with_name("noderig"))


def _noderig(layout: LabLayout, *args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "NODERIG_LAB": layout.name}
    return subprocess.run([NODERIG, *args], capture_output=True, text=True, env=env, timeout=300, **kw)


def _leftovers(layout: LabLayout) -> list[str]:
    found = []
    if net.link_exists(layout.bridge):
        found.append(f"bridge {layout.bridge}")
    if net.netns_exists(layout.services_netns):
        found.append(f"netns {layout.services_netns}")
    hosts = layout.state_dir / "hosts"
    for root in hosts.glob("*/root") if hosts.is_dir() else ():
        if is_mounted(root):
            found.append(f"mount {root}")
    found += [f"cgroup {c}" for c in layout.cgroup_dirs() if c.exists()]
    tag = f"noderig-lab-host:{layout.name}:".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if tag in cmdline.read_bytes():
                found.append(f"process {cmdline.parent.name}")
        except OSError:
            pass
    return found


@pytest.mark.lab
def test_a_killed_up_is_cleaned_up_and_strangers_are_spared(lab):
    layout = LabLayout.from_env("crashtest")
    env = {**os.environ, "NODERIG_LAB": layout.name}
    proc = subprocess.Popen([NODERIG, "lab", "up"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # kill it once its hosts run beside the test lab's
            try:
                hosts = json.loads(layout.record.read_text()).get("hosts", [])
            except (OSError, ValueError):
                hosts = []
            if len(hosts) == 2 and all(h["pid"] and leader_pid(h["pid"]) for h in hosts):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"lab up never booted its hosts; see {layout.state_dir}/hosts/*/nspawn.log")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _leftovers(layout), "the killed run should have left hosts behind for this test to mean anything"

        # A process whose pid the record names, but which is not the lab's, must survive.
        stranger = subprocess.Popen(["sleep", "60"])
        record = json.loads(layout.record.read_text())
        record["hosts"].append({"name": "ghost", "index": 9, "ip": "", "role": "target", "pid": stranger.pid})
        layout.record.write_text(json.dumps(record))

        res = _noderig(layout, "lab", "down")
        assert res.returncode == 0, res.stderr
        assert _leftovers(layout) == []
        assert pid_alive(stranger.pid) and stranger.poll() is None
        stranger.kill()
        stranger.wait()
        assert "down" in _noderig(layout, "lab", "status").stdout
    finally:
        if proc.poll() is None:
            proc.kill()
        _noderig(layout, "lab", "down")
