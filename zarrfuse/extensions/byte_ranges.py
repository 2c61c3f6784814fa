"""Byte-range arithmetic over a chunk made of consecutive parts. Pure functions, no I/O.

zarr asks for bytes with three request kinds (``RangeByteRequest``, ``OffsetByteRequest``,
``SuffixByteRequest``) and stores disagree on out-of-range answers: local stores return short
or empty bytes, object stores raise. zarrfuse resolves every request against the known total
size first, with Python slice semantics, so every store gives the same answer and no
out-of-range request is ever sent to a store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest

__all__ = ["Piece", "absolute_span", "pieces_for_span", "slice_views"]


class Piece(NamedTuple):
    """Bytes ``[start, stop)`` of part number ``part``."""

    part: int
    start: int
    stop: int


def absolute_span(request: ByteRequest | None, total: int) -> tuple[int, int]:
    """The ``[start, stop)`` a request selects from ``total`` bytes, clamped like a slice.

    A range past the end selects nothing; a suffix longer than the object selects all of it.
    """
    if request is None:
        return 0, total
    if isinstance(request, RangeByteRequest):
        start = min(max(request.start, 0), total)
        return start, min(max(request.end, start), total)
    if isinstance(request, OffsetByteRequest):
        start = min(max(request.offset, 0), total)
        return start, total
    if isinstance(request, SuffixByteRequest):
        return max(total - max(request.suffix, 0), 0), total
    # zarr's own stores word it so (zarr.testing.store.StoreTests matches it)
    raise TypeError(f"Unexpected byte_range, got {request!r}")


def pieces_for_span(sizes: Sequence[int], start: int, stop: int) -> list[Piece]:
    """The part pieces that make up bytes ``[start, stop)`` of the parts laid end to end."""
    pieces = []
    offset = 0
    for index, size in enumerate(sizes):
        lo, hi = max(start - offset, 0), min(stop - offset, size)
        if lo < hi:
            pieces.append(Piece(index, lo, hi))
        offset += size
        if offset >= stop:
            break
    return pieces


def slice_views(views: Sequence[memoryview], start: int, stop: int) -> list[memoryview]:
    """Bytes ``[start, stop)`` of the views laid end to end, as views (no copy)."""
    sizes = [len(v) for v in views]
    return [views[p.part][p.start : p.stop] for p in pieces_for_span(sizes, start, stop)]
