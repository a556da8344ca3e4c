"""The server's settings (one ServerSettings per target, from the inventory) and their validation.

Pure: settings in, problems out, one sentence each naming the inventory key. Nothing is
rendered from settings that ``validate`` has not passed (``noderig/unit.py`` renders them).

    ServerSettings.from_inventory(data) -> the settings, with the inventory's key names
    validate(settings)                  -> every problem ([] when good): each field on its own, then
                                           the rules across fields (DDTree, multi-node), then extra_flags
    env_file_problems(settings, secrets) -> the environment file's variables and secrets, checked
    secret_problems(secrets)            -> the secrets alone
    path_problems(settings, name)       -> one path setting alone
    raise_problems(problems)            -> one NoderigError listing them
"""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from .errors import NoderigError
from .flags import VERSION_PROFILES, select_profile, spellings

# How each speculative mode is spelled on the command line (DDTree exists in two forks).
SPECULATIVE_MODES = ("none", "ddtree", "ddtree-dflash", "dflash", "eagle3")
DDTREE_MODES = ("ddtree", "ddtree-dflash")
DFLASH_BASED = ("ddtree", "ddtree-dflash", "dflash")  # DFLASH forces num_steps = topk = 1

# Attention backends that force a KV page size above 1 (so they cannot run DDTree).
PAGED_ONLY_BACKENDS = ("trtllm_mla", "flashmla", "cutlass_mla")

STATE_ROOT = "/var/lib"  # systemd's StateDirectory= root

# Secrets: the name render_env accepts -> the variable the launcher reads from the env file.
SECRET_VARIABLES = {"api_key": "NODERIG_API_KEY", "hf_token": "NODERIG_HF_TOKEN"}
# Variables the inventory's server_environment may not set (secrets, or the launcher's).
RESERVED_VARIABLES = ("NODERIG_API_KEY", "NODERIG_HF_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH")
RESTART_POLICIES = ("no", "on-failure", "on-abnormal")

# A word that needs no quoting anywhere (a unit, a shell).
# Anchored with \Z, not $: "$" also matches before a trailing newline ("name\n" must fail).
SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_./:@+=,-]+\Z")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./:@+=,-]*\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9_.-]+\Z")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z")
_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,30}\Z")
_ZONE = re.compile(r"^[A-Za-z0-9_.-]{1,15}\Z")  # an IPv6 zone that names an interface (fe80::1%eth0)
# The environment file is replaced whole (mode 0600): only ever a file of noderig's own directory.
ENV_DIR = "/etc/noderig"
_ENV_FILE = re.compile(r"^/etc/noderig/[A-Za-z0-9][A-Za-z0-9_.-]{0,200}\.env\Z")
_SECRET_CHARS = re.compile(r"^[\x21-\x7e]+\Z")


@dataclass
class ServerSettings:
    """Everything the unit is rendered from. Field names follow the inventory's, except where
    ``INVENTORY_KEYS`` says otherwise (``venv`` is ``venv_path``, ...)."""

    venv: str
    model_dir: str
    served_model_name: str
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 8
    ep_size: int = 1
    pp_size: int = 1
    trust_remote_code: bool = True
    context_length: int | None = None
    reasoning_parser: str | None = "kimi_k2"
    tool_call_parser: str | None = "kimi_k2"
    mem_fraction_static: float | None = None
    attention_backend: str | None = None
    mm_attention_backend: str | None = None
    skip_server_warmup: bool = True
    # Speculative decoding: one setting picks the mode and its spelling.
    speculative: str = "ddtree"
    draft_dir: str | None = None
    ddtree_budget: int | None = None
    draft_attention_backend: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_use_rejection_sampling: bool = False
    page_size: int | None = None
    enable_dp_attention: bool = False
    disable_overlap_schedule: bool | None = None  # None: on for DDTree, SGLang's default otherwise
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool = False
    # Multi-node (one node: leave as is).
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: str | None = None
    # Which release's flag spellings to use; None: the installed version passed to the renderers.
    sglang_version: str | None = None
    extra_flags: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    # The unit.
    service_name: str = "sglang"
    user: str = "sglang"  # the dedicated system user the server runs as (never root)
    env_file: str | None = None  # None: /etc/noderig/<service_name>.env (another: /etc/noderig/<name>.env)
    start_timeout: int = 1800
    stop_timeout: int = 120
    restart: str = "on-failure"
    restart_sec: int = 30
    start_limit_burst: int = 3

    @property
    def env_path(self) -> str:
        return self.env_file or f"/etc/noderig/{self.service_name}.env"

    @property
    def state_dir(self) -> str:
        """The unit's StateDirectory: the server's working directory, home and caches, the
        only place on disk it may write (besides its runtime directory and a private /tmp)."""
        return f"{STATE_ROOT}/{self.service_name}"

    @classmethod
    def from_inventory(cls, data) -> "ServerSettings":
        """Build from pyinfra host data (or any mapping: anything with ``get``) using the inventory's key names.
        A key that is absent or None keeps the field's default."""
        values = {}
        for f in fields(cls):
            value = data.get(INVENTORY_KEYS.get(f.name, f.name))
            if value is None:
                if f.default is MISSING and f.default_factory is MISSING:
                    values[f.name] = None  # validate() names it
                continue
            if f.name == "extra_flags" and isinstance(value, tuple):
                value = list(value)
            values[f.name] = value
        return cls(**values)


# ServerSettings field -> the inventory key it comes from (where the names differ).
INVENTORY_KEYS = {"venv": "venv_path", "host": "server_host", "port": "server_port",
                  "environment": "server_environment", "user": "service_user"}


def inventory_key(name: str) -> str:
    """The inventory key for a settings field, as problems name it."""
    return INVENTORY_KEYS.get(name, name)


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------


class SettingProblems(list):
    """The problems of one ServerSettings, one sentence each, and the fields they are about
    (``bad``: a rule across fields skips a field that already failed on its own)."""

    def __init__(self):
        super().__init__()
        self.bad: set[str] = set()

    def add(self, name: str, value, rule: str) -> None:
        self.bad.add(name)
        self.append(f"inventory value {inventory_key(name)}={value!r} {rule}")


def is_int(value) -> bool:
    """An int that is not a bool (True is an int to Python, never a port or a size here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def has_control(text: str) -> bool:
    """A line break, a control character or a lone surrogate: never in a value that reaches a
    unit, an env file or a shell."""
    return any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in text)


def _token(p: SettingProblems, s: ServerSettings, name: str, optional: bool = False, max_len: int = 256) -> None:
    value = getattr(s, name)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        p.add(name, value, "must be a non-empty string")
    elif len(value) > max_len or not SAFE_TOKEN.match(value):
        p.add(name, value, f"is not allowed: use at most {max_len} letters, digits and ._/:@+=,- only")


def _not_a_flag(p: SettingProblems, s: ServerSettings, name: str) -> None:
    """A word rendered as the value after its flag: one starting with ``-`` would be read as a
    flag of its own (``--host=0.0.0.0``)."""
    value = getattr(s, name)
    if name not in p.bad and isinstance(value, str) and value.startswith("-"):
        p.add(name, value, "must not start with '-' (the server would read it as a flag)")


def _path(p: SettingProblems, s: ServerSettings, name: str, optional: bool = False) -> None:
    value = getattr(s, name)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.startswith("/"):
        p.add(name, value, "must be an absolute path")
    elif not _SAFE_PATH.match(value) or len(value) > 1024:
        p.add(name, value, "is not allowed: a path of letters, digits and ._/:@+=,- only (no spaces or quotes)")
    elif "/../" in value + "/" or "/./" in value + "/" or "//" in value:
        p.add(name, value, "must be a normalized absolute path (no //, /./ or /../)")


def _int(p: SettingProblems, s: ServerSettings, name: str, low: int, high: int, optional: bool = False) -> None:
    value = getattr(s, name)
    if not (value is None and optional) and (not is_int(value) or not low <= value <= high):
        p.add(name, value, f"must be an integer from {low} to {high}")


def _power_of_two(p: SettingProblems, s: ServerSettings, name: str, high: int = 64) -> None:
    value = getattr(s, name)
    if not is_int(value) or not 1 <= value <= high or value & (value - 1):
        p.add(name, value, f"must be a power of two from 1 to {high}")


def _bool(p: SettingProblems, s: ServerSettings, name: str, optional: bool = False) -> None:
    value = getattr(s, name)
    if not (value is None and optional) and not isinstance(value, bool):
        p.add(name, value, "must be true or false")


def ip_address(value, zone: bool = False):
    """``ipaddress.ip_address``, without what it lets through after an IPv6 zone's ``%``: any
    text at all (spaces, quotes, ``;``, newlines), which would reach a config file or an
    option as written. ``zone``: an interface name (``fe80::1%eth0``) is allowed; otherwise
    no zone is (nginx and nft take none). Raises ValueError."""
    address = ipaddress.ip_address(value)
    scope = getattr(address, "scope_id", None)
    if scope is not None and not (zone and _ZONE.match(scope)):
        raise ValueError(f"{value!r} has a zone index (%...): " + (
            "only an interface name is allowed after the %" if zone else "give the address without it"))
    return address


def ip_network(value):
    """``ipaddress.ip_network(value, strict=False)``, refusing an IPv6 zone index (see ``ip_address``)."""
    if isinstance(value, str) and "%" in value:
        raise ValueError(f"{value!r} has a zone index (%...): give the address or network without it")
    return ipaddress.ip_network(value, strict=False)


def is_host(value) -> bool:
    """An IP address (an IPv6 zone only as an interface name) or a DNS host name."""
    if not isinstance(value, str):
        return False
    try:
        ip_address(value, zone=True)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(value))


def _host_port(p: SettingProblems, s: ServerSettings, name: str) -> None:
    value = getattr(s, name)
    m = re.match(r"^(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(\d{1,5})\Z", value) if isinstance(value, str) else None
    if m is None:
        p.add(name, value, "must be host:port of the head node (e.g. 10.0.0.2:25000)")
        return
    host, port = m.group(1), int(m.group(2))
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            p.add(name, value, "has an invalid IPv6 address in brackets")
            return
    elif not is_host(host):
        p.add(name, value, "must be host:port with an IP address or a host name before the colon")
        return
    if not 1 <= port <= 65535:
        p.add(name, value, "has a port outside 1-65535")


def _field_problems(s: ServerSettings) -> SettingProblems:
    """Each field on its own: its type, range and characters."""
    p = SettingProblems()
    _server_field_problems(p, s)
    _environment_problems(p, s)
    _unit_field_problems(p, s)
    return p


def _server_field_problems(p: SettingProblems, s: ServerSettings) -> None:
    """The fields the server's command line is rendered from."""
    _path(p, s, "venv")
    _path(p, s, "model_dir")
    _path(p, s, "draft_dir", optional=True)
    _token(p, s, "served_model_name")
    _not_a_flag(p, s, "served_model_name")
    if not is_host(s.host):
        p.add("host", s.host, "must be an IP address or a host name")
    _int(p, s, "port", 1, 65535)
    _power_of_two(p, s, "tp_size")
    _power_of_two(p, s, "ep_size")
    _int(p, s, "pp_size", 1, 64)
    _int(p, s, "context_length", 1, 1 << 24, optional=True)
    for name in ("reasoning_parser", "tool_call_parser", "attention_backend", "mm_attention_backend",
                 "draft_attention_backend"):
        _token(p, s, name, optional=True, max_len=64)
        _not_a_flag(p, s, name)
    # True and False are numbers to Python, but 1 and 0 fall outside the range anyway.
    if s.mem_fraction_static is not None and (
            not isinstance(s.mem_fraction_static, (int, float))
            or not math.isfinite(s.mem_fraction_static) or not 0 < s.mem_fraction_static < 1):
        p.add("mem_fraction_static", s.mem_fraction_static, "must be a number between 0 and 1 (exclusive), or unset")
    for name in ("trust_remote_code", "skip_server_warmup", "enable_dp_attention", "disable_cuda_graph",
                 "speculative_use_rejection_sampling"):
        _bool(p, s, name)
    _bool(p, s, "disable_overlap_schedule", optional=True)
    if s.speculative not in SPECULATIVE_MODES:
        p.add("speculative", s.speculative, f"must be one of {', '.join(SPECULATIVE_MODES)}")
    _int(p, s, "ddtree_budget", 1, 4096, optional=True)
    _int(p, s, "speculative_num_steps", 1, 64, optional=True)
    _int(p, s, "speculative_eagle_topk", 1, 64, optional=True)
    _int(p, s, "speculative_num_draft_tokens", 1, 4096, optional=True)
    _int(p, s, "page_size", 1, 1024, optional=True)
    _int(p, s, "cuda_graph_max_bs", 1, 4096, optional=True)
    _int(p, s, "nnodes", 1, 64)
    _int(p, s, "node_rank", 0, 63)
    if s.dist_init_addr is not None:
        _host_port(p, s, "dist_init_addr")
    if s.sglang_version is not None:
        if not isinstance(s.sglang_version, str):
            p.add("sglang_version", s.sglang_version, "must be a version string like 0.5.9, or unset")
        else:
            try:
                select_profile(s.sglang_version)
            except NoderigError as e:
                p.add("sglang_version", s.sglang_version, f"is not usable: {e}")


def _unit_field_problems(p: SettingProblems, s: ServerSettings) -> None:
    """The fields of the unit around the server: its name, user, files, timeouts and restarts."""
    _token(p, s, "service_name", max_len=200)
    if "service_name" not in p.bad and not _UNIT_NAME.match(s.service_name):
        p.add("service_name", s.service_name, "must be a unit name of letters, digits and ._- only")
    if not isinstance(s.user, str) or not _USER_NAME.match(s.user):
        p.add("user", s.user, "must be a system user name (lowercase letters, digits, _ and -, at most 31)")
    elif s.user == "root":
        p.add("user", s.user, "is refused: the server must not run as root; use a dedicated system user such "
                              "as 'sglang' (the deploy creates it)")
    _path(p, s, "env_file", optional=True)
    if s.env_file is not None and "env_file" not in p.bad and not _ENV_FILE.match(s.env_file):
        p.add("env_file", s.env_file, f"must be a file in noderig's own directory {ENV_DIR} named <name>.env (it is "
                                      "replaced by the server's environment and secrets, mode 0600), e.g. "
                                      f"{ENV_DIR}/sglang.env")
    _int(p, s, "start_timeout", 1, 86400)
    _int(p, s, "stop_timeout", 1, 3600)
    _int(p, s, "restart_sec", 0, 3600)
    _int(p, s, "start_limit_burst", 1, 100)
    if s.restart not in RESTART_POLICIES:
        p.add("restart", s.restart, f"must be one of {', '.join(RESTART_POLICIES)}")


def _environment_problems(p: SettingProblems, s: ServerSettings) -> None:
    """``server_environment``: variable names, values a line each, no secret or launcher variable."""
    if not isinstance(s.environment, Mapping):
        p.add("environment", s.environment, "must be a mapping of variable names to values")
        return
    for name, value in s.environment.items():
        label = f"inventory value server_environment[{name!r}]"
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            p.append(f"{label} has an invalid variable name: use letters, digits and _, not starting with a digit")
        elif name in RESERVED_VARIABLES:
            p.append(f"{label} is reserved: the API key and Hub token are secrets (render_env's secrets), "
                     "never inventory values")
        elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
            p.append(f"{label}={value!r} must be a string or a number")
        elif has_control(str(value)):
            p.append(f"{label}={value!r} contains a line break or control character")


def env_file_problems(settings: ServerSettings, secrets: Mapping[str, str | None]) -> list[str]:
    """What the environment file would hold, checked: the inventory's ``server_environment``
    and the secrets (``api_key``, ``hf_token``). Problems never quote a secret's value."""
    p = SettingProblems()
    _environment_problems(p, settings)
    return list(p) + secret_problems(secrets)


def secret_problems(secrets: Mapping[str, str | None]) -> list[str]:
    """The secrets the environment file would hold (``api_key``, ``hf_token``), checked; an
    empty one is left out of the file. Problems never quote a secret's value."""
    p = []
    for name in sorted(set(secrets) - set(SECRET_VARIABLES)):
        p.append(f"secret {name!r} is not one noderig knows (known: {', '.join(SECRET_VARIABLES)})")
    for name in SECRET_VARIABLES:
        value = secrets.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            p.append(f"secret {name} must be a string")
        elif not 8 <= len(value) <= 4096:
            p.append(f"secret {name} must be 8 to 4096 characters long (a shorter one cannot be redacted "
                     "from the logs safely)")
        elif not _SECRET_CHARS.match(value) or any(ch in value for ch in "\"'\\"):
            p.append(f"secret {name} may hold printable ASCII only, without spaces, quotes or backslashes "
                     "(it must read the same in every log format it could be redacted from)")
    return p


def path_problems(settings: ServerSettings, name: str) -> list[str]:
    """The problems of one path setting alone ([] when it is a plain, normalised absolute path)."""
    p = SettingProblems()
    _path(p, settings, name)
    return list(p)


def _constraint_problems(s: ServerSettings, bad: set[str] = frozenset()) -> list[str]:
    """Cross-field rules: speculative modes (DDTree's constraints) and multi-node. A rule whose
    fields already failed their own check (``bad``) is skipped: that problem is reported."""
    p: list[str] = []
    mode = s.speculative if "speculative" not in bad else None
    if mode not in (None, "none") and s.draft_dir is None:
        p.append(f"speculative={mode} needs draft_dir, the draft model's absolute path")
    if mode in DDTREE_MODES:
        what = f"DDTree (speculative={mode})"
        # DDTree verifies a tree with one token per KV slot: the forks require page size 1.
        if "page_size" not in bad and s.page_size not in (None, 1):
            p.append(f"{what} needs page_size 1, the inventory has page_size={s.page_size}")
        # Left unset, SGLang picks trtllm_mla for Kimi/DeepSeek on Blackwell, which forces page
        # size 32/64, and the server refuses DDTree at startup.
        # (a backend that failed its own check is neither None nor one of these names)
        if s.attention_backend is None or s.attention_backend in PAGED_ONLY_BACKENDS:
            p.append(f"{what} needs page size 1, which attention_backend={s.attention_backend!r} does not allow "
                     "(unset means trtllm_mla on Blackwell); set attention_backend to flashinfer or triton")
        if s.draft_attention_backend in PAGED_ONLY_BACKENDS:
            p.append(f"{what} needs page size 1, which draft_attention_backend={s.draft_attention_backend!r} "
                     "does not allow; use flashinfer or triton, or leave it unset")
        if s.enable_dp_attention is True:
            p.append(f"{what} does not support DP attention; set enable_dp_attention to false")
        if s.speculative_use_rejection_sampling is True:
            p.append(f"{what} does not support rejection sampling; set speculative_use_rejection_sampling to false")
        if s.disable_overlap_schedule is False:
            p.append(f"{what} runs only with the overlap scheduler disabled; set disable_overlap_schedule "
                     "to true or leave it unset")
    if mode in DFLASH_BASED and "pp_size" not in bad and s.pp_size != 1:
        p.append(f"speculative={mode} (DFLASH-based) needs pp_size 1, the inventory has pp_size={s.pp_size}")
    if mode in DFLASH_BASED:
        for name in ("speculative_num_steps", "speculative_eagle_topk"):
            if name not in bad and getattr(s, name) not in (None, 1):
                p.append(f"speculative={mode} forces {name} to 1 (DFLASH drafts one block per step), "
                         f"the inventory has {getattr(s, name)}; leave it unset")
    if mode and "ddtree_budget" not in bad and s.ddtree_budget is not None and mode != "ddtree":
        p.append(f"ddtree_budget={s.ddtree_budget} is set but only speculative=ddtree (the PR spelling) has a "
                 f"budget flag; the inventory has speculative={mode}: unset ddtree_budget")
    if mode in ("none",) and (s.draft_attention_backend is not None or s.speculative_num_draft_tokens is not None):
        p.append("speculative=none does not use draft_attention_backend or speculative_num_draft_tokens; unset them")
    # Multi-node.
    if not bad & {"node_rank", "nnodes"} and s.node_rank >= s.nnodes:
        p.append(f"node_rank={s.node_rank} must be below nnodes={s.nnodes} (ranks count from 0)")
    if not bad & {"tp_size", "nnodes"} and s.tp_size % s.nnodes:
        p.append(f"tp_size={s.tp_size} must be divisible by nnodes={s.nnodes}")
    if "nnodes" not in bad and s.nnodes > 1 and s.dist_init_addr is None:
        p.append(f"nnodes={s.nnodes} needs dist_init_addr, host:port of the head node (node_rank 0)")
    if not bad & {"tp_size", "ep_size"} and s.tp_size % s.ep_size:
        p.append(f"tp_size={s.tp_size} must be divisible by ep_size={s.ep_size}")
    return p


# Logical flag (noderig.flags) -> the inventory setting that renders it, where they differ.
_OPTION_SETTING = {"model_path": "model_dir", "host": "server_host", "port": "server_port",
                   "speculative_algorithm": "speculative", "speculative_dflash_enable_ddtree": "speculative",
                   "speculative_draft_model_path": "draft_dir", "speculative_ddtree_budget": "ddtree_budget",
                   "speculative_draft_attention_backend": "draft_attention_backend"}


def _flag_settings() -> dict[str, str]:
    """Every flag noderig renders from a setting, in any profile -> that setting's inventory key."""
    table = {}
    for profile in VERSION_PROFILES:
        for option, template in spellings(profile).items():
            for word in template or ():
                if word.startswith("--"):
                    table[word] = _OPTION_SETTING.get(option, option)
    return table


def _extra_flag_problems(s: ServerSettings) -> list[str]:
    if not isinstance(s.extra_flags, list) or not all(isinstance(f, str) for f in s.extra_flags):
        return [f"inventory value extra_flags={s.extra_flags!r} must be a list of strings, one argument each"]
    table = _flag_settings()
    problems = []
    for i, word in enumerate(s.extra_flags):
        name = word.partition("=")[0]
        label = f"inventory value extra_flags[{i}]={word!r}"
        # argparse takes a unique prefix of a flag for the flag, and the last value given wins
        longer = sorted(flag for flag in table if flag.startswith(name) and flag != name)
        if has_control(word):
            problems.append(f"{label} contains a line break or control character")
        elif word == "--":
            problems.append(f"{label} ends the server's options (every word after it, the API key the launcher adds "
                            "included, would be taken as an argument); remove it")
        elif name.startswith("--") and "--api-key".startswith(name):
            problems.append(f"{label} would put the API key in argv: give it as the api_key secret "
                            "(it goes to the 0600 environment file)")
        elif name in table:
            problems.append(f"{label} is rendered from the inventory setting {table[name]}: set that instead, "
                            "so the flag is spelled right for the installed SGLang")
        elif name.startswith("--") and longer:
            settings = sorted({table[flag] for flag in longer})
            problems.append(f"{label} abbreviates {' or '.join(longer)}, which {'is' if len(longer) == 1 else 'are'} "
                            f"rendered from the inventory setting {' or '.join(settings)}: set that instead")
    return problems


def validate(settings: ServerSettings, installed_version: str | None = None) -> list[str]:
    """Every problem of the settings, one sentence each naming the inventory key; [] when good.
    ``installed_version`` (the node's SGLang) picks the flag spellings when the inventory's
    ``sglang_version`` is unset."""
    checked = _field_problems(settings)
    problems = list(checked) + _constraint_problems(settings, checked.bad)
    problems += _extra_flag_problems(settings)
    if installed_version is not None and settings.sglang_version is None:
        try:
            select_profile(installed_version)
        except NoderigError as e:
            problems.append(f"the node's {e}")
    return problems


def raise_problems(problems: list[str]) -> None:
    """One NoderigError: the problem itself, or the list of them."""
    if len(problems) == 1:
        raise NoderigError(problems[0])
    raise NoderigError(f"the inventory has {len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems))

