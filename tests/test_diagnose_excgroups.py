"""Crash diagnosis of Python's exception groups (noderig/diagnose/excgroups.py).

Python 3.11+ prints an ExceptionGroup (anyio's and asyncio's task groups: starlette's middleware, uvicorn's
lifespan) with "| " borders and rules between its sub-exceptions; the cause is inside. The layout below is
Lib/traceback.py's (3.12); the messages are vLLM's and torch's own (tests/fixtures/crashlogs/)."""

from __future__ import annotations

from noderig.diagnose import diagnose, normalize, parse_tracebacks
from noderig.diagnose.excgroups import GroupBorders

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of "
       "79.19 GiB of which 1.02 GiB is free.")


def sub_exception(indent: str, last: str = OOM) -> list[str]:
    """A sub-exception's traceback behind its border at ``indent`` (a profile run that failed with ``last``)."""
    return [f"{indent}| {line}" for line in (
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/worker/model_runner.py", line 1100, in profile_run',
        "    self.execute_model(model_input, kv_caches, intermediate_tensors)", last)]


GROUP_HEAD = [
    "ERROR:    Exception in ASGI application",
    "  + Exception Group Traceback (most recent call last):",
    '  |   File "/usr/lib/python3.12/site-packages/starlette/_utils.py", line 87, in collapse_excgroups',
    "  |     yield",
    '  |   File "/usr/lib/python3.12/site-packages/anyio/_backends/_asyncio.py", line 680, in __aexit__',
    "  |     raise BaseExceptionGroup(",
    "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
    "  +-+---------------- 1 ----------------",
]
GROUP_END = "    +------------------------------------"
GROUP = GROUP_HEAD + sub_exception("    ") + [GROUP_END]


def test_the_cause_inside_a_group_is_read_and_its_line_is_the_evidence():
    d = diagnose("\n".join(GROUP))
    assert d.cls == "cuda_oom"
    assert d.evidence[0].line == OOM and d.evidence[0].lineno == 12
    assert d.chain == ["model_runner.profile_run"]


def test_a_group_behind_a_journal_prefix_is_read_by_its_frames():
    # a bare assert inside DeepGEMM's CUDA_HOME lookup: only the frames name the cause
    inner = ["    | Traceback (most recent call last):",
             '    |   File "/usr/local/lib/python3.12/dist-packages/deep_gemm/__init__.py", line 124, in <module>',
             "    |     _find_cuda_home()                           # CUDA home",
             '    |   File "/usr/local/lib/python3.12/dist-packages/deep_gemm/__init__.py", line 118, in _find_cuda_home',
             "    |     assert cuda_home is not None",
             "    | AssertionError"]
    journal = "\n".join(f"Sep 05 11:48:04 gpu-7 vllm[20364]: {line}" for line in GROUP_HEAD + inner + [GROUP_END])
    assert diagnose(journal).cls == "deepgemm_jit_failure"


def test_an_unknown_cause_inside_a_group_is_the_cause_said():
    odd = "ValueError: the frobnicator is misaligned"
    d = diagnose("\n".join(GROUP_HEAD + sub_exception("    ", odd) + [GROUP_END]))
    assert d.cls == "unknown"
    assert odd in d.cause


def test_nested_groups_and_a_second_sub_exception():
    nested = GROUP_HEAD + [
        "    | Exception Group Traceback (most recent call last):",
        '    |   File "/usr/lib/python3.12/asyncio/taskgroups.py", line 145, in __aexit__',
        "    |     raise me from None",
        "    | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
        "    +-+---------------- 1 ----------------",
    ] + sub_exception("      ") + [
        "      +------------------------------------",
        "    +---------------- 2 ----------------",
        "    | asyncio.exceptions.CancelledError: Cancelled by cancel scope 7fc9a082f2b0",
        "    +------------------------------------",
    ]
    texts = [line.text for line in normalize("\n".join(nested))]
    assert texts.count("Traceback (most recent call last):") == 3
    assert OOM in texts and "asyncio.exceptions.CancelledError: Cancelled by cancel scope 7fc9a082f2b0" in texts
    assert diagnose("\n".join(nested)).cls == "cuda_oom"


def test_borders_elsewhere_are_left_alone():
    # nvidia-smi's table and a line after the group ended: "| " only goes inside a group's borders
    borders = GroupBorders()
    table = "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |"
    assert borders.peel(table) == table
    assert [borders.peel(x) for x in GROUP[1:]][-1] == ""
    assert borders.peel("INFO:     Shutting down") == "INFO:     Shutting down"
    assert borders.peel(table) == table


def test_a_paste_cut_inside_a_group_is_read_from_its_first_bordered_frame():
    # the header cut off (a paste that starts mid-group, behind a relay's prefix): the frames still read as a traceback
    cut = [f"2024-07-11 17:52:21 | ERROR | stderr | {line}" for line in GROUP_HEAD[2:6]]
    (tb,) = parse_tracebacks(normalize("\n".join(cut)))
    assert [f.function for f in tb.final.frames] == ["collapse_excgroups", "__aexit__"]
    assert diagnose("\n".join(cut)).cls == "unknown"
