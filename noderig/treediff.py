"""Comparing two directory listings (path -> (type, size, mtime, mode, link))."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TreeDiff:
    added: list[str] = field(default_factory=list)  # on the source only: to copy
    changed: list[str] = field(default_factory=list)  # on both, different: to copy again
    removed: list[str] = field(default_factory=list)  # on the destination only: to delete
    bytes_to_copy: int = 0

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


def diff_listings(source: dict, destination: dict) -> TreeDiff:
    diff = TreeDiff()
    for path, entry in source.items():
        other = destination.get(path)
        if other is None:
            diff.added.append(path)
        elif tuple(other) != tuple(entry):
            diff.changed.append(path)
        else:
            continue
        if entry[0] == "f":
            diff.bytes_to_copy += entry[1]
    diff.removed = sorted(p for p in destination if p not in source)
    diff.added.sort()
    diff.changed.sort()
    return diff


def summarize(diff: TreeDiff, limit: int = 3) -> str:
    parts = []
    for label, paths in (("new", diff.added), ("changed", diff.changed), ("extra", diff.removed)):
        if paths:
            shown = ", ".join(paths[:limit]) + (", ..." if len(paths) > limit else "")
            parts.append(f"{len(paths)} {label} ({shown})")
    return "; ".join(parts) + f"; {diff.bytes_to_copy / 2**20:.1f} MiB to copy" if parts else "identical"
