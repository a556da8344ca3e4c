"""The checkpoint manifest: a repo pinned to a commit, and the files to fetch with size and hash.

Built on the controller with ``huggingface_hub`` (file listing with LFS sha256) and written
beside the checkpoint on the node, so the deploy is reproducible and a rerun with the same
pin needs no Hub call. LFS files carry the Hub's sha256; small git files carry their git
blob id (sha1 of ``blob <size>\\0<bytes>``), which is all the Hub publishes for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import NoderigError, one_line, redact
from .node.hubpath import CONTROL_SUFFIX, MAX_FILES, describe, matches, path_problem

MANIFEST_VERSION = 1
DEFAULT_PATTERNS = ["*.safetensors", "*.json", "*.py", "*.model", "*.jinja", "*.tiktoken", "*.txt"]


@dataclass(frozen=True)
class RepoPin:
    repo: str
    revision: str = "main"
    endpoint: str = "https://huggingface.co"
    patterns: tuple[str, ...] = tuple(DEFAULT_PATTERNS)

    def __post_init__(self):
        # one spelling of the Hub's URL: "https://hub.lan/" and "https://hub.lan" name the same Hub (the manifest
        # records it, and a rerun compares), and no URL built from it gets a double slash
        if isinstance(self.endpoint, str):
            object.__setattr__(self, "endpoint", self.endpoint.rstrip("/"))


@dataclass
class Listed:
    """One file as a Hub or mirror lists it; None where it did not say."""

    rfilename: str
    size: int | None = None
    sha256: str | None = None  # LFS files
    blob_id: str | None = None  # git's blob id (sha1 of "blob <size>\\0<bytes>")

    @property
    def lfs(self):
        return self if self.sha256 else None


def build_manifest(pin: RepoPin, token: str | None) -> dict:
    """Resolve ``pin.revision`` to a commit and list the matching files with size and hash:
    from the recursive tree listing (what the Hub and mirrors serve with LFS fields), else
    model_info's siblings; a selected file still missing a size or digest is asked for with
    paths-info, then with a HEAD on its /resolve/ URL (size and ETag)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi(endpoint=pin.endpoint, token=token or False)
    try:
        info = api.model_info(pin.repo, revision=pin.revision)
        if not (isinstance(info.sha, str) and _HEX["git_oid"].fullmatch(info.sha)):
            raise NoderigError(f"the Hub at {pin.endpoint} answers {describe(info.sha)} as the commit of "
                               f"{pin.repo}@{pin.revision} (not a commit sha); {REFUSED}")
        listed = _listing(api, pin, info.sha)
        _refuse_unsafe_names(pin, [f.rfilename for f in listed])
        _complete(api, pin, info.sha, [f for f in listed if _selected(pin, f.rfilename)], token)
    except GatedRepoError:
        hint = "the token was refused" if token else "no token was given (set HF_TOKEN or hf_token_file)"
        raise NoderigError(f"{pin.repo} is a gated repo on {pin.endpoint} and {hint}; request access on the Hub and use a token that has it")
    except RevisionNotFoundError:
        raise NoderigError(f"{pin.repo} has no revision {pin.revision!r} on {pin.endpoint}")
    except RepositoryNotFoundError:
        # (a mirror may answer a gated repo asked without a token as one that does not exist: Olah does)
        hint = ("is private or gated and the token cannot see it" if token else
                "is private or gated: no token was given (set hf_token_file or HF_TOKEN)")
        raise NoderigError(f"{pin.repo} does not exist on {pin.endpoint} (or {hint})") from None
    except hub_errors() as e:
        raise NoderigError(hub_failure(pin.endpoint, f"to list {pin.repo}@{pin.revision}", e)) from None
    return manifest_from_listing(pin, _Info(info.sha, info.gated, listed))


def hub_errors() -> tuple[type[BaseException], ...]:
    """What a request to a Hub raises when the Hub failed it or never answered: OSError and the
    errors of huggingface_hub's HTTP library (httpx2: a refused connection or a timeout there is
    no OSError, and left uncaught it ended the run as an internal error)."""
    import httpx2

    return (OSError, httpx2.HTTPError)


# What a Hub's (or a mirror's) HTTP status says to do, for the statuses a user meets
_STATUS_ADVICE = {
    401: "it wants a token, or refused this one: check hf_token_file (or HF_TOKEN)",
    403: "it refused the token: check that the token has access to the repo",
    404: ("the repo or the revision is not there (a mirror answers 404 for what it does not hold or cannot fetch): "
          "check model_repo, model_revision and hf_endpoint"),
    429: "it is rate-limiting these requests: wait a few minutes and rerun",
}
_SERVER_FAILED = ("the server failed (a mirror answers 502 or 504 when it cannot reach its upstream): rerun, or check "
                  "the mirror")


def hub_failure(endpoint: str, doing: str, error: BaseException) -> str:
    """One sentence saying why the Hub or mirror at ``endpoint`` failed a request: its HTTP
    status and what that status asks of the user, and its own words, escaped and cut short
    (a mirror's error page is untrusted text); or, with no answer, why it could not be reached.

    + endpoint: the Hub's URL (hf_endpoint)
    + doing: what was asked, after "to" ("to list org/repo@main")
    + error: what huggingface_hub or the connection raised
    """
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return f"cannot reach the Hub at {endpoint} {doing}: {one_line(str(error))}"
    words = getattr(error, "server_message", None) or getattr(response, "reason_phrase", None)
    said = f" ({one_line(words, 200)})" if words else ""
    advice = _STATUS_ADVICE.get(status) or (_SERVER_FAILED if status >= 500 else "check hf_endpoint")
    return f"the Hub at {endpoint} answered HTTP {status}{said} {doing}; {advice}"


def resolve_commit(pin: RepoPin, token: str | None, timeout: float = 10.0) -> str | None:
    """The commit ``pin.revision`` (a branch or tag) points at now, from one light request
    (``GET /api/models/{repo}/revision/{revision}``, the route ``model_info`` uses, without
    ``huggingface_hub``): what a rerun needs to learn that a moved-or-not ``main`` still pins
    the manifest the node holds. None when the Hub does not answer that plainly (an error, a
    redirect, no 40-hex ``sha``): the caller then builds the manifest, which says why. The
    token goes in a header that is never sent on to a redirect's target."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None  # a redirect is answered as the error it then is: the full listing decides

    url = (f"{pin.endpoint.rstrip('/')}/api/models/{urllib.parse.quote(pin.repo)}/revision/"
           f"{urllib.parse.quote(pin.revision, safe='')}")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        request.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=timeout) as response:
            sha = json.loads(response.read(1 << 20)).get("sha")
    except (OSError, ValueError, AttributeError, urllib.error.URLError):
        return None
    return sha if isinstance(sha, str) and _HEX["git_oid"].fullmatch(sha) else None


@dataclass
class _Info:
    sha: str
    gated: object
    siblings: list


def _selected(pin: RepoPin, name: str) -> bool:
    return any(matches(name, p) for p in pin.patterns)


def _listing(api, pin: RepoPin, commit: str) -> list[Listed]:
    """Every file at ``commit``: the recursive tree listing, or (a Hub without it, or one whose
    entries lack fields huggingface_hub requires) model_info's siblings, as complete as given."""
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.hf_api import RepoFile

    try:
        tree = _bounded(pin, api.list_repo_tree(pin.repo, revision=commit, recursive=True), RepoFile)
        return [Listed(e.path, e.size, e.lfs.sha256 if e.lfs else None, e.blob_id) for e in tree]
    except (HfHubHTTPError, KeyError, TypeError, ValueError):
        pass
    siblings = api.model_info(pin.repo, revision=commit, files_metadata=True).siblings or []
    return [Listed(s.rfilename, s.size, s.lfs.sha256 if s.lfs else None, s.blob_id) for s in siblings]


def _bounded(pin: RepoPin, entries, file_type) -> list:
    """The files of a tree listing (``entries``: read page by page as it is iterated), refused
    in one sentence past MAX_FILES files or twice as many entries: a mirror whose pages each
    link to one more would otherwise hold the controller, and its memory, for ever."""
    files = []
    for count, entry in enumerate(entries, 1):
        if isinstance(entry, file_type):
            files.append(entry)
        if len(files) > MAX_FILES or count > 2 * MAX_FILES:
            what = f"{MAX_FILES} files" if len(files) > MAX_FILES else f"{2 * MAX_FILES} files and folders"
            raise NoderigError(f"the Hub at {pin.endpoint} lists more than {what} (a checkpoint may have at most "
                               f"{MAX_FILES}) in {pin.repo}@{pin.revision}; {REFUSED}")
    return files


def _complete(api, pin: RepoPin, commit: str, files: list[Listed], token: str | None) -> None:
    """Fill in what the listing left out of the selected ``files``: paths-info first (one
    call), then a HEAD per file still incomplete; a file that stays without a size or a
    digest is refused in one sentence."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.hf_api import RepoFile

    missing = [f for f in files if _lacks(f)]
    if missing:
        try:
            known = {e.path: e for e in api.get_paths_info(pin.repo, [f.rfilename for f in missing], revision=commit)
                     if isinstance(e, RepoFile)}
        except (HfHubHTTPError, KeyError, TypeError, ValueError):
            known = {}
        for f in missing:
            e = known.get(f.rfilename)
            if e is not None:
                f.size = f.size if f.size is not None else e.size
                f.sha256 = f.sha256 or (e.lfs.sha256 if e.lfs else None)
                f.blob_id = f.blob_id or e.blob_id
    for f in [f for f in files if _lacks(f)]:
        url = hf_hub_url(pin.repo, f.rfilename, revision=commit, endpoint=pin.endpoint)
        try:
            meta = get_hf_file_metadata(url, token=token or False, endpoint=pin.endpoint)
        except hub_errors() as e:
            raise NoderigError(f"the Hub at {pin.endpoint} lists {describe(f.rfilename)} in {pin.repo}@{commit[:12]} "
                               f"without its size or digest, and a HEAD of it failed "
                               f"({hub_failure(pin.endpoint, 'to a HEAD', e)}); {REFUSED}") from None
        etag = (meta.etag or "").strip('"').removeprefix("W/").strip('"').lower()
        f.size = f.size if f.size is not None else meta.size
        if _HEX["sha256"].fullmatch(etag):
            f.sha256 = f.sha256 or etag
        elif _HEX["git_oid"].fullmatch(etag):
            f.blob_id = f.blob_id or etag
        if _lacks(f):
            what = " and no ".join(w for w, gone in (("size", f.size is None),
                                                    ("sha256 or git blob id", not (f.sha256 or f.blob_id))) if gone)
            raise NoderigError(f"the Hub at {pin.endpoint} gives no {what} for {describe(f.rfilename)} in "
                               f"{pin.repo}@{commit[:12]} (not in its tree listing, paths-info or the ETag of a "
                               f"HEAD), so noderig cannot verify it; use a Hub or mirror that serves LFS metadata")


def _lacks(f: Listed) -> bool:
    return f.size is None or not (f.sha256 or f.blob_id)


def _refuse_unsafe_names(pin: RepoPin, names: list) -> None:
    problem = listing_problem(names)
    if problem:
        raise NoderigError(f"the Hub at {pin.endpoint} lists {problem} in {pin.repo}@{pin.revision}; {REFUSED}")


def manifest_from_listing(pin: RepoPin, info) -> dict:
    """The manifest from the Hub's answer: every listed name checked first (``hubpath``),
    then the files the patterns select, with size and digest. Raises NoderigError naming
    the first bad entry and the Hub in one sentence.

    + pin: the repo, revision, endpoint and patterns asked for
    + info: ``ModelInfo``-like: ``.sha``, ``.gated``, ``.siblings`` (``RepoSibling``)
    """
    hub = f"the Hub at {pin.endpoint}"
    if not (isinstance(info.sha, str) and _HEX["git_oid"].fullmatch(info.sha)):
        raise NoderigError(f"{hub} answers {describe(info.sha)} as the commit of {pin.repo}@{pin.revision} "
                           f"(not a commit sha); {REFUSED}")
    siblings = info.siblings or []
    _refuse_unsafe_names(pin, [sib.rfilename for sib in siblings])
    files = []
    for sib in siblings:
        if not _selected(pin, sib.rfilename):
            continue
        entry = {"path": sib.rfilename, "size": sib.size}
        if sib.lfs:
            entry["sha256"] = sib.lfs.sha256
        else:
            entry["git_oid"] = sib.blob_id
        problem = entry_problem(entry)
        if problem:
            raise NoderigError(f"{hub} lists {describe(sib.rfilename)} in {pin.repo}@{pin.revision} with {problem}; "
                               f"{REFUSED}")
        files.append(entry)
    if not files:
        raise NoderigError(f"{pin.repo}@{pin.revision} has no files matching {list(pin.patterns)}")
    files.sort(key=lambda f: f["path"])
    return {
        "version": MANIFEST_VERSION,
        "repo": pin.repo,
        "revision": pin.revision,
        "commit": info.sha,
        "endpoint": pin.endpoint,
        "gated": bool(info.gated),
        "patterns": list(pin.patterns),
        "files": files,
        "total_bytes": sum(f["size"] for f in files),
    }

REFUSED = "the listing was refused and nothing was written on the node (check hf_endpoint: a Hub or mirror you trust)"
_HEX = {"sha256": re.compile(r"[0-9a-f]{64}"), "git_oid": re.compile(r"[0-9a-f]{40}")}


def listing_problem(names: list) -> str | None:
    """Why a listing of file names is refused, or None: too many names, a name that fails the
    path check (``hubpath``; every name, selected by a pattern or not: one hostile name is
    enough to distrust the whole listing), a name listed twice, or a name that is both a
    file and the directory of another (one of them cannot be written), or a directory where a
    listed file's aria2 control file goes (that file would read as partial for ever).

    + names: the paths as listed (any JSON values)
    """
    if len(names) > MAX_FILES:
        return f"{len(names)} files (a checkpoint may have at most {MAX_FILES})"
    seen = set()
    for name in names:
        problem = path_problem(name)
        if problem is None and name in seen:
            problem = "it is listed twice"
        if problem:
            return f"the unsafe path {describe(name)} ({problem})"
        seen.add(name)
    for name in seen:
        parent = name.rpartition("/")[0]
        while parent:
            if parent in seen:
                return f"{describe(parent)} both as a file and as the directory of {describe(name)}"
            if parent.endswith(CONTROL_SUFFIX) and parent[:-len(CONTROL_SUFFIX)] in seen:
                return (f"{describe(parent)} both as the directory of {describe(name)} and as the aria2 control file "
                        f"of {describe(parent[:-len(CONTROL_SUFFIX)])}")
            parent = parent.rpartition("/")[0]
    return None


def entry_problem(entry: dict) -> str | None:
    """What is wrong with a manifest entry's size or digest, or None."""
    size = entry.get("size")
    if type(size) is not int or size < 0:
        return f"the size {size!r} (not a byte count)"
    for key, pattern in _HEX.items():
        if key in entry and not (isinstance(entry[key], str) and pattern.fullmatch(entry[key])):
            return f"the {key} {describe(entry[key])} (not a hex digest)"
    if "sha256" not in entry and "git_oid" not in entry:
        return "no digest"
    return None


def manifest_problem(manifest) -> str | None:
    """What makes a manifest unusable, or None: a manifest read back from the node may have
    been edited there, so it passes the same checks as the Hub's listing.

    + manifest: the parsed JSON
    """
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        return "it has no list of files"
    problem = listing_problem([f.get("path") for f in files])
    if problem:
        return f"it lists {problem}"
    for f in files:
        problem = entry_problem(f)
        if problem:
            return f"it lists {describe(f['path'])} with {problem}"
    return None


def resolve_url(manifest: dict, path: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(manifest["repo"], path, revision=manifest["commit"], endpoint=manifest["endpoint"])


def signed_location(manifest: dict, path: str, token: str | None) -> str:
    """Where the Hub redirects ``path`` to (a signed CDN URL), resolved with the token here so
    that aria2 never sees the token: aria2 would forward an Authorization header to the CDN."""
    from huggingface_hub import get_hf_file_metadata

    try:
        meta = get_hf_file_metadata(resolve_url(manifest, path), token=token or False, endpoint=manifest["endpoint"])
    except hub_errors() as e:
        raise NoderigError(hub_failure(manifest["endpoint"], f"to resolve {manifest['repo']}/{path}", e)) from None
    location = meta.location
    # its HEAD answered: aria2 gets the token for a gated file (aria2.file_options), and its GET may still leave the Hub
    if location == resolve_url(manifest, path) and manifest.get("gated"):
        location = get_leaves(location, token) or location
    problem = redirect_problem(manifest["endpoint"], location)
    if problem:
        raise NoderigError(f"the Hub at {manifest['endpoint']} redirects {manifest['repo']}/{path} to "
                           f"{describe(redact(meta.location))} ({problem}); nothing was fetched (check hf_endpoint: "
                           f"a Hub or mirror you trust)")
    return location


# The Hub keeps every file over 10 MiB in LFS: a git file larger than that is no checkpoint's
SMALL_FILE_MAX = 10 << 20
_NOT_UPLOADED = "nothing was uploaded to the node (check hf_endpoint: a Hub or mirror you trust)"


def fetch_small(manifest: dict, path: str, token: str | None, into: str) -> str:
    """A gated repo's small git file (a config, a tokenizer's), fetched here with the token (which never goes to the
    node) into the directory ``into``; the local path. Read no further than the size the listing gave, and never past
    SMALL_FILE_MAX: a mirror that sends more (or lists a git file of gigabytes) is refused in one sentence, before it
    can fill the controller's disk or push a checkpoint's bytes through it.

    + path: the file's path in the repo
    + into: a directory of the controller's (a temporary one)
    """
    import os

    from huggingface_hub.utils import build_hf_headers, get_session

    listed = next(f["size"] for f in manifest["files"] if f["path"] == path)
    what = f"{manifest['repo']}/{path}"
    if listed > SMALL_FILE_MAX:
        raise NoderigError(f"the Hub at {manifest['endpoint']} lists {what} as a git file of {listed} bytes (the Hub "
                           f"keeps any file over {SMALL_FILE_MAX >> 20} MiB in LFS); {_NOT_UPLOADED}")
    local = os.path.join(into, "file")
    try:
        with get_session().stream("GET", resolve_url(manifest, path), headers=build_hf_headers(token=token),
                                  follow_redirects=True, timeout=60) as answer, open(local, "wb") as out:
            answer.raise_for_status()
            for chunk in answer.iter_bytes():
                if out.tell() + len(chunk) > listed:
                    raise NoderigError(f"the Hub at {manifest['endpoint']} sent more than the {listed} bytes it lists "
                                       f"for {what}; {_NOT_UPLOADED}")
                out.write(chunk)
    except hub_errors() as e:
        raise NoderigError(hub_failure(manifest["endpoint"], f"to fetch {what}", e)) from None
    return local


# redirects within the Hub's own host followed to find where a GET of a file leaves it
_SAME_HOST_HOPS = 5


def get_leaves(url: str, token: str | None) -> str | None:
    """Where a GET of ``url`` leaves its host, or None when the host answers it itself. A mirror can answer a
    file's HEAD itself and redirect its GET (an object store behind a proxy): aria2 GETs and forwards its
    Authorization header along any redirect, so the token must not go to aria2 for such a file. One ranged GET
    with the token, here; redirects within the host followed, as aria2 would.

    + url: the file's /resolve/ URL
    + token: the Hub token
    """
    from urllib.parse import urljoin

    from huggingface_hub.utils import build_hf_headers, get_session

    headers = {**build_hf_headers(token=token), "Range": "bytes=0-0", "Accept-Encoding": "identity"}
    for _ in range(_SAME_HOST_HOPS):
        try:
            with get_session().stream("GET", url, headers=headers, follow_redirects=False, timeout=30) as answer:
                target = urljoin(url, answer.headers.get("location", "")) if answer.is_redirect else None
        except hub_errors() as e:
            raise NoderigError(hub_failure(_origin(url), "to resolve a file's download", e)) from None
        if target is None:
            return None
        if _origin(target) != _origin(url):  # another host, or another scheme (redirect_problem judges it)
            return target
        url = target
    return url  # still on the host after the hops: aria2 starts there, without the token


def _origin(url: str) -> str:
    from urllib.parse import urlsplit

    split = urlsplit(url)
    return f"{split.scheme.lower()}://{split.netloc.lower()}"


def redirect_problem(endpoint: str, location: str) -> str | None:
    """Why aria2 may not fetch from ``location``, where the Hub at ``endpoint`` redirected a
    file, or None: aria2 takes any URI it knows (a magnet starts BitTorrent on the node, and
    writes the files the torrent names), so only an absolute http(s) URL, and no plain http
    from an https Hub (the signed URL would travel in clear text).

    + endpoint: the Hub's URL (hf_endpoint)
    + location: the redirect's target, as the Hub said it
    """
    from urllib.parse import urlsplit

    scheme = urlsplit(location).scheme.lower() if isinstance(location, str) else ""
    if scheme and scheme not in ("http", "https"):
        return f"a {scheme!r} URL (only http and https)"
    if not scheme or not urlsplit(location).netloc:
        return "no absolute http(s) URL"
    if scheme == "http" and urlsplit(endpoint).scheme.lower() == "https":
        return "plain http from an https Hub"
    return None


def download_url(manifest: dict, path: str, token: str | None) -> str:
    """Where aria2 fetches ``path`` from: with a token, an LFS file's signed CDN location,
    resolved here so the token never reaches aria2 or the node; otherwise its /resolve/ URL.
    Asked again when a signed URL expired.

    + token: the Hub token, or None
    """
    lfs = any(f["path"] == path and "sha256" in f for f in manifest["files"])
    return signed_location(manifest, path, token) if lfs and token else resolve_url(manifest, path)
