"""Crash diagnosis and repair on the lab, through the real deploy: the reference case
(vision warmup without flash_attn.cute) and a node without python3-dev."""

from __future__ import annotations

import base64
import json
import re
import subprocess

import pytest

from noderig_lab import hosts as hostlib
from tests.conftest import deploy, diagnose_cli

pytestmark = pytest.mark.lab


def crash_to_report_seconds(out: str) -> float:
    m = re.search(r"printed ([\d.]+) s after the crash reached the journal", out)
    assert m, out[-3000:]
    return float(m.group(1))


def test_vision_warmup_crash_is_named_with_its_chain_and_repaired(lab):
    lab.reset("b300")
    res, out = deploy(lab, "skip_server_warmup=false")
    assert res.returncode != 0
    assert "diagnosis: flash_attn_cute_missing" in out, out[-4000:]
    chain = re.search(r"call chain: (.*)", out).group(1)
    assert chain.index("mm_utils._get_chunked_embedding_by_item") < chain.index("kimi_k25.get_image_feature")
    assert "fix: Relaunch with --skip-server-warmup" in out
    assert "rerun with --data repair=true" in out
    # The deploy reports how long after the crash it printed the diagnosis (a figure, not a
    # test: the machine's load decides it).
    print(f"crash -> diagnosis printed: {crash_to_report_seconds(out):.2f} s")
    # The node's journal exported by hand, as a user attaches it (journald's own JSON records too, gzipped),
    # is named the same by the CLI
    for export in ("-o short-iso-precise", "-o json", "-o json | gzip -c"):
        journal = lab.run("b300", f"journalctl -u sglang --no-pager {export} | base64 -w0").stdout
        r = diagnose_cli(base64.b64decode(journal), "--json")
        assert r.returncode == 1, (export, r.stderr)
        report = json.loads(r.stdout)  # the class, and the traceback read through journald's records
        assert report["class"] == "flash_attn_cute_missing", export
        assert "mm_utils._get_chunked_embedding_by_item" in report["chain"], export

    res, out = deploy(lab, "skip_server_warmup=false", "repair=true")
    assert res.returncode == 0, out[-4000:]
    assert "repaired: skip the server warmup" in out and "ready in" in out
    assert "--skip-server-warmup" in lab.run("b300", "cat /etc/systemd/system/sglang.service").stdout

    # The repair is recorded on the node: the same inventory again changes nothing.
    pid = lab.run("b300", "systemctl show -p MainPID --value sglang").stdout
    res, out = deploy(lab, "skip_server_warmup=false")
    assert res.returncode == 0, out[-4000:]
    assert "Grand total" in out and re.search(r"Grand total\s+\d+\s+-\s+-\s+\d+", out), out[-2500:]
    assert lab.run("b300", "systemctl show -p MainPID --value sglang").stdout == pid


def test_missing_python_headers_are_named_and_repaired_by_installing_python3_dev(lab):
    lab.reset("b300")
    res, out = deploy(lab, 'packages=["aria2", "rsync", "curl"]')
    assert res.returncode != 0
    assert "diagnosis: missing_python_headers" in out, out[-4000:]
    assert "Python.h" in out
    res, out = deploy(lab, 'packages=["aria2", "rsync", "curl"]', "repair=true")
    assert res.returncode == 0, out[-4000:]
    assert "repaired: install python3-dev" in out and "ready in" in out
    assert lab.run("b300", "test -e /usr/include/python3.11/Python.h", check=False).returncode == 0


def test_a_fix_that_does_not_help_is_not_applied_again(lab):
    lab.reset("b300")
    # A repair already recorded for this very failure: the deploy must not loop on it.
    lab.run("b300", "mkdir -p /etc/noderig && echo '{\"repairs\": [{\"remedy\": \"install_package:python3-dev\", "
                    "\"settings\": {}}]}' > /etc/noderig/repairs.json")
    res, out = deploy(lab, 'packages=["aria2", "rsync", "curl"]', "repair=true")
    assert res.returncode != 0
    assert "was already applied and the server still fails" in out, out[-3000:]
    assert out.count("diagnosis: missing_python_headers") == 1


def test_a_port_taken_by_another_process_is_diagnosed_and_the_server_moved(lab):
    lab.reset("b300")
    lab.run("b300", "systemd-run --unit=squatter python3 -m http.server 30000 --bind 0.0.0.0")
    try:
        res, out = deploy(lab, "repair=true")
        assert "diagnosis: port_in_use" in out, out[-4000:]
        assert res.returncode == 0, out[-4000:]
        assert "move the server from port 30000 to free port 30001" in out
        assert lab.run("b300", "systemctl is-active squatter").stdout.strip() == "active", "never kill a stranger"
        assert "--port 30001" in lab.run("b300", "cat /etc/systemd/system/sglang.service").stdout
        res, out = deploy(lab)  # the recorded repair keeps the new port: nothing to do
        assert res.returncode == 0 and re.search(r"Grand total\s+\d+\s+-\s+-\s+\d+", out), out[-2500:]
    finally:
        lab.run("b300", "systemctl stop squatter", check=False)


def test_a_server_still_starting_is_not_reported_as_crashed(lab):
    lab.reset("b300")
    # The stand-in's startup slowed 60-fold: it is still loading when the readiness wait ends.
    res, out = deploy(lab, "ready_timeout=5", 'server_environment={"SGLANG_STANDIN_TIME_SCALE": "60"}')
    assert res.returncode != 0, out[-3000:]  # not ready in time: the host is not reported ok
    assert re.search(r"sglang\.service is still starting after [\d.]+ s \([^)]*not yet ready\): not a crash", out), \
        out[-4000:]
    assert "diagnosis:" not in out and "failed during startup" not in out
    assert lab.run("b300", "systemctl is-active sglang", check=False).stdout.strip() in ("active", "activating")


def test_a_server_killed_while_starting_is_a_failure_with_systemds_words(lab):
    lab.reset("b300")
    # SIGKILL from outside while the slowed stand-in loads (what the kernel's OOM killer does): the server's own
    # lines show no failure; systemd's lines of the same invocation say how it ended, and the deploy reads them
    # (on a node with a memory controller, "A process of this unit has been killed by the OOM killer" among them)
    killer = subprocess.Popen(hostlib.ssh_command(lab.layout, lab.host("b300"), (
        "for i in $(seq 600); do test \"$(systemctl show -p ActiveState --value sglang)\" = active "
        "&& journalctl -u sglang -o cat | grep -q 'Load weight' && break; sleep 0.5; done; "
        "systemctl kill --kill-whom=main -s KILL sglang")))
    try:
        res, out = deploy(lab, "ready_timeout=300", 'server_environment={"SGLANG_STANDIN_TIME_SCALE": "60"}')
    finally:
        killer.wait(timeout=60)
    assert res.returncode != 0, out[-3000:]
    assert "failed during startup" in out and "diagnosis: unknown" in out, out[-4000:]  # not "still starting"
    assert re.search(r"evidence: sglang\.service: Main process exited, code=killed, status=9/KILL", out), out[-4000:]
