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


def test_a_rollout_names_each_nodes_part_after_the_failed_prefix_and_never_says_ok_for_a_rolled_back_node():
    tallies = {
        "b300": HostTally(commands=50, failed_op="Ready, or rolled back (batch 1)",
                          errors=["sglang.service failed during startup after 3.1 s (result exit-code, status 1); "
                                  "diagnosis: bad_flag"]),
        "b300-2": HostTally(commands=20, failed_op="Rollout batch 2 of 2",
                            errors=["the rollout stopped after batch 1 (b300): 1 of 1 node(s) failed; "
                                    "this node's server was not touched"]),
        "b300-3": HostTally(commands=20, unchanged=16),
        "b300-4": HostTally(commands=30, changed=["sglang.service"], unchanged=15),
    }
    outcomes = {"b300": "ROLLED BACK in rollout batch 1 of 2, serving its last known good state again",
                "b300-2": "NOT REACHED in rollout batch 2 of 2",
                "b300-3": "untouched in the rollout (serving, nothing to restart)",
                "b300-4": "changed in rollout batch 1 of 2"}
    head, a, b, c, d = summary_lines(tallies, {"b300", "b300-2"}, True, 3.0, outcomes=outcomes,
                                     not_reached={"b300-2"})
    assert head == "--> noderig: 4 host(s), 1 failed (b300), 1 not reached (b300-2), 3.0 s"
    assert a == ('b300    FAILED at "Ready, or rolled back (batch 1)": ROLLED BACK in rollout batch 1 of 2, serving '
                 "its last known good state again: sglang.service failed during startup after 3.1 s (result "
                 "exit-code, status 1); diagnosis: bad_flag; 50 commands (0.0 s on the host)")
    assert b == ("b300-2  NOT REACHED in rollout batch 2 of 2: the rollout stopped after batch 1 (b300): 1 of 1 "
                 "node(s) failed; this node's server was not touched; 20 commands (0.0 s on the host)")
    assert c == ("b300-3  ok, no changes (16 operations); untouched in the rollout (serving, nothing to restart); "
                 "20 commands (0.0 s on the host)")
    assert d.split(None, 1)[1].startswith("ok, changed 1 of 16 operations: sglang.service; changed in rollout batch "
                                          "1 of 2; ")


def test_a_failed_host_with_a_rollout_outcome_still_starts_with_failed_at_its_operation():
    # (changed in its batch, then a later operation failed: the failure comes first)
    tallies = {"b300": HostTally(commands=9, failed_op="sglang ready", errors=["smoke request failed: 500"])}
    _, line = summary_lines(tallies, {"b300"}, True, 1.0, outcomes={"b300": "changed in rollout batch 1 of 1"})
    assert line == ('b300  FAILED at "sglang ready": changed in rollout batch 1 of 1: smoke request failed: 500; '
                    "9 commands (0.0 s on the host)")


def test_a_not_reached_node_is_counted_apart_and_never_as_ok_even_without_its_outcome():
    tallies = {"b300-2": HostTally(commands=4, failed_op="Rollout batch 2 of 2", errors=["the rollout stopped"])}
    head, line = summary_lines(tallies, {"b300-2"}, True, 1.0, not_reached={"b300-2"})
    assert head == "--> noderig: 1 host(s), 0 failed, 1 not reached (b300-2), 1.0 s"
    assert line == "b300-2  NOT REACHED: the rollout stopped; 4 commands (0.0 s on the host)"


def test_a_reason_quoting_a_servers_words_stays_one_line_without_their_control_codes():
    # a mirror's error page in a failure's sentence: two lines, a terminal clear and a colour code
    error = "preflight: the Hub answered HTTP 504\nProxy Timeout\x1b[2J\x1b[31m upstream down"
    lines = summary_lines({"b300": HostTally(commands=3, failed_op="Preflight", errors=[error])}, {"b300"}, True, 1.0)
    assert len(lines) == 2 and "\x1b" not in lines[1], lines
    assert lines[1].startswith('b300  FAILED at "Preflight": preflight: the Hub answered HTTP 504 / Proxy Timeout'
                               '\\x1b[2J\\x1b[31m upstream down; 3 commands'), lines[1]


def test_a_reason_naming_a_setting_keeps_its_name():
    # the summary's line is redacted (a token never shows): a setting's name is no token
    error = "preflight on b300: the Hub lists an unsafe path; nothing was written (check hf_endpoint: a Hub you trust)"
    lines = summary_lines({"b300": HostTally(commands=1, failed_op="Preflight", errors=[error])}, {"b300"}, True, 1.0)
    assert "(check hf_endpoint: a Hub you trust); 1 commands" in lines[1], lines[1]
