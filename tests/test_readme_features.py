"""Each README feature that had no test, tried as a user would (lab) or decided without a host
(fast tier): the Hub token's fallback, the OS preflight, one copy key per node, and on the lab
apt's lock, a failing import check, cuda_packages in the plan, checkpoint_patterns with
aria2_jobs, pinning to a commit, max_repairs, `noderig lab ssh` and every speculative mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noderig.errors import NoderigError
from noderig.preflight import problems
from noderig.secret_files import read_token
from tests.conftest import deploy, hub_call
from tests.fakehost import FakeHost

MODEL = "moonshotai/Kimi-K2.6"
MODEL_DIR = "/models/Kimi-K2.6"
CFG = {"home": "/usr/bin", "version": "3.11.2"}


# --------------------------------------------------------------------------------------------
# fast tier


def test_the_hub_token_comes_from_its_file_else_from_hf_token(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert read_token(None) == "hf_from_env"
    token_file = tmp_path / "token"
    token_file.write_text("hf_from_file\n")
    token_file.chmod(0o600)
    assert read_token(str(token_file)) == "hf_from_file", "the file wins over the environment"
    token_file.chmod(0o644)
    with pytest.raises(NoderigError, match="readable by others"):
        read_token(str(token_file))
    with pytest.raises(NoderigError, match="does not exist"):
        read_token(str(tmp_path / "missing"))
    monkeypatch.delenv("HF_TOKEN")
    assert read_token(None) is None


@pytest.mark.parametrize("os_name,ok", [("debian 12", True), ("ubuntu 24.04", True), ("rocky 9", False), (None, False)])
def test_preflight_refuses_an_os_it_does_not_support(os_name, ok):
    found = problems({"os": os_name, "gpus": []}, CFG, "3.11.2", gpus_required=0, reference_name="ct200",
                     venv="/opt/v")
    assert (found == []) == ok, found
    if not ok:
        assert found == [f"unsupported OS {os_name!r} (Debian or Ubuntu expected)"]


def test_each_node_of_a_fleet_gets_its_own_copy_key_name():
    from operations.environment import copy_key_prefix

    prefixes = {copy_key_prefix(FakeHost(name=n)) for n in ("b300", "b300-2", "b300-3")}
    assert len(prefixes) == 3
    assert not any(a != b and b.startswith(a) for a in prefixes for b in prefixes), \
        "one node's cleanup would remove another's key"


# --------------------------------------------------------------------------------------------
# lab tier


@pytest.mark.lab
def test_prerequisites_wait_for_another_apt_holding_the_lock(lab):
    lab.reset("b300")
    # apt locks with fcntl (flock(1) would not conflict with it): hold it the same way.
    hold = ("import fcntl, time; f = open('/var/lib/dpkg/lock-frontend', 'w'); "
            "fcntl.lockf(f, fcntl.LOCK_EX); time.sleep(8)")
    lab.run("b300", f"systemd-run --unit=apt-lock-holder python3 -c \"{hold}\"")
    assert lab.run("b300", "systemctl is-active apt-lock-holder").stdout.strip() == "active"
    res, out = deploy(lab, "steps=prerequisites")
    assert res.returncode == 0, out[-3000:]
    assert lab.run("b300", "dpkg -s aria2 >/dev/null && echo installed").stdout.strip() == "installed"
    assert lab.run("b300", "systemctl is-active apt-lock-holder", check=False).stdout.strip() != "active"


@pytest.mark.lab
def test_a_copied_venv_that_cannot_import_the_check_module_fails_the_host_naming_it(lab):
    lab.reset("b300")
    res, out = deploy(lab, "steps=prerequisites,environment", "venv_import_check=no_such_server_module")
    assert res.returncode != 0
    line = next(l for l in out.splitlines() if l.strip().startswith("b300 "))
    assert "FAILED" in line and "No module named 'no_such_server_module'" in out, out[-3000:]


@pytest.mark.lab
def test_cuda_packages_join_the_packages_the_plan_installs(lab):
    res, out = run_dry(lab, "steps=prerequisites", 'cuda_packages=["cuda-toolkit-12-8"]')
    assert "cuda-toolkit-12-8" in out and "packages: install" in out, out[-3000:]


def run_dry(lab, *data):
    from tests.conftest import run_pyinfra

    args = ["--dry", "deploy.py"]
    for d in data:
        args += ["--data", d]
    res = run_pyinfra(lab.inventory, *args)
    return res, res.stdout + res.stderr


@pytest.mark.lab
def test_patterns_jobs_and_a_pinned_commit_shape_the_download(lab):
    lab.reset("b300")
    hub_call(lab, "/_lab/reset", {})
    from huggingface_hub import HfApi

    commit = HfApi(endpoint=lab.layout.hub_url, token=False).model_info(MODEL).sha
    steps = ("steps=prerequisites,checkpoint", "speculative=none", f"model_revision={commit}",
             'checkpoint_patterns=["*.safetensors", "*.json"]', "aria2_jobs=1", "aria2_connections=1")
    res, out = deploy(lab, *steps)
    assert res.returncode == 0, out[-3000:]
    names = lab.run("b300", f"cd {MODEL_DIR} && find . -type f -not -path './.noderig/*' -printf '%P\\n'").stdout.split()
    assert names and all(n.endswith((".safetensors", ".json")) for n in names), names
    manifest = json.loads(lab.run("b300", f"cat {MODEL_DIR}/.noderig/manifest.json").stdout)
    assert manifest["commit"] == commit and manifest["patterns"] == ["*.safetensors", "*.json"]
    stats = hub_call(lab, "/_lab/stats")
    assert stats["connections"]["cdn"]["max_active"] == 1, "one file, one connection at a time"
    # Pinned to a commit that the node's manifest already holds: the rerun asks the Hub nothing.
    hub_call(lab, "/_lab/reset", {})
    res, out = deploy(lab, *steps)
    assert res.returncode == 0, out[-3000:]
    assert hub_call(lab, "/_lab/stats")["requests"]["total"] == 0


@pytest.mark.lab
def test_max_repairs_zero_diagnoses_but_applies_nothing(lab):
    lab.reset("b300")
    res, out = deploy(lab, "skip_server_warmup=false", "repair=true", "max_repairs=0")
    assert res.returncode != 0
    assert "diagnosis: flash_attn_cute_missing" in out and "repaired:" not in out, out[-3000:]
    assert "--skip-server-warmup" not in lab.run("b300", "cat /etc/systemd/system/sglang.service").stdout
    assert lab.run("b300", "test -e /etc/noderig/repairs.json", check=False).returncode != 0


@pytest.mark.lab
def test_noderig_lab_ssh_runs_a_command_on_a_lab_host(lab):
    env = {**os.environ, "NODERIG_LAB": lab.layout.name}
    res = subprocess.run([str(Path(sys.executable).with_name("noderig")), "lab", "ssh", "b300", "hostname"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 0 and res.stdout.strip() == "b300", res.stderr


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["dflash", "eagle3", "none"])
def test_every_speculative_mode_serves_on_the_lab(lab, mode):
    res, out = deploy(lab, f"speculative={mode}")
    assert res.returncode == 0, out[-4000:]
    assert "ready in" in out or "up and healthy" in out, out[-3000:]
    unit = lab.run("b300", "cat /etc/systemd/system/sglang.service").stdout
    expected = {"ddtree-dflash": "--speculative-dflash-enable-ddtree", "dflash": "DFLASH", "eagle3": "EAGLE3",
                "none": None}[mode]
    if expected:
        assert expected in unit
    else:
        assert "--speculative-algorithm" not in unit


@pytest.mark.lab
def test_a_mode_the_installed_sglang_lacks_is_refused_before_the_unit_is_touched(lab):
    # The lab's stand-in is the DDTree PR fork: the DFLASH fork's spelling is not among its flags.
    unit = lab.run("b300", "cat /etc/systemd/system/sglang.service", check=False).stdout
    res, out = deploy(lab, "speculative=ddtree-dflash")
    assert res.returncode != 0
    assert "--speculative-dflash-enable-ddtree is not a flag of the SGLang installed" in out, out[-3000:]
    assert lab.run("b300", "cat /etc/systemd/system/sglang.service", check=False).stdout == unit
