"""Facts, without a host: each fact's command run by the local shell against files made here
(read-only commands), and its output turned into the fact's value. Absent is not unreadable:
a file that is not there is None; one that is there but cannot be read fails the command;
one that cannot be parsed raises, naming the file."""

from __future__ import annotations

import subprocess

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
