"""What every noderig operation shares."""

from __future__ import annotations

import functools
import os
import traceback
from pathlib import Path

from pyinfra import host as current_host
from pyinfra import logger
from pyinfra.api import operation as pyinfra_operation
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand

from noderig.errors import QUOTED_LINE_LIMIT, one_line
from noderig.service_plan import CHANGES_DIR, marker


def controller_cache(name: str) -> Path:
    """A directory of noderig's cache on the controller (``NODERIG_CACHE``, else
    ``~/.cache/noderig``): what a later run may reuse, never needed for a right answer."""
    return Path(os.environ.get("NODERIG_CACHE", Path.home() / ".cache" / "noderig")) / name


def _report_failure(state, host, message: str) -> bool:
    host.log_styled(message, fg="red", log_func=logger.error)
    return False  # a False status fails this host only; the others go on


def first_pass(host) -> bool:
    """True in exactly one of the two passes pyinfra makes over an operation body: the
    change-detection pass when there is one (also under --dry), else the execution pass
    (-y skips change detection). For messages that should print once per run."""
    state = host.state
    return not state.is_executing or not state.should_check_for_changes()


def fail(host, message: str):
    """Fail this host with one sentence: shown by `--dry` too, and at execution."""
    if not host.state.is_executing:
        host.log_styled(f"would fail: {message}", fg="red", log_func=logger.warning)
    yield FunctionCommand(_report_failure, (message,), {})


def internal_error_sentence(error: BaseException) -> str:
    """A bug's one line: its message may quote what noderig did not write (a Hub's URL, a server's bytes), so it
    is redacted and escaped as every such text is (``one_line``)."""
    return (f"internal error: {type(error).__name__}: {one_line(str(error), QUOTED_LINE_LIMIT)} (a bug in noderig or "
            "an input it did not foresee; nothing after it ran on this host; rerun with --debug for the traceback and "
            "report it)")


def operation(**options):
    """pyinfra's ``@operation``, with one more promise: an exception raised by the operation's
    body (a bug included) fails this host with a sentence instead of ending the whole run with
    a traceback and a summary that cannot say which host broke. The traceback is logged at
    debug level (pyinfra's ``--debug``)."""

    def decorate(func):
        @functools.wraps(func)
        def guarded(*args, **kwargs):
            try:
                for command in func(*args, **kwargs):
                    yield guarded_call(command) if isinstance(command, FunctionCommand) else command
            except Exception as error:  # noqa: BLE001 - every failure must reach the summary
                logger.debug(f"[{current_host.name}] {func.__module__}.{func.__name__}:\n{traceback.format_exc()}")
                yield from fail(current_host, internal_error_sentence(error))

        return pyinfra_operation(**options)(guarded)

    return decorate


def guarded_call(command: FunctionCommand) -> FunctionCommand:
    """``command`` (a Python function run at execution), with ``operation``'s promise: an
    exception it raises fails this host with the internal-error sentence (pyinfra's own
    handling logs a traceback as a warning, and the summary could only say "see the errors
    above"). The function keeps its name (the tests describe a command by it)."""
    function = command.function

    @functools.wraps(function)
    def checked(state, host, *args, **kwargs):
        try:
            return function(state, host, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - every failure must reach the summary
            logger.debug(f"[{host.name}] {function.__module__}.{function.__name__}:\n{traceback.format_exc()}")
            return _report_failure(state, host, internal_error_sentence(error))

    return FunctionCommand(checked, command.args, command.kwargs, **command.connector_arguments)


@operation()
def refused(message: str):
    """
    Fail this host with ``message``: for a problem found outside any operation (in the
    deploy file), which would otherwise be only a logged line and a host summarised as ok.

    + message: the sentence, naming what to fix
    """
    yield from fail(current_host, message)


def decided(step: str, decide, *args, default=None):
    """``decide(*args)``: a decision a step takes in the deploy file, outside its operations
    (the rollout's: whether the server serves, whether it must restart), with the promise of
    ``operation``: an exception it raises fails this host at an operation named ``step`` with
    the internal-error sentence, and gives ``default``, instead of ending every host's run (the
    other targets, waiting at the rollout's barrier, go on).

    + step: the name of the step the decision belongs to (what the summary says it failed at)
    + decide: the function that decides
    + default: the value when it raised (the host fails before anything uses it)
    """
    try:
        return decide(*args)
    except Exception as error:  # noqa: BLE001 - every failure must reach the summary
        logger.debug(f"[{current_host.name}] {getattr(decide, '__qualname__', decide)}:\n{traceback.format_exc()}")
        refused(name=step, message=internal_error_sentence(error))
        return default


def atomic_write(path: str, mode: str = "644") -> tuple[str, StringCommand, StringCommand]:
    """Replacing ``path`` so that an interrupted run never leaves half a file in place: the
    temporary file beside it to upload the content to, the command that creates it (and its
    directory) with ``mode`` before the upload, and the one that renames it into place."""
    tmp = f"{path}.noderig-tmp"
    parent = path.rsplit("/", 1)[0] or "/"
    prepare = StringCommand("install", "-d", "-m", "755", QuoteString(parent), "&&",
                            "install", "-m", mode, "/dev/null", QuoteString(tmp))
    finish = StringCommand("chmod", mode, QuoteString(tmp), "&&", "mv", "-f", QuoteString(tmp), QuoteString(path))
    return tmp, prepare, finish


def put_atomic(host, path: str, src, mode: str = "644") -> bool:
    """From a ``FunctionCommand``: replace ``path`` on the node with ``src`` (a local file
    name or a file object) the way ``atomic_write`` does; whether every command succeeded."""
    tmp, prepare, finish = atomic_write(path, mode)
    return bool(host.run_shell_command(prepare)[0] and host.put_file(src, tmp) and host.run_shell_command(finish)[0])


def earlier_in_run(host, what: str) -> bool:
    """Whether an earlier step of this run on this host already did ``what`` (and note that
    this one does): for work that one run needs once per host, such as refreshing the package
    lists or uploading the node-side scripts. Noted per phase (planning, then running), as each
    phase runs every step's body afresh; a host whose step fails runs no later step."""
    done = host.state.__dict__.setdefault("_noderig_done_in_run", set())
    key = (host.name, bool(host.state.is_executing), what)
    if key in done:
        return True
    done.add(key)
    return False


def mark_changing(what: str) -> StringCommand:
    """Touch ``what``'s change marker: yielded before a step changes a byte of what the
    server runs, so a restart is due even when the run dies right after (see service_plan)."""
    return StringCommand("install", "-d", "-m", "755", CHANGES_DIR, "&&", "touch", QuoteString(marker(what)))


_locks: dict = {}


def one_at_a_time(*key):
    """A lock shared by every host's greenlet in this run, for work on a shared resource: pyinfra
    runs an operation on all hosts at once, so nodes that copy from the same reference would
    otherwise interleave requests on its one SFTP session (which hangs) or fill the same relay
    cache together."""
    from gevent.lock import RLock

    return _locks.setdefault(key, RLock())
