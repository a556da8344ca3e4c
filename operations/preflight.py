"""Step 1, preflight: facts about the node before anything changes; a problem stops this host."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import operation

from noderig.preflight import describe, problems

from .facts import NodeInfo, PythonVersion, PyvenvCfg
from .util import fail, first_pass


@operation(is_idempotent=True)
def node(model_dir: str, venv: str, reference=None, gpus_required: int = 0, bytes_needed: int = 0):
    """
    Check the node can take this deploy: OS, free disk, GPUs, and the base Python the
    reference venv was built on. Changes nothing; fails the host with one sentence per problem.

    + model_dir: where the checkpoint goes (free space is measured on its volume)
    + venv: absolute path of the venv (same on reference and node)
    + reference: the pyinfra host holding the working venv (its ``pyvenv.cfg`` is read)
    + gpus_required: the number of GPUs the node must show in ``nvidia-smi`` (0: none needed)
    + bytes_needed: bytes still to be written under ``model_dir``
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
    found = problems(info, ref_cfg, base_python, gpus_required=gpus_required, bytes_needed=bytes_needed,
                     reference_name=getattr(reference, "name", None), venv=venv)
    if first_pass(host):
        logger.info(f"[{host.name}] {describe(info, model_dir)}")
    if found:
        yield from fail(host, f"preflight on {host.name}: " + "; ".join(found))
    else:
        host.noop(describe(info, model_dir))
