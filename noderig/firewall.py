"""The node's firewall: noderig's own nftables table, rendered from inventory settings.

Pure: settings in, nft text out. Only ``table inet noderig`` is ever written or deleted; the
node's other tables and rulesets are never read into it, flushed or changed. Its one chain
hooks input and closes every TCP and UDP port to other hosts except SSH, the API port (to
an allowlist, default any; closed too when the server listens on loopback only) and, for
multi-node serving, everything from the fleet's peers.
Loopback, established traffic and DHCP replies pass; ICMP is left alone.

nftables' rule: a packet is dropped when any base chain at its hook drops it, so a table of
ours cannot open what another table closes, and it must itself let SSH through.

    problems(fw)          -> every problem, one sentence each, naming the inventory key
    render_table(fw)      -> the table exactly as ``nft list table inet noderig`` prints it
    load_script(table)    -> the file ``nft -f`` loads: replaces our table in one transaction
    same_table(live, want)-> whether the live listing is the rendered table
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .server_settings import ip_network

TABLE = "inet noderig"
RULESET_FILE = "/etc/noderig/firewall.nft"
PERSIST_UNIT_NAME = "noderig-firewall"
PERSIST_UNIT_FILE = f"/etc/systemd/system/{PERSIST_UNIT_NAME}.service"
NFT = "/usr/sbin/nft"
PACKAGE = "nftables"


@dataclass
class FirewallSettings:
    """What the table is rendered from (inventory keys in ``INVENTORY_KEYS``)."""

    api_port: int
    ssh_ports: list = field(default_factory=lambda: [22])
    # False when the server listens on loopback only: its port then stays closed to other hosts too, so a
    # listener that later binds it beyond loopback (another program, a changed unit) is not reachable
    api_open: bool = True
    api_allow: list = field(default_factory=list)  # addresses/networks; empty: any
    peers: list = field(default_factory=list)  # fleet peers: every TCP/UDP port (or peer_ports) open to them
    peer_ports: list = field(default_factory=list)  # ports or "low-high" ranges; empty: all
    nnodes: int = 1  # nodes serving one model: more than one needs peers
    # While a fan-out serves checkpoint files (noderig.peer_server): its port, to these peers only.
    fanout_port: int | None = None
    fanout_peers: list = field(default_factory=list)

    @classmethod
    def from_inventory(cls, data, api_port: int, ssh_ports) -> "FirewallSettings":
        getter = data.get if hasattr(data, "get") else (lambda key, default=None: getattr(data, key, default))
        return cls(api_port=api_port, ssh_ports=list(ssh_ports), nnodes=getter("nnodes", None) or 1,
                   **{name: getter(key, None) or [] for name, key in INVENTORY_KEYS.items()})


# The table's first load where it is absent: for TRACKING_SECONDS it only tracks connections
# (nft's own command line), then the rules load. Connection tracking starts when a rule first
# uses it, so a connection already open then (the checkpoint's download: the firewall loads
# while it is in flight) is first seen mid-stream as "new", meets the reject rule, and hangs
# until the client's timeout (measured on the lab: a download stopped dead, and aria2 waited 60
# s). A second of tracking with everything accepted makes it "established".
TRACKING_ONLY = (f"add table {TABLE}; add chain {TABLE} input {{ type filter hook input priority filter; "
                 f"policy accept; }}; add rule {TABLE} input ct state established,related accept")
TRACKING_SECONDS = 1

INVENTORY_KEYS = {"api_allow": "firewall_api_allow", "peers": "firewall_peers", "peer_ports": "firewall_peer_ports"}


def _addresses(values) -> list[tuple[str, str]]:
    """``(family, element)`` per distinct address/network, IPv4 first, sorted by address."""
    nets = sorted({ip_network(v) for v in values},
                  key=lambda n: (n.version, n.network_address, n.prefixlen))
    return [("ip" if n.version == 4 else "ip6", _element(n)) for n in nets]


def _port_range(value) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        low = high = value
    elif isinstance(value, str) and value.count("-") == 1 and all(p.isdigit() for p in value.split("-")):
        low, high = (int(p) for p in value.split("-"))
    else:
        raise ValueError("not a port")
    if not 1 <= low <= high <= 65535:
        raise ValueError("outside 1-65535")
    return low, high


def _list_problems(key: str, values, check) -> list[str]:
    if not isinstance(values, (list, tuple)):
        return [f"inventory value {key}={values!r} must be a list"]
    found = []
    for i, value in enumerate(values):
        try:
            check(value)
        except (ValueError, TypeError) as e:
            found.append(f"inventory value {key}[{i}]={value!r} is not allowed: {e}")
    return found


def _address(value) -> None:
    if not isinstance(value, str):
        raise TypeError("must be an IP address or network such as 10.0.0.2 or 10.0.0.0/24")
    net = ip_network(value)  # ValueError names the problem
    if net.prefixlen == 0:
        raise ValueError("a /0 network is every host: leave the list empty for any (api allowlist), "
                         "or name the peers")


def problems(fw: FirewallSettings) -> list[str]:
    """Every problem of the firewall settings, one sentence each; [] when good."""
    found = _list_problems(INVENTORY_KEYS["api_allow"], fw.api_allow, _address)
    found += _list_problems(INVENTORY_KEYS["peers"], fw.peers, _address)
    found += _list_problems(INVENTORY_KEYS["peer_ports"], fw.peer_ports, _port_range)
    found += _list_problems("ssh_port", fw.ssh_ports, _port_range)
    try:
        _port_range(fw.api_port)
    except ValueError:
        found.append(f"inventory value server_port={fw.api_port!r} must be an integer from 1 to 65535")
    if fw.peer_ports and not fw.peers:
        found.append("firewall_peer_ports is set but firewall_peers is empty: name the peers the ports are for")
    if isinstance(fw.nnodes, int) and fw.nnodes > 1 and not fw.peers:
        found.append(f"nnodes={fw.nnodes} serves across nodes, but the firewall would close every port between "
                     "them (NCCL, SGLang's scheduler sockets): list the other nodes in firewall_peers, or set "
                     "firewall=False")
    return found


def _element(net) -> str:
    return str(net.network_address) if net.prefixlen == net.max_prefixlen else str(net)


def _ports(values) -> list[str]:
    """Distinct ports and ranges, sorted, as nft prints them (``5000``, ``25000-25100``)."""
    return [str(low) if low == high else f"{low}-{high}" for low, high in sorted({_port_range(v) for v in values})]


# A TCP packet without SYN of a connection not tracked yet: one already open when the table first
# loaded (tracking starts with the first rule that uses it), such as the checkpoint's download,
# which is in flight then. Its next packet is seen as "new" mid-stream; refused, the reset goes to
# the sender and the node's end hangs until its timeout (measured on the lab: aria2 stalled 60 s,
# and a quiet connection outlives any tracking-only grace period). Such a packet cannot open a
# connection (only a SYN does; the kernel answers anything else without a socket with a reset).
MID_STREAM = "tcp flags ! syn ct state new accept"


def rules(fw: FirewallSettings) -> list[str]:
    """The input chain's rules, in order, as nft prints them. One rule per address and port:
    nft merges the elements of a set where they touch, so sets would not list back as written."""
    lines = ['iifname "lo" accept', "ct state established,related accept", MID_STREAM]
    lines += [f"tcp dport {port} accept" for port in _ports(fw.ssh_ports)]
    lines += ["udp sport 67 udp dport 68 accept",  # DHCPv4 replies
              "ip6 saddr fe80::/10 udp dport 546 accept"]  # DHCPv6 replies
    api = f"tcp dport {fw.api_port} accept"
    if fw.api_open:
        lines += [f"{family} saddr {addr} {api}" for family, addr in _addresses(fw.api_allow)] if fw.api_allow else [api]
    ports = [f" th dport {port}" for port in _ports(fw.peer_ports)] or [""]
    lines += [f"{family} saddr {addr} meta l4proto {{ tcp, udp }}{port} accept"
              for family, addr in _addresses(fw.peers) for port in ports]
    if fw.fanout_port:
        lines += [f"{family} saddr {addr} tcp dport {fw.fanout_port} accept" for family, addr in _addresses(fw.fanout_peers)]
    lines += ["meta l4proto tcp reject with tcp reset", "meta l4proto udp reject"]
    return lines


def render_table(fw: FirewallSettings) -> str:
    """The table, byte for byte as ``nft list table inet noderig`` lists it once loaded, so the
    live listing (a fact) compares with it directly."""
    body = "".join(f"\t\t{line}\n" for line in rules(fw))
    return (f"table {TABLE} {{\n"
            '\tcomment "noderig node firewall: every port but SSH, the API and fleet peers closed"\n'
            "\tchain input {\n"
            "\t\ttype filter hook input priority filter; policy accept;\n"
            f"{body}\t}}\n}}\n")


def load_script(table: str) -> str:
    """What ``nft -f`` loads: declare, delete and define our table in one transaction, so the
    table is replaced atomically (never absent, never half-loaded) and nothing else is touched."""
    return (f"# Written by noderig (noderig.firewall); loaded at boot by {PERSIST_UNIT_NAME}.service.\n"
            f"# Only table {TABLE} is noderig's; the deploy replaces it and touches no other table.\n"
            f"table {TABLE}\ndelete table {TABLE}\n{table}")


def remove_script() -> str:
    """Deleting our table and nothing else (declared first, so an absent table is no error)."""
    return f"table {TABLE}\ndelete table {TABLE}\n"


# nft names protocols from /etc/protocols and prints their numbers on a node without it
# (Debian's netbase): ``meta l4proto 6`` is ``meta l4proto tcp``.
_PROTOCOL_NUMBERS = {"6": "tcp", "17": "udp"}
_L4PROTO = re.compile(r"(?<=l4proto )(\{ [^}]* \}|\S+)")


def _normalized(text: str) -> list[str]:
    def names(m: re.Match) -> str:
        return re.sub(r"\d+", lambda n: _PROTOCOL_NUMBERS.get(n.group(), n.group()), m.group())

    return [_L4PROTO.sub(names, line.strip()) for line in text.splitlines() if line.strip()]


def same_table(live: str | None, want: str) -> bool:
    """Whether the live listing is ``want`` (indentation, and protocols listed by number, aside)."""
    return live is not None and _normalized(live) == _normalized(want)


def persist_unit() -> str:
    """A oneshot unit that loads the ruleset file at boot, after Debian's nftables.service
    (whose default /etc/nftables.conf flushes the whole ruleset) and before the network."""
    return (f"# Written by noderig (noderig.firewall): loads {RULESET_FILE} (table {TABLE}) at boot.\n"
            "[Unit]\n"
            f"Description=noderig node firewall (nftables table {TABLE})\n"
            "DefaultDependencies=no\n"
            "Wants=network-pre.target\n"
            "Before=network-pre.target shutdown.target\n"
            "After=nftables.service\n"
            "Conflicts=shutdown.target\n\n"
            "[Service]\n"
            "Type=oneshot\n"
            "RemainAfterExit=yes\n"
            f"ExecStart={NFT} -f {RULESET_FILE}\n\n"
            "[Install]\n"
            "WantedBy=sysinit.target\n")
