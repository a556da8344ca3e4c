"""aria2c facts the deploy relies on (aria2c(1), "EXIT STATUS"), in one place."""

from __future__ import annotations

EXIT_CODES = {
    0: "all downloads finished", 1: "unknown error", 2: "timeout", 3: "resource not found",
    4: "too many 'resource not found' answers", 5: "download too slow (lowest-speed-limit)",
    6: "network problem", 7: "unfinished downloads at exit", 8: "the server does not support resume",
    9: "not enough disk space", 10: "piece length differs from the control file",
    11: "the same file is already being downloaded", 13: "the file already exists",
    14: "renaming the file failed", 15: "could not open an existing file", 16: "could not create a file",
    17: "file I/O error", 18: "could not create a directory", 19: "name resolution failed",
    22: "bad HTTP response header", 23: "too many redirects", 24: "HTTP authorization failed (token or gated repo)",
    28: "bad option", 29: "the server is overloaded", 30: "bad JSON-RPC request", 32: "checksum validation failed",
}


def explain_exit(code: int) -> str:
    return f"aria2c exit {code}: {EXIT_CODES.get(code, 'unknown exit status')}"


# aria2 errors worth another attempt after re-resolving the URL (a signed CDN URL expired:
# the CDN answers 403, which aria2 reports as a bad response; resume uses the control file).
RETRY_AFTER_RESOLVE = {"22", "24"}
# What aria2 reports for a control file it cannot load (an "unknown error").
UNUSABLE_CONTROL_FILE = "1"
RPC_PORT = 6800
SERVICE = "noderig-aria2"
CONF = "/etc/noderig/aria2.conf"  # 0600: holds the RPC secret, so it never appears in argv


def daemon_conf(secret: str, port: int = RPC_PORT) -> str:
    """aria2c's config file: RPC on loopback only, with a secret."""
    return (
        "enable-rpc=true\n"
        "rpc-listen-all=false\n"
        f"rpc-listen-port={port}\n"
        f"rpc-secret={secret}\n"
        "rpc-allow-origin-all=false\n"
        # the controller may vanish: keep the results until it comes back to read them
        "max-download-result=10000\n"
        # Quiet: its console goes to the journal, and its error lines and download results
        # name the URI, whose query string is a signature (errors come back over RPC instead).
        "quiet=true\n"
        "console-log-level=error\n"
        "download-result=hide\n"
        "summary-interval=0\n"
        "show-console-readout=false\n"
    )


def download_options(dest: str, path: str, connections: int, allocation: str) -> dict[str, str]:
    """Per-file aria2 options (RPC values are strings)."""
    return {
        "dir": dest,
        "out": path,
        "split": str(connections),
        "max-connection-per-server": str(min(connections, 16)),
        "min-split-size": "1M",
        "continue": "true",
        # A server without Range support (some mirrors): start the file over instead of
        # failing with "the server does not support resume" (exit 8).
        "always-resume": "false",
        "auto-file-renaming": "false",
        "allow-overwrite": "true",
        "file-allocation": allocation,
        "max-tries": "5",
        "retry-wait": "2",
        "connect-timeout": "30",
        "timeout": "60",
    }


def summarize_progress(downloads: list[dict]) -> dict:
    """Totals over aria2 download snapshots ({status, total, done, speed})."""
    total = sum(d["total"] for d in downloads)
    done = sum(d["done"] for d in downloads)
    speed = sum(d["speed"] for d in downloads if d["status"] == "active")
    finished = sum(1 for d in downloads if d["status"] == "complete")
    eta = (total - done) / speed if speed else None
    return {"files_done": finished, "files": len(downloads), "bytes_done": done, "bytes_total": total,
            "speed": speed, "eta": eta}


def progress_line(label: str, p: dict) -> str:
    eta = "--:--" if p["eta"] is None else f"{int(p['eta']) // 60:02d}:{int(p['eta']) % 60:02d}"
    return (f"{label}: {p['files_done']}/{p['files']} files, {p['bytes_done'] / 2**20:.1f}/"
            f"{p['bytes_total'] / 2**20:.1f} MiB, {p['speed'] / 2**20:.1f} MiB/s, ETA {eta}")
