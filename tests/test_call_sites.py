"""pyinfra places each operation by the line numbers of its call stack; ``operations.call_sites``
makes it find the same frames and line numbers without reading any source file."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pyinfra
import pyinfra.api.util as pyinfra_util
import pytest

from operations import call_sites


@pytest.fixture
def restored(monkeypatch):
    monkeypatch.setattr(pyinfra_util, "stack", pyinfra_util.stack)
    monkeypatch.setattr(pyinfra_util, "getframeinfo", pyinfra_util.getframeinfo)


def order(state) -> list[int]:
    return pyinfra_util.get_operation_order_from_stack(state)  # the line numbers: this line, and the callers'


def test_the_operation_order_is_the_same_and_no_source_is_read(restored, monkeypatch):
    monkeypatch.setattr(pyinfra, "is_cli", False)
    state = SimpleNamespace(current_deploy_filename=__file__, current_op_file_number=0)
    read, findsource = [], inspect.findsource
    orders = []
    for patched in (False, True):
        if patched:
            call_sites.install()
            call_sites.install()  # the deploy file runs once per host
            monkeypatch.setattr(inspect, "findsource", lambda *a: read.append(a) or findsource(*a))
        orders.append(order(state))  # (the same call line both times)
    monkeypatch.setattr(inspect, "findsource", findsource)
    assert read == [], "no source file read"
    assert orders[1] == orders[0]
    assert orders[0][-1] == inspect.getsourcelines(order)[1] + 1, "the line of the stack's innermost call here"


def test_the_call_location_pyinfra_names_in_its_errors_is_the_callers_line(restored):
    call_sites.install()
    here = inspect.currentframe().f_lineno + 1
    assert pyinfra_util.get_call_location(frame_offset=0).startswith(f"line {here} in ")
