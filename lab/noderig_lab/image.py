"""The lab's golden root filesystem (debootstrap bookworm) and its Debian package source.

Built once and cached under ``<cache>/images/<key>/`` where the key hashes everything that
shapes the result (suite, mirror, package lists, this file's customisation). Hosts boot on
overlays of ``rootfs/``, so the image is never modified after it is built.

The package source holds the .deb files the deploy installs on a bare node (``python3-dev``,
``aria2`` and their dependencies), downloaded by apt inside the freshly built image so that
versions match it exactly. Lab hosts have no internet; they get these packages from the
lab's own package server, like a node behind a local mirror.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import os
import shutil
import subprocess
import time
from pathlib import Path

from noderig.errors import NoderigError
from . import aptrepo

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

# What every lab host has: a minimal Debian with systemd, sshd and a compiler, but not the
# runtime prerequisites the deploy is responsible for (those are in SOURCE_PACKAGES).
IMAGE_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "openssh-server", "rsync", "python3", "python3-venv",
    "gcc", "libc6-dev", "curl", "ca-certificates", "iproute2", "procps",
]
# What the lab's package source serves (with dependencies missing from the image): the
# deploy's prerequisites, nftables for the node firewall, nginx-light for the fan-out's peer server.
SOURCE_PACKAGES = ["python3-dev", "aria2", "nftables", "nginx-light"]

# Bump to force a rebuild (the key already covers the package lists and the setup code).
IMAGE_FORMAT = 3

SSHD_DROPIN = """\
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
"""


def image_key(mirror: str) -> str:
    """Hash of everything that shapes the image: the package lists and the setup code itself."""
    setup_code = inspect.getsource(Image._customise) + inspect.getsource(Image._download_source_packages)
    h = hashlib.sha256()
    for part in (SUITE, mirror, ",".join(IMAGE_PACKAGES), ",".join(SOURCE_PACKAGES), str(IMAGE_FORMAT),
                 SSHD_DROPIN, setup_code):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


class Image:
    """A built image: ``rootfs`` (overlay lower dir) and ``debs`` (a flat apt repository)."""

    def __init__(self, cache_dir: Path, mirror: str | None = None):
        self.mirror = mirror or os.environ.get("NODERIG_LAB_MIRROR", DEFAULT_MIRROR)
        self.key = image_key(self.mirror)
        self.dir = cache_dir / "images" / self.key
        self.rootfs = self.dir / "rootfs"
        self.debs = self.dir / "debs"
        self._complete = self.dir / ".complete"

    @property
    def is_built(self) -> bool:
        return self._complete.exists()

    def ensure(self, log=print) -> float:
        """Build the image unless cached; returns the seconds spent building (0 when cached)."""
        if self.is_built:
            return 0.0
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.dir.parent / f".{self.key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # parallel `lab up`s build it once
            if self.is_built:
                return 0.0
            t0 = time.monotonic()
            self._build(log)
            self._prune_old_images()
            return time.monotonic() - t0

    def _prune_old_images(self) -> None:
        """Images of earlier keys are dead weight (~350 MB each) unless a running host uses one."""
        mounts = Path("/proc/self/mounts").read_text()
        for other in self.dir.parent.iterdir():
            if other.is_dir() and other != self.dir and f"lowerdir={other}/rootfs" not in mounts:
                shutil.rmtree(other, ignore_errors=True)

    def _build(self, log) -> None:
        for tool in ("debootstrap", "chroot"):
            if not shutil.which(tool):
                raise NoderigError(
                    f"building the lab image needs `{tool}`, which is not installed on this "
                    "machine: run scripts/setup (or apt-get install debootstrap)."
                )
        build = self.dir.with_name(self.dir.name + ".build")
        shutil.rmtree(build, ignore_errors=True)
        root = build / "rootfs"
        root.parent.mkdir(parents=True)
        log(f"building the lab image {self.key} with debootstrap (about a minute, cached after)")
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(IMAGE_PACKAGES)}",
               SUITE, str(root), self.mirror]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).splitlines()[-15:])
            raise NoderigError(f"debootstrap failed (exit {res.returncode}) from {self.mirror}:\n{tail}")
        self._download_source_packages(root, build / "debs")
        self._customise(root)
        shutil.rmtree(self.dir, ignore_errors=True)
        (build / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
        os.rename(build, self.dir)

    def _download_source_packages(self, root: Path, debs: Path) -> None:
        # apt in the new image resolves exactly what is missing from it; --download-only
        # leaves the .debs in its archive cache without installing them.
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
        archives = root / "var/cache/apt/archives"
        for deb in archives.glob("*.deb"):
            deb.unlink()
        res = subprocess.run(
            ["chroot", str(root), "apt-get", "install", "-y", "-q", "--download-only",
             "--no-install-recommends", *SOURCE_PACKAGES],
            capture_output=True, text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if res.returncode != 0:
            raise NoderigError(f"could not download {SOURCE_PACKAGES} for the lab package source:\n{res.stderr[-2000:]}")
        debs.mkdir(parents=True)
        for deb in archives.glob("*.deb"):
            shutil.move(str(deb), debs / deb.name)
        aptrepo.write_index(debs, origin="noderig-lab", suite=SUITE)

    def _customise(self, root: Path) -> None:
        def chroot(*args: str) -> None:
            subprocess.run(["chroot", str(root), *args], check=True, capture_output=True)

        chroot("passwd", "-d", "root")
        chroot("systemctl", "enable", "systemd-networkd")
        # Addresses are static; waiting for "online" only slows the boot. The apt timers
        # would race the deploy for the dpkg lock.
        chroot("systemctl", "mask", "systemd-networkd-wait-online.service",
               "apt-daily.timer", "apt-daily-upgrade.timer")
        (root / "etc/ssh/sshd_config.d/10-noderig-lab.conf").write_text(SSHD_DROPIN)
        for key in (root / "etc/ssh").glob("ssh_host_*"):
            key.unlink()  # every host gets its own keys at creation
        # No mirror is reachable from a lab host: the lab writes its own source at boot.
        (root / "etc/apt/sources.list").write_text("")
        (root / "etc/resolv.conf").write_text("")
        (root / "etc/machine-id").write_text("")
        # Slim the image: apt's caches (keep its partial/ dirs) and documentation.
        for cache in ("var/cache/apt", "var/cache/apt/archives", "var/lib/apt/lists"):
            for child in (root / cache).iterdir():
                if child.is_file() and child.name != "lock":
                    child.unlink()
        for docs in ("usr/share/doc", "usr/share/man", "usr/share/locale"):
            for child in (root / docs).iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
