"""Every fact, as pyinfra tests its own: given the command's output, the fact's value (and,
where stated, the exact command). One JSON file per case under ``tests/fixtures/facts/<Fact>/``:

.. code:: json

    {"kwargs": {...}, "command": "the shell line (optional)", "output": ["line", ...],
     "fact": <the value> | "raises": "<regex of the FactProcessError>", "doc": "why (optional)"}

The value is computed the way pyinfra's ``get_facts`` computes it: ``default()``, replaced by
``process(lines)`` when the command printed anything. Tuples compare as JSON lists. The
commands that scripts run are exercised on real files in ``tests/test_facts.py``."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest
from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

import operations

FIXTURES = Path(__file__).parent / "fixtures" / "facts"


def noderig_facts() -> dict[str, type]:
    """Every FactBase subclass defined in the ``operations`` package, by class name."""
    found = {}
    for info in pkgutil.iter_modules(operations.__path__):
        module = importlib.import_module(f"operations.{info.name}")
        for name, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, FactBase) and obj is not FactBase and obj.__module__ == module.__name__:
                found[name] = obj
    return found


def cases() -> list[Path]:
    return sorted(FIXTURES.glob("*/*.json"))


def raw(command) -> str:
    return command if isinstance(command, str) else command.get_raw_value()


def value_of(fact_cls: type, kwargs: dict, output: list[str]):
    fact = fact_cls()
    fact.command(**kwargs)  # as pyinfra does: one instance, command() before process()
    value = fact.default()
    if output:
        value = fact.process(output)
    return value


def kwargs_of(case: dict) -> dict:
    # JSON has no tuples; facts over several paths take one (a hashable fact key).
    return {k: tuple(v) if isinstance(v, list) else v for k, v in case["kwargs"].items()}


@pytest.mark.parametrize("path", cases(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fact_fixture(path):
    case = json.loads(path.read_text())
    fact_cls = noderig_facts()[path.parent.name]
    kwargs = kwargs_of(case)
    if "command" in case:
        assert raw(fact_cls().command(**kwargs)) == case["command"]
    if "raises" in case:
        with pytest.raises(FactProcessError) as caught:
            value_of(fact_cls, kwargs, case["output"])
        assert re.search(case["raises"], str(caught.value)), str(caught.value)
        return
    value = value_of(fact_cls, kwargs, case["output"])
    assert json.loads(json.dumps(value)) == case["fact"]


def test_every_fixture_names_a_fact_and_states_an_outcome():
    facts = noderig_facts()
    for path in cases():
        case = json.loads(path.read_text())
        assert path.parent.name in facts, f"{path}: no fact {path.parent.name} in operations/"
        assert ("fact" in case) != ("raises" in case), f"{path}: give exactly one of fact / raises"
        assert set(case) <= {"kwargs", "command", "output", "fact", "raises", "doc"}, f"{path}: unknown keys"
