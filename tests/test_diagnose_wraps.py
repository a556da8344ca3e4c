"""Hard-wrapped pastes (issue 13): a terminal that cut every long line at its width W, in a paste too short for
normalize's many-lines-of-one-width rule, is joined back line by line (noderig/diagnose/wraps.py). Fixtures are
picked by name from tests/fixtures/crashlogs/ (tuning logs only); docs/diagnose.md "Hard-wrapped pastes"."""

from __future__ import annotations

from pathlib import Path

import pytest

from noderig.diagnose import diagnose, normalize

FIXTURES = Path(__file__).parent / "fixtures" / "crashlogs"


def fixture(name: str) -> str:
    text = (FIXTURES / f"{name}.log").read_text()
    return "\n".join(x for x in text.split("\n") if not x.startswith(("# source:", "# note:")))


def hard_wrap(text: str, width: int) -> str:
    """What a terminal of ``width`` columns shows, copied as text: every line cut every ``width`` characters."""
    return "\n".join(x[i:i + width] for x in text.split("\n") for i in range(0, max(len(x), 1), width))


def fold_s(text: str, width: int) -> str:
    """``fold -s -w width``: a line cut after the last space that fits (the space stays at the line's end)."""
    out = []
    for x in text.split("\n"):
        while len(x) > width:
            k = x.rfind(" ", 0, width)
            k = width if k <= 0 else k + 1
            out.append(x[:k])
            x = x[k:]
        out.append(x)
    return "\n".join(out)


# each read as its own class bare, and (before wraps.py) as another one wrapped at one of these widths
WRAPPED = [
    ("invalid_server_args/vllm-pr-17944-model-option-valueerror", (80, 120)),
    ("tokenizer_error/moondream-242-from-buffer", (80, 100, 120)),
    ("checkpoint_incomplete/fastchat-2602-no-such-file-safetensors", (80, 100, 160)),
    ("kernel_abi_mismatch/ktransformers-439-glibcxx", (80, 100, 120)),
    ("unsupported_architecture/emma-x-1-openvla-model-type", (80, 120)),
    ("tokenizer_error/src-vllm-chat-template-required", (80, 120)),
]


@pytest.mark.parametrize("name,widths", WRAPPED, ids=[n for n, _ in WRAPPED])
def test_a_short_hard_wrapped_paste_reads_as_the_unwrapped_one(name, widths):
    assert_reads_as_bare(name, widths, hard_wrap)


def assert_reads_as_bare(name: str, widths: tuple[int, ...], wrap) -> None:
    """The fixture reads as its directory's class bare and wrapped by ``wrap`` at each width."""
    text = fixture(name)
    want = name.split("/")[0]
    assert diagnose(text).cls == want
    for width in widths:
        assert wrap(text, width) != text
        assert diagnose(wrap(text, width)).cls == want, width


def test_an_exception_line_cut_once_inside_a_word_is_one_line_again():
    line = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
            "stored in KV cache (7344).")
    k = line.index("tokens") + 3
    cut = [line[:k], line[k:]]
    assert cut[0].endswith("tok") and len(cut[0]) > len(cut[1])  # "tok" + "ens": no word of the catalog or the paste ends or starts so
    assert [ln.text for ln in normalize("\n".join(cut))] == [line]
    assert diagnose("\n".join(cut)).cls == "kv_cache_insufficient"


def test_an_exception_type_cut_inside_its_name_is_joined():
    line = ("Scheduler hit an exception while it ran the model: torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 1.50 GiB.")
    k = line.index("Error:") + 3  # "...OutOfMemoryErr" + "or: CUDA ..."
    text = "\n".join([line[:k], line[k:]])
    assert len(line[:k]) > len(line[k:]) and line[k:].startswith("or: ")
    assert [ln.text for ln in normalize(text)] == [line]
    assert diagnose(text).cls == "cuda_oom"


def test_a_word_wrap_that_kept_its_space_is_joined():
    text = fixture("tokenizer_error/moondream-242-from-buffer")
    assert diagnose(fold_s(text, 80)).cls == "tokenizer_error"


def test_lines_that_share_the_longest_length_by_chance_are_not_joined():
    # a real log: two different lines of the paste's longest length (normalize's rule wants three), each followed
    # by a line that goes on without any sign of a cut (a new capitalised sentence; plain words on both sides)
    log = ["RuntimeError: CUDA error: an illegal memory access was encountered during a graph replay",
           "CUDA kernel errors might be asynchronously reported at some other API call, so the stack",
           "then the server went on without it"]
    assert len(log[0]) == len(log[1]) == max(len(x) for x in log)
    assert [ln.text for ln in normalize("\n".join(log))] == log


def test_a_line_at_the_width_whose_next_line_starts_a_record_is_not_joined():
    cut = "ValueError: The model's max seq len (32768) is larger than the maximum number of tok"
    for record in ("[2026-01-22 20:05:33 TP0] Scheduler hit an exception", "INFO 05-24 00:20:47 [loader.py:88] ok",
                   "Traceback (most recent call last):", 'File "/x/run.py", line 3, in <module>',
                   "RuntimeError: CUDA error: out of memory", "2026-01-22 20:05:33,123 - INFO - starting"):
        assert [ln.text for ln in normalize("\n".join([cut, record]))][0] == cut, record


def test_a_whole_frame_line_at_the_width_keeps_its_code_line():
    frame = 'File "/usr/lib/python3/site-packages/vllm/model_executor/layers/layernorm.py", line 59, in forward'
    log = [frame, "out = torch.empty_like(x)"]
    assert [ln.text for ln in normalize("\n".join(log))] == log


def test_evidence_points_to_the_raw_paste_line():
    line = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
            "stored in KV cache (7344).")
    k = line.index("tokens") + 3
    text = "\n".join(["Loading weights", "", line[:k], line[k:]])
    lines = normalize(text)
    assert [(ln.no, ln.text) for ln in lines if ln.text][-1] == (3, line)
    d = diagnose(text)
    assert d.cls == "kv_cache_insufficient" and d.evidence[0].lineno == 3


HEAD = "INFO 01-22 20:05:33 [api_server.py:1024] vLLM API server version 0.6.3"


def test_a_line_that_says_a_failure_is_not_buried_in_a_record_that_says_none():
    # a cut read from one line's shape is a guess: an identifier on either side of a line's end is no proof of a
    # cut when the next line says a failure by itself and the line before is an INFO record or a warning
    for before, record in (
            ("WARNING 01-22 20:05:40 [custom_all_reduce.py:143] Custom allreduce is disabled because it's not "
             "supported on more than two PCIe-only GPUs at 0x7f3a2b", "terminate called after throwing an instance of 'c10::Error'"),
            ("INFO 01-22 20:05:40 [loader.py:143] Loading weights took 14.99 GiB and 5.3 seconds; model=Qwen2ForCausalLM "
             "on cuda0", "cudaErrorNoKernelImageForDevice"),
            # `fold -s`'s sign, a space at the end of the paste's longest line, read as a wrap before the shell's report
            ("WARNING 01-22 20:05:40 [custom_all_reduce.py:143] Custom allreduce is disabled because it's not "
             "supported on more than two PCIe-only GPUs ", "Segmentation fault (core dumped)"),
            ("WARNING 01-22 20:05:40 [custom_all_reduce.py:143] Custom allreduce is disabled because it's not "
             "supported on more than two PCIe-only GPUs ", "Killed")):
        log = [HEAD, before, record]
        assert [ln.text for ln in normalize("\n".join(log))][-1] == record, record
        assert diagnose("\n".join(log)).cls != "healthy", record


def test_a_trailing_space_on_the_paste_s_one_longest_line_is_no_word_wrap_before_a_capitalised_record():
    # `fold -s`'s sign is the space and a next word that would not have fitted the width; for the paste's one line
    # that long the width is its own length, any word "would not have fitted", and the space alone is no sign
    warning = ("WARNING 01-22 20:05:40 [custom_all_reduce.py:143] Custom allreduce is disabled because it's not "
               "supported on more than two PCIe-only GPUs ")
    oom = "CUDA out of memory. Tried to allocate 2.00 GiB"  # the catalog's words, none of FAILURE's
    log = [HEAD, warning, oom]
    assert [ln.text for ln in normalize("\n".join(log))][-1] == oom
    assert diagnose("\n".join(log)).cls == "cuda_oom"


def test_a_word_wrap_the_width_shows_is_joined_even_where_its_rest_says_failed():
    # `fold -s -w 120` of a warning whose second half says "failed" and "errors": other pieces end near the same
    # width, so the space is a fold's and the rest is the warning's, not a failure of its own
    text = fold_s(fixture("healthy/src-vllm-ulimit-failed-too-many-open-files-hint"), 120)
    assert diagnose(text).cls == "healthy"


def test_a_cut_inside_a_known_word_is_joined_even_where_its_rest_says_a_failure():
    # "...DeepGEMM performanceNVCC com" + "pilation failed: nvcc fatal : ...": the rest says a failure and the cut
    # line none, but the join makes a word the catalog knows, a cut that shows itself
    name = "deepgemm_jit_failure/deepgemm-172-cu128-b200-sm100f-test-bf16"
    assert diagnose(hard_wrap(fixture(name), 80)).cls == "deepgemm_jit_failure"


def test_a_long_line_cut_into_thousands_of_pieces_is_joined_whole():
    # one long line a terminal cut at 80 columns comes back as that line (what it costs, once quadratic: 12 s for
    # 20,000 pieces, is bench/diagnose.py's "terminal_pieces" row; no test asserts a time)
    line = " ".join(["the scheduler started its loop over requests"] * 3_600)
    text = "\n".join(line[k:k + 80] for k in range(0, 80 * 2_000, 80))
    lines = normalize(text)
    assert len(lines) == 1 and lines[0].text == line[:80 * 2_000]


# `fold -s` pastes (docs/diagnose.md "Word-folded pastes"): each read as its own class bare, and before the paste-wide
# fold rule as another one folded at these widths (healthy ones as failures: a warning's rest read as a line of its own)
FOLDED = [
    ("healthy/src-sglang-openai-serving-responses-not-initialized-traceback", (80,)),  # a traceback's header moved
    ("healthy/src-vllm-nccl-allocator-compile-failed-symm-mem-disabled", (80,)),
    ("healthy/vllm-18731-single-node-test-py-nccl-warn-cudawrap", (80,)),  # NCCL's prefix cut before "WARN"
    ("healthy/lmcache-503-vllm-capturing-cudagraphs", (80,)),
    ("speculative_config/sglang-13352-eagle3-spec-v2-topk4-cat", (80,)),
    ("checkpoint_incomplete/src36-vllm-weights-not-initialized-from-checkpoint", (80,)),
    ("checkpoint_corrupt/omniparser-130-vllm-serve-config-json-zero-bytes", (80,)),  # a path longer than the width
]


@pytest.mark.parametrize("name,widths", FOLDED, ids=[n for n, _ in FOLDED])
def test_a_paste_folded_at_its_words_reads_as_the_unfolded_one(name, widths):
    assert_reads_as_bare(name, widths, fold_s)


def test_a_fold_is_read_only_where_two_lines_show_it():
    from noderig.diagnose.wraps import fold_signs, folded_lines

    one = ["INFO 01-22 20:05:40 [loader.py:143] Loading weights took 14.99 GiB; the next word does not fit here ",
           "Qwen2ForCausalLM_with_a_long_name_that_would_not_fit", "short line"]
    assert folded_lines(fold_signs(one, lambda line: False)) == set()  # a prose line or a progress bar may end in a space
    two = one[:2] + ["INFO 01-22 20:05:41 [loader.py:150] Loading weights took 15.20 GiB; nor does the next one here ",
                     "Qwen2ForCausalLM_with_another_name_that_would_not_fit"]
    assert folded_lines(fold_signs(two, lambda line: False)) == {0, 2}


def test_a_fold_never_joins_a_record_that_begins_with_its_own_prefix():
    from noderig.diagnose.wraps import fold_signs, folded_lines

    # a paste folded elsewhere (two lines show it); the line before the record ends in a space near the width, but
    # the record carries a logger's prefix, a date or a level and its colon: no fold begins a line with those
    folded = ["INFO 01-22 20:05:40 [loader.py:143] Loading weights took 14.99 GiB and the weights are ",
              "Qwen2ForCausalLM_weights_loaded_from_the_local_directory",
              "INFO 01-22 20:05:41 [loader.py:150] Loading the tokenizer took 0.20 s; the tokenizer is ",
              "Qwen2TokenizerFast_with_its_chat_template_from_the_model"]
    assert folded_lines(fold_signs(folded, lambda line: False)) == {0, 2}
    for record in ("ERROR 01-22 20:05:42 [core.py:700] EngineCore failed to start.",
                   "[2026-01-22 20:05:42 TP0] Scheduler hit an exception",
                   "2026-01-22 20:05:42,123 - ERROR - the engine died", "ERROR:    Exception in ASGI application"):
        log = folded + ["INFO 01-22 20:05:42 [gpu_worker.py:200] Memory profiling takes 3.52 seconds and the pool is ",
                        record]
        assert normalize("\n".join(log))[-1].no == len(log), record  # the record begins a line of its own


def test_a_fold_joins_a_prefix_it_cut_between_its_date_and_its_time():
    # "ERROR 01-22 " + "12:05:33.129 [core.py:1302] ...": a long prefix folded before its time is one record again
    rec = ("[2026-01-22 20:05:33] [/bin/sh]: [EngineCore_DP0][pid=1242] ERROR 01-22 12:05:33.129 [core.py:1302] "
           "Traceback (most recent call last):")
    text = fold_s("\n".join([rec, rec.replace("Traceback (most recent call last):", "RuntimeError: CUDA error: out "
                                                                                  "of memory while it ran the model")]),
                  80)
    assert len(text.split("\n")) > 2
    assert len([ln for ln in normalize(text) if ln.text.strip()]) == 2


def test_a_logger_that_ends_its_records_in_a_space_shows_no_fold():
    # SGLang ends each "Decode batch, ..., #queue-req: 0, " record in a space, and those are a busy log's longest
    # lines: read as folds, the shell's report after the last one was joined into it and the crash read healthy
    log = fixture("healthy/standin-sglang-skip-warmup-tp2").split("\n")
    decode = next(x for x in log if "Decode batch" in x)
    busy = log + [decode] * 300  # a longest length but one in a hundred: the decode records'
    assert decode.endswith(", ") and sorted(map(len, busy), reverse=True)[len(busy) // 100] == len(decode)
    for report in ("Killed", "Segmentation fault (core dumped)"):
        text = "\n".join(busy + [report])
        assert normalize(text)[-1].text == report, report
        assert diagnose(text).cls != "healthy", report


def pad_console(text: str, width: int) -> str:
    """A console that hard-wraps at ``width`` and pads every line with blanks to it (copied as text)."""
    return "\n".join(x[i:i + width].ljust(width) for x in text.split("\n") for i in range(0, max(len(x), 1), width))


# each read as its class bare and padded at 120 columns before the fold rules, and as another (healthy as a failure)
# with them, until a line's padding was told from a fold's space and from a logger's records of one length
PADDED = ["healthy/src-vllm-ulimit-failed-too-many-open-files-hint",
          "healthy/src-vllm-nccl-allocator-compile-failed-symm-mem-disabled",
          "unsupported_gpu_arch/vllm-4327-fp8-minimum-capability-90-current-86",
          "cuda_graph_capture/vllm-30044-gh200-capture-cut"]


@pytest.mark.parametrize("name", PADDED)
def test_a_paste_a_console_padded_to_its_width_reads_as_the_bare_one(name):
    assert_reads_as_bare(name, (120,), pad_console)


def test_a_console_s_padding_is_no_fold_before_an_exception_line():
    # every line padded with blanks to the width: a padded line "ends in a space" before each unindented line, and a
    # fold read there would bury the exception line in the code line above it
    log = ["Loading the model weights", "Traceback (most recent call last):",
           '  File "/srv/run.py", line 3, in <module>', "    torch.cuda.set_device(0)",
           "RuntimeError: CUDA error: no kernel image is available for execution on the device"]
    width = max(map(len, log)) + 4
    text = "\n".join(x.ljust(width) for x in log)
    assert [ln.text.rstrip() for ln in normalize(text) if ln.text.strip()][-1] == log[-1]
    assert diagnose(text).cls == "unsupported_gpu_arch"
