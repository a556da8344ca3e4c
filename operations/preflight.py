"""Step 1, preflight: facts about the node before anything changes; a problem stops this host."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import FactBase
from pyinfra.api.command import QuoteString, StringCommand

from noderig import checkpoint_plan
from noderig import inventory_check
from noderig.errors import NoderigError
from noderig.firewall import problems as firewall_problems
from noderig.preflight import describe, disk_problems, problems
from noderig.secret_files import api_key_file_problem
from noderig.server_settings import ServerSettings

from .checkpoint import linked_from_live, manifest_for
from .facts import CheckpointState, NodeInfo, PythonVersion, PyvenvCfg
from .util import fail, first_pass, operation


def _bytes_to_fetch(checkpoints) -> tuple[dict, list[str]]:
    """Bytes still to download per node volume, from the pinned manifests and the node's files."""
    per_device, found = {}, []
    for pin, token_file, dest, live in checkpoints:
        node = host.get_fact(CheckpointState, dest=dest)
        try:
            manifest = manifest_for(pin, token_file, node["manifest"], f"{host.name} in {dest}")
        except NoderigError as e:
            found.append(str(e))
            continue
        stats = node["stats"]
        states = checkpoint_plan.classify(manifest, stats, node["record"])
        if live:  # a revision beside the live one: what the two share is linked, not fetched
            links = linked_from_live(manifest, host.get_fact(CheckpointState, dest=live), states)
            states = checkpoint_plan.after_seeding(states, links)
        volume = host.get_fact(NodeInfo, path=dest)
        key = volume.get("device") or dest
        entry = per_device.setdefault(key, {"free": volume["free_bytes"], "need": 0, "dirs": []})
        entry["need"] += checkpoint_plan.bytes_to_fetch(manifest, states, stats)
        entry["dirs"].append(dest)
    return per_device, found


class UnitFiles(FactBase):
    """
    The files that define ``<service>.service`` on the node: ``/etc/systemd/system/<unit>``
    and the fragment systemd loads (``/lib/systemd/system/...`` too), each with its first
    line, ``None`` when it exists but cannot be read (a dangling link, a directory...), and
    ``error`` when systemd could not be asked; ``state``: the owner and type of the unit's
    state directory ``/var/lib/<service>`` (``stat``'s ``%U %F``), None when it is absent.
    Never hides a failure as "absent".

    .. code:: python

        {"files": {"/lib/systemd/system/ssh.service": "[Unit]"}, "state": "root directory", "error": None}
    """

    def command(self, service: str) -> StringCommand:
        script = (
            'u="$1.service"; '
            'frag=$(systemctl show -P FragmentPath -- "$u" 2>&1) '
            '|| { echo "error=systemctl show $u: $frag"; exit 0; }; '
            'for f in "/etc/systemd/system/$u" "$frag"; do '
            '[ -n "$f" ] || continue; [ -e "$f" ] || [ -L "$f" ] || continue; '
            'if first=$(head -n 1 -- "$f" 2>/dev/null); then printf \'file=%s\\t%s\\n\' "$f" "$first"; '
            'else printf \'unreadable=%s\\n\' "$f"; fi; done; '
            's="/var/lib/$1"; if [ -e "$s" ] || [ -L "$s" ]; then '
            'st=$(stat -c "%U %F" -- "$s" 2>&1) || { echo "error=stat $s: $st"; exit 0; }; echo "state=$st"; fi; '
            'echo done='
        )
        return StringCommand("sh", "-c", QuoteString(script), "noderig-facts", QuoteString(service))

    @staticmethod
    def default():
        return unit_files([])  # no output at all: the check did not run

    def process(self, output):
        return unit_files(output)


def unit_files(lines) -> dict:
    """``UnitFiles``' output parsed (see there); output that does not end with ``done=`` is
    a check that did not complete, an error."""
    found = {"files": {}, "state": None,
             "error": None if "done=" in lines else "the unit check did not complete on the node"}
    for line in lines:
        key, _, value = line.partition("=")
        if key == "error":
            found["error"] = value.strip() or "systemctl show failed"
        elif key == "file":
            path, _, first = value.partition("\t")
            found["files"][path] = first
        elif key == "unreadable":
            found["files"][value] = None
        elif key == "state":
            found["state"] = value
    return found


def refused(reference) -> list[str]:
    """This host's settings (and its API key file, on the controller) and the reference's
    address: every problem found without asking the node. deploy.py plans no step but preflight for a host with any."""
    found = inventory_check.problems(host.data, host.name)
    key_problem = api_key_file_problem(host.data.get("api_key_file"))
    found += [key_problem] if key_problem else []
    if reference is not None:
        found += inventory_check.address_problems(reference.data, reference.name)
    return found


def inventory_problems(reference) -> list[str]:
    """``refused``, and the unit the service step would write: someone else's unit is never
    overwritten (one fact: the unit files of that name). deploy.py plans no step but preflight
    for a host with any: the rollout's decision runs the checkpoint operation's body while the
    deploy file loads, which asks the Hub."""
    found = refused(reference)
    settings = ServerSettings.from_inventory(host.data)  # (an inventory without the keys: their defaults)
    service = settings.service_name
    if inventory_check.service_name_ok(service):
        files = host.get_fact(UnitFiles, service=service)
        owner = (inventory_check.unit_owner_problem(service, files)
                 or inventory_check.state_dir_problem(service, settings.user, files))
        found += [owner] if owner else []
    return found


@operation(is_idempotent=True)
def node(model_dir: str, venv: str, reference=None, gpus_required: int = 0, checkpoints=(), exposure=None,
         firewall=None):
    """
    Check the node can take this deploy: every inventory value (first: nothing reaches the
    Hub or the node's shell before), the unit name, OS, free disk, GPUs, and the base Python
    the reference venv was built on. Changes nothing; fails the host with one sentence per problem.

    + model_dir: where the checkpoint goes (free space is measured on its volume)
    + venv: absolute path of the venv (same on reference and node)
    + reference: the pyinfra host holding the working venv (its ``pyvenv.cfg`` is read)
    + gpus_required: the number of GPUs the node must show in ``nvidia-smi`` (0: none needed)
    + checkpoints: ``(RepoPin, token_file, dest, live)`` of each checkpoint: its bytes still to
      fetch must fit on its volume (checked per volume, with a margin); ``live``: the directory
      a new revision is prepared beside (``checkpoint.beside``), or None
    + exposure: who can reach the server (``noderig.exposure.decide``): printed, and a refused
      exposure stops the host here
    + firewall: the firewall settings (``noderig.firewall.FirewallSettings``), or None when off
    """
    if reference is not None and not reference.connected:
        yield from fail(host, f"the reference host {reference.name} is unreachable (pyinfra could not connect to "
                              f"it over SSH), so the venv cannot be copied; nothing was changed on {host.name}. "
                              f"Check that {reference.name} is up and reachable, then rerun")
        return
    invalid = inventory_problems(reference)
    if invalid:
        yield from fail(host, f"preflight on {host.name}: the inventory is refused, nothing was changed: "
                              + "; ".join(invalid))
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
