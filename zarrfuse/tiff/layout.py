"""Dual-access arrays: every shard is a Zarr shard and a complete TIFF file, on the same bytes.

A shard is a TIFF header, the tiles, then the shard index. ``concat-parts`` stores it in one
of two layouts. By default two parts: the shard's own key (``c/.../0.tiff``) holds header and
tiles, a complete TIFF file on disk; ``.index`` holds the index. With ``header_part`` three:
``.header`` (fixed size), the shard's own key (pure tile bytes) and ``.index``; the shard is a
TIFF only when its parts are assembled (a zarrfuse mount does that). The assembled bytes are
the same in both. The header is a TIFF file header and one IFD per page whose
TileOffsets/TileByteCounts point at the very inner-chunk bytes that the shard index points at.
TIFF readers ignore what follows the tiles; zarr's sharding codec reads the index from the end
and never looks at the header.

zarr writes a shard as inner chunks from offset 0 followed by the index; :meth:`TiffShardLayout.
shard_with_header` turns that into the layout above (prepend the header, shift every index
offset by its size). This module knows nothing about FUSE or stores: it maps bytes to bytes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import google_crc32c
import numpy as np
from numcodecs import Zstd

from zarrfuse.api.regions import chunk_region
from zarrfuse.errors import ConfigurationError, FileTooBig, WriteRefusedError
from zarrfuse.extensions.byte_ranges import slice_views
from zarrfuse.extensions.concat_parts_store import register_chunk_finisher

__all__ = [
    "ATTRIBUTE",
    "EMPTY",
    "TiffShardLayout",
    "bigtiff_needed",
    "check_geometry",
    "layout_for",
    "tiff_layout",
]

ATTRIBUTE = "zarrfuse.tiff_shards"  # a name stored in zarr.json: never renamed with modules
"""The attribute that declares an array dual-access: ``{"samples": bool, "bigtiff": bool}``
(``samples``: the last axis holds the samples of a pixel, e.g. RGB)."""
EMPTY = 2**64 - 1
"""Offset and length of an inner chunk absent from a shard (the sharding spec's marker)."""
TIFF_SUFFIXES = (".tif", ".tiff")
TILE_MULTIPLE = 16  # the TIFF spec: tile width and length are multiples of 16
CLASSIC_LIMIT = 2**32 - 1

_ZSTD = 50000  # TIFF Compression value for Zstandard (libtiff, tifffile, GDAL)
_SHORT, _LONG, _ASCII, _LONG8 = 3, 4, 2, 16
_TYPE_SIZES = {_SHORT: 2, _LONG: 4, _ASCII: 1, _LONG8: 8}
_TYPE_CODES = {_SHORT: "H", _LONG: "I", _LONG8: "Q"}
_SAMPLE_FORMATS = {"u": 1, "i": 2, "f": 3}


@dataclass(frozen=True)
class _Flavour:
    """Classic TIFF or BigTIFF: sizes of the fixed structures and the offset type."""

    bigtiff: bool
    file_header: int
    entry: int
    count_field: int
    inline: int
    """Values of at most this many bytes sit in the entry itself."""
    offset_type: int


_CLASSIC = _Flavour(False, file_header=8, entry=12, count_field=2, inline=4, offset_type=_LONG)
_BIGTIFF = _Flavour(True, file_header=16, entry=20, count_field=8, inline=8, offset_type=_LONG8)


def _pad_even(n: int) -> int:
    return n + (n & 1)  # TIFF: IFDs and out-of-line values start on a word boundary


@dataclass(frozen=True)
class TiffShardLayout:
    """How the shards of one dual-access array are TIFF files. Built from ``zarr.json``.

    Axes: ``[*leading, Y, X]`` or, with ``samples``, ``[*leading, Y, X, S]``. Inner chunks
    (TIFF tiles) are 1 along leading axes and whole along S; each leading index of a shard is
    one TIFF page.
    """

    shape: tuple[int, ...]
    shard_shape: tuple[int, ...]
    tile_shape: tuple[int, ...]
    dtype: np.dtype
    byteorder: str  # "<" or ">", also the TIFF header's II/MM
    zstd: bool
    samples: bool
    bigtiff: bool
    header_part: bool = False
    """The header is stored in its own ``.header`` part, not in the shard's own file."""

    # --- geometry ------------------------------------------------------------------------

    @property
    def chunks_per_shard(self) -> tuple[int, ...]:
        return tuple(s // c for s, c in zip(self.shard_shape, self.tile_shape, strict=True))

    @property
    def index_size(self) -> int:
        return 16 * math.prod(self.chunks_per_shard) + 4

    @property
    def parts(self) -> list[dict[str, Any]]:
        """The ``concat-parts`` parts of this layout. The header part has a fixed size because
        every shard's header is padded to :attr:`header_size` (edge shards included)."""
        index = {"key_suffix": ".index", "size": self.index_size}
        if self.header_part:
            return [{"key_suffix": ".header", "size": self.header_size}, {"key_suffix": ""}, index]
        return [{"key_suffix": ""}, index]

    @property
    def _flavour(self) -> _Flavour:
        return _BIGTIFF if self.bigtiff else _CLASSIC

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

    # --- the header ----------------------------------------------------------------------

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
            (256, _LONG, [extent[x]]),
            (257, _LONG, [extent[y]]),
            (258, _SHORT, [self.dtype.itemsize * 8] * spp),
            (259, _SHORT, [_ZSTD if self.zstd else 1]),
            (262, _SHORT, [2 if rgb else 1]),  # RGB or MinIsBlack
        ]
        description = self._description(extent) if page == 0 else None
        if description is not None:
            entries.append((270, _ASCII, description))
        entries += [
            (277, _SHORT, [spp]),
            (284, _SHORT, [1]),  # contiguous samples: a tile holds whole pixels
            (322, _LONG, [self.tile_shape[x]]),
            (323, _LONG, [self.tile_shape[y]]),
            (324, flavour.offset_type, offsets),
            (325, flavour.offset_type, counts),
        ]
        extra = spp - (3 if rgb else 1)
        if extra > 0:  # 4th sample of RGB: unassociated alpha; others: unspecified
            entries.append((338, _SHORT, [2 if rgb else 0] + [0] * (extra - 1)))
        entries.append((339, _SHORT, [_SAMPLE_FORMATS[self.dtype.kind]] * spp))
        return entries

    def _header_length(self, extent: Sequence[int]) -> int:
        down, across = self._tiles(extent)
        zeros = [0] * (down * across)
        flavour = self._flavour
        length = flavour.file_header
        for page in range(self._pages(extent)):
            entries = self._entries(extent, page, zeros, zeros)
            length += _ifd_length(entries, flavour)
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
        return Zstd().encode(zeros) if self.zstd else zeros

    def header(self, coords: Sequence[int], index: np.ndarray, fill_at: int | None) -> bytes:
        """The header of shard ``coords`` whose (final) index is ``index``; absent tiles point
        at the :attr:`fill_tile` stored at ``fill_at``."""
        extent = self._image_extent(coords)
        flavour = self._flavour
        order = self.byteorder
        out = bytearray(b"II" if order == "<" else b"MM")
        if self.bigtiff:
            out += struct.pack(order + "HHHQ", 43, 8, 0, 16)
        else:
            out += struct.pack(order + "HI", 42, 8)
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
            _write_ifd(out, entries, flavour, order, last=page == len(pages) - 1)
        if len(out) > self.header_size:
            raise AssertionError(f"TIFF header of {len(out)} bytes over {self.header_size}")
        return bytes(out) + bytes(self.header_size - len(out))

    # --- the write hook ------------------------------------------------------------------

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
        """The shard ``views`` (laid end to end) in dual-access layout, as views (no copy of
        the tiles).

        zarr's layout (tiles from offset 0): the header is prepended and the index shifted.
        Tiles already clear of the header (a dual-access shard, maybe with a stale header):
        the header is rebuilt in place. A shard already right comes back unchanged, so
        applying this twice equals applying it once. A value that is no shard of this array
        is refused (WriteRefusedError) before anything is written.
        """
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
        # zarr's layout: tiles from offset 0. Move them behind the header.
        shifted = index.copy()
        shifted[present] += np.array([header_size, 0], dtype=np.uint64)
        fill_at = header_size + data_end
        return [
            memoryview(self.header(coords, shifted, fill_at if fill else None)),
            *slice_views(views, 0, data_end),
            *([memoryview(fill)] if fill else []),
            memoryview(self._encode_index(shifted)),
        ]

    def shard_bytes_with_header(self, coords: Sequence[int], value: bytes) -> bytes:
        """:meth:`shard_with_header` for one bytes value."""
        return b"".join(self.shard_with_header(coords, [memoryview(value)]))


def _value_bytes(typ: int, values: Any, order: str) -> bytes:
    if typ == _ASCII:
        return bytes(values)
    return struct.pack(f"{order}{len(values)}{_TYPE_CODES[typ]}", *values)


def _ifd_length(entries: list[tuple[int, int, Any]], flavour: _Flavour) -> int:
    length = flavour.count_field + len(entries) * flavour.entry + flavour.inline
    for typ, values in ((t, v) for _, t, v in entries):
        nbytes = _TYPE_SIZES[typ] * len(values)
        if nbytes > flavour.inline:
            length += _pad_even(nbytes)
    return length


def _write_ifd(
    out: bytearray,
    entries: list[tuple[int, int, Any]],
    flavour: _Flavour,
    order: str,
    *,
    last: bool,
) -> None:
    """Append one IFD (entries, next-IFD pointer, then out-of-line values) to ``out``."""
    start = len(out)
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
    next_ifd = 0 if last else values_at + len(spill)
    table += struct.pack(order + offset_code, next_ifd)
    out += table + spill


# --- recognising a dual-access array ---------------------------------------------------------


def _only(items: list[Any], what: str) -> Any:
    if len(items) != 1:
        raise ConfigurationError(f"{what}: expected exactly one, found {len(items)}")
    return items[0]


def _named(codec: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(codec, str):
        return codec, {}
    return codec.get("name", ""), codec.get("configuration") or {}


def _sharding(metadata: dict[str, Any]) -> dict[str, Any]:
    codecs = [_named(c) for c in metadata.get("codecs", [])]
    if [name for name, _ in codecs] != ["sharding_indexed"]:
        raise ConfigurationError(
            f"its codecs are {[n for n, _ in codecs]}, not one sharding_indexed codec"
        )
    config = codecs[0][1]
    if config.get("index_location", "end") != "end":
        raise ConfigurationError("its shard index is at the start; TIFF needs it at the end")
    index_codecs = [_named(c) for c in config.get("index_codecs", [])]
    if [n for n, _ in index_codecs] != ["bytes", "crc32c"] or index_codecs[0][1].get(
        "endian", "little"
    ) != "little":
        raise ConfigurationError(
            "its shard index codecs are not [bytes (little endian), crc32c], zarr's default"
        )
    return config


def _inner_codecs(config: dict[str, Any], dtype: np.dtype) -> tuple[Literal["<", ">"], bool]:
    """Byte order and whether tiles are zstd frames; refuses codecs TIFF readers cannot undo."""
    inner = [_named(c) for c in config.get("codecs", [])]
    names = [n for n, _ in inner]
    if names not in (["bytes"], ["bytes", "zstd"]):
        raise ConfigurationError(
            f"its inner codecs are {names}; TIFF readers decode only [bytes] (uncompressed) "
            "and [bytes, zstd]"
        )
    endian = inner[0][1].get("endian", "little")
    return ("<" if endian == "little" or dtype.itemsize == 1 else ">"), len(names) == 2


def _header_part(metadata: dict[str, Any], layout: TiffShardLayout) -> bool:
    """Which of the two parts layouts the array uses (header in its own part or not);
    ConfigurationError for any other."""
    transformers = metadata.get("storage_transformers") or []
    entry = _only([t for t in transformers if t.get("name") == "concat-parts"], "concat-parts")
    parts = entry.get("configuration", {}).get("parts", [])
    got = [(p.get("key_suffix"), p.get("size")) for p in parts]
    known = {}
    for header_part in (False, True):
        want = dataclasses.replace(layout, header_part=header_part).parts
        known[header_part] = [(p["key_suffix"], p.get("size")) for p in want]
        if got == known[header_part]:
            return header_part
    raise ConfigurationError(
        f"its concat-parts parts are {got}, not {known[False]} or {known[True]}"
    )


def _check_suffix(metadata: dict[str, Any]) -> None:
    name, config = _named(metadata.get("chunk_key_encoding", "default"))
    suffix = config.get("suffix", "") if name == "suffix" else ""
    if not suffix.lower().endswith(TIFF_SUFFIXES):
        raise ConfigurationError(
            "its chunk keys do not end in .tif or .tiff (chunk_key_encoding 'suffix')"
        )


def check_geometry(layout: TiffShardLayout) -> None:
    """ConfigurationError unless TIFF can hold this geometry and data type."""
    ndim = len(layout.shape)
    need = 3 if layout.samples else 2
    if ndim < need:
        raise ConfigurationError(f"it has {ndim} dimensions; TIFF images need at least {need}")
    if layout.dtype.kind not in _SAMPLE_FORMATS:
        raise ConfigurationError(f"its data type {layout.dtype} has no TIFF sample format")
    nlead = layout._nlead
    if any(t != 1 for t in layout.tile_shape[:nlead]):
        raise ConfigurationError(
            f"its inner chunks {list(layout.tile_shape)} are not 1 along the leading axes "
            "(each TIFF tile is one 2-D plane)"
        )
    for axis in (nlead, nlead + 1):
        if layout.tile_shape[axis] % TILE_MULTIPLE:
            raise ConfigurationError(
                f"its inner chunks {list(layout.tile_shape)}: TIFF tile sides must be "
                f"multiples of {TILE_MULTIPLE}"
            )
    if layout.samples and not (
        layout.tile_shape[-1] == layout.shard_shape[-1] == layout.shape[-1]
    ):
        raise ConfigurationError("its samples axis is split over inner chunks or shards")


def tiff_layout(metadata: dict[str, Any]) -> TiffShardLayout:
    """The TIFF layout of a dual-access array's ``zarr.json``; ConfigurationError saying why
    the array is not dual-access otherwise."""
    if metadata.get("node_type") != "array":
        raise ConfigurationError("it is not an array")
    declared = (metadata.get("attributes") or {}).get(ATTRIBUTE)
    if not isinstance(declared, dict):
        raise ConfigurationError(f"it has no {ATTRIBUTE!r} attribute")
    _check_suffix(metadata)
    config = _sharding(metadata)
    grid = metadata.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
    try:
        dtype = np.dtype(metadata.get("data_type"))
    except TypeError as e:
        raise ConfigurationError(f"its data type {metadata.get('data_type')!r}: {e}") from e
    if metadata.get("fill_value") not in (0, 0.0, False, "0"):
        raise ConfigurationError(
            f"its fill value is {metadata.get('fill_value')!r}; TIFF readers show missing "
            "tiles as 0"
        )
    byteorder, zstd = _inner_codecs(config, dtype)
    layout = TiffShardLayout(
        shape=tuple(metadata["shape"]),
        shard_shape=tuple(grid),
        tile_shape=tuple(config["chunk_shape"]),
        dtype=dtype.newbyteorder(byteorder),
        byteorder=byteorder,
        zstd=zstd,
        samples=bool(declared.get("samples", False)),
        bigtiff=bool(declared.get("bigtiff", False)),
    )
    check_geometry(layout)
    return dataclasses.replace(layout, header_part=_header_part(metadata, layout))


def layout_for(metadata: dict[str, Any]) -> TiffShardLayout | None:
    """The layout if the array is dual-access, else None (the writes then need no header)."""
    try:
        return tiff_layout(metadata)
    except (ConfigurationError, KeyError, TypeError, ValueError, AttributeError):
        return None


def bigtiff_needed(layout: TiffShardLayout, threshold: int = CLASSIC_LIMIT) -> bool:
    """Whether the largest possible shard of ``layout`` (as classic TIFF) can exceed
    ``threshold`` bytes: every tile stored, zstd's worst-case expansion included."""
    tile = math.prod(layout.tile_shape) * layout.dtype.itemsize
    bound = tile + (tile >> 8) + 1024 if layout.zstd else tile  # ZSTD_compressBound, rounded up
    classic = dataclasses.replace(layout, bigtiff=False)
    largest = classic.header_size + math.prod(layout.chunks_per_shard) * bound
    return largest + classic.index_size > threshold


# Shards of dual-access arrays get their TIFF header whenever the concat-parts store writes them.
register_chunk_finisher(layout_for)
