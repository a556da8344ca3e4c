"""The checkpoint verifier's smaller decisions, each stated in full: the node script's help and
options, how many threads and processes it uses, a file changing while it is hashed, the
library probe's verdicts, the record's exact bytes, index problems grouped per shard, and the
precise header path's messages. Written against the survivors of a mutmut run over
``noderig/node/verify_files.py`` (docs/mutation.md): each test states the behaviour a
surviving mutant broke, with the expected value written out here."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import struct
import sys
import types

import numpy as np
import pytest
from safetensors.numpy import save_file

from noderig.node import verify_files as vf
from noderig.node.hubpath import unsafe
from tests.test_verify import _t, _u8, raw_file

INDEX = "model.safetensors.index.json"


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_oid(path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def files_of(report: dict) -> dict:
    return {f["file"]: (f["status"], f["detail"]) for f in report["files"]}


def shard(path, tensors: dict) -> None:
    """A real safetensors file written by the library."""
    save_file(tensors, str(path))


# ---------------------------------------------------------------------------------------
# the node script's command line


HELP = """\
usage: verify_files.py [-h] [--jobs JOBS] [--structure-only] [--no-record] [--check-paths]
                       [--seed-from LIVE]
                       manifest dir

Verify a checkpoint directory; prints one JSON line.

positional arguments:
  manifest          the manifest (JSON), or - for none (structure only)
  dir

options:
  -h, --help        show this help message and exit
  --jobs JOBS       files hashed at once (default min(8, CPUs))
  --structure-only  headers, sizes and index only: no hashing
  --no-record       neither read nor write the verified-state record
  --check-paths     only check that the deploy may write there (see check_paths); exit 1 if not
  --seed-from LIVE  only link in the files LIVE holds verified with the manifest's digests (see
                    seed)
"""


def test_the_node_scripts_help_in_full(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as done:
        vf.main(["--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out == HELP


@pytest.fixture
def small(tmp_path):
    """Three files with a manifest: an LFS-style shard (sha256), a second one, a small json (git blob id)."""
    root = tmp_path / "ck"
    root.mkdir()
    shard(root / "a.safetensors", {"w": np.ones((64,), dtype=np.float32)})
    shard(root / "b.safetensors", {"v": np.ones((8,), dtype=np.float32)})
    (root / "config.json").write_text('{"model_type": "x"}\n')
    manifest = {"files": [
        {"path": "a.safetensors", "size": (root / "a.safetensors").stat().st_size, "sha256": sha256(root / "a.safetensors")},
        {"path": "b.safetensors", "size": (root / "b.safetensors").stat().st_size, "sha256": sha256(root / "b.safetensors")},
        {"path": "config.json", "size": (root / "config.json").stat().st_size, "git_oid": git_oid(root / "config.json")}]}
    (root / ".noderig").mkdir()
    (root / ".noderig/manifest.json").write_text(json.dumps(manifest))
    return root, manifest


def thread_pools(monkeypatch) -> list:
    """Record the number of threads each hashing pool is given."""
    sizes = []
    real = vf.ThreadPoolExecutor

    def pool(n):
        sizes.append(n)
        return real(n)

    monkeypatch.setattr(vf, "ThreadPoolExecutor", pool)
    return sizes


def test_main_options_reach_verify(small, monkeypatch, capsys):
    root, _ = small
    manifest = str(root / ".noderig/manifest.json")
    sizes = thread_pools(monkeypatch)
    assert vf.main([manifest, str(root), "--jobs", "1", "--no-record"]) == 0  # 1 is allowed
    assert sizes == [1]
    assert vf.main([manifest, str(root), "--jobs", "2", "--no-record"]) == 0
    assert sizes == [1, 2]
    capsys.readouterr()
    # a manifest and --structure-only: nothing hashed
    assert vf.main([manifest, str(root), "--structure-only"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["sha256_checked"], report["hashed_bytes"], report["record"]) == (False, 0, "not used")
    assert sizes == [1, 2]
    # no argv: the process's own arguments after the script name
    monkeypatch.setattr(sys, "argv", ["verify_files.py", manifest, str(root), "--no-record"])
    assert vf.main() == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["sha256_checked"] and report["record"] == "not used"


def test_hashing_threads_default_to_the_cpus_up_to_eight(small, monkeypatch):
    root, manifest = small
    sizes = thread_pools(monkeypatch)
    for cpus in (3, None, 64):
        monkeypatch.setattr(vf.os, "cpu_count", lambda: cpus)
        vf.verify(str(root), manifest, use_record=False, library=False)
    assert sizes == [3, 1, 3]  # None: one; 64: eight, but never more threads than the 3 files
    vf.verify(str(root), manifest, jobs=1, use_record=False, library=False)
    assert sizes[-1] == 1


def test_largest_file_hashed_first(small, monkeypatch):
    root, manifest = small
    order = []
    real = vf.file_digest

    def digest(path, entry, size):
        order.append(os.path.basename(path))
        return real(path, entry, size)

    monkeypatch.setattr(vf, "file_digest", digest)
    vf.verify(str(root), manifest, jobs=1, use_record=False, library=False)
    sizes = {name: (root / name).stat().st_size for name in order}
    assert sizes["a.safetensors"] > sizes["b.safetensors"] > sizes["config.json"]
    assert order == ["a.safetensors", "b.safetensors", "config.json"]


def test_the_report_times_itself_with_the_monotonic_clock(small, monkeypatch):
    root, manifest = small
    ticks = iter([100.0, 101.23456])
    monkeypatch.setattr(vf, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    report = vf.verify(str(root), manifest, use_record=False, library=False)
    assert report["seconds"] == 1.235
    assert list(report) == ["ok", "files", "index", "hashed_bytes", "sha256_checked", "library_check", "record",
                            "seconds"]
    assert report["library_check"] == "not used: disabled"


# ---------------------------------------------------------------------------------------
# hashing: the verdict per file, in full


def test_hash_mismatch_details_name_the_kind_of_digest(small):
    root, manifest = small
    for e in manifest["files"]:
        e["sha256" if "sha256" in e else "git_oid"] = "0" * (64 if "sha256" in e else 40)
    report = vf.verify(str(root), {"files": manifest["files"][::2]}, use_record=False, library=False)
    assert files_of(report) == {
        "a.safetensors": ("sha256_mismatch", f"sha256 {sha256(root / 'a.safetensors')}, expected {'0' * 64}"),
        "config.json": ("sha256_mismatch", f"git blob id {git_oid(root / 'config.json')}, expected {'0' * 40}")}


def test_a_file_that_cannot_be_read_or_changes_while_hashed(small, monkeypatch):
    root, manifest = small
    real = vf.file_digest
    what = {}

    def digest(path, entry, size):
        name = os.path.basename(path)
        got = real(path, entry, size)
        if what.get(name) == "touch":  # same size, newer mtime
            st = os.stat(path)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        elif what.get(name) == "aria2":
            (root / f"{name}.aria2").write_bytes(b"")
        elif what.get(name) == "delete":
            os.unlink(path)
        elif what.get(name) == "fail":
            raise OSError(5, "Input/output error")
        return got

    monkeypatch.setattr(vf, "file_digest", digest)
    what.update({"a.safetensors": "touch", "b.safetensors": "aria2", "config.json": "delete"})
    report = vf.verify(str(root), manifest, use_record=False, library=False)
    assert files_of(report) == {name: ("partial", "changed while it was being hashed") for name in what}
    (root / "b.safetensors.aria2").unlink()
    (root / "config.json").write_text('{"model_type": "x"}\n')
    what.clear()
    what["a.safetensors"] = "fail"
    report = vf.verify(str(root), manifest, use_record=False, library=False)
    assert files_of(report) == {"a.safetensors": ("missing", "cannot read: Input/output error"),
                                "b.safetensors": ("ok", "hashed"), "config.json": ("ok", "hashed")}


def test_a_file_without_a_digest_and_index_named_shards_outside_the_manifest(tmp_path):
    root = tmp_path / "ck"
    root.mkdir()
    shard(root / "a.safetensors", {"w": np.ones((4,), dtype=np.float32)})
    (root / INDEX).write_text(json.dumps({"weight_map": {"w": "a.safetensors"}}))
    (root / "config.json").write_text("{}")
    manifest = {"files": [{"path": "config.json", "size": 2},  # no digest, listed first
                          {"path": INDEX, "size": (root / INDEX).stat().st_size, "git_oid": git_oid(root / INDEX)}]}
    report = vf.verify(str(root), manifest, use_record=False, library=False)
    assert report["ok"] and report["index"] == []
    assert files_of(report) == {
        "a.safetensors": ("unverified", "the manifest has no digest for it: content not checked"),
        "config.json": ("unverified", "the manifest has no digest for it: content not checked"),
        INDEX: ("ok", "hashed")}


def test_file_digest_is_the_hubs_identity_and_warns_nothing(tmp_path):
    import warnings

    path = tmp_path / "f.bin"
    path.write_bytes(b"hello\n" * 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vf.file_digest(str(path), {"sha256": "x"}, 6000) == hashlib.sha256(b"hello\n" * 1000).hexdigest()
        assert vf.file_digest(str(path), {"git_oid": "x"}, 6000) == hashlib.sha1(b"blob 6000\0" + b"hello\n" * 1000).hexdigest()


def test_files_are_opened_without_following_a_symlink(tmp_path):
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(OSError) as err:
        vf._open_nofollow(str(tmp_path / "link"))
    assert err.value.errno == 40  # ELOOP


# ---------------------------------------------------------------------------------------
# structure: processes, the library, the garbage collector


class FakePool:
    """Stands in for ProcessPoolExecutor (runs here) and records how it was asked to run."""
    made: list = []

    def __init__(self, max_workers=None, mp_context=None):
        FakePool.made.append({"workers": max_workers, "start": mp_context and mp_context.get_start_method()})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, items, chunksize=1):
        FakePool.made[-1]["chunksize"] = chunksize
        return list(map(fn, items))


def test_headers_are_read_by_forked_processes_sized_to_the_shards(tmp_path, monkeypatch):
    import concurrent.futures

    root = tmp_path / "ck"
    root.mkdir()
    for i in range(41):
        shard(root / f"s{i:02}.safetensors", {f"t{i}": np.ones((2,), dtype=np.uint8)})
    (root / INDEX).write_text(json.dumps({"weight_map": {f"t{i}": f"s{i:02}.safetensors" for i in range(41)}}))
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", FakePool)
    FakePool.made = []
    reads = []
    real = vf._structure
    monkeypatch.setattr(vf, "_structure", lambda job: reads.append(job[0]) or real(job))

    assert vf.verify(str(root), None, procs=8, library=False)["ok"]
    assert FakePool.made == [{"workers": 5, "start": "fork", "chunksize": 2}]  # 41 // 8 processes, 41 // (5 * 4)
    assert sorted(reads) == sorted([f"s{i:02}.safetensors" for i in range(41)] + [INDEX])  # each read once
    FakePool.made = []
    assert vf.verify(str(root), None, procs=2, library=False)["ok"]
    assert FakePool.made == [{"workers": 2, "start": "fork", "chunksize": 5}]  # 41 // (2 * 4)
    FakePool.made = []
    monkeypatch.setattr(vf.os, "cpu_count", lambda: 3)
    vf.verify(str(root), None, library=False)
    monkeypatch.setattr(vf.os, "cpu_count", lambda: None)
    vf.verify(str(root), None, library=False)  # one process: read here
    monkeypatch.setattr(vf.os, "cpu_count", lambda: 64)
    vf.verify(str(root), None, library=False)
    assert [m["workers"] for m in FakePool.made] == [3, 5]
    FakePool.made = []
    vf.verify(str(root), None, procs=1, library=False)
    assert FakePool.made == []
    monkeypatch.setattr(vf, "PARALLEL_MIN_SHARDS", 20)
    vf.verify(str(root), None, procs=8, library=False)
    monkeypatch.setattr(vf, "PARALLEL_MIN_SHARDS", 1)
    vf.verify(str(root), None, procs=8, library=False)
    assert FakePool.made == [{"workers": 2, "start": "fork", "chunksize": 5}, {"workers": 8, "start": "fork",
                                                                                "chunksize": 1}]
    # fork even where the platform's default start method is another
    import multiprocessing

    before = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method("spawn", force=True)
    try:
        FakePool.made = []
        vf.verify(str(root), None, procs=2, library=False)
        assert FakePool.made[0]["start"] == "fork"
    finally:
        multiprocessing.set_start_method(before, force=True)


def test_the_garbage_collector_is_left_as_it_was(tmp_path, monkeypatch):
    root = tmp_path / "ck"
    root.mkdir()
    shard(root / "a.safetensors", {"w": np.ones((2,), dtype=np.uint8)})
    shard(root / "b.safetensors", {"v": np.ones((2,), dtype=np.uint8)})
    gc.enable()
    during = []
    real = vf._structure
    monkeypatch.setattr(vf, "_structure", lambda job: during.append(gc.isenabled()) or real(job))
    vf.verify(str(root), None, library=False)
    assert during == [False, False]  # off while the headers are parsed, one file after another
    assert gc.isenabled()
    monkeypatch.setattr(vf, "_structure", real)
    gc.disable()
    try:
        vf.verify(str(root), None, library=False)
        assert not gc.isenabled()
    finally:
        gc.enable()
    # a shard the manifest does not name is read through the index, here in this process
    (root / INDEX).write_text(json.dumps({"weight_map": {"w": "a.safetensors"}}))
    manifest = {"files": [{"path": INDEX, "size": (root / INDEX).stat().st_size, "git_oid": git_oid(root / INDEX)}]}
    assert vf.verify(str(root), manifest, use_record=False, library=False)["ok"]
    assert gc.isenabled()


class Rejecting:
    validate = staticmethod(lambda path, header: "safetensors: rejected here")
    why = "a stand-in that rejects every header"


def test_the_library_verdict_is_used_only_when_asked(tmp_path, monkeypatch):
    root = tmp_path / "ck"
    root.mkdir()
    shard(root / "a.safetensors", {"w": np.ones((2,), dtype=np.uint8)})
    (root / INDEX).write_text(json.dumps({"weight_map": {"w": "a.safetensors"}}))
    monkeypatch.setattr(vf, "_library", Rejecting())
    report = vf.verify(str(root), None)  # the library is used by default
    assert report["library_check"] == "a stand-in that rejects every header"
    assert files_of(report)["a.safetensors"] == ("header_invalid", "safetensors: rejected here")
    # a shard reached only through the index (not in the manifest) is checked by the library too
    manifest = {"files": [{"path": INDEX, "size": (root / INDEX).stat().st_size, "git_oid": git_oid(root / INDEX)}]}
    report = vf.verify(str(root), manifest, use_record=False)
    assert files_of(report)["a.safetensors"] == ("header_invalid", "safetensors: rejected here")
    report = vf.verify(str(root), None, library=False)
    assert report["ok"] and report["library_check"] == "not used: disabled"
    assert files_of(report)["a.safetensors"] == ("unverified", "header valid; sha256 not checked")


def test_library_check_probes_once_when_first_asked(monkeypatch):
    monkeypatch.setattr(vf, "_library", None)
    lib = vf.library_check()
    assert isinstance(lib, vf.LibraryCheck) and lib.validate is not None
    assert vf.library_check() is lib


def test_the_library_names_its_own_error(tmp_path):
    text = b'{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0")  # one byte short
    lib = vf.LibraryCheck()
    assert lib._validate(str(path), vf.Header(len(text), ["t"], 2)) == (
        "safetensors: Error while deserializing header: incomplete metadata, file not fully covered")


def complete(path, at_least=False) -> bool:
    """The probe's one tensor of two bytes is all there (and nothing more, unless ``at_least``)."""
    data = open(path, "rb").read()
    want = 8 + struct.unpack("<Q", data[:8])[0] + 2
    return len(data) >= want if at_least else len(data) == want


def fake_safetensors(monkeypatch, accept):
    """A module that looks like safetensors; ``accept(path)`` says whether it takes a file."""
    mod = types.ModuleType("safetensors")
    mod.__version__ = "9.9"

    class SafetensorError(Exception):
        pass

    class Handle:
        def __init__(self, path, framework):
            if not accept(path):
                raise SafetensorError("no")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def keys(self):
            return ["t"]

    mod.SafetensorError, mod.safe_open = SafetensorError, Handle
    monkeypatch.setitem(sys.modules, "safetensors", mod)


def test_the_probe_refuses_a_library_that_does_not_validate(monkeypatch):
    fake_safetensors(monkeypatch, accept=lambda path: True)
    lib = vf.LibraryCheck()
    assert (lib.validate, lib.why) == (None, "not used: safetensors 9.9 does not validate a header before needing "
                                             "a framework")
    fake_safetensors(monkeypatch, accept=lambda path: False)
    lib = vf.LibraryCheck()
    assert (lib.validate, lib.why) == (None, "not used: safetensors 9.9 does not validate a header before needing "
                                             "a framework")
    fake_safetensors(monkeypatch, accept=complete)
    assert vf.LibraryCheck().why == "safetensors 9.9 safe_open: header validated by the library too, tensor names compared"
    # a library that only refuses files shorter than their header says is used too: the bad probe is one byte short
    fake_safetensors(monkeypatch, accept=lambda path: complete(path, at_least=True))
    assert vf.LibraryCheck().why == "safetensors 9.9 safe_open: header validated by the library too, tensor names compared"
    monkeypatch.setitem(sys.modules, "safetensors", None)
    lib = vf.LibraryCheck()
    assert (lib.validate, lib.why) == (None, "not used: import of safetensors halted; None in sys.modules")


def test_the_probe_without_numpy_and_without_litter(monkeypatch, tmp_path):
    import importlib.util

    monkeypatch.chdir(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numpy" else real(name, *a))
    lib = vf.LibraryCheck()
    assert lib.why == "safetensors 0.8.0 safe_open: header validated by the library too (numpy absent: validation only)"

    def broken(name, *a):
        raise ValueError("no spec")

    monkeypatch.setattr(importlib.util, "find_spec", broken)
    assert vf.LibraryCheck().why == "safetensors 0.8.0 safe_open: header validated by the library too, tensor names compared"
    assert os.listdir(tmp_path) == []  # the probe's files live in a temporary directory


def test_open_blocks_numpy_only_when_it_is_absent_and_not_loaded(monkeypatch):
    seen = []

    class Lib:
        SafetensorError = RuntimeError

        @staticmethod
        def safe_open(path, framework):
            seen.append(sys.modules.get("numpy", "not loaded"))
            raise ImportError("numpy")

    lib = vf.LibraryCheck()
    lib._lib = Lib
    numpy = sys.modules["numpy"]
    lib._numpy_absent = True
    assert lib._open("p") is None
    assert seen.pop() is numpy and sys.modules["numpy"] is numpy  # loaded: left alone
    monkeypatch.delitem(sys.modules, "numpy")
    assert lib._open("p") is None
    assert seen.pop() is None and "numpy" not in sys.modules  # blocked for the call only
    lib._numpy_absent = False
    assert lib._open("p") is None
    assert seen.pop() == "not loaded" and "numpy" not in sys.modules


# ---------------------------------------------------------------------------------------
# the record


def test_the_record_text_and_a_failed_write(tmp_path, monkeypatch):
    root = tmp_path / "ck"
    root.mkdir()
    replaced = []
    real = os.replace
    monkeypatch.setattr(vf.os, "replace", lambda a, b: replaced.append(os.path.dirname(a)) or real(a, b))
    vf.write_record(str(root), {"b": {"size": 2, "mtime_ns": 5, "digest": "d2"}, "a": {"size": 1, "mtime_ns": 4,
                                                                                        "digest": "d1"}})
    assert (root / ".noderig/verified.json").read_text() == (
        '{\n "a": {\n  "digest": "d1",\n  "mtime_ns": 4,\n  "size": 1\n },\n'
        ' "b": {\n  "digest": "d2",\n  "mtime_ns": 5,\n  "size": 2\n }\n}\n')
    assert replaced == [str(root / ".noderig")]  # the temporary beside the record: an atomic rename
    assert (root / ".noderig/verified.json").stat().st_mode & 0o777 == 0o644
    with pytest.raises(TypeError):
        vf.write_record(str(root), {"a": object()})
    assert os.listdir(root / ".noderig") == ["verified.json"]


def test_a_record_behind_a_symlink_is_not_written_through(small, tmp_path):
    root, manifest = small
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".noderig/verified.json").symlink_to(elsewhere / "verified.json")
    report = vf.verify(str(root), manifest, library=False)
    assert report["record"] == f"not written: {root / '.noderig'} or its record is a symlink: never written through"
    assert not (elsewhere / "verified.json").exists()


def test_a_record_that_is_not_an_object_is_ignored(small):
    root, manifest = small
    (root / ".noderig/verified.json").write_text("[]")
    report = vf.verify(str(root), manifest, library=False)
    assert report["ok"] and report["record"] == "written" and report["hashed_bytes"] > 0


# ---------------------------------------------------------------------------------------
# manifests and paths


def test_manifest_shapes_refused_in_full(tmp_path):
    for manifest in ([], {"files": [3]}, {"files": [{"size": 1}]}, {"files": {}}):
        with pytest.raises(vf.UsageError) as err:
            vf.verify(str(tmp_path), manifest, library=False)
        assert str(err.value) == "the manifest has no list of files with paths"
    with pytest.raises(vf.UsageError) as err:
        vf.verify(str(tmp_path), {"files": [{"path": "a"}] * 100_001}, library=False)
    assert str(err.value) == "the manifest names 100001 files, more than the 100000 a checkpoint may have"
    report = vf.verify(str(tmp_path), {"files": [{"path": "a"}] * 100_000}, library=False)  # the limit itself
    assert files_of(report) == {"a": ("missing", "not on disk")}
    with pytest.raises(vf.UsageError) as err:
        vf.verify(str(tmp_path), {"files": [{"path": "../x"}]}, library=False)
    assert str(err.value) == "the manifest names the unsafe path '../x' (it has a '..' component); nothing was read or written"


def test_a_file_that_cannot_be_stated(tmp_path, monkeypatch):
    (tmp_path / "a.json").write_text("{}")
    real = os.lstat

    def lstat(path, *a, **k):
        if str(path).endswith("a.json"):
            raise PermissionError(13, "Permission denied")
        return real(path, *a, **k)

    monkeypatch.setattr(vf, "walk_problem", lambda root, rel: None)
    monkeypatch.setattr(vf.os, "lstat", lstat)
    report = vf.verify(str(tmp_path), {"files": [{"path": "a.json"}]}, library=False)
    assert files_of(report) == {"a.json": ("missing", "cannot stat: Permission denied")}


def test_walk_problem_odd_roots_and_unreadable_links(tmp_path, monkeypatch):
    assert vf.walk_problem("/", "tmp") is None
    root = tmp_path / "rootX"
    (root / "d").mkdir(parents=True)
    assert vf.walk_problem(str(root), "d") is None
    (root / "l").symlink_to("/etc")

    def unreadable(path):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(vf.os, "readlink", unreadable)
    assert vf.walk_problem(str(root), "l") == ("symlink", "l is a symlink to '?' (never followed)")


def test_check_paths_names_a_path_that_is_not_a_string(tmp_path):
    assert vf.check_paths(str(tmp_path), {"files": [{"path": 5}]}) == {
        "ok": False, "problems": [{"file": "5", "problem": "it is not a string but int"}]}


def test_discover_names_nested_linked_directories_with_slashes(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "link").symlink_to(tmp_path / "a" / "b")
    assert vf._discover(str(tmp_path)) == ["a/link"]


# ---------------------------------------------------------------------------------------
# the index: one entry per problem and shard; two indexes


def test_index_problems_are_grouped_per_shard(tmp_path):
    root = tmp_path / "ck"
    root.mkdir()
    raw_file(root / "a.safetensors", {"x": _u8(0, 1), "p": _u8(1, 1), "q": _u8(2, 1)}, b"xpq")
    raw_file(root / "b.safetensors", {"x": _u8(0, 1), "r": _u8(1, 1), "s": _u8(2, 1)}, b"xrs")
    raw_file(root / "c.safetensors", {"t": _u8(0, 1), "x": _u8(1, 1)}, b"tx")
    (root / INDEX).write_text(json.dumps({"weight_map": {
        "g1": "a.safetensors", "g2": "b.safetensors", "s": "a.safetensors", "q": "b.safetensors", "t": "c.safetensors",
        "u1": "../u1.safetensors", "u2": "/u2.safetensors", "m1": "m1.safetensors", "m2": "m2.safetensors"}}))
    report = vf.verify(str(root), None, library=False)
    assert [(p["problem"], p["detail"]) for p in report["index"]] == [
        ("index_invalid", 'the index names an unsafe shard path "../u1.safetensors"'),
        ("index_invalid", 'the index names an unsafe shard path "/u2.safetensors"'),
        ("shard_missing", "m1.safetensors is named by the index (1 tensors) but is not on disk"),
        ("shard_missing", "m2.safetensors is named by the index (1 tensors) but is not on disk"),
        ("tensor_in_two_shards", 'tensor "x" is in both a.safetensors and b.safetensors (the index maps it to no shard)'),
        ("tensor_in_two_shards", 'tensor "x" is in both a.safetensors and c.safetensors (the index maps it to no shard)'),
        ("tensor_not_in_index", 'tensor "p" in a.safetensors is not in the index\'s weight_map (and 1 more like it)'),
        ("tensor_in_no_shard", 'the index maps tensor "g1" to a.safetensors but its header lacks it'),
        ("tensor_in_other_shard", 'the index maps tensor "s" to a.safetensors but it is in b.safetensors'),
        ("tensor_not_in_index", 'tensor "r" in b.safetensors is not in the index\'s weight_map (and 1 more like it)'),
        ("tensor_in_no_shard", 'the index maps tensor "g2" to b.safetensors but its header lacks it'),
        ("tensor_in_other_shard", 'the index maps tensor "q" to b.safetensors but it is in a.safetensors'),
        ("tensor_not_in_index", 'tensor "x" in c.safetensors is not in the index\'s weight_map')]


def test_a_tensor_mapped_to_an_unreadable_shard(tmp_path):
    root = tmp_path / "ck"
    root.mkdir()
    raw_file(root / "a.safetensors", {"x": _u8(0, 1), "y": _u8(1, 1)}, b"xy")
    raw_file(root / "b.safetensors", {"y": _u8(0, 1)}, b"")  # truncated: its tensors are unknown
    raw_file(root / "c.safetensors", {"w": _u8(0, 1), "z": _u8(1, 1)}, b"wz")
    (root / INDEX).write_text(json.dumps({"weight_map": {"x": "a.safetensors", "y": "b.safetensors",
                                                         "w": "c.safetensors", "z": "b.safetensors"}}))
    report = vf.verify(str(root), None, library=False)
    assert report["index"] == [  # one entry per shard holding a tensor the index puts elsewhere
        {"problem": "tensor_in_other_shard", "index": INDEX,
         "detail": 'tensor "y" is in a.safetensors but the index maps it to b.safetensors'},
        {"problem": "tensor_in_other_shard", "index": INDEX,
         "detail": 'tensor "z" is in c.safetensors but the index maps it to b.safetensors'}]
    detail = 'tensor "y" is in a.safetensors but the index maps it to b.safetensors'
    files = files_of(report)
    assert files["a.safetensors"] == ("index_mismatch", detail)
    assert files[INDEX] == ("index_mismatch", detail + " (and 1 more)")


def test_a_tensor_in_two_shards_mapped_to_the_last_one(tmp_path):
    root = tmp_path / "ck"
    root.mkdir()
    raw_file(root / "a.safetensors", {"x": _u8(0, 1), "y": _u8(1, 1)}, b"xy")
    raw_file(root / "b.safetensors", {"x": _u8(0, 1)}, b"x")
    (root / INDEX).write_text(json.dumps({"weight_map": {"y": "a.safetensors", "x": "b.safetensors"}}))
    report = vf.verify(str(root), None, library=False)
    assert [(p["problem"], p["detail"]) for p in report["index"]] == [
        ("tensor_in_two_shards", 'tensor "x" is in both a.safetensors and b.safetensors (the index maps it to '
                                 "b.safetensors)")]


def test_two_indexes_in_order_each_file_named_by_the_first(tmp_path):
    root = tmp_path / "ck"
    root.mkdir()
    raw_file(root / "a.safetensors", {"x": _u8(0, 1)}, b"x")
    for name, ghost in (("b.safetensors.index.json", "gb"), ("a.safetensors.index.json", "ga")):
        (root / name).write_text(json.dumps({"weight_map": {"x": "a.safetensors", ghost: "a.safetensors"}}))
    manifest = {"files": [{"path": "b.safetensors.index.json"}, {"path": "a.safetensors.index.json"},
                          {"path": "a.safetensors"}]}
    report = vf.verify(str(root), manifest, library=False)
    assert [(p["index"], p["detail"]) for p in report["index"]] == [
        ("a.safetensors.index.json", 'the index maps tensor "ga" to a.safetensors but no shard has it'),
        ("b.safetensors.index.json", 'the index maps tensor "gb" to a.safetensors but no shard has it')]
    assert files_of(report)["a.safetensors"] == (
        "index_mismatch", 'the index maps tensor "ga" to a.safetensors but no shard has it')


def test_index_details_added_to_a_file_that_failed_otherwise(tmp_path):
    root = tmp_path / "ck"
    root.mkdir()
    raw_file(root / "a.safetensors", {"x": _u8(0, 1)}, b"x")
    (root / INDEX).write_text(json.dumps({"weight_map": {"x": "a.safetensors", "g": "a.safetensors"}}))
    (root / "config.json").write_text("{}")
    manifest = {"files": [{"path": "a.safetensors", "sha256": "0" * 64}, {"path": INDEX}, {"path": "config.json"}]}
    report = vf.verify(str(root), manifest, use_record=False, library=False)
    assert files_of(report)["a.safetensors"] == (
        "sha256_mismatch", f"sha256 {sha256(root / 'a.safetensors')}, expected {'0' * 64}; the index maps tensor "
                           '"g" to a.safetensors but no shard has it')
    (root / INDEX).write_text(json.dumps({"weight_map": {"x": "a.safetensors"}}))
    report = vf.verify(str(root), None, library=False)  # without content: what was checked
    assert files_of(report) == {"a.safetensors": ("unverified", "header valid; sha256 not checked"),
                                INDEX: ("unverified", "index matches the shards; sha256 not checked"),
                                "config.json": ("unverified", "sha256 not checked")}


# ---------------------------------------------------------------------------------------
# headers: the precise path (taken when the fast path declines) and its messages


def reordered(tensors: dict) -> dict:
    """The same tensors with their keys in another order: valid, but the fast path declines it."""
    return {k: {"data_offsets": v["data_offsets"], "dtype": v["dtype"], "shape": v["shape"]} for k, v in tensors.items()}


def test_the_precise_path_accepts_what_the_fast_path_declines(tmp_path):
    text = json.dumps(reordered({"b": _t(offsets=(4, 8)), "e": _t(shape=(0,), offsets=(8, 8)),
                                 "a": _t(shape=(0,), offsets=(0, 0)), "c": _t()})).encode()
    path = raw_file(tmp_path / "x.safetensors", text, b"12345678")
    _, top = vf._header_json(str(path), path.stat().st_size)
    assert vf._fast_layout(top) is None
    h = vf.read_header(str(path), path.stat().st_size)
    assert (h.length, h.names, h.data_bytes, h.count) == (len(text), ["a", "c", "b", "e"], 8, 4)


@pytest.mark.parametrize("tensors, detail", [
    ({"a": _t(dtype=[1])}, 'tensor "a": unknown dtype [1]'),
    ({"a": _t(shape=(0, 4), offsets=(0, 0)), "b": _t(shape=(1, 0), offsets=(0, 0)), "c": _t(shape=(-1,))},
     'tensor "c": shape [-1] is not a list of non-negative integers'),
    ({"a": _t(offsets=(2**64, 0))}, 'tensor "a": data_offsets [18446744073709551616, 0] is not [begin, end]'),
    ({"a": _t(), "b": _t(offsets=(6, 10))}, 'tensor "b": data_offsets [6, 10] leaves a gap of 2 bytes before it '
                                            "(expected begin 4)"),
    ({"a": _t(), "b": _t(dtype="F32", offsets=(4, 8))}, 'tensor "b": shape [4] x F32 is 16 bytes, data_offsets [4, 8] '
                                                       "span 4"),
    ({"a": _t(shape=(2**61,))}, 'tensor "a": shape [2305843009213693952] x U8 overflows'),
    ({"é": _t(dtype="Q8")}, 'tensor "é": unknown dtype "Q8"'),
])
def test_precise_path_messages(tmp_path, tensors, detail):
    path = raw_file(tmp_path / "x.safetensors", reordered(tensors), b"1234")
    with pytest.raises(vf.Bad) as err:
        vf.read_header(str(path), path.stat().st_size)
    assert (err.value.status, err.value.detail, str(err.value)) == ("header_invalid", detail, detail)


@pytest.mark.parametrize("tensors", [
    {"a": {"dtype": "U8", "shape": {}, "data_offsets": [0, 1]}},  # a shape that is an object, not a list
    {"a": _u8(0, 2), "b": {"dtype": "U8", "shape": [-2], "data_offsets": [2, 0]}},  # negative, but spans agree
    {"a": {"dtype": "U8", "shape": [2**64, 0], "data_offsets": [0, 0]}},  # a dimension of 2**64 times 0
    {"a": {"dtype": "U8", "shape": [2**61], "data_offsets": [0, 2**61]}},  # exactly 2**64 bits
    {**{f"t{i}": {"dtype": "U8", "shape": [2**61 - 1], "data_offsets": [i * (2**61 - 1), (i + 1) * (2**61 - 1)]}
        for i in range(8)}, "z": {"dtype": "U8", "shape": [8], "data_offsets": [8 * (2**61 - 1), 2**64]}},  # ends at 2**64
])
def test_the_fast_path_declines_out_of_range_layouts(tensors):
    top = vf._pairs.decode(json.dumps(tensors))
    assert vf._fast_layout(top) is None


def test_header_length_at_the_limit_is_allowed(tmp_path):
    path = raw_file(tmp_path / "x.safetensors", b"{}", n=100_000_000)
    with pytest.raises(vf.Bad) as err:
        vf.read_header(str(path), path.stat().st_size)
    assert (err.value.status, err.value.detail) == ("truncated", "10 bytes: ends inside its 100000000-byte header")


def test_a_duplicate_key_is_named_even_when_it_is_not_the_first(tmp_path):
    path = raw_file(tmp_path / "x.safetensors", b'{"a": 1, "b": 2, "b": 3}')
    with pytest.raises(vf.Bad) as err:
        vf.read_header(str(path), path.stat().st_size)
    assert err.value.detail == 'header has the key "b" twice'


@pytest.mark.parametrize("name", ["a\u202egnp.exe", "a\x9b31mred", "a\u2028b", "x" * 100_000],
                         ids=["bidi-override", "c1-csi", "line-separator", "huge"])
def test_a_tensor_name_from_the_hub_is_shown_escaped_and_cut_short(tmp_path, name):
    # the header's names are the Hub's bytes: they reach the controller's terminal in the details
    raw_file(tmp_path / "a.safetensors", {name: _t(dtype="Q8")}, b"1234")
    detail = files_of(vf.verify(str(tmp_path), None))["a.safetensors"][1]
    assert detail.startswith('tensor "a') or detail.startswith('tensor "x'), detail[:80]
    assert not any(unsafe(ch) for ch in detail), ascii(detail[:200])
    assert len(detail) < 400 and detail.endswith(': unknown dtype "Q8"'), detail[-80:]
