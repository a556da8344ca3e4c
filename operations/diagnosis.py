"""Step 6, readiness and diagnosis: wait for the server, smoke-test it, explain a failed launch."""

from __future__ import annotations

import io
import json
import time
import urllib.request
from dataclasses import asdict, replace

from pyinfra import host, logger
from pyinfra.api.command import FunctionCommand, QuoteString, StringCommand

from noderig.checkpoint_plan import MANIFEST_FILE, RECORD_FILE, STATE_DIR
from noderig.errors import QUOTED_LINE_LIMIT, one_line
from noderig.firewall import RULESET_FILE, load_script, render_table
from noderig.repair import REPAIRS_FILE, manual_reason, plan_repair
from noderig.secret_files import read_private
from noderig.service_plan import RUNNING
from noderig.unit import render_unit

from .checkpoint import verifier_command
from .firewall import load_command
from .facts import HttpStatus, UnitStatus
from .packages import install_commands
from .service import unit_path
from .tunnel import LoopbackForward
from .util import operation, put_atomic

RESULT_MARK = "--- noderig: unit result ---"

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
def wait_until_serving(service: str, port: int, served_model_name: str, timeout: int = 1800,
                       api_key_file: str | None = None, settings=None, repair: bool = False, max_repairs: int = 2,
                       firewall=None):
    """
    Wait until the server answers ``/health``, then send one smoke request (``/generate``,
    one token) and check ``/v1/models`` serves ``served_model_name``. A server already up
    and healthy is left alone. When the launch fails, diagnose that invocation's journal
    (root cause, evidence, call chain, fix) and, with ``repair``, apply the fix and relaunch.

    + service: systemd unit name (without ``.service``)
    + port: the server's port on the node
    + served_model_name: the name ``/v1/models`` must report
    + timeout: seconds to wait for readiness
    + api_key_file: the server's API key (0600 file on the controller) for the smoke request
    + settings: the server settings the unit was rendered from (repairs re-render it)
    + repair: apply the diagnosed remedy when the deploy can (recorded on the node), relaunch
    + max_repairs: at most this many repairs in one run; a remedy is never applied twice
    + firewall: the node firewall's settings (a repair that moves the port moves it there too)
    """
    base = f"http://127.0.0.1:{port}"
    status = host.get_fact(UnitStatus, unit=f"{service}.service")
    if status["active"] == "active" and host.get_fact(HttpStatus, url=f"{base}/health") == 200:
        host.noop(f"{service} is up and healthy on port {port}")
        return
    yield FunctionCommand(_launch_until_ready, (service, port, served_model_name, timeout, api_key_file,
                                                settings, repair, max_repairs, firewall), {})


def _launch_until_ready(state, host, service: str, port: int, served_model_name: str, timeout: int,
                        api_key_file: str | None, settings, repair: bool, max_repairs: int, firewall=None) -> bool:
    """Wait for readiness; on a failed launch diagnose it, and with ``repair`` apply the remedy
    and relaunch, at most ``max_repairs`` times and never the same remedy twice."""
    unit = f"{service}.service"
    recorded = _read_repairs(host)
    applied = [r["remedy"] for r in recorded.get("repairs", [])]
    for attempt in range(max_repairs + 1):
        port = settings.port if settings is not None else port
        t0 = time.monotonic()
        ok, _ = host.run_shell_command(StringCommand(
            "sh", "-c", QuoteString(WAIT_SCRIPT), "noderig-wait", QuoteString(unit),
            QuoteString(f"http://127.0.0.1:{port}/health"), str(timeout)), _timeout=timeout + 30)
        if ok:
            return _smoke(host, unit, port, served_model_name, api_key_file, time.monotonic() - t0)
        d = _diagnose_failed_invocation(host, unit, time.monotonic() - t0, timeout)
        plan = plan_repair(d.remedy, asdict(settings) if settings else {}, applied) if d else None
        if not repair or plan is None or attempt == max_repairs or settings is None:
            if d and d.remedy and plan is not None and not repair:
                host.log_styled(f"the deploy can apply this fix itself: rerun with --data repair=true "
                                f"({plan.description})", fg="yellow", log_func=logger.warning)
            elif d and d.remedy in applied:
                host.log_styled(f"the fix for {d.cls} ({d.remedy}) was already applied and the server still "
                                "fails: this needs a human", fg="red", log_func=logger.error)
            elif plan is not None and attempt == max_repairs:
                # Say why a fix the deploy knows was not applied, instead of stopping silently.
                limit = (f"max_repairs={max_repairs} fixes were applied in this run; rerun the deploy to apply it"
                         if max_repairs else "max_repairs=0 lets the deploy apply none; raise it to apply it")
                host.log_styled(f"not applied: {plan.description} ({limit})", fg="red", log_func=logger.error)
            elif d and plan is None and d.cls not in ("healthy", "unknown") and manual_reason(d.remedy):
                host.log_styled(f"the fix for {d.cls} is manual: {manual_reason(d.remedy)}", fg="red",
                                log_func=logger.error)
            return False
        settings = _apply_repair(host, unit, settings, plan, recorded, firewall)
        if settings is None:  # the fix is not complete on the node: relaunching would crash the same way
            return False
        applied.append(plan.remedy)
        host.log_styled(f"repaired: {plan.description}; relaunching {unit}", fg="yellow", log_func=logger.warning)
    return False


def _read_repairs(host) -> dict:
    _, out = host.run_shell_command(StringCommand("cat", REPAIRS_FILE, "2>/dev/null", "||", "true"))
    try:
        return json.loads("\n".join(out.stdout_lines)) if out.stdout_lines else {"repairs": []}
    except ValueError:
        return {"repairs": []}


def _apply_repair(host, unit: str, settings, plan, recorded: dict, firewall=None):
    """Apply a planned repair on the node, record it, re-render the unit, restart; the settings
    now in force, or None when the repair could not be completed (nothing recorded, no restart)."""
    if plan.packages:
        for command in install_commands(plan.packages):  # the packages step's own commands
            ok, out = host.run_shell_command(command)
            if not ok:
                break
        if not ok:
            host.log_styled(f"repair failed: could not install {plan.packages}: {out.stderr}", fg="red",
                            log_func=logger.error)
    if plan.forget_verified:
        # Hash every file again now; bad files are named and left for the checkpoint step.
        # (never through a symlinked state directory: the verifier neither reads nor writes a record there)
        host.run_shell_command(StringCommand("test", "!", "-L", QuoteString(f"{settings.model_dir}/{STATE_DIR}"), "&&",
                                             "rm", "-f", QuoteString(f"{settings.model_dir}/{RECORD_FILE}")))
        ok, out = host.run_shell_command(verifier_command(f"{settings.model_dir}/{MANIFEST_FILE}", settings.model_dir))
        if not ok:
            bad = [f"{f['file']} ({f['status']})" for f in _last_json(out.stdout_lines).get("files", [])
                   if f["status"] != "ok"]
            host.log_styled(f"re-verification found damaged files: {', '.join(bad) or out.stderr}; rerun the "
                            "deploy to fetch them again", fg="red", log_func=logger.error)
            return None  # the server would load the same damaged files: the checkpoint step fetches them
    if plan.settings.get("port", 0) is None:
        plan.settings["port"] = _free_port(host, settings.port)
        plan.description = f"move the server from port {settings.port} to free port {plan.settings['port']}"
    if plan.settings:
        settings = replace(settings, **plan.settings)
    recorded.setdefault("repairs", []).append(
        {"remedy": plan.remedy, "description": plan.description, "settings": plan.settings,
         "packages": plan.packages, "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    put_atomic(host, REPAIRS_FILE, io.StringIO(json.dumps(recorded, indent=1) + "\n"))
    if plan.settings:
        put_atomic(host, unit_path(settings.service_name), io.StringIO(render_unit(settings)))
        host.run_shell_command(StringCommand("systemctl", "daemon-reload"))
    if firewall is not None and firewall.api_port != settings.port:
        # The API port moved: the firewall opens the new one (and closes the old).
        ruleset = load_script(render_table(replace(firewall, api_port=settings.port)))
        put_atomic(host, RULESET_FILE, io.StringIO(ruleset))
        host.run_shell_command(load_command())  # (loaded by the deploy's firewall step)
    host.run_shell_command(StringCommand("systemctl", "reset-failed", QuoteString(unit), ";",
                                         "systemctl", "restart", QuoteString(unit)))
    return settings


def _free_port(host, taken: int) -> int:
    _, out = host.run_shell_command(StringCommand("ss", "-ltnH"))
    used = set()
    for line in out.stdout_lines:
        fields = line.split()
        if len(fields) >= 4 and fields[3].rsplit(":", 1)[-1].isdigit():
            used.add(int(fields[3].rsplit(":", 1)[-1]))
    port = taken + 1
    while port in used:
        port += 1
    return port


def _last_json(lines: list[str]) -> dict:
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {}


def _smoke(host, unit: str, port: int, served_model_name: str, api_key_file: str | None, waited: float) -> bool:
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


def _diagnose_failed_invocation(host, unit: str, waited: float, timeout: int):
    """Read the journal of the failed invocation only (older runs' errors would mislead), name
    the root cause with the catalog, and print the report; returns the Diagnosis. The invocation's
    journal is the server's lines and systemd's own about it (INVOCATION_ID=, which `journalctl -u`
    shows too): only systemd says that the kernel's OOM killer ended the server."""
    _, out = host.run_shell_command(StringCommand(
        "inv=$(systemctl show -p InvocationID --value", QuoteString(unit), ");",
        "journalctl", "--no-pager", "-o", "short-iso-precise", "_SYSTEMD_INVOCATION_ID=$inv", "+",
        "INVOCATION_ID=$inv", ";",
        "echo", QuoteString(RESULT_MARK), ";",
        "systemctl", "show", "-p", "Result", "-p", "ExecMainCode", "-p", "ExecMainStatus", "-p", "ActiveState",
        "-p", "SubState", QuoteString(unit), ";",
        "journalctl", "--no-pager", "-o", "json", "-n", "1", "_SYSTEMD_INVOCATION_ID=$inv",
        "--output-fields=__REALTIME_TIMESTAMP"))
    lines = out.stdout_lines
    cut = lines.index(RESULT_MARK) if RESULT_MARK in lines else len(lines)
    journal, tail = lines[:cut], lines[cut + 1:]
    result = dict(line.split("=", 1) for line in tail if "=" in line and not line.startswith("{"))
    crashed_at = None
    for line in tail:
        if line.startswith("{"):
            crashed_at = int(json.loads(line).get("__REALTIME_TIMESTAMP", 0)) / 1e6 or None
    # (imported here, when a launch failed: the catalog's modules cost every converged rerun ~0.07 s)
    import noderig.diagnose as diagnosis_core

    try:
        d = diagnosis_core.diagnose("\n".join(journal))
    except Exception as e:  # noqa: BLE001 - noderig's bug on the server's text: the launch still failed
        why = diagnosis_core.not_diagnosed(e, f"journalctl -u {unit}")
        host.log_styled(f"{unit} did not become ready after {waited:.1f} s (result {result.get('Result', '?')}); "
                        f"its journal could not be diagnosed: {why}", fg="red", log_func=logger.error)
        return None
    # a server that died and waits for its restart is "activating" too: its SubState says it is no longer running
    running = result.get("ActiveState") in RUNNING and result.get("SubState") != "auto-restart"
    if d.healthy and running:  # still starting: slow, not crashed (and nothing to repair)
        host.log_styled(f"{unit} is still starting after {waited:.1f} s ({d.stage}): not a crash, nothing in its "
                        "log failed; wait, or raise ready_timeout", fg="red", log_func=logger.error)
        return d
    latency = time.time() - crashed_at if crashed_at else None
    what = "did not become ready" if waited >= timeout or running else "failed during startup"
    found = f"no failure in its log ({d.stage})" if d.healthy else d.cls
    host.log_styled(
        f"{unit} {what} after {waited:.1f} s (result {result.get('Result', '?')}, "
        f"status {result.get('ExecMainStatus', '?')}); diagnosis: {found}"
        + (f" (printed {latency:.2f} s after the crash reached the journal)" if latency is not None else ""),
        fg="red", log_func=logger.error)
    for line in report_lines(d):
        logger.error(f"    {line}")
    return d


def report_lines(d) -> list[str]:
    """The readable report as plain lines (pyinfra's output is line-oriented). The cause and the
    evidence quote the server's log, which may quote a client's request: each goes out as one line
    with its control characters escaped (``one_line``), never as codes the operator's terminal runs."""
    lines = [f"cause: {one_line(d.cause, QUOTED_LINE_LIMIT)}"]
    for e in d.evidence[:8]:
        lines.append(f"evidence{f' [{e.rank}]' if e.rank else ''}: {one_line(e.line, QUOTED_LINE_LIMIT)}")
    if d.chain:
        lines.append("call chain: " + " -> ".join(d.chain))
    if d.cls != "healthy":
        lines.append(f"fix: {d.fix}")
    return lines
