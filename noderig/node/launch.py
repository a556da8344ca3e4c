"""noderig's launcher for SGLang: the server's secrets stay in memory, its output is redacted,
its exit is reported as it happened. Stdlib only; runs ON the node under the venv's Python.

    /opt/sglang/venv/bin/python /usr/local/lib/noderig/launch.py [sglang.launch_server args...]

The unit's EnvironmentFile (mode 0600) provides, besides ordinary variables:

    NODERIG_API_KEY   the server's API key (SGLang takes it only as --api-key)
    NODERIG_HF_TOKEN  a Hub token, if the server needs one (HF_TOKEN is accepted too)

Why a launcher: real SGLang takes the key only as ``--api-key`` (argv: world-readable in
``ps`` and /proc/PID/cmdline) and logs ``server_args=ServerArgs(... api_key='...')`` at
startup, which would put the key in the journal.

Design (what runs where):

1. The launcher (the unit's main process) takes the secrets out of its environment: the
   variables are removed, and their bytes in the process's original environment block are
   overwritten with ``*`` first, so /proc/PID/environ of the launcher and of the forked
   server does not show them either. A Hub token is written to a 0600 file in the unit's
   private RuntimeDirectory (or a private temp dir) and passed as ``HF_TOKEN_PATH``, which
   huggingface_hub reads; so no process has a secret in its environment.
2. It forks. The child puts itself in a new process group, points fds 1 and 2 at two pipes,
   sets ``sys.argv`` in memory to the server's arguments plus ``--api-key=KEY`` and runs
   ``sglang.launch_server`` in-process with ``runpy.run_module(..., run_name="__main__")``,
   as ``python -P -m`` would: neither the working directory nor the launcher's own directory
   is on sys.path, so a ``sglang/`` or ``sitecustomize.py`` lying there (a checkpoint's
   files, noderig's node scripts) is never imported in place of the installed SGLang (the
   unit sets PYTHONSAFEPATH=1 for the interpreters SGLang spawns as well). No exec happens,
   so the child's /proc/PID/cmdline is the launcher's own command line, without the key.
   SGLang's ranks are started with multiprocessing's *spawn*: a fresh interpreter whose
   command line is ``-c 'from multiprocessing.spawn import spawn_main...'``; the pickled
   ServerArgs (with the key) and sys.argv travel through a pipe, never through argv.
   Compilers and other tools the ranks exec never get the key. With *fork* the key would
   only be in copied memory, not in any cmdline either.
3. Every byte the server tree writes to stdout/stderr goes through the pipes, including
   what C code and spawned/forked children write straight to fds 1 and 2 (they inherit
   them). The launcher copies it to its own stdout/stderr (the journal) line by line with
   each secret, and its repr/JSON-escaped forms, replaced by ``***``. A line is held back
   until its newline (journald does the same), so a secret split across two reads is still
   caught; an over-long line is flushed except for a tail shorter than the longest secret.
4. Signals: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the launcher are
   forwarded to the server's process group, which reaches every rank that did not leave
   it. One exception: in the unit (``NODERIG_LAUNCH_KILLMODE=control-group``) a signal sent
   by the service manager (our parent) is not forwarded, because systemd's
   KillMode=control-group already delivers it to every process of the unit, and a second
   SIGTERM can cut SGLang's own shutdown short. A stop therefore reaches the whole tree
   once; TimeoutStopSec's SIGKILL covers anything left.
5. Exit: the launcher waits for the server, drains the pipes (leftover processes that still
   hold them get SIGTERM, then SIGKILL, after a few seconds), then exits the way the server
   did: the same exit code, or killed by the same signal (it re-raises it on itself, with
   core dumps off so only the server's own core exists). systemd and the diagnosis see
   ``status=9/KILL`` when SGLang's crash protocol SIGKILLs its tree, not a launcher's
   invented code. A line ``noderig-launch: the server ... was killed by SIGKILL`` says so
   in the journal as well. If the launcher itself dies, the server gets SIGKILL
   (PR_SET_PDEATHSIG), so no server outlives its output.

Guarantees: (a) no process's argv (``ps``, /proc/*/cmdline) holds a secret, nor its
environment; (b) no byte the server tree writes to stdout/stderr reaches the journal with
a secret in it (in the raw, repr- or JSON-escaped form); (c) SIGTERM to the launcher (or to
the unit) stops the whole process group; (d) the unit's exit status is the server's.

Tradeoffs and limits:

* stdout and stderr keep their own streams, so their relative order can differ from the
  order of the writes by the time one select() round takes (milliseconds). Output without
  a newline appears when its line ends (as in journald).
* Redaction is by exact match: a secret transformed otherwise (base64, split by the server
  across two writes of one line is fine; split across lines is not) is not recognised.
  Secrets shorter than 8 characters are refused, since masking them would mangle the logs.
* The key is in the server's memory by necessity; a core dump of the server contains it
  (core dumps stay with systemd-coredump, readable by root only).
* A process that writes elsewhere than fds 1/2 (its own log file, syslog) is not filtered.
* ``ps`` shows the server's main process with the launcher's command line (it is a fork of
  it, not an exec); the ranks show SGLang's own titles.
"""

import json
import os
import re
import select
import signal
import sys
import time

MODULE = "sglang.launch_server"
API_KEY_VARIABLE = "NODERIG_API_KEY"
HF_TOKEN_VARIABLES = ("NODERIG_HF_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
KILLMODE_VARIABLE = "NODERIG_LAUNCH_KILLMODE"
MIN_SECRET_LENGTH = 8
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
MASK = b"***"
MAX_PENDING = 64 * 1024  # a line longer than this is flushed without waiting for its end
DRAIN_SECONDS = 3.0  # after the server exits: how long leftovers may hold the pipes
POLL_SECONDS = 0.1  # signal forwarding and exit detection latency; idle cost ~10 wakeups/s


def say(message):
    """The launcher's own line (never contains a secret)."""
    _write_all(2, f"noderig-launch: {message}\n".encode())


def _write_all(fd, data):
    while data:
        try:
            written = os.write(fd, data)
        except InterruptedError:
            continue
        except OSError:
            return  # the journal went away: keep draining, so the server never blocks on a full pipe
        data = data[written:]


class Redactor:
    """Replaces secrets in a byte stream, holding back only what could be the start of one."""

    def __init__(self, secrets):
        variants = set()
        for secret in secrets:
            variants.add(secret.encode("utf-8", "surrogateescape"))
            variants.add(repr(secret)[1:-1].encode())  # repr escapes surrogates: plain UTF-8 always encodes
            variants.add(json.dumps(secret)[1:-1].encode())
        variants = sorted((v for v in variants if v), key=len, reverse=True)
        self.pattern = re.compile(b"|".join(re.escape(v) for v in variants)) if variants else None
        self.keep = max((len(v) for v in variants), default=1) - 1
        self.pending = b""

    def _redact(self, raw):
        return self.pattern.sub(MASK, raw) if self.pattern is not None and raw else raw

    def feed(self, data):
        """Bytes read from the server -> bytes safe to write now."""
        if self.pattern is None:
            return data
        raw = self.pending + data
        cut = max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1
        if len(raw) - cut > MAX_PENDING:
            cut = self._safe_cut(raw)
        self.pending = raw[cut:]
        return self._redact(raw[:cut])

    def _safe_cut(self, raw):
        # Everything before len - keep is either in a complete match or cannot start one
        # that the next read completes; a complete match across the cut moves it past the match.
        cut = len(raw) - self.keep
        for m in self.pattern.finditer(raw):
            if m.start() >= cut:
                break
            if m.end() > cut:
                cut = m.end()
        return cut

    def flush(self):
        raw, self.pending = self.pending, b""
        return self._redact(raw)


def _scrub_environment_block(name):
    """Overwrite NAME's value in the process's original environment block (what
    /proc/PID/environ shows, and what a forked child inherits) before unsetenv drops it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        address = libc.getenv(name.encode())
        if address:
            ctypes.memset(address, ord("*"), len(ctypes.string_at(address)))
    except Exception:  # no ctypes/libc: the variable is still removed below
        pass


def _take_variable(name):
    value = os.environ.get(name)
    if value is not None:
        _scrub_environment_block(name)
        os.environ.pop(name, None)
    return value or None


def _check_secret(name, value):
    if len(value) < MIN_SECRET_LENGTH:
        return f"{name} is shorter than {MIN_SECRET_LENGTH} characters; refusing, it could not be redacted from the logs safely"
    if any(ch in value for ch in "\n\r\0") or value != value.strip():
        return f"{name} contains whitespace or a line break"
    return None


def _private_dir():
    runtime = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    if runtime and os.path.isdir(runtime):
        return runtime, False
    import tempfile

    return tempfile.mkdtemp(prefix="noderig-launch-"), True


def _write_token_file(token):
    directory, temporary = _private_dir()
    path = os.path.join(directory, "hf_token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        _write_all(fd, token.encode())
    finally:
        os.close(fd)
    return path, directory if temporary else None


def _set_parent_death_signal(sig):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except Exception:
        pass


def safe_sys_path(path, here):
    """``path`` without what ``python -P`` leaves out: the current directory ('' or '.') and
    the script's directory ``here`` (the launcher's, where noderig's node scripts live)."""
    return [p for p in path if p not in ("", ".") and os.path.abspath(p) != here]


def _serve(args, api_key):
    """In the forked child: run the server module as `python -m` would, key in memory only."""
    import runpy

    sys.path[:] = safe_sys_path(sys.path, os.path.dirname(os.path.abspath(__file__)))
    sys.argv = [MODULE, *args] + ([f"--api-key={api_key}"] if api_key else [])
    runpy.run_module(MODULE, run_name="__main__", alter_sys=True)
    return 0


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _pump(pid, streams, from_manager_reaches_all):
    """Copy the server's output until it exited and the pipes are closed; forward signals.
    Returns the server's wait status."""
    status = None
    drain_deadline = None
    leftovers_signalled = 0
    parent = os.getppid()
    while True:
        # Signals (blocked in this process) are picked up here, with their sender.
        while True:
            info = signal.sigtimedwait(FORWARDED, 0)
            if info is None:
                break
            if from_manager_reaches_all and info.si_pid == parent:
                continue  # KillMode=control-group: the manager signalled every process already
            try:
                os.killpg(pid, info.si_signo)
            except ProcessLookupError:
                pass
            except PermissionError:
                try:
                    os.kill(pid, info.si_signo)
                except ProcessLookupError:
                    pass
        if status is None:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wait_status
                drain_deadline = time.monotonic() + DRAIN_SECONDS
        if not streams and status is not None:
            return status
        if status is not None and time.monotonic() > drain_deadline:
            # Something the server left behind still holds the pipes: end it.
            if leftovers_signalled >= 2:
                return status
            try:
                os.killpg(pid, signal.SIGTERM if leftovers_signalled == 0 else signal.SIGKILL)
            except OSError:
                pass
            leftovers_signalled += 1
            drain_deadline = time.monotonic() + 2.0
        if not streams:
            time.sleep(POLL_SECONDS)
            continue
        readable, _, _ = select.select(list(streams), [], [], POLL_SECONDS)
        for fd in readable:
            out_fd, redactor = streams[fd]
            try:
                data = os.read(fd, 65536)
            except InterruptedError:
                continue
            if data:
                _write_all(out_fd, redactor.feed(data))
            else:
                _write_all(out_fd, redactor.flush())
                os.close(fd)
                del streams[fd]


def _exit_like(status):
    """Leave the way the server did: its exit code, or death by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        except (ImportError, ValueError, OSError):
            pass
        try:
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
            time.sleep(1.0)  # not reached for a fatal signal
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)  # a signal whose default is not fatal: the shell's convention
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    for arg in args:
        name = arg.split("=", 1)[0]
        if name.startswith("--api-k") and "--api-key".startswith(name):
            say("refusing --api-key on the command line (argv is world-readable): "
                f"put the key in the environment file as {API_KEY_VARIABLE}")
            return 2
    api_key, hf_token, problem = _take_secrets()
    if problem:
        say(problem)
        return 2
    if api_key is None:
        say(f"{API_KEY_VARIABLE} is not set: the server runs without an API key")
    token_path = token_dir = None
    if hf_token:
        token_path, token_dir = _write_token_file(hf_token)
        os.environ["HF_TOKEN_PATH"] = token_path
    secrets = [s for s in (api_key, hf_token) if s]
    from_manager_reaches_all = os.environ.pop(KILLMODE_VARIABLE, "") == "control-group"

    sys.stdout.flush()
    sys.stderr.flush()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    launcher_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        _become_the_server(launcher_pid, previous_mask, out_w, err_w, (out_r, out_w, err_r, err_w))
        return _serve(args, api_key)

    os.close(out_w)
    os.close(err_w)
    try:
        os.setpgid(pid, pid)  # also here: a signal may come before the child ran setpgid
    except OSError:
        pass
    streams = {out_r: (1, Redactor(secrets)), err_r: (2, Redactor(secrets))}
    status = _pump(pid, streams, from_manager_reaches_all)
    for remove, target in ((os.unlink, token_path), (os.rmdir, token_dir)):
        try:
            if target:
                remove(target)
        except OSError:
            pass
    if os.WIFSIGNALED(status):
        say(f"the server (pid {pid}) was killed by {_signal_name(os.WTERMSIG(status))}")
    elif os.waitstatus_to_exitcode(status) != 0:
        say(f"the server (pid {pid}) exited with status {os.waitstatus_to_exitcode(status)}")
    _exit_like(status)


def _take_secrets():
    """(api_key, hf_token, problem): the secrets taken out of the environment (design, 1), and
    what is wrong with either of them, or None."""
    api_key = _take_variable(API_KEY_VARIABLE)
    hf_token = None
    for name in HF_TOKEN_VARIABLES:
        value = _take_variable(name)
        hf_token = hf_token or value
    for name, value in ((API_KEY_VARIABLE, api_key), ("the Hub token", hf_token)):
        problem = value and _check_secret(name, value)
        if problem:
            return api_key, hf_token, problem
    return api_key, hf_token, None


def _become_the_server(launcher_pid, previous_mask, out_w, err_w, pipe_fds):
    """In the forked child: its own process group, killed with the launcher, default signal
    dispositions, fds 1/2 to the pipes. Any failure here ends the child with 127."""
    try:
        os.setpgid(0, 0)
        _set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != launcher_pid:
            os._exit(1)
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in `python -m`
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in pipe_fds:
            os.close(fd)
    except BaseException:
        os._exit(127)


if __name__ == "__main__":
    sys.exit(main())
