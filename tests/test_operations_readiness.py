"""The readiness step's execution, without a host: ``diagnosis.wait_until_serving`` yields one command that
waits, diagnoses a failed launch and, with ``repair``, applies the diagnosed fix and relaunches.
Here the node is scripted: each launch either becomes ready (the smoke requests go to a local
stand-in through the same loopback forward the deploy uses) or crashes with a real crash log
from tests/fixtures/crashlogs; the test states the commands the repair must run and the files
it must write. The node-side wait runs for real under a controlled clock."""

from __future__ import annotations

import http.server
import json
import logging
import os
import socket
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from noderig.firewall import FirewallSettings
from operations import diagnosis
from operations.packages import APT
from tests.fakehost import FakeHost, fact
from tests.test_operations import server_settings

CRASHLOGS = Path(__file__).parent / "fixtures" / "crashlogs"
FLASH_ATTN = "flash_attn_cute_missing/standin-vision-warmup-tp2.log"
NO_HEADERS = "missing_python_headers/standin-no-python-dev-tp2.log"
CORRUPT = "checkpoint_corrupt/standin-truncated-shard-tp2.log"
OOM = "cuda_oom/sglang-4248-tp-worker-oom.log"
NO_KERNEL = "unsupported_gpu_arch/vllm-14452-rtx50-no-kernel-image.log"
PORT_TAKEN = "port_in_use/aphrodite-sonar-621-uvicorn-bind.log"
STALLED = "stalled"  # a launch still loading when the wait ends
OOM_KILLED = "oom-killed"  # a launch the kernel's OOM killer ended while it loaded; systemd restarts it
# what systemd writes of that invocation (INVOCATION_ID=), after the server's own lines
SYSTEMD_OOM = ["2026-12-02T13:31:20.100000+0000 b300 systemd[1]: sglang.service: A process of this unit has been killed "
               "by the OOM killer.",
               "2026-12-02T13:31:20.200000+0000 b300 systemd[1]: sglang.service: Main process exited, code=killed, "
               "status=9/KILL",
               "2026-12-02T13:31:20.300000+0000 b300 systemd[1]: sglang.service: Failed with result 'oom-kill'."]

READ_REPAIRS = "cat /etc/noderig/repairs.json 2>/dev/null || true"
RESTART = "systemctl reset-failed sglang.service ; systemctl restart sglang.service"
UNIT = "/etc/systemd/system/sglang.service"


def journal(name: str) -> list[str]:
    return [line for line in (CRASHLOGS / name).read_text().splitlines() if not line.startswith("# ")]


def atomic(path: str, mode: str = "644") -> list[str]:
    """The three commands that replace ``path`` atomically (written beside it, then renamed)."""
    parent = path.rsplit("/", 1)[0]
    return [f"install -d -m 755 {parent} && install -m {mode} /dev/null {path}.noderig-tmp",
            f"upload -> {path}.noderig-tmp", f"chmod {mode} {path}.noderig-tmp && mv -f {path}.noderig-tmp {path}"]


class Node:
    """Answers the commands the readiness step runs. ``launches``: per launch, None (ready) or
    a crash log (its journal); ``recorded``: repairs.json; ``damaged``: what the verifier finds."""

    def __init__(self, launches, recorded=None, damaged=(), listening=()):
        self.launches, self.recorded, self.damaged, self.listening = list(launches), recorded, damaged, listening
        self.current = None

    def __call__(self, command: str):
        if command == READ_REPAIRS:
            return True, json.dumps(self.recorded).splitlines() if self.recorded else []
        if "noderig-wait" in command:
            self.current = self.launches.pop(0)
            return self.current is None, []
        if command.startswith("inv=$(systemctl show -p InvocationID"):
            loading = journal("healthy/standin-sglang-skip-warmup-tp2.log")[:12]
            if self.current == OOM_KILLED:
                return True, [*loading, *SYSTEMD_OOM, diagnosis.RESULT_MARK, "Result=oom-kill", "ExecMainCode=2",
                              "ExecMainStatus=9", "ActiveState=activating", "SubState=auto-restart"]
            stalled = self.current == STALLED
            lines = loading if stalled else journal(self.current)
            state = "activating" if stalled else "failed"
            return True, [*lines, diagnosis.RESULT_MARK, "Result=exit-code", "ExecMainCode=1", "ExecMainStatus=137",
                          f"ActiveState={state}", f"SubState={'start' if stalled else 'failed'}"]
        if "verify_files.py" in command:
            files = [{"file": f, "status": "sha256_mismatch"} for f in self.damaged]
            return not self.damaged, [json.dumps({"files": files})]
        if command.startswith("ss -ltnH"):
            return True, [f"LISTEN 0 128 0.0.0.0:{p} 0.0.0.0:*" for p in self.listening]
        return True, []


class ServerStandIn(http.server.BaseHTTPRequestHandler):
    """What a ready server answers to the smoke requests."""

    served = "kimi-k2.6"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send({"text": "pong", "meta_info": {}})

    def do_GET(self):
        self._send({"object": "list", "data": [{"id": self.served}]})

    def _send(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ServerStandIn)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


class Transport:
    """pyinfra's SSH transport as the loopback forward uses it: a channel to a port on the
    node's loopback, which here is this machine's."""

    def open_channel(self, kind, destination, origin):
        assert kind == "direct-tcpip" and destination[0] == "127.0.0.1"
        return socket.create_connection(destination, timeout=10)


def node_host(node: Node) -> FakeHost:
    host = FakeHost({fact("UnitStatus", unit="sglang.service"): {"active": "failed"}}, shell=node, executing=True)
    host.connector = SimpleNamespace(client=SimpleNamespace(get_transport=Transport))
    return host


def launch(host: FakeHost, port: int = 30000, timeout: int = 5, **kwargs) -> bool:
    """Run the readiness step's command as pyinfra's executor would; its status."""
    from pyinfra.context import ctx_host

    with ctx_host.use(host):
        (call,) = list(diagnosis.wait_until_serving._inner("sglang", port, "kimi-k2.6", timeout=timeout, **kwargs))
    return call.function(host.state, host, *call.args, **call.kwargs)


def launched(host: FakeHost) -> list[str]:
    """What ran, with each wait and each diagnosis named rather than spelled out."""
    def name(c):
        if "noderig-wait" in c:
            return "wait"
        return "diagnose" if c.startswith("inv=$(systemctl show -p InvocationID") else c
    return [name(c) for c in host.ran]


def logged(host: FakeHost) -> str:
    return "\n".join(host.logged)


# --------------------------------------------------------------------------------------------
# ready, smoke-tested, or diagnosed


def test_a_server_that_becomes_ready_is_smoke_tested_through_the_loopback_forward(server):
    host = node_host(Node([None]))
    assert launch(host, port=server) is True
    assert launched(host) == [READ_REPAIRS, "wait"]
    assert "sglang.service ready in " in logged(host) and "smoke request answered" in logged(host)


def test_a_ready_server_serving_another_model_name_fails(server, monkeypatch):
    monkeypatch.setattr(ServerStandIn, "served", "/models/Kimi-K2.6")
    host = node_host(Node([None]))
    assert launch(host, port=server) is False
    assert "sglang.service: /v1/models serves ['/models/Kimi-K2.6'], expected 'kimi-k2.6'" in logged(host)


def test_a_ready_server_that_refuses_the_smoke_request_fails():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = node_host(Node([None]))
    assert launch(host, port=port) is False
    assert "sglang.service is healthy but a smoke request failed" in logged(host)


def test_a_crash_without_repair_is_diagnosed_and_the_fix_offered(caplog):
    caplog.set_level(logging.ERROR, logger="pyinfra")
    host = node_host(Node([FLASH_ATTN]))
    assert launch(host, settings=server_settings(skip_server_warmup=False)) is False
    assert launched(host) == [READ_REPAIRS, "wait", "diagnose"]
    assert "sglang.service failed during startup after " in logged(host)
    assert "(result exit-code, status 137); diagnosis: flash_attn_cute_missing" in logged(host)
    assert ("the deploy can apply this fix itself: rerun with --data repair=true (skip the server warmup "
            "(--skip-server-warmup))") in logged(host)
    assert "fix: Relaunch with --skip-server-warmup" in caplog.text


def test_a_server_still_loading_when_the_wait_ends_is_not_called_a_crash():
    host = node_host(Node([STALLED]))
    assert launch(host, settings=server_settings(), repair=True) is False
    assert launched(host) == [READ_REPAIRS, "wait", "diagnose"], "nothing to repair in a slow start"
    (sentence,) = host.logged
    assert sentence.startswith("sglang.service is still starting after ")
    assert sentence.endswith(" s (process started, distributed initialised, loading weights, not yet ready): not "
                             "a crash, nothing in its log failed; wait, or raise ready_timeout")


def test_a_server_the_oom_killer_ended_while_loading_is_a_failure_named_by_systemds_lines(caplog):
    # its own lines show a load under way; systemd's, read with them, say how it ended; waiting for its restart
    # ("activating", "auto-restart") it is not "still starting"
    caplog.set_level(logging.ERROR, logger="pyinfra")
    host = node_host(Node([OOM_KILLED]))
    assert launch(host, settings=server_settings(), repair=True) is False
    assert launched(host) == [READ_REPAIRS, "wait", "diagnose"], "nothing the deploy can repair"
    assert "sglang.service failed during startup after " in logged(host)
    assert "(result oom-kill, status 9); diagnosis: host_oom" in logged(host)
    assert "has been killed by the OOM killer" in caplog.text and "still starting" not in logged(host)


def test_the_journal_read_is_the_invocations_own_and_systemds_lines_about_it():
    host = node_host(Node([OOM_KILLED]))
    launch(host, settings=server_settings())
    read = next(c for c in host.ran if c.startswith("inv=$(systemctl show -p InvocationID"))
    assert "journalctl --no-pager -o short-iso-precise _SYSTEMD_INVOCATION_ID=$inv + INVOCATION_ID=$inv ;" in read


# --------------------------------------------------------------------------------------------
# repairs: each remedy applied on the node, recorded, the unit re-rendered, relaunched


def test_a_flag_repair_is_recorded_rendered_and_relaunched_until_ready(server):
    host = node_host(Node([FLASH_ATTN, None]))
    assert launch(host, port=server, settings=server_settings(port=server, skip_server_warmup=False),
                  repair=True) is True
    assert launched(host) == [READ_REPAIRS, "wait", "diagnose", *atomic("/etc/noderig/repairs.json"), *atomic(UNIT),
                              "systemctl daemon-reload", RESTART, "wait"]
    (repair,) = json.loads(host.uploads["/etc/noderig/repairs.json.noderig-tmp"])["repairs"]
    assert {k: repair[k] for k in ("remedy", "settings", "packages")} == {
        "remedy": "add_flag:--skip-server-warmup", "settings": {"skip_server_warmup": True}, "packages": []}
    assert " --skip-server-warmup" in host.uploads[f"{UNIT}.noderig-tmp"]
    assert "repaired: skip the server warmup (--skip-server-warmup); relaunching sglang.service" in logged(host)


def test_a_missing_package_is_installed_without_touching_the_unit():
    host = node_host(Node([NO_HEADERS, FLASH_ATTN]))
    assert launch(host, settings=server_settings(), repair=True, max_repairs=1) is False
    update, apt = [c for c in host.ran if "apt-get" in c]
    # the same command the prerequisites step runs: lists refreshed, conffiles kept, no recommends
    assert update == " ".join(APT) + " update"
    assert apt == " ".join(APT) + (" install --no-install-recommends -o Dpkg::Options::=--force-confdef"
                                   " -o Dpkg::Options::=--force-confold python3-dev")
    assert launched(host).index(apt) == launched(host).index(update) + 1
    after = launched(host)[launched(host).index(apt) + 1:]
    assert after == [*atomic("/etc/noderig/repairs.json"), RESTART, "wait", "diagnose"]
    assert not any(c.startswith("upload -> " + UNIT) for c in host.ran)


def test_a_memory_fraction_is_lowered_from_the_one_set():
    host = node_host(Node([OOM, FLASH_ATTN]))
    launch(host, settings=server_settings(mem_fraction_static=0.97), repair=True, max_repairs=1)
    assert " --mem-fraction-static 0.89 " in host.uploads[f"{UNIT}.noderig-tmp"]
    assert "repaired: lower mem_fraction_static from 0.97 to 0.89" in logged(host)


def test_an_attention_backend_the_gpu_cannot_run_is_replaced_by_the_one_the_catalog_names():
    host = node_host(Node([NO_KERNEL, FLASH_ATTN]))
    launch(host, settings=server_settings(attention_backend="flashinfer"), repair=True, max_repairs=1)
    assert " --attention-backend triton " in host.uploads[f"{UNIT}.noderig-tmp"]
    assert "repaired: set attention_backend to triton" in logged(host)


def test_a_port_taken_moves_the_server_and_its_firewall_opening_to_the_next_free_port():
    host = node_host(Node([PORT_TAKEN, FLASH_ATTN], listening=(22, 30000, 30001)))
    launch(host, settings=server_settings(), repair=True, max_repairs=1, firewall=FirewallSettings(api_port=30000))
    assert " --port 30002 " in host.uploads[f"{UNIT}.noderig-tmp"]
    ruleset = host.uploads["/etc/noderig/firewall.nft.noderig-tmp"]
    assert "tcp dport 30002 accept" in ruleset and "dport 30000" not in ruleset
    tail = launched(host)[launched(host).index("ss -ltnH"):]
    assert tail == ["ss -ltnH", *atomic("/etc/noderig/repairs.json"), *atomic(UNIT), "systemctl daemon-reload",
                    *atomic("/etc/noderig/firewall.nft"), "/usr/sbin/nft -f /etc/noderig/firewall.nft", RESTART,
                    "wait", "diagnose"]
    assert "repaired: move the server from port 30000 to free port 30002" in logged(host)


def test_a_corrupt_checkpoint_that_re_verifies_clean_is_relaunched():
    host = node_host(Node([CORRUPT, FLASH_ATTN]))
    launch(host, settings=server_settings(), repair=True, max_repairs=1)
    ran = launched(host)
    forget = "test ! -L /models/Kimi-K2.6/.noderig && rm -f /models/Kimi-K2.6/.noderig/verified.json"
    verify = next(c for c in ran if "verify_files.py" in c)
    assert ran.index(forget) < ran.index(verify) and "/models/Kimi-K2.6/.noderig/manifest.json" in verify
    assert ran[ran.index(verify) + 1:] == [*atomic("/etc/noderig/repairs.json"), RESTART, "wait", "diagnose"]


def test_a_corrupt_checkpoint_with_damaged_files_is_not_relaunched_onto_them():
    host = node_host(Node([CORRUPT], damaged=["model-00002-of-000002.safetensors"]))
    assert launch(host, settings=server_settings(), repair=True) is False
    assert RESTART not in host.ran, "the server would load the same damaged file again"
    assert not any("repairs.json" in c for c in host.ran[1:]), "not complete: not recorded as applied"
    assert ("re-verification found damaged files: model-00002-of-000002.safetensors (sha256_mismatch); rerun the "
            "deploy to fetch them again") in logged(host)


# --------------------------------------------------------------------------------------------
# when the deploy does not repair


def test_a_fix_already_applied_is_not_applied_again_and_a_human_is_asked_for():
    recorded = {"repairs": [{"remedy": "add_flag:--skip-server-warmup", "settings": {"skip_server_warmup": True}}]}
    host = node_host(Node([FLASH_ATTN], recorded=recorded))
    assert launch(host, settings=server_settings(), repair=True) is False
    assert launched(host) == [READ_REPAIRS, "wait", "diagnose"]
    assert ("the fix for flash_attn_cute_missing (add_flag:--skip-server-warmup) was already applied and the server "
            "still fails: this needs a human") in logged(host)


def test_at_most_max_repairs_fixes_are_applied_in_one_run_and_the_stop_is_said():
    host = node_host(Node([FLASH_ATTN, NO_HEADERS, OOM]))
    assert launch(host, settings=server_settings(skip_server_warmup=False), repair=True, max_repairs=2) is False
    assert launched(host).count("wait") == 3 and host.ran.count(RESTART) == 2
    assert ("not applied: lower mem_fraction_static from 0.88 to 0.8 (max_repairs=2 fixes were applied in this run; "
            "rerun the deploy to apply it)") in logged(host)


def test_max_repairs_zero_diagnoses_and_applies_nothing():
    host = node_host(Node([FLASH_ATTN]))
    assert launch(host, settings=server_settings(skip_server_warmup=False), repair=True, max_repairs=0) is False
    assert launched(host) == [READ_REPAIRS, "wait", "diagnose"]
    assert ("not applied: skip the server warmup (--skip-server-warmup) (max_repairs=0 lets the deploy apply none; "
            "raise it to apply it)") in logged(host)


def test_a_crash_the_deploy_cannot_fix_is_only_diagnosed():
    host = node_host(Node(["nccl_failure/" + sorted(os.listdir(CRASHLOGS / "nccl_failure"))[0]]))
    assert launch(host, settings=server_settings(), repair=True) is False
    assert launched(host) == [READ_REPAIRS, "wait", "diagnose"]
    assert "diagnosis: nccl_failure" in logged(host) and "repaired" not in logged(host)


# --------------------------------------------------------------------------------------------
# the wait on the node: its timeout under a controlled clock

# Stand-ins for the node's tools: a clock that moves only when the script sleeps, a server
# that answers $CODES in turn (then the last one for ever), a unit in $STATE/$SUB.
CLOCK_TOOLS = {
    "date": 'cat "$CLOCK_FILE"\n',
    "sleep": 'echo $(( $(cat "$CLOCK_FILE") + 1 )) > "$CLOCK_FILE.new" && mv "$CLOCK_FILE.new" "$CLOCK_FILE"\n'
             'echo x >> "$POLLS_FILE"\n',
    "curl": 'n=$(wc -l < "$POLLS_FILE"); set -- $CODES; shift $(( n < $# ? n : $# - 1 )); printf %s "$1"\n',
    "systemctl": 'case "$*" in *ActiveState*) echo "$STATE" ;; *SubState*) echo "$SUB" ;; esac\n',
}


def wait_command(timeout: int) -> str:
    """The wait the readiness step runs on the node for ``timeout`` (ready_timeout)."""
    host = node_host(Node([STALLED]))
    launch(host, timeout=timeout)
    return next(c for c in host.ran if "noderig-wait" in c)


def run_wait(tmp_path, timeout: int, codes: str, state="activating", sub="start") -> tuple[int, int, int]:
    """(exit status, seconds on the controlled clock, polls) of the node-side wait."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, script in CLOCK_TOOLS.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + script)
        (bin_dir / name).chmod(0o755)
    clock, polls = tmp_path / "clock", tmp_path / "polls"
    clock.write_text("1000\n")
    polls.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CLOCK_FILE": str(clock), "POLLS_FILE": str(polls),
           "CODES": codes, "STATE": state, "SUB": sub}
    # The timeout here only guards against a loop that never ends; the clock is the stand-in's.
    res = subprocess.run(["sh", "-c", wait_command(timeout)], env=env, capture_output=True, text=True, timeout=60)
    return res.returncode, int(clock.read_text()) - 1000, len(polls.read_text().splitlines())


def test_the_wait_gives_up_when_ready_timeout_has_passed_on_the_node_s_clock(tmp_path):
    status, waited, polls = run_wait(tmp_path, timeout=30, codes="503")
    assert status == 2, "2: not ready in time"
    assert waited == 30 and polls == 30, "polled until the deadline, not a poll less or more"


def test_the_wait_ends_as_soon_as_health_answers_200(tmp_path):
    assert run_wait(tmp_path, timeout=30, codes="000 503 503 200") == (0, 3, 3)


@pytest.mark.parametrize("state,sub", [("failed", "failed"), ("inactive", "dead"), ("activating", "auto-restart")])
def test_the_wait_ends_at_once_when_the_unit_died(tmp_path, state, sub):
    assert run_wait(tmp_path, timeout=30, codes="000", state=state, sub=sub) == (3, 0, 0)
