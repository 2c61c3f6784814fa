"""Stacks of 2-D planes shown plane by plane: how a rendered view cuts an array's chunks.

Microscopy arrays are ``c, y, x`` or ``t, c, z, y, x``, and their chunks hold one plane or a
few (``1, 1, 1, 128, 128``). An image viewer opens 2-D images, and PNG holds nothing else;
so under ``--format tiff`` and ``png`` a chunk of three or more dimensions is shown as one
file per 2-D plane (its last two dimensions), with every leading dimension a level of the
path. An RGB(A) chunk (three dimensions, the last of 3 or 4 samples, whole in the chunk) is
one picture and stays whole. ``npy`` keeps whole chunks: numpy reads any shape. Pure code.
"""

from __future__ import annotations

from zarrfuse.filesystem.images.formats import FORMATS

__all__ = ["PLANE_FORMATS", "plane_chunks"]

PLANE_FORMATS = ("tiff", "png")


def _rgb(shape: tuple[int, ...], chunks: tuple[int, ...]) -> bool:
    return len(chunks) == 3 and chunks[-1] in (3, 4) and chunks[-1] == shape[-1]


def plane_chunks(
    fmt: str, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The shape of the pieces a view shows as files, ``(1, ..., 1, cy, cx)``, when it shows
    stacks of planes plane by plane; None when it shows whole chunks."""
    assert fmt in FORMATS
    if fmt not in PLANE_FORMATS or len(chunks) < 3 or _rgb(shape, chunks):
        return None
    return (1,) * (len(chunks) - 2) + chunks[-2:]
