"""One builder per command: the node verifier's command line and apt's install, as the
checkpoint step, its background hashing and the repairs run them. Fast tier, no host: the
commands a fake host was asked to run are compared with the lines written out here."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from types import SimpleNamespace

from noderig.node import script_path
from noderig.repair import Repair
from operations import checkpoint, diagnosis
from operations.packages import install_commands

APT_LINE = "DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=600"


class RecordingHost:
    """Runs nothing: records each command line and answers success (or the given output)."""

    name = "b300"

    def __init__(self, answers: dict | None = None):
        self.commands, self.uploads, self.answers = [], [], answers or {}

    def run_shell_command(self, command, **_kwargs):
        line = command.get_raw_value()
        self.commands.append(line)
        ok, stdout = self.answers.get(line, (True, []))
        return ok, SimpleNamespace(stdout_lines=stdout, stderr="")

    def put_file(self, src, dest, **_kwargs):
        self.uploads.append(dest)
        return True

    def log_styled(self, *_args, **_kwargs):
        pass


def test_the_verifier_command_line_quotes_every_path():
    assert checkpoint.verifier_command("/m d/.noderig/manifest.json", "/m d", jobs=4).get_raw_value() == (
        "python3 /usr/local/lib/noderig/verify_files.py '/m d/.noderig/manifest.json' '/m d' --jobs 4")
    assert checkpoint.verifier_command("-", "/models/m", check_paths=True).get_raw_value() == (
        "python3 /usr/local/lib/noderig/verify_files.py - /models/m --check-paths")
    assert checkpoint.verifier_command("/m/x.json", "/m").get_raw_value() == (
        "python3 /usr/local/lib/noderig/verify_files.py /m/x.json /m")


def test_the_verifier_accepts_the_command_line_built_for_it(tmp_path):
    # The built line, run here with the shipped script in place of its node path: the
    # script's own argument parser is the oracle (a usage error exits 2).
    (tmp_path / "config.json").write_text("{}")
    for command in (checkpoint.verifier_command("-", str(tmp_path), check_paths=True),
                    checkpoint.verifier_command("-", str(tmp_path), jobs=2)):
        argv = shlex.split(command.get_raw_value())
        assert argv[:2] == ["python3", checkpoint.VERIFY_SCRIPT]
        res = subprocess.run([sys.executable, str(script_path("verify_files.py")), *argv[2:]], capture_output=True,
                             text=True)
        assert res.returncode == 0, res.stdout + res.stderr
        assert json.loads(res.stdout.splitlines()[-1])["ok"] is True


def test_apt_installs_after_refreshing_the_lists_keeping_changed_conffiles():
    assert [c.get_raw_value() for c in install_commands(["python3-dev", "x; y"])] == [
        f"{APT_LINE} update",
        f"{APT_LINE} install --no-install-recommends -o Dpkg::Options::=--force-confdef "
        "-o Dpkg::Options::=--force-confold python3-dev 'x; y'",
    ]


def test_a_package_repair_runs_the_packages_step_commands_lists_first():
    host = RecordingHost()
    plan = Repair("install_package:python3-dev", "install python3-dev", packages=["python3-dev"])
    diagnosis._apply_repair(host, "sglang.service", SimpleNamespace(port=30000), plan, {"repairs": []})
    assert host.commands[:2] == [
        f"{APT_LINE} update",
        f"{APT_LINE} install --no-install-recommends -o Dpkg::Options::=--force-confdef "
        "-o Dpkg::Options::=--force-confold python3-dev",
    ]


def test_a_package_repair_stops_at_a_failed_list_refresh():
    host = RecordingHost({f"{APT_LINE} update": (False, [])})
    plan = Repair("install_package:python3-dev", "install python3-dev", packages=["python3-dev"])
    diagnosis._apply_repair(host, "sglang.service", SimpleNamespace(port=30000), plan, {"repairs": []})
    assert not any(c.startswith(f"{APT_LINE} install") for c in host.commands)


def test_a_reverify_repair_runs_the_verifier_with_the_checkpoint_step_command_line():
    host = RecordingHost()
    plan = Repair("reverify_checkpoint", "re-verify the checkpoint", forget_verified=True)
    diagnosis._apply_repair(host, "sglang.service", SimpleNamespace(port=30000, model_dir="/models/K 2"), plan,
                            {"repairs": []})
    assert host.commands[:2] == [
        "test ! -L '/models/K 2/.noderig' && rm -f '/models/K 2/.noderig/verified.json'",
        "python3 /usr/local/lib/noderig/verify_files.py '/models/K 2/.noderig/manifest.json' '/models/K 2'",
    ]


DAEMON_CHECK = "systemctl is-active noderig-aria2.service >/dev/null && cat /etc/noderig/aria2.conf"


def test_a_running_daemon_is_reused_with_the_secret_of_its_conf_in_one_round_trip():
    host = RecordingHost({DAEMON_CHECK: (True, ["enable-rpc=true", "rpc-secret=s3cret", "rpc-listen-all=false"])})
    assert checkpoint._ensure_daemon(host) == "s3cret"
    assert host.commands == [DAEMON_CHECK] and host.uploads == []


def test_a_daemon_that_is_not_running_or_has_no_secret_is_started_with_a_new_one():
    for answer in [(False, []), (True, ["enable-rpc=true"]), (True, ["rpc-secret="])]:
        host = RecordingHost({DAEMON_CHECK: answer})
        secret = checkpoint._ensure_daemon(host)
        assert len(secret) == 48 and host.uploads == ["/etc/noderig/aria2.conf"]
        assert host.commands[0] == DAEMON_CHECK
        assert host.commands[-1].endswith("systemd-run --quiet --unit=noderig-aria2 --property=Type=exec "
                                          "--property=SuccessExitStatus=SIGKILL aria2c "
                                          "--conf-path=/etc/noderig/aria2.conf")


def test_a_daemon_with_downloads_left_gets_sigterm_and_an_idle_one_sigkill():
    # (SIGTERM: aria2 writes its control files for a resume, and takes a second to exit;
    # an idle daemon has nothing to write, and the next start would wait that second)
    host = RecordingHost({})
    checkpoint._stop_daemon(host)
    checkpoint._stop_daemon(host, idle=True)
    assert host.commands == [
        "systemctl stop --no-block noderig-aria2.service || true",
        "systemctl kill --signal=SIGKILL noderig-aria2.service 2>/dev/null ; systemctl stop noderig-aria2.service "
        "2>/dev/null ; systemctl reset-failed noderig-aria2.service 2>/dev/null ; true"]


def script_state(path: str, name: str, mode: str) -> str:
    digest = __import__("hashlib").sha256(script_path(name).read_bytes()).hexdigest()
    return f"{mode} {digest}  -  {path}"


def scripts_host(*lines: str) -> RecordingHost:
    host = RecordingHost()
    host.run_shell_command = lambda command, **kw: (
        host.commands.append(command.get_raw_value()),
        (True, SimpleNamespace(stdout_lines=list(lines) if "noderig-scripts" in command.get_raw_value() else [],
                               stderr="")))[1]
    return host


def test_node_scripts_that_are_current_are_read_in_one_round_trip_and_not_sent():
    host = scripts_host(script_state(checkpoint.HUBPATH_SCRIPT, "hubpath.py", "644"),
                        script_state(checkpoint.VERIFY_SCRIPT, "verify_files.py", "755"))
    assert checkpoint._node_scripts_current(None, host) is True
    assert len(host.commands) == 1 and host.uploads == []
    assert host.commands[0].endswith(f"noderig-scripts {checkpoint.HUBPATH_SCRIPT} {checkpoint.VERIFY_SCRIPT}")


def test_a_node_script_absent_changed_or_of_another_mode_is_replaced_atomically():
    for lines in [(), (script_state(checkpoint.HUBPATH_SCRIPT, "verify_files.py", "644"),),
                  (script_state(checkpoint.HUBPATH_SCRIPT, "hubpath.py", "666"),)]:
        host = scripts_host(*lines, script_state(checkpoint.VERIFY_SCRIPT, "verify_files.py", "755"))
        assert checkpoint._node_scripts_current(None, host) is True
        tmp = f"{checkpoint.HUBPATH_SCRIPT}.noderig-tmp"
        assert host.uploads == [tmp]
        assert host.commands[1:] == [f"install -d -m 755 /usr/local/lib/noderig && install -m 644 /dev/null {tmp}",
                                     f"chmod 644 {tmp} && mv -f {tmp} {checkpoint.HUBPATH_SCRIPT}"]


def test_node_script_states_are_read_as_the_node_shell_prints_them(tmp_path):
    (tmp_path / "a.py").write_text("x")
    (tmp_path / "a.py").chmod(0o640)
    out = subprocess.run(["sh", "-c", checkpoint.SCRIPT_STATES, "noderig-scripts", str(tmp_path / "a.py"),
                          str(tmp_path / "absent.py")], capture_output=True, text=True, check=True).stdout
    digest = __import__("hashlib").sha256(b"x").hexdigest()
    assert out.splitlines() == [f"640 {digest}  -  {tmp_path / 'a.py'}"]
