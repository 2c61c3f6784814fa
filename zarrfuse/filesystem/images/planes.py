"""Stacks of 2-D planes shown plane by plane: how a rendered view cuts an array's chunks.

Microscopy arrays are ``c, y, x`` or ``t, c, z, y, x``, and their chunks hold one plane or a
few (``1, 1, 1, 128, 128``). An image viewer opens 2-D images, and PNG holds nothing else;
so under ``--format tiff`` and ``png`` a chunk of three or more dimensions is shown as one
file per 2-D plane (its last two dimensions), with every leading dimension a level of the
path. An RGB(A) chunk (three dimensions, the last of 3 or 4 samples, whole in the chunk,
and named as channels or samples if the array names its dimensions) is one picture and
stays whole. ``npy`` keeps whole chunks: numpy reads any shape. Pure code.
"""

from __future__ import annotations

from collections.abc import Sequence

from zarrfuse.filesystem.images.formats import FORMATS

__all__ = ["PLANE_FORMATS", "SAMPLE_AXES", "picture_dims", "plane_chunks"]

PLANE_FORMATS = ("tiff", "png")

SAMPLE_AXES = frozenset({"c", "ch", "channel", "channels", "s", "sample", "samples", "rgb",
                         "rgba", "band", "bands", "colour", "color"})
"""Names of a last dimension that holds a pixel's samples (lower case)."""


def _rgb(
    shape: tuple[int, ...], chunks: tuple[int, ...], names: Sequence[str | None] | None
) -> bool:
    last = names[-1] if names else None
    return (len(chunks) == 3 and chunks[-1] in (3, 4) and chunks[-1] == shape[-1]
            and (last is None or str(last).lower() in SAMPLE_AXES))


def plane_chunks(
    fmt: str, shape: tuple[int, ...], chunks: tuple[int, ...],
    names: Sequence[str | None] | None = None, colour: int | None = None,
) -> tuple[int, ...] | None:
    """The shape of the pieces a view shows as files, ``(1, ..., 1, cy, cx)``, when it shows
    stacks of planes plane by plane; None when it shows whole chunks. ``names``: the array's
    dimension names, if it has them (a named last dimension must name samples to be RGB).
    ``colour``: a leading axis whose channels are one colour picture (``colour_axis``): a
    piece holds all of it (one colour picture per tile), from one chunk or several."""
    assert fmt in FORMATS
    if fmt not in PLANE_FORMATS or len(chunks) < 3 or _rgb(shape, chunks, names):
        return None
    piece = [1] * (len(chunks) - 2) + list(chunks[-2:])
    if colour is not None:
        piece[colour] = shape[colour]
    return tuple(piece)


def picture_dims(fmt: str, ndim: int, planes: bool) -> tuple[int, int] | None:
    """The dimensions that are the rows and columns of a file's picture (``y`` and ``x``
    where the array does not name them): the last two of a plane view, the first two of
    an RGB(A) chunk (``y, x, c``) or a 2-D array; None where a file is no picture (NPY, a
    1-D array)."""
    if fmt not in PLANE_FORMATS or ndim < 2:
        return None
    return (ndim - 2, ndim - 1) if planes else (0, 1)
