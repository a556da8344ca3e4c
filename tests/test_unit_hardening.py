"""The server's unit runs it as its own user, outside the checkpoint, with the systemd hardening
SGLang tolerates; the launcher keeps the working directory off sys.path (pure: no lab)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noderig.node import script_path
from noderig.node.launch import safe_sys_path
from noderig.server_settings import ServerSettings, validate
from noderig.unit import render_unit

LAUNCHER = script_path("launch.py")
# Measured with `systemd-analyze security --offline=yes` (systemd 252) on the default unit;
# the lab test measures the live unit on b300 as well.
EXPOSURE_LIMIT = 2.0

HARDENING = {
    "User": "sglang", "Group": "sglang", "NoNewPrivileges": "yes", "CapabilityBoundingSet": "",
    "AmbientCapabilities": "", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
    "PrivateMounts": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes", "ProtectHostname": "yes",
    "RestrictNamespaces": "yes", "RestrictRealtime": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes",
    "SystemCallArchitectures": "native", "RemoveIPC": "yes", "UMask": "0077",
    "StateDirectory": "sglang", "WorkingDirectory": "/var/lib/sglang",
}
# Each of these would cut the server off from the GPUs or break its JIT compilers.
NEVER = ("PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "MemoryDenyWriteExecute", "ProcSubset",
         "PrivateUsers", "PrivateNetwork")


def settings_for(**kw) -> ServerSettings:
    base = dict(venv="/opt/sglang/venv", model_dir="/models/Kimi-K2.6", served_model_name="kimi-k2.6",
                draft_dir="/models/Kimi-K2.6-DFlash", attention_backend="flashinfer")
    return ServerSettings(**{**base, **kw})


def directives(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and line[0] not in "#;[" and "=" in line:
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def test_the_server_runs_as_its_own_user_in_its_state_directory_with_the_hardening():
    d = directives(render_unit(settings_for()))
    for key, value in HARDENING.items():
        assert d.get(key) == [value], f"{key}={d.get(key)}"
    assert not set(NEVER) & set(d), "GPU device nodes must stay reachable and JIT must work"
    env = dict(v.split("=", 1) for v in d["Environment"])
    assert env["HOME"] == "/var/lib/sglang" and env["PYTHONSAFEPATH"] == "1"
    for var in ("XDG_CACHE_HOME", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        assert env[var].startswith("/var/lib/sglang/"), var
    assert "@privileged" in d["SystemCallFilter"][0] and d["SystemCallErrorNumber"] == ["EPERM"]
    assert "@resources" not in d["SystemCallFilter"][0], "NCCL pins threads and memory"


def test_the_working_directory_is_never_the_checkpoint():
    for model_dir in ("/models/Kimi-K2.6", "/var/lib/models/k", "/srv/m"):
        d = directives(render_unit(settings_for(model_dir=model_dir)))
        assert d["WorkingDirectory"] == ["/var/lib/sglang"]
        assert not any(model_dir in value for key, values in d.items() if key != "ExecStart" for value in values)


def test_the_state_directory_follows_the_service_name_and_the_user_the_setting():
    d = directives(render_unit(settings_for(service_name="sglang-b", user="llm")))
    assert d["StateDirectory"] == ["sglang-b"] and d["WorkingDirectory"] == ["/var/lib/sglang-b"]
    assert d["User"] == ["llm"] and d["Group"] == ["llm"]


@pytest.mark.parametrize("path_key", ["venv", "model_dir", "draft_dir"])
def test_a_venv_or_checkpoint_under_home_keeps_home_readable(path_key):
    d = directives(render_unit(settings_for(**{path_key: "/home/ml/k"})))
    assert d["ProtectHome"] == ["read-only"]


def test_a_privileged_port_keeps_only_the_capability_to_bind_it():
    d = directives(render_unit(settings_for(port=443)))
    assert d["CapabilityBoundingSet"] == ["CAP_NET_BIND_SERVICE"] == d["AmbientCapabilities"]


@pytest.mark.parametrize("user, words", [
    ("root", "must not run as root"), ("Root", "must be a system user name"), ("sglang\nUser=root", "system user name"),
    ("-rf", "system user name"), ("a" * 40, "system user name"), (0, "system user name"),
])
def test_bad_service_users_are_refused_with_one_sentence(user, words):
    problems = [p for p in validate(settings_for(user=user)) if "service_user" in p]
    assert len(problems) == 1 and words in problems[0] and "\n" not in problems[0].split("=", 1)[0], problems


def test_the_default_inventory_names_a_service_user():
    defaults = {}
    exec((Path(__file__).parents[1] / "inventory/group_data/all.py").read_text(), defaults)
    assert defaults["service_user"] == "sglang" == ServerSettings.user


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_security_scores_the_unit_at_most_the_measured_exposure(tmp_path):
    unit = tmp_path / "sglang.service"
    unit.write_text(render_unit(settings_for()))
    out = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit)], capture_output=True,
                         text=True, cwd=tmp_path)
    if "--offline" in out.stderr and "unrecognized" in out.stderr:
        pytest.skip("this systemd-analyze has no --offline (systemd < 250)")
    score = re.search(r"Overall exposure level for \S+: ([\d.]+)", out.stdout)
    assert score, out.stdout[-2000:] + out.stderr
    print(f"systemd-analyze security (offline): {score.group(1)}")
    assert float(score.group(1)) <= EXPOSURE_LIMIT


# --- the launcher's import path --------------------------------------------------------------------


def test_safe_sys_path_drops_the_current_and_the_launchers_directory_only():
    here = "/usr/local/lib/noderig"
    path = [here, "", ".", "/opt/sglang/venv/lib/python3.11/site-packages", "/usr/lib/python311.zip"]
    assert safe_sys_path(path, here) == path[3:]


HOSTILE = ("import os, pathlib\n"
           "pathlib.Path(os.environ['MARKER']).write_text('{what} ran from ' + __file__)\n")


def plant(directory: Path, what: str) -> None:
    (directory / "sglang").mkdir(parents=True, exist_ok=True)
    (directory / "sglang" / "__init__.py").write_text("")
    (directory / "sglang" / "launch_server.py").write_text(HOSTILE.format(what=what))
    (directory / "sitecustomize.py").write_text(HOSTILE.format(what=what))


@pytest.mark.parametrize("safe_path_env", [False, True])
def test_the_launcher_runs_the_installed_server_not_one_in_its_working_or_own_directory(tmp_path, safe_path_env):
    # A checkpoint-like working directory and a launcher directory, both with a hostile
    # sglang/launch_server.py and sitecustomize.py; the installed "sglang" prints and exits.
    work, launcher_dir, site = tmp_path / "model", tmp_path / "lib", tmp_path / "site-packages"
    for d in (work, launcher_dir):
        plant(d, d.name)
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "launch_server.py").write_text("import sys\nprint('installed server', sys.argv[1:])\n")
    launcher = launcher_dir / "launch.py"
    shutil.copy(LAUNCHER, launcher)
    marker = tmp_path / "marker"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "NODERIG_"))}
    env.update(PYTHONPATH=str(site), MARKER=str(marker), **({"PYTHONSAFEPATH": "1"} if safe_path_env else {}))
    out = subprocess.run([sys.executable, str(launcher), "--model-path", str(work)], cwd=work, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "installed server ['--model-path'" in out.stdout
    assert not marker.exists(), marker.read_text()
