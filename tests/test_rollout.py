"""Changing a serving fleet on the lab (issue 16): three serving targets, a change rolled out
in batches of one while a prober on the controller polls every target's /health every 100 ms;
a canary that fails readiness rolled back while the others are never touched; a controller
killed between batches, and the rerun that finishes the rollout.

The servers listen on the lab bridge (unauthenticated, on purpose) so the controller itself
can probe them. The tests share the three targets and run in file order: each leaves the
fleet serving for the next."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from noderig.repair import REPAIRS_FILE
from tests.conftest import ROOT, changed_ops, hub_call, pyinfra_command, run_pyinfra, venv_copies
from tests.test_fleet import summary

pytestmark = pytest.mark.lab

TARGETS = ("b300", "b300-2", "b300-3")
PORT = 30000
UNIT = "/etc/systemd/system/sglang.service"
EXPOSED = ["server_host=0.0.0.0", "allow_unauthenticated_network_access=True"]


def fleet(lab, *data: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess, str]:
    args = ["-y", "deploy.py"]
    for d in [*EXPOSED, *data]:
        args += ["--data", d]
    res = run_pyinfra(lab.fleet_inventory, *args, timeout=timeout)
    return res, res.stdout + res.stderr


def ip(lab, name: str) -> str:
    return lab.host(name).ip


def server_info(lab, name: str) -> dict:
    with urllib.request.urlopen(f"http://{ip(lab, name)}:{PORT}/server_info", timeout=10) as resp:
        return json.loads(resp.read())


def started(lab, name: str) -> str:
    """The server's main process: its pid and start time (a restart changes both)."""
    return lab.run(name, "systemctl show -p MainPID -p ExecMainStartTimestampMonotonic sglang").stdout


def unit_sha(lab, name: str) -> str:
    return lab.run(name, f"sha256sum {UNIT}").stdout.split()[0]


class Prober:
    """Polls every target's /health from the controller every 100 ms, in one thread per
    target; records (monotonic time, up) per target."""

    def __init__(self, lab):
        self.urls = {name: f"http://{ip(lab, name)}:{PORT}/health" for name in TARGETS}
        self.samples = {name: [] for name in TARGETS}
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._poll, args=(name,), daemon=True) for name in TARGETS]

    def _poll(self, name: str):
        while not self.done.is_set():
            began = time.monotonic()
            try:
                with urllib.request.urlopen(self.urls[name], timeout=2) as resp:
                    up = resp.status == 200
            except OSError:
                up = False
            self.samples[name].append((began, up))
            self.done.wait(max(0.0, 0.1 - (time.monotonic() - began)))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        for t in self.threads:
            t.join(5)

    def down_spans(self, name: str) -> list[tuple[float, float]]:
        """Runs of consecutive failed probes: (first, last) probe time."""
        spans, start, last = [], None, None
        for t, up in self.samples[name]:
            if not up and start is None:
                start = t
            if not up:
                last = t
            if up and start is not None:
                spans.append((start, last))
                start = None
        if start is not None:
            spans.append((start, last))
        return spans


# Each test starts from the state the one before it left (in file order: a no-op rerun, not a
# rollout back to the defaults) and converges there itself when run alone.
AFTER_FLAG_CHANGE = "mem_fraction_static=0.7"
AFTER_CONTROLLER_KILL = "mem_fraction_static=0.65"


def converge(lab, *data: str):
    """Every target serving on the bridge with ``data`` (what each test starts from). A repair
    recorded on a node by another test file stays applied by design, and would override the
    flags these tests change (a lowered mem_fraction_static): the record goes first."""
    for name in TARGETS:
        lab.run(name, f"rm -f {REPAIRS_FILE}")
    res, out = fleet(lab, *data)
    assert res.returncode == 0, out[-4000:]
    for name in TARGETS:
        assert server_info(lab, name)["status"] == "Up"


def test_a_flag_change_rolls_one_node_at_a_time_and_all_serve_it(lab):
    converge(lab)
    before = {name: server_info(lab, name)["mem_fraction_static"] for name in TARGETS}
    assert all(v != 0.7 for v in before.values()), before

    with Prober(lab) as prober:
        res, out = fleet(lab, AFTER_FLAG_CHANGE, "rollout=1")
        time.sleep(0.5)
    assert res.returncode == 0, out[-4000:]

    # The plan, printed before any change: three batches of one, in inventory order.
    for k, name in enumerate(TARGETS, 1):
        assert re.search(rf"batch {k}: {re.escape(name)}: restart \(", out), out[-4000:]
    # Each went down and came back, and never two at once.
    spans = {name: prober.down_spans(name) for name in TARGETS}
    print("down spans (s since the first probe): " + "; ".join(
        f"{n}: " + ", ".join(f"{a - prober.samples[n][0][0]:.1f}-{b - prober.samples[n][0][0]:.1f}" for a, b in s)
        for n, s in spans.items()))
    assert all(spans[name] for name in TARGETS), spans
    everyone = sorted((a, b, name) for name, s in spans.items() for a, b in s)
    for (a1, b1, n1), (a2, b2, n2) in zip(everyone, everyone[1:]):
        assert a2 > b1, f"{n1} and {n2} were down at the same time: {everyone}"
    # ... in batch order, and the summary names each node's batch.
    assert [name for _, _, name in everyone] == list(TARGETS), everyone
    lines = summary(out)
    for k, name in enumerate(TARGETS, 1):
        assert lines[name].startswith("ok, changed") and f"; changed in rollout batch {k} of 3;" in lines[name], \
            lines[name]
        assert server_info(lab, name)["mem_fraction_static"] == 0.7


def test_a_failing_canary_is_rolled_back_and_the_others_are_never_touched(lab):
    converge(lab, AFTER_FLAG_CHANGE)
    shas = {name: unit_sha(lab, name) for name in TARGETS}
    processes = {name: started(lab, name) for name in TARGETS}
    old = server_info(lab, "b300")

    # The stand-in lists --enable-two-batch-overlap in --help, and dies on it at startup.
    res, out = fleet(lab, AFTER_FLAG_CHANGE, 'extra_flags=["--enable-two-batch-overlap"]', "rollout=1,100%")
    assert res.returncode != 0, out[-4000:]
    lines = summary(out)
    assert lines["b300"].startswith('FAILED at "Ready, or rolled back (batch 1)": ROLLED BACK in rollout batch 1 of 2, '
                                    "serving its last known good state again: "), lines["b300"]
    assert "Two-batch overlap requires" in out  # the crash's own line, from the diagnosis of its journal
    assert "1 failed (b300), 2 not reached (b300-2, b300-3)" in out, out[-4000:]
    for name in ("b300-2", "b300-3"):
        assert lines[name].startswith("NOT REACHED in rollout batch 2 of 2: the rollout stopped after batch 1 (b300)"), \
            lines[name]
    # The canary serves its old configuration again, from its old files; the others are as they were.
    info = server_info(lab, "b300")
    assert info["status"] == "Up" and info["enable_two_batch_overlap"] is False
    assert info["mem_fraction_static"] == old["mem_fraction_static"]
    assert unit_sha(lab, "b300") == shas["b300"]
    assert started(lab, "b300") != processes["b300"]  # (it did restart twice: the new flag, then back)
    for name in ("b300-2", "b300-3"):
        assert unit_sha(lab, name) == shas[name] and started(lab, name) == processes[name]
        assert server_info(lab, name)["status"] == "Up"


def test_a_controller_killed_between_batches_is_finished_by_the_rerun(lab):
    converge(lab, AFTER_FLAG_CHANGE)
    cmd = pyinfra_command(lab.fleet_inventory, "-y", "deploy.py")
    for d in [*EXPOSED, AFTER_CONTROLLER_KILL, "rollout=1"]:
        cmd += ["--data", d]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYINFRA_PROGRESS": "off"}, start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            # b300 (batch 1) answered its smoke request: kill before batch 2 starts.
            if "[b300]" in line and "smoke request answered" in line:
                os.killpg(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
    assert server_info(lab, "b300")["mem_fraction_static"] == 0.65
    assert server_info(lab, "b300-2")["mem_fraction_static"] != 0.65

    res, out = fleet(lab, AFTER_CONTROLLER_KILL, "rollout=1")
    assert res.returncode == 0, out[-4000:]
    lines = summary(out)
    assert "changed in rollout" not in lines["b300"], lines["b300"]
    for name in TARGETS:
        assert server_info(lab, name)["mem_fraction_static"] == 0.65
        # Not half-switched: the process runs the unit on disk (started after it was written).
        unit_mtime = float(lab.run(name, f"stat -c %.9Y {UNIT}").stdout)
        start = lab.run(name, "systemctl show -p ExecMainStartTimestamp --timestamp=unix sglang").stdout
        assert float(start.strip().split("@")[-1]) >= int(unit_mtime), (name, start, unit_mtime)


VENV = "/opt/sglang/venv"


def listing(lab, name: str, root: str) -> str:
    """A digest of every entry under ``root`` (type, size, mtime, mode, name), bytecode left out."""
    return lab.run(name, f"cd {root}/ && find . -name __pycache__ -prune -o -printf '%y %s %T@ %m %P\\n' | sort | "
                         "sha256sum").stdout.split()[0]


def test_a_venv_update_rolls_out_the_same_way_and_the_old_venv_stays_untouched(lab):
    converge(lab, AFTER_CONTROLLER_KILL)
    before = {}
    for name in TARGETS:
        live = lab.run(name, f"readlink -f {VENV}").stdout.strip()
        # What the old venv will be once switched away from: itself, or (still a directory) adopted.
        old = live if live != VENV else f"{VENV}.noderig/adopted"
        before[name] = (old, listing(lab, name, VENV))
    version = lab.run("ct200", f"{VENV}/bin/python -c 'import sglang.version as v; print(v.__file__)'").stdout.strip()
    lab.run("ct200", f"cp -p {version} /root/version.py.orig && "
                     f"sed -i 's/^__version__ = .*/__version__ = \"0.5.9.post16\"/' {version}")
    try:
        with Prober(lab) as prober:
            res, out = fleet(lab, AFTER_CONTROLLER_KILL, "rollout=1")
            time.sleep(0.5)
    finally:  # the reference as the lab made it, for the tests after this one
        lab.run("ct200", f"mv -f /root/version.py.orig {version}")
    assert res.returncode == 0, out[-4000:]
    assert "beside the live one" in out, out[-4000:]
    # The reference sent it once; the others took it from b300's new venv, ready beside its live one.
    assert venv_copies(out) == {"b300": "ct200", "b300-2": "b300", "b300-3": "b300"}, out[-4000:]
    everyone = sorted((a, b, name) for name in TARGETS for a, b in prober.down_spans(name))
    assert [name for _, _, name in everyone] == list(TARGETS), everyone
    for (a1, b1, n1), (a2, b2, n2) in zip(everyone, everyone[1:]):
        assert a2 > b1, f"{n1} and {n2} were down at the same time: {everyone}"
    for name in TARGETS:
        assert server_info(lab, name)["version"] == "0.5.9.post16"
        live = lab.run(name, f"readlink -f {VENV}").stdout.strip()
        assert live.startswith(f"{VENV}.noderig/") and live != before[name][0], live
        # The old venv, never written to: kept whole as the rollback target.
        old, digest = before[name]
        assert listing(lab, name, old) == digest, (name, old)


MODEL_REPO = "moonshotai/Kimi-K2.6"
MODEL_DIR = "/models/Kimi-K2.6"
SHARD = "model-00001-of-000004.safetensors"


def live_checkpoint(lab, name: str) -> str:
    return lab.run(name, f"readlink -f {MODEL_DIR}").stdout.strip()


@contextlib.contextmanager
def hub_revision(lab, revision: int):
    """The lab Hub's model repo at a new revision (its config.json gains a key), then back to
    the bytes and mtime the lab made it with (the Hub's digests are cached by size and mtime)."""
    config = lab.repo_path(MODEL_REPO) / "config.json"
    original, st = config.read_bytes(), config.stat()

    def put(data: bytes):
        config.write_bytes(data)
        if data == original:
            os.utime(config, ns=(st.st_atime_ns, st.st_mtime_ns))
        hub_call(lab, "/_lab/rescan", {})

    try:
        put((json.dumps({**json.loads(original), "noderig_lab_revision": revision}, indent=2) + "\n").encode())
        yield lambda: put(original)
    finally:
        put(original)


def test_a_new_checkpoint_revision_goes_beside_the_live_one_and_a_failed_canary_goes_back_to_the_old(lab):
    converge(lab, AFTER_CONTROLLER_KILL)
    before = {}
    for name in TARGETS:
        live = live_checkpoint(lab, name)
        # What the old revision's directory will be once switched away from (as for the venv).
        old = live if live != MODEL_DIR else f"{MODEL_DIR}.noderig/adopted"
        before[name] = (old, listing(lab, name, MODEL_DIR), lab.run(name, f"stat -c %i {MODEL_DIR}/{SHARD}").stdout)
    with hub_revision(lab, 2) as back_to_the_first:
        with Prober(lab) as prober:
            res, out = fleet(lab, AFTER_CONTROLLER_KILL, "rollout=1")
            time.sleep(0.5)
        assert res.returncode == 0, out[-4000:]
        assert f"new revision beside {MODEL_DIR}" in out, out[-4000:]
        everyone = sorted((a, b, name) for name in TARGETS for a, b in prober.down_spans(name))
        assert [name for _, _, name in everyone] == list(TARGETS), everyone
        for (a1, b1, n1), (a2, b2, n2) in zip(everyone, everyone[1:]):
            assert a2 > b1, f"{n1} and {n2} were down at the same time: {everyone}"
        revision = {}
        for name in TARGETS:
            old, digest, inode = before[name]
            revision[name] = live_checkpoint(lab, name)
            assert revision[name].startswith(f"{MODEL_DIR}.noderig/") and revision[name] != old, revision[name]
            assert json.loads(lab.run(name, f"cat {MODEL_DIR}/config.json").stdout)["noderig_lab_revision"] == 2
            # The shard both revisions share was linked, not fetched; the old revision was never written.
            assert lab.run(name, f"stat -c %i {MODEL_DIR}/{SHARD}").stdout == inode
            assert listing(lab, name, old) == digest, (name, old)
            assert server_info(lab, name)["status"] == "Up"
        res, out = fleet(lab, AFTER_CONTROLLER_KILL, "rollout=1")
        assert res.returncode == 0 and changed_ops(out) == {}, out[-4000:]

        # Back to the first revision with a flag the canary crashes on: it is rolled back to the
        # revision it served, and the others are never touched.
        back_to_the_first()
        res, out = fleet(lab, AFTER_CONTROLLER_KILL, 'extra_flags=["--enable-two-batch-overlap"]', "rollout=1,100%")
        assert res.returncode != 0, out[-4000:]
        assert summary(out)["b300"].startswith('FAILED at "Ready, or rolled back (batch 1)": ROLLED BACK'), out[-4000:]
        for name in TARGETS:
            assert live_checkpoint(lab, name) == revision[name], name
            assert json.loads(lab.run(name, f"cat {MODEL_DIR}/config.json").stdout)["noderig_lab_revision"] == 2
            assert server_info(lab, name)["status"] == "Up"


def test_a_controller_killed_inside_a_batch_after_the_switch_is_finished_by_the_rerun(lab):
    converge(lab, AFTER_CONTROLLER_KILL)
    with hub_revision(lab, 3):
        cmd = pyinfra_command(lab.fleet_inventory, "-y", "deploy.py")
        for d in [*EXPOSED, AFTER_CONTROLLER_KILL, "rollout=1"]:
            cmd += ["--data", d]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYINFRA_PROGRESS": "off"}, start_new_session=True)
        seen, launchers = [], 0
        try:
            for line in proc.stdout:
                seen.append(line)
                # The launcher's write opens the service step's writes in each batch: at batch 2's,
                # b300-2 has been switched to the new revision and its server stopped.
                launchers += "Starting operation: Server launcher" in line
                if launchers == 2:
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
        finally:
            proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
        revision = live_checkpoint(lab, "b300-2")
        assert revision != live_checkpoint(lab, "b300-3"), "the kill landed after b300-2's switch, before b300-3's"
        assert lab.run("b300-2", "systemctl is-active sglang", check=False).stdout.strip() != "active"

        res, out = fleet(lab, AFTER_CONTROLLER_KILL, "rollout=1")
        assert res.returncode == 0, out[-4000:]
        assert "changed in rollout" not in summary(out)["b300"]
        for name in TARGETS:
            assert json.loads(lab.run(name, f"cat {MODEL_DIR}/config.json").stdout)["noderig_lab_revision"] == 3
            assert server_info(lab, name)["status"] == "Up"
            # Not half-switched: the server started after its checkpoint link was switched.
            switched = float(lab.run(name, f"stat -c %.9Y {MODEL_DIR}").stdout)
            start = lab.run(name, "systemctl show -p ExecMainStartTimestamp --timestamp=unix sglang").stdout
            assert float(start.strip().split("@")[-1]) >= int(switched), (name, start, switched)
        assert live_checkpoint(lab, "b300-2") == revision


def test_a_new_revision_with_no_room_beside_is_fetched_in_place_one_batch_at_a_time(lab):
    converge(lab, AFTER_CONTROLLER_KILL)
    live = {name: live_checkpoint(lab, name) for name in TARGETS}
    with hub_revision(lab, 4):
        with Prober(lab) as prober:
            res, out = fleet(lab, AFTER_CONTROLLER_KILL, "rollout=1", "checkpoint_beside=False")
            time.sleep(0.5)
        assert res.returncode == 0, out[-4000:]
        assert "fetched into /models/Kimi-K2.6 in its batch" in out, out[-4000:]  # the plan says it
        everyone = sorted((a, b, name) for name in TARGETS for a, b in prober.down_spans(name))
        assert [name for _, _, name in everyone] == list(TARGETS), everyone
        for (a1, b1, n1), (a2, b2, n2) in zip(everyone, everyone[1:]):
            assert a2 > b1, f"{n1} and {n2} were down at the same time: {everyone}"
        for name in TARGETS:
            assert live_checkpoint(lab, name) == live[name], "in place: the same directory"
            assert json.loads(lab.run(name, f"cat {MODEL_DIR}/config.json").stdout)["noderig_lab_revision"] == 4
            assert server_info(lab, name)["status"] == "Up"
        res, out = fleet(lab, AFTER_CONTROLLER_KILL, "rollout=1", "checkpoint_beside=False")
        assert res.returncode == 0 and changed_ops(out) == {}, out[-4000:]
