"""The lab's stand-in SGLang server, run as a real process tree against tiny real checkpoints."""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from noderig_lab import STANDIN_SOURCE as STANDIN

# A hang guard, not a speed check: only a server that never starts (or never exits) reaches it,
# whatever the machine's load (the fast tier must pass beside two busy loops).
STARTUP_TIMEOUT = 120.0
FA4_ERROR = ("ImportError: Vendored FlashAttention CUTE is not available (cannot import flash_attn.cute). "
             "Please check your source tree.")
READY = "The server is fired up and ready to roll!"


def write_shard(path: Path, tensors: dict) -> None:
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 2 * shape[0] * shape[1]  # BF16
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def write_checkpoint(root: Path, vision: bool = True, architecture: str = "KimiK25ForConditionalGeneration") -> Path:
    """A Kimi-K2.6-shaped config with a 2-shard index; real safetensors headers, zero bytes of data."""
    root.mkdir(parents=True)
    text_config = {"model_type": "kimi_k2", "num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                   "vocab_size": 163840, "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}
    config = {"architectures": [architecture], "model_type": "kimi_k25", "text_config": text_config, "block_size": 16}
    if vision:
        config["vision_config"] = {"hidden_size": 1152, "num_attention_heads": 16}
    (root / "config.json").write_text(json.dumps(config))
    shards = {"model-00001-of-000002.safetensors": {"language_model.model.embed_tokens.weight": [4, 8]},
              "model-00002-of-000002.safetensors": {"vision_tower.patch_embed.proj.weight": [2, 8],
                                                    "mm_projector.proj.0.weight": [8, 8]}}
    weight_map = {}
    for name, tensors in shards.items():
        write_shard(root / name, tensors)
        weight_map.update(dict.fromkeys(tensors, name))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 224},
                                                                    "weight_map": weight_map}))
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp_path: Path, model: Path, *flags: str, env: dict | None = None):
        self.port = free_port()
        self.log_path = tmp_path / f"server-{self.port}.log"
        self.log_file = open(self.log_path, "wb")
        environ = {**os.environ, "PYTHONPATH": str(STANDIN), "PYTHONDONTWRITEBYTECODE": "1",
                   "SGLANG_STANDIN_TIME_SCALE": "0.05", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--host", "127.0.0.1",
             "--port", str(self.port), *flags],
            stdout=self.log_file, stderr=subprocess.STDOUT, env=environ, cwd=tmp_path)

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def request(self, path: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data, headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def wait_healthy(self, timeout: float = STARTUP_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"server exited with {self.proc.returncode}:\n{self.log}"
            try:
                if self.request("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"not healthy within {timeout} s:\n{self.log}")

    def wait_exit(self, timeout: float = STARTUP_TIMEOUT) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


@pytest.fixture
def launch(tmp_path):
    servers = []

    def _launch(model: Path, *flags: str, env: dict | None = None) -> Server:
        servers.append(Server(tmp_path, model, *flags, env=env))
        return servers[-1]

    yield _launch
    for server in servers:
        server.stop()


@pytest.fixture
def kimi(tmp_path) -> Path:
    return write_checkpoint(tmp_path / "kimi")


def test_skip_warmup_reaches_ready_and_serves(launch, kimi):
    server = launch(kimi, "--tp", "2", "--skip-server-warmup", "--served-model-name", "kimi-k2.6")
    server.wait_healthy()
    assert json.loads(server.request("/v1/models")[1])["data"][0]["id"] == "kimi-k2.6"
    status, body = server.request("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 5}})
    out = json.loads(body)
    assert status == 200 and out["meta_info"]["completion_tokens"] == 5 and len(out["text"].split()) == 5
    again = json.loads(server.request("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 5}})[1])
    assert again["text"] == out["text"]  # deterministic
    info = json.loads(server.request("/server_info")[1])
    assert info["tp_size"] == 2 and info["device_properties"]["multiprocessor_count"] > 0  # the JIT module ran
    assert json.loads(server.request("/model_info")[1])["has_image_understanding"] is True
    log = server.log
    for milestone in ("server_args=ServerArgs(", "TP1] Load weight begin", "Load weight end. type=KimiK25ForConditionalGeneration",
                      "KV Cache is allocated", "Capture cuda graph bs [1, 2, 4, 8", "TP0] Registering",
                      "Uvicorn running on http://127.0.0.1", READY):
        assert milestone in log, milestone
    server.stop()
    assert server.proc.returncode == 0


def test_vision_warmup_dies_with_fa4_traceback(launch, kimi):
    server = launch(kimi)
    returncode = server.wait_exit()
    log = server.log
    assert returncode == -signal.SIGKILL  # SGLang kills its own tree, itself included
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "ModuleNotFoundError: No module named 'flash_attn'" in log
    assert "The above exception was the direct cause of the following exception:" in log
    for frame in ("in _get_chunked_embedding_by_item", "in get_image_feature", "in flash_attn_varlen_func"):
        assert frame in log
    assert FA4_ERROR in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert READY not in log


def test_vision_warmup_passes_with_triton_mm_backend(launch, kimi):
    server = launch(kimi, "--mm-attention-backend", "triton_attn")
    server.wait_healthy()
    assert READY in server.log and '"POST /v1/chat/completions HTTP/1.1" 200 OK' in server.log


def test_text_model_warmup_generates(launch, tmp_path):
    server = launch(write_checkpoint(tmp_path / "text", vision=False, architecture="DeepseekV3ForCausalLM"))
    server.wait_healthy()
    assert '"POST /generate HTTP/1.1" 200 OK' in server.log and READY in server.log


def test_api_key_guards_everything_but_health(launch, kimi):
    server = launch(kimi, "--skip-server-warmup", "--api-key", "sk-lab")
    server.wait_healthy()
    assert server.request("/v1/models")[0] == 401
    assert server.request("/v1/models", headers={"Authorization": "Bearer sk-lab"})[0] == 200


def test_ddtree_with_draft_logs_two_capture_phases(launch, kimi, tmp_path):
    draft = write_checkpoint(tmp_path / "draft", vision=False, architecture="DFlashDraftModel")
    server = launch(kimi, "--tp", "2", "--skip-server-warmup", "--attention-backend", "triton", "--page-size", "1",
                    "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", str(draft),
                    "--speculative-ddtree-budget", "32")
    server.wait_healthy()
    info = json.loads(server.request("/server_info")[1])
    assert info["disable_overlap_schedule"] is True and info["page_size"] == 1
    assert (info["speculative_ddtree_budget"], info["speculative_num_draft_tokens"]) == (32, 16)  # block size from draft config
    assert server.log.count("Registering") == 2 and "Capture draft cuda graph end" in server.log


@pytest.mark.parametrize("flags, effective_page_size", [
    (("--attention-backend", "flashinfer", "--page-size", "16"), 16),
    # No backend given: on Blackwell SGLang picks trtllm_mla for Kimi, which forces page size 64.
    (("--page-size", "1"), 64),
])
def test_ddtree_rejects_page_size_other_than_one(launch, kimi, tmp_path, flags, effective_page_size):
    draft = write_checkpoint(tmp_path / "draft", vision=False, architecture="DFlashDraftModel")
    server = launch(kimi, "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", str(draft), *flags)
    assert server.wait_exit() == 1
    assert f"ValueError: DDTREE currently supports only page_size == 1. Got page_size={effective_page_size}." in server.log


def test_unknown_flag_exits_2(launch, kimi):
    server = launch(kimi, "--no-such-flag")
    assert server.wait_exit() == 2
    assert "unrecognized arguments: --no-such-flag" in server.log


def test_truncated_shard_fails_at_load(launch, kimi):
    shard = kimi / "model-00002-of-000002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-10])
    server = launch(kimi, "--skip-server-warmup")
    assert server.wait_exit() == -signal.SIGKILL
    assert ("safetensors_rust.SafetensorError: Error while deserializing header: "
            "incomplete metadata, file not fully covered") in server.log


def test_missing_python_headers_fail_the_jit_build(launch, kimi, tmp_path):
    (tmp_path / "no-headers").mkdir()
    server = launch(kimi, "--skip-server-warmup", env={"SGLANG_STANDIN_PYTHON_INCLUDE": str(tmp_path / "no-headers")})
    assert server.wait_exit() == -signal.SIGKILL
    log = server.log
    assert "fatal error: Python.h: No such file or directory" in log  # gcc's own words
    assert "subprocess.CalledProcessError: Command '[" in log and "returned non-zero exit status 1." in log


def test_a_scheduler_socket_listens_on_every_interface_whatever_the_host(launch, kimi):
    # SGLang's scheduler ZMQ sockets bind all interfaces even with --host 127.0.0.1; the stand-in
    # does the same on port + 100, so the lab's firewall test has something real to close.
    server = launch(kimi, "--tp", "2", "--skip-server-warmup")
    server.wait_healthy()
    port = server.port + 100
    listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
    assert any(line.split()[1] == f"00000000:{port:04X}" and line.split()[3] == "0A" for line in listening), \
        f"nothing listens on 0.0.0.0:{port}\n{server.log}"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        assert s.recv(64) == b"sglang-standin scheduler socket\n"
    assert f"scheduler socket listening on tcp://0.0.0.0:{port}" in server.log


def test_a_static_fraction_that_leaves_no_room_for_the_capture_fails_it_with_torch_s_oom(launch, kimi):
    # 0.97 of 275 GB for weights and KV cache leaves 8.25 GB; one forward at the largest captured
    # batch needs 16 (what --mem-fraction-static's 0.83-0.85 defaults leave room for).
    server = launch(kimi, "--skip-server-warmup", "--mem-fraction-static", "0.97")
    assert server.wait_exit() == -signal.SIGKILL
    log = server.log
    assert ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of "
            "288.00 GiB of which 8.25 GiB is free.") in log
    assert "Exception: Capture cuda graph failed: CUDA out of memory." in log
    assert "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" in log


def test_the_fraction_the_deploy_lowers_to_leaves_room_and_serves(launch, kimi):
    server = launch(kimi, "--skip-server-warmup", "--mem-fraction-static", "0.89")
    server.wait_healthy()
    assert "Capture cuda graph end." in server.log


def test_flashinfer_s_jit_fails_with_a_toolkit_older_than_the_gpu_and_triton_is_spared(launch, kimi):
    old_toolkit = {"SGLANG_STANDIN_NVCC_VERSION": "12.8"}
    server = launch(kimi, "--skip-server-warmup", "--attention-backend", "flashinfer", env=old_toolkit)
    assert server.wait_exit() == -signal.SIGKILL
    assert "RuntimeError: Ninja build failed. Ninja output:" in server.log
    assert "nvcc fatal   : Unsupported gpu architecture 'compute_103a'" in server.log  # nvcc's own words
    spared = launch(kimi, "--skip-server-warmup", "--attention-backend", "triton", env=old_toolkit)
    spared.wait_healthy()
    recent = launch(kimi, "--skip-server-warmup", "--attention-backend", "flashinfer",
                    env={"SGLANG_STANDIN_NVCC_VERSION": "12.9"})
    recent.wait_healthy()
