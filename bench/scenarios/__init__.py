"""The scenarios, by name: each a module of this package with ``ISSUE`` (whose floors its
rows hold by default) and ``measure(ctx, **params) -> list[Row]``; the docstring says what it
measures, against what, and its floors. A name maps to its module and parameters."""

from __future__ import annotations

SCENARIOS: dict[str, tuple[str, dict[str, object]]] = {
    "per-file": ("per_file", {}),
    "listing": ("listing", {}),
    "copies": ("copies", {}),
    "whole-image": ("whole_image", {}),
}
