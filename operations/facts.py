"""pyinfra facts about a node: one round trip each, cheap (sizes and mtimes, never hashes).

Absent is not unreadable. A fact about a file answers ``None`` (or empty) only when the file
does not exist; a file that exists but cannot be read makes the fact's command fail, and one
that cannot be parsed makes ``process`` raise: pyinfra then fails that host with the file's
name, before any change, instead of a rerun reading "no repairs" or "nothing verified".
"""

from __future__ import annotations

import json

from pyinfra.api import FactBase
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.exceptions import FactProcessError
from pyinfra.facts.files import File

from noderig import aria2, peer_server
from noderig.checkpoint_plan import MANIFEST_FILE, RECORD_FILE
from noderig.errors import one_line

# First line of a file fact's output when the file exists (its content follows).
PRESENT = "noderig:present"


def if_present(path: str, *reader) -> StringCommand:
    """Run ``reader`` when ``path`` exists (after printing ``PRESENT``); nothing when it does
    not. The reader's failure is the command's failure."""
    return StringCommand("if", "[", "-e", QuoteString(path), "];", "then", "echo", PRESENT, "&&", *reader,
                         ";", "fi")


def present_lines(output) -> list[str] | None:
    """The reader's lines when the file existed, else None."""
    lines = list(output)
    if not lines or lines[0] != PRESENT:
        return None
    return lines[1:]


class NodeInfo(FactBase):
    """
    The facts preflight needs, in one round trip: OS, base Python, free bytes on the volume
    that holds ``path`` (its nearest existing parent), and GPUs from ``nvidia-smi`` if present.

    .. code:: python

        {"os": "debian 12", "python": "3.11.2", "free_bytes": 8.1e10,
         "gpus": [{"name": "NVIDIA B300", "compute_cap": "10.3", "driver": "580.82"}]}

    and ``gpu_error`` (nvidia-smi's status and words, one line) when nvidia-smi is there and failed;
    ``peer_server``: whether the fan-out's peer server has its run directory (a killed fan-out
    leaves it, and its nginx, behind: read here, the deploy learns it without a read of its own).
    """

    def command(self, path: str) -> StringCommand:
        script = (
            'p="$1"; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; '
            'echo "os=$(. /etc/os-release; echo "$ID $VERSION_ID")"; '
            'echo "python=$(python3 -V 2>/dev/null)"; '
            'echo "free=$(df -PB1 "$p" | awk \'NR==2 {print $4}\')"; '
            'echo "dev=$(stat -c %d "$p")"; '
            # (nvidia-smi prints its failures on stdout too: with its status they are an error, not GPUs)
            "if command -v nvidia-smi >/dev/null 2>&1; then "
            "out=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1); rc=$?; "
            'key=gpu; [ "$rc" = 0 ] || { key=nvsmi_error; echo "nvsmi_status=$rc"; }; '
            '[ -z "$out" ] || printf \'%s\\n\' "$out" | sed "s/^/$key=/"; fi; '
            '[ ! -d "$2" ] || echo peer_server=yes'
        )
        return StringCommand("sh", "-c", QuoteString(script), "noderig-facts", QuoteString(path),
                             QuoteString(peer_server.RUN_DIR))

    def process(self, output):
        info = {"os": None, "python": None, "free_bytes": None, "gpus": [], "peer_server": False}
        failed = []
        for line in output:
            key, _, value = line.partition("=")
            if key == "os":
                info["os"] = value or None
            elif key == "python":
                info["python"] = python_version(value)
            elif key == "free" and value.isdigit():
                info["free_bytes"] = int(value)
            elif key == "dev":
                info["device"] = value
            elif key == "gpu":
                name, cap, driver = ([v.strip() for v in value.split(",")] + ["", "", ""])[:3]
                info["gpus"].append({"name": name, "compute_cap": cap, "driver": driver})
            elif key == "peer_server":
                info["peer_server"] = value == "yes"
            elif key in ("nvsmi_status", "nvsmi_error"):
                failed.append(value)
        if failed:  # the status, then what nvidia-smi said
            info["gpu_error"] = one_line(f"nvidia-smi exited with status {failed[0]}: " + "\n".join(failed[1:]))
        return info


class PyvenvCfg(FactBase):
    """
    A venv's ``pyvenv.cfg`` as a dict (``home``, ``version``...), or ``None`` if absent.
    """

    def command(self, venv: str) -> StringCommand:
        return if_present(f"{venv}/pyvenv.cfg", "cat", QuoteString(f"{venv}/pyvenv.cfg"))

    def process(self, output):
        lines = present_lines(output)
        if lines is None:
            return None
        cfg = {}
        for line in lines:
            key, sep, value = line.partition("=")
            if sep:
                cfg[key.strip()] = value.strip()
        return cfg or None


class PythonVersion(FactBase):
    """
    The version (``3.11.2``) of a Python executable, or ``None`` if it does not exist or
    cannot run (preflight then names it as the interpreter the venv needs).
    """

    def command(self, executable: str) -> StringCommand:
        return StringCommand(QuoteString(executable), "-V", "2>/dev/null", "||", "true")

    def process(self, output):
        return python_version(output[0]) if output else None


def python_version(line: str) -> str | None:
    """``3.11.2`` from ``python3 -V``'s line (``Python 3.11.2``): what ``platform.python_version()``
    prints, read without starting the interpreter (-V answers before it initialises: 2 ms of
    CPU on the node against 20, and the fact is read in every run)."""
    words = line.split()
    return words[1] if len(words) == 2 and words[0] == "Python" else None


class FileStats(FactBase):
    """
    Size and mtime of every regular file under ``root`` (relative paths), without reading
    them, plus which have a live aria2 control file. ``{}`` when ``root`` does not exist.

    .. code:: python

        {"model-00001-of-000064.safetensors": {"size": 995001888, "mtime": 1764680000.0,
                                               "aria2": False}}
    """

    default = dict

    def command(self, root: str) -> StringCommand:
        return if_present(root, "cd", QuoteString(root), "&&",
                          "find", ".", "-type", "f", "-printf", QuoteString("%s %T@ %P\\n"))

    def process(self, output):
        stats: dict[str, dict] = {}
        for line in present_lines(output) or []:
            size, mtime, path = line.split(" ", 2)
            stats[path] = {"size": int(size), "mtime": float(mtime), "aria2": False}
        for path in [p for p in stats if p.endswith(".aria2")]:
            target = path[: -len(".aria2")]
            if target in stats:
                stats[target]["aria2"] = True
        return stats


class JsonFile(FactBase):
    """
    A JSON file's content, or ``None`` when it does not exist. A file that exists but cannot
    be read, or is not valid JSON (an empty one included), fails the host with its name.
    """

    def command(self, path: str) -> StringCommand:
        self.path = path  # pyinfra makes one instance per read: process() names the file
        return if_present(path, "cat", QuoteString(path))

    def process(self, output):
        lines = present_lines(output)
        if lines is None:
            return None
        try:
            return json.loads("\n".join(lines))
        except ValueError as e:
            raise FactProcessError(f"{self.path} exists but is not valid JSON ({e}); repair or remove it, "
                                   "then rerun")


class UnitStatus(FactBase):
    """
    A systemd unit's state: ``{"active": "active", "sub": "running", "enabled": "enabled",
    "invocation": "<id>", "fragment": "/etc/systemd/system/x.service", "restarts": 0,
    "need_reload": False, "started": 1796227915.827929}`` (``started``: when its main process
    last started, epoch seconds to the microsecond; None if never).
    """

    def command(self, unit: str) -> StringCommand:
        return StringCommand(
            "systemctl", "show", QuoteString(unit), "--timestamp=us+utc",
            "--property=ActiveState,SubState,UnitFileState,InvocationID,FragmentPath,NRestarts,"
            "NeedDaemonReload,ExecMainStartTimestamp",
        )

    def process(self, output):
        props = dict(line.split("=", 1) for line in output if "=" in line)
        return {
            "active": props.get("ActiveState"),
            "sub": props.get("SubState"),
            "enabled": props.get("UnitFileState"),
            "invocation": props.get("InvocationID") or None,
            "fragment": props.get("FragmentPath") or None,
            "restarts": int(props.get("NRestarts") or 0),
            "need_reload": props.get("NeedDaemonReload") == "yes",
            "started": systemd_timestamp(props.get("ExecMainStartTimestamp", "")),
        }


def systemd_timestamp(text: str) -> float | None:
    """``Wed 2026-12-02 16:11:56.745487 UTC`` (systemctl --timestamp=us+utc) -> epoch seconds."""
    from datetime import datetime, timezone

    try:
        when = datetime.strptime(text.strip(), "%a %Y-%m-%d %H:%M:%S.%f UTC")
    except ValueError:
        return None
    return when.replace(tzinfo=timezone.utc).timestamp()


class Mtimes(FactBase):
    """
    Modification times of ``paths`` that exist, epoch seconds to the nanosecond:
    ``{"/etc/systemd/system/sglang.service": 1796227915.827929295}``.
    """

    default = dict

    def command(self, paths: tuple) -> StringCommand:
        script = 'for p; do if [ -e "$p" ]; then stat -c "%.9Y %n" "$p" || exit 1; fi; done'
        return StringCommand("sh", "-c", QuoteString(script), "noderig-mtimes", *(QuoteString(p) for p in paths))

    def process(self, output):
        found = {}
        for line in output:
            stamp, _, path = line.partition(" ")
            try:
                found[path] = float(stamp)
            except ValueError:
                continue
        return found


class HttpStatus(FactBase):
    """
    The HTTP status code of a GET to ``url`` from the node itself (0 when nothing answers).
    """

    def command(self, url: str) -> StringCommand:
        return StringCommand(
            "curl", "-s", "-o", "/dev/null", "-m", "5", "-w", QuoteString("%{http_code}"), QuoteString(url),
            "||", "true",
        )

    def process(self, output):
        text = "".join(output).strip()
        return int(text) if text.isdigit() else 0


class TreeListing(FactBase):
    """
    Every entry under ``root`` with type, size, mtime, mode and link target (never file
    contents), keyed by relative path; ``{}`` when ``root`` does not exist; ``__pycache__``
    directories left out. Two trees with equal listings were copied with ``rsync -a`` and
    left alone since.

    .. code:: python

        {"bin/python": ("l", 7, 1764680000, "777", "python3"), "pyvenv.cfg": ("f", 90, ...)}
    """

    default = dict

    def command(self, root: str) -> StringCommand:
        return if_present(
            root, "cd", QuoteString(root), "&&",
            # Bytecode caches are derived, and Python rewrites them on whichever host runs the
            # code: comparing them would make every server start look like drift.
            "find", ".", "-mindepth", "1", "-name", "__pycache__", "-prune", "-o",
            "-printf", QuoteString("%y\\t%s\\t%T@\\t%m\\t%l\\t%P\\n"),
        )

    def process(self, output):
        listing = {}
        for line in present_lines(output) or []:
            kind, size, mtime, mode, link, path = line.split("\t", 5)
            # Directory sizes and mtimes change with their contents; the entries say it all.
            if kind == "d":
                listing[path] = ("d", 0, 0, mode, "")
            else:
                listing[path] = (kind, int(size), int(float(mtime)), mode, link)
        return listing


class DistributionsDigest(FactBase):
    """
    A digest of the Python distributions installed in a venv: sha256 over every
    ``*.dist-info/RECORD`` (each lists its distribution's files with their hashes), sorted by
    path. ``None`` when the venv has none.
    """

    def command(self, venv: str) -> StringCommand:
        return if_present(
            venv, "cd", QuoteString(venv), "&&",
            "find", ".", "-path", QuoteString("*.dist-info/RECORD"), "-type", "f", "-print0", "|",
            "LC_ALL=C", "sort", "-z", "|", "xargs", "-0r", "sha256sum", "|", "sha256sum",
        )

    def process(self, output):
        lines = present_lines(output)
        digest = lines[0].split()[0] if lines else None
        # sha256 of empty input: no RECORD files at all
        return None if digest in (None, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") else digest


class FsType(FactBase):
    """
    The filesystem type (``stat -f -c %T``) of ``path``, or of its nearest existing parent.
    """

    def command(self, path: str) -> StringCommand:
        script = 'p="$1"; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; stat -f -c %T "$p"'
        return StringCommand("sh", "-c", QuoteString(script), "noderig-fstype", QuoteString(path))

    def process(self, output):
        return output[0].strip() if output else None


# Sha256 and FileText stay ours, not pyinfra's Sha256File and FileContents: those read a
# file that exists but cannot be read (or a directory) as absent (None), pyinfra 3.10's
# commands end in "|| true" / "|| echo <missing>"; ours fail the host instead, naming it
# (tests/test_facts.py shows both). FileMode is pyinfra's File: stat needs no read access.


class Sha256(FactBase):
    """
    The sha256 of a (small) file, or ``None`` if it does not exist. Never for checkpoints.
    """

    def command(self, path: str) -> StringCommand:
        return if_present(path, "sha256sum", QuoteString(path))

    def process(self, output):
        lines = present_lines(output)
        return lines[0].split()[0] if lines else None


class FileMode(File):
    """
    A file's permission bits in octal as ``stat -c %a`` prints them (``"644"``, ``"4755"``),
    ``None`` if it does not exist, ``False`` if the path is not a regular file (a directory,
    a symlink: not followed). pyinfra's own ``File`` fact, narrowed to the mode.
    """

    def process(self, output):
        found = super().process(output)
        return str(found["mode"]) if found else found


class FileText(FactBase):
    """
    A (small, non-secret) text file's content, or ``None`` if it does not exist.
    """

    def command(self, path: str) -> StringCommand:
        return if_present(path, "cat", QuoteString(path), "&&", "echo")

    def process(self, output):
        lines = present_lines(output)
        return None if lines is None else "\n".join(lines)


class ServerVersion(FactBase):
    """
    The version of the SGLang installed in a venv (from its metadata, without importing
    the server), or ``None``.
    """

    def command(self, venv: str) -> StringCommand:
        code = "import importlib.metadata as m; print(m.version('sglang'))"
        return StringCommand(QuoteString(f"{venv}/bin/python"), "-c", QuoteString(code), "2>/dev/null", "||", "true")

    def process(self, output):
        return output[0].strip() if output else None


class DpkgAudit(FactBase):
    """
    What ``dpkg --audit`` reports: packages left half-installed or unconfigured, as an
    interrupted ``apt-get install`` leaves them (empty when dpkg is consistent).
    """

    default = list

    def command(self) -> str:
        return "dpkg --audit 2>&1 || true"

    def process(self, output):
        return [line for line in output if line.strip()]


class CopyKeys(FactBase):
    """
    Transient copy keys whose comment starts with ``prefix`` left on a host, authorised in
    root's ``authorized_keys`` or as key files in ``/root/.ssh`` (an interrupted venv copy
    leaves them): ``["noderig-transient-b300-1a2b3c4d5e6f", ...]``.
    """

    default = list

    def command(self, prefix: str) -> StringCommand:
        # grep's status 1 is "none found"; 2 (unreadable) fails the fact.
        script = ('if [ -e /root/.ssh/authorized_keys ]; then '
                  'grep -oh -- "$1[A-Za-z0-9_.-]*" /root/.ssh/authorized_keys; [ $? -le 1 ] || exit 2; fi; '
                  'if [ -d /root/.ssh ]; then ls -A /root/.ssh | grep -- "^$1"; [ $? -le 1 ] || exit 2; fi; true')
        return StringCommand("sh", "-c", QuoteString(script), "noderig-facts", QuoteString(prefix))

    def process(self, output):
        return sorted({line.strip() for line in output if line.strip()})


class SystemUser(FactBase):
    """
    A user's passwd entry, ``{"name": "sglang", "uid": 998, "gid": 998, "home": "/var/lib/sglang",
    "shell": "/usr/sbin/nologin"}``, or ``None`` if there is no such user.
    """

    def command(self, user: str) -> StringCommand:
        return StringCommand("getent", "passwd", QuoteString(user), "||", "true")

    def process(self, output):
        fields = output[0].split(":") if output else []
        if len(fields) < 7:
            return None
        return {"name": fields[0], "uid": int(fields[2]), "gid": int(fields[3]), "home": fields[5], "shell": fields[6]}


class Unreadable(FactBase):
    """
    Entries under ``paths`` (and the directories above them) that other users cannot read:
    files without o+r, directories without o+rx. At most 20 are listed; ``[]`` when every
    one is readable. Paths that do not exist are skipped.
    """

    default = list

    def command(self, paths: tuple) -> StringCommand:
        script = ('for p in "$@"; do [ -e "$p" ] || continue; d=$(dirname "$p"); '
                  'while [ "$d" != / ]; do [ -n "$(find "$d" -maxdepth 0 ! -perm -o+x)" ] && echo "$d"; '
                  'd=$(dirname "$d"); done; '
                  'find -H "$p" \\( \\( -type d ! -perm -o+rx \\) -o \\( -type f ! -perm -o+r \\) \\) -print; '
                  'done | head -n 20')
        return StringCommand("sh", "-c", QuoteString(script), "noderig-facts", *(QuoteString(p) for p in paths))

    def process(self, output):
        return [line for line in output if line.strip()]


class NftTable(FactBase):
    """
    ``{"nft": True, "table": "<listing>", "error": None}``: whether ``nft`` is installed and noderig's
    table as ``nft list table`` prints it (``None`` when absent). Reads no other table. ``error``:
    nft's words when it failed otherwise (no permission, netlink): the table is then not known to
    be absent, and never read as such.
    """

    def command(self, table: str) -> StringCommand:
        family, name = table.split()
        script = ('command -v nft >/dev/null 2>&1 || { echo "#no-nft"; exit 0; }; '
                  'out=$(nft list table "$1" "$2" 2>&1) && { printf \'%s\\n\' "$out"; exit 0; }; '
                  'case "$out" in *"No such file or directory"*) echo "#absent" ;; '
                  '*) echo "#error"; printf \'%s\\n\' "$out" ;; esac')
        return StringCommand("sh", "-c", QuoteString(script), "noderig-facts", QuoteString(family), QuoteString(name))

    def process(self, output):
        if output and output[0] == "#error":
            return {"nft": True, "table": None, "error": one_line("\n".join(output[1:]) or "no words")}
        text = "\n".join(output)
        return {"nft": text != "#no-nft", "table": None if text in ("#no-nft", "#absent", "") else text, "error": None}


class SshdPorts(FactBase):
    """
    The TCP ports sshd listens on (``[22]``), from ``ss``; ``[]`` when none is seen.
    """

    default = list

    def command(self) -> str:
        return "ss -Hltnp 2>/dev/null || true"

    def process(self, output):
        ports = set()
        for line in output:
            fields = line.split()
            if '"sshd"' in line and len(fields) >= 4 and fields[3].rsplit(":", 1)[-1].isdigit():
                ports.add(int(fields[3].rsplit(":", 1)[-1]))
        return sorted(ports)


class LinkTarget(FactBase):
    """
    Where a symbolic link finally points (``readlink -f``), or ``None`` when ``path`` is not
    a symbolic link (a directory, a file, or nothing).
    """

    def command(self, path: str) -> StringCommand:
        return StringCommand("if", "[", "-L", QuoteString(path), "];", "then", "readlink", "-f", QuoteString(path),
                             ";", "fi")

    def process(self, output):
        lines = [line for line in output if line.strip()]
        return lines[0] if lines else None


class FileStates(FactBase):
    """
    The sha256 and permission bits of (small) files that exist, in one command:
    ``{"/etc/systemd/system/sglang.service": ("ab12...", "644")}``. A file that exists but
    cannot be read fails the fact. Never for checkpoints.
    """

    default = dict

    def command(self, paths: tuple) -> StringCommand:
        script = ('for p; do [ -e "$p" ] || continue; h=$(sha256sum < "$p") || exit 1; m=$(stat -c %a "$p") || exit 1; '
                  'printf "%s %s %s\\n" "${h%% *}" "$m" "$p"; done')
        return StringCommand("sh", "-c", QuoteString(script), "noderig-files", *(QuoteString(p) for p in paths))

    def process(self, output):
        found = {}
        for line in output:
            digest, mode, path = (line.split(" ", 2) + ["", ""])[:3]
            if path:
                found[path] = (digest, mode)
        return found


# Where facts may come from when named by a stored list (``Facts``): noderig's and pyinfra's.
FACT_MODULES = ("operations.", "pyinfra.facts.")


def fact_class(name: str) -> type[FactBase]:
    """The fact class ``module.Class`` names, only from ``FACT_MODULES``."""
    import importlib

    module, _, cls = name.rpartition(".")
    found = getattr(importlib.import_module(module), cls, None) if module.startswith(FACT_MODULES) else None
    if not (isinstance(found, type) and issubclass(found, FactBase)):
        raise ValueError(f"{name!r} is not a fact of noderig or pyinfra")
    return found


def fact_command(name: str, kwargs: dict) -> StringCommand:
    """The command pyinfra runs to read the fact ``name`` with ``kwargs`` (lists as tuples),
    its required program checked first (missing: exit 127, as a shell says)."""
    fact = fact_class(name)()
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    command = fact.command(**kwargs)
    command = command if isinstance(command, StringCommand) else StringCommand(command)
    requires = fact.requires_command(**kwargs)
    if not requires:
        return command
    return StringCommand("if", "command", "-v", requires, ">/dev/null", "2>&1;", "then", "(", command, ");", "else",
                         "exit", "127;", "fi")


class Facts(FactBase):
    """
    Several facts in one round trip: each fact's own command in a subshell, all at once (every
    one of them only reads), their outputs kept in a directory of ``mktemp -d`` (removed at the
    end), then printed in order, each followed by a line with ``end``, its position and its
    exit status; ``end`` is drawn at random for the run, so no output can forge one.
    ``[[status, [line, ...]], ...]`` in the order asked; a fact whose line never came (the
    command was cut short) is left out, as are those after it; nothing at all without a
    temporary directory (the facts are then read one by one).

    + reads: ``[["operations.facts.JsonFile", {"path": "/x"}], ...]`` (``fact_class`` names)
    + end: the marker
    """

    default = list

    def command(self, reads: tuple, end: str) -> StringCommand:
        self.end = end  # pyinfra makes one instance per read: process() finds the ends
        bits = ["d=$(mktemp", "-d", "2>/dev/null)", "||", "exit", "0;", "trap", QuoteString('rm -rf "$d"'), "EXIT;"]
        for position, (name, kwargs) in enumerate(reads):
            bits += ["(", fact_command(name, kwargs), ")", f'>"$d/{position}"', "2>/dev/null", "&",
                     f"p{position}=$!;"]
        for position in range(len(reads)):
            bits += ["wait", f"$p{position};", f"s{position}=$?;"]
        for position in range(len(reads)):
            bits += ["cat", f'"$d/{position}";', "printf", QuoteString("\\n%s %s %s\\n"), QuoteString(end),
                     str(position), f'"$s{position}";']
        return StringCommand(*bits)

    def process(self, output):
        # The line before each end line is the newline printf adds: empty when the fact's own
        # output ended with one (or was empty), else the fact's last, unterminated line.
        found, lines = [], []
        end = f"{self.end} " if hasattr(self, "end") else None
        for line in output:
            if end and line.startswith(end) and line[len(end):].replace(" ", "").isdigit():
                position, status = (int(v) for v in line[len(end):].split(" "))
                if position != len(found):
                    break
                found.append([status, lines[:-1] if lines and lines[-1] == "" else lines])
                lines = []
            else:
                lines.append(line)
        return found
# Run on the node by Aria2Downloads: the daemon's downloads over its loopback RPC, the secret
# read from its 0600 config (never argv); one JSON line per download, its status and file.
ARIA2_DOWNLOADS = r"""
import json, sys, time, urllib.error, urllib.request
conf, port = sys.argv[1], sys.argv[2]
try:
    secret = next((l.split("=", 1)[1].strip() for l in open(conf) if l.startswith("rpc-secret=")), None)
except OSError as e:
    sys.exit(f"aria2 runs but its config {conf} cannot be read ({e.strerror})")
if not secret:
    sys.exit(f"{conf} holds no rpc-secret")
keys = ["status", "files"]
calls = [{"methodName": m, "params": ["token:" + secret, *p]} for m, p in (
    ("aria2.tellActive", [keys]), ("aria2.tellWaiting", [0, 1 << 20, keys]), ("aria2.tellStopped", [0, 1 << 20, keys]))]
body = json.dumps({"jsonrpc": "2.0", "id": "noderig", "method": "system.multicall", "params": [calls]}).encode()
request = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", body, {"Content-Type": "application/json"})
for attempt in range(50):  # a daemon started a moment ago opens its port within a second
    try:
        reply = json.load(urllib.request.urlopen(request, timeout=10))
        break
    except urllib.error.HTTPError as e:
        sys.exit(f"aria2's RPC refused the query: {e.read().decode(errors='replace')[:200]}")
    except OSError as e:
        error = e
        time.sleep(0.1)
else:
    sys.exit(f"aria2's RPC on 127.0.0.1:{port} did not answer: {error}")
for result in reply.get("result") or sys.exit(f"aria2's RPC refused the query: {reply.get('error')}"):
    if not isinstance(result, list):
        sys.exit(f"aria2's RPC refused the query: {result}")
    for d in result[0]:
        print(json.dumps({"status": d.get("status"), "path": d["files"][0].get("path", "") if d.get("files") else ""}))
"""


class Aria2Downloads(FactBase):
    """
    The files under ``dest`` that the node's aria2 daemon still holds (downloading, queued,
    paused or complete), as paths relative to ``dest``: ``["model-00001-of-00002.safetensors"]``;
    ``None`` when the daemon is not running. A daemon that runs but does not answer fails the
    host: its files' state is unknown, and guessing could hash or delete a file it is writing.
    """

    def command(self, dest: str) -> StringCommand:
        self.dest = dest.rstrip("/")
        return StringCommand("if", "systemctl", "is-active", "--quiet", f"{aria2.SERVICE}.service", ";", "then",
                             "echo", PRESENT, "&&", "python3", "-c", QuoteString(ARIA2_DOWNLOADS), aria2.CONF,
                             str(aria2.RPC_PORT), ";", "fi")

    def process(self, output):
        lines = present_lines(output)
        if lines is None:
            return None
        held = []
        for line in lines:
            try:
                d = json.loads(line)
            except ValueError:
                raise FactProcessError(f"aria2's downloads could not be read: {line[:200]!r}; stop it "
                                       f"(systemctl stop {aria2.SERVICE}) and rerun")
            path = d.get("path") or ""
            if d.get("status") in aria2.LIVE and path.startswith(self.dest + "/"):
                held.append(path[len(self.dest) + 1:])
        return sorted(held)


# Where one part of a combined fact's output starts (the part's name follows).
PART = "noderig:part:"


class CheckpointState(FactBase):
    """
    All the checkpoint steps read of ``dest``, in one round trip: its manifest and verified
    record (as ``JsonFile``), its files (``FileStats``) and what the node's aria2 daemon holds
    there (``Aria2Downloads``). Each part fails the host as that fact would alone.

    .. code:: python

        {"manifest": {...} or None, "stats": {...}, "record": {...} or None, "held": [...] or None}
    """

    def command(self, dest: str) -> StringCommand:
        self.parts = {"manifest": (JsonFile(), {"path": f"{dest}/{MANIFEST_FILE}"}),
                      "stats": (FileStats(), {"root": dest}),
                      "record": (JsonFile(), {"path": f"{dest}/{RECORD_FILE}"}),
                      "held": (Aria2Downloads(), {"dest": dest})}
        bits: list = []
        for name, (fact, kwargs) in self.parts.items():
            # a newline first: the part before may end without one (a JSON file often does)
            bits += [*(["&&"] if bits else []), "printf", QuoteString("\\n%s\\n"), f"{PART}{name}", "&&",
                     fact.command(**kwargs)]
        return StringCommand(*bits)

    @staticmethod
    def changes_on_its_own(value) -> bool:
        """While aria2 runs it writes the files and changes what it holds: such a state is never
        answered from an earlier read (``operations.fact_reads``)."""
        return value.get("held") is not None

    def process(self, output):
        lines: dict[str, list[str]] = {}
        current = None
        for line in output:
            if line.startswith(PART) and line[len(PART):] in self.parts and line[len(PART):] not in lines:
                current = lines.setdefault(line[len(PART):], [])
            elif current is not None:
                current.append(line)
        for part in lines.values():
            if part and part[-1] == "":
                part.pop()  # the newline written before the next part's marker
        if set(lines) != set(self.parts):
            raise FactProcessError(f"the checkpoint's state could not be read (parts {sorted(lines)} of "
                                   f"{sorted(self.parts)}); rerun")
        # (as pyinfra computes a fact: its default when its command printed nothing)
        return {name: fact.process(lines[name]) if lines[name] else fact.default()
                for name, (fact, _) in self.parts.items()}
