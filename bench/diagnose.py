"""Benchmark: diagnosis of a long journal (noderig.diagnose), against grep over the same text.

    .venv/bin/python bench/diagnose.py

A crash (the reference vision-warmup traceback) buried in N lines of a healthy server's busy
log (batch and HTTP access lines), at N = 10,000, 50,000 and 200,000 lines: the time to the
diagnosis, and ``grep -cE 'Error|Traceback'`` over the same file as the plain tool, best of 3
each; 50,000 lines of a server still starting (no crash, no ready line: the healthy path); and
the same 50,000 lines ending in a failure no signature knows, which the second tier names by its
key tokens (the unknown path: every line read for a failure, then the tier); and 50,000 lines of
NCCL_DEBUG=INFO records with NCCL's harmless libibverbs warning (every line reached by NCCL's words);
the buried crash's 50,000 lines as docker's json-file driver stores them (every line a JSON record), and as
`grep -Hn -C` prints them from a web page (a gutter and no-break spaces); 50,000 lines of one CUDA error
on eight ranks (a flood: every line a signature's evidence); and
the inputs that were once quadratic, each with what it cost then: one 100 KB line of a signature's own
words repeated (the --context-length refusal's unbounded gap: 1.7 s), 30,000 lines each quoting a
traceback, one line in 40,000 CRI pieces, an ERROR record of one 200,000-character word, one 1.6 MB line a
terminal cut into 20,000 pieces of 80 columns (SINGLE_CASES).
The tests assert what these inputs read as, never how long it took: the times are here.
The product's contract is that a paste of any size is diagnosed in bounded time and memory;
this says what that costs and how it grows with size. Results: a table on stdout and
bench/results/diagnose.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from noderig.diagnose import diagnose  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "crashlogs"
CRASH = FIXTURES / "flash_attn_cute_missing" / "standin-vision-warmup-tp2.log"
HEALTHY = FIXTURES / "healthy" / "standin-sglang-skip-warmup-tp2.log"
SIZES = (10_000, 50_000, 200_000)


def buried_crash(lines: int) -> str:
    busy = [line for line in HEALTHY.read_text().splitlines() if "batch" in line or "HTTP/1.1" in line]
    crash = CRASH.read_text().splitlines()
    body = crash[:45] + (busy * (lines // len(busy) + 1))[:lines - len(crash)] + crash[45:]
    return "\n".join(f"Dec 02 13:31:17 b300 python3[536]: {line}" for line in body)


def still_starting(lines: int) -> str:
    """The same busy lines with no crash and no ready line: the healthy, not-yet-ready path (stage
    milestones and the search for an unrecognised failure read every line)."""
    healthy = [line for line in HEALTHY.read_text().splitlines() if "ready to roll" not in line]
    busy = [line for line in healthy if "batch" in line or "HTTP/1.1" in line]
    body = healthy[:40] + (busy * (lines // len(busy) + 1))[:lines - 40]
    return "\n".join(f"Dec 02 13:31:17 b300 python3[536]: {line}" for line in body)


def unrecognised(lines: int) -> str:
    """A server still starting that then fails in words no signature holds (tokens.py names it)."""
    return still_starting(lines - 1) + ("\nDec 02 13:31:18 b300 python3[536]: ValueError: the draft head's hidden "
                                        "size (4096) differs from the speculative target's (8192)")


def nccl_debug(lines: int) -> str:
    """A start run with NCCL_DEBUG=INFO on eight ranks: NCCL's own records, one harmless "NCCL WARN Failed to
    open libibverbs.so[.1]" per rank, then the server going on past them (every line an NCCL record the
    catalog's NCCL words reach; the healthy path, a milestone after the warnings)."""
    out = []
    for k in range(lines - 1):
        rank = k % 8
        head = f"gpu-07:{4411 + rank}:{4411 + rank} [{rank}]"
        out.append(f"{head} misc/ibvwrap.cc:106 NCCL WARN Failed to open libibverbs.so[.1]" if k < 8 else
                   f"{head} NCCL INFO Channel {k % 32:02d}/0 : {rank}[{rank}] -> {(rank + 1) % 8}[{(rank + 1) % 8}] via P2P/IPC")
    return "\n".join(out + ["[2026-05-02 10:00:05 TP0] Init torch distributed ends. mem usage=0.31 GB"])


def docker_json(lines: int) -> str:
    """The buried crash as docker's json-file driver stores it: every line a JSON record (carried.py reads
    each back before any prefix is peeled)."""
    return "\n".join(json.dumps({"log": line + "\n", "stream": "stderr", "time": "2026-12-02T13:31:17.123456789Z"})
                     for line in buried_crash(lines).splitlines())


def grep_context(lines: int) -> str:
    """The buried crash as `grep -Hn -C` prints a search of the log, copied from a web page: the file's name and a
    number before every line, no-break spaces for spaces (copied.py reads the gutter over the whole paste)."""
    return "\n".join(f"logs/server.log-{n}-{line}".replace(" ", "\xa0")
                     for n, line in enumerate(buried_crash(lines).splitlines(), 1))


def one_record_word(chars: int) -> str:
    """An ERROR record of vLLM's JSON formatter whose message is one word (patterns that backtrack from every
    position of a word were quadratic here: 20,000 characters took 2 s)."""
    return json.dumps({"levelname": "ERROR", "name": "vllm", "message": "y" * chars})


def escaped_tracebacks(lines: int) -> str:
    """Lines that each quote a traceback in a bytes repr (carried.py splits every one; asking every traceback
    whether an exception line lies in it, per line, took 18 s on 30,000)."""
    trace = "\\n".join(["Traceback (most recent call last):", '  File "/home/u/app.py", line 3, in <module>',
                        "ValueError: bad"])
    return "\n".join(f"[2026-01-22 20:05:33 TP0] job {i} failed: stderr=b'{trace}'" for i in range(lines))


def cri_pieces(pieces: int) -> str:
    """One line a Kubernetes node cut into pieces (CRI's P records), joined back before it is read (joined piece by
    piece, 40,000 pieces took 26 s)."""
    return "\n".join(["2026-01-22T20:05:33.1Z stderr P " + "x" * 100] * pieces + ["2026-01-22T20:05:33.1Z stderr F y"])


def terminal_pieces(pieces: int) -> str:
    """One long line a terminal hard-wrapped at 80 columns, joined back before it is read (asking the line so far
    whether it held a frame, and copying it, at every piece: 20,000 pieces took 12 s)."""
    line = " ".join(["the scheduler started its loop over requests"] * (pieces * 80 // 45 + 1))
    return "\n".join(line[k:k + 80] for k in range(0, 80 * pieces, 80))


def rich_panels(lines: int) -> str:
    """Rich's boxed tracebacks (panels.py), 100 columns wide: frames with source, a locals panel each, and under
    each panel the exception line, until ``lines``."""
    def row(text: str) -> str:
        return f"│ {text:<96} │"
    frame = [row("/usr/lib/python3.12/site-packages/text_generation_server/server.py:142 in serve_inner"), row(""),
             *(row(f"  {n} │   model = get_model(model_id, revision, sharded, quantize)") for n in range(139, 142)),
             row("❱ 142 │   model = get_model(model_id, revision, sharded, quantize)"), row(""),
             row("╭─ locals ─╮"), *(row(f"│ quantize = None {n} │") for n in range(8)), row("╰──────────╯"), row("")]
    panel = ["╭" + "─" * 31 + " Traceback (most recent call last) " + "─" * 32 + "╮", *frame * 20, "╰" + "─" * 98 + "╯",
             "ValueError: Unsupported model type qwen3_moe"]
    return "\n".join((panel * (lines // len(panel) + 1))[:lines])


def error_flood(lines: int) -> str:
    """One error said again and again, on eight ranks (a server failing every request, a restart loop): every line
    a signature's evidence (asking the catalog's index about each line anew: 4.3 s for 50,000, best of 3; 1.3 s
    remembering each distinct line)."""
    return "".join(f"[2026-01-22 20:05:33 TP{i % 8}] RuntimeError: CUDA error: out of memory\n" for i in range(lines))


# the paths one log exercises whole: (key in the results, what the row says, the log)
SINGLE_CASES = (
    ("still_starting", "50,000 lines still starting", lambda: still_starting(50_000)),
    ("by_tokens", "50,000 lines, then a failure named by key tokens", lambda: unrecognised(50_000)),
    ("nccl_debug", "50,000 lines of NCCL_DEBUG=INFO records", lambda: nccl_debug(50_000)),
    ("docker_json", "50,000 lines of docker's json-file log, a crash buried", lambda: docker_json(50_000)),
    ("grep_context", "50,000 lines as `grep -Hn -C` prints them, no-break spaces", lambda: grep_context(50_000)),
    ("escaped_tracebacks", "30,000 lines each quoting a traceback", lambda: escaped_tracebacks(30_000)),
    ("rich_panels", "50,000 lines of rich's boxed tracebacks, locals shown", lambda: rich_panels(50_000)),
    ("error_flood", "50,000 lines of one CUDA error on eight ranks", lambda: error_flood(50_000)),
    ("cri_pieces", "one line in 40,000 CRI pieces", lambda: cri_pieces(40_000)),
    ("terminal_pieces", "one line a terminal cut into 20,000 pieces", lambda: terminal_pieces(20_000)),
    ("long_line", "one 103 KB line of a signature's words repeated",
     lambda: "is greater than the derived context_length " * 2400),
    ("one_word", "an ERROR record of one 200,000-character word", lambda: one_record_word(200_000)),
    # a class name a signature looks for, repeated in one word (`\w*Tokenizer\w*` backtracked from each: 83 s)
    ("class_name_word", "an AttributeError of one 180,000-character word of class names",
     lambda: "AttributeError: " + "Tokenizer" * 20_000 + "!"),
    # a failure word after one long word, dotted path or CJK run: an exception-name form read from each start (a
    # dotted path's name, CJK as a boundary) was quadratic on them (200,000 characters: over two minutes)
    ("word_then_error", "one 200,000-character word, then 'error'", lambda: "a" * 200_000 + " error"),
    ("dotted_then_error", "a 200,000-character dotted path, then 'error'", lambda: "a." * 100_000 + " error"),
    ("cjk_then_error", "200,000 CJK characters, then 'error'", lambda: "错" * 200_000 + " error"),
)


def timed(label: str, text: str) -> dict:
    d = diagnose(text)
    row = {"bytes": len(text), "class": d.cls, "stage": d.stage, "diagnose_s": round(best_of(3, lambda: diagnose(text)), 4)}
    print(f"{label}: {row['diagnose_s']:.3f} s  {d.cls}" + (f" ({d.stage})" if d.healthy else ""))
    return row


def best_of(n: int, work) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    diagnose("warm up the catalog")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for lines in SIZES:
            text = buried_crash(lines)
            path = Path(tmp) / f"{lines}.log"
            path.write_text(text)
            found = diagnose(text).cls
            ours = best_of(3, lambda: diagnose(text))
            grep = best_of(3, lambda: subprocess.run(["grep", "-cE", "Error|Traceback", str(path)],
                                                      capture_output=True))
            rows.append({"lines": lines, "bytes": len(text), "class": found, "diagnose_s": round(ours, 4),
                         "grep_s": round(grep, 4), "ratio": round(ours / grep, 1)})
    print(f"{'lines':>8} {'MiB':>6} {'diagnose s':>11} {'grep s':>8} {'x grep':>7}  class")
    for r in rows:
        print(f"{r['lines']:>8} {r['bytes'] / 2**20:>6.1f} {r['diagnose_s']:>11.3f} {r['grep_s']:>8.3f} "
              f"{r['ratio']:>7.1f}  {r['class']}")
    growth = rows[-1]["diagnose_s"] / rows[0]["diagnose_s"]
    print(f"cost growth {SIZES[0]:,} -> {SIZES[-1]:,} lines ({SIZES[-1] // SIZES[0]}x): {growth:.1f}x")
    single = {key: timed(label, build()) for key, label, build in SINGLE_CASES}
    out = ROOT / "bench" / "results" / "diagnose.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "growth": growth, **single}, indent=2))


if __name__ == "__main__":
    main()
