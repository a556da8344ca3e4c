"""Every inventory value checked before the first change: host data in, one sentence per
problem out (naming the setting, its value and what to do). No I/O here: preflight calls it
with pyinfra's host data and with the node's facts about an existing unit.

The server's settings (ports, parallelism, speculative decoding, flags, the unit name...)
are checked by ``noderig.server_settings.validate``, which this calls, so each rule lives in one place;
this module adds the settings the unit does not use and the rules about *where* things go:

    problems(data)                     -> every problem of a target host's settings
    address_problems(data, name)       -> its ssh_hostname / ssh_port (for any host)
    location_problem(key, path)        -> / or a system directory as model_dir, venv_path...
    unit_owner_problem(name, files)    -> a unit file noderig did not write
    state_dir_problem(name, user, files) -> a /var/lib/<name> that is not the server's
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit

from .copykey import is_ip
from .exposure import ALLOW_SETTING
from .firewall import FirewallSettings
from .firewall import problems as firewall_problems
from .server_settings import ServerSettings, has_control, is_host, is_int, validate
from .unit import LAUNCHER_PATH
from .rollout import ROLLOUT_SETTING, max_fail_problem, parse_rollout

VENV_TRANSFERS = ("auto", "direct", "relay")
# The first line of every unit noderig renders (templates/sglang.service.j2): a unit file
# without it was written by someone else and is never overwritten.
UNIT_MARKER = "# Rendered by noderig"
# noderig's own name on the node: /var/lib/noderig (its state), its units noderig-aria2, -peers...
OWN_NAME = "noderig"
# The settings that allow plain http to the Hub (the token would cross the network in clear).
INSECURE_HTTP_SETTING = "allow_insecure_hub_http"

# Directories that are never a model, draft or venv directory themselves (a subdirectory,
# e.g. /opt/sglang/venv, /srv/models/x or /var/lib/x, is fine) ...
SYSTEM_DIRS = frozenset({
    "/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc",
    "/sys", "/run", "/var", "/root", "/home", "/tmp", "/opt", "/srv", "/mnt", "/media", "/snap",
    "/lost+found", "/usr/local", "/var/lib", "/var/tmp", "/var/log", "/var/cache", "/var/opt", "/var/spool",
    "/var/mail", "/var/backups", "/var/local",
})
# ... and trees nothing of the deploy may go into at any depth: the venv copy deletes what
# the reference lacks (rsync --delete), so a venv here would wipe the system.
SYSTEM_TREES = (
    "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc", "/sys", "/run",
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/libexec",
    "/usr/include", "/usr/share", "/usr/src", "/usr/games", "/usr/local/bin", "/usr/local/sbin",
    "/usr/local/lib", "/usr/local/include", "/usr/local/share", "/usr/local/etc",
    "/var/lib/dpkg", "/var/lib/apt", "/var/lib/systemd", "/var/cache/apt",
)

_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^(?:{_REPO_PART}/)?{_REPO_PART}\Z")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}\Z")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_URL_PATH = re.compile(r"^[A-Za-z0-9._~/-]*\Z")
_UNIT_CHARS = re.compile(r"^[A-Za-z0-9_.-]{1,200}\Z")
_SERVICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}\Z")
# A Debian package name (policy 5.6.1), optionally :arch: for the inventory and repairs alike.
DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(?::[a-z0-9-]+)?\Z")

# Integer settings the unit does not check -> (lowest, highest).
_INT_RANGES = {"aria2_connections": (1, 16), "aria2_jobs": (1, 64), "gpus_required": (0, 1024),
               "max_repairs": (0, 100), "ready_timeout": (1, 86400), "fanout_port": (1, 65535)}
_BOOLS = ("repair", INSECURE_HTTP_SETTING, ALLOW_SETTING, "firewall", "fanout", "fanout_keep_serving",
          "download_first", "checkpoint_beside", "venv_from_peers")
# Keys noderig once read and no longer does: an inventory that sets one is told, not ignored.
RETIRED_SETTINGS = {
    "launcher_path": f"is not a setting: the launcher is noderig's own file at {LAUNCHER_PATH}, the path the "
                     "unit runs; remove launcher_path from the inventory",
}


def _say(key: str, value, rule: str) -> str:
    return f"inventory value {key}={value!r} {rule}"


def _get(data, key: str, default=None):
    """``data.get``: pyinfra's host data and a plain mapping both have it."""
    return data.get(key, default)


def location_problem(key: str, path) -> str | None:
    """``/`` or a system directory (or a path inside a system tree) as ``key``. Only for
    paths that are already absolute and normalised (``unit.validate`` says when they are not)."""
    if not isinstance(path, str) or not path.startswith("/") or posixpath.normpath(path) != path:
        return None
    if path in SYSTEM_DIRS:
        return _say(key, path, "is / or a system directory; use a directory of its own below one, "
                               "e.g. /opt/sglang/venv or /models/<name>")
    inside = next((t for t in SYSTEM_TREES if path.startswith(t + "/")), None)
    if inside:
        return _say(key, path, f"is inside the system directory {inside}; use a directory of its own "
                               "elsewhere, e.g. /opt/sglang/venv or /models/<name>")
    if ".ssh" in path.split("/"):
        return _say(key, path, "is inside an .ssh directory; use a directory of its own elsewhere")
    return None


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _location_problems(data) -> list[str]:
    """Where the venv, the checkpoint and the draft go: not system directories, not each other."""
    found = []
    paths = {"venv_path": _get(data, "venv_path"), "model_dir": _get(data, "model_dir")}
    if _get(data, "speculative", "ddtree") != "none" and _get(data, "draft_dir") is not None:
        paths["draft_dir"] = _get(data, "draft_dir")
    for key, path in paths.items():
        found += [p for p in [location_problem(key, path)] if p]
    good = {k: v for k, v in paths.items() if isinstance(v, str) and v.startswith("/")
            and posixpath.normpath(v) == v}
    keys = list(good)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if _nested(good[a], good[b]):
                found.append(f"inventory values {a}={good[a]!r} and {b}={good[b]!r} are the same directory or "
                             "one is inside the other (the venv copy and the checkpoint step each delete what "
                             "does not belong in theirs); give each a directory of its own")
    return found


def _endpoint_problems(data) -> list[str]:
    url = _get(data, "hf_endpoint")
    allow_http = _get(data, INSECURE_HTTP_SETTING, False) is True
    if not isinstance(url, str) or not url or has_control(url) or any(c.isspace() for c in url):
        return [_say("hf_endpoint", url, "must be the Hub's URL, e.g. https://huggingface.co")]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        return [_say("hf_endpoint", url, f"is not a usable URL ({e}); use e.g. https://huggingface.co")]
    if parts.scheme not in ("https", "http") or not parts.hostname or not is_host(parts.hostname):
        return [_say("hf_endpoint", url, "must be an https:// URL with a host name, e.g. https://huggingface.co")]
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        return [_say("hf_endpoint", url, "must not carry credentials, a query or a fragment; give the token "
                                         "with hf_token_file")]
    if port == 0:
        return [_say("hf_endpoint", url, "has port 0; use a port from 1 to 65535")]
    if not _URL_PATH.match(parts.path):
        return [_say("hf_endpoint", url, "has a path with characters other than letters, digits and ._~/-")]
    if parts.scheme == "http" and not allow_http:
        return [_say("hf_endpoint", url, "is plain http, which sends the Hub token in clear; use https, or set "
                                         f"{INSECURE_HTTP_SETTING} = True for a mirror on a network you trust")]
    return []


def _hub_problems(data) -> list[str]:
    found = _endpoint_problems(data)
    repos = [("model_repo", "model_revision")]
    if _get(data, "speculative", "ddtree") != "none":
        repos.append(("draft_repo", "draft_revision"))
    for repo_key, rev_key in repos:
        repo, rev = _get(data, repo_key), _get(data, rev_key, "main")
        if not isinstance(repo, str) or not _REPO_ID.match(repo) or ".." in repo:
            found.append(_say(repo_key, repo, "must be a Hub repo id like org/name (letters, digits and ._- only)"))
        if not isinstance(rev, str) or not _REVISION.match(rev) or ".." in rev.split("/"):
            found.append(_say(rev_key, rev, "must be a branch, tag or commit sha (letters, digits and ._/- only)"))
    patterns = _get(data, "checkpoint_patterns")
    if (not isinstance(patterns, (list, tuple)) or not patterns
            or not all(isinstance(p, str) and p and not has_control(p) for p in patterns)):
        found.append(_say("checkpoint_patterns", patterns, "must be a non-empty list of glob patterns such as "
                                                           "'*.safetensors'"))
    else:
        for p in patterns:
            if p.startswith("/") or "\\" in p or ".." in p.split("/"):
                found.append(_say("checkpoint_patterns", p, "must be a pattern relative to the repo (no leading /, "
                                                            "no .. and no backslash)"))
    for key in ("hf_token_file", "api_key_file"):
        value = _get(data, key)
        if value is not None and (not isinstance(value, str) or not value or has_control(value)):
            found.append(_say(key, value, "must be the path of a 0600 file on the controller, or None"))
    return found


def _other_problems(data) -> list[str]:
    """Settings outside the unit: types, ranges, choices."""
    found = []
    for key, (low, high) in _INT_RANGES.items():
        value = _get(data, key)
        if not is_int(value) or not low <= value <= high:
            found.append(_say(key, value, f"must be an integer from {low} to {high}"))
    for key in _BOOLS:
        value = _get(data, key, False)
        if not isinstance(value, bool):
            found.append(_say(key, value, "must be True or False"))
    transfer = _get(data, "venv_transfer", "auto")
    if transfer not in VENV_TRANSFERS:
        found.append(_say("venv_transfer", transfer, f"must be one of {', '.join(VENV_TRANSFERS)}"))
    module = _get(data, "venv_import_check", "sglang")
    if not isinstance(module, str) or not _MODULE.match(module):
        found.append(_say("venv_import_check", module, "must be a Python module name such as sglang"))
    service = _get(data, "service_name")
    if isinstance(service, str) and _UNIT_CHARS.match(service) and not service_name_ok(service):
        # (other characters: unit.validate says so)
        found.append(_say("service_name", service, "must start with a letter or digit and leave out .service "
                                                   "(noderig adds it), e.g. sglang"))
    elif isinstance(service, str) and (service == OWN_NAME or service.startswith(OWN_NAME + "-")):
        found.append(_say("service_name", service, f"is noderig's own (its state in /var/lib/{OWN_NAME}, which the "
                                                   "server's StateDirectory would hand to its user, and its units "
                                                   f"{OWN_NAME}-*); choose another, e.g. sglang"))
    found += [_say(key, _get(data, key), rule) for key, rule in RETIRED_SETTINGS.items() if _get(data, key) is not None]
    fanout_address = _get(data, "fanout_address")
    if fanout_address is not None and not (isinstance(fanout_address, str) and is_ip(fanout_address)):
        found.append(_say("fanout_address", fanout_address, "must be an IP address (where the other targets reach "
                                                            "this one), or None for its ssh_hostname"))
    reference = _get(data, "reference_host")
    if not isinstance(reference, str) or not reference:
        found.append(_say("reference_host", reference, "must name the host of the inventory's reference group"))
    for key in ("packages", "cuda_packages"):
        value = _get(data, key, [])
        if not isinstance(value, (list, tuple)):
            found.append(_say(key, value, "must be a list of Debian package names"))
            continue
        found += [_say(key, p, "is not a Debian package name (lowercase letters, digits and +.- only, "
                               "optionally :arch); give names, not apt options")
                  for p in value if not isinstance(p, str) or not DEBIAN_PACKAGE.match(p)]
    found += _rollout_problems(data)
    return found


def _rollout_problems(data) -> list[str]:
    """``rollout`` (Ansible's serial: sizes, percentages, a comma list) and ``max_fail_percentage``."""
    found = []
    try:
        parse_rollout(_get(data, ROLLOUT_SETTING, "1,25%,100%"))
    except ValueError as e:
        found.append(str(e))
    problem = max_fail_problem(_get(data, "max_fail_percentage", 0))
    return found + ([problem] if problem else [])


def address_problems(data, name: str) -> list[str]:
    """The address and port the hosts use for one another (the venv copy): ``ssh_hostname``
    (or the inventory name, when unset) an IP address or a host name, ``ssh_port`` 1-65535."""
    found = []
    address = _get(data, "ssh_hostname") or name
    if not is_host(address):
        what = (_say("ssh_hostname", address, "is not an IP address or a host name") if _get(data, "ssh_hostname")
                else f"the inventory host name {address!r} (the address, with no ssh_hostname) is not an IP address "
                     "or a host name")
        found.append(f"{what} (host {name}); use the address other hosts reach it at, e.g. 10.0.0.12 or "
                     "b300.example.internal")
    port = _get(data, "ssh_port")
    if port is not None and (not is_int(port) or not 1 <= port <= 65535):
        found.append(f"{_say('ssh_port', port, 'must be an integer from 1 to 65535')} (host {name})")
    return found


def problems(data, name: str = "") -> list[str]:
    """Every problem of a target host's inventory data (pyinfra host data or a mapping), one
    sentence each; ``[]`` when it is good. ``name``: the host's inventory name."""
    found = validate(ServerSettings.from_inventory(data))
    found += _location_problems(data)
    found += _hub_problems(data)
    found += _other_problems(data)
    found += address_problems(data, name)
    if _get(data, "firewall", True) is True:
        # The firewall's own lists; its SSH ports come from the node's sshd later (a fact).
        port = _get(data, "server_port")
        found += [p for p in firewall_problems(FirewallSettings.from_inventory(data, port, [22]))
                  if "server_port" not in p]  # (already said above, when it is wrong)
    return found


def service_name_ok(name) -> bool:
    """A unit name noderig can write ``<name>.service`` under (whose owner is then checked)."""
    return isinstance(name, str) and bool(_SERVICE_NAME.match(name)) and not name.endswith(".service")


def unit_owner_problem(service_name: str, files: dict) -> str | None:
    """``files``: what the node has for the unit ``<service_name>.service`` (the ``UnitFiles``
    fact): path -> its first line, or ``None`` when it could not be read; ``error``: why the
    node could not say. A unit file without noderig's marker is someone else's: refused."""
    unit = f"{service_name}.service"
    if files.get("error"):
        return (f"could not tell whether {unit} is noderig's: {files['error']}; fix that on the node, "
                "then rerun")
    for path, first in files.get("files", {}).items():
        if first is None:
            return f"could not read {path} (the unit {unit}) to tell whether noderig wrote it; fix that, then rerun"
        if not first.startswith(UNIT_MARKER):
            return (f"inventory value service_name={service_name!r} names {unit}, which noderig did not write "
                    f"({path}); choose another service_name, e.g. sglang")
    return None


def state_dir_problem(service_name: str, user, files: dict) -> str | None:
    """The unit's ``StateDirectory=`` is ``/var/lib/<service_name>``, which systemd hands, with
    everything in it, to the server's user at each start. ``files``: the ``UnitFiles`` fact,
    whose ``state`` is that path's owner and type (``"sglang directory"``), None when absent.
    It must be absent, the user's own directory, or the directory of noderig's unit of that
    name (a rerun that changed ``service_user``); anything else is someone else's."""
    state = files.get("state")
    if state is None:
        return None
    owner, _, kind = state.partition(" ")
    if kind == "directory" and (owner == user or files.get("files")):  # (files: noderig's, see unit_owner_problem)
        return None
    return (f"inventory value service_name={service_name!r} makes /var/lib/{service_name} the server's state "
            f"directory, which exists and is not the server's ({kind or 'a file'} of {owner}): systemd would hand it "
            f"and everything in it to service_user {user!r}; choose another service_name, e.g. sglang")
