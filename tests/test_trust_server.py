"""The server's trust boundary on the lab (issue 11, items 2-4), through the real deploy:
exposure is the inventory's decision (refused before any change), the server runs as its own
user outside the checkpoint with systemd's hardening, and noderig's nftables table closes
every port but SSH and the API to other hosts, tried from ct200."""

from __future__ import annotations

import json
import os
import re
import secrets

import pytest

from tests.conftest import changed_ops, deploy, run_pyinfra

pytestmark = pytest.mark.lab

API, INTERNAL = 30000, 30100  # the stand-in's scheduler socket: port + 100, on every interface
FIREWALL_OP = "Firewall: table inet noderig loaded"
# Measured on the lab's b300 (systemd 252): `systemd-analyze security sglang.service`.
EXPOSURE_LIMIT = 2.0
# Everything a refused deploy must leave as it was: the deploy's paths (with mtimes and modes),
# packages, users, the firewall and the service.
SNAPSHOT = ("find /etc /opt /models /usr/local /var/lib/sglang -xdev -printf '%y %s %T@ %m %p\\n' 2>/dev/null "
            "| grep -v ' /etc/ld.so.cache$' | LC_ALL=C sort; dpkg-query -W -f '${Package} ${Version}\\n'; "
            "getent passwd sglang; command -v nft && nft list ruleset; systemctl show -p ActiveState sglang")
# Hostile files a Hub could list into the checkpoint (they match *.py): if either ever ran it
# would leave a marker in the server's state directory and a line in the journal.
HOSTILE = ("import os, sys\n"
           "print('HOSTILE CODE RAN from ' + __file__, file=sys.stderr)\n"
           "open(os.path.join(os.environ.get('HOME', '/var/lib/sglang'), 'pwned'), 'w').write(__file__)\n")


def knock(lab, source: str, address: str, port: int) -> str:
    """From lab host ``source``, connect to ``address:port``: what the far end first says, or
    the error (``refused``, ``timeout``)."""
    code = ("import socket, sys\n"
            "try:\n"
            f"    s = socket.create_connection(({address!r}, {port}), timeout=3)\n"
            "    s.settimeout(3)\n"
            "    print('open', s.recv(64).decode(errors='replace').strip())\n"
            "except ConnectionRefusedError:\n    print('refused')\n"
            "except OSError as e:\n    print('timeout' if 'timed out' in str(e) else f'error {e}')\n")
    return lab.run(source, f"python3 -c {shlex_quote(code)}").stdout.strip()


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def api_status(lab, source: str, address: str, key: str | None = None) -> str:
    header = f"-H 'Authorization: Bearer {key}' " if key else ""
    return lab.run(source, f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' {header}http://{address}:{API}/v1/models",
                   check=False).stdout.strip()


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("key") / "api_key"
    key = "nrk-" + secrets.token_hex(16)
    path.write_text(key + "\n")
    os.chmod(path, 0o600)
    return path, key


def exposed(key_file) -> list[str]:
    return ["server_host=0.0.0.0", f"api_key_file={key_file[0]}"]


# --- exposure ---------------------------------------------------------------------------------------


def test_a_server_beyond_loopback_without_a_key_is_refused_before_any_change(lab):
    lab.reset("b300")
    before = lab.run("b300", SNAPSHOT).stdout
    res, out = deploy(lab, "server_host=0.0.0.0")
    assert res.returncode != 0
    assert "server_host='0.0.0.0' would expose the server on port 30000 to other hosts without an API key" in out
    assert "FAILED at \"Preflight" in out, out[-2000:]
    assert lab.run("b300", SNAPSHOT).stdout == before, "a refused exposure changed the node"


def test_the_dry_run_says_which_exposure(lab, key_file):
    cases = {("server_host=0.0.0.0", "allow_unauthenticated_network_access=True"): "explicitly unauthenticated",
             tuple(exposed(key_file)): "exposed with key", (): "loopback"}
    for data, kind in cases.items():
        args = ["deploy.py", "--dry"]
        for d in data:
            args += ["--data", d]
        res = run_pyinfra(lab.inventory, *args)
        out = res.stdout + res.stderr
        assert f"[b300] exposure: {kind}: " in out, out[-2000:]


# --- the server: its own user, outside the checkpoint, hardened -------------------------------------


@pytest.fixture(scope="module")
def hostile_checkpoint(lab):
    """b300 bare, with a hostile sglang/launch_server.py and sitecustomize.py in the model
    directory before the first deploy; then deployed with the defaults."""
    lab.reset("b300")
    lab.run("b300", "mkdir -p /models/Kimi-K2.6/sglang && cd /models/Kimi-K2.6 && touch sglang/__init__.py && "
                    f"printf %s {shlex_quote(HOSTILE)} | tee sglang/launch_server.py > sitecustomize.py")
    res, out = deploy(lab)
    assert res.returncode == 0, out[-4000:]
    return lab


def test_the_server_never_runs_code_from_the_checkpoint(hostile_checkpoint):
    lab = hostile_checkpoint
    pid = lab.run("b300", "systemctl show -p MainPID --value sglang").stdout.strip()
    assert lab.run("b300", f"readlink /proc/{pid}/cwd").stdout.strip() == "/var/lib/sglang"
    models = json.loads(lab.run("b300", "curl -sf http://127.0.0.1:30000/v1/models").stdout)
    assert [m["id"] for m in models["data"]] == ["kimi-k2.6"], "the installed stand-in serves"
    assert lab.run("b300", "test -e /var/lib/sglang/pwned", check=False).returncode == 1
    assert "HOSTILE CODE RAN" not in lab.run("b300", "journalctl --no-pager -o cat -u sglang").stdout
    assert lab.run("b300", "test -f /models/Kimi-K2.6/sglang/launch_server.py").returncode == 0, "still there"


def test_the_server_runs_as_its_own_system_user_not_root(hostile_checkpoint):
    lab = hostile_checkpoint
    assert lab.run("b300", "getent passwd sglang | cut -d: -f7").stdout.strip() == "/usr/sbin/nologin"
    rows = [line.split() for line in lab.run("b300", "ps -eo user=,unit=,pid=").stdout.splitlines()]
    users = [row[0] for row in rows if row[1] == "sglang.service"]
    assert len(users) >= 9, "the launcher, the server and its eight ranks"
    assert set(users) == {"sglang"}, rows


def test_the_server_writes_only_its_state_directory_and_keeps_the_gpus_reachable(hostile_checkpoint):
    lab = hostile_checkpoint
    pid = lab.run("b300", "systemctl show -p MainPID --value sglang").stdout.strip()
    inside = f"nsenter -t {pid} -m"  # the server's own mount namespace
    for path in ("/models/Kimi-K2.6/x", "/opt/sglang/venv/x", "/etc/x", "/usr/local/lib/noderig/x"):
        res = lab.run("b300", f"{inside} touch {path}", check=False)
        assert res.returncode != 0 and "Read-only file system" in res.stderr, path
    lab.run("b300", f"{inside} touch /var/lib/sglang/x && rm /var/lib/sglang/x")
    assert lab.run("b300", "find /root -mindepth 1").stdout.strip(), "root's home has files (its ssh keys)"
    assert lab.run("b300", f"{inside} find /root /home -mindepth 1", check=False).stdout.strip() == ""
    show = dict(line.split("=", 1) for line in lab.run("b300", (
        "systemctl show sglang -p User -p NoNewPrivileges -p ProtectSystem -p ProtectHome -p PrivateTmp "
        "-p PrivateDevices -p DevicePolicy -p DeviceAllow -p MemoryDenyWriteExecute -p CapabilityBoundingSet "
        "-p RestrictNamespaces -p WorkingDirectory")).stdout.splitlines())
    assert show["User"] == "sglang" and show["NoNewPrivileges"] == "yes" and show["PrivateTmp"] == "yes"
    assert show["ProtectSystem"] == "strict" and show["ProtectHome"] == "yes"
    assert show["WorkingDirectory"] == "/var/lib/sglang" and show["CapabilityBoundingSet"] == ""
    # /dev/nvidia* stay reachable: no private /dev, no device allow-list; JIT may map code.
    assert show["PrivateDevices"] == "no" and show["DevicePolicy"] == "auto" and not show.get("DeviceAllow")
    assert show["MemoryDenyWriteExecute"] == "no"
    score = re.search(r"Overall exposure level for sglang.service: ([\d.]+)",
                      lab.run("b300", "systemd-analyze security sglang.service").stdout)
    print(f"systemd-analyze security sglang.service on b300: {score.group(1)}")
    assert float(score.group(1)) <= EXPOSURE_LIMIT


def test_a_checkpoint_others_cannot_read_is_made_readable_never_chowned(hostile_checkpoint):
    lab = hostile_checkpoint
    lab.run("b300", "chmod 700 /models/Kimi-K2.6 && chmod 600 /models/Kimi-K2.6/config.json")
    res = run_pyinfra(lab.inventory, "deploy.py", "--dry")
    out = res.stdout + res.stderr
    assert "[b300] not readable by the server's user, made world-readable: /models/Kimi-K2.6, " \
           "/models/Kimi-K2.6/config.json" in out, out[-2000:]
    res, out = deploy(lab)
    assert res.returncode == 0 and changed_ops(out) == {"Venv and checkpoints readable by the server's user": 1}, \
        changed_ops(out)
    stat = lab.run("b300", "stat -c '%a %U' /models/Kimi-K2.6 /models/Kimi-K2.6/config.json").stdout.split("\n")
    assert stat[:2] == ["705 root", "604 root"], stat
    res, out = deploy(lab)
    assert res.returncode == 0 and changed_ops(out) == {}, changed_ops(out)


# --- the firewall, tried from another host ----------------------------------------------------------


@pytest.fixture(scope="module")
def firewalled(lab, key_file):
    """b300 serving beyond loopback with a key, and a table of someone else's that noderig must
    never touch."""
    lab.reset("b300")
    res, out = deploy(lab, *exposed(key_file))
    assert res.returncode == 0, out[-4000:]
    lab.run("b300", "nft add table inet theirs && nft add chain inet theirs keep '{ type filter hook input "
                    "priority 100; policy accept; }' && nft add rule inet theirs keep tcp dport 9 counter accept")
    return lab


def theirs(lab) -> str:
    return lab.run("b300", "nft list table inet theirs").stdout


def test_from_another_host_only_ssh_and_the_api_answer(firewalled, key_file):
    lab, key = firewalled, key_file[1]
    b300 = lab.host("b300").ip
    assert api_status(lab, "ct200", b300, key) == "200"
    assert api_status(lab, "ct200", b300) == "401", "the key is in force"
    assert knock(lab, "ct200", b300, INTERNAL) == "refused"
    assert knock(lab, "ct200", b300, 22).startswith("open SSH-2.0")
    # From b300 itself (its own address, not only loopback) both answer.
    assert api_status(lab, "b300", b300, key) == "200"
    assert knock(lab, "b300", b300, INTERNAL) == "open sglang-standin scheduler socket"


UDP_ECHO = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('0.0.0.0', 5999))\n"
            "while True:\n    data, peer = s.recvfrom(64)\n    s.sendto(b'echo ' + data, peer)\n")


def udp_knock(lab, source: str, address: str) -> str:
    code = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.settimeout(3)\n"
            f"s.connect(({address!r}, 5999))\ns.send(b'hi')\n"
            "try:\n    print(s.recv(64).decode())\n"
            "except ConnectionRefusedError:\n    print('refused')\nexcept OSError:\n    print('timeout')\n")
    return lab.run(source, f"python3 -c {shlex_quote(code)}").stdout.strip()


def test_udp_ports_are_closed_to_other_hosts_too(firewalled):
    lab, b300 = firewalled, firewalled.host("b300").ip
    lab.run("b300", f"systemd-run --unit=udp-echo python3 -c {shlex_quote(UDP_ECHO)}")
    try:
        assert udp_knock(lab, "b300", b300) == "echo hi"
        assert udp_knock(lab, "ct200", b300) == "refused"
    finally:
        lab.run("b300", "systemctl stop udp-echo", check=False)


def test_the_rerun_changes_nothing_and_other_tables_are_untouched(firewalled, key_file):
    lab = firewalled
    before = theirs(lab)
    res, out = deploy(lab, *exposed(key_file))
    assert res.returncode == 0 and changed_ops(out) == {}, changed_ops(out)
    assert theirs(lab) == before


def test_a_flushed_table_is_shown_and_restored_by_the_rerun(firewalled, key_file):
    lab, b300 = firewalled, firewalled.host("b300").ip
    lab.run("b300", "nft flush table inet noderig")
    assert knock(lab, "ct200", b300, INTERNAL).startswith("open"), "the table was what closed it"
    res = run_pyinfra(lab.inventory, "deploy.py", "--dry", "--diff",
                      *[arg for d in exposed(key_file) for arg in ("--data", d)])
    out = res.stdout + res.stderr
    assert "[b300] firewall: load table inet noderig (differs from the rendering)" in out, out[-2000:]
    assert "+\t\tmeta l4proto tcp reject with tcp reset" in out
    res, out = deploy(lab, *exposed(key_file))
    assert res.returncode == 0 and changed_ops(out) == {FIREWALL_OP: 1}, changed_ops(out)
    assert knock(lab, "ct200", b300, INTERNAL) == "refused"


def test_the_boot_unit_loads_the_same_table(firewalled, key_file):
    lab = firewalled
    lab.run("b300", "nft delete table inet noderig && systemctl start noderig-firewall.service")
    assert lab.run("b300", "systemctl is-enabled noderig-firewall.service").stdout.strip() == "enabled"
    res, out = deploy(lab, *exposed(key_file))
    assert res.returncode == 0 and changed_ops(out) == {}, "what boot loads is what the deploy renders"


def test_fleet_peers_and_the_api_allowlist(firewalled, key_file):
    lab, key = firewalled, key_file[1]
    b300, ct200 = lab.host("b300").ip, lab.host("ct200").ip
    res, out = deploy(lab, *exposed(key_file), f'firewall_peers=["{ct200}"]', 'firewall_api_allow=["192.0.2.0/24"]')
    assert res.returncode == 0 and changed_ops(out) == {"Firewall ruleset (loaded at boot)": 1, FIREWALL_OP: 1}, \
        changed_ops(out)
    assert knock(lab, "ct200", b300, INTERNAL) == "open sglang-standin scheduler socket", "a peer reaches every port"
    res, out = deploy(lab, *exposed(key_file), 'firewall_api_allow=["192.0.2.0/24"]')
    assert res.returncode == 0, out[-2000:]
    assert knock(lab, "ct200", b300, INTERNAL) == "refused"
    assert api_status(lab, "ct200", b300, key) == "000", "ct200 is not on the API allowlist"
    res, out = deploy(lab, *exposed(key_file))
    assert res.returncode == 0 and api_status(lab, "ct200", b300, key) == "200"


def test_bad_firewall_settings_are_refused_before_any_change(firewalled, key_file):
    lab = firewalled
    before = lab.run("b300", SNAPSHOT).stdout
    res, out = deploy(lab, *exposed(key_file), 'firewall_peers=["10.0.0.0/8; flush ruleset"]')
    assert res.returncode != 0
    assert "inventory value firewall_peers[0]='10.0.0.0/8; flush ruleset' is not allowed" in out, out[-2000:]
    assert lab.run("b300", SNAPSHOT).stdout == before


def test_firewall_off_removes_only_noderigs_table(firewalled, key_file):
    lab, b300 = firewalled, firewalled.host("b300").ip
    before = theirs(lab)
    try:
        res, out = deploy(lab, *exposed(key_file), "firewall=False")
        assert res.returncode == 0 and changed_ops(out) == {"Firewall off: table inet noderig removed": 1}, \
            changed_ops(out)
        assert lab.run("b300", "nft list table inet noderig", check=False).returncode != 0
        assert lab.run("b300", "ls /etc/noderig/firewall.nft /etc/systemd/system/noderig-firewall.service",
                       check=False).returncode != 0
        assert theirs(lab) == before
        assert knock(lab, "ct200", b300, INTERNAL).startswith("open"), "nothing closes it now"
        res, out = deploy(lab, *exposed(key_file), "firewall=False")
        assert res.returncode == 0 and changed_ops(out) == {}, changed_ops(out)
    finally:
        res, out = deploy(lab, *exposed(key_file))
        assert res.returncode == 0, out[-2000:]
    assert knock(lab, "ct200", b300, INTERNAL) == "refused"


# A stream into b300 from a peer, as the Hub's into a download in flight: a byte every 50 ms,
# none while /run/drip.quiet exists on the sender (a connection idle for a while, as a throttled
# or keep-alive one is). b300's reader writes how many bytes it has had so far.
DRIP = ("import os, socket, time\ns = socket.create_server(('0.0.0.0', 5998))\n"
        "while True:\n    c, _ = s.accept()\n    try:\n        while True:\n"
        "            if not os.path.exists('/run/drip.quiet'):\n                c.send(b'x')\n"
        "            time.sleep(0.05)\n    except OSError:\n        c.close()\n")
SIP = ("import socket, sys\nc = socket.create_connection((sys.argv[1], 5998))\nn = 0\n"
       "while True:\n    d = c.recv(4096)\n    if not d:\n        break\n    n += len(d)\n"
       "    open('/run/sip.count', 'w').write(str(n))\n")


def received(lab) -> int:
    return int(lab.run("b300", "cat /run/sip.count 2>/dev/null || echo 0").stdout.strip() or 0)


def still_receiving(lab, since: int) -> bool:
    """Whether b300's reader gets more than ``since`` bytes within 10 s (polled)."""
    for _ in range(40):
        if received(lab) > since:
            return True
        lab.run("b300", "sleep 0.25")
    return False


def test_a_connection_in_flight_when_the_table_first_loads_keeps_flowing(firewalled, key_file):
    # The checkpoint's download is in flight when the firewall first loads. Connection tracking
    # starts with the table's first rule that uses it, so the stream's next packet is "new"
    # mid-stream: refused, the stream would hang. The sender is quiet while the table loads (no
    # packet to track in any grace period), then sends again.
    lab = firewalled
    res, out = deploy(lab, *exposed(key_file), "firewall=False")
    assert res.returncode == 0, out[-2000:]
    lab.run("ct200", f"systemd-run --unit=drip python3 -c {shlex_quote(DRIP)}")
    lab.run("b300", f"systemd-run --unit=sip python3 -c {shlex_quote(SIP)} {lab.host('ct200').ip}")
    try:
        assert still_receiving(lab, 0), "the stream never started"
        lab.run("ct200", "touch /run/drip.quiet")
        res, out = deploy(lab, *exposed(key_file))
        assert res.returncode == 0 and changed_ops(out).get(FIREWALL_OP) == 1, changed_ops(out)
        lab.run("ct200", "rm -f /run/drip.quiet")
        assert still_receiving(lab, received(lab)), "the stream hung when the table loaded"
        # Replacing the table (the fan-out opens its port, a repair moves the API's) keeps it too.
        lab.run("b300", "nft -f /etc/noderig/firewall.nft")
        assert still_receiving(lab, received(lab)), "the stream hung when the table was replaced"
    finally:
        lab.run("b300", "systemctl stop sip", check=False)
        lab.run("ct200", "systemctl stop drip; rm -f /run/drip.quiet", check=False)
    # (a new connection still needs its port open: a SYN is not a packet in mid-stream)
    assert knock(lab, "ct200", lab.host("b300").ip, INTERNAL) == "refused"


def test_a_repair_that_moves_the_port_moves_the_firewall_with_it(lab, key_file):
    lab.reset("b300")
    lab.run("b300", "systemd-run --unit=squatter python3 -m http.server 30000 --bind 0.0.0.0")
    try:
        res, out = deploy(lab, *exposed(key_file), "repair=true")
        assert res.returncode == 0 and "move the server from port 30000 to free port 30001" in out, out[-3000:]
        table = lab.run("b300", "nft list table inet noderig").stdout
        assert "tcp dport 30001 accept" in table and "tcp dport 30000 accept" not in table
        res, out = deploy(lab, *exposed(key_file))
        assert res.returncode == 0 and changed_ops(out) == {}, changed_ops(out)
    finally:
        lab.run("b300", "systemctl stop squatter", check=False)
