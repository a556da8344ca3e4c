"""Crash diagnosis (noderig.diagnose): normalisation, tracebacks, root cause, catalog, report, CLI.

The fixtures under tests/fixtures/crashlogs/<class id>/ are real public crash logs (each names its source issue) plus
real runs of the lab's stand-in server; each must be diagnosed as its directory's class.
tests/fixtures/crashlogs_heldout/ .. crashlogs_heldout26/, crashlogs_heldout28/ .. crashlogs_heldout31/,
crashlogs_heldout35/, crashlogs_heldout37/ .. crashlogs_heldout42/, crashlogs_heldout45/, crashlogs_heldout47/ ..
crashlogs_heldout51/, crashlogs_heldout53/ .. crashlogs_heldout60/, crashlogs_heldout64/ .. crashlogs_heldout68/,
crashlogs_heldout71/ .. crashlogs_heldout74/, crashlogs_heldout76/ .. crashlogs_heldout107/, crashlogs_heldout109/ ..
crashlogs_heldout128/, crashlogs_heldout130/ .. crashlogs_heldout140/, crashlogs_heldout142/ .. crashlogs_heldout150/
crashlogs_heldout152/ .. crashlogs_heldout156/, crashlogs_heldout158/ .. crashlogs_heldout168/, crashlogs_heldout170/ ..
crashlogs_heldout181/, crashlogs_heldout183/ .. crashlogs_heldout185/, crashlogs_heldout187/ .. crashlogs_heldout204/
hold real logs set aside (by a fixed rule, docs/diagnose.md) before the catalog was changed for
them: they are diagnosed for the accuracy tables only, never asserted on. The per-class accuracy of the fixtures and of
the one hundred and eighty-one held-out splits (there is no crashlogs_heldout27, 32, 33, 34, 36, 43, 44, 46, 52, 61 to
63, 69, 70, 75, 182 or 186: those rounds made probes or tuning logs, not splits, or chose their logs for the
misses: crashlogs_gaps61 to 63, 70, 182 and 186; round 75's were synthesized from the release's raise sites; nor 108:
its two logs were cut by the collector's tool before their failure; nor 129, 141 and 169: their collectors found no log
not already used; nor 151 and 157: their logs were doubted before the split) is printed in the terminal summary of
every run.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from noderig.diagnose import CatalogError, diagnose, load_catalog, normalize, parse_tracebacks
from noderig.diagnose.catalog import CATALOG_PATH, default_catalog
from noderig.diagnose.normalize import strip_prefixes, with_continuation
from noderig.diagnose.report import render, to_json
from noderig.diagnose.tracebacks import TracebackSection, traceback_chain

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "crashlogs"
HELDOUT_SPLITS = [ROOT / "tests" / "fixtures" / name for name in ("crashlogs_heldout", "crashlogs_heldout2", "crashlogs_heldout3",
                                                                 "crashlogs_heldout4", "crashlogs_heldout5",
                                                                 "crashlogs_heldout6", "crashlogs_heldout7",
                                                                 "crashlogs_heldout8", "crashlogs_heldout9",
                                                                 "crashlogs_heldout10", "crashlogs_heldout11",
                                                                 "crashlogs_heldout12", "crashlogs_heldout13",
                                                                 "crashlogs_heldout14", "crashlogs_heldout15",
                                                                 "crashlogs_heldout16", "crashlogs_heldout17",
                                                                 "crashlogs_heldout18", "crashlogs_heldout19",
                                                                 "crashlogs_heldout20", "crashlogs_heldout21",
                                                                 "crashlogs_heldout22", "crashlogs_heldout23",
                                                                 "crashlogs_heldout24", "crashlogs_heldout25",
                                                                 "crashlogs_heldout26", "crashlogs_heldout28",
                                                                 "crashlogs_heldout29", "crashlogs_heldout30",
                                                                 "crashlogs_heldout31", "crashlogs_heldout35",
                                                                 "crashlogs_heldout37", "crashlogs_heldout38",
                                                                 "crashlogs_heldout39", "crashlogs_heldout40",
                                                                 "crashlogs_heldout41", "crashlogs_heldout42",
                                                                 "crashlogs_heldout45", "crashlogs_heldout47",
                                                                 "crashlogs_heldout48", "crashlogs_heldout49",
                                                                 "crashlogs_heldout50", "crashlogs_heldout51",
                                                                 "crashlogs_heldout53", "crashlogs_heldout54",
                                                                 "crashlogs_heldout55", "crashlogs_heldout56",
                                                                 "crashlogs_heldout57", "crashlogs_heldout58",
                                                                 "crashlogs_heldout59", "crashlogs_heldout60",
                                                                 "crashlogs_heldout64", "crashlogs_heldout65",
                                                                 "crashlogs_heldout66", "crashlogs_heldout67",
                                                                 "crashlogs_heldout68", "crashlogs_heldout71",
                                                                 "crashlogs_heldout72", "crashlogs_heldout73",
                                                                 "crashlogs_heldout74", "crashlogs_heldout76",
                                                                 "crashlogs_heldout77", "crashlogs_heldout78",
                                                                 "crashlogs_heldout79", "crashlogs_heldout80",
                                                                 "crashlogs_heldout81", "crashlogs_heldout82",
                                                                 "crashlogs_heldout83", "crashlogs_heldout84",
                                                                 "crashlogs_heldout85", "crashlogs_heldout86",
                                                                 "crashlogs_heldout87",
                                                                 "crashlogs_heldout88", "crashlogs_heldout89",
                                                                 "crashlogs_heldout90", "crashlogs_heldout91",
                                                                 "crashlogs_heldout92", "crashlogs_heldout93",
                                                                 "crashlogs_heldout94", "crashlogs_heldout95",
                                                                 "crashlogs_heldout96", "crashlogs_heldout97",
                                                                 "crashlogs_heldout98", "crashlogs_heldout99",
                                                                 "crashlogs_heldout100", "crashlogs_heldout101",
                                                                 "crashlogs_heldout102", "crashlogs_heldout103",
                                                                 "crashlogs_heldout104", "crashlogs_heldout105",
                                                                 "crashlogs_heldout106", "crashlogs_heldout107",
                                                                 "crashlogs_heldout109", "crashlogs_heldout110",
                                                                 "crashlogs_heldout111", "crashlogs_heldout112",
                                                                 "crashlogs_heldout113", "crashlogs_heldout114",
                                                                 "crashlogs_heldout115", "crashlogs_heldout116",
                                                                 "crashlogs_heldout117", "crashlogs_heldout118",
                                                                 "crashlogs_heldout119", "crashlogs_heldout120",
                                                                 "crashlogs_heldout121", "crashlogs_heldout122",
                                                                 "crashlogs_heldout123", "crashlogs_heldout124",
                                                                 "crashlogs_heldout125", "crashlogs_heldout126",
                                                                 "crashlogs_heldout127", "crashlogs_heldout128",
                                                                 "crashlogs_heldout130", "crashlogs_heldout131",
                                                                 "crashlogs_heldout132", "crashlogs_heldout133",
                                                                 "crashlogs_heldout134", "crashlogs_heldout135",
                                                                 "crashlogs_heldout136", "crashlogs_heldout137",
                                                                 "crashlogs_heldout138", "crashlogs_heldout139",
                                                                 "crashlogs_heldout140", "crashlogs_heldout142",
                                                                 "crashlogs_heldout143", "crashlogs_heldout144",
                                                                 "crashlogs_heldout145", "crashlogs_heldout146",
                                                                 "crashlogs_heldout147", "crashlogs_heldout148",
                                                                 "crashlogs_heldout149", "crashlogs_heldout150",
                                                                 "crashlogs_heldout152", "crashlogs_heldout153",
                                                                 "crashlogs_heldout154", "crashlogs_heldout155",
                                                                 "crashlogs_heldout156", "crashlogs_heldout158",
                                                                 "crashlogs_heldout159", "crashlogs_heldout160",
                                                                 "crashlogs_heldout161", "crashlogs_heldout162",
                                                                 "crashlogs_heldout163", "crashlogs_heldout164",
                                                                 "crashlogs_heldout165", "crashlogs_heldout166",
                                                                 "crashlogs_heldout167", "crashlogs_heldout168",
                                                                 "crashlogs_heldout170", "crashlogs_heldout171",
                                                                 "crashlogs_heldout172", "crashlogs_heldout173",
                                                                 "crashlogs_heldout174", "crashlogs_heldout175",
                                                                 "crashlogs_heldout176", "crashlogs_heldout177",
                                                                 "crashlogs_heldout178", "crashlogs_heldout179",
                                                                 "crashlogs_heldout180", "crashlogs_heldout181",
                                                                 "crashlogs_heldout183", "crashlogs_heldout184",
                                                                 "crashlogs_heldout185", "crashlogs_heldout187",
                                                                 "crashlogs_heldout188", "crashlogs_heldout189",
                                                                 "crashlogs_heldout190", "crashlogs_heldout191",
                                                                 "crashlogs_heldout192", "crashlogs_heldout193",
                                                                 "crashlogs_heldout194", "crashlogs_heldout195",
                                                                 "crashlogs_heldout196", "crashlogs_heldout197",
                                                                 "crashlogs_heldout198", "crashlogs_heldout199",
                                                                 "crashlogs_heldout200", "crashlogs_heldout201",
                                                                 "crashlogs_heldout202",
                                                                 "crashlogs_heldout203", "crashlogs_heldout204")]
ALL_FIXTURES = sorted(FIXTURES.glob("*/*.log"))
# Held-out splits of rounds that chose logs because the diagnosis got them wrong (their collectors ran it first): split
# by the same rule and never tuned on, but printed apart, so the measure above stays one of logs as users post them
GAP_SPLITS = [ROOT / "tests" / "fixtures" / name
              for name in ("crashlogs_gaps61", "crashlogs_gaps62", "crashlogs_gaps63", "crashlogs_gaps70",
                           "crashlogs_gaps182", "crashlogs_gaps186")]
HELDOUT_FIXTURES = sorted(p for split in HELDOUT_SPLITS + GAP_SPLITS for p in split.glob("*/*.log"))
REQUIRED_IDS = [
    "flash_attn_cute_missing", "missing_python_headers", "missing_cuda_headers", "nvcc_not_found",
    "unsupported_gpu_arch", "kernel_abi_mismatch", "cuda_oom", "kv_cache_insufficient", "nccl_failure",
    "shm_too_small", "port_in_use", "checkpoint_corrupt", "trust_remote_code", "unsupported_architecture",
    "cuda_graph_capture", "speculative_config", "driver_mismatch", "hf_gated_repo",
    "triton_out_of_shared_memory", "tokenizer_error", "too_many_open_files",
    "cute_dsl_version_skew", "sgl_kernel_mismatch", "deepgemm_jit_failure", "toolkit_misconfigured",
    "checkpoint_incomplete", "invalid_server_args", "host_oom",
]
NEW_IN_ISSUE_13 = ["toolkit_misconfigured", "deepgemm_jit_failure", "sgl_kernel_mismatch", "cute_dsl_version_skew",
                   "checkpoint_incomplete", "unsupported_gpu_arch", "kv_cache_insufficient", "speculative_config"]
IMPORTANT = ["flash_attn_cute_missing", "missing_python_headers", "cuda_oom", "nccl_failure", "port_in_use",
             "checkpoint_corrupt"]
REMEDY_FORMS = re.compile(r"^(add_flag:--[\w-]+|set:[\w.]+=[\w.-]+|lower:\w+|raise:\w+|install_package:[\w.+-]+|"
                          r"free_port|reverify_checkpoint|resync_venv|enlarge_shm|provide_hf_token)$")


def fixture_text(path: Path) -> str:
    """The log without the fixture's header (its leading `# source:` / `# note:` lines)."""
    lines = path.read_text().splitlines(keepends=True)
    while lines and lines[0].startswith(("# source:", "# note:")):
        lines.pop(0)
    return "".join(lines)


def fixture_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


# --------------------------------------------------------------------------------------------
# fixtures: every one diagnosed as its directory's class; accuracy in the terminal summary

_RESULTS: dict[str, list[tuple[str, str]]] = defaultdict(list)  # expected class -> [(fixture, got)]


class _AccuracyReport:
    """Registered as a plugin by the first fixture test: prints the per-class table at the end
    of the run whatever the capture mode (-s or not)."""

    def pytest_terminal_summary(self, terminalreporter):
        if not _RESULTS:
            return
        tr = terminalreporter
        tr.section("crash diagnosis accuracy (tests/fixtures/crashlogs)")
        _write_table(tr, _RESULTS)
        names = not os.environ.get("NODERIG_DIAGNOSE_HELDOUT_COUNTS_ONLY")
        together: dict[str, list[tuple[str, str]]] = defaultdict(list)
        by_shape: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
        for split in HELDOUT_SPLITS:  # measured, never asserted: nothing is tuned to these splits
            heldout = _heldout_rows(split, together, by_shape)
            tr.section(f"crash diagnosis accuracy, held-out split (tests/fixtures/{split.name}; not a gate)")
            # counts only while tuning, so a held-out log's outcome is not read beside the tuning logs'
            _write_table(tr, heldout, names=names)
        tr.section("crash diagnosis accuracy, all held-out splits together (not a gate)")
        _write_table(tr, together, names=names)
        if GAP_SPLITS:  # logs chosen because the diagnosis missed them: a stress measure, apart from the one above
            gaps: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for split in GAP_SPLITS:
                _heldout_rows(split, gaps, defaultdict(list))
            tr.section("held-out logs chosen for the diagnosis's misses, together (not a gate; not in the measure)")
            _write_table(tr, gaps, names=names)
        tr.section("held-out failures by what the paste holds (not a gate)")
        for shape in sorted(by_shape):
            rows = by_shape[shape]
            ok = sum(1 for _, got, _ in rows if got == "right")
            tr.write_line(f"{shape:<30} {ok:>3}/{len(rows):<3} ({100.0 * ok / len(rows):.1f}%)")
        _write_misses(tr, [row for rows in by_shape.values() for row in rows])


def _write_misses(tr, rows: list[tuple[str, str, str]]) -> None:
    """The held-out failures missed, by what the diagnosis says of the paste (Diagnosis.incomplete): a paste that
    lacks its cause cannot be named from its text, whatever the catalog holds."""
    missed = Counter(miss for _, got, miss in rows if got != "right")
    tr.write_line("missed: " + ", ".join(f"{n} {kind}" for kind, n in sorted(missed.items())))
    whole = [got for _, got, miss in rows if not miss.startswith("the paste lacks")]
    tr.write_line(f"failures right among those whose paste holds its cause: {whole.count('right')}/{len(whole)} "
                  f"({100.0 * whole.count('right') / max(len(whole), 1):.1f}%)")


def _heldout_rows(split: Path, together: dict, by_shape: dict) -> dict[str, list[tuple[str, str]]]:
    """One held-out split diagnosed: its rows per class, added to `together` and, for failures, to `by_shape`."""
    heldout: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in sorted(split.glob("*/*.log")):
        text = fixture_text(path)
        d = diagnose(text)
        row = (f"{split.name}/{path.stem}", d.cls)
        heldout[path.parent.name].append(row)
        together[path.parent.name].append(row)
        if path.parent.name != "healthy":
            by_shape[paste_shape(text)].append((row[0], "right" if row[1] == path.parent.name else "wrong", _miss(d)))
    return heldout


def _miss(d) -> str:
    """What a held-out failure's diagnosis says, in the words of the misses' table."""
    if d.incomplete:
        return f"the paste lacks its cause ({d.incomplete})"
    return {"unknown": "unknown, a failure shown", "healthy": "healthy, no failure in the paste"}.get(d.cls,
                                                                                                     "another class")


def paste_shape(text: str) -> str:
    """What a pasted failure holds: an exception line, a traceback's frames cut before it, or no
    traceback at all. Most held-out misses are frames cut before the exception line, whose cause
    only the report's title names; the table by shape says so in numbers."""
    tbs = parse_tracebacks(normalize(text))
    if any(s.exc_type for tb in tbs for s in tb.sections):
        return "an exception line"
    return "frames, no exception line" if tbs else "no traceback"


def _write_table(tr, results: dict[str, list[tuple[str, str]]], names: bool = True) -> None:
    total = correct = 0
    for cls in sorted(results):
        rows = results[cls]
        ok = sum(1 for _, got in rows if got == cls)
        total, correct = total + len(rows), correct + ok
        wrong = ", ".join(f"{name}->{got}" if names else got for name, got in rows if got != cls)
        tr.write_line(f"{cls:<30} {ok:>3}/{len(rows):<3}" + (f"  wrong: {wrong}" if wrong else ""))
    tr.write_line(f"{'total':<30} {correct:>3}/{total:<3} ({100.0 * correct / max(total, 1):.1f}%)")
    # the goals are stated apart: failures named right, and every healthy log kept healthy
    failures = [got == cls for cls, rows in results.items() if cls != "healthy" for _, got in rows]
    healthy = [got == "healthy" for _, got in results.get("healthy", [])]
    share = f"{100.0 * sum(failures) / max(len(failures), 1):.1f}%, {wilson_interval(sum(failures), len(failures))}"
    tr.write_line(f"{'failures right':<30} {sum(failures):>3}/{len(failures):<3} ({share}); "
                  f"healthy kept healthy {sum(healthy)}/{len(healthy)}")


def wilson_interval(right: int, n: int) -> str:
    """The 95% Wilson score interval of a proportion, as percentages: how far a count of a few hundred logs can be
    from the accuracy on every log users paste (a table's figure is one draw of logs, not the accuracy itself)."""
    if n == 0:
        return "no logs"
    z, p = 1.96, right / n
    centre, half = (p + z * z / (2 * n)), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low, high = (max(0.0, 100 * (centre + sign * half) / (1 + z * z / n)) for sign in (-1, 1))  # max: no "-0.0"
    return f"95% interval {low:.1f}-{high:.1f}%"


@pytest.fixture(scope="module")
def accuracy_report(request):
    # by name: the module fixture is set up again when a runner (mutmut) reorders the tests
    if request.config.pluginmanager.get_plugin("noderig-diagnose-accuracy") is None:
        request.config.pluginmanager.register(_AccuracyReport(), "noderig-diagnose-accuracy")
    return _RESULTS


# Real logs the catalog gets wrong, and why: no signature can honestly name their class from the
# paste alone. Each is asserted to come out exactly as stated, so one that starts coming out right
# (or wrong in another way) fails the test and this list must change with it.
KNOWN_MISSES = {
    # round 184's tuning misses at its split commit's catalog
    "unsupported_architecture/qwen2-vl-123-gptq-int4-vllm-rope-scaling-factor-assert": (
        "unknown", "a bare AssertionError on `assert \"factor\" in rope_scaling` in vLLM's max-len check; the same "
                   "assert comes from a transformers/config rope_scaling key mismatch on a vLLM that has the model "
                   "(unknown/qwen3-vl-497-vllm-061-rope-scaling-factor-assert), and only the maintainer's reply says "
                   "this vLLM lacks Qwen2-VL"),
    "flash_attn_cute_missing/megatron-lm-pr-6545-thrmma-annotation": (
        "cute_dsl_version_skew", "one line naming only the DSL module; the flash_attn.cute import that raised it "
                                 "is not in the paste"),
    "missing_python_headers/comfyui-seedvr2-134-tcc-cuda-utils": (
        "unknown", "only Triton's failed compiler command is pasted, not the compiler's message naming Python.h"),
    "cute_dsl_version_skew/flashinfer-pr-4649-keyerror-sm107a-old-dsl": (
        "unknown", "a bare KeyError naming the GPU's arch; only the PR's prose says the DSL's Arch enum raised it "
                   "(the same KeyError from another arch table would be unsupported_gpu_arch)"),
    "speculative_config/vllm-omni-5348-ngram-gpu-thinker-expand": (
        "unknown", "a tensor expand error with no frame; only the report's prose says the n-gram proposer raised it"),
    "unknown/vllm-54125-gb10-unpacked-scales-launch-failed": (
        "deepgemm_jit_failure", "a device assert and a launch failure reported through DeepGEMM's JIT handle; only the "
                                "commenter's analysis says vLLM skipped the weight-scale post-processing"),
    "cute_dsl_version_skew/fastvideo-1558-fa4-cute-fmax-typeerror": (
        "unknown", "a TypeError about a function's positional arguments, with no frame; only the report's prose says "
                   "the function is the CuTe DSL's nvvm.fmax called by FlashAttention 4"),
    "speculative_config/vllm-15154-ngram-draft-256-broadcast-shape": (
        "unknown", "a numpy broadcast error in the engine core's step; only the report's title says n-gram speculative "
                   "decoding with 256 draft tokens raised it"),
    "speculative_config/sglang-pr-34361-nextn-without-eagle-topk-nonetype": (
        "unknown", "a TypeError multiplying None by an int, with no frame; only the PR's prose says NEXTN without "
                   "--speculative-eagle-topk left it None"),
    "unsupported_gpu_arch/deepgemm-pr-324-unknown-recipe-sm120": (
        "deepgemm_jit_failure", "DeepGEMM's 'Unknown recipe' layout assertion inside its JIT path; only the PR's prose "
                                "says the pinned revision has no sm_120 support"),
    "speculative_config/vllm-pr-12304-eagle-draft-no-embed-tokens": (
        "unknown", "a weight named by the checkpoint that the model class lacks, vLLM's generic loading error; only "
                   "the PR's thread says the checkpoint was an EAGLE draft given as speculative_model"),
    "unsupported_gpu_arch/lmdeploy-583-titan-xp-invalid-device-function": (
        "unknown", "an uncaught C++ exception ('terminate called after throwing ...') cut before its what() line; "
                   "only the report's title gives the CUDA error (invalid device function on a Titan Xp)"),
    "cuda_oom/sglang-1087-mqa-oom-cut-in-flashinfer-sampling": (
        "unknown", "frames only, cut inside FlashInfer's sampling, which raises for more than memory; only the "
                   "report's title says CUDA out of memory"),
    "cuda_oom/vllm-9630-mllama-profile-run-cut": (
        "unknown", "frames only, cut at the engine's determine_num_available_blocks, where the profile run raises "
                   "for more than memory (unsupported_gpu_arch/vllm-11485 raised there too); only the title says OOM"),
    "cuda_oom/vllm-10569-mllama-l20-rank0-cut": (
        "unknown", "frames only, cut at the worker's determine_num_available_blocks (the profile run, the first forward "
                   "pass, which fails for more than memory: unknown/glm-v-126 is an AttributeError cut there); only "
                   "the report's title says OOM"),
    "unsupported_gpu_arch/vllm-4604-engine-cut-at-kv-caches": (
        "unknown", "frames only, cut at the engine's _initialize_kv_caches, where unknown/vllm-18730 was cut too; "
                   "only the report's title says no kernel image"),
    # the fourteenth round's tuning misses at its split commit's catalog (for now: each rule's commit removes
    # the ones it fixes)
    "speculative_config/angelslim-16-qwen3-eagle3-draft-index-out-of-bounds": (
        "cuda_graph_capture", "a device-side index assertion while SGLang captures the EAGLE draft's CUDA graphs; "
                              "only the report's title says the draft model does not work with SGLang"),
    "toolkit_misconfigured/gns3-server-2212-setup-traceback-cut": (
        "unknown", "frames only, cut inside Cython's build_ext, which fails for any build error; only the title "
                   "says the detected CUDA version mismatches torch's"),
    "toolkit_misconfigured/sglang-16052-launch-server-args-cut": (
        "unknown", "frames only, cut inside SGLang's server_args; only the title says libnvrtc.so.12 is missing"),
    "unsupported_gpu_arch/mamba-85-p40-jupyter-cut": (
        "unknown", "a Jupyter traceback cut inside torch's module call, which every forward pass runs through; only "
                   "the report's title says no kernel image (P40)"),
    "unsupported_gpu_arch/sglang-40558-sm120-trtllm-fmha-cut": (
        "unknown", "frames only, cut inside SGLang's hybrid attention backend; only the title says FlashInfer's "
                   "TRT-LLM FMHA runner refused SM120"),
    "unsupported_gpu_arch/vllm-19185-v100-qwen3-attention-init-cut": (
        "unknown", "frames only, cut in Qwen3's attention constructor; only the title says no kernel image (V100)"),
    # the fifteenth round's tuning misses at its split commit's catalog that its rules left (c5b99fc and f8277e8
    # removed the four they fixed)
    "cuda_oom/sglang-445-l4-llama2-init-cut": (
        "unknown", "frames only, cut inside the Llama model's constructor; only the report's title says CUDA out of "
                   "memory"),
    "nccl_failure/nccl-1657-vllm-ray-init-device-cut": (
        "unknown", "frames only, cut at the Ray executor's init_device call; only the title says NCCL's unhandled "
                   "system error"),
    "sgl_kernel_mismatch/sglang-9173-launch-server-import-cut": (
        "unknown", "frames only, cut inside SGLang's imports; only the report's title says sgl_kernel's undefined "
                   "symbol"),
    # the seventeenth round's tuning misses at its split commit's catalog that its rules left
    "cuda_graph_capture/sglang-16108-piecewise-qwen3-vl-cut": (
        "unknown", "frames only, cut inside torch.fx's graph module call; only the title says piecewise CUDA graph"),
    "cuda_graph_capture/sglang-4489-qwen25-72b-init-cut": (
        "unknown", "frames only, cut inside the model runner's initialize; only the title says capture failed"),
    "cuda_graph_capture/sglang-2460-qwen2-all-gather-cut": (
        "unknown", "frames only, cut inside an all-gather the model's forward calls; only the title says CUDA graph"),
    "speculative_config/sglang-7139-eagle3-index-select-assert": (
        "unknown", "a device-side index assertion in the decode loop; only the title says EAGLE3 failed"),
    "unsupported_gpu_arch/qwen3-omni-83-blackwell-init-device-cut": (
        "unknown", "frames only, cut at the worker's init_device after torch's DSA hint; only the title says "
                   "Blackwell"),
    # the eighteenth round's tuning misses at its split commit's catalog
    "cuda_oom/vllm-15598-ray-deepseek-forward-cut": (
        "unknown", "frames only, cut inside the model's forward under a Ray worker; only the title says CUDA out of "
                   "memory"),
    "too_many_open_files/qcg-pilotjob-41-zmq-1022-jobs": (
        "unknown", "frames only, cut in a ZMQ socket call; only the report's description says Too many open files"),
    # the twentieth round's tuning miss at its split commit's catalog
    "unknown/vllm-19577-cpu-image-nvml-not-found-exits": (
        "healthy", "platform-detection DEBUG lines only; the container exits after them without an error line, so "
                   "the paste shows no failure (NVML missing is normal on a CPU image)"),
    # the twenty-first round's tuning misses at its split commit's catalog
    "tokenizer_error/minimax-m1-16-llm-engine-init-tokenizer-cut": (
        "unknown", "frames only, cut inside LLMEngine's tokenizer initialisation before the exception line"),
    # the twenty-fifth round's tuning misses at its split commit's catalog
    "checkpoint_corrupt/vllm-13899-qwen25vl-awq-load-weights-cut": (
        "unknown", "vLLM loader frames only, cut inside load_weights before the safetensors error the title names"),
    "cuda_oom/vllm-10034-mllama-two-a10-worker-cut": (
        "unknown", "a vLLM worker's frames cut inside the vision encoder's forward, before the OOM line"),
    "kv_cache_insufficient/openrlhf-336-ray-actor-initialize-cache-cut": (
        "unknown", "cut inside vLLM's initialize_cache before the max-seq-len/KV-cache ValueError"),
    "kv_cache_insufficient/sglang-322-router-init-not-enough-memory-cut": (
        "unknown", "SGLang's router-init traceback cut at its first frame, before 'Not enough memory'"),
    # the twenty-sixth round's tuning misses at its split commit's catalog
    "speculative_config/sglang-pr-15373-eagle-grammar-matcher-terminated": (
        "unknown", "xgrammar's 'Check failed: !terminated_' alone; that EAGLE's verify step filled the mask is only in "
                   "the PR's prose"),
    "unsupported_gpu_arch/gpustack-3326-sglang-diffusion-fa3-sm90-consequence": (
        "unknown", "only the image API's TypeError after generation failed; the FA3 'only supported on sm90' line is "
                   "in the title, not the excerpt"),
    # the twenty-ninth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_oom/llm-d-fma-746-dpc-wake-up-500-cuda-error-out-of-memory": (
        "healthy", "a controller's Go klog INFO record (I0902) of an HTTP 500 whose JSON response body quotes vLLM's "
                   "'CUDA Error: out of memory'; an INFO record is no failure, so nothing failed"),
    "nccl_failure/nccl-pr-2059-memoryless-numa-shm-descriptor": (
        "unknown", "NCCL's 'Error while attaching to shared memory segment /dev/shm/nccl-... No such file or directory' "
                   "alone under torch's [rank1]: prefix, without NCCL WARN or an NCCL error line; no signature names it"),
    "too_many_open_files/ray-10104-could-not-create-loggingfile-too-may-open-files": (
        "healthy", "glog's 'Could not create logging file: Too may open files' (the typo is glog's) in quotes with no "
                   "level, exception or errno: nothing marks it a failure, and the typo misses the class's words"),
    "unknown/flash-attention-2522-fa4-cute-rocm-no-module-cuda": (
        "flash_attn_cute_missing", "a ModuleNotFoundError raised while flash_attn.cute imports is that class by its "
                                   "module path; the missing module is the CUDA Python bindings on a ROCm machine"),
    # the thirtieth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "nccl_failure/sglang-4766-deepseek-v3-multinode-rank1-init-distributed-cut": (
        "unknown", "SGLang's scheduler frames cut inside initialize_model_parallel before the exception line; only the "
                   "report's prose says the child node hit an NCCL issue (a cut in SGLang's distributed setup names no "
                   "class)"),
    "unknown/sglang-pr-10090-standalone-spec-merge-batch-sizes-of-tensors": (
        "speculative_config", "a RuntimeError raised in SGLang's speculative eagle_utils while merging batches reads "
                              "as that class by its module path; the thread shows a bug under load, not a "
                              "configuration the server rejected"),
    "unsupported_architecture/sglang-4689-nemotron-super-decilm-scheduler-cut": (
        "unknown", "SGLang's scheduler traceback cut after its first frame, before the exception line; only the "
                   "title names 'Model architectures ['DeciLMForCausalLM'] are not supported'"),
    # the thirty-first round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_oom/vllm-39788-kimi-k2.5-nvfp4-oom-capture-model-cut": (
        "unknown", "a worker's traceback cut below compile_or_warm_up_model at its capture_model() call, above the "
                   "out-of-memory line; only the report's title names the OOM"),
    "unknown/vllm-20440-nixl-pd-long-prompt-enginecore-fatal-error": (
        "speculative_config", "named by the key-token tier (0.45): the scheduler-stats dump before the cut traceback "
                              "holds 'spec_decoding_stats=None'; the thread's PD/NIXL failure names no class"),
    "unknown/vllm-24888-speculative-config-object-has-no-attribute-get": (
        "speculative_config", "named by the key-token tier (0.45) from 'SpeculativeConfig' in the AttributeError; the "
                              "report traces it to vLLM's argument parsing, a bug, not an invalid configuration"),
    "unsupported_architecture/vllm-36217-qwen3.5-model-type-not-recognized-frames-cut": (
        "unknown", "the API server's frames cut above the exception; the 'model type qwen3_5 ... does not recognize "
                   "this architecture' line is only in the report's title"),
    # the thirty-fifth round's tuning misses at its split commit's catalog (no catalog change in that round) that the
    # rules after it left (the NVSHMEM reports, KServe's record level and GPUStack's max-length note fixed three)
    "cuda_oom/dynamo-1405-load-model-frames": (
        "unknown", "Dynamo's vLLM worker frames cut in load_model before the exception line; only the report's title "
                   "names the CUDA out-of-memory"),
    "unknown/skypilot-pr6507-uv-torch-backend": (
        "invalid_server_args", "uv's 'error: unexpected argument '--torch-backend' found' and its usage text read as "
                               "a server rejecting its command line; it is the setup's package installer"),
    # the thirty-eighth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_oom/vllm-17469-qwen3-compose-oom-cut-after-loading": (
        "healthy", "the compose excerpt stops at the workers' weight-loading and torch.compile records, before any "
                   "failure; only the report's title names the out-of-memory"),
    "speculative_config/vllm-pr-51960-unquantized-draft-moe-backend": (
        "unknown", "a ValueError that --moe-backend does not support unquantized MoE; only the PR says the unquantized "
                   "MoE is the draft model's and the fix is moe_backend inside --speculative-config"),
    "unsupported_architecture/vllm-32338-llava-qwen-not-supported-cut": (
        "unknown", "the offline LLM(...) traceback cut inside LLMEngine.from_engine_args, above the 'Model "
                   "architectures ... are not supported' line, which only the report's prose quotes"),
    # the thirty-seventh round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_graph_capture/sglang-1421-deepseek-v2-fp8-h20-custom-all-reduce-illegal": (
        "unknown", "custom all-reduce's 'Failed: Cuda error .../custom_all_reduce.cuh:330 'an illegal memory access "
                   "was encountered'' with no capture frame or capture record; only the report's title names the "
                   "CUDA graph"),
    "unknown/sglang-10560-pd-mooncake-kv-transfer-failed-unknown-reason": (
        "healthy", "SGLang's 'Decode transfer failed for request ... with exception KVTransferError(...)' records carry "
                   "no level, traceback or exception line the failure rules know, and /health answers 200 after them"),
    "unknown/sglang-1391-llava-llama-processor-is-a-tokenizer": (
        "tokenizer_error", "an AttributeError raised in SGLang's tokenizer_manager (the processor loaded for a "
                           "multimodal model is a bare tokenizer) reads as the tokenizer failing to load; the thread "
                           "names no cause"),
    "unknown/sglang-26987-dsv4-pro-b300-graph-replay-illegal-memory-xid31": (
        "cuda_graph_capture", "an illegal memory access during CUDA graph replay after 1.5 days of serving; the "
                              "'currentStreamCaptureStatusMayInitCtx (CUDAGraphsC10Utils.h)' line gives the capture "
                              "class its key-token points (0.45)"),
    # the thirty-ninth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_graph_capture/vllm-42999-ci-draft-model-graph-capture-cut": (
        "unknown", "a CI log cut inside the draft Qwen3 model's forward (torch.compile's aot_compile frames), with no "
                   "capture frame and no exception line; only the issue's title says the draft model failed during "
                   "graph capture"),
    "speculative_config/sglang-3762-eagle-num-steps-1-triton-cut": (
        "unknown", "a scheduler traceback cut at run_batch, above any speculative frame or exception line; only the "
                   "title says EAGLE with --speculative-num-steps 1 on the Triton backend"),
    "speculative_config/sglang-36140-dflash-pd-decode-spec-info-none": (
        "unknown", "an AttributeError on a None spec_info in spec_utils.spec_prepare_for_decode; only the report says "
                   "DFLASH has no PD-disaggregation wiring"),
    "speculative_config/dynamo-331-vllmworker-speculative-assertionerror": (
        "unknown", "a bare AssertionError() in vLLM's engine loop on the first request; only the maintainer says "
                   "Dynamo's patched vLLM did not support speculative decoding"),
    "speculative_config/vllm-14117-pp2-speculative-unsupported-cut": (
        "unknown", "the CLI traceback cut in uvloop before the exception line; only the title says speculative "
                   "decoding with pipeline parallelism was refused"),
    "speculative_config/vllm-27808-eagle-gemma2-draft-head-size-288": (
        "unknown", "FlashAttention's 'Head size 288 is not supported' names the attention backend, not the draft; "
                   "only the report says the head size is the EAGLE draft's, trained for Gemma2"),
    # the fortieth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "unknown/glm-v-185-glm45v-sglang-capture-aux-hidden-states-attributeerror": (
        "speculative_config", "a model class lacking 'capture_aux_hidden_states' (an EAGLE3 hook) in a launch with no "
                              "speculative flags; the attribute's name gives the speculative class its signature"),
    "unsupported_gpu_arch/sglang-7249-rtx5090-rmsnorm-cuda-graph-init-cut": (
        "unknown", "scheduler frames cut in CudaGraphRunner's constructor before any exception; only the title says "
                   "RMSNorm had no kernel image for the RTX 5090"),
    # the forty-first round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_oom/trl-3128-grpo-init-vllm-initialize-cache-oom-cut": (
        "unknown", "TRL's GRPOTrainer frames into vLLM's LLM() cut at initialize_cache, before any exception line; "
                   "only the title says vLLM ran out of memory while it initialised"),
    "port_in_use/ms-swift-6866-second-rollout-server-collective-rpc-failed": (
        "unknown", "a second swift rollout server starts, then 'Invocation of collective_rpc method failed' at "
                   "init_communicator, cut at that line; only the report says the weight-sync group's address was in use"),
    # the forty-second round's tuning misses at its split commit's catalog (no catalog change in that round)
    "unknown/hunyuanocr-25-h200-architecture-failed-to-be-inspected": (
        "unsupported_architecture", "vLLM's 'Model architectures [...] failed to be inspected' is read as an "
                                    "unsupported architecture; the registry subprocess's own error is not in the "
                                    "excerpt and the thread names no cause"),
    "unsupported_architecture/ernie-1000-ernie45-vl-vllm092-transformers-modules": (
        "unknown", "ModuleNotFoundError importing the repository's own processor code (a module path cut at the "
                   "dot in 'ERNIE-4.5'); only the maintainer's reply says vLLM did not support the model yet"),
    # the forty-eighth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_oom/vllm-9011-oom-flaky-profiler-mp-engine-cut": (
        "unknown", "a vLLM 0.6 MQLLMEngine traceback cut at LLMEngine._initialize_kv_caches, before the exception "
                   "line; only the title says CUDA OOM, and no signature reads a cut at the KV cache init as out of "
                   "memory"),
    "cuda_oom/vllm-7655-oom-wsl-after-weights-rpc-server-cut": (
        "unknown", "vLLM 0.5's RPC server traceback after 'Loading model weights took 1.9634 GB', cut inside "
                   "AsyncLLMEngine's init before the exception line; only the title says out of memory (under WSL)"),
    "driver_mismatch/llm-d-706-error-803-engine-core-set-device-cut": (
        "unknown", "EngineCore frames down to torch._C._cuda_setDevice, cut before the RuntimeError line; only the "
                   "title names Error 803, and a cut inside set_device is no signature's evidence"),
    "kernel_abi_mismatch/hunyuanimage3-56-vendored-vllm-c-abi3-undefined-symbol-on-startup": (
        "unknown", "the vllm CLI's import chain (cli/__init__ -> benchmark latency -> arg_utils) cut before the "
                   "ImportError line; only the title names the undefined symbol in vllm/_C.abi3.so"),
    "unsupported_architecture/vllm-3101-internlm-xcomposer2-docker-compose-cut": (
        "unknown", "a docker compose traceback (vllm-service-1 | prefixes) cut inside get_model before the "
                   "exception line; only the title says the model is not supported"),
    # the forty-ninth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_oom/vllm-6630-taskgroup-docker-timestamps-gpu-mem-util-oom": (
        "unknown", "starlette's listen_for_disconnect frames behind docker's times and a blank line after each, cut "
                   "before any exception; only the reporter's later comment (--gpu-memory-utilization 0.9 ran the GPU "
                   "out of memory) names the cause"),
    "unknown/sglang-4471-kaggle-log-viewer-time-line-gutter-nbconvert": (
        "healthy", "Kaggle's log viewer lines (nbconvert writing the notebook, a traitlets FutureWarning) cut before "
                   "any error; the failure is only in the report's prose"),
    "unknown/synthetic-data-kit-24-colab-widget-progress-unsloth-vllm-start": (
        "healthy", "a Colab cell's start of vLLM under Unsloth (downloads, platform detection, Unsloth's settings) "
                   "cut before the failure; only the thread says the start broke"),
    "unknown/vllm-19077-wsl2-cuda-unknown-error-vllm-serve-head": (
        "healthy", "the command and vLLM's first two INFO lines under WSL2, cut before the CUDA error; only the title "
                   "says it failed"),
    "unsupported_architecture/vllm-15046-ipython-stablelmalpha-no-vllm-implementation": (
        "unknown", "an IPython traceback (`ValueError    Traceback`, LLM(...) with model_impl=\"transformers\") cut in "
                   "vllm/utils.py's deprecate_args wrapper before the message; only the title names the architecture "
                   "vLLM has no implementation for"),
    # round 50 (downstream projects' trackers)
    "hf_gated_repo/ray-54812-serve-llm-vllm-v1-gated-llama3-token-not-passed": (
        "healthy", "two INFO lines from Ray Serve's replica while the vLLM V1 workers start, cut before the Hugging "
                   "Face permission error; only the title and thread say the gated repo refused the engine"),
    "unknown/awesome-ml-sys-106-verl-sglang-docker-json-init-process-group": (
        "healthy", "docker json-file records run together on one line as the tracker stored them (frames of "
                   "init_process_group, no exception line); read as one line, nothing in it is a failure"),
    "unknown/fastchat-2490-vllm-worker-two-t4-rayworker-bus-error": (
        "shm_too_small", "a Ray worker's 'Fatal Python error: Bus error' reads as a /dev/shm too small; the thread "
                         "never names the cause, so it is labelled unknown (the reading may be the true cause)"),
    # the fifty-first round's tuning misses at its split commit's catalog (no catalog change in that round)
    "unknown/sglang-13591-qwen3-vl-32b-tp2-tel-link-timestamps-cut": (
        "healthy", "uvicorn's start lines behind timestamps the tracker turned into tel: links, cut before the "
                   "failure; only the title says the server errored, and the thread names no cause"),
    "unsupported_gpu_arch/vllm-18841-llama4-maverick-fp8-h100-unindented-dummy-run-frames": (
        "unknown", "worker frames of _dummy_run with their indentation lost, cut before the exception line; only the "
                   "title says 'no kernel image is available' (a wheel built for 10.0+PTX lacked the sm_90 FP8 image)"),
    "unsupported_gpu_arch/vllm-20847-llama4-maverick-kernel-image-since-pr-20694-frames": (
        "unknown", "worker frames inside llama4.py's attention, cut before the exception line; only the title says "
                   "a CUDA kernel image error"),
    "unsupported_gpu_arch/vllm-40802-dsv4-sm120-apiserver-frames-cut": (
        "unknown", "the API server's frames into EngineCoreClient, cut before any exception; only the title says "
                   "DeepSeek-V4 cannot run on SM120 GPUs"),
    "unsupported_gpu_arch/vllm-42432-dsv4-rtx6000-hc-pre-frames-cut": (
        "unknown", "EngineCore frames cut in deepseek_v4.py hc_pre before the exception line; only the title (an "
                   "RTX PRO 6000, SM120) and the later SM120 enablement PR say the GPU was not supported"),
    # the fifty-third round's tuning misses at its split commit's catalog (no catalog change in that round)
    "cuda_oom/discuss-vllm-2584-rtx5090-qwen36-27b-mtp-oom": (
        "healthy", "the forum post's INFO lines stop at the warm-up run, before the out-of-memory error; only the "
                   "post's title and prose say it ran out of memory"),
    # the fifty-fifth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "driver_mismatch/kinetic-269-gke-usr-local-nvidia-not-on-ld-path": (
        "unknown", "vLLM's 'RuntimeError: Device string must not be empty' from config/device.py, three lines; only "
                   "the issue says torch saw no CUDA because GKE's /usr/local/nvidia (libcuda.so.1) was not on "
                   "LD_LIBRARY_PATH, and no signature reads an empty device string as a driver the process cannot load"),
    "port_in_use/sglang-27142-multi-tokenizer-load-snapshot-zmq-bind": (
        "unknown", "three SGLang frames (multi_tokenizer_mixin -> tokenizer_manager.init_ipc_channels) cut before the "
                   "exception line; only the title and description say every TokenizerWorker bound the same zmq "
                   "endpoint ('Address already in use')"),
    # the fifty-fourth round's tuning misses at its split commit's catalog (no catalog change in that round)
    "checkpoint_incomplete/tgi-982-only-three-safetensors-downloaded": (
        "unknown", "TGI's CLI frames (click, typer) cut before the exception; only the title says the download "
                   "stopped after three safetensors files"),
    "speculative_config/gpustack-3392-sglang-speculative-eagle-topk-none": (
        "healthy", "GPUStack's INFO/DEBUG lines stop before SGLang starts; only the title names the "
                   "speculative_eagle_topk error"),
    "speculative_config/local-inference-lab-vllm-pr-19-dflash-flashinfer-non-causal-dcp": (
        "healthy", "the two messages are quoted inside Markdown list items and backticks, wrapped mid-message, in "
                   "the PR's prose; no record or exception line carries them"),
    "speculative_config/vllm-pr-42069-gemma4-dflash-triton-attn-non-causal": (
        "unknown", "\"Selected backend TRITON_ATTN is not valid ... non-causal attention not supported\" is no "
                   "speculative signature; only the PR's prose says the drafter is a non-causal DFlash draft"),
    "trust_remote_code/langchain-chatchat-1075-qwen-fastchat-worker": (
        "unknown", "the model worker's traceback, which rose to llm_api.py's top level after the relayed API "
                   "server's ready line, is cut after its first frame; only the title quotes the trust_remote_code "
                   "ValueError"),
    "unsupported_architecture/tgi-3133-mistral-small-3-1-error-initializing": (
        "unknown", "TGI's \"Error when initializing model\" and CLI frames cut before the exception; only the "
                   "thread (a model-support request) says TGI has no Mistral 3.1 implementation"),
    # round 62 (chosen for the diagnosis's misses)
    "unsupported_gpu_arch/sglang-35557-deepgemm-mxfp4-megamoe-sm100-only-on-h100-capture": (
        "cuda_graph_capture", "\"Capture cuda graph failed\" heads DeepGEMM's assertion; only the assertion's "
                              "\"arch_major == 10\" (SM100 only, the GPUs are SM90) says the arch is the cause"),
    # round 64
    "missing_python_headers/framepack-248-tcc-cuda-utils-calledprocesserror": (
        "unknown", "only the end of the paste is stored: tcc's CalledProcessError and FramePack's unload lines; "
                   "the \"include file 'Python.h' not found\" line before them is cut, only the maintainer's reply "
                   "names it"),
    # round 74 (host_oom, a new class)
    "host_oom/ktransformers-637-killed-loading-weight-oom-task-table": (
        "healthy", "only rows of the kernel OOM report's task table (pid, uid, pages, name) are stored, without the "
                   "report's header or its \"Out of memory: Killed process\" line; no row says anything failed"),
    "host_oom/vllm-586-ray-actor-dead-tp4-vicuna-13b-cpu-memory": (
        "unknown", "Ray's dead-actor message lists the OOM killer among its potential root causes for any death; only "
                   "a commenter's reading of the setup (four 13B copies in host RAM) says it was host memory"),
    # round 73
    "sgl_kernel_mismatch/sglang-20953-cu130-kernel-wheel-metadata-launch-cut": (
        "unknown", "only launch_server's ServerArgs frames are stored, cut above the exception; only the title "
                   "says the sglang-kernel cu130 wheel's metadata is wrong"),
    # round 76 (a kernel package at another release than the engine or its siblings)
    "kernel_abi_mismatch/vllm-ultimate-dgx-spark-8-tvm-ffi-019-map-dataclass-to-tuple": (
        "unknown", "a one-line TypeError, make_kwargs_wrapper() refusing 'map_dataclass_to_tuple', with no frame or "
                   "package name; only the PR says apache-tvm-ffi 0.1.9 is older than nvidia-cutlass-dsl 4.6.0 needs"),
    # round 77 (kv_cache_insufficient at 0.45 before the round-76 tier change read "KV cache" as the component)
    "speculative_config/vllm-pr-47635-falconh1-spec-mamba-page-size-assert": (
        "unknown", "a bare AssertionError on the KV cache page size (page_size_padded >= page_size) in "
                   "_initialize_kv_caches; nothing in the paste names speculative decoding, only the PR "
                   "says the mamba state shape omits num_spec when it is on"),
    # round 79
    "unknown/vllm-pr-46436-stable-libtorch-cutlass-moe-sm100-unresolved": (
        "kernel_abi_mismatch", "an undefined symbol in a vLLM extension reads as a build for another torch; only the "
                               "PR says the symbol's source file was left out of the _C_stable_libtorch build"),
    # round 82
    "unsupported_gpu_arch/sparkrun-220-gb10-deepgemm-no-sm121-mqa-logits-impl": (
        "unknown", "DeepGEMM's include_parser assertion that it failed to open sm121_fp8_mqa_logits.cuh reads as a "
                   "missing file; only the report says the image ships only sm100/sm120 variants for this SM 12.1 GPU"),
    "unsupported_architecture/qwen3-vl-1539-vllm-0.10.1-qwen3vlmoe-embed-tokens": (
        "unknown", "one AttributeError on transformers' model class (an attribute vLLM's Transformers fallback looks "
                   "for); only the maintainer's answer says the release had no native Qwen3-VL implementation"),
    "unsupported_gpu_arch/skypilot-4723-deepseek-r1-fp8-a100-sglang": (
        "healthy", "the arch refusal is torch's record at its warning level (W0215, Triton kernel tracing), and the "
                   "traceback that followed is not in the excerpt: no failure is left in the paste"),
    "speculative_config/sglang-5160-deepseek-r1-nextn-bf16-topk-out-of-range": (
        "unknown", "torch.topk's own message alone (\"selected index k out of range\"), any top-k's; only the thread ties "
                   "it to the EAGLE top-k and step settings"),
    "unknown/kimi-vl-54-no-flash-attn-1029gib-oom": (
        "cuda_oom", "a CUDA out-of-memory in the allocator's own words; only the reporter's follow-up says the vision "
                    "tower asked for 1029 GiB because flash_attn was not installed"),
    # rounds 96 to 99's tuning misses at their split commit's catalog
    "nccl_failure/vllm-9920-2x-a6000-ada-tp2-stall-acs-iommu": (
        "healthy", "NCCL_DEBUG=INFO lines up to 'Init COMPLETE', the KV cache's blocks and a progress bar at 0/16: a "
                   "stall that logs nothing (the host's PCIe ACS and IOMMU blocked peer traffic, by the reporter)"),
    "unknown/vllm-17388-rocm-cutlass-mla-decode-undefined-symbol": (
        "kernel_abi_mismatch", "vLLM's WARNING that vllm._C failed to import on an undefined symbol, fatal since round "
                               "120 (the start fails at the first op): here the symbol was missing from vLLM's own ROCm "
                               "build (a bug its PR #17399 fixed), which no paste of the warning tells from a _C built "
                               "for another torch"),
    # rounds 100 to 103's tuning miss at their split commit's catalog
    "unknown/vllm-pr37408-quark-minimax-m21-mxfp4-hardcoded-trust-remote-code-false": (
        "trust_remote_code", "the error asks for trust_remote_code=True in trust_remote_code's own words; only the merged "
                             "fix shows vLLM's Quark config code passed False whatever the flag said"),
    # round 114's tuning miss at its split commit's catalog
    # rounds 120 to 127's tuning miss at their split commit's catalog
    "invalid_server_args/vllm-16231-llama4-maverick-pipeline-parallel": (
        "unknown", "vLLM's NotImplementedError \"Pipeline parallelism is not supported for this model\" alone: a draft "
                   "model's class says the same words under --pipeline-parallel-size (speculative_config's vLLM "
                   "#52069 and PR 46994), so they name neither class"),
    "unknown/vllm-pr56930-eagle-dense-draft-ep-num-experts": (
        "healthy", "a config check's message pasted alone, without its ValueError (\"Number of experts in the model must "
                   "be greater than 0 when expert parallelism is enabled.\"): no class's words name it, and a lone "
                   "line no class names may be any line of a healthy log (_message_alone)"),
    # rounds 159 to 166's tuning misses at their split commit's catalog
    "kernel_abi_mismatch/vllm-27228-vllm0110-torch290-bad-alloc": (
        "unknown", "a C++ std::bad_alloc abort as the command starts, no more; only the maintainer's answer says vLLM "
                   "0.11.0's binaries were built for torch 2.8 and the installed torch was 2.9"),
    "kernel_abi_mismatch/xinference-4424-vllm-torch29-abort": (
        "unknown", "'Aborted (core dumped)' after vLLM detected its platform, with no message; only the reporter's "
                   "analysis says vLLM 0.10.2 was built for torch 2.8 and ran on torch 2.9"),
    # round 172's tuning miss at its split commit's catalog
    # round 175's tuning miss at its split commit's catalog
    "unknown/qwen3-vl-497-vllm-061-rope-scaling-factor-assert": (
        "healthy", "a notebook's source-context fragment around vLLM's `assert \"factor\" in rope_scaling` (numbered "
                   "lines and an arrow), without the AssertionError line or a frame header: nothing reads as a failure, "
                   "so it passes for a healthy excerpt"),
    # round 176's tuning miss at its split commit's catalog
    "unsupported_gpu_arch/vllm-16515-dual-5090-fp8-cutlass-scaled-mm-frames": (
        "unknown", "three lines around vLLM's cutlass_scaled_mm op on two RTX 5090s, without the exception they lead "
                   "to; only the fix PR (#17280) says vLLM had no CUTLASS w8a8 FP8 kernel for sm120 and fell back on "
                   "the sm100 one"),
    # round 177's tuning miss at its split commit's catalog
    "speculative_config/vllm-pr-11966-lora-applied-to-draft-size-mismatch": (
        "unknown", "a V0 engine's tail of a LoRA traceback (activate_adapter, set_lora) ending in a tensor size "
                   "mismatch, with no speculative frame, flag or word in it; only the PR says the target's LoRA "
                   "adapter was applied to the draft model, whose layers have other sizes (not covered yet)"),
    # round 185's tuning miss (healthy at its split commit's catalog; a wrong class since zsh's bus error is read)
    "nccl_failure/vllm-4077-v040-bus-error-loading-vllm-nccl-so": (
        "shm_too_small", "vLLM 0.4.0's INFO line loading its pinned libnccl.so.2.18.1 from ~/.config/vllm/nccl, then "
                         "zsh's '[1] <pid> bus error  python3', no traceback or NCCL error: a bus error alone is "
                         "/dev/shm's symptom, as bash's 'Bus error' is; only the maintainer says the library file was "
                         "an incomplete download (a truncated file mapped into memory raises SIGBUS too)"),
    # round 188's tuning misses at its split commit's catalog
    "unsupported_gpu_arch/vllm-recipes-836-gb10-nemotron-fp8-kv-cudnn-fp8-gemm-sm100-path": (
        "unknown", "a cuDNN execution failure under FlashInfer's fp8_gemm_sm100 frame; nothing in the paste says the "
                   "GPU is a GB10 (sm_121), so the SM100-only path is the reporter's finding, not the log's"),
    "unknown/vllm-29030-rtx5080-cu130-source-build-cutlass-moe-mm-sm100-undefined-symbol": (
        "kernel_abi_mismatch", "vllm/_C's undefined symbol reads as an extension built against another torch; only "
                               "the reporter's reading of vLLM's CMakeLists says an SM100 kernel was referenced in an "
                               "SM12x build that never compiled it (a build bug fixed in vLLM)"),
    # rounds 198, 199 and 201's tuning misses at their split commit's catalog
    "invalid_server_args/vllm-1463-mistral-awq-without-quantization-flag-keyerror-qweight": (
        "unknown", "a KeyError on a '.qweight' tensor in the model's load_weights: vLLM 0.2 loading an AWQ checkpoint "
                   "without --quantization awq; the same KeyError on a quantized tensor's name is an engine's bug "
                   "elsewhere (unknown/vllm-ascend-12675-deepseek-v4-flash-keyerror-indexer-weight-scale)"),
    "nccl_failure/sglang-6894-mooncake-rdma-register-memory-invalid-argument": (
        "unknown", "Mooncake's RDMA memory registration failing ('Failed to register memory ...: Invalid argument') "
                   "under SGLang's PD disaggregation: a transfer engine's NIC set-up no signature names yet"),
    # round 204's tuning misses at its split commit's catalog (the one its rule left)
    "kv_cache_insufficient/mistral-inference-25-vllm-docker-3080ti-no-memory-for-cache-blocks": (
        "healthy", "a Docker start-up cut after the tokenizer's download, before the error the title quotes ('No "
                   "available memory for the cache blocks'): nothing in the paste failed"),
    # round 190's tuning misses at its split commit's catalog
    "kernel_abi_mismatch/dynamo-pr8645-sglang-image-mooncake-missing-libjsoncpp25": (
        "unknown", "mooncake's bindings missing a system library (libjsoncpp.so.25); the same ImportError for another "
                   "library is an engine's packaging bug (unknown/tensorrt-llm-7263-bindings-libpython-so-cannot-open)"),
    "kernel_abi_mismatch/nixl-1705-nixl-ep-cu12-clobbers-cu13-libcudart12": (
        "toolkit_misconfigured", "libcudart.so.12 missing reads as the CUDA runtime's library path, as six earlier "
                                 "tuning logs of the same message are labelled (a CUDA 12 build beside another "
                                 "torch's CUDA among them); the thread calls it a cu12 wheel on a CUDA 13 stack"),
    "kernel_abi_mismatch/vllm-42511-mooncake-cu12-wheel-in-cuda13-image": (
        "toolkit_misconfigured", "the same libcudart.so.12 message as the log above, from mooncake's CUDA 12 wheel in "
                                 "vLLM's CUDA 13 image"),
    # round 191's tuning misses at its split commit's catalog
    "unsupported_architecture/gpustack-1589-qwen25-omni-transformers-out-of-date": (
        "healthy", "transformers' 'does not recognize this architecture' inside GPUStack's ERROR record that it could "
                   "not derive the max model length, a step it goes on from (its maintainer first read the line as a "
                   "warning); only the later answer says the model ran once transformers came from source"),
    "unsupported_architecture/sglang-18819-ministral3-keyerror-transformers-too-old": (
        "unknown", "a bare KeyError: 'ministral3', the whole paste: a model_type's name is not told from any other "
                   "dictionary key without the frames or the words around it"),
    # round 194's tuning miss at its split commit's catalog
    "invalid_server_args/llamafactory-9512-lora-rank-over-max-lora-rank": (
        "unknown", "a worker's 'LoRA rank 32 is greater than max_lora_rank 16' relayed by the engine core: the same "
                   "words about a request's length over max_model_len refuse one request, not the engine's settings"),
}

# Fixtures named right only by the key-token tier (confidence below 0.5), and why: each asserted exactly.
KNOWN_LOW_CONFIDENCE = {
    # the thirty-seventh round: an unknown tuning log the tier names cuda_graph_capture (a miss, in KNOWN_MISSES too)
    "unknown/sglang-26987-dsv4-pro-b300-graph-replay-illegal-memory-xid31": (
        "a miss: CUDA graph replay words in a three-line summary of a crash after 1.5 days give the capture class "
        "its points"),
    "cuda_graph_capture/sglang-9706-custom-all-reduce-register-graph-buffers": (
        "the report's sentence and one custom all-reduce frame; no signature names a capture that failed in prose"),
    # the thirty-first round: two unknown tuning logs the tier names speculative_config (misses, in KNOWN_MISSES too)
    "unknown/vllm-20440-nixl-pd-long-prompt-enginecore-fatal-error": (
        "a miss: 'spec_decoding_stats=None' in a scheduler-stats dump gives speculative_config its points"),
    "unknown/vllm-24888-speculative-config-object-has-no-attribute-get": (
        "a miss: the class name SpeculativeConfig in a vLLM argument-parsing AttributeError gives the points"),
    # the thirty-sixth round: vLLM's strict weight check, left to the tier (a missing shard or a weight-name mapping bug)
    "checkpoint_incomplete/src36-vllm-weights-not-initialized-from-checkpoint": (
        "vLLM's 'Following weights were not initialized from checkpoint' is what a missing shard and a weight-name "
        "mapping bug both end in; no signature, the key-token tier names it"),
    # the fifty-fourth round's setting rule: a bug's exception in a launch that turns speculative decoding on
    "speculative_config/vllm-52069-mtp-under-pipeline-parallel": (
        "a NotImplementedError for pipeline parallelism; the command line's --speculative-config (MTP) names it"),
    "speculative_config/vllm-pr-55444-mtp-num-speculative-tokens-none": (
        "a TypeError comparing None with an int; the command line's --speculative-config (MTP) names it"),
    "speculative_config/vllm-18906-eagle3-70b-hidden-size-assert": (
        "a KeyError naming a weight; the command line's --speculative-config (EAGLE3) names it"),
    # round 81: raise sites whose refusal names the GPU in words the catalog has no signature for; the tier names them
    "unsupported_gpu_arch/src81-vllm-flashattn-mla-not-supported-on-this-device": (
        "'X is not supported on this device': a refusal and the hardware it is about, no SM number"),
    "unsupported_gpu_arch/src81-sglang-marlin-lora-moe-requires-compute-capability-9": (
        "'requires CUDA compute capability >= 9': a minimum, in a scheduler's record without frames"),
    "port_in_use/src81-vllm-could-not-find-open-port-vllm-port": (
        "a launcher that found every port it tried taken; the socket's own error is never printed"),
    "port_in_use/src81-sglang-strict-ports-port-unavailable": (
        "a port --strict-ports needs and cannot have, probed before any bind"),
    # round 86: vLLM's refusal of a flag EAGLE cannot run with, in words no signature was written for
    "speculative_config/vllm-pr-24350-eagle-kv-sharing-fast-prefill": (
        "a NotImplementedError that the fast-prefill optimisation 'is not compatible with EAGLE'; the algorithm's name "
        "and the command line's --speculative-config name it"),
    # round 125: a flag combination refused in words no signature was written for, the paste starting at the raise
    "invalid_server_args/vllm-8274-chunked-prefill-with-multi-step": (
        "'Chunked prefill is not supported with multi-step (--num-scheduler-steps > 1)': a refusal and the flag it "
        "names"),
}


def expected_class(path: Path) -> str:
    """What the diagnosis must say for a fixture: its directory, or its documented miss."""
    return KNOWN_MISSES.get(fixture_id(path), (path.parent.name, ""))[0]


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=fixture_id)
def test_fixture_is_diagnosed_as_its_class(path, accuracy_report):
    expected = path.parent.name
    d = diagnose(fixture_text(path))
    accuracy_report[expected].append((path.stem, d.cls))
    assert d.cls == expected_class(path), f"{path.name}: {d.cls}: {d.cause}"
    if d.cls not in ("healthy", "unknown"):
        assert d.evidence and d.fix and d.cause
        assert (d.confidence >= 0.5) != (fixture_id(path) in KNOWN_LOW_CONFIDENCE), d.confidence


def test_a_numbered_label_on_most_lines_is_dropped_and_nothing_else_is():
    def texts(paste: str) -> list[str]:
        return [line.text for line in normalize(paste)]

    frames = ["Traceback (most recent call last):", '  File "/x.py", line 1, in f', "    g()", "ValueError: boom"]
    assert texts("\n".join(f"{n % 2}: {x}" for n, x in enumerate(frames))) == frames  # srun's tasks 0 and 1
    assert texts("\n".join(f"gpu-node-{n}: {x}" for n, x in enumerate(frames))) == frames
    # a label with no number, a label on too few lines, a paste of two lines: kept as written
    worded = [f"sglang: {x}" for x in frames]
    assert texts("\n".join(worded)) == worded
    mixed = [f"0: {x}" for x in frames[:3]] + ["a", "b", "c"]
    assert texts("\n".join(mixed)) == mixed
    assert texts("0: RuntimeError: x\n1: y") == ["0: RuntimeError: x", "1: y"]


def test_accuracy_is_total_but_for_the_known_misses():
    per_class: dict[str, list[bool]] = defaultdict(list)
    for p in ALL_FIXTURES:
        per_class[p.parent.name].append(diagnose(fixture_text(p)).cls == p.parent.name)
    table = "\n".join(f"{cls:<30} {sum(v)}/{len(v)}" for cls, v in sorted(per_class.items()))
    print("\naccuracy per class:\n" + table)
    wrong = sum(not ok for v in per_class.values() for ok in v)
    assert wrong == len(KNOWN_MISSES), table


def test_known_misses_are_fixtures_with_a_reason():
    ids = {fixture_id(p) for p in ALL_FIXTURES}
    for fid, (got, why) in KNOWN_MISSES.items():
        assert fid in ids and got != fid.split("/")[0] and len(why) > 20, fid


def test_fixture_set_covers_every_class():
    counts = defaultdict(int)
    for p in ALL_FIXTURES:
        counts[p.parent.name] += 1
    catalog_ids = default_catalog().ids
    assert sorted(REQUIRED_IDS) == sorted(catalog_ids)
    for cid in [*catalog_ids, "healthy"]:
        assert counts[cid] >= 1, f"no fixture for {cid}"
    for cid in IMPORTANT:
        assert counts[cid] >= 2, f"{cid} needs two fixtures or more"
    assert counts["healthy"] >= 3
    for cid in NEW_IN_ISSUE_13:  # issue 13: real logs for every class it names
        assert counts[cid] >= 4, f"{cid} needs more real fixtures"
    healthy = [p.read_text() for p in FIXTURES.glob("healthy/*.log")]
    assert any("sglang" in t.lower() for t in healthy) and any("vLLM" in t for t in healthy)


@pytest.mark.parametrize("text, shape", [
    ('Traceback (most recent call last):\n  File "/x/sglang/srt/server.py", line 3, in main\n'
     'RuntimeError: CUDA error: out of memory\n', "an exception line"),
    ('Traceback (most recent call last):\n  File "/x/sglang/srt/server.py", line 3, in main\n'
     '  File "/x/sglang/srt/model_runner.py", line 9, in load\n', "frames, no exception line"),
    ("[2026-12-02 13:31:17] Scheduler hit an exception: out of memory\n", "no traceback"),
])
def test_paste_shape_says_what_a_failure_paste_holds(text, shape):
    assert paste_shape(text) == shape


@pytest.mark.parametrize("path", ALL_FIXTURES + HELDOUT_FIXTURES, ids=fixture_id)
def test_fixture_names_its_source(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("# source: "), path
    # a GitHub thread or file, the lab's stand-in, a synthesized probe, or (from the fifty-third round) a public
    # web page outside GitHub: a forum thread, a blog post, a docs page that quotes the log
    web_page = re.match(r"# source: https?://[A-Za-z0-9.-]+\.[A-Za-z]{2,}(:\d+)?/\S*$", first)
    assert "github.com/" in first or "stand-in" in first or "synthesized" in first or web_page, path


# --------------------------------------------------------------------------------------------
# the reference cases (stand-in logs)

VISION = FIXTURES / "flash_attn_cute_missing" / "standin-vision-warmup-tp2.log"
PYTHON_H = FIXTURES / "missing_python_headers" / "standin-no-python-dev-tp2.log"


def test_standin_vision_crash_names_the_vision_tower_warmup():
    d = diagnose(VISION.read_text())
    assert d.cls == "flash_attn_cute_missing"
    assert d.remedy == "add_flag:--skip-server-warmup"
    first = d.chain.index("mm_utils._get_chunked_embedding_by_item")
    assert d.chain.index("kimi_k25.get_image_feature") > first
    assert d.chain[0] == "scheduler.run_scheduler_process"  # outermost first
    assert "vision tower" in d.component and "warmup" in d.component
    assert d.ranks == ["TP0", "TP1"]
    assert any("flash_attn.cute" in e.line for e in d.evidence)


def test_standin_vision_crash_in_journal_form_with_ep_ranks():
    d = diagnose((FIXTURES / "flash_attn_cute_missing" / "standin-vision-warmup-tp4-ep4-journal.log").read_text())
    assert d.cls == "flash_attn_cute_missing"
    assert d.ranks == ["TP0 EP0", "TP1 EP1", "TP2 EP2", "TP3 EP3"]
    assert d.chain.index("mm_utils._get_chunked_embedding_by_item") < d.chain.index("kimi_k25.get_image_feature")


def test_python_h_wins_over_the_errors_it_causes():
    text = PYTHON_H.read_text() + "\n".join([
        "[2026-12-02 13:36:18 TP1] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/models/registry.py", line 80, in resolve',
        "    raise ValueError(msg)",
        "ValueError: Model architectures ['KimiK25ForConditionalGeneration'] are not supported for now.",
        "",
        "[2026-12-02 13:36:19 TP1] RuntimeError: NCCL error: unhandled system error",
        "[2026-12-02 13:36:19] Received sigquit from a child process. It usually means the child failed.",
    ]) + "\n"
    d = diagnose(text)
    assert d.cls == "missing_python_headers"
    assert d.remedy == "install_package:python3-dev"
    assert "Python.h" in d.evidence[0].line
    assert {"unsupported_architecture", "nccl_failure"} <= set(d.also_seen)
    assert d.chain[-1] == "build._build" and "Triton" in d.component


def test_standin_healthy_and_port_in_use_after_uvicorn_start():
    assert diagnose((FIXTURES / "healthy" / "standin-sglang-skip-warmup-tp2.log").read_text()).healthy
    d = diagnose((FIXTURES / "port_in_use" / "standin-port-taken.log").read_text())
    assert d.cls == "port_in_use" and d.remedy == "free_port"


# --------------------------------------------------------------------------------------------
# root cause ordering: a cause followed by its consequences


def sg(rank: str | None, msg: str, t: str = "13:31:17") -> str:
    return f"[2026-05-30 {t}{' ' + rank if rank else ''}] {msg}"


def test_dead_peer_oom_wins_over_nccl_timeouts_on_the_other_ranks():
    lines = [sg("TP3", "Scheduler hit an exception: Traceback (most recent call last):"),
             '  File "/x/sglang/srt/model_executor/model_runner.py", line 10, in forward', "    x = f()",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", ""]
    for r in (0, 1, 2):
        lines.append(f"[rank{r}]:[E530 13:41:17.1 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
                     f"operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600020 milliseconds before timing out.")
    lines.append(sg(None, "Received sigquit from a child process. It usually means the child failed.", "13:41:18"))
    d = diagnose("\n".join(lines))
    assert d.cls == "cuda_oom" and d.ranks == ["TP3"] and d.remedy == "lower:mem_fraction_static"
    assert "nccl_failure" in d.also_seen


def test_timeouts_alone_are_an_nccl_failure():
    lines = [f"[rank{r}]:[E530 13:41:17.1 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600020 milliseconds before timing out." for r in range(4)]
    d = diagnose("\n".join(lines))
    assert d.cls == "nccl_failure" and d.confidence < 0.9  # a symptom, not a decisive signature


def test_shm_exhaustion_wins_over_the_nccl_error_it_causes():
    text = "\n".join([
        "b300:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
        sg("TP1", "Scheduler hit an exception: Traceback (most recent call last):"),
        '  File "/x/pynccl_wrapper.py", line 329, in NCCL_CHECK', '    raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "",
    ])
    d = diagnose(text)
    assert d.cls == "shm_too_small" and d.remedy == "enlarge_shm" and "nccl_failure" in d.also_seen


def test_scheduler_exception_wins_over_sigquit_and_dead_scheduler():
    text = "\n".join([
        sg("TP0", "Scheduler hit an exception: Traceback (most recent call last):"),
        '  File "/x/weight_utils.py", line 77, in read_safetensors_header',
        '    raise _header_error("incomplete metadata, file not fully covered")',
        "safetensors_rust.SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered",
        "",
        sg(None, "Received sigquit from a child process. It usually means the child failed."),
        sg(None, "Rank 1 scheduler is dead. Please check if there are relevant logs."),
    ])
    d = diagnose(text)
    assert d.cls == "checkpoint_corrupt" and d.remedy == "reverify_checkpoint"
    assert d.evidence[0].line.startswith("safetensors_rust.SafetensorError")  # not the echoed `raise` source line


def test_crash_after_ready_is_not_healthy_but_errors_before_ready_do_not_count():
    ready = sg(None, "The server is fired up and ready to roll!")
    oom = sg("TP0", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.")
    assert diagnose("\n".join([ready, oom])).cls == "cuda_oom"
    noisy = sg("TP0", "Ignore import error when loading sglang.srt.models.mllama4: No module named 'flash_attn.cute'")
    assert diagnose("\n".join([noisy, ready])).healthy


def test_healthy_startup_with_scary_words_stays_healthy():
    text = "\n".join([
        sg(None, "server_args=ServerArgs(model_path='/m', trust_remote_code=False, disable_cuda_graph=False, "
                 "skip_server_warmup=False, speculative_algorithm=None)"),
        sg("TP0", "The 'deprecated' flag --enable-flashinfer-mla is deprecated. Please use --attention-backend."),
        "2025-03-10 10:45:15,370 - INFO - flashinfer.jit: Loading JIT ops: cascade",
        sg("TP0", "Warning: custom all-reduce is disabled because it is not supported on more than two PCIe-only GPUs."),
        sg("TP0", "Decode batch. #running-req: 1, #token: 42, token usage: 0.00, error_rate=0, #queue-req: 0"),
        sg(None, "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"),
        sg(None, "The server is fired up and ready to roll!"),
    ])
    d = diagnose(text)
    assert d.healthy, d.cause


def test_sglang_uvicorn_lines_are_not_ready_without_the_warmup_line():
    text = "\n".join([sg("TP0", "Capture cuda graph end. Time elapsed: 2.19 s"),
                      sg(None, "INFO:     Application startup complete."),
                      sg(None, "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")])
    d = diagnose(text)
    assert d.cls == "healthy" and not d.ready  # still warming up: no failure, not ready yet
    assert d.stage == "CUDA graphs captured, HTTP server started, not yet ready"


def test_unknown_failure_shows_the_relevant_lines():
    d = diagnose((FIXTURES / "unknown" / "sglang-2468-warmup-502.log").read_text())
    assert d.cls == "unknown" and d.remedy is None
    lines = [e.line for e in d.evidence]
    assert lines[0].startswith("AssertionError: res=<Response [502]>")
    assert any("Traceback" in line for line in lines)
    assert d.chain == ["server._wait_and_warmup"]


# --------------------------------------------------------------------------------------------
# tracebacks


def test_interleaved_two_rank_tracebacks_parse_separately_vllm_prefixes():
    tp0 = ["Traceback (most recent call last):", '  File "/v/vllm/worker/worker.py", line 10, in load_model',
           "    self.model_runner.load_model()", '  File "/v/vllm/model_loader/loader.py", line 20, in load_weights',
           "    w = f()", "RuntimeError: boom on zero"]
    tp1 = ["Traceback (most recent call last):", '  File "/v/vllm/worker/worker.py", line 30, in init_device',
           "    init_distributed()", '  File "/v/vllm/distributed/parallel_state.py", line 40, in init_distributed',
           "    nccl()", "RuntimeError: NCCL error: unhandled system error"]
    lines = []
    for a, b in zip(tp0, tp1):
        lines.append(f"(Worker_TP0 pid=100) ERROR 05-24 00:20:47 [multiproc_executor.py:1108] {a}")
        lines.append(f"(Worker_TP1 pid=101) ERROR 05-24 00:20:47 [multiproc_executor.py:1108] {b}")
    tbs = parse_tracebacks(normalize("\n".join(lines)))
    by_rank = {tb.rank: tb for tb in tbs}
    assert set(by_rank) == {"TP0", "TP1"}
    assert traceback_chain(by_rank["TP0"]) == ["worker.load_model", "loader.load_weights"]
    assert traceback_chain(by_rank["TP1"]) == ["worker.init_device", "parallel_state.init_distributed"]
    assert by_rank["TP0"].final.message == "boom on zero"
    assert by_rank["TP1"].final.exc_type == "RuntimeError"
    d = diagnose("\n".join(lines))
    assert d.cls == "nccl_failure" and d.ranks == ["TP1"]
    assert d.chain == ["worker.init_device", "parallel_state.init_distributed"]


def test_interleaved_torch_rank_prefixes_and_chained_sections():
    r0 = ["Traceback (most recent call last):", '  File "/a/mod_a.py", line 1, in load_kernel', "ImportError: no cute", "",
          "The above exception was the direct cause of the following exception:", "",
          "Traceback (most recent call last):", '  File "/a/mod_b.py", line 2, in outer',
          '  File "/a/mod_c.py", line 3, in middle', "RuntimeError: wrapped"]
    r1 = ["Traceback (most recent call last):", '  File "/b/other.py", line 9, in run', "KeyError: 'x'",
          "", "", "", "", "", "", ""]
    lines = []
    for a, b in zip(r0, r1):
        lines += [f"[rank0]: {a}", f"[rank1]: {b}"]
    tbs = {tb.rank: tb for tb in parse_tracebacks(normalize("\n".join(lines)))}
    assert len(tbs["rank0"].sections) == 2 and tbs["rank0"].sections[0].link == "cause"
    assert [s.exc_type for s in tbs["rank0"].sections] == ["ImportError", "RuntimeError"]
    assert traceback_chain(tbs["rank0"]) == ["mod_b.outer", "mod_c.middle"]
    assert traceback_chain(tbs["rank0"], tbs["rank0"].sections[0]) == ["mod_b.outer", "mod_c.middle", "mod_a.load_kernel"]
    assert tbs["rank1"].final.exc_type == "KeyError" and traceback_chain(tbs["rank1"]) == ["other.run"]


def test_sglang_traceback_continuation_lines_inherit_the_rank():
    lines = normalize(VISION.read_text())
    tbs = parse_tracebacks(lines)
    scheduler_tbs = [tb for tb in tbs if tb.rank in ("TP0", "TP1")]
    assert sorted(tb.rank for tb in scheduler_tbs) == ["TP0", "TP1"]
    for tb in scheduler_tbs:
        assert [s.exc_type for s in tb.sections] == ["ModuleNotFoundError", "ImportError"]
        assert tb.sections[0].link == "cause"


def test_chain_drops_wrapper_and_stdlib_frames():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "/usr/lib/python3.10/threading.py", line 1016, in run',
        '  File "/opt/v/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1736, in _wrapped_call_impl',
        '  File "/opt/v/lib/python3.10/site-packages/sglang/srt/models/qwen2.py", line 299, in forward',
        '  File "/opt/v/lib/python3.10/site-packages/sglang/srt/layers/logits_processor.py", line 184, in forward',
        "RuntimeError: x",
    ])
    (tb,) = parse_tracebacks(normalize(text))
    assert traceback_chain(tb) == ["qwen2.forward", "logits_processor.forward"]


# --------------------------------------------------------------------------------------------
# normalisation


@pytest.mark.parametrize("raw, text, info", [
    ("Dec 02 13:31:17 b300 sglang[536]: hello", "hello", {"source": "sglang[536]"}),
    ("Dec 02 13:31:17.123456 b300 sglang[536]: [2026-05-30 14:47:43 TP0] x", "x",
     {"source": "sglang[536]", "rank": "TP0", "time": "2026-05-30 14:47:43", "prefixed": True}),
    ("2026-12-02T13:31:17+0000 b300 python3[12]: [2026-05-30 14:47:43 DP3 TP3] x", "x",
     {"source": "python3[12]", "rank": "DP3 TP3"}),
    ("2026-12-02T13:31:17.123456+00:00 b300 python3[12]: y", "y", {"source": "python3[12]"}),
    ("Wed 2026-12-02 13:31:17 UTC b300 python3[12]: y", "y", {"source": "python3[12]"}),
    ("авг 18 14:15:04 llm python3[28059]: (EngineCore pid=28059) INFO 08-18 14:15:04 [vllm.py:1295] z", "z",
     {"source": "python3[28059]", "rank": "EngineCore"}),
    ("[2026-05-30 14:47:43 TP0 EP0] Load weight begin.", "Load weight begin.", {"rank": "TP0 EP0"}),
    ("[2026-05-30 14:47:43] The server is fired up", "The server is fired up", {"prefixed": True}),
    ("[23:23:54 TP7] Traceback (most recent call last):", "Traceback (most recent call last):", {"rank": "TP7"}),
    ("(Worker_TP4 pid=1234) ERROR 05-24 00:20:47 [core.py:1108]   File \"x.py\", line 3, in f",
     '  File "x.py", line 3, in f', {"rank": "TP4", "source": "pid1234"}),
    ("(VllmWorker rank=3 pid=99) INFO 01-11 15:51:02 llm_engine.py:70] hi", "hi", {"rank": "rank3"}),
    ("(EngineCore_0 pid=7) ERROR 10-23 11:30:25 [core.py:779] boom", "boom", {"rank": "EngineCore_0"}),
    ("(EngineCore_DP0 pid=5014) ERROR 10-23 11:30:25 [core.py:779] boom", "boom", {"rank": "DP0"}),
    ("sglang-1  | [2026-05-30 14:47:43 TP0] hi", "hi", {"source": "sglang-1", "rank": "TP0"}),
    ("2024-06-28T06:11:52.685300953Z (LLMRayActor pid=20770) ERROR 06-28 06:11:45 worker_base.py:145] x", "x",
     {"rank": "LLMRayActor"}),
    ("[rank2]:   File \"a.py\", line 1, in f", '  File "a.py", line 1, in f', {"rank": "rank2"}),
    ("\x1b[32m[2026-05-30 14:47:43 TP1]\x1b[0m \x1b[1;31mERROR\x1b[0m colour", "ERROR colour", {"rank": "TP1"}),
    ("Loading safetensors checkpoint shards:  25% Completed\rLoading safetensors checkpoint shards: 100% Completed",
     "Loading safetensors checkpoint shards: 100% Completed", {}),
    ("/tmp/x/cuda_utils.c:7:10: fatal error: Python.h: No such file or directory",
     "/tmp/x/cuda_utils.c:7:10: fatal error: Python.h: No such file or directory", {}),
])
def test_strip_prefixes(raw, text, info):
    got_text, got_info = strip_prefixes(raw)
    assert got_text == text
    for key, value in info.items():
        assert got_info.get(key) == value, (key, got_info)


def test_journal_cat_output_is_taken_as_is():
    lines = normalize("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nValueError: x\n")
    assert [ln.text for ln in lines] == ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "ValueError: x"]
    assert all(ln.rank is None for ln in lines)


def test_continuation_rank_stops_at_unrelated_output():
    lines = normalize("\n".join([
        sg("TP1", "Load weight end. type=X"),
        "/tmp/x.c:7:10: fatal error: Python.h: No such file or directory",  # gcc, not TP1's record
        "    7 | #include <Python.h>",
        sg("TP0", "Scheduler hit an exception: Traceback (most recent call last):"),
        '  File "/a/b.py", line 1, in f',
        "subprocess.CalledProcessError: Command 'gcc' returned non-zero exit status 1.",
        "",
        "Loading safetensors checkpoint shards: 100% Completed",
    ]))
    assert [ln.rank for ln in lines] == ["TP1", None, None, "TP0", "TP0", "TP0", "TP0", None]


# The same log, as other transports and pastes deliver it: each must come out as the bare log does.
PASTE_FORMS = {
    "CRLF line ends and ANSI colours": lambda s: "\r\n".join(f"\x1b[32m{x}\x1b[0m" if x.strip() else x
                                                          for x in s.split("\n")),
    "Kubernetes container log (CRI)": lambda s: "\n".join(f"2025-07-25T07:53:08.217488644+08:00 stdout F {x}"
                                                          for x in s.split("\n")),
    "log shipper's UTC time": lambda s: "\n".join(f"2025-01-01T00:00:00.123456Z {x}" for x in s.split("\n")),
    "named container, compose style": lambda s: "\n".join(f"vllm-openai  | {x}" for x in s.split("\n")),
    "SGLang rank prefix": lambda s: "\n".join(f"[2025-01-01 00:00:00 TP3] {x}" if x.strip() else x
                                              for x in s.split("\n")),
    "Markdown quote, tab indents": lambda s: "\n".join(f"> {x}" for x in s.replace("    ", "\t").split("\n")),
    # copied from a web page without unescaping, or quoted as an indented block
    "HTML-escaped": lambda s: __import__("html").escape(s),
    "indented block": lambda s: "\n".join(f"    {x}" if x.strip() else x for x in s.split("\n")),
    # a CI log's gutter and timestamp
    "Buildkite gutter": lambda s: "\n".join(f"  | [2025-03-10T15:07:20Z] {x}" for x in s.split("\n")),
    # a program relaying the server's output through its own logger, at its own level
    "relayed by Python logging at INFO": lambda s: "\n".join(f"2025-03-07 23:50:27,531 - __main__ - INFO - {x}"
                                                              for x in s.split("\n")),
    "relayed by TorchServe at WARN": lambda s: "\n".join(
        f"2024-09-13T22:25:37,532 [WARN ] W-9000-model_1.0-stderr MODEL_LOG - {x}" for x in s.split("\n")),
    # what other tools write before every line they carry
    "kubectl logs --timestamps": lambda s: _before_each("2026-01-22T20:05:33.123456789Z ", s),
    "kubectl logs --prefix": lambda s: _before_each("[pod/sglang-0/sglang] ", s),
    "docker compose logs -t": lambda s: _before_each("sglang-1  | 2026-01-22T20:05:33.123456789Z ", s),
    "journalctl": lambda s: _before_each("Dec 02 13:31:17 b300 sglang[536]: ", s),
    "journalctl -o short-full": lambda s: _before_each("Wed 2026-12-02 13:31:17 UTC b300 sglang[536]: ", s),
    "docker compose over journald": lambda s: _before_each("sglang-1  | Dec 02 13:31:17 b300 sglang[536]: ", s),
    "a Ray task with no name": lambda s: _before_each("(pid=1234) ", s),
    "a Ray task on another node": lambda s: _before_each("(pid=1234, ip=10.0.0.2) ", s),
    "SkyPilot": lambda s: _before_each("(head, rank=0, pid=2345) ", s),
    "mpirun --tag-output": lambda s: _before_each("[1,0]<stderr>:", s),
    "a bare time": lambda s: _before_each("2026-01-22 20:05:33 ", s),
    "a bare time and a tab": lambda s: _before_each("2026-01-22 20:05:33.123\t", s),
    "a time of day": lambda s: _before_each("20:05:33 ", s),
    "a launcher relaying its child": lambda s: _before_each("[2026-01-22 20:05:33] [/bin/sh]: ", s),
    "Loki's logcli": lambda s: _before_each('2026-01-22T20:05:33Z {container="sglang", pod="sglang-0"} ', s),
    "relayed by Loguru at ERROR": lambda s: _before_each("2026-01-22 20:05:33.123 | ERROR    | __main__:run:42 - ", s),
    "cat -n": lambda s: "\n".join(f"{n:6}\t{x}" for n, x in enumerate(s.split("\n"), 1)),
    # each line carried as a JSON record: docker's json-file driver, a shipper (Vector), a Cloud Logging export,
    # and `journalctl -o json`, which writes a line holding a control character (a colour code) as its bytes
    "docker's json-file log": lambda s: _as_records(s, lambda x: {"log": x + "\n", "stream": "stderr",
                                                                  "time": "2026-01-22T20:05:33.123456789Z"}),
    "shipped by Vector": lambda s: _as_records(s, lambda x: {"message": x, "source_type": "docker_logs",
                                                             "timestamp": "2026-01-22T20:05:33.123Z"}),
    "Cloud Logging export": lambda s: _as_records(s, lambda x: {"textPayload": x, "severity": "ERROR",
                                                                "resource": {"type": "k8s_container"}}),
    "journalctl -o json, colours kept": lambda s: _as_records(s, lambda x: {
        "__REALTIME_TIMESTAMP": "1769112333123456", "_SYSTEMD_UNIT": "sglang.service", "PRIORITY": "6",
        "MESSAGE": list(f"\x1b[32m{x}\x1b[0m".encode()) if x.strip() else x}),
    # a program quoting the log it reports as a failure, its line breaks escaped (a traceback marks it as a log)
    "quoted in a JSON string": lambda s: json.dumps({"detail": s}) if "Traceback (most recent call last)" in s else s,
    # a log viewer's export, newest first: Loki's logcli by default, Grafana's, Cloud Logging's
    "newest first, as logcli prints it": lambda s: "\n".join(reversed([
        f'2026-01-22T20:05:33.{n:09d}Z {{container="sglang"}} {x}' for n, x in enumerate(s.split("\n"))])),
    # a person's words around the paste
    "a question around the paste": lambda s: ("When I start the server I get this error:\n\n" + s
                                              + "\n\nAny idea how to fix this? Thanks!"),
    # a label is read over the whole paste: on one or two lines it may be a message ("0: x"), so it is left there
    "srun --label": lambda s: _before_each("0: ", s) if _filled(s) >= 3 else s,
    "pdsh": lambda s: _before_each("gpu-node-3: ", s) if _filled(s) >= 3 else s,
    # CI systems, schedulers and terminals (docs/diagnose.md, "More transport forms")
    "GitLab CI job log with timestamps": lambda s: _gitlab_timestamped(s),
    "docker service logs": lambda s: _before_each("sglang.1.x7k2m9p4q1rs@gpu-node-1    | ", s),
    "aws logs tail": lambda s: _before_each("2026-01-22T20:05:33.123000+00:00 ecs/sglang/4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a99 ", s),
    # stern's names are read over the whole paste, as a label is: on one line two lowercase words may be a message
    "stern": lambda s: _before_each("\x1b[32msglang-7d9f8b6c5-x2k4p\x1b[0m \x1b[34msglang\x1b[0m ", s)
    if _filled(s) >= 3 else s,
    "colour codes that lost their escape byte": lambda s: "\n".join(f"[0;31m{x}[0m" if x.strip() else x
                                                                      for x in s.split("\n")),
    # what a viewer or a search numbers every line with, and a web page or a chat client puts in for the characters
    # (docs/diagnose.md, "Copied through a viewer, a search or a web page")
    # (a number is read over the whole paste: one or two numbered lines may be a message, "404 not found", left there)
    # Python 3.11+'s exception group (anyio's, asyncio's task groups) around a traceback that starts a line: its
    # borders ("| ", rules) before every line (docs/diagnose.md, "Exception groups")
    "an exception group around the traceback": lambda s: _exception_group(s),
    # a traceback raised in a notebook cell, as IPython 8 prints it (docs/diagnose.md, "IPython's tracebacks")
    "IPython's traceback in a notebook": lambda s: _ipython(s),
    # another version's quoting of a name in the message: "x" or `x` for 'x' (docs/diagnose.md, "Any quote")
    "names quoted in double quotes and backticks": lambda s: _requoted(s),
    # a tracker or an editor that turned every line break into two (read over the paste: three lines apart may be
    # a person's paragraphs, left so)
    "a blank line after every line": lambda s: "\n\n".join(s.split("\n")) if _filled(s) >= 4 else s,
    "grep -Hn -C, its groups apart": lambda s: _grep_context(s) if _filled(s) >= 3 else s,
    "less -N": lambda s: "\n".join(f"{n:>7} {x}" for n, x in enumerate(s.split("\n"), 1)) if _filled(s) >= 3 else s,
    "a web page's spaces, curly quotes, zero-width spaces": lambda s: s.replace(" ", "\xa0").replace(
        "'", "\u2019").replace('"', "\u201d").replace("\n", "\u200b\n"),
    # DJL Serving (SageMaker's LMI containers) relaying its Python worker's output at INFO, as its console logs it
    "relayed by DJL Serving at INFO": lambda s: _before_each("[INFO ] PyProcess - W-210-model-stdout: ", s),
    # LocalAI relaying its vLLM backend's output at DEBUG
    "relayed by LocalAI at DEBUG": lambda s: _before_each("5:32AM DBG GRPC(qwen-127.0.0.1:43735): stderr ", s),
    # a traceback drawn in a rich panel, as typer's pretty exceptions draw it (docs/diagnose.md, "Rich's panels")
    "rich's boxed traceback": lambda s: _rich_panels(s),
    # a service's output forwarded through rsyslog: its colour codes and carriage returns escaped as "#033", "#015"
    "forwarded through rsyslog": lambda s: _before_each("Dec  2 13:31:17 b300 sglang[536]: ", "\n".join(
        f"#033[0;32m{x}#033[0m#015" if x.strip() else x for x in s.split("\n"))),
}


def _exception_group(text: str) -> str:
    """The paste as a sub-exception of an ExceptionGroup that anyio raised, as Python 3.12 prints it; a paste with no
    traceback starting a line as it is (a group holds tracebacks, not a logger's records)."""
    if "\nTraceback (most recent call last)" not in "\n" + text:
        return text
    head = ["  + Exception Group Traceback (most recent call last):",
            '  |   File "/usr/lib/python3.12/site-packages/anyio/_backends/_asyncio.py", line 680, in __aexit__',
            "  |     raise BaseExceptionGroup(",
            "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
            "  +-+---------------- 1 ----------------"]
    return "\n".join(head + [f"    | {line}" for line in text.split("\n")] + ["    +" + "-" * 36])


_PY_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')


def _ipython(text: str) -> str:
    """Every traceback that starts a line re-printed as IPython 8 prints it: a rule, the exception's name over the
    title, "File <path>:<line>, in <function>()" and the line that ran behind an arrow, a blank line between frames."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last)"):
            out.append(lines[i])
            i += 1
            continue
        frames, i = [], i + 1
        while i < len(lines) and (lines[i][:1].isspace() or not lines[i].strip()):
            m = _PY_FRAME.match(lines[i])
            if m:
                frames.append([m[1], m[2], m[3], ""])
            elif frames and lines[i].strip().strip("^~"):
                frames[-1][3] = lines[i].strip()
            i += 1
        name = lines[i].split(":")[0].rsplit(".", 1)[-1] if i < len(lines) else "Exception"
        out += ["-" * 75, f"{name:<42}Traceback (most recent call last)"]
        for path, line, func, code in frames:
            out += [f"File {path}:{line}, in {func}()", f"--> {line:>4} {code}", ""]
    return "\n".join(out)


def _rich_panels(text: str, width: int = 100) -> str:
    """Every traceback that starts a line drawn as rich draws it (rich/traceback.py): a panel of the panel's width
    titled "Traceback (most recent call last)", each frame's title "<path>:<line> in <function>" wrapped at its
    spaces (a word wider than the panel folded), the line that ran behind "❱" and its number, and under the panel the
    exception by its class's name alone."""
    lines, out, i = text.split("\n"), [], 0
    inner = width - 4
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last)"):
            out.append(lines[i])
            i += 1
            continue
        body, ran, i = [], "", i + 1
        while i < len(lines) and (lines[i][:1].isspace() or not lines[i].strip()):
            m = _PY_FRAME.match(lines[i])
            if m:
                body += ([""] if body else []) + _rich_wrapped(f"{m[1]}:{m[2]} in {m[3]}", inner)
                ran = m[2]
            elif ran and lines[i].strip().strip("^~"):
                body += ["", f"❱ {ran} │ {lines[i].strip()}"[:inner]]
                ran = ""
            i += 1
        title = " Traceback (most recent call last) "
        left = (width - 2 - len(title)) // 2
        out += ["╭" + "─" * left + title + "─" * (width - 2 - left - len(title)) + "╮"]
        out += [f"│ {x:<{inner}} │" for x in body] + ["╰" + "─" * (width - 2) + "╯"]
        if i < len(lines):
            name, sep, rest = lines[i].partition(":")
            lines[i] = name.rsplit(".", 1)[-1] + sep + rest if " " not in name else lines[i]
    return "\n".join(out)


def _rich_wrapped(title: str, inner: int) -> list[str]:
    """A frame's title as rich wraps it in a panel: at its spaces, a word wider than the panel folded."""
    rows = [""]
    for word in title.split(" "):
        if rows[-1] and len(rows[-1]) + 1 + len(word) <= inner:
            rows[-1] += " " + word
            continue
        pieces = [word[k:k + inner] for k in range(0, len(word), inner)] or [""]
        rows = (rows if rows[-1] else rows[:-1]) + pieces
    return rows


def _requoted(text: str) -> str:
    """Every name in single quotes ('cutlass', '--tp') quoted in double quotes and backticks by turns."""
    marks = iter(['"', "`"] * len(text))
    return re.sub(r"'([\w./:-]+)'", lambda m: (q := next(marks)) + m[1] + q, text)


def _grep_context(text: str) -> str:
    """`grep -Hn -C` over a server's log: the file's name and the line number before each line, ':' after a matching
    one's and '-' after a context line's; at the log's first blank line, "--" and the next group 40 lines on (a
    break the blank line made already: the paste reads the same)."""
    out, skip = [], 0
    for n, line in enumerate(text.split("\n"), 1):
        if not line and not skip:
            out.append("--")
            skip = 40
            continue
        sep = ":" if "rror" in line else "-"
        out.append(f"logs/server.log{sep}{n + skip}{sep}{line}")
    return "\n".join(out)


def _gitlab_timestamped(text: str, part: int = 60) -> str:
    """GitLab runner's FF_TIMESTAMPS header on every line, a line longer than ``part`` flushed in parts ('+')."""
    return "\n".join(f"2026-01-22T20:05:33.123456Z 01E{' ' if i == 0 else '+'}{x[i:i + part]}"
                     for x in text.split("\n") for i in range(0, max(len(x), 1), part))


def _before_each(prefix: str, text: str) -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


def _as_records(text: str, record) -> str:
    return "\n".join(json.dumps(record(line)) for line in text.split("\n"))


def _filled(text: str) -> int:
    return sum(1 for line in text.split("\n") if line.strip())


# Fixtures one paste form turns into another class, and why (like KNOWN_MISSES, each asserted exactly).
KNOWN_FORM_MISSES: dict[tuple[str, str], tuple[str, str]] = {
    # the twenty-ninth round: a Markdown quote around a log that is itself one quoted klog line
    ("Markdown quote, tab indents", "cuda_oom/llm-d-fma-746-dpc-wake-up-500-cuda-error-out-of-memory"): (
        "cuda_oom", "under a second Markdown quote ('> > ') the response body's 'CUDA Error: out of memory' names the "
                    "class (its true class, unlike the bare paste); why the form differs was not investigated"),
    # the thirty-second round: the traceback under a vLLM WARNING record is read as that record's only while its
    # lines carry the process prefix alone; this form puts a time-bearing SGLang prefix on every line, so each
    # opens a record of its own and the tier names the 504 as before the round (real logs do not stack the two)
    ("SGLang rank prefix", "healthy/src-vllm-hub-unreachable-warning-with-traceback"): (
        "hf_gated_repo", "every traceback line under a second, timed prefix opens its own record and loses the "
                         "WARNING level; the HfHubHTTPError 504 then gives the Hub class its key-token points"),
    # the thirty-seventh round: a tuning miss the key-token tier names cuda_graph_capture at 0.45 in its bare paste
    ("SGLang rank prefix", "unknown/sglang-26987-dsv4-pro-b300-graph-replay-illegal-memory-xid31"): (
        "unknown", "under a timed SGLang prefix on every line the tier no longer gives the capture class its 2-point "
                   "lead and the log comes out as labelled (unknown); why the form differs was not investigated"),
}


# a group raised around a warning's traceback: the ExceptionGroup is raised, so the paste is a failure
KNOWN_FORM_MISSES[("an exception group around the traceback", "healthy/src-sglang-hf-quant-config-retry-tracebacks")] = (
    "unknown", "the form raises an ExceptionGroup around tracebacks SGLang logged as warnings: a raised group no "
               "signature names is an unrecognised failure, as it should be")
KNOWN_FORM_MISSES[("IPython's traceback in a notebook", "healthy/src-sglang-hf-quant-config-retry-tracebacks")] = (
    "unknown", "the form prints tracebacks SGLang logged as warnings as IPython prints a raised one (a header naming "
               "the exception): read as raised, an unrecognised failure")
# round 172: a lone line that says a check which can never fail did is a failure only as a message pasted alone; behind a
# logger's or launcher's prefix, or with a question around it, it is a line of a log that may be healthy (a program's own
# print says such things and goes on), so it stays healthy there
KNOWN_FORM_MISSES.update({
    (form, "unknown/sglang-14368-spec-pd-new-indices-topk-p-mismatch"): (
        "healthy", "a broken invariant's words alone are a failure only in a message pasted alone (_message_alone)")
    for form in ("SGLang rank prefix", "SkyPilot", "a question around the paste", "a Ray task on another node")})
# round 82: a two-line hard-wrapped vLLM startup refusal ("Free memory on device ... on startup is" / "less than
# desired GPU memory utilization ...") behind a timed logger's prefix on every line: two records, not one message
# wrapped (a launcher's process prefix on both lines is one message: normalize._same_process), so neither half
# carries the whole message the signature reads; round 84's log wraps the same refusal one word earlier
KNOWN_FORM_MISSES.update({
    ("SGLang rank prefix", fixture): (
        "unknown", "under a timed logger's prefix on every line the hard-wrapped free-memory refusal is two records")
    for fixture in ("cuda_oom/cognithor-pr-317-desktop-gpu-free-memory-below-095",
                    "cuda_oom/edutelligence-570-logos-planner-tp2-gpu0-occupied")})


# Each form diagnoses a quarter of the fixtures, a different quarter for each of four forms in turn, so every fixture
# meets a quarter of the forms (about thirteen): a form that breaks a shape of log breaks it in many fixtures, and the
# whole matrix (every fixture in every form) grew by fifty diagnoses with every log a round added. A third, until the
# suite outgrew its 30 minutes. The pairs KNOWN_FORM_MISSES names are always diagnosed, so each stays asserted;
# NODERIG_DIAGNOSE_EVERY_FORM=1 diagnoses every pair (after a change to normalize or to the forms).
FORM_SHARE = 1 if os.environ.get("NODERIG_DIAGNOSE_EVERY_FORM") == "1" else 4


def form_fixtures(form: str) -> list[Path]:
    turn = list(PASTE_FORMS).index(form) % FORM_SHARE
    return [path for path in ALL_FIXTURES
            if zlib.crc32(fixture_id(path).encode()) % FORM_SHARE == turn or (form, fixture_id(path)) in KNOWN_FORM_MISSES]


def test_the_forms_share_every_fixture_and_keep_every_known_form_miss():
    shares = [set(form_fixtures(form)) for form in PASTE_FORMS]
    assert set().union(*shares) == set(ALL_FIXTURES)
    assert all(path in form_fixtures(form) for form, fid in KNOWN_FORM_MISSES for path in ALL_FIXTURES
               if fixture_id(path) == fid)
    assert all(len(share) >= len(ALL_FIXTURES) // (FORM_SHARE + 1) for share in shares)  # no form left nearly empty


@pytest.mark.slow  # a quarter of the fixtures in each of about fifty forms: minutes, and grows with every round of logs
@pytest.mark.parametrize("form", PASTE_FORMS)
def test_every_fixture_survives_other_paste_forms(form):
    wrong = []
    for path in form_fixtures(form):
        got = diagnose(PASTE_FORMS[form](fixture_text(path))).cls
        want = KNOWN_FORM_MISSES.get((form, fixture_id(path)), (expected_class(path), ""))[0]
        if got != want:
            wrong.append(f"{fixture_id(path)} -> {got}")
    assert not wrong, "\n".join(wrong)


def test_hard_wrapped_paste_is_rejoined():
    width = 80
    long_msg = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can "
                "be stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
                "when initializing the engine.")
    frame = '  File "/home/user/miniconda3/lib/python3.12/site-packages/vllm/engine/llm_engine.py", line 309, in from_engine_args'
    original = ["Traceback (most recent call last):", frame, "    engine = cls(*engine_configs,", long_msg]
    wrapped = []
    for line in original:
        wrapped += [line[i:i + width] for i in range(0, len(line), width)]
    lines = [ln.text for ln in normalize("\n".join(wrapped)) if ln.text]
    assert lines == original
    d = diagnose("\n".join(wrapped))
    assert d.cls == "kv_cache_insufficient" and d.chain == ["llm_engine.from_engine_args"]


def test_a_message_wrapped_under_a_launchers_process_prefix_is_read_whole():
    # Ray (like SkyPilot, mpirun and docker compose) prefixes every line a process prints, its message's second line
    # too: the two halves are one message, as without the prefix (round 82's cognithor log behind Ray)
    halves = ["ValueError: Free memory on device cuda:0 (30.12/31.84 GiB) on startup is",
              "less than desired GPU memory utilization (0.95, 30.25 GiB)."]
    assert diagnose("\n".join(f"(EngineCore pid=88) {h}" for h in halves)).cls == "cuda_oom"
    lines = normalize("(EngineCore pid=88) first\n(EngineCore pid=88) second\n(EngineCore pid=89) third")
    assert with_continuation(lines, 0)[1] == "second"
    assert with_continuation(lines, 1)[1] is None  # another process's line
    # a logger's record is one record per line, whatever its prefix: never joined
    timed = normalize("[2026-01-01 10:00:00 TP0] first\n[2026-01-01 10:00:00 TP0] second")
    assert with_continuation(timed, 0)[1] is None


def test_frame_line_cut_inside_its_path_is_rejoined():
    text = "\n".join([
        "ERROR 03-25 02:21:41 [engine.py:448] Traceback (most recent call last):",
        '  File "/home/user/miniconda3/lib/python3.12/site-',
        'packages/vllm/model_executor/models/utils.py", line 235, in load_weights',
        "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
    ])
    (tb,) = parse_tracebacks(normalize(text))
    assert traceback_chain(tb) == ["utils.load_weights"]


# --------------------------------------------------------------------------------------------
# catalog, report, JSON


def test_catalog_is_versioned_data():
    raw = CATALOG_PATH.read_text()
    assert raw.lstrip().splitlines()[0].startswith("#") and "\nversion = 1\n" in raw
    cat = load_catalog()
    assert cat.version == 1 and len(cat.ids) == len(set(cat.ids))
    for c in cat.classes:
        assert c.title and c.meaning and c.fix and c.evidence
        for rid in [c.remedy, *c.alternatives]:
            assert rid is None or REMEDY_FORMS.match(rid), (c.id, rid)
        for _, rid in c.remedies:  # "" says the class's remedy does not apply to that variant
            assert rid == "" or REMEDY_FORMS.match(rid), (c.id, rid)
    assert not cat.index.always, "every signature needs a literal word or substring (keeps 50k-line logs fast)"


def test_catalog_version_and_regex_errors_are_refused(tmp_path):
    bad = tmp_path / "catalog.toml"
    bad.write_text("version = 99\n")
    with pytest.raises(CatalogError, match="version"):
        load_catalog(bad)
    bad.write_text('version = 1\n[[class]]\nid = "x"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["(unclosed"]\n')
    with pytest.raises(CatalogError, match="bad regex"):
        load_catalog(bad)


def test_json_form_has_the_contract_fields():
    d = diagnose(VISION.read_text())
    data = json.loads(to_json(d))
    assert data["class"] == "flash_attn_cute_missing"
    for key in ("cause", "evidence", "chain", "fix", "remedy", "confidence"):
        assert key in data
    assert all(set(e) >= {"line", "rank"} for e in data["evidence"])
    assert data["chain"][0] == "scheduler.run_scheduler_process"
    assert json.loads(d.to_json()) == data


def test_readable_report_shows_class_cause_evidence_chain_fix():
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(render(diagnose(VISION.read_text())))
    out = console.export_text()
    for needle in ("flash_attn_cute_missing", "TP1", "mm_utils._get_chunked_embedding_by_item -> "
                   "kimi_k25.get_image_feature", "--skip-server-warmup", "evidence", "fix"):
        assert needle in out


def test_the_reports_quote_the_log_without_running_its_control_codes():
    # a log may quote a client's request: a terminal reset (ESC c), a bidirectional override, a bell, a NUL in the
    # exception's message reach neither the CLI's report nor the deploy's lines, and a token in it is redacted
    import io

    from rich.console import Console

    from operations.diagnosis import report_lines

    token = "hf_" + "Ab1" * 12
    d = diagnose("Traceback (most recent call last):\n  File \"/x.py\", line 1, in <module>\n"
                 f"RuntimeError: CUDA out of memory \x1bc\u202eevil\x07 \x00 {token}")
    assert d.cls == "cuda_oom"
    terminal = io.StringIO()
    Console(file=terminal, force_terminal=True, width=200).print(render(d))
    for out in (terminal.getvalue(), "\n".join(report_lines(d))):
        assert not any(code in out for code in ("\x1bc", "\u202e", "\x07", "\x00", token)), repr(out)
        assert "CUDA out of memory \\x1bc\\u202eevil\\x07 \\x00 hf_<redacted>" in out, out


def test_the_json_form_escapes_what_a_terminal_would_act_on_and_decodes_to_the_same_text():
    # DEL, a C1 CSI and a bidirectional override in a quoted line: \\u escapes in the JSON text, the same characters
    # once decoded; other non-ASCII stays readable
    from noderig.diagnose.report import to_json

    d = diagnose("Traceback (most recent call last):\n  File \"/x.py\", line 1, in <module>\n"
                 "RuntimeError: CUDA out of memory \x9b2J \u202eevil\x7f 日本")
    text = to_json(d)
    assert not any(ch in text for ch in "\x9b\u202e\x7f") and "日本" in text, text
    assert "\\u009b2J \\u202eevil\\u007f" in text
    assert json.loads(text) == d.to_dict() and json.loads(d.to_json(indent=None)) == d.to_dict()


# --------------------------------------------------------------------------------------------
# three outcomes: a known class, unknown (a failure no signature knows), healthy (ready or not yet)


STARTING = [  # an SGLang startup cut before the ready line, with the lines issue 13 says look alarming
    sg(None, "server_args=ServerArgs(model_path='/m', tp_size=2, skip_server_warmup=False)"),
    "2025-02-25 08:37:29,910 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend",
    sg("TP0", "Load weight begin. avail mem=78.50 GB"),
    sg("TP0", "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=60.48 GB, mem usage=15.28 GB."),
    sg("TP0", "CUTLASS backend is disabled when piecewise cuda graph is enabled due to TMA descriptor initialization "
              "issues on SM100 GPUs. Using auto backend instead for stability."),
    sg("TP0", "Capture cuda graph end. Time elapsed: 5.38 s. mem usage=0.60 GB. avail mem=23.56 GB."),
    "/opt/venv/lib/python3.12/site-packages/torch/_dynamo/variables/functions.py:1575: UserWarning: Dynamo detected "
    "a call to a `functools.lru_cache`-wrapped function. Dynamo ignores the cache wrapper and directly traces the "
    "wrapped function. Silent incorrectness is only a *potential* risk, not something we have observed. Enable "
    'TORCH_LOGS="+dynamo" for a DEBUG stack trace.',
    "  torch._dynamo.utils.warn_once(msg)",
    sg(None, "Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use "
             "'/model_info' instead."),
]


def test_a_startup_cut_before_ready_is_healthy_with_its_stage():
    d = diagnose("\n".join(STARTING))
    assert d.cls == "healthy" and d.healthy and not d.ready
    assert d.stage == "process started, loading weights, weights loaded, CUDA graphs captured, not yet ready"
    assert d.remedy is None and "still starting" in d.cause
    data = json.loads(d.to_json())
    assert data["ready"] is False and data["stage"].endswith("not yet ready")


def test_the_same_startup_with_its_ready_line_is_healthy_and_ready():
    d = diagnose("\n".join([*STARTING, sg(None, "The server is fired up and ready to roll!")]))
    assert d.cls == "healthy" and d.ready and d.stage.endswith(", ready")
    assert "fired up" in d.evidence[0].line


@pytest.mark.parametrize("failure", [
    "ValueError: something no signature knows",
    "Traceback (most recent call last):\n  File \"/x/sglang/srt/a.py\", line 1, in f\nKeyError: 'x'",
    "Segmentation fault (core dumped)",
    sg(None, "Received sigquit from a child process. It usually means the child failed."),
    "ERROR 04-30 10:20:36 [core.py:396] EngineCore failed to start.",  # an ERROR record, no exception word
])
def test_a_failure_no_signature_knows_is_unknown(failure):
    d = diagnose("\n".join([*STARTING, failure]))
    assert d.cls == "unknown" and not d.healthy and d.remedy is None
    assert d.evidence and d.cause.startswith("unrecognised failure")


def test_after_ready_only_a_dead_process_is_a_failure():
    ready = [*STARTING, sg(None, "The server is fired up and ready to roll!")]
    request_error = ["Traceback (most recent call last):", '  File "/x/fastapi/routing.py", line 3, in app',
                     "KeyError: 'messages'"]  # one bad request: the server keeps serving
    assert diagnose("\n".join([*ready, *request_error])).healthy
    died = "Dec 02 13:31:17 b300 systemd[1]: sglang.service: Main process exited, code=killed, status=9/KILL"
    assert diagnose("\n".join([*ready, died])).cls == "unknown"


@pytest.mark.parametrize("benign", [
    "flashinfer.jit: Prebuilt kernels not found, using JIT backend",
    "[ERROR] `min_frames` is part of Qwen3VLVideoProcessorInitKwargs, but not documented. Make sure to add it to "
    "the docstring of the function in /v/transformers/models/qwen3_vl/video_processing_qwen3_vl.py.",
    "Ignore import error when loading sglang.srt.models.mllama4: No module named 'flash_attn.cute'",
    "The `use_fast` parameter is deprecated and will be removed in a future version.",
    'loc("/opt/sglang/srt/layers/attention/triton_ops/extend_attention.py":128:22): error: operation scheduled '
    "before its operands",
])
def test_each_benign_trap_alone_is_healthy(benign):
    d = diagnose("\n".join([sg(None, "server_args=ServerArgs(model_path='/m')"), benign]))
    assert d.cls == "healthy" and not d.ready, d.cause


@pytest.mark.parametrize("caption", [
    "When I start the server I get this error:", "I got the following error:", "we keep getting this crash.",
    "After upgrading to 0.5.6 I see this traceback:",
])
def test_a_person_s_caption_above_a_paste_is_no_failure(caption):
    assert diagnose("\n".join([caption, sg(None, "server_args=ServerArgs(model_path='/m')")])).cls == "healthy"


@pytest.mark.parametrize("line", [
    "error: invalid argument: -V", "Error log: /var/log/sglang.log is not writable: Permission denied",
    "Error message: CUDA out of memory", "I get this error: RuntimeError: CUDA error: out of memory",
])
def test_a_log_line_with_a_caption_s_words_stays_a_failure(line):
    assert diagnose("\n".join([sg(None, "server_args=ServerArgs(model_path='/m')"), line])).cls != "healthy"


def test_benign_text_glued_to_a_real_error_does_not_hide_it():
    # DeepGEMM prints its warning without a newline, so the nvcc failure shares its line
    text = ("Warning: please use at least NVCC 12.9 for the best DeepGEMM performanceNVCC compilation failed: "
            "nvcc fatal   : Unsupported gpu architecture 'sm_100f'")
    assert diagnose(text).cls == "deepgemm_jit_failure"


def test_warning_records_with_tracebacks_are_not_failures():
    # torch.compile's "WON'T CONVERT" notes carry a traceback inside WARNING records
    lines = [f"[rank0]:W0430 10:21:34.351000 19593 torch/_dynamo/convert_frame.py:1233] {x}" for x in (
        "WON'T CONVERT run /usr/local/lib/python3.10/dist-packages/flashinfer/mla.py line 287", "due to:",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/_dynamo/convert_frame.py", line 1164, in __call__',
        "torch._dynamo.exc.Unsupported: call_function UserDefinedClassVariable")]
    assert diagnose("\n".join([*STARTING, *lines])).healthy


@pytest.mark.parametrize("quiet", [
    # a setting that names a timeout is no timeout (the NCCL class's symptom words)
    "[2025-01-01 00:00:01 TP0] NCCL timeout is set to 600 s",
    "INFO 01-01 00:00:01 [parallel_state.py:1] Using NCCL collective timeout of 1800s",
    # a record its logger marked WARNING, whose words are another class's evidence
    "WARNING 01-01 00:00:01 [config.py:1] Bfloat16 is only supported on GPUs with compute capability of at "
    "least 8.0, falling back to float16",
    # Python's and torch's warnings, whatever they quote
    "/usr/lib/python3/dist-packages/torch/_inductor/utils.py:1: UserWarning: failed to import a kernel, error: x",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect, error: connection refused",
])
def test_settings_and_warnings_that_name_a_cause_are_not_failures(quiet):
    d = diagnose("\n".join([*STARTING, quiet]))
    assert (d.cls, d.ready) == ("healthy", False), d.cause


@pytest.mark.parametrize("last", ["AssertionError", "  torch.OutOfMemoryError  ", "KeyboardInterrupt"])
def test_an_exception_line_without_a_message_is_a_failure(last):
    assert diagnose("\n".join([*STARTING, last])).cls != "healthy"


def test_a_warning_that_names_a_cause_explains_a_later_unknown_crash():
    warned = "WARNING 01-01 00:00:01 [config.py:1] Bfloat16 is only supported on GPUs with compute capability of at least 8.0"
    crash = ["Traceback (most recent call last):", '  File "/x/vllm/worker.py", line 1, in f', "    g()",
             "RuntimeError: boom"]
    assert diagnose("\n".join([*STARTING, warned, *crash])).cls == "unsupported_gpu_arch"
    # but an error record is decisive on its own, and a later decisive error wins over the warning
    assert diagnose("\n".join([*STARTING, warned.replace("WARNING", "ERROR")])).cls == "unsupported_gpu_arch"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert diagnose("\n".join([*STARTING, warned, *crash[:-1], oom])).cls == "cuda_oom"


def test_readable_report_of_a_startup_shows_its_stage():
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(render(diagnose("\n".join(STARTING))))
    out = console.export_text()
    assert "stage: process started, loading weights, weights loaded, CUDA graphs captured, not yet ready" in out
    rows = [row.strip("│ ").strip() for row in out.split("stage:")[1].splitlines()]
    assert "fix" not in rows  # no fix heading: nothing to fix in a healthy log
    # not ready yet: where the error would be if the server stopped (a paste cut before it)
    assert "if the server stopped" in rows and "its error comes after the last line shown" in out
    console = Console(record=True, width=200)
    console.print(render(diagnose("\n".join(STARTING + ["[2026-01-02 10:00:09] The server is fired up and ready to roll!"]))))
    assert "if the server stopped" not in console.export_text()  # ready: no such hint


# --------------------------------------------------------------------------------------------
# classes added for issue 13, and variants that must land in their class


CUTE_IMPORT_ATTRIBUTE_ERROR = "\n".join([
    sg("TP0", "Scheduler hit an exception: Traceback (most recent call last):"),
    '  File "/v/sglang/srt/layers/attention/vision.py", line 40, in <module>',
    "    from flash_attn.cute import flash_attn_varlen_func",
    '  File "/v/flash_attn/cute/__init__.py", line 7, in <module>',
    "    from .interface import flash_attn_func",
    '  File "/v/flash_attn/cute/flash_fwd_sm100.py", line 33, in <module>',
    "    cute.arch.griddepcontrol_wait()",
    "AttributeError: module 'cutlass.cute.arch' has no attribute 'griddepcontrol_wait'",
])


def test_attribute_error_inside_the_flash_attn_cute_import_is_fa4_missing():
    d = diagnose(CUTE_IMPORT_ATTRIBUTE_ERROR)
    assert d.cls == "flash_attn_cute_missing" and d.remedy == "add_flag:--skip-server-warmup"
    assert d.ranks == ["TP0"] and d.evidence[0].line.startswith("AttributeError: module 'cutlass.cute.arch'")


def test_the_same_attribute_error_outside_flash_attn_is_cute_dsl_skew():
    text = CUTE_IMPORT_ATTRIBUTE_ERROR.replace("/v/flash_attn/cute/", "/v/flashinfer/cute_dsl/").replace(
        "from flash_attn.cute import", "from flashinfer.cute_dsl import")
    d = diagnose(text)
    assert d.cls == "cute_dsl_version_skew" and d.remedy == "resync_venv"


def test_exception_signature_needs_the_module_path_of_the_frames():
    # an AttributeError whose frames are outside the CuTe DSL and whose message names no cutlass module
    text = "\n".join(["Traceback (most recent call last):", '  File "/v/vllm/worker.py", line 1, in f',
                      "AttributeError: 'NoneType' object has no attribute 'cute'"])
    assert diagnose(text).cls == "unknown"


def test_an_exception_line_pasted_without_its_traceback_meets_the_exception_signatures(mini):
    # type and message tokens; the module a message names stands for the frames' paths
    assert mdx(mini, "DeltaError: the delta says no").cls == "gamma"
    assert mdx(mini, "GammaError: cannot import name 'x' from 'gammamod' (/v/gammamod/__init__.py)").cls == "gamma"
    assert mdx(mini, "GammaError: from elsewhere").cls == "unknown"  # neither the frames nor the message name it
    # a message wrapped onto the next line is read whole
    assert mdx(mini, "DeltaError: the delta", "says no, wrapped").cls == "gamma"
    # in a WARNING record it is a symptom: nothing failed
    assert mdx(mini, "WARNING 01-01 00:00:01 [x.py:1] DeltaError: the delta says no").cls == "healthy"


def test_a_traceback_cut_before_its_exception_names_the_module_it_stopped_in(mini):
    frames = ["Traceback (most recent call last):", '  File "/v/app/main.py", line 3, in <module>', "    run()"]
    # the innermost frame is in the gamma signature's module: a symptom of gamma, and a traceback failed
    d = mdx(mini, *frames, '  File "/v/gammamod/core.py", line 9, in run', "    step()")
    assert (d.cls, d.confidence) == ("gamma", 0.6)
    # only the innermost frame counts: it stopped elsewhere, so what failed is unknown
    assert mdx(mini, '  File "/v/gammamod/core.py", line 9, in run', *frames[1:]).cls == "unknown"
    # with its exception line, the exception signature decides (type and module)
    assert mdx(mini, *frames, '  File "/v/gammamod/core.py", line 9, in run', "OtherError: x").cls == "unknown"
    # a cut traceback inside a WARNING record is no failure
    warned = [f"WARNING 01-01 00:00:01 [x.py:1] {x}" for x in (*frames, '  File "/v/gammamod/core.py", line 9, in run')]
    assert mdx(mini, *warned).cls == "healthy"


@pytest.mark.parametrize("cls, lines, remedy", [
    ("sgl_kernel_mismatch", ["ImportError: /opt/venv/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so: "
                             "undefined symbol: _ZN3c104cuda9SetDeviceEab"], "resync_venv"),
    ("sgl_kernel_mismatch", ["Traceback (most recent call last):",
                             '  File "/v/sglang/srt/layers/moe/fused_moe.py", line 9, in <module>',
                             '  File "/v/sgl_kernel/__init__.py", line 13, in <module>',
                             "ImportError: cannot import name 'fused_marlin_moe' from 'sgl_kernel'"], "resync_venv"),
    ("deepgemm_jit_failure", ['RuntimeError: Assertion error (csrc/apis/../jit_kernels/impls/../../jit/compiler.hpp:176): '
                              'false and "NVCC compilation failed"'], None),
    ("toolkit_misconfigured", ["RuntimeError:", "The detected CUDA version (12.1) mismatches the version that was used "
                               "to compile", "PyTorch (12.8). Please make sure to use the same CUDA versions."], None),
    ("checkpoint_incomplete", ["Traceback (most recent call last):",
                               '  File "/v/sglang/srt/model_loader/weight_utils.py", line 3, in safetensors_weights_iterator',
                               'FileNotFoundError: No such file or directory: "/models/k2/model-00007-of-00064.safetensors"'],
     "reverify_checkpoint"),
    ("cute_dsl_version_skew", ["(Worker_TP2 pid=7) ERROR 07-18 01:33:25 [multiproc_executor.py:1007] AttributeError: "
                               "module 'cutlass.cute.nvgpu.tcgen05' has no attribute 'Ld32x32bOp'"], "resync_venv"),
    ("unsupported_gpu_arch", ["ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
                              "Your Tesla V100-SXM2-32GB GPU has compute capability 7.0."], None),
    ("unsupported_gpu_arch", ["RuntimeError: GPUs with compute capability below 7.0 are not supported."], None),
    ("unsupported_gpu_arch", ["ptxas fatal   : Value 'sm_103a' is not defined for option 'gpu-name'"],
     "set:attention_backend=triton"),
    ("speculative_config", ["ValueError: Speculative decoding is not yet supported on vLLM V1"], None),
    # fifth round: a kernel's own arch check in other words than the fixtures'
    ("unsupported_gpu_arch", ["RuntimeError: Expected is_sm90 to be true, but got false."], "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["AssertionError: Only SM 9.x is supported"], "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["ValueError: No valid attention backend found for cuda. Reasons: {FLASHMLA: "
                              "[compute capability not supported]}"], "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["RuntimeError: FlashInfer requires sm80+"], "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["AssertionError: attention sinks are only supported with FA3"], "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["Traceback (most recent call last):",
                              '  File "/v/flash_attn/cute/interface.py", line 9, in _flash_attn_fwd',
                              '  File "/v/flash_attn/cute/flash_fwd_sm90.py", line 88, in __init__',
                              "AssertionError: this kernel targets sm_90a only"], "set:attention_backend=triton"),
    # fifth round: speculative decoding by the draft/target vocabularies, the method, the draft's shapes
    ("speculative_config", ["Traceback (most recent call last):",
                            '  File "/v/vllm/spec_decode/spec_decode_worker.py", line 1258, in _vocab_size',
                            "    assert draft_vocab_size == target_vocab_size", "AssertionError"], None),
    ("speculative_config", ["assert vocab_sizes[0] != vocab_size", "AssertionError"], None),
    ("speculative_config", ["ValueError: unknown speculative algorithm: 'LOOKAHEAD'"], None),
    ("speculative_config", ["Traceback (most recent call last):",
                            '  File "/v/sglang/srt/speculative/eagle_worker.py", line 40, in forward_draft_extend',
                            "RuntimeError: shape '[4, 8]' is invalid for input of size 48"], None),
    # sixth round: a configuration check refusing a speculative setting, in other words than the fixtures'
    ("speculative_config", ["ValueError: Speculative decoding with EAGLE3 is not compatible with pipeline "
                            "parallelism for this model."], None),
    ("speculative_config", ["Traceback (most recent call last):",
                            '  File "/v/sglang/srt/server_args.py", line 9, in _handle_speculative_decoding',
                            "AssertionError: Only the NEXTN speculative algorithm is supported for Glm4MoeForCausalLM"],
     None),
    # sixth round: the CuTe DSL's own compile errors and an import from the DSL that fails
    ("cute_dsl_version_skew", ["cutlass.base_dsl.common.DSLAstPreprocessorError: DSLAstPreprocessorError: "
                               "unsupported construct"], "resync_venv"),
    ("cute_dsl_version_skew", ["Traceback (most recent call last):",
                               '  File "/v/flashinfer/cute_dsl/gemm.py", line 4, in <module>',
                               "ImportError: cannot import name 'make_rmem_tensor' from 'cutlass.cute' "
                               "(/v/cutlass/cute/__init__.py)"], "resync_venv"),
    # sixth round: nvcc's error inside DeepGEMM's JIT headers
    ("deepgemm_jit_failure", ['/v/deep_gemm/include/deep_gemm/impls/sm90_bf16_gemm.cuh(55): error: identifier '
                              '"cute::TMA" is undefined'], None),
    # sixth round: a compiler without a target for the GPU; FlashAttention 3's Hopper kernels elsewhere
    ("unsupported_gpu_arch", ["'sm_121a' is not a recognized processor for this target (ignoring processor)",
                              "subprocess.CalledProcessError: Command 'ptxas' returned non-zero exit status 255."],
     "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["CUDA error (/src/flash-attention/hopper/flash_bwd_launch_template.h:77): invalid argument"],
     "set:attention_backend=triton"),
    # seventh round: any CUDA toolkit runtime library that does not load, or lacks a symbol its release has
    ("toolkit_misconfigured", ["ImportError: libcusparse.so.12: cannot open shared object file: No such file or directory"],
     None),
    ("toolkit_misconfigured", ["(EngineCore pid=9) ERROR 01-01 00:00:01 [core.py:1] OSError: libnvJitLink.so.13: cannot "
                               "open shared object file: No such file or directory"], None),
    ("toolkit_misconfigured", ["RuntimeError: nvrtc: error: failed to open libnvrtc-builtins.so.12.4."], None),
    ("toolkit_misconfigured", ["Traceback (most recent call last):", '  File "/v/torch/__init__.py", line 9, in <module>',
                               "ImportError: /v/torch/lib/libtorch_cuda.so: undefined symbol: cusparseSpSV_updateMatrix, "
                               "version libcusparse.so.12"], None),
    ("toolkit_misconfigured", ["OSError: /v/nvidia/cublas/lib/libcublas.so.12: symbol cublasLtMatmulAlgoInit version "
                               "libcublasLt.so.12 not defined in file libcublasLt.so.12 with link time reference"], None),
    ("toolkit_misconfigured", ["/usr/local/cuda/include/cuda/std/__cccl/version.h(40): error: CUDA compiler and the "
                               "toolkit headers are incompatible"], None),
    # seventh round: kernels not built for the GPU, in other words than the fixtures'
    ("unsupported_gpu_arch", ["RuntimeError: rmsnorm failed: cudaErrorNoKernelImageForDevice"],
     "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["cutlass.cute.nvgpu.common.OpError: OpError: expects arch to be one of ['sm_90a'], "
                              "but got sm_120a"], "set:attention_backend=triton"),
    ("unsupported_gpu_arch", ["tvm.error.InternalError: Check failed: (0) is false: Not supported cuda -keys=cuda,gpu "
                              "-arch=sm_121"], "set:attention_backend=triton"),
    # seventh round: a speculative argument without the one it needs; a refusal naming the draft's class
    ("speculative_config", ["ValueError: speculative_num_steps is set without speculative_algorithm"], None),
    ("speculative_config", ["NotImplementedError: CUDA graphs are not supported for this draft "
                            "[LlamaForCausalLMEagle3]"], None),
    # seventh round: an op the sgl-kernel build lacks; the deep_gemm package lacking an API the server calls
    ("sgl_kernel_mismatch", ["Traceback (most recent call last):",
                             '  File "/v/sglang/srt/layers/quantization/fp8_kernel.py", line 9, in apply',
                             "AttributeError: '_OpNamespace' 'sgl_kernel' object has no attribute "
                             "'fp8_blockwise_scaled_mm'"], "resync_venv"),
    ("deepgemm_jit_failure", ["AttributeError: module 'deep_gemm' has no attribute 'set_compile_mode'"], None),
    # eighth round: NCCL's failed CUDA call at WARN level; a CUDA call that finds no symbol for this GPU;
    # a negative KV-cache capacity; a speculative proposer lacking what the engine asks of it
    ("nccl_failure", ["gpu4:2201:2290 [1] transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'"], None),
    ("unsupported_gpu_arch", ["CUDA Error CUDA_ERROR_NOT_FOUND: named symbol not found while calling module_get_function"],
     "set:attention_backend=triton"),
    ("kv_cache_insufficient", ["[2026-01-01 00:00:01 TP3] Profiled value -12345 for the token pool; using it"],
     "raise:mem_fraction_static"),
    ("speculative_config", ["Traceback (most recent call last):",
                            '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 9, in execute_model',
                            "AttributeError: 'MTPProposer' object has no attribute 'runner'"], None),
])
def test_new_classes_and_variants(cls, lines, remedy):
    d = diagnose("\n".join(lines))
    assert d.cls == cls, d.cause
    assert d.remedy == remedy and d.fix and d.evidence


@pytest.mark.parametrize("lines, cls", [
    # an out-of-memory raised inside a draft model's code is the memory, not the speculative config
    (["Traceback (most recent call last):", '  File "/v/sglang/srt/models/llama_eagle3.py", line 88, in forward',
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], "cuda_oom"),
    # the same shape error raised outside the speculative code, with that code only as a caller: unknown
    (["Traceback (most recent call last):", '  File "/v/sglang/srt/speculative/eagle_worker.py", line 40, in run',
      '  File "/v/sglang/srt/models/llama.py", line 9, in forward',
      "RuntimeError: Sizes of tensors must match except in dimension 1"], "unknown"),
    # a bare assert on something else than two vocabulary sizes: unknown
    (["assert len(tokens) == max_len", "AssertionError"], "unknown"),
    # an assert's own message is kept: the statement above does not replace it
    (["assert vocab_sizes[0] == vocab_size", "AssertionError: checked elsewhere"], "unknown"),
    # a backend selector's note at INFO in a healthy startup names nothing
    (["INFO 01-01 00:00:01 [cuda.py:1] FLASHMLA is not available: compute capability not supported",
      "INFO 01-01 00:00:02 [cuda.py:2] Using FLASH_ATTN backend."], "healthy"),
])
def test_fifth_round_signatures_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # a kernel's own CUDA check is a failure, though no signature knows it: unknown, never healthy
    (["CUDA error (/src/kernels/topk.cu:88): an illegal memory access was encountered"], "unknown"),
    # a line that only talks about CUDA errors is no failure
    (["INFO 01-01 00:00:01 [x.py:1] Loading safetensors checkpoint shards", "CUDA error checking is enabled for debug builds"],
     "healthy"),
    # a CUDA error outside FlashAttention 3's Hopper sources names no arch problem
    (["CUDA error (/src/flash-attention/csrc/flash_fwd_launch_template.h:40): invalid argument"], "unknown"),
    # a speculative refusal in a WARNING record of a startup that goes on names nothing
    (["WARNING 01-01 00:00:01 [config.py:1] Speculative decoding is not compatible with prefix caching; disabling it.",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
    # an import error from another package whose name starts like the DSL's is not DSL skew
    (["ImportError: cannot import name 'GemmOperation' from 'cutlass_library' (/v/cutlass_library/__init__.py)"],
     "unknown"),
    # nvcc's warning inside DeepGEMM's headers is no failure
    (["/v/deep_gemm/include/deep_gemm/common/utils.cuh(10): warning #177-D: variable \"x\" was declared but never "
      "referenced", "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
])
def test_sixth_round_signatures_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # the driver's own library (libcuda) is not one of the toolkit's: never toolkit_misconfigured (a signature of
    # driver_mismatch knows it since the fifty-first round's session: no driver in the process)
    (["ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"], "driver_mismatch"),
    # an undefined symbol that no CUDA library versions is an extension built for another torch
    (["ImportError: /v/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"], "kernel_abi_mismatch"),
    # a warning that quotes a CUDA library's load failure, in a startup that goes on to ready, names nothing
    (["WARNING 01-01 00:00:01 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcublas.so.12: "
      "cannot open shared object file: No such file or directory')",
      "INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"], "healthy"),
    # sgl-kernel's own report comes first and names the class; the CUDA library it lists is its detail
    (["ImportError: [sgl_kernel] CRITICAL: Could not load any common_ops library!",
      "Error details from previous import attempts:",
      "- ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory"], "sgl_kernel_mismatch"),
    # an op namespace of another package lacking an attribute is not sgl-kernel: that package's ops are of another build
    # than the code that calls them (kernel_abi_mismatch, since the session after rounds 54 and 55)
    (["AttributeError: '_OpNamespace' 'npu' object has no attribute 'transfer_kv_dim_exchange'"], "kernel_abi_mismatch"),
    # SGLang's own DeepGEMM wrapper lacking a name is SGLang, not the deep_gemm package
    (["AttributeError: module 'sglang.srt.layers.quantization.deep_gemm_wrapper' has no attribute "
      "'get_col_major_tma_aligned_tensor'"], "unknown"),
    # a compile flag that names an arch, in an INFO record of a healthy startup, names nothing
    (["INFO 01-01 00:00:01 [jit.py:1] FP8 MMA is not supported here; building with -arch=sm_100a",
      "INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"], "healthy"),
    # a list of the draft architectures a server supports, at INFO, is no refusal
    (["INFO 01-01 00:00:01 [registry.py:1] Supported draft architectures: [DeepSeekMTPModel]",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
])
def test_seventh_round_signatures_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # a failure without a classic "Error:" line is a failure: unknown at least, never healthy
    (["/src/ggml/ggml.c:1234: GGML_ASSERT(ne % 2 == 0) failed"], "unknown"),
    (["python3: ../nptl/pthread_mutex_lock.c:94: ___pthread_mutex_lock: Assertion `mutex->__data.__owner == 0' "
      "failed."], "unknown"),
    (["Engine core proc EngineCore_DP3 died unexpectedly, shutting down client."], "unknown"),
    (["Loading model...", "Process finished with exit code 139"], "unknown"),
    (["kernels.cu(12) : checkCudaErrors() CUDA error : an illegal memory access was encountered"], "unknown"),
    (["FAILED tests/kernels/test_moe.py::test_fused[4-8] - AssertionError: Tensor-likes are not close!"], "unknown"),
    # a dead engine after the ready line is a crash
    (["INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000",
      "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."], "unknown"),
    # traps: an NCCL WARN that reports no failure, in a startup that goes on, names nothing
    (["gpu4:2201:2290 [1] NCCL WARN Environment variable NCCL_SOCKET_NTHREADS is deprecated",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
    # NCCL's own report of a missing symbol is NCCL's failure (its line), not the arch rule's
    (["c76d:72:456 [0] enqueue.cc:58 NCCL WARN Cuda failure 'named symbol not found'"], "nccl_failure"),
    # a positive profiled capacity is SGLang's note, not a failure
    (["[2026-01-01 00:00:01 TP0] max_total_tokens=131072 is larger than the profiled value 98304. Use the profiled "
      "value instead.", "[2026-01-01 00:00:02 TP0] Load weight end. type=X"], "healthy"),
    # an INFO record that mentions a CUDA error is no failure
    (["INFO 01-01 00:00:01 [x.py:1] last CUDA error: none",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
    # an object lacking an attribute that is no speculative component: unknown
    (["AttributeError: 'GPUModelRunner' object has no attribute 'drafter_cfg'"], "unknown"),
    (["AttributeError: 'Qwen2ForCausalLM' object has no attribute 'set_embed'"], "unknown"),
    # pytest's report of a test that passed is no failure
    (["PASSED tests/kernels/test_moe.py::test_fused[4-8]", "Loading weights took 3.1 seconds"], "healthy"),
])
def test_eighth_round_signatures_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


def test_a_bare_assertion_error_takes_the_assert_statement_above_it():
    lines = normalize("Traceback (most recent call last):\n  File \"/v/x.py\", line 3, in f\n"
                      "    assert a == b, \n           ^^^^^^\nAssertionError")
    assert parse_tracebacks(lines)[0].final.message == "a == b,"
    lines = normalize("Traceback (most recent call last):\n  File \"/v/x.py\", line 3, in f\n    g()\nAssertionError")
    assert parse_tracebacks(lines)[0].final.message == ""


def test_checkpoint_incomplete_is_not_corrupt():
    missing = diagnose('FileNotFoundError: No such file or directory: "/m/model-00002-of-00004.safetensors"')
    corrupt = diagnose("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer")
    assert (missing.cls, corrupt.cls) == ("checkpoint_incomplete", "checkpoint_corrupt")
    assert missing.remedy == corrupt.remedy == "reverify_checkpoint"


def test_hard_wrapped_kv_cache_message_lands_in_its_class():
    wrapped = ["(EngineCore pid=3) ValueError: To serve at least one request with the model's max seq len (262144), "
               "(8.26 GiB KV cach", "e is needed, which is larger than the available KV cache memory (4.2 GiB)."]
    d = diagnose("\n".join(wrapped))
    assert d.cls == "kv_cache_insufficient" and d.remedy == "raise:mem_fraction_static"


def test_new_remedies_are_ones_the_deploy_knows():
    from noderig.repair import plan_repair

    cat = default_catalog()
    assert plan_repair(cat.get("checkpoint_incomplete").remedy, {}, []).forget_verified
    assert plan_repair(cat.get("unsupported_gpu_arch").remedy, {}, []).settings == {"attention_backend": "triton"}


# --------------------------------------------------------------------------------------------
# the catalog is checked against the fixtures (issue 18): no dead signature, no copied log line


@functools.cache  # four tests read them; each distinct line once (a fixture repeats its own, fixtures share some)
def _fixture_lines() -> tuple[str, ...]:
    out = []
    for path in ALL_FIXTURES:  # the tuning split only: the held-out split must not keep a signature alive
        out += [ln.text for ln in normalize(fixture_text(path)) if ln.text.strip()]
    return tuple(dict.fromkeys(out))


def _catalog_patterns():
    """(where, compiled pattern) for every line pattern the catalog and the benign list hold."""
    cat = default_catalog()
    for c in cat.classes:
        for kind in ("evidence", "symptoms", "supporting", "fatal_when_warned", "alone"):
            for p in getattr(c, kind):
                yield f"{c.id}.{kind}", p
        for p, _ in c.remedies:
            yield f"{c.id}.remedies", p
    for where, pats in (("ignore", cat.ignore), ("healthy", cat.healthy_strong + cat.healthy_weak + cat.healthy_own),
                        ("sglang", cat.sglang_markers + cat.sglang_ready), ("benign", cat.benign),
                        ("relay", cat.relay), ("warning_records", cat.warning_records), ("handled", cat.handled)):
        for p in pats:
            yield where, p
    for name, pats in cat.stages:
        for p in pats:
            yield f"stage {name}", p


def test_every_signature_alternative_matches_a_fixture():
    from noderig.diagnose.anchors import _split_alternatives

    lines = _fixture_lines()
    dead = []
    for where, pattern in _catalog_patterns():
        for alt in _split_alternatives(pattern.pattern):
            rx = re.compile(alt, pattern.flags)
            if not any(rx.search(t) for t in lines):
                dead.append(f"{where}: {alt}")
    assert not dead, "signatures no fixture shows (add a real log or remove them):\n" + "\n".join(dead)


def test_every_exception_signature_matches_a_fixture_traceback():
    from noderig.diagnose.matching import _lone_exceptions

    sections = []
    for path in ALL_FIXTURES:  # traceback sections, and exception lines pasted alone (the engine reads both)
        lines = normalize(fixture_text(path))
        tbs = parse_tracebacks(lines)
        sections += [s for tb in tbs for s in tb.sections] + _lone_exceptions(lines, tbs, set())
    for c in default_catalog().classes:
        for sig in c.exceptions:
            # a `within` signature speaks only for tracebacks cut before their exception line
            assert any(sig.located_in(s) if sig.within else sig.matches(s) for s in sections), (c.id, sig.type.pattern)


def test_no_signature_is_a_fixture_line_copied():
    lines = {t.strip() for t in _fixture_lines()}
    copied = []
    for where, pattern in _catalog_patterns():
        literal = re.sub(r"\\(.)", r"\1", pattern.pattern)
        if not re.search(r"[\[\](){}|*+?^$]", re.sub(r"\\.", "", pattern.pattern)) and literal.strip() in lines:
            copied.append(f"{where}: {pattern.pattern}")
    assert not copied, copied


# --------------------------------------------------------------------------------------------
# CLI


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "noderig.cli", "diagnose", *args], input=stdin, cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)


def test_cli_json_on_a_file_exits_1_on_failure():
    r = run_cli(str(PYTHON_H), "--json")
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert data["class"] == "missing_python_headers" and data["remedy"] == "install_package:python3-dev"


def test_cli_reads_stdin_and_exits_0_when_healthy():
    r = run_cli("-", stdin=(FIXTURES / "healthy" / "standin-sglang-skip-warmup-tp2.log").read_text())
    assert r.returncode == 0, r.stderr
    assert "healthy" in r.stdout
    r = run_cli("-", "--json", stdin=VISION.read_text())
    assert r.returncode == 1 and json.loads(r.stdout)["class"] == "flash_attn_cute_missing"


def test_cli_exit_status_follows_the_three_outcomes():
    still_starting = run_cli("-", "--json", stdin="\n".join(STARTING))
    assert still_starting.returncode == 0, still_starting.stderr
    assert json.loads(still_starting.stdout)["class"] == "healthy"
    assert json.loads(still_starting.stdout)["ready"] is False
    unrecognised = run_cli("-", stdin="\n".join([*STARTING, "KeyError: 'no signature knows this'"]))
    assert unrecognised.returncode == 1 and "unknown" in unrecognised.stdout
    known = run_cli("-", stdin="ImportError: /v/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c10x")
    assert known.returncode == 1 and "sgl_kernel_mismatch" in known.stdout


def test_cli_on_a_log_file_exits_0_for_a_healthy_start_and_1_for_a_failure():
    # the twenty-second round's tuning logs, by path as a deploy would pass them (the fixture header included):
    # a start cut before ready among NCCL INFO lines, and a vLLM worker's OOM logged at ERROR
    r = run_cli(str(FIXTURES / "healthy" / "sglang-issue-30609-pd-decode-node-init-distributed-nccl-info.log"), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["class"], data["ready"], data["stage"]) == ("healthy", False, "initialising distributed, not yet ready")
    r = run_cli(str(FIXTURES / "cuda_oom" / "nccl-issue-1790-vllm-sampler-warmup-oom.log"))
    assert r.returncode == 1 and "cuda_oom" in r.stdout, r.stderr


def test_cli_usage_errors_exit_2(tmp_path):
    assert run_cli().returncode == 2
    r = run_cli(str(tmp_path / "missing.log"))
    assert r.returncode == 2 and "cannot read" in r.stderr


# --------------------------------------------------------------------------------------------
# size (its cost is measured in bench/diagnose.py, not asserted here)


def test_a_crash_buried_in_fifty_thousand_lines_is_still_found():
    healthy = (FIXTURES / "healthy" / "standin-sglang-skip-warmup-tp2.log").read_text().splitlines()
    busy = [line for line in healthy if "batch" in line or "HTTP/1.1" in line]
    crash = VISION.read_text().splitlines()
    lines = crash[:45] + (busy * (50_000 // len(busy) + 1))[:50_000 - len(crash)] + crash[45:]
    text = "\n".join(f"Dec 02 13:31:17 b300 python3[536]: {line}" for line in lines)
    assert len(lines) == 50_000
    d = diagnose(text)
    assert d.cls == "flash_attn_cute_missing"
    assert "kimi_k25.get_image_feature" in " ".join(d.chain)


# --------------------------------------------------------------------------------------------
# the engine's decisions on a small catalog written for the test (every expected value by hand)

MINI_CATALOG = '''
version = 1
[healthy]
strong = ["server is ready"]
weak = ["now listening"]
sglang_markers = ["sglang marker line"]
sglang_ready = ["ready to roll"]
[ignore]
patterns = ["ignore this one"]
[[stage]]
name = "weights loaded"
patterns = ["weights loaded"]
[[stage]]
name = "graphs captured"
patterns = ["graphs captured"]

[[class]]
id = "alpha"
title = "  Alpha failure "
meaning = """  The alpha
   part broke. """
evidence = ["alpha exploded"]
symptoms = ["alpha wobble"]
supporting = ["alpha context"]
fix = "Fix   alpha\\n now."
remedy = "set:alpha=1"
priority = 10
components = [{match = "load_weights", name = "alpha loader"}]
remedies = [{when = "variant two", remedy = "set:alpha=2"}, {when = "no remedy", remedy = ""}]
alternatives = ["lower:x"]

[[class]]
id = "beta"
title = "Beta failure"
meaning = "Beta broke."
evidence = ["beta exploded", "shared line"]
symptoms = ["beta wobble"]
fix = "Fix beta."
priority = 90

[[class]]
id = "gamma"
title = "Gamma failure"
meaning = "Gamma noted."
evidence = ["gamma noted"]
fix = "Fix gamma."
decisive = false
exceptions = [{type = "GammaError", module = "gammamod"}, {type = "DeltaError", message = "delta says"},
              {type = "EpsilonError", raised_in = "/epsmod/"}]
'''
MINI_BENIGN = 'version = 1\n[[benign]]\npattern = "harmless alpha exploded"\n'


@pytest.fixture
def mini(tmp_path):
    """Loaded per test (a few ms): each test then exercises the loader too, which is what lets
    mutation testing see which tests depend on it."""
    d = tmp_path
    (d / "catalog.toml").write_text(MINI_CATALOG)
    (d / "benign.toml").write_text(MINI_BENIGN)
    return load_catalog(d / "catalog.toml")


def mdx(mini, *lines: str):
    return diagnose("\n".join(lines) + "\n", mini)


def test_mini_catalog_loads_normalised(mini):
    a = mini.get("alpha")
    assert (a.title, a.meaning, a.fix, a.remedy, a.priority, a.decisive, a.alternatives) == (
        "Alpha failure", "The alpha part broke.", "Fix alpha now.", "set:alpha=1", 10, True, ("lower:x",))
    b = mini.get("beta")
    assert (b.remedy, b.priority, b.decisive, b.supporting, b.components, b.remedies, b.alternatives) == (
        None, 90, True, (), (), (), ())
    assert mini.get("gamma").decisive is False and mini.get("gamma").priority == 50
    assert mini.ids == ["alpha", "beta", "gamma"] and [name for name, _ in mini.stages] == [
        "weights loaded", "graphs captured"]
    assert a.evidence[0].search("ALPHA EXPLODED"), "patterns ignore case"
    with pytest.raises(KeyError) as err:
        mini.get("nope")
    assert str(err.value) == "'nope'"


def test_first_decisive_evidence_wins_and_later_classes_are_also_seen(mini):
    d = mdx(mini, "something alpha exploded here", "beta exploded", "gamma noted")
    assert (d.cls, d.title, d.cause, d.remedy, d.confidence, d.also_seen) == (
        "alpha", "Alpha failure", "Alpha failure: something alpha exploded here", "set:alpha=1", 0.9, ["beta", "gamma"])
    assert (d.fix, d.meaning, d.alternatives, d.component, d.chain, d.ranks) == (
        "Fix alpha now.", "The alpha part broke.", ["lower:x"], None, [], [])
    assert [(e.line, e.rank, e.lineno) for e in d.evidence] == [("something alpha exploded here", None, 1)]
    assert d.to_dict() == {
        "class": "alpha", "title": "Alpha failure", "cause": "Alpha failure: something alpha exploded here",
        "evidence": [{"line": "something alpha exploded here", "rank": None, "lineno": 1}], "chain": [],
        "component": None, "fix": "Fix alpha now.", "remedy": "set:alpha=1", "alternatives": ["lower:x"],
        "confidence": 0.9, "meaning": "The alpha part broke.", "also_seen": ["beta", "gamma"], "ranks": [],
        "stage": None, "ready": False, "incomplete": None}
    assert mdx(mini, "beta exploded", "alpha exploded").also_seen == ["alpha"]


def test_on_one_line_the_higher_priority_wins(mini):
    assert mdx(mini, "alpha exploded and a shared line").cls == "beta"
    assert mdx(mini, "shared line and alpha exploded").cls == "beta"


def test_symptoms_and_non_decisive_evidence(mini):
    assert mdx(mini, "alpha wobble").cls == "healthy"  # a symptom alone, and nothing failed
    d = mdx(mini, "alpha wobble", "RuntimeError: x")
    assert (d.cls, d.confidence) == ("alpha", 0.6)
    assert mdx(mini, "alpha wobble", "beta wobble", "Killed").cls == "beta"  # strongest symptom
    assert mdx(mini, "beta wobble", "alpha wobble", "Killed").cls == "beta"
    d = mdx(mini, "gamma noted")
    assert (d.cls, d.confidence) == ("gamma", 0.6)
    assert mdx(mini, "gamma noted", "alpha exploded").cls == "alpha"  # decisive evidence beats it
    assert mdx(mini, "beta wobble", "gamma noted").cls == "gamma"  # evidence beats a symptom
    assert mdx(mini, "Traceback (most recent call last):", "beta wobble").cls == "beta"  # a traceback failed


def test_remedy_variants_ranks_and_supporting_lines(mini):
    d = mdx(mini, sg("TP1", "alpha context one"), sg("TP1", "alpha exploded variant two"),
            sg("TP0", "alpha exploded variant two"), sg("TP10", "alpha exploded variant two"), sg("TP2", "alpha context one"))
    assert (d.cls, d.remedy, d.ranks) == ("alpha", "set:alpha=2", ["TP0", "TP1", "TP10"])
    assert d.cause == "Alpha failure [TP1]: alpha exploded variant two"
    assert [(e.line, e.rank) for e in d.evidence] == [("alpha exploded variant two", "TP1,TP0,TP10"),
                                                      ("alpha context one", "TP1,TP2")]
    assert mdx(mini, "alpha exploded, no remedy for this one").remedy is None


def test_ignored_and_benign_lines_are_never_evidence(mini):
    for line in ("alpha exploded ignore this one", "harmless alpha exploded"):
        d = mdx(mini, line)
        assert (d.cls, d.ready) == ("healthy", False)


def test_ready_line_then_stages(mini):
    d = mdx(mini, "weights loaded", "graphs captured", "server is ready")
    assert (d.cls, d.ready, d.confidence, d.stage, d.title) == (
        "healthy", True, 0.95, "weights loaded, graphs captured, ready", "Server reached ready")
    assert d.cause == "the server reached ready: server is ready"
    assert [(e.line, e.lineno) for e in d.evidence] == [("server is ready", 3)]
    assert d.fix == "Nothing to fix." and d.remedy is None and d.healthy
    d = mdx(mini, "graphs captured", "weights loaded", "nothing more")
    assert (d.cls, d.ready, d.confidence, d.stage, d.title) == (
        "healthy", False, 0.7, "weights loaded, graphs captured, not yet ready", "No failure found")
    assert d.cause == "no failure in the log; the server is still starting (weights loaded, graphs captured, not yet ready)"
    assert [(e.line, e.lineno) for e in d.evidence] == [("weights loaded", 2)]  # the last milestone
    # not ready: nothing to fix in these lines, and where the error would be if the server stopped
    assert d.fix.startswith("Nothing to fix in these lines. If the server stopped, its error comes after the last line")
    d = mdx(mini, "hello", "world", "")
    assert (d.stage, [e.line for e in d.evidence]) == ("no startup milestone logged, not yet ready", ["world"])
    assert mdx(mini, "now listening").ready  # a weak ready line counts outside SGLang
    assert diagnose("", mini).evidence == []


def test_sglang_logs_need_the_sglang_ready_line(mini):
    assert not mdx(mini, sg("TP0", "hello"), "server is ready").ready
    assert not mdx(mini, "sglang marker line", "now listening").ready
    assert mdx(mini, "sglang marker line", "ready to roll").ready
    assert mdx(mini, sg("TP0", "hello"), "ready to roll").ready
    assert not mdx(mini, "[12:00] x", "ready to roll").ready  # no rank: not SGLang


def test_after_ready_only_evidence_or_a_death_counts(mini):
    assert mdx(mini, "alpha exploded", "server is ready").cls == "healthy"
    assert mdx(mini, "server is ready", "alpha exploded").cls == "alpha"
    assert mdx(mini, "server is ready", "alpha wobble").cls == "healthy"
    assert mdx(mini, "server is ready", "RuntimeError: request failed").cls == "healthy"
    d = mdx(mini, "server is ready", "x", "Segmentation fault (core dumped)")
    assert (d.cls, d.cause) == ("unknown", "unrecognised failure: Segmentation fault (core dumped)")


def test_unknown_failure_in_full(mini):
    d = mdx(mini, "a", "b", "c", "RuntimeError: zzz", "d", "e", "f", "g", "h")
    assert (d.cls, d.title, d.cause, d.confidence, d.remedy, d.chain) == (
        "unknown", "Unrecognised failure", "unrecognised failure: RuntimeError: zzz", 0.3, None, [])
    assert [e.line for e in d.evidence] == ["b", "c", "RuntimeError: zzz", "d", "e", "f"]
    assert d.meaning == "The launch failed with no signature in the catalog."
    assert d.fix.startswith("No known signature matched.")
    tb = ["Traceback (most recent call last):", '  File "/x/sglang/model_loader.py", line 3, in load_weights',
          "    f()", "ValueError: first line", "second line"]
    d = mdx(mini, "a", *tb)
    assert d.cause == "unrecognised failure: ValueError: first line"
    assert d.chain == ["model_loader.load_weights"] and d.component == "model weight loading"
    assert d.evidence[0].line == "ValueError: first line"


def test_exception_signatures_need_type_and_module_or_message(mini):
    def tb(exc, path="/x/gammamod/run.py"):
        return ["Traceback (most recent call last):", f'  File "{path}", line 3, in run', "    f()", exc]

    assert mdx(mini, *tb("GammaError: x")).cls == "gamma"
    assert mdx(mini, *tb("pkg.GammaError: x")).cls == "gamma"
    assert mdx(mini, *tb("GammaError: x", "/x/other/run.py")).cls == "unknown"
    assert mdx(mini, *tb("GammaError: from gammamod import x", "/x/other/run.py")).cls == "gamma"
    assert mdx(mini, *tb("GammaErrorX: x")).cls == "unknown"
    assert mdx(mini, *tb("DeltaError: delta says no", "/x/other/run.py")).cls == "gamma"
    assert mdx(mini, *tb("DeltaError: something else", "/x/other/run.py")).cls == "unknown"


def test_an_exception_signature_raised_in_a_module_needs_the_innermost_frame_there(mini):
    def tb(*paths):
        frames = [line for p in paths for line in (f'  File "{p}", line 3, in run', "    f()")]
        return ["Traceback (most recent call last):", *frames, "EpsilonError: it broke"]

    assert mdx(mini, *tb("/x/main.py", "/x/epsmod/kernel.py")).cls == "gamma"
    # the module only as a caller: raised elsewhere, so not this cause
    assert mdx(mini, *tb("/x/epsmod/kernel.py", "/x/other/alloc.py")).cls == "unknown"


def test_component_from_the_class_then_generic_then_warmup(mini):
    frames = ["Traceback (most recent call last):", '  File "/x/sglang/runner.py", line 3, in load_weights', "    f()",
              "RuntimeError: alpha exploded"]
    d = mdx(mini, *frames)
    assert (d.component, d.to_dict()["confidence"], d.cause) == (
        "alpha loader", 0.95, "Alpha failure in the alpha loader: RuntimeError: alpha exploded")
    frames[1] = '  File "/x/sglang/runner.py", line 3, in init_memory_pool'
    d = mdx(mini, *frames)
    assert (d.component, d.to_dict()["confidence"]) == ("KV cache allocation", 0.9)
    d = mdx(mini, "Uvicorn running on http://0.0.0.0:30000", *frames)
    assert d.component == "KV cache allocation, during the server warmup"
    d = mdx(mini, "skip_server_warmup=True", "Uvicorn running on http://0.0.0.0:30000", *frames)
    assert d.component == "KV cache allocation"
    frames[1] = '  File "/x/sglang/runner.py", line 3, in _wait_and_warmup'
    assert mdx(mini, "Uvicorn running on x", *frames).component == "server warmup"


@pytest.mark.parametrize("body, message", [
    ('[[class]]\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["x"]\n', "class id None is missing, reserved or duplicated"),
    ('[[class]]\nid = "healthy"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["x"]\n',
     "class id 'healthy' is missing, reserved or duplicated"),
    ('[[class]]\nid = "unknown"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["x"]\n',
     "class id 'unknown' is missing, reserved or duplicated"),
    ('[[class]]\nid = "a"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["x"]\n'
     '[[class]]\nid = "a"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["x"]\n',
     "class id 'a' is missing, reserved or duplicated"),
    ('[[class]]\nid = "a"\nmeaning = "m"\nfix = "f"\nevidence = ["x"]\n', "class a has no title"),
    ('[[class]]\nid = "a"\ntitle = "t"\nfix = "f"\nevidence = ["x"]\n', "class a has no meaning"),
    ('[[class]]\nid = "a"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = []\n', "class a has no evidence"),
    ('[[class]]\nid = "a"\ntitle = "t"\nmeaning = "m"\nevidence = ["x"]\n', "class a has no fix"),
])
def test_catalog_class_errors_name_the_file_and_the_class(tmp_path, body, message):
    bad = tmp_path / "catalog.toml"
    bad.write_text("version = 1\n" + body)
    with pytest.raises(CatalogError) as err:
        load_catalog(bad)
    assert str(err.value) == f"{bad}: {message}"


def test_catalog_version_regex_and_signature_errors_in_full(tmp_path):
    bad = tmp_path / "catalog.toml"
    bad.write_text("version = 99\n")
    with pytest.raises(CatalogError) as err:
        load_catalog(bad)
    assert str(err.value) == f"{bad}: catalog version 99 is not supported (expected one of [1])"
    bad.write_text("")
    with pytest.raises(CatalogError) as err:
        load_catalog(bad)
    assert str(err.value) == f"{bad}: catalog version None is not supported (expected one of [1])"
    entry = 'version = 1\n[[class]]\nid = "x"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["ok"]\n'
    bad.write_text(entry + 'exceptions = [{module = "m"}]\n')
    with pytest.raises(CatalogError) as err:
        load_catalog(bad)
    assert str(err.value) == "x: an exception signature needs a type"
    bad.write_text(entry.replace('["ok"]', '["(unclosed"]'))
    with pytest.raises(CatalogError) as err:
        load_catalog(bad)
    assert str(err.value) == "x: bad regex '(unclosed': missing ), unterminated subpattern at position 0"
    bad.write_text(entry)
    (tmp_path / "benign.toml").write_text("version = 2\n")
    with pytest.raises(CatalogError) as err:
        load_catalog(bad)
    assert str(err.value) == f"{tmp_path / 'benign.toml'}: benign list version 2 is not supported (expected one of [1])"
    (tmp_path / "benign.toml").write_text('version = 1\n[[benign]]\npattern = "(x"\n')
    with pytest.raises(CatalogError, match="^benign: bad regex"):
        load_catalog(bad)
    other = tmp_path / "other.toml"
    other.write_text('version = 1\n[[benign]]\npattern = "ok is fine"\n')
    cat = load_catalog(bad, other)
    assert [p.pattern for p in cat.benign] == ["ok is fine"] and cat.stages == () and cat.ignore == ()
    (tmp_path / "benign.toml").unlink()
    assert load_catalog(bad).benign == ()


@pytest.mark.parametrize("raw, text, info", [
    ("Dec 02 13:31:17 b300 sglang[536]: hello", "hello", {"source": "sglang[536]"}),
    ("Dec  2 13:31:17 b300 kernel: oops", "oops", {"source": "kernel"}),
    ("déc. 02 13:31:17 b300 kernel: oops", "oops", {"source": "kernel"}),
    ("1733146277.123456 b300 sglang[5]: x", "x", {"source": "sglang[5]"}),
    ("2026-12-02T13:31:17+00:00 b300 sglang: x", "x", {"source": "sglang"}),
    # a shipper's UTC time, then a message that reads "word word: ...": not a journal line
    ("2025-01-01T00:00:00.123456Z missing tensor: model.embed_tokens.weight",
     "missing tensor: model.embed_tokens.weight", {}),
    # a Kubernetes node's container log (CRI): time, stream, full/partial flag
    ("2025-07-25T07:53:08.217488644+08:00 stdout F [2025-07-25 07:53:08 TP2] x", "x",
     {"rank": "TP2", "time": "2025-07-25 07:53:08", "prefixed": True}),
    ("2026-12-02 13:31:17 UTC b300 sglang[7]: x", "x", {"source": "sglang[7]"}),
    ("[2026-05-30 14:47:43 DP3 TP3] x", "x", {"rank": "DP3 TP3", "time": "2026-05-30 14:47:43", "prefixed": True}),
    ("[2026-05-30 14:47:43,123 TP0 EP0] x", "x", {"rank": "TP0 EP0", "time": "2026-05-30 14:47:43,123",
                                                   "prefixed": True}),
    ("[2026-05-30 14:47:43] x", "x", {"time": "2026-05-30 14:47:43", "prefixed": True}),
    ("WARN 05-24 00:20:47 [core.py:1108] w", "w", {"time": "05-24 00:20:47", "level": "WARNING", "prefixed": True}),
    ("ERROR 05-24 00:20:47.123 [core.py:1108] e", "e", {"time": "05-24 00:20:47.123", "level": "ERROR",
                                                        "prefixed": True}),
    ("DEBUG 01-11 15:51:02 llm_engine.py:70] d", "d", {"time": "01-11 15:51:02", "level": "DEBUG", "prefixed": True}),
    ("W0430 10:21:34.351000 19593 torch/_dynamo/convert_frame.py:1233] g", "g", {"level": "WARNING", "prefixed": True}),
    ("E0430 10:21:34.351000 19593 torch/x.py:1] g", "g", {"level": "ERROR", "prefixed": True}),
    ("I0430 10:21:34.351000 19593 torch/x.py:1] g", "g", {"level": "INFO", "prefixed": True}),
    ("F0430 10:21:34.351000 19593 torch/x.py:1] g", "g", {"level": "CRITICAL", "prefixed": True}),
    ("Error: not a logger prefix", "Error: not a logger prefix", {}),
    ("[rank2]: x", "x", {"rank": "rank2", "prefixed": True}),
    ("[default0]:x", "x", {"rank": "default0", "prefixed": True}),
    ("[2025-11-06T02:09:46.576Z] x", "x", {}),
    ("2024-06-28T06:11:52.685300953Z x", "x", {}),
    ("(ServeReplica:app:Deployment pid=12249, ip=10.0.155.99) x", "x",
     {"rank": "ServeReplica:app:Deployment", "source": "pid12249", "prefixed": True}),
    ("(Worker_TP4_EP2 pid=1) x", "x", {"rank": "TP4 EP2", "source": "pid1", "prefixed": True}),
    ("(not a prefix) x", "(not a prefix) x", {}),
    ("sglang_1 | x", "x", {"source": "sglang_1"}),
    ("sglang-1  |", "", {"source": "sglang-1"}),
    ("a | b", "a | b", {}),
    ("qanything-container-local  | x", "x", {"source": "qanything-container-local"}),
    ("2025-03-07 23:50:27,531 - __main__ - INFO - [2025-03-07 23:50:27 TP0] x", "x",
     {"rank": "TP0", "time": "2025-03-07 23:50:27", "prefixed": True}),
    ("2025-02-25 08:37:29,910 - WARNING - flashinfer.jit: x", "flashinfer.jit: x", {"level": "WARNING"}),
    ("2024-09-13T22:25:37,532 [WARN ] W-9000-model_1.0-stderr MODEL_LOG - Traceback (most recent call last):",
     "Traceback (most recent call last):", {}),
    # DJL Serving's relay (SageMaker LMI): its console's, an older image's with a cut level, its file's with a time
    ("[INFO ] PyProcess - W-210-model-stdout: INFO 02-14 08:22:13 llm_engine.py:232] x", "x",
     {"time": "02-14 08:22:13", "level": "INFO", "prefixed": True}),
    ("WARN  PyProcess W-252-model-stderr:   File x", "  File x", {}),
    ("NFO  PyProcess W-162-chat-film-stdout:   Value error, x", "  Value error, x", {}),
    ("[WARN ] 2024-02-14 08:22:13 PyProcess - W-1511-model-stderr: Traceback (most recent call last):",
     "Traceback (most recent call last):", {}),
    ("PyProcess - W-144-model-stdout: [1,0]<stdout>:x", "x", {"rank": "rank0", "source": "rank0", "prefixed": True}),
    ("the PyProcess W-1-x-stdout: y", "the PyProcess W-1-x-stdout: y", {}),
    # LocalAI's relay of a backend's output
    ("5:32AM DBG GRPC(qwen-127.0.0.1:43735): stderr   File x", "  File x", {}),
    ("11:02PM ERR GRPC(m): stdout INFO 01-11 15:51:02 llm_engine.py:70] x", "x",
     {"time": "01-11 15:51:02", "level": "INFO", "prefixed": True}),
    ("5:32AM DBG the GRPC(q): stderr x", "5:32AM DBG the GRPC(q): stderr x", {}),
    # vLLM's logger with the year a program set its date format to (NVIDIA NIM for LLMs)
    ("INFO 2024-09-27 12:59:39.857 ngc_profile.py:231] x", "x",
     {"time": "2024-09-27 12:59:39.857", "level": "INFO", "prefixed": True}),
    ("[nim] ERROR 2024-09-27 12:59:39.857 [utils.py:21] x", "x",
     {"time": "2024-09-27 12:59:39.857", "level": "ERROR", "prefixed": True}),
    # Ray Serve's own records (a replica's, the controller's in older releases)
    ("ERROR 2024-11-18 01:46:34,210 default_VLLMDeployment ujj4diu5 replica.py:893 - Exception in replica",
     "Exception in replica", {"level": "ERROR"}),
    ("INFO 2025-08-29 18:02:42,869 serve 519120 -- Application 'default' is ready", "Application 'default' is ready",
     {"level": "INFO"}),
    ("INFO 2024-08-17 23:29:34,833 tool says - x", "INFO 2024-08-17 23:29:34,833 tool says - x", {}),
    # Xinference's own records: logger, pid, then the level padded to eight
    ("2024-05-29 08:41:33,373 xinference.core.worker 9528 ERROR    Failed to load model", "Failed to load model",
     {"level": "ERROR"}),
    ("2024-05-29 08:41:33,373 Supervisor   9528 WARNING  x", "x", {"level": "WARNING"}),
    ("[sglang]     | x", "x", {"source": "sglang"}),
    ("  | [2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] x", "x",
     {"time": "03-10 08:07:20", "level": "ERROR", "prefixed": True}),
    ("> Traceback (most recent call last):", "Traceback (most recent call last):", {}),
    (">>> import flash_attn", ">>> import flash_attn", {}),
    ("E       RuntimeError: Failed: Assertion error", "       RuntimeError: Failed: Assertion error", {}),
    ("│ INFO 03-21 20:19:24 [launcher.py:34] Route: /version, Methods: GET      │", "Route: /version, Methods: GET",
     {"time": "03-21 20:19:24", "level": "INFO", "prefixed": True}),
    ("E0430 10:21:34.351000 19593 x.py:12] boom", "boom", {"level": "ERROR", "prefixed": True}),
    ("[x] y", "[x] y", {}),
    ("a\r\r", "a", {}),
    ("\r \r", "", {}),
    ("x\n", "x", {}),
    ("[rank1]: " * 11 + "x", "[rank1]: x", {"rank": "rank1", "prefixed": True}),  # ten layers peeled, no more
    ("sglang-1  | Dec 02 13:31:17 b300 sglang[536]: [rank3]: x", "x",
     {"source": "sglang-1", "rank": "rank3", "prefixed": True}),
    # tags no rule names, before vLLM's record head (a launcher relaying a subprocess, a worker's own tag)
    # (the relay's time is not the record's: the record's own time and level are read behind it)
    ("[2026-01-22 20:05:33] [/bin/sh]: [EngineCore_DP0][pid=1242] ERROR 01-22 12:05:33.129 [core.py:1302]   File x",
     "  File x", {"source": "/bin/sh", "prefixed": True, "time": "01-22 12:05:33.129", "level": "ERROR"}),
    ("[2026-01-22 20:05:33] [/bin/sh]:   File x", "  File x", {"source": "/bin/sh"}),
    ("[2026-01-22 20:05:33] (APIServer pid=7) Traceback (most recent call last):",
     "Traceback (most recent call last):", {"rank": "APIServer", "source": "pid7", "prefixed": True}),
    ("[2026-01-22 20:05:33 TP0] [x]: y", "[x]: y", {"rank": "TP0", "time": "2026-01-22 20:05:33", "prefixed": True}),
    # Ray's unnamed tasks and daemons
    ("(pid=4242)   File x", "  File x", {"source": "pid4242", "prefixed": True}),
    ("(pid=4242, ip=10.0.0.2) x", "x", {"source": "pid4242", "prefixed": True}),
    ("(raylet, ip=10.0.0.2) x", "x", {"source": "raylet", "prefixed": True}),
    ("(raylets) x", "(raylets) x", {}),
    ("(worker1, rank=1, pid=2346, ip=10.0.0.2) x", "x", {"rank": "rank1", "source": "pid2346", "prefixed": True}),
    ("[pod/sglang-0/sglang]   File x", "  File x", {"source": "sglang-0/sglang"}),
    ('2026-01-22T20:05:33Z {container="sglang", pod="sglang-0"}   File x', "  File x", {}),
    ("2026-01-22T20:05:33Z {not labels} x", "{not labels} x", {}),
    ("2026-01-22 20:05:33.123 | ERROR    | __main__:run:42 -   File x", "  File x", {}),
    # cat -n's number is the paste's, removed once by normalize() (tests/test_diagnose_edges.py), not a line's prefix
    ("    12\t  File x", "    12    File x", {}),
    ("12\tx", "12  x", {}),
    # behind a launcher's process prefix the engine's own names the writer
    ("(pid=1234) (EngineCore_DP0 pid=5) x", "x", {"source": "pid5", "rank": "DP0", "prefixed": True}),
    ("[1,0]<stderr>:(EngineCore_DP0 pid=5) x", "x", {"source": "pid5", "rank": "DP0", "prefixed": True}),
    ("sglang-1  | (EngineCore_DP0 pid=5) x", "x", {"source": "sglang-1", "rank": "DP0", "prefixed": True}),
    ("[pod/sglang-0] x", "[pod/sglang-0] x", {}),
    ("[1,3]<stderr>:  File x", "  File x", {"rank": "rank3", "source": "rank3", "prefixed": True}),
    # a bare time before each line: one separator goes, a traceback's indentation stays
    ("2026-01-22 20:05:33   File x", "  File x", {}),
    ("2026-01-22 20:05:33.123\tTraceback (most recent call last):", "Traceback (most recent call last):", {}),
    ("2026-01-22 20:05:33 ERROR 03-24 09:43:07 worker_base.py:581] x", "x",
     {"time": "03-24 09:43:07", "level": "ERROR", "prefixed": True}),
    ("2026-01-22 20:05:33 error: invalid argument: -V", "error: invalid argument: -V", {}),
    ("20:05:33 Traceback (most recent call last):", "Traceback (most recent call last):", {}),
    ("20:05:33.123   File x", "  File x", {}),
    ("Wed 2026-12-02 13:31:17 CET b300 sglang[536]: x", "x", {"source": "sglang[536]"}),
    ("2026-12-02 13:31:17 +03 b300 sglang[536]: x", "x", {"source": "sglang[536]"}),
    ("(launcher) : INFO 01-22 12:05:33 [api_server.py:9] x", "x",
     {"prefixed": True, "time": "01-22 12:05:33", "level": "INFO"}),
    # without a record head after them, tags stay: they may be the message
    ("[EngineCore_DP0][pid=1242] x", "[EngineCore_DP0][pid=1242] x", {}),
    ("[a] ERROR is not a record head", "[a] ERROR is not a record head", {}),
    ("[x] words [y] ERROR 01-22 12:05:33 [core.py:1] z", "[x] words [y] ERROR 01-22 12:05:33 [core.py:1] z", {}),
])
def test_strip_prefixes_in_full(raw, text, info):
    assert strip_prefixes(raw) == (text, info)


def test_normalize_lines_in_full():
    from noderig.diagnose.normalize import Line
    lines = normalize("\n".join([
        "Dec 02 13:31:17 b300 sglang[5]: " + sg("TP1", "Scheduler hit an exception:"),
        "Dec 02 13:31:17 b300 sglang[5]: Traceback (most recent call last):",
        "Dec 02 13:31:17 b300 sglang[5]: ValueError: x",
        "Dec 02 13:31:17 b300 sglang[5]: ",
        "Dec 02 13:31:17 b300 sglang[5]: after the blank",
        sg("TP2", "one line", "13:31:18"),
        "  indented follow-up",
        "Traceback (most recent call last):",
        "ValueError: y",
        "",
        "  indented after a blank",
        "During handling of the above exception, another exception occurred:",
        "",
        "unrelated",
        "  more",
    ]))
    assert lines == [
        Line(1, "Scheduler hit an exception:", "TP1", "sglang[5]", "2026-05-30 13:31:17", True, None),
        Line(2, "Traceback (most recent call last):", "TP1", "sglang[5]", "2026-05-30 13:31:17", False, None),
        Line(3, "ValueError: x", "TP1", "sglang[5]", "2026-05-30 13:31:17", False, None),
        Line(4, "", "TP1", "sglang[5]", "2026-05-30 13:31:17", False, None),
        Line(5, "after the blank", None, "sglang[5]", None, False, None),
        Line(6, "one line", "TP2", None, "2026-05-30 13:31:18", True, None),
        Line(7, "  indented follow-up", "TP2", None, "2026-05-30 13:31:18", False, None),
        Line(8, "Traceback (most recent call last):", "TP2", None, "2026-05-30 13:31:18", False, None),
        Line(9, "ValueError: y", "TP2", None, "2026-05-30 13:31:18", False, None),
        Line(10, "", "TP2", None, "2026-05-30 13:31:18", False, None),
        Line(11, "  indented after a blank", "TP2", None, "2026-05-30 13:31:18", False, None),
        Line(12, "During handling of the above exception, another exception occurred:", "TP2", None, "2026-05-30 13:31:18", False,
             None),
        Line(13, "", "TP2", None, "2026-05-30 13:31:18", False, None),
        Line(14, "unrelated", None, None, None, False, None),
        Line(15, "  more", None, None, None, False, None),
    ]


def test_continuation_lines_inherit_rank_time_and_level():
    from noderig.diagnose.normalize import Line
    lines = normalize("[rank0]: ERROR 05-24 00:20:47 [core.py:1] boom:\n  detail\nWARNING: own level\n\nnext\n")
    assert lines == [Line(1, "boom:", "rank0", None, "05-24 00:20:47", True, "ERROR"),
                     Line(2, "  detail", "rank0", None, "05-24 00:20:47", False, "ERROR"),
                     Line(3, "WARNING: own level", "rank0", None, "05-24 00:20:47", False, "ERROR"),
                     Line(4, "", None, None, None, False, None),
                     Line(5, "next", None, None, None, False, None)]


def test_format_chain_drops_noise_and_consecutive_repeats():
    from noderig.diagnose.tracebacks import Frame, format_chain
    frames = [Frame("<frozen runpy>", 1, "_run_module_as_main"), Frame("/usr/lib/python3.10/threading.py", 2, "run"),
              Frame("/usr/lib/python3.10/site-packages/sglang/srt/a.py", 3, "run"),
              Frame("/usr/lib/python3.10/site-packages/sglang/srt/a.py", 4, "run"),
              Frame("/opt/v/lib/python3.12/dist-packages/x/b.py", 5, "go"),
              Frame("/v/torch/nn/modules/module.py", 6, "forward"), Frame("/v/torch/utils/_contextlib.py", 7, "f"),
              Frame("/v/torch/_dynamo/eval_frame.py", 8, "g"), Frame("/v/torch/_dynamo/other.py", 9, "h"),
              Frame("/v/a.py", 10, "wrapper"), Frame("C:\\x\\mod.py", 11, "f"), Frame("/x/prog", 12, "main"),
              Frame("/usr/lib/python3/dist-packages/c.py", 13, "k"), Frame("/usr/lib/python3.11/json/decoder.py", 14, "d"),
              Frame("C:\\py\\lib\\python3.10\\threading.py", 16, "run"), Frame("<string>", 17, "compute"),
              Frame("/v/a.py", 15, "run")]
    assert format_chain(frames) == ["a.run", "b.go", "other.h", "mod.f", "prog.main", "c.k", "a.run"]


def test_parse_tracebacks_sections_links_and_messages():
    lines = normalize("\n".join([
        "noise before",
        "Traceback (most recent call last):",
        '  File "/x/a.py", line 1, in f',
        "    f()",
        "KeyError: 'k'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/x/b.py", line 2, in g',
        "pkg.mod.CustomFailure: first",
        "second line of the message",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/x/c.py", line 3, in h',
        "    [Previous line repeated 996 more times]",
        "RecursionError: deep",
        "",
        "after",
    ]))
    (tb,) = parse_tracebacks(lines)
    assert (tb.rank, tb.start_index, tb.end_index) == (None, 1, 19)
    got = [(s.exc_type, s.message, s.exc_index, s.start_index, s.link, [(f.file, f.line, f.function) for f in s.frames])
           for s in tb.sections]
    assert got == [("KeyError", "'k'", 4, 1, "cause", [("/x/a.py", 1, "f")]),
                   ("pkg.mod.CustomFailure", "first\nsecond line of the message", 10, 8, "context", [("/x/b.py", 2, "g")]),
                   ("RecursionError", "deep", 18, 15, None, [("/x/c.py", 3, "h")])]
    assert tb.code_lines == {3, 17} and tb.final is tb.sections[-1]
    assert tb.section_at(4) is tb.sections[0] and tb.section_at(7) is tb.sections[0]  # up to 3 lines past it
    assert tb.section_at(9) is tb.sections[1] and tb.section_at(0) is None
    assert tb.section_at(1) is tb.sections[0] and tb.section_at(8) is tb.sections[1]
    assert traceback_chain(tb) == ["c.h"] and traceback_chain(tb, tb.sections[0]) == ["c.h", "a.f"]


def test_a_traceback_without_its_header_and_one_cut_short():
    lines = normalize("\n".join([
        '  File "/x/a.py", line 1, in f',
        "ValueError: v",
        "",
        "x",
        "Traceback (most recent call last):",
        '  File "/x/b.py", line 2, in g',
        "an unindented echoed source line",
        "two words: not an exception line, it ends the traceback",
    ]))
    tbs = parse_tracebacks(lines)
    assert [(t.start_index, t.end_index, t.final.exc_type) for t in tbs] == [(0, 2, "ValueError"), (4, 6, None)]
    assert tbs[1].code_lines == {6}


def test_a_traceback_indented_as_a_whole_keeps_its_exception_line():
    # pip prints a failed build's output six columns in; a quoted paste indents it too. The
    # exception line sits at the header's indentation, the echoed source deeper.
    lines = normalize("\n".join([
        "      Traceback (most recent call last):",
        '        File "/tmp/pip-install/deepspeed/op_builder/builder.py", line 105, in assert_no_cuda_mismatch',
        "          raise Exception(",
        "      Exception: >- DeepSpeed Op Builder: Installed CUDA version 12.0 does not match",
        "        File \"/x/after.py\", line 1, in f",
    ]))
    tb = parse_tracebacks(lines)[0]
    assert (tb.final.exc_type, tb.final.exc_index, tb.code_lines) == ("Exception", 3, {2})
    assert tb.final.message.startswith(">- DeepSpeed Op Builder: Installed CUDA version 12.0")
    # a header cut off: the frames' own indentation, less two columns, is the traceback's
    lines = normalize("\n".join(['      File "/x/a.py", line 1, in f', "        x()", "    KeyError: 'k'"]))
    tb = parse_tracebacks(lines)[0]
    assert (tb.final.exc_type, tb.code_lines) == ("KeyError", {1})


def test_a_catalog_with_no_classes_or_healthy_table_loads_empty(tmp_path):
    path = tmp_path / "catalog.toml"
    path.write_text("version = 1\n")
    cat = load_catalog(path)
    assert (cat.classes, cat.healthy_strong, cat.healthy_weak, cat.sglang_markers, cat.sglang_ready, cat.ids) == (
        (), (), (), (), (), [])
    d = diagnose("all fine\n", cat)
    assert (d.cls, d.ready) == ("healthy", False)


def test_the_json_form_is_indented_and_keeps_non_ascii_text(mini):
    d = mdx(mini, "alpha exploded: données « é » " + "x" * 300)
    text = d.to_json()
    assert text.startswith('{\n  "class": "alpha",\n  "title": "Alpha failure",\n')
    assert "« é »" in text and d.cause.endswith("…") and "…" in text
    assert "\n" not in d.to_json(indent=None) and json.loads(d.to_json(indent=None)) == json.loads(text)


def test_unknown_evidence_keeps_rank_and_line_number_and_clips_at_400(mini):
    d = mdx(mini, "a", sg("TP3", "b"), sg("TP3", "RuntimeError: " + "z" * 450), "c")
    assert [(e.line[:14], len(e.line), e.rank, e.lineno) for e in d.evidence] == [
        ("a", 1, None, 1), ("b", 1, "TP3", 2), ("RuntimeError: ", 400, "TP3", 3), ("c", 1, None, 4)]
    assert d.evidence[2].line.endswith("z…")
    assert d.fix == ("No known signature matched. Read the evidence lines and the traceback; if this is a recurring "
                     "failure, add its signature to noderig/diagnose/catalog.toml.")
    d = mdx(mini, sg("TP3", "Traceback (most recent call last):"), '  File "/x/a.py", line 1, in f',
            "ValueError: " + "v" * 450)
    assert [(e.line[:12], len(e.line), e.rank, e.lineno) for e in d.evidence] == [
        ("ValueError: ", 400, "TP3", 3), ("Traceback (m", 34, "TP3", 1), ('File "/x/a.p', 28, "TP3", 2)]
    assert d.cause == "unrecognised failure: ValueError: " + "v" * 185 + "…" and len(d.cause) == 220


def test_unknown_uses_the_traceback_the_failure_is_in(mini):
    d = mdx(mini, '  File "/x/a.py", line 1, in f', "ValueError: v")  # its header cut off: it starts before
    assert (d.cls, d.chain, d.cause) == ("unknown", ["a.f"], "unrecognised failure: ValueError: v")
    d = mdx(mini, "Traceback (most recent call last):", '  File "/x/a.py", line 1, in f', "ValueError")
    assert d.cause == "unrecognised failure: ValueError:"


def test_healthy_meanings_and_the_ready_lines_rank(mini):
    d = mdx(mini, sg("TP0", "weights loaded"), sg("TP0", "ready to roll"))
    assert d.meaning == "The server started and reported that it is ready to serve."
    assert [(e.line, e.rank, e.lineno) for e in d.evidence] == [("ready to roll", "TP0", 2)]
    assert mdx(mini, "hello").meaning == ("Nothing in the log says the launch failed, and the ready line was not seen "
                                          "yet: the server is still starting, or the log stops before it was ready.")


# --------------------------------------------------------------------------------------------
# the anchor index: a cheap first pass that must never hide a line a pattern matches


@pytest.mark.parametrize("pattern, anchor", [
    ("cuda out of memory", ("out", "cuda out of memory")),  # 'cuda' and 'memory' may be parts of longer words
    (r"\bcuda out of memory\b", ("memory", "cuda out of memory")),  # of two as long, the first alphabetically
    ("memory of", (None, "memory of")),  # the pattern's ends are no word edge: 'xmemory ofx' matches
    ("Foo", (None, "foo")),
    ("ab", (None, None)),  # a literal shorter than 3 characters is no use
    (r"\bfoo\b", ("foo", "foo")),
    (r"^foo$", ("foo", "foo")),
    (r"\bfoo\Bbar", (None, "bar")),  # \B is no edge; of two literals as long, the first alphabetically
    (r"\w*oo_bar", (None, "oo_bar")),  # may be the tail of a longer word: not a whole word
    (r"\w+-abc\b", ("abc", "-abc")),
    (r"\w+-abc", (None, "-abc")),  # 'x-abcd' matches
    (r"\bx-abc\w+", ("x", "x-abc")),
    (r"zz\d+aaa", (None, "aaa")),  # the longest literal, not the greatest
    (r"\b(cuda|hip) error\b", ("error", " error")),  # a word every alternative of a group shares
    (r"\d+", (None, None)),
])
def test_anchor_is_a_word_every_match_contains(pattern, anchor):
    from noderig.diagnose.anchors import _anchor
    assert _anchor(pattern) == anchor


@pytest.mark.parametrize("pattern, line", [
    ("cuda out of memory", "torch.cuda out of memoryless"),  # a word at the pattern's end may go on in the line
    ("memory of", "xmemory ofx"),
    (r"\w+-abc", "x-abcd"),
])
def test_the_index_finds_a_match_whose_words_run_past_the_pattern(pattern, line):
    from types import SimpleNamespace

    from noderig.diagnose.anchors import AnchorIndex
    entry = SimpleNamespace(evidence=[re.compile(pattern, re.IGNORECASE)], symptoms=[], alone=[])
    assert AnchorIndex([entry]).hits(line) == {(0, "e")}


@pytest.mark.parametrize("alternative, words, literals", [
    (r"\bfoo bar\b", {"foo", "bar"}, {"foo bar"}),
    ("foo bar", {"bar"} - {"bar"}, {"foo bar"}),  # the pattern's ends are no edge: 'xfoo barx' matches
    ("foo bar baz", {"bar"}, {"foo bar baz"}),  # a word inside the run has its edges in it
    (r"^CUDA error: (out of memory|busy)", {"cuda", "error"}, {"cuda error: "}),  # '^' is an edge; the branch: none
    (r"(not enough|insufficient)( \w+){0,2} memory( \w+){0,2} for (the )?kv", {"for"}, {" memory", " for "}),
    (r"x(?:abc def)y", set(), {"xabc defy"}),  # a group is a sequence like the pattern's: its run goes on through it
    (r"(?!.*\bfallback\b)\bfailed\b", {"failed"}, {"failed"}),  # a lookaround needs nothing of the match
    (r"a\Bbc", set(), set()),  # \B is no edge; 'a' and 'bc' are under 3 characters
    (r"\d+ bytes?", set(), {" byte"}),
])
def test_needs_are_what_every_match_contains(alternative, words, literals):
    from noderig.diagnose.anchors import Needs, _needs
    assert _needs(alternative) == Needs(frozenset(words), frozenset(literals))


def test_may_match_spares_no_fixture_line_a_tier_word_matches():
    # the catalog's line patterns meet the same screen inside the index (the test above); here, the tier's
    from noderig.diagnose.anchors import may_match, needs_of, words_in
    from noderig.diagnose.tokens import default_tokens
    fields = ("tokens", "modules", "strong", "component", "component_modules", "strong_component", "qualifiers")
    patterns = [p for tc in default_tokens().classes for f in fields for p in getattr(tc, f)]
    lines = [(t, low, words_in(low)) for t in _fixture_lines() for low in [t.lower()]]
    spared = [(p.pattern, t) for p in patterns for t, low, words in lines
              if not may_match(p, low, words) and p.search(t)]
    assert spared == []
    assert sum(1 for p in patterns if needs_of(p)) > len(patterns) / 2  # the screen is there to spare most


def test_split_alternatives_only_at_the_top_level():
    from noderig.diagnose.anchors import _split_alternatives
    assert _split_alternatives(r"a|b(c|d)|[|]|\|x|") == ["a", "b(c|d)", "[|]", r"\|x", ""]
    assert _split_alternatives("abc") == ["abc"]


def test_the_index_finds_every_fixture_line_a_signature_matches():
    cat = load_catalog()  # built here, not the cached one: the index under test is this one
    missed = []
    for text in _fixture_lines():
        hits = cat.index.hits(text)
        for ci, c in enumerate(cat.classes):
            for kind, patterns in (("e", c.evidence), ("s", c.symptoms)):
                if any(p.search(text) for p in patterns) and (ci, kind) not in hits:
                    missed.append((c.id, kind, text))
    assert missed == []
    assert {w for w in cat.index.words if w != w.lower()} == set()


@pytest.mark.parametrize("start, joined", [
    ('  File "a.py", line 1, in f', False), ("Traceback (most recent call last):", False),
    ("During handling of the above exception, another exception occurred:", False),
    ("The above exception was the direct cause of the following exception:", False),
    ("Loading safetensors checkpoint shards: 100%", False), ("ValueError: boom", False),
    ("[2026-05-30 13:31:17 TP0] hi", False), ("Dec 02 13:31:17 b300 sglang[5]: hi", False),
    ("more words of the same record", True), ("traceback in lower case", True),
])
def test_a_wrapped_paste_is_not_joined_to_a_line_that_starts_a_record(start, joined):
    wrapped = "y" * 70
    texts = [ln.text for ln in normalize("\n".join([wrapped, wrapped, wrapped, start]))]
    first = wrapped * 3
    assert texts == ([first + start] if joined else [first, strip_prefixes(start)[0]])


def test_first_failure_scans_from_the_first_line_past_quiet_ones(mini):
    assert mdx(mini, "RuntimeError: first line").cls == "unknown"
    assert mdx(mini, "INFO 05-24 00:20:47 [a.py:1] fine", "RuntimeError: x").cls == "unknown"
    assert mdx(mini, "CRITICAL 05-24 00:20:47 [a.py:1] shutting down").cls == "unknown"  # the logger said so
    assert mdx(mini, "WARNING 05-24 00:20:47 [a.py:1] RuntimeError: x").cls == "healthy"
    assert mdx(mini, "Segmentation fault", "server is ready").cls == "healthy"  # before ready: it recovered


def test_the_related_traceback_window(mini):
    tb = ["Traceback (most recent call last):", '  File "/x/a.py", line 1, in f', "ValueError: v"]
    # the matched line inside a traceback whose header was cut: from its first line
    assert mdx(mini, '  File "/x/alpha exploded.py", line 1, in load_weights', "ValueError: v").chain == [
        "alpha exploded.load_weights"]
    # up to two lines past its end (prefixed lines end the message)
    assert mdx(mini, *tb, sg(None, "filler"), sg(None, "alpha exploded")).chain == ["a.f"]
    assert mdx(mini, *tb, sg(None, "filler"), sg(None, "filler"), sg(None, "alpha exploded")).chain == []
    # else the next one, at most 400 lines on
    assert mdx(mini, "alpha exploded", *["f"] * 399, *tb).chain == ["a.f"]
    assert mdx(mini, "alpha exploded", *["f"] * 400, *tb).chain == []
    assert mdx(mini, *["f"] * 300, "alpha exploded", *tb).chain == ["a.f"]
    # the same rank's first
    other = ["Traceback (most recent call last):", '  File "/x/b.py", line 1, in g', "ValueError: w"]
    d = mdx(mini, sg("TP1", "alpha exploded"), "", *[sg("TP0", x) if i == 0 else x for i, x in enumerate(other)], "",
            *[sg("TP1", x) if i == 0 else x for i, x in enumerate(tb)])
    assert d.chain == ["a.f"]
    # its exception line joins the evidence
    d = mdx(mini, "alpha exploded", *tb)
    assert [e.line for e in d.evidence] == ["alpha exploded", "ValueError: v"]


def test_known_chain_adds_the_matched_sections_frames_and_evidence_is_clipped_at_400(mini):
    d = mdx(mini, "Traceback (most recent call last):", '  File "/x/a.py", line 1, in f',
            "RuntimeError: alpha exploded", "", "The above exception was the direct cause of the following exception:",
            "", "Traceback (most recent call last):", '  File "/x/b.py", line 2, in g', "ValueError: other")
    assert d.chain == ["b.g", "a.f"]
    d = mdx(mini, "alpha exploded " + "q" * 500)
    assert len(d.evidence[0].line) == 400


def test_ranks_sort_naturally_and_evidence_gathers_forty_lines(mini):
    d = mdx(mini, *[sg(f"TP{i}", "alpha exploded") for i in (10, 2, 1)])
    assert d.ranks == ["TP1", "TP2", "TP10"]
    d = mdx(mini, *[sg(f"TP{i}", "alpha exploded") for i in range(41)])
    assert len(d.ranks) == 41 and d.evidence[0].rank == ",".join(f"TP{i}" for i in range(40))


def test_warmup_is_named_from_the_warmup_lines(mini):
    frames = ["Traceback (most recent call last):", '  File "/x/sglang/runner.py", line 3, in init_memory_pool',
              "    f()", "RuntimeError: alpha exploded"]
    assert mdx(mini, "INFO:     Application startup complete.", *frames).component == (
        "KV cache allocation, during the server warmup")
    assert mdx(mini, "warmup error here", "skip_server_warmup=True", *frames).component == (
        "KV cache allocation, during the server warmup")
    assert mdx(mini, "Initialization failed. warmup", *frames).component == (
        "KV cache allocation, during the server warmup")
    assert mdx(mini, *frames).component == "KV cache allocation"
    assert mdx(mini, "server is ready").chain == []


@pytest.mark.parametrize("section, where", [
    ('[ignore]\npatterns = ["(x"]\n', "ignore"),
    ('[healthy]\nstrong = ["(x"]\n', "healthy"), ('[healthy]\nweak = ["(x"]\n', "healthy"),
    ('[healthy]\nsglang_markers = ["(x"]\n', "healthy"), ('[healthy]\nsglang_ready = ["(x"]\n', "healthy"),
    ('[[stage]]\nname = "weights"\npatterns = ["(x"]\n', "stage weights"),
    ('[[class]]\nid = "c"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["ok"]\nsymptoms = ["(x"]\n', "c"),
    ('[[class]]\nid = "c"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["ok"]\nsupporting = ["(x"]\n', "c"),
    ('[[class]]\nid = "c"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["ok"]\n'
     'exceptions = [{type = "E", module = "(x"}]\n', "c"),
])
def test_a_bad_regex_names_where_it_is(tmp_path, section, where):
    path = tmp_path / "catalog.toml"
    path.write_text("version = 1\n" + section)
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert str(err.value) == f"{where}: bad regex '(x': missing ), unterminated subpattern at position 0"


def test_component_and_remedy_patterns_ignore_case(mini):
    frames = ["Traceback (most recent call last):", '  File "/x/sglang/runner.py", line 3, in Load_Weights',
              "RuntimeError: alpha exploded, VARIANT TWO"]
    d = mdx(mini, *frames)
    assert (d.component, d.remedy) == ("alpha loader", "set:alpha=2")


def test_exception_signature_takes_the_last_dotted_name():
    from noderig.diagnose.catalog import ExceptionSignature
    from noderig.diagnose.tracebacks import TracebackSection
    sig = ExceptionSignature(re.compile("GammaError"), None, None)
    assert sig.matches(TracebackSection(exc_type="a.b.GammaError")) and sig.matches(TracebackSection(exc_type="GammaError"))
    assert not sig.matches(TracebackSection(exc_type="a.b.GammaErrors")) and not sig.matches(TracebackSection())


def test_split_alternatives_inside_classes_and_nested_groups():
    from noderig.diagnose.anchors import _split_alternatives
    assert _split_alternatives("x[a|b]y|z") == ["x[a|b]y", "z"]
    assert _split_alternatives("((a)|b)|c") == ["((a)|b)", "c"]


def test_a_pattern_without_any_anchor_is_still_searched(tmp_path):
    path = tmp_path / "catalog.toml"
    path.write_text('version = 1\n[[class]]\nid = "digits"\ntitle = "Digits"\nmeaning = "m"\nfix = "f"\n'
                    'evidence = ["\\\\d{3}\\\\s\\\\d{3}"]\n')
    cat = load_catalog(path)
    assert len(cat.index.always) == 1
    assert diagnose("code 123 456\n", cat).cls == "digits"


def test_evidence_details_of_known_and_unknown_failures(mini):
    # unknown: the traceback's exception line far below the first failure keeps its rank
    tb = [sg("TP3", "Traceback (most recent call last):"), *[f'  File "/x/m{i}.py", line 1, in f{i}' for i in range(6)],
          "ValueError: v"]
    d = mdx(mini, *tb)
    assert (d.evidence[0].line, d.evidence[0].rank, d.evidence[0].lineno) == ("ValueError: v", "TP3", 8)
    # known: the related traceback's exception line, with rank, number and a 400-character clip
    d = mdx(mini, sg("TP2", "alpha exploded"), sg("TP2", "Traceback (most recent call last):"),
            '  File "/x/a.py", line 1, in f', "ValueError: " + "w" * 500)
    assert [(e.line[:12], len(e.line), e.rank, e.lineno) for e in d.evidence] == [
        ("alpha explod", 14, "TP2", 1), ("ValueError: ", 400, "TP2", 4)]
    # supporting lines: within 300 lines either side, clipped at 400, numbered, 24 evidence lines at most
    d = mdx(mini, *["f"] * 10, "alpha context out", "alpha context " + "c" * 500, *["f"] * 299, "alpha exploded",
            *["f"] * 298, "alpha context after", "alpha context too far")
    assert [(e.line[:19], len(e.line), e.lineno) for e in d.evidence] == [
        ("alpha exploded", 14, 312), ("alpha context ccccc", 400, 12), ("alpha context after", 19, 611)]
    d = mdx(mini, *[f"alpha context {i}" for i in range(30)], "alpha exploded")
    assert len(d.evidence) == 12 and d.evidence[1].line == "alpha context 0"
    d = mdx(mini, *[f"alpha exploded {i}" for i in range(13)])
    assert len(d.evidence) == 12


def test_a_bare_exception_line_is_read_with_its_next_three_lines(mini):
    assert mdx(mini, "RuntimeError:", "alpha", "exploded").cls == "alpha"
    assert mdx(mini, "before", "RuntimeError:", "alpha", "exploded").cls == "alpha"
    assert mdx(mini, "RuntimeError:", "x", "y", "alpha", "", "exploded").cls == "unknown"


def test_a_message_wrapped_onto_the_next_line_is_read_whole(mini):
    d = mdx(mini, "[12:00:00 TP0] RuntimeError: alpha", "exploded, says the wrapped remainder")
    assert (d.cls, d.evidence[0].line, d.evidence[0].rank) == ("alpha", "RuntimeError: alpha", "TP0")
    # the next line alone shows it: it is the evidence, not the line before it
    d = mdx(mini, "RuntimeError: context first", "alpha exploded")
    assert (d.cls, d.evidence[0].line) == ("alpha", "alpha exploded")
    # a line with its own logger prefix, another rank's line or a new record does not continue one
    assert mdx(mini, "[12:00:00 TP0] RuntimeError: alpha", "[12:00:01 TP0] exploded").cls == "unknown"
    assert mdx(mini, "[12:00:00 TP0] RuntimeError: alpha", "[rank1]: exploded").cls == "unknown"
    assert mdx(mini, "RuntimeError: alpha", "ValueError: exploded").cls == "unknown"
    # a benign text wrapped the same way stays benign; a real error before a benign line is not hidden
    assert mdx(mini, "[ERROR] harmless alpha", "exploded, wrapped").cls == "healthy"
    assert mdx(mini, "[ERROR] real failure", "harmless alpha exploded").cls == "unknown"


def test_sglang_is_recognised_by_its_prefix_or_a_marker(mini):
    for prefix in ("[12:00:00 DP0]", "[12:00:00 PP1]", "[12:00:00 EP2]", "[12:00:00 TP0]"):
        assert not mdx(mini, f"{prefix} hi", "server is ready").ready, prefix
    assert mdx(mini, "[rank0]: hi", "server is ready").ready  # a rank, but not SGLang's prefix
    assert mdx(mini, "(Worker_TP0 pid=1) hi", "server is ready").ready  # TP rank but no time
    assert mdx(mini, "[12:00:00] hi", "server is ready").ready  # time but no rank
    assert not mdx(mini, *["x"] * 3999, "sglang marker line", "now listening").ready
    assert mdx(mini, *["x"] * 4000, "sglang marker line", "now listening").ready  # only the first 4000 lines count


def test_also_seen_and_ready_edge_cases(mini):
    assert mdx(mini, "alpha exploded", "alpha exploded again").also_seen == []
    assert mdx(mini, "alpha exploded and a shared line").also_seen == []
    assert mdx(mini, "gamma noted", "alpha exploded").also_seen == []  # earlier: not a consequence
    assert mdx(mini, "server is ready, alpha exploded").cls == "healthy"  # on the ready line itself


def test_collapse_joins_ranks_once():
    from noderig.diagnose.outcomes import _clip, _collapse
    from noderig.diagnose.result import Evidence
    got = _collapse([Evidence("x", None, 1), Evidence("x", "TP1", 2), Evidence("x", "TP10", 3), Evidence("x", "TP1", 4),
                     Evidence("y", "TP2", 5)])
    assert [(e.line, e.rank, e.lineno) for e in got] == [("x", "TP1,TP10", 1), ("y", "TP2", 5)]
    assert _clip("x" * 220) == "x" * 220 and _clip("x" * 221) == "x" * 219 + "…" and _clip(" a \n b ") == "a b"


def test_component_patterns_see_the_arrows_and_signatures_see_windows_paths(tmp_path):
    from noderig.diagnose.catalog import ExceptionSignature
    from noderig.diagnose.tracebacks import Frame, TracebackSection
    path = tmp_path / "catalog.toml"
    path.write_text('version = 1\n[[class]]\nid = "k"\ntitle = "K"\nmeaning = "m"\nfix = "f"\nevidence = ["kaboom"]\n'
                    'components = [{match = "a\\\\.f -> b\\\\.g$", name = "the a-to-b call"}]\n')
    d = diagnose("Traceback (most recent call last):\n  File \"/x/a.py\", line 1, in f\n"
                 "  File \"/x/b.py\", line 2, in g\nRuntimeError: kaboom\n", load_catalog(path))
    assert (d.component, d.to_dict()["confidence"]) == ("the a-to-b call", 0.95)
    sig = ExceptionSignature(re.compile("E"), re.compile("pkg/mod"), None)
    assert sig.matches(TracebackSection(frames=[Frame("C:\\pkg\\mod\\a.py", 1, "f")], exc_type="E"))
    assert not sig.matches(TracebackSection(frames=[Frame("C:\\pkg\\other\\a.py", 1, "f")], exc_type="E"))


def test_a_chained_section_without_its_exception_line_does_not_stop_the_signature_search(mini):
    assert mdx(mini, "Traceback (most recent call last):", '  File "/x/a.py", line 1, in f',
               "During handling of the above exception, another exception occurred:", "",
               "Traceback (most recent call last):", '  File "/x/gammamod/run.py", line 3, in run',
               "GammaError: x").cls == "gamma"


def test_supporting_lines_stop_at_twenty_four_evidence_lines(mini):
    d = mdx(mini, *[sg(f"TP{i}", "alpha context") for i in range(30)], "alpha exploded")
    assert [e.line for e in d.evidence] == ["alpha exploded", "alpha context"]
    assert d.evidence[1].rank == ",".join(f"TP{i}" for i in range(23))  # 1 decisive + 23 supporting


def _tbs(*lines):
    return [(t.rank, t.start_index, t.end_index, [(s.exc_type, s.message) for s in t.sections], sorted(t.code_lines))
            for t in parse_tracebacks(normalize("\n".join(lines)))]


def test_traceback_state_machine_edges():
    H, F = "Traceback (most recent call last):", '  File "/x/a.py", line 1, in f'
    assert _tbs(H, "hello world") == [(None, 0, 0, [(None, "")], [])]  # ends where nothing follows
    assert _tbs(sg("TP1", F), sg("TP1", "ValueError: v")) == [("TP1", 0, 1, [("ValueError", "v")], [])]
    # a second traceback after the first's blank line is a traceback of its own
    assert _tbs(H, F, "ValueError: a", "", H, F, "KeyError: b") == [
        (None, 0, 3, [("ValueError", "a")], []), (None, 4, 6, [("KeyError", "b")], [])]
    # unrelated text after a connector, or after the blank, closes it
    assert [len(t[3]) for t in _tbs(H, F, "ValueError: a", "", "The above exception was the direct cause of the "
                                    "following exception:", "", "unrelated words here", "", H, F, "KeyError: b")] == [1, 1]
    assert [len(t[3]) for t in _tbs(H, F, "ValueError: a", "", "unrelated words", "During handling of the above "
                                    "exception, another exception occurred:", "", H, F, "KeyError: b")] == [1, 1]
    # a frames-state end and a message-state end do not stop the parse
    assert len(_tbs(H, F, "two words end it", H, F, "KeyError: b")) == 2
    assert len(_tbs(H, F, "ValueError: a", sg(None, "prefixed"), H, F, "KeyError: b")) == 2
    # echoed source: indented by one space, an unindented repeat marker, blank lines keeping the frame's context
    assert _tbs(H, F, "    code()", " more code", "ValueError: v")[0][3] == [("ValueError", "v")]
    assert _tbs(H, F, "    f()", "[Previous line repeated 996 more times]", "RecursionError: deep")[0][3] == [
        ("RecursionError", "deep")]
    assert _tbs(H, F, "", "two words")[0][2:] == (3, [(None, "")], [3])
    # which lines can be the exception line
    assert _tbs(H, "ValueError: x")[0][3] == [("ValueError", "x")]
    assert _tbs(H, "mod.error: x")[0][3] == [("mod.error", "x")]
    assert _tbs(H, "error: x")[0][3] == [(None, "")]
    assert _tbs(H, F, "lowercase: x")[0][3] == [("lowercase", "x")]
    # a message runs on for 12 lines at most
    twelve = [f"m{i}" for i in range(12)]
    assert _tbs(H, F, "ValueError: v", *twelve)[0][3] == [("ValueError", "\n".join(["v", *twelve]))]
    assert _tbs(H, F, "ValueError: v", *twelve, "m12")[0][3] == [("ValueError", "\n".join(["v", *twelve]))]


# --------------------------------------------------------------------------------------------
# the ninth round: the second tier (tokens.py / tokens.toml) and the rules from its tuning logs


@pytest.mark.parametrize("lines, cls", [
    # a failure no signature knows, named by two key tokens of one cause in its decisive line
    (["RuntimeError: the draft head's hidden size (4096) differs from the speculative target's (8192)"],
     "speculative_config"),
    (["OSError: shard model-00007-of-00009.safetensors is missing from /models/qwen"], "checkpoint_incomplete"),
    (["RuntimeError: kernel built for sm_90a cannot run here (compute capability 12.0)"], "unsupported_gpu_arch"),
    # a refusal in other words than "only supported on": "does not support this GPU", "is not supported by", "below
    # the minimum", with the hardware it names
    (["RuntimeError: this kernel does not support the current GPU (compute capability 7.5)"], "unsupported_gpu_arch"),
    (["ValueError: sm_75 is not supported by the fused MoE kernel"], "unsupported_gpu_arch"),
    (["RuntimeError: compute capability 6.1 is below the minimum this build needs"], "unsupported_gpu_arch"),
    # (round 75: "requires SM 10.0" is a signature now, the generation right after the verb)
    (["ValueError: fp4 GEMM wants SM 10.0 or newer"], "unsupported_gpu_arch"),
    (["ValueError: BarForCausalLM has no vLLM implementation in this release"], "unsupported_architecture"),
    (["RuntimeError: no supported CUDA architectures in this build"], "unsupported_gpu_arch"),
    (["ImportError: the installed cutlass DSL lacks cute.nvgpu.tcgen05.MmaF8Op"], "cute_dsl_version_skew"),
    (["RuntimeError: nvcc under CUDA_HOME=/opt/cuda-11.8 is older than the one torch needs"],
     "toolkit_misconfigured"),
    # the leave-one-out measure (scripts/diagnose_loo.py: a tuning log's own signature lines left out): a chat
    # template or a tokenizer mode beside the tokenizer; a speculative method's name alone (EAGLE, NextN, Medusa,
    # DFlash, suffix decoding); the argument checks' refusals, and a flag beside one; a port in use in other words
    (["ValueError: the chat template could not be rendered by the tokenizer"], "tokenizer_error"),
    (["ValueError: --tokenizer-mode mistral needs a fast tokenizer"], "tokenizer_error"),
    (["RuntimeError: suffix decoding needs a prompt cache"], "speculative_config"),
    (["ValueError: --enable-foo and --disable-bar cannot be used together"], "invalid_server_args"),
    (["ValueError: invalid value 'yes' for --enable-bar"], "invalid_server_args"),
    (["RuntimeError: port 8000 is already in use by another process"], "port_in_use"),
    # round 81, from the releases' raise sites: a refusal about "this device" / "the current GPU", a minimum compute
    # capability after "requires"; a launcher that found no free port, a port it must have that is taken
    (["AssertionError: FooMLA is not supported on this device"], "unsupported_gpu_arch"),
    (["ValueError: the dequantize kernel is not supported for the current device"], "unsupported_gpu_arch"),
    (["ValueError: W4A8 checkpoints require CUDA compute capability >= 90; got 89"], "unsupported_gpu_arch"),
    (["RuntimeError: Failed to find available port after 50 attempts (started from port 8000)"], "port_in_use"),
    (["RuntimeError: API server port 8000 is unavailable"], "port_in_use"),
    # a word only one cause uses (`strong`) names it alone when no other class's word is there
    (["ValueError: this combination of speculative settings is refused by the scheduler"], "speculative_config"),
    # the module path of the frames counts as one token: a refusal raised in speculative code (a ValueError
    # raised there is a signature since the twenty-first round; a KeyError is still the tier's)
    (['Traceback (most recent call last):',
      '  File "/v/vllm/v1/spec_decode/eagle.py", line 12, in propose',
      '    raise KeyError("draft length 9 exceeds the budget")',
      'KeyError: draft length 9 exceeds the budget'], "speculative_config"),
])
def test_ninth_round_key_tokens_name_a_failure_no_signature_knows(lines, cls):
    d = diagnose("\n".join(lines))
    assert d.cls == cls, d.cause
    assert d.remedy is None and d.confidence < 0.6  # a guess by tokens: lower confidence, no automatic repair
    assert "key tokens" in d.cause and d.evidence[0].line.startswith(lines[-1].split(":")[0])


@pytest.mark.parametrize("lines, cls", [
    # one token alone names nothing; an attribute a bug's AttributeError names is no draft (round 79)
    (["AttributeError: 'GPUModelRunner' object has no attribute 'draft_cfg'"], "unknown"),
    (["RuntimeError: shard 3 failed to respond"], "unknown"),
    # two causes' tokens in one line: no class clearly wins
    (["RuntimeError: NCCL allreduce on the shm broadcast failed"], "unknown"),
    # the draft says where it failed, not why: another cause's words decide (round 79; before, a tie: unknown)
    (["RuntimeError: NCCL allreduce on the draft worker failed"], "nccl_failure"),
    # "this device" alone is no refusal of the GPU; an open port alone names nothing (round 81)
    (["RuntimeError: failed to allocate a staging buffer on this device"], "unknown"),
    (["ValueError: no open ports in the config"], "unknown"),
    (["RuntimeError: CUDA error: out of memory on this device"], "cuda_oom"),
    # "nccl" names a component, not a cause: alone it names nothing
    (["RuntimeError: nccl could not open its shared segment /dev/shm/nccl-x"], "unknown"),
    # the tokens are in the command line, not in the line that decided the failure (a bug's TypeError there is
    # named by the setting: test_a_bug_in_a_launch_that_turns_a_feature_on_is_named_by_the_setting)
    (["python -m sglang.launch_server --speculative-algorithm EAGLE --speculative-draft-model-path /m/draft",
      "RuntimeError: the scheduler could not be started"], "unknown"),
    # a frame's path counts once, as a module path, even in a paste of frames alone
    (['  File "/v/sglang/srt/layers/quantization/deep_gemm_wrapper/compile_utils.py", line 3, in hook',
      '  File "/usr/lib/python3.12/concurrent/futures/_base.py", line 449, in result'], "unknown"),
    # a flag alone is no argument error: every class's message names the flag that fixes it
    (["RuntimeError: the KV cache cannot hold one request; lower --context-length"], "kv_cache_insufficient"),
    (["RuntimeError: worker failed; rerun with --log-level debug"], "unknown"),
    (["ValueError: the value must be positive; see --help"], "unknown"),
    # healthy stays healthy whatever its words: the tier reads only a failure's lines
    (["INFO 01-01 00:00:01 [config.py:1] speculative decoding: draft model /m/eagle3, 3 speculative tokens",
      "WARNING 01-01 00:00:02 [eagle.py:1] draft vocab differs from the target model; using the target's",
      "INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"], "healthy"),
    (["[2026-01-01 00:00:01 TP0] shard model-00001-of-00002.safetensors missing locally; downloading",
      "[2026-01-01 00:00:09 TP0] Load weight end. type=X"], "healthy"),
    # a signature still wins over the tokens (the draft's words in an out-of-memory error: cuda_oom)
    (["torch.OutOfMemoryError: CUDA out of memory while allocating the draft model's speculative buffers"],
     "cuda_oom"),
])
def test_ninth_round_key_tokens_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # a message copied alone, no logger's prefix and no failure word, that refuses or lacks something its key tokens
    # name: what failed (round 81; the leave-one-out measure's lone lines, read healthy once their own lines are out)
    (["draft model head size must match the target model for speculation"], "speculative_config"),
    (["missing shard model-00003-of-00008.safetensors"], "checkpoint_incomplete"),
    (["the KV cache is too small for one request", "of max_model_len 131072"], "kv_cache_insufficient"),
])
def test_a_message_pasted_alone_that_refuses_is_a_failure_its_tokens_name(lines, cls):
    d = diagnose("\n".join(lines))
    assert d.cls == cls, d.cause
    assert d.remedy is None and d.confidence < 0.6 and "key tokens" in d.cause


@pytest.mark.parametrize("lines, cls", [
    # vLLM's CUDACHECK in its custom all-reduce prints this and exits: a failure whatever CUDA said (round 83); an
    # 'invalid argument' there is its buffers failing to be shared (round 192: the collectives' set-up, below)
    (["Failed: Cuda error /v/csrc/custom_all_reduce.cuh:307 'unspecified launch failure'"], "unknown"),
    (["Failed: Cuda error /v/csrc/custom_all_reduce.cuh:307 'invalid argument'"], "nccl_failure"),
    # two GPUs without peer access under a custom all-reduce (or NCCL's P2P): the collectives' set-up failed
    (["[gpu_id=0] Set cuda device.", "[gpu_id=1] Set cuda device.", "[gpu_id=0] Init nccl begin.",
      "Failed: Cuda error /v/csrc/custom_all_reduce.cuh:307 'peer access is not supported between these two devices'"],
     "nccl_failure"),
])
def test_a_custom_all_reduce_cuda_check_is_a_failure(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines", [
    # a class's words without a refusal: a progress bar, a setting's value, a version line
    ["Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|######| 67/67 [00:05<00:00, 12.5it/s]"],
    ["Speculative decoding with EAGLE3, num_speculative_tokens=3, draft model loaded"],
    ["torch 2.9.0+cu128, compute capability 10.0 (sm_100), flashinfer 0.5.2"],
    # a refusal the program goes on from, or that its logger marked as a warning
    ["No speculative draft model given, speculative decoding disabled"],
    ["the fused MoE kernel is not tuned for sm_120; using the default config"],
    [" WARN text_generation_launcher: `trust_remote_code` is set. Trusting that model do not contain malicious code."],
    ["WARNING 01-01 00:00:01 [eagle.py:1] draft vocab size does not match the target's; using the target's"],
    # more than a message: four lines are a log's excerpt, read as a log
    ["draft model head size must match the target model", "INFO: loading", "INFO: loaded", "INFO: warming up"],
])
def test_a_short_paste_that_refuses_nothing_stays_healthy(lines):
    assert diagnose("\n".join(lines)).cls == "healthy"


@pytest.mark.parametrize("lines, cls", [
    # the CUDA allocator's own call failing, whoever called it
    (["cudaMallocAsync returned out of memory on device 1"], "cuda_oom"),
    (["ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 1048576"], "cuda_oom"),
    # TensorRT's arch check ("Unsupported SM"), in an assertion or an error record
    (["[F] [TRT] Assertion failed: Unsupported SM (caskUtils)"], "unsupported_gpu_arch"),
    # the DSL's MLIR compiler failing on a quoted CuTe dialect type
    (["error: 'cute.copy' op operand #0 must be '!cute.memref<f16>', got tensor"], "cute_dsl_version_skew"),
    # the shell's report of a signal in another locale is a dead process
    (["Loading model...", "段错误 (核心已转储)"], "unknown"),
    (["INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000",
      "段错误 (核心已转储)"], "unknown"),
    # ... in the other locales glibc and bash translate it to, and SIGFPE's own words, which bash prints alone
    # when no core was dumped
    *[(["Loading model...", death], "unknown") for death in (
        "Speicherzugriffsfehler (Speicherabzug geschrieben)", "Erreur de segmentation (core dumped)",
        "Violación de segmento (`core' generado)", "Falha de segmentação (imagem do núcleo gravada)",
        "Ошибка сегментирования (стек памяти сброшен на диск)", "セグメンテーション違反です (コアダンプ)",
        "세그멘테이션 오류 (core dumped)", "./serve.sh: 行 3: 12345 已杀死               python -m sglang.launch_server",
        "Floating point exception")],
    # trap: the same words inside a sentence of prose are no shell's report
    (["Loading model...", "进程已杀死了吗"], "healthy"),
    # traps: shared memory is not an SM; a CPU buffer is not GPU memory; an IR dump at INFO is no error
    (["RuntimeError: unsupported smem size 232448 for this kernel"], "unknown"),
    (["ggml_gallocr_reserve_n: failed to allocate CPU buffer of size 1048576",
      "llama_init_from_model: failed to allocate compute buffers"], "healthy"),
    (["INFO 01-01 00:00:01 [dsl.py:1] lowered '!cute.layout<(4,8):(8,1)>'",
      "INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"], "healthy"),
    # Python logging's default format: the logger is named "uvicorn.error", the record is INFO
    (["[2026-01-01 00:00:01 TP0] INFO:uvicorn.error:Started server process [42]",
      "[2026-01-01 00:00:02 TP0] Load weight end. type=X"], "healthy"),
    (["ERROR:root:engine failed to start"], "unknown"),
])
def test_ninth_round_signatures_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


def _tier_inputs(lines, cat):
    """What the key-token tier reads of normalised lines, as the engine gives it: (the lines with what a program goes
    on from read at WARNING, tracebacks, first failure)."""
    from noderig.diagnose.engine import _first_failure
    from noderig.diagnose.startup import quieted

    tbs = parse_tracebacks(lines)
    lines = quieted(lines, cat, tbs)
    return lines, tbs, _first_failure(lines, cat, set().union(*(tb.code_lines for tb in tbs)) if tbs else set(), tbs)


def _tier_names(*lines: str) -> str | None:
    """What the key-token tier alone names for a paste (as if no signature matched it)."""
    from noderig.diagnose.tokens import name_by_tokens

    cat = default_catalog()
    parsed = normalize("\n".join(lines))
    verdict = name_by_tokens(*_tier_inputs(parsed, cat), cat)
    return verdict.cls if verdict else None


_CUTE_FRAMES = ["Traceback (most recent call last):",
                '  File "/py/site-packages/nvidia_cutlass_dsl/python_packages/cutlass/base_dsl/jit.py", line 9, in run']


@pytest.mark.parametrize("lines, named", [
    # a component's names (cutlass, cute, dsl; nccl; deep_gemm) say where it failed: they do not outvote a cause
    ([*_CUTE_FRAMES, "ValueError: CuTe DSL HCA compilation requires SM100/SM103, got SM90"], "unsupported_gpu_arch"),
    (["RuntimeError: MNNVL CuTe DSL kernels require a Blackwell GPU"], "unsupported_gpu_arch"),
    (["misc/shm.cc:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-1 (size 9637888): "
      "No space left on device"], "shm_too_small"),
    (["node:1:1 [1] misc/cudawrap.cc:188 NCCL WARN Cuda failure 803 'system has unsupported display driver / cuda "
      "driver combination'"], "driver_mismatch"),
    (["OSError: Can't load tokenizer for 'org/model'. If you were trying to load it from "
      "'https://huggingface.co/models', make sure you don't have a local directory with the same name."],
     "tokenizer_error"),
    # a state word ("not found", "mismatch") counts only beside its class's object: NVML's mismatch is the
    # driver's, a tokenizer file not found the tokenizer's, nvcc not found the compiler's
    (["Failed to initialize NVML: Driver/library version mismatch (nvidia-smi exited 18)"], "driver_mismatch"),
    (["OSError: Can't load tokenizer for '/models/m': tokenizer.json not found"], "tokenizer_error"),
    (["RuntimeError: Could not find nvcc under /opt/cuda/bin"], "nvcc_not_found"),
    # beside its object it counts as before
    (["RuntimeError: shard model-00003-of-00009.safetensors is missing"], "checkpoint_incomplete"),
    (["RuntimeError: libcudart.so.12 does not match the CUDA version torch was built with"], "toolkit_misconfigured"),
    (["RuntimeError: Worker failed: no cudagraph sizes fit num_speculative_tokens + 1 as spec-decode requires"],
     "speculative_config"),
    # with no cause in the line, the component's names name it as before
    ([*_CUTE_FRAMES, "RuntimeError: cutlass cute DSL lowering did not finish"], "cute_dsl_version_skew"),
    # a cause word below min_score does not silence them ("arch" is one point; cute's three win)
    (["AttributeError: module 'cutlass.cute.arch' has no attribute 'fmin' (nvidia-cutlass-dsl 4.5.0)"],
     "cute_dsl_version_skew"),
])
def test_component_and_state_words_do_not_outvote_a_cause(lines, named):
    assert _tier_names(*lines) == named


_GRAPH_FRAME = ["Traceback (most recent call last):",
                '  File "/py/site-packages/torch/cuda/graphs.py", line 88, in capture_end', "    super().capture_end()"]


@pytest.mark.parametrize("lines, named", [
    # the session after rounds 54 and 55, from the leave-one-out measure (tuning logs only): words a cause uses in any
    # wording. The reader's words for a broken file and "corrupt" are two words, not one
    (["RuntimeError: unexpected EOF while reading /models/m/consolidated.00.pth: the file is corrupted"],
     "checkpoint_corrupt"),
    # torch's graph module is where a capture fails, whatever it raises
    ([*_GRAPH_FRAME, "RuntimeError: the capture was invalidated by a synchronizing call on the legacy stream"],
     "cuda_graph_capture"),
    # a CUDA library's allocation failure (cuFFT, cuDNN, cuBLAS: *_ALLOC_FAILED) is the GPU's memory
    (["RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED"], "cuda_oom"),
    # the driver's own library (libcuda, libnvidia-*) not found or not loaded; "found no" driver
    (["RuntimeError: libcuda.so cannot be found"], "driver_mismatch"),
    (["ImportError: libnvidia-ml.so.1 could not be loaded by the runtime"], "driver_mismatch"),
    (["[agent] Unable to initialise NVML: library not found"], "driver_mismatch"),
    # a tokenizer's file that is not there (a chat template's is the --chat-template value's, since round 125: no
    # tokenizer word names it)
    (["OSError: Not found: \"/models/m/tokenizer.model\": No such file or directory"], "tokenizer_error"),
    (["ValueError: tokenizer file /t/tokenizer.json does not exist"], "tokenizer_error"),
    (["ValueError: chat template file /t/x.jinja does not exist"], None),
    # "unsupported architecture" beside a model's class is the model's; an arch mismatch by a CUDA library's status,
    # a kernel supported on other GPUs, the GPU's
    (["ValueError: Unsupported architecture: FooForCausalLM"], "unsupported_architecture"),
    (["RuntimeError: CUSPARSE_STATUS_ARCH_MISMATCH"], "unsupported_gpu_arch"),
    (["AssertionError: this MoE kernel is supported on Blackwell GPUs only"], "unsupported_gpu_arch"),
    # cuDNN's library is one of the CUDA libraries a toolkit or its wheels provide
    (["ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"], "toolkit_misconfigured"),
    # "insufficient" is a state: beside shared memory it is the shm's, beside a KV cache the cache's
    (["RuntimeError: worker 3 died of a bus error: insufficient shared memory"], "shm_too_small"),
    (["ValueError: Insufficient memory to allocate KV cache: need 35.2 GiB, have 12.1 GiB"], "kv_cache_insufficient"),
])
def test_a_causes_general_words_name_it_in_new_wording(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("line", [
    # a state word alone, or a driver library that did not fail, names no class; the toolkit's runtime is not the driver
    "RuntimeError: config file not found",
    "RuntimeError: libcuda.so was loaded twice",
    "ValueError: the tokenizer returned 3 ids",
    "RuntimeError: weights file is corrupt",
])
def test_a_causes_general_words_alone_name_nothing(line):
    assert _tier_names(line) is None and diagnose(line).cls == "unknown"


def test_an_op_namespace_without_the_op_is_the_extensions_build():
    # torch's op namespace of a compiled extension without the op its Python code calls: another build of it
    for line in ["AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'",
                 "AttributeError: '_OpNamespace' '_moe_C' object has no attribute 'topk_softmax'"]:
        assert diagnose(line).cls == "kernel_abi_mismatch", line
    # sgl_kernel's namespace is its own class; any other object without an attribute is a bug no class names
    assert diagnose("AttributeError: '_OpNamespace' 'sgl_kernel' object has no attribute 'rmsnorm'").cls == (
        "sgl_kernel_mismatch")
    assert diagnose("AttributeError: 'Foo' object has no attribute 'rms_norm'").cls == "unknown"


def test_too_old_is_a_state_of_what_it_follows():
    # "too old" names the driver only beside the driver's words: an sgl-kernel too old is sgl-kernel's
    assert _tier_names("RuntimeError: sgl-kernel is too old; please upgrade to sgl-kernel>=0.3.9") == (
        "sgl_kernel_mismatch")
    assert _tier_names("RuntimeError: the NVIDIA driver is too old for this runtime") == "driver_mismatch"
    assert _tier_names("RuntimeError: this plugin is too old") is None


def test_a_tensor_parallel_size_the_heads_do_not_divide_is_the_command_lines():
    # the fifty-ninth round: vLLM's heads check, raised, inside an engine-core record, or in pydantic's words
    for line in ["ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
                 "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:01 [core.py:1] ValueError: Total number of attention heads "
                 "(28) must be divisible by tensor parallel size (8)",
                 "  Value error, Total number of attention heads (96) must be divisible by tensor parallel size (5). "
                 "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]"]:
        d = diagnose(line)
        assert d.cls == "invalid_server_args" and d.confidence >= 0.5, line
    # the rule in a question, without the numbers of a refusal, is no failure
    assert diagnose("Why must the number of attention heads be divisible by tensor parallel size?").cls == "healthy"


@pytest.mark.parametrize("line, named", [
    # the sixtieth round's signatures, in other words than its logs: Llama 3.1's rope_scaling on an older transformers
    ("[rank0]: ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': "
     "32.0, 'rope_type': 'llama3'}", "unsupported_architecture"),
    # a chat template that does not parse; a quantization that refuses --dtype or --quantization as given
    ("jinja2.exceptions.TemplateSyntaxError: expected token 'end of statement block', got 'x'", "tokenizer_error"),
    ("ValueError: torch.float32 is not supported for quantization method gptq. Supported dtypes: [torch.float16]",
     "invalid_server_args"),
    ("ValueError: Quantization method specified in the model config (awq) does not match the quantization method "
     "specified in the `quantization` argument (fp8).", "invalid_server_args"),
    # a minimum compute capability printed as a tuple of pieces
    ("RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 89. ', "
     "'Current capability: 80.')", "unsupported_gpu_arch"),
    # rounds 61 and 62 (logs chosen for the diagnosis's misses), in other words than theirs: Docker publishing a port
    # another container holds
    ("docker: Error response from daemon: driver failed programming external connectivity on endpoint vllm "
     "(3f2a): Bind for [::]:30000 failed: port is already allocated.", "port_in_use"),
    # an extension built against NumPy 1.x under NumPy 2
    ("A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.1.3 as it may crash.", "kernel_abi_mismatch"),
    # a tokenizer class without the attribute its caller reads
    ("AttributeError: LlamaTokenizer has no attribute added_tokens_decoder_extended", "tokenizer_error"),
    # a minimum SM in a program's words
    ("RuntimeError: this build only supports sm_80 or higher", "unsupported_gpu_arch"),
])
def test_refusals_of_rounds_60_to_62_are_named_as_signatures(line, named):
    d = diagnose(line)
    assert d.cls == named and d.confidence >= 0.5, d.cause


def test_nccls_cuda_wrapper_missing_an_entry_point_is_benign():
    # round 63: NCCL's CUDA wrapper warns that the driver lacks an entry point and goes on
    warn = "node1:30483:30483 [0] misc/cudawrap.cc:{} NCCL WARN {}"
    log = ["node1:30483:30483 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>",
           warn.format(131, "Retrieve cuGetErrorString failed with 0 status 4021"),
           warn.format(190, "CUDA some PFN functions not found in the library"),
           "node1:30483:30483 [0] NCCL INFO Comm config Blocking set to 1"]
    assert diagnose("\n".join(log)).cls == "healthy"
    # the wrapper's report of a CUDA call that failed is still a failure
    assert diagnose(warn.format(88, "Cuda failure 803 'system has unsupported display driver / cuda driver "
                                    "combination'")).cls == "driver_mismatch"


def test_a_tokenizer_class_name_is_read_as_one_word():
    # the class name is taken whole: a word of class names is one name (bench/diagnose.py times the long word)
    assert diagnose("AttributeError: " + "Tokenizer" * 2000 + " has no attribute x").cls == "tokenizer_error"
    assert diagnose("AttributeError: " + "Tokenizer" * 2000 + "!").cls == "unknown"


def test_cublas_without_its_handle_is_a_symptom_of_a_full_gpu():
    # cuBLAS could not create its handle: a full GPU, as a symptom (a wrong device can say it too)
    d = diagnose("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`")
    assert d.cls == "cuda_oom" and 0.5 <= d.confidence < 0.9
    # a decisive cause beside it wins
    assert diagnose("\n".join(["RuntimeError: CUDA error: no kernel image is available for execution on the device",
                               "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"])
                    ).cls == "unsupported_gpu_arch"


def test_a_model_class_after_unsupported_architecture_is_not_the_gpu():
    # TensorRT's "Unsupported architecture" is the GPU's; the same words before a model's class name the model
    assert diagnose("ValueError: Unsupported architecture: FooForCausalLM").cls == "unsupported_architecture"
    for line in ["[TRT] Unsupported architecture", "RuntimeError: Unsupported architecture sm_120", "Unsupported SM."]:
        assert diagnose(line).cls == "unsupported_gpu_arch", line


def test_the_tiers_evidence_is_the_line_that_holds_the_class_words():
    # the DSL's class has component words only: its evidence is still the line that holds them, not the first one read
    d = diagnose("\n".join(["ERROR 01-01 00:00:01 [jit.py:1] cutlass cute DSL kernel lowering stopped",
                            "Traceback (most recent call last):", '  File "/srv/w.py", line 3, in run',
                            "RuntimeError: worker process ended"]))
    assert d.cls == "cute_dsl_version_skew" and d.confidence < 0.5
    assert d.evidence[0].line == "cutlass cute DSL kernel lowering stopped"


_EAGLE_LAUNCH = "python -m sglang.launch_server --model-path /m/t --speculative-algorithm EAGLE --speculative-num-steps 3"


@pytest.mark.parametrize("lines", [
    # a top-k left unset (SGLang's NEXTN without --speculative-eagle-topk), in the command or in the config dump
    [_EAGLE_LAUNCH, "TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'"],
    ["vllm serve /m/t --speculative-config '{\"method\": \"mtp\"}'",
     "TypeError: '>' not supported between instances of 'NoneType' and 'int'"],
    ["[2026-01-01 00:00:01] server_args=ServerArgs(model_path='/m/t', speculative_algorithm='EAGLE3', tp_size=8)",
     "Traceback (most recent call last):", '  File "/s/sglang/srt/managers/scheduler.py", line 9, in __init__',
     "KeyError: 'embed_tokens.weight'"],
    ["vllm serve /m/t --num-speculative-tokens 3", "AssertionError"],
])
def test_a_bug_in_a_launch_that_turns_a_feature_on_is_named_by_the_setting(lines):
    d = diagnose("\n".join(lines))
    assert d.cls == "speculative_config", d.cause
    assert d.remedy is None and d.confidence < 0.45  # a guess by the setting: below the key tokens' own
    assert "the launch turns this feature on (line 1)" in d.cause and "relaunch without the feature" in d.fix
    bug, setting = d.evidence[:2]  # the bug's line, then the setting's
    assert lines[-1].endswith(bug.line) and lines[0].endswith(setting.line) and setting.line


@pytest.mark.parametrize("lines, cls", [
    # the setting turned off, or printed as the default it is: no feature on
    (["server_args=ServerArgs(model_path='/m/t', speculative_algorithm=None, tp_size=8)",
      "TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'"], "unknown"),
    (["vllm serve /m/t --speculative-config None", "AttributeError: 'NoneType' object has no attribute 'x'"], "unknown"),
    # an error that says a cause (not a bug's type) is not the feature's by its setting
    ([_EAGLE_LAUNCH, "RuntimeError: the scheduler could not be started"], "unknown"),
    ([_EAGLE_LAUNCH, "ValueError: the value must be positive"], "unknown"),
    # another class's words name it, whatever the launch turned on
    ([_EAGLE_LAUNCH, "KeyError: shard model-00002-of-00009.safetensors missing from weight_map"],
     "checkpoint_incomplete"),
    # the feature on and nothing failed: healthy
    ([_EAGLE_LAUNCH, "[2026-01-01 00:00:09] The server is fired up and ready to roll!"], "healthy"),
    # no setting: a bug's exception alone names nothing
    (["TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'"], "unknown"),
])
def test_a_setting_names_only_a_bug_that_no_word_explains(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("line, cls", [
    ("RuntimeError: max_total_num_tokens is too small: 512. Please increase --mem-fraction-static.",
     "kv_cache_insufficient"),
    ("ValueError: Please pass the argument --trust-remote-code to load this model's configuration.",
     "trust_remote_code"),
])
def test_the_token_tier_reads_a_setting_as_its_flag_is_spelled(line, cls):
    # the engines' hints and users name a setting by its command-line flag, with hyphens
    assert diagnose(line).cls == cls


def test_a_hybrid_models_state_cache_that_does_not_fit_is_the_kv_cache_not_speculative_decoding():
    # SGLang's hint lists a speculative setting among the knobs that free memory: the shortfall is the cache's
    hint = ("Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, (3) reduce "
            "--speculative-num-draft-tokens, or (4) use GPUs with more memory.")
    assert diagnose("RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                    "Computed max_mamba_cache_size=0. " + hint).cls != "speculative_config"
    # the state cache is a word of the KV cache's in the key-token tier
    assert diagnose("RuntimeError: the linear-attention state cache has no room for one request; increase "
                    "--mem-fraction-static").cls == "kv_cache_insufficient"


def test_two_features_turned_on_name_neither(tmp_path):
    from noderig.diagnose.tokens import load_tokens, name_by_tokens

    (tmp_path / "t.toml").write_text("""version = 1
programming_errors = ["TypeError"]
[[class]]
id = "speculative_config"
tokens = ['\\bdraft']
enabled_by = ['--speculative-algorithm \\w']
[[class]]
id = "tokenizer_error"
tokens = ['tokenizer']
enabled_by = ['--tokenizer-mode \\w']
""")
    tier = load_tokens(tmp_path / "t.toml")
    cat = default_catalog()
    for launch, named in [("x --speculative-algorithm EAGLE", "speculative_config"),
                          ("x --speculative-algorithm EAGLE --tokenizer-mode slow", None)]:
        lines = normalize(f"{launch}\nTypeError: 'NoneType' object is not subscriptable")
        verdict = name_by_tokens(lines, parse_tracebacks(lines), 1, cat, tier)
        assert (verdict.cls if verdict else None) == named


def test_a_strong_component_scores_two_points_but_yields_to_a_cause(tmp_path):
    from noderig.diagnose.tokens import load_tokens, name_by_tokens

    (tmp_path / "t.toml").write_text("""version = 1
[[class]]
id = "speculative_config"
strong = ['eagle']
strong_component = ['\\bdraft']
[[class]]
id = "kv_cache_insufficient"
tokens = ['kv cache', 'not enough']
[[class]]
id = "tokenizer_error"
tokens = ['tokenizer']
""")
    tier = load_tokens(tmp_path / "t.toml")
    cat = default_catalog()
    for line, named in [("ValueError: draft_token_num must be positive", "speculative_config"),
                        # a cause's words that reach min_score outvote it
                        ("ValueError: not enough room in the draft's KV cache", "kv_cache_insufficient"),
                        # a cause below min_score does not, and the margin is not met: nothing
                        ("OSError: the draft tokenizer failed", None),
                        # beside the class's own cause word it is one point, and widens no margin over another cause
                        ("ValueError: EAGLE draft: not enough room in the KV cache", None)]:
        lines = normalize(line)
        verdict = name_by_tokens(lines, parse_tracebacks(lines), 0, cat, tier)
        assert (verdict.cls if verdict else None) == named, line


def test_every_token_pattern_is_seen_in_a_tuning_fixtures_decisive_lines():
    """tokens.toml is checked like the catalog: every token and module pattern is seen in the decisive
    lines (or frame paths) of some tuning fixture, and every class it names is a catalog class."""
    from noderig.diagnose.tokens import decisive_lines, default_tokens

    cat = default_catalog()
    texts, paths, settings = [], [], []
    for path in ALL_FIXTURES:
        lines = normalize(fixture_text(path))
        settings += [ln.text for ln in lines]  # a setting is read on any line of the launch
        lines, tbs, first = _tier_inputs(lines, cat)
        if first is not None:
            t, p = decisive_lines(lines, tbs, first)
            texts += [x for _, x in t]
            paths += p
    # each list of a token class, and the text it is searched in
    seen_in = {"tokens": texts, "strong": texts, "component": texts, "qualifiers": texts, "strong_component": texts,
               "modules": paths,
               "component_modules": paths, "enabled_by": settings}
    dead = []
    for tc in default_tokens().classes:
        assert tc.id in cat.ids, tc.id
        for kind, where in seen_in.items():
            dead += [f"{tc.id}.{kind}: {p.pattern}" for p in getattr(tc, kind) if not any(p.search(x) for x in where)]
    assert not dead, dead


def test_the_token_tier_never_names_a_healthy_or_an_unknown_tuning_fixture():
    """Leave the signatures out: the tier alone, on every tuning fixture that failed, names no `unknown`
    fixture and names no class but the fixture's own, except where a signature already errs the same way."""
    from noderig.diagnose.tokens import name_by_tokens

    cat = default_catalog()
    named, wrong = 0, []
    for path in ALL_FIXTURES:
        lines = normalize(fixture_text(path))
        lines, tbs, first = _tier_inputs(lines, cat)
        verdict = name_by_tokens(lines, tbs, first, cat) if first is not None else None
        if verdict is None:
            continue
        named += 1
        # the tier reads the error, not the detail NCCL prints below it: a class the error is explained_by
        # (a full /dev/shm in NCCL's "Last error:") is named by the signatures, which the tier never overrides
        explained = path.parent.name in cat.get(verdict.cls).explained_by
        if verdict.cls != path.parent.name and KNOWN_MISSES.get(fixture_id(path), ("",))[0] != verdict.cls \
                and not explained:
            wrong.append(f"{fixture_id(path)} -> {verdict.cls}")
    assert not wrong, wrong
    assert named >= 120  # 128 when this was written: the tier alone names about a third of the tuning failures


# --------------------------------------------------------------------------------------------
# the tenth round: failures without a Python traceback or an "Error:" line, and the rules from its
# tuning logs (each case in other words than the fixtures'; each `unknown` or `healthy` before)

_READY = "INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"


@pytest.mark.parametrize("lines", [
    # a C++ exception nobody caught, with or without its what() line
    ["terminate called without an active exception"],
    ["Loading weights...", "terminate called after throwing an instance of 'c10::Error'"],
    ["  what():  std::bad_alloc"],
    # an abort frame in a glibc backtrace; a launcher's report of a child's signal
    ["/usr/lib/x86_64-linux-gnu/libc.so.6(abort+0x178)[0x7f01aa]", "./llama-server(+0x1234)[0x5601]"],
    ["router: shard 1 was terminated by signal 9"],
    # the same deaths after the ready line are a dead server, not a request's error
    [_READY, "terminate called after throwing an instance of 'std::system_error'"],
    # ggml's CUDA check ("CUDA error N at file:line: ...")
    ["CUDA error 700 at /src/ggml/ggml-cuda.cu:1234: an illegal memory access was encountered"],
    # an exception named mid-line, in Markdown, by its repr; an errno without its type
    ["模型加载失败RuntimeError: weights could not be mapped onto the device"],
    ["**KeyError: 'rope_type'**"],
    ["loader exited with exception: OSError('disk quota exceeded')"],
    ["[Errno 13] Permission denied: '/models/x/config.json'"],
    # the shell failing to run a command, a C assertion in libc's macOS words, a Rust panic, ptxas
    ["bash: line 1: ninja: command not found"],
    ["Assertion failed: (n_dims <= 4), function ggml_new_tensor_impl, file ggml.c, line 4545."],
    ["thread 'tokio-runtime-worker' panicked at src/router.rs:12:5:"],
    ["ptxas error   : Entry function 'k' uses too much shared data (0x12000 bytes, 0xc000 max)"],
    # a CUDA error by its enum name; a CUDA driver call that failed, by name
    ["cudaErrorIllegalAddress: an illegal memory access was encountered"],
    ["cuMemMap failed with result 2"],
    # a level in brackets after a tag, or after a shipper's time
    ["[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: std::bad_alloc"],
    ["2024-05-01 10:00:00.123 [Error] (Worker) engine stopped"],
    ["[vllm_plugin] CRITICAL: backend library could not be loaded"],
    # an exception class named by its dotted module path mid-line, whatever its suffix
    ["job 12 stopped: mylib.runtime.errors.OutOfDeviceQueues: queue 3 full"],
    # the CUDA runtime's own error texts, whoever printed them; a library that could not initialise
    ["worker 2: an illegal memory access was encountered"],
    ["launch of kernel rmsnorm_fwd: unspecified launch failure"],
    ["Failed to initialize CUPTI: insufficient privileges"],
    # (NVML's "library not found" is the driver's: test_a_causes_general_words_name_it_in_new_wording)
    ["[agent] Unable to initialise DCGM: library not found"],
])
def test_tenth_round_a_failure_without_a_traceback_is_no_healthy_log(lines):
    assert diagnose("\n".join(lines)).cls == "unknown"


@pytest.mark.parametrize("lines, cls", [
    # torch's error record before it carried a date: the watchdog's timeout is a failure, named as a symptom
    (["[rank3]:[E ProcessGroupNCCL.cpp:1182] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL("
      "SeqNum=9, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800512 milliseconds before timing out."],
     "nccl_failure"),
    # a CUDA error that is out of memory, in any caller's words
    (["CUDA error 2 at /build/ggml/src/ggml-cuda/ggml-cuda.cu:88: out of memory"], "cuda_oom"),
    (["[TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/allocator.h:231"], "cuda_oom"),
    (['Error: Warmup(Generation("Not enough memory to handle 512 tokens. You need to decrease '
      '`--max-batch-total-tokens`"))'], "cuda_oom"),
    # NCCLCHECK's report in a caller's words: the result string names the failure
    (["RuntimeError: [NCCL error /opt/trtllm/cpp/plugins/allgatherPlugin.cpp:88 'remote process exited or there "
      "was a network error']"], "nccl_failure"),
    (["node7:44:45 [1] NCCL WARN Net : Connect to 10.1.1.2<1234> failed : Connection refused"], "nccl_failure"),
    # the Hub's refusal raised from huggingface_hub's status check, its message cut after the status
    (["Traceback (most recent call last):",
      '  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/_snapshot_download.py", line 164, in download',
      "    repo_info = api.repo_info(repo_id=repo_id)",
      '  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/utils/_http.py", line 477, in hf_raise_for_status',
      "    raise _format(HfHubHTTPError, str(e), response) from e",
      "requests.exceptions.HTTPError: 403 Client Error"], "hf_gated_repo"),
    # a server's registry without the config's model type
    (["ValueError: Unsupported model_type 'phi4mm' for this engine"], "unsupported_architecture"),
    # a program's own logging record keeps its level: at ERROR it decides, at WARNING it does not
    (["2025-01-01 10:00:00,001 - lmdeploy - ERROR - archs.py:55 - Model architectures ['FooForCausalLM'] are not "
      "supported for now"], "unsupported_architecture"),
    (["2025-01-01 10:00:00,001 - lmdeploy - WARNING - archs.py:55 - Model architectures ['FooForCausalLM'] are not "
      "supported by turbomind; trying the pytorch engine",
      "2025-01-01 10:00:05,000 - lmdeploy - INFO - engine.py:88 - building the engine"], "healthy"),
    # traps: a 401 from another service's client, a 5xx from the Hub; words about signals, NCCL errors, NVLS
    (["Traceback (most recent call last):",
      '  File "/app/venv/lib/python3.11/site-packages/openai/_base_client.py", line 1037, in request',
      "    response.raise_for_status()",
      "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://api.example.com/v1/models"],
     "unknown"),
    (["Traceback (most recent call last):",
      '  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/file_download.py", line 1296, in get_metadata',
      "requests.exceptions.HTTPError: 504 Server Error: Gateway Time-out"], "unknown"),
    ([_READY, "INFO:     request cancelled by the signal handler"], "healthy"),
    (["INFO 01-01 00:00:01 [platform.py:1] Failed to initialize NVML: falling back to the CUDA runtime's count",
      _READY], "healthy"),
    (["Tip: run with NCCL_DEBUG=WARN to see NCCL errors", _READY], "healthy"),
    (["node3:11:22 [2] NCCL INFO NVLS multicast support is not available on dev 0",
      "node3:11:22 [2] NCCL WARN NVLS not enabled on this device"], "healthy"),
    (["WARNING 01-01 00:00:01 [chat_utils.py:1] Unsupported model type foo for the chat template; using the default",
      _READY], "healthy"),
    (["[W socket.cpp:663] [c10d] The client socket has failed to connect to [node1]:29500 (errno: 99 - Cannot "
      "assign requested address)."], "healthy"),
])
def test_tenth_round_rules_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # the tier's classes added in the tenth round, in other words than the fixtures' (no signature matches)
    (["RuntimeError: listen() on port 30000 returned errno 98"], "port_in_use"),
    (["RuntimeError: out of file descriptors (errno 24) while spawning workers"], "too_many_open_files"),
    (["OSError: the hub answered 401 Client Error for meta-llama/Llama-3.1-8B; authenticate first"], "hf_gated_repo"),
    (["ValueError: the repository ships custom code; pass the flag to run it"], "trust_remote_code"),
    (["RuntimeError: the /dev/shm segment for worker 3 could not grow past 64 MiB"], "shm_too_small"),
    (["RuntimeError: NVML reports the kernel driver is too old for this runtime"], "driver_mismatch"),
])
def test_tenth_round_key_tokens_name_the_new_classes(lines, cls):
    d = diagnose("\n".join(lines))
    assert (d.cls, d.remedy, d.confidence) == (cls, None, 0.45), d.cause


@pytest.mark.parametrize("lines, cls", [
    # one token alone names nothing; a full disk is not a small /dev/shm; shared memory per block is Triton's
    (["RuntimeError: port 8000 is reserved for the router"], "unknown"),
    (["RuntimeError: the driver returned an unexpected status 3"], "unknown"),
    (["OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--x'"], "unknown"),
    (["triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 99000, Hardware limit: 65536"],
     "triton_out_of_shared_memory"),
])
def test_tenth_round_key_tokens_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


# --------------------------------------------------------------------------------------------
# the eleventh round: the rules from its tuning logs, each case in other words than the fixtures'
# (each `unknown`, `healthy` or another class before the round)

_RUNNER = "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py"


@pytest.mark.parametrize("lines, cls", [
    # the CUDA runtime's words and enum names for a driver it cannot use, whoever printed them
    (["RuntimeError: CUDA init failed: Error 803: system has unsupported display driver / cuda driver combination"],
     "driver_mismatch"),
    (["F0101 10:00:00.000 77 common.cpp:12] Check failed: status == cudaSuccess (803 vs. 0)  system has unsupported "
      "display driver / cuda driver combination"], "driver_mismatch"),
    (["cudaSetDevice(0) returned cudaErrorSystemDriverMismatch"], "driver_mismatch"),
    (["[engine] device probe: cudaErrorInsufficientDriver (35)"], "driver_mismatch"),
    # the engine's check that the GPU has the memory asked for at startup: another process holds the rest
    (["ValueError: Free memory on device cuda:1 (10.12/79.25 GiB) on startup is less than desired GPU memory "
      "utilization (0.9, 71.33 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."],
     "cuda_oom"),
    # a traceback cut before its exception, stopped in the graph runner or in torch's capture
    (["[2025-01-01 00:00:01 TP0] Capture cuda graph begin. This can take up to several minutes.",
      "Traceback (most recent call last):",
      f'  File "{_RUNNER}", line 301, in __init__',
      "    self.capture()"], "cuda_graph_capture"),
    (["Traceback (most recent call last):",
      '  File "/opt/app/sglang/srt/model_executor/model_runner.py", line 88, in init_cuda_graphs',
      "    self.cuda_graph_runner = CudaGraphRunner(self)",
      '  File "/opt/app/sglang/srt/model_executor/cuda_graph_runner.py", line 186, in __init__',
      "    self.capture()"], "cuda_graph_capture"),
    # a shard the loader names, quoted without a space after the colon
    (["FileNotFoundError: No such file or directory:'/data/qwen/model-00002-of-00004.safetensors'"],
     "checkpoint_incomplete"),
    # a CHECK macro that failed on another cause is a failure no class knows, not a healthy log
    (["F0101 10:00:00.000 77 net.cpp:40] Check failed: top_shape[0] > 0 (0 vs. 0) empty batch"], "unknown"),
    # traps: a cut traceback whose innermost frame is model code the runner called is not the capture's;
    # a complete one raised below the runner is its own exception's class; a health check's note is no CHECK
    (["Traceback (most recent call last):",
      f'  File "{_RUNNER}", line 301, in __init__',
      "    self.capture()",
      '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/models/llama.py", line 310, in forward',
      "    hidden_states = self.model(input_ids, positions, forward_batch)"], "unknown"),
    (["Traceback (most recent call last):",
      f'  File "{_RUNNER}", line 301, in __init__',
      "    self.capture()",
      '  File "/usr/local/lib/python3.10/dist-packages/sgl_kernel/elementwise.py", line 40, in rmsnorm',
      "    torch.ops.sgl_kernel.rmsnorm.default(out, input, weight, eps, enable_pdl)",
      "RuntimeError: CUDA error: no kernel image is available for execution on the device"], "unsupported_gpu_arch"),
    (["router: health check failed: backend not ready yet, retrying in 5 s", _READY], "healthy"),
    (["INFO 01-01 00:00:01 [gpu_worker.py:1] Free memory on device cuda:0 (70.1/79.3 GiB) on startup; desired GPU "
      "memory utilization is 0.8", _READY], "healthy"),
])
def test_eleventh_round_rules_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # the tier's words added in the eleventh round, in other words than the fixtures' (no signature matches)
    (["RuntimeError: ncclGroupEnd returned: unhandled cuda error on rank 3"], "nccl_failure"),
    (["RuntimeError: probe failed: the driver is insufficient for runtime 12.8"], "driver_mismatch"),
    (["RuntimeError: replaying the cuda graph for bs=8 failed after capture"], "cuda_graph_capture"),
])
def test_eleventh_round_key_tokens_name_their_class(lines, cls):
    d = diagnose("\n".join(lines))
    assert (d.cls, d.remedy, d.confidence) == (cls, None, 0.45), d.cause


@pytest.mark.parametrize("lines, cls", [
    # one word of a cause names nothing: a graph alone, a capture alone, an insufficient quota, an internal error
    (["RuntimeError: graph break in forward: unsupported op"], "unknown"),
    (["RuntimeError: capture of the profile trace failed"], "unknown"),
    (["RuntimeError: insufficient quota for the requested replicas"], "unknown"),
    (["RuntimeError: internal error in the scheduler queue"], "unknown"),
])
def test_eleventh_round_key_tokens_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # compiler and Triton causes the tier learned in the eleventh round, in words no signature matches
    (["src/ext.c:3:10: fatal error: 'Python.h' file not found"], "missing_python_headers"),
    (["kernels/attn.cu:9:10: fatal error: 'cuda_bf16.h' file not found"], "missing_cuda_headers"),
    (["RuntimeError: autotune config 3 skipped: out of resources, hardware limit 101376 bytes"],
     "triton_out_of_shared_memory"),
])
def test_eleventh_round_key_tokens_name_the_compiler_classes(lines, cls):
    d = diagnose("\n".join(lines))
    assert (d.cls, d.remedy, d.confidence) == (cls, None, 0.45), d.cause


@pytest.mark.parametrize("lines, cls", [
    # a process killed by a signal, in the shell's, Python's and absl's words: a failure, also after ready
    (["./run_server.sh: line 4:  812 Illegal instruction     python -m server --port 8000"], "unknown"),
    ([_READY, "Illegal instruction"], "unknown"),
    (["*** SIGILL received at time=1700000000 on cpu 3 ***"], "unknown"),
    # SIGBUS names a small /dev/shm as a symptom, when nothing decisive is in the log
    (["(Worker pid=12) Fatal Python error: Bus error"], "shm_too_small"),
    (["launch.sh: line 9:  4242 Bus error               (core dumped) python serve.py"], "shm_too_small"),
    # traps: a PCIe AER report in a journal dump, a capability probe's note
    (["kernel: pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical Layer", _READY], "healthy"),
    (["INFO 01-01 00:00:01 [cpu.py:1] checking for illegal instruction traps: none", _READY], "healthy"),
])
def test_eleventh_round_signals_are_failures(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # a CUDA kernel's device-side assertion (its condition in backticks), torch's own segfault handler,
    # the driver losing the GPU: failures, the last two also after the ready line
    (["/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [0,0,0], thread: [3,0,0] "
      "Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed."], "unknown"),
    ([_READY, "!!!!!!! Segfault encountered !!!!!!!"], "unknown"),
    ([_READY, "kernel: NVRM: GPU 0000:41:00.0: GPU has fallen off the bus."], "unknown"),
    # traps: a bus that is fine, an assertion that held
    (["INFO 01-01 00:00:01 [topology.py:1] no GPU has fallen behind the bus scan", _READY], "healthy"),
    (["INFO 01-01 00:00:01 [checks.py:1] Assertion `x > 0` passed", _READY], "healthy"),
])
def test_eleventh_round_device_asserts_and_lost_gpus_are_failures(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls



def test_the_ignorable_mlir_diagnostic_does_not_hide_an_error_on_its_line():
    # the benign form is anchored at both ends: an exception glued after it (or before it) is still a failure
    diag = 'loc("/x/decode_attention.py":310:16): error: operation scheduled before its operands'
    assert diagnose(diag + " RuntimeError: CUDA error: an illegal memory access was encountered").cls == "unknown"
    assert diagnose("ValueError: bad shape " + diag).cls == "unknown"


@pytest.mark.parametrize("lines, cls, remedy", [
    # a method's minimum compute capability above the GPU's: the arch class, without the backend remedy
    (["ValueError: The quantization method gptq_marlin is not supported for the current GPU. Minimum capability: "
      "80. Current capability: 75."], "unsupported_gpu_arch", None),
    # torch finding no driver at all
    (["RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU"],
     "driver_mismatch", None),
])
def test_eleventh_round_capability_and_missing_driver(lines, cls, remedy):
    d = diagnose("\n".join(lines))
    assert (d.cls, d.remedy) == (cls, remedy), d.cause


@pytest.mark.parametrize("lines, cls", [
    # the tier's tokenizer and toolkit words of the eleventh round, in words no signature matches
    (["OSError: could not load the tokenizer at /models/x: bad file"], "tokenizer_error"),
    # (a tokenizers wrapper enum, "... untagged enum DecoderWrapper", is a signature since the twenty-seventh
    # round; the tier's "untagged enum" word still names an enum that is not one of them)
    (["RuntimeError: tokenizer.json: data did not match any variant of untagged enum AddedVocabulary at line 9"],
     "tokenizer_error"),
    (["ImportError: this model needs the sentencepiece package; pip install it"], "tokenizer_error"),
    (["OSError: libcufft.so.11: version libcufft.so.11 not defined in file libcufft.so.11 with link time reference"],
     "toolkit_misconfigured"),
])
def test_eleventh_round_key_tokens_name_tokenizer_and_toolkit(lines, cls):
    d = diagnose("\n".join(lines))
    assert (d.cls, d.remedy, d.confidence) == (cls, None, 0.45), d.cause


@pytest.mark.parametrize("lines, cls", [
    # a loader's words alone name nothing: another library, another thing that could not be loaded;
    # an arch error that says "Failed to load" keeps its class
    (["OSError: libfoo.so.1: cannot open shared object file: No such file or directory"], "unknown"),
    (["RuntimeError: could not load the plugin registry"], "unknown"),
    (["RuntimeError: Failed to load in-memory CUBIN: no kernel image is available for execution on the device"],
     "unsupported_gpu_arch"),
])
def test_eleventh_round_loader_words_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


# --------------------------------------------------------------------------------------------
# the twelfth round: the rules from its tuning logs, each case in other words than the fixtures'
# (each `unknown`, `healthy` or another class before the round)

_PYNCCL = "/opt/venv/lib/python3.12/site-packages/sglang/srt/distributed/device_communicators/pynccl_wrapper.py"
_TRITON_COMPILER = "/opt/venv/lib/python3.11/site-packages/triton/compiler/compiler.py"
_DS_BUILDER = "/tmp/pip-install-x1/deepspeed_0a/op_builder/builder.py"


@pytest.mark.parametrize("lines, cls", [
    # from_pretrained finding no weights file of any format it knows, whatever formats it lists
    (["OSError: Error no file named model.safetensors found in directory /models/qwen2-7b."], "checkpoint_incomplete"),
    (['{"detail": "Error no file named pytorch_model.bin, tf_model.h5 or flax_model.msgpack found in directory '
      '/srv/m/bert."}'], "checkpoint_incomplete"),
    # the CUDA runtime's enum names for an operation a capture does not allow
    (["RuntimeError: CUDA error: cudaErrorStreamCaptureInvalidated while replaying bs=16"], "cuda_graph_capture"),
    # tracebacks cut inside the module that raises for one cause: NCCL's ctypes binding, Triton's kernel
    # loader, DeepSpeed's op builder check
    (["Traceback (most recent call last):",
      f'  File "{_PYNCCL}", line 301, in ncclAllReduce',
      '    self.NCCL_CHECK(self._funcs["ncclAllReduce"](sendbuff, recvbuff, count,'], "nccl_failure"),
    (["Traceback (most recent call last):",
      f'  File "{_TRITON_COMPILER}", line 402, in _init_handles',
      "    raise OutOfResources(self.metadata.shared, max_shared, \"shared memory\")"], "triton_out_of_shared_memory"),
    (["Traceback (most recent call last):",
      f'  File "{_DS_BUILDER}", line 99, in assert_no_cuda_mismatch',
      "    raise CUDAMismatchException("], "toolkit_misconfigured"),
    # traps: another exception raised in Triton's loader names its own cause, one of another type in NCCL's
    # binding is no NCCL failure (its type is not the binding's); a benign
    # warning that names the flag silencing it is healthy, the same words on a real error are not hidden
    (["Traceback (most recent call last):",
      f'  File "{_TRITON_COMPILER}", line 420, in _init_handles',
      "    self.module, self.function, self.n_regs = driver.active.utils.load_binary(",
      "RuntimeError: Triton Error [CUDA]: device kernel image is invalid"], "unsupported_gpu_arch"),
    (["Traceback (most recent call last):",
      f'  File "{_PYNCCL}", line 60, in __init__',
      "    raise ValueError(f'unexpected world size {world_size}')",
      "KeyError: 'world_size'"], "unknown"),
    (["[2026-01-01 00:00:01 TP3] Setup Custom allreduce failed with CUDART error: peer access is not supported "
      "between these two devices. To silence this warning, set --disable-custom-all-reduce.",
      "[2026-01-01 00:00:02 TP3] Load weight begin."], "healthy"),
    (["RuntimeError: peer access is not supported. To silence this warning, specify --flag explicitly. "
      "NCCL error: unhandled cuda error"], "nccl_failure"),
    # diffusers falling back from safetensors is a note; the same missing file as an exception is not
    (["An error occurred while trying to fetch /m/unet: Error no file named diffusion_pytorch_model.safetensors "
      "found in directory /m/unet.", "Defaulting to unsafe serialization. Pass `allow_pickle=False` to raise an "
      "error instead."], "healthy"),
])
def test_twelfth_round_rules_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


_KV_UTILS = "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py"


@pytest.mark.parametrize("lines, cls", [
    # a vLLM traceback cut inside its KV cache sizing stopped at the capacity check
    (["(EngineCore_DP0 pid=7) ERROR 01-01 00:00:01 [core.py:700] Traceback (most recent call last):",
      f'(EngineCore_DP0 pid=7) ERROR 01-01 00:00:01 [core.py:700]   File "{_KV_UTILS}", line 612, in check_enough_kv_cache_memory',
      '(EngineCore_DP0 pid=7) ERROR 01-01 00:00:01 [core.py:700]     raise ValueError('], "kv_cache_insufficient"),
    # trap: a complete traceback raised there for a cache layout, not for memory, is not that class
    (["Traceback (most recent call last):",
      f'  File "{_KV_UTILS}", line 880, in unify_hybrid_kv_cache_specs',
      "    raise ValueError(",
      "ValueError: Cannot unify the specs of layers 0 and 12 into one type."],
     "unknown"),
])
def test_twelfth_round_kv_cache_module_keeps_to_its_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


def test_fastchat_relay_is_peeled_and_its_worker_named_without_the_comma():
    # FastChat's relay, "<time> | LEVEL | logger | ", is peeled: the traceback under it is read, and a
    # worker named before its pid keeps its name as the rank, without the comma
    d = diagnose("\n".join([
        "(worker-a, pid=7) 2023-08-15 00:59:12 | ERROR | stderr | Traceback (most recent call last):",
        '(worker-a, pid=7) 2023-08-15 00:59:12 | ERROR | stderr |   File "/x/serve.py", line 3, in <module>',
        "(worker-a, pid=7) 2023-08-15 00:59:12 | ERROR | stderr |     main()",
        "(worker-a, pid=7) 2023-08-15 00:59:12 | ERROR | stderr | OSError: [Errno 98] Address already in use"]))
    assert d.cls == "port_in_use" and d.evidence[0].rank == "worker-a"
    # its own INFO records are no failure
    assert diagnose("2023-08-15 00:59:12 | INFO | model_worker | Loading the model vicuna-7b on worker 1a2b ...\n"
                    "2023-08-15 00:59:20 | INFO | model_worker | Register to controller").cls == "healthy"


@pytest.mark.parametrize("lines, cls", [
    # a driver too old for the runtime fails the launch even in a record its program logged as a warning
    (["W0101 00:00:01.000001 42 pinned_memory_manager.cc:236] Unable to allocate pinned system memory: "
      "CUDA driver version is insufficient for CUDA runtime version",
      "I0101 00:00:01.000002 42 model_lifecycle.cc:459] loading: model:1"], "driver_mismatch"),
    # traps: the same class's words in an INFO record stay a symptom; other classes' warnings stay quiet
    (["INFO 01-01 00:00:01 [cuda.py:10] Checked: CUDA driver version is insufficient for CUDA 13 wheels, "
      "using the CUDA 12 build", "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
    (["W0101 00:00:01.000001 42 nccl.cc:1] NCCL error: unhandled system error, falling back to gloo",
      "I0101 00:00:02.000001 42 server.cc:1] loading: model:1"], "healthy"),
    # trap: NVML's words in a warning are not among the fatal ones (a tool can warn and still use the GPU)
    (["WARNING 01-01 00:00:01 [utils.py:1] Failed to initialize NVML: Unknown Error",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
    (["2026-01-01 00:00:01,000 - WARNING - torch.cuda: The NVIDIA driver on your system is too old (found "
      "version 11040)", "2026-01-01 00:00:02,000 - INFO - app: loading"], "driver_mismatch"),
])
def test_thirteenth_round_driver_mismatch_in_a_warning_fails(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


_SOCKETSERVER = "/usr/lib/python3.11/socketserver.py"


@pytest.mark.parametrize("lines, cls", [
    # a traceback cut inside socketserver's constructor stopped binding its address
    (["Traceback (most recent call last):",
      '  File "/srv/app/serve.py", line 40, in main',
      "    httpd = HTTPServer(('', 8000), Handler)",
      f'  File "{_SOCKETSERVER}", line 456, in __init__',
      "    self.server_bind()"], "port_in_use"),
    # trap: a complete traceback raised there for an address the host does not have is not a taken port
    (["Traceback (most recent call last):",
      f'  File "{_SOCKETSERVER}", line 473, in server_bind',
      "    self.socket.bind(self.server_address)",
      "OSError: [Errno 99] Cannot assign requested address"], "unknown"),
])
def test_thirteenth_round_socketserver_module_keeps_to_its_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # a target model class without EAGLE-3's hooks, in a scheduler's traceback
    (["Traceback (most recent call last):",
      '  File "/opt/sglang/srt/model_executor/model_runner.py", line 512, in init_eagle3',
      "    self.model.set_eagle3_layers_to_capture(layer_ids)",
      "AttributeError: 'MistralForCausalLM' object has no attribute 'set_eagle3_layers_to_capture'"],
     "speculative_config"),
    # an EAGLE-1 style draft config read by EAGLE-3 code, its type on the line before
    (["Exception has occurred: AttributeError", "'Qwen3Config' object has no attribute 'draft_vocab_size'"],
     "speculative_config"),
    # a draft model's own class (a Medusa / MTP head) lacking an attribute the engine reads
    (["AttributeError: 'MedusaHeadModel' object has no attribute 'embed_tokens'"], "speculative_config"),
    (["AttributeError: 'Glm4MoeMTPModel' object has no attribute 'lm_head'"], "speculative_config"),
    # traps: an ordinary model class lacking an ordinary attribute names no cause; a mail handler is no MTP head;
    # the words in a warning record are no failure
    (["AttributeError: 'Qwen2ForCausalLM' object has no attribute 'lm_head_weight'"], "unknown"),
    (["AttributeError: 'SMTPHandler' object has no attribute 'mailport'"], "unknown"),
    (["WARNING 01-01 00:00:01 [loader.py:1] Ignored: 'LlamaConfig' object has no attribute 'draft_vocab_size'",
      "INFO 01-01 00:00:02 [loader.py:2] Loading weights took 3.1 seconds"], "healthy"),
])
def test_fourteenth_round_speculative_attributes_keep_to_their_cause(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # IPython's / Jupyter's traceback header names the exception before the traceback's title: a failure
    (["---------------------------------------------------------------------------",
      "ValueError                                Traceback (most recent call last)",
      "Cell In[7], line 3",
      "      1 from vllm import LLM",
      "----> 3 llm = LLM(model=path)"], "unknown"),
    (["KeyboardInterrupt                         Traceback (most recent call last)"], "unknown"),
    # traps: the title in a sentence, or in a record its logger marked WARNING, is no failure
    (["INFO 01-01 00:00:01 [x.py:1] loading",
      "the notebook shows where a Traceback (most recent call last) starts"], "healthy"),
    (["WARNING 01-01 00:00:01 [x.py:1] RuntimeError    Traceback (most recent call last)",
      "INFO 01-01 00:00:02 [x.py:2] Loading weights took 3.1 seconds"], "healthy"),
])
def test_fourteenth_round_a_jupyter_traceback_header_is_a_failure(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # huggingface_hub's size check on a downloaded file: a weight shard or a tokenizer file cut short
    (["Traceback (most recent call last):",
      '  File "/opt/app/train.py", line 12, in <module>',
      "    model = AutoModelForCausalLM.from_pretrained(repo)",
      '  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/file_download.py", line 571, in http_get',
      "    raise EnvironmentError(",
      "OSError: Consistency check failed: file should be of size 9948693272 but has size 512 "
      "(model-00001-of-00004.safetensors)."], "checkpoint_corrupt"),
    (["[2025-01-01 00:00:01 TP0] Consistency check failed: file should be of size 17078 but has size 16000 "
      "(tokenizer.json)."], "checkpoint_corrupt"),
    # traps: another consistency check names no download; the words in a warning a retry follows are no failure
    (["ERROR 01-01 00:00:01 [store.py:3] Consistency check failed: replica count is 2 but expected 3"], "unknown"),
    (["WARNING 01-01 00:00:01 [hub.py:1] Consistency check failed: file should be of size 100 but has size 99, "
      "retrying", "INFO 01-01 00:00:05 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
])
def test_fifteenth_round_a_download_of_another_size_is_a_corrupt_checkpoint(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # NCCL's own result codes name a failed call, as the name before a message or inside one
    (["torch.distributed.DistBackendError: communicator was aborted on rank 1.",
      "ncclInternalError: Internal check failed."], "nccl_failure"),
    (["(Worker_TP1 pid=9) ERROR 01-01 00:00:01 [comm.py:1] ncclInvalidUsage: This usually reflects a misuse of "
      "the library."], "nccl_failure"),
    (["[rank3] ncclRemoteError: peer 2 went away while connecting"], "nccl_failure"),
    # traps: NCCL's INFO lines and codes that are no failure (ncclInProgress, a counter's name) stay healthy, and
    # so does a code in a warning a retry follows
    (["node1:42:42 [0] NCCL INFO ncclCommInitRank comm 0x5 rank 0 nranks 2 - Init COMPLETE",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
    (["INFO 01-01 00:00:01 [metrics.py:1] ncclInProgress polls=3 nccl_system_error_count=0",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
    (["WARNING 01-01 00:00:01 [comm.py:1] ncclRemoteError seen on a probe, retrying the connection",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
])
def test_fifteenth_round_nccl_result_codes_are_nccl_failures(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


# --------------------------------------------------------------------------------------------
# the sixteenth round: a server that rejected its own command line (invalid_server_args)

_SGLANG_READY = ["[2025-01-01 00:00:05] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
                 "[2025-01-01 00:00:09] The server is fired up and ready to roll!"]
_SERVER_ARGS_TB = ["Traceback (most recent call last):",
                   '  File "/opt/venv/lib/python3.12/site-packages/sglang/launch_server.py", line 11, in <module>',
                   "    server_args = prepare_server_args(sys.argv[1:])",
                   '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 4495, in '
                   "prepare_server_args",
                   "    return ServerArgs.from_cli_args(raw_args)",
                   '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 812, in __post_init__',
                   "    self._handle_parallelism()"]


@pytest.mark.parametrize("lines", [
    # argparse's error line, whatever the program is called
    ["usage: launch_server.py [-h] --model-path MODEL_PATH [--port PORT] [--tp-size TP_SIZE]",
     "launch_server.py: error: unrecognized arguments: --enable-dp-lm-head --moe-dense-tp 1"],
    ["__main__.py: error: argument --attention-backend: invalid choice: 'fa5' (choose from 'flashinfer', 'triton')"],
    ["Dec 04 03:10:01 b300 python3[4242]: launch_server.py: error: argument --tp-size: expected one argument"],
    ["vllm serve: error: argument --max-num-seqs: invalid int value: '8k'"],
    ["api_server.py: error: argument --gpu-memory-utilization: invalid float value: 'high'"],
    ["sglang-router: error: the following arguments are required: --worker-urls"],
    ["launch_server.py: error: ambiguous option: --cuda-graph-max could match --cuda-graph-max-bs, "
     "--cuda-graph-max-bs-prefill"],
    # clap (TGI's launcher) and llama.cpp's parser, under a journal prefix
    ["Dec 04 03:10:01 b300 text-generation-launcher[812]: error: unexpected argument '--max-batch-size-tokens' found",
     "Dec 04 03:10:01 b300 text-generation-launcher[812]: For more information, try '--help'."],
    ["error: invalid value 'fp4' for '--quantize <QUANTIZE>'", "  [possible values: awq, eetq, gptq, bitsandbytes]"],
    ["Dec 04 03:10:01 b300 llama-server[77]: error: invalid argument: --flash-attn-mode"],
    # argparse's exception where the parser does not exit, in a traceback and pasted alone
    ["Traceback (most recent call last):",
     '  File "/srv/app/serve.py", line 40, in main',
     "    args = parser.parse_args(argv)",
     '  File "/usr/lib/python3.12/argparse.py", line 2501, in _get_value',
     "    raise ArgumentError(action, msg % args)",
     "argparse.ArgumentError: argument --port: invalid int value: 'auto'"],
    ["argparse.ArgumentTypeError: argument --lora-modules: expected name=path, got 'adapter'"],
    # vLLM's own refusals of an argument
    ["ValueError: With `vllm serve`, you should provide the model as a positional argument or in a config file "
     "instead of via the `--model` option."],
    ["(APIServer pid=3) ValueError: User-specified max_model_len (262144) is greater than the derived "
     "max_model_len (max_position_embeddings=131072 in model's config.json)."],
    # a check of the arguments raised in SGLang's server_args.py, by the innermost frame, whatever its words
    [*_SERVER_ARGS_TB,
     '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 1290, in _handle_parallelism',
     "    raise ValueError(f\"dp_size {self.dp_size} must divide tp_size {self.tp_size}\")",
     "ValueError: dp_size 3 must divide tp_size 8"],
    [*_SERVER_ARGS_TB,
     '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 1301, in _handle_parallelism',
     "    assert self.chunked_prefill_size % self.page_size == 0",
     "AssertionError"],
])
def test_sixteenth_round_a_rejected_command_line_is_invalid_server_args(lines):
    d = diagnose("\n".join(lines))
    assert d.cls == "invalid_server_args", d.cause
    assert d.remedy is None  # the deploy cannot guess the flag that was meant
    assert "--help" in d.fix and "extra_flags" in d.fix


def test_sixteenth_round_the_cause_quotes_the_rejected_argument():
    d = diagnose("launch_server.py: error: unrecognized arguments: --enable-dp-lm-head\n")
    assert "--enable-dp-lm-head" in d.cause and d.evidence[0].line.endswith("--enable-dp-lm-head")


@pytest.mark.parametrize("lines, cls", [
    # a more specific class raised from the same argument check wins by priority
    ([*_SERVER_ARGS_TB,
      '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 2210, in _handle_speculative',
      "    raise ValueError(",
      "ValueError: speculative_eagle_topk must be 1 when page_size > 1"], "speculative_config"),
    ([*_SERVER_ARGS_TB,
      '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 950, in _handle_port',
      "    raise ValueError(",
      "ValueError: --port 30000 cannot be used: [Errno 98] Address already in use"], "port_in_use"),
    ([*_SERVER_ARGS_TB,
      '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 990, in _handle_model',
      "    raise ValueError(",
      "ValueError: Model architectures ['FooForCausalLM'] are not supported for now."], "unsupported_architecture"),
    # an earlier cause stays the root: the server that failed first on a port is port_in_use
    (["OSError: [Errno 98] Address already in use",
      "launch_server.py: error: unrecognized arguments: --foo"], "port_in_use"),
])
def test_sixteenth_round_more_specific_classes_keep_winning(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # a server's --help output (choices that name "error", "invalid", "required"), then a healthy start
    (["usage: launch_server.py [-h] --model-path MODEL_PATH [--log-level {debug,info,warning,error}]",
      "options:",
      "  -h, --help            show this help message and exit",
      "  --model-path MODEL_PATH",
      "                        The path of the model weights. This argument is required.",
      "  --load-format {auto,pt,safetensors,dummy}",
      "                        The format of the model weights; an invalid choice is refused.",
      *_SGLANG_READY], "healthy"),
    (["usage: vllm serve [-h] [--uvicorn-log-level {critical,debug,error,info,trace,warning}] [model_tag]",
      "INFO 01-01 00:00:01 [api_server.py:1] vLLM API server version 0.9.0",
      "INFO 01-01 00:00:09 [launcher.py:1] Available routes are:"], "healthy"),
    # a deprecated flag accepted with a warning, then a healthy start (ready or still starting)
    (["[2025-01-01 00:00:01] WARNING server_args.py:1: --enable-flashinfer-mla is deprecated, use "
      "--attention-backend flashinfer", *_SGLANG_READY], "healthy"),
    (["WARNING 01-01 00:00:01 [arg_utils.py:60] --tp is deprecated, use --tensor-parallel-size instead.",
      "INFO 01-01 00:00:02 [api_server.py:1] vLLM API server version 0.9.0",
      "INFO 01-01 00:00:40 [loader.py:1] Loading weights took 30.1 seconds"], "healthy"),
    # pip's or a shell tool's argparse error relayed in an INFO record, or printed before the server started,
    # by a server that then becomes ready: errors before the ready line did not stop it
    (["[2025-01-01 00:00:01] INFO setup.py:1: pip: error: unrecognized arguments: --break-system-packages",
      *_SGLANG_READY], "healthy"),
    (["gpu_check.py: error: unrecognized arguments: --json",
      "[2025-01-01 00:00:02] server_args=ServerArgs(model_path='/models/x', port=30000)",
      *_SGLANG_READY], "healthy"),
    (["INFO 01-01 00:00:01 [setup.py:1] helper: error: argument --mode: invalid choice: 'x'",
      "INFO 01-01 00:00:40 [loader.py:1] Loading weights took 30.1 seconds"], "healthy"),
    # traps: ctypes' ArgumentError, CUDA's "invalid argument" and a traceback cut inside server_args.py (it also
    # probes the GPU and loads CUDA libraries there) name no rejected command line
    (["ctypes.ArgumentError: argument 1: TypeError: wrong type"], "unknown"),
    (["RuntimeError: CUDA error: invalid argument"], "unknown"),
    (_SERVER_ARGS_TB, "unknown"),
])
def test_sixteenth_round_traps_are_not_a_rejected_command_line(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


def test_sixteenth_round_an_unrelated_tools_error_before_a_server_still_starting_is_not_told_apart():
    """A known limit: before the ready line, an argparse error printed by another program (a helper script run
    before the server) reads as the server's own; the log does not say which program printed it. Once the
    server is ready, errors before the ready line do not count (the trap above)."""
    d = diagnose("gpu_check.py: error: unrecognized arguments: --json\n"
                 "[2025-01-01 00:00:02] server_args=ServerArgs(model_path='/models/x', port=30000)\n"
                 "[2025-01-01 00:00:03] Load weight begin. avail mem=70.00 GB\n")
    assert d.cls == "invalid_server_args"


def test_sixteenth_round_an_exception_signatures_cut_flag_is_a_boolean(tmp_path):
    body = ('version = 1\n[[class]]\nid = "a"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["xyz"]\n'
            "exceptions = [{ type = 'ValueError', raised_in = '/server_args\\.py$', cut = %s }]\n")
    bad = tmp_path / "catalog.toml"
    bad.write_text(body % '"no"')
    with pytest.raises(CatalogError, match="cut must be true or false"):
        load_catalog(bad)
    bad.write_text(body % "false")
    sig = load_catalog(bad).get("a").exceptions[0]
    assert sig.cut is False


# --------------------------------------------------------------------------------------------
# the seventeenth round: a traceback cut inside the CUDA graph capture's own calls, SGLang's piecewise CUDA graphs,
# a launcher that found no tokenizer, a binary built for another compute capability

def _vllm_worker(*lines: str) -> list[str]:
    return [f"(Worker_TP0 pid=77) ERROR 01-01 00:00:09 [multiproc_executor.py:600] {ln}" for ln in lines]


_V1_CAPTURE_FRAMES = _vllm_worker(
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 310, in compile_or_warm_up_model',
    "    self.model_runner.capture_model()",
    '  File "/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 3001, in capture_model',
    "    self._capture_cudagraphs(compilation_cases, cudagraph_runtime_mode=mode)",
    '  File "/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 3090, in _capture_cudagraphs',
    "    self._dummy_run(num_tokens, cudagraph_runtime_mode=mode)",
    '  File "/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2650, in _dummy_run',
    "    outputs = self.model(input_ids=input_ids, positions=positions)",
    '  File "/venv/lib/python3.12/site-packages/vllm/model_executor/models/mixtral.py", line 400, in forward',
    "    hidden_states = self.model(input_ids, positions)")


@pytest.mark.parametrize("lines", [
    # vLLM V1: cut below capture_model / _capture_cudagraphs, in a model's forward every pass shares
    _V1_CAPTURE_FRAMES,
    # vLLM V0's model runner, its capture_model cut inside a layer
    ["Traceback (most recent call last):",
     '  File "/usr/lib/python3/dist-packages/vllm/worker/worker.py", line 280, in _warm_up_model',
     "    self.model_runner.capture_model(self.gpu_cache)",
     '  File "/usr/lib/python3/dist-packages/vllm/worker/model_runner.py", line 1400, in capture_model',
     "    graph_runner.capture(**capture_inputs)",
     '  File "/usr/lib/python3/dist-packages/vllm/model_executor/layers/rotary_embedding.py", line 210, in forward',
     "    query, key = ops.rotary_embedding(positions, query, key)"],
    # SGLang: cut inside FlashInfer's planning below capture_one_batch_size (the innermost frame is not the runner)
    ["[2025-01-01 00:00:09 TP3] Scheduler hit an exception: Traceback (most recent call last):",
     '  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 380, in capture',
     "    ) = self.capture_one_batch_size(bs, forward)",
     '  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 450, in capture_one_batch_size',
     "    self.model_runner.attn_backend.init_forward_metadata_capture_cuda_graph(",
     '  File "/venv/lib/python3.11/site-packages/flashinfer/decode.py", line 900, in plan',
     "    self._plan_info = self._cached_module.plan("],
])
def test_seventeenth_round_a_traceback_cut_inside_the_capture_calls_is_cuda_graph_capture(lines):
    d = diagnose("\n".join(lines))
    assert d.cls == "cuda_graph_capture", d.cause


@pytest.mark.parametrize("lines, cls", [
    # with its exception line the message decides: out of memory while capturing is cuda_oom, and an illegal
    # memory access names no class, even below capture_model
    ([*_V1_CAPTURE_FRAMES, *_vllm_worker(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.19 GiB of which 1.02 GiB is free.")], "cuda_oom"),
    ([*_V1_CAPTURE_FRAMES, *_vllm_worker("RuntimeError: CUDA error: an illegal memory access was encountered")],
     "unknown"),
    # cut in a serving step (execute_model) or in SGLang's replay of captured graphs: no capture call on the way
    (_vllm_worker(
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2100, in execute_model',
        "    model_output = self.model(input_ids=input_ids, positions=positions)",
        '  File "/venv/lib/python3.12/site-packages/vllm/model_executor/models/mixtral.py", line 400, in forward',
        "    hidden_states = self.model(input_ids, positions)"), "unknown"),
    (["Traceback (most recent call last):",
      '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 1500, in forward',
      "    return self.cuda_graph_runner.replay(forward_batch)",
      '  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 700, in replay',
      "    self.graphs[self.bs].replay()",
      '  File "/venv/lib/python3.11/site-packages/torch/cuda/graphs.py", line 88, in replay',
      "    super().replay()"], "unknown"),
    # a startup that captured its graphs and is serving
    (["INFO 01-01 00:00:05 [gpu_model_runner.py:2900] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): "
      "If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization`.",
      "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67 [00:04<00:00, 15.2it/s]",
      "INFO 01-01 00:00:09 [gpu_model_runner.py:3000] Graph capturing finished in 4 secs, took 0.42 GiB",
      "INFO 01-01 00:00:12 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000"], "healthy"),
])
def test_seventeenth_round_capture_calls_only_place_a_cut_traceback(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


def test_seventeenth_round_a_failed_piecewise_cuda_graph_is_cuda_graph_capture_with_its_own_switch():
    d = diagnose("[2026-01-01 00:00:09 TP2] Piecewise CUDA Graph failed with error: shape mismatch at layer 12\n"
                 "[2026-01-01 00:00:09 TP2] Scheduler hit an exception: Traceback (most recent call last):\n")
    assert (d.cls, d.remedy) == ("cuda_graph_capture", "add_flag:--disable-piecewise-cuda-graph")
    # the whole-batch capture's failure keeps the class's remedy
    d = diagnose("[2026-01-01 00:00:09 TP0] Exception: Capture cuda graph failed: shape mismatch at layer 12\n")
    assert (d.cls, d.remedy) == ("cuda_graph_capture", "lower:cuda_graph_max_bs")


def test_seventeenth_round_the_piecewise_notice_of_a_healthy_start_is_no_failure():
    assert diagnose("\n".join(["[2026-01-01 00:00:03] Piecewise CUDA Graph is enabled by default as an experimental "
                               "feature.", "[2026-01-01 00:00:04] Capture piecewise CUDA graph begin. avail mem=11.49 GB",
                               "[2026-01-01 00:00:08] Capture piecewise CUDA graph end. Time elapsed: 4.02 s.",
                               *_SGLANG_READY])).cls == "healthy"


@pytest.mark.parametrize("lines, cls", [
    (["2024-03-01T10:00:00.000000Z ERROR text_generation_router: Unable to load the tokenizer for /data/my-model"],
     "tokenizer_error"),
    (["RuntimeError: Could not load tokenizer for 'org/model': tokenizer.json is missing"], "tokenizer_error"),
    # a warning that a tokenizer was not found, followed by a server that is ready: a fallback, no failure
    (["WARNING 01-01 00:00:01 [tokenizer.py:90] Could not find tokenizer for model org/model in its directory, "
      "using the base model's", "INFO 01-01 00:00:12 [api_server.py:1] Starting vLLM API server 0 on "
      "http://0.0.0.0:8000"], "healthy"),
])
def test_seventeenth_round_a_launcher_that_found_no_tokenizer(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


def test_seventeenth_round_a_binary_built_for_another_compute_capability_is_unsupported_gpu_arch():
    d = diagnose("Error: Could not create backend\n\nCaused by:\n"
                 "    Could not start backend: Runtime compute cap 89 is not compatible with compile time compute cap 90\n")
    assert (d.cls, d.remedy) == ("unsupported_gpu_arch", None)  # no attention backend changes what it was built for
    # the same words when they agree are no failure
    assert diagnose("INFO backend: runtime compute cap 90, compile time compute cap 90\n"
                    "INFO text_embeddings_router: Ready\n").cls == "healthy"


def test_seventeenth_round_a_within_signature_speaks_only_for_cut_tracebacks(tmp_path):
    body = ('version = 1\n[[class]]\nid = "a"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["xyz"]\n'
            "exceptions = [{ type = 'RuntimeError', within = '^runner\\.capture$' }]\n")
    path = tmp_path / "catalog.toml"
    path.write_text(body)
    sig = load_catalog(path).get("a").exceptions[0]
    lines = normalize("\n".join(["Traceback (most recent call last):", '  File "/x/runner.py", line 3, in capture',
                                 "    f()", '  File "/x/layers.py", line 9, in forward', "    g()"]))
    cut = parse_tracebacks(lines)[0].final
    assert sig.located_in(cut)
    whole = parse_tracebacks(normalize("\n".join([*(ln.text for ln in lines), "RuntimeError: boom"])))[0].final
    assert whole.exc_type == "RuntimeError" and not sig.matches(whole) and not sig.located_in(whole)


@pytest.mark.parametrize("last, cls", [
    # cut inside the path of its innermost frame: where it ran is still known (the speculative-decoding code)
    ('  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/speculative/multi_layer_eagle_wor', "speculative_config"),
    # cut after the path, before the function
    ('  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/spec_decode/eagle.py", line 212', "speculative_config"),
    # cut inside a module every call passes through: nothing known
    ('  File "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/mod', "unknown"),
])
def test_seventeenth_round_a_frame_line_cut_before_its_function_still_places_the_traceback(last, cls):
    lines = ["[2025-01-01 00:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 327, in __init__',
             "    self.draft_worker = EAGLEWorker(", last]
    tbs = parse_tracebacks(normalize("\n".join(lines)))
    assert len(tbs[0].final.frames) == 2 and tbs[0].final.frames[-1].function == ""
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("right, n, interval", [
    (483, 623, "95% interval 74.1-80.6%"),  # a table's figure: a few hundred logs pin it to about three points
    (9, 10, "95% interval 59.6-98.2%"),  # a class's ten logs say little
    (0, 5, "95% interval 0.0-43.4%"),
    (0, 0, "no logs"),
])
def test_wilson_interval_of_the_accuracy_tables(right, n, interval):
    assert wilson_interval(right, n) == interval


def test_the_signatures_looked_up_by_type_match_what_every_signature_matches():
    # Catalog.raising spares a log of thousands of exception lines the signatures of other types: it must never spare
    # one that matches (the type as written, dotted or not; a signature only for cut tracebacks never matches whole)
    cat = load_catalog()
    sections = [s for path in ALL_FIXTURES for tb in parse_tracebacks(normalize(fixture_text(path)))
                for s in tb.sections if s.exc_type]
    sections.append(TracebackSection(exc_type="torch.OutOfMemoryError", message="CUDA out of memory.", exc_index=0,
                                     start_index=0))
    assert len({s.exc_type for s in sections}) > 50
    for sec in sections:
        every = [c.id for c in cat.classes if any(sig.matches(sec) for sig in c.exceptions)]
        assert [c.id for c, sigs in cat.raising(sec.exc_type) if any(sig.matches(sec) for sig in sigs)] == every


@pytest.mark.parametrize("exception", [
    "AssertionError: assert arch >= 90",
    "AssertionError: assert arch_major in (9, 10)",
])
def test_a_kernels_assertion_on_the_gpus_arch_number_is_the_gpus_arch(exception):
    # (the leave-one-out measure: DeepGEMM's "arch_major == 10" was named only by its own signature) a kernel that
    # asserts the arch's number refuses this GPU, whichever library's frames raised it, in words no signature knows
    frames = ['Traceback (most recent call last):',
              '  File "/opt/venv/lib/python3.12/site-packages/somekernels/ops.py", line 40, in run',
              '    _C.run(x)']
    d = diagnose("\n".join([*frames, exception]))
    assert (d.cls, d.confidence < 0.5) == ("unsupported_gpu_arch", True)


_REASONS = ("(Worker_TP0 pid=142) ERROR 12-12 21:39:58 [multiproc_executor.py:750] ValueError: Failed to find a kernel "
            "that can implement the FP8 linear layer. Reasons:\n"
            "(Worker_TP0 pid=142) ERROR 12-12 21:39:58 [multiproc_executor.py:750] FooKernel cannot run: the current "
            "arch is sm_75\n")


@pytest.mark.parametrize("log, cls", [
    # vLLM: the reasons, one record each, under the line that announces them
    (_REASONS, "unsupported_gpu_arch"),
    # a Rust launcher (TGI, TEI): anyhow's "Caused by:" after a blank line, the causes indented
    ("Error: Could not create backend\n\nCaused by:\n    0: Could not start backend\n    1: the current arch is sm_75\n",
     "unsupported_gpu_arch"),
    # another process's record is not this line's reason
    (_REASONS.replace("(Worker_TP0 pid=142) ERROR 12-12 21:39:58 [multiproc_executor.py:750] FooKernel",
                      "(Worker_TP1 pid=143) ERROR 12-12 21:39:58 [multiproc_executor.py:750] FooKernel"), "unknown"),
    # nor is a line after a blank one
    ("ValueError: Failed to find a kernel for the layer. Reasons:\n\nFooKernel cannot run: the current arch is sm_75\n",
     "unknown"),
])
def test_the_reasons_a_failure_line_announces_are_read_with_it(log, cls):
    d = diagnose(log)
    assert d.cls == cls and (cls == "unknown" or d.confidence < 0.5), (d.cls, d.confidence)


@pytest.mark.parametrize("exception", [
    "ValueError: This model does not support chunked prefill, but chunked prefill is enabled.",
    "NotImplementedError: Prefix caching is not supported yet with sliding window attention.",
])
def test_a_refusal_of_a_feature_a_launch_setting_turns_on_is_the_settings(exception):
    # (the leave-one-out measure: vLLM's LoRA and pipeline-parallel refusals were named only by their own signatures)
    d = diagnose(exception)
    assert (d.cls, d.confidence < 0.5) == ("invalid_server_args", True)


@pytest.mark.parametrize("paste, cls", [
    ("length of new_indices: 5 != length of topk_p: 7, this should not happen", "unknown"),
    ("Unexpected state in the scheduler. This should never happen, please report it.", "unknown"),
    ("This is a bug: page table out of sync", "unknown"),
    ("free slot count went negative: can't happen", "unknown"),
    # a logger's warning, or a program that goes on, is no failure whatever it says
    ("WARNING: this should not happen", "healthy"),
    ("Falling back to the eager path; this should not happen", "healthy"),
    ("Not using flash attention", "healthy"),
])
def test_a_message_alone_that_says_a_check_which_cannot_fail_did_is_a_failure(paste, cls):
    # (round 172's SGLang 14368) a lone line no class names may be any line of a healthy log, unless it says a check
    # the program holds can never fail has failed
    assert diagnose(paste).cls == cls
