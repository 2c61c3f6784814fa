"""The one-line warning ``zarrfuse mount`` prints when ``--suffix`` names a format that the
mounted arrays' files are not (see ``filesystem.suffix_check``): for an array, about it; for a
group, once, naming the arrays concerned (the first of them, for large hierarchies)."""

from __future__ import annotations

from zarr.storage import StorePath

from zarrfuse.api.arrays import read_node
from zarrfuse.api.nodes import V2_NAMES, V3_NAME, StoredNode
from zarrfuse.errors import ZarrFuseError
from zarrfuse.filesystem.images.suffix_check import names_a_format, suffix_mismatch
from zarrfuse.fuse.config import MountConfig
from zarrfuse.zarr_compat import sync

__all__ = ["suffix_warning"]

MAX_NODES = 256
"""Nodes of a group looked at before mounting; the daemon's log covers the rest."""


async def _names(where: StorePath, prefix: str) -> list[str]:
    return sorted([n async for n in where.store.list_dir(prefix)])


def _arrays(store_path: StorePath, node: StoredNode) -> list[tuple[str, StoredNode]]:
    """The arrays at and below ``store_path``, breadth first, at most MAX_NODES nodes."""
    found: list[tuple[str, StoredNode]] = []
    queue = [(store_path, node)]
    seen = 0
    while queue and seen < MAX_NODES:
        here, current = queue.pop(0)
        seen += 1
        if current.node_type == "array":
            found.append((here.path, current))
            continue
        prefix = f"{here.path}/" if here.path else ""

        for name in sync(_names(here, prefix)):
            if name in (V3_NAME, *V2_NAMES):
                continue
            child = StorePath(here.store, f"{prefix}{name}")
            try:
                queue.append((child, sync(read_node(child))))
            except ZarrFuseError:
                continue  # not a node (or a broken one: the mount logs it)
    return found


def suffix_warning(store_path: StorePath, node: StoredNode, config: MountConfig) -> str | None:
    """The warning line for ``config.suffix`` on the source, or None."""
    if config.suffix and config.suffix[0] not in "._-~":  # "tiff": files named 000tiff
        return (f"warning: --suffix {config.suffix} has no leading dot: chunk files are named "
                f"like 000{config.suffix}; did you mean --suffix .{config.suffix}?")
    if not names_a_format(config.suffix):  # .raw, .zst...: no need to walk a group
        return None
    concerned = []
    for path, array in _arrays(store_path, node):
        reason = suffix_mismatch(config.suffix, config.format, array.metadata)
        if reason is not None:
            relative = path[len(store_path.path):].strip("/") or "the array"
            concerned.append((relative, reason))
    if not concerned:
        return None
    if node.node_type == "array":
        return f"warning: --suffix {config.suffix}: {concerned[0][1]}"
    names = ", ".join(name for name, _ in concerned[:5])
    more = f" and {len(concerned) - 5} more" if len(concerned) > 5 else ""
    return (f"warning: --suffix {config.suffix} on {len(concerned)} arrays ({names}{more}): "
            f"{concerned[0][1]}")
