"""The ``concat-parts`` storage transformer as a zarr store over another.

One store serves one array. Under it, every key but the metadata documents is a chunk key:
reads join the chunk's parts (``key + key_suffix``, in order; sizes checked on every read,
a range in a part of known offset served without asking for sizes), writes split it (after
its finisher, ``chunk_finishers``), deletes remove every part, listings show chunk keys
only. ``zarr.json`` is served without ``storage_transformers`` (zarr-python refuses them;
they are applied here) and written back with them. Keys outside the array pass through.

It derives from zarr's ``Store``, not ``WrapperStore``, which forwards what it does not
override to the inner store: each zarr release adds methods that read or write chunks (3.3:
``get_ranges``, ``*_sync``), which would bypass the parts. Every method is written here or
is a ``Store`` default that goes through this class's own ``get``, ``set``, ``delete`` and
listings; no sync I/O, so zarr takes the async path
(``tests/extensions/test_concat_parts_store_api.py`` checks every name).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from zarr.abc.store import ByteRequest, RangeByteRequest, Store, SuffixByteRequest

from zarrfuse.errors import ChunkKeyError, PartsError
from zarrfuse.extensions.byte_ranges import absolute_span, pieces_for_span
from zarrfuse.extensions.chunk_finishers import ChunkFinisher, chunk_finisher_for
from zarrfuse.extensions.chunk_keys import decode_chunk_key, parse_encoding
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.zarr_compat import Buffer, BufferPrototype, ChunkKeyEncoding, default_buffer_prototype

__all__ = ["ConcatPartsStore"]

_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


def _json_object(data: bytes) -> dict[str, Any] | None:
    """The document if ``data`` is a JSON object; else None, and the bytes pass unchanged
    (zarr reports a malformed document itself, with its key)."""
    try:
        document = json.loads(data)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


class ConcatPartsStore(Store):
    """Applies a ``concat-parts`` configuration to the chunks of the array at ``array_path``.

    ``read_only``, when given, opens ``store`` with that mode (``Store.with_read_only``);
    otherwise the wrapper has the inner store's mode.
    """

    def __init__(self, store: Store, *, array_path: str, parts: ConcatParts,
                 metadata: dict[str, Any] | None = None, read_only: bool | None = None) -> None:
        # Store.__init__ is not called: mode and open state are the inner store's.
        if read_only is not None and read_only != store.read_only:
            store = store.with_read_only(read_only)
        self._store = store
        self.parts = parts
        self.array_path = array_path.strip("/")
        self._prefix = f"{self.array_path}/" if self.array_path else ""
        self._metadata_key = f"{self._prefix}zarr.json"
        self._encoding: ChunkKeyEncoding | None = None
        self._ndim: int | None = None
        self._finisher: ChunkFinisher | None = None
        # Longest suffix first, so ".tiff.header" is tried before ".header" and "" comes last.
        self._suffixes_for_listing = sorted({p.key_suffix for p in parts.parts}, key=len,
                                            reverse=True)
        if metadata is not None:
            self._learn_metadata(metadata)

    def _with_store(self, store: Store) -> ConcatPartsStore:
        """The same transformer over another store (what ``WrapperStore`` calls it)."""
        clone = type(self)(store, array_path=self.array_path, parts=self.parts)
        clone._encoding, clone._ndim = self._encoding, self._ndim
        clone._finisher = self._finisher
        return clone

    def __repr__(self) -> str:
        return f"ConcatPartsStore({self._store!r}, array_path={self.array_path!r})"

    def __str__(self) -> str:
        return f"concat-parts({self._store})"

    # --- the store's mode and life: the inner store's ------------------------------------

    @property
    def read_only(self) -> bool:
        return self._store.read_only

    @property
    def _is_open(self) -> bool:
        return self._store._is_open

    @_is_open.setter
    def _is_open(self, value: bool) -> None:
        raise NotImplementedError("ConcatPartsStore is opened through its inner store")

    def _check_writable(self) -> None:
        self._store._check_writable()

    def with_read_only(self, read_only: bool = False) -> ConcatPartsStore:
        return self._with_store(self._store.with_read_only(read_only))

    async def _open(self) -> None:
        await self._store._open()

    async def _ensure_open(self) -> None:
        await self._store._ensure_open()

    def close(self) -> None:
        self._store.close()

    @property
    def supports_writes(self) -> bool:
        return self._store.supports_writes

    @property
    def supports_deletes(self) -> bool:
        return self._store.supports_deletes

    @property
    def supports_listing(self) -> bool:
        return self._store.supports_listing

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ConcatPartsStore)
            and self._store == other._store
            and self.array_path == other.array_path
            and self.parts == other.parts
        )

    # --- which keys are what -------------------------------------------------------------

    def _learn_metadata(self, metadata: dict[str, Any]) -> None:
        """Learn the chunk keys and finisher from the array's stored ``zarr.json``."""
        self._encoding = parse_encoding(metadata.get("chunk_key_encoding", "default"))
        self._ndim = len(metadata.get("shape", ()))
        self._finisher = chunk_finisher_for(metadata)

    def _is_chunk_key(self, key: str) -> bool:
        if not key.startswith(self._prefix):
            return False
        relative = key[len(self._prefix) :]
        return relative != "" and relative not in _METADATA_NAMES

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
        data = raw.to_bytes()
        document = _json_object(data)
        if document is not None:
            if document.get("node_type") == "array":
                self._learn_metadata(document)
            document.pop("storage_transformers", None)
            data = json.dumps(document, indent=2).encode()
        start, stop = absolute_span(byte_range, len(data))
        return prototype.buffer.from_bytes(data[start:stop])

    def _metadata_with_transformer(self, value: Buffer) -> Buffer:
        document = _json_object(value.to_bytes())
        if document is None or document.get("node_type") != "array":
            return value
        document["storage_transformers"] = [self.parts.to_json()]
        self._learn_metadata(document)
        return value.from_bytes(json.dumps(document, indent=2).encode())

    # --- reading: a chunk from its parts ------------------------------------------------

    def part_keys(self, chunk_key: str) -> list[str]:
        """The store keys of a chunk's parts, in concatenation order."""
        return [chunk_key + p.key_suffix for p in self.parts.parts]

    async def _missing_or_error(self, chunk_key: str, keys: list[str]) -> None:
        """Called when a needed part is absent: None if the whole chunk is absent, else raise."""
        present = await asyncio.gather(*(self._store.exists(k) for k in keys))
        # Only presence is known here: present parts count as their configured size.
        sizes = [(p.size or 0) if there else None
                 for p, there in zip(self.parts.parts, present, strict=True)]
        self.parts.checked_sizes(chunk_key, keys, sizes)

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
        return tuple(found[k] if p.size is None else p.size
                     for k, p in zip(keys, self.parts.parts, strict=True))

    async def _read_pieces(self, chunk_key: str, sizes: tuple[int, ...], start: int, stop: int,
                           prototype: BufferPrototype) -> Buffer | None:
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
            if len(buf) != piece.stop - piece.start:  # a part shorter than its size said
                raise PartsError(f"chunk {chunk_key!r}: part {keys[piece.part]!r} has {len(buf)} "
                                 f"bytes where {piece.stop - piece.start} are expected")
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
            return await self._read_pieces(chunk_key, (*head_sizes, *tail_sizes), start, tail,
                                           prototype)
        if isinstance(byte_range, RangeByteRequest) and byte_range.end > byte_range.start:
            if byte_range.end <= head:
                known = tuple(s or 0 for s in sizes[:unsized])
                return await self._read_pieces(chunk_key, known, byte_range.start,
                                               byte_range.end, prototype)
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

    async def get(self, key: str, prototype: BufferPrototype,
                  byte_range: ByteRequest | None = None) -> Buffer | None:
        if key == self._metadata_key:
            return await self._get_metadata(prototype, byte_range)
        if self._is_chunk_key(key):
            return await self._get_chunk(key, prototype, byte_range)
        return await self._store.get(key, prototype, byte_range)

    async def get_partial_values(self, prototype: BufferPrototype,
                                 key_ranges: Iterable[tuple[str, ByteRequest | None]]
                                 ) -> list[Buffer | None]:
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        if self._is_chunk_key(key):
            found = await asyncio.gather(*(self._store.exists(k) for k in self.part_keys(key)))
            return any(found)
        return await self._store.exists(key)

    async def getsize(self, key: str) -> int:
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
        finished = self._finisher.shard_with_header(coords, [memoryview(value.to_bytes())])
        return value.from_bytes(b"".join(finished))

    async def delete(self, key: str) -> None:
        self._check_writable()
        if self._is_chunk_key(key):
            await asyncio.gather(*(self._store.delete(k) for k in self.part_keys(key)))
        else:
            await self._store.delete(key)

    # --- whole directories: every stored key under them, parts and strays alike -----------
    # A part's key starts with its chunk's key and no key_suffix holds "/", so the stored
    # keys under "P/" are exactly the parts of the chunks under "P/" (plus strays, which a
    # directory's removal or size includes too). Needs no array metadata, so an overwrite
    # can clear an array whose zarr.json is already gone.

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await self._store.delete_dir(prefix)

    async def is_empty(self, prefix: str) -> bool:
        return await self._store.is_empty(prefix)

    async def getsize_prefix(self, prefix: str) -> int:
        return await self._store.getsize_prefix(prefix)

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
        return self._logical(self._store.list())

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        return self._logical(self._store.list_prefix(prefix))

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
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
