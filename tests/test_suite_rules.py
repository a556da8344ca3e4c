"""Rules the suite itself keeps: a run never passes green by skipping what it could not run."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def run_pytest_as_non_root(tmp_path, *args: str) -> subprocess.CompletedProcess:
    # geteuid() is what the rule reads; a plugin makes it answer as a normal user would.
    (tmp_path / "as_user.py").write_text("import os\nos.geteuid = lambda: 1000\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "as_user", "-p", "no:cacheprovider", "-q", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})


def test_selecting_the_lab_tier_without_root_fails_with_a_sentence(tmp_path):
    res = run_pytest_as_non_root(tmp_path, "tests/test_lab.py")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "passed" not in out, out[-2000:]
    assert "needs root" in out and '-m "not lab"' in out, out[-2000:]


def test_leaving_the_lab_tier_out_explicitly_runs_the_rest(tmp_path):
    res = run_pytest_as_non_root(tmp_path, "-m", "not lab", "tests/test_lab.py", "tests/test_service_plan.py")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-2000:]
    assert " passed" in out and "deselected" in out, out[-2000:]


def test_lab_runs_bound_readiness_and_a_tests_own_ready_timeout_wins(tmp_path):
    # The hang guard of the lab tier (conftest.LAB_READY_TIMEOUT): first on pyinfra's command
    # line, so that a test's own --data ready_timeout=... after it is what the deploy reads.
    from tests.conftest import pyinfra_command

    deploy = tmp_path / "show.py"
    deploy.write_text("from pyinfra import host, logger\nlogger.warning(f'ready_timeout={host.data.ready_timeout}')\n")
    for extra, expected in (((), "ready_timeout=300"), (("--data", "ready_timeout=3"), "ready_timeout=3")):
        cmd = pyinfra_command("@local", "--dry", str(deploy), *extra)
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env={"PATH": "/usr/bin:/bin", "PYINFRA_PROGRESS": "off"})
        out = res.stdout + res.stderr
        assert res.returncode == 0 and expected in out.split(), out[-2000:]
