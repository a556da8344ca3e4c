"""Checkpoint discovery and safetensors header parsing, with the real loader's error texts.

Only headers are read: the structural checks are the ones safetensors' Rust loader makes
when it opens a file (so a truncated shard fails here as it would on a GPU node), and the
tensor bytes, which can be hundreds of GB, are never touched.
"""

import glob
import json
import math
import os
import struct
import sys
import time
from typing import Iterator, Tuple

from sglang.srt.utils import standin_sleep

MAX_HEADER_SIZE = 100_000_000
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64,
}


class SafetensorError(Exception):
    """Named like the Rust extension's exception so tracebacks read the same."""


SafetensorError.__module__ = "safetensors_rust"


def _header_error(reason: str) -> SafetensorError:
    return SafetensorError(f"Error while deserializing header: {reason}")


def read_safetensors_header(path: str) -> dict:
    """Parse and validate one file's header; returns {tensor name: {dtype, shape, data_offsets}}."""
    file_size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise _header_error("header too small")
        (n,) = struct.unpack("<Q", prefix)
        if n > MAX_HEADER_SIZE:
            raise _header_error("header too large")
        if 8 + n > file_size:
            raise _header_error("invalid header length")
        raw = f.read(n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _header_error(f"invalid UTF-8 in header: {e}") from None
    if not text.startswith("{"):
        raise _header_error("invalid start character in header, must be `{`")
    try:
        header = json.loads(text)
    except json.JSONDecodeError as e:
        raise _header_error(f"invalid JSON in header: {e}") from None
    tensors = {name: info for name, info in header.items() if name != "__metadata__"}
    for name, info in tensors.items():
        if not (isinstance(info, dict) and isinstance(info.get("shape"), list)
                and isinstance(info.get("data_offsets"), list) and len(info["data_offsets"]) == 2):
            raise _header_error(f"invalid JSON in header: bad dtype/shape/data_offsets for tensor `{name}`")
    end = 0
    for name, info in sorted(tensors.items(), key=lambda item: item[1]["data_offsets"]):
        begin, stop = info["data_offsets"]
        if begin != end or stop < begin:
            raise _header_error(f"invalid offset for tensor '{name}'")
        if info["dtype"] not in DTYPE_BITS:
            raise _header_error(f"invalid JSON in header: unknown variant `{info['dtype']}`")
        if (stop - begin) * 8 != math.prod(info["shape"]) * DTYPE_BITS[info["dtype"]]:
            raise _header_error("invalid shape, dtype, or offset for tensor")
        end = stop
    if 8 + n + end != file_size:
        raise _header_error("incomplete metadata, file not fully covered")
    return tensors


def list_safetensors_files(model_path: str) -> list[str]:
    """*.safetensors in the folder, narrowed to the index's weight_map when there is one (as SGLang does)."""
    files = sorted(glob.glob(os.path.join(model_path, "*.safetensors")))
    index_file = os.path.join(model_path, "model.safetensors.index.json")
    if os.path.isfile(index_file):
        with open(index_file) as f:
            listed = set(json.load(f)["weight_map"].values())
        files = [path for path in files if os.path.basename(path) in listed]
    if not files:
        raise RuntimeError(f"Cannot find any model weights with `{model_path}`")
    return files


def safetensors_weights_iterator(files: list[str], show_progress: bool,
                                 seconds_per_shard: float = 0.0) -> Iterator[Tuple[str, dict]]:
    """Yield (tensor name, header entry) shard by shard, printing tqdm-style progress on rank 0."""
    start = time.monotonic()
    for done, path in enumerate([None] + files):
        if path is not None:
            yield from read_safetensors_header(path).items()
            standin_sleep(seconds_per_shard)  # stands in for copying the tensors to the GPU
        if show_progress:
            elapsed = time.monotonic() - start
            rate = f"{done / elapsed:6.2f}it/s" if done and elapsed > 0 else "?it/s"
            sys.stderr.write(
                f"Loading safetensors checkpoint shards: {100 * done // len(files):3d}% Completed | "
                f"{done}/{len(files)} [00:{int(elapsed):02d}<{'00:00' if done else '?'}, {rate}]\n"
            )
