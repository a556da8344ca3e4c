"""`noderig bench`'s host side: not a deploy step, but at this layer because it drives
pyinfra (the inventory, its SSH connections, the loopback forward) and the deploy itself.

Per target: the facts a record needs (GPUs, SGLang version), the load generator run on the
node (SGLang's bench_serving, when the node's venv has it) or on the controller through a
forwarded port (aiperf), the server's accept length. For a sweep: each layout deployed with
``pyinfra INVENTORY deploy.py --limit HOST --data ...`` (the deploy's own validation,
restart and readiness), benchmarked, and the inventory's layout deployed again at the end,
also after a failure, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyinfra.api import Config, State
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.context import ctx_inventory, ctx_state

from noderig import benchmark as bm
from noderig.errors import NoderigError, redact
from noderig.secret_files import read_private
from operations.tunnel import LoopbackForward

ROOT = Path(__file__).resolve().parents[1]
DEPLOY_FILE = ROOT / "deploy.py"
GPU_QUERY = "nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader"
CHILD_STOP_TIMEOUT = 60  # s a child (deploy, client) gets to stop after Ctrl-C before SIGKILL


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: stop the sweep, then restore."""


class StopRequest:
    """Ctrl-C and SIGTERM during a bench run, raised where Python delivers them *and* remembered.

    Remembered because Python can swallow the raise: a signal that lands while ``subprocess``
    forks runs its handler inside logging's at-fork hook, which prints "Exception ignored in
    _releaseLock" and carries on, and the sweep would go on to the next layout. The run calls
    ``check()`` before each deploy, each measured run and each child it waits for, so a
    swallowed signal stops it at the next step."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.holding = False
        self.announce = None  # while held: says the stop waits

    def handle(self, signum, frame) -> None:
        self.remember(signum)
        if self.holding:  # a step that must finish: remembered and announced, not raised
            if self.announce is not None:
                self.announce()
            return
        raise Interrupted(self.signal_name)

    def remember(self, signum) -> None:
        self.signal_name = signal.Signals(signum).name

    def check(self) -> None:
        if self.signal_name and not self.holding:
            raise Interrupted(self.signal_name)

    def install(self) -> dict:
        """This request as the SIGINT and SIGTERM handler; the handlers it replaced."""
        self.signal_name = None
        return {sig: signal.signal(sig, self.handle) for sig in STOP_SIGNALS}

    @contextmanager
    def held(self, announce):
        """Inside the block a signal is remembered and announced, never raised: for a step
        that must finish (the restore). The run stops at its next ``check()`` after it.
        Holding is this request's own state, set before any handler is read or changed: a
        signal that lands while the block begins is held too (swapping in a holding handler
        left a moment when the raising one still answered, and the restore was skipped)."""
        self.holding, self.announce = True, announce
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        try:
            for sig in STOP_SIGNALS:  # the raising handler when the run did not install it (a step alone)
                if previous[sig] != self.handle:
                    signal.signal(sig, self.handle)
            yield
        finally:
            self.holding, self.announce = False, None
            for sig, handler in previous.items():
                if handler != self.handle:
                    signal.signal(sig, handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP = StopRequest()  # one per process, as signal handlers are


def load_targets(inventory_path: Path, limit: list[str] | None) -> list:
    """The inventory's ``targets`` (or the hosts ``limit`` names), connected over SSH."""
    # Imported here: pyinfra_cli patches gevent into the process when imported. `noderig bench`
    # imports it before any thread starts (noderig/cli.py); merely importing this module must not.
    from pyinfra_cli.inventory import make_inventory

    state = State(check_for_changes=False)
    state.cwd = str(ROOT)
    ctx_state.set(state)  # pyinfra executes the inventory file in its own context
    inventory = make_inventory(str(inventory_path), cwd=str(ROOT))
    ctx_inventory.set(inventory)
    state.init(inventory, Config())
    hosts = list(inventory.get_group("targets")) if "targets" in inventory.groups else list(inventory)
    if limit:
        unknown = sorted(set(limit) - {h.name for h in hosts})
        if unknown:
            raise NoderigError(f"--limit {', '.join(unknown)}: not a target of {inventory_path}")
        hosts = [h for h in hosts if h.name in limit]
    for host in hosts:
        host.connect(raise_exceptions=True)
    return hosts


def host_data(host) -> dict:
    return {key: host.data.get(key) for key in (
        "tp_size", "ep_size", "pp_size", "enable_dp_attention", "speculative", "extra_flags", "server_host",
        "server_port", "served_model_name", "api_key_file", "venv_path", "model_dir", "draft_dir", "draft_repo",
        "model_repo", "model_revision", "trust_remote_code", "reference_host")}


def _shell(host, command: StringCommand, stdin: str | None = None) -> tuple[bool, str, str]:
    kwargs = {"_stdin": stdin} if stdin is not None else {}
    ok, output = host.run_shell_command(command, print_output=False, print_input=False, **kwargs)
    return ok, "\n".join(output.stdout_lines), "\n".join(output.stderr_lines)


def node_facts(host, data: dict) -> dict:
    """GPUs (nvidia-smi), the venv's SGLang version, and whether its bench_serving imports."""
    python = f"{data['venv_path']}/bin/python"
    _, gpus, _ = _shell(host, StringCommand("sh", "-c", QuoteString(f"command -v nvidia-smi >/dev/null && {GPU_QUERY}")))
    _, version, _ = _shell(host, StringCommand(QuoteString(python), "-c",
                                               QuoteString("import sglang; print(sglang.__version__)")))
    has_bench, _, _ = _shell(host, StringCommand(QuoteString(python), "-c", QuoteString(
        f"import importlib.util, sys; sys.exit(importlib.util.find_spec({bm.BENCH_SERVING_MODULE!r}) is None)")))
    model, count = bm.gpus_from_nvidia_smi(gpus)
    return {"gpu_model": model, "gpu_count": count, "sglang_version": version.strip() or None,
            "bench_serving": has_bench, "python": python}


def server_url_on_node(data: dict) -> str:
    host = data.get("server_host") or "127.0.0.1"
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{'[' + host + ']' if ':' in host else host}:{data['server_port']}"


def _server_info(base_url: str, api_key: str | None) -> dict | None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    for path in ("/server_info", "/get_server_info"):
        try:
            with urllib.request.urlopen(urllib.request.Request(base_url + path, headers=headers), timeout=30) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            continue
    return None


@dataclass
class ClientSetup:
    aiperf: str | None  # the aiperf executable on the controller
    tokenizer: str | None  # for aiperf: a Hub id, a directory, or None (the byte tokenizer)
    workdir: Path


def find_aiperf() -> str | None:
    """The pinned aiperf: $NODERIG_AIPERF, the one scripts/setup installs beside the venv, PATH."""
    candidates = [os.environ.get("NODERIG_AIPERF"), str(Path(sys.prefix) / "bench-client" / "bin" / "aiperf")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    from shutil import which

    return which("aiperf")


def _wait(proc: subprocess.Popen) -> int:
    """Wait for a child; on Ctrl-C/SIGTERM (also one swallowed while it was forked) stop it
    (SIGINT, then SIGKILL) and re-raise."""
    try:
        STOP.check()
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(CHILD_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def run_on_node(host, facts: dict, data: dict, workload: bm.Workload, concurrency: int,
                api_key: str | None) -> tuple[bm.Metrics, str]:
    """SGLang's bench_serving in the node's venv, against the server's loopback address. The
    key reaches it on standard input, exported by the shell: never in argv on either host."""
    ok, path, err = _shell(host, StringCommand("mktemp", "-t", "noderig-bench.XXXXXX"))
    if not ok:
        raise NoderigError(f"{host.name}: mktemp failed: {err.strip()}")
    argv = bm.bench_serving_argv(facts["python"], base_url=server_url_on_node(data), model=data["served_model_name"],
                                 tokenizer=data["model_dir"], workload=workload, concurrency=concurrency,
                                 output_file=path.strip())
    script = ('IFS= read -r OPENAI_API_KEY || true; if [ -n "$OPENAI_API_KEY" ]; then export OPENAI_API_KEY; '
              'else unset OPENAI_API_KEY; fi; "$@" >&2; status=$?; cat "$0"; rm -f "$0"; exit $status')
    ok, out, err = _shell(host, StringCommand("sh", "-c", QuoteString(script), QuoteString(path.strip()),
                                              *(QuoteString(a) for a in argv)), stdin=(api_key or "") + "\n")
    metrics = bm.parse_bench_serving(out, workload.requests(concurrency))
    if not ok and metrics.error is None:
        metrics.error = _last_line(err) or "bench_serving failed"
    return metrics, bm.command_text(argv)


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not set(line.strip()) <= set("│╰╭─╮╯ ")]
    return redact(lines[-1].strip("│ ")) if lines else None


def run_on_controller(host, data: dict, workload: bm.Workload, concurrency: int, api_key: str | None,
                      setup: ClientSetup, run_dir: Path) -> tuple[bm.Metrics, str]:
    """aiperf on the controller, through a port forwarded to the server's loopback port over
    the inventory's SSH connection (ssh -L). The key is in aiperf's environment only."""
    if setup.aiperf is None:
        raise NoderigError("no load generator: the node's venv has no sglang.bench_serving and aiperf is not "
                           "installed on the controller (scripts/setup installs it; or set NODERIG_AIPERF)")
    run_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = setup.tokenizer or str(_byte_tokenizer_dir(setup.workdir))
    with LoopbackForward(host, int(data["server_port"])) as forward:
        url = f"http://127.0.0.1:{forward.port}"
        config = bm.aiperf_config(url=url, model=data["served_model_name"], tokenizer=tokenizer, workload=workload,
                                  concurrency=concurrency, artifact_dir=str(run_dir / "artifacts"),
                                  with_api_key=bool(api_key),
                                  trust_remote_code=bool(setup.tokenizer and data.get("trust_remote_code")))
        config_path = run_dir / "aiperf.yaml"
        config_path.write_text(json.dumps(config, indent=1))
        argv = bm.aiperf_argv(setup.aiperf, str(config_path))
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        if api_key:
            env["OPENAI_API_KEY"] = api_key
        with open(run_dir / "aiperf.log", "wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=run_dir, start_new_session=True)
            status = _wait(proc)
        info = _server_info(url, api_key)
    metrics = _aiperf_metrics(run_dir, workload.requests(concurrency), status)
    metrics.accept_length = bm.accept_length_from_server_info(info)
    return metrics, bm.command_text(argv)


def _aiperf_metrics(run_dir: Path, requests: int, status: int) -> bm.Metrics:
    export = run_dir / "artifacts" / "profile_export_aiperf.json"
    if export.exists():
        metrics = bm.parse_aiperf(json.loads(export.read_text()), requests)
        if status and metrics.error is None:
            metrics.error = f"aiperf exited with status {status}"
        return metrics
    log = (run_dir / "aiperf.log").read_text(errors="replace")
    reason = next((m.group(0) for m in re.finditer(r"All \d+ inference request\(s\) failed[^\n]*", log)), None)
    return bm.Metrics(requests=requests, completed=0,
                      error=redact(reason or _last_line(log) or f"aiperf exited with status {status}"))


def _byte_tokenizer_dir(workdir: Path) -> Path:
    path = workdir / "byte-tokenizer"
    path.mkdir(parents=True, exist_ok=True)
    for name, text in bm.byte_tokenizer_files().items():
        (path / name).write_text(text)
    return path


def pyinfra_deploy_argv(inventory: Path, host_name: str, reference: str | None, overrides: list[str]) -> list[str]:
    """The user's own deploy, limited to one target (and the reference host it copies the
    venv from), with a layout's settings as --data."""
    argv = [str(Path(sys.executable).with_name("pyinfra")), "-y", str(inventory), str(DEPLOY_FILE),
            "--limit", host_name]
    if reference and reference != host_name:
        argv += ["--limit", reference]
    for item in overrides:
        argv += ["--data", item]
    return argv


def deploy_failure(output: str, host_name: str) -> str:
    """The deploy's own sentences about why ``host_name`` failed: its summary line and the
    diagnosis, when it printed one."""
    keep = []
    for line in output.splitlines():
        text = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if (f"{host_name}" in text and "FAILED" in text) or "diagnosis:" in text or text.startswith("cause:"):
            keep.append(text)
    return redact(" | ".join(dict.fromkeys(keep))) or "the deploy failed (no summary line; see its log)"


def run_deploy(inventory: Path, host_name: str, reference: str | None, overrides: list[str],
               log_path: Path) -> tuple[bool, str, str]:
    """Run the deploy; (succeeded, the failure sentence, the command)."""
    argv = pyinfra_deploy_argv(inventory, host_name, reference, overrides)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                env={**os.environ, "PYINFRA_PROGRESS": "off"}, start_new_session=True)
        status = _wait(proc)
    command = bm.command_text(["pyinfra", *argv[1:]])
    if status == 0:
        return True, "", command
    return False, deploy_failure(log_path.read_text(errors="replace"), host_name), command


class Bench:
    """One `noderig bench` invocation: records appended to ``out_dir/records.jsonl`` as each
    run ends (an interrupted sweep keeps what it measured)."""

    def __init__(self, inventory: Path, workloads: list[bm.Workload], out_dir: Path, setup: ClientSetup,
                 progress, console):
        self.inventory, self.workloads, self.out_dir = inventory, workloads, out_dir
        self.setup, self.progress, self.console = setup, progress, console
        self.records: list[dict] = []
        self.records_path = out_dir / "records.jsonl"
        self.task = None
        self.stamp = time.strftime("%Y%m%d-%H%M%S")

    def runs_per_layout(self) -> int:
        return sum(len(w.concurrency) for w in self.workloads)

    def _write(self, record: dict) -> None:
        self.records.append(record)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.records_path, "a") as f:
            f.write(bm.record_line(record) + "\n")

    def _status(self, text: str) -> None:
        self.progress.update(self.task, description=text)

    def measure(self, host, data: dict, facts: dict, layout: bm.Layout) -> None:
        """Every workload at every concurrency against the layout serving now."""
        api_key = read_private(data["api_key_file"], "API key") if data.get("api_key_file") else None
        target = bm.Target(host=host.name, gpu_model=facts["gpu_model"], gpu_count=facts["gpu_count"],
                           sglang_version=facts["sglang_version"], layout=layout, settings=layout.settings(data),
                           speculative_draft=data.get("draft_repo"))
        for workload in self.workloads:
            for concurrency in workload.concurrency:
                STOP.check()
                self._status(f"{host.name} {layout.name}: {workload.name} at concurrency {concurrency}")
                if facts["bench_serving"]:
                    metrics, command = run_on_node(host, facts, data, workload, concurrency, api_key)
                    client, ran_on = "sglang.bench_serving", "node"
                else:
                    run_dir = self.out_dir / "runs" / self.stamp / f"{host.name}-{layout.name}-{workload.name}-c{concurrency}"
                    metrics, command = run_on_controller(host, data, workload, concurrency, api_key, self.setup, run_dir)
                    client = "aiperf"
                    ran_on = f"controller (ssh -L to {host.name}:127.0.0.1:{data['server_port']})"
                when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                self._write(bm.build_record(target, workload, concurrency, metrics, when=when, client=client,
                                            ran_on=ran_on, command=command))
                self.progress.advance(self.task)

    def failed_layout(self, host, data: dict, facts: dict, layout: bm.Layout, command: str, error: str) -> None:
        target = bm.Target(host=host.name, gpu_model=facts["gpu_model"], gpu_count=facts["gpu_count"],
                           sglang_version=facts["sglang_version"], layout=layout, settings=layout.settings(data),
                           speculative_draft=data.get("draft_repo"))
        self._write(bm.layout_failed_record(target, when=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command=command,
                                            error=error))
        self.progress.advance(self.task, self.runs_per_layout())

    def sweep(self, host, data: dict, facts: dict, layouts: list[bm.Layout]) -> bool:
        """Each layout deployed and measured; then the inventory's own layout deployed again,
        whatever happened. False: the restore failed (the node serves a layout under test)."""
        logs = self.out_dir / "runs" / self.stamp
        try:
            for layout in layouts:
                STOP.check()
                self._status(f"{host.name}: deploying {layout.name}")
                ok, error, command = run_deploy(self.inventory, host.name, data.get("reference_host"),
                                                layout.data_overrides(data),
                                                logs / f"{host.name}-deploy-{layout.name}.log")
                if not ok:
                    self.console.print(f"[red]{host.name}: {layout.name} did not start:[/red] {error}")
                    self.failed_layout(host, data, facts, layout, command, error)
                    continue
                self.measure(host, data, facts, layout)
        finally:
            restored = self.restore(host, data, logs)
        return restored

    def restore(self, host, data: dict, logs: Path) -> bool:
        """The inventory's own layout, deployed with no overrides. Ctrl-C and SIGTERM wait
        until it is done: stopping here would leave the node serving a layout under test."""
        def announce():
            self.console.print(f"[yellow]{host.name}: restoring the inventory's layout first; "
                               "the sweep stops when it is done[/yellow]")

        with STOP.held(announce):
            self._status(f"{host.name}: restoring {bm.inventory_layout(data).name}")
            ok, error, _ = run_deploy(self.inventory, host.name, data.get("reference_host"), [],
                                      logs / f"{host.name}-restore.log")
        if ok:
            self.console.print(f"{host.name}: restored the inventory's layout ({bm.inventory_layout(data).name})")
        else:
            self.console.print(f"[red]{host.name}: restoring the inventory's layout FAILED: {error}; rerun "
                               f"`pyinfra {self.inventory} deploy.py --limit {host.name}`[/red]")
        return ok


def run_bench(inventory: Path, *, limit: list[str] | None, workload_names: list[str], workloads_file: Path | None,
              layouts_text: str | None, out_dir: Path, tokenizer: str | None) -> int:
    """`noderig bench`: inputs checked before any host is touched, then each target measured
    (or swept), then the table and the plot. Exit 0; 1 when a restore failed; 130 when
    interrupted (after the restore, with what was measured)."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    from noderig.bench_report import print_table, write_plot

    workloads = bm.select_workloads(bm.load_workloads(workloads_file), workload_names)
    layouts = bm.parse_layouts(layouts_text) if layouts_text else None
    if not inventory.exists():
        raise NoderigError(f"no inventory at {inventory}")
    console = Console(stderr=True)
    restored, interrupted = True, False
    setup = ClientSetup(aiperf=find_aiperf(), tokenizer=tokenizer, workdir=out_dir)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, console=console) as progress:
        bench = Bench(inventory.resolve(), workloads, out_dir, setup, progress, console)
        # the handlers to put back, read before ours replace them and restored whatever is raised from then on
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        try:
            STOP.install()
            hosts = load_targets(inventory, limit)
            per_host = bench.runs_per_layout() * (len(layouts) if layouts else 1)
            bench.task = progress.add_task("connecting", total=per_host * len(hosts))
            for host in hosts:
                STOP.check()
                data = host_data(host)
                facts = node_facts(host, data)
                if layouts:
                    restored = bench.sweep(host, data, facts, layouts) and restored
                else:
                    bench.measure(host, data, facts, bm.inventory_layout(data))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    interrupted = interrupted or STOP.signal_name is not None  # also one held during a restore
    return _report(bench, console, print_table, write_plot, restored, interrupted)


def _report(bench: Bench, console, print_table, write_plot, restored: bool, interrupted: bool) -> int:
    if bench.records:
        print_table(bench.records, console)
        plot = write_plot(bench.records, bench.out_dir / f"bench-{bench.stamp}.png")
        console.print(f"records: {bench.records_path} ({len(bench.records)} new)")
        if plot:
            console.print(f"plot: {plot}")
    if interrupted:
        console.print("[yellow]interrupted: the runs above were measured and recorded[/yellow]")
    failed = [r["layout"] for r in bench.records if r.get("status") == "layout_failed"]
    if failed:
        console.print(f"[red]{len(failed)} layout(s) did not start: {', '.join(map(str, failed))} "
                      "(each record's error says why)[/red]")
    empty = [f"{r['layout']} {r['workload']} c{r['concurrency']}" for r in bench.records if r.get("status") == "failed"]
    if empty:
        console.print(f"[red]{len(empty)} run(s) completed no request: {', '.join(empty)} (see their error)[/red]")
    return bm.exit_status(bench.records, restored, interrupted)
