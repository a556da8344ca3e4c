"""The rendered unit and environment file, checked by systemd's own verifier and by parsing them
back the way systemd does; and the launcher the unit runs, with the stand-in server."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
import unicodedata
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from noderig.errors import NoderigError
from noderig.node import script_path
from noderig.server_settings import SPECULATIVE_MODES, ServerSettings, validate
from noderig.unit import render_env, render_unit, server_argv, start_limit_interval
from noderig_lab import STANDIN_SOURCE as STANDIN

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = script_path("launch.py")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def settings_for(**kw) -> ServerSettings:
    base = dict(venv="/opt/sglang/venv", model_dir="/models/Kimi-K2.6", served_model_name="kimi-k2.6",
                draft_dir="/models/Kimi-K2.6-DFlash", attention_backend="flashinfer")
    return ServerSettings(**{**base, **kw})


# --- reading the files back the way systemd does -------------------------------------------------


def parse_unit(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) per assignment; comments and blank lines skipped."""
    section, out = "", []
    for line in text.split("\n"):
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        assert not s.endswith("\\"), f"continuation line: {line!r}"
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            continue
        name, eq, value = s.partition("=")
        assert eq, f"not an assignment: {line!r}"
        out.append((section, name.strip(), value.strip()))
    return out


def directive(text: str, name: str) -> str:
    values = [v for _, k, v in parse_unit(text) if k == name]
    assert len(values) == 1, (name, values)
    return values[0]


def _unescape(word: str, char: str, what: str) -> str:
    """Undo the doubling of ``char``; any other use of it would expand."""
    out, i = [], 0
    while i < len(word):
        if word[i] == char:
            assert word[i + 1:i + 2] == char, f"{what} would expand in {word!r}"
            out.append(char)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


def resolve_specifiers(word: str) -> str:
    """systemd's %-specifiers: noderig's values must contain only the escape %%."""
    return _unescape(word, "%", "specifier")


def resolve_variables(word: str) -> str:
    """ExecStart='s $-expansion at start time: only the escape $$ may appear."""
    return _unescape(word, "$", "variable")


ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "s": " "}


def exec_words(value: str) -> list[str]:
    """Split an ExecStart= value like systemd: words separated by whitespace, double or single
    quotes, C escapes; then specifiers per word; then $-expansion (at start time)."""
    words, i, n = [], 0, len(value)
    while True:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        assert not (value[i] == ";" and (i + 1 == n or value[i + 1] in " \t")), "a bare ; separates commands"
        word = []
        while i < n and value[i] not in " \t":
            ch = value[i]
            if ch in "\"'":
                i += 1
                while True:
                    assert i < n, f"unterminated quote in {value!r}"
                    if value[i] == ch:
                        i += 1
                        break
                    if value[i] == "\\":
                        assert value[i + 1] in ESCAPES, f"unexpected escape in {value!r}"
                        word.append(ESCAPES[value[i + 1]])
                        i += 2
                    else:
                        word.append(value[i])
                        i += 1
            elif ch == "\\":
                assert value[i + 1] in ESCAPES
                word.append(ESCAPES[value[i + 1]])
                i += 2
            else:
                word.append(ch)
                i += 1
        words.append("".join(word))
    return [resolve_variables(resolve_specifiers(w)) for w in words]


def parse_env_file(text: str) -> dict[str, str]:
    """systemd's EnvironmentFile= parser (src/basic/env-file.c), as a state machine."""
    env: dict[str, str] = {}
    state, key, value, trailing_ws = "pre_key", "", "", None
    def push():
        nonlocal key, value
        env[key.rstrip()] = value
        key, value = "", ""
    for ch in text + "\n":
        if state == "pre_key":
            if ch in "#;":
                state = "comment"
            elif not ch.isspace():
                state, key = "key", ch
        elif state == "key":
            if ch in "\n\r":
                state, key = "pre_key", ""
            elif ch == "=":
                state, value = "pre_value", ""
            else:
                key += ch
        elif state == "pre_value":
            if ch in "\n\r":
                push()
                state = "pre_key"
            elif ch == "'":
                state = "single"
            elif ch == '"':
                state = "double"
            elif ch == "\\":
                state = "value_escape"
            elif ch not in " \t":
                state, value, trailing_ws = "value", value + ch, None
        elif state == "value":
            if ch in "\n\r":
                if trailing_ws is not None:
                    value = value[:trailing_ws]
                push()
                state = "pre_key"
            elif ch == "\\":
                state, trailing_ws = "value_escape", None
            else:
                if not ch.isspace():
                    trailing_ws = None
                elif trailing_ws is None:
                    trailing_ws = len(value)
                value += ch
        elif state == "value_escape":
            state = "value"
            if ch not in "\n\r":
                value += ch
        elif state == "single":
            if ch == "'":
                state = "pre_value"
            else:
                value += ch
        elif state == "double":
            if ch == '"':
                state = "pre_value"
            elif ch == "\\":
                state = "double_escape"
            else:
                value += ch
        elif state == "double_escape":
            state = "double"
            if ch in '"\\`$':
                value += ch
            elif ch != "\n":
                value += "\\" + ch
        elif state == "comment":
            if ch in "\n\r":
                state = "pre_key"
    return env


# --- systemd-analyze verify ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verify_root(tmp_path_factory) -> Path:
    """A root for `systemd-analyze verify --root=DIR`: the host's targets (the unit's dependencies)
    under DIR/usr/lib/systemd/system, the unit under DIR/etc/systemd/system (lab NOTES section 4)."""
    if SYSTEMD_ANALYZE is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd), so units cannot be verified")
    source = next((d for d in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system"))
                   if (d / "sysinit.target").exists()), None)
    if source is None:
        pytest.skip("no systemd unit directory with sysinit.target on this machine to verify against")
    root = tmp_path_factory.mktemp("verify-root")
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    for target in source.glob("*.target"):
        shutil.copy(target, root / "usr/lib/systemd/system" / target.name)
    (root / "etc/systemd/system").mkdir(parents=True)
    return root


def systemd_verify(root: Path, s: ServerSettings, text: str) -> tuple[int, str]:
    """rc and every line systemd-analyze printed (warnings come with rc 0: any output fails)."""
    name = f"{s.service_name}.service"
    (root / "etc/systemd/system" / name).write_text(text)
    python = root / s.venv.lstrip("/") / "bin" / "python"  # the ExecStart binary, as an executable stub
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    out = subprocess.run([SYSTEMD_ANALYZE, "verify", f"--root={root}", name], capture_output=True, text=True,
                         timeout=30)
    return out.returncode, (out.stdout + out.stderr).strip()


def test_verify_catches_a_bad_unit(verify_root):
    """The harness itself: a typo is a warning (rc 0) and must show up as output."""
    s = settings_for(service_name="typo")
    rc, output = systemd_verify(verify_root, s, render_unit(s).replace("Type=exec", "Type=exec\nTypo=1"))
    assert rc == 0 and "Unknown key 'Typo'" in output


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
@pytest.mark.parametrize("mode", SPECULATIVE_MODES)
def test_each_mode_and_version_profile_renders_a_unit_systemd_accepts(verify_root, mode, version):
    extra = {"ddtree_budget": 32} if mode == "ddtree" else {}
    s = settings_for(speculative=mode, sglang_version=version, cuda_graph_max_bs=64, disable_cuda_graph=True,
                     draft_dir=None if mode == "none" else "/models/Kimi-K2.6-DFlash",
                     service_name=f"sglang-{mode}-{version}", **extra)
    text = render_unit(s)
    assert systemd_verify(verify_root, s, text) == (0, "")
    words = exec_words(directive(text, "ExecStart"))
    assert words == server_argv(s)
    joined = " ".join(words)
    if version == "0.5.9":
        assert "--cuda-graph-max-bs 64" in joined and "--disable-cuda-graph" in words
    else:
        assert "--cuda-graph-max-bs-decode 64" in joined and "--cuda-graph-backend-prefill disabled" in joined
        assert "--disable-cuda-graph" not in words and "--cuda-graph-max-bs" not in words
    algorithm = {"ddtree": "DDTREE", "ddtree-dflash": "DFLASH", "dflash": "DFLASH", "eagle3": "EAGLE3"}.get(mode)
    assert (f"--speculative-algorithm {algorithm}" in joined) == (algorithm is not None)


def test_unit_directives():
    s = settings_for(start_timeout=2400, stop_timeout=90, service_name="kimi")
    text = render_unit(s)
    d = {k: v for _, k, v in parse_unit(text)}
    assert d["Type"] == "exec" and d["KillMode"] == "control-group" and d["LimitMEMLOCK"] == "infinity"
    assert d["EnvironmentFile"] == "/etc/noderig/kimi.env"  # required: no leading "-"
    assert d["TimeoutStartSec"] == "2400" and d["TimeoutStopSec"] == "90" and d["LimitNOFILE"] == "1048576"
    assert d["Restart"] == "on-failure" and d["SyslogIdentifier"] == "kimi"
    assert int(d["StartLimitIntervalSec"]) == start_limit_interval(s) > int(d["StartLimitBurst"]) * (2400 + 30)
    assert d["Environment"] == "NODERIG_LAUNCH_KILLMODE=control-group"
    assert d["RuntimeDirectory"] == "noderig-kimi" and d["RuntimeDirectoryMode"] == "0700"
    assert exec_words(d["ExecStart"])[:2] == ["/opt/sglang/venv/bin/python", "/usr/local/lib/noderig/launch.py"]
    assert "api" not in d["ExecStart"].lower() and "token" not in d["ExecStart"].lower()


# --- hostile inventory values ----------------------------------------------------------------------

FRAGMENTS = [" ", "  ", '"', "'", ";", " ; ", "$(", ")", "$(reboot)", "`id`", "%n", "%", "%%", "$VAR", "${VAR}",
             "$$", "\\", "\\n", "\n", "\n[Service]\nExecStartPre=/bin/evil", "\r", "\t", "\x00", "ü", "€", "😀",
             "\u2028", "-", "--", "=", "/", "#", "[", "]", "&&", "|", ">", "*"]
hostile_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS),
                                  st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)),
                        min_size=1, max_size=6).map("".join)
DIRECTIVES = [(section, name) for section, name, _ in parse_unit(render_unit(settings_for()))]
# The same without line breaks and control characters: what validation lets through.
printable_hostile = st.lists(st.one_of(
    st.sampled_from([f for f in FRAGMENTS if not any(unicodedata.category(c) in ("Cc", "Zl") for c in f)]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=6)),
    min_size=1, max_size=6).map("".join)


def has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=st.lists(hostile_text, max_size=4))
def test_hostile_extra_flags_are_refused_or_mean_exactly_what_was_asked(words):
    s = settings_for(extra_flags=words)
    problems = validate(s)
    if any(has_control(w) for w in words):
        assert problems and all("extra_flags[" in p for p in problems)
    if problems:
        assert all("extra_flags[" in p for p in problems)
        with pytest.raises(NoderigError):
            render_unit(s)
        return
    text = render_unit(s)
    assert [(sec, name) for sec, name, _ in parse_unit(text)] == DIRECTIVES  # nothing injected
    words_back = exec_words(directive(text, "ExecStart"))
    assert words_back == server_argv(s) and words_back[-len(words) or len(words_back):] == (words or [])


TOKEN_FIELDS = ["served_model_name", "host", "reasoning_parser", "tool_call_parser", "attention_backend",
                "mm_attention_backend", "model_dir", "draft_dir", "venv", "dist_init_addr", "service_name",
                "sglang_version", "env_file"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(field="served_model_name", value="0\n")  # "$" matched before the newline once
@given(field=st.sampled_from(TOKEN_FIELDS), value=hostile_text)
def test_hostile_setting_values_are_refused_with_their_key_or_quoted(field, value):
    s = settings_for(**{field: value})
    problems = validate(s)
    if problems:
        key = {"venv": "venv_path", "host": "server_host"}.get(field, field)
        assert any(key in p for p in problems), problems
        with pytest.raises(NoderigError):
            render_unit(s)
        return
    assert not has_control(value)
    text = render_unit(s)
    assert [(sec, name) for sec, name, _ in parse_unit(text)] == DIRECTIVES
    assert exec_words(directive(text, "ExecStart")) == server_argv(s)
    description = resolve_specifiers(directive(text, "Description"))
    assert description == f"SGLang server for {s.served_model_name} (noderig)"


SAMPLES = ["a b", 'say "hi"', "it's", "x; /bin/evil", "$(reboot)", "`id`", "%n%i%%", "$HOME", "${HOME}", "$$",
           "back\\slash", "ünïcødé 😀", '--chat-template={"a": "$x"}', ";", "\\;", "-", ""]


def test_hostile_values_pass_systemd_analyze_without_a_warning(verify_root):
    s = settings_for(service_name="hostile", extra_flags=SAMPLES)
    text = render_unit(s)
    assert systemd_verify(verify_root, s, text) == (0, "")
    assert exec_words(directive(text, "ExecStart"))[-len(SAMPLES):] == SAMPLES


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(words=st.lists(printable_hostile, min_size=1, max_size=3))
def test_a_sample_of_hostile_renders_passes_systemd_analyze(verify_root, words):
    s = settings_for(service_name="sample", extra_flags=words)
    assume(not validate(s))  # (a word that repeats a rendered flag, like --port, is refused instead)
    assert systemd_verify(verify_root, s, render_unit(s)) == (0, "")


@pytest.mark.parametrize("field, value", [
    ("served_model_name", "kimi\n[Service]\nExecStartPre=/bin/evil"), ("extra_flags", ["--x\n[Service]"]),
    ("model_dir", "/models/x\nUser=root"), ("environment", {"X": "1\nNODERIG_API_KEY=stolen"}),
])
def test_line_breaks_never_reach_a_file(field, value):
    s = settings_for(**{field: value})
    assert validate(s)
    with pytest.raises(NoderigError):
        render_unit(s)
    if field == "environment":
        with pytest.raises(NoderigError, match="server_environment"):
            render_env(s, {})


# --- the environment file --------------------------------------------------------------------------

env_names = st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,12}\Z").filter(
    lambda n: n not in ("NODERIG_API_KEY", "NODERIG_HF_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                        "HF_TOKEN_PATH", "PYTHONUNBUFFERED"))
secret_text = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e,
                                             blacklist_characters="\"'\\"), min_size=8, max_size=64)


@settings(max_examples=200, deadline=None)
@given(environment=st.dictionaries(env_names, hostile_text, max_size=4), api_key=st.none() | secret_text,
       hf_token=st.none() | secret_text)
def test_env_file_round_trips_through_systemds_parser(environment, api_key, hf_token):
    s = settings_for(environment=environment)
    secrets = {"api_key": api_key, "hf_token": hf_token}
    if any(has_control(v) for v in environment.values()):
        with pytest.raises(NoderigError, match="server_environment"):
            render_env(s, secrets)
        return
    parsed = parse_env_file(render_env(s, secrets))
    expected = {"PYTHONUNBUFFERED": "1", **environment}
    if api_key:
        expected["NODERIG_API_KEY"] = api_key
    if hf_token:
        expected["NODERIG_HF_TOKEN"] = hf_token
    assert parsed == expected


@pytest.mark.parametrize("secret", ["q7Zx", "has space inside", 'quote"d-secret', "line\nbreak-secret",
                                    "back\\slash-secret", "ünicode-secret"])
def test_bad_secrets_are_refused_without_quoting_them(secret):
    with pytest.raises(NoderigError) as err:
        render_env(settings_for(), {"api_key": secret})
    assert "api_key" in str(err.value) and secret not in str(err.value)
    with pytest.raises(NoderigError, match="not one noderig knows"):
        render_env(settings_for(), {"password": "x" * 10})


# --- the launcher ----------------------------------------------------------------------------------


def write_checkpoint(root: Path, vision: bool) -> Path:
    """The smallest checkpoint the stand-in loads: config.json, one real safetensors shard, index."""
    root.mkdir(parents=True)
    config = {"architectures": ["KimiK25ForConditionalGeneration" if vision else "DeepseekV3ForCausalLM"],
              "model_type": "kimi_k25", "text_config": {"model_type": "kimi_k2", "num_hidden_layers": 2,
                                                        "vocab_size": 1000, "max_position_embeddings": 4096}}
    if vision:
        config["vision_config"] = {"hidden_size": 64}
    (root / "config.json").write_text(json.dumps(config))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    header += b" " * (-len(header) % 8)
    (root / "model-00001-of-00001.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 8}, "weight_map": {"w": "model-00001-of-00001.safetensors"}}))
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Launched:
    def __init__(self, tmp_path: Path, args: list[str], env: dict):
        self.out_path, self.err_path = tmp_path / "launcher.out", tmp_path / "launcher.err"
        self.proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER), *args], cwd=tmp_path, stdin=subprocess.DEVNULL,
            stdout=open(self.out_path, "wb"), stderr=open(self.err_path, "wb"),
            env={**os.environ, "PYTHONPATH": str(STANDIN), "PYTHONDONTWRITEBYTECODE": "1",
                 "SGLANG_STANDIN_TIME_SCALE": "0.05", **env})

    @property
    def output(self) -> str:
        return self.out_path.read_text(errors="replace") + self.err_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            for pid in descendants(self.proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def launch(tmp_path):
    started = []

    def _launch(args, **env):
        started.append(Launched(tmp_path, args, env))
        return started[-1]
    yield _launch
    for launched in started:
        launched.stop()


# Seconds to wait for a launched server to become healthy or to exit: a hang guard, not a speed
# check (only a server that never gets there reaches it, whatever the machine's load).
HANG_GUARD = 120.0


def http(port: int, path: str, key: str | None = None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def wait_healthy(launched: Launched, port: int, timeout: float = HANG_GUARD) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert launched.proc.poll() is None, f"exited {launched.proc.returncode}:\n{launched.output}"
        try:
            if http(port, "/health") == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"not healthy in {timeout} s:\n{launched.output}")


def test_launcher_keeps_the_key_out_of_argv_environ_and_output_and_stops_the_tree(launch, tmp_path):
    key, token = "sk-noderig-" + os.urandom(8).hex(), "hf_" + os.urandom(10).hex()
    port = free_port()
    model = write_checkpoint(tmp_path / "kimi", vision=True)
    runtime = tmp_path / "run"  # what systemd's RuntimeDirectory= provides
    runtime.mkdir(mode=0o700)
    launched = launch(["--model-path", str(model), "--host", "127.0.0.1", "--port", str(port), "--tp-size", "2",
                       "--skip-server-warmup"], NODERIG_API_KEY=key, NODERIG_HF_TOKEN=token,
                      RUNTIME_DIRECTORY=str(runtime))
    wait_healthy(launched, port)
    token_file = runtime / "hf_token"
    assert token_file.read_text() == token and stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert http(port, "/v1/models") == 401
    assert http(port, "/v1/models", key) == 200

    tree = descendants(launched.proc.pid)
    assert len(tree) >= 4  # the server, its resource tracker, two TP ranks
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            assert key.encode() not in cmdline and token.encode() not in cmdline, entry
    for pid in tree | {launched.proc.pid}:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert key.encode() not in environ and token.encode() not in environ, pid
        if b"multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_bytes():
            assert b"HF_TOKEN_PATH=" in environ  # the ranks find the Hub token in a 0600 file
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert key not in ps and token not in ps

    launched.proc.send_signal(signal.SIGTERM)
    assert launched.proc.wait(HANG_GUARD) == 0
    assert not any(alive(pid) for pid in tree), [pid for pid in tree if alive(pid)]
    output = launched.output
    assert key not in output and token not in output
    assert "api_key='***'" in output and "Finished server process" in output
    assert not token_file.exists()


def test_launcher_reports_sglangs_sigkill_of_its_tree_faithfully(launch, tmp_path):
    """The vision warmup fails; SGLang SIGKILLs its whole tree: the unit must see status 9/KILL."""
    model = write_checkpoint(tmp_path / "kimi", vision=True)
    launched = launch(["--model-path", str(model), "--host", "127.0.0.1", "--port", str(free_port())],
                      NODERIG_API_KEY="sk-" + "k" * 20)
    assert launched.proc.wait(HANG_GUARD) == -signal.SIGKILL
    output = launched.output
    assert "Scheduler hit an exception" in output and "flash_attn" in output
    assert re.search(r"noderig-launch: the server \(pid \d+\) was killed by SIGKILL", output)
    assert "k" * 20 not in output


def test_launcher_preserves_exit_codes_and_refuses_a_key_in_argv(launch, tmp_path):
    bad = launch(["--model-path", str(tmp_path), "--no-such-flag"], NODERIG_API_KEY="sk-" + "q" * 12)
    assert bad.proc.wait(HANG_GUARD) == 2
    assert "unrecognized arguments: --no-such-flag" in bad.output and "q" * 12 not in bad.output
    refused = launch(["--model-path", str(tmp_path), "--api-key", "sk-in-argv"])
    assert refused.proc.wait(HANG_GUARD) == 2 and "refusing --api-key on the command line" in refused.output
    short = launch(["--model-path", str(tmp_path)], NODERIG_API_KEY="abc")
    assert short.proc.wait(HANG_GUARD) == 2 and "shorter than 8" in short.output and "abc" not in short.output.replace(
        "abcd", "")


def test_under_control_group_killmode_a_stop_reaches_each_process_once(launch, tmp_path):
    """In the unit, systemd signals every process itself: the launcher must not forward the
    manager's SIGTERM (the test plays the manager: it is the launcher's parent)."""
    port = free_port()
    model = write_checkpoint(tmp_path / "kimi", vision=False)
    launched = launch(["--model-path", str(model), "--host", "127.0.0.1", "--port", str(port),
                       "--skip-server-warmup"], NODERIG_LAUNCH_KILLMODE="control-group")
    wait_healthy(launched, port)
    tree = descendants(launched.proc.pid)
    launched.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert launched.proc.poll() is None and http(port, "/health") == 200  # not forwarded
    for pid in tree:  # what KillMode=control-group does
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    assert launched.proc.wait(HANG_GUARD) == 0
    assert not any(alive(pid) for pid in tree)


def test_launcher_is_a_file_the_deploy_can_ship():
    mode = LAUNCHER.stat().st_mode
    assert stat.S_ISREG(mode)
    source = LAUNCHER.read_text()
    imports = set(re.findall(r"^\s*(?:import|from) (\w+)", source, re.M))
    if "mutmut" in sys.modules:  # scripts/mutation runs a copy with mutmut's trampolines in it
        imports.discard("mutmut")
    assert imports <= set(sys.stdlib_module_names), imports - set(sys.stdlib_module_names)


# --- the launcher's redaction, as a pure function ----------------------------------------------------


def load_launcher():
    # The shipped file, imported under its package name (it has no import-time effects), so
    # that scripts/mutation's mutants of it apply here.
    from noderig.node import launch

    assert Path(launch.__file__).resolve() == LAUNCHER.resolve()
    return launch


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_redaction_survives_any_split_of_the_stream(data):
    # The expected bytes are written out independently of the redactor: the text around the
    # secret is drawn from characters the secret does not use, so it can hold no occurrence
    # of its own, and every occurrence becomes exactly "***".
    secret = data.draw(secret_text)
    others = st.characters(min_codepoint=0x20, max_codepoint=0x7e,
                           blacklist_characters="\"'\\" + "".join(set(secret)))
    pieces = data.draw(st.lists(st.one_of(st.just(None), st.text(alphabet=others, max_size=30)), max_size=12))
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=400), max_size=8))
    text = "".join(secret if p is None else p for p in pieces).encode()
    expected = b"".join(b"***" if p is None else p.encode() for p in pieces)
    redactor = load_launcher().Redactor([secret])
    out, last = b"", 0
    for cut in sorted(c for c in cuts if c <= len(text)) + [len(text)]:
        out += redactor.feed(text[last:cut])
        last = cut
    out += redactor.flush()
    assert out == expected


def test_redaction_of_escaped_forms_and_long_lines():
    launcher = load_launcher()
    redactor = launcher.Redactor(["sk-abc/def+ghi="])
    assert redactor.feed(b"api_key='sk-abc/def+ghi=' ok\n") == b"api_key='***' ok\n"
    long_line = b"x" * (launcher.MAX_PENDING + 10) + b"sk-abc/def+ghi="
    first = redactor.feed(long_line[:-5])
    rest = redactor.feed(long_line[-5:]) + redactor.flush()
    assert first and b"sk-abc" not in first + rest and (first + rest).endswith(b"***")
