"""The venv copy's one-time SSH key: what the node authorises and what the reference trusts.

Pure text, checked before it is written: the key can do nothing but receive into the venv
(a forced ``rrsync -wo``, rsync's own restricted-receiver script), from the reference's
address only, with every other SSH feature off (``restrict``), until an expiry a few minutes
ahead sized to the copy. Every value that goes into these lines is checked here, so no
inventory value can add an option to ``authorized_keys`` or a host to ``known_hosts``.
"""

from __future__ import annotations

import math
import re
import time

from .errors import NoderigError
from .server_settings import has_control, ip_address, is_host

# rsync's restricted-receiver script (Debian's rsync >= 3.2.4 ships it here).
RRSYNC = "/usr/bin/rrsync"
# The expiry: a margin for the connection to start, plus the copy at a pessimistic rate.
EXPIRY_MARGIN_SECONDS = 5 * 60
EXPIRY_RATE_BYTES = 20 * 2**20

_PUBLIC_KEY = re.compile(r"^ssh-ed25519 [A-Za-z0-9+/]+={0,2}\Z")
_COMMENT = re.compile(r"^[A-Za-z0-9_.-]{1,200}\Z")
_VENV = re.compile(r"^/[A-Za-z0-9_./+-]*\Z")


def expiry(now: float, bytes_to_copy: int) -> str:
    """``expiry-time`` for a copy of ``bytes_to_copy`` starting at ``now`` (the node's clock,
    epoch seconds): ``YYYYMMDDHHMMZ``, rounded up to the next minute."""
    seconds = EXPIRY_MARGIN_SECONDS + math.ceil(max(bytes_to_copy, 0) / EXPIRY_RATE_BYTES)
    return time.strftime("%Y%m%d%H%MZ", time.gmtime(math.ceil((now + seconds) / 60) * 60))


def is_ip(text: str) -> bool:
    """An IP address without an IPv6 zone (nginx and nft, where these go, take none)."""
    try:
        ip_address(text)
        return True
    except ValueError:
        return False


def _check_host(address: str, what: str) -> None:
    if not is_host(address):
        raise NoderigError(f"{what} {address!r} is not an IP address or a host name; fix ssh_hostname")


def authorized_line(public_key: str, comment: str, from_addresses: list[str], venv: str, expires: str) -> str:
    """The node's ``authorized_keys`` line for the copy key. ``from_addresses``: the
    reference's IP addresses (sshd matches host names only with ``UseDNS yes``)."""
    if not from_addresses:
        raise NoderigError("the reference has no address the node could resolve; set its ssh_hostname to an IP")
    for address in from_addresses:
        _check_host(address, "the reference's address")
    if not _PUBLIC_KEY.match(public_key) or not _COMMENT.match(comment):
        raise NoderigError(f"the copy key {public_key[:40]!r} ({comment!r}) is not an ed25519 public key")
    if not _VENV.match(venv) or ".." in venv.split("/") or venv == "/":
        raise NoderigError(f"venv_path={venv!r} cannot be the copy key's rrsync root; use a path like /opt/sglang/venv")
    if not re.match(r"^\d{12}Z\Z", expires):
        raise NoderigError(f"the copy key expiry {expires!r} is not YYYYMMDDHHMMZ")
    sources = ",".join(from_addresses)
    options = f'restrict,command="{RRSYNC} -wo {venv}",from="{sources}",expiry-time="{expires}"'
    return f"{options} {public_key} {comment}"


def known_hosts_line(address: str, port: int, host_key: str) -> str:
    """The reference's ``known_hosts`` line for the node: ``[address]:port`` when the port is
    not 22 (as OpenSSH looks it up), and only the key type and key of the node's host key."""
    _check_host(address, "the node's address")
    fields = host_key.split()
    if len(fields) < 2 or not _PUBLIC_KEY.match(f"{fields[0]} {fields[1]}") or has_control(host_key.strip()):
        raise NoderigError(f"the node's ssh host key {host_key[:60]!r} is not an ed25519 public key")
    name = address if port == 22 else f"[{address}]:{port}"
    return f"{name} {fields[0]} {fields[1]}\n"


def rsync_destination(address: str) -> str:
    """rsync's destination for the copy: the root of the key's rrsync directory (rrsync maps
    ``/`` there), with an IPv6 address in brackets."""
    _check_host(address, "the node's address")
    return f"root@[{address}]:/" if ":" in address else f"root@{address}:/"
