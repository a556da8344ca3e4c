"""The lab's flat package index: every field apt needs (the lab tier installs from it for real)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from noderig_lab.aptrepo import write_index


def _make_deb(tmp_path, name: str, version: str):
    pkg = tmp_path / "build" / name
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: lab <lab@example.invalid>\n"
        f"Description: test package {name}\n")
    (pkg / "usr/share").mkdir(parents=True)
    (pkg / "usr/share" / f"{name}.txt").write_text("hello\n")
    out = tmp_path / "repo" / f"{name}_{version}_all.deb"
    out.parent.mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(pkg), str(out)], check=True, capture_output=True)
    return out


@pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="needs dpkg-deb (Debian)")
def test_index_lists_each_deb_with_size_and_hashes(tmp_path):
    import hashlib

    debs = [_make_deb(tmp_path, "noderig-a", "1.0"), _make_deb(tmp_path, "noderig-b", "2.1")]
    write_index(tmp_path / "repo", origin="test", suite="bookworm")
    packages = (tmp_path / "repo" / "Packages").read_text()
    stanzas = [s for s in packages.split("\n\n") if s.strip()]
    assert len(stanzas) == 2
    for deb, stanza in zip(debs, stanzas):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line)
        assert fields["Filename"] == f"./{deb.name}"
        assert int(fields["Size"]) == deb.stat().st_size
        assert fields["SHA256"] == hashlib.sha256(deb.read_bytes()).hexdigest()
    release = (tmp_path / "repo" / "Release").read_text()
    digest = hashlib.sha256(packages.encode()).hexdigest()
    assert f" {digest} {len(packages.encode())} Packages" in release
