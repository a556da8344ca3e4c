"""A healthy start cut anywhere stays healthy (issue 13): users paste the first or the last lines of a log, often
stopped before the ready line, and a line the server goes on from must not read as a failure once the lines that
show it going on are cut away. Every healthy tuning log (tests/fixtures/crashlogs/healthy/) is cut at its first 1, 2
and 3 lines and at each tenth, from the head and from the tail, and each excerpt diagnosed; docs/diagnose.md "A start
cut before its ready line"."""

from __future__ import annotations

import pytest

from noderig.diagnose import diagnose
from tests.test_diagnose import FIXTURES, fixture_text

HEALTHY = sorted((FIXTURES / "healthy").glob("*.log"))

# Healthy logs some of whose excerpts honestly read as failures: the excerpt keeps a failure and cuts away what
# showed it harmless. Each must still have such an excerpt (the list cannot go stale).
FAILING_EXCERPTS = {
    "anton-vllm-server-context-length-requests": "a request's 'maximum context length' traceback at ERROR, its tail "
                                                 "cut after the lines that show the server serving",
    "dgx-spark-vllm-0251-qwen38-27b-nvfp4-mtp-shutdown-enginedead": "the operator's shutdown and the EngineDeadError "
                                                                     "it leaves, the tail cut after the ready line",
    "multiagentsdebate-vllm-092-qwen3-14b-tp4-ctx-len-request-errors": "a request's 'maximum context length' "
                                                                        "refusal, its tail cut after the lines that "
                                                                        "show the server serving",
    "dgx-spark-sglang-int4-sigterm": "the shutdown's SIGTERM and its children's exit -15, the tail cut after the ready "
                                     "line and before the operator's stop record",
    "src-sglang-hf-quant-config-retry-tracebacks": "retry()'s tracebacks cut from the 'Will delay ... and retry' line "
                                                   "that says they were handled",
    "src-sglang-openai-serving-responses-not-initialized-traceback": "an optional module's traceback cut from the "
                                                                     "warning record that opens it",
    "src-vllm-hub-unreachable-warning-with-traceback": "the Hub's traceback cut from vLLM's WARNING that quotes it",
    "videocut-vllm-embedding-slurm-cancelled": "Slurm's 'JOB ... CANCELLED' after the weak ready line alone",
    "videocut-vllm-0120-qwen3-30b-a3b-tp2-h100-slurm-ulimit-moe-config": "Slurm's 'JOB ... CANCELLED ... DUE TO TIME "
                                                                          "LIMIT' with one line before it, the lines "
                                                                          "that show the server serving cut away",
    # round 136: the offline run's engine told to stop, then its client's "died unexpectedly": the tail cut after the
    # "Shutdown initiated" record keeps the death alone (a crash's own shutdown logs "Shutdown complete" too)
    "vllm-ascend-quickstart-qwen3-0.6b-offline-enginecore-died-at-exit": "the engine's 'Shutdown complete' and its "
                                                                         "client's 'died unexpectedly', the tail cut "
                                                                         "after the stop asked for",
    # round 99: vLLM's signal handler raises the same KeyboardInterrupt when a liveness probe or a supervisor kills a
    # start that is too slow (two unknown tuning logs), so before a ready line it stays a failure seen
    "hmxhpro-tt-vllm-0102-minicpm-v45-tp2-v0-shutdown-port-warning": "the operator's Ctrl-C and the engine's "
                                                                      "'KeyboardInterrupt: MQLLMEngine terminated', "
                                                                      "the tail cut after the ready line",
}


def excerpts(text: str) -> list[tuple[str, int, str]]:
    """(head or tail, lines kept, text) for the cuts a paste makes."""
    lines = text.split("\n")
    cuts = sorted({1, 2, 3} | {max(1, len(lines) * k // 10) for k in range(1, 10)})
    return [(side, n, "\n".join(lines[:n] if side == "head" else lines[-n:])) for n in cuts for side in ("head", "tail")]


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.stem)
def test_every_excerpt_of_a_healthy_start_stays_healthy(path):
    failing = [f"{side} {n}: {d.cls} ({d.cause[:100]})" for side, n, text in excerpts(fixture_text(path))
               if (d := diagnose(text)).cls != "healthy"]
    if path.stem in FAILING_EXCERPTS:
        assert failing, "no excerpt reads as a failure now; drop it from FAILING_EXCERPTS"
    else:
        assert not failing, "\n".join(failing)


def test_the_excerpts_known_to_fail_are_healthy_fixtures():
    assert set(FAILING_EXCERPTS) <= {p.stem for p in HEALTHY}
