"""Benchmark: the deploy's venv copy vs plain `rsync -a` between the same two lab hosts.

    .venv/bin/python bench/venv_copy.py [--files 2000,8000,32000] [--repeat 3]

Boots its own lab ("bench"), builds venvs of realistic shape on ct200 (a real venv plus
thousands of small .py files and a few large incompressible shared libraries, like torch's),
then measures, for each size, in the same run:

- initial copy: `pyinfra ... deploy.py --data steps=environment` (the whole user command:
  pyinfra start-up, preflight facts, listings of both trees, the copy, its verification)
  against plain `rsync -aH --delete` from ct200 to a fresh directory on b300;
- re-sync after one file changed on the reference, and a no-op rerun, for both.

Ratios are plain / deploy (1.0 = as fast as plain rsync; the goal for the initial copy is
>= 0.9). Results go to bench/results/venv_copy.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from noderig_lab.lab import Lab  # noqa: E402
from noderig_lab.layout import LabLayout  # noqa: E402

# Runs on ct200: a venv of the given shape, deterministic, ~`so_mb` of large libraries.
MAKE_VENV = r"""
import os, random, sys, subprocess
path, files, so_count, so_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if not os.path.exists(path + "/bin/python"):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
site = f"{path}/lib/python3.11/site-packages"
rng = random.Random(files)
for i in range(files):
    d = f"{site}/pkg{i % 97}/sub{i % 13}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/mod{i}.py", "wb") as f:
        f.write(rng.randbytes(rng.randint(512, 24000)))
for i in range(so_count):
    os.makedirs(f"{site}/libs", exist_ok=True)
    with open(f"{site}/libs/_kernel{i}.so", "wb") as f:
        f.write(rng.randbytes(so_mb << 20))
"""


def timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


class Bench:
    def __init__(self, lab: Lab):
        self.lab = lab
        self.key = "/root/.ssh/bench-rsync"

    def sh(self, host: str, cmd: str) -> str:
        return self.lab.run(host, cmd, timeout=1800).stdout

    def setup_plain_rsync(self) -> None:
        self.sh("ct200", f"rm -f {self.key}*; ssh-keygen -q -t ed25519 -N '' -f {self.key}")
        pub = self.sh("ct200", f"cat {self.key}.pub").strip()
        self.sh("b300", f"echo '{pub}' >> /root/.ssh/authorized_keys")

    def plain_rsync(self, src: str, dst: str) -> None:
        ssh = f"ssh -i {self.key} -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
        self.sh("ct200", f"rsync -aH --delete --numeric-ids --mkpath -e '{ssh}' {src}/ root@b300:{dst}/")

    def deploy(self, venv: str) -> None:
        res = subprocess.run(
            [str(ROOT / ".venv/bin/pyinfra"), "-y", str(self.lab.inventory), "deploy.py",
             "--data", "steps=environment", "--data", f"venv_path={venv}", "--data", "venv_import_check=json"],
            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYINFRA_PROGRESS": "off"})
        if res.returncode != 0:
            raise SystemExit(f"deploy failed:\n{(res.stdout + res.stderr)[-3000:]}")

    def drop_caches(self) -> None:
        subprocess.run(["sync"])
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def run(sizes: list[int], repeat: int) -> dict:
    lab = Lab(LabLayout.from_env("bench"))
    lab.inventory = lab.up()
    b = Bench(lab)
    b.setup_plain_rsync()
    results = {}
    try:
        for files in sizes:
            so_count, so_mb = max(2, files // 2000), 100
            venv = f"/opt/bench/venv-{files}"
            b.sh("ct200", f"python3 - {venv} {files} {so_count} {so_mb} <<'EOF'\n{MAKE_VENV}\nEOF")
            size = int(b.sh("ct200", f"du -sb {venv} | cut -f1"))
            count = int(b.sh("ct200", f"find {venv} -type f | wc -l"))
            row = {"files": count, "bytes": size, "initial": [], "one_changed": [], "noop": []}
            for _ in range(repeat):
                b.sh("b300", f"rm -rf {venv} /opt/bench/plain-{files}")
                b.drop_caches()
                t_plain = timed(lambda: b.plain_rsync(venv, f"/opt/bench/plain-{files}"))
                b.drop_caches()
                t_deploy = timed(lambda: b.deploy(venv))
                row["initial"].append((t_plain, t_deploy))
                b.sh("ct200", f"echo '# changed {time.time()}' >> {venv}/lib/python3.11/site-packages/pkg1/sub1/mod1.py")
                row["one_changed"].append((timed(lambda: b.plain_rsync(venv, f"/opt/bench/plain-{files}")),
                                           timed(lambda: b.deploy(venv))))
                row["noop"].append((timed(lambda: b.plain_rsync(venv, f"/opt/bench/plain-{files}")),
                                    timed(lambda: b.deploy(venv))))
            results[files] = row
            b.sh("ct200", f"rm -rf {venv}")
            b.sh("b300", f"rm -rf {venv} /opt/bench/plain-{files}")
    finally:
        lab.down()
    return results


def report(results: dict) -> str:
    lines = ["files   MiB    | initial: rsync  deploy  ratio | one changed: rsync  deploy | no-op: rsync  deploy"]
    for row in results.values():
        med = {k: (statistics.median(p for p, _ in row[k]), statistics.median(d for _, d in row[k]))
               for k in ("initial", "one_changed", "noop")}
        ip, idp = med["initial"]
        cp, cd = med["one_changed"]
        npl, nd = med["noop"]
        lines.append(f"{row['files']:<7} {row['bytes'] / 2**20:<6.0f} | {ip:13.2f}s {idp:6.2f}s {ip / idp:5.2f} |"
                     f" {cp:11.2f}s {cd:6.2f}s | {npl:10.2f}s {nd:6.2f}s")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", default="2000,8000,32000")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    results = run([int(x) for x in args.files.split(",")], args.repeat)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "venv_copy.json").write_text(json.dumps(results, indent=1))
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
