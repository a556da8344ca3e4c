"""Hostile inventory values and the venv copy key, on the lab: a value that would reach a
shell or a unit is refused in preflight before anything changes (and runs nowhere); the copy
key can do nothing but receive into the venv, and one that cannot be removed fails the host."""

from __future__ import annotations

import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from noderig import copykey
from tests.conftest import deploy, hub_call, run_pyinfra

pytestmark = pytest.mark.lab

VENV = "/opt/sglang/venv"
PKG = f"{VENV}/lib/python3.11/site-packages/sglang"
ENV_STEPS = "steps=prerequisites,environment"


TRACES = (("the venv was copied", f"test -e {VENV}"), ("a package was installed", "dpkg -s aria2 >/dev/null 2>&1"),
          ("a checkpoint was written", "test -e /models"))


def traces(lab) -> list[str]:
    """What of a deploy is on b300: the venv, a package, a checkpoint (none, on a bare host). A check that could not
    run (ssh failed: 255) is an error, never "nothing there"."""
    found = []
    for what, check in TRACES:
        code = lab.run("b300", check, check=False).returncode
        assert code in (0, 1), f"could not check on b300 whether {what.split(' was ')[0]} is there: exit {code}"
        found += [what] if code == 0 else []
    return found


def untouched(lab) -> None:
    """Nothing of the deploy happened on b300."""
    assert traces(lab) == []


@pytest.fixture(scope="module")
def reset_once(lab):
    lab.reset("b300")


@pytest.fixture
def bare_b300(lab, reset_once):
    """b300 with nothing of a deploy on it, for the refusals: reset once for all of them, since a refusal changes
    nothing (each asserts so), and again only after one that left something behind (it failed)."""
    if traces(lab):
        lab.reset("b300")


def inventory_with_address(lab, tmp_path: Path, name: str, hostname: str) -> Path:
    """The lab inventory with ``hostname`` as ``name``'s ssh_hostname. pyinfra still reaches the
    host through an ssh_config alias (as users with ssh_config aliases do), so the value gets
    as far as it can: into the deploy's own commands, where the hosts address each other."""
    ip = lab.host(name).ip
    config = tmp_path / f"{name}.ssh_config"
    config.write_text(f"Host *\n    HostName {ip}\n")
    text = lab.inventory.read_text().replace(
        f"({name!r}, {{**_lab, 'ssh_hostname': {ip!r}}})",
        f"({name!r}, {{**_lab, 'ssh_hostname': {hostname!r}, 'ssh_config_file': {str(config)!r}}})")
    assert hostname in text
    # pyinfra reads group_data/ beside the inventory file
    path = lab.inventory.with_name(f"{lab.inventory.stem}_address_{secrets.token_hex(3)}.py")
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["b300", "ct200"])
def test_a_host_name_that_is_a_command_is_refused_in_preflight_and_runs_nowhere(lab, bare_b300, tmp_path, name):
    marker = f"/tmp/noderig-injected-{secrets.token_hex(4)}"
    inventory = inventory_with_address(lab, tmp_path, name, f"127.0.0.1$(touch {marker})")
    try:
        res = run_pyinfra(inventory, "-y", "deploy.py")
    finally:
        inventory.unlink()
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "preflight on b300: the inventory is refused, nothing was changed" in out, out[-3000:]
    assert f"ssh_hostname='127.0.0.1$(touch {marker})' is not an IP address or a host name (host {name})" in out
    for host in ("b300", "ct200"):
        assert lab.run(host, f"test -e {marker}", check=False).returncode == 1, f"ran on {host}"
    assert not Path(marker).exists(), "ran on the controller"
    untouched(lab)


@pytest.mark.parametrize("data,expected", [
    (["service_name=ssh"], "service_name='ssh' names ssh.service, which noderig did not write "
                           "(/lib/systemd/system/ssh.service)"),
    (["service_name=sshd"], "service_name='sshd' names sshd.service, which noderig did not write"),
    (["model_dir=/etc"], "model_dir='/etc' is / or a system directory"),
    (["venv_path=/usr/lib/x"], "venv_path='/usr/lib/x' is inside the system directory /usr/lib"),
    (["venv_import_check=sglang;import os"], "venv_import_check='sglang;import os' must be a Python module name"),
    (['packages=["-oAPT::Update::Pre-Invoke::=touch /tmp/x"]'], "is not a Debian package name"),
    (["allow_insecure_hub_http=false"], "is plain http, which sends the Hub token in clear"),
])
def test_a_refused_setting_changes_nothing_and_reaches_no_hub(lab, bare_b300, data, expected):
    ssh_unit = lab.run("b300", "sha256sum /lib/systemd/system/ssh.service").stdout
    units = lab.run("b300", "ls -la /etc/systemd/system").stdout
    hub_call(lab, "/_lab/reset", {})
    res, out = deploy(lab, *data)
    assert res.returncode != 0
    assert "preflight on b300: the inventory is refused" in out and expected in out, out[-3000:]
    untouched(lab)
    assert hub_call(lab, "/_lab/stats")["requests"]["total"] == 0, "the Hub was asked before the refusal"
    assert lab.run("b300", "sha256sum /lib/systemd/system/ssh.service").stdout == ssh_unit
    assert lab.run("b300", "ls -la /etc/systemd/system").stdout == units
    assert lab.run("b300", "test -e /etc/noderig", check=False).returncode == 1
    assert lab.run("b300", "systemctl is-active ssh.service").stdout.strip() == "active"


def test_the_dry_run_says_the_inventory_is_refused(lab, bare_b300):
    res = run_pyinfra(lab.inventory, "--dry", "deploy.py", "--data", "service_name=ssh", "--data", "model_dir=/")
    out = res.stdout + res.stderr
    assert "would fail: preflight on b300: the inventory is refused, nothing was changed" in out, out[-3000:]
    assert "model_dir='/' is / or a system directory" in out and "service_name='ssh'" in out
    untouched(lab)


def test_a_unit_file_that_cannot_be_read_is_an_error_not_absent(lab):
    lab.reset("b300")
    lab.run("b300", "mkdir /etc/systemd/system/sglang.service")  # head cannot read a directory
    res, out = deploy(lab, "steps=preflight")
    assert res.returncode != 0
    assert "could not read /etc/systemd/system/sglang.service (the unit sglang.service)" in out, out[-3000:]


# -- the copy key ------------------------------------------------------------------------------

def _watch(lab, name: str, command: str, log: str) -> None:
    """Record ``command``'s output on ``name`` in a loop until ``_stop``: what exists only
    while the deploy's copy runs."""
    lab.run(name, f"nohup sh -c 'while :; do {command}; done' >{log} 2>/dev/null </dev/null & echo $! >{log}.pid")


def _stop(lab, name: str, log: str) -> str:
    lab.run(name, f"kill $(cat {log}.pid)")
    return lab.run(name, f"cat {log}").stdout


def test_the_copy_key_is_forced_to_rrsync_0600_and_gone_after_the_copy(lab):
    lab.reset("b300")
    _watch(lab, "b300", "grep noderig-transient /root/.ssh/authorized_keys", "/var/tmp/keys.log")
    _watch(lab, "ct200", "stat -c \"%a %n\" /root/.ssh/noderig-transient-*", "/var/tmp/modes.log")
    try:
        res, out = deploy(lab, ENV_STEPS)
    finally:
        keys, modes = _stop(lab, "b300", "/var/tmp/keys.log"), _stop(lab, "ct200", "/var/tmp/modes.log")
    assert res.returncode == 0 and "venv copied (direct)" in out, out[-3000:]
    lines = set(keys.splitlines())
    assert len(lines) == 1, keys  # one key for the copy, seen while it ran
    ct200 = lab.host("ct200").ip
    assert re.fullmatch(rf'restrict,command="/usr/bin/rrsync -wo {VENV}",from="{re.escape(ct200)}",'
                        r'expiry-time="\d{12}Z" ssh-ed25519 \S+ noderig-transient-b300-[0-9a-f]{8}-[0-9a-f]{12}', lines.pop())
    seen = [line.split() for line in modes.splitlines() if "noderig-transient" in line]
    assert seen and all(mode == "600" for mode, _ in seen), modes  # never readable by others, not even empty
    assert "noderig-transient" not in lab.run("b300", "cat /root/.ssh/authorized_keys").stdout
    assert "noderig-transient" not in lab.run("ct200", "ls /root/.ssh").stdout


def test_a_reference_named_by_host_name_is_authorised_by_the_address_the_node_resolves(lab, tmp_path):
    """sshd compares from= with the client's IP (UseDNS is off): a host name would never match."""
    lab.reset("b300")
    _watch(lab, "b300", "grep noderig-transient /root/.ssh/authorized_keys", "/var/tmp/keys.log")
    inventory = inventory_with_address(lab, tmp_path, "ct200", "ct200")  # the name b300's /etc/hosts knows
    try:
        res = run_pyinfra(inventory, "-y", "deploy.py", "--data", ENV_STEPS)
    finally:
        inventory.unlink()
        keys = _stop(lab, "b300", "/var/tmp/keys.log")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "venv copied (direct)" in out, out[-3000:]
    assert f'from="{lab.host("ct200").ip}"' in keys, keys


@pytest.fixture
def copy_key(lab, tmp_path):
    """A key authorised on b300 exactly the way the deploy authorises its copy key (same
    builder), with its private half on ct200: ``use(command, expires=...)`` runs ``command``
    on ct200 with ``$SSH`` set to an ssh command line that uses it."""
    lab.reset("b300")
    lab.run("b300", f"mkdir -p {VENV}")
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "probe", "-f", str(key)], check=True)
    pub = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    b300, ct200 = lab.host("b300").ip, lab.host("ct200").ip
    host_key = lab.run("b300", "cat /etc/ssh/ssh_host_ed25519_key.pub").stdout
    lab.run("ct200", f"install -m 600 /dev/null /root/probe && echo '{key.read_text()}' > /root/probe && "
                     f"echo '{copykey.known_hosts_line(b300, 22, host_key).strip()}' > /root/probe.known")
    ssh = f"ssh -i /root/probe -o UserKnownHostsFile=/root/probe.known -o BatchMode=yes"

    def authorise(expires_in: int) -> None:
        expires = copykey.expiry(time.time() + expires_in - copykey.EXPIRY_MARGIN_SECONDS, 0)
        lab.run("b300", f"echo '{copykey.authorized_line(pub, 'probe', [ct200], VENV, expires)}' "
                        ">> /root/.ssh/authorized_keys")

    def use(command: str) -> subprocess.CompletedProcess:
        return lab.run("ct200", f"SSH='{ssh}'; {command}", check=False)

    return authorise, use, b300, key


def test_the_copy_key_is_refused_for_any_other_command(lab, copy_key):
    authorise, use, b300, key = copy_key
    authorise(300)
    # the one thing it may do: rsync into the venv (the test could fail)
    ok = use(f"echo probe > /tmp/f && rsync -e \"$SSH\" /tmp/f root@{b300}:/probe-file")
    assert ok.returncode == 0, ok.stderr
    assert lab.run("b300", f"cat {VENV}/probe-file").stdout == "probe\n"
    # a shell command gets nothing
    res = use(f"$SSH root@{b300} id")
    assert res.returncode != 0 and "uid=" not in res.stdout
    assert "does not run rsync" in res.stderr, res.stderr
    res = use(f"$SSH root@{b300} 'touch /tmp/pwned'")
    assert res.returncode != 0 and lab.run("b300", "test -e /tmp/pwned", check=False).returncode == 1
    # reading is refused (write-only), so is a path outside the venv; an absolute path lands inside it
    res = use(f"rsync -e \"$SSH\" root@{b300}:/etc/shadow /tmp/shadow")
    assert res.returncode != 0 and "reading from write-only server is not allowed" in res.stderr
    res = use(f"rsync -e \"$SSH\" /tmp/f root@{b300}:../../etc/noderig-probe")
    assert res.returncode != 0 and "do not use .." in res.stderr
    use(f"rsync -e \"$SSH\" /tmp/f root@{b300}:/etc/noderig-probe")
    assert lab.run("b300", "test -e /etc/noderig-probe", check=False).returncode == 1
    # no forwarding (restrict)
    res = use(f"timeout 20 $SSH -W 127.0.0.1:22 root@{b300}")
    assert res.returncode != 0 and "prohibited" in res.stderr, res.stderr
    # from anywhere but the reference (here: the controller) it is refused at authentication
    res = subprocess.run(["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                          "-o", f"UserKnownHostsFile={lab.layout.known_hosts}", f"root@{b300}", "rsync --server ."],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 255 and "Permission denied" in res.stderr, res.stderr


def test_an_expired_copy_key_is_refused(lab, copy_key):
    authorise, use, b300, _ = copy_key
    authorise(-120)
    res = use(f"echo probe > /tmp/f && rsync -e \"$SSH\" /tmp/f root@{b300}:/probe-file")
    assert res.returncode != 0 and "Permission denied" in res.stderr, res.stderr
    assert lab.run("b300", f"test -e {VENV}/probe-file", check=False).returncode == 1


def test_a_copy_key_that_cannot_be_removed_fails_the_host_and_the_next_run_removes_it(lab):
    lab.reset("b300")
    res, out = deploy(lab, ENV_STEPS)
    assert res.returncode == 0, out[-3000:]
    lab.run("ct200", f"echo '# changed' >> {PKG}/srt/utils.py")
    # authorized_keys bind-mounted on itself: appending works, replacing it (sed -i) cannot
    lab.exec("b300", "mount --bind /root/.ssh/authorized_keys /root/.ssh/authorized_keys")
    try:
        res, out = deploy(lab, ENV_STEPS)
    finally:
        lab.exec("b300", "umount /root/.ssh/authorized_keys")
    assert res.returncode != 0, out[-3000:]
    assert re.search(r"the copy key noderig-transient-b300-[0-9a-f]{8}-[0-9a-f]{12} could not be removed \(on b300: .*busy",
                     out), out[-3000:]
    assert "delete the line with noderig-transient-b300-" in out
    assert "b300" in out.split("--> noderig:")[-1] and "failed" in out.split("--> noderig:")[-1]
    assert "noderig-transient" in lab.run("b300", "cat /root/.ssh/authorized_keys").stdout
    # the venv is current, so the rerun only removes what was left, and says so
    res, out = deploy(lab, ENV_STEPS)
    assert res.returncode == 0, out[-3000:]
    assert "removing 1 copy key(s) an interrupted run left" in out
    assert "noderig-transient" not in lab.run("b300", "cat /root/.ssh/authorized_keys").stdout
    assert "noderig-transient" not in lab.run("ct200", "ls /root/.ssh").stdout


def test_the_direct_copy_uses_the_inventory_ssh_port(lab):
    """Both hosts' sshd on port 2222 only: the copy (ssh -p, [addr]:port known_hosts) works."""
    lab.reset("b300")
    names = ("ct200", "b300")
    keys = {n: lab.run(n, "cat /etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[1] for n in names}
    known = lab.layout.known_hosts.read_text()
    for n in names:
        lab.exec(n, "echo 'Port 2222' > /etc/ssh/sshd_config.d/20-port.conf && systemctl restart ssh.service")
    lab.layout.known_hosts.write_text(known + "".join(f"[{lab.host(n).ip}]:2222 ssh-ed25519 {keys[n]}\n"
                                                      for n in names))
    try:
        res, out = deploy(lab, ENV_STEPS, "ssh_port=2222")
        assert res.returncode == 0, out[-3000:]
        assert "venv copied (direct)" in out
        count = f"cd {VENV} && find . -name __pycache__ -prune -o -print | wc -l"  # (bytecode is not copied)
        assert int(lab.exec("b300", count).stdout) == int(lab.exec("ct200", count).stdout) > 100
    finally:
        lab.exec("ct200", "rm -f /etc/ssh/sshd_config.d/20-port.conf && systemctl restart ssh.service")
        lab.layout.known_hosts.write_text(known)
        lab.reset("b300")
