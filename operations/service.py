"""Step 5, service: the SGLang unit and its 0600 environment file, validated, installed, running."""

from __future__ import annotations

import difflib
import hashlib
import io
import json
from pathlib import Path

from pyinfra import host, logger
from pyinfra.api.command import FileUploadCommand, QuoteString, StringCommand

from noderig.errors import NoderigError
from noderig.flags import ServerFlags, parse_help
from noderig.secret_files import read_private
from noderig.node import script_path
from noderig.rollout import generations
from noderig.service_plan import marker, plan_service
from noderig.server_settings import ServerSettings, validate
from noderig.unit import LAUNCHER_PATH, check_against_server, help_command, render_env, render_unit

from . import checkpoint, rollout
from .facts import (DistributionsDigest, FileMode, FileText, Mtimes, ServerVersion, Sha256, SystemUser, UnitStatus,
                    Unreadable)
from .util import atomic_write, controller_cache, decided, fail, first_pass, operation, refused


def unit_path(service: str) -> str:
    return f"/etc/systemd/system/{service}.service"


def _help_cache(digest: str) -> Path:
    return controller_cache("server-help") / f"{digest}.json"


def server_flags_of(venv_host, venv: str, settings: ServerSettings) -> ServerFlags | None:
    """The flags the SGLang in ``venv`` on ``venv_host`` accepts, from its ``--help``: asked once
    per venv content (keyed by its installed distributions) and kept on the controller, since
    the real server's --help imports torch and takes seconds."""
    digest = venv_host.get_fact(DistributionsDigest, venv=venv)
    if digest is None:
        return None
    cache = _help_cache(digest)
    if cache.exists():
        return ServerFlags.from_json(json.loads(cache.read_text()))
    ok, out = venv_host.run_shell_command(StringCommand(*(QuoteString(a) for a in help_command(settings))))
    if not ok:
        return None
    version = venv_host.get_fact(ServerVersion, venv=venv)
    flags = parse_help("\n".join(out.stdout_lines), venv=venv, version=version)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(flags.to_json()))
    return flags


@operation(is_idempotent=True)
def check_flags(settings: ServerSettings, reference=None, api_key: bool = False):
    """
    Refuse, before the unit is touched, inventory values that are invalid and flags the
    installed SGLang does not know (a renamed flag is caught here, not after a long start).
    The venv's ``--help`` is read on the node, or on the reference when the node has no venv yet
    (the node's will be its copy).

    + settings: the server settings from the inventory
    + reference: the reference host, whose venv the node's copies
    + api_key: an API key will be passed (so ``--api-key`` must exist too)
    """
    problems = validate(settings)
    if not problems:
        source = host if host.get_fact(DistributionsDigest, venv=settings.venv) else reference
        flags = server_flags_of(source, settings.venv, settings) if source is not None else None
        if flags is None:
            problems = [f"cannot read the server's flags: `{' '.join(help_command(settings))}` failed on "
                        f"{getattr(source, 'name', host.name)}"]
        else:
            problems = check_against_server(settings, flags, api_key=api_key)
    if problems:
        yield from fail(host, f"server flags for {host.name}: " + " ".join(problems))
    else:
        host.noop("every server flag is valid and known to the installed SGLang")


@operation(is_idempotent=True)
def text_file(path: str, text: str, mode: str = "644", secret: bool = False):
    """
    A text file with exactly ``text``, replaced atomically (written beside it, then renamed):
    an interrupted deploy never leaves half a file in place. With ``--diff`` the change is
    shown as a unified diff, except for a ``secret`` file (contents never shown).

    + path: the file on the node
    + text: its whole desired content
    + mode: octal permissions, set before any content is written
    + secret: the file holds secrets: compare by hash, show nothing
    """
    want = hashlib.sha256(text.encode()).hexdigest()
    have = host.get_fact(Sha256, path=path)
    mode_now = host.get_fact(FileMode, path=path)
    if have == want and mode_now == mode:
        host.noop(f"{path} is up to date")
        return
    if first_pass(host):
        if secret:
            logger.info(f"[{host.name}] {path}: will be {'replaced' if have else 'created'} (contents not shown)")
        elif host.state.config.DIFF:
            old = host.get_fact(FileText, path=path) or ""
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), f"{path} (node)", f"{path} (deploy)",
                                        lineterm="")
            logger.info(f"[{host.name}] {path}:\n" + "\n".join(diff))
    tmp, prepare, finish = atomic_write(path, mode)
    yield prepare
    yield FileUploadCommand(io.StringIO(text), tmp)
    yield finish


@operation(is_idempotent=True)
def running(service: str, inputs: dict, changing: dict | None = None):
    """
    The service running the current unit, environment, launcher, venv and checkpoint, and
    enabled at boot. Started when it is not running; restarted when something it runs changed
    in this run or since its main process started (a deploy killed between writing the unit
    and restarting leaves exactly that); systemd re-reads the unit first when it is stale.
    Says which, and why, in a dry run too.

    + service: the systemd service name (without ``.service``)
    + inputs: what the server runs, label -> path on the node (``unit``, ``environment`` ...)
    + changing: label -> the operations of this deploy that install that input
    """
    unit = f"{service}.service"
    status = host.get_fact(UnitStatus, unit=unit)
    mtimes = host.get_fact(Mtimes, paths=tuple(inputs.values()))
    now_changing = [label for label, ops in (changing or {}).items()
                    if any(op is not None and _changes(op) for op in ops)]
    plan = plan_service(status, mtimes, inputs, now_changing)
    if not plan.changes:
        host.noop(f"{service}: {plan.reason}")
        return
    if first_pass(host):
        steps = [f"{plan.action} ({plan.reason})" if plan.action != "none" else None,
                 "reload systemd (the unit changed)" if plan.reload else None,
                 "enable it at boot" if plan.enable else None]
        logger.info(f"[{host.name}] {service}: " + "; ".join(s for s in steps if s))
    if plan.reload:
        yield "systemctl daemon-reload"
    if plan.action == "start":
        yield StringCommand("systemctl", "reset-failed", QuoteString(unit), "2>/dev/null", ";",
                            "systemctl", "start", QuoteString(unit))
    elif plan.action == "restart":
        yield StringCommand("systemctl", "restart", QuoteString(unit))
    if plan.enable:
        yield StringCommand("systemctl", "enable", QuoteString(unit))


@operation(is_idempotent=True)
def system_user(user: str, home: str):
    """
    The dedicated system user the server runs as: created once (no login shell, no password,
    its home the unit's state directory, which systemd makes), left as it is when present.
    A user of that name with uid 0 is refused.

    + user: the user name (``service_user``)
    + home: its home directory (the unit's StateDirectory)
    """
    found = host.get_fact(SystemUser, user=user)
    if found and found["uid"] == 0:
        yield from fail(host, f"service_user={user!r} on {host.name} has uid 0 (root): the server must not run as "
                              "root; choose another name and the deploy creates it")
    elif found:
        host.noop(f"system user {user} exists (uid {found['uid']})")
    else:
        yield StringCommand("useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                            QuoteString(home), "--shell", "/usr/sbin/nologin", "--comment",
                            QuoteString("SGLang server (noderig)"), QuoteString(user))


# Runs on the node: make every directory above and under the paths o+x / o+rx and every file
# o+r, so the server's own user reads them; owners are never changed.
READABLE_SCRIPT = r"""
for p in "$@"; do
  [ -e "$p" ] || continue
  d=$(dirname "$p"); while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
  find -H "$p" \( \( -type d ! -perm -o+rx \) -o \( -type f ! -perm -o+r \) \) -exec chmod o+rX {} +
done
"""


@operation(is_idempotent=True)
def readable(paths: list[str], changing: list | None = None):
    """
    The venv and checkpoints readable by the server's user (world-readable; owners are never
    changed). Checked again whenever this deploy writes them.

    + paths: the venv and checkpoint directories
    + changing: this deploy's operations that write into them
    """
    unreadable = host.get_fact(Unreadable, paths=tuple(paths))
    writing = any(op is not None and _changes(op) for op in changing or ())
    if not unreadable and not writing:
        host.noop(f"{', '.join(paths)} readable by the server's user")
        return
    if unreadable and first_pass(host):
        logger.info(f"[{host.name}] not readable by the server's user, made world-readable: {', '.join(unreadable)}")
    yield StringCommand("sh", "-c", QuoteString(READABLE_SCRIPT), "noderig-readable", *(QuoteString(p) for p in paths))


def _changes(op) -> bool:
    """Whether an operation of this deploy changes (or, not yet run, would change) the host."""
    return op.did_change() if op.is_complete() else op.will_change


def install(settings: ServerSettings, api_key_file: str | None, reference, venv=None, checkpoints=(), ready=None,
            venv_next: str | None = None, checkpoints_next: tuple[tuple[str, str], ...] = (),
            checkpoints_in_batch: tuple[dict, ...] = ()):
    """Validate, then install the launcher, the environment file and the unit, and keep the
    service running what they say (see ``running``) and enabled. A node that serves and must
    restart does its writes and restart in its rollout batch (``operations/rollout.py``).

    + venv: this deploy's venv operation, if it runs
    + checkpoints: this deploy's checkpoint operations
    + ready: the readiness check's arguments (a batch ends with it); None: no rollout
    + venv_next: the venv generation prepared beside the live venv, made live in the node's batch
    + checkpoints_next: (live directory, revision prepared beside it) of each checkpoint whose
      new revision is made live in the node's batch
    + checkpoints_in_batch: ``checkpoint.fetch``'s arguments for each checkpoint whose new
      revision is fetched into the live directory in the node's batch, after its server stopped
    """
    secrets = {}
    try:
        if api_key_file:
            secrets["api_key"] = read_private(api_key_file, "API key")
        env_text = render_env(settings, secrets)
        unit_text = render_unit(settings)
    except NoderigError as e:
        env_text = unit_text = None
        problem = str(e)
    check_flags(name="Server flags valid and known to the installed SGLang", settings=settings,
                reference=reference, api_key=bool(secrets.get("api_key")))
    if unit_text is None:
        refused(name="Server settings", message=f"server settings for {host.name}: {problem}")
        rollout.join(None)
        return None
    # (A host whose flags fail stops there: pyinfra runs nothing more on it.)
    system_user(name=f"System user {settings.user} (the server never runs as root)", user=settings.user,
                home=settings.state_dir)
    readable(name="Venv and checkpoints readable by the server's user",
             paths=[p for d in (settings.venv, settings.model_dir, settings.draft_dir) if d for p in (d, generations(d))],
             changing=[venv, *checkpoints])
    texts = {"launcher": (LAUNCHER_PATH, script_path("launch.py").read_text(), "755"),
             "environment": (settings.env_path, env_text, "600"),
             "unit": (unit_path(settings.service_name), unit_text, "644")}
    # (the rollout's decision reads facts in the deploy file: an error in it fails this host at
    # its service step, and the host still tells the barrier, so the other targets go on)
    entry = decided(f"{settings.service_name} running and enabled", _rollout_entry,
                    settings, texts, venv, checkpoints, ready, venv_next, checkpoints_next, checkpoints_in_batch)
    position = rollout.join(entry)
    unit = None
    for tag in rollout.positions(position):
        in_place = _switched_or_fetched(settings, tag, venv_next, checkpoints_next, checkpoints_in_batch)
        unit = _write_and_run(settings, texts, venv, [*checkpoints, *in_place])
    return unit


def _switched_or_fetched(settings: ServerSettings, tag: str, venv_next: str | None, checkpoints_next,
                         checkpoints_in_batch) -> list:
    """What changes under the server before its restart (each stops it first): the venv and
    checkpoint generations prepared beside the live ones made live, and the checkpoint
    revisions with no room beside fetched in place. Returns those fetch operations."""
    if venv_next:
        rollout.venv_switch(name=f"Venv {settings.venv} switched to its new generation{tag}",
                            service=settings.service_name, live=settings.venv, generation=venv_next)
    for live, generation in checkpoints_next:
        rollout.checkpoint_switch(name=f"Checkpoint {live} switched to its new revision{tag}",
                                  service=settings.service_name, live=live, generation=generation)
    if not checkpoints_in_batch:
        return []
    rollout.server_stopped(name=f"{settings.service_name} stopped for its new checkpoint revision{tag}",
                           service=settings.service_name)
    return [checkpoint.fetch(name=f"Checkpoint {f['pin'].repo} in {f['dest']}{tag}", **f)
            for f in checkpoints_in_batch]


def _rollout_entry(settings: ServerSettings, texts: dict, venv, checkpoints, ready,
                   venv_next: str | None = None, checkpoints_next=(), checkpoints_in_batch=()) -> rollout.Entry | None:
    """What this node tells the rollout: whether it serves and must restart (None without a
    readiness check to gate on)."""
    if ready is None:
        return None
    entry = rollout.restart_reason(settings, texts, {"venv": [venv], "checkpoint": list(checkpoints)})
    if venv_next and entry.restart is None:
        entry.restart = "a new venv is prepared beside the live one"
    if checkpoints_next and entry.restart is None:
        entry.restart = "a new checkpoint revision is prepared beside the live one"
    if checkpoints_in_batch:  # (said even with another reason: the rollback cannot undo it)
        where = " and ".join(f["dest"] for f in checkpoints_in_batch)
        entry.restart = (f"{entry.restart}; " if entry.restart else "") + (
            f"a new checkpoint revision is fetched into {where} in its batch, its server stopped (no room "
            "beside the live one, or checkpoint_beside=False: a rollback cannot bring the old files back)")
    entry.ready, entry.venv_next = ready, venv_next
    links = {"venv": settings.venv, "model_dir": settings.model_dir, "draft_dir": settings.draft_dir}
    entry.snapshot = {"service": settings.service_name, "port": settings.port, "links": links,
                      "files": {label: path for label, (path, _, _) in texts.items()}}
    return entry


def _write_and_run(settings: ServerSettings, texts: dict, venv, checkpoints):
    """The launcher, the environment file and the unit, then the service running them (named
    as outside a rollout: the batch shows in the gates and in the operations around them)."""
    launcher = text_file(name="Server launcher (keeps secrets out of argv and logs)", path=LAUNCHER_PATH,
                         text=texts["launcher"][1], mode="755")
    env = text_file(name="Server environment file (0600)", path=settings.env_path,
                    text=texts["environment"][1], mode="600", secret=True)
    unit = text_file(name=f"{settings.service_name}.service", path=unit_path(settings.service_name),
                     text=texts["unit"][1])
    inputs = {"unit": unit_path(settings.service_name), "environment": settings.env_path, "launcher": LAUNCHER_PATH,
              "venv": marker("venv"), "checkpoint": marker("checkpoint")}
    changing = {"unit": [unit], "environment": [env], "launcher": [launcher], "venv": [venv],
                "checkpoint": list(checkpoints)}
    running(name=f"{settings.service_name} running and enabled",
            service=settings.service_name, inputs=inputs, changing=changing)
    return unit
