"""TIFF's binary structures: tag value types, classic TIFF or BigTIFF, one IFD as bytes; the
byte-level rules (inline or out-of-line values, word alignment, offset sizes) in one place.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ASCII",
    "BIGTIFF",
    "BYTE",
    "CLASSIC",
    "IFD",
    "IFD8",
    "LONG",
    "LONG8",
    "SAMPLE_FORMATS",
    "SHORT",
    "TILE_MULTIPLE",
    "Flavour",
    "file_header",
    "ifd_length",
    "write_ifd",
]

BYTE, SHORT, LONG, ASCII, LONG8 = 1, 3, 4, 2, 16  # TIFF field types
IFD, IFD8 = 13, 18  # offsets of IFDs (SubIFDs): LONG and LONG8 that readers follow as IFDs
_TYPE_SIZES = {BYTE: 1, SHORT: 2, LONG: 4, ASCII: 1, LONG8: 8, IFD: 4, IFD8: 8}
_TYPE_CODES = {SHORT: "H", LONG: "I", LONG8: "Q", IFD: "I", IFD8: "Q"}
SAMPLE_FORMATS = {"u": 1, "i": 2, "f": 3}
TILE_MULTIPLE = 16  # the TIFF spec: tile width and length are multiples of 16


@dataclass(frozen=True)
class Flavour:
    """Classic TIFF or BigTIFF: sizes of the fixed structures and the offset type."""

    bigtiff: bool
    file_header: int
    entry: int
    count_field: int
    inline: int
    """Values of at most this many bytes sit in the entry itself."""
    offset_type: int


CLASSIC = Flavour(False, file_header=8, entry=12, count_field=2, inline=4, offset_type=LONG)
BIGTIFF = Flavour(True, file_header=16, entry=20, count_field=8, inline=8, offset_type=LONG8)


def file_header(flavour: Flavour, order: str) -> bytes:
    """The byte order mark, the version (42, or BigTIFF's 43) and the first IFD's offset."""
    mark = b"II" if order == "<" else b"MM"
    if flavour.bigtiff:
        return mark + struct.pack(order + "HHHQ", 43, 8, 0, 16)
    return mark + struct.pack(order + "HI", 42, 8)


def _pad_even(n: int) -> int:
    return n + (n & 1)  # TIFF: IFDs and out-of-line values start on a word boundary


def _value_bytes(typ: int, values: Any, order: str) -> bytes:
    if typ in (ASCII, BYTE):
        return bytes(values)
    if isinstance(values, np.ndarray):  # 100,000s of tile offsets: struct.pack is 10x slower
        return values.astype(order + _TYPE_CODES[typ], copy=False).tobytes()
    return struct.pack(f"{order}{len(values)}{_TYPE_CODES[typ]}", *values)


def ifd_length(entries: list[tuple[int, int, Any]], flavour: Flavour) -> int:
    length = flavour.count_field + len(entries) * flavour.entry + flavour.inline
    for typ, values in ((t, v) for _, t, v in entries):
        nbytes = _TYPE_SIZES[typ] * len(values)
        if nbytes > flavour.inline:
            length += _pad_even(nbytes)
    return length


def write_ifd(
    out: bytearray,
    entries: list[tuple[int, int, Any]],
    flavour: Flavour,
    order: str,
    *,
    last: bool = False,
    at: int | None = None,
    next_ifd: int | None = None,
) -> None:
    """Append one IFD (entries, next-IFD pointer, then out-of-line values) to ``out``.
    ``at``: its offset in the file when ``out`` is a piece of the header (default
    ``len(out)``); ``next_ifd`` defaults to 0 if ``last``, else right behind its values."""
    start = len(out) if at is None else at
    values_at = start + flavour.count_field + len(entries) * flavour.entry + flavour.inline
    count_code = "Q" if flavour.bigtiff else "H"
    offset_code = "Q" if flavour.bigtiff else "I"
    table = bytearray(struct.pack(order + count_code, len(entries)))
    spill = bytearray()
    for tag, typ, values in entries:
        data = _value_bytes(typ, values, order)
        table += struct.pack(f"{order}HH{offset_code}", tag, typ, len(values))
        if len(data) <= flavour.inline:
            table += data + bytes(flavour.inline - len(data))
        else:
            table += struct.pack(order + offset_code, values_at + len(spill))
            spill += data + bytes(_pad_even(len(data)) - len(data))
    if next_ifd is None:
        next_ifd = 0 if last else values_at + len(spill)
    table += struct.pack(order + offset_code, next_ifd)
    out += table + spill
