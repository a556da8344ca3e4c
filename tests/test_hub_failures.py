"""A Hub or mirror that fails a request, met by the real huggingface_hub client over a real socket: the
deploy's sentence names the HTTP status and what it asks of the user, quotes the server's own words
escaped and cut short (a mirror's error page is untrusted text: no ANSI code or line break of its
reaches the terminal), and says "cannot reach" only when nothing answered."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from noderig.errors import NoderigError, one_line
from noderig.manifest import SMALL_FILE_MAX, RepoPin, build_manifest, download_url, fetch_small, redirect_problem


class _Answer(BaseHTTPRequestHandler):
    """Every request answered with the server's one status, headers and body."""

    status, headers, body = 500, {}, b""

    def _answer(self):
        self.send_response(self.status)
        for name, value in self.headers_out.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(self.body_out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(self.body_out)

    do_GET = do_HEAD = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def hub():
    """A server on loopback answering as told: hub(status, body, headers) -> its URL."""
    servers = []

    def start(status: int, body: bytes = b"", headers: dict | None = None) -> str:
        handler = type("Handler", (_Answer,), {"status": status, "body_out": body, "headers_out": headers or {}})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _refusal(endpoint: str) -> str:
    with pytest.raises(NoderigError) as refused:
        build_manifest(RepoPin("org/model", "main", endpoint), None)
    return str(refused.value)


def test_a_mirror_that_cannot_reach_its_upstream_says_so_in_one_clean_line(hub):
    # a mirror's 504 with its own words on two lines and a colour code in them
    url = hub(504, b"Proxy Timeout\n\x1b[31mupstream huggingface.co unreachable\x1b[0m",
              {"Content-Type": "text/plain"})
    said = _refusal(url)
    assert said.startswith(f"the Hub at {url} answered HTTP 504 (") and "to list org/model@main" in said, said
    assert "cannot reach its upstream): rerun, or check the mirror" in said
    assert "\x1b" not in said and "\n" not in said and "\\x1b[31m" in said, said
    assert "cannot reach the Hub" not in said  # it answered


@pytest.mark.parametrize("status, advice", [
    (404, "the repo or the revision is not there (a mirror answers 404 for what it does not hold"),
    (401, "check hf_token_file (or HF_TOKEN)"),
    (403, "check that the token has access to the repo"),
    (429, "wait a few minutes and rerun"),
    (502, "rerun, or check the mirror"),
    (418, "check hf_endpoint"),
])
def test_each_status_says_what_it_asks_of_the_user(hub, status, advice):
    # a plain error, without the Hub's X-Error-Code (an offline mirror's 404 for a revision it does not hold)
    said = _refusal(hub(status, b"no"))
    assert f"answered HTTP {status}" in said and advice in said, said


def test_a_mirror_s_long_error_page_is_cut_short(hub):
    said = _refusal(hub(500, b"<html>" + b"x" * 50_000 + b"</html>", {"Content-Type": "text/html"}))
    assert "answered HTTP 500" in said and len(said) < 1000, len(said)


def test_nothing_listening_is_cannot_reach(hub):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    said = _refusal(f"http://127.0.0.1:{port}")
    assert said.startswith(f"cannot reach the Hub at http://127.0.0.1:{port} to list org/model@main: "), said
    assert "\n" not in said


@pytest.mark.parametrize("text, shown", [
    ("line one\nline two\r\n\n  three", "line one / line two / three"),
    ("\x1b[2J\x1b[Hgone", "\\x1b[2J\\x1b[Hgone"),  # a terminal clear and home, escaped
    ("ok\u202egnp.exe", "ok\\u202egnp.exe"),  # a bidirectional override cannot reorder the line
    ("GET https://cdn.example/f?X-Amz-Signature=abc Authorization: Bearer hf_abcdefghijkl",
     "GET https://cdn.example/f?<redacted> Authorization: Bearer <redacted>"),
])
def test_one_line_shows_untrusted_text_as_one_safe_line(text, shown):
    assert one_line(text) == shown


def test_one_line_cuts_past_its_limit_and_says_how_long_it_was():
    assert one_line("y" * 500, 10) == "yyyyyyyyyy... (500 characters)"


@pytest.mark.parametrize("token, hint", [
    (None, "is private or gated: no token was given (set hf_token_file or HF_TOKEN)"),
    ("hf_" + "x" * 34, "is private or gated and the token cannot see it"),
])
def test_a_repo_the_hub_says_does_not_exist_says_whether_a_token_was_given(hub, token, hint):
    # a mirror (Olah) answers a gated repo asked without a token with the Hub's "RepoNotFound"
    url = hub(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound",
                                                          "Content-Type": "application/json"})
    with pytest.raises(NoderigError) as refused:
        build_manifest(RepoPin("org/model", "main", url), token)
    assert str(refused.value) == f"org/model does not exist on {url} (or {hint})"


@pytest.mark.parametrize("location", [
    "magnet:?xt=urn:btih:" + "a" * 40,  # aria2 would start BitTorrent and write the files the torrent names
    "ftp://files.example/x.safetensors",
    "file:///etc/shadow",
    "sftp://files.example/x.safetensors",
])
def test_a_signed_location_that_is_not_a_web_url_never_reaches_aria2(hub, location):
    # with a token an LFS file's redirect is resolved here and handed to aria2 on the node as is
    url = hub(302, b"", {"Location": location})
    manifest = {"repo": "org/model", "commit": "c" * 40, "endpoint": url,
                "files": [{"path": "x.safetensors", "size": 1, "sha256": "b" * 64}]}
    with pytest.raises(NoderigError) as refused:
        download_url(manifest, "x.safetensors", "hf_" + "x" * 34)
    said = str(refused.value)
    assert said.startswith(f"the Hub at {url} redirects org/model/x.safetensors to ") and "nothing was fetched" in said
    assert "hf_xxx" not in said


def test_a_redirect_from_an_https_hub_to_plain_http_is_refused():
    assert redirect_problem("https://hub.example", "https://cdn.example/x?sig=1") is None
    assert redirect_problem("http://127.0.0.1:8080", "http://127.0.0.1:8080/x") is None  # a plain-http mirror, as set
    assert redirect_problem("https://hub.example", "http://cdn.example/x?sig=1") == "plain http from an https Hub"
    assert redirect_problem("https://hub.example", "MAGNET:?xt=urn") == "a 'magnet' URL (only http and https)"
    assert redirect_problem("https://hub.example", "//cdn.example/x") == "no absolute http(s) URL"


class _HeadAnswersGetRedirects(BaseHTTPRequestHandler):
    """A mirror whose HEAD of a file answers itself and whose GET redirects (an object store's proxy): first within
    itself (``/hop``, relative), then to ``cdn`` (another host); ``cdn`` None: the GET answers too."""

    cdn = None

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "1")
        self.send_header("ETag", '"e"')
        self.end_headers()

    def do_GET(self):
        seen.append((self.path, self.headers.get("Authorization")))
        if self.cdn and not self.path.startswith("/hop"):
            self.send_response(302)
            self.send_header("Location", "/hop" + self.path)
        elif self.cdn:
            self.send_response(307)
            self.send_header("Location", self.cdn)
        else:
            self.send_response(206)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


seen: list = []


@pytest.mark.parametrize("cdn", ["http://localhost:9/cdn/x.safetensors?X-Amz-Signature=s", None])
def test_a_gated_file_whose_get_leaves_the_mirror_is_fetched_there_without_the_token(cdn):
    # the token goes to aria2 only for a file the mirror serves itself: a HEAD that answers is not enough, aria2 GETs
    # and forwards its Authorization header along any redirect (to an object store, another company's host)
    from noderig.aria2 import file_options

    seen.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_HeadAnswersGetRedirects,), {"cdn": cdn}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        manifest = {"repo": "org/model", "commit": "c" * 40, "endpoint": url, "gated": True,
                    "files": [{"path": "x.safetensors", "size": 1, "sha256": "b" * 64}]}
        got = download_url(manifest, "x.safetensors", "hf_" + "x" * 34)
        header = file_options(manifest, "/m", "x.safetensors", got, "hf_" + "x" * 34, 4, "none").get("header")
    finally:
        server.shutdown()
        server.server_close()
    if cdn:
        assert got == cdn and header is None
        assert [path.startswith("/hop") for path, _ in seen] == [False, True]  # the mirror's own hop followed
    else:
        assert got.startswith(url + "/org/model/resolve/") and header == ["Authorization: Bearer hf_" + "x" * 34]


class _EndlessTree(BaseHTTPRequestHandler):
    """A hostile mirror: a commit, then a tree listing each page of which links to one more (up
    to ``guard`` pages: a hang guard, so the test ends whatever the code does)."""

    page_size, guard = 10, 200

    def do_GET(self):
        if "/tree/" not in self.path:
            return self._json({"id": "org/model", "sha": "c" * 40, "siblings": []})
        self.server.pages += 1
        n = self.server.pages
        more = {} if n >= self.guard else {
            "Link": f'<http://127.0.0.1:{self.server.server_address[1]}/api/models/org/model/tree/{"c" * 40}'
                    f'?cursor={n}>; rel="next"'}
        self._json([{"type": "file", "path": f"s/{n}-{i}.json", "size": 1, "oid": "b" * 40}
                    for i in range(self.page_size)], more)

    def _json(self, data, headers=None):
        body = json.dumps(data).encode()
        self.send_response(200)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_listing_of_endless_pages_is_read_no_further_than_the_file_limit(monkeypatch):
    # memory and time on the controller stay bounded, whatever a mirror's pages promise
    monkeypatch.setattr("noderig.manifest.MAX_FILES", 50)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessTree)
    server.pages = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(NoderigError) as refused:
            build_manifest(RepoPin("org/model", "main", url), None)
    finally:
        server.shutdown()
        server.server_close()
    assert f"the Hub at {url} lists more than 50 files (a checkpoint may have at most 50)" in str(refused.value)
    assert server.pages <= 50 // _EndlessTree.page_size + 1, f"{server.pages} pages read"


@pytest.mark.parametrize("listed, sent, said", [
    (5, b"{}", None),  # what it lists, or less (the node's hash check judges the bytes)
    (2, b"x" * 200_000, "sent more than the 2 bytes it lists for org/model/config.json"),
    (SMALL_FILE_MAX + 1, b"{}", f"lists org/model/config.json as a git file of {SMALL_FILE_MAX + 1} bytes"),
])
def test_a_gated_small_file_is_read_no_further_than_its_listed_size(hub, tmp_path, listed, sent, said):
    # the controller fetches a gated repo's git files itself (the token stays there): a mirror sending more than it
    # listed, or listing a git file of gigabytes, would fill the controller's disk or carry a checkpoint through it
    url = hub(200, sent)
    manifest = {"repo": "org/model", "commit": "c" * 40, "endpoint": url, "gated": True,
                "files": [{"path": "config.json", "size": listed, "git_sha": "a" * 40}]}
    if said is None:
        local = fetch_small(manifest, "config.json", "hf_" + "x" * 34, str(tmp_path))
        assert open(local, "rb").read() == sent
        return
    with pytest.raises(NoderigError) as refused:
        fetch_small(manifest, "config.json", "hf_" + "x" * 34, str(tmp_path))
    assert said in str(refused.value) and "nothing was uploaded to the node" in str(refused.value)
    assert sum(f.stat().st_size for f in tmp_path.iterdir()) <= listed
