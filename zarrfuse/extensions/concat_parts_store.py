"""The ``concat-parts`` storage transformer as a zarr ``WrapperStore``.

One wrapper serves one array. Under that array, every key except ``zarr.json`` is a chunk key:
reads assemble the chunk from its parts (``key + key_suffix``, in order), writes split it back,
deletes remove every part, and listings show logical chunk keys only. The array's ``zarr.json``
is served without ``storage_transformers`` (zarr-python refuses arrays that have them, and the
wrapper has already applied it) and written back with them. Keys outside the array pass through.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Protocol

from zarr.abc.store import ByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.core.chunk_key_encodings import ChunkKeyEncoding
from zarr.storage import WrapperStore

from zarrfuse.errors import ChunkKeyError, PartsError
from zarrfuse.extensions.byte_ranges import absolute_span, pieces_for_span
from zarrfuse.extensions.chunk_keys import decode_chunk_key, parse_encoding
from zarrfuse.extensions.transformers import ConcatParts

__all__ = ["ChunkFinisher", "ConcatPartsStore", "register_chunk_finisher"]

_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


class ChunkFinisher(Protocol):
    """Completes a chunk value before its parts are stored (a dual-access array's shard
    gets its TIFF header, which zarr does not write)."""

    def shard_bytes_with_header(self, coords: Sequence[int], value: bytes) -> bytes: ...


_FINISHERS: list[Callable[[dict[str, Any]], ChunkFinisher | None]] = []


def register_chunk_finisher(finisher_for: Callable[[dict[str, Any]], ChunkFinisher | None]) -> None:
    """Let a layer built on this one (``zarrfuse.tiff``) finish the chunks of the arrays it
    recognises: ``finisher_for(metadata)`` returns a finisher, or None for other arrays.

    The extensions stay free of what builds on them; ``import zarrfuse`` registers the TIFF
    finisher, so every user of the package gets it.
    """
    if finisher_for not in _FINISHERS:
        _FINISHERS.append(finisher_for)


def _finisher_for(metadata: dict[str, Any]) -> ChunkFinisher | None:
    for finisher_for in _FINISHERS:
        finisher = finisher_for(metadata)
        if finisher is not None:
            return finisher
    return None


class ConcatPartsStore(WrapperStore[Store]):
    """Applies a ``concat-parts`` configuration to the chunks of the array at ``array_path``."""

    def __init__(
        self,
        store: Store,
        *,
        array_path: str,
        parts: ConcatParts,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(store)
        self.parts = parts
        self.array_path = array_path.strip("/")
        self._prefix = f"{self.array_path}/" if self.array_path else ""
        self._metadata_key = f"{self._prefix}zarr.json"
        self._encoding: ChunkKeyEncoding | None = None
        self._ndim: int | None = None
        self._finisher: ChunkFinisher | None = None
        # Longest suffix first, so ".tiff.header" is tried before ".header" and "" comes last.
        self._suffixes_for_listing = sorted(
            {p.key_suffix for p in parts.parts}, key=len, reverse=True
        )
        if metadata is not None:
            self._learn_metadata(metadata)

    def _with_store(self, store: Store) -> ConcatPartsStore:
        clone = type(self)(store, array_path=self.array_path, parts=self.parts)
        clone._encoding, clone._ndim = self._encoding, self._ndim
        clone._finisher = self._finisher
        return clone

    def __repr__(self) -> str:
        return f"ConcatPartsStore({self._store!r}, array_path={self.array_path!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ConcatPartsStore)
            and self._store == other._store
            and self.array_path == other.array_path
            and self.parts == other.parts
        )

    # --- which keys are what -------------------------------------------------------------

    def _learn_metadata(self, metadata: dict[str, Any]) -> None:
        """Learn keys and layout from the array's stored ``zarr.json`` (with transformers)."""
        self._encoding = parse_encoding(metadata.get("chunk_key_encoding", "default"))
        self._ndim = len(metadata.get("shape", ()))
        self._finisher = _finisher_for(metadata)

    def _is_chunk_key(self, key: str) -> bool:
        if not key.startswith(self._prefix):
            return False
        relative = key[len(self._prefix) :]
        return relative != "" and relative not in _METADATA_NAMES

    def part_keys(self, chunk_key: str) -> list[str]:
        """The store keys of a chunk's parts, in concatenation order."""
        return [chunk_key + p.key_suffix for p in self.parts.parts]

    async def _ensure_encoding(self) -> ChunkKeyEncoding:
        if self._encoding is None:
            raw = await self._store.get(self._metadata_key, default_buffer_prototype())
            if raw is None:
                raise PartsError(f"no array metadata at {self._metadata_key!r}")
            self._learn_metadata(json.loads(raw.to_bytes()))
        assert self._encoding is not None
        return self._encoding

    def _logical_key(self, encoding: ChunkKeyEncoding, key: str) -> str | None:
        """The chunk key a stored key is a part of; the key itself outside the array; else None."""
        if not key.startswith(self._prefix):
            return key
        relative = key[len(self._prefix) :]
        if relative in _METADATA_NAMES:
            return key
        for suffix in self._suffixes_for_listing:
            if suffix and not relative.endswith(suffix):
                continue
            candidate = relative[: len(relative) - len(suffix)] if suffix else relative
            try:
                decode_chunk_key(encoding, candidate, self._ndim)
            except ChunkKeyError:
                continue
            return self._prefix + candidate
        return None  # stray keys, temp files: not part of the array

    # --- metadata: hide the transformer from zarr, restore it on write -------------------

    async def _get_metadata(
        self, prototype: BufferPrototype, byte_range: ByteRequest | None
    ) -> Buffer | None:
        raw = await self._store.get(self._metadata_key, prototype)
        if raw is None:
            return None
        document = json.loads(raw.to_bytes())
        if isinstance(document, dict):
            if document.get("node_type") == "array":
                self._learn_metadata(document)
            document.pop("storage_transformers", None)
        data = json.dumps(document, indent=2).encode()
        start, stop = absolute_span(byte_range, len(data))
        return prototype.buffer.from_bytes(data[start:stop])

    def _metadata_with_transformer(self, value: Buffer) -> Buffer:
        document = json.loads(value.to_bytes())
        if isinstance(document, dict) and document.get("node_type") == "array":
            document["storage_transformers"] = [self.parts.to_json()]
            self._learn_metadata(document)
        return value.from_bytes(json.dumps(document, indent=2).encode())

    # --- reading -------------------------------------------------------------------------

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
        """Serve requests that fall in one region of known layout without asking for sizes.

        The layout is only partly known without a size request: the sized parts before the
        single unsized part have known offsets from the start, those after it from the end.
        Returns None when the request needs the full layout.
        """
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

    async def get(
        self,
        key: str,
        prototype: BufferPrototype,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        # docstring inherited
        if key == self._metadata_key:
            return await self._get_metadata(prototype, byte_range)
        if self._is_chunk_key(key):
            return await self._get_chunk(key, prototype, byte_range)
        return await self._store.get(key, prototype, byte_range)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        # docstring inherited
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        # docstring inherited
        if self._is_chunk_key(key):
            found = await asyncio.gather(*(self._store.exists(k) for k in self.part_keys(key)))
            return any(found)
        return await self._store.exists(key)

    async def getsize(self, key: str) -> int:
        # docstring inherited
        if not self._is_chunk_key(key):
            return await self._store.getsize(key)
        keys = self.part_keys(key)
        try:
            sizes = await asyncio.gather(*(self._store.getsize(k) for k in keys))
        except FileNotFoundError:
            await self._missing_or_error(key, keys)
            raise
        self.parts.checked_sizes(key, keys, sizes)
        return sum(sizes)

    # --- writing -------------------------------------------------------------------------

    async def set(self, key: str, value: Buffer) -> None:
        # docstring inherited
        self._check_writable()
        if key == self._metadata_key:
            await self._store.set(key, self._metadata_with_transformer(value))
        elif self._is_chunk_key(key):
            value = await self._finished(key, value)
            spans = self.parts.split(len(value))  # refuses before anything is written
            keys = self.part_keys(key)
            await asyncio.gather(
                *(self._store.set(k, value[a:b]) for k, (a, b) in zip(keys, spans, strict=True))
            )
        else:
            await self._store.set(key, value)

    async def _finished(self, key: str, value: Buffer) -> Buffer:
        """The value as stored: completed by the array's finisher, if it has one."""
        await self._ensure_encoding()
        if self._finisher is None:
            return value
        assert self._encoding is not None
        coords = decode_chunk_key(self._encoding, key[len(self._prefix) :], self._ndim)
        return value.from_bytes(self._finisher.shard_bytes_with_header(coords, value.to_bytes()))

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        # docstring inherited
        if not await self.exists(key):
            await self.set(key, value)

    async def _set_many(self, values: Iterable[tuple[str, Buffer]]) -> None:
        await asyncio.gather(*(self.set(k, v) for k, v in values))

    async def delete(self, key: str) -> None:
        # docstring inherited
        self._check_writable()
        if self._is_chunk_key(key):
            await asyncio.gather(*(self._store.delete(k) for k in self.part_keys(key)))
        else:
            await self._store.delete(key)

    # --- listing -------------------------------------------------------------------------

    async def _logical(self, keys: AsyncIterator[str]) -> AsyncIterator[str]:
        encoding = await self._ensure_encoding()
        seen: set[str] = set()
        async for key in keys:
            logical = self._logical_key(encoding, key)
            if logical is None or logical in seen:
                continue
            if logical != key or self._is_chunk_key(logical):
                seen.add(logical)
            yield logical

    def list(self) -> AsyncIterator[str]:
        # docstring inherited
        return self._logical(self._store.list())

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        return self._logical(self._store.list_prefix(prefix))

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        if not (prefix.startswith(self._prefix) or not self._prefix):
            async for name in self._store.list_dir(prefix):
                yield name
            return
        # Inside the array: derive the children from logical keys, so parts never show.
        children: set[str] = set()
        async for key in self.list_prefix(prefix):
            child = key[len(prefix) :].split("/", 1)[0]
            if child and child not in children:
                children.add(child)
                yield child
