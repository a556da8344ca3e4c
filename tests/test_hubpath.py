"""Paths from the Hub are data, never places (fast tier): the one path check (property-based),
the manifest builder's decisions on hostile listings, a manifest edited on the node, the
node-side check of symlinks, ``noderig verify`` on symlinks, aria2 kept quiet about URLs and
noderig's own redaction. Real parts: the lab Hub on 127.0.0.1, huggingface_hub, aria2c."""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import ModelInfo
from hypothesis import example, given
from hypothesis import strategies as st

from noderig import aria2, cli
from noderig.errors import NoderigError, redact
from noderig_lab.checkpoints import KIMI_REPO, MiB, ensure_lab_repos
from noderig_lab.hub import HOSTILE_HUGE_FILES, HOSTILE_MARKER, HOSTILE_PATHS, start_hub
from noderig.manifest import DEFAULT_PATTERNS, RepoPin, build_manifest, manifest_from_listing, manifest_problem
from noderig.node import script_path
from noderig.node import verify_files as vf
from noderig.node.hubpath import MAX_FILES, describe, inside, matches, path_problem

ENDPOINT = "https://hub.example"
DEST = "/models/Kimi-K2.6"
SHA = "a" * 40
ARIA2C = shutil.which("aria2c")

# ---------------------------------------------------------------------------------------
# the path check, property-based

FORBIDDEN_CHARS = [chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]] + [
    "\u2028", "\u2029", "\u202e", "\u200b", "\ufeff", "\ud800"]
component = st.text(st.characters(blacklist_characters="/\\", blacklist_categories=("Cs",)), min_size=1, max_size=12)
good_component = component.filter(lambda c: c not in (".", "..") and path_problem(c) is None)
any_path = st.lists(st.one_of(component, st.sampled_from([".", "..", "", "a", ".noderig"])), min_size=1,
                    max_size=6).map("/".join)


@given(any_path | st.text(max_size=40))
@example("a/../../x.py")
@example("sub/x.py")
def test_every_accepted_path_joined_to_a_dest_normalises_inside_it(path):
    if path_problem(path) is not None:
        return
    full = posixpath.normpath(posixpath.join(DEST, path))
    assert full.startswith(DEST + "/") and full != DEST
    assert ".." not in path.split("/") and not path.startswith("/") and "\\" not in path
    assert not any(ch in path for ch in FORBIDDEN_CHARS)
    assert inside(DEST, path)


@given(st.lists(good_component, max_size=3), st.lists(good_component, max_size=3),
       st.integers(min_value=1, max_value=4))
def test_every_climbing_path_is_rejected(before, after, ups):
    path = "/".join([*before, *[".."] * ups, *after])
    assert path_problem(path) is not None


@given(st.lists(good_component, min_size=1, max_size=4))
def test_every_absolute_path_is_rejected(parts):
    assert path_problem("/" + "/".join(parts)) == "it is absolute"


@given(st.lists(good_component, min_size=1, max_size=4), st.sampled_from(FORBIDDEN_CHARS), st.data())
def test_every_path_with_a_control_character_is_rejected(parts, char, data):
    path = "/".join(parts)
    at = data.draw(st.integers(min_value=0, max_value=len(path)))
    bad = path[:at] + char + path[at:]
    assert path_problem(bad) is not None
    assert "\n" not in describe(bad) and "\x00" not in describe(bad), "shown escaped"


@given(st.lists(good_component, min_size=1, max_size=4), st.data())
def test_every_path_with_a_backslash_or_an_empty_component_is_rejected(parts, data):
    path = "/".join(parts)
    at = data.draw(st.integers(min_value=0, max_value=len(path)))
    assert path_problem(path[:at] + "\\" + path[at:]) is not None
    assert path_problem(path + "/") is not None and path_problem(path.replace("/", "//", 1) + "//x") is not None


def test_the_path_classes_each_get_their_reason():
    assert path_problem("a/b.safetensors") is None and path_problem("é/config.json") is None
    assert path_problem("") == "it is empty"
    assert path_problem("a//b") == "it has an empty component"
    assert path_problem("a/./b") == "it has a '.' component"
    assert path_problem("x" * 256) == "a component is longer than 255 bytes"
    assert path_problem("/".join(["x" * 200] * 6)).startswith("it is 1205 bytes long")
    assert path_problem(".noderig/verified.json").startswith("it is inside noderig's state directory")
    assert path_problem("model.safetensors.aria2").startswith("it ends in .aria2")
    assert path_problem(None) == "it is not a string but NoneType"
    assert path_problem("a\x00b") == "it holds a control character (U+0000)"


@given(st.lists(good_component, min_size=1, max_size=4), st.sampled_from(DEFAULT_PATTERNS))
def test_patterns_match_per_component_and_never_an_unsafe_path(parts, pattern):
    path = "/".join(parts)
    assert matches(path, pattern) == (re.fullmatch(r"[^/]*" + re.escape(pattern[1:]), parts[-1]) is not None)
    assert not matches(f"{path}/../../x.py", "*.py") and not matches(f"/{path}.py", "*.py")


def test_a_pattern_with_a_slash_matches_component_by_component():
    assert matches("sub/x.py", "*.py") and matches("x.py", "*.py"), "nested files still match, as before"
    assert matches("sub/x.py", "sub/*.py") and not matches("sub/deeper/x.py", "sub/*.py")
    assert not matches("a/../../x.py", "*.py")


# ---------------------------------------------------------------------------------------
# the manifest builder, decisions on hostile listings

def sibling(name, size=10, lfs=False) -> dict:
    """One sibling as the Hub's model_info JSON has it."""
    data = {"rfilename": name, "size": size, "blobId": "b" * 40}
    if lfs:
        data["lfs"] = {"size": size, "sha256": "c" * 64, "pointerSize": 130}
    return data


def listing(*names, sha=SHA, extra=()) -> ModelInfo:
    """huggingface_hub's own parse of a model_info answer: two honest files and ``names``."""
    honest = [sibling("config.json"), sibling("model-00001-of-000001.safetensors", 1000, lfs=True)]
    return ModelInfo(id=KIMI_REPO, sha=sha, gated=False, siblings=honest + [sibling(n) for n in names] + list(extra))


PIN = RepoPin(KIMI_REPO, "main", ENDPOINT, tuple(DEFAULT_PATTERNS))
HOSTILE = [(kind, name) for kind, names in HOSTILE_PATHS.items() for name in names]


@pytest.mark.parametrize("kind,name", HOSTILE, ids=[f"{k}-{i}" for i, (k, _) in enumerate(HOSTILE)])
def test_a_hostile_sibling_refuses_the_listing_in_one_sentence_naming_path_and_hub(kind, name):
    with pytest.raises(NoderigError) as err:
        manifest_from_listing(PIN, listing(name))
    message = str(err.value)
    assert describe(name) in message and ENDPOINT in message and KIMI_REPO in message
    assert "\n" not in message and "nothing was written on the node" in message


def test_a_hostile_name_no_pattern_selects_still_refuses_the_listing():
    with pytest.raises(NoderigError, match=r"the unsafe path '\.\./\.\./etc/x\.bin'"):
        manifest_from_listing(PIN, listing("../../etc/x.bin"))


def test_a_listing_of_more_files_than_a_checkpoint_may_have_is_refused_by_count():
    info = ModelInfo(id=KIMI_REPO, sha=SHA, gated=False, siblings=[sibling(f"s/{i}.json") for i in range(MAX_FILES + 1)])
    with pytest.raises(NoderigError, match=re.escape(
            f"the Hub at {ENDPOINT} lists {MAX_FILES + 1} files (a checkpoint may have at most {MAX_FILES}) in "
            f"moonshotai/Kimi-K2.6@main; the listing was refused and nothing was written on the node")):
        manifest_from_listing(PIN, info)


@pytest.mark.parametrize("names,problem", [
    (["a.py", "a.py"], "'a.py' (it is listed twice)"),
    (["a.py", "a.py/b.py"], "'a.py' both as a file and as the directory of 'a.py/b.py'"),
    # the directory would stand where aria2 keeps a.py's control file: a.py would read as partial for ever
    (["a.py", "a.py.aria2/b.py"], "'a.py.aria2' both as the directory of 'a.py.aria2/b.py' and as the aria2 "
                                  "control file of 'a.py'"),
])
def test_names_that_cannot_all_be_files_are_refused(names, problem):
    with pytest.raises(NoderigError, match=re.escape(problem)):
        manifest_from_listing(PIN, listing(*names))


@pytest.mark.parametrize("entry,problem", [
    ({"rfilename": "x.json", "size": -1, "blobId": "b" * 40}, "the size -1"),
    ({"rfilename": "x.json", "size": 1, "blobId": "$(reboot)"}, "the git_oid '$(reboot)'"),
    ({"rfilename": "x.safetensors", "size": 1, "blobId": "b" * 40,
      "lfs": {"size": 1, "sha256": "zz", "pointerSize": 1}}, "the sha256 'zz'"),
])
def test_a_selected_entry_with_a_bad_size_or_digest_is_refused(entry, problem):
    info = listing(extra=[entry])
    with pytest.raises(NoderigError, match=re.escape(problem)):
        manifest_from_listing(PIN, info)


def test_a_commit_that_is_not_a_sha_is_refused():
    with pytest.raises(NoderigError, match="answers '../x' as the commit"):
        manifest_from_listing(PIN, listing(sha="../x"))


def test_an_honest_listing_with_nested_files_builds_as_before():
    m = manifest_from_listing(PIN, listing("sub/modeling.py", "README.md", "sub/deeper/tokenizer.json"))
    assert [f["path"] for f in m["files"]] == ["config.json", "model-00001-of-000001.safetensors",
                                               "sub/deeper/tokenizer.json", "sub/modeling.py"]
    assert manifest_problem(m) is None


def test_a_manifest_edited_to_name_a_climbing_path_is_refused():
    m = manifest_from_listing(PIN, listing())
    m["files"].append({"path": "../../../usr/lib/python3/dist-packages/sitecustomize.py", "size": 1,
                       "git_oid": "d" * 40})
    assert manifest_problem(m) == ("it lists the unsafe path '../../../usr/lib/python3/dist-packages/sitecustomize.py' "
                                   "(it has a '..' component)")
    assert manifest_problem({"files": "x"}) == "it has no list of files"


def test_the_node_manifest_is_checked_when_it_would_be_used_instead_of_the_hub():
    from operations.checkpoint import manifest_for

    m = manifest_from_listing(RepoPin(KIMI_REPO, SHA, ENDPOINT, tuple(DEFAULT_PATTERNS)), listing())
    m["files"][0]["path"] = "/etc/cron.d/x.json"
    pin = RepoPin(KIMI_REPO, SHA, ENDPOINT, tuple(DEFAULT_PATTERNS))
    with pytest.raises(NoderigError, match=r"the manifest \.noderig/manifest\.json on b300 in /models/K was edited: "
                                           r"it lists the unsafe path '/etc/cron\.d/x\.json' \(it is absolute\)"):
        manifest_for(pin, None, m, "b300 in /models/K")


# ---------------------------------------------------------------------------------------
# the lab Hub's hostile mode, through the real huggingface_hub client


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    repos = ensure_lab_repos(tmp_path_factory.mktemp("checkpoints"), shard_bytes=1 * MiB, kimi_bytes=2 * MiB,
                             draft_bytes=1 * MiB)
    h = start_hub(repos[KIMI_REPO].parents[1])
    yield h
    h.stop()


def set_hostile(hub, kinds):
    hub.reset()
    hub.set_faults({"hostile_listing": {"repo": KIMI_REPO, "kinds": kinds}})


@pytest.mark.parametrize("kind", sorted(HOSTILE_PATHS))
def test_the_lab_hub_lists_and_serves_each_hostile_class_and_the_builder_refuses_it(hub, kind):
    set_hostile(hub, [kind])
    api = HfApi(endpoint=hub.url, token=False)
    names = {s.rfilename for s in api.model_info(KIMI_REPO, files_metadata=True).siblings}
    tree = {f.path for f in api.list_repo_tree(KIMI_REPO)}
    assert set(HOSTILE_PATHS[kind]) <= names and set(HOSTILE_PATHS[kind]) <= tree
    with pytest.raises(NoderigError) as err:
        build_manifest(RepoPin(KIMI_REPO, "main", hub.url, tuple(DEFAULT_PATTERNS)), None)
    assert describe(HOSTILE_PATHS[kind][0]) in str(err.value) and hub.url in str(err.value)
    # what a downloader that trusted the listing would have written: the payload, served whole
    entry = hub.hostile_files(KIMI_REPO)[HOSTILE_PATHS[kind][0]]
    assert HOSTILE_MARKER in entry.abspath.read_text()
    hub.reset()
    assert manifest_problem(build_manifest(RepoPin(KIMI_REPO, "main", hub.url, tuple(DEFAULT_PATTERNS)), None)) is None


def test_the_lab_hubs_huge_listing_is_refused_by_count(hub):
    set_hostile(hub, ["huge"])
    try:
        with pytest.raises(NoderigError, match=re.escape(f"files (a checkpoint may have at most {MAX_FILES})")):
            build_manifest(RepoPin(KIMI_REPO, "main", hub.url, tuple(DEFAULT_PATTERNS)), None)
    finally:
        hub.reset()
    assert HOSTILE_HUGE_FILES > MAX_FILES


# ---------------------------------------------------------------------------------------
# the node-side check and `noderig verify`: symlinks are never followed


@pytest.fixture
def ckpt(tmp_path):
    root = tmp_path / "model"
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_text("{}")
    (root / "sub" / "x.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_text("precious = True\n")
    return root, outside


def manifest_of(*paths):
    return {"files": [{"path": p, "size": 1, "git_oid": "0" * 40} for p in paths]}


def node_check(root, manifest):
    return {p["file"]: p["problem"] for p in vf.check_paths(str(root), manifest)["problems"]}


def test_the_node_check_passes_a_plain_tree_and_a_missing_one(ckpt, tmp_path):
    root, _ = ckpt
    assert vf.check_paths(str(root), manifest_of("config.json", "sub/x.py", "new/dir/y.py")) == {"ok": True, "problems": []}
    assert vf.check_paths(str(tmp_path / "nothing-yet"), None)["ok"]


@pytest.mark.parametrize("link,target,listed", [
    ("sub", "OUTSIDE", "sub/x.py"),  # a directory on the way
    ("config.json", "OUTSIDE/victim.py", "config.json"),  # the file itself
    ("config.json.aria2", "OUTSIDE/victim.py", "config.json"),  # aria2's control file beside it
    (".noderig", "OUTSIDE", None),  # the state directory the manifest and record go to
    ("sub", "sub2", "sub/x.py"),  # a link inside the checkpoint is refused too
])
def test_the_node_check_refuses_a_symlink_on_any_write_path(ckpt, link, target, listed):
    root, outside = ckpt
    (root / "sub2").mkdir()
    where = root / link
    if where.is_dir() and not where.is_symlink():
        shutil.rmtree(where)
    elif where.exists():
        where.unlink()
    where.symlink_to(str(target).replace("OUTSIDE", str(outside)) if "OUTSIDE" in target else target)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    problems = node_check(root, manifest_of(listed) if listed else None)
    assert any("is a symlink to" in p and "never followed" in p for p in problems.values()), problems
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before


def test_the_node_script_refuses_an_edited_manifest_before_any_write(ckpt):
    root, outside = ckpt
    (root / ".noderig").mkdir()
    manifest = root / ".noderig" / "manifest.json"
    manifest.write_text(json.dumps(manifest_of("config.json", "../outside/victim.py")))
    snapshot = sorted((str(p), p.stat().st_mtime_ns) for p in root.parent.rglob("*"))
    for extra in (["--check-paths"], ["--jobs", "1"]):
        # any python3 will do here (the bare-python check is test_verify's); sys.executable also
        # runs a mutated copy under mutmut, whose trampolines import mutmut
        res = subprocess.run([sys.executable, str(script_path("verify_files.py")), str(manifest), str(root), *extra],
                             capture_output=True, text=True, timeout=60)
        report = json.loads(res.stdout.splitlines()[-1])
        assert res.returncode != 0 and not report["ok"]
        assert "'../outside/victim.py'" in json.dumps(report) or "../outside/victim.py" in json.dumps(report)
    assert sorted((str(p), p.stat().st_mtime_ns) for p in root.parent.rglob("*")) == snapshot, "nothing written"


def test_noderig_verify_names_symlinks_and_never_reads_through_them(ckpt, capsys):
    root, outside = ckpt
    (root / "evil.json").symlink_to(outside / "victim.py")
    (root / "linked").symlink_to(outside)
    assert cli.main(["verify", str(root), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    statuses = {f["file"]: f["status"] for f in report["files"]}
    assert statuses["evil.json"] == "symlink" and statuses["linked"] == "symlink"
    assert not any(f["file"].startswith("linked/") for f in report["files"]), "a linked directory is not descended"
    detail = next(f["detail"] for f in report["files"] if f["file"] == "evil.json")
    assert str(outside / "victim.py") in detail
    assert cli.main(["verify", str(root)]) == 1
    assert "evil.json" in capsys.readouterr().out


def test_noderig_verify_with_a_manifest_refuses_a_shard_behind_a_linked_directory(ckpt, capsys):
    root, outside = ckpt
    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(outside)
    (root / ".noderig").mkdir()
    (root / ".noderig" / "manifest.json").write_text(json.dumps(manifest_of("sub/victim.py")))
    assert cli.main(["verify", str(root), "--json"]) == 1
    files = json.loads(capsys.readouterr().out)["files"]
    assert files == [{"file": "sub/victim.py", "status": "symlink",
                      "detail": f"sub is a symlink to {describe(str(outside))} (never followed)"}]
    assert not (root / ".noderig" / "verified.json").exists()


# ---------------------------------------------------------------------------------------
# no signed URL, token or key in output


def test_redact_removes_signatures_tokens_and_credentials():
    text = ("GET http://10.0.0.1:9001/repos/a/b/abc?filename=x&Expires=1&Signature=deadbeef failed; "
            "https://cdn.example/x?X-Amz-Credential=AKIA&X-Amz-Signature=f00 Authorization: Bearer hf_abcdefgh123 "
            "https://user:pw@mirror.example/x token hf_lab0123456789abcdef X-Amz-Signature=abc")
    out = redact(text)
    for secret in ("deadbeef", "AKIA", "f00", "hf_abcdefgh123", "pw@", "hf_lab0123456789abcdef", "=abc"):
        assert secret not in out, (secret, out)
    assert "http://10.0.0.1:9001/repos/a/b/abc?<redacted>" in out and "https://cdn.example/x?<redacted>" in out
    # the names of settings a message asks the user to check are no tokens
    assert redact("check hf_endpoint: a Hub or mirror you trust; hf_transfer; hf_config_path") == \
        "check hf_endpoint: a Hub or mirror you trust; hf_transfer; hf_config_path"
    assert redact("downloading /models/a/b.safetensors failed: aria2c exit 22") == \
        "downloading /models/a/b.safetensors failed: aria2c exit 22"


@pytest.mark.skipif(ARIA2C is None, reason="aria2c is not installed")
@pytest.mark.parametrize("quiet", [True, False], ids=["noderig-conf", "without-quiet"])
def test_the_aria2_daemon_prints_no_signed_url_on_a_failed_download(hub, tmp_path, quiet):
    """The daemon's console is the node's journal: with noderig's config a refused signed URL
    leaves no trace there; without ``quiet`` the same failure prints the signature (so the
    check can fail)."""
    import aria2p
    import socket

    hub.reset()
    hub.set_faults({"status": {"code": 403, "count": -1, "scope": "cdn"}})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = aria2.daemon_conf("s3cret", port)
    if not quiet:
        conf = conf.replace("quiet=true\n", "").replace("console-log-level=error\n", "console-log-level=notice\n")
    (tmp_path / "aria2.conf").write_text(conf)
    proc = subprocess.Popen([ARIA2C, f"--conf-path={tmp_path / 'aria2.conf'}"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
    try:
        api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=port, secret="s3cret", timeout=5))
        deadline = time.monotonic() + 60  # a hang guard, not a speed check
        while True:
            try:
                api.client.get_version()
                break
            except Exception:
                assert time.monotonic() < deadline, "aria2's RPC did not answer"
                time.sleep(0.05)
        shard = next(p for p in hub.repos[KIMI_REPO].files if p.endswith(".safetensors"))
        entry = hub.repos[KIMI_REPO].files[shard]
        url = hub.sign_url("127.0.0.1", KIMI_REPO, entry)
        gid = api.add_uris([url], options=aria2.download_options(str(tmp_path), "x.safetensors", 1, "none")).gid
        while api.client.tell_status(gid, ["status"])["status"] not in ("error", "complete"):
            assert time.monotonic() < deadline + 120, "the refused download did not end"
            time.sleep(0.1)
        message = api.client.tell_status(gid, ["errorMessage"]).get("errorMessage", "")
        api.client.shutdown()
        output = proc.communicate(timeout=15)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
        hub.reset()
    signature = url.split("Signature=")[1]
    assert signature not in redact(message)
    if quiet:
        assert output == "", output
    else:
        assert signature in output, "without quiet aria2 prints the signed URL: the check above means something"


def test_a_record_behind_a_symlinked_state_dir_is_neither_trusted_nor_written(ckpt):
    root, outside = ckpt
    data = (root / "config.json").read_bytes()
    import hashlib

    oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    st = (root / "config.json").stat()
    (outside / "verified.json").write_text(json.dumps(
        {"config.json": {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": oid}}))
    before = (outside / "verified.json").read_bytes()
    (root / ".noderig").symlink_to(outside)
    report = vf.verify(str(root), {"files": [{"path": "config.json", "size": len(data), "git_oid": oid}]})
    assert report["files"] == [{"file": "config.json", "status": "ok", "detail": "hashed"}], "hashed, not trusted"
    assert report["record"].startswith("not written") and (outside / "verified.json").read_bytes() == before


def test_forgetting_files_never_writes_through_a_link_beside_the_record(ckpt):
    # the step that drops files from the record before they are fetched again (root, on the node)
    from operations.checkpoint import FORGET

    root, outside = ckpt
    (root / ".noderig").mkdir()
    (root / ".noderig" / "verified.json").write_text(json.dumps({"config.json": {"size": 2}, "sub/x.py": {"size": 6}}))
    (root / ".noderig" / "verified.json.tmp").symlink_to(outside / "victim.py")
    res = subprocess.run([sys.executable, "-c", FORGET, str(root / ".noderig" / "verified.json"), "config.json"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert (outside / "victim.py").read_text() == "precious = True\n"
    assert json.loads((root / ".noderig" / "verified.json").read_text()) == {"sub/x.py": {"size": 6}}
    assert oct((root / ".noderig" / "verified.json").stat().st_mode & 0o777) == "0o644"


# ---------------------------------------------------------------------------------------
# the path check at every boundary, with the reason in full


@pytest.mark.parametrize("code, reason", [
    (0x00, "a control character (U+0000)"), (0x1F, "a control character (U+001F)"), (0x20, None), (0x7E, None),
    (0x7F, "a control character (U+007F)"), (0x9F, "a control character (U+009F)"), (0xA0, None),
    (0x200A, None), (0x200B, "an invisible format character (U+200B)"),
    (0x200F, "an invisible format character (U+200F)"), (0x2010, None), (0x2027, None),
    (0x2028, "a line separator (U+2028)"), (0x2029, "a line separator (U+2029)"),
    (0x202A, "a bidirectional override (U+202A)"), (0x202E, "a bidirectional override (U+202E)"), (0x202F, None),
    (0x205F, None), (0x2060, "an invisible format character (U+2060)"),
    (0x206F, "an invisible format character (U+206F)"), (0x2070, None), (0xD7FF, None),
    (0xD800, "an unpaired surrogate (U+D800)"), (0xDFFF, "an unpaired surrogate (U+DFFF)"), (0xE000, None),
    (0xFEFE, None), (0xFEFF, "an invisible format character (U+FEFF)"), (0xFF00, None), (0x1F600, None),
])
def test_each_forbidden_character_range_at_its_edges(code, reason):
    path = f"sub/a{chr(code)}b.json"
    assert path_problem(path) == (None if reason is None else f"it holds {reason}")


def test_the_size_limits_are_bytes_and_inclusive():
    assert path_problem("/".join(["x" * 204] * 5)) is None  # 1024 bytes: the limit itself
    assert path_problem("/".join(["x" * 204] * 4 + ["x" * 205])) == "it is 1025 bytes long (at most 1024)"
    assert path_problem("/".join(["é" * 102] * 5) + "é") == "it is 1026 bytes long (at most 1024)"  # 515 chars
    assert path_problem("x" * 255) is None and path_problem("x" * 256) == "a component is longer than 255 bytes"
    assert path_problem("é" * 127 + "x") is None  # 255 bytes
    assert path_problem("é" * 128) == "a component is longer than 255 bytes"  # 128 characters, 256 bytes


def test_every_other_reason_in_full():
    assert path_problem(3) == "it is not a string but int"
    assert path_problem(b"x") == "it is not a string but bytes"
    assert path_problem("a\\b") == "it holds a backslash"
    assert path_problem("/a") == "it is absolute"
    assert path_problem("a/../b") == "it has a '..' component" and path_problem(".") == "it has a '.' component"
    assert path_problem("a/") == "it has an empty component"
    assert path_problem(".noderig") == "it is inside noderig's state directory .noderig"
    assert path_problem(".noderig/x") == "it is inside noderig's state directory .noderig"
    assert path_problem("a/.noderig/x") is None and path_problem(".noderigs/x") is None
    assert path_problem("sub/x.aria2") == "it ends in .aria2 (aria2's control files)"
    assert path_problem("x.aria2/y") is None and path_problem("x.aria") is None


def test_inside_is_strictly_below_the_directory():
    assert inside("/d", "x") and inside("/d/", "x/y") and inside("/d/e/..", "x") and inside("/", "x")
    assert not inside("/d", ".") and not inside("/d", "..") and not inside("/d", "../dx")
    assert not inside("/d", "/etc/passwd") and not inside("/d", "x/../..")


def test_describe_escapes_and_cuts_past_200_characters():
    assert describe("a\nb") == "'a\\nb'" and describe(None) == "None"
    assert describe("x" * 198) == "'" + "x" * 198 + "'"  # 200 characters with the quotes: whole
    assert describe("x" * 199) == "'" + "x" * 199 + "... (201 characters)"


def test_matches_strips_slashes_and_is_case_sensitive():
    assert matches("sub/x.py", "/sub/*.py/") and matches("sub/x.py", "s?b/[x]*.py") and matches("sub/x.py", "*/x.py")
    assert not matches("x.py", "*.PY") and not matches("sub/a/b", "sub/*") and not matches("sub/a", "sub/*/b")
    assert matches("sub/a/b.json", "b.json") and not matches("sub/a/b.json", "a")


def test_inside_and_matches_strip_only_slashes():
    assert inside("/ckptX", "a") and inside("/ckptX/", "a")
    assert matches("a.X", "*.X") and matches("X/a.X", "X/*.X") and not matches("a.X", "*.")
