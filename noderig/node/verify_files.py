"""Verify a checkpoint directory: safetensors headers, the shard index, and content hashes.

Runs ON the node under its own ``python3`` (stdlib only; Python >= 3.8) and is also imported
by ``noderig verify`` on any machine::

    python3 verify_files.py MANIFEST DIR [--jobs N] [--structure-only] [--no-record]
    python3 verify_files.py - DIR ...        # no manifest: structure only
    python3 verify_files.py MANIFEST|- DIR --check-paths   # before the deploy writes: see check_paths

Prints one JSON line::

    {"ok": bool, "files": [{"file", "status", "detail"}], "index": [{"problem", "detail", "index"}],
     "hashed_bytes": N, "sha256_checked": bool, "library_check": "...",
     "record": "written" | "unchanged" | "not used" | "not written: ...", "seconds": s}

and exits 0 when every file passes, 1 when one does not, 2 on a usage error.

Layers, cheapest first:

1. presence: a file with an ``.aria2`` control file beside it is ``partial`` (aria2 has not
   finished it; its size means nothing under preallocation) and is never verified;
2. size against the manifest (``truncated`` / ``size_mismatch``);
3. structure, from headers only (O(shards)): every check the safetensors Rust loader makes
   (header length <= 100,000,000; UTF-8 JSON object; known dtype,
   integer shape and ``data_offsets`` per tensor; offsets contiguous from 0; byte span ==
   elements x dtype bits / 8; file size == 8 + header + last end) and one the format
   demands that safetensors 0.8.0 does not enforce (no key twice: a duplicate tensor name
   hides a tensor's bytes; the Rust loader keeps the last one), plus, when the
   ``safetensors`` package is importable, the library's own validator on the same file
   (see LibraryCheck); then the index: each shard holds exactly the tensors its
   ``weight_map`` entries name, every shard it names exists, no tensor sits in two shards,
   ``metadata.total_size`` equals the tensors' byte total. Headers of many shards are read
   by forked worker processes (JSON parsing holds the GIL), the index meanwhile here;
4. content: sha256 (LFS files) or git blob id (small files) against the manifest, files
   hashed in parallel by threads (hashlib releases the GIL), largest first, each byte read
   once into a reused 1 MiB buffer.

A record, ``DIR/.noderig/verified.json`` = ``{file: {size, mtime_ns, digest}}``, holds only
files that passed layers 1-4; a later run skips hashing a file whose size and mtime are as
recorded and whose digest is still the manifest's. It is written atomically, and only when
it changed.

Per-file statuses (stable words): ok, missing, partial, truncated, size_mismatch,
header_invalid, index_mismatch, sha256_mismatch, symlink (the file, or a directory on its
way, is a symbolic link: never followed, never read), unverified (structure fine but
content not checked: no manifest, or ``--structure-only``). ``ok`` and ``unverified`` pass.

Paths are data: every manifest path passes ``hubpath.path_problem`` (the controller's own
check, shipped beside this file) before anything is read, and nothing below DIR is followed
through a symlink (each component is lstat'ed; files are opened with O_NOFOLLOW).
Index problems (stable words): shard_missing, tensor_in_no_shard, tensor_in_two_shards,
tensor_not_in_index, tensor_in_other_shard, total_size_mismatch, index_invalid; one entry per
problem and shard, its detail naming the first tensor (and how many more).

When a file's hash matches the manifest it is ``ok`` even if the index disagrees with it:
its bytes are the Hub's, fetching it again cannot help; the disagreement still shows in
``index`` and makes the report fail. So with a manifest, the files named bad are exactly the
ones to fetch again. Without one, every file on either side of a disagreement is named.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import stat
import struct
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, repeat
from operator import itemgetter, mul, sub

try:
    from .hubpath import MAX_FILES, STATE_DIR, describe, escaped, path_problem
except ImportError:  # run as a script on the node: hubpath.py is shipped beside this file, and
    # loaded from there by its location (also under ``python3 -I``; no sys.path lookup)
    def _sibling(name: str):
        import importlib.util

        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                         f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    _hubpath = _sibling("hubpath")
    MAX_FILES, STATE_DIR, describe, escaped, path_problem = (_hubpath.MAX_FILES, _hubpath.STATE_DIR,
                                                             _hubpath.describe, _hubpath.escaped, _hubpath.path_problem)

# noderig's state directory beside the checkpoint: the manifest the deploy wrote, and the record.
MANIFEST_FILE = f"{STATE_DIR}/manifest.json"
RECORD_FILE = f"{STATE_DIR}/verified.json"
MAX_HEADER = 100_000_000  # the Rust loader's MAX_HEADER_SIZE
BLOCK = 1 << 20  # bench/verify.py: 64 KiB..4 MiB hash alike (within noise); 16 MiB ~20% slower (past L2)
MAX_JOBS = 8
PARALLEL_MIN_SHARDS = 8  # per header-reading process: below that, forking costs more than it saves

OK = "ok"
MISSING = "missing"
PARTIAL = "partial"
TRUNCATED = "truncated"
SIZE_MISMATCH = "size_mismatch"
HEADER_INVALID = "header_invalid"
INDEX_MISMATCH = "index_mismatch"
SHA256_MISMATCH = "sha256_mismatch"
UNVERIFIED = "unverified"
SYMLINK = "symlink"
PASSING = (OK, UNVERIFIED)
STATUSES = (OK, MISSING, PARTIAL, TRUNCATED, SIZE_MISMATCH, HEADER_INVALID, INDEX_MISMATCH,
            SHA256_MISMATCH, SYMLINK, UNVERIFIED)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

# Index-level problems (stable words).
SHARD_MISSING = "shard_missing"
TENSOR_IN_NO_SHARD = "tensor_in_no_shard"
TENSOR_IN_TWO_SHARDS = "tensor_in_two_shards"
TENSOR_NOT_IN_INDEX = "tensor_not_in_index"
TENSOR_IN_OTHER_SHARD = "tensor_in_other_shard"
TOTAL_SIZE_MISMATCH = "total_size_mismatch"
INDEX_INVALID = "index_invalid"

# safetensors 0.8.0's Dtype enum (22 variants) and each one's size in bits.
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}
_U64 = 1 << 64


class UsageError(Exception):
    """Bad input to the verifier itself (no such directory, unreadable manifest)."""


class Bad(Exception):
    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


# JSON objects decode to tuples of (key, value) pairs, arrays stay lists: duplicate keys stay
# visible, nothing is built twice, and it parses faster than into dicts.
_pairs = json.JSONDecoder(object_pairs_hook=tuple)


def _first_duplicate(pairs):
    seen = set()
    for k, _ in pairs:
        if k in seen:
            return k
        seen.add(k)
    return None


def _as_dict(pairs, what: str, status: str = "header_invalid") -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise Bad(status, f"{what} has the key {_q(_first_duplicate(pairs))} twice")
    return d


# ---------------------------------------------------------------------------------------
# structure: one safetensors file, header only


class Header:
    __slots__ = ("length", "names", "data_bytes", "count")

    def __init__(self, length, names, data_bytes):
        self.length, self.names, self.data_bytes, self.count = length, names, data_bytes, len(names)


def _q(name) -> str:
    """A value read from a checkpoint file (a tensor's name, a shape) as a detail shows it: JSON,
    each character a terminal may act on escaped (the file is the Hub's bytes, and the detail
    reaches the controller's terminal), cut short past 200 characters."""
    text = escaped(json.dumps(name, ensure_ascii=False))
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def _fast_layout(top):
    """The usual case at C speed: (names by offset, end) when every tensor is exactly
    {dtype, shape, data_offsets} with a known dtype, non-negative integer shape and offsets,
    the right byte span and contiguous placement from 0; None when anything is off (or
    unusual), and the precise loop in read_header then says what."""
    try:
        tensors = [t for t in top if t[0] != "__metadata__"]
        if not tensors:
            return [], 0
        names, infos = zip(*tensors)
        if set(map(type, infos)) != {tuple} or set(map(len, infos)) != {3}:
            return None
        p0, p1, p2 = (list(map(itemgetter(i), infos)) for i in (0, 1, 2))
        if (set(map(itemgetter(0), p0)) != {"dtype"} or set(map(itemgetter(0), p1)) != {"shape"}
                or set(map(itemgetter(0), p2)) != {"data_offsets"}):
            return None
        dtypes, shapes, offsets = (list(map(itemgetter(1), p)) for p in (p0, p1, p2))
        if set(map(type, dtypes)) != {str} or set(map(type, shapes)) != {list} or set(map(type, offsets)) != {list}:
            return None
        dims = list(chain.from_iterable(shapes))
        if dims and (set(map(type, dims)) != {int} or min(dims) < 0 or max(dims) >= _U64):
            return None
        if set(map(len, offsets)) != {2}:
            return None
        begins, ends = list(map(itemgetter(0), offsets)), list(map(itemgetter(1), offsets))
        if (set(map(type, begins)) != {int} or set(map(type, ends)) != {int}
                or min(begins) < 0 or max(ends) >= _U64):
            return None
        nbits = list(map(mul, map(math.prod, shapes), map(DTYPE_BITS.__getitem__, dtypes)))
        if max(nbits) >= _U64 or list(map(mul, map(sub, ends, begins), repeat(8))) != nbits:
            return None
        placed = sorted(zip(begins, ends, names))
        b_sorted, e_sorted = list(map(itemgetter(0), placed)), list(map(itemgetter(1), placed))
        if b_sorted[0] != 0 or b_sorted[1:] != e_sorted[:-1]:
            return None
        return list(map(itemgetter(2), placed)), e_sorted[-1]
    except (TypeError, KeyError, ValueError, IndexError, OverflowError):
        return None


def read_header(path: str, size: int) -> Header:
    """Every check the safetensors loader makes, from the first 8 + N bytes and the file size.
    Raises Bad(truncated | size_mismatch | header_invalid, detail naming the first fault)."""
    n, top = _header_json(path, size)
    _check_metadata(top)
    fast = _fast_layout(top)
    if fast is not None:
        return _sized(Header(n, fast[0], fast[1]), size)
    entries = _tensor_entries(top)
    return _sized(Header(n, [x[2] for x in entries], _layout_end(entries)), size)


def _header_json(path: str, size: int):
    """(header length, the header as (key, value) pairs): the length within the loader's
    limit and the file, the bytes UTF-8, a JSON object, no key twice."""
    with _open_nofollow(path) as f:
        head = f.read(8)
        if len(head) < 8:
            raise Bad(TRUNCATED, f"{size} bytes: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise Bad(HEADER_INVALID, f"header length {n} exceeds the loader's limit of {MAX_HEADER}")
        if 8 + n > size:
            raise Bad(TRUNCATED, f"{size} bytes: ends inside its {n}-byte header")
        raw = f.read(n)
    if len(raw) < n:
        raise Bad(TRUNCATED, f"{8 + len(raw)} bytes readable: ends inside its {n}-byte header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Bad(HEADER_INVALID, f"header is not valid UTF-8 (byte {8 + e.start})")
    try:
        top = _pairs.decode(text)
    except ValueError as e:
        raise Bad(HEADER_INVALID, f"header is not valid JSON: {e}")
    if type(top) is not tuple:
        raise Bad(HEADER_INVALID, "header is not a JSON object")
    if len({k for k, _ in top}) != len(top):
        raise Bad(HEADER_INVALID, f"header has the key {_q(_first_duplicate(top))} twice")
    return n, top


def _check_metadata(top) -> None:
    """``__metadata__``, when present: a JSON object of strings to strings."""
    for name, info in top:
        if name == "__metadata__":
            if type(info) is not tuple:
                raise Bad(HEADER_INVALID, "__metadata__ is not a JSON object")
            meta = _as_dict(info, "__metadata__")
            if not all(type(v) is str for v in meta.values()):
                raise Bad(HEADER_INVALID, "__metadata__ is not a map of strings to strings")


def _tensor_entries(top) -> list:
    """Each tensor checked on its own (the precise path, when ``_fast_layout`` declined):
    ``(begin, end, name, bits, shape, dtype)`` sorted by offsets, the loader's order."""
    entries = []
    add = entries.append
    bits_of = DTYPE_BITS.get
    for name, info in top:
        if type(info) is not tuple:
            what = "__metadata__" if name == "__metadata__" else f"tensor {_q(name)}"
            raise Bad(HEADER_INVALID, f"{what} is not a JSON object")
        d = dict(info)
        if len(d) != len(info):
            raise Bad(HEADER_INVALID, f"tensor {_q(name)} has the key {_q(_first_duplicate(info))} twice")
        if name == "__metadata__":
            continue
        try:
            dtype, shape, offsets = d["dtype"], d["shape"], d["data_offsets"]
        except KeyError:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: needs dtype, shape and data_offsets")
        bits = bits_of(dtype) if type(dtype) is str else None
        if bits is None:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: unknown dtype {_q(dtype)}")
        if type(shape) is not list or not all(type(x) is int and 0 <= x < _U64 for x in shape):
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: shape {_q(shape)} is not a list of non-negative integers")
        if type(offsets) is not list or len(offsets) != 2:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: data_offsets {_q(offsets)} is not [begin, end]")
        b, e = offsets
        if type(b) is not int or type(e) is not int or not 0 <= b < _U64 or not 0 <= e < _U64:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: data_offsets {_q(offsets)} is not [begin, end]")
        add((b, e, name, bits, shape, dtype))
    entries.sort()  # by begin, then end: the loader's order
    return entries


def _layout_end(entries: list) -> int:
    """Where the last tensor ends, once every tensor sits right after the one before it
    (from 0) and spans exactly its elements x dtype bits / 8."""
    start = 0
    for b, e, name, bits, shape, dtype in entries:
        if e < b:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: data_offsets [{b}, {e}] end before they begin")
        if b != start:
            what = "overlaps the tensor before it" if b < start else f"leaves a gap of {b - start} bytes before it"
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: data_offsets [{b}, {e}] {what} (expected begin {start})")
        nbits = math.prod(shape) * bits
        if nbits >= _U64:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: shape {shape} x {dtype} overflows")
        if nbits % 8:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: shape {shape} x {dtype} is not a whole number of bytes")
        if nbits >> 3 != e - b:
            raise Bad(HEADER_INVALID, f"tensor {_q(name)}: shape {shape} x {dtype} is {nbits >> 3} bytes, "
                                      f"data_offsets [{b}, {e}] span {e - b}")
        start = e
    return start


def _sized(header: Header, size: int) -> Header:
    """The loader's last check: the file ends exactly where the last tensor does."""
    n, end = header.length, header.data_bytes
    want = 8 + n + end
    if size < want:
        raise Bad(TRUNCATED, f"{size} bytes, the header describes {want} (8 + {n} + {end})")
    if size > want:
        raise Bad(SIZE_MISMATCH, f"{size} bytes, the header describes {want}: {size - want} bytes past the last tensor")
    return header


class LibraryCheck:
    """The safetensors package's own header validation, when it can run without a framework.

    ``safe_open`` validates the header (the Rust ``read_metadata`` + ``validate``) before it
    imports the framework it was asked for (no tensor is read: the file is mmapped). With
    numpy installed it then succeeds and its tensor names are compared with ours; without
    numpy it raises ImportError, which then means "header valid". That order is an
    implementation detail, so it is probed once with a file known to be bad (one byte short)
    and one known to be good: the library is used only if it rejects the first with its own
    error and accepts the second. ``safetensors.deserialize`` is not used: it needs the whole
    file in memory as bytes.
    """

    def __init__(self):
        self.validate = None
        try:
            import safetensors
        except ImportError as e:
            self.why = f"not used: {e}"
            return
        self._lib = safetensors
        version = getattr(safetensors, "__version__", "?")
        try:
            import importlib.util

            self._numpy_absent = importlib.util.find_spec("numpy") is None
        except (ImportError, ValueError):
            self._numpy_absent = False
        try:
            with tempfile.TemporaryDirectory() as tmp:
                good, bad = os.path.join(tmp, "good"), os.path.join(tmp, "bad")
                header = b'{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
                with open(good, "wb") as f:
                    f.write(struct.pack("<Q", len(header)) + header + b"\0\0")
                with open(bad, "wb") as f:
                    f.write(struct.pack("<Q", len(header)) + header + b"\0")  # one byte short
                if self._open(bad) is not False or self._open(good) is False:
                    self.why = f"not used: safetensors {version} does not validate a header before needing a framework"
                    return
        except Exception as e:  # a probe must never break verification
            self.why = f"not used: probing safetensors {version} failed: {e}"
            return
        self.validate = self._validate
        self.why = (f"safetensors {version} safe_open: header validated by the library too"
                    + (" (numpy absent: validation only)" if self._numpy_absent else ", tensor names compared"))

    def _open(self, path):
        """False (and last_error) if the library rejects the header; else its tensor names, or
        None when numpy is absent (the header was validated, nothing more to compare)."""
        lib = self._lib
        # numpy absent: let its import fail at once (None in sys.modules) rather than search
        # sys.path on every call; only for the call, and only when nothing has imported it.
        block = self._numpy_absent and "numpy" not in sys.modules
        if block:
            sys.modules["numpy"] = None
        try:
            with lib.safe_open(path, framework="numpy") as f:
                return list(f.keys())
        except lib.SafetensorError as e:
            self.last_error = str(e)
            return False
        except ImportError:  # numpy missing: raised after the header was validated (probed)
            return None
        finally:
            if block:
                sys.modules.pop("numpy", None)

    def _validate(self, path: str, header: Header) -> str | None:
        got = self._open(path)
        if got is False:
            return f"safetensors: {self.last_error}"
        if got is not None and set(got) != set(header.names):
            return "safetensors reads other tensor names from the header than these checks do"
        return None


_library = None


def library_check() -> LibraryCheck:
    global _library
    if _library is None:
        _library = LibraryCheck()
    return _library


# ---------------------------------------------------------------------------------------
# content


def file_digest(path: str, entry: dict, size: int) -> str:
    """The Hub's identity of the file: LFS sha256, or git blob id (sha1 of b"blob <size>\\0" + bytes)."""
    h = hashlib.sha256() if entry.get("sha256") else hashlib.sha1(b"blob %d\0" % size)
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    with _open_nofollow(path, buffering=0) as f:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])  # >= 2 KiB: hashlib releases the GIL
    return h.hexdigest()


def expected_digest(entry: dict) -> str | None:
    return entry.get("sha256") or entry.get("git_oid")


# ---------------------------------------------------------------------------------------
# one run


class _File:
    __slots__ = ("root", "rel", "path", "entry", "status", "detail", "st", "header", "index", "index_detail",
                 "digest", "hashed", "recorded")

    def __init__(self, root, rel, entry):
        self.root, self.rel, self.path, self.entry = root, rel, os.path.join(root, rel), entry
        self.status, self.detail = UNVERIFIED, ""
        self.st = self.header = self.index = self.index_detail = self.digest = None
        self.hashed, self.recorded = 0, False

    def fail(self, status, detail):
        self.status, self.detail = status, detail

    @property
    def readable(self):
        return self.status in PASSING


def _open_nofollow(path: str, buffering: int = -1):
    """Open for reading without following a symlink at the last component (ELOOP instead)."""
    return os.fdopen(os.open(path, os.O_RDONLY | NOFOLLOW), "rb", buffering=buffering)


def _safe_rel(rel: str) -> str:
    problem = path_problem(rel)
    if problem:
        raise UsageError(f"the manifest names the unsafe path {describe(rel)} ({problem}); nothing was read or written")
    return rel


def walk_problem(root: str, rel: str):
    """(status, detail) when ``root/rel`` cannot be used without following a link: each
    existing component below ``root`` is lstat'ed, never followed. None when every existing
    component is a real directory (the last one a regular file, or absent) and the path,
    resolved, stays inside ``root`` (which itself may be a symlink, as a mount point may).

    + root: the checkpoint directory
    + rel: a path that passed ``path_problem``
    """
    parts = rel.split("/")
    here = root
    for depth, part in enumerate(parts, 1):
        here = os.path.join(here, part)
        shown = "/".join(parts[:depth])
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            break
        except OSError as e:
            return MISSING, f"{shown}: cannot lstat: {e.strerror}"
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(here)
            except OSError:
                target = "?"
            return SYMLINK, f"{shown} is a symlink to {describe(target)} (never followed)"
        if depth < len(parts) and not stat.S_ISDIR(st.st_mode):
            return SIZE_MISMATCH, f"{shown} is not a directory"
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, rel))
    if not real.startswith(real_root.rstrip("/") + "/"):
        return SYMLINK, f"resolves to {describe(real)}, outside {describe(real_root)}"
    return None


def check_paths(root: str, manifest: dict | None) -> dict:
    """What must hold before the deploy writes, renames or deletes anything under ``root``:
    noderig's state directory and its files are real (not symlinks), and every manifest path
    passes the path check, walks no symlink (`walk_problem`), and neither it nor its aria2
    control file is a symlink or something other than a regular file. Reads nothing but
    directory entries; writes nothing. Returns ``{"ok", "problems": [{"file", "problem"}]}``.

    + root: the checkpoint directory (may not exist yet)
    + manifest: the manifest, or None to check the state directory only
    """
    problems = []
    for rel in (STATE_DIR, MANIFEST_FILE, RECORD_FILE):
        found = walk_problem(root, rel)
        if found:
            problems.append({"file": rel, "problem": found[1]})
        elif rel == STATE_DIR and os.path.lexists(os.path.join(root, rel)) and not os.path.isdir(os.path.join(root, rel)):
            problems.append({"file": rel, "problem": f"{rel} is not a directory"})
    for entry in (manifest or {}).get("files", []):
        rel = entry.get("path") if isinstance(entry, dict) else None
        problem = path_problem(rel)
        found = None if problem else walk_problem(root, rel) or walk_problem(root, rel + ".aria2")
        if problem is None and found is None:
            full = os.path.join(root, rel)
            if os.path.lexists(full) and not stat.S_ISREG(os.lstat(full).st_mode):
                problem = "it exists and is not a regular file"
        if problem or found:
            problems.append({"file": rel if isinstance(rel, str) else repr(rel), "problem": problem or found[1]})
    return {"ok": not problems, "problems": problems}


def _discover(root: str) -> list[str]:
    """Without a manifest: every visible file under root (hidden files and directories, such as
    .noderig and huggingface's .cache, are not part of a checkpoint), plus files that exist
    only as an aria2 control file so far, plus symlinks to directories (never descended:
    they are reported as ``symlink``)."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            if not name.startswith(".") and os.path.islink(os.path.join(dirpath, name)):
                found.add(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith("."):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            found.add(rel[:-len(".aria2")] if rel.endswith(".aria2") else rel)
    return sorted(found)


def _load_record(root: str) -> dict:
    if walk_problem(root, RECORD_FILE):  # a record behind a symlink is not ours: hash everything
        return {}
    try:
        with open(os.path.join(root, RECORD_FILE)) as f:
            record = json.load(f)
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def _verified_by_digest(live: str) -> dict:
    """digest -> path of each file ``live``'s record vouches for that is still the file it
    hashed: a regular file reached without a link, with the recorded size and mtime."""
    found = {}
    for rel, seen in sorted(_load_record(live).items()):
        if not isinstance(seen, dict) or not seen.get("digest") or path_problem(rel) or walk_problem(live, rel):
            continue
        try:
            st = os.lstat(os.path.join(live, rel))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size == seen.get("size") and st.st_mtime_ns == seen.get("mtime_ns"):
            found.setdefault(seen["digest"], rel)
    return found


def _seed_problem(root: str, rel) -> str | None:
    """Why a manifest path cannot be linked into ``root``: the path check (the manifest comes
    from the Hub), then no link on the way (``walk_problem``)."""
    problem = path_problem(rel)
    if problem:
        return problem
    found = walk_problem(root, rel)
    return found[1] if found else None


def seed(root: str, manifest: dict, live: str) -> dict:
    """Prepare ``root`` for a new revision beside ``live`` (the directory a server runs):
    hard-link in every manifest file that ``live`` holds verified with the same digest, and
    record them verified in ``root``, so that only what changed is fetched and hashed. Never
    writes in ``live``, never follows a link, never replaces a file already in ``root``.
    Returns ``{"ok", "linked", "linked_bytes", "problems"}``."""
    if os.path.realpath(root) == os.path.realpath(live):
        raise UsageError(f"{describe(root)} is the live directory itself")
    shared = _verified_by_digest(live)
    record, linked, linked_bytes, problems = _load_record(root), 0, 0, []
    for entry in manifest["files"]:
        rel, digest = (entry.get("path"), expected_digest(entry)) if isinstance(entry, dict) else (None, None)
        if not isinstance(digest, str) or digest not in shared:
            continue
        problem = _seed_problem(root, rel)
        if problem:  # (the manifest comes from the Hub: a path is checked before it is used)
            problems.append({"file": rel if isinstance(rel, str) else repr(rel), "problem": problem})
            continue
        target = os.path.join(root, rel)
        if rel in record or os.path.lexists(target):
            continue  # something is there already: the fetch decides about it
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.link(os.path.join(live, shared[digest]), target, follow_symlinks=False)
        st = os.lstat(target)
        record[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": digest}
        linked, linked_bytes = linked + 1, linked_bytes + st.st_size
    if linked:
        write_record(root, record)
    return {"ok": not problems, "linked": linked, "linked_bytes": linked_bytes, "problems": problems}


def write_record(root: str, record: dict) -> None:
    """tmp + fsync + rename + fsync of the directory: a crash leaves the old or the new record."""
    path = os.path.join(root, RECORD_FILE)
    directory = os.path.dirname(path)
    if os.path.islink(directory) or os.path.islink(path):
        raise OSError(f"{directory} or its record is a symlink: never written through")
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".verified.", suffix=".tmp", dir=directory)
    try:
        # readable by the server's user like the checkpoint itself (sizes and digests, nothing
        # secret): mkstemp's 0600 would be made readable again by every next run
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _check_presence(f: _File) -> bool:
    """aria2 control file, existence, size against the manifest. True: read its structure.
    A file whose size is off is still read (its status stays): what it holds names the files
    an index problem involves."""
    linked = walk_problem(f.root, f.rel)
    if linked:
        f.fail(*linked)
        return False
    if os.path.lexists(f.path + ".aria2"):
        f.fail(PARTIAL, "aria2 control file (.aria2) present: download unfinished")
        return False
    try:
        st = os.lstat(f.path)
    except FileNotFoundError:
        f.fail(MISSING, "not on disk")
        return False
    except OSError as e:
        f.fail(MISSING, f"cannot stat: {e.strerror}")
        return False
    if not stat.S_ISREG(st.st_mode):
        f.fail(SIZE_MISMATCH, "not a regular file")
        return False
    f.st = st
    want = f.entry.get("size") if f.entry else None
    if want is not None and st.st_size != want:
        f.fail(TRUNCATED if st.st_size < want else SIZE_MISMATCH, f"{st.st_size} bytes, expected {want}")
    return f.rel.endswith((".safetensors", ".safetensors.index.json"))


def _structure(job):
    """One file's structure; runs in a worker process for many shards. job = (rel, path, size,
    library); returns ("header", length, names, data_bytes) | ("index", index) | ("bad", status, detail)."""
    rel, path, size, library = job
    gc_was = gc.isenabled()  # restored here: _check_index calls this in the caller's process too
    gc.disable()  # millions of small objects from JSON, none cyclic: the collector only costs time
    try:
        if rel.endswith(".safetensors"):
            header = read_header(path, size)
            if library:
                validate = library_check().validate
                problem = validate(path, header) if validate else None
                if problem:
                    return ("bad", HEADER_INVALID, problem)
            return ("header", header.length, header.names, header.data_bytes)
        return ("index", _read_index(path))
    except Bad as e:
        return ("bad", e.status, e.detail)
    except OSError as e:
        return ("bad", MISSING, f"cannot read: {e.strerror}")
    finally:
        if gc_was:
            gc.enable()


def _apply(f: _File, result) -> None:
    kind = result[0]
    if kind == "bad":
        if f.status in PASSING:
            f.fail(result[1], result[2])
    elif kind == "header":
        f.header = Header(result[1], result[2], result[3])
    else:
        f.index = result[1]


def _check_structures(files: list, library: bool, procs: int) -> None:
    """Headers of many shards in worker processes (fork), index files here meanwhile."""
    jobs = [f for f in files if f.rel.endswith(".safetensors")]
    others = [f for f in files if not f.rel.endswith(".safetensors")]
    procs = min(procs, len(jobs) // PARALLEL_MIN_SHARDS)
    gc_was = gc.isenabled()
    gc.disable()  # off across the loop and in the forked workers: _structure leaves it as it finds it
    try:
        if procs > 1 and sys.platform.startswith("linux"):
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            if library:
                library_check()  # probe once, before the fork: the workers inherit it
            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(procs, mp_context=ctx) as pool:
                args = [(f.rel, f.path, f.st.st_size, library) for f in jobs]
                results = pool.map(_structure, args, chunksize=max(1, len(args) // (procs * 4)))
                for f in others:  # the index parses here while the workers read headers
                    _apply(f, _structure((f.rel, f.path, f.st.st_size, library)))
                for f, result in zip(jobs, results):
                    _apply(f, result)
        else:
            for f in jobs + others:
                _apply(f, _structure((f.rel, f.path, f.st.st_size, library)))
    finally:
        if gc_was:
            gc.enable()


def _read_index(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            top = _pairs.decode(fh.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise Bad(INDEX_MISMATCH, f"not a valid index: {e}")
    if type(top) is not tuple:
        raise Bad(INDEX_MISMATCH, "not a valid index: not a JSON object")
    obj = _as_dict(top, "not a valid index: it", INDEX_MISMATCH)
    wm = obj.get("weight_map")
    if type(wm) is not tuple:
        raise Bad(INDEX_MISMATCH, "not a valid index: no weight_map of tensor name to shard file")
    wm = _as_dict(wm, "not a valid index: weight_map", INDEX_MISMATCH)
    if not all(type(v) is str for v in wm.values()):
        raise Bad(INDEX_MISMATCH, "not a valid index: no weight_map of tensor name to shard file")
    meta = obj.get("metadata")
    total = _as_dict(meta, "not a valid index: metadata", INDEX_MISMATCH).get("total_size") \
        if type(meta) is tuple else None
    if total is not None and (type(total) is not int or total < 0):
        raise Bad(INDEX_MISMATCH, f"not a valid index: metadata.total_size {_q(total)} is not a byte count")
    return {"weight_map": wm, "total_size": total}


class _IndexProblems:
    """Index problems, one entry per (problem, shard), and per-file findings."""

    def __init__(self, index_rel):
        self.index_rel = index_rel
        self.groups = {}  # (problem, key) -> [count, first detail, suffix]
        self.order = []
        self.per_file = {}  # rel -> [first detail, count]

    def add(self, problem, key, detail, files=()):
        g = self.groups.get((problem, key))
        if g is None:
            self.groups[(problem, key)] = [1, detail]
            self.order.append((problem, key))
        else:
            g[0] += 1
        for rel in files:
            slot = self.per_file.setdefault(rel, [detail, 0])
            slot[1] += 1

    def entries(self):
        out = []
        for problem, key in self.order:
            count, detail = self.groups[(problem, key)]
            if count > 1:
                detail += f" (and {count - 1} more like it)"
            out.append({"problem": problem, "detail": detail, "index": self.index_rel})
        return out


def _check_index(idx: _File, files: dict, root: str, library: bool) -> list[dict]:
    """Shards vs index: names, placement, total size. Marks the files involved."""
    base = os.path.dirname(idx.rel)
    rel_of = (lambda s: s) if not base else (lambda s: f"{base}/{s}")
    wm, total = idx.index["weight_map"], idx.index["total_size"]
    p = _IndexProblems(idx.rel)

    complete = True  # every shard's header read: total_size and "in no shard" are decidable
    readable = []  # (shard, rel, file) with a valid header
    for shard in sorted(set(wm.values())):
        rel = rel_of(shard)
        f = files.get(rel)
        if f is None:  # named by the index but neither in the manifest nor seen on disk
            try:
                f = files[rel] = _File(root, _safe_rel(rel), None)
            except UsageError:
                p.add(INDEX_INVALID, shard, f"the index names an unsafe shard path {_q(shard)}", [idx.rel])
                complete = False
                continue
            if _check_presence(f):
                _apply(f, _structure((f.rel, f.path, f.st.st_size, library)))
        if f.status == MISSING:
            count = sum(1 for s in wm.values() if s == shard)
            p.add(SHARD_MISSING, shard, f"{rel} is named by the index ({count} tensors) but is not on disk")
            complete = False
        elif f.header is None:
            complete = False  # partial, truncated, invalid: its tensors are unknown
        else:
            readable.append((shard, rel, f))

    # The usual case, at C speed: the headers together map every tensor exactly as the index does.
    found = {}
    for shard, _, f in readable:
        found.update(dict.fromkeys(f.header.names, shard))
    if not (complete and found == wm and len(found) == sum(f.header.count for _, _, f in readable)):
        _relations(p, wm, readable, complete, rel_of, idx.rel)

    if complete and total is not None:
        got = sum(f.header.data_bytes for _, _, f in readable)
        if got != total:
            p.add(TOTAL_SIZE_MISMATCH, "", f"metadata.total_size is {total}, the shards' tensors add up to {got} "
                                           f"({got - total:+d})", [idx.rel])

    for rel, (detail, count) in p.per_file.items():
        f = files.get(rel)
        if f is not None and f.index_detail is None:
            f.index_detail = detail + (f" (and {count - 1} more)" if count > 1 else "")
    return p.entries()


def _relations(p: _IndexProblems, wm: dict, readable: list, complete: bool, rel_of, index_rel: str) -> None:
    """Name every disagreement between the weight_map and the readable shards' headers."""
    expected = {}  # shard -> names the index maps to it
    for name, shard in wm.items():
        expected.setdefault(shard, set()).add(name)
    where = {}  # tensor -> first readable shard that holds it
    for shard, rel, f in readable:
        for name in f.header.names:
            first = where.get(name)
            if first is None:
                where[name] = shard
                continue
            mapped = wm.get(name)
            wrong = [rel_of(s) for s in (first, shard) if s != mapped]
            p.add(TENSOR_IN_TWO_SHARDS, shard, f"tensor {_q(name)} is in both {rel_of(first)} and {rel} "
                                               f"(the index maps it to {mapped or 'no shard'})", wrong + [index_rel])

    names_of = {shard: set(f.header.names) for shard, _, f in readable}
    for shard, rel, f in readable:
        want, have = expected.get(shard, set()), names_of[shard]
        for name in sorted(have - want):
            mapped = wm.get(name)
            if mapped is None:
                p.add(TENSOR_NOT_IN_INDEX, shard, f"tensor {_q(name)} in {rel} is not in the index's weight_map",
                      [rel, index_rel])
            elif mapped not in names_of:  # the shard it is mapped to is unreadable: this one still disagrees
                p.add(TENSOR_IN_OTHER_SHARD, shard, f"tensor {_q(name)} is in {rel} but the index maps it to "
                                                    f"{rel_of(mapped)}", [rel, index_rel])
            # else: the mapped shard has it too (in two shards, above) or lacks it (below)
        for name in sorted(want - have):
            other = where.get(name)
            if other is not None:
                p.add(TENSOR_IN_OTHER_SHARD, shard, f"the index maps tensor {_q(name)} to {rel} but it is in "
                                                    f"{rel_of(other)}", [rel, rel_of(other), index_rel])
            else:
                nowhere = "no shard has it" if complete else "its header lacks it"
                p.add(TENSOR_IN_NO_SHARD, shard, f"the index maps tensor {_q(name)} to {rel} but {nowhere}",
                      [rel, index_rel])


def verify(root: str, manifest: dict | None = None, *, jobs: int | None = None, structure_only: bool = False,
           use_record: bool = True, library: bool = True, procs: int | None = None) -> dict:
    """Verify the checkpoint in ``root``; returns the report (see the module docstring).
    Phases: the paths, the structure (presence, headers, index), the content (hashes, with
    the record), the findings settled per file, the record written, the report."""
    t0 = time.monotonic()
    if not os.path.isdir(root):
        raise UsageError(f"{root} is not a directory")
    jobs = max(1, jobs or min(MAX_JOBS, os.cpu_count() or 1))
    check_content = manifest is not None and not structure_only
    procs = max(1, procs or min(MAX_JOBS, os.cpu_count() or 1))
    lib = library_check() if library else None

    files = _files_to_check(root, manifest)
    index_problems = _structure_phase(files, root, library, procs)
    record = _load_record(root) if check_content and use_record else {}
    if check_content:
        _hash_all(_to_hash(files, record), jobs)
    _settle(files, check_content)
    record_state = _record_phase(root, files, record) if check_content and use_record else "not used"

    ordered = sorted(files.values(), key=lambda f: f.rel)
    return {
        "ok": all(f.status in PASSING for f in ordered) and not index_problems,
        "files": [{"file": f.rel, "status": f.status, "detail": f.detail} for f in ordered],
        "index": index_problems,
        "hashed_bytes": sum(f.hashed for f in ordered),
        "sha256_checked": check_content,
        "library_check": lib.why if lib else "not used: disabled",
        "record": record_state,
        "seconds": round(time.monotonic() - t0, 3),
    }


def _files_to_check(root: str, manifest: dict | None) -> dict:
    """rel -> _File: the manifest's paths (each one checked: UsageError for an unsafe one, or
    too many), else every file found under ``root``."""
    if manifest is None:
        return {rel: _File(root, rel, None) for rel in _discover(root)}
    entries = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "path" in e for e in entries):
        raise UsageError("the manifest has no list of files with paths")
    if len(entries) > MAX_FILES:
        raise UsageError(f"the manifest names {len(entries)} files, more than the {MAX_FILES} a checkpoint may have")
    files = {}
    for e in entries:
        rel = _safe_rel(e["path"])
        files[rel] = _File(root, rel, e)
    return files


def _structure_phase(files: dict, root: str, library: bool, procs: int) -> list[dict]:
    """Presence and size, then headers, then each index against its shards (which may add
    the shards an index names to ``files``); returns the index problems."""
    _check_structures([f for f in list(files.values()) if _check_presence(f)], library, procs)
    index_problems = []
    for f in sorted((f for f in list(files.values()) if f.index is not None), key=lambda f: f.rel):
        index_problems += _check_index(f, files, root, library)
    return index_problems


def _to_hash(files: dict, record: dict) -> list:
    """The files whose content must be hashed: those that passed the structure, have a
    digest in the manifest, and are not recorded as verified and unchanged since (those are
    ok at once). Largest first, so the pool finishes together."""
    todo = []
    for f in files.values():
        if not f.readable:
            continue
        want = expected_digest(f.entry) if f.entry else None
        if not want:
            f.detail = "the manifest has no digest for it: content not checked"
            continue
        seen = record.get(f.rel)
        if (isinstance(seen, dict) and seen.get("digest") == want and seen.get("size") == f.st.st_size
                and seen.get("mtime_ns") == f.st.st_mtime_ns):
            f.status, f.digest, f.recorded = OK, want, True
            f.detail = "unchanged since verified"
        else:
            todo.append(f)
    todo.sort(key=lambda f: -f.st.st_size)
    return todo


def _hash_all(todo: list, jobs: int) -> None:
    """Hash ``todo`` in ``jobs`` threads (hashlib releases the GIL) and judge each file."""
    def hash_one(f):
        try:
            return f, file_digest(f.path, f.entry, f.st.st_size), None
        except OSError as e:
            return f, None, f"cannot read: {e.strerror}"

    if todo:
        with ThreadPoolExecutor(min(jobs, len(todo))) as pool:
            for f, got, err in pool.map(hash_one, todo):
                _judge_hash(f, got, err)


def _judge_hash(f: _File, got: str | None, err: str | None) -> None:
    """ok when the digest is the manifest's and the file did not change while it was read."""
    if err:
        f.fail(MISSING, err)
        return
    f.hashed = f.st.st_size
    want = expected_digest(f.entry)
    try:
        after = os.lstat(f.path)
    except OSError:
        after = None
    if (after is None or after.st_size != f.st.st_size or after.st_mtime_ns != f.st.st_mtime_ns
            or os.path.exists(f.path + ".aria2")):
        f.fail(PARTIAL, "changed while it was being hashed")
    elif got != want:
        kind = "sha256" if f.entry.get("sha256") else "git blob id"
        f.fail(SHA256_MISMATCH, f"{kind} {got}, expected {want}")
    else:
        f.status, f.digest, f.detail = OK, got, "hashed"


def _settle(files: dict, check_content: bool) -> None:
    """Index findings decide a file's status only where its content is not known to be right;
    without a content check, each passing file says what was checked instead."""
    for f in files.values():
        if f.index_detail is None:
            continue
        if f.status == UNVERIFIED:
            f.fail(INDEX_MISMATCH, f.index_detail)
        elif f.status not in (OK, MISSING, PARTIAL):
            f.detail += f"; {f.index_detail}"
    if not check_content:
        for f in files.values():
            if f.status == UNVERIFIED and not f.detail:
                what = ("header valid; " if f.header is not None else
                        "index matches the shards; " if f.index is not None else "")
                f.detail = f"{what}sha256 not checked"


def _record_phase(root: str, files: dict, record: dict) -> str:
    """The record rewritten to hold exactly the files now ok with a digest, when that
    changed it; what became of it (written, unchanged, not written: why)."""
    new_record = {f.rel: {"size": f.st.st_size, "mtime_ns": f.st.st_mtime_ns, "digest": f.digest}
                  for f in files.values() if f.status == OK and f.digest}
    if new_record == record:
        return "unchanged"
    try:
        write_record(root, new_record)
        return "written"
    except OSError as e:  # a read-only copy still verifies; it just hashes again next time
        return f"not written: {e.strerror or e}"


def load_manifest(path: str) -> dict:
    try:
        with open(path) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"no manifest at {path}")
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read the manifest {path}: {e}")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise UsageError(f"{path} is not a noderig manifest (no list of files)")
    return manifest


def main(argv=None) -> int:
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise UsageError(message)

    parser = Parser(prog="verify_files.py", description="Verify a checkpoint directory; prints one JSON line.")
    parser.add_argument("manifest", help="the manifest (JSON), or - for none (structure only)")
    parser.add_argument("dir")
    parser.add_argument("--jobs", type=int, default=None, help=f"files hashed at once (default min({MAX_JOBS}, CPUs))")
    parser.add_argument("--structure-only", action="store_true", help="headers, sizes and index only: no hashing")
    parser.add_argument("--no-record", action="store_true", help="neither read nor write the verified-state record")
    parser.add_argument("--check-paths", action="store_true",
                        help="only check that the deploy may write there (see check_paths); exit 1 if not")
    parser.add_argument("--seed-from", metavar="LIVE",
                        help="only link in the files LIVE holds verified with the manifest's digests (see seed)")
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
        if args.jobs is not None and args.jobs < 1:
            raise UsageError("--jobs must be at least 1")
        manifest = None if args.manifest == "-" else load_manifest(args.manifest)
        if args.check_paths:
            report = check_paths(args.dir, manifest)
            print(json.dumps(report))
            return 0 if report["ok"] else 1
        if args.seed_from:
            if manifest is None:
                raise UsageError("--seed-from needs a manifest")
            report = seed(args.dir, manifest, args.seed_from)
            print(json.dumps(report))
            return 0 if report["ok"] else 1
        report = verify(args.dir, manifest, jobs=args.jobs, structure_only=args.structure_only,
                        use_record=not args.no_record)
    except UsageError as e:  # the report's shape, so a reader of the last line need not special-case it
        print(json.dumps({"ok": False, "error": str(e), "files": [], "index": [], "hashed_bytes": 0,
                          "sha256_checked": False}))
        print(f"verify_files: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
