"""The checkpoint fan-out on the lab: one reference and three targets behind one lab Hub.
Each checkpoint file crosses the Hub's uplink once (the Hub counts the bytes of every file it
serves), every node ends with every file verified, nothing listens on the fan-out port after
the deploy, and a rerun changes nothing. A peer serving damaged bytes is caught by the
receiver's hash, traced and not used again; a peer killed during the fan-out leaves the others
to finish from the other peer or the Hub. The tests share the lab's hosts: each resets only
the targets whose state it needs."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import changed_ops, hub_call, run_pyinfra

pytestmark = pytest.mark.lab

TARGETS = ("b300", "b300-2", "b300-3")
MODEL, DRAFT = "moonshotai/Kimi-K2.6", "z-lab/Kimi-K2.6-DFlash"
DIRS = {MODEL: "/models/Kimi-K2.6", DRAFT: "/models/Kimi-K2.6-DFlash"}
PORT = 8378
CHECKPOINT_STEPS = "steps=prerequisites,checkpoint"


def fleet(lab, *data: str):
    args = ["-y", "deploy.py", "--data", CHECKPOINT_STEPS]
    for d in data:
        args += ["--data", d]
    res = run_pyinfra(lab.fleet_inventory, *args)
    return res, res.stdout + res.stderr


# The deploy's default checkpoint_patterns, by suffix (the repos' README.md is not fetched).
FETCHED = (".safetensors", ".json", ".py", ".model", ".jinja", ".tiktoken", ".txt")


def repo_files(lab, repo: str) -> dict[str, bytes]:
    root = lab.repo_path(repo)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".") and p.name.endswith(FETCHED)}


def file_bytes_served(stats: dict) -> int:
    """Bytes of file bodies the Hub sent (its CDN and /resolve/), listings left out."""
    served = stats["bytes_served"]
    return served.get("cdn", 0) + served.get("resolve", 0)


def assert_every_file_verified_on(lab, name: str) -> None:
    for repo, dest in DIRS.items():
        want = {p: hashlib.sha256(b).hexdigest() for p, b in repo_files(lab, repo).items()}
        out = lab.run(name, f"cd {dest} && sha256sum " + " ".join(f"'{p}'" for p in want)).stdout
        have = {line.split(None, 1)[1].lstrip("*"): line.split()[0] for line in out.splitlines()}
        assert have == want, f"{name}:{dest}"


def assert_nothing_serves(lab, name: str) -> None:
    assert lab.run(name, "systemctl is-active noderig-peers", check=False).stdout.strip() != "active"
    assert lab.run(name, f"ss -Htln 'sport = :{PORT}'").stdout.strip() == "", f"{name} still listens on {PORT}"
    assert lab.run(name, "test -e /run/noderig-peers", check=False).returncode != 0
    for dest in DIRS.values():
        assert lab.run(name, f"test -e {dest}/.noderig/peer", check=False).returncode != 0


@pytest.fixture(scope="module")
def converged(lab):
    """Three bare targets fanned out to, once, from a Hub that counts what it serves."""
    for name in TARGETS:
        lab.reset(name)
    hub_call(lab, "/_lab/reset", {})
    # One connection per file: aria2's parallel segments each hang up with bytes in flight
    # (on these 8 MiB shards, 16 connections make one node alone take 1.22x the checkpoint
    # from the Hub); the fan-out is the same either way, and the Hub's count is then exact.
    res, out = fleet(lab, "aria2_connections=1")
    return res, out, hub_call(lab, "/_lab/stats")


def test_each_file_crosses_the_uplink_once_and_every_node_ends_verified(lab, converged):
    res, out, stats = converged
    assert res.returncode == 0, out[-5000:]
    files = {repo: repo_files(lab, repo) for repo in DIRS}
    checkpoint = sum(len(b) for per in files.values() for b in per.values())
    served = file_bytes_served(stats)
    # Every byte once; the draft's small files are gated: the controller fetches those for each
    # node (kilobytes), which is all the slack there is.
    small = sum(len(b) for p, b in files[DRAFT].items() if not p.endswith(".safetensors"))
    over = {k: (v["bytes"], v["requests"]) for k, v in stats["files"].items()}
    assert checkpoint <= served <= checkpoint + 2 * small, (served, checkpoint, over)
    for repo, per in files.items():
        for path, body in per.items():
            if path.endswith(".safetensors"):
                assert stats["files"][f"{repo}/{path}"]["bytes"] == len(body), path
    for name in TARGETS:
        assert_every_file_verified_on(lab, name)
        assert_nothing_serves(lab, name)
        # aria2 ran through four checkpoint steps: the last one stopped it
        assert lab.run(name, "systemctl is-active noderig-aria2", check=False).stdout.strip() in (
            "inactive", "deactivating", "failed", "unknown"), name
    # The dry-run/plan line and where the bytes came from, per node.
    for name in TARGETS:
        assert re.search(rf"\[{name}\] fan-out of {MODEL}: [\d.]+ MiB from the Hub \(\d+ files\), [\d.]+ MiB from peers",
                         out), out[-3000:]
        assert f"fan-out: {name} took " in out.split("--> noderig:")[-1]


def test_a_rerun_changes_nothing_and_takes_nothing_from_the_hub(lab, converged):
    hub_call(lab, "/_lab/reset", {})
    res, out = fleet(lab)
    assert res.returncode == 0, out[-4000:]
    assert changed_ops(out) == {}
    assert file_bytes_served(hub_call(lab, "/_lab/stats")) == 0
    assert "fan-out of" in out and "0.0 MiB from the Hub (0 files), 0.0 MiB from peers (0 files)" in out


def test_the_dry_run_shows_each_nodes_bytes_from_the_hub_and_from_peers(lab, converged):
    lab.reset("b300-3")  # a bare node joins two that hold everything
    res = run_pyinfra(lab.fleet_inventory, "deploy.py", "--dry", "--data", CHECKPOINT_STEPS)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    model = repo_files(lab, MODEL)
    mib = sum(len(b) for b in model.values()) / 2**20
    assert f"[b300-3] fan-out of {MODEL}: 0.0 MiB from the Hub (0 files), {mib:.1f} MiB from peers " \
           f"({len(model)} files)" in out, out[-4000:]
    assert f"[b300] fan-out of {MODEL}: 0.0 MiB from the Hub (0 files), 0.0 MiB from peers (0 files)" in out


def _damage_keeping_size_and_mtime(lab, name: str, path: str) -> None:
    """Overwrite all but the first 4 KiB with other bytes; size and mtime restored, so the
    node's verified record still vouches for the file (as after bit rot, or a hostile peer)."""
    lab.run(name, f"f='{path}'; t=$(stat -c %y \"$f\"); s=$(stat -c %s \"$f\"); "
                  f"head -c $((s - 4096)) /dev/zero | tr '\\0' 'x' | dd of=\"$f\" bs=4096 seek=1 conv=notrunc "
                  f"status=none && touch -d \"$t\" \"$f\"")


def test_a_peer_serving_damaged_bytes_is_caught_traced_and_not_used_again(lab, converged):
    lab.reset("b300-3")
    shards = [p for p in repo_files(lab, MODEL) if p.endswith(".safetensors")]
    lab.run("b300-2", "mkdir -p /root/orig && " + " && ".join(f"cp -p '{DIRS[MODEL]}/{p}' /root/orig/" for p in shards))
    for p in shards:
        _damage_keeping_size_and_mtime(lab, "b300-2", f"{DIRS[MODEL]}/{p}")
    try:
        hub_call(lab, "/_lab/reset", {})
        res, out = fleet(lab)
        assert res.returncode == 0, out[-5000:]
        tail = out.split("--> noderig:")[-1]
        assert "fan-out: peer b300-2 not used again in this run: it served " in tail, tail
        assert_every_file_verified_on(lab, "b300-3")
        # b300 held every file verified: nothing came from the Hub for them
        served = hub_call(lab, "/_lab/stats")["files"]
        assert not any(f"{MODEL}/{p}" in served for p in shards), served
    finally:  # the originals back, with their mtimes: b300-2's record vouches for them again
        lab.run("b300-2", " && ".join(f"mv -f '/root/orig/{p}' '{DIRS[MODEL]}/{p}'" for p in shards))
    assert_every_file_verified_on(lab, "b300-2")


def test_a_peer_killed_during_the_fan_out_leaves_the_others_to_finish(lab, converged):
    lab.reset("b300-3")
    hub_call(lab, "/_lab/reset", {})
    done, killed = threading.Event(), []

    def kill_b300_2_once_it_serves():
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not done.is_set():
            if lab.run("b300-2", "systemctl is-active noderig-peers", check=False).stdout.strip() == "active":
                killed.append(lab.run("b300-2", "systemctl kill -s KILL noderig-peers", check=False).returncode)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_b300_2_once_it_serves, daemon=True)
    watcher.start()
    res, out = fleet(lab)
    done.set()
    watcher.join(timeout=30)
    assert killed == [0], "b300-2's server was never seen running, so never killed"
    assert res.returncode == 0, out[-5000:]
    assert_every_file_verified_on(lab, "b300-3")
    for name in TARGETS:
        assert_nothing_serves(lab, name)
    # and the rerun converges to no change
    res, out = fleet(lab)
    assert res.returncode == 0 and changed_ops(out) == {}, out[-4000:]


def test_the_prerequisites_alone_then_the_checkpoint_alone_fan_out(lab, converged):
    """Steps run one at a time (a run per step): the prerequisites of a fleet install the peer
    server's package although that run fetches nothing, so the checkpoint step's fan-out can
    serve."""
    for name in TARGETS:
        lab.reset(name)
    res, out = fleet(lab, "steps=prerequisites")
    assert res.returncode == 0, out[-4000:]
    for name in TARGETS:
        assert lab.run(name, "test -x /usr/sbin/nginx", check=False).returncode == 0, name
        assert lab.run(name, "systemctl is-enabled nginx.service", check=False).stdout.strip() == "masked", name
    hub_call(lab, "/_lab/reset", {})
    res, out = fleet(lab, "steps=checkpoint")
    assert res.returncode == 0, out[-4000:]
    for name in TARGETS:
        assert_every_file_verified_on(lab, name)
        assert_nothing_serves(lab, name)
    assert "fan-out: b300-3 took " in out.split("--> noderig:")[-1]


def test_a_peer_server_left_running_is_stopped_by_a_run_that_does_not_fan_out(lab, converged):
    """A fan-out that outlived its run (killed mid-way, or ``fanout_keep_serving`` turned off
    since) leaves nginx serving; a rerun without the fan-out (``fanout=false``, or one target)
    stops it and removes its links, and the run after changes nothing."""
    lab.reset("b300-3")
    res, out = fleet(lab, "fanout_keep_serving=true")
    assert res.returncode == 0, out[-4000:]
    left = [n for n in TARGETS if lab.run(n, "systemctl is-active noderig-peers", check=False).stdout.strip() == "active"]
    assert left, "no peer server kept serving: the test would check nothing"
    res, out = fleet(lab, "fanout=false")
    assert res.returncode == 0, out[-4000:]
    assert changed_ops(out) == {"Fan-out: peer server left by an earlier run stopped": len(left)}, out[-4000:]
    for name in TARGETS:
        assert_nothing_serves(lab, name)
    res, out = fleet(lab, "fanout=false")
    assert res.returncode == 0 and changed_ops(out) == {}, out[-4000:]
