"""Crash safety on the lab: the controller is killed (SIGKILL: no cleanup runs) at points across
every step of a deploy to a bare node. Each time:

- nothing half-written is in place: the unit, the environment file and the launcher are
  absent or complete (byte-identical to what the converged deploy installs);
- no file is recorded as verified unless its bytes really are the Hub's;
- a rerun converges (exit 0, the server answers), leaves no temporary file and no copy key
  behind, and a third run changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, changed_ops, deploy, hub_call

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PLACED = ("/etc/systemd/system/sglang.service", "/etc/noderig/sglang.env", "/usr/local/lib/noderig/launch.py")
CHECKPOINTS = ("/models/Kimi-K2.6", "/models/Kimi-K2.6-DFlash")

# Run on the node: the placed files' digests, leftover temporary files, copy keys, and every
# record entry whose file is not what the manifest says.
NODE_STATE = r"""
import glob, hashlib, json, os, sys
out = {"placed": {}, "tmp": [], "keys": [], "false_verified": [], "recorded": 0, "complete": {}, "recorded_in": {}}
for p in sys.argv[1].split(","):
    out["placed"][p] = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None
out["tmp"] = sorted(glob.glob("/etc/**/*.noderig-tmp", recursive=True) + glob.glob("/usr/local/lib/noderig/*.noderig-tmp"))
try:
    out["keys"] = [l.split()[-1] for l in open("/root/.ssh/authorized_keys") if "noderig-transient-" in l]
except OSError:
    pass
for d in sys.argv[2].split(","):
    try:
        manifest = json.load(open(f"{d}/.noderig/manifest.json"))
        record = json.load(open(f"{d}/.noderig/verified.json"))
    except (OSError, ValueError):
        continue
    entries = {f["path"]: f for f in manifest["files"]}
    out["complete"][d] = len(record) == len(entries)
    out["recorded_in"][d] = len(record)
    for rel, rec in record.items():
        out["recorded"] += 1
        e, path = entries.get(rel), f"{d}/{rel}"
        if e is None or not os.path.exists(path):
            out["false_verified"].append(f"{path}: recorded, but {'not in the manifest' if e is None else 'missing'}")
            continue
        data = open(path, "rb").read()
        h = hashlib.sha256(data) if "sha256" in e else hashlib.sha1(b"blob %d\0" % len(data) + data)
        if h.hexdigest() != e.get("sha256", e.get("git_oid")):
            out["false_verified"].append(f"{path}: recorded as verified, but its bytes are not the Hub's")
print(json.dumps(out))
"""

# (what is running when the controller dies, the line that starts it, seconds after, the lab
# Hub's faults meanwhile: a slowed CDN keeps the download going long enough to land in it;
# and the killed deploy's settings, if any)
SLOW_CDN = {"rate_limit_bps": {"bps": 256 << 10}}
KILL_POINTS = [
    # (the draft's manifest follows in a few tenths of a second: kill early)
    ("the checkpoint's node scripts and manifest being written", "Kimi-K2.6: starting the download of", 0.2, None),
    # (the download runs on the node while the prerequisites and the venv are installed; aria2
    # is installed already, so the rest can take under 1.5 s on an idle machine: killed once
    # apt is seen running on the node, RUNNING_FIRST)
    ("apt installing the prerequisites", "Starting operation: Prerequisites \n", 0.0, None),
    ("rsync copying the venv", "Starting operation: Venv", 0.4, None),
    # (killed while aria2 downloads on its own, the next steps running)
    ("aria2 downloading the checkpoint", "downloading on the node while the next steps run", 0.5, SLOW_CDN),
    # (the download started at the checkpoint step: started first, it is over before the
    # prerequisites and the venv are, and nothing is left to hash as it completes; the rerun
    # then takes it over with the download first)
    ("files being hashed as aria2 completes them", "MiB/s, ETA", 3.0, SLOW_CDN, "download_first=False"),
    # (its files came while the venv was copied: the step only takes them over and verifies,
    # in well under 0.1 s since commands stopped waiting for the node's delayed ACK: kill at once)
    ("the draft's download", "Starting operation: Checkpoint z-lab", 0.0, None),
    ("the environment file being written", "Starting operation: Server environment file", 0.0, None),
    ("the unit being written", "Starting operation: sglang.service", 0.05, None),
    ("the restart, after the unit was written", "Starting operation: sglang running and enabled", 0.0, None),
    ("readiness being awaited", "Starting operation: sglang ready", 0.3, None),
]


# Kill points whose step is short, killed as soon as the node runs it (polled after the trigger):
# a fixed delay after the trigger line drifted past the step on a loaded machine (a clean-clone
# run killed after apt had finished).
RUNNING_FIRST = {"apt installing the prerequisites": "pgrep -x 'apt-get|dpkg' >/dev/null"}

# Where the kill landed, from the node: what the killed run left running or half-done. Each
# kill point has a predicate over it that proves the kill fell in that step, so kill points
# cannot drift onto the same step unnoticed.
WHERE = r"""
import json, os, subprocess
def sh(c):
    return subprocess.run(["sh", "-c", c], capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "apt": int(sh("pgrep -c -x 'apt-get|dpkg' || true") or 0) > 0 or sh("dpkg --audit") != "",
    "packages": sh("dpkg-query -W -f '${db:Status-Abbrev}\\n' aria2 python3-dev 2>/dev/null").split() == ["ii", "ii"],
    "venv_files": int(sh("find /opt/sglang/venv -type f 2>/dev/null | wc -l")),
    "manifest": os.path.exists("/models/Kimi-K2.6/.noderig/manifest.json"),
    "draft_manifest": os.path.exists("/models/Kimi-K2.6-DFlash/.noderig/manifest.json"),
    "aria2": sh("systemctl is-active noderig-aria2") == "active",
    "sglang": sh("systemctl is-active sglang"),
}))
"""
LANDED = {
    "the checkpoint's node scripts and manifest being written": lambda w, s: w["venv_files"] == 0
    and not s["complete"].get(CHECKPOINTS[0]) and not w["draft_manifest"],
    # (killed once apt was seen running, RUNNING_FIRST: apt goes on after the controller dies,
    # and may have finished by the time the node is looked at; the venv copy never began)
    "apt installing the prerequisites": lambda w, s: w["manifest"] and w["venv_files"] == 0,
    "rsync copying the venv": lambda w, s: w["packages"] and w["manifest"] and not s["complete"].get(CHECKPOINTS[0])
    and s["placed"][PLACED[1]] is None,
    "aria2 downloading the checkpoint": lambda w, s: w["aria2"] and not s["complete"].get(CHECKPOINTS[0]),
    "files being hashed as aria2 completes them": lambda w, s: w["aria2"] and not s["complete"].get(CHECKPOINTS[0])
    and s["recorded_in"].get(CHECKPOINTS[0], 0) > 0,
    "the draft's download": lambda w, s: s["complete"].get(CHECKPOINTS[0]) and not s["complete"].get(CHECKPOINTS[1])
    and s["placed"][PLACED[0]] is None,
    "the environment file being written": lambda w, s: all(s["complete"].get(d) for d in CHECKPOINTS)
    and s["placed"][PLACED[0]] is None,
    "the unit being written": lambda w, s: s["placed"][PLACED[1]] is not None and w["sglang"] != "active",
    "the restart, after the unit was written": lambda w, s: s["placed"][PLACED[0]] is not None,
    "readiness being awaited": lambda w, s: w["sglang"] in ("active", "activating", "failed"),
}



def node_state(lab) -> dict:
    res = lab.run("b300", f"python3 - {','.join(PLACED)} {','.join(CHECKPOINTS)} <<'EOF'\n{NODE_STATE}\nEOF")
    return json.loads(res.stdout.strip().splitlines()[-1])


def kill_deploy_at(lab, trigger: str, delay: float, *data: str, faults: dict | None = None,
                   running: str | None = None) -> str:
    """Run the deploy; ``delay`` seconds after ``trigger`` appears in its output (and, with
    ``running``, once that command succeeds on b300: polled for up to 10 s), SIGKILL it."""
    if faults:
        hub_call(lab, "/_lab/faults", faults)
    cmd = [os.path.join(os.path.dirname(sys.executable), "pyinfra"), str(lab.inventory), "-y", "deploy.py"]
    for d in data:
        cmd += ["--data", d]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYINFRA_PROGRESS": "off"})
    seen, seen_running = [], False
    try:
        for line in proc.stdout:
            seen.append(line)
            if trigger in line:
                seen_running = not running or any(lab.run("b300", running, check=False).returncode == 0
                                                  for _ in range(200))
                time.sleep(delay)
                proc.kill()
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if faults:
            hub_call(lab, "/_lab/reset", {})
    out = "".join(seen)
    assert proc.returncode == -9, f"the deploy ended before {trigger!r}:\n{out[-3000:]}"
    # (the kill's landing proof for a step apt outlives: it was running when the kill went out)
    assert seen_running, f"`{running}` never succeeded on b300 after {trigger!r}: the kill landed elsewhere"
    return out


@pytest.fixture(scope="module")
def converged_state(lab):
    """What a clean deploy installs: the reference for 'complete'."""
    lab.reset("b300")
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    state = node_state(lab)
    assert all(state["placed"].values()) and state["recorded"] > 0 and not state["false_verified"]
    return state


@pytest.mark.parametrize("what,trigger,delay,faults,data", [(*p, *([None] * (5 - len(p)))) for p in KILL_POINTS],
                         ids=[p[0].replace(" ", "-") for p in KILL_POINTS])
def test_a_deploy_killed_anywhere_converges_on_rerun_with_nothing_half_done(lab, converged_state, what, trigger,
                                                                            delay, faults, data):
    lab.reset("b300")
    kill_deploy_at(lab, trigger, delay, *([data] if data else []), faults=faults, running=RUNNING_FIRST.get(what))
    lab.run("b300", "sleep 0.5")  # whatever the kill left running on the node keeps running

    after_kill = node_state(lab)
    where = json.loads(lab.run("b300", f"python3 - <<'EOF'\n{WHERE}\nEOF").stdout.strip().splitlines()[-1])
    print(f"killed during {what}: {where}")
    assert LANDED[what](where, after_kill), f"the kill meant for {what} landed elsewhere: {where}, {after_kill}"
    for path, digest in after_kill["placed"].items():
        assert digest in (None, converged_state["placed"][path]), f"{path} is half-written after a kill during {what}"
    assert after_kill["false_verified"] == [], after_kill["false_verified"]

    res, out = deploy(lab)
    assert res.returncode == 0, f"the rerun after a kill during {what} failed:\n{out[-4000:]}"
    state = node_state(lab)
    assert state["placed"] == converged_state["placed"]
    assert state["recorded"] == converged_state["recorded"] and state["false_verified"] == []
    assert state["tmp"] == [] and state["keys"] == [], state
    assert lab.run("ct200", "ls /root/.ssh | grep -c noderig-transient-", check=False).stdout.strip() == "0"
    assert lab.run("b300", "curl -sf localhost:30000/health", check=False).returncode == 0

    res, out = deploy(lab)
    assert res.returncode == 0 and changed_ops(out) == {}, changed_ops(out)


def test_a_unit_changed_but_not_yet_restarted_when_killed_is_restarted_by_the_rerun(lab, converged_state):
    """The window between writing a changed unit and restarting the running server: the
    rerun finds the unit already as desired, and must still restart the server."""
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    renamed = "served_model_name=kimi-k2.6-renamed"
    kill_deploy_at(lab, "Starting operation: sglang running and enabled", 0.0, renamed)
    assert "kimi-k2.6-renamed" in lab.run("b300", f"cat {PLACED[0]}").stdout

    res, out = deploy(lab, renamed)
    assert res.returncode == 0, out[-3000:]
    assert "sglang: restart (the unit changed since it started" in out, out[-3000:]
    models = lab.run("b300", "curl -sf localhost:30000/v1/models").stdout
    assert "kimi-k2.6-renamed" in models, f"the server still runs the old unit:\n{models}\n{out[-3000:]}"
    res, out = deploy(lab, renamed)
    assert changed_ops(out) == {}, changed_ops(out)
    res, out = deploy(lab)  # back to the defaults for the tests that follow
    assert res.returncode == 0, out[-3000:]
