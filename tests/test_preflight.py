"""Preflight on the lab: GPU facts from nvidia-smi (a stand-in answering the real query
format, since the lab has no GPU), required GPU count, and not-enough-disk refusal."""

from __future__ import annotations

import shutil

import pytest

from noderig_lab import FAKE_NVIDIA_SMI as FAKE_SMI
from tests.conftest import deploy

pytestmark = pytest.mark.lab


@pytest.fixture
def gpus(lab):
    root = lab.layout.host_root("b300")
    shutil.copy(FAKE_SMI, root / "usr/local/bin/nvidia-smi")
    (root / "etc/noderig-lab").mkdir(exist_ok=True)

    def install(count: int) -> None:
        (root / "etc/noderig-lab/gpus").write_text("NVIDIA B300, 10.3, 580.82.07\n" * count)

    yield install
    (root / "usr/local/bin/nvidia-smi").unlink(missing_ok=True)
    shutil.rmtree(root / "etc/noderig-lab", ignore_errors=True)


def test_gpus_are_reported_and_the_required_count_enforced(lab, gpus):
    gpus(8)
    res, out = deploy(lab, "steps=preflight", "gpus_required=8")
    assert res.returncode == 0, out[-3000:]
    assert "8x NVIDIA B300 (compute 10.3, driver 580.82.07)" in out

    gpus(4)
    res, out = deploy(lab, "steps=preflight", "gpus_required=8")
    assert res.returncode != 0
    assert "4 GPU(s) visible to nvidia-smi, 8 required" in out


def test_no_gpu_is_reported_not_an_error_unless_required(lab):
    res, out = deploy(lab, "steps=preflight", "gpus_required=0")
    assert res.returncode == 0, out[-3000:]
    assert "no GPU visible" in out


def test_a_failing_nvidia_smi_fails_preflight_with_its_own_words(lab):
    # a driver upgraded without a reboot: nvidia-smi says so on stdout and exits 18; before, the words were counted
    # as one GPU named "Failed to initialize NVML: Driver/library version mismatch"
    smi = lab.layout.host_root("b300") / "usr/local/bin/nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\n"
                   "echo 'NVML library version: 580.95'\nexit 18\n")
    smi.chmod(0o755)
    try:
        res, out = deploy(lab, "steps=preflight", "gpus_required=1")
        assert res.returncode != 0
        assert ("the GPUs cannot be counted: nvidia-smi exited with status 18: Failed to initialize NVML: "
                "Driver/library version mismatch / NVML library version: 580.95; a driver upgraded without a reboot "
                "says this: reboot the node") in out
        res, out = deploy(lab, "steps=preflight", "gpus_required=0")
        assert res.returncode == 0 and "GPUs unknown (nvidia-smi exited with status 18" in out, out[-3000:]
    finally:
        smi.unlink(missing_ok=True)
