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


def error_lines(journal: list[str]) -> list[str]:
    """aria2's own error lines (which file, which error) from its unit's journal."""
    keep = ("errorCode=", "Download aborted", "ERROR")
    return [line.strip() for line in journal if any(k in line for k in keep)]
