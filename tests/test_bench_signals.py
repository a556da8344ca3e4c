"""`noderig bench` and Ctrl-C / SIGTERM, in the fast tier: the sweep's steps are stand-ins
(no host), the signals and the child processes are real.

The case that broke CI once: a Ctrl-C that lands while ``subprocess`` forks runs its
handler inside logging's at-fork hook, which swallows the KeyboardInterrupt ("Exception
ignored in _releaseLock"); the sweep went on to the next layout and exited 0. A remembered
request stops it at the next step instead.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from noderig import benchmark as bm
from operations import bench as ob
from tests.conftest import ROOT

INVENTORY_DATA = {"tp_size": 8, "speculative": "ddtree", "served_model_name": "kimi", "server_port": 30000}
NODE_FACTS = {"gpu_model": "NVIDIA B300", "gpu_count": 8, "sglang_version": "0.5.9", "bench_serving": True,
              "python": "/opt/venv/bin/python"}
SMOKE = bm.select_workloads(bm.load_workloads(), ["smoke"])  # two runs per layout: concurrency 1 and 4


class FakeHost:
    name = "b300"


class Progress:
    def update(self, *args, **kwargs):
        pass

    def advance(self, *args, **kwargs):
        pass


class Console:
    def __init__(self):
        self.printed: list[str] = []

    def print(self, text="", *args, **kwargs):
        self.printed.append(str(text))


def swallowed_ctrl_c() -> None:
    """A real SIGINT whose raise is lost, as in an at-fork hook."""
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass


class Sweep:
    """Stand-ins for the deploy and the measurement; records what the sweep did."""

    def __init__(self, monkeypatch, signal_during: str):
        self.steps: list[str] = []
        self.signal_during = signal_during
        monkeypatch.setattr(ob, "run_deploy", self.deploy)
        monkeypatch.setattr(ob, "run_on_node", self.run)

    def run(self, host, facts, data, workload, concurrency, api_key):
        self.steps.append(f"{workload.name} c{concurrency}")
        if self.steps[-1] == self.signal_during:
            swallowed_ctrl_c()
        return bm.Metrics(requests=4, completed=4), "python -m sglang.bench_serving ..."

    def deploy(self, inventory, host_name, reference, overrides, log_path):
        step = f"deploy {log_path.stem.split('-', 2)[-1]}" if overrides else "restore"
        self.steps.append(step)
        if step == self.signal_during:
            swallowed_ctrl_c()
        return True, "", "pyinfra ..."


@pytest.fixture
def stop_handlers():
    previous = ob.STOP.install()
    yield ob.STOP
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    ob.STOP.signal_name = None


def new_bench(tmp_path: Path) -> ob.Bench:
    setup = ob.ClientSetup(aiperf=None, tokenizer=None, workdir=tmp_path)
    return ob.Bench(tmp_path / "inventory.py", SMOKE, tmp_path, setup, Progress(), Console())


def test_a_ctrl_c_swallowed_while_a_deploy_forks_stops_the_sweep_before_it_measures(monkeypatch, tmp_path,
                                                                                    stop_handlers):
    sweep = Sweep(monkeypatch, signal_during="deploy tp8-nospec")
    with pytest.raises(ob.Interrupted):
        new_bench(tmp_path).sweep(FakeHost(), INVENTORY_DATA, NODE_FACTS, bm.parse_layouts("tp4-ep2,tp8-nospec"))
    assert sweep.steps == ["deploy tp4-ep2", "smoke c1", "smoke c4", "deploy tp8-nospec", "restore"]


def test_a_ctrl_c_during_the_restore_waits_for_it_then_stops_the_next_step(monkeypatch, tmp_path, stop_handlers):
    sweep = Sweep(monkeypatch, signal_during="restore")
    bench = new_bench(tmp_path)
    assert bench.sweep(FakeHost(), INVENTORY_DATA, NODE_FACTS, bm.parse_layouts("tp4-ep2")) is True
    assert sweep.steps == ["deploy tp4-ep2", "smoke c1", "smoke c4", "restore"]
    assert any("restoring the inventory's layout first" in line for line in bench.console.printed)
    with pytest.raises(ob.Interrupted, match="SIGINT"):
        stop_handlers.check()
    # after the restore a Ctrl-C raises again where it lands
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_a_remembered_stop_ends_the_child_being_waited_for(stop_handlers):
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stop_handlers.remember(signal.SIGTERM)
    with pytest.raises(ob.Interrupted, match="SIGTERM"):
        ob._wait(child)
    assert child.returncode == -signal.SIGINT


def test_run_bench_exits_130_when_the_stop_was_swallowed_or_held(monkeypatch, tmp_path):
    for signal_during, steps in [
        ("deploy tp8-nospec", ["deploy tp4-ep2", "smoke c1", "smoke c4", "deploy tp8-nospec", "restore"]),
        ("smoke c1", ["deploy tp4-ep2", "smoke c1", "restore"]),
        ("restore", ["deploy tp4-ep2", "smoke c1", "smoke c4", "deploy tp8-nospec", "smoke c1", "smoke c4",
                     "restore"]),
    ]:
        sweep = Sweep(monkeypatch, signal_during=signal_during)
        monkeypatch.setattr(ob, "load_targets", lambda inventory, limit: [FakeHost(), FakeHost()])
        monkeypatch.setattr(ob, "host_data", lambda host: INVENTORY_DATA)
        monkeypatch.setattr(ob, "node_facts", lambda host, data: NODE_FACTS)
        inventory = tmp_path / "inventory.py"
        inventory.write_text("hosts = []\n")
        handler_before = signal.getsignal(signal.SIGINT)
        status = ob.run_bench(inventory, limit=None, workload_names=["smoke"], workloads_file=None,
                              layouts_text="tp4-ep2,tp8-nospec", out_dir=tmp_path / "out", tokenizer=None)
        assert status == 130, signal_during
        assert sweep.steps == steps, "the second host was swept after the stop"
        assert signal.getsignal(signal.SIGINT) is handler_before


def test_review5_a_signal_while_the_restore_starts_to_hold_does_not_skip_it(monkeypatch, tmp_path, stop_handlers):
    # a second Ctrl-C or a SIGTERM that lands as the restore begins to hold (between its handlers' changes) is held
    # like one inside it: the restore runs, and the stop waits for the next step
    sweep = Sweep(monkeypatch, signal_during="none")
    real = {"signal": signal.signal, "getsignal": signal.getsignal}
    landed = []

    def then_sigterm(name):
        def call(*args):
            result = real[name](*args)
            if not landed and sweep.steps[-1:] == ["smoke c4"]:  # the restore's first look at a handler
                landed.append(name)
                signal.raise_signal(signal.SIGTERM)
            return result
        return call

    bench = new_bench(tmp_path)
    signal.signal, signal.getsignal = then_sigterm("signal"), then_sigterm("getsignal")  # undone below, before
    try:                                                                                   # any other handler change
        restored = bench.sweep(FakeHost(), INVENTORY_DATA, NODE_FACTS, bm.parse_layouts("tp4-ep2"))
    except KeyboardInterrupt:
        restored = "raised out of the restore"
    finally:
        signal.signal, signal.getsignal = real["signal"], real["getsignal"]
    assert landed and restored is True
    assert sweep.steps == ["deploy tp4-ep2", "smoke c1", "smoke c4", "restore"]
    with pytest.raises(ob.Interrupted, match="SIGTERM"):
        stop_handlers.check()
    assert signal.getsignal(signal.SIGINT) == signal.getsignal(signal.SIGTERM) == stop_handlers.handle


def test_review5_a_ctrl_c_before_the_first_host_leaves_the_handlers_as_they_were(monkeypatch, tmp_path):
    # a Ctrl-C while the bench is still setting up (no host touched yet) ends it, and takes its handlers with it
    inventory = tmp_path / "inventory.py"
    inventory.write_text("hosts = []\n")
    monkeypatch.setattr(ob, "find_aiperf", lambda: signal.raise_signal(signal.SIGINT))
    before = {sig: signal.getsignal(sig) for sig in ob.STOP_SIGNALS}
    with pytest.raises(KeyboardInterrupt):
        ob.run_bench(inventory, limit=None, workload_names=["smoke"], workloads_file=None, layouts_text="tp4-ep2",
                     out_dir=tmp_path / "out", tokenizer=None)
    assert {sig: signal.getsignal(sig) for sig in ob.STOP_SIGNALS} == before
    ob.STOP.signal_name = None


def test_the_bench_command_patches_gevent_before_the_benchmark_starts_and_importing_it_does_not():
    # pyinfra's SSH needs gevent's patches; applied after the benchmark started a thread (rich's live
    # display), they break its locks ("cannot release un-acquired lock"). In a child: patching is for good.
    probe = ("import sys, argparse, gevent.monkey as m\n"
             "import operations.bench as ob\n"
             "print('after import', m.is_module_patched('threading'))\n"
             "ob.run_bench = lambda *a, **k: print('at run', m.is_module_patched('threading')) or 0\n"
             "from noderig import cli\n"
             "sys.exit(cli.cmd_bench(argparse.Namespace(inventory='inv.py', limit=None, workload=None,"
             " workloads=None, layouts=None, out=None, tokenizer=None)))\n")
    res = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split("\n")[:2] == ["after import False", "at run True"], res.stdout + res.stderr[-2000:]
