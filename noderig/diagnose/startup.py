"""What the startup log says happened, apart from any signature: did something fail, did the
server reach ready, and how far the startup got (the catalog's [[stage]] milestones)."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import replace
from functools import lru_cache
from itertools import accumulate

from .anchors import needs_of
from .catalog import Catalog
from .normalize import CXX_FRAME, CXX_RAISED, QUIET_LEVELS, Line, with_continuation
from .tracebacks import Traceback

__all__ = ["DEATH", "FAILURE", "SGLANG_EXCEPTION_RECORD", "death_after", "first_failure", "quieted", "ready_index",
           "stage"]

# A native process that is dying, in any wording the tuning logs show: a C++ exception nobody caught
# ("terminate called after throwing an instance of 'std::runtime_error'", then "  what():  ..."),
# an abort in a glibc backtrace ("libggml-base.so(ggml_abort+0x152)[0x7...]"), a launcher's report
# of a child's signal ("Shard process was signaled to shutdown with signal 11"); glibc's heap and stack checks,
# which abort the process after their one line ("free(): invalid pointer", "double free or corruption (out)",
# "malloc(): memory corruption", "*** stack smashing detected ***: terminated")
_ABORT = (r"\bterminate called (after throwing|without an active exception)|^\s*what\(\):  |"
          r"^\s*(free|malloc|realloc|munmap_chunk|malloc_consolidate|_int_free|_int_malloc)\(\): [a-z]|"
          r"\bdouble free or corruption \(|\bcorrupted (size vs\. prev_size|double-linked list)\b|"
          r"\*\*\* stack smashing detected \*\*\*|"
          r"\((ggml_abort|abort|__assert_fail)\+0x[0-9a-f]+\)|"
          r"\b(signal(l)?ed|killed|terminated) (to shutdown )?(with|by) signal \d+")
# The shell's report of a dead process in the node's locale (glibc's and bash's translations): a segmentation fault or a
# core dumped in German, French, Spanish, Portuguese, Russian, Japanese, Korean; in Chinese also a process killed,
# aborted, or dead of SIGILL, SIGFPE or SIGBUS, each only as a word of its own (not inside a sentence)
_SIGNAL_IN_LOCALE = ("Speicherzugriffsfehler", "Speicherabzug geschrieben", "Erreur de segmentation",
                     "Violación de segmento", "Falha de segmentação", "imagem do núcleo gravada",
                     "Ошибка сегментирования", "セグメンテーション違反", "コアダンプ", "세그멘테이션 오류")
_SIGNAL_IN_CHINESE = ("已杀死", "已放弃", "非法指令", "浮点数例外", "总线错误")
# A process killed by a signal, in the words the shell and Python print for it ("Illegal instruction",
# "Bus error (core dumped)", "Fatal Python error: Bus error") and absl's failure handler's ("*** SIGBUS
# received at time=..."); in their own case, so a PCIe report ("PCIe Bus Error: severity=Corrected") is none.
# zsh says the same in its own words, lower case, in a job's notice ("[1]    817166 bus error  python3 ...") or after its
# name ("zsh: illegal hardware instruction  python3 ..."); its "segmentation fault" and "killed" are read below anyway
_ZSH_JOB = r"(^\s*\[\d+\]\s+([+-]\s+)?\d+\s+|^\s*zsh: )"
_SIGNAL = (r"(?-i:\b(Illegal instruction|Bus error|Floating point exception)\b(?!:))|"
           r"(?-i:" + _ZSH_JOB + r"(bus error|illegal hardware instruction|floating point exception|abort)\b)|"
           r"\*\*\* SIG[A-Z]+ received at time=|"
           # torch's own signal handler ("!!!!!!! Segfault encountered !!!!!!!"); the driver losing the GPU
           # ("NVRM: ... has fallen off the bus and is not responding to commands", Xid 79)
           r"\bSegfault encountered\b|\bfallen off the bus\b|"
           + "|".join(_SIGNAL_IN_LOCALE) + "|(?<!\\w)(" + "|".join(_SIGNAL_IN_CHINESE) + ")(?!\\w)")
# Failure forms the tuning logs show where no exception line starts the line: an exception named mid-line
# or in Markdown ("...还是报错RuntimeError: ...", "**ValueError: ...", "`x.SafetensorError: ...`",
# "safetensors_rust. SafetensorError: ..."), an exception's repr ("failed with exception: RuntimeError('...')"),
# an errno without its type ("[Errno 2] No such file or directory: ..."), the shell failing to run a command
# ("/bin/sh: 1: nvcc: not found"), an assertion in C/C++ words ("Assertion failed: Unsupported SM.",
# "Assertion error (x.hpp:NN): ..."), a Rust panic ("called `Result::unwrap()` on an `Err` value", "panicked at"),
# a compiler's "error   :" (ptxas), a CUDA error by its enum name ("cudaErrorNoKernelImageForDevice",
# "CUDA_ERROR_NO_BINARY_FOR_GPU"), NCCL's own failure reports ("NCCL WARN Call to ibv_create_qp failed",
# "Failed, NCCL error x.c:99 '...'"), a level in brackets after a tag ("[TensorRT-LLM][ERROR]", "[F] [TRT]",
# "<time> [Error] (Process)", "[sgl_kernel] CRITICAL:").
# (the dotted path before the name is read one way only, a name after each dot: a long word or CJK run must not make
# the search quadratic; a CJK character is a boundary only before a Latin letter)
_FORMS = (r"(^|[\s`*(\[（：:,，]|[\u3400-\u9fff](?=[A-Za-z]))\.*(\w+\. ?)*[A-Za-z]\w*(Error|Exception): |"
          r"\b[A-Z]\w*(Error|Exception)\([\"']|"
          r"\b[A-Z]\w*(Error|Exception)\([A-Z][\w.]*\): |"  # Ray's wrapper: "RayTaskError(RuntimeError): ray::..."
          # the launch itself refused by what runs it: a shell that cannot run the program ("/bin/sh: 1: nvcc: not
          # found", "bash: vllm: command not found", "zsh: command not found: vllm", "fish: Unknown command: vllm"),
          # Python without the module or script ("/usr/bin/python3: No module named sglang", "python3: can't open file
          # '/x/serve.py': [Errno 2] ..."), Docker's daemon ("docker: Error response from daemon: could not select device
          # driver ...") or runtime ("exec: \"vllm\": executable file not found in $PATH")
          r"^\s*\[Errno \d+\] |^\s*(\S*/)?(ba|da|z|k|fi)?sh: ((line )?\d+: .*: (command not found|not found|"
          r"No such file or directory|Permission denied)|(.*: )?(command not found|unknown command)\b)|"
          r"^\s*\S*python[\d.]*(\.exe)?: (No module named \S|can't open file )|"
          r"^\s*(docker: )?Error response from daemon: |\bexecutable file not found in \$PATH|"
          # NVSHMEM's own reports (DeepEP's internode setup): "x.h:63: non-zero status: 7: ..., exiting...", "aborting
          # due to error in nvshmemi_init_thread"
          r"\bnon-zero status: -?\d+|\baborting due to error\b|"
          # gcc and nvcc end a fatal error (a header not found) with this line of its own: a build under way failed
          r"^\s*compilation terminated\.\s*$|"
          r"\bAssertion (failed|error)\b|\bpanicked at\b|called `Result::unwrap\(\)` on an `Err` value|\berror\s+:\s|"
          r"\bcudaError(?!_?t\b)[A-Z]\w+|\bCUDA_ERROR_[A-Z_]+|"
          # NCCL's own report of a failure, or of a peer that died ("socketProgress: Connection closed by remote peer")
          r"\bNCCL WARN\b.*\b(fail(ed|ure)|error|closed by remote peer)\b|\bWARN Call to \w+ failed|"
          # NCCL's return trace: NCCLCHECK logs each call that failed, at INFO, with the error it returned ("NCCL
          # INFO transport.cc:148 -> 2", "group.cc:73 -> 2 [Async thread]"); a paste of NCCL_DEBUG=INFO output alone
          r"\bNCCL INFO [\w./-]+\.(cc|cu|h|c):\d+ -> [1-9]\d*\b|"
          r"\bNCCL error\b|^(\[[\w .-]+\]\s*)+\[(ERROR|CRITICAL|FATAL|E|F)\]|^\[[EF]\] |^.{0,40}\[(ERROR|CRITICAL|FATAL)\s*\]|"
          r"^\[[\w.-]+\] (ERROR|CRITICAL|FATAL):|"
          # a CUDA API call that failed, by name ("cudaMalloc failed: out of memory"); an exception class named
          # by its dotted module path mid-line ("stdout/INFO triton.runtime.errors.OutOfResources: "; read only
          # where a word of _FAILURE_WORDS is on the line, here the module "errors")
          r"\bcu(da)?[A-Z]\w* failed\b|(?<![\w.])[a-z_]+(\.[a-z_]+)+\.[A-Z]\w+: |"
          # the CUDA runtime's own error texts the tuning logs show, whoever printed them; a library that
          # could not initialise, with its reason ("Failed to initialize NVML: Driver/library version mismatch")
          r"\bno kernel image is available for execution|\bCUDA driver version is insufficient|"
          r"\bunsupported display driver / cuda driver combination|"
          r"\ban illegal memory access was encountered|\bunspecified launch failure|"
          # torch's own words for tensors whose shapes do not fit, the message of the RuntimeError it raises, pasted
          # without its type ("The size of tensor a (256) must match the size of tensor b (512) at non-singleton ...")
          r"\bThe size of tensor a \(\d+\) must match the size of tensor b \(\d+\)|"
          r"\bSizes of tensors must match except in dimension \d+|"
          r"^(\[[^\]]*\]\s*)*(Failed|Unable) to initiali[sz]e \w+: |"
          # a CHECK macro that failed, in glog's words and case (caffe's "Check failed: error == cudaSuccess (803 vs. 0)";
          # a "health check failed: retrying" note is no such macro)
          r"(?-i:\bCheck failed: )")
# An SGLang process that failed: its subprocess's last record ("Scheduler hit an exception: <traceback>", the
# data-parallel controller's and detokenizer's alike), after which it signals the launcher, which logs the
# SIGQUIT it got in either release's words ("Received sigquit from a child process", "SIGQUIT received. ... It
# usually means one child failed.") and kills the server. Fatal before or after the ready line.
SGLANG_EXCEPTION_RECORD = r"(?:Scheduler|DataParallelController|DetokenizerManager|TokenizerManager) hit an exception"
# On a node other than the first, the launcher logs each scheduler that ends ("Scheduler or DataParallelController
# 848532 terminated with 255"); exit code 0 is a clean stop.
_SGLANG_DEATH = (SGLANG_EXCEPTION_RECORD + r"|Received sigquit|SIGQUIT received|"
                 r"\bScheduler or DataParallelController \d+ terminated with -?[1-9]")
# A process that exited non-zero, as what ran it reports it: a shell's, a CI runner's or Go's "exit status 1", kubectl's
# "Exit Code: 137", docker ps's "Exited (1) 10 seconds ago" ("Exited (0)" is a clean exit), compose's "vllm-1 exited
# with code 1", an IDE's "Process finished with exit code 1", VS Code's "terminated with exit code: 1", PM2's "exited
# with code [1]", bash's job report ("[1]+  Exit 1    python -m ...") and zsh's ("[1]  + 8171 exit 1 ..."; not its 130
# or 143, an operator's Ctrl-C or SIGTERM that the program turned into its exit code), make's "make: *** [serve] Error
# 1", GitLab's "Job failed: exit code 1"; and a process killed or given up on by its supervisor: the kubelet's
# "Container vllm failed liveness probe, will be restarted", systemd's "Start request repeated too quickly".
# Before the ready line any non-zero code; after it (DEATH) not the codes of the SIGINT and SIGTERM an operator stops a
# server with: a shell's 130 and 143, Python's -2 and -15 for a child a signal ended.
_EXIT_VERBS = r"\b(exit(ed)?|finished|crashed|died|terminated) with (an? )?(exit )?(code|status):? \[?"
_EXITED = (r"\bexit status [1-9]|^\s*Exit Code:\s+[1-9]|(?-i:\bExited \((?!0\))-?\d+\)(\s|$))|"
           r"^\s*\[\d+\][+-]?\s+Exit [1-9]\d*\b|^\s*g?make(\[\d+\])?: \*\*\* .*\bError [1-9]\d*\s*$|"
           r"(?-i:" + _ZSH_JOB + r"exit (?!(130|143)\b)[1-9]\d*\b)|"
           r"failed with (an? )?exit (code|status):? \[?-?[1-9]|\bfailed: exit (code|status):? -?[1-9]|"
           r"\bfailed liveness probe, will be restarted\b|\bStart request repeated too quickly\b|")
_EXITED_BEFORE_READY = _EXITED + _EXIT_VERBS + r"-?[1-9]"
_EXITED_AFTER_READY = _EXITED + _EXIT_VERBS + r"(?!(-2|-15|130|143)\b)-?[1-9]"
# A failure said by what runs the server, not by the server: Kubernetes' pod status ("Back-off restarting failed
# container", "CrashLoopBackOff", kubectl's "Reason: OOMKilled"), Python's header for a thread's uncaught exception
# ("Exception in thread Thread-3 (run):"), a program's own "Unhandled exception" record.
_RUNNER = (r"\bBack-off restarting failed container|\bCrashLoopBackOff\b|\bOOMKilled\b|"
           # kubectl get pods' row of a container that failed ("pod/vllm-0   0/1   Error   3 (40s ago)   2m")
           r"^\s*\S+\s+\d+/\d+\s+(Init:)?(Error|ContainerCannotRun|CreateContainerError|RunContainerError)\s+\d+|"
           r"^\s*Exception in thread \S.*:\s*$|\b(Unhandled|Uncaught) exception\b")
# A failure of the start said in prose, by what failed: the server, its engine, a worker or process, the model's
# loading, the start itself ("The server failed to start", "Engine core initialization failed", "Server process
# terminated unexpectedly", "An error occurred during model loading", "exited ... with return code 1"). SGLang's
# level-less warnings say "Failed to <do something optional>"; only these subjects and verbs count.
_PROSE = (r"\b(an|unexpected) error (occurred|happened)\b|\bencountered an? (fatal |unexpected )?error\b|"
          r"\b(terminated|exited|stopped|died) unexpectedly\b|"
          # a process's return code, said of what ran or ended ("nvidia-smi failed with return code 18"), not an HTTP
          # status a health check reports under the same words ("Health check return code: 200")
          r"\b(process|command|subprocess|worker|exited|exit|finished|failed|terminated|died|crashed|killed|ended)\b.{0,80}"
          r"\breturn ?code:? -?[1-9]|"
          r"\bfailed to (start|launch|initiali[sz]e|boot)( the| its)? (server|engine|worker|scheduler|model|process)\b|"
          r"\b(server|engine|worker|scheduler|process|shard)s? \d*\s?failed to (start|launch|initiali[sz]e|boot)\b|"
          # nvidia-smi asking a GPU that no longer answers (after an Xid 79, "fallen off the bus")
          r"\bUnable to determine the device handle for GPU|"
          r"\b(loading|initiali[sz]ation|startup|start-up|launch)( of [\w.-]+)? failed\b|"
          r"\b(server|engine|worker|scheduler|process|subprocess)( \w+)? crashed\b|"
          # what runs the server giving up on its start ("Runner has been initializing for too long: 300 seconds",
          # "Inference server did not become healthy within 3600s"), and "X failed with exception: ..."
          r"\b(initiali[sz]ing|starting) for too long\b|\bdid not become (ready|healthy) within\b|"
          r"\bfailed with (an? )?exception\b")
# A failure the catalog may not know: an exception line, a traceback, a fatal compiler/runtime
# message, a process that died or exited non-zero. Benign lines and INFO/WARNING records never count.
FAILURE = re.compile(
    r"^\s*[\w.]*(Error|Exception|Exit|Interrupt)\w*(:|\s*$)|^\s*Traceback \(most recent call last\)|"
    # IPython's / Jupyter's header: the exception's name, then the traceback's title on the same line
    # ("RuntimeError                              Traceback (most recent call last)")
    r"^\s*[\w.]*(Error|Exception|Exit|Interrupt)\w*\s+Traceback \(most recent call last\)|"
    # the header of the C++ stack under a c10 error: an exception was raised there, whatever the paste kept of it
    + CXX_RAISED.pattern + "|"
    r"\b(fatal error|FATAL|Segmentation fault|core dumped|Killed|段错误|核心已转储|Aborted|returned non-zero exit status|"
    + _SGLANG_DEATH + r"|is dead\b|died unexpectedly|code=(killed|dumped)|"
    r"status=[1-9]\d*/|Failed with result)|" + _EXITED_BEFORE_READY + "|" + _RUNNER + "|" + _SIGNAL + "|"
    r"^\[?(ERROR|CRITICAL)\b|\berror:|"
    # torch/c10's error records ("[E530 13:41:17.1 x.cpp:6] "; older torch without the date: "[E ProcessGroupNCCL.cpp:563] ")
    r"^\[E(\d{3,4} [\d:.]+| [\w.-]+:\d+\]) |"
    # a link that failed: GNU ld's library not found ("/usr/bin/ld: cannot find -lcuda"), which ends a JIT build
    r"\bld(\.\w+)?: cannot find -l|"
    # a C/C++ assertion that failed ("x.cpp:728: GGML_ASSERT(a != b) failed", "Assertion `x' failed.")
    # (a CUDA kernel's device-side assertion quotes its condition in backticks: "Assertion `srcIndex < n` failed.")
    r"\b[A-Z_]*ASSERT\w*\(.*\) failed\b|\bAssertion [`'].*[`'] failed|"
    # a CUDA call's error, where the line starts or after the caller that checked it
    # ("CUDA error (x.h:188): ...", "x.cu(57) : getLastCudaError() CUDA error : KernelError : (500) ...")
    r"\bCUDA (driver |runtime )?error\s*(\d+ at \S+:\d+\s*)?[(:]|"  # ggml's "CUDA error 2 at ggml-cuda.cu:5509: ..."
    # vLLM's CUDACHECK in its custom all-reduce, which exits after it: "Failed: Cuda error x.cuh:307 'peer access ...'"
    r"\bFailed: Cuda error \S+:\d+ '|"
    + _ABORT + "|" + _FORMS + "|" + _PROSE, re.IGNORECASE)
# After the ready line only a dead process is a failure (a request's traceback is not). The shell's
# own report of a signal is also read in the locale it was printed in ("段错误 (核心已转储)"). uvicorn's
# failed bind is one: it logs "Application startup complete" (a weak ready line) before it binds, and exits
DEATH = re.compile(r"\b(Segmentation fault|core dumped|Killed|OOMKilled|CrashLoopBackOff|段错误|核心已转储|Aborted|"
                   + _SGLANG_DEATH + r"|is dead\b|died unexpectedly|error while attempting to bind on address|"
                   r"code=(killed|dumped|exited)|status=[1-9]\d*/|Failed with result)|" + _EXITED_AFTER_READY + "|"
                   + _SIGNAL + "|" + _ABORT, re.IGNORECASE)
# The server asked to stop (an operator's SIGTERM or Ctrl-C, a container stop): what dies after it is the
# shutdown it asked for ("SIGTERM received. ... Draining requests and shutting down..." then a child's "crashed
# with exit code -15" and SIGQUIT). Only the signal's own record: uvicorn's "Shutting down" follows a crash too.
# vLLM's engine core since its 0.2x releases writes "[shutdown] EngineCore: trigger received signal=SIGTERM", and when
# its client asks it to stop (an offline LLM's exit, the API server's), "Shutdown initiated (timeout=0)".
_ENGINE_STOP = re.compile(r"\bShutdown initiated \(timeout=\d+\)")
_STOP_ASKED = re.compile(r"\b(SIG(TERM|INT) received|Received SIG(TERM|INT)|"
                         r"received signal[ =](SIG)?(TERM|INT|15|2)\b)|" + _ENGINE_STOP.pattern, re.IGNORECASE)
# A warning, by its own header: Python's ("x.py:12: UserWarning: ..."), torch/c10's ("[W socket.cpp:663] ..."),
# a plain "Warning: ..." line. What it says ("error: ..." in a fallback note) is not a failure.
_WARNING_LINE = re.compile(r"^\s*(\S+\.py:\d+: )?\w*Warning: |^\s*\[W(\d{3,4} [\d:.]+)?[ \]\w]")
# Python's echo of the statement that raised, indented under its frame ("    raise ValueError("Chunked prefill is
# ..."): source, not output, even when the paste cut the frame above it; the exception line after it says what failed
_RAISE_ECHO = re.compile(r"^\s{2,}raise [A-Za-z_][\w.]*\(")
# Words one of the patterns above needs (lowercased): a line without any is skipped cheaply. Plain substrings, each
# looked for with `in` (one regex of forty alternatives took a third of a 50,000-line log's time), and the two shapes
# that are no word: torch's error record's header ("[e530 ", "[e "), a glibc check's "free(): i..."
_FAILURE_WORDS = ("error", "exception", "exit", "interrupt", "traceback", "fatal", "segmentation", "dumped", "killed",
                  "abort", "段错误", "核心已转储", "non-zero", "sigquit", "dead", "died", "code=", "status=", "fail",
                  "critical", "assert", "terminate", "what()", "signal", "panicked", "crash", "unexpectedly",
                  "return code", "returncode", "unwrap", "not found", "no such file", "permission denied", "resource",
                  "kernel image", "insufficient", "illegal memory", "launch failure", "display driver",
                  "illegal instruction", "hardware instruction", "bus error", "received at time", "segfault",
                  "fallen off", "corrupt", "smashing", "floating point", "no module named", "unknown command", "can't open file",
                  "for too long", "did not become", "repeated too quickly", "cannot find -l",
                  "closed by remote peer", "size of tensor", "sizes of tensors",
                  *(w.lower() for w in _SIGNAL_IN_LOCALE + _SIGNAL_IN_CHINESE))
_FAILURE_SHAPES = re.compile(r"^\[[ef][\d \]]|\(\): [a-z]|\.(cc|cu|h|c):\d+ -> [1-9]")


def _failure_hinted(lower: str) -> bool:
    """The lowercased line holds a word (or shape) that some failure pattern needs."""
    for word in _FAILURE_WORDS:
        if word in lower:
            return True
    return _FAILURE_SHAPES.search(lower) is not None


def death_after(lines: list[Line], cat: Catalog, code: set[int], tbs: list[Traceback], start: int) -> int | None:
    """Index of the first line from `start` (after the ready line) that says the server died (a death's words, or a
    traceback that rose to a script's top level), unless the server was asked to stop before it: then it is the
    shutdown asked for, not a failure."""
    deaths = [i for i in (first_failure(lines, cat, code, start, DEATH), _top_level_traceback(lines, tbs, start))
              if i is not None]
    died = min(deaths, default=None)
    # any process's stop record counts: the operator stops the launcher, which stops its children
    if died is not None and any(_STOP_ASKED.search(lines[i].text) for i in range(start, died + 1)):
        return None
    return died


def stopped_before_dying(lines: list[Line], first: int) -> bool:
    """The first failure is a death's words and the engine logged that its client asked it to stop before it, ready
    line or not (an offline run's exit, then its client's "Engine core proc EngineCore died unexpectedly"): the
    shutdown asked for, not a failure. Not a signal's record before the ready line: a liveness probe or a supervisor
    stops a start that is too slow with the same SIGTERM (round 99), and that start failed."""
    return bool(DEATH.search(lines[first].text)) and any(_ENGINE_STOP.search(lines[i].text) for i in range(first))


def _top_level_traceback(lines: list[Line], tbs: list[Traceback], start: int) -> int | None:
    """Start of the first traceback from `start` that rose to a script's top level (its outermost frame is
    `<module>`): nothing caught it, so that process ended. Not the stop an operator asked for (Ctrl-C's
    KeyboardInterrupt, a SystemExit), nor a traceback a logger marked quiet."""
    for tb in tbs:
        first = tb.sections[0]
        if (tb.start_index >= start and first.frames and first.frames[0].function == "<module>"
                and lines[tb.start_index].level not in QUIET_LEVELS
                and tb.final.exc_type not in ("KeyboardInterrupt", "SystemExit")):
            return tb.start_index
    return None


def first_failure(lines: list[Line], cat: Catalog, code: set[int], start: int = 0,
                  pattern: re.Pattern = FAILURE) -> int | None:
    """Index of the first line (from `start`) that says something failed, or None."""
    for i in range(start, len(lines)):
        ln = lines[i]
        if (i in code or ln.level in QUIET_LEVELS or not ln.text.strip() or _WARNING_LINE.match(ln.text)
                or CXX_FRAME.match(ln.text) or _RAISE_ECHO.match(ln.text)):
            continue
        loud = pattern is FAILURE and ln.level in ("ERROR", "CRITICAL")  # the logger said so
        if ((loud or (_failure_hinted(ln.text.lower()) and pattern.search(ln.text)))
                and not cat.is_benign(ln.text, with_continuation(lines, i))):
            return i
    return None


@lru_cache(maxsize=256)
def _literal(pattern: re.Pattern) -> str | None:
    """The longest literal (lowercased) every match of a pattern without alternatives contains, or None: a long log
    is searched for it with str.find, and the pattern tried only on those lines."""
    needs = needs_of(pattern)
    return max(needs[0].literals, key=len) if needs and len(needs) == 1 and needs[0].literals else None


def _joined(lines: list[Line]) -> tuple[str, list[int]]:
    """The log lowercased as one string, and where each line starts in it (lowering can change a
    line's length, so the offsets are those of the lowered lines)."""
    lows = [ln.text.lower() for ln in lines]
    return "\n".join(lows), list(accumulate((len(t) + 1 for t in lows[:-1]), initial=0))


def _first_line(pattern: re.Pattern, lines: list[Line], low: str, starts: list[int]) -> int | None:
    """Index of the first line the pattern matches (the lines holding its literal words, if it has any)."""
    lit = _literal(pattern)
    if lit is None:
        return next((i for i, ln in enumerate(lines) if pattern.search(ln.text)), None)
    at = low.find(lit)
    while at != -1:
        i = bisect_right(starts, at) - 1
        if pattern.search(lines[i].text):
            return i
        at = low.find(lit, starts[i + 1]) if i + 1 < len(starts) else -1
    return None


def _last_line(pattern: re.Pattern, lines: list[Line], low: str, starts: list[int]) -> int | None:
    """Index of the last line the pattern matches, searched from the end as `_first_line` does from the start."""
    lit = _literal(pattern)
    if lit is None:
        return next((i for i in range(len(lines) - 1, -1, -1) if pattern.search(lines[i].text)), None)
    at = low.rfind(lit)
    while at != -1:
        i = bisect_right(starts, at) - 1
        if pattern.search(lines[i].text):
            return i
        at = low.rfind(lit, 0, starts[i]) if i > 0 else -1
    return None


def stage(lines: list[Line], cat: Catalog, ready: bool) -> tuple[str, int | None]:
    """How far the startup got, from the milestones in the catalog's [[stage]] list, and the
    index of the last milestone line."""
    reached, last = [], None
    low, starts = _joined(lines)
    for name, patterns in cat.stages:
        found = [i for p in patterns if (i := _first_line(p, lines, low, starts)) is not None]
        if found:
            reached.append(name)
            last = min(found) if last is None else max(last, min(found))
    # a step under way is the stage only while nothing later was seen (its begin line is not its end)
    reached = [name for k, name in enumerate(reached)
               if name not in cat.progress_stages or k == len(reached) - 1]
    if not reached:
        reached.append("no startup milestone logged")
    reached.append("ready" if ready else "not yet ready")
    return ", ".join(reached), last


def outlived(lines: list[Line], cat: Catalog) -> set[int]:
    """Indices of warnings the server went on from: lines matching the catalog's [outlived] patterns
    (NCCL's own WARN records) before the last settled milestone (one that is not a step under way:
    "Init torch distributed ends", "Load weight begin", ...). Those are no failure and no evidence."""
    warned = [i for i, ln in enumerate(lines) if any(p.search(ln.text) for p in cat.outlived)]
    if not warned:
        return set()
    low, starts = _joined(lines)
    settled = [p for name, pats in cat.stages if name not in cat.progress_stages for p in pats]
    last = max((i for p in settled if (i := _last_line(p, lines, low, starts)) is not None), default=-1)
    return {i for i in warned if i < last}


# the levels a record the program goes on from is read up from: none (SGLang's logger prints none) or a logger's ERROR
_NOT_QUIET = (None, "ERROR")


def quieted(lines: list[Line], cat: Catalog, tbs: list[Traceback]) -> list[Line]:
    """The lines, with those a program said are a warning it goes on from read at WARNING: a level-less or ERROR
    record the catalog's [warning_records] name, with every line it holds (the lines normalize.py attributed to it),
    and a traceback printed bare (what traceback.print_exc writes: its first line is the title alone) the first
    line after which is one of the catalog's [handled] notes from the same rank (a caught exception the program
    printed and retried; another rank's "Scheduler hit an exception: Traceback" is never one). The same list
    when there are none."""
    quiet: set[int] = set()
    if cat.warning_records:
        opened = {tb.start_index: tb for tb in tbs}  # the traceback each line opens, if any
        for i, ln in enumerate(lines):
            if ln.level in _NOT_QUIET and any(p.search(ln.text) for p in cat.warning_records):
                quiet.add(i)  # the record, and the traceback it opens (the patterns end where one starts)
                if i in opened:
                    quiet.update(range(i, opened[i].end_index + 1))
    if cat.handled:
        for tb in tbs:
            j = tb.end_index + 1
            while j < len(lines) and not lines[j].text.strip():
                j += 1
            note = lines[j] if j < len(lines) else None
            if (note is not None and note.level is None and _printed_bare(lines[tb.start_index], note)
                    and any(p.search(note.text) for p in cat.handled)):
                quiet.update(range(tb.start_index, tb.end_index + 1))
                quiet.add(j)  # the note itself, which quotes the exception it caught
    if not quiet:
        return lines
    return [replace(ln, level="WARNING") if i in quiet and ln.level in _NOT_QUIET else ln for i, ln in enumerate(lines)]


def _printed_bare(start: Line, note: Line) -> bool:
    """A traceback whose first line is its title alone, from the rank its note names (when both name one)."""
    return start.text.strip() == "Traceback (most recent call last):" and (
        start.rank is None or note.rank is None or start.rank == note.rank)


def _is_sglang(lines: list[Line], cat: Catalog) -> bool:
    """An SGLang log (its rank-and-time prefix, or a marker line): its own ready lines apply."""
    for ln in lines[:4000]:
        if ln.rank and ln.rank.startswith(("TP", "DP", "PP", "EP")) and ln.prefixed and ln.time and len(ln.time) >= 8:
            return True
        if any(p.search(ln.text) for p in cat.sglang_markers):
            return True
    return False


def ready_index(lines: list[Line], cat: Catalog) -> int | None:
    """Index of the last line saying the server reached ready, if any."""
    sglang = _is_sglang(lines, cat)
    # a server's own ready lines stay final whichever server the log otherwise looks like
    strong = (cat.sglang_ready if sglang else cat.healthy_strong) + cat.healthy_own
    weak = () if sglang else cat.healthy_weak
    found = None
    for i, ln in enumerate(lines):
        t = ln.text
        if any(p.search(t) for p in strong) or any(p.search(t) for p in weak):
            found = i
    return found
