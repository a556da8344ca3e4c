"""Logging, process-tree and timing helpers shared by the main process and the scheduler ranks."""

import ctypes
import logging
import os
import signal
import sys
import threading
import time


def configure_logger(log_level: str = "info", prefix: str = "") -> None:
    """SGLang's format: `[2026-12-02 13:14:15 TP0] message`; the prefix names the rank."""
    # journald reads a pipe: flush every line so a crash never swallows the last ones.
    if hasattr(sys.stderr, "reconfigure"):
        sys.stderr.reconfigure(line_buffering=True)
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format=f"[%(asctime)s{prefix}] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
        force=True,
    )


def time_scale() -> float:
    try:
        return max(0.0, float(os.environ.get("SGLANG_STANDIN_TIME_SCALE", "1.0")))
    except ValueError:
        return 1.0


def standin_sleep(seconds: float) -> None:
    """Stand-in for real work (weight loading, graph capture); tests shrink or stretch it with the env var.
    At scale 1 a start-up sleeps about 0.6 s in all (a real one takes minutes): what the lab exercises is the
    order of its steps and the windows between them, and every deploy in the test suite waits for it."""
    time.sleep(seconds * time_scale())


def kill_itself_when_parent_died() -> None:
    """Like SGLang's scheduler processes: die with SIGKILL when the launcher dies."""
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def _descendants(pid: int) -> list[int]:
    """Every descendant of pid, read from /proc (psutil is not available here)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_process_tree(parent_pid: int, include_parent: bool = True) -> None:
    """What SGLang does on a fatal error: SIGKILL every descendant, then itself."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for pid in _descendants(parent_pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if include_parent:
        os.kill(parent_pid, signal.SIGKILL)
        if parent_pid == os.getpid():
            sys.exit(0)  # not reached: SIGKILL is delivered first


# Where the stand-in's internal socket listens: SGLang picks its NCCL and ZMQ ports from
# port + 100 upward; the stand-in takes the first, so tests know where to knock.
INTERNAL_PORT_OFFSET = 100
INTERNAL_BANNER = b"sglang-standin scheduler socket\n"


def open_internal_listener(port: int):
    """Like SGLang's scheduler ZMQ sockets (the CVE-2026-3059 class): a TCP listener on every
    interface, whatever --host says. Answers each connection with a banner and closes it.
    A port already taken is logged, not fatal (tests run servers side by side)."""
    import socket

    logger = logging.getLogger(__name__)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("0.0.0.0", port))
        sock.listen(16)
    except OSError as e:
        logger.warning(f"internal socket tcp://0.0.0.0:{port} not opened: {e}")
        sock.close()
        return None

    def serve():
        while True:
            conn, _ = sock.accept()
            with conn:
                try:
                    conn.sendall(INTERNAL_BANNER)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True, name="internal-socket").start()
    logger.info(f"scheduler socket listening on tcp://0.0.0.0:{port}")
    return sock
