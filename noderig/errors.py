"""The one exception type the CLI turns into a user-facing sentence instead of a traceback."""


class NoderigError(Exception):
    """A failure with a message meant for the user: what failed, where, and what to do."""


_REDACTIONS = (
    # a URL's query string: signed CDN URLs carry their signature and credential there
    (r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#\"'<>]*)\?[^\s\"'<>]*", r"\1?<redacted>"),
    (r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@\"'<>]+@", r"\1<redacted>@"),  # user:password@
    (r"(?i)\b(bearer\s+)[^\s\"'<>]+", r"\1<redacted>"),
    # Hub tokens (not the names of settings a message tells the user to check: "check hf_endpoint")
    # (a token has no underscore after "hf_": "hf_config_path" is a name)
    (r"\bhf_(?!(?:endpoint|transfer|overrides|config|home|hub|xet)\b)[A-Za-z0-9]{6,}(?![A-Za-z0-9_])", "hf_<redacted>"),
    (r"(?i)\b((?:X-Amz-)?(?:Signature|Credential|Security-Token)=)[^\s&\"'<>]+", r"\1<redacted>"),
)


def redact(text: str) -> str:
    """``text`` without what must never reach output or a journal: query strings of URLs
    (signed CDN URLs), credentials in URLs, bearer and Hub tokens, signature parameters.

    + text: a message from a tool or a library (aria2's error, an HTTP error)
    """
    import re

    for pattern, replacement in _REDACTIONS:
        text = re.sub(pattern, replacement, text)
    return text


# How much of a line quoted from a log (a diagnosis's cause and evidence, already clipped to a few hundred
# characters where it was made) an output shows
QUOTED_LINE_LIMIT = 1000


def one_line(text: str, limit: int = 300) -> str:
    """``text`` from a server or a program as part of one line of output: redacted, its lines joined
    with " / ", every other control or invisible character escaped (a server's ANSI codes cannot
    reach the terminal), cut past ``limit`` characters.

    + text: a message noderig did not write (an HTTP error's, a mirror's own words)
    + limit: characters kept
    """
    from .node.hubpath import escaped

    parts = (part.expandtabs(4).strip() for part in str(text).splitlines())
    shown = escaped(redact(" / ".join(part for part in parts if part)))
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown)} characters)"
