"""Byte counts as people read them."""


def human_size(n: float) -> str:
    """``n`` bytes in the largest binary unit below it: "512 B", "8.0 MiB", "554.3 GiB"."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
