"""HTTP layer: SGLang's endpoints on a stdlib server, uvicorn-style logs, warmup and shutdown."""

import base64
import dataclasses
import json
import logging
import os
import signal
import socket
import struct
import threading
import time
import traceback
import urllib.request
import zlib
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from sglang.srt.entrypoints.engine import launch_subprocesses
from sglang.srt.entrypoints.pacing import Pacer, layout_costs
from sglang.srt.managers.tokenizer_manager import TokenizerManager
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils import kill_process_tree, standin_sleep, time_scale
from sglang.version import __version__

logger = logging.getLogger(__name__)
uvicorn_logger = logging.getLogger("uvicorn")  # its level follows --log-level-http


def uvicorn_log(level: str, message: str):
    # SGLang reformats uvicorn's logs as "[time] INFO:     message".
    uvicorn_logger.log(getattr(logging, level), f"{level + ':':<10}{message}")


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client hanging up mid-response is not worth a traceback in the journal.
        logger.debug("HTTP connection error from %s", client_address, exc_info=True)


class IPv6HTTPServer(HTTPServer):
    address_family = socket.AF_INET6


class Stream:
    """A handler's answer that is sent as server-sent events."""

    def __init__(self, events):
        self.events = events


class ShutdownRequested(BaseException):
    """Raised in the main thread by SIGTERM/SIGINT so every wait unwinds to the shutdown path."""


def _tiny_png(size: int = 32) -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


class SGLangRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_args: ServerArgs
    tokenizer_manager: TokenizerManager
    scheduler_info: dict
    pacer: Pacer

    def version_string(self):
        return "uvicorn"

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method: str):
        path = urlsplit(self.path).path
        routes = {
            ("GET", "/health"): self.health, ("GET", "/health_generate"): self.health,
            ("GET", "/model_info"): self.model_info, ("GET", "/get_model_info"): self.model_info,
            ("GET", "/server_info"): self.server_info, ("GET", "/get_server_info"): self.server_info,
            ("GET", "/v1/models"): self.models, ("GET", "/metrics"): self.metrics,
            ("POST", "/generate"): self.generate, ("POST", "/v1/chat/completions"): self.chat_completions,
            ("POST", "/v1/completions"): self.completions,
        }
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        api_key = self.server_args.api_key
        if api_key and not path.startswith(("/health", "/metrics")) \
                and self.headers.get("Authorization") != f"Bearer {api_key}":
            return self._send(401, {"error": "Unauthorized"})
        handler = routes.get((method, path))
        if handler is None:
            known = any(route_path == path for _, route_path in routes)
            return self._send(405 if known else 404, {"detail": "Method Not Allowed" if known else "Not Found"})
        try:
            status, payload = handler(json.loads(body) if body else {})
        except (ValueError, KeyError, TypeError) as e:
            status, payload = 400, {"object": "error", "message": f"{type(e).__name__}: {e}", "code": 400}
        except TimeoutError as e:
            status, payload = 503, {"object": "error", "message": str(e), "code": 503}
        if isinstance(payload, Stream):
            return self._send_stream(payload)
        self._send(status, payload)

    def _send_stream(self, stream: "Stream"):
        """Server-sent events, chunked, as SGLang's StreamingResponse: `data: {json}` per event."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in stream.events:
                data = f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(self, status: int, payload):
        if isinstance(payload, (dict, list)):
            data, content_type = json.dumps(payload).encode(), "application/json"
        else:
            data, content_type = (payload or "").encode(), "text/plain; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_request(self, code="-", size="-"):
        host, port = self.client_address[:2]
        uvicorn_log("INFO", f'{host}:{port} - "{self.requestline}" {int(code)} {HTTPStatus(int(code)).phrase}')

    def log_message(self, format, *args):
        pass  # errors surface as responses; access lines come from log_request

    # --- endpoints -------------------------------------------------------------------------

    def health(self, _):
        if self.tokenizer_manager.server_status != "Up":
            return 503, ""
        # Like SGLang's default, a health check runs one token through the schedulers.
        self.tokenizer_manager.generate([0], max_new_tokens=1, timeout=float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", 20)))
        return 200, ""

    def model_info(self, _):
        config = self.tokenizer_manager.model_config
        return 200, {"model_path": self.server_args.model_path, "tokenizer_path": self.server_args.tokenizer_path,
                     "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
                     "has_image_understanding": config.has_image_understanding, "has_audio_understanding": False,
                     "model_type": config.hf_config.get("model_type"), "architectures": config.hf_config.get("architectures")}

    def server_info(self, _):
        # As SGLang: the scheduler's internal state, with the speculative accept length when
        # speculative decoding is on (what bench_serving reads after a run).
        internal = {"last_gen_throughput": 0.0, "memory_usage": {"weight": 0.0, "kvcache": 0.0}}
        if self.server_args.speculative_algorithm:
            internal["avg_spec_accept_length"] = self.pacer.costs.accept_length
        return 200, {**dataclasses.asdict(self.server_args), **{k: v for k, v in self.scheduler_info.items() if k != "status"},
                     "internal_states": [internal], "status": self.tokenizer_manager.server_status,
                     "version": __version__}

    def models(self, _):
        name = self.server_args.served_model_name
        return 200, {"object": "list", "data": [{"id": name, "object": "model", "created": int(time.time()),
                     "owned_by": "sglang", "root": name, "parent": None,
                     "max_model_len": self.tokenizer_manager.model_config.context_len}]}

    def metrics(self, _):
        if not self.server_args.enable_metrics:
            return 404, {"detail": "Not Found"}
        labels = f'{{model_name="{self.server_args.served_model_name}"}}'
        lines = [f"sglang:num_running_reqs{labels} 0.0", f"sglang:num_queue_reqs{labels} 0.0",
                 f"sglang:token_usage{labels} 0.0", f"sglang:gen_throughput{labels} 0.0"]
        return 200, "\n".join(lines) + "\n"

    def _run(self, input_ids, max_new_tokens, images=(), paced: bool = False):
        out = self.tokenizer_manager.generate(input_ids, int(max_new_tokens), images, paced=paced)
        return self.tokenizer_manager.decode(out["output_ids"]), out

    def _pieces(self, out: dict):
        """The output as (text piece, tokens so far), paced like the layout would stream it."""
        sent = 0
        for ids in self.pacer.paced(out["prompt_tokens"], out["output_ids"]):
            sent += len(ids)
            yield ("" if sent == len(ids) else " ") + self.tokenizer_manager.decode(ids), sent

    @staticmethod
    def _usage(out: dict) -> dict:
        return {"prompt_tokens": out["prompt_tokens"], "completion_tokens": out["completion_tokens"],
                "total_tokens": out["prompt_tokens"] + out["completion_tokens"]}

    def _openai_stream(self, body: dict, out: dict, kind: str):
        """OpenAI's chunk stream (chat or completions), the usage chunk when asked, [DONE]."""
        base = {"id": out["rid"], "created": int(time.time()), "model": self.server_args.served_model_name}
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        for i, (piece, _) in enumerate(self._pieces(out)):
            choice = ({"index": 0, "delta": {"role": "assistant", "content": piece} if i == 0 else {"content": piece}}
                      if kind == "chat" else {"index": 0, "text": piece, "logprobs": None})
            yield {**base, "object": obj, "choices": [{**choice, "finish_reason": None}]}
        last = {"index": 0, "delta": {}} if kind == "chat" else {"index": 0, "text": "", "logprobs": None}
        yield {**base, "object": obj, "choices": [{**last, "finish_reason": "length"}]}
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**base, "object": obj, "choices": [], "usage": self._usage(out)}
        yield "[DONE]"

    def completions(self, body):
        prompt = body.get("prompt", "")
        prompt = prompt[0] if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else prompt
        input_ids = self.tokenizer_manager.encode(prompt) if isinstance(prompt, str) else list(prompt)
        max_tokens = body.get("max_tokens") or 16
        text, out = self._run(input_ids, max_tokens, paced=bool(body.get("stream")))
        if body.get("stream"):
            return 200, Stream(self._openai_stream(body, out, "completion"))
        return 200, {"id": out["rid"], "object": "text_completion", "created": int(time.time()),
                     "model": self.server_args.served_model_name, "usage": self._usage(out),
                     "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}]}

    def _generate_stream(self, out: dict):
        """SGLang's /generate stream: the text so far and meta_info in each event, then [DONE]."""
        text = ""
        for piece, count in self._pieces(out):
            text += piece
            yield {"text": text, "meta_info": {"id": out["rid"], "prompt_tokens": out["prompt_tokens"],
                                               "completion_tokens": count, "cached_tokens": 0, "finish_reason": None}}
        yield "[DONE]"

    def generate(self, body):
        params = body.get("sampling_params") or {}
        if body.get("stream"):
            prompt = body.get("text", body.get("input_ids"))
            input_ids = self.tokenizer_manager.encode(prompt) if isinstance(prompt, str) else list(prompt)
            _, out = self._run(input_ids, params.get("max_new_tokens", 128), paced=True)
            return 200, Stream(self._generate_stream(out))
        prompts = body.get("text", body.get("input_ids"))
        batch = prompts if isinstance(prompts, list) and prompts and not isinstance(prompts[0], int) else [prompts]
        results = []
        for prompt in batch:
            input_ids = self.tokenizer_manager.encode(prompt) if isinstance(prompt, str) else list(prompt)
            text, out = self._run(input_ids, params.get("max_new_tokens", 128))
            results.append({"text": text, "meta_info": {
                "id": out["rid"], "finish_reason": {"type": "length", "length": out["completion_tokens"]},
                "prompt_tokens": out["prompt_tokens"], "completion_tokens": out["completion_tokens"],
                "cached_tokens": out["cached_tokens"]}})
        return 200, results if len(batch) > 1 else results[0]

    def chat_completions(self, body):
        texts, images = [], []
        for message in body["messages"]:
            content = message.get("content") or ""
            for part in ([{"type": "text", "text": content}] if isinstance(content, str) else content):
                if part.get("type") == "image_url":
                    images.append(self.tokenizer_manager.process_image(part["image_url"]["url"]))
                else:
                    texts.append(f"{message['role']}: {part.get('text', '')}")
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 16
        stream = bool(body.get("stream"))
        text, out = self._run(self.tokenizer_manager.encode("\n".join(texts)), max_tokens, images, paced=stream)
        if stream:
            return 200, Stream(self._openai_stream(body, out, "chat"))
        usage = self._usage(out)
        return 200, {"id": out["rid"], "object": "chat.completion", "created": int(time.time()),
                     "model": self.server_args.served_model_name, "usage": usage,
                     "choices": [{"index": 0, "finish_reason": "length", "logprobs": None,
                                  "message": {"role": "assistant", "content": text, "reasoning_content": None,
                                              "tool_calls": None}}]}


def _execute_server_warmup(server_args: ServerArgs, has_image_understanding: bool) -> bool:
    headers = {"Content-Type": "application/json"}
    if server_args.api_key:
        headers["Authorization"] = f"Bearer {server_args.api_key}"
    url = server_args.url()
    for _ in range(120):
        standin_sleep(1)
        try:
            urllib.request.urlopen(urllib.request.Request(url + "/model_info", headers=headers), timeout=5)
            break
        except OSError:
            continue
    try:
        # VLMs are warmed up through the vision path, as SGLang does: one image chat request.
        if has_image_understanding:
            image = "data:image/png;base64," + base64.b64encode(_tiny_png()).decode()
            path, payload = "/v1/chat/completions", {"max_tokens": 8, "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": "Describe the image."}]}]}
        else:
            path, payload = "/generate", {"text": "The capital city of France is",
                                          "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
        timeout = float(os.environ.get("SGLANG_WARMUP_TIMEOUT", -1))
        request = urllib.request.Request(url + path, json.dumps(payload).encode(), headers)
        urllib.request.urlopen(request, timeout=600 if timeout < 0 else timeout).read()
    except Exception:
        logger.error(f"Initialization failed. warmup error: {traceback.format_exc()}")
        kill_process_tree(os.getpid())
        return False
    return True


def _wait_and_warmup(server_args: ServerArgs, tokenizer_manager: TokenizerManager):
    if not server_args.skip_server_warmup:
        if not _execute_server_warmup(server_args, tokenizer_manager.model_config.has_image_understanding):
            return
    tokenizer_manager.server_status = "Up"
    logger.info("The server is fired up and ready to roll!")


def _request_shutdown(signum, frame):
    raise ShutdownRequested()


def launch_server(server_args: ServerArgs):
    signal.signal(signal.SIGTERM, _request_shutdown)
    signal.signal(signal.SIGINT, _request_shutdown)
    tokenizer_manager, httpd = None, None
    uvicorn_logger.setLevel(getattr(logging, (server_args.log_level_http or server_args.log_level).upper(), logging.INFO))
    try:
        tokenizer_manager, scheduler_info = launch_subprocesses(server_args)
        if tokenizer_manager is None:
            return
        handler = type("Handler", (SGLangRequestHandler,), {
            "server_args": server_args, "tokenizer_manager": tokenizer_manager, "scheduler_info": scheduler_info,
            "pacer": Pacer(layout_costs(server_args), time_scale())})
        uvicorn_log("INFO", f"Started server process [{os.getpid()}]")
        uvicorn_log("INFO", "Waiting for application startup.")
        uvicorn_log("INFO", "Application startup complete.")
        try:
            server_class = IPv6HTTPServer if ":" in server_args.host else HTTPServer
            httpd = server_class((server_args.host, server_args.port), handler)
        except OSError as e:
            uvicorn_log("ERROR", f"[Errno {e.errno}] error while attempting to bind on address "
                                 f"({server_args.host!r}, {server_args.port}): {(e.strerror or str(e)).lower()}")
            raise SystemExit(1)
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        uvicorn_log("INFO", f"Uvicorn running on http://{server_args.host}:{server_args.port} (Press CTRL+C to quit)")
        threading.Thread(target=_wait_and_warmup, args=(server_args, tokenizer_manager), daemon=True).start()
        while True:
            time.sleep(3600)
    except ShutdownRequested:
        if httpd is not None:
            uvicorn_log("INFO", "Shutting down")
            httpd.shutdown()
            uvicorn_log("INFO", "Waiting for application shutdown.")
            uvicorn_log("INFO", "Application shutdown complete.")
            uvicorn_log("INFO", f"Finished server process [{os.getpid()}]")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        if tokenizer_manager is not None:
            tokenizer_manager.shutdown(timeout=5 * max(time_scale(), 0.2))
        kill_process_tree(os.getpid(), include_parent=False)
