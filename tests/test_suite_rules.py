"""Rules the suite itself keeps: a run never passes green by skipping what it could not run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run_pytest_as_non_root(tmp_path, *args: str) -> subprocess.CompletedProcess:
    # geteuid() is what the rule reads; a plugin makes it answer as a normal user would.
    (tmp_path / "as_user.py").write_text("import os\nos.geteuid = lambda: 1000\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "as_user", "-p", "no:cacheprovider", "-q", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})


# As scripts/test runs it (two pytest-xdist workers, tests/lab_worker.py), and in one process.
WORKERS = pytest.mark.parametrize("workers", [["-n", "2"], ["-p", "no:xdist"]], ids=["two-workers", "one-process"])


@WORKERS
def test_selecting_the_lab_tier_without_root_fails_with_a_sentence(tmp_path, workers):
    res = run_pytest_as_non_root(tmp_path, *workers, "tests/test_lab.py", "tests/test_service_plan.py")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "passed" not in out, out[-2000:]
    assert "needs root" in out and '-m "not lab"' in out, out[-2000:]


@WORKERS
def test_leaving_the_lab_tier_out_explicitly_runs_the_rest(tmp_path, workers):
    res = run_pytest_as_non_root(tmp_path, *workers, "-m", "not lab", "tests/test_lab.py", "tests/test_service_plan.py")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-2000:]
    # xdist's controller does not report what its workers deselected
    assert " passed" in out and "failed" not in out and "error" not in out, out[-2000:]
    assert "deselected" in out or workers == ["-n", "2"], out[-2000:]


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


SCHEDULED = '''
import os, pytest
LOG = os.environ["SCHEDULE_LOG"]

def ran(kind, i):
    with open(LOG, "a") as f:
        f.write(f"{kind} {i} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.parametrize("i", range(12))
def test_fast_before(i): ran("fast", i)

@pytest.mark.lab
@pytest.mark.parametrize("i", range(4))
def test_lab_first(i): ran("lab", i)

@pytest.mark.parametrize("i", range(12))
def test_fast_between(i): ran("fast", 12 + i)

@pytest.mark.lab
@pytest.mark.parametrize("i", range(4, 8))
def test_lab_then(i): ran("lab", i)
'''


def test_two_workers_run_every_lab_test_on_one_worker_in_order(tmp_path):
    # They share one lab; a second worker would boot it again beside the first. Lab tests sit
    # between fast ones here, where xdist's plain load balancing spreads them over both workers.
    (tmp_path / "conftest.py").write_text(
        "import os\nos.geteuid = lambda: 0  # the root rule is tested above\n"
        "pytest_plugins = ['tests.lab_worker']\n"
        "def pytest_configure(config):\n    config.addinivalue_line('markers', 'lab: the lab tier')\n")
    (tmp_path / "test_scheduled.py").write_text(SCHEDULED)
    log = tmp_path / "ran.txt"
    res = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q",
                          "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "SCHEDULE_LOG": str(log)})
    assert res.returncode == 0 and "32 passed" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]
    ran = [line.split() for line in log.read_text().splitlines()]
    lab = [(int(i), worker) for kind, i, worker in ran if kind == "lab"]
    assert [i for i, _ in lab] == list(range(8)), ran
    assert len({worker for _, worker in lab}) == 1, ran
    assert sorted(int(i) for kind, i, _ in ran if kind == "fast") == list(range(24)), ran
