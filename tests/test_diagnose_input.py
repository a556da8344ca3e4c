"""`noderig diagnose` on a log as users attach it (noderig/diagnose/logfile.py): compressed, zipped, in UTF-16,
not UTF-8; and what it refuses (a binary journal, an archive of several files, binary data, nothing): exit 2 with
what to do, no diagnosis printed. The log is the reference case's stand-in crash (flash_attn_cute_missing)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile

import pytest

from noderig.diagnose import logfile
from noderig.diagnose.logfile import MAX_LOG_BYTES, LogInputError, log_text
from tests.conftest import diagnose_cli
from tests.test_diagnose import VISION, fixture_text, run_cli

CRASH = fixture_text(VISION)


def zipped(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("form", ["gzip", "bzip2", "xz", "zip of one file", "zip of a gzip", "UTF-16 with its BOM",
                                  "UTF-8 with its BOM"])
def test_a_log_saved_in_another_form_is_diagnosed_as_the_plain_one(form, tmp_path):
    raw = CRASH.encode()
    data = {"gzip": lambda: gzip.compress(raw), "bzip2": lambda: bz2.compress(raw), "xz": lambda: lzma.compress(raw),
            "zip of one file": lambda: zipped({"logs/server.log": raw}),
            "zip of a gzip": lambda: zipped({"server.log.gz": gzip.compress(raw)}),
            "UTF-16 with its BOM": lambda: CRASH.encode("utf-16"),  # PowerShell's "> server.log"
            "UTF-8 with its BOM": lambda: b"\xef\xbb\xbf" + raw}[form]()
    path = tmp_path / "server.log.attachment"
    path.write_bytes(data)
    r = run_cli(str(path), "--json")
    assert r.returncode == 1 and '"class": "flash_attn_cute_missing"' in r.stdout, r.stderr


def test_a_compressed_log_on_standard_input_is_read_too():
    done = diagnose_cli(gzip.compress(CRASH.encode()), "--json")
    assert done.returncode == 1 and b'"class": "flash_attn_cute_missing"' in done.stdout, done.stderr


def test_bytes_that_are_not_utf8_do_not_stop_the_diagnosis():
    assert "caf\ufffd" in log_text(b"ValueError: caf\xe9\n", "x.log")


@pytest.mark.parametrize("data, words", [
    (b"LPKSHHRH\x00\x00\x00\x00" + b"\x00" * 200, "journalctl --file"),
    (b"", "is empty"),
    (b"\n  \n\t\n", "is empty"),
    (b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 100, "binary data"),
    (b"\x28\xb5\x2f\xfd" + b"\x00" * 20, "zstd -dc"),
    (gzip.compress(CRASH.encode())[:40], "cannot be decompressed"),
], ids=["systemd journal file", "empty", "blank", "an executable", "zstd", "a cut gzip"])
def test_what_is_no_log_is_refused_with_what_to_do(tmp_path, data, words):
    path = tmp_path / "attached"
    path.write_bytes(data)
    r = run_cli(str(path))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("noderig diagnose: ") and words in r.stderr and str(path) in r.stderr


def test_a_zip_of_several_files_names_them_and_diagnoses_none(tmp_path):
    path = tmp_path / "logs.zip"
    path.write_bytes(zipped({"rank0.log": CRASH.encode(), "rank1.log": CRASH.encode()}))
    r = run_cli(str(path))
    assert r.returncode == 2 and r.stdout == ""
    assert "2 files (rank0.log, rank1.log)" in r.stderr and "unzip -p" in r.stderr


def test_a_log_that_expands_past_the_bound_is_refused_before_it_is_read_whole(monkeypatch):
    assert MAX_LOG_BYTES == 512 * 2**20
    monkeypatch.setattr(logfile, "MAX_LOG_BYTES", 2**20)  # the bound's logic, without a 512 MiB file in a test
    bomb = gzip.compress(b"\n" * (2**20 + 1))
    with pytest.raises(LogInputError, match="bomb.gz expands to more than 1 MiB"):
        log_text(bomb, "bomb.gz")
    assert log_text(gzip.compress(b"x\n" * 1000), "small.gz") == "x\n" * 1000


def flagged_zip(member: str, flag_offset: int, value: int) -> bytes:
    """A zip of one file whose central directory entry has one byte set: its flags (8: bit 0, encrypted) or its
    compression method (10: 9, deflate64, which zipfile cannot read)."""
    data = bytearray(zipped({member: CRASH.encode()}))
    entry = data.index(b"PK\x01\x02")
    data[entry + flag_offset] |= value
    return bytes(data)


@pytest.mark.parametrize("data, words", [
    (flagged_zip("server.log", 8, 1), "is encrypted"),
    (flagged_zip("server.log", 10, 9), "compression method is not supported"),
], ids=["encrypted", "deflate64"])
def test_a_zip_this_reader_cannot_open_is_refused_not_a_traceback(tmp_path, data, words):
    path = tmp_path / "logs.zip"
    path.write_bytes(data)
    r = run_cli(str(path))
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert words in r.stderr and "extract the log" in r.stderr


def test_member_names_of_an_archive_are_shown_escaped(tmp_path):
    path = tmp_path / "logs.zip"
    path.write_bytes(zipped({"a\x1b[2J.log": b"x", "b.log": b"y"}))
    r = run_cli(str(path))
    assert r.returncode == 2 and "\x1b" not in r.stderr and "a\\x1b[2J.log, b.log" in r.stderr


def _diagnosed_with_a_bug(tmp_path, monkeypatch, capsys, message: str) -> tuple[int, str, object]:
    """`noderig diagnose FILE` while diagnose() raises ValueError(message): its exit status and standard error."""
    from noderig import cli

    def broken(_text):
        raise ValueError(message)

    monkeypatch.setattr("noderig.diagnose.diagnose", broken)
    path = tmp_path / "server.log"
    path.write_text("RuntimeError: x\n")
    return cli.main(["diagnose", str(path)]), capsys.readouterr().err, path


def test_a_diagnosis_that_raises_is_exit_2_and_a_bug_report_not_a_verdict(tmp_path, monkeypatch, capsys):
    # exit 1 says "the log shows a failure" and 0 "healthy": a bug in noderig's own reading of a log must say
    # neither, and must say what broke, on which file, and what to do
    rc, err, path = _diagnosed_with_a_bug(tmp_path, monkeypatch, capsys, "max() arg is an empty sequence")
    assert rc == 2 and f"could not diagnose {path}" in err and "ValueError: max() arg is an empty sequence" in err
    assert "a bug in noderig" in err and "report the bug" in err


def test_a_bugs_message_reaches_the_terminal_escaped(tmp_path, monkeypatch, capsys):
    # an exception's message can quote the log's own text: an escape sequence in it must not reach the terminal
    rc, err, _ = _diagnosed_with_a_bug(tmp_path, monkeypatch, capsys, "bad line: \x1b]0;owned\x07\x1b[31mred")
    assert rc == 2 and "\x1b" not in err and "\x07" not in err
    assert "bad line: \\x1b]0;owned\\x07\\x1b[31mred" in err
