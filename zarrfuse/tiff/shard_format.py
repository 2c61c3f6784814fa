"""Dual-access shards: ``TIFF header | tiles | shard index``, the header's TileOffsets
pointing at the inner chunks the index points at (docs/dual-access.md). zarr writes tiles
from offset 0: :meth:`TiffShardFormat.shard_with_header` prepends the header and shifts the
index. Bytes to bytes: no FUSE, no store.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import google_crc32c
import numpy as np

from zarrfuse.api.regions import chunk_region
from zarrfuse.errors import ConfigurationError, FileTooBig, WriteRefusedError
from zarrfuse.extensions.byte_ranges import slice_views
from zarrfuse.tiff.compression import TIFF_COMPRESSION, Compression, encode_tile
from zarrfuse.tiff.ifd import (
    ASCII,
    BIGTIFF,
    CLASSIC,
    LONG,
    SAMPLE_FORMATS,
    SHORT,
    TILE_MULTIPLE,
    Flavour,
    file_header,
    ifd_length,
    write_ifd,
)

__all__ = [
    "CLASSIC_LIMIT",
    "EMPTY",
    "TiffShardFormat",
    "bigtiff_needed",
    "check_geometry",
]

EMPTY = 2**64 - 1
"""Offset and length of an inner chunk absent from a shard (the sharding spec's marker)."""
CLASSIC_LIMIT = 2**32 - 1


@dataclass(frozen=True)
class TiffShardFormat:
    """How the shards of one dual-access array are TIFF files, built from ``zarr.json``:
    inner chunks (tiles) are 1 along leading axes, whole along S; a leading index is a page."""

    shape: tuple[int, ...]
    shard_shape: tuple[int, ...]
    tile_shape: tuple[int, ...]
    dtype: np.dtype
    byteorder: str  # "<" or ">", also the TIFF header's II/MM
    compression: Compression
    """How tiles are encoded: ``none``, ``deflate`` or ``zstd`` (see ``compression``)."""
    samples: bool
    bigtiff: bool
    header_part: bool = False
    """The header is stored in its own ``.header`` part, not in the shard's own file."""

    @property
    def chunks_per_shard(self) -> tuple[int, ...]:
        return tuple(s // c for s, c in zip(self.shard_shape, self.tile_shape, strict=True))

    @property
    def index_size(self) -> int:
        return 16 * math.prod(self.chunks_per_shard) + 4

    @property
    def parts(self) -> list[dict[str, Any]]:
        """The ``concat-parts`` parts of this shard format. The header part has a fixed size because
        every shard's header is padded to :attr:`header_size` (edge shards included)."""
        index = {"key_suffix": ".index", "size": self.index_size}
        if self.header_part:
            return [{"key_suffix": ".header", "size": self.header_size}, {"key_suffix": ""}, index]
        return [{"key_suffix": ""}, index]

    @property
    def _flavour(self) -> Flavour:
        return BIGTIFF if self.bigtiff else CLASSIC

    @property
    def _nlead(self) -> int:
        return len(self.shape) - (3 if self.samples else 2)

    @property
    def samples_per_pixel(self) -> int:
        return self.shape[-1] if self.samples else 1

    @cached_property
    def header_size(self) -> int:
        """Bytes of every shard's header: that of a whole (interior) shard. Edge shards have
        fewer tiles or pages and pad their header with zeros to this size."""
        return self._header_length(self.shard_shape)

    def region(self, coords: Sequence[int]) -> tuple[slice, ...]:
        """The part of the array that shard ``coords`` covers (clipped at the array's edge)."""
        return chunk_region(coords, self.shard_shape, self.shape)

    def _image_extent(self, coords: Sequence[int]) -> tuple[int, ...]:
        return tuple(r.stop - r.start for r in self.region(coords))

    def _pages(self, extent: Sequence[int]) -> int:
        return math.prod(extent[: self._nlead])

    def _tiles(self, extent: Sequence[int]) -> tuple[int, int]:
        """Tiles down and across one page of an image of ``extent``."""
        y, x = self._nlead, self._nlead + 1
        return math.ceil(extent[y] / self.tile_shape[y]), math.ceil(extent[x] / self.tile_shape[x])

    def _description(self, extent: Sequence[int]) -> bytes | None:
        """tifffile's "shaped" description, so it reads N-D shards in their N-D shape."""
        if self._nlead == 0:
            return None
        return json.dumps({"shape": list(extent)}).encode() + b"\x00"

    def _entries(
        self, extent: Sequence[int], page: int, offsets: list[int], counts: list[int]
    ) -> list[tuple[int, int, Any]]:
        """The IFD entries of one page, sorted by tag: (tag, type, values)."""
        flavour = self._flavour
        spp = self.samples_per_pixel
        y, x = self._nlead, self._nlead + 1
        rgb = spp in (3, 4) and self.dtype.kind == "u"
        entries: list[tuple[int, int, Any]] = [
            (256, LONG, [extent[x]]),
            (257, LONG, [extent[y]]),
            (258, SHORT, [self.dtype.itemsize * 8] * spp),
            (259, SHORT, [TIFF_COMPRESSION[self.compression]]),
            (262, SHORT, [2 if rgb else 1]),  # RGB or MinIsBlack
        ]
        description = self._description(extent) if page == 0 else None
        if description is not None:
            entries.append((270, ASCII, description))
        entries += [
            (277, SHORT, [spp]),
            (284, SHORT, [1]),  # contiguous samples: a tile holds whole pixels
            (322, LONG, [self.tile_shape[x]]),
            (323, LONG, [self.tile_shape[y]]),
            (324, flavour.offset_type, offsets),
            (325, flavour.offset_type, counts),
        ]
        extra = spp - (3 if rgb else 1)
        if extra > 0:  # 4th sample of RGB: unassociated alpha; others: unspecified
            entries.append((338, SHORT, [2 if rgb else 0] + [0] * (extra - 1)))
        entries.append((339, SHORT, [SAMPLE_FORMATS[self.dtype.kind]] * spp))
        return entries

    def _header_length(self, extent: Sequence[int]) -> int:
        down, across = self._tiles(extent)
        zeros = [0] * (down * across)
        flavour = self._flavour
        length = flavour.file_header
        for page in range(self._pages(extent)):
            entries = self._entries(extent, page, zeros, zeros)
            length += ifd_length(entries, flavour)
        return length

    def _page_tiles(self, extent: Sequence[int], index: np.ndarray) -> Iterator[np.ndarray]:
        """Per page, the (offset, nbytes) of its tiles in TIFF order (rows of tiles)."""
        down, across = self._tiles(extent)
        lead_shape = tuple(extent[: self._nlead])
        for page in range(self._pages(extent)):
            lead = np.unravel_index(page, lead_shape) if lead_shape else ()
            where: tuple[int | slice, ...] = (*map(int, lead), slice(0, down), slice(0, across))
            tiles = index[where]
            yield tiles.reshape(down * across, -1, 2)[:, 0, :]  # one chunk along samples

    def has_missing_tiles(self, coords: Sequence[int], index: np.ndarray) -> bool:
        """Whether a tile of the shard's image is absent from the shard (all fill value)."""
        extent = self._image_extent(coords)
        return any(np.any(t[:, 0] == EMPTY) for t in self._page_tiles(extent, index))

    @cached_property
    def fill_tile(self) -> bytes:
        """One tile of zeros, encoded as the array's tiles are: what TIFF readers are shown
        for tiles zarr left out (libtiff refuses tiles of 0 bytes)."""
        zeros = bytes(math.prod(self.tile_shape) * self.dtype.itemsize)
        return encode_tile(self.compression, zeros)

    def header(self, coords: Sequence[int], index: np.ndarray, fill_at: int | None) -> bytes:
        """The header of shard ``coords`` whose (final) index is ``index``; absent tiles point
        at the :attr:`fill_tile` stored at ``fill_at``."""
        extent = self._image_extent(coords)
        flavour = self._flavour
        order = self.byteorder
        out = bytearray(file_header(flavour, order))
        pages = list(self._page_tiles(extent, index))
        for page, tiles in enumerate(pages):
            present = tiles[:, 0] != EMPTY
            if not np.all(present) and fill_at is None:
                raise AssertionError("absent tiles but no fill tile")
            offsets = np.where(present, tiles[:, 0], fill_at or 0).tolist()
            counts = np.where(present, tiles[:, 1], len(self.fill_tile)).tolist()
            end = max(o + c for o, c in zip(offsets, counts, strict=True))
            if not self.bigtiff and end > CLASSIC_LIMIT:
                raise FileTooBig(
                    f"shard {tuple(coords)} is over 4 GiB: it needs BigTIFF, but the array's "
                    "header is classic TIFF; nothing was written"
                )
            entries = self._entries(extent, page, offsets, counts)
            write_ifd(out, entries, flavour, order, last=page == len(pages) - 1)
        if len(out) > self.header_size:
            raise AssertionError(f"TIFF header of {len(out)} bytes over {self.header_size}")
        return bytes(out) + bytes(self.header_size - len(out))

    def _decode_index(self, raw: bytes, coords: Sequence[int]) -> np.ndarray:
        body, crc = raw[:-4], raw[-4:]
        if google_crc32c.value(body) != int.from_bytes(crc, "little"):
            raise WriteRefusedError(
                f"shard {tuple(coords)}: its index fails its crc32c check; this is not a shard "
                "of this array; nothing was written"
            )
        return np.frombuffer(body, dtype="<u8").reshape(*self.chunks_per_shard, 2).copy()

    @staticmethod
    def _encode_index(index: np.ndarray) -> bytes:
        body = index.astype("<u8").tobytes()
        return body + google_crc32c.value(body).to_bytes(4, "little")

    def shard_with_header(
        self, coords: Sequence[int], views: Sequence[memoryview]
    ) -> list[memoryview]:
        """The shard ``views`` (laid end to end) as a dual-access shard, as views (no copy of
        the tiles): header prepended and index shifted, or a stale header rebuilt in place;
        idempotent. A value that is no shard of this array is refused (WriteRefusedError)
        before anything is written."""
        total = sum(len(v) for v in views)
        size, header_size = self.index_size, self.header_size
        if total < size:
            raise WriteRefusedError(
                f"shard {tuple(coords)}: {total} bytes cannot hold its {size}-byte index; "
                "nothing was written"
            )
        index = self._decode_index(b"".join(slice_views(views, total - size, total)), coords)
        data_end = total - size
        present = index[..., 0] != EMPTY
        starts, lengths = index[..., 0][present], index[..., 1][present]
        if np.any(starts + lengths > data_end) or np.any(starts + lengths < starts):
            raise WriteRefusedError(
                f"shard {tuple(coords)}: its index points past its data; nothing was written"
            )
        fill = self.fill_tile if self.has_missing_tiles(coords, index) else b""
        if data_end >= header_size and np.all(starts >= header_size):
            # Header space is free: rebuild the header in place; the tiles stay where they are.
            tail = b"".join(slice_views(views, data_end - len(fill), data_end))
            has_fill = data_end - len(fill) >= header_size and tail == fill
            fill_at = data_end - len(fill) if has_fill else data_end
            header = self.header(coords, index, fill_at if fill else None)
            if has_fill and header == b"".join(slice_views(views, 0, header_size)):
                return list(views)  # already right
            return [
                memoryview(header),
                *slice_views(views, header_size, data_end),
                *([] if has_fill else [memoryview(fill)]),
                *slice_views(views, data_end, total),
            ]
        # As zarr writes it: tiles from offset 0. Move them behind the header.
        shifted = index.copy()
        shifted[present] += np.array([header_size, 0], dtype=np.uint64)
        fill_at = header_size + data_end
        return [
            memoryview(self.header(coords, shifted, fill_at if fill else None)),
            *slice_views(views, 0, data_end),
            *([memoryview(fill)] if fill else []),
            memoryview(self._encode_index(shifted)),
        ]


def check_geometry(shard_format: TiffShardFormat) -> None:
    """ConfigurationError unless TIFF can hold this geometry and data type."""
    ndim = len(shard_format.shape)
    need = 3 if shard_format.samples else 2
    if ndim < need:
        raise ConfigurationError(f"it has {ndim} dimensions; TIFF images need at least {need}")
    if shard_format.dtype.kind not in SAMPLE_FORMATS:
        raise ConfigurationError(f"its data type {shard_format.dtype} has no TIFF sample format")
    nlead = shard_format._nlead
    if any(t != 1 for t in shard_format.tile_shape[:nlead]):
        raise ConfigurationError(
            f"its inner chunks {list(shard_format.tile_shape)} are not 1 along the leading axes "
            "(each TIFF tile is one 2-D plane)"
        )
    for axis in (nlead, nlead + 1):
        if shard_format.tile_shape[axis] % TILE_MULTIPLE:
            raise ConfigurationError(
                f"its inner chunks {list(shard_format.tile_shape)}: TIFF tile sides must be "
                f"multiples of {TILE_MULTIPLE}"
            )
    if shard_format.samples and not (
        shard_format.tile_shape[-1] == shard_format.shard_shape[-1] == shard_format.shape[-1]
    ):
        raise ConfigurationError("its samples axis is split over inner chunks or shards")


def bigtiff_needed(shard_format: TiffShardFormat, threshold: int = CLASSIC_LIMIT) -> bool:
    """Whether the largest possible shard of ``shard_format`` (as classic TIFF) can exceed
    ``threshold`` bytes: every tile stored, the codec's worst-case expansion included."""
    tile = math.prod(shard_format.tile_shape) * shard_format.dtype.itemsize
    # Over both ZSTD_compressBound and zlib's compressBound (n + n/4096 + n/16384 + 13).
    bound = tile if shard_format.compression == "none" else tile + (tile >> 8) + 1024
    classic = dataclasses.replace(shard_format, bigtiff=False)
    largest = classic.header_size + math.prod(shard_format.chunks_per_shard) * bound
    return largest + classic.index_size > threshold
