"""``noderig.aria2.Session`` against a real ``aria2c``: a daemon started here with noderig's
own config (RPC on loopback, with a secret), fetching from a small HTTP server on loopback
that serves files, refuses (403, as an expired signed URL) or has nothing (404). Fast tier:
no root, no lab; nothing leaves 127.0.0.1. The hang guards are generous timeouts, not speed
checks."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from noderig import aria2
from noderig.manifest import download_url, resolve_url
from operations.facts import ARIA2_DOWNLOADS, PRESENT, Aria2Downloads

ARIA2C = shutil.which("aria2c")
pytestmark = pytest.mark.skipif(ARIA2C is None, reason="aria2c is not installed")
SECRET = "s3cret-for-this-test"
FILES = {"a.safetensors": bytes(range(256)) * 1200, "sub/config.json": b'{"hidden_size": 8}\n'}


class Server(http.server.ThreadingHTTPServer):
    """``/files/<path>`` serves FILES (with Range), ``/stalled/<path>`` serves its first KiB
    then holds the rest until ``release`` is set (a download still active when the test acts
    on it), ``/expired/<path>`` answers 403, ``/metalink/<path>`` a metalink (a hostile mirror),
    anything else 404; ``requests`` lists the paths asked for."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[str] = []
        self.release = threading.Event()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address):
        pass  # aria2 hanging up mid-body (a download removed, a file complete) is not a failure here


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *_args):
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        kind, _, name = self.path.lstrip("/").partition("/")
        if kind == "metalink":
            return self._metalink()
        body = FILES.get(name) if kind in ("files", "stalled") else None
        if body is None:
            self.send_response(403 if kind == "expired" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start, end = 0, len(body) - 1
        if self.headers.get("Range", "").startswith("bytes="):
            first, _, last = self.headers["Range"][6:].partition("-")
            start, end = int(first), int(last) if last else len(body) - 1
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if kind == "stalled":
            self.wfile.write(body[start:start + 1024])
            self.wfile.flush()
            self.server.release.wait(60)
            start += 1024
        self.wfile.write(body[start:end + 1])


    def _metalink(self):
        """A hostile mirror's answer: a metalink naming noderig's own verified record (and where
        to fetch it), which aria2 by default parses and follows."""
        body = (f'<?xml version="1.0" encoding="UTF-8"?><metalink xmlns="urn:ietf:params:xml:ns:metalink">'
                f'<file name=".noderig/verified.json"><url>{self.server.url}/files/sub/config.json</url></file>'
                f'</metalink>').encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/metalink4+xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    srv = Server()
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def daemon(tmp_path):
    """aria2c with noderig's daemon config on a free loopback port; its RPC port."""
    port = free_port()
    conf = tmp_path / "aria2.conf"
    conf.write_text(aria2.daemon_conf(SECRET, port))
    conf.chmod(0o600)
    proc = subprocess.Popen([ARIA2C, f"--conf-path={conf}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
    try:
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=30)


class Calls:
    """The session's callbacks, recorded; ``resolve`` answers from ``urls`` (path -> list)."""

    def __init__(self, dest, urls: dict | None = None):
        self.dest, self.urls = dest, urls or {}
        self.resolved, self.discarded, self.said, self.files_done = [], [], [], 0

    def resolve(self, path):
        self.resolved.append(path)
        return self.urls[path].pop(0)

    def discard(self, path):
        self.discarded.append(path)
        for name in (path, f"{path}.aria2"):
            (self.dest / name).unlink(missing_ok=True)

    def file_done(self):
        self.files_done += 1


def session_for(port, dest, calls, options=None):
    api = aria2.connect(port, SECRET, wait=60)
    return aria2.Session(api, str(dest), resolve=calls.resolve, discard=calls.discard, say=calls.said.append,
                         options=options or (lambda path, url: aria2.download_options(str(dest), path, 2, "none")),
                         label="[b300] org/m")


def follow(session, interval=0.02):
    session.follow({p: len(b) for p, b in FILES.items()}, interval=interval)


def test_every_file_is_fetched_with_progress_told_and_the_results_purged(server, daemon, tmp_path):
    dest = tmp_path / "m"
    calls = Calls(dest)
    session = session_for(daemon, dest, calls)
    entries = [(f"{server.url}/files/{p}", p) for p in FILES]
    assert session.attach(entries, jobs=2) == 0
    session.follow({p: len(b) for p, b in FILES.items()}, on_file_done=calls.file_done, interval=0.02)
    for path, body in FILES.items():
        assert hashlib.sha256((dest / path).read_bytes()).digest() == hashlib.sha256(body).digest()
    total = sum(len(b) for b in FILES.values())
    assert calls.said[-1].startswith(f"[b300] org/m: 2/2 files, {total / 2**20:.1f}/{total / 2**20:.1f} MiB")
    assert 1 <= calls.files_done <= 2 and calls.resolved == [] and calls.discarded == []
    assert session.api.get_global_options().max_concurrent_downloads == 2
    session.close()
    assert session.api.get_downloads() == []


def test_a_download_the_daemon_still_holds_is_taken_over_not_added_again(server, daemon, tmp_path):
    dest = tmp_path / "m"
    api = aria2.connect(daemon, SECRET, wait=60)
    # an earlier (killed) run's download, paused
    held = api.add_uris([f"{server.url}/files/a.safetensors"],
                        options={**aria2.download_options(str(dest), "a.safetensors", 1, "none"), "pause": "true"})
    calls = Calls(dest)
    session = session_for(daemon, dest, calls)
    entries = [(f"{server.url}/files/{p}", p) for p in FILES]
    assert session.attach(entries, jobs=4) == 1
    assert session.gids["a.safetensors"] == held.gid
    assert calls.said == ["[b300] org/m: re-attached to 1 download(s) already running on the node"]
    follow(session)
    assert (dest / "a.safetensors").read_bytes() == FILES["a.safetensors"]
    assert sorted(str(d.files[0].path) for d in api.get_downloads()) == sorted(f"{dest}/{p}" for p in FILES)


def test_a_refused_url_is_resolved_again_and_the_file_completes(server, daemon, tmp_path):
    dest = tmp_path / "m"
    calls = Calls(dest, {"a.safetensors": [f"{server.url}/files/a.safetensors"]})
    session = session_for(daemon, dest, calls)
    session.attach([(f"{server.url}/expired/a.safetensors?Signature=f00", "a.safetensors")], jobs=1)
    session.follow({"a.safetensors": len(FILES["a.safetensors"])}, interval=0.02)
    assert calls.resolved == ["a.safetensors"]
    assert (dest / "a.safetensors").read_bytes() == FILES["a.safetensors"]
    retry = next(line for line in calls.said if "re-resolved" in line)
    assert retry == ("[b300] org/m: a.safetensors: The response status is not successful. status=403; "
                     "URL re-resolved, resuming")


def test_peers_as_sources_fetch_the_file_without_touching_the_hub(server, daemon, tmp_path):
    dest = tmp_path / "m"
    calls = Calls(dest)
    session = session_for(daemon, dest, calls)
    peer, hub = f"{server.url}/files/a.safetensors", f"{server.url}/hub/a.safetensors"
    session.attach([([peer, peer, hub], "a.safetensors")], jobs=1)  # the Hub last: a backup only
    session.follow({"a.safetensors": len(FILES["a.safetensors"])}, interval=0.02)
    assert (dest / "a.safetensors").read_bytes() == FILES["a.safetensors"]
    assert server.requests and all(r.startswith("/files/") for r in server.requests)
    assert calls.resolved == [] and session.fell_back == []


def test_a_file_every_peer_fails_goes_on_from_the_hub_alone(server, daemon, tmp_path):
    dest = tmp_path / "m"
    calls = Calls(dest, {"a.safetensors": [f"{server.url}/files/a.safetensors"]})  # the Hub, resolved
    session = session_for(daemon, dest, calls,
                          options=lambda path, url: {**aria2.download_options(str(dest), path, 2, "none"),
                                                     "max-tries": "1"})
    dead = f"http://127.0.0.1:{free_port()}/x"  # nothing listens there: a peer killed
    session.attach([([dead, f"{server.url}/missing/a"], "a.safetensors")], jobs=1)
    session.follow({"a.safetensors": len(FILES["a.safetensors"])}, interval=0.02)
    assert (dest / "a.safetensors").read_bytes() == FILES["a.safetensors"]
    assert calls.resolved == ["a.safetensors"] and session.fell_back == ["a.safetensors"]
    assert any(line.startswith("[b300] org/m: a.safetensors: the peers failed (") and line.endswith("; from the Hub")
               for line in calls.said), calls.said


def test_a_url_refused_every_time_fails_after_three_resolutions(server, daemon, tmp_path):
    dest = tmp_path / "m"
    expired = f"{server.url}/expired/a.safetensors?X-Amz-Signature=f00"
    calls = Calls(dest, {"a.safetensors": [expired] * 4})
    session = session_for(daemon, dest, calls)
    session.attach([(expired, "a.safetensors")], jobs=1)
    with pytest.raises(aria2.DownloadError) as failed:
        follow(session)
    assert calls.resolved == ["a.safetensors"] * 3
    assert str(failed.value) == (f"downloading {dest}/a.safetensors failed: aria2c exit 22: bad HTTP response header "
                                 "(The response status is not successful. status=403)")


def test_an_unusable_control_file_starts_that_file_over_once(server, daemon, tmp_path):
    dest = tmp_path / "m"
    dest.mkdir()
    (dest / "a.safetensors").write_bytes(b"\0" * 10)
    (dest / "a.safetensors.aria2").write_bytes(b"not a control file\n")
    url = f"{server.url}/files/a.safetensors"
    calls = Calls(dest, {"a.safetensors": [url]})
    session = session_for(daemon, dest, calls)
    session.attach([(url, "a.safetensors")], jobs=1)
    session.follow({"a.safetensors": len(FILES["a.safetensors"])}, interval=0.02)
    assert calls.discarded == ["a.safetensors"] and calls.resolved == ["a.safetensors"]
    assert (dest / "a.safetensors").read_bytes() == FILES["a.safetensors"]
    assert "[b300] org/m: a.safetensors: unusable aria2 control file; starting that file over" in calls.said


def test_an_unusable_control_file_again_fails_instead_of_looping(server, daemon, tmp_path):
    dest = tmp_path / "m"
    dest.mkdir()
    url = f"{server.url}/files/a.safetensors"
    calls = Calls(dest, {"a.safetensors": [url]})
    calls.discard = lambda path: (dest / f"{path}.aria2").write_bytes(b"still garbage\n")  # a node that keeps it
    (dest / "a.safetensors").write_bytes(b"\0" * 10)
    (dest / "a.safetensors.aria2").write_bytes(b"garbage\n")
    session = session_for(daemon, dest, calls)
    session.attach([(url, "a.safetensors")], jobs=1)
    with pytest.raises(aria2.DownloadError, match=r"a.safetensors failed: aria2c exit 1: unknown error"):
        follow(session)


def test_a_file_the_server_does_not_have_fails_naming_it(server, daemon, tmp_path):
    dest = tmp_path / "m"
    calls = Calls(dest)
    session = session_for(daemon, dest, calls)
    session.attach([(f"{server.url}/nowhere/x.json", "x.json")], jobs=1)
    with pytest.raises(aria2.DownloadError) as failed:
        follow(session)
    assert str(failed.value) == (f"downloading {dest}/x.json failed: aria2c exit 3: resource not found "
                                 "(Resource not found)")
    assert calls.resolved == []


def test_a_download_aria2_refuses_to_add_names_the_file(server, daemon, tmp_path):
    dest = tmp_path / "m"
    session = session_for(daemon, dest, Calls(dest), options=lambda path, url: {"dir": str(dest), "split": "0"})
    with pytest.raises(aria2.DownloadError) as refused:
        session.attach([(f"{server.url}/files/sub/config.json", "sub/config.json")], jobs=1)
    assert str(refused.value).startswith(f"aria2 refused {dest}/sub/config.json: ")
    assert "--split" in str(refused.value)


def test_a_download_the_daemon_forgot_fails_naming_the_file(server, daemon, tmp_path):
    dest = tmp_path / "m"
    session = session_for(daemon, dest, Calls(dest))
    # stalled: still active when removed (a whole small file can be done before the next call)
    session.attach([(f"{server.url}/stalled/a.safetensors", "a.safetensors")], jobs=1)
    gid = session.gids["a.safetensors"]
    session.api.client.force_remove(gid)
    # aria2 forgets a result only once the removal is done; its own status says when. The
    # bound is a number of polls (a hang guard), not a time: a slow machine only polls slower.
    for _ in range(1200):
        if session.api.client.tell_status(gid, ["status"])["status"] == "removed":
            break
        time.sleep(0.05)
    session.api.client.remove_download_result(gid)  # then forgotten, as a restarted daemon would
    assert session.snapshot()["a.safetensors"]["status"] == "removed"
    with pytest.raises(aria2.DownloadError, match=rf"downloading {dest}/a.safetensors failed: aria2c exit 1: "
                                                  rf"unknown error \(.*{gid} is not found"):
        follow(session)


def test_a_metalink_or_torrent_the_mirror_answers_is_saved_as_the_file_never_followed(server, daemon, tmp_path):
    """The mirror is untrusted: what it serves is bytes to hash, never instructions. Followed,
    a metalink would have aria2 write the files it names (here noderig's verified record) where
    no path check of noderig's looks; so aria2 saves it as the file, and the hash refuses it."""
    dest = tmp_path / "m"
    session = session_for(daemon, dest, Calls(dest))
    session.attach([(f"{server.url}/metalink/a.safetensors", "a.safetensors")], jobs=1)
    session.follow({"a.safetensors": 1}, interval=0.02)
    followed = session.api.client.tell_status(session.gids["a.safetensors"], ["followedBy"]).get("followedBy", [])
    for _ in range(1200):  # (a bound on polls, a hang guard: let what was followed finish, to show it)
        if all(session.api.client.tell_status(g, ["status"])["status"] in ("complete", "error") for g in followed):
            break
        time.sleep(0.05)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == ["a.safetensors"]
    assert followed == [] and server.requests == ["/metalink/a.safetensors"]


def test_an_rpc_that_does_not_answer_is_named_after_the_wait(tmp_path):
    with pytest.raises(aria2.DownloadError, match=r"^aria2's RPC on b300 did not answer: "):
        aria2.connect(free_port(), SECRET, wait=0.2, where="b300")


def test_the_rpc_refuses_a_caller_without_the_secret(daemon):
    aria2.connect(daemon, SECRET, wait=60)  # up
    with pytest.raises(aria2.DownloadError, match="did not answer"):
        aria2.connect(daemon, "not-the-secret", wait=0.2)


# --------------------------------------------------------------------------------------------
# where aria2 fetches from, and when the token goes with the request (no daemon needed)

MANIFEST = {"repo": "org/m", "commit": "c" * 40, "endpoint": "https://hub.example", "gated": True,
            "files": [{"path": "model.safetensors", "size": 3, "sha256": "b" * 64},
                      {"path": "config.json", "size": 2, "git_oid": "a" * 40}]}
RESOLVE = f"https://hub.example/org/m/resolve/{'c' * 40}"


def test_with_a_token_an_lfs_file_is_fetched_from_its_signed_location(monkeypatch):
    asked = []
    monkeypatch.setattr("noderig.manifest.signed_location",
                        lambda manifest, path, token: asked.append((path, token)) or "https://cdn.example/x?sig=1")
    assert download_url(MANIFEST, "model.safetensors", "hf_tok") == "https://cdn.example/x?sig=1"
    assert download_url(MANIFEST, "config.json", "hf_tok") == f"{RESOLVE}/config.json"
    assert download_url(MANIFEST, "model.safetensors", None) == f"{RESOLVE}/model.safetensors"
    assert asked == [("model.safetensors", "hf_tok")]
    assert resolve_url(MANIFEST, "config.json") == f"{RESOLVE}/config.json"


@pytest.mark.parametrize("gated,token,url,header", [
    (True, "hf_tok", f"{RESOLVE}/config.json", True),  # the Hub serves it itself: the token goes along
    (True, "hf_tok", "https://cdn.example/x?sig=1", False),  # a signed CDN URL: never the token
    (True, None, f"{RESOLVE}/config.json", False),
    (False, "hf_tok", f"{RESOLVE}/config.json", False),  # not gated: no token needed
])
def test_the_token_goes_only_to_the_hub_itself_for_a_gated_repo(gated, token, url, header):
    opts = aria2.file_options({**MANIFEST, "gated": gated}, "/models/m", "config.json", url, token, 4, "falloc")
    assert opts.get("header") == (["Authorization: Bearer hf_tok"] if header else None)
    assert (opts["dir"], opts["out"], opts["split"], opts["file-allocation"]) == ("/models/m", "config.json", "4",
                                                                                  "falloc")


def test_the_node_script_behind_aria2downloads_lists_what_the_daemon_holds(server, daemon, tmp_path):
    dest, other = tmp_path / "m", tmp_path / "draft"
    api = aria2.connect(daemon, SECRET, wait=60)
    paused = {"pause": "true"}
    api.add_uris([f"{server.url}/files/a.safetensors"],
                 options={**aria2.download_options(str(dest), "a.safetensors", 1, "none"), **paused})
    api.add_uris([f"{server.url}/files/sub/config.json"],
                 options={**aria2.download_options(str(other), "config.json", 1, "none"), **paused})
    run = subprocess.run([sys.executable, "-c", ARIA2_DOWNLOADS, str(tmp_path / "aria2.conf"), str(daemon)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert SECRET not in run.stdout
    fact = Aria2Downloads()
    fact.command(dest=str(dest))
    assert fact.process([PRESENT, *run.stdout.splitlines()]) == ["a.safetensors"]
    fact.command(dest=str(other))
    assert fact.process([PRESENT, *run.stdout.splitlines()]) == ["config.json"]


def test_the_node_script_fails_saying_why_when_the_secret_is_wrong(daemon, tmp_path):
    wrong = tmp_path / "wrong.conf"
    wrong.write_text(aria2.daemon_conf("not-the-secret", daemon))
    run = subprocess.run([sys.executable, "-c", ARIA2_DOWNLOADS, str(wrong), str(daemon)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "aria2's RPC" in run.stderr, (run.returncode, run.stderr)
    assert "not-the-secret" not in run.stderr + run.stdout


def test_a_session_knows_when_the_daemon_still_works_for_another_checkpoint(server, daemon, tmp_path):
    dest, other = tmp_path / "m", tmp_path / "m-draft"
    api = aria2.connect(daemon, SECRET, wait=60)
    session = session_for(daemon, dest, Calls(dest))
    assert session.busy_elsewhere() is False
    # "m-draft" shares "m"'s prefix as a string, not as a directory
    queued = api.add_uris([f"{server.url}/files/a.safetensors"],
                          options={**aria2.download_options(str(other), "a.safetensors", 1, "none"), "pause": "true"})
    assert session.busy_elsewhere() is True
    api.remove([queued], force=True)
    mine = api.add_uris([f"{server.url}/files/a.safetensors"],
                        options={**aria2.download_options(str(dest), "a.safetensors", 1, "none"), "pause": "true"})
    assert session.busy_elsewhere() is False, "its own downloads do not count"
    api.remove([mine], force=True)


def test_a_download_aria2_gave_up_on_is_said_forgotten_and_added_again(server, daemon, tmp_path):
    dest = tmp_path / "m"
    api = aria2.connect(daemon, SECRET, wait=60)
    failed = api.add_uris([f"{server.url}/missing/a.safetensors"],
                          options=aria2.download_options(str(dest), "a.safetensors", 1, "none"))
    for _ in range(3000):  # a bound on polls, not a clock: aria2 gives up on a 404 at once
        if api.get_download(failed.gid).status == "error":
            break
        time.sleep(0.01)
    assert api.get_download(failed.gid).status == "error"
    calls = Calls(dest)
    session = session_for(daemon, dest, calls)
    assert session.attach([(f"{server.url}/files/a.safetensors", "a.safetensors")], jobs=1) == 0
    assert calls.said[0].startswith("[b300] org/m: a.safetensors: aria2 gave up on it earlier (")
    assert calls.said[0].endswith("); starting it again")
    assert failed.gid not in [d.gid for d in api.get_downloads()], "the failed result is forgotten"
    session.follow({"a.safetensors": len(FILES["a.safetensors"])}, interval=0.02)
    assert (dest / "a.safetensors").read_bytes() == FILES["a.safetensors"]


def test_the_node_script_says_when_the_daemon_s_config_cannot_be_read(tmp_path):
    run = subprocess.run([sys.executable, "-c", ARIA2_DOWNLOADS, str(tmp_path / "absent.conf"), "6800"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip() == f"aria2 runs but its config {tmp_path / 'absent.conf'} cannot be read " \
                                 "(No such file or directory)"


def test_a_feed_adds_files_as_they_become_available_and_the_follow_waits_for_them(server, daemon, tmp_path):
    """The fan-out's feed: a file a peer has not verified yet is not there at the start; the
    follow goes on past the files it has until the feed says none is awaited, and a file the
    feed adds goes ahead of aria2's queue."""
    dest = tmp_path / "m"
    calls = Calls(dest)
    session = session_for(daemon, dest, calls)
    session.attach([(f"{server.url}/files/a.safetensors", "a.safetensors")], jobs=1)
    polls, seen_complete = [], []

    def feed(snap):
        polls.append(dict(snap))
        if snap["a.safetensors"]["status"] != "complete":
            return [], 1
        seen_complete.append(len(polls))
        if len(seen_complete) < 3:  # a peer still verifying it: awaited, not yet given
            return [], 1
        return [([f"{server.url}/files/sub/config.json"], "sub/config.json")], 0

    session.follow({p: len(b) for p, b in FILES.items()}, interval=0.02, feed=feed, jobs=1)
    assert (dest / "sub/config.json").read_bytes() == FILES["sub/config.json"]
    assert len(seen_complete) == 3, "the follow ended while a file was still awaited"
    assert "sub/config.json" in session.gids and "sub/config.json" in session.from_peers
    assert any(line.endswith("; 1 more awaited from peers") for line in calls.said), calls.said
    assert calls.said[-1].startswith("[b300] org/m: 2/2 files") and "awaited" not in calls.said[-1]


def test_a_held_download_from_a_killed_runs_peers_goes_on_from_the_hub_when_they_are_gone(server, daemon, tmp_path):
    """A run killed during the fan-out left aria2 fetching a file from a peer's server of that
    run (its secret path gone since): the rerun takes the download over as a peer download, so
    when aria2 gives up on the old source the file goes on from the Hub instead of failing."""
    dest = tmp_path / "m"
    api = aria2.connect(daemon, SECRET, wait=60)
    options = {**aria2.download_options(str(dest), "a.safetensors", 1, "none"), "max-tries": "1"}
    api.add_uris([f"{server.url}/gone/a.safetensors"], options={**options, "pause": "true"})
    calls = Calls(dest, {"a.safetensors": [f"{server.url}/files/a.safetensors"]})  # the Hub, resolved
    session = session_for(daemon, dest, calls, options=lambda path, url: options)
    assert session.attach([([f"{server.url}/files/a.safetensors"], "a.safetensors")], jobs=1) == 1
    session.follow({"a.safetensors": len(FILES["a.safetensors"])}, interval=0.02)
    assert (dest / "a.safetensors").read_bytes() == FILES["a.safetensors"]
    assert calls.resolved == ["a.safetensors"] and session.fell_back == ["a.safetensors"]
