"""Facts, without a host: each fact's command run by the local shell against files made here
(read-only commands), and its output turned into the fact's value. Absent is not unreadable:
a file that is not there is None; one that is there but cannot be read fails the command;
one that cannot be parsed raises, naming the file."""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from pathlib import Path

import pytest
from pyinfra.api.exceptions import FactProcessError

from operations import facts


def gather(fact_cls, **kwargs):
    """(exit status, value) of a fact on this machine, as pyinfra would compute it."""
    fact = fact_cls()
    command = fact.command(**kwargs)
    res = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True)
    lines = res.stdout.splitlines()
    value = fact.process(lines) if res.returncode == 0 and lines else (fact.default() if hasattr(fact, "default") else None)
    return res.returncode, value


def test_a_json_file_that_is_absent_is_none(tmp_path):
    assert gather(facts.JsonFile, path=str(tmp_path / "nope.json")) == (0, None)


def test_a_json_file_is_read(tmp_path):
    (tmp_path / "r.json").write_text('{"a": [1, 2]}')
    assert gather(facts.JsonFile, path=str(tmp_path / "r.json")) == (0, {"a": [1, 2]})


@pytest.mark.parametrize("content", ['{"a": tr', ""], ids=["truncated", "empty"])
def test_a_json_file_that_cannot_be_parsed_raises_with_its_name(tmp_path, content):
    path = tmp_path / "repairs.json"
    path.write_text(content)
    with pytest.raises(FactProcessError, match=f"{path} exists but is not valid JSON"):
        gather(facts.JsonFile, path=str(path))


def test_a_json_path_that_cannot_be_read_fails_the_command(tmp_path):
    (tmp_path / "verified.json").mkdir()
    status, _ = gather(facts.JsonFile, path=str(tmp_path / "verified.json"))
    assert status != 0


def test_file_stats_list_sizes_mtimes_and_live_control_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.safetensors").write_bytes(b"x" * 5)
    (tmp_path / "sub" / "a.safetensors.aria2").write_bytes(b"c")
    (tmp_path / "b.json").write_bytes(b"{}")
    status, stats = gather(facts.FileStats, root=str(tmp_path))
    assert status == 0
    assert stats["sub/a.safetensors"]["size"] == 5 and stats["sub/a.safetensors"]["aria2"] is True
    assert stats["b.json"]["aria2"] is False and set(stats) == {"sub/a.safetensors", "sub/a.safetensors.aria2", "b.json"}
    assert gather(facts.FileStats, root=str(tmp_path / "absent")) == (0, {})


def test_file_stats_of_a_root_that_is_a_file_fail_instead_of_reading_empty(tmp_path):
    (tmp_path / "m").write_text("not a directory")
    status, _ = gather(facts.FileStats, root=str(tmp_path / "m"))
    assert status != 0


def test_tree_listing_leaves_out_bytecode_and_directory_sizes(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to("python3.11")
    (tmp_path / "lib" / "__pycache__").mkdir(parents=True)
    (tmp_path / "lib" / "__pycache__" / "x.pyc").write_bytes(b"0")
    _, listing = gather(facts.TreeListing, root=str(tmp_path))
    assert listing["bin/python"][0] == "l" and listing["bin/python"][4] == "python3.11"
    assert listing["lib"] == ("d", 0, 0, listing["lib"][3], "")
    assert not any("__pycache__" in p for p in listing)


def test_mtimes_skip_absent_paths_and_name_present_ones(tmp_path):
    (tmp_path / "unit").write_text("x")
    _, mtimes = gather(facts.Mtimes, paths=(str(tmp_path / "unit"), str(tmp_path / "gone")))
    assert list(mtimes) == [str(tmp_path / "unit")]


def test_file_states_name_the_digest_and_mode_of_present_files_only(tmp_path):
    (tmp_path / "a unit").write_text("hello\n")
    (tmp_path / "a unit").chmod(0o640)
    (tmp_path / "env").write_text("")
    (tmp_path / "env").chmod(0o600)
    paths = (str(tmp_path / "a unit"), str(tmp_path / "gone"), str(tmp_path / "env"))
    assert gather(facts.FileStates, paths=paths) == (0, {
        str(tmp_path / "a unit"): ("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", "640"),
        str(tmp_path / "env"): ("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "600")})


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_file_states_of_a_file_that_cannot_be_read_fail_instead_of_leaving_it_out(tmp_path):
    (tmp_path / "env").write_text("secret")
    (tmp_path / "env").chmod(0)
    status, _ = gather(facts.FileStates, paths=(str(tmp_path / "env"),))
    assert status != 0


def test_file_states_of_a_directory_in_a_files_place_fail_instead_of_leaving_it_out(tmp_path):
    (tmp_path / "sglang.service").mkdir()
    status, _ = gather(facts.FileStates, paths=(str(tmp_path / "sglang.service"),))
    assert status != 0


def test_link_target_is_where_a_link_finally_points_and_none_for_anything_else(tmp_path):
    (tmp_path / "gen 1").mkdir()
    (tmp_path / "hop").symlink_to(tmp_path / "gen 1")
    (tmp_path / "venv").symlink_to(tmp_path / "hop")
    (tmp_path / "file").write_text("x")
    assert gather(facts.LinkTarget, path=str(tmp_path / "venv")) == (0, str(tmp_path / "gen 1"))
    assert gather(facts.LinkTarget, path=str(tmp_path / "gen 1")) == (0, None)
    assert gather(facts.LinkTarget, path=str(tmp_path / "file")) == (0, None)
    assert gather(facts.LinkTarget, path=str(tmp_path / "absent")) == (0, None)


def test_file_text_mode_and_sha256_of_absent_and_present_files(tmp_path):
    path = tmp_path / "f"
    assert gather(facts.FileText, path=str(path)) == (0, None)
    assert gather(facts.FileMode, path=str(path)) == (0, None)
    assert gather(facts.Sha256, path=str(path)) == (0, None)
    path.write_text("hello\n")
    path.chmod(0o640)
    assert gather(facts.FileText, path=str(path)) == (0, "hello\n")
    assert gather(facts.FileMode, path=str(path)) == (0, "640")
    assert gather(facts.Sha256, path=str(path))[1] == "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"


def test_a_hostile_path_reaches_the_shell_as_one_argument(tmp_path):
    marker = tmp_path / "ran"
    path = f"{tmp_path}/x'; touch {marker}; echo '"
    assert gather(facts.JsonFile, path=path) == (0, None)
    assert not marker.exists()


def test_unit_status_parses_systemctl_show():
    out = ["ActiveState=active", "SubState=running", "UnitFileState=enabled", "InvocationID=ab12",
           "FragmentPath=/etc/systemd/system/sglang.service", "NRestarts=2", "NeedDaemonReload=no",
           "ExecMainStartTimestamp=Wed 2026-12-02 16:11:56.745487 UTC"]
    status = facts.UnitStatus().process(out)
    assert status["active"] == "active" and status["restarts"] == 2 and status["need_reload"] is False
    assert status["started"] == pytest.approx(1796227916.745487)


# --------------------------------------------------------------------------------------------
# The facts whose commands are scripts, run on this machine (stand-ins on PATH for the tools a
# node has and this machine may not: nvidia-smi, systemctl). Their output parsing is in
# tests/fixtures/facts/ (test_fact_fixtures.py).


def stub(bin_dir, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def gather_with_path(bin_dir, fact_cls, **kwargs):
    """``gather`` with ``bin_dir`` first on PATH."""
    import os

    fact = fact_cls()
    command = fact.command(**kwargs)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    res = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True, env=env)
    value = fact.default()
    if res.returncode == 0 and res.stdout:
        value = fact.process(res.stdout.splitlines())
    return res.returncode, value


def os_release() -> str:
    fields = dict(line.split("=", 1) for line in open("/etc/os-release").read().splitlines() if "=" in line)
    return f"{fields['ID'].strip(chr(34))} {fields.get('VERSION_ID', '').strip(chr(34))}".strip()


def test_node_info_measures_the_nearest_existing_parent_and_reads_nvidia_smi(tmp_path):
    import os
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Answers only the exact query the fact must make.
    stub(bin_dir, "nvidia-smi", '[ "$*" = "--query-gpu=name,compute_cap,driver_version --format=csv,noheader" ] '
                                '|| exit 9\necho "NVIDIA B300 SXM6 AC, 10.3, 580.82.07"\n'
                                'echo "NVIDIA B300 SXM6 AC, 10.3, 580.82.07"\n')
    volume = tmp_path / "vol"
    volume.mkdir()
    status, info = gather_with_path(bin_dir, facts.NodeInfo, path=str(volume / "models" / "Kimi-K2.6"))
    assert status == 0
    assert info["os"] == os_release()
    python3 = shutil.which("python3", path=os.environ["PATH"])
    version = subprocess.run([python3, "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert info["python"] == version
    assert info["device"] == str(os.stat(volume).st_dev)
    assert isinstance(info["free_bytes"], int) and info["free_bytes"] > 0
    assert info["gpus"] == [{"name": "NVIDIA B300 SXM6 AC", "compute_cap": "10.3", "driver": "580.82.07"}] * 2


@pytest.mark.parametrize("says, status", [
    ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95", 18),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.", 9),
    ("No devices were found", 6)])
def test_node_info_reads_a_failing_nvidia_smi_as_an_error_not_as_gpus(tmp_path, says, status):
    # nvidia-smi prints its failures on stdout: read as GPU lines they were a GPU named "Failed to initialize NVML"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub(bin_dir, "nvidia-smi", f"printf '%s\\n' {shlex.quote(says)}\nexit {status}\n")
    code, info = gather_with_path(bin_dir, facts.NodeInfo, path=str(tmp_path))
    assert code == 0 and info["gpus"] == []
    assert info["gpu_error"] == f"nvidia-smi exited with status {status}: " + " / ".join(says.splitlines())


@pytest.mark.parametrize("says, fact", [
    ("Error: No such file or directory\nlist table inet noderig\n                 ^^^^^^^",
     {"nft": True, "table": None, "error": None}),
    ("Error: Operation not permitted\nlist table inet noderig",
     {"nft": True, "table": None, "error": "Error: Operation not permitted / list table inet noderig"})])
def test_nft_table_is_absent_only_when_nft_says_so(tmp_path, says, fact):
    # nft's own words for a missing table (exit 1); any other failure is an error, never "absent"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub(bin_dir, "nft", f"printf '%s\\n' {shlex.quote(says)} >&2\nexit 1\n")
    assert gather_with_path(bin_dir, facts.NftTable, table="inet noderig") == (0, fact)


def test_node_info_without_nvidia_smi_lists_no_gpu(tmp_path):
    # PATH without nvidia-smi: only the system directories
    import os

    fact = facts.NodeInfo()
    res = subprocess.run(["sh", "-c", fact.command(path=str(tmp_path)).get_raw_value()], capture_output=True,
                         text=True, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0
    assert fact.process(res.stdout.splitlines())["gpus"] == []


def test_node_info_says_whether_a_peer_server_left_its_run_directory(tmp_path, monkeypatch):
    # a killed fan-out leaves /run/noderig-peers (and its nginx): the deploy learns it from this read
    from noderig import peer_server

    monkeypatch.setattr(peer_server, "RUN_DIR", str(tmp_path / "run dir"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    assert gather_with_path(bin_dir, facts.NodeInfo, path=str(tmp_path))[1]["peer_server"] is False
    (tmp_path / "run dir").mkdir()
    assert gather_with_path(bin_dir, facts.NodeInfo, path=str(tmp_path))[1]["peer_server"] is True


def test_python_version_of_an_interpreter_and_of_one_that_does_not_exist(tmp_path):
    import platform
    import sys

    assert gather(facts.PythonVersion, executable=sys.executable) == (0, platform.python_version())
    assert gather(facts.PythonVersion, executable=str(tmp_path / "python3.99")) == (0, None)


@pytest.mark.parametrize("line, version", [("Python 3.11.2", "3.11.2"), ("Python 3.13.0rc1", "3.13.0rc1"),
                                           ("Python 3.12.1+", "3.12.1+"), ("", None), ("python3: not found", None),
                                           ("Python", None)])
def test_the_python_version_is_read_from_the_interpreters_version_line(line, version):
    # (`python3 -V` prints what platform.python_version() returns, pre-releases included)
    assert facts.python_version(line) == version


def test_pyvenv_cfg_is_read_from_the_venv(tmp_path):
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    assert gather(facts.PyvenvCfg, venv=str(tmp_path)) == (0, {"home": "/usr/bin", "version": "3.11.2"})
    assert gather(facts.PyvenvCfg, venv=str(tmp_path / "absent")) == (0, None)


def test_distributions_digest_hashes_every_record_in_path_order(tmp_path):
    import hashlib

    venv = tmp_path / "v"
    for dist, record in (("b-1.0.dist-info", "b.py,sha256=x,1\n"), ("a-2.0.dist-info", "a.py,sha256=y,2\n")):
        (venv / "lib" / dist).mkdir(parents=True)
        (venv / "lib" / dist / "RECORD").write_text(record)
    (venv / "lib" / "a-2.0.dist-info" / "METADATA").write_text("not hashed")
    # sha256sum's own format: "<digest>  <path>\n" per RECORD, sorted by path, hashed again
    lines = "".join(f"{hashlib.sha256(r.encode()).hexdigest()}  ./lib/{d}/RECORD\n"
                    for d, r in (("a-2.0.dist-info", "a.py,sha256=y,2\n"), ("b-1.0.dist-info", "b.py,sha256=x,1\n")))
    assert gather(facts.DistributionsDigest, venv=str(venv)) == (0, hashlib.sha256(lines.encode()).hexdigest())
    (tmp_path / "empty").mkdir()
    assert gather(facts.DistributionsDigest, venv=str(tmp_path / "empty")) == (0, None)
    assert gather(facts.DistributionsDigest, venv=str(tmp_path / "absent")) == (0, None)


def test_fs_type_of_a_path_not_yet_made_is_its_parents(tmp_path):
    expected = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True).stdout.strip()
    assert expected
    assert gather(facts.FsType, path=str(tmp_path / "not" / "yet")) == (0, expected)


def test_server_version_is_read_from_metadata_without_importing_the_server(tmp_path):
    import sys

    site = tmp_path / "site"
    dist = site / "sglang-0.5.9.post2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9.post2\n")
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text("raise SystemExit('imported the server')\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    stub(venv / "bin", "python", f'PYTHONPATH={site} exec {sys.executable} "$@"\n')
    assert gather(facts.ServerVersion, venv=str(venv)) == (0, "0.5.9.post2")
    assert gather(facts.ServerVersion, venv=str(tmp_path / "novenv")) == (0, None)


def test_system_user_reads_the_passwd_entry():
    import pwd

    root = pwd.getpwuid(0)
    assert gather(facts.SystemUser, user=root.pw_name) == (0, {"name": root.pw_name, "uid": 0, "gid": root.pw_gid,
                                                              "home": root.pw_dir, "shell": root.pw_shell})
    assert gather(facts.SystemUser, user="noderig-no-such-user") == (0, None)


def test_unreadable_names_closed_files_directories_and_parents_only(tmp_path):
    top = tmp_path / "top"
    (top / "models" / "m" / "sub").mkdir(parents=True)
    (top / "models" / "m" / "ok.json").write_text("{}")
    (top / "models" / "m" / "secret.bin").write_text("x")
    (top / "models" / "m" / "secret.bin").chmod(0o600)
    (top / "models" / "m" / "sub").chmod(0o700)
    top.chmod(0o751)  # o+x: can be passed through
    (top / "models").chmod(0o750)  # no o+x: nothing below can be reached
    try:
        status, found = gather(facts.Unreadable, paths=(str(top / "models" / "m"), str(tmp_path / "absent")))
    finally:
        (top / "models").chmod(0o755)
        (top / "models" / "m" / "sub").chmod(0o755)
    assert status == 0
    below = [p for p in found if p.startswith(f"{tmp_path}/")]
    assert sorted(below) == sorted([str(top / "models"), str(top / "models" / "m" / "secret.bin"),
                                    str(top / "models" / "m" / "sub")])
    # above the test's directory (pytest makes its own 0700): exactly the ancestors without o+x
    closed = [str(d) for d in [tmp_path, *tmp_path.parents] if d != Path("/") and not d.stat().st_mode & 0o001]
    assert sorted(p for p in found if p not in below) == sorted(closed)


def test_http_status_of_a_server_and_of_a_closed_port():
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert gather(facts.HttpStatus, url=f"http://127.0.0.1:{port}/health") == (0, 200)
        assert gather(facts.HttpStatus, url=f"http://127.0.0.1:{port}/other") == (0, 503)
    finally:
        server.shutdown()
        server.server_close()
    assert gather(facts.HttpStatus, url=f"http://127.0.0.1:{port}/health") == (0, 0)


def test_unit_files_lists_the_fragment_with_its_first_line_and_an_unreadable_one(tmp_path):
    from operations.preflight import UnitFiles

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fragment = tmp_path / "lib" / "noderig-fixture-unit.service"
    fragment.parent.mkdir()
    fragment.write_text("[Unit]\nDescription=someone else's\n")
    stub(bin_dir, "systemctl", f'[ "$*" = "show -P FragmentPath -- noderig-fixture-unit.service" ] || exit 9\n'
                               f'echo {fragment}\n')
    assert gather_with_path(bin_dir, UnitFiles, service="noderig-fixture-unit") == (
        0, {"files": {str(fragment): "[Unit]"}, "state": None, "error": None})
    fragment.unlink()
    fragment.symlink_to(tmp_path / "nowhere")  # dangling: there, but unreadable
    assert gather_with_path(bin_dir, UnitFiles, service="noderig-fixture-unit") == (
        0, {"files": {str(fragment): None}, "state": None, "error": None})
    stub(bin_dir, "systemctl", 'echo "Failed to connect to bus"; exit 1\n')
    assert gather_with_path(bin_dir, UnitFiles, service="noderig-fixture-unit") == (
        0, {"files": {}, "state": None, "error": "systemctl show noderig-fixture-unit.service: Failed to connect to bus"})


@pytest.mark.skipif(not os.path.isdir("/var/lib/dpkg"), reason="no /var/lib/dpkg on this machine")
def test_unit_files_names_the_owner_of_an_existing_state_directory(tmp_path):
    from operations.preflight import UnitFiles

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub(bin_dir, "systemctl", "echo\n")  # no unit of that name
    owner = pwd.getpwuid(os.stat("/var/lib/dpkg").st_uid).pw_name
    assert gather_with_path(bin_dir, UnitFiles, service="dpkg") == (
        0, {"files": {}, "state": f"{owner} directory", "error": None})


def test_a_file_mode_keeps_the_special_bits_and_names_what_is_not_a_regular_file(tmp_path):
    path = tmp_path / "launch.py"
    path.write_text("x")
    path.chmod(0o4750)
    assert gather(facts.FileMode, path=str(path)) == (0, "4750")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(path)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    for name in ("dir", "link", "dangling"):  # never read as absent, never a mode to keep
        assert gather(facts.FileMode, path=str(tmp_path / name)) == (0, False), name


def test_pyinfra_file_facts_read_a_directory_as_absent_where_ours_fail(tmp_path):
    # Why Sha256 and FileText are not pyinfra's Sha256File and FileContents (3.10): theirs
    # answer None, "absent", for a path that exists but cannot be read; ours fail the command.
    from pyinfra.facts.files import FileContents, Sha256File

    path = tmp_path / "env"
    path.mkdir()
    assert gather(Sha256File, path=str(path)) == (0, None)
    assert gather(FileContents, path=str(path)) == (0, None)
    assert gather(facts.Sha256, path=str(path))[0] != 0
    assert gather(facts.FileText, path=str(path))[0] != 0


def test_several_facts_at_once_each_as_it_reads_alone(tmp_path):
    """``Facts`` on real files: each fact's lines and status cut out of the one command's
    output, so that each fact's own ``process`` gives what its own read gives: output without
    a last newline (curl's status is such), an unreadable file's failure, an empty output."""
    (tmp_path / "r.json").write_text('{"a": [1, 2]}')
    (tmp_path / "unreadable.json").mkdir()  # cat fails on it
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "x.bin").write_bytes(b"12345")
    reads = [["operations.facts.JsonFile", {"path": str(tmp_path / "r.json")}],
             ["operations.facts.JsonFile", {"path": str(tmp_path / "unreadable.json")}],
             ["operations.facts.LinkTarget", {"path": str(tmp_path / "r.json")}],
             ["operations.facts.FileStats", {"root": str(tmp_path / "m")}],
             ["operations.facts.Mtimes", {"paths": [str(tmp_path / "absent")]}]]
    status, answers = gather(facts.Facts, reads=tuple(reads), end="noderig:end:5eed")
    assert status == 0 and [s for s, _ in answers] == [0, 1, 0, 0, 0]
    assert answers[0][1] == ["noderig:present", '{"a": [1, 2]}']
    assert answers[2][1] == [] and answers[4][1] == []  # no output at all: the fact's default
    size, _, name = answers[3][1][1].split(" ")
    assert (size, name) == ("5", "x.bin")
    stats = facts.FileStats()
    assert stats.process(answers[3][1]) == gather(facts.FileStats, root=str(tmp_path / "m"))[1]


def test_several_facts_at_once_leave_no_temporary_directory(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    command = facts.Facts().command(reads=(("operations.facts.SshdPorts", {}),), end="noderig:end:5eed")
    res = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.splitlines()[-1] == "noderig:end:5eed 0 0"
    assert list(tmp_path.iterdir()) == []
def test_aria2_downloads_is_none_when_the_daemon_is_not_running(tmp_path):
    # (its node script against a real aria2c daemon: tests/test_aria2_session.py)
    systemctl = tmp_path / "systemctl"
    systemctl.write_text("#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/calls\"\nexit 3\n")
    systemctl.chmod(0o755)
    assert gather_with_path(tmp_path, facts.Aria2Downloads, dest="/models/m") == (0, None)
    assert (tmp_path / "calls").read_text() == "is-active --quiet noderig-aria2.service\n"


def test_checkpoint_state_reads_every_part_in_one_command(tmp_path):
    systemctl = tmp_path / "bin" / "systemctl"
    systemctl.parent.mkdir()
    systemctl.write_text("#!/bin/sh\nexit 3\n")  # the aria2 daemon is not running
    systemctl.chmod(0o755)
    dest = tmp_path / "m odel"
    (dest / ".noderig").mkdir(parents=True)
    (dest / ".noderig" / "manifest.json").write_text('{"repo": "org/m"}\n')
    (dest / "a.safetensors").write_bytes(b"x" * 7)
    (dest / "a.safetensors.aria2").write_bytes(b"c")
    os.utime(dest / "a.safetensors", (1764680000.5, 1764680000.5))
    code, value = gather_with_path(systemctl.parent, facts.CheckpointState, dest=str(dest))
    assert code == 0
    assert value["manifest"] == {"repo": "org/m"} and value["record"] is None and value["held"] is None
    assert value["stats"]["a.safetensors"] == {"size": 7, "mtime": 1764680000.5, "aria2": True}
    assert set(value["stats"]) == {"a.safetensors", "a.safetensors.aria2", ".noderig/manifest.json"}


def test_checkpoint_state_of_an_unreadable_record_fails_instead_of_reading_unverified(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    dest = tmp_path / "m"
    (dest / ".noderig").mkdir(parents=True)
    (dest / ".noderig" / "verified.json").write_text("{}")
    (dest / ".noderig" / "verified.json").chmod(0)
    code, _ = gather(facts.CheckpointState, dest=str(dest))
    assert code != 0


def test_checkpoint_state_reads_a_json_file_without_a_final_newline_apart_from_the_next_part(tmp_path):
    systemctl = tmp_path / "bin" / "systemctl"
    systemctl.parent.mkdir()
    systemctl.write_text("#!/bin/sh\nexit 3\n")
    systemctl.chmod(0o755)
    dest = tmp_path / "m"
    (dest / ".noderig").mkdir(parents=True)
    (dest / ".noderig" / "manifest.json").write_text('{"repo": "org/m"}')  # as json.dump writes it
    (dest / ".noderig" / "verified.json").write_text('{"a": {"size": 1}}')
    code, value = gather_with_path(systemctl.parent, facts.CheckpointState, dest=str(dest))
    assert code == 0
    assert value["manifest"] == {"repo": "org/m"} and value["record"] == {"a": {"size": 1}} and value["held"] is None
