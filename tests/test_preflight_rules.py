"""Preflight's rules and its one-line description, stated in full (noderig.preflight): the
sentences a user reads before anything is changed."""

from __future__ import annotations

import pytest

from noderig.preflight import DISK_MARGIN_BYTES, describe, disk_problems, problems

CFG = {"home": "/usr/bin", "version": "3.11.2"}
GPU = {"name": "NVIDIA B300", "compute_cap": "10.3", "driver": "580.82"}


def check(info=None, cfg=CFG, base="3.11.2", gpus_required=0, reference="ct200"):
    info = {"os": "debian 12", "gpus": [], **(info or {})}
    return problems(info, cfg, base, gpus_required=gpus_required, reference_name=reference, venv="/opt/v")


def test_a_good_node_has_no_problem():
    assert check() == []
    assert check({"gpus": [GPU] * 8}, gpus_required=8) == []


def test_missing_gpus_are_counted_and_the_way_out_named():
    assert check({"gpus": [GPU] * 4}, gpus_required=8) == [
        "4 GPU(s) visible to nvidia-smi, 8 required (check the driver, or set gpus_required)"]
    assert check({"gpus": None}, gpus_required=1) == [
        "0 GPU(s) visible to nvidia-smi, 1 required (check the driver, or set gpus_required)"]


def test_a_reference_without_a_venv_is_named():
    assert check(cfg=None) == ["the reference host ct200 has no venv at /opt/v (no pyvenv.cfg)"]
    assert check(cfg=None, reference=None) == [], "no reference given: nothing to compare"


def test_a_missing_base_interpreter_names_its_path_and_version():
    assert check(base=None) == ["the venv needs its base interpreter /usr/bin/python3 (Python 3.11.2), which this "
                                "node lacks; install that Python at that path first"]


@pytest.mark.parametrize("cfg", [{"home": "/usr/bin", "version_info": "3.12.1.final.0"},
                                 {"home": "/usr/bin", "version": " 3.12.1 "}])
def test_another_minor_version_is_refused_whichever_key_the_venv_wrote(cfg):
    found = check(cfg=cfg, base="3.11.2")
    assert len(found) == 1 and found[0].startswith("/usr/bin/python3 is Python 3.11.2 here but the reference venv "
                                                   "was built on 3.12.1")
    assert found[0].endswith("; a venv is not portable across minor versions")


def test_a_venv_that_states_no_version_is_not_refused_for_it():
    assert check(cfg={"home": "/usr/bin"}, base="3.11.2") == []


def test_every_problem_is_reported_not_only_the_first():
    found = check({"os": "centos 9", "gpus": []}, cfg=None, gpus_required=2)
    assert [f.split(" ")[0] for f in found] == ["unsupported", "0", "the"]


def test_describe_says_what_preflight_saw():
    info = {"os": "debian 12", "python": "3.11.2", "free_bytes": 8 << 30,
            "gpus": [GPU, {**GPU, "name": "NVIDIA B300 SXM", "compute_cap": "10.0", "driver": "580.95"}]}
    assert describe(info, "/models/m") == ("debian 12, python 3.11.2, 2x NVIDIA B300 (compute 10.0, 10.3, driver "
                                           "580.82, 580.95), 8.0 GiB free for /models/m")
    assert describe({"os": "debian 12", "python": None}, "/m") == (
        "debian 12, python None, no GPU visible (nvidia-smi absent or empty), free space for /m unknown")
    assert describe({"os": "ubuntu 24.04", "python": "3.12.3", "free_bytes": 0, "gpus": None}, "/m").endswith(
        "no GPU visible (nvidia-smi absent or empty), 0 B free for /m")


MISMATCH = ("nvidia-smi exited with status 18: Failed to initialize NVML: Driver/library version mismatch / "
            "NVML library version: 580.95")


def test_a_failing_nvidia_smi_is_named_with_its_words_not_counted_as_no_gpu():
    info = {"os": "ubuntu 24.04", "gpus": [], "gpu_error": MISMATCH}
    (only,) = check(info, gpus_required=8)
    assert only == (f"the GPUs cannot be counted: {MISMATCH}; a driver upgraded without a reboot says this: reboot "
                    "the node (or reload the nvidia kernel modules), then rerun")
    assert describe(info, "/m").startswith(f"ubuntu 24.04, python None, GPUs unknown ({MISMATCH}), ")
    # another failure: its words, and the driver to check
    (only,) = check({**info, "gpu_error": "nvidia-smi exited with status 6: No devices were found"}, gpus_required=1)
    assert only == ("the GPUs cannot be counted: nvidia-smi exited with status 6: No devices were found; check the "
                    "driver (nvidia-smi on the node), or set gpus_required = 0 for a node without GPUs")
    # none required: said, not refused
    assert check(info, gpus_required=0) == []


def test_disk_fits_exactly_at_need_plus_margin_and_checks_every_volume():
    need = 100 << 20
    margin = DISK_MARGIN_BYTES + int(need * 0.02)
    assert disk_problems({"a": {"free": need + margin, "need": need, "dirs": ["/m"]}}) == []
    short = disk_problems({"a": {"free": need + margin - 1, "need": need, "dirs": ["/m"]},
                           "b": {"free": 0, "need": 1 << 20, "dirs": ["/x", "/y"]}})
    assert short[0] == ("not enough disk for /m: 166.0 MiB free, 100.0 MiB still to download + 66.0 MiB margin; "
                        "free space or point model_dir/draft_dir at a larger volume")
    assert short[1].startswith("not enough disk for /x and /y: 0 B free, 1.0 MiB still to download")
    assert disk_problems({"a": {"free": None, "need": 1, "dirs": ["/m"]},
                          "b": {"free": 0, "need": 0, "dirs": ["/n"]}}) == [], "unknown free space or nothing to fetch"
    # A volume skipped for either reason does not end the check of the others.
    after_skipped = disk_problems({"a": {"free": None, "need": 1, "dirs": ["/m"]},
                                   "b": {"free": 0, "need": 1 << 20, "dirs": ["/n"]}})
    assert len(after_skipped) == 1 and after_skipped[0].startswith("not enough disk for /n:")
