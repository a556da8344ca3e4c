"""Raw log text -> clean lines, each with the rank (process) that wrote it.

A crash log reaches us as `journalctl` output (several timestamp formats, or `-o cat`), a
`docker compose logs` dump, or a paste from a terminal. Before any signature can be matched,
every line loses the decoration the transports and loggers added:

- ANSI colour codes and carriage-return progress redraws;
- the journal prefix (`Dec 02 13:31:17 b300 sglang[536]: `, `-o short-precise`, `-o short-iso`);
- container prefixes (`sglang-1  | `) and log-shipper timestamps (`2024-06-28T06:11:52.68Z `);
- process prefixes: vLLM/Ray (`(Worker_TP4 pid=1234) `, `(VllmWorker rank=3 pid=9) `,
  `(EngineCore_DP0 pid=5) `), torch elastic (`[rank2]: `);
- logger prefixes: SGLang (`[2026-05-30 14:47:43 DP3 TP3] `), vLLM (`ERROR 05-24 00:20:47 [core.py:1108] `).

The rank a prefix names is kept on the line. SGLang logs a traceback as ONE record, so its
continuation lines carry no prefix: they inherit the rank of the record that opened them while
they still look like part of it (indented frames, the exception line, chain connectors).
Lines that a terminal hard-wrapped are joined back first.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from .carried import expand_carried
from .copied import plain_characters, single_spaced, without_line_numbers
from .excgroups import GroupBorders
from .panels import unboxed
from .transports import (PASTE_SHARE, gitlab_lines, shows_syslog_escapes, syslog_controls, syslog_lines,
                         without_stream_names)
from .wraps import cut_lines, fold_signs, folded_lines

__all__ = ["CXX_FRAME", "CXX_RAISED", "IPY_CELL", "IPY_FRAME", "IPY_HEADER", "QUIET_LEVELS", "Line", "normalize", "strip_prefixes", "strip_ansi", "with_continuation"]


@dataclass(slots=True)
class Line:
    no: int  # 1-based number of the (first) raw line it came from
    text: str  # the message, prefixes removed
    rank: str | None = None  # "TP0", "DP3 TP3", "TP4", "rank3", ... or None (main process / unknown)
    source: str | None = None  # journal ident[pid] or container name, when the transport said
    time: str | None = None  # the logger's timestamp, as written
    prefixed: bool = False  # a logger/process prefix was found on this very line
    level: str | None = None  # the log level a logger prefix named (INFO, WARNING, ERROR, ...), if any


# the levels of records that report, not fail: never a failure, never decisive evidence
QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING"})
# the C++ stack torch's c10 prints under an error: its header says an exception was raised and where
# ("Exception raised from <function> at <file>:<n> (most recent call first):"), then its frames say where
# it passed ("frame #N: c10::Error::Error(...) + 0x96 (... in libc10.so)"). Where, never the message:
# neither line continues the one before it, and a frame is never a failure ("Error::Error" is a C++ name)
CXX_RAISED = re.compile(r"^\s*Exception raised from \S+ at ")
CXX_FRAME = re.compile(r"^\s*frame #\d+: ")
# IPython's / Jupyter's traceback (ultratb): its header names the exception ("ValueError    Traceback (most recent
# call last)"); a frame is "File <path>:<line>, in <qualified name>(<arguments>)" (IPython 8) or "Cell In[3], line 2"
# (a notebook cell). Read by tracebacks.py; each opens a record of its own here (_NEW_RECORD)
IPY_HEADER = re.compile(r"^\s*[A-Za-z_][\w.]*\s+Traceback \(most recent call last\)\s*$")
IPY_FRAME = re.compile(r"^\s*File (?P<file>[^\s\"][^,]*?\.py):(?P<line>\d+)(?:, in (?P<func>[\w.<>]+))?")
IPY_CELL = re.compile(r"^\s*Cell In ?\[\d*\], line (\d+)\s*$")  # the line unnamed: _NEW_RECORD joins it to IPY_FRAME

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][AB012]")
# only colour/style (SGR) codes: they end in m. The escape byte written out: `cat -v`'s ^[, less's ESC, a lost
# byte's ?, and a program's string escapes (a notebook's traceback printed as a list of Python strings,
# "'\x1b[0;31mAttributeError\x1b[0m'", rapidsai/docker#741; an .ipynb's JSON "\u001b[0;31m"; a shell's \033, \e)
_TEXT_SGR = re.compile(r"(?:\^\[|ESC|\?|\\x1b|\\u001b|\\033|\\e)\[[0-9;]*m")
# the same codes with the escape byte lost altogether: a page shows no ESC, so a log copied from a browser keeps
# "[32mINFO[0m:     Started server process" (uvicorn), "[0;31mTraceback[0m" (IPython). Removed only from a paste
# that has a reset code ("[0m", "[39m") and at least one more; digits only ("[m" starts "[model]"), never
# before "]" ("[5m]" is a duration)
_BARE_SGR = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m(?!\])")
_BARE_RESET = re.compile(r"\[(?:0|39|0;39|39;49)m(?!\])")
# a journal line's host and ident[pid]: never a bracket's start or a number before a colon ("[2026-01-22 20:05:33
# TP0]", "23:50:27,531", "10:21:34": the head of a record behind a shipper's time, not a host and an ident)
_HOST_IDENT = r"(?P<host>[^\s:\[][^\s:]*) (?!\d+[\[:])(?P<ident>[^\s\[:/]+)(?:\[(?P<pid>\d+)\])?: ?"
# journalctl -o short / short-precise / short-full-ish:  "Dec 02 13:31:17[.123456] host ident[pid]: "
# (the month is localised: "Dec", "авг", "déc.")
_JOURNAL_SHORT = re.compile(
    r"^(?:[^\W\d_]{2,4}\.? )?(?:[^\W\d_]{3,5}\.?) [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?(?: \d{4})?(?: [A-Z]{2,5})? "
    + _HOST_IDENT
)
# journalctl -o short-iso / short-iso-precise:  "2026-12-02T13:31:17+0000 host ident[pid]: "
# (a log shipper's "Z" time followed by "word word: message", such as "missing tensor: x", is not a
# journal line unless it names a pid: journalctl writes a numeric offset)
_JOURNAL_ISO = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?P<tz>Z|[+-]\d\d:?\d\d)? "
    + _HOST_IDENT
)
# journalctl -o short-full: "Wed 2026-12-02 13:31:17 UTC host ident[pid]: " (the zone an abbreviation or
# "+03": not a level word, "ERROR 03-24 09:43:07 x.py:1]" or "error: invalid argument: -V" behind a bare time)
_JOURNAL_FULL = re.compile(
    r"^(?:[^\W\d_]{2,4} )?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?!(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE) )(?:[A-Z]{2,5}|[+-]\d\d(?::?\d\d)?) "
    + _HOST_IDENT
)
# journalctl -o short-unix: "1733146277.123456 host ident[pid]: "
_JOURNAL_UNIX = re.compile(r"^\d{9,10}\.\d+ " + _HOST_IDENT)
# docker compose: "sglang-1  | ", "deepseek-v4-1-1  |", "tensorrtllm_backend-1  | "; a named container
# or another compose tool: "qanything-container-local  | ", "[sglang]     | " (the name padded to one width)
# `docker service logs` (swarm) names the task and its node: "sglang.1.x7k2m9p4q1rs@gpu-node-1    | "
# (<service>.<slot or node id>.<task id>@<node>, padded; docs.docker.com/engine/reference/commandline/service_logs)
_CONTAINER = re.compile(r"^(?P<name>[A-Za-z0-9][\w.-]*-\d+|[A-Za-z0-9][\w.-]*_\d+)\s+\| ?"
                        r"|^(?P<task>[A-Za-z0-9][\w.-]*\.[a-z0-9]+(?:\.[a-z0-9]+)?)@[A-Za-z0-9][\w.-]*\s+\| ?"
                        r"|^(?:\[(?P<bracketed>[A-Za-z0-9][\w.-]*)\]\s+|(?P<named>[A-Za-z0-9][\w.-]*) {2,})\| ")
# a library's own Python logging record, "<time> - LEVEL - name: message" (FlashInfer's
# "2025-02-25 08:37:29,910 - WARNING - flashinfer.jit: ..."): its level is the record's
_PYLOG = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+ - (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
                    r"(?=[\w.]+: )")
# a program's own Python logging record with its pid and logger before the level, and where it was logged after
# (KServe's "2024-07-01 07:28:04.488 1 kserve ERROR [__main__.py:<module>():254] "): its level is the record's
_PYLOG_PID = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+ \d+ [\w.-]+ "
                        r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?=\[[\w.-]+\.py:)")
# a program's own Python logging record with its logger and pid before the level, padded (Xinference's
# "%(asctime)s %(name)-12s %(process)d %(levelname)-8s %(message)s": "2024-05-29 08:41:33,373 xinference.core.worker
# 9528 ERROR    Failed to load model"): its level is the record's
_PYLOG_NAME_PID = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? [A-Za-z_][\w.-]* +\d+ "
                             r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) {1,5}")
# SGLang's router logs its own records with their level: the Rust router through `tracing`
# ("2025-11-04 10:05:37  INFO sglang_router_rs::server: src/server.rs:830: ", the target a Rust module path)
# and its older Python wrapper ("[Router (Rust)] 2025-03-08 02:33:09 - INFO - "). Their level is the record's:
# an INFO note that a worker's health check is still pending "with error: ..." while the worker starts is no
# failure; the router's own ERROR records stay loud.
_RUST_TRACING = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?Z?\s+(?P<level>TRACE|DEBUG|INFO|WARN|ERROR) "
                           r"(?=[a-z_]\w*(?:::\w+)+: )")
_ROUTER_PY = re.compile(r"^\[Router \((?:Rust|Python)\)\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d - "
                        r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) - ")
_ROUTER_LEVEL = {"TRACE": "DEBUG", "WARN": "WARNING"}
# a program's own Python logging record that names where it was logged, "<time> - name - LEVEL - file.py:N - "
# (lmdeploy's "2025-03-19 20:54:50,520 - lmdeploy - WARNING - archs.py:55 - "): its level is the record's.
# A relay (below) logs another process's output and has no source location of its own.
_PYLOG_OWN = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+ - [\w.<>-]+ - "
                        r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?=[\w.-]+\.py:\d+ - )")
# a program that relays the server's output through its own logger: Python logging's
# "2025-03-07 23:50:27,531 - __main__ - INFO - " (olmocr), TorchServe's
# "2024-09-13T22:25:37,532 [WARN ] W-9000-model_1.0-stderr MODEL_LOG - ". Peeled, but its level is not
# the record's: relays log a subprocess's stderr (its tracebacks too) at INFO or WARN.
_RELAY = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d+ (?:- (?:[\w.<>-]+ - )?"
                    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?:[\w.<>-]+ - )?|\[(?:DEBUG|INFO|WARN|ERROR) ?\] \S+ MODEL_LOG - )")
# DJL Serving (AWS's LMI containers on SageMaker) relays its Python worker's stdout and stderr through log4j, the
# worker named by its pid and model: "[INFO ] PyProcess - W-210-model-stdout: " (its console pattern
# "[%-5level] %c{1} - %msg"), "WARN  PyProcess W-252-model-stderr: " (older images), with the file appender's time
# after the level. Peeled like the relays above: stderr comes at WARN, a traceback at INFO when printed to stdout.
# One space goes; the relayed line's own indentation (a traceback's, pydantic's) stays
_DJL_RELAY = re.compile(r"^(?:\[[A-Z]+ *\] +|[A-Z]+ +)?(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +)?"
                        r"PyProcess (?:- )?W-[\w.-]+-std(?:out|err): ")
# LocalAI relays a backend's output (its vLLM backend's too) through zerolog's console writer, at the time of day and
# DEBUG: "5:32AM DBG GRPC(llama-2-7b-chat.Q4_K_M.gguf-127.0.0.1:43735): stderr ". Peeled like the relays above
_LOCALAI_RELAY = re.compile(r"^\d{1,2}:\d\d[AP]M (?:TRC|DBG|INF|WRN|ERR|FTL) GRPC\([^()]*\): std(?:out|err) ")
# the same relay in FastChat's format, "<time> | LEVEL | logger | " (its workers log a subprocess's stderr as
# "2023-08-15 00:59:12 | ERROR | stderr | Traceback ..."): peeled the same way, its level not the record's
_PIPE_RELAY = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? \| (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \| "
                         r"[\w.<>-]+ \| "
                         # and Loguru's default, "<time> | LEVEL    | module:function:line - ", the same way
                         r"|^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? \| (?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) *"
                         r"\| [\w.<>-]+:[\w.<>-]+:\d+ - ")
# a bare time a wrapper writes before every line of its child's output (`ts '%Y-%m-%d %H:%M:%S'`, a job
# runner's log, an export with a tab between time and line): "2026-01-22 20:05:33 ", "2026-01-22 20:05:33.123\t",
# "20:05:33 ".
# The one separator goes, the line's own indentation (a traceback's) stays. Tried after every form above
_BARE_TS = re.compile(r"^(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]")
# `kubectl logs --prefix`: "[pod/sglang-0/sglang] "; Open MPI's `mpirun --tag-output`: "[1,0]<stderr>:"
_KUBECTL_PREFIX = re.compile(r"^\[(?:pod|deployment|statefulset|job|daemonset|replicaset)/(?P<source>[^\s\]/]+/[^\s\]]+)\] ")
_MPI_TAG = re.compile(r"^\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:")
# a label every line of the paste starts with, that names a task, a rank or a node by number: `srun --label`'s
# "0: ", pdsh's "gpu-node-3: ". Read over the whole paste (a line alone could be a message), and only with a
# number in it ("Error: " or "sglang: " before most lines is no label)
_LABEL = re.compile(r"^[A-Za-z0-9][\w.-]{0,39}: ")
# a CI log's gutter before its timestamp (Buildkite): "  | [2025-03-10T15:07:20Z] "
_GUTTER = re.compile(r"^ *\| (?=\[\d{4}-\d\d-\d\dT)")
# a paste quoted in Markdown: "> " before every line (not Python's ">>>" prompt)
_QUOTE = re.compile(r"^>(?: |$)")
# a terminal UI's log pane (k9s, lazydocker): every line framed by box-drawing bars
_PANE = re.compile(r"^│ ?")
_PANE_END = re.compile(r"\s*│\s*$")
# pytest's report of an error: "E       RuntimeError: ..." (the E, then the code's indentation)
_PYTEST_E = re.compile(r"^E(?= {3}|\t)")
# pytest's short test summary: "FAILED tests/x.py::test[a-1] - RuntimeError: ..." (the exception follows)
_PYTEST_SUMMARY = re.compile(r"^(?:FAILED|ERROR) \S+ - (?=[A-Za-z_][\w.]*(?:Error|Exception|Failure)\b)")
# log shippers / kubectl --timestamps / GitHub Actions: "2024-06-28T06:11:52.685300953Z ", "[2025-11-06T02:09:46.576Z] ";
# a Kubernetes node's container log (CRI format) adds the stream and a full/partial flag: "... stdout F "
_SHIP_TS = re.compile(r"^\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]? "
                      r"(?:(?:stdout|stderr) [FP] )?"
                      r'(?:\{\w+="[^"]*"(?:, ?\w+="[^"]*")*\} )?')  # Loki's logcli: the stream's labels
# vLLM / Ray process prefix: "(Worker_TP4 pid=1234) ", "(VllmWorker rank=3 pid=99) ", "(EngineCore_DP0 pid=5) ",
# "(LLMRayActor pid=20770) ", "(ServeReplica:app:Deployment pid=12249, ip=10.0.155.99) ", FastChat's workers
# "(worker-oss-llama7b, pid=41756) " (the comma after the name is not the rank's); vLLM 0.10's workers name their
# rank after a space: "(VllmWorker TP0 pid=2748156) ", "(VllmWorker PP1_TP0 pid=9) "; Ray's unnamed tasks and its
# own daemons: "(pid=4242) ", "(pid=4242, ip=10.0.0.2) ", "(raylet) ", "(raylet, ip=10.0.0.2) "; SkyPilot's nodes
# "(head, rank=0, pid=2345) ", "(worker1, rank=1, pid=2346, ip=10.0.0.2) "
_PROC = re.compile(r"^\((?:(?P<who>[^()\s,]+(?: rank=\d+| (?:TP|DP|PP|EP)\d+(?:_(?:TP|DP|PP|EP)\d+)*|, rank=\d+)?),? )?"
                   r"(?:pid=(?P<pid>\d+)|(?P<daemon>raylet|gcs_server|dashboard_agent|log_monitor)(?=[,)]))"
                   r"(?:, ip=[\d.:a-f]+)?\)\s?")
# vLLM logger: "ERROR 05-24 00:20:47 [core.py:1108] ", "INFO 01-11 15:51:02 llm_engine.py:70] ",
# "WARNING 03-23 21:43:38.123 [engine.py:448] "; with the year when a program sets the date format of vLLM's logger
# (NVIDIA NIM for LLMs: "INFO 2024-09-27 12:59:39.857 ngc_profile.py:231] ")
_VLLM_TIME = r"(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
_VLLM = re.compile(
    rf"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<time>{_VLLM_TIME}) "
    r"\[?[\w./-]+:\d+\] ?"
)
# Ray Serve's own records (its controller's, proxy's and replicas', e.g. a VLLMDeployment's): level, time, the component
# and its id (a request id and route when serving), then where it was logged (Ray's SERVE_LOG_RECORD_FORMAT):
# "INFO 2024-11-18 01:46:34,210 default_VLLMDeployment ujj4diu5 replica.py:893 - ", older releases
# "WARNING 2024-11-18 01:46:34,210 serve 1234 -- ". Its level is the record's
_RAY_SERVE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ "
                        r"(?:\S+ ){1,5}?(?:[\w.-]+\.py:\d+ - |-- )")
# tags a launcher or supervisor puts before vLLM's own record head, in forms no rule above names:
# "[/bin/sh]: [EngineCore_DP0][pid=1242] ERROR 01-22 12:05:33.129 [core.py:1302] ". Only brackets,
# parentheses, colons and spaces, and only when the record head follows (its level is the line's)
_TAGS_BEFORE_VLLM = re.compile(
    r"^(?:\[[^\[\]]{1,80}\]|\([^()]{1,80}\)|[: ])+?(?=(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
    rf"{_VLLM_TIME} \[?[\w./-]+:\d+\] ?)"
)
# a launcher that relays its child's output under the child's name, behind its own time:
# "[2026-01-22 20:05:33] [/bin/sh]: " (read only after a bare time was peeled: SGLang's own "[time TP0] " is
# followed by its message)
# (while a line is peeled: which of its writer's fields a launcher's process or rank prefix gave, "source" or
# "rank", so that a process prefix inside it overrides them and not what a transport said; never returned)
_LAUNCHER = "_launcher"
_BRACKET_SOURCE = re.compile(r"^\[(?P<source>[^\[\]\s]{1,64})\]: ?")
# a level word in that bracket is a logger's ("[2025-08-27 13:51:19][ERROR]: ", an SGLang build's record head)
_BRACKET_LEVELS = frozenset({"DEBUG", "INFO", "WARN", "WARNING", "ERROR", "CRITICAL"})
# SGLang logger: "[2026-05-30 14:47:43 TP0] ", "[2026-05-30 14:47:43 DP3 TP3] ", "[23:23:54 TP7] ",
# "[2025-03-10 14:17:52,123 TP0 EP0] ", "[2026-05-30 14:47:43] "
_SGLANG = re.compile(
    r"^\[(?P<time>(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?)"
    r"(?P<rank>(?: (?:TP|DP|EP|PP|CP|ATTN_DP|ATTN_CP|MOE_DP|MOE_EP|MOE_TP|PD)\d+)*)\] ?"
)
# torch elastic / torchrun: "[rank2]: ", "[default0]:", "[rank0]:[W ...]"
_TORCH_RANK = re.compile(r"^\[(?P<rank>rank\d+|default\d+)\]: ?")
# torch / glog: "W0430 10:21:34.351000 19593 torch/_dynamo/convert_frame.py:1233] " (level letter first)
_GLOG = re.compile(r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\] ?")
# Python logging's default format (basicConfig): "INFO:uvicorn.error:Application startup complete."
# The logger's name is no message: "uvicorn.error" is where a record comes from, not an error.
_PYLOG_BASIC = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>[A-Za-z_][\w.]*):(?=\S)")
# a library's own logger after the time a bracket held: "<name> LEVEL: " (LMCache's "[2025-11-19 10:57:44,552]
# LMCache INFO: Max Q error: 0.0078125 (positional_encoding.py:123:...)": a record at INFO, whatever it says)
_NAMED_LEVEL = re.compile(r"^(?P<logger>[A-Za-z][\w.-]{0,30}) (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL): (?=\S)")
_GLOG_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# SGLang's record head since its 2026 releases, after the bracket with the time: "[2026-01-22 09:59:32] WARNING
# server_args.py:2184: " (the level, then the file and line that logged it)
_LEVEL_FILE = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.-]+\.py:\d+: (?=\S)")

_TB_START = "Traceback (most recent call last)"
_CONNECTOR = re.compile(r"^(The above exception was the direct cause of the following exception:|"
                        r"During handling of the above exception, another exception occurred:)")
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Requested|Timeout)\b")
_FRAME_OPEN = re.compile(r'^\s*File "[^"]*$')  # a frame line cut inside its path
# a frame line a paste wrapped at the space before its function's name ('File "x.py", line 713, in' and
# then 'load_weights_and_postprocess' on a line of its own): the name alone would read as the failure
_FRAME_NO_FUNC = re.compile(r'^\s*File "[^"]+", line \d+, in$')
_FUNC_NAME = re.compile(r"^\s*[\w.<>]+\s*$")


def strip_ansi(text: str) -> str:
    text = _ANSI.sub("", text) if "\x1b" in text else text
    # a colour escape a viewer or a copy wrote out as text (`cat -v`'s ^[, less's ESC, a lost
    # byte's ?): without this the process prefix after it is not read and the line keeps it
    if "[" in text and ("^[[" in text or "ESC[" in text or "?[" in text or "\\" in text):
        text = _TEXT_SGR.sub("", text)
    return text


def _proc_rank(who: str) -> str:
    m = re.search(r"rank=(\d+)", who)
    if m:
        return f"rank{m.group(1)}"
    m = re.search(r"[_ ]((?:TP|DP|PP|EP)\d+(?:_(?:TP|DP|PP|EP)\d+)*)$", who)
    if m:
        return m.group(1).replace("_", " ")
    return who


def strip_prefixes(raw: str) -> tuple[str, dict]:
    """Remove every known prefix from one line. Returns (message, info) where info may hold
    source, rank, time and prefixed=True when a logger/process prefix named the writer."""
    text = strip_ansi(raw)
    if "\r" in text:  # progress bars redraw with CR: keep what the terminal finally showed
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    info: dict = {}
    if text.startswith("│"):
        text = _PANE_END.sub("", text)
    for _ in range(10):  # transports nest in either order; each pass peels one layer (a relay takes two)
        m = _peel(text, info)
        if m is None:
            break
        text = text[m.end():]
    if "\t" in text:  # a paste that turned indentation into tabs: tracebacks are read by their indentation
        text = text.expandtabs(4)
    info.pop(_LAUNCHER, None)
    return text.rstrip("\n"), info


def _journal_iso(text: str) -> re.Match | None:
    m = _JOURNAL_ISO.match(text)
    if m and not m["pid"] and m["tz"] in (None, "Z"):
        return None
    return m


def _peel(text: str, info: dict) -> re.Match | None:
    """The outermost prefix of ``text`` (its first character picks the candidates), with what
    it says about the writer added to ``info``; None when the line starts with no known prefix."""
    c = text[:1]
    if not c:
        return None
    m = None
    # a journal line starts with a word of 2 to 5 letters (weekday or month, as the locale names it)
    if c.isalpha() and (text[2:3] == " " or text[3:4] in (" ", ".") or text[4:5] in (" ", ".")):
        m = _JOURNAL_SHORT.match(text) or _JOURNAL_FULL.match(text)
        if m:
            info.setdefault("source", f"{m['ident']}[{m['pid']}]" if m["pid"] else m["ident"])
    if m is None and c.isdigit():
        m = _dated(text, info)
    if m is None and "PyProcess" in text[:40]:
        m = _DJL_RELAY.match(text)
    if m is None and "GRPC(" in text[:20]:
        m = _LOCALAI_RELAY.match(text)
    if m is None and c == "(":
        m = _process_prefix(text, info)
    if m is None and c == "[":
        m = _logger_bracket(text, info)
    if m is None and c in "[(":
        m = _relayed(text, c, info)
    if m is None and c in "DIWECF":
        m = _logger_level(text, c, info)
    if m is None and c.isalpha() and info.get("time") is not None:  # only behind the time a prefix gave
        m = _NAMED_LEVEL.match(text)
        if m:
            info.setdefault("level", m["level"])
    if m is None and c == ">":
        m = _QUOTE.match(text)
    if m is None and c == "E":
        m = _PYTEST_E.match(text)
    if m is None and c in "FE":
        m = _PYTEST_SUMMARY.match(text)
    if m is None and c == "│":
        m = _PANE.match(text)
    if m is None and "|" in text[:64]:
        m = _CONTAINER.match(text)
        if m:
            info.setdefault("source", m["name"] or m["task"] or m["named"] or m["bracketed"])
        else:
            m = _GUTTER.match(text)
    return m


def _dated(text: str, info: dict) -> re.Match | None:
    """A prefix that starts with a date or a time: a journal's, a program's logging record, a relay's, a shipper's."""
    m = _journal_iso(text) or _JOURNAL_UNIX.match(text) or _JOURNAL_FULL.match(text)
    if m:
        info.setdefault("source", f"{m['ident']}[{m['pid']}]" if m["pid"] else m["ident"])
        return m
    m = (_PYLOG.match(text) or _PYLOG_OWN.match(text) or _PYLOG_PID.match(text) or _PYLOG_NAME_PID.match(text)
         or _RUST_TRACING.match(text))
    if m:
        info.setdefault("level", _ROUTER_LEVEL.get(m["level"], m["level"]))
        return m
    return _RELAY.match(text) or _PIPE_RELAY.match(text) or _SHIP_TS.match(text) or _BARE_TS.match(text)


def _process_prefix(text: str, info: dict) -> re.Match | None:
    """vLLM's / Ray's / SkyPilot's process prefix. Behind a launcher's own process or rank prefix (Ray's,
    SkyPilot's, mpirun's) the innermost process is the writer: its name and rank are the line's."""
    m = _PROC.match(text)
    if m:
        _time_was_the_relays(info)
        # what a launcher's prefix before this one said is overridden, what a transport said (a container's or a
        # journal's name, the key its lines are continued by) is kept
        launched = info.get(_LAUNCHER, False)
        if m["who"] and (launched or "rank" not in info):
            info["rank"] = _proc_rank(m["who"])
        if "source" not in info or launched == "source":
            info["source"] = f"pid{m['pid']}" if m["pid"] else m["daemon"]
            info[_LAUNCHER] = "source"
        else:
            info[_LAUNCHER] = "rank"
        info["prefixed"] = True
    return m


def _relayed(text: str, c: str, info: dict) -> re.Match | None:
    """A launcher's name for its child after its own time ("[time] [/bin/sh]: "), or tags no rule names
    directly before vLLM's record head."""
    m = None
    if c == "[" and info.get("time") is not None and not info.get("rank"):
        m = _BRACKET_SOURCE.match(text)
        if m and m["source"].upper() in _BRACKET_LEVELS:  # "[time][ERROR]: ": the record's own level, not a child
            info.setdefault("level", _ROUTER_LEVEL.get(m["source"].upper(), m["source"].upper()))
            return m
        if m:
            _time_was_the_relays(info)
            info.setdefault("source", m["source"])
            return m
    m = _TAGS_BEFORE_VLLM.match(text)
    if m:
        _time_was_the_relays(info)
        info["prefixed"] = True
    return m


def _time_was_the_relays(info: dict) -> None:
    """A process or child name after a bare time ("[2026-01-22 20:05:33] (APIServer pid=7) "): that time is
    the relay's, not a logger record's; a record's own time is what separates it from the traceback its
    exc_info prints under it, so the relay's would split every such traceback from its warning."""
    if info.get("time") is not None and not info.get("rank") and not info.get("level"):
        del info["time"]
        info.pop("prefixed", None)


def _logger_bracket(text: str, info: dict) -> re.Match | None:
    """A prefix in brackets: SGLang's logger (time and ranks), its router's, torch elastic's rank, a shipper's time."""
    m = _ROUTER_PY.match(text)
    if m:
        info.setdefault("level", _ROUTER_LEVEL.get(m["level"], m["level"]))
        return m
    m = _SGLANG.match(text)
    if m:
        rank = m["rank"].strip()
        if rank:
            info["rank"] = rank
        info.setdefault("time", m["time"])
        info["prefixed"] = True
        return m
    m = _KUBECTL_PREFIX.match(text)
    if m:
        info.setdefault("source", m["source"])
        return m
    m = _TORCH_RANK.match(text) or _SHIP_TS.match(text)
    if m is None:
        m = _MPI_TAG.match(text)
        if m:
            info.setdefault("rank", f"rank{m['rank']}")
            info[_LAUNCHER] = "rank" if "source" in info else "source"
            info.setdefault("source", f"rank{m['rank']}")
            info["prefixed"] = True
            return m
    if m and "rank" in m.groupdict():
        info.setdefault("rank", m["rank"])
        info["prefixed"] = True
    return m


def _logger_level(text: str, c: str, info: dict) -> re.Match | None:
    """A prefix that starts with its level: vLLM's logger (``ERROR 05-24 ...``), Ray Serve's records
    (``INFO 2024-11-18 ... replica.py:893 - ``), glog's (``W0430 ...``) or Python logging's default format
    (``INFO:uvicorn.error:...``)."""
    m = _VLLM.match(text)
    if m:
        info.setdefault("time", m["time"])
        info.setdefault("level", "WARNING" if m["level"] == "WARN" else m["level"])
        info["prefixed"] = True
    elif m := _RAY_SERVE.match(text):
        info.setdefault("level", m["level"])
    elif c in "IWEF":
        m = _GLOG.match(text)
        if m:
            info.setdefault("level", _GLOG_LEVEL[m["level"]])
            info["prefixed"] = True
    if m is None:
        m = _PYLOG_BASIC.match(text)
        if m is None and info.get("time") is not None:  # only behind the time a prefix gave
            m = _LEVEL_FILE.match(text)
        if m:
            info.setdefault("level", m["level"])
    return m


def _wrap_width(lines: list[str]) -> int | None:
    """The column at which a terminal hard-wrapped this paste, if it clearly did: many lines of
    exactly one length >= 60 and (almost) none longer. Real logs have varied lengths."""
    lengths = Counter(len(line) for line in lines if len(line) >= 60)
    if not lengths:
        return None
    width, count = lengths.most_common(1)[0]
    longer = sum(n for length, n in lengths.items() if length > width)
    if count >= 3 and longer <= len(lines) // 100 and count >= 0.2 * sum(lengths.values()):
        return None if _records_of_one_length(lines, width) else width
    return None


_WIDTH_SAMPLE = 64  # lines of the width asked what follows them: enough to tell, cheap on a 50,000-line log


def _records_of_one_length(lines: list[str], width: int) -> bool:
    """Most lines of the width are followed by a record of its own: a logger's records of one length (a busy SGLang
    log's "Decode batch, ..." lines differ only in a few digits), not a terminal's pieces, which go on in the next
    line (the shell's "Killed" after the last record was joined into it). A line a console padded to its width (its
    blanks at the end) is neither: the pieces of a long line among them are what the width joins."""
    at_width = [i for i, line in enumerate(lines[:-1]) if len(line) == width and not line.endswith("  ")]
    at_width = at_width[:_WIDTH_SAMPLE]
    return sum(_has_record_prefix(lines[i + 1]) for i in at_width) * 2 > len(at_width)


def _has_record_prefix(text: str) -> bool:
    """The line begins with a logger's or a transport's prefix: a record of its own, which no fold or wrap begins."""
    stripped = strip_prefixes(text)[1]
    return bool(stripped.get("prefixed") or stripped.get("source"))


def _looks_like_line_start(text: str) -> bool:
    """A line that clearly begins a record of its own (so it is not a wrapped remainder)."""
    if _has_record_prefix(text):
        return True
    s = text.lstrip()
    return (s.startswith(("File \"", "Traceback", "During handling", "The above exception", "Loading "))
            or bool(_EXC_LINE.match(text)) or bool(_NEW_RECORD.match(s)))


def _rejoin(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join lines a terminal hard-wrapped, and frame lines cut inside their path. Keeps the
    1-based number of each logical line's first raw line."""
    clean = [strip_ansi(line).rstrip("\n") for _, line in numbered]
    width = _wrap_width(clean)
    signs = fold_signs(clean, _has_record_prefix)
    cut = cut_lines(clean, _looks_like_line_start, _says_failure, signs[0]) if width is None else set()
    # a fold the paste shows (``fold -s``; its lines often end at one width too, read as a hard wrap's) moves a word
    # whole to the next line, whatever it is: a traceback's header, an exception's name
    folds = folded_lines(signs)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(clean):
        # the pieces joined once at the end, and whether they hold a frame kept as they come: asked of the whole
        # line at every piece, both were quadratic in a long line cut into thousands of pieces
        start, parts = i, [clean[i]]
        framed = 'File "' in clean[i]
        while i + 1 < len(clean):
            nxt = clean[i + 1]
            wrapped = bool(nxt) and (i in folds or (i in cut or width is not None and len(clean[i]) == width)
                                     and not _looks_like_line_start(nxt))
            # a frame cut inside its path goes on with the next line's message: a transport's prefix on that
            # line is not part of the path, and a line of the prefix alone is a blank line
            framing = framed and not wrapped  # a wrapped piece is joined as it is: no need to read the frame
            own = strip_prefixes("".join(parts))[0] if framing else ""
            rest = strip_prefixes(nxt)[0] if framing else nxt
            cut_frame = framing and bool(_FRAME_OPEN.match(own)) and bool(rest.strip()) and not _looks_like_line_start(nxt)
            cut_func = framing and bool(_FRAME_NO_FUNC.match(own)) and bool(_FUNC_NAME.match(rest))
            if not (wrapped or cut_frame or cut_func):
                break
            piece = nxt if wrapped else (" " + rest.strip()) if cut_func and not cut_frame else rest
            framed = framed or 'File "' in parts[-1][-5:] + piece
            parts.append(piece)
            i += 1
        out.append((numbered[start][0], "".join(parts)))
        i += 1
    return out


def _says_failure(line: str) -> bool:
    """The line says a failure on its own (startup.FAILURE), its prefixes aside: a wrap read from one line's shape
    must not bury it in the line before (wraps.py)."""
    from .startup import FAILURE  # startup reads normalize's Lines: imported when first used, not at load
    return bool(FAILURE.search(strip_prefixes(line)[0]))


class _Block:
    """The record a prefixed line opened, per source: whose unprefixed continuation lines follow."""

    __slots__ = ("rank", "mode", "after_blank", "time", "level", "closed")

    def __init__(self, rank, mode, time, level=None):
        self.rank, self.mode, self.after_blank, self.time, self.level = rank, mode, False, time, level
        self.closed = False  # a traceback record past its exception line: only a chained section goes on it


# a traceback's header ends its line (colour codes aside): a record that keeps its traceback on one line has none
_HEADER_ENDS = re.compile(re.escape(_TB_START) + r":?(?:\s|\x1b\[[\d;]*m)*$")
# a time at the start of a line that sorts as text (ISO, or a date and a time), bare or in brackets
_SORTABLE_TIME = re.compile(r"^\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)")
_HTML_ENTITY = re.compile(r"&(?:quot|apos|gt|lt|amp|nbsp|#\d{2,5}|#x[0-9a-fA-F]{2,4});")
# a line a Markdown paste set in bold to point at it ("**TypeError: EngineArgs.__init__() got an unexpected keyword
# argument 'worker_use_ray'**" under its traceback): the words inside; not a row of stars, nor "**kwargs" in code, nor
# a label of a word or two a user sets above the paste ("**Error:**", "**Error log**": no message of the program's)
_BOLD_LINE = re.compile(r"^(\s*)\*\*(?=[^\s*])(?=\S+(?:\s+\S+){2})(.*[^\s*])\*\*\s*$")


def _undecorated(text: str) -> list[tuple[int, str]]:
    """The paste's lines, each numbered by the raw line it came from, without what a web page or an
    editor added to the whole of it: HTML escapes (``File &quot;/x.py&quot;``) and an indentation every
    line shares (a block indented to quote it). Relative indentation, which tracebacks are read by, is
    kept. A line carried as data (a JSON log record, an escaped string) is first the lines it holds."""
    if "&" in text and _HTML_ENTITY.search(text):
        text = html.unescape(text)
    text = plain_characters(text)  # after the escapes: "&nbsp;" is a no-break space
    syslog = shows_syslog_escapes(text)
    if syslog:  # before colour codes that lost their escape are read: "#033[0m" is one with its escape
        text = syslog_controls(text)
    if "m" in text and _BARE_RESET.search(text):
        text = _without_bare_colours(text)
    raw = without_line_numbers(text.splitlines())  # the outermost prefix: a viewer's, over whatever it showed
    numbered = gitlab_lines(_oldest_first(single_spaced(expand_carried(raw, _transport_peeled))))
    numbered = syslog_lines(numbered) if syslog else numbered
    lines = _unlabelled(without_stream_names([x for _, x in numbered], strip_ansi))
    margin = None  # the leading whitespace every non-blank line starts with
    for x in lines:
        if x.strip():
            lead = x[:len(x) - len(x.lstrip(" \t"))]
            margin = lead if margin is None else margin[:next((k for k, (a, b) in enumerate(zip(margin, lead))
                                                                if a != b), min(len(margin), len(lead)))]
            if not margin:
                break
    return unboxed([(no, x[len(margin):] if margin else x) for (no, _), x in zip(numbered, lines)], strip_ansi,
                   _EXC_LINE.match)


def _transport_peeled(line: str) -> str | None:
    """The line without what a transport wrote before it (a time, a CRI log's stream, kubectl's pod, a container's
    name, a journal's host and ident), for a JSON record behind it; None without one, and behind a program's own
    logger prefix (``INFO 01-22 ... [x.py:1] ``, SGLang's ``[time TP0] ``), whose JSON is a message, no record."""
    msg, info = strip_prefixes(line)
    return None if info.get("prefixed") or msg == line else msg


def _without_bare_colours(text: str) -> str:
    """The paste without colour codes that lost their escape byte (_BARE_SGR), when it holds a reset code and
    at least one more; codes that still have their escape (a byte or written out) go first, as they would."""
    stripped = strip_ansi(text)
    codes = _BARE_SGR.findall(stripped)
    if len(codes) < 2 or not _BARE_RESET.search(stripped):
        return text
    return _BARE_SGR.sub("", stripped)


def _oldest_first(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines in time order: a log viewer's export copied newest first (Grafana's and Loki's, Cloud Logging's,
    Datadog's) is turned over, each line keeping its number. Newest first: the times the lines start with go back
    at least twice and never forward (one step back is a line written late: a rank, a second process); without
    such times, every traceback's header comes after its frames."""
    lines = [x for _, x in numbered]
    stamps = [m[1].replace("T", " ").replace(",", ".") for x in lines if (m := _SORTABLE_TIME.match(x))]
    back = sum(a > b for a, b in zip(stamps, stamps[1:]))
    forth = sum(a < b for a, b in zip(stamps, stamps[1:]))
    if len(stamps) >= 3 and (back >= 2 or forth):
        return _entries_reversed(numbered, True) if back >= 2 and not forth else numbered
    headers = [i for i, x in enumerate(lines) if _TB_START in x and _HEADER_ENDS.search(x)]
    if headers and all(_frame_near(lines, i, -1, 3) and not _frame_near(lines, i, 1, 1) for i in headers):
        return _entries_reversed(numbered, False)
    return numbered


def _entries_reversed(numbered: list[tuple[int, str]], by_time: bool) -> list[tuple[int, str]]:
    """The paste's entries newest last, each entry's own lines kept in their order: a viewer lists entries, not
    lines, newest first, and an entry may hold several (a traceback a shipper's multiline stage kept as one entry,
    a JSON record carrying many lines). An entry: the lines of one raw line and, ``by_time``, a line that starts
    with a time with the lines after it that start with none."""
    entries: list[list[tuple[int, str]]] = []
    for k, (no, x) in enumerate(numbered):
        if not entries or (no != numbered[k - 1][0] and (not by_time or _SORTABLE_TIME.match(x))):
            entries.append([])
        entries[-1].append((no, x))
    return [line for entry in reversed(entries) for line in entry]


def _frame_near(lines: list[str], i: int, step: int, within: int) -> bool:
    """Whether one of the ``within`` non-blank lines from line ``i`` on in direction ``step`` is a frame line."""
    seen, k = 0, i + step
    while 0 <= k < len(lines) and seen < within:
        text = strip_prefixes(lines[k])[0].strip() if lines[k].strip() else ""
        if text:
            if text.startswith('File "'):
                return True
            seen += 1
        k += step
    return False


def _label_shape(line: str) -> str | None:
    """The line's _LABEL with its numbers as "#" ("gpu-node-#: "), or None (no label, or one without a number)."""
    m = _LABEL.match(line)
    return re.sub(r"\d+", "#", m.group()) if m and any(ch.isdigit() for ch in m.group()) else None


def _unlabelled(lines: list[str]) -> list[str]:
    """The lines without the numbered label most of them start with (_LABEL), when there is one."""
    filled = [x for x in lines if x.strip()]
    shapes = Counter(shape for shape in map(_label_shape, filled) if shape)
    if len(filled) < 3 or not shapes:
        return lines
    shape, count = shapes.most_common(1)[0]
    if count < PASTE_SHARE * len(filled):
        return lines
    return [x[_LABEL.match(x).end():] if _label_shape(x) == shape else x for x in lines]


def normalize(text: str) -> list[Line]:
    """Split, clean and attribute every line of a log. Empty lines are kept (they delimit
    tracebacks) as Line(text="")."""
    numbered = _undecorated(text)
    blocks: dict[str | None, _Block | None] = {}
    out: list[Line] = []
    for no, msg, info in _peeled(numbered):
        source = info.get("source")
        # journald gives every line of one unit the main PID; key continuation by the transport
        key = source
        if info.get("prefixed") and not _continues_under_process_prefix(blocks.get(key), info, msg):
            rank = info.get("rank")
            if _TB_START in msg:
                mode = "tb"
            elif msg.rstrip().endswith(":") or not msg.strip():
                mode = "msg"
            else:
                mode = "line"  # one-line record; indented follow-ups still belong to it
            blocks[key] = _Block(rank, mode, info.get("time"), info.get("level"))
            out.append(Line(no, msg, rank, source, info.get("time"), True, info.get("level")))
            continue
        block = blocks.get(key)
        rank = None
        if block is not None:  # also a line under the process prefix alone that goes on the record
            stripped = msg.strip()
            if block.mode == "tb":
                if not stripped:
                    block.after_blank = True
                    rank = block.rank
                elif block.after_blank and not (_CONNECTOR.match(stripped) or stripped.startswith(_TB_START)
                                                or msg[:1].isspace()):
                    blocks[key] = None
                else:
                    block.after_blank = False
                    rank = block.rank
                    if _CONNECTOR.match(stripped):
                        block.closed = False
                    elif not (msg[:1].isspace() or stripped.startswith((_TB_START, 'File "'))):
                        block.closed = True  # the exception line
            elif block.mode == "msg":
                if not stripped:
                    blocks[key] = None
                else:
                    rank = block.rank
                    if _TB_START in msg:
                        block.mode = "tb"
            else:  # "line": only indented continuation
                if msg[:1].isspace() and stripped:
                    rank = block.rank
                elif stripped.startswith(_TB_START):
                    block.mode, rank = "tb", block.rank
                else:
                    blocks[key] = None
        inherited = block is not None and rank is not None
        out.append(Line(no, msg, rank if rank is not None else info.get("rank"), source,
                        block.time if inherited else None, bool(info.get("prefixed")),
                        block.level if inherited else info.get("level")))
    return out


def _peeled(numbered: list[tuple[int, str]]) -> Iterator[tuple[int, str, dict]]:
    """Each logical line (hard wraps joined) without its transport's and logger's prefixes (and what they said of
    it), without an exception group's borders, behind which a group prints its tracebacks (excgroups.py), and out of
    the Markdown bold a paste can set it in."""
    groups = GroupBorders()
    for no, raw in _rejoin(numbered):
        msg, info = strip_prefixes(raw)
        inner = groups.peel(msg)
        if inner is not msg and inner.strip():
            # a record a process wrote inside the borders ("| [rank0]:[W714 ...] Warning: ..." after the exception
            # line): its prefix says it is no continuation of the exception's message
            inner, inside = strip_prefixes(inner)
            info = {**info, **inside} if inside.get("prefixed") else info
        yield no, _BOLD_LINE.sub(r"\1\2", inner) if "**" in inner else inner, info


def _continues_under_process_prefix(block: "_Block | None", info: dict, msg: str) -> bool:
    """A line behind a process prefix alone (vLLM's "(APIServer pid=2211) ", torch's "[rank0]: "; no logger
    time or level) that goes on the record of the same process before it: Python logging's exc_info traceback
    under a WARNING record, which the process prefix puts on every line. It goes on a record that announced
    more lines (its message ended with ":") only with a traceback or an indented line, and on a traceback
    until its exception line, then only with a chained section (a connector, a blank line). A traceback
    after that, or after a one-line record, is the process's own: a crash is not read as the warning."""
    if block is None or info.get("time") is not None or info.get("level") is not None or info.get("rank") != block.rank:
        return False
    stripped = msg.strip()
    if block.mode == "msg":
        return msg[:1].isspace() or stripped.startswith(_TB_START)
    if block.mode == "tb":
        return not block.closed or not stripped or _CONNECTOR.match(stripped) is not None
    return False


# A line that opens a record of its own: a traceback's parts, and NCCL's own record prefix
# "<host>:<pid>:<tid> [<device>] " (NCCL_DEBUG output: its lines from one process are often all of one
# length, which is no sign of a terminal's wrapping, and none continues the line before it); a line of
# the C++ stack torch's c10 prints under an error (CXX_RAISED, CXX_FRAME)
_NEW_RECORD = re.compile(r'^\s*(File "|Traceback \(most recent call last\)|During handling of|The above exception|'
                         r'\S+:\d+:\d+ \[\d+\] )|' + CXX_RAISED.pattern + "|" + CXX_FRAME.pattern + "|"
                         + IPY_HEADER.pattern + "|" + IPY_FRAME.pattern + "|" + IPY_CELL.pattern)


def _same_process(line: Line, nxt: Line) -> bool:
    """Both lines carry the same launcher's prefix and no logger's (no time, no level): Ray, SkyPilot, mpirun and
    docker compose put their prefix on every line a process prints, so a message's second line has one too."""
    return (line.prefixed and line.time is None and nxt.time is None and line.level is None and nxt.level is None
            and (line.source, line.rank) == (nxt.source, nxt.rank))


def with_continuation(lines: list[Line], i: int) -> tuple[str, str | None]:
    """Line ``i`` joined with the next line when that one continues it, and the next line's text
    (None when it does not): a message a paste or a logger wrapped at a word ("...failed to bind
    to [::]:29600 (errno: 98 - Address" / "already in use)"), a multi-line exception message. The
    next line continues it when it has no logger prefix of its own, comes from the same rank (or
    names none) and does not open a record (a frame, a traceback, an exception line). Callers
    count only what the joined text shows and the next line alone does not: the wrapped part."""
    text = lines[i].text
    if i + 1 >= len(lines) or not text.strip():
        return text, None
    nxt = lines[i + 1]
    if (not nxt.text.strip() or (nxt.prefixed and not _same_process(lines[i], nxt))
            or nxt.rank not in (None, lines[i].rank) or _NEW_RECORD.match(nxt.text) or _EXC_LINE.match(nxt.text.lstrip())):
        return text, None
    return f"{text.rstrip()} {nxt.text.strip()}", nxt.text
