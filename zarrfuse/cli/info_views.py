"""``zarrfuse info``'s views: per view, how many files a mount shows and where the first is.

Built by the mount's own code (``build_filesystem`` of a read-only mount, never mounted), so
the names are the ones a mount gives. Counting walks no chunk grid: an array's files are
its grid's size (a rendered view shows every position; the raw view one file per stored
chunk, so there the count is a bound); only the path to the first file is listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from zarrfuse.errors import ZarrFuseError

ROOT_INODE = 1
"""The root directory's inode (FUSE's)."""

__all__ = ["VIEWS", "ViewSurvey", "survey_views"]

VIEWS = ("raw", "tiff", "png", "npy", "ome-tiff")
"""The ``--format`` values described, in the order shown."""


@dataclass
class ViewSurvey:
    """One view of the source: its files, or why it cannot be shown."""

    fmt: str
    files: int = 0
    exact: bool = True
    """False where ``files`` is a bound (the raw view shows stored chunks only)."""
    first: str | None = None
    refused: str | None = None

    def as_dict(self) -> dict[str, Any]:
        if self.refused is not None:
            return {"format": self.fmt, "refused": self.refused}
        return {"format": self.fmt, "files": self.files, "exact": self.exact,
                "first": self.first}


def survey_views(source: str, storage_options: dict[str, Any] | None) -> list[ViewSurvey]:
    """Every view of ``source``; an empty list where the mount extra is not installed."""
    try:
        import trio  # noqa: PLC0415  (the mount extra)

        from zarrfuse.fuse.config import MountConfig  # noqa: PLC0415
        from zarrfuse.fuse.mount import build_filesystem  # noqa: PLC0415
    except ImportError:
        return []
    out = []
    for fmt in VIEWS:
        config = MountConfig(source=source, mountpoint="/", format=fmt, read_only=True,
                             storage_options=dict(storage_options or {}))
        try:
            fs, _kind = build_filesystem(config)
        except ZarrFuseError as e:
            out.append(ViewSurvey(fmt, refused=str(e)))
            continue
        survey = ViewSurvey(fmt)
        namespace = fs.namespace
        trio.run(_walk, namespace, namespace.node(ROOT_INODE), "", survey)
        out.append(survey)
    return out


async def _walk(namespace: Any, node: Any, prefix: str, survey: ViewSurvey) -> None:
    """Count the files under ``node`` (arrays by arithmetic) and find the first."""
    array = node.in_array()
    if array is not None:  # an array's root: the walk reaches no directory below it
        survey.files += math.prod(array.tree.grid) if array.tree.has_chunks else 0
        survey.exact = survey.exact and array.rendered is not None
        if survey.first is None:
            survey.first = await _first_file(namespace, node, prefix)
        return
    for entry in await namespace.list(node):
        path = f"{prefix}{entry.name}"
        if entry.node.is_dir:
            await _walk(namespace, entry.node, f"{path}/", survey)
        elif entry.node != node.document_named(entry.name):
            survey.files += 1
            survey.first = survey.first or path


async def _first_file(namespace: Any, node: Any, prefix: str) -> str | None:
    """The path of the first chunk file in listing order (None: no chunk stored)."""
    while True:
        entries = [e for e in await namespace.list(node)
                   if e.node != node.document_named(e.name)]
        if not entries:
            return None
        entry = entries[0]
        if not entry.node.is_dir:
            return f"{prefix}{entry.name}"
        node, prefix = entry.node, f"{prefix}{entry.name}/"
