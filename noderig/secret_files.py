"""Secrets on the controller (the Hub token, the server's API key): read from files only their
owner can read (mode 0600), never from argv; a file others can read is refused, not used."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import NoderigError


def read_private(path_text: str, what: str) -> str | None:
    """A secret from a file on the controller that only its owner can read (0600)."""
    path = Path(path_text).expanduser()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise NoderigError(f"the {what} file {path} does not exist; create it (mode 0600) or unset the setting")
    if mode & 0o077:
        raise NoderigError(f"the {what} file {path} is readable by others (mode {oct(mode & 0o777)}); chmod 600 it")
    return path.read_text().strip() or None


def read_token(token_file: str | None) -> str | None:
    """The Hub token: from ``token_file`` (must be private: 0600) or ``HF_TOKEN``."""
    if token_file:
        return read_private(token_file, "Hub token")
    return os.environ.get("HF_TOKEN") or None
