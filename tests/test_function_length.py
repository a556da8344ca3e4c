"""Functions stay short enough to read at once: none over 60 lines in the product's code
(``operations/``, ``noderig/`` without the lab, ``deploy.py``) unless a ``# long: <why>`` comment
on its ``def`` line, or in the comment lines right above it (and its decorators), says why it
is better whole. A function's length is its ``def`` line to its last line, docstring included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

MAX_LINES = 60
LONG_MARK = "# long:"

# Long functions waiting for a split (path::qualified name -> why); empty: every long function
# carries its reason. An entry that is no longer long fails, so none outlives its fix.
PENDING: dict[str, str] = {}


def product_files() -> list[Path]:
    noderig = [f for f in sorted((ROOT / "noderig").rglob("*.py")) if f.relative_to(ROOT / "noderig").parts[0] != "lab"]
    return [ROOT / "deploy.py", *sorted((ROOT / "operations").rglob("*.py")), *noderig]


def functions(source: str):
    """(qualified name, def line, length in lines, first line of its decorators) for every function."""
    def statements(node):  # a def is a statement: only statement lists can hold one
        for field in ("body", "orelse", "handlers", "finalbody", "cases"):
            for child in getattr(node, field, ()):
                yield child

    def walk(node, prefix):
        for child in statements(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                top = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                yield name, child.lineno, child.end_lineno - child.lineno + 1, top
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(source), "")


def has_reason(lines: list[str], def_line: int, top: int) -> bool:
    """A ``# long: <why>`` (with a why) on the def line or in the comment block just above it."""
    def says_why(line: str) -> bool:
        return LONG_MARK in line and line.split(LONG_MARK, 1)[1].strip() != ""

    if says_why(lines[def_line - 1]):
        return True
    i = top - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        if says_why(lines[i]):
            return True
        i -= 1
    return False


def long_without_reason(path: Path) -> list[tuple[str, int]]:
    source = path.read_text()
    lines = source.splitlines()
    return [(name, length) for name, def_line, length, top in functions(source)
            if length > MAX_LINES and not has_reason(lines, def_line, top)]


def test_no_function_over_60_lines_without_a_reason():
    found = {f"{path.relative_to(ROOT)}::{name}": length
             for path in product_files() for name, length in long_without_reason(path)}
    unexplained = {key: length for key, length in found.items() if key not in PENDING}
    assert unexplained == {}, ("split these along their concerns, or say why not with a '# long: <why>' "
                               f"comment on or above the def line: {unexplained}")


def test_the_pending_list_holds_only_long_functions():
    stale = []
    for key in PENDING:
        path, name = key.split("::")
        found = dict(long_without_reason(ROOT / path)) if (ROOT / path).exists() else {}
        if name not in found:
            stale.append(key)
    assert stale == [], f"no longer long (or gone): remove from PENDING: {stale}"


# --- the rule's own oracle: functions written for the test, lengths stated by hand ---------------


def body(n: int) -> str:
    return "".join(f"    x{i} = {i}\n" for i in range(n))


@pytest.mark.parametrize("source,expected", [
    (f"def short():\n{body(59)}", []),                        # 60 lines: at the limit
    (f"def long():\n{body(60)}", [("long", 61)]),             # 61 lines
    (f"class C:\n    def m(self):\n{body(60).replace('    ', '        ')}", [("C.m", 61)]),
    (f"def outer():\n    def inner():\n{body(60).replace('    ', '        ')}", [("outer", 62), ("outer.inner", 61)]),
    (f"def long():  # long: one table, read top to bottom\n{body(60)}", []),
    (f"# long: one table, read top to bottom\n@decorated\ndef long():\n{body(60)}", []),
    (f"# long: a reason\n# and more words\ndef long():\n{body(60)}", []),
    (f"# long:\ndef long():\n{body(60)}", [("long", 61)]),    # a mark without a reason
    (f"# long: a reason\n\ndef long():\n{body(60)}", [("long", 61)]),  # not right above it
])
def test_the_rule_counts_lines_and_reads_the_reason(tmp_path, source, expected):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert long_without_reason(path) == expected


def test_the_product_files_leave_out_the_lab_only():
    names = {str(p.relative_to(ROOT)) for p in product_files()}
    assert {"deploy.py", "operations/service.py", "noderig/unit.py", "noderig/diagnose/engine.py",
            "noderig/node/launch.py"} <= names
    assert not any(n.startswith("noderig/lab/") for n in names)
