"""The checkpoint fan-out across the fleet: the plan from every target's facts, and each
node's peer file server (Debian's nginx as a transient unit) for the duration of the fan-out.

The nodes that hold or will hold files another needs start serving first (``serve``: what
they have verified so far). Then each checkpoint's step runs on every target at once
(``checkpoint.fetch(stripe=...)``): a node downloads its stripe from the Hub (started early,
``download_started``), publishes each file as soon as it has hashed it (``publish``), and adds
each other file to its download as soon as some peer serves it verified, from the Hub only
when no peer may still serve it (``may_still_serve``: its owner failed, was excluded, or is
done with its stripe without it). The servers stop at the end (``stopped``). What each server
offers lives in this controller process (``SERVING``), with who fetches which file from the
Hub (``STRIPE_OF``), whose download is under way (``WORKING``) and who is done with its
stripe (``SETTLED``).
"""

from __future__ import annotations

import io
import json
import secrets
import socket
from dataclasses import dataclass, field

import gevent
from pyinfra import host, logger
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand
from pyinfra.api.state import BaseStateCallback
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import files

from noderig import checkpoint_plan, fanout, peer_server
from noderig.copykey import is_ip
from noderig.node import script_path

from . import summary
from .checkpoint import manifest_for, node_scripts_put
from .facts import CheckpointState, Mtimes, UnitStatus
from .util import first_pass, one_at_a_time, operation


@dataclass
class Served:
    """One node's running peer server: where it listens and, per checkpoint key, the digests
    of the files it linked (verified when linked)."""

    address: str
    port: int
    secret: str
    digests: dict[str, set[str]] = field(default_factory=dict)

    def url(self, key: str, digest: str) -> str:
        return fanout.peer_url(self.address, self.port, self.secret, key, digest)


@dataclass(frozen=True)
class Planned:
    """One checkpoint's fan-out: the plan, the manifest's sizes, its name on the servers."""

    fleet: fanout.FleetPlan
    sizes: dict
    key: str


SERVING: dict[str, Served] = {}  # node name -> its server, this run
EXCLUDED: dict[str, str] = {}  # node name -> why it is no longer a source in this run
STRIPE_OF: dict[tuple[str, str], str] = {}  # (checkpoint key, path) -> the node fetching it from the Hub
SETTLED: set[tuple[str, str]] = set()  # (node, checkpoint key): its stripe verified and published, or given up
WORKING: dict[tuple[str, str], object] = {}  # (node, checkpoint key) -> the greenlet running its fan-out download
_plans: dict[tuple, Planned] = {}


def fleet_targets(state) -> list:
    """The targets this run deploys to, in inventory order (``--limit`` respected)."""
    return [h for h in state.inventory.get_group("targets") if h in state.activated_hosts]


def cluster_address(h) -> str | None:
    """Where peers reach ``h``'s server: ``fanout_address``, else its ``ssh_hostname`` (an IP,
    or a name the controller resolves, as pyinfra did to connect). None when neither gives one."""
    name = h.data.get("fanout_address") or h.data.get("ssh_hostname") or h.name
    if is_ip(name):
        return name
    try:
        return socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)[0][4][0]
    except OSError:
        return None


def fleet_plan(pin, token_file, targets: list, fanout_on: bool) -> Planned | None:
    """The plan for one checkpoint over ``targets`` (each at its own ``dest``), from every
    target's facts, once per run; with the manifest's sizes. None when a target's manifest or
    facts cannot be read (its own checkpoint step then says why)."""
    key = (pin, tuple(h.name for h, _ in targets), fanout_on)
    with one_at_a_time("fleet-plan", *key):
        if key not in _plans:
            states = {}
            try:
                for h, dest in targets:
                    # (the state each target's own checkpoint step reads: one read per run)
                    node = h.get_fact(CheckpointState, dest=dest)
                    manifest = manifest_for(pin, token_file, node["manifest"], f"{h.name} in {dest}")
                    states[h.name] = checkpoint_plan.classify(manifest, node["stats"], node["record"])
            except Exception as e:  # noqa: BLE001 - each host's checkpoint step reports it
                logger.debug(f"fan-out plan for {pin.repo}: {e}")
                return None
            sizes = {f["path"]: f["size"] for f in manifest["files"]}
            planned = Planned(fanout.plan(sizes, states, [h.name for h, _ in targets], fanout_on), sizes,
                              fanout.checkpoint_key(manifest["repo"], manifest["commit"]))
            STRIPE_OF.update({(planned.key, p): node for node, files in planned.fleet.hub.items() for p in files})
            _plans[key] = planned
    return _plans[key]


def sources(receiver: str, key: str, digest: str) -> list[str]:
    """Peer URLs for one file (``digest``, in checkpoint ``key``) for ``receiver``: every other
    node serving it and not excluded in this run, in inventory order."""
    return [s.url(key, digest) for name, s in SERVING.items()
            if name != receiver and name not in EXCLUDED and digest in s.digests.get(key, ())]


def may_still_serve(receiver, key: str, path: str, starting: bool) -> bool:
    """Whether the node fetching ``path`` from the Hub in this run (its stripe) may still serve
    it to ``receiver`` verified: it serves, its download is under way (``starting``: or may
    still begin), and it neither failed, nor was excluded, nor is done with its stripe. When
    not, ``receiver`` takes that file from the Hub rather than wait."""
    owner = STRIPE_OF.get((key, path))
    if owner is None or owner == receiver.name or owner not in SERVING or (owner, key) in SETTLED \
            or owner in EXCLUDED or owner in {h.name for h in receiver.state.failed_hosts}:
        return False
    downloading = WORKING.get((owner, key))
    return starting if downloading is None else not downloading.dead


def working(state, host, key: str) -> bool:
    """This node's fan-out download of ``key`` is under way, for as long as its greenlet runs
    (a failed command ends it, and a receiver then stops waiting for its files)."""
    WORKING[(host.name, key)] = gevent.getcurrent()
    return True


def settle(name: str, key: str) -> None:
    """``name`` is done with its stripe of ``key``: what it verified is published; a receiver no
    longer waits for the rest from it."""
    SETTLED.add((name, key))


def publish(h, key: str, dest: str) -> None:
    """Serve the files of ``dest`` verified since the server started (or last published), when
    ``h`` serves that checkpoint: its links made again, the registry told. A failure leaves the
    old set served. (A checkpoint the server was started without has no path on it: nothing it
    receives of that one is offered, or peers would be sent to a 404.)"""
    served = SERVING.get(h.name)
    if served is None or key not in served.digests:
        return
    try:
        served.digests[key] = linked(h, dest)
    except ServeError as e:
        logger.warning(f"[{h.name}] fan-out: {e}; peers go on with what it served before")


def linked(h, dest: str) -> set[str]:
    """The digests of ``dest``'s files ``h`` serves after its links are made again (the ones the
    verified record vouches for now: ``node/peer_links.py``)."""
    what = f"linking the verified files of {dest}"
    lines = _run(h, StringCommand("python3", peer_server.LINKS_SCRIPT, QuoteString(dest)), what)
    try:
        return set(json.loads(lines[-1])["served"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise ServeError(f"{what} on {h.name} gave no report: {(lines or ['nothing'])[-1][:200]!r}")


def exclude(name: str, why: str) -> None:
    """Stop using ``name`` as a source for the rest of the run; the summary says so."""
    if name not in EXCLUDED:
        EXCLUDED[name] = why
        logger.warning(f"fan-out: {name} is no longer used as a source in this run: {why}")
        summary.note(f"fan-out: peer {name} not used again in this run: {why}")


def server_of(url: str) -> str | None:
    """The node whose server ``url`` points at."""
    return next((name for name, s in SERVING.items() if f"/{s.secret}/" in url), None)


def scrub(text: str) -> str:
    """``text`` with every server's secret path segment hidden (aria2 messages name URLs)."""
    for s in SERVING.values():
        text = text.replace(s.secret, "<secret>")
    return text


@operation(is_idempotent=True)
def nginx_quiet():
    """
    Debian's ``nginx.service`` masked before nginx is installed by the deploy: its postinst
    would start it serving the default site on port 80, and the fan-out needs only the binary.
    Nothing changes on a node that already has nginx (its own use of it is left alone).
    """
    if "nginx-common" in host.get_fact(DebPackages) or \
            host.get_fact(UnitStatus, unit=peer_server.DEBIAN_UNIT)["enabled"] == "masked":
        host.noop(f"{peer_server.DEBIAN_UNIT} is masked, or nginx was installed before")
        return
    yield StringCommand("systemctl", "mask", peer_server.DEBIAN_UNIT)


@operation(is_idempotent=False)
def serve(checkpoints: list[tuple[str, str]], address: str, port: int, peers: list[str]):
    """
    Serve this node's verified checkpoint files to its fleet peers until ``stopped``: hard
    links by digest to files the verified record vouches for, nginx (Debian's) as the
    transient unit ``noderig-peers`` on ``address:port``, admitting ``peers`` only, under a
    secret path made for this run (a directory name, never in argv, a unit or a log).

    + checkpoints: ``(key, dest)`` per checkpoint: its name on the server and its directory
    + address: the node's cluster address (peers connect to it)
    + port: the server's TCP port
    + peers: the other targets' addresses
    """
    if first_pass(host):
        logger.info(f"[{host.name}] fan-out: serving verified files to {', '.join(peers)} on {address}:{port}")
    yield from node_scripts_put()
    yield from files.put._inner(src=str(script_path("peer_links.py")), dest=peer_server.LINKS_SCRIPT, mode="755")
    yield FunctionCommand(_start, (checkpoints, address, port, peers), {})


def _run(h, command: StringCommand, what: str) -> list[str]:
    ok, output = h.run_shell_command(command)
    if not ok:
        said = (output.stderr or output.stdout).strip()[-400:]
        # (pyinfra gives no exit status: a command that says nothing was killed, or its ssh
        # channel closed, before it could)
        raise ServeError(f"{what} failed on {h.name}: {said or 'no output (killed, or its connection dropped)'}")
    return output.stdout_lines


class ServeError(Exception):
    pass


# Up to 5 s for a TCP connection to open on $1:$2 (nginx binds as it starts).
_WAIT_FOR_PORT = ('for i in $(seq 50); do (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && exit 0; sleep 0.1; done; '
                  'echo "nothing listens on $1:$2" >&2; exit 1')


def _start(state, host, checkpoints: list[tuple[str, str]], address: str, port: int, peers: list[str]) -> bool:
    secret = secrets.token_urlsafe(24).replace("-", "x").replace("_", "y")
    unit = f"{peer_server.SERVICE}.service"
    served = Served(address, port, secret)
    try:
        _run(host, StringCommand("systemctl", "stop", unit, "2>/dev/null", ";", "systemctl", "reset-failed", unit,
                                 "2>/dev/null", ";", "rm", "-rf", peer_server.RUN_DIR, "&&",
                                 "install", "-d", "-m", "711", peer_server.RUN_DIR, f"{peer_server.RUN_DIR}/tmp",
                                 peer_server.WWW, f"{peer_server.WWW}/{secret}"), "preparing the peer server")
        for key, dest in checkpoints:
            served.digests[key] = linked(host, dest)
            _run(host, StringCommand("ln", "-sfn", QuoteString(f"{dest}/{peer_server.LINK_DIR}"),
                                     f"{peer_server.WWW}/{secret}/{key}"), "publishing the links")
        if not host.put_file(io.StringIO(peer_server.nginx_conf(address, port, peers)), peer_server.CONF):
            raise ServeError(f"could not write {peer_server.CONF} on {host.name}")
        _run(host, StringCommand("systemd-run", "--quiet", f"--unit={peer_server.SERVICE}", "--property=Type=exec",
                                 peer_server.NGINX, "-e", "stderr", "-c", peer_server.CONF), "starting nginx")
        _run(host, StringCommand("bash", "-c", QuoteString(_WAIT_FOR_PORT), "_", QuoteString(address),
                                 QuoteString(str(port))), f"waiting for nginx on {address}:{port}")
    except ServeError as e:
        host.log_styled(str(e), fg="red", log_func=logger.error)
        # A server half started (nginx up, its port not answering) must not outlive the failed
        # host: nothing later in this run stops it.
        host.run_shell_command(stop_command())
        return False
    SERVING[host.name] = served
    _stop_when_failed(state)
    logger.info(f"[{host.name}] fan-out: serving {sum(len(d) for d in served.digests.values())} verified files")
    return True


class _StopWhenFailed(BaseStateCallback):
    """A node that fails while it serves stops serving: pyinfra runs nothing more on a failed
    host, so the fan-out's ``stopped`` never comes to it, and its server (its port open to the
    peers) would outlive the run. Its peers take its files from the others or the Hub. (Not
    with ``fanout_keep_serving``: the server is meant to outlive the run.)"""

    def operation_host_error(self, state, host, op_hash, retry_attempt=0, max_retries=0):
        if host.name not in SERVING or host.data.get("fanout_keep_serving") \
                or state.get_op_data_for_host(host, op_hash).global_arguments.get("_ignore_errors"):
            return
        exclude(host.name, "it failed in this run; its peer server is stopped")
        SERVING.pop(host.name, None)
        try:
            host.run_shell_command(stop_command())
        except Exception as error:  # noqa: BLE001 - its connection is gone: the rerun's ``stopped`` stops it
            logger.warning(f"[{host.name}] fan-out: its peer server could not be stopped ({error}); rerun the deploy")


def _stop_when_failed(state) -> None:
    """Watch this run's failures for a node that serves (once per run)."""
    if not getattr(state, "_noderig_peers_watched", False):
        state._noderig_peers_watched = True
        state.add_callback_handler(_StopWhenFailed())


@operation(is_idempotent=True)
def stopped(dests: list[str]):
    """
    No peer server left running, and no link to a checkpoint file left behind: after the
    fan-out, or after a run that was killed during one. Nothing runs when there is neither.

    + dests: the checkpoint directories whose links go
    """
    links = [f"{dest}/{peer_server.LINK_DIR}" for dest in dests]
    present = host.get_fact(Mtimes, paths=(peer_server.RUN_DIR, *links))
    if not present:
        host.noop("no peer server and no links to serve")
        return
    yield FunctionCommand(_forget, (), {})
    yield stop_command(*(QuoteString(p) for p in links if p in present))


def stop_command(*also_remove) -> StringCommand:
    """The peer server stopped and its run directory (config, secret path) removed, with
    ``also_remove`` (quoted paths) after it."""
    unit = f"{peer_server.SERVICE}.service"
    return StringCommand("systemctl", "stop", unit, "2>/dev/null", ";", "systemctl", "reset-failed", unit,
                         "2>/dev/null", ";", "rm", "-rf", peer_server.RUN_DIR, *also_remove)


def _forget(state, host) -> bool:
    SERVING.pop(host.name, None)
    return True
