"""Post-launch crash diagnosis: name the root cause of a failed SGLang/vLLM launch from its log.

Pure core (no pyinfra, no SSH): `diagnose(text) -> Diagnosis`. The signatures live in
`catalog.toml` beside this file (data, versioned); `report.py` renders a Diagnosis for people
(rich) and machines (JSON).
"""

from .engine import (
    CATALOG_PATH,
    Catalog,
    CatalogError,
    Diagnosis,
    Evidence,
    diagnose,
    diagnose_lines,
    load_catalog,
    parse_tracebacks,
)
from .normalize import Line, normalize

__all__ = [
    "CATALOG_PATH", "Catalog", "CatalogError", "Diagnosis", "Evidence", "Line",
    "diagnose", "diagnose_lines", "load_catalog", "normalize", "parse_tracebacks",
]
