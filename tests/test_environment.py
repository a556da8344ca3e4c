"""Environment step on the lab: the reference venv copied ct200 -> b300, idempotent, repaired,
relayed when the hosts cannot reach each other, refused when it could not work."""

from __future__ import annotations

import re

import pytest

from tests.conftest import deploy

pytestmark = pytest.mark.lab

VENV = "/opt/sglang/venv"
PKG = f"{VENV}/lib/python3.11/site-packages/sglang"
ENV_STEPS = "steps=prerequisites,environment"




def listing(lab, name: str) -> str:
    # Directories by mode and name only: their mtimes change whenever Python adds a
    # __pycache__ inside, which is not drift (see the bytecode test below).
    return lab.run(name, f"cd {VENV} && find . -name __pycache__ -prune -o -type d -printf 'd %m %P\\n' "
                         "-o -printf '%y %s %T@ %m %l %P\\n' | LC_ALL=C sort").stdout


def transferred(out: str) -> int:
    m = re.search(r"venv copied \((?:direct|relay)\): (\d+) files", out)
    assert m, out[-3000:]
    return int(m.group(1))


def test_copy_from_reference_then_rerun_changes_nothing(lab):
    lab.reset("b300")
    res, out = deploy(lab, ENV_STEPS)
    assert res.returncode == 0, out[-4000:]
    assert "venv copied (direct)" in out
    assert listing(lab, "b300") == listing(lab, "ct200")
    # the copied venv runs the server package on the node
    lab.run("b300", f"{VENV}/bin/python -m sglang.launch_server --help >/dev/null")
    # no credential of the copy is left on either host
    assert "noderig-transient" not in lab.run("b300", "cat /root/.ssh/authorized_keys").stdout
    assert lab.run("ct200", "ls /root/.ssh").stdout.count("noderig-transient") == 0

    res, out = deploy(lab, ENV_STEPS)
    assert res.returncode == 0, out[-4000:]
    assert "venv copied" not in out
    assert re.search(r"Venv /opt/sglang/venv from ct200\s+1\s+-\s+-\s+1", out), out[-2500:]


def test_broken_files_on_the_node_are_restored_exactly(lab):
    deploy(lab, ENV_STEPS)  # converged start
    lab.run("b300", f"rm {PKG}/version.py && echo '# edited' >> {PKG}/srt/utils.py && touch {VENV}/stray.txt")
    res, out = deploy(lab, ENV_STEPS)
    assert res.returncode == 0, out[-4000:]
    assert "1 new (lib/python3.11/site-packages/sglang/version.py)" in out
    assert "1 changed (lib/python3.11/site-packages/sglang/srt/utils.py)" in out
    assert "1 extra (stray.txt)" in out
    assert transferred(out) == 2
    assert listing(lab, "b300") == listing(lab, "ct200")


def test_bytecode_written_by_running_the_server_on_the_node_is_not_drift(lab):
    deploy(lab, ENV_STEPS)
    # Python rewrites a stale or missing .pyc on whichever host imports the module.
    lab.run("b300", f"rm -rf {PKG}/srt/__pycache__ && {VENV}/bin/python -c 'import sglang.srt.utils'")
    assert lab.run("b300", f"ls {PKG}/srt/__pycache__").stdout.strip()
    res, out = deploy(lab, ENV_STEPS)
    assert res.returncode == 0 and "venv copied" not in out, out[-3000:]


def test_a_changed_reference_file_is_the_only_thing_that_moves(lab):
    deploy(lab, ENV_STEPS)
    lab.run("ct200", f"echo '# hotfix' >> {PKG}/srt/utils.py")
    res, out = deploy(lab, ENV_STEPS)
    assert res.returncode == 0, out[-4000:]
    assert transferred(out) == 1
    assert "# hotfix" in lab.run("b300", f"tail -1 {PKG}/srt/utils.py").stdout


def test_relay_through_the_controller_when_the_hosts_cannot_reach_each_other(lab):
    lab.reset("b300")
    b300_ip = lab.host("b300").ip
    lab.run("ct200", f"ip route add blackhole {b300_ip}/32")
    try:
        res, out = deploy(lab, ENV_STEPS)  # auto: direct is impossible, so it relays
        assert res.returncode == 0, out[-4000:]
        assert "cannot reach" in out and "venv copied (relay)" in out
        assert listing(lab, "b300") == listing(lab, "ct200")

        lab.run("b300", f"rm {PKG}/version.py")
        res, out = deploy(lab, ENV_STEPS, "venv_transfer=relay")  # explicit relay, incremental
        assert res.returncode == 0, out[-4000:]
        assert "venv copied (relay): 1 files" in out
    finally:
        lab.run("ct200", f"ip route del blackhole {b300_ip}/32", check=False)


@pytest.mark.parametrize("interpreter,expected", [
    ("missing", "lacks"),
    ("wrong", "is Python 3.12.4 here but the reference venv was built on 3.11"),
])
def test_a_missing_or_wrong_base_interpreter_is_refused_before_copying(lab, interpreter, expected):
    lab.reset("b300")
    if interpreter == "missing":
        lab.run("b300", "rm /usr/bin/python3")
    else:
        # (another interpreter, as far as the deploy asks: `python3 -V` prints "Python 3.12.4")
        lab.run("b300", "rm /usr/bin/python3 && printf '#!/bin/sh\\necho Python 3.12.4\\n' > /usr/bin/python3 "
                        "&& chmod +x /usr/bin/python3")
    try:
        res, out = deploy(lab, ENV_STEPS)
        assert res.returncode != 0
        assert "preflight on b300" in out and expected in out, out[-3000:]
        assert lab.run("b300", f"test -e {VENV}", check=False).returncode == 1, "nothing may be copied"
        assert lab.run("b300", "dpkg -s aria2", check=False).returncode != 0, "nothing may be installed"
    finally:
        lab.run("b300", "ln -sf python3.11 /usr/bin/python3", check=False)


def test_an_unreachable_reference_is_named_and_the_node_left_untouched(lab):
    lab.reset("b300")
    lab.exec("ct200", "systemctl stop ssh.service")
    try:
        res, out = deploy(lab, ENV_STEPS)
        assert res.returncode != 0
        assert "the reference host ct200 is unreachable" in out, out[-3000:]
        assert lab.run("b300", f"test -e {VENV}", check=False).returncode == 1
        assert lab.run("b300", "dpkg -s aria2", check=False).returncode != 0
    finally:
        lab.exec("ct200", "systemctl start ssh.service")
