"""The fan-out's peer server operations without a host (issue 15): given facts, the commands
or the no-op reason; and, at execution, the steps that start a node's server, what the run
then knows it serves, and a step that fails leaving it unused. The lab tier
(``test_fanout_lab.py``) runs them on a fleet."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from operations import peers
from tests.fakehost import FakeHost, fact, run_op

RUN = "/run/noderig-peers"
STOP = (f"systemctl stop noderig-peers.service 2>/dev/null ; systemctl reset-failed noderig-peers.service "
        f"2>/dev/null ; rm -rf {RUN}")

# --------------------------------------------------------------------------------------------
# peers.nginx_quiet


def quiet_host(packages: dict, enabled: str) -> FakeHost:
    return FakeHost({"DebPackages": packages, fact("UnitStatus", unit="nginx.service"): {"enabled": enabled}})


def test_nginx_is_masked_before_it_is_installed():
    host = quiet_host({"aria2": ["1.36"]}, enabled="")
    assert run_op(peers.nginx_quiet, host) == ["systemctl mask nginx.service"]


@pytest.mark.parametrize("packages, enabled", [({"nginx-common": ["1.22"]}, "enabled"), ({}, "masked")],
                         ids=["installed-before", "masked-already"])
def test_nginx_installed_before_or_masked_already_is_left_alone(packages, enabled):
    host = quiet_host(packages, enabled)
    assert run_op(peers.nginx_quiet, host) == []
    assert host.noops == ["nginx.service is masked, or nginx was installed before"]


# --------------------------------------------------------------------------------------------
# peers.stopped


def test_nothing_served_and_no_links_left_is_a_no_op():
    host = FakeHost({fact("Mtimes", paths=(RUN, "/models/a/.noderig/peer")): {}})
    assert run_op(peers.stopped, host, dests=["/models/a"]) == []
    assert host.noops == ["no peer server and no links to serve"]


def test_a_server_left_running_is_stopped_and_only_the_links_present_removed():
    present = {RUN: 1.0, "/models/my b/.noderig/peer": 2.0}
    host = FakeHost({fact("Mtimes", paths=(RUN, "/models/a/.noderig/peer", "/models/my b/.noderig/peer")): present})
    assert run_op(peers.stopped, host, dests=["/models/a", "/models/my b"]) == [
        "call _forget", f"{STOP} '/models/my b/.noderig/peer'"]


def test_links_left_by_a_killed_run_are_removed_without_a_server():
    host = FakeHost({fact("Mtimes", paths=(RUN, "/models/a/.noderig/peer")): {"/models/a/.noderig/peer": 2.0}})
    assert run_op(peers.stopped, host, dests=["/models/a"]) == ["call _forget", f"{STOP} /models/a/.noderig/peer"]


# --------------------------------------------------------------------------------------------
# peers.serve


def test_serve_uploads_the_node_scripts_then_starts_the_server_at_execution(monkeypatch):
    monkeypatch.setattr(peers.files.put, "_inner",
                        lambda src, dest, mode: iter([f"upload {Path(src).name} -> {dest} ({mode})"]))
    host = FakeHost()
    assert run_op(peers.serve, host, checkpoints=[("k", "/models/a")], address="10.0.0.2", port=30001,
                  peers=["10.0.0.3"]) == [
        "call _node_scripts_current",
        "upload peer_links.py -> /usr/local/lib/noderig/peer_links.py (755)",
        "call _start"]


SECRET = "abcxdefygh"  # the token below with "-" and "_" made letters (no shell or URL meaning)


@pytest.fixture
def started(monkeypatch):
    """``_start`` on a node with two checkpoints, a token that is always the same, and an
    empty table of servers; ``fail_at``: the first word of the command that fails."""
    monkeypatch.setattr(peers.secrets, "token_urlsafe", lambda n: "abc-def_gh")
    monkeypatch.setattr(peers, "SERVING", {})

    def run(fail_at: str | None = None):
        def shell(text):
            if fail_at and text.startswith(fail_at):
                return False, ["it broke"]
            if text.startswith("python3 /usr/local/lib/noderig/peer_links.py /models/a"):
                return True, ["linked 2", '{"served": ["d1", "d2"]}']
            if text.startswith("python3 /usr/local/lib/noderig/peer_links.py"):
                return True, ['{"served": []}']
            return True, []

        host = FakeHost(executing=True, shell=shell)
        ok = peers._start(host.state, host, [("org--a", "/models/a"), ("org--b", "/models/my b")],
                          "10.0.0.2", 30001, ["10.0.0.3", "10.0.0.4"])
        return ok, host

    return run


def test_a_started_server_links_each_checkpoint_under_the_secret_and_is_then_known_to_the_run(started):
    ok, host = started()
    assert ok is True
    assert host.ran[:6] == [
        f"{STOP} && install -d -m 711 {RUN} {RUN}/tmp {RUN}/www {RUN}/www/{SECRET}",
        "python3 /usr/local/lib/noderig/peer_links.py /models/a",
        f"ln -sfn /models/a/.noderig/peer {RUN}/www/{SECRET}/org--a",
        "python3 /usr/local/lib/noderig/peer_links.py '/models/my b'",
        f"ln -sfn '/models/my b/.noderig/peer' {RUN}/www/{SECRET}/org--b",
        f"upload -> {RUN}/nginx.conf",
    ]
    assert host.ran[6] == ("systemd-run --quiet --unit=noderig-peers --property=Type=exec /usr/sbin/nginx "
                           f"-e stderr -c {RUN}/nginx.conf")
    assert shlex.split(host.ran[7])[0:2] == ["bash", "-c"] and shlex.split(host.ran[7])[3:] == ["_", "10.0.0.2",
                                                                                                "30001"]
    conf = host.uploads[f"{RUN}/nginx.conf"]
    assert "listen 10.0.0.2:30001;" in conf and "allow 10.0.0.3/32;" in conf and "allow 10.0.0.4/32;" in conf
    assert SECRET not in conf  # the secret is a directory name only
    served = peers.SERVING["b300"]
    assert (served.address, served.port, served.secret) == ("10.0.0.2", 30001, SECRET)
    assert served.digests == {"org--a": {"d1", "d2"}, "org--b": set()}


@pytest.mark.parametrize("fail_at, what", [
    ("systemctl stop", "preparing the peer server"),
    ("python3", "linking the verified files of /models/a"),
    ("systemd-run", "starting nginx"),
    ("bash", "waiting for nginx on 10.0.0.2:30001"),
])
def test_a_step_that_fails_says_which_and_the_node_serves_nothing(started, fail_at, what):
    ok, host = started(fail_at)
    assert ok is False
    assert host.logged == [f"{what} failed on b300: it broke"]
    assert peers.SERVING == {}
    # nothing after the step that failed but stopping what it may have started
    assert host.ran[-2].startswith(fail_at)
    assert host.ran[-1] == ("systemctl stop noderig-peers.service 2>/dev/null ; systemctl reset-failed "
                            "noderig-peers.service 2>/dev/null ; rm -rf /run/noderig-peers")


def test_a_step_that_fails_without_a_word_says_so(monkeypatch):
    monkeypatch.setattr(peers, "SERVING", {})
    host = FakeHost(executing=True, shell=lambda text: (not text.startswith("python3"), []))
    assert peers._start(host.state, host, [("org--a", "/models/a")], "10.0.0.2", 30001, ["10.0.0.3"]) is False
    assert host.logged == ["linking the verified files of /models/a failed on b300: no output (killed, or its "
                           "connection dropped)"]


# --------------------------------------------------------------------------------------------
# a node that fails while it serves


def failing(host: FakeHost, ignored: bool = False):
    """pyinfra's callback for an operation that failed on ``host`` (its arguments as the run has them)."""
    op = type("Op", (), {"global_arguments": {"_ignore_errors": ignored}})
    host.state.get_op_data_for_host = lambda h, op_hash: op
    for handler in host.state.handlers:
        handler.operation_host_error(host.state, host, "op-hash")


def test_a_node_that_fails_while_it_serves_stops_serving_and_no_peer_uses_it_again(started, monkeypatch):
    # (pyinfra runs nothing more on a failed host: the fan-out's ``stopped`` never comes to it, and
    # its server, its port open to the peers, would outlive the run)
    monkeypatch.setattr(peers, "EXCLUDED", {})
    ok, host = started()
    assert ok is True and "b300" in peers.SERVING
    del host.ran[:]
    failing(host)
    assert host.ran == [STOP]
    assert "b300" not in peers.SERVING and "b300" in peers.EXCLUDED
    failing(host)  # a second failure: nothing more to stop
    assert host.ran == [STOP]


def test_a_failure_the_operation_ignores_or_with_fanout_keep_serving_stops_nothing(started, monkeypatch):
    monkeypatch.setattr(peers, "EXCLUDED", {})
    ok, host = started()
    del host.ran[:]
    failing(host, ignored=True)
    assert host.ran == [] and "b300" in peers.SERVING
    host.data["fanout_keep_serving"] = True  # (kept on purpose, after the run too)
    failing(host)
    assert host.ran == [] and "b300" in peers.SERVING


def test_a_node_whose_connection_is_gone_when_it_fails_is_stopped_by_the_rerun(started, monkeypatch):
    monkeypatch.setattr(peers, "EXCLUDED", {})
    ok, host = started()

    def gone(text):
        raise OSError("Socket is closed")

    host.shell = gone
    failing(host)  # no exception out of pyinfra's callback: the rerun's ``stopped`` finds the server
    assert "b300" not in peers.SERVING
