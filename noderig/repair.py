"""Remedies the deploy can apply itself, from a diagnosis's machine remedy id.

Pure: a remedy id and the current settings in, a ``Repair`` (what to change, described) out.
Applied repairs are recorded on the node (``/etc/noderig/repairs.json``) and folded into
the settings on every later run, so a rerun after a repair renders the same unit (a no-op)
instead of undoing the fix and crashing again. A remedy is applied at most once: if the
server still fails with it in place, the deploy says so instead of looping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .inventory_check import DEBIAN_PACKAGE

REPAIRS_FILE = "/etc/noderig/repairs.json"

# Remedy ids the catalog names that the deploy deliberately leaves to a human, and why: the report
# says so instead of staying silent. Every other remedy id in the catalog is planned below.
LEFT_TO_A_HUMAN = {
    "resync_venv": (
        "the environment step copies the reference host's venv to this node and verifies it identical (every "
        "file and every installed distribution) on each deploy run, so copying it again changes nothing: the "
        "mismatch is in the reference's venv itself, or between that venv and this node's driver/system "
        "libraries. Fix the venv on the reference host (the fix above names the package), then rerun the "
        "deploy, which copies it; if this run skipped the environment step (steps=...), rerun with it first"),
    "raise:nofile_limit": (
        "the unit already sets LimitNOFILE=1048576, so a limit still reached is set elsewhere (a container "
        "runtime's cap, fs.nr_open, a client): raise it there"),
    "enlarge_shm": (
        "/dev/shm is the node's tmpfs, shared by every process on it; resizing it (mount -o remount,size=...) "
        "changes the whole node, so the deploy leaves it to you"),
    "provide_hf_token": (
        "access to a gated repository is granted to an account on the Hub; request it there and put that "
        "account's token in the inventory's hf_token_file"),
    "raise:mem_fraction_static": (
        "a larger static fraction leaves less memory for activations and CUDA graphs; the deploy does not make "
        "that trade by itself: set mem_fraction_static, or a shorter context_length, in the inventory"),
    "lower:cuda_graph_max_bs": "set cuda_graph_max_bs (e.g. 32) in the inventory; the deploy does not pick it",
    "add_flag:--disable-piecewise-cuda-graph": (
        "add --disable-piecewise-cuda-graph to extra_flags in the inventory; the deploy does not turn a server "
        "feature off by itself (the whole-batch CUDA graphs stay, so the cost is the piecewise graphs' speed-up)"),
    "": "the catalog names no change the deploy could make for this failure",
}


@dataclass
class Repair:
    remedy: str
    description: str
    settings: dict = field(default_factory=dict)  # setting -> new value (recorded on the node)
    packages: list[str] = field(default_factory=list)  # apt packages to install first
    forget_verified: bool = False  # drop the checkpoint's verified record (re-verify next run)


def plan_repair(remedy: str | None, settings: dict, applied: list[str]) -> Repair | None:
    """What to do for ``remedy`` given the current ``settings`` (inventory names), or None when
    the deploy cannot apply it (or already did: the fix did not help, a human must look)."""
    if not remedy or remedy in applied:
        return None
    kind, _, arg = remedy.partition(":")
    if kind == "add_flag" and arg == "--skip-server-warmup":
        return Repair(remedy, "skip the server warmup (--skip-server-warmup)", settings={"skip_server_warmup": True})
    if kind == "add_flag" and arg == "--trust-remote-code":
        return Repair(remedy, "allow the model's remote code (--trust-remote-code)", settings={"trust_remote_code": True})
    if kind == "install_package" and DEBIAN_PACKAGE.match(arg):  # a package name, nothing else
        return Repair(remedy, f"install {arg}", packages=[arg])
    if kind == "set" and "=" in arg:
        key, value = arg.split("=", 1)
        if key in ("attention_backend", "mm_attention_backend") and settings.get(key) != value:
            return Repair(remedy, f"set {key} to {value}", settings={key: value})
        return None
    if kind == "lower" and arg == "mem_fraction_static":
        current = settings.get("mem_fraction_static") or 0.88
        new = round(max(0.5, current - 0.08), 2)
        if new >= current:
            return None
        return Repair(remedy, f"lower mem_fraction_static from {current} to {new}", settings={"mem_fraction_static": new})
    if kind == "reverify_checkpoint":
        return Repair(remedy, "re-verify the checkpoint (every file hashed again)", forget_verified=True)
    if kind == "free_port":
        # Another process holds the port: the deploy never kills what it did not start, so it
        # moves the server to the next free port (the operation picks it on the node).
        return Repair(remedy, "move the server to a free port", settings={"port": None})
    return None


def manual_reason(remedy: str | None) -> str | None:
    """Why the deploy leaves ``remedy`` to a human (for the report), or None when it is not one
    of those (a remedy it plans, or no diagnosis with a remedy at all)."""
    return LEFT_TO_A_HUMAN.get(remedy)  # (None is no key of it)


def recorded_settings(recorded: dict | None) -> dict:
    """The settings changed by the repairs recorded on the node, in the order applied."""
    merged = {}
    for repair in (recorded or {}).get("repairs", []):
        merged.update(repair.get("settings", {}))
    return merged
