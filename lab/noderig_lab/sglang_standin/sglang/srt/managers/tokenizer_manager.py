"""TokenizerManager: lives in the HTTP process, turns requests into token ids and fans them out to the ranks."""

import base64
import math
import re
import struct
import threading
import uuid
import zlib

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.server_args import ServerArgs

# Detokenized output comes from this word list: deterministic and readable, not a language model.
WORDS = ("the", "node", "serves", "tokens", "from", "a", "lab", "model", "and", "every", "request",
         "gets", "an", "answer", "quickly", "while", "weights", "stay", "on", "disk")
PATCH = 14


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    return None


class TokenizerManager:
    def __init__(self, server_args: ServerArgs, model_config: ModelConfig, conns, procs):
        self.server_args, self.model_config = server_args, model_config
        self.conns, self.procs = conns, procs
        self.server_status = "Starting"
        self.vocab_size = int(model_config.text_config.get("vocab_size", 163840))
        self._send_lock = threading.Lock()
        self._pending: dict[str, list] = {}
        threading.Thread(target=self._handle_results, name="detokenizer", daemon=True).start()

    def encode(self, text: str) -> list[int]:
        return [1] + [zlib.crc32(piece.encode()) % self.vocab_size for piece in re.findall(r"\w+|[^\w\s]", text)]

    def decode(self, output_ids: list[int]) -> str:
        return " ".join(WORDS[i % len(WORDS)] for i in output_ids)

    def process_image(self, url: str) -> dict:
        """A data: URL image -> MoonViT patch grid and fake pixel values (no remote fetches in the lab)."""
        if not url.startswith("data:") or "," not in url:
            raise ValueError(f"Unsupported image url (only data: URLs are served by the stand-in): {url[:64]}")
        data = base64.b64decode(url.split(",", 1)[1])
        width, height = _png_size(data) or (224, 224)
        grid = (1, math.ceil(height / PATCH), math.ceil(width / PATCH))
        pixels = [b / 255.0 for b in (data * (1 + grid[1] * grid[2] // max(1, len(data))))[: grid[1] * grid[2]]]
        return {"pixel_values": pixels, "grid_thw": grid}

    def generate(self, input_ids: list[int], max_new_tokens: int, images=(), timeout: float = 600.0,
                 paced: bool = False) -> dict:
        """``paced``: the HTTP layer streams the tokens at the layout's pace (entrypoints/pacing.py),
        so the ranks skip their own per-token delay."""
        rid = uuid.uuid4().hex
        waiter = [threading.Event(), None]
        self._pending[rid] = waiter
        # Image placeholder tokens: one per 2x2-merged patch group, ahead of the text.
        placeholders = [self.vocab_size - 1] * sum(math.ceil(img["grid_thw"][1] * img["grid_thw"][2] / 4) for img in images)
        req = {"rid": rid, "input_ids": placeholders + input_ids, "max_new_tokens": max_new_tokens, "images": list(images),
               "paced": paced}
        with self._send_lock:  # every rank must see requests in the same order
            for conn in self.conns:
                conn.send(req)
        if not waiter[0].wait(timeout):
            self._pending.pop(rid, None)
            raise TimeoutError(f"request {rid} got no scheduler output within {timeout} s")
        return waiter[1]

    def _handle_results(self):
        while True:
            try:
                out = self.conns[0].recv()
            except (EOFError, OSError):
                return  # rank 0 is gone; the launcher's SIGQUIT handler deals with the crash
            waiter = self._pending.pop(out["rid"], None)
            if waiter:
                waiter[1] = out
                waiter[0].set()

    def shutdown(self, timeout: float = 5.0):
        """Ask every rank to leave its event loop, then wait for it."""
        with self._send_lock:
            for conn in self.conns:
                try:
                    conn.send(None)
                except OSError:
                    pass
        for proc in self.procs:
            proc.join(timeout)
