"""A fact read once per run while nothing changes it (``operations.fact_reads``), on hosts whose
connector counts what reaches it: the second read of the same fact is not a round trip, and
anything that may have changed the facts (a command on any host, an overlapping command, the
prompt of a change-detection run, a failed read) makes the next read go to the host again."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import pytest

from operations.fact_reads import FRESH_SECONDS, remember
from operations.facts import CheckpointState, Facts, FileStats, HttpStatus, JsonFile, UnitStatus


@pytest.fixture(autouse=True)
def controller_cache(tmp_path, monkeypatch):
    """What the runs keep for the next one stays in this test."""
    monkeypatch.setenv("NODERIG_CACHE", str(tmp_path))


class Connector:
    def __init__(self):
        self.commands = []
        self.round_trip = 0.0

    def run_shell_command(self, command, **_kwargs):
        self.commands.append(command)
        gevent.sleep(self.round_trip)  # other greenlets run meanwhile
        return True, []


class Host:
    """pyinfra's host as the fact reads use it: ``get_fact`` runs the fact's command through
    the connector and answers what ``answers`` holds now (a fresh object each time)."""

    def __init__(self, name, state, answers):
        self.name, self.state, self.answers, self.connector = name, state, answers, Connector()
        self.fail_next = False
        self.data, self.connected = {"ssh_hostname": f"10.0.0.{len(name)}"}, True

    def get_fact(self, cls, *args, **kwargs):
        self.connector.run_shell_command(f"read {cls.__name__} {kwargs}")
        if cls is Facts:  # the last run's facts at once: each one's status and output lines
            return [self.answers["Facts"].get(name, [1, []]) for name, _ in kwargs["reads"]]
        if self.fail_next:
            self.state.failed_hosts.add(self)
        return {"value": self.answers[cls.__name__]}


def run(executing=False, prompted=False, facts=None, host_cls=None):
    state = SimpleNamespace(is_executing=executing, should_check_for_changes=lambda: prompted, failed_hosts=set(),
                            handlers=[])
    state.add_callback_handler = state.handlers.append
    answers = {"JsonFile": 1, "FileStats": 2, "UnitStatus": "active", "HttpStatus": 200, "Facts": facts or {}}
    node, reference = (host_cls or Host)("b300", state, answers), (host_cls or Host)("ct200", state, answers)
    state.inventory = [reference, node]
    remember(node)
    gevent.wait([g for g in state._noderig_fact_reads.pending.values()])
    return state, answers, node, reference


def end_of_run(state, *hosts):
    for handler in state.handlers:
        for host in hosts:
            handler.host_disconnect(state, host)


def reads(host) -> int:
    return sum(1 for c in host.connector.commands if c.startswith("read "))


def test_the_same_fact_read_twice_is_one_round_trip_and_each_answer_is_a_copy():
    _, _, node, _ = run()
    first = node.get_fact(JsonFile, path="/m/manifest.json")
    first["value"] = "changed by the caller"
    assert node.get_fact(JsonFile, path="/m/manifest.json") == {"value": 1}
    assert reads(node) == 1


def test_other_arguments_another_host_or_another_fact_are_read():
    _, _, node, reference = run()
    node.get_fact(JsonFile, path="/a")
    node.get_fact(JsonFile, path="/b")
    node.get_fact(FileStats, root="/a")
    reference.get_fact(JsonFile, path="/a")
    assert (reads(node), reads(reference)) == (3, 1)


def test_a_command_on_any_host_makes_every_fact_read_again():
    _, answers, node, reference = run()
    node.get_fact(JsonFile, path="/a")
    answers["JsonFile"] = 5
    reference.connector.run_shell_command("rsync the venv to b300")  # the reference changes the node
    assert node.get_fact(JsonFile, path="/a") == {"value": 5}
    assert reads(node) == 2


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def clocked(state) -> Clock:
    clock = state._noderig_fact_reads.clock = Clock()
    return clock


def test_in_the_operation_run_the_servers_state_is_read_again_once_its_answer_is_no_longer_fresh():
    state, answers, node, _ = run(executing=True)
    clock = clocked(state)
    assert node.get_fact(UnitStatus, unit="sglang.service") == {"value": "active"}
    answers["UnitStatus"], answers["HttpStatus"] = "failed", 0
    clock.now += FRESH_SECONDS - 0.5  # a second step asks at once: the answer stands
    assert node.get_fact(UnitStatus, unit="sglang.service") == {"value": "active"}
    clock.now += 0.5
    assert node.get_fact(UnitStatus, unit="sglang.service") == {"value": "failed"}
    node.get_fact(HttpStatus, url="http://127.0.0.1:30000/health")
    node.connector.run_shell_command("systemctl restart sglang.service")  # a step acted
    answers["HttpStatus"] = 200
    assert node.get_fact(HttpStatus, url="http://127.0.0.1:30000/health") == {"value": 200}
    assert reads(node) == 4


def test_the_deploy_files_plans_see_one_state_of_the_server_and_the_run_reads_it_afresh_once_it_is_old():
    state, answers, node, _ = run()
    clock = clocked(state)
    node.get_fact(UnitStatus, unit="sglang.service")  # the rollout: does it serve?
    answers["UnitStatus"] = "failed"
    clock.now += 60  # however long the plans take, they see one state
    assert node.get_fact(UnitStatus, unit="sglang.service") == {"value": "active"}  # must it restart?
    state.is_executing = True  # -y: the run follows; a minute later it reads what runs now
    assert node.get_fact(UnitStatus, unit="sglang.service") == {"value": "failed"}
    assert reads(node) == 2


def test_a_converged_reruns_operations_take_the_servers_state_from_its_first_round_trip():
    unit = [0, ["ActiveState=active", "SubState=running"]]
    state, answers, node, _ = run(facts={"operations.facts.UnitStatus": unit})
    state._noderig_fact_reads.read_at_once(node, [["operations.facts.UnitStatus", {"unit": "sglang.service"}]])
    state.is_executing = True  # -y: the run follows the load a second later
    answers["UnitStatus"] = "failed"
    assert node.get_fact(UnitStatus, unit="sglang.service")["active"] == "active"
    assert [c.split(" ")[1] for c in node.connector.commands] == ["Facts"]


def test_the_run_after_a_prompt_reads_afresh_and_a_run_without_one_does_not():
    state, answers, node, _ = run(prompted=True)
    node.get_fact(JsonFile, path="/a")  # the change-detection pass
    answers["JsonFile"] = 7
    state.is_executing = True  # the user answered the prompt: time passed
    assert node.get_fact(JsonFile, path="/a") == {"value": 7}
    state, answers, node, _ = run(prompted=False)  # -y: the run follows the load at once
    node.get_fact(JsonFile, path="/a")
    state.is_executing = True
    node.get_fact(JsonFile, path="/a")
    assert reads(node) == 1


def test_a_failed_read_is_not_kept():
    state, _, node, _ = run()
    node.fail_next = True
    node.get_fact(JsonFile, path="/a")
    node.fail_next = False
    state.failed_hosts.clear()
    node.get_fact(JsonFile, path="/a")
    assert reads(node) == 2


def test_a_read_that_a_command_on_another_host_overlapped_is_not_kept():
    _, answers, node, reference = run()
    # b300's read waits on its (longer) round trip while another greenlet changes something
    # and is done before the read returns.
    node.connector.round_trip = 0.01
    reader = gevent.spawn(node.get_fact, JsonFile, path="/a")
    changer = gevent.spawn(reference.connector.run_shell_command, "systemctl restart something")
    gevent.joinall([reader, changer])
    answers["JsonFile"] = 9
    assert node.get_fact(JsonFile, path="/a") == {"value": 9}
    assert reads(node) == 2


def test_the_facts_the_last_run_read_are_read_in_one_round_trip():
    state, _, node, reference = run()
    node.get_fact(JsonFile, path="/m/.noderig/manifest.json")
    node.get_fact(FileStats, root="/m")
    node.get_fact(UnitStatus, unit="sglang.service")  # read at load: in the next run's first round trip too
    reference.get_fact(JsonFile, path="/opt/venv/pyvenv.cfg")
    end_of_run(state, node, reference)

    # The next run: b300's two facts in one command, the manifest answered from it; FileStats
    # failed there (status 2): read again on its own, as it would fail on its own.
    facts = {"operations.facts.JsonFile": [0, ["noderig:present", '{"repo": "m"}']],
             "operations.facts.FileStats": [2, []], "operations.facts.UnitStatus": [0, ["ActiveState=active"]]}
    state, _, node, reference = run(facts=facts)
    assert node.connector.commands[0].startswith("read Facts"), node.connector.commands
    assert node.get_fact(UnitStatus, unit="sglang.service")["active"] == "active"
    assert node.get_fact(JsonFile, path="/m/.noderig/manifest.json") == {"repo": "m"}
    assert node.get_fact(FileStats, root="/m") == {"value": 2}
    assert [c.split(" ")[1] for c in node.connector.commands] == ["Facts", "FileStats"]
    assert reference.connector.commands[0].startswith("read Facts")


def test_a_fact_the_last_run_did_not_read_is_read_as_before():
    state, _, node, reference = run()  # nothing kept yet: no read at once
    assert node.connector.commands == []
    node.get_fact(JsonFile, path="/a")
    end_of_run(state, node)
    state, _, node, _ = run(facts={"operations.facts.JsonFile": [0, ["noderig:present", "[]"]]})
    assert node.get_fact(JsonFile, path="/b") == {"value": 1}  # another path: its own read
    assert [c.split(" ")[1] for c in node.connector.commands] == ["Facts", "JsonFile"]


def test_what_a_run_answered_from_its_first_round_trip_is_kept_for_the_next_run_too():
    state, _, node, _ = run()
    node.get_fact(JsonFile, path="/a")
    node.get_fact(FileStats, root="/m")
    end_of_run(state, node)
    for _ in range(2):  # JsonFile answered from the read at once, FileStats read on its own
        state, _, node, _ = run(facts={"operations.facts.JsonFile": [0, ["noderig:present", "[]"]]})
        assert node.get_fact(JsonFile, path="/a") == []
        node.get_fact(FileStats, root="/m")
        assert [c.split(" ")[1] for c in node.connector.commands] == ["Facts", "FileStats"]
        end_of_run(state, node)


def test_a_fact_whose_output_in_the_first_round_trip_cannot_be_processed_is_read_on_its_own():
    state, _, node, _ = run()
    node.get_fact(JsonFile, path="/etc/noderig/repairs.json")
    end_of_run(state, node)
    # Broken JSON: its own read then fails the host, naming the file, as it always did.
    state, _, node, _ = run(facts={"operations.facts.JsonFile": [0, ["noderig:present", '{"repairs": [']]})
    assert node.get_fact(JsonFile, path="/etc/noderig/repairs.json") == {"value": 1}
    assert [c.split(" ")[1] for c in node.connector.commands] == ["Facts", "JsonFile"]



class RawHost(Host):
    """A host whose facts answer the value itself (a fresh copy), not ``{"value": ...}``."""

    def get_fact(self, cls, *args, **kwargs):
        self.connector.run_shell_command(f"read {cls.__name__} {kwargs}")
        return dict(self.answers[cls.__name__])


def test_the_checkpoint_is_read_again_each_time_while_aria2_writes_it_and_kept_once_it_does_not():
    _, answers, node, _ = run(executing=True, host_cls=RawHost)
    downloading = {"manifest": None, "stats": {}, "record": None, "held": ["a.safetensors"]}
    answers["CheckpointState"] = downloading
    assert node.get_fact(CheckpointState, dest="/m") == downloading
    assert node.get_fact(CheckpointState, dest="/m") == downloading
    assert reads(node) == 2, "aria2 writes the files: every read goes to the node"
    settled = {"manifest": None, "stats": {}, "record": None, "held": None}
    answers["CheckpointState"] = settled
    assert node.get_fact(CheckpointState, dest="/m") == settled
    assert node.get_fact(CheckpointState, dest="/m") == settled
    assert reads(node) == 3, "no daemon: the second read is answered from the first"

