"""Where an array sits in an OME-Zarr image: its axes' names and, for a writable mount's
full resolution, the levels below. Both are the image group's (the parent, or ngff-zarr's
grandparent ``scale0/image``): v2 arrays have no ``dimension_names``. Blocking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zarrfuse.api.nodes import StoredNode
from zarrfuse.api.ome_zarr import Multiscales, read_multiscales
from zarrfuse.errors import ZarrFuseError

__all__ = ["OmeLevel", "find_ome_level"]

ReadNode = Callable[[str], "tuple[StoredNode, int] | None"]


@dataclass(frozen=True)
class OmeLevel:
    image: str
    """The image group's path."""
    multiscales: Multiscales
    index: int
    """Which level the array is (0: the full resolution)."""
    axis_names: tuple[str, ...] | None
    lower: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Level 0 only, when asked for: the path and metadata of each level below."""


def find_ome_level(path: str, node: StoredNode, read_node: ReadNode, *,
                   with_lower: bool = False) -> OmeLevel | None:
    """The OME-Zarr level the array ``node`` at ``path`` is; None if it is none."""
    if node.node_type != "array":
        return None
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts) - 1, max(-1, len(parts) - 3), -1):
        image = "/".join(parts[:depth])
        try:
            read = read_node(image)
            multiscales = (read_multiscales(read[0].attributes)
                           if read is not None and read[0].node_type == "group" else None)
        except ZarrFuseError:
            return None
        if multiscales is None:
            continue
        relative = "/".join(parts[depth:])
        if relative not in multiscales.paths:
            return None
        index = multiscales.paths.index(relative)
        names = tuple(axis.name for axis in multiscales.axes)
        ndim = len(node.metadata.get("shape", ()))
        lower = _lower(image, multiscales, read_node) if with_lower and index == 0 else ()
        return OmeLevel(image, multiscales, index, names if len(names) == ndim else None,
                        lower)
    return None


def _lower(image: str, multiscales: Multiscales,
           read_node: ReadNode) -> tuple[tuple[str, dict[str, Any]], ...]:
    levels = []
    for dataset in multiscales.paths[1:]:
        level_path = "/".join(p for p in (image, dataset) if p)
        try:
            read = read_node(level_path)
        except ZarrFuseError:
            break
        if read is None or read[0].node_type != "array":
            break
        levels.append((level_path, read[0].metadata))
    return tuple(levels)
