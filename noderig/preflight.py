"""Preflight rules: facts about a node in, one sentence per problem out. No I/O here."""

from __future__ import annotations

from .sizes import human_size

# Room beyond the bytes still to fetch: logs, the verified record, aria2's control files.
DISK_MARGIN_BYTES = 64 * 2**20
DISK_MARGIN_FRACTION = 0.02


def disk_problems(volumes: dict) -> list[str]:
    """``volumes``: per node volume, ``{"free", "need", "dirs"}`` (bytes still to fetch into
    the checkpoint directories on it). Each must hold its downloads plus a margin."""
    found = []
    for vol in volumes.values():
        need, free = vol["need"], vol["free"]
        if not need or free is None:
            continue
        margin = DISK_MARGIN_BYTES + int(need * DISK_MARGIN_FRACTION)
        if free < need + margin:
            found.append(f"not enough disk for {' and '.join(vol['dirs'])}: {human_size(free)} free, "
                         f"{human_size(need)} still to download + {human_size(margin)} margin; free space or point "
                         "model_dir/draft_dir at a larger volume")
    return found


def problems(info: dict, ref_cfg: dict | None, base_python: str | None, *, gpus_required: int,
             reference_name: str | None, venv: str) -> list[str]:
    found = []
    if not (info.get("os") or "").startswith(("debian", "ubuntu")):
        found.append(f"unsupported OS {info.get('os')!r} (Debian or Ubuntu expected)")
    gpus = len(info.get("gpus") or [])
    if gpus < gpus_required:
        found.append(_gpu_problem(info.get("gpu_error")) if info.get("gpu_error") else
                     f"{gpus} GPU(s) visible to nvidia-smi, {gpus_required} required "
                     "(check the driver, or set gpus_required)")
    if reference_name is not None:
        if not ref_cfg:
            found.append(f"the reference host {reference_name} has no venv at {venv} (no pyvenv.cfg)")
        else:
            want = (ref_cfg.get("version") or ref_cfg.get("version_info") or "").strip()
            home = ref_cfg.get("home")
            if base_python is None:
                found.append(f"the venv needs its base interpreter {home}/python3 (Python {want}), "
                             "which this node lacks; install that Python at that path first")
            elif want and base_python.split(".")[:2] != want.split(".")[:2]:
                found.append(f"{home}/python3 is Python {base_python} here but the reference venv was built "
                             f"on {want}; a venv is not portable across minor versions")
    return found


def _gpu_problem(error: str) -> str:
    """nvidia-smi failed (NodeInfo's ``gpu_error``): its words, and what to do."""
    if "version mismatch" in error:  # NVML's library is the new driver's, the loaded module the old one's
        return (f"the GPUs cannot be counted: {error}; a driver upgraded without a reboot says this: reboot the "
                "node (or reload the nvidia kernel modules), then rerun")
    return (f"the GPUs cannot be counted: {error}; check the driver (nvidia-smi on the node), or set "
            "gpus_required = 0 for a node without GPUs")


def describe(info: dict, model_dir: str) -> str:
    """One line of what preflight saw: the facts a user wants before anything changes."""
    gpus = info.get("gpus") or []
    if gpus:
        caps = sorted({g["compute_cap"] for g in gpus})
        drivers = sorted({g["driver"] for g in gpus})
        gpu_text = f"{len(gpus)}x {gpus[0]['name']} (compute {', '.join(caps)}, driver {', '.join(drivers)})"
    elif info.get("gpu_error"):
        gpu_text = f"GPUs unknown ({info['gpu_error']})"
    else:
        gpu_text = "no GPU visible (nvidia-smi absent or empty)"
    free = info.get("free_bytes")
    free_text = f"{human_size(free)} free for {model_dir}" if free is not None else f"free space for {model_dir} unknown"
    return f"{info.get('os')}, python {info.get('python')}, {gpu_text}, {free_text}"
