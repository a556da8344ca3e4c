"""Crash diagnosis of a log copied through a viewer, a search or a web page (noderig/diagnose/copied.py).

`grep -n` / `grep -Hn -C`, `less -N`, `cat -n` number every line; a web page or a chat client gives no-break
spaces, curly quotes and zero-width spaces for the log's own characters. Every tuning fixture is read again in
these forms by tests/test_diagnose.py (PASTE_FORMS); here, the rules' edges and the traps."""

from __future__ import annotations

from noderig.diagnose import diagnose
from noderig.diagnose.catalog import any_quote
from noderig.diagnose.copied import plain_characters, single_spaced, without_line_numbers
from tests.test_diagnose_carried import KV_TRACEBACK

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of "
       "79.19 GiB of which 1.02 GiB is free.")


def test_grep_n_without_context_is_peeled_and_the_class_kept():
    # `grep -n` alone: numbers jump between matches, and go up
    lines = ["812:INFO 01-22 20:05:33 [core.py:58] Initializing a V1 LLM engine", "903:" + OOM,
             "904:[rank0]:[W122 20:05:40] ProcessGroupNCCL destroyed"]
    assert without_line_numbers(lines)[1] == OOM
    assert diagnose("\n".join(lines)).cls == "cuda_oom"


def test_grep_hn_context_groups_read_as_the_log_and_evidence_points_at_the_raw_line():
    raw = ["logs/server.log-120-INFO 01-22 20:05:30 [core.py:58] Initializing a V1 LLM engine", "--"]
    raw += [f"logs/server.log{':' if 'Error' in x else '-'}{n}{':' if 'Error' in x else '-'}{x}"
            for n, x in enumerate(KV_TRACEBACK, 410)]
    d = diagnose("\n".join(raw))
    assert d.cls == "kv_cache_insufficient"
    assert any(e.lineno == len(raw) and e.line.startswith("ValueError: The model's max seq len") for e in d.evidence)


def test_less_n_gutter_is_peeled():
    raw = [f"{n:>7} {x}" for n, x in enumerate(KV_TRACEBACK, 1)]
    assert without_line_numbers(raw) == KV_TRACEBACK
    assert diagnose("\n".join(raw)).cls == "kv_cache_insufficient"


def test_numbers_that_do_not_go_up_are_the_log_s_own():
    # du's sizes, then times of day, then HTTP statuses: each a line's own first word
    du = ["52428800\t/dev/shm", "1048576\t/tmp", "4096\t/var/log"]
    assert without_line_numbers(du) == du
    times = ["20:05:33 INFO loading weights", "20:05:34 INFO loaded", "20:05:35 ERROR " + OOM]
    assert without_line_numbers(times) == times
    statuses = ["200 OK GET /health", "200 OK GET /health", "503 Service Unavailable GET /v1/models"]
    assert without_line_numbers(statuses) == statuses


def test_a_list_numbered_with_gaps_and_a_space_is_not_a_gutter():
    # a space after the number is the form a message most resembles: only numbers going up by one are a viewer's
    listing = ["1 GPU found", "4 ranks started", "8 workers ready", "16 blocks free"]
    assert without_line_numbers(listing) == listing


def test_one_or_two_numbered_lines_are_left_as_they_are():
    assert without_line_numbers(["404: not found"]) == ["404: not found"]
    assert without_line_numbers(["12:a", "13:b"]) == ["12:a", "13:b"]
    # except `cat -n`'s own shape, six columns and a tab
    assert without_line_numbers(["     7\t" + OOM]) == [OOM]


def test_two_files_interleaved_are_no_one_gutter():
    lines = ["a.log:1:x", "b.log:2:y", "a.log:3:z"]
    assert without_line_numbers(lines) == lines


def test_web_page_characters_are_plain():
    assert plain_characters("CUDA\xa0out\u202fof\u2009memory\u200b") == "CUDA out of memory"
    assert plain_characters("error: \u2018Python.h\u2019 \u201cnot found\u201d") == "error: 'Python.h' \"not found\""
    assert plain_characters("\ufeffTraceback") == "Traceback"


def test_a_log_pasted_from_a_chat_client_keeps_its_class():
    pasted = "\n".join(x.replace(" ", "\xa0").replace("'", "\u2019") for x in KV_TRACEBACK)
    assert diagnose(pasted).cls == "kv_cache_insufficient"
    no_kernel = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert diagnose(no_kernel.replace(" ", "\xa0")).cls == "unsupported_gpu_arch"
    # a page's source, its spaces escaped
    unsupported = "ValueError: Model architectures ['DeepseekV4ForCausalLM'] are not supported for now."
    assert diagnose(unsupported.replace(" ", "&nbsp;").replace("'", "&#8217;")).cls == "unsupported_architecture"


def test_a_signature_s_quotes_stand_for_any_quote():
    assert any_quote(r"No module named '(cutlass|quack)'") == r"""No module named ['"`](cutlass|quack)['"`]"""
    assert any_quote(r"argument '[^']+' found") == r"""argument ['"`][^'"`]+['"`] found"""
    assert any_quote(r"[\]'x] can\'t") == r"""[\]'"`x] can['"`]t"""
    # another version's quoting names the same cause
    for quoted in ('"--system"', "`--system`", "'--system'"):
        assert diagnose(f"error: unexpected argument {quoted} found").cls == "invalid_server_args"


def test_one_grep_line_before_an_exception_is_peeled():
    assert without_line_numbers(["812:" + OOM]) == [OOM]
    assert without_line_numbers(["logs/server.log:812:" + OOM]) == [OOM]
    assert diagnose("812:" + OOM).cls == "cuda_oom"
    # a number before anything else stays: "404: not found", a port, an HTTP status
    assert without_line_numbers(["503: Service Unavailable"]) == ["503: Service Unavailable"]


def test_a_double_spaced_paste_reads_as_the_log_and_keeps_raw_line_numbers():
    double = "\n\n".join(["INFO 01-22 20:05:30 [core.py:58] Initializing a V1 LLM engine", "", *KV_TRACEBACK])
    d = diagnose(double)
    assert d.cls == "kv_cache_insufficient"
    assert d.evidence[0].lineno == 2 * (len(KV_TRACEBACK) + 2) - 1
    assert [x for _, x in single_spaced(list(enumerate(["a", "", "b", "", "", "", "c", "", "d"], 1)))] == \
        ["a", "b", "", "c", "d"]


def test_blank_lines_of_the_log_s_own_are_kept():
    # lines that touch, an even run of blank lines, or too few lines: no double-spacing copy made them
    for lines in (["a", "b", "", "c", "", "d", "", "e"], ["a", "", "b", "", "", "c", "", "d"], ["a", "", "b", "", "c"]):
        numbered = list(enumerate(lines, 1))
        assert single_spaced(numbered) == numbered
