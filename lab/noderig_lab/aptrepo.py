"""A flat Debian repository (``deb [trusted=yes] URL ./``) from a directory of .deb files.

apt needs ``Packages`` (each .deb's control stanza plus Filename, Size and hashes) and a
``Release`` listing the index files' hashes; an unsigned Release is accepted for a source
marked ``trusted=yes``. The control fields come from ``dpkg-deb``, present on any Debian.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path


def _digests(path: Path) -> dict[str, str]:
    md5, sha256 = hashlib.md5(), hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            md5.update(block)
            sha256.update(block)
    return {"MD5sum": md5.hexdigest(), "SHA256": sha256.hexdigest()}


def package_stanza(deb: Path) -> str:
    control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
    fields = {"Filename": f"./{deb.name}", "Size": str(deb.stat().st_size), **_digests(deb)}
    return control.rstrip("\n") + "\n" + "".join(f"{k}: {v}\n" for k, v in fields.items())


def write_index(repo: Path, origin: str, suite: str) -> None:
    stanzas = [package_stanza(deb) for deb in sorted(repo.glob("*.deb"))]
    packages = repo / "Packages"
    packages.write_text("\n".join(stanzas))
    size = packages.stat().st_size
    digests = _digests(packages)
    release = [
        f"Origin: {origin}",
        f"Label: {origin}",
        f"Suite: {suite}",
        f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S UTC', time.gmtime())}",
        "MD5Sum:",
        f" {digests['MD5sum']} {size} Packages",
        "SHA256:",
        f" {digests['SHA256']} {size} Packages",
    ]
    (repo / "Release").write_text("\n".join(release) + "\n")
