"""A log as a user hands it to `noderig diagnose`, read as text whatever it was saved as.

Users attach what their tools wrote: a log compressed by logrotate or for an issue tracker (gzip, bzip2, xz), a
zip archive with the log inside, a file PowerShell redirected (UTF-16 with a byte-order mark), bytes that are not
UTF-8. Read as raw text, a compressed log is noise in which nothing failed, and the diagnosis would call it
healthy; so each is decoded here, and what cannot be read as a log (a binary journal file, an archive of several
files, other binary data, nothing at all) is refused with what to do instead, never diagnosed.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile

__all__ = ["LogInputError", "escaped", "log_text"]

# compressed forms by their magic bytes, with how to open them as a stream
_DECOMPRESS = ((b"\x1f\x8b", lambda f: gzip.GzipFile(fileobj=f), "gzip"), (b"BZh", bz2.BZ2File, "bzip2"),
               (b"\xfd7zXZ\x00", lzma.LZMAFile, "xz"))
# the most a compressed log may expand to: more is a crafted file or a log to cut first (the diagnosis reads
# about 10 MB a second)
MAX_LOG_BYTES = 512 * 2**20
_ZSTD = b"\x28\xb5\x2f\xfd"
_ZIP = b"PK\x03\x04"
_JOURNAL = b"LPKSHHRH"  # a systemd journal file (system.journal): binary, read by journalctl
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_NESTING = 3  # a zip holding a gzip holding ...: deep enough for real attachments, bounded for a crafted one
_SNIFF = 65536  # the bytes read for a NUL, the sign of binary data


class LogInputError(Exception):
    """What was handed in cannot be read as a log: the message says what it is and what to do."""


def log_text(data: bytes, name: str) -> str:
    """The log ``data`` holds, as text (``name`` says where it came from, for the messages)."""
    for _ in range(_NESTING):
        opened = _opened(data, name)
        if opened is data:
            break
        data = opened
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _nonempty(data[len(bom):].decode(encoding, "replace"), name)
    if b"\x00" in data[:_SNIFF]:
        raise LogInputError(f"{name} holds binary data, not a log: save the server's output as text "
                            "(journalctl -u <unit> -o short-iso-precise > server.log, docker logs <name> > server.log)")
    return _nonempty(data.decode("utf-8", "replace"), name)


def _opened(data: bytes, name: str) -> bytes:
    """``data`` decompressed or taken out of its archive; ``data`` itself when it is neither."""
    for magic, opener, kind in _DECOMPRESS:
        if data.startswith(magic):
            try:
                with opener(io.BytesIO(data)) as stream:
                    return _bounded(stream, name)
            except (OSError, EOFError, ValueError, lzma.LZMAError) as e:
                raise LogInputError(f"{name} looks {kind}-compressed but cannot be decompressed ({e}): "
                                    "is the file complete?") from e
    if data.startswith(_ZIP):
        return _zip_member(data, name)
    if data.startswith(_ZSTD):
        raise LogInputError(f"{name} is zstd-compressed: decompress it first (zstd -dc {name} | noderig diagnose -)")
    if data.startswith(_JOURNAL):
        raise LogInputError(f"{name} is a binary systemd journal file: export it as text first "
                            f"(journalctl --file {name} -o short-iso-precise > server.log)")
    return data


def escaped(text: str) -> str:
    """Text that is not ours (a log's, an archive's) fit for a terminal: what is not printable written as its escape
    ("\\x1b[2J"), so no escape sequence in it reaches the terminal."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _zip_member(data: bytes, name: str) -> bytes:
    """The one file a zip archive holds; an archive of several cannot say which is the log."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            files = [info for info in archive.infolist() if not info.is_dir()]
            if len(files) != 1:
                # the names are the archive's, not ours: shown escaped, so none can write to the terminal
                names = ", ".join(escaped(info.filename) for info in files[:10])
                names = names or "no file"
                raise LogInputError(f"{name} is a zip archive of {len(files)} files ({names}): pick the log "
                                    f"(unzip -p {name} <file> | noderig diagnose -)")
            with archive.open(files[0]) as stream:
                return _bounded(stream, name)
    except (zipfile.BadZipFile, OSError) as e:
        raise LogInputError(f"{name} looks like a zip archive but cannot be opened ({e}): is the file complete?") from e
    except (RuntimeError, NotImplementedError) as e:  # zipfile's words for a password and an unknown compression
        raise LogInputError(f"{name} is a zip archive this reader cannot open ({e}): extract the log with your "
                            f"archive tool and hand in the file") from e


def _bounded(stream, name: str) -> bytes:
    data = stream.read(MAX_LOG_BYTES + 1)
    if len(data) > MAX_LOG_BYTES:
        raise LogInputError(f"{name} expands to more than {MAX_LOG_BYTES // 2**20} MiB: hand in the part around the "
                            f"failure (zcat {name} | tail -n 200000 | noderig diagnose -)")
    return data


def _nonempty(text: str, name: str) -> str:
    if not text.strip():
        raise LogInputError(f"{name} is empty: there is nothing to diagnose (was the server's output saved?)")
    return text
