"""Per-module mutation score from ``mutmut results --all true`` on stdin. Modules whose
mutants this run did not check (a run limited to other modules) are listed as not run, not
as 0%."""

import re
import sys
from collections import Counter, defaultdict

counts: dict[str, Counter] = defaultdict(Counter)
for line in sys.stdin:
    match = re.match(r"\s*([\w.]+)\.x.*__mutmut_\d+: (.+)$", line)
    if match:
        counts[match.group(1)][match.group(2).strip()] += 1
if not counts:
    sys.exit("mutation: mutmut reported no mutants; see `.venv/bin/mutmut run` output")
print(f"{'module':<32} {'mutants':>8} {'killed':>7} {'survived':>9} {'untested':>9} {'score':>6}")
for module, c in sorted(counts.items()):
    total = sum(c.values())
    killed = c["killed"] + c["timeout"]
    checked = killed + c["survived"] + c["no tests"]
    if not checked:
        print(f"{module:<32} {total:>8}   (not run)")
        continue
    unfinished = f"  ({total - checked} not checked: the run stopped early)" if checked < total else ""
    print(f"{module:<32} {total:>8} {killed:>7} {c['survived']:>9} {c['no tests']:>9} "
          f"{100 * killed / checked:>5.1f}%{unfinished}")
