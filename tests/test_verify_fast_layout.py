"""The verifier's fast path over a safetensors header (``_fast_layout``) on files written by the
real ``safetensors`` library: it must take the usual file itself (names in offset order and the
data's end, computed here from the header with plain ``json``), and decline (None) whatever is
unusual, leaving it to the precise per-tensor path. A fast path that declines the usual case
gives the same verdict, only slower, so the answers of ``read_header`` alone cannot tell."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from noderig.node import verify_files as vf


def header_of(path) -> tuple[int, dict]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return n, json.loads(raw[8:8 + n])


def expected_layout(header: dict) -> tuple[list[str], int]:
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    by_offset = sorted(tensors, key=lambda k: tensors[k]["data_offsets"][0])
    return by_offset, max((t["data_offsets"][1] for t in tensors.values()), default=0)


USUAL = {
    "one tensor": {"w": np.ones((4, 8), dtype=np.float16)},
    "many dtypes and shapes": {"a.weight": np.zeros((3, 5), dtype=np.float32), "b.bias": np.arange(7, dtype=np.int64),
                               "c": np.ones((2, 2, 2), dtype=np.uint8), "d": np.array(True),
                               "e.scale": np.ones((1,), dtype=np.float64), "f": np.ones((6,), dtype=np.int8),
                               "g": np.ones((3,), dtype=np.int16), "h": np.ones((2,), dtype=np.int32)},
    "a scalar and an empty tensor": {"scalar": np.array(1.5, dtype=np.float32),
                                     "empty": np.zeros((0, 4), dtype=np.float32), "x": np.ones((2,), np.float32)},
    "with metadata": {"w": np.ones((2, 3), dtype=np.float32)},
}


@pytest.mark.parametrize("name", list(USUAL))
def test_the_usual_file_takes_the_fast_path_with_the_right_layout(tmp_path, name):
    path = tmp_path / "m.safetensors"
    save_file(USUAL[name], str(path), metadata={"format": "pt"} if name == "with metadata" else None)
    n, header = header_of(path)
    size = path.stat().st_size
    _, top = vf._header_json(str(path), size)
    names, end = expected_layout(header)
    assert vf._fast_layout(top) == (names, end)
    assert end == size - 8 - n
    assert vf.read_header(str(path), size).names == names


def test_a_file_without_tensors_is_empty_on_the_fast_path(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({}, str(path), metadata={"format": "pt"})
    _, top = vf._header_json(str(path), path.stat().st_size)
    assert vf._fast_layout(top) == ([], 0)


def write_header(path, header: dict, data_len: int) -> int:
    body = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body)) + body + b"\0" * data_len)
    return path.stat().st_size


GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F16", "shape": [2, 2], "data_offsets": [8, 16]}}

UNUSUAL = {
    "keys in another order": {**GOOD, "a": {"shape": [2], "dtype": "F32", "data_offsets": [0, 8]}},
    "an extra key": {**GOOD, "a": {**GOOD["a"], "extra": 1}},
    "a missing key": {**GOOD, "a": {"dtype": "F32", "shape": [2]}},
    "an unknown dtype": {**GOOD, "a": {**GOOD["a"], "dtype": "F33"}},
    "a dtype that is not a string": {**GOOD, "a": {**GOOD["a"], "dtype": 4}},
    "a negative dimension": {**GOOD, "a": {**GOOD["a"], "shape": [-2]}},
    "a float dimension": {**GOOD, "a": {**GOOD["a"], "shape": [2.0]}},
    "a shape that is not a list": {**GOOD, "a": {**GOOD["a"], "shape": "2"}},
    "offsets that are not a pair": {**GOOD, "a": {**GOOD["a"], "data_offsets": [0, 4, 8]}},
    "offsets that are not a list": {**GOOD, "a": {**GOOD["a"], "data_offsets": "0-8"}},
    "a float offset": {**GOOD, "a": {**GOOD["a"], "data_offsets": [0.0, 8]}},
    "a negative offset": {**GOOD, "a": {**GOOD["a"], "data_offsets": [-8, 0]}},
    "a span of the wrong length": {**GOOD, "a": {**GOOD["a"], "data_offsets": [0, 12]}},
    "a gap between tensors": {**GOOD, "b": {**GOOD["b"], "data_offsets": [12, 20]}},
    "data not starting at 0": {"a": {**GOOD["a"], "data_offsets": [4, 12]}},
    "overlapping tensors": {**GOOD, "b": {**GOOD["b"], "data_offsets": [4, 12]}},
    "a dimension of 2**64": {**GOOD, "a": {**GOOD["a"], "shape": [2 ** 64]}},
    "a tensor that is not an object": {**GOOD, "a": [1, 2, 3]},
}


@pytest.mark.parametrize("case", list(UNUSUAL))
def test_anything_unusual_is_left_to_the_precise_path(tmp_path, case):
    path = tmp_path / "m.safetensors"
    size = write_header(path, UNUSUAL[case], 24)
    _, top = vf._header_json(str(path), size)
    assert vf._fast_layout(top) is None


def test_the_hand_written_good_header_is_usual(tmp_path):
    path = tmp_path / "m.safetensors"
    size = write_header(path, GOOD, 16)
    _, top = vf._header_json(str(path), size)
    assert vf._fast_layout(top) == (["a", "b"], 16)
