"""`noderig lab up|status|ssh|down`: the whole lab's life cycle, and what tests use.

``up`` (idempotent after a crash): clean up what an earlier run recorded, ensure the cached
image and checkpoints, bring up the bridge and the services namespace (Hub + package
source), boot the hosts, give the reference host its working venv with the stand-in
server, and write a pyinfra inventory. The record (``lab.json``) lists every process the lab
started; ``down`` and the crash clean-up end those and nothing else.
"""

from __future__ import annotations

import fcntl
import json
import os
import pprint
import secrets
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from noderig.errors import NoderigError
from . import STANDIN_SOURCE
from . import hosts as hostlib
from . import net
from .checkpoints import ensure_lab_repos
from .hosts import LabHost
from .image import Image
from .layout import LabLayout

REFERENCE_NAME = "ct200"
TARGET_NAME = "b300"
VENV_PATH = "/opt/sglang/venv"
GATED_REPOS = ["z-lab/Kimi-K2.6-DFlash"]
# `python -m` of the services process; also how a recorded pid is recognised as ours
SERVICES_MODULE = f"{__package__}.services"
REQUIRED_TOOLS = ["systemd-nspawn", "ip", "ssh", "ssh-keygen", "chroot", "mount", "debootstrap"]


def checkpoint_sizes() -> dict:
    """The lab checkpoint's size: ~24 MiB in 4 shards by default (tests), larger for benchmarks
    with NODERIG_LAB_MODEL_MIB (shards of a quarter of it each)."""
    mib = int(os.environ.get("NODERIG_LAB_MODEL_MIB", "0"))
    if not mib:
        return {}
    return {"kimi_bytes": mib << 20, "shard_bytes": max(8, mib // 4) << 20}


def target_names(count: int) -> list[str]:
    return [TARGET_NAME] + [f"{TARGET_NAME}-{i}" for i in range(2, count + 1)]


def find_project_root(start: Path | None = None) -> Path | None:
    """The checkout this command runs in: the nearest directory with deploy.py and inventory/."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "deploy.py").is_file() and (d / "inventory").is_dir():
            return d
    return None


class Lab:
    def __init__(self, layout: LabLayout | None = None, log=None):
        self.layout = layout or LabLayout.from_env()
        self.log = log or (lambda msg: print(f"[lab] {msg}", file=sys.stderr, flush=True))

    # record ------------------------------------------------------------------------------
    def read_record(self) -> dict:
        try:
            return json.loads(self.layout.record.read_text())
        except FileNotFoundError:
            return {}

    def _write_record(self, record: dict) -> None:
        tmp = self.layout.record.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        os.replace(tmp, self.layout.record)

    @property
    def hosts(self) -> list[LabHost]:
        return [LabHost.from_json(h) for h in self.read_record().get("hosts", [])]

    def host(self, name: str) -> LabHost:
        for h in self.hosts:
            if h.name == name:
                return h
        known = ", ".join(h.name for h in self.hosts) or "none (run `noderig lab up`)"
        raise NoderigError(f"there is no lab host named {name!r}; lab hosts: {known}")

    def repo_path(self, repo_id: str) -> Path:
        """Where the lab Hub serves ``repo_id`` from (on the controller)."""
        return Path(self.read_record()["hub_root"]) / repo_id

    @contextmanager
    def _locked(self):
        self.layout.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.layout.lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    # up ----------------------------------------------------------------------------------
    def up(self, targets: int = 1, inventory: Path | None = None) -> Path:
        _require_root_and_tools()
        if targets < 1:
            raise NoderigError("the lab needs at least one target host (--targets 1 or more)")
        t0 = time.monotonic()
        with self._locked():
            self._teardown()  # whatever an earlier (maybe crashed) run left
            lay = self.layout
            lay.state_dir.mkdir(parents=True, exist_ok=True)
            record: dict = {"created": time.strftime("%Y-%m-%dT%H:%M:%S"), "hosts": []}
            self._write_record(record)

            image = Image(lay.cache_dir)
            built = image.ensure(log=self.log)
            if built:
                self.log(f"image {image.key} built in {built:.0f} s")
            repos = ensure_lab_repos(lay.cache_dir / "checkpoints", **checkpoint_sizes())
            hub_root = _common_root(repos)
            self._make_keys_and_tokens()

            net.up(lay)
            record["services_pid"] = self._start_services(image, hub_root)
            self._write_record(record)

            all_hosts = [LabHost(REFERENCE_NAME, 1, lay.host_ip(1), "reference")]
            all_hosts += [LabHost(n, i + 2, lay.host_ip(i + 2), "target") for i, n in enumerate(target_names(targets))]
            t_boot = time.monotonic()
            for h in all_hosts:
                hostlib.prepare(lay, image.rootfs, h, all_hosts)
                hostlib.boot(lay, h)
                record["hosts"].append(h.to_json())
                self._write_record(record)
            self._write_known_hosts(all_hosts)
            with ThreadPoolExecutor(len(all_hosts)) as pool:
                states = list(pool.map(lambda h: hostlib.wait_ready(lay, h), all_hosts))
            record["boot_seconds"] = round(time.monotonic() - t_boot, 2)
            self.log(f"{len(all_hosts)} hosts booted in {record['boot_seconds']:.1f} s "
                     f"({', '.join(f'{h.name}={s}' for h, s in zip(all_hosts, states))})")

            self._provision_reference(all_hosts[0])
            inventory = inventory or _default_inventory_path(lay)
            write_inventory(inventory, lay, all_hosts)
            record.update(inventory=str(inventory), image=image.key, hub_url=lay.hub_url,
                          hub_root=str(hub_root))
            self._write_record(record)
        self.log(f"lab up in {time.monotonic() - t0:.1f} s")
        return inventory

    def _make_keys_and_tokens(self) -> None:
        lay = self.layout
        lay.ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not lay.ssh_key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "noderig-lab",
                            "-f", str(lay.ssh_key)], check=True)
        lay.hub_tokens.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not lay.hf_token_file.exists():
            token = "hf_lab" + secrets.token_hex(16)
            _write_private(lay.hub_tokens, token + "\n")
            _write_private(lay.hf_token_file, token + "\n")

    def _write_known_hosts(self, all_hosts: list[LabHost]) -> None:
        lines = [f"{h.ip},{h.name} ssh-ed25519 {hostlib.host_public_key(self.layout, h.name)}" for h in all_hosts]
        self.layout.known_hosts.write_text("\n".join(lines) + "\n")

    def _start_services(self, image: Image, hub_root: Path) -> int:
        lay = self.layout
        cmd = ["ip", "netns", "exec", lay.services_netns, sys.executable, "-m", SERVICES_MODULE,
               "--bind", lay.services_ip, "--packages", str(image.debs), "--packages-port", str(lay.packages_port),
               "--hub-root", str(hub_root), "--hub-port", str(lay.hub_port), "--cdn-port", str(lay.cdn_port),
               "--tokens-file", str(lay.hub_tokens)]
        for repo in GATED_REPOS:
            cmd += ["--gated", repo]
        log = open(lay.services_log, "wb")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise NoderigError(f"the lab services exited with {proc.returncode}:\n{lay.services_log.read_text()[-2000:]}")
            if b"ready" in lay.services_log.read_bytes():
                return proc.pid
            time.sleep(0.05)
        raise NoderigError(f"the lab services did not start within 60 s; see {lay.services_log}")

    def _provision_reference(self, ref: LabHost) -> None:
        """The reference host is a machine where SGLang already works: python3-dev for the JIT
        and a venv with the (stand-in) server, at the path the inventory names."""
        t0 = time.monotonic()
        staging = self.layout.host_root(ref.name) / "var/tmp/sglang-standin"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(STANDIN_SOURCE, staging, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        script = (
            "set -e; export DEBIAN_FRONTEND=noninteractive; "
            "apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends python3-dev >/dev/null; "
            f"python3 -m venv {VENV_PATH}; "
            f"{VENV_PATH}/bin/pip install -q --no-index --no-build-isolation /var/tmp/sglang-standin; "
            "rm -rf /var/tmp/sglang-standin; "
            f"{VENV_PATH}/bin/python -m sglang.launch_server --help >/dev/null"
        )
        res = self.run(ref.name, script, check=False)
        if res.returncode != 0:
            raise NoderigError(f"provisioning the reference host {ref.name} failed:\n{res.stdout[-1500:]}{res.stderr[-1500:]}")
        self.log(f"{ref.name}: python3-dev and the SGLang venv at {VENV_PATH} ready in {time.monotonic() - t0:.1f} s")

    # running commands ----------------------------------------------------------------------
    def run(self, name: str, command: str, check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
        """Run a shell command on a lab host over ssh (what tests use to look and to break)."""
        host = self.host(name) if isinstance(name, str) else name
        res = subprocess.run(hostlib.ssh_command(self.layout, host, command), capture_output=True,
                             text=True, timeout=timeout, **kw)
        if check and res.returncode != 0:
            raise NoderigError(f"`{command}` failed on lab host {host.name} (exit {res.returncode}):\n{res.stderr[-2000:]}")
        return res

    def exec(self, name: str, command: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a shell command inside a lab host without ssh (nsenter into its namespaces):
        for when a test has taken its sshd or network away."""
        host = self.host(name)
        leader = hostlib.leader_pid(host.pid) if host.pid else None
        if leader is None:
            raise NoderigError(f"lab host {name} is not running")
        res = subprocess.run(["nsenter", "-t", str(leader), "-a", "sh", "-c", command], capture_output=True,
                             text=True, timeout=120)
        if check and res.returncode != 0:
            raise NoderigError(f"`{command}` failed inside lab host {name}: {res.stderr[-2000:]}")
        return res

    def ssh_argv(self, name: str, command: list[str]) -> list[str]:
        return hostlib.ssh_command(self.layout, self.host(name), command, tty=not command and sys.stdin.isatty())

    def reset(self, name: str) -> float:
        """Drop a host's overlay and boot it fresh (its role's setup redone); returns seconds."""
        t0 = time.monotonic()
        with self._locked():
            record = self.read_record()
            all_hosts = [LabHost.from_json(h) for h in record["hosts"]]
            host = next(h for h in all_hosts if h.name == name)
            image = Image(self.layout.cache_dir)
            hostlib.remove(self.layout, host)
            hostlib.prepare(self.layout, image.rootfs, host, all_hosts)
            hostlib.boot(self.layout, host)
            record["hosts"] = [host.to_json() if h.name == name else h.to_json() for h in all_hosts]
            self._write_record(record)
            self._write_known_hosts(all_hosts)
            hostlib.wait_ready(self.layout, host)
            if host.role == "reference":
                self._provision_reference(host)
        return time.monotonic() - t0

    # status / down ---------------------------------------------------------------------------
    def status(self) -> dict:
        record = self.read_record()
        if not record:
            return {"up": False, "hosts": []}
        rows = []
        for h in self.hosts:
            alive = bool(h.pid) and hostlib.is_our_wrapper(self.layout, h.pid, h.name)
            state = "stopped"
            if alive:
                res = subprocess.run(hostlib.ssh_command(self.layout, h, "systemctl is-system-running"),
                                     capture_output=True, text=True, timeout=15)
                state = res.stdout.strip() or "unreachable"
            rows.append({**h.to_json(), "state": state})
        services = record.get("services_pid")
        services_alive = bool(services) and _is_services_process(services)
        return {"up": all(r["state"] in ("running", "degraded") for r in rows) and services_alive,
                "hosts": rows, "services": "running" if services_alive else "stopped",
                "hub_url": record.get("hub_url"), "inventory": record.get("inventory")}

    def down(self) -> None:
        _require_root_and_tools(need_debootstrap=False)
        with self._locked():
            self._teardown()

    def _teardown(self) -> None:
        """End what the record says this lab started, unmount, remove the network.
        A host whose pid is no longer our wrapper is not signalled (the pid was reused)."""
        lay = self.layout
        record = self.read_record()
        recorded = [LabHost.from_json(h) for h in record.get("hosts", [])]
        with ThreadPoolExecutor(max(1, len(recorded))) as pool:
            list(pool.map(lambda h: hostlib.remove(lay, h), recorded))
        hosts_dir = lay.state_dir / "hosts"
        for leftover in hosts_dir.iterdir() if hosts_dir.is_dir() else ():
            hostlib.remove(lay, LabHost(leftover.name, 0, "", "", None))
        services = record.get("services_pid")
        if services and _is_services_process(services):
            os.kill(services, 15)
            deadline = time.monotonic() + 5
            while hostlib.pid_alive(services) and time.monotonic() < deadline:
                time.sleep(0.05)
            if hostlib.pid_alive(services):
                os.kill(services, 9)
        net.down(lay)
        for cg in lay.cgroup_dirs():
            hostlib._rmdir_tree(cg)
        inventory = record.get("inventory")
        if inventory and Path(inventory).is_file() and Path(inventory).read_text().startswith(INVENTORY_HEADER):
            Path(inventory).unlink()
        lay.record.unlink(missing_ok=True)


def _is_services_process(pid: int) -> bool:
    try:
        return SERVICES_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _common_root(repos: dict[str, Path]) -> Path:
    roots = {path.parent.parent for path in repos.values()}  # <root>/<org>/<name>
    if len(roots) != 1:
        raise NoderigError(f"lab repos are not under one root: {sorted(map(str, roots))}")
    return roots.pop()


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def _require_root_and_tools(need_debootstrap: bool = True) -> None:
    if os.geteuid() != 0:
        raise NoderigError("the lab boots containers and configures networking: run it as root")
    missing = [t for t in REQUIRED_TOOLS if not shutil.which(t) and (need_debootstrap or t != "debootstrap")]
    if missing:
        raise NoderigError(f"the lab needs {', '.join(missing)} on this machine: run scripts/setup first")


def _default_inventory_path(layout: LabLayout) -> Path:
    root = find_project_root()
    filename = "lab.py" if layout.name == "lab" else f"lab_{layout.name}.py"
    return (root / "inventory" / filename) if root else (layout.state_dir / "inventory.py")


INVENTORY_HEADER = "# Generated by `noderig lab up`"


def write_inventory(path: Path, layout: LabLayout, all_hosts: list[LabHost]) -> None:
    """A pyinfra inventory for the running lab: groups `reference` and `targets`, as in
    inventory/b300.py, with the lab's ssh identity and Hub as host data (host data
    outranks group data, so the defaults in group_data/ still apply to everything else)."""
    lab_data = {
        "ssh_user": "root",
        "ssh_key": str(layout.ssh_key),
        "ssh_known_hosts_file": str(layout.known_hosts),
        "ssh_strict_host_key_checking": "yes",
        "hf_endpoint": layout.hub_url,
        "allow_insecure_hub_http": True,  # the lab Hub is plain http on the lab's own bridge
        "hf_token_file": str(layout.hf_token_file),
        "gpus_required": 0,  # no GPU in the lab: reported, not required
        "lab": True,
    }

    def entry(h: LabHost) -> str:
        return f"    ({h.name!r}, {{**_lab, 'ssh_hostname': {h.ip!r}}}),\n"

    text = (
        f"{INVENTORY_HEADER} at {time.strftime('%Y-%m-%d %H:%M:%S')}; rewritten by each `up`.\n"
        "# The lab's hosts, in the same groups as inventory/b300.py.\n\n"
        f"_lab = {pprint.pformat(lab_data, sort_dicts=False)}\n\n"
        "reference = [\n" + "".join(entry(h) for h in all_hosts if h.role == "reference") + "]\n\n"
        "targets = [\n" + "".join(entry(h) for h in all_hosts if h.role == "target") + "]\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
