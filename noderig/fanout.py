"""Fleet fan-out: each checkpoint file crosses the uplink once. Pure planning, no host.

With two or more targets, the files some node still needs are striped across the targets,
balanced by bytes: in phase 1 each node fetches its stripe from the Hub; in phase 2 it
takes every other file from the peers that hold it verified, over the cluster network,
with the Hub only as the fallback. A file a node already holds verified (an earlier run, a
node added to a serving fleet) is never fetched from the Hub again: its holders serve it.

    stripe(sizes, nodes)            -> node -> files, balanced by bytes (largest first)
    plan(sizes, states, nodes, on)  -> FleetPlan: per node the Hub files, the peer files,
                                       the files it serves; per file its holders
    uris(peer_urls, hub_url, n)     -> aria2's URI list: peers fill the n connections (the
                                       deploy gives no Hub URL: see operations/checkpoint.py)
    peer_url(address, port, ...)    -> a file on a peer's server, by digest
    copy_tree(nodes)                -> node -> the node it copies the venv from (None: the
                                       reference), a tree that doubles the holders each round
    copy_waits(sources)             -> node -> the nodes it waits for before that copy

The states are the checkpoint planner's (``checkpoint_plan.classify``): only ``ok`` counts as
holding a file, so a peer never serves bytes that were not hashed against the Hub's digest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .server_settings import ip_address

OK = "ok"  # checkpoint_plan.OK: hashed against the Hub's digest, unchanged since


@dataclass(frozen=True)
class FleetPlan:
    """Who fetches what from where, for one checkpoint over the targets of one run."""

    hub: dict[str, list[str]]  # node -> files it fetches from the Hub (phase 1)
    peers: dict[str, list[str]]  # node -> files it takes from peers, the Hub as fallback (phase 2)
    serve: dict[str, list[str]]  # node -> files it holds verified (or will) that another node needs
    holders: dict[str, list[str]] = field(default_factory=dict)  # file -> nodes with it after phase 1

    def bytes_from(self, node: str, sizes: dict[str, int]) -> tuple[int, int]:
        """(bytes from the Hub, bytes from peers) for ``node``: whole files (a partial file's
        bytes already on the node are not subtracted; the download's own line says those)."""
        return (sum(sizes[p] for p in self.hub.get(node, [])), sum(sizes[p] for p in self.peers.get(node, [])))


def stripe(sizes: dict[str, int], nodes: list[str]) -> dict[str, list[str]]:
    """Files split across ``nodes`` so that each fetches about the same bytes: the largest file
    first, each to the node with the fewest bytes so far (ties: the earlier node; equal sizes
    in path order). The longest stripe exceeds the mean by at most one file."""
    if not nodes:
        raise ValueError("striping needs at least one node")
    load = {n: 0 for n in nodes}
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for path in sorted(sizes, key=lambda p: (-sizes[p], p)):
        node = min(nodes, key=lambda n: (load[n], nodes.index(n)))
        out[node].append(path)
        load[node] += sizes[path]
    return {n: sorted(files) for n, files in out.items()}


def plan(sizes: dict[str, int], states: dict[str, dict[str, str]], nodes: list[str], fanout: bool = True) -> FleetPlan:
    """The fleet's plan for one checkpoint. ``sizes``: path -> bytes (the manifest);
    ``states``: node -> path -> the planner's state; ``nodes``: the targets in order.
    Without ``fanout`` (turned off, or one target) every node fetches what it lacks from the
    Hub, exactly as a single node does."""
    need = {n: [p for p in sorted(sizes) if states[n].get(p) != OK] for n in nodes}
    if not fanout or len(nodes) < 2:
        return FleetPlan(hub=need, peers={n: [] for n in nodes}, serve={n: [] for n in nodes},
                         holders={p: [n for n in nodes if states[n].get(p) == OK] for p in sorted(sizes)})
    held = {p: [n for n in nodes if states[n].get(p) == OK] for p in sizes}
    wanted = sorted({p for files in need.values() for p in files})
    # Nobody holds it: one node fetches it from the Hub. Someone does: no Hub byte at all.
    striped = stripe({p: sizes[p] for p in wanted if not held[p]}, nodes)
    owner = {p: n for n, files in striped.items() for p in files}
    holders = {p: held[p] or [owner[p]] for p in sorted(sizes) if held[p] or p in owner}
    peers = {n: [p for p in need[n] if p not in striped[n]] for n in nodes}
    serve = {n: sorted(p for p, hs in holders.items() if n in hs and any(p in peers[m] for m in nodes if m != n))
             for n in nodes}
    return FleetPlan(hub=striped, peers=peers, serve=serve, holders=holders)


def uris(peer_urls: list[str], hub_url: str | None, connections: int) -> list[str]:
    """aria2's sources for one file. aria2 opens ``split`` connections on the first ``split``
    URIs and keeps the rest as backups for when those fail (aria2c(1), ``-s``): the peers are
    repeated to fill every connection, so the Hub, last, is used only when the peers fail."""
    if not peer_urls:
        return [hub_url] if hub_url else []
    rounds = -(-max(connections, 1) // len(peer_urls))
    filled = [url for _ in range(rounds) for url in peer_urls][:max(connections, len(peer_urls))]
    return filled + ([hub_url] if hub_url else [])


def checkpoint_key(repo: str, commit: str) -> str:
    """A checkpoint's name on the peer servers: the same on every node whatever its directory."""
    return hashlib.sha256(f"{repo}@{commit}".encode()).hexdigest()[:16]


def peer_url(address: str, port: int, secret: str, key: str, digest: str) -> str:
    """A verified file on a peer's server: ``http://ADDRESS:PORT/SECRET/KEY/DIGEST`` (files are
    served by their digest, so no Hub-chosen name reaches the server or its configuration)."""
    host = f"[{address}]" if ip_address(address).version == 6 else address
    for part, what in ((secret, "secret"), (key, "key"), (digest, "digest")):
        if not part or not all(c.isalnum() or c in "-_" for c in part):
            raise ValueError(f"the peer URL's {what} {part!r} must be letters, digits, - or _")
    return f"http://{host}:{int(port)}/{secret}/{key}/{digest}"


def describe(plan_: FleetPlan, node: str, sizes: dict[str, int]) -> str:
    """One line for the dry run and the log: "12.0 MiB from the Hub (2 files), 24.0 MiB from
    peers (4 files)"."""
    hub, peers = plan_.bytes_from(node, sizes)
    return (f"{hub / 2**20:.1f} MiB from the Hub ({len(plan_.hub.get(node, []))} files), "
            f"{peers / 2**20:.1f} MiB from peers ({len(plan_.peers.get(node, []))} files)")


def copy_tree(nodes: list[str]) -> dict[str, str | None]:
    """Where each node copies the venv from: the first from the reference (None), every later
    one from a node before it. In each round every node that holds the venv sends it to one
    more, so the reference sends it once and ``n`` nodes take ``1 + ceil(log2(n))`` copy times,
    not the ``n`` copies sharing the reference's uplink. A source sends to its receivers one
    after the other, in this order (``copy_waits``)."""
    if not nodes:
        return {}
    sources: dict[str, str | None] = {nodes[0]: None}
    holders, rest = [nodes[0]], list(nodes[1:])
    while rest:
        sent = [(source, rest.pop(0)) for source in holders if rest]
        sources.update({receiver: source for source, receiver in sent})
        holders += [receiver for _, receiver in sent]
    return sources


def copy_waits(sources: dict[str, str | None]) -> dict[str, list[str]]:
    """What each node waits for before it copies the venv (``copy_tree``'s plan): its source
    holding it, and the source's previous receiver done (a source sends one copy at a time, so
    each copy has the source's whole uplink). Always nodes of earlier rounds: no cycle."""
    last: dict[str, str] = {}
    waits: dict[str, list[str]] = {}
    for node, source in sources.items():
        if source is None:
            waits[node] = []
            continue
        waits[node] = [source, *([last[source]] if source in last else [])]
        last[source] = node
    return waits
