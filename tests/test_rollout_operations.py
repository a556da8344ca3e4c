"""The rollout's operations without a host (issue 16): given facts and the rollout's state, the
commands each yields or the reason it changes nothing. The lab tier (``test_rollout.py``) runs
them on a fleet; here every decision branch is stated: a node's gate in and out of its batch,
at load and at execution, before and after a batch failed past the threshold; the snapshot of a
server that runs its files and of one that does not; the venv and checkpoint switches already
done and to do;
readiness passed, rolled back and serving, rolled back and not serving, and no state to roll
back to."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import pytest

from operations import diagnosis, rollout, summary
from tests.fakehost import FakeHost, fact, run_op

LIVE = "/opt/sglang/venv"
GENERATION = "/opt/sglang/venv.noderig/20250102-b"


def position(batch: int, batches: list[list[str]], max_fail: int = 0) -> rollout.Position:
    registry = rollout.Registry(expected={n for b in batches for n in b}, batches=batches, max_fail=max_fail)
    return rollout.Position(batch, len(batches), registry)


def argv(command: str) -> list[str]:
    """The words the node's shell gets: each value one word, whatever it holds."""
    return shlex.split(command)


# --------------------------------------------------------------------------------------------
# rollout.venv_switch


def test_venv_switch_to_the_generation_the_link_points_at_already_is_a_no_op():
    host = FakeHost({fact("LinkTarget", path=LIVE): GENERATION})
    assert run_op(rollout.venv_switch, host, service="sglang", live=LIVE, generation=GENERATION) == []
    assert host.noops == [f"{LIVE} is {GENERATION} already"]


@pytest.mark.parametrize("target", [None, "/opt/sglang/venv.noderig/20250101-a"],
                         ids=["a-directory-still", "another-generation"])
def test_venv_switch_runs_the_switch_script_with_the_live_path_the_generation_and_the_unit(target):
    host = FakeHost({fact("LinkTarget", path=LIVE): target})
    [command] = run_op(rollout.venv_switch, host, service="sglang", live=LIVE, generation=GENERATION)
    assert argv(command) == ["sh", "-c", rollout.SWITCH_SCRIPT, "noderig-switch", LIVE, GENERATION,
                             "sglang.service", "bin/python"]
    assert host.noops == []


def test_venv_switch_paths_reach_the_script_as_one_word_each():
    live, generation = "/opt/my venv", "/opt/my venv.noderig/g; rm -rf /"
    host = FakeHost({fact("LinkTarget", path=live): None})
    [command] = run_op(rollout.venv_switch, host, service="sglang", live=live, generation=generation)
    assert argv(command)[3:] == ["noderig-switch", live, generation, "sglang.service", "bin/python"]


# --------------------------------------------------------------------------------------------
# rollout.checkpoint_switch

MODEL = "/models/Kimi K2.6"
REVISION = "/models/Kimi K2.6.noderig/0123456789abcdef"


def test_checkpoint_switch_to_the_revision_the_link_points_at_already_is_a_no_op():
    host = FakeHost({fact("LinkTarget", path=MODEL): REVISION})
    assert run_op(rollout.checkpoint_switch, host, service="sglang", live=MODEL, generation=REVISION) == []
    assert host.noops == [f"{MODEL} is {REVISION} already"]


@pytest.mark.parametrize("target", [None, "/models/Kimi K2.6.noderig/fedcba9876543210"],
                         ids=["a-directory-still", "another-revision"])
def test_checkpoint_switch_runs_the_switch_script_and_asks_for_the_verified_record(target):
    host = FakeHost({fact("LinkTarget", path=MODEL): target})
    [command] = run_op(rollout.checkpoint_switch, host, service="sglang", live=MODEL, generation=REVISION)
    assert argv(command) == ["sh", "-c", rollout.SWITCH_SCRIPT, "noderig-switch", MODEL, REVISION, "sglang.service",
                             ".noderig/verified.json"]


# --------------------------------------------------------------------------------------------
# rollout.server_stopped


def test_a_running_server_is_stopped_for_what_changes_under_it_in_its_batch():
    host = FakeHost({fact("UnitStatus", unit="sglang.service"): {"active": "active"}})
    assert run_op(rollout.server_stopped, host, service="sglang") == ["systemctl stop sglang.service"]


@pytest.mark.parametrize("state", ["inactive", "failed", None])
def test_a_server_that_does_not_run_is_left_as_it_is(state):
    host = FakeHost({fact("UnitStatus", unit="sglang.service"): {"active": state} if state else {}})
    assert run_op(rollout.server_stopped, host, service="sglang") == []
    assert host.noops == [f"sglang.service is {state or 'not running'}"]


# --------------------------------------------------------------------------------------------
# rollout.snapshot

FILES = {"launcher": "/usr/local/lib/noderig/launch.py", "environment": "/etc/noderig/sglang.env",
         "unit": "/etc/systemd/system/sglang.service"}


def test_snapshot_keeps_the_files_the_venv_and_the_checkpoints_the_server_runs_while_it_answers_health():
    host = FakeHost()
    [command] = run_op(rollout.snapshot, host, service="sglang", port=30000, files=FILES,
                       links={"venv": LIVE, "model_dir": MODEL, "draft_dir": None})
    assert argv(command) == ["sh", "-c", rollout.SNAPSHOT_SCRIPT, "noderig-snapshot", "/var/lib/noderig/last-good",
                             "http://127.0.0.1:30000/health",
                             "launcher=/usr/local/lib/noderig/launch.py", "environment=/etc/noderig/sglang.env",
                             "unit=/etc/systemd/system/sglang.service", "@venv=/opt/sglang/venv",
                             "@model_dir=/models/Kimi K2.6"]


def test_snapshot_without_links_records_the_files_only():
    [command] = run_op(rollout.snapshot, FakeHost(), service="sglang", port=8000, files={"unit": "/etc/u a"})
    assert argv(command)[4:] == ["/var/lib/noderig/last-good", "http://127.0.0.1:8000/health", "unit=/etc/u a"]


def test_snapshot_of_a_server_that_does_not_run_its_files_keeps_the_state_recorded_before():
    host = FakeHost()
    assert run_op(rollout.snapshot, host, service="sglang", port=30000, files=FILES, links={"venv": LIVE},
                  running_current=False) == []
    assert host.noops == ["sglang: its files changed since it started; the last known good state recorded before stays"]


# --------------------------------------------------------------------------------------------
# rollout.gate


def test_a_gate_of_another_batch_passes_the_node():
    host = FakeHost(executing=True)
    assert run_op(rollout.gate, host, batch=0, position=position(1, [["b300-2"], ["b300"]])) == []
    assert host.noops == ["not in batch 1"]


def test_a_gate_at_load_names_its_batch_and_starts_nothing():
    host = FakeHost(executing=False)
    where = position(1, [["b300-2"], ["b300", "b300-3"]])
    assert run_op(rollout.gate, host, batch=1, position=where) == []
    assert host.noops == ["batch 2 of 2: b300, b300-3"]
    assert where.registry.started == set()


def test_a_gate_at_execution_with_the_earlier_batch_healthy_starts_the_node():
    host = FakeHost(executing=True)
    where = position(1, [["b300-2"], ["b300"]])
    where.registry.started.add("b300-2")
    assert run_op(rollout.gate, host, batch=1, position=where) == []
    assert host.noops == ["batch 2 of 2: b300"]
    assert where.registry.started == {"b300-2", "b300"}
    assert where.registry.stopped is None


def test_a_gate_after_a_batch_failed_past_the_threshold_fails_the_node_as_not_reached():
    host = FakeHost(executing=True)
    host.state.failed_hosts = [SimpleNamespace(name="b300-2")]
    where = position(1, [["b300-2"], ["b300"]], max_fail=0)
    where.registry.started.add("b300-2")
    commands = run_op(rollout.gate, host, batch=1, position=where)
    assert where.registry.stopped == ("after batch 1 (b300-2): 1 of 1 node(s) of the batch failed "
                                      "(100%, more than max_fail_percentage=0%)")
    assert commands == [f"fail: the rollout stopped {where.registry.stopped}; this node's server was not touched"]
    assert where.registry.outcomes == {"b300": "NOT REACHED in rollout batch 2 of 2"}
    assert where.registry.not_reached == {"b300"}
    assert "b300" not in where.registry.started


def test_a_gate_lets_the_next_batch_go_when_failures_stay_within_the_threshold():
    host = FakeHost(executing=True)
    host.state.failed_hosts = [SimpleNamespace(name="b300-2")]
    where = position(1, [["b300-2", "b300-3"], ["b300"]], max_fail=50)
    where.registry.started.update({"b300-2", "b300-3"})
    assert run_op(rollout.gate, host, batch=1, position=where) == []
    assert where.registry.stopped is None and "b300" in where.registry.started


def test_a_node_that_failed_before_its_batch_started_does_not_count_against_it():
    # (b300-2 failed at an earlier step, so its batch never started it: not a rollout failure)
    host = FakeHost(executing=True)
    host.state.failed_hosts = [SimpleNamespace(name="b300-2")]
    where = position(1, [["b300-2"], ["b300"]], max_fail=0)
    assert run_op(rollout.gate, host, batch=1, position=where) == []
    assert where.registry.stopped is None


def test_a_batch_whose_every_started_node_failed_stops_whatever_the_threshold():
    # (b300-2 failed at an earlier step, b300-3 failed in the batch: every node the batch changed
    # failed. Ansible counts a batch of the hosts still in the play: 1 of 1, not 1 of 2)
    host = FakeHost(executing=True)
    host.state.failed_hosts = [SimpleNamespace(name="b300-2"), SimpleNamespace(name="b300-3")]
    where = position(1, [["b300-2", "b300-3"], ["b300"]], max_fail=50)
    where.registry.started.add("b300-3")
    commands = run_op(rollout.gate, host, batch=1, position=where)
    assert where.registry.stopped == ("after batch 1 (b300-3): 1 of 1 node(s) of the batch failed "
                                      "(100%, more than max_fail_percentage=50%)")
    assert commands == [f"fail: the rollout stopped {where.registry.stopped}; this node's server was not touched"]


# --------------------------------------------------------------------------------------------
# rollout.ready_or_roll_back

READY = {"service": "sglang", "port": 30000, "served_model_name": "m", "timeout": 600, "api_key_file": None,
         "settings": "settings", "repair": True, "max_repairs": 2, "firewall": None}
RESTORE = ["sh", "-c", rollout.RESTORE_SCRIPT, "noderig-restore", "/var/lib/noderig/last-good", "sglang.service"]


def test_ready_or_roll_back_checks_at_execution():
    assert run_op(rollout.ready_or_roll_back, FakeHost(), batch=0, position=position(0, [["b300"]]),
                  ready=READY) == ["call _ready_or_roll_back"]


@pytest.fixture
def launches(monkeypatch):
    """What the readiness check answers, in turn, and the arguments it was called with."""
    answers, calls = [], []

    def launch(state, host, *args):
        calls.append(args)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(diagnosis, "_launch_until_ready", launch)
    return SimpleNamespace(answers=answers, calls=calls)


def check(host: FakeHost, where: rollout.Position) -> bool:
    return rollout._ready_or_roll_back(host.state, host, 0, where, READY)


def test_a_node_ready_in_its_batch_changed_and_nothing_is_rolled_back(launches):
    launches.answers[:] = [True]
    host, where = FakeHost(executing=True), position(0, [["b300"], ["b300-2"]])
    assert check(host, where) is True
    assert launches.calls == [("sglang", 30000, "m", 600, None, "settings", True, 2, None)]
    assert host.ran == []
    assert where.registry.outcomes == {"b300": "changed in rollout batch 1 of 2"}


def test_a_node_not_ready_is_rolled_back_and_checked_again_without_repairs(launches):
    launches.answers[:] = [False, True]
    host, where = FakeHost(executing=True, shell=lambda text: (True, [])), position(0, [["b300"], ["b300-2"]])
    assert check(host, where) is False
    [restore] = host.ran
    assert argv(restore) == RESTORE
    assert launches.calls[1] == ("sglang", 30000, "m", 600, None, None, False, 0, None)
    assert where.registry.outcomes == {"b300": "ROLLED BACK in rollout batch 1 of 2, serving its last known good "
                                                "state again"}


def test_a_rolled_back_node_that_does_not_serve_again_says_so(launches):
    launches.answers[:] = [False, False]
    host, where = FakeHost(executing=True, shell=lambda text: (True, [])), position(0, [["b300"]])
    assert check(host, where) is False
    assert where.registry.outcomes == {"b300": "ROLLED BACK in rollout batch 1 of 1, and NOT serving after it"}


def test_a_readiness_check_that_raises_is_not_ready_and_the_node_is_rolled_back(launches):
    # (a bug on the server's answer, a connection lost while it waited: its batch failed all the same)
    launches.answers[:] = [RuntimeError("the health answer was not JSON"), True]
    host, where = FakeHost(executing=True, shell=lambda text: (True, [])), position(0, [["b300"], ["b300-2"]])
    assert check(host, where) is False
    [restore] = host.ran
    assert argv(restore) == RESTORE
    assert where.registry.outcomes == {"b300": "ROLLED BACK in rollout batch 1 of 2, serving its last known good "
                                                "state again"}
    assert any("internal error: RuntimeError: the health answer was not JSON" in line for line in host.logged)


def test_a_rollback_that_raises_fails_the_node_not_rolled_back(launches):
    def unreachable(text):
        raise OSError("Socket is closed")

    launches.answers[:] = [False]
    host, where = FakeHost(executing=True, shell=unreachable), position(0, [["b300"]])
    assert check(host, where) is False
    assert where.registry.outcomes == {"b300": "NOT ROLLED BACK in rollout batch 1 of 1"}
    assert host.logged[-1].startswith("rollback impossible: OSError: Socket is closed")


def test_a_check_after_the_rollback_that_raises_says_the_node_does_not_serve(launches):
    launches.answers[:] = [False, OSError("Socket is closed")]
    host, where = FakeHost(executing=True, shell=lambda text: (True, [])), position(0, [["b300"]])
    assert check(host, where) is False
    assert where.registry.outcomes == {"b300": "ROLLED BACK in rollout batch 1 of 1, and NOT serving after it"}


def test_a_node_with_no_state_to_go_back_to_fails_not_rolled_back(launches):
    launches.answers[:] = [False]
    host = FakeHost(executing=True, shell=lambda text: (False, ["no last known good state on this node (d)"]))
    where = position(0, [["b300"]])
    assert check(host, where) is False
    assert len(launches.calls) == 1  # no second readiness check
    assert where.registry.outcomes == {"b300": "NOT ROLLED BACK in rollout batch 1 of 1"}
    assert host.logged[-1] == "rollback impossible: no last known good state on this node (d)"


# --------------------------------------------------------------------------------------------
# what the summary takes from a rollout (operations.summary._rollout_parts)


def registry_of(batches: list[list[str]], **entries: rollout.Entry) -> rollout.Registry:
    return rollout.Registry(expected=set(entries), entries=entries, batches=batches)


def test_without_batches_no_node_is_said_to_be_untouched():
    # (a serving node with nothing to restart, alone: no rollout ran, its line must not name one)
    registry = registry_of([], b300=rollout.Entry(serving=True, restart=None))
    assert registry.untouched() == []
    assert summary._rollout_parts(registry, set(), True) == ({}, set())


def test_with_batches_a_serving_node_with_nothing_to_restart_is_untouched_unless_it_failed():
    registry = registry_of([["b300"]], b300=rollout.Entry(serving=True, restart="the unit changed"),
                           **{"b300-2": rollout.Entry(serving=True, restart=None),
                              "b300-3": rollout.Entry(serving=True, restart=None),
                              "b300-4": rollout.Entry(serving=False, restart="not running")})
    registry.outcomes["b300"] = "changed in rollout batch 1 of 1"
    assert registry.untouched() == ["b300-2", "b300-3"]
    assert summary._rollout_parts(registry, {"b300-3"}, True) == (
        {"b300": "changed in rollout batch 1 of 1",
         "b300-2": "untouched in the rollout (serving, nothing to restart)"}, set())
    assert summary._rollout_parts(registry, set(), False) == ({}, set())  # a dry run: the plan says it


def test_the_summary_takes_the_nodes_a_gate_did_not_reach():
    registry = registry_of([["b300"], ["b300-2"]], b300=rollout.Entry(serving=True, restart="x"),
                           **{"b300-2": rollout.Entry(serving=True, restart="x")})
    registry.not_reached.add("b300-2")
    assert summary._rollout_parts(registry, {"b300", "b300-2"}, True)[1] == {"b300-2"}


# --------------------------------------------------------------------------------------------
# service._rollout_entry: why a node that serves takes part, and what its last known good keeps

SETTINGS = SimpleNamespace(service_name="sglang", port=30000, venv=LIVE, model_dir="/models/m", draft_dir=None)
TEXTS = {"unit": ("/etc/systemd/system/sglang.service", "[Unit]\n", "644")}
IN_PLACE = {"pin": None, "dest": "/models/m", "token_file": None, "connections": 16, "jobs": 4}


@pytest.mark.parametrize("reason, nexts, in_batch, want", [
    (None, (), (), None),
    (None, (("/models/m", "/models/m.noderig/a"),), (), "a new checkpoint revision is prepared beside the live one"),
    (None, (), (IN_PLACE,), "a new checkpoint revision is fetched into /models/m in its batch, its server stopped "
                            "(no room beside the live one, or checkpoint_beside=False: a rollback cannot bring the "
                            "old files back)"),
    ("the unit changed", (), (IN_PLACE,), "the unit changed; a new checkpoint revision is fetched into /models/m"),
], ids=["nothing", "beside", "in-batch", "in-batch-and-more"])
def test_a_new_checkpoint_revision_is_a_reason_to_restart_in_the_nodes_batch(monkeypatch, reason, nexts, in_batch,
                                                                             want):
    from operations import service
    monkeypatch.setattr(service.rollout, "restart_reason", lambda *a: rollout.Entry(serving=True, restart=reason))
    entry = service._rollout_entry(SETTINGS, TEXTS, None, [], {"service": "sglang"}, None, nexts, in_batch)
    assert (entry.restart or "")[:len(want or "")] == (want or "") and bool(entry.restart) == bool(want)
    assert entry.snapshot["links"] == {"venv": LIVE, "model_dir": "/models/m", "draft_dir": None}
