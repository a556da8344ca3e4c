"""Crash diagnosis of a log carried as data (noderig/diagnose/carried.py): JSON log records and escaped strings.

Each log below is one a real transport or program writes: docker's json-file driver, `journalctl -o json`, a
Cloud Logging export, vLLM's JSON formatter (``--logging-config.formatter json``), a launcher quoting its
child's stderr as a bytes repr. The messages are vLLM's and torch's own (tests/fixtures/crashlogs/)."""

from __future__ import annotations

import json

import pytest

from noderig.diagnose import diagnose, normalize, parse_tracebacks
from noderig.diagnose.carried import JOURNAL_LEFT_OUT, expand_carried
from noderig.diagnose.normalize import strip_prefixes
from noderig.diagnose.transports import without_stream_names

KV_MESSAGE = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can "
              "be stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
              "when initializing the engine.")
KV_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 510, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 700, in check_enough_kv_cache_memory',
    "    raise ValueError(",
    KV_MESSAGE,
]
BIND_MESSAGE = ("RuntimeError: The server socket has failed to listen on any local network address. The server socket "
                "has failed to bind to [::]:29500 (errno: 98 - Address already in use).")
READY = "INFO 01-22 20:06:10 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000"
# vLLM's JSON formatter: asctime, levelname, name, processName, process, message, vllm_process_name
VLLM_RECORD = {"asctime": "2026-01-22 20:05:33,123", "name": "vllm.v1.engine.core", "processName": "EngineCore_DP0",
               "process": 4242, "vllm_process_name": "EngineCore_DP0"}


def vllm_json(level: str, message: str, trace: list[str] | None = None) -> str:
    record = {**VLLM_RECORD, "levelname": level, "message": message}
    if trace:
        record["exc_info"] = "\n".join(trace)
    return json.dumps(record)


def test_vllm_json_formatter_error_record_is_read_with_its_traceback():
    log = "\n".join([vllm_json("INFO", "Waiting for engine core to start"),
                     vllm_json("ERROR", "EngineCore failed to start.", KV_TRACEBACK)])
    d = diagnose(log)
    assert d.cls == "kv_cache_insufficient"
    # the evidence names the raw line that carried the record, not a line of the expansion
    assert {e.lineno for e in d.evidence} == {2}


def test_vllm_json_formatter_warning_with_traceback_is_no_crash():
    hub_trace = ["Traceback (most recent call last):",
                 '  File "/usr/lib/python3.12/site-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise',
                 "huggingface_hub.errors.HfHubHTTPError: 504 Server Error: Gateway Time-out for url: https://hf.co/x"]
    log = "\n".join([vllm_json("WARNING", "Failed to reach the Hub; using the local cache", hub_trace),
                     vllm_json("INFO", "Starting vLLM API server 0 on http://0.0.0.0:8000")])
    lines = [ln for ln in normalize(log) if ln.text]
    assert [(ln.no, ln.level) for ln in lines] == [(1, "WARNING"), (2, "INFO")]  # a quiet record stays one line
    assert diagnose(log).cls == "healthy"


def test_docker_json_file_log_is_read_as_the_lines_it_holds():
    lines = ["[rank0]: Traceback (most recent call last):",
             '[rank0]:   File "/usr/lib/python3.12/site-packages/torch/distributed/rendezvous.py", line 189, in _create_c10d_store',
             "[rank0]:     return TCPStore(",
             f"[rank0]: {BIND_MESSAGE}"]
    log = "\n".join(json.dumps({"log": x + "\n", "stream": "stderr", "time": "2026-01-22T20:05:33.1Z"}) for x in lines)
    assert [ln.text for ln in normalize(log)] == ["Traceback (most recent call last):", *(x[len("[rank0]: "):]
                                                                                         for x in lines[1:])]
    assert diagnose(log).cls == "port_in_use"


def test_journal_json_message_given_as_bytes_is_decoded():
    # journald writes a field holding a control character (here a colour code) as its byte values
    line = f"\x1b[31m{KV_MESSAGE}\x1b[0m"
    record = {"_SYSTEMD_UNIT": "sglang.service", "PRIORITY": "6", "MESSAGE": list(line.encode())}
    assert [ln.text for ln in normalize(json.dumps(record))] == [KV_MESSAGE]
    assert diagnose(json.dumps(record)).cls == "kv_cache_insufficient"


def test_a_transports_priority_is_not_the_records_level():
    # journald gives a service's whole stdout priority 6 (info): the traceback it carries is still a crash
    log = "\n".join(json.dumps({"MESSAGE": x, "PRIORITY": "6"}) for x in KV_TRACEBACK)
    assert {ln.level for ln in normalize(log)} == {None}
    assert diagnose(log).cls == "kv_cache_insufficient"


def test_cloud_logging_program_record_keeps_its_severity():
    record = {"jsonPayload": {"message": "Loading weights took 12.3 seconds"}, "severity": "INFO"}
    (line,) = normalize(json.dumps(record))
    assert (line.text, line.level) == ("Loading weights took 12.3 seconds", "INFO")


def test_a_rust_tracing_json_record_is_read_by_its_fields_message_and_level():
    # tracing-subscriber's JSON form (TGI's --json-output, Rust routers and launchers): the message under
    # "fields", the module path as "target"
    def record(level, message):
        return json.dumps({"timestamp": "2025-03-01T10:00:00.000Z", "level": level,
                           "fields": {"message": message}, "target": "text_generation_launcher"})
    started = [record("INFO", "Starting shard rank=0"), record("INFO", "Waiting for shard to be ready... rank=0")]
    assert diagnose("\n".join(started)).cls == "healthy"
    crashed = started + [record("ERROR", "Shard complete standard error output:\n\n" + "\n".join(KV_TRACEBACK)),
                         record("ERROR", "Shard 0 failed to start")]
    assert diagnose("\n".join(crashed)).cls == "kv_cache_insufficient"
    assert diagnose(record("ERROR", "Shard 0 failed to start")).cls == "unknown"


def test_a_child_stderr_quoted_as_bytes_is_read_as_its_lines():
    child = "\n".join(["INFO 01-22 20:05:31 [core.py:60] Initializing a V1 LLM engine", *KV_TRACEBACK])
    log = f"RuntimeError: Server process exited with code 1, stderr={child.encode()!r}"
    texts = [ln.text for ln in normalize(log)]
    assert texts[0] == "RuntimeError: Server process exited with code 1, stderr=b'"
    assert texts[2:] == KV_TRACEBACK
    assert diagnose(log).cls == "kv_cache_insufficient"


def test_a_json_string_quoting_a_log_is_split_after_the_words_before_it():
    # an apostrophe in the program's own words opens no string literal
    log = "Job didn't start: " + json.dumps({"error": "\n".join(KV_TRACEBACK)}) + " (attempt 1)"
    texts = [ln.text for ln in normalize(log)]
    assert texts == ['Job didn\'t start: {"error": "', *KV_TRACEBACK, '"} (attempt 1)']


@pytest.mark.parametrize("request_log", [
    "INFO 01-22 20:06:12 [logger.py:41] Received request chatcmpl-1: prompt: '<|user|>Fix this:\\n{tb}'",
    "[2026-01-22 20:06:12 TP0] Receive: obj=GenerateReqInput(text='Fix this:\\n{tb}', sampling_params={{}})",
])
def test_a_prompt_quoting_a_traceback_in_a_request_log_is_no_crash(request_log):
    tb = "\\n".join(KV_TRACEBACK).replace("'", "\\'")
    log = "\n".join([READY, request_log.format(tb=tb)])
    assert len(normalize(log)) == 2
    assert diagnose(log).cls == "healthy"


@pytest.mark.parametrize("line", [
    '{"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}',  # a config printed in a log
    '{"log": 42}',  # no text where the line would be
    "{not json at all}",
    "[1, 2, 3]",
    'ValueError: bad literal "a\\nb"',  # escaped line breaks, no traceback
])
def test_lines_that_carry_no_log_stay_as_they_are(line):
    assert expand_carried([line]) == [(1, line)]


def test_every_expanded_line_keeps_the_number_of_its_raw_line():
    raw = ["starting", json.dumps({"message": "line a\nline b", "levelname": "ERROR", "name": "x"}), "done"]
    assert expand_carried(raw) == [(1, "starting"), (2, "ERROR:x:line a"), (2, "line b"), (3, "done")]


# --------------------------------------------------------------------------------------------
# a log viewer's export copied newest first (normalize._oldest_first)

def test_a_traceback_copied_newest_first_is_read_in_time_order():
    log = "\n".join(reversed(["INFO 01-22 20:05:31 [core.py:60] Initializing a V1 LLM engine", *KV_TRACEBACK]))
    lines = normalize(log)
    assert [ln.text for ln in lines][-len(KV_TRACEBACK):] == KV_TRACEBACK
    assert [ln.no for ln in lines] == list(range(len(KV_TRACEBACK) + 1, 0, -1))  # each keeps its paste's number
    assert diagnose(log).cls == "kv_cache_insufficient"


def test_lines_whose_times_only_go_back_are_turned_over():
    # the failure, then the NCCL timeout it caused on another rank: read newest first, the timeout would come first
    lines = ["2026-01-22 20:05:31 [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
             "2026-01-22 20:05:32 [rank1]: exiting",
             "2026-01-22 20:15:33 [rank0]: [E122 20:15:33 ProcessGroupNCCL.cpp:616] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."]
    assert [ln.no for ln in normalize("\n".join(reversed(lines)))] == [3, 2, 1]
    assert diagnose("\n".join(reversed(lines))).cls == diagnose("\n".join(lines)).cls == "cuda_oom"


@pytest.mark.parametrize("log", [
    # two logs pasted one after the other: times go forward, then back to the second log's start, then forward
    ["2026-01-22 20:05:31 a", "2026-01-22 20:05:32 b", "2026-01-22 20:04:00 c", "2026-01-22 20:04:01 d"],
    # a traceback in time order whose header follows a chained section's frames
    ['  File "/a.py", line 1, in f', "ValueError: a", "", "During handling of the above exception, another "
     "exception occurred:", "", "Traceback (most recent call last):", '  File "/b.py", line 2, in g', "KeyError: b"],
])
def test_a_log_in_time_order_is_not_turned_over(log):
    assert [ln.no for ln in normalize("\n".join(log))] == list(range(1, len(log) + 1))


# --------------------------------------------------------------------------------------------
# review: a line a transport split into pieces, a single time going back, an entry of several lines turned over

# a launcher's report of its child's failure: the child's stderr as a bytes repr, a traceback raised in pynccl
NCCL_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 510, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    '  File "/usr/lib/python3.12/site-packages/vllm/distributed/device_communicators/pynccl.py", line 99, in __init__',
    "    self.comm = self.nccl.ncclCommInitRank(",
    "RuntimeError: invalid argument 7",
]
LONG_REPORT = ("[2026-01-22 20:05:34 TP0] launcher: child exited 1: stderr=b'" + "W" * 16_200 + "\\n"
               + "\\n".join(NCCL_TRACEBACK) + "'")


def docker_pieces(line: str, size: int = 16_384) -> list[str]:
    """The records docker's json-file driver writes for one line: pieces of `size`, the newline on the last only."""
    pieces = [line[k:k + size] for k in range(0, len(line), size)]
    pieces[-1] += "\n"
    return [json.dumps({"log": p, "stream": "stderr", "time": "2026-01-22T20:05:34.1Z"}) for p in pieces]


@pytest.mark.parametrize("cut", [16_384, 16_300, len(LONG_REPORT) - 40])
def test_a_line_docker_split_into_pieces_is_read_whole(cut):
    start = json.dumps({"log": "[2026-01-22 20:05:33 TP0] Init torch distributed begin.\n", "stream": "stderr",
                        "time": "2026-01-22T20:05:33.1Z"})
    log = "\n".join([start, *docker_pieces(LONG_REPORT, cut)])
    assert diagnose(log).cls == "nccl_failure"
    assert {ln.no for ln in normalize(log) if "pynccl" in ln.text} == {2}  # the raw line the split line starts on
    assert expand_carried(docker_pieces("abc", 2)) == [(1, "abc")]


def test_a_cri_line_split_into_pieces_is_read_whole():
    cut = LONG_REPORT.index("pynccl")
    log = "\n".join(["2026-01-22T20:05:33.1Z stderr F [2026-01-22 20:05:33 TP0] Init torch distributed begin.",
                     "2026-01-22T20:05:34.1Z stderr P " + LONG_REPORT[:cut],
                     "2026-01-22T20:05:34.1Z stderr F " + LONG_REPORT[cut:]])
    assert diagnose(log).cls == "nccl_failure"
    assert expand_carried(["t stdout P ab", "t stdout F c", "t stdout F d"]) == [(1, "t stdout P abc"), (3, "t stdout F d")]


def test_a_line_cut_into_many_pieces_is_joined_into_one():
    # joined at once, not piece by piece (what that cost on 40,000 pieces: bench/diagnose.py)
    assert expand_carried(["t stderr P " + "x" * 100] * 4_000 + ["t stderr F y"]) == [
        (1, "t stderr P " + "x" * 400_000 + "y")]


def test_fluent_bit_records_flagged_full_are_not_joined():
    records = [json.dumps({"time": "t", "stream": "stdout", "logtag": "F", "log": x}) for x in ("a", "b")]
    assert expand_carried(records) == [(1, "a"), (2, "b")]


def test_one_time_going_back_does_not_turn_a_paste_over():
    # a rank's line written a moment late: one step back, every other line in the same second
    crash = ["[2026-01-22 20:05:34 TP0] Scheduler hit an exception: " + NCCL_TRACEBACK[0], *NCCL_TRACEBACK[1:]]
    log = ["[2026-01-22 20:05:34] The server is fired up and ready to roll!", *crash,
           "[2026-01-22 20:05:33 TP1] Capture cuda graph end."]
    assert [ln.no for ln in normalize("\n".join(log))] == list(range(1, len(log) + 1))
    assert diagnose("\n".join(log)).cls == "nccl_failure"


def test_an_entry_of_several_lines_keeps_its_order_when_the_paste_is_turned_over():
    # Loki's logcli, newest first: the traceback is one entry (a multiline stage joined it), raised in core.py
    trace = ["Traceback (most recent call last):",
             '  File "/usr/lib/python3.12/site-packages/vllm/distributed/device_communicators/pynccl.py", line 99, '
             "in __init__", "    self.comm = self.nccl.ncclCommInitRank(",
             '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 510, in run_engine_core',
             "    raise RuntimeError(msg)", "RuntimeError: invalid argument 7"]
    head = '2026-01-22T20:05:{}Z {{container="vllm"}} '
    entries = [[head.format("34.100") + "INFO 01-22 20:05:34 [core.py:1] Loading weights"],
               [head.format("35.200") + "ERROR 01-22 20:05:35 [core.py:2] EngineCore failed to start."],
               [head.format("35.250") + trace[0], *trace[1:]],
               [head.format("35.300") + "ERROR 01-22 20:05:35 [core.py:3] Engine core initialization failed."]]
    oldest = "\n".join(x for e in entries for x in e)
    newest = "\n".join(x for e in reversed(entries) for x in e)
    assert [ln.text for ln in normalize(newest)][2:8] == [ln.text for ln in normalize(oldest)][2:8]
    assert [ln.no for ln in normalize(newest)] == [9, 8, 2, 3, 4, 5, 6, 7, 1]
    assert diagnose(newest).cls == diagnose(oldest).cls


# a traceback raised while flash_attn.cute imports: read by its frames' module path, whatever its wording
CUTE_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/sglang/srt/layers/attention/fa.py", line 12, in <module>',
    "    from flash_attn.cute import interface",
    '  File "/usr/lib/python3.12/site-packages/flash_attn/cute/interface.py", line 5, in <module>',
    "    x = lib.thing",
    "AttributeError: object has no attribute thing",
]


@pytest.mark.parametrize("line", [
    # a JSON error body quoting a launcher's bytes repr: the repr's escapes escaped again
    json.dumps({"detail": "Command failed: stderr=b'" + "\\n".join(CUTE_TRACEBACK) + "'"}),
    # the repr of an exception whose message quotes the child's stderr as a bytes repr
    "RuntimeError: launcher: " + repr("stderr=b'" + "\\n".join(CUTE_TRACEBACK) + "'"),
    # Windows line breaks, escaped twice
    "error=" + repr("stderr=b'" + "\\r\\n".join(CUTE_TRACEBACK) + "'"),
], ids=["json-body", "exception-repr", "crlf"])
def test_a_traceback_escaped_twice_is_read_as_its_lines(line):
    assert diagnose(line).cls == "flash_attn_cute_missing"
    lines = [ln.text.strip() for ln in normalize(line)]
    assert "AttributeError: object has no attribute thing" in [x.rstrip("'") for x in lines]
    assert {ln.no for ln in normalize(line)} == {1}


HUB_TRACE = ["Traceback (most recent call last):",
             '  File "/usr/lib/python3.12/site-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise',
             "huggingface_hub.errors.HfHubHTTPError: 504 Server Error: Gateway Time-out for url: https://hf.co/x"]


@pytest.mark.parametrize("prefix", ["2026-01-22T20:05:33.123456789Z ", "2026-01-22T20:05:33.123456789Z stdout F ",
                                    "[pod/vllm-0/vllm] ", "vllm-1  | ", "Jan 22 20:05:33 gpu-3 vllm[42]: "],
                         ids=["kubectl-timestamps", "cri", "kubectl-prefix", "compose", "journal"])
def test_a_programs_json_record_behind_a_transports_prefix_is_read_as_a_record(prefix):
    log = "\n".join(prefix + x for x in (vllm_json("WARNING", "Failed to reach the Hub", HUB_TRACE),
                                         vllm_json("INFO", "Loading weights took 3.10 seconds")))
    assert [(ln.no, ln.level) for ln in normalize(log) if ln.text] == [(1, "WARNING"), (2, "INFO")]
    assert diagnose(log).cls == "healthy"
    failed = "\n".join(prefix + x for x in (vllm_json("INFO", "Waiting for engine core to start"),
                                            vllm_json("ERROR", "EngineCore failed to start.", KV_TRACEBACK)))
    assert diagnose(failed).cls == "kv_cache_insufficient"
    assert {e.lineno for e in diagnose(failed).evidence} == {2}


def test_a_program_logging_json_in_its_own_record_is_not_taken_for_a_record():
    line = 'INFO 01-22 20:05:33 [serving.py:1] request body: {"message": "hi", "level": "error"}'
    [read] = normalize(line)
    assert (read.level, read.text) == ("INFO", 'request body: {"message": "hi", "level": "error"}')


def test_many_lines_each_quoting_a_traceback_are_each_read():
    # every line a traceback of its own (whether an exception line lies in a traceback is read once, not per line:
    # the cost on 30,000 such lines is measured by bench/diagnose.py)
    trace = ["Traceback (most recent call last):", '  File "/home/u/app.py", line 3, in <module>', "ValueError: bad"]
    log = "\n".join(f"[2026-01-22 20:05:33 TP0] job {i} failed: stderr=b'" + "\\n".join(trace) + "'"
                    for i in range(300))
    assert len(parse_tracebacks(normalize(log))) == 300
    assert diagnose(log).cls == "unknown"


def test_a_quiet_records_traceback_on_one_line_is_no_header_to_turn_a_paste_over_by():
    # a paste cut inside a traceback (frames, then its exception), then a WARNING record whose traceback stays on
    # its line: that line holds a header after frames, but it heads no frames of its own
    hub = json.dumps({**VLLM_RECORD, "levelname": "WARNING", "message": "Failed to reach the Hub",
                      "exc_info": "\n".join(HUB_TRACE)})
    log = "\n".join([*KV_TRACEBACK[3:], hub, vllm_json("ERROR", "EngineCore failed to start.")])
    assert [ln.no for ln in normalize(log)] == [1, 2, 3, 4, 5]


def docker(line: str) -> str:
    return json.dumps({"log": line + "\n", "stream": "stdout", "time": "2026-01-22T20:05:33.1Z"})


@pytest.mark.parametrize("carry", [docker, lambda x: json.dumps({"MESSAGE": x, "PRIORITY": "6"})],
                         ids=["docker", "journal"])
def test_a_programs_json_record_carried_by_a_transports_record_is_read_as_a_record(carry):
    # vLLM's JSON formatter in a container: docker's json-file driver (or the journal) holds each record as its line
    log = "\n".join(carry(x) for x in (vllm_json("WARNING", "Failed to reach the Hub", HUB_TRACE),
                                       vllm_json("INFO", "Loading weights took 3.10 seconds")))
    assert [(ln.no, ln.level) for ln in normalize(log) if ln.text] == [(1, "WARNING"), (2, "INFO")]
    assert diagnose(log).cls == "healthy"
    failed = "\n".join(carry(x) for x in (vllm_json("INFO", "Waiting for engine core to start"),
                                          vllm_json("ERROR", "EngineCore failed to start.", KV_TRACEBACK)))
    assert diagnose(failed).cls == "kv_cache_insufficient"
    assert {e.lineno for e in diagnose(failed).evidence} == {2}


def test_a_programs_json_record_cut_into_pieces_is_read_as_a_record_once_joined():
    record = vllm_json("WARNING", "Failed to reach the Hub " + "x" * 20_000, HUB_TRACE)
    log = "\n".join([*docker_pieces(record), docker(vllm_json("INFO", "Loading weights took 3.10 seconds"))])
    assert [(ln.no, ln.level) for ln in normalize(log) if ln.text] == [(1, "WARNING"), (3, "INFO")]
    cri = "\n".join(["2026-01-22T20:05:33.1Z stdout P " + record[:16_384],
                     "2026-01-22T20:05:33.1Z stdout F " + record[16_384:]])
    assert [(ln.no, ln.level) for ln in normalize(cri) if ln.text] == [(1, "WARNING")]


def test_a_failure_line_of_one_long_word_is_read():
    # a JSON record's message is a failure line now; the token tier's `\w+For(CausalLM|...)` backtracked from every
    # position of a word (20,000 characters: 2 s; 250,000: 289 s): its cost is measured by bench/diagnose.py
    assert diagnose(vllm_json("ERROR", "y" * 20_000)).cls == "unknown"


# --------------------------------------------------------------------------------------------
# more transport forms: CI, schedulers, terminals (noderig/diagnose/transports.py, normalize.py). Each log is the
# bare KV_TRACEBACK or BIND_MESSAGE traceback in the form the tool writes (its format cited where it is peeled)

BIND_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/torch/distributed/rendezvous.py", line 189, in _create_c10d_store',
    "    return TCPStore(",
    BIND_MESSAGE,
]


def test_gitlab_timestamps_are_peeled_and_a_line_flushed_in_parts_is_joined():
    # GitLab runner's FF_TIMESTAMPS header: "<time> <stream><E|O><' '|'+'>", '+' goes on the line before
    head = "2026-01-22T20:05:33.123456Z 01E"
    cut = KV_MESSAGE.index("KV cache")
    log = "\n".join([*(f"{head} {x}" for x in KV_TRACEBACK[:-1]), f"{head} {KV_MESSAGE[:cut]}",
                     f"{head}+{KV_MESSAGE[cut:]}"])
    lines = normalize(log)
    assert [ln.text for ln in lines] == KV_TRACEBACK
    assert lines[-1].no == len(KV_TRACEBACK)  # the joined line keeps the number of its first part
    assert diagnose(log).cls == "kv_cache_insufficient"


def test_docker_service_logs_task_and_node_are_the_source():
    log = "\n".join(f"sglang.1.x7k2m9p4q1rs@gpu-node-1    | {x}" for x in BIND_TRACEBACK)
    lines = normalize(log)
    assert [ln.text for ln in lines] == BIND_TRACEBACK and {ln.source for ln in lines} == {"sglang.1.x7k2m9p4q1rs"}
    assert diagnose(log).cls == "port_in_use"


@pytest.mark.parametrize("stream", ["ecs/sglang/4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a99", "AllTraffic/i-0123456789abcdef0"])
def test_aws_logs_tail_stream_name_is_peeled(stream):
    log = "\n".join(f"2026-01-22T20:05:33.123000+00:00 {stream} {x}" for x in KV_TRACEBACK)
    assert [ln.text for ln in normalize(log)] == KV_TRACEBACK
    assert diagnose(log).cls == "kv_cache_insufficient"
    one = f"2026-01-22T20:05:33.123000+00:00 {stream} {KV_MESSAGE}"  # a paste of one line: a stream name with a "/"
    assert [ln.text for ln in normalize(one)] == [KV_MESSAGE]


def test_a_journal_host_after_an_offset_time_is_no_stream_name():
    # `journalctl -o short-iso` with a "+00:00" offset: the host every line shares stays the journal's
    log = "\n".join(f"2026-01-22T20:05:33+00:00 b300 sglang[536]: {x}" for x in BIND_TRACEBACK)
    lines = normalize(log)
    assert [ln.text for ln in lines] == BIND_TRACEBACK and {ln.source for ln in lines} == {"sglang[536]"}


def test_stern_pod_and_container_names_are_peeled():
    log = "\n".join(f"\x1b[32msglang-7d9f8b6c5-x2k4p\x1b[0m \x1b[34msglang\x1b[0m {x}" for x in BIND_TRACEBACK)
    assert [ln.text for ln in normalize(log)] == BIND_TRACEBACK
    assert diagnose(log).cls == "port_in_use"


def test_rsyslog_escapes_of_colours_and_carriage_returns_are_the_characters_again():
    # a container's output through docker's syslog driver (a SageMaker endpoint's, vLLM 20855): every line behind a
    # coloured process prefix written as "#033[1;36m(...)#033[0;0m ", ending in "#015"
    log = "\n".join(f"#033[1;36m(VllmWorker rank=0 pid=382)#033[0;0m {x}#015" for x in KV_TRACEBACK)
    lines = normalize(log)
    assert [ln.text for ln in lines] == KV_TRACEBACK and {ln.rank for ln in lines} == {"rank0"}
    assert diagnose(log).cls == "kv_cache_insufficient"


def test_a_record_of_many_lines_syslog_joined_with_escaped_breaks_is_its_lines():
    # Python logging to syslog: one record, its traceback's lines joined by "#012", its indentation's tabs "#011"
    log = ("Dec  2 13:31:17 b300 sglang[536]: Scheduler hit an exception:#012" + "#012".join(KV_TRACEBACK)
           + "\nDec  2 13:31:18 b300 sglang[536]: Received sigquit from a child process.#011It usually means the "
           "child failed.")
    lines = normalize(log)
    assert [ln.text for ln in lines[1:len(KV_TRACEBACK) + 1]] == KV_TRACEBACK
    assert {ln.no for ln in lines[:-1]} == {1} and lines[-1].no == 2  # each keeps the number of the raw line
    assert "#011" not in lines[-1].text and lines[-1].text.endswith(".  It usually means the child failed.")
    (tb,) = parse_tracebacks(lines)
    assert tb.final.exc_type == "ValueError" and diagnose(log).cls == "kv_cache_insufficient"


@pytest.mark.parametrize("text", ["see issue #011 and #012 for the same error", "build #033 failed: exit 1"])
def test_an_issue_number_is_no_syslog_escape(text):
    assert [ln.text for ln in normalize(text)] == [text]


@pytest.mark.parametrize("log", [
    # most lines do not start with one pod's and container's names: nothing is a stern prefix
    ["nvidia-smi failed with exit code 9", "sglang-router started on port 30000", "Traceback (most recent call last):",
     "RuntimeError: x"],
    # a shipper's time before messages: no stream name
    ["2026-01-22T20:05:33+00:00 INFO 01-22 20:05:33 [core.py:60] x", "2026-01-22T20:05:33+00:00 stdout F y",
     "2026-01-22T20:05:33+00:00 RuntimeError: z"],
])
def test_lines_that_share_no_stream_or_pod_keep_their_words(log):
    texts = [ln.text for ln in normalize("\n".join(log))]
    assert texts[0].startswith(("nvidia-smi", "x")) and texts[-1].endswith(("RuntimeError: x", "RuntimeError: z"))


@pytest.mark.parametrize("wrap", [
    lambda x: f"[0;31m{x}[0m",  # the escape byte lost: a log copied from a browser
    lambda x: f"\\x1b[0;31m{x}\\x1b[0m",  # written out as a Python string's escape
    lambda x: f"\\u001b[0;31m{x}\\u001b[0m",  # as JSON's (an .ipynb's outputs)
])
def test_colour_codes_that_lost_their_escape_byte_are_removed(wrap):
    log = "\n".join(wrap(x) for x in KV_TRACEBACK)
    assert [ln.text for ln in normalize(log)] == KV_TRACEBACK
    assert diagnose(log).cls == "kv_cache_insufficient"


def test_bracketed_words_like_colour_codes_stay_without_a_reset_code():
    log = "\n".join(["INFO 01-22 20:05:33 [core.py:60] timeout [5m] for [model] warmup", *KV_TRACEBACK])
    assert normalize(log)[0].text == "timeout [5m] for [model] warmup"


@pytest.mark.parametrize("record", [
    "gpu-node-1:1234:{k} [0] NCCL INFO Bootstrap : Using eth0",  # NCCL's host:pid:tid (a stream name has no colon)
    "W0430 10:21:3{k}.351000 19593 torch/_dynamo/convert_frame.py:1233] w",  # glog's level and date
])
def test_a_records_own_head_after_an_offset_time_is_no_stream_name(record):
    lines = [f"2026-01-22T20:05:3{k}+00:00 {record.format(k=k)}" for k in range(4)]
    assert without_stream_names(lines, str) == lines


def test_a_kernel_line_after_an_offset_time_keeps_its_journal_reading():
    log = "\n".join(f"2026-01-22T20:05:3{k}+00:00 gpu-node-1 kernel: NVRM: Xid (PCI:0000:17:00): 79, GPU has fallen off "
                    f"the bus. {k}" for k in range(4))
    assert {ln.source for ln in normalize(log)} == {"kernel"}


@pytest.mark.parametrize("record, message, info", [
    ("[2026-01-22 20:05:33 TP0] Load weight begin.", "Load weight begin.", {"rank": "TP0"}),
    ("2025-03-07 23:50:27,531 - WARNING - flashinfer.jit: Prebuilt kernels not found", "flashinfer.jit: Prebuilt "
     "kernels not found", {"level": "WARNING"}),
    ("W0430 10:21:34.351000 19593 torch/_dynamo/convert_frame.py:1233] WON'T CONVERT", "WON'T CONVERT",
     {"level": "WARNING"}),
])
def test_a_records_head_after_an_offset_time_is_no_journal_host_and_ident(record, message, info):
    # a shipper's ISO time with a numeric offset, then a record: its head is the record's, not a host and an ident
    # ("[2026-01-22" and "20", "2025-03-07" and "23" were taken for them and the head was cut at its first colon)
    text, got = strip_prefixes("2026-01-22T20:05:33.123+00:00 " + record)
    assert text == message and info.items() <= got.items() and "source" not in got


def test_a_line_journalctl_left_out_says_so_where_it_was():
    # `journalctl -o json` writes a field over 4096 bytes as null (unless --all): a long exception line is lost, and
    # the evidence says where and what to export instead of showing the record's raw JSON
    crash = ["[2026-01-22 20:05:33 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/x/sglang/srt/managers/scheduler.py", line 1, in run_scheduler_process', None,
             "[2026-01-22 20:05:34] Received sigquit from a child process. It usually means the child failed."]
    d = diagnose("\n".join(json.dumps({"MESSAGE": m, "PRIORITY": "6", "_CMDLINE": "python3 -m sglang"}) for m in crash))
    assert d.cls == "unknown" and (JOURNAL_LEFT_OUT, 3) in [(e.line, e.lineno) for e in d.evidence]
    healthy = ["[2026-01-22 20:05:30] server_args=ServerArgs(...)", None,
               "[2026-01-22 20:05:40] The server is fired up and ready to roll!"]
    assert diagnose("\n".join(json.dumps({"MESSAGE": m}) for m in healthy)).cls == "healthy"
