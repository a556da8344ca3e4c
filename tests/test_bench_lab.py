"""`noderig bench` on the lab, end to end: the real aiperf through a forwarded port against
the stand-in server, layouts deployed with the real deploy, and the inventory's layout
restored after the sweep, also when the sweep is interrupted. Workloads are tiny (a few
requests a run): the lab tier checks the path, bench figures mean nothing here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noderig.benchmark import RECORD_FIELDS
from noderig_lab import FAKE_NVIDIA_SMI as FAKE_SMI
from tests.conftest import ROOT, deploy

pytestmark = pytest.mark.lab

UNIT = "/etc/systemd/system/sglang.service"
TINY = ROOT / "tests" / "fixtures" / "bench" / "tiny.toml"
NODERIG = Path(sys.executable).with_name("noderig")


@pytest.fixture(scope="module")
def served(lab):
    """b300 deployed with the inventory's layout (TP 8, DDTree), showing 8 GPUs to nvidia-smi."""
    lab.reset("b300")
    res, out = deploy(lab)
    assert res.returncode == 0, out[-3000:]
    root = lab.layout.host_root("b300")
    shutil.copy(FAKE_SMI, root / "usr/local/bin/nvidia-smi")
    (root / "etc/noderig-lab").mkdir(exist_ok=True)
    (root / "etc/noderig-lab/gpus").write_text("NVIDIA B300, 10.3, 580.82.07\n" * 8)
    yield lab
    (root / "usr/local/bin/nvidia-smi").unlink(missing_ok=True)
    shutil.rmtree(root / "etc/noderig-lab", ignore_errors=True)


def bench_argv(lab, out: Path, *args: str) -> list[str]:
    return [str(NODERIG), "bench", str(lab.inventory), "--workloads", str(TINY), "--workload", "tiny",
            "--out", str(out), *args]


def records(out: Path) -> list[dict]:
    path = out / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def unit_state(lab) -> tuple[str, str]:
    """The unit's text, and the layout the running server reports."""
    unit = lab.run("b300", f"cat {UNIT}").stdout
    info = lab.run("b300", "curl -sf http://127.0.0.1:30000/server_info").stdout
    served = json.loads(info)
    return unit, f"tp={served['tp_size']} ep={served['ep_size']} spec={served['speculative_algorithm']}"


def test_one_workload_gives_a_record_with_every_field(served, tmp_path):
    res = subprocess.run(bench_argv(served, tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    [record] = records(tmp_path)
    assert list(record) == list(RECORD_FIELDS)
    assert (record["host"], record["gpu_model"], record["gpu_count"]) == ("b300", "NVIDIA B300", 8)
    assert record["sglang_version"] == "0.5.9.post2+ddtree.standin"
    assert (record["layout"], record["tp"], record["ep"], record["speculative"]) == ("tp8-ddtree", 8, 1, "ddtree")
    assert (record["input_len"], record["output_len"], record["concurrency"], record["requests"]) == (32, 12, 2, 4)
    assert (record["completed"], record["errors"], record["status"], record["error"]) == (4, 0, "ok", None)
    assert record["accept_length"] == 4.2  # the stand-in's table: DDTREE accepts 4.2 tokens a step
    assert record["client"] == "aiperf" and record["client_ran_on"].startswith("controller (ssh -L to b300")
    assert record["command"].split()[1:3] == ["profile", "--config"]
    measured = ("output_tok_s", "tok_s_per_gpu", "tok_s_per_user", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
                "itl_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "request_throughput", "mean_output_len")
    assert all(isinstance(record[k], float) and record[k] > 0 for k in measured), {k: record[k] for k in measured}
    assert record["tok_s_per_gpu"] == pytest.approx(record["output_tok_s"] / 8, abs=0.01)


def test_a_two_layout_sweep_records_both_shows_them_and_restores_the_unit(served, tmp_path):
    before = unit_state(served)
    res = subprocess.run(bench_argv(served, tmp_path, "--layouts", "tp4-ep2-nospec,tp8-dpa-nospec"), cwd=ROOT,
                         capture_output=True, text=True, timeout=1200)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    got = records(tmp_path)
    assert [(r["layout"], r["tp"], r["ep"], r["dp_attention"], r["status"]) for r in got] == [
        ("tp4-ep2-nospec", 4, 2, False, "ok"), ("tp8-dpa-nospec", 8, 1, True, "ok")]
    assert all(r["accept_length"] is None and r["speculative"] == "none" for r in got)
    assert "tp4-ep2-nospec" in out and "tp8-dpa-nospec" in out and "tok/s/GPU" in out
    [png] = tmp_path.glob("bench-*.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert unit_state(served) == before


def test_a_sweep_interrupted_after_its_first_layout_still_restores(served, tmp_path):
    before = unit_state(served)
    proc = subprocess.Popen(bench_argv(served, tmp_path, "--layouts", "tp4-ep2,tp8-nospec"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 900  # a bound for a hung run, not a speed check
        while not records(tmp_path) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert [r["layout"] for r in records(tmp_path)] == ["tp4-ep2"], "the first layout was never measured"
        os.kill(proc.pid, signal.SIGINT)  # the noderig bench process only, as a Ctrl-C would reach it first
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-4000:]
    assert "restored the inventory's layout (tp8-ddtree)" in out, out[-4000:]
    assert "interrupted" in out
    assert [r["layout"] for r in records(tmp_path)] == ["tp4-ep2"], "the sweep went on after the Ctrl-C"
    assert unit_state(served) == before
