"""Pure planning logic: checkpoint states, venv tree diffs, preflight rules. No hosts."""

from __future__ import annotations

from noderig import checkpoint_plan
from noderig.preflight import disk_problems, problems
from noderig.treediff import diff_listings

MANIFEST = {"files": [
    {"path": "a.safetensors", "size": 100, "sha256": "aa" * 32},
    {"path": "b.safetensors", "size": 100, "sha256": "bb" * 32},
    {"path": "config.json", "size": 10, "git_oid": "cc" * 20},
]}


def stat(size, mtime=1000.5, aria2=False):
    return {"size": size, "mtime": mtime, "aria2": aria2}


def test_files_hashed_before_and_unchanged_are_ok_without_rehash():
    record = {"a.safetensors": {"size": 100, "mtime_ns": 1000500000000, "digest": "aa" * 32}}
    states = checkpoint_plan.classify(MANIFEST, {"a.safetensors": stat(100), "b.safetensors": stat(100)}, record)
    assert states == {"a.safetensors": checkpoint_plan.OK, "b.safetensors": checkpoint_plan.UNVERIFIED, "config.json": checkpoint_plan.MISSING}


def test_a_touched_file_is_hashed_again():
    record = {"a.safetensors": {"size": 100, "mtime_ns": 1000500000000, "digest": "aa" * 32}}
    assert checkpoint_plan.classify(MANIFEST, {"a.safetensors": stat(100, mtime=2000.0)}, record)["a.safetensors"] == checkpoint_plan.UNVERIFIED


def test_live_aria2_control_file_is_never_ok():
    record = {"a.safetensors": {"size": 100, "mtime_ns": 1000500000000, "digest": "aa" * 32}}
    states = checkpoint_plan.classify(MANIFEST, {"a.safetensors": stat(100, aria2=True)}, record)
    assert states["a.safetensors"] == checkpoint_plan.PARTIAL


def test_sizes_decide_resume_or_refetch_and_bytes_to_fetch():
    stats = {"a.safetensors": stat(40), "b.safetensors": stat(150)}
    states = checkpoint_plan.classify(MANIFEST, stats, {})
    assert states["a.safetensors"] == checkpoint_plan.TRUNCATED and states["b.safetensors"] == checkpoint_plan.OVERSIZE
    assert checkpoint_plan.bytes_to_fetch(MANIFEST, states, stats) == 60 + 100 + 10


# A new revision beside the live one: what changes, what is linked, what is left to fetch.

NEW = {"files": [
    {"path": "a.safetensors", "size": 100, "sha256": "aa" * 32},  # the same bytes
    {"path": "moved/b.safetensors", "size": 100, "sha256": "bb" * 32},  # the same bytes, renamed
    {"path": "config.json", "size": 12, "git_oid": "dd" * 20},  # changed
    {"path": "c.safetensors", "size": 50, "sha256": "ee" * 32},  # new
]}


def test_a_revision_differs_when_a_file_its_server_reads_changes_not_when_only_the_commit_does():
    assert checkpoint_plan.revision_differs(MANIFEST, NEW)
    assert not checkpoint_plan.revision_differs({**MANIFEST, "commit": "f" * 40}, MANIFEST)
    renamed = {"files": [{**MANIFEST["files"][0], "path": "x.safetensors"}, *MANIFEST["files"][1:]]}
    assert checkpoint_plan.revision_differs(MANIFEST, renamed)
    assert not checkpoint_plan.revision_differs(None, MANIFEST), "nothing there: nothing to keep serving from"
    assert not checkpoint_plan.revision_differs({"files": "garbled"}, MANIFEST)


def test_only_files_the_live_revision_holds_verified_are_linked_and_by_digest_whatever_their_path():
    live_states = {"a.safetensors": checkpoint_plan.OK, "b.safetensors": checkpoint_plan.OK,
                   "config.json": checkpoint_plan.OK}
    assert checkpoint_plan.linkable(NEW, MANIFEST, live_states) == {
        "a.safetensors": "a.safetensors", "moved/b.safetensors": "b.safetensors"}
    live_states["b.safetensors"] = checkpoint_plan.UNVERIFIED  # touched since it was hashed
    assert checkpoint_plan.linkable(NEW, MANIFEST, live_states) == {"a.safetensors": "a.safetensors"}


def test_after_seeding_a_linked_missing_file_is_ok_and_the_bytes_to_fetch_are_what_changed():
    states = checkpoint_plan.classify(NEW, {}, {})
    links = {"a.safetensors": "a.safetensors", "moved/b.safetensors": "b.safetensors"}
    seeded = checkpoint_plan.after_seeding(states, links)
    assert seeded == {"a.safetensors": "ok", "moved/b.safetensors": "ok", "config.json": "missing",
                      "c.safetensors": "missing"}
    assert checkpoint_plan.bytes_to_fetch(NEW, seeded, {}) == 12 + 50
    partial = {**states, "a.safetensors": checkpoint_plan.PARTIAL}
    assert checkpoint_plan.after_seeding(partial, links)["a.safetensors"] == checkpoint_plan.PARTIAL, \
        "a file already begun there is left to the fetch"


def test_a_manifest_rewritten_with_every_file_verified_says_which_fields_differ():
    held = {**MANIFEST, "endpoint": "https://hub.lan/", "commit": "c" * 40}
    assert checkpoint_plan.manifest_changes(None, held) == "no manifest on the node yet"
    assert checkpoint_plan.manifest_changes(held, {**held, "endpoint": "https://mirror.lan"}) == \
        "the manifest on the node differs in its endpoint"
    assert checkpoint_plan.manifest_changes({**held, "gated": True}, {**held, "endpoint": "x"}) == \
        "the manifest on the node differs in its endpoint, gated"
    assert checkpoint_plan.manifest_changes(held, dict(held)) == ""


def test_a_hub_url_has_one_spelling_with_or_without_its_trailing_slash():
    from noderig.manifest import RepoPin, download_url

    pin = RepoPin("org/m", "main", "https://hub.lan/mirror/")
    assert pin == RepoPin("org/m", "main", "https://hub.lan/mirror") and pin.endpoint == "https://hub.lan/mirror"
    manifest = {"repo": pin.repo, "commit": "c" * 40, "endpoint": pin.endpoint, "files": []}
    assert download_url(manifest, "config.json", None) == f"https://hub.lan/mirror/org/m/resolve/{'c' * 40}/config.json"


def test_tree_diff_names_added_changed_and_removed():
    src = {"bin/python": ("l", 7, 1, "777", "python3"), "lib/x.py": ("f", 10, 5, "644", ""),
           "lib/y.py": ("f", 20, 5, "644", "")}
    dst = {"bin/python": ("l", 7, 1, "777", "python3"), "lib/x.py": ("f", 10, 6, "644", ""),
           "stray": ("f", 1, 1, "644", "")}
    diff = diff_listings(src, dst)
    assert (diff.added, diff.changed, diff.removed) == (["lib/y.py"], ["lib/x.py"], ["stray"])
    assert diff.bytes_to_copy == 30
    assert not diff_listings(src, dict(src))


INFO = {"os": "debian 12", "python": "3.11.2", "free_bytes": 100 * 2**30, "gpus": []}
CFG = {"home": "/usr/bin", "version": "3.11.2"}


def test_preflight_passes_a_matching_node():
    assert problems(INFO, CFG, "3.11.2", gpus_required=0, reference_name="ct200", venv="/opt/v") == []


def test_preflight_names_gpu_and_interpreter_problems():
    text = " | ".join(problems(INFO, CFG, None, gpus_required=8, reference_name="ct200", venv="/opt/v"))
    assert "0 GPU(s) visible to nvidia-smi, 8 required" in text
    assert "/usr/bin/python3" in text and "3.11.2" in text


def test_disk_is_checked_per_volume_with_the_numbers():
    volumes = {"2049": {"free": 100 * 2**30, "need": 595_177_988_208, "dirs": ["/models/K", "/models/D"]},
               "2050": {"free": 10 * 2**30, "need": 2**30, "dirs": ["/scratch/x"]}}
    found = disk_problems(volumes)
    assert len(found) == 1
    assert "/models/K and /models/D: 100.0 GiB free, 554.3 GiB still to download" in found[0]
    assert disk_problems({"1": {"free": 2**30, "need": 0, "dirs": ["/m"]}}) == []
    # Small volumes keep their numbers: MiB, not "0.0 GiB".
    small = disk_problems({"1": {"free": 8 << 20, "need": 24 << 20, "dirs": ["/m"]}})
    assert "/m: 8.0 MiB free, 24.0 MiB still to download + 64.5 MiB margin" in small[0]


def test_preflight_refuses_another_minor_version():
    found = problems(INFO, CFG, "3.12.1", gpus_required=0, reference_name="ct200", venv="/opt/v")
    assert found and "not portable" in found[0]


def test_a_record_from_another_second_or_without_an_mtime_is_not_trusted():
    entry = {"size": 100, "digest": "aa" * 32}
    same = checkpoint_plan.classify(MANIFEST, {"a.safetensors": stat(100)}, {"a.safetensors": {**entry, "mtime_ns": 1000500001999}})
    assert same["a.safetensors"] == checkpoint_plan.OK, "within 2 us: the same mtime, as a filesystem rounds it"
    for record in ({**entry, "mtime_ns": 1000500002000}, {**entry, "mtime_ns": 1000500000000 - 2000}, entry):
        states = checkpoint_plan.classify(MANIFEST, {"a.safetensors": stat(100)}, {"a.safetensors": record})
        assert states["a.safetensors"] == checkpoint_plan.UNVERIFIED, record
    # A file at the epoch and a record that lost its mtime: still not trusted.
    states = checkpoint_plan.classify(MANIFEST, {"a.safetensors": stat(100, mtime=0.0)}, {"a.safetensors": entry})
    assert states["a.safetensors"] == checkpoint_plan.UNVERIFIED


def test_bytes_to_fetch_count_a_partial_file_whole_and_every_file_once():
    stats = {"a.safetensors": stat(100, aria2=True), "b.safetensors": stat(30)}
    states = checkpoint_plan.classify(MANIFEST, stats, {})
    assert states == {"a.safetensors": checkpoint_plan.PARTIAL, "b.safetensors": checkpoint_plan.TRUNCATED, "config.json": checkpoint_plan.MISSING}
    assert checkpoint_plan.bytes_to_fetch(MANIFEST, states, stats) == 100 + 70 + 10


def test_the_manifest_text_is_stable_whatever_the_key_order():
    a = {"repo": "org/m", "files": [{"path": "x", "size": 1}], "commit": "c"}
    b = {"commit": "c", "files": [{"size": 1, "path": "x"}], "repo": "org/m"}
    text = checkpoint_plan.manifest_text(a)
    assert text == checkpoint_plan.manifest_text(b) and text.endswith("}\n") and not text.endswith("\n\n")
    import json

    assert json.loads(text) == a and text.count("\n") > 3, "one value per line, for a human diffing two pins"


def test_describe_names_files_by_state_up_to_a_limit():
    todo = {f"s{i}": checkpoint_plan.MISSING for i in range(5)} | {"c.json": checkpoint_plan.UNVERIFIED, "a.json": checkpoint_plan.UNVERIFIED}
    assert checkpoint_plan.describe(todo) == "5 missing (s0, s1, s2, ...), 2 unverified (a.json, c.json)"
    assert checkpoint_plan.describe({"a": checkpoint_plan.PARTIAL, "b": checkpoint_plan.PARTIAL, "c": checkpoint_plan.PARTIAL}) == "3 partial (a, b, c)"


def test_an_entry_without_a_digest_is_never_ok_whatever_the_record_says():
    # The planner reads the verifier's digest rule: an entry with neither sha256 nor git_oid
    # has nothing its bytes were checked against, so a record cannot make it "ok".
    manifest = {"files": [{"path": "a.bin", "size": 100}]}
    record = {"a.bin": {"size": 100, "mtime_ns": 1000500000000, "digest": None}}
    assert checkpoint_plan.classify(manifest, {"a.bin": stat(100)}, record) == {"a.bin": "unverified"}


def test_the_planner_and_the_node_verifier_name_the_state_files_and_states_alike():
    from noderig.node import verify_files

    assert (checkpoint_plan.MANIFEST_FILE, checkpoint_plan.RECORD_FILE) == (".noderig/manifest.json",
                                                                            ".noderig/verified.json")
    assert checkpoint_plan.RECORD_FILE is verify_files.RECORD_FILE
    assert (checkpoint_plan.OK, checkpoint_plan.UNVERIFIED, checkpoint_plan.MISSING, checkpoint_plan.PARTIAL,
            checkpoint_plan.TRUNCATED, checkpoint_plan.OVERSIZE) == ("ok", "unverified", "missing", "partial",
                                                                    "truncated", "oversize")


# What aria2 holds decides between hashing and fetching (checkpoint_plan.split_todo).
TODO = {"a.safetensors": checkpoint_plan.UNVERIFIED, "b.safetensors": checkpoint_plan.UNVERIFIED,
        "config.json": checkpoint_plan.MISSING, "d.safetensors": checkpoint_plan.PARTIAL,
        "e.json": checkpoint_plan.TRUNCATED, "f.safetensors": checkpoint_plan.OVERSIZE}


def test_without_a_daemon_right_size_files_are_hashed_and_the_others_fetched():
    to_hash, to_fetch = checkpoint_plan.split_todo(TODO, None)
    assert to_hash == ["a.safetensors", "b.safetensors"]
    assert to_fetch == ["config.json", "d.safetensors", "e.json", "f.safetensors"]
    assert checkpoint_plan.split_todo(TODO, []) == (to_hash, to_fetch), "a daemon holding nothing changes nothing"


def test_a_right_size_file_aria2_holds_is_fetched_through_it_never_hashed_under_it():
    to_hash, to_fetch = checkpoint_plan.split_todo(TODO, ["b.safetensors", "config.json", "elsewhere.bin"])
    assert to_hash == ["a.safetensors"]
    assert to_fetch == ["b.safetensors", "config.json", "d.safetensors", "e.json", "f.safetensors"]


def test_only_what_resuming_cannot_fix_starts_over_and_never_a_file_aria2_holds():
    lfs = {"a.safetensors", "b.safetensors", "d.safetensors", "f.safetensors"}
    # an oversize file, and a short small git file (not LFS: its bytes are no prefix worth
    # resuming); a short LFS file resumes
    assert checkpoint_plan.starts_over(TODO, lfs, None) == ["e.json", "f.safetensors"]
    assert checkpoint_plan.starts_over({**TODO, "e.json": checkpoint_plan.TRUNCATED}, lfs | {"e.json"}, None) == \
        ["f.safetensors"]
    assert checkpoint_plan.starts_over(TODO, lfs, ["e.json", "f.safetensors"]) == []
