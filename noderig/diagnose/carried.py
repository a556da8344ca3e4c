"""Log lines carried as data, back to the lines they hold.

A log does not always reach us as text. Docker's json-file driver stores each line as a JSON record
(``{"log": "...\\n", "stream": "stderr", "time": ...}``), `journalctl -o json` writes one record per line
with the line under ``MESSAGE`` (a list of byte values when the line holds a control character, a colour
code), Google Cloud Logging exports it as ``textPayload`` or ``jsonPayload.message``, a shipper (Vector,
Fluent Bit) as ``message``; vLLM's own JSON formatter (``--logging-config.formatter json``) and
python-json-logger write a record's level, logger, message and traceback as fields. And a launcher that
reports its child's failure quotes the child's output as a string literal: a Python bytes repr
(``stderr=b'Traceback (most recent call last):\\n  File ...'``) or a JSON string, its line breaks escaped.

`expand_carried` gives every such line back as the lines it carries, each numbered by the raw line it
came from. A line a transport cut into pieces is joined back first (docker's json-file driver writes a line
longer than 16 KiB as several records, only the last ending in the newline; a CRI log flags the pieces ``P``):
read piece by piece, a traceback quoted in it would be cut in two, the half without its header unread. A transport's record holds the line as the program wrote it (its logger prefix included); its
level fields are the transport's (journald and Cloud Logging give a service's whole stdout one priority)
and are not read. A program's own record is written back in Python logging's default form,
``LEVEL:logger:message``, which the normaliser reads with its level; a record at a quiet level stays one
line, its traceback included, since a warning's traceback is no crash. An escaped string is split only
where it holds a Python traceback, and not inside a record its logger marked quiet (a request log quoting
a prompt that holds a traceback).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

__all__ = ["JOURNAL_LEFT_OUT", "expand_carried"]

# the field a transport puts the line in, as written (docker and Fluent Bit, journald, Cloud Logging)
_TRANSPORT_FIELDS = ("log", "MESSAGE", "textPayload")
# what `journalctl -o json` writes for a field over 4096 bytes without --all: null. The line is lost; saying so,
# in words that name no failure, tells the reader what to export instead
JOURNAL_LEFT_OUT = "(journalctl -o json left out this line: over 4096 bytes; export with --all to keep it)"
# a program's own record (and a shipper's, which has no level): the message, then where it was, then the trace
_MESSAGE_FIELDS = ("message", "msg", "@message")
# Cloud Logging nests a program's JSON record under "jsonPayload"; Rust's tracing-subscriber (TGI's --json-output,
# the Rust routers and launchers) its message and fields under "fields", its module path as "target"
_PAYLOAD_FIELDS = ("jsonPayload", "fields")
_LEVEL_FIELDS = ("levelname", "level", "severity", "log.level")
_LOGGER_FIELDS = ("name", "logger", "logger_name", "log.logger", "target")
_TRACE_FIELDS = ("exc_info", "exc_text", "exception", "stack_trace", "traceback", "stack_info", "error.stack_trace")
_LOGGER_NAME = re.compile(r"[A-Za-z_][\w.]*")  # a name Python logging's default form can show
# what programs call their levels, by Python logging's names
_LEVEL_NAMES = {"trace": "DEBUG", "debug": "DEBUG", "info": "INFO", "notice": "INFO", "warn": "WARNING",
                "warning": "WARNING", "error": "ERROR", "err": "ERROR", "critical": "CRITICAL", "fatal": "CRITICAL",
                "alert": "CRITICAL", "emergency": "CRITICAL"}
_QUIET = frozenset({"DEBUG", "INFO", "WARNING"})
# an escaped line break right after a traceback's header: a string literal that holds a traceback
# (its backslashes doubled for each time it was escaped again: a JSON body or an exception's repr quoting a bytes repr)
_ESCAPED_TRACEBACK = re.compile(r"Traceback \(most recent call last\):? *(\\+)(?:r\\+)?n")
_ESCAPE = re.compile(r"\\(u001[bB]|x1[bB]|r\\n|[nrt\"'\\])")
_UNESCAPED = {"n": "\n", "r\\n": "\n", "r": "", "t": "\t", '"': '"', "'": "'", "\\": "\\"}
# what a line says before the string literal it quotes (before its first quote mark): a record its logger
# marked quiet ("INFO 01-22 ...", "INFO:x:", "W0430 ..."), or a request log quoting a prompt (vLLM's "Received
# request ...: prompt: '...'", SGLang's "Receive: obj=GenerateReqInput(text='...')"), whose traceback is no crash
_QUIET_HEAD = re.compile(r"(?:^|[\s\]|:-])(?:DEBUG|INFO|WARNING|WARN)(?:[\s:\]|-]|$)|^[DIW]\d{4} \d\d:")
_REQUEST_LOG = re.compile(r"Receive: obj=|Received request|\bprompt: ")
_QUOTE_MARK = re.compile("[\"']")
# what closes a quoting line after its literal: quote marks, brackets, commas (nothing to read)
_CLOSING = re.compile(r"[\"'\s)}\],]*")
# where a string literal opens: a quote mark after "=", ":", "(", "[", "," or "{" (a bytes literal's b too)
_LITERAL_OPEN = re.compile(r"(?:^|[=:(\[,{]\s*)b?[\"']")
# a Kubernetes node's container log (CRI): a time, the stream, then F for a whole line or P for a piece of one
_CRI_HEAD = re.compile(r"^\S+ (?:stdout|stderr) ([FP]) ")


def expand_carried(raw_lines: list[str], peel: Callable[[str], str | None] | None = None) -> list[tuple[int, str]]:
    """Every raw line as the lines it carries, numbered 1-based by the raw line: a JSON log record's
    line(s), an escaped string's traceback split at its line breaks; any other line as it is. A line a
    transport cut into pieces (_carried) is joined back first, numbered by the raw line it starts on.
    ``peel`` gives a line without a transport's prefix (None when it has none): a record behind one (kubectl's
    time, a CRI log's, a container's name, a journal's) is read as a record, each line it carries behind it."""
    out: list[tuple[int, str]] = []
    start, parts = 0, []  # a line cut into pieces: the raw line it starts on, its pieces so far (joined once whole)
    for no, raw in enumerate(raw_lines, 1):
        lines, piece, cut = _carried(raw, peel)
        numbered = [(no, x) for x in lines]
        if parts:
            if piece is not None:
                parts.append(piece)
                if cut and len(lines) == 1:  # a piece in the middle
                    continue
                numbered[:1] = [(start, x) for x in _reread("".join(parts), peel)]
            else:
                numbered[:0] = [(start, x) for x in _reread("".join(parts), peel)]
            parts = []
        if cut:
            start, last = numbered.pop()
            parts = [last]
        for n, line in numbered:
            out.extend((n, x) for x in _unescaped(line))
    out.extend((start, y) for x in (_reread("".join(parts), peel) if parts else []) for y in _unescaped(x))
    return out


def _carried(raw: str, peel: Callable[[str], str | None] | None) -> tuple[list[str], str | None, bool]:
    """A raw line's carried lines; what it adds to a line cut before it when it can be the next piece of one (a
    transport's record or line, else None); and whether its last line is cut, going on in the next raw line.
    Docker's json-file driver cuts a line longer than 16 KiB into records, the newline on the last piece only; a
    Kubernetes node's CRI log flags a piece ``P`` (``<time> stderr P ...``), as Fluent Bit's record of it does
    (``logtag``)."""
    stripped = raw.strip()
    record = _json_object(stripped) if stripped.startswith("{") and stripped.endswith("}") else None
    lines = _record_lines(record) if record is not None else None
    if lines is not None:
        log = record.get("log")
        if not isinstance(log, str):
            return lines, None, False
        cut = record["logtag"] == "P" if "logtag" in record else (
            "stream" in record and "time" in record and not log.endswith("\n"))
        return lines, lines[0], cut
    m = _CRI_HEAD.match(raw)
    if peel is not None and stripped.endswith("}") and not stripped.startswith("{") and (not m or m[1] == "F"):
        behind = _behind_prefix(raw.rstrip(), peel)
        if behind is not None:
            return behind, None, False
    return [raw], raw[m.end():] if m else None, bool(m) and m[1] == "P"


def _behind_prefix(line: str, peel: Callable[[str], str | None]) -> list[str] | None:
    """The lines a JSON log record behind a transport's prefix carries, each behind that prefix; None when the
    line holds no such record."""
    body = (peel(line) or "").strip()
    record = _json_object(body) if body.startswith("{") and line.endswith(body) else None
    lines = _record_lines(record) if record is not None else None
    head = line[:len(line) - len(body)]
    return None if lines is None else [head + x for x in lines]


def _reread(line: str, peel: Callable[[str], str | None] | None) -> list[str]:
    """A line as a transport carried it (or as joined from its pieces): the lines a program's own JSON record in it
    carries (vLLM's JSON formatter under docker or the journal), behind the transport's prefix if it has one; the
    line itself otherwise."""
    stripped = line.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        record = _json_object(stripped)
        own = record is not None and not any(f in record for f in _TRANSPORT_FIELDS)
        return (_record_lines(record) if own else None) or [line]
    if peel is not None and stripped.endswith("}"):
        return _behind_prefix(line.rstrip(), peel) or [line]
    return [line]


def _json_object(text: str) -> dict | None:
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _record_lines(record: dict) -> list[str] | None:
    """The lines a JSON log record carries; None when the record is no log record."""
    for field in _TRANSPORT_FIELDS:
        if field in record:
            if field == "MESSAGE" and record[field] is None:
                return [JOURNAL_LEFT_OUT]
            line = _text(record[field])  # as the program wrote it: its own JSON record, maybe
            return None if line is None else [y for x in _split(line) for y in _reread(x, None)]
    for payload in _PAYLOAD_FIELDS:
        if isinstance(record.get(payload), dict):
            record = {**record, **record[payload]}
    message = next((_text(record[f]) for f in _MESSAGE_FIELDS if f in record), None)
    if message is None:
        return None
    lines = _split(message)
    for field in _TRACE_FIELDS:
        trace = _text(record.get(field))
        if trace and trace not in ("True", "False"):
            lines += _split(trace)
    return _as_python_record(lines, _field(record, _LEVEL_FIELDS), _field(record, _LOGGER_FIELDS))


def _as_python_record(lines: list[str], level: str | None, logger: str | None) -> list[str]:
    """A program's record in Python logging's default form: ``LEVEL:logger:message``; one line when the level
    is quiet (its traceback too), since the normaliser reads the level on that line only."""
    name = _LEVEL_NAMES.get((level or "").lower())
    if name is None:
        return lines
    head = f"{name}:{logger if logger and _LOGGER_NAME.fullmatch(logger) else 'root'}:"
    if name in _QUIET:
        return [head + " ".join(x.strip() for x in lines if x.strip())]
    first = lines[0].lstrip() if lines else ""
    return [head + first, *lines[1:]] if first else lines[1:]


def _field(record: dict, names: tuple[str, ...]) -> str | None:
    value = next((record[n] for n in names if n in record), None)
    return value if isinstance(value, str) else None


def _text(value) -> str | None:
    """A record's field as text: a string, or journald's list of byte values (a line with a control character)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def _split(text: str) -> list[str]:
    """A carried value's lines: docker ends each with its newline, a program's message may hold several."""
    return text.removesuffix("\n").split("\n") if text else [""]


def _unescaped(line: str) -> list[str]:
    """A line that quotes a traceback in a string literal (escaped line breaks), as the lines it quotes, what the
    literal held before the traceback included; the line itself otherwise, and when the line is a record its
    logger marked quiet or a request log (_QUIET_HEAD, _REQUEST_LOG)."""
    m = _ESCAPED_TRACEBACK.search(line) if "\\" in line else None
    if m is None:
        return [line]
    own = _QUOTE_MARK.split(line[:m.start()], maxsplit=1)[0]
    if _QUIET_HEAD.search(own) or _REQUEST_LOG.search(own):
        return [line]
    # the literal that holds the traceback: the first one that opens before it and closes after it; the quoting
    # line's own text before and after it (``stderr=b'``, ``{"detail": "``, ``"}``) are lines of their own
    at, end = next(((o.end(), e) for o in _LITERAL_OPEN.finditer(line, 0, m.start())
                    if (e := _literal_end(line, o.end())) >= m.end()), (0, len(line)))
    quoted = _ESCAPE.sub(lambda e: "\x1b" if e[1][0] in "ux" else _UNESCAPED[e[1]], line[at:end])
    # escaped more than once: what the literal held is itself a line quoting the traceback, escaped once less
    quoted = quoted.split("\n") if len(m[1]) == 1 else [y for x in _unescaped(quoted) for y in x.split("\n")]
    tail = line[end:] if not _CLOSING.fullmatch(line[end:]) else ""  # '"}' closes, and would go on a cut frame
    return [*([line[:at]] if at else []), *quoted, *([tail] if tail else [])]


def _literal_end(line: str, at: int) -> int:
    """Where the string literal that opened just before ``at`` closes (its quote mark, unescaped); the line's end
    when it does not."""
    quote, k = line[at - 1], at
    while k < len(line):
        if line[k] == "\\":
            k += 2
        elif line[k] == quote:
            return k
        else:
            k += 1
    return len(line)
