"""Where a picture view (``--format tiff``/``png``) shows a 2-D image's tile: every file
named by its position (docs/views.md), ``planes/y001/y001-x002.tiff``."""

from __future__ import annotations


def tile_path(row: int, col: int, suffix: str, axes: tuple[str, str] = ("y", "x")) -> str:
    """The tile at grid ``(row, col)``; ``axes``: the array's names of its two dimensions
    (``y`` and ``x`` when it names none). Grids under 1000 tiles a side."""
    y, x = axes
    return f"planes/{y}{row:03d}/{y}{row:03d}-{x}{col:03d}.{suffix}"
