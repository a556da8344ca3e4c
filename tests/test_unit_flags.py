"""Server flags: validation of inventory settings, spellings per SGLang version, and the
installed server's --help (the lab stand-in's real output, and a 0.5.23-style excerpt)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from noderig.errors import NoderigError
from noderig.flags import (VERSION_PROFILES, OptionSpec, ServerFlags, check_argv, parse_help, parse_version,
                           select_profile, spell)
from noderig.server_settings import SPECULATIVE_MODES, ServerSettings, validate
from noderig.unit import check_against_server, server_argv, server_flags
from noderig_lab import STANDIN_SOURCE as STANDIN

STANDIN_VERSION = "0.5.9.post2+ddtree.standin"


def settings_for(**kw) -> ServerSettings:
    base = dict(venv="/opt/sglang/venv", model_dir="/models/Kimi-K2.6", served_model_name="kimi-k2.6",
                draft_dir="/models/Kimi-K2.6-DFlash", attention_backend="flashinfer")
    return ServerSettings(**{**base, **kw})


def mode_settings(mode: str, **kw) -> ServerSettings:
    if mode == "none":
        kw.setdefault("draft_dir", None)
    if mode == "ddtree":
        kw.setdefault("ddtree_budget", 32)
    return settings_for(speculative=mode, **kw)


@pytest.fixture(scope="module")
def standin_help() -> str:
    """The stand-in's real --help, as the deploy would ask the node's venv."""
    out = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--help"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(STANDIN), "COLUMNS": "80"}, timeout=30, check=True)
    return out.stdout


@pytest.fixture(scope="module")
def standin_flags(standin_help) -> ServerFlags:
    return parse_help(standin_help, venv="/opt/sglang/venv", version=STANDIN_VERSION)


# A hand-written excerpt in the shape of sglang 0.5.23's --help (argument groups, switches with
# --no- forms, the CUDA-graph flags that replaced --cuda-graph-max-bs, long choice lists), plus
# two lines wrapped the way a custom formatter might wrap them, and aliases the way Python
# >= 3.13's argparse prints them (the metavar once, after the last alias). Flag names from
# reference/domain-facts.md section 2.2; not a verbatim copy of real output.
HELP_0_5_23 = """\
usage: launch_server.py [-h] --model-path MODEL_PATH [--trust-remote-code]
                        [--host HOST] [--port PORT] [--skip-server-warmup]
                        [--cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE]
                        [--cuda-graph-max-bs-prefill CUDA_GRAPH_MAX_BS_PREFILL]

options:
  -h, --help            show this help message and exit

Model and tokenizer:
  --model-path MODEL_PATH, --model MODEL_PATH
                        The path of the model weights. This can be a local
                        folder or a Hugging Face repo ID.
  --trust-remote-code, --no-trust-remote-code
                        Whether or not to allow for custom models defined on
                        the Hub in their own modeling files. (default: False)
  --context-length CONTEXT_LENGTH
                        The model's maximum context length. Accepts human-
                        readable ints (e.g. 128k).

HTTP server:
  --host HOST           The host of the HTTP server. (default: 127.0.0.1)
  --port PORT           The port of the HTTP server. (default: 30000)
  --skip-server-warmup, --no-skip-server-warmup
                        If set, skip warmup. (default: False)
  --api-key API_KEY     Set API key of the server. It is also used in the
                        OpenAI API compatible server.
  --served-model-name SERVED_MODEL_NAME
                        Override the model name returned by the v1/models
                        endpoint in OpenAI API server.

Parallelism:
  --tp-size, --tensor-parallel-size TP_SIZE
                        The tensor parallelism size.
  --ep-size, --expert-parallel-size, --ep EP_SIZE
                        The expert parallelism size.
  --nnodes NNODES       The number of nodes.
  --node-rank NODE_RANK
                        The node rank.
  --dist-init-addr DIST_INIT_ADDR, --nccl-init-addr DIST_INIT_ADDR
                        The host address for initializing distributed backend
                        (e.g., `192.168.0.2:25000`).

Memory and scheduling:
  --mem-fraction-static MEM_FRACTION_STATIC
                        The fraction of the memory used for static allocation.
  --page-size PAGE_SIZE
                        The number of tokens in a page.
  --disable-overlap-schedule, --no-disable-overlap-schedule
                        Disable the overlap scheduler.

Kernel backends:
  --attention-backend {triton,torch_native,flex_attention,nsa,dsa,qsa,dsv4,
                       cutlass_mla,cutedsl_mla,fa3,fa4,flashinfer,flashmla,trtllm_mla,
                       trtllm_mha,tokenspeed_mla,hpc_ops,aiter,wave,intel_amx,ascend}
                        Choose the kernels for attention layers.
  --mm-attention-backend {sdpa,fa3,fa4,triton_attn,ascend_attn,aiter_attn,flashinfer_cudnn,amx_attn,xpu_attn}
                        Set multimodal attention backend.
  --reasoning-parser {auto,deepseek-r1,deepseek-v3,glm45,gpt-oss,kimi,kimi_k2,qwen3,qwen3-thinking,minimax,step3}
                        Specify the parser for reasoning models.
  --tool-call-parser {auto,deepseekv3,deepseekv31,glm,glm45,gpt-oss,kimi_k2,llama3,mistral,pythonic,qwen,qwen25}
                        Specify the parser for handling tool-call
                        interactions.

CUDA graph:
  --cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE
                        Maximum batch size captured for decode. Replaces
                        --cuda-graph-max-bs.
  --cuda-graph-max-bs-prefill CUDA_GRAPH_MAX_BS_PREFILL
                        Maximum batch size captured for prefill.
  --cuda-graph-bs-decode CUDA_GRAPH_BS_DECODE [CUDA_GRAPH_BS_DECODE ...]
                        The batch sizes captured for decode.
  --cuda-graph-backend-decode {full,piecewise,disabled}
                        CUDA graph backend for decode.
  --cuda-graph-backend-prefill {full,piecewise,disabled}
                        CUDA graph backend for prefill.
  --disable-cuda-graph  (deprecated) use --cuda-graph-backend-decode=disabled
                        --cuda-graph-backend-prefill=disabled instead.
  --cuda-graph-config CUDA_GRAPH_CONFIG
                        JSON configuration of CUDA graph capture.

Speculative decoding:
  --speculative-algorithm SPECULATIVE_ALGORITHM
                        Speculative algorithm. Builtins: EAGLE, EAGLE3, NEXTN,
                        STANDALONE, NGRAM, DFLASH, DSPARK, UNO. Or any name
                        registered via `SpeculativeAlgorithm.register`.
  --speculative-draft-model-path SPECULATIVE_DRAFT_MODEL_PATH,
      --speculative-draft-model SPECULATIVE_DRAFT_MODEL_PATH
                        The path of the draft model weights.
  --speculative-num-steps SPECULATIVE_NUM_STEPS
                        The number of steps sampled from draft model.
  --speculative-eagle-topk SPECULATIVE_EAGLE_TOPK
                        The number of tokens sampled per step.
  --speculative-num-draft-tokens SPECULATIVE_NUM_DRAFT_TOKENS
                        The number of draft tokens.
  --speculative-dflash-block-size SPECULATIVE_DFLASH_BLOCK_SIZE
                        DFLASH only. Block size (verify window length). Alias
                        of --speculative-num-draft-tokens for DFLASH.
  --speculative-draft-attention-backend {flashinfer,fa3,fa4,triton,trtllm_mha}
                        Attention backend for the speculative draft model.
"""


@pytest.fixture(scope="module")
def flags_0_5_23() -> ServerFlags:
    return parse_help(HELP_0_5_23, venv="/opt/sglang/venv", version="0.5.23")


# --- spellings per mode ------------------------------------------------------------------


def test_ddtree_pr_spelling_with_budget_page_size_one_and_overlap_off():
    argv = server_flags(settings_for(speculative="ddtree", ddtree_budget=32))
    joined = " ".join(argv)
    assert "--speculative-algorithm DDTREE --speculative-draft-model-path /models/Kimi-K2.6-DFlash" in joined
    assert "--speculative-ddtree-budget 32" in joined and "--page-size 1" in joined
    assert "--disable-overlap-schedule" in argv and argv[-1] == "--skip-server-warmup"


def test_ddtree_fork_spelling_is_a_flag_on_dflash():
    argv = server_flags(settings_for(speculative="ddtree-dflash"))
    joined = " ".join(argv)
    assert "--speculative-algorithm DFLASH" in joined and "--speculative-dflash-enable-ddtree" in argv
    assert "--page-size 1" in joined and "--disable-overlap-schedule" in argv


def test_mainline_modes_and_none():
    dflash = " ".join(server_flags(settings_for(speculative="dflash", speculative_num_draft_tokens=16)))
    assert "--speculative-algorithm DFLASH" in dflash and "--speculative-num-draft-tokens 16" in dflash
    assert "ddtree" not in dflash and "--disable-overlap-schedule" not in dflash
    eagle = " ".join(server_flags(settings_for(speculative="eagle3")))
    assert ("--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/Kimi-K2.6-DFlash "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4") in eagle
    none = server_flags(settings_for(speculative="none", draft_dir=None))
    assert not any(word.startswith("--speculative") for word in none)


def test_server_argv_runs_the_launcher_with_the_venv_python_and_no_secret():
    argv = server_argv(settings_for())
    assert argv[:2] == ["/opt/sglang/venv/bin/python", "/usr/local/lib/noderig/launch.py"]
    assert argv[2:4] == ["--model-path", "/models/Kimi-K2.6"] and "--api-key" not in argv


def test_multi_node_flags():
    joined = " ".join(server_flags(settings_for(nnodes=2, node_rank=1, dist_init_addr="10.0.0.2:25000")))
    assert "--nnodes 2 --node-rank 1 --dist-init-addr 10.0.0.2:25000" in joined
    assert "--nnodes" not in server_flags(settings_for())


@pytest.mark.parametrize("version, max_bs, disable", [
    ("0.5.9", ["--cuda-graph-max-bs", "64"], ["--disable-cuda-graph"]),
    (STANDIN_VERSION, ["--cuda-graph-max-bs", "64"], ["--disable-cuda-graph"]),
    ("0.5.14", ["--cuda-graph-max-bs", "64"], ["--disable-cuda-graph"]),
    ("0.5.23", ["--cuda-graph-max-bs-decode", "64"],
     ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]),
    ("0.6.1", ["--cuda-graph-max-bs-decode", "64"],
     ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]),
])
def test_version_profile_picks_the_spelling(version, max_bs, disable):
    for s, installed in ((settings_for(sglang_version=version, cuda_graph_max_bs=64, disable_cuda_graph=True), None),
                         (settings_for(cuda_graph_max_bs=64, disable_cuda_graph=True), version)):
        argv = server_flags(s, installed_version=installed)
        i = argv.index(max_bs[0])
        assert argv[i:i + 2] == max_bs
        j = argv.index(disable[0])
        assert argv[j:j + len(disable)] == disable


def test_profile_selection():
    assert parse_version("0.5.9.post2+ddtree.standin") == (0, 5, 9)
    assert select_profile(None) == "0.5.9" and select_profile("0.5.22") == "0.5.9"
    assert select_profile("0.5.23rc1") == "0.5.23"
    with pytest.raises(NoderigError, match="older than 0.5.9"):
        select_profile("0.4.10")
    assert any("sglang_version" in p and "not an SGLang version" in p
               for p in validate(settings_for(sglang_version="latest")))
    # The inventory's version wins over the installed one.
    assert "--cuda-graph-max-bs-decode" in server_flags(settings_for(sglang_version="0.5.23", cuda_graph_max_bs=8),
                                                        installed_version="0.5.9")


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [None, "trtllm_mla", "flashmla", "cutlass_mla"])
@pytest.mark.parametrize("mode", ["ddtree", "ddtree-dflash"])
def test_ddtree_refuses_attention_backends_that_force_larger_pages(mode, backend):
    with pytest.raises(NoderigError, match="flashinfer or triton"):
        server_flags(settings_for(speculative=mode, attention_backend=backend))


@pytest.mark.parametrize("field, value, message", [
    ("page_size", 16, "needs page_size 1, the inventory has page_size=16"),
    ("enable_dp_attention", True, "does not support DP attention"),
    ("pp_size", 2, "needs pp_size 1"),
    ("speculative_use_rejection_sampling", True, "does not support rejection sampling"),
    ("disable_overlap_schedule", False, "overlap scheduler disabled"),
    ("draft_attention_backend", "trtllm_mla", "draft_attention_backend='trtllm_mla' does not allow"),
    ("speculative_eagle_topk", 4, "forces speculative_eagle_topk to 1"),
    ("draft_dir", None, "needs draft_dir"),
])
def test_ddtree_constraints_are_enforced_before_render(field, value, message):
    problems = validate(settings_for(speculative="ddtree", **{field: value}))
    assert any(message in p for p in problems), problems
    with pytest.raises(NoderigError, match=message.split(",")[0].replace("(", r"\(").replace(")", r"\)")):
        server_flags(settings_for(speculative="ddtree", **{field: value}))


def test_ddtree_budget_belongs_to_the_pr_spelling_only():
    assert any("only speculative=ddtree" in p for p in validate(settings_for(speculative="eagle3", ddtree_budget=8)))
    assert validate(settings_for(speculative="ddtree", ddtree_budget=8)) == []


@pytest.mark.parametrize("field, value, inventory_key", [
    ("served_model_name", "kimi; rm -rf /", "served_model_name"), ("model_dir", "relative/path", "model_dir"),
    ("port", 70000, "server_port"), ("port", True, "server_port"), ("tp_size", "8", "tp_size"),
    ("tp_size", 6, "tp_size"), ("tp_size", 128, "tp_size"), ("ep_size", 3, "ep_size"),
    ("speculative", "medusa", "speculative"), ("mem_fraction_static", 1.5, "mem_fraction_static"),
    ("mem_fraction_static", 0, "mem_fraction_static"), ("mem_fraction_static", float("nan"), "mem_fraction_static"),
    ("venv", "/opt/my venv", "venv_path"), ("host", "0.0.0.0; reboot", "server_host"),
    ("draft_dir", "/models/../etc", "draft_dir"), ("dist_init_addr", "10.0.0.2", "dist_init_addr"),
    ("dist_init_addr", "10.0.0.2:99999", "dist_init_addr"), ("nnodes", 0, "nnodes"),
    ("trust_remote_code", "yes", "trust_remote_code"), ("start_timeout", 0, "start_timeout"),
    ("restart", "always-please", "restart"), ("service_name", "sglang@x", "service_name"),
    ("extra_flags", ["--x\nExecStartPre=/bin/evil"], "extra_flags[0]"),
    ("extra_flags", "--enable-metrics", "extra_flags"),
    ("extra_flags", ["--api-key", "sk-123"], "extra_flags[0]"), ("extra_flags", ["--api-key=sk"], "extra_flags[0]"),
    ("extra_flags", ["--page-size", "16"], "extra_flags[0]"),
    ("environment", {"HF_TOKEN": "hf_x"}, "server_environment"),
    ("environment", {"A B": "1"}, "server_environment"),
])
def test_bad_inventory_values_get_one_clear_sentence_naming_the_key(field, value, inventory_key):
    problems = validate(settings_for(**{field: value}))
    assert len(problems) == 1, problems
    assert inventory_key in problems[0]
    with pytest.raises(NoderigError, match=inventory_key.replace("[", r"\[").replace("]", r"\]")):
        server_flags(settings_for(**{field: value}))


def test_validate_collects_every_problem_at_once():
    s = settings_for(venv="venv", served_model_name="a b", port=0, tp_size=12, page_size=64,
                     attention_backend="trtllm_mla", nnodes=2, node_rank=2, mem_fraction_static=2,
                     extra_flags=["--api-key", "k"])
    problems = validate(s)
    for needle in ("venv_path=", "served_model_name=", "server_port=", "tp_size=12", "mem_fraction_static=",
                   "needs page_size 1", "attention_backend='trtllm_mla'", "node_rank=2 must be below nnodes=2",
                   "needs dist_init_addr", "extra_flags[0]"):
        assert sum(needle in p for p in problems) == 1, (needle, problems)
    with pytest.raises(NoderigError) as err:
        server_argv(s)
    assert str(err.value).startswith(f"the inventory has {len(problems)} problems:")
    assert all(p in str(err.value) for p in problems)


def test_multi_node_rules():
    assert any("tp_size=8 must be divisible by nnodes=" in p
               for p in validate(settings_for(tp_size=8, nnodes=3, dist_init_addr="head:25000")))
    assert validate(settings_for(nnodes=2, node_rank=1, dist_init_addr="[fd00::2]:25000")) == []
    assert validate(settings_for(nnodes=2, node_rank=1, dist_init_addr="head-0.cluster:25000")) == []


def test_from_inventory_uses_the_inventory_names():
    data = {"venv_path": "/opt/sglang/venv", "model_dir": "/m", "served_model_name": "k", "server_host": "127.0.0.1",
            "server_port": 8000, "server_environment": {"X": "1"}, "draft_dir": "/d", "attention_backend": "triton",
            "extra_flags": ("--enable-metrics",), "mem_fraction_static": None}
    s = ServerSettings.from_inventory(data)
    assert (s.venv, s.host, s.port, s.environment, s.extra_flags) == ("/opt/sglang/venv", "127.0.0.1", 8000,
                                                                       {"X": "1"}, ["--enable-metrics"])
    assert s.tp_size == 8 and validate(s) == []
    assert any("venv_path=None" in p for p in validate(ServerSettings.from_inventory({})))


# --- the installed server's --help ---------------------------------------------------------------


def test_parse_help_reads_the_standin(standin_flags):
    tp = standin_flags.get("--tp-size")
    assert tp is standin_flags.get("--tensor-parallel-size") and tp.takes_value and tp.choices is None
    assert standin_flags.get("--ep").names == ("--expert-parallel-size", "--ep-size", "--ep")
    assert not standin_flags.get("--trust-remote-code").takes_value
    assert "DDTREE" in standin_flags.get("--speculative-algorithm").choices
    assert "kimi_k2" in standin_flags.get("--tool-call-parser").choices
    bs = standin_flags.get("--cuda-graph-bs")
    assert bs.multiple and not bs.value_optional
    assert "--log-level" in standin_flags  # and not confused by help text that starts with "--log-level"
    assert "-h" in standin_flags and "--help" in standin_flags
    # every option of the stand-in's argparse parser is found, with nothing invented
    sys.path.insert(0, str(STANDIN))
    try:
        import argparse

        from sglang.srt.server_args import ServerArgs
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        real = {s for action in parser._actions for s in action.option_strings}
        assert set(standin_flags.options) == real
        for action in parser._actions:
            spec = standin_flags.get(action.option_strings[0])
            assert spec.takes_value == (action.nargs != 0)
            assert spec.choices == (tuple(action.choices) if action.choices else None)
    finally:
        sys.path.remove(str(STANDIN))
        for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
            del sys.modules[name]


def test_serverflags_round_trip_json(standin_flags):
    again = ServerFlags.from_json(standin_flags.to_json())
    assert again.options == standin_flags.options and again.version == STANDIN_VERSION


@pytest.mark.parametrize("mode", [m for m in SPECULATIVE_MODES if m != "ddtree-dflash"])
def test_every_flag_of_the_lab_modes_exists_in_the_standin(standin_flags, mode):
    s = mode_settings(mode, cuda_graph_max_bs=64, disable_cuda_graph=True, mem_fraction_static=0.8,
                      mm_attention_backend="triton_attn", context_length=131072)
    assert check_against_server(s, standin_flags, api_key=True) == []


def test_fork_spelling_is_refused_by_a_server_without_it(standin_flags):
    problems = check_against_server(mode_settings("ddtree-dflash"), standin_flags)
    assert problems == ["--speculative-dflash-enable-ddtree is not a flag of the SGLang installed in /opt/sglang/venv "
                        f"({STANDIN_VERSION}); it was renamed or removed, or this is not the DDTree fork "
                        "(did you mean --speculative-dflash-block-size?)"]


def test_check_argv_catches_a_renamed_flag(flags_0_5_23):
    # The 0.5.9 spelling on a 0.5.23 server: argparse would fail startup with "ambiguous option".
    argv = server_flags(settings_for(speculative="dflash", cuda_graph_max_bs=64), installed_version="0.5.9")
    problems = check_argv(argv, flags_0_5_23)
    assert len(problems) == 1
    assert problems[0].startswith("--cuda-graph-max-bs is not a flag of the SGLang installed in /opt/sglang/venv "
                                  "(0.5.23); it was renamed or removed")
    assert "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill" in problems[0]
    # Rendered for the installed version instead, it passes.
    argv = server_flags(settings_for(speculative="dflash", cuda_graph_max_bs=64, disable_cuda_graph=True),
                        installed_version="0.5.23")
    assert check_argv(argv, flags_0_5_23) == []


def test_0_5_23_mainline_has_no_ddtree(flags_0_5_23):
    problems = check_against_server(settings_for(speculative="ddtree", ddtree_budget=16), flags_0_5_23)
    assert len(problems) == 1 and "--speculative-ddtree-budget is not a flag" in problems[0]
    assert "or this is not the DDTree fork" in problems[0]


def test_parse_help_0_5_23_excerpt(flags_0_5_23):
    f = flags_0_5_23
    assert f.get("--speculative-draft-model").names == ("--speculative-draft-model-path", "--speculative-draft-model")
    assert "cutlass_mla" in f.get("--attention-backend").choices and "ascend" in f.get("--attention-backend").choices
    assert f.get("--no-trust-remote-code") is f.get("--trust-remote-code")
    assert f.get("--ep").names == ("--ep-size", "--expert-parallel-size", "--ep") and f.get("--tp-size").takes_value
    assert f.get("--cuda-graph-backend-prefill").choices == ("full", "piecewise", "disabled")
    assert f.get("--speculative-algorithm").choices is None
    assert "--cuda-graph-backend-prefill=disabled" not in f  # help text, not an option
    assert "--cuda-graph-max-bs" not in f


def test_check_argv_refuses_abbreviations_bad_choices_and_malformed_words(standin_flags):
    problems = check_argv(["--tp", "8", "--attention-backend", "flashinfr", "--trust-remote-code=yes", "--page-size",
                           "--port", "1", "stray", "--tp-size", "2", "--tensor-parallel-size", "4",
                           "--cuda-graph-bs", "1", "2", "4", "--kv-cache-dtype=fp9"], standin_flags)
    assert problems[0].startswith("--tp is not a flag of the SGLang installed in /opt/sglang/venv")
    assert "abbreviation of --tp-size" in problems[0] and "spell out --tp-size" in problems[0]
    assert "--attention-backend 'flashinfr' is not one of the choices" in problems[1]
    assert "--trust-remote-code is a switch" in problems[2]
    assert "--page-size needs a value" in problems[3]
    assert "'stray' is not a flag" in problems[4]
    assert "--tensor-parallel-size is given twice (as --tp-size)" in problems[5]
    assert "--kv-cache-dtype 'fp9' is not one of the choices" in problems[6]
    assert len(problems) == 7
    assert check_argv(["--port", "-1"], standin_flags) == []  # a negative number is a value


def test_parse_help_refuses_text_without_options():
    with pytest.raises(NoderigError, match="listed no options"):
        parse_help("Traceback (most recent call last):\nModuleNotFoundError: No module named 'sglang'\n")


# --- a small hand-written --help: every shape argparse prints, and every message in full -----

SMALL_HELP = """\
usage: launch_server.py [-h] [--port PORT]
                        [--log-level {debug,info,warning}]

options:
  -h, --help            show this help message and exit
  --port PORT           The port.
  --tp-size, --tensor-parallel-size TP_SIZE
                        The tensor parallelism size.
  --log-level {debug,info,
                warning}  Level.
  --opt [OPT]           An optional value (nargs "?").
  --many MANY [MANY ...]
                        Several values (nargs "+").
  --maybe [{x,y} ...]   Zero or more choices (nargs "*").
  --switch              A switch.
"""


@pytest.fixture()
def small() -> ServerFlags:
    return parse_help(SMALL_HELP, venv="/v", version="1.0")


def test_parse_help_small_every_option_shape(small):
    assert sorted(small.options) == ["--help", "--log-level", "--many", "--maybe", "--opt", "--port", "--switch",
                                     "--tensor-parallel-size", "--tp-size", "-h"]
    assert small.get("-h") == OptionSpec(names=("-h", "--help"))
    assert small.get("--tensor-parallel-size") == OptionSpec(names=("--tp-size", "--tensor-parallel-size"),
                                                             metavar="TP_SIZE")
    assert small.get("--log-level") == OptionSpec(names=("--log-level",), metavar="{debug,info,warning}",
                                                  choices=("debug", "info", "warning"))
    assert small.get("--maybe") == OptionSpec(names=("--maybe",), metavar="[{x,y} ...]", choices=("x", "y"))
    shapes = {name: (small.get(name).takes_value, small.get(name).value_optional, small.get(name).multiple)
              for name in ("--port", "--opt", "--many", "--maybe", "--switch")}
    assert shapes == {"--port": (True, False, False), "--opt": (True, True, False), "--many": (True, False, True),
                      "--maybe": (True, True, True), "--switch": (False, False, False)}
    assert small.get("--nope") is None and "--nope" not in small and "--port" in small


def test_serverflags_json_is_stable_and_round_trips(small):
    assert small.to_json() == (
        '{"options": [{"choices": null, "metavar": "", "names": ["-h", "--help"]}, '
        '{"choices": null, "metavar": "PORT", "names": ["--port"]}, '
        '{"choices": null, "metavar": "TP_SIZE", "names": ["--tp-size", "--tensor-parallel-size"]}, '
        '{"choices": ["debug", "info", "warning"], "metavar": "{debug,info,warning}", "names": ["--log-level"]}, '
        '{"choices": null, "metavar": "[OPT]", "names": ["--opt"]}, '
        '{"choices": null, "metavar": "MANY [MANY ...]", "names": ["--many"]}, '
        '{"choices": ["x", "y"], "metavar": "[{x,y} ...]", "names": ["--maybe"]}, '
        '{"choices": null, "metavar": "", "names": ["--switch"]}], "venv": "/v", "version": "1.0"}')
    again = ServerFlags.from_json(small.to_json())
    assert (again.options, again.venv, again.version) == (small.options, "/v", "1.0")
    assert again.get("--tensor-parallel-size") is again.get("--tp-size")
    bare = ServerFlags.from_json('{"options": [{"choices": null, "metavar": "", "names": ["--x"]}]}')
    assert (bare.venv, bare.version, bare.get("--x")) == (None, None, OptionSpec(names=("--x",)))


def test_where_names_the_venv_and_version_it_knows():
    assert ServerFlags(venv="/v", version="1.0").where() == "the SGLang installed in /v (1.0)"
    assert ServerFlags(venv="/v").where() == "the SGLang installed in /v"
    assert ServerFlags(version="1.0").where() == "the installed SGLang (1.0)"
    assert ServerFlags().where() == "the installed SGLang"


def test_prefixed_lists_the_shortest_alias_per_option(small):
    assert small.prefixed("--t") == ["--tp-size"]  # one option, two aliases: the shorter one
    assert small.prefixed("--m") == ["--many", "--maybe"]
    assert small.prefixed("--tensor") == ["--tensor-parallel-size"]
    assert small.prefixed("-h") == [] and small.prefixed("t") == [] and small.prefixed("--zzz") == []
    longest_first = ServerFlags(options={n: OptionSpec(names=("--abcdef", "--abc")) for n in ("--abcdef", "--abc")})
    assert longest_first.prefixed("--ab") == ["--abc"]


def test_check_argv_messages_in_full(small):
    assert check_argv(["--opt", "--switch", "--maybe", "--many", "1", "2", "--log-level=info", "--port=-5"],
                      small) == []
    assert check_argv(["--many"], small) == ["--many needs at least one value (MANY [MANY ...])"]
    assert check_argv(["--port"], small) == ["--port needs a value (PORT)"]
    assert check_argv(["--switch=1"], small) == [
        "--switch is a switch in the SGLang installed in /v (1.0) and takes no value, got '1'"]
    assert check_argv(["--log-level", "loud"], small) == [
        "--log-level 'loud' is not one of the choices of the SGLang installed in /v (1.0): debug, info, warning"]
    assert check_argv(["--maybe", "x", "z"], small) == [
        "--maybe 'z' is not one of the choices of the SGLang installed in /v (1.0): x, y"]
    assert check_argv(["--port", "1", "--port", "2"], small) == [
        "--port is given twice; argparse keeps only the last one"]
    assert check_argv(["--", "1"], small) == [
        "'--' is not a flag and the SGLang installed in /v (1.0) takes no positional arguments",
        "'1' is not a flag and the SGLang installed in /v (1.0) takes no positional arguments"]
    assert check_argv(["-"], small) == [
        "'-' is not a flag and the SGLang installed in /v (1.0) takes no positional arguments"]
    # an unknown flag's values are not reported again as stray words; an inline value has none
    assert check_argv(["--nope", "a", "b", "--port", "1"], small) == [
        "--nope is not a flag of the SGLang installed in /v (1.0); it was renamed or removed"]
    assert check_argv(["--nope=a", "b"], small) == [
        "--nope is not a flag of the SGLang installed in /v (1.0); it was renamed or removed",
        "'b' is not a flag and the SGLang installed in /v (1.0) takes no positional arguments"]
    # a single-dash word is looked up whole, "=" and all
    assert check_argv(["-h=1"], small)[0].startswith("-h=1 is not a flag")


@pytest.mark.parametrize("word, is_option", [("-1", False), ("-1.5", False), ("-1e-3", False), ("-.5", False),
                                              ("-2E+4", False), ("-", False), ("--1x", True), ("-h", True),
                                              ("--port", True), ("port", False), ("-1x", True)])
def test_negative_numbers_are_values_and_dashed_words_are_flags(small, word, is_option):
    problems = check_argv(["--port", word], small)
    assert (problems != []) == is_option


def test_unknown_flag_messages_in_full(small):
    where = "the SGLang installed in /v (1.0)"
    assert check_argv(["--tp", "8"], small) == [
        f"--tp is not a flag of {where}: argparse would take it as an abbreviation of --tp-size, which noderig "
        "does not allow; spell out --tp-size"]
    assert check_argv(["--ma"], small) == [
        f"--ma is not a flag of {where}; it was renamed or removed (argparse would call it ambiguous: it could "
        "match --many, --maybe)"]
    assert check_argv(["--swich"], small) == [
        f"--swich is not a flag of {where}; it was renamed or removed (did you mean --switch?)"]
    assert check_argv(["--speculative-DDTree-x"], small) == [
        f"--speculative-DDTree-x is not a flag of {where}; it was renamed or removed, or this is not the DDTree fork"]
    # close matches are long flags only, at most three, most similar first
    many = ServerFlags(options={n: OptionSpec(names=(n,)) for n in
                                ("--abcdxyz", "--abcdxy", "--abxde", "--abcd", "-abcde", "--abcxyz")})
    assert check_argv(["--abcde"], many) == [
        "--abcde is not a flag of the installed SGLang; it was renamed or removed "
        "(did you mean --abcd or --abxde or --abcdxy?)"]
    # below the 0.75 similarity cutoff: no suggestion
    assert check_argv(["--pxyz"], small) == [
        f"--pxyz is not a flag of {where}; it was renamed or removed"]


def test_parse_version_and_profiles_in_full():
    assert parse_version("0.5.9.post2+ddtree") == (0, 5, 9)
    assert parse_version("  v0.5") == (0, 5, 0)
    assert parse_version("1.12.30") == (1, 12, 30)
    for bad in ("", None, "sglang 0.5.9", "0"):
        with pytest.raises(NoderigError) as err:
            parse_version(bad)
        assert str(err.value) == f"{bad!r} is not an SGLang version (expected something like 0.5.9)"
    assert select_profile(None) == "0.5.9" and select_profile("0.5.9") == "0.5.9"
    assert select_profile("0.5.22.post3") == "0.5.9" and select_profile("0.5.23") == "0.5.23"
    assert select_profile("1.0") == "0.5.23"
    with pytest.raises(NoderigError) as err:
        select_profile("0.5.8")
    assert str(err.value) == "SGLang 0.5.8 is older than 0.5.9, the oldest release noderig knows the flags of"


def test_spell_fills_the_value_and_refuses_an_option_a_release_lacks(monkeypatch):
    assert spell("0.5.9", "port", 8000) == ["--port", "8000"]
    assert spell("0.5.9", "trust_remote_code") == ["--trust-remote-code"]
    assert spell("0.5.23", "cuda_graph_max_bs", 64) == ["--cuda-graph-max-bs-decode", "64"]
    assert spell("0.5.23", "disable_cuda_graph") == ["--cuda-graph-backend-decode", "disabled",
                                                     "--cuda-graph-backend-prefill", "disabled"]
    assert spell("0.5.9", "disable_cuda_graph") == ["--disable-cuda-graph"]
    monkeypatch.setitem(VERSION_PROFILES, "9.9", {"page_size": None})
    with pytest.raises(NoderigError) as err:
        spell("9.9", "page_size", 1)
    assert str(err.value) == "page_size has no flag in SGLang 9.9"


def test_parse_help_skips_warnings_before_usage_and_help_lines_that_look_like_flags():
    text = ("WARNING: something imported late\n"
            "  --ghost GHOST  not an option: before the usage block\n"
            "Usage: x [--real REAL]\n"
            "       [--also-usage]\n"
            "\n"
            "options:\n"
            "  --real REAL  Real.\n"
            "                 --fake-in-help is help text\n"
            "  --flag-a, --flag-b  Two names, a switch.\n"
            "  not-an-option line\n"
            "  --bad word, x  an invocation with a non-option word is skipped\n"
            "  --wrapped-list {a,b,\n"
            "    c}  choices wrapped mid-list\n"
            "  --wrapped-names,\n"
            "    --wrapped-alias W  names wrapped after a comma\n")
    f = parse_help(text)
    assert sorted(f.options) == ["--flag-a", "--flag-b", "--real", "--wrapped-alias", "--wrapped-list",
                                 "--wrapped-names"]
    assert f.get("--flag-b") == OptionSpec(names=("--flag-a", "--flag-b"))
    assert f.get("--wrapped-list").choices == ("a", "b", "c")
    assert f.get("--wrapped-alias") == OptionSpec(names=("--wrapped-names", "--wrapped-alias"), metavar="W")
    with pytest.raises(NoderigError) as err:
        parse_help("usage: x\n\noptions:\n  -v  verbose\n")
    assert str(err.value) == "the server's --help listed no options: is this SGLang's launch_server?"


def test_prefixed_keeps_the_first_listed_alias_on_a_tie():
    spec = OptionSpec(names=("--abx", "--aby"))
    assert ServerFlags(options={"--abx": spec, "--aby": spec}).prefixed("--ab") == ["--abx"]


def test_parse_help_odd_shapes():
    # commas followed by a space inside {choices} and [brackets] stay inside the invocation
    f = parse_help("options:\n  --x {a, b}, --y {a, b}  Two names.\n  --m [{a, b}, {c, d}]  Nested.\n")
    assert f.get("--y") == OptionSpec(names=("--x", "--y"), metavar="{a, b}", choices=("a", "b"))
    assert f.get("--m").names == ("--m",) and f.get("--m").metavar == "[{a, b}, {c, d}]"
    # no usage block at all: the first line is an option
    assert sorted(parse_help("  --port PORT  The port.\n").options) == ["--port"]
    # a one-line usage block, then options with no heading
    assert sorted(parse_help("usage: x [--a A]\n\n  --a A  help\n").options) == ["--a"]
    # a usage block that runs to the end of the text: nothing after it
    with pytest.raises(NoderigError, match="listed no options"):
        parse_help("  --a A  help\nusage: x [--a A]")
    # an invocation cut off inside {choices} at the end of the text
    f = parse_help("options:\n  --p P  p\n  --x {a,b")
    assert f.get("--x") == OptionSpec(names=("--x",), metavar="{a,b", choices=None)


def test_a_single_dash_switch_is_not_given_a_value(small):
    assert check_argv(["-h"], small) == []
