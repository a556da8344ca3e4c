"""Which fixes the deploy applies itself, decided without a host (noderig.repair). Every remedy
id the catalog names is either planned here or deliberately left to a human."""

from __future__ import annotations

import tomllib

import pytest

from noderig.repair import LEFT_TO_A_HUMAN, Repair, manual_reason, plan_repair, recorded_settings

SETTINGS = {"attention_backend": "flashinfer", "mem_fraction_static": None, "skip_server_warmup": False}


@pytest.mark.parametrize("remedy,expected", [
    ("add_flag:--skip-server-warmup",
     Repair("add_flag:--skip-server-warmup", "skip the server warmup (--skip-server-warmup)",
            settings={"skip_server_warmup": True})),
    ("add_flag:--trust-remote-code",
     Repair("add_flag:--trust-remote-code", "allow the model's remote code (--trust-remote-code)",
            settings={"trust_remote_code": True})),
    ("install_package:python3-dev", Repair("install_package:python3-dev", "install python3-dev", packages=["python3-dev"])),
    ("install_package:cuda-toolkit-12.8",
     Repair("install_package:cuda-toolkit-12.8", "install cuda-toolkit-12.8", packages=["cuda-toolkit-12.8"])),
    ("install_package:g++", Repair("install_package:g++", "install g++", packages=["g++"])),
    ("set:attention_backend=triton",
     Repair("set:attention_backend=triton", "set attention_backend to triton", settings={"attention_backend": "triton"})),
    ("set:mm_attention_backend=sdpa",
     Repair("set:mm_attention_backend=sdpa", "set mm_attention_backend to sdpa", settings={"mm_attention_backend": "sdpa"})),
    ("lower:mem_fraction_static",
     Repair("lower:mem_fraction_static", "lower mem_fraction_static from 0.88 to 0.8", settings={"mem_fraction_static": 0.8})),
    ("reverify_checkpoint",
     Repair("reverify_checkpoint", "re-verify the checkpoint (every file hashed again)", forget_verified=True)),
    ("free_port", Repair("free_port", "move the server to a free port", settings={"port": None})),
])
def test_each_remedy_the_deploy_can_apply_is_planned_exactly(remedy, expected):
    assert plan_repair(remedy, dict(SETTINGS), []) == expected


@pytest.mark.parametrize("remedy", [
    None, "", "provide_hf_token", "enlarge_shm", "resync_venv", "raise:nofile_limit", "raise:mem_fraction_static",
    "lower:cuda_graph_max_bs", "add_flag:--enable-anything", "set:port=1", "set:attention_backend",
    "set:attention_backend=flashinfer",  # already the setting: setting it again cannot help
    "install_package:", "install_package:python3-dev;rm -rf /", "install_package:a b", "install_package:x",
    "install_package:-o", "install_package:Python3-dev", "install_package:a\nb", "unknown_kind:x",
])
def test_what_the_deploy_cannot_or_need_not_do_is_left_to_a_human(remedy):
    assert plan_repair(remedy, dict(SETTINGS), []) is None


def test_a_remedy_already_applied_is_never_applied_again():
    assert plan_repair("add_flag:--skip-server-warmup", dict(SETTINGS), ["add_flag:--skip-server-warmup"]) is None
    assert plan_repair("add_flag:--skip-server-warmup", dict(SETTINGS), ["reverify_checkpoint"]) is not None


def test_a_set_remedy_keeps_everything_after_the_first_equals_sign():
    repair = plan_repair("set:attention_backend=fa3=v2", dict(SETTINGS), [])
    assert repair.settings == {"attention_backend": "fa3=v2"}


@pytest.mark.parametrize("current,new", [(0.9, 0.82), (0.6, 0.52), (0.55, 0.5), (0.777, 0.7)])
def test_lowering_the_memory_fraction_steps_down_to_a_floor(current, new):
    repair = plan_repair("lower:mem_fraction_static", {"mem_fraction_static": current}, [])
    assert repair.settings == {"mem_fraction_static": new}
    assert repair.description == f"lower mem_fraction_static from {current} to {new}"


def test_the_memory_fraction_is_not_lowered_past_its_floor():
    assert plan_repair("lower:mem_fraction_static", {"mem_fraction_static": 0.5}, []) is None
    assert plan_repair("lower:mem_fraction_static", {"mem_fraction_static": 0.45}, []) is None


def test_recorded_repairs_fold_into_the_settings_in_the_order_applied():
    recorded = {"repairs": [{"remedy": "a", "settings": {"attention_backend": "triton", "port": 30001}},
                            {"remedy": "b"},
                            {"remedy": "c", "settings": {"attention_backend": "flashinfer"}}]}
    assert recorded_settings(recorded) == {"attention_backend": "flashinfer", "port": 30001}
    assert recorded_settings(None) == {} and recorded_settings({}) == {}


def test_every_remedy_in_the_catalog_is_known_to_the_planner_or_left_to_a_human_on_purpose():
    from importlib.resources import files

    catalog = tomllib.loads(files("noderig.diagnose").joinpath("catalog.toml").read_text())
    remedies = set()
    for entry in catalog.values() if isinstance(catalog, dict) else []:
        for item in entry if isinstance(entry, list) else [entry]:
            if isinstance(item, dict):
                remedies.add(item.get("remedy") or "")
                remedies.update(r.get("remedy", "") for r in item.get("remedies", []))
    assert len(remedies) > 10, "the catalog's remedies were not found"
    unknown = {r for r in remedies - set(LEFT_TO_A_HUMAN) if plan_repair(r, {"attention_backend": "x"}, []) is None}
    assert not unknown, f"remedy ids in the catalog the deploy neither applies nor leaves to a human: {unknown}"
    assert {"resync_venv", "provide_hf_token", "enlarge_shm", "raise:nofile_limit", ""} <= remedies


@pytest.mark.parametrize("remedy", sorted(LEFT_TO_A_HUMAN))
def test_a_remedy_left_to_a_human_is_never_planned_and_says_why(remedy):
    assert plan_repair(remedy, dict(SETTINGS), []) is None
    assert manual_reason(remedy) == LEFT_TO_A_HUMAN[remedy] and len(manual_reason(remedy)) > 40


def test_a_venv_resync_is_left_to_a_human_because_the_deploy_already_copies_the_venv():
    why = manual_reason("resync_venv")
    assert "copies the reference host's venv" in why and "changes nothing" in why
    assert "Fix the venv on the reference host" in why and "steps=" in why


def test_planned_remedies_and_no_remedy_have_no_manual_reason():
    assert manual_reason("add_flag:--skip-server-warmup") is None
    assert manual_reason("reverify_checkpoint") is None
    assert manual_reason(None) is None
