"""The lab's Hugging Face Hub: the endpoints the real `huggingface_hub` client and `aria2c` use.

One `LabHub` object runs two listeners. The *Hub* port answers the API
(``/api/models/...``: model_info, tree, paths-info, refs, whoami-v2) and ``/resolve/``;
the *CDN* port serves LFS file bytes behind HMAC-signed, expiring URLs, with HTTP Range.
``/resolve/`` of an LFS file answers 302 to an absolute CDN URL (another port counts as
another host, so the client drops its token on the way, as with the real Hub's CDN),
carrying ``X-Linked-Size``, ``X-Linked-Etag`` and ``X-Repo-Commit``; small text files are
served directly with their git blob sha1 as ETag.

Repos are directories ``root/<org>/<name>/...``; ``main`` is their only branch, its commit sha
a hash of the file list, and that sha is accepted as a revision too. Per-file sha256 and
git-sha1 are computed at start-up and cached in ``root/.lab-hub-index.json`` keyed by
(size, mtime_ns).

A hostile mode (the fault ``hostile_listing``) adds names that climb out of the model
directory, absolute ones, names with a newline or backslashes, a symlink-looking name, or a
listing of more files than noderig accepts (see `HOSTILE_PATHS`), to a repo's model_info
siblings, its tree and /resolve/.

A mirror mode (``"mirror": true``) answers as popular self-hosted Hub mirrors do:
``model_info`` lists siblings by name only (no size, no LFS, whatever ``blobs`` asks),
``/resolve/`` serves every file itself with ``200`` and an ETag (no redirect, no
``X-Linked-*``), and a tree route without its trailing slash answers ``307`` to the slashed
form. ``"no_range": true`` ignores Range headers (every body whole, ``200``), as a server
without resume support does. Every GET route answers HEAD too, as the real Hub does.

Test controls (Hub port): ``POST /_lab/faults`` (JSON, merged into the active faults),
``GET /_lab/faults``, ``POST /_lab/reset`` (clear faults and counters), ``GET /_lab/stats``,
``POST /_lab/rescan``. See `FAULTS` for the fault keys.

Run it: ``python -m noderig_lab.hub --root DIR --bind ADDR --port N --cdn-port M
--tokens-file F [--gated REPO ...]``, or `start_hub(...)` in a test.

Where things are: `server` (the `LabHub` object: listeners, state, signing, faults taken),
`repos` (repos on disk, digests), `faults` (the fault switches and hostile listings),
`counters` (``/_lab/stats``); one request goes through `handler` (its kind, counting, the
``status`` fault) to a route: `api` (``/api/...``), `files` (``/resolve/``, the CDN, Range
and the body faults), `control` (``/_lab/...``), with `auth` (tokens, gating) and `http`
(responses, errors) under them.
"""

from .faults import FAULTS, HOSTILE_HUGE_FILES, HOSTILE_MARKER, HOSTILE_PATHS
from .repos import SIDECAR, FileEntry, Repo, is_lfs, scan_repos
from .server import DEFAULT_REDIRECT_TTL, LabHub, main, read_tokens, start_hub

__all__ = ["DEFAULT_REDIRECT_TTL", "FAULTS", "HOSTILE_HUGE_FILES", "HOSTILE_MARKER", "HOSTILE_PATHS", "SIDECAR",
           "FileEntry", "LabHub", "Repo", "is_lfs", "main", "read_tokens", "scan_repos", "start_hub"]
