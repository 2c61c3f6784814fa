"""Instrumented wrappers around real zarr stores, for asserting what reaches the store."""

from __future__ import annotations

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import WrapperStore


class CountingStore(WrapperStore):
    """Counts ``get`` requests and the bytes they return, per key."""

    def __init__(self, store):
        super().__init__(store)
        self.requests: list[tuple[str, ByteRequest | None, int]] = []

    def _with_store(self, store):
        return type(self)(store)

    async def get(self, key: str, prototype: BufferPrototype, byte_range=None) -> Buffer | None:
        buf = await self._store.get(key, prototype, byte_range)
        self.requests.append((key, byte_range, 0 if buf is None else len(buf)))
        return buf

    def chunk_bytes(self) -> int:
        """Bytes fetched for anything but metadata documents."""
        return sum(n for key, _, n in self.requests if not key.endswith("zarr.json"))


class ObjectStoreLike(WrapperStore):
    """Refuses out-of-range byte requests, as object stores do (HTTP 416).

    Local stores answer such requests with short or empty bytes; this wrapper lets a test
    prove that the concat-parts store never sends one.
    """

    def _with_store(self, store):
        return type(self)(store)

    async def get(self, key: str, prototype: BufferPrototype, byte_range=None) -> Buffer | None:
        if byte_range is not None and await self._store.exists(key):
            size = await self._store.getsize(key)
            if isinstance(byte_range, RangeByteRequest):
                bad = byte_range.start >= size or byte_range.end <= byte_range.start
            elif isinstance(byte_range, OffsetByteRequest):
                bad = byte_range.offset >= size
            else:
                assert isinstance(byte_range, SuffixByteRequest)
                bad = byte_range.suffix > size or byte_range.suffix <= 0
            if bad:
                raise ValueError(f"416 Range Not Satisfiable: {key} {byte_range} size {size}")
        return await self._store.get(key, prototype, byte_range)
