"""One path for the server's launcher (noderig/node/launch.py on the node): the unit runs the file
the service step uploads, and the service is restarted when that file changes. The path is not an
inventory setting: an inventory that sets ``launcher_path`` is refused, so it can never make the
unit and the upload disagree. Fast tier: the service step's composition runs against a fake host."""

from __future__ import annotations

import runpy
import shlex

import pytest
from pyinfra.context import ctx_host

from noderig.inventory_check import problems
from noderig.node import script_path
from noderig.server_settings import ServerSettings
from operations import service
from tests.conftest import ROOT
from tests.fakehost import FakeHost, fact, run_op

EXPECTED = "/usr/local/lib/noderig/launch.py"
TEXT_FILE = service.text_file  # the real operation (the fixture below stands recorders in for the step's)
DEFAULTS = {k: v for k, v in runpy.run_path(str(ROOT / "inventory/group_data/all.py")).items()
            if not k.startswith("_")}


class Recorder:
    """Stands in for one of the service step's operations: keeps the keyword arguments of each call."""

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return object()  # what pyinfra returns: an operation's meta, passed on as `changing`


@pytest.fixture
def installed(monkeypatch):
    """The operations ``service.install`` asks for on a target, by name, with their arguments."""
    ops = {name: Recorder() for name in ("check_flags", "refused", "system_user", "readable", "text_file", "running")}
    for name, recorder in ops.items():
        monkeypatch.setattr(service, name, recorder)
    settings = ServerSettings.from_inventory(DEFAULTS)
    with ctx_host.use(FakeHost()):
        service.install(settings, api_key_file=None, reference=None)
    assert ops["refused"].calls == []
    return ops


def test_the_unit_runs_the_launcher_the_service_step_uploads_and_watches(installed):
    files = {call["path"]: call for call in installed["text_file"].calls}
    launcher = [call for call in files.values() if call["text"] == script_path("launch.py").read_text()]
    assert [(call["path"], call["mode"]) for call in launcher] == [(EXPECTED, "755")]
    unit = files["/etc/systemd/system/sglang.service"]["text"]
    exec_start = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert shlex.split(exec_start[0].split("=", 1)[1])[:2] == ["/opt/sglang/venv/bin/python", EXPECTED]
    # a new launcher restarts the server: the service watches the file that was uploaded
    [running] = installed["running"].calls
    assert running["inputs"]["launcher"] == EXPECTED


def test_the_launcher_upload_lands_at_the_path_the_unit_runs(installed):
    [launcher] = [call for call in installed["text_file"].calls if call["path"] == EXPECTED]
    host = FakeHost(facts={fact("Sha256", path=EXPECTED): None, fact("FileMode", path=EXPECTED): None})
    commands = run_op(TEXT_FILE, host, path=launcher["path"], text=launcher["text"], mode=launcher["mode"])
    assert commands[1:] == [f"upload -> {EXPECTED}.noderig-tmp",
                            f"chmod 755 {EXPECTED}.noderig-tmp && mv -f {EXPECTED}.noderig-tmp {EXPECTED}"]


@pytest.mark.parametrize("value", ["/opt/noderig/launch.py", EXPECTED])
def test_an_inventory_that_sets_launcher_path_is_refused_naming_it(value):
    found = problems({**DEFAULTS, "launcher_path": value}, "b300")
    assert found == [f"inventory value launcher_path={value!r} is not a setting: the launcher is noderig's own "
                     f"file at {EXPECTED}, the path the unit runs; remove launcher_path from the inventory"]


def test_the_settings_have_no_launcher_path():
    assert not hasattr(ServerSettings.from_inventory({**DEFAULTS, "launcher_path": "/opt/x.py"}), "launcher_path")
