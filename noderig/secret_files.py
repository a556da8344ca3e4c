"""Secrets on the controller (the Hub token, the server's API key): read from files only their
owner can read (mode 0600), never from argv; a file others can read is refused, not used.
No sentence here ever quotes a secret (nor a byte of one)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import NoderigError
from .server_settings import secret_problems


def read_private(path_text: str, what: str) -> str:
    """A secret from a file on the controller that only its owner can read (0600). A file that
    is empty, cannot be read or is not UTF-8 text is refused: a setting that names a secret
    file never means "no secret"."""
    path = Path(path_text).expanduser()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise NoderigError(f"the {what} file {path} does not exist; create it (mode 0600) or unset the setting")
    if mode & 0o077:
        raise NoderigError(f"the {what} file {path} is readable by others (mode {oct(mode & 0o777)}); chmod 600 it")
    try:
        secret = path.read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError:  # (its message would quote a byte of the secret)
        raise NoderigError(f"the {what} file {path} is not UTF-8 text; write the {what} in it as text") from None
    except OSError as e:
        raise NoderigError(f"the {what} file {path} cannot be read ({e.strerror or type(e).__name__}); "
                           "point the setting at a readable 0600 file") from None
    if not secret:
        raise NoderigError(f"the {what} file {path} is empty; put the {what} in it, or unset the setting")
    return secret


def read_token(token_file: str | None) -> str | None:
    """The Hub token: from ``token_file`` (must be private: 0600) or ``HF_TOKEN``."""
    if token_file:
        return read_private(token_file, "Hub token")
    return os.environ.get("HF_TOKEN") or None


def api_key_file_problem(path_text) -> str | None:
    """Why ``api_key_file`` cannot give the server its key, one sentence naming the setting, or
    None (also for a value that is not a path: the inventory check says so). Preflight asks
    before any change: a key the environment file would leave out would serve without one."""
    if not isinstance(path_text, str) or not path_text:
        return None
    try:
        found = secret_problems({"api_key": read_private(path_text, "API key")})
    except NoderigError as e:
        found = [str(e)]
    return f"inventory value api_key_file={path_text!r} is refused: {'; '.join(found)}" if found else None
