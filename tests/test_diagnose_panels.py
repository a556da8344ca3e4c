"""Crash diagnosis of rich's boxed tracebacks (noderig/diagnose/panels.py).

typer's pretty exceptions (TGI's `text-generation-server`, any typer CLI with rich installed) print an
uncaught exception as a rich panel: frames as "<path>:<line> in <function>", the source around each with
the line that ran marked, the frame's locals in a nested panel, and the exception line under it. The panels
here are drawn by the real rich library from a real module on disk, as typer draws them (show_locals), on a
console with box characters, a legacy Windows console and one whose encoding has none."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.traceback import Traceback

from noderig.diagnose import diagnose, normalize, parse_tracebacks

# server arguments checked in a module whose comment and locals hold other classes' words: read as messages,
# they made a refused command line a GPU out of memory
MODULE = '''def launch(trust_remote_code=False, mem_fraction_static=0.88):
    # NCCL errors and "CUDA out of memory" are raised by the workers, not here
    check(enable_tokenizer_batch_encode=True, enable_dynamic_batch_tokenizer=True)


def check(**flags):
    if all(flags.values()):
        raise ValueError("Cannot enable both --enable-tokenizer-batch-encode and --enable-dynamic-batch-tokenizer. "
                         "Please choose one tokenizer batching approach.")
'''
# a directory name long enough that rich folds the frame's title inside the path
LONG_DIR = "a_directory_whose_name_is_long_enough_to_fold_the_title_of_the_frame"
EXCEPTION = "ValueError: Cannot enable both --enable-tokenizer-batch-encode and"


def draw(tmp_path, width: int, console: str, show_locals: bool = True, directory: str = LONG_DIR) -> str:
    """The panel rich prints for MODULE's exception, raised from a file under ``tmp_path``."""
    path = tmp_path / "site-packages" / "sglang" / "srt" / directory / "server_args.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MODULE)
    namespace: dict = {}
    exec(compile(MODULE, str(path), "exec"), namespace)
    buf = io.TextIOWrapper(io.BytesIO(), encoding="ascii" if console == "ascii" else "utf-8", errors="replace")
    out = Console(file=buf, width=width, color_system=None, legacy_windows=console == "legacy")
    try:
        namespace["launch"]()
    except ValueError:
        out.print(Traceback(show_locals=show_locals))
    buf.flush()
    return buf.buffer.getvalue().decode()


@pytest.mark.parametrize("console", ["unicode", "legacy", "ascii"])
@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("show_locals", [True, False])
def test_a_panel_reads_as_the_traceback_it_draws(tmp_path, console, width, show_locals):
    text = draw(tmp_path, width, console, show_locals)
    lines = normalize(text)
    (tb,) = parse_tracebacks(lines)
    frames = [(f.file, f.line, f.function) for f in tb.final.frames]
    module = str(tmp_path / "site-packages" / "sglang" / "srt" / LONG_DIR / "server_args.py")
    assert frames[-2:] == [(module, 3, "launch"), (module, 8, "check")]
    assert tb.final.exc_type == "ValueError"
    d = diagnose(text)
    assert d.cls == "invalid_server_args"
    assert d.evidence[-1].line.startswith(EXCEPTION)


def test_source_and_locals_are_not_read_as_messages(tmp_path):
    said = [x.text for x in normalize(draw(tmp_path, 100, "unicode"))]
    assert not any("out of memory" in x or "mem_fraction_static = 0.88" in x for x in said)
    # the line that ran is kept, under its frame, as Python prints it
    assert said[said.index(next(x for x in said if x.endswith(", in launch"))) + 1].startswith("    check(")


# a container's, a journal's, a log shipper's; torch's rank tag behind a container's (TGI 3 on four GPUs)
@pytest.mark.parametrize("prefix", ["tgi-1  | ", "Dec 02 13:31:17 b300 text-generation-launcher[536]: ",
                                    "2026-12-02T13:31:17.123456789Z ", "text-generation-inference-1  | [rank1]: "])
def test_a_panel_behind_a_transport_prefix(tmp_path, prefix):
    text = "\n".join(prefix + line for line in draw(tmp_path, 80, "unicode").splitlines())
    (tb,) = parse_tracebacks(normalize(text))
    assert [f.function for f in tb.final.frames][-2:] == ["launch", "check"]
    assert diagnose(text).cls == "invalid_server_args"


def test_a_panel_cut_above_its_title_is_read_from_its_bottom_border(tmp_path):
    lines = draw(tmp_path, 80, "legacy").splitlines()
    cut = lines[next(i for i, x in enumerate(lines) if "in launch" in x) + 1:]  # the title and two frames gone
    (tb,) = parse_tracebacks(normalize("\n".join(cut)))
    assert [f.function for f in tb.final.frames] == ["check"]
    assert diagnose("\n".join(cut)).cls == "invalid_server_args"


def test_a_box_that_is_no_traceback_is_left_alone():
    # a panel of settings printed before a crash: no title of a traceback, no line the arrow marks
    buf = io.StringIO()
    Console(file=buf, width=60, color_system=None).print(
        __import__("rich.panel", fromlist=["Panel"]).Panel("trust_remote_code = False\n  port = 30000"))
    text = buf.getvalue() + "RuntimeError: the frobnicator is misaligned\n"
    said = [x.text for x in normalize(text)]
    assert any("trust_remote_code = False" in x for x in said) and any("port = 30000" in x for x in said)


def test_a_chained_exception_is_one_traceback_of_two_sections(tmp_path):
    first = draw(tmp_path, 80, "unicode")
    text = first + "\nThe above exception was the direct cause of the following exception:\n\n" + first
    (tb,) = parse_tracebacks(normalize(text))
    assert len(tb.sections) == 2 and all(s.exc_type == "ValueError" for s in tb.sections)
    assert diagnose(text).cls == "invalid_server_args"


def test_a_wide_character_that_shortens_a_line_keeps_it_in_the_panel(tmp_path):
    # a CJK directory takes two cells a character: its lines are shorter than the panel's width in characters
    text = draw(tmp_path, 100, "unicode", directory="模型目录")
    assert any(len(x) < 100 for x in text.splitlines() if x.startswith("│") and "模型" in x)
    (tb,) = parse_tracebacks(normalize(text))
    module = str(tmp_path / "site-packages" / "sglang" / "srt" / "模型目录" / "server_args.py")
    assert [(f.file, f.function) for f in tb.final.frames][-2:] == [(module, "launch"), (module, "check")]
