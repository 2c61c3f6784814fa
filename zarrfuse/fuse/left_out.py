"""Which members of a mounted group the view leaves out, and why, said in one line before
mounting (else an empty folder with no reason in sight); refused if it leaves out every
array. Why: docs/mounting.md, "Members left out"."""

from __future__ import annotations

from zarrfuse.errors import ConfigurationError, ZarrFuseError
from zarrfuse.filesystem.tree.catalog import Catalog
from zarrfuse.filesystem.tree.mounted import GroupView

__all__ = ["MAX_NODES", "left_out_note"]

MAX_NODES = 256
"""Nodes walked before mounting; the log covers any beyond."""


async def _walk(catalog: Catalog, root: str) -> int:
    """Visit the group's members breadth first; how many were shown (arrays, images)."""
    shown, seen, queue = 0, 0, [root]
    while queue and seen < MAX_NODES:
        group = queue.pop(0)
        for name in await catalog.child_names(group):
            seen += 1
            view = await catalog.open_child(group, name)
            if isinstance(view, GroupView):
                queue.append(view.path)
            elif view is not None:
                shown += 1
    return shown


async def left_out_note(catalog: Catalog, root: str, source: str) -> str | None:
    """One line naming what the view of the group at ``root`` leaves out and why (None:
    nothing); ConfigurationError when the options leave out every array."""
    shown = await _walk(catalog, root)
    skipped: dict[str, ZarrFuseError] = dict(catalog.skipped)
    if not skipped:
        return None
    by_options = {p: e for p, e in skipped.items() if isinstance(e, ConfigurationError)}
    if shown == 0 and by_options and len(by_options) == len(skipped):
        path, error = next(iter(by_options.items()))
        raise ConfigurationError(
            f"{source}: the options suit no array of the group ({len(by_options)} left out; "
            f"{path}: {error})"
        )
    listed = "; ".join(f"{path} ({error})" for path, error in list(skipped.items())[:5])
    more = f"; and {len(skipped) - 5} more (see the log)" if len(skipped) > 5 else ""
    return f"left out of the view: {listed}{more}"
