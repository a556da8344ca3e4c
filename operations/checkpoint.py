"""Step 4, checkpoint: pinned manifest from the Hub, aria2 download on the node, verification."""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass

from pyinfra import host, logger
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand
from pyinfra.operations import files

from noderig import aria2, fanout, checkpoint_plan
from noderig.errors import NoderigError, redact
from noderig.manifest import RepoPin, build_manifest, download_url, fetch_small, manifest_problem, resolve_commit
from noderig.node import script_path, verify_files
from noderig.node.hubpath import describe
from noderig.preflight import disk_problems
from noderig.rollout import checkpoint_generation
from noderig.secret_files import read_token
from noderig.server_settings import ServerSettings
from noderig.sizes import human_size

from . import rollout
from .facts import CheckpointState, FsType, NodeInfo
from .tunnel import LoopbackForward
from .util import earlier_in_run, fail, first_pass, mark_changing, one_at_a_time, operation, put_atomic

VERIFY_SCRIPT = "/usr/local/lib/noderig/verify_files.py"
# The path check (stdlib only) the verifier loads from beside itself.
HUBPATH_SCRIPT = "/usr/local/lib/noderig/hubpath.py"
# Drops files from the verified record (atomically); run before they are fetched again. The
# new record is written to a fresh temporary file (mkstemp: never through a link already there),
# readable as the verifier leaves it.
FORGET = (
    "import json, os, sys, tempfile\n"
    "p = sys.argv[1]\n"
    "try:\n    d = json.load(open(p))\nexcept (OSError, ValueError):\n    sys.exit(0)\n"
    "for f in sys.argv[2:]:\n    d.pop(f, None)\n"
    "fd, tmp = tempfile.mkstemp(prefix='.verified.', suffix='.tmp', dir=os.path.dirname(p))\n"
    "os.fchmod(fd, 0o644)\n"
    "with os.fdopen(fd, 'w') as t:\n    t.write(json.dumps(d))\n"
    "os.replace(tmp, p)\n"
)
# Verifier statuses of a file whose bytes are wrong (not merely missing or short): resuming
# would keep the damage, so it is deleted and fetched again from scratch.
REFETCH_FROM_SCRATCH = {verify_files.SHA256_MISMATCH, verify_files.HEADER_INVALID, verify_files.INDEX_MISMATCH,
                        verify_files.SIZE_MISMATCH}

# One manifest per pin per controller run: the op body runs at prepare and again at execute
# (and the commit a branch points at, under a key of its own).
_manifests: dict[tuple, dict | str | None] = {}


def manifest_for(pin: RepoPin, token_file: str | None, on_node: dict | None, where: str = "the node") -> dict:
    """The node's manifest when it already pins this exact commit (no Hub call), or this
    branch or tag and the Hub says it still points at that commit (one light request per run,
    ``noderig.manifest.resolve_commit``), else the Hub's listing. The node's copy passes the
    Hub listing's checks first: it may have been edited there."""
    same = isinstance(on_node, dict) and on_node.get("repo") == pin.repo and on_node.get("patterns") == list(pin.patterns)
    if same and on_node.get("commit") == pin.revision:
        problem = manifest_problem(on_node)
        if problem:
            raise NoderigError(f"the manifest {checkpoint_plan.MANIFEST_FILE} on {where} was edited: {problem}; "
                               f"nothing was written: delete that file and rerun to fetch the Hub's listing again")
        return on_node
    # (a branch's manifest edited on the node is replaced by the Hub's listing, as before)
    if (same and on_node.get("revision") == pin.revision and on_node.get("endpoint") == pin.endpoint
            and not manifest_problem(on_node) and on_node.get("commit") == _resolved(pin, token_file)):
        return on_node
    key = (pin.endpoint, pin.repo, pin.revision, pin.patterns)
    with one_at_a_time("manifest", *key):  # nodes that start together ask the Hub once
        if key not in _manifests:
            _manifests[key] = build_manifest(pin, read_token(token_file))
    return _manifests[key]


@dataclass(frozen=True)
class Revision:
    """A new revision of a checkpoint for a node that serves: where it is fetched, and when."""
    live: str  # the directory the server runs from (``model_dir`` or ``draft_dir``)
    dest: str  # beside it (``noderig.rollout.checkpoint_generation``), or ``live`` itself
    need: int  # the bytes to fetch (what the live revision does not share)

    @property
    def in_batch(self) -> bool:
        """Fetched into the live directory within the node's batch, after its server stopped
        (no room beside it, or ``checkpoint_beside = False``); a rollback cannot bring the
        old revision's files back."""
        return self.dest == self.live


def new_revision(node, pin: RepoPin, token_file: str | None, live: str, settings, allow_beside: bool = True):
    """The new revision a node that serves gets (``Revision``), or None: it serves nothing, or
    the pinned revision changes no byte of what its live directory holds (the checkpoint step
    then works in the live directory, as ever). Beside the live one when ``allow_beside`` and
    the changed files fit on its volume with preflight's margin; else within the node's batch.
    Decided once per run per node.

    + node: the pyinfra host (the fan-out asks about every target)
    + live: the checkpoint directory the server runs from (``model_dir`` or ``draft_dir``)
    + settings: the node's server settings (whether it serves: ``operations.rollout.serving``)
    + allow_beside: the inventory's ``checkpoint_beside``
    """
    key = (node.name, pin, live, allow_beside)
    with one_at_a_time("revision", *key):  # (as in ``rollout.serving``: every target's greenlet asks)
        if key not in _revisions:
            _revisions[key] = None
            if rollout.serving(settings, node):
                _revisions[key] = _revision_of(node, pin, token_file, live, allow_beside)
        return _revisions[key]


def _revision_of(node, pin: RepoPin, token_file: str | None, live: str, allow_beside: bool) -> Revision | None:
    state = node.get_fact(CheckpointState, dest=live)
    try:
        manifest = manifest_for(pin, token_file, state["manifest"], f"{node.name} in {live}")
    except NoderigError:
        return None  # the checkpoint step says why, in its own words
    # (a manifest edited on the node is no checkpoint it holds: the step works in place, as ever)
    held = state["manifest"] if isinstance(state["manifest"], dict) and not manifest_problem(state["manifest"]) \
        else None
    return _placed(node, manifest, live, state, allow_beside) if checkpoint_plan.revision_differs(held, manifest) \
        else None


_revisions: dict[tuple, Revision | None] = {}


def _placed(node, manifest: dict, live: str, state: dict, allow_beside: bool) -> Revision:
    empty = checkpoint_plan.classify(manifest, {}, {})
    states = checkpoint_plan.after_seeding(empty, linked_from_live(manifest, state, empty))
    need = checkpoint_plan.bytes_to_fetch(manifest, states, {})
    free = node.get_fact(NodeInfo, path=live)["free_bytes"]
    fits = not disk_problems({live: {"free": free, "need": need, "dirs": [live]}})
    return Revision(live, checkpoint_generation(live, manifest) if allow_beside and fits else live, need)


def revision_anywhere(targets: list, checkpoints: list) -> bool:
    """Whether any of ``targets`` gets a new checkpoint revision while it serves (the fan-out
    then stays off: such a node fetches only what changed, itself). A target whose settings
    or facts cannot be read counts as not: its own steps say why.

    + checkpoints: ``(RepoPin, token_file, dest_key)`` (``model_dir`` or ``draft_dir``)
    """
    for node in targets:
        for pin, token_file, dest_key in checkpoints:
            try:
                live = node.data.get(dest_key)
                if live and new_revision(node, pin, token_file, live, ServerSettings.from_inventory(node.data),
                                         node.data.get("checkpoint_beside", True)):
                    return True
            except Exception as e:  # noqa: BLE001 - each host's own step reports it
                logger.debug(f"whether {node.name} gets a new revision of {pin.repo} in {dest_key}: {e}")
    return False


def linked_from_live(manifest: dict, live_state: dict, states: dict[str, str]) -> dict[str, str]:
    """new path -> live path of the files a revision prepared beside the live one (``states``:
    its own) still lacks and links from the live directory (its facts ``live_state``)."""
    live = live_state["manifest"]
    if not isinstance(live, dict) or manifest_problem(live):
        return {}
    live_states = checkpoint_plan.classify(live, live_state["stats"], live_state["record"])
    return {p: q for p, q in checkpoint_plan.linkable(manifest, live, live_states).items()
            if states.get(p) == checkpoint_plan.MISSING}


@operation(is_idempotent=True)
def revision_seeded(pin: RepoPin, live: str, dest: str, token_file: str | None = None):
    """
    Start a new revision of a checkpoint beside the live one, which a server runs from: the
    manifest written and checked there, then every file both revisions share hard-linked in
    from the live directory with its verified record (``verify_files.py --seed-from``), so
    that ``fetch`` into ``dest`` downloads and hashes only what changed. Never writes in
    ``live``; the new revision becomes live at the node's restart (``rollout.checkpoint_switch``).

    + pin: the Hub repo, revision, endpoint and file patterns
    + live: the checkpoint directory the server runs from
    + dest: the directory beside it (``noderig.rollout.checkpoint_generation``)
    + token_file: a 0600 file with the Hub token (else ``HF_TOKEN``); never sent to the node
    """
    try:
        on_node, manifest, _, states, _, _ = _planned(pin, dest, token_file, None)
    except NoderigError as e:
        yield from fail(host, f"checkpoint {pin.repo} for {host.name}: {e}")
        return
    links = linked_from_live(manifest, host.get_fact(CheckpointState, dest=live), states)
    if not links:
        host.noop(f"{pin.repo}@{manifest['commit'][:12]}: beside {live} in {dest}, nothing more to link from it")
        return
    if first_pass(host):
        shared = sum(f["size"] for f in manifest["files"] if f["path"] in links)
        logger.info(f"[{host.name}] {pin.repo}@{manifest['commit'][:12]} beside {live} in {dest}: {len(links)} of "
                    f"{len(states)} files ({human_size(shared)}) linked from the live revision, the rest fetched")
    manifest_path = f"{dest}/{checkpoint_plan.MANIFEST_FILE}"
    yield from _manifest_written_checked(manifest, dest, manifest_path, on_node)
    yield StringCommand("python3", VERIFY_SCRIPT, QuoteString(manifest_path), QuoteString(dest),
                        "--seed-from", QuoteString(live))


def _resolved(pin: RepoPin, token_file: str | None) -> str | None:
    """The commit a branch or tag points at, asked once per run (None: not plainly answered)."""
    key = ("commit", pin.endpoint, pin.repo, pin.revision)
    with one_at_a_time("manifest", *key):
        if key not in _manifests:
            _manifests[key] = resolve_commit(pin, read_token(token_file))
    return _manifests[key]


def _planned(pin: RepoPin, dest: str, token_file: str | None, only: list[str] | None):
    """From the node's facts: (its manifest file, the manifest to use, every file's state, the
    files not yet verified (within ``only``), the files aria2 holds). NoderigError: no manifest."""
    node = host.get_fact(CheckpointState, dest=dest)
    manifest = manifest_for(pin, token_file, node["manifest"], f"{host.name} in {dest}")
    states = checkpoint_plan.classify(manifest, node["stats"], node["record"])
    todo = {p: s for p, s in states.items() if s != checkpoint_plan.OK and (only is None or p in only)}
    return node["manifest"], manifest, node["stats"], states, todo, node["held"]


@operation(is_idempotent=True)
def download_started(pin: RepoPin, dest: str, token_file: str | None = None, connections: int = 16, jobs: int = 4,
                     only: list[str] | None = None):
    """
    Hand the files the node lacks to aria2 on the node and return at once: the download runs
    (a transient systemd unit) while the deploy's next steps do, and ``fetch`` of the same
    checkpoint re-attaches to it, waits, and verifies. Files of the right size that were never
    hashed wait for ``fetch``: hashing them here would hold up the steps the download hides.

    + pin: the Hub repo, revision (branch, tag or commit sha), endpoint and file patterns
    + dest: checkpoint directory on the node
    + token_file: a 0600 file with the Hub token (else ``HF_TOKEN``); never sent to the node
    + connections: aria2 connections per file
    + jobs: files downloaded at once
    + only: the fan-out's stripe: these files alone (``fetch`` with the same ``only`` follows it)
    """
    try:
        on_node, manifest, _, _, todo, held = _planned(pin, dest, token_file, only)
    except NoderigError as e:
        yield from fail(host, f"checkpoint {pin.repo} for {host.name}: {e}")
        return
    _, to_fetch = checkpoint_plan.split_todo(todo, held)
    to_add = [p for p in to_fetch if p not in (held or ())]
    if not to_add:
        already = f" ({len(to_fetch)} already downloading)" if to_fetch else ""
        host.noop(f"{pin.repo}@{manifest['commit'][:12]}: nothing to start in {dest}{already}")
        return
    if first_pass(host):
        logger.info(f"[{host.name}] {pin.repo}@{manifest['commit'][:12]} in {dest}: starting the download of "
                    f"{checkpoint_plan.describe({p: todo[p] for p in to_add})}")
    yield from _manifest_written_checked(manifest, dest, f"{dest}/{checkpoint_plan.MANIFEST_FILE}", on_node)
    yield from _fetched(manifest, dest, {p: todo[p] for p in to_fetch}, to_fetch, held, read_token(token_file),
                        connections, jobs, follow=False)


@operation(is_idempotent=True)
def fetch(pin: RepoPin, dest: str, token_file: str | None = None, connections: int = 16, jobs: int = 4,
          stripe: list[str] | None = None):
    """
    Download a Hub repo at a pinned commit into ``dest`` on the node with aria2c (run as a
    transient systemd unit, so it outlives the controller), then verify every file against
    the manifest (size and the Hub's sha256 / git blob id). Files verified earlier and
    unchanged since (size and mtime as recorded) are neither hashed nor fetched again; a
    download already running on the node (``download_started``, or a killed run's) is
    re-attached to, not started again.

    + pin: the Hub repo, revision (branch, tag or commit sha), endpoint and file patterns
    + dest: checkpoint directory on the node
    + token_file: a 0600 file with the Hub token (else ``HF_TOKEN``); never sent to the node
    + connections: aria2 connections per file
    + jobs: files downloaded (and hashed) at once
    + stripe: the fan-out (``operations.peers``): these files from the Hub, every other file
      still missing from the peers as soon as one has verified it, the Hub as the fallback; a
      peer whose bytes fail the hash is not used again in this run. The step runs on every
      target at once: each serves the files it verifies while it downloads.
    """
    try:
        on_node, manifest, stats, states, todo, held = _planned(pin, dest, token_file, None)
    except NoderigError as e:
        yield from fail(host, f"checkpoint {pin.repo} for {host.name}: {e}")
        return
    key = fanout.checkpoint_key(manifest["repo"], manifest["commit"])
    if not todo and on_node == manifest:
        _done_with_stripe(stripe, key)
        host.noop(f"{pin.repo}@{manifest['commit'][:12]}: {len(states)} files verified in {dest}")
        return

    if first_pass(host):
        what = (checkpoint_plan.describe(todo)
                or f"every file verified, {checkpoint_plan.manifest_changes(on_node, manifest)}")
        logger.info(f"[{host.name}] {pin.repo}@{manifest['commit'][:12]} in {dest}: {what}; "
                    f"{checkpoint_plan.bytes_to_fetch(manifest, states, stats) / 2**20:.1f} MiB to fetch")
    if stripe is not None:
        yield FunctionCommand(_fanout_working, (key,), {})
    manifest_path = f"{dest}/{checkpoint_plan.MANIFEST_FILE}"
    yield from _manifest_written_checked(manifest, dest, manifest_path, on_node)

    # Files of the right size are hashed first (those that fail join the fetch list), but
    # never one aria2 holds: it may be writing it (``checkpoint_plan.split_todo``).
    to_hash, fetch_list = checkpoint_plan.split_todo(todo, held)
    if to_hash:
        yield FunctionCommand(_verify, (manifest_path, dest, jobs, fetch_list), {"within": to_hash})
    if fetch_list:
        yield from _fetched(manifest, dest, todo, fetch_list, held, read_token(token_file), connections, jobs,
                            stripe=stripe)
    checked = sum(f["size"] for f in manifest["files"] if f["path"] in todo)
    yield FunctionCommand(_verify, (manifest_path, dest, jobs, None), {"checked_bytes": checked})
    if stripe is not None:
        yield FunctionCommand(_fanout_done, (key, dest), {})


def _fanout_working(state, host, key: str) -> bool:
    from . import peers

    return peers.working(state, host, key)


def _fanout_done(state, host, key: str, dest: str) -> bool:
    """Every file of ``dest`` verified: all of them served to the peers still fetching."""
    from . import peers

    peers.publish(host, key, dest)
    peers.settle(host.name, key)
    return True


def _done_with_stripe(stripe: list[str] | None, key: str) -> None:
    """A node with nothing to fetch in the fan-out: no peer waits on it (what it holds, it
    serves since its server started)."""
    from . import peers

    if stripe is not None:
        peers.settle(host.name, key)


# The node-side scripts: where each goes, its mode (the verifier loads the path check from
# beside itself).
NODE_SCRIPTS = {HUBPATH_SCRIPT: ("hubpath.py", "644"), VERIFY_SCRIPT: ("verify_files.py", "755")}
# Each regular file's mode and sha256 ("644 <digest>  -  <path>"); nothing for one absent.
SCRIPT_STATES = 'for p; do [ -f "$p" ] && echo "$(stat -c %a "$p") $(sha256sum < "$p")  $p"; done; true'


def node_scripts_put():
    """The node-side verifier and the path check, as this controller has them, once per run
    per host: the checkpoint's steps and the fan-out's server each need them, seconds apart,
    on the download's critical path."""
    if not earlier_in_run(host, "node scripts"):
        yield FunctionCommand(_node_scripts_current, (), {})


def _node_scripts_current(state, host) -> bool:
    """Read every script's digest and mode in one round trip; replace (atomically) those
    that differ from this controller's."""
    ok, out = host.run_shell_command(StringCommand("sh", "-c", QuoteString(SCRIPT_STATES), "noderig-scripts",
                                                   *NODE_SCRIPTS))
    have = {}
    for line in out.stdout_lines if ok else ():
        fields = line.split()  # mode, digest, "-", path
        if len(fields) == 4:
            have[fields[3]] = (fields[0], fields[1])
    for path, (name, mode) in NODE_SCRIPTS.items():
        local = script_path(name)
        if have.get(path) == (mode, hashlib.sha256(local.read_bytes()).hexdigest()):
            continue
        if not put_atomic(host, path, str(local), mode):
            host.log_styled(f"could not install {path} on {host.name}; nothing more ran there: check the node's "
                            f"disk and permissions under {posixpath.dirname(path)}, then rerun", fg="red",
                            log_func=logger.error)
            return False
    return True


def _manifest_written_checked(manifest: dict, dest: str, manifest_path: str, on_node=None):
    """The node-side scripts uploaded, then the manifest, each write after the node's own
    path check: it checks what the controller checked, and what only it can see (symlinks),
    the state directory before the manifest goes there, every listed path after. A manifest
    the node holds already (``on_node``, its fact) is not written again, only checked."""
    yield from node_scripts_put()
    if on_node != manifest:
        yield FunctionCommand(_check_paths, ("-", dest), {})
        yield from files.put._inner(src=io.StringIO(checkpoint_plan.manifest_text(manifest)), dest=manifest_path)
    yield FunctionCommand(_check_paths, (manifest_path, dest), {})


def _fetched(manifest: dict, dest: str, todo: dict, fetch_list: list, held: list[str] | None, token: str | None,
             connections: int, jobs: int, stripe: list[str] | None = None, follow: bool = True):
    """The commands that fetch ``fetch_list`` (which ``_verify`` may still extend while the
    commands run): files not worth resuming deleted, a gated repo's small files through the
    controller, the rest by aria2 on the node, followed to the end, or (``follow=False``)
    only handed to it; the verified record forgets them all first. With the fan-out's
    ``stripe``, the files outside it come from peers: their Hub URLs are resolved only if a
    peer cannot serve one."""
    lfs = {f["path"] for f in manifest["files"] if "sha256" in f}
    # Small git files of a gated repo are served only with the token, which must not
    # reach the node: the controller fetches those (kilobytes) and uploads them.
    via_controller = sorted(p for p in fetch_list if p not in lfs and token and manifest.get("gated"))
    try:  # an LFS file's signed CDN URL is resolved here, with the token, which never reaches aria2 or the node;
        # before any command, so a Hub that fails it changes nothing
        entries = [(download_url(manifest, path, token) if stripe is None or path in stripe else None, path)
                   for path in sorted(set(fetch_list) - set(via_controller))]
    except NoderigError as e:
        yield from fail(host, f"checkpoint {manifest['repo']} for {host.name}: {e}")
        return
    yield mark_changing("checkpoint")
    for path in checkpoint_plan.starts_over(todo, lfs, held):
        yield StringCommand("rm", "-f", QuoteString(f"{dest}/{path}"))
    for path in via_controller:
        yield FunctionCommand(_upload_small_file, (manifest, path, dest, token), {})
    # What is about to be replaced is no longer verified, whatever happens next.
    yield StringCommand("python3", "-c", QuoteString(FORGET), QuoteString(f"{dest}/{checkpoint_plan.RECORD_FILE}"),
                        *(QuoteString(p) for p in sorted(fetch_list)))
    if entries:
        allocation = "falloc" if host.get_fact(FsType, path=dest) in FALLOC_FILESYSTEMS else "none"
        args = (manifest, dest, entries, token, connections, jobs, allocation)
        if not follow:
            yield FunctionCommand(_download_started, args, {})
        elif stripe is not None:
            yield FunctionCommand(_download_from_peers, (*args, stripe), {})
        else:
            yield FunctionCommand(_download, args, {})


def verifier_command(manifest_path: str, dest: str, *, jobs: int | None = None,
                     check_paths: bool = False) -> StringCommand:
    """The node-side verifier's command line (``verify_files.py``'s usage), every path quoted:
    the one way the deploy runs it (the checkpoint step, its background hashing, repairs).

    + manifest_path: the manifest on the node, or ``-`` for none (structure only)
    + dest: the checkpoint directory on the node
    + jobs: files hashed at once (default: the verifier's own, min(8, CPUs))
    + check_paths: only check that the deploy may write there (``--check-paths``)
    """
    options = (["--jobs", str(jobs)] if jobs is not None else []) + (["--check-paths"] if check_paths else [])
    return StringCommand("python3", VERIFY_SCRIPT, QuoteString(manifest_path), QuoteString(dest), *options)


def _check_paths(state, host, manifest_path: str, dest: str) -> bool:
    """The node-side path check (verify_files.py --check-paths): fails the host, naming each
    path that would be written through a symlink or outside ``dest``; writes nothing."""
    ok, output = host.run_shell_command(verifier_command(manifest_path, dest, check_paths=True))
    try:
        report = json.loads(output.stdout_lines[-1])
    except (IndexError, ValueError):
        report = {"ok": False, "problems": [{"file": "", "problem": f"the check did not run: {output.stderr}"}]}
    for p in report.get("problems", []) if not report.get("ok") else []:
        host.log_styled(f"refusing to write {describe(dest + '/' + p['file'])} on {host.name}: {p['problem']}; nothing "
                        f"more was written there: remove it and rerun", fg="red", log_func=logger.error)
    return bool(report.get("ok"))


def _verify(state, host, manifest_path: str, dest: str, jobs: int, failed_into: list | None,
            checked_bytes: int | None = None, within: list[str] | None = None) -> bool:
    """Run the node-side verifier; report each bad file by name. With ``failed_into``, files
    that fail their hash are deleted and added to that list (to be fetched again). With
    ``within`` (the fan-out's phase 1), only those files count: the others are not here yet."""
    ok, output = host.run_shell_command(verifier_command(manifest_path, dest, jobs=jobs))
    try:
        report = json.loads(output.stdout_lines[-1])
    except (IndexError, ValueError):
        host.log_styled(f"checkpoint verification did not run in {dest}: {output.stderr}", fg="red", log_func=logger.error)
        return False
    bad = [f for f in report["files"] if f["status"] != verify_files.OK and (within is None or f["file"] in within)]
    if within is not None:
        report = {**report, "ok": not bad, "index": []}  # index coverage waits for the other files
    if failed_into is not None and not any(f["status"] == verify_files.SYMLINK for f in bad):
        for f in bad:
            if f["status"] in REFETCH_FROM_SCRATCH:  # wrong bytes where they should be right: start over
                host.run_shell_command(StringCommand("rm", "-f", QuoteString(f"{dest}/{f['file']}")))
                logger.info(f"[{host.name}] {f['file']}: {f['status']} ({f['detail']}); fetching it again")
            if f["file"] not in failed_into:
                failed_into.append(f["file"])
        return True
    for f in bad:
        host.log_styled(f"{dest}/{f['file']}: {f['status']} ({f['detail']})", fg="red", log_func=logger.error)
    for problem in report.get("index", []):
        host.log_styled(f"{dest}: {problem['problem']} ({problem['detail']})", fg="red", log_func=logger.error)
    if report.get("error"):
        host.log_styled(f"{dest}: the verifier could not run: {report['error']}", fg="red", log_func=logger.error)
    if not bad:
        # Files were hashed as aria2 finished them and in this last pass: the run's figure is
        # every byte that was not already verified when it started.
        checked = report["hashed_bytes"] if checked_bytes is None else checked_bytes
        logger.info(f"[{host.name}] {len(report['files'])} files verified in {dest} "
                    f"({human_size(checked)} checked in this run)")
    return report["ok"]


def _upload_small_file(state, host, manifest: dict, path: str, dest: str, token: str) -> bool:
    """A gated repo's small git file, fetched on the controller (bounded: ``manifest.fetch_small``) and uploaded."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = fetch_small(manifest, path, token, tmp)
        except NoderigError as e:
            host.log_styled(f"checkpoint {manifest['repo']} for {host.name}: {e}", fg="red", log_func=logger.error)
            return False
        return host.put_file(local, f"{dest}/{path}")


# Filesystems where aria2's falloc reserves a file's blocks at once (no fragmentation, and
# disk-full shows up at the start, not at 90%).
FALLOC_FILESYSTEMS = {"ext2/ext3", "xfs", "btrfs", "overlayfs", "tmpfs"}


def _running_daemon_secret(host) -> str | None:
    """The RPC secret of the aria2 daemon running on the node, in one round trip; None when
    none runs or its conf holds no secret (a new daemon is started)."""
    ok, out = host.run_shell_command(StringCommand(
        "systemctl", "is-active", f"{aria2.SERVICE}.service", ">/dev/null", "&&", "cat", aria2.CONF))
    for line in out.stdout_lines if ok else ():
        if line.startswith("rpc-secret="):
            return line.split("=", 1)[1].strip() or None
    return None


def _ensure_daemon(host) -> str:
    """aria2c as a transient unit on the node, RPC on loopback with a secret kept in a 0600
    file: the download outlives the controller, and a rerun re-attaches to it."""
    unit = f"{aria2.SERVICE}.service"
    secret = _running_daemon_secret(host)
    if secret:
        return secret
    secret = secrets.token_hex(24)
    # Create the file 0600 first: the secret never sits in a world-readable file.
    host.run_shell_command(StringCommand("install", "-d", "-m", "700", posixpath.dirname(aria2.CONF), "&&",
                                         "install", "-m", "600", "/dev/null", aria2.CONF))
    if not host.put_file(io.StringIO(aria2.daemon_conf(secret)), aria2.CONF):
        raise aria2.DownloadError(f"could not write {aria2.CONF}")
    ok, out = host.run_shell_command(StringCommand(
        # an earlier run's daemon may still be exiting: wait for it, then start afresh
        "systemctl", "stop", unit, "2>/dev/null", ";", "systemctl", "reset-failed", unit, "2>/dev/null", ";",
        # (SIGKILL is how an idle daemon is stopped: _stop_daemon)
        "systemd-run", "--quiet", f"--unit={aria2.SERVICE}", "--property=Type=exec",
        "--property=SuccessExitStatus=SIGKILL", "aria2c", f"--conf-path={aria2.CONF}"))
    if not ok:
        raise aria2.DownloadError(f"could not start aria2c on the node: {out.stderr}")
    return secret


class _BackgroundVerify:
    """Hash files while the rest still download: the node-side verifier skips files with a
    live control file and those already in the record, so each run hashes only what aria2
    finished since the last one. One run at a time; a kick during a run gets one more run after
    it (a file finished meanwhile is hashed, and ``after`` sees it, without waiting for the
    final verification). ``after`` runs after each run (the fan-out publishes the new files)."""

    def __init__(self, host, manifest_path: str, dest: str, jobs: int, after=lambda: None):
        self.host, self.command = host, verifier_command(manifest_path, dest, jobs=jobs)
        self.after, self.running, self.again = after, None, False

    def kick(self) -> None:
        self.again = True
        if self.running is None or not self.running.is_alive():
            self.running = threading.Thread(target=self._runs, daemon=True)
            self.running.start()

    def _runs(self) -> None:
        while self.again:
            self.again = False
            self.host.run_shell_command(self.command)
            self.after()

    def wait(self) -> None:
        if self.running is not None:
            self.running.join()

    def now(self) -> None:
        """One run at once, after any in progress: every file complete by now is hashed."""
        self.wait()
        self.again = True
        self._runs()


def _hub_url(manifest: dict, dest: str, path: str, token) -> str:
    """Where aria2 fetches ``path`` from the Hub, resolved now (a signed URL expires);
    DownloadError when the Hub does not answer."""
    try:
        return download_url(manifest, path, token)
    except Exception as e:  # an HTTP error names the URL: never shown with its query string
        raise aria2.DownloadError(f"cannot resolve {dest}/{path} on {manifest['endpoint']}: {redact(str(e))}")


def _session(host, manifest: dict, dest: str, token, connections: int, allocation: str, port: int, secret: str,
             scrub=lambda text: text) -> aria2.Session:
    """The controller's hold on the node's aria2 daemon for ``manifest``'s files in ``dest``."""

    def discard(path: str) -> None:
        host.run_shell_command(StringCommand("rm", "-f", QuoteString(f"{dest}/{path}"),
                                             QuoteString(f"{dest}/{path}.aria2")))

    return aria2.Session(
        aria2.connect(port, secret, where=host.name), dest, resolve=lambda path: _hub_url(manifest, dest, path, token),
        discard=discard,
        options=lambda path, url: aria2.file_options(manifest, dest, path, url, token, connections, allocation),
        say=lambda line: logger.info(scrub(line)), label=f"[{host.name}] {manifest['repo']}")


def _download_started(state, host, manifest: dict, dest: str, entries: list, token, connections: int, jobs: int,
                      allocation: str) -> bool:
    """Hand ``entries`` to aria2 on the node (started if need be) and return: the daemon goes
    on downloading while the deploy's other steps run; ``_download`` later follows it."""
    try:
        secret = _ensure_daemon(host)
        with LoopbackForward(host, aria2.RPC_PORT) as fwd:
            _session(host, manifest, dest, token, connections, allocation, fwd.port, secret).attach(entries, jobs)
    except aria2.DownloadError as e:
        host.log_styled(redact(str(e)), fg="red", log_func=logger.error)
        return False
    logger.info(f"[{host.name}] {manifest['repo']}: {len(entries)} file(s) downloading on the node while the next "
                "steps run")
    return True


def _download(state, host, manifest: dict, dest: str, entries: list, token, connections: int, jobs: int,
              allocation: str, scrub=lambda text: text, fell_back: list | None = None, feed=None) -> bool:
    """Drive aria2 on the node over RPC (through the SSH connection) until every file is
    complete, showing progress and hashing files as they finish; re-resolve signed URLs that
    expired (``aria2.Session``); stop the daemon at the end unless it still downloads another
    checkpoint's files. ``scrub`` hides what a line must not show (the fan-out's secret paths);
    ``fell_back`` collects the files the peers failed; ``feed`` (``_PeerFeed``) adds the
    fan-out's files as peers verify them, and publishes this node's as it hashes them."""
    try:
        secret = _ensure_daemon(host)
        with LoopbackForward(host, aria2.RPC_PORT) as fwd:
            session = _session(host, manifest, dest, token, connections, allocation, fwd.port, secret, scrub)
            session.attach(entries, jobs)
            background = _BackgroundVerify(host, f"{dest}/{checkpoint_plan.MANIFEST_FILE}", dest, jobs,
                                           after=feed.publish if feed else lambda: None)
            session.follow({f["path"]: f["size"] for f in manifest["files"]}, on_file_done=background.kick,
                           feed=feed and (lambda snap: feed(snap, background)), jobs=jobs)
            background.wait()
            busy = session.busy_elsewhere()
            session.close()
            if fell_back is not None:
                fell_back.extend(session.fell_back)
    except aria2.DownloadError as e:
        host.log_styled(scrub(redact(str(e))), fg="red", log_func=logger.error)
        _stop_daemon(host)
        return False
    if not busy:
        _stop_daemon(host, idle=True)
    return True


# Rounds of a fan-out download: a file whose bytes fail the hash is fetched again without the
# peer that served them (then from another peer or the Hub).
PEER_ROUNDS = 3
# Hashes what a peer serves for one file, streamed, the way the verifier does (LFS sha256, or
# the git blob id); the URL (it holds the run's secret path) is read from a 0600 file.
PROBE = (
    "import hashlib, sys, urllib.request\n"
    "url = open(sys.argv[1]).read().strip()\n"
    "h = hashlib.sha256() if sys.argv[2] == 'sha256' else hashlib.sha1(b'blob %d\\0' % int(sys.argv[3]))\n"
    "with urllib.request.urlopen(url, timeout=60) as r:\n"
    "    for block in iter(lambda: r.read(1 << 20), b''):\n"
    "        h.update(block)\n"
    "print(h.hexdigest())\n"
)
PROBE_URL_FILE = "/run/noderig-probe.url"


def _download_from_peers(state, host, manifest: dict, dest: str, entries: list, token, connections: int, jobs: int,
                         allocation: str, stripe: list[str]) -> bool:
    """The fan-out's download: this node's ``stripe`` from the Hub and, while it downloads,
    every other file from the peers as soon as one has verified it (aria2 spreads its
    connections over them; ``_PeerFeed``), from the Hub when no peer can serve it. The
    receiver hashes every file: a file whose bytes are wrong is traced to the peer that
    served them (its bytes hashed again, on this node), that peer is not used again in this
    run, and the file is fetched once more from the other sources."""
    from . import peers  # the fan-out's registry (operations.peers imports this module)

    key = fanout.checkpoint_key(manifest["repo"], manifest["commit"])
    entry_of = {f["path"]: f for f in manifest["files"]}
    urls = dict((path, url) for url, path in entries)  # None: a peer's file (its Hub URL only if needed)
    from_peers = sorted(p for p in urls if p not in stripe)
    paths, fell_back, sourced = sorted(urls), [], {}
    for round_ in range(PEER_ROUNDS):
        feed = _PeerFeed(host, key, dest, from_peers, entry_of, connections,
                         lambda p: urls[p] or _hub_url(manifest, dest, p, token)) if round_ == 0 else None
        try:
            todo = [(urls[p], p) for p in paths if p not in from_peers] if feed else \
                _peer_round(host, manifest, dest, token, key, paths, entry_of, connections, sourced, urls)
            ok = _download(state, host, manifest, dest, todo, token, connections, jobs, allocation, peers.scrub,
                           fell_back, feed)
        except aria2.DownloadError as e:
            host.log_styled(peers.scrub(str(e)), fg="red", log_func=logger.error)
            ok = False
        finally:
            peers.settle(host.name, key)
        sourced.update(feed.sourced if feed else {})
        bad: list[str] = []
        if not ok or not _verify(state, host, f"{dest}/{checkpoint_plan.MANIFEST_FILE}", dest, jobs, bad, within=paths):
            return False
        if not bad:
            _tell_sources(host, manifest, from_peers, sourced, fell_back)
            return True
        for path in bad:
            _blame(host, entry_of[path], sourced.get(path, []), peers)
        paths = bad
    host.log_styled(f"{dest}: {', '.join(paths)} still fail their hash after {PEER_ROUNDS} rounds from peers and "
                    "the Hub", fg="red", log_func=logger.error)
    return False


def _peer_round(host, manifest: dict, dest: str, token, key: str, paths: list[str], entry_of: dict, connections: int,
                sourced: dict, urls: dict) -> list:
    """Another round's sources for ``paths`` (files that failed their hash): the peers serving
    them now (an excluded one no longer is), else the Hub; ``sourced`` told which."""
    from . import peers

    out = []
    for path in paths:
        digest = checkpoint_plan.expected_digest(entry_of[path])
        sourced[path] = peers.sources(host.name, key, digest)
        out.append((fanout.uris(sourced[path], None, connections) if sourced[path]
                    else urls[path] or _hub_url(manifest, dest, path, token), path))
    return out


# How long a receiver waits for a peer's fan-out download to begin before it takes that peer's
# files from the Hub: every target's greenlet starts the step at once in a parallel run, so this
# is only ever reached when the run is not (``--serial``, a ``--parallel`` below the fleet).
PEER_START_WAIT = 30.0


class _PeerFeed:
    """``aria2.Session.follow``'s feed in the fan-out: each poll, the files of ``wanted`` that
    some peer now serves verified are added (peer URLs only; the Hub takes over a file only when
    aria2 gives up on every peer: measured on the lab, with the Hub last behind 16 peer URIs aria2
    still took a segment of most files from it); a file no peer may still serve (its owner
    failed, was excluded, or is done with its stripe without it) is added from the Hub. Once
    this node's own files are complete, they are hashed and published, and the node is done with
    its stripe (``operations.peers.settle``): no peer waits on it for more."""

    def __init__(self, host, key: str, dest: str, wanted: list[str], entry_of: dict, connections: int, hub_url):
        self.host, self.key, self.dest, self.connections, self.hub_url = host, key, dest, connections, hub_url
        self.digests = {p: checkpoint_plan.expected_digest(entry_of[p]) for p in wanted}
        self.waiting, self.sourced, self.own_done = list(wanted), {}, False
        self.began = time.monotonic()

    def __call__(self, snap: dict, background: _BackgroundVerify) -> tuple[list, int]:
        from . import peers

        if not self.own_done and all(d["status"] == "complete" for p, d in snap.items() if p not in self.digests):
            background.now()  # hashed, and what passed published
            peers.settle(self.host.name, self.key)
            self.own_done = True
        ready = []
        for path in self.waiting:
            urls = peers.sources(self.host.name, self.key, self.digests[path])
            if urls:
                ready.append((fanout.uris(urls, None, self.connections), path))
            elif not peers.may_still_serve(self.host, self.key, path, time.monotonic() - self.began < PEER_START_WAIT):
                ready.append((self.hub_url(path), path))
            else:
                continue
            self.sourced[path] = urls
        self.waiting = [p for p in self.waiting if p not in self.sourced]
        return ready, len(self.waiting)

    def publish(self) -> None:
        from . import peers

        peers.publish(self.host, self.key, self.dest)


def _blame(host, entry: dict, urls: list[str], peers) -> None:
    """Hash what each peer serves for ``entry`` on this node; a peer whose bytes differ from
    the Hub's digest is excluded from this run."""
    kind = "sha256" if entry.get("sha256") else "git"
    for url in urls:
        name = peers.server_of(url)
        if name is None or name in peers.EXCLUDED:
            continue
        host.run_shell_command(StringCommand("install", "-m", "600", "/dev/null", PROBE_URL_FILE))
        host.put_file(io.StringIO(url), PROBE_URL_FILE)
        ok, out = host.run_shell_command(StringCommand(
            "python3", "-c", QuoteString(PROBE), PROBE_URL_FILE, kind, str(int(entry["size"])), ";",
            "rm", "-f", PROBE_URL_FILE))
        got = out.stdout_lines[-1].strip() if ok and out.stdout_lines else None
        if got != checkpoint_plan.expected_digest(entry):
            peers.exclude(name, f"it served {entry['path']} with the wrong bytes "
                                f"(sha256 {got[:12] + '...' if got else 'unreadable'}, the Hub's "
                                f"{checkpoint_plan.expected_digest(entry)[:12]}...)")


def _tell_sources(host, manifest: dict, hub: list[str], sourced: dict, fell_back: list) -> None:
    """Where this node's files meant to come from peers came from, for the log and the summary."""
    from . import summary

    sizes = {f["path"]: f["size"] for f in manifest["files"]}
    from_peers = [p for p in hub if sourced.get(p) and p not in fell_back]
    from_hub = [p for p in hub if p not in from_peers]
    line = (f"fan-out: {host.name} took {human_size(sum(sizes[p] for p in from_peers))} of {manifest['repo']} "
            f"from peers ({len(from_peers)} files)"
            + (f", {human_size(sum(sizes[p] for p in from_hub))} from the Hub ({len(from_hub)} files: "
               "no peer could serve them)" if from_hub else ""))
    logger.info(f"[{host.name}] {line}")
    summary.note(line)


def _stop_daemon(host, idle: bool = False) -> None:
    """Stop aria2. With downloads left (``idle`` False): SIGTERM, so it writes its control files
    and partial files resume next time; it takes about a second to exit (its event loop's
    tick), nothing waits for it here, the next start does. ``idle``: every download it had is
    complete, so it has nothing to write; SIGKILL ends it at once (a clean exit for its unit,
    ``_ensure_daemon``), and the next start does not wait that second (measured on the lab:
    1.0 s for SIGTERM, 16 ms for SIGKILL and the unit gone)."""
    unit = f"{aria2.SERVICE}.service"
    if idle:
        # (reset-failed: a daemon an older noderig started counts SIGKILL as a failure)
        host.run_shell_command(StringCommand("systemctl", "kill", "--signal=SIGKILL", unit, "2>/dev/null", ";",
                                             "systemctl", "stop", unit, "2>/dev/null", ";",
                                             "systemctl", "reset-failed", unit, "2>/dev/null", ";", "true"))
        return
    host.run_shell_command(StringCommand("systemctl", "stop", "--no-block", unit, "||", "true"))
