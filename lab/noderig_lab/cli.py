"""`noderig lab up|status|ssh|down`: the lab's subcommands, added to the `noderig` command
through its entry point (group `noderig.commands` in lab/pyproject.toml). Only argparse is
imported here: `noderig verify` and `noderig diagnose` load this module too."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def _lab():
    from .lab import Lab  # the lab pulls in more than building the parser needs

    return Lab()


def cmd_lab_up(args) -> int:
    inventory = _lab().up(targets=args.targets, inventory=args.inventory)
    print(inventory)  # last line: the inventory path, for `pyinfra "$(noderig lab up | tail -1)" deploy.py`
    return 0


def cmd_lab_status(args) -> int:
    status = _lab().status()
    if args.json:
        print(json.dumps(status, indent=2))
    elif not status["hosts"]:
        print("the lab is down (no lab record); start it with `noderig lab up`")
    else:
        print(f"services: {status['services']}  hub: {status['hub_url']}")
        for h in status["hosts"]:
            print(f"{h['name']:<10} {h['role']:<10} {h['ip']:<14} {h['state']}")
        print(f"inventory: {status['inventory']}")
    return 0 if status["up"] else 1


def cmd_lab_ssh(args) -> int:
    argv = _lab().ssh_argv(args.host, args.command)
    os.execvp(argv[0], argv)
    return 127  # not reached


def cmd_lab_down(args) -> int:
    _lab().down()
    print("lab down")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``lab`` and its subcommands to the `noderig` parser's subcommands ``sub``.

    + sub: what ``ArgumentParser.add_subparsers()`` returned for the `noderig` command
    """
    lab = sub.add_parser("lab", help="the test lab: real Debian hosts (systemd-nspawn), a local Hub, a package source")
    lab_sub = lab.add_subparsers(dest="lab_command", required=True)
    up = lab_sub.add_parser("up", help="boot the lab (reference ct200 + targets) and write its pyinfra inventory")
    up.add_argument("--targets", type=int, default=1, help="number of bare target hosts (default 1: b300)")
    up.add_argument("--inventory", type=Path, help="where to write the inventory (default inventory/lab.py)")
    up.set_defaults(func=cmd_lab_up)
    status = lab_sub.add_parser("status", help="hosts and services of the running lab")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_lab_status)
    ssh = lab_sub.add_parser("ssh", help="a shell, or one command, on a lab host")
    ssh.add_argument("host")
    ssh.add_argument("command", nargs=argparse.REMAINDER)
    ssh.set_defaults(func=cmd_lab_ssh)
    down = lab_sub.add_parser("down", help="stop every host and service the lab started, remove its network")
    down.set_defaults(func=cmd_lab_down)
