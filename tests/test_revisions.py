"""A new checkpoint revision beside the live one (issue 16), on real files and real shells, no
hosts: the node script links what the two revisions share (``verify_files.py --seed-from``)
and never writes in the live directory; the switch, snapshot and restore scripts the rollout
runs on the node move ``model_dir`` to the new revision and back, with ``systemctl`` and
``curl`` stood in by scripts that record their calls."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

from noderig.node import script_path
from noderig.node import verify_files as vf
from operations.rollout import RESTORE_SCRIPT, SNAPSHOT_SCRIPT, SWITCH_SCRIPT

RECORD = ".noderig/verified.json"


def entry(root, rel: str) -> dict:
    data = (root / rel).read_bytes()
    if rel.endswith(".safetensors"):
        return {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return {"path": rel, "size": len(data), "git_oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}


def listing(root) -> list[tuple]:
    """Every entry under ``root``: path, inode, size, mtime (a write or a replacement shows)."""
    return sorted((str(p.relative_to(root)), p.lstat().st_ino, p.lstat().st_size, p.lstat().st_mtime_ns)
                  for p in root.rglob("*"))


@pytest.fixture
def live(tmp_path):
    """A live checkpoint verified by the real verifier: a shard and a config."""
    root = tmp_path / "Kimi-K2.6"
    root.mkdir()
    save_file({"w": np.arange(64, dtype=np.float32)}, str(root / "model.safetensors"))
    (root / "config.json").write_text('{"layers": 1}\n')
    manifest = {"files": [entry(root, "model.safetensors"), entry(root, "config.json")]}
    assert vf.verify(str(root), manifest)["ok"]
    return root, manifest


def new_revision(tmp_path, live_manifest: dict) -> dict:
    """The next revision: the same shard, a changed config (its bytes written elsewhere)."""
    other = tmp_path / "upstream"
    other.mkdir()
    (other / "config.json").write_text('{"layers": 2}\n')
    return {"files": [live_manifest["files"][0], entry(other, "config.json")]}


def test_the_shared_file_is_linked_with_its_record_and_only_the_changed_one_is_left_to_fetch(tmp_path, live):
    root, manifest = live
    new = new_revision(tmp_path, manifest)
    before = listing(root)
    beside = tmp_path / "Kimi-K2.6.noderig" / "0123456789abcdef"
    report = vf.seed(str(beside), new, str(root))
    assert report == {"ok": True, "linked": 1, "linked_bytes": (root / "model.safetensors").stat().st_size,
                      "problems": []}
    assert (beside / "model.safetensors").stat().st_ino == (root / "model.safetensors").stat().st_ino
    assert not (beside / "config.json").exists()
    assert listing(root) == before, "the live directory is not written to"
    # the fetch brings the changed file; verification hashes only that one
    (beside / "config.json").write_text('{"layers": 2}\n')
    checked = vf.verify(str(beside), new)
    assert checked["ok"] and checked["hashed_bytes"] == len('{"layers": 2}\n'), checked


def test_a_second_seed_links_nothing_more_and_replaces_nothing(tmp_path, live):
    root, manifest = live
    beside = tmp_path / "beside"
    new = new_revision(tmp_path, manifest)
    vf.seed(str(beside), new, str(root))
    (beside / "config.json").write_text("being fetched")
    before = listing(beside)
    assert vf.seed(str(beside), new, str(root)) == {"ok": True, "linked": 0, "linked_bytes": 0, "problems": []}
    assert listing(beside) == before


def test_a_live_file_changed_since_it_was_verified_is_not_linked(tmp_path, live):
    root, manifest = live
    with open(root / "model.safetensors", "r+b") as f:  # same size, other bytes, a later mtime
        f.seek(100)
        f.write(b"\xff")
    os.utime(root / "model.safetensors", ns=(1, 1))
    report = vf.seed(str(tmp_path / "beside"), new_revision(tmp_path, manifest), str(root))
    assert report["linked"] == 0 and not (tmp_path / "beside" / "model.safetensors").exists()


def test_a_symlink_in_the_live_directory_is_never_linked_or_followed(tmp_path, live):
    root, manifest = live
    secret = tmp_path / "secret.safetensors"
    secret.write_bytes((root / "model.safetensors").read_bytes())
    os.replace(root / "model.safetensors", tmp_path / "moved")
    os.symlink(secret, root / "model.safetensors")
    report = vf.seed(str(tmp_path / "beside"), new_revision(tmp_path, manifest), str(root))
    assert report["linked"] == 0 and not (tmp_path / "beside" / "model.safetensors").exists()


def test_seeding_the_live_directory_into_itself_is_refused(live):
    root, manifest = live
    with pytest.raises(vf.UsageError, match="is the live directory itself"):
        vf.seed(str(root), manifest, str(root))


def test_the_node_script_seeds_from_its_command_line_under_a_bare_python(tmp_path, live):
    root, manifest = live
    new = new_revision(tmp_path, manifest)
    beside = tmp_path / "beside"
    (beside / ".noderig").mkdir(parents=True)
    (beside / ".noderig" / "manifest.json").write_text(json.dumps({"version": 1, **new}))
    run = subprocess.run([sys.executable, str(script_path("verify_files.py")), str(beside / ".noderig/manifest.json"),
                          str(beside), "--seed-from", str(root)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["linked"] == 1
    assert set(json.loads((beside / RECORD).read_text())) == {"model.safetensors"}


# ---------------------------------------------------------------------------------------
# the rollout's node scripts, on a real shell


@pytest.fixture
def node(tmp_path):
    """A PATH where systemctl and curl record their calls (curl answers 200)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "systemctl $*" >> {calls}\n')
    (bin_dir / "curl").write_text("#!/bin/sh\nprintf 200\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return {"env": {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, "calls": calls}


def sh(node, script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script, "noderig-test", *map(str, args)], env=node["env"],
                          capture_output=True, text=True)


def generation(tmp_path, name: str, config: str):
    g = tmp_path / "m.noderig" / name
    (g / ".noderig").mkdir(parents=True)
    (g / "config.json").write_text(config)
    (g / RECORD).write_text("{}")
    return g


def test_a_checkpoint_directory_switches_to_its_new_revision_and_back_to_the_last_known_good(tmp_path, node):
    live = tmp_path / "m"
    live.mkdir()
    (live / "config.json").write_text("first")
    first = generation(tmp_path, "aaaa", "second")
    done = sh(node, SWITCH_SCRIPT, live, first, "sglang.service", RECORD)
    assert done.returncode == 0, done.stderr
    assert os.readlink(live) == str(first) and (live / "config.json").read_text() == "second"
    assert (tmp_path / "m.noderig/adopted/config.json").read_text() == "first", "the old directory kept whole"
    assert node["calls"].read_text() == "systemctl stop sglang.service\n"
    # the server runs the second revision: kept as the last known good, then a third comes
    good = tmp_path / "last-good"
    unit = tmp_path / "unit"
    unit.write_text("[Service]\n")
    kept = sh(node, SNAPSHOT_SCRIPT, good, "http://127.0.0.1:1/health", f"unit={unit}", f"@model_dir={live}")
    assert kept.returncode == 0, kept.stderr
    assert (good / "@model_dir").read_text().strip() == str(first)
    second = generation(tmp_path, "bbbb", "third")
    assert sh(node, SWITCH_SCRIPT, live, second, "sglang.service", RECORD).returncode == 0
    assert os.readlink(live) == str(second)
    assert sorted(p.name for p in (tmp_path / "m.noderig").iterdir()) == ["aaaa", "bbbb"], \
        "only the new revision and the one it replaced are kept"
    back = sh(node, RESTORE_SCRIPT, good, "sglang.service")
    assert back.returncode == 0, back.stderr
    assert os.readlink(live) == str(first) and (live / "config.json").read_text() == "second"
    assert node["calls"].read_text().splitlines()[-1] == "systemctl restart sglang.service"


def test_a_revision_not_verified_is_never_switched_to_and_the_server_is_not_stopped(tmp_path, node):
    live = tmp_path / "m"
    live.mkdir()
    unfinished = tmp_path / "m.noderig" / "cccc"
    unfinished.mkdir(parents=True)
    done = sh(node, SWITCH_SCRIPT, live, unfinished, "sglang.service", RECORD)
    assert done.returncode == 1 and f"{unfinished} is not complete (no {RECORD})" in done.stdout
    assert live.is_dir() and not live.is_symlink() and not node["calls"].exists()


def test_a_restore_from_a_record_written_before_checkpoints_had_links_still_points_the_venv_back(tmp_path, node):
    venv = tmp_path / "venv"
    old, new = tmp_path / "venv.noderig/old", tmp_path / "venv.noderig/new"
    old.mkdir(parents=True)
    new.mkdir()
    os.symlink(new, venv)
    good = tmp_path / "last-good"
    good.mkdir()
    (good / "venv").write_text(f"{old}\n")
    (good / "paths").write_text(f"venv={venv}\n")
    assert sh(node, RESTORE_SCRIPT, good, "sglang.service").returncode == 0
    assert os.readlink(venv) == str(old)


# ---------------------------------------------------------------------------------------
# what the seed takes from the live record and where it refuses to write (each case stated)


def shard_bytes(n: int) -> bytes:
    return bytes([n]) * (1000 + n)


@pytest.fixture
def live_sub(tmp_path):
    """A live checkpoint with two shards in a subdirectory, hashed by the real verifier, and
    the new revision's manifest that keeps both."""
    root = tmp_path / "live"
    (root / "sub").mkdir(parents=True)
    for n in (1, 2):
        (root / "sub" / f"m{n}.bin").write_bytes(shard_bytes(n))
    manifest = {"files": [entry(root, "sub/m1.bin"), entry(root, "sub/m2.bin")]}
    for f in manifest["files"]:  # (named .bin: sha256 digests as LFS files, no header to read)
        f["sha256"] = hashlib.sha256((root / f["path"]).read_bytes()).hexdigest()
        f.pop("git_oid", None)
    assert vf.verify(str(root), manifest)["ok"]
    return root, manifest


def add_to_record(root, extra: dict) -> None:
    record = json.loads((root / RECORD).read_text())
    (root / RECORD).write_text(json.dumps({**record, **extra}))


def test_record_entries_that_vouch_for_nothing_are_passed_over_and_the_rest_still_linked(tmp_path, live_sub):
    root, manifest = live_sub
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "m1.bin").write_bytes(shard_bytes(1))
    os.symlink(elsewhere, root / "0link")
    st = (elsewhere / "m1.bin").stat()
    digest = manifest["files"][0]["sha256"]
    (root / "0nodigest").write_bytes(b"a file the record names without a digest")
    nodigest = (root / "0nodigest").stat()
    # sorted before the real entries: each must be passed over, not end the walk
    add_to_record(root, {"0link/m1.bin": {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": digest},
                         "0nodigest": {"size": nodigest.st_size, "mtime_ns": nodigest.st_mtime_ns},
                         "0notadict": "x",
                         "0gone.bin": {"size": 1, "mtime_ns": 1, "digest": "f" * 64},
                         "../0escape": {"size": 1, "mtime_ns": 1, "digest": "e" * 64}})
    beside = tmp_path / "beside"
    report = vf.seed(str(beside), manifest, str(root))
    assert report["linked"] == 2 and report["problems"] == []
    for rel in ("sub/m1.bin", "sub/m2.bin"):  # both from the live directory itself, never through the link
        assert (beside / rel).stat().st_ino == (root / rel).stat().st_ino, rel


def test_files_already_there_or_recorded_are_left_alone_and_the_rest_linked(tmp_path, live_sub):
    root, manifest = live_sub
    beside = tmp_path / "beside"
    (beside / "sub").mkdir(parents=True)
    (beside / "sub" / "m1.bin").write_bytes(b"being fetched")  # there already, not recorded
    report = vf.seed(str(beside), manifest, str(root))
    assert (report["linked"], report["problems"]) == (1, [])
    assert (beside / "sub" / "m1.bin").read_bytes() == b"being fetched"
    # recorded there already (the first manifest file): the second is still linked
    other = tmp_path / "other"
    (other / ".noderig").mkdir(parents=True)
    (other / RECORD).write_text(json.dumps({"sub/m1.bin": {"size": 1, "mtime_ns": 1, "digest": "x"}}))
    report = vf.seed(str(other), manifest, str(root))
    assert report["linked"] == 1 and (other / "sub" / "m2.bin").exists() and not (other / "sub" / "m1.bin").exists()


def test_a_symlink_in_the_new_directory_is_reported_and_never_written_through(tmp_path, live_sub):
    root, manifest = live_sub
    beside, outside = tmp_path / "beside", tmp_path / "outside"
    beside.mkdir()
    outside.mkdir()
    os.symlink(outside, beside / "sub")
    report = vf.seed(str(beside), manifest, str(root))
    assert report == {"ok": False, "linked": 0, "linked_bytes": 0, "problems": [
        {"file": "sub/m1.bin", "problem": f"sub is a symlink to '{outside}' (never followed)"},
        {"file": "sub/m2.bin", "problem": f"sub is a symlink to '{outside}' (never followed)"}]}
    assert list(outside.iterdir()) == []


def test_seeding_into_the_live_directory_names_it(live_sub):
    root, manifest = live_sub
    with pytest.raises(vf.UsageError) as refused:
        vf.seed(str(root) + "/", manifest, str(root))
    assert str(refused.value) == f"'{root}/' is the live directory itself"


def test_a_hostile_manifest_path_is_reported_and_nothing_is_linked_outside_the_new_directory(tmp_path, live_sub):
    root, manifest = live_sub
    digest = manifest["files"][0]["sha256"]
    hostile = {"files": [{"path": "../escaped.bin", "size": 1001, "sha256": digest},
                         {"path": "/tmp/absolute.bin", "size": 1001, "sha256": digest},
                         {"path": ["not", "a", "path"], "size": 1001, "sha256": digest},
                         "not an entry", manifest["files"][1]]}
    beside = tmp_path / "beside"
    report = vf.seed(str(beside), hostile, str(root))
    assert report["linked"] == 1 and (beside / "sub" / "m2.bin").exists()
    assert [p["file"] for p in report["problems"]] == ["../escaped.bin", "/tmp/absolute.bin", "['not', 'a', 'path']"]
    assert not (tmp_path / "escaped.bin").exists() and not os.path.exists("/tmp/absolute.bin")
