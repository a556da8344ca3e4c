"""The fan-out's peer server: nginx's configuration (noderig/peer_server.py) and the node-side
links to verified files (noderig/node/peer_links.py), on files made for each case: only bytes
the verified record vouches for are ever linked, by digest."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from noderig.node import peer_links, script_path
from noderig.node.verify_files import verify
from noderig.peer_server import nginx_conf


def test_nginx_conf_listens_on_the_cluster_address_and_admits_only_the_peers():
    conf = nginx_conf("10.0.0.11", 8378, ["10.0.0.13", "10.0.0.12", "10.0.0.12"])
    assert "        listen 10.0.0.11:8378;\n        allow 10.0.0.12/32;\n        allow 10.0.0.13/32;\n" \
           "        deny all;\n" in conf
    assert "daemon off;" in conf and "access_log off;" in conf and "autoindex off;" in conf
    assert "limit_except GET { deny all; }" in conf  # GET (and HEAD) only
    assert "root /run/noderig-peers/www;" in conf
    assert "[fd00::1]:8378" in nginx_conf("fd00::1", 8378, ["fd00::2"])


@pytest.mark.parametrize("address", ["node-1", "10.0.0.1; include /etc/shadow", "", "fe80::1%eth0",
                                     "fd00::1%x;\n    }\n    server { listen 80; autoindex on; }"])
def test_nginx_conf_refuses_anything_but_an_address(address):
    with pytest.raises(ValueError):
        nginx_conf(address, 8378, ["10.0.0.2"])
    with pytest.raises(ValueError):
        nginx_conf("10.0.0.1", 8378, [address])


def test_nginx_conf_needs_a_peer():
    with pytest.raises(ValueError):
        nginx_conf("10.0.0.1", 8378, [])


def _checkpoint(tmp_path, files: dict[str, bytes]) -> tuple[str, dict]:
    dest = tmp_path / "model"
    for name, data in files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
    manifest = {"repo": "org/m", "commit": "c" * 40, "files": [
        {"path": n, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()]}
    (dest / ".noderig").mkdir()
    (dest / ".noderig/manifest.json").write_text(json.dumps(manifest))
    return str(dest), manifest


def test_links_only_files_the_record_vouches_for(tmp_path):
    files = {"a.bin": b"a" * 100, "sub/b.json": b"{}", "c.txt": b"ccc"}
    dest, manifest = _checkpoint(tmp_path, files)
    verify(dest, manifest)  # hashes all three and records them
    sha = {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    # after hashing: one file changed (same size, new mtime), one is being downloaded again
    os.utime(f"{dest}/c.txt", ns=(1, 1))
    open(f"{dest}/sub/b.json.aria2", "w").close()
    out = peer_links.link(dest)
    assert out == {"served": {sha["a.bin"]: 100},
                   "skipped": {"c.txt": "changed since it was verified", "sub/b.json": "being downloaded"}}
    links = f"{dest}/.noderig/peer"
    assert sorted(os.listdir(links)) == [sha["a.bin"]]
    assert os.stat(f"{links}/{sha['a.bin']}").st_ino == os.stat(f"{dest}/a.bin").st_ino
    assert oct(os.stat(links).st_mode & 0o777) == "0o711"
    # the control file goes: b.json is linked on the next call; a link no longer vouched for goes
    os.unlink(f"{dest}/sub/b.json.aria2")
    os.unlink(f"{dest}/a.bin")
    assert peer_links.link(dest)["served"] == {sha["sub/b.json"]: 2}
    assert os.listdir(links) == [sha["sub/b.json"]]


def test_a_file_never_hashed_or_with_another_digest_is_not_linked(tmp_path):
    dest, manifest = _checkpoint(tmp_path, {"a.bin": b"x" * 10, "b.bin": b"y" * 10})
    st = os.stat(f"{dest}/a.bin")
    record = {"a.bin": {"size": 10, "mtime_ns": st.st_mtime_ns, "digest": "0" * 64}}  # a lie about a.bin
    (tmp_path / "model/.noderig/verified.json").write_text(json.dumps(record))
    assert peer_links.link(dest) == {"served": {}, "skipped": {"a.bin": "not verified", "b.bin": "not verified"}}


def test_a_symlinked_file_is_never_linked(tmp_path):
    dest, manifest = _checkpoint(tmp_path, {"a.bin": b"x" * 10})
    verify(dest, manifest)
    outside = tmp_path / "outside"
    outside.write_bytes(b"x" * 10)
    os.unlink(f"{dest}/a.bin")
    os.symlink(outside, f"{dest}/a.bin")
    assert peer_links.link(dest)["served"] == {}


def test_runs_as_a_script_beside_the_verifier(tmp_path):
    dest, manifest = _checkpoint(tmp_path, {"a.bin": b"x" * 10})
    verify(dest, manifest)
    shipped = tmp_path / "lib"
    shipped.mkdir()
    for name in ("peer_links.py", "verify_files.py", "hubpath.py"):
        (shipped / name).write_text(script_path(name).read_text())
    res = subprocess.run([sys.executable, "-I", str(shipped / "peer_links.py"), dest], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"served": {hashlib.sha256(b"x" * 10).hexdigest(): 10}, "skipped": {}}
