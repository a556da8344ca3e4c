"""Benchmark: the deploy's checkpoint download vs plain aria2c, same files, same server, same run.

    .venv/bin/python bench/download.py [--mib 1024,2048] [--repeat 3]

Boots its own lab ("bench") with a generated checkpoint of the given size (4 shards), then
for each size measures on b300, page cache dropped before each run:

- plain: `aria2c` with the deploy's options (16 connections per file, 4 files at once, 1M
  splits, falloc) over the same /resolve/ URLs (the same redirect to the same CDN);
- plain + sha256sum: the same, then `sha256sum` over the files in parallel: the plain-tool
  equivalent of download-and-verify;
- deploy: `pyinfra ... deploy.py --data steps=checkpoint` from an empty directory: the whole
  user command (pyinfra, manifest from the Hub API, aria2 over RPC through SSH, progress,
  verification of every file).

Ratios are plain time / deploy time (goal >= 0.95 against plain + sha256sum, the same work).
Results in bench/results/download.json. The draft model (3 MB) is left out of both sides.
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

MODEL = "moonshotai/Kimi-K2.6"
DEST = "/models/Kimi-K2.6"


def drop_caches() -> None:
    subprocess.run(["sync"])
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def run_size(mib: int, repeat: int) -> dict:
    os.environ["NODERIG_LAB_MODEL_MIB"] = str(mib)
    lab = Lab(LabLayout.from_env("bench"))
    lab.inventory = lab.up()
    try:
        from huggingface_hub import HfApi

        info = HfApi(endpoint=lab.layout.hub_url, token=False).model_info(MODEL, files_metadata=True)
        files = [s.rfilename for s in info.siblings if s.rfilename.endswith((".safetensors", ".json", ".py",
                                                                           ".model", ".jinja", ".txt"))]
        size = sum(s.size for s in info.siblings if s.rfilename in files)
        urls = "".join(f"{lab.layout.hub_url}/{MODEL}/resolve/{info.sha}/{f}\n  out={f}\n" for f in files)
        lab.run("b300", "DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && "
                        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q aria2 >/dev/null")
        lab.run("b300", f"cat > /root/urls.txt <<'EOF'\n{urls}EOF")
        plain_cmd = ("rm -rf /root/plain && aria2c -q --input-file=/root/urls.txt --dir=/root/plain "
                     "--max-concurrent-downloads=4 --split=16 --max-connection-per-server=16 --min-split-size=1M "
                     "--continue=true --auto-file-renaming=false --allow-overwrite=true --file-allocation=falloc")
        verify_cmd = "cd /root/plain && find . -type f -print0 | xargs -0 -P2 -n4 sha256sum >/dev/null"
        row = {"mib": mib, "bytes": size, "files": len(files), "plain": [], "plain_sha256": [], "deploy": []}
        for _ in range(repeat):
            drop_caches()
            t_plain = timed(lambda: lab.run("b300", plain_cmd, timeout=1800))
            t_verify = timed(lambda: lab.run("b300", verify_cmd, timeout=1800))
            lab.run("b300", f"rm -rf /root/plain {DEST}")
            drop_caches()

            def deploy():
                res = subprocess.run(
                    [str(ROOT / ".venv/bin/pyinfra"), "-y", str(lab.inventory), "deploy.py",
                     "--data", "steps=checkpoint", "--data", "speculative=none"],
                    cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYINFRA_PROGRESS": "off"})
                if res.returncode != 0:
                    raise SystemExit(f"deploy failed:\n{(res.stdout + res.stderr)[-3000:]}")

            t_deploy = timed(deploy)
            lab.run("b300", f"rm -rf {DEST}")
            row["plain"].append(t_plain)
            row["plain_sha256"].append(t_plain + t_verify)
            row["deploy"].append(t_deploy)
        return row
    finally:
        lab.down()
        os.environ.pop("NODERIG_LAB_MODEL_MIB", None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", default="1024,2048")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rows = [run_size(int(m), args.repeat) for m in args.mib.split(",")]
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "download.json").write_text(json.dumps(rows, indent=1))
    print("MiB    files | aria2c   +sha256sum   deploy | ratio vs aria2c  vs aria2c+sha256sum")
    for r in rows:
        plain, both, dep = (statistics.median(r[k]) for k in ("plain", "plain_sha256", "deploy"))
        print(f"{r['bytes'] / 2**20:<6.0f} {r['files']:<5} | {plain:6.2f}s {both:9.2f}s {dep:8.2f}s |"
              f" {plain / dep:14.2f} {both / dep:20.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
