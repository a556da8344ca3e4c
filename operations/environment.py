"""Step 3, environment: the reference host's working venv, copied host to host to the node."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import secrets
import shlex
import subprocess
import tempfile
from pathlib import Path

from pyinfra import host, logger
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand

from noderig.copykey import RRSYNC, authorized_line, expiry, is_ip, known_hosts_line, rsync_destination
from noderig.errors import NoderigError
from noderig.rollout import venv_generation
from noderig.inventory_check import VENV_TRANSFERS as TRANSFERS
from noderig.treediff import diff_listings, summarize

from . import venv_peers
from .facts import CopyKeys, DistributionsDigest, TreeListing
from .peers import cluster_address
from .util import fail, first_pass, mark_changing, one_at_a_time, operation

# __pycache__ is neither copied nor deleted: each host's Python keeps its own bytecode cache
# (see TreeListing), so running the server never counts as drift.
RSYNC_FLAGS = ["-aH", "--delete", "--numeric-ids", "--mkpath", "--stats", "--exclude=__pycache__/"]
TRANSIENT_TAG = "noderig-transient-"
# host name -> (the reference's listing, whether the node's live venv differs), as the venv
# operation last compared them.
_compared: dict[str, tuple[dict, bool]] = {}


@operation(is_idempotent=True)
def venv(path: str, reference, transfer: str = "auto", import_check: str = "sglang", beside: bool = False,
         peer=None):
    """
    Make the venv at ``path`` on this node identical to the reference host's: same files,
    sizes, mtimes, modes and links, deletions included. rsync runs on the reference and
    pushes straight to the node (nothing passes through the controller); with
    ``transfer="relay"``, or ``auto`` when the reference cannot reach the node, the
    controller relays (pull to a local cache, push to the node).

    + path: absolute path of the venv, the same on both hosts (a venv is not relocatable)
    + reference: the pyinfra host with the working venv
    + transfer: ``auto``, ``direct`` or ``relay``
    + import_check: a module the venv's Python must import on the node afterwards
    + beside: the node's server runs from this venv: prepare the new one beside it (see
      ``noderig.rollout.venv_generation``); it becomes live at the node's restart
    + peer: a target that takes the venv before this one in this run (``operations.venv_peers``):
      the copy comes from it once its venv is identical to the reference's, else from the reference
    """
    if transfer not in TRANSFERS:
        yield from fail(host, f"venv_transfer={transfer!r} must be one of {', '.join(TRANSFERS)}")
        return
    want = reference.get_fact(TreeListing, root=path)
    if not want:
        yield from fail(host, f"the reference host {reference.name} has no venv at {path}")
        return
    have = host.get_fact(TreeListing, root=path)
    diff = diff_listings(want, have)
    _compared[host.name] = (want, bool(diff))  # (for next_generation: no second listing of either venv)
    if not diff:
        # The copy removes its key from both hosts; a killed run leaves it, authorised.
        sources = [reference, *([peer] if peer else [])]
        leftovers = host.get_fact(CopyKeys, prefix=TRANSIENT_TAG) + \
            [key for source in sources for key in source.get_fact(CopyKeys, prefix=copy_key_prefix(host))]
        if not leftovers:
            host.noop(f"venv {path} is identical to {reference.name}'s ({len(want)} entries)")
            return
        if first_pass(host):
            logger.info(f"[{host.name}] venv {path}: identical; removing {len(leftovers)} copy key(s) an "
                        "interrupted run left")
        for source in sources:
            yield FunctionCommand(_remove_copy_keys, (source, ""), {})
        return
    dest = venv_generation(path, want) if beside else path
    if beside:
        diff = diff_listings(want, host.get_fact(TreeListing, root=dest))
        if not diff:
            host.noop(f"venv {path}: the new one is ready beside it in {dest}; it becomes live at the restart")
            return
    if first_pass(host):
        where = f" into {dest}, beside the live one (which its server runs)" if beside else ""
        source = f"{peer.name}, a target that takes it first (else {reference.name})" if peer else reference.name
        logger.info(f"[{host.name}] venv {path}: {summarize(diff)} (from {source}){where}")
    yield mark_changing("venv")
    if beside:
        yield seed_command(path, dest)
    yield FunctionCommand(_copy, (reference, path, transfer, diff.bytes_to_copy, dest),
                          {"peer": peer, "want": want} if peer else {})
    yield FunctionCommand(_verify_copy, (reference, path, dest), {})
    yield StringCommand(QuoteString(f"{dest}/bin/python"), "-c", QuoteString(f"import {import_check}"))


def next_generation(venv_op, path: str, reference) -> str | None:
    """The venv generation to make live at this node's restart: where the reference's venv is
    prepared beside the live one, when the live one differs from it; else None. Read from
    what ``venv_op`` (this node's ``venv`` operation) compared, so neither tree is listed twice.
    """
    venv_op.will_change  # noqa: B018 - runs its body now if pyinfra has not (-y skips change detection)
    want, differs = _compared.get(host.name, (None, False))
    return venv_generation(path, want) if want and differs else None


def seed_command(live: str, dest: str) -> StringCommand:
    """A new generation starts as a local copy of the live venv (reflinked where the file
    system can), so that only the difference crosses the network; a copy, not hard links:
    rsync's attribute updates would reach the live venv's files through a link."""
    return StringCommand("[", "-e", QuoteString(dest), "]", "||", "{", "rm", "-rf", QuoteString(f"{dest}.seed"), "&&",
                         "mkdir", "-p", QuoteString(dest.rsplit("/", 1)[0]), "&&",
                         "cp", "-a", "--reflink=auto", QuoteString(f"{live}/."), QuoteString(f"{dest}.seed"), "&&",
                         "mv", "-T", QuoteString(f"{dest}.seed"), QuoteString(dest), ";", "}")


def _address(h) -> str:
    return h.data.get("ssh_hostname") or h.name


def _cluster_address(h) -> str:
    """Where another target reaches ``h``: where the fan-out's peers do (``peers.cluster_address``:
    ``fanout_address``, the bulk network between the targets), else where pyinfra reaches it."""
    return cluster_address(h) or _address(h)


def _port(h) -> int:
    return h.data.get("ssh_port") or 22


def _run(h, command: StringCommand, what: str) -> list[str]:
    ok, output = h.run_shell_command(command)
    if not ok:
        raise CopyError(f"{what} failed on {h.name}: {(output.stderr or output.stdout).strip()[-500:]}")
    return output.stdout_lines


class CopyError(Exception):
    pass


def _copy(state, host, reference, path: str, transfer: str, bytes_to_copy: int = 0, dest: str | None = None,
          peer=None, want: dict | None = None) -> bool:
    stats = peer and _from_peer(peer, host, reference, path, bytes_to_copy, dest or path, want)
    if stats:
        logger.info(f"[{host.name}] venv copied (direct, from {peer.name}, a target that had it): {stats}")
        return True
    try:
        if transfer in ("auto", "direct"):
            why = _why_not_direct(reference, host)
            if why and transfer == "direct":
                raise CopyError(f"venv_transfer=direct is not possible: {why}; fix that, or set venv_transfer "
                                "to relay or auto")
            if why:
                logger.warning(f"[{host.name}] {why}; relaying the venv through the controller")
            transfer = "relay" if why else "direct"
        stats = (_relay(reference, host, path, dest or path) if transfer == "relay"
                 else _direct(reference, host, path, bytes_to_copy, dest or path))
    except (CopyError, NoderigError) as e:
        host.log_styled(str(e), fg="red", log_func=logger.error)
        return False
    logger.info(f"[{host.name}] venv copied ({transfer}): {stats}")
    return True


def _from_peer(peer, host, reference, path: str, bytes_to_copy: int, dest: str, want: dict) -> str | None:
    """The copy from ``peer`` once its venv operation ended: rsync's stats, or None (said why)
    when the peer has no venv identical to the reference's (live or prepared beside), cannot
    push to this node, or its copy failed; the caller then copies from the reference."""
    why = venv_peers.wait_for(peer)
    held = None
    if not why:
        held = next((d for d in (path, venv_generation(path, want))
                     if not diff_listings(want, peer.get_fact(TreeListing, root=d))), None)
        why = None if held else f"its venv is not identical to {reference.name}'s"
    why = why or _why_not_direct(peer, host, _cluster_address)
    if not why:
        try:
            return _direct(peer, host, held, bytes_to_copy, dest, address=_cluster_address)
        except (CopyError, NoderigError) as e:
            why = str(e)
    logger.warning(f"[{host.name}] venv not from {peer.name} ({why}); copying it from {reference.name}")
    return None


def reach_command(addr: str, port: int) -> StringCommand:
    """Whether a TCP connection to ``addr:port`` opens within 5 s (bash's /dev/tcp). Host and
    port are positional arguments of a fixed script, never part of the script."""
    return StringCommand("timeout", "5", "bash", "-c", QuoteString('exec 3<>"/dev/tcp/$1/$2"'), "_",
                         QuoteString(addr), QuoteString(str(port)))


def _why_not_direct(reference, target, address=_address) -> str | None:
    """Why the reference cannot push to the node itself, or None when it can: its sshd is
    unreachable from the reference (at ``address(target)``), or the node has no rrsync for the
    copy key's command."""
    addr, port = address(target), _port(target)
    ok, _ = reference.run_shell_command(reach_command(addr, port))
    if not ok:
        return f"{reference.name} cannot reach {addr}:{port}"
    ok, _ = target.run_shell_command(StringCommand("test", "-x", RRSYNC))
    if not ok:
        return f"{target.name} has no {RRSYNC} (rsync >= 3.2.4) to restrict the copy key to"
    return None


def rsync_stats(lines: list[str]) -> str:
    """"N files, X MiB transferred" from rsync --stats."""
    text = "\n".join(lines)
    files = re.search(r"Number of regular files transferred: ([\d,]+)", text)
    size = re.search(r"Total transferred file size: ([\d,]+)", text)
    n = int(files.group(1).replace(",", "")) if files else 0
    b = int(size.group(1).replace(",", "")) if size else 0
    return f"{n} files, {b / 2**20:.1f} MiB transferred"


def _direct(reference, host, path: str, bytes_to_copy: int = 0, dest: str | None = None, address=_address) -> str:
    """rsync on the reference pushes to the node over SSH with a key made for this copy only:
    on the node it can do nothing but receive into ``path`` (forced ``rrsync -wo``), from the
    reference's address alone, until an expiry sized to the copy; it is removed afterwards
    from both hosts, so no credential outlives the copy (an interrupted copy's leftovers are
    removed by the next one, before it adds its own). A key that cannot be removed fails the
    host, naming it. ``address``: where each host is reached (a peer's push: the cluster's)."""
    tag = f"{copy_key_prefix(host)}{secrets.token_hex(6)}"
    target_addr, ref_addr, port = address(host), address(reference), _port(host)
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", tag, "-f", str(key)], check=True)
        pub, private = " ".join(key.with_suffix(".pub").read_text().split()[:2]), key.read_text()
    host_key = _run(host, StringCommand("cat", "/etc/ssh/ssh_host_ed25519_key.pub"), "reading the ssh host key")
    now = int(_run(host, StringCommand("date", "+%s"), "reading the clock")[0])
    dest = dest or path  # where on the node: the venv, or its next generation beside it
    line = authorized_line(pub, tag, _ips(host, ref_addr), dest, expiry(now, bytes_to_copy))
    known = known_hosts_line(target_addr, port, host_key[0] if host_key else "")
    if not _remove_copy_keys(None, host, reference, ""):
        raise CopyError(f"could not remove the copy keys an earlier run left on {host.name} or {reference.name}")
    error = None
    try:
        lines = _push(reference, host, path, tag, line, private, known, dest, target_addr)
    except CopyError as e:
        error, lines = str(e), []
    finally:
        left = _leftover_keys(host, reference, tag)
    if left:
        error = "; ".join(filter(None, [error, left]))
    if error:
        raise CopyError(error)
    return rsync_stats(lines)


def _ips(h, address: str) -> list[str]:
    """``address`` as ``h`` resolves it: itself when it is an IP, else every address its
    resolver gives (what sshd compares ``from=`` with)."""
    if is_ip(address):
        return [address]
    lines = _run(h, StringCommand("getent", "ahosts", "--", QuoteString(address)), f"resolving {address}")
    return sorted({line.split()[0] for line in lines if line.strip()})


def _push(reference, host, path: str, tag: str, line: str, private: str, known: str, dest: str,
          target_addr: str) -> list[str]:
    """Authorise the key on the node, place its private half (0600 before a byte is
    written) and known_hosts on the reference, and rsync to ``dest`` at ``target_addr``."""
    remote_key, remote_known = f"/root/.ssh/{tag}", f"/root/.ssh/{tag}.known_hosts"
    _run(host, StringCommand(
        "mkdir", "-p", "--", QuoteString(dest), "&&",  # rrsync's root must exist
        "mkdir", "-p", "-m", "700", "/root/.ssh", "&&", "touch", "/root/.ssh/authorized_keys", "&&",
        "echo", QuoteString(line), ">>", "/root/.ssh/authorized_keys"), "authorising the copy")
    _run(reference, StringCommand("mkdir", "-p", "-m", "700", "/root/.ssh", "&&",
                                  "install", "-m", "600", "/dev/null", remote_key, "&&",
                                  "install", "-m", "600", "/dev/null", remote_known), "creating the copy key files")
    with one_at_a_time("sftp", reference.name):
        if not reference.put_file(io.StringIO(private), remote_key):
            raise CopyError(f"could not place the copy key on {reference.name}")
        if not reference.put_file(io.StringIO(known), remote_known):
            raise CopyError(f"could not place the node's host key on {reference.name}")
    ssh = (f"ssh -p {int(_port(host))} -i {remote_key} -o UserKnownHostsFile={remote_known} "
           "-o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10")
    return _run(reference, StringCommand(
        "rsync", *RSYNC_FLAGS, "-e", QuoteString(ssh), QuoteString(f"{path}/"),
        QuoteString(rsync_destination(target_addr))),
        f"rsync of the venv from {reference.name} to {host.name}")


def _leftover_keys(host, reference, tag: str) -> str | None:
    """Remove the copy key ``tag`` from both hosts; a sentence naming what stayed, or None."""
    failed = _remove_keys(host, reference, tag)
    if not failed:
        return None
    tag = tag or f"{copy_key_prefix(host)}*"
    return (f"the copy key {tag} could not be removed ({'; '.join(failed)}); it expires by itself within "
            f"minutes, but remove it now: delete the line with {tag} from {host.name}:/root/.ssh/authorized_keys "
            f"and /root/.ssh/{tag}* on {reference.name}, or rerun once the cause is fixed")


def copy_key_prefix(host) -> str:
    """The comment prefix of the keys made to copy to ``host``: named after the node, since
    copies to several nodes run at once and each removes only its own from the reference.
    No node's prefix may begin another's ("b300-" began "b300-2-": b300's cleanup removed
    b300-2's key mid-copy), so the name keeps no "-" and a digest of it follows."""
    digest = hashlib.sha256(host.name.encode()).hexdigest()[:8]
    return f"{TRANSIENT_TAG}{re.sub(r'[^A-Za-z0-9_.]', '_', host.name)}-{digest}-"


def _remove_keys(host, reference, tag: str) -> list[str]:
    """Remove the copy key ``tag`` (or, with "", every copy key for this node) from the node's
    authorized_keys and from the reference's /root/.ssh; what failed, one phrase per host."""
    pattern = tag or copy_key_prefix(host)
    failed = []
    ok, out = reference.run_shell_command(StringCommand("rm", "-f", f"/root/.ssh/{pattern}*"))
    if not ok:
        failed.append(f"on {reference.name}: {(out.stderr or out.stdout).strip()[-300:]}")
    # Rewritten (sed -i: a new file renamed into place) only when it holds a copy key; a file
    # grep cannot read is a failure, not "no key".
    script = ('f=/root/.ssh/authorized_keys; [ -e "$f" ] || exit 0; grep -q -- "$1" "$f"; s=$?; '
              '[ "$s" -eq 1 ] && exit 0; [ "$s" -eq 0 ] || exit "$s"; sed -i "/$1/d" "$f"')
    ok, out = host.run_shell_command(StringCommand("sh", "-c", QuoteString(script), "noderig-keys",
                                                   QuoteString(tag or TRANSIENT_TAG)))
    if not ok:
        failed.append(f"on {host.name}: {(out.stderr or out.stdout).strip()[-300:]}")
    return failed


def _remove_copy_keys(state, host, reference, tag: str) -> bool:
    """``_remove_keys`` as a command of the operation: fails the host, naming what stayed."""
    left = _leftover_keys(host, reference, tag)
    if left:
        host.log_styled(left, fg="red", log_func=logger.error)
    return left is None


def ssh_argv(h) -> list[str]:
    """An OpenSSH command line for a pyinfra host, from its inventory data."""
    d = h.data
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-p", str(d.get("ssh_port") or 22)]
    if d.get("ssh_key"):
        argv += ["-i", os.path.expanduser(d.get("ssh_key"))]
    if d.get("ssh_known_hosts_file"):
        argv += ["-o", f"UserKnownHostsFile={os.path.expanduser(d.get('ssh_known_hosts_file'))}"]
    strict = d.get("ssh_strict_host_key_checking")
    if strict:
        argv += ["-o", f"StrictHostKeyChecking={strict}"]
    if d.get("ssh_user"):
        argv += ["-l", d.get("ssh_user")]
    return argv


def relay_cache(reference, path: str) -> Path:
    base = Path(os.environ.get("NODERIG_RELAY_CACHE", Path.home() / ".cache" / "noderig" / "relay"))
    return base / reference.name / path.strip("/").replace("/", "_")


def _relay(reference, host, path: str, dest: str | None = None) -> str:
    """Fallback when the hosts cannot reach each other: rsync pulls the venv into a cache on
    the controller and pushes it to the node; both legs are incremental, so a rerun moves
    only what changed."""
    cache = relay_cache(reference, path)
    cache.mkdir(parents=True, exist_ok=True)
    for src, dst, h in ((f"{_address(reference)}:{path}/", f"{cache}/", reference),
                        (f"{cache}/", f"{_address(host)}:{dest or path}/", host)):
        # Nodes relaying at once share the cache: one pull at a time (the next finds it current).
        with one_at_a_time("relay", str(cache)) if h is reference else contextlib.nullcontext():
            res = subprocess.run(["rsync", *RSYNC_FLAGS, "-e", shlex.join(ssh_argv(h)), src, dst],
                                 capture_output=True, text=True)
        if res.returncode != 0:
            raise CopyError(f"relaying the venv via the controller failed ({h.name}): {res.stderr.strip()[-500:]}")
        last = res.stdout.splitlines()
    return rsync_stats(last) + " (last leg)"


def _verify_copy(state, host, reference, path: str, dest: str | None = None) -> bool:
    """The copy (at ``dest``, else ``path``) equals the reference: every entry (type, size,
    mtime, mode, link) and the installed distributions (their RECORD files, which list every
    file's hash)."""
    dest = dest or path
    diff = diff_listings(reference.get_fact(TreeListing, root=path), host.get_fact(TreeListing, root=dest))
    if diff:
        host.log_styled(f"venv {dest} still differs from {reference.name} after the copy: {summarize(diff)}",
                        fg="red", log_func=logger.error)
        return False
    want, have = reference.get_fact(DistributionsDigest, venv=path), host.get_fact(DistributionsDigest, venv=dest)
    if want != have:
        host.log_styled(f"venv {path}: installed distributions differ from {reference.name}'s "
                        f"({have} vs {want})", fg="red", log_func=logger.error)
        return False
    return True
