"""Step 1, preflight: facts about the node before anything changes; a problem stops this host."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from noderig.preflight import problems

from .facts import NodeInfo, PythonVersion, PyvenvCfg
from .util import fail


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
    info = host.get_fact(NodeInfo, path=model_dir)
    ref_cfg = reference.get_fact(PyvenvCfg, venv=venv) if reference is not None else None
    base_python = None
    if ref_cfg and ref_cfg.get("home"):
        base_python = host.get_fact(PythonVersion, executable=f"{ref_cfg['home']}/python3")
    found = problems(info, ref_cfg, base_python, gpus_required=gpus_required, bytes_needed=bytes_needed,
                     reference_name=getattr(reference, "name", None), venv=venv)
    if found:
        yield from fail(host, f"preflight on {host.name}: " + "; ".join(found))
    else:
        host.noop(
            f"{info['os']}, python {info['python']}, {len(info['gpus'])} GPU(s), "
            f"{(info['free_bytes'] or 0) / 2**30:.1f} GiB free for {model_dir}"
        )
