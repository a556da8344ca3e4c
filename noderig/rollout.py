"""Rolling a change through a serving fleet: which nodes restart in which batch, and when
the rollout stops. Pure: names in, batches out; the deploy (``operations/rollout.py``) runs
the batches.

The settings follow Ansible's ``serial`` and ``max_fail_percentage``:

    parse_rollout("1,25%,100%")          -> (1, "25%", "100%")
    batch_sizes(spec, 10)                -> [1, 2, 7]   (percentages of the restarting set,
                                                          rounded down, at least 1; the last
                                                          size repeats until no node is left)
    plan_batches(spec, names)            -> [["b300"], ["b300-2"], ...]
    should_stop(failed, size, max_pct)   -> the sentence that stops the rollout, or None

Only the nodes whose server must restart are counted and batched: a node with nothing to
change is not in any batch, and a node that serves nothing yet is provisioned with the
others, all at once (there is nothing to keep up).
"""

from __future__ import annotations

import hashlib
import json
import re

from .checkpoint_plan import content

ROLLOUT_SETTING = "rollout"
MAX_FAIL_SETTING = "max_fail_percentage"
_SIZE = re.compile(r"^(?:[1-9][0-9]{0,5}|(?:[1-9][0-9]?|100)%)\Z")


def parse_rollout(value) -> tuple:
    """``rollout`` as a tuple of batch sizes: ints and ``"N%"`` strings. Accepts an int, a
    string (``"1"``, ``"25%"``, ``"1,25%,100%"``) or a list of those; raises ValueError with
    the sentence to show for anything else."""
    if isinstance(value, bool):
        raise ValueError(_bad(value))
    items = value if isinstance(value, (list, tuple)) else [value]
    sizes = []
    for item in items:
        parts = [item] if isinstance(item, int) and not isinstance(item, bool) else None
        if parts is None:
            if not isinstance(item, str):
                raise ValueError(_bad(value))
            parts = [p.strip() for p in item.split(",")]
        for part in parts:
            text = str(part)
            if not _SIZE.match(text):
                raise ValueError(_bad(value))
            sizes.append(text if text.endswith("%") else int(text))
    if not sizes:
        raise ValueError(_bad(value))
    return tuple(sizes)


def _bad(value) -> str:
    return (f"inventory value {ROLLOUT_SETTING}={value!r} must be a batch size (a number of nodes such as 1, or a "
            "percentage from 1% to 100% such as 25%) or a comma list of them such as 1,25%,100%")


def max_fail_problem(value) -> str | None:
    """The sentence refusing a ``max_fail_percentage`` that is not an integer 0-100, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        return (f"inventory value {MAX_FAIL_SETTING}={value!r} must be an integer from 0 to 100 (the share of a "
                "batch's nodes that may fail before the rollout stops; 0: stop at the first failure)")
    return None


def _size(item, total: int) -> int:
    """One batch size: a number as is; a percentage of ``total``, rounded down, at least 1."""
    if isinstance(item, str):
        return max(int(item[:-1]) * total // 100, 1)
    return item


def batch_sizes(spec: tuple, total: int) -> list[int]:
    """The sizes of the batches that restart ``total`` nodes: one per item of ``spec``, the
    last repeated until every node has its batch; the last batch takes what is left."""
    sizes, left, i = [], total, 0
    while left > 0:
        size = min(_size(spec[min(i, len(spec) - 1)], total), left)
        sizes.append(size)
        left -= size
        i += 1
    return sizes


def plan_batches(spec: tuple, names: list[str]) -> list[list[str]]:
    """``names`` (the nodes that must restart, in inventory order) cut into batches."""
    batches, start = [], 0
    for size in batch_sizes(spec, len(names)):
        batches.append(list(names[start:start + size]))
        start += size
    return batches


def should_stop(failed: int, size: int, max_fail_percentage: int) -> str | None:
    """Whether the rollout stops after a batch of ``size`` nodes of which ``failed`` failed
    (Ansible's rule: more than ``max_fail_percentage`` percent of the batch, or all of it);
    the sentence saying why, or None to go on."""
    if failed <= 0 or size <= 0:
        return None
    share = failed * 100 / size
    if share > max_fail_percentage:
        return (f"{failed} of {size} node(s) of the batch failed ({share:.0f}%, more than "
                f"{MAX_FAIL_SETTING}={max_fail_percentage}%)")
    if failed >= size:  # Ansible stops on a batch that failed whole, whatever the percentage
        return f"every node of the batch failed ({failed} of {size})"
    return None


def checkpoint_generation(live: str, manifest: dict) -> str:
    """Where a new revision of a checkpoint is prepared beside the live one (a server runs
    from it): ``<live>.noderig/<digest of its files and their digests>``. Named by content, as
    a venv generation is: a rerun finds what a killed one began."""
    digest = hashlib.sha256(json.dumps(sorted(content(manifest).items())).encode()).hexdigest()[:16]
    return f"{generations(live)}/{digest}"


def venv_generation(venv: str, listing: dict) -> str:
    """Where a venv with the reference's ``listing`` (the TreeListing fact) is prepared beside
    the live one: ``<venv>.noderig/<digest of the listing>``. Named by content, so a rerun
    finds what a killed one began, and a rollback target is the directory it came from."""
    digest = hashlib.sha256(json.dumps(sorted(listing.items()), default=list).encode()).hexdigest()[:16]
    return f"{generations(venv)}/{digest}"


def generations(live: str) -> str:
    """The directory of a venv's or a checkpoint's generations (beside it: the path itself is
    a symlink to one, switched at the node's restart; a venv's scripts keep their absolute
    shebangs, the unit keeps its ``--model-path``)."""
    return f"{live}.noderig"
