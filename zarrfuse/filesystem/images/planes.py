"""Stacks of 2-D planes shown plane by plane: how a rendered view cuts an array's chunks
(docs/views.md, 'Planes of multi-axis images'). Pure code.
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
    """The shape ``(1, ..., 1, cy, cx)`` of the pieces a plane view shows as files; None for
    whole chunks. ``names``: dimension names (a named last one must name samples to be RGB).
    ``colour``: a channel axis shown as colour, whose piece holds all channels."""
    assert fmt in FORMATS
    if fmt not in PLANE_FORMATS or len(chunks) < 3 or _rgb(shape, chunks, names):
        return None
    piece = [1] * (len(chunks) - 2) + list(chunks[-2:])
    if colour is not None:
        piece[colour] = shape[colour]
    return tuple(piece)


def picture_dims(fmt: str, ndim: int, planes: bool) -> tuple[int, int] | None:
    """The dimensions that are a file picture's rows and columns: the last two of a plane
    view, the first two of an RGB(A) chunk or a 2-D array; None for NPY and 1-D."""
    if fmt not in PLANE_FORMATS or ndim < 2:
        return None
    return (ndim - 2, ndim - 1) if planes else (0, 1)
