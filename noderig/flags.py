"""SGLang's command line, as data: flag spellings per SGLang version, and the flags the
installed server really has (parsed from its ``--help``).

Two layers keep a renamed flag from costing a 100-second startup:

1. **Version profiles** (``VERSION_PROFILES``): the spellings noderig emits, per SGLang
   release where they changed. A version selects the newest profile not newer than it, so
   ``0.5.9.post2+ddtree`` renders with the ``0.5.9`` spellings.
2. **The installed server's ``--help``** (``parse_help`` -> ``ServerFlags``, then
   ``check_argv``): every flag of the rendered command line must be an exact option string
   of the server in the node's venv, and every value must be among its ``{choices}``.
   argparse would accept a unique prefix (``--tp`` for ``--tp-size``) and reject an
   ambiguous one at startup (0.5.23: ``--cuda-graph-max-bs``); noderig accepts neither.

Pure: text in, data out. No pyinfra, no processes.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass, field

from .errors import NoderigError

# ---------------------------------------------------------------------------------------
# Version profiles
#
# Each entry is an argv template for one logical option; "{}" is replaced by the value.
# BASE_SPELLINGS holds what every supported release spells the same way (checked against
# the 0.5.9 and 0.5.23 wheels, reference/domain-facts.md section 2); a profile lists only
# what differs from it. An option mapped to None does not exist in that release.
# ---------------------------------------------------------------------------------------

BASE_SPELLINGS: dict[str, tuple[str, ...] | None] = {
    "model_path": ("--model-path", "{}"),
    "served_model_name": ("--served-model-name", "{}"),
    "host": ("--host", "{}"),
    "port": ("--port", "{}"),
    "tp_size": ("--tp-size", "{}"),
    "ep_size": ("--ep-size", "{}"),
    "pp_size": ("--pp-size", "{}"),
    "trust_remote_code": ("--trust-remote-code",),
    "context_length": ("--context-length", "{}"),
    "reasoning_parser": ("--reasoning-parser", "{}"),
    "tool_call_parser": ("--tool-call-parser", "{}"),
    "mem_fraction_static": ("--mem-fraction-static", "{}"),
    "attention_backend": ("--attention-backend", "{}"),
    "mm_attention_backend": ("--mm-attention-backend", "{}"),
    "page_size": ("--page-size", "{}"),
    "enable_dp_attention": ("--enable-dp-attention",),
    "disable_overlap_schedule": ("--disable-overlap-schedule",),
    "skip_server_warmup": ("--skip-server-warmup",),
    "nnodes": ("--nnodes", "{}"),
    "node_rank": ("--node-rank", "{}"),
    "dist_init_addr": ("--dist-init-addr", "{}"),
    "speculative_algorithm": ("--speculative-algorithm", "{}"),
    "speculative_draft_model_path": ("--speculative-draft-model-path", "{}"),
    "speculative_num_steps": ("--speculative-num-steps", "{}"),
    "speculative_eagle_topk": ("--speculative-eagle-topk", "{}"),
    "speculative_num_draft_tokens": ("--speculative-num-draft-tokens", "{}"),
    "speculative_draft_attention_backend": ("--speculative-draft-attention-backend", "{}"),
    "speculative_use_rejection_sampling": ("--speculative-use-rejection-sampling",),
    # DDTree lives in forks only (domain-facts 1.3): the PR spelling and the DFLASH-flag spelling.
    "speculative_ddtree_budget": ("--speculative-ddtree-budget", "{}"),
    "speculative_dflash_enable_ddtree": ("--speculative-dflash-enable-ddtree",),
    "cuda_graph_max_bs": ("--cuda-graph-max-bs", "{}"),
    "disable_cuda_graph": ("--disable-cuda-graph",),
}

VERSION_PROFILES: dict[str, dict[str, tuple[str, ...] | None]] = {
    # Classic argparse server_args.py: BASE_SPELLINGS as they are.
    "0.5.9": {},
    # Annotation-based arg groups. --cuda-graph-max-bs is gone (an abbreviation of two new
    # flags, so argparse calls it ambiguous); --disable-cuda-graph is deprecated in favour
    # of the per-phase backends.
    "0.5.23": {
        "cuda_graph_max_bs": ("--cuda-graph-max-bs-decode", "{}"),
        "disable_cuda_graph": ("--cuda-graph-backend-decode", "disabled",
                               "--cuda-graph-backend-prefill", "disabled"),
    },
}

DEFAULT_PROFILE = "0.5.9"  # the reference venv's release, and the lab stand-in's

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int]:
    """``"0.5.9.post2+ddtree"`` -> ``(0, 5, 9)``; raises NoderigError when there is no version."""
    m = _VERSION.match(text or "")
    if not m:
        raise NoderigError(f"{text!r} is not an SGLang version (expected something like 0.5.9)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def select_profile(version: str | None) -> str:
    """The profile for an SGLang version: the newest one not newer than it.
    ``None`` means unknown, which selects ``DEFAULT_PROFILE``."""
    if version is None:
        return DEFAULT_PROFILE
    wanted = parse_version(version)
    eligible = [key for key in VERSION_PROFILES if parse_version(key) <= wanted]
    if not eligible:
        oldest = min(VERSION_PROFILES, key=parse_version)
        raise NoderigError(f"SGLang {version} is older than {oldest}, the oldest release noderig knows the flags of")
    return max(eligible, key=parse_version)


def spellings(profile: str) -> dict[str, tuple[str, ...] | None]:
    return {**BASE_SPELLINGS, **VERSION_PROFILES[profile]}


def spell(profile: str, option: str, value=None) -> list[str]:
    """The argv words for one logical option in one profile (``value`` fills ``{}``)."""
    template = spellings(profile)[option]
    if template is None:
        raise NoderigError(f"{option} has no flag in SGLang {profile}")
    return [str(value) if word == "{}" else word for word in template]


# ---------------------------------------------------------------------------------------
# The installed server's flags, from its --help
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OptionSpec:
    """One argparse option as ``--help`` shows it."""

    names: tuple[str, ...]  # every option string, first as argparse lists it
    metavar: str = ""  # "" for a switch
    choices: tuple[str, ...] | None = None

    @property
    def takes_value(self) -> bool:
        return bool(self.metavar)

    @property
    def value_optional(self) -> bool:  # nargs "?" or "*": "[X]" / "[X ...]"
        return self.metavar.startswith("[")

    @property
    def multiple(self) -> bool:  # nargs "+" or "*"
        return "..." in self.metavar


@dataclass
class ServerFlags:
    """Every option string of one installed server, and where it was asked."""

    options: dict[str, OptionSpec] = field(default_factory=dict)
    venv: str | None = None
    version: str | None = None

    def __contains__(self, name: str) -> bool:
        return name in self.options

    def get(self, name: str) -> OptionSpec | None:
        return self.options.get(name)

    def prefixed(self, prefix: str) -> list[str]:
        """The long option strings ``prefix`` abbreviates, one per option (the shortest
        matching alias): one entry is what argparse would silently expand it to, several
        are what it would call ambiguous."""
        if not prefix.startswith("--"):
            return []
        by_option: dict[tuple[str, ...], str] = {}
        for name, spec in self.options.items():
            if name.startswith("--") and name.startswith(prefix):
                best = by_option.get(spec.names)
                if best is None or len(name) < len(best):
                    by_option[spec.names] = name
        return sorted(by_option.values())

    def where(self) -> str:
        place = f"the SGLang installed in {self.venv}" if self.venv else "the installed SGLang"
        return f"{place} ({self.version})" if self.version else place

    def to_json(self) -> str:
        """For keeping the answer per venv version (a --help takes seconds on a real node)."""
        specs = {spec.names[0]: asdict(spec) for spec in self.options.values()}
        return json.dumps({"venv": self.venv, "version": self.version, "options": list(specs.values())}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ServerFlags":
        raw = json.loads(text)
        flags = cls(venv=raw.get("venv"), version=raw.get("version"))
        for item in raw["options"]:
            spec = OptionSpec(names=tuple(item["names"]), metavar=item["metavar"],
                              choices=tuple(item["choices"]) if item["choices"] is not None else None)
            for name in spec.names:
                flags.options[name] = spec
        return flags


_HEADING = re.compile(r"^\S.*:\s*$")  # "options:", "optional arguments:", "Speculative decoding:"
_OPTION_WORD = re.compile(r"^--?[A-Za-z0-9?][\w.?-]*$")


def _balanced(text: str) -> bool:
    return text.count("{") == text.count("}") and text.count("[") == text.count("]")


def _split_top_level(invocation: str) -> list[str]:
    """``"--a A, --b A"`` -> ``["--a A", "--b A"]``; commas inside {choices} stay."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(invocation):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 0 and invocation[i + 1:i + 2] == " ":
            parts.append(invocation[start:i].strip())
            start = i + 1
    parts.append(invocation[start:].strip())
    return [p for p in parts if p]


def _parse_invocation(invocation: str) -> OptionSpec | None:
    names, metavar = [], ""
    for part in _split_top_level(invocation):
        word, _, rest = part.partition(" ")
        if not _OPTION_WORD.match(word):
            return None
        names.append(word)
        metavar = metavar or rest.strip()
    if not names:
        return None
    choices = None
    m = re.match(r"^\{([^{}]*)\}", metavar)
    if m:
        choices = tuple(c.strip() for c in m.group(1).split(",") if c.strip())
    else:
        m = re.match(r"^\[\{([^{}]*)\}", metavar)  # nargs "?"/"*" with choices
        if m:
            choices = tuple(c.strip() for c in m.group(1).split(",") if c.strip())
    return OptionSpec(names=tuple(names), metavar=metavar, choices=choices)


def parse_help(text: str, *, venv: str | None = None, version: str | None = None) -> ServerFlags:
    """Parse ``python -m sglang.launch_server --help`` (argparse's format).

    The usage block is skipped; in every section after it, an option line is one indented
    at the section's option column and starting with ``-``; help text sits further right,
    so a help line that starts with ``--flag`` is not mistaken for an option. The option
    part of a line ends at the first run of two spaces. An invocation that a formatter
    wrapped (a trailing comma, or an unclosed ``{``/``[``) is joined with the lines after it.
    """
    lines = text.expandtabs().splitlines()
    i = 0
    # Skip anything printed before the usage block (import warnings), and the usage block
    # itself: from "usage:" to the first blank line.
    usage = next((n for n, line in enumerate(lines) if line.lower().startswith("usage:")), None)
    if usage is not None:
        i = usage
        while i < len(lines) and lines[i].strip():
            i += 1
    flags = ServerFlags(venv=venv, version=version)
    sections: list[list[str]] = [[]]
    for line in lines[i:]:
        if _HEADING.match(line):
            sections.append([])
        else:
            sections[-1].append(line)
    for section in sections:
        indents = [len(l) - len(l.lstrip()) for l in section if l.strip().startswith("-")]
        if not indents:
            continue
        column = min(indents)
        j = 0
        while j < len(section):
            line = section[j]
            j += 1
            indent = len(line) - len(line.lstrip())
            if indent != column or not line.strip().startswith("-"):
                continue
            invocation = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            while (invocation.endswith(",") or not _balanced(invocation)) and j < len(section):
                continuation = section[j].strip()
                j += 1
                joiner = "" if not _balanced(invocation) else " "  # inside {choices}: no space
                invocation = invocation + joiner + re.split(r"\s{2,}", continuation, maxsplit=1)[0]
            spec = _parse_invocation(invocation)
            if spec is None:
                continue
            for name in spec.names:
                flags.options[name] = spec
    if not any(name.startswith("--") for name in flags.options):
        raise NoderigError("the server's --help listed no options: is this SGLang's launch_server?")
    return flags


# ---------------------------------------------------------------------------------------
# Checking a command line against the installed server
# ---------------------------------------------------------------------------------------

_NUMBER = re.compile(r"^-\d+(\.\d*)?([eE][-+]?\d+)?$|^-\.\d+$")


def _looks_like_option(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _NUMBER.match(word)


def _unknown(name: str, flags: ServerFlags) -> str:
    where = flags.where()
    candidates = flags.prefixed(name)
    if len(candidates) == 1:
        return (f"{name} is not a flag of {where}: argparse would take it as an abbreviation of "
                f"{candidates[0]}, which noderig does not allow; spell out {candidates[0]}")
    message = f"{name} is not a flag of {where}; it was renamed or removed"
    if "ddtree" in name.lower():
        message += ", or this is not the DDTree fork"
    if len(candidates) > 1:
        message += f" (argparse would call it ambiguous: it could match {', '.join(candidates)})"
    else:
        close = difflib.get_close_matches(name, [n for n in flags.options if n.startswith("--")], n=3, cutoff=0.75)
        if close:
            message += f" (did you mean {' or '.join(close)}?)"
    return message


def check_argv(argv: list[str], flags: ServerFlags) -> list[str]:
    """Every problem of a server command line (the arguments after ``sglang.launch_server``)
    against the installed server's flags: unknown or abbreviated flags, a value outside its
    choices, a missing value, a value given to a switch, a flag given twice, a stray word."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--" or not _looks_like_option(word):
            problems.append(f"{word!r} is not a flag and {flags.where()} takes no positional arguments")
            continue
        name, has_inline, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        spec = flags.get(name)
        if spec is None:
            problems.append(_unknown(name, flags))
            while not has_inline and i < len(argv) and not _looks_like_option(argv[i]):
                i += 1  # its value(s): do not report them again as stray words
            continue
        canonical = spec.names[0]
        if canonical in seen:
            same = "" if seen[canonical] == name else f" (as {seen[canonical]})"
            problems.append(f"{name} is given twice{same}; argparse keeps only the last one")
        seen[canonical] = name
        values: list[str] = []
        if not spec.takes_value:
            if has_inline:
                problems.append(f"{name} is a switch in {flags.where()} and takes no value, got {inline!r}")
            continue
        if has_inline:
            values.append(inline)
        elif spec.multiple:
            while i < len(argv) and not _looks_like_option(argv[i]):
                values.append(argv[i])
                i += 1
            if not values and not spec.value_optional:
                problems.append(f"{name} needs at least one value ({spec.metavar})")
        elif i < len(argv) and not _looks_like_option(argv[i]):
            values.append(argv[i])
            i += 1
        elif not spec.value_optional:
            problems.append(f"{name} needs a value ({spec.metavar})")
        if spec.choices is not None:
            for value in values:
                if value not in spec.choices:
                    problems.append(f"{name} {value!r} is not one of the choices of {flags.where()}: "
                                    f"{', '.join(spec.choices)}")
    return problems
