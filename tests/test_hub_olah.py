"""The deploy through a real self-hosted Hub mirror: Olah (pyproject's hub-mirror extra, installed by
scripts/setup into .venv/hub-mirror), run on the controller's side of the lab bridge in front of the
lab's Hub, as an air-gapped fleet runs one in front of huggingface.co. Olah answers in its own ways
(a 307 on the tree route, /resolve/ served from its cache without a CDN redirect, a bare 404 when
offline, its own 504 when its upstream is down): the deploy converges through it, reruns as a no-op,
repairs a damaged shard, serves an offline cache, and refuses what the mirror cannot give in one
sentence with nothing changed on the node."""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, changed_ops, deploy, hub_call

pytestmark = pytest.mark.lab

OLAH = ROOT / ".venv" / "hub-mirror" / "bin" / "olah-cli"
MODEL = "moonshotai/Kimi-K2.6"
MODEL_DIR = "/models/Kimi-K2.6"
SHARD = "model-00002-of-000004.safetensors"
STEPS = "steps=prerequisites,checkpoint"
NOTHING_LISTENS = 1  # a port of the lab's services address where no service listens: the upstream is down


class Olah:
    """One Olah process, its config and log in ``workdir``, its cache in ``workdir/repos`` (kept
    across restarts: an offline restart serves what the online one fetched)."""

    def __init__(self, lab, workdir: Path):
        self.lab, self.workdir = lab, workdir
        self.host = lab.layout.controller_ip
        self.port = _free_port(self.host)
        self.url = f"http://{self.host}:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "olah.log"

    def start(self, *, offline: bool = False, upstream_port: int | None = None) -> None:
        """Olah in front of the lab Hub (or, with ``upstream_port``, of a port where nothing listens)."""
        layout = self.lab.layout
        hub = f"{layout.services_ip}:{upstream_port or layout.hub_port}"
        cdn = f"{layout.services_ip}:{upstream_port or layout.cdn_port}"
        config = self.workdir / "olah.toml"
        config.write_text(f'[basic]\nhost = "{self.host}"\nport = {self.port}\nrepos-path = "{self.workdir / "repos"}"\n'
                          f'hf-scheme = "http"\nhf-netloc = "{hub}"\nhf-lfs-netloc = "{cdn}"\nmirror-scheme = "http"\n'
                          f'mirror-netloc = "{self.host}:{self.port}"\nmirror-lfs-netloc = "{self.host}:{self.port}"\n'
                          f'[accessibility]\noffline = {"true" if offline else "false"}\n')
        with self.log.open("a") as log:
            self.proc = subprocess.Popen([str(OLAH), "-c", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.workdir, start_new_session=True)
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 120  # a readiness wait, not a speed claim: a loaded machine imports slowly
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"olah exited ({self.proc.returncode}):\n{self.log.read_text()[-3000:]}"
            try:
                urllib.request.urlopen(f"{self.url}/api/models/{MODEL}/revision/main", timeout=5).close()
                return
            except urllib.error.HTTPError:
                return  # it answers (an offline or upstream-less mirror with an error)
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"olah did not answer on {self.url}:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def served_to(self, client: str) -> set[str]:
        """Files Olah answered a /resolve/ GET for, with 200 or 206, to ``client`` (an IP)."""
        pattern = re.compile(rf'{re.escape(client)}:\d+ - "GET /{re.escape(MODEL)}/resolve/\w+/(\S+) HTTP/[\d.]+" 20[06]')
        return {m.group(1) for m in pattern.finditer(self.log.read_text())}


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def olah(lab, tmp_path_factory):
    if not OLAH.exists():
        pytest.fail(f"{OLAH} is missing: run scripts/setup (it installs pyproject's hub-mirror extra there)")
    mirror = Olah(lab, tmp_path_factory.mktemp("olah"))
    yield mirror
    mirror.stop()


def _via(mirror: Olah, *data: str):
    return deploy(mirror.lab, STEPS, f"hf_endpoint={mirror.url}", *data)


def _node_ip(lab) -> str:
    return lab.run("b300", "hostname -I").stdout.split()[0]


def test_the_deploy_converges_reruns_and_repairs_through_olah(lab, olah):
    lab.reset("b300")
    hub_call(lab, "/_lab/reset", {})
    olah.stop()
    olah.start()
    res, out = _via(olah)
    assert res.returncode == 0, out[-4000:]
    # the node fetched the shards from the mirror, not from the Hub behind it
    shards = {f"model-0000{i}-of-000004.safetensors" for i in range(1, 5)}
    assert shards <= olah.served_to(_node_ip(lab)), olah.log.read_text()[-3000:]

    res, out = _via(olah)
    assert res.returncode == 0 and changed_ops(out) == {}, out[-3000:]

    lab.run("b300", f"printf 'XXXX' | dd of={MODEL_DIR}/{SHARD} bs=1 seek=4096 conv=notrunc status=none")
    lab.run("b300", f"touch -d '2001-01-01' {MODEL_DIR}/{SHARD}")
    res, out = _via(olah)
    assert res.returncode == 0 and SHARD in out, out[-3000:]
    listed = hub_listed_sha256(lab, SHARD)
    assert lab.run("b300", f"sha256sum {MODEL_DIR}/{SHARD}").stdout.split()[0] == listed

    # the gated draft asked without a token: Olah answers as the Hub does for a repo that does not exist
    res, out = _via(olah, "hf_token_file=null")
    summary = out.split("--> noderig:")[-1]
    assert res.returncode != 0 and re.search(r"\bb300 +FAILED", summary), out[-3000:]
    assert "z-lab/Kimi-K2.6-DFlash does not exist on" in summary and "no token was given" in summary, summary


def test_an_offline_olah_serves_its_cache_and_refuses_what_it_lacks_in_one_sentence(lab, olah):
    # (after the test above: Olah's cache holds both checkpoints at main)
    olah.stop()
    olah.start(offline=True)
    lab.run("b300", f"rm -rf {MODEL_DIR} /models/Kimi-K2.6-DFlash")
    res, out = _via(olah)
    assert res.returncode == 0, out[-4000:]

    before = lab.run("b300", f"ls -la --time-style=full-iso {MODEL_DIR}").stdout
    unknown = "0123456789abcdef0123456789abcdef01234567"
    res, out = _via(olah, f"model_revision={unknown}")
    assert res.returncode != 0
    summary = out.split("--> noderig:")[-1]
    assert "b300" in summary and "FAILED" in summary, summary
    assert "answered HTTP 404" in summary and f"to list {MODEL}@{unknown}" in summary, summary
    assert "the repo or the revision is not there" in summary and "internal error" not in out
    assert "check model_repo, model_revision and hf_endpoint" in summary, summary  # a setting's name, no token
    assert lab.run("b300", f"ls -la --time-style=full-iso {MODEL_DIR}").stdout == before


def test_olah_without_its_upstream_fails_the_host_and_says_the_mirror_cannot_reach_it(lab, olah, tmp_path):
    olah.stop()
    cold = Olah(lab, tmp_path)  # an empty cache: everything must come from the upstream
    cold.start(upstream_port=NOTHING_LISTENS)
    try:
        res, out = _via(cold)
    finally:
        cold.stop()
    assert res.returncode != 0
    summary = out.split("--> noderig:")[-1]
    assert re.search(r"\bb300 +FAILED", summary), summary
    assert "answered HTTP 504" in summary and "cannot reach its upstream): rerun, or check the mirror" in summary


def hub_listed_sha256(lab, path: str) -> str:
    """The sha256 the lab Hub itself lists for ``path`` (read with huggingface_hub, not noderig)."""
    from huggingface_hub import HfApi

    info = HfApi(endpoint=lab.layout.hub_url, token=False).model_info(MODEL, files_metadata=True)
    return next(s.lfs.sha256 for s in info.siblings if s.rfilename == path)
