"""Step 6, readiness and diagnosis: wait for the server, smoke-test it, explain a failed launch."""

from __future__ import annotations

import json
import time
import urllib.request

from pyinfra import host, logger
from pyinfra.api import operation
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand

from noderig.manifest import read_private

from .facts import HttpStatus, UnitStatus
from .tunnel import LoopbackForward

# Runs on the node: poll /health until 200, or until the unit is no longer starting/running
# (a unit that dies right after start is a failure, not a success). Exit 0 ready, 3 died, 2 timeout.
WAIT_SCRIPT = r"""
unit="$1"; url="$2"; timeout="$3"; end=$(( $(date +%s) + timeout ))
while [ "$(date +%s)" -lt "$end" ]; do
  code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" || true)
  [ "$code" = 200 ] && exit 0
  state=$(systemctl show -p ActiveState --value "$unit"); sub=$(systemctl show -p SubState --value "$unit")
  case "$state/$sub" in failed/*|inactive/*|activating/auto-restart) exit 3 ;; esac
  sleep 0.25
done
exit 2
"""


@operation(is_idempotent=True)
def ready(service: str, port: int, served_model_name: str, timeout: int = 1800, journal_lines: int = 40,
          api_key_file: str | None = None):
    """
    Wait until the server answers ``/health``, then send one smoke request (``/generate``,
    one token) and check ``/v1/models`` serves ``served_model_name``. A server already up
    and healthy is left alone. When the launch fails, show that invocation's journal.

    + service: systemd unit name (without ``.service``)
    + port: the server's port on the node
    + served_model_name: the name ``/v1/models`` must report
    + timeout: seconds to wait for readiness
    + journal_lines: how many lines of the failed invocation's journal to show
    + api_key_file: the server's API key (0600 file on the controller) for the smoke request
    """
    base = f"http://127.0.0.1:{port}"
    status = host.get_fact(UnitStatus, unit=f"{service}.service")
    if status["active"] == "active" and host.get_fact(HttpStatus, url=f"{base}/health") == 200:
        host.noop(f"{service} is up and healthy on port {port}")
        return
    yield FunctionCommand(_wait_and_smoke, (service, port, served_model_name, timeout, journal_lines,
                                            api_key_file), {})


def _wait_and_smoke(state, host, service: str, port: int, served_model_name: str, timeout: int,
                    journal_lines: int, api_key_file: str | None) -> bool:
    unit = f"{service}.service"
    t0 = time.monotonic()
    ok, _ = host.run_shell_command(StringCommand(
        "sh", "-c", QuoteString(WAIT_SCRIPT), "noderig-wait", QuoteString(unit),
        QuoteString(f"http://127.0.0.1:{port}/health"), str(timeout)), _timeout=timeout + 30)
    if not ok:
        _show_failed_invocation(host, unit, journal_lines, time.monotonic() - t0, timeout)
        return False
    waited = time.monotonic() - t0
    # The smoke requests go from the controller through the SSH connection, so the API key
    # stays in the controller's memory (no curl argv on the node).
    headers = {"Content-Type": "application/json"}
    if api_key_file:
        headers["Authorization"] = f"Bearer {read_private(api_key_file, 'API key')}"
    try:
        with LoopbackForward(host, port) as fwd:
            base = f"http://127.0.0.1:{fwd.port}"
            body = json.dumps({"text": "ping", "sampling_params": {"max_new_tokens": 1}}).encode()
            _http(f"{base}/generate", headers, body)
            served = [m.get("id") for m in json.loads(_http(f"{base}/v1/models", headers)).get("data", [])]
    except OSError as e:
        host.log_styled(f"{unit} is healthy but a smoke request failed: {e}", fg="red", log_func=logger.error)
        return False
    if served_model_name not in served:
        host.log_styled(f"{unit}: /v1/models serves {served}, expected {served_model_name!r}", fg="red",
                        log_func=logger.error)
        return False
    host.log_styled(f"{unit} ready in {waited:.1f} s; smoke request answered", fg="green", log_func=logger.info)
    return True


def _http(url: str, headers: dict, body: bytes | None = None) -> bytes:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body else "GET")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read()


def _show_failed_invocation(host, unit: str, lines: int, waited: float, timeout: int) -> None:
    """Only the journal of the latest invocation: older runs' errors would mislead."""
    _, out = host.run_shell_command(StringCommand(
        "inv=$(systemctl show -p InvocationID --value", QuoteString(unit), ");",
        "journalctl", "--no-pager", "-o", "cat", "_SYSTEMD_INVOCATION_ID=$inv", "|", "tail", "-n", str(lines)))
    what = "did not become ready" if waited >= timeout else "failed during startup"
    host.log_styled(f"{unit} {what} after {waited:.1f} s; its journal (this invocation):", fg="red",
                    log_func=logger.error)
    for line in out.stdout_lines:
        logger.error(f"    {line}")
