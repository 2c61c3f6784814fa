"""Reading a chunk of a ``concat-parts`` array from its parts: whole, a byte range, sizes.

The read half of :class:`~zarrfuse.extensions.concat_parts_store.ConcatPartsStore`, kept as
a base class of it so the store's ``get`` and ``getsize`` call these as its own methods. The
parts' sizes are checked against the configuration on every path; a range that falls in a
part of known offset is served without asking the store for sizes first.
"""

from __future__ import annotations

import asyncio

from zarr.abc.store import ByteRequest, RangeByteRequest, Store, SuffixByteRequest

from zarrfuse.errors import PartsError
from zarrfuse.extensions.byte_ranges import absolute_span, pieces_for_span
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.zarr_compat import Buffer, BufferPrototype

__all__ = ["ConcatPartsReads"]


class ConcatPartsReads:
    """Chunk reads through ``_store`` under the configuration ``parts`` (set by the store)."""

    _store: Store
    parts: ConcatParts

    def part_keys(self, chunk_key: str) -> list[str]:
        """The store keys of a chunk's parts, in concatenation order."""
        return [chunk_key + p.key_suffix for p in self.parts.parts]

    async def _missing_or_error(self, chunk_key: str, keys: list[str]) -> None:
        """Called when a needed part is absent: None if the whole chunk is absent, else raise."""
        present = await asyncio.gather(*(self._store.exists(k) for k in keys))
        # Only presence is known here: present parts count as their configured size.
        self.parts.checked_sizes(
            chunk_key,
            keys,
            [
                (p.size or 0) if there else None
                for p, there in zip(self.parts.parts, present, strict=True)
            ],
        )

    def _check_sized(self, chunk_key: str, key: str, expected: int | None, got: int) -> None:
        if expected is not None and got != expected:
            raise PartsError(
                f"chunk {chunk_key!r}: part {key!r} has {got} bytes where {expected} are expected"
            )

    async def _get_whole(self, chunk_key: str, prototype: BufferPrototype) -> Buffer | None:
        keys = self.part_keys(chunk_key)
        buffers = await asyncio.gather(*(self._store.get(k, prototype) for k in keys))
        sizes = [None if b is None else len(b) for b in buffers]
        if self.parts.checked_sizes(chunk_key, keys, sizes) is None:
            return None
        return prototype.buffer.from_bytes(b"".join(b.to_bytes() for b in buffers if b))

    async def part_sizes(self, chunk_key: str) -> tuple[int, ...] | None:
        """Every part's size, asking the store only for unsized parts; None if chunk absent."""
        keys = self.part_keys(chunk_key)
        unsized = [k for k, p in zip(keys, self.parts.parts, strict=True) if p.size is None]
        try:
            sizes = await asyncio.gather(*(self._store.getsize(k) for k in unsized))
            found = dict(zip(unsized, sizes, strict=True))
        except FileNotFoundError:
            await self._missing_or_error(chunk_key, keys)
            return None
        return tuple(
            found[k] if p.size is None else p.size
            for k, p in zip(keys, self.parts.parts, strict=True)
        )

    async def _read_pieces(
        self,
        chunk_key: str,
        sizes: tuple[int, ...],
        start: int,
        stop: int,
        prototype: BufferPrototype,
    ) -> Buffer | None:
        keys = self.part_keys(chunk_key)
        pieces = pieces_for_span(sizes, start, stop)
        if not pieces:
            return prototype.buffer.from_bytes(b"")

        async def fetch(piece_part: int, lo: int, hi: int) -> Buffer | None:
            whole = lo == 0 and hi == sizes[piece_part]
            request = None if whole else RangeByteRequest(lo, hi)
            return await self._store.get(keys[piece_part], prototype, request)

        buffers = await asyncio.gather(*(fetch(*p) for p in pieces))
        for piece, buf in zip(pieces, buffers, strict=True):
            if buf is None:
                await self._missing_or_error(chunk_key, keys)
                return None
            self._check_sized(chunk_key, keys[piece.part], piece.stop - piece.start, len(buf))
        return prototype.buffer.from_bytes(b"".join(b.to_bytes() for b in buffers if b))

    async def _get_fast(
        self, chunk_key: str, prototype: BufferPrototype, byte_range: ByteRequest
    ) -> Buffer | None:
        """Serve requests that fall where the parts' offsets are known without asking for
        sizes: the sized parts before the single unsized part have known offsets from the
        start, those after it from the end. None when the request needs every part's size."""
        sizes = self.parts.sizes
        if sizes.count(None) != 1:
            return None
        unsized = sizes.index(None)
        head = sum(s for s in sizes[:unsized] if s is not None)
        tail = sum(s for s in sizes[unsized + 1 :] if s is not None)
        keys = self.part_keys(chunk_key)
        if isinstance(byte_range, SuffixByteRequest) and 0 < byte_range.suffix <= tail:
            # Entirely in the trailing sized parts: offsets from the end are known.
            tail_sizes = [s for s in sizes[unsized + 1 :] if s is not None]
            start = tail - byte_range.suffix
            head_sizes = (0,) * (unsized + 1)
            return await self._read_pieces(
                chunk_key, (*head_sizes, *tail_sizes), start, tail, prototype
            )
        if isinstance(byte_range, RangeByteRequest) and byte_range.end > byte_range.start:
            if byte_range.end <= head:
                known = tuple(s or 0 for s in sizes[:unsized])
                return await self._read_pieces(
                    chunk_key, known, byte_range.start, byte_range.end, prototype
                )
            if byte_range.start >= head:
                # Optimistic: a full answer from the unsized part proves the range lies in it.
                request = RangeByteRequest(byte_range.start - head, byte_range.end - head)
                try:
                    buf = await self._store.get(keys[unsized], prototype, request)
                except (OSError, ValueError):
                    return None  # e.g. an object store refusing a range past the end
                if buf is not None and len(buf) == byte_range.end - byte_range.start:
                    return buf
        return None

    async def _get_chunk(
        self, chunk_key: str, prototype: BufferPrototype, byte_range: ByteRequest | None
    ) -> Buffer | None:
        if byte_range is None:
            return await self._get_whole(chunk_key, prototype)
        fast = await self._get_fast(chunk_key, prototype, byte_range)
        if fast is not None:
            return fast
        sizes = await self.part_sizes(chunk_key)
        if sizes is None:
            return None
        start, stop = absolute_span(byte_range, sum(sizes))
        return await self._read_pieces(chunk_key, sizes, start, stop, prototype)
