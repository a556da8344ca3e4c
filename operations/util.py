"""What every noderig operation shares."""

from __future__ import annotations

from pyinfra import logger
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand

from noderig.service_plan import CHANGES_DIR, marker


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
