"""A run that failed is never summarised as ok, whatever failed: an exception in an operation
(a bug included) fails that host with a sentence; one outside any operation ends the run and
every host is reported FAILED. pyinfra's own CLI on @local: the operations here only raise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from operations.packages import EARLY_PREREQUISITE
from tests.conftest import ROOT

DEPLOY = '''
from pyinfra import host
from pyinfra.api.command import FunctionCommand, StringCommand
from operations import summary
from operations.util import operation

summary.track(host)

@operation()
def broken():
    """+ nothing"""
    {"size": None}["size"] + 1  # what a mirror's listing without sizes did to build_manifest
    yield StringCommand("true")

def raising(state, host):
    return {"files": []}["index"]  # a report without the key the callback expected

@operation()
def broken_callback():
    """+ nothing"""
    yield FunctionCommand(raising, (), {})

@operation()
def fine():
    """+ nothing"""
    yield StringCommand("true")

if "{where}" == "deploy":
    raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")
if "{where}" == "operation":
    broken(name="Checkpoint x")
if "{where}" == "callback":
    broken_callback(name="Verify x")
if "{where}" == "leaky":  # a bug whose message quotes a signed URL, a token and a terminal reset
    @operation()
    def leaky():
        """+ nothing"""
        raise ValueError("bad answer from https://cdn.example/x?X-Amz-Signature=abc123def456 with "
                         + "hf_" + "q" * 34 + " \x1bc")
        yield StringCommand("true")
    leaky(name="Checkpoint x")
if "{where}" == "refused":
    from operations.util import refused
    refused(name="Server settings", message="the API key file /k does not exist; create it (mode 0600)")
if "{where}" == "decided":
    from operations.util import decided
    chosen = decided("Whether it serves", lambda: {}["active"], default="the default")
    assert chosen == "the default"
fine(name="After it")
'''


def run(tmp_path: Path, where: str, *flags: str) -> tuple[int, str]:
    deploy = tmp_path / "deploy_under_test.py"
    deploy.write_text(DEPLOY.replace("{where}", where))
    res = subprocess.run([str(Path(sys.executable).with_name("pyinfra")), "@local", str(deploy), *flags],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYINFRA_PROGRESS": "off", "PYTHONPATH": str(ROOT)})
    return res.returncode, res.stdout + res.stderr


def run_with_unreachable(tmp_path: Path, where: str, *flags: str) -> tuple[int, str]:
    """``run`` with a second host that never connects (nothing listens on its SSH port)."""
    inventory = tmp_path / "inventory_under_test.py"
    inventory.write_text('hosts = ["@local", ("gone", {"ssh_hostname": "127.0.0.1", "ssh_port": 1})]\n')
    deploy = tmp_path / "deploy_under_test.py"
    deploy.write_text(DEPLOY.replace("{where}", where))
    res = subprocess.run([str(Path(sys.executable).with_name("pyinfra")), str(inventory), str(deploy), *flags],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYINFRA_PROGRESS": "off", "PYTHONPATH": str(ROOT)})
    return res.returncode, res.stdout + res.stderr


def summary_of(out: str) -> tuple[str, str]:
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if "--> noderig:" in line)
    return lines[head], lines[head + 1]


def test_an_exception_in_an_operation_fails_that_host_with_a_sentence(tmp_path):
    code, out = run(tmp_path, "operation", "-y")
    head, line = summary_of(out)
    assert code != 0, out[-3000:]
    assert "1 failed (@local)" in head, out[-3000:]
    assert 'FAILED at "Checkpoint x": internal error: TypeError: unsupported operand' in line, line
    assert "Traceback" not in out, "the traceback is for --debug"


def test_an_exception_in_a_command_an_operation_runs_at_execution_fails_that_host_with_a_sentence(tmp_path):
    # (a FunctionCommand: the checkpoint's verification, the rollout's readiness check, the peer server)
    code, out = run(tmp_path, "callback", "-y")
    head, line = summary_of(out)
    assert code != 0 and "1 failed (@local)" in head, out[-3000:]
    assert 'FAILED at "Verify x": internal error: KeyError: \'index\'' in line, line
    assert "Traceback" not in out, "the traceback is for --debug"


def test_an_internal_errors_message_is_redacted_and_escaped_where_it_is_printed(tmp_path):
    # a bug's message is text noderig did not write (a Hub's URL, a token read with it, a server's bytes)
    code, out = run(tmp_path, "leaky", "-y")
    assert code != 0 and 'FAILED at "Checkpoint x": internal error: ValueError: bad answer from' in out, out[-3000:]
    assert "abc123def456" not in out and "hf_" + "q" * 34 not in out, out[-3000:]
    assert "\x1bc" not in out and "\\x1bc" in out, out[-3000:]


def test_an_exception_in_a_decision_the_deploy_file_takes_fails_the_host_at_its_step(tmp_path):
    # (the rollout decides in the deploy file, outside any operation: the run goes on, this host fails)
    code, out = run(tmp_path, "decided", "-y")
    head, line = summary_of(out)
    assert code != 0 and "1 failed (@local)" in head, out[-3000:]
    assert line.split(None, 1)[1].startswith('FAILED at "Whether it serves": internal error: KeyError: \'active\''), line
    assert "Traceback" not in out, "the traceback is for --debug"


def test_a_dry_run_says_the_host_would_fail_and_why(tmp_path):
    code, out = run(tmp_path, "operation", "--dry")
    head, line = summary_of(out)
    assert "would FAIL: internal error: TypeError: unsupported operand" in line, out[-3000:]


def test_with_debug_the_traceback_is_shown(tmp_path):
    code, out = run(tmp_path, "operation", "-y", "--debug")
    assert code != 0 and "Traceback" in out and "in broken" in out, out[-3000:]


@pytest.mark.parametrize("flags", [("-y",), ("--dry",)], ids=["run", "dry-run"])
def test_an_exception_outside_any_operation_is_never_summarised_as_ok(tmp_path, flags):
    code, out = run(tmp_path, "deploy", *flags)
    head, line = summary_of(out)
    assert code != 0, out[-3000:]
    assert "1 failed (@local)" in head and " ok" not in line, out[-3000:]
    assert "FAILED" in line and "the run stopped on an internal error" in line, line


def test_a_problem_found_outside_an_operation_fails_the_host_with_its_sentence(tmp_path):
    code, out = run(tmp_path, "refused", "-y")
    head, line = summary_of(out)
    assert code != 0 and "1 failed (@local)" in head, out[-3000:]
    assert 'FAILED at "Server settings": the API key file /k does not exist' in line, line


@pytest.mark.parametrize("flags", [("-y",), ("--dry", "-y")], ids=["run", "dry-run"])
def test_a_host_that_never_connected_is_summarised_as_failed_with_what_to_do(tmp_path, flags):
    code, out = run_with_unreachable(tmp_path, "none", *flags)
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if "--> noderig:" in line)
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines[head + 1:head + 3]}
    assert code != 0, out[-3000:]
    assert "2 host(s), 1 failed (gone)" in lines[head], out[-3000:]
    assert rows["gone"].startswith("FAILED: could not connect"), rows
    assert "nothing ran on it" in rows["gone"] and "rerun" in rows["gone"], rows
    assert "FAIL" not in rows["@local"], rows  # (without -y pyinfra asks whether to go on without it)


def test_a_run_without_errors_is_ok(tmp_path):
    code, out = run(tmp_path, "none", "-y")
    head, line = summary_of(out)
    assert code == 0 and "0 failed" in head and "ok, changed 1 of 1" in line, out[-3000:]


# --------------------------------------------------------------------------------------------
# The real deploy on the lab: an internal error injected into each step, as a bug would be.

INJECT = '''
import importlib, os, sys
target = os.environ["NODERIG_INJECT"]  # module:attribute[@the caller it breaks in]
spec, _, caller = target.partition("@")
module, _, attribute = spec.partition(":")
owner = importlib.import_module(module)
*path, name = attribute.split(".")
for part in path:
    owner = getattr(owner, part)
original = getattr(owner, name)
def injected(*args, **kwargs):
    if caller and sys._getframe(1).f_code.co_name != caller:
        return original(*args, **kwargs)
    raise RuntimeError("injected into " + target)
setattr(owner, name, injected)
'''
# (target, the step it fails the host at, the deploy's steps). The rollout's decisions read
# facts in the deploy file (whether the server serves: first at the checkpoint step, which asks
# whether a new revision goes beside the live one, then at the venv step; whether it must
# restart: at the service step); they fail the host at the step that asked first. /health is
# then first read by the checkpoint step's decision; readiness alone reads it itself.
STEPS = [
    ("noderig.preflight:problems", "Preflight: OS, disk, GPUs, base Python, exposure", "all"),
    ("pyinfra.facts.deb:DebPackages.process", EARLY_PREREQUISITE, "all"),
    ("noderig.treediff:diff_listings", "Venv /opt/sglang/venv from ct200", "all"),
    ("noderig.checkpoint_plan:classify@_planned", "Download started: moonshotai/Kimi-K2.6", "all"),
    ("noderig.service_plan:plan_service", "sglang running and enabled", "all"),
    ("operations.facts:HttpStatus.process", "Checkpoint moonshotai/Kimi-K2.6", "all"),
    ("operations.facts:HttpStatus.process", "Venv /opt/sglang/venv from ct200", "prerequisites,environment"),
    ("operations.facts:HttpStatus.process", "sglang ready", "readiness"),
]


@pytest.mark.lab
@pytest.mark.parametrize("target,step,steps", STEPS, ids=[f"{s}-{t.split(':')[-1]}" for t, s, _ in STEPS])
def test_an_internal_error_in_each_step_fails_the_host_at_that_step(lab, tmp_path, target, step, steps):
    from tests.conftest import deploy, run_pyinfra

    if target == STEPS[0][0]:
        res, out = deploy(lab)  # converged first: each injection then meets a node with nothing to do
        assert res.returncode == 0, out[-3000:]
    (tmp_path / "sitecustomize.py").write_text(INJECT)
    res = run_pyinfra(lab.inventory, "-y", "deploy.py", "--data", f"steps={steps}",
                      env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "NODERIG_INJECT": target})
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    head, _ = summary_of(out)
    line = next(l for l in out.splitlines() if l.strip().startswith("b300 "))
    assert "1 failed (b300)" in head, out[-3000:]
    assert f'FAILED at "{step}": internal error: RuntimeError: injected into {target}' in line, line
    assert "Traceback" not in out


# --------------------------------------------------------------------------------------------
# Facts tell absent from unreadable: a file that exists but cannot be read or parsed stops
# the host before any change, named; it is never read as "absent".

UNREADABLE = [
    ("/etc/noderig/repairs.json", "printf '{\"skip_server_warmup\": tr' > {path}", "is not valid JSON"),
    ("/etc/noderig/repairs.json", "printf '' > {path}", "is not valid JSON"),
    ("/models/Kimi-K2.6/.noderig/verified.json", "rm -f {path} && mkdir {path}", "Is a directory"),
]


@pytest.mark.lab
@pytest.mark.parametrize("path,damage,why", UNREADABLE, ids=["truncated", "empty", "a-directory"])
def test_a_file_a_fact_cannot_read_stops_the_host_with_its_name(lab, path, damage, why):
    from tests.conftest import deploy

    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    state = "stat -c '%n %Y %s' /etc/systemd/system/sglang.service; systemctl show -p MainPID --value sglang"
    before = lab.run("b300", state).stdout
    lab.run("b300", damage.replace("{path}", path))
    try:
        res, out = deploy(lab)
        line = next(l for l in out.splitlines() if l.strip().startswith("b300 "))
        assert res.returncode != 0 and "FAILED" in line, out[-3000:]
        assert path in out and why in out, out[-3000:]
        assert lab.run("b300", state).stdout == before, "nothing may change on a host whose facts failed"
    finally:
        lab.run("b300", f"rm -rf {path}")
