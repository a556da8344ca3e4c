"""The end-of-run summary: which host failed, where and why; what changed; commands per host."""

from operations.summary import HostTally, summary_lines


def test_a_failed_host_is_named_with_its_operation_and_the_specific_reason():
    tallies = {
        "b300": HostTally(commands=40, changed=["Prerequisites", "Venv"], unchanged=3),
        "b300-3": HostTally(commands=12, failed_op="Prerequisites",
                            errors=["E: Unable to locate package aria2", "Error: executed 0 commands"]),
    }
    head, ok, bad = summary_lines(tallies, {"b300-3"}, executed=True, wall=12.34)
    assert head == "--> noderig: 2 host(s), 1 failed (b300-3), 12.3 s"
    assert ok.split() [:6] == ["b300", "ok,", "changed", "2", "of", "5"]
    assert 'FAILED at "Prerequisites": E: Unable to locate package aria2; 12 commands' in bad


def test_a_no_op_run_says_no_changes_and_counts_commands():
    (_, line) = summary_lines({"b300": HostTally(commands=33, unchanged=11)}, set(), True, 2.0)
    assert "ok, no changes (11 operations); 33 commands" in line


def test_a_dry_run_says_what_would_change_or_fail_and_that_nothing_changed():
    tallies = {"b300": HostTally(commands=30), "b300-2": HostTally(commands=9, errors=["preflight: 4 GPUs"])}
    head, a, b = summary_lines(tallies, set(), executed=False, wall=1.0,
                               planned={"b300": ["sglang running and enabled"]})
    assert head.endswith("dry run, nothing was changed")
    assert "would change 1: sglang running and enabled" in a
    assert "would FAIL: preflight: 4 GPUs" in b


def test_a_failure_with_only_pyinfras_generic_line_points_to_the_output():
    (_, line) = summary_lines({"h": HostTally(failed_op="x", errors=["Error: executed 1 commands"])}, {"h"}, True, 1)
    assert line.endswith("see the errors above; 0 commands (0.0 s on the host)")


def test_a_rollout_names_each_nodes_part_and_never_says_ok_for_a_rolled_back_node():
    tallies = {
        "b300": HostTally(commands=50, failed_op="Ready, or rolled back (batch 1)",
                          errors=["rolled back: ROLLED BACK in rollout batch 1 of 2, serving its last known good "
                                  "state again"]),
        "b300-2": HostTally(commands=20, failed_op="Rollout batch 2 of 2",
                            errors=["not reached: the rollout stopped after batch 1 (b300): 1 of 1 node(s) failed"]),
        "b300-3": HostTally(commands=20, unchanged=16),
    }
    outcomes = {"b300": "ROLLED BACK in rollout batch 1 of 2, serving its last known good state again",
                "b300-2": "NOT REACHED (batch 2 of 2)", "b300-3": "untouched (serving, nothing to restart)"}
    head, a, b, c = summary_lines(tallies, {"b300", "b300-2"}, True, 3.0, outcomes=outcomes)
    assert head.startswith("--> noderig: 3 host(s), 2 failed (b300, b300-2)")
    assert a.split(None, 1)[1].startswith("ROLLED BACK in rollout batch 1 of 2") and " ok" not in a
    assert b.split(None, 1)[1].startswith("NOT REACHED (batch 2 of 2): not reached: the rollout stopped after batch 1")
    assert c.split(None, 1)[1].startswith("ok, no changes (16 operations); untouched (serving, nothing to restart); ")
