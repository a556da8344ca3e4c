"""What a CI system or a log tool writes before every line of a paste, read over the whole paste.

These prefixes cannot be told from a message by one line alone (a stream name, a pod name), or they say
how lines were cut (GitLab's continuation flag), so they are read before the per-line peeling in
normalize.py, over the paste's lines:

- GitLab CI's job log with timestamps (runner 17+, FF_TIMESTAMPS; on by default from runner 18.7):
  "<RFC 3339 UTC time, 6 decimals> <stream: 2 hex digits><E|O><' ' or '+'>" before each line, a '+'
  marking a line the runner flushed in parts: it goes on the line before it. Format: GitLab's own
  parser, gitlabhq lib/gitlab/ci/trace/stream.rb (TIMESTAMP_HEADER_REGEX) and
  lib/gitlab/ci/ansi2json/converter.rb; docs.gitlab.com/ee/ci/yaml/ci_job_log_timestamps.html.
- `aws logs tail` (CloudWatch Logs; SageMaker endpoints log there too), whose default "detailed" format
  is "<ISO time with offset> <log stream name> <message>" (docs.aws.amazon.com/cli/latest/reference/
  logs/tail.html): the time and the stream name ("ecs/sglang/4f3c...", "AllTraffic/i-0123...") go
  together (left alone, a time with a numeric offset before "word word: message" reads as a journal
  line). Only a name most lines share, so a shipper's time before a message is left.
- stern (github.com/stern/stern), whose default template is "<pod> <container> <message>" (each name
  coloured): the two names go when most lines start with them.
- rsyslog's escapes of the control characters in a message (EscapeControlCharactersOnReceive, on by
  default; rsyslog.com/doc, "$EscapeControlCharactersOnReceive"): "#" and the character's octal code. A
  service's output forwarded to syslog, or a container's through docker's syslog driver (SageMaker's and
  Ray's logs as users paste them), keeps its colour codes as "#033[1;36m", a carriage return as "#015", a
  tab as "#011", and a message of several lines as one line with "#012" where they broke. Read as escapes
  only in a paste that shows one in a shape no other text has (a colour code, a carriage return ending a
  line, a break before a traceback's line): "#011" alone may be an issue's number.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

__all__ = ["PASTE_SHARE", "gitlab_lines", "shows_syslog_escapes", "syslog_controls", "syslog_lines", "without_stream_names"]

PASTE_SHARE = 0.8  # of the paste's non-blank lines, at least, for a prefix read over the whole paste
_MAX_NAMES = 4  # distinct stream names / pod-container pairs one paste interleaves, at most

_GITLAB = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z [0-9a-f]{2}[EO](?P<flag>[ +])")
# "<time with a numeric offset> <stream name>", as `aws logs tail` prints it (Python's isoformat)
_CLOUDWATCH = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:\d\d) (?P<name>[A-Za-z0-9]\S*)(?: |$)")
# what a stream name is not: a level word, a date, a CRI stream ("stdout F "), glog's level and date ("W0430"),
# anything with a colon (CloudWatch allows none in a stream name: NCCL's "host:pid:tid", a word ending a
# message); and a journal's host is none (most lines go on with "ident[pid]: " or "kernel: ": `journalctl -o
# short-iso`)
_NOT_A_STREAM = re.compile(r"^(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE|stdout|stderr|[IWEF]\d{4})$"
                           r"|^\d{4}-\d\d-\d\d|:")
_JOURNAL_REST = re.compile(r"^(?:[^\s\[:/]+\[\d+\]|kernel): ")  # the kernel's lines name no pid
# rsyslog's escapes in a shape no other text has, and the ones read as the characters they stand for (ESC, CR, TAB;
# a line break splits the line, after the lines are numbered)
_SYSLOG_SIGN = re.compile(r'#033\[[0-9;]*m|#015$|#012(?:Traceback \(|\s+File ")', re.M)
_SYSLOG_CONTROL = re.compile(r"#0(33|15|11)")
_SYSLOG_BREAK = "#012"
# stern: "<pod> <container> ", Kubernetes names (DNS labels; a pod's has a hyphen: "sglang-7d9f8b6c5-x2k4p")
_STERN = re.compile(r"^(?P<pod>[a-z0-9][a-z0-9.]*-[a-z0-9.-]*[a-z0-9]) (?P<container>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?) ")


def gitlab_lines(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines without GitLab's timestamp header, a line the runner flushed in parts ('+') joined onto
    the line before it. Only in a log whose first non-blank line has the header, as GitLab reads it."""
    first = next((x for _, x in numbered if x.strip()), "")
    if not _GITLAB.match(first):
        return numbered
    out: list[tuple[int, str]] = []
    for no, line in numbered:
        m = _GITLAB.match(line)
        if m is None:
            out.append((no, line))
        elif m["flag"] == "+" and out:
            out[-1] = (out[-1][0], out[-1][1] + line[m.end():])
        else:
            out.append((no, line[m.end():]))
    return out


def without_stream_names(lines: list[str], clean: Callable[[str], str]) -> list[str]:
    """The lines without a log stream's name (`aws logs tail`) or a pod's and container's (stern) when most
    of the paste's lines carry one of a few. ``clean`` removes colour codes (stern colours the names)."""
    filled = [x for x in lines if x.strip()]
    streams = [(m, x[m.end():]) for x in filled if (m := _stream(x))]
    names = Counter(m["name"] for m, _ in streams)
    journal = sum(1 for _, rest in streams if _JOURNAL_REST.match(rest))  # "<time> host ident[pid]: "
    # a paste of one or two lines: only an AWS stream name that has a path's slash ("ecs/sglang/4f3c...")
    short = len(filled) < 3 and len(streams) == len(filled) and len(names) == 1 and "/" in next(iter(names))
    if names and (short or len(filled) >= 3 and sum(names.values()) >= PASTE_SHARE * len(filled)
                  and len(names) <= _MAX_NAMES and journal * 2 < len(streams)):
        return [x[m.end():] if (m := _stream(x)) and m["name"] in names else x for x in lines]
    if len(filled) < 3:
        return lines
    cleaned = [clean(x) if "\x1b" in x[:64] else x for x in lines]
    pairs = Counter((m["pod"], m["container"]) for x in cleaned if x.strip() and (m := _STERN.match(x)))
    if pairs and sum(pairs.values()) >= PASTE_SHARE * len(filled) and len(pairs) <= _MAX_NAMES:
        return [c[m.end():] if (m := _STERN.match(c)) and (m["pod"], m["container"]) in pairs else x
                for x, c in zip(lines, cleaned)]
    return lines


def _stream(line: str) -> re.Match | None:
    """A CloudWatch line's time and stream name, or None (no such prefix, or the word is no stream name)."""
    m = _CLOUDWATCH.match(line)
    if m is None or _NOT_A_STREAM.search(m["name"]) or not re.search(r"[/\d]", m["name"]):
        return None
    return m


def shows_syslog_escapes(text: str) -> bool:
    """Whether the paste holds rsyslog's escapes of control characters (_SYSLOG_SIGN)."""
    return "#0" in text and _SYSLOG_SIGN.search(text) is not None


def syslog_controls(text: str) -> str:
    """The text with rsyslog's escapes of ESC, CR and TAB as those characters."""
    return _SYSLOG_CONTROL.sub(lambda m: chr(int(m[1], 8)), text)


def syslog_lines(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Each line that holds rsyslog's escaped line breaks as the lines it held, numbered by the raw line."""
    return [(no, part) for no, x in numbered for part in (x.split(_SYSLOG_BREAK) if _SYSLOG_BREAK in x else (x,))]
