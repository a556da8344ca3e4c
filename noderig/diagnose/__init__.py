"""Post-launch crash diagnosis: name the root cause of a failed SGLang/vLLM launch from its log.

Pure core (no pyinfra, no SSH): `diagnose(text) -> Diagnosis`. The signatures live in
`catalog.toml` beside this file (data, versioned); `report.py` renders a Diagnosis for people
(rich) and machines (JSON). The modules, in the order a log goes through them:

    carried.py     a log carried as data (JSON log records, escaped strings) -> the lines it holds
    panels.py      rich's boxed tracebacks (typer's pretty exceptions) -> the tracebacks Python prints
    normalize.py   raw text -> clean lines with their rank (prefixes, ANSI, wrapped lines)
    tracebacks.py  every Python traceback per rank, and call chains
    catalog.py     catalog.toml and benign.toml loaded and checked (anchors.py: the cheap first pass)
    matching.py    the lines and tracebacks each class's signatures match; the root match
    startup.py     whether anything failed, whether the server reached ready, how far it got
    tokens.py      the second tier: a failure no signature matches, named by its key tokens (tokens.toml)
    outcomes.py    the Diagnosis of each outcome: a known class, unknown, healthy
    result.py      Diagnosis and Evidence
    engine.py      diagnose() and diagnose_lines(): the steps above in order
"""

from .catalog import CATALOG_PATH, Catalog, CatalogError, load_catalog
from .engine import diagnose, diagnose_lines, not_diagnosed
from .normalize import Line, normalize
from .result import Diagnosis, Evidence
from .tracebacks import parse_tracebacks

__all__ = [
    "CATALOG_PATH", "Catalog", "CatalogError", "Diagnosis", "Evidence", "Line",
    "diagnose", "diagnose_lines", "load_catalog", "not_diagnosed", "normalize", "parse_tracebacks",
]
