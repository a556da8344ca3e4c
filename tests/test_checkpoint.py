"""Checkpoint step on the lab: manifest from the Hub, aria2 on the node over RPC, verification,
idempotent reruns, faults, damage repair, crash safety and the disk check."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import time

import pytest

from noderig import aria2, preflight
from noderig.manifest import DEFAULT_PATTERNS
from noderig.sizes import human_size
from tests.conftest import ROOT, deploy, hub_call, pyinfra_command

pytestmark = pytest.mark.lab

MODEL_DIR = "/models/Kimi-K2.6"
DRAFT_DIR = "/models/Kimi-K2.6-DFlash"
MODEL = "moonshotai/Kimi-K2.6"
SHARD = "model-00002-of-000004.safetensors"
STEPS = "steps=prerequisites,checkpoint"


def hub_listing(lab, repo: str) -> list[dict]:
    """What the lab Hub lists for ``repo`` (path and size of the files the deploy fetches), read
    with huggingface_hub itself rather than through noderig's manifest."""
    from huggingface_hub import HfApi

    info = HfApi(endpoint=lab.layout.hub_url, token=False).model_info(repo, files_metadata=True)
    return [{"path": s.rfilename, "size": s.size} for s in info.siblings
            if any(fnmatch.fnmatch(s.rfilename, p) for p in DEFAULT_PATTERNS)]


def fetched(lab, repo: str = MODEL) -> set[str]:
    """Files of ``repo`` downloaded since the last reset: every download starts at the Hub's
    /resolve/ (aria2 with a HEAD or a GET), redirected to the CDN or not."""
    by_path = hub_call(lab, "/_lab/stats").get("requests", {}).get("by_path", {})
    found = set()
    for key in by_path:
        method, _, url = key.partition(" ")
        prefix = f"/{repo}/resolve/"
        if method in ("GET", "HEAD") and url.startswith(prefix):
            found.add(url[len(prefix):].split("?")[0].split("/", 1)[1])
    return found


def record(lab, d: str = MODEL_DIR) -> dict:
    return json.loads(lab.run("b300", f"cat {d}/.noderig/verified.json").stdout)


@pytest.fixture
def converged(lab):
    """b300 with both checkpoints downloaded and verified; Hub faults and counters cleared."""
    hub_call(lab, "/_lab/reset", {})
    res, out = deploy(lab, STEPS)
    assert res.returncode == 0, out[-4000:]
    hub_call(lab, "/_lab/reset", {})
    yield
    hub_call(lab, "/_lab/reset", {})


def test_download_through_the_redirect_then_rerun_changes_and_hashes_nothing(lab):
    lab.reset("b300")
    hub_call(lab, "/_lab/reset", {})
    res, out = deploy(lab, STEPS)
    assert res.returncode == 0, out[-4000:]
    assert "14 files verified in /models/Kimi-K2.6" in out and "2 files verified in /models/Kimi-K2.6-DFlash" in out
    # Progress counts from the manifest's sizes from its first line; the end line counts every
    # byte verified in this run (hashed while downloading or after).
    total = sum(f["size"] for f in hub_listing(lab, MODEL))
    progress = re.findall(rf"{re.escape(MODEL)}: \d+/\d+ files, [\d.]+/([\d.]+) MiB", out)
    assert progress and set(progress) == {f"{total / 2**20:.1f}"}, progress
    assert f"14 files verified in /models/Kimi-K2.6 ({human_size(total)} checked in this run)" in out
    stats = hub_call(lab, "/_lab/stats")
    assert stats["status"]["by_kind"]["resolve"]["302"] >= 5, "LFS files come through the Hub's redirect"
    assert "noderig-transient" not in out and "hf_lab" not in out, "no secret in the output"
    # the aria2 daemon is gone, its secret never in argv, its RPC only on loopback
    assert lab.run("b300", "systemctl is-active noderig-aria2", check=False).stdout.strip() != "active"
    assert lab.run("b300", "stat -c %a /etc/noderig/aria2.conf").stdout.strip() == "600"

    before = lab.run("b300", f"stat -c %Y.%y {MODEL_DIR}/.noderig/verified.json").stdout
    hub_call(lab, "/_lab/reset", {})
    res, out = deploy(lab, STEPS)
    assert res.returncode == 0, out[-4000:]
    assert re.search(r"Checkpoint moonshotai/Kimi-K2.6\s+1\s+-\s+-\s+1", out), out[-2000:]
    assert re.search(r"Checkpoint z-lab/Kimi-K2.6-DFlash\s+1\s+-\s+-\s+1", out), out[-2000:]
    assert fetched(lab) == set() and fetched(lab, "z-lab/Kimi-K2.6-DFlash") == set(), \
        "a converged rerun fetches nothing"
    assert lab.run("b300", f"stat -c %Y.%y {MODEL_DIR}/.noderig/verified.json").stdout == before, \
        "a converged rerun hashes nothing (the verified record is not even rewritten)"


DAMAGE = {
    "truncated": (f"truncate -s 1000000 {MODEL_DIR}/{SHARD}", SHARD),
    "header_byte": (f"printf 'X' | dd of={MODEL_DIR}/{SHARD} bs=1 seek=20 conv=notrunc status=none", SHARD),
    "data_byte": (f"printf 'X' | dd of={MODEL_DIR}/{SHARD} bs=1 seek=3000000 conv=notrunc status=none", SHARD),
    "deleted": (f"rm {MODEL_DIR}/{SHARD}", SHARD),
    "stale_aria2": (f"echo garbage > {MODEL_DIR}/{SHARD}.aria2", SHARD),
    "index_entry": (f"python3 -c \"import json; p='{MODEL_DIR}/model.safetensors.index.json'; "
                    f"d=json.load(open(p)); d['weight_map'].pop(sorted(d['weight_map'])[0]); "
                    f"json.dump(d, open(p, 'w'))\"", "model.safetensors.index.json"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damage_on_the_node_is_found_by_name_and_only_that_file_fetched_again(lab, converged, damage):
    command, victim = DAMAGE[damage]
    lab.run("b300", command)
    res, out = deploy(lab, STEPS)
    assert res.returncode == 0, out[-4000:]
    assert victim in out, f"the damaged file must be named:\n{out[-3000:]}"
    again = fetched(lab)
    assert again == {victim}, f"only {victim} may be fetched again, got {again}"
    assert lab.run("b300", f"test -e {MODEL_DIR}/{victim}.aria2", check=False).returncode == 1
    assert victim in record(lab)


def test_a_dropped_connection_resumes_to_the_right_sha256(lab, converged):
    lab.run("b300", f"rm {MODEL_DIR}/{SHARD}")
    hub_call(lab, "/_lab/faults", {"drop_after_bytes": {"bytes": 1_500_000, "count": 2, "scope": "cdn"}})
    res, out = deploy(lab, STEPS, "aria2_connections=1")
    assert res.returncode == 0, out[-4000:]
    stats = hub_call(lab, "/_lab/stats")
    assert stats["files"][f"{MODEL}/{SHARD}"]["dropped"] >= 1, stats
    assert SHARD in record(lab)


def test_a_5xx_storm_ends_in_a_clear_error_with_nothing_marked_verified(lab, converged):
    lab.run("b300", f"rm {MODEL_DIR}/{SHARD}")
    hub_call(lab, "/_lab/faults", {"status": {"code": 503, "count": -1, "scope": "cdn"}})
    res, out = deploy(lab, STEPS)
    assert res.returncode != 0
    assert f"downloading {MODEL_DIR}/{SHARD} failed: aria2c exit" in out, out[-3000:]
    # Retries are bounded by count, not by how fast this machine is: aria2's max-tries per
    # connection, and one re-resolution of the signed URL per attempt at most.
    tries = int(aria2.download_options("/", SHARD, 1, "none")["max-tries"])
    requests = hub_call(lab, "/_lab/stats")["requests"]["by_kind"].get("cdn", 0)
    print(f"5xx storm: {requests} CDN requests for one failing file (max-tries {tries})")
    assert 1 <= requests <= tries * 16, f"{requests} CDN requests for one failing file"
    assert SHARD not in record(lab)


def test_a_hub_failing_to_resolve_a_file_fails_the_host_in_one_sentence_before_any_change(lab, converged):
    # the controller resolves each LFS file's signed URL while it plans the download (the token stays here): a Hub
    # that answers 503 there failed the run as an "internal error: HfHubHTTPError ..." with its traceback's words
    lab.run("b300", f"rm {MODEL_DIR}/{SHARD}")
    before = record(lab)
    hub_call(lab, "/_lab/faults", {"status": {"code": 503, "count": -1, "scope": "resolve"}})
    res, out = deploy(lab, STEPS)
    assert res.returncode != 0
    summary = out.split("--> noderig:")[-1]
    assert "b300" in summary and "FAILED" in summary and "internal error" not in out, out[-3000:]
    assert f"answered HTTP 503 (lab fault: injected HTTP 503) to resolve {MODEL}/{SHARD}" in summary, summary
    assert "rerun, or check the mirror" in summary
    assert record(lab) == before and lab.run("b300", f"test -e {MODEL_DIR}/{SHARD}", check=False).returncode != 0
    hub_call(lab, "/_lab/reset", {})
    res, out = deploy(lab, STEPS)  # the Hub answers again: the rerun fetches the file
    assert res.returncode == 0 and SHARD in record(lab), out[-3000:]


def test_a_gated_repo_without_a_token_is_refused_in_one_sentence(lab):
    res, out = deploy(lab, STEPS, "hf_token_file=null", "steps=checkpoint")
    assert res.returncode != 0
    assert "z-lab/Kimi-K2.6-DFlash is a gated repo" in out and "no token was given" in out, out[-3000:]
    assert "Traceback" not in out


def test_killing_the_controller_mid_download_then_rerunning_does_not_start_over(lab):
    lab.reset("b300")
    deploy(lab, STEPS, "steps=prerequisites")
    hub_call(lab, "/_lab/reset", {})
    hub_call(lab, "/_lab/faults", {"rate_limit_bps": {"bps": 1_000_000, "count": -1, "scope": "cdn"}})
    cmd = pyinfra_command(lab.inventory, "-y", "deploy.py", "--data", "steps=checkpoint", "--data",
                          "aria2_connections=1")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYINFRA_PROGRESS": "off"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            served = hub_call(lab, "/_lab/stats").get("bytes_served", {}).get("cdn", 0)
            if served > 4_000_000:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the download goes on without the controller
    assert lab.run("b300", "systemctl is-active noderig-aria2", check=False).stdout.strip() == "active"
    hub_call(lab, "/_lab/faults", {"rate_limit_bps": None})
    res, out = deploy(lab, STEPS, "steps=checkpoint")
    assert res.returncode == 0, out[-4000:]
    assert "re-attached to" in out, out[-3000:]
    total = sum(f["size"] for f in json.loads(lab.run(
        "b300", f"cat {MODEL_DIR}/.noderig/manifest.json").stdout)["files"])
    served = hub_call(lab, "/_lab/stats")["bytes_served"]["cdn"]
    assert served < 1.3 * total, f"{served} bytes served for {total}: the rerun started over"


def test_not_enough_disk_is_refused_before_downloading_with_the_numbers(lab):
    lab.reset("b300")
    lab.run("b300", f"mkdir -p {MODEL_DIR} && mount -t tmpfs -o size=8M tmpfs {MODEL_DIR}")
    try:
        res, out = deploy(lab, STEPS)
        assert res.returncode != 0
        # The numbers themselves: the tmpfs's 8 MiB, and every byte the Hub lists for the model.
        need = sum(f["size"] for f in hub_listing(lab, MODEL))
        margin = preflight.DISK_MARGIN_BYTES + int(need * preflight.DISK_MARGIN_FRACTION)
        expected = (f"not enough disk for {MODEL_DIR}: 8.0 MiB free, {human_size(need)} still to download "
                    f"+ {human_size(margin)} margin")
        assert expected in out, out[-3000:]
        assert lab.run("b300", f"ls -A {MODEL_DIR}").stdout.strip() == ""
        assert lab.run("b300", "dpkg -s aria2", check=False).returncode != 0, "refused before any change"
    finally:
        lab.run("b300", f"umount {MODEL_DIR}", check=False)


@pytest.mark.parametrize("download_first", [False, True])
def test_a_refused_signed_url_is_resolved_again_and_the_download_resumes(lab, converged, download_first):
    # An expired signed CDN URL answers 403; the deploy asks the Hub for a fresh one: while it
    # follows the download, or (the download started first) when it takes the download over.
    lab.run("b300", f"rm {MODEL_DIR}/{SHARD}")
    hub_call(lab, "/_lab/faults", {"status": {"code": 403, "count": 1, "scope": "cdn", "match": SHARD}})
    res, out = deploy(lab, STEPS, "aria2_connections=1", f"download_first={download_first}")
    assert res.returncode == 0, out[-4000:]
    # (started first, aria2 may still be retrying when the step takes the download over, or
    # have given up already: either way the file is fetched with a freshly resolved URL)
    said = ["URL re-resolved, resuming"] + (["aria2 gave up on it earlier"] if download_first else [])
    assert re.search(rf"{re.escape(SHARD)}: .*({'|'.join(said)})", out), out[-3000:]
    assert SHARD in record(lab)
