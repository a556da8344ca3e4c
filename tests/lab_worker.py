"""The lab tier needs root, and runs on one pytest-xdist worker (scripts/test runs two).

Every lab test shares one lab and its hosts (tests/conftest.py's session fixture ``lab``), so
they all go to one worker, in the order collected; a second worker would boot the same lab
again beside the first. The fast tier runs on the other worker meanwhile, as the lab tier
spends most of its time waiting on its hosts.

Only a worker collects, and xdist hands the controller bare test ids, so each worker lists
its lab tests in a file the controller named for it (xdist's own ``xdist_group`` marker does
this by renaming ids, which pytest 9 no longer allows). tests/conftest.py registers this
module as a plugin.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

LAB_TESTS_DIR = "noderig_lab_tests_dir"  # the workerinput key: where workers list their lab tests
LAB_SCOPE = "lab"
LAB_TESTS_DIR_KEY = pytest.StashKey[Path]()


def lab_tier_needs_root(count: int) -> str:
    return (f"{count} lab test(s) selected, and the lab tier boots containers, which needs root: "
            'run as root (sudo scripts/test), or leave the lab tier out explicitly with -m "not lab"')


def lab_tests_dir(config: pytest.Config) -> Path:
    """The controller's directory for the workers' lists, made once per run."""
    if LAB_TESTS_DIR_KEY not in config.stash:
        folder = config.stash[LAB_TESTS_DIR_KEY] = Path(tempfile.mkdtemp(prefix="noderig-lab-tests-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    return config.stash[LAB_TESTS_DIR_KEY]


def listed_lab_tests(config: pytest.Config, worker_id: str | None = None) -> set[str]:
    """The lab tests one worker (or every worker) listed."""
    found: set[str] = set()
    for path in lab_tests_dir(config).glob(f"{worker_id or '*'}.txt"):
        found.update(path.read_text().split("\n"))
    return found - {""}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Controller: tell the worker where to list its lab tests."""
    node.workerinput[LAB_TESTS_DIR] = str(lab_tests_dir(node.config))


@pytest.hookimpl(trylast=True)  # after -m deselected what it leaves out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run that selects lab tests needs root: without it the run fails with a sentence
    instead of skipping them and passing green (leave the tier out with -m "not lab").
    A worker lists them for its controller instead, which says it."""
    lab_tests = [item for item in items if "lab" in item.keywords]
    if hasattr(config, "workerinput"):
        list_lab_tests(config, lab_tests)
    elif lab_tests and os.geteuid() != 0:
        raise pytest.UsageError(lab_tier_needs_root(len(lab_tests)))


def list_lab_tests(config: pytest.Config, lab_tests: list[pytest.Item]) -> None:
    """Worker: write the list whole, then rename it into place, so the controller never reads half."""
    folder = Path(config.workerinput[LAB_TESTS_DIR])
    partial = folder / f"{config.workerinput['workerid']}.partial"
    partial.write_text("".join(f"{item.nodeid}\n" for item in lab_tests))
    partial.rename(partial.with_suffix(".txt"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    """Controller: a run that selects lab tests without root stops with the sentence. Raised in
    a worker, the error would reach the user as that worker's crash, without it."""
    lab_tests = listed_lab_tests(node.config, node.workerinput["workerid"])
    if os.geteuid() != 0 and lab_tests:
        pytest.exit(lab_tier_needs_root(len(lab_tests)), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Controller: xdist's load balancing, with every lab test in one unit of work. Units go out
    largest first, so the lab's goes to the first worker at the start."""
    from xdist.scheduler import LoadScopeScheduling

    class LabOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if not hasattr(self, "lab_tests"):
                self.lab_tests = listed_lab_tests(config)
            return LAB_SCOPE if nodeid in self.lab_tests else nodeid

    return LabOnOneWorker(config, log)
