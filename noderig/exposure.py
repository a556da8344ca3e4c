"""Who can reach the server: a decision the inventory states, never a default.

Pure: inventory values in, a decision out. The server listens on loopback unless the
inventory names another address; beyond loopback it needs an API key, or a setting whose
name says the opposite was meant (``allow_unauthenticated_network_access``). Preflight
refuses the rest before anything changes on the node, and the dry run prints the decision.

    decide(server_host, port, api_key_file, allow_unauthenticated) -> Exposure
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
ALLOW_SETTING = "allow_unauthenticated_network_access"

# Decision kinds.
LOOPBACK = "loopback"
WITH_KEY = "exposed with key"
UNAUTHENTICATED = "explicitly unauthenticated"
REFUSED = "refused"


@dataclass(frozen=True)
class Exposure:
    kind: str  # one of LOOPBACK, WITH_KEY, UNAUTHENTICATED, REFUSED
    sentence: str  # what the dry run prints, or why the deploy refuses

    @property
    def refused(self) -> bool:
        return self.kind == REFUSED


def is_loopback(server_host) -> bool:
    """Whether ``server_host`` keeps the server on this machine: 127.0.0.0/8, ::1 or localhost.
    Anything else (0.0.0.0, ::, an interface address, another name) reaches beyond it."""
    if not isinstance(server_host, str):
        return False
    if server_host.lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(server_host.strip("[]")).is_loopback
    except ValueError:
        return False


def decide(server_host, port, api_key_file, allow_unauthenticated) -> Exposure:
    """
    The exposure the inventory asks for.

    + server_host: where the server listens (``server_host``)
    + port: its port (``server_port``), for the sentence
    + api_key_file: the API key file, or None (``api_key_file``)
    + allow_unauthenticated: ``allow_unauthenticated_network_access``; only ``True`` allows
      a server beyond loopback without a key (any other value refuses it)
    """
    where = f"{server_host}:{port}"
    if is_loopback(server_host):
        return Exposure(LOOPBACK, f"the server listens on {where} (loopback only: no other host can reach it)")
    if api_key_file:
        return Exposure(WITH_KEY, f"the server listens on {where}, reachable from other hosts, with an API key "
                                  "(api_key_file)")
    if allow_unauthenticated is True:
        return Exposure(UNAUTHENTICATED, f"the server listens on {where}, reachable from other hosts WITHOUT an "
                                         f"API key, as the inventory explicitly allows ({ALLOW_SETTING}=True)")
    return Exposure(REFUSED, f"server_host={server_host!r} would expose the server on port {port} to other "
                             "hosts without an API key: set api_key_file (a 0600 file with the key), or "
                             f"server_host='127.0.0.1', or {ALLOW_SETTING}=True if that is really meant")
