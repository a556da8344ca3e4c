"""Step 3, environment: the reference host's working venv, copied host to host to the node."""

from __future__ import annotations

import io
import secrets
import subprocess
import tempfile
from pathlib import Path

from pyinfra import host, logger
from pyinfra.api import operation
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand

from noderig.treediff import diff_listings, summarize

from .facts import TreeListing


@operation(is_idempotent=True)
def venv(path: str, reference, import_check: str = "sglang"):
    """
    Make the venv at ``path`` on this node identical to the reference host's, copied by rsync
    running on the reference straight to the node (nothing passes through the controller).

    + path: absolute path of the venv, the same on both hosts (a venv is not relocatable)
    + reference: the pyinfra host with the working venv
    + import_check: a module the venv's Python must import on the node afterwards
    """
    want = reference.get_fact(TreeListing, root=path)
    if not want:
        from .util import fail

        yield from fail(host, f"the reference host {reference.name} has no venv at {path}")
        return
    have = host.get_fact(TreeListing, root=path)
    diff = diff_listings(want, have)
    if not diff:
        host.noop(f"venv {path} is identical to {reference.name}'s ({len(want)} entries)")
        return
    logger.info(f"[{host.name}] venv {path}: {summarize(diff)} (from {reference.name})")
    yield FunctionCommand(_rsync_from_reference, (reference, path), {})
    yield StringCommand(QuoteString(f"{path}/bin/python"), "-c", QuoteString(f"import {import_check}"))


def _run(h, command: str | StringCommand, what: str) -> list[str]:
    ok, output = h.run_shell_command(command if isinstance(command, StringCommand) else StringCommand(command))
    if not ok:
        raise RuntimeError(f"{what} failed on {h.name}: {output.stderr or output.stdout}")
    return output.stdout_lines


def _rsync_from_reference(state, host, reference, path: str) -> bool:
    """rsync on the reference pushes to the node over SSH with a key made for this copy only:
    authorised on the node for the reference's address alone and removed afterwards from
    both hosts, so no credential outlives the copy."""
    tag = f"noderig-transient-{secrets.token_hex(6)}"
    target_addr = host.data.get("ssh_hostname") or host.name
    ref_addr = reference.data.get("ssh_hostname") or reference.name
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", tag, "-f", str(key)], check=True)
        pub = key.with_suffix(".pub").read_text().strip()
        private = key.read_text()
    host_key = _run(host, "cat /etc/ssh/ssh_host_ed25519_key.pub", "reading the ssh host key")[0].split()[:2]
    remote_key, remote_known = f"/root/.ssh/{tag}", f"/root/.ssh/{tag}.known_hosts"
    authorized = f'restrict,from="{ref_addr}" {pub}'
    try:
        # Drop leftovers of an interrupted earlier copy first, then authorise this one.
        _run(host, StringCommand(
            "mkdir", "-p", "-m", "700", "/root/.ssh", "&&", "touch", "/root/.ssh/authorized_keys", "&&",
            "sed", "-i", QuoteString("/noderig-transient-/d"), "/root/.ssh/authorized_keys", "&&",
            "echo", QuoteString(authorized), ">>", "/root/.ssh/authorized_keys"), "authorising the copy")
        reference.put_file(io.StringIO(private), remote_key)
        reference.put_file(io.StringIO(f"{target_addr} {' '.join(host_key)}\n"), remote_known)
        ssh = (f"ssh -i {remote_key} -o UserKnownHostsFile={remote_known} -o StrictHostKeyChecking=yes "
               "-o BatchMode=yes -o ConnectTimeout=10")
        _run(reference, StringCommand(
            "chmod", "600", remote_key, "&&",
            "rsync", "-aH", "--delete", "--numeric-ids", "--mkpath", "-e", QuoteString(ssh),
            QuoteString(f"{path}/"), QuoteString(f"root@{target_addr}:{path}/")), "rsync of the venv")
    except RuntimeError as e:
        host.log_styled(str(e), fg="red", log_func=logger.error)
        return False
    finally:
        reference.run_shell_command(StringCommand("rm", "-f", remote_key, remote_known))
        host.run_shell_command(StringCommand(
            "sed", "-i", QuoteString(f"/{tag}/d"), "/root/.ssh/authorized_keys"))
    return True
