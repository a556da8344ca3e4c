"""Lab hosts: Debian with real systemd as PID 1, booted by systemd-nspawn on an overlay.

Works on a controller whose own PID 1 is not systemd (no machined, no system bus): nspawn
runs with ``--register=no --keep-unit`` from a cgroup of its own (see shared/lab/NOTES.md).
Each host is an overlay (upper dir per host) on the read-only image, so resetting a host
is dropping its upper dir, and creating one costs ~2 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from noderig.errors import NoderigError
from .layout import LabLayout

WRAPPER_TAG = "noderig-lab-host"

# Boots the container again when it exits with 133 (`systemctl reboot` inside), like a real
# host would come back, until asked to stop. $0 carries the tag `down` looks for.
BOOT_WRAPPER = r"""
for cg in $CGROUPS; do echo $$ > "$cg/cgroup.procs"; done
while :; do
  systemd-nspawn --quiet -D "$ROOT" -M "$MACHINE" --hostname="$NAME" --register=no --keep-unit \
      --boot --console=pipe --network-bridge="$BRIDGE" && exit 0
  rc=$?
  [ "$rc" -eq 133 ] || exit "$rc"
  [ -e "$STOPFILE" ] && exit 0
  echo "[noderig-lab] $NAME rebooted" >&2
done
"""


@dataclass
class LabHost:
    name: str
    index: int
    ip: str
    role: str  # "reference" or "target"
    pid: int | None = None  # the boot wrapper's pid (its child is systemd-nspawn)

    def to_json(self) -> dict:
        return {"name": self.name, "index": self.index, "ip": self.ip, "role": self.role, "pid": self.pid}

    @classmethod
    def from_json(cls, data: dict) -> "LabHost":
        return cls(**data)


def _run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=True, **kw)


def is_mounted(path: Path) -> bool:
    target = str(path.resolve()) if path.exists() else str(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target for line in f)


def prepare(layout: LabLayout, lower: Path, host: LabHost, all_hosts: list[LabHost]) -> None:
    """Mount the host's overlay and give it its identity: hostname, machine-id, ssh keys,
    address, the lab's authorized key and /etc/hosts naming every lab host."""
    hdir = layout.host_dir(host.name)
    root = layout.host_root(host.name)
    for sub in ("upper", "work", "root"):
        (hdir / sub).mkdir(parents=True, exist_ok=True)
    if not is_mounted(root):
        _run("mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={lower},upperdir={hdir / 'upper'},workdir={hdir / 'work'}", str(root))
    (root / "etc/hostname").write_text(host.name + "\n")
    machine_id = hdir / "machine-id"
    if not machine_id.exists():
        machine_id.write_text(os.urandom(16).hex() + "\n")
    (root / "etc/machine-id").write_text(machine_id.read_text())
    if not (root / "etc/ssh/ssh_host_ed25519_key").exists():
        _run("chroot", str(root), "ssh-keygen", "-A")
    ssh = root / "root/.ssh"
    ssh.mkdir(mode=0o700, exist_ok=True)
    (ssh / "authorized_keys").write_text((layout.ssh_key.with_suffix(".pub")).read_text())
    os.chmod(ssh / "authorized_keys", 0o600)
    (root / "etc/systemd/network/10-host0.network").write_text(
        "[Match]\nName=host0\n[Network]\n"
        f"Address={host.ip}/24\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n"
    )
    lines = ["127.0.0.1 localhost", f"127.0.1.1 {host.name}", f"{layout.services_ip} lab-hub lab-packages"]
    lines += [f"{h.ip} {h.name}" for h in all_hosts if h.name != host.name]
    (root / "etc/hosts").write_text("\n".join(lines) + "\n")
    # The lab's package source, as a node behind a local mirror would have it.
    (root / "etc/apt/sources.list.d/noderig-lab.list").write_text(
        f"deb [trusted=yes] {layout.packages_url} ./\n"
    )


def host_public_key(layout: LabLayout, name: str) -> str:
    return (layout.host_root(name) / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()[1]


def boot(layout: LabLayout, host: LabHost) -> int:
    for cg in layout.cgroup_dirs(host.name):
        cg.mkdir(parents=True, exist_ok=True)
    stopfile = layout.host_dir(host.name) / "stopping"
    stopfile.unlink(missing_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "CGROUPS": " ".join(str(c) for c in layout.cgroup_dirs(host.name)),
        "ROOT": str(layout.host_root(host.name)),
        "NAME": host.name,
        # The machine name also names the host end of its veth (vb-<machine>), which must be
        # unique on the controller: labs side by side each have a ct200.
        "MACHINE": machine_name(layout, host.name),
        "BRIDGE": layout.bridge,
        "STOPFILE": str(stopfile),
    }
    with open(layout.host_log(host.name), "ab") as log:
        proc = subprocess.Popen(
            ["bash", "-c", BOOT_WRAPPER, f"{WRAPPER_TAG}:{layout.name}:{host.name}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
        )
    host.pid = proc.pid
    return proc.pid


def ssh_command(layout: LabLayout, host: LabHost, command: list[str] | str, *, tty: bool = False) -> list[str]:
    opts = ["-i", str(layout.ssh_key), "-o", f"UserKnownHostsFile={layout.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2",
            "-o", "LogLevel=ERROR"]
    if tty:
        opts.append("-t")
    remote = command if isinstance(command, str) else " ".join(command)
    return ["ssh", *opts, f"root@{host.ip}", *([remote] if remote else [])]


def wait_ready(layout: LabLayout, host: LabHost, timeout: float = 60.0) -> str:
    """Wait until sshd answers and systemd has finished booting; returns the system state."""
    deadline = time.monotonic() + timeout
    cmd = ssh_command(layout, host, "systemctl is-system-running --wait")
    last = ""
    while time.monotonic() < deadline:
        if host.pid is not None and not pid_alive(host.pid):
            raise NoderigError(
                f"lab host {host.name} exited while booting; its console log is {layout.host_log(host.name)}"
            )
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        state = res.stdout.strip()
        if state in ("running", "degraded"):
            return state
        last = (res.stderr or state).strip()
        time.sleep(0.1)
    raise NoderigError(
        f"lab host {host.name} ({host.ip}) did not become reachable over ssh within {timeout:.0f} s "
        f"(last: {last or 'no answer'}); its console log is {layout.host_log(host.name)}"
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def is_our_wrapper(layout: LabLayout, pid: int, name: str) -> bool:
    """True when pid is the boot wrapper this lab started for host `name`: a recorded pid
    that now belongs to another process is never signalled."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{WRAPPER_TAG}:{layout.name}:{name}".encode() in argv


def leader_pid(pid: int) -> int | None:
    """The container's PID 1 as seen from the controller (child of nspawn)."""
    for nspawn in children(pid):
        for leader in children(nspawn):
            return leader
    return None


def machine_name(layout: LabLayout, name: str) -> str:
    """nspawn's machine name for a lab host; it also names the host end of its veth."""
    return f"{layout.name}-{name}"


def stop(layout: LabLayout, host: LabHost, timeout: float = 10.0) -> None:
    """Clean poweroff (SIGTERM to nspawn makes the container shut down), then force: nspawn
    killed, then whatever is left in the host's own cgroups (``kill_leftovers``)."""
    pid = host.pid
    if pid and is_our_wrapper(layout, pid, host.name):
        (layout.host_dir(host.name) / "stopping").touch()
        nspawns = children(pid)
        for p in nspawns or [pid]:
            _signal(p, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.05)
        if pid_alive(pid):
            for p in [*nspawns, pid]:
                _signal(p, signal.SIGKILL)
            _reap(pid)
    host.pid = None
    kill_leftovers(layout, host.name)
    for cg in layout.cgroup_dirs(host.name):
        _rmdir_tree(cg)


def kill_leftovers(layout: LabLayout, name: str, timeout: float = 10.0) -> list[int]:
    """SIGKILL every process still in lab host ``name``'s cgroups (the lab made them, for that
    host alone) and remove its veth; returns the pids found. A container whose shutdown
    outlives ``stop``'s wait (a stand-in's eight ranks stopping on a loaded machine) keeps,
    once nspawn is killed, its systemd (reparented to PID 1), its services and its network
    namespace: its veth then fails the host's next boot ("File exists") and its old address
    answers on the bridge beside the new host's."""
    found: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        pids = {int(p) for cg in layout.cgroup_dirs(name) if cg.is_dir() for procs in cg.rglob("cgroup.procs")
                for p in _read_lines(procs)}
        if not pids or time.monotonic() > deadline:
            break
        found += sorted(pids - set(found))
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.05)
    veth = f"vb-{machine_name(layout, name)}"
    if len(veth) <= 15 and Path(f"/sys/class/net/{veth}").exists():
        subprocess.run(["ip", "link", "del", veth], capture_output=True, check=False)
    return found


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:  # the cgroup went away meanwhile
        return []


def remove(layout: LabLayout, host: LabHost) -> None:
    """Stop the host and drop its overlay: everything it wrote is gone."""
    stop(layout, host)
    root = layout.host_root(host.name)
    if is_mounted(root):
        subprocess.run(["umount", str(root)], check=False)
        if is_mounted(root):
            subprocess.run(["umount", "-l", str(root)], check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", str(layout.host_dir(host.name))], check=False)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _rmdir_tree(path: Path) -> None:
    if not path.is_dir():
        return
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        try:
            sub.rmdir()
        except OSError:
            pass
    try:
        path.rmdir()
    except OSError:
        pass
