"""A run that failed is never summarised as ok, whatever failed: an exception in an operation
(a bug included) fails that host with a sentence; one outside any operation ends the run and
every host is reported FAILED. pyinfra's own CLI on @local: the operations here only raise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

DEPLOY = '''
from pyinfra import host
from pyinfra.api.command import StringCommand
from operations import summary
from operations.util import operation

summary.track(host)

@operation()
def broken():
    """+ nothing"""
    {"size": None}["size"] + 1  # what a mirror's listing without sizes did to build_manifest
    yield StringCommand("true")

@operation()
def fine():
    """+ nothing"""
    yield StringCommand("true")

if "{where}" == "deploy":
    raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")
if "{where}" == "operation":
    broken(name="Checkpoint x")
fine(name="After it")
'''


def run(tmp_path: Path, where: str, *flags: str) -> tuple[int, str]:
    deploy = tmp_path / "deploy_under_test.py"
    deploy.write_text(DEPLOY.replace("{where}", where))
    res = subprocess.run([str(Path(sys.executable).with_name("pyinfra")), "@local", str(deploy), *flags],
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


def test_a_run_without_errors_is_ok(tmp_path):
    code, out = run(tmp_path, "none", "-y")
    head, line = summary_of(out)
    assert code == 0 and "0 failed" in head and "ok, changed 1 of 1" in line, out[-3000:]
