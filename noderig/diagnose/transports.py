"""What a CI system or a log tool writes before every line of a paste, read over the whole paste.

These prefixes cannot be told from a message by one line alone (a stream name, a pod name), or they say
how lines were cut (GitLab's continuation flag), so they are read before the per-line peeling in
normalize.py, over the paste's lines:

- GitLab CI's job log with timestamps (runner 17+, FF_TIMESTAMPS; on by default from runner 18.7):
  "<RFC 3339 UTC time, 6 decimals> <stream: 2 hex digits><E|O><' ' or '+'>" before each line, a '+'
  marking a line the runner flushed in parts: it goes on the line before it. Format: GitLab's own
  parser, gitlabhq lib/gitlab/ci/trace/stream.rb (TIMESTAMP_HEADER_REGEX) and
  lib/gitlab/ci/ansi2json/converter.rb; docs.gitlab.com/ee/ci/yaml/ci_job_log_timestamps.html.
"""

from __future__ import annotations

import re

__all__ = ["gitlab_lines"]

_GITLAB = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z [0-9a-f]{2}[EO](?P<flag>[ +])")


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

