"""Step 4, checkpoint: pinned manifest from the Hub, aria2 download on the node, verification."""

from __future__ import annotations

import io
import json
import tempfile

from pyinfra import host, logger
from pyinfra.api import operation
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand
from pyinfra.operations import files

from noderig import checkpoint as plan
from noderig.aria2 import error_lines, explain_exit
from noderig.manifest import RepoPin, build_manifest, read_token, resolve_url, signed_location
from noderig.node import script_path

from .facts import FileStats, JsonFile
from .util import first_pass

VERIFY_SCRIPT = "/usr/local/lib/noderig/verify_files.py"

# One manifest per pin per controller run: the op body runs at prepare and again at execute.
_manifests: dict[tuple, dict] = {}


def manifest_for(pin: RepoPin, token_file: str | None, on_node: dict | None) -> dict:
    """The node's manifest when it already pins this exact commit (no Hub call), else the Hub's."""
    if on_node and on_node.get("repo") == pin.repo and on_node.get("commit") == pin.revision:
        return on_node
    key = (pin.endpoint, pin.repo, pin.revision, pin.patterns)
    if key not in _manifests:
        _manifests[key] = build_manifest(pin, read_token(token_file))
    return _manifests[key]


@operation(is_idempotent=True)
def fetch(repo: str, dest: str, revision: str = "main", endpoint: str = "https://huggingface.co",
          token_file: str | None = None, connections: int = 8, jobs: int = 4):
    """
    Download a Hub repo at a pinned commit into ``dest`` on the node with aria2c (run as a
    transient systemd unit, so it outlives the controller), then verify every file against
    the manifest (size and the Hub's sha256 / git blob id). Files verified earlier and
    unchanged since (size and mtime as recorded) are neither hashed nor fetched again.

    + repo: Hub repo id, e.g. ``moonshotai/Kimi-K2.6``
    + dest: checkpoint directory on the node
    + revision: branch, tag or commit sha to pin
    + endpoint: the Hub's URL
    + token_file: a 0600 file with the Hub token (else ``HF_TOKEN``); never sent to the node
    + connections: aria2 connections per file
    + jobs: files downloaded (and hashed) at once
    """
    on_node = host.get_fact(JsonFile, path=f"{dest}/{plan.MANIFEST_FILE}")
    manifest = manifest_for(RepoPin(repo, revision, endpoint), token_file, on_node)
    stats = host.get_fact(FileStats, root=dest)
    record = host.get_fact(JsonFile, path=f"{dest}/{plan.RECORD_FILE}")
    states = plan.classify(manifest, stats, record)
    todo = {p: s for p, s in states.items() if s != plan.OK}
    if not todo and on_node == manifest:
        host.noop(f"{repo}@{manifest['commit'][:12]}: {len(states)} files verified in {dest}")
        return

    counts = {s: sum(1 for v in todo.values() if v == s) for s in sorted(set(todo.values()))}
    if first_pass(host):
        logger.info(f"[{host.name}] {repo}@{manifest['commit'][:12]} in {dest}: "
                    f"{', '.join(f'{n} {s}' for s, n in counts.items())}; "
                    f"{plan.bytes_to_fetch(manifest, states, stats) / 2**20:.1f} MiB to fetch")
    manifest_path = f"{dest}/{plan.MANIFEST_FILE}"
    yield from files.put._inner(src=io.StringIO(plan.manifest_text(manifest)), dest=manifest_path)
    yield from files.put._inner(src=str(script_path("verify_files.py")), dest=VERIFY_SCRIPT, mode="755")

    # Files of the right size are hashed first; the ones that fail join the fetch list.
    fetch_list = [p for p, s in todo.items() if s in plan.FETCH]
    unverified = [p for p, s in todo.items() if s == plan.UNVERIFIED]
    if unverified:
        yield FunctionCommand(_verify, (manifest_path, dest, jobs, fetch_list, True), {})

    if fetch_list:
        token = read_token(token_file)
        lfs = {f["path"] for f in manifest["files"] if "sha256" in f}
        for path, state in todo.items():
            if state == plan.OVERSIZE:
                yield StringCommand("rm", "-f", QuoteString(f"{dest}/{path}"))
        # Small git files of a gated repo are served only with the token, which must not
        # reach the node: the controller fetches those (kilobytes) and uploads them.
        via_controller = sorted(p for p in fetch_list if p not in lfs and token)
        for path in via_controller:
            yield FunctionCommand(_upload_small_file, (manifest, path, dest, token), {})
        entries = []
        for path in sorted(p for p in fetch_list if p not in via_controller):
            # LFS files redirect to a signed CDN URL: resolve it here, with the token, so the
            # token never reaches aria2 (which would forward it to the CDN) or the node.
            url = signed_location(manifest, path, token) if path in lfs and token else resolve_url(manifest, path)
            entries.append((url, path))
        if entries:
            input_file = f"{dest}/{plan.STATE_DIR}/aria2.input"
            yield from files.put._inner(src=io.StringIO(plan.aria2_input(entries)), dest=input_file, mode="600")
            unit = f"noderig-fetch-{plan.manifest_id(manifest)}"
            yield FunctionCommand(_run_aria2_unit, (unit, StringCommand(
                "systemd-run", "--quiet", "--wait", "--collect", f"--unit={unit}",
                "--property=Type=exec", "aria2c", f"--input-file={input_file}", QuoteString(f"--dir={dest}"),
                f"--max-concurrent-downloads={jobs}", f"--split={connections}",
                f"--max-connection-per-server={connections}", "--min-split-size=1M", "--continue=true",
                "--auto-file-renaming=false", "--allow-overwrite=true", "--file-allocation=none",
                "--max-tries=5", "--retry-wait=2", "--console-log-level=warn", "--summary-interval=0",
                "--download-result=hide",
            ), dest), {})
    yield FunctionCommand(_verify, (manifest_path, dest, jobs, None, False), {})


def _verify(state, host, manifest_path: str, dest: str, jobs: int, failed_into: list | None, tolerate: bool) -> bool:
    """Run the node-side verifier; report each bad file by name. With ``failed_into``, files
    that fail their hash are deleted and added to that list (to be fetched again)."""
    ok, output = host.run_shell_command(StringCommand(
        "python3", VERIFY_SCRIPT, QuoteString(manifest_path), QuoteString(dest), "--jobs", str(jobs)))
    try:
        report = json.loads(output.stdout_lines[-1])
    except (IndexError, ValueError):
        host.log_styled(f"checkpoint verification did not run in {dest}: {output.stderr}", fg="red", log_func=logger.error)
        return False
    bad = [f for f in report["files"] if f["status"] != "ok"]
    if failed_into is not None:
        for f in bad:
            if f["status"] == "sha256_mismatch":  # right size, wrong bytes: start it over
                host.run_shell_command(StringCommand("rm", "-f", QuoteString(f"{dest}/{f['file']}")))
                logger.info(f"[{host.name}] {f['file']}: {f['status']} ({f['detail']}); fetching it again")
            if f["file"] not in failed_into:
                failed_into.append(f["file"])
        return True
    for f in bad:
        host.log_styled(f"{dest}/{f['file']}: {f['status']} ({f['detail']})", fg="red", log_func=logger.error)
    if not bad:
        logger.info(f"[{host.name}] {len(report['files'])} files verified in {dest} "
                    f"({report['hashed_bytes'] / 2**20:.1f} MiB hashed)")
    return report["ok"] or tolerate


def _upload_small_file(state, host, manifest: dict, path: str, dest: str, token: str) -> bool:
    from huggingface_hub import hf_hub_download

    with tempfile.TemporaryDirectory() as tmp:
        local = hf_hub_download(manifest["repo"], path, revision=manifest["commit"], endpoint=manifest["endpoint"],
                                token=token, local_dir=tmp)
        return host.put_file(local, f"{dest}/{path}")


def _run_aria2_unit(state, host, unit: str, command: StringCommand, dest: str) -> bool:
    """Run aria2c as a transient unit (it outlives a dropped controller); on failure, say why
    from aria2's exit status and its own error lines in that unit's journal."""
    host.run_shell_command(StringCommand("systemctl", "reset-failed", QuoteString(f"{unit}.service"), "||", "true"))
    ok, _ = host.run_shell_command(command)
    if ok:
        return True
    _, out = host.run_shell_command(StringCommand(
        "systemctl", "show", "-p", "ExecMainStatus", "--value", QuoteString(f"{unit}.service"), ";",
        "journalctl", "--no-pager", "-o", "cat", "-n", "200", "-u", QuoteString(f"{unit}.service")))
    lines = out.stdout_lines
    code = int(lines[0]) if lines and lines[0].isdigit() else 1
    host.log_styled(f"downloading into {dest} failed: {explain_exit(code)}", fg="red", log_func=logger.error)
    for line in error_lines(lines[1:])[-6:]:
        logger.error(f"    {line}")
    return False
