"""Benchmark: the venv to a fleet, from the reference alone (``venv_from_peers=False``, as
before) and from peers (the default), in the same run, against plain ``rsync`` of the same
venv from the reference to one node.

    .venv/bin/python bench/venv_fleet.py [--files 4000] [--uplink-mbit 100]

Boots its own lab (``NODERIG_LAB``, default "benchvenv") with one reference and three
targets, builds a venv of realistic shape on ct200 (bench/venv_copy.py's), and limits ct200's
uplink (``tc`` on its interface: the reference across a slower link than the cluster's, the
case the issue describes). For each mode, on three fresh targets: the deploy's venv step
(``steps=environment``), timed, and the bytes ct200 sent (its interface's tx counter).

Reports ``reference_sent / venv_bytes`` (goal: about 1 from peers; 3 from the reference alone)
and the fleet's wall time over one plain rsync at the same uplink. Results go to
bench/results/venv_fleet.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from noderig_lab.lab import Lab  # noqa: E402
from noderig_lab.layout import LabLayout  # noqa: E402
from venv_copy import MAKE_VENV  # noqa: E402

TARGETS = ("b300", "b300-2", "b300-3")
VENV = "/opt/bench/venv-fleet"
TX = "/sys/class/net/host0/statistics/tx_bytes"
KEY = "/root/.ssh/bench-rsync"


def sh(lab, name: str, command: str) -> str:
    return lab.run(name, command, timeout=1800).stdout


def deploy(lab, inventory: Path, from_peers: bool) -> tuple[float, str]:
    args = [str(ROOT / ".venv/bin/pyinfra"), "-y", str(inventory), "deploy.py", "--data", "steps=environment",
            "--data", f"venv_path={VENV}", "--data", "venv_import_check=json", "--data", f"venv_from_peers={from_peers}"]
    t0 = time.monotonic()
    res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYINFRA_PROGRESS": "off"})
    took = time.monotonic() - t0
    out = res.stdout + res.stderr
    if res.returncode != 0:
        raise SystemExit(f"deploy failed (venv_from_peers={from_peers}):\n{out[-4000:]}")
    return took, out


def measure(lab, inventory: Path, from_peers: bool) -> dict:
    for name in TARGETS:
        lab.reset(name)
    before = int(sh(lab, "ct200", f"cat {TX}"))
    wall, out = deploy(lab, inventory, from_peers)
    sent = int(sh(lab, "ct200", f"cat {TX}")) - before
    copies = [line.split("] ", 1)[-1] for line in out.splitlines() if "venv copied" in line]
    return {"wall_s": round(wall, 2), "reference_sent_bytes": sent, "copies": copies}


def plain_rsync(lab) -> float:
    """One plain ``rsync -aH`` of the venv from ct200 to a fresh b300, at the same uplink."""
    lab.reset("b300")
    sh(lab, "ct200", f"rm -f {KEY}*; ssh-keygen -q -t ed25519 -N '' -f {KEY}")
    sh(lab, "b300", f"mkdir -p /root/.ssh && echo '{sh(lab, 'ct200', f'cat {KEY}.pub').strip()}' >> /root/.ssh/authorized_keys")
    ssh = f"ssh -i {KEY} -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
    t0 = time.monotonic()
    sh(lab, "ct200", f"rsync -aH --numeric-ids --mkpath -e '{ssh}' {VENV}/ root@b300:{VENV}/")
    return round(time.monotonic() - t0, 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--so-mb", type=int, default=40, help="size of each of the few large shared libraries")
    ap.add_argument("--uplink-mbit", type=int, default=100)
    args = ap.parse_args()
    lab = Lab(LabLayout.from_env(os.environ.get("NODERIG_LAB", "benchvenv")))
    inventory = lab.up(targets=len(TARGETS))
    try:
        sh(lab, "ct200", f"python3 - {VENV} {args.files} {max(2, args.files // 2000)} {args.so_mb} <<'EOF'\n"
                         f"{MAKE_VENV}\nEOF")
        size = int(sh(lab, "ct200", f"du -sb {VENV} | cut -f1"))
        sh(lab, "ct200", f"tc qdisc replace dev host0 root tbf rate {args.uplink_mbit}mbit burst 256kb latency 400ms")
        plain = plain_rsync(lab)
        off = measure(lab, inventory, False)
        on = measure(lab, inventory, True)
    finally:
        if os.environ.get("NODERIG_KEEP_LAB") != "1":
            lab.down()
    result = {
        "venv_bytes": size, "uplink_mbit": args.uplink_mbit, "plain_rsync_one_node_s": plain,
        "from_reference": off, "from_peers": on,
        "reference_sent_over_venv": {"from_peers": round(on["reference_sent_bytes"] / size, 3),
                                     "from_reference": round(off["reference_sent_bytes"] / size, 3)},
        "fleet_wall_over_one_plain_rsync": {"from_peers": round(on["wall_s"] / plain, 3),
                                            "from_reference": round(off["wall_s"] / plain, 3)},
    }
    out = ROOT / "bench/results/venv_fleet.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
