"""Step 1, preflight: facts about the node before anything changes; a problem stops this host."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import operation

from noderig import checkpoint as plan
from noderig.errors import NoderigError
from noderig.firewall import problems as firewall_problems
from noderig.preflight import describe, disk_problems, problems

from .checkpoint import manifest_for
from .facts import FileStats, JsonFile, NodeInfo, PythonVersion, PyvenvCfg
from .util import fail, first_pass


def _bytes_to_fetch(checkpoints) -> tuple[dict, list[str]]:
    """Bytes still to download per node volume, from the pinned manifests and the node's files."""
    per_device, found = {}, []
    for pin, token_file, dest in checkpoints:
        on_node = host.get_fact(JsonFile, path=f"{dest}/{plan.MANIFEST_FILE}")
        try:
            manifest = manifest_for(pin, token_file, on_node)
        except NoderigError as e:
            found.append(str(e))
            continue
        stats = host.get_fact(FileStats, root=dest)
        states = plan.classify(manifest, stats, host.get_fact(JsonFile, path=f"{dest}/{plan.RECORD_FILE}"))
        volume = host.get_fact(NodeInfo, path=dest)
        key = volume.get("device") or dest
        entry = per_device.setdefault(key, {"free": volume["free_bytes"], "need": 0, "dirs": []})
        entry["need"] += plan.bytes_to_fetch(manifest, states, stats)
        entry["dirs"].append(dest)
    return per_device, found


@operation(is_idempotent=True)
def node(model_dir: str, venv: str, reference=None, gpus_required: int = 0, checkpoints=(), exposure=None,
         firewall=None):
    """
    Check the node can take this deploy: OS, free disk, GPUs, and the base Python the
    reference venv was built on. Changes nothing; fails the host with one sentence per problem.

    + model_dir: where the checkpoint goes (free space is measured on its volume)
    + venv: absolute path of the venv (same on reference and node)
    + reference: the pyinfra host holding the working venv (its ``pyvenv.cfg`` is read)
    + gpus_required: the number of GPUs the node must show in ``nvidia-smi`` (0: none needed)
    + checkpoints: ``(RepoPin, token_file, dest)`` of each checkpoint: its bytes still to fetch
      must fit on its volume (checked per volume, with a margin)
    + exposure: who can reach the server (``noderig.exposure.decide``): printed, and a refused
      exposure stops the host here
    + firewall: the firewall settings (``noderig.firewall.FirewallSettings``), or None when off
    """
    if reference is not None and not reference.connected:
        yield from fail(host, f"the reference host {reference.name} is unreachable (pyinfra could not connect to "
                              f"it over SSH), so the venv cannot be copied; nothing was changed on {host.name}. "
                              f"Check that {reference.name} is up and reachable, then rerun")
        return
    info = host.get_fact(NodeInfo, path=model_dir)
    ref_cfg = reference.get_fact(PyvenvCfg, venv=venv) if reference is not None else None
    base_python = None
    if ref_cfg and ref_cfg.get("home"):
        base_python = host.get_fact(PythonVersion, executable=f"{ref_cfg['home']}/python3")
    volumes, found = _bytes_to_fetch(checkpoints)
    found += problems(info, ref_cfg, base_python, gpus_required=gpus_required,
                      reference_name=getattr(reference, "name", None), venv=venv)
    found += disk_problems(volumes)
    found += [exposure.sentence] if exposure is not None and exposure.refused else []
    found += firewall_problems(firewall) if firewall is not None else []
    if first_pass(host):
        logger.info(f"[{host.name}] {describe(info, model_dir)}")
        if exposure is not None:
            logger.info(f"[{host.name}] exposure: {exposure.kind}: {exposure.sentence}")
    if found:
        yield from fail(host, f"preflight on {host.name}: " + "; ".join(found))
    else:
        host.noop(describe(info, model_dir))
