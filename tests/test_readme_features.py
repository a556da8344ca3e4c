"""Each README feature that had no test, tried as a user would (lab) or decided without a host
(fast tier): the Hub token's fallback, the OS preflight, one copy key per node, and on the lab
apt's lock, a failing import check, cuda_packages in the plan, checkpoint_patterns with
aria2_jobs, pinning to a commit, max_repairs, the set / lower / re-verify remedies applied at
run time, ready_timeout with a server that stalls, `noderig lab ssh` and every speculative mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from noderig.errors import NoderigError
from noderig.preflight import problems
from noderig.secret_files import read_token
from tests.conftest import changed_ops, deploy, hub_call
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
    token_file.write_text("\n")
    token_file.chmod(0o600)
    with pytest.raises(NoderigError, match="is empty"):  # a file named is never "no token"
        read_token(str(token_file))
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
    # apt locks with fcntl (flock(1) would not conflict with it): hold it the same way, until the
    # deploy's apt-get install is running (so waiting on it), however long the deploy takes to
    # get there; then note that it waited, and let go.
    hold = ("import fcntl, glob, time\n"
            "f = open('/var/lib/dpkg/lock-frontend', 'w'); fcntl.lockf(f, fcntl.LOCK_EX)\n"
            "def apt_running():\n"
            "    for path in glob.glob('/proc/[0-9]*/cmdline'):\n"
            "        try:\n            argv = open(path, 'rb').read().split(b'\\0')\n"
            "        except OSError:\n            continue\n"
            "        if any(a.endswith(b'apt-get') for a in argv) and b'install' in argv:\n            return True\n"
            "while not apt_running():\n    time.sleep(0.2)\n"
            "open('/run/apt-waited', 'w').write('yes')\n"
            "time.sleep(1)\n")
    lab.run("b300", "cat > /run/hold-apt-lock.py", input=hold)
    lab.run("b300", "systemd-run --unit=apt-lock-holder python3 /run/hold-apt-lock.py")
    try:
        assert lab.run("b300", "systemctl is-active apt-lock-holder").stdout.strip() == "active"
        res, out = deploy(lab, "steps=prerequisites")
        assert res.returncode == 0, out[-3000:]
        assert lab.run("b300", "dpkg -s aria2 >/dev/null && echo installed").stdout.strip() == "installed"
        assert lab.run("b300", "cat /run/apt-waited", check=False).stdout == "yes", "apt never met the held lock"
    finally:
        lab.run("b300", "systemctl stop apt-lock-holder", check=False)


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


def health(lab) -> str:
    return lab.run("b300", "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health", check=False).stdout


def recorded_repairs(lab) -> list[dict]:
    return json.loads(lab.run("b300", "cat /etc/noderig/repairs.json").stdout)["repairs"]


@pytest.mark.lab
def test_a_set_remedy_is_applied_at_run_time_and_kept_by_the_rerun(lab):
    # FlashInfer's JIT on a node whose CUDA toolkit predates the GPU (the stand-in plays CUDA
    # 12.8 against a B300's sm_103a): the catalog's fix is another attention backend.
    lab.reset("b300")
    old_toolkit = 'server_environment={"SGLANG_STANDIN_NVCC_VERSION": "12.8"}'
    res, out = deploy(lab, old_toolkit, "repair=true", "max_repairs=1")
    assert res.returncode == 0, out[-4000:]
    assert "diagnosis: unsupported_gpu_arch" in out and "Unsupported gpu architecture 'compute_103a'" in out
    assert "repaired: set attention_backend to triton; relaunching sglang.service" in out and "ready in" in out
    assert "--attention-backend triton" in lab.run("b300", "cat /etc/systemd/system/sglang.service").stdout
    assert [(r["remedy"], r["settings"]) for r in recorded_repairs(lab)] == [
        ("set:attention_backend=triton", {"attention_backend": "triton"})]
    assert health(lab) == "200"
    # The same inventory again: the recorded repair keeps the unit as it is (nothing changes).
    res, out = deploy(lab, old_toolkit, "repair=true", "max_repairs=1")
    assert res.returncode == 0 and changed_ops(out) == {}, out[-3000:]


@pytest.mark.lab
def test_a_lower_remedy_is_applied_at_run_time(lab):
    # A static fraction that leaves the CUDA-graph capture too little: torch's OOM, and the fix
    # lowers the fraction by 0.08 (any earlier host state serves: this deploy converges it).
    res, out = deploy(lab, "mem_fraction_static=0.97", "repair=true", "max_repairs=1")
    assert res.returncode == 0, out[-4000:]
    assert "diagnosis: cuda_oom" in out and "Capture cuda graph failed: CUDA out of memory" in out
    assert "repaired: lower mem_fraction_static from 0.97 to 0.89; relaunching sglang.service" in out
    assert "--mem-fraction-static 0.89" in lab.run("b300", "cat /etc/systemd/system/sglang.service").stdout
    assert ("lower:mem_fraction_static", {"mem_fraction_static": 0.89}) in [
        (r["remedy"], r["settings"]) for r in recorded_repairs(lab)]
    assert health(lab) == "200"


# Damages a safetensors header in place and puts size and mtime back: the verified record
# still matches, so only the server's load can notice (bit rot, or an edit behind noderig's back).
DAMAGE_KEEPING_MTIME = (
    "import os, sys\n"
    "p = sys.argv[1]; st = os.stat(p)\n"
    "with open(p, 'r+b') as f:\n    f.seek(8); f.write(b'X')\n"
    "os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))\n"
)


@pytest.mark.lab
def test_a_re_verify_remedy_names_the_damaged_shard_and_the_rerun_fetches_it_and_serves(lab):
    res, out = deploy(lab, "repair=true")  # converged (a no-op when an earlier test left it so)
    assert res.returncode == 0, out[-4000:]
    shard = lab.run("b300", f"ls {MODEL_DIR}/*.safetensors | head -n 1").stdout.strip()
    name = shard.rsplit("/", 1)[1]
    hub_digest = next(f["sha256"] for f in json.loads(lab.run("b300", f"cat {MODEL_DIR}/.noderig/manifest.json").stdout)
                      ["files"] if f["path"] == name)
    lab.run("b300", f"python3 -c \"{DAMAGE_KEEPING_MTIME}\" {shard} && systemctl stop sglang")
    res, out = deploy(lab, "repair=true")
    assert res.returncode != 0, out[-4000:]
    assert "diagnosis: checkpoint_corrupt" in out and "Error while deserializing header" in out
    assert f"re-verification found damaged files: {name} (header_invalid); rerun the deploy to fetch them again" \
        in out, out[-4000:]
    assert "this needs a human" not in out, "no relaunch onto the damaged shard, no second verdict"
    # The rerun the sentence asks for: the shard is fetched again (its record was dropped), the
    # server restarted onto it, and it serves.
    res, out = deploy(lab, "repair=true")
    assert res.returncode == 0, out[-4000:]
    assert "ready in" in out
    assert lab.run("b300", f"sha256sum {shard}").stdout.split()[0] == hub_digest
    assert health(lab) == "200"


@pytest.mark.lab
def test_a_server_that_never_becomes_ready_fails_the_host_after_ready_timeout(lab):
    # The stand-in stalls for good at its first step (its delays scaled 100,000-fold): only
    # ready_timeout ends the wait. The node's clock enforces it (see the readiness fixtures);
    # here: the host fails with the sentence, and the server is left to run, not killed.
    stalled = 'server_environment={"SGLANG_STANDIN_TIME_SCALE": "100000"}'
    try:
        res, out = deploy(lab, "ready_timeout=3", stalled)
        assert res.returncode != 0, out[-3000:]
        found = re.search(r"sglang\.service is still starting after ([\d.]+) s \(([^)]*)\): not a crash, nothing in "
                          r"its log failed; wait, or raise ready_timeout", out)
        assert found, out[-4000:]
        assert float(found.group(1)) >= 2.0, "the node waits ready_timeout (3 s, counted in whole seconds)"
        assert found.group(2).endswith("not yet ready")
        summary = next(line for line in out.splitlines() if line.strip().startswith("b300 "))
        assert "FAILED" in summary and "ready" in summary, summary
        assert lab.run("b300", "systemctl is-active sglang", check=False).stdout.strip() in ("active", "activating")
    finally:
        lab.run("b300", "systemctl stop sglang", check=False)


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
