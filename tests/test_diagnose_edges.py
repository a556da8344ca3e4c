"""Crash diagnosis at the edges of its decisions: the thresholds and small rules that a complete
mutation run (docs/mutation.md) showed no other test pinned. Every expected value is written
out by hand from the rule the code states, never taken from the code's own output."""

from __future__ import annotations

import pytest

from noderig.diagnose import diagnose, load_catalog, normalize, parse_tracebacks
from noderig.diagnose.normalize import strip_prefixes

# vLLM's and torch's own messages (tests/fixtures/crashlogs/kv_cache_insufficient/,
# port_in_use/tgi-1156-openshift-torch-store-29500.log)
KV_MESSAGE = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can "
              "be stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
              "when initializing the engine.")
BIND_MESSAGE = ("RuntimeError: The server socket has failed to listen on any local network address. The server socket "
                "has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed "
                "to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).")


def terminal_wrap(lines: list[str], width: int) -> list[str]:
    """What a terminal of ``width`` columns shows of these lines, copied as text: every line cut
    every ``width`` characters."""
    return [line[i:i + width] for line in lines for i in range(0, len(line), width)]


def texts(log: list[str]) -> list[str]:
    return [ln.text for ln in normalize("\n".join(log))]


def loader_line(length: int) -> str:
    """A vLLM loader record of exactly ``length`` characters (the model directory's name pads it)."""
    head = "INFO 05-24 00:20:47 [loader.py:88] Loading /models/"
    return head + "m" * (length - len(head))


def test_loader_line_has_the_length_asked_for():
    assert [len(loader_line(n)) for n in (60, 79)] == [60, 79]


def test_a_paste_wrapped_at_sixty_columns_is_joined_and_one_at_fifty_nine_is_not():
    # 226 characters: three pieces of 60 and one of 46. Lines shorter than 60 are never taken
    # for a terminal's wrap: short log lines of one length are common.
    at_60 = terminal_wrap([KV_MESSAGE], 60)
    assert [len(p) for p in at_60] == [60, 60, 60, 46]
    assert texts(at_60) == [KV_MESSAGE]
    at_59 = terminal_wrap([KV_MESSAGE], 59)
    assert texts(at_59) == at_59


def test_a_wrapped_paste_tolerates_one_longer_line_per_hundred_lines():
    # 95 short records, one record that was not wrapped (86 columns) and the message wrapped
    # at 60 columns (4 lines): 100 lines, so one longer line is allowed; at 99 lines it is not.
    unwrapped = loader_line(86)
    short = [f"INFO 05-24 00:20:47 [loader.py:88] shard {k} loaded" for k in range(95)]
    log = [*short, unwrapped, *terminal_wrap([KV_MESSAGE], 60)]
    assert len(log) == 100
    assert texts(log)[-2:] == ["Loading /models/" + "m" * 35, KV_MESSAGE]
    log = log[1:]
    assert texts(log)[-4:] == terminal_wrap([KV_MESSAGE], 60)


def test_a_wrap_width_needs_a_fifth_of_the_long_lines():
    # BIND_MESSAGE wrapped at 80 columns: three lines of 80 and one of 23. Beside it, records of
    # 60 to 79 columns, each length at most twice: with 12 of them the three wrapped lines are
    # 3 of 15 long lines (a fifth: a wrap), with 13 they are 3 of 16 (less: no wrap).
    wrapped = terminal_wrap([BIND_MESSAGE], 80)
    assert [len(p) for p in wrapped] == [80, 80, 80, 23]
    # The width rule's threshold is _wrap_width's; since wraps.py (issue 13) these three cuts, each inside a word
    # ("addres" + "s", "alrea" + "dy", "A" + "ddress"), are joined line by line whatever the records beside them.
    from noderig.diagnose.normalize import _wrap_width
    for others, joined in ((12, True), (13, False)):
        records = [loader_line(60 + k % 20) for k in range(others)]
        assert _wrap_width([*records, *wrapped]) == (80 if joined else None), others
        assert texts([*records, *wrapped])[others:] == [BIND_MESSAGE], others


def test_a_wrap_that_cut_after_a_space_keeps_it_and_a_line_keeps_its_last_characters():
    # At 71 columns the terminal cut KV_MESSAGE twice right after a space ("...the maximum " /
    # "number of"): the joined text keeps them. A line's own last characters (an X, trailing
    # spaces) stay too.
    cut = terminal_wrap([KV_MESSAGE], 71)
    assert cut[0].endswith("maximum ") and cut[1].endswith("increasing ") and len(cut) == 4
    assert texts(cut) == [KV_MESSAGE]
    assert texts(["GPU 0: NVIDIA TITAN X", "GPU 1: NVIDIA TITAN X  "]) == ["GPU 0: NVIDIA TITAN X",
                                                                      "GPU 1: NVIDIA TITAN X  "]


INDEX_CATALOG = r'''
version = 1
[[class]]
id = "by_word"
title = "W"
meaning = "m"
fix = "f"
evidence = ['\bkaboom at \d']
symptoms = ['\bwobble\b']
[[class]]
id = "by_literal"
title = "L"
meaning = "m"
fix = "f"
evidence = ['oo_bar\d']
[[class]]
id = "always"
title = "A"
meaning = "m"
fix = "f"
evidence = ['\d{3}\s\d{3}']
'''


def test_the_anchor_index_hits_exactly_the_patterns_a_line_matches(tmp_path):
    # One pattern per tier of the index: found by its word, by its literal (no whole word:
    # "oo_bar" may end a longer word), and searched on every line (no word, no literal).
    path = tmp_path / "catalog.toml"
    path.write_text(INDEX_CATALOG)
    index = load_catalog(path).index
    assert (sorted(index.by_word), sorted(index.by_literal), len(index.always)) == (["kaboom", "wobble"], ["oo_bar"], 1)
    assert index.hits("it went KABOOM at 3") == {(0, "e")}
    assert index.hits("a wobble") == {(0, "s")}
    assert index.hits("xfoo_bar7") == {(1, "e")}
    assert index.hits("code 123 456") == {(2, "e")}
    assert index.hits("kaboom at 1, wobble, foo_bar1 and 123 456") == {(0, "e"), (0, "s"), (1, "e"), (2, "e")}
    # each pattern's own words present, the pattern not matching: no hit
    assert index.hits("kaboom at noon, foo_bar without a digit, 12 3456") == set()


def _messages(*lines: str) -> list[tuple[str | None, str]]:
    return [(s.exc_type, s.message) for tb in parse_tracebacks(normalize("\n".join(lines))) for s in tb.sections]


TB_HEAD = ["Traceback (most recent call last):", '  File "/sgl/srt/managers/scheduler.py", line 1450, in run_batch']
ASSERT_ECHO = ["    assert num_tokens <= self.max_total_num_tokens", "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"]


def test_a_bare_assertion_error_in_a_double_spaced_paste_still_takes_its_statement():
    # A paste that put a blank line after every line (tests/fixtures/crashlogs/trust_remote_code/
    # textgen-5730-blank-lines.log is one): statement, blank, carets, blank, then the exception.
    # This was read as an AssertionError without a message before (the look-back stopped at 3 lines).
    expected = [("AssertionError", "num_tokens <= self.max_total_num_tokens")]
    assert _messages(*TB_HEAD, *ASSERT_ECHO, "AssertionError") == expected
    assert _messages(*"\n\n".join([*TB_HEAD, *ASSERT_ECHO, "AssertionError"]).split("\n")) == expected
    # further up than the statement, its carets and a blank after each, an assert is not this one's
    assert _messages(*TB_HEAD, ASSERT_ECHO[0], "", "", ASSERT_ECHO[1], "", "AssertionError") == [("AssertionError", "")]
    # only carets and tildes are skipped: any other line above is the echoed statement, not an assert
    assert _messages(*TB_HEAD, ASSERT_ECHO[0], "    X", "AssertionError") == [("AssertionError", "")]
    assert _messages(*TB_HEAD, ASSERT_ECHO[0], "    ~~~~^^^^", "AssertionError") == expected


def test_a_qualified_assertion_error_is_read_by_its_last_name():
    expected = [("builtins.AssertionError", "num_tokens <= self.max_total_num_tokens")]
    assert _messages(*TB_HEAD, *ASSERT_ECHO, "builtins.AssertionError") == expected
    assert _messages(*TB_HEAD, *ASSERT_ECHO, "_pytest.outcomes.AssertionError") == [
        ("_pytest.outcomes.AssertionError", expected[0][1])]
    # another type's bare line takes nothing from the statement above it
    assert _messages(*TB_HEAD, *ASSERT_ECHO, "builtins.AssertionErrorX") == [("builtins.AssertionErrorX", "")]


def test_a_bare_assertion_error_on_the_first_line_has_no_statement():
    d = diagnose("AssertionError\n")
    assert (d.cls, d.cause) == ("unknown", "unrecognised failure: AssertionError")


def _cut(*echo: str, frame: str = '  File "/sgl/srt/distributed/device_communicators/pynccl_wrapper.py", line 329, '
                                  'in NCCL_CHECK'):
    """A traceback cut right after its innermost frame's echoed source (a paste that stopped early)."""
    (tb,) = parse_tracebacks(normalize("\n".join([*TB_HEAD, frame, *echo])))
    return tb.final.exc_type, tb.final.message, tb.final.exc_index, sorted(tb.code_lines)


def test_a_raise_statement_stands_for_the_exception_line_a_cut_traceback_lacks():
    # TB_HEAD holds lines 0-1, the frame line 2, the echoed source from line 3 on
    assert _cut('    raise RuntimeError(f"NCCL error: {error_str}")') == ("RuntimeError", "NCCL error: {error_str}", 3, [])
    # the statement spans the echoed lines after it; adjacent literals are one string, as in Python
    assert _cut("    raise RuntimeError(", '        "NCCL error: unhandled system error "', '        "(run with NCCL_DEBUG=INFO)"',
                "    )") == ("RuntimeError", "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)", 3, [4, 5, 6])
    # lines echoed before the statement are not part of it
    assert _cut('    logger.error("NCCL_CHECK failed")', '    raise RuntimeError("NCCL error")') == (
        "RuntimeError", "NCCL error", 4, [3])
    # a qualified type is named by its last name
    assert _cut('    raise torch.cuda.OutOfMemoryError("CUDA out of memory")')[:2] == ("OutOfMemoryError", "CUDA out of memory")
    # a frame line after the statement is never part of the message
    outer = _cut('    raise RuntimeError(describe(err))', '  File "/sgl/srt/utils.py", line 7, in describe',
                 '    return err.text')
    assert "/sgl/" not in outer[1]


MATCH_CATALOG = r'''
version = 1
[[class]]
id = "wob"
title = "Wob failure"
meaning = "m"
fix = "f"
evidence = ["wob exploded"]
symptoms = ["wobble seen"]
exceptions = [{type = "WobError", module = "wobmod"}]
[[class]]
id = "beta"
title = "Beta failure"
meaning = "m"
fix = "f"
evidence = ["beta exploded"]
'''


def _match_catalog(tmp_path):
    path = tmp_path / "catalog.toml"
    path.write_text(MATCH_CATALOG)
    return load_catalog(path)


def test_a_bare_exception_line_reads_the_next_three_lines_blank_ones_skipped(tmp_path):
    cat = _match_catalog(tmp_path)
    # "RuntimeError:" alone, its message below it across a blank line: read as one line
    d = diagnose("RuntimeError:\nwob\n\nexploded\n", cat)
    assert (d.cls, d.evidence[0].line) == ("wob", "RuntimeError:")
    # the fourth line after it is not read with it
    assert diagnose("RuntimeError:\nwob\n\n\nexploded\n", cat).cls == "unknown"


def test_a_line_is_not_joined_with_the_echoed_source_line_after_it(tmp_path):
    # the frame line's function and the echoed source below it would read "wob exploded" joined:
    # echoed source is never evidence, not even as the wrapped end of the line above it
    d = diagnose("Traceback (most recent call last):\n  File \"/x/app.py\", line 1, in wob\n    exploded()\n"
                 "ValueError: v\n", _match_catalog(tmp_path))
    assert d.cls == "unknown"


def test_a_cut_traceback_in_a_class_module_is_a_symptom_with_its_other_symptoms(tmp_path):
    cat = _match_catalog(tmp_path)
    cut = ["Traceback (most recent call last):", '  File "/x/wobmod/run.py", line 3, in run', "    step()"]
    d = diagnose("\n".join(["wobble seen on the link", *cut]) + "\n", cat)
    # both symptoms of the class are its evidence; a symptom is never worth a decisive 0.9
    assert (d.cls, d.confidence) == ("wob", 0.6)
    # the cut's evidence is its innermost frame (where it stopped), not the source line or carets echoed under it
    assert [e.line for e in d.evidence] == ["wobble seen on the link", 'File "/x/wobmod/run.py", line 3, in run']
    carets = diagnose("\n".join(["wobble seen on the link", *cut, "    ^^^^^^"]) + "\n", cat)
    assert [e.line for e in carets.evidence] == ["wobble seen on the link", 'File "/x/wobmod/run.py", line 3, in run']
    # a cut traceback inside a warning record is no symptom, not even of a consequence
    warned = ["beta exploded", "[rank0]: WARNING 05-24 00:20:47 [worker.py:12] retrying after:", *cut]
    assert diagnose("\n".join(warned) + "\n", cat).also_seen == []
    assert diagnose("\n".join(["beta exploded", *cut]) + "\n", cat).also_seen == ["wob"]


def test_a_paste_that_starts_at_the_assert_statement_still_reads_it():
    from noderig.diagnose.matching import _lone_exceptions
    lines = normalize("    assert num_tokens <= self.max_total_num_tokens\nAssertionError\n")
    assert [(s.exc_type, s.message) for s in _lone_exceptions(lines, [], set())] == [
        ("AssertionError", "num_tokens <= self.max_total_num_tokens")]


def test_a_paste_that_starts_at_the_raise_statement_is_decided_by_the_exception_line_under_it():
    # vLLM #8274: the frames cut, the echoed statement first; read as the failure, its half-sentence named nothing
    log = ('    raise ValueError("Chunked prefill is not supported with "\n'
           "ValueError: Chunked prefill is not supported with multi-step (--num-scheduler-steps > 1)\n")
    got = diagnose(log)
    assert got.cls == "invalid_server_args"
    assert got.evidence[0].line.startswith("ValueError: Chunked prefill")
    # the same words in a log record are output, not an echo: still the failure line
    assert diagnose("ERROR raise ValueError(x)\n").cls == "unknown"


def test_with_continuation_joins_only_a_line_that_continues_this_one():
    from noderig.diagnose.normalize import Line, with_continuation
    here = Line(1, "  RuntimeError: The server socket has failed to bind ", "TP0")

    def after(text, rank=None, prefixed=False):
        return with_continuation([here, Line(2, text, rank, prefixed=prefixed)], 0)

    # the same rank (or none), no prefix, not a record of its own: joined by one space, own indentation kept
    assert after("to [::]:29500 (errno: 98 - Address already in use)") == (
        "  RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)",
        "to [::]:29500 (errno: 98 - Address already in use)")
    assert after("to [::]:29500", "TP0")[1] == "to [::]:29500"
    # another rank's line, a frame, an exception line (indented or not): not a continuation
    for text, rank in (("to [::]:29500", "TP1"), ('  File "/x/a.py", line 1, in f', None),
                       ("ValueError: x", None), ("    ValueError: x", None)):
        assert after(text, rank) == (here.text, None), (text, rank)


def test_an_exception_type_named_exception_pasted_alone_meets_the_exception_signatures(tmp_path):
    # a type whose name ends in "Exception", not "Error" (tritonclient's InferenceServerException),
    # pasted without its traceback, is read as an exception line too
    path = tmp_path / "catalog.toml"
    path.write_text(MATCH_CATALOG.replace('exceptions = [{type = "WobError", module = "wobmod"}]',
                                          'exceptions = [{type = "WobServerException", message = "wob unavailable"}]'))
    d = diagnose("wob.utils.WobServerException: [StatusCode.UNAVAILABLE] wob unavailable\n", load_catalog(path))
    assert (d.cls, d.confidence) == ("wob", 0.9)


def test_a_traceback_cut_above_its_first_frame_reads_deeper_lines_as_its_source():
    # frames sit two columns in, so the cut traceback's own column is 0: the echoed statement,
    # Python 3.11's carets and a line one column in are its source; the unindented line is its exception
    (tb,) = parse_tracebacks(normalize("\n".join(['  File "/sgl/srt/model_executor/model_runner.py", line 9, in load',
                                                  "    self.load_model()", "    ^^^^^^^^^^^^^^^^^", " more source",
                                                  "ValueError: v"])))
    assert (tb.final.exc_type, tb.final.message, sorted(tb.code_lines)) == ("ValueError", "v", [1, 2, 3])


def test_lines_of_a_traceback_are_never_read_again_as_exceptions_pasted_alone(tmp_path):
    # neither its header line nor the last line of its exception's message, even when they
    # start like an exception line: they belong to the traceback's own exception
    path = tmp_path / "catalog.toml"
    path.write_text(MATCH_CATALOG.replace('exceptions = [{type = "WobError", module = "wobmod"}]',
                                          'exceptions = [{type = "WobError"}]'))
    cat = load_catalog(path)
    frame = '  File "/x/app.py", line 1, in run'
    assert diagnose("\n".join(["WobError: Traceback (most recent call last):", frame, "ValueError: x"]) + "\n",
                    cat).cls == "unknown"
    assert diagnose("\n".join(["Traceback (most recent call last):", frame, "RuntimeError: worker failed:",
                               "WobError: wob unavailable"]) + "\n", cat).cls == "unknown"
    # outside a traceback the same line is an exception of its own
    assert diagnose("WobError: wob unavailable\n", cat).cls == "wob"


def test_a_record_ending_in_a_colon_opens_a_message_whatever_spaces_follow_it():
    # "...: " then the message's lines (not indented) belong to the record's rank until a blank line;
    # a record not ending in a colon takes only indented lines
    def ranks(first: str) -> list[str | None]:
        return [ln.rank for ln in normalize(f"[2026-05-30 13:31:17 TP3] {first}\nRuntimeError: boom\n  detail\n\nafter\n")]
    assert ranks("Scheduler hit an exception:  ") == ["TP3", "TP3", "TP3", None, None]
    assert ranks("Scheduler hit an exception") == ["TP3", None, None, None, None]


def test_continuation_is_followed_per_container_in_interleaved_compose_logs():
    # docker compose interleaves its containers' lines: another container's line in the middle of
    # a record does not continue it, and the record's own next line still does
    lines = normalize("\n".join(["sglang-1  | [2026-05-30 13:31:17 TP0] Scheduler hit an exception:",
                                 "router-1  | upstream connect error or disconnect/reset before headers",
                                 "sglang-1  | RuntimeError: boom"]))
    assert [(ln.text, ln.rank, ln.source) for ln in lines] == [
        ("Scheduler hit an exception:", "TP0", "sglang-1"),
        ("upstream connect error or disconnect/reset before headers", None, "router-1"),
        ("RuntimeError: boom", "TP0", "sglang-1")]


def test_a_log_of_blank_lines_is_kept_as_blank_lines():
    assert [(ln.no, ln.text) for ln in normalize("  \n\n\t\n")] == [(1, "  "), (2, ""), (3, "    ")]  # a tab as 4 columns


def test_after_a_blank_line_in_a_traceback_a_line_indented_one_column_still_continues_it():
    lines = normalize("\n".join(["[2026-05-30 13:31:17 TP0] Traceback (most recent call last):",
                                 '  File "/sgl/srt/managers/scheduler.py", line 9, in run', "", " self.step()",
                                 "", "unindented after a blank: the record is over"]))
    assert [ln.rank for ln in lines] == ["TP0", "TP0", "TP0", "TP0", "TP0", None]


def test_a_one_line_record_keeps_a_follow_up_indented_one_column():
    lines = normalize("[2026-05-30 13:31:17 TP2] Capture cuda graph bs [1, 2, 4]\n failed at bs 4\nnext record\n")
    assert [ln.rank for ln in lines] == ["TP2", "TP2", None]


def test_a_library_logging_record_keeps_its_level_without_a_logger_prefix():
    # FlashInfer's own Python logging record: its level is the record's, though no logger prefix
    # names a writer (the line is not "prefixed")
    (line,) = normalize("2025-02-25 08:37:29,910 - WARNING - flashinfer.jit: Prebuilt kernels not found, using JIT backend\n")
    assert (line.text, line.level, line.prefixed) == (
        "flashinfer.jit: Prebuilt kernels not found, using JIT backend", "WARNING", False)


def test_journal_lines_in_other_locales_lose_their_prefix():
    # journalctl writes the month as the locale names it: three letters, four, with a dot or not
    for month in ("Dec", "déc.", "Sept", "juil."):
        assert strip_prefixes(f"{month} 02 13:31:17 b300 sglang[536]: Load weight end.") == (
            "Load weight end.", {"source": "sglang[536]"}), month


def test_a_journal_line_with_a_two_letter_weekday_loses_its_prefix():
    # journalctl -o short-full in a German locale: "Mi" (Wednesday). Read as no prefix at all before
    # (the quick test before the journal patterns wanted a space or a dot after 3 or 4 letters).
    assert strip_prefixes("Mi 2026-12-02 13:31:17 CET b300 sglang[536]: [2026-12-02 13:31:17 TP3] Load weight end.") == (
        "Load weight end.", {"source": "sglang[536]", "rank": "TP3", "time": "2026-12-02 13:31:17", "prefixed": True})


def test_a_container_prefix_is_looked_for_in_the_first_64_characters():
    # the bar of "name  | " at column 63 is a container prefix; at column 64 the line is taken as it is
    for name, stripped in (("a" * 59 + "-1", True), ("a" * 60 + "-1", False)):
        line = f"{name}  | Load weight end."
        assert line.index("|") == (63 if stripped else 64)
        assert strip_prefixes(line)[0] == ("Load weight end." if stripped else line)


def test_an_sglang_prefix_with_a_t_between_date_and_time_keeps_its_rank():
    assert strip_prefixes("[2026-05-30T14:47:43 TP0] Load weight end.") == (
        "Load weight end.", {"rank": "TP0", "time": "2026-05-30T14:47:43", "prefixed": True})


def test_a_line_whose_first_word_starts_with_a_numeral_that_is_no_letter_is_not_a_journal_line():
    # a journal line starts with a word of letters (the month or weekday); a Roman numeral is a
    # number (str.isalpha() is False), though the journal patterns' [^\W\d_] would take it
    for line in ("Ⅻdec 02 13:31:17 b300 sglang[536]: Load weight end.", "Ⅻ 02 13:31:17 b300 sglang[536]: x"):
        assert strip_prefixes(line) == (line, {}), line


def test_pytest_short_summary_leaves_the_exception_line():
    # pytest's "FAILED <node id> - <exception>" (and a collection ERROR) is peeled to the exception it reports
    assert strip_prefixes("FAILED tests/x.py::test_a[1-2] - RuntimeError: boom") == ("RuntimeError: boom", {})
    assert strip_prefixes("ERROR tests/x.py - ImportError: no module") == ("ImportError: no module", {})
    # a summary without an exception, and a vLLM ERROR record, keep their words
    assert strip_prefixes("FAILED tests/x.py::test_a - assert 1 == 2") == ("FAILED tests/x.py::test_a - assert 1 == 2", {})
    assert strip_prefixes("ERROR 05-24 00:20:47 [core.py:1108] RuntimeError: x")[0] == "RuntimeError: x"


# --------------------------------------------------------------------------------------------
# the eighteenth round: breadth on the common failures (wordings, prefixes, line endings, noise)

_TORCH_ZIP_TRACE = [
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/model_loader/weight_utils.py", line 501, '
    "in pt_weights_iterator",
    "    state = torch.load(bin_file, map_location=\"cpu\", weights_only=True)",
    '  File "/opt/venv/lib/python3.12/site-packages/torch/serialization.py", line 1470, in load',
    "    with _open_zipfile_reader(opened_file) as opened_zipfile:",
    "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
]


def test_eighteenth_round_a_torch_zip_checkpoint_cut_short_is_checkpoint_corrupt():
    # torch.load of a .bin whose zip end is missing (the tuning logs: a .ckpt, .pth files), here under vLLM's
    # loader of pytorch_model-*.bin shards and a worker's prefix, and once as a bare line
    prefixed = "\n".join(f"(VllmWorker rank=1 pid=812) ERROR 12-04 08:00:01 [multiproc_executor.py:470] {ln}"
                         for ln in _TORCH_ZIP_TRACE)
    for text in (prefixed, _TORCH_ZIP_TRACE[-1]):
        d = diagnose(text)
        assert d.cls == "checkpoint_corrupt", d.cause
        assert d.remedy == "reverify_checkpoint"


def test_eighteenth_round_torch_loads_own_warning_on_a_healthy_start_is_no_failure():
    # torch.load's weights_only FutureWarning names torch.load and zip-free loading; a server that goes
    # on to serve is healthy
    text = "\n".join([
        "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/model_loader/weight_utils.py:501: FutureWarning: "
        "You are using `torch.load` with `weights_only=False` (the current default value), which uses the default "
        "pickle module implicitly.",
        "  state = torch.load(bin_file, map_location=\"cpu\")",
        "INFO 12-04 08:00:09 [gpu_model_runner.py:1200] Model loading took 13.48 GiB and 21.3 seconds",
        "INFO 12-04 08:00:31 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
    ])
    assert diagnose(text).cls == "healthy"


_OOM_TRACE = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2034, in load_model',
    "    self.model = model_loader.load_model(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use.",
]
_WORKER = "(VllmWorker rank=0 pid=123) ERROR 12-04 08:00:01 [multiproc_executor.py:470] "
_SHUTDOWN_NOISE = [
    "Exception ignored in: <function Worker.__del__ at 0x7f1c2c1e0>", "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/weakref.py", line 666, in _exitfunc', "    f()", "KeyboardInterrupt",
    "/usr/lib/python3.12/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be "
    "1 leaked shared_memory objects to clean up at shutdown",
    "[rank0]:[W1204 08:00:02.1 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed "
    "before we destruct ProcessGroupNCCL.",
    "ERROR 12-04 08:00:02 [core.py:700] EngineCore failed to start.",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]


def _wrapped(lines: list[str], width: int) -> list[str]:
    return [ln[i:i + width] for ln in lines for i in range(0, max(len(ln), 1), width)]


@pytest.mark.parametrize("form", [
    "\r\n".join(_WORKER + ln for ln in _OOM_TRACE) + "\r\n",  # a log saved with Windows line endings
    "\n".join("\x1b[1;36m(VllmWorker rank=0 pid=123)\x1b[0;0m ERROR 12-04 08:00:01 [multiproc_executor.py:470] " + ln
              for ln in _OOM_TRACE),  # vLLM's coloured process prefix
    "\n".join("[1;36m(VllmWorker rank=0 pid=123)[0;0m " + ln for ln in _OOM_TRACE),  # a paste that lost the ESC
    "\n".join("Dec 04 08:00:01 host python3[1234]: " + _WORKER + ln for ln in _OOM_TRACE),  # the journal, then vLLM's
    "\n".join(["Dec 04 08:00:01 host python3[1234]: [2025-01-01 00:00:00 TP0] Scheduler hit an exception: "
               + _OOM_TRACE[0]] + ["Dec 04 08:00:01 host python3[1234]: " + ln for ln in _OOM_TRACE[1:]]),
    "\n".join("vllm-1  | (EngineCore_DP0 pid=5) ERROR 12-04 08:00:01 [core.py:700] " + ln for ln in _OOM_TRACE),
    "\n".join("2025-12-04T08:00:01.123456789Z " + ln for ln in _OOM_TRACE),  # kubectl logs --timestamps
    "\n".join(_WORKER + ln for ln in _wrapped(_OOM_TRACE, 80)),  # a terminal that hard-wrapped at 80 columns
    "\n".join([_WORKER + ln for ln in _OOM_TRACE] + _SHUTDOWN_NOISE * 20),  # the error, then the shutdown's noise
], ids=["crlf", "ansi", "ansi-esc-lost", "journal-vllm", "journal-sglang", "compose-enginecore", "kubectl-timestamps",
        "wrapped-80", "shutdown-noise"])
def test_eighteenth_round_the_common_oom_reads_through_every_transport(form):
    assert diagnose(form).cls == "cuda_oom"


def test_eighteenth_round_a_repository_without_the_file_from_pretrained_needs_is_checkpoint_incomplete():
    # transformers' cached_file, in other words than the tuning logs: another file, under vLLM's API server,
    # and cut inside the phrase as a paste cuts it
    for text in (
        "(APIServer pid=1) OSError: /models/qwen3-8b-lora does not appear to have a file named "
        "preprocessor_config.json. Checkout 'https://huggingface.co//models/qwen3-8b-lora/tree/main' for available files.",
        "OSError: my-org/model-gguf does not appear to have a fil",
    ):
        d = diagnose(text)
        assert d.cls == "checkpoint_incomplete", d.cause
        assert d.remedy == "reverify_checkpoint"


def test_eighteenth_round_the_missing_file_quoted_at_warning_level_on_a_healthy_start_is_no_failure():
    # a loader that looks for an optional file and says so at WARNING: the server went on to serve
    text = "\n".join([
        "WARNING 12-04 08:00:02 [config.py:400] my-org/model does not appear to have a file named "
        "generation_config.json; using the model's defaults",
        "INFO 12-04 08:00:31 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
    ])
    assert diagnose(text).cls == "healthy"


def test_eighteenth_round_a_rank_that_cannot_fetch_the_nccl_unique_id_is_nccl_failure():
    # torch's store error in other words than the tuning log's Socket Timeout: a reset, a refused connection,
    # under torchrun's rank prefix
    for error in ("Connection reset by peer", "Connection refused", "Broken pipe"):
        text = (f"[rank3]: RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
                f"via c10d key-value store by key '0', but store->get('0') got error: {error}")
        assert diagnose(text).cls == "nccl_failure", error


# --------------------------------------------------------------------------------------------
# the nineteenth round: the classes that generalise worst, in recent SGLang and vLLM

def test_nineteenth_round_an_nccl_error_whose_last_error_is_a_full_dev_shm_is_shm_too_small():
    # torch's NCCL error names only "unhandled system error"; NCCL's own "Last error:" below it names the
    # cause. Here under SGLang's TP prefix, in newer NCCL's words for it (the segment it could not extend)
    for text in (
        "\n".join(f"[2026-05-07 05:56:32 TP1] {ln}" for ln in (
            "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3",
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
            "Last error:",
            "Error: failed to extend /dev/shm/nccl-iIkAlL to 9637892 bytes")),
    ):
        d = diagnose(text)
        assert d.cls == "shm_too_small", d.cause
        assert d.remedy == "enlarge_shm"


def test_nineteenth_round_an_nccl_error_with_another_last_error_stays_nccl_failure():
    # the detail names a socket, not shared memory; and a full /dev/shm on another rank, or far below,
    # is not this error's detail
    socket = "\n".join([
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
        "Last error:",
        "socketStartConnect: Connect to 10.0.0.2<43521> failed : Software caused connection abort",
    ])
    assert diagnose(socket).cls == "nccl_failure"
    other_rank = "\n".join([
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "[rank1]: Error while creating shared memory segment /dev/shm/nccl-Qx81ab (size 9637888)",
    ])
    assert diagnose(other_rank).cls == "nccl_failure"


def test_nineteenth_round_an_mtp_head_missing_from_the_checkpoint_is_speculative_config():
    # the loader's words, vLLM's own check and a KeyError, each on another model's MTP / NextN head
    for text in (
        "(Worker_TP0 pid=311) ERROR 09-02 10:11:12 [multiproc_executor.py:790] ValueError: Following weights were "
        "not initialized from checkpoint: {'model.layers.61.eh_proj.weight', 'model.layers.61.enorm.weight'}",
        "ERROR 09-02 10:11:12 [core.py:843] ValueError: NextN speculative decoding layer 46 weights missing from "
        "checkpoint. Use a checkpoint that includes them, or disable speculative decoding.",
        "KeyError: 'model.layers.78.mtp_block.self_attn.o_proj.weight'",
    ):
        assert diagnose(text).cls == "speculative_config", text


def test_nineteenth_round_a_missing_ordinary_layer_is_not_speculative_config():
    # weights of the target's own layers missing: no draft head is named
    text = ("ValueError: Following weights were not initialized from checkpoint: "
            "{'model.layers.3.self_attn.qkv_proj.weight', 'model.layers.3.mlp.down_proj.weight'}")
    assert diagnose(text).cls != "speculative_config"


def test_nineteenth_round_an_unregistered_draft_class_is_speculative_config():
    text = ("(EngineCore_DP0 pid=88) ValueError: Cannot find model module. 'Eagle3Qwen3MoeForCausalLM' is not a "
            "registered model in the Transformers library (only relevant if the model is meant to be in Transformers)")
    assert diagnose(text).cls == "speculative_config"


def test_nineteenth_round_a_tokenizer_lacking_an_attribute_is_tokenizer_error():
    for text in (
        "(APIServer pid=1) AttributeError: 'Qwen2TokenizerFast' object has no attribute 'all_special_tokens_extended'",
        "AttributeError: 'ChatGLMTokenizer' object has no attribute 'sp_tokenizer'",
    ):
        assert diagnose(text).cls == "tokenizer_error", text


def test_nineteenth_round_a_feature_refused_on_this_sm_is_unsupported_gpu_arch():
    for text in (
        "[2026-06-01 10:00:00 TP0] AssertionError: Block-sparse attention not supported on SM 8.6",
        "RuntimeError: fp4 gemm not supported on sm_89",
    ):
        assert diagnose(text).cls == "unsupported_gpu_arch", text


def test_nineteenth_round_a_backend_falling_back_on_this_sm_at_warning_is_no_failure():
    # the same words in a warning a server logs before it goes on to serve
    text = "\n".join([
        "(EngineCore_DP0 pid=88) WARNING 09-02 10:11:12 [cuda.py:300] FlashAttention 4 is not supported on SM 12.0; "
        "falling back to FLASHINFER.",
        "(APIServer pid=1) INFO 09-02 10:11:40 [api_server.py:1024] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "(APIServer pid=1) INFO:     Application startup complete.",
    ])
    assert diagnose(text).cls == "healthy"


# twentieth round: a colour escape written out as text; the unknown verdict saying what the paste lacks

def test_twentieth_round_a_colour_escape_written_as_text_is_removed_before_the_prefix():
    for raw, rank in (
        ("?[36m(EngineCore_DP1 pid=4410)?[0m ERROR 03-02 08:00:01 [core.py:700] EngineCore failed to start.", "DP1"),
        ("^[[1;33m(APIServer pid=12)^[[0m ERROR 03-02 08:00:01 [core.py:700] EngineCore failed to start.", "APIServer"),
        ("ESC[32m(Worker_TP3 pid=7)ESC[0;0m ERROR 03-02 08:00:01 [core.py:700] EngineCore failed to start.", "TP3"),
    ):
        text, info = strip_prefixes(raw)
        assert text == "EngineCore failed to start." and info["rank"] == rank, raw


def test_twentieth_round_a_failure_behind_a_text_escape_is_still_named():
    text = ("ESC[0;36m(EngineCore_DP0 pid=31)ESC[0;0m ERROR 10-02 11:00:00 [core.py:710] torch.OutOfMemoryError: CUDA "
            "out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.02 GiB is "
            "free.")
    assert diagnose(text).cls == "cuda_oom"


def test_twentieth_round_text_escapes_on_a_healthy_start_keep_it_healthy():
    # only colour codes (ending in m) go; a caret erase-line code and a question mark in prose stay
    text = "\n".join([
        "^[[0;36m(APIServer pid=5)^[[0;0m INFO 10-02 11:00:00 [api_server.py:1900] Starting vLLM API server 0 on "
        "http://0.0.0.0:8000",
        "^[[0;36m(APIServer pid=5)^[[0;0m INFO 10-02 11:00:00 [launcher.py:46] Route: /v1/chat/completions, Methods: POST",
        "^[[2K?[0;36m(APIServer pid=5)?[0;0m INFO:     Application startup complete.",
    ])
    assert diagnose(text).cls == "healthy"
    assert strip_prefixes("^[[2Kloading?[x] done")[0] == "^[[2Kloading?[x] done"


def test_twentieth_round_an_engine_core_death_reported_alone_says_where_its_error_is():
    for text in (
        "(APIServer pid=77) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
        "{'EngineCore_DP0': 1}",
        "[2026-02-11 09:15:02] Rank 2 scheduler is dead. Please check if there are relevant logs.",
        "(EngineCore_DP0 pid=78) Exception: WorkerProc initialization failed due to an exception in a background "
        "process. See stack trace for root cause.",
    ):
        d = diagnose(text)
        assert d.cls == "unknown" and "another process" in d.fix and "not in the log" in d.fix, text
        assert d.incomplete == "other_process" and d.to_dict()["incomplete"] == "other_process"


def test_twentieth_round_an_engine_core_death_after_its_own_error_gives_no_relay_note():
    # the engine core's own error is in the paste: unknown (no signature knows it), with the usual advice
    text = "\n".join([
        "(EngineCore_DP0 pid=78) Traceback (most recent call last):",
        '(EngineCore_DP0 pid=78)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 90, in '
        "__init__",
        "(EngineCore_DP0 pid=78) ZeroDivisionError: division by zero",
        "(APIServer pid=77) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ])
    d = diagnose(text)
    assert d.cls == "unknown" and not d.fix.startswith("The log does not show") and d.incomplete is None


def test_twentieth_round_an_engine_core_death_after_an_error_line_of_its_own_gives_no_relay_note():
    # no traceback, but the engine core logged an error line before the API server's report
    text = "\n".join([
        "(EngineCore_DP0 pid=78) ERROR 10-02 11:00:00 [core.py:700] Fatal: the frobnicator refused device 0",
        "(APIServer pid=77) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ])
    d = diagnose(text)
    assert d.cls == "unknown" and not d.fix.startswith("The log does not show") and d.incomplete is None


def test_twentieth_round_an_engine_core_death_after_a_known_error_is_that_class():
    text = "\n".join([
        "(EngineCore_DP0 pid=78) " + KV_MESSAGE,
        "(APIServer pid=77) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ])
    assert diagnose(text).cls == "kv_cache_insufficient"


def test_twentieth_round_a_traceback_cut_at_a_frame_says_the_exception_line_is_missing():
    text = "\n".join([
        "Mar 02 08:00:01 gpu1 vllm[811]: Traceback (most recent call last):",
        'Mar 02 08:00:01 gpu1 vllm[811]:   File "/opt/vllm/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", '
        "line 240, in load_model",
        "Mar 02 08:00:01 gpu1 vllm[811]:     self.model_runner.load_model()",
    ])
    d = diagnose(text)
    assert d.cls == "unknown" and "stops inside a traceback" in d.fix and d.incomplete == "cut_traceback"


def test_twentieth_round_a_whole_traceback_or_a_native_backtrace_gives_no_cut_note():
    whole = "\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 300, in __init__',
        "ZeroDivisionError: division by zero",
    ])
    native = "\n".join([
        "!!!!!!! Segfault encountered !!!!!!!",
        '  File "<unknown>", line 0, in ncclGroupEnd',
        '  File "<unknown>", line 0, in c10d::ProcessGroupNCCL::allreduce',
    ])
    for text in (whole, native):
        d = diagnose(text)
        assert not d.fix.startswith("The log does not show") and d.incomplete is None, text


# --------------------------------------------------------------------------------------------
# twenty-third round: vLLM's own ready lines are final in a log that also looks like SGLang's

def _vllm_start_then_request_error(prefix: str, middle: list[str]) -> str:
    lines = [
        "INFO 03-02 10:00:00 [api_server.py:912] vLLM API server version 0.8.4",
        *middle,
        "INFO 03-02 10:01:30 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:9000",
        "INFO 03-02 10:01:30 [launcher.py:26] Available routes are:",
        "INFO 03-02 10:01:30 [launcher.py:34] Route: /v1/completions, Methods: POST",
        "INFO:     Application startup complete.",
        "ERROR 03-02 10:02:00 [serving_completion.py:120] Error in preprocessing prompt inputs",
        "ERROR 03-02 10:02:00 [serving_completion.py:120] Traceback (most recent call last):",
        'ERROR 03-02 10:02:00 [serving_completion.py:120]   File "/opt/venv/lib/python3.11/site-packages/vllm/'
        'entrypoints/openai/serving_engine.py", line 400, in _validate_input',
        "ERROR 03-02 10:02:00 [serving_completion.py:120] ValueError: This model's maximum context length is 4096 "
        "tokens. However, you requested 5000 tokens.",
    ]
    return "\n".join(f"{prefix}{x}" for x in lines)


def test_twenty_third_round_vllm_ready_lines_count_under_an_sglang_style_prefix():
    d = diagnose(_vllm_start_then_request_error("[2026-03-02 10:00:00 TP1] ", []))
    assert (d.cls, d.ready) == ("healthy", True)


def test_twenty_third_round_vllm_ready_lines_count_in_a_log_that_names_sglang():
    # a vLLM server run from a directory named after the other server: the marker word is in a path
    middle = ["INFO 03-02 10:00:05 [config.py:600] Loading model from /srv/sglang-bench/models/qwen2.5-7b"]
    d = diagnose(_vllm_start_then_request_error("", middle))
    assert (d.cls, d.ready) == ("healthy", True)


def test_twenty_third_round_a_route_list_cut_before_the_completions_route_is_ready_too():
    text = "\n".join([
        "(APIServer pid=7) INFO 05-01 08:00:00 [launcher.py:37] Route: /v1/chat/completions, Methods: POST",
        "(APIServer pid=7) INFO:     127.0.0.1:40000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    ])
    assert diagnose(text).ready


def test_twenty_third_round_trap_sglang_uvicorn_lines_before_its_warmup_are_still_not_ready():
    # SGLang starts uvicorn before its warmup request: its failure after those lines is the launch's failure
    text = "\n".join([
        "[2026-03-02 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1)",
        "[2026-03-02 10:01:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        "[2026-03-02 10:01:00] INFO:     Application startup complete.",
        "[2026-03-02 10:01:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2100, in run_scheduler_process',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "23.6 GiB of which 1.1 GiB is free.",
    ])
    d = diagnose(text)
    assert (d.cls, d.ready) == ("cuda_oom", False)


def test_twenty_third_round_trap_an_error_after_vllm_ready_that_kills_the_server_is_still_a_failure():
    text = _vllm_start_then_request_error("[2026-03-02 10:00:00 TP1] ", []) + "\n" + "\n".join([
        "[2026-03-02 10:03:00 TP1] ERROR 03-02 10:03:00 [core.py:400] EngineCore encountered a fatal error.",
        "[2026-03-02 10:03:00 TP1] Segmentation fault (core dumped)",
    ])
    assert diagnose(text).cls != "healthy"


def test_twenty_third_round_trap_a_route_line_for_another_path_is_not_ready():
    assert not diagnose("INFO 05-01 08:00:00 [launcher.py:37] Route: /health, Methods: GET").ready
# --------------------------------------------------------------------------------------------
# twenty-first round: the refusals the libraries' own code raises, in other words and prefixes


def _tb(path, func, exc, prefix=""):
    return "\n".join(prefix + ln for ln in (
        "Traceback (most recent call last):",
        f'  File "{path}", line 40, in {func}',
        "    raise",
        exc))


def test_twenty_first_round_a_refusal_raised_in_speculative_code_is_speculative_config():
    # any ValueError / AssertionError / NotImplementedError raised in the speculative-decoding code itself,
    # whatever it says: vLLM's config and v1 proposers, SGLang's speculative workers
    for path, exc in (
        ("/opt/venv/lib/python3.11/site-packages/vllm/config/speculative.py",
         "ValueError: the drafter's rope_theta (10000) differs from the target's (1000000)"),
        ("/usr/local/lib/python3.12/dist-packages/vllm/v1/spec_decode/eagle.py",
         "AssertionError: tree attention needs the draft's block_size to be 16, got 32"),
        ("/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_worker.py",
         "NotImplementedError: topk > 1 is not implemented for this attention backend"),
    ):
        assert diagnose(_tb(path, "verify", exc, "[2026-08-01 10:00:00 TP0] ")).cls == "speculative_config", exc


def test_twenty_first_round_other_errors_in_speculative_code_are_not_speculative_config():
    # an OOM or a CUDA error raised while the draft runs is its own cause; a traceback cut inside the
    # speculative code says nothing of what it raised
    oom = _tb("/usr/local/lib/python3.12/dist-packages/vllm/v1/spec_decode/eagle.py", "propose",
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
              "of 79.19 GiB of which 1.02 GiB is free.")
    assert diagnose(oom).cls == "cuda_oom"
    cuda = _tb("/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_worker.py", "draft",
               "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert diagnose(cuda).cls != "speculative_config"
    # the same ValueError raised outside speculative code is not this class
    other = _tb("/usr/local/lib/python3.12/dist-packages/vllm/config/model.py", "verify",
                "ValueError: max_model_len 40000 is larger than the derived 32768")
    assert diagnose(other).cls != "speculative_config"


def test_twenty_first_round_a_package_a_speculative_method_needs_is_speculative_config():
    assert diagnose("ImportError: Arctic Inference is required for speculative decoding with method 'suffix'"
                    ).cls == "speculative_config"
    assert diagnose("(APIServer pid=7) ImportError: SuffixTree is required for suffix decoding. pip install "
                    "arctic-inference").cls == "speculative_config"
    # a notice that the package is missing, at INFO, from a server that starts anyway
    healthy = "\n".join([
        "INFO 08-01 10:00:00 [speculative.py:88] arctic-inference is required for suffix decoding; suffix is off",
        "INFO 08-01 10:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"])
    assert diagnose(healthy).cls == "healthy"


def test_twenty_first_round_minimum_sm_refusals_are_unsupported_gpu_arch():
    for text in (
        "RuntimeError: MyKernels requires GPUs with sm80 or higher",
        "[rank0]: RuntimeError: this op requires SM 90 or newer",
        "ValueError: FP4 GEMM requires SM100/SM103/SM110, got SM120",
        "RuntimeError: the NVL fabric kernels require a Hopper GPU",
        "RuntimeError: No supported GPU architectures detected for this kernel family",
        "BackendSupportedError: bmm_mxfp8 does not support compute capability 86",
        "ValueError: Unsupported compute capability: 75",
        "RuntimeError: Assertion error (csrc/apis/gemm.hpp:210): arch_major == 9 or arch_major == 10",
        "flashinfer.utils.GPUArchitectureError: this kernel was not built for the current device",
    ):
        assert diagnose(text).cls == "unsupported_gpu_arch", text


def test_twenty_first_round_arch_words_that_are_no_refusal_stay_out():
    # a fallback at WARNING on a server that comes up, and a toolkit too old for the SM (its own class)
    healthy = "\n".join([
        "[2026-08-01 10:00:00] WARNING: the fused kernel requires SM 90 or newer; falling back to the triton kernel",
        "[2026-08-01 10:00:09] The server is fired up and ready to roll!"])
    assert diagnose(healthy).cls == "healthy"
    toolkit = "WARNING flashinfer: Failed to get device capability: SM 12.x requires CUDA >= 12.9."
    assert diagnose(toolkit).cls != "unsupported_gpu_arch"
    # a requirement on something else than the GPU, and an assertion on another number
    assert diagnose("RuntimeError: this kernel requires 4 warps or more").cls != "unsupported_gpu_arch"
    assert diagnose("RuntimeError: Assertion error (csrc/apis/gemm.hpp:88): n % 64 == 0").cls != "unsupported_gpu_arch"


def test_twenty_first_round_deepgemm_release_mismatch_and_cut_calls_are_deepgemm_jit_failure():
    assert diagnose("TypeError: fp8_gemm_nt(): incompatible function arguments. The following argument types "
                    "are supported:").cls == "deepgemm_jit_failure"
    assert diagnose("[2026-08-01 10:00:00 DP0 TP0] TypeError: m_grouped_bf16_gemm_nn_masked(): incompatible "
                    "function arguments.").cls == "deepgemm_jit_failure"
    # an assertion in DeepGEMM's JIT machinery, whichever of its files (loading what it built, its cache)
    assert diagnose('[2026-08-01 10:00:00 TP3] RuntimeError: Assertion error (csrc/apis/../jit/handle.hpp:171): '
                    'error == CUDA_SUCCESS or error == CUDA_ERROR_DEINITIALIZED').cls == "deepgemm_jit_failure"
    assert diagnose('RuntimeError: Assertion error (csrc/jit/cache.hpp:52): std::filesystem::exists(dir_path)'
                    ).cls == "deepgemm_jit_failure"
    # not a caller asking for more SMs than the GPU has (device_runtime)
    assert diagnose('RuntimeError: Assertion error (csrc/jit/device_runtime.hpp:104): 0 <= new_num_sms and '
                    'new_num_sms <= get_prop()->multiProcessorCount').cls != "deepgemm_jit_failure"
    cut = "\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/utils/deep_gemm.py", line 180, in fp8_m_grouped_gemm_nt_masked',
        "    return _grouped_masked_impl(*args, **kwargs)",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/_ops.py", line 1158, in __call__'])
    assert diagnose(cut).cls == "deepgemm_jit_failure"


def test_twenty_first_round_not_deepgemm_other_gemms_and_oom_in_its_wrapper():
    # another library's GEMM with incompatible arguments, and an OOM raised inside the wrapper (the message
    # decides when the exception line is there)
    assert diagnose("TypeError: bmm_fp8(): incompatible function arguments.").cls != "deepgemm_jit_failure"
    oom = "\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/utils/deep_gemm.py", line 180, in fp8_gemm_nt',
        "    out = torch.empty(m, n)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB."])
    assert diagnose(oom).cls == "cuda_oom"


def test_twenty_first_round_a_kernel_naming_the_dsl_release_it_needs_is_cute_dsl_version_skew():
    for text in (
        "RuntimeError: the sparse MLA kernel requires nvidia-cutlass-dsl>=4.7.0 (found 4.5.2)",
        "(Worker_TP1 pid=99) ERROR 08-01 [core.py:1] ImportError: this backend requires nvidia-cutlass-dsl == 4.6.1",
    ):
        assert diagnose(text).cls == "cute_dsl_version_skew", text
    # pip's resolver notice at install time, from a server that then starts
    healthy = "\n".join([
        "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed.",
        "flashinfer-python 0.6.1 requires nvidia-cutlass-dsl>=4.6.0, but you have nvidia-cutlass-dsl 4.5.2 which "
        "is incompatible.",
        "INFO 08-01 10:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"])
    assert diagnose(healthy).cls == "healthy"
# --------------------------------------------------------------------------------------------
# the twenty-second round: healthy starts and benign lines that look alarming; the stage reached


def test_twenty_second_round_the_routers_own_info_and_debug_records_are_not_failures():
    # SGLang's router logs its records with their level; a note that a worker's health check is still
    # pending "with error: ..." is INFO while the worker starts. Other wordings, both of its formats
    for text in (
        "[Router (Python)] 2025-02-11 09:14:02 - INFO - Worker http://10.0.0.5:30001 health check is pending "
        "with error: error sending request for url (http://10.0.0.5:30001/health)",
        "2026-01-20 18:02:11  INFO sglang_router_rs::core::worker_manager: src/core/worker_manager.rs:512: "
        "Worker http://gpu-3:8000 is not ready yet, error: connection refused (os error 111)",
        "2026-01-20 18:02:11 DEBUG sglang_router_rs::core::job_queue: src/core/job_queue.rs:250: "
        "job failed once, will retry: error: worker not healthy",
    ):
        d = diagnose(text)
        assert d.cls == "healthy", d.cause


def test_twenty_second_round_the_routers_error_records_stay_failures():
    # traps: the router's own ERROR records (both formats), and a Python traceback after its INFO notes
    for text in (
        "[Router (Python)] 2025-01-09 00:28:10 - ERROR - Error starting router: argument 'worker_urls': "
        "'NoneType' object cannot be converted to 'Sequence'",
        "2025-11-04 10:05:37 ERROR sglang_router_rs::server: src/server.rs:900: Failed to create router: "
        "Timeout 300s waiting for workers to become healthy",
        "[Router (Rust)] 2025-03-08 02:33:09 - INFO - Worker http://0.0.0.0:31000 health check is pending\n"
        "Traceback (most recent call last):\n  File \"/x/launch_router.py\", line 9, in <module>\n"
        "RuntimeError: Failed to start router: Timeout 600s waiting for workers",
    ):
        d = diagnose(text)
        assert d.cls != "healthy", text
    # a level word inside the message is not the record's level
    d = diagnose("2025-11-04 10:05:37 some_tool: INFO - ok\nRuntimeError: CUDA error: out of memory")
    assert d.cls == "cuda_oom"


def test_twenty_second_round_a_begin_line_is_not_the_steps_end():
    # "Init torch distributed begin" alone is distributed init under way, not done (another prefix and ranks)
    begin = [f"[2026-02-01 10:00:0{i} DP{i} TP{i}] Init torch distributed begin." for i in range(4)]
    d = diagnose("\n".join(begin))
    assert (d.cls, d.stage) == ("healthy", "initialising distributed, not yet ready")
    # NCCL's own INFO output and the NCCL version vLLM names are the same step
    d = diagnose("INFO 03-02 11:00:01 [pynccl.py:70] vLLM is using nccl==2.26.2\n"
                 "gpu-7:2211:2211 [3] NCCL INFO Bootstrap : Using eth0:10.1.1.7<0>")
    assert d.stage == "initialising distributed, not yet ready"
    # once a later milestone is seen, the step under way is not named beside it
    d = diagnose("\n".join(begin + ["[2026-02-01 10:00:09 TP0] Init torch distributed ends. mem usage=0.5 GB",
                                    "[2026-02-01 10:00:10 TP0] Load weight begin. avail mem=78.1 GB"]))
    assert d.stage == "distributed initialised, loading weights, not yet ready"


def test_twenty_second_round_steps_under_way_are_named():
    cases = [
        ("capturing CUDA graphs", "[2026-03-01 08:00:00 TP0] Capture cuda graph begin. This can take up to several minutes."),
        ("DeepGEMM JIT warmup", "[2026-03-01 08:00:00 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time"),
        ("compiling the model", "(EngineCore_DP0 pid=9) INFO 03-01 08:00:00 [backends.py:1155] Dynamo bytecode transform time: 9.1 s"),
        ("capturing CUDA graphs", "(EngineCore_DP0 pid=3) INFO 03-01 08:00:00 [gpu_model_runner.py:2700] Graph capturing for 512 input tokens"),
        ("router started", "2026-03-01 08:00:00  INFO sglang_router_rs::server: src/server.rs:700: Starting router on 0.0.0.0:8080 | mode: Regular"),
        ("engine initialised", "(APIServer pid=1) INFO 03-01 08:00:00 [api_server.py:600] Supported tasks: ['generate']"),
    ]
    for stage, line in cases:
        d = diagnose(line)
        assert (d.cls, d.stage, d.ready) == ("healthy", f"{stage}, not yet ready", False), line
    # a capture that began after the KV cache: both named, the capture last
    d = diagnose("[2026-03-01 08:00:00 TP0] Memory pool end. avail mem=20.1 GB\n"
                 "[2026-03-01 08:00:01 TP0] Capture cuda graph begin. This can take up to several minutes.")
    assert d.stage == "KV cache allocated, capturing CUDA graphs, not yet ready"


@pytest.mark.parametrize("name, stage", [
    ("sglang-issue-30609-pd-decode-node-init-distributed-nccl-info", "initialising distributed, not yet ready"),
    ("vllm-issue-28910-gloo-symmmem-not-supported", "initialising distributed, not yet ready"),
    ("sglang-pr-11453-router-openai-backend", "router started, not yet ready"),
    ("club-3090-issue-922-use-fast-deprecated-multimodal-warmup", "engine initialised, not yet ready"),
    ("club-3090-issue-127-host-redacted-multimodal-warmup", "engine initialised, not yet ready"),
    ("sglang-issue-4208-router-health-check-pending-autotune", "compiling the model, not yet ready"),
    # older tuning logs whose stage was wrong or missing before the round
    ("sglang-pr-3792-config-already-used-warnings-load", "process started, loading weights, not yet ready"),
    ("sglang-pr-15891-deepgemm-precompile-session", "DeepGEMM JIT warmup, not yet ready"),
    ("sglang-pr-15909-tp4-capture-begin-cut", "KV cache allocated, capturing CUDA graphs, not yet ready"),
    # the second batch
    ("vllm-pr-23184-graph-capturing-per-size", "capturing CUDA graphs, not yet ready"),
    ("vllm-pr-46389-tp-capture-progress-bars", "capturing CUDA graphs, not yet ready"),
    ("vllm-issue-17813-gloo-flashinfer-not-available-fallback", "loading weights, not yet ready"),
    ("sglang-pr-21296-musa-awq-warning-ignore-import-capture",
     "distributed initialised, loading weights, weights loaded, KV cache allocated, capturing CUDA graphs, not yet ready"),
])
def test_twenty_second_round_healthy_tuning_logs_report_their_stage(name, stage):
    from pathlib import Path
    path = Path(__file__).parent / "fixtures" / "crashlogs" / "healthy" / f"{name}.log"
    text = "".join(ln for ln in path.read_text().splitlines(keepends=True) if not ln.startswith("# "))
    d = diagnose(text)
    assert (d.cls, d.ready, d.stage) == ("healthy", False, stage), d.cause


def test_twenty_second_round_alarming_benign_lines_of_the_new_logs_and_their_traps():
    # WARNINGs and notes that say "not supported" / "deprecated" / "error" in the new healthy logs' shapes
    healthy = [
        "(Worker_TP1 pid=77) WARNING 01-05 09:00:00 [symm_mem.py:58] SymmMemCommunicator: Device capability 7.5 "
        "not supported, communicator is not available.",
        "[W105 09:00:00.123456789 ProcessGroupNCCL.cpp:990] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default "
        "now, this environment variable is thus deprecated. (function operator())",
        "(VllmWorker rank=3 pid=12) WARNING 01-05 09:00:00 [config.py:3800] `torch.compile` is turned on, but the "
        "model my-org/custom-moe does not support it. Please open an issue on GitHub if you want it to be supported.",
        "[Gloo] Rank 7 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7",
    ]
    assert_each_healthy(healthy)
    # traps: the same words in a real error line, and a traceback logged at ERROR
    assert diagnose("RuntimeError: SymmMemCommunicator: Device capability 7.5 not supported").cls != "healthy"
    trace = "\n".join(f"(Worker_TP1 pid=77) ERROR 01-05 09:00:01 [multiproc_executor.py:600] {ln}" for ln in (
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/worker/gpu_worker.py", line 300, in init_device',
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error"))
    assert diagnose("[Gloo] Rank 0 is connected to 3 peer ranks.\n" + trace).cls != "healthy"


def test_twenty_second_round_the_stage_scan_finds_milestones_after_text_whose_lowercase_is_longer():
    # the stage is searched in the lowercased log (str.find for each pattern's words): a line whose
    # lowercase has more characters ("İ" lowers to two) must not shift the lines after it
    text = "\n".join(["İİİİ İstanbul node İ" * 3, "[2026-03-01 08:00:00 TP0] Load weight begin. avail mem=70 GB",
                      "[2026-03-01 08:00:09 TP0] Load weight end. type=X, dtype=torch.bfloat16"])
    d = diagnose(text)
    assert (d.cls, d.stage) == ("healthy", "loading weights, weights loaded, not yet ready")
    assert d.evidence and "Load weight end" in d.evidence[0].line


# --------------------------------------------------------------------------------------------
# Warnings a server went on from ([outlived]): NCCL prints harmless and fatal conditions alike at WARN


NCCL_SETUP = [
    "[2026-05-02 10:00:01 TP1] Init torch distributed begin.",
    "gpu-07:4411:4411 [1] NCCL INFO Bootstrap : Using enp5s0:10.1.2.7<0>",
    "gpu-07:4411:4411 [1] misc/ibvwrap.cc:106 NCCL WARN Failed to open libibverbs.so[.1]",
    "gpu-07:4411:4411 [1] NCCL INFO NET/Socket : Using [0]enp5s0:10.1.2.7<0>",
    "gpu-07:4411:4411 [1] NCCL INFO Using network Socket",
]


def test_an_nccl_warning_the_server_got_past_is_no_failure():
    # a host without InfiniBand: NCCL falls back to sockets and the server ends its distributed init
    d = diagnose("\n".join(NCCL_SETUP + ["[2026-05-02 10:00:04 TP1] Init torch distributed ends. mem usage=0.31 GB"]))
    assert (d.cls, d.ready) == ("healthy", False), d.cause
    assert d.stage == "distributed initialised, not yet ready"
    # vLLM's worker prefix, another harmless WARN (NCCL 2.18+ looking for libcuda), weights loading after it
    vllm = ["(VllmWorker rank=2 pid=913) gpu-07:913:913 [2] misc/cudawrap.cc:188 NCCL WARN Failed to find CUDA "
            "library libcuda.so (NCCL_CUDA_PATH='') : libcuda.so: cannot open shared object file",
            "(VllmWorker rank=2 pid=913) INFO 05-02 10:00:09 [default_loader.py:262] Loading weights took 41.20 seconds"]
    assert diagnose("\n".join(vllm)).cls == "healthy"


def test_an_nccl_warning_is_still_a_failure_when_nothing_got_past_it():
    # cut after the warning, or followed only by NCCL's own set-up output (a step under way): no milestone says
    # the server went on, so the warning stays the failure it may be
    assert diagnose("\n".join(NCCL_SETUP)).cls == "nccl_failure"
    # a warning after the last milestone: the server did not go on from that one
    late = ["[2026-05-02 10:00:04 TP1] Init torch distributed ends. mem usage=0.31 GB",
            "[2026-05-02 10:00:05 TP1] Load weight begin. avail mem=70.10 GB",
            "gpu-07:4411:4490 [1] transport/net_ib.cc:1270 NCCL WARN NET/IB : Got completion from peer 10.1.2.8<5521> "
            "with error 12, opcode 0, len 0, vendor err 129"]
    assert diagnose("\n".join(late)).cls == "nccl_failure"


def test_an_nccl_warning_before_the_error_it_caused_leaves_that_error_the_root():
    # the server did not get past it: the caller's NCCL error names the class, as before
    log = NCCL_SETUP[:2] + [
        "gpu-07:4411:4490 [1] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_create_qp failed: Cannot allocate memory",
        "[2026-05-02 10:00:06 TP1] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/distributed/parallel_state.py", line 1201, in init',
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3"]
    assert diagnose("\n".join(log)).cls == "nccl_failure"


def test_outlived_names_only_the_warnings_a_settled_milestone_follows():
    from noderig.diagnose.startup import outlived
    cat = load_catalog()
    log = [NCCL_SETUP[2], "[2026-05-02 10:00:02 TP1] Init torch distributed begin.", NCCL_SETUP[2],
           "[2026-05-02 10:00:04 TP1] Load weight begin. avail mem=70.10 GB", NCCL_SETUP[2]]
    # the begin line is a step under way, not a settled milestone: both warnings before "Load weight begin" go,
    # the last one stays
    assert outlived(normalize("\n".join(log)), cat) == {0, 2}
    assert outlived(normalize("\n".join(NCCL_SETUP)), cat) == set()


# Twenty-fourth round: vLLM's periodic engine statistics are a ready line of its own (logged only while
# the API server serves), so a log's tail cut after the route list, with a request refused for its length,
# reads as a served server and not as an unrecognised failure.

def _served_tail(prefix: str, stats: str, refusal: list[str]) -> str:
    return "\n".join(prefix + line for line in [
        'INFO:     10.0.0.5:51234 - "POST /v1/completions HTTP/1.1" 200 OK',
        stats,
        *refusal,
        'INFO:     10.0.0.5:51240 - "POST /v1/completions HTTP/1.1" 400 Bad Request',
    ])


_V0_METRICS = ("INFO 05-02 10:00:00 metrics.py:345] Avg prompt throughput: 812.4 tokens/s, Avg generation "
               "throughput: 95.0 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 4.1%")
_V0_REFUSAL = [
    "ERROR 05-02 10:00:03 serving_completion.py:118] Error in preprocessing prompt inputs",
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.10/site-packages/vllm/entrypoints/openai/serving_engine.py", line 181, in _validate_input',
    "    raise ValueError(",
    "ValueError: This model's maximum context length is 4096 tokens. However, you requested 5120 tokens "
    "(4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.",
]
_V1_STATS = ("(APIServer pid=1) INFO 07-03 09:15:20 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
             "Avg generation throughput: 21.4 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%")
_V1_REFUSAL = [
    "(APIServer pid=1) ERROR:    Exception in ASGI application",
    "(APIServer pid=1) Traceback (most recent call last):",
    '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/utils.py", line 99, in wrapper',
    "(APIServer pid=1) vllm.exceptions.VLLMValidationError: This model's maximum context length is 8192 tokens. "
    "However, you requested 1024 output tokens and your prompt contains at least 7300 input tokens.",
]


@pytest.mark.parametrize("prefix, stats, refusal", [
    ("", _V0_METRICS, _V0_REFUSAL),  # v0's metrics line
    ("vllm-server-1  | ", _V1_STATS, _V1_REFUSAL),  # v1's engine statistics under a compose prefix
], ids=["v0-metrics", "v1-engine-stats-compose"])
def test_twenty_fourth_round_an_engine_stats_line_makes_a_served_tail_ready(prefix, stats, refusal):
    d = diagnose(_served_tail(prefix, stats, refusal))
    assert (d.cls, d.ready) == ("healthy", True)


def test_twenty_fourth_round_trap_an_oom_while_serving_is_still_cuda_oom():
    stats = ("INFO 07-03 09:15:20 [loggers.py:118] Engine 000: Avg prompt throughput: 1200.0 tokens/s, "
             "Avg generation throughput: 80.2 tokens/s, Running: 64 reqs, Waiting: 12 reqs")
    oom = [
        "ERROR 07-03 09:15:31 [core.py:588] EngineCore encountered a fatal error.",
        "ERROR 07-03 09:15:31 [core.py:588] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 23.64 GiB of which 1.02 GiB is free.",
    ]
    assert diagnose(_served_tail("", stats, oom)).cls == "cuda_oom"


def test_twenty_fourth_round_trap_sglang_decode_throughput_is_not_a_vllm_ready_line():
    # SGLang's own batch statistics carry "throughput" too; its scheduler's exception after them stays a failure
    text = "\n".join([
        "[2026-03-02 10:00:00 TP0] Decode batch, #running-req: 4, #token: 5120, token usage: 0.02, "
        "gen throughput (token/s): 310.55, #queue-req: 0",
        "[2026-03-02 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2800, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ])
    d = diagnose(text)
    assert d.cls != "healthy" and not d.ready


def test_twenty_fourth_round_trap_a_throughput_summary_without_both_rates_is_not_ready():
    # a benchmark client's summary names throughput in other words; only the engine's own line counts
    text = "\n".join([
        "Avg prompt throughput: 812.4 tokens/s",
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.10/site-packages/vllm/worker/worker.py", line 240, in determine_num_available_blocks',
        "    raise ValueError('No available memory for the cache blocks.')",
    ])
    assert not diagnose(text).ready


# Twenty-fourth round: a frame line a paste wrapped at the space before its function's name is joined back,
# so the name alone on a line ("load_weights_and_postprocess") is neither the failure nor a class's key token.

def _word_wrapped_frames(exception: str) -> str:
    return "\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.11/site-packages/vllm/model_executor/model_loader/default_loader.py", line 266, in',
        "load_weights",
        "    loaded_weights = model.load_weights(self.get_all_weights(model_config, model))",
        '  File "/opt/conda/lib/python3.11/site-packages/vllm/model_executor/models/llama.py", line 591, in',
        "weights_iterator_postprocess",
        "    param.copy_(loaded_weight)",
        exception,
    ])


def test_twenty_fourth_round_a_frame_wrapped_before_its_function_keeps_the_exception_as_the_failure():
    d = diagnose(_word_wrapped_frames("IndexError: index 7 is out of bounds for dimension 0 with size 4"))
    assert d.cls == "unknown"
    assert "IndexError" in d.evidence[0].line


def test_twenty_fourth_round_a_frame_wrapped_before_its_function_still_names_a_known_class():
    d = diagnose(_word_wrapped_frames("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB."))
    assert d.cls == "cuda_oom"
    assert any("llama" in step for step in d.chain)


def test_twenty_fourth_round_trap_a_code_line_under_a_whole_frame_is_not_joined():
    lines = normalize("\n".join([
        "Traceback (most recent call last):",
        '  File "/srv/app/main.py", line 12, in main',
        "    raise",
        "RuntimeError: No active exception to reraise",
    ]))
    assert [ln.text.strip() for ln in lines][1:3] == ['File "/srv/app/main.py", line 12, in main', "raise"]


# Twenty-fourth round: an exception message a paste wrapped at a word is matched with its lines joined,
# so a signature whose words span the break ("is not" / "supported") still names the class.

def _spec_refusal(second_line: str, module: str = "server_args") -> str:
    return "\n".join([
        "Traceback (most recent call last):",
        f'  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/{module}.py", line 1488, in',
        "_handle_speculative_decoding",
        "    raise ValueError(",
        # (the speculative words past the thirty-third round's reach: a ValueError whose message opens on them is
        # speculative_config whether joined or not, so only the join can name this one)
        "ValueError: The model class LlamaForCausalLM loaded from /models/llama-3.1-8b-instruct with speculative decoding is not",
        second_line,
    ])


def test_twenty_fourth_round_a_word_wrapped_exception_message_still_matches_its_signature():
    assert diagnose(_spec_refusal("compatible with the hybrid KV cache; drop --speculative-algorithm.")).cls == \
        "speculative_config"


def test_twenty_fourth_round_trap_a_logger_record_after_the_exception_is_not_its_message():
    # the next line is a record of its own (a prefix and a level): it ends the message, nothing is joined
    # (raised in a module no speculative signature names: since the twenty-seventh round a ValueError raised in
    # server_args.py that names speculative decoding is speculative_config by its exception signature, joined or not)
    record = "[2026-03-23 14:01:40] INFO engine.py:120: compatible backends: triton, fa3"
    assert diagnose(_spec_refusal(record, "managers/scheduler")).cls != "speculative_config"
    assert diagnose(_spec_refusal(record)).cls == "speculative_config"


def test_nccl_records_of_one_length_are_lines_of_their_own():
    # NCCL_DEBUG output from one process: many records of exactly one length and none longer, the shape of a
    # terminal's wrapping; each opens a record of its own, so none is joined to the line before it
    records = [f"gpu-07:4411:4411 [{k % 8}] NCCL INFO Channel {k % 32:02d}/0 : {k % 8}[{k % 8}] -> "
               f"{(k + 1) % 8}[{(k + 1) % 8}] via P2P/IPC" for k in range(40)]
    assert len({len(r) for r in records}) == 1
    assert texts(records) == records
    # a wrapped message is still joined with its continuation; an NCCL record after it is not one
    log = ["RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with",
           "NCCL_DEBUG=INFO for details)", records[0]]
    lines = normalize("\n".join(log))
    from noderig.diagnose.normalize import with_continuation
    assert with_continuation(lines, 0)[1] == "NCCL_DEBUG=INFO for details)"
    assert with_continuation(lines, 1)[1] is None

# torch's c10 prints a C++ stack under an error: where it was raised, in ProcessGroupNCCL.cpp for anything
# the NCCL watchdog caught (a CUDA error of a kernel included), never the error itself
_C10_STACK = ["Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1903 "
              "(most recent call first):",
              "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f01c2a5e9a8 in "
              "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so)",
              "frame #1: <unknown function> + 0x11fb3 (0x7f01c2b19fb3 in /lib/x86_64-linux-gnu/libc.so.6)"]


def test_a_c10_stack_is_where_an_error_was_raised_not_an_nccl_failure():
    # the paste kept the stack and the engine's death, not the watchdog's message: nothing names a cause
    log = _C10_STACK + ["ERROR 03-02 10:11:12 [core_client.py:560] Engine core proc EngineCore_DP0 died unexpectedly"]
    d = diagnose("\n".join(log))
    assert d.cls == "unknown"
    assert "c10::Error" not in d.cause  # the stack's header is the first failure, not a C++ frame named Error::Error
    # the stack alone still says an exception was raised: a failure, though nothing names it
    assert diagnose("\n".join(_C10_STACK)).cls == "unknown"
    from noderig.diagnose.normalize import with_continuation
    assert with_continuation(normalize("\n".join(_C10_STACK)), 0)[1] is None


def test_a_c10_stack_under_the_watchdog_message_leaves_the_message_the_cause():
    nccl = ["terminate called after throwing an instance of 'c10::DistBackendError'",
            "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
            "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"]
    assert diagnose("\n".join(nccl + _C10_STACK)).cls == "nccl_failure"
    cuda = ["terminate called after throwing an instance of 'c10::Error'",
            "  what():  CUDA error: out of memory"]
    assert diagnose("\n".join(cuda + _C10_STACK)).cls == "cuda_oom"

# the twenty-fifth round: SGLang's capture-failure hints without the exception above them, and NCCL's
# CUDA check naming an out-of-memory (each case in other words and prefixes than the fixtures')

def test_twenty_fifth_round_capture_failure_hints_alone_are_cuda_graph_capture():
    cut = [
        # the three-hint form of early releases, under a TP/DP prefix, with the hint number the other wording has
        ["[2024-10-02 08:00:01 DP1 TP3] Possible solutions:",
         "[2024-10-02 08:00:01 DP1 TP3] 1. disable cuda graph by --disable-cuda-graph",
         "[2024-10-02 08:00:01 DP1 TP3] 2. set --mem-fraction-static to a smaller value"],
        # the decode-backend form of newer releases, behind a Kubernetes CRI prefix
        ["2026-05-01T08:00:01.123456789Z stderr F 3. disable decode CUDA graph by --cuda-graph-backend-decode="
         "disabled. (Not recommended. Huge performance loss)"],
        # the work-around sentence, for the whole-batch graphs and for the piecewise ones
        ["To work around this error, add --disable-cuda-graph to your launch command"],
    ]
    for lines in cut:
        d = diagnose("\n".join(lines))
        assert d.cls == "cuda_graph_capture" and d.confidence >= 0.5, lines
    piecewise = diagnose("To work around this error, add --disable-piecewise-cuda-graph to your launch command.")
    assert (piecewise.cls, piecewise.remedy) == ("cuda_graph_capture", "add_flag:--disable-piecewise-cuda-graph")


def test_twenty_fifth_round_cuda_graph_words_on_a_healthy_start_are_not_a_failed_capture():
    healthy = [
        "[2026-05-01 08:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=20.1 GB",
        "[2026-05-01 08:00:09 TP0] Capture cuda graph end. Time elapsed: 9.02 s. mem usage=1.21 GB. avail mem=18.9 GB.",
        # vLLM's notice before it captures, which names eager mode and OOM as advice
        "INFO 05-01 08:00:10 model_runner.py:1456] Capturing cudagraphs for decoding. This may lead to unexpected "
        "consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use "
        "'--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, consider decreasing "
        "`gpu_memory_utilization` or switching to eager mode.",
        # a start that disables the graphs itself, and the flag's help text
        "[2026-05-01 08:00:00] Disable cuda graph because --enable-return-hidden-states is set.",
        "  --disable-cuda-graph  Disable cuda graph.",
    ]
    assert_each_healthy(healthy)


def test_twenty_fifth_round_nccls_cuda_check_naming_out_of_memory_is_cuda_oom():
    lines = [
        "node-3:901:955 [5] NCCL INFO Channel 00/0 : 5[5] -> 6[6] via P2P/CUMEM",
        "node-3:901:955 [5] transport/p2p.cc:275 NCCL WARN Cuda failure out of memory",
        "[rank5]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error",
    ]
    assert diagnose("\n".join(lines)).cls == "cuda_oom"
    # traps: NCCL's CUDA check naming another CUDA error stays an NCCL failure, and an allocator INFO line is none
    other = "node-3:901:955 [5] include/alloc.h:120 NCCL WARN Cuda failure 'invalid device ordinal'"
    assert diagnose(other).cls == "nccl_failure"
    assert diagnose("node-3:901:955 [5] NCCL INFO Allocated 8388608 bytes of shareable memory for the buffers").cls \
        == "healthy"


def test_twenty_fifth_round_memory_profiling_and_safetensors_lines_of_a_healthy_start_stay_healthy():
    healthy = [
        "INFO 05-01 08:00:05 [gpu_worker.py:276] Memory profiling takes 3.21 seconds. Total non-torch memory: 0.6GiB; "
        "torch peak memory increase: 1.4GiB; the rest of the memory reserved for KV Cache is 50.2GiB.",
        "INFO 05-01 08:00:06 [kv_cache_utils.py:849] GPU KV cache size: 411,232 tokens",
        "[2026-05-01 08:00:03 TP0] KV Cache is allocated. #tokens: 401408, K size: 24.50 GB, V size: 24.50 GB",
        "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:03<00:03,  1.55s/it]",
        "INFO 05-01 08:00:02 [weight_utils.py:349] No model.safetensors.index.json found in remote.",
        # a tokenizer deprecation notice at start
        "/usr/lib/python3/site-packages/transformers/tokenization_utils_base.py:1601: FutureWarning: "
        "`clean_up_tokenization_spaces` was not set. It will be set to `True` by default.",
    ]
    assert_each_healthy(healthy)


# round 26's tuning logs: a refusal that asks for another speculative setting, or names speculative
# decoding as what needs the value it cannot meet, in other words and prefixes than the fixture's
@pytest.mark.parametrize("line", [
    "(EngineCore_DP0 pid=812) ValueError: cudagraph capture sizes must be multiples of 5 (required by speculative "
    "decoding); got 4",
    "[2026-02-11 09:12:44 TP0] Scheduler hit an exception: AssertionError: page size 64 is not a multiple of the "
    "draft window; please reduce --speculative-num-draft-tokens",
    "RuntimeError: Worker failed with error 'no batch size fits both; change speculative_num_steps or the max "
    "running requests'",
])
def test_twenty_sixth_round_a_refusal_asking_for_another_speculative_setting(line):
    assert diagnose(line).cls == "speculative_config"


@pytest.mark.parametrize("line", [
    # a warning that suggests a setting: the server went on
    "WARNING 02-11 09:12:44 [speculative.py:310] You may reduce num_speculative_tokens for a higher acceptance rate",
    # SGLang adjusting a setting itself
    "[2026-02-11 09:12:44] Adjusting speculative_num_draft_tokens to 4 for the EAGLE topk of 1",
])
def test_twenty_sixth_round_trap_a_setting_suggested_or_adjusted_is_no_failure(line):
    assert diagnose(line).cls == "healthy"


# the twenty-seventh round: the messages the libraries' own code raises for six classes, by cause (each case in
# other words and prefixes than the part-B probes'), and the lines that look like them on a start that goes on

def assert_named_by_a_signature(logs: list[str], cls: str) -> None:
    """Each log comes out ``cls`` at a signature's confidence (0.5 or more), not by the key-token tier."""
    for log in logs:
        d = diagnose(log)
        assert (d.cls, d.confidence >= 0.5) == (cls, True), log


def assert_each_healthy(logs: list[str]) -> None:
    """Each log alone comes out healthy: nothing in it is a failure (the traps beside each rule)."""
    for log in logs:
        assert diagnose(log).cls == "healthy", log


def test_twenty_seventh_round_an_extensions_compiled_ops_built_for_another_library_are_an_abi_mismatch():
    named = [
        # torchvision's refusal under a compose prefix, without the sentence after it
        "vllm-1  | RuntimeError: Couldn't load custom C++ ops. This can happen if your PyTorch and torchvision "
        "versions are incompatible",
        # Cython's size check for another NumPy type, pasted alone
        "ValueError: numpy.ndarray size changed, may indicate binary incompatibility. Expected 16 from C header, "
        "got 80 from PyObject",
    ]
    assert_named_by_a_signature(named, "kernel_abi_mismatch")
    # traps: the same words as Cython's RuntimeWarning (a size it accepts), which a program prints and goes on from
    assert_each_healthy(["<frozen importlib._bootstrap>:241: RuntimeWarning: numpy.ufunc size changed, may indicate binary "
                         "incompatibility. Expected 192 from C header, got 216 from PyObject",
                         "RuntimeWarning: numpy.dtype size changed, may indicate binary incompatibility. Expected 96, got 88"])


def test_twenty_seventh_round_an_allocation_failing_through_any_cuda_wrapper_is_cuda_oom():
    named = [
        # torch's driver-API check under a vLLM worker prefix, FlashInfer's ctypes runtime binding pasted alone
        "(Worker_TP1 pid=90) ERROR 11-05 10:00:00 [multiproc_executor.py:671] RuntimeError: CUDA driver error: "
        "out of memory",
        "RuntimeError: CUDART error: out of memory",
        # Triton's driver check under SGLang's DP/TP prefix, and the runtime's enum name from another printer
        "[2026-11-05 10:00:00 DP1 TP5] RuntimeError: Triton Error [CUDA]: out of memory",
        "cudaMalloc(&buf, bytes) returned cudaErrorMemoryAllocation",
        # a ROCm torch's allocator in an older release's words
        "RuntimeError: HIP out of memory. Tried to allocate 2.00 GiB",
    ]
    assert_named_by_a_signature(named, "cuda_oom")
    # traps: the same wrappers naming another CUDA error are not an OOM
    for line in ["RuntimeError: Triton Error [CUDA]: invalid argument", "RuntimeError: CUDART error: invalid device "
                 "ordinal", "RuntimeError: CUDA error code=1(b'cudaErrorInvalidValue')"]:
        assert diagnose(line).cls not in ("cuda_oom", "healthy"), line


def test_twenty_seventh_round_nvml_and_cuda_enum_names_for_a_driver_that_does_not_fit_are_driver_mismatch():
    named = [
        "cuInit failed: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "RuntimeError: CUDA error code=35(b'cudaErrorInsufficientDriver')",
        # NVML's errors without pynvml's module prefix, and its message alone under SGLang's prefix
        "NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.",
        "[2026-11-05 10:00:00] RM has detected an NVML/RM version mismatch.",
        "NVMLError_DriverNotLoaded: Driver Not Loaded",
    ]
    assert_named_by_a_signature(named, "driver_mismatch")
    # traps: a WARNING record of a server that checked NVML and went on, and nvidia-smi's header
    assert_each_healthy(["WARNING 11-05 10:00:00 [__init__.py:49] Exception happens when checking CUDA platform: "
                         "pynvml.NVMLError_DriverNotLoaded: Driver Not Loaded",
                         "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |"])


def _hook_raise(message: str, module: str = "arg_groups/speculative_hook", exc: str = "ValueError") -> str:
    return "\n".join([
        "[2026-11-05 10:00:00] Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/server_args.py", line 698, in __post_init__',
        "    handle_speculative_decoding(self)",
        f'  File "/sgl-workspace/sglang/python/sglang/srt/{module}.py", line 120, in handle_speculative_decoding',
        f"    raise {exc}(",
        f"{exc}: {message}",
    ])


def test_twenty_seventh_round_sglangs_speculative_checks_are_speculative_config_wherever_they_moved():
    named = [
        # the argument hook, whatever its words
        _hook_raise("--speculative-draft-window-size must be positive, got 0."),
        _hook_raise("DSpark speculative_num_draft_tokens must equal gamma + 1 (= 8), got 4.", exc="AssertionError"),
        # server_args.py before the hook, a check that names speculative decoding
        _hook_raise("trtllm_mha backend only supports topk = 1 for speculative decoding.", module="server_args"),
        # a method's refusal pasted alone, under a TP prefix
        "[2026-11-05 10:00:00 TP0] ValueError: NGRAM speculative decoding only supports CUDA or CPU devices.",
    ]
    assert_named_by_a_signature(named, "speculative_config")
    # traps: a server_args.py check that names no speculative setting stays the refused command line; an OOM raised
    # in the hook (it loads the draft's config) is its own cause
    assert diagnose(_hook_raise("--tp-size must be positive, got 0.", module="server_args")).cls == \
        "invalid_server_args"
    assert diagnose(_hook_raise("CUDA out of memory. Tried to allocate 2.00 GiB",
                                exc="torch.OutOfMemoryError")).cls == "cuda_oom"
    # traps: SGLang's notes that it changed a speculative argument itself (its logger has no level) and goes on
    assert_each_healthy(["[2026-11-05 10:00:00] DSpark only supports speculative_eagle_topk == 1; overriding "
                         "speculative_eagle_topk=4 to 1.",
                         "[2026-11-05 10:00:00] speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                         "speculative_eagle_topk == 1",
                         "[2026-11-05 10:00:00] Overlap schedule is not implemented for speculative decoding on CPU.",
                         "[2026-11-05 10:00:00] Max running requests is reset to 48 for speculative decoding. You can "
                         "override this by explicitly setting --max-running-requests."])


def test_twenty_seventh_round_tokenizer_libraries_own_failures_are_tokenizer_error():
    named = [
        "Exception: data did not match any variant of untagged enum PreTokenizerWrapper at line 1 column 77",
        "api-1  | RuntimeError: Internal: /tmp/sentencepiece/src/sentencepiece_processor.cc(1101) "
        "[model_proto->ParseFromArray(serialized.data(), serialized.size())]",
        "ERROR 11-05 10:00:00 [engine.py:411] ValueError: Hash mismatch for data downloaded from "
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken (expected 223921b7).",
        "ImportError: blobfile is not installed. Please install it by running `pip install blobfile`.",
        "ValueError: As of transformers v4.44, default chat template is no longer allowed, so you must provide a "
        "chat template if the tokenizer does not define one.",
    ]
    assert_named_by_a_signature(named, "tokenizer_error")
    # traps: sentencepiece's training log, vLLM's chat-template note at start
    assert_each_healthy(["sentencepiece_trainer.cc(77) LOG(INFO) Starts training with : ",
                         "INFO 11-05 10:00:00 [chat_utils.py:470] Detected the chat template content format to be 'string'. "
                         "You can set `--chat-template-content-format` to override this."])
    # trap: a request's missing template after the server is ready is the request's error, not a crash
    served = "\n".join([
        "INFO 11-05 10:00:00 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "ERROR 11-05 10:00:09 [serving_chat.py:222] Error in preprocessing prompt inputs",
        "ERROR 11-05 10:00:09 [serving_chat.py:222] Traceback (most recent call last):",
        'ERROR 11-05 10:00:09 [serving_chat.py:222]   File "/usr/local/lib/python3.12/dist-packages/vllm/'
        'entrypoints/chat_utils.py", line 1741, in apply_hf_chat_template',
        "ERROR 11-05 10:00:09 [serving_chat.py:222] ValueError: As of transformers v4.44, default chat template is "
        "no longer allowed, so you must provide a chat template if the tokenizer does not define one.",
    ])
    d = diagnose(served)
    assert (d.cls, d.ready) == ("healthy", True)


def test_twenty_seventh_round_sglangs_sgl_kernel_version_check_and_load_hint_are_sgl_kernel_mismatch():
    named = [
        "[2026-11-05 10:00:00] Exception: sgl-kernel is installed with version 0.0.9.post2, which is less than the "
        "minimum required version 0.1.0. Please reinstall the latest version with `pip install sgl-kernel "
        "--force-reinstall`",
        "sglang-1  | Please ensure sgl_kernel is properly installed with:",
    ]
    assert_named_by_a_signature(named, "sgl_kernel_mismatch")
    # traps: the same check for FlashInfer is not sgl-kernel's mismatch; a version line at start is nothing
    other = ("Exception: flashinfer_python is installed with version 0.2.3, which is less than the minimum required "
             "version 0.2.5. Please uninstall the old version and reinstall the latest version")
    assert diagnose(other).cls != "sgl_kernel_mismatch"
    assert diagnose("[2026-11-05 10:00:00] sgl-kernel version: 0.3.16").cls == "healthy"


# round 26's tuning logs: a launcher or converter that looked for the tokenizer's files and found none
@pytest.mark.parametrize("line", [
    "[2026-02-11 09:12:44] ValueError: Cannot locate tokenizer.json under /models/kimi-k2.6; pass --tokenizer-path",
    "Error: Unable to find tokenizer files in snapshot 3f1c0a (the download was interrupted?)",
    "thread 'tokio-runtime-worker' panicked at router/src/server.rs:88:10: Model \"org/model\" doesn't have a "
    "tokenizer",
])
def test_twenty_sixth_round_a_tokenizer_nowhere_to_be_found_is_a_tokenizer_error(line):
    assert diagnose(line).cls == "tokenizer_error"


def test_twenty_sixth_round_trap_a_tokenizer_fallback_notice_is_no_failure():
    # a logger's notice that it went on with another tokenizer file is a quiet record
    assert diagnose("WARNING 02-11 09:12:44 [tokenizer.py:102] Could not find tokenizer.json; using the slow "
                    "tokenizer from tokenizer.model").cls == "healthy"


# round 28's tuning logs: SGLang's request records quote the request's own text, whatever it says
_SGLANG_SERVED = ["[2026-02-09 14:45:01] The server is fired up and ready to roll!",
                  "[2026-02-09 14:45:22] Receive: obj=GenerateReqInput(rid='9b95', text='<|begin_of_text|>a novel in "
                  "which the king was killed\\nTraceback (most recent call last): pasted by the user\\nCUDA error: out of "
                  "memory', sampling_params={'max_new_tokens': 64})",
                  "[2026-02-09 14:45:25] Finish: obj=GenerateReqInput(rid='9b95', text='... the process was Killed "
                  "and core dumped ...'), out={'text': 'Aborted.', 'meta_info': {'finish_reason': 'stop'}}",
                  '[2026-02-09 14:45:25] INFO:     127.0.0.1:63576 - "POST /v1/chat/completions HTTP/1.1" 200 OK']


def test_twenty_eighth_round_a_request_record_quoting_alarming_text_is_no_failure():
    d = diagnose("\n".join(_SGLANG_SERVED))
    assert (d.cls, d.ready) == ("healthy", True)


def test_twenty_eighth_round_trap_a_death_after_the_request_records_is_still_a_failure():
    d = diagnose("\n".join(_SGLANG_SERVED + ["[2026-02-09 14:46:00] Received sigquit from a child process. It usually "
                                             "means the child failed."]))
    assert d.cls != "healthy"


# round 28's tuning logs: an SGLang process that failed after the ready line, in the newer release's words,
# against the shutdown an operator asked for
_SGLANG_READY = ["[2026-03-25 11:07:03] The server is fired up and ready to roll!",
                 '[2026-03-25 11:07:10] INFO:     127.0.0.1:40110 - "POST /generate HTTP/1.1" 200 OK']
_SCHEDULER_DIED = ["[2026-03-25 17:22:56] Scheduler hit an exception: Traceback (most recent call last):",
                   '  File "/opt/sglang/python/sglang/srt/constrained/base_grammar_backend.py", line 187, in get_cached',
                   "    entry = self.cache[key]",
                   "TypeError: unhashable type: 'dict'"]
_SIGQUIT_NEW = ["[2026-03-25 17:22:56] SIGQUIT received. signum=None, frame=None. It usually means one child failed."]


@pytest.mark.parametrize("tail", [_SCHEDULER_DIED + _SIGQUIT_NEW, _SCHEDULER_DIED, _SIGQUIT_NEW])
def test_twenty_eighth_round_an_sglang_process_that_failed_after_ready_is_a_failure(tail):
    d = diagnose("\n".join(_SGLANG_READY + tail))
    assert d.cls == "unknown"
    assert ("TypeError" if tail[0] is _SCHEDULER_DIED[0] else "SIGQUIT") in d.cause


@pytest.mark.parametrize("sigquit", [_SIGQUIT_NEW[0], "[2026-03-25 17:22:56] Received sigquit from a child process. It "
                                                     "usually means the child failed."])
def test_twenty_eighth_round_trap_the_shutdown_an_operator_asked_for_is_no_failure(sigquit):
    stop = ["[2026-03-25 17:22:55] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
            "[2026-03-25 17:22:56] Subprocess detokenizer (pid=31379) crashed with exit code -15. Triggering SIGQUIT "
            "for cleanup..."]
    assert diagnose("\n".join(_SGLANG_READY + stop + [sigquit])).cls == "healthy"


# round 28's tuning logs: a shell command line pasted with the log (a terminal session, a notebook) sets
# variables and flags; those settings are not what happened
@pytest.mark.parametrize("prompt", ["((sglang) ) [ops@gpu-node-3 ~]$ ", "ops@gpu-node-3:~/serve$ ", "(venv) $ ", "$ ", ""])
def test_twenty_eighth_round_a_pasted_command_line_is_no_evidence(prompt):
    command = (f"{prompt}NCCL_TIMEOUT=600 NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 python -m sglang.launch_server "
               "--model-path /models/m --speculative-algorithm EAGLE --speculative-num-steps 3 --tp 8")
    crash = ["[2026-02-27 11:31:26 TP3] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/opt/sglang/python/sglang/srt/disaggregation/mooncake/conn.py", line 91, in __init__',
             "    self.engine.initialize(hostname, 'P2PHANDSHAKE', 'tcp', device)",
             "RuntimeError: open: Address family not supported by protocol"]
    assert diagnose("\n".join([command] + crash)).cls == "unknown"


@pytest.mark.parametrize("line, cls", [
    # a background job's output glued after the prompt is output, not a command
    ("user@gpu-node:~$ torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda_oom"),
    ("(venv) $ RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error", "nccl_failure"),
    # the error a command printed, glued to the command in a report's prose (llamafactory#3648's form): the
    # assignments are settings, the exception after them is what happened, also right after CJK text
    ("CUDA_VISIBLE_DEVICES=0,1 API_PORT=8000 llamafactory-cli api x.yaml部署服务时报错ImportError: /usr/lib/"
     "flash_attn_2_cuda.cpython-39-x86_64-linux-gnu.so: undefined symbol: _ZNK3c106SymIntltEl", "kernel_abi_mismatch"),
    # a daemon's logfmt record (lower-case keys) is a log line, not VAR=value assignments
    ('Jun 01 10:00:00 gpu1 dockerd[1234]: level=error msg="failed to start container" error="nvidia-container-cli: '
     'initialization error: nvml error: driver/library version mismatch: unknown"', "driver_mismatch"),
])
def test_twenty_eighth_round_trap_output_after_a_prompt_and_logfmt_records_are_still_read(line, cls):
    d = diagnose(line)
    assert (d.cls, d.confidence >= 0.5) == (cls, True)


# round 29's tuning logs: a library's named logger and its level after a bracketed time is a record at that
# level; the host's OOM killer, named among a dead actor's possible causes, is no GPU out of memory
def test_an_exception_no_class_knows_glued_to_cjk_prose_is_still_a_failure():
    # "...部署服务时报错SomeError: ..." (no space after the Chinese words): the exception is what happened
    d = diagnose("llamafactory-cli api examples/inference/qwen_vllm.yaml部署服务时报错KeyError: "
                 "'model.layers.0.mlp.gate_up_proj.weight_scale_inv'")
    assert d.cls == "unknown" and "KeyError" in d.cause


def test_twenty_ninth_round_a_named_loggers_info_record_is_no_failure():
    log = ["[2025-11-19 10:57:44,552] LMCache INFO: Initializing usage context. (usage_context.py:357:lmcache.usage_context)",
           "[2025-11-19 10:57:52,515] LMCache INFO: Max Q error: 0.0078125 (positional_encoding.py:123:lmcache.blend)",
           "[2025-11-19 10:57:53,001] Mooncake WARNING: Error rate of the transfer probe: 0.0 (probe.py:40:mooncake)"]
    assert diagnose("\n".join(log)).cls == "healthy"
    # an ERROR record of the same logger is a failure
    failed = log + ["[2025-11-19 10:58:01,000] LMCache ERROR: Failed to connect to the cache server (remote.py:88)"]
    assert diagnose("\n".join(failed)).cls != "healthy"


def test_twenty_ninth_round_the_host_oom_killer_among_possible_causes_is_not_cuda_oom():
    ray = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. The actor is dead "
           "because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly "
           "exits with a connection error code 2. End of file. There are some potential root causes. (1) The process "
           "is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called.")
    assert diagnose(ray).cls == "unknown"
    # the GPU's own OOM in the same words' neighbourhood stays cuda_oom by its tokens
    assert diagnose("ray.exceptions.RayTaskError: worker 3 failed: OOM on device 0 during the forward").cls == "cuda_oom"


# --------------------------------------------------------------------------------------------
# the thirty-second round: healthy lines from the source that read as failures, by cause, and their traps

_V32_HEAD = ["INFO 11-20 09:01:02 [__init__.py:216] Automatically detected platform cuda.",
             "(APIServer pid=4100) INFO 11-20 09:01:05 [api_server.py:1839] vLLM API server version 0.11.0"]
_V32_TB = ["(EngineCore_DP0 pid=4200) Traceback (most recent call last):",
           '(EngineCore_DP0 pid=4200)   File "/opt/venv/lib/python3.11/site-packages/requests/adapters.py", line 667, in send',
           "(EngineCore_DP0 pid=4200)     resp = conn.urlopen(",
           "(EngineCore_DP0 pid=4200) requests.exceptions.ConnectionError: ('Connection aborted.', "
           "RemoteDisconnected('Remote end closed connection without response'))"]
_V32_OOM = ["(EngineCore_DP0 pid=4200) Traceback (most recent call last):",
            '(EngineCore_DP0 pid=4200)   File "/opt/venv/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", '
            "line 276, in determine_available_memory",
            "(EngineCore_DP0 pid=4200)     self.model_runner.profile_run()",
            "(EngineCore_DP0 pid=4200) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
            "has a total capacity of 23.55 GiB of which 1.02 GiB is free."]


def test_thirty_second_round_a_traceback_under_a_warning_record_behind_the_process_prefix_is_quiet():
    # Python logging's exc_info traceback under a WARNING record whose message announces it (ends with ':'):
    # vLLM's process prefix is on every line, and those lines go on the record, at its level
    log = _V32_HEAD + ["(EngineCore_DP0 pid=4200) WARNING 11-20 09:01:20 [config.py:695] Cannot connect to Hugging "
                       "Face Hub. Skipping file download for 'tokenizer_config.json':"] + _V32_TB + [
        "(EngineCore_DP0 pid=4200) INFO 11-20 09:01:21 [gpu_model_runner.py:2602] Starting to load model org/m..."]
    assert diagnose("\n".join(log)).cls == "healthy"
    assert [ln.level for ln in normalize("\n".join(log))][2:7] == ["WARNING"] * 5


def test_thirty_second_round_trap_a_crash_after_a_one_line_warning_behind_the_prefix_is_still_a_failure():
    # a record that announced nothing (no ':' at its end) is not continued by a traceback behind the prefix
    log = _V32_HEAD + ["(EngineCore_DP0 pid=4200) WARNING 11-20 09:01:20 [fp8.py:457] Failed to import DeepGemm "
                       "kernels."] + _V32_OOM
    assert diagnose("\n".join(log)).cls == "cuda_oom"


def test_thirty_second_round_trap_another_process_traceback_does_not_go_on_the_warning_record():
    log = _V32_HEAD + ["(APIServer pid=4100) WARNING 11-20 09:01:20 [config.py:695] Cannot connect to Hugging Face "
                       "Hub. Skipping file download for 'tokenizer_config.json':"] + _V32_OOM
    assert diagnose("\n".join(log)).cls == "cuda_oom"


def test_thirty_second_round_trap_an_error_record_after_the_warning_traceback_is_still_a_failure():
    log = _V32_HEAD + ["(EngineCore_DP0 pid=4200) WARNING 11-20 09:01:20 [config.py:695] Cannot connect to Hugging "
                       "Face Hub. Skipping file download for 'tokenizer_config.json':"] + _V32_TB + [
        "(EngineCore_DP0 pid=4200) ERROR 11-20 09:01:30 [core.py:708] EngineCore failed to start."] + _V32_OOM
    assert diagnose("\n".join(log)).cls == "cuda_oom"


_SG32_RESPONSES = ["[2026-11-20 09:02:10 DP0] Can not initialize OpenAIServingResponses, error: Traceback (most recent "
                   "call last):",
                   '  File "/opt/sglang/python/sglang/srt/entrypoints/http_server.py", line 273, in lifespan',
                   "    from sglang.srt.entrypoints.openai.serving_responses import (",
                   '  File "/opt/sglang/python/sglang/srt/entrypoints/openai/serving_responses.py", line 20, in <module>',
                   "    from openai.types.responses import (",
                   "ImportError: cannot import name 'ResponseReasoningItem' from 'openai.types.responses' "
                   "(/opt/venv/lib/python3.11/site-packages/openai/types/responses/__init__.py)",
                   "",
                   "[2026-11-20 09:02:10] INFO:     Application startup complete."]


def test_thirty_second_round_sglang_responses_api_not_initialised_is_a_warning_record():
    d = diagnose("\n".join(_SG32_RESPONSES))
    assert d.cls == "healthy"


def test_thirty_second_round_trap_another_component_not_initialised_with_a_traceback_is_a_failure():
    other = [_SG32_RESPONSES[0].replace("OpenAIServingResponses", "OpenAIServingChat")] + _SG32_RESPONSES[1:]
    assert diagnose("\n".join(other)).cls == "unknown"


def test_thirty_second_round_trap_a_crash_after_the_responses_warning_is_still_a_failure():
    log = _SG32_RESPONSES + _SCHEDULER_DIED + _SIGQUIT_NEW
    assert diagnose("\n".join(log)).cls == "unknown"


_SG32_RETRY_TB = ["Traceback (most recent call last):",
                  '  File "/opt/sglang/python/sglang/srt/utils/common.py", line 2573, in retry',
                  "    return fn()",
                  '  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/utils/_http.py", line 409, in '
                  "hf_raise_for_status",
                  "    raise _format(HfHubHTTPError, str(e), response) from e",
                  "huggingface_hub.errors.HfHubHTTPError: 502 Server Error: Bad Gateway for url: "
                  "https://huggingface.co/api/models/org/m"]


def test_thirty_second_round_a_traceback_sglang_retries_after_is_handled():
    log = (["[2026-11-20 09:03:00] server_args=ServerArgs(model_path='org/m', tp_size=1)"] + _SG32_RETRY_TB +
           ["[2026-11-20 09:03:02 TP0] retry() failed once (1th try, maximum 3 retries). Will delay 2.47s and retry. "
            "Error: 502 Server Error: Bad Gateway for url: https://huggingface.co/api/models/org/m",
            "[2026-11-20 09:03:05 TP0] Init torch distributed begin."])
    assert diagnose("\n".join(log)).cls == "healthy"


def test_thirty_second_round_trap_the_retry_given_up_and_not_caught_is_a_failure():
    # the last try raises; a caller that does not catch it fails, and no retry note follows that traceback
    log = (["[2026-11-20 09:03:00] server_args=ServerArgs(model_path='org/m', tp_size=1)"] + _SG32_RETRY_TB +
           ["[2026-11-20 09:03:02] retry() failed once (0th try, maximum 1 retries). Will delay 1.20s and retry. "
            "Error: 502 Server Error: Bad Gateway for url: https://huggingface.co/api/models/org/m",
            "Traceback (most recent call last):",
            '  File "/opt/sglang/python/sglang/srt/utils/common.py", line 2578, in retry',
            '    raise Exception(f"retry() exceed maximum number of retries.")',
            "Exception: retry() exceed maximum number of retries."])
    assert diagnose("\n".join(log)).cls == "unknown"


def test_thirty_second_round_trap_a_traceback_before_another_program_s_retry_words_is_a_failure():
    log = _SG32_RETRY_TB + ["Request failed; will retry in 5 seconds"]
    assert diagnose("\n".join(log)).cls != "healthy"


@pytest.mark.parametrize("line", [
    "[2026-11-20 09:04:00 TP3] Failed to import amdsmi with ImportError('libamd_smi.so: cannot open shared object file')",
    "[2026-11-20 09:04:00 DP1 TP1] Failed to import pynvml with ModuleNotFoundError(\"No module named 'pynvml'\")",
    "[2026-11-20 09:04:00 TP1] Failed to initialize QuickAllReduce: quick allreduce requires gfx942 or newer",
])
def test_thirty_second_round_sglang_optional_fast_paths_that_did_not_load_are_benign(line):
    log = ["[2026-11-20 09:03:59] server_args=ServerArgs(model_path='org/m', tp_size=4)", line,
           "[2026-11-20 09:04:01 TP0] Init torch distributed ends. mem usage=0.61 GB"]
    assert diagnose("\n".join(log)).cls == "healthy"


def test_thirty_second_round_traps_for_the_optional_imports():
    # vLLM's compiled ops not importing is kernel_abi_mismatch, not an optional library
    vllm_c = ("WARNING 11-20 09:04:00 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('/opt/venv/lib/"
              "python3.11/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')")
    assert diagnose(vllm_c + "\nAttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'").cls == \
        "kernel_abi_mismatch"
    # the NVML failure form is still one; another module's import failing with the same words is not benign
    assert diagnose("Failed to initialize NVML: Driver/library version mismatch").cls == "driver_mismatch"
    assert diagnose("[2026-11-20 09:04:00 TP0] Failed to import sgl_kernel with ModuleNotFoundError(\"No module named "
                    "'sgl_kernel'\")").cls != "healthy"
    # a real failure glued after the benign words on one line is not hidden (anchored at the end)
    assert diagnose("[2026-11-20 09:04:00 TP0] Failed to import pynvml with ModuleNotFoundError(\"No module named "
                    "'pynvml'\") RuntimeError: CUDA error: no kernel image is available for execution on the "
                    "device").cls != "healthy"


def test_thirty_second_round_a_progress_bar_glued_before_the_failure_gives_the_tier_no_tokens():
    # the round's benign optional-import note left the real r9700 log's first failure on a line a progress bar was
    # glued to ("Multi-thread loading shards: ... it/s][time TP1] Scheduler hit an exception"): the bar's "shards"
    # named checkpoint_incomplete; what failed is the record after it
    from noderig.diagnose.tokens import decisive_lines
    log = ["[2026-11-20 09:05:00] server_args=ServerArgs(model_path='org/m', tp_size=2)",
           "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s][2026-11-20 09:05:09 TP0] "
           "Scheduler hit an exception: Traceback (most recent call last):",
           '  File "/opt/sglang/python/sglang/srt/model_loader/loader.py", line 1, in load_model',
           "    x = narrow(y)",
           "RuntimeError: start (4) + length (4) exceeds dimension size (4)."]
    lines = normalize("\n".join(log))
    texts_, _ = decisive_lines(lines, parse_tracebacks(lines), 1)
    assert all("shards" not in t for _, t in texts_)
    assert any("Scheduler hit an exception" in t for _, t in texts_)  # the record itself is still read
    assert diagnose("\n".join(log)).cls == "unknown"
    # a failure line with no bar before it is read whole
    assert decisive_lines(normalize("OSError: 3 of 4 shards not found"), [], 0)[0] == [(0, "OSError: 3 of 4 shards not found")]


# the session's review: a warning's traceback keeps the warning's level, but the process's next traceback is its own
_HUB_WARNING = [
    "(APIServer pid=2211) WARNING 10-09 14:47:35 [config.py:695] Cannot connect to Hugging Face Hub. Skipping file "
    "download for 'generation_config.json':",
    "(APIServer pid=2211) Traceback (most recent call last):",
    '(APIServer pid=2211)   File "/usr/local/lib/python3.12/dist-packages/huggingface_hub/utils/_http.py", line 409, '
    "in hf_raise_for_status",
    "(APIServer pid=2211)     response.raise_for_status()",
    "(APIServer pid=2211) huggingface_hub.errors.HfHubHTTPError: 504 Server Error: Gateway Time-out for url: "
    "https://huggingface.co/api/models/org/m"]
_ENGINE_OOM = [
    "(APIServer pid=2211) Traceback (most recent call last):",
    '(APIServer pid=2211)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2900, '
    "in load_model",
    "(APIServer pid=2211)     self.model = model_loader.load_model(vllm_config=self.vllm_config)",
    "(APIServer pid=2211) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.1 GiB of which 1.2 GiB is free."]


def test_review_a_warnings_traceback_stays_a_warning():
    assert diagnose("\n".join(_HUB_WARNING)).cls == "healthy"


# (a warning ending in ":" and then, on the very next line, a traceback is read as the warning's own: that is the
# shape of Python logging's exc_info, and nothing in the lines tells the two apart)
@pytest.mark.parametrize("before", [_HUB_WARNING, _HUB_WARNING[:1] + ["(APIServer pid=2211) Process EngineCore_DP0:"]],
                         ids=["after its traceback", "after its colon and another line"])
@pytest.mark.parametrize("prefix", ["(APIServer pid=2211) ", "[rank0]: "])
def test_review_a_crash_right_after_a_warning_of_the_same_process_is_still_a_crash(before, prefix):
    log = [line.replace("(APIServer pid=2211) ", prefix) for line in before + _ENGINE_OOM]
    assert diagnose("\n".join(log)).cls == "cuda_oom"


def test_review_another_ranks_crash_before_a_retry_note_is_not_what_retry_caught():
    log = ["[2026-11-20 09:05:09 TP1] Scheduler hit an exception: Traceback (most recent call last):",
           '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2100, in run_scheduler_process',
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
           "",
           "[2026-11-20 09:05:09 TP0] retry() failed once (0th try, maximum 2 retries). Will delay 0.91s and retry. "
           "Error: HTTPError('504')"]
    assert diagnose("\n".join(log)).cls == "cuda_oom"


# A failure said by what runs the server rather than by the server: a Kubernetes pod's status, a launcher's
# report of a child's exit code in other words than "exited with code N", Ray's wrapped exception, Python's
# header for a thread's uncaught exception, a program's own "unhandled exception" record. Each alone is a
# failure nothing names (unknown), never a healthy start.
@pytest.mark.parametrize("line", [
    "  Warning  BackOff  2m (x12 over 8m)  kubelet  Back-off restarting failed container sglang in pod sglang-0",
    "sglang-0   0/1     CrashLoopBackOff   6 (2m ago)   14m",
    "      Reason:       OOMKilled",
    "      Exit Code:    137",
    "Child process unexpectedly failed with an exit code 1. pid=4182",
    "[2026-11-20 09:05:09] Subprocess scheduler_0 crashed with exit code -9",
    "Job failed: exit status 1",
    "ray.exceptions.RayTaskError(RuntimeError): ray::RayWorkerWrapper.execute_method() (pid=3812, ip=10.0.0.2)",
    "Exception in thread Thread-3 (_run_loop):",
    "[2026-11-20 09:05:09] Unhandled exception in the tokenizer manager. Exiting.",
    "Uncaught exception in the launcher, shutting down",
], ids=["k8s back-off", "k8s crash loop", "k8s OOMKilled", "k8s exit code", "child failed with an exit code",
        "subprocess crashed with a signal's code", "exit status", "Ray's wrapped exception", "thread's header",
        "unhandled exception record", "uncaught exception"])
def test_a_failure_reported_by_what_runs_the_server_is_a_failure(line):
    assert diagnose(line).cls == "unknown", line


# (traps: an exit status of 0, a restart policy's setting, a healthy pod's status, a setting that names the
# handler, a Ray actor's repr in an INFO record)
@pytest.mark.parametrize("line", [
    "      Exit Code:    0",
    "Job finished: exit status 0",
    "    restartPolicy: OnFailure",
    "sglang-0   1/1     Running   0          14m",
    "INFO 11-20 09:05:09 [ray_utils.py:300] Using RayWorkerWrapper(RuntimeError) for the workers",
    "[2026-11-20 09:05:09] Installed the uncaught-exception hook",
], ids=["exit code 0", "exit status 0", "restart policy", "running pod", "INFO record", "hook installed"])
def test_what_runs_the_server_reporting_no_failure_stays_healthy(line):
    assert diagnose(line).cls == "healthy", line


def test_an_oom_killed_container_after_ready_is_a_death():
    log = ["[2026-11-20 09:05:09] The server is fired up and ready to roll!",
           "      Reason:       OOMKilled"]
    assert diagnose("\n".join(log)).cls == "unknown"


# NVSHMEM's failure reports (DeepEP's internode setup): "<file>.h:63: non-zero status: 7: Connection timed out,
# exiting..." and "aborting due to error in nvshmemi_init_thread": a failure nothing names, never healthy
# (tests/fixtures/crashlogs/unknown/deepep-150-nvshmem-bootstrap-timeout.log)
@pytest.mark.parametrize("line", [
    "/opt/nvshmem/include/host/nvshmemx_api.h:63: non-zero status: 7: Connection timed out, exiting...",
    "/workspace/nvshmem_src/src/host/init/init.cu:1007: non-zero status: 2 nvshmem bootstrap failed",
    "aborting due to error in nvshmemi_init_thread",
], ids=["api header's status", "init's status", "aborting"])
def test_nvshmem_failure_reports_are_failures(line):
    assert diagnose(line).cls == "unknown", line


# KServe's own records, "<date> <time>.<ms> <pid> <logger> <LEVEL> [<file>:<func>():<line>] <message>" (its logging
# format): the level is the record's, so an ERROR record is a failure and an INFO record is none, whatever it says
KSERVE = "2024-07-01 07:28:04.488 1 kserve {level} [__main__.py:<module>():254] {message}"


@pytest.mark.parametrize("level, message, want", [
    ("ERROR", "Failed to start model server: integer division or modulo by zero", "unknown"),
    ("ERROR", "Failed to start model server: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda_oom"),
    ("INFO", "Retrying the download after an error: Connection reset by peer (exit code 1)", "healthy"),
    ("WARNING", "Failed to load the tokenizer's chat template, using the default", "healthy"),
], ids=["error record", "error record naming OOM", "info record", "warning record"])
def test_kserve_records_keep_their_level(level, message, want):
    line = KSERVE.format(level=level, message=message)
    assert normalize(line)[0].level == level
    assert diagnose(line).cls == want


# GPUStack derives the model's max length before it starts the server and logs any exception as an ERROR it goes
# on from ("Failed to derive max model length: <the exception>", then "Starting vLLM server"); whatever the
# exception names is no failure of the server (tests/fixtures/crashlogs/healthy/gpustack-3098-...)
@pytest.mark.parametrize("exception", [
    "The checkpoint you are trying to load has model type `qwen3_vl` but Transformers does not recognize this "
    "architecture.",
    "Can't load tokenizer for '/models/x'. If you were trying to load it from 'https://huggingface.co/models'",
    "CUDA out of memory. Tried to allocate 20.00 MiB",
], ids=["unknown architecture", "tokenizer", "OOM"])
def test_gpustacks_max_length_note_is_a_note_it_goes_on_from(exception):
    log = [f"2025-11-01 17:35:57.955760+08:00 - gpustack.worker.backends.vllm - ERROR - Failed to derive max model "
           f"length: {exception}",
           "2025-11-01 17:35:57.955979+08:00 - gpustack.worker.backends.vllm - INFO - Starting vLLM server: "
           "/var/lib/gpustack/bin/vllm_v0.11.0",
           "(APIServer pid=1951) INFO 11-01 17:36:05 [api_server.py:1839] vLLM API server version 0.11.0"]
    assert diagnose("\n".join(log)).cls == "healthy"
    assert diagnose("\n".join(line.replace("+08:00", "") for line in log)).cls == "healthy"  # the relay peeled


def test_the_same_exception_failing_the_server_is_still_its_class():
    log = ["(APIServer pid=1951) INFO 11-01 17:36:05 [api_server.py:1839] vLLM API server version 0.11.0",
           "ValueError: The checkpoint you are trying to load has model type `qwen3_vl` but Transformers does not "
           "recognize this architecture."]
    assert diagnose("\n".join(log)).cls == "unsupported_architecture"


# A failure said in prose, by what failed: the server, its engine, a worker or process, the model's loading, the
# start itself ("The server failed to start", "Engine core initialization failed", "Server process terminated
# unexpectedly", "An error occurred during model loading"). SGLang writes its warnings without a level, and many
# say "failed" of something the server goes on without; these name the server's own start, so they count.
@pytest.mark.parametrize("line", [
    "An error occurred during model loading.",
    "[2026-05-01 10:00:00 TP0] Encountered an error while loading the weights",
    "Model loading failed",
    "The server failed to start",
    "Server process terminated unexpectedly",
    "[2026-05-01 10:00:00] Failed to launch the server",
    "Engine core initialization failed",
    "Server exited unexpectedly with return code 1",
    "Worker process crashed",
    "Startup failed, shutting down",
], ids=["an error occurred", "encountered an error", "model loading failed", "server failed to start",
        "terminated unexpectedly", "failed to launch the server", "initialization failed", "return code",
        "worker crashed", "startup failed"])
def test_a_failure_of_the_start_said_in_prose_is_a_failure(line):
    assert diagnose(line).cls == "unknown", line


def test_a_failure_said_in_prose_is_named_by_its_key_tokens():
    # once it is a failure, the key-token tier reads it like any failure line (below a signature's confidence)
    d = diagnose("[2026-05-01 10:00:00 TP0] Encountered an error while capturing CUDA graphs")
    assert (d.cls, d.confidence < 0.5) == ("cuda_graph_capture", True)


# (traps: what SGLang and its libraries say at a normal start about something optional that failed, a retry
# that will be made, a server that failed nothing)
@pytest.mark.parametrize("line", [
    "[2026-05-01 10:00:00 TP0] Failed to import deep_gemm, falling back to triton kernels",
    "[2026-05-01 10:00:00] Failed to get the GPU's memory bandwidth; using the default estimate",
    "[2026-05-01 10:00:00 TP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=12.00 GB",
    "Health check failed, retrying in 2 s (the server is still starting)",
    "[2026-05-01 10:00:00] Server process started with pid 1234",
    "INFO 05-01 10:00:00 [core.py:100] An error occurred during model loading would be reported here",
], ids=["optional import", "optional probe", "load end", "health check retry", "process started", "INFO record"])
def test_optional_failures_said_in_prose_stay_healthy(line):
    assert diagnose(line).cls == "healthy", line
# The thirty-sixth round: the kernels, NCCL, CUDA graphs and checkpoints from the source, by cause. Each named log is
# in other words or another prefix than the round's probes; each trap keeps the verdict it had before the round.

def test_thirty_sixth_round_deepgemms_jit_failing_in_any_of_its_compilers_is_a_deepgemm_jit_failure():
    named = [
        # an NVRTC check on another call, under a vLLM worker prefix
        "(Worker_TP3 pid=411) ERROR 11-05 10:00:00 [multiproc_executor.py:671] RuntimeError: NVRTC error "
        "(csrc/jit/compiler.hpp:318): NVRTC_ERROR_COMPILATION",
        # the include parser's other refusal, pasted alone under a journal prefix
        "Nov 05 10:00:00 gpu-node-1 python3[411]: RuntimeError: Assertion error (csrc/jit/include_parser.hpp:64): "
        "Circular include may occur: /opt/deep_gemm/include/deep_gemm/common/utils.cuh",
        # DeepGEMM's printed nvcc failure whatever nvcc said, under SGLang's DP/TP prefix
        "[2026-11-05 10:00:00 DP0 TP2] NVCC compilation failed: nvcc fatal   : Value 'sm_103a' is not defined for "
        "option 'gpu-architecture'",
        # the import-time CUDA-home assert, SGLang's record of a bare AssertionError
        "[2026-11-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/deep_gemm/__init__.py", line 120, in _find_cuda_home\n'
        "    assert cuda_home is not None\n"
        "AssertionError",
    ]
    assert_named_by_a_signature(named, "deepgemm_jit_failure")
    # traps: DeepGEMM's own notes, printed while it goes on, and a debug print of its NVRTC options
    assert_each_healthy(["Warning: please use at least NVCC 12.9 for the best DeepGEMM performance",
                         "Compiling JIT runtime with NVRTC options: -std=c++20 --gpu-architecture=sm_90a -default-device",
                         "NVRTC log: kernel.cu(12): warning #177-D: variable \"x\" was declared but never referenced"])
    # an assert raised in deep_gemm/__init__.py about something else is not the CUDA home
    other = ('Traceback (most recent call last):\n  File "/opt/venv/lib/python3.12/site-packages/deep_gemm/__init__.py", '
             "line 90, in set_num_sms\n    assert 0 < num_sms <= 132\nAssertionError")
    assert diagnose(other).cls != "deepgemm_jit_failure"


def test_thirty_sixth_round_a_kernel_requiring_the_cute_dsl_is_cute_dsl_version_skew():
    named = [
        # another FlashInfer check, without a version, under a compose prefix
        "sglang-1  | ValueError: group_gemm_fp8_nt_groupwise with backend='cute-dsl' requires nvidia-cutlass-dsl",
        # a wrapped ERROR record of vLLM naming the package with "the"
        "(EngineCore_DP0 pid=7) ERROR 11-05 10:00:00 [core.py:708] RuntimeError: the MXFP8 MoE kernel requires the "
        "nvidia-cutlass-dsl package to be importable",
    ]
    assert_named_by_a_signature(named, "cute_dsl_version_skew")
    # traps: pip's resolver notices at install time and a help text that names the package stay healthy
    assert_each_healthy(["flashinfer-python 0.6.1 requires nvidia-cutlass-dsl, which is not installed.",
                         "flashinfer-python 0.6.1 requires nvidia-cutlass-dsl>=4.6.0, but you have nvidia-cutlass-dsl 4.5.2 "
                         "which is incompatible.",
                         "  --moe-runner-backend {auto,triton,cutlass,flashinfer_cutedsl}  MoE runner backend "
                         "(flashinfer_cutedsl requires nvidia-cutlass-dsl)"])


def test_thirty_sixth_round_the_token_tier_leaves_flash_attn_cute_to_its_signature():
    from noderig.diagnose.engine import _first_failure
    from noderig.diagnose.tokens import name_by_tokens

    # another DSL submodule, missing while FA4's backward kernels import (the probe's is a forward one)
    log = ('Traceback (most recent call last):\n'
           '  File "/opt/venv/lib/python3.12/site-packages/flash_attn/cute/flash_bwd_sm100.py", line 14, in <module>\n'
           '    import cutlass.utils.blackwell_helpers as sm100_utils\n'
           "ModuleNotFoundError: No module named 'cutlass.utils.blackwell_helpers'")
    cat = load_catalog()
    lines = normalize(log)
    tbs = parse_tracebacks(lines)
    first = _first_failure(lines, cat, set().union(*(tb.code_lines for tb in tbs)), tbs)
    verdict = name_by_tokens(lines, tbs, first, cat)
    assert verdict is None or verdict.cls != "cute_dsl_version_skew"
    assert diagnose(log).cls == "flash_attn_cute_missing"


def test_thirty_sixth_round_nccls_transport_warnings_without_failure_words_are_nccl_failures():
    named = [
        # the IB completion error of NCCL's GIN path, under torch's rank prefix
        "[rank3]:gpu-node-2:811:902 [3] transport/net_ib/gin.cc:749 NCCL WARN NET/IB/GIN: Got completion from "
        "peer 10.1.0.9<40411> with status=5 opcode=0 len=0 vendor err 249 (Recv) hca mlx5_0",
        # the bootstrap's refusal under a vLLM worker prefix
        "(Worker_TP0 pid=77) gpu-node-2:77:77 [0] NCCL WARN Bootstrap : no socket interface found",
    ]
    assert_named_by_a_signature(named, "nccl_failure")
    # the binding's missing library names the class only as a symptom, when something failed
    log = ["ERROR 11-05 10:00:00 [pynccl_wrapper.py:344] Failed to load NCCL library from /opt/nccl/libnccl.so.2.",
           "RuntimeError: Engine core initialization failed. See root cause above."]
    assert diagnose("\n".join(log)).cls == "nccl_failure"
    # traps: NCCL's INFO lines for a transport it does not use, and a start that goes on past the binding's record
    assert_each_healthy(["gpu-node-2:77:77 [0] NCCL INFO NET/IB : No device found.",
                         "gpu-node-2:77:77 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.8<0>"])
    went_on = ["ERROR 11-05 10:00:00 [pynccl_wrapper.py:344] Failed to load NCCL library from libnccl.so.2.",
               "INFO 11-05 10:00:09 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000"]
    assert diagnose("\n".join(went_on)).cls == "healthy"


def test_thirty_sixth_round_the_runtimes_and_torchs_capture_errors_are_cuda_graph_capture():
    named = [
        # the capture-implicit text from a kernel library's own check, under SGLang's TP prefix
        "[2026-11-05 10:00:00 TP1] CUDA error: operation would make the legacy stream depend on a capturing "
        "blocking stream (at /workspace/csrc/moe/moe_align.cu:211)",
        # the captured-event text through torch, alone under a compose prefix
        "vllm-1  | torch.AcceleratorError: CUDA error: operation not permitted on an event last recorded in a "
        "capturing stream",
        # torch's capture_begin check in a vLLM EngineCore record
        "(EngineCore_DP0 pid=7) ERROR 11-05 10:00:00 [core.py:708] RuntimeError: CUDA graphs must be captured on a "
        "non-default stream. (However, after capture, it's ok to replay them on the default stream.)",
    ]
    assert_named_by_a_signature(named, "cuda_graph_capture")
    # traps: the engines' capture progress and torch's warning about an empty graph stay healthy
    assert_each_healthy(["INFO 11-05 10:00:00 [gpu_model_runner.py:3480] Capturing CUDA graphs (mixed prefill-decode, "
                         "PIECEWISE): 100%|##########| 67/67 [00:05<00:00, 12.1it/s]",
                         "[2026-11-05 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.",
                         "W1105 10:00:00.123000 77 torch/cuda/graphs.py:88] The CUDA Graph is empty. This usually means that "
                         "the graph was attempted to be captured on wrong device or stream."])


def test_thirty_sixth_round_checkpoint_readers_on_a_damaged_file_are_checkpoint_corrupt():
    named = [
        # torch's zip reader on another record, under SGLang's TP prefix
        "[2026-11-05 10:00:00 TP3] RuntimeError: PytorchStreamReader failed reading file data/0: file read failed",
        # safetensors' metadata error from deserialize(), alone under a journal prefix
        "Nov 05 10:00:00 gpu-node-1 python3[411]: safetensors_rust.SafetensorError: Error while deserializing: "
        "incomplete metadata, file not fully covered",
        # a Rust loader's header error in another wording
        "Error: SafeTensorError(InvalidHeaderDeserialization) while reading the header of model.safetensors",
    ]
    assert_named_by_a_signature(named, "checkpoint_corrupt")
    # traps: a tensor a file does not hold is not a damaged header; a file missing stays checkpoint_incomplete
    assert diagnose("safetensors_rust.SafetensorError: File does not contain tensor lm_head.weight").cls \
        != "checkpoint_corrupt"
    assert diagnose("FileNotFoundError: No such file or directory: /models/x/model-00002-of-00004.safetensors").cls \
        == "checkpoint_incomplete"


def test_thirty_sixth_round_sglangs_port_wait_that_times_out_is_port_in_use():
    named = [
        # another internal port, under SGLang's DP prefix and a compose prefix
        "sglang-1  | [2026-11-05 10:00:00 DP1] ValueError: detokenizer_port at 30102 is not available in 60 seconds. "
        "detokenizer_port is used by a process already. pid=411",
    ]
    assert_named_by_a_signature(named, "port_in_use")
    # trap: the note while it waits, on a start that has not failed
    assert diagnose("[2026-11-05 10:00:00] port 30011 is in use. Waiting for 15 seconds for nccl_port to be "
                    "available. nccl_port is used by a process already.").cls == "healthy"
# Thirty-third round: the model side from the source, by cause. Each test names the cause in other words and other
# prefixes than the round's probes (tests/fixtures/crashlogs/*/src33-*.log), and keeps its traps.

_SP = "/usr/local/lib/python3.12/dist-packages"


def test_thirty_third_round_a_configuration_exception_opening_on_a_speculative_setting_or_method_is_speculative_config():
    named = [
        # a --speculative-* flag, under vLLM's engine-core prefix
        "(EngineCore_DP0 pid=812) ERROR 11-05 10:00:00 [core.py:700] ValueError: --speculative-num-draft-tokens must be "
        "at least 2 for DFLASH, got 1.",
        # "speculative method" in SGLang's level-less scheduler record
        "[2026-11-05 10:00:00 TP1] Scheduler hit an exception: NotImplementedError: Speculative method 'uno' is not "
        "available on this build.",
        # the method's name opening the message, behind a journal prefix
        "Nov 05 10:00:00 gpu-07 python3[4411]: RuntimeError: DDTREE requires --page-size 1 (got 64).",
        "AssertionError: EAGLE3 draft hidden size 4096 does not match the target's 7168",
        # a checkpoint without the method's draft weights, another model's wording
        "ValueError: The Qwen3 checkpoint does not contain MTP weights",
        # a RuntimeError raised in vLLM's spec_decode/ that refuses what it was given, whatever its words
        "\n".join([
            "Traceback (most recent call last):",
            f'  File "{_SP}/vllm/v1/spec_decode/eagle.py", line 90, in __init__',
            "    raise RuntimeError(",
            "RuntimeError: The proposer requires the target to expose auxiliary hidden states.",
        ]),
    ]
    assert_named_by_a_signature(named, "speculative_config")
    # traps: a help text, a server_args dump and vLLM's INFO note name the same words and nothing failed
    assert_each_healthy(["  --speculative-num-steps SPECULATIVE_NUM_STEPS  The number of steps sampled from draft model in "
                         "Speculative Decoding.",
                         "[2026-11-05 10:00:00] server_args=ServerArgs(model_path='/models/k2', speculative_algorithm='DFLASH', "
                         "speculative_num_draft_tokens=16, speculative_draft_model_path='/models/k2-dflash')",
                         "INFO 11-05 10:00:00 [speculative.py:300] Overriding draft model max model len from 262144 to 131072"])
    # traps: the KV cache refusal that mentions speculative decoding late in its message keeps its class; a CUDA error
    # raised in the speculative code is not a configuration; a context length refused stays the command line
    assert diagnose("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.8. "
                    "Raise --mem-fraction-static above 0.850 (minimum viable = 1 - available/pre = 0.8490). If using "
                    "speculative decoding, draft weights are now counted.").cls == "kv_cache_insufficient"
    assert diagnose("\n".join([
        "Traceback (most recent call last):",
        f'  File "{_SP}/sglang/srt/speculative/eagle_worker_v2.py", line 610, in forward_batch_generation',
        "    torch.cuda.synchronize()",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ])).cls != "speculative_config"


def test_thirty_third_round_a_loader_with_no_implementation_for_the_architecture_is_unsupported_architecture():
    named = [
        "(APIServer pid=1) ValueError: The Transformers implementation of 'Ovis2_5' is not compatible with vLLM.",
        "ERROR 11-05 10:00:00 [engine.py:389] ValueError: InternVLForConditionalGeneration has no vLLM implementation "
        "and the Transformers implementation is not compatible with vLLM. Try setting VLLM_USE_V1=0.",
        "sglang-1  | ValueError: Cannot find model module. 'Foo' is not a registered model in the Transformers library",
        "(EngineCore_DP0 pid=9) ERROR 11-05 10:00:00 [core.py:700] ValueError: Model architectures "
        "['Qwen3_5MoeForConditionalGeneration'] failed to be inspected. Please check the logs for more details.",
    ]
    assert_named_by_a_signature(named, "unsupported_architecture")
    # traps: the fallback note and the explicit-impl note, on a server that goes on
    assert_each_healthy(["[2026-11-05 10:00:00 TP0] Ovis2_5 has no SGLang implementation, falling back to Transformers "
                         "implementation. Some features may not be supported and performance may not be optimal.",
                         "WARNING 11-05 10:00:00 [utils.py:190] The Transformers implementation of Ovis reports it is not "
                         "backend-compatible (_supports_attention_backend=False). Proceeding anyway because "
                         "--model-impl=transformers was explicitly requested."])


def test_thirty_third_round_sglangs_tokenizer_and_template_loaders_are_tokenizer_error():
    named = [
        "RuntimeError: Chat template /templates/kimi.jinja is not a valid chat template file path.",
        "(EngineCore_DP0 pid=9) ERROR 11-05 10:00:00 [core.py:700] ValueError: Cannot use the slow tokenizer in fast "
        "tokenizer mode.",
        "ImportError: The fastokens package is required when --tokenizer-backend fastokens is set.",
        "[2026-11-05 10:00:00 TP0] RuntimeError: Retry with use_fast=False for moonshotai/Kimi-K2.6 also failed "
        "(initial load returned TokenizersBackend): expected str",
        # no chat template in a run that failed on it (nothing decisive: the symptom names the class at 0.6)
        "\n".join([
            "Traceback (most recent call last):",
            '  File "/srv/eval/run.py", line 12, in <module>',
            "    text = tokenizer.apply_chat_template(messages, tokenize=False)",
            "ValueError: Cannot use chat template functions because tokenizer.chat_template is not set and no template "
            "argument was passed!",
        ]),
    ]
    assert_named_by_a_signature(named, "tokenizer_error")
    # traps: the template loader's note, the flags' help texts
    assert_each_healthy(["[2026-11-05 10:00:00] Loading chat template from argument: kimi.jinja",
                         "  --tokenizer-mode {auto,slow}  Tokenizer mode. 'auto' will use the fast tokenizer if available, and "
                         "'slow' will always use the slow tokenizer.",
                         "  --tokenizer-backend {huggingface,fastokens}  Which tokenizer backend to use. fastokens requires the "
                         "fastokens package."])
    # trap: a chat request refused after SGLang's ready line is the request's error
    d = diagnose("\n".join([
        "[2026-11-05 10:00:00] The server is fired up and ready to roll!",
        "[2026-11-05 10:00:09] Error in request: ValueError: Cannot use chat template functions because "
        "tokenizer.chat_template is not set and no template argument was passed!",
    ]))
    assert (d.cls, d.ready) == ("healthy", True)


def test_thirty_third_round_sglangs_pools_that_hold_no_request_are_kv_cache_insufficient():
    named = [
        "[2026-11-05 10:00:00 TP0] Scheduler hit an exception: RuntimeError: SWA pool cap (8192 tokens, 0.50 GiB) "
        "leaves no room for the full KV pool within the available 0.41 GiB. Reduce --max-running-requests, or "
        "increase --mem-fraction-static.",
        "sglang-1  | RuntimeError: Mamba state cache is too small to serve any request. Try raising "
        "--mem-fraction-static.",
        "RuntimeError: [unified-memory-pool] MHATokenToKVPool: byte budget 1024 cannot fit a single request. "
        "Raise --mem-fraction-static or lower the context length.",
    ]
    assert_named_by_a_signature(named, "kv_cache_insufficient")
    # trap: the pool's warning that one full-length request will not fit, on a server that goes on
    assert diagnose("[2026-11-05 10:00:00 TP0] KV pool holds 30000 tokens, fewer than --context-length 131072. One "
                    "full-length request cannot fit, so long requests will be refused or truncated at serving time. "
                    "Lower --context-length, raise --mem-fraction-static, or free memory taken before the pool is "
                    "sized.").cls == "healthy"


def test_thirty_third_round_limits_refused_against_each_other_are_invalid_server_args():
    named = [
        "(APIServer pid=77) ERROR 11-05 10:00:00 [api_server.py:1912] ValueError: max_num_batched_tokens (2048) is "
        "smaller than max_model_len (32768). This effectively limits the maximum sequence length to "
        "max_num_batched_tokens and makes vLLM reject longer sequences.",
        "ValueError: max_num_batched_tokens (4096) is smaller than max_model_len (4608).",
        "  Value error, max_num_seqs (1024) cannot be greater than the max_model_len (512). [type=value_error]",
        "sglang-1  | ValueError: Warning: User-specified context_length (200000) is greater than the derived "
        "context_length (163840). This may lead to incorrect model outputs or CUDA errors. To allow overriding this "
        "maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    ]
    assert_named_by_a_signature(named, "invalid_server_args")
    # traps: vLLM's warning that one limit exceeds the product, its chunked-prefill note, SGLang's warning when the
    # override is allowed (the same sentence without the hint; the server goes on)
    assert_each_healthy(["WARNING 11-05 10:00:00 [scheduler.py:280] max_num_batched_tokens (65536) exceeds max_num_seqs * "
                         "max_model_len (32768). This may lead to unexpected behavior.",
                         "INFO 11-05 10:00:00 [scheduler.py:210] Chunked prefill is enabled with max_num_batched_tokens=8192.",
                         "[2026-11-05 10:00:00] Warning: User-specified context_length (300000) is greater than the derived "
                         "context_length (131072). This may lead to incorrect model outputs or CUDA errors. Note that the "
                         "derived context_length may differ from max_position_embeddings in the model's config."])


def test_thirty_third_round_trap_a_draft_that_ran_out_of_memory_is_not_a_speculative_configuration():
    # the same opening words (the method's name, its draft) but the draft's pool ran out of memory: not the speculative
    # configuration (before the exclusion both lines were named speculative_config at 0.9)
    for line in ["[2026-11-05 10:07:02 TP0] Scheduler hit an exception: RuntimeError: DDTREE draft OOM when allocating 128 "
                 "block tokens.",
                 "RuntimeError: DFLASH draft out of memory while allocating the block buffers"]:
        assert diagnose(line).cls != "speculative_config", line
    # and a refusal by the same worker still is
    assert_named_by_a_signature(["sglang-1  | RuntimeError: DDTREE requires --speculative-num-draft-tokens to match the "
                                 "draft's block size."], "speculative_config")


# A target model class without the interface the speculative method drafts from (vLLM's gpu model runner raises
# "Model does not support EAGLE3 interface" when supports_eagle3(model) is false)
@pytest.mark.parametrize("line", [
    "RuntimeError: Model does not support EAGLE3 interface",
    "(EngineCore_DP0 pid=311) ERROR 11-20 09:05:09 [core.py:708] RuntimeError: Model does not support EAGLE "
    "interface",
    "[2026-11-20 09:05:09] ValueError: EAGLE3 is not supported for this model (KimiLinearForCausalLM)",
    "RuntimeError: The target model does not support the MTP interface",
], ids=["vLLM's words", "vLLM's record, EAGLE", "another wording", "MTP"])
def test_a_target_without_the_drafting_interface_is_a_speculative_config(line):
    assert diagnose(line).cls == "speculative_config", line


def test_the_drafting_interface_named_in_an_info_record_is_no_failure():
    line = "INFO 11-20 09:05:09 [gpu_model_runner.py:2300] Model supports EAGLE3 interface: aux hidden states on"
    assert diagnose(line).cls == "healthy"


# A traceback cut inside the speculative worker: while the worker is built (the scheduler's constructor), the
# draft model and its settings are what failed; while serving (the scheduler's event loop runs every batch
# through the speculative worker), the cut says nothing of the settings (round 37: a CUBLAS failure and a GPU
# Xid came out speculative_config)
SPEC_CUT_HEAD = ["[2026-02-20 03:26:00 TP1] Scheduler hit an exception: Traceback (most recent call last):",
                 '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 3160, in run_scheduler_process']
SPEC_CUT_BUILD = ['  File "/sgl/python/sglang/srt/managers/scheduler.py", line 327, in __init__',
                  "    self.draft_worker = EAGLEWorker(",
                  '  File "/sgl/python/sglang/srt/speculative/eagle_worker.py", line 120, in __init__',
                  "    self.draft_model_runner = ModelRunner("]
SPEC_CUT_SERVE = ['  File "/sgl/python/sglang/srt/managers/scheduler.py", line 1153, in event_loop_overlap',
                  "    batch_result = self.run_batch(batch)",
                  '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2341, in run_batch',
                  "    batch_result = self.model_worker.forward_batch_generation(",
                  '  File "/sgl/python/sglang/srt/speculative/eagle_worker_v2.py", line 667, in forward_batch_generation',
                  "    self.draft_worker._draft_extend_for_prefill("]


@pytest.mark.parametrize("frames, want", [(SPEC_CUT_BUILD, "speculative_config"), (SPEC_CUT_SERVE, "unknown")],
                         ids=["building the worker", "serving a batch"])
def test_a_cut_in_the_speculative_worker_names_the_class_only_while_it_is_built(frames, want):
    assert diagnose("\n".join(SPEC_CUT_HEAD + frames)).cls == want


def test_not_within_is_read_from_the_catalog(tmp_path):
    toml = (tmp_path / "c.toml")
    toml.write_text('version = 1\n[[class]]\nid = "x"\ntitle = "t"\nmeaning = "m"\nfix = "f"\nevidence = ["x"]\ndecisive = true\n'
                    "exceptions = [{ type = 'RuntimeError', raised_in = '/spec/', not_within = 'loop$' }]\n")
    sig = load_catalog(toml).get("x").exceptions[0]
    assert sig.not_within.pattern == "loop$" and sig.cut
# the thirty-fourth round: the GPU, driver and toolkit side from the source, by cause (each case in other words and
# prefixes than the round's probes), and the lines that look like them on a start that goes on

_ABORT_TAIL = ["terminate called after throwing an instance of 'c10::Error'",
               "  what():  CUDA error: an illegal instruction was encountered"]


def test_thirty_fourth_round_a_binary_with_no_code_for_this_gpu_is_unsupported_gpu_arch():
    named = [
        # CUTLASS's printed refusal for another arch-specific target, behind a vLLM process prefix, then an abort
        "\n".join(["(EngineCore_DP0 pid=412) ERROR : Arch conditional MMA instruction used without targeting "
                   "sm100a compute capability. Aborting."] + _ABORT_TAIL),
        # the driver API's enum from another printer, and HIP's pasted alone under a journal prefix
        "cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU",
        'Mar 04 08:00:00 node1 python3[77]: "hipErrorNoBinaryForGpu: Unable to find code object for all current '
        'devices!"',
        # CUDA's "invalid device function" in torch's words, and a C++ engine's runtime check
        "[2026-03-04 08:00:00 TP1] torch.AcceleratorError: CUDA error: invalid device function",
        "[TM][ERROR] CUDA runtime error: invalid device function /lmdeploy/src/turbomind/kernels/"
        "sampling_topp_kernels.cu:1077",
    ]
    assert_named_by_a_signature(named, "unsupported_gpu_arch")


def test_thirty_fourth_round_trap_arch_words_on_a_start_that_goes_on_or_another_device_error():
    # a WARNING record that a kernel failed and the server fell back: the server goes on
    assert diagnose("WARNING 03-04 08:00:00 [fused_moe.py:120] Triton kernel failed with HIP error: invalid device "
                    "function; falling back to the torch implementation").cls == "healthy"
    # another device error is not an arch refusal
    assert diagnose("RuntimeError: HIP error: invalid device ordinal").cls not in ("unsupported_gpu_arch", "healthy")


def test_thirty_fourth_round_a_driver_the_runtime_cannot_use_is_driver_mismatch():
    named = [
        # dmesg's own form (no journal prefix), then a failure that names nothing
        "[ 5080.898738] NVRM: API mismatch: the client has the version 545.29.06, but\n"
        "               NVRM: this kernel module has the version 550.54.14.  Please\n"
        "RuntimeError: No CUDA GPUs are available",
        # the toolkit's stub libcuda in another printer's words, and by the enum from cuInit
        "ggml_cuda_init: failed to initialize CUDA: CUDA driver is a stub library",
        "cuInit returned CUDA_ERROR_STUB_LIBRARY",
        # Triton's libcuda lookup under a vLLM process prefix
        "(EngineCore_DP0 pid=9) ERROR 03-04 08:00:00 [core.py:708] AssertionError: libcuda.so cannot found!",
    ]
    assert_named_by_a_signature(named, "driver_mismatch")


def test_thirty_fourth_round_trap_driver_lines_on_a_start_that_goes_on():
    assert diagnose("Mar 04 08:00:00 node1 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.133.20  "
                    "Tue Mar  4 00:00:00 UTC 2026").cls == "healthy"
    # an API mismatch another client met before the server came up: the server was ready after it
    d = diagnose("[ 12.000001] NVRM: API mismatch: the client has the version 535.247.01, but\n"
                 "[2026-03-04 08:00:09] The server is fired up and ready to roll!")
    assert (d.cls, d.ready) == ("healthy", True)


def test_thirty_fourth_round_a_toolkit_that_does_not_fit_the_build_is_toolkit_misconfigured():
    named = [
        # the host-compiler bound under SGLang's prefix, another compiler's name, and the lower bound
        "[2026-03-04 08:00:00 TP0] RuntimeError: The current installed version of x86_64-conda-linux-gnu-c++ "
        "(14.3.0) is greater than the maximum required version by CUDA 12.8.",
        "RuntimeError: The current installed version of g++ (4.8.5) is less than the minimum required version by "
        "CUDA 11.8 (6.0.0). Please make sure to use an adequate version of g++ (>=6.0.0, <12.0).",
        # Triton's tool lookup under vLLM's EngineCore record
        "(EngineCore_DP0 pid=5) ERROR 03-04 08:00:00 [core.py:708] RuntimeError: Cannot find ptxas",
    ]
    assert_named_by_a_signature(named, "toolkit_misconfigured")


def test_thirty_fourth_round_trap_toolkit_notes_the_build_goes_on_from():
    assert_each_healthy([
        "/usr/local/lib/python3.12/dist-packages/torch/utils/cpp_extension.py:480: UserWarning: There are no g++ "
        "version bounds defined for CUDA version 12.8",
        "/usr/local/lib/python3.12/dist-packages/torch/utils/cpp_extension.py:421: UserWarning: The detected CUDA "
        "version (12.8) has a minor version mismatch with the version that was used to compile PyTorch (12.6). Most "
        "likely this shouldn't be a problem.",
        "INFO 03-04 08:00:00 [envs.py:40] TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas",
    ])


def test_thirty_fourth_round_the_shell_not_finding_nvcc_is_nvcc_not_found():
    named = [
        "bash: line 1: nvcc: command not found",
        "sglang-1  | sh: 1: nvcc: not found",
    ]
    assert_named_by_a_signature(named, "nvcc_not_found")
    # a PATH-style CUDA_HOME stays the toolkit's (by priority on the same line)
    assert diagnose("/bin/sh: 1: :/usr/local/cuda-12.8/bin/nvcc: not found").cls == "toolkit_misconfigured"


def test_thirty_fourth_round_trap_a_library_noting_nvcc_missing_and_going_on_is_not_nvcc_not_found():
    # FlashInfer's capability probe logs this and the server goes on (a tuning log's failure was elsewhere)
    assert diagnose("Failed to get device capability: nvcc not found and PyTorch is not built with CUDA support. "
                    "Could not determine CUDA version..").cls != "nvcc_not_found"


def test_thirty_fourth_round_binaries_built_for_another_cuda_or_torch_are_kernel_abi_mismatch():
    named = [
        # torchaudio's check in its own words
        "RuntimeError: Detected that PyTorch and TorchAudio were compiled with different CUDA versions. PyTorch has "
        "CUDA version 12.1 whereas TorchAudio has CUDA version 11.8. Please install the TorchAudio version that "
        "matches your PyTorch version.",
        # xFormers' warning under SGLang's prefix, then its dispatcher refusing the operator
        "[2026-03-04 08:00:00 TP0] WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built "
        "for:\n"
        "    PyTorch 2.6.0+cu124 with CUDA 1204 (you have 2.7.1+cu126)\n"
        "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n"
        "`cutlassF-pt` is not supported because:\n"
        "    xFormers wasn't build with CUDA support",
    ]
    assert_named_by_a_signature(named, "kernel_abi_mismatch")


def test_thirty_fourth_round_trap_xformers_warning_on_a_start_that_goes_on():
    warning = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
               "    PyTorch 2.1.1+cu121 with CUDA 1201 (you have 2.3.0+cu121)\n"
               "  Memory-efficient attention, SwiGLU, sparse and more won't be available.")
    assert diagnose(warning).cls == "healthy"
    d = diagnose(warning + "\nINFO 03-04 08:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000")
    assert (d.cls, d.ready) == ("healthy", True)
    # a decisive cause after the warning keeps its class: the warning is only a symptom
    assert diagnose(warning + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").cls == \
        "cuda_oom"


def test_thirty_fourth_round_torch_and_multiprocessing_shared_memory_full_is_shm_too_small():
    named = [
        # an older torch's message without the errno, under a vLLM worker prefix
        "(VllmWorker rank=0 pid=7) ERROR 03-04 08:00:00 [multiproc_executor.py:559] RuntimeError: unable to write "
        "to file </torch_18692_1882296962_2>",
        # a multiprocessing Queue's lock, not a Lock: the semaphore is still created in synchronize.py
        "\n".join([
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.11/multiprocessing/context.py", line 103, in Queue',
            "    return Queue(maxsize, ctx=self.get_context())",
            '  File "/usr/lib/python3.11/multiprocessing/queues.py", line 43, in __init__',
            "    self._rlock = ctx.Lock()",
            '  File "/usr/lib/python3.11/multiprocessing/synchronize.py", line 57, in __init__',
            "    sl = self._semlock = _multiprocessing.SemLock(",
            "OSError: [Errno 28] No space left on device",
        ]),
    ]
    assert_named_by_a_signature(named, "shm_too_small")


def test_thirty_fourth_round_trap_other_shared_memory_and_disk_errors_keep_their_class():
    # torch's shared-memory file failing for a file-descriptor limit is too_many_open_files
    assert diagnose("RuntimeError: unable to open shared memory object </torch_29919_1396182366> in read-write mode: "
                    "Too many open files (24)").cls == "too_many_open_files"
    # ENOSPC raised while saving a checkpoint is a full disk, not /dev/shm
    disk = "\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/serialization.py", line 967, in save',
        "    _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)",
        "OSError: [Errno 28] No space left on device",
    ])
    assert diagnose(disk).cls != "shm_too_small"


def test_thirty_fourth_round_allocation_failures_by_number_enum_or_hip_are_cuda_oom():
    named = [
        # XLA's allocator in glog's ERROR format, naming the driver API's enum
        "E0304 08:00:00.123456 12345 cuda_driver.cc:806] failed to allocate 13.76G (14773796864 bytes) from device: "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "RuntimeError: cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY",
        # NCCL's numbered form under a journal prefix, RCCL's HIP form under SGLang's
        "Mar 04 08:00:00 node1 sglang[77]: node1:77:77 [0] transport/nvls.cc:151 NCCL WARN Cuda failure 2 'out of "
        "memory'",
        "[2026-03-04 08:00:00 TP2] node1:77:77 [2] NCCL WARN HIP failure 'out of memory' at /src/rccl/src/transport/"
        "p2p.cc:612",
    ]
    assert_named_by_a_signature(named, "cuda_oom")


def test_thirty_fourth_round_trap_other_cuda_failures_and_an_info_retry_are_not_cuda_oom():
    for line in ["node1:77:77 [0] transport/nvls.cc:151 NCCL WARN Cuda failure 1 'invalid argument'",
                 "node1:77:77 [0] NCCL WARN HIP failure 'invalid device ordinal' at /src/rccl/src/init.cc:99"]:
        assert diagnose(line).cls not in ("cuda_oom", "healthy"), line
    assert diagnose("INFO 03-04 08:00:00 [cumem.py:90] CUDA_ERROR_OUT_OF_MEMORY on the first chunk, retrying with a "
                    "smaller chunk").cls == "healthy"


# NVIDIA's container runtime hook refuses an image whose CUDA needs a newer driver than the host's: the driver is
# too old for the image, whatever the docker daemon's error around it says
@pytest.mark.parametrize("log", [
    "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your driver to a "
    "newer version, or use an earlier cuda container: unknown.",
    "docker: Error response from daemon: OCI runtime create failed: container_linux.go:370: starting container "
    "process caused: process_linux.go:459: container init caused: Running hook #0:: error running hook: exit status "
    "1, stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda >= 11.0: unknown.",
], ids=["the hook's line", "inside the daemon's error, older spacing"])
def test_the_container_hooks_cuda_requirement_is_a_driver_mismatch(log):
    assert diagnose(log).cls == "driver_mismatch"


# A kernel package's Python API of another release than its caller's: its entry point refuses a keyword or an
# argument count (vLLM calling an older vllm-flash-attn, round 38). Only by a kernel package's entry point: the
# same TypeError from the program's own function is a bug
@pytest.mark.parametrize("line", [
    "[rank0]: TypeError: flash_attn_varlen_func() got an unexpected keyword argument 'softcap'",
    "TypeError: flash_attn_with_kvcache() got an unexpected keyword argument 'num_splits'",
    "(EngineCore_DP0 pid=9) TypeError: flashinfer_trtllm_fp8_block_scale_moe() takes 18 positional arguments but "
    "19 were given",
    "TypeError: fa3_fwd() missing 1 required positional argument: 'scheduler_metadata'",
], ids=["softcap", "num_splits (no KV cache class)", "flashinfer count", "missing argument"])
def test_a_kernel_entry_point_refusing_its_arguments_is_a_kernel_mismatch(line):
    assert diagnose(line).cls == "kernel_abi_mismatch", line


@pytest.mark.parametrize("line", [
    "TypeError: generate() got an unexpected keyword argument 'sampling_params'",
    "TypeError: forward() takes 3 positional arguments but 4 were given",
], ids=["the program's own function", "a module's forward"])
def test_another_functions_argument_error_names_no_kernel(line):
    assert diagnose(line).cls == "unknown", line


# torch's NCCL error quoting NCCL's last error: a CUDA call that ran out of memory is the cause, the NCCL error
# only how it surfaced; another last error keeps it an NCCL failure
NCCL_UNHANDLED = ["[rank3]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                  "NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
                  "[rank3]: ncclUnhandledCudaError: Call to CUDA function failed.",
                  "[rank3]: Last error:"]


@pytest.mark.parametrize("last, want", [
    ("Cuda failure 'out of memory'", "cuda_oom"),
    ("Cuda failure 2 'out of memory'", "cuda_oom"),
    ("Cuda failure 'invalid device ordinal'", "nccl_failure"),
], ids=["out of memory", "numbered", "another CUDA failure"])
def test_an_nccl_error_whose_last_error_is_out_of_memory_is_an_oom(last, want):
    assert diagnose("\n".join(NCCL_UNHANDLED + [f"[rank3]: {last}"])).cls == want


# The driver's PTX JIT refusing a newer toolkit's PTX (error 222) and the driver's daemons not running (error 802,
# the fabric manager on an NVSwitch machine) are the driver's state; torch loading another cuDNN than its own is
# a library mismatch
@pytest.mark.parametrize("line, want", [
    ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.", "driver_mismatch"),
    ("CUDA error 222 at ggml-cuda.cu:6466: the provided PTX was compiled with an unsupported toolchain.",
     "driver_mismatch"),
    ("RuntimeError: CUDA error code=222(cudaErrorUnsupportedPtxVersion)", "driver_mismatch"),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized",
     "driver_mismatch"),
    ("[rank2]: RuntimeError: CUDA driver error: system not yet initialized", "driver_mismatch"),
    ("cudaGetDeviceProperties returned 802\n-> system not yet initialized\nCUDA error at bandwidthTest.cu:256 "
     "code=802(cudaErrorSystemNotReady) \"cudaSetDevice(currentDevice)\"", "driver_mismatch"),
    ("CUDA error at simpleP2P.cu:71 code=802(cudaErrorSystemNotReady) \"cudaGetDeviceCount(&gpu_n)\"",
     "driver_mismatch"),
    ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 1, 0) but found runtime "
     "version (8, 9, 2). PyTorch already comes bundled with cuDNN.", "kernel_abi_mismatch"),
    ("RuntimeError: cuDNN version mismatch: PyTorch was compiled against 7102 but linked against 7600",
     "kernel_abi_mismatch"),
], ids=["PTX toolchain", "PTX toolchain, ggml's words", "PTX version by name", "802 from torch", "802 driver API",
        "802 by name", "802 by its enum alone", "cuDNN incompatibility", "cuDNN mismatch, older torch"])
def test_driver_state_and_library_mismatches_by_cause(line, want):
    assert diagnose(line).cls == want


def test_a_fabric_manager_that_reports_it_is_still_initialising_is_no_failure():
    line = "Dec 04 10:00:01 node nv-fabricmanager[2211]: fabric manager: waiting for the system to be initialized"
    assert diagnose(line).cls == "healthy"
# --- the session's second review -------------------------------------------------------------------------------

_SG_START = ["[2026-01-02 10:00:00] server_args=ServerArgs(model_path='/models/m', speculative_algorithm='EAGLE')",
             "[2026-01-02 10:00:01 TP0] Load weight begin. avail mem=78.00 GB"]


def test_a_backend_skipped_for_want_of_the_cutlass_dsl_is_no_failure():
    # a kernel library's reason a backend cannot run ("MXFP6 requires nvidia-cutlass-dsl", returned by a
    # can_implement check), logged by the caller that goes on with another backend: SGLang's logger prints no
    # level, so only the words say the program goes on
    for note in ("[2026-01-02 10:00:02 TP0] Skipping the cute_dsl GEMM backend: MXFP6 requires nvidia-cutlass-dsl",
                 "[2026-01-02 10:00:02 TP0] The CuTeDSL low-M backend requires nvidia-cutlass-dsl; falling back to cutlass",
                 "[2026-01-02 10:00:02 TP0] flashinfer_cutedsl requires nvidia-cutlass-dsl>=4.2, using flashinfer_trtllm instead"):
        d = diagnose("\n".join([*_SG_START, note]))
        assert d.cls == "healthy", note
    # the raised refusal, the same words, is still the class
    d = diagnose("\n".join([*_SG_START, "RuntimeError: MXFP6 requires nvidia-cutlass-dsl"]))
    assert d.cls == "cute_dsl_version_skew"


def _speculative_traceback(message: str, building: bool) -> list[str]:
    head = ["[2026-01-02 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", line 2600, in run_scheduler_process']
    if building:
        body = ["    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)",
                '  File "/usr/lib/python3/dist-packages/sglang/srt/speculative/eagle_worker.py", line 80, in __init__',
                "    self.init_cuda_graphs()"]
    else:
        body = ["    scheduler.event_loop_overlap()",
                '  File "/usr/lib/python3/dist-packages/sglang/srt/speculative/eagle_worker.py", line 300, in forward_batch_generation',
                "    logits = self.draft_forward(batch)"]
    return [*_SG_START, *head, *body, message]


def test_a_cuda_runtime_error_raised_in_the_speculative_code_is_not_a_speculative_refusal():
    # the speculative RuntimeError rule reads the program's own refusals ("... requires ...", "... not supported");
    # the CUDA runtime's cudaErrorNotSupported ("operation not supported") and cudaErrorUnsupportedLimit ("limit is
    # not supported on this architecture"), raised by any torch op the speculative worker calls, are not one
    for message in ("RuntimeError: CUDA error: operation not supported",
                    "RuntimeError: CUDA driver error: operation not supported",
                    "RuntimeError: CUDA error: limit is not supported on this architecture"):
        for building in (True, False):
            d = diagnose("\n".join(_speculative_traceback(message, building)))
            assert d.cls != "speculative_config", (message, building)
    # the worker's own refusal there is still the class
    d = diagnose("\n".join(_speculative_traceback(
        "RuntimeError: DFLASH requires the target model to expose its aux hidden states", True)))
    assert d.cls == "speculative_config"


def test_the_context_length_refusal_reads_its_hint_only_within_a_bounded_gap():
    # the gap between the refusal and its hint is bounded (600 characters), so a long line of its words repeated is
    # searched in linear time (bench/diagnose.py times it); a line of the words alone is no failure
    assert diagnose("is greater than the derived context_length " * 2400).cls == "healthy"
    head = "ValueError: User-specified context_length (200000) is greater than the derived context_length (131072). "
    hint = " To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
    near = diagnose(head + "x " * 100 + hint)
    assert near.cls == "invalid_server_args" and "no signature matched" not in near.cause
    # the hint 800 characters on is another matter: no signature reads it (the key-token tier still names the two
    # settings compared by their values, at its lower confidence)
    far = diagnose(head + "x " * 400 + hint)
    assert "no signature matched" in far.cause and far.confidence < near.confidence
    # the refusal itself, with its hint about 200 characters on, is still read
    refusal = ("ValueError: User-specified context_length (200000) is greater than the derived context_length (131072). "
               "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ "
               "from max_position_embeddings in the model's config. To allow overriding this maximum, set the env var "
               "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    assert diagnose(refusal).cls == "invalid_server_args"


def test_a_capture_streams_own_record_is_no_capture_failure():
    # the CUDA runtime's capture texts name the class ("... depend on a capturing blocking stream", "capturing stream
    # has unjoined work", "... last recorded in a capturing stream"); the words "capturing stream" alone, in a
    # record about the capture stream of a server that goes on, do not
    note = "[2026-01-02 10:00:02 TP0] CUDA graph capturing stream priority set to -1"
    assert diagnose("\n".join([*_SG_START, note])).cls == "healthy"
    for error in ("RuntimeError: CUDA error: operation would make the legacy stream depend on a capturing blocking stream",
                  "[2026-01-02 10:00:05 TP0] CUDA error (custom_all_reduce.cuh:412): capturing stream has unjoined work",
                  "RuntimeError: CUDA error: operation not permitted on an event last recorded in a capturing stream"):
        assert diagnose("\n".join([*_SG_START, error])).cls == "cuda_graph_capture", error


def test_a_health_checks_http_return_code_is_no_failure():
    # "return code N" is a failure said of a process that ran or ended; a health check's HTTP status is not
    for note in ("[2026-01-02 10:00:02] Health check return code: 200",
                 "[2026-01-02 10:00:02] GET /v1/models return code 404, retrying"):
        assert diagnose("\n".join([*_SG_START, note])).cls == "healthy", note
    for failure in ("nvidia-smi failed with return code 18",
                    "[2026-01-02 10:00:02] Server process exited with return code 1",
                    "subprocess return code: -9"):
        assert diagnose("\n".join([*_SG_START, failure])).cls != "healthy", failure


def test_a_health_check_that_failed_with_an_http_status_is_no_failure():
    # "failed with exit code/status N" is a process that failed; "failed with status 503" a retried health check
    for note in ("[2026-01-02 10:00:02] Health check failed with status 503, retrying",
                 "[2026-01-02 10:00:02] Request to http://127.0.0.1:30000/health failed with status 503, retrying"):
        assert diagnose("\n".join([*_SG_START, note])).cls == "healthy", note
    for failure in ("Status message: Job entrypoint command failed with exit code 1, last available logs",
                    "error: command 'x86_64-linux-gnu-gcc' failed with exit status 1",
                    "[2026-01-02 10:00:02] Subprocess detokenizer (pid=31379) crashed with exit code -15."):
        assert diagnose("\n".join([*_SG_START, failure])).cls != "healthy", failure


# (the line-anchored forms of what runs the server sit outside the word-boundary group: before, "^\s*Exit Code:"
# could match only a line starting with its word, since \b cannot hold before leading blanks)
@pytest.mark.parametrize("text", ["      Exit Code:    137", "  Exception in thread Thread-3 (run):"])
def test_the_line_anchored_runner_forms_match_an_indented_line_too(text):
    from noderig.diagnose.startup import FAILURE
    assert FAILURE.search(text)


def _cut_frames(*frames: tuple[str, str]) -> str:
    """A traceback cut before its exception line: (file, function) frames, each with an echoed source line."""
    out = ["Traceback (most recent call last):"]
    for n, (path, func) in enumerate(frames):
        out += [f'  File "/venv/lib/python3.12/site-packages/{path}", line {100 + n}, in {func}', "    call()"]
    return "\n".join(out)


_DIST_INIT = ("vllm/worker/worker.py", "init_worker_distributed_environment")


@pytest.mark.parametrize("frames, cls", [
    # a collective torch.distributed runs on NCCL (vLLM's warm-up all_reduce), or the communicator a group builds
    ((_DIST_INIT, ("torch/distributed/c10d_logger.py", "wrapper"), ("torch/distributed/distributed_c10d.py", "all_reduce")),
     "nccl_failure"),
    ((("vllm/distributed/parallel_state.py", "init_model_parallel_group"), ("vllm/distributed/parallel_state.py", "__init__"),
      ("vllm/distributed/device_communicators/cuda_communicator.py", "__init__")), "nccl_failure"),
    # the TCP store of the rendezvous: on one node, a port another process holds
    ((("torch/distributed/c10d_logger.py", "wrapper"), ("torch/distributed/distributed_c10d.py", "init_process_group"),
      ("torch/distributed/rendezvous.py", "_tcp_rendezvous_handler")), "port_in_use"),
    # vLLM's memory profiling is the first forward pass: an allocation fails there, and so does a model's own bug
    # (GLM-V 126: an AttributeError) or a kernel built for another GPU; a cut there names nothing
    ((("vllm/engine/llm_engine.py", "_initialize_kv_caches"), ("vllm/executor/gpu_executor.py", "determine_num_available_blocks")),
     "unknown"),
    ((("vllm/v1/worker/gpu_worker.py", "determine_available_memory"), ("vllm/v1/worker/gpu_model_runner.py", "profile_run"),
      ("vllm/model_executor/models/llama.py", "forward")), "unknown"),
    # SGLang building the draft worker
    ((("sglang/srt/managers/scheduler.py", "__init__"), ("sglang/srt/managers/scheduler.py", "init_model_worker"),
      ("sglang/srt/managers/scheduler.py", "maybe_init_draft_worker")), "speculative_config"),
    # SGLang compiling DeepGEMM's kernels ahead, in a thread pool
    ((("sglang/srt/layers/deep_gemm_wrapper/compile_utils.py", "deep_gemm_execution_hook"),
      ("sglang/srt/layers/deep_gemm_wrapper/compile_utils.py", "_maybe_compile_deep_gemm_one_type_all"),
      ("concurrent/futures/_base.py", "result_iterator")), "deepgemm_jit_failure"),
    # traps: SGLang's init_torch_distributed checks the GPUs' free memory too (a ValueError), and the engine's
    # _initialize_kv_caches checks the KV cache after profiling: a cut there names nothing
    ((("sglang/srt/model_executor/model_runner.py", "__init__"), ("sglang/srt/model_executor/model_runner.py",
                                                                  "init_torch_distributed")), "unknown"),
    ((("vllm/engine/llm_engine.py", "__init__"), ("vllm/engine/llm_engine.py", "_initialize_kv_caches")), "unknown"),
    # the draft worker serving a batch says nothing of the speculative settings
    ((("sglang/srt/managers/scheduler.py", "event_loop_normal"), ("sglang/srt/managers/scheduler.py", "run_batch")),
     "unknown"),
])
def test_a_traceback_cut_inside_a_call_only_its_cause_makes_names_the_class(frames, cls):
    d = diagnose(_cut_frames(*frames))
    assert d.cls == cls, d.cause
    if cls != "unknown":  # a guess from where it stopped: a symptom, never a signature's confidence
        assert d.confidence < 0.9 and d.evidence[-1].line.startswith('File "'), d


@pytest.mark.parametrize("frames, error, cls", [
    # with its exception line the message decides, whatever call it stopped in
    (((("vllm/v1/worker/gpu_worker.py", "determine_available_memory"), ("vllm/v1/worker/gpu_model_runner.py", "profile_run"))),
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "unsupported_gpu_arch"),
    (((("sglang/srt/managers/scheduler.py", "maybe_init_draft_worker"),)),
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB", "cuda_oom"),
    ((_DIST_INIT, ("torch/distributed/distributed_c10d.py", "all_reduce")),
     "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error", "nccl_failure"),
    (((("torch/distributed/rendezvous.py", "_tcp_rendezvous_handler"),)),
     "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.", None),
])
def test_a_call_that_places_a_cut_traceback_does_not_override_its_exception_line(frames, error, cls):
    got = diagnose(_cut_frames(*frames) + "\n" + error).cls
    # (None: a store that waited for its clients is no port taken, whatever else it is)
    assert got == cls if cls else got not in ("port_in_use", "healthy")


def test_torchs_older_nccl_wording_with_its_result_code_is_nccl_failure():
    # torch 2.3 and older put NCCL's result code between "Error" and the colon; a number after the words in a
    # record that goes on (an info line counting errors) is not the form
    line = ("(RayWorkerWrapper pid=23558) ERROR 07-28 13:53:40 worker_base.py:382] RuntimeError: NCCL Error 3: internal "
            "error - please report this issue to the NCCL developers")
    d = diagnose(line)
    assert (d.cls, d.confidence) == ("nccl_failure", 0.9)
    assert diagnose("RuntimeError: NCCL Error 2: unhandled system error").cls == "nccl_failure"


def test_transformers_auto_class_without_a_model_for_the_config_is_unsupported_architecture():
    for line in ("ValueError: Unrecognized configuration class <class 'transformers.models.qwen2_vl.configuration_qwen2_vl."
                 "Qwen2VLConfig'> for this kind of AutoModel: AutoModelForCausalLM.",
                 "(APIServer pid=1) ERROR 01-01 00:00:09 [core.py:700] Unrecognized configuration class <class "
                 "'transformers_modules.m.configuration_m.MConfig'> for this kind of AutoModel: AutoModel."):
        assert diagnose(line).cls == "unsupported_architecture", line
    # a hint that names the words, in a record the server goes on from, is no failure
    hint = ('INFO 01-01 00:00:01 [loader.py:10] Loading with AutoModelForCausalLM; "Unrecognized configuration class" '
            "means the model needs --trust-remote-code")
    assert diagnose(hint).cls == "healthy"


def test_vllm_0_10_workers_name_their_rank_after_a_space():
    # "(VllmWorker TP0 pid=N)": without the prefix stripped, a worker's frames were not read as a traceback and a
    # paste of them alone came out healthy
    frames = ['  File "/venv/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", line 244, in determine_available_memory',
              "    self.model_runner.profile_run()"]
    for who, rank in (("VllmWorker TP0", "TP0"), ("VllmWorker PP1_TP3", "PP1 TP3")):
        text = "\n".join(f"({who} pid=2748156) ERROR 08-13 22:40:00 [multiproc_executor.py:596] {ln}" for ln in frames)
        first = normalize(text)[0]
        assert (first.text, first.rank, first.level) == (frames[0], rank, "ERROR")
        assert diagnose(text).cls == "unknown"


def test_the_servers_custom_tokenizer_hint_is_trust_remote_code_not_a_tokenizer_error():
    # get_tokenizer words it so only when remote code was not allowed; the same words wrapped by a paste, in
    # SGLang's record, still name it; a tokenizer that failed for another reason stays tokenizer_error
    hint = ("RuntimeError: Failed to load the tokenizer. If the tokenizer is a custom tokenizer not yet available in "
            "the HuggingFace transformers library, consider setting `trust_remote_code=True` in LLM or using the "
            "`--trust-remote-code` flag in the CLI.")
    assert diagnose(hint).cls == "trust_remote_code"
    assert diagnose("[2026-01-01 00:00:03 TP0] " + hint.split(": ", 1)[1]).cls == "trust_remote_code"
    assert diagnose("RuntimeError: Failed to load the tokenizer. tokenizer.json is missing").cls == "tokenizer_error"
# Forty-third round: speculative decoding and tokenizers from the source, by cause. Each test names the cause in other
# words and other prefixes than the round's probes (tests/fixtures/crashlogs/*/src43-*.log), and keeps its traps.

def test_forty_third_round_a_draft_that_does_not_fit_the_method_is_speculative_config():
    named = [
        # a NextN draft's config without its MTP layer count, another model's wording, under vLLM's engine-core prefix
        "(EngineCore_DP0 pid=812) ERROR 12-04 10:00:00 [core.py:700] ValueError: num nextn_predict_layers is not in "
        "the config",
        # more MTP layers than the loader builds, another checkpoint, behind a journal prefix
        "Dec 04 10:00:00 gpu-07 python3[4411]: ValueError: Only 1 nextn layer is supported for Step3p5 checkpoints.",
        "[2026-12-04 10:00:00 TP3] AssertionError: only 1 MTP layer is supported",
        # the draft's layers in several KV cache groups, in an SGLang-style record
        "[2026-12-04 10:00:00 TP0] Scheduler hit an exception: AssertionError: All draft layers must share the same "
        "KV cache group",
        # the draft model lacking what the target shares, the other way round, alone
        "AttributeError: Draft model has no 'lm_head' attribute to share with the target",
        # a configuration exception naming the draft model near its start, under a compose prefix
        "sglang-1  | NotImplementedError: This draft model keeps a recurrent state, which the multi-step decode "
        "backend cannot carry.",
        # a check raised in vLLM's EAGLE-3 draft model file, whatever its words
        "\n".join([
            "Traceback (most recent call last):",
            f'  File "{_SP}/vllm/model_executor/models/llama_eagle3.py", line 250, in load_weights',
            "    assert self.config.hidden_size == target_hidden",
            "AssertionError: hidden sizes differ: 4096 vs 8192",
        ]),
    ]
    assert_named_by_a_signature(named, "speculative_config")
    # traps: a server_args dump, a config note and an INFO line name the same words and nothing failed
    assert_each_healthy(["[2026-12-04 10:00:00] server_args=ServerArgs(model_path='/models/glm-4.6', speculative_algorithm='EAGLE', "
                         "speculative_draft_model_path=None, enable_multi_layer_eagle=False)",
                         "INFO 12-04 10:00:00 [eagle.py:120] Draft model shares the embed_tokens attribute with the target model.",
                         "[2026-12-04 10:00:00 TP0] num_nextn_predict_layers=1, using the MTP layer as the draft model",
                         "WARNING 12-04 10:00:00 [eagle.py:900] Draft model does not have its own lm_head attribute; sharing "
                         "the target's."])
    # traps: the draft out of memory is not a configuration; a check raised in a target model's file that names no
    # draft keeps its class (unknown)
    assert diagnose("ValueError: The draft model could not be loaded: CUDA out of memory, requires 2.00 GiB more"
                    ).cls != "speculative_config"
    assert diagnose("\n".join([
        "Traceback (most recent call last):",
        f'  File "{_SP}/sglang/srt/models/glm4_moe.py", line 300, in __init__',
        "    raise ValueError(",
        "ValueError: Unsupported activation: gelu_new",
    ])).cls != "speculative_config"


def test_forty_third_round_a_tokenizer_or_processor_file_not_there_is_tokenizer_error():
    named = [
        # sentencepiece's status for another model file, under a compose prefix, raised as RuntimeError
        'vllm-1  | RuntimeError: Not found: "/data/spm/sp.model": No such file or directory Error #2',
        # the processor class, under vLLM's engine-core prefix
        "(EngineCore_DP0 pid=9) ERROR 12-04 10:00:00 [core.py:700] ValueError: Cannot determine the processor class "
        "for /models/Qwen2.5-VL-7B",
        # the mistral mode's path check, in another product's words
        "AssertionError: You have provided a nonexistent path: /models/mistral-small or an invalid Hugging Face Hub "
        "repository id",
    ]
    assert_named_by_a_signature(named, "tokenizer_error")
    # traps: the --chat-template help text, sentencepiece's training log, SGLang's preprocessor warning alone on a start
    # that goes on
    assert_each_healthy(["  --chat-template CHAT_TEMPLATE  The file path to the chat template, or the template in single-line "
                         "form for the specified model.",
                         "trainer_interface.cc(409) LOG(INFO) Loaded all 1200 sentences",
                         "[2026-12-04 10:00:00] _build_processor_manually: could not read preprocessor_config.json for "
                         "/models/x: [Errno 2] No such file or directory: '/models/x/preprocessor_config.json'"])
    # the --chat-template path vLLM refuses, while the arguments are checked (behind a journal prefix) or once the
    # engine is up (under an SGLang-style prefix): the command line's (invalid_server_args, since round 125)
    assert_named_by_a_signature(["Dec 04 10:00:00 gpu-07 vllm[311]: ValueError: The supplied chat template string "
                                 "(chatml.jinja) appears path-like, but doesn't exist!",
                                 "[2026-12-04 10:00:00] ValueError: The supplied chat template "
                                 "(./tool_chat_template_llama3.1_json.jinja) looks like a file path, but it failed to be "
                                 "opened. Reason: [Errno 13] Permission denied"], "invalid_server_args")
    # trap: a file a request names that is not there, after vLLM's ready line, is the request's error
    d = diagnose("\n".join([
        "(APIServer pid=1) INFO 12-04 10:00:00 [launcher.py:44] Route: /v1/chat/completions, Methods: POST",
        "(APIServer pid=1) INFO:     Application startup complete.",
        '(APIServer pid=1) ERROR 12-04 10:00:09 [serving_chat.py:200] Not found: "/tmp/upload.bin": No such file',
    ]))
    assert d.cls == "healthy"
# the forty-fourth round: GPU architecture, driver, kernel ABI and out-of-memory wordings from the source, by cause
# (each case in other words and prefixes than the round's probes), and the lines that look like them but are not


def test_forty_fourth_round_a_kernel_with_no_code_for_this_gpu_generation_is_unsupported_gpu_arch():
    named = [
        # another backend restricted to one generation by name, under SGLang's rank prefix
        "[2026-03-04 08:00:00 TP0] AssertionError: Cutlass MLA is only supported on Blackwell.",
        "(EngineCore_DP0 pid=9) ERROR 03-04 08:00:00 [core.py:708] ValueError: FP8 Marlin kernels are only supported "
        "on NVIDIA Ampere or newer",
        # another dispatcher with no kernel for the SM, as a C++ abort and in vLLM's worker record
        "terminate called after throwing an instance of 'c10::NotImplementedError'\n"
        "  what():  No compiled nvfp4 quantization kernel for SM 121",
        "(VllmWorker TP3 pid=77) ERROR 03-04 08:00:00 [multiproc_executor.py:611] NotImplementedError: No implemented "
        "cutlass_moe_mm for the current compute capability: 120",
        # an SM range as a comparison, raised under vLLM's EngineCore prefix and alone
        "(EngineCore_DP0 pid=4) ERROR 03-04 08:00:00 [core.py:708] AssertionError: FlashAttention v3 Backend "
        "requires SM>=80 and SM<=90. Please use `--attention-backend flashinfer`.",
        "RuntimeError: This kernel requires compute capability >= 90",
        # cuBLAS's ARCH_MISMATCH in another caller's words, under a journal prefix
        "Mar 04 08:00:00 node1 python3[77]: RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling "
        "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_8F_E4M3, lda, b, CUDA_R_8F_E4M3, ldb)`",
        "cuSPARSE error: CUSPARSE_STATUS_ARCH_MISMATCH",
    ]
    assert_named_by_a_signature(named, "unsupported_gpu_arch")


def test_forty_fourth_round_trap_arch_words_the_server_goes_on_from():
    # vLLM's backend selector notes a backend it skips at INFO and picks another; a help text names SM ranges
    assert diagnose("INFO 03-04 08:00:00 [cuda.py:287] Cannot use FlashMLA backend: FlashMLA is only supported on "
                    "Hopper devices. Using TRITON_MLA backend.").cls == "healthy"
    assert diagnose("  --attention-backend {fa3,flashinfer,triton}  fa3 requires SM>=80 and SM<=90 (default: "
                    "None)").cls == "healthy"
    # a compiled kernel named by its dispatcher for another reason than the GPU stays out of this class
    assert diagnose("RuntimeError: cutlass_scaled_mm: No compiled kernel for the given dtype Float").cls \
        != "unsupported_gpu_arch"


def test_forty_fourth_round_a_missing_or_unloaded_driver_is_driver_mismatch():
    named = [
        # c10's cudaErrorInitializationError words under SGLang's prefix, and in torch's warning before a failure
        "[2026-03-05 08:00:00 TP2] RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
        "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py:141: UserWarning: CUDA initialization: CUDA "
        "driver initialization failed, you might not have a CUDA gpu. (Triggered internally at "
        "../c10/cuda/CUDAFunctions.cpp:108.)\nRuntimeError: Found no NVIDIA GPU to run on",
        # Triton's driver lookup in vLLM's EngineCore record
        "(EngineCore_DP0 pid=5) ERROR 03-05 08:00:00 [core.py:708] RuntimeError: 0 active drivers ([]). There "
        "should only be one.",
        # NVML's library missing, by its text and its class name, from other printers
        "pynvml.nvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found",
        "Error: NVML Shared Library Not Found",
        # the container hook failing to load the host driver's libraries, in a compose log and from libnvidia-container
        "Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]]: "
        "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
        "object file: no such file or directory: unknown",
        "E0305 08:00:00.000001 20854 driver.c:161] could not start driver service: load library failed: libcuda.so.1: "
        "cannot open shared object file: no such file or directory",
    ]
    assert_named_by_a_signature(named, "driver_mismatch")


def test_forty_fourth_round_trap_driver_words_the_server_goes_on_from():
    # vLLM's platform detection on a CPU image logs NVML missing at DEBUG and goes on; a monitor warns and goes on
    assert diagnose("DEBUG 06-12 19:58:31 [__init__.py:93] CUDA platform is not available because: NVML Shared "
                    "Library Not Found").cls == "healthy"
    assert diagnose("WARNING 03-05 08:00:00 [utils.py:12] Could not fetch GPU stats: NVML Shared Library Not "
                    "Found").cls == "healthy"
    # Triton choosing its GPU backend over its CPU one, and two drivers active, are not a missing driver
    assert diagnose("Both CPU and GPU backends are available. Using the GPU backend.").cls == "healthy"
    assert diagnose("RuntimeError: 2 active drivers ([<class 'CudaDriver'>, <class 'HIPDriver'>]). There should "
                    "only be one.").cls != "driver_mismatch"


def test_forty_fourth_round_an_extension_built_for_another_python_or_torch_is_kernel_abi_mismatch():
    named = [
        # pybind11's two wordings, under vLLM's worker prefix and alone
        "(VllmWorker TP0 pid=3) ERROR 03-05 08:00:00 [multiproc_executor.py:611] ImportError: Python version mismatch: "
        "module was compiled for Python 3.10, but the interpreter version is incompatible: 3.12.8.",
        "ImportError: Python version mismatch: module was compiled for version 3.9, while the interpreter is running "
        "version 3.11.",
        # another extension's operator missing from the dispatcher, under SGLang's prefix
        "[2026-03-05 08:00:00 TP0] RuntimeError: operator torchaudio::lfilter does not exist",
    ]
    assert_named_by_a_signature(named, "kernel_abi_mismatch")
    # pybind11 refusing xFormers' wrapper's arguments to its compiled op, raised in the wrapper
    tb = ("Traceback (most recent call last):\n"
          '  File "/usr/lib/python3/dist-packages/xformers/ops/fmha/flash.py", line 120, in _flash_fwd\n'
          "    ret = _C_flashattention.varlen_fwd(\n"
          "TypeError: varlen_fwd(): incompatible function arguments. The following argument types are supported:\n"
          "    1. (arg0: torch.Tensor, arg1: torch.Tensor) -> list[torch.Tensor]\n\n"
          "Invoked with: None")
    assert diagnose(tb).cls == "kernel_abi_mismatch"


def test_forty_fourth_round_trap_abi_words_that_are_another_cause():
    # sgl_kernel's operator missing stays its own class; a program's own binding refusing its arguments is no skew
    assert diagnose("RuntimeError: operator sgl_kernel::moe_fused_gate does not exist").cls != "kernel_abi_mismatch"
    tb = ("Traceback (most recent call last):\n"
          '  File "/app/vision/face.py", line 40, in embed\n'
          "    return model.compute_face_descriptor(img)\n"
          "TypeError: compute_face_descriptor(): incompatible function arguments. The following argument types are "
          "supported:\n    1. (self: face_recognition_model_v1, img: numpy.ndarray) -> list\n\nInvoked with: None")
    assert diagnose(tb).cls == "unknown"
    # a DeepGEMM entry point's refusal stays deepgemm_jit_failure
    assert diagnose("TypeError: m_grouped_fp8_gemm_nt_contiguous(): incompatible function arguments. The following "
                    "argument types are supported:").cls == "deepgemm_jit_failure"


def test_forty_fourth_round_an_allocation_that_failed_in_other_words_is_cuda_oom():
    named = [
        # NCCL's calloc under a vLLM worker prefix, and torch quoting it as NCCL's last error
        "(VllmWorker TP2 pid=8) node1:8:8 [2] include/alloc.h:184 NCCL WARN Failed to CUDA calloc 536870912 bytes",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.21.5\n"
        "Last error:\nFailed to CUDA calloc async 4096 bytes",
        # cuDNN's allocation failure from another printer, under SGLang's prefix
        "[2026-03-06 08:00:00 TP1] RuntimeError: cuDNN Frontend error: CUDNN_STATUS_ALLOC_FAILED",
        # SGLang's older ValueError for the unbalanced check, in a journal
        "Mar 06 08:00:00 node1 python3[41]: ValueError: The memory capacity is unbalanced. Some GPUs may be occupied "
        "by other processes.",
    ]
    assert_named_by_a_signature(named, "cuda_oom")


def test_forty_fourth_round_trap_memory_words_the_server_goes_on_from():
    # SGLang with the balance check disabled warns and goes on: ready after it
    d = diagnose("[2026-03-06 08:00:00 TP0] WARNING: The memory capacity is unbalanced. Some GPUs may be occupied by "
                 "other processes. min_per_gpu_memory=61.02, local_gpu_memory=78.5\n"
                 "[2026-03-06 08:01:00] The server is fired up and ready to roll!")
    assert (d.cls, d.ready) == ("healthy", True)
    # a vLLM WARNING record quoting the check's words: nothing failed
    assert diagnose("WARNING 03-06 08:00:00 [model_runner.py:1] The memory capacity is unbalanced; continuing").cls \
        == "healthy"
    # NCCL's INFO lines about its allocations are not a failure
    assert diagnose("node1:8:8 [0] NCCL INFO Allocated 6291456 bytes of CUDA memory for channel buffers").cls \
        == "healthy"


# A review of rounds 40 to 44: each test fails before its fix (docs/diagnose.md, "A review of rounds 40 to 44")

# SGLang's own warning when its tensor-parallel memory check is disabled: its logger prints no level
_UNBALANCED_WARNING = ("[2026-03-06 08:00:00 TP0] The memory capacity is unbalanced. Some GPUs may be occupied by other "
                       "processes. min_per_gpu_memory=61.02, local_gpu_memory=78.5, local_gpu_memory * 0.9=70.65")


def test_review_sglangs_level_less_unbalanced_memory_warning_is_neither_a_failure_nor_the_cause():
    # the start goes on: still loading is healthy, not cuda_oom
    d = diagnose(_UNBALANCED_WARNING + "\n[2026-03-06 08:00:01 TP0] Load weight begin. avail mem=61.02 GB")
    assert d.cls == "healthy", d.cause
    # a later failure keeps its own class
    d = diagnose(_UNBALANCED_WARNING + "\n[2026-03-06 08:00:05 TP0] Scheduler hit an exception: RuntimeError: NCCL error "
                 "in: ProcessGroupNCCL.cpp:1970, unhandled system error")
    assert d.cls == "nccl_failure", d.cause
    # the check raised stays cuda_oom, under SGLang's record and alone
    for line in ("[2026-03-06 08:00:00 TP0] Scheduler hit an exception: ValueError: The memory capacity is unbalanced. "
                 "Some GPUs may be occupied by other processes.",
                 "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes."):
        assert diagnose(line).cls == "cuda_oom", line


def test_review_a_level_less_note_that_a_gpu_generation_lacks_a_backend_and_goes_on_is_no_failure():
    # SGLang's logger prints no level: a fallback note reaches the diagnosis as a plain line; a --flag's help text too
    assert_each_healthy(["[2026-03-06 08:00:00 TP0] FlashMLA is only supported on Hopper, using the triton backend instead.",
                         "[2026-03-06 08:00:00] DeepGEMM is only supported on Hopper and Blackwell; falling back to Triton.",
                         "[2026-03-06 08:00:00] No compiled flash_mla kernel for this compute capability, falling back to "
                         "triton_mla",
                         "  --enable-flashmla      Use the FlashMLA kernel (only supported on Hopper)."])
    # a later failure keeps its own class
    d = diagnose("[2026-03-06 08:00:00 TP0] FlashMLA is only supported on Hopper, using the triton backend instead.\n"
                 "[2026-03-06 08:00:05 TP0] Scheduler hit an exception: RuntimeError: NCCL error in: "
                 "ProcessGroupNCCL.cpp:1970, unhandled system error")
    assert d.cls == "nccl_failure", d.cause
    # a refusal that suggests another backend stays a refusal
    assert diagnose("ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs. Please use a different backend "
                    "instead.").cls == "unsupported_gpu_arch"


def test_review_a_draft_model_that_hit_another_causes_error_is_not_speculative_config():
    # noderig always runs speculative decoding: a message naming the draft is not a configuration refusal when what it
    # says is memory, a CUDA error or a file not there
    for line in ["ValueError: The draft model cannot fit: not enough memory for its KV cache; requires 3.2 GiB",
                 "ValueError: draft model loading failed: CUDA error: an illegal memory access was encountered; requires "
                 "a restart",
                 "ValueError: draft model checkpoint /models/d cannot be opened: No such file or directory: "
                 "'/models/d/model-00002-of-00004.safetensors'"]:
        assert diagnose(line).cls != "speculative_config", line

    def raised_in_draft_file(message: str) -> str:
        return ("Traceback (most recent call last):\n"
                f'  File "{_SP}/vllm/model_executor/models/deepseek_mtp.py", line 200, in __init__\n'
                "    raise ValueError(msg)\n" + message)
    # raised in a draft model's file, the message names the GPU or the memory: that cause's class, as before round 43
    assert diagnose(raised_in_draft_file("ValueError: Unsupported quantization method: fp4 is not supported on sm_86")
                    ).cls == "unsupported_gpu_arch"
    assert diagnose(raised_in_draft_file("AssertionError: CUDA error: out of memory")).cls == "cuda_oom"
    # a check on the draft's own config raised there stays speculative_config
    assert diagnose(raised_in_draft_file("ValueError: mtp_start_layer_idx 61 is beyond the checkpoint's 61 layers")
                    ).cls == "speculative_config"


def test_review_level_less_notes_in_a_draft_or_tokenizer_checks_words_are_no_failure():
    # SGLang's logger prints no level: its INFO and WARNING notes reach the diagnosis as plain lines
    assert_each_healthy(["[2026-03-06 08:00:00 TP0] num_nextn_predict_layers is not set in the draft config; using 1",
                         "[2026-03-06 08:00:00 TP0] Only 1 MTP layer is supported; using the first one.",
                         "[2026-03-06 08:00:00 TP0] Target model does not have a lm_head attribute; sharing embed_tokens with "
                         "the draft",
                         "[2026-03-06 08:00:00 TP0] EAGLE layers are placed in the same KV cache group as the target",
                         "[2026-03-06 08:00:00] Chat template looks like a file path; loading /templates/t.jinja",
                         "[2026-03-06 08:00:00] Cannot determine processor class for /models/x, using the tokenizer only"])
    # the raised checks stay named
    assert diagnose("[2026-03-06 08:00:00 TP0] Scheduler hit an exception: ValueError: num_nextn_predict_layers is "
                    "not in the config").cls == "speculative_config"
    assert diagnose("AttributeError: Target model does not have 'embed_tokens' or 'embedding' attribute").cls \
        == "speculative_config"


_DRAFT_BUILD = (("sglang/srt/managers/scheduler.py", "__init__"), ("sglang/srt/managers/scheduler.py", "maybe_init_draft_worker"),
                ("sglang/srt/speculative/eagle_worker.py", "__init__"))


@pytest.mark.parametrize("deeper, cls", [
    # the draft's CUDA graphs: cuda_graph_capture's own place, as before round 40
    ((("sglang/srt/speculative/eagle_worker.py", "init_cuda_graphs"),
      ("sglang/srt/speculative/eagle_draft_cuda_graph_runner.py", "__init__"),
      ("sglang/srt/model_executor/cuda_graph_runner.py", "capture"),
      ("sglang/srt/model_executor/cuda_graph_runner.py", "capture_one_batch_size")), "cuda_graph_capture"),
    # loading the draft's weights, its memory pool: an allocation, a shard, anything; where it stopped names nothing
    ((("sglang/srt/managers/tp_worker.py", "__init__"), ("sglang/srt/model_executor/model_runner.py", "load_model"),
      ("sglang/srt/model_loader/loader.py", "load_weights_and_postprocess"), ("safetensors/torch.py", "load_file")), "unknown"),
    ((("sglang/srt/model_executor/model_runner.py", "init_memory_pool"),
      ("sglang/srt/mem_cache/memory_pool.py", "_create_buffers")), "unknown"),
    # a collective while the draft's groups form: nccl_failure's own place
    ((("sglang/srt/model_executor/model_runner.py", "init_torch_distributed"),
      ("torch/distributed/distributed_c10d.py", "all_reduce")), "nccl_failure"),
    # cut in the draft worker's own code: the speculative set-up (round 40's rule)
    ((), "speculative_config"),
])
def test_review_a_cut_deep_inside_the_draft_workers_build_is_not_named_by_the_draft(deeper, cls):
    d = diagnose(_cut_frames(*_DRAFT_BUILD, *deeper))
    assert d.cls == cls, d.cause


def test_review_the_unbalanced_memory_check_has_no_mem_fraction_remedy():
    # the check compares the GPUs' free memory before anything is allocated: a lower --mem-fraction-static, which the
    # deploy applies by itself, cannot pass it; an allocation that failed keeps that remedy
    d = diagnose("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
                 "min_per_gpu_memory=61.02, local_gpu_memory=78.5, local_gpu_memory * 0.9=70.65")
    assert (d.cls, d.remedy) == ("cuda_oom", None)
    assert diagnose("RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED").remedy == "lower:mem_fraction_static"


def test_a_gpu_generation_note_that_goes_on_is_no_failure_a_raised_refusal_is_whatever_it_adds():
    # the older "only supported on ... GPUs" rule read a note the server goes on from as a refusal; a raised
    # exception's line is a refusal even when it names the path it needed ("when using ...")
    notes = ["[2026-01-01 00:00:03 TP0] FP4 quantization is only supported on Blackwell GPUs (compute capability 10.0+); "
             "continuing with the FP8 path",
             "[2026-01-01 00:00:03 TP0] MLA kernels are only supported on Hopper GPUs, using the triton backend instead"]
    for note in notes:
        assert diagnose(note).cls == "healthy", note
    for error in ("ValueError: FlashInfer MLA is only supported on SM100 GPUs when using an FP8 KV cache",
                  "RuntimeError: FlashAttention is only supported on Ampere GPUs or newer.",
                  "RuntimeError: FlashMLA is only supported on Hopper devices when using the MLA backend"):
        assert diagnose(error).cls == "unsupported_gpu_arch", error
# the forty-sixth round: KV cache, CUDA graphs, server arguments and ports from the source, by cause (each case in
# other words and prefixes than the round's probes), and the lines that look like them but are not


def test_forty_sixth_round_a_kv_pool_with_no_room_in_other_words_is_kv_cache_insufficient():
    named = [
        # SGLang's token-pool allocator, its plain and prefill wordings, under another rank prefix and a journal
        "[2026-03-07 08:00:00 DP1 TP3] RuntimeError: Prefill out of memory. Try to lower your batch size.",
        "Mar 07 08:00:00 node1 python3[41]: RuntimeError: Out of memory. Try to lower your batch size.",
        # the hybrid models' state cache in other words, alone
        "RuntimeError: not enough space for mamba state cache; increase --max-mamba-cache-size",
        # a host pool for the KV cache larger than the host memory free, in other words under a compose prefix
        "sglang-1  | ValueError: Not enough CPU memory to allocate the host KV cache (requested 96.00 GiB).",
    ]
    assert_named_by_a_signature(named, "kv_cache_insufficient")


def test_forty_sixth_round_trap_kv_pool_words_the_server_goes_on_from():
    # SGLang retracts requests when decode runs out of KV slots and goes on: ready after it
    d = diagnose("[2026-03-07 08:00:00 TP0] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: "
                 "0.7000 -> 1.0000\n"
                 "[2026-03-07 08:01:00] The server is fired up and ready to roll!")
    assert (d.cls, d.ready) == ("healthy", True)
    # its note on the host pool it allocates, and a help text naming the mamba cache, are no failure
    assert diagnose("[2026-03-07 08:00:00 TP0] Allocating 24.00 GB host memory for hierarchical KV cache.").cls \
        == "healthy"
    assert diagnose("  --max-mamba-cache-size MAX_MAMBA_CACHE_SIZE\n"
                    "                        The maximum size of the mamba cache. Without enough space for the "
                    "mamba cache, requests wait.").cls == "healthy"
    # a line saying there is not enough space for the mamba cache without the hint to enlarge it is not the check
    assert diagnose("[2026-03-07 08:00:00 TP0] Not enough space for mamba cache for request 7; it waits.").cls \
        == "healthy"
    # torch's allocator running out of GPU memory stays cuda_oom
    assert diagnose("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                    "capacity of 79.10 GiB of which 1.02 GiB is free.").cls == "cuda_oom"


def test_forty_sixth_round_a_capture_the_runtime_or_the_backend_cannot_make_is_cuda_graph_capture():
    named = [
        # vLLM's refusal of a full-graph mode for a backend that never supports it, in a worker record and a journal
        "(VllmWorker TP0 pid=3) ERROR 03-07 08:00:00 [multiproc_executor.py:611] ValueError: CUDAGraphMode.FULL is "
        "not supported with Mamba2AttentionMetadataBuilder backend (support:AttentionCGSupport.NEVER) ; please try "
        "cudagraph_mode=PIECEWISE, and make sure compilation level is piecewise",
        "Mar 07 08:00:00 node1 vllm[41]: ValueError: CUDAGraphMode.FULL_AND_PIECEWISE is not supported with "
        "FlashInferMLAMetadataBuilder backend (support: AttentionCGSupport.NEVER)",
        # torch's capture-state checks under a journal prefix and SGLang's rank prefix
        "Mar 07 08:00:00 node1 python3[41]: RuntimeError: This CUDAGraph instance already owns a captured graph. To "
        "capture a new graph, create a new instance.",
        "[2026-03-07 08:00:00 TP2] RuntimeError: get_currently_capturing_graph() can be used only between "
        "capture_begin() and capture_end().",
        # SGLang's empty capture list behind a compose prefix
        "sglang-1  | [2026-03-07 08:00:00 TP0] Scheduler hit an exception: AssertionError: capture_bs=[]",
    ]
    assert_named_by_a_signature(named, "cuda_graph_capture")
    # a mode the backend cannot capture is not fixed by a smaller capture batch: no remedy
    d = diagnose(named[0])
    assert d.remedy is None


def test_forty_sixth_round_trap_capture_words_the_server_goes_on_from():
    # vLLM downgrades a full-graph mode the backend supports only for decode, warns and goes on (also without the
    # WARNING prefix, as a relay prints it)
    warned = ("CUDAGraphMode.FULL_AND_PIECEWISE is not supported with FlashInferMetadataBuilder backend (support: "
              "AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); setting cudagraph_mode=FULL_DECODE_ONLY")
    d = diagnose(f"(EngineCore_DP0 pid=5) WARNING 03-07 08:00:00 [gpu_model_runner.py:3650] {warned}\n"
                 "(APIServer pid=1) INFO 03-07 08:01:00 [api_server.py:1] Starting vLLM API server on "
                 "http://0.0.0.0:8000")
    assert (d.cls, d.ready) == ("healthy", True)
    assert diagnose(warned).cls == "healthy"
    # SGLang's capture note lists the batch sizes it captures
    assert diagnose("[2026-03-07 08:00:00 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]").cls == "healthy"


def test_forty_sixth_round_a_port_taken_in_other_words_is_port_in_use():
    named = [
        # Windows' EADDRINUSE from a plain socket bind and from asyncio, alone
        "OSError: [WinError 10048] Only one usage of each socket address (protocol/network address/port) is "
        "normally permitted",
        "OSError: [Errno 10048] error while attempting to bind on address ('127.0.0.1', 8000): only one usage of "
        "each socket address (protocol/network address/port) is normally permitted",
        # Ray's collision between two of its components, from the raylet's log
        "(raylet) ValueError: Ray component dashboard_agent_grpc is trying to use a port number 52365 that is used by "
        "other components.",
    ]
    assert_named_by_a_signature(named, "port_in_use")
    # SGLang's note that the port is taken by a process it cannot see, then the AttributeError it dies of
    d = diagnose("[2026-03-07 08:00:00] The port 30011 is in use, but we could not find the process that uses it.\n"
                 "AttributeError: 'NoneType' object has no attribute 'pid'")
    assert d.cls == "port_in_use"


def test_forty_sixth_round_trap_port_words_the_server_goes_on_from():
    # the same note on a start whose port frees: ready after it
    d = diagnose("[2026-03-07 08:00:00] The port 30000 is in use, but we could not find the process that uses it.\n"
                 "[2026-03-07 08:01:00] The server is fired up and ready to roll!")
    assert (d.cls, d.ready) == ("healthy", True)
    # the free-port search moving on, and a bind refused for an address the host does not have
    assert diagnose("[2026-03-07 08:00:00] Port 30000 is already in use, trying port 30001").cls == "healthy"
    assert diagnose("OSError: [Errno 99] error while attempting to bind on address ('10.0.0.5', 8000): cannot "
                    "assign requested address").cls != "port_in_use"


def test_forty_sixth_round_flags_the_server_refuses_in_other_words_are_invalid_server_args():
    named = [
        # a flag combination refused, pasted alone under SGLang's prefix and a journal
        "[2026-03-07 08:00:00] AssertionError: --enable-dp-attention and --enable-pdmux are mutually exclusive.",
        "Mar 07 08:00:00 node1 python3[41]: ValueError: Cannot enable both --enable-lora and --enable-pdmux.",
        # vLLM's V1 engine refusing another flag
        "(APIServer pid=7) NotImplementedError: VLLM_USE_V1=1 is not supported with --preemption-mode.",
        # pydantic's report for another of vLLM's argument configs
        "(APIServer pid=7) pydantic_core._pydantic_core.ValidationError: 2 validation errors for ParallelConfig",
        # checks raised in vLLM's parallel config and argument handling, in other words
        _tb("/usr/local/lib/python3.12/dist-packages/vllm/config/parallel.py", "__post_init__",
            "ValueError: data_parallel_size_local (4) must be <= data_parallel_size (2)"),
        _tb("/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", "create_engine_config",
            "NotImplementedError: --kv-sharing-fast-prefill is not supported with this attention backend",
            prefix="(APIServer pid=7) "),
    ]
    assert_named_by_a_signature(named, "invalid_server_args")


def test_forty_sixth_round_trap_flag_words_that_are_no_refusal_or_another_cause():
    # a help text naming two flags that exclude each other
    assert diagnose("  --enable-hierarchical-cache  Enable hierarchical cache; mutually exclusive with "
                    "--disable-radix-cache. (default: False)").cls == "healthy"
    # the V1 engine refusing a model's architecture is not a flag
    assert diagnose("NotImplementedError: VLLM_USE_V1=1 is not supported with ['MllamaForConditionalGeneration'].") \
        .cls != "invalid_server_args"
    # a draft method refused in arg_utils.py stays out of this class (speculative settings have their own)
    assert diagnose(_tb("/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", "create_engine_config",
                        "NotImplementedError: Draft model speculative decoding is not supported yet.")).cls \
        != "invalid_server_args"
    # a traceback cut inside arg_utils.py names nothing (cut = false)
    cut = ("Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1190, in '
           "create_engine_config\n"
           "    model_config = self.create_model_config()")
    assert diagnose(cut).cls != "invalid_server_args"
    # pydantic failing vLLM's ModelConfig (the model, not a flag) is not named by this class's header rule
    assert diagnose("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                    "  Value error, Invalid repository ID or local directory specified: 'x'.").cls \
        != "invalid_server_args"


# A review of rounds 45 and 46: each test fails before its fix (docs/diagnose.md, "A review of rounds 45 and 46")

def test_review46_pydantics_config_header_leaves_the_cause_to_its_value_error_line():
    # pydantic prints which config failed on the header and why on the "Value error, ..." line after it; the header
    # came first in line order, so it named every cause of a config's validation invalid_server_args
    header = "(APIServer pid=7) pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig\n"
    d = diagnose(header + "(APIServer pid=7)   Value error, FP8 KV cache is only supported on Hopper GPUs "
                 "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]")
    assert d.cls == "unsupported_gpu_arch", d.cause
    # a value error that names nothing else: still the flags' refusal, by the header (a symptom, without a remedy)
    d = diagnose(header + "(APIServer pid=7)   Value error, GPU memory utilization must be less than 1.0. Got 9.0. "
                 "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]")
    assert (d.cls, d.remedy) == ("invalid_server_args", None)
    assert diagnose("pydantic_core._pydantic_core.ValidationError: 2 validation errors for ParallelConfig").cls \
        == "invalid_server_args"


def test_review46_a_check_raised_in_vllms_config_modules_for_the_model_the_gpu_or_a_missing_package_is_no_flag():
    # round 46 took any ValueError / NotImplementedError raised in vLLM's arg_utils.py or its cache / scheduler /
    # parallel / compilation configs as a refused flag; these modules also refuse for the model's architecture, the
    # GPU and a package not installed (vLLM 0.11.0: _raise_or_fallback with model_config.architectures,
    # ParallelConfig.__post_init__'s "Unable to load Ray"; vLLM 0.9's "Compute Capability < 8.0")
    for path, fn, message in [
        ("engine/arg_utils.py", "_raise_or_fallback",
         "NotImplementedError: VLLM_USE_V1=1 is not supported with ['MllamaForConditionalGeneration']."),
        ("engine/arg_utils.py", "_raise_or_fallback",
         "NotImplementedError: VLLM_USE_V1=1 is not supported with Compute Capability < 8.0."),
        ("config/parallel.py", "__post_init__",
         "ValueError: Unable to load Ray: No module named 'ray'. Ray is required for multi-node inference, please "
         "install Ray with `pip install ray`."),
    ]:
        d = diagnose(_tb(f"/usr/local/lib/python3.12/dist-packages/vllm/{path}", fn, message, prefix="(APIServer pid=7) "))
        assert d.cls != "invalid_server_args", message
    # a flag refused there stays invalid_server_args (the round's probes and tests)
    assert diagnose(_tb("/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", "_raise_or_fallback",
                        "NotImplementedError: VLLM_USE_V1=1 is not supported with --logits-processor-pattern.")).cls \
        == "invalid_server_args"
    assert diagnose(_tb("/usr/local/lib/python3.12/dist-packages/vllm/config/scheduler.py", "_verify_args",
                        "ValueError: max_num_batched_tokens (2048) is smaller than max_model_len (32768). Please "
                        "increase max_num_batched_tokens or decrease max_model_len.")).cls == "invalid_server_args"


def test_review46_rays_port_collision_between_its_own_components_has_no_free_port_remedy():
    # Ray refuses ports its own components were given twice (a component inside the worker port range); the deploy's
    # free_port moves the server's HTTP port, which Ray's table does not hold, and would relaunch into the same refusal
    d = diagnose("ValueError: Ray component worker_ports is trying to use a port number 16379 that is used by other "
                 "components.")
    assert (d.cls, d.remedy) == ("port_in_use", None)
    # a port another process holds keeps the remedy, Windows' wording included
    assert diagnose("OSError: [WinError 10048] Only one usage of each socket address (protocol/network "
                    "address/port) is normally permitted").remedy == "free_port"


def test_review46_the_hierarchical_caches_host_pool_gets_no_larger_gpu_fraction():
    # SGLang sizes the host pool as --hicache-ratio times the GPU pool (when --hicache-size is not set): a larger
    # mem_fraction_static grows the GPU pool and with it the host pool that did not fit; the message asks for a
    # smaller hierarchical cache
    d = diagnose("ValueError: Not enough host memory available. Requesting 412.00 GB but only have 240.13 GB free. "
                 "Please reduce the size of the hierarchical cache.")
    assert (d.cls, d.remedy) == ("kv_cache_insufficient", None)
    # the GPU pool too small keeps its remedy
    assert diagnose("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.").remedy \
        == "raise:mem_fraction_static"


# --------------------------------------------------------------------------------------------
# review5: the transport forms of this round, behind one another

_ROLLOUT = [  # a vLLM server reaches ready, then its engine core fails (ms-swift#6866's shape)
    "(EngineCore_DP0 pid=1558904) INFO 12-03 10:27:30 [core.py:210] init engine (profile, create kv cache, warmup "
    "model) took 15.98 seconds",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:8001 (Press CTRL+C to quit)",
    "(EngineCore_DP0 pid=1558904) ERROR 12-03 10:29:14 [core.py:780] Invocation of collective_rpc method failed",
]


@pytest.mark.parametrize("launcher", ["(head, rank=0, pid=2345) ", "[1,0]<stderr>:"])
@pytest.mark.parametrize("transport", ["", "sglang-1  | ", "Dec 02 13:31:17 b300 sglang[536]: "])
def test_review5_behind_a_launcher_the_engine_names_the_writer_whatever_carried_both(transport, launcher):
    # the launcher's rank is the launched process's; the engine's own prefix inside it names the writer (DP0), under
    # a container's or a journal's name as without one: the failure after ready is the engine's, not the server's
    log = "\n".join(transport + launcher + x for x in _ROLLOUT)
    assert [ln.rank for ln in normalize(log)] == ["DP0", "rank0", "rank0", "DP0"]
    assert diagnose(log).cls == diagnose("\n".join(_ROLLOUT)).cls == "unknown"


def test_review5_a_level_in_brackets_after_a_records_time_is_its_level_not_a_relayed_childs_name():
    # an SGLang build's record head "[time][LEVEL]: " (tests/fixtures/crashlogs/unknown/sglang-9508-...): the bracket
    # after the time is the record's level, and the time the record's; a launcher's "[time] [/bin/sh]: " is a relay
    assert strip_prefixes("[2025-08-27 13:51:19][ERROR]: TP1 Scheduler hit an exception: x") == (
        "TP1 Scheduler hit an exception: x", {"time": "2025-08-27 13:51:19", "prefixed": True, "level": "ERROR"})
    assert strip_prefixes("[2026-01-22 20:05:33] [/bin/sh]: x") == ("x", {"source": "/bin/sh"})
    # each record keeps its time and is read at its level (a rankless record's traceback lines, which carry no
    # prefix, inherit neither: as before this round, under "[time] " alone)
    log = "\n".join([
        "[2025-08-27 13:51:19][INFO]: Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16",
        "[2025-08-27 13:51:20][WARNING]: Failed to import an optional kernel, falling back: Traceback (most recent "
        "call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/layers/fast.py", line 12, in <module>',
        "    import flashinfer_fast",
        "ModuleNotFoundError: No module named 'flashinfer_fast'",
        "[2025-08-27 13:51:21][INFO]: Memory pool end. avail mem=20.00 GB",
    ])
    got = [(ln.level, ln.time, ln.prefixed, ln.source) for ln in normalize(log)]
    assert got == [("INFO", "2025-08-27 13:51:19", True, None), ("WARNING", "2025-08-27 13:51:20", True, None),
                   *[(None, None, False, None)] * 3, ("INFO", "2025-08-27 13:51:21", True, None)]


def test_review5_cat_n_numbers_go_once_and_only_in_cat_n_shape():
    # `cat -n` writes "%6d\t" before every line, once: a line of its own that starts with numbers and tabs (du's
    # "52428800\t/dev/shm", a script's "0\t1.23\t4.56") keeps them
    assert texts(["52428800\t/dev/shm", "0\t1.23\t4.56", "RuntimeError: x"]) == [
        "52428800    /dev/shm", "0   1.23    4.56", "RuntimeError: x"]
    numbered = ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "", "0\t1.23\t4.56",
                "ValueError: x"]
    assert texts([f"{n:6}\t{x}" for n, x in enumerate(numbered, 1)]) == [*numbered[:3], "0   1.23    4.56",
                                                                          numbered[4]]
    # numbers not right-aligned in cat -n's six columns are a table's column, on every line of a paste too
    table = ["8\t1.23", "4\t2.46", "2\t4.92", "1\t9.84"]
    assert texts(table) == [x.expandtabs(4) for x in table]
    # a paste of one numbered line loses its number too
    assert texts(["   412\tRuntimeError: x"]) == ["RuntimeError: x"]


def test_review5_a_relay_and_a_journal_around_a_quoted_compose_paste_are_all_peeled():
    # a launcher's relay takes two layers ("[time] [/bin/sh]: "): under a journal, around a Markdown-quoted compose
    # line of vLLM's (tests/fixtures/crashlogs/deepgemm_jit_failure/miaai-119-...), seven layers come off
    line = ("Dec 02 13:31:17 b300 run[536]: [2026-01-22 20:05:33] [/bin/sh]: > vllm-dspark-1  | (Worker_TP1 pid=263) "
            "ERROR 08-23 03:00:54 [multiproc_executor.py:1004]   File x")
    text, info = strip_prefixes(line)
    assert (text, info["rank"], info["level"]) == ("  File x", "TP1", "ERROR")


def test_frames_alone_whose_paths_alone_name_a_class_do_not_crash_the_token_tier():
    # a paste of frames with no header and no exception line: the decisive lines hold no text (a frame counts as
    # its module path), and two module patterns of one class are two points. The tier crashed picking the line
    # with the most tokens out of none; the evidence is the first frame, the line that said something failed
    frames = ['  File "/srv/venv/lib/python3.12/site-packages/sglang/srt/speculative/eagle_worker.py", line 10, in '
              '__init__', '    self.init()',
              '  File "/srv/venv/lib/python3.12/site-packages/sglang/srt/models/dflash_draft.py", line 20, in init',
              '    x = y[0]']
    d = diagnose("\n".join(frames))
    assert d.cls == "speculative_config" and d.confidence < 0.6 and d.remedy is None
    assert d.evidence[0].line == frames[0].strip()


@pytest.mark.parametrize("line, cls", [
    # nvidia-smi's own words when it finds no driver to talk to (a container started without its GPUs, a
    # driver not loaded): it exits 9 with this one line, no "error" word; it read healthy
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.", "driver_mismatch"),
    # the driver's library missing from the process (no GPU runtime in the container), whoever loads it
    ("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory", "driver_mismatch"),
    # the driver API's name for PTX newer than the driver (its runtime name was known)
    ("RuntimeError: CUDA error: CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "driver_mismatch"),
    # a weight file that is a Git LFS pointer, or cut short, as pickle, torch and transformers say it
    ("_pickle.UnpicklingError: invalid load key, 'v'.", "checkpoint_corrupt"),
    ("RuntimeError: unexpected EOF, expected 3407873 more bytes. The file might be corrupted.", "checkpoint_corrupt"),
    # SGLang's early registry refusal of an architecture, in its own words
    ("ValueError: Unsupported architectures: LlavaForCausalLM. Supported list: ['LlamaForCausalLM']",
     "unsupported_architecture"),
    ("OSError: Unable to load weights from pytorch checkpoint file for '/models/x/pytorch_model.bin' at "
     "'/models/x/pytorch_model.bin'. If you tried to load a PyTorch model from a TF 2.0 checkpoint, please set "
     "from_tf=True.", "checkpoint_corrupt"),
])
def test_common_real_messages_of_known_classes_are_named_by_a_signature(line, cls):
    d = diagnose(line)
    assert (d.cls, d.confidence >= 0.5) == (cls, True), d.cause


def test_a_model_type_transformers_does_not_know_is_an_unsupported_architecture():
    # transformers older than the model: its config registry has no entry for config.json's model_type and
    # raises KeyError('<model_type>') from configuration_auto, whatever the model; a KeyError elsewhere is not it
    frames = ['Traceback (most recent call last):',
              '  File "/opt/venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", line '
              '1023, in from_pretrained', '    config_class = CONFIG_MAPPING[config_dict["model_type"]]',
              '  File "/opt/venv/lib/python3.10/site-packages/transformers/models/auto/configuration_auto.py", line '
              '725, in __getitem__', '    raise KeyError(key)']
    assert diagnose("\n".join([*frames, "KeyError: 'deepseek_v32'"])).cls == "unsupported_architecture"
    elsewhere = [frames[0], '  File "/opt/venv/lib/python3.10/site-packages/vllm/config.py", line 9, in f',
                 "    x = d[k]", "KeyError: 'deepseek_v32'"]
    assert diagnose("\n".join(elsewhere)).cls == "unknown"
    # cut at the raise statement, the statement says what was raised; cut before it inside the registry, it
    # names nothing (the module raises other errors too)
    assert diagnose("\n".join(frames)).cls == "unsupported_architecture"
    assert diagnose("\n".join(frames[:3])).cls == "unknown"


@pytest.mark.parametrize("errno, why", [(13, "permission denied"), (99, "cannot assign requested address")])
def test_uvicorns_bind_error_after_its_startup_complete_is_no_ready_server(errno, why):
    # uvicorn logs "Application startup complete." (its app's lifespan) BEFORE it binds the socket: a bind that
    # fails then (a port under 1024 for a server that is not root, an address the node does not have) ends the
    # process, which never listened. It read healthy and ready
    log = ["INFO:     Started server process [11820]", "INFO:     Waiting for application startup.",
           "INFO:     Application startup complete.",
           f"ERROR:    [Errno {errno}] error while attempting to bind on address ('10.9.9.9', 80): {why}",
           "INFO:     Waiting for application shutdown.", "INFO:     Application shutdown complete."]
    d = diagnose("\n".join(log))
    assert d.cls != "healthy" and not d.ready, d.cause
    assert f"[Errno {errno}] error while attempting to bind on address" in d.cause
    # the ready line it gives when it binds stays ready
    served = [*log[:3], "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"]
    assert diagnose("\n".join(served)).ready


@pytest.mark.parametrize("line", [
    "free(): invalid pointer", "double free or corruption (out)", "munmap_chunk(): invalid pointer",
    "malloc(): unaligned tcache chunk detected", "corrupted size vs. prev_size",
    "*** stack smashing detected ***: terminated", "free(): double free detected in tcache 2"])
def test_glibcs_own_abort_messages_are_a_dying_process(line):
    # glibc aborts the process after these lines (SIGABRT); a paste often ends with the line alone, without the
    # shell's "Aborted (core dumped)". They read healthy; after a ready line they are a death too
    assert diagnose("\n".join(["Loading safetensors checkpoint shards: 100% Completed", line])).cls == "unknown"
    ready = "INFO 05-01 10:00:09 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"
    assert diagnose("\n".join([ready, line])).cls == "unknown"
    # a line that only names the functions is none: a symbol in a backtrace, a sentence about a fix
    assert diagnose("\n".join([ready, "  see free() and malloc() in the allocator docs"])).cls == "healthy"


def test_the_failure_prefilter_lets_through_each_kind_of_failure_line():
    # first_failure skips a line without any word a failure pattern needs, cheaply (plain substrings, not one regex
    # of forty alternatives: a third of a 50,000-line log's time). It is part of what a failure line is (FAILURE alone
    # would read "model.safetensors.index.json: 36.4kB" as one); every fixture's diagnosis rests on it, and each kind
    # of failure line passes it, the two shapes that hold no word included
    from noderig.diagnose.startup import _failure_hinted

    for line in ["RuntimeError: x", "Traceback (most recent call last):", "Killed", "Segmentation fault (core dumped)",
                 "段错误 (核心已转储)", "terminate called after throwing an instance of 'c10::Error'", "  what():  x",
                 "sglang.service: Main process exited, code=exited, status=1/FAILURE", "free(): invalid pointer",
                 "[E530 13:41:17.1 x.cpp:6] x", "[E ProcessGroupNCCL.cpp:563] x", "CUDA error: no kernel image",
                 "thread 'main' panicked at src/main.rs:1", "*** SIGSEGV received at time=1 ***"]:
        assert _failure_hinted(line.lower()), line
    assert not _failure_hinted("info 05-01 [loader.py:1] loading weights took 12.3 s")
    assert not _failure_hinted("model.safetensors.index.json: 36.4kb [00:00, 80.0mb/s]")



def test_a_flood_of_one_error_reads_each_distinct_line_once_and_remembers_a_bounded_amount():
    # a server that fails often logs one error again and again (every rank, every request): find_matches reads a
    # line (its text, raw text, continuation) once; what it remembers is bounded in lines and in each line's length,
    # so a paste of any size cannot grow it without end (the time a flood costs is bench/diagnose.py's "error_flood")
    from noderig.diagnose import matching

    asked = []

    def line_hits(text, raw, wrapped):
        asked.append(text)
        return frozenset({(0, "e")}) if "error" in text else frozenset()
    hits = matching._remembering(line_hits, matching._line_key)
    oom = "CUDA error: out of memory"
    assert [hits(oom, oom, (oom, None)) for _ in range(3)] == [frozenset({(0, "e")})] * 3
    assert hits("loading", "loading", ("loading", None)) == frozenset() and asked == [oom, "loading"]
    assert hits(oom, oom, (oom + " x", " x")) and asked[-1] == oom  # another continuation: read again
    long = "error " * (matching._SEEN_TEXT_MAX // 6 + 1)
    hits(long, long, (long, None)), hits(long, long, (long, None))
    assert asked.count(long) == 2  # too long to remember: read again
    for n in range(matching._SEEN_MAX + 10):
        hits(f"line {n}", "", ("", None))
    asked.clear()
    hits(f"line {matching._SEEN_MAX + 5}", "", ("", None))  # past the bound: not remembered
    hits("line 1", "", ("", None))  # remembered before the bound was reached
    assert asked == [f"line {matching._SEEN_MAX + 5}"]


def test_an_exception_line_alone_is_remembered_by_its_words_one_with_frames_is_not():
    from noderig.diagnose import matching
    from noderig.diagnose.tracebacks import Frame, TracebackSection

    alone = TracebackSection(exc_type="RuntimeError", message="CUDA error: out of memory", exc_index=3)
    assert matching._section_key("RuntimeError: CUDA error: out of memory", alone) is not None
    # a signature may ask where it was raised: the same words from other frames may be another class
    framed = TracebackSection(frames=[Frame(file="/x/sgl_kernel/__init__.py", line=1, function="f")],
                              exc_type="RuntimeError", message="CUDA error: out of memory", exc_index=3)
    assert matching._section_key("RuntimeError: CUDA error: out of memory", framed) is None
    assert matching._section_key("E: " + "x" * matching._SEEN_TEXT_MAX, alone) is None


def test_a_flood_of_one_error_on_every_rank_names_it_with_each_rank():
    flood = "".join(f"[2026-01-22 20:05:33 TP{i % 8}] RuntimeError: CUDA error: out of memory\n" for i in range(2000))
    d = diagnose("[2026-01-22 20:05:30 TP0] Load weight end. type=DeepseekV3ForCausalLM\n" + flood)
    assert d.cls == "cuda_oom"
    assert set(d.evidence[0].rank.split(",")) == {f"TP{r}" for r in range(8)}

# transformers reading a checkpoint's config.json that does not parse (an empty or cut-short copy) is a corrupt
# checkpoint file (the fifty-fourth round's OmniParser 130 and VideoAgent 3); a JSON error about another file is not
@pytest.mark.parametrize("line, want", [
    ("OSError: It looks like the config file at '/models/k2/config.json' is not a valid JSON file.",
     "checkpoint_corrupt"),
    ("OSError: It looks like the config file at 'C:\\\\hf\\\\snapshots\\\\abc\\\\config.json' is not a valid JSON file.",
     "checkpoint_corrupt"),
    ("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", "unknown"),
    ("ValueError: the request body is not a valid JSON file", "unknown"),
])
def test_a_config_json_that_does_not_parse_is_a_corrupt_checkpoint(line, want):
    assert diagnose(line).cls == want


# the launch refused by what runs it, before the server printed anything: no class names these, but each is a failure
@pytest.mark.parametrize("line", [
    "bash: vllm: command not found", "zsh: command not found: vllm", "fish: Unknown command: sglang",
    "/usr/bin/python3: No module named sglang.launch_server", r"C:\venv\Scripts\python.exe: No module named vllm",
    "python3: can't open file '/workspace/serve.py': [Errno 2] No such file or directory",
    # (Docker's "could not select device driver ... with capabilities: [[gpu]]" was one; round 182 named it driver_mismatch)
    'docker: Error response from daemon: Conflict. The container name "/vllm" is already in use by container "3f2a".',
    'docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime '
    'create failed: runc create failed: unable to start container process: exec: "vllm": executable file not found in '
    '$PATH: unknown.',
    # what a container runtime lists for a container that failed: kubectl get pods, docker ps
    "pod/vllm-0   0/1   Error   3 (40s ago)   2m", "vllm-0                    0/1     Init:Error   0          10s",
    'abc123   vllm/vllm-openai:latest   "vllm serve"   2 minutes ago   Exited (137) 5 seconds ago   vllm',
])
def test_a_launch_the_shell_python_or_docker_refused_is_a_failure(line):
    d = diagnose(line)
    assert d.cls == "unknown" and not d.healthy


@pytest.mark.parametrize("line", [
    # a note that an optional module is missing, at INFO, and a sentence about a command: no launch refused
    "INFO: No module named 'flash_attn' found, using the default attention backend",
    "Tip: if you see 'command not found', add ~/.local/bin to PATH",
    # a pod running, a container that exited cleanly
    "vllm-0   1/1   Running   0   2m",
    'abc123   vllm/vllm-openai:latest   "vllm serve"   2 minutes ago   Exited (0) 5 seconds ago   vllm',
])
def test_trap_words_of_a_refused_launch_in_a_note_are_no_failure(line):
    assert diagnose(line).cls == "healthy"


@pytest.mark.parametrize("text", ["a" * 3000 + " error", "a." * 1500 + " error", "错" * 3000 + " error"])
def test_a_long_word_path_or_cjk_run_before_a_failure_word_is_read(text):
    # no exception is named in them; bench/diagnose.py times them at 200,000 characters (they were quadratic)
    assert diagnose(text).cls == "healthy"
    assert diagnose(text.replace(" error", "ValueError: x")).cls == "unknown"


# a traceback that rose to a script's top level after the ready line: that process ended (Langchain-Chatchat's
# launcher printed uvicorn's ready line for its controller, then its worker's load raised in llm_api.py's <module>)
_READY_THEN = ["INFO:     Uvicorn running on http://0.0.0.0:20001 (Press CTRL+C to quit)"]
_TOP_LEVEL_FRAMES = ["Traceback (most recent call last):",
                     '  File "/srv/app/server/llm_api.py", line 230, in <module>',
                     "    run_model_worker()",
                     '  File "/srv/app/server/llm_api.py", line 120, in run_model_worker']


@pytest.mark.parametrize("tail", [[], ["ValueError: Loading /data/model requires you to execute the configuration file"]])
def test_a_traceback_that_reached_a_scripts_top_level_after_ready_is_a_failure(tail):
    d = diagnose("\n".join(_READY_THEN + _TOP_LEVEL_FRAMES + tail))
    assert not d.healthy and d.cls != "healthy"


@pytest.mark.parametrize("before, tail", [
    ([], ["KeyboardInterrupt"]),  # Ctrl-C at the top level: the stop asked for
    (["INFO:     Received SIGTERM, shutting down"], ["RuntimeError: event loop closed"]),
])
def test_trap_a_top_level_traceback_of_a_stop_asked_for_after_ready_stays_healthy(before, tail):
    assert diagnose("\n".join(_READY_THEN + before + _TOP_LEVEL_FRAMES + tail)).cls == "healthy"


def test_trap_a_requests_traceback_after_ready_that_the_server_survived_stays_healthy():
    request_frames = ["ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
                      '  File "/usr/lib/python3/site-packages/uvicorn/protocols/http/httptools_impl.py", line 409, '
                      "in run_asgi", "    result = await app(", "ValueError: prompt is too long"]
    assert diagnose("\n".join(_READY_THEN + request_frames)).cls == "healthy"


_EXITED_NONZERO = [
    "vllm-1 exited with code 1",  # docker compose
    "Process finished with exit code 1",  # an IDE's run window
    'The terminal process "/bin/bash \'-c\', \'vllm serve Qwen/Qwen3-8B\'" terminated with exit code: 1.',  # VS Code
    "PM2        | App [vllm:0] exited with code [1] via signal [SIGINT]",
    "[1]+  Exit 1                  python -m sglang.launch_server --model-path Qwen/Qwen3-8B",  # bash's job report
    "make: *** [Makefile:10: serve] Error 1",
    "make[1]: *** [serve] Error 2",
    "sglang   lmsysorg/sglang:latest   Exited (1)",  # docker ps, its status last
    "Job failed: exit code 1",  # GitLab CI
    # killed or given up on by its supervisor: the kubelet after a failed liveness probe, systemd after restarts
    "  Normal   Killing    2m   kubelet  Container vllm failed liveness probe, will be restarted",
    "sglang.service: Start request repeated too quickly.",
]


@pytest.mark.parametrize("line", _EXITED_NONZERO)
def test_a_process_that_exited_non_zero_as_what_ran_it_says_is_a_failure(line):
    assert diagnose(line).cls == "unknown"


@pytest.mark.parametrize("line", _EXITED_NONZERO)
def test_a_non_zero_exit_after_the_ready_line_is_a_server_that_died(line):
    d = diagnose("\n".join(_READY_THEN + [line]))
    assert d.cls == "unknown" and not d.healthy


@pytest.mark.parametrize("line", [
    "vllm-1 exited with code 0", "[1]+  Done                    python -m sglang.launch_server",
    "make: *** [Makefile:10: serve] Interrupt",
    # the codes of the SIGTERM and SIGINT an operator stops a ready server with
    "vllm-1 exited with code 143", "Process finished with exit code 130", "Worker process exited with code -15",
    # a health check's HTTP status is no exit
    "WARNING 01-22 10:00:00 [monitor.py:40] health check failed with status 503",
])
def test_trap_a_clean_exit_or_a_stop_asked_for_after_ready_stays_healthy(line):
    assert diagnose("\n".join(_READY_THEN + [line])).cls == "healthy"


# host_oom (round 74): the host's RAM ran out and the OOM killer, a memory limit or Ray's memory monitor killed
@pytest.mark.parametrize("lines", [
    ["[Tue Mar  3 10:00:01 2026] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,task=python3,pid=91"],
    ["[ 912.220113] Out of memory: Killed process 4242 (python3) total-vm:98109076kB, anon-rss:94095848kB"],
    ["[ 912.220100] Tasks state (memory values in pages):"],
    ["(raylet) node_manager.cc:3069: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
     "crashed due to other reasons at node (ID: 3f2a, IP: 10.0.0.5) over the last time period."],
    ["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
     "Memory on the node (IP: 10.0.0.5, ID: 3f2a) where the task (actor ID: 9c1d, name=RayWorkerWrapper.__init__, "
     "pid=88, memory used=61.2GB) was running was 240.1GB / 251.7GB (0.9539), which exceeds the memory usage "
     "threshold of 0.95. Ray killed this worker (ID: 77ab) because it was the most recently scheduled task"],
    # the shell's SIGKILL report with nothing failed before it: alone, glued to a progress bar, bash's job line
    ["INFO 03-03 10:00:00 [default_loader.py:262] Loading weights took 12.1 seconds",
     "Loading safetensors checkpoint shards:  62% Completed | 40/64 [01:12<00:43,  1.81s/it]", "Killed"],
    ["Loading checkpoint shards:  50%|#####     | 1/2 [00:31<00:31, 31.20s/it]Killed"],
    ["./serve.sh: line 7: 51234 Killed                  python3 -m sglang.launch_server --model-path x"],
    # systemd's account in the unit's journal (noderig's own unit), the kernel's or systemd-oomd's kill
    ["Dec 02 13:31:17 b300 systemd[1]: sglang.service: A process of this unit has been killed by the OOM killer.",
     "Dec 02 13:31:17 b300 systemd[1]: sglang.service: Main process exited, code=killed, status=9/KILL",
     "Dec 02 13:31:17 b300 systemd[1]: sglang.service: Failed with result 'oom-kill'."],
    ["[2026-12-02 13:31:10 TP0] Load weight begin. avail mem=178.21 GB",
     "sglang.service: Failed with result 'oom-kill'."],
    # systemd-oomd's kill ends the unit with the same result
    ["sglang.service: systemd-oomd killed 12 process(es) in this unit.", "sglang.service: Failed with result "
     "'oom-kill'."],
])
def test_the_hosts_memory_killing_the_server_is_host_oom(lines):
    d = diagnose("\n".join(lines))
    assert d.cls == "host_oom" and not d.healthy and d.fix


@pytest.mark.parametrize("lines, cls", [
    # a launcher that kills its own process tree after an error: the shell's "Killed" is that error's consequence
    (["[2026-03-03 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/v/sglang/srt/managers/scheduler.py", line 9, in run_scheduler_process',
      "RuntimeError: No space left on device (/dev/shm)", "Killed"], "shm_too_small"),
    (["KeyError: 'model.layers.0.self_attn.k_norm.weight'", "Killed"], "unknown"),
    # Ray's list of potential root causes for any dead actor names the OOM killer: no evidence
    (["The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
      "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root "
      "causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force "
      "is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors."], "unknown"),
    # "Killed" inside a sentence or an INFO record is no shell's report
    (["INFO 03-03 10:00:00 [engine.py:1] Killed 2 idle requests after the timeout"], "healthy"),
    # a stop's SIGKILL names no memory
    (["sglang.service: State 'stop-sigterm' timed out. Killing.",
      "sglang.service: Main process exited, code=killed, status=9/KILL",
      "sglang.service: Failed with result 'timeout'."], "unknown"),
])
def test_trap_killed_after_another_failure_or_in_a_sentence_is_no_host_oom(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("line", [
    # what runs the server giving up on its start (modal's runner, a harness's readiness wait)
    "Runner failed with exception: Runner has been initializing for too long: 300 seconds",
    "Runner has been initializing for too long: 300 seconds",
    "Inference server did not become healthy within 3600s",
    "The server did not become ready within 600 s; giving up",
    "Worker failed with exception: connection reset",
])
def test_a_start_given_up_on_or_failed_with_an_exception_is_a_failure(line):
    assert diagnose(line).cls == "unknown"


@pytest.mark.parametrize("line", [
    "INFO 05-01 12:00:00 [api_server.py:1] Waiting for the server: still starting after 300 seconds",
    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
])
def test_trap_a_start_that_is_slow_but_not_given_up_on_stays_healthy(line):
    assert diagnose(line).cls == "healthy"


@pytest.mark.parametrize("line", [
    "Shard 0 failed to start",  # TGI's launcher, its record's level and time cut off
    "Worker 3 failed to start",
    # nvidia-smi asking a GPU that no longer answers (after an Xid 79)
    "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error",
])
def test_a_shard_that_failed_to_start_or_a_gpu_that_no_longer_answers_is_a_failure(line):
    assert diagnose(line).cls == "unknown"


def _sglang_0523_resolution_traceback(innermost: list[str]) -> str:
    """A `python -m sglang.launch_server` start failing in sglang 0.5.23's argument resolution (its checks moved from
    server_args.py into arg_groups/*_hook.py); `innermost` is the raising frame and the exception line."""
    sp = "/opt/sglang/.venv/lib/python3.11/site-packages/sglang"
    return "\n".join([
        "Traceback (most recent call last):",
        f'  File "{sp}/launch_server.py", line 29, in run_server', "    server_args.resolve_once()",
        f'  File "{sp}/srt/server_args.py", line 277, in resolve_once', "    run_resolution_pipeline(self)",
        f'  File "{sp}/srt/arg_groups/pipeline.py", line 278, in run_resolution_pipeline',
        "    run_hook(handle_context_parallelism, server_args)",
        f'  File "{sp}/srt/arg_groups/resolution_hooks.py", line 139, in run_hook', "    step(server_args)",
        *innermost])


@pytest.mark.parametrize("innermost, cls", [
    # round 75: a check of the arguments, whatever its words, raised where sglang 0.5.23 resolves them
    (['  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/srt/arg_groups/parallel_hook.py", line 178, '
      'in handle_context_parallelism', "    assert cfg.pp_size == 1, (",
      "AssertionError: PP is not supported with context parallelism"], "invalid_server_args"),
    (['  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/srt/arg_groups/serving_hook.py", line 69, '
      'in handle_ssl_validation', "    raise ValueError(",
      "ValueError: SSL key file not found: '/etc/ssl/private/server.key'. Please check the --ssl-keyfile path."],
     "invalid_server_args"),
    # trap: a refusal there that names the GPU generation it needs is the GPU's
    (['  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/srt/arg_groups/kv_cache_hook.py", line 107, '
      'in handle_mxfp8_kv_cache_compatibility', "    raise ValueError(",
      "ValueError: --kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU for the block-scaled operands used by "
      "the FA4 MXFP8 attention path."], "unsupported_gpu_arch"),
    # the generation a check runs on, beside another flag it needs, is no GPU's refusal: the command line's
    (['  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/srt/arg_groups/attention_hook.py", line 341, '
      'in handle_linear_attn_backends', "    raise ValueError(",
      "ValueError: --linear-attn-decode-backend flashinfer on SM100+ requires --mamba-ssm-dtype bfloat16, got "
      "float32"], "invalid_server_args"),
    # trap: a speculative-decoding check there stays speculative_config (its own signature, above by priority)
    (['  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/srt/arg_groups/speculative_hook.py", line 103, '
      'in handle_speculative_decoding', "    raise ValueError(",
      "ValueError: Gemma4AssistantForCausalLM draft requires --speculative-algorithm NEXTN or EAGLE; EAGLE3 is not "
      "supported for this draft architecture."], "speculative_config"),
])
def test_round_75_sglang_0523_argument_checks_raised_in_arg_groups(innermost, cls):
    assert diagnose(_sglang_0523_resolution_traceback(innermost)).cls == cls


def test_round_75_a_traceback_cut_inside_arg_groups_names_nothing():
    # as for server_args.py: a cut there holds no refusal to read (the same files probe the GPU and its libraries)
    cut = _sglang_0523_resolution_traceback([
        '  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/srt/arg_groups/platform_hook.py", line 40, '
        'in handle_platform_defaults'])
    assert diagnose(cut).cls == "unknown"


@pytest.mark.parametrize("lines, cls", [
    # round 75: pydantic's report names the config; the tier reads the reason listed under it
    (["pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
      '  Value error, kv_cache_dtype="float16" is incompatible with dtype="bfloat16". Please set `--kv-cache-dtype` '
      "to `auto` or `bfloat16`. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
      "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"], "invalid_server_args"),
    # the capability wordings of vLLM's checks: "Required" (one exact capability), "Min", "Minimum"
    (["RuntimeError: Quantization scheme is not supported for the current GPU. Required capability: 90. Current "
      "capability: 80."], "unsupported_gpu_arch"),
    (["RuntimeError: Quantization scheme is not supported for the current GPU. Min capability: 80. Current "
      "capability: 75."], "unsupported_gpu_arch"),
    # trap: the --kv-cache-dtype flag names the cache's type, not a cache too small for memory
    (["RuntimeError: --kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120. Use --kv-cache-dtype=fp4_mx_block16 "
      "for the block-size-16 FP4 recipe."], "unsupported_gpu_arch"),
    # trap: the KV cache itself too small stays kv_cache_insufficient
    (["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
      "initializing the engine."], "kv_cache_insufficient"),
])
def test_round_75_config_reasons_and_capability_wordings(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("line, cls", [
    # round 75: a refusal whose words say the GPU generation is what it needs, raised anywhere
    ("ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.", "unsupported_gpu_arch"),
    ("ValueError: --moe-runner-backend flashinfer_trtllm needs a Blackwell (SM100+) device for packed NVFP4 experts, "
     "but this device reports SM90.", "unsupported_gpu_arch"),
    ("ValueError: Current platform does not support NVFP4 quantization. Please use Blackwell and above.",
     "unsupported_gpu_arch"),
    # the record SGLang's managers log it in, kept with the exception line joined: read as the exception line
    ("[2026-12-05 10:00:05 TP0] Scheduler hit an exception: AssertionError: FlashAttention v3 Backend requires "
     "SM>=80 and SM<=90. Please use `--attention-backend flashinfer`.", "unsupported_gpu_arch"),
    # traps: a thing it needs on a generation, and a list of backends with what each would need
    ("RuntimeError: moe_runner_backend=flashinfer_mxfp4 on SM90 requires the interleave_moe_weights_for_sm90 helpers "
     "from FlashInfer PR 2531.", "unknown"),
    ("ValueError: Unsupported KDA prefill backend: foo. KDA supports 'triton', 'helion', 'flashinfer', 'flashkda', "
     "'cutedsl', 'nvidia_kda', or 'ptx_kda' (cutedsl/nvidia_kda prefill need SM100, ptx_kda SM100 or SM103).",
     "unknown"),
])
def test_round_75_a_refusal_that_needs_a_gpu_generation(line, cls):
    assert diagnose(line).cls == cls


@pytest.mark.parametrize("line, remedy", [
    # round 75: the deploy's repair switches the attention backend only when attention is what the GPU cannot run
    ("ValueError: TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 GPUs. Please use "
     "a different prefill backend.", "set:attention_backend=triton"),
    ("ValueError: Current platform does not support NVFP4 quantization. Please use Blackwell and above.", None),
    ("ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.", None),
    ("RuntimeError: --kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120.", None),
    ("RuntimeError: Quantization scheme is not supported for the current GPU. Min capability: 80. Current capability: "
     "75.", None),
])
def test_round_75_another_attention_backend_only_for_attention(line, remedy):
    d = diagnose(line)
    assert d.cls == "unsupported_gpu_arch" and d.remedy == remedy


@pytest.mark.parametrize("path, func, exc, cls", [
    # round 76: "KV cache" names the component, not that it is too small. The checks of the KV cache's dtype or
    # layout that the deploy's kernels raise (FlashInfer 0.7.2, sglang 0.5.23) were kv_cache_insufficient, whose fix
    # raises the memory fraction for a cache that is not short of memory
    (f"{_SP}/flashinfer/xqa.py", "xqa", "AssertionError: KV cache must be fp8 when output is fp8", "unknown"),
    (f"{_SP}/flashinfer/decode.py", "run", "NotImplementedError: cute-dsl decode backend does not support NVFP4 KV cache",
     "unknown"),
    (f"{_SP}/flashinfer/prefill.py", "plan", "ValueError: kv_cache must be rank-3, got 4", "unknown"),
    (f"{_SP}/sglang/srt/layers/attention/flashattention_backend.py", "__init__",
     "RuntimeError: MXFP8 KV cache requires the FA4 backend.", "unknown"),
    (f"{_SP}/sglang/srt/models/llama.py", "load_kv_cache_scales",
     "RuntimeError: Self attention has no KV cache scaling factor attribute!", "unknown"),
    # a refusal of the flags beside it stays the command line's
    (f"{_SP}/vllm/config/vllm.py", "__post_init__", "ValueError: --use-replayssm is incompatible with KV connectors "
     "(P/D disaggregation, KV cache offload)", "invalid_server_args"),
    # an allocation that failed while the cache was built is the GPU's memory running out (cuda_oom, whose fix lowers
    # the fraction), not a budget that leaves the cache too little room (before, the two words tied: unknown)
    # (raised in SGLang's mem_cache/, whose allocators say "out of memory" for a pool with no free slot, it still ties)
    (f"{_SP}/sglang/srt/model_executor/model_runner.py", "init_memory_pool", "RuntimeError: ran out of memory while "
     "building the KV cache", "cuda_oom"),
    (f"{_SP}/sglang/srt/mem_cache/memory_pool.py", "__init__", "RuntimeError: ran out of memory while building the "
     "KV cache", "unknown"),
    # traps: the cache with too little room keeps its class, in any component's words
    (f"{_SP}/sglang/srt/mem_cache/memory_pool.py", "__init__", "RuntimeError: Not enough memory for the KV cache, "
     "lower the context length", "kv_cache_insufficient"),
    (f"{_SP}/sglang/srt/hardware_backend/mlx/model_runner_stub.py", "init", "RuntimeError: MLX auxiliary-state "
     "cache is too small to serve any requests: max_mamba_cache_size=0", "kv_cache_insufficient"),
])
def test_round_76_a_kv_cache_word_names_the_component_not_its_size(path, func, exc, cls):
    assert diagnose(_tb(path, func, exc)).cls == cls


@pytest.mark.parametrize("exc, cls", [
    # round 76: vLLM 0.34 sizes the KV cache in v1/core/kv_cache_planning.py (before, kv_cache_utils.py): a cut
    # there stopped at the memory check, and its messages are the cache's
    ("", "kv_cache_insufficient"),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
     "initializing the engine.", "kv_cache_insufficient"),
    # trap: a layout the planner cannot express is no cache too small
    ("ValueError: KV cache tensors must share one device backing allocation, but got sizes [1, 2].", "unknown"),
])
def test_round_76_vllm_034_sizes_the_kv_cache_in_kv_cache_planning(exc, cls):
    frames = _cut_frames(("vllm/v1/engine/core.py", "_initialize_kv_caches"),
                         ("vllm/v1/core/kv_cache_planning.py", "get_kv_cache_configs"),
                         ("vllm/v1/core/kv_cache_planning.py", "check_enough_kv_cache_memory"))
    assert diagnose(frames + ("\n" + exc if exc else "")).cls == cls


@pytest.mark.parametrize("line, cls", [
    # round 76: a JIT or build script that found no toolkit, in its own words (vLLM 0.34's fmha_sm100 JIT; a kernel
    # package built from source)
    ("RuntimeError: Cannot find CUDA_HOME. CUDA must be available to build the package.", "nvcc_not_found"),
    ("RuntimeError: Could not find CUDA installation. Please set CUDA_HOME environment variable.", "nvcc_not_found"),
    ("RuntimeError: Cannot find CUDA toolkit. Set CUDA_HOME.", "nvcc_not_found"),
    # trap: a toolkit found at the wrong place stays toolkit_misconfigured
    ("deepspeed.ops.op_builder.builder.MissingCUDAException: CUDA_HOME does not exist, unable to compile CUDA op(s)",
     "toolkit_misconfigured"),
])
def test_round_76_a_build_that_found_no_toolkit(line, cls):
    assert diagnose(line).cls == cls


@pytest.mark.parametrize("line, cls", [
    # round 76: the GPU generation a refusal needs, as a compute capability (FlashInfer 0.7.2's Blackwell kernels,
    # vLLM 0.34's torchao check): 26 raise sites in the deploy's kernels came out unknown
    ("RuntimeError: TRT-LLM MLA Blackwell requires compute capability 10.0 or 10.3, got 9.0", "unsupported_gpu_arch"),
    ("ValueError: torchao FP8 activation quantization config 'Float8DynamicActivationFloat8WeightConfig' requires GPU "
     "compute capability >= 8.9 (e.g., NVIDIA Ada Lovelace / Hopper or AMD MI300+)", "unsupported_gpu_arch"),
    ("NotImplementedError: DSA sparse-attention training needs a compute capability 10.0 / 10.3 / 10.7 device",
     "unsupported_gpu_arch"),
    # trap: a thing it needs that is no generation ("compute capability and SM count" to compile for) names nothing
    ("ValueError: compile target requires CUDA capability and SM count", "unknown"),
])
def test_round_76_a_refusal_that_needs_a_compute_capability(line, cls):
    assert diagnose(line).cls == cls


@pytest.mark.parametrize("config, reason, cls", [
    # round 76: vLLM 0.34's other configs built from flags alone, refused in pydantic's report
    ("MambaConfig", "Mamba SSU algorithm selection is only supported with the FlashInfer backend. Please set "
     "`--mamba-backend flashinfer`, or omit `--mamba-ssu-algorithm`.", "invalid_server_args"),
    ("LoRAConfig", "max_cpu_loras (2) must be >= max_loras (4).", "invalid_server_args"),
    ("ObservabilityConfig", "collect_detailed_traces requires `--otlp-traces-endpoint` to be set.",
     "invalid_server_args"),
    ("VllmConfig", "HiSparse does not support pipeline parallelism.", "invalid_server_args"),
    # VllmConfig's reason that names speculative decoding is the speculative settings', and a GPU's refusal the GPU's
    ("VllmConfig", "Speculative decoding with watermarking requires draft_sample_method='probabilistic'.",
     "speculative_config"),
    ("VllmConfig", "Fast prefill optimization for KV sharing is not compatible with EAGLE as EAGLE requires correct "
     "logits for all tokens while fast prefill gives incorrect logits for prompt tokens.", "speculative_config"),
    ("VllmConfig", "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
     "compute capability 7.5.", "unsupported_gpu_arch"),
    # traps: a config that also fails for the model or for no GPU found names nothing by its header
    ("ModelConfig", "The checkpoint you are trying to load has model type `foo` but Transformers does not recognize "
     "this architecture.", "unsupported_architecture"),
    ("DeviceConfig", "Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` to "
     "turn on verbose logging to help debug the issue.", "unknown"),
])
def test_round_76_vllm_034_configs_of_flags_alone(config, reason, cls):
    text = "\n".join([f"pydantic_core._pydantic_core.ValidationError: 1 validation error for {config}",
                      f"  Value error, {reason} [type=value_error, input_value=ArgsKwargs((), {{}}), "
                      "input_type=ArgsKwargs]",
                      "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"])
    assert diagnose(text).cls == cls


@pytest.mark.parametrize("line, cls", [
    # round 76: FlashInfer's check that its prebuilt kernels are of its own release, raised, logged or posted bare
    ("RuntimeError: flashinfer-jit-cache version (0.6.16+cu130) does not match flashinfer version (0.6.17). Please "
     "install the same version of both packages. Set FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this check.",
     "kernel_abi_mismatch"),
    ("flashinfer-cubin version (0.6.13) does not match flashinfer version (0.6.14). Please install the same version of "
     "both packages.", "kernel_abi_mismatch"),
    ("RuntimeError: flashinfer-cubin (0.6.8.post1) != flashinfer (0.6.10.post1) version mismatch",
     "kernel_abi_mismatch"),
    # an engine's minimum-version check of a kernel package; sgl-kernel's keeps its own class
    ("Exception: flashinfer_python is installed with version 0.2.3, which is less than the minimum required version "
     "0.2.5. Please reinstall the latest version with `pip install flashinfer_python --force-reinstall`",
     "kernel_abi_mismatch"),
    ("Exception: sgl-kernel is installed with version 0.0.5, which is less than the minimum required version 0.0.6. "
     "Please reinstall the latest version with `pip install sgl-kernel --force-reinstall`", "sgl_kernel_mismatch"),
    # trap: another package's minimum version is no kernel package's (transformers: a model's requirement)
    ("Exception: transformers is installed with version 4.40.0, which is less than the minimum required version "
     "4.45.0.", "unknown"),
])
def test_round_76_a_kernel_package_of_another_release(line, cls):
    assert diagnose(line).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # round 78: an extension built against another NumPy, by the ImportError NumPy's C-API import raises
    (["ImportError: numpy.core.multiarray failed to import"], "kernel_abi_mismatch"),
    (["Traceback (most recent call last):", '  File "/venv/lib/python3.12/site-packages/numba/__init__.py", line 9, in '
      "<module>", "    from numba.core import config", "ImportError: numpy._core.multiarray failed to import"],
     "kernel_abi_mismatch"),
    # trap: a model module SGLang skipped for it, in a server that went on to ready
    (["[2026-01-01 10:00:00] Ignore import error when loading sglang.srt.models.foo: numpy.core.multiarray failed to "
      "import", "[2026-01-01 10:00:09] The server is fired up and ready to roll!"], "healthy"),
])
def test_round_78_an_extension_built_against_another_numpy(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("path, func, exc, cls", [
    # round 76: the loader's words say what (a weight, a shard), not that it is missing: the tier names
    # checkpoint_incomplete only beside a state word (vLLM 0.34's loader: 38 raise sites named it, 14 after)
    (f"{_SP}/vllm/model_executor/model_loader/weight_cache/ipc_loader.py", "_connect",
     "WeightCacheUnavailableError: Cannot connect to weight cache daemon at /tmp/wc.sock: refused", "unknown"),
    (f"{_SP}/vllm/model_executor/model_loader/weight_cache/daemon.py", "__init__",
     "ValueError: The weight cache daemon does not support EPLB.", "unknown"),
    # traps: a weight or shard that is missing keeps the class
    (f"{_SP}/vllm/model_executor/model_loader/default_loader.py", "_prepare_weights",
     "RuntimeError: Cannot find any model weights with `/models/m`", "checkpoint_incomplete"),
    (f"{_SP}/vllm/models/step5/nvidia/model.py", "load_weights",
     "ValueError: Incomplete fused qkv+indexer weight for layers.3: missing shards ['k'].", "checkpoint_incomplete"),
])
def test_round_76_a_loader_error_is_no_missing_shard_without_the_word(path, func, exc, cls):
    assert diagnose(_tb(path, func, exc)).cls == cls


@pytest.mark.parametrize("line, cls", [
    # round 79: a check that names the draft and no cause, pasted without its traceback (SGLang 0.5.23's and vLLM
    # 0.34's speculative code: 227 raise sites were unknown so). Only speculative decoding runs a draft
    ("ValueError: draft_token_num must be positive, got 0.", "speculative_config"),
    ("RuntimeError: Draft model weight update requested, but no draft model is configured.", "speculative_config"),
    # a method's name inside a config key, and SGLang's DSpark, are the method's as DFlash and EAGLE are
    ("ValueError: Invalid dflash_config.block_size=0.", "speculative_config"),
    ("ValueError: Qwen3-Omni DSpark requires sample_from_anchor=true and dspark_bonus_anchor=false.",
     "speculative_config"),
    # traps: the draft is where it failed, not why. The deploy always runs one, so another cause's words decide
    ("ValueError: Not enough memory for the draft model's KV cache; increase --mem-fraction-static",
     "kv_cache_insufficient"),
    ("RuntimeError: draft model requires sm_90 or newer", "unsupported_gpu_arch"),
    ("error: invalid argument: --draft-model", "invalid_server_args"),
    # (an "invalid argument" that names no flag is a call's EINVAL, no command line's)
    ("RuntimeError: CUDA error: invalid argument", "unknown"),
    # an attribute a bug's AttributeError names is code the words do not place, not a draft (the catalog's rule)
    ("AttributeError: 'GPUModelRunner' object has no attribute 'drafter_cfg'", "unknown"),
])
def test_round_79_a_check_that_names_the_draft(line, cls):
    assert diagnose(line).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # round 80: a JIT build's linker that finds no CUDA library to link (the driver's mounted off LIBRARY_PATH)
    (["/usr/bin/ld: cannot find -lcuda: No such file or directory", "collect2: error: ld returned 1 exit status"],
     "toolkit_misconfigured"),
    (["/usr/bin/ld: cannot find -lcudart"], "toolkit_misconfigured"),
    # another library the linker cannot find is a failure still, of no known class (before: healthy)
    (["/usr/bin/ld: cannot find -lfoo"], "unknown"),
    # round 80: cuDNN's library, which torch's CUDA wheels load beside the toolkit's
    (["OSError: libcudnn_ops_infer.so.8: cannot open shared object file: No such file or directory"],
     "toolkit_misconfigured"),
    # round 79: NCCL's socket transport given a message of another size than the receive posted
    (["transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 10.0.0.2<59210> message truncated : receiving 1048576 "
      "bytes instead of 65536"], "nccl_failure"),
    # trap: NCCL's deprecation note names nothing
    (["gpu4:2201:2290 [1] NCCL WARN Environment variable NCCL_SOCKET_NTHREADS is deprecated",
      "INFO 01-01 00:00:02 [loader.py:1] Loading weights took 3.1 seconds"], "healthy"),
])
def test_rounds_79_and_80_a_link_a_library_and_a_message_of_another_size(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # round 79: NCCL's fatal set-up checks that say neither "failed" nor "error" were healthy logs
    (["node1:1:2 [0] init.cc:571 NCCL WARN Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000"],
     "nccl_failure"),
    (["node1:1:2 [0] init.cc:1043 NCCL WARN Mismatched NCCL version detected : rank 0 version 22105 rank 1 version "
      "21903"], "nccl_failure"),
    (["node1:1:2 [0] transport.cc:39 NCCL WARN No transport found for rank 1[2000] -> rank 9[2000]"], "nccl_failure"),
    # a peer that closed its socket is a failure, but a symptom: another rank's error before it is the cause
    (["node1:1:2 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by remote peer node2<4567>"],
     "nccl_failure"),
    (["[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
      "node1:1:2 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by remote peer node2<4567>"],
     "cuda_oom"),
    # trap: a server that went on past NCCL's warning got past it
    (["node1:1:2 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by remote peer node2<4567>",
      "[2026-01-01 00:00:05 TP0] Load weight begin. avail mem=70.00 GB",
      "[2026-01-01 00:00:09] The server is fired up and ready to roll!"], "healthy"),
])
def test_round_79_nccls_fatal_checks_without_the_word_error(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # round 79: SGLang's launcher on a node other than the first logs each scheduler that ended (no level, so it was
    # no failure); a non-zero code is a death, before the ready line or after it
    (["[2026-02-25 15:04:37] Scheduler or DataParallelController 848532 terminated with 255"], "unknown"),
    (["[2026-01-01 00:00:09] The server is fired up and ready to roll!",
      "[2026-01-01 01:00:00] Scheduler or DataParallelController 4242 terminated with -9"], "unknown"),
    # trap: code 0 is a clean stop
    (["[2026-01-01 00:00:00] Scheduler or DataParallelController 4242 terminated with 0"], "healthy"),
])
def test_round_79_a_scheduler_that_ended_on_another_node(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # round 79: the Hub's refusal of a fine-grained token without the gated-repositories permission, as
    # huggingface_hub's 403 quotes it: a bare line was healthy, the exception a guess by its key tokens
    (["403 Forbidden: Please enable access to public gated repositories in your fine-grained token settings to view "
      "this repository.."], "hf_gated_repo"),
    (["huggingface_hub.errors.HfHubHTTPError:  (Request ID: Root=1-6)", "",
      "403 Forbidden: Please enable access to public gated repositories in your fine-grained token settings to view "
      "this repository..", "Cannot access content at: https://huggingface.co/api/models/x/y.",
      "Make sure your token has the correct permissions."], "hf_gated_repo"),
])
def test_round_79_a_fine_grained_token_that_may_not_read_gated_repositories(lines, cls):
    d = diagnose("\n".join(lines))
    assert d.cls == cls and d.confidence >= 0.6 and "fine-grained" in d.fix


@pytest.mark.parametrize("innermost, cls", [
    # round 79: a traceback cut inside a model's own tokenizer class (transformers' models/*/tokenization_*.py: every
    # raise site there in transformers 5.25.0 is the tokenizer's) stopped while the tokenizer was built
    (("transformers/models/llama/tokenization_llama_fast.py", "__init__"), "tokenizer_error"),
    (("transformers/models/t5/tokenization_t5.py", "__init__"), "tokenizer_error"),
    # trap: the model's own modelling file is no tokenizer
    (("transformers/models/llama/modeling_llama.py", "forward"), "unknown"),
])
def test_round_79_a_cut_inside_a_models_tokenizer_class(innermost, cls):
    frames = _cut_frames(("vllm/transformers_utils/tokenizer.py", "get_tokenizer"), innermost)
    assert diagnose(frames).cls == cls


def test_round_76_a_record_inside_an_exception_groups_borders_is_no_part_of_its_message():
    # torch's ProcessGroupNCCL teardown warning, written by the rank after the exception inside the group's borders,
    # was read as the exception's message and named the failure nccl_failure (the paste-form test, after the tier
    # stopped reading the loader's words as checkpoint_incomplete's)
    text = "\n".join([
        "  + Exception Group Traceback (most recent call last):",
        '  |   File "/x/a.py", line 1, in <module>', "  |     main()",
        "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
        "  +-+---------------- 1 ----------------",
        "    | Traceback (most recent call last):",
        '    |   File "/x/b.py", line 3, in f', "    |     g()",
        '    | RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "x.cpp":995, please report a bug to PyTorch.',
        "    | [rank0]:[W714 12:14:21.601395867 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been "
        "destroyed before we destruct ProcessGroupNCCL.",
        "    +------------------------------------"])
    final = parse_tracebacks(normalize(text))[-1].final
    assert final.exc_type == "RuntimeError" and "NOT been destroyed" not in final.message
    assert diagnose(text).cls == "unknown"


# an SGLang start cut before its ready line (the healthy excerpts of issue 13): the two records below are what a
# newer SGLang prints on a model without generation_config.json and on an older transformers
_SG_NO_GENERATION_CONFIG = ("[2026-08-01 23:37:49] Failed to load generation config for org/m-INT4: org/m-INT4 does not "
                            "appear to have a file named generation_config.json. Checkout "
                            "'https://huggingface.co/org/m-INT4/tree/main' for available files.. Proceeding without "
                            "generation config.")
_SG_PROCESSOR_IMPORT = ("Ignore import error when loading sglang.srt.multimodal.processors.gemma4: cannot import name "
                        "'Gemma4AudioConfig' from 'transformers' (/usr/local/lib/python3.12/dist-packages/transformers/"
                        "__init__.py)")


@pytest.mark.parametrize("line", [_SG_NO_GENERATION_CONFIG, _SG_PROCESSOR_IMPORT])
def test_a_start_cut_before_ready_with_sglangs_optional_file_and_module_notes_is_healthy(line):
    log = ["[2026-08-01 23:37:33] server_args=ServerArgs(model_path='org/m-INT4', tp_size=1)", line,
           "[2026-08-01 23:37:50] Load weight begin. avail mem=115.36 GB"]
    d = diagnose("\n".join(log))
    assert d.cls == "healthy" and not d.ready, d.cause


def test_the_traps_of_sglangs_optional_file_and_module_notes():
    # the same missing-file words for a file the model needs, and without SGLang's going on, stay a failure
    assert diagnose("OSError: org/m does not appear to have a file named config.json. Checkout "
                    "'https://huggingface.co/org/m/tree/main' for available files.").cls == "checkpoint_incomplete"
    assert diagnose(_SG_NO_GENERATION_CONFIG.replace(" Proceeding without generation config.", "")).cls != "healthy"
    # an error glued after SGLang's words is not hidden (anchored at the end)
    assert diagnose(_SG_NO_GENERATION_CONFIG + " RuntimeError: CUDA error: out of memory").cls != "healthy"
    # another package's module whose import failed is no SGLang registry's note
    assert diagnose("Ignore import error when loading vendor.models.x: No module named 'y'\n"
                    "ImportError: No module named 'y'").cls != "healthy"


@pytest.mark.parametrize("lines", [
    # vLLM's dtype probe of a local directory given as the model (round 90's committed logs)
    ["(APIServer pid=1009) ERROR 09-10 23:26:29 [config.py:130] Error retrieving safetensors: Repo id must be in the "
     "form 'repo_name' or 'namespace/repo_name': '/data/gpt-oss-20b'. Use `repo_type` argument if needed., retrying 1 "
     "of 2",
     "(APIServer pid=1009) ERROR 09-10 23:26:31 [config.py:128] Error retrieving safetensors: Repo id must be in the "
     "form 'repo_name' or 'namespace/repo_name': '/data/gpt-oss-20b'. Use `repo_type` argument if needed."],
    # TensorFlow installed beside vLLM, imported with protobuf 5
    ["AttributeError: 'MessageFactory' object has no attribute 'GetPrototype'"] * 3,
])
def test_round_90_a_vllm_start_cut_before_ready_with_its_dtype_probe_or_tensorflows_noise_is_healthy(lines):
    log = ["INFO 09-10 23:26:06 [__init__.py:241] Automatically detected platform cuda.", *lines,
           "(APIServer pid=1009) INFO 09-10 23:26:31 [__init__.py:1750] Using max model len 16384"]
    d = diagnose("\n".join(log))
    assert d.cls == "healthy" and not d.ready, d.cause


def test_round_90_traps_the_protobuf_note_raised_and_another_error_glued():
    raised = ["Traceback (most recent call last):", '  File "/x/app.py", line 3, in <module>', "    import tensorflow",
              "AttributeError: 'MessageFactory' object has no attribute 'GetPrototype'"]
    assert diagnose("\n".join(raised)).cls == "unknown"
    # another attribute missing from protobuf's factory is no such note
    assert diagnose("AttributeError: 'MessageFactory' object has no attribute 'GetMessages'").cls != "healthy"


@pytest.mark.parametrize("line, cls", [
    ("cli_demo.sh: line 5: 12989 Killed", "host_oom"),  # round 91: the command is not echoed after it
    ("run.sh: line 19: 867080 Killed                  python -m vllm.entrypoints.openai.api_server", "host_oom"),
    ("run.sh: line 19: 867080 Killedx", "unknown"),
])
def test_round_91_bashs_report_of_a_killed_child(line, cls):
    assert diagnose(line).cls == cls


def test_round_93_sglangs_2026_record_head_gives_the_level_and_drops_the_file():
    lines = normalize("[2026-01-22 09:59:32] WARNING server_args.py:2184: Overlap scheduler is disabled when spec v2 is "
                      "off or using unsupported speculative algorithm.\n"
                      "[2026-01-22 09:59:40 TP0] ERROR scheduler.py:3101: Scheduler hit an exception\n"
                      "WARNING server_args.py:2184: the same head without the bracket's time")
    assert [(ln.level, ln.text[:19]) for ln in lines] == [
        ("WARNING", "Overlap scheduler i"), ("ERROR", "Scheduler hit an ex"), (None, "WARNING server_args")]
    # SGLang's warning that it turned the overlap scheduler off for speculative decoding is no failure
    assert diagnose("\n".join(["[2026-01-22 09:59:29] INFO server_args.py:1724: Attention backend not specified. "
                               "Use flashinfer backend by default.",
                               "[2026-01-22 09:59:32] WARNING server_args.py:2184: Overlap scheduler is disabled when "
                               "spec v2 is off or using unsupported speculative algorithm. You can set env "
                               "SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler."])).cls == \
        "healthy"


_VLLM_FA_PROBE = ("(EngineCore_DP0 pid=118553) ERROR 07-31 16:21:40 [fa_utils.py:57] Cannot use FA version 2 is not "
                  "supported due to FA2 is only supported on devices with compute capability >= 8")


def test_round_94_vllms_flash_attention_probe_at_error_is_a_symptom_not_a_failure():
    start = ["INFO 07-31 16:21:34 [__init__.py:216] Automatically detected platform cuda.", _VLLM_FA_PROBE,
             "(EngineCore_DP0 pid=118553) INFO 07-31 16:21:41 [cuda.py:331] Using XFormers backend on V1 engine."]
    assert diagnose("\n".join(start)).cls == "healthy"
    # a kernel that fails after it, in words no signature names, is the old GPU's
    failed = [*start, "(EngineCore_DP0 pid=118553) ERROR 07-31 15:52:26 [core.py:708] RuntimeError: Triton Error "
                      "[CUDA]: device kernel image is invalid"]
    assert diagnose("\n".join(failed)).cls == "unsupported_gpu_arch"


def test_round_94_traps_another_error_record_stays_a_failure():
    # vLLM's other records at ERROR are not read as warnings by the probe's words
    assert diagnose("(EngineCore_DP0 pid=1) ERROR 07-31 16:21:40 [core.py:708] EngineCore failed to start.").cls != \
        "healthy"
    # the probe's words inside another message do not quiet it (anchored at the record's start)
    assert diagnose("(EngineCore_DP0 pid=1) ERROR 07-31 16:21:40 [core.py:708] ValueError: Cannot use FA version 2 is "
                    "not supported due to FA2 is only supported on devices with compute capability >= 8").cls == \
        "unsupported_gpu_arch"


_VLLM_READY_THEN = ["(APIServer pid=5) INFO 08-21 10:20:00 [api_server.py:1] Starting vLLM API server 0 on "
                    "http://0.0.0.0:8000", "(APIServer pid=5) INFO:     Application startup complete."]
_ENGINE_DIED = ("(APIServer pid=5) ERROR 08-21 10:24:35 [core_client.py:600] Engine core proc EngineCore_DP0 died "
                "unexpectedly, shutting down client.")


@pytest.mark.parametrize("signal, cls", [
    ("SIGTERM", "healthy"), ("SIGINT", "healthy"),  # the operator's stop, in vLLM 0.2x's words
    ("SIGSEGV", "unknown"),  # trap: a signal nobody asks for is the engine's death
])
def test_round_94_vllms_engine_core_stop_record_makes_the_death_after_it_the_shutdown(signal, cls):
    stop = f"(EngineCore pid=6) INFO 08-21 10:24:34 [core.py:1214] [shutdown] EngineCore: trigger received signal={signal}"
    assert diagnose("\n".join([*_VLLM_READY_THEN, stop, _ENGINE_DIED])).cls == cls


_NCCL_HOST = "vllm-deepseek-ep-decode-0:3663:4064 [0] NCCL INFO "


@pytest.mark.parametrize("code, cls", [
    # ncclSystemError, ncclInternalError, ncclInvalidUsage, ncclRemoteError: NCCL's own failure (a full /dev/shm, a
    # socket, a peer), named nccl_failure when nothing decisive says more (a symptom, as its watchdog timeouts are)
    (2, "nccl_failure"), (3, "nccl_failure"), (5, "nccl_failure"), (6, "nccl_failure"),
    # trap: ncclUnhandledCudaError is a CUDA call that failed, whose cause is CUDA's (out of memory, a driver): the
    # tuning logs with such a trace alone are cuda_oom's and driver_mismatch's, so it names nothing
    (1, "unknown"),
])
def test_nccls_return_trace_alone_is_a_failure_seen(code, cls):
    # NCCLCHECK logs every call that failed, at INFO, with the error it returned: a paste of NCCL_DEBUG=INFO output that
    # holds only this trace failed
    trace = [_NCCL_HOST + f"transport.cc:148 -> {code}", _NCCL_HOST + f"transport/generic.cc:49 -> {code}",
             _NCCL_HOST + f"group.cc:73 -> {code} [Async thread]"]
    d = diagnose("\n".join(trace))
    assert d.cls == cls and f"transport.cc:148 -> {code}" in d.evidence[0].line


def test_nccls_return_trace_after_a_decisive_cause_keeps_the_cause():
    # a full /dev/shm that NCCL reports before its return trace stays the shared memory's
    shm = (_NCCL_HOST.replace("INFO", "WARN") + "Error: failed to extend /dev/shm/nccl-XdZnGf to 9637892 bytes")
    assert diagnose("\n".join([shm, _NCCL_HOST + "transport/shm.cc:114 -> 2"])).cls == "shm_too_small"


@pytest.mark.parametrize("line", [
    "Channel 00/02 : 0[0] -> 1[1] via P2P/CUMEM/read",  # the ring's arrows, no call's return
    "Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
    "Connected all rings, use ring PXN 0 GDR 1",
])
def test_nccls_topology_arrows_are_no_return_trace(line):
    assert diagnose(_NCCL_HOST + line).cls == "healthy"


def test_a_compilers_compilation_terminated_is_a_failure_seen():
    # the last lines of a JIT build that could not find a header, pasted without gcc's "fatal error:" line
    tail = ["   #include <cuda_fp8.h>", "            ^~~~~~~~~~~~", "  compilation terminated."]
    assert diagnose("\n".join(tail)).cls == "unknown"
    # with the fatal error line, the header names the class
    whole = ["/x/flashinfer/csrc/a.cu:3:10: fatal error: cuda_fp8.h: No such file or directory", *tail]
    assert diagnose("\n".join(whole)).cls == "missing_cuda_headers"
    # trap: the words inside a sentence are no compiler's line
    assert diagnose("INFO 01-01 00:00:00 [x.py:1] JIT compilation terminated early for cache hit").cls == "healthy"


@pytest.mark.parametrize("paste, cls", [
    # torch's words for shapes that do not fit, pasted without the RuntimeError before them (round 96): a failure seen
    ("The size of tensor a (256) must match the size of tensor b (512) at non-singleton dimension 1", "unknown"),
    ("Sizes of tensors must match except in dimension 1. Expected size 6 but got size 8 for tensor number 1", "unknown"),
    # trap: a tensor's size in a record that says nothing failed
    ("INFO 01-01 00:00:00 [x.py:1] The size of tensor parallel groups is 8", "healthy"),
])
def test_torchs_shape_mismatch_message_alone_is_a_failure_seen(paste, cls):
    assert diagnose(paste).cls == cls


@pytest.mark.parametrize("paste", [
    # nvcc's check of the host compiler, as a JIT build prints it (gcc's "error:" before it) and pasted alone
    "/usr/local/cuda/include/crt/host_config.h:143:2: error: #error -- unsupported GNU version! gcc versions later than "
    "12 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check",
    "#error -- unsupported clang version! clang version must be less than 17 and greater than 3.2 . The nvcc flag "
    "'-allow-unsupported-compiler' can be used to override this version check",
])
def test_a_host_compiler_the_cuda_toolkit_refuses_is_the_toolkits(paste):
    d = diagnose(paste)
    assert d.cls == "toolkit_misconfigured" and "NVCC_CCBIN" in d.fix


@pytest.mark.parametrize("lines, cls", [
    # a lookup keyed by the GPU's arch with no entry for this one (round 105: DeepGEMM's dispatch table on sm_120a)
    (["Traceback (most recent call last):",
      '  File "/venv/lib/python3.10/site-packages/deep_gemm/dispatch.py", line 23, in must_be_k_major',
      "    return {", "KeyError: '120a'"], "unsupported_gpu_arch"),
    # trap: bare, or raised in the CuTe DSL, the same KeyError is a DSL too old for the arch as well: not named
    (["KeyError: 'sm_89'"], "unknown"),
    # trap: frames cut before any exception line name nothing by this rule
    (["Traceback (most recent call last):",
      '  File "/venv/lib/python3.10/site-packages/sglang/srt/model_executor/model_runner.py", line 23, in load_model',
      "    self.model = get_model()"], "unknown"),
    (["Traceback (most recent call last):",
      '  File "/venv/lib/python3.12/site-packages/nvidia_cutlass_dsl/python_packages/cutlass/base_dsl/arch.py", line 9, '
      "in from_str", "    return Arch[name]", "KeyError: 'sm_107a'"], "unknown"),
    # trap: a KeyError on a weight's or a config's name is no arch
    (["KeyError: 'model.layers.0.mlp.experts.w2_weight'"], "unknown"),
    (["KeyError: '1024'"], "unknown"),
    # Marlin, the broadest WNA16 kernel, refusing the GPU's capability: no kernel for this GPU
    (["ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: ",
      "MacheteLinearKernel requires capability 90, current compute  capability is 75",
      "MarlinLinearKernel requires capability 80, current compute  capability is 75"], "unsupported_gpu_arch"),
    # trap: another kernel's capability alone, Marlin refusing the shape, is not the GPU's
    (["ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: ",
      "MacheteLinearKernel requires capability 90, current compute capability is 86",
      "MarlinLinearKernel cannot implement due to: Weight output_size_per_partition = 32 is not divisible by "
      "min_thread_n = 64."], "unknown"),
])
def test_round_105_an_arch_key_missing_and_marlin_refusing_the_capability(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


_ENGINE_ARGS_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/root/miniconda3/envs/r1/lib/python3.10/site-packages/vllm/entrypoints/llm.py", line 247, in __init__',
    "    engine_args = EngineArgs(",
]


@pytest.mark.parametrize("lines, cls", [
    # round 109: a framework building the engine's arguments in Python passes one the installed release has not got
    ([*_ENGINE_ARGS_FRAMES, "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'model_hf_config'"],
     "invalid_server_args"),
    (["TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument 'disable_log_requests'"],
     "invalid_server_args"),
    (["TypeError: ServerArgs.__init__() got an unexpected keyword argument 'enable_dp_lm_head'"], "invalid_server_args"),
    # the same line set in Markdown bold under its traceback, as a user points at it
    ([*_ENGINE_ARGS_FRAMES, "**TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_use_ray'**"],
     "invalid_server_args"),
    # trap: another function refusing a keyword is a bug or another package's version, not the engine's arguments
    (["TypeError: FlashInferMLAAttnBackend.forward_decode() got an unexpected keyword argument 'topk_indices'"],
     "unknown"),
    (["TypeError: EngineArgs.__init__() missing 1 required positional argument: 'model'"], "unknown"),
])
def test_round_109_engine_arguments_refused_in_python(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


def test_a_line_set_in_markdown_bold_is_read_as_its_words_and_only_such_a_line():
    texts = [ln.text for ln in normalize("\n".join([
        "**ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0.**",
        "****************************************",  # a row of stars is no emphasis
        "    model = cls(**kwargs)",  # nor Python's keyword unpacking
        "** not closed",
        "**Error log:**",  # nor a user's label above the paste
    ]))]
    assert texts == ["ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
                     "****************************************", "    model = cls(**kwargs)", "** not closed",
                     "**Error log:**"]


@pytest.mark.parametrize("lines, cls", [
    # round 117: XLA's runtime could not reserve device memory for a program (vLLM on TPU): the device's memory is full
    (["RESOURCE_EXHAUSTED: Error loading program 'jit_step_fun': Attempting to reserve 3.50G at the bottom of memory. "
      "That was not possible. There are 2.10G free, 0B reserved, and 2.10G reservable."], "cuda_oom"),
    (["E0108 10:42:17.118811 4411 tpu_runtime.cc:91] RESOURCE_EXHAUSTED: Attempting to reserve 12.00G at the bottom of "
      "memory. That was not possible."], "cuda_oom"),
    # trap: a status of the same name from a service's quota is no memory
    (["grpc._channel._InactiveRpcError: status = StatusCode.RESOURCE_EXHAUSTED, details = \"Quota exceeded for "
      "requests per minute\""], "unknown"),
])
def test_round_117_device_memory_xla_could_not_reserve(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines, cls", [
    # round 125: a parser the flag names that this release's registry has not got
    (["(APIServer pid=966592) KeyError: 'invalid tool call parser: openai (chose from { deepseek_v3, hermes, "
      "llama3_json, mistral, pythonic })'"], "invalid_server_args"),
    (["KeyError: 'invalid reasoning parser: qwen4 (chose from { deepseek_r1, qwen3 })'"], "invalid_server_args"),
    # a feature flag the model's class refuses, or the executor of this release
    (["ValueError: Model QWenLMHeadModel does not support LoRA, but LoRA is enabled. Support for this model may be "
      "added in the future."], "invalid_server_args"),
    (["NotImplementedError: Pipeline parallelism is not supported yet with multiprocessing."], "invalid_server_args"),
    # the --chat-template file missing, refused with the arguments or once the engine is up: the flag's value either way
    (["[rank0]: ValueError: The supplied chat template (./chat_template/llama3.jinja) looks like a file path, but it "
      "failed to be opened. Reason: [Errno 2] No such file or directory:"], "invalid_server_args"),
    # trap: the same refusal of a draft's class under pipeline parallelism is the speculative settings', not named here
    (["NotImplementedError: Pipeline parallelism is not supported for this model. Supported models implement the "
      "`SupportsPP` interface."], "unknown"),
])
def test_round_125_options_the_release_or_the_model_refuses(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("line, cls", [
    # round 120: vLLM logs its ops library failing to load at WARNING and fails at the first op: fatal
    ("WARNING 07-24 21:16:52 _custom_ops.py:14] Failed to import from vllm._C with ImportError(\"/usr/lib/x86_64-linux-gnu/"
     "libc.so.6: version `GLIBC_2.32' not found (required by /usr/local/lib/python3.10/dist-packages/vllm/_C.abi3.so)\")",
     "kernel_abi_mismatch"),
    ("WARNING 11-03 09:00:01 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('/usr/local/lib/"
     "python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev')", "kernel_abi_mismatch"),
    # trap: a platform plugin (vllm-ascend) serves without vLLM's CUDA ops: the module's absence is no failure
    ("WARNING 03-05 17:41:34 _custom_ops.py:19] Failed to import from vllm._C with ModuleNotFoundError(\"No module named "
     "'vllm._C'\")", "healthy"),
    # trap: another library's import warning with the same words is a symptom only
    ("WARNING 07-24 21:16:52 foo.py:14] Failed to import from foo._ext with ImportError(\"/lib/libc.so.6: version "
     "`GLIBC_2.32' not found (required by foo/_ext.so)\")", "healthy"),
])
def test_round_120_vllm_ops_library_that_cannot_load_is_fatal_at_warning(line, cls):
    assert diagnose(line + "\n").cls == cls


def test_round_136_an_engine_told_to_shut_down_and_then_reported_dead_is_no_failure():
    # the vLLM Ascend quick start's offline run: the engine core's own shutdown records, then its client's "died"
    stopped = ["INFO 05-27 11:40:38 [__init__.py:238] Platform plugin ascend is activated",
               "(EngineCore pid=970) INFO 05-12 11:36:00 [core.py:1201] Shutdown initiated (timeout=0)",
               "(EngineCore pid=970) INFO 05-12 11:36:00 [core.py:1224] Shutdown complete",
               "ERROR 05-12 11:36:01 [core_client.py:704] Engine core proc EngineCore died unexpectedly, shutting down "
               "client."]
    assert diagnose("\n".join(stopped)).cls == "healthy"
    # the same death with no stop asked before it is a failure
    assert diagnose("\n".join([stopped[0], stopped[3]])).cls == "unknown"
    # before the ready line a signal's record is no such stop: a probe or a supervisor stops a start too slow with it
    assert diagnose("\n".join([stopped[0], "INFO 05-12 11:36:00 [launcher.py:80] SIGTERM received, shutting down",
                               stopped[3]])).cls == "unknown"
    # a failure before the stop record is still the failure
    failed = [stopped[0], "ERROR 05-12 11:35:59 [core.py:700] EngineCore failed to start.",
              "RuntimeError: NPU out of resources", *stopped[1:]]
    assert diagnose("\n".join(failed)).cls != "healthy"


@pytest.mark.parametrize("lines, cls", [
    # round 137: vLLM 0.20 refusing a multimodal item larger than the batch its flags allow
    (["(APIServer pid=1) ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than "
      "max_num_batched_tokens (2048). Please increase max_num_batched_tokens."], "invalid_server_args"),
    # round 139: ptxas' refusal of an arch it does not know, quoted without the option it names
    (["ptxas fatal: Value 'sm_121a' is not defined"], "unsupported_gpu_arch"),
    (["ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'"], "unsupported_gpu_arch"),
])
def test_rounds_137_and_139_a_batch_too_small_for_an_item_and_ptxas_quoted_short(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("lines", [
    # round 182: Docker asked for GPUs with no NVIDIA runtime, from docker run, from compose (which names the driver) and
    # with the capabilities a compose file's device reservation lists
    ['docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     "ERRO[0000] error waiting for container: context canceled"],
    [" ✔ Container vllm-openai  Created", "Attaching to vllm-openai",
     'Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]]'],
    ['Error response from daemon: could not select device driver "nvidia" with capabilities: [[compute utility]]'],
    # copied from a terminal 80 columns wide, which cut the line inside "capabilities"
    ['docker: Error response from daemon: could not select device driver "" with capab', "ilities: [[gpu]]."],
])
def test_round_182_docker_without_an_nvidia_runtime_is_the_drivers(lines):
    d = diagnose("\n".join(lines))
    assert d.cls == "driver_mismatch"
    assert "nvidia-ctk runtime configure" in d.fix



@pytest.mark.parametrize("lines, cls", [
    # round 180: the GGUF reader refusing an architecture it cannot map, under a worker's prefix and in a traceback
    (["(APIServer pid=1) ERROR 02-01 10:00:00 [api_server.py:1] ValueError: GGUF model with architecture qwen3moe is "
      "not supported yet."], "unsupported_architecture"),
    (["Traceback (most recent call last):",
      '  File "/usr/lib/python3/dist-packages/transformers/modeling_gguf_pytorch_utils.py", line 400, in '
      "load_gguf_checkpoint",
      "ValueError: GGUF model with architecture glm4moe is not supported yet."], "unsupported_architecture"),
    # round 181: no config.json nor params.json where the model should be (a GGUF-only repo, a path one directory off)
    (["Dec 04 03:10:01 b300 python3[4242]: ValueError: No supported config format found in /models/kimi-k2.6/weights"],
     "checkpoint_incomplete"),
])
def test_rounds_180_and_181_a_gguf_architecture_refused_and_a_model_without_its_config(lines, cls):
    assert diagnose("\n".join(lines)).cls == cls


@pytest.mark.parametrize("line", [
    # round 185: zsh's words for a process a signal ended, lower case, in a job's notice and after its own name
    "[1]    817166 bus error  python3 -m vllm.entrypoints.openai.api_server --model /models/k2",
    "[1]  + 817166 illegal hardware instruction  python3 -m sglang.launch_server --model-path /models/k2",
    "zsh: floating point exception  python3 -m sglang.launch_server",
    "zsh: abort      python3 -m sglang.launch_server",
    # and its notice of a job that exited non-zero
    "[1]  - 817166 exit 1     python3 -m sglang.launch_server --model-path /models/k2",
])
def test_round_185_zsh_reports_a_dead_server_in_its_own_words(line):
    d = diagnose("[2026-01-01 00:00:01] Load weight begin. avail mem=79.10 GB\n" + line)
    assert not d.healthy and d.cls != "healthy"


@pytest.mark.parametrize("lines, healthy", [
    # after the ready line too; but not the exit code a program gives Ctrl-C (130) or SIGTERM (143), nor a clean exit
    (["[1]    817166 illegal hardware instruction  python3 -m sglang.launch_server"], False),
    (["[1]  + 817166 exit 130     python3 -m sglang.launch_server"], True),
    (["[1]  + 817166 done       python3 -m sglang.launch_server"], True),
    # trap: the word in a sentence is no signal
    (["we abort a request that takes too long"], True),
])
def test_round_185_zsh_after_the_ready_line(lines, healthy):
    ready = "[2026-01-01 00:00:05] The server is fired up and ready to roll!"
    assert diagnose("\n".join([ready, *lines])).healthy is healthy


@pytest.mark.parametrize("lines", [
    # round 186: an engine that attaches GPUs by CDI finding no device of that name in its spec: podman (a GPU by index,
    # behind the command), a kubelet's event of containerd's error (a GPU by UUID, its own kind), Docker in CDI mode
    ["$ podman run --rm --device nvidia.com/gpu=1 nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04 nvidia-smi",
     "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=1"],
    ["  Warning  Failed  3s  kubelet  Error: failed to create containerd task: failed to create shim task: OCI runtime "
     "create failed: error modifying OCI spec: failed to inject CDI devices: unresolvable CDI devices "
     "k8s.device-plugin.nvidia.com/gpu=GPU-0a1b2c3d-0000-1111-2222-333344445555"],
    ["docker: Error response from daemon: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=all."],
    # a spec that names a device node the host no longer has
    ['Error: setting up CDI devices: failed to inject devices: failed to stat CDI host device "/dev/nvidia3": no such '
     "file or directory"],
])
def test_round_186_a_gpu_the_cdi_spec_does_not_give_is_the_drivers(lines):
    d = diagnose("\n".join(lines))
    assert d.cls == "driver_mismatch"
    assert "nvidia-ctk cdi generate" in d.fix


def test_round_186_the_cdi_tools_own_listing_is_no_failure():
    # nvidia-ctk listing the devices it finds, and a podman run that answers: a working set-up's words
    lines = ["$ nvidia-ctk cdi list", "INFO[0000] Found 3 CDI devices", "nvidia.com/gpu=0", "nvidia.com/gpu=all",
             "$ podman run --rm --device nvidia.com/gpu=all ubuntu nvidia-smi -L",
             "GPU 0: NVIDIA B300 (UUID: GPU-0a1b2c3d-0000-1111-2222-333344445555)"]
    assert diagnose("\n".join(lines)).cls == "healthy"


@pytest.mark.parametrize("line", [
    # round 188: FlashInfer's backend check refusing the GPU for one backend of an op, raised alone, relayed by vLLM's
    # engine core, and in the shorter wording of another release ("with capability 120")
    "BackendSupportedError: mm_fp4 does not support backend 'trtllm' with compute capability 120",
    "(EngineCore_DP0 pid=812) ERROR 08-02 10:11:12 [core.py:708] flashinfer.utils.BackendSupportedError: bmm_fp8 does "
    "not support backend 'cutlass' with compute capability 121",
    "RuntimeError: mm_fp4 does not support backend 'cute-dsl' with capability 120",
])
def test_round_188_a_kernel_backend_refusing_the_gpus_capability_is_the_gpu_arch(line):
    assert diagnose(line).cls == "unsupported_gpu_arch"


def test_round_188_a_backend_refused_for_another_reason_is_not_the_gpu_arch():
    # the same check refusing a backend for the inputs it was given says nothing of the GPU
    line = "BackendSupportedError: mm_fp4 does not support backend 'cudnn' for the given inputs"
    assert diagnose(line).cls != "unsupported_gpu_arch"


@pytest.mark.parametrize("line", [
    # round 190: an extension linked against one of torch's own libraries that the installed torch does not have: one
    # torch 2.0 removed (libtorch_cuda_cu.so, built for 1.x), or torch's core library not where the extension looks
    "ImportError: libtorch_cuda_cu.so: cannot open shared object file: No such file or directory",
    "ImportError: libtorch_cuda_cpp.so: cannot open shared object file: No such file or directory",
    "OSError: libc10_cuda.so: cannot open shared object file: No such file or directory",
])
def test_round_190_an_extension_that_cannot_find_torchs_libraries_is_the_abi(line):
    assert diagnose(line).cls == "kernel_abi_mismatch"


def test_round_190_a_cuda_runtime_library_missing_stays_the_toolkits():
    # the CUDA runtime is the toolkit's library, not torch's: its own class, as before
    line = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert diagnose(line).cls == "toolkit_misconfigured"


@pytest.mark.parametrize("lines", [
    # round 192: torch.distributed's Gloo backend failing to connect its ranks (a pod whose host name resolves only to
    # the loopback address under hostNetwork), in torch's words with the pair's detail, and as SGLang relays it
    [("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error")],
    ["[2026-03-01 10:00:02 TP1] Scheduler hit an exception: Traceback (most recent call last):",
     "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152] timed "
     "out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:29511"],
    # Gloo given an interface it cannot find (NCCL's exclusion syntax in GLOO_SOCKET_IFNAME, or a name the pod lacks)
    ["RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable "
     "to find address for: eth7"],
    # custom all-reduce's CUDA check failing while it shares its buffers (VMM-backed under expandable segments)
    ["(VllmWorker TP1 pid=812) Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'",
     "(EngineCore_DP0 pid=700) ERROR Worker proc VllmWorker-1 died unexpectedly (exit code: None)"],
])
def test_round_192_the_ranks_failing_to_connect_or_share_buffers_is_the_collectives(lines):
    assert diagnose("\n".join(lines)).cls == "nccl_failure"


@pytest.mark.parametrize("line, expected", [
    # Gloo's loopback fallback alone is a warning a working single-node start prints too
    ("[W socket.cpp:697] Warning: Unable to resolve hostname to a (local) address. Using the loopback address as "
     "fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())",
     "healthy"),
    # custom all-reduce's check reporting a GPU out of memory is the memory's
    ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'out of memory'", "cuda_oom"),
    # a socket family the process may not open (a unit's RestrictAddressFamilies) is not the network between the ranks
    ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:184] rv != -1. -1 vs -1. Address "
     "family not supported by protocol", "unknown"),
])
def test_round_192_what_stays_apart_from_the_collectives(line, expected):
    assert diagnose(line).cls == expected


@pytest.mark.parametrize("lines", [
    # round 199: --quantization awq given for a checkpoint AWQ never quantized, as vLLM 0.2 raised it in a Ray worker
    ["  File \"/usr/local/lib/python3.8/dist-packages/vllm/model_executor/weight_utils.py\", line 107, "
     "in get_quant_config",
     "    raise ValueError(f\"Cannot find the config file for {quantization}\")",
     "ValueError: Cannot find the config file for awq"],
    ["ValueError: Cannot find the config file for gptq"],
])
def test_round_199_a_quantization_flag_the_checkpoint_lacks_is_the_arguments(lines):
    assert diagnose("\n".join(lines)).cls == "invalid_server_args"


def test_round_199_a_missing_config_json_stays_the_checkpoints():
    # the checkpoint's own config file missing is a download or layout at fault, as before
    line = ("OSError: /models/llama does not appear to have a file named config.json. Checkout "
            "'https://huggingface.co/None/tree/None' for available files.")
    assert diagnose(line).cls == "checkpoint_incomplete"


@pytest.mark.parametrize("lines", [
    # round 199: huggingface_hub refusing the model's name, raised from transformers' download (a ':branch' suffix)
    ["  File \"/opt/conda/lib/python3.10/site-packages/huggingface_hub/utils/_validators.py\", line 164, "
     "in validate_repo_id",
     "    raise HFValidationError(",
     "huggingface_hub.errors.HFValidationError: Repo id must use alphanumeric chars or '-', '_', '.', '--' and '..' "
     "are forbidden, '-' and '.' cannot start or end the name, max length is 96: 'Org/Model-GPTQ:gptq-4bit'."],
    # an id with a character the Hub refuses, in the other wording
    ["huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
     "'org/team/model'. Use `repo_type` argument if needed."],
])
def test_round_199_a_model_name_the_hub_refuses_is_the_arguments(lines):
    assert diagnose("\n".join(lines)).cls == "invalid_server_args"


def test_round_199_the_repo_id_words_logged_by_a_server_that_goes_on_stay_healthy():
    # vLLM logs the same words at ERROR for a local directory and serves on
    lines = ["(APIServer pid=1) ERROR 03-02 07:08:46 [config.py:307] Error retrieving safetensors: Repo id must be "
             "in the form 'repo_name' or 'namespace/repo_name': '/models/gpt-oss-120b'. Use `repo_type` argument if "
             "needed.",
             "(APIServer pid=1) INFO 03-02 07:09:40 [api_server.py:1] Starting vLLM API server 0 on "
             "http://0.0.0.0:8000",
             "(APIServer pid=1) INFO:     Application startup complete."]
    assert diagnose("\n".join(lines)).cls == "healthy"


@pytest.mark.parametrize("value", ["/models/", "/data/models/llama-3-8b", "./cus_model", "../weights/qwen",
                                   "~/models/x"])
def test_round_204_a_local_path_the_hub_refuses_as_an_id_is_no_model_where_it_points(value):
    # transformers and vLLM read the name as a Hub id only when no config.json is where it points
    lines = ["  File \"/usr/local/lib/python3.10/dist-packages/vllm/transformers_utils/config.py\", line 188, "
             "in get_config",
             "    file_exists(model, HF_CONFIG_NAME, revision=revision, token=token)",
             "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
             f"'namespace/repo_name': '{value}'. Use `repo_type` argument if needed."]
    assert diagnose("\n".join(lines)).cls == "checkpoint_incomplete"


@pytest.mark.parametrize("lines", [
    # round 202: ptxas refusing inductor's Triton PTX for an RTX 5090 (a Triton older than the GPU)
    ["[rank0]:E0701 14:28:21.083000 911603 torch/_inductor/runtime/triton_heuristics.py:539] [0/0] ptxas "
     "/tmp/tmpab12.ptx, line 6; error   : PTX .version 8.4 does not support .target sm_120a",
     "[rank0]:E0701 14:28:21.083000 911603 torch/_inductor/runtime/triton_heuristics.py:539] [0/0] ptxas fatal   : "
     "Ptx assembly aborted due to errors",
     "ERROR 07-01 14:28:21 [core.py:515] EngineCore failed to start."],
    ["ptxas /tmp/kernel.ptx, line 5; error   : PTX .version 7.8 does not support .target sm_90a"],
])
def test_round_202_ptx_older_than_the_gpus_target_is_the_arch(lines):
    assert diagnose("\n".join(lines)).cls == "unsupported_gpu_arch"
