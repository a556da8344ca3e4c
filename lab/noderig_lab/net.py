"""The lab network: one bridge, and a network namespace for the lab's own services.

The controller holds ``.1`` on the bridge (it reaches hosts over it); the services
namespace holds ``.2`` (Hub, CDN, package source); hosts are ``.11`` and up. Nothing is
routed off the bridge: hosts have no default route and forwarding stays off.
"""

from __future__ import annotations

import subprocess

from .layout import LabLayout


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def link_exists(name: str) -> bool:
    return _ip("link", "show", name, check=False).returncode == 0


def netns_exists(name: str) -> bool:
    return name in _ip("netns", "list", check=False).stdout.split()


def up(layout: LabLayout) -> None:
    if not link_exists(layout.bridge):
        _ip("link", "add", layout.bridge, "type", "bridge")
        _ip("addr", "add", f"{layout.controller_ip}/24", "dev", layout.bridge)
        _ip("link", "set", layout.bridge, "up")
    ns = layout.services_netns
    if not netns_exists(ns):
        host_end, ns_end = layout.services_veth, "eth0"
        _ip("netns", "add", ns)
        _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end, "netns", ns)
        _ip("link", "set", host_end, "master", layout.bridge)
        _ip("link", "set", host_end, "up")
        _ip("-n", ns, "addr", "add", f"{layout.services_ip}/24", "dev", ns_end)
        _ip("-n", ns, "link", "set", ns_end, "up")
        _ip("-n", ns, "link", "set", "lo", "up")


def down(layout: LabLayout) -> None:
    if netns_exists(layout.services_netns):
        _ip("netns", "del", layout.services_netns, check=False)  # takes its veth end along
    _ip("link", "del", layout.services_veth, check=False)
    if link_exists(layout.bridge):
        _ip("link", "del", layout.bridge, check=False)
