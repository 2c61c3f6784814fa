"""Every byte of a whole-image (OME-)TIFF except tile contents, computed from shape, tiles
and dtype without I/O (tiles are uncompressed, so every offset is arithmetic); which tile
sides and sample types such a file can have. Layout: docs/views.md, 'Inside a whole image'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from zarrfuse.errors import ConfigurationError
from zarrfuse.tiff.ifd import (
    ASCII,
    BIGTIFF,
    CLASSIC,
    IFD,
    IFD8,
    LONG,
    SAMPLE_FORMATS,
    SHORT,
    TILE_MULTIPLE,
    Flavour,
    file_header,
    ifd_length,
    write_ifd,
)

__all__ = ["MAX_TILE_SIDE", "ImageLevel", "TileSpan", "WholeImagePlan", "image_dtype_check",
           "tile_array", "tile_size_for"]

CLASSIC_LIMIT = 2**32  # classic TIFF offsets are 32-bit: the whole file must stay below
DATA_ALIGNMENT = 4096
LARGE_DATA_ALIGNMENT = 1 << 20
LARGE_FILE = 64 << 20
"""Tiles of files this large start past a 1 MiB boundary (why: docs/views.md, 'Whole images')."""
HEADER_BUFFER = 1 << 20
READ_AHEAD_GAP = 2 << 20
"""Free bytes between the header and the first tile: twice the kernel's read-ahead on a mount."""

CHOSEN_MULTIPLE = 32  # tile sides zarrfuse chooses: tiles of a multiple of 1024 bytes
MAX_TILE_SIDE = 4096
"""Cap of :func:`tile_size_for`: every reader buffers a tile whole, and TIFF's byte counts
are 32-bit."""
_ITEMSIZES = {"u": (1, 2, 4, 8), "i": (1, 2, 4, 8), "f": (2, 4, 8)}


def tile_size_for(chunk_len: int) -> int:
    """The TIFF tile side for chunks ``chunk_len`` long (pass ``min(chunk_len, image_len)``):
    the chunk's own length on TIFF's 16 grid, else rounded up to 32 so a tile is a multiple of
    1024 bytes (OpenSlide refuses others), capped at :data:`MAX_TILE_SIDE`."""
    if chunk_len < 1:
        raise ConfigurationError(f"chunk length {chunk_len}: must be at least 1")
    if chunk_len % TILE_MULTIPLE == 0:
        return min(chunk_len, MAX_TILE_SIDE)
    return min(-(-chunk_len // CHOSEN_MULTIPLE) * CHOSEN_MULTIPLE, MAX_TILE_SIDE)


def image_dtype_check(dtype: Any) -> None:
    """ConfigurationError unless a whole-image TIFF can store ``dtype``."""
    dt = np.dtype(dtype)
    if dt.fields is not None or dt.itemsize not in _ITEMSIZES.get(dt.kind, ()):
        raise ConfigurationError(
            f"data type {dt} cannot be shown as TIFF: only uint8/16/32/64, int8/16/32/64 and "
            "float16/32/64 have a TIFF sample format (bool, complex, strings and structured "
            "types do not)"
        )


@dataclass(frozen=True)
class ImageLevel:
    """One resolution level: the level array's shape ``[..., Y, X]`` or ``[..., Y, X, S]``
    and its tile (tile_length, tile_width), multiples of 16."""

    shape: tuple[int, ...]
    tile: tuple[int, int]


@dataclass(frozen=True)
class TileSpan:
    """One piece of a byte range that falls in tile data: bytes ``start:stop`` of a tile."""

    level: int
    page: int  # C-order index over the leading dims
    row: int
    col: int
    start: int  # byte offset within the tile's bytes
    stop: int


@dataclass(frozen=True)
class _Level:
    """Derived geometry of one level."""

    height: int
    width: int
    tile_length: int
    tile_width: int
    down: int
    across: int
    tile_nbytes: int

    @property
    def tiles(self) -> int:
        return self.down * self.across

    @property
    def nbytes(self) -> int:
        return self.tiles * self.tile_nbytes


class WholeImagePlan:
    """The byte plan of one whole-image tiled TIFF (layout: docs/views.md, 'Inside a whole
    image'). ``bigtiff``: None picks classic TIFF when the file fits, True or False forces."""

    def __init__(
        self,
        levels: Sequence[ImageLevel],
        dtype: np.dtype,
        *,
        samples: int,
        description: str,
        bigtiff: bool | None = None,
    ) -> None:
        image_dtype_check(dtype)
        self.dtype = np.dtype(dtype).newbyteorder("<")
        if samples not in (1, 3, 4):
            raise ConfigurationError(
                f"{samples} samples per pixel: TIFF images here are gray (1), RGB (3) or RGBA (4)"
            )
        if not levels:
            raise ConfigurationError("an image needs at least one level")
        self.samples = samples
        self.levels = tuple(levels)
        plane = 2 if samples == 1 else 3
        lead = None
        derived = []
        for i, level in enumerate(self.levels):
            shape = tuple(int(n) for n in level.shape)
            if len(shape) < plane or (samples > 1 and shape[-1] != samples):
                raise ConfigurationError(
                    f"level {i} shape {list(shape)}: expected [..., Y, X]"
                    + (f" with {samples} samples last" if samples > 1 else "")
                )
            if lead is None:
                lead = shape[:-plane]
            elif shape[:-plane] != lead:
                raise ConfigurationError(
                    f"level {i} shape {list(shape)}: its leading dims differ from level 0's "
                    f"{list(lead)}"
                )
            height, width = shape[-plane], shape[-plane + 1]
            tl, tw = (int(t) for t in level.tile)
            if min(height, width) < 1 or any(n < 0 for n in shape):
                raise ConfigurationError(f"level {i} shape {list(shape)}: an empty image")
            self._check_tile(i, tl, tw, width)
            nbytes = tl * tw * samples * self.dtype.itemsize
            if nbytes >= 2**32:
                raise ConfigurationError(
                    f"level {i} tile {[tl, tw]}: {nbytes} bytes, over TIFF's 32-bit byte counts"
                )
            derived.append(
                _Level(height, width, tl, tw, -(-height // tl), -(-width // tw), nbytes)
            )
        assert lead is not None
        self.leading_shape: tuple[int, ...] = lead
        self.pages: int = math.prod(lead)
        if self.pages < 1:
            raise ConfigurationError(f"leading shape {list(lead)}: no pages")
        self._levels = tuple(derived)
        self._description = description.encode("ascii", "xmlcharrefreplace") + b"\x00"
        self.page_nbytes = sum(level.nbytes for level in self._levels)
        self._level_base = np.cumsum([0] + [lv.nbytes for lv in self._levels]).tolist()
        self._set_geometry(CLASSIC)
        if bigtiff is False and self.size >= CLASSIC_LIMIT:
            raise ConfigurationError(
                f"the file would be {self.size} bytes: classic TIFF holds under 4 GiB"
            )
        self.flavour: Flavour = BIGTIFF if bigtiff or self.size >= CLASSIC_LIMIT else CLASSIC
        self._set_geometry(self.flavour)
        self._block = lru_cache(maxsize=8)(self._build_block)

    def _check_tile(self, level: int, length: int, width: int, image_width: int) -> None:
        if length < 1 or width < 1 or length % TILE_MULTIPLE or width % TILE_MULTIPLE:
            raise ConfigurationError(
                f"level {level} tile {[length, width]}: TIFF tile sides are positive "
                f"multiples of {TILE_MULTIPLE} (see tile_size_for)"
            )

    # --- sizes ---------------------------------------------------------------------------

    def _ifd_lengths(self, flavour: Flavour) -> tuple[int, int, list[int]]:
        """Lengths of page 0's level-0 IFD, another page's level-0 IFD, each reduced IFD."""
        zeros = {i: np.zeros(lv.tiles, np.uint64) for i, lv in enumerate(self._levels)}
        subifds = [0] * (len(self._levels) - 1)
        first = ifd_length(self._entries(0, 0, zeros[0], flavour, subifds), flavour)
        other = ifd_length(self._entries(0, 1, zeros[0], flavour, subifds), flavour)
        reduced = [
            ifd_length(self._entries(i, 1, zeros[i], flavour, []), flavour)
            for i in range(1, len(self._levels))
        ]
        return first, other, reduced

    def _set_geometry(self, flavour: Flavour) -> None:
        first, other, reduced = self._ifd_lengths(flavour)
        self._first_ifd, self._other_ifd, self._reduced_ifds = first, other, reduced
        self._first_block = first + sum(reduced)
        self._other_block = other + sum(reduced)
        self.header_length = (
            flavour.file_header + self._first_block + (self.pages - 1) * self._other_block
        )
        tiles = self.pages * self.page_nbytes
        large = tiles >= LARGE_FILE
        align = LARGE_DATA_ALIGNMENT if large else DATA_ALIGNMENT
        header_read = max(self.header_length, HEADER_BUFFER) if large else self.header_length
        unread = header_read + min(READ_AHEAD_GAP, tiles)
        self.data_start: int = -(-unread // align) * align
        self.size: int = self.data_start + tiles

    # --- tiles ---------------------------------------------------------------------------

    def tile_nbytes(self, level: int) -> int:
        return self._levels[level].tile_nbytes

    def tile_grid(self, level: int) -> tuple[int, int]:
        """Tiles down and across one page of ``level``."""
        lv = self._levels[level]
        return lv.down, lv.across

    def _level_start(self, level: int, page: int) -> int:
        return self.data_start + page * self.page_nbytes + self._level_base[level]

    def tile_offset(self, level: int, page: int, row: int, col: int) -> int:
        lv = self._levels[level]
        if not (0 <= page < self.pages and 0 <= row < lv.down and 0 <= col < lv.across):
            raise IndexError(f"no tile {(level, page, row, col)}")
        return self._level_start(level, page) + (row * lv.across + col) * lv.tile_nbytes

    def tile_region(self, level: int, page: int, row: int, col: int) -> tuple[slice | int, ...]:
        """The region of the level array that tile shows: the page's leading index, then Y
        and X slices cropped to the image, then all samples (RGB/RGBA)."""
        lv = self._levels[level]
        lead = np.unravel_index(page, self.leading_shape) if self.leading_shape else ()
        y = slice(row * lv.tile_length, min((row + 1) * lv.tile_length, lv.height))
        x = slice(col * lv.tile_width, min((col + 1) * lv.tile_width, lv.width))
        return (*(int(i) for i in lead), y, x, *((slice(None),) if self.samples > 1 else ()))

    def tile_shape(self, level: int) -> tuple[int, ...]:
        """A full tile's array shape: (tile_length, tile_width[, samples])."""
        lv = self._levels[level]
        return (lv.tile_length, lv.tile_width, *((self.samples,) if self.samples > 1 else ()))

    def spans(self, start: int, stop: int) -> list[TileSpan]:
        """The tile pieces of bytes ``start:stop`` (within ``[data_start, size)``), in file
        order."""
        if not self.data_start <= start <= stop <= self.size:
            raise ValueError(f"range {start}:{stop} is not within tile data "
                             f"{self.data_start}:{self.size}")
        out: list[TileSpan] = []
        at = start
        while at < stop:
            page, in_page = divmod(at - self.data_start, self.page_nbytes)
            level = 0
            while in_page >= self._level_base[level + 1]:
                level += 1
            lv = self._levels[level]
            index, in_tile = divmod(in_page - self._level_base[level], lv.tile_nbytes)
            row, col = divmod(index, lv.across)
            end = min(lv.tile_nbytes, in_tile + stop - at)
            out.append(TileSpan(level, page, row, col, in_tile, end))
            at += end - in_tile
        return out

    # --- the header ----------------------------------------------------------------------

    def _entries(
        self, level: int, page: int, offsets: np.ndarray, flavour: Flavour, subifds: list[int]
    ) -> list[tuple[int, int, Any]]:
        """The IFD entries of one page of one level, sorted by tag: (tag, type, values)."""
        lv = self._levels[level]
        spp = self.samples
        entries: list[tuple[int, int, Any]] = [
            (254, LONG, [0 if level == 0 else 1]),  # NewSubfileType: reduced resolution
            (256, LONG, [lv.width]),
            (257, LONG, [lv.height]),
            (258, SHORT, [self.dtype.itemsize * 8] * spp),
            (259, SHORT, [1]),  # no compression
            (262, SHORT, [2 if spp > 1 else 1]),  # RGB or MinIsBlack
        ]
        if level == 0 and page == 0:
            entries.append((270, ASCII, self._description))
        entries += [
            (277, SHORT, [spp]),
            (284, SHORT, [1]),  # contiguous samples: a tile holds whole pixels
            (322, LONG, [lv.tile_width]),
            (323, LONG, [lv.tile_length]),
            (324, flavour.offset_type, offsets),
            (325, LONG, self._counts[level]),
        ]
        if level == 0 and len(self._levels) > 1:
            entries.append((330, IFD8 if flavour.bigtiff else IFD, subifds))
        if spp == 4:
            entries.append((338, SHORT, [2]))  # unassociated alpha
        entries.append((339, SHORT, [SAMPLE_FORMATS[self.dtype.kind]] * spp))
        return entries

    @cached_property
    def _counts(self) -> list[np.ndarray]:
        """Each level's TileByteCounts (every tile is stored full size)."""
        return [np.full(lv.tiles, lv.tile_nbytes, np.uint32) for lv in self._levels]

    def _block_start(self, page: int) -> int:
        """Offset of page ``page``'s block (its level-0 IFD, then its SubIFDs)."""
        start = self.flavour.file_header
        return start if page == 0 else start + self._first_block + (page - 1) * self._other_block

    def ifd_offset(self, page: int, level: int = 0) -> int:
        """Offset of the IFD of ``page`` at ``level``."""
        at = self._block_start(page) + (self._first_ifd if page == 0 else self._other_ifd)
        return self._block_start(page) if level == 0 else at + sum(self._reduced_ifds[: level - 1])

    def _build_block(self, page: int) -> bytes:
        """The bytes of one page's block."""
        flavour = self.flavour
        out = bytearray()
        subifds = [self.ifd_offset(page, level) for level in range(1, len(self._levels))]
        for level, lv in enumerate(self._levels):
            offsets = self._level_start(level, page) + np.arange(
                lv.tiles, dtype=np.uint64
            ) * np.uint64(lv.tile_nbytes)
            entries = self._entries(level, page, offsets, flavour, subifds)
            nxt = 0
            if level == 0 and page + 1 < self.pages:
                nxt = self.ifd_offset(page + 1)
            write_ifd(out, entries, flavour, "<", at=self.ifd_offset(page, level), next_ifd=nxt)
        return bytes(out)

    def header_bytes(self, start: int, stop: int) -> bytes:
        """Bytes ``start:stop`` of the header (within ``[0, data_start)``), building only the
        page blocks the range overlaps (the last few are cached)."""
        if not 0 <= start <= stop <= self.data_start:
            raise ValueError(f"range {start}:{stop} is not within the header 0:{self.data_start}")
        parts: list[bytes] = []
        at = start
        first = self.flavour.file_header + self._first_block  # where page 1's block starts
        while at < stop:
            if at < self.flavour.file_header:
                piece, base = file_header(self.flavour, "<"), 0
            elif at >= self.header_length:
                parts.append(bytes(stop - at))
                break
            else:
                page = 0 if at < first else 1 + (at - first) // self._other_block
                piece, base = self._block(page), self._block_start(page)
            chunk = piece[at - base : stop - base]
            parts.append(chunk)
            at += len(chunk)
        return b"".join(parts)


def tile_array(block: np.ndarray, plan: WholeImagePlan, level: int) -> np.ndarray:
    """A tile from the data of its :meth:`~WholeImagePlan.tile_region` (cropped at the
    image's edges): C-contiguous, little-endian, zero-padded to the full tile; its bytes are
    the tile's in the file. A full tile of a chunk is the chunk's own memory (no copy)."""
    full = plan.tile_shape(level)
    data = np.asarray(block)
    data = data.reshape(data.shape[data.ndim - len(full) :]) if data.ndim > len(full) else data
    if data.ndim != len(full) or any(d > f for d, f in zip(data.shape, full, strict=True)):
        raise ValueError(f"block of shape {data.shape} is no region of a {full} tile")
    if data.shape == full:
        return np.ascontiguousarray(data, dtype=plan.dtype)
    tile = np.zeros(full, dtype=plan.dtype)
    tile[tuple(slice(0, n) for n in data.shape)] = data
    return tile
