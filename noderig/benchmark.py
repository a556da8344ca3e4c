"""`noderig bench`'s decisions, without hosts: workloads (data), layouts and the deploy
overrides they mean, the load generators' command lines and configs, their results read
into one record format, and the Pareto front. No pyinfra, no I/O but reading the workloads.

Two maintained load generators, never one of our own:

- SGLang's ``sglang.bench_serving`` from the node's venv, where it is installed: it runs on
  the node (no tunnel in the latency), writes one JSON line per run (``--output-file``).
- aiperf (NVIDIA, pinned in pyproject's ``bench-client`` extra, its own venv), on the
  controller through a forwarded port: writes ``profile_export_aiperf.json``.

Both read the API key from ``OPENAI_API_KEY``; it never reaches argv.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

WORKLOADS_FILE = Path(__file__).with_name("bench_workloads.toml")
RECORD_VERSION = 1
SEED = 1  # one seed: the same prompts for every layout of a sweep


class BenchError(ValueError):
    """Bad input to the benchmark (a workload file, a layout name): one sentence."""


# ---------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    name: str
    input_len: int
    output_len: int
    concurrency: tuple[int, ...]
    requests_per_level: int = 4
    min_requests: int = 16
    request_rate: float = math.inf
    description: str = ""

    def requests(self, concurrency: int) -> int:
        """Requests in the run at this concurrency."""
        return max(self.min_requests, self.requests_per_level * concurrency)


def _positive_int(name: str, key: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BenchError(f"workload {name}: {key}={value!r} must be a positive integer")
    return value


def _rate(name: str, value) -> float:
    if value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise BenchError(f"workload {name}: request_rate={value!r} must be a positive number or \"inf\"")
    return float(value)


def workload_from_table(name: str, table: dict) -> Workload:
    known = {"description", "input_len", "output_len", "concurrency", "requests_per_level", "min_requests",
             "request_rate"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise BenchError(f"workload {name}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    for key in ("input_len", "output_len", "concurrency"):
        if key not in table:
            raise BenchError(f"workload {name}: {key} is missing")
    levels = table["concurrency"]
    if not isinstance(levels, list) or not levels:
        raise BenchError(f"workload {name}: concurrency={levels!r} must be a non-empty list of positive integers")
    return Workload(
        name=name, input_len=_positive_int(name, "input_len", table["input_len"]),
        output_len=_positive_int(name, "output_len", table["output_len"]),
        concurrency=tuple(_positive_int(name, "concurrency", c) for c in levels),
        requests_per_level=_positive_int(name, "requests_per_level", table.get("requests_per_level", 4)),
        min_requests=_positive_int(name, "min_requests", table.get("min_requests", 16)),
        request_rate=_rate(name, table.get("request_rate", "inf")), description=str(table.get("description", "")))


def load_workloads(extra: Path | None = None) -> dict[str, Workload]:
    """The shipped workloads, then ``extra``'s (same name: replaced).

    + extra: a TOML file of more workloads, one table each
    """
    found: dict[str, Workload] = {}
    for path in [WORKLOADS_FILE] + ([extra] if extra else []):
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise BenchError(f"cannot read workloads from {path}: {e}") from None
        for name, table in data.items():
            if not isinstance(table, dict):
                raise BenchError(f"{path}: {name} is not a table ([{name}])")
            found[name] = workload_from_table(name, table)
    return found


def select_workloads(available: dict[str, Workload], names: list[str]) -> list[Workload]:
    missing = [n for n in names if n not in available]
    if missing:
        raise BenchError(f"unknown workload(s) {', '.join(missing)}; known: {', '.join(sorted(available))}")
    return [available[n] for n in names]


# ---------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------

SPECULATIVE_WORDS = {"nospec": "none", "ddtree": "ddtree", "dflash": "dflash", "eagle3": "eagle3",
                     "ddtree+dflash": "ddtree-dflash"}
_PART = re.compile(r"(tp|ep|pp|dpa)(\d*)\Z")


@dataclass(frozen=True)
class Layout:
    """A parallelism layout. ``None``: the inventory's own value."""

    name: str
    tp: int | None = None
    ep: int | None = None
    pp: int | None = None
    dp_attention: int | None = None  # DP attention's dp size; 0: off
    speculative: str | None = None

    def data_overrides(self, inventory: dict) -> list[str]:
        """``--data key=value`` arguments that deploy this layout over ``inventory``'s data."""
        s = self.settings(inventory)
        out = [f"tp_size={s['tp_size']}", f"ep_size={s['ep_size']}", f"pp_size={s['pp_size']}",
               f"enable_dp_attention={'true' if s['enable_dp_attention'] else 'false'}",
               f"speculative={s['speculative']}"]
        if self.dp_attention is not None:
            out.append("extra_flags=" + json.dumps(s["extra_flags"]))
        return out

    def settings(self, inventory: dict) -> dict:
        """The layout's settings as the inventory names them, inventory values filling gaps."""
        ep = self.ep or inventory.get("ep_size") or 1
        tp = self.tp or max(ep, inventory.get("tp_size") or 1)
        extra = [f for f in _without_dp_size(list(inventory.get("extra_flags") or []))]
        dp = self.dp_attention if self.dp_attention is not None else inventory_dp_attention(inventory)
        if self.dp_attention:
            extra += ["--dp-size", str(self.dp_attention)]
        return {"tp_size": tp, "ep_size": ep, "pp_size": self.pp or inventory.get("pp_size") or 1,
                "enable_dp_attention": bool(dp), "dp_size": dp or 1,
                "speculative": self.speculative or inventory.get("speculative") or "none", "extra_flags": extra}


def _without_dp_size(flags: list[str]) -> list[str]:
    out, skip = [], False
    for flag in flags:
        if skip:
            skip = False
        elif flag in ("--dp-size", "--data-parallel-size"):
            skip = True
        elif not flag.startswith(("--dp-size=", "--data-parallel-size=")):
            out.append(flag)
    return out


def inventory_dp_attention(inventory: dict) -> int:
    """DP attention's dp size in the inventory's own layout (0: off)."""
    if not inventory.get("enable_dp_attention"):
        return 0
    flags = list(inventory.get("extra_flags") or [])
    for i, flag in enumerate(flags):
        if flag in ("--dp-size", "--data-parallel-size") and i + 1 < len(flags) and flags[i + 1].isdigit():
            return int(flags[i + 1])
        if flag.startswith(("--dp-size=", "--data-parallel-size=")) and flag.split("=", 1)[1].isdigit():
            return int(flag.split("=", 1)[1])
    return int(inventory.get("tp_size") or 1)


def parse_layout(text: str) -> Layout:
    """``tp8``, ``ep8`` (TP 8 too), ``tp4-ep2``, ``tp8-dpa8`` (DP attention, dp size 8; ``dpa``
    alone: dp size = TP), ``pp2``, and a speculative mode: ``nospec``, ``ddtree``, ``dflash``,
    ``eagle3``, ``ddtree+dflash``. Parts are joined with ``-``; what a layout leaves out is
    the inventory's."""
    values: dict = {}
    for part in text.strip().lower().split("-"):
        m = _PART.match(part)
        if part in SPECULATIVE_WORDS:
            key, value = "speculative", SPECULATIVE_WORDS[part]
        elif m and (m.group(2) or m.group(1) == "dpa"):
            key = {"tp": "tp", "ep": "ep", "pp": "pp", "dpa": "dp_attention"}[m.group(1)]
            value = int(m.group(2)) if m.group(2) else -1
            if value == 0:
                raise BenchError(f"layout {text!r}: {part} must be at least 1")
        else:
            raise BenchError(f"layout {text!r}: {part!r} is not tpN, epN, ppN, dpa[N] or one of "
                             f"{', '.join(SPECULATIVE_WORDS)}")
        if key in values:
            raise BenchError(f"layout {text!r} sets {key} twice")
        values[key] = value
    if values.get("dp_attention") == -1:
        values["dp_attention"] = values.get("tp") or values.get("ep") or -1
    layout = Layout(name=text.strip().lower(), **values)
    if layout.tp and layout.ep and layout.tp % layout.ep:
        raise BenchError(f"layout {text!r}: tp {layout.tp} must be a multiple of ep {layout.ep}")
    return layout


def parse_layouts(text: str) -> list[Layout]:
    names = [n for n in (p.strip() for p in text.split(",")) if n]
    if not names:
        raise BenchError("--layouts needs at least one layout, e.g. tp8,ep8,tp4-ep2")
    if len(set(names)) != len(names):
        raise BenchError(f"--layouts names a layout twice: {text}")
    return [parse_layout(n) for n in names]


def inventory_layout(inventory: dict) -> Layout:
    """The inventory's own layout, named like the ones given on the command line."""
    dp = inventory_dp_attention(inventory)
    tp, ep, pp = inventory.get("tp_size") or 1, inventory.get("ep_size") or 1, inventory.get("pp_size") or 1
    parts = [f"tp{tp}"] + ([f"ep{ep}"] if ep > 1 else []) + ([f"pp{pp}"] if pp > 1 else []) \
        + ([f"dpa{dp}"] if dp else [])
    spec = inventory.get("speculative") or "none"
    parts.append({v: k for k, v in SPECULATIVE_WORDS.items()}.get(spec, spec))
    return Layout(name="-".join(parts), tp=tp, ep=ep, pp=pp, dp_attention=dp, speculative=spec)


# ---------------------------------------------------------------------------------------
# The load generators' command lines
# ---------------------------------------------------------------------------------------

BENCH_SERVING_MODULE = "sglang.bench_serving"
AIPERF_API_KEY_REFERENCE = "${OPENAI_API_KEY}"  # aiperf substitutes it from its environment


def bench_serving_argv(python: str, *, base_url: str, model: str, tokenizer: str, workload: Workload,
                       concurrency: int, output_file: str) -> list[str]:
    """``python -m sglang.bench_serving`` for one run: random prompts of exactly the workload's
    lengths, OpenAI chat (the route users call), one JSON line appended to ``output_file``.

    + python: the node venv's interpreter
    + tokenizer: the model directory (its own tokenizer)
    """
    rate = "inf" if math.isinf(workload.request_rate) else repr(workload.request_rate)
    return [python, "-m", BENCH_SERVING_MODULE, "--backend", "sglang-oai-chat", "--base-url", base_url,
            "--model", model, "--tokenizer", tokenizer, "--dataset-name", "random",
            "--random-input-len", str(workload.input_len), "--random-output-len", str(workload.output_len),
            "--random-range-ratio", "1.0", "--num-prompts", str(workload.requests(concurrency)),
            "--max-concurrency", str(concurrency), "--request-rate", rate, "--seed", str(SEED),
            "--warmup-requests", "1", "--disable-tqdm", "--output-file", output_file]


def aiperf_config(*, url: str, model: str, tokenizer: str, workload: Workload, concurrency: int,
                  artifact_dir: str, with_api_key: bool, trust_remote_code: bool = False) -> dict:
    """aiperf's run config (its YAML; JSON is YAML) for one run. The API key is a reference
    to ``OPENAI_API_KEY`` that aiperf resolves itself: the key is in no file and no argv.

    + url: the endpoint's base URL as the controller reaches it (the forwarded port)
    + tokenizer: a Hub id or a local directory (prompt generation; counts come from the server)
    """
    endpoint = {"url": url, "type": "chat", "streaming": True, "use_server_token_count": True,
                "extra": {"ignore_eos": True}}
    if with_api_key:
        endpoint["api_key"] = AIPERF_API_KEY_REFERENCE
    phase = {"type": "concurrency", "concurrency": concurrency, "requests": workload.requests(concurrency)}
    if not math.isinf(workload.request_rate):
        phase = {**phase, "type": "poisson", "rate": workload.request_rate}
    return {"schemaVersion": "2.0", "randomSeed": SEED, "benchmark": {
        "model": model, "endpoint": endpoint,
        "tokenizer": {"name": tokenizer, "trust_remote_code": trust_remote_code},
        "dataset": {"type": "synthetic", "entries": workload.requests(concurrency),
                    "prompts": {"isl": workload.input_len, "osl": workload.output_len}},
        "phases": phase, "artifacts": {"dir": artifact_dir}}}


def aiperf_argv(aiperf: str, config_path: str) -> list[str]:
    return [aiperf, "profile", "--config", config_path, "--ui-type", "none"]


def command_text(argv: list[str]) -> str:
    """The command as a shell line, for the record (it holds no secret: the key is in the
    environment)."""
    return shlex.join(argv)


def _byte_symbols() -> list[str]:
    """Byte-level BPE's printable stand-in for each byte 0..255 (bytes that print as
    themselves keep their character; the rest move to code points from 256 up)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    symbols, extra = {}, 0
    for b in range(256):
        if b in printable:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def byte_tokenizer_files() -> dict[str, str]:
    """A tokenizer that needs no network: one token per byte (byte-level BPE, no merges), in
    the Hugging Face ``tokenizers`` format. Prompts are then ``input_len`` bytes, about a
    quarter of that in a real model's tokens: the record holds the server's own count."""
    vocab = {symbol: i for i, symbol in enumerate(sorted(_byte_symbols()))}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                 "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
                 "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                           "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                           "ignore_merges": False, "vocab": vocab, "merges": []}}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 10**7}
    return {"tokenizer.json": json.dumps(tokenizer), "tokenizer_config.json": json.dumps(config)}


# ---------------------------------------------------------------------------------------
# Results -> metrics
# ---------------------------------------------------------------------------------------


@dataclass
class Metrics:
    """One run's measurements, whichever client made them (ms, tokens/s)."""

    requests: int
    completed: int
    duration_s: float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    mean_input_len: float | None = None
    mean_output_len: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p99_ms: float | None = None
    accept_length: float | None = None
    error: str | None = None

    @property
    def errors(self) -> int:
        return max(0, self.requests - self.completed)


def _num(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def parse_bench_serving(text: str, requests: int) -> Metrics:
    """The last JSON line ``bench_serving --output-file`` appended (its keys: ``completed``,
    ``output_throughput``, ``median_ttft_ms``/``p99_ttft_ms``, the same for ``itl``/``tpot``,
    ``accept_length`` read from the server's ``/get_server_info``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return Metrics(requests=requests, completed=0, error="bench_serving wrote no result line")
    try:
        row = json.loads(lines[-1])
    except ValueError:
        return Metrics(requests=requests, completed=0, error="bench_serving's result line is not JSON")
    completed = int(row.get("completed") or 0)
    return Metrics(
        requests=requests, completed=completed, duration_s=_num(row.get("duration")),
        request_throughput=_num(row.get("request_throughput")), output_throughput=_num(row.get("output_throughput")),
        mean_input_len=_num(row["total_input_tokens"] / completed) if completed and "total_input_tokens" in row else None,
        mean_output_len=_num(row["total_output_tokens"] / completed) if completed and "total_output_tokens" in row else None,
        ttft_p50_ms=_num(row.get("median_ttft_ms")), ttft_p99_ms=_num(row.get("p99_ttft_ms")),
        itl_p50_ms=_num(row.get("median_itl_ms")), itl_p99_ms=_num(row.get("p99_itl_ms")),
        tpot_p50_ms=_num(row.get("median_tpot_ms")), tpot_p99_ms=_num(row.get("p99_tpot_ms")),
        accept_length=_num(row.get("accept_length")))


def _stat(export: dict, metric: str, stat: str) -> float | None:
    value = export.get(metric)
    return _num(value.get(stat)) if isinstance(value, dict) else None


def parse_aiperf(export: dict, requests: int) -> Metrics:
    """aiperf's ``profile_export_aiperf.json``. Its names differ from SGLang's:
    ``inter_chunk_latency`` is the gap between streamed chunks (SGLang's ITL),
    ``inter_token_latency`` is (latency - TTFT) / (tokens - 1) (SGLang's TPOT)."""
    completed = _stat(export, "completed_request_count", "avg")
    if completed is None:
        errors = _stat(export, "error_request_count", "avg") or 0
        completed = max(0.0, (_stat(export, "request_count", "avg") or 0) - errors)
    error = "; ".join(str(e.get("error_details", e)) if isinstance(e, dict) else str(e)
                      for e in export.get("error_summary") or []) or None
    return Metrics(
        requests=requests, completed=int(completed), duration_s=_stat(export, "benchmark_duration", "avg"),
        request_throughput=_stat(export, "request_throughput", "avg"),
        output_throughput=_stat(export, "output_token_throughput", "avg"),
        mean_input_len=_stat(export, "input_sequence_length", "avg"),
        mean_output_len=_stat(export, "output_sequence_length", "avg"),
        ttft_p50_ms=_stat(export, "time_to_first_token", "p50"), ttft_p99_ms=_stat(export, "time_to_first_token", "p99"),
        itl_p50_ms=_stat(export, "inter_chunk_latency", "p50"), itl_p99_ms=_stat(export, "inter_chunk_latency", "p99"),
        tpot_p50_ms=_stat(export, "inter_token_latency", "p50"), tpot_p99_ms=_stat(export, "inter_token_latency", "p99"),
        error=error)


def accept_length_from_server_info(info) -> float | None:
    """SGLang's ``/server_info``: ``internal_states[0].avg_spec_accept_length`` (under
    ``decode[0]`` on a disaggregated server); None without speculative decoding."""
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states") if isinstance(info, dict) else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    return _num(states[0].get("avg_spec_accept_length"))


def gpus_from_nvidia_smi(text: str) -> tuple[str | None, int]:
    """``nvidia-smi --query-gpu=name,... --format=csv,noheader`` -> (model, count); several
    models are joined with " + "."""
    names = [line.split(",")[0].strip() for line in text.splitlines() if line.strip()]
    models = sorted(set(names), key=names.index)
    return (" + ".join(models) if models else None), len(names)


# ---------------------------------------------------------------------------------------
# Records: one JSON line per run
# ---------------------------------------------------------------------------------------

# Every record has every key, in this order (null where a run could not measure it).
RECORD_FIELDS = (
    "version", "time", "host", "gpu_model", "gpu_count", "sglang_version",
    "layout", "tp", "ep", "pp", "dp_attention", "dp_size", "gpus_used", "speculative", "speculative_draft",
    "workload", "input_len", "output_len", "concurrency", "request_rate", "requests",
    "completed", "errors", "status", "duration_s", "request_throughput", "mean_input_len", "mean_output_len",
    "output_tok_s", "tok_s_per_gpu", "tok_s_per_user",
    "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
    "accept_length", "client", "client_ran_on", "command", "error",
)


@dataclass
class Target:
    """What a record says about the node and the layout it served with."""

    host: str
    gpu_model: str | None
    gpu_count: int
    sglang_version: str | None
    layout: Layout
    settings: dict  # Layout.settings(inventory)
    speculative_draft: str | None = None


def _round(value: float | None, places: int = 3) -> float | None:
    return None if value is None else round(value, places)


def _base_record(target: Target, when: str) -> dict:
    s = target.settings
    return {
        "version": RECORD_VERSION, "time": when, "host": target.host, "gpu_model": target.gpu_model,
        "gpu_count": target.gpu_count, "sglang_version": target.sglang_version, "layout": target.layout.name,
        "tp": s["tp_size"], "ep": s["ep_size"], "pp": s["pp_size"], "dp_attention": s["enable_dp_attention"],
        "dp_size": s["dp_size"], "gpus_used": s["tp_size"] * s["pp_size"], "speculative": s["speculative"],
        "speculative_draft": target.speculative_draft if s["speculative"] != "none" else None,
    }


def build_record(target: Target, workload: Workload, concurrency: int, metrics: Metrics, *, when: str,
                 client: str, ran_on: str, command: str) -> dict:
    """One run's record. Throughput per GPU counts the GPUs the layout uses (TP x PP); per
    user it is the decode speed one request sees, 1000 / median TPOT."""
    record = dict.fromkeys(RECORD_FIELDS)
    record.update(_base_record(target, when))
    out = metrics.output_throughput
    tpot = metrics.tpot_p50_ms
    per_user = 1000.0 / tpot if tpot else (out / concurrency if out is not None and metrics.completed else None)
    if metrics.completed == 0:
        status = "failed"
    else:
        status = "errors" if metrics.errors else "ok"
    record.update({
        "workload": workload.name, "input_len": workload.input_len, "output_len": workload.output_len,
        "concurrency": concurrency, "request_rate": "inf" if math.isinf(workload.request_rate) else workload.request_rate,
        "requests": metrics.requests, "completed": metrics.completed, "errors": metrics.errors, "status": status,
        "duration_s": _round(metrics.duration_s), "request_throughput": _round(metrics.request_throughput),
        "mean_input_len": _round(metrics.mean_input_len, 1), "mean_output_len": _round(metrics.mean_output_len, 1),
        "output_tok_s": _round(out, 2), "tok_s_per_gpu": _round(out / record["gpus_used"], 2) if out is not None else None,
        "tok_s_per_user": _round(per_user, 2),
        "ttft_p50_ms": _round(metrics.ttft_p50_ms), "ttft_p99_ms": _round(metrics.ttft_p99_ms),
        "itl_p50_ms": _round(metrics.itl_p50_ms), "itl_p99_ms": _round(metrics.itl_p99_ms),
        "tpot_p50_ms": _round(metrics.tpot_p50_ms), "tpot_p99_ms": _round(metrics.tpot_p99_ms),
        "accept_length": _round(metrics.accept_length), "client": client, "client_ran_on": ran_on,
        "command": command, "error": metrics.error,
    })
    return record


def layout_failed_record(target: Target, *, when: str, command: str, error: str) -> dict:
    """A layout that did not start: its diagnosis, no measurements."""
    record = dict.fromkeys(RECORD_FIELDS)
    record.update(_base_record(target, when))
    record.update({"status": "layout_failed", "command": command, "error": error})
    return record


def exit_status(records: list[dict], restored: bool, interrupted: bool) -> int:
    """130 when interrupted; 1 when the inventory's layout was not restored, a layout failed
    to start or a run completed no request (each record says why); else 0. A run with some
    errored requests is a measurement (its ``errors`` field counts them), not a failure."""
    if interrupted:
        return 130
    if not restored or any(r.get("status") in ("layout_failed", "failed") for r in records):
        return 1
    return 0


def record_line(record: dict) -> str:
    return json.dumps({key: record.get(key) for key in RECORD_FIELDS}, separators=(", ", ": "))


# ---------------------------------------------------------------------------------------
# Comparing layouts
# ---------------------------------------------------------------------------------------


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both axes (higher is better on both),
    ordered by the first axis."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((ox >= x and oy >= y) and (ox > x or oy > y) for ox, oy in points)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def plottable(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("tok_s_per_gpu") is not None and r.get("tok_s_per_user") is not None]


def table_rows(records: list[dict]) -> tuple[list[str], list[tuple[str, int, dict]]]:
    """Layouts in sweep order, and per (workload, concurrency) the record of each layout."""
    layouts: list[str] = []
    rows: dict[tuple[str, int], dict] = {}
    for r in records:
        if r["layout"] not in layouts:
            layouts.append(r["layout"])
        if r["status"] == "layout_failed":
            continue
        rows.setdefault((r["workload"], r["concurrency"]), {})[r["layout"]] = r
    return layouts, [(w, c, by_layout) for (w, c), by_layout in rows.items()]


def cell_text(record: dict | None, failed: bool) -> str:
    if failed:
        return "did not start"
    if record is None:
        return "-"
    if record["status"] == "failed":
        return f"failed: {record['errors']} errors"

    def fmt(value, unit=""):
        return "-" if value is None else f"{value:,.1f}{unit}"

    lines = [f"{fmt(record['tok_s_per_gpu'])} tok/s/GPU", f"{fmt(record['tok_s_per_user'])} tok/s/user",
             f"TTFT {fmt(record['ttft_p50_ms'], ' ms')}"]
    if record.get("accept_length") is not None:
        lines.append(f"accept {record['accept_length']:.2f}")
    if record["errors"]:
        lines.append(f"{record['errors']} errors")
    return "\n".join(lines)
