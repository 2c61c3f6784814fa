"""Where a shard keeps its inner chunks, so a reader asks for just their bytes.

zarr-python reads a shard's index on every call and asks for each inner chunk's range on
its own (3.4 merges near ones); a reader that keeps the index needs it once per shard and
merges the ranges it wants into few requests. The pure part of that: the index's place and
size, its decoding through the array's index codecs (checksum checked), the inner chunks'
ranges, bounded so a hostile index cannot make a reader allocate more than they could hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr
from zarr.codecs import ShardingCodec

from zarrfuse.api.chunk_decoding import SyncChunkDecoder
from zarrfuse.api.decode_bounds import SLACK, decoded_bound
from zarrfuse.errors import CorruptChunk
from zarrfuse.zarr_compat import (
    ArrayV3Metadata,
    array_config,
    chunk_spec,
    default_buffer_prototype,
    shard_geometry,
)

__all__ = ["ByteRun", "ShardGeometry", "merge_ranges"]

EMPTY = np.iinfo(np.uint64).max
"""An index entry of an inner chunk that is not stored (offset and length both)."""

MERGE_GAP = 1 << 20
"""Ranges this close are read in one request: a round trip costs more than 1 MiB on any
network a remote store sits behind (obstore's ``get_ranges`` merges at the same gap)."""


@dataclass(frozen=True)
class ByteRun:
    """One request's byte range of a shard, and the inner chunks' ranges it holds."""

    start: int
    stop: int
    members: tuple[tuple[int, int, int], ...]
    """(flat inner index, start, stop) of each inner chunk in it, absolute in the shard."""


def merge_ranges(ranges: Sequence[tuple[int, int, int]], gap: int = MERGE_GAP) -> list[ByteRun]:
    """``ranges`` ((inner index, start, stop)) merged where they overlap or lie at most
    ``gap`` bytes apart, in byte order."""
    runs: list[ByteRun] = []
    members: list[tuple[int, int, int]] = []
    start = stop = 0
    for entry in sorted(ranges, key=lambda r: (r[1], r[2])):
        if members and entry[1] <= stop + gap:
            members.append(entry)
            stop = max(stop, entry[2])
            continue
        if members:
            runs.append(ByteRun(start, stop, tuple(members)))
        members, start, stop = [entry], entry[1], entry[2]
    if members:
        runs.append(ByteRun(start, stop, tuple(members)))
    return runs


class ShardGeometry:
    """One sharded array's shards: inner chunks per shard, the index, the inner decoder."""

    def __init__(self, sharding: ShardingCodec, inner: SyncChunkDecoder,
                 index: SyncChunkDecoder, geometry: tuple[Any, ...]) -> None:
        per_shard, inner_spec, _, index_size = geometry
        self.per_shard: tuple[int, ...] = per_shard
        self.count = int(np.prod(per_shard, dtype=np.int64))
        self.index_size = index_size
        location = getattr(sharding.index_location, "value", sharding.index_location)
        self.index_at_end = str(location) == "end"
        self.inner = inner
        self._index = index
        native = inner_spec.dtype.to_native_dtype()
        self.max_inner_bytes = 2 * int(np.prod(inner.chunk_shape, dtype=np.int64)) * int(
            native.itemsize) + SLACK
        """The most stored bytes an inner chunk may have: twice its decoded size (no codec
        grows data that much); an index naming more is corrupt, never a reason to allocate."""

    @classmethod
    def for_array(cls, array: zarr.Array) -> ShardGeometry | None:
        """The geometry of ``array``'s shards; None where zarr must read them: an array not
        sharded, with codecs around the sharding codec, nested shards, items of no fixed
        size, or a codec without a synchronous decoder."""
        metadata = array.metadata
        if not isinstance(metadata, ArrayV3Metadata) or array.shards is None:
            return None
        codecs = list(metadata.codecs)
        if len(codecs) != 1 or not isinstance(codecs[0], ShardingCodec):
            return None
        sharding = codecs[0]
        if any(isinstance(c, ShardingCodec) for c in sharding.codecs):
            return None
        if decoded_bound((), metadata.data_type.to_native_dtype()) is None:
            return None  # items of no fixed size
        prototype = default_buffer_prototype()
        shard_spec = chunk_spec(metadata, array_config(array), prototype)
        geometry = shard_geometry(sharding, shard_spec)
        inner = SyncChunkDecoder.for_codecs(sharding.codecs, geometry[1], prototype)
        index = SyncChunkDecoder.for_codecs(sharding.index_codecs, geometry[2], prototype)
        if inner is None or index is None:
            return None
        return cls(sharding, inner, index, geometry)

    def index_from_shard(self, shard: bytes) -> np.ndarray:
        """The index of a whole shard's bytes (see :meth:`parse_index`)."""
        if len(shard) < self.index_size:
            raise CorruptChunk(f"{len(shard)} bytes, less than its index's {self.index_size}")
        at = len(shard) - self.index_size if self.index_at_end else 0
        return self.parse_index(shard[at : at + self.index_size], len(shard))

    def parse_index(self, data: bytes, shard_size: int | None = None) -> np.ndarray:
        """The index's (offset, length) of each inner chunk, flat in C order, shape
        (count, 2); EMPTY rows for chunks not stored. CorruptChunk if it does not decode
        (its checksum), or names a chunk longer than one can be, or past the shard's end
        where that is known."""
        if len(data) != self.index_size:
            raise CorruptChunk(f"shard index of {len(data)} bytes, not {self.index_size}")
        try:
            table = self._index.decode(data).reshape(self.count, 2).astype(np.uint64)
        except Exception as e:  # noqa: BLE001  (its checksum, or its codecs' own error)
            raise CorruptChunk(f"shard index does not decode: {type(e).__name__}: {e}") from None
        stored = table[:, 0] != EMPTY
        lengths = table[stored, 1]
        if np.any(lengths > self.max_inner_bytes):
            raise CorruptChunk(f"shard index names an inner chunk of {int(lengths.max())} "
                               f"bytes, over the {self.max_inner_bytes} one can hold")
        offsets = table[stored, 0]
        if shard_size is not None and (
            np.any(offsets > shard_size) or np.any(offsets + lengths > shard_size)
        ):
            raise CorruptChunk(f"shard index names bytes past the shard's end ({shard_size})")
        return table

    def flat(self, local: Sequence[int]) -> int:
        """The index row of the inner chunk at ``local`` (coordinates within its shard)."""
        return int(np.ravel_multi_index(tuple(local), self.per_shard))

    def stored_rows(self, table: np.ndarray) -> set[int]:
        """The index rows of the inner chunks that are stored."""
        return {int(row) for row in np.flatnonzero(table[:, 0] != EMPTY)}

    def ranges(self, table: np.ndarray, rows: Sequence[int]) -> list[tuple[int, int, int]]:
        """(row, start, stop) of each stored inner chunk among ``rows``."""
        out = []
        for row in rows:
            offset, length = table[row]
            if offset != EMPTY:
                out.append((row, int(offset), int(offset) + int(length)))
        return out
