"""The service's action (start, restart, none) and its reason, from facts."""

from noderig.service_plan import marker, plan_service

INPUTS = {"unit": "/etc/systemd/system/sglang.service", "environment": "/etc/noderig/sglang.env",
          "venv": marker("venv")}
RUNNING = {"active": "active", "enabled": "enabled", "need_reload": False, "started": 1_800_000_000.5}


def test_running_with_nothing_newer_needs_nothing():
    plan = plan_service(RUNNING, {p: 1_700_000_000.0 for p in INPUTS.values()}, INPUTS, [])
    assert (plan.action, plan.reload, plan.enable, plan.changes) == ("none", False, False, False)
    assert "running since 2027-01-15 08:00:00 UTC" in plan.reason


def test_an_input_written_after_the_start_means_a_restart_naming_it():
    # What a deploy killed between writing the environment file and restarting leaves.
    mtimes = {INPUTS["unit"]: 1_700_000_000.0, INPUTS["environment"]: 1_800_000_000.6}
    plan = plan_service(RUNNING, mtimes, INPUTS, [])
    assert plan.action == "restart"
    assert plan.reason.startswith("the environment changed since it started")


def test_a_change_in_this_run_means_a_restart_and_a_unit_change_a_reload():
    plan = plan_service(RUNNING, {}, INPUTS, ["unit", "venv"])
    assert (plan.action, plan.reload) == ("restart", True)
    assert "the unit and venv changed" in plan.reason


def test_a_missing_marker_is_not_a_change():
    assert plan_service(RUNNING, {INPUTS["unit"]: 1.0}, INPUTS, []).action == "none"


def test_a_stopped_or_failed_service_is_started_and_a_disabled_one_enabled():
    for active in ("inactive", "failed"):
        plan = plan_service({**RUNNING, "active": active, "enabled": "disabled"}, {}, INPUTS, [])
        assert (plan.action, plan.enable) == ("start", True)
        assert plan.reason == f"it is {active}"


def test_systemd_holding_a_stale_unit_is_reloaded_even_with_no_change_in_this_run():
    plan = plan_service({**RUNNING, "need_reload": True}, {}, INPUTS, [])
    assert plan.reload and plan.changes


def test_an_unknown_start_time_restarts_rather_than_guess():
    assert plan_service({**RUNNING, "started": None}, {}, INPUTS, []).action == "restart"


def test_systemd_timestamps_parse_to_the_microsecond():
    from operations.facts import systemd_timestamp

    assert systemd_timestamp("Wed 2026-12-02 16:11:56.745487 UTC") == 1796227916.745487
    assert systemd_timestamp("") is None and systemd_timestamp("n/a") is None


def test_a_unit_enabled_at_runtime_or_static_is_not_enabled_again():
    for enabled in ("enabled", "enabled-runtime", "static"):
        assert plan_service({**RUNNING, "enabled": enabled}, {}, INPUTS, []).enable is False
    for enabled in ("disabled", "masked", None):
        assert plan_service({**RUNNING, "enabled": enabled}, {}, INPUTS, []).enable is True


def test_a_unit_systemd_does_not_know_is_started_saying_so():
    plan = plan_service({"enabled": "enabled"}, {}, INPUTS, ["unit"])
    assert (plan.action, plan.reason, plan.reload, plan.enable) == ("start", "it is unknown", True, False)


def test_a_running_unit_whose_start_time_is_unknown_is_restarted_keeping_reload_and_enable():
    status = {**RUNNING, "started": None, "need_reload": True, "enabled": "disabled"}
    plan = plan_service(status, {}, INPUTS, [])
    assert (plan.action, plan.reason, plan.reload, plan.enable) == ("restart", "its start time is unknown", True, True)


def test_an_input_written_in_the_same_instant_as_the_start_is_not_newer():
    started = RUNNING["started"]
    plan = plan_service(RUNNING, {INPUTS["unit"]: started}, INPUTS, [])
    assert plan.action == "none"
    plan = plan_service({**RUNNING, "started": 0.5}, {}, INPUTS, [])
    assert plan.action == "none", "an input that does not exist is not newer than any start"


def test_a_restart_keeps_the_enable_decision_and_names_three_changes_in_order():
    plan = plan_service({**RUNNING, "enabled": "disabled"}, {}, INPUTS, ["unit", "environment", "venv"])
    assert plan.enable is True
    assert plan.reason.startswith("the unit, environment and venv changed since it started at ")
    assert "the unit and venv changed" in plan_service(RUNNING, {}, INPUTS, ["unit", "venv"]).reason
