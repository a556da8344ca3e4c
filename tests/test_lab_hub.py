"""The lab Hub and its generated checkpoints, driven by the REAL huggingface_hub client and
the REAL aria2c (fast tier: 127.0.0.1 only, free ports, tmp dirs, bounded waits)."""

from __future__ import annotations

import hashlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
import math
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import safetensors
from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub import parse_local_safetensors_file_metadata
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from noderig_lab import checkpoints
from noderig_lab.checkpoints import DRAFT_REPO, KIMI_REPO, MiB, RepoSpec, ensure_lab_repos, generate_repo
from noderig_lab.hub import SIDECAR, start_hub

from tests.conftest import parallel_ranges_rate

TOKEN = "hf_labtesttoken0123456789"
SHARD_RE = re.compile(r"model-(\d{5})-of-(\d{6})\.safetensors")
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8, "F64": 8, "U8": 1, "I8": 1, "BOOL": 1}
ARIA2C = shutil.which("aria2c")
needs_aria2 = pytest.mark.skipif(ARIA2C is None, reason="aria2c is not installed")


# ---------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Path]:
    # Small but multi-shard: ~8 MiB of weights in 3 MiB shards, a 1 MiB gated draft.
    return ensure_lab_repos(tmp_path_factory.mktemp("checkpoints"), shard_bytes=3 * MiB,
                            kimi_bytes=8 * MiB, draft_bytes=1 * MiB)


@pytest.fixture
def hub(repos):
    root = repos[KIMI_REPO].parents[1]
    h = start_hub(root, tokens={TOKEN}, gated={DRAFT_REPO})
    yield h
    h.stop()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_blob_sha1(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def repo_files(repo_dir: Path) -> dict[str, Path]:
    return {p.relative_to(repo_dir).as_posix(): p for p in sorted(repo_dir.rglob("*")) if p.is_file()}


def shards(repo_dir: Path) -> list[str]:
    return sorted(p.name for p in repo_dir.iterdir() if SHARD_RE.fullmatch(p.name))


def read_header(path: Path) -> tuple[int, dict]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return n, json.loads(f.read(n))


def http(url: str, method: str = "GET", headers: dict | None = None, data: bytes | None = None):
    """(status, headers, body) without raising on 4xx/5xx and without following redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect, urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def lab_post(hub, action: str, payload: dict | None = None):
    return http(f"{hub.url}/_lab/{action}", "POST", {"Content-Type": "application/json"},
                json.dumps(payload or {}).encode())


def lab_stats(hub) -> dict:
    status, _, body = http(f"{hub.url}/_lab/stats")
    assert status == 200
    return json.loads(body)


def aria2(url: str, out_dir: Path, name: str, *extra: str, timeout: float = 20) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    cmd = [ARIA2C, "--no-conf", "-x4", "-s4", "-k1M", "--dir", str(out_dir), "--out", name,
           "--allow-overwrite=true", "--auto-file-renaming=false", "--file-allocation=none",
           "--connect-timeout=5", "--timeout=10", "--console-log-level=warn", "--summary-interval=0",
           *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def api(hub, token=False) -> HfApi:
    return HfApi(endpoint=hub.url, token=token)


# ---------------------------------------------------------------------------------------
# generated checkpoints


def test_shards_are_valid_safetensors_with_real_names(repos):
    repo = repos[KIMI_REPO]
    names = shards(repo)
    assert len(names) >= 3
    totals = {SHARD_RE.fullmatch(n).group(2) for n in names}
    assert totals == {f"{len(names):06d}"}
    assert [int(SHARD_RE.fullmatch(n).group(1)) for n in names] == list(range(1, len(names) + 1))

    index = json.loads((repo / "model.safetensors.index.json").read_text())
    seen: dict[str, str] = {}
    data_bytes = 0
    for name in names:
        path = repo / name
        n, header = read_header(path)
        assert n % 8 == 0 and n <= 100_000_000
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        start = 0
        for tname, info in sorted(tensors.items(), key=lambda kv: kv[1]["data_offsets"]):
            b, e = info["data_offsets"]
            assert b == start, f"{name}: {tname} not contiguous"
            assert e - b == math.prod(info["shape"]) * DTYPE_BYTES[info["dtype"]]
            start = e
        assert path.stat().st_size == 8 + n + start
        data_bytes += start
        # The reference (Rust) validator, and huggingface_hub's own parser, accept the file.
        assert {t for t, _ in safetensors.deserialize(path.read_bytes())} == set(tensors)
        meta = parse_local_safetensors_file_metadata(path)
        assert {t: list(i.data_offsets) for t, i in meta.tensors.items()} == {
            t: i["data_offsets"] for t, i in tensors.items()}
        try:
            import numpy  # noqa: F401
        except ImportError:
            pass
        else:
            with safetensors.safe_open(path, framework="numpy") as f:
                assert set(f.keys()) == set(tensors)
        for t in tensors:
            assert t not in seen, f"{t} in two shards"
            seen[t] = name

    assert index["weight_map"] == seen
    assert index["metadata"]["total_size"] == data_bytes

    # Names and dtypes as in the real checkpoint; embeddings after the layers, vision last.
    header_of = {n: read_header(repo / n)[1] for n in names}
    expert = "language_model.model.layers.1.mlp.experts.0.gate_proj."
    h = header_of[seen[expert + "weight_packed"]]
    assert h[expert + "weight_packed"]["dtype"] == "I32"
    assert h[expert + "weight_scale"]["dtype"] == "BF16"
    rows, packed_cols = h[expert + "weight_packed"]["shape"]
    shape_bytes = (repo / seen[expert + "weight_shape"]).read_bytes()
    n = read_header(repo / seen[expert + "weight_shape"])[0]
    b, e = header_of[seen[expert + "weight_shape"]][expert + "weight_shape"]["data_offsets"]
    assert struct.unpack("<2i", shape_bytes[8 + n + b: 8 + n + e]) == (rows, packed_cols * 8)
    for t in ("language_model.model.embed_tokens.weight", "language_model.lm_head.weight",
              "language_model.model.layers.0.mlp.down_proj.weight", "vision_tower.encoder.blocks.0.wqkv.weight"):
        assert t in seen
    assert seen["mm_projector.proj.0.weight"] == names[-1]
    assert seen["language_model.model.layers.0.self_attn.q_a_proj.weight"] == names[0]

    config = json.loads((repo / "config.json").read_text())
    assert config["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert config["model_type"] == "kimi_k25"
    assert config["text_config"]["model_type"] == "kimi_k2"
    assert "vision_config" in config
    for f in ("generation_config.json", "tokenizer_config.json", "tiktoken.model", "chat_template.jinja",
              "configuration_kimi_k25.py", "modeling_kimi_k25.py", "preprocessor_config.json", "README.md"):
        assert (repo / f).is_file(), f

    draft = repos[DRAFT_REPO]
    assert json.loads((draft / "config.json").read_text())["block_size"] == 16
    assert safetensors.deserialize((draft / "model.safetensors").read_bytes())


def test_generation_is_deterministic_cached_and_atomic(tmp_path, monkeypatch):
    spec = RepoSpec("org/tiny", "kimi-k2.6", weight_bytes=1 * MiB, shard_bytes=256 * 1024, seed=7)
    generate_repo(spec, tmp_path / "a")
    generate_repo(spec, tmp_path / "b")
    a, b = repo_files(tmp_path / "a"), repo_files(tmp_path / "b")
    assert a.keys() == b.keys()
    assert all(a[k].read_bytes() == b[k].read_bytes() for k in a)

    specs = [spec]
    cache = tmp_path / "cache"
    first = ensure_lab_repos(cache, specs=specs)
    mtimes = {p: p.stat().st_mtime_ns for p in repo_files(first["org/tiny"]).values()}
    assert ensure_lab_repos(cache, specs=specs) == first
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # not regenerated
    assert (first["org/tiny"].parents[1] / SIDECAR).is_file()  # hashed once, at generation
    other = ensure_lab_repos(cache, specs=[RepoSpec("org/tiny", "kimi-k2.6", 1 * MiB, 512 * 1024, seed=7)])
    assert other["org/tiny"].parent.parent != first["org/tiny"].parent.parent  # new key

    def crash(spec, dest):
        (Path(dest) / "partial").mkdir(parents=True)
        raise OSError("disk full")

    monkeypatch.setattr(checkpoints, "generate_repo", crash)
    with pytest.raises(OSError):
        ensure_lab_repos(tmp_path / "crash", specs=specs)
    assert list((tmp_path / "crash").iterdir()) == []  # no half repo, no leftovers


# ---------------------------------------------------------------------------------------
# the Hub through the real client


def test_listing_matches_files_at_a_revision(hub, repos):
    repo = repos[KIMI_REPO]
    local = repo_files(repo)
    info = api(hub).model_info(KIMI_REPO, files_metadata=True)
    sha = info.sha
    assert re.fullmatch(r"[0-9a-f]{40}", sha)
    assert api(hub).model_info(KIMI_REPO, revision=sha).sha == sha
    assert {s.rfilename for s in info.siblings} == set(local)
    for s in info.siblings:
        path = local[s.rfilename]
        assert s.size == path.stat().st_size
        if s.rfilename.endswith(".safetensors") or s.rfilename == "tiktoken.model":
            assert s.lfs.sha256 == sha256_file(path) and s.lfs.size == s.size
        else:
            assert s.lfs is None and s.blob_id == git_blob_sha1(path)
    assert info.safetensors.total > 0

    tree = list(api(hub).list_repo_tree(KIMI_REPO, revision=sha, recursive=True))
    assert {f.path: f.size for f in tree} == {k: p.stat().st_size for k, p in local.items()}
    for f in tree:
        if f.lfs:
            assert f.lfs.sha256 == sha256_file(local[f.path])

    name = shards(repo)[0]
    (entry,) = api(hub).get_paths_info(KIMI_REPO, [name, "no-such-file"], revision=sha)
    assert entry.path == name and entry.lfs.sha256 == sha256_file(repo / name)


def test_download_through_redirect(hub, repos, tmp_path):
    name = shards(repos[KIMI_REPO])[1]
    path = hf_hub_download(KIMI_REPO, name, revision="main", endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert Path(path).read_bytes() == (repos[KIMI_REPO] / name).read_bytes()
    stats = lab_stats(hub)
    assert stats["status"]["by_kind"]["resolve"]["302"] >= 1
    assert stats["requests"]["by_kind"]["cdn"] >= 1

    cfg = hf_hub_download(KIMI_REPO, "config.json", endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert Path(cfg).read_bytes() == (repos[KIMI_REPO] / "config.json").read_bytes()
    assert lab_stats(hub)["requests"]["by_kind"]["cdn"] == stats["requests"]["by_kind"]["cdn"]  # served directly


def test_file_metadata_points_at_the_cdn(hub, repos):
    repo = repos[KIMI_REPO]
    sha = api(hub).model_info(KIMI_REPO).sha
    name = shards(repo)[0]
    meta = get_hf_file_metadata(hf_hub_url(KIMI_REPO, name, revision=sha, endpoint=hub.url), token=False)
    assert meta.location.startswith(hub.cdn_url + "/")
    assert meta.size == (repo / name).stat().st_size
    assert meta.etag == sha256_file(repo / name)
    assert meta.commit_hash == sha

    url = hf_hub_url(KIMI_REPO, "config.json", endpoint=hub.url)
    small = get_hf_file_metadata(url, token=False)
    assert small.location == url and small.etag == git_blob_sha1(repo / "config.json")

    # Safetensors headers read remotely (Range requests through the redirect) match the files.
    remote = api(hub).get_safetensors_metadata(KIMI_REPO, revision=sha)
    assert set(remote.files_metadata) == set(shards(repo))
    assert remote.weight_map == json.loads((repo / "model.safetensors.index.json").read_text())["weight_map"]


def test_gated_repo_needs_a_valid_token(hub, repos, tmp_path):
    with pytest.raises(GatedRepoError):
        api(hub).model_info(DRAFT_REPO)
    with pytest.raises(GatedRepoError):
        list(api(hub).list_repo_tree(DRAFT_REPO))
    with pytest.raises(GatedRepoError):
        hf_hub_download(DRAFT_REPO, "model.safetensors", endpoint=hub.url, cache_dir=tmp_path, token=False)
    with pytest.raises(HfHubHTTPError) as bad:  # a wrong token is refused as such, like the real Hub
        api(hub, token="hf_wrong").model_info(DRAFT_REPO)
    assert bad.value.response.status_code == 401 and not isinstance(bad.value, GatedRepoError)

    assert api(hub, TOKEN).whoami()["name"]
    assert api(hub, TOKEN).model_info(DRAFT_REPO, files_metadata=True).gated == "manual"
    path = hf_hub_download(DRAFT_REPO, "model.safetensors", endpoint=hub.url, cache_dir=tmp_path, token=TOKEN)
    assert Path(path).read_bytes() == (repos[DRAFT_REPO] / "model.safetensors").read_bytes()
    assert lab_stats(hub)["cdn"].get("authorization_headers", 0) == 0  # the client dropped the token

    # The signed CDN URL, resolved with the token, works without it.
    meta = get_hf_file_metadata(hf_hub_url(DRAFT_REPO, "model.safetensors", endpoint=hub.url), token=TOKEN)
    status, _, body = http(meta.location)
    assert status == 200 and hashlib.sha256(body).hexdigest() == meta.etag

    lab_post(hub, "faults", {"gated": {DRAFT_REPO: False}})
    assert api(hub).model_info(DRAFT_REPO).sha


def test_unknown_revision_file_and_repo(hub, tmp_path):
    with pytest.raises(RevisionNotFoundError):
        api(hub).model_info(KIMI_REPO, revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(KIMI_REPO, "config.json", revision="0" * 40, endpoint=hub.url, cache_dir=tmp_path,
                        token=False)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(KIMI_REPO, "nope.json", endpoint=hub.url, cache_dir=tmp_path, token=False)
    with pytest.raises(RepositoryNotFoundError):
        api(hub).model_info("nobody/nothing")


def test_cdn_ranges_signatures_and_expiry(hub, repos):
    repo = repos[KIMI_REPO]
    name = shards(repo)[0]
    data = (repo / name).read_bytes()
    status, headers, _ = http(hf_hub_url(KIMI_REPO, name, endpoint=hub.url), "HEAD")
    assert status == 302 and headers["X-Linked-Size"] == str(len(data))
    cdn = headers["Location"]

    for rng, want in (("bytes=0-9", data[:10]), ("bytes=100-", data[100:]), ("bytes=-7", data[-7:])):
        status, h, body = http(cdn, headers={"Range": rng})
        assert status == 206 and body == want and h["Accept-Ranges"] == "bytes"
        assert h["Content-Range"].endswith(f"/{len(data)}")
    assert http(cdn, headers={"Range": f"bytes={len(data)}-"})[0] == 416
    assert http(cdn.replace("Signature=", "Signature=0"))[0] == 403

    lab_post(hub, "faults", {"redirect_ttl": 0})
    status, headers, _ = http(hf_hub_url(KIMI_REPO, name, endpoint=hub.url), "HEAD")
    status, _, body = http(headers["Location"])
    assert status == 403 and b"expired" in body
    assert lab_stats(hub)["cdn"]["expired"] == 1


def test_fault_switches_and_reset(hub):
    status, _, body = lab_post(hub, "faults", {"bogus": 1})
    assert status == 400 and b"unknown fault" in body
    assert lab_post(hub, "faults", {"status": {"code": 503, "count": 0}})[0] == 400

    lab_post(hub, "faults", {"status": {"code": 500, "count": 1, "scope": "api"}})
    with pytest.raises(HfHubHTTPError) as err:
        api(hub).model_info(KIMI_REPO)
    assert err.value.response.status_code == 500
    assert api(hub).model_info(KIMI_REPO).sha  # count 1: only the next request
    assert lab_stats(hub)["faults_applied"] == {"status": 1}

    lab_post(hub, "faults", {"status": 502})  # shorthand: always, all scopes
    assert json.loads(http(f"{hub.url}/_lab/faults")[2])["status"]["count"] == -1
    assert lab_post(hub, "reset")[0] == 200
    assert api(hub).model_info(KIMI_REPO).sha
    assert lab_stats(hub)["requests"]["total"] == 1


def test_hashes_are_cached_in_a_sidecar(repos, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(repos[DRAFT_REPO], root / DRAFT_REPO)
    with start_hub(root) as h:
        before = {f.path: f.sha256 for f in h.repos[DRAFT_REPO].files.values()}
    sidecar = json.loads((root / SIDECAR).read_text())
    key = f"{DRAFT_REPO}/model.safetensors"
    assert sidecar["files"][key]["sha256"] == before["model.safetensors"]

    sidecar["files"][key]["sha256"] = "f" * 64  # same (size, mtime): trusted, not re-hashed
    (root / SIDECAR).write_text(json.dumps(sidecar))
    with start_hub(root) as h:
        assert h.repos[DRAFT_REPO].files["model.safetensors"].sha256 == "f" * 64
    os.utime(root / key, ns=(1, 1))  # changed mtime: hashed again
    with start_hub(root) as h:
        assert h.repos[DRAFT_REPO].files["model.safetensors"].sha256 == before["model.safetensors"]


def test_cli_serves_until_sigterm(repos, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# lab tokens\n{TOKEN}\n")
    root = repos[KIMI_REPO].parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "noderig_lab.hub", "--root", str(root), "--bind", "127.0.0.1", "--port", "0",
         "--cdn-port", "0", "--tokens-file", str(tokens), "--gated", DRAFT_REPO],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        assert ready, "the hub did not print its listening line"
        line = proc.stdout.readline()
        url = re.search(r"url=(\S+)", line).group(1)
        assert re.search(r"cdn_url=http://127\.0\.0\.1:\d+", line)
        assert HfApi(endpoint=url, token=TOKEN).model_info(DRAFT_REPO).sha
        with pytest.raises(GatedRepoError):
            HfApi(endpoint=url, token=False).model_info(DRAFT_REPO)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


# ---------------------------------------------------------------------------------------
# the Hub through the real aria2c


@needs_aria2
def test_aria2_follows_redirect_with_parallel_ranges(hub, repos, tmp_path):
    name = shards(repos[KIMI_REPO])[0]
    size = (repos[KIMI_REPO] / name).stat().st_size
    lab_post(hub, "faults", {"rate_limit_bps": {"bps": parallel_ranges_rate(size)}})
    r = aria2(hf_hub_url(KIMI_REPO, name, endpoint=hub.url), tmp_path, name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sha256_file(tmp_path / name) == sha256_file(repos[KIMI_REPO] / name)
    stats = lab_stats(hub)
    f = stats["files"][f"{KIMI_REPO}/{name}"]
    assert f["range_requests"] >= 2 and f["max_concurrent"] >= 2, f
    assert stats["status"]["by_kind"]["resolve"]["302"] >= 1
    assert stats["status"]["by_kind"]["cdn"]["206"] >= 2


@needs_aria2
def test_aria2_resumes_after_dropped_connections(hub, repos, tmp_path):
    name = shards(repos[KIMI_REPO])[0]
    lab_post(hub, "faults", {"drop_after_bytes": {"bytes": 300_000, "count": 2, "scope": "cdn"}})
    r = aria2(hf_hub_url(KIMI_REPO, name, endpoint=hub.url), tmp_path, name, "--max-tries=5", "--retry-wait=0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sha256_file(tmp_path / name) == sha256_file(repos[KIMI_REPO] / name)
    stats = lab_stats(hub)
    assert stats["faults_applied"]["drop_after_bytes"] == 2
    assert stats["files"][f"{KIMI_REPO}/{name}"]["dropped"] == 2


@needs_aria2
def test_aria2_gives_up_on_a_503_storm_and_an_expired_redirect(hub, repos, tmp_path):
    name = shards(repos[KIMI_REPO])[0]
    url = hf_hub_url(KIMI_REPO, name, endpoint=hub.url)
    lab_post(hub, "faults", {"status": {"code": 503, "count": -1, "scope": "cdn"}})
    r = aria2(url, tmp_path, name, "--max-tries=2", "--retry-wait=1")
    assert r.returncode != 0
    stats = lab_stats(hub)
    assert stats["status"]["by_kind"]["cdn"] == {"503": 2}  # bounded: one try per --max-tries
    assert "503" not in stats["status"]["by_kind"]["resolve"]  # scoped to the CDN

    lab_post(hub, "reset")
    lab_post(hub, "faults", {"redirect_ttl": 0})
    r = aria2(url, tmp_path, name, "--max-tries=2", "--retry-wait=0")
    assert r.returncode != 0
    assert lab_stats(hub)["status"]["by_kind"]["cdn"].get("403", 0) >= 1


@needs_aria2
def test_aria2_forwards_the_token_to_the_cdn_unless_pre_resolved(hub, repos, tmp_path):
    url = hf_hub_url(DRAFT_REPO, "model.safetensors", endpoint=hub.url)
    lab_post(hub, "faults", {"reject_cdn_authorization": True})  # as S3 does behind a signed URL
    r = aria2(url, tmp_path, "model.safetensors", f"--header=Authorization: Bearer {TOKEN}", "--max-tries=1")
    assert r.returncode != 0
    assert lab_stats(hub)["cdn"]["authorization_headers"] >= 1

    # The deploy's way: resolve with the token, hand aria2 the token-free signed URL.
    location = get_hf_file_metadata(url, token=TOKEN).location
    r = aria2(location, tmp_path, "model.safetensors", "--max-tries=1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sha256_file(tmp_path / "model.safetensors") == sha256_file(repos[DRAFT_REPO] / "model.safetensors")


# ---------------------------------------------------------------------------------------
# What mirrors and the real Hub do that a client must cope with (issue: real Hubs and mirrors)


def test_every_get_route_answers_head_like_the_real_hub(hub):
    sha = api(hub).model_info(KIMI_REPO).sha
    for path in (f"/api/models/{KIMI_REPO}", f"/api/models/{KIMI_REPO}/revision/main",
                 f"/api/models/{KIMI_REPO}/tree/{sha}", f"/api/models/{KIMI_REPO}/refs"):
        status, headers, body = http(hub.url + path, method="HEAD")
        assert status == 200 and body == b"", path


def test_mirror_mode_lists_names_only_and_serves_files_itself(hub, repos):
    lab_post(hub, "faults", {"mirror": True})
    info = api(hub).model_info(KIMI_REPO, files_metadata=True)
    assert info.siblings and all(s.size is None and s.lfs is None for s in info.siblings)
    name = shards(repos[KIMI_REPO])[0]
    status, headers, _ = http(hf_hub_url(KIMI_REPO, name, endpoint=hub.url), method="HEAD")
    assert status == 200 and "Location" not in headers
    assert headers["ETag"].strip('"') == sha256_file(repos[KIMI_REPO] / name)
    status, headers, _ = http(f"{hub.url}/api/models/{KIMI_REPO}/tree/main?recursive=true")
    assert status == 307 and headers["Location"] == f"/api/models/{KIMI_REPO}/tree/main/?recursive=true"
    tree = list(api(hub).list_repo_tree(KIMI_REPO, recursive=True))  # the client follows the 307
    assert {f.path for f in tree} == set(repo_files(repos[KIMI_REPO]))


def test_no_range_serves_every_body_whole(hub, repos):
    lab_post(hub, "faults", {"no_range": True})
    url = hf_hub_url(KIMI_REPO, "config.json", endpoint=hub.url)
    status, headers, body = http(url, headers={"Range": "bytes=0-9"})
    assert status == 200 and body == (repos[KIMI_REPO] / "config.json").read_bytes()
    assert "Accept-Ranges" not in headers


def manifest_through(hub, **faults) -> dict:
    from noderig.manifest import RepoPin, build_manifest

    if faults:
        lab_post(hub, "faults", faults)
    return build_manifest(RepoPin(KIMI_REPO, "main", hub.url), None)


def test_the_manifest_is_the_same_through_the_hub_a_mirror_and_a_mirror_without_a_tree(hub, repos):
    want = manifest_through(hub)
    local = repo_files(repos[KIMI_REPO])
    assert {f["path"]: f["size"] for f in want["files"]} == {p: local[p].stat().st_size for p in
                                                             (f["path"] for f in want["files"])}
    lab_post(hub, "reset")
    assert manifest_through(hub, mirror=True) == want
    lab_post(hub, "reset")
    # A mirror whose tree route fails: names from model_info, sizes and digests from paths-info.
    assert manifest_through(hub, mirror=True, status={"code": 404, "scope": "api", "match": "/tree/"}) == want
    by_path = lab_stats(hub)["requests"]["by_path"]
    assert any("/paths-info/" in k for k in by_path), by_path


def test_a_file_no_source_gives_a_digest_for_is_refused_naming_it(hub, monkeypatch):
    import huggingface_hub

    from noderig import manifest
    from noderig.errors import NoderigError

    real = huggingface_hub.get_hf_file_metadata

    def weak_etag(url, **kwargs):
        import dataclasses

        return dataclasses.replace(real(url, **kwargs), etag='W/"1f-abc"')  # what a generic web server sends

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", weak_etag)
    lab_post(hub, "faults", {"mirror": True, "status": {"code": 404, "scope": "api", "match": "/paths-info/"}})
    # model_info without metadata, no paths-info, and a tree that names files only:
    monkeypatch.setattr(manifest, "_listing", lambda api, pin, commit: [manifest.Listed("config.json")])
    with pytest.raises(NoderigError, match=r"gives no sha256 or git blob id for 'config.json'"):
        manifest_through(hub)


# ---------------------------------------------------------------------------------------
# noderig verify on a directory `hf download` made, against `hf cache verify` on the same one


def failing_by_hf(hub, repo: str, local: Path) -> set[str]:
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}
    res = subprocess.run([str(Path(sys.executable).with_name("hf")), "cache", "verify", repo, "--local-dir", str(local)],
                         env=env, capture_output=True, text=True, timeout=120)
    named = set(re.findall(r"^\s+- (\S+?): expected", res.stdout, re.M))
    assert (res.returncode != 0) == bool(named), res.stdout + res.stderr
    return named


def failing_by_noderig(local: Path, *args: str) -> set[str]:
    res = subprocess.run([str(Path(sys.executable).with_name("noderig")), "verify", str(local), "--json",
                          "--no-record", *args], capture_output=True, text=True, timeout=120)
    report = json.loads(res.stdout)
    assert report["sha256_checked"], report
    bad = {f["file"] for f in report["files"] if f["status"] not in ("ok", "unverified")}
    assert (res.returncode != 0) == bool(bad or report["index"]), report
    return bad


DAMAGE = {
    "a data byte of a shard": lambda d: _flip(sorted(d.glob("model-*.safetensors"))[1], -10),
    "a config value": lambda d: (d / "config.json").write_text((d / "config.json").read_text().replace("1", "2", 1)),
    "two files": lambda d: (_flip(sorted(d.glob("model-*.safetensors"))[0], -3), _flip(d / "tiktoken.model", 5)),
    "nothing": lambda d: None,
}


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_noderig_verify_and_hf_cache_verify_name_the_same_files(hub, tmp_path, damage):
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}
    local = tmp_path / "download"
    subprocess.run([str(Path(sys.executable).with_name("hf")), "download", KIMI_REPO, "--local-dir", str(local)],
                   env=env, check=True, capture_output=True, timeout=120)
    DAMAGE[damage](local)
    by_hf = failing_by_hf(hub, KIMI_REPO, local)
    assert (by_hf == set()) == (damage == "nothing")
    # From what `hf download` left beside the files (offline), and from the Hub's listing.
    assert failing_by_noderig(local) == by_hf
    assert failing_by_noderig(local, "--repo", KIMI_REPO, "--endpoint", hub.url) == by_hf


def test_hf_download_metadata_naming_a_path_outside_is_refused(tmp_path):
    bad = tmp_path / ".cache" / "huggingface" / "download" / "sub"
    bad.mkdir(parents=True)
    (bad / "..\\..\\evil.metadata").write_text("c" * 40 + "\n" + "a" * 64 + "\n0\n")
    res = subprocess.run([str(Path(sys.executable).with_name("noderig")), "verify", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "unsafe path 'sub/..\\\\..\\\\evil'" in res.stderr, res.stderr


def test_the_uplink_is_one_rate_shared_by_every_body_and_its_bytes_are_counted(hub, repos, tmp_path):
    # Booking is what paces every body: n bytes each at 1 MiB/s, booked back to back, make the
    # k-th wait about k*n/bps whoever books them (one link, not one limit per connection).
    hub.set_faults({"uplink_bps": MiB})
    waits = [hub.uplink_wait(MiB // 4) for _ in range(4)]
    assert all(abs(w - k * 0.25) < 0.05 for k, w in zip((1, 2, 3, 4), waits)), waits
    assert hub.describe_faults()["uplink_bps"] == MiB
    with pytest.raises(ValueError):
        hub.set_faults({"uplink_bps": 0})
    hub.reset()
    assert hub.describe_faults()["uplink_bps"] is None and hub.uplink_wait(MiB) == 0.0
    # The bytes of a body sent under the throttle are counted as any other.
    hub.set_faults({"uplink_bps": 64 * MiB})
    name = next(p for p in repo_files(repos[KIMI_REPO]) if p.endswith(".json"))
    with urllib.request.urlopen(f"{hub.url}/{KIMI_REPO}/resolve/main/{name}") as r:
        body = r.read()
    assert body == (repos[KIMI_REPO] / name).read_bytes()
    deadline = time.monotonic() + 10  # the server counts once its handler returns (a hang guard)
    while hub.stats()["bytes_served"]["total"] < len(body) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hub.stats()["bytes_served"]["total"] == len(body)


# ---------------------------------------------------------------------------------------
# noderig.manifest.resolve_commit: one light request instead of the listing, on a rerun


def test_a_branch_resolves_to_the_commit_model_info_gives_without_the_listing(hub):
    from noderig.manifest import RepoPin, resolve_commit
    want = api(hub).model_info(KIMI_REPO).sha
    before = lab_stats(hub)["requests"]["total"]
    assert resolve_commit(RepoPin(KIMI_REPO, "main", hub.url, ("*.json",)), None) == want
    assert lab_stats(hub)["requests"]["total"] - before == 1


def test_a_gated_repo_resolves_with_the_token_and_not_without(hub):
    from noderig.manifest import RepoPin, resolve_commit
    pin = RepoPin(DRAFT_REPO, "main", hub.url, ("*.json",))
    assert resolve_commit(pin, None) is None
    assert resolve_commit(pin, TOKEN) == api(hub, TOKEN).model_info(DRAFT_REPO).sha


def test_a_redirect_is_not_followed_so_the_token_never_reaches_its_target(hub):
    """A Hub that redirects the revision route (to a host it names) gets no answer taken from
    there: the caller falls back to the full listing, which huggingface_hub guards itself."""
    from noderig.manifest import RepoPin, resolve_commit
    seen = []

    class Target(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(json.dumps({"sha": "1" * 40}).encode())

        def log_message(self, *args):
            pass

    class Redirector(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{target.server_port}/elsewhere")
            self.end_headers()

        def log_message(self, *args):
            pass

    target = ThreadingHTTPServer(("127.0.0.1", 0), Target)
    redirector = ThreadingHTTPServer(("127.0.0.1", 0), Redirector)
    for server in (target, redirector):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        pin = RepoPin(KIMI_REPO, "main", f"http://127.0.0.1:{redirector.server_port}", ("*.json",))
        assert resolve_commit(pin, TOKEN) is None
        assert seen == []
    finally:
        for server in (target, redirector):
            server.shutdown()


def test_an_unknown_revision_or_repo_resolves_to_nothing_and_the_listing_then_says_why(hub):
    from noderig.manifest import RepoPin, resolve_commit
    assert resolve_commit(RepoPin(KIMI_REPO, "no-such-branch", hub.url, ("*.json",)), None) is None
    assert resolve_commit(RepoPin("org/none", "main", hub.url, ("*.json",)), None) is None
