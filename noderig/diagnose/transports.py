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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

__all__ = ["PASTE_SHARE", "gitlab_lines", "without_stream_names"]

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
