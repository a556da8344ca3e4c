"""The SGLang server's command line, systemd unit and environment file, from its settings.

Pure: settings in, text out. The settings and their validation are ``noderig/server_settings.py``;
nothing is rendered here before ``validate`` has passed, and every value that is rendered is
quoted for the parser that reads it (systemd's ExecStart= word splitting and specifiers,
EnvironmentFile='s quoting), so no inventory value can add an argument, a directive or a
variable expansion.

    server_flags(settings)             -> the arguments of sglang.launch_server
    server_argv(settings)              -> the unit's command: venv python, the launcher, the flags
    render_unit(settings)              -> the .service text (diffable)
    render_env(settings, secrets)      -> the 0600 EnvironmentFile text (holds the secrets)
    check_against_server(settings, f)  -> the command line checked against the node's --help

Choices made here (see also templates/sglang.service.j2):

* DDTree (both spellings) gets ``--page-size 1`` and ``--disable-overlap-schedule`` emitted
  explicitly. The PR fork forces the overlap scheduler off by itself; saying it on the command
  line costs nothing, documents the constraint in the unit, and keeps it true for a fork
  variant that does not force it. An inventory that asks for the opposite is refused.
* The server runs as ``user`` (never root) with its state directory as working directory,
  home and cache root, never the checkpoint, under the systemd hardening SGLang tolerates
  (the template says what is left out and why: GPU device nodes, JIT).
* The API key and the Hub token never appear in the flags: the launcher
  (``noderig/node/launch.py``) reads them from the EnvironmentFile and hands them to the
  server in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .errors import NoderigError
from .flags import ServerFlags, check_argv, select_profile, spell
from .server_settings import (DDTREE_MODES, SAFE_TOKEN, SECRET_VARIABLES, ServerSettings,
                              env_file_problems, has_control, path_problems, raise_problems, validate)

# EAGLE3 defaults (Kimi K2.x EAGLE3 draft cards: steps 3, top-k 1, 4 draft tokens).
EAGLE3_DEFAULTS = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}

# Where the deploy installs noderig/node/launch.py and what the unit runs: one path, not a
# setting. Like noderig's other files on the node it is noderig's choice; a configurable one
# would need rules of its own (not in the venv or a checkpoint, whose copies delete what the
# source lacks; not under /tmp or /home, which the unit's PrivateTmp/ProtectHome hide).
LAUNCHER_PATH = "/usr/local/lib/noderig/launch.py"
# Trees systemd's ProtectHome= hides; a venv or checkpoint in one needs ProtectHome=read-only.
HOME_TREES = ("/home", "/root", "/run/user")
SERVER_MODULE = "sglang.launch_server"

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"



def _profile(s: ServerSettings, installed_version: str | None) -> str:
    return select_profile(s.sglang_version or installed_version)


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------


def _build(s: ServerSettings, profile: str) -> list[str]:
    def emit(option: str, value=None) -> list[str]:
        return spell(profile, option, value)

    ddtree = s.speculative in DDTREE_MODES
    argv = (emit("model_path", s.model_dir) + emit("served_model_name", s.served_model_name)
            + emit("host", s.host) + emit("port", s.port)
            + emit("tp_size", s.tp_size) + emit("ep_size", s.ep_size))
    if s.pp_size != 1:
        argv += emit("pp_size", s.pp_size)
    if s.nnodes > 1 or s.dist_init_addr is not None:
        argv += emit("nnodes", s.nnodes) + emit("node_rank", s.node_rank)
        if s.dist_init_addr is not None:
            argv += emit("dist_init_addr", s.dist_init_addr)
    if s.trust_remote_code:
        argv += emit("trust_remote_code")
    if s.context_length is not None:
        argv += emit("context_length", s.context_length)
    for option in ("reasoning_parser", "tool_call_parser"):
        if getattr(s, option):
            argv += emit(option, getattr(s, option))
    if s.mem_fraction_static is not None:
        argv += emit("mem_fraction_static", repr(float(s.mem_fraction_static)))
    for option in ("attention_backend", "mm_attention_backend"):
        if getattr(s, option):
            argv += emit(option, getattr(s, option))
    page_size = 1 if ddtree else s.page_size
    if page_size is not None:
        argv += emit("page_size", page_size)
    if s.enable_dp_attention:
        argv += emit("enable_dp_attention")
    if s.cuda_graph_max_bs is not None:
        argv += emit("cuda_graph_max_bs", s.cuda_graph_max_bs)
    if s.disable_cuda_graph:
        argv += emit("disable_cuda_graph")
    argv += _speculative(s, emit)
    if s.disable_overlap_schedule or (ddtree and s.disable_overlap_schedule is None):
        argv += emit("disable_overlap_schedule")
    if s.skip_server_warmup:
        argv += emit("skip_server_warmup")
    argv += list(s.extra_flags)
    return argv


def _speculative(s: ServerSettings, emit) -> list[str]:
    mode = s.speculative
    if mode == "none":
        return []
    algorithm = {"ddtree": "DDTREE", "ddtree-dflash": "DFLASH", "dflash": "DFLASH", "eagle3": "EAGLE3"}[mode]
    flags = emit("speculative_algorithm", algorithm) + emit("speculative_draft_model_path", s.draft_dir)
    if mode == "ddtree" and s.ddtree_budget is not None:
        flags += emit("speculative_ddtree_budget", s.ddtree_budget)
    if mode == "ddtree-dflash":
        flags += emit("speculative_dflash_enable_ddtree")
    if mode == "eagle3":
        for option, default in EAGLE3_DEFAULTS.items():
            value = getattr(s, option)
            flags += emit(option, default if value is None else value)
    elif s.speculative_num_draft_tokens is not None:  # DFLASH's block size
        flags += emit("speculative_num_draft_tokens", s.speculative_num_draft_tokens)
    if s.draft_attention_backend:
        flags += emit("speculative_draft_attention_backend", s.draft_attention_backend)
    if s.speculative_use_rejection_sampling:
        flags += emit("speculative_use_rejection_sampling")
    return flags



def server_flags(settings: ServerSettings, installed_version: str | None = None) -> list[str]:
    """The arguments of ``python -m sglang.launch_server``, validated (one NoderigError
    listing every problem). Spellings follow ``settings.sglang_version``, else
    ``installed_version``, else the default profile."""
    problems = validate(settings, installed_version)
    if problems:
        raise_problems(problems)
    return _build(settings, _profile(settings, installed_version))


def server_argv(settings: ServerSettings, installed_version: str | None = None) -> list[str]:
    """The unit's full command: the venv's Python running the launcher, then the server flags.
    The launcher adds the API key in memory; it is never part of this list."""
    flags = server_flags(settings, installed_version)
    return [f"{settings.venv}/bin/python", LAUNCHER_PATH, *flags]


def help_command(settings: ServerSettings) -> list[str]:
    """What to run on the node to learn the installed server's flags (feed it to parse_help)."""
    problems = path_problems(settings, "venv")
    if problems:
        raise_problems(problems)
    return [f"{settings.venv}/bin/python", "-m", SERVER_MODULE, "--help"]


def check_against_server(settings: ServerSettings, flags: ServerFlags, installed_version: str | None = None,
                         api_key: bool = False) -> list[str]:
    """The rendered flags checked against the installed server's ``--help``: every problem,
    one sentence each. ``api_key``: the launcher will add ``--api-key``, so it must exist too."""
    argv = server_flags(settings, installed_version or flags.version)
    if api_key:
        argv = [*argv, "--api-key", "x" * 8]
    return check_argv(argv, flags)


# ---------------------------------------------------------------------------------------
# Quoting for systemd
# ---------------------------------------------------------------------------------------


def systemd_quote(arg: str) -> str:
    """Quote one argument for ExecStart= (systemd.service "Command lines"): double quotes,
    backslash escapes, and %/$ doubled so neither specifiers nor variables expand."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"' if (escaped != arg or not SAFE_TOKEN.match(arg)) else arg


def exec_start(argv: list[str]) -> str:
    for arg in argv:
        if "\n" in arg or "\r" in arg:
            raise NoderigError("a server argument contains a line break, which would end the ExecStart= line")
        if has_control(arg):
            raise NoderigError(f"a server argument contains a control character: {arg!r}")
    return " ".join(systemd_quote(a) for a in argv)


def unit_value(text: str) -> str:
    """A directive value that is not a command line: only specifiers need escaping (and line
    breaks, which no validated value has, are refused)."""
    if has_control(text):
        raise NoderigError(f"a unit value contains a line break or control character: {text!r}")
    return text.replace("%", "%%")


def env_quote(value: str) -> str:
    """One value for an EnvironmentFile= line: double quotes, with the four characters
    systemd's env-file parser unescapes inside them (" \\ ` $) backslash-escaped."""
    if has_control(value):
        raise NoderigError("an environment value contains a line break or control character")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$")
    return f'"{escaped}"'


# ---------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------


def _jinja():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                              autoescape=False)


def start_limit_interval(settings: ServerSettings) -> int:
    """Long enough that ``start_limit_burst`` crashed starts (each up to a full load plus the
    restart delay) fall inside it, so a crash loop ends in a failed unit instead of looping."""
    return settings.start_limit_burst * (settings.start_timeout + settings.restart_sec) + 60


def protect_home(settings: ServerSettings) -> str:
    """``yes`` hides /home, /root and /run/user from the server; ``read-only`` when the venv or
    a checkpoint lives there (the server must read them)."""
    paths = [p for p in (settings.venv, settings.model_dir, settings.draft_dir) if p]
    inside = any(p == tree or p.startswith(tree + "/") for p in paths for tree in HOME_TREES)
    return "read-only" if inside else "yes"


def render_unit(settings: ServerSettings, installed_version: str | None = None) -> str:
    """The .service text. Pure, so the deploy can diff it with the node's copy."""
    argv = server_argv(settings, installed_version)
    return _jinja().get_template("sglang.service.j2").render(
        description=unit_value(settings.served_model_name),
        service=unit_value(settings.service_name),
        env_file=unit_value(settings.env_path),
        user=unit_value(settings.user),
        state_dir=unit_value(settings.state_dir),
        protect_home=protect_home(settings),
        bind_privileged_port=settings.port < 1024,
        exec_start=exec_start(argv),
        start_timeout=settings.start_timeout,
        stop_timeout=settings.stop_timeout,
        restart=settings.restart,
        restart_sec=settings.restart_sec,
        start_limit_burst=settings.start_limit_burst,
        start_limit_interval=start_limit_interval(settings),
    )


def render_env(settings: ServerSettings, secrets: Mapping[str, str | None] | None = None) -> str:
    """The EnvironmentFile text (install it with mode 0600): the inventory's
    ``server_environment`` and the secrets (``api_key``, ``hf_token``) under the variable
    names the launcher reads. Problems never quote a secret's value."""
    secrets = dict(secrets or {})
    problems = env_file_problems(settings, secrets)
    if problems:
        raise_problems(problems)
    variables = [("PYTHONUNBUFFERED", "1")]
    variables += [(name, str(value)) for name, value in settings.environment.items()]
    variables += [(var, secrets[name]) for name, var in SECRET_VARIABLES.items() if secrets.get(name)]
    return _jinja().get_template("sglang.env.j2").render(
        variables=[(name, env_quote(value)) for name, value in variables])
