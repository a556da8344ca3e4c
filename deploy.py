"""noderig: a bare GPU node to a serving SGLang endpoint, as a pyinfra deploy.

    pyinfra inventory/b300.py deploy.py               # provision, or repair when rerun
    pyinfra inventory/b300.py deploy.py --dry --diff  # what would change on each host, and why

Runs on the hosts of the ``targets`` group; the ``reference`` group's host supplies the venv.
Every step compares facts with the desired state and changes only the difference.
"""

from dataclasses import replace

from pyinfra import host, inventory, logger

from noderig.exposure import decide as exposure
from noderig.fanout import describe as describe_fanout
from noderig.peer_server import PACKAGE as PEER_SERVER_PACKAGE
from noderig.manifest import RepoPin
from noderig.repair import REPAIRS_FILE, recorded_settings
from noderig.server_settings import ServerSettings
from operations import (call_sites, checkpoint, diagnosis, environment, fact_reads, firewall, packages, peers, preflight,
                        rollout, service, summary, tunnel, venv_peers)
from operations.facts import JsonFile, NodeInfo
from operations.util import decided

data = host.data
STEPS = ("preflight", "prerequisites", "environment", "checkpoint", "service", "readiness")
steps = STEPS if data.get("steps", "all") == "all" else tuple(str(data.steps).split(","))
unknown = set(steps) - set(STEPS)
if unknown:
    raise ValueError(f"steps={data.steps!r}: unknown {sorted(unknown)}; choose from {', '.join(STEPS)} or all")

# pyinfra reads no source file to place each operation (its line numbers are all it uses).
call_sites.install()
# Every host's commands are counted for the summary printed at the end of the run.
summary.track(host)
# Each command's small SSH messages go out at once (not held back by Nagle's algorithm).
tunnel.no_delay(host.state)
# A fact is read once while nothing changes it (a converged node's rerun reads the same facts
# at load, in preflight and in the step that owns them).
fact_reads.remember(host)

# Repairs applied by an earlier run (recorded on the node) stay applied: a rerun after a
# repair renders the same unit instead of undoing the fix.
repairs = host.get_fact(JsonFile, path=REPAIRS_FILE) if "targets" in host.groups else None
settings = replace(ServerSettings.from_inventory(data), **recorded_settings(repairs))


def fleet_plans(checkpoints: list, targets: list) -> list:
    """Each checkpoint's fan-out plan (``operations.peers.fleet_plan``: once per run, from every
    target's facts), in the order of ``checkpoints``."""
    return [peers.fleet_plan(pin, token_file, [(t, t.data.get(dest_key)) for t in targets], True)
            for pin, token_file, _, dest_key in checkpoints]


def other_peers(targets: list) -> list[str]:
    """Where this node's fleet peers reach it from: the other targets' cluster addresses."""
    return [a for a in (peers.cluster_address(t) for t in targets if t.name != host.name) if a]


def stripe(plan) -> list | None:
    """This node's stripe of a fan-out plan (None without a plan: everything, from the Hub)."""
    return plan.fleet.hub[host.name] if plan else None


def serves_peers(plans: list, targets: list) -> bool:
    """Whether this node serves files to fleet peers in the fan-out (it holds a stripe another
    needs, and it and its peers have cluster addresses)."""
    return (any(plan and plan.fleet.serve[host.name] for plan in plans) and bool(peers.cluster_address(host))
            and bool(other_peers(targets)))


def fan_out(checkpoints: list, targets: list) -> list:
    """The checkpoint step across the fleet (``operations.peers``): the nodes holding files
    another needs serve what they have verified (their firewall opened the port to the peers
    while the stripes downloaded); then, per checkpoint, every target at once: its stripe from
    the Hub (started first, see below) and the rest from the peers as soon as one has verified
    a file (the Hub as the fallback), each node serving what it verifies; the servers stop. The
    smaller checkpoint (the draft) goes first: its files start first and finish early, so its
    exchange runs while the larger one still downloads. Returns the checkpoint steps in the
    order of ``checkpoints``."""
    plans = fleet_plans(checkpoints, targets)
    if serves_peers(plans, targets):
        serving = [(plan.key, dest) for (_, _, dest, _), plan in zip(checkpoints, plans)
                   if plan and plan.fleet.serve[host.name]]
        peers.serve(name="Fan-out: serve verified files to the fleet's peers", checkpoints=serving,
                    address=peers.cluster_address(host), port=data.fanout_port, peers=other_peers(targets))
    ops = {}
    for i in smaller_first(plans):
        (pin, token_file, dest, _), plan = checkpoints[i], plans[i]
        if plan:
            logger.info(f"[{host.name}] fan-out of {pin.repo}: {describe_fanout(plan.fleet, host.name, plan.sizes)}")
        ops[i] = checkpoint.fetch(name=f"Checkpoint {pin.repo}: its stripe from the Hub, the rest from peers", pin=pin,
                                  dest=dest, token_file=token_file, connections=data.aria2_connections,
                                  jobs=data.aria2_jobs, stripe=stripe(plan))
    if not data.fanout_keep_serving:
        peers.stopped(name="Fan-out: peer server stopped", dests=[dest for _, _, dest, _ in checkpoints])
    return [ops[i] for i in range(len(checkpoints))]


def left_serving(fanning_out: bool) -> bool:
    """Whether a fan-out killed in an earlier run left this node's peer server (nginx, its port
    open to the peers while the firewall is off) for a checkpoint step that does not fan out, so
    stops nothing: read in the facts preflight reads (``NodeInfo``), no read more; never with a
    refused inventory (its steps are preflight's alone). (Not with ``fanout_keep_serving``: the
    server is meant to outlive its run.)"""
    if "checkpoint" not in steps or fanning_out or data.fanout_keep_serving:
        return False
    # (a read that failed has failed the host already, pyinfra's way, and gives no fact: nothing is planned on it)
    info = host.get_fact(NodeInfo, path=data.model_dir)
    return bool(info and info.get("peer_server"))


def smaller_first(plans: list) -> list[int]:
    """The checkpoints' indexes, the one with fewer bytes first (a missing plan: as planned)."""
    return sorted(range(len(plans)), key=lambda i: sum(plans[i].sizes.values()) if plans[i] else 0)


if "targets" in host.groups:
    reference = inventory.get_host(data.reference_host)
    # A refused inventory gets preflight alone, which says why: no later step is planned, so
    # none reads the node or the Hub with a refused value, not even in a dry run.
    if preflight.inventory_problems(reference):
        steps = ("preflight",)
    pins = [(data.model_repo, data.model_revision, "model_dir")]
    if data.speculative != "none":
        pins.append((data.draft_repo, data.draft_revision, "draft_dir"))
    checkpoints = [(RepoPin(repo, revision, data.hf_endpoint, tuple(data.checkpoint_patterns)), data.hf_token_file,
                    data.get(dest_key), dest_key) for repo, revision, dest_key in pins] if "checkpoint" in steps else []
    # A node that serves gets a new checkpoint revision beside the live one (it becomes live at
    # the node's restart, in its rollout batch), or, without room for it there, in the live
    # directory within its batch after its server stopped; a node that serves nothing gets it
    # in the live directory, as ever.
    targets = peers.fleet_targets(host.state)
    live_dirs, in_batch = {}, []
    for i, (pin, token_file, dest, dest_key) in enumerate(checkpoints):
        revision = decided(f"Checkpoint {pin.repo}", checkpoint.new_revision, host, pin, token_file, dest, settings,
                           data.checkpoint_beside)
        if revision and revision.in_batch:
            in_batch.append(dict(pin=pin, dest=dest, token_file=token_file, connections=data.aria2_connections,
                                 jobs=data.aria2_jobs))
        elif revision:
            checkpoints[i], live_dirs[revision.dest] = (pin, token_file, revision.dest, dest_key), dest
    # Fleet fan-out: with two or more targets each checkpoint file crosses the uplink once; not
    # for a new revision on nodes that serve (each such node fetches what changed, itself).
    fanning_out = (bool(checkpoints) and data.fanout and len(targets) > 1
                   and not checkpoint.revision_anywhere(targets, [(pin, t, key) for pin, t, _, key in checkpoints]))
    in_place = {f["dest"] for f in in_batch}
    fetched_now = [c for c in checkpoints if c[2] not in in_place]

    # Who can reach the server, and the node firewall (nftables, noderig's own table).
    fw = firewall.settings_for(data, api_port=data.server_port) if data.firewall else None

    # 1. Preflight: nothing changes on a host that fails it (always runs).
    preflight.node(
        name="Preflight: OS, disk, GPUs, base Python, exposure",
        model_dir=data.model_dir, venv=data.venv_path, reference=reference,
        gpus_required=data.gpus_required, checkpoints=[(*c[:3], live_dirs.get(c[2])) for c in checkpoints], firewall=fw,
        exposure=exposure(data.server_host, data.server_port, data.api_key_file,
                          data.allow_unauthenticated_network_access),
    )

    for pin, token_file, dest, _ in checkpoints:
        if dest in live_dirs:
            checkpoint.revision_seeded(name=f"Checkpoint {pin.repo}: new revision beside {live_dirs[dest]}", pin=pin,
                                       live=live_dirs[dest], dest=dest, token_file=token_file)

    # The download is the critical path (hundreds of GB): it starts on the node now, as soon as
    # aria2 is there, and the prerequisites and the venv copy run while it is in flight; the
    # checkpoint step (4) re-attaches to it, waits for it and verifies. With the fan-out, what
    # starts is this node's stripe from the Hub (the plans are made at load, from every target).
    early = bool(checkpoints) and data.download_first
    if early and "prerequisites" in steps:
        packages.present(name=packages.EARLY_PREREQUISITE, packages=["aria2"])
    if early:
        # (with the fan-out every checkpoint is fetched now: it is off when any gets a new revision;
        # the smaller one first, as in its step)
        plans = fleet_plans(checkpoints, targets) if fanning_out else [None] * len(fetched_now)
        for i in smaller_first(plans):
            (pin, token_file, dest, _), only = fetched_now[i], stripe(plans[i])
            checkpoint.download_started(name=f"Download started: {pin.repo}", pin=pin, dest=dest,
                                        token_file=token_file, connections=data.aria2_connections,
                                        jobs=data.aria2_jobs, only=only)

    # 2. Prerequisites the runtime needs (python3-dev: Triton's JIT includes Python.h; nftables
    # for the firewall).
    if "prerequisites" in steps:
        # (nginx for any fleet that fans out, in this run or a later one: a run of the
        # prerequisites alone prepares a later run of the checkpoint step alone)
        fleet = fanning_out or (data.fanout and len(targets) > 1)
        if fleet:
            peers.nginx_quiet(name="nginx's own site kept off (the fan-out runs its own server)")
        wanted = [*data.packages, *data.cuda_packages, *(["nftables"] if data.firewall else []),
                  *([PEER_SERVER_PACKAGE] if fleet else [])]
        # (aria2 is there already when the download started first: this step leaves it alone,
        # so the dry run does not also list it here)
        packages.present(name="Prerequisites", packages=[p for p in wanted if not (early and p == "aria2")])

    # 3. Environment: the reference's venv, host to host; beside the live one while a server
    # runs from it (it becomes live at the node's restart, in its rollout batch). The reference
    # sends it once: further targets copy it from a target that has it (venv_from_peers).
    venv = venv_next = None
    if "environment" in steps:
        venv_step = f"Venv {data.venv_path} from {reference.name}"
        beside = decided(venv_step, rollout.serving, settings, default=False)
        venv = environment.venv(name=venv_step,
                                path=data.venv_path, reference=reference, transfer=data.venv_transfer,
                                import_check=data.venv_import_check, beside=beside,
                                peer=venv_peers.source_of(targets, data))
        venv_peers.expect(venv)
        venv_next = environment.next_generation(venv, data.venv_path, reference) if beside else None

    # The firewall, loaded while the download is in flight (it needs nothing the download
    # brings): the one the server will run behind, with the fan-out's port open to the fleet's
    # peers on a node that serves them; that port closes again after the fan-out.
    fw_final = None  # what the node runs behind after this run
    if fw and "service" in steps:
        fw_final = replace(fw, api_port=settings.port)
    elif fw and fanning_out:
        fw_final = fw
    fw_fanout = fw_final
    if fw_final and fanning_out and serves_peers(fleet_plans(checkpoints, targets), targets):
        fw_fanout = replace(fw_final, fanout_port=data.fanout_port, fanout_peers=other_peers(targets))
        if data.fanout_keep_serving:
            fw_final = fw_fanout
    if "service" in steps or (fanning_out and fw):
        firewall.install(fw_fanout)  # (None, with firewall = False: noderig's table removed)

    # 4. Checkpoint (and the speculative draft): pinned, downloaded on the node, verified.
    fetched = []
    if checkpoints and not fanning_out:
        fetched = [
            checkpoint.fetch(name=f"Checkpoint {pin.repo}", pin=pin, dest=dest, token_file=token_file,
                             connections=data.aria2_connections, jobs=data.aria2_jobs)
            for pin, token_file, dest, _ in fetched_now
        ]
    elif checkpoints:
        fetched = fan_out(checkpoints, targets)
        if fw_fanout != fw_final:
            firewall.install(fw_final)  # the fan-out port closed again (the service step finds it so)
    if left_serving(fanning_out):
        peers.stopped(name="Fan-out: peer server left by an earlier run stopped",
                      dests=[dest for _, _, dest, _ in checkpoints])

# The readiness check: health, one smoke request, and the failed invocation's journal if it
# crashed. A node that serves and must restart runs it at the end of its rollout batch.
ready = dict(service=data.service_name, port=settings.port, served_model_name=data.served_model_name,
             timeout=data.ready_timeout, api_key_file=data.api_key_file, settings=settings, repair=data.repair,
             max_repairs=data.max_repairs, firewall=fw if "targets" in host.groups else None)

if "targets" in host.groups and "service" in steps:
    # 5. Service: flags checked against the installed SGLang, then the launcher, the 0600
    # environment file (secrets) and the unit; restarted only when something it runs changed
    # (in this run, or since it started: a killed deploy leaves that). The firewall is loaded
    # above: the server may listen beyond loopback once it starts. Nodes that serve and must
    # restart do so in rollout batches (rollout, max_fail_percentage), each gated on readiness.
    ready["firewall"] = fw_final
    service.install(settings, api_key_file=data.api_key_file, reference=reference, venv=venv,
                    checkpoints=fetched, ready=ready if "readiness" in steps else None, venv_next=venv_next,
                    checkpoints_next=tuple((live, generation) for generation, live in live_dirs.items()),
                    checkpoints_in_batch=tuple(in_batch))
elif "targets" in host.groups:
    rollout.join(None)  # every target tells the rollout, taking part or not

if "targets" in host.groups and "readiness" in steps:
    # 6. Readiness (already checked, for a node of a rollout batch).
    diagnosis.wait_until_serving(name=f"{data.service_name} ready", **ready)
