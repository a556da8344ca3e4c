"""Stand-in for the SGLang serving runtime, used by the noderig lab where no GPU exists.

Stdlib only. From the outside it behaves like `python -m sglang.launch_server`: real flag
names, SGLang-formatted logs, one scheduler process per TP rank, the HTTP endpoints, and
the failure modes noderig has to diagnose, produced for real where possible (checkpoint
headers are parsed, a C extension is compiled against Python.h) and as real Python
tracebacks through same-named modules where not (the vision tower's flash_attn.cute import).
"""

from sglang.version import __version__

__all__ = ["__version__"]
