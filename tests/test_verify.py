"""Checkpoint verification: real generated checkpoints (the lab's Kimi K2.6 lookalike), a
manifest computed here with hashlib, then damage on disk and the exact status and file named.
Fast tier: temporary directories, no hosts."""

from __future__ import annotations

import ctypes
import fnmatch
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noderig import cli
from noderig_lab.checkpoints import ensure_lab_repos
from noderig_lab.hub import is_lfs
from noderig.manifest import DEFAULT_PATTERNS
from noderig.node import script_path
from noderig.node import verify_files as vf
from noderig.verify import verify_dir

KIMI = "moonshotai/Kimi-K2.6"
DRAFT = "z-lab/Kimi-K2.6-DFlash"
INDEX = "model.safetensors.index.json"
S1, S2, S3, S4 = (f"model-0000{i}-of-000004.safetensors" for i in range(1, 5))
SCRIPT = str(script_path("verify_files.py"))


# ---------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="session")
def lab_repos(tmp_path_factory):
    return ensure_lab_repos(tmp_path_factory.mktemp("repos"))


def make_manifest(root: Path) -> dict:
    """What noderig.manifest builds from the Hub, computed from the files with hashlib."""
    files = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or rel.startswith(".") or not any(fnmatch.fnmatch(rel, pat) for pat in DEFAULT_PATTERNS):
            continue
        data = p.read_bytes()
        entry = {"path": rel, "size": len(data)}
        if is_lfs(rel, len(data)):
            entry["sha256"] = hashlib.sha256(data).hexdigest()
        else:
            entry["git_oid"] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        files.append(entry)
    return {"version": 1, "repo": KIMI, "revision": "main", "commit": "0" * 40, "endpoint": "http://hub",
            "files": files, "total_bytes": sum(f["size"] for f in files)}


@pytest.fixture
def ckpt(lab_repos, tmp_path) -> Path:
    """A fresh copy of the Kimi lookalike with its manifest at DIR/.noderig/manifest.json."""
    root = tmp_path / "Kimi-K2.6"
    shutil.copytree(lab_repos[KIMI], root)
    (root / ".noderig").mkdir()
    (root / ".noderig/manifest.json").write_text(json.dumps(make_manifest(root)))
    return root


def run(root: Path, **kw) -> dict:
    return verify_dir(root, **kw)


def by_file(report: dict) -> dict[str, tuple[str, str]]:
    return {f["file"]: (f["status"], f["detail"]) for f in report["files"]}


def bad_files(report: dict) -> dict[str, str]:
    return {f["file"]: f["status"] for f in report["files"] if f["status"] not in ("ok", "unverified")}


def problems(report: dict) -> list[str]:
    return [p["problem"] for p in report["index"]]


def header_len(path: Path) -> int:
    return struct.unpack("<Q", path.read_bytes()[:8])[0]


def read_tensors(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    """name -> (dtype, shape, bytes), parsed by hand (no numpy here)."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


_CTOR = {"BF16": "bfloat16", "F32": "float32", "I32": "int32", "U8": "uint8"}


def write_tensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    """Write a real safetensors file with the safetensors library."""
    import safetensors

    keep, specs = [], {}
    for name, (dtype, shape, data) in tensors.items():
        buf = (ctypes.c_char * max(1, len(data))).from_buffer(bytearray(data or b"\0"))
        keep.append(buf)
        specs[name] = safetensors.TensorSpec(dtype=_CTOR[dtype], shape=shape, data_ptr=ctypes.addressof(buf),
                                             data_len=len(data))
    safetensors.serialize_file(specs, str(path), metadata={"format": "pt"})


def raw_file(path: Path, header: dict | bytes, body: bytes = b"", n: int | None = None) -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if n is None else n) + text + body)
    return path


def edit_index(root: Path, fn, keep_size: bool = True) -> None:
    """Edit the index; padded with spaces to its old size when shorter, so that only the hash
    (not the size) can tell it from the manifest's."""
    path = root / INDEX
    old_size = path.stat().st_size
    index = json.loads(path.read_text())
    fn(index)
    text = json.dumps(index, indent=2)
    if keep_size and len(text) + 1 < old_size:
        text += " " * (old_size - len(text) - 1)
    path.write_text(text + "\n")


def flip(path: Path, offset: int, mask: int = 0x01) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ mask]))


# ---------------------------------------------------------------------------------------
# clean checkpoint, record, rerun


def test_clean_checkpoint_verifies_and_records_every_file(ckpt):
    manifest = json.loads((ckpt / ".noderig/manifest.json").read_text())
    report = run(ckpt)
    assert report["ok"] and report["sha256_checked"] and report["index"] == []
    assert {f["status"] for f in report["files"]} == {"ok"}
    assert [f["file"] for f in report["files"]] == [e["path"] for e in manifest["files"]]
    assert report["hashed_bytes"] == manifest["total_bytes"]
    record = json.loads((ckpt / vf.RECORD_FILE).read_text())
    assert set(record) == {e["path"] for e in manifest["files"]}
    st_ = os.stat(ckpt / S1)
    assert record[S1] == {"size": st_.st_size, "mtime_ns": st_.st_mtime_ns,
                          "digest": next(e["sha256"] for e in manifest["files"] if e["path"] == S1)}
    config = next(e for e in manifest["files"] if e["path"] == "config.json")
    assert record["config.json"]["digest"] == config["git_oid"]
    assert sorted(p.name for p in (ckpt / ".noderig").iterdir()) == ["manifest.json", "verified.json"]


def test_rerun_hashes_nothing_and_leaves_the_record_untouched(ckpt):
    run(ckpt)
    rec = ckpt / vf.RECORD_FILE
    before = (rec.stat().st_mtime_ns, rec.stat().st_ino, rec.read_bytes())
    report = run(ckpt)
    assert report["ok"] and report["hashed_bytes"] == 0 and report["record"] == "unchanged"
    assert {d for _, d in by_file(report).values()} == {"unchanged since verified"}
    assert (rec.stat().st_mtime_ns, rec.stat().st_ino, rec.read_bytes()) == before


def test_touching_a_file_rehashes_only_that_file(ckpt):
    run(ckpt)
    st_ = os.stat(ckpt / S3)
    os.utime(ckpt / S3, ns=(st_.st_atime_ns, st_.st_mtime_ns + 5_000_000_000))
    report = run(ckpt)
    assert report["ok"] and report["hashed_bytes"] == st_.st_size
    assert [f for f, (_, d) in by_file(report).items() if d == "hashed"] == [S3]
    assert json.loads((ckpt / vf.RECORD_FILE).read_text())[S3]["mtime_ns"] == st_.st_mtime_ns + 5_000_000_000


def test_no_record_hashes_everything_and_writes_nothing(ckpt):
    report = run(ckpt, use_record=False)
    assert report["ok"] and report["hashed_bytes"] > 0
    assert not (ckpt / vf.RECORD_FILE).exists()


def test_single_file_repo_without_index(lab_repos, tmp_path):
    root = tmp_path / "draft"
    shutil.copytree(lab_repos[DRAFT], root)
    report = run(root, manifest=None)
    assert report["ok"] and not report["sha256_checked"]
    assert by_file(report)["model.safetensors"] == ("unverified", "header valid; sha256 not checked")


# ---------------------------------------------------------------------------------------
# damage: exact status, the file named, only that file


def test_truncated_shard(ckpt):
    run(ckpt)
    size = (ckpt / S2).stat().st_size
    os.truncate(ckpt / S2, size - 1000)
    report = run(ckpt)
    assert bad_files(report) == {S2: "truncated"}
    assert by_file(report)[S2][1] == f"{size - 1000} bytes, expected {size}"
    assert report["hashed_bytes"] == 0  # nothing else changed; the truncated file is not hashed
    assert S2 not in json.loads((ckpt / vf.RECORD_FILE).read_text())
    # without the manifest the header alone shows it
    report = run(ckpt, find_manifest=False)
    assert bad_files(report) == {S2: "truncated"}
    assert by_file(report)[S2][1].startswith(f"{size - 1000} bytes, the header describes {size}")


def test_truncated_inside_the_header(ckpt):
    os.truncate(ckpt / S1, 100)
    report = run(ckpt, find_manifest=False)
    assert bad_files(report) == {S1: "truncated"}
    assert "ends inside its" in by_file(report)[S1][1]


def test_flipped_byte_breaking_the_header_json(ckpt):
    run(ckpt)
    flip(ckpt / S1, 8 + 1, 0x20)  # the opening quote of the first key: '"' -> '\x02'
    report = run(ckpt)
    assert bad_files(report) == {S1: "header_invalid"}
    assert by_file(report)[S1][1].startswith("header is not valid JSON")
    assert report["hashed_bytes"] == 0


def test_flipped_byte_changing_an_offset_names_the_tensor(ckpt):
    data = (ckpt / S2).read_bytes()
    n = header_len(ckpt / S2)
    header = json.loads(data[8:8 + n])
    name, info = next((k, v) for k, v in header.items() if k != "__metadata__" and v["data_offsets"][0] > 1000)
    end = str(info["data_offsets"][1]).encode()
    pos = data.index(b'"data_offsets":[%d,%s]' % (info["data_offsets"][0], end), data.index(json.dumps(name).encode()))
    digit = pos + len(b'"data_offsets":[%d,' % info["data_offsets"][0])  # first digit of the end offset
    with open(ckpt / S2, "r+b") as f:
        f.seek(digit)
        f.write(b"9" if end[:1] != b"9" else b"8")
    for report in (run(ckpt), run(ckpt, find_manifest=False)):
        assert bad_files(report) == {S2: "header_invalid"}
        detail = by_file(report)[S2][1]
        assert json.dumps(name) in detail, detail


def test_flipped_byte_in_tensor_data_only_sha256_catches(ckpt):
    run(ckpt)
    n = header_len(ckpt / S3)
    flip(ckpt / S3, 8 + n + 4096)
    structure = run(ckpt, structure_only=True)
    assert structure["ok"] and not structure["sha256_checked"]
    assert by_file(structure)[S3][0] == "unverified"
    report = run(ckpt)
    assert bad_files(report) == {S3: "sha256_mismatch"}
    assert report["hashed_bytes"] == (ckpt / S3).stat().st_size  # only the changed file was hashed
    assert "expected" in by_file(report)[S3][1]
    assert S3 not in json.loads((ckpt / vf.RECORD_FILE).read_text())


def test_deleted_shard_is_missing_and_an_index_problem(ckpt):
    (ckpt / S4).unlink()
    for report in (run(ckpt), run(ckpt, find_manifest=False)):
        assert bad_files(report) == {S4: "missing"}
        assert problems(report) == ["shard_missing"]
        assert S4 in report["index"][0]["detail"] and report["index"][0]["index"] == INDEX
        assert not report["ok"]


def test_stale_aria2_file_is_partial_and_never_verified(ckpt):
    (ckpt / f"{S2}.aria2").write_bytes(b"\0" * 64)
    report = run(ckpt)
    assert bad_files(report) == {S2: "partial"}
    total = json.loads((ckpt / ".noderig/manifest.json").read_text())["total_bytes"]
    assert report["hashed_bytes"] == total - (ckpt / S2).stat().st_size  # everything but the partial file
    record = json.loads((ckpt / vf.RECORD_FILE).read_text())
    assert S2 not in record and S1 in record
    # verified before, then a control file appears: no longer ok, and out of the record
    (ckpt / f"{S2}.aria2").unlink()
    assert run(ckpt)["ok"]
    (ckpt / f"{S2}.aria2").write_bytes(b"\0")
    assert bad_files(run(ckpt)) == {S2: "partial"}
    assert S2 not in json.loads((ckpt / vf.RECORD_FILE).read_text())
    assert bad_files(run(ckpt, find_manifest=False)) == {S2: "partial"}


def test_index_missing_a_weight_map_entry(ckpt):
    removed = sorted(n for n, s in json.loads((ckpt / INDEX).read_text())["weight_map"].items() if s == S2)[0]
    edit_index(ckpt, lambda ix: ix["weight_map"].pop(removed))
    report = run(ckpt)  # with the manifest, the hashes say which file is wrong: the index
    assert bad_files(report) == {INDEX: "sha256_mismatch"}
    assert problems(report) == ["tensor_not_in_index"]
    assert json.dumps(removed) in report["index"][0]["detail"] and S2 in report["index"][0]["detail"]
    assert json.dumps(removed) in by_file(report)[INDEX][1]
    structure = run(ckpt, find_manifest=False)  # without it, both sides of the disagreement
    assert bad_files(structure) == {INDEX: "index_mismatch", S2: "index_mismatch"}
    assert json.dumps(removed) in by_file(structure)[S2][1]


def test_index_mapping_a_tensor_to_the_wrong_shard(ckpt):
    moved = sorted(n for n, s in json.loads((ckpt / INDEX).read_text())["weight_map"].items() if s == S1)[0]
    edit_index(ckpt, lambda ix: ix["weight_map"].__setitem__(moved, S3))
    report = run(ckpt, find_manifest=False)
    assert problems(report) == ["tensor_in_other_shard"]
    assert bad_files(report) == {INDEX: "index_mismatch", S1: "index_mismatch", S3: "index_mismatch"}
    assert bad_files(run(ckpt)) == {INDEX: "sha256_mismatch"}


def test_index_naming_a_tensor_no_shard_has(ckpt):
    edit_index(ckpt, lambda ix: ix["weight_map"].__setitem__("language_model.ghost.weight", S2))
    report = run(ckpt, find_manifest=False)
    assert problems(report) == ["tensor_in_no_shard"]
    assert '"language_model.ghost.weight"' in report["index"][0]["detail"]
    assert bad_files(report) == {INDEX: "index_mismatch", S2: "index_mismatch"}


def test_tensor_in_two_shards(ckpt):
    t1 = read_tensors(ckpt / S1)
    dup = sorted(t1)[0]
    t4 = read_tensors(ckpt / S4)
    t4[dup] = t1[dup]
    write_tensors(ckpt / S4, t4)  # a real, valid shard that also holds a tensor of shard 1
    report = run(ckpt)
    assert bad_files(report) == {S4: "size_mismatch"}  # the rewritten shard is larger than the manifest's
    assert problems(report) == ["tensor_in_two_shards", "total_size_mismatch"]  # counted twice, too
    assert json.dumps(dup) in by_file(report)[S4][1]
    detail = report["index"][0]["detail"]
    assert json.dumps(dup) in detail and S1 in detail and S4 in detail
    structure = run(ckpt, find_manifest=False)
    assert bad_files(structure) == {S4: "index_mismatch", INDEX: "index_mismatch"}  # S1 holds it rightly


def test_total_size_off(ckpt):
    edit_index(ckpt, lambda ix: ix["metadata"].__setitem__("total_size", ix["metadata"]["total_size"] + 2))
    report = run(ckpt)
    assert bad_files(report) == {INDEX: "sha256_mismatch"}
    assert problems(report) == ["total_size_mismatch"]
    assert "(-2)" in report["index"][0]["detail"]
    assert bad_files(run(ckpt, find_manifest=False)) == {INDEX: "index_mismatch"}


def test_index_consistent_hub_files_but_index_problem_fails_without_blaming_files(ckpt):
    """If the Hub's own files disagree, every file is ok (refetching cannot help) but the report fails."""
    edit_index(ckpt, lambda ix: ix["metadata"].__setitem__("total_size", 1))
    (ckpt / ".noderig/manifest.json").write_text(json.dumps(make_manifest(ckpt)))
    report = run(ckpt)
    assert not report["ok"] and bad_files(report) == {} and problems(report) == ["total_size_mismatch"]


def test_unparseable_index(ckpt):
    (ckpt / INDEX).write_text('{"weight_map": {')
    report = run(ckpt, find_manifest=False)
    assert bad_files(report) == {INDEX: "index_mismatch"}
    assert by_file(report)[INDEX][1].startswith("not a valid index")


def test_manifest_names_a_missing_small_file_and_an_oversize_one(ckpt):
    (ckpt / "config.json").unlink()
    with open(ckpt / "tokenizer_config.json", "a") as f:
        f.write(" ")
    report = run(ckpt)
    assert bad_files(report) == {"config.json": "missing", "tokenizer_config.json": "size_mismatch"}


# ---------------------------------------------------------------------------------------
# structure checks on hand-made headers: every rule of the loader


def _t(dtype="U8", shape=(4,), offsets=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@pytest.mark.parametrize("header, body, status, words", [
    ({"a": _t()}, b"1234", None, ""),
    ({"a": _t(shape=())}, b"1", "header_invalid", "is 1 bytes"),  # 0-rank: one element
    ({"a": _t(shape=(0,), offsets=(0, 0)), "b": _t()}, b"1234", None, ""),  # empty tensors are fine
    ({"a": _t(dtype="Q8")}, b"1234", "header_invalid", 'unknown dtype "Q8"'),
    ({"a": _t(shape=(2, "2"))}, b"1234", "header_invalid", "not a list of non-negative integers"),
    ({"a": _t(shape=(-4,))}, b"1234", "header_invalid", "non-negative"),
    ({"a": _t(shape=(True,), offsets=(0, 1))}, b"1", "header_invalid", "non-negative"),
    ({"a": _t(offsets=(0, 4, 8))}, b"1234", "header_invalid", "is not [begin, end]"),
    ({"a": {"dtype": "U8", "shape": [4]}}, b"1234", "header_invalid", "needs dtype, shape and data_offsets"),
    ({"a": _t(offsets=(4, 0))}, b"1234", "header_invalid", "end before they begin"),
    ({"a": _t(offsets=(2, 6))}, b"123456", "header_invalid", "gap of 2 bytes"),
    ({"a": _t(), "b": _t(offsets=(2, 6))}, b"123456", "header_invalid", "overlaps"),
    ({"a": _t(dtype="F32")}, b"1234", "header_invalid", "is 16 bytes"),
    ({"a": _t(dtype="F4", shape=(3,), offsets=(0, 2))}, b"12", "header_invalid", "whole number of bytes"),
    ({"a": _t(dtype="F4", shape=(4,), offsets=(0, 2))}, b"12", None, ""),
    ({"a": _t(dtype="F6_E2M3", shape=(4,), offsets=(0, 3))}, b"123", None, ""),
    ({"a": _t(shape=(2**40, 2**40), offsets=(0, 4))}, b"1234", "header_invalid", "overflows"),
    ({"a": _t()}, b"12", "truncated", "the header describes"),
    ({"a": _t()}, b"123456", "size_mismatch", "2 bytes past the last tensor"),
    ({"__metadata__": {"format": 1}, "a": _t()}, b"1234", "header_invalid", "__metadata__"),
    ([1, 2], b"", "header_invalid", "is not a JSON object"),
    (b' {"a": ' + json.dumps(_t()).encode() + b"}", b"1234", None, ""),  # the loader takes leading space too
    (b'{"a": ' + json.dumps(_t()).encode() + b', "a": ' + json.dumps(_t()).encode() + b"}", b"1234",
     "header_invalid", 'key "a" twice'),  # stricter than the 0.8.0 loader (it keeps the last), as the format says
    (b'{"a": {"dtype": "U8", "dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}', b"1234",
     "header_invalid", 'key "dtype" twice'),
    (b'{"a\xff": ' + json.dumps(_t()).encode() + b"}", b"1234", "header_invalid", "not valid UTF-8"),
    (b'{"a": ' + json.dumps(_t()).encode() + b"}   x", b"1234", "header_invalid", "not valid JSON"),
    (b'{"a": ' + json.dumps(_t()).encode() + b"}        ", b"1234", None, ""),  # space padding is fine
])
def test_header_rules(tmp_path, header, body, status, words):
    path = raw_file(tmp_path / "x.safetensors", header, body)
    report = vf.verify(str(tmp_path), None)
    got = by_file(report)["x.safetensors"]
    if status is None:
        assert got[0] == "unverified", got
    else:
        assert got[0] == status and words in got[1], got
    # our own checks reach the same verdict without the library
    assert by_file(vf.verify(str(tmp_path), None, library=False))["x.safetensors"][0] == got[0]
    assert path.exists()


def test_header_length_over_the_limit(tmp_path):
    raw_file(tmp_path / "x.safetensors", b"{}", n=100_000_001)
    got = by_file(vf.verify(str(tmp_path), None))["x.safetensors"]
    assert got == ("header_invalid", "header length 100000001 exceeds the loader's limit of 100000000")
    raw_file(tmp_path / "x.safetensors", b"{}", n=10_000)
    assert by_file(vf.verify(str(tmp_path), None))["x.safetensors"][0] == "truncated"
    (tmp_path / "x.safetensors").write_bytes(b"\1\0")
    assert by_file(vf.verify(str(tmp_path), None))["x.safetensors"] == (
        "truncated", "2 bytes: shorter than the 8-byte header length")


def test_the_library_check_is_used_when_safetensors_is_importable():
    assert vf.library_check().validate is not None
    assert vf.library_check().why.startswith("safetensors 0.8.0 safe_open: header validated")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pos=st.integers(min_value=0, max_value=10_000), bit=st.integers(min_value=0, max_value=7))
def test_any_header_byte_flip_the_library_rejects_we_reject(tmp_path, pos, bit):
    """Differential: a valid 3-tensor file, one bit flipped anywhere in its first 8 + N bytes;
    our checks (alone) and the Rust loader reach the same verdict. (Run exhaustively over all
    1,664 single-bit flips of this header: 1,576 rejected by both, 88 accepted by both.)"""
    path = tmp_path / "f.safetensors"
    write_tensors(path, {"w.0": ("BF16", [3, 5], bytes(30)), "b": ("F32", [7], bytes(28)),
                         "e": ("U8", [0], b"")})
    n = header_len(path)
    flip(path, pos % (8 + n), 1 << bit)
    lib = vf.library_check()
    lib_ok = lib._open(str(path)) is not False
    size = path.stat().st_size
    try:
        vf.read_header(str(path), size)
        ours_ok = True
    except vf.Bad:
        ours_ok = False
    assert ours_ok == lib_ok, lib.last_error if not lib_ok else "we reject what the loader accepts"


# ---------------------------------------------------------------------------------------
# no manifest, the CLI and the node-side script


def test_no_manifest_checks_structure_and_says_sha256_was_not_checked(ckpt, capsys):
    (ckpt / ".noderig/manifest.json").unlink()
    report = run(ckpt)
    assert report["ok"] and report["sha256_checked"] is False and report["manifest"] is None
    assert {s for s, _ in by_file(report).values()} == {"unverified"}
    assert report["hashed_bytes"] == 0 and not (ckpt / vf.RECORD_FILE).exists()
    assert cli.main(["verify", str(ckpt)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "sha256 NOT checked: no manifest" in out


def test_cli_exit_codes_and_json_shape(ckpt, capsys, tmp_path):
    assert cli.main(["verify", str(ckpt), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"ok", "files", "index", "hashed_bytes", "sha256_checked"}
    assert all(set(f) == {"file", "status", "detail"} for f in report["files"])
    assert report["ok"] is True and report["sha256_checked"] is True

    flip(ckpt / S2, (ckpt / S2).stat().st_size - 1)
    assert cli.main(["verify", str(ckpt), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert bad_files(report) == {S2: "sha256_mismatch"}
    assert cli.main(["verify", str(ckpt)]) == 1
    out = capsys.readouterr().out
    assert S2 in out and "sha256_mismatch" in out and "FAILED: 1 of" in " ".join(out.split())

    assert cli.main(["verify", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"noderig verify: {tmp_path / 'nowhere'} does not exist"
    assert cli.main(["verify", str(ckpt), "--manifest", str(tmp_path / "none.json")]) == 2
    assert "no manifest at" in capsys.readouterr().err
    assert cli.main(["verify", str(ckpt), "--jobs", "0", "--json"]) == 2
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": "--jobs must be at least 1"}


def test_cli_manifest_elsewhere_and_structure_only(ckpt, tmp_path, capsys):
    moved = tmp_path / "m.json"
    (ckpt / ".noderig/manifest.json").rename(moved)
    assert cli.main(["verify", str(ckpt), "--manifest", str(moved), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sha256_checked"] is True
    assert cli.main(["verify", str(ckpt), "--manifest", str(moved), "--structure-only"]) == 0
    assert "sha256 NOT checked (--structure-only)" in " ".join(capsys.readouterr().out.split())


def _system_python() -> str:
    for exe in ("/usr/bin/python3", shutil.which("python3")):
        if exe and os.path.exists(exe):
            return exe
    pytest.skip("no python3 outside the venv")


def test_node_script_runs_under_the_bare_system_python(ckpt):
    """The deploy runs it as ``python3 SCRIPT MANIFEST DIR --jobs N``: stdlib only."""
    if "mutmut" in Path(SCRIPT).read_text():
        pytest.skip("a mutmut copy of the script (its trampolines import mutmut); the real one is checked here")
    py = _system_python()
    manifest = str(ckpt / ".noderig/manifest.json")
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONNOUSERSITE": "1"}

    def node(*args):
        res = subprocess.run([py, "-I", SCRIPT, *args], capture_output=True, text=True, env=env, timeout=120)
        return res.returncode, json.loads(res.stdout.strip().splitlines()[-1])

    rc, report = node(manifest, str(ckpt), "--jobs", "2")
    assert rc == 0 and report["ok"] and report["hashed_bytes"] > 0
    rc, report = node(manifest, str(ckpt))
    assert rc == 0 and report["hashed_bytes"] == 0
    os.truncate(ckpt / S1, 1000)
    rc, report = node(manifest, str(ckpt), "--structure-only")
    assert rc == 1 and bad_files(report) == {S1: "truncated"} and report["sha256_checked"] is False
    rc, report = node("-", str(ckpt), "--no-record")
    assert rc == 1 and bad_files(report) == {S1: "truncated"}
    rc, report = node(manifest, str(ckpt / "nope"))
    assert rc == 2 and "is not a directory" in report["error"]
    rc, report = node(manifest)
    assert rc == 2


def test_record_write_is_atomic_and_leaves_no_temporaries(ckpt):
    run(ckpt)
    (ckpt / S1).touch()
    run(ckpt)
    assert sorted(p.name for p in (ckpt / ".noderig").iterdir()) == ["manifest.json", "verified.json"]


def test_a_read_only_directory_still_verifies(ckpt, monkeypatch):
    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(vf, "write_record", refuse)
    report = run(ckpt)
    assert report["ok"] and report["record"] == "not written: Permission denied"


def test_a_corrupt_record_is_ignored_and_replaced(ckpt):
    (ckpt / ".noderig/verified.json").write_text("{not json")
    report = run(ckpt)
    assert report["ok"] and report["hashed_bytes"] > 0
    assert S1 in json.loads((ckpt / vf.RECORD_FILE).read_text())


def test_a_record_for_another_digest_is_not_trusted(ckpt):
    run(ckpt)
    manifest = json.loads((ckpt / ".noderig/manifest.json").read_text())
    entry = next(e for e in manifest["files"] if e["path"] == S1)
    entry["sha256"] = "0" * 64  # a new pin: same file name, other bytes expected
    (ckpt / ".noderig/manifest.json").write_text(json.dumps(manifest))
    report = run(ckpt)
    assert bad_files(report) == {S1: "sha256_mismatch"}
    assert report["hashed_bytes"] == (ckpt / S1).stat().st_size


def test_manifest_with_unsafe_path_is_a_usage_error(ckpt, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"files": [{"path": "../etc/passwd", "size": 1, "sha256": "0" * 64}]}))
    with pytest.raises(vf.UsageError):
        run(ckpt, manifest=bad)


def test_headers_read_in_worker_processes_give_the_same_report(ckpt, monkeypatch):
    """Many shards are read by forked workers; the verdicts must not depend on it."""
    flip(ckpt / S2, 8 + 1, 0x20)
    removed = sorted(n for n, s in json.loads((ckpt / INDEX).read_text())["weight_map"].items() if s == S3)[0]
    edit_index(ckpt, lambda ix: ix["weight_map"].pop(removed))
    serial = run(ckpt, find_manifest=False)
    monkeypatch.setattr(vf, "PARALLEL_MIN_SHARDS", 1)
    parallel = vf.verify(str(ckpt), None, procs=2)
    assert bad_files(parallel) == {S2: "header_invalid", S3: "index_mismatch", INDEX: "index_mismatch"}
    assert (parallel["files"], parallel["index"]) == (serial["files"], serial["index"])


def test_the_node_script_is_python38_syntax():
    import ast

    ast.parse(Path(SCRIPT).read_text(), feature_version=(3, 8))


def test_parallel_hashing_matches_serial(ckpt):
    serial = run(ckpt, jobs=1, use_record=False)
    parallel = run(ckpt, jobs=4, use_record=False)
    assert serial["files"] == parallel["files"] and serial["hashed_bytes"] == parallel["hashed_bytes"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


# ---------------------------------------------------------------------------------------
# walking a path without following links, and the pre-write check, with every reason in full


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "b.txt").write_text("b")
    return root


def test_walk_problem_reasons_in_full(tree):
    assert vf.walk_problem(str(tree), "a/b.txt") is None
    assert vf.walk_problem(str(tree), "a/new/c.txt") is None and vf.walk_problem(str(tree), "new") is None
    assert vf.walk_problem(str(tree), "a/b.txt/c") == ("size_mismatch", "a/b.txt is not a directory")
    (tree / "a" / "l").symlink_to("/etc")
    assert vf.walk_problem(str(tree), "a/l/passwd") == ("symlink", "a/l is a symlink to '/etc' (never followed)")
    assert vf.walk_problem(str(tree), "a/l") == ("symlink", "a/l is a symlink to '/etc' (never followed)")
    assert vf.walk_problem(str(tree), "x" * 300) == ("missing", "x" * 300 + ": cannot lstat: File name too long")
    mount = tree.parent / "mount"
    mount.symlink_to(tree)  # the root itself may be a link (a mount point)
    assert vf.walk_problem(str(mount), "a/b.txt") is None


def test_check_paths_reasons_in_full(tree):
    assert vf.check_paths(str(tree), None) == {"ok": True, "problems": []}
    manifest = {"files": [{"path": "a/b.txt"}, {"path": "a"}, {"path": "../x"}, 3, {"path": "a/b.txt/c"},
                          {"path": "new.txt"}]}
    assert vf.check_paths(str(tree), manifest) == {"ok": False, "problems": [
        {"file": "a", "problem": "it exists and is not a regular file"},
        {"file": "../x", "problem": "it has a '..' component"},
        {"file": "None", "problem": "it is not a string but NoneType"},
        {"file": "a/b.txt/c", "problem": "a/b.txt is not a directory"}]}
    (tree / ".noderig").write_text("not a directory")
    assert vf.check_paths(str(tree), {}) == {"ok": False, "problems": [
        {"file": ".noderig", "problem": ".noderig is not a directory"},
        {"file": ".noderig/manifest.json", "problem": ".noderig is not a directory"},
        {"file": ".noderig/verified.json", "problem": ".noderig is not a directory"}]}
    (tree / ".noderig").unlink()
    (tree / ".noderig").mkdir()
    (tree / ".noderig" / "verified.json").symlink_to("/etc/passwd")
    assert vf.check_paths(str(tree), None) == {"ok": False, "problems": [
        {"file": ".noderig/verified.json",
         "problem": ".noderig/verified.json is a symlink to '/etc/passwd' (never followed)"}]}


def _u8(begin: int, n: int) -> dict:
    return {"dtype": "U8", "shape": [n], "data_offsets": [begin, begin + n]}


def test_a_small_index_every_disagreement_in_full(tmp_path):
    root = tmp_path / "m"
    (root / "sub").mkdir(parents=True)
    raw_file(root / "sub" / "a.safetensors", {"x": _u8(0, 2), "y": _u8(2, 1)}, b"xxy")
    raw_file(root / "sub" / "b.safetensors", {"z": _u8(0, 1), "extra": _u8(1, 1)}, b"ze")
    (root / "sub" / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 10},
        "weight_map": {"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors", "ghost": "b.safetensors",
                       "gone": "c.safetensors"}}))
    report = vf.verify(str(root), None, library=False)
    ix = "sub/model.safetensors.index.json"
    assert report["index"] == [
        {"problem": "shard_missing", "detail": "sub/c.safetensors is named by the index (1 tensors) but is not on disk",
         "index": ix},
        {"problem": "tensor_not_in_index", "detail": 'tensor "extra" in sub/b.safetensors is not in the index\'s '
                                                     "weight_map", "index": ix},
        {"problem": "tensor_in_no_shard", "detail": 'the index maps tensor "ghost" to sub/b.safetensors but its '
                                                    "header lacks it", "index": ix},
        {"problem": "tensor_in_other_shard", "detail": 'the index maps tensor "y" to sub/b.safetensors but it is in '
                                                       "sub/a.safetensors", "index": ix}]
    assert {f["file"]: (f["status"], f["detail"]) for f in report["files"]} == {
        "sub/a.safetensors": ("index_mismatch", 'the index maps tensor "y" to sub/b.safetensors but it is in '
                                                "sub/a.safetensors"),
        "sub/b.safetensors": ("index_mismatch", 'tensor "extra" in sub/b.safetensors is not in the index\'s '
                                                "weight_map (and 2 more)"),
        ix: ("index_mismatch", 'tensor "extra" in sub/b.safetensors is not in the index\'s weight_map (and 2 more)'),
        "sub/c.safetensors": ("missing", "not on disk")}
    assert report["ok"] is False and report["sha256_checked"] is False and report["hashed_bytes"] == 0
    # complete, with the total off and a tensor in two shards
    raw_file(root / "sub" / "c.safetensors", {"x": _u8(0, 2), "gone": _u8(2, 1)}, b"xxg")
    (root / "sub" / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 10},
        "weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors", "extra": "b.safetensors",
                       "gone": "c.safetensors", "ghost": "b.safetensors"}}))
    report = vf.verify(str(root), None, library=False)
    assert report["index"] == [
        {"problem": "tensor_in_two_shards", "detail": 'tensor "x" is in both sub/a.safetensors and '
                                                      "sub/c.safetensors (the index maps it to a.safetensors)",
         "index": ix},
        {"problem": "tensor_in_no_shard", "detail": 'the index maps tensor "ghost" to sub/b.safetensors but no shard '
                                                    "has it", "index": ix},
        {"problem": "total_size_mismatch", "detail": "metadata.total_size is 10, the shards' tensors add up to 8 (-2)",
         "index": ix}]
    details = {f["file"]: f["detail"] for f in report["files"]}
    assert details["sub/a.safetensors"] == "header valid; sha256 not checked"
    assert details["sub/c.safetensors"].startswith('tensor "x" is in both')
    assert details[ix].endswith("(and 2 more)")


@pytest.mark.parametrize("header, body, status, detail", [
    ({"a": _t(dtype="Q8")}, b"1234", "header_invalid", 'tensor "a": unknown dtype "Q8"'),
    ({"a": _t(dtype=5)}, b"1234", "header_invalid", 'tensor "a": unknown dtype 5'),
    ({"a": _t(shape=(-4,))}, b"1234", "header_invalid",
     'tensor "a": shape [-4] is not a list of non-negative integers'),
    ({"a": _t(shape=(2**64,))}, b"1234", "header_invalid",
     'tensor "a": shape [18446744073709551616] is not a list of non-negative integers'),
    ({"a": {"dtype": "U8", "shape": 4, "data_offsets": [0, 4]}}, b"1234", "header_invalid",
     'tensor "a": shape 4 is not a list of non-negative integers'),
    ({"a": _t(offsets=(0, 4, 8))}, b"1234", "header_invalid", 'tensor "a": data_offsets [0, 4, 8] is not [begin, end]'),
    ({"a": {"dtype": "U8", "shape": [4], "data_offsets": "0-4"}}, b"1234", "header_invalid",
     'tensor "a": data_offsets "0-4" is not [begin, end]'),
    ({"a": _t(offsets=(-1, 3))}, b"1234", "header_invalid", 'tensor "a": data_offsets [-1, 3] is not [begin, end]'),
    ({"a": _t(offsets=(0, 2**64))}, b"1234", "header_invalid",
     'tensor "a": data_offsets [0, 18446744073709551616] is not [begin, end]'),
    ({"a": _t(offsets=(0, 4.0))}, b"1234", "header_invalid", 'tensor "a": data_offsets [0, 4.0] is not [begin, end]'),
    ({"a": {"dtype": "U8", "shape": [4]}}, b"1234", "header_invalid",
     'tensor "a": needs dtype, shape and data_offsets'),
    ({"a": 1}, b"", "header_invalid", 'tensor "a" is not a JSON object'),
    ({"__metadata__": [1]}, b"", "header_invalid", "__metadata__ is not a JSON object"),
    ({"__metadata__": {"format": 1}}, b"", "header_invalid", "__metadata__ is not a map of strings to strings"),
    ({"a": _t(offsets=(4, 0))}, b"1234", "header_invalid", 'tensor "a": data_offsets [4, 0] end before they begin'),
    ({"a": _t(offsets=(2, 6))}, b"123456", "header_invalid",
     'tensor "a": data_offsets [2, 6] leaves a gap of 2 bytes before it (expected begin 0)'),
    ({"a": _t(), "b": _t(offsets=(2, 6))}, b"123456", "header_invalid",
     'tensor "b": data_offsets [2, 6] overlaps the tensor before it (expected begin 4)'),
    ({"a": _t(dtype="F32")}, b"1234", "header_invalid",
     'tensor "a": shape [4] x F32 is 16 bytes, data_offsets [0, 4] span 4'),
    ({"a": _t(dtype="F4", shape=(3,), offsets=(0, 2))}, b"12", "header_invalid",
     'tensor "a": shape [3] x F4 is not a whole number of bytes'),
    ({"a": _t(shape=(2**40, 2**40), offsets=(0, 4))}, b"1234", "header_invalid",
     'tensor "a": shape [1099511627776, 1099511627776] x U8 overflows'),
    ([1, 2], b"", "header_invalid", "header is not a JSON object"),
    (b'{"__metadata__": {"f": "a", "f": "b"}}', b"", "header_invalid", '__metadata__ has the key "f" twice'),
    (b'{"a": {"dtype": "U8", "dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}', b"1234",
     "header_invalid", 'tensor "a" has the key "dtype" twice'),
    (b'{"a": 1, "a": 2}', b"", "header_invalid", 'header has the key "a" twice'),
    (b'{"a\xff": 1}', b"", "header_invalid", "header is not valid UTF-8 (byte 11)"),
    (b'{"a": 1', b"", "header_invalid", "header is not valid JSON: Expecting ',' delimiter: line 1 column 8 (char 7)"),
])
def test_header_rules_in_full_without_the_library(tmp_path, header, body, status, detail):
    path = raw_file(tmp_path / "x.safetensors", header, body)
    with pytest.raises(vf.Bad) as err:
        vf.read_header(str(path), path.stat().st_size)
    assert (err.value.status, err.value.detail) == (status, detail)


def test_header_sizes_in_full(tmp_path):
    text = json.dumps({"a": _t(), "__metadata__": {"format": "pt"}}).encode()
    n = len(text)
    path = raw_file(tmp_path / "x.safetensors", text, b"1234")
    header = vf.read_header(str(path), 8 + n + 4)
    assert (header.length, header.names, header.data_bytes, header.count) == (n, ["a"], 4, 1)
    for size, status, detail in [
        (8 + n + 3, "truncated", f"{8 + n + 3} bytes, the header describes {8 + n + 4} (8 + {n} + 4)"),
        (8 + n + 6, "size_mismatch", f"{8 + n + 6} bytes, the header describes {8 + n + 4}: 2 bytes past the last tensor"),
        (8 + n - 1, "truncated", f"{8 + n - 1} bytes: ends inside its {n}-byte header"),
    ]:
        with pytest.raises(vf.Bad) as err:
            vf.read_header(str(path), size)
        assert (err.value.status, err.value.detail) == (status, detail)
    path.write_bytes(path.read_bytes()[:8 + n - 2])  # shorter on disk than the size it was listed with
    with pytest.raises(vf.Bad) as err:
        vf.read_header(str(path), 8 + n + 4)
    assert (err.value.status, err.value.detail) == ("truncated", f"{8 + n - 2} bytes readable: ends inside its {n}-byte header")
    path = raw_file(tmp_path / "e.safetensors", {}, b"")
    assert vf.read_header(str(path), 10).names == []
    path = raw_file(tmp_path / "z.safetensors", {"b": _t(offsets=(4, 8)), "a": _t(shape=(), offsets=(8, 9)),
                                                 "c": _t()}, b"123456789")
    h = vf.read_header(str(path), path.stat().st_size)
    assert (h.names, h.data_bytes) == (["c", "b", "a"], 9)


def test_the_node_scripts_main_in_process(ckpt, tmp_path, capsys):
    """main() as the deploy calls it (here in-process; the subprocess form is tested above)."""
    manifest = str(ckpt / ".noderig/manifest.json")

    def main(*args):
        rc = vf.main(list(args))
        out, err = capsys.readouterr()
        return rc, json.loads(out.strip().splitlines()[-1]), err

    rc, report, _ = main(manifest, str(ckpt), "--jobs", "2")
    assert rc == 0 and report["ok"] and report["sha256_checked"] and report["record"] == "written"
    rc, report, _ = main(manifest, str(ckpt), "--no-record")
    assert rc == 0 and report["record"] == "not used" and report["hashed_bytes"] > 0
    rc, report, _ = main("-", str(ckpt), "--structure-only")
    assert rc == 0 and report["sha256_checked"] is False
    rc, report, _ = main(manifest, str(ckpt), "--check-paths")
    assert (rc, report) == (0, {"ok": True, "problems": []})
    os.truncate(ckpt / S1, 1000)
    rc, report, _ = main(manifest, str(ckpt), "--structure-only")
    assert rc == 1 and bad_files(report) == {S1: "truncated"}
    (ckpt / "sub").mkdir()
    (ckpt / "sub" / "x").symlink_to("/etc")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"files": [{"path": "sub/x/passwd", "size": 1}]}))
    rc, report, _ = main(str(bad), str(ckpt), "--check-paths")
    assert (rc, report) == (1, {"ok": False, "problems": [
        {"file": "sub/x/passwd", "problem": "sub/x is a symlink to '/etc' (never followed)"}]})
    usage = {"ok": False, "files": [], "index": [], "hashed_bytes": 0, "sha256_checked": False}
    for args, error in [
        ((manifest, str(ckpt), "--jobs", "0"), "--jobs must be at least 1"),
        ((str(tmp_path / "none.json"), str(ckpt)), f"no manifest at {tmp_path / 'none.json'}"),
        ((str(tmp_path), str(ckpt)), f"cannot read the manifest {tmp_path}: [Errno 21] Is a directory: '{tmp_path}'"),
        ((manifest, str(tmp_path / "nope")), f"{tmp_path / 'nope'} is not a directory"),
        ((manifest,), "the following arguments are required: dir"),
    ]:
        rc, report, err = main(*args)
        assert (rc, report) == (2, {**usage, "error": error})
        assert err == f"verify_files: {error}\n"
    bad.write_text("[]")
    rc, report, _ = main(str(bad), str(ckpt))
    assert (rc, report["error"]) == (2, f"{bad} is not a noderig manifest (no list of files)")
    bad.write_text("{")
    rc, report, _ = main(str(bad), str(ckpt))
    assert rc == 2 and report["error"].startswith(f"cannot read the manifest {bad}: Expecting property name")


@pytest.mark.parametrize("text, detail", [
    ("[]", "not a valid index: not a JSON object"),
    ('{"weight_map": {}, "weight_map": {}}', 'not a valid index: it has the key "weight_map" twice'),
    ('{"weight_map": {"a": "x", "a": "x"}}', 'not a valid index: weight_map has the key "a" twice'),
    ('{"weight_map": {}, "metadata": {"total_size": 1, "total_size": 2}}',
     'not a valid index: metadata has the key "total_size" twice'),
    ('{"weight_map": {}, "metadata": {"total_size": -1}}', "not a valid index: metadata.total_size -1 is not a byte count"),
    ('{"weight_map": {}, "metadata": {"total_size": "9"}}', 'not a valid index: metadata.total_size "9" is not a byte count'),
    ('{"weight_map": {"a": 1}}', "not a valid index: no weight_map of tensor name to shard file"),
    ('{"metadata": {}}', "not a valid index: no weight_map of tensor name to shard file"),
])
def test_index_rules_in_full(tmp_path, text, detail):
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(text)
    with pytest.raises(vf.Bad) as err:
        vf._read_index(str(path))
    assert (err.value.status, err.value.detail) == ("index_mismatch", detail)


def test_index_reads_its_total_or_none(tmp_path):
    path = tmp_path / "i.json"
    path.write_text('{"weight_map": {"a": "s"}, "metadata": {"total_size": 0}}')
    assert vf._read_index(str(path)) == {"weight_map": {"a": "s"}, "total_size": 0}
    path.write_text('{"weight_map": {}, "metadata": {"format": "pt"}}')
    assert vf._read_index(str(path)) == {"weight_map": {}, "total_size": None}


def test_discover_lists_visible_files_control_files_and_linked_directories(tmp_path):
    root = tmp_path / "r"
    for rel in ("a/f", "d/e/g.txt", ".hidden/x", "a/.h", "sub/b.safetensors.aria2", "c.safetensors",
                "c.safetensors.aria2"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / "linkdir").symlink_to(root / "d")
    (root / ".lnk").symlink_to(root / "d")
    assert vf._discover(str(root)) == ["a/f", "c.safetensors", "d/e/g.txt", "linkdir", "sub/b.safetensors"]


def test_presence_details_in_full(tmp_path):
    root = tmp_path / "r"
    (root / "dir.json").mkdir(parents=True)
    (root / "p.json").write_text("{}")
    (root / "p.json.aria2").write_text("")
    (root / "short.json").write_text("{}")
    (root / "long.json").write_text("{}")
    manifest = {"files": [{"path": "dir.json"}, {"path": "p.json"}, {"path": "gone.json"},
                          {"path": "short.json", "size": 5}, {"path": "long.json", "size": 1}]}
    report = vf.verify(str(root), manifest, library=False)
    assert {f["file"]: (f["status"], f["detail"]) for f in report["files"]} == {
        "dir.json": ("size_mismatch", "not a regular file"),
        "p.json": ("partial", "aria2 control file (.aria2) present: download unfinished"),
        "gone.json": ("missing", "not on disk"),
        "short.json": ("truncated", "2 bytes, expected 5"),
        "long.json": ("size_mismatch", "2 bytes, expected 1")}


def test_repeated_index_problems_are_counted_and_unsafe_shards_named(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    raw_file(root / "a.safetensors", {"x": _u8(0, 1)}, b"x")
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "x": "a.safetensors", "g1": "a.safetensors", "g2": "a.safetensors", "u": "../up.safetensors"}}))
    report = vf.verify(str(root), None, library=False)
    ix = "model.safetensors.index.json"
    assert report["index"] == [
        {"problem": "index_invalid", "detail": 'the index names an unsafe shard path "../up.safetensors"', "index": ix},
        {"problem": "tensor_in_no_shard", "detail": 'the index maps tensor "g1" to a.safetensors but its header lacks '
                                                    "it (and 1 more like it)", "index": ix}]
    details = {f["file"]: f["detail"] for f in report["files"]}
    assert details[ix] == 'the index names an unsafe shard path "../up.safetensors" (and 2 more)'
    assert details["a.safetensors"] == 'the index maps tensor "g1" to a.safetensors but its header lacks it (and 1 more)'


def test_the_library_probe_says_what_it_found(monkeypatch, tmp_path):
    import importlib.util
    import types
    numpy = " (numpy absent: validation only)" if importlib.util.find_spec("numpy") is None else ", tensor names compared"
    lib = vf.LibraryCheck()
    assert lib.why == "safetensors 0.8.0 safe_open: header validated by the library too" + numpy
    assert lib.validate is not None
    lib._open = lambda path: ["x"]
    assert lib._validate("p", vf.Header(1, ["y"], 0)) == ("safetensors reads other tensor names from the header "
                                                          "than these checks do")
    assert lib._validate("p", vf.Header(1, ["x"], 0)) is None
    monkeypatch.setitem(sys.modules, "safetensors", types.ModuleType("safetensors"))
    fake = vf.LibraryCheck()
    assert fake.validate is None
    assert fake.why == "not used: probing safetensors ? failed: module 'safetensors' has no attribute 'SafetensorError'"


def test_an_unreadable_shard_and_an_unusable_library(tmp_path, monkeypatch):
    root = tmp_path / "r"
    root.mkdir()
    raw_file(root / "a.safetensors", {"x": _u8(0, 1)}, b"x")
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "a.safetensors"}}))
    unusable = vf.LibraryCheck()
    unusable.validate, unusable.why = None, "not used: test"
    monkeypatch.setattr(vf, "_library", unusable)
    report = vf.verify(str(root), None, library=True)
    assert report["ok"] and report["library_check"] == "not used: test"

    def broken(path, size):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(vf, "read_header", broken)
    report = vf.verify(str(root), None, library=False)
    files = {f["file"]: (f["status"], f["detail"]) for f in report["files"]}
    assert files["a.safetensors"] == ("missing", "cannot read: Input/output error")
    assert [p["problem"] for p in report["index"]] == ["shard_missing"]
