"""Benchmark: a no-op rerun of the whole deploy against the pyinfra floor, same hosts, one run.

    .venv/bin/python bench/noop.py [--fleet] [--reps 5]

Boots its own lab ("benchnoop": one reference and one target, or with ``--fleet`` three
targets), converges it with the whole deploy, then alternates, ``--reps`` times each:

- the floor: ``pyinfra INVENTORY fact server.Hostname``, pyinfra's own CLI on the same
  inventory (connect to every host and read one fact on each);
- the no-op rerun: ``pyinfra INVENTORY -y deploy.py``, which must change nothing (checked on
  pyinfra's results table and noderig's summary: a run that changes something is an error).

Figures: the medians of both wall times and their ratio (goal <= 2.0), when each stage of a
run ended (connected, deploy file loaded, operations done: medians, seconds from the start),
the commands per host (noderig's summary), and one more rerun under ``--debug`` read into where the round trips go:
per host, each fact (with its arguments) and each operation command, counted in the
deploy-file pass (``load``) and in the operation run (``run``). Results in
bench/results/noop.json (noop_fleet.json with ``--fleet``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from noderig_lab.lab import Lab, write_inventory  # noqa: E402
from noderig_lab.layout import LabLayout  # noqa: E402

PYINFRA = str(ROOT / ".venv/bin/pyinfra")
FLOOR_FACT = "server.Hostname"
SUMMARY_LINE = re.compile(r"^\s*(\S+)\s{2,}(ok|FAILED|NOT REACHED|would)(.*); (\d+) commands \(([\d.]+) s on the host\)$",
                          re.M)


# pyinfra's own lines that end one stage of a run and begin the next: the seconds from the
# start to each say where a run's wall time goes (connecting, loading the deploy file with its
# plans' facts, the operations, the rest: disconnecting and the summary).
STAGES = (("connected", "--> Preparing operation files"), ("connected", "--> Gathering facts"),
          ("loaded", "--> Skipping change detection"), ("loaded", "--> Detected changes"),
          ("operations_done", "--> Results"))


def pyinfra(inventory: Path, *args: str) -> tuple[float, str, dict[str, float]]:
    """Wall time, whole output and the time each stage ended (seconds from the start)."""
    began = time.monotonic()
    proc = subprocess.Popen([PYINFRA, str(inventory), *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYINFRA_PROGRESS": "off", "PYTHONUNBUFFERED": "1"})
    lines, stages = [], {}
    for line in proc.stdout:
        lines.append(line)
        for stage, marker in STAGES:
            if stage not in stages and line.startswith(marker):
                stages[stage] = round(time.monotonic() - began, 2)
    proc.wait(timeout=900)
    took = time.monotonic() - began
    out = "".join(lines)
    if proc.returncode != 0:
        raise SystemExit(f"`pyinfra {inventory.name} {' '.join(args)}` failed:\n{out[-4000:]}")
    return took, out, stages


def host_lines(out: str) -> dict[str, dict]:
    """noderig's end-of-run summary: host -> its outcome, what changed and its commands."""
    tail = out.split("--> noderig:")[-1]
    return {m.group(1): {"line": (m.group(2) + m.group(3)).strip(), "commands": int(m.group(4)),
                         "host_s": float(m.group(5))} for m in SUMMARY_LINE.finditer(tail)}


def assert_no_change(out: str) -> dict[str, dict]:
    """Every host ok with nothing changed, on noderig's summary and pyinfra's Grand total."""
    lines = host_lines(out)
    total = re.search(r"Grand total\s+\d+\s+(\S+)", out)
    changed = [f"{n}: {v['line']}" for n, v in lines.items()
               if not v["line"].startswith(("ok, no changes", "ok, no operations of its own"))]
    if not lines or changed or not total or total.group(1) != "-":
        raise SystemExit("the rerun was not a no-op:\n" + "\n".join(changed) + f"\n{out[-3000:]}")
    return lines


def noop(inventory: Path) -> tuple[float, dict[str, dict], dict[str, float]]:
    took, out, stages = pyinfra(inventory, "-y", "deploy.py")
    return took, assert_no_change(out), stages


def floor(inventory: Path) -> tuple[float, dict[str, float]]:
    took, _, stages = pyinfra(inventory, "-y", "fact", FLOOR_FACT)
    return took, stages


def median_stages(runs: list[dict[str, float]]) -> dict[str, float]:
    return {stage: round(statistics.median(r[stage] for r in runs if stage in r), 2)
            for stage in dict.fromkeys(s for r in runs for s in r)}


# pyinfra's --debug lines: a fact read logs "Getting fact: <name> (<args>)" and, with no I/O in
# between (so no other host's greenlet runs), "Running command on <host>"; an operation's
# command logs the second line alone.
GETTING = re.compile(r"Getting fact: (\S+) \((.*)\) \(ensure_hosts")
RUNNING = re.compile(r"Running command on (\S+): \(pty=\w+\) (.*)$")


def breakdown(out: str) -> dict[str, dict[str, dict[str, int]]]:
    """host -> phase (load, run) -> what ran (``fact Name (args)`` or ``command <start>``) -> count."""
    found: dict[str, dict[str, Counter]] = {}
    phase, pending = "load", None
    for line in out.splitlines():
        if "--> Beginning operation run" in line:
            phase = "run"
        if m := GETTING.search(line):
            name = m.group(1).rsplit(".", 1)[-1]
            # (the facts read at once: how many, not their whole list)
            args = f"{m.group(2).count('], [') + 1} facts at once" if name == "Facts" else m.group(2)
            pending = f"fact {name} ({args})"
        elif m := RUNNING.search(line):
            what = pending or "command " + " ".join(m.group(2).split()[:4])[:90]
            found.setdefault(m.group(1), {}).setdefault(phase, Counter())[what] += 1
            pending = None
        elif line.strip():
            pending = pending if "Loaded fact" not in line and "Running command" not in line else None
    return {h: {p: dict(c.most_common()) for p, c in phases.items()} for h, phases in found.items()}


def lab_inventory(lab: Lab, fleet: bool, reuse: bool) -> Path:
    """The lab's inventory: the reference and every target (``--fleet``) or the first target."""
    inventory = Path(lab.read_record()["inventory"]) if reuse else lab.up(targets=3 if fleet else 1)
    if fleet:
        return inventory
    single = inventory.with_name(inventory.stem + "_single.py")
    write_inventory(single, lab.layout, [h for h in lab.hosts if h.role == "reference"] +
                    [h for h in lab.hosts if h.role == "target"][:1])
    return single


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleet", action="store_true", help="three targets and the reference (default: one target)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--reuse", action="store_true", help="the lab already up (NODERIG_LAB), kept afterwards")
    args = ap.parse_args()
    lab = Lab(LabLayout.from_env(os.environ.get("NODERIG_LAB", "benchnoop")))
    inventory = lab_inventory(lab, args.fleet, args.reuse)
    try:
        converge = pyinfra(inventory, "-y", "deploy.py")[0]
        noop(inventory)  # the first rerun may still stop what the converging run left serving
        floors, reruns, commands, host_s, floor_stages, noop_stages = [], [], {}, {}, [], []
        for _ in range(args.reps):
            took, stages = floor(inventory)
            floors.append(took)
            floor_stages.append(stages)
            took, lines, stages = noop(inventory)
            reruns.append(took)
            noop_stages.append(stages)
            commands = {n: v["commands"] for n, v in lines.items()}
            host_s = {n: v["host_s"] for n, v in lines.items()}
        debug_out = pyinfra(inventory, "-y", "deploy.py", "--debug")[1]
        assert_no_change(debug_out)
        result = {
            "hosts": sorted(commands), "reps": args.reps, "converge_s": round(converge, 2),
            "floor": {"command": f"pyinfra INVENTORY fact {FLOOR_FACT}", "runs_s": [round(t, 2) for t in floors],
                      "median_s": round(statistics.median(floors), 2), "stages_ended_s": median_stages(floor_stages)},
            "noop_rerun": {"command": "pyinfra INVENTORY -y deploy.py", "runs_s": [round(t, 2) for t in reruns],
                           "median_s": round(statistics.median(reruns), 2),
                           "stages_ended_s": median_stages(noop_stages), "commands_per_host": commands,
                           "seconds_on_each_host": host_s},
            "ratio": round(statistics.median(reruns) / statistics.median(floors), 2), "goal": 2.0,
            "breakdown": breakdown(debug_out),
        }
    finally:
        if not args.reuse and os.environ.get("NODERIG_KEEP_LAB") != "1":
            lab.down()
    out = ROOT / f"bench/results/noop{'_fleet' if args.fleet else ''}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "breakdown"}, indent=1))
    for name, phases in result["breakdown"].items():
        for phase, counts in phases.items():
            print(f"{name} {phase}: {sum(counts.values())} commands")
            for what, n in counts.items():
                print(f"    {n:3d}  {what[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
