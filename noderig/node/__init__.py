"""Scripts that run ON the node under its own Python (stdlib only), shipped by the deploy."""

from pathlib import Path


def script_path(name: str) -> Path:
    return Path(__file__).with_name(name)
