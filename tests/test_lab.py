"""The lab itself, end to end: real hosts, the Hub, the package source, the stand-in server.

These are the facts every later capability is tested on, so each is checked for real:
ssh + pyinfra reach both hosts, journald records a unit's output, host-to-host rsync,
the real huggingface_hub client and aria2c against the lab Hub, and the stand-in's two
failure modes reproduced on b300 and cured by the real fixes.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import hub_call, parallel_ranges_rate, run_pyinfra

pytestmark = pytest.mark.lab

MODEL = "moonshotai/Kimi-K2.6"
VENV = "/opt/sglang/venv"


def test_status_reports_every_host_running(lab):
    status = lab.status()
    assert status["up"], status
    # The test lab boots three targets (for the fleet test).
    assert {h["name"]: h["role"] for h in status["hosts"]} == \
        {"ct200": "reference", "b300": "target", "b300-2": "target", "b300-3": "target"}
    assert all(h["state"] == "running" for h in status["hosts"]), status


def test_hosts_have_their_own_identity(lab):
    ids = {}
    for name in ("ct200", "b300"):
        out = lab.run(name, "hostname; cat /etc/machine-id; ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub").stdout.split("\n")
        assert out[0] == name
        ids[name] = (out[1], out[2])
    assert ids["ct200"][0] != ids["b300"][0], "machine-ids must differ"
    assert ids["ct200"][1] != ids["b300"][1], "ssh host keys must differ"
    # PID 1 is systemd, with journald and sshd running
    assert lab.run("b300", "cat /proc/1/comm").stdout.strip() == "systemd"


def test_pyinfra_ssh_runs_a_command_on_both_hosts(lab):
    res = run_pyinfra(lab.inventory, "exec", "-y", "--", "echo from-$(hostname)")
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    assert "from-ct200" in out and "from-b300" in out, out
    # pyinfra was given the lab's own known_hosts: nothing written to the user's ~/.ssh
    user_known = Path.home() / ".ssh" / "known_hosts"
    text = user_known.read_text() if user_known.exists() else ""
    assert all(h.ip not in text for h in lab.hosts)


def test_unit_output_reaches_the_journal(lab):
    lab.run("b300", "systemctl reset-failed lab-echo 2>/dev/null; "
                    "systemd-run --unit=lab-echo --wait --quiet sh -c 'echo out-line; echo err-line >&2; exit 3'",
            check=False)
    journal = lab.run("b300", "journalctl -u lab-echo --no-pager -o cat").stdout
    assert "out-line" in journal and "err-line" in journal, journal
    assert "status=3" in journal, journal


def test_reference_can_rsync_to_target_over_ssh(lab):
    key = "/root/.ssh/lab-test-key"
    lab.run("ct200", f"rm -f {key}*; ssh-keygen -q -t ed25519 -N '' -f {key}")
    pub = lab.run("ct200", f"cat {key}.pub").stdout.strip()
    lab.run("b300", f"echo '{pub}' >> /root/.ssh/authorized_keys")
    try:
        lab.run("ct200", "mkdir -p /srv/payload && head -c 1048576 /dev/urandom > /srv/payload/blob && "
                         "ln -sf blob /srv/payload/link")
        lab.run("ct200", f"rsync -a -e 'ssh -i {key} -o StrictHostKeyChecking=accept-new "
                         "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR' /srv/payload/ root@b300:/srv/payload/")
        src = lab.run("ct200", "sha256sum /srv/payload/blob").stdout.split()[0]
        dst = lab.run("b300", "sha256sum /srv/payload/blob; readlink /srv/payload/link").stdout.split()
        assert dst[0] == src and dst[-1] == "blob"
    finally:
        lab.run("b300", "sed -i '/lab-test-key/d' /root/.ssh/authorized_keys; rm -rf /srv/payload", check=False)
        lab.run("ct200", f"rm -rf {key}* /srv/payload", check=False)


def test_huggingface_hub_client_lists_the_repo_with_sizes_and_sha256(lab):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=lab.layout.hub_url, token=False)
    info = api.model_info(MODEL, files_metadata=True)
    shards = [s for s in info.siblings if s.rfilename.endswith(".safetensors")]
    assert len(shards) >= 3 and len(info.sha) == 40
    index = json.loads(urllib.request.urlopen(
        f"{lab.layout.hub_url}/{MODEL}/resolve/{info.sha}/model.safetensors.index.json", timeout=10).read())
    assert {s.rfilename for s in shards} == set(index["weight_map"].values())
    for shard in shards:
        assert shard.size > 0 and len(shard.lfs.sha256) == 64 and shard.lfs.size == shard.size


def test_package_source_installs_and_aria2c_fetches_a_shard_with_ranges(lab):
    from huggingface_hub import HfApi

    # The lab hosts have no internet: aria2 comes from the lab's package source.
    lab.run("b300", "DEBIAN_FRONTEND=noninteractive apt-get update -q && "
                    "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends aria2 >/dev/null")
    info = HfApi(endpoint=lab.layout.hub_url, token=False).model_info(MODEL, files_metadata=True)
    shard = max((s for s in info.siblings if s.rfilename.endswith(".safetensors")), key=lambda s: s.size)
    hub_call(lab, "/_lab/reset", {})
    hub_call(lab, "/_lab/faults", {"rate_limit_bps": {"bps": parallel_ranges_rate(shard.size), "count": -1,
                                                      "scope": "cdn"}})
    url = f"{lab.layout.hub_url}/{MODEL}/resolve/{info.sha}/{shard.rfilename}"
    try:
        lab.run("b300", f"rm -rf /tmp/fetch && aria2c -q -x4 -s4 -k1M --file-allocation=none -d /tmp/fetch "
                        f"-o shard '{url}'")
    finally:
        hub_call(lab, "/_lab/faults", {"rate_limit_bps": None})
    got = lab.run("b300", "sha256sum /tmp/fetch/shard").stdout.split()[0]
    assert got == shard.lfs.sha256
    stats = hub_call(lab, "/_lab/stats")
    assert stats["status"]["by_kind"]["resolve"]["302"] >= 1, stats
    ranges = stats["files"][f"{MODEL}/{shard.rfilename}"]["range_requests"]
    assert ranges >= 2, f"aria2c should split the shard over several Range connections: {stats}"
    lab.run("b300", "apt-get purge -y -q aria2 >/dev/null; rm -rf /tmp/fetch", check=False)


def _copy_venv_and_model(lab, model_dir: str) -> None:
    """The venv (ct200 -> b300 over ssh) and the tiny checkpoint (controller -> b300),
    by hand: the deploy's own steps are tested elsewhere."""
    key = "/root/.ssh/lab-test-venv"
    lab.run("ct200", f"rm -f {key}*; ssh-keygen -q -t ed25519 -N '' -f {key}")
    lab.run("b300", f"echo '{lab.run('ct200', f'cat {key}.pub').stdout.strip()}' >> /root/.ssh/authorized_keys")
    lab.run("ct200", f"rsync -a --mkpath -e 'ssh -i {key} -o StrictHostKeyChecking=accept-new "
                     f"-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR' {VENV}/ root@b300:{VENV}/")
    lab.run("b300", "sed -i '/lab-test-venv/d' /root/.ssh/authorized_keys")
    repo = lab.repo_path(MODEL)
    target = lab.layout.host_root("b300") / model_dir.lstrip("/")
    import shutil

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(repo, target)


def _start_standin(lab, unit: str, *flags: str) -> None:
    """The stand-in as a transient unit. A systemd-run that meets the last run's unit not yet unloaded is refused,
    and the refusal read as the server failing (a suspect for a once-seen failure of the test below): it is tried
    again until the unit starts, and a refusal that lasts says so."""
    lab.run("b300", f"systemctl stop {unit} 2>/dev/null; systemctl reset-failed {unit} 2>/dev/null", check=False)
    for _ in range(60):  # a count of tries, not a clock: a loaded machine only makes each try slower
        res = lab.run("b300", f"systemd-run --unit={unit} --property=Type=exec {VENV}/bin/python -m "
                              f"sglang.launch_server --model-path /models/tiny --served-model-name tiny --port 30000 "
                              f"--tp-size 2 {' '.join(flags)}", check=False)
        if res.returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"systemd-run did not start {unit}: {res.stdout}{res.stderr}")


def _wait_unit(lab, unit: str, timeout: float = 60) -> str:
    """'ready' when /health answers 200, 'failed' when the unit died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = lab.run("b300", f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:30000/health; "
                              f"echo; systemctl is-active {unit}", check=False).stdout.split()
        if out and out[0] == "200":
            return "ready"
        if out and out[-1] in ("failed", "inactive"):
            return "failed"
        time.sleep(0.3)
    return "timeout"


def test_standin_failure_modes_reproduce_on_b300_and_the_real_fixes_cure_them(lab):
    lab.reset("b300")  # bare: no python3-dev, no server from an earlier test
    _copy_venv_and_model(lab, "/models/tiny")
    unit = "standin-check"
    journal = f"journalctl -u {unit} --no-pager -o cat"
    try:
        # 1. No python3-dev on the bare node: the JIT's real gcc fails on Python.h.
        assert lab.run("b300", "test -e /usr/include/python3.11/Python.h", check=False).returncode == 1
        _start_standin(lab, unit, "--skip-server-warmup")
        assert _wait_unit(lab, unit) == "failed"
        log = lab.run("b300", journal).stdout
        assert "Python.h: No such file or directory" in log, log[-3000:]

        # 2. python3-dev from the lab package source fixes the JIT; the vision warmup then
        #    dies in flash_attn.cute, through the real call chain.
        lab.run("b300", "DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive "
                        "apt-get install -y -q --no-install-recommends python3-dev >/dev/null")
        _start_standin(lab, unit)
        assert _wait_unit(lab, unit) == "failed"
        log = lab.run("b300", journal + " _SYSTEMD_INVOCATION_ID=$(systemctl show -p InvocationID --value " + unit + ")").stdout
        assert "Python.h" not in log
        for needle in ("_get_chunked_embedding_by_item", "get_image_feature",
                       "Vendored FlashAttention CUTE is not available"):
            assert needle in log, (needle, log[-3000:])
        assert "fired up and ready to roll" not in log

        # 3. --skip-server-warmup: ready, and the endpoints answer.
        _start_standin(lab, unit, "--skip-server-warmup")
        assert _wait_unit(lab, unit) == "ready"
        models = json.loads(lab.run("b300", "curl -sf http://127.0.0.1:30000/v1/models").stdout)
        assert [m["id"] for m in models["data"]] == ["tiny"]
        gen = json.loads(lab.run("b300", "curl -sf -d '{\"text\": \"hi\", \"sampling_params\": "
                                         "{\"max_new_tokens\": 1}}' http://127.0.0.1:30000/generate").stdout)
        assert "text" in gen
        assert "The server is fired up and ready to roll!" in lab.run("b300", journal).stdout
    finally:
        lab.run("b300", f"systemctl stop {unit}; systemctl reset-failed {unit}; rm -rf /models/tiny {VENV}",
                check=False)


def test_resetting_a_host_drops_its_changes(lab):
    lab.run("b300", "echo scratch > /root/marker")
    print(f"reset took {lab.reset('b300'):.1f} s")
    assert lab.run("b300", "test -e /root/marker", check=False).returncode == 1
    assert lab.run("b300", "systemctl is-system-running").stdout.strip() == "running"
