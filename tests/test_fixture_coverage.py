"""No operation or fact without a fixture test (facts in, commands out; output in, value out),
so that a new one cannot slip in untested. Read from the source, not from a run: a test
selected out with -k still counts, a test that does not exist does not.

- An operation (a function of ``operations/`` made with ``@operation``) counts as tested when a
  test module passes it to ``run_op`` or runs its body (``<op>._inner``).
- A fact (a ``FactBase`` of ``operations/``) counts as tested when it has a case under
  ``tests/fixtures/facts/<Fact>/`` and its command is checked: stated in a case (``command``),
  or run on real files by a ``gather...`` call in ``tests/test_facts.py``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
from pathlib import Path

import operations
from tests.test_fact_fixtures import FIXTURES, noderig_facts

TESTS = Path(__file__).parent


def noderig_operations() -> set[str]:
    """``module.name`` of every pyinfra operation defined in the ``operations`` package."""
    found = set()
    for info in pkgutil.iter_modules(operations.__path__):
        module = importlib.import_module(f"operations.{info.name}")
        for name, obj in inspect.getmembers(module, callable):
            if hasattr(obj, "_inner") and getattr(obj, "__module__", None) == module.__name__:
                found.add(f"{info.name}.{name}")
    return found


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> operations module name, from ``from operations import x [as y]``."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "operations":
            for alias in node.names:
                aliases[alias.asname or alias.name] = alias.name
    return aliases


def exercised_operations(sources: dict[str, str]) -> set[str]:
    """``module.name`` of the operations the test sources run: ``run_op(mod.op, ...)`` or
    ``mod.op._inner``."""
    found = set()
    for text in sources.values():
        tree = ast.parse(text)
        aliases = _aliases(tree)

        def named(expr) -> str | None:
            if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in aliases:
                return f"{aliases[expr.value.id]}.{expr.attr}"
            return None

        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run_op" and node.args:
                op = named(node.args[0])
            elif isinstance(node, ast.Attribute) and node.attr == "_inner":
                op = named(node.value)
            else:
                continue
            if op:
                found.add(op)
    return found


def facts_with_cases(fixtures: Path) -> dict[str, bool]:
    """Fact name -> whether one of its cases states the command."""
    found: dict[str, bool] = {}
    for path in fixtures.glob("*/*.json"):
        found[path.parent.name] = found.get(path.parent.name, False) or "command" in json.loads(path.read_text())
    return found


def facts_run_locally(source: str) -> set[str]:
    """Fact class names passed to a ``gather...`` call (its command run on this machine)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("gather"):
            for arg in node.args:
                if isinstance(arg, ast.Attribute):
                    found.add(arg.attr)
                elif isinstance(arg, ast.Name):
                    found.add(arg.id)
    return found


def all_test_sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in TESTS.glob("test_*.py")}


def untested_operations(operations_found: set[str], sources: dict[str, str]) -> list[str]:
    return sorted(operations_found - exercised_operations(sources))


def untested_facts(facts_found, fixtures: Path, facts_source: str) -> list[str]:
    cases, local = facts_with_cases(fixtures), facts_run_locally(facts_source)
    missing = [f"{name}: no case under {fixtures}/{name}/" for name in facts_found if name not in cases]
    missing += [f"{name}: its command is neither stated in a case nor run in test_facts.py"
                for name in facts_found if name in cases and not cases[name] and name not in local]
    return sorted(missing)


# --------------------------------------------------------------------------------------------


def test_every_operation_has_a_fixture_test():
    found = noderig_operations()
    assert len(found) >= 13, f"the operations package lists fewer operations than it has: {sorted(found)}"
    assert untested_operations(found, all_test_sources()) == []


def test_every_fact_has_a_fixture_test_and_its_command_is_checked():
    found = noderig_facts()
    assert len(found) >= 22, f"the operations package lists fewer facts than it has: {sorted(found)}"
    assert untested_facts(found, FIXTURES, (TESTS / "test_facts.py").read_text()) == []


def test_the_check_finds_an_operation_no_test_runs():
    sources = {"test_x.py": "from operations import service as svc\n"
                            "def test_a():\n    run_op(svc.text_file, host)\n    svc.running._inner()\n"}
    ops = {"service.text_file", "service.running", "service.system_user", "packages.present"}
    assert untested_operations(ops, sources) == ["packages.present", "service.system_user"]


def test_the_check_finds_a_fact_without_a_case_or_without_its_command(tmp_path):
    (tmp_path / "Stated").mkdir()
    (tmp_path / "Stated" / "a.json").write_text('{"kwargs": {}, "command": "x", "output": [], "fact": null}')
    (tmp_path / "RunLocally").mkdir()
    (tmp_path / "RunLocally" / "a.json").write_text('{"kwargs": {}, "output": [], "fact": null}')
    (tmp_path / "Unchecked").mkdir()
    (tmp_path / "Unchecked" / "a.json").write_text('{"kwargs": {}, "output": [], "fact": null}')
    source = "def test_a(tmp_path):\n    gather(facts.RunLocally, path=str(tmp_path))\n"
    assert untested_facts(["Stated", "RunLocally", "Unchecked", "NoCase"], tmp_path, source) == [
        f"NoCase: no case under {tmp_path}/NoCase/",
        "Unchecked: its command is neither stated in a case nor run in test_facts.py"]
