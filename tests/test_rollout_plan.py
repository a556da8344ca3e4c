"""Rolling batches, decided without hosts: Ansible's ``serial`` semantics for ``rollout``
(numbers, percentages of the nodes that restart, rounded down and at least one, the last size
repeating) and its ``max_fail_percentage`` rule. The expected batches are written out by hand."""

from __future__ import annotations

import pytest

from noderig.rollout import batch_sizes, parse_rollout, plan_batches, should_stop, checkpoint_generation

from tests.test_inventory_check import check


@pytest.mark.parametrize("value,expected", [
    (1, (1,)), ("1", (1,)), ("25%", ("25%",)), ("1,25%,100%", (1, "25%", "100%")),
    (" 1 , 50% ", (1, "50%")), ([1, "25%", "100%"], (1, "25%", "100%")), (["1,2", 3], (1, 2, 3)),
    ("100%", ("100%",)), ("2", (2,)),
])
def test_rollout_values_that_parse(value, expected):
    assert parse_rollout(value) == expected


@pytest.mark.parametrize("value", [0, "0", -1, "-1", "0%", "101%", "1.5", "", ",", "1,", "a", "25 %", True, None,
                                   [], ["1", None], 1.0, "1;rm -rf /", "%", "50%%"])
def test_rollout_values_refused_with_a_sentence(value):
    with pytest.raises(ValueError) as e:
        parse_rollout(value)
    assert f"rollout={value!r}" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("spec,total,expected", [
    ((1,), 3, [1, 1, 1]),                      # one at a time
    (("100%",), 3, [3]),                       # all at once
    (("25%",), 3, [1, 1, 1]),                  # 25% of 3 is 0.75: rounded down, but at least 1
    (("25%",), 10, [2, 2, 2, 2, 2]),           # 2.5 -> 2, repeated
    ((1, "25%", "100%"), 10, [1, 2, 7]),       # Ansible's canary example: the last takes the rest
    ((1, "25%", "100%"), 3, [1, 1, 1]),
    ((1, "25%", "100%"), 1, [1]),
    ((2, 5), 20, [2, 5, 5, 5, 3]),             # the last size repeats, the last batch is what is left
    ((5,), 3, [3]),                            # a size above the count: one batch
    (("50%",), 5, [2, 2, 1]),
    ((1,), 0, []),                             # nothing restarts: no batch
])
def test_batch_sizes(spec, total, expected):
    assert batch_sizes(spec, total) == expected


def test_batches_keep_the_order_given_and_every_node_once():
    names = ["n1", "n2", "n3", "n4", "n5"]
    assert plan_batches((1, "50%"), names) == [["n1"], ["n2", "n3"], ["n4", "n5"]]
    assert plan_batches(("100%",), names) == [names]


@pytest.mark.parametrize("failed,size,max_pct,stops", [
    (0, 1, 0, False), (1, 1, 0, True),           # the canary failed
    (1, 4, 0, True),                             # any failure at 0
    (1, 4, 25, False),                           # 25% is not more than 25%
    (2, 4, 25, True),
    (1, 3, 50, False), (2, 3, 50, True),
    (3, 3, 100, True),                           # a batch that failed whole stops even at 100 (Ansible)
    (2, 3, 100, False),
])
def test_when_the_rollout_stops(failed, size, max_pct, stops):
    why = should_stop(failed, size, max_pct)
    assert (why is not None) == stops
    if stops:
        assert f"{failed} of {size}" in why


def test_the_inventory_check_names_both_settings():
    assert problems_of(rollout="1,25%,100%", max_fail_percentage=0) == []
    assert any("rollout='0%'" in p for p in problems_of(rollout="0%"))
    for bad in (-1, 101, "10", 1.5, True, None):
        assert any(f"max_fail_percentage={bad!r}" in p for p in problems_of(max_fail_percentage=bad)), bad


def problems_of(**changes) -> list[str]:
    return [p for p in check(**changes) if "rollout" in p or "max_fail_percentage" in p]


# A checkpoint revision prepared beside the live one is named by what the server will read.

def _manifest(commit: str, files: list[tuple[str, str]]) -> dict:
    return {"commit": commit, "files": [{"path": p, "size": 1, "sha256": d} for p, d in files]}


def test_a_checkpoint_generation_is_named_by_its_files_and_digests_not_by_its_commit():
    a = checkpoint_generation("/models/m", _manifest("1" * 40, [("a.safetensors", "a" * 64)]))
    assert a.startswith("/models/m.noderig/") and len(a) == len("/models/m.noderig/") + 16
    assert checkpoint_generation("/models/m", _manifest("2" * 40, [("a.safetensors", "a" * 64)])) == a
    assert checkpoint_generation("/models/m", _manifest("1" * 40, [("a.safetensors", "b" * 64)])) != a
    assert checkpoint_generation("/models/m", _manifest("1" * 40, [("b.safetensors", "a" * 64)])) != a
