"""The node firewall: noderig's own nftables table, loaded now and at every boot, or removed.

Only ``table inet noderig`` (and the two files that persist it) is ever written or deleted;
the node's other tables are never listed, flushed or changed.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from pyinfra import host, logger
from pyinfra.api.command import StringCommand

from noderig.exposure import is_loopback
from noderig.firewall import (NFT, PERSIST_UNIT_FILE, PERSIST_UNIT_NAME, RULESET_FILE, TABLE, FirewallSettings,
                              load_script, persist_unit, problems, render_table, rules, same_table)
from noderig.server_settings import ServerSettings

from .facts import Mtimes, NftTable, SshdPorts, UnitStatus
from .service import text_file
from .util import fail, first_pass, operation

UNIT = f"{PERSIST_UNIT_NAME}.service"


def settings_for(data, api_port: int) -> FirewallSettings:
    """The firewall the inventory asks for, SSH left open on the port pyinfra connects to and on
    every port sshd listens on (a table of ours that closed SSH would lock everyone out); the API
    port open to other hosts only when the server listens beyond loopback."""
    ssh_ports = {data.get("ssh_port") or 22, *host.get_fact(SshdPorts)}
    fw = FirewallSettings.from_inventory(data, api_port=api_port, ssh_ports=sorted(ssh_ports))
    return replace(fw, api_open=not is_loopback(ServerSettings.from_inventory(data).host))


def install(fw: FirewallSettings | None) -> None:
    """The table loaded and persisted (``fw``), or removed with its files (``None``)."""
    if fw is None:
        absent(name=f"Firewall off: table {TABLE} removed")
        return
    if problems(fw):
        return  # preflight named them and stopped this host
    text_file(name="Firewall ruleset (loaded at boot)", path=RULESET_FILE, text=load_script(render_table(fw)))
    text_file(name=f"{UNIT} (loads the firewall at boot)", path=PERSIST_UNIT_FILE, text=persist_unit())
    loaded(name=f"Firewall: table {TABLE} loaded", fw=fw)


@operation(is_idempotent=True)
def loaded(fw: FirewallSettings):
    """
    Noderig's table live exactly as rendered, and enabled at boot. The live table (a fact) is
    compared with the rendering; a table changed or flushed by hand is loaded again, in one
    transaction that touches no other table.

    + fw: the firewall settings (``noderig.firewall.FirewallSettings``)
    """
    want = render_table(fw)
    live = host.get_fact(NftTable, table=TABLE)
    if live.get("error"):
        yield from fail(host, unreadable_table(live["error"]))
        return
    boot = host.get_fact(UnitStatus, unit=UNIT)
    is_loaded = same_table(live["table"], want)
    at_boot = boot["enabled"] == "enabled"
    if is_loaded and at_boot:
        host.noop(f"table {TABLE} is loaded as rendered and loaded at boot")
        return
    if first_pass(host):
        what = "absent" if live["table"] is None else "differs from the rendering"
        logger.info(f"[{host.name}] firewall: " + "; ".join(filter(None, [
            None if is_loaded else f"load table {TABLE} ({what}): {summary(fw)}",
            None if at_boot else f"enable {UNIT} (loads it at boot)"])))
        if not is_loaded and host.state.config.DIFF:
            diff = difflib.unified_diff((live["table"] or "").splitlines(), want.splitlines(),
                                        f"table {TABLE} (node)", f"table {TABLE} (deploy)", lineterm="")
            logger.info(f"[{host.name}] " + "\n".join(diff))
    if not is_loaded:
        yield load_command()
    if not at_boot:
        yield StringCommand("systemctl", "daemon-reload", "&&", "systemctl", "enable", UNIT)


def unreadable_table(error: str) -> str:
    """nft could not list the table for another reason than its absence: the host fails (its table is not known)."""
    return (f"firewall on {host.name}: `nft list table {TABLE}` failed ({error}); the table's state is unknown, so "
            "nothing was loaded or removed: run the deploy as root, on a node whose nftables works (nft list ruleset)")


def load_command() -> StringCommand:
    """Load the ruleset file: one transaction (``noderig.firewall.load_script``)."""
    return StringCommand(NFT, "-f", RULESET_FILE)


@operation(is_idempotent=True)
def absent():
    """
    ``firewall = False``: noderig's table deleted (only it) and the files that load it at boot
    removed. Nothing runs when none of them is there.
    """
    live = host.get_fact(NftTable, table=TABLE)
    if live.get("error"):
        yield from fail(host, unreadable_table(live["error"]))
        return
    files = host.get_fact(Mtimes, paths=(RULESET_FILE, PERSIST_UNIT_FILE))
    if live["table"] is None and not files:
        host.noop(f"no table {TABLE} and nothing loads one at boot")
        return
    if first_pass(host):
        logger.info(f"[{host.name}] firewall: remove table {TABLE} and {UNIT} (firewall is off)")
    if PERSIST_UNIT_FILE in files:
        yield StringCommand("systemctl", "disable", UNIT, "2>/dev/null", ";", "rm", "-f", PERSIST_UNIT_FILE,
                            "&&", "systemctl", "daemon-reload")
    if RULESET_FILE in files:
        yield StringCommand("rm", "-f", RULESET_FILE)
    if live["table"] is not None:
        yield StringCommand(NFT, "delete", "table", *TABLE.split())


def summary(fw: FirewallSettings) -> str:
    """One line: what the table lets in."""
    if fw.api_open:
        text = f"API port {fw.api_port} open to {', '.join(fw.api_allow) or 'any host'}; "
    else:
        text = f"API port {fw.api_port} closed to other hosts (the server listens on loopback only); "
    text += f"SSH ({', '.join(map(str, fw.ssh_ports))}) open; "
    if fw.peers:
        text += f"fleet peers {', '.join(fw.peers)} on {', '.join(map(str, fw.peer_ports)) or 'every port'}; "
    if fw.fanout_port:
        text += f"checkpoint fan-out port {fw.fanout_port} open to {', '.join(fw.fanout_peers)}; "
    return text + f"every other TCP/UDP port closed to other hosts ({len(rules(fw))} rules)"
