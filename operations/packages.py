"""Step 2, prerequisites: the system packages the runtime needs."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.facts.deb import DebPackages

from .facts import DpkgAudit
from .util import earlier_in_run, first_pass, operation

# Wait for another apt (unattended-upgrades, or the one a killed deploy left running) instead
# of failing on its lock; answer no question.
APT = ["DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", "-o", "DPkg::Lock::Timeout=600"]
# The same wait for a bare dpkg run: until dpkg's frontend lock (an fcntl lock, as apt and
# dpkg take it) is free, at most as long as apt waits.
WAIT_FOR_DPKG_LOCK = (
    "import fcntl, sys, time\n"
    "deadline = time.monotonic() + 600\n"
    "with open('/var/lib/dpkg/lock-frontend', 'a') as f:\n"
    "    while True:\n"
    "        try:\n"
    "            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "            break\n"
    "        except OSError:\n"
    "            if time.monotonic() > deadline:\n"
    "                sys.exit('dpkg is still locked by another process after 600 s; rerun when it is done')\n"
    "            time.sleep(1)\n"
)


# The step that installs aria2 before the other prerequisites (deploy.py): the checkpoint's
# download starts as soon as aria2 is there, and the rest is installed while it runs.
EARLY_PREREQUISITE = "Prerequisites: aria2, so the download starts first"


@operation(is_idempotent=True)
def present(packages: list[str]):
    """
    The Debian ``packages`` installed. Only the missing ones are installed, after refreshing
    the package lists (so a source fixed since the last run is seen at once); nothing runs
    when every one is there. dpkg left half-way by an interrupted install is finished first.

    + packages: Debian package names
    """
    installed = host.get_fact(DebPackages)
    missing = [p for p in dict.fromkeys(packages) if p not in installed]
    interrupted = host.get_fact(DpkgAudit)
    if not missing and not interrupted:
        host.noop(f"{len(packages)} packages installed: {', '.join(packages)}")
        return
    if first_pass(host):
        plan = [f"install {', '.join(missing)}" if missing else None,
                "finish the interrupted dpkg run" if interrupted else None]
        logger.info(f"[{host.name}] packages: " + "; ".join(p for p in plan if p))
    if interrupted:
        # "Interrupted" may be an apt a killed deploy left running: dpkg itself does not wait
        # for the lock as apt does (DPkg::Lock::Timeout), so wait for it first.
        yield StringCommand("python3", "-c", QuoteString(WAIT_FOR_DPKG_LOCK), "&&",
                            "DEBIAN_FRONTEND=noninteractive", "dpkg", "--configure", "-a",
                            "--force-confdef", "--force-confold")
    if missing:
        # An earlier step of this run refreshed the lists (the aria2 step before the download):
        # a second apt-get update seconds later learns nothing and costs a round of the
        # sources on the download's critical path. Another host, or the next run, refreshes its own.
        yield from install_commands(missing, refresh=not earlier_in_run(host, "apt-get update"))


def install_commands(packages: list[str], refresh: bool = True) -> list[StringCommand]:
    """How the deploy installs Debian packages, here and in repairs: the package lists
    refreshed first (a source fixed since the last run is seen at once), then ``packages``
    without recommends, a changed conffile kept as the admin left it (no question asked).

    + packages: Debian package names (each one quoted)
    + refresh: refresh the package lists first (False: an earlier step of this run did)
    """
    update = [StringCommand(*APT, "update")] if refresh else []
    return [*update, StringCommand(*APT, "install", "--no-install-recommends", "-o", "Dpkg::Options::=--force-confdef",
                                   "-o", "Dpkg::Options::=--force-confold", *(QuoteString(p) for p in packages))]
