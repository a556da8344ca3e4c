"""Service step on the lab: the unit on b300 from the template, restarts only on change,
unknown flags refused before the unit is touched, secrets kept out of everything visible."""

from __future__ import annotations

import json
import os
import secrets
import urllib.error

import pytest

from tests.conftest import deploy

pytestmark = pytest.mark.lab

UNIT = "/etc/systemd/system/sglang.service"




def main_pid(lab) -> str:
    return lab.run("b300", "systemctl show -p MainPID --value sglang").stdout.strip()


@pytest.fixture(scope="module")
def serving(lab):
    lab.reset("b300")  # no repairs or crash-looping unit left by other modules
    res, out = deploy(lab)
    assert res.returncode == 0, out[-4000:]
    return lab


def test_a_changed_flag_restarts_the_server_once(serving):
    lab = serving
    before = main_pid(lab)
    res, out = deploy(lab, "mem_fraction_static=0.8")
    assert res.returncode == 0, out[-4000:]
    assert "--mem-fraction-static 0.8" in lab.run("b300", f"cat {UNIT}").stdout
    after = main_pid(lab)
    assert after != before, "the new flag needs a restart"
    res, out = deploy(lab, "mem_fraction_static=0.8")
    assert res.returncode == 0 and main_pid(lab) == after, f"the same flags again: no restart\n{out[-3000:]}"
    deploy(lab)  # back to the defaults


def test_a_flag_the_installed_server_does_not_know_is_refused_before_the_unit_is_touched(serving):
    lab = serving
    unit_before = lab.run("b300", f"sha256sum {UNIT}").stdout
    pid = main_pid(lab)
    res, out = deploy(lab, 'extra_flags=["--speculative-tree-budget", "32"]')
    assert res.returncode != 0
    assert "--speculative-tree-budget" in out and "not a flag of the SGLang installed" in out, out[-3000:]
    assert lab.run("b300", f"sha256sum {UNIT}").stdout == unit_before
    assert main_pid(lab) == pid, "the running server is left alone"


def test_the_api_key_and_the_hub_token_never_show(serving, tmp_path):
    lab = serving
    key = "nrk-" + secrets.token_hex(16)
    key_file = tmp_path / "api_key"
    key_file.write_text(key + "\n")
    os.chmod(key_file, 0o600)
    res, out = deploy(lab, f"api_key_file={key_file}")
    assert res.returncode == 0, out[-4000:]
    assert "smoke request answered" in out
    hf_token = lab.layout.hf_token_file.read_text().strip()
    try:
        for secret in (key, hf_token):
            assert secret not in out, "pyinfra output"
            assert secret not in lab.run("b300", f"cat {UNIT}").stdout, "unit text"
            assert secret not in lab.run("b300", "ps -eo args").stdout, "argv"
            assert secret not in lab.run("b300", "journalctl --no-pager -o cat").stdout, "journal"
        assert lab.run("b300", "stat -c %a /etc/noderig/sglang.env").stdout.strip() == "600"
        # the key is really in force
        code = lab.run("b300", "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models").stdout
        assert code == "401"
    finally:
        res, out = deploy(lab)  # without the key again
        assert res.returncode == 0, out[-3000:]
    assert json.loads(lab.run("b300", "curl -sf http://127.0.0.1:30000/v1/models").stdout)["data"]
