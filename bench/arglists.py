"""Command-line list arguments shared by the benchmarks (each runs as a script from this folder)."""

from __future__ import annotations


def ints(text: str) -> list[int]:
    """'1,2, 4' -> [1, 2, 4]: a comma list of integers (argparse's type=)."""
    return [int(x) for x in text.split(",") if x.strip()]
