"""SGLang launch flags from inventory settings, and their quoting for a systemd unit.

Pure: settings in, an argv list out. Every value is validated here before it can reach a
unit file, and every argument is quoted for systemd's own command-line parser, so no
inventory value can add an argument, a directive or a variable expansion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import NoderigError

# How each speculative mode is spelled on the command line (DDTree exists in two forks).
SPECULATIVE_MODES = ("none", "ddtree", "ddtree-dflash", "dflash", "eagle3")

# Attention backends that force a KV page size above 1 (so they cannot run DDTree).
PAGED_ONLY_BACKENDS = ("trtllm_mla", "flashmla", "cutlass_mla")

_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_./:@+=,-]+$")


@dataclass
class ServerSettings:
    venv: str
    model_dir: str
    served_model_name: str
    host: str = "0.0.0.0"
    port: int = 30000
    tp_size: int = 8
    ep_size: int = 1
    trust_remote_code: bool = True
    reasoning_parser: str | None = "kimi_k2"
    tool_call_parser: str | None = "kimi_k2"
    mem_fraction_static: float | None = None
    attention_backend: str | None = None
    skip_server_warmup: bool = True
    speculative: str = "ddtree"
    draft_dir: str | None = None
    ddtree_budget: int | None = None
    page_size: int | None = None
    extra_flags: list[str] = field(default_factory=list)


def _check_token(name: str, value: str) -> str:
    if not isinstance(value, str) or not _SAFE_TOKEN.match(value):
        raise NoderigError(f"inventory value {name}={value!r} is not allowed: use letters, digits and ._/:@+=,- only")
    return value


def _check_path(name: str, value: str | None) -> str:
    if not value or not str(value).startswith("/"):
        raise NoderigError(f"inventory value {name}={value!r} must be an absolute path")
    return _check_token(name, value)


def _check_int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise NoderigError(f"inventory value {name}={value!r} must be an integer from {low} to {high}")
    return value


def server_argv(s: ServerSettings) -> list[str]:
    """The full command line of the server, validated."""
    argv = [f"{_check_path('venv', s.venv)}/bin/python", "-m", "sglang.launch_server",
            "--model-path", _check_path("model_dir", s.model_dir),
            "--served-model-name", _check_token("served_model_name", s.served_model_name),
            "--host", _check_token("host", s.host),
            "--port", str(_check_int("port", s.port, 1, 65535)),
            "--tp-size", str(_check_int("tp_size", s.tp_size, 1, 1024)),
            "--ep-size", str(_check_int("ep_size", s.ep_size, 1, 1024))]
    if s.trust_remote_code:
        argv.append("--trust-remote-code")
    for flag, value in (("--reasoning-parser", s.reasoning_parser), ("--tool-call-parser", s.tool_call_parser),
                        ("--attention-backend", s.attention_backend)):
        if value:
            argv += [flag, _check_token(flag[2:].replace("-", "_"), value)]
    if s.mem_fraction_static is not None:
        if not isinstance(s.mem_fraction_static, (int, float)) or not 0 < s.mem_fraction_static < 1:
            raise NoderigError(f"inventory value mem_fraction_static={s.mem_fraction_static!r} must be between 0 and 1")
        argv += ["--mem-fraction-static", str(s.mem_fraction_static)]
    argv += speculative_flags(s)
    if s.skip_server_warmup:
        argv.append("--skip-server-warmup")
    for i, flag in enumerate(s.extra_flags):
        argv.append(_check_token(f"extra_flags[{i}]", flag))
    return argv


def speculative_flags(s: ServerSettings) -> list[str]:
    if s.speculative not in SPECULATIVE_MODES:
        raise NoderigError(f"inventory value speculative={s.speculative!r} must be one of {', '.join(SPECULATIVE_MODES)}")
    if s.speculative == "none":
        return []
    draft = _check_path("draft_dir", s.draft_dir)
    if s.speculative in ("ddtree", "ddtree-dflash"):
        # DDTree verifies a tree with one token per KV slot: SGLang's forks require page size 1.
        if s.page_size not in (None, 1):
            raise NoderigError(f"DDTree speculative decoding needs page_size 1, the inventory has {s.page_size}")
        # Left unset, SGLang picks trtllm_mla for Kimi/DeepSeek on Blackwell, which forces
        # page size 32/64 and the server refuses DDTree at startup.
        if s.attention_backend is None or s.attention_backend in PAGED_ONLY_BACKENDS:
            raise NoderigError(
                f"DDTree needs page size 1, which attention_backend={s.attention_backend!r} does not allow "
                "(unset means trtllm_mla on Blackwell); set attention_backend to flashinfer or triton")
    if s.speculative == "ddtree":
        flags = ["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", draft]
        if s.ddtree_budget is not None:
            flags += ["--speculative-ddtree-budget", str(_check_int("ddtree_budget", s.ddtree_budget, 1, 4096))]
        return flags + ["--page-size", "1"]
    if s.speculative == "ddtree-dflash":
        return ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", draft,
                "--speculative-dflash-enable-ddtree", "--page-size", "1"]
    if s.speculative == "dflash":
        return ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", draft]
    return ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft,
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def systemd_quote(arg: str) -> str:
    """Quote one argument for ExecStart= (systemd.service "Command lines"): double quotes,
    backslash escapes, and %/$ doubled so neither specifiers nor variables expand."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"' if (escaped != arg or not _SAFE_TOKEN.match(arg)) else arg


def exec_start(argv: list[str]) -> str:
    if any("\n" in a or "\r" in a for a in argv):
        raise NoderigError("a server argument contains a line break, which would end the ExecStart= line")
    return " ".join(systemd_quote(a) for a in argv)
